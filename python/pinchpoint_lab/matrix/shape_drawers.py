"""The drawers of the matrix's new shapes: journeys whose load one request carries, event
loops that block or compute, a callee's pool behind one, and the servers most backends run
(PHP-FPM, Tomcat, Node.js, MariaDB, Redis). Their capacity model: draws.py."""

from __future__ import annotations

import random
from dataclasses import replace

from pinchpoint_lab.matrix.capacity import (
    cpu_start,
    first_level,
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
    CORES,
    FAST_STEPS,
    FLOW,
    FRONTS,
    HEALTHY_SHARE,
    LOGIN,
    NODE,
    OTHER_SERVER_CPU_MS,
    OVERHEAD_CPU_MS,
    OVERHEAD_MS,
    PHP_FPM,
    REDIS_CALL_CPU_MS,
    REDIS_CALL_MS,
    SEARCH,
    SERVERS,
    TOMCAT,
    Callee,
    JourneyStep,
    Spec,
    Truth,
    server_name,
)
from pinchpoint_lab.matrix.stack_drawers import calm_truth, db_lock, drawn_server


def journey_db(rng: random.Random, hog: float) -> Spec | None:
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
    server, workers, threads = drawn_server(rng, rng.randint(3, 8))
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


def journey_cpu(rng: random.Random, hog: float) -> Spec | None:
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


def async_blocking(rng: random.Random, hog: float) -> Spec | None:
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


def asgi_cpu(rng: random.Random, hog: float) -> Spec | None:
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


def async_callee_pool(rng: random.Random, hog: float) -> Spec | None:
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
                users=users, truth=truth, noisy_truth=calm_truth(truth, cores, hog),
                callee=callee)  # fmt: skip


def waiting_pool(cls: str, server: str, rng: random.Random, hog: float) -> Spec | None:
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


def php_fpm_pool(rng: random.Random, hog: float) -> Spec | None:
    """nginx's fastcgi_pass to PHP-FPM's static pool of 1-4 children, a script that
    sleeps (usleep) 8-20 ms."""
    return waiting_pool("php_fpm_pool", PHP_FPM, rng, hog)


def tomcat_threads(rng: random.Random, hog: float) -> Spec | None:
    """nginx's proxy_pass to Tomcat 10, its connector's maxThreads 1-4, a JSP that sleeps
    8-20 ms."""
    return waiting_pool("tomcat_threads", TOMCAT, rng, hog)


def node_loop(rng: random.Random, hog: float) -> Spec | None:
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


def mariadb_lock(rng: random.Random, hog: float) -> Spec | None:
    """db_lock's hot row in MariaDB (InnoDB): each request updates one row in a
    transaction that holds it 5-15 ms; the rows pass one at a time, 1000 / hold a second,
    before the pool of 4-10 slots."""
    spec = db_lock(rng, hog, hold=rng.randint(5, 15), component="mariadb")
    return None if spec is None else replace(spec, cls="mariadb_lock", database="mariadb")


def redis_core(rng: random.Random, hog: float) -> Spec | None:
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
