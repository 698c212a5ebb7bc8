"""Fuzzing flows at length: the engine's property tests (templates, captures and checks
on any body, JSONPath under its node budget; crates/pinchpoint-engine/tests/fuzz_flows.rs)
in a release build with PROPTEST_CASES each, then the Python ones (flow plans, capture
JSONPaths, the template scan against the engine's compiler, feed files;
tests/test_flow_fuzz.py) with --scale times their `make test` budget, drawn afresh.

Prints the inputs tried, the failures (a property broken or a traceback), the hangs (a
test slower than --hang-s) and the peak RSS of each part.

    .venv/bin/python bench/fuzz_flows.py
    .venv/bin/python bench/fuzz_flows.py --cases 50000 --scale 20
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
import traceback
from pathlib import Path

from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
RUST_TESTS = 4


def _rust(cases: int, hang_s: float) -> tuple[int, int, int, float]:
    """(inputs, failures, hangs, peak MB) of the engine's property tests."""
    env = {**os.environ, "PROPTEST_CASES": str(cases)}
    command = ["cargo", "test", "-q", "-p", "pinchpoint-engine", "--release"]
    subprocess.run([*command, "--test", "fuzz_flows", "--no-run"], cwd=ROOT, check=True)
    started = time.monotonic()
    try:
        done = subprocess.run(
            ["/usr/bin/time", "-f", "peak-kb %M", *command, "--test", "fuzz_flows"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=hang_s * RUST_TESTS,
        )
    except subprocess.TimeoutExpired:
        return cases * RUST_TESTS, 0, 1, float("nan")
    failed = done.returncode != 0
    if failed:
        print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
    print(f"  rust: {time.monotonic() - started:.1f} s")
    peak_kb = float(done.stderr.rsplit("peak-kb ", 1)[-1].split()[0])
    return cases * RUST_TESTS, int(failed), 0, peak_kb / 1024


def _python(scale: int, hang_s: float) -> tuple[int, int, int]:
    settings.register_profile(
        "bench",
        deadline=None,
        derandomize=False,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.load_profile("bench")
    os.environ["FLOW_FUZZ_SCALE"] = str(scale)
    sys.path.insert(0, str(ROOT / "tests"))
    import test_flow_fuzz as fuzz

    tests = [
        fuzz.test_a_flow_plan_is_refused_or_compiled_by_the_engine,
        fuzz.test_a_capture_jsonpath_is_refused_or_compiled_by_the_engine,
        fuzz.test_the_template_scan_agrees_with_the_engine,
        fuzz.test_a_feed_file_gives_rows_or_an_error_naming_it,
    ]
    failures = hangs = 0
    for test in tests:
        started = time.monotonic()
        try:
            test()
        except Exception:
            failures += 1
            traceback.print_exc()
        took = time.monotonic() - started
        hangs += took > hang_s
        print(f"  {test.__name__}: {took:.1f} s")
    return sum(fuzz.SHORT) * scale, failures, hangs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=25_000, help="per Rust property")
    parser.add_argument("--scale", type=int, default=10, help="times the Python tests' budget")
    parser.add_argument("--hang-s", type=float, default=600.0, help="the longest a test may take")
    args = parser.parse_args()
    started = time.monotonic()
    rust = _rust(args.cases, args.hang_s)
    python = _python(args.scale, args.hang_s)
    python_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"rust:   {rust[0]:,} inputs, {rust[1]} failures, {rust[2]} hangs, peak {rust[3]:.0f} MB")
    print(
        f"python: {python[0]:,} inputs, {python[1]} failures, {python[2]} hangs, "
        f"peak {python_mb:.0f} MB"
    )
    print(f"total:  {rust[0] + python[0]:,} inputs in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
