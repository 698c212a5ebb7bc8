"""The scenarios of the diagnosis matrix: each one's stack, request, users and truth, and
how its plan is written (as users write theirs: the plan names the app server's pool size
in only a share of the draws, the server reads its pool from its command line or a config
file). How they are drawn, and their truths from the capacity model: draws.py."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
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
    "journey",
    "traced_fanout",
    "journey_db",
    "journey_cpu",
    "async_blocking",
    "asgi_cpu",
    "async_callee_pool",
    "php_fpm_pool",
    "tomcat_threads",
    "node_loop",
    "mariadb_lock",
    "redis_core",
)
SERVERS = ("gunicorn-sync", "gunicorn-gthread", "uwsgi-processes", "uwsgi-threads")
FRONTS = ("nginx", "haproxy", "nginx2")
# The share of the draws whose plan names the app server's pool size: users seldom do.
PLAN_WORKERS_SHARE = 0.25
SERVER_CONFIGS: tuple[Literal["flags", "file"], ...] = ("flags", "file")
# The noisy runs' CPU hog, in cores, and how often each is drawn.
HOG_CORES = (1.0, 1.5, 1.8)
HOG_WEIGHTS = (2, 1, 1)
# The journey class's flow, its steps named from these, and the one that serializes.
FLOW = "journey"
FAST_STEPS = ("home", "search", "item", "cart")
CHECKOUT = "checkout"
# The journey_db class's request that scans a table inside PostgreSQL.
SEARCH = "search"
# The journey_cpu class's request that computes.
LOGIN = "login"
# uvicorn alone (`--workers N`, an event loop a process) running the lab's bare ASGI app.
ASGI_SERVER = "uvicorn"
# The async_callee_pool class: a call's time in the callee beyond its wait (the ASGI app's
# client, gunicorn's sync worker, the demo app), and the CPU a request costs the proxy,
# uvicorn, its client, the callee and the generator, in ms, as measured on a 2-core host.
ASYNC_CALL_MS = 2.0
ASYNC_CALL_CPU_MS = 4.0
# Servers other than Python's, each behind nginx as its docs deploy it: PHP-FPM's static
# pool (fastcgi_pass), Tomcat 10's connector threads and Node.js's one event loop
# (proxy_pass); the spec's `server`, and the component each is named in the plan.
PHP_FPM = "php-fpm"
TOMCAT = "tomcat"
NODE = "node"
OTHER_SERVERS = (PHP_FPM, TOMCAT, NODE)
# The CPU a request costs the stack beside the PHP script's or JSP's wait, in ms.
OTHER_SERVER_CPU_MS = 0.5
# The redis_core class: the CPU a request costs outside Redis (the proxy, gunicorn, the
# app and its client, the generator), and its time beyond Redis's, in ms.
REDIS_CALL_CPU_MS = 2.0
REDIS_CALL_MS = 2.5
# The traced_fanout class: its gateway's service name, and its callees' names drawn from these.
GATEWAY = "gateway"
CALLEE_NAMES = ("inventory", "pricing", "reviews", "shipping", "stock", "accounts")
# A traced call's time in its service's worker beyond the service's wait (gunicorn, Flask,
# its span), and a fan-out's at no load beyond its longest call (proxy, gateway, the calls'
# threads and connections), in ms, as measured on a 2-core host.
TRACED_CALL_MS = 2.5
TRACED_FANOUT_MS = 8.0
# The CPU a fan-out costs the gateway, its callees (each span's export too), the proxy and
# the generator, in ms: tracing costs several times the request's own work.
TRACED_CPU_MS = 15.0


@dataclass(frozen=True)
class Truth:
    """What limits the stack: None component for a healthy stack."""

    component: str | None
    resource: str | None
    starts_at_users: int | None
    # The named request the limit is on, when it holds up one request of several.
    request: str | None = None
    # A heavy hog may leave the host too busy for any verdict: a refusal is no error.
    refusal_ok: bool = False


@dataclass(frozen=True)
class JourneyStep:
    """A named request of a journey: the probe's CPU and wait, the checkout's lock held
    hold_ms, or a search PostgreSQL computes for scan_ms."""

    name: str
    cpu_ms: float = 0.0
    wait_ms: float = 0.0
    hold_ms: int | None = None
    scan_ms: float | None = None


@dataclass(frozen=True)
class Callee:
    """A traced service the gateway calls: its sync workers, and each call's wait."""

    name: str
    workers: int
    wait_ms: float

    @property
    def service_ms(self) -> float:
        return self.wait_ms + TRACED_CALL_MS

    @property
    def rps(self) -> float:
        return self.workers / self.service_ms * 1000


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
    # The noisy runs' hog, in cores.
    hog_cores: float = 1.0
    # Whether the plan names the app server's pool size (`workers`).
    plan_workers: bool = True
    # The server's pool set on its command line, or in a config file it reads.
    server_config: Literal["flags", "file"] = "flags"
    # The journey class's walk, in order (empty for the one request of other classes).
    journey: tuple[JourneyStep, ...] = ()
    # The services a traced gateway calls side by side, and whether the plan gives their
    # processes to sample (else they are known from their spans alone).
    callees: tuple[Callee, ...] = ()
    callees_sampled: bool = False
    # The ASGI app's wait is a synchronous call that holds its event loop.
    block: bool = False
    # The sync service an ASGI app awaits on each request (the async_callee_pool class).
    callee: Callee | None = None
    # The database whose row hold_ms holds: PostgreSQL (db_lock) or MariaDB (mariadb_lock).
    database: Literal["postgres", "mariadb"] = "postgres"
    # Each request runs one Redis command costing Redis's main thread this many ms.
    redis_ms: float | None = None

    @property
    def slots(self) -> int:
        return self.workers * self.threads

    @property
    def server_name(self) -> str:
        return server_name(self.server)

    def levels(self) -> list[int]:
        lower, upper, step = self.users
        return list(range(lower, upper + 1, step))

    def expected(self, noisy: bool) -> Truth:
        return self.noisy_truth if noisy and self.noisy_truth is not None else self.truth

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def server_name(server: str) -> str:
    if server == ASGI_SERVER or server in OTHER_SERVERS:
        return server
    return "uwsgi" if server.startswith("uwsgi") else "gunicorn"
