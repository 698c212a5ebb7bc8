"""A secret never reaches a run's files or terminal through what the run says: a real
`pinchpoint run` (and `pinchpoint load --out`) against a loopback server, with checks
that fail quoting a secret header's value, a feed's secret value and a value captured
into a secret header, and a target URL holding `user:password@`: no file of the folder
and no line printed holds any of them, while the server got the real values and the
reasons are still there, redacted."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path

from pinchpoint_lab.serving import Quiet

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"

STATIC = "tok-STATIC-Mm1Nn2Bb3"
FEED_KEYS = ("feedkey-AAAA1111", "feedkey-BBBB2222")
CAPTURED = "tok-CAPTURED-Zz9Yy8Xx7"
URL_USER, URL_PASSWORD = "ppuser-Hh5", "pw-URLPASS-Qq1"
SECRETS = (STATIC, *FEED_KEYS, CAPTURED, URL_USER, URL_PASSWORD)


class _Target(Quiet):
    seen: list[dict[str, str]]

    def do_GET(self) -> None:
        self.seen.append({k.lower(): v for k, v in self.headers.items()})
        self.answer(200, json.dumps({"token": CAPTURED}).encode())


@contextmanager
def _target() -> Iterator[tuple[int, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (_Target,), {"seen": seen}))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _plan(port: int) -> str:
    return f"""\
# Sent to http://{URL_USER}:{URL_PASSWORD}@127.0.0.1 with the key {STATIC}
[target]
url = "http://{URL_USER}:{URL_PASSWORD}@127.0.0.1:{port}/"
secret_headers = ["X-Api-Key"]

[load]
users = 2
duration = "1s"
warmup = "0s"

[[flow]]
name = "shop"
feed = {{ file = "keys.csv" }}

[[flow.step]]
path = "/login"
headers = {{ Authorization = "Bearer {STATIC}", X-Api-Key = "${{key}}" }}
capture = [{{ name = "tok", json = "$.token" }}]
check = {{ contains = "{STATIC}" }}
on_fail = "continue"

[[flow.step]]
path = "/cart"
headers = {{ X-Api-Key = "${{tok}}" }}
check = {{ json = {{ "$.token" = "${{key}}" }} }}
"""


def _spellings(secret: str) -> set[str]:
    escaped = secret.replace("\\", "\\\\").replace('"', '\\"')
    return {secret, html.escape(secret), json.dumps(secret)[1:-1], escaped}


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR), "COLUMNS": "300"}
    return subprocess.run(
        [sys.executable, "-m", "pinchpoint", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _hits(folder: Path, printed: str) -> list[str]:
    """Each (file, secret) where a spelling of a secret was found; '-' for the terminal."""
    found = []
    places = [(p.name, p.read_bytes()) for p in folder.rglob("*") if p.is_file()]
    places.append(("-", printed.encode()))
    for name, data in places:
        for secret in SECRETS:
            if any(s.encode() in data for s in _spellings(secret)):
                found.append(f"{name}: {secret}")
    return found


def _prepare(tmp_path: Path, port: int) -> None:
    (tmp_path / "keys.csv").write_text("key\n" + "\n".join(FEED_KEYS) + "\n")
    (tmp_path / "plan.toml").write_text(_plan(port))


def test_a_run_writes_and_prints_no_secret_its_reasons_would_quote(tmp_path: Path) -> None:
    with _target() as (port, seen):
        _prepare(tmp_path, port)
        done = _cli(["run", "plan.toml", "--runs-dir", "runs"], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [run_dir] = list((tmp_path / "runs").iterdir())

    # The server got the real values: a secret header, a feed's value, a captured one.
    assert {h.get("authorization") for h in seen if "authorization" in h} == {f"Bearer {STATIC}"}
    keys = {h.get("x-api-key") for h in seen}
    assert set(FEED_KEYS) <= keys and CAPTURED in keys
    # Both checks failed, and their reasons are kept, redacted.
    run = json.loads((run_dir / "run.json").read_text())
    reasons = run["error_reasons"]["check"]
    assert 'shop/GET /login: check contains: "<redacted>" is not in the body' in reasons
    assert 'shop/GET /cart: check json $.token: "<redacted>", expected "<redacted>"' in reasons
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["error_reasons"]["check"] == reasons
    assert f"127.0.0.1:{port}" in (run_dir / "plan.toml").read_text()

    assert _hits(run_dir, done.stdout + done.stderr) == []


def test_a_load_keeps_no_secret_in_its_summary_or_terminal(tmp_path: Path) -> None:
    with _target() as (port, _):
        _prepare(tmp_path, port)
        done = _cli(["load", "plan.toml", "--out", "out"], tmp_path)
        as_json = _cli(["load", "plan.toml", "--json"], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["errors"]["check"] > 0
    assert summary["target"] == f"http://<redacted>@127.0.0.1:{port}/"
    printed = done.stdout + done.stderr + as_json.stdout + as_json.stderr
    assert _hits(tmp_path / "out", printed) == []


def test_a_refused_header_value_is_not_quoted(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text(
        '[target]\nurl = "http://127.0.0.1:9/"\n[load]\nusers = 1\nduration = "1s"\n'
        f'[[request]]\npath = "/"\nheaders = {{ Authorization = "Bearer {STATIC}\\r\\nX: y" }}\n'
    )
    done = _cli(["run", "x.toml", "-q", "--runs-dir", "runs"], tmp_path)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("x.toml:8: request[0].headers.Authorization: ")
    assert "'\\r' at character 28" in line
    assert _hits(tmp_path, done.stdout + done.stderr) == [f"x.toml: {STATIC}"]
