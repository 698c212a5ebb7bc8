"""A malformed request body is a 4xx with a reason, never a 500 or a traceback, and the
agent goes on serving."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from agent_helpers import TOKEN, agent_thread, client, config_text

from pinchpoint.agent.transport import MAX_BODY_BYTES

BAD_BODIES = {
    "nested arrays": b"[" * 30_000 + b"]" * 30_000,
    "nested objects": b'{"a": ' * 9_000 + b"1" + b"}" * 9_000,
    "nested in a field": b'{"components": ' + b"[" * 20_000 + b"]" * 20_000 + b"}",
    "latin-1": '{"components": ["café"]}'.encode("latin-1"),
    "utf-16": '{"interval_s": 1}'.encode("utf-16"),
    "lone surrogate": b'{"components": ["\xed\xa0\x80"]}',
    "array": b"[1, 2]",
    "string": b'"interval_s"',
    "number": b"1",
    "null": b"null",
    "truncated": b'{"interval_s": ',
    "not json": b"interval_s=1",
    "a 5,000-digit number": b'{"interval_s": 1' + b"0" * 5000 + b"}",
    "NaN": b'{"interval_s": NaN}',
    "Infinity": b'{"interval_s": Infinity}',
}


def components(tmp_path: Path) -> list[dict]:
    return [{"name": "app", "log": {"path": str(tmp_path / "probe.log"), "format": "probe"}}]


@pytest.mark.parametrize("name", BAD_BODIES)
def test_a_malformed_body_is_400(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], name: str
) -> None:
    body = BAD_BODIES[name]
    assert len(body) <= MAX_BODY_BYTES
    with agent_thread(config_text(components(tmp_path))) as server, client(server) as http:
        response = http.post("/v1/runs/r1/start", content=body)
        assert response.status_code == 400, response.text
        assert response.json()["error"]
        assert http.post("/v1/runs/r1/start", json={"interval_s": 0.5}).status_code == 200
        assert http.post("/v1/runs/r1/stop", content=body).status_code == 400
    assert "Traceback" not in capfd.readouterr().err


def test_an_oversize_body_is_413_and_read_no_further(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    body = b'{"interval_s": 1, "pad": "' + b"x" * MAX_BODY_BYTES + b'"}'
    with agent_thread(config_text(components(tmp_path))) as server, client(server) as http:
        response = http.post("/v1/runs/r1/start", content=body)
        assert response.status_code == 413
        assert response.headers["connection"] == "close"
        assert http.get("/v1/components").status_code == 200
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize(
    "length",
    [b"abc", b"-1", b"1e3", b"+5", b"1_0", b"99999999999999999999999", b"5\r\nContent-Length: 6"],
)
def test_a_bad_content_length_is_400(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], length: bytes
) -> None:
    with agent_thread(config_text(components(tmp_path))) as server:
        head = (
            b"POST /v1/runs/r1/start HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer "
            + TOKEN.encode()
            + b"\r\nContent-Length: "
            + length
            + b"\r\n\r\n{}"
        )
        with socket.create_connection(server.server_address[:2], timeout=10) as sock:
            sock.sendall(head)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 400 "), answer
    assert answer.endswith(b'{"error": "bad Content-Length"}')
    assert "Traceback" not in capfd.readouterr().err


def test_a_chunked_body_is_411(tmp_path: Path) -> None:
    with agent_thread(config_text(components(tmp_path))) as server, client(server) as http:
        response = http.post("/v1/runs/r1/start", content=iter([b'{"interval_s"', b": 1}"]))
        assert response.status_code == 411
