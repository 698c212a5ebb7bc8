"""Open-loop steps as load levels in the analysis: windows carry their rate, requests
belong to a phase by their intended time, the verdict and the table speak in req/s."""

from __future__ import annotations

import polars as pl

from pinchpoint.analyze.context import load_text, start_text
from pinchpoint.analyze.steps import client_step, steady_windows
from pinchpoint.analyze.verdict import Context, decide
from pinchpoint.report.table import step_table

CTX = Context(
    order=["nginx", "gunicorn", "app"],
    calls={"nginx": ["gunicorn"], "gunicorn": ["app"]},
    workers={"gunicorn": 2},
    cpu_count=2,
    generator_threads=2,
)


def rate_step(rate: float, latency: float, queue: float = 0.1, concurrency: float = 0.5) -> dict:
    return {
        "users": 0,
        "kind": "rate",
        "level": rate,
        "late": 0,
        "unsent": 0,
        "throughput_rps": rate,
        "latency_ms": {"p50": latency, "p95": latency * 1.2, "p99": latency * 1.4},
        "tiers": {
            "nginx": {"self_p50_ms": 0.1, "p50_ms": latency - 0.2},
            "gunicorn": {
                "self_p50_ms": 0.2,
                "queue_p50_ms": queue,
                "p50_ms": 10.2,
                "concurrency": concurrency,
            },
            "app": {"self_p50_ms": 10.0, "p50_ms": 10.0},
        },
        "resources": {
            "host": {"cpu_cores": 0.5},
            "gunicorn": {"cpu_cores": 0.4, "processes": 3},
            "generator": {"cpu_cores": 0.05},
        },
    }


def test_windows_carry_the_rate_and_the_late_counts() -> None:
    run = {
        "warmup_s": 0.5,
        "steps": [
            {
                "step": 0,
                "users": 0,
                "kind": "rate",
                "level": 7.5,
                "start": 10.0,
                "end": 20.0,
                "intended": 75,
                "late": 3,
                "unsent": 1,
            },
            {"step": 1, "users": 4, "start": 20.0, "end": 30.0},
        ],
    }
    w = steady_windows(run)
    assert (w[0].kind, w[0].level, w[0].late, w[0].unsent, w[0].start) == ("rate", 7.5, 3, 1, 10.5)
    # A run.json of before load models: users are the level.
    assert (w[1].kind, w[1].level) == ("users", 4)


def test_a_request_sent_late_stays_in_the_phase_it_was_meant_for() -> None:
    run = {
        "steps": [
            {
                "step": 0,
                "users": 0,
                "kind": "rate",
                "level": 2.0,
                "start": 10.0,
                "end": 12.0,
                "intended": 4,
                "late": 1,
                "unsent": 0,
            }
        ]
    }
    requests = pl.DataFrame(
        {
            "req_id": [0, 1, 2, 3],
            "step": [0, 0, 0, 0],
            "start_us": [10_000_000, 10_500_000, 11_000_000, 12_900_000],  # the last sent late
            "intended_us": [10_000_000, 10_500_000, 11_000_000, 11_500_000],
            "latency_us": [1_000, 1_000, 1_000, 1_401_000],
            "status": [200, 200, 200, 200],
            "error": [None, None, None, None],
        },
        schema_overrides={"error": pl.String},
    )
    step, ids = client_step(requests, steady_windows(run)[0])
    assert step["requests"] == 4 and ids.to_list() == [0, 1, 2, 3]
    assert (step["kind"], step["level"], step["late"], step["unsent"]) == ("rate", 2.0, 1, 0)
    assert step["latency_ms"]["p99"] > 1000, "its wait is in the phase's latency"


def test_verdict_speaks_in_target_rates() -> None:
    flat = [rate_step(r, 10.5) for r in (20, 50, 100, 200)]
    verdict = decide(flat, CTX)
    assert verdict["bottleneck"] is None
    assert verdict["headline"].startswith("No bottleneck from 20 to 200 req/s")
    growing = [
        rate_step(20, 10.5),
        rate_step(50, 10.6, queue=0.3),
        rate_step(100, 21.0, queue=10.5, concurrency=1.95),
        rate_step(200, 42.0, queue=31.5, concurrency=1.97),
    ]
    verdict = decide(growing, CTX)
    found = verdict["bottleneck"]
    assert found is not None and found["starts_at_rate"] == 100
    assert verdict["headline"].endswith("from 100 req/s"), verdict["headline"]
    assert "users" not in verdict["headline"]
    assert start_text(found) == "100 req/s"
    assert load_text(growing[1]) == "50 req/s"


def test_table_shows_the_target_rate_and_late_requests() -> None:
    steps = [rate_step(20, 10.5), {**rate_step(7.5, 11.0), "late": 12}]
    table = step_table({"steps": steps, "tiers": [], "bottleneck": None})
    assert [c.label for c in table.columns][:3] == ["target req/s", "late", "req/s"]
    assert [row[:2] for row in table.rows] == [["20.0", "0"], ["7.5", "12"]]
