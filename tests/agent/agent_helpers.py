"""Agents for the tests: in this process (a thread) or as `pinchpoint agent` processes."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx

from pinchpoint.agent import AgentServer, make_server, parse_config

TOKEN = "test-token-0123456789abcdef"
# The variable a plan names its agents' token by (a plan holds no secret); conftest sets it.
TOKEN_ENV = "PP_TEST_AGENT_TOKEN"
PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def toml_tables(name: str, items: Sequence[dict[str, Any]]) -> list[str]:
    """`[[name]]` tables, their `log` and `process` values as sub-tables."""
    lines: list[str] = []
    for item in items:
        lines += ["", f"[[{name}]]"]
        lines += [
            f"{k} = {toml_value(v)}"
            for k, v in item.items()
            if k not in ("log", "process") and v is not None
        ]
        for table in ("log", "process"):
            if item.get(table):
                lines.append(f"[{name}.{table}]")
                lines += [f"{k} = {toml_value(v)}" for k, v in item[table].items() if v is not None]
    return lines


def config_text(
    components: Sequence[dict[str, Any]],
    bind: str = "127.0.0.1",
    port: int = 0,
    token: str | None = TOKEN,
    **agent: Any,
) -> str:
    """An agent config's TOML text; components are dicts as DemoStack.components() gives."""
    settings = {"bind": bind, "port": port, **({"token": token} if token else {}), **agent}
    lines = ["[agent]", *(f"{k} = {toml_value(v)}" for k, v in settings.items())]
    return "\n".join([*lines, *toml_tables("component", components)]) + "\n"


@contextmanager
def agent_thread(text: str) -> Iterator[AgentServer]:
    """An agent serving in a thread of this process, shut down on exit."""
    server = make_server(parse_config(text, "test agent config"))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def client(server: AgentServer, token: str | None = TOKEN) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=server.url, headers=headers, timeout=10, trust_env=False)


class AgentProcess:
    """`pinchpoint agent --config <file>`, optionally run through a prefix (`ip netns exec`)."""

    def __init__(self, config: Path, log: Path, prefix: Sequence[str] = ()) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PYTHON_DIR), env.get("PYTHONPATH")]))
        self._err = log.open("ab")
        argv = [*prefix, sys.executable, "-m", "pinchpoint", "agent", "--config", str(config)]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._err,
            env=env,
            start_new_session=True,
        )
        self.log = log
        self.url = self._wait_url(30.0)

    def _wait_url(self, timeout_s: float) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline().decode()
                if m := re.search(r"listening on (\S+)", line):
                    return m.group(1)
            if self.proc.poll() is not None:
                break
        self.kill()
        raise RuntimeError(f"the agent did not start:\n{self.log.read_text()[-3000:]}")

    def kill(self, sig: int = 9) -> None:
        if self.proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=10)
        finally:
            self._err.close()
            if self.proc.stdout is not None:
                self.proc.stdout.close()


def probe_line(run_id: str, users: int, req: int, ts: float = 1.0) -> str:
    uri = f"/sys_perf_check?pp_run={run_id}&pp_users={users}&pp_req={req}"
    return json.dumps({"ts": ts, "status": 200, "duration_s": 0.01, "uri": uri}) + "\n"


def append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as file:
        file.write(text)


def read_logs(http: httpx.Client, run_id: str, component: str) -> tuple[list[dict], dict]:
    """The rows and the end line of a component's log stream."""
    rows: list[dict] = []
    with http.stream("GET", f"/v1/runs/{run_id}/logs/{component}") as response:
        assert response.status_code == 200, response.read()
        assert response.headers["transfer-encoding"] == "chunked"
        items = [json.loads(line) for line in response.iter_lines() if line.strip()]
    *rows, end = items
    assert end.get("end") is True, end
    return rows, end


def run_cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PYTHON_DIR), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "pinchpoint", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
