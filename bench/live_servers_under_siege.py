"""A real run's `--serve` page and `--metrics` while each holds a siege of stalled clients.

Runs `pinchpoint run` (users 1 to 3, --seconds each) against a target in this process,
with --serve and --metrics on 127.0.0.1. Once the page answers, times --requests GETs of
the page's /state and of /metrics with nothing else connected, then opens --siege
connections to each (half send nothing, half a head cut short and one more byte a
second: slowloris) and times them again. Prints the run's threads and open files before
and under the siege, the real requests' median and max, how the siege's connections
ended (closed, 503, 408, still open), what the run wrote to its output, and the requests
it made (its load is the same with or without the siege).

    .venv/bin/python bench/live_servers_under_siege.py
    .venv/bin/python bench/live_servers_under_siege.py --siege 200 --no-siege-run
"""

from __future__ import annotations

import argparse
import http.client
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import suppress
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from ok_target import OkTarget
from pinchpoint_lab.ports import free_port

HALF_HEAD = b"GET /state HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Ag"


class Target(OkTarget):
    delay_s = 0.002


def timed(port: int, path: str, count: int) -> tuple[list[float], Counter[str]]:
    """Seconds of `count` GETs of `path`, each on a new connection, 20 ms apart, and what
    those not answered 200 met."""
    out, failed = [], Counter[str]()
    for _ in range(count):
        started = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("GET", path)
            answer = conn.getresponse()
            answer.read()
            if answer.status == 200:
                out.append(time.perf_counter() - started)
            else:
                failed[str(answer.status)] += 1
        except OSError as e:
            failed[type(e).__name__] += 1
        finally:
            conn.close()
        time.sleep(0.02)
    return out, failed


def shown(times: tuple[list[float], Counter[str]]) -> str:
    seconds, failed = times
    if not seconds:
        return f"none answered: {dict(failed)}"
    text = f"median {statistics.median(seconds) * 1000:7.2f} ms  max {max(seconds) * 1000:8.2f} ms"
    return text + (f"  not answered: {dict(failed)}" if failed else "")


def open_siege(port: int, count: int) -> tuple[list[socket.socket], list[socket.socket]]:
    idle, half = [], []
    for n in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError as e:
            print(f"  connection {n} to {port}: {e}")
            continue
        sock.setblocking(False)
        if n % 2:
            with suppress(OSError):
                sock.send(HALF_HEAD)
            half.append(sock)
        else:
            idle.append(sock)
    return idle, half


def fate(sock: socket.socket) -> str:
    try:
        data = sock.recv(4096, socket.MSG_DONTWAIT | socket.MSG_PEEK)
    except BlockingIOError:
        return "open"
    except OSError:
        return "reset"
    return data.split(b"\r\n", 1)[0].decode() if data else "closed"


def trickle(half: list[socket.socket], stop: threading.Event) -> None:
    while not stop.wait(1.0):
        for sock in half:
            with suppress(OSError):
                sock.send(b"x")


def requests_made(metrics: str) -> int:
    found = re.search(r"^pinchpoint_requests_total\{[^}]*\} (\d+)$", metrics, re.MULTILINE)
    return int(found.group(1)) if found else -1


def one_run(folder: Path, target: int, seconds: int, siege: int, count: int, show: bool) -> None:
    serve, metrics = free_port(), free_port()
    (folder / "plan.toml").write_text(
        f'[target]\nurl = "http://127.0.0.1:{target}"\n\n'
        f'[load]\nlower = 1\nupper = 3\nstep = 1\nduration = "{seconds}s"\nwarmup = "0s"\n\n'
        '[[request]]\npath = "/"\n'
    )
    argv = [sys.executable, "-m", "pinchpoint", "run", "plan.toml", "-q",
            "--serve", f"127.0.0.1:{serve}", "--metrics", f"127.0.0.1:{metrics}",
            "--serve-linger", "0"]  # fmt: skip
    out = folder / "run.out"
    with out.open("w") as sink:
        proc = subprocess.Popen(argv, cwd=folder, stdout=sink, stderr=subprocess.STDOUT)
    process = psutil.Process(proc.pid)
    state, scrape = f"http://127.0.0.1:{serve}/state", f"http://127.0.0.1:{metrics}/metrics"
    last = ""
    try:
        deadline = time.monotonic() + 60
        while True:
            with suppress(httpx.HTTPError):
                if httpx.get(state, timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"the page did not answer: {out.read_text()}")
            time.sleep(0.1)
        print(f"siege of {siege} connections on each server" if siege else "no siege")
        before = (process.num_threads(), process.num_fds())
        print(f"  run process before: {before[0]} threads, {before[1]} open files")
        print(f"  /state   alone:       {shown(timed(serve, '/state', count))}")
        print(f"  /metrics alone:       {shown(timed(metrics, '/metrics', count))}")
        if siege:
            held = [open_siege(port, siege) for port in (serve, metrics)]
            stop = threading.Event()
            tricklers = [
                threading.Thread(target=trickle, args=(half, stop), daemon=True) for _, half in held
            ]
            for one in tricklers:
                one.start()
            time.sleep(0.5)
            during = (process.num_threads(), process.num_fds())
            print(f"  run process under it: {during[0]} threads, {during[1]} open files")
            for name, (idle, half) in zip(("--serve", "--metrics"), held, strict=True):
                print(f"  {name} idle:      {dict(Counter(fate(s) for s in idle))}")
                print(f"  {name} half-sent: {dict(Counter(fate(s) for s in half))}")
            print(f"  /state   under siege: {shown(timed(serve, '/state', count))}")
            print(f"  /metrics under siege: {shown(timed(metrics, '/metrics', count))}")
            time.sleep(6)  # past the head timeout
            after = (process.num_threads(), process.num_fds())
            print(f"  6 s later:            {after[0]} threads, {after[1]} open files")
            for name, (idle, half) in zip(("--serve", "--metrics"), held, strict=True):
                fates = Counter(fate(s) for s in idle + half)
                print(f"  {name} then:      {dict(fates)}")
            stop.set()
            for idle, half in held:
                for sock in idle + half:
                    sock.close()
        while proc.poll() is None:
            with suppress(httpx.HTTPError):
                last = httpx.get(scrape, timeout=2).text
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(60)
    text = out.read_text()
    print(f"  run exit {proc.returncode}, requests made (last scrape): {requests_made(last)}")
    print(f"  run output: {len(text.splitlines())} lines, tracebacks: {text.count('Traceback')}")
    if show:
        print(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--siege", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--no-siege-run", action="store_true", help="a run without the siege too")
    parser.add_argument("--show-output", action="store_true", help="print what the run wrote")
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4 * args.siege + 1024), hard))
    target = ThreadingHTTPServer(("127.0.0.1", 0), Target)
    threading.Thread(target=target.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="pinchpoint-live-siege-") as folder:
        if args.no_siege_run:
            one_run(
                Path(folder),
                target.server_address[1],
                args.seconds,
                0,
                args.requests,
                args.show_output,
            )
        one_run(
            Path(folder),
            target.server_address[1],
            args.seconds,
            args.siege,
            args.requests,
            args.show_output,
        )
    target.shutdown()


if __name__ == "__main__":
    main()
