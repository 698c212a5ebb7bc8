"""The command line run many times from one interpreter that imported it once: each call is
a child forked from it, with its own argv, working folder, TMPDIR, stdin, stdout, stderr
and exit code, as `python -m pinchpoint` would have. A refusal then costs its own work, not
the 0.4 s of starting Python and importing typer, pydantic and the plan model again (the
tests of refusals made 140 such processes). tests/cli/test_startup.py and the tests that
run a stack still start the real command."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

REPLY_S = 30.0


class Done(NamedTuple):
    returncode: int
    stdout: str
    stderr: str
    cpu: float  # the child's user + system seconds


class ForkedCli:
    """One server process per test module: `call()` answers as a fresh command would, or
    raises TimeoutError when the command ran past REPLY_S (its child is killed)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._server = subprocess.Popen(
            [sys.executable, __file__],
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._io = Path(tempfile.mkdtemp(prefix="pinchpoint-forked-"))

    def call(self, args: list[str], cwd: Path, tmpdir: Path, stdin: str | None = None) -> Done:
        out, err = self._io / "out", self._io / "err"
        into = self._io / "in"
        into.write_text(stdin or "")
        request = {"args": args, "cwd": str(cwd), "tmpdir": str(tmpdir)}
        request |= {"stdin": str(into), "stdout": str(out), "stderr": str(err)}
        server = self._server
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        # The server answers every call, within REPLY_S: it kills a child that takes longer.
        line = server.stdout.readline()
        if not line:
            raise RuntimeError("the forking server ended")
        reply = json.loads(line)
        try:
            if reply["killed"]:
                raise TimeoutError(f"the forked command did not end within {REPLY_S} s")
            return Done(reply["returncode"], out.read_text(), err.read_text(), reply["cpu"])
        finally:
            for path in (out, err, into):
                path.unlink(missing_ok=True)

    def close(self) -> None:
        if self._server.stdin is not None:
            self._server.stdin.close()
        self._server.wait(timeout=10)
        shutil.rmtree(self._io, ignore_errors=True)


def _serve() -> None:
    import pinchpoint.cli
    import pinchpoint.plan.model  # what most calls load first

    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, pinchpoint.cli.main, tempfile)
        print(json.dumps(_wait(pid)), flush=True)


def _wait(pid: int) -> dict[str, Any]:
    """The child's exit code and CPU seconds; SIGKILL when it runs past REPLY_S."""
    pidfd = os.pidfd_open(pid)
    try:
        ended, _, _ = select.select([pidfd], [], [], REPLY_S)
    finally:
        os.close(pidfd)
    if not ended:
        os.kill(pid, signal.SIGKILL)
    _, status, usage = os.wait4(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return {"returncode": code, "cpu": usage.ru_utime + usage.ru_stime, "killed": not ended}


def _child(request: dict[str, Any], main: Callable[[], None], temp: ModuleType) -> None:
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(request["cwd"])
        os.environ["TMPDIR"] = request["tmpdir"]
        temp.tempdir = None  # read TMPDIR again
        writes = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        for fd, name, mode in (
            (0, "stdin", os.O_RDONLY),
            (1, "stdout", writes),
            (2, "stderr", writes),
        ):
            opened = os.open(request[name], mode, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        sys.argv = ["pinchpoint", *request["args"]]
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _serve()
