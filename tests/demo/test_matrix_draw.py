"""The scenario matrix's draw: seeded, covering every class, each truth unambiguous."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from pathlib import Path

from pinchpoint.demo.plan import stack_plan
from pinchpoint.plan.model import parse_plan
from pinchpoint_lab.matrix.build import (
    OTLP_SETTLE_S,
    as_planned,
    asgi_components,
    asgi_path,
    fanout_components,
    fanout_stacks,
    journey_flow,
)
from pinchpoint_lab.matrix.capacity import fair_shares, stack_cores
from pinchpoint_lab.matrix.draws import draw
from pinchpoint_lab.matrix.score import Outcome, accuracy_table, judge
from pinchpoint_lab.matrix.spec import (
    ASYNC_CALL_CPU_MS,
    ASYNC_CALL_MS,
    CALLEE_NAMES,
    CLASSES,
    FRONTS,
    REDIS_CALL_CPU_MS,
    REDIS_CALL_MS,
    SERVERS,
    TRACED_CALL_MS,
    TRACED_CPU_MS,
    TRACED_FANOUT_MS,
    Spec,
    Truth,
)
from pinchpoint_lab.scenarios import Scenario
from pinchpoint_lab.server_stacks import STACKS
from pinchpoint_lab.sync_callee import SyncCallee


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
    specs = [s for s in draw(5, 20 * len(CLASSES)) if s.cls == "db_cpu"]
    assert len(specs) == 20
    assert {s.truth.resource for s in specs} == {"cpu", "cpu_quota"}
    for spec in specs:
        assert spec.scan_ms is not None and spec.truth.component == "postgres"
        assert spec.quota_on == "database"
        host_rps = 2 / (spec.scan_ms + 1.0)
        pool_rps = spec.slots / (spec.scan_ms + 1.5)
        if spec.quota is None:
            assert spec.truth.resource == "cpu"
            assert spec.expected(noisy=True).resource == "cpu"
            assert host_rps <= 0.67 * pool_rps
            # Two cores busy from about two users, whatever the scan's length.
            assert spec.truth.starts_at_users == next(n for n in spec.levels() if n >= 2.05)
        else:
            assert spec.truth.resource == "cpu_quota"
            quota_rps = spec.quota / spec.scan_ms
            assert quota_rps <= 0.67 * min(host_rps, pool_rps)
            knee = quota_rps * (spec.scan_ms + 1.5)
            assert spec.truth.starts_at_users == next(n for n in spec.levels() if n >= knee)
            # The backends get at least quota / 0.67 cores beside the hog.
            assert spec.quota <= 0.67 * stack_cores(spec.slots, spec.hog_cores)
            assert spec.expected(noisy=True) == spec.truth


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
        "class": "all", "n": 2, "refused": 0, "resource": 0.5, "component": 1.0, "right": 0.5,
        "start": 1.0,
    }  # fmt: skip


def test_a_bottleneck_named_on_a_healthy_scenario_is_a_false_one() -> None:
    spec = next(s for s in draw(7, 44) if s.cls == "healthy")
    named = {"bottleneck": {"component": "gunicorn", "resource": "time", "starts_at_users": 3}}
    assert judge(spec, named, noisy=False).false_bottleneck
    assert not judge(spec, {"bottleneck": None}, noisy=False).false_bottleneck


def test_a_noisy_run_must_report_the_neighbour() -> None:
    spec = next(
        s
        for seed in range(7, 17)
        for s in draw(seed, 44)
        if s.noisy_truth is not None and s.noisy_truth.resource != s.truth.resource
    )
    assert spec.expected(noisy=True) != spec.expected(noisy=False)
    v = {"bottleneck": None, "findings": [{"component": "neighbours", "resource": "cpu"}]}
    assert judge(spec, v, noisy=True).neighbour_ok
    assert not judge(spec, {"bottleneck": None, "findings": []}, noisy=True).neighbour_ok
    assert not judge(spec, v, noisy=False).neighbour_ok
    assert isinstance(judge(spec, v, noisy=True), Outcome)
    assert spec.expected(noisy=True) == Truth(
        spec.truth.component, "cpu", spec.truth.starts_at_users, refusal_ok=spec.hog_cores > 1
    )


def _many(count: int = 300) -> list[Spec]:
    return draw(13, count)


def test_the_plan_names_the_pool_size_in_at_most_a_third_of_the_draws() -> None:
    specs = _many()
    written = sum(s.plan_workers for s in specs)
    assert 0 < written <= len(specs) / 3
    assert [s.plan_workers for s in specs] == [s.plan_workers for s in _many()]


def test_a_plan_without_the_pool_size_has_no_workers_key_on_the_app_server() -> None:
    components = [
        {"name": "nginx", "role": "proxy", "calls": ["gunicorn"]},
        {"name": "gunicorn", "role": "app_server", "calls": ["app"], "workers": 4},
    ]
    spec = next(s for s in _many() if not s.plan_workers)
    assert [c.get("workers") for c in as_planned(spec, components)] == [None, None]
    assert "workers" not in as_planned(spec, components)[1]
    planned = next(s for s in _many() if s.plan_workers)
    assert as_planned(planned, components) == components


def test_servers_read_their_pool_from_flags_or_from_a_config_file() -> None:
    specs = _many()
    for server in SERVERS:
        assert {s.server_config for s in specs if s.server == server} == {"flags", "file"}


def test_the_hog_takes_one_core_or_one_and_a_half_or_more_in_a_share_of_draws() -> None:
    hogs = Counter(s.hog_cores for s in _many())
    assert set(hogs) == {1.0, 1.5, 1.8}
    assert 0.25 <= (hogs[1.5] + hogs[1.8]) / sum(hogs.values()) <= 0.75


def test_cores_are_shared_fairly_between_the_hog_and_the_stack() -> None:
    assert fair_shares([0.5, 1.0, 1.0], 2.0) == [0.5, 0.75, 0.75]
    assert stack_cores(1, 1.0) == 1.0  # a worker beside a one-core hog keeps its core
    assert stack_cores(1, 1.5) == 0.75
    assert math.isclose(stack_cores(3, 1.8), 1.2)  # five busy tasks, 0.4 cores each


def test_a_waiting_pool_stays_light_in_what_any_hog_leaves() -> None:
    specs = [s for s in _many(40 * len(CLASSES)) if s.cls == "pool_wait"]
    assert {s.hog_cores for s in specs} == {1.0, 1.5, 1.8}
    for spec in specs:
        rps = spec.slots / (spec.cpu_ms + spec.wait_ms + 1.5)
        assert rps * (spec.cpu_ms + 1.0) <= 0.5 * (2 - spec.hog_cores)
        assert spec.expected(noisy=True) == spec.truth


def test_a_computing_worker_beside_any_hog_is_limited_by_the_cpu() -> None:
    specs = [s for s in _many(40 * len(CLASSES)) if s.cls == "pool_cpu"]
    for spec in specs:
        noisy = spec.expected(noisy=True)
        if spec.wait_ms == 0:
            assert (noisy.resource, noisy.refusal_ok) == ("cpu", spec.hog_cores > 1)
        else:  # a waiting worker only beside a hog that leaves it a core
            assert spec.hog_cores == 1.0 and noisy == spec.truth
    assert {s.hog_cores for s in specs if s.wait_ms == 0} == {1.0, 1.5, 1.8}


def test_a_quota_fills_before_the_cores_a_hog_leaves_the_server() -> None:
    specs = [s for s in _many(40 * len(CLASSES)) if s.cls == "cpu_quota"]
    assert {s.hog_cores for s in specs} == {1.0, 1.5, 1.8}
    for spec in specs:
        assert spec.quota is not None
        assert spec.quota <= 0.67 * stack_cores(spec.workers, spec.hog_cores)
        assert spec.expected(noisy=True) == spec.truth


def test_a_refusal_is_allowed_only_beside_a_heavy_hog() -> None:
    for spec in _many(40 * len(CLASSES)):
        assert not spec.truth.refusal_ok
        if spec.expected(noisy=True).refusal_ok:
            assert spec.hog_cores > 1, spec.name


def test_a_journey_serializes_on_its_checkout_from_walk_time_over_hold_users() -> None:
    specs = [s for s in _many(20 * len(CLASSES)) if s.cls == "journey"]
    assert len(specs) == 20
    for spec in specs:
        checkout = [step for step in spec.journey if step.hold_ms is not None]
        assert [step.name for step in checkout] == ["checkout"]
        hold = checkout[0].hold_ms
        assert hold is not None
        walk = sum(step.cpu_ms + step.wait_ms + 1.5 for step in spec.journey) + hold
        knee = walk / hold
        assert spec.truth == Truth(
            "uwsgi" if spec.server.startswith("uwsgi") else "gunicorn",
            "serialized",
            next(n for n in spec.levels() if n >= knee),
            request="journey/checkout",
        )
        assert spec.slots > spec.levels()[-1]  # a slot for every user: the pool never fills
        # The CPU at 1000 / hold walks a second stays under half a core.
        cpu = sum(step.cpu_ms + 1.0 for step in spec.journey)
        assert cpu / hold <= 0.5


def test_a_journey_plan_walks_its_named_requests_in_turn() -> None:
    spec = next(s for s in _many() if s.cls == "journey")
    flow = journey_flow(spec)
    assert flow is not None
    text = stack_plan("http://127.0.0.1:8080", [], spec.users, 2.0, "/", flow=flow)
    plan = parse_plan(text)
    names = [f"journey/{step.name}" for step in spec.journey]
    assert plan.endpoints() == names
    assert "journey/checkout" in names and len(names) >= 3
    checkout = plan.flow[0].step[names.index("journey/checkout")]
    assert (checkout.method, checkout.path.split("?")[0]) == ("POST", "/api/checkout")
    assert journey_flow(next(s for s in _many() if s.cls == "pool_wait")) is None


def test_a_journey_verdict_must_name_the_request_it_serializes() -> None:
    spec = next(s for s in _many() if s.cls == "journey")
    b = {"component": spec.truth.component, "resource": "serialized", "starts_at_users": 3}
    assert not judge(spec, {"bottleneck": b}, noisy=False).right
    assert judge(spec, {"bottleneck": {**b, "request": "journey/checkout"}}, False).right
    fast = next(step.name for step in spec.journey if step.hold_ms is None)
    assert not judge(spec, {"bottleneck": {**b, "request": f"journey/{fast}"}}, False).right


def test_a_refusal_beside_a_heavy_hog_is_counted_apart_and_elsewhere_is_wrong() -> None:
    specs = _many(40 * len(CLASSES))
    heavy = next(s for s in specs if s.expected(noisy=True).refusal_ok and s.cls == "host_cpu")
    busy = {
        "bottleneck": None,
        "headline": "No bottleneck of the stack's own: neighbours took the host's CPU.",
    }
    generator = {"bottleneck": {"component": "generator", "resource": "cpu"}, "headline": ""}
    for verdict in (busy, generator):
        outcome = judge(heavy, verdict, noisy=True)
        assert outcome.refused and not outcome.right
    assert not judge(heavy, busy, noisy=False).refused
    named_wrong = {"bottleneck": {"component": "nginx", "resource": "proxy_limit"}}
    assert not judge(heavy, named_wrong, noisy=True).refused
    levels = heavy.levels()
    table = accuracy_table([(judge(heavy, busy, noisy=True), levels)])
    assert table[-1]["refused"] == 1 and table[-1]["right"] is None


def _fan_outs(count: int = 40) -> list[Spec]:
    specs = [s for s in _many(count * len(CLASSES)) if s.cls == "traced_fanout"]
    assert len(specs) == count
    return specs


def test_a_traced_fan_out_queues_for_its_smallest_pool_from_slots_times_fan_out_over_call() -> None:
    for spec in _fan_outs():
        slow, other = sorted(spec.callees, key=lambda c: c.workers)
        assert slow.workers in (1, 2) and other.workers >= 4 and slow.name != other.name
        call = {c.name: c.wait_ms + TRACED_CALL_MS for c in spec.callees}
        fan_out = max(call.values()) + TRACED_FANOUT_MS
        knee = slow.workers * fan_out / call[slow.name]
        start = next(n for n in spec.levels() if n >= knee)
        assert spec.truth == Truth(slow.name, "worker_pool", start)
        # The other callee, the gateway's pool and the host's cores pass 1 / 0.67 times more.
        rate = slow.workers / call[slow.name]
        assert rate <= 0.67 * other.workers / call[other.name]
        assert rate <= 0.67 * spec.slots / fan_out
        assert rate <= 0.67 * 2 / TRACED_CPU_MS
        assert spec.slots > spec.levels()[-1]  # a gateway slot for every user
    assert {min(c.workers for c in s.callees) for s in _fan_outs()} == {1, 2}


def test_a_traced_fan_out_beside_a_hog_keeps_its_pool_refused_only_where_little_is_left() -> None:
    specs = _fan_outs()
    for spec in specs:
        slow = min(spec.callees, key=lambda c: c.workers)
        cores = slow.workers / (slow.wait_ms + TRACED_CALL_MS) * TRACED_CPU_MS
        assert cores <= 0.5  # light in the one core a one-core hog leaves
        refused = spec.hog_cores > 1 and cores > 0.5 * (2 - spec.hog_cores)
        assert spec.expected(noisy=True) == replace(spec.truth, refusal_ok=refused)
    assert {s.expected(noisy=True).refusal_ok for s in specs} == {True, False}


def test_a_traced_fan_out_is_drawn_the_same_from_its_seed_and_otherwise_from_another() -> None:
    assert _fan_outs() == _fan_outs()
    assert {s.callees for s in _fan_outs()} != {s.callees for s in draw(14, 40 * len(CLASSES))}


def test_a_traced_fan_out_plan_receives_spans_and_samples_its_callees_in_some_draws(
    tmp_path: Path,
) -> None:
    specs = _fan_outs()
    assert {s.callees_sampled for s in specs} == {True, False}
    assert {s.plan_workers for s in specs} == {True, False}
    for spec in specs[:12]:
        gateway, services = fanout_stacks(spec, tmp_path / spec.name, "http://127.0.0.1:4318")
        components = fanout_components(spec, gateway, services)
        scenario = Scenario(
            gateway.url, components, "/fanout", otlp=("127.0.0.1:4318", OTLP_SETTLE_S)
        )
        plan = parse_plan(scenario.plan())
        assert [(o.listen, o.settle) for o in plan.otlp] == [("127.0.0.1:4318", OTLP_SETTLE_S)]
        named = {c.name: c for c in plan.component}
        assert named["gunicorn"].calls == ["gateway"] and "gateway" in named
        for callee in spec.callees:
            planned = named[callee.name]
            assert (planned.process is not None) == spec.callees_sampled
            assert planned.workers == (callee.workers if spec.plan_workers else None)
        assert (named["gunicorn"].workers is not None) == spec.plan_workers


def test_a_quota_is_drawn_below_what_a_cgroup_gets_beside_the_hog() -> None:
    from pinchpoint_lab.matrix.capacity import group_cores
    from pinchpoint_lab.matrix.spec import MARGIN

    quotas = [s for s in draw(401, 300) if s.quota is not None]
    assert quotas
    assert all(s.quota <= MARGIN * group_cores(s.hog_cores) for s in quotas)


def _of(cls: str, count: int = 20) -> list[Spec]:
    specs = [s for s in _many(count * len(CLASSES)) if s.cls == cls]
    assert len(specs) == count
    return specs


def _start(spec: Spec, knee: float) -> int:
    return next(n for n in spec.levels() if n >= knee - 1e-9)


def test_a_computing_login_fills_one_worker_or_else_the_host_cores() -> None:
    specs = _of("journey_cpu")
    for spec in specs:
        logins = [step for step in spec.journey if step.name == "login"]
        assert len(logins) == 1 and 15 <= logins[0].cpu_ms <= 40 and logins[0].wait_ms == 0
        app_cpu = sum(step.cpu_ms for step in spec.journey)
        walk_cpu = app_cpu + len(spec.journey) * 1.0
        walk_ms = sum(step.cpu_ms + step.wait_ms + 1.5 for step in spec.journey)
        if spec.slots == 1:
            assert spec.server in ("gunicorn-sync", "uwsgi-processes")
            assert spec.truth == Truth(spec.server_name, "worker_pool", 1, "journey/login")
            # The hog takes the core the worker's login computes on.
            noisy = spec.expected(noisy=True)
            assert (noisy.resource, noisy.refusal_ok) == ("cpu", spec.hog_cores > 1)
            continue
        host = 2 / walk_cpu
        assert spec.workers >= 3
        assert host <= 0.67 * min(spec.slots / walk_ms, spec.workers / app_cpu)
        knee = host * walk_ms
        assert spec.truth == Truth(spec.server_name, "cpu", _start(spec, knee), "journey/login")
    assert {s.slots == 1 for s in specs} == {True, False}


def test_a_blocked_event_loop_fills_once_the_users_outnumber_the_loops() -> None:
    specs = _of("async_blocking")
    assert {s.workers for s in specs} == {1, 2, 3}
    for spec in specs:
        assert (spec.server, spec.block, spec.server_name) == ("uvicorn", True, "uvicorn")
        assert 5 <= spec.wait_ms <= 20 and 0.1 <= spec.cpu_ms <= 0.5
        assert spec.truth == Truth("uvicorn", "event_loop", _start(spec, spec.workers + 1))
        rps = spec.workers / (spec.cpu_ms + spec.wait_ms + 1.5)
        assert rps * (spec.cpu_ms + 1.0) <= 0.5 * (2 - spec.hog_cores)  # light beside the hog
        assert spec.expected(noisy=True) == spec.truth


def test_computing_event_loops_as_many_as_the_cores_fill_the_host() -> None:
    specs = _of("asgi_cpu")
    assert {s.workers for s in specs} == {2, 3}
    for spec in specs:
        assert spec.wait_ms == 0 and 3 <= spec.cpu_ms <= 10 and not spec.block
        knee = 2 / (spec.cpu_ms + 1.0) * (spec.cpu_ms + 1.5)
        assert spec.truth == Truth("uvicorn", "cpu", _start(spec, knee))
        noisy = spec.expected(noisy=True)
        assert (noisy.component, noisy.resource) == ("uvicorn", "cpu")
        assert noisy.refusal_ok == (spec.hog_cores > 1)
        # A one-core hog leaves the loops as many cores as they had: the same start.
        if spec.hog_cores == 1.0:
            assert noisy.starts_at_users == spec.truth.starts_at_users


def test_an_async_app_queues_for_its_callees_few_workers() -> None:
    specs = _of("async_callee_pool")
    assert {s.callee.workers for s in specs if s.callee} == {1, 2}
    for spec in specs:
        callee = spec.callee
        assert callee is not None and callee.name in CALLEE_NAMES
        assert 10 <= callee.wait_ms <= 20 and spec.server == "uvicorn" and not spec.block
        call = callee.wait_ms + ASYNC_CALL_MS
        knee = callee.workers * (call + spec.cpu_ms + 1.5) / call
        assert spec.truth == Truth(callee.name, "worker_pool", _start(spec, knee))
        cores = callee.workers / call * ASYNC_CALL_CPU_MS
        assert cores <= 0.5  # light in the core a one-core hog leaves
        refused = spec.hog_cores > 1 and cores > 0.5 * (2 - spec.hog_cores)
        assert spec.expected(noisy=True) == replace(spec.truth, refusal_ok=refused)


def test_an_async_app_plan_calls_its_callee_and_names_its_pool_when_planned(
    tmp_path: Path,
) -> None:
    specs = _of("async_callee_pool")
    assert {s.plan_workers for s in specs} == {True, False}
    front = [
        {"name": "nginx", "role": "proxy", "calls": ["uvicorn"]},
        {"name": "uvicorn", "role": "app_server", "calls": [], "process": {"pids": [1]}},
    ]
    for spec in specs[:8]:
        assert spec.callee is not None
        callee = SyncCallee(tmp_path / spec.name, spec.callee.workers, spec.server_config)
        components = asgi_components(spec, front, callee)
        plan = parse_plan(Scenario("http://127.0.0.1:8080", components, asgi_path(spec)).plan())
        named = {c.name: c for c in plan.component}
        assert named["uvicorn"].calls == [spec.callee.name]
        planned = named[spec.callee.name]
        assert planned.workers == (spec.callee.workers if spec.plan_workers else None)
        assert planned.log is not None and planned.process is not None
        assert plan.request[0].path == f"/work?cpu={spec.cpu_ms:.2f}&wait=0.00&block=0&call=1"
    blocking = _of("async_blocking")[0]
    assert asgi_path(blocking).endswith("&block=1&call=0")
    assert asgi_components(blocking, front, None) == front


def test_php_fpm_and_tomcat_pools_fill_once_the_users_outnumber_their_slots() -> None:
    for cls, server in (("php_fpm_pool", "php-fpm"), ("tomcat_threads", "tomcat")):
        specs = _of(cls)
        assert {s.workers for s in specs} >= {1, 2}
        for spec in specs:
            assert (spec.server, spec.server_name, spec.front) == (server, server, "nginx")
            assert 1 <= spec.slots <= 4 and 8 <= spec.wait_ms <= 20 and spec.cpu_ms == 0
            assert spec.truth == Truth(server, "worker_pool", _start(spec, spec.slots))
            rps = spec.slots / (spec.wait_ms + 1.5)
            assert rps * (0.5 + 1.0) <= 0.5 * (2 - spec.hog_cores)  # light beside the hog
            assert spec.expected(noisy=True) == spec.truth


def test_one_node_process_is_a_core_when_it_computes_and_a_held_loop_when_it_blocks() -> None:
    specs = _of("node_loop")
    assert {s.block for s in specs} == {True, False}
    for spec in specs:
        assert (spec.server, spec.workers, spec.front) == ("node", 1, "nginx")
        if spec.block:
            assert spec.cpu_ms == 0 and 5 <= spec.wait_ms <= 20
            assert spec.truth == Truth("node", "event_loop", _start(spec, 2))
            assert 1 / (spec.wait_ms + 1.5) * 1.0 <= 0.5 * (2 - spec.hog_cores)
            assert spec.expected(noisy=True) == spec.truth
            continue
        assert spec.wait_ms == 0 and 3 <= spec.cpu_ms <= 8
        loop, host = 1 / spec.cpu_ms, 2 / (spec.cpu_ms + 1.0)
        assert loop <= 0.67 * host  # the loop's one core fills before the host's two
        knee = loop * (spec.cpu_ms + 1.5)
        assert 1 < knee < 2 and spec.truth == Truth("node", "cpu", _start(spec, knee))
        noisy = spec.expected(noisy=True)
        assert (noisy.component, noisy.resource) == ("node", "cpu")
        assert noisy.refusal_ok == (spec.hog_cores > 1)


def test_a_mariadb_hot_row_passes_one_transaction_at_a_time_before_the_pool() -> None:
    specs = _of("mariadb_lock")
    for spec in specs:
        assert spec.database == "mariadb" and spec.hold_ms is not None
        assert 5 <= spec.hold_ms <= 15 and spec.server in ("gunicorn-sync", "gunicorn-gthread")
        lock = 1 / spec.hold_ms
        assert lock <= 0.67 * spec.slots / (spec.hold_ms + 3 + 1.5)
        knee = lock * (spec.hold_ms + 3 + 1.5)
        assert spec.truth == Truth("mariadb", "db_lock", _start(spec, knee))
    assert {s.hold_ms for s in specs} - set(range(3, 5))  # holds past db_lock's 3-10
    assert all(s.database == "postgres" for s in _of("db_lock"))


def test_redis_s_one_core_fills_before_the_workers_and_the_host() -> None:
    specs = _of("redis_core")
    for spec in specs:
        assert spec.redis_ms is not None and 3 <= spec.redis_ms <= 8
        assert spec.server == "gunicorn-sync" and 3 <= spec.workers <= 8
        request = spec.redis_ms + REDIS_CALL_MS
        redis = 1 / spec.redis_ms
        assert redis <= 0.67 * spec.workers / request
        assert redis <= 0.67 * 2 / (spec.redis_ms + REDIS_CALL_CPU_MS)
        assert spec.truth == Truth("redis", "cpu", _start(spec, redis * request))
        noisy = spec.expected(noisy=True)
        assert (noisy.component, noisy.resource, noisy.refusal_ok) == (
            "redis",
            "cpu",
            spec.hog_cores > 1,
        )


def test_the_new_classes_come_after_the_old_so_a_seed_keeps_its_first_twenty_draws() -> None:
    assert CLASSES[20:] == (
        "php_fpm_pool", "tomcat_threads", "node_loop", "mariadb_lock", "redis_core",
    )  # fmt: skip
    assert [s.cls for s in draw(7, 20)] == list(CLASSES[:20])


def test_a_plan_of_another_server_names_its_log_and_its_pool_when_planned(
    tmp_path: Path,
) -> None:
    formats = {"php-fpm": "php-fpm", "tomcat": "tomcat", "node": "morgan"}
    for cls in ("php_fpm_pool", "tomcat_threads", "node_loop"):
        for spec in _of(cls)[:6]:
            stack = STACKS[spec.server](tmp_path / spec.name, spec.slots)
            scenario = Scenario(
                stack.url,
                as_planned(spec, stack.components()),
                stack.path(spec.cpu_ms, spec.wait_ms, spec.block),
            )
            plan = parse_plan(scenario.plan())
            named = {c.name: c for c in plan.component}
            assert named["nginx"].calls == [spec.server]
            server = named[spec.server]
            assert server.log is not None and server.log.format == formats[spec.server]
            pool = spec.slots if spec.plan_workers and spec.server != "node" else None
            assert server.workers == pool
