"""The functions a profile names: by own time, and by total time less the trunk and the
pass-throughs, on stacks as py-spy folds them."""

from __future__ import annotations

from pinchpoint.analyze.hot_code import top_functions

SERVE = "run (gunicorn/arbiter.py:200)"
HANDLE = "handle (app.py:10)"
DUMPS = "dumps (json/__init__.py:183)"
WAIT = "wait (threading.py:300)"


def _names(rows: list[dict]) -> list[str]:
    return [row["function"] for row in rows]


def test_a_handler_on_nearly_every_sample_that_does_the_work_itself_is_kept() -> None:
    # handle is on 90% of the samples and the innermost frame of 70%: the trunk by its
    # total time, but where the time is spent.
    stacks = [(f"{SERVE};{HANDLE}", 70), (f"{SERVE};{HANDLE};{DUMPS}", 20), (f"{SERVE};{WAIT}", 10)]
    top = top_functions(stacks)
    assert _names(top["by_self"])[0] == HANDLE
    assert top["by_total"][0] == {"function": HANDLE, "self_share": 0.7, "total_share": 0.9}
    # The server's loop, on every sample and never the innermost frame, is still left out.
    assert SERVE not in _names(top["by_total"])
    assert _names(top["by_total"]) == [HANDLE, DUMPS, WAIT]


def test_a_dispatcher_on_nearly_every_sample_that_spends_little_itself_is_the_trunk() -> None:
    # handle is on 90% of the samples but the innermost frame of 10%: its callees divide
    # the time, and it says nothing of where it goes.
    stacks = [
        (f"{SERVE};{HANDLE}", 10),
        (f"{SERVE};{HANDLE};{DUMPS}", 45),
        (f"{SERVE};{HANDLE};{WAIT}", 35),
        (SERVE, 10),
    ]
    top = top_functions(stacks)
    assert _names(top["by_total"]) == [DUMPS, WAIT]
    assert top["by_total"][0]["total_share"] == 0.45


def test_a_computing_bottleneck_carried_by_one_request_names_its_hot_function() -> None:
    from pinchpoint.analyze.hot_code import add_hot_code

    hash_pw = "hashpw (bcrypt/__init__.py:84)"
    stacks = [[f"{SERVE};{HANDLE};{hash_pw}", 80], [f"{SERVE};{HANDLE}", 20]]
    sampled = {"stacks": stacks, "start": 0.0, "end": 3.0, "sampler_cpu_s": 0.1}
    profile = {"step": 3, "level": 5, "tool": "py-spy", "tiers": {"gunicorn": sampled}}
    bottleneck = {"component": "gunicorn", "resource": "cpu", "request": "journey/login",
                  "evidence": []}  # fmt: skip
    verdict = {"headline": "Bottleneck: host CPU, in journey/login", "bottleneck": bottleneck,
               "findings": [bottleneck]}  # fmt: skip
    add_hot_code(verdict, profile, 2)
    assert verdict["headline"] == f"Bottleneck: host CPU, in journey/login: {hash_pw}"
    # A bottleneck of no one request keeps its headline.
    del bottleneck["request"]
    verdict["headline"] = "Bottleneck: host CPU"
    add_hot_code(verdict, profile, 2)
    assert verdict["headline"] == "Bottleneck: host CPU"
