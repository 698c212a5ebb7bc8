"""verdict.json as analyze() writes it matches docs/verdict.schema.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pinchpoint.analyze import analyze

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).parent.parent.parent
RUNS = ROOT / "tests" / "data" / "runs"


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads((ROOT / "docs" / "verdict.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def fresh_verdict(tmp_path: Path, name: str) -> dict:
    run_dir = tmp_path / name
    shutil.copytree(RUNS / name, run_dir)
    (run_dir / "verdict.json").unlink()
    analyze(run_dir)
    # What is on disk, not the dict in memory: that is what readers of the file get.
    return json.loads((run_dir / "verdict.json").read_text())


@pytest.mark.parametrize("name", sorted(p.name for p in RUNS.iterdir()))
def test_recorded_runs_verdicts_match_the_schema(validator, tmp_path: Path, name: str) -> None:
    verdict = fresh_verdict(tmp_path, name)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(verdict)]
    assert errors == []


def test_schema_takes_a_redis_inside_as_analyze_writes_it(validator, tmp_path: Path) -> None:
    verdict = fresh_verdict(tmp_path, "redis-core")
    inside = verdict["bottleneck"]["redis"]
    assert verdict["findings"][0]["redis"] == inside
    assert inside["commands"][0]["command"] == "eval" and inside["slow"]
    assert validator.is_valid(verdict)
    verdict["bottleneck"]["redis"] = {**inside, "peak_cores": -0.5}
    assert not validator.is_valid(verdict)
    verdict["bottleneck"]["redis"] = {**inside, "threads": 5}
    assert not validator.is_valid(verdict)


def test_schema_takes_a_rebuilt_runs_partial_and_missing(validator, tmp_path: Path) -> None:
    verdict = fresh_verdict(tmp_path, "demo-pool2")
    verdict["partial"], verdict["missing"] = True, ["run.json", "resources.parquet"]
    assert validator.is_valid(verdict)
    verdict["partial"] = False  # written only when true
    assert not validator.is_valid(verdict)


def test_schema_rejects_a_verdict_without_the_new_keys(validator, tmp_path: Path) -> None:
    verdict = fresh_verdict(tmp_path, "demo-pool2")
    assert verdict["knee"] is not None and verdict["scalability"] is not None
    del verdict["knee"]
    assert not validator.is_valid(verdict)
    verdict = fresh_verdict(tmp_path / "again", "demo-pool2")
    verdict["scalability"]["kappa"] = -1.0
    assert not validator.is_valid(verdict)


LOCKS = {
    "from_step": 1,
    "samples": 11,
    "backends": 59,
    "waiting_share": 0.78,
    "locks": [
        {
            "relation": "counters",
            "lock_type": "transactionid",
            "mode": "ShareLock",
            "waiting": "UPDATE counters SET n = n + $1 WHERE id = $2 RETURNING n",
            "holding": "UPDATE counters SET n = n + $1 WHERE id = $2 RETURNING n",
            "holder_state": "idle in transaction",
            "share": 0.64,
            "samples": 38,
        }
    ],
}
STATEMENTS = {
    "from_step": 1,
    "samples": 11,
    "source": "pg_stat_statements",
    "statements": [{"statement": "SELECT $1", "active_s": 10.2, "share": 1.0, "calls": 657}],
}


def test_schema_takes_the_database_inside_a_finding(validator, tmp_path: Path) -> None:
    verdict = fresh_verdict(tmp_path, "demo-pool2")
    for inside in (LOCKS, STATEMENTS):
        verdict["bottleneck"]["database"] = inside
        verdict["findings"][0]["database"] = inside
        assert validator.is_valid(verdict)
    verdict["bottleneck"]["database"] = {**LOCKS, "locks": [{**LOCKS["locks"][0], "share": 1.5}]}
    assert not validator.is_valid(verdict)
    verdict["bottleneck"]["database"] = {**STATEMENTS, "source": "guess"}
    assert not validator.is_valid(verdict)
