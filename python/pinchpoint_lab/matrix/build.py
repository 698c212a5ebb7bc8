"""Starts the real stack of a drawn scenario, with a CPU hog beside it when asked.

The plan's components say what a user's would: the app server's `workers` only when the
scenario draws it (spec.plan_workers); otherwise the verdict learns the pool itself. A
traced scenario's plan receives its spans on a free loopback port (`[[otlp]]`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psutil

from pinchpoint.demo.env import PG_DSN_ENV
from pinchpoint.demo.hot import COUNTERS_SQL
from pinchpoint.demo.nginx import ProxyOptions
from pinchpoint.demo.plan import FlowStep
from pinchpoint.demo.scan import SCAN_SQL, rows_for
from pinchpoint.demo.stack import DemoStack
from pinchpoint_lab.blkio import DiskLimit
from pinchpoint_lab.cgroup import CpuQuota
from pinchpoint_lab.env import ASGI_CALL_ENV, FANOUT_CALLEES_ENV, FANOUT_PATH, FANOUT_WAIT_ENV
from pinchpoint_lab.mariadb import MariadbServer
from pinchpoint_lab.matrix.spec import (
    ASGI_SERVER,
    FLOW,
    GATEWAY,
    OTHER_SERVERS,
    Callee,
    JourneyStep,
    Spec,
)
from pinchpoint_lab.neighbour import CpuHog, starved_generator
from pinchpoint_lab.netns import ShapedLink
from pinchpoint_lab.postgres import PostgresCluster, with_database
from pinchpoint_lab.redis_server import RedisServer
from pinchpoint_lab.scenarios import Scenario
from pinchpoint_lab.server_stacks import STACKS
from pinchpoint_lab.store_stack import StoreStack, loops_for, prepare_counters
from pinchpoint_lab.sync_callee import SyncCallee
from pinchpoint_lab.traced import (
    GATEWAY_APP,
    SERVICE_APP,
    TracedService,
    TracedStack,
    otlp_endpoint,
    otlp_listen,
)
from pinchpoint_lab.uvicorn_stack import UvicornStack
from pinchpoint_lab.uwsgi import UwsgiStack

# A hog never outlives a scenario by much, even if the run is killed.
HOG_MAX_S = 900
# The run keeps receiving spans this long past the load: the exporters send them in batches.
OTLP_SETTLE_S = 1.5


def _path(spec: Spec, scan_rows: int | None = None) -> tuple[str, str]:
    if spec.static:
        return "/static", "GET"
    if spec.hold_ms is not None:
        return f"/api/hot?hold={spec.hold_ms}", "POST"
    if scan_rows is not None:
        return f"/api/scan?rows={scan_rows}", "GET"
    if spec.fsync_kb is not None:
        return f"/api/fsync?kb={spec.fsync_kb}&n={spec.fsync_n}", "GET"
    size = f"&bytes={spec.response_bytes}" if spec.response_bytes else ""
    return _probe(spec.cpu_ms, spec.wait_ms) + size, "GET"


def _probe(cpu_ms: float, wait_ms: float) -> str:
    return f"/sys_perf_check?cpu={cpu_ms:.2f}&wait={wait_ms:.2f}"


def asgi_path(spec: Spec) -> str:
    """The ASGI probe's request: its CPU and wait, blocking the loop or awaited, and the
    callee's call where the spec has one."""
    block = int(spec.block)
    call = int(spec.callee is not None)
    return f"/work?cpu={spec.cpu_ms:.2f}&wait={spec.wait_ms:.2f}&block={block}&call={call}"


def _flow_step(step: JourneyStep, scan_rows: dict[str, int]) -> FlowStep:
    if step.hold_ms is not None:
        return FlowStep(step.name, f"/api/checkout?hold={step.hold_ms}", "POST")
    if step.name in scan_rows:
        return FlowStep(step.name, f"/api/scan?rows={scan_rows[step.name]}")
    return FlowStep(step.name, _probe(step.cpu_ms, step.wait_ms))


def journey_flow(
    spec: Spec, scan_rows: dict[str, int] | None = None
) -> tuple[str, tuple[FlowStep, ...]] | None:
    """The journey's flow; a step that scans reads the rows PostgreSQL scans in its scan_ms."""
    if not spec.journey:
        return None
    return FLOW, tuple(_flow_step(s, scan_rows or {}) for s in spec.journey)


def _worker_class(spec: Spec) -> tuple[str, int]:
    """gunicorn's worker class for the spec's server, and its threads."""
    worker_class = spec.server.split("-", 1)[1]
    return worker_class, spec.threads if worker_class == "gthread" else 1


def as_planned(spec: Spec, components: list[dict]) -> list[dict]:
    """The components, the app server's `workers` left out unless the spec plans it."""
    if spec.plan_workers:
        return components
    return [_without_workers(c) if c.get("role") == "app_server" else c for c in components]


def _without_workers(component: dict) -> dict:
    return {k: v for k, v in component.items() if k != "workers"}


def _stack(
    spec: Spec, workdir: Path, app_env: dict[str, str], link: ShapedLink | None
) -> DemoStack:
    proxy = None
    if spec.limit_conn is not None:
        proxy = ProxyOptions(limit_conn=spec.limit_conn)
    elif spec.maxconn is not None:
        proxy = ProxyOptions(maxconn=spec.maxconn)
    elif spec.proxy_workers != 1:
        proxy = ProxyOptions(workers=spec.proxy_workers)
    options: dict = {"front": spec.front, "app_env": app_env, "server_config": spec.server_config}
    if link is not None:
        options["server_netns"] = (link.prefix, link.ns_address)
    if proxy is not None:
        options["proxy"] = proxy
    if spec.server.startswith("uwsgi"):
        return UwsgiStack(workdir, spec.workers, threads=spec.threads, **options)
    worker_class, threads = _worker_class(spec)
    return DemoStack(workdir, spec.workers, worker_class=worker_class, threads=threads, **options)


def _server_pids(stack: DemoStack) -> list[int]:
    master = psutil.Process(int(stack.gunicorn_pid_file.read_text().split()[0]))
    return [master.pid, *(child.pid for child in master.children(recursive=True))]


@contextmanager
def running(spec: Spec, workdir: Path, noisy: bool = False) -> Iterator[Scenario]:
    """The scenario's stack, started and stopped again whatever happens; with `noisy`, a
    process outside the stack spinning on a core the whole time."""
    workdir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        if spec.callees:
            scenario = _traced(spec, workdir, stack)
        elif spec.server == ASGI_SERVER:
            scenario = _asgi(spec, workdir, stack)
        elif spec.server in OTHER_SERVERS:
            scenario = _other_server(spec, workdir, stack)
        elif spec.database == "mariadb" or spec.redis_ms is not None:
            scenario = _store(spec, workdir, stack)
        else:
            scenario = _demo(spec, workdir, stack)
        if noisy:
            stack.enter_context(CpuHog(spec.hog_cores, max_seconds=HOG_MAX_S))
        if spec.starved:
            stack.enter_context(starved_generator(max_seconds=HOG_MAX_S))
        yield scenario


def _demo(spec: Spec, workdir: Path, stack: ExitStack) -> Scenario:
    """The demo app's stack, with its database, quota, link or disk limit, in `stack`."""
    app_env: dict[str, str] = {}
    database = None
    scan_rows = None
    scans = {s.name: s.scan_ms for s in spec.journey if s.scan_ms is not None}
    step_rows: dict[str, int] = {}
    if spec.hold_ms is not None or spec.scan_ms is not None or scans:
        pg = stack.enter_context(PostgresCluster())
        pg.execute(COUNTERS_SQL if spec.hold_ms is not None else SCAN_SQL)
        if spec.scan_ms is not None:
            scan_rows = rows_for(pg.dsn, spec.scan_ms)
        step_rows = {name: rows_for(pg.dsn, ms) for name, ms in scans.items()}
        app_env[PG_DSN_ENV] = pg.dsn
        database = pg.component()
    quota = stack.enter_context(CpuQuota(spec.quota)) if spec.quota else None
    if quota is not None and spec.quota_on == "database" and database is not None:
        # The backends the app's workers connect to are forked into the postmaster's.
        quota.add(database["process"]["pids"])
    link = stack.enter_context(ShapedLink(spec.link_bytes_s)) if spec.link_bytes_s else None
    demo = stack.enter_context(_stack(spec, workdir, app_env, link))
    if quota is not None and spec.quota_on == "server":
        quota.add(_server_pids(demo))
    if spec.disk_write_bytes_s:
        disk = stack.enter_context(DiskLimit(spec.disk_write_bytes_s, str(workdir)))
        disk.add(_server_pids(demo))
    components = as_planned(spec, demo.components())
    if database is not None:
        components = with_database(components, database)
    path, method = _path(spec, scan_rows)
    return Scenario(
        demo.url,
        components,
        path,
        method=method,
        think_time_s=spec.think_ms / 1000,
        flow=journey_flow(spec, step_rows),
    )


def _other_server(spec: Spec, workdir: Path, stack: ExitStack) -> Scenario:
    """nginx in front of PHP-FPM, Tomcat or Node.js, in `stack`."""
    server = stack.enter_context(STACKS[spec.server](workdir, spec.slots))
    path = server.path(spec.cpu_ms, spec.wait_ms, spec.block)
    return Scenario(server.url, as_planned(spec, server.components()), path)


def _store(spec: Spec, workdir: Path, stack: ExitStack) -> Scenario:
    """gunicorn's store app and the MariaDB whose hot row it updates, or the Redis whose
    one core its command costs, in `stack`."""
    worker_class, threads = _worker_class(spec)
    options: dict = {"worker_class": worker_class, "threads": threads, "front": spec.front,
                     "server_config": spec.server_config}  # fmt: skip
    if spec.redis_ms is not None:
        redis = stack.enter_context(RedisServer())
        app = stack.enter_context(StoreStack(workdir, spec.workers, redis=redis, **options))
        path, method = f"/api/redis?loops={loops_for(redis, spec.redis_ms)}", "GET"
    else:
        mariadb = stack.enter_context(MariadbServer())
        prepare_counters(mariadb)
        app = stack.enter_context(StoreStack(workdir, spec.workers, mariadb=mariadb, **options))
        path, method = f"/api/hot?hold={spec.hold_ms}", "POST"
    return Scenario(app.url, as_planned(spec, app.components()), path, method=method)


def _asgi(spec: Spec, workdir: Path, stack: ExitStack) -> Scenario:
    """uvicorn's stack running the ASGI probe, and the sync service it awaits (started
    first) where the spec has one, in `stack`."""
    app_env: dict[str, str] = {}
    callee = None
    if spec.callee is not None:
        callee = SyncCallee(workdir / spec.callee.name, spec.callee.workers, spec.server_config)
        stack.enter_context(callee)
        app_env[ASGI_CALL_ENV] = callee.url + _probe(0.0, spec.callee.wait_ms)
    uvicorn = UvicornStack(workdir, spec.workers, front=spec.front, app_env=app_env)
    stack.enter_context(uvicorn)
    components = asgi_components(spec, uvicorn.components(), callee)
    return Scenario(uvicorn.url, components, asgi_path(spec))


def asgi_components(spec: Spec, components: list[dict], callee: SyncCallee | None) -> list[dict]:
    """uvicorn's stack's components, uvicorn calling the spec's callee where it has one."""
    if spec.callee is None or callee is None:
        return as_planned(spec, components)
    name = spec.callee.name
    calling = [{**c, "calls": [name]} if c["name"] == ASGI_SERVER else c for c in components]
    return as_planned(spec, [*calling, callee.component(name)])


def _traced(spec: Spec, workdir: Path, stack: ExitStack) -> Scenario:
    """The gateway's stack and the services it calls side by side, all traced, exporting
    their spans to the run's OTLP receiver; in `stack`, the callees first."""
    listen = otlp_listen()
    gateway, services = fanout_stacks(spec, workdir, otlp_endpoint(listen))
    for service in services:
        stack.enter_context(service)
    stack.enter_context(gateway)
    components = fanout_components(spec, gateway, services)
    return Scenario(gateway.url, components, FANOUT_PATH, otlp=(listen, OTLP_SETTLE_S))


def fanout_stacks(
    spec: Spec, workdir: Path, endpoint: str
) -> tuple[TracedStack, list[TracedService]]:
    """The gateway's stack and its callees, not started, exporting spans to `endpoint`."""
    services = [_callee(spec, c, workdir, endpoint) for c in spec.callees]
    worker_class, threads = _worker_class(spec)
    gateway = TracedStack(
        workdir / GATEWAY,
        endpoint,
        GATEWAY,
        GATEWAY_APP,
        spec.workers,
        env={FANOUT_CALLEES_ENV: " ".join(s.url for s in services)},
        worker_class=worker_class,
        threads=threads,
        front=spec.front,
        server_config=spec.server_config,
    )
    return gateway, services


def fanout_components(
    spec: Spec, gateway: TracedStack, services: list[TracedService]
) -> list[dict]:
    """The plan's components: the gateway's, and its callees, sampled as the spec draws."""
    callees = [s.component(sampled=spec.callees_sampled) for s in services]
    return as_planned(spec, [*gateway.components(), *callees])


def _callee(spec: Spec, callee: Callee, workdir: Path, endpoint: str) -> TracedService:
    """A service of sync workers whose every call waits `callee.wait_ms`."""
    return TracedService(
        workdir / callee.name,
        endpoint,
        callee.name,
        SERVICE_APP,
        callee.workers,
        env={FANOUT_WAIT_ENV: f"{callee.wait_ms:g}"},
        server_config=spec.server_config,
    )
