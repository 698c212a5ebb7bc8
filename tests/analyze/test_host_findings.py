"""A busy disk, memory pressure and a full network link, each on steps where it must fire
and where it must not; and the ranking of several findings with their confidence."""

from __future__ import annotations

import pytest
from test_findings import CTX, DB_CTX, db_steps, step

from pinchpoint.analyze.causes.disk import disk
from pinchpoint.analyze.causes.link import bandwidth
from pinchpoint.analyze.causes.memory import memory
from pinchpoint.analyze.verdict import decide


def growing(host: dict[str, tuple[float, ...]]) -> list[dict]:
    """The app's time grows from 10 to 54 ms over 1 → 7 users while the host gauges go
    through the given values."""
    steps = [step(1, 16.0), step(3, 20.0, app=14.0), step(5, 35.0, app=29.0)]
    steps.append(step(7, 60.0, app=54.0))
    for i, s in enumerate(steps):
        s["resources"]["host"].update({key: values[i] for key, values in host.items()})
    return steps


def test_a_disk_busy_as_the_app_slows_is_the_disk() -> None:
    steps = growing({"disk_util": (0.05, 0.3, 0.85, 0.97)})
    steps[-1]["resources"]["gunicorn"]["disk_write_bytes_s"] = 42e6
    v = decide(steps, CTX)
    b = v["bottleneck"]
    # The disk is used by gunicorn's processes, where the app runs.
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("gunicorn", "disk", 5)
    assert v["headline"] == "Bottleneck: disk I/O, seen in app's time from 5 users"
    assert "the disk was busy 97% of the time at 7 users (5% at 1 user)" in b["evidence"]
    assert "gunicorn's processes wrote 42.0 MB/s and read 0.0 MB/s at 7 users" in b["evidence"]


def test_tasks_stalled_on_io_are_the_disk_even_without_a_device_gauge() -> None:
    b = decide(growing({"io_pressure": (0.0, 0.1, 0.4, 0.6)}), CTX)["bottleneck"]
    assert (b["resource"], b["starts_at_users"]) == ("disk", 5)


@pytest.mark.parametrize(
    "gauges",
    [
        {"disk_util": (0.9, 0.92, 0.95, 0.97)},  # busy before the load came
        {"disk_util": (0.05, 0.2, 0.4, 0.6)},  # rising, never saturated
        {"io_pressure": (0.0, 0.05, 0.1, 0.2)},
        {},
    ],
)
def test_a_disk_that_did_not_fill_up_with_the_load_is_not_the_finding(gauges: dict) -> None:
    assert disk("app", growing(gauges), CTX) is None


def test_memory_stalls_as_the_app_slows_are_memory_pressure() -> None:
    steps = growing({"memory_pressure": (0.0, 0.02, 0.15, 0.3)})
    steps[-1]["resources"]["gunicorn"].update(rss_bytes=900 * 2**20, memory_limit_bytes=2**30)
    b = decide(steps, CTX)["bottleneck"]
    assert (b["resource"], b["starts_at_users"]) == ("memory", 5)
    assert (
        "gunicorn's processes held 900 MiB of a 1024 MiB cgroup limit at 7 users" in (b["evidence"])
    )
    assert memory("app", growing({"memory_pressure": (0.0, 0.0, 0.02, 0.05)}), CTX) is None


def test_a_link_near_its_speed_is_the_bandwidth() -> None:
    steps = growing({"net_util": (0.1, 0.4, 0.9, 0.99), "net_tx_bytes_s": (0, 0, 0, 123.5e6)})
    b = decide(steps, CTX)["bottleneck"]
    assert (b["resource"], b["starts_at_users"]) == ("bandwidth", 5)
    assert "the host sent 988 Mbit/s and received 0 Mbit/s at 7 users" in b["evidence"]
    assert bandwidth("app", growing({"net_util": (0.1, 0.3, 0.5, 0.7)}), CTX) is None


def test_the_bottleneck_leads_the_findings_and_others_follow_by_confidence() -> None:
    # The database's time grows most, with lock waits; the app's own time grows by a third
    # as much, with no saturated resource behind it.
    steps = db_steps()
    for s, extra in zip(steps, (0.0, 3.0, 6.0, 10.0), strict=True):
        s["tiers"]["app"]["self_p50_ms"] = 7.0 + extra
        s["latency_ms"]["p50"] += extra
    v = decide(steps, DB_CTX)
    first, second = v["findings"]
    assert (first["component"], first["resource"]) == ("postgres", "db_lock")
    assert first["confidence"] == v["bottleneck"]["confidence"]
    assert (second["component"], second["resource"]) == ("app", "time")
    # Half the growth share explained, half the strength of the resource evidence.
    assert first["confidence"] == pytest.approx(0.5 * 28.6 / 38.6 + 0.5, abs=0.01)
    assert second["confidence"] == pytest.approx(0.5 * 10 / 38.6 + 0.15, abs=0.01)
    assert first["confidence"] > second["confidence"]


def test_tiers_that_barely_grew_are_not_findings() -> None:
    v = decide(growing({}), CTX)
    assert [(f["component"], f["resource"]) for f in v["findings"]] == [("app", "time")]
    flat = [step(1, 16.0), step(7, 16.2)]
    assert decide(flat, CTX)["findings"] == []


def _shaped(carried: float, received: float) -> list[dict]:
    steps = growing({"net_util": (0.1, 0.4, 0.9, 0.99), "net_link_bytes_s": (1, 2, 3, carried)})
    for s in steps:
        s["resources"]["host"]["net_link"] = "pinchpoint-ab/ppabn"
        s["resources"]["host"]["net_link_limit_bytes_s"] = 250_000.0
        s["bytes_per_s"] = received
    return steps


def test_a_shaped_link_carrying_the_runs_bytes_is_the_network_path() -> None:
    b = decide(_shaped(carried=245_000.0, received=240_000.0), CTX)["bottleneck"]
    assert (b["component"], b["resource"]) == ("network", "bandwidth")
    assert "pinchpoint-ab/ppabn" in b["summary"]
    assert any("2.0 Mbit/s against a ceiling of 2.0 Mbit/s" in e for e in b["evidence"])


def test_a_full_link_carrying_another_runs_bytes_is_not_this_runs_limit() -> None:
    assert bandwidth("app", _shaped(carried=245_000.0, received=2_000.0), CTX) is None


def test_a_disk_filled_by_another_process_is_not_the_tiers_limit() -> None:
    steps = growing(
        {"disk_util": (0.05, 0.3, 0.85, 0.97), "disk_write_bytes_s": (0, 0, 150e6, 155e6)}
    )
    steps[-1]["resources"]["gunicorn"]["disk_write_bytes_s"] = 30e3
    assert disk("app", steps, CTX) is None
    steps[-1]["resources"]["gunicorn"]["disk_write_bytes_s"] = 120e6
    assert disk("app", steps, CTX) is not None


def test_writes_held_at_the_cgroups_limit_are_the_disk_of_the_tiers_process() -> None:
    steps = growing({})
    for s, written in zip(steps, (1e6, 3e6, 4.9e6, 5.0e6), strict=True):
        s["resources"]["gunicorn"].update(disk_write_bytes_s=written, disk_write_limit_bytes_s=5e6)
    b = decide(steps, CTX)["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("gunicorn", "disk", 5)
    assert "may write 5.0 MB/s" in b["evidence"][-1]
    for s in steps:
        s["resources"]["gunicorn"]["disk_write_bytes_s"] = 1e6  # far below its limit
    assert disk("app", steps, CTX) is None


def _flat_bytes(size: float) -> list[dict]:
    """Throughput stops at 25 req/s from 3 users while nothing saturates; responses of
    `size` bytes."""
    steps = [step(1, 40.0, app=1.0, throughput=25.0 / 2), step(3, 60.0, app=1.0, throughput=25.0)]
    steps += [step(5, 200.0, app=1.0, throughput=25.3), step(7, 280.0, app=1.0, throughput=24.8)]
    for s in steps:
        s["bytes_per_s"] = s["throughput_rps"] * size
        s["tiers"]["gunicorn"]["self_p50_ms"] = s["latency_ms"]["p50"] - 2
    return steps


def test_bytes_stopping_at_a_ceiling_with_nothing_saturated_is_an_inferred_network_path() -> None:
    b = decide(_flat_bytes(96 * 1024), CTX)["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("network", "bandwidth", 3)
    assert "19.7 Mbit/s" in b["summary"] or "19.6 Mbit/s" in b["summary"]


def test_small_responses_at_a_ceiling_are_no_network_path() -> None:
    assert decide(_flat_bytes(512), CTX)["bottleneck"]["resource"] == "time"


def _full_from_the_start(carried: float, received: float) -> list[dict]:
    steps = _shaped(carried, received)
    for s, util in zip(steps, (0.86, 0.95, 0.96, 0.96), strict=True):
        s["resources"]["host"]["net_util"] = util
        s["resources"]["host"]["net_link_bytes_s"] = carried
    return steps


def test_a_link_full_from_the_lightest_step_with_the_runs_bytes_is_the_network_path() -> None:
    b = decide(_full_from_the_start(carried=245_000.0, received=240_000.0), CTX)["bottleneck"]
    assert (b["component"], b["resource"], b["starts_at_users"]) == ("network", "bandwidth", 1)


def test_a_link_full_from_the_start_with_others_bytes_is_not_the_network_path() -> None:
    assert bandwidth("app", _full_from_the_start(carried=245_000.0, received=2_000.0), CTX) is None
    steps = _full_from_the_start(carried=245_000.0, received=240_000.0)
    for s in steps:
        del s["resources"]["host"]["net_link_bytes_s"]  # whose bytes: unknown
    assert bandwidth("app", steps, CTX) is None
