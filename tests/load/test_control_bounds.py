"""The bounds a change of load is held to, from the plan (load/control.py): an open-loop
run's rate above 0 and at most its largest phase rate (a ramp's higher end), users only of
a closed-loop run, and nothing handed on before the load starts."""

from __future__ import annotations

import pytest

from pinchpoint.load.control import ControlError, LiveControl
from pinchpoint.plan.model import parse_plan

TARGET = '[target]\nurl = "http://127.0.0.1:9"\n\n[[request]]\npath = "/"\n\n'
OPEN = TARGET + (
    '[[load.phase]]\nduration = "10s"\narrival_rate = 20\nramp_to = 300\n\n'
    '[[load.phase]]\nduration = "10s"\narrival_count = 500\n'
)
CLOSED = TARGET + '[load]\nusers = 4\nduration = "10s"\n'


def test_an_open_loop_rate_is_bounded_by_the_plan_s_largest_phase_rate() -> None:
    control = LiveControl(parse_plan(OPEN, "plan.toml"))
    assert control.about() == {
        "available": True, "why": None, "kind": "rate", "max_users": 0, "max_rate": 300.0,
    }  # fmt: skip
    for rate in (0.0, -1.0, 300.5, float("nan"), float("inf")):
        with pytest.raises(ControlError, match="the plan's largest phase rate") as refused:
            control.ask_rate(rate, "terminal")
        assert refused.value.status == 400
    with pytest.raises(ControlError, match="this run's load is changed by its rate"):
        control.ask(3, "terminal")
    # Within bounds, but no load going yet: nothing to change.
    with pytest.raises(ControlError, match="the load has not started") as early:
        control.ask_rate(300, "page")
    assert early.value.status == 409


def test_a_closed_loop_run_takes_no_rate() -> None:
    control = LiveControl(parse_plan(CLOSED, "plan.toml"))
    assert (control.about()["kind"], control.about()["max_users"]) == ("users", 4)
    with pytest.raises(ControlError, match="rate: this run's load is changed by its users"):
        control.ask_rate(10, "terminal")
