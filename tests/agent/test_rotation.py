"""Logs rotated during a run (rename, then copytruncate) still give every tagged record once."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from agent_helpers import agent_thread, client, config_text, probe_line, read_logs

RUN = "rot-1"


def lines(first: int, last: int) -> str:
    return "".join(probe_line(RUN, 4, n) for n in range(first, last + 1))


def rotate_by_rename(log: Path) -> None:
    for n in (2, 1):
        older = log.with_name(f"{log.name}.{n}")
        if older.exists():
            older.rename(log.with_name(f"{log.name}.{n + 1}"))
    log.rename(log.with_name(f"{log.name}.1"))


def rotate_by_copytruncate(log: Path) -> None:
    for n in (3, 2, 1):
        older = log.with_name(f"{log.name}.{n}")
        if older.exists():
            older.rename(log.with_name(f"{log.name}.{n + 1}"))
    shutil.copy(log, log.with_name(f"{log.name}.1"))
    with open(log, "r+b") as file:
        file.truncate(0)


def compress(path: Path) -> None:
    with open(path, "rb") as src, gzip.open(f"{path}.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()


@pytest.mark.parametrize("pattern", ["access.log", "access.log*"])
def test_rename_then_copytruncate_gives_every_tagged_record_once(
    tmp_path: Path, pattern: str
) -> None:
    log = tmp_path / "access.log"
    log.write_text(probe_line("r0", 1, 1) + probe_line("r0", 1, 2))
    log.with_name("access.log.1").write_text(probe_line("r0", 1, 0))
    component = {"name": "app", "log": {"path": str(tmp_path / pattern), "format": "probe"}}
    with agent_thread(config_text([component])) as server, client(server) as http:
        assert http.post(f"/v1/runs/{RUN}/start", json={"interval_s": 0.1}).status_code == 200
        writer = open(log, "a", encoding="utf-8")  # noqa: SIM115 - the server's open log
        writer.write(lines(1, 10) + "garbage line\n" + probe_line("other", 1, 5))
        writer.write('{"ts": 1, "duration_s": 0.1, "uri": "/untagged"}\n')
        writer.flush()
        # Rename rotation: the server writes to the renamed file until it reopens its log.
        rotate_by_rename(log)
        writer.write(lines(11, 15))
        writer.close()
        writer = open(log, "a", encoding="utf-8")  # noqa: SIM115 - reopened after rotation
        writer.write(lines(16, 20))
        writer.flush()
        # copytruncate: the copy holds 16-20; the same file, truncated, goes on.
        rotate_by_copytruncate(log)
        writer.write(lines(21, 80) + "\x00\x01 not a record\n")
        writer.close()
        compress(log.with_name("access.log.3"))  # a rotated file compressed since the mark
        assert http.post(f"/v1/runs/{RUN}/stop").status_code == 200
        rows, end = read_logs(http, RUN, "app")

    req_ids = [row["req_id"] for row in rows]
    assert sorted(req_ids) == list(range(1, 81))  # every record, none twice
    files = end["files"]
    assert sum(f["unparseable"] for f in files) == 2
    assert sum(f["other_run"] for f in files) == 1
    assert sum(f["untagged"] for f in files) == 1
    assert sum(f["matched"] for f in files) == 80
    assert not any(f["path"].endswith(".gz") for f in files)
