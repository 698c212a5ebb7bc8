"""A component log with no file to read is a warning, never a silent 0: `pinchpoint run`
says so on the terminal and in collection.json, for a path and for a glob."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def target() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_a_log_with_no_file_is_a_warning(tmp_path: Path) -> None:
    missing = tmp_path / "logs" / "access.log"
    glob = tmp_path / "logs" / "app-*.log"
    present = tmp_path / "present.log"
    present.write_text("")
    with target() as url:
        plan = tmp_path / "plan.toml"
        plan.write_text(
            f'[target]\nurl = "{url}"\n[load]\nlower = 1\nupper = 1\nduration = "0.5s"\n'
            'warmup = "0s"\n[[request]]\npath = "/"\n'
            f'[[component]]\nname = "web"\ncalls = ["app"]\n'
            f'[component.log]\npath = "{missing}"\nformat = "nginx"\n'
            f'[[component]]\nname = "app"\ncalls = ["db"]\n'
            f'[component.log]\npath = "{glob}"\nformat = "probe"\n'
            f'[[component]]\nname = "db"\n[component.log]\npath = "{present}"\nformat = "probe"\n'
        )
        runs = tmp_path / "runs"
        done = subprocess.run(
            [sys.executable, "-m", "pinchpoint", "run", str(plan), "--runs-dir", str(runs), "-q"],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "PYTHONPATH": str(PYTHON_DIR), "COLUMNS": "300"},
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    web = f"web: log {missing}: no such file, 0 lines read"
    app = f"app: log {glob}: no file matches, 0 lines read"
    assert web in done.stdout and app in done.stdout
    assert "db: log" not in done.stdout  # a file with nothing new is read: no warning
    [run_dir] = list(runs.iterdir())
    collection = json.loads((run_dir / "collection.json").read_text())
    components = collection["components"]
    assert components["web"]["warnings"] == [web]
    assert components["web"]["files"][str(missing)]["missing"] is True
    assert components["app"]["warnings"] == [app]
    assert "warnings" not in components["db"]
    assert "missing" not in components["db"]["files"][str(present)]
    assert web in collection["warnings"] and app in collection["warnings"]
