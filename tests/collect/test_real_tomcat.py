"""A real Tomcat 10 on loopback, started once for the module (it takes seconds): its access
log read by the tomcat format and matched by tag, its thread pool read from its server.xml."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from collect.served import get, wait_lines, wait_listening
from pinchpoint.collect.logs.reader import FileCounts, collect_component, mark
from pinchpoint.collect.servers import pool_of, read_process
from pinchpoint.collect.servers.pool import THREADS
from pinchpoint.logformats import get_parser
from pinchpoint_lab.ports import end, free_port

HOME = Path("/usr/share/tomcat10")
JAVA = shutil.which("java") or "/usr/bin/java"
# As written in server.xml.
PATTERN = "%h %l %u %t &quot;%r&quot; %s %b %D %{end:msec}t &quot;%{X-Pinchpoint}i&quot;"
THREADS_MAX, ACCEPT = 7, 33
# ?ms=N sleeps N ms (10 s at most), ?code=C answers status C.
JSP = """<%@ page session="false" %><%
String ms = request.getParameter("ms");
if (ms != null) Thread.sleep(Math.min(Long.parseLong(ms), 10000));
String code = request.getParameter("code");
if (code != null) response.setStatus(Integer.parseInt(code));
%>ok
"""

pytestmark = pytest.mark.skipif(
    not (HOME / "bin" / "bootstrap.jar").exists() or not os.access(JAVA, os.X_OK),
    reason="Tomcat 10 is not installed (apt: tomcat10)",
)


@dataclass(frozen=True)
class Tomcat:
    process: subprocess.Popen[bytes]
    port: int
    access_log: Path


def _server_xml(port: int) -> str:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<Server port="-1">
  <Service name="Catalina">
    <Executor name="pool" maxThreads="{THREADS_MAX}" minSpareThreads="2"/>
    <Connector executor="pool" address="127.0.0.1" port="{port}" protocol="HTTP/1.1"
               acceptCount="{ACCEPT}"/>
    <Engine name="Catalina" defaultHost="localhost">
      <Host name="localhost" appBase="webapps" unpackWARs="false" autoDeploy="false">
        <Valve className="org.apache.catalina.valves.AccessLogValve" directory="logs"
               prefix="access" suffix=".log" rotatable="false" buffered="false"
               pattern="{PATTERN}"/>
      </Host>
    </Engine>
  </Service>
</Server>
"""


@pytest.fixture(scope="module")
def tomcat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tomcat]:
    base = tmp_path_factory.mktemp("tomcat")
    for folder in ("conf", "logs", "temp", "work", "webapps/ROOT"):
        (base / folder).mkdir(parents=True)
    port = free_port()
    (base / "conf" / "server.xml").write_text(_server_xml(port))
    shutil.copy(HOME / "etc" / "web.xml", base / "conf" / "web.xml")  # the JSP servlet
    (base / "webapps" / "ROOT" / "app.jsp").write_text(JSP)
    classpath = f"{HOME / 'bin' / 'bootstrap.jar'}:{HOME / 'bin' / 'tomcat-juli.jar'}"
    process = subprocess.Popen(
        [JAVA, f"-Dcatalina.home={HOME}", f"-Dcatalina.base={base}",
         f"-Djava.io.tmpdir={base / 'temp'}", "-cp", classpath,
         "org.apache.catalina.startup.Bootstrap", "start"],
        stdout=(base / "logs" / "console.log").open("wb"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    try:
        wait_listening(process, port, base / "logs" / "console.log", 60)
        # The JSP compiled before any test's mark (a second).
        assert get(port, "/app.jsp") == 200
        yield Tomcat(process, port, base / "logs" / "access.log")
    finally:
        end(process)


def test_real_tomcat_access_log_is_matched_by_tag(tomcat: Tomcat) -> None:
    wait_lines(tomcat.access_log, 1)
    position = mark(tomcat.access_log)
    before = tomcat.access_log.read_bytes().count(b"\n")
    started = time.time()
    assert get(tomcat.port, "/app.jsp?ms=150&pp_run=r1&pp_users=2&pp_req=1") == 200
    assert get(tomcat.port, "/app.jsp?code=503&pp_run=r1&pp_users=4&pp_req=2") == 503
    assert get(tomcat.port, "/none", {"X-Pinchpoint": "run=r1; users=4; req=3"}) == 404
    assert get(tomcat.port, "/app.jsp?pp_run=r0&pp_users=2&pp_req=1") == 200
    assert get(tomcat.port, "/app.jsp") == 200
    finished = time.time()
    wait_lines(tomcat.access_log, before + 5)

    rows, counts = collect_component(
        "java", tomcat.access_log, get_parser("tomcat", PATTERN), "r1", position
    )

    assert counts == FileCounts(
        component="java", path=str(tomcat.access_log), lines=5, matched=3, other_run=1,
        untagged=1, unparseable=0,
    )  # fmt: skip
    rows.sort(key=lambda row: row.req_id or 0)
    assert [(row.users, row.req_id, row.status) for row in rows] == [
        (2, 1, 200),
        (4, 2, 503),
        (4, 3, 404),
    ]
    # %D in microseconds: the JSP slept 150 ms (in milliseconds it would read 0.00015 s).
    assert 0.15 <= rows[0].duration_s < 2
    for row in rows:
        assert 0 < row.duration_s < 2
        assert row.ts is not None and started <= row.ts <= finished  # %{end:msec}t


def test_real_tomcat_pool_is_its_connectors_executor(tomcat: Tomcat) -> None:
    process = read_process(tomcat.process.pid, 0, environ=False)
    assert process is not None
    pool = pool_of(process, 2)
    assert pool is not None
    assert (pool.kind, pool.processes, pool.threads, pool.slots) == (THREADS, 1, 7, 7)
    assert f"Executor pool maxThreads = {THREADS_MAX}, acceptCount = {ACCEPT}" in pool.source
