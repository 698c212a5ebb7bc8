"""The demo stack split over two hosts: nginx on one, gunicorn + app on the other.

Either on loopback (two agents on 127.0.0.1) or in two network namespaces joined by a
bridge on a private 10.x subnet, each with its own agent, the controller in between.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from agent_helpers import (
    PYTHON_DIR,
    TOKEN_ENV,
    AgentProcess,
    config_text,
    toml_tables,
    toml_value,
)

from pinchpoint.demo import DemoStack
from pinchpoint.demo.env import DB_ENV, PROBE_LOG_ENV
from pinchpoint.demo.gunicorn import gunicorn_has_control_socket
from pinchpoint.demo.nginx import NginxPaths, find_nginx, nginx_argv, render_config
from pinchpoint.demo.procs import Child
from pinchpoint.logformats.gunicorn import GUNICORN_FORMAT

PROXY = ["nginx"]
APP = ["gunicorn", "app"]


@dataclass
class Split:
    """A running split stack: the URL to load and the two agents."""

    url: str
    agents: dict[str, AgentProcess] = field(default_factory=dict)
    # Per agent, the command prefix that runs in its namespace and its address there.
    prefixes: dict[str, list[str]] = field(default_factory=dict)
    binds: dict[str, str] = field(default_factory=dict)


def plan_text(
    url: str, agents: dict[str, AgentProcess], components: Sequence[dict[str, Any]], **load: Any
) -> str:
    """A plan loading `url`, its components on the agents, their token by token_env."""
    steps = {"lower": 1, "upper": 3, "step": 2, "duration": "1.5s", "warmup": "0.3s", **load}
    lines = ["[target]", f"url = {toml_value(url)}", "", "[load]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in steps.items()]
    lines += ["", "[sampling]", 'interval = "0.25s"', "", "[[request]]"]
    lines += ['path = "/sys_perf_check?cpu=1&wait=3"']
    agent_tables = [
        {"name": name, "url": agent.url, "timeout": "5s", "token_env": TOKEN_ENV}
        for name, agent in agents.items()
    ]
    lines += toml_tables("component", components) + toml_tables("agent", agent_tables)
    return "\n".join(lines) + "\n"


def topology(components: list[dict[str, Any]], hosts: dict[str, str]) -> list[dict[str, Any]]:
    """The plan's view of the components: their place in the stack and their host."""
    out = []
    for c in components:
        entry = {k: c[k] for k in ("name", "role", "calls", "workers") if c.get(k) is not None}
        if c["name"] in hosts:
            entry["host"] = hosts[c["name"]]
        else:
            entry |= {k: c[k] for k in ("log", "process") if c.get(k)}
        out.append(entry)
    return out


def start_agent(
    tmp: Path,
    name: str,
    components: list[dict],
    prefix: Sequence[str] = (),
    bind: str = "",
    extra: str = "",
    **settings: Any,
) -> AgentProcess:
    """An agent watching `components` (and the [[component]] tables of `extra`)."""
    config = tmp / f"agent-{name}.toml"
    port = 7070 if prefix else 0
    text = config_text(components, bind=bind or "127.0.0.1", port=port, **settings)
    config.write_text(text + extra)
    return AgentProcess(config, tmp / f"agent-{name}.err", prefix)


@contextmanager
def loopback_split(tmp: Path) -> Iterator[tuple[Split, list[dict]]]:
    """The demo stack on loopback, nginx watched by agent a, gunicorn and app by agent b."""
    with DemoStack(tmp / "stack", workers=2) as stack, contextlib.ExitStack() as agents:
        components = stack.components()
        split = Split(stack.url)
        for name, names in (("a", PROXY), ("b", APP)):
            chosen = [c for c in components if c["name"] in names]
            split.agents[name] = start_agent(tmp, name, chosen)
            agents.callback(split.agents[name].kill)
        yield split, components


# -- network namespaces ------------------------------------------------------------------


def netns_available() -> str | None:
    """Why the namespace test cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root for ip netns"
    probe = f"ppprobe{os.getpid() % 100000}"
    done = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if done.returncode != 0:
        return f"ip netns add failed: {done.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


@contextmanager
def namespaces(tag: str, subnet: str) -> Iterator[dict[str, str]]:
    """Two namespaces `<tag>a` and `<tag>b` on a bridge with the host: host .1, a .2, b .3."""
    bridge = f"{tag}br"
    made: list[tuple[str, ...]] = []
    addresses = {"host": f"{subnet}.1", "a": f"{subnet}.2", "b": f"{subnet}.3"}
    try:
        _ip("link", "add", bridge, "type", "bridge")
        made.append(("link", "del", bridge))
        _ip("addr", "add", f"{addresses['host']}/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        for side in ("a", "b"):
            ns, outer, inner = f"{tag}{side}", f"{tag}{side}0", f"{tag}{side}1"
            _ip("netns", "add", ns)
            made.append(("netns", "del", ns))
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            made.append(("link", "del", outer))
            _ip("link", "set", inner, "netns", ns)
            _ip("link", "set", outer, "master", bridge)
            _ip("link", "set", outer, "up")
            _ip("-n", ns, "addr", "add", f"{addresses[side]}/24", "dev", inner)
            _ip("-n", ns, "link", "set", inner, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield addresses
    finally:
        for args in reversed(made):
            subprocess.run(["ip", *args], capture_output=True, timeout=30)


def _env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PYTHON_DIR), env.get("PYTHONPATH")]))
    env[DB_ENV] = str(workdir / "demo.sqlite3")
    env[PROBE_LOG_ENV] = str(workdir / "probe.log")
    return env


def _wait_http(host: str, port: int, children: Sequence[Child], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        conn = http.client.HTTPConnection(host, port, timeout=2)
        try:
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        finally:
            conn.close()
        if any(c.exited() for c in children):
            break
        time.sleep(0.1)
    outputs = "\n".join(c.output.read_text(errors="replace")[-2000:] for c in children)
    raise RuntimeError(f"{host}:{port} did not answer:\n{outputs}")


@contextmanager
def netns_split(tmp: Path, discover: bool = False) -> Iterator[tuple[Split, list[dict]]]:
    """nginx + agent a in namespace a, gunicorn + app + agent b in namespace b; with
    `discover`, agents that watch nothing yet and may read each side's folder to find it."""
    tag = f"pp{os.getpid() % 10000}"
    subnet = f"10.{200 + os.getpid() % 50}.{os.getpid() % 250}"
    proxy_dir, app_dir = tmp / "ns-a", tmp / "ns-b"
    proxy_dir.mkdir()
    app_dir.mkdir()
    with namespaces(tag, subnet) as ip, contextlib.ExitStack() as stack:
        in_a, in_b = ["ip", "netns", "exec", f"{tag}a"], ["ip", "netns", "exec", f"{tag}b"]
        gunicorn_argv = [
            sys.executable, "-m", "gunicorn", "--workers", "2", "--worker-class", "sync",
            "--bind", f"{ip['b']}:8000",
            "--access-logfile", str(app_dir / "gunicorn-access.log"),
            "--access-logformat", GUNICORN_FORMAT,
            "--error-logfile", str(app_dir / "gunicorn-error.log"),
            "--pid", str(app_dir / "gunicorn.pid"),
        ]  # fmt: skip
        if gunicorn_has_control_socket():
            gunicorn_argv.append("--no-control-socket")
        gunicorn = Child(
            "gunicorn",
            [*in_b, *gunicorn_argv, "pinchpoint.demo.app:wsgi()"],
            app_dir / "gunicorn.out",
            _env(app_dir),
        )
        stack.callback(gunicorn.stop)
        paths = NginxPaths(proxy_dir)
        paths.temp_dir.mkdir()
        conf = render_config(paths, 8080, 8000, run_as_root=True)
        for old, new in (
            ("listen 127.0.0.1:8080", f"listen {ip['a']}:8080"),
            ("proxy_pass http://127.0.0.1:8000", f"proxy_pass http://{ip['b']}:8000"),
        ):
            assert old in conf
            conf = conf.replace(old, new)
        paths.conf.write_text(conf)
        _wait_http(ip["b"], 8000, [gunicorn])
        nginx = Child(
            "nginx", [*in_a, *nginx_argv(find_nginx(), paths)], proxy_dir / "nginx.out", _env(tmp)
        )
        stack.callback(nginx.stop)
        _wait_http(ip["a"], 8080, [nginx])
        components = _components(paths, app_dir)
        split = Split(f"http://{ip['a']}:8080")
        folders = {"a": proxy_dir, "b": app_dir}
        for name, names, prefix in (("a", PROXY, in_a), ("b", APP, in_b)):
            chosen = [c for c in components if c["name"] in names]
            if discover:
                split.agents[name] = start_agent(
                    tmp, name, [], prefix, bind=ip[name], discover=[str(folders[name])]
                )
            else:
                split.agents[name] = start_agent(tmp, name, chosen, prefix, bind=ip[name])
            stack.callback(split.agents[name].kill)
        split.prefixes = {"a": in_a, "b": in_b}
        split.binds = {"a": ip["a"], "b": ip["b"]}
        yield split, components


def _components(paths: NginxPaths, app_dir: Path) -> list[dict[str, Any]]:
    stack = DemoStack(app_dir)  # never started: only for the component descriptions
    stack.nginx_access_log, stack.nginx_pid_file = paths.access_log, paths.pid_file
    return stack.components()


# -- checking a run ----------------------------------------------------------------------


def check_complete_run(run_dir: Path, agents: Sequence[str]) -> dict[str, Any]:
    """Every tagged record and every resource series came back; returns the verdict."""
    requests = pl.read_parquet(run_dir / "requests.parquet")
    tiers = pl.read_parquet(run_dir / "tiers.parquet")
    answered = set(requests.filter(pl.col("status") == 200)["req_id"].to_list())
    assert len(answered) > 20
    for name in PROXY + APP:
        logged = tiers.filter(pl.col("component") == name)["req_id"].to_list()
        assert sorted(logged) == sorted(answered), name  # every record, none twice
    collection = json.loads((run_dir / "collection.json").read_text())
    for name, agent in [(n, "a") for n in PROXY] + [(n, "b") for n in APP]:
        entry = collection["components"][name]
        assert entry["agent"] == agent and entry["matched"] == len(answered), (name, entry)
        assert "error" not in entry
    for agent in agents:
        report = collection["agents"][agent]
        assert report["status"] == "ok" and report["problems"] == [], report
    resources = pl.read_parquet(run_dir / "resources.parquet")
    series = resources.group_by("component").agg(pl.len(), pl.col("processes").max())
    counted = {row["component"]: row for row in series.to_dicts()}
    expected = {"host", "generator", "nginx", "gunicorn"}
    expected |= {f"{kind}@{a}" for a in agents for kind in ("host", "agent")}
    assert expected <= set(counted), sorted(counted)
    for name in expected:
        assert counted[name]["len"] >= 4, (name, counted[name])
    assert counted["nginx"]["processes"] >= 2 and counted["gunicorn"]["processes"] >= 3
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert [s["users"] for s in verdict["steps"]] == [1, 3]
    for step in verdict["steps"]:
        for name in PROXY + APP:
            assert step["tiers"][name]["count"] > 0, (step["users"], name)
        assert step["resources"]["gunicorn"]["processes"] >= 3
    assert verdict["headline"]
    return verdict
