"""HAProxy `option httplog` lines: documented samples, and lines written by a real HAProxy."""

import contextlib
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pinchpoint.collect.logs.reader import FileCounts, collect_component, mark
from pinchpoint.logformats import FormatError, Record, get_parser
from pinchpoint.logformats.haproxy import HaproxyRecord, parse_date
from pinchpoint.logformats.tag import Tag, find_tag, parse_header
from pinchpoint_lab.ports import free_port

SAMPLES = Path(__file__).parent / "samples"
# HAProxy logs local time without an offset: the expected values are local too.
DATE = datetime(2026, 11, 22, 9, 15, 0, 655000).timestamp()

# HAProxy 2.x: TR/Tw/Tc/Tr/Ta; the documentation's example line, with a tag.
LINE_2X = (
    "10.0.1.2:33317 [22/Nov/2026:09:15:00.655] http-in static/srv1 10/0/30/69/109 200 2750 - - "
    '---- 1/1/1/1/0 0/0 "GET /index.html?pp_run=r1&pp_users=4&pp_req=17 HTTP/1.1"'
)


def test_httplog_line_timers() -> None:
    record = get_parser("haproxy").parse(LINE_2X)
    assert isinstance(record, HaproxyRecord)
    assert isinstance(record, Record)
    assert record.duration_s == 0.109
    assert record.upstream_s == 0.069
    assert record.queue_s == 0.0
    assert record.status == 200
    assert record.ts == pytest.approx(DATE + 0.109)
    assert find_tag(record.target) == Tag("r1", 4, 17)


@pytest.mark.parametrize(
    "prefix",
    [
        "",
        "<134>Nov 22 09:15:00 haproxy[14389]: ",
        "Nov 22 09:15:00 localhost haproxy[14389]: ",
        "<134>1 2026-11-22T09:15:00.655+00:00 host haproxy 14389 - - ",
    ],
)
def test_syslog_headers_are_ignored(prefix: str) -> None:
    record = get_parser("haproxy").parse(prefix + LINE_2X)
    assert record is not None
    assert record.duration_s == 0.109


def test_aborted_phases_and_no_server() -> None:
    # 503 from HAProxy: never connected, no response; a server queue wait of 2 s.
    line = (
        "127.0.0.1:40000 [22/Nov/2026:09:15:00.655] fe be/<NOSRV> 0/2000/-1/-1/2001 503 217 - - "
        'sQ-- 5/5/4/0/0 0/3 "GET /x?pp_run=r1&pp_users=8&pp_req=3 HTTP/1.1"'
    )
    record = get_parser("haproxy").parse(line)
    assert isinstance(record, HaproxyRecord)
    assert record.duration_s == 2.001
    assert record.upstream_s is None
    assert record.queue_s == 2.0
    assert record.status == 503
    # Client gone before its request was complete: no queue, status -1.
    line = (
        "127.0.0.1:40001 [22/Nov/2026:09:15:00.655] fe fe/<NOSRV> -1/-1/-1/-1/5001 -1 0 - - "
        'CR-- 1/1/0/0/0 0/0 "<BADREQ>"'
    )
    record = get_parser("haproxy").parse(line)
    assert isinstance(record, HaproxyRecord)
    assert (record.duration_s, record.upstream_s, record.queue_s) == (5.001, None, None)
    assert record.status is None


def test_haproxy_1x_line_with_logasap_and_captures() -> None:
    # 1.x: Tq/Tw/Tc/Tr/Tt, `+Tt` and `+bytes` under logasap; captured request headers first.
    line = (
        "10.0.1.2:33317 [22/Nov/2026:09:15:00.655] http-in~ static/srv1 10/0/30/69/+109 200 +2750 "
        "- - ---- 1/1/1/1/+1 0/0 {1wt.eu|run=r2; users=16; req=9} {text/html} "
        '"GET /index.html HTTP/1.1"'
    )
    record = get_parser("haproxy", "httplog").parse(line)
    assert record is not None
    assert record.duration_s == 0.109
    assert find_tag(record.target) is None
    assert record.tag_header == "run=r2; users=16; req=9"
    assert parse_header(record.tag_header) == Tag("r2", 16, 9)


def test_captured_header_is_the_first_capture_holding_a_header_form_tag() -> None:
    line = LINE_2X.replace(
        '0/0 "GET', '0/0 {https://shop/?pp_run=r1&pp_users=2|run=r1; users=4; req=9} {} "GET'
    ).replace("?pp_run=r1&pp_users=4&pp_req=17", "")
    record = get_parser("haproxy").parse(line)
    assert record is not None
    assert record.tag_header == "run=r1; users=4; req=9"


@pytest.mark.parametrize(
    "line",
    [
        "Proxy fe started.",
        "[NOTICE]   (1) : New worker (7) forked",
        "127.0.0.1:40000 [22/Nov/2026:09:15:00.655] fe/1: SSL handshake failure",
        # tcplog: no request, four timers
        "127.0.0.1:40000 [22/Nov/2026:09:15:00.655] fe be/s1 0/0/5007 212 -- 0/0/0/0/0 0/0",
        LINE_2X.replace("10/0/30/69/109", "10/0/30/69"),
    ],
)
def test_other_lines_give_none(line: str) -> None:
    assert get_parser("haproxy").parse(line) is None


def test_custom_log_format_is_refused() -> None:
    with pytest.raises(FormatError, match="httplog"):
        get_parser("haproxy", "%ci:%cp %Ta")


def test_date_parsing() -> None:
    assert parse_date("22/Nov/2026:09:15:00.655") == DATE
    assert parse_date("22/Nov/2026:09:15:00") == DATE - 0.655
    assert parse_date("22/Xyz/2026:09:15:00.655") is None


def test_documented_samples_through_collect_component() -> None:
    path = SAMPLES / "haproxy.log"
    rows, counts = collect_component("lb", path, get_parser("haproxy"), "r1", None)
    assert counts == FileCounts(
        component="lb",
        path=str(path),
        lines=7,
        matched=4,
        other_run=1,
        untagged=1,
        unparseable=1,
        unparseable_lines=[1],
    )
    assert [(row.users, row.req_id, row.status) for row in rows] == [
        (4, 17, 200),
        (4, 18, 200),
        (8, 19, 503),
        (8, 20, 200),
    ]
    assert [row.queue_s for row in rows] == [0.0, 0.21, 2.0, 0.0]  # Tw
    assert [(row.duration_s, row.upstream_s) for row in rows] == [
        (0.109, 0.069),
        (0.312, 0.101),
        (2.001, None),
        (0.004, 0.003),
    ]


# --- a real HAProxy ------------------------------------------------------------------------

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"


class _Backend(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path.startswith("/slow"):
            time.sleep(0.1)
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
class Haproxy:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def config(port: int, backend_port: int, closed_port: int) -> str:
    return f"""
global
    log stdout format raw local0 info
defaults
    mode http
    log global
    option httplog
    option dontlognull
    timeout connect 2s
    timeout client 5s
    timeout server 5s
    timeout queue 5s
    retries 0
frontend fe
    bind 127.0.0.1:{port}
    capture request header X-Pinchpoint len 128
    use_backend dead if {{ path_beg /dead }}
    default_backend app
backend app
    server s1 127.0.0.1:{backend_port} maxconn 1
backend dead
    server s1 127.0.0.1:{closed_port}
"""


@pytest.fixture
def haproxy(tmp_path: Path) -> Iterator[Haproxy]:
    if shutil.which(HAPROXY) is None:
        pytest.skip("haproxy is not installed (apt: haproxy)")
    with backend() as backend_port:
        port, closed_port = free_port(), free_port()
        while closed_port in (port, backend_port):
            closed_port = free_port()
        conf = tmp_path / "haproxy.cfg"
        conf.write_text(config(port, backend_port, closed_port))
        log = tmp_path / "haproxy.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [HAPROXY, "-f", str(conf), "-db"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.DEVNULL,
            )
        server = Haproxy(process, port, log)
        try:
            deadline = time.monotonic() + 10
            while True:
                if process.poll() is not None:
                    pytest.fail(f"haproxy exited with {process.returncode}")
                with contextlib.suppress(OSError):
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                if time.monotonic() > deadline:
                    pytest.fail("haproxy did not start listening within 10 s")
                time.sleep(0.05)
            yield server
        finally:
            server.stop()


def test_real_haproxy_log_is_matched_by_tag(haproxy: Haproxy) -> None:
    assert get(haproxy.port, "/ok?pp_run=r1&pp_users=2&pp_req=100") == 200  # before the mark
    wait_text(haproxy.log, "pp_req=100")
    position = mark(haproxy.log)
    before = haproxy.log.read_bytes().count(b"\n")
    started = time.time()

    # Two at once on a server with maxconn 1: one waits in HAProxy's queue.
    with ThreadPoolExecutor(max_workers=2) as pool:
        slow = [pool.submit(get, haproxy.port, f"/slow?pp_run=r1&pp_users=2&pp_req={n}") for n in (1, 2)]  # fmt: skip
        assert [future.result() for future in slow] == [200, 200]
    assert get(haproxy.port, "/ok", {"X-Pinchpoint": "run=r1; users=4; req=3"}) == 200
    assert get(haproxy.port, "/dead?pp_run=r1&pp_users=4&pp_req=4") == 503
    assert get(haproxy.port, "/ok?pp_run=r0&pp_users=2&pp_req=1") == 200
    assert get(haproxy.port, "/ok") == 200
    finished = time.time()
    wait_lines(haproxy.log, before + 6)
    haproxy.stop()

    rows, counts = collect_component("lb", haproxy.log, get_parser("haproxy"), "r1", position)

    assert (counts.lines, counts.matched, counts.other_run) == (6, 4, 1)
    assert (counts.untagged, counts.unparseable) == (1, 0)
    assert sorted((row.users, row.req_id, row.status) for row in rows) == [
        (2, 1, 200),
        (2, 2, 200),
        (4, 3, 200),
        (4, 4, 503),
    ]
    by_req = {row.req_id: row for row in rows}
    for req in (1, 2):
        row = by_req[req]
        assert row.upstream_s is not None and 0.1 <= row.upstream_s < 5
        assert row.upstream_s <= row.duration_s < 5
    assert by_req[4].upstream_s is None  # no server answered
    for row in rows:
        assert row.component == "lb"
        assert row.ts is not None and started - 1 <= row.ts <= finished + 1

    # Tw: the queued request waited for the other's 100 ms.
    records = [get_parser("haproxy").parse(line) for line in haproxy.log.read_text().splitlines()]
    queues = sorted(
        record.queue_s
        for record in records
        if isinstance(record, HaproxyRecord) and "/slow" in record.target
    )
    assert queues[0] is not None and queues[0] < 0.05
    assert queues[1] is not None and 0.05 <= queues[1] < 5
    # The queue time reaches the tier's rows, and so tiers.parquet.
    row_queues = sorted(by_req[req].queue_s for req in (1, 2))
    assert row_queues == pytest.approx(queues, abs=1e-9)
    assert by_req[3].queue_s is not None and by_req[3].queue_s < 0.05
