"""SIGTERM and SIGINT on `pinchpoint load`, as real processes against a real nginx (or a
listener that never answers), all on 127.0.0.1: the load stops, every request answered
is recorded, the summary says interrupted, the exit code is 128 + the signal, and no
temporary folder is left behind."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import polars as pl
import psutil
from signal_helpers import finish, never_answering, nginx, start, wait_until


def _running(proc: subprocess.Popen[str], out: Path) -> None:
    """Waits until the engine runs: its records stream exists and holds a batch."""

    def started() -> bool:
        assert proc.poll() is None, proc.communicate()[1]
        stream = out / "requests.arrows"
        return stream.exists() and stream.stat().st_size > 0

    wait_until(started, 30, "the load started")


def _load(url: str, out: Path, tmp: Path, *flags: str) -> subprocess.Popen[str]:
    tmp.mkdir(exist_ok=True)
    args = ["load", url, "--out", str(out), "--json", "-d", "60", *flags]
    return start(args, out.parent, env={"TMPDIR": str(tmp)})


def test_sigterm_keeps_every_answered_request_and_marks_the_summary(tmp_path: Path) -> None:
    with nginx(tmp_path / "nginx") as server:
        out, tmp = tmp_path / "out", tmp_path / "tmp"
        proc = _load(f"http://127.0.0.1:{server.port}/ok", out, tmp, "-c", "4", "--threads", "1")
        _running(proc, out)
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        code, stdout, stderr = finish(proc)
        time.sleep(0.3)  # nginx writes its log line as it answers; let the last land
        answered = server.answered()

    assert code == 143, stderr
    assert "Interrupted by SIGTERM" in stderr
    summary = json.loads(stdout)
    assert summary == json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["signal"] == "SIGTERM"
    requests = pl.read_parquet(out / "requests.parquet")
    print(f"SIGTERM: nginx answered {answered}, {requests.height} recorded")
    assert answered > 100
    assert requests.height == summary["requests"] == answered, "every answer is recorded"
    assert summary["errors"] == {} and summary["abandoned"] == 0
    assert not (out / "requests.arrows").exists()
    assert list(tmp.iterdir()) == [], "no temporary folder left"


def test_sigint_exits_130_and_says_it_was_interrupted(tmp_path: Path) -> None:
    with nginx(tmp_path / "nginx") as server:
        out, tmp = tmp_path / "out", tmp_path / "tmp"
        proc = _load(f"http://127.0.0.1:{server.port}/ok", out, tmp, "-c", "2", "--threads", "1")
        _running(proc, out)
        proc.send_signal(signal.SIGINT)
        code, stdout, stderr = finish(proc)
        time.sleep(0.3)
        answered = server.answered()

    assert code == 130, stderr
    assert "SIGINT: stopping" in stderr and "Interrupted by SIGINT" in stderr
    summary = json.loads(stdout)
    assert summary["interrupted"] is True and summary["signal"] == "SIGINT"
    assert summary["requests"] == answered > 0
    assert list(tmp.iterdir()) == []


def test_sigterm_without_out_leaves_no_temporary_folder(tmp_path: Path) -> None:
    with nginx(tmp_path / "nginx") as server:
        tmp = tmp_path / "tmp"
        tmp.mkdir()
        url = f"http://127.0.0.1:{server.port}/ok"
        proc = start(["load", url, "-c", "2", "-d", "60"], tmp_path, env={"TMPDIR": str(tmp)})
        wait_until(lambda: server.answered() > 0, 30, "the load started")
        proc.send_signal(signal.SIGTERM)
        code, stdout, stderr = finish(proc)

    assert code == 143, stderr
    assert "Interrupted by SIGTERM" in stdout
    assert list(tmp.iterdir()) == []


def _connected(pid: int, port: int) -> int:
    return sum(
        bool(conn.raddr) and conn.raddr.port == port and conn.status == psutil.CONN_ESTABLISHED
        for conn in psutil.Process(pid).net_connections(kind="tcp")
    )


def test_a_second_sigint_abandons_stalled_requests_at_once(tmp_path: Path) -> None:
    with never_answering() as port:
        out, tmp = tmp_path / "out", tmp_path / "tmp"
        flags = ("-c", "4", "--timeout", "120")
        proc = _load(f"http://127.0.0.1:{port}/", out, tmp, *flags)
        wait_until(lambda: (out / "requests.arrows").exists(), 30, "the load started")
        wait_until(lambda: _connected(proc.pid, port) == 4, 30, "the four connections")
        time.sleep(0.5)  # the four requests are sent and wait
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)
        assert proc.poll() is None, "the first Ctrl-C waits for the requests in flight"
        proc.send_signal(signal.SIGINT)
        second = time.monotonic()
        code, stdout, stderr = finish(proc)
        took = time.monotonic() - second

    print(f"second SIGINT: the command ended {took:.2f} s after it")
    assert code == 130, stderr
    assert took < 6.0  # not the requests' 120 s timeout
    assert "Abandoning the requests in flight" in stderr
    summary = json.loads(stdout)
    assert summary["interrupted"] is True
    assert summary["requests"] == 0 and summary["abandoned"] == 4
    assert "4 requests in flight abandoned" in stderr
    assert list(tmp.iterdir()) == []
