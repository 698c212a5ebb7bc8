"""The verdict on run folders recorded from the real demo stack (tests/data/runs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pinchpoint.analyze import analyze

DATA = Path(__file__).parent.parent / "data" / "runs"


@pytest.fixture
def recorded(tmp_path: Path):
    def copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copytree(DATA / name, dst)
        (dst / "verdict.json").unlink()
        return dst

    return copy


def test_two_workers_recorded_run_names_the_gunicorn_pool(recorded) -> None:
    verdict = analyze(recorded("demo-pool2"))
    b = verdict["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("gunicorn", "worker_pool", 3)
    assert verdict["headline"] == "Bottleneck: gunicorn worker pool from 3 users"
    steps = {s["users"]: s for s in verdict["steps"]}
    # The queue before gunicorn is what grows; gunicorn and the app stay near 10 ms each.
    assert steps[7]["tiers"]["gunicorn"]["queue_p50_ms"] > 20
    assert steps[7]["tiers"]["app"]["p50_ms"] < 15
    assert steps[7]["tiers"]["gunicorn"]["concurrency"] == pytest.approx(2.0, abs=0.3)


def test_cpu_bound_recorded_run_names_the_host_cpu(recorded) -> None:
    verdict = analyze(recorded("demo-cpu24"))
    b = verdict["bottleneck"]
    assert b["resource"] == "cpu"
    onset = next(s for s in verdict["steps"] if s["users"] == b["starts_at_users"])
    assert onset["resources"]["host"]["cpu_cores"] >= 0.85 * 2
    assert all(s["tiers"]["gunicorn"]["queue_p50_ms"] < 2 for s in verdict["steps"])


def _cores(step: dict, who: str) -> float:
    return step["resources"][who]["cpu_cores"]


@pytest.mark.parametrize("name", ["db-scan-app", "db-scan-pool"])
def test_a_database_computing_each_request_is_named_for_the_cpu_it_fills(
    recorded, name: str
) -> None:
    """Each request waits on a PostgreSQL scan of ~5 ms of CPU. The app's own time and the
    queue before the server grow more than PostgreSQL's (their work waits for a core too),
    and in db-scan-pool the server's 5 workers fill at 9 users; the cores filled first, at
    3 users, with PostgreSQL using most of them."""
    verdict = analyze(recorded(name))
    b = verdict["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("postgres", "cpu", 3)
    assert (
        verdict["headline"] == "Bottleneck: host CPU (2 cores), used most by postgres from 3 users"
    )
    steps = {s["users"]: s for s in verdict["steps"]}
    top = verdict["steps"][-1]
    assert _cores(steps[3], "host") >= 0.85 * 2 > _cores(steps[1], "host")
    server = "uwsgi" if name == "db-scan-pool" else "gunicorn"
    assert _cores(top, "postgres") > 2 * _cores(top, server)
    # The tier whose own time grew most is not PostgreSQL's: the rule names the consumer.
    grown = {
        t: (x["self_p50_ms"] or 0) + (x.get("queue_p50_ms") or 0)
        - (steps[1]["tiers"][t]["self_p50_ms"] or 0) - (steps[1]["tiers"][t].get("queue_p50_ms") or 0)
        for t, x in top["tiers"].items()
    }  # fmt: skip
    assert max(grown, key=lambda t: grown[t]) != "postgres"
    assert "postgres 1." in " ".join(verdict["findings"][0]["evidence"])
    assert "less CPU per request in postgres" in b["summary"]


def test_a_pool_beside_a_cpu_hog_stays_the_pool_when_the_stack_leaves_cores_unused(
    recorded,
) -> None:
    """gunicorn gthread, 6 threads for requests that wait ~17 ms, a process spinning on a
    core beside it. Its threads waited for a core (0.93 cores wanted per busy worker) and
    the host read 1.71 of 2 cores busy, but the stack used 0.78 of the 1.07 cores the hog
    left: the wait was the hog's, and the pool is what filled."""
    verdict = analyze(recorded("gthread-pool-hog"))
    b = verdict["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("gunicorn", "worker_pool", 9)
    assert any("the neighbour's doing" in line for line in b["evidence"])
    assert [f["component"] for f in verdict["findings"]] == ["gunicorn", "neighbours"]
    top = verdict["steps"][-1]["resources"]
    assert top["host"]["cpu_cores"] < 0.9 * 2


def test_healthy_recorded_run_has_no_bottleneck(recorded) -> None:
    verdict = analyze(recorded("demo-healthy24"))
    assert verdict["bottleneck"] is None
    assert verdict["headline"].startswith("No bottleneck from 1 to 4 users")


@pytest.mark.parametrize(
    "name",
    [
        "demo-pool2",
        "demo-cpu24",
        "demo-healthy24",
        "db-scan-app",
        "db-scan-pool",
        "gthread-pool-hog",
    ],
)
def test_analysis_matches_the_verdict_recorded_with_the_run(recorded, name: str) -> None:
    stored = json.loads((DATA / name / "verdict.json").read_text())
    verdict = analyze(recorded(name))
    keys = ("component", "resource", "starts_at_users")

    def finding(v: dict) -> tuple | None:
        return tuple(v["bottleneck"][k] for k in keys) if v["bottleneck"] else None

    assert finding(verdict) == finding(stored)
    assert [s["requests"] for s in verdict["steps"]] == [s["requests"] for s in stored["steps"]]


def test_step_counts_come_from_the_steady_part_of_each_step(recorded) -> None:
    run_dir = recorded("demo-pool2")
    verdict = analyze(run_dir)
    run = json.loads((run_dir / "run.json").read_text())
    import polars as pl

    requests = pl.read_parquet(run_dir / "requests.parquet")
    for step, window in zip(verdict["steps"], run["steps"], strict=True):
        lo = int((window["start"] + run["warmup_s"]) * 1e6)
        hi = int(window["end"] * 1e6)
        expected = requests.filter(
            (pl.col("step") == window["step"])
            & pl.col("start_us").is_between(lo, hi, closed="left")
        ).height
        assert step["requests"] == expected
        assert step["throughput_rps"] == pytest.approx(
            expected / (window["end"] - window["start"] - run["warmup_s"]), rel=1e-3
        )


def test_every_step_has_the_percentile_ladder_of_client_tiers_and_self_time(recorded) -> None:
    verdict = analyze(recorded("demo-pool2"))
    ladder = ("50", "90", "95", "99", "99.9")
    for step in verdict["steps"]:
        client = [step["latency_ms"][f"p{q}"] for q in ladder]
        assert client == sorted(client), step["users"]
        for name, tier in step["tiers"].items():
            total = [tier[f"p{q}_ms"] for q in ladder]
            assert total == sorted(total), (step["users"], name)
            if tier["self_by"] == "request":
                own = [tier[f"self_p{q}_ms"] for q in ladder]
                assert own == sorted(own), (step["users"], name)
                assert own[-1] <= total[-1] + 1e-9


def test_a_journey_whose_checkout_serializes_names_that_request_first(recorded) -> None:
    """A flow of three requests behind two nginx and uWSGI (its pool in an ini file, the plan
    without workers); checkout holds a file lock 9 ms, so at most ~110 a second pass."""
    verdict = analyze(recorded("journey-checkout-uwsgi"))
    b = verdict["bottleneck"]
    assert (b["component"], b["resource"], b["request"]) == (
        "uwsgi",
        "serialized",
        "journey/checkout",
    )
    assert b["starts_at_users"] == 5
    assert verdict["headline"].startswith("Bottleneck: journey/checkout: serialized inside uwsgi")
    checkout = next(e for e in verdict["endpoints"] if e["endpoint"] == "journey/checkout")
    assert checkout["workers"] == pytest.approx(1.0, abs=0.25)


def test_a_uwsgi_pool_the_plan_does_not_size_is_read_from_its_command_line(recorded) -> None:
    verdict = analyze(recorded("uwsgi-pool-unstated"))
    b = verdict["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("uwsgi", "worker_pool", 5)
    assert verdict["pools"]["uwsgi"] == {
        "slots": 4,
        "found": "server",
        "source": "one request per process, from command line",
    }
    assert "uwsgi's pool: 4 slots (one request per process, from command line)" in b["evidence"]


def test_the_report_says_the_serialized_request_first(recorded) -> None:
    from pinchpoint.report.html import write_report

    run = recorded("journey-checkout-uwsgi")
    analyze(run)
    page = write_report(run).read_text(encoding="utf-8")
    headline = page.index('<p class="headline">')
    assert page.index("journey/checkout: serialized inside uwsgi", headline) == headline + len(
        '<p class="headline">Bottleneck: '
    )


def _hide_pool(run: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(run / "resources.parquet")
    for name in ("pool_slots", "pool_kind", "pool_source"):
        index = table.column_names.index(name)
        nulls = pa.nulls(table.num_rows, table.schema.field(name).type)
        table = table.set_column(index, name, nulls)
    pq.write_table(table, run / "resources.parquet")


def test_one_computing_gthread_process_is_told_to_add_processes(recorded) -> None:
    # One gunicorn process of 4 threads computing: it uses a core while the host has two.
    run = recorded("gthread-one-process-computing")
    b = analyze(run)["bottleneck"]
    assert (b["component"], b["resource"]) == ("gunicorn", "worker_pool")
    assert "one worker process computes about a core" in b["summary"]
    assert "add processes (up to 2" in b["summary"]
    assert "more threads will not help" in b["summary"]


def test_a_computing_thread_pool_of_unknown_size_is_given_as_a_range(recorded) -> None:
    run = recorded("gthread-one-process-computing")
    _hide_pool(run)
    verdict = analyze(run)
    pool = verdict["pools"]["gunicorn"]
    assert (pool["found"], pool["slots"], pool["most"]) == ("inferred", 2, 5)
    assert pool["slots"] <= 4 <= pool["most"]  # the true pool: 1 process × 4 threads
    assert (verdict["bottleneck"]["component"], verdict["bottleneck"]["resource"]) == (
        "gunicorn",
        "worker_pool",
    )


@pytest.mark.parametrize("name", ["journey-search-db-sync", "journey-search-db-gthread"])
def test_a_pool_waiting_on_a_database_that_computes_one_request_names_the_database(
    recorded, name: str
) -> None:
    """A journey of cheap requests and a search that scans a table inside PostgreSQL,
    behind 5 sync workers (6 gthread slots). The pool fills and the queue before gunicorn
    grows most, but its workers wait (0.3-0.4 cores wanted per busy one) on PostgreSQL,
    which used most of the host's full CPU: the CPU, in PostgreSQL, is the limit, and the
    search carries all of its work. Adding workers was the old verdict's advice."""
    verdict = analyze(recorded(name))
    b = verdict["bottleneck"]
    assert (b["component"], b["resource"], b["request"]) == ("postgres", "cpu", "journey/search")
    assert verdict["headline"].startswith(
        "Bottleneck: host CPU (2 cores), used most by postgres from 5 users, in journey/search "
        "(100% of postgres's work): `SELECT count(*) FROM (SELECT value FROM readings"
    )
    evidence = "\n".join(b["evidence"])
    assert "gunicorn's workers wait on postgres: 0.3" in evidence
    assert "journey/search carries 100% of postgres's work at 11 users" in evidence
    assert "more gunicorn workers would queue more work on the same cores" in b["summary"]
    assert "Add workers" not in b["summary"]
    top = verdict["steps"][-1]
    assert top["tiers"]["gunicorn"]["queue_p50_ms"] > 10
    assert top["resources"]["postgres"]["cpu_cores"] > 2 * top["resources"]["gunicorn"]["cpu_cores"]
