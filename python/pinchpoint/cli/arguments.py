"""The command line's own arguments checked before anything starts: numbers in range,
`pinchpoint load`'s URL or plan, `pinchpoint demo`'s flags. Each failure is a PlanError
of one line naming the flag."""

from __future__ import annotations

import math
from pathlib import Path

from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.world import check_folder, check_plan_target, check_resolves


def check_number(
    flag: str, value: float, low: float, high: float, *, low_open: bool = False
) -> None:
    """A command-line number is finite and within [low, high] (low excluded with low_open)."""
    below = value <= low if low_open else value < low
    if not math.isfinite(value) or below or value > high:
        bound = f"above {_number(low)}" if low_open else f"at least {_number(low)}"
        raise PlanError(f"{flag} {_number(value)}: must be {bound} and at most {_number(high)}")


def _number(value: float) -> str:
    """A number as it is written: 0 as 0 (not 0.0), 1000000 in full, 0.25 as 0.25."""
    if math.isfinite(value) and value == int(value):
        return str(int(value))
    return repr(float(value))


def check_url_load(params: dict) -> None:
    """`pinchpoint load <url>`'s flags in range and its URL's host resolving."""
    from urllib.parse import urlsplit

    from pinchpoint.plan.http import check_url
    from pinchpoint.plan.load_models import MAX_RATE, MAX_THREADS, MAX_USERS
    from pinchpoint.plan.toml import MAX_DURATION_S

    url = str(params["target"])
    try:
        check_url(url)
    except ValueError as e:
        raise PlanError(f"TARGET: {e}") from None
    check_number("-c/--connections", params["connections"], 1, MAX_USERS)
    check_number("-d/--duration", params["seconds"], 0, MAX_DURATION_S, low_open=True)
    if params.get("rate") is not None:
        check_number("--rate", params["rate"], 0, MAX_RATE, low_open=True)
    check_number("--max-in-flight", params["max_in_flight"], 1, 1_000_000)
    check_number("--threads", params["threads"], 0, MAX_THREADS)
    check_number("--timeout", params["timeout"], 0, MAX_DURATION_S, low_open=True)
    if params.get("abort_on_error_rate") is not None:
        check_number("--abort-on-error-rate", params["abort_on_error_rate"], 0, 1, low_open=True)
    parts = urlsplit(url)
    check_resolves(parts.hostname or "", parts.port or 80, f"TARGET {url}")


# The flags of `pinchpoint load` that describe a URL load; a plan sets them in [load].
URL_FLAGS = {
    "connections": "-c",
    "seconds": "-d",
    "rate": "--rate",
    "poisson": "--poisson",
    "max_in_flight": "--max-in-flight",
    "threads": "--threads",
    "timeout": "--timeout",
    "tag": "--tag",
    "abort_on_error_rate": "--abort-on-error-rate",
}


def check_load_args(params: dict, given: set[str]) -> None:
    """`pinchpoint load`'s parameters (`given`: those set on the command line): a URL with
    its flags in range, or a plan that loads, with none of the URL's flags."""
    if params.get("out") is not None:
        check_folder(params["out"], "--out")
    target = str(params["target"])
    if "://" in target:
        check_url_load(params)
        return
    flags = [flag for name, flag in URL_FLAGS.items() if name in given]
    if flags:
        raise PlanError(
            f"{', '.join(flags)} go with a URL; {target} is a plan: "
            "set its load in [load] (users, duration, [[load.phase]] arrival_rate)"
        )
    from pinchpoint.plan.model import parse_plan, read_plan_text

    text = read_plan_text(Path(target))
    check_plan_target(parse_plan(text, target), text, target)


def check_demo_args(
    runs_dir: Path,
    lower: int,
    upper: int,
    step: int,
    seconds: float,
    workers: int,
    cpu_ms: float,
    wait_ms: float,
) -> None:
    """`pinchpoint demo`'s flags in range and its runs dir writable."""
    check_folder(runs_dir, "--runs-dir")
    check_number("--lower", lower, 1, 10_000)
    check_number("--upper", upper, 1, 10_000)
    check_number("--step", step, 1, 10_000)
    check_number("--time", seconds, 0, 3600, low_open=True)
    check_number("--workers", workers, 1, 64)
    check_number("--cpu", cpu_ms, 0, 10_000)
    check_number("--wait", wait_ms, 0, 10_000)
