"""An agent config (or its token file) that is not UTF-8 text, or is far larger than a
config, is refused in one line naming the file, the line and the byte's offset, with
exit code 2: never an "unexpected error"."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_helpers import TOKEN, run_cli

CONFIG = """\
[agent]
bind = "127.0.0.1"
port = 0
{token}

[[component]]
name = "app"
[component.log]
path = "{log}"
format = "probe"
"""


def _config(tmp_path: Path, token: str) -> bytes:
    return CONFIG.format(token=token, log=tmp_path / "app.log").encode()


def _refused(path: Path) -> str:
    done = run_cli("agent", "--config", str(path), "--check", timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "unexpected error" not in done.stderr and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    return line


@pytest.mark.parametrize(
    ("edit", "names"),
    [
        ((b'name = "app"', b'name = "app\xe9"'), ":7: not UTF-8 text (byte 0xe9 at offset "),
        ((b"[agent]", b"\xff\xfe[agent]"), ":1: not UTF-8 text (byte 0xff at offset 0)"),
        ((b"port = 0", b"# caf\xe9\nport = 0"), ":3: not UTF-8 text (byte 0xe9 at offset 32)"),
    ],
    ids=["latin-1 in a value", "utf-16 mark", "latin-1 in a comment"],
)
def test_a_config_that_is_not_utf8_is_refused_with_its_line_and_offset(
    tmp_path: Path, edit: tuple[bytes, bytes], names: str
) -> None:
    path = tmp_path / "agent.toml"
    path.write_bytes(_config(tmp_path, f'token = "{TOKEN}"').replace(*edit))
    assert _refused(path).startswith(f"{path}{names}")


def test_a_config_larger_than_a_config_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_bytes(_config(tmp_path, f'token = "{TOKEN}"') + b"# x\n" * 400_000)
    assert _refused(path) == f"{path}: larger than 1 MB: not read as the config"


def test_a_token_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    token = tmp_path / "agent.token"
    token.write_bytes(b"\xe9" * 32)
    path = tmp_path / "agent.toml"
    path.write_bytes(_config(tmp_path, f'token_file = "{token}"'))
    line = _refused(path)
    assert line == f"token_file {token}: not UTF-8 text (byte 0xe9 at offset 0)"
