"""Discovery acts with no more rights than the process it inspects: a listener of another
user that lies about its name, or names a file only root may read, gets nothing from a
root `init` that it could not get itself."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pinchpoint.collect.servers import files
from pinchpoint.discover import commands
from pinchpoint.discover.init import init_plan

NOBODY = 65534
SECRET = "root:$6$Zx9.secret.hash.of.a.shadow.line$:19000:0:99999:7:::"
PROGRAM = Path(__file__).parent / "programs" / "fake_nginx.c"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to run a listener as nobody"),
    pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler"),
]


@dataclass
class Place:
    """A folder any user may enter: `bin` and `out` owned by nobody, a root-only secret."""

    root: Path
    secret: Path

    def ran_as(self) -> list[int]:
        """The effective uids the fake nginx ran with, when discovery ran it."""
        return [int(p.read_text()) for p in (self.root / "out").glob("ran-*")]


@pytest.fixture
def place() -> Iterator[Place]:
    root = Path(tempfile.mkdtemp(prefix="pinchpoint-rights-", dir="/tmp"))
    try:
        root.chmod(0o755)
        for name in ("bin", "out"):
            (root / name).mkdir()
            os.chown(root / name, NOBODY, NOBODY)
        secret = root / "secret.conf"
        secret.write_text(SECRET + "\n")
        secret.chmod(0o600)
        yield Place(root, secret)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def build(place: Place, name: str, owner: int) -> Path:
    binary = place.root / "bin" / name
    subprocess.run(["cc", "-O0", "-o", str(binary), str(PROGRAM)], check=True, timeout=60)
    os.chown(binary, owner, owner)
    return binary


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(
    argv: list[str], port: int, user: int, executable: str | None = None
) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        argv, executable=executable, env={"LISTEN_PORT": str(port), "PATH": os.environ["PATH"]},
        user=user, group=user, extra_groups=[], stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, cwd="/",
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server
        except OSError:
            time.sleep(0.02)
    server.kill()
    raise AssertionError(f"{argv[0]} did not listen on {port}")


def stop(server: subprocess.Popen[bytes]) -> None:
    server.kill()
    server.wait(5)


def test_another_users_nginx_runs_with_its_owners_rights_and_its_root_only_file_stays_unread(
    place: Place,
) -> None:
    binary = build(place, "nginx", NOBODY)
    port = free_port()
    argv = [str(binary), "-c", str(place.secret), "-g", f"include {place.secret};"]
    server = listening(argv, port, NOBODY)
    try:
        text, found = init_plan(f"http://127.0.0.1:{port}/x")
    finally:
        stop(server)
    ran = place.ran_as()
    assert ran, "discovery did not run the listener's nginx at all"
    assert set(ran) == {NOBODY}
    assert "secret.hash" not in text and "Zx9" not in text
    said = "\n".join(found.tiers[0].notes + found.tiers[0].warnings)
    assert f"{place.secret} could not be opened (Permission denied)" in said
    assert f"cannot read {place.secret}: Permission denied" in said


def test_a_title_naming_nginx_is_not_a_program_to_run(place: Place) -> None:
    """A script named nginx, given as the title of a listener that runs another program, is
    never run: the program is what /proc/PID/exe says."""
    script = place.root / "bin" / "nginx"
    script.write_text(f"#!/bin/sh\nid -u > {place.root}/out/ran-$$\n")
    script.chmod(0o755)
    os.chown(script, NOBODY, NOBODY)
    port = free_port()
    # The system's own, which another user may run.
    python = os.path.realpath("/usr/bin/python3")
    code = (
        "import os,socket\ns=socket.socket();s.setsockopt(1,2,1)\n"
        "s.bind(('127.0.0.1',int(os.environ['LISTEN_PORT'])));s.listen()\n"
        "while 1:\n c=s.accept()[0];c.recv(4096);"
        "c.sendall(b'HTTP/1.0 200 OK\\r\\nContent-Length: 0\\r\\n\\r\\n');c.close()"
    )
    server = listening([str(script), "-c", code], port, NOBODY, executable=python)
    try:
        _, found = init_plan(f"http://127.0.0.1:{port}/x")
    finally:
        stop(server)
    assert place.ran_as() == []
    # Known by its program: a python3 server init has no reader for, its log asked for.
    [tier] = found.tiers
    assert (tier.name, tier.role) == ("python3", "service")
    assert any("log is not known" in w for w in tier.warnings), tier.warnings


def test_root_runs_no_nginx_that_others_could_change(place: Place) -> None:
    """A root listener whose program lies in a folder others may write: its binary is not
    run, its files are read from disk."""
    shared = place.root / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    binary = shared / "nginx"
    shutil.copy(build(place, "nginx-build", 0), binary)
    # It records into the folder beside its own: give it one.
    (place.root / "out").chmod(0o777)
    port = free_port()
    server = listening([str(binary), "-c", str(place.secret)], port, 0)
    try:
        _, found = init_plan(f"http://127.0.0.1:{port}/x")
    finally:
        stop(server)
    assert place.ran_as() == []
    notes = "\n".join(found.tiers[0].notes)
    assert f"not run as root: {shared} is writable by others than root" in notes


def test_a_servers_message_is_summarised_never_quoted() -> None:
    quoted = f'nginx: [emerg] unknown directive "{SECRET}" in /etc/shadow:1\n'.encode()
    assert commands.what_failed(quoted) == "an error in /etc/shadow, line 1"
    opened = b'nginx: [emerg] open() "/root/x.conf" failed (13: Permission denied)\n'
    assert commands.what_failed(opened) == "/root/x.conf could not be opened (Permission denied)"
    assert commands.what_failed(b"whatever " + SECRET.encode()) == "an error in its config"


def test_files_named_by_another_user_are_read_with_its_rights(place: Place) -> None:
    readable = place.root / "out" / "mine.conf"
    readable.write_text("worker_processes 2;\n")
    os.chown(readable, NOBODY, NOBODY)
    nobody = files.Owner(NOBODY, NOBODY, ())
    with files.as_owner(nobody):
        assert files.read_text(readable) == "worker_processes 2;\n"
        with pytest.raises(PermissionError):
            files.read_text(place.secret)
        assert files.glob(str(place.root / "*.conf")) == [str(place.secret)]
    assert files.read_text(place.secret).startswith("root:")


def test_a_fifo_or_a_device_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "nginx.conf"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(OSError, match="not a regular file"):
        files.read_bytes(fifo, 100)
    with pytest.raises(OSError, match="not a regular file"):
        files.read_bytes("/dev/zero", 100)
    assert time.monotonic() - started < 1.0


def test_a_command_that_prints_without_end_is_cut_off() -> None:
    with pytest.raises(commands.NotRun, match="printed more than 1 MiB"):
        commands.run(["/usr/bin/yes", "x" * 200], 10.0, 1024 * 1024)
    with pytest.raises(commands.NotRun, match=r"no answer in 0\.3 s"):
        commands.run(["/bin/sleep", "5"], 0.3, 1024)


def test_a_read_with_the_owners_rights_that_hangs_is_abandoned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(files, "CHILD_TIMEOUT_S", 0.3)
    started = time.monotonic()
    with pytest.raises(OSError, match=r"no answer in 0\.3 s"):
        files.in_child(files.Owner(NOBODY, NOBODY, ()), lambda: time.sleep(30) or b"", 100)
    assert time.monotonic() - started < 3
