"""How soon a change of users asked while a run goes is in force: pinchpoint (`pinchpoint
run --serve`, changed through its `/control` with the token, as `pinchpoint control`
does) beside Locust's web UI (`POST /swarm` with a spawn rate of 1,000 users/s), in
interleaved rounds.

Each round loads a server in this process (loopback, a thread per connection, a 2-byte
answer) with 2 users, then asks for 6 and times, from the moment it asks, until the
server has read a request from each of the 6 users (6 distinct connections after the
ask): the change asked, taken, the new users connected and sending; and how long the ask took
to be answered (the same client, httpx, on both sides). The medians, the spread and
pinchpoint's median as a ratio of Locust's are printed.

    .venv/bin/python bench/live_control.py --rounds 5
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "outputs"))

import live_helpers as live

from ok_target import OkTarget
from pinchpoint.outputs.control_client import ask_users
from pinchpoint_lab.ports import free_port

BEFORE, AFTER = 2, 6
WAIT_S = 30.0
LOCUSTFILE = """\
from locust import FastHttpUser, constant, task


class Get(FastHttpUser):
    wait_time = constant(0)

    @task
    def get(self):
        self.client.get("/")
"""


class Seen:
    """The (time, client port) of each request the server read."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[tuple[float, int]] = []

    def ports_since(self, t: float) -> int:
        with self.lock:
            return len({port for at, port in self.requests if at >= t})


class Quiet(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        return  # a generator that stops resets its connections


def _server(seen: Seen) -> ThreadingHTTPServer:
    class Handler(OkTarget):
        def do_GET(self) -> None:
            with seen.lock:
                seen.requests.append((time.monotonic(), int(self.client_address[1])))
            self.answer()

    server = Quiet(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}).start()
    return server


def _until(condition: Callable[[], bool], what: str) -> float:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.001)
    return time.monotonic()


def _stopped(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def pinchpoint_round(folder: Path, target: int, seen: Seen) -> tuple[float, float]:
    plan = (
        f'[target]\nurl = "http://127.0.0.1:{target}"\n\n'
        f'[load]\nlower = {BEFORE}\nupper = 8\nstep = 6\nduration = "20s"\nwarmup = "0s"\n\n'
        '[[request]]\npath = "/"\n'
    )
    with live.run(folder, plan, "-q") as running:
        try:
            url = running.page_url()
            start = time.monotonic()
            _until(lambda: seen.ports_since(start) >= BEFORE, f"{BEFORE} pinchpoint users")
            asked = time.monotonic()
            ask_users(url, AFTER)
            answered = time.monotonic() - asked
            in_force = _until(lambda: seen.ports_since(asked) >= AFTER, f"{AFTER} users") - asked
            return answered, in_force
        finally:
            _stopped(running.proc)


def locust_round(folder: Path, target: int, seen: Seen) -> tuple[float, float]:
    (folder / "locustfile.py").write_text(LOCUSTFILE)
    port = free_port()
    locust = Path(sys.executable).with_name("locust")
    argv = [str(locust), "-f", "locustfile.py", "--host", f"http://127.0.0.1:{target}",
            "--web-host", "127.0.0.1", "--web-port", str(port)]  # fmt: skip
    proc = subprocess.Popen(
        argv, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True
    )
    import httpx

    try:
        base = f"http://127.0.0.1:{port}"

        def up() -> bool:
            try:
                return httpx.get(base + "/", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        _until(up, "Locust's web UI")
        swarm = {"spawn_rate": "1000", "host": f"http://127.0.0.1:{target}"}
        start = time.monotonic()
        httpx.post(base + "/swarm", data=swarm | {"user_count": str(BEFORE)}, timeout=10)
        _until(lambda: seen.ports_since(start) >= BEFORE, f"{BEFORE} Locust users")
        asked = time.monotonic()
        httpx.post(base + "/swarm", data=swarm | {"user_count": str(AFTER)}, timeout=10)
        answered = time.monotonic() - asked
        return answered, _until(lambda: seen.ports_since(asked) >= AFTER, f"{AFTER} users") - asked
    finally:
        _stopped(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    seen = Seen()
    server = _server(seen)
    target = int(server.server_address[1])
    took: dict[str, list[tuple[float, float]]] = {"pinchpoint": [], "locust": []}
    try:
        for n in range(rounds):
            for name, one in (("pinchpoint", pinchpoint_round), ("locust", locust_round)):
                with tempfile.TemporaryDirectory() as folder:
                    took[name].append(one(Path(folder), target, seen))
                answered, in_force = took[name][-1]
                print(
                    f"round {n + 1} {name}: answered in {answered * 1000:.1f} ms, "
                    f"{AFTER} users sending in {in_force * 1000:.1f} ms",
                    flush=True,
                )
    finally:
        server.shutdown()
    medians = {}
    for name, values in took.items():
        ms = sorted(v * 1000 for _, v in values)
        medians[name] = statistics.median(ms)
        answered = statistics.median(a * 1000 for a, _ in values)
        print(
            f"{name}: from the ask to {AFTER} users sending, median {medians[name]:.1f} ms "
            f"(rounds {ms[0]:.1f}-{ms[-1]:.1f}); the ask answered in {answered:.1f} ms"
        )
    print(f"pinchpoint / Locust (medians): {medians['pinchpoint'] / medians['locust']:.2f}x")


if __name__ == "__main__":
    main()
