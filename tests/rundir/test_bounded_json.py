"""A run folder's JSON file past its bounds is refused with an error naming it: larger than
`JSON_MAX_BYTES` before it is read whole (its reader's memory measured in a real process),
nested deeper than `JSON_MAX_DEPTH` whether Python's parser could read it or not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pinchpoint.rundir import files

# Prints the error, then the peak memory of this process since it started (VmHWM, kB):
# ru_maxrss would count its parent's, kept across fork and exec.
READ = (
    "import sys\n"
    "from pinchpoint.rundir.files import RunFolder\n"
    "try:\n"
    "    RunFolder(sys.argv[1]).read_verdict()\n"
    "except ValueError as e:\n"
    "    print(e)\n"
    "with open('/proc/self/status') as f:\n"
    "    print(next(line.split()[1] for line in f if line.startswith('VmHWM:')))\n"
)


def test_a_file_over_the_cap_is_refused_without_being_read(tmp_path: Path) -> None:
    # 3 GB, sparse: a reader that read it whole would hold 3 GB.
    with (tmp_path / files.VERDICT).open("wb") as f:
        f.truncate(3 * 1024**3)
    done = subprocess.run(
        [sys.executable, "-c", READ, str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    said, peak_kb = done.stdout.splitlines()
    assert said == (
        f"{tmp_path / files.VERDICT}: {3 * 1024**3} bytes, more than the "
        f"{files.JSON_MAX_BYTES} a run folder's JSON file may hold"
    )
    # The interpreter and pinchpoint's modules (12 MB): well under the cap's 64 MiB.
    assert int(peak_kb) * 1024 < 40 * 1024**2, peak_kb


def test_a_file_that_grows_past_the_cap_while_read_is_refused(tmp_path: Path) -> None:
    # A FIFO's size reads 0: the reader stops at one byte past the cap all the same.
    fifo = tmp_path / "feed"
    os.mkfifo(fifo)
    writer = subprocess.Popen(
        ["sh", "-c", f'head -c {files.JSON_MAX_BYTES + 4096} /dev/zero > "{fifo}"']
    )
    with pytest.raises(ValueError, match=f"{files.JSON_MAX_BYTES + 1} bytes, more than the"):
        files._bounded_bytes(fifo, files.JSON_MAX_BYTES)
    writer.kill()
    writer.wait(timeout=10)


@pytest.mark.parametrize("depth", [65, 900, 100_000])
def test_a_file_nested_past_the_cap_names_it(tmp_path: Path, depth: int) -> None:
    # 65: one past the cap; 900: read by Python's parser; 100 000: past its recursion.
    nested = "[" * (depth - 1) + "]" * (depth - 1)
    (tmp_path / files.VERDICT).write_text(f'{{"bottleneck": {nested}}}')
    with pytest.raises(ValueError) as refused:
        files.RunFolder(tmp_path).read_verdict()
    assert str(refused.value) == f"{tmp_path / files.VERDICT}: nested deeper than 64 levels"


def test_a_file_at_the_caps_is_read(tmp_path: Path) -> None:
    nested = "[" * 63 + "]" * 63
    text = f'{{"bottleneck": {nested}, "pad": "'
    text += "x" * (files.JSON_MAX_BYTES - len(text) - 2) + '"}'
    (tmp_path / files.VERDICT).write_text(text)
    assert len(text) == files.JSON_MAX_BYTES
    verdict = files.RunFolder(tmp_path).read_verdict()
    assert len(verdict["pad"]) == files.JSON_MAX_BYTES - len('{"bottleneck": , "pad": ""}') - 126


def test_an_integer_longer_than_python_converts_names_the_file(tmp_path: Path) -> None:
    (tmp_path / files.VERDICT).write_text('{"steps": ' + "9" * 5000 + "}")
    with pytest.raises(ValueError, match=rf"{files.VERDICT}: not JSON: Exceeds the limit"):
        files.RunFolder(tmp_path).read_verdict()
