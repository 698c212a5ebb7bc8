"""Checks that compare an answer with values captured earlier in the walk, through
arithmetic (`equals = "${catalogue_price}"`, `le = "${budget} * 1.1"`), against a real
shop that quotes wrong prices on purpose and keeps the tag of each wrong quote it
served (pinchpoint_lab.quote_app): the engine's failed checks are exactly those."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl

from pinchpoint import pipeline
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files
from pinchpoint_lab.quote_app import budget, serve_quotes, total

PLAN = (Path(__file__).parent / "data" / "buy_flow.toml").read_text()
QUOTE = 2
USERS = 4


def test_the_failed_checks_are_exactly_the_wrong_quotes_the_shop_served(tmp_path: Path) -> None:
    with serve_quotes(wrong_every=7) as (url, ledger):
        text = PLAN.replace("URL", url).replace("ON_FAIL", "restart")
        outcome = pipeline.execute(parse_plan(text, "buy_flow.toml"), text, tmp_path / "runs")
    requests = pl.read_parquet(outcome.run_dir / files.REQUESTS)
    run = json.loads((outcome.run_dir / files.RUN).read_text())

    failed = set(requests.filter(pl.col("error").is_not_null())["req_id"].to_list())
    assert set(requests.filter(pl.col("error").is_not_null())["error"].to_list()) == {"check"}
    recorded = set(requests["req_id"].to_list())
    served_wrong = ledger.wrong_ids()
    # Every wrong quote whose answer the engine read failed its check, and nothing else
    # did; a user's quote in flight when the run ended is the only one left unrecorded.
    assert failed == served_wrong & recorded
    assert len(served_wrong - recorded) <= USERS
    assert len(ledger.wrong["price"]) >= 10 and len(ledger.wrong["total"]) >= 10

    reasons = run["error_reasons"]["check"]
    assert any(
        re.fullmatch(
            r"buy/quote: check json \$\.price: [\d.]+ is not = [\d.]+, from \$\{catalogue_price\}",
            r,
        )
        for r in reasons
    ), reasons
    assert any(
        re.fullmatch(
            r"buy/quote: check json \$\.total: [\d.]+ is not <= [\d.]+, from \$\{budget\} \* 1\.1",
            r,
        )
        for r in reasons
    ), reasons
    # The margin mattered: right quotes above the budget itself passed.
    passed = requests.filter((pl.col("endpoint") == QUOTE) & pl.col("error").is_null())
    above = [
        r
        for r in passed.iter_rows(named=True)
        if total(r["user_index"], r["iteration"]) > budget(r["user_index"])
    ]
    assert len(above) >= 0.2 * passed.height
