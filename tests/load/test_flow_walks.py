"""Each user's walks rebuilt from requests.parquet alone, by its `user_index` and
`iteration` columns, against a real shop that quotes wrong prices on purpose
(pinchpoint_lab.quote_app): the steps of a walk in order, the numbers the ones the
templates sent (the shop saw them in the paths), and what a failed check with
`on_fail = "restart"` or `"stop_user"` left out."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from pinchpoint import pipeline
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files
from pinchpoint_lab.quote_app import Ledger, serve_quotes

PLAN = (Path(__file__).parent / "data" / "buy_flow.toml").read_text()
ACCOUNT, CATALOGUE, QUOTE, PAY = range(4)
USERS = 4


def _run(tmp_path: Path, on_fail: str, wrong_every: int) -> tuple[pl.DataFrame, Ledger]:
    with serve_quotes(wrong_every) as (url, ledger):
        text = PLAN.replace("URL", url).replace("ON_FAIL", on_fail)
        outcome = pipeline.execute(parse_plan(text, "buy_flow.toml"), text, tmp_path / "runs")
    requests = pl.read_parquet(outcome.run_dir / files.REQUESTS).sort("start_us")
    return requests, ledger


def _walks(requests: pl.DataFrame) -> dict[tuple[int, int], list[dict]]:
    """Each (user, iteration)'s records in the order they were sent."""
    walks: dict[tuple[int, int], list[dict]] = {}
    for row in requests.iter_rows(named=True):
        walks.setdefault((row["user_index"], row["iteration"]), []).append(row)
    return walks


def _numbers_are_the_templates(requests: pl.DataFrame, ledger: Ledger) -> None:
    """The shop saw `${user_index}` in each account path and `${iteration}` in each
    catalogue and quote path: the record's columns hold the same numbers."""
    checked = 0
    for row in requests.iter_rows(named=True):
        path = ledger.paths.get(row["req_id"])
        if path is None or row["endpoint"] == PAY:
            continue
        sent = int(re.fullmatch(r"/api/\w+/(\d+)", path).group(1))  # type: ignore[union-attr]
        expected = row["user_index"] if row["endpoint"] == ACCOUNT else row["iteration"]
        assert sent == expected, (row, path)
        checked += 1
    assert checked >= 0.9 * requests.filter(pl.col("endpoint") != PAY).height


def test_restart_ends_the_walk_at_its_failed_check_and_the_next_starts_afresh(
    tmp_path: Path,
) -> None:
    requests, ledger = _run(tmp_path, "restart", wrong_every=5)
    assert requests["user_index"].null_count() == requests["iteration"].null_count() == 0
    assert sorted(requests["user_index"].unique().to_list()) == list(range(USERS))
    _numbers_are_the_templates(requests, ledger)
    walks = _walks(requests)
    last = {u: max(i for v, i in walks if v == u) for u in range(USERS)}
    failed = 0
    for (user, iteration), rows in walks.items():
        steps = [r["endpoint"] for r in rows]
        # A walk is the flow's steps in order, from the first, each once.
        assert steps == list(range(len(steps))), (user, iteration, steps)
        errors = [r["error"] for r in rows]
        if "check" in errors:
            # The quote failed: nothing of this walk followed it.
            assert errors == [None, None, "check"], (user, iteration, errors)
            failed += 1
        elif len(steps) < 4:
            assert iteration == last[user], (user, iteration, steps)  # cut by the run's end
        else:
            assert errors == [None] * 4
    # Every walk of each user is there, numbered from 0 without a gap.
    for user in range(USERS):
        assert {i for v, i in walks if v == user} == set(range(last[user] + 1))
    assert failed >= 10 and failed == requests.filter(pl.col("error") == "check").height


def test_stop_user_sends_nothing_more_of_that_user_after_its_failed_check(
    tmp_path: Path,
) -> None:
    requests, ledger = _run(tmp_path, "stop_user", wrong_every=9)
    _numbers_are_the_templates(requests, ledger)
    failures = requests.filter(pl.col("error") == "check")
    # Each user stops at its first wrong quote: one failure at most per user.
    assert 1 <= failures.height <= USERS
    assert failures["user_index"].n_unique() == failures.height
    for failure in failures.iter_rows(named=True):
        mine = requests.filter(pl.col("user_index") == failure["user_index"])
        assert mine["req_id"].to_list()[-1] == failure["req_id"]
        assert mine["iteration"].max() == failure["iteration"]
    for (user, iteration), rows in _walks(requests).items():
        steps = [r["endpoint"] for r in rows]
        assert steps == list(range(len(steps))), (user, iteration, steps)
