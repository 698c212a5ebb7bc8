"""`pinchpoint compare BASE NEW --gate --junit FILE`: the regression gate on recorded run
folders, its exit status and its JUnit report parsed back."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

MakeRun = Callable[..., Path]  # the make_run fixture
RUNS = Path(__file__).parents[1] / "data" / "runs"
HEALTHY = RUNS / "demo-healthy24"
POOL = RUNS / "demo-pool2"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pinchpoint", "compare", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def cases(path: Path) -> dict[str, str | None]:
    """Each test case's name and its failure message (None when it passed)."""
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    out = {}
    for case in suite.iter("testcase"):
        failure = case.find("failure")
        out[str(case.get("name"))] = None if failure is None else failure.get("message")
    assert int(suite.get("tests", "-1")) == len(out)
    assert int(suite.get("failures", "-1")) == sum(m is not None for m in out.values())
    return out


def goodput(run: Path) -> float:
    """Successful requests per second from the first one's start to the last one's."""
    ok = pl.read_parquet(run / "requests.parquet").filter(
        pl.col("error").is_null() & (pl.col("status") < 400)
    )
    return ok.height / ((ok["start_us"].max() - ok["start_us"].min()) / 1e6)  # type: ignore[operator]


def test_a_run_against_itself_passes_every_check(tmp_path: Path) -> None:
    done = cli(str(HEALTHY), str(HEALTHY), "--gate", "--junit", str(tmp_path / "gate.xml"))
    assert done.returncode == 0, done.stderr
    assert "gate: passed" in done.stdout
    found = cases(tmp_path / "gate.xml")
    assert found == dict.fromkeys(["p95 latency", "p99 latency", "throughput", "error rate"])


def test_a_slower_run_fails_the_gate_with_its_numbers(tmp_path: Path) -> None:
    junit = tmp_path / "gate.xml"
    done = cli(str(HEALTHY), str(POOL), "--gate", "--junit", str(junit), "--json")
    assert done.returncode == 1, done.stderr
    ladder = {row["label"]: row for row in json.loads(done.stdout)["ladder"]}
    found = cases(junit)
    print(f"\n{found}")
    assert found["error rate"] is None
    for label in ("p95", "p99"):
        message = found[f"{label} latency"]
        assert message is not None
        ratio = float(re.search(r"ratio (\S+) >", message)[1])  # type: ignore[index]
        assert abs(ratio - ladder[label]["b_ms"] / ladder[label]["a_ms"]) < 0.01
    message = found["throughput"]
    assert message is not None
    ratio = float(re.search(r"ratio (\S+) <", message)[1])  # type: ignore[index]
    assert abs(ratio - goodput(POOL) / goodput(HEALTHY)) < 0.01 and ratio < 0.9
    assert "gate: FAILED (p95 latency, p99 latency, throughput)" in done.stderr


def test_tolerances_wide_enough_let_the_same_runs_pass(tmp_path: Path) -> None:
    done = cli(
        str(HEALTHY), str(POOL), "--gate", "--p95-ratio", "3.5", "--p99-ratio", "2",
        "--throughput-ratio", "0.7",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_rise_of_failures_fails_the_error_rate_check(tmp_path: Path, make_run: MakeRun) -> None:
    latency = np.full(2000, 5_000)
    base = make_run("base", latency)
    new = make_run("new", latency, status=[503 if i % 20 == 0 else 200 for i in range(2000)])
    done = cli(str(base), str(new), "--gate", "--junit", str(tmp_path / "gate.xml"))
    assert done.returncode == 1, done.stderr
    message = cases(tmp_path / "gate.xml")["error rate"]
    assert message is not None and "rise +5.00% > +1.00% (BASE 0.00%, NEW 5.00%)" in message
    assert cli(str(base), str(new), "--gate", "--error-rate-rise", "0.06").returncode == 0


def test_bad_gate_flags_are_named() -> None:
    done = cli(str(HEALTHY), str(POOL), "--junit", "gate.xml")
    assert done.returncode == 2 and "--junit: is the report of --gate" in done.stderr
    done = cli(str(HEALTHY), str(POOL), "--gate", "--p99-ratio", "0")
    assert done.returncode == 2
    assert "--p99-ratio 0: must be above 0 and at most 1000\n" in done.stderr
