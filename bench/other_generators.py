"""Locust (FastHttpUser) and k6 as generators for bench/engine_vs_wrk.py.

Each is installed once under the repository's .tools/ (ignored by git), never into the
project's environment: Locust into its own venv at .tools/bench-locust, k6 built from its
Go module into .tools/bin. A tool that does not install is reported with the reason and
left out of the comparison.

Each runner is pinned to one core and returns the requests it made, the seconds they took
and the generator CPU seconds spent on them, like the wrk and pinchpoint runners.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

TOOLS = Path(__file__).resolve().parent.parent / ".tools"
LOCUST_VERSION = "2.47.0"
K6_VERSION = "v1.8.1"

LOCUSTFILE = """\
from locust import FastHttpUser, task


class Get(FastHttpUser):
    @task
    def get(self):
        self.client.get("/")
"""

K6_SCRIPT = """\
import http from "k6/http";

export default function () {
  http.get(__ENV.TARGET);
}
"""

Runner = Callable[[str, int, float, int], dict]


def _tail(text: str | None, lines: int = 3) -> str:
    return " | ".join((text or "").strip().splitlines()[-lines:])


def _install(argv: list[str], timeout: float, env: dict | None = None) -> str:
    """Runs one install step; returns why it failed, or "" when it did not."""
    try:
        subprocess.run(argv, check=True, timeout=timeout, capture_output=True, text=True, env=env)
    except FileNotFoundError as e:
        return f"{e.filename} not found"
    except subprocess.TimeoutExpired:
        return f"{' '.join(argv[:3])} took over {timeout:.0f}s"
    except subprocess.CalledProcessError as e:
        return f"{' '.join(argv[:3])} exited {e.returncode}: {_tail(e.stderr or e.stdout)}"
    return ""


def ensure_locust() -> tuple[Path | None, str]:
    """Returns (locust executable, "") or (None, why it is not there)."""
    venv = TOOLS / "bench-locust"
    exe = venv / "bin" / "locust"
    if exe.exists():
        return exe, ""
    python = shutil.which("python3") or sys.executable
    print(f"installing locust {LOCUST_VERSION} into .tools/bench-locust (once)...", flush=True)
    why = _install([python, "-m", "venv", str(venv)], 300) or _install(
        [str(venv / "bin" / "pip"), "install", "-q", f"locust=={LOCUST_VERSION}"], 1200
    )
    if why or not exe.exists():
        return None, why or "pip finished but bin/locust is missing"
    return exe, ""


def ensure_k6() -> tuple[Path | None, str]:
    """Returns (k6 executable, "") or (None, why it is not there)."""
    exe = TOOLS / "bin" / "k6"
    if exe.exists():
        return exe, ""
    go = shutil.which("go")
    if not go:
        return None, "go is not on PATH (k6 is built from its Go module)"
    print(f"building k6 {K6_VERSION} into .tools/bin (once; takes minutes)...", flush=True)
    env = {**os.environ, "GOBIN": str(TOOLS / "bin")}
    why = _install([go, "install", f"go.k6.io/k6@{K6_VERSION}"], 1800, env)
    if why or not exe.exists():
        return None, why or "go install finished but k6 is missing"
    return exe, ""


def _tree_cpu(proc: psutil.Process) -> float:
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def locust_runner(exe: Path, workdir: Path) -> Runner:
    """Locust headless, one process (no workers), FastHttpUser looping GETs without wait.

    Its window runs from "Ramping to" to "--run-time limit reached" in its log (its -t
    timer starts before the users do, so the window is shorter than -t); the CPU of its
    process tree is read at both marks, so interpreter start-up and shutdown are left out.
    Requests are the Aggregated count of its summary.
    """
    locustfile = workdir / "locustfile.py"
    locustfile.write_text(LOCUSTFILE)

    def run(url: str, connections: int, seconds: float, core: int) -> dict:
        secs = max(1, round(seconds))
        argv = ["taskset", "-c", str(core), str(exe), "-f", str(locustfile), "--headless"]
        argv += ["-u", str(connections), "-r", str(connections), "-t", f"{secs}s"]
        argv += ["--host", url.rstrip("/"), "--only-summary", "--loglevel", "INFO"]
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=workdir
        )
        ps = psutil.Process(proc.pid)
        marks: dict[str, tuple[float, float]] = {}
        out: list[str] = []
        err: list[str] = []

        def read_err() -> None:
            assert proc.stderr
            for line in proc.stderr:
                err.append(line)
                for key, text in (("start", "Ramping to"), ("end", "run-time limit reached")):
                    if text in line and key not in marks:
                        marks[key] = (time.monotonic(), _tree_cpu(ps))

        def read_out() -> None:
            assert proc.stdout
            out.extend(proc.stdout)

        threads = [threading.Thread(target=f, daemon=True) for f in (read_err, read_out)]
        for t in threads:
            t.start()
        try:
            proc.wait(timeout=secs + 120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for t in threads:
            t.join(timeout=10)
        if "start" not in marks or "end" not in marks:
            raise RuntimeError(f"locust exited {proc.returncode}: {_tail(''.join(err))}")
        text = "".join(err + out)  # the summary goes to stderr with the log
        agg = re.search(r"^\s+Aggregated\s+(\d+)\s", text, re.M)
        if not agg:
            raise RuntimeError(f"no Aggregated row in locust's summary: {_tail(text)}")
        (t0, c0), (t1, c1) = marks["start"], marks["end"]
        return {"requests": int(agg.group(1)), "seconds": t1 - t0, "cpu_s": c1 - c0}

    return run


def k6_runner(exe: Path, workdir: Path) -> Runner:
    """k6 with `connections` VUs looping GETs for the duration (GOMAXPROCS follows the pin).

    Requests and rate come from --summary-export; CPU is the whole process's (rusage), as
    for wrk: k6 starts in a fraction of a second.
    """
    script = workdir / "k6.js"
    script.write_text(K6_SCRIPT)
    summary = workdir / "k6-summary.json"
    env = {**os.environ, "K6_NO_USAGE_REPORT": "true"}

    def run(url: str, connections: int, seconds: float, core: int) -> dict:
        summary.unlink(missing_ok=True)
        argv = ["taskset", "-c", str(core), str(exe), "run", "--quiet", "--no-color"]
        argv += ["--no-usage-report", "--vus", str(connections), "--duration", f"{seconds:g}s"]
        argv += ["--summary-export", str(summary), "-e", f"TARGET={url}", str(script)]
        log = workdir / "k6.log"
        with log.open("w") as f:
            proc = subprocess.Popen(argv, stdout=f, stderr=f, cwd=workdir, env=env)
        timer = threading.Timer(seconds + 120, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0 or not summary.exists():
            raise RuntimeError(f"k6 exited {proc.returncode}: {_tail(log.read_text())}")
        reqs = json.loads(summary.read_text())["metrics"]["http_reqs"]
        return {
            "requests": int(reqs["count"]),
            "seconds": reqs["count"] / reqs["rate"],
            "cpu_s": usage.ru_utime + usage.ru_stime,
        }

    return run


def other_runners(workdir: Path) -> dict[str, Runner]:
    """The runners of the tools that are installed or install now; prints why for the rest."""
    runners: dict[str, Runner] = {}
    for name, ensure, make in (
        ("locust", ensure_locust, locust_runner),
        ("k6", ensure_k6, k6_runner),
    ):
        exe, why = ensure()
        if exe is None:
            print(f"{name}: not installed, left out: {why}", flush=True)
            continue
        runners[name] = make(exe, workdir)
    return runners
