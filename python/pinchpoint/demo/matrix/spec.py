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
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

CORES = 2
# CPU per request outside the app's own work (proxy, server, framework, log lines and the
# generator's own share), in ms: what the capacity model adds to each request's CPU.
OVERHEAD_CPU_MS = 1.0
# Time of a request at no load outside the app's work (network hops, proxy, server), in ms.
OVERHEAD_MS = 1.5
# The smallest capacity must be at most this share of the next one.
MARGIN = 0.67
# Past the knee: the highest step loads the stack this many times its knee users, at least.
PAST_KNEE = 2.0
# A scenario that is meant to have no bottleneck stays below this share of every capacity.
HEALTHY_SHARE = 0.5

CLASSES = (
    "pool_wait",
    "pool_cpu",
    "host_cpu",
    "cpu_quota",
    "db_lock",
    "db_cpu",
    "proxy_limit",
    "proxy_queue",
    "disk",
    "bandwidth",
    "generator",
    "starved_generator",
    "healthy",
)
SERVERS = ("gunicorn-sync", "gunicorn-gthread", "uwsgi-processes", "uwsgi-threads")
FRONTS = ("nginx", "haproxy", "nginx2")


@dataclass(frozen=True)
class Truth:
    """What limits the stack: None component for a healthy stack."""

    component: str | None
    resource: str | None
    starts_at_users: int | None


@dataclass(frozen=True)
class Spec:
    """One scenario: the stack, the request, the users stepped and the truth."""

    name: str
    cls: str
    server: str = "gunicorn-sync"
    front: str = "nginx"
    workers: int = 4
    threads: int = 1
    cpu_ms: float = 1.0
    wait_ms: float = 10.0
    quota: float | None = None
    # Whose processes the quota holds: the app's server's, or the database's.
    quota_on: Literal["server", "database"] = "server"
    hold_ms: int | None = None
    # Each request makes PostgreSQL scan rows for this many ms of its CPU.
    scan_ms: float | None = None
    limit_conn: int | None = None
    maxconn: int | None = None
    fsync_kb: int | None = None
    fsync_n: int | None = None
    static: bool = False
    # A link shaped to this many bytes/s between the proxy and the server, and the bytes of
    # each response.
    link_bytes_s: int | None = None
    # The server's cgroup may write this many bytes/s.
    disk_write_bytes_s: int | None = None
    response_bytes: int | None = None
    starved: bool = False
    # nginx's worker processes: "auto" for one per core.
    proxy_workers: int | Literal["auto"] = 1
    think_ms: float = 0.0
    users: tuple[int, int, int] = (1, 7, 2)
    truth: Truth = field(default_factory=lambda: Truth(None, None, None))
    # With a CPU hog outside the stack: its own truth where the hog changes the answer.
    noisy_truth: Truth | None = None

    @property
    def slots(self) -> int:
        return self.workers * self.threads

    @property
    def server_name(self) -> str:
        return "uwsgi" if self.server.startswith("uwsgi") else "gunicorn"

    @property
    def front_name(self) -> str:
        return "haproxy" if self.front == "haproxy" else "nginx"

    def levels(self) -> list[int]:
        lower, upper, step = self.users
        return list(range(lower, upper + 1, step))

    def expected(self, noisy: bool) -> Truth:
        return self.noisy_truth if noisy and self.noisy_truth is not None else self.truth

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def first_level(levels: list[int], users: float) -> int:
    """The first stepped level with at least `users` users (the highest if none)."""
    return next((n for n in levels if n >= users - 1e-9), levels[-1])


def steps_for(knee: float, rng: random.Random, most: int = 64) -> tuple[int, int, int]:
    """Users from 1 past the knee, in 4 to 6 steps."""
    upper = min(most, max(4, math.ceil(PAST_KNEE * knee) + 1))
    count = rng.randint(4, 6)
    step = max(1, math.ceil((upper - 1) / (count - 1)))
    return 1, 1 + step * (count - 1), step


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


def _light(rps: float, cpu_ms: float, cores: float) -> bool:
    """The stack's CPU at `rps` stays under half of `cores`."""
    return rps * (cpu_ms + OVERHEAD_CPU_MS) / 1000 <= HEALTHY_SHARE * cores


def _separated(smallest: float, others: list[float]) -> bool:
    return all(smallest <= MARGIN * other for other in others)


def _named(spec: Spec, index: int) -> Spec:
    return replace(spec, name=f"{index:02d}-{spec.cls}-{spec.server}-{spec.front}")


def draw(seed: int, count: int) -> list[Spec]:
    """`count` scenarios from `seed`, the classes in turn, each drawn until unambiguous."""
    rng = random.Random(seed)
    specs = []
    for index in range(count):
        cls = CLASSES[index % len(CLASSES)]
        for _ in range(1000):
            spec = DRAWERS[cls](rng)
            if spec is not None:
                specs.append(_named(spec, index))
                break
        else:  # pragma: no cover - the drawers' ranges always admit a draw
            raise RuntimeError(f"no unambiguous {cls} scenario drawn")
    return specs


def _pool_wait(rng: random.Random) -> Spec | None:
    slots = rng.randint(1, 8)
    server, workers, threads = _server(rng, slots)
    cpu, wait = rng.uniform(0.2, 1.0), rng.uniform(8, 30)
    service = cpu + wait + OVERHEAD_MS
    rps = slots / service * 1000
    # Light enough that a neighbour taking a core changes nothing.
    if not _light(rps, cpu, CORES - 1):
        return None
    users = steps_for(slots, rng)
    start = first_level(_levels(users), slots)
    truth = Truth(server_name(server), "worker_pool", start)
    return Spec("", "pool_wait", server, rng.choice(FRONTS), workers, threads, cpu, wait,
                users=users, truth=truth)  # fmt: skip


def _pool_cpu(rng: random.Random) -> Spec | None:
    """One worker process that computes (pure CPU) or mostly waits (mixed) on a 2-core host:
    the pool is too small while a core idles. With a neighbour on the other core, a
    computing worker has no idle core left: then the CPU is the limit."""
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
    truth = Truth(server_name(server), "worker_pool", first_level(_levels(users), threads))
    noisy = Truth(truth.component, "cpu", truth.starts_at_users) if pure else None
    if not pure and threads > 1:
        return None  # threads of one process waiting on a GIL: neither clearly
    return Spec("", "pool_cpu", server, rng.choice(FRONTS), 1, threads, cpu, wait,
                users=users, truth=truth, noisy_truth=noisy)  # fmt: skip


def _host_cpu(rng: random.Random) -> Spec | None:
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
    if not _separated(host_rps, [pool_rps]):
        return None
    knee = host_rps * (cpu + wait + OVERHEAD_MS) / 1000
    users = steps_for(knee, rng)
    truth = Truth(server_name(server), "cpu", first_level(_levels(users), knee))
    return Spec("", "host_cpu", server, rng.choice(FRONTS), processes, threads, cpu, wait,
                users=users, truth=truth)  # fmt: skip


def _cpu_quota(rng: random.Random) -> Spec | None:
    server = rng.choice(SERVERS)
    small = rng.random() < 0.5
    slots = rng.randint(2, 3) if small else rng.randint(6, 10)
    threads = 1 if server.endswith(("sync", "processes")) else 2
    workers = max(1, slots // threads)
    quota = round(rng.uniform(0.2, 0.6), 2)
    cpu, wait = rng.uniform(2, 5), rng.uniform(2, 15)
    quota_rps = quota / (cpu + OVERHEAD_CPU_MS) * 1000
    pool_rps = workers * threads / (cpu + wait + OVERHEAD_MS) * 1000
    if not _separated(quota_rps, [pool_rps, CORES / (cpu + OVERHEAD_CPU_MS) * 1000]):
        return None
    knee = quota_rps * (cpu + wait + OVERHEAD_MS) / 1000
    users = steps_for(knee, rng)
    truth = Truth(server_name(server), "cpu_quota", first_level(_levels(users), knee))
    return Spec("", "cpu_quota", server, rng.choice(FRONTS), workers, threads, cpu, wait,
                quota=quota, users=users, truth=truth)  # fmt: skip


def _db_lock(rng: random.Random) -> Spec | None:
    hold = rng.randint(3, 10)
    server = rng.choice(("gunicorn-sync", "gunicorn-gthread"))
    slots = rng.randint(4, 10)
    threads = 1 if server == "gunicorn-sync" else 2
    workers = max(2, slots // threads)
    lock_rps = 1000 / hold
    pool_rps = workers * threads / (hold + 3 + OVERHEAD_MS) * 1000
    if not _separated(lock_rps, [pool_rps]):
        return None
    knee = lock_rps * (hold + 3 + OVERHEAD_MS) / 1000
    users = steps_for(max(knee, 2), rng)
    truth = Truth("postgres", "db_lock", first_level(_levels(users), knee))
    return Spec("", "db_lock", server, rng.choice(FRONTS), workers, threads, 0.0, 0.0,
                hold_ms=hold, users=users, truth=truth)  # fmt: skip


def _db_cpu(rng: random.Random) -> Spec | None:
    """Each request waits on a query that PostgreSQL computes for scan ms (a scan of rows in
    shared buffers): the database's backends fill the host's cores while the app's
    workers, more than the cores, only wait. In a third of the draws the database runs in a
    cgroup with a CPU quota (a container's CPU limit) that it fills first."""
    scan = rng.uniform(3, 10)
    server, workers, threads = _server(rng, rng.randint(4, 10))
    # Under a core, so that beside a CPU hog it is still the quota that fills first.
    quota = round(rng.uniform(0.3, 0.7), 2) if rng.random() < 1 / 3 else None
    host_rps = CORES / (scan + OVERHEAD_CPU_MS) * 1000
    pool_rps = workers * threads / (scan + OVERHEAD_MS) * 1000
    limit, resource, others = host_rps, "cpu", [pool_rps]
    if quota is not None:
        limit, resource, others = quota / scan * 1000, "cpu_quota", [pool_rps, host_rps]
    if not _separated(limit, others):
        return None
    knee = limit * (scan + OVERHEAD_MS) / 1000
    users = steps_for(knee, rng)
    truth = Truth("postgres", resource, first_level(_levels(users), knee))
    return Spec("", "db_cpu", server, rng.choice(FRONTS), workers, threads, 0.0, 0.0,
                quota=quota, quota_on="database", scan_ms=scan, users=users,
                truth=truth)  # fmt: skip


def _proxy_limit(rng: random.Random) -> Spec | None:
    limit = rng.randint(1, 3)
    wait = rng.uniform(8, 20)
    users = steps_for(limit + 1, rng)
    truth = Truth("nginx", "proxy_limit", first_level(_levels(users), limit + 1))
    return Spec("", "proxy_limit", "gunicorn-sync", "nginx", 8, 1, 0.5, wait, limit_conn=limit,
                think_ms=5.0, users=users, truth=truth)  # fmt: skip


def _proxy_queue(rng: random.Random) -> Spec | None:
    """HAProxy sends the server at most `maxconn` requests at once and queues the rest,
    while the server behind it has workers to spare."""
    maxconn = rng.randint(1, 3)
    wait = rng.uniform(8, 20)
    users = steps_for(maxconn + 1, rng)
    truth = Truth("haproxy", "proxy_limit", first_level(_levels(users), maxconn + 1))
    return Spec("", "proxy_queue", rng.choice(("gunicorn-sync", "uwsgi-processes")), "haproxy",
                8, 1, 0.5, wait, maxconn=maxconn, users=users, truth=truth)  # fmt: skip


def _disk(rng: random.Random) -> Spec | None:
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
    truth = Truth(server_name("gunicorn-sync"), "disk", first_level(_levels(users), knee))
    return Spec("", "disk", "gunicorn-sync", rng.choice(FRONTS), 8, 1, 0.0, 0.0, fsync_kb=kb,
                fsync_n=1, disk_write_bytes_s=limit, think_ms=think, users=users,
                truth=truth)  # fmt: skip


def _bandwidth(rng: random.Random) -> Spec | None:
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
    truth = Truth("network", "bandwidth", first_level(_levels(users), knee))
    return Spec("", "bandwidth", "gunicorn-sync", "nginx", 16, 1, 0.2, wait, link_bytes_s=rate,
                response_bytes=size, users=users, truth=truth)  # fmt: skip


def _generator(rng: random.Random) -> Spec | None:
    """nginx answering a static page by itself with a worker per core: the generator's host
    saturates first, whatever the speed of its cores."""
    upper = rng.choice((16, 24, 32))
    users = (4, upper, (upper - 4) // 4)
    truth = Truth("generator", "cpu", 4)
    return Spec("", "generator", "gunicorn-sync", "nginx", 2, 1, 0.0, 0.0, static=True,
                proxy_workers="auto", users=users, truth=truth)  # fmt: skip


def _starved_generator(rng: random.Random) -> Spec | None:
    """nginx's static page loaded by a generator pinned to one core that two spinning
    processes share: it cannot send or read as fast as nginx answers."""
    users = (1, rng.choice((7, 9, 13)), 0)
    users = (1, users[1], (users[1] - 1) // 3)
    return Spec("", "starved_generator", "gunicorn-sync", rng.choice(("nginx", "nginx2")), 2, 1,
                0.0, 0.0, static=True, starved=True, users=users,
                truth=Truth("generator", "cpu", 1))  # fmt: skip


def _healthy(rng: random.Random) -> Spec | None:
    slots = rng.randint(8, 16)
    server, workers, threads = _server(rng, slots, processes_at_least=2)
    cpu, wait = rng.uniform(0.2, 0.5), rng.uniform(10, 40)
    upper = max(2, int(HEALTHY_SHARE * slots))
    rps = upper / (cpu + wait + OVERHEAD_MS) * 1000
    if not _light(rps, cpu, CORES - 1):
        return None
    step = max(1, (upper - 1) // 3)
    users = (1, 1 + step * ((upper - 1) // step), step)
    return Spec("", "healthy", server, rng.choice(FRONTS), workers, threads, cpu, wait,
                users=users)  # fmt: skip


def server_name(server: str) -> str:
    return "uwsgi" if server.startswith("uwsgi") else "gunicorn"


def _levels(users: tuple[int, int, int]) -> list[int]:
    lower, upper, step = users
    return list(range(lower, upper + 1, step))


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
}
