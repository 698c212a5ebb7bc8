"""A number out of its range is said as it was written and its bounds in full: 0 as 0,
not 0.0; 1000000 as 1000000, not 1e+06."""

from __future__ import annotations

import pytest

from pinchpoint.cli.arguments import check_number
from pinchpoint.plan.errors import PlanError


@pytest.mark.parametrize(
    ("value", "low", "high", "low_open", "said"),
    [
        (0.0, 0, 1, True, "--x 0: must be above 0 and at most 1"),
        (1.5, 0, 1, True, "--x 1.5: must be above 0 and at most 1"),
        (0.5, 1, 1_000_000, False, "--x 0.5: must be at least 1 and at most 1000000"),
        (2e6, 1, 1_000_000, False, "--x 2000000: must be at least 1 and at most 1000000"),
        (-0.25, -1, 1, False, None),
        (float("nan"), 0, 1, False, "--x nan: must be at least 0 and at most 1"),
    ],
)
def test_a_number_out_of_range_is_said_as_written(
    value: float, low: float, high: float, low_open: bool, said: str | None
) -> None:
    if said is None:
        check_number("--x", value, low, high, low_open=low_open)
        return
    with pytest.raises(PlanError) as refused:
        check_number("--x", value, low, high, low_open=low_open)
    assert str(refused.value) == said
