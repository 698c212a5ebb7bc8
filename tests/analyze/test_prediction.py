"""The advice's predicted effect: each ceiling from the run's own numbers, the least of
them named, and no prediction where the advice changes no setting."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from test_verdict_rules import CTX, pool_steps

from pinchpoint.analyze import analyze
from pinchpoint.analyze.prediction import closed_loop_rate, predict
from pinchpoint.analyze.usage import host_use
from pinchpoint.analyze.verdict import decide

DATA = Path(__file__).parent.parent / "data" / "runs"


def _verdict(name: str, tmp_path: Path) -> dict:
    run = tmp_path / name
    shutil.copytree(DATA / name, run)
    (run / "verdict.json").unlink()
    return analyze(run)


def test_a_pool_of_waiting_workers_is_predicted_to_grow_until_the_next_ceiling(
    tmp_path: Path,
) -> None:
    verdict = _verdict("demo-pool2", tmp_path)
    p = verdict["bottleneck"]["prediction"]
    top, steps = verdict["steps"][-1], verdict["steps"]
    x = top["throughput_rps"]
    load = top["users"] * max(s["throughput_rps"] / s["users"] for s in steps)
    ceilings = p["ceilings_rps"]
    assert (p["component"], p["setting"], p["now"]) == ("gunicorn", "workers", 2)
    assert ceilings["load"] == pytest.approx(load, abs=0.1)
    # Enough workers for the least of the other ceilings, busy 85% of the time there (a
    # pool past it queues), at most one per user.
    enough = math.ceil(2 * min(ceilings["cpu"], ceilings["load"]) / (x * 0.85))
    assert p["to"] == min(enough, top["users"])
    assert ceilings["workers"] == pytest.approx(x * p["to"] / 2, abs=0.1)
    assert p["predicted_rps"] == min(ceilings.values())
    assert p["limited_by"] == min(ceilings, key=ceilings.__getitem__)
    assert p["predicted_rps"] > 2 * x  # the pool held it well below the host
    assert p["line"].startswith(f"gunicorn workers 2 → {p['to']}: about ")


def test_one_computing_process_of_threads_is_predicted_with_a_process_per_idle_core(
    tmp_path: Path,
) -> None:
    verdict = _verdict("gthread-one-process-computing", tmp_path)
    p = verdict["bottleneck"]["prediction"]
    assert (p["setting"], p["now"], p["to"]) == ("processes", 1, 2)
    # Two processes serve twice what one did, unless the host's cores stop them first.
    assert p["ceilings_rps"]["processes"] == pytest.approx(2 * p["measured_rps"], abs=0.2)
    assert p["limited_by"] == "cpu" and p["predicted_rps"] < p["ceilings_rps"]["processes"]


def test_a_quota_is_predicted_doubled_within_the_cores_the_others_leave() -> None:
    steps = pool_steps()
    for s in steps:
        s["resources"]["gunicorn"].update(cpu_cores=0.5, cpu_quota_cores=0.5)
    found = predict({"component": "gunicorn", "resource": "cpu_quota"}, steps, CTX)
    assert found is not None
    top = steps[-1]
    assert (found.setting, found.now, found.to) == ("cpu_quota_cores", 0.5, 1.0)
    assert found.ceilings["cpu_quota"] == pytest.approx(top["throughput_rps"] * 2)
    host = host_use(top, CTX)
    cost = (host.stack + host.generator) / top["throughput_rps"]
    cycle = min(s["users"] / s["throughput_rps"] for s in steps)
    cores = CTX.cpu_count - host.neighbours
    assert found.ceilings["cpu"] == pytest.approx(
        closed_loop_rate(top["users"], cycle, cost, cores)
    )
    assert found.ceilings["cpu"] < cores / cost  # its users wait for the cores as they fill
    assert found.predicted_rps == min(found.ceilings.values())


def test_advice_that_changes_no_setting_predicts_nothing(tmp_path: Path) -> None:
    verdict = _verdict("demo-cpu24", tmp_path)
    assert verdict["bottleneck"]["resource"] == "cpu"
    assert "prediction" not in verdict["bottleneck"]
    assert predict({"component": "postgres", "resource": "db_lock"}, pool_steps(), CTX) is None


def test_users_sharing_cores_are_slowed_as_mean_value_analysis_says() -> None:
    # One core, 5 ms of CPU and 5 ms elsewhere a cycle: one user alone cycles in 10 ms;
    # two queue 7.5 ms at the core (5 × (1 + 0.5 waiting)): 2 / 12.5 ms.
    assert closed_loop_rate(1, 0.010, 0.005, 1) == pytest.approx(100.0)
    assert closed_loop_rate(2, 0.010, 0.005, 1) == pytest.approx(160.0)
    rates = [closed_loop_rate(n, 0.010, 0.005, 2) for n in (1, 4, 16, 64)]
    assert rates == sorted(rates) and rates[-1] == pytest.approx(400.0, rel=0.01)


POOL = {"component": "gunicorn", "resource": "worker_pool"}


def _served_by(server: str, kind: str, processes: int) -> list[dict]:
    """pool_steps' full pool of 2 waiting slots, as its server's sampler read it
    (`processes` counts a pre-fork master)."""
    steps = pool_steps()
    for s in steps:
        s["resources"]["gunicorn"].update(pool_server=server, pool_kind=kind, processes=processes)
    return steps


def test_a_pool_is_advised_in_its_own_servers_settings() -> None:
    # One gthread process of 2 threads: --workers 6 would be 6 processes of 2 threads.
    one = predict(POOL, _served_by("gunicorn", "threads", 2), CTX)
    assert one is not None and (one.setting, one.now, one.to) == ("workers", 2, 6)
    assert one.line().startswith("gunicorn --threads 2 → 6: about ")
    # Two processes of one thread: whole threads in each, the slots rounded up to them.
    two = predict(POOL, _served_by("gunicorn", "threads", 3), CTX)
    assert two is not None and two.to == 8
    assert two.line().startswith(
        "gunicorn --threads 1 → 4 in each of its 2 processes (2 → 8 threads in all): about "
    )
    assert two.ceilings["workers"] == pytest.approx(4 * two.measured_rps)
    sync = predict(POOL, _served_by("gunicorn", "sync", 3), CTX)
    assert sync is not None and sync.line().startswith("gunicorn --workers 2 → 8: ")
    uwsgi = predict(POOL, _served_by("uwsgi", "sync", 3), CTX)
    assert uwsgi is not None and uwsgi.line().startswith("gunicorn (uwsgi) --processes 2 → 8: ")
    # A server whose kind of workers no sampler read: the analysis's own words.
    unread = predict(POOL, pool_steps(), CTX)
    assert unread is not None and unread.line().startswith("gunicorn workers 2 → 8: ")


def test_a_prediction_on_the_cores_others_left_says_it_assumes_they_keep_them() -> None:
    # Other processes use 1.05 of the 2 cores (1.5 busy: gunicorn 0.4, the generator 0.05).
    crowded = predict(POOL, pool_steps(host_cpu=1.5), CTX)
    assert crowded is not None and crowded.limited_by == "cpu"
    assert crowded.line().endswith(
        "where the host's CPU limits, assuming the other processes keep using 1.05 cores"
    )
    alone = predict(POOL, pool_steps(host_cpu=0.45), CTX)
    assert alone is not None and alone.limited_by == "cpu"
    assert alone.line().endswith("where the host's CPU limits")
    assert alone.predicted_rps > crowded.predicted_rps


def test_the_pools_summary_names_its_servers_setting_too() -> None:
    v = decide(_served_by("gunicorn", "threads", 2), CTX)
    assert "Add workers with gunicorn --threads (or make" in v["bottleneck"]["summary"]
    sync = decide(_served_by("gunicorn", "sync", 3), CTX)
    assert "Add workers with gunicorn --workers (or make" in sync["bottleneck"]["summary"]
