"""Real stacks, each limited in one known way, for checking that the verdict names the limit.

    with scenarios.cpu_quota(workdir) as scenario:
        text = scenario.plan(users=(1, 7, 2), duration_s=2.5)
        execute(parse_plan(text), text, runs_dir)

Every builder is a context manager that starts the stack on 127.0.0.1 and stops it
(processes, cgroup, database cluster) on exit, whatever happens.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from pinchpoint.demo.env import PG_DSN_ENV
from pinchpoint.demo.nginx import ProxyOptions
from pinchpoint.demo.plan import FlowStep, stack_plan
from pinchpoint.demo.stack import DemoStack
from pinchpoint_lab.cgroup import CpuQuota
from pinchpoint_lab.neighbour import CpuHog, starved_generator
from pinchpoint_lab.postgres import PostgresCluster, with_database
from pinchpoint_lab.uwsgi import UwsgiStack

# 2 ms of CPU and 8 ms of waiting: a full pool and a full CPU are different limits.
PROBE = "/sys_perf_check?cpu=2&wait=8"
LIGHT_PROBE = "/sys_perf_check?cpu=0.2&wait=20"


@dataclass
class Scenario:
    """A running stack and the request that loads it."""

    url: str
    components: list[dict[str, Any]]
    path: str
    method: str = "GET"
    think_time_s: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)
    # A flow's name and its steps, walked instead of the one request at `path`.
    flow: tuple[str, tuple[FlowStep, ...]] | None = None
    # Where the run receives the stack's spans (an `[[otlp]]` listen address), and how long
    # past the load it keeps receiving them.
    otlp: tuple[str, float] | None = None

    def plan(
        self,
        users: tuple[int, int, int] = (1, 7, 2),
        duration_s: float = 2.5,
        sampling_s: float = 0.5,
    ) -> str:
        """The plan's text: `users` (lower, upper, step), each step held `duration_s`."""
        return stack_plan(
            self.url,
            self.components,
            users,
            duration_s,
            self.path,
            method=self.method,
            sampling_s=sampling_s,
            think_time_s=self.think_time_s,
            flow=self.flow,
            otlp=self.otlp,
        )


@contextmanager
def gunicorn_pool(workdir: Path, workers: int = 2) -> Iterator[Scenario]:
    """nginx → gunicorn with a small pool of sync workers → the probe."""
    with DemoStack(workdir, workers=workers) as stack:
        yield Scenario(stack.url, stack.components(), PROBE)


@contextmanager
def uwsgi_pool(workdir: Path, workers: int = 2) -> Iterator[Scenario]:
    """nginx `uwsgi_pass` → uWSGI `--processes workers` → the probe."""
    with UwsgiStack(workdir, workers=workers) as stack:
        yield Scenario(stack.url, stack.components(), PROBE)


@contextmanager
def cpu_quota(workdir: Path, cores: float = 0.5, workers: int = 8) -> Iterator[Scenario]:
    """gunicorn with workers to spare, all its processes in a cgroup allowed `cores` CPUs.
    The probe asks 3 ms of CPU and 12 ms of waiting: one user needs about a fifth of a core,
    three need more than half."""
    with CpuQuota(cores) as quota, DemoStack(workdir, workers=workers) as stack:
        master = psutil.Process(int(stack.gunicorn_pid_file.read_text()))
        quota.add([master.pid, *(child.pid for child in master.children(recursive=True))])
        notes = {"cgroup": str(quota.path), "version": quota.version}
        yield Scenario(stack.url, stack.components(), "/sys_perf_check?cpu=3&wait=12", notes=notes)


@contextmanager
def hot_row(workdir: Path, hold_ms: int = 5, workers: int = 8) -> Iterator[Scenario]:
    """gunicorn → the app's `POST /api/hot` → PostgreSQL: every request updates one row
    and holds its lock for hold_ms."""
    from pinchpoint.demo.hot import COUNTERS_SQL

    with PostgresCluster() as pg:
        pg.execute(COUNTERS_SQL)
        with DemoStack(workdir, workers=workers, app_env={PG_DSN_ENV: pg.dsn}) as stack:
            components = with_database(stack.components(), pg.component())
            yield Scenario(stack.url, components, f"/api/hot?hold={hold_ms}", method="POST")


@contextmanager
def db_scan(
    workdir: Path, scan_ms: float = 6.0, workers: int = 8, statements: bool = True
) -> Iterator[Scenario]:
    """gunicorn → the app's `GET /api/scan` → PostgreSQL: every request makes a backend
    scan rows for about scan_ms of CPU, so the database's backends fill the host's cores
    while the app's workers wait; with `statements`, the server has pg_stat_statements."""
    from pinchpoint.demo.scan import SCAN_SQL, rows_for

    with PostgresCluster(statements=statements) as pg:
        pg.execute(SCAN_SQL)
        rows = rows_for(pg.dsn, scan_ms)
        with DemoStack(workdir, workers=workers, app_env={PG_DSN_ENV: pg.dsn}) as stack:
            components = with_database(stack.components(), pg.component())
            yield Scenario(stack.url, components, f"/api/scan?rows={rows}")


@contextmanager
def db_pool(
    workdir: Path, connections: int = 2, threads: int = 16, query_ms: float = 8.0
) -> Iterator[Scenario]:
    """gunicorn's threads → an app that shares `connections` PostgreSQL connections among
    them (its pool) → a statement that waits query_ms in the database: the app's pool, not
    gunicorn's threads nor the database, limits the stack."""
    from pinchpoint_lab.pooled import PooledStack

    with (
        PostgresCluster() as pg,
        PooledStack(workdir, pg.dsn, connections, query_ms, threads=threads) as stack,
    ):
        components = with_database(stack.components(), pg.component())
        yield Scenario(stack.url, components, "/api/report")


@contextmanager
def proxy_limit(workdir: Path, limit: int = 2, workers: int = 8) -> Iterator[Scenario]:
    """nginx lets `limit` requests through at once (limit_conn) and answers the others 503;
    gunicorn behind it has workers to spare. Users think 5 ms between requests, so those
    refused at once do not spin."""
    with DemoStack(workdir, workers=workers, proxy=ProxyOptions(limit_conn=limit)) as stack:
        yield Scenario(stack.url, stack.components(), PROBE, think_time_s=0.005)


@contextmanager
def healthy(workdir: Path, workers: int = 8) -> Iterator[Scenario]:
    """Enough workers and light work (0.2 ms of CPU, 20 ms of waiting): nothing limits."""
    with DemoStack(workdir, workers=workers) as stack:
        yield Scenario(stack.url, stack.components(), LIGHT_PROBE)


@contextmanager
def gthread_pool(workdir: Path, workers: int = 1, threads: int = 2) -> Iterator[Scenario]:
    """nginx → gunicorn gthread, `workers × threads` slots (the plan's workers) → the probe."""
    with DemoStack(workdir, workers=workers, worker_class="gthread", threads=threads) as stack:
        yield Scenario(stack.url, stack.components(), PROBE)


@contextmanager
def uvicorn_loop(workdir: Path, workers: int = 1) -> Iterator[Scenario]:
    """nginx → gunicorn with `workers` uvicorn event loops → the ASGI probe, 4 ms of CPU on
    the loop and 4 ms of awaited waiting: waits overlap without limit, the CPU does not,
    so each process's one core (one thread running the loop) is the limit."""
    with DemoStack(workdir, workers=workers, worker_class="uvicorn") as stack:
        yield Scenario(stack.url, stack.components(), "/sys_perf_check?cpu=4&wait=4")


@contextmanager
def haproxy_queue(workdir: Path, maxconn: int = 2, workers: int = 8) -> Iterator[Scenario]:
    """HAProxy → gunicorn with workers to spare, but HAProxy sends it only `maxconn`
    requests at once: the others wait in HAProxy's queue (Tw, `queue_s`)."""
    options = ProxyOptions(maxconn=maxconn)
    with DemoStack(workdir, workers=workers, front="haproxy", proxy=options) as stack:
        yield Scenario(stack.url, stack.components(), PROBE, notes={"maxconn": maxconn})


@contextmanager
def nginx_chain(workdir: Path, workers: int = 2) -> Iterator[Scenario]:
    """An edge nginx → an inner nginx → gunicorn with a small pool of sync workers."""
    with DemoStack(workdir, workers=workers, front="nginx2") as stack:
        yield Scenario(stack.url, stack.components(), PROBE)


@contextmanager
def nginx_static(workdir: Path, front: str = "nginx") -> Iterator[Scenario]:
    """Only the proxy works: it answers `/static` itself (nginx, or HAProxy with
    front="haproxy"), so the load can reach very high rates on it alone."""
    with DemoStack(workdir, workers=1, front=front) as stack:
        yield Scenario(stack.url, stack.components(), "/static")


@contextmanager
def disk_fsync(workdir: Path, workers: int = 8, kb: int = 64, n: int = 4) -> Iterator[Scenario]:
    """gunicorn with workers to spare → `POST /api/fsync`: each request appends kb KiB and
    fsyncs, n times; the disk's flushes are the limit, not CPU nor the pool."""
    with DemoStack(workdir, workers=workers) as stack:
        path = f"/api/fsync?kb={kb}&n={n}"
        yield Scenario(stack.url, stack.components(), path, method="POST")


@contextmanager
def noisy_neighbour(workdir: Path, cores: float = 2.0, workers: int = 8) -> Iterator[Scenario]:
    """gunicorn with workers to spare, the probe asking 3 ms of CPU and 12 ms of waiting,
    and processes outside the stack burning `cores` of the host's CPU."""
    with DemoStack(workdir, workers=workers) as stack, CpuHog(cores) as hog:
        notes = {"hog_pids": hog.pids, "hog_cores": cores}
        yield Scenario(stack.url, stack.components(), "/sys_perf_check?cpu=3&wait=12", notes=notes)


@contextmanager
def starved_load(
    workdir: Path, hogs: int = 2, core: int = 0, workers: int = 8
) -> Iterator[Scenario]:
    """A healthy stack, but the load generator (this process) pinned to one core that
    `hogs` spinning processes share with it. The stack starts first, so it is not pinned."""
    with (
        DemoStack(workdir, workers=workers) as stack,
        starved_generator(core=core, hogs=hogs) as hog,
    ):
        notes = {"core": core, "hog_pids": hog.pids if hog else []}
        yield Scenario(stack.url, stack.components(), LIGHT_PROBE, notes=notes)


@contextmanager
def asgi_loop(
    workdir: Path, workers: int = 1, path: str = "/work", nginx_only: bool = False
) -> Iterator[Scenario]:
    """nginx → uvicorn (`--workers`, an event loop a process) → a bare ASGI app, uvicorn
    known by its processes alone; with nginx_only, a plan that names nothing behind nginx."""
    from pinchpoint_lab.uvicorn_stack import UvicornStack

    with UvicornStack(workdir, workers) as stack:
        components = stack.components()
        if nginx_only:
            components = [{**components[0], "calls": []}]
        yield Scenario(stack.url, components, path)
