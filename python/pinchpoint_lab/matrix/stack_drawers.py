"""The drawers of the matrix's first fifteen classes, and the helpers every drawer uses:
the app server drawn for a pool size, and a truth that stays where a hog leaves the stack
enough CPU. Their capacity model: draws.py."""

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
    CALLEE_NAMES,
    CHECKOUT,
    CORES,
    FAST_STEPS,
    FLOW,
    FRONTS,
    HEALTHY_SHARE,
    MARGIN,
    OVERHEAD_CPU_MS,
    OVERHEAD_MS,
    SERVERS,
    TRACED_CPU_MS,
    TRACED_FANOUT_MS,
    Callee,
    JourneyStep,
    Spec,
    Truth,
    server_name,
)


def drawn_server(
    rng: random.Random, slots: int, processes_at_least: int = 1
) -> tuple[str, int, int]:
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


def calm_truth(truth: Truth, stack_cpu: float, hog: float) -> Truth | None:
    """The noisy truth of a limit that is not the CPU: the same, but a refusal is no error
    where the stack's CPU at its limit exceeds half of what a heavy hog leaves."""
    if heavy(hog) and stack_cpu > HEALTHY_SHARE * (CORES - hog):
        return replace(truth, refusal_ok=True)
    return None


def pool_wait(rng: random.Random, hog: float) -> Spec | None:
    slots = rng.randint(1, 8)
    server, workers, threads = drawn_server(rng, slots)
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


def pool_cpu(rng: random.Random, hog: float) -> Spec | None:
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


def host_cpu(rng: random.Random, hog: float) -> Spec | None:
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


def cpu_quota(rng: random.Random, hog: float) -> Spec | None:
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


def db_lock(
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
                noisy_truth=calm_truth(truth, cpu_at(lock_rps, 0.0), hog))  # fmt: skip


def db_cpu(rng: random.Random, hog: float) -> Spec | None:
    """Each request waits on a query that PostgreSQL computes for scan ms (a scan of rows in
    shared buffers): the database's backends fill the host's cores while the app's
    workers, more than the cores, only wait. In a third of the draws the database runs in a
    cgroup with a CPU quota (a container's CPU limit) that it fills first, beside a hog
    too. Each of the app's threads has its backend."""
    scan = rng.uniform(3, 10)
    server, workers, threads = drawn_server(rng, rng.randint(4, 10))
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


def proxy_limit(rng: random.Random, hog: float) -> Spec | None:
    limit = rng.randint(1, 3)
    wait = rng.uniform(8, 20)
    users = steps_for(limit + 1, rng)
    truth = Truth("nginx", "proxy_limit", first_level(levels(users), limit + 1))
    rps = limit / (0.5 + wait + OVERHEAD_MS) * 1000
    return Spec("", "proxy_limit", "gunicorn-sync", "nginx", 8, 1, 0.5, wait, limit_conn=limit,
                think_ms=5.0, users=users, truth=truth,
                noisy_truth=calm_truth(truth, cpu_at(rps, 0.5), hog))  # fmt: skip


def proxy_queue(rng: random.Random, hog: float) -> Spec | None:
    """HAProxy sends the server at most `maxconn` requests at once and queues the rest,
    while the server behind it has workers to spare."""
    maxconn = rng.randint(1, 3)
    wait = rng.uniform(8, 20)
    users = steps_for(maxconn + 1, rng)
    truth = Truth("haproxy", "proxy_limit", first_level(levels(users), maxconn + 1))
    rps = maxconn / (0.5 + wait + OVERHEAD_MS) * 1000
    return Spec("", "proxy_queue", rng.choice(("gunicorn-sync", "uwsgi-processes")), "haproxy",
                8, 1, 0.5, wait, maxconn=maxconn, users=users, truth=truth,
                noisy_truth=calm_truth(truth, cpu_at(rps, 0.5), hog))  # fmt: skip


def disk(rng: random.Random, hog: float) -> Spec | None:
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
                noisy_truth=calm_truth(truth, cpu_at(1000 / write_ms, 0.0), hog))  # fmt: skip


def bandwidth(rng: random.Random, hog: float) -> Spec | None:
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
                noisy_truth=calm_truth(truth, cpu_at(link_rps, 0.2), hog))  # fmt: skip


def generator(rng: random.Random, hog: float) -> Spec | None:
    """nginx answering a static page by itself with a worker per core: the generator's host
    saturates first, whatever the speed of its cores, and sooner beside a hog."""
    upper = rng.choice((16, 24, 32))
    users = (4, upper, (upper - 4) // 4)
    truth = Truth("generator", "cpu", 4)
    return Spec("", "generator", "gunicorn-sync", "nginx", 2, 1, 0.0, 0.0, static=True,
                proxy_workers="auto", users=users, truth=truth)  # fmt: skip


def starved_generator(rng: random.Random, hog: float) -> Spec | None:
    """nginx's static page loaded by a generator pinned to one core that two spinning
    processes share: it cannot send or read as fast as nginx answers."""
    users = (1, rng.choice((7, 9, 13)), 0)
    users = (1, users[1], (users[1] - 1) // 3)
    return Spec("", "starved_generator", "gunicorn-sync", rng.choice(("nginx", "nginx2")), 2, 1,
                0.0, 0.0, static=True, starved=True, users=users,
                truth=Truth("generator", "cpu", 1))  # fmt: skip


def healthy(rng: random.Random, hog: float) -> Spec | None:
    slots = rng.randint(8, 16)
    server, workers, threads = drawn_server(rng, slots, processes_at_least=2)
    cpu, wait = rng.uniform(0.2, 0.5), rng.uniform(10, 40)
    upper = max(2, int(HEALTHY_SHARE * slots))
    rps = upper / (cpu + wait + OVERHEAD_MS) * 1000
    if not light(rps, cpu, CORES - 1):
        return None
    step = max(1, (upper - 1) // 3)
    users = (1, 1 + step * ((upper - 1) // step), step)
    quiet = Truth(None, None, None)
    return Spec("", "healthy", server, rng.choice(FRONTS), workers, threads, cpu, wait,
                users=users, truth=quiet, noisy_truth=calm_truth(quiet, cpu_at(rps, cpu), hog))  # fmt: skip


def journey(rng: random.Random, hog: float) -> Spec | None:
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
    server, workers, threads = drawn_server(rng, rng.randint(users[1] + 1, max(users[1] + 1, 16)))
    truth = Truth(server_name(server), "serialized", first_level(levels(users), knee),
                  request=f"{FLOW}/{CHECKOUT}")  # fmt: skip
    return Spec("", "journey", server, rng.choice(FRONTS), workers, threads, 0.0, 0.0,
                users=users, truth=truth, journey=tuple(steps),
                noisy_truth=calm_truth(truth, cores, hog))  # fmt: skip


def traced_fanout(rng: random.Random, hog: float) -> Spec | None:
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
    server, workers, threads = gateway_server(rng, rng.randint(users[1] + 1, users[1] + 4))
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
                users=users, truth=truth, noisy_truth=calm_truth(truth, cores, hog),
                callees=callees, callees_sampled=rng.random() < 0.5)  # fmt: skip


def gateway_server(rng: random.Random, slots: int) -> tuple[str, int, int]:
    """gunicorn's sync workers, or gthread's of 2 to 4 threads, making `slots` or a few more."""
    if slots <= 6 and rng.random() < 0.5:
        return "gunicorn-sync", slots, 1
    threads = rng.randint(2, 4)
    return "gunicorn-gthread", math.ceil(slots / threads), threads
