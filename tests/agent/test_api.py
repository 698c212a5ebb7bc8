"""The agent's API: components, start/stop, resources as JSON or Arrow, log streams."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest
from agent_helpers import agent_thread, append, client, config_text, probe_line, read_logs

from pinchpoint.agent import ConfigError, parse_config
from pinchpoint.collect.sources.remote import ARROW_STREAM


def components(tmp_path: Path) -> list[dict]:
    return [
        {
            "name": "app",
            "role": "app",
            "log": {"path": str(tmp_path / "probe.log"), "format": "probe"},
            "process": {"pids": [1]},
        },
        {"name": "db", "role": "database", "process": {"name": "no-such-process-name"}},
    ]


def test_components_lists_what_it_watches_with_host_and_clock(tmp_path: Path) -> None:
    with agent_thread(config_text(components(tmp_path))) as server, client(server) as http:
        data = http.get("/v1/components").json()
    assert [c["name"] for c in data["components"]] == ["app", "db"]
    assert data["components"][0]["log"]["path"] == str(tmp_path / "probe.log")
    assert data["agent"]["cpu_count"] >= 1
    assert abs(data["time"] - time.time()) < 5


def test_a_run_samples_every_component_the_host_and_the_agent(tmp_path: Path) -> None:
    with agent_thread(config_text(components(tmp_path))) as server, client(server) as http:
        started = http.post("/v1/runs/r1/start", json={"interval_s": 0.1}).json()
        assert started["components"] == ["app", "db"]
        time.sleep(0.35)
        stopped = http.post("/v1/runs/r1/stop").json()
        assert stopped["stopped"] >= started["time"]
        rows = http.get("/v1/runs/r1/resources").json()["rows"]
        arrow = http.get("/v1/runs/r1/resources", headers={"Accept": ARROW_STREAM})
        assert arrow.headers["content-type"] == ARROW_STREAM
        table = pa.ipc.open_stream(arrow.content).read_all()
    names = {row["component"] for row in rows}
    assert names == {"app", "db", "host", "agent"}
    assert table.num_rows == len(rows)
    assert set(table.column("component").to_pylist()) == names
    assert min(r["processes"] for r in rows if r["component"] == "app") >= 1


def test_start_can_choose_components(tmp_path: Path) -> None:
    with agent_thread(config_text(components(tmp_path))) as server, client(server) as http:
        response = http.post("/v1/runs/r1/start", json={"interval_s": 1, "components": ["db"]})
        assert response.json()["components"] == ["db"]
        assert http.get("/v1/runs/r1/logs/app").status_code == 404


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"interval_s": 0.05}, 400),
        ({"interval_s": 11}, 400),
        ({"interval_s": "1"}, 400),
        ({"interval_s": True}, 400),
        ({"components": "app"}, 400),
        ({"components": ["nope"]}, 404),
    ],
)
def test_bad_start_bodies_are_refused(tmp_path: Path, body: dict, status: int) -> None:
    with agent_thread(config_text(components(tmp_path))) as server, client(server) as http:
        assert http.post("/v1/runs/r1/start", json=body).status_code == status


def test_run_lifecycle_errors(tmp_path: Path) -> None:
    with agent_thread(config_text(components(tmp_path))) as server, client(server) as http:
        assert http.post("/v1/runs/r1/stop").status_code == 404
        assert http.get("/v1/runs/r1/resources").status_code == 404
        assert http.post("/v1/runs/r1/start", content=b"not json").status_code == 400
        assert http.post("/v1/runs/r1/start", json=[1]).status_code == 400
        assert http.post("/v1/runs/r1/start", content=b"x" * 70000).status_code == 413
        assert http.post("/v1/runs/r1/start").status_code == 200
        assert http.post("/v1/runs/r1/start").status_code == 409
        assert http.get("/v1/runs/r1/start").status_code == 405
        assert http.delete("/v1/runs/r1/stop").status_code == 405
        assert http.post("/v1/runs/r1/stop").status_code == 200
        assert http.post("/v1/runs/r1/stop").status_code == 200  # idempotent
        assert http.get("/v1/runs/r1/logs/db").status_code == 404  # no log


def test_runs_are_bounded(tmp_path: Path) -> None:
    text = config_text(components(tmp_path), max_runs=2)
    with agent_thread(text) as server, client(server) as http:
        for run in ("r1", "r2"):
            assert http.post(f"/v1/runs/{run}/start").status_code == 200
        assert http.post("/v1/runs/r3/start").status_code == 429
        http.post("/v1/runs/r1/stop")
        assert http.post("/v1/runs/r3/start").status_code == 200  # r1, finished, made room
        assert http.get("/v1/runs/r1/resources").status_code == 404


def test_a_run_left_running_stops_after_max_run(tmp_path: Path) -> None:
    text = config_text(components(tmp_path), max_run="0.3s")
    with agent_thread(text) as server, client(server) as http:
        http.post("/v1/runs/r1/start", json={"interval_s": 0.1})
        time.sleep(2.0)
        stopped = http.post("/v1/runs/r1/stop").json()
    # Stopped by max_run (0.3 s in), well before the stop asked for 2 s in.
    assert stopped["stopped"] - stopped["started"] < 1.5
    assert any("max_run" in p for p in stopped["problems"])


def test_log_stream_of_a_big_log_is_chunked_and_complete(tmp_path: Path) -> None:
    log = tmp_path / "probe.log"
    append(log, probe_line("old", 1, 0))
    with agent_thread(config_text(components(tmp_path))) as server, client(server) as http:
        http.post("/v1/runs/r1/start")
        append(log, "".join(probe_line("r1", 3, n) for n in range(20000)))
        append(log, "".join(probe_line("r2", 3, n) for n in range(5000)))
        http.post("/v1/runs/r1/stop")
        rows, end = read_logs(http, "r1", "app")
    assert len(rows) == 20000 and rows[-1]["req_id"] == 19999
    assert end["files"][0]["other_run"] == 5000


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        ('token = "0123456789abcdef0"\ntoken_file = "/x"', "not both"),
        ('tls_cert = "/x"', "tls_cert and tls_key"),
        ("port = 70000", "port"),
        ("unknown = 1", "unknown"),
    ],
)
def test_config_errors_name_the_line(agent: str, message: str) -> None:
    text = f'[agent]\n{agent}\n\n[[component]]\nname = "app"\n'
    with pytest.raises(ConfigError, match=message) as error:
        parse_config(text, "agent.toml")
    assert "agent.toml:" in str(error.value)


@pytest.mark.parametrize("name", ["host", "generator", "agent"])
def test_reserved_component_names(name: str) -> None:
    with pytest.raises(ConfigError, match="reserved"):
        parse_config(f'[[component]]\nname = "{name}"\n')


def test_host_is_for_plans_only() -> None:
    with pytest.raises(ConfigError, match="host"):
        parse_config('[[component]]\nname = "app"\nhost = "b"\n')
