"""Settings shared by the tests: the budget of the property-based fuzz tests (Hypothesis).

`make test` runs the short profile (`default`: a few dozen examples a test, the same ones
every run). The long one tries thousands of new examples a test, in the fuzz modules
(`test_*_fuzz.py`):

    HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest tests -k fuzz
"""

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long",
    max_examples=5000,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# `make test` runs the tests marked `timed`, then those marked `serial`, each in a pytest of
# its own (`-m timed`, `-m serial`): those skip importing a module whose text never says
# `mark.timed` (or `mark.serial`), 4 to 13 s of collecting a module each for nothing. The
# check below, made wherever every module is collected, fails a run when a marked test
# sits in a module that does not say so, which those lanes would never run.
_LANES = ("timed", "serial")


def _lane(config: pytest.Config) -> str | None:
    expression = str(config.getoption("markexpr") or "").strip()
    return expression if expression in _LANES else None


def _says(path: Path, lane: str) -> bool:
    return f"mark.{lane}" in path.read_text(encoding="utf-8")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    lane = _lane(config)
    name = collection_path.name
    if lane is None or not (name.startswith("test_") and name.endswith(".py")):
        return None
    return True if not _says(collection_path, lane) else None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _lane(config) is not None:
        return
    unsaid = sorted(
        {
            f"{item.path} has tests marked {lane} but never says `mark.{lane}`"
            for item in items
            for lane in _LANES
            if item.get_closest_marker(lane) is not None and not _says(item.path, lane)
        }
    )
    if unsaid:
        raise pytest.UsageError("; ".join(unsaid))
