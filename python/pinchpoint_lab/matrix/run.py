"""Runs drawn scenarios through the real pipeline and judges each verdict."""

from __future__ import annotations

import contextlib
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from pinchpoint.discover.init import init_plan
from pinchpoint.pipeline import execute
from pinchpoint.plan.model import Component, Plan, parse_plan
from pinchpoint_lab.matrix.build import running
from pinchpoint_lab.matrix.score import Outcome, judge
from pinchpoint_lab.matrix.spec import Spec
from pinchpoint_lab.scenarios import Scenario


def run_one(
    spec: Spec,
    workdir: Path,
    noisy: bool = False,
    step_s: float = 2.5,
    find_knee: bool = False,
    discover: bool = False,
) -> tuple[Outcome, dict]:
    """Starts the scenario's stack, steps its users through the pipeline, stops it; the
    judged outcome and the verdict. With `discover`, the plan's components are the ones
    `pinchpoint init` finds from the stack's URL, not the scenario's own."""
    with running(spec, workdir / "stack", noisy=noisy) as scenario:
        text = scenario.plan(users=spec.users, duration_s=step_s)
        exports: dict[str, str] = {}
        names: dict[str, str] = {}
        if discover:
            warm(scenario)
            own = parse_plan(text)
            text = with_discovered_components(text, scenario.url + scenario.path, scenario.method)
            exports = user_exports(parse_plan(text), own)
            names = discovered_names(own, parse_plan(text))
        plan = parse_plan(text)
        if find_knee:
            plan = plan.with_find_knee(text, spec.name)
        with exported(exports):
            outcome = execute(plan, text, workdir / "runs")
    return judge(spec, outcome.verdict, noisy, names), outcome.verdict


def discovered_names(own: Plan, discovered: Plan) -> dict[str, str]:
    """Each of the scenario's components by the name init gave the same server (the one
    with its log file, its pid file or its processes): init names a server for what it is
    (gunicorn), where the scenario names it for its role (shipping)."""
    names = {}
    for mine in own.component:
        for found in discovered.component:
            if _same_server(mine, found):
                names[mine.name] = found.name
                break
    return names


def _same_server(a: Component, b: Component) -> bool:
    if a.log is not None and b.log is not None and a.log.path == b.log.path:
        return True
    if a.process is None or b.process is None:
        return False
    if a.process.pid_file is not None and a.process.pid_file == b.process.pid_file:
        return True
    return bool(set(a.process.pids) & set(b.process.pids))


def user_exports(discovered: Plan, own: Plan) -> dict[str, str]:
    """The variables a plan init wrote asks the user to set before the run (a store's
    connection URL, its password in it), unset here: each given the value the scenario's
    own plan reads for its store of the same kind, as the user would export it."""
    exports = {}
    for component in discovered.component:
        wanted = _store_variable(component)
        if wanted is None or wanted[1] in os.environ:
            continue
        for mine in own.component:
            have = _store_variable(mine)
            if have is not None and have[0] == wanted[0] and have[1] in os.environ:
                exports[wanted[1]] = os.environ[have[1]]
                break
    return exports


def _store_variable(component: Component) -> tuple[str, str] | None:
    """The store's kind and the variable its connection string is read from."""
    if component.redis is not None:
        return "redis", component.redis.url_env
    if component.database is not None and component.database.dsn_env is not None:
        return component.database.kind, component.database.dsn_env
    return None


@contextlib.contextmanager
def exported(variables: dict[str, str]) -> Iterator[None]:
    """The variables set in this process's environment while the block runs."""
    os.environ.update(variables)
    try:
        yield
    finally:
        for name in variables:
            os.environ.pop(name, None)


def warm(scenario: Scenario) -> None:
    """Sends each request of the scenario's flow once, as the traffic a stack in service
    has served before anyone runs `init` on it: an app opens its database connections at
    the first request that needs one, and `init` follows the connections it holds."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for step in scenario.flow[1] if scenario.flow else ():
        request = urllib.request.Request(scenario.url + step.path, method=step.method)
        with contextlib.suppress(OSError), opener.open(request, timeout=10) as answer:
            answer.read()


def with_discovered_components(text: str, url: str, method: str = "GET") -> str:
    """A plan's text with its `[[component]]` tables replaced by those `pinchpoint init`
    writes for the stack serving `url`."""
    found, _ = init_plan(url, method)
    start = found.find("\n\n", found.find("[[request]]"))
    discovered = found[start:]
    if "[[otlp]]" in text:
        # The scenario's receiver is where init's points (the stack exports there), with
        # the time it keeps receiving past the load: one receiver on an address.
        discovered = without_tables(discovered, "[[otlp]]", "[otlp.")
    return without_components(text).rstrip("\n") + "\n" + discovered


def without_components(text: str) -> str:
    """A plan's text without its `[[component]]` tables (and their sub-tables)."""
    return without_tables(text, "[[component]]", "[component.")


def without_tables(text: str, table: str, sub: str) -> str:
    """A plan's text without the `table` tables and their sub-tables (`sub`...)."""
    kept, inside = [], False
    for line in text.splitlines():
        if line.startswith(table):
            inside = True
        elif line.startswith("[") and not line.startswith(sub):
            inside = False
        if not inside:
            kept.append(line)
    return "\n".join(kept) + "\n"
