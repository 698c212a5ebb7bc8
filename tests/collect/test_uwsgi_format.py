"""uWSGI request lines: documented samples, and lines written by a real uWSGI."""

import contextlib
import os
import signal
import socket
import subprocess
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from pinchpoint.collect.logs.reader import FileCounts, collect_component, mark
from pinchpoint.logformats import FormatError, get_parser
from pinchpoint.logformats.tag import Tag, find_tag, parse_header
from pinchpoint.logformats.uwsgi import (
    UwsgiDefaultParser,
    UwsgiFormatParser,
    compile_format,
    parse_ctime,
)
from pinchpoint_lab.ports import free_port

SAMPLES = Path(__file__).parent / "samples"
# uWSGI logs local time without an offset: the expected values are local too.
START_0300 = datetime(2026, 11, 22, 3, 0, 0).timestamp()

DEFAULT_LINE = (
    "[pid: 1234|app: 0|req: 1/1] 127.0.0.1 () {34 vars in 456 bytes} [Sun Nov 22 03:00:00 2026] "
    "GET /path?pp_run=r1&pp_users=4&pp_req=17 => generated 12 bytes in 10 msecs (HTTP/1.1 200) "
    "2 headers in 79 bytes (1 switches on core 0)"
)
LOGFORMAT = (
    '%(addr) - %(user) [%(ltime)] "%(method) %(uri) %(proto)" %(status) %(size) %(micros) '
    'start=%(tmsecs) "%(var.HTTP_X_PINCHPOINT)" "%(uagent)"'
)


def test_default_line_in_msecs() -> None:
    parser = get_parser("uwsgi")
    assert isinstance(parser, UwsgiDefaultParser)
    record = parser.parse(DEFAULT_LINE)
    assert record is not None
    assert record.duration_s == 0.010
    assert record.status == 200
    assert record.upstream_s is None
    assert record.ts == pytest.approx(START_0300 + 0.010)
    assert find_tag(record.target) == Tag("r1", 4, 17)


@pytest.mark.parametrize(
    ("line", "duration", "status"),
    [
        # --log-micros
        (DEFAULT_LINE.replace("in 10 msecs", "in 10250 micros"), 0.01025, 200),
        # served by sendfile / routing / offloading
        (DEFAULT_LINE.replace("msecs (", "msecs via sendfile() ("), 0.010, 200),
        (DEFAULT_LINE.replace("msecs (", "msecs via offload() ("), 0.010, 200),
        # --memory-report and --vhost prefixes, a remote user
        (
            "{address space usage: 123 bytes/0MB} {rss usage: 45 bytes/0MB} "
            + DEFAULT_LINE.replace("()", "(alice)"),
            0.010,
            200,
        ),
        ("shop.example " + DEFAULT_LINE.replace("HTTP/1.1 200", "HTTP/1.0 502"), 0.010, 502),
    ],
)
def test_default_line_variants(line: str, duration: float, status: int) -> None:
    record = get_parser("uwsgi").parse(line)
    assert record is not None
    assert record.duration_s == duration
    assert record.status == status
    assert find_tag(record.target) == Tag("r1", 4, 17)


def test_ctime_with_a_one_digit_day() -> None:
    assert parse_ctime("Mon Nov  2 03:00:00 2026") == datetime(2026, 11, 2, 3).timestamp()
    assert parse_ctime("Mon Foo  2 03:00:00 2026") is None


@pytest.mark.parametrize(
    "line",
    [
        "*** Starting uWSGI 2.0.21-debian (64bit) on [Sun Nov 22 03:30:54 2026] ***",
        "spawned uWSGI worker 1 (pid: 13478, cores: 1)",
        DEFAULT_LINE.replace("10 msecs", "ten msecs"),
        DEFAULT_LINE[:80],
    ],
)
def test_other_lines_give_none(line: str) -> None:
    assert get_parser("uwsgi").parse(line) is None


def test_logformat_fields() -> None:
    parser = get_parser("uwsgi", LOGFORMAT)
    assert isinstance(parser, UwsgiFormatParser)
    line = (
        '127.0.0.1 - - [22/Nov/2026:03:00:00 +0000] "GET /x?pp_run=r1&pp_users=2&pp_req=5 HTTP/1.1" '
        '404 54 50363 start=1795316400250 "-" "curl/8.1 (x; y)"'
    )
    record = parser.parse(line)
    assert record is not None
    assert record.duration_s == 0.050363
    assert record.status == 404
    assert record.ts == pytest.approx(1795316400.25 + 0.050363)
    assert record.tag_header is None
    assert find_tag(record.target) == Tag("r1", 2, 5)


def test_logformat_header_variable_gives_the_tag_header() -> None:
    parser = get_parser("uwsgi", '%(uri) %(msecs) "%(var.HTTP_X_PINCHPOINT)"')
    record = parser.parse('/x 7 "run=r1; users=3; req=9"')
    assert record is not None
    assert record.duration_s == 0.007
    assert record.ts is None
    assert find_tag(record.target) is None
    assert record.tag_header is not None
    assert parse_header(record.tag_header) == Tag("r1", 3, 9)


@pytest.mark.parametrize(
    ("fmt", "line", "duration", "ts"),
    [
        ("%(micros) %(msecs) %(secs)", "1500 1 0.001500", 0.0015, None),
        ("%(msecs) %(secs)", "1 0.001500", 0.001, None),
        ("%(secs) %(epoch)", "0.250000 1795316401", 0.25, 1795316401.0),
        ("%(msecs) %(tmicros)", "3 1795316400000001", 0.003, 1795316400.000001 + 0.003),
        ("%(msecs) %(time)", "3 1795316400", 0.003, 1795316400.003),
        ("%(msecs) [%(ctime)]", "3 [Sun Nov 22 03:00:00 2026]", 0.003, START_0300 + 0.003),
    ],
)
def test_logformat_durations_and_times(
    fmt: str, line: str, duration: float, ts: float | None
) -> None:
    record = get_parser("uwsgi", f"%(uri) {fmt}").parse(f"/p {line}")
    assert record is not None
    assert record.duration_s == duration
    assert record.ts == (pytest.approx(ts) if ts is not None else None)


def test_logformat_without_duration_or_variables_is_refused() -> None:
    with pytest.raises(FormatError, match=r"%\(micros\)"):
        get_parser("uwsgi", "%(uri) %(status)")
    with pytest.raises(FormatError, match="no %"):
        compile_format("just text")


def test_logformat_dash_for_empty_values() -> None:
    record = get_parser("uwsgi", "%(uri) %(status) %(micros) %(user)").parse("/p - 100 -")
    assert record is not None
    assert record.status is None
    assert record.duration_s == 0.0001


def test_documented_samples_through_collect_component() -> None:
    path = SAMPLES / "uwsgi.log"
    rows, counts = collect_component("app", path, get_parser("uwsgi"), "r1", None)
    assert counts == FileCounts(
        component="app",
        path=str(path),
        lines=8,
        matched=3,
        other_run=1,
        untagged=1,
        unparseable=3,
        unparseable_lines=[1, 2, 8],
    )
    assert [(row.users, row.req_id, row.duration_s, row.status) for row in rows] == [
        (2, 1, 0.053, 200),
        (2, 2, 0.000731, 200),
        (4, 3, 0.121, 500),
    ]


# --- a real uWSGI --------------------------------------------------------------------------

UWSGI = "/usr/bin/uwsgi"
PLUGIN_DIR = Path("/usr/lib/uwsgi/plugins")
APP = textwrap.dedent(
    """
    import time

    def application(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == "/slow":
            time.sleep(0.05)
        status = "404 Not Found" if path == "/missing" else "200 OK"
        start_response(status, [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]
    """
)


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
class Uwsgi:
    process: subprocess.Popen[bytes]
    port: int
    request_log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # uWSGI: SIGINT stops, SIGTERM reloads
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@pytest.fixture
def start_uwsgi(tmp_path: Path) -> Iterator[Callable[..., Uwsgi]]:
    if not os.access(UWSGI, os.X_OK) or not (PLUGIN_DIR / "python3_plugin.so").exists():
        pytest.skip(
            "uWSGI with its python3 plugin is not installed (apt: uwsgi-core uwsgi-plugin-python3)"
        )
    started: list[Uwsgi] = []

    def start(*options: str) -> Uwsgi:
        (tmp_path / "app.py").write_text(APP)
        port = free_port()
        request_log = tmp_path / "requests.log"
        command = [
            UWSGI,
            "--plugin-dir", str(PLUGIN_DIR),
            "--plugin", "python3,logfile",
            "--http-socket", f"127.0.0.1:{port}",
            "--wsgi-file", str(tmp_path / "app.py"),
            "--master", "--processes", "1",
            "--logto", str(tmp_path / "uwsgi.log"),
            "--req-logger", f"file:{request_log}",
            *options,
        ]  # fmt: skip
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            cwd=tmp_path,
        )
        server = Uwsgi(process, port, request_log)
        started.append(server)
        deadline = time.monotonic() + 15
        while True:
            if process.poll() is not None:
                log = (tmp_path / "uwsgi.log").read_text(errors="replace")
                pytest.fail(f"uWSGI exited with {process.returncode}: {log[-2000:]}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return server
            if time.monotonic() > deadline:
                pytest.fail("uWSGI did not start listening within 15 s")
            time.sleep(0.05)

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.mark.parametrize(
    ("options", "log_format"),
    [
        ((), None),
        (("--log-micros",), None),
        (("--logformat", LOGFORMAT), LOGFORMAT),
    ],
    ids=["default", "log-micros", "logformat"],
)
def test_real_uwsgi_request_log_is_matched_by_tag(
    start_uwsgi: Callable[..., Uwsgi], options: tuple[str, ...], log_format: str | None
) -> None:
    server = start_uwsgi(*options)
    assert get(server.port, "/ok?pp_run=r1&pp_users=2&pp_req=100") == 200  # before the mark
    wait_text(server.request_log, "pp_req=100")
    position = mark(server.request_log)
    started = time.time()

    assert get(server.port, "/slow?pp_run=r1&pp_users=2&pp_req=1") == 200
    assert get(server.port, "/ok?x=1&pp_run=r1&pp_users=2&pp_req=2") == 200
    assert get(server.port, "/missing?pp_run=r1&pp_users=4&pp_req=3") == 404
    assert get(server.port, "/ok?pp_run=r0&pp_users=2&pp_req=1") == 200
    header = {"X-Pinchpoint": "run=r1; users=8; req=4"}
    assert get(server.port, "/ok", header) == 200
    finished = time.time()
    wait_lines(server.request_log, 6)
    server.stop()

    rows, counts = collect_component(
        "app", server.request_log, get_parser("uwsgi", log_format), "r1", position
    )

    # Only the logformat logs the header, so only there is the header-tagged request matched.
    by_header = 1 if log_format else 0
    assert counts == FileCounts(
        component="app",
        path=str(server.request_log),
        lines=5,
        matched=3 + by_header,
        other_run=1,
        untagged=1 - by_header,
        unparseable=0,
    )
    expected = [(2, 1, 200), (2, 2, 200), (4, 3, 404), (8, 4, 200)][: 3 + by_header]
    assert [(row.users, row.req_id, row.status) for row in rows] == expected
    assert 0.05 <= rows[0].duration_s < 5  # the app sleeps 50 ms
    for row in rows:
        assert row.component == "app"
        assert row.upstream_s is None
        assert 0 <= row.duration_s < 5
        # The default line logs the start second: ts may be up to a second early.
        assert row.ts is not None and started - 1.5 <= row.ts <= finished + 1
