"""Scenarios drawn at random from a seed, each a real stack with one known limit.

Each scenario's truth — the component, the resource and the load where it starts — follows
from its parameters by a capacity model: every resource the stack depends on serves at most
so many requests per second (a pool `slots / service time`, a CPU quota `quota / CPU per
request`, the host `cores / CPU per request` whether the app or the database spends it,
a hot row `1 / lock hold time`, a proxy `limit / service time`, a link `rate / bytes per
response`), and the smallest is the
bottleneck. A draw whose two smallest capacities are too close to tell apart, or whose
knee falls outside the users stepped, is drawn again: no scenario is ambiguous by design.
In closed loop with no think time, N users keep N requests in flight, so a resource of
capacity X saturates from N = X × (time of a request at no load).

Journeys put the limit on one named request: a checkout's lock (journey), a search
PostgreSQL computes (journey_db), a login that computes in the app (journey_cpu: one
sync worker fills while a core idles, or more processes than cores fill the host).
The async classes run uvicorn alone (`--workers N`, an event loop a process) with the
lab's bare ASGI app, known by its processes: a loop whose handler waits in a synchronous
call serves one request at a time, so the loops fill once the users outnumber them
(async_blocking); a loop that computes is a core, so as many loops as cores fill the host
(asgi_cpu); a loop that awaits a call holds any number of them, and the sync service it
calls, of 1 or 2 workers, is the pool its callers queue for (async_callee_pool).

The servers most backends run, each behind nginx as its docs deploy it: PHP-FPM's static
pool of 1-4 children whose script sleeps 8-20 ms fills once the users outnumber them
(php_fpm_pool), as Tomcat 10's connector of 1-4 maxThreads does with a JSP that sleeps
(tomcat_threads); one Node.js process is one event loop, a core where its route computes
3-8 ms (its CPU) and held where it blocks 5-20 ms without computing (its event loop:
node_loop). MariaDB holds db_lock's hot row 5-15 ms a request (mariadb_lock), and
Redis runs each request's command of 3-8 ms on its one main thread, a core that fills
before gunicorn's workers and the host's cores (redis_core).

A scenario is written as users write theirs: the plan names the app server's pool size
(`workers`) in only a share of the draws, and the server reads its pool from its command
line or from a config file (gunicorn's `-c gunicorn.conf.py`, `uwsgi --ini`). The traced
class's services are known from their spans, as OpenTelemetry's instrumentations send them;
the plan gives their processes to sample in only a share of the draws.

Beside the stack, the noisy runs start a CPU hog of 1, 1.5 or 1.8 cores, drawn per
scenario. The model shares the cores fairly among the busy tasks (the hog's and the
stack's, each at most one core), as the scheduler does. Where a heavy hog leaves the
stack less CPU than its limit needs, the truth says so (`refusal_ok`): the host may be
too busy for any verdict, and one that refuses to name a limit is counted apart.
"""

from __future__ import annotations

import random
from dataclasses import replace

from pinchpoint_lab.matrix import shape_drawers as shapes
from pinchpoint_lab.matrix import stack_drawers as stack
from pinchpoint_lab.matrix.spec import (
    CLASSES,
    HOG_CORES,
    HOG_WEIGHTS,
    PLAN_WORKERS_SHARE,
    SERVER_CONFIGS,
    Spec,
)


def _named(spec: Spec, index: int) -> Spec:
    return replace(spec, name=f"{index:02d}-{spec.cls}-{spec.server}-{spec.front}")


def draw(seed: int, count: int) -> list[Spec]:
    """`count` scenarios from `seed`, the classes in turn, each drawn until unambiguous
    on a quiet host and beside its hog."""
    rng = random.Random(seed)
    specs = []
    for index in range(count):
        cls = CLASSES[index % len(CLASSES)]
        hog = rng.choices(HOG_CORES, weights=HOG_WEIGHTS)[0]
        spec = _unambiguous(cls, rng, hog)
        specs.append(_named(_as_users_write(spec, rng), index))
    return specs


def _unambiguous(cls: str, rng: random.Random, hog: float) -> Spec:
    for _ in range(1000):
        spec = DRAWERS[cls](rng, hog)
        if spec is not None:
            return replace(spec, hog_cores=hog)
    raise RuntimeError(f"no unambiguous {cls} scenario drawn")  # pragma: no cover


def _as_users_write(spec: Spec, rng: random.Random) -> Spec:
    """The plan naming the pool or not; the server's pool on its command line or in a file."""
    return replace(
        spec,
        plan_workers=rng.random() < PLAN_WORKERS_SHARE,
        server_config=rng.choice(SERVER_CONFIGS),
    )


DRAWERS = {
    "pool_wait": stack.pool_wait,
    "pool_cpu": stack.pool_cpu,
    "host_cpu": stack.host_cpu,
    "cpu_quota": stack.cpu_quota,
    "db_lock": stack.db_lock,
    "db_cpu": stack.db_cpu,
    "proxy_limit": stack.proxy_limit,
    "proxy_queue": stack.proxy_queue,
    "disk": stack.disk,
    "bandwidth": stack.bandwidth,
    "generator": stack.generator,
    "starved_generator": stack.starved_generator,
    "healthy": stack.healthy,
    "journey": stack.journey,
    "journey_db": shapes.journey_db,
    "traced_fanout": stack.traced_fanout,
    "journey_cpu": shapes.journey_cpu,
    "async_blocking": shapes.async_blocking,
    "asgi_cpu": shapes.asgi_cpu,
    "async_callee_pool": shapes.async_callee_pool,
    "php_fpm_pool": shapes.php_fpm_pool,
    "tomcat_threads": shapes.tomcat_threads,
    "node_loop": shapes.node_loop,
    "mariadb_lock": shapes.mariadb_lock,
    "redis_core": shapes.redis_core,
}
