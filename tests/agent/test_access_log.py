"""The agent's access log (its stderr) names each request by path and status: the values
of a query are replaced, so a token sent in one never reaches the log."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest
from agent_helpers import TOKEN, AgentProcess, agent_thread, client, config_text

from pinchpoint.agent.server import redact_query

SECRET = "s3cret-in-a-query-0123456789"


def components(tmp_path: Path) -> list[dict]:
    return [{"name": "app", "log": {"path": str(tmp_path / "probe.log"), "format": "probe"}}]


def raw(address: tuple[str, int], request: bytes) -> bytes:
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_query_values_are_redacted_in_the_access_log(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(config_text(components(tmp_path)))
    agent = AgentProcess(config, tmp_path / "agent.err")
    try:
        address = ("127.0.0.1", int(agent.url.rsplit(":", 1)[1]))
        with httpx.Client(base_url=agent.url, timeout=10, trust_env=False) as http:
            assert http.get(f"/v1/components?token={SECRET}").status_code == 401
            assert http.get(f"/v1/components?{SECRET}").status_code == 401
            authorized = {"Authorization": f"Bearer {TOKEN}"}
            http.post("/v1/runs/r1/start", headers=authorized)
            response = http.get(
                f"/v1/runs/r1/resources?format=arrow&access_token={SECRET}&{SECRET}=1",
                headers=authorized,
            )
            assert response.status_code == 200
        # A request line the agent refuses is logged too, redacted the same way.
        answer = raw(address, f"GET /v1/components?token={SECRET} HTTP/1.1 x\r\n\r\n".encode())
        assert answer.startswith(b"HTTP/1.1 400 ")  # with a status line: the version is bad
    finally:
        agent.kill(15)
    log = agent.log.read_text()
    assert SECRET not in log
    lines = log.splitlines()
    assert lines[0].endswith('"GET /v1/components?* HTTP/1.1" 401')
    assert lines[1].endswith('"GET /v1/components?* HTTP/1.1" 401')
    assert '"GET /v1/runs/r1/resources?format=*&*&* HTTP/1.1" 200' in log
    assert lines[-1].endswith('"GET /v1/components?* HTTP/1.1 x" 400')


@pytest.mark.parametrize(
    ("line", "logged"),
    [
        ("GET /v1/components HTTP/1.1", "GET /v1/components HTTP/1.1"),
        ("GET /a?format=arrow&token=t HTTP/1.1", "GET /a?format=*&* HTTP/1.1"),
        ("GET /a?=x&&%66ormat=y&format HTTP/1.1", "GET /a?*&*&* HTTP/1.1"),
        ("GET /a?format=1?token=2 HTTP/1.1", "GET /a?format=* HTTP/1.1"),
        ("GET /a?x HTTP/1.1 ?format=2", "GET /a?* HTTP/1.1 ?format=*"),
    ],
)
def test_redact_query(line: str, logged: str) -> None:
    assert redact_query(line) == logged


def test_control_characters_are_escaped_in_the_access_log(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with agent_thread(config_text(components(tmp_path))) as server, client(server) as http:
        answer = raw(server.server_address[:2], b"GET /v1/\x1b[31mred HTTP/1.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 401")
        assert http.get("/v1/components").status_code == 200
    err = capfd.readouterr().err
    assert "\x1b" not in err and "/v1/\\x1b[31mred" in err
