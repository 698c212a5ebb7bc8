"""init knows PHP-FPM, Tomcat and Node.js by their programs and command lines: behind a real
nginx, PHP-FPM's pool file (the pool nginx passes to, its size, access log and format),
Tomcat's server.xml (the Connector's threads, the AccessLogValve's file and pattern) and a
Node.js cluster with no log of its own, each written as a component the plan loader takes
and whose log lines, where it has a log, the plan's format reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from app_stacks import (
    EXPRESS,
    FPM,
    FPM_FORMAT,
    JAVA,
    NGINX,
    NODE,
    TOMCAT_HOME,
    express,
    fastcgi_to,
    nginx_front,
    php_fpm,
    tomcat,
)
from discover_helpers import HOST, fetch

from pinchpoint.discover.init import init_plan
from pinchpoint.discover.node import MORGAN_LINE
from pinchpoint.discover.walk import Discovery
from pinchpoint.logformats import get_parser
from pinchpoint.logformats.tag import Tag, find_tag
from pinchpoint.plan.model import Component, Plan, parse_plan
from pinchpoint_lab.ports import free_port
from pinchpoint_lab.waits import until

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(NGINX is None, reason="nginx is not installed"),
]
needs_fpm = pytest.mark.skipif(not FPM, reason="PHP-FPM is not installed (apt: php8.2-fpm)")
TAGGED = "/page?pp_run=r1&pp_users=3&pp_req=9"


def _init(port: int) -> tuple[str, Plan, Discovery]:
    text, found = init_plan(f"http://{HOST}:{port}/page")
    return text, parse_plan(text, "plan.toml"), found


def _component(plan: Plan, name: str) -> Component:
    [component] = [c for c in plan.component if c.name == name]
    return component


def _tagged_line(path: Path) -> str:
    """The line of the request to TAGGED, once the server has written it whole."""
    lines = lambda: path.read_text().splitlines(keepends=True) if path.exists() else []  # noqa: E731
    assert until(lambda: any("pp_req=9" in x and x.endswith("\n") for x in lines())), path
    return next(x for x in lines() if "pp_req=9" in x).rstrip("\n")


@needs_fpm
def test_php_fpm_behind_fastcgi_pass_is_its_pool_with_its_own_format(tmp_path: Path) -> None:
    socket = tmp_path / "app.sock"
    pool = (
        f"pm = static\npm.max_children = 3\naccess.log = {tmp_path / 'fpm-access.log'}\n"
        f'access.format = "{FPM_FORMAT}"\n'
    )
    with (
        php_fpm(tmp_path, str(socket), pool) as master,
        nginx_front(tmp_path, fastcgi_to(tmp_path, f"unix:{socket}")) as port,
    ):
        text, plan, found = _init(port)
        assert fetch(f"http://{HOST}:{port}{TAGGED}") == 200
        line = _tagged_line(tmp_path / "fpm-access.log")
    assert [c.name for c in plan.component] == ["nginx", "php-fpm"], found.problems
    assert _component(plan, "nginx").calls == ["php-fpm"]
    fpm = _component(plan, "php-fpm")
    assert fpm.role == "app_server"
    assert fpm.log is not None and fpm.process is not None
    assert (fpm.log.path, fpm.log.format) == (str(tmp_path / "fpm-access.log"), "php-fpm")
    # The pool file's format, its escaped quotes read as PHP-FPM reads them.
    assert fpm.log.log_format == '%R - %u %t "%m %r%Q%q" %s %{mili}d'
    assert fpm.process.pid_file == str(tmp_path / "fpm.pid")
    tier = found.tiers[1]
    assert (tier.pid, tier.slots) == (master, 3)
    pool_file = tmp_path / "pool.d" / "app.conf"
    assert (
        f"# slots: 3, one request per process: pm = static, pm.max_children = 3 from {pool_file}"
        in text
    )
    assert "the master also runs pools other" in text
    assert tier.warnings == []
    assert "lower = 1\nupper = 8\nstep = 1\n" in text  # a pool of 3: steps of 1 user
    record = get_parser("php-fpm", fpm.log.log_format).parse(line)
    assert record is not None and record.duration_s is not None and record.status == 200
    assert find_tag(record.target) == Tag("r1", 3, 9)


def _warning(text: str, start: str) -> str:
    [warning] = [w for w in re.findall(r"^# warning: (.*)$", text, re.M) if w.startswith(start)]
    return warning


@needs_fpm
@pytest.mark.parametrize("logged", [False, True])
def test_php_fpm_on_tcp_without_a_timed_log_is_told_the_lines_to_add(
    tmp_path: Path, logged: bool
) -> None:
    fcgi = free_port()
    log = f"access.log = {tmp_path / 'fpm-access.log'}\n" if logged else ""
    pool = f"pm = dynamic\npm.max_children = 5\npm.start_servers = 2\n{log}"
    pool += "pm.min_spare_servers = 1\npm.max_spare_servers = 2\n"
    with (
        php_fpm(tmp_path, f"{HOST}:{fcgi}", pool),
        nginx_front(tmp_path, fastcgi_to(tmp_path, f"{HOST}:{fcgi}")) as port,
    ):
        text, plan, found = _init(port)
    fpm = _component(plan, "php-fpm")
    assert (fpm.log, found.tiers[1].slots) == (None, 5)
    pool_file = tmp_path / "pool.d" / "app.conf"
    assert f"pool [app] serves the request: listen = {HOST}:{fcgi} from {pool_file}" in text
    if logged:
        warning = _warning(text, "pool [app]'s access.format (PHP-FPM's default access.format)")
        assert "logs no duration" in warning
    else:
        warning = _warning(text, "pool [app] writes no access log")
        assert f"to [app] in {pool_file}" in warning
    # The line it says to add, as a pool file holds it, gives a format the plan reads.
    [written] = re.findall(r'`access.format = "(.*?)"` ', warning)
    assert written == FPM_FORMAT
    assert (
        get_parser("php-fpm", written).parse(
            '127.0.0.1 -  28/Nov/2026:22:37:22 +0000 "GET /a?pp_run=r1&pp_users=1&pp_req=2" 200 12.5'
        )
        is not None
    )


@pytest.mark.skipif(
    not (TOMCAT_HOME / "bin" / "bootstrap.jar").exists() or not JAVA,
    reason="Tomcat 10 is not installed (apt: tomcat10)",
)
def test_tomcat_behind_proxy_pass_is_its_connector_and_access_log(tmp_path: Path) -> None:
    pattern = "%h %l %u %t &quot;%r&quot; %s %b %D"
    with (
        tomcat(tmp_path, threads=7, pattern=pattern) as (backend, pid),
        nginx_front(tmp_path / "nginx", f"proxy_pass http://{HOST}:{backend};") as port,
    ):
        text, plan, found = _init(port)
        assert fetch(f"http://{HOST}:{port}{TAGGED}") == 200
        line = _tagged_line(tmp_path / "logs" / "access.log")
    assert [c.name for c in plan.component] == ["nginx", "tomcat"], found.problems
    assert _component(plan, "nginx").calls == ["tomcat"]
    component = _component(plan, "tomcat")
    assert component.role == "app_server"
    assert component.log is not None and component.process is not None
    assert (component.log.path, component.log.format) == (
        str(tmp_path / "logs" / "access.log"),
        "tomcat",
    )
    assert component.log.log_format == '%h %l %u %t "%r" %s %b %D'
    assert component.process.pid_file == str(tmp_path / "tomcat.pid")  # from CATALINA_PID
    assert (found.tiers[1].pid, found.tiers[1].slots) == (pid, 7)
    server_xml = tmp_path / "conf" / "server.xml"
    assert f"maxThreads = 7, acceptCount = 20 from {server_xml}" in text
    assert "tomcat's log is not known" not in text
    record = get_parser("tomcat", component.log.log_format).parse(line)
    assert record is not None and record.duration_s is not None
    assert find_tag(record.target) == Tag("r1", 3, 9)


@pytest.mark.skipif(
    not NODE or not (EXPRESS / "node_modules" / "morgan").is_dir(),
    reason="node and the Express fixture's packages are needed (make system-deps-test)",
)
def test_a_node_cluster_is_one_component_told_how_to_log_with_morgan(tmp_path: Path) -> None:
    with (
        express(tmp_path, MORGAN_LINE, workers=2) as (backend, pid),
        nginx_front(tmp_path / "nginx", f"proxy_pass http://{HOST}:{backend};") as port,
    ):
        text, plan, found = _init(port)
        assert fetch(f"http://{HOST}:{port}{TAGGED}") == 200
        line = _tagged_line(tmp_path / "morgan.log")
    assert [c.name for c in plan.component] == ["nginx", "node"], found.problems
    node = _component(plan, "node")
    assert (node.role, node.log, found.tiers[1].pid) == ("app_server", None, pid)
    assert "an event loop in each of its 2 worker processes counted" in text
    warning = _warning(text, "Node.js logs no requests of its own")
    assert f"require('morgan')('{MORGAN_LINE}'" in warning
    # The format it says to log with, as the app logged it through nginx, is read whole.
    record = get_parser("morgan", MORGAN_LINE).parse(line)
    assert record is not None and record.status == 200 and record.ts is not None
    assert record.duration_s is not None and find_tag(record.target) == Tag("r1", 3, 9)
