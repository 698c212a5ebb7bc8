"""A path the user names that cannot be used as asked is refused before any load, in one
line naming the flag or file and why: an input (a plan, an agent's config, a feed, a
locustfile) that is a FIFO or a device, an output (`--out`, `-o`) that is a FIFO, a device
or in a folder that does not exist. A FIFO with no writer (or no reader) once hung the
command before any run folder existed; each call here would be killed after
forked_cli.REPLY_S and fail the test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .forked_cli import Done, ForkedCli

QUICK_S = 4.0

PLAN = """\
[target]
url = "http://127.0.0.1:9/"

[load]
users = 1
duration = "1s"

[[request]]
path = "/"
"""

FEED_PLAN = """\
[target]
url = "http://127.0.0.1:9/"

[load]
users = 1
duration = "1s"

[[flow]]
name = "fed"
feed = { file = "fifo" }
[[flow.step]]
path = "/${a}"
"""


@pytest.fixture(scope="module")
def cli() -> Iterator[ForkedCli]:
    env = {**os.environ, "COLUMNS": "80"}
    env.pop("PINCHPOINT_TRACEBACK", None)
    forked = ForkedCli(env)
    yield forked
    forked.close()


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """A folder holding a good plan, a FIFO and a regular file."""
    (tmp_path / "x.toml").write_text(PLAN)
    (tmp_path / "fed.toml").write_text(FEED_PLAN)
    (tmp_path / "taken").write_text("kept\n")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "tmp").mkdir()
    return tmp_path


def _refused(cli: ForkedCli, args: list[str], cwd: Path) -> str:
    """The one line the command refused `args` with, checked: exit 2, no traceback, no
    run folder, nothing written, quick."""
    done: Done = cli.call(args, cwd, cwd / "tmp")
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr
    assert "unexpected error" not in done.stderr and "Traceback" not in done.stderr
    assert done.cpu < QUICK_S
    assert not (cwd / "runs").exists()
    assert sorted(p.name for p in cwd.iterdir()) == ["fed.toml", "fifo", "taken", "tmp", "x.toml"]
    assert (cwd / "taken").read_text() == "kept\n"
    return lines[0]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["run", "fifo", "-q"], "fifo: a FIFO, not a regular file: not read as the plan"),
        (["run", "/dev/zero", "-q"], "/dev/zero: a character device, not a regular file"),
        (["run", "fed.toml", "-q"], "fed.toml:10: flow[0].feed.file: fifo: a FIFO, not a regular"),
        (["sla", ".", "--plan", "fifo"], "fifo: a FIFO, not a regular file: not read as the plan"),
        (
            ["agent", "--config", "fifo", "--check"],
            "fifo: a FIFO, not a regular file: not read as the config",
        ),
        (
            ["run", "x.toml", "-q", "--locustfile", "fifo"],
            "--locustfile: fifo: a FIFO, not a regular file: not read as the locustfile",
        ),
    ],
    ids=["plan fifo", "plan device", "feed fifo", "sla plan fifo", "agent config", "locustfile"],
)
def test_an_input_that_is_not_a_regular_file_is_refused_unread(
    cli: ForkedCli, cwd: Path, args: list[str], line: str
) -> None:
    assert line in _refused(cli, args, cwd)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["run", "x.toml", "-q", "--out", "fifo"],
            "--out fifo: a FIFO, not a regular file: nothing is written there",
        ),
        (
            ["run", "x.toml", "-q", "--out", "/dev/full"],
            "--out /dev/full: a character device, not a regular file",
        ),
        (
            ["run", "x.toml", "-q", "--out", "missing/seconds.jsonl"],
            "--out missing/seconds.jsonl: the folder missing does not exist",
        ),
        (
            ["run", "x.toml", "-q", "--out", "taken/seconds.jsonl"],
            "--out taken/seconds.jsonl: taken is not a folder",
        ),
        (["load", "http://127.0.0.1:9/", "--out", "fifo"], "--out fifo: is a FIFO, not a folder"),
        (
            ["compare", "taken", "taken", "--out", "fifo"],
            "--out fifo: a FIFO, not a regular file",
        ),
        (
            ["init", "http://127.0.0.1:9/", "-o", "fifo"],
            "-o/--out fifo: a FIFO, not a regular file",
        ),
        (
            ["init", "http://127.0.0.1:9/", "-o", "missing/plan.toml"],
            "-o/--out missing/plan.toml: the folder missing does not exist",
        ),
    ],
    ids=[
        "run fifo",
        "run /dev/full",
        "run missing folder",
        "run under a file",
        "load fifo",
        "compare fifo",
        "init fifo",
        "init missing folder",
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_any_load(
    cli: ForkedCli, cwd: Path, args: list[str], line: str
) -> None:
    assert _refused(cli, args, cwd).startswith(line)
