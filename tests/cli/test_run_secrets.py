"""No secret of a plan reaches the run folder: a real `pinchpoint run` sends secret
headers (Authorization, Cookie, one named by secret_headers, spelt with TOML escapes),
reads an agent's and a Prometheus server's token from the environment, and then no file
of the run folder holds any of them, in any spelling. The folder is 0700, its files 0600,
and the target still got the real values."""

from __future__ import annotations

import base64
import html
import json
import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

from pinchpoint.agent import make_server, parse_config

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"

AUTH = "Bearer tok&en-A1b2C3d4E5f6G7h8"
COOKIE = "session=cookie<secret>-Z9y8X7w6"
API_KEY = "key-Qq1Ww2Ee3Rr4Tt5"
AGENT_TOKEN = "agent-token-Mm1Nn2Bb3Vv4Cc5Xx6"
PROM_TOKEN = "prom-token-Pp9Oo8Ii7Uu6Yy5"
AGENT_VAR = "PP_TEST_SECRET_AGENT"
PROM_VAR = "PP_TEST_SECRET_PROMETHEUS"
SECRETS = (AUTH, COOKIE, API_KEY, AGENT_TOKEN, PROM_TOKEN)
# The parts of each secret that count as secret by themselves (no scheme, no cookie name).
CORES = ("tok&en-A1b2C3d4E5f6G7h8", "cookie<secret>-Z9y8X7w6")


def toml_escaped(text: str) -> str:
    """A TOML basic string spelling every character as \\uXXXX."""
    return '"' + "".join(f"\\u{ord(c):04X}" for c in text) + '"'


def spellings(secret: str) -> set[bytes]:
    """The ways a secret could be written into a file."""
    escaped_lower = "".join(f"\\u{ord(c):04x}" for c in secret)
    return {
        s.encode()
        for s in (
            secret,
            html.escape(secret),
            json.dumps(secret)[1:-1],
            json.dumps(secret, ensure_ascii=False)[1:-1],
            quote(secret),
            toml_escaped(secret)[1:-1],
            escaped_lower,
            base64.b64encode(secret.encode()).decode(),
            # JSON inside HTML (the report's charts) escapes <, > and &.
            secret.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"),
        )
    } | {secret.encode("utf-16-le")}


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[dict[str, str]]

    def do_GET(self) -> None:
        self.seen.append({k.lower(): v for k, v in self.headers.items()})
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[ThreadingHTTPServer]:
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def plan_text(target: str, agent: str) -> str:
    return f"""\
# The key: Authorization = "{AUTH}", spelt {toml_escaped(API_KEY)} elsewhere
[target]
url = "{target}"
secret_headers = ["x-api-key"]

[load]
lower = 2
upper = 2
duration = "1s"
warmup = "0s"

[[request]]
path = "/a"
headers = {{ Authorization = {toml_escaped(AUTH)}, "X-Api-Key" = '{API_KEY}' }}

[[request]]
path = "/b"
[request.headers]
Cookie = \"\"\"session=cookie<secret>-\\
    Z9y8X7w6\"\"\"
Accept = "text/plain"  # sent with {COOKIE}

[[component]]
name = "app"
host = "b"

[[agent]]
name = "b"
url = "{agent}"
token_env = "{AGENT_VAR}"

[[prometheus]]
url = "http://127.0.0.1:{closed_port()}"
token_env = "{PROM_VAR}"
timeout = "1s"
[prometheus.series.host]
preset = "node_exporter"
"""


def test_no_secret_of_the_plan_is_in_any_file_of_the_run_folder(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("")
    config = (
        f'[agent]\nbind = "127.0.0.1"\nport = 0\ntoken = "{AGENT_TOKEN}"\n'
        f'[[component]]\nname = "app"\n[component.log]\npath = "{log}"\nformat = "probe"\n'
    )
    seen: list[dict[str, str]] = []
    handler = type("Handler", (_Recorder,), {"seen": seen})
    target = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    target.daemon_threads = True
    with serving(target), serving(make_server(parse_config(config, "agent.toml"))) as agent:
        plan = tmp_path / "plan.toml"
        plan.write_text(plan_text(f"http://127.0.0.1:{target.server_address[1]}", agent.url))
        runs = tmp_path / "runs"
        env = {
            **os.environ,
            "PYTHONPATH": str(PYTHON_DIR),
            AGENT_VAR: AGENT_TOKEN,
            PROM_VAR: PROM_TOKEN,
        }
        done = subprocess.run(
            [sys.executable, "-m", "pinchpoint", "run", str(plan), "--runs-dir", str(runs), "-q"],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [run_dir] = list(runs.iterdir())

    # The target got the real values; the agent took the token (it refuses any other).
    assert {h.get("authorization") for h in seen if "x-api-key" in h} == {AUTH}
    assert {h.get("x-api-key") for h in seen if "x-api-key" in h} == {API_KEY}
    assert {h.get("cookie") for h in seen if "cookie" in h} == {COOKIE}
    collection = json.loads((run_dir / "collection.json").read_text())
    assert collection["agents"]["b"]["status"] == "ok"

    files = [p for p in run_dir.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"plan.toml", "run.json", "requests.parquet", "report.html"} <= names
    assert {"collection.json", "verdict.json", "resources.parquet"} <= names
    for path in files:
        data = path.read_bytes()
        for secret in (*SECRETS, *CORES):
            for spelling in spellings(secret):
                assert spelling not in data, f"{path.name} holds {spelling!r}"
    stored = (run_dir / "plan.toml").read_text()
    assert "<redacted>" in stored and "x-api-key" in stored and "/b" in stored
    assert stored.count("<redacted>") >= 5  # 3 header values, 2 comments

    assert stat.S_IMODE(runs.stat().st_mode) == 0o700
    for path in [run_dir, *run_dir.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path}: {oct(mode)}"


def test_an_inline_agent_token_is_refused_in_one_line(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        '[target]\nurl = "http://127.0.0.1:9/"\n[load]\nusers = 1\nduration = "1s"\n'
        '[[request]]\npath = "/"\n'
        '[[agent]]\nname = "b"\nurl = "http://127.0.0.1:7070"\ntoken = "abcdefabcdef0123"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "pinchpoint", "run", str(plan), "--runs-dir", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(PYTHON_DIR)},
    )
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert f"{plan}:11: agent[0].token: the plan holds no secret" in line
    assert "token_env" in line and "abcdefabcdef0123" not in line
    assert not (tmp_path / "r").exists()
