"""Apache httpd LogFormat lines: documented samples, and lines written by a real Apache."""

import contextlib
import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pinchpoint.collect.logs.reader import FileCounts, collect_component, mark
from pinchpoint.logformats import FormatError, get_parser
from pinchpoint.logformats.apache import APACHE_FORMAT, ApacheParser, compile_format
from pinchpoint.logformats.tag import Tag, find_tag, parse_header
from pinchpoint_lab.ports import free_port

SAMPLES = Path(__file__).parent / "samples"
TS_0915_UTC = 1795338900.0  # 22/Nov/2026:10:15:00 +0100

# As written inside the quotes of a LogFormat line.
BRIEF_FORMAT = '%h %l %u %t \\"%r\\" %>s %b %D %T'
PP_FORMAT = (
    '%h %l %u %t "%r" %>s %b %D %T "%{X-Pinchpoint}i" %{ms}T %{msec}t %{end:usec}t "%{User-Agent}i"'
)


def test_default_format_is_common_log_format_plus_microseconds() -> None:
    parser = get_parser("apache")
    assert isinstance(parser, ApacheParser)
    assert parser.log_format == APACHE_FORMAT
    line = (
        '192.168.1.5 - alice [22/Nov/2026:10:15:00 +0100] "GET /a?pp_run=r1&pp_users=2&pp_req=9 '
        'HTTP/1.1" 200 512 10250'
    )
    record = parser.parse(line)
    assert record is not None
    assert record.duration_s == 0.01025
    assert record.status == 200
    assert record.upstream_s is None
    assert record.ts == TS_0915_UTC + 0.01025  # %t is when the request came in
    assert find_tag(record.target) == Tag("r1", 2, 9)


def test_escaped_quotes_of_the_config_file_and_microseconds_win_over_seconds() -> None:
    parser = get_parser("apache", BRIEF_FORMAT)
    line = (
        '127.0.0.1 - - [22/Nov/2026:10:15:00 +0100] "GET /x?pp_run=r1&pp_users=4&pp_req=17 '
        'HTTP/1.1" 404 - 1999999 1'
    )
    record = parser.parse(line)
    assert record is not None
    assert record.duration_s == 1.999999
    assert record.status == 404
    assert find_tag(record.target) == Tag("r1", 4, 17)


@pytest.mark.parametrize(
    ("fmt", "value", "seconds"),
    [("%{us}T", "2500", 0.0025), ("%{ms}T", "3", 0.003), ("%T", "2", 2.0), ("%{s}T", "2", 2.0)],
)
def test_duration_directives(fmt: str, value: str, seconds: float) -> None:
    record = get_parser("apache", f"%>s {fmt}").parse(f"200 {value}")
    assert record is not None
    assert record.duration_s == seconds


def test_end_time_header_and_escaped_agent() -> None:
    line = (
        '127.0.0.1 - - [22/Nov/2026:10:15:00 +0100] "GET /ok HTTP/1.1" 200 3 479 0 '
        '"run=r1; users=8; req=5" 0 1795338900000 1795338900000479 '
        '"curl/8 (say \\"hi\\")"'
    )
    record = get_parser("apache", PP_FORMAT).parse(line)
    assert record is not None
    assert record.duration_s == 0.000479
    assert record.ts == 1795338900.000479  # %{end:usec}t
    assert find_tag(record.target) is None
    assert record.tag_header is not None
    assert parse_header(record.tag_header) == Tag("r1", 8, 5)


def test_start_time_in_milliseconds_plus_duration() -> None:
    record = get_parser("apache", "%{msec}t %D").parse("1795338900250 1000")
    assert record is not None
    assert record.ts == pytest.approx(1795338900.251)


def test_path_and_query_directives_and_original_status() -> None:
    parser = get_parser("apache", "%m %U%q %s %>s %D")
    record = parser.parse("GET /a b?pp_run=r1&pp_users=2&pp_req=3 302 200 15")
    assert record is not None
    assert record.status == 200  # the final status
    assert find_tag(record.target) == Tag("r1", 2, 3)
    original = get_parser("apache", "%U%q %s %D").parse("/a 302 15")
    assert original is not None
    assert original.status == 302


def test_conditional_directive_logs_a_dash() -> None:
    parser = get_parser("apache", '%>s %D "%!200,304{Referer}i" %400,500{X-Pinchpoint}i')
    record = parser.parse('200 10 "-" -')
    assert record is not None
    assert record.tag_header is None
    record = parser.parse('500 10 "https://x/" run=r1; users=1; req=2')
    assert record is not None
    assert record.tag_header == "run=r1; users=1; req=2"


def test_percent_literal_and_repeated_directive() -> None:
    parser = compile_format("%% %D %D")
    assert parser.parse("% 5 5") is not None
    assert parser.parse("x 5 5") is None


def test_format_without_duration_or_directives_is_refused() -> None:
    with pytest.raises(FormatError, match="%D"):
        get_parser("apache", '%h %l %u %t "%r" %>s %b')
    with pytest.raises(FormatError, match="no %directive"):
        compile_format("plain text")


@pytest.mark.parametrize(
    "line",
    [
        '127.0.0.1 - - [22/Nov/2026:10:15:00 +0100] "GET / HTTP/1.1" 200 512 fast',
        "[Sun Nov 22 03:32:03.689043 2026] [mpm_event:notice] [pid 15493:tid 15493] AH00489",
        "",
    ],
)
def test_other_lines_give_none(line: str) -> None:
    assert get_parser("apache").parse(line) is None


def test_documented_samples_through_collect_component() -> None:
    path = SAMPLES / "apache.log"
    parser = get_parser("apache", '%h %l %u %t "%r" %>s %b %D "%{X-Pinchpoint}i"')
    rows, counts = collect_component("web", path, parser, "r1", None)
    assert counts == FileCounts(
        component="web",
        path=str(path),
        lines=6,
        matched=3,
        other_run=1,
        untagged=1,
        unparseable=1,
        unparseable_lines=[6],
    )
    assert [(row.users, row.req_id, row.status, row.duration_s) for row in rows] == [
        (2, 1, 200, 0.000479),
        (2, 2, 200, 0.204898),
        (4, 3, 503, 0.000348),
    ]


# --- a real Apache -------------------------------------------------------------------------

APACHE = shutil.which("apache2") or "/usr/sbin/apache2"
MODULES = Path("/usr/lib/apache2/modules")


class _Backend(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        time.sleep(0.05)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # connections the proxy resets when it stops


@contextlib.contextmanager
def backend() -> Iterator[int]:
    server = _Server(("127.0.0.1", 0), _Backend)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def get(port: int, path: str, headers: dict[str, str] | None = None) -> int:
    # No proxy: requests must go to 127.0.0.1 whatever the environment says.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    try:
        with opener.open(request, timeout=5) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def wait_text(path: Path, text: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.02)
    pytest.fail(f"{path} did not log {text!r}")


def wait_lines(path: Path, count: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        time.sleep(0.02)
    pytest.fail(f"{path} did not reach {count} lines")


@dataclass
class Apache:
    process: subprocess.Popen[bytes]
    port: int
    access_log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def config(folder: Path, port: int, backend_port: int, closed_port: int) -> str:
    modules = "\n".join(
        f"LoadModule {name}_module {MODULES / f'mod_{name}.so'}"
        for name in ("mpm_event", "authz_core", "proxy", "proxy_http")
    )
    # As root, Apache's children run as an unprivileged user.
    user = "User nobody\nGroup nogroup" if os.geteuid() == 0 else ""
    log_format = PP_FORMAT.replace('"', '\\"')
    return f"""
ServerRoot {folder}
ServerName 127.0.0.1
Listen 127.0.0.1:{port}
{modules}
{user}
PidFile {folder / "httpd.pid"}
ErrorLog {folder / "error.log"}
DefaultRuntimeDir {folder}
DocumentRoot {folder / "docs"}
LogFormat "{log_format}" pinchpoint
CustomLog {folder / "access.log"} pinchpoint
ProxyPass /up http://127.0.0.1:{backend_port}/
ProxyPass /dead http://127.0.0.1:{closed_port}/
<Directory {folder / "docs"}>
    Require all granted
</Directory>
"""


@pytest.fixture
def apache() -> Iterator[Apache]:
    if shutil.which(APACHE) is None or not (MODULES / "mod_proxy_http.so").exists():
        pytest.skip("Apache httpd is not installed (apt: apache2)")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("nobody")
            grp.getgrnam("nogroup")
        except KeyError:
            pytest.skip("running as root without user nobody / group nogroup for Apache's children")
    # Not under pytest's tmp_path: Apache's children (nobody) must reach the documents.
    folder = Path(tempfile.mkdtemp(prefix="pinchpoint-apache-"))
    folder.chmod(0o755)
    (folder / "docs").mkdir(mode=0o755)
    (folder / "docs" / "ok").write_text("ok\n")
    (folder / "docs" / "ok").chmod(0o644)
    process = None
    try:
        with backend() as backend_port:
            port, closed_port = free_port(), free_port()
            while closed_port in (port, backend_port):
                closed_port = free_port()
            conf = folder / "httpd.conf"
            conf.write_text(config(folder, port, backend_port, closed_port))
            process = subprocess.Popen(
                [APACHE, "-f", str(conf), "-DFOREGROUND"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            server = Apache(process, port, folder / "access.log")
            deadline = time.monotonic() + 15
            while True:
                if process.poll() is not None:
                    error_log = folder / "error.log"
                    log = error_log.read_text(errors="replace") if error_log.exists() else ""
                    pytest.fail(f"apache exited with {process.returncode}: {log[-2000:]}")
                with contextlib.suppress(OSError):
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                if time.monotonic() > deadline:
                    pytest.fail("apache did not start listening within 15 s")
                time.sleep(0.05)
            yield server
    finally:
        if process is not None:
            Apache(process, 0, folder).stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_real_apache_access_log_is_matched_by_tag(apache: Apache) -> None:
    assert get(apache.port, "/ok?pp_run=r1&pp_users=2&pp_req=100") == 200  # before the mark
    wait_text(apache.access_log, "pp_req=100")
    position = mark(apache.access_log)
    before = apache.access_log.read_bytes().count(b"\n")
    started = time.time()

    assert get(apache.port, "/ok?pp_run=r1&pp_users=2&pp_req=1") == 200
    assert get(apache.port, "/up?pp_run=r1&pp_users=2&pp_req=2") == 200
    assert get(apache.port, "/dead?pp_run=r1&pp_users=4&pp_req=3") == 503
    assert get(apache.port, "/missing", {"X-Pinchpoint": "run=r1; users=4; req=4"}) == 404
    assert get(apache.port, "/ok?pp_run=r0&pp_users=2&pp_req=1") == 200
    assert get(apache.port, "/ok") == 200
    finished = time.time()
    wait_lines(apache.access_log, before + 6)
    apache.stop()

    rows, counts = collect_component(
        "web", apache.access_log, get_parser("apache", PP_FORMAT), "r1", position
    )

    assert counts == FileCounts(
        component="web",
        path=str(apache.access_log),
        lines=6,
        matched=4,
        other_run=1,
        untagged=1,
        unparseable=0,
    )
    # Apache logs after responding, from several threads: lines may come out of order.
    rows.sort(key=lambda row: row.req_id or 0)
    assert [(row.users, row.req_id, row.status) for row in rows] == [
        (2, 1, 200),
        (2, 2, 200),
        (4, 3, 503),
        (4, 4, 404),
    ]
    assert 0.05 <= rows[1].duration_s < 5  # proxied to a backend that takes 50 ms
    for row in rows:
        assert row.component == "web"
        assert row.upstream_s is None
        assert 0 < row.duration_s < 5
        assert row.ts is not None and started - 1 <= row.ts <= finished + 1
