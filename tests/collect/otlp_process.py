"""An OTLP receiver in a process of its own, so that its memory and its terminal can be
measured: `python otlp_process.py RUN_ID` listens on a free port of 127.0.0.1, prints the
port, and on a line `stop` on its stdin prints one JSON line of what it received (the
collector's report and problems) and its peak RSS in MB; what it wrote to stderr is left
for the caller to read."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from pinchpoint.collect.sources.otlp import OtlpCollector
from pinchpoint.plan.otlp import Otlp


class ReceiverProcess:
    """The receiver process, started; `stop()` ends it and gives its figures."""

    def __init__(self, run_id: str = "r-otlp.1") -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), run_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}/v1/traces"

    def stop(self, timeout: float = 60.0) -> tuple[dict[str, Any], str]:
        """(what the receiver reports, with `peak_rss_mb`; what it wrote to stderr)."""
        out, err = self.process.communicate("stop\n", timeout=timeout)
        return json.loads(out.strip().splitlines()[-1]), err

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


def _serve(run_id: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    collector = OtlpCollector([Otlp(listen=f"127.0.0.1:{free}", settle=0)])
    collector.start(run_id, 1.0)
    port = collector.receivers[0].port  # type: ignore[attr-defined]
    print(port, flush=True)
    sys.stdin.readline()
    collector.stop()
    collector.collect_logs(lambda rows: None)
    seen = collector.report()["otlp"][collector.configs[0].source]
    peak = _peak_rss_kb() / 1024
    print(json.dumps({**seen, "problems": collector.problems, "peak_rss_mb": round(peak)}))
    collector.close()


def _peak_rss_kb() -> int:
    """This process's peak RSS since it started its program (VmHWM): getrusage's maxrss
    would also count the process that started it, carried over by fork and exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


if __name__ == "__main__":
    _serve(sys.argv[1])
