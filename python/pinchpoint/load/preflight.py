"""What a run checks before its folder exists: the plan's world (plan/check.py), what
generators on Ray and a locustfile can run, the hook imported and every feed read in
full, as the run will. A failure is a PlanError of one line naming the plan's file, the
line and the key (or the flag); nothing has been written when it is raised."""

from __future__ import annotations

from pathlib import Path

from pinchpoint.plan.check import PlanError, check_before_run
from pinchpoint.plan.model import Plan
from pinchpoint.plan.toml import field_line


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
