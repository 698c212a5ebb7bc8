"""Load models of the plan: closed loop (steps, users, stages, think time distributions)
and open loop (Artillery phases, steps of rate); the examples in examples/ parse into
the right phases; bad models are refused naming file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinchpoint.load.engine_config import engine_config
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import load_plan, parse_plan

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

HEAD = """\
[target]
url = "http://127.0.0.1:8080"

[[request]]
path = "/"

[load]
"""


def plan_of(load: str):
    return parse_plan(HEAD + load, "plan.toml")


def shape(plan) -> list[tuple]:
    """(name, kind, seconds, from, to or count) of each open-loop phase."""
    out = []
    for p in plan.load.phase:
        if p.pause is not None:
            out.append((p.name, "pause", p.pause))
        elif p.arrival_count is not None:
            out.append((p.name, "count", p.duration, p.arrival_count))
        else:
            out.append((p.name, "rate", p.duration, p.arrival_rate, p.ramp_to))
    return out


def test_artillery_phase_table_parses_as_written() -> None:
    plan = load_plan(EXAMPLES / "artillery_phases.toml")
    assert plan.load.open
    assert shape(plan) == [
        ("Warm Up", "rate", 30, 5, None),
        ("Linear Ramp", "rate", 30, 5, 10),
        ("Pause", "pause", 10),
        ("Linear Ramp 2", "rate", 30, 10, 20),
        ("Plane", "rate", 30, 20, None),
        ("Pause 2", "pause", 15),
        ("Linear Ramp 3", "rate", 30, 20, 30),
        ("Medium Plane", "rate", 40, 30, None),
    ]
    levels = plan.load.levels()
    assert [lv.index for lv in levels] == list(range(8))
    assert {lv.kind for lv in levels} == {"rate"}
    # A ramp's level is its mean rate; a pause's is 0.
    assert [lv.level for lv in levels] == [5, 7.5, 0, 15, 20, 0, 25, 30]
    assert sum(lv.duration for lv in levels) == 215
    assert [lv.name for lv in levels][:3] == ["Warm Up", "Linear Ramp", "Pause"]
    # Requests the schedule sends: the integral of each phase's rate.
    assert sum(lv.level * lv.duration for lv in levels) == 150 + 225 + 450 + 600 + 750 + 1200


def test_artillery_arrival_count_table_parses_as_written() -> None:
    plan = load_plan(EXAMPLES / "artillery_arrival_count.toml")
    assert shape(plan) == [
        ("Warm Up", "rate", 30, 5, None),
        ("Non-linear Ramp", "count", 120, 100),
        ("Pause", "pause", 10),
        ("Ramp Up", "rate", 60, 5, 25),
        ("Sustained", "rate", 60, 25, None),
    ]
    levels = plan.load.levels()
    assert levels[1].level == pytest.approx(100 / 120)
    assert (plan.load.arrivals, plan.load.seed, plan.load.max_in_flight) == ("poisson", 7, 100)
    assert [(r.weight, r.timeout) for r in plan.request] == [(3, None), (1, 2.0)]


def test_artillery_examples_go_to_the_engine_as_phases(tmp_path: Path) -> None:
    plan = load_plan(EXAMPLES / "artillery_arrival_count.toml")
    cfg = engine_config(plan, "r1", tmp_path / "requests.arrows")
    assert cfg["steps"] == []
    assert cfg["open"]["arrivals"] == "poisson"
    assert cfg["open"]["max_in_flight"] == 100
    assert [(p["kind"], p["duration_s"]) for p in cfg["open"]["phases"]] == [
        ("rate", 30),
        ("count", 120),
        ("pause", 10),
        ("rate", 60),
        ("rate", 60),
    ]
    assert cfg["open"]["phases"][1]["count"] == 100
    assert (cfg["open"]["phases"][3]["rate"], cfg["open"]["phases"][3]["ramp_to"]) == (5, 25)
    assert cfg["seed"] == 7
    assert [(r["weight"], r["timeout_s"]) for r in cfg["requests"]] == [(3, None), (1, 2.0)]


def test_every_example_plan_loads() -> None:
    names = sorted(p.name for p in EXAMPLES.glob("*.toml"))
    assert "artillery_phases.toml" in names
    for path in EXAMPLES.glob("*.toml"):
        assert load_plan(path).load.levels(), path


def test_closed_stages_ramp_and_hold() -> None:
    plan = load_plan(EXAMPLES / "closed_stages.toml")
    assert not plan.load.open
    got = [(lv.kind, lv.level, lv.duration, lv.users, lv.ramp_from) for lv in plan.load.levels()]
    assert got == [
        ("users", 5, 30, 10, 0),
        ("users", 10, 60, 10, None),
        ("users", 30, 60, 50, 10),
        ("users", 50, 120, 50, None),
        ("users", 25, 30, 0, 50),
    ]
    assert plan.load.think_time.exponential == 0.5
    cfg = engine_config(plan, "r1", Path("x"))
    assert cfg["open"] is None
    assert cfg["steps"][0] == {"users": 10, "duration_s": 30, "ramp_from": 0}
    assert cfg["think"] == {"kind": "exponential", "value_s": 0.5, "min_s": 0.0, "max_s": 0.0}


def test_open_steps_of_rate() -> None:
    plan = load_plan(EXAMPLES / "open_rate_steps.toml")
    levels = plan.load.levels()
    assert [lv.level for lv in levels] == [100 * k for k in range(1, 11)]
    assert {(lv.kind, lv.duration) for lv in levels} == {("rate", 10)}
    cfg = engine_config(plan, "r1", Path("x"))
    assert cfg["open"]["phases"][0] == {
        "kind": "rate",
        "duration_s": 10,
        "rate": 100,
        "ramp_to": None,
        "count": 0,
    }
    assert plan.load.step_users() == []
    assert plan.request[0].timeout == 1.0


def test_fractional_rate_steps() -> None:
    plan = plan_of('loop = "open"\nlower = 0.5\nupper = 2\nstep = 0.5\nduration = "4s"')
    assert [lv.level for lv in plan.load.levels()] == [0.5, 1.0, 1.5, 2.0]


def test_users_with_think_time_distributions() -> None:
    plan = plan_of('users = 8\nduration = "30s"\nthink_time = { uniform = ["100ms", "1s"] }')
    assert [(lv.kind, lv.level, lv.users) for lv in plan.load.levels()] == [("users", 8, 8)]
    assert plan.load.think_time.uniform == (0.1, 1.0)
    cfg = engine_config(plan, "r1", Path("x"))
    assert cfg["think"] == {"kind": "uniform", "value_s": 0.0, "min_s": 0.1, "max_s": 1.0}
    assert cfg["steps"] == [{"users": 8, "duration_s": 30, "ramp_from": None}]
    constant = engine_config(plan_of('users = 1\nduration = "2s"\nthink_time = "5ms"'), "r", Path())
    assert constant["think"]["kind"] == "constant" and constant["think"]["value_s"] == 0.005


def test_the_step_plan_is_unchanged() -> None:
    plan = plan_of('lower = 2\nupper = 10\nstep = 4\nduration = "1.5s"')
    assert plan.load.step_users() == [2, 6, 10]
    assert [lv.level for lv in plan.load.levels()] == [2, 6, 10]
    assert not plan.load.open
    cfg = engine_config(plan, "r1", Path("x"))
    assert [s["users"] for s in cfg["steps"]] == [2, 6, 10]
    assert cfg["think"]["kind"] == "constant"


@pytest.mark.parametrize(
    ("load", "where"),
    [
        # A ramp with a negative rate, at the field's line.
        (
            '[[load.phase]]\nduration = "10s"\narrival_rate = 5\nramp_to = -3',
            "plan.toml:11: load.phase[0].ramp_to: Input should be greater than or equal to 0",
        ),
        (
            '[[load.phase]]\nduration = "10s"\narrival_rate = -1',
            "plan.toml:10: load.phase[0].arrival_rate: Input should be greater than or equal to 0",
        ),
        # Zero duration.
        (
            '[[load.phase]]\nduration = "0s"\narrival_rate = 5',
            "plan.toml:9: load.phase[0].duration: a phase must last more than zero seconds",
        ),
        (
            '[[load.phase]]\nduration = "1s"\narrival_rate = 5\n[[load.phase]]\npause = 0',
            "plan.toml:12: load.phase[1].pause: a pause must last more than zero seconds",
        ),
        # Unknown field.
        (
            '[[load.phase]]\nduration = "10s"\narrivalRate = 5',
            "plan.toml:10: load.phase[0].arrivalRate: Extra inputs are not permitted",
        ),
        (
            '[[load.phase]]\nduration = "10s"\narrival_rate = 5\n[[load.phase]]\npause = "5s"\nduration = "3s"',
            "plan.toml:13: load.phase[1].duration: a pause phase has only a name and its pause",
        ),
        (
            '[[load.phase]]\nduration = "2s"\nramp_to = 5',
            "plan.toml:10: load.phase[0].ramp_to: a ramp goes from arrival_rate to ramp_to",
        ),
        (
            '[[load.phase]]\nduration = "2s"\narrival_rate = 5\narrival_count = 5',
            "plan.toml:11: load.phase[0].arrival_count: set arrival_rate or arrival_count, not both",
        ),
        (
            "[[load.phase]]\narrival_rate = 5",
            "plan.toml:8: load.phase[0].duration: the phase needs a duration",
        ),
        (
            '[[load.phase]]\nname = "idle"',
            "plan.toml:8: load.phase[0]: a phase needs arrival_rate",
        ),
        (
            '[[load.phase]]\nduration = "2s"\narrival_count = -4',
            "plan.toml:10: load.phase[0].arrival_count: Input should be greater than or equal to 0",
        ),
        (
            'max_in_flight = 0\n[[load.phase]]\nduration = "2s"\narrival_rate = 5',
            "plan.toml:8: load.max_in_flight: Input should be greater than or equal to 1",
        ),
        (
            'arrivals = "bursty"\n[[load.phase]]\nduration = "2s"\narrival_rate = 5',
            "plan.toml:8: load.arrivals: Input should be 'uniform' or 'poisson'",
        ),
        (
            'lower = 2\nupper = 4\nduration = "2s"\nmax_in_flight = 5',
            "plan.toml:11: load.max_in_flight: max_in_flight is open loop only",
        ),
        (
            'think_time = "1s"\n[[load.phase]]\nduration = "2s"\narrival_rate = 5',
            "plan.toml:8: load.think_time: think time is closed loop",
        ),
        (
            'loop = "closed"\n[[load.phase]]\nduration = "2s"\narrival_rate = 5',
            "plan.toml:8: load.loop: arrival phases are open loop",
        ),
        (
            'lower = 2\nupper = 4\nduration = "2s"\n[[load.phase]]\npause = "1s"',
            "plan.toml:11: load.phase[0]: phase cannot go with lower",
        ),
        ('lower = 2.5\nupper = 4\nduration = "2s"', "plan.toml:8: load.lower: lower counts users"),
        (
            'lower = 2\nupper = 4\nduration = "2s"\nthink_time = { uniform = ["1s", "10ms"] }',
            "plan.toml:11: load.think_time.uniform: the minimum (1s) is above the maximum (0.01s)",
        ),
        (
            'users = 2\nduration = "2s"\nthink_time = { gaussian = "1s" }',
            "plan.toml:10: load.think_time.gaussian: Extra inputs are not permitted",
        ),
        ("[[load.stage]]\nusers = 3", "plan.toml:8: load.stage[0].hold: a stage needs a ramp"),
        ('[[load.stage]]\nusers = -3\nhold = "1s"', "plan.toml:9: load.stage[0].users"),
        ("users = 3", "plan.toml:8: load.users: users need a duration"),
        ('duration = "3s"', "plan.toml:7: load: set lower, upper and duration"),
        (
            '[[load.phase]]\nduration = "0.2s"\narrival_rate = 5',
            "load.warmup: warmup (0.5s) must be shorter than each phase: phase 0 lasts 0.2s",
        ),
    ],
)
def test_bad_load_models_name_the_file_line_and_field(load: str, where: str) -> None:
    with pytest.raises(PlanError) as e:
        plan_of(load)
    assert where in str(e.value)


def test_request_weight_and_timeout_are_checked() -> None:
    with pytest.raises(
        PlanError, match=r"plan.toml:6: request\[0\].weight: every request has weight 0"
    ):
        parse_plan(
            HEAD.replace('path = "/"', 'path = "/"\nweight = 0') + 'users = 1\nduration = "2s"',
            "plan.toml",
        )
    with pytest.raises(PlanError, match=r"plan.toml:6: request\[0\].timeout: a timeout"):
        parse_plan(
            HEAD.replace('path = "/"', 'path = "/"\ntimeout = "0s"') + 'users = 1\nduration = "2s"',
            "plan.toml",
        )
