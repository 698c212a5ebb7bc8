"""A fixed, seeded subset of the scenario matrix, started for real: one scenario of every
class on a quiet host, and the classes a CPU neighbour could confuse with one beside it
(a hog of the size the scenario draws; where it may leave the host too busy for any
verdict, a verdict that refuses passes). The full matrix and its accuracy are
bench/diagnosis_matrix.py's."""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnosis_helpers import check_schema, need_nginx, need_program, need_root

from pinchpoint_lab.matrix.draws import draw
from pinchpoint_lab.matrix.run import run_one
from pinchpoint_lab.matrix.spec import CLASSES, Spec

SEED = 7
STEP_S = 1.25
# The neighbour changes the answer for these, or must not: a CPU hog on one core.
NOISY = ("pool_wait", "pool_cpu", "host_cpu", "cpu_quota")
# Stacks that wait (a sleeping pool, a row lock, a proxy's limit or queue, a journey's
# serialized step, a shaped link) or stay light rather than compute: their quiet runs go
# with the timed tests, beside the parallel ones at low priority; the rest load the host's
# cores and run alone.
WAITING = ("pool_wait", "db_lock", "proxy_limit", "proxy_queue", "journey", "healthy", "bandwidth")
# Each real draw costs the serial lane about 15 s: these shapes are run by the bench alone
# (bench/diagnosis_matrix.py --only ...), and by their own tests in test_event_loops.py;
# the servers other than Python's (PHP-FPM, Tomcat, Node.js, MariaDB, Redis) by the bench.
BENCH_ONLY = (
    "journey_cpu", "async_blocking", "asgi_cpu", "async_callee_pool", "php_fpm_pool",
    "tomcat_threads", "node_loop", "mariadb_lock", "redis_core",
)  # fmt: skip


def _lane(cls: str) -> pytest.MarkDecorator:
    return pytest.mark.timed if cls in WAITING else pytest.mark.serial


def _first(cls: str) -> Spec:
    return next(s for s in draw(SEED, 44) if s.cls == cls)


def _needs(spec: Spec) -> None:
    need_nginx()
    need_root("cgroups, hogs and PostgreSQL clusters")
    if spec.front == "haproxy":
        need_program("haproxy", "apt: haproxy")
    if spec.server.startswith("uwsgi"):
        need_program("uwsgi", "apt: uwsgi-core uwsgi-plugin-python3")


def _check(spec: Spec, tmp_path: Path, noisy: bool) -> None:
    _needs(spec)
    outcome, verdict = run_one(spec, tmp_path, noisy=noisy, step_s=STEP_S)
    print(f"{spec.name} {'noisy' if noisy else 'quiet'}: {outcome.headline}")
    run_dir = next((tmp_path / "runs").iterdir())
    check_schema(run_dir / "verdict.json")
    truth = spec.expected(noisy)
    if not outcome.refused:
        assert (outcome.component, outcome.resource) == (truth.component, truth.resource), (
            outcome.headline
        )
        assert outcome.request_ok, (outcome.request, truth.request)
        assert outcome.start_ok(spec.levels()), (outcome.starts_at_users, truth.starts_at_users)
    if noisy:  # without a hog the host may still have neighbours of its own
        assert outcome.neighbour_reported, [f["name"] for f in verdict["findings"]]


@pytest.mark.parametrize(
    "cls", [pytest.param(cls, marks=_lane(cls)) for cls in CLASSES if cls not in BENCH_ONLY]
)
def test_matrix_scenario_verdict_is_its_truth(cls: str, tmp_path: Path) -> None:
    _check(_first(cls), tmp_path, noisy=False)


@pytest.mark.serial
@pytest.mark.parametrize("cls", NOISY)
def test_matrix_scenario_verdict_holds_beside_a_cpu_neighbour(cls: str, tmp_path: Path) -> None:
    _check(_first(cls), tmp_path, noisy=True)
