"""`pinchpoint load --http2` against real nginx serving HTTP/2 on a TLS listener, with a
certificate made here by openssl: trusted with --ca-file, accepted with --insecure, and
refused (the `tls` error class) with neither."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinchpoint.demo import NginxNotFound, find_nginx
from pinchpoint_lab.ports import end, free_port


def _nginx() -> tuple[Path | None, str]:
    """nginx, or None and why it cannot run this test."""
    try:
        nginx = find_nginx()
    except NginxNotFound as e:
        return None, str(e)
    built = subprocess.run([nginx, "-V"], capture_output=True, text=True, timeout=10).stderr
    for module in ("http_ssl_module", "http_v2_module"):
        if f"--with-{module}" not in built:
            return None, f"this nginx was built without {module}"
    return nginx, ""


NGINX, WHY_NOT = _nginx()
pytestmark = [
    pytest.mark.skipif(NGINX is None, reason=WHY_NOT),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command"),
]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certs(folder: Path) -> None:
    """ca.crt (a CA) and server.crt/server.key, signed by it for 127.0.0.1 and localhost."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(
        "req", "-x509", *ec, "-days", "1", "-keyout", "ca.key", "-out", "ca.crt",
        "-subj", "/CN=pinchpoint test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign",
        cwd=folder,
    )  # fmt: skip
    _openssl(
        *["req", *ec, "-keyout", "server.key", "-out", "server.csr"],
        "-subj",
        "/CN=127.0.0.1",
        cwd=folder,
    )
    (folder / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "basicConstraints=critical,CA:FALSE\n"
        "extendedKeyUsage=serverAuth\n"
    )
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "1", "-out", "server.crt", "-extfile", "server.ext",
        cwd=folder,
    )  # fmt: skip


def _listen(port: int, nginx: Path) -> str:
    """The listen lines for HTTP/2 over TLS: `http2 on` from nginx 1.25.1 on."""
    out = subprocess.run([nginx, "-v"], capture_output=True, text=True, timeout=10).stderr
    m = re.search(r"nginx/(\d+)\.(\d+)\.(\d+)", out)
    version = tuple(int(x) for x in m.groups()) if m else (0, 0, 0)
    if version >= (1, 25, 1):
        return f"listen 127.0.0.1:{port} ssl;\n        http2 on;"
    return f"listen 127.0.0.1:{port} ssl http2;"


@pytest.fixture
def nginx_h2(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """nginx with HTTP/2 over TLS on 127.0.0.1; yields its port and the certificates' folder."""
    assert NGINX is not None
    make_certs(tmp_path)
    port = free_port()
    temp = "\n".join(
        f"    {kind}_temp_path {tmp_path / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    user = "user root;\n" if os.geteuid() == 0 else ""
    (tmp_path / "nginx.conf").write_text(
        f"""daemon off;
{user}worker_processes 1;
pid {tmp_path / "nginx.pid"};
error_log {tmp_path / "error.log"} warn;
events {{ worker_connections 1024; }}
http {{
    log_format proto '$server_protocol $status $request_uri';
    access_log {tmp_path / "access.log"} proto;
{temp}
    server {{
        {_listen(port, NGINX)}
        ssl_certificate {tmp_path / "server.crt"};
        ssl_certificate_key {tmp_path / "server.key"};
        location / {{ return 200 "hello over h2\\n"; }}
        location /missing {{ return 404; }}
    }}
}}
"""
    )
    argv = [str(NGINX), "-p", f"{tmp_path}/", "-c", str(tmp_path / "nginx.conf")]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    errors = (
                        (tmp_path / "error.log").read_text()
                        if (tmp_path / "error.log").exists()
                        else ""
                    )
                    pytest.fail(
                        f"nginx did not start: {proc.stderr.read().decode() if proc.stderr else ''}{errors}"
                    )
                time.sleep(0.05)
        yield port, tmp_path
    finally:
        end(proc)


def load(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "pinchpoint", "load", *args, "-c", "3", "-d", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _logged(folder: Path) -> list[str]:
    return (folder / "access.log").read_text().splitlines()


def _check(summary: dict, status: str) -> None:
    """Every request answered with `status`, but for the rare one sent as its connection
    said GOAWAY: nginx ends each HTTP/2 connection after keepalive_requests (1000), and
    the engine moves to a new one, so a run of a second rotates dozens of connections."""
    errors = summary["errors"]
    assert set(errors) <= {"closed"}, errors
    assert errors.get("closed", 0) <= summary["requests"] // 1000, errors
    assert summary["statuses"] == {status: summary["responses"]}
    assert summary["requests"] > 10


def test_http2_over_tls_trusted_by_ca_file_and_insecure(nginx_h2: tuple[int, Path]) -> None:
    port, folder = nginx_h2
    url = f"https://127.0.0.1:{port}/hello"
    summary = load(url, "--http2", "--ca-file", str(folder / "ca.crt"))
    _check(summary, "200")
    assert summary["bytes"] == len(b"hello over h2\n") * summary["responses"]
    logged = _logged(folder)
    assert summary["responses"] <= len(logged) <= summary["requests"]
    assert set(logged) == {"HTTP/2.0 200 /hello"}

    summary = load(f"https://127.0.0.1:{port}/missing", "--http2", "--insecure")
    _check(summary, "404")
    assert set(_logged(folder)[len(logged) :]) == {"HTTP/2.0 404 /missing"}

    # Without --http2 the same listener is loaded over HTTP/1.1 with TLS.
    before = len(_logged(folder))
    summary = load(url, "--insecure")
    assert summary["errors"] == {}
    assert summary["statuses"] == {"200": summary["requests"]}
    assert set(_logged(folder)[before:]) == {"HTTP/1.1 200 /hello"}


def test_an_untrusted_certificate_is_a_tls_error(nginx_h2: tuple[int, Path]) -> None:
    port, folder = nginx_h2
    summary = load(f"https://127.0.0.1:{port}/", "--http2")
    assert summary["responses"] == 0
    assert summary["errors"] == {"tls": summary["requests"]} and summary["requests"] > 0
    assert not (folder / "access.log").exists() or _logged(folder) == []
