"""Property-based fuzzing of the agent's HTTP surface: requests written byte by byte on raw
sockets to a real agent on 127.0.0.1. Request lines, methods and paths (traversal,
percent-encoding, absolute URLs, huge, control characters), headers (duplicate, oversize,
a bad Content-Length or Authorization), and bodies (random bytes, random JSON, deep
nesting, NaN), and arbitrary bytes. Whatever is sent:

- every answer is a well-formed HTTP/1.1 response (status line, headers, its whole body)
  and a 4xx; a 2xx only to a call with the right token; never a 500. The only other 5xx
  are the protocol's own: 501 to a method the agent does not know, 505 to HTTP/2 or later;
- the agent answers or closes the connection, within a few seconds;
- it still answers a real authenticated request afterwards;
- no file but the configured log (and its folder) is opened, and no byte of the canary
  files planted outside that folder and beside the log appears in an answer;
- nothing but access-log lines reaches its stderr.

The budget is Hypothesis's profile (tests/conftest.py): a few dozen examples a test in
`make test`; thousands with

    HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest tests/agent/test_http_fuzz.py
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from agent_helpers import (
    TOKEN,
    agent_thread,
    append,
    client,
    config_text,
    probe_line,
    read_logs,
)
from hypothesis import event, given
from hypothesis import strategies as st

from pinchpoint.agent import AgentServer
from pinchpoint.agent.transport import MAX_BODY_BYTES, MAX_HEAD_BYTES

CANARY_REQ = 918_273_000  # req ids of the canary files' lines: never in an answer
CANARY_TEXT = "CANARY-7f3a9c"
ANSWER_WITHIN_S = 15.0  # longer than the agent's HEAD_TIMEOUT_S: it must not hang
REAL_REQUEST_WITHIN_S = 2.0
# The methods the agent has a handler for; any other is answered 501.
KNOWN_METHODS = {b"GET", b"POST", b"PUT", b"DELETE"}
_STATUS_LINE = re.compile(rb"HTTP/1\.1 ([1-5][0-9]{2}) [^\r\n]*\r\n")
_HEADER_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+): ?([^\r\n]*)\r\n")
_CHUNK_SIZE = re.compile(rb"([0-9a-fA-F]{1,8})\r\n")
_ACCESS_LINE = re.compile(r'pinchpoint agent: 127\.0\.0\.1 "[^\n]*" [1-5][0-9]{2}')
_VERSION = re.compile(rb"HTTP/([0-9]+)\.[0-9]+")

# -- what the agent opens ----------------------------------------------------------------

_opened: list[str] | None = None
_opened_lock = threading.Lock()
_root = ""


def _audit(name: str, args: tuple[Any, ...]) -> None:
    if _opened is None or name not in ("open", "os.scandir", "os.listdir", "glob.glob"):
        return
    target = args[0] if args else None
    if isinstance(target, bytes):
        target = os.fsdecode(target)
    if isinstance(target, str) and os.path.abspath(target).startswith(_root):
        with _opened_lock:
            _opened.append(os.path.abspath(target))


sys.addaudithook(_audit)


@contextmanager
def recording_opens(root: Path) -> Iterator[list[str]]:
    """The files and folders below `root` this process opens or lists meanwhile."""
    global _opened, _root
    _root, _opened = str(root), []
    try:
        yield _opened
    finally:
        _opened = None


# -- the agent under test ----------------------------------------------------------------


@dataclass
class Layout:
    root: Path
    log: Path
    canaries: list[Path]


def plant(root: Path) -> Layout:
    """A log folder with the configured log (run r1's lines) and a canary beside it, and
    a canary in a folder next to it; the canaries hold r1's lines too, so a stream that
    read one would send them."""
    logs, secret = root / "logs", root / "secret"
    logs.mkdir()
    secret.mkdir()
    log = logs / "app.log"
    append(log, "".join(probe_line("r1", 1, n) for n in range(1, 4)))
    canaries = [secret / "canary.log", logs / "canary.log"]
    for k, path in enumerate(canaries):
        lines = [probe_line("r1", 9, CANARY_REQ + 10 * k + i) for i in range(3)]
        append(path, "".join(lines) + f"{CANARY_TEXT} {path}\n")
    return Layout(root, log, canaries)


@contextmanager
def fuzzed_agent(root: Path) -> Iterator[tuple[AgentServer, Layout]]:
    """An agent with one component, `app`, whose run r1 is started and has log lines:
    its stream sends them, and the audit hook sees the agent open the log."""
    layout = plant(root)
    text = config_text([{"name": "app", "log": {"path": str(layout.log), "format": "probe"}}])
    with agent_thread(text) as server, client(server) as http:
        assert http.post("/v1/runs/r1/start", json={"interval_s": 0.5}).status_code == 200
        append(layout.log, "".join(probe_line("r1", 2, n) for n in range(4, 7)))
        with recording_opens(root) as opened:
            rows, _ = read_logs(http, "r1", "app")
        assert sorted(row["req_id"] for row in rows) == [4, 5, 6]
        assert str(layout.log) in opened
        yield server, layout


# -- requests ----------------------------------------------------------------------------


@dataclass
class Sent:
    """A request as written to the socket, and what the checks need to know of it."""

    raw: bytes
    method: bytes = b""  # as the agent reads them
    version: bytes = b""
    authorized: bool = False  # carries `Authorization: Bearer <the token>`
    # Its end is where the agent reads it to (its Content-Length is right): the bytes that
    # follow are read as the next request, not as part of it.
    framed: bool = True


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


_ANY_TEXT = st.text(st.characters(codec="utf-8"), max_size=40)
_RUN_IDS = st.one_of(
    st.sampled_from(
        ["r1", "r2", "fuzz", "..", ".", "", "a/b", "%2e%2e", "r%0a1", "%ff", "x" * 129, "r1%00"]
    ),
    _ANY_TEXT.map(lambda t: quote(t, safe="")),
    _ANY_TEXT,
)


def _components(layout: Layout) -> st.SearchStrategy[str]:
    outside, beside = (str(p) for p in layout.canaries)
    return st.one_of(
        st.sampled_from(
            [
                "app",
                "canary",
                "canary.log",
                "..",
                "../secret/canary.log",
                "..%2F..%2Fsecret%2Fcanary.log",
                "%2e%2e%2fsecret%2fcanary.log",
                "%252e%252e%252fsecret",
                "..%5C..%5Csecret%5Ccanary.log",
                "app%00",
                "%C0%AE%C0%AE%2Fsecret",
                "app/../../secret/canary.log",
                quote(outside, safe=""),
                quote(beside, safe=""),
                quote(str(layout.log), safe=""),
                outside.lstrip("/"),
                "app?path=" + outside,
            ]
        ),
        _ANY_TEXT.map(lambda t: quote(t, safe="")),
        _ANY_TEXT,
    )


@st.composite
def targets(draw: st.DrawFn, layout: Layout) -> bytes:
    """A request target: one of the API's routes with hostile parts, a traversal, an
    absolute URL, something huge, or any text."""
    run, component = draw(_RUN_IDS), draw(_components(layout))
    kind = draw(st.sampled_from(["route"] * 6 + ["odd", "odd", "huge", "any"]))
    if kind == "route":
        path = draw(
            st.sampled_from(
                [
                    "/v1/components",
                    f"/v1/runs/{run}/start",
                    f"/v1/runs/{run}/stop",
                    f"/v1/runs/{run}/resources",
                    f"/v1/runs/{run}/logs/{component}",
                    f"/v1/runs/r1/logs/{component}",
                ]
            )
        )
    elif kind == "odd":
        path = draw(
            st.sampled_from(
                [
                    "/v1/../secret/canary.log",
                    "/../../secret/canary.log",
                    "/v1/runs/../logs/app",
                    "/v1/runs/%2e%2e/logs/app",
                    "//v1/components",
                    "*",
                    "",
                    "/v1/",
                    "/v1",
                    "http://[::1/v1/components",
                    "http://other.example/v1/runs/r1/logs/app",
                    "http://127.0.0.1:1/v1/components",
                    "https://x/" + quote(str(layout.canaries[0]), safe=""),
                    "/v1/runs/r1/resources?format=arrow",
                    f"/v1/runs/r1/logs/app?path={layout.canaries[0]}&token={TOKEN}",
                    "/v1/components#frag",
                    "/v1/components?" + "&" * 50,
                ]
            )
        )
    elif kind == "huge":
        size = draw(st.sampled_from([8_000, 60_000, MAX_HEAD_BYTES + 10, 2 * MAX_HEAD_BYTES]))
        path = f"/v1/runs/r1/logs/{'a' * size}"
    else:
        path = draw(_ANY_TEXT)
    if draw(st.integers(0, 3)) == 0:
        path += "?" + draw(st.sampled_from(["format=arrow", "format=json", f"token={TOKEN}"]))
    return _encode(path)


METHODS = [
    b"GET", b"POST", b"PUT", b"DELETE", b"HEAD", b"OPTIONS", b"PATCH", b"TRACE", b"CONNECT",
    b"get", b"G ET", b"", b"GET\x00", b"\xff\xfe", b"PRI",
]  # fmt: skip
VERSIONS = [
    b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"HTTP/3.0", b"HTTP/0.9",
    b"HTTP/1.1 x", b"", b"HTTP/1", b"http/1.1", b"HTTP/1.1\x00", b"HTTP/11111111111.1",
    b"HTTP/1.1.1", b"HTTP/\xff",
]  # fmt: skip


def mostly(usual: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`usual` three times in four, else `odd`: most requests get past the request line
    to the token and the routes."""
    return st.integers(0, 3).flatmap(lambda n: odd if n == 0 else usual)


_METHODS = mostly(
    st.sampled_from([b"GET", b"POST"]),
    st.one_of(st.sampled_from(METHODS), st.binary(max_size=12)),
)
_VERSIONS = mostly(
    st.just(b"HTTP/1.1"), st.one_of(st.sampled_from(VERSIONS), st.binary(max_size=12))
)
_ODD_AUTHORIZATIONS = st.one_of(
    st.sampled_from(
        [
            b"Bearer " + TOKEN.encode(),
            b"bearer   " + TOKEN.encode() + b"  ",
            b"Bearer " + TOKEN.encode() + b"x",
            b"Bearer " + TOKEN[:-1].encode(),
            b"Basic " + TOKEN.encode(),
            b"Bearer",
            b"Bearer ",
            b"",
            b"Bearer " + TOKEN.encode() + b"\xff",
            b"Bearer \xc3\xa9" + TOKEN.encode(),
            b"Bearer " + b"A" * 20_000,
            TOKEN.encode(),
        ]
    ),
    st.binary(max_size=60).map(lambda b: b"Bearer " + b),
)
_AUTHORIZATIONS = mostly(
    st.just([b"Bearer " + TOKEN.encode()]), st.lists(_ODD_AUTHORIZATIONS, max_size=2)
)
_LENGTHS = st.one_of(
    st.sampled_from(
        [b"-1", b"abc", b"1e3", b"+5", b"1_0", b" 0 ", b"", b"0x10", b"\xd9\xa1", b"9" * 30]
    ),
    st.integers(0, 2 * MAX_BODY_BYTES).map(lambda n: str(n).encode()),
)
_HEADER_NAMES = mostly(
    st.sampled_from(
        [b"Host", b"Accept", b"Connection", b"Expect", b"Content-Type", b"X-A", b"Content-Length"]
    ),
    st.one_of(
        st.sampled_from([b"Transfer-Encoding", b"Authorization ", b" Authorization", b""]),
        st.binary(max_size=20),
    ),
)
_HEADER_VALUES = mostly(
    st.sampled_from(
        [
            b"application/vnd.apache.arrow.stream",
            b"application/json",
            b"keep-alive",
            b"close",
            b"100-continue",
            b"agent",
        ]
    ),
    st.one_of(
        st.sampled_from(
            [b"chunked", b"gzip, chunked", b"x" * 70_000, b"y" * 8_000, b"\x00\x01\x7f", b"\xff"]
        ),
        st.binary(max_size=40),
    ),
)

_JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
_JSON = st.recursive(
    _JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=12,
)
_START_BODY = st.fixed_dictionaries(
    {},
    optional={
        "interval_s": st.one_of(_JSON_SCALARS, st.sampled_from([0.2, 1, 60, 1e-9, 1e300])),
        "components": st.one_of(
            _JSON, st.lists(st.sampled_from(["app", "canary", "..", "../secret/canary.log"]))
        ),
    },
)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["none", "start", "json", "deep", "bytes", "text"]))
    if kind == "none":
        return b""
    if kind == "start":
        return _encode(json.dumps(draw(_START_BODY)))
    if kind == "json":
        return _encode(json.dumps(draw(_JSON)))
    if kind == "deep":
        depth = draw(st.integers(1, 32_000))
        opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
        inner = (opener * depth + b"1" + closer * depth)[: MAX_BODY_BYTES - 20]
        return b'{"components": ' + inner + b"}" if draw(st.booleans()) else inner
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    return _encode(draw(st.text(max_size=200)))


@st.composite
def requests(draw: st.DrawFn, layout: Layout) -> Sent:
    """One request, each of its parts drawn from what clients (broken or hostile) send."""
    method = draw(_METHODS)
    version = draw(_VERSIONS)
    space = draw(mostly(st.just(b" "), st.sampled_from([b"  ", b"\t", b"\x0b", b"\xa0"])))
    eol = draw(mostly(st.just(b"\r\n"), st.sampled_from([b"\n", b"\r", b"\n\r"])))
    words = [method, draw(targets(layout))] + ([version] if version else [])
    headers: list[tuple[bytes, bytes]] = []
    for authorization in draw(_AUTHORIZATIONS):
        headers.append((b"Authorization", authorization))
    headers += draw(st.lists(st.tuples(_HEADER_NAMES, _HEADER_VALUES), max_size=3))
    body = draw(bodies())
    length = draw(mostly(st.just("right"), st.sampled_from(["none", "bad", "two", "short"])))
    if length == "right":
        headers.append((b"Content-Length", str(len(body)).encode()))
    elif length == "bad":
        headers.append((b"Content-Length", draw(_LENGTHS)))
    elif length == "two":
        headers += [(b"Content-Length", draw(_LENGTHS)), (b"Content-Length", draw(_LENGTHS))]
    elif length == "short":
        headers.append((b"Content-Length", str(len(body) + draw(st.integers(1, 100))).encode()))
    if draw(st.booleans()):
        headers = draw(st.permutations(headers))
    if draw(st.integers(0, 9)) == 0:
        headers += [(b"X-Pad", b"p" * 100)] * draw(st.integers(1, 150))  # too many headers
    head = space.join(words) + eol
    head += b"".join(name + b": " + value + eol for name, value in headers)
    raw = head + eol + body
    authorized = any(
        name.lower() == b"authorization" and _is_the_token(value) for name, value in headers
    )
    framing = {b"content-length", b"transfer-encoding"}
    framed = length == "right" and sum(n.strip().lower() in framing for n, _ in headers) == 1
    return Sent(raw, *request_words(raw), authorized=authorized, framed=framed)


def request_words(raw: bytes) -> tuple[bytes, bytes]:
    """The method and the version of a request line as the agent reads them (its words
    split on whitespace); the version is empty when the line has fewer than 3 words."""
    line = raw.split(b"\n", 1)[0].decode("latin-1").rstrip("\r\n")
    words = [w.encode("latin-1") for w in line.split()]
    return (words[0] if words else b""), (words[-1] if len(words) >= 3 else b"")


def _is_the_token(value: bytes) -> bool:
    scheme, _, credentials = value.strip().partition(b" ")
    return scheme.lower() == b"bearer" and credentials.strip() == TOKEN.encode()


# -- answers -----------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    headers: dict[str, list[str]]
    body: bytes


def exchange(address: tuple[str, int], data: bytes) -> bytes:
    """Sends `data` on a new connection, closes its sending side and reads until the agent
    closes the connection; fails when it does neither answer nor close in time."""
    deadline = time.monotonic() + ANSWER_WITHIN_S
    answer = b""
    with socket.create_connection(address, timeout=ANSWER_WITHIN_S) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the agent closed first (a head too large): what it answered is read
        while True:
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                pytest.fail(f"no answer and no close within {ANSWER_WITHIN_S}s: {answer[:300]!r}")
            except ConnectionResetError:
                break
            if not chunk:
                break
            answer += chunk
    return answer


def parse_answers(data: bytes, head_first: bool = False) -> list[Answer]:
    """The responses in `data`, each checked to be well-formed HTTP/1.1 and whole; an
    interim 100 Continue is skipped. Nothing may follow a `Connection: close` answer.
    With `head_first` (the first request was a HEAD) the first answer may end after its
    headers, as an answer to HEAD does."""
    answers: list[Answer] = []
    at = 0
    while at < len(data):
        status_line = _STATUS_LINE.match(data, at)
        assert status_line, f"not a status line at byte {at}: {data[at : at + 300]!r}"
        at = status_line.end()
        headers: dict[str, list[str]] = {}
        while not data.startswith(b"\r\n", at):
            line = _HEADER_LINE.match(data, at)
            assert line, f"not a header line at byte {at}: {data[at : at + 300]!r}"
            name = line.group(1).decode().lower()
            headers.setdefault(name, []).append(line.group(2).decode("latin-1"))
            at = line.end()
        at += 2
        status = int(status_line.group(1))
        if status == 100:
            continue
        if headers.get("transfer-encoding") == ["chunked"]:
            body, at = _read_chunked(data, at)
        else:
            assert len(headers.get("content-length", [])) == 1, headers
            length = int(headers["content-length"][0])
            if head_first and not answers and at == len(data):
                length = 0
            body = data[at : at + length]
            assert len(body) == length, "answer cut short"
            at += length
        answers.append(Answer(status, headers, body))
        if "close" in [v.lower() for v in headers.get("connection", [])]:
            assert at == len(data), f"bytes after a closing answer: {data[at : at + 300]!r}"
    return answers


def _read_chunked(data: bytes, at: int) -> tuple[bytes, int]:
    body = b""
    while True:
        size = _CHUNK_SIZE.match(data, at)
        assert size, f"not a chunk size at byte {at}: {data[at : at + 100]!r}"
        n = int(size.group(1), 16)
        at = size.end()
        assert data.startswith(b"\r\n", at + n), "a chunk not ended by CRLF"
        body += data[at : at + n]
        at += n + 2
        if n == 0:
            return body, at


# -- the checks --------------------------------------------------------------------------


def check_status(answer: Answer, sent: list[Sent]) -> None:
    """A 4xx; a 2xx only for a call with the right token; 501 only to a method the agent
    does not know and 505 only to HTTP/2 or later (or to what follows a request whose
    length is not known); never another 5xx."""
    status = answer.status
    event(f"answered {status}")
    if 200 <= status < 300:
        assert any(s.authorized for s in sent), (status, answer.body[:200])
    elif status == 501:  # to one of the requests, or to bytes after one not framed
        assert any(not s.framed or s.method not in KNOWN_METHODS for s in sent), answer.body
    elif status == 505:
        assert any(not s.framed or _major(s.version) >= 2 for s in sent), answer.body
    else:
        assert 400 <= status < 500, (status, answer.body[:300])
    if status >= 400 and answer.headers.get("content-type") == ["application/json"]:
        assert json.loads(answer.body)["error"]


def _major(version: bytes) -> int:
    found = _VERSION.fullmatch(version)
    return int(found.group(1)) if found else -1


def check_agent(
    server: AgentServer,
    layout: Layout,
    capfd: pytest.CaptureFixture[str],
    send: Callable[[], bytes],
) -> bytes:
    """Runs `send` and checks what holds whatever was sent: no canary in the answer, no
    file opened but the configured log, only access-log lines on stderr, and the agent
    still answering a real request. Returns the answer."""
    with recording_opens(layout.root) as opened:
        answer = send()
    allowed = {str(layout.log), str(layout.log.parent)}
    assert set(opened) <= allowed, sorted(set(opened) - allowed)
    assert str(CANARY_REQ // 1000).encode() not in answer
    assert CANARY_TEXT.encode() not in answer
    seconds, status = real_request(server)
    assert status == 200
    assert seconds < REAL_REQUEST_WITHIN_S
    err = capfd.readouterr().err
    for line in err.splitlines():
        assert _ACCESS_LINE.fullmatch(line), err[-3000:]
    return answer


def real_request(server: AgentServer) -> tuple[float, int]:
    host, port = server.server_address[:2]
    started = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", "/v1/components", headers={"Authorization": f"Bearer {TOKEN}"})
        response = conn.getresponse()
        response.read()
        return time.monotonic() - started, response.status
    finally:
        conn.close()


# -- the tests ---------------------------------------------------------------------------


def test_fuzzed_requests_get_a_well_formed_4xx_and_leak_nothing(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with fuzzed_agent(tmp_path) as (server, layout):
        address = server.server_address[:2]

        @given(st.lists(requests(layout), min_size=1, max_size=2))
        def check(sent: list[Sent]) -> None:
            data = b"".join(s.raw for s in sent)
            answer = check_agent(server, layout, capfd, lambda: exchange(address, data))
            for item in parse_answers(answer, head_first=sent[0].method == b"HEAD"):
                check_status(item, sent)

        check()


_PREFIXES = st.sampled_from(
    [
        b"",
        b"GET /v1/",
        b"GET /v1/runs/r1/logs/app HTTP/1.1\r\n",
        b"POST /v1/runs/r1/start HTTP/1.1\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n",
        b"GET /v1/components HTTP/1.1\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n\r\n",
        b"\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello on plain HTTP
    ]
)


def test_arbitrary_bytes_get_a_well_formed_answer_or_a_close(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with fuzzed_agent(tmp_path) as (server, layout):
        address = server.server_address[:2]

        @given(_PREFIXES, st.binary(max_size=400), st.sampled_from([b"", b"\r\n\r\n"]))
        def check(prefix: bytes, data: bytes, end: bytes) -> None:
            raw = prefix + data + end
            answer = check_agent(server, layout, capfd, lambda: exchange(address, raw))
            token = b"Bearer " + TOKEN.encode() + b"\r\n"
            sent = [Sent(raw, *request_words(raw), authorized=token in raw, framed=False)]
            for item in parse_answers(answer, head_first=sent[0].method == b"HEAD"):
                check_status(item, sent)

        check()


# What the fuzzing found, kept: answers that had no status line (HTTP/0.9) and a 500.
FOUND = {
    "no version": (b"GET /v1/components\r\nAuthorization: Bearer " + TOKEN.encode(), 400),
    "HTTP/0.9": (b"GET  /v1/components  HTTP/0.9\n", 400),
    "HTTP/0.9, too many headers": (b"GET /v1/components HTTP/0.9" + b"\r\nX: y" * 101, 431),
    "bad version": (b"GET /v1/components HTTP/1.1 x\r\n", 400),
    "HTTP/2.0": (b"GET /v1/components HTTP/2.0\r\n", 505),
    "IPv6 not closed, with the token": (
        b"GET http://[::1/v1/components HTTP/1.1\r\nAuthorization: Bearer " + TOKEN.encode(),
        400,
    ),
}


@pytest.mark.parametrize("name", FOUND)
def test_found_by_fuzzing(tmp_path: Path, capfd: pytest.CaptureFixture[str], name: str) -> None:
    head, status = FOUND[name]
    with fuzzed_agent(tmp_path) as (server, layout):
        raw = head + b"\r\n\r\n"
        answer = check_agent(
            server, layout, capfd, lambda: exchange(server.server_address[:2], raw)
        )
    [item] = parse_answers(answer)
    assert item.status == status, answer
    assert item.headers["connection"] == ["close"]
    assert b"Traceback" not in answer
