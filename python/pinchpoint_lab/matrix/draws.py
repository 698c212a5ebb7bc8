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

import math
import random
from dataclasses import replace

from pinchpoint_lab.matrix.capacity import (
    cpu_at,
    cpu_start,
    first_level,
    group_cores,
    heavy,
    levels,
    light,
    separated,
    steps_for,
)
from pinchpoint_lab.matrix.spec import (
    ASGI_SERVER,
    ASYNC_CALL_CPU_MS,
    ASYNC_CALL_MS,
    CALLEE_NAMES,
    CHECKOUT,
    CLASSES,
    CORES,
    FAST_STEPS,
    FLOW,
    FRONTS,
    HEALTHY_SHARE,
    HOG_CORES,
    HOG_WEIGHTS,
    LOGIN,
    MARGIN,
    NODE,
    OTHER_SERVER_CPU_MS,
    OVERHEAD_CPU_MS,
    OVERHEAD_MS,
    PHP_FPM,
    PLAN_WORKERS_SHARE,
    REDIS_CALL_CPU_MS,
    REDIS_CALL_MS,
    SEARCH,
    SERVER_CONFIGS,
    SERVERS,
    TOMCAT,
    TRACED_CPU_MS,
    TRACED_FANOUT_MS,
    Callee,
    JourneyStep,
    Spec,
    Truth,
    server_name,
)


def _server(rng: random.Random, slots: int, processes_at_least: int = 1) -> tuple[str, int, int]:
    """A server kind and its processes × threads making `slots` (or near it)."""
    kinds = list(SERVERS)
    rng.shuffle(kinds)
    for kind in kinds:
        if kind.endswith("sync") or kind.endswith("processes"):
            return kind, slots, 1
        divisors = [
            t for t in range(2, slots + 1) if slots % t == 0 and slots // t >= processes_at_least
        ]
        if divisors:
            threads = rng.choice(divisors)
            return kind, slots // threads, threads
    return "gunicorn-sync", slots, 1


def _calm(truth: Truth, stack_cpu: float, hog: float) -> Truth | None:
    """The noisy truth of a limit that is not the CPU: the same, but a refusal is no error
    where the stack's CPU at its limit exceeds half of what a heavy hog leaves."""
    if heavy(hog) and stack_cpu > HEALTHY_SHARE * (CORES - hog):
        return replace(truth, refusal_ok=True)
    return None


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


def _pool_wait(rng: random.Random, hog: float) -> Spec | None:
    slots = rng.randint(1, 8)
    server, workers, threads = _server(rng, slots)
    cpu, wait = rng.uniform(0.2, 1.0), rng.uniform(8, 30)
    service = cpu + wait + OVERHEAD_MS
    rps = slots / service * 1000
    # Light enough that the cores the hog takes change nothing.
    if not light(rps, cpu, CORES - hog):
        return None
    users = steps_for(slots, rng)
    start = first_level(levels(users), slots)
    truth = Truth(server_name(server), "worker_pool", start)
    return Spec("", "pool_wait", server, rng.choice(FRONTS), workers, threads, cpu, wait,
                users=users, truth=truth)  # fmt: skip


def _pool_cpu(rng: random.Random, hog: float) -> Spec | None:
    """One worker process that computes (pure CPU) or mostly waits (mixed) on a 2-core host:
    the pool is too small while a core idles. With a hog of a core or more beside it, a
    computing worker has no idle core left: then the CPU is the limit; a waiting one stays
    the pool where the hog leaves it twice the CPU it needs."""
    server = rng.choice(
        (
            "gunicorn-sync",
            "uwsgi-processes",
            "gunicorn-gthread",
            "uwsgi-threads",
            "gunicorn-uvicorn",
        )
    )
    threads = 1 if server.endswith(("sync", "processes", "uvicorn")) else rng.randint(2, 4)
    pure = server.endswith("uvicorn") or rng.random() < 0.6
    cpu = rng.uniform(4, 10)
    wait = 0.0 if pure else rng.uniform(2.0, 3.0) * cpu
    users = steps_for(threads, rng)
    truth = Truth(server_name(server), "worker_pool", first_level(levels(users), threads))
    noisy: Truth | None = Truth(
        truth.component, "cpu", truth.starts_at_users, refusal_ok=heavy(hog)
    )
    if not pure:
        if threads > 1:
            return None  # threads of one process waiting on a GIL: neither clearly
        if not light(1000 / (cpu + wait + OVERHEAD_MS), cpu, CORES - hog):
            return None
        noisy = None
    return Spec("", "pool_cpu", server, rng.choice(FRONTS), 1, threads, cpu, wait,
                users=users, truth=truth, noisy_truth=noisy)  # fmt: skip


def _host_cpu(rng: random.Random, hog: float) -> Spec | None:
    cpu, wait = rng.uniform(3, 8), 0.0
    if rng.random() < 0.4:
        wait = rng.uniform(0.5, 1.0) * cpu
    processes = rng.randint(3, 6)
    server = rng.choice(SERVERS)
    threads = 1 if server.endswith(("sync", "processes")) else rng.randint(2, 3)
    slots = processes * threads
    host_rps = CORES / (cpu + OVERHEAD_CPU_MS) * 1000
    # Each process computes on one core at most (one interpreter lock each).
    pool_rps = min(slots / (cpu + wait + OVERHEAD_MS), processes / cpu) * 1000
    if not separated(host_rps, [pool_rps]):
        return None
    knee = host_rps * (cpu + wait + OVERHEAD_MS) / 1000
    users = steps_for(knee, rng)
    truth = Truth(server_name(server), "cpu", first_level(levels(users), knee))
    start = cpu_start(levels(users), knee, processes, hog)
    noisy = Truth(truth.component, "cpu", start, refusal_ok=heavy(hog))
    return Spec("", "host_cpu", server, rng.choice(FRONTS), processes, threads, cpu, wait,
                users=users, truth=truth, noisy_truth=noisy)  # fmt: skip


def _cpu_quota(rng: random.Random, hog: float) -> Spec | None:
    """The app server's processes in a cgroup allowed `quota` cores, which they fill before
    their pool and the host, and before the share of the cores a hog leaves them."""
    server = rng.choice(SERVERS)
    small = rng.random() < 0.5
    slots = rng.randint(2, 3) if small else rng.randint(6, 10)
    threads = 1 if server.endswith(("sync", "processes")) else 2
    workers = max(1, slots // threads)
    quota = round(rng.uniform(0.2, 0.6), 2)
    cpu, wait = rng.uniform(2, 5), rng.uniform(2, 15)
    quota_rps = quota / (cpu + OVERHEAD_CPU_MS) * 1000
    pool_rps = workers * threads / (cpu + wait + OVERHEAD_MS) * 1000
    if not separated(quota_rps, [pool_rps, CORES / (cpu + OVERHEAD_CPU_MS) * 1000]):
        return None
    if quota > MARGIN * group_cores(hog):
        return None
    knee = quota_rps * (cpu + wait + OVERHEAD_MS) / 1000
    users = steps_for(knee, rng)
    truth = Truth(server_name(server), "cpu_quota", first_level(levels(users), knee))
    return Spec("", "cpu_quota", server, rng.choice(FRONTS), workers, threads, cpu, wait,
                quota=quota, users=users, truth=truth)  # fmt: skip


def _db_lock(
    rng: random.Random, hog: float, hold: int | None = None, component: str = "postgres"
) -> Spec | None:
    hold = rng.randint(3, 10) if hold is None else hold
    server = rng.choice(("gunicorn-sync", "gunicorn-gthread"))
    slots = rng.randint(4, 10)
    threads = 1 if server == "gunicorn-sync" else 2
    workers = max(2, slots // threads)
    lock_rps = 1000 / hold
    pool_rps = workers * threads / (hold + 3 + OVERHEAD_MS) * 1000
    if not separated(lock_rps, [pool_rps]):
        return None
    knee = lock_rps * (hold + 3 + OVERHEAD_MS) / 1000
    users = steps_for(max(knee, 2), rng)
    truth = Truth(component, "db_lock", first_level(levels(users), knee))
    return Spec("", "db_lock", server, rng.choice(FRONTS), workers, threads, 0.0, 0.0,
                hold_ms=hold, users=users, truth=truth,
                noisy_truth=_calm(truth, cpu_at(lock_rps, 0.0), hog))  # fmt: skip


def _db_cpu(rng: random.Random, hog: float) -> Spec | None:
    """Each request waits on a query that PostgreSQL computes for scan ms (a scan of rows in
    shared buffers): the database's backends fill the host's cores while the app's
    workers, more than the cores, only wait. In a third of the draws the database runs in a
    cgroup with a CPU quota (a container's CPU limit) that it fills first, beside a hog
    too. Each of the app's threads has its backend."""
    scan = rng.uniform(3, 10)
    server, workers, threads = _server(rng, rng.randint(4, 10))
    # Under a core, so that beside a CPU hog it is still the quota that fills first.
    quota = round(rng.uniform(0.3, 0.7), 2) if rng.random() < 1 / 3 else None
    host_rps = CORES / (scan + OVERHEAD_CPU_MS) * 1000
    pool_rps = workers * threads / (scan + OVERHEAD_MS) * 1000
    limit, resource, others = host_rps, "cpu", [pool_rps]
    if quota is not None:
        limit, resource, others = quota / scan * 1000, "cpu_quota", [pool_rps, host_rps]
    if not separated(limit, others):
        return None
    backends = workers * threads
    if quota is not None and quota > MARGIN * group_cores(hog):
        return None
    knee = limit * (scan + OVERHEAD_MS) / 1000
    users = steps_for(knee, rng)
    truth = Truth("postgres", resource, first_level(levels(users), knee))
    noisy = None
    if quota is None:
        start = cpu_start(levels(users), knee, backends, hog)
        noisy = Truth("postgres", "cpu", start, refusal_ok=heavy(hog))
    return Spec("", "db_cpu", server, rng.choice(FRONTS), workers, threads, 0.0, 0.0,
                quota=quota, quota_on="database", scan_ms=scan, users=users,
                truth=truth, noisy_truth=noisy)  # fmt: skip


def _proxy_limit(rng: random.Random, hog: float) -> Spec | None:
    limit = rng.randint(1, 3)
    wait = rng.uniform(8, 20)
    users = steps_for(limit + 1, rng)
    truth = Truth("nginx", "proxy_limit", first_level(levels(users), limit + 1))
    rps = limit / (0.5 + wait + OVERHEAD_MS) * 1000
    return Spec("", "proxy_limit", "gunicorn-sync", "nginx", 8, 1, 0.5, wait, limit_conn=limit,
                think_ms=5.0, users=users, truth=truth,
                noisy_truth=_calm(truth, cpu_at(rps, 0.5), hog))  # fmt: skip


def _proxy_queue(rng: random.Random, hog: float) -> Spec | None:
    """HAProxy sends the server at most `maxconn` requests at once and queues the rest,
    while the server behind it has workers to spare."""
    maxconn = rng.randint(1, 3)
    wait = rng.uniform(8, 20)
    users = steps_for(maxconn + 1, rng)
    truth = Truth("haproxy", "proxy_limit", first_level(levels(users), maxconn + 1))
    rps = maxconn / (0.5 + wait + OVERHEAD_MS) * 1000
    return Spec("", "proxy_queue", rng.choice(("gunicorn-sync", "uwsgi-processes")), "haproxy",
                8, 1, 0.5, wait, maxconn=maxconn, users=users, truth=truth,
                noisy_truth=_calm(truth, cpu_at(rps, 0.5), hog))  # fmt: skip


def _disk(rng: random.Random, hog: float) -> Spec | None:
    """The server's cgroup may write so many bytes/s (blkio throttle); each request appends
    and fsyncs kb KiB; users think between requests, so the limit fills past the first."""
    limit = rng.randint(1, 4) * 1024 * 1024
    kb = rng.choice((32, 64, 128))
    write_ms = kb * 1024 / limit * 1000
    if not 8 <= write_ms <= 80:
        return None
    think = rng.uniform(1.0, 3.0) * write_ms
    knee = (write_ms + think + OVERHEAD_MS) / (write_ms + OVERHEAD_MS)
    users = steps_for(knee, rng, most=12)
    truth = Truth(server_name("gunicorn-sync"), "disk", first_level(levels(users), knee))
    return Spec("", "disk", "gunicorn-sync", rng.choice(FRONTS), 8, 1, 0.0, 0.0, fsync_kb=kb,
                fsync_n=1, disk_write_bytes_s=limit, think_ms=think, users=users, truth=truth,
                noisy_truth=_calm(truth, cpu_at(1000 / write_ms, 0.0), hog))  # fmt: skip


def _bandwidth(rng: random.Random, hog: float) -> Spec | None:
    """The server in a network namespace behind a link shaped to a few Mbit/s; responses
    large enough that the link fills before anything else."""
    rate = rng.randint(1_000_000, 4_000_000)
    size = rng.choice((32, 64, 96, 128)) * 1024
    transfer_ms = size / rate * 1000
    if not 8 <= transfer_ms <= 100:
        return None
    wait = rng.uniform(1.0, 3.0) * transfer_ms
    link_rps = rate / size
    knee = link_rps * (transfer_ms + wait + OVERHEAD_MS) / 1000
    users = steps_for(knee, rng, most=12)
    truth = Truth("network", "bandwidth", first_level(levels(users), knee))
    return Spec("", "bandwidth", "gunicorn-sync", "nginx", 16, 1, 0.2, wait, link_bytes_s=rate,
                response_bytes=size, users=users, truth=truth,
                noisy_truth=_calm(truth, cpu_at(link_rps, 0.2), hog))  # fmt: skip


def _generator(rng: random.Random, hog: float) -> Spec | None:
    """nginx answering a static page by itself with a worker per core: the generator's host
    saturates first, whatever the speed of its cores, and sooner beside a hog."""
    upper = rng.choice((16, 24, 32))
    users = (4, upper, (upper - 4) // 4)
    truth = Truth("generator", "cpu", 4)
    return Spec("", "generator", "gunicorn-sync", "nginx", 2, 1, 0.0, 0.0, static=True,
                proxy_workers="auto", users=users, truth=truth)  # fmt: skip


def _starved_generator(rng: random.Random, hog: float) -> Spec | None:
    """nginx's static page loaded by a generator pinned to one core that two spinning
    processes share: it cannot send or read as fast as nginx answers."""
    users = (1, rng.choice((7, 9, 13)), 0)
    users = (1, users[1], (users[1] - 1) // 3)
    return Spec("", "starved_generator", "gunicorn-sync", rng.choice(("nginx", "nginx2")), 2, 1,
                0.0, 0.0, static=True, starved=True, users=users,
                truth=Truth("generator", "cpu", 1))  # fmt: skip


def _healthy(rng: random.Random, hog: float) -> Spec | None:
    slots = rng.randint(8, 16)
    server, workers, threads = _server(rng, slots, processes_at_least=2)
    cpu, wait = rng.uniform(0.2, 0.5), rng.uniform(10, 40)
    upper = max(2, int(HEALTHY_SHARE * slots))
    rps = upper / (cpu + wait + OVERHEAD_MS) * 1000
    if not light(rps, cpu, CORES - 1):
        return None
    step = max(1, (upper - 1) // 3)
    users = (1, 1 + step * ((upper - 1) // step), step)
    quiet = Truth(None, None, None)
    return Spec("", "healthy", server, rng.choice(FRONTS), workers, threads, cpu, wait,
                users=users, truth=quiet, noisy_truth=_calm(quiet, cpu_at(rps, cpu), hog))  # fmt: skip


def _journey(rng: random.Random, hog: float) -> Spec | None:
    """Users walk a few named requests in turn; one, the checkout, holds a lock across the
    app's processes for hold ms while the others stay fast. The checkouts pass one at a
    time, so the walks saturate at 1000 / hold a second, from N = (time of a walk at no
    load) / hold users; the pool has a slot for every user and the CPU stays light."""
    hold = rng.randint(6, 20)
    fast = [
        JourneyStep(name, round(rng.uniform(0.2, 0.8), 2), round(rng.uniform(3, 15), 2))
        for name in rng.sample(FAST_STEPS, rng.randint(2, 3))
    ]
    steps = [*fast]
    steps.insert(rng.randint(0, len(fast)), JourneyStep(CHECKOUT, hold_ms=hold))
    walk_ms = sum(s.cpu_ms + s.wait_ms for s in fast) + hold + len(steps) * OVERHEAD_MS
    knee = walk_ms / hold
    # The stack's cores when the checkouts pass 1000 / hold a second.
    cores = (sum(s.cpu_ms for s in fast) + len(steps) * OVERHEAD_CPU_MS) / hold
    if not 2 <= knee <= 5 or cores > HEALTHY_SHARE * (CORES - 1):
        return None
    users = steps_for(knee, rng)
    server, workers, threads = _server(rng, rng.randint(users[1] + 1, max(users[1] + 1, 16)))
    truth = Truth(server_name(server), "serialized", first_level(levels(users), knee),
                  request=f"{FLOW}/{CHECKOUT}")  # fmt: skip
    return Spec("", "journey", server, rng.choice(FRONTS), workers, threads, 0.0, 0.0,
                users=users, truth=truth, journey=tuple(steps),
                noisy_truth=_calm(truth, cores, hog))  # fmt: skip


def _journey_db(rng: random.Random, hog: float) -> Spec | None:
    """Users walk a few cheap requests and a search that PostgreSQL computes for scan ms
    (a scan of rows in shared buffers), behind a pool of a few workers. The walks saturate
    the host's cores with the database's backends, at cores / (CPU of a walk) walks a
    second; the app's workers wait on them and look full, but more would queue more scans.
    The pool alone serves slots / (time of a request) requests a second, far more."""
    scan = rng.uniform(12, 30)
    fast = [
        JourneyStep(name, round(rng.uniform(0.2, 0.8), 2), round(rng.uniform(2, 6), 2))
        for name in rng.sample([n for n in FAST_STEPS if n != SEARCH], rng.randint(2, 3))
    ]
    steps = [*fast]
    steps.insert(rng.randint(0, len(fast)), JourneyStep(SEARCH, scan_ms=round(scan, 1)))
    walk_cpu = scan + sum(s.cpu_ms for s in fast) + len(steps) * OVERHEAD_CPU_MS
    walk_ms = scan + sum(s.cpu_ms + s.wait_ms for s in fast) + len(steps) * OVERHEAD_MS
    server, workers, threads = _server(rng, rng.randint(3, 8))
    host_walks = CORES / walk_cpu * 1000
    pool_walks = workers * threads / walk_ms * 1000
    if not separated(host_walks, [pool_walks]):
        return None
    knee = host_walks * walk_ms / 1000
    if not 2 <= knee <= 6:
        return None
    users = steps_for(knee, rng)
    truth = Truth("postgres", "cpu", first_level(levels(users), knee), request=f"{FLOW}/{SEARCH}")
    start = cpu_start(levels(users), knee, workers * threads, hog)
    noisy = Truth("postgres", "cpu", start, request=f"{FLOW}/{SEARCH}", refusal_ok=heavy(hog))
    return Spec("", "journey_db", server, rng.choice(FRONTS), workers, threads, 0.0, 0.0,
                users=users, truth=truth, journey=tuple(steps), noisy_truth=noisy)  # fmt: skip


def _traced_fanout(rng: random.Random, hog: float) -> Spec | None:
    """A gateway traced with OpenTelemetry calls two traced services side by side for each
    request: one has a pool of 1 or 2 sync workers, too few for its calls, the other has
    room. Calls to the slow one queue from N = slots × (time of a fan-out at no load) /
    (its call's time) users; the gateway has a slot for every user, and it and the other
    callee pass at least 1 / MARGIN times the slow one's rate, the host's cores too."""
    slow_name, other_name = rng.sample(CALLEE_NAMES, 2)
    slow = Callee(slow_name, rng.choice((1, 1, 2)), round(rng.uniform(30, 90), 2))
    other = Callee(other_name, rng.randint(4, 8), round(rng.uniform(10, 60), 2))
    fanout_ms = max(slow.service_ms, other.service_ms) + TRACED_FANOUT_MS
    knee = slow.rps * fanout_ms / 1000
    users = steps_for(knee, rng)
    server, workers, threads = _gateway_server(rng, rng.randint(users[1] + 1, users[1] + 4))
    gateway_rps = workers * threads / fanout_ms * 1000
    host_rps = CORES / TRACED_CPU_MS * 1000
    if not separated(slow.rps, [other.rps, gateway_rps, host_rps]):
        return None
    cores = slow.rps * TRACED_CPU_MS / 1000
    if cores > HEALTHY_SHARE * (CORES - 1):
        return None
    truth = Truth(slow.name, "worker_pool", first_level(levels(users), knee))
    callees = (slow, other) if rng.random() < 0.5 else (other, slow)
    return Spec("", "traced_fanout", server, rng.choice(FRONTS), workers, threads, 0.0, 0.0,
                users=users, truth=truth, noisy_truth=_calm(truth, cores, hog),
                callees=callees, callees_sampled=rng.random() < 0.5)  # fmt: skip


def _journey_cpu(rng: random.Random, hog: float) -> Spec | None:
    """Users walk a few cheap requests and a login that computes for 15-40 ms. Behind one
    worker process (sync) the walks pass one at a time while a core idles: the pool is
    the limit from the first user, and beside a hog the login's core is taken (the CPU).
    Behind 3-6 processes, more than the cores, the host's cores fill at cores / (CPU of
    a walk) walks a second, before the pool's slots / (time of a walk) and the processes'
    one core each. Either way the limit is on the login."""
    fast = [
        JourneyStep(name, round(rng.uniform(0.2, 0.8), 2), round(rng.uniform(2, 6), 2))
        for name in rng.sample(FAST_STEPS, rng.randint(2, 3))
    ]
    login = JourneyStep(LOGIN, round(rng.uniform(15, 40), 2))
    steps = [*fast]
    steps.insert(rng.randint(0, len(fast)), login)
    app_cpu = sum(s.cpu_ms for s in steps)
    walk_cpu = app_cpu + len(steps) * OVERHEAD_CPU_MS
    walk_ms = sum(s.cpu_ms + s.wait_ms for s in steps) + len(steps) * OVERHEAD_MS
    host_walks = CORES / walk_cpu * 1000
    request = f"{FLOW}/{LOGIN}"
    if rng.random() < 0.5:
        # One worker's walks need under a core: its 1000 / walk_ms is under half the host's.
        server = rng.choice(("gunicorn-sync", "uwsgi-processes"))
        users = steps_for(1, rng)
        truth = Truth(server_name(server), "worker_pool", 1, request=request)
        noisy = Truth(truth.component, "cpu", 1, request=request, refusal_ok=heavy(hog))
        return Spec("", "journey_cpu", server, rng.choice(FRONTS), 1, 1, 0.0, 0.0, users=users,
                    truth=truth, noisy_truth=noisy, journey=tuple(steps))  # fmt: skip
    server = rng.choice(SERVERS)
    processes = rng.randint(3, 6)
    threads = 1 if server.endswith(("sync", "processes")) else rng.randint(2, 3)
    pool_walks = processes * threads / walk_ms * 1000
    process_walks = processes / app_cpu * 1000
    if not separated(host_walks, [pool_walks, process_walks]):
        return None
    knee = host_walks * walk_ms / 1000
    users = steps_for(knee, rng)
    truth = Truth(server_name(server), "cpu", first_level(levels(users), knee), request=request)
    start = cpu_start(levels(users), knee, processes, hog)
    noisy = Truth(truth.component, "cpu", start, request=request, refusal_ok=heavy(hog))
    return Spec("", "journey_cpu", server, rng.choice(FRONTS), processes, threads, 0.0, 0.0,
                users=users, truth=truth, noisy_truth=noisy, journey=tuple(steps))  # fmt: skip


def _async_blocking(rng: random.Random, hog: float) -> Spec | None:
    """uvicorn with 1-3 processes, each an event loop, whose handler waits 5-20 ms in a
    synchronous call: each loop serves one request at a time, so the loops fill once the
    users outnumber them, while the CPU stays light (in what the hog leaves too)."""
    loops = rng.randint(1, 3)
    cpu, wait = round(rng.uniform(0.1, 0.5), 2), round(rng.uniform(5, 20), 2)
    rps = loops / (cpu + wait + OVERHEAD_MS) * 1000
    if not light(rps, cpu, CORES - hog):
        return None
    users = steps_for(loops + 1, rng)
    truth = Truth(ASGI_SERVER, "event_loop", first_level(levels(users), loops + 1))
    return Spec("", "async_blocking", ASGI_SERVER, rng.choice(FRONTS), loops, 1, cpu, wait,
                block=True, users=users, truth=truth)  # fmt: skip


def _asgi_cpu(rng: random.Random, hog: float) -> Spec | None:
    """uvicorn with as many event loops as cores or more, each request computing 3-10 ms on
    its loop: the host's cores fill at cores / (CPU per request) requests a second. With
    two loops their own limit, a core each, is the host's cores too: they name the same
    resource, so the draw needs no margin between them."""
    loops = rng.randint(CORES, CORES + 1)
    cpu = round(rng.uniform(3, 10), 2)
    host_rps = CORES / (cpu + OVERHEAD_CPU_MS) * 1000
    knee = host_rps * (cpu + OVERHEAD_MS) / 1000
    users = steps_for(knee, rng)
    truth = Truth(ASGI_SERVER, "cpu", first_level(levels(users), knee))
    start = cpu_start(levels(users), knee, loops, hog)
    noisy = Truth(ASGI_SERVER, "cpu", start, refusal_ok=heavy(hog))
    return Spec("", "asgi_cpu", ASGI_SERVER, rng.choice(FRONTS), loops, 1, cpu, 0.0,
                users=users, truth=truth, noisy_truth=noisy)  # fmt: skip


def _async_callee_pool(rng: random.Random, hog: float) -> Spec | None:
    """uvicorn's loops await, for each request, a call to a service of 1 or 2 sync workers
    that wait 10-20 ms each: the loops hold any number of calls, the callee serves
    workers / (its call's time) a second, and its callers queue for it from N = workers ×
    (time of a request at no load) / (its call's time) users. Three workers would pass
    more calls than half a core of CPU serves; the host stays light beside a one-core hog."""
    callee = Callee(rng.choice(CALLEE_NAMES), rng.randint(1, 2), round(rng.uniform(10, 20), 2))
    loops = rng.randint(1, 2)
    cpu = round(rng.uniform(0.1, 0.3), 2)
    call_ms = callee.wait_ms + ASYNC_CALL_MS
    callee_rps = callee.workers / call_ms * 1000
    # Light beside a one-core hog, so far below the host's CORES / ASYNC_CALL_CPU_MS too.
    cores = callee_rps * ASYNC_CALL_CPU_MS / 1000
    if cores > HEALTHY_SHARE * (CORES - 1):
        return None
    knee = callee_rps * (call_ms + cpu + OVERHEAD_MS) / 1000
    users = steps_for(knee, rng)
    truth = Truth(callee.name, "worker_pool", first_level(levels(users), knee))
    return Spec("", "async_callee_pool", ASGI_SERVER, rng.choice(FRONTS), loops, 1, cpu, 0.0,
                users=users, truth=truth, noisy_truth=_calm(truth, cores, hog),
                callee=callee)  # fmt: skip


def _waiting_pool(cls: str, server: str, rng: random.Random, hog: float) -> Spec | None:
    """A pool of 1-4 slots of another server than Python's, whose script or page waits
    8-20 ms: full once the users outnumber the slots, light beside the hog."""
    slots = rng.randint(1, 4)
    wait = round(rng.uniform(8, 20), 2)
    rps = slots / (wait + OVERHEAD_MS) * 1000
    if not light(rps, OTHER_SERVER_CPU_MS, CORES - hog):
        return None
    users = steps_for(slots, rng)
    truth = Truth(server, "worker_pool", first_level(levels(users), slots))
    return Spec("", cls, server, "nginx", slots, 1, 0.0, wait, users=users, truth=truth)


def _php_fpm_pool(rng: random.Random, hog: float) -> Spec | None:
    """nginx's fastcgi_pass to PHP-FPM's static pool of 1-4 children, a script that
    sleeps (usleep) 8-20 ms."""
    return _waiting_pool("php_fpm_pool", PHP_FPM, rng, hog)


def _tomcat_threads(rng: random.Random, hog: float) -> Spec | None:
    """nginx's proxy_pass to Tomcat 10, its connector's maxThreads 1-4, a JSP that sleeps
    8-20 ms."""
    return _waiting_pool("tomcat_threads", TOMCAT, rng, hog)


def _node_loop(rng: random.Random, hog: float) -> Spec | None:
    """nginx → one Node.js process (Express): a route that computes 3-8 ms in JavaScript
    makes the loop a core, which fills at 1000 / cpu requests a second, before the host's
    cores (CORES / CPU per request); a route that blocks 5-20 ms without computing
    (Atomics.wait) holds the loop, full once the users outnumber it (two users)."""
    if rng.random() < 0.5:
        cpu = round(rng.uniform(3, 8), 2)
        loop_rps = 1000 / cpu
        if not separated(loop_rps, [CORES / (cpu + OVERHEAD_CPU_MS) * 1000]):
            return None
        knee = loop_rps * (cpu + OVERHEAD_MS) / 1000
        users = steps_for(max(knee, 2), rng)
        truth = Truth(NODE, "cpu", first_level(levels(users), knee))
        start = cpu_start(levels(users), knee, 1, hog)
        noisy = Truth(NODE, "cpu", start, refusal_ok=heavy(hog))
        return Spec("", "node_loop", NODE, "nginx", 1, 1, cpu, 0.0, users=users, truth=truth,
                    noisy_truth=noisy)  # fmt: skip
    wait = round(rng.uniform(5, 20), 2)
    if not light(1000 / (wait + OVERHEAD_MS), 0.0, CORES - hog):
        return None
    users = steps_for(2, rng)
    truth = Truth(NODE, "event_loop", first_level(levels(users), 2))
    return Spec("", "node_loop", NODE, "nginx", 1, 1, 0.0, wait, block=True, users=users,
                truth=truth)  # fmt: skip


def _mariadb_lock(rng: random.Random, hog: float) -> Spec | None:
    """db_lock's hot row in MariaDB (InnoDB): each request updates one row in a
    transaction that holds it 5-15 ms; the rows pass one at a time, 1000 / hold a second,
    before the pool of 4-10 slots."""
    spec = _db_lock(rng, hog, hold=rng.randint(5, 15), component="mariadb")
    return None if spec is None else replace(spec, cls="mariadb_lock", database="mariadb")


def _redis_core(rng: random.Random, hog: float) -> Spec | None:
    """gunicorn's 3-8 sync workers each run, per request, one Redis command (a Lua loop)
    costing Redis's main thread redis_ms: Redis serves 1000 / redis_ms a second on its one
    core, before the pool's slots / (time of a request) and the host's CORES / (CPU of a
    request, Redis's and the rest of the stack's)."""
    cost = round(rng.uniform(3, 8), 2)
    workers = rng.randint(3, 8)
    request_ms = cost + REDIS_CALL_MS
    redis_rps = 1000 / cost
    pool_rps = workers / request_ms * 1000
    host_rps = CORES / (cost + REDIS_CALL_CPU_MS) * 1000
    if not separated(redis_rps, [pool_rps, host_rps]):
        return None
    knee = redis_rps * request_ms / 1000
    users = steps_for(knee, rng)
    truth = Truth("redis", "cpu", first_level(levels(users), knee))
    noisy = Truth("redis", "cpu", cpu_start(levels(users), knee, 1, hog), refusal_ok=heavy(hog))
    return Spec("", "redis_core", "gunicorn-sync", "nginx", workers, 1, 0.0, 0.0,
                redis_ms=cost, users=users, truth=truth, noisy_truth=noisy)  # fmt: skip


def _gateway_server(rng: random.Random, slots: int) -> tuple[str, int, int]:
    """gunicorn's sync workers, or gthread's of 2 to 4 threads, making `slots` or a few more."""
    if slots <= 6 and rng.random() < 0.5:
        return "gunicorn-sync", slots, 1
    threads = rng.randint(2, 4)
    return "gunicorn-gthread", math.ceil(slots / threads), threads


DRAWERS = {
    "pool_wait": _pool_wait,
    "pool_cpu": _pool_cpu,
    "host_cpu": _host_cpu,
    "cpu_quota": _cpu_quota,
    "db_lock": _db_lock,
    "db_cpu": _db_cpu,
    "proxy_limit": _proxy_limit,
    "proxy_queue": _proxy_queue,
    "disk": _disk,
    "bandwidth": _bandwidth,
    "generator": _generator,
    "starved_generator": _starved_generator,
    "healthy": _healthy,
    "journey": _journey,
    "journey_db": _journey_db,
    "traced_fanout": _traced_fanout,
    "journey_cpu": _journey_cpu,
    "async_blocking": _async_blocking,
    "asgi_cpu": _asgi_cpu,
    "async_callee_pool": _async_callee_pool,
    "php_fpm_pool": _php_fpm_pool,
    "tomcat_threads": _tomcat_threads,
    "node_loop": _node_loop,
    "mariadb_lock": _mariadb_lock,
    "redis_core": _redis_core,
}
