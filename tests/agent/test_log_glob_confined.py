"""A glob in a log path reads only regular files inside its folder: a symbolic link planted
there (to a file or a folder outside, or even inside) is not followed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from agent_helpers import agent_thread, append, client, config_text, probe_line, read_logs

from pinchpoint.collect.logs.logset import glob_folder, log_files, log_sources, mark_logs


@pytest.fixture
def planted(tmp_path: Path) -> dict[str, Path]:
    """logs/app.log, and in logs/ links out to secret/ and to app.log itself."""
    logs, secret = tmp_path / "logs", tmp_path / "secret"
    logs.mkdir()
    secret.mkdir()
    append(logs / "app.log", probe_line("r0", 1, 0))
    append(secret / "secret.log", probe_line("r0", 9, 9000))
    (logs / "out.log").symlink_to(secret / "secret.log")
    (logs / "up.log").symlink_to(Path("..") / "secret" / "secret.log")
    (logs / "again.log").symlink_to(logs / "app.log")
    (logs / "dir").symlink_to(secret, target_is_directory=True)
    (logs / "app.log.1").symlink_to(secret / "secret.log")  # a rotation sibling
    return {"logs": logs, "app": logs / "app.log", "secret": secret / "secret.log"}


@pytest.mark.parametrize("glob", ["*.log", "*", "*/secret.log", "[ou]*.log", "a*.log"])
def test_glob_matches_through_a_symlink_are_refused(planted: dict[str, Path], glob: str) -> None:
    pattern = str(planted["logs"] / glob)
    expected = [planted["app"]] if glob in ("*.log", "*", "a*.log") else []
    assert log_files(pattern) == expected
    sources = log_sources(pattern, mark_logs(pattern))
    assert {s.path for s in sources} <= {str(planted["app"])}
    assert [s.path for s in log_sources(pattern, None)] == [str(p) for p in expected]


def test_the_glob_folder_is_the_part_before_the_first_wildcard() -> None:
    assert glob_folder("/var/log/nginx/access.log*") == "/var/log/nginx"
    assert glob_folder("/var/log/app-*/access.log") == "/var/log"
    assert glob_folder("*.log") == "."


def test_the_configured_part_of_a_path_is_read_as_configured_even_as_a_link(
    planted: dict[str, Path],
) -> None:
    assert log_files(str(planted["logs"] / "out.log")) == [planted["logs"] / "out.log"]
    assert log_files(str(planted["logs"] / "dir" / "*.log")) == [
        planted["logs"] / "dir" / "secret.log"
    ]


def test_an_agent_with_a_glob_reads_nothing_through_a_planted_symlink(
    planted: dict[str, Path],
) -> None:
    pattern = str(planted["logs"] / "*.log*")
    text = config_text([{"name": "app", "log": {"path": pattern, "format": "probe"}}])
    with agent_thread(text) as server, client(server) as http:
        assert http.post("/v1/runs/r1/start", json={"interval_s": 0.5}).status_code == 200
        append(planted["app"], "".join(probe_line("r1", 2, n) for n in (1, 2)))
        append(planted["secret"], "".join(probe_line("r1", 9, n) for n in (9001, 9002)))
        assert http.post("/v1/runs/r1/stop").status_code == 200
        rows, end = read_logs(http, "r1", "app")
    assert sorted(r["req_id"] for r in rows) == [1, 2]
    assert [f["path"] for f in end["files"]] == [str(planted["app"])]
    assert os.path.islink(planted["logs"] / "out.log")  # the link was there all along
