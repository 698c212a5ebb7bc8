"""Generators on Ray without Ray: how a plan is split between them, how their results
merge, how the verdict reads their self-checks, and what `run --ray` refuses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pinchpoint.analyze.causes.generator import generator_check, generator_limits, load_short
from pinchpoint.analyze.context import Context
from pinchpoint.load.distributed.merge import (
    merge_latency,
    merge_parquet,
    merge_reasons,
    merge_summaries,
)
from pinchpoint.load.distributed.shares import check_ray_plan, share_of, shares, split
from pinchpoint.load.engine_config import engine_config
from pinchpoint.load.hdr import Histogram
from pinchpoint.load.send_lag import send_lag_us
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import parse_plan

PLAN = """
[target]
url = "http://127.0.0.1:8080"

[load]
{load}

[[request]]
path = "/"

[generators]
ray = "auto"
"""


def _plan(load: str, extra: str = "") -> str:
    return PLAN.format(load=load) + extra


@pytest.mark.parametrize(("total", "n"), [(0, 3), (1, 2), (7, 3), (10, 4), (5, 5), (3, 8)])
def test_users_split_as_evenly_as_can_be(total: int, n: int) -> None:
    parts = [split(total, n, i) for i in range(n)]
    assert sum(parts) == total
    assert max(parts) - min(parts) <= 1
    assert parts == sorted(parts, reverse=True)


def test_closed_loop_shares_split_users_and_keep_the_runs_level() -> None:
    plan = parse_plan(_plan('lower = 1\nupper = 5\nstep = 2\nduration = "2s"\nseed = 7'))
    base = engine_config(plan, "r", Path("x"))
    configs = shares(base, plan, 2, 123)
    assert [[s["users"] for s in c["steps"]] for c in configs] == [[1, 2, 3], [0, 1, 2]]
    assert all(c["tag_levels"] == [1.0, 3.0, 5.0] for c in configs)
    assert [c["req_id_base"] for c in configs] == [0, 1 << 40]
    assert [c["seed"] for c in configs] == [7, 8]
    assert all(c["start_at_us"] == 123 and c["hook"] is None for c in configs)
    assert share_of(configs[1]) == {"users": [0, 1, 2]}
    assert base["steps"][0]["users"] == 1 and base["req_id_base"] == 0  # left as it was


def test_ramps_split_at_both_ends() -> None:
    load = '[[load.stage]]\nusers = 5\nramp = "2s"\nhold = "1s"'
    plan = parse_plan(_plan("", load).replace("[load]\n\n", ""))
    configs = shares(engine_config(plan, "r", Path("x")), plan, 2, 0)
    assert [(s["ramp_from"], s["users"]) for s in configs[0]["steps"]] == [(0, 3), (None, 3)]
    assert [(s["ramp_from"], s["users"]) for s in configs[1]["steps"]] == [(0, 2), (None, 2)]
    assert configs[0]["tag_levels"] == [2.5, 5.0]


def test_open_loop_shares_divide_rates_counts_and_in_flight() -> None:
    phases = """
[[load.phase]]
duration = "2s"
arrival_rate = 100
ramp_to = 200
[[load.phase]]
duration = "3s"
arrival_count = 7
[[load.phase]]
pause = "1s"
"""
    plan = parse_plan(_plan('max_in_flight = 5\narrivals = "uniform"', phases))
    configs = shares(engine_config(plan, "r", Path("x")), plan, 2, 0)
    first = configs[0]["open"]
    assert first is not None
    assert [(p["rate"], p["ramp_to"], p["count"]) for p in first["phases"]] == [
        (50.0, 100.0, 0),
        (0.0, None, 4),
        (0.0, None, 0),
    ]
    assert first["max_in_flight"] == 3
    assert share_of(configs[1]) == {"rate": [75.0, 1.0, 0.0]}


def test_feed_rows_are_dealt_between_generators(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("name\n" + "".join(f"u{i}\n" for i in range(5)))
    flow = f"""
[[flow]]
name = "f"
[flow.feed]
file = "{tmp_path / "a.csv"}"
per = "user"
[[flow.step]]
path = "/"
"""
    plan = parse_plan(
        _plan('users = 2\nduration = "1s"', flow).replace('[[request]]\npath = "/"\n', "")
    )
    configs = shares(engine_config(plan, "r", Path("x")), plan, 2, 0)
    rows = [next(f["feed"] for f in c["flows"] if f["feed"])["rows"] for c in configs]
    assert rows == [[["u0"], ["u2"], ["u4"]], [["u1"], ["u3"]]]


def test_a_knee_search_or_a_locustfile_is_refused_on_ray() -> None:
    knee = parse_plan(_plan('lower = 1\nupper = 8\nduration = "1s"\nfind_knee = true'))
    with pytest.raises(PlanError, match="knee search"):
        check_ray_plan(knee)


def test_histograms_merge_as_if_one_generator_had_recorded_them_all() -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(50, 90_000, 3000)
    b = rng.integers(10, 2_000_000, 500)
    parts = [Histogram.of(a).latency_items(), Histogram.of(b).latency_items()]
    merged = merge_latency(parts)
    assert merged == Histogram.of(np.concatenate([a, b])).latency_items()
    assert merge_latency([Histogram.of(np.array([])).latency_items()])["percentiles_us"] == {}


def _summary(requests: int, window: tuple[int, int], reasons: dict) -> dict:
    step = {
        "step": 0, "users": 1, "kind": "users", "level": 1.0, "intended": 0, "late": 0,
        "unsent": 0, "requests": requests, "responses": requests, "bytes": 10 * requests,
        "errors": {"timeout": 1}, "statuses": {200: requests - 1},
        **Histogram.of(np.full(requests, 100)).latency_items(),
        "endpoints": [{"endpoint": 0, "requests": requests, "failed": 1,
                       **Histogram.of(np.full(requests, 100)).latency_items()}],
    }  # fmt: skip
    return {
        "steps": [step], "windows": [window], "records": requests, "interrupted": False,
        "started_us": window[0], "ended_us": window[1], "records_error": None,
        "error_reasons": reasons, "abandoned": 0,
    }  # fmt: skip


def test_summaries_merge_counts_windows_and_reasons() -> None:
    plan = parse_plan(_plan('users = 3\nduration = "1s"'))
    merged = merge_summaries(
        [
            _summary(10, (1000, 5000), {"timeout": ["a", "b"]}),
            _summary(30, (1010, 5100), {"timeout": ["b", "c", "d"], "io": ["x"]}),
        ],
        plan.load.levels(),
    )
    step = merged["steps"][0]
    assert (step["users"], step["level"], step["requests"], step["bytes"]) == (3, 3.0, 40, 400)
    assert step["errors"] == {"timeout": 2} and step["statuses"] == {200: 38}
    assert step["endpoints"][0]["requests"] == 40 and step["endpoints"][0]["failed"] == 2
    assert merged["windows"] == [(1000, 5100)] and merged["records"] == 40
    assert merged["error_reasons"] == {"timeout": ["a", "b", "c"], "io": ["x"]}
    assert merge_reasons([]) == {}


def test_open_loop_generators_send_lags_merge_into_one_histogram_and_max() -> None:
    plan = parse_plan(_plan('[[load.phase]]\nduration = "1s"\narrival_rate = 10'))
    lags = [np.array([0, 5, 40, 900]), np.array([3, 12_000])]
    summaries = []
    for lag in lags:
        summary = _summary(lag.size, (1000, 5000), {})
        summary["steps"][0]["send_lag_hdr_v2"] = Histogram.of(lag).v2()
        summary["steps"][0]["send_lag_max_us"] = int(lag.max())
        summaries.append(summary)
    merged = merge_summaries(summaries, plan.load.levels())["steps"][0]
    assert merged["send_lag_hdr_v2"] == Histogram.of(np.concatenate(lags)).v2()
    assert merged["send_lag_max_us"] == 12_000
    # p99 is the highest value of 12,000's bucket (8 µs wide there); max is exact.
    assert send_lag_us([merged]) == {"p50": 5, "p99": 12_007, "max": 12_000}
    closed = merge_summaries([_summary(2, (0, 1), {})], plan.load.levels())["steps"][0]
    assert "send_lag_max_us" not in closed
    assert send_lag_us([closed]) is None


def test_parquet_parts_merge_into_one_file(tmp_path: Path) -> None:
    parts = []
    for i in range(3):
        part = tmp_path / f"part-{i}.parquet"
        pq.write_table(
            pa.table({"req_id": pa.array(range(i * 10, i * 10 + 10), pa.uint64())}), part
        )
        parts.append(part)
    out = tmp_path / "requests.parquet"
    assert merge_parquet(parts, out) == 30
    assert pq.read_table(out)["req_id"].to_pylist() == list(range(30))


def test_a_saturated_generator_on_ray_makes_the_generator_limit_the_run() -> None:
    generators = [
        {"generator": 0, "cpu_cores": 0.4, "threads": 4, "saturated": False},
        {"generator": 1, "cpu_cores": 1.9, "threads": 2, "saturated": True},
        {"generator": 2, "lost": True, "reason": "node lost"},
    ]
    ctx = Context([], {}, {}, cpu_count=2, generator_threads=2, generators=generators)
    check = generator_check([], ctx)
    assert check["saturated"] and generator_limits(check)
    assert (check["cpu_cores_max"], check["threads"]) == (1.9, 2)
    ctx.generators[1]["saturated"] = False
    assert not generator_limits(generator_check([], ctx))
    short = load_short(ctx.generators)
    assert short is not None and "1 of 3 generators was lost" in short and "node lost" in short
    assert load_short(ctx.generators[:2]) is None
    ctx.generators[2].update(requests=1200, unreceived_s=1.4, unreceived_estimate=90)
    short = load_short(ctx.generators)
    assert (
        short is not None
        and "1200 of its requests kept, about 90 from its last 1.4 s lost" in short
    )


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "pinchpoint", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "plan_extra", "says"),
    [
        (["--generators", "2"], "", "--generators needs --ray"),
        (["--ray", "not an address"], "", "is not a Ray address"),
        (["--ray", "auto", "--find-knee"], "", "not a knee search"),
        ([], "\n[generators]\ncount = 2\n", "generators.count: count needs ray"),
    ],
)
def test_run_refuses_bad_generator_options_before_any_load(
    tmp_path: Path, args: list[str], plan_extra: str, says: str
) -> None:
    text = PLAN.format(load='lower = 1\nupper = 2\nduration = "1s"').replace(
        '\n[generators]\nray = "auto"\n', plan_extra
    )
    (tmp_path / "plan.toml").write_text(text)
    done = _cli(["run", "plan.toml", "-q", *args], tmp_path)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()


def test_the_generators_seconds_merge_into_one_histogram_and_one_count_by_class() -> None:
    from pinchpoint.load.distributed.merge import merge_snapshots
    from pinchpoint.load.hdr import Histogram, decode_v2

    def second(ms: list[float], classes: dict[str, int]) -> dict:
        window = Histogram.of([int(m * 1000) for m in ms])
        return {
            "kind": "users", "requests": 100, "errors": sum(classes.values()), "step": 1,
            "users": 2, "window_requests": len(ms), "window_p50_us": 1, "window_p99_us": 1,
            "window_hdr_v2": window.v2(), "errors_by_class": classes,
        }  # fmt: skip

    merged = merge_snapshots(
        [second([10.0] * 90, {"timeout": 2}), second([50.0] * 10, {"timeout": 1, "http_5xx": 4})]
    )
    counts = decode_v2(merged["window_hdr_v2"])
    both = Histogram(counts, int(counts.sum()), 0, 0)
    assert both.total == 100 and 49.9 <= both.value_at_quantile(0.99) / 1000 <= 50.1
    assert merged["errors_by_class"] == {"http_5xx": 4, "timeout": 3}
    assert merged["requests"] == 200 and merged["errors"] == 7


def test_the_generators_named_requests_merge_by_index_with_their_windows_added() -> None:
    from pinchpoint.load.distributed.merge import merge_snapshots
    from pinchpoint.load.hdr import Histogram, decode_v2

    def endpoint(requests: int, errors: int, ms: list[float]) -> dict:
        out: dict = {"requests": requests, "errors": errors}
        if ms:
            out["window_hdr_v2"] = Histogram.of([int(m * 1000) for m in ms]).v2()
        return out

    base = {"kind": "users", "requests": 0, "errors": 0, "step": 0, "users": 1}
    one = {**base, "endpoints": [endpoint(10, 1, [5.0] * 9), endpoint(3, 0, [])]}
    two = {**base, "endpoints": [endpoint(20, 2, [7.0] * 18)]}
    merged = merge_snapshots([one, two, base])  # a generator with no endpoints yet
    first, second = merged["endpoints"]
    assert (first["requests"], first["errors"]) == (30, 3)
    assert int(decode_v2(first["window_hdr_v2"]).sum()) == 27
    assert second == {"requests": 3, "errors": 0}
