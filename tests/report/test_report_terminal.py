from __future__ import annotations

import copy
from typing import Any

import pytest
from fake_run import HEADLINE
from rich.console import Console

from pinchpoint.report import fmt
from pinchpoint.terminal.verdict import render_steps, render_verdict, verdict_text


def _row(text: str, users: int) -> list[str]:
    """The cells of the table row for `users`, split on runs of spaces."""
    for line in text.splitlines():
        cells = [c for c in line.strip().split("  ") if c]
        if cells and cells[0].strip() == str(users):
            return [c.strip() for c in cells]
    raise AssertionError(f"no row for {users} users in:\n{text}")


def test_verdict_text_has_headline_evidence_and_numbers(verdict: dict[str, Any]) -> None:
    text = verdict_text(verdict)
    assert HEADLINE in text
    assert "gunicorn's worker pool is full" in text
    assert "  • queue time p50 grows from 0.04 ms at 2 users to 73.6 ms at 32 users" in text
    assert "saturated" not in text
    # users, req/s, errors, client p50/p95/p99, nginx, gunicorn, gunicorn queue, app
    assert _row(text, 2) == [
        "2", "190.5", "0", "10.5", "11.9", "13.0",
        "10.3 / 11.9", "10.2 / 11.6", "0.040", "10.1 / 11.4",
    ]  # fmt: skip
    assert _row(text, 32) == [
        "32", "376.9", "11 (1.5%)", "84.3", "95.6", "1002.4",
        "83.9 / 96.0", "10.2 / 11.6", "73.6", "10.1 / 11.4",
    ]  # fmt: skip
    assert "queue p50" in text
    assert "latencies in ms" in text
    assert not any(line != line.rstrip() for line in text.splitlines())


def test_terminal_table_lists_users_and_tiers(verdict: dict[str, Any]) -> None:
    console = Console(record=True, width=200)
    render_steps(verdict, console)
    text = console.export_text()
    for name in ("nginx", "gunicorn", "app", "client"):
        assert name in text
    for users in (2, 4, 8, 16, 32):
        assert _row(text, users)[0] == str(users)
    assert "41.7 / 47.8" in text  # nginx at 16 users
    assert "0.30" in text  # gunicorn queue at 4 users


def test_narrow_console_splits_the_table_instead_of_truncating(verdict: dict[str, Any]) -> None:
    console = Console(record=True, width=80)
    render_steps(verdict, console)
    text = console.export_text()
    assert "…" not in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    assert text.count("users") == 2  # each table starts with the users
    for value in ("1002.4", "83.9 / 96.0", "73.6", "10.1 / 11.4", "11 (1.5%)"):
        assert value in text


def test_only_tiers_with_a_queue_get_a_queue_column(verdict: dict[str, Any]) -> None:
    header = verdict_text(verdict).split("─")[0]
    assert header.count("queue p50") == 1


def _styled(verdict: dict[str, Any]) -> str:
    console = Console(record=True, width=200, force_terminal=True, color_system="standard")
    render_verdict(verdict, console)
    return console.export_text(styles=True)


def test_headline_is_red_with_a_bottleneck(verdict: dict[str, Any]) -> None:
    styled = _styled(verdict)
    assert f"\x1b[1;31m{HEADLINE}" in styled


def test_no_bottleneck_is_green_and_has_no_evidence(verdict: dict[str, Any]) -> None:
    verdict["bottleneck"] = None
    verdict["headline"] = "No bottleneck in the tested range (2 to 32 users)"
    styled = _styled(verdict)
    assert "\x1b[1;32mNo bottleneck in the tested range (2 to 32 users)" in styled
    text = verdict_text(verdict)
    assert "•" not in text
    assert "No bottleneck in the tested range (2 to 32 users)" in text


def test_null_bottleneck_without_headline_gets_one(verdict: dict[str, Any]) -> None:
    verdict["bottleneck"] = None
    del verdict["headline"]
    assert "No bottleneck found in the tested range" in verdict_text(verdict)


def test_saturated_generator_warns(verdict: dict[str, Any]) -> None:
    verdict["generator"] = {"saturated": True, "cpu_cores_max": 3.97}
    text = verdict_text(verdict)
    assert "Warning: the load generator was saturated (up to 3.97 CPU cores)" in text
    console = Console(record=True, width=200)
    render_verdict(verdict, console)
    assert "load generator was saturated" in console.export_text()


def test_zero_steps(verdict: dict[str, Any]) -> None:
    verdict["steps"] = []
    text = verdict_text(verdict)
    assert "No steps in this run." in text
    assert HEADLINE in text


def test_tier_without_records_in_a_step_shows_a_dash(verdict: dict[str, Any]) -> None:
    changed = copy.deepcopy(verdict)
    del changed["steps"][0]["tiers"]["app"]
    del changed["steps"][1]["tiers"]["gunicorn"]
    text = verdict_text(changed)
    assert _row(text, 2)[-1] == fmt.DASH
    assert _row(text, 4)[7:9] == [fmt.DASH, fmt.DASH]  # gunicorn p50/p95 and its queue
    assert _row(text, 8)[-1] == "10.1 / 11.4"


def test_missing_numbers_do_not_crash(verdict: dict[str, Any]) -> None:
    step = verdict["steps"][2]
    step["latency_ms"] = {}
    step["throughput_rps"] = None
    del step["errors"]
    row = _row(verdict_text(verdict), 8)
    assert row[1:6] == [fmt.DASH] * 5


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (10.44, "10.4"),
        (1002.43, "1002.4"),
        (1.0, "1.0"),
        (0.0, "0.0"),
        (0.1, "0.10"),
        (0.04, "0.040"),
        (0.01234, "0.012"),
        (0.996, "1.0"),
        (None, fmt.DASH),
        (float("nan"), fmt.DASH),
    ],
)
def test_ms_format(value: float | None, text: str) -> None:
    assert fmt.ms(value) == text


@pytest.mark.parametrize(
    ("count", "rate", "text"),
    [
        (0, 0.0, "0"),
        (11, 11 / 754, "11 (1.5%)"),
        (3, 0.00042, "3 (0.042%)"),
        (500, 0.5, "500 (50%)"),
    ],
)
def test_errors_format(count: int, rate: float, text: str) -> None:
    assert fmt.errors(count, rate) == text


def test_knee_and_scalability_are_told_in_words() -> None:
    from pinchpoint.report.summary import curve

    verdict = {
        "knee": {
            "load": 2.08,
            "ci_low": 2.0,
            "ci_high": 2.16,
            "confidence": 0.98,
            "throughput_at_knee": 185.2,
        },
        "scalability": {
            "sigma": 0.143,
            "kappa": 0.0406,
            "peak_throughput": 192.5,
            "peak_load": 4.6,
            "r_squared": 0.989,
        },
    }
    assert curve(verdict) == [
        "Knee at 2.1 users (95% interval 2.0–2.2, confidence 0.98): throughput stops scaling near 185 req/s",
        "Scalability (USL): predicted peak 192 req/s at 4.6 users; contention σ 0.143, coherency κ 0.0406, fit R² 0.99",
    ]
    assert curve({"knee": None, "scalability": None}) == []


def test_without_a_bottleneck_every_finding_is_listed(verdict: dict[str, Any]) -> None:
    quiet = copy.deepcopy(verdict)
    neighbour = {
        "component": "neighbours", "resource": "cpu", "starts_at_users": 4,
        "name": "processes outside the stack (1.00 cores)", "confidence": 0.5,
        "evidence": [], "summary": "Other processes on this host used up to 1.00 of its cores",
    }  # fmt: skip
    quiet.update(bottleneck=None, headline="No bottleneck of the stack's own", findings=[neighbour])
    text = verdict_text(quiet)
    assert "Also: processes outside the stack (1.00 cores) from 4 users (confidence 0.50)" in text
    # With a bottleneck, the first finding is the bottleneck's own: the headline, not an "Also".
    pool = {**neighbour, "component": "gunicorn", "name": "gunicorn worker pool", "confidence": 1.0}
    text = verdict_text({**verdict, "findings": [pool, neighbour]})
    assert "Also: gunicorn worker pool" not in text
    assert "Also: processes outside the stack (1.00 cores)" in text
