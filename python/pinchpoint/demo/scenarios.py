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

from pinchpoint.demo.cgroup import CpuQuota
from pinchpoint.demo.env import PG_DSN_ENV
from pinchpoint.demo.nginx import ProxyOptions
from pinchpoint.demo.plan import stack_plan
from pinchpoint.demo.postgres import PostgresCluster, with_database
from pinchpoint.demo.stack import DemoStack
from pinchpoint.demo.uwsgi import UwsgiStack

# 2 ms of CPU and 8 ms of waiting: a full pool and a full CPU are different limits.
PROBE = "/sys_perf_check?cpu=2&wait=8"


@dataclass
class Scenario:
    """A running stack and the request that loads it."""

    url: str
    components: list[dict[str, Any]]
    path: str
    method: str = "GET"
    think_time_s: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)

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
        yield Scenario(stack.url, stack.components(), "/sys_perf_check?cpu=0.2&wait=20")
