"""Checks of the world a plan runs in, made before a run folder exists or a sampler
starts: the folder runs are written to can be written, and the target's host resolves.
Each failure is a PlanError of one line naming the file, line and field (or the flag)."""

from __future__ import annotations

import math
import os
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pinchpoint.plan.model import Plan

# How long a name lookup may take before the host counts as unresolvable.
RESOLVE_TIMEOUT_S = 5.0


class PlanError(ValueError):
    """A plan (or a command line) that cannot run, with where the problem is. Defined
    here, with no import of pydantic, so the command line can catch it before it loads
    the plan's models."""


def check_folder(path: Path, flag: str) -> None:
    """`path` is a folder that can be written, or can be made in one that can."""
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        where = "is a file" if existing == path else f"is under {existing}, a file"
        raise PlanError(f"{flag} {path}: {where}, not a folder")
    if existing.exists() and not os.access(existing, os.W_OK | os.X_OK):
        raise PlanError(f"{flag} {path}: {existing} cannot be written to")


def check_resolves(host: str, port: int, where: str) -> None:
    """The host name resolves within RESOLVE_TIMEOUT_S; `where` prefixes the error."""
    import socket
    import threading

    outcome: list[BaseException | None] = []

    def lookup() -> None:
        try:
            socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as e:
            outcome.append(e)
        else:
            outcome.append(None)

    # getaddrinfo has no timeout of its own; a daemon thread is left behind if it hangs.
    thread = threading.Thread(target=lookup, name="resolve", daemon=True)
    thread.start()
    thread.join(RESOLVE_TIMEOUT_S)
    if not outcome:
        raise PlanError(f"{where}: {host!r} did not resolve within {RESOLVE_TIMEOUT_S:g}s")
    error = outcome[0]
    if error is not None:
        reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
        raise PlanError(f"{where}: host {host!r} does not resolve: {reason}")


def check_plan_target(plan: Plan, text: str, source: str) -> None:
    """The plan's target host resolves (errors point at target.url in `source`)."""
    from pinchpoint.plan.toml import field_line

    target = plan.target
    line = field_line(text, ("target", "url"))
    where = f"{source}:{line}: target.url" if line else f"{source}: target.url"
    check_resolves(target.host, target.port, where)


def check_secrets_and_files(plan: Plan, text: str, source: str) -> None:
    """Each environment variable an [[agent]] or [[prometheus]] names is set, and each
    ca_file they name can be read."""
    from pinchpoint.plan.toml import field_line

    # An [[agent]] or a [[prometheus]] table: both have a ca_file.
    tables: list[tuple[str, int, Any, tuple[str, ...]]] = [
        ("agent", i, a, ("token_env",)) for i, a in enumerate(plan.agent)
    ]
    tables += [
        ("prometheus", i, p, ("token_env", "username_env", "password_env"))
        for i, p in enumerate(plan.prometheus)
    ]
    for table, index, model, env_fields in tables:
        for name in env_fields:
            variable = getattr(model, name)
            if variable is not None and not os.environ.get(variable, "").strip():
                line = field_line(text, (table, index, name))
                raise PlanError(
                    f"{source}:{line}: {table}[{index}].{name}: "
                    f"environment variable {variable} is not set"
                )
        ca_file = model.ca_file
        if ca_file is not None and not os.access(ca_file, os.R_OK):
            line = field_line(text, (table, index, "ca_file"))
            raise PlanError(f"{source}:{line}: {table}[{index}].ca_file: cannot read {ca_file}")


def check_log_paths(plan: Plan, text: str, source: str) -> None:
    """No component's log path is a folder (a log not written yet is fine)."""
    from pinchpoint.plan.toml import field_line

    for index, component in enumerate(plan.component):
        if component.log is not None and Path(component.log.path).is_dir():
            line = field_line(text, ("component", index, "log", "path"))
            raise PlanError(
                f"{source}:{line}: component[{index}].log.path: "
                f"{component.log.path} is a folder, not a log file"
            )


def check_otlp_listeners(plan: Plan, text: str, source: str) -> None:
    """Each `[[otlp]]` address can be listened on now: nothing else holds it, nor an
    `[[otlp]]` table before it (each is held, listening, until all are tried)."""
    import socket

    from pinchpoint.plan.toml import field_line

    with ExitStack() as held:
        for index, otlp in enumerate(plan.otlp):
            if otlp.listen is None:
                continue
            host, port = otlp.address
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            probe = held.enter_context(socket.socket(family, socket.SOCK_STREAM))
            try:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((host, port))
                probe.listen(1)
            except OSError as exc:
                line = field_line(text, ("otlp", index, "listen"))
                where = f"{source}:{line}" if line else source
                raise PlanError(
                    f"{where}: otlp[{index}].listen: cannot listen on {otlp.listen}: "
                    f"{exc.strerror or exc}"
                ) from None


def check_before_run(plan: Plan, text: str, source: str, runs_dir: Path) -> None:
    """What `pinchpoint run` checks after the plan parses and before anything starts."""
    check_folder(runs_dir, "--runs-dir")
    check_secrets_and_files(plan, text, source)
    check_log_paths(plan, text, source)
    check_otlp_listeners(plan, text, source)
    check_plan_target(plan, text, source)


def check_number(
    flag: str, value: float, low: float, high: float, *, low_open: bool = False
) -> None:
    """A command-line number is finite and within [low, high] (low excluded with low_open)."""
    below = value <= low if low_open else value < low
    if not math.isfinite(value) or below or value > high:
        bound = f"above {low:g}" if low_open else f"at least {low:g}"
        raise PlanError(f"{flag} {value!r}: must be {bound} and at most {high:g}")


def check_url_load(params: dict) -> None:
    """`pinchpoint load <url>`'s flags in range and its URL's host resolving."""
    from urllib.parse import urlsplit

    from pinchpoint.plan.model import MAX_RATE, MAX_THREADS, MAX_USERS, check_url
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
