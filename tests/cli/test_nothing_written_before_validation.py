"""A plan whose hook, feeds, locustfile, listeners or generators cannot run is refused
in one line naming the plan's file, line and key, with exit code 2, before anything is
written: no run folder, not even its plan.toml (nor `pinchpoint load`'s --out folder)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinchpoint_lab.ports import free_port

from .forked_cli import Done, ForkedCli

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"

BASE = """\
[target]
url = "http://127.0.0.1:9/"

[load]
users = 1
duration = "1s"
"""

FLOW = """
[[flow]]
name = "f"
feed = {{ file = "{feed}" }}
[[flow.step]]
path = "/${{a}}"
hook = {hook}
"""

REQUEST = '\n[[request]]\npath = "/"\n'


def _hooked(spec: str) -> str:
    return BASE + f'hook = "{spec}"\n' + FLOW.format(feed="good.csv", hook="true")


def _fed(feed: str) -> str:
    return BASE + FLOW.format(feed=feed, hook="false")


def _otlp(*listens: str) -> str:
    return BASE + REQUEST + "".join(f'\n[[otlp]]\nlisten = "{a}"\n' for a in listens)


# (case id, plan text, extra arguments of `run`, what the one line must start with)
CASES: list[tuple[str, str, list[str], str]] = [
    ("hook file missing", _hooked("nohook.py:sign"), [], "x.toml:7: load.hook: "),
    ("hook function missing", _hooked("hook.py:nope"), [], "x.toml:7: load.hook: "),
    ("hook fails to import", _hooked("broken.py:sign"), [], "x.toml:7: load.hook: "),
    ("hook module missing", _hooked("no_such_module_pp:sign"), [], "x.toml:7: load.hook: "),
    ("feed bad csv row", _fed("bad.csv"), [], "x.toml:10: flow[0].feed.file: bad.csv:3: "),
    ("feed bad json line", _fed("bad.jsonl"), [], "x.toml:10: flow[0].feed.file: bad.jsonl:3"),
    ("feed not utf-8 row", _fed("latin.csv"), [], "x.toml:10: flow[0].feed.file: "),
    ("listener in use", _otlp("127.0.0.1:{busy}"), [], "x.toml:12: otlp[0].listen: "),
    (
        "two listeners on one address",
        _otlp("127.0.0.1:{free}", "127.0.0.1:{free}"),
        [],
        "x.toml:15: otlp[1].listen: ",
    ),
    (
        "locustfile missing",
        BASE + 'locustfile = "missing.py"\n',
        [],
        "x.toml:7: load.locustfile: missing.py: no such file",
    ),
    ("locustfile flag missing", BASE + REQUEST, ["--locustfile", "gone.py"], "--locustfile: "),
    (
        "ray with a locustfile",
        BASE + 'locustfile = "locustfile.py"\n[generators]\nray = "auto"\n',
        [],
        "x.toml:9: generators.ray: generators on Ray run the engine, not a locustfile",
    ),
]


def _write_inputs(folder: Path, busy: int, free: int) -> None:
    (folder / "good.csv").write_text("a,b\n1,2\n")
    (folder / "bad.csv").write_text("a,b\n1,2\n3\n4,5\n")
    (folder / "bad.jsonl").write_text('{"a": 1}\n{"a": 2}\n{"a": \n')
    (folder / "latin.csv").write_bytes(b"a,b\n1,2\n\xe9t\xe9,3\n")
    (folder / "hook.py").write_text("def sign(request, vars):\n    return None\n")
    (folder / "broken.py").write_text("raise RuntimeError('not today')\n")
    (folder / "locustfile.py").write_text("from locust import HttpUser\n")
    (folder / "tmp").mkdir()


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port some other program listens on for the test."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


@pytest.fixture(scope="module")
def cli() -> Iterator[ForkedCli]:
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR), "COLUMNS": "200"}
    env.pop("PINCHPOINT_TRACEBACK", None)
    forked = ForkedCli(env)
    yield forked
    forked.close()


def _cli(cli: ForkedCli, args: list[str], cwd: Path) -> Done:
    (cwd / "tmp").mkdir(exist_ok=True)
    return cli.call(args, cwd, cwd / "tmp")


def _assert_nothing_written(done: Done, starts: str, cwd: Path) -> None:
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "unexpected error" not in done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(starts), lines[0]
    assert not (cwd / "runs").exists()
    assert not (cwd / "out").exists()
    assert [p.name for p in cwd.rglob("plan.toml")] == []
    assert not any((cwd / "tmp").iterdir())


@pytest.mark.parametrize(
    ("text", "args", "starts"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_run_refuses_a_plan_that_cannot_run_before_writing_anything(
    cli: ForkedCli, tmp_path: Path, busy_port: int, text: str, args: list[str], starts: str
) -> None:
    free = free_port()
    _write_inputs(tmp_path, busy_port, free)
    (tmp_path / "x.toml").write_text(
        text.replace("{busy}", str(busy_port)).replace("{free}", str(free))
    )
    done = _cli(cli, ["run", "x.toml", "-q", "--runs-dir", "runs", *args], tmp_path)
    _assert_nothing_written(done, starts, tmp_path)


@pytest.mark.parametrize(
    ("text", "starts"),
    [
        (_hooked("nohook.py:sign"), "x.toml:7: load.hook: "),
        (_fed("bad.csv"), "x.toml:10: flow[0].feed.file: bad.csv:3: "),
    ],
    ids=["hook file missing", "feed bad csv row"],
)
def test_load_refuses_a_plan_that_cannot_run_before_making_its_out_folder(
    cli: ForkedCli, tmp_path: Path, busy_port: int, text: str, starts: str
) -> None:
    _write_inputs(tmp_path, busy_port, free_port())
    (tmp_path / "x.toml").write_text(text)
    done = _cli(cli, ["load", "x.toml", "--out", "out"], tmp_path)
    _assert_nothing_written(done, starts, tmp_path)
