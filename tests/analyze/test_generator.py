"""The generator and its host: saturated, starved of CPU, or sharing the host with a busy
neighbour; each on steps where it must fire and where it must not."""

from __future__ import annotations

from dataclasses import replace

from test_findings import CTX as FINDINGS_CTX
from test_findings import step as finding_step
from test_verdict_rules import CTX, pool_steps

from pinchpoint.analyze.causes.generator import generator_check, generator_limits
from pinchpoint.analyze.causes.neighbours import neighbour_finding
from pinchpoint.analyze.verdict import decide


def _set(steps: list[dict], who: str, **values: float) -> list[dict]:
    for s in steps:
        s["resources"].setdefault(who, {}).update(values)
        s.setdefault("requests", int(s["throughput_rps"] * 2))
        s.setdefault("duration_s", 2.0)
    return steps


def test_a_generator_waiting_for_a_core_for_a_good_share_of_each_request_is_named() -> None:
    # ~50 µs requests; the generator waits 0.6 cores' worth for a core: 40 µs a request.
    steps = _set(pool_steps(), "generator", cpu_cores=0.3, cpu_wait_cores=0.6)
    for s in steps:
        s["latency_ms"]["p50"] = 0.05
        s["tiers"]["nginx"]["p50_ms"] = 0.03  # nginx saw 60% of it: 40% is outside
        s["throughput_rps"] = 15_000.0
        s["requests"] = 30_000
    check = generator_check(steps, CTX)
    assert check["starved"] is True
    v = decide(steps, CTX)
    assert (v["bottleneck"]["component"], v["bottleneck"]["resource"]) == ("generator", "cpu")
    assert "waited for a CPU" in v["headline"]


def test_a_generator_waiting_little_per_request_is_not_named() -> None:
    # The same wait share, but 0.3 ms a request against 10-40 ms latencies.
    steps = _set(pool_steps(), "generator", cpu_cores=0.05, cpu_wait_cores=0.2)
    check = generator_check(steps, CTX)
    assert check["cpu_wait_share_max"] == 0.8
    assert check["starved"] is False
    assert decide(steps, CTX)["bottleneck"]["resource"] == "worker_pool"


def test_a_generator_whose_waits_are_not_in_the_time_no_tier_saw_is_not_named() -> None:
    # Its process's threads waited 0.6 cores' worth beside neighbours at low priority, 0.6
    # of a request's time at 1 user if the requests bore it; nginx saw all but 0.2 ms of
    # each request, so they did not. A run of the suite beside its idle-priority lane
    # named the generator so, where nginx's limit refused the requests.
    steps = _set(pool_steps(), "generator", cpu_cores=0.05, cpu_wait_cores=0.6)
    assert generator_check(steps, CTX)["cpu_wait_share_max"] > 0.9
    assert generator_check(steps, CTX)["starved"] is False
    assert decide(steps, CTX)["bottleneck"]["resource"] == "worker_pool"
    for s in steps:
        del s["tiers"]["nginx"]["p50_ms"]  # no tier's time to hold the wait against
    assert generator_check(steps, CTX)["starved"] is True


def test_a_host_saturated_with_a_quarter_of_it_the_generators_is_the_generators_host() -> None:
    steps = _set(pool_steps(), "generator", cpu_cores=0.9)
    for s in steps:
        s["resources"]["host"]["cpu_cores"] = 1.95
    assert generator_check(steps, CTX)["host_saturated"] is True
    assert decide(steps, CTX)["bottleneck"]["component"] == "generator"
    for s in steps:
        s["resources"]["generator"]["cpu_cores"] = 0.1  # the stack's own CPU saturates it
    assert generator_check(steps, CTX)["host_saturated"] is False


def test_a_neighbour_taking_a_core_is_a_finding_beside_the_stacks_own_limit() -> None:
    steps = pool_steps()
    for s in steps:
        s["resources"]["host"]["cpu_cores"] = 1.95  # gunicorn 0.4, generator 0.05: 1.5 others
    found = neighbour_finding(steps, CTX)
    assert found is not None and found.component == "neighbours"
    assert "1.50 of 2 cores" in found.evidence[0]
    v = decide(steps, CTX)
    # The pool's workers wait rather than compute: still the pool, with the neighbour after.
    assert v["bottleneck"]["resource"] == "worker_pool"
    assert [f["component"] for f in v["findings"]] == ["gunicorn", "neighbours"]


def test_a_quiet_host_has_no_neighbour_finding() -> None:
    assert neighbour_finding(pool_steps(), CTX) is None


def test_a_starved_generator_whose_latency_no_tier_saw_is_named() -> None:
    # Requests nginx answers in a few µs; the client waits ten times longer, outside it.
    steps = _set(pool_steps(), "generator", cpu_cores=0.25, cpu_wait_cores=0.5)
    for s in steps:
        s["latency_ms"]["p50"] = 0.4
        s["tiers"]["nginx"]["p50_ms"] = 0.02
        s["throughput_rps"] = 12_000.0
        s["requests"] = 24_000
    assert generator_check(steps, CTX)["starved"] is True
    for s in steps:
        s["tiers"]["nginx"]["p50_ms"] = 0.38  # the tiers saw the time: not the generator's
    assert generator_check(steps, CTX)["starved"] is False


def test_a_generator_whose_threads_ran_or_waited_for_a_core_all_the_time_is_saturated() -> None:
    # Two threads on a host nginx shares: 1.0 core used, 0.85 waited for. The host's busy
    # share is read a little low (1.7 of 2), so only the threads' demand shows the limit.
    steps = _set(pool_steps(), "generator", cpu_cores=1.0, cpu_wait_cores=0.85)
    for s in steps:
        s["resources"]["host"]["cpu_cores"] = 1.6
    ctx = replace(CTX, generator_threads=2)
    check = generator_check(steps, ctx)
    assert (check["saturated"], check["cpu_cores_max"], check["cpu_wanted_max"]) == (
        True,
        1.0,
        1.85,
    )
    v = decide(steps, ctx)
    assert v["bottleneck"]["component"] == "generator"
    assert "its 2 threads wanted 1.85 cores" in v["headline"]
    for s in steps:
        s["resources"]["generator"]["cpu_wait_cores"] = 0.2  # it waited for answers instead
    assert generator_check(steps, ctx)["saturated"] is False


def _refused_steps(failed_ms: float = 0.3, errors: tuple[int, ...] = (0, 20_000, 40_000)) -> list:
    """nginx's connection limit from 1 user to 14: past the first step nearly every request
    is a 503 nginx answers itself at once, and the generator fills its 2 threads sending
    them on a host they saturate."""
    steps = [finding_step(1, 10.5), finding_step(7, 12.0, throughput=95), finding_step(14, 12.5, throughput=96)]  # fmt: skip
    for s, failed in zip(steps, errors, strict=True):
        answered = int(s["throughput_rps"] * 2)
        s.update(requests=answered + failed, errors=failed, error_rate=failed / (answered + failed))
        s["errors_by_class"] = {"503": failed} if failed else {}
        s["error_latency_p50_ms"] = failed_ms if failed else None
        s["tiers"]["nginx"].update(errors=failed, rejected=failed)
        s["tiers"]["gunicorn"]["concurrency"] = 1.0
        busy = failed > 0
        s["resources"]["generator"]["cpu_cores"] = 1.9 if busy else 0.1
        s["resources"]["host"]["cpu_cores"] = 1.98 if busy else 0.5
    return steps


def test_a_generator_saturated_by_fast_refusals_leaves_the_refusals_to_be_named() -> None:
    steps = _refused_steps()
    assert steps[-1]["error_rate"] > 0.995
    check = generator_check(steps, FINDINGS_CTX)
    assert (check["saturated"], check["host_saturated"], check["refusals"]) == (True, True, True)
    assert generator_limits(check) is False
    v = decide(steps, FINDINGS_CTX)
    b = v["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("nginx", "proxy_limit", 7)
    assert "could not keep up" not in v["headline"]


def test_a_generator_saturated_by_slow_failures_or_by_answers_is_still_named() -> None:
    # 503s that took as long as an answer: the generator waited for them, as for answers.
    slow = _refused_steps(failed_ms=12.0)
    assert generator_check(slow, FINDINGS_CTX)["refusals"] is False
    assert decide(slow, FINDINGS_CTX)["bottleneck"]["component"] == "generator"
    # A third of the requests refused at once: most of its work was answers.
    some = _refused_steps(errors=(0, 95, 96))
    assert generator_check(some, FINDINGS_CTX)["refusals"] is False
    assert decide(some, FINDINGS_CTX)["bottleneck"]["component"] == "generator"
