"""How the runner connects to a Ray cluster. A Ray Client server that fails to start a
driver's server process once cannot be made to fail on demand, so the cluster here is a
stand-in that refuses the first N connections the way Ray Client does."""

from __future__ import annotations

import pytest

from pinchpoint.load.distributed import runner
from pinchpoint.plan.errors import PlanError

REFUSAL = (
    "Initialization failure from server:\nRuntimeError: Starting Ray client server failed. "
    "See ray_client_server_23000.err for detailed logs."
)


class _Refusing:
    """Refuses `refusals` connections with `error`, then accepts."""

    def __init__(self, refusals: int, error: Exception) -> None:
        self.refusals = refusals
        self.error = error
        self.inits = 0
        self.shutdowns = 0

    def init(self, **_: object) -> None:
        self.inits += 1
        if self.inits <= self.refusals:
            raise self.error

    def shutdown(self) -> None:
        self.shutdowns += 1


@pytest.fixture(autouse=True)
def _no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "CONNECT_PAUSE_S", 0.0)


def test_a_client_server_that_fails_to_start_once_is_tried_again() -> None:
    ray = _Refusing(1, ConnectionAbortedError(REFUSAL))
    runner._connect(ray, "ray://127.0.0.1:10001")
    assert ray.inits == 2 and ray.shutdowns == 1


def test_a_client_server_that_keeps_failing_is_an_error_saying_how_often() -> None:
    ray = _Refusing(runner.CONNECT_TRIES, ConnectionAbortedError(REFUSAL))
    with pytest.raises(
        PlanError, match=r"(?s)ray://127\.0\.0\.1:10001 \(tried 3 times\).*23000\.err"
    ):
        runner._connect(ray, "ray://127.0.0.1:10001")
    assert ray.inits == runner.CONNECT_TRIES


def test_no_cluster_at_all_is_said_at_once() -> None:
    ray = _Refusing(9, ConnectionError("Could not find any running Ray instance."))
    with pytest.raises(PlanError, match="cannot reach the Ray cluster at auto: Could not find"):
        runner._connect(ray, "auto")
    assert ray.inits == 1


def test_an_address_that_refuses_outright_is_not_tried_again() -> None:
    ray = _Refusing(9, ConnectionError("ray client connection timeout"))
    with pytest.raises(PlanError, match=r"ray://10\.0\.0\.9:10001: ray client"):
        runner._connect(ray, "ray://10.0.0.9:10001")
    assert ray.inits == 1
