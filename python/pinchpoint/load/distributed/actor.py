"""One generator of a distributed run: a Ray actor (runner.py wraps this class with
`ray.remote`) that runs the engine with its share of the load on the node it lives on.

Its engine streams its requests to a file in a folder of its own on its node; the parent
copies what is new in chunks while the run goes (`read_stream`, see stream.py), so no
filesystem is shared and a generator lost mid-run loses only its last chunk. `finish`
waits on one thread while `read_stream`, `stop`, `abandon` and `snapshot` go on others
(the actor is made with `max_concurrency` above 1).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pinchpoint import _engine
from pinchpoint.load.engine_config import EngineConfig
from pinchpoint.load.hook_box import HookBox
from pinchpoint.rundir import files

# How long one wait on the engine lasts: a stop or abandon acts within this.
POLL_S = 0.1
# The generator is saturated when its CPU reaches this share of the threads it runs on
# (as analyze/causes/generator.py and load/plain.py judge one generator).
SATURATED = 0.9


class Generator:
    """The engine on one node, for one share of a run."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.folder = Path(tempfile.mkdtemp(prefix=f"pinchpoint-gen{index}-"))
        self.run: _engine.LoadRun | None = None
        self.box: HookBox | None = None
        self.lock = threading.Lock()
        self.stopped = 0  # 1 stop asked, 2 abandon asked
        self.cpu_start = 0.0
        self.threads = 0

    def where(self) -> dict[str, Any]:
        """The node and process this generator runs on, and the cores it may use."""
        import ray

        util: Any = ray.util  # untyped
        return {
            "node": ray.get_runtime_context().get_node_id(),
            "host": socket.gethostname(),
            "ip": util.get_node_ip_address(),
            "pid": os.getpid(),
            "cores": _usable_cores(),
        }

    def prepare(self, hook: str | None, hook_file: str | None, timeout_s: float) -> None:
        """Loads the hook, if any, before the common start time is chosen. A hook named by
        a file comes with that file's text (`hook_file`), written here beside the records,
        and runs in its own process, each call within the run's timeout (load/hook_box.py)."""
        if hook is not None:
            self.box = HookBox(self._hook_spec(hook, hook_file), timeout_s)

    def ping(self) -> None:
        """Nothing: the parent times a round trip with it."""

    def start(self, config: EngineConfig) -> None:
        """Starts the engine (it waits for `start_at_us` itself), with the hook prepared."""
        config = EngineConfig(**config)
        config["records_path"] = str(self.folder / files.REQUEST_STREAM)
        if self.box is not None:
            config["hook"] = self.box
        with self.lock:
            self.run = _engine.start(config)
            if self.stopped:
                self._halt(self.stopped)
        self.cpu_start = time.process_time()
        self.threads = config["threads"]

    def finish(self) -> dict[str, Any]:
        """Waits for the engine's summary. Returns the summary, the final size of the
        requests stream and the CPU self-check."""
        run = self.run
        assert run is not None, "start first"
        summary = None
        while summary is None:
            if self.box is not None and self.box.broken is not None and not self.stopped:
                self._halt(1)
            summary = run.wait(POLL_S)
        cpu_s = time.process_time() - self.cpu_start
        if self.box is not None:
            self.box.close()
            if self.box.broken is not None:
                summary["stopped"] = f"{self.box.broken}; the generator stopped there"
        wall_s = max((summary["ended_us"] - summary["started_us"]) / 1e6, 1e-9)
        usable = _usable_cores()
        threads = min(self.threads or usable, usable)
        cores = cpu_s / wall_s
        return {
            "summary": summary,
            "stream_size": (self.folder / files.REQUEST_STREAM).stat().st_size,
            "cpu_cores": round(cores, 3),
            "threads": threads,
            "saturated": cores >= SATURATED * threads,
        }

    def read_stream(self, offset: int, size: int) -> bytes:
        """Up to `size` bytes of the requests stream from `offset` (none before it exists)."""
        try:
            with (self.folder / files.REQUEST_STREAM).open("rb") as f:
                f.seek(offset)
                return f.read(size)
        except FileNotFoundError:
            return b""

    def close(self) -> None:
        """Stops the hook's process; removes this generator's folder."""
        if self.box is not None:
            self.box.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def stop(self) -> None:
        """Stops the run after the requests in flight."""
        self._halt(1)

    def abandon(self) -> None:
        """Stops the run and drops the requests in flight."""
        self._halt(2)

    def snapshot(self) -> dict[str, Any] | None:
        """The engine's live counters; None before it started."""
        return self.run.snapshot() if self.run is not None else None

    def _halt(self, level: int) -> None:
        with self.lock:
            self.stopped = max(self.stopped, level)
            if self.run is None:
                return
            if level >= 2:
                self.run.abandon()
            else:
                self.run.stop()

    def _hook_spec(self, spec: str, text: str | None) -> str:
        if text is None:
            return spec
        where, _, name = spec.rpartition(":")
        local = self.folder / Path(where).name
        local.write_text(text)
        return f"{local}:{name}"


def _usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1
