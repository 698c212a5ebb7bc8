"""Property-based fuzzing of what `run --check-advice` reads: the earlier run's verdict.json
(`read_prediction`, before any load) and the later run's (`check_run_advice`, after it).
Files come from a recorded run's verdict with a prediction, mutated (a value anywhere in
the prediction, the steps or the pools replaced by one of a random type: numbers huge,
1e400, NaN, negative, strings with control characters, arrays, objects, deep nesting; keys
dropped or added), and from arbitrary text and bytes. The reader gives a prediction the
check formats and keeps as JSON, or raises ValueError (FileNotFoundError) naming the file
on one line; never another exception.

The budget is Hypothesis's profile (tests/conftest.py): a few dozen examples a test in
`make test`; thousands with

    HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest tests/test_advice_reader_fuzz.py
"""

from __future__ import annotations

import copy
import json
import math
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from pinchpoint.compare.advice import check_run_advice, read_prediction
from pinchpoint.rundir import files

RECORDED = json.loads(
    (Path(__file__).resolve().parent / "data" / "runs" / "db-scan-pool" / files.VERDICT).read_text()
)
PREDICTION = {
    "component": "gunicorn",
    "setting": "workers",
    "now": 2,
    "to": 6,
    "measured_rps": 180.0,
    "predicted_rps": 500.0,
    "at_users": 9,
    "limited_by": "cpu",
    "ceilings_rps": {"workers": 540.0, "cpu": 500.0, "load": None},
    "line": "gunicorn workers 2 → 6: about 500 req/s at 9 users (now 180)",
}
VERDICT = copy.deepcopy(RECORDED)
VERDICT["bottleneck"] = {**VERDICT["bottleneck"], "component": "gunicorn"}
VERDICT["bottleneck"]["prediction"] = PREDICTION
VERDICT["pools"] = {"gunicorn": {"slots": 6, "found": "server", "source": "--workers"}}

# Numbers as JSON text can spell them, past what Python's float holds (1e400: infinity).
NUMBER_TEXTS = ["1e400", "-1e400", "NaN", "Infinity", "-0.0", "5e-324", "9" * 400]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**63, 10**300]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["\x1b[2J", "\x1b]0;t\x07", "", "workers", "9", "cpu_quota_cores"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in `value` a mutation may change (itself included)."""
    found = [at]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*at, key))
    elif isinstance(value, list):
        for i, child in enumerate(value[:3]):
            found += _paths(child, (*at, i))
    return found


READ_PLACES = [
    ("bottleneck",),
    *_paths(VERDICT["bottleneck"]["prediction"], ("bottleneck", "prediction")),
    *_paths(VERDICT["steps"][:3], ("steps",)),
    *_paths(VERDICT["pools"], ("pools",)),
]


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """The verdict with a few of its read places replaced, dropped or added to, as JSON text
    (a number sometimes spelled past what a float holds)."""
    verdict = copy.deepcopy(VERDICT)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(READ_PLACES))
        parent = _at(verdict, path[:-1])
        key = path[-1]
        fits = isinstance(parent, dict) or (isinstance(key, int) and key < len(parent or []))
        if parent is None or not fits:
            continue
        action = draw(st.sampled_from(["replace", "drop", "add", "nest"]))
        event(action)
        if action == "replace":
            parent[path[-1]] = draw(VALUES)
        elif action == "drop" and isinstance(parent, dict):
            parent.pop(path[-1], None)
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = draw(VALUES)
        elif action == "nest":
            parent[path[-1]] = json.loads("[" * 70 + "]" * 70)
    text = json.dumps(verdict)
    if draw(st.booleans()):
        spelled = draw(st.sampled_from(NUMBER_TEXTS))
        text = text.replace('"predicted_rps": 500.0', f'"predicted_rps": {spelled}', 1)
        text = text.replace('"users": ', f'"users": {spelled}, "_": ', 1)
    return text


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return None
    return value if isinstance(value, (dict, list)) else None


def _folder(root: Path, name: str, verdict: str | bytes) -> Path:
    folder = root / name
    folder.mkdir()
    target = folder / files.VERDICT
    target.write_bytes(verdict if isinstance(verdict, bytes) else verdict.encode())
    return folder


def _refused_well(error: Exception, folder: Path) -> None:
    said = str(error)
    assert isinstance(error, (ValueError, FileNotFoundError)), repr(error)
    assert said.startswith(f"{folder / files.VERDICT}: ") or said.startswith(f"{folder}: "), said
    assert "\n" not in said, said


def _check_earlier(text: str | bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        before = _folder(Path(tmp), "before", text)
        try:
            prediction = read_prediction(before)
        except Exception as e:
            event("refused")
            _refused_well(e, before)
            return
        event("read")
        after = _folder(Path(tmp), "after", json.dumps(VERDICT))
        checked = check_run_advice(before, prediction, after)
        assert all(line.strip() for line in checked.lines())
        kept = (after / files.ADVICE_CHECK).read_text()
        assert json.loads(kept, parse_constant=_no_constant)["before_run"] == "before"
        assert math.isfinite(checked.error)


def _check_later(text: str | bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        after = _folder(Path(tmp), "after", text)
        try:
            checked = check_run_advice(Path(tmp) / "before", PREDICTION, after)  # type: ignore[arg-type]
        except Exception as e:
            event("refused")
            _refused_well(e, after)
            assert not (after / files.ADVICE_CHECK).exists()
            return
        event("checked")
        assert all(line.strip() for line in checked.lines())
        json.loads((after / files.ADVICE_CHECK).read_text(), parse_constant=_no_constant)


def _no_constant(name: str) -> None:
    raise AssertionError(f"advice_check.json holds {name}, which is not JSON")


@given(mutated())
def test_a_mutated_earlier_verdict_is_read_or_refused_naming_its_file(text: str) -> None:
    _check_earlier(text)


@given(mutated())
def test_a_mutated_later_verdict_is_checked_or_refused_naming_its_file(text: str) -> None:
    _check_later(text)


@given(st.one_of(st.text(max_size=200), st.binary(max_size=200), VALUES.map(json.dumps)))
def test_any_text_as_either_verdict_is_read_or_refused_naming_its_file(
    text: str | bytes,
) -> None:
    _check_earlier(text)
    _check_later(text)


def test_the_unmutated_verdict_is_read_and_checked() -> None:
    # The fuzzer's starting point passes: a refusal above is the mutation's doing.
    with tempfile.TemporaryDirectory() as tmp:
        before = _folder(Path(tmp), "before", json.dumps(VERDICT))
        assert read_prediction(before) == {**PREDICTION, "now": 2.0, "to": 6.0}
        after = _folder(Path(tmp), "after", json.dumps(VERDICT))
        checked = check_run_advice(before, PREDICTION, after)  # type: ignore[arg-type]
        assert checked.applied is True
