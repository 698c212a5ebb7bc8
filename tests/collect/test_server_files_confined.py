"""Server config files opened under an agent's discovery: only under the folders its config
lists, checked on the file the kernel opened, so a link out of a listed folder is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pinchpoint.collect.servers.files import confined, only_under, read_text
from pinchpoint.collect.servers.gunicorn import settings
from pinchpoint.collect.servers.pool import ServerProcess


def test_any_file_is_read_when_nothing_confines_it(tmp_path: Path) -> None:
    (tmp_path / "a.conf").write_text("workers = 3\n")
    assert not confined()
    assert read_text(tmp_path / "a.conf") == "workers = 3\n"


def test_only_files_under_the_listed_folders_are_read(tmp_path: Path) -> None:
    allowed, other = tmp_path / "etc-app", tmp_path / "secrets"
    allowed.mkdir()
    other.mkdir()
    (allowed / "app.conf").write_text("ok")
    (other / "key").write_text("secret")
    os.symlink(other / "key", allowed / "link")
    with only_under([str(allowed)]):
        assert confined()
        assert read_text(allowed / "app.conf") == "ok"
        for path in (other / "key", allowed / "link", allowed / ".." / "secrets" / "key"):
            with pytest.raises(PermissionError, match="not under the folders"):
                read_text(path)
    assert not confined() and read_text(other / "key") == "secret"


def test_a_gunicorn_config_outside_the_folders_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "gunicorn.conf.py").write_text("workers = 7\nthreads = 2\n")
    process = ServerProcess(1, ["gunicorn", "app:app"], cwd=tmp_path)
    assert settings(process, 2)["workers"][0] == "7"
    with only_under([str(tmp_path / "elsewhere")]):
        assert "workers" not in settings(process, 2)
    with only_under([str(tmp_path)]):
        assert settings(process, 2)["threads"][0] == "2"
