"""The scenario matrix's draw: seeded, covering every class, each truth unambiguous."""

from __future__ import annotations

from collections import Counter

from pinchpoint.demo.matrix.score import Outcome, accuracy_table, judge
from pinchpoint.demo.matrix.spec import CLASSES, FRONTS, SERVERS, Truth, draw


def test_the_same_seed_draws_the_same_scenarios_and_another_seed_others() -> None:
    assert draw(7, 44) == draw(7, 44)
    assert draw(7, 44) != draw(8, 44)


def test_four_rounds_of_scenarios_cover_every_class_four_times() -> None:
    counts = Counter(s.cls for s in draw(7, 4 * len(CLASSES)))
    assert set(counts) == set(CLASSES)
    assert min(counts.values()) >= 4


def test_the_draws_cover_the_servers_fronts_and_pool_sizes() -> None:
    specs = [s for seed in range(5) for s in draw(seed, 44)]
    assert {s.server for s in specs} >= set(SERVERS)
    assert {s.front for s in specs} == set(FRONTS)
    slots = {s.slots for s in specs}
    assert min(slots) == 1 and max(slots) >= 16
    costs = {(s.cpu_ms > 0.5 * (s.cpu_ms + s.wait_ms)) for s in specs if s.cpu_ms + s.wait_ms > 0}
    assert costs == {True, False}  # computing and waiting requests both


def test_every_truth_starts_at_a_stepped_level_with_steps_past_it() -> None:
    for spec in draw(3, 66):
        if spec.truth.resource is None:
            assert spec.truth.component is None
            continue
        levels = spec.levels()
        assert len(levels) >= 4, spec
        assert spec.truth.starts_at_users in levels, spec
        assert levels[-1] > spec.truth.starts_at_users or spec.cls.endswith("generator"), spec


def test_a_database_cpu_scenario_fills_its_quota_or_the_cores_before_the_pool() -> None:
    specs = [s for s in draw(5, 130) if s.cls == "db_cpu"]
    assert len(specs) == 10
    assert {s.truth.resource for s in specs} == {"cpu", "cpu_quota"}
    for spec in specs:
        assert spec.scan_ms is not None and spec.truth.component == "postgres"
        assert spec.quota_on == "database"
        host_rps = 2 / (spec.scan_ms + 1.0)
        pool_rps = spec.slots / (spec.scan_ms + 1.5)
        if spec.quota is None:
            assert spec.truth.resource == "cpu"
            assert host_rps <= 0.67 * pool_rps
            # Two cores busy from about two users, whatever the scan's length.
            assert spec.truth.starts_at_users == next(n for n in spec.levels() if n >= 2.05)
        else:
            assert spec.truth.resource == "cpu_quota"
            quota_rps = spec.quota / spec.scan_ms
            assert quota_rps <= 0.67 * min(host_rps, pool_rps)
            knee = quota_rps * (spec.scan_ms + 1.5)
            assert spec.truth.starts_at_users == next(n for n in spec.levels() if n >= knee)


def test_a_quota_scenario_limits_below_its_pool_and_the_host() -> None:
    for spec in (s for s in draw(11, 88) if s.cls == "cpu_quota"):
        assert spec.quota is not None
        quota_rps = spec.quota / (spec.cpu_ms + 1.0)
        pool_rps = spec.slots / (spec.cpu_ms + spec.wait_ms + 1.5)
        assert quota_rps <= 0.67 * pool_rps


def test_a_verdict_is_judged_on_resource_component_and_start() -> None:
    spec = next(s for s in draw(7, 44) if s.cls == "pool_wait")
    right = {
        "bottleneck": {
            "component": spec.truth.component,
            "resource": "worker_pool",
            "starts_at_users": spec.truth.starts_at_users,
        },
        "headline": "",
        "findings": [],
    }
    outcome = judge(spec, right, noisy=False)
    assert outcome.right and outcome.start_ok(spec.levels())
    wrong = judge(spec, {**right, "bottleneck": {**right["bottleneck"], "resource": "cpu"}}, False)
    assert not wrong.right and wrong.component_ok and not wrong.resource_ok
    table = accuracy_table([(outcome, spec.levels()), (wrong, spec.levels())])
    assert table[-1] == {
        "class": "all", "n": 2, "resource": 0.5, "component": 1.0, "right": 0.5, "start": 1.0
    }  # fmt: skip


def test_a_bottleneck_named_on_a_healthy_scenario_is_a_false_one() -> None:
    spec = next(s for s in draw(7, 44) if s.cls == "healthy")
    named = {"bottleneck": {"component": "gunicorn", "resource": "time", "starts_at_users": 3}}
    assert judge(spec, named, noisy=False).false_bottleneck
    assert not judge(spec, {"bottleneck": None}, noisy=False).false_bottleneck


def test_a_noisy_run_must_report_the_neighbour() -> None:
    spec = next(s for seed in range(7, 17) for s in draw(seed, 44) if s.noisy_truth is not None)
    assert spec.expected(noisy=True) != spec.expected(noisy=False)
    v = {"bottleneck": None, "findings": [{"component": "neighbours", "resource": "cpu"}]}
    assert judge(spec, v, noisy=True).neighbour_ok
    assert not judge(spec, {"bottleneck": None, "findings": []}, noisy=True).neighbour_ok
    assert not judge(spec, v, noisy=False).neighbour_ok
    assert isinstance(judge(spec, v, noisy=True), Outcome)
    assert spec.expected(noisy=True) == Truth(
        spec.truth.component, "cpu", spec.truth.starts_at_users
    )
