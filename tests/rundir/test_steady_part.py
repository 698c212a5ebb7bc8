"""One steady part of a step: the verdict's table, the SLA and the report's percentile
chart count the same requests, in open loop too, where a request belongs to its phase by
the time it was meant to be sent, not the time it went out."""

from __future__ import annotations

import polars as pl

from pinchpoint.analyze.sla import evaluate
from pinchpoint.analyze.steps import client_step, steady_windows
from pinchpoint.plan.sla import Sla
from pinchpoint.report.load import steady_requests

RUN = {"warmup_s": 1.0, "steps": [{"step": 0, "users": 0, "kind": "rate", "level": 50.0,
                                    "start": 10.0, "end": 20.0}]}  # fmt: skip


def _open_loop_requests() -> pl.DataFrame:
    # (meant to be sent at, sent at, error): one meant in the warm-up but sent after it,
    # one on time, one meant before the step's end but sent after it.
    rows = [(10.5, 11.5, "timeout"), (15.0, 15.0, None), (19.9, 20.2, None)]
    return pl.DataFrame(
        {
            "step": [0] * len(rows),
            "users": [0] * len(rows),
            "req_id": list(range(len(rows))),
            "intended_us": [int(i * 1e6) for i, _, _ in rows],
            "start_us": [int(s * 1e6) for _, s, _ in rows],
            "latency_us": [5_000] * len(rows),
            "status": [None if e else 200 for _, _, e in rows],
            "error": [e for _, _, e in rows],
            "bytes": [100] * len(rows),
        },
        schema_overrides={"status": pl.UInt16, "step": pl.UInt32, "users": pl.UInt32},
    )


def test_sla_and_verdict_count_the_same_open_loop_requests() -> None:
    requests = _open_loop_requests()
    step, _ = client_step(requests, steady_windows(RUN)[0])
    errors = next(r for r in evaluate(Sla(error_rate=0.5), requests, RUN) if r.key == "error_rate")
    assert (errors.requests, errors.value) == (step["requests"], step["error_rate"]) == (2, 0.0)


def test_report_chart_requests_are_the_verdicts() -> None:
    requests = _open_loop_requests()
    _, kept = client_step(requests, steady_windows(RUN)[0])
    charted = steady_requests(requests, RUN)
    assert sorted(charted["req_id"].to_list()) == sorted(kept.to_list()) == [1, 2]


def test_closed_loop_requests_belong_by_their_send_time() -> None:
    requests = _open_loop_requests().drop("intended_us")
    _, kept = client_step(requests, steady_windows(RUN)[0])
    assert sorted(steady_requests(requests, RUN)["req_id"].to_list()) == sorted(kept.to_list())
    assert sorted(kept.to_list()) == [0, 1]
