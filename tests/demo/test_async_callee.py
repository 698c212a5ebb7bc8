"""The matrix's async callee, started for real on 127.0.0.1: nginx → uvicorn's loop, which
awaits for each request a call to gunicorn's sync workers (SyncCallee). The loop holds
every call at once while the callee's workers pass them as they can, each in its log
with the run's tag passed on; a callee gone answers 502."""

from __future__ import annotations

import urllib.error
from pathlib import Path

import pytest
from stack_helpers import concurrently, fetch, records, tagged

from pinchpoint.demo import NginxNotFound, find_nginx
from pinchpoint.logformats.gunicorn import GUNICORN_FORMAT
from pinchpoint_lab.env import ASGI_CALL_ENV
from pinchpoint_lab.matrix.build import running
from pinchpoint_lab.matrix.spec import Callee, Spec
from pinchpoint_lab.sync_callee import SyncCallee
from pinchpoint_lab.uvicorn_stack import UvicornStack

try:
    find_nginx()
except NginxNotFound as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

WAIT_MS = 300.0


def _call_durations_ms(log: Path) -> list[float]:
    """Each logged call's time (gunicorn's %D, in µs, last on the line), in ms; not the
    stack's readiness checks."""
    lines = log.read_text().splitlines()
    return [int(line.split()[-1]) / 1000 for line in lines if "/sys_perf_check" in line]


@pytest.mark.timeout(90)
def test_one_loop_awaits_four_calls_at_once_and_two_callee_workers_pass_them(
    tmp_path: Path,
) -> None:
    spec = Spec("async", "async_callee_pool", "uvicorn", "nginx", 1, 1, 0.1, 0.0,
                callee=Callee("pricing", 2, WAIT_MS), users=(1, 4, 1))  # fmt: skip
    with running(spec, tmp_path) as scenario:
        took, statuses = concurrently(scenario.url, [tagged(scenario.path, r) for r in range(4)])
        named = {c["name"]: c for c in scenario.components}
    assert statuses == [200] * 4
    # Two at a time in the callee: two rounds of 300 ms, not four (a blocked loop's).
    assert 0.6 <= took < 1.0
    assert named["uvicorn"]["calls"] == ["pricing"]
    pricing = named["pricing"]
    assert (pricing["workers"], pricing["log"]["log_format"]) == (2, GUNICORN_FORMAT)
    durations = _call_durations_ms(Path(pricing["log"]["path"]))
    assert len(durations) == 4 and all(WAIT_MS <= d < WAIT_MS + 100 for d in durations)
    # The run's tag passed on: each call is matched to the request that made it.
    assert sorted(row.req_id for row in records(pricing)) == [0, 1, 2, 3]


@pytest.mark.timeout(90)
def test_a_call_to_a_callee_gone_answers_502_and_the_loop_serves_on(tmp_path: Path) -> None:
    callee = SyncCallee(tmp_path / "stock", workers=1)
    with callee:
        env = {ASGI_CALL_ENV: callee.url + "/sys_perf_check?wait=1"}
        with UvicornStack(tmp_path / "app", 1, app_env=env) as stack:
            assert fetch(stack.url + "/work?call=1")[0] == 200
            callee.stop()
            with pytest.raises(urllib.error.HTTPError) as gone:
                fetch(stack.url + "/work?call=1")
            assert gone.value.code == 502
            assert fetch(stack.url + "/work?cpu=1")[0] == 200
