"""A TLS failure says why: `pinchpoint load` and `pinchpoint run` against an HTTPS server
whose certificate nobody trusts carry the TLS error's own words ("invalid peer
certificate: UnknownIssuer") to the summary, the terminal, run.json and the verdict."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")

UNKNOWN_ISSUER = "invalid peer certificate: UnknownIssuer"
PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def https_server(folder: Path) -> Iterator[str]:
    """An HTTPS server on 127.0.0.1 with a self-signed certificate (not a CA's: that
    would be refused as a CA used as an end entity); yields its URL."""
    cert, key = folder / "server.crt", folder / "server.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1",
            "-addext", "basicConstraints=critical,CA:FALSE",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def pinchpoint(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pinchpoint", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(PYTHON_DIR), "COLUMNS": "300"},
    )


def test_load_says_why_tls_failed(tmp_path: Path) -> None:
    with https_server(tmp_path) as url:
        as_json = pinchpoint("load", f"{url}/", "-c", "2", "-d", "0.5", "--json")
        shown = pinchpoint("load", f"{url}/", "-c", "2", "-d", "0.5")
    assert as_json.returncode == 0, as_json.stderr
    summary = json.loads(as_json.stdout)
    assert summary["errors"]["tls"] == summary["requests"] > 0
    assert summary["error_reasons"] == {"tls": [UNKNOWN_ISSUER]}
    assert shown.returncode == 0, shown.stderr
    assert "tls: " in shown.stdout and f"({UNKNOWN_ISSUER})" in shown.stdout


def test_run_says_why_tls_failed(tmp_path: Path) -> None:
    with https_server(tmp_path) as url:
        plan = tmp_path / "plan.toml"
        plan.write_text(
            f'[target]\nurl = "{url}"\n[load]\nlower = 1\nupper = 1\nduration = "0.5s"\n'
            'warmup = "0s"\n[[request]]\npath = "/"\n'
        )
        runs = tmp_path / "runs"
        done = pinchpoint("run", str(plan), "--runs-dir", str(runs), "-q")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [run_dir] = list(runs.iterdir())
    run = json.loads((run_dir / "run.json").read_text())
    assert run["error_reasons"] == {"tls": [UNKNOWN_ISSUER]}
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["error_reasons"] == {"tls": [UNKNOWN_ISSUER]}
    failed = sum(s["errors_by_class"].get("tls", 0) for s in verdict["steps"])
    assert f"tls errors ({failed}): {UNKNOWN_ISSUER}" in done.stdout
    assert UNKNOWN_ISSUER in (run_dir / "report.html").read_text()
