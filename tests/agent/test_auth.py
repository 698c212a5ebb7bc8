"""Every call needs the bearer token; no token is allowed only on a loopback address."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_helpers import TOKEN, agent_thread, client, config_text, run_cli

from pinchpoint.agent import ConfigError, make_server, parse_config

ENDPOINTS = [
    ("GET", "/v1/components"),
    ("POST", "/v1/runs/r1/start"),
    ("POST", "/v1/runs/r1/stop"),
    ("GET", "/v1/runs/r1/resources"),
    ("GET", "/v1/runs/r1/logs/app"),
    ("GET", "/v1/nothing-here"),
]


def components(tmp_path: Path) -> list[dict]:
    return [{"name": "app", "log": {"path": str(tmp_path / "probe.log"), "format": "probe"}}]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token-0123456789abcdef", f"Basic {TOKEN}", "Bearer", f"Bearer {TOKEN}x"],
)
def test_missing_or_wrong_token_is_401(
    tmp_path: Path, method: str, path: str, authorization: str | None
) -> None:
    with agent_thread(config_text(components(tmp_path))) as server, client(server, None) as http:
        headers = {"Authorization": authorization} if authorization else {}
        response = http.request(method, path, headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.json() == {"error": "missing or wrong bearer token"}


def test_right_token_is_200(tmp_path: Path) -> None:
    with agent_thread(config_text(components(tmp_path))) as server, client(server) as http:
        response = http.get("/v1/components")
        assert response.status_code == 200
        assert [c["name"] for c in response.json()["components"]] == ["app"]
        assert http.post("/v1/runs/r1/start", json={"interval_s": 0.2}).status_code == 200
        assert http.post("/v1/runs/r1/stop").status_code == 200


def test_token_file_is_read_and_stripped(tmp_path: Path) -> None:
    token_file = tmp_path / "agent.token"
    token_file.write_text(f"{TOKEN}\n")
    text = config_text(components(tmp_path), token=None, token_file=str(token_file))
    with agent_thread(text) as server:
        with client(server) as http:
            assert http.get("/v1/components").status_code == 200
        with client(server, "x" * len(TOKEN)) as http:
            assert http.get("/v1/components").status_code == 401


@pytest.mark.parametrize("bind", ["0.0.0.0", "::", "192.0.2.10"])
def test_refuses_to_start_without_token_on_a_non_loopback_address(
    tmp_path: Path, bind: str
) -> None:
    config = parse_config(config_text(components(tmp_path), bind=bind, token=None))
    with pytest.raises(ConfigError, match="no token"):
        make_server(config)


def test_cli_refuses_to_start_without_token_on_a_non_loopback_address(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(config_text(components(tmp_path), bind="0.0.0.0", token=None))
    done = run_cli("agent", "--config", str(path), timeout=60)
    assert done.returncode == 2
    assert "no token" in done.stderr


def test_without_token_on_loopback_every_call_is_allowed(tmp_path: Path) -> None:
    text = config_text(components(tmp_path), token=None)
    with agent_thread(text) as server, client(server, None) as http:
        assert http.get("/v1/components").status_code == 200


def test_short_token_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="at least 16"):
        parse_config(config_text(components(tmp_path), token="short"))


def test_check_option_validates_without_serving(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(config_text(components(tmp_path)))
    done = run_cli("agent", "--config", str(path), "--check", timeout=60)
    assert done.returncode == 0, done.stderr
    assert "OK" in done.stdout
