"""Generators on Ray (`pinchpoint run --ray`): a real two-node Ray cluster on this machine
(ray.cluster_utils.Cluster, a head and one more node of 1 CPU each, one generator on
each), sending to real nginx on 127.0.0.1, merged into one run folder."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import polars as pl
import pytest
from load_helpers import serving

from pinchpoint import pipeline
from pinchpoint.analyze import analyze
from pinchpoint.demo import NginxNotFound, find_nginx
from pinchpoint.load.distributed.runner import NAMESPACE, actor_name, run_on_ray
from pinchpoint.load.distributed.stream import FLUSH_S, PULL_S
from pinchpoint.logformats.nginx import NGINX_FORMAT
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files
from pinchpoint.terminal.verdict import verdict_text
from pinchpoint_lab.ports import free_port

try:
    import ray
    from ray.cluster_utils import Cluster
except ImportError as e:  # a real cause: say it, never pass silently
    pytest.skip(f"Ray is not importable here: {e}", allow_module_level=True)

try:
    NGINX = find_nginx()
except NginxNotFound as e:
    pytest.skip(str(e), allow_module_level=True)

# Times a stack that waits more than it computes: one at a time, beside the parallel part.
pytestmark = pytest.mark.timed

STORE = 100 * 1024 * 1024
CHANNEL_TIMEOUT = "RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S"
SHIFT = 40


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head (with a Ray Client server on `c.client_port`) and a second node, 1 CPU
    each; the test process is a driver."""
    client_port = free_port()
    # The head's Ray Client proxy waits this long for a driver's server process, even one
    # that died at once (3 of 7 fresh-clone runs, 30 s by default); the driver tries again.
    said = os.environ.get(CHANNEL_TIMEOUT)
    os.environ[CHANNEL_TIMEOUT] = "10"
    try:
        c = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "object_store_memory": STORE,
                "include_dashboard": False,
                "ray_client_server_port": client_port,
            },
        )
    finally:
        if said is None:
            del os.environ[CHANNEL_TIMEOUT]
        else:
            os.environ[CHANNEL_TIMEOUT] = said
    c.client_port = client_port
    try:
        c.add_node(num_cpus=1, object_store_memory=STORE)
        c.wait_for_nodes()
        ray.init(address=c.address, log_to_driver=False)
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path, Path]]:
    """nginx answering 200 on 127.0.0.1, logging pinchpoint's format; yields its port, its
    access log and its pid file."""
    folder = tmp_path_factory.mktemp("nginx")
    port = free_port()
    temp = "\n".join(
        f"    {kind}_temp_path {folder / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    user = "user root;\n" if os.geteuid() == 0 else ""
    (folder / "nginx.conf").write_text(
        f"""daemon off;
{user}worker_processes 1;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"} warn;
events {{ worker_connections 4096; }}
http {{
    log_format pinchpoint '{NGINX_FORMAT}';
    access_log {folder / "access.log"} pinchpoint;
    keepalive_requests 1000000;
{temp}
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 "ok\\n"; }}
    }}
}}
"""
    )
    proc = subprocess.Popen([str(NGINX), "-p", f"{folder}/", "-c", str(folder / "nginx.conf")])
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield port, folder / "access.log", folder / "nginx.pid"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _plan(port: int, load: str, count: int, component: tuple[Path, Path] | None = None) -> str:
    text = f"""
[target]
url = "http://127.0.0.1:{port}"

[load]
{load}
timeout = "2s"
threads = 1

[[request]]
path = "/hello"

[generators]
ray = "auto"
count = {count}
"""
    if component is not None:
        log, pid = component
        text += f"""
[[component]]
name = "nginx"
role = "proxy"
[component.log]
path = "{log}"
format = "nginx"
log_format = '{NGINX_FORMAT}'
[component.process]
pid_file = "{pid}"
"""
    return text


def _run(text: str, runs: Path, run_id: str | None = None) -> tuple[Path, dict, dict]:
    outcome = pipeline.execute(parse_plan(text, "plan.toml"), text, runs, run_id=run_id)
    run = json.loads((outcome.run_dir / files.RUN).read_text())
    return outcome.run_dir, outcome.verdict, run


def test_two_generators_on_two_nodes_make_one_run(
    cluster: Any, nginx: tuple[int, Path, Path], tmp_path: Path
) -> None:
    port, log, pid = nginx
    # 1 then 3 users: generator 1 has none in the first step and still runs it.
    load = 'lower = 1\nupper = 3\nstep = 2\nduration = "2s"\nwarmup = "0s"\nthink_time = "5ms"'
    started = time.monotonic()
    run_dir, verdict, run = _run(_plan(port, load, 2, (log, pid)), tmp_path / "runs")
    took = time.monotonic() - started

    assert [p.name for p in (tmp_path / "runs").iterdir()] == [run_dir.name]
    assert (run_dir / files.VERDICT).exists() and verdict["steps"]
    gens = run["generators"]
    assert [g["generator"] for g in gens] == [0, 1]
    assert [g["users"] for g in gens] == [[1, 2], [0, 1]]
    assert len({g["node"] for g in gens}) == 2, "one generator on each node"
    assert not any(g.get("lost") for g in gens)
    for g in gens:
        assert g["threads"] >= 1 and g["cpu_cores"] >= 0 and g["saturated"] is False
    # Every generator's first step started at the common time.
    starts = [g["started"] for g in gens]
    assert max(starts) - min(starts) < 0.05, starts

    requests = pl.read_parquet(run_dir / files.REQUESTS)
    assert requests.height == sum(g["requests"] for g in gens) == run["records"]
    assert requests["req_id"].n_unique() == requests.height
    ranges = requests.group_by(pl.col("req_id") // (1 << SHIFT)).len()
    assert dict(ranges.iter_rows()) == {0: gens[0]["requests"], 1: gens[1]["requests"]}
    # Every request is tagged with the run's users, not its generator's share.
    by_step = dict(requests.group_by("step").agg(pl.col("users").unique()).iter_rows())
    assert by_step == {0: [1], 1: [3]}
    step1 = requests.filter(pl.col("step") == 1)
    assert set((step1["req_id"] // (1 << SHIFT)).unique().to_list()) == {0, 1}
    assert [s["users"] for s in run["steps"]] == [1, 3]
    assert sum(s["requests"] for s in run["load_steps"]) == requests.height

    tiers = pl.read_parquet(run_dir / files.TIERS).filter(pl.col("component") == "nginx")
    matched = tiers.filter(pl.col("req_id").is_not_null())
    assert set((matched["req_id"] // (1 << SHIFT)).unique().to_list()) == {0, 1}
    assert matched.height >= 0.95 * requests.height
    assert set(matched.filter(pl.col("req_id") // (1 << SHIFT) == 1)["users"].unique()) == {3}
    print(f"\n{requests.height} requests from 2 generators, starts {starts}, {took:.1f} s")

    # One saturated generator is enough for the verdict to refuse naming a bottleneck.
    assert verdict["generator"]["saturated"] is False
    gens[1].update({"saturated": True, "cpu_cores": 0.97, "threads": 1})
    (run_dir / files.RUN).write_text(json.dumps(run))
    judged = analyze(run_dir)
    assert judged["generator"]["saturated"] is True
    assert (judged["generator"]["cpu_cores_max"], judged["generator"]["threads"]) == (0.97, 1)
    assert judged["headline"].startswith("The load generator could not keep up")


def _rate(summary: dict) -> float:
    step = summary["steps"][0]
    start, end = summary["windows"][0]
    return step["requests"] / ((end - start) / 1e6)


def test_two_generators_send_twice_the_rate_of_one(
    cluster: Any, nginx: tuple[int, Path, Path], tmp_path: Path
) -> None:
    port = nginx[0]
    rates = {}
    for count in (1, 2):
        # 4 users per generator, each waiting 50 ms between requests: far below nginx's limit.
        load = f'users = {4 * count}\nduration = "3s"\nwarmup = "0s"\nthink_time = "50ms"'
        plan = parse_plan(_plan(port, load, count), "plan.toml")
        folder = tmp_path / f"run{count}"
        folder.mkdir()
        result = run_on_ray(plan, f"rate{count}", folder)
        assert len(result.summary["generators"]) == count
        rates[count] = _rate(result.summary)
    ratio = rates[2] / rates[1]
    print(f"\n1 generator {rates[1]:.1f} req/s, 2 generators {rates[2]:.1f} req/s: {ratio:.3f}×")
    assert 2 * 0.85 <= ratio <= 2 * 1.15


def test_open_loop_generators_send_the_target_count_together(
    cluster: Any, nginx: tuple[int, Path, Path], tmp_path: Path
) -> None:
    port = nginx[0]
    rate, seconds = 300, 4
    load = f'loop = "open"\nlower = {rate}\nupper = {rate}\nduration = "{seconds}s"\nwarmup = "0s"'
    plan = parse_plan(_plan(port, load, 2), "plan.toml")
    result = run_on_ray(plan, "open", tmp_path)
    gens = result.summary["generators"]
    assert [g["rate"] for g in gens] == [[rate / 2], [rate / 2]]
    sent = sum(g["requests"] for g in gens)
    target = rate * seconds
    print(f"\n{sent} requests sent by 2 generators for a target of {target}")
    assert abs(sent - target) <= 0.005 * target
    assert result.rows == sent
    assert result.summary["steps"][0]["level"] == rate


def test_a_generator_killed_mid_run_keeps_all_but_its_last_chunk(
    cluster: Any, nginx: tuple[int, Path, Path], tmp_path: Path
) -> None:
    """Generator 1's worker process gets SIGKILL mid-run: the run completes with generator
    0's requests and those generator 1 sent before its last copied chunk."""
    port = nginx[0]
    load = 'lower = 2\nupper = 6\nstep = 2\nduration = "2s"\nwarmup = "0s"\nthink_time = "5ms"'
    run_id = "killed-one"
    seen: dict[str, float] = {}
    # Ray's calls would start a new driver once the fixture has shut this one down.
    ended = threading.Event()

    def kill_mid_run() -> None:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not ended.is_set():
            try:
                actor = ray.get_actor(actor_name(run_id, 1), namespace=NAMESPACE)
                snapshot = ray.get(actor.snapshot.remote(), timeout=5)
                pid = ray.get(actor.where.remote(), timeout=5)["pid"]
            except (ValueError, ray.exceptions.RayError):
                snapshot = None
            if snapshot and snapshot["requests"] > 0:
                first = time.time()
                time.sleep(2.5)
                done = ray.get(actor.snapshot.remote(), timeout=5)["requests"]
                os.kill(pid, signal.SIGKILL)
                seen.update(done=done, seconds=time.time() - first)
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_mid_run, daemon=True)
    killer.start()
    try:
        run_dir, verdict, run = _run(_plan(port, load, 2), tmp_path / "runs", run_id)
    finally:
        ended.set()
        killer.join(timeout=10)

    assert seen, "the generator was never seen sending"
    gens = run["generators"]
    assert gens[1]["lost"] is True and "pid" in gens[1]["reason"], gens[1]
    assert not gens[0].get("lost") and gens[0]["requests"] > 0
    requests = pl.read_parquet(run_dir / files.REQUESTS)
    assert requests.height == gens[0]["requests"] + gens[1]["requests"] == run["records"]
    assert requests["req_id"].n_unique() == requests.height
    kept = requests.filter(requests["req_id"] // (1 << SHIFT) == 1).height
    assert kept == gens[1]["requests"]
    # One chunk: what the engine wrote since the last copy (PULL_S, plus its FLUSH_S).
    rate = seen["done"] / seen["seconds"]
    chunk = rate * (PULL_S + FLUSH_S)
    lost = seen["done"] - kept
    print(
        f"\ngenerator 1 had completed {seen['done']:.0f} requests when killed, {kept} kept: "
        f"{lost:.0f} lost, one chunk is ~{chunk:.0f}; run.json estimates "
        f"{gens[1]['unreceived_estimate']} over {gens[1]['unreceived_s']} s"
    )
    assert kept > 0 and lost <= 1.5 * chunk
    assert 0 < gens[1]["unreceived_s"] <= 2 * (PULL_S + FLUSH_S) + 1.0
    assert "The load was short" in verdict["load_short"]
    assert "1 of 2 generators was lost" in verdict["load_short"]
    assert "The load was short" in verdict_text(verdict)
    print(f"{verdict['load_short']}")


SPIN_AFTER_20 = """
CALLS = [0]


def spin(request, vars):
    CALLS[0] += 1
    if CALLS[0] > 20:
        while True:
            pass
"""


def test_a_hook_that_spins_on_a_generator_stops_that_generator_not_the_run(
    cluster: Any, nginx: tuple[int, Path, Path], tmp_path: Path
) -> None:
    """Each generator runs the hook in its own process: the call that spins is stopped
    after the run's timeout, the generator stops there and keeps what it measured."""
    (tmp_path / "hooks.py").write_text(SPIN_AFTER_20)
    text = f"""
[target]
url = "http://127.0.0.1:{nginx[0]}"

[load]
users = 2
duration = "4s"
warmup = "0s"
timeout = "1s"
threads = 1
hook = "{tmp_path / "hooks.py"}:spin"

[[flow]]
name = "hooked"

[[flow.step]]
path = "/hello"
hook = true

[generators]
ray = "auto"
count = 2
"""
    run_dir, _, run = _run(text, tmp_path / "runs", "hook-spins")
    why = "a call did not return within 1 s; its process was stopped"
    assert run["stopped"].count(why) == 2 and run["interrupted"], run["stopped"]
    gens = run["generators"]
    assert not any(g.get("lost") for g in gens), gens
    # Each loaded its hook before the start time was chosen: they started together.
    starts = [g["started"] for g in gens]
    assert max(starts) - min(starts) < 0.05, starts
    requests = pl.read_parquet(run_dir / files.REQUESTS)
    # 20 calls let through on each generator, then each user's call ends in a capture error.
    assert requests.filter(pl.col("status") == 200).height == 40
    assert set(requests.filter(pl.col("error").is_not_null())["error"]) == {"capture"}
    [step] = run["steps"]
    assert step["end"] - step["start"] < 3.5


class _OneAtATime(BaseHTTPRequestHandler):
    """Answers one request at a time, each after 30 ms: latency grows with the users."""

    lock = threading.Lock()
    answered: ClassVar[list[int]] = [0]

    def do_GET(self) -> None:
        with self.lock:
            time.sleep(0.03)
            self.answered[0] += 1
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: Any) -> None:
        return


def test_an_objective_that_aborts_stops_every_generator(cluster: Any, tmp_path: Path) -> None:
    """One user takes ~30 ms, three ~90 ms: p99 ≤ 60 ms breaks in the second step, and
    both generators stop there."""
    load = 'lower = 1\nupper = 5\nstep = 2\nduration = "6s"\nwarmup = "0s"'
    sla = '\n[sla]\np99_ms = 60\nabort = true\nabort_after = "2s"\n'
    _OneAtATime.answered[0] = 0
    with serving(_OneAtATime) as port:
        run_dir, verdict, run = _run(_plan(port, load, 2) + sla, tmp_path / "runs", "aborts")
        answered = _OneAtATime.answered[0]
    aborted = run["aborted"]
    print(f"\n{aborted['reason']}")
    assert aborted["objective"] == "p99_ms" and aborted["step"] == 1, aborted
    steps = run["steps"]
    assert len(steps) == 2 and steps[1]["aborted"] == aborted["reason"]
    assert steps[1]["end"] - steps[1]["start"] <= 2.0 + 1.0 + 1.0
    assert not run["interrupted"] and not any(g.get("lost") for g in run["generators"])
    requests = pl.read_parquet(run_dir / files.REQUESTS)
    assert requests.height == answered == run["records"]
    assert verdict["aborted"] == aborted["reason"]


def _client_server_logs(cluster: Any) -> str:
    """The tail of each Ray Client server log on the head: why a driver was refused."""
    logs = Path(cluster.head_node.get_session_dir_path()) / "logs"
    tails = [
        f"\n--- {log.name}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        for log in sorted(logs.glob("ray_client_server*.err"))
    ]
    return "".join(tails)


def test_the_command_line_sends_through_ray_client(
    cluster: Any, nginx: tuple[int, Path, Path], tmp_path: Path
) -> None:
    """`pinchpoint run plan.toml --ray ray://HEAD:PORT --generators 2`, another driver."""
    load = 'lower = 1\nupper = 2\nduration = "2s"\nwarmup = "0s"\nthink_time = "10ms"'
    text = _plan(nginx[0], load, 1).replace('ray = "auto"\ncount = 1\n', "")
    (tmp_path / "plan.toml").write_text(text)
    address = f"ray://127.0.0.1:{cluster.client_port}"
    argv = ["run", "plan.toml", "-q", "--ray", address, "--generators", "2"]
    # A new Ray Client driver starts its own server process on the head, which imports Ray
    # from a cold disk on a fresh machine: the bound is for a hang, not for speed.
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pinchpoint", *argv],
            cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as late:
        said = f"{late.stderr!r}\n{late.stdout!r}"
        raise AssertionError(said + _client_server_logs(cluster)) from late
    assert done.returncode == 0, done.stderr + done.stdout + _client_server_logs(cluster)
    (run_dir,) = (tmp_path / "runs").iterdir()
    run = json.loads((run_dir / files.RUN).read_text())
    assert [g["users"] for g in run["generators"]] == [[1, 1], [0, 1]]
    assert run["records"] == sum(g["requests"] for g in run["generators"]) > 0
    assert "Run folder" in done.stdout
