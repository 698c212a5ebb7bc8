"""What a run checks before its folder exists: the plan's world (the folder runs are
written to and the target's host, in plan/world.py; its secrets, files and OTLP
addresses), what generators on Ray and a locustfile can run, the hook imported and every
feed read in full, as the run will. A failure is a PlanError of one line naming the
plan's file, the line and the key (or the flag); nothing has been written when it is
raised."""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import Plan
from pinchpoint.plan.toml import field_line
from pinchpoint.plan.world import check_folder, check_plan_target


def check_run(plan: Plan, text: str, source: str, runs_dir: Path, locustfile_flag: bool) -> None:
    """Everything `pinchpoint run` checks before its run folder is made
    (`locustfile_flag`: the locustfile came from --locustfile, not the plan)."""
    check_before_run(plan, text, source, runs_dir)
    if plan.generators.ray is not None:
        check_generators(plan, text, source)
    if plan.load.locustfile is not None:
        from pinchpoint.load.locust_steps import check_locustfile, locustfile_where

        check_locustfile(plan, locustfile_where(text, source, locustfile_flag))
    check_inputs(plan, text, source)


def check_inputs(plan: Plan, text: str, source: str) -> None:
    """The engine's inputs besides the plan: its hook imports, its feeds read whole."""
    check_hook(plan, text, source)
    check_feeds(plan, text, source)


def where(text: str, source: str, loc: tuple) -> str:
    """`file:line: dotted.key` of `loc` in the plan's text (no line when none is found)."""
    line = field_line(text, loc)
    dotted = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc).replace(".[", "[")
    return f"{source}:{line}: {dotted}" if line else f"{source}: {dotted}"


def check_generators(plan: Plan, text: str, source: str) -> None:
    """What generators on Ray cannot run, pointed at in the plan."""
    from pinchpoint.load.distributed.shares import check_ray_plan

    try:
        check_ray_plan(plan)
    except PlanError as e:
        raise PlanError(f"{where(text, source, ('generators', 'ray'))}: {e}") from None


def check_hook(plan: Plan, text: str, source: str) -> None:
    """The plan's hook (`[load] hook`) imports and names a function, in a process of its
    own (load/hook_box.py): a file that spins or exits as it loads is refused too."""
    if plan.load.hook is None:
        return
    from pinchpoint.load.hook_box import HookError
    from pinchpoint.load.hook_box import check_hook as check_boxed

    try:
        check_boxed(plan.load.hook)
    except HookError as e:
        raise PlanError(f"{where(text, source, ('load', 'hook'))}: {_one_line(e)}") from None


def check_feeds(plan: Plan, text: str, source: str) -> None:
    """Each flow's feed reads whole: every row, not only its header."""
    for index, flow in enumerate(plan.flow):
        if flow.feed is None:
            continue
        try:
            flow.feed.read()
        except ValueError as e:
            loc = ("flow", index, "feed", "file")
            raise PlanError(f"{where(text, source, loc)}: {_one_line(e)}") from None


def _one_line(error: Exception) -> str:
    """An error's message as one line: control characters escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(error))


def check_secrets_and_files(plan: Plan, text: str, source: str) -> None:
    """Each environment variable an [[agent]] or [[prometheus]] names is set, and each
    ca_file they name can be read."""
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
