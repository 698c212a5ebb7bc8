"""No path from a request is ever opened: only the files the config names are read.

An audit hook records every file this process opens (and every folder it lists) below the
test's folder while the agent answers, so the assertion is on what was opened, not only on
what was answered.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from agent_helpers import TOKEN, agent_thread, append, client, config_text, probe_line

_recording: list[tuple[str, str]] | None = None
_recording_lock = threading.Lock()
_root: str = ""


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _recording is None or event not in ("open", "os.scandir", "os.listdir", "glob.glob"):
        return
    target = args[0] if args else None
    if isinstance(target, bytes):
        target = os.fsdecode(target)
    if isinstance(target, str) and os.path.abspath(target).startswith(_root):
        with _recording_lock:
            _recording.append((event, os.path.abspath(target)))


sys.addaudithook(_audit)


@contextmanager
def recording(root: Path) -> Iterator[list[tuple[str, str]]]:
    global _recording, _root
    _root, _recording = str(root), []
    try:
        yield _recording
    finally:
        _recording = None


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    logs, secret = tmp_path / "logs", tmp_path / "secret"
    logs.mkdir()
    secret.mkdir()
    paths = {
        "log": logs / "app.log",
        "outside": secret / "secret.log",
        "beside": logs / "secret.log",
        "passwd": secret / "passwd",
    }
    append(paths["log"], "".join(probe_line("r0", 1, n) for n in range(3)))
    for n, name in enumerate(("outside", "beside", "passwd")):
        append(paths[name], "".join(probe_line("r1", 9, 1000 * (n + 1) + i) for i in range(3)))
    return paths


def raw_get(url: str, path: str) -> tuple[int, bytes]:
    """A GET with exactly this request target: no client normalises it first."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.putrequest("GET", path, skip_accept_encoding=True)
        conn.putheader("Authorization", f"Bearer {TOKEN}")
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def bad_targets(layout: dict[str, Path]) -> list[str]:
    outside, beside, log = (str(layout[k]) for k in ("outside", "beside", "log"))
    logs = "/v1/runs/r1/logs/"
    return [
        logs + "..",
        logs + "../../secret/secret.log",
        logs + "..%2F..%2Fsecret%2Fsecret.log",
        logs + "%2e%2e%2fsecret%2fsecret.log",
        logs + "%252e%252e%252fsecret%252fsecret.log",
        logs + "..%5C..%5Csecret%5Csecret.log",
        logs + quote(outside, safe=""),
        logs + quote(beside, safe=""),
        logs + quote(log, safe=""),
        logs + outside.lstrip("/"),
        logs + "secret.log",
        logs + "app.log",
        logs + "app%00",
        logs + "%C0%AE%C0%AE%2Fsecret",
        logs + "app/../../../secret/passwd",
        logs + "app/..%2F..%2Fsecret%2Fpasswd",
        "/v1/runs/..%2F..%2Fsecret/logs/app",
        "/v1/runs/../logs/app",
        "/v1/runs/%2e%2e/logs/app",
        "/v1/runs/r1%2F..%2F..%2Fsecret/logs/app",
        "/v1/runs/" + quote(outside, safe="") + "/logs/app",
        "/v1/../secret/secret.log",
        "/secret/secret.log",
        "http://other.example" + logs + quote(outside, safe=""),
    ]


def test_no_request_opens_a_file_the_config_does_not_name(
    tmp_path: Path, layout: dict[str, Path]
) -> None:
    text = config_text([{"name": "app", "log": {"path": str(layout["log"]), "format": "probe"}}])
    with agent_thread(text) as server, client(server) as http:
        assert http.post("/v1/runs/r1/start", json={"interval_s": 0.2}).status_code == 200
        append(layout["log"], "".join(probe_line("r1", 2, n) for n in range(1, 4)))
        assert http.post("/v1/runs/r1/stop").status_code == 200
        for target in bad_targets(layout):
            with recording(tmp_path) as opened:
                status, body = raw_get(server.url, target)
            assert status in (400, 404), (target, status, body)
            assert opened == [], target
            assert b"1001" not in body and b"2001" not in body
        for names in (["../secret/secret.log"], [str(layout["outside"])], ["app", ".."]):
            with recording(tmp_path) as opened:
                response = http.post("/v1/runs/r2/start", json={"components": names})
            assert response.status_code == 404, names
            assert opened == []
        with recording(tmp_path) as opened:
            status, body = raw_get(server.url, f"/v1/runs/r1/logs/app?path={layout['outside']}")
        assert status == 200
        assert ("open", str(layout["log"])) in opened  # the hook sees the agent's opens
        assert {path for _, path in opened} <= {str(layout["log"]), str(layout["log"].parent)}
        rows = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        assert sorted(r["req_id"] for r in rows[:-1]) == [1, 2, 3]
        assert rows[-1]["files"][0]["path"] == str(layout["log"])


@pytest.mark.parametrize("run_id", ["..", ".", "a/b", "a b", "x" * 129, "r%0a1"])
def test_invalid_run_ids_are_refused(tmp_path: Path, layout: dict[str, Path], run_id: str) -> None:
    text = config_text([{"name": "app", "log": {"path": str(layout["log"]), "format": "probe"}}])
    with agent_thread(text) as server:
        status, body = raw_get(server.url, f"/v1/runs/{quote(run_id, safe='')}/resources")
        assert status == 400, body
        assert b"invalid run id" in body


def test_unknown_component_is_404_and_names_nothing_on_disk(
    tmp_path: Path, layout: dict[str, Path]
) -> None:
    text = config_text([{"name": "app", "log": {"path": str(layout["log"]), "format": "probe"}}])
    with agent_thread(text) as server, client(server) as http:
        http.post("/v1/runs/r1/start", json={"interval_s": 0.2})
        response = http.get("/v1/runs/r1/logs/nginx")
        assert response.status_code == 404
        assert str(tmp_path) not in response.text
