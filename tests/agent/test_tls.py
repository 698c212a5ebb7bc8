"""An agent with TLS: the client verifies it with the plan's ca_file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from agent_helpers import TOKEN_ENV, agent_thread, append, config_text, probe_line

from pinchpoint.collect.logs.reader import TierRow
from pinchpoint.collect.sources.remote import RemoteCollector
from pinchpoint.plan.model import Agent, Component

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def self_signed(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "agent.crt", folder / "agent.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    return cert, key


def test_tls_agent_verified_with_ca_file(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    log = tmp_path / "probe.log"
    component = {"name": "app", "log": {"path": str(log), "format": "probe"}}
    text = config_text([component], tls_cert=str(cert), tls_key=str(key))
    with agent_thread(text) as server:
        assert server.url.startswith("https://")
        trusted = RemoteCollector(
            Agent(name="b", url=server.url, token_env=TOKEN_ENV, ca_file=str(cert)),
            [Component(name="app", host="b")],
        )
        trusted.start("tls-1", 0.2)
        append(log, probe_line("tls-1", 1, 7))
        trusted.stop()
        rows: list[TierRow] = []
        trusted.collect_logs(rows.extend)
        assert trusted.problems == []
        assert [r.req_id for r in rows] == [7]

        untrusted = RemoteCollector(
            Agent(name="c", url=server.url, token_env=TOKEN_ENV), [Component(name="app", host="c")]
        )
        untrusted.start("tls-2", 0.2)
        assert untrusted.report()["status"] == "lost"
        assert "CERTIFICATE_VERIFY_FAILED" in untrusted.problems[0]

        plain = RemoteCollector(
            Agent(name="d", url=server.url.replace("https", "http"), token_env=TOKEN_ENV),
            [Component(name="app", host="d")],
        )
        plain.start("tls-3", 0.2)
        assert plain.report()["status"] == "lost"
