"""The SLA is checked once, by the analysis, and kept in verdict.json: the terminal, the
report, `pinchpoint sla` and the Python API read it from there, and only `pinchpoint sla
--plan` and the API's `check_sla(sla)` check thresholds again."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pinchpoint.analyze import analyze
from pinchpoint.analyze import sla as slas
from pinchpoint.analyze.sla import check_sla
from pinchpoint.report.html import write_report
from test_sla import PLAN, cli, server, write_run  # noqa: F401 (server: a fixture)

BROKEN = "\n[sla]\np99_ms = 50\nerror_rate = 0.02\nslow_ms = 50\nslow_share = 0.001\n"


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the SLA's evaluations from here on."""
    calls: list[int] = []
    evaluate = slas.evaluate

    def counted(*args: Any, **kwargs: Any) -> list[slas.SlaResult]:
        calls.append(1)
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(slas, "evaluate", counted)
    return calls


def _refusing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the SLA was checked again")

    monkeypatch.setattr(slas, "evaluate", refuse)


def test_the_analysis_keeps_the_sla_in_the_verdict(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "run", sla=BROKEN)
    analyze(run_dir)
    kept = json.loads((run_dir / "verdict.json").read_text())["sla"]
    expected = check_sla(
        {"p99_ms": 50, "error_rate": 0.02, "slow_ms": 50, "slow_share": 0.001}, run_dir
    )
    assert kept == json.loads(
        json.dumps({"passed": False, "results": [r.to_dict() for r in expected]})
    )
    assert [r["broken_at_users"] for r in kept["results"]] == [[4], [], [4]]


def test_a_plan_without_an_sla_keeps_null(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "run")
    analyze(run_dir)
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert "sla" in verdict and verdict["sla"] is None


def test_without_requests_the_verdict_says_why_the_sla_was_not_checked(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "run", sla=BROKEN)
    (run_dir / "requests.parquet").unlink()
    analyze(run_dir)
    kept = json.loads((run_dir / "verdict.json").read_text())["sla"]
    assert kept == {"passed": False, "results": [], "problem": "requests.parquet not found"}
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert "The SLA was not checked: requests.parquet not found." in page


def test_the_report_reads_the_sla_without_the_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = write_run(tmp_path / "run", sla=BROKEN)
    analyze(run_dir)
    (run_dir / "plan.toml").unlink()  # nothing to parse
    _refusing(monkeypatch)
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert '<section class="sla broken" id="sla">' in page
    assert '<tr><td class="text">p99 ≤ 50 ms</td>' in page
    assert "SLA p99 50 ms" in page  # the threshold on the percentile chart


def test_a_damaged_sla_in_the_verdict_is_a_note(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "run", sla=BROKEN)
    analyze(run_dir)
    verdict = json.loads((run_dir / "verdict.json").read_text())
    verdict["sla"] = {"passed": True}
    (run_dir / "verdict.json").write_text(json.dumps(verdict))
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert "The SLA was not checked: verdict.json: sla: not an SLA&#x27;s outcome" in page


def test_the_sla_command_reads_the_verdict_and_checks_only_with_a_plan(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "run", sla=BROKEN)
    done = cli("sla", str(run_dir))
    assert done.returncode == 2
    assert "no verdict.json: run pinchpoint analyze" in " ".join(done.stderr.split())
    other = tmp_path / "other.toml"
    other.write_text("[sla]\np99_ms = 150\n")
    done = cli("sla", str(run_dir), "--plan", str(other), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sla"]["results"][0]["key"] == "p99_ms"

    analyze(run_dir)
    (run_dir / "requests.parquet").unlink()  # read from the verdict, not checked again
    done = cli("sla", str(run_dir), "--json")
    assert done.returncode == 1, done.stderr
    kept = json.loads((run_dir / "verdict.json").read_text())["sla"]
    assert json.loads(done.stdout)["sla"] == kept

    verdict = json.loads((run_dir / "verdict.json").read_text())
    del verdict["sla"]  # written before the SLA was kept
    (run_dir / "verdict.json").write_text(json.dumps(verdict))
    done = cli("sla", str(run_dir))
    assert done.returncode == 2
    assert "run `pinchpoint analyze` again" in " ".join(done.stderr.split())


def test_one_run_checks_the_sla_once(
    server: int,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pinchpoint.cli import app

    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.format(port=server) + "\n[sla]\np50_ms = 60000\nerror_rate = 0\n")
    calls = _counting(monkeypatch)
    invoke: Callable[..., Any] = CliRunner().invoke
    done = invoke(app, ["run", str(plan), "--runs-dir", str(tmp_path / "runs"), "--quiet"])
    assert done.exit_code == 0, done.output
    assert "SLA met" in done.output
    assert len(calls) == 1
