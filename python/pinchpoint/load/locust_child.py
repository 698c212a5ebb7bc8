"""The process that runs a locustfile's users under the plan's closed-loop steps, started
by load/locust_steps.py: importing Locust patches the whole process with gevent, so it
happens here, never in pinchpoint's own process.

    python -m pinchpoint.load.locust_child < config.json

The config (JSON on stdin): `locustfile`, `target` (the plan's URL), `run_id`, `tag`,
`steps` [{users, ramp_from, duration}], `timeout` (s), `verify` (True, False or a CA
file), `stream` (where the records go, an Arrow IPC stream of requests.parquet's
columns), `summary` (a JSON file written at the end) and `check_only`.

Stdout carries one JSON object a line: `{"ready": [class names]}` once the users are
loaded, `{"step": [index, start_us]}` and `{"window": [index, start_us, end_us]}` as steps
begin and end, `{"tick": {...}}` each second (the live counters), `{"alive": true}`
twice a second while the gevent loop runs, `{"error": "..."}` before exiting 2 when the
locustfile cannot run. A first SIGTERM stops the run (users end their task, up to
`timeout`), a second kills the users at once; SIGUSR1 (a task that does not yield)
writes the records kept and exits 3 at once.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import IO, Any, cast

import gevent
from locust import User
from locust.clients import HttpSession
from locust.contrib.fasthttp import FastHttpSession
from locust.env import Environment
from locust.runners import LocalRunner
from locust.util.load_locustfile import load_locustfile

from pinchpoint.load.locust_records import Recorder, Tagging
from pinchpoint.load.locust_target import (
    fast_address,
    guard_connections,
    requests_address,
    target_address,
)

POLL_S = 0.1
TICK_S = 1.0
HEARTBEAT_S = 0.5
# Every user of a step starts at once, as the engine's do.
SPAWN_RATE = 1e9


class LocustfileError(Exception):
    """The locustfile cannot run: said on stdout, exit status 2."""


# Where the messages go: the stdout the parent reads, kept apart from the locustfile's
# prints (which go to stderr with Locust's log).
_channel: IO[str] = sys.stdout


def emit(**message: Any) -> None:
    _channel.write(json.dumps(message) + "\n")
    _channel.flush()


def now_us() -> int:
    return time.time_ns() // 1000


def user_classes(path: str, target: str) -> list[type[User]]:
    """The locustfile's User classes, each sending to the target: a class with no host
    gets the target's, one with another host is refused."""
    try:
        found, _shapes = load_locustfile(path)
    except (Exception, SystemExit) as e:
        raise LocustfileError(f"fails to load: {type(e).__name__}: {e}") from None
    if not found:
        raise LocustfileError(
            "defines no Locust User class (a subclass of HttpUser or User, not abstract)"
        )
    classes = list(found.values())
    for cls in classes:
        if cls.host is None:
            cls.host = target
        elif not _at_target(cls.host, target):
            raise LocustfileError(
                f"{cls.__name__}.host is {cls.host}, not the plan's target {target}: "
                "remove host from the class or point target.url at it"
            )
    return classes


def _at_target(host: str, target: str) -> bool:
    """A class's host is the target as both of Locust's clients read it."""
    want = target_address(target)
    try:
        return requests_address(host) == want and fast_address(host) == want
    except Exception:  # a host the clients cannot read is no target
        return False


def _heartbeat() -> None:
    """`{"alive": true}` every HEARTBEAT_S while the gevent loop runs: when the parent
    hears nothing for a task's budget, a task is holding the process without yielding."""
    while True:
        emit(alive=True)
        gevent.sleep(HEARTBEAT_S)


def _on_stall(recorder: Recorder) -> None:
    """SIGUSR1 (the parent's, when the heartbeat stops): a task holds the process without
    yielding. The handler runs inside that task, between two of its Python steps: it
    writes every record kept so far and ends the process there (exit status 3)."""

    def stalled(signum: int, frame: object) -> None:
        recorder.close()
        os._exit(3)

    signal.signal(signal.SIGUSR1, stalled)


def users_at(step: dict, elapsed: float) -> int:
    """The users of a step `elapsed` seconds in: held, or on the way along a ramp."""
    if step["ramp_from"] is None:
        return int(step["users"])
    f = min(max(elapsed / step["duration"], 0.0), 1.0)
    return math.floor(step["ramp_from"] + (step["users"] - step["ramp_from"]) * f + 0.5)


class Stopping:
    """The SIGTERMs received: 1 stop after the tasks in flight, 2 kill the users."""

    def __init__(self, runner: LocalRunner) -> None:
        self.runner = runner
        self.level = 0
        self.parent = os.getppid()

    def signal(self) -> None:
        self.level += 1
        if self.level >= 2:
            self.runner.user_greenlets.kill(block=False)

    def wanted(self) -> bool:
        return self.level > 0 or os.getppid() != self.parent


def run(config: dict) -> dict:
    classes = user_classes(config["locustfile"], config["target"])
    if config["check_only"]:
        emit(ready=[c.__name__ for c in classes])
        return {}
    env = Environment(user_classes=classes, stop_timeout=config["timeout"])
    recorder = Recorder(config["stream"])
    tagging = Tagging(config, recorder)
    tagging.install(HttpSession)
    tagging.install(FastHttpSession)
    guard_connections(tagging.target, lambda a: tagging.refuse(f"{a[0]}://{a[1]}:{a[2]}"))
    listen = cast(Callable[[Callable[..., None]], None], env.events.request.add_listener)
    listen(recorder.on_request)
    runner = env.create_local_runner()
    stopping = Stopping(runner)
    gevent.signal_handler(signal.SIGTERM, stopping.signal)
    _on_stall(recorder)
    gevent.spawn(_heartbeat)
    emit(ready=[c.__name__ for c in classes])
    started_us = now_us()
    windows: list[tuple[int, int]] = []
    next_tick = time.monotonic() + TICK_S
    for index, step in enumerate(config["steps"]):
        if stopping.wanted() or tagging.off_target:
            break
        start_us, began = now_us(), time.monotonic()
        recorder.step = index
        emit(step=[index, start_us])
        active = -1
        while True:
            elapsed = time.monotonic() - began
            want = users_at(step, elapsed)
            if want != active:
                active = recorder.users = want
                runner.start(want, spawn_rate=SPAWN_RATE)
            if elapsed >= step["duration"] or stopping.wanted() or tagging.off_target:
                break
            gevent.sleep(min(POLL_S, step["duration"] - elapsed))
            recorder.flush_due()
            if time.monotonic() >= next_tick:
                next_tick = time.monotonic() + TICK_S
                emit(tick=recorder.tick(index, want, step["level"]))
        windows.append((start_us, now_us()))
        emit(window=[index, *windows[-1]])
    interrupted = len(windows) < len(config["steps"]) or stopping.level > 0
    if stopping.level < 2:
        runner.stop()
    runner.quit()
    recorder.close()
    return {
        "windows": windows,
        "interrupted": interrupted,
        "started_us": started_us,
        "ended_us": now_us(),
        "records": recorder.rows,
        "endpoint_names": recorder.endpoint_names(),
        "error_reasons": recorder.reasons,
        "off_target": tagging.off_target,
    }


def main() -> int:
    global _channel
    _channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Locust warns of a spawn rate above 100: here users start at once on purpose.
    logging.getLogger("locust.runners").setLevel(logging.ERROR)
    config = json.loads(sys.stdin.read())
    try:
        summary = run(config)
    except LocustfileError as e:
        emit(error=str(e))
        return 2
    if summary:
        with open(config["summary"], "w") as f:
            json.dump(summary, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
