"""`pinchpoint demo`: the three-tier demo stack started, loaded and diagnosed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pinchpoint.cli.app import FindKnee, Quiet, RunsDir, app, show_outcome
from pinchpoint.plan.errors import PlanError
from pinchpoint.terminal import Console, fail, warn

if TYPE_CHECKING:
    from rich.console import Console as RichConsole

    from pinchpoint.compare.advice_shapes import Prediction
    from pinchpoint.pipeline import RunOutcome


@app.command()
def demo(
    lower: Annotated[int, typer.Option("-l", "--lower", help="Users of the first step.")] = 1,
    upper: Annotated[int, typer.Option("-u", "--upper", help="Users of the last step.")] = 15,
    step: Annotated[int, typer.Option("-s", "--step", help="Users added at each step.")] = 2,
    seconds: Annotated[float, typer.Option("-t", "--time", help="Seconds each step lasts.")] = 5.0,
    workers: Annotated[int, typer.Option("--workers", help="gunicorn sync workers.")] = 2,
    cpu_ms: Annotated[float, typer.Option("--cpu", help="ms of CPU work per request.")] = 2.0,
    wait_ms: Annotated[float, typer.Option("--wait", help="ms of waiting per request.")] = 8.0,
    runs_dir: RunsDir = Path("runs"),
    quiet: Quiet = False,
    find_knee: FindKnee = False,
    plan_file: Annotated[
        Path | None,
        typer.Option(
            "--plan",
            help="Run this plan's [load] and requests or flows on the demo stack instead "
            "(its [target] url is replaced by the stack's; e.g. examples/shop_flow.toml).",
        ),
    ] = None,
    apply: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="Then apply the verdict's advice to the demo stack (its gunicorn workers), "
            "run again and print the predicted throughput against the measured.",
        ),
    ] = False,
) -> None:
    """Start nginx → gunicorn → Flask on loopback, step the load on it and name its bottleneck."""
    from pinchpoint.cli.arguments import check_demo_args

    try:
        check_demo_args(runs_dir, lower, upper, step, seconds, workers, cpu_ms, wait_ms)
    except PlanError as e:
        fail(e)
        raise typer.Exit(2) from None
    from pinchpoint.demo import NginxNotFound, StackError
    from pinchpoint.demo.advice import advised_workers
    from pinchpoint.load.interrupts import catching

    console = Console()
    setup = _Setup(
        lower, upper, step, seconds, cpu_ms, wait_ms, runs_dir, quiet, find_knee, plan_file
    )
    try:
        with catching(say=lambda line: warn(line, console)) as caught:
            outcome = _run_on_stack(setup, workers, console)
            show_outcome(outcome, console)
            advised = advised_workers(outcome.verdict) if apply else None
            if apply and advised is None:
                console.print("Nothing to apply: the verdict advises no gunicorn worker count.")
            if advised is not None and not (caught.signals or outcome.interrupted):
                console.print(f"\nApplying the advice: gunicorn with {advised} workers.")
                before = outcome.run_dir
                prediction = outcome.verdict["bottleneck"]["prediction"]
                outcome = _run_on_stack(setup, advised, console)
                show_outcome(outcome, console)
                _show_check(before, prediction, outcome.run_dir, console)
    except NginxNotFound as e:
        fail(e)
        raise typer.Exit(3) from None
    except StackError as e:
        fail(f"The demo stack did not start: {e}")
        raise typer.Exit(3) from None
    except (PlanError, ValueError) as e:
        fail(e)
        raise typer.Exit(2) from None
    if caught.signals or outcome.interrupted:
        raise typer.Exit(caught.exit_code() or 130)


@dataclass(frozen=True)
class _Setup:
    lower: int
    upper: int
    step: int
    seconds: float
    cpu_ms: float
    wait_ms: float
    runs_dir: Path
    quiet: bool
    find_knee: bool
    plan_file: Path | None


def _run_on_stack(setup: _Setup, workers: int, console: RichConsole) -> RunOutcome:
    """Starts the demo stack with `workers` gunicorn workers, runs the demo plan (or the
    user's) on it and stops it."""
    import tempfile

    from pinchpoint.demo import DemoStack
    from pinchpoint.demo.found import found_components
    from pinchpoint.demo.plan import demo_plan, plan_on_stack, probe_path
    from pinchpoint.pipeline import execute
    from pinchpoint.plan.model import parse_plan, read_plan_text
    from pinchpoint.terminal.live import LiveView

    with tempfile.TemporaryDirectory(prefix="pinchpoint-demo-") as tmp:
        stack = DemoStack(Path(tmp), workers=workers)
        with stack:
            if setup.plan_file is not None:
                source = str(setup.plan_file)
                text = plan_on_stack(
                    read_plan_text(setup.plan_file), stack.url, stack.components(), source
                )
                how = f"Running {setup.plan_file}"
            else:
                source = "demo plan"
                components, said = found_components(
                    stack.url + probe_path(setup.cpu_ms, setup.wait_ms), stack.components()
                )
                console.print(said, highlight=False)
                text = demo_plan(
                    stack.url,
                    components,
                    setup.lower,
                    setup.upper,
                    setup.step,
                    setup.seconds,
                    setup.cpu_ms,
                    setup.wait_ms,
                    find_knee=setup.find_knee,
                )
                how = (
                    f"Searching {setup.lower}→{setup.upper} users for the knee"
                    if setup.find_knee
                    else f"Stepping {setup.lower}→{setup.upper} users by {setup.step}"
                )
            plan = parse_plan(text, source)
            per_step = (
                ""
                if setup.plan_file is not None
                else f", {setup.seconds:g}s each, {setup.cpu_ms:g} ms CPU + "
                f"{setup.wait_ms:g} ms wait per request"
            )
            console.print(
                f"Demo stack up: nginx {stack.url} → gunicorn ({workers} workers) → Flask + "
                f"probe. {how}{per_step}.",
                highlight=False,
            )
            # As `pinchpoint run`: Ctrl-C or SIGTERM stops the load, the run folder is
            # finished with what was measured, and the exit code says it was cut short.
            with LiveView(console, setup.quiet) as view:
                return execute(plan, text, setup.runs_dir, on_tick=view)


def _show_check(before: Path, prediction: Prediction, run_dir: Path, console: RichConsole) -> None:
    from pinchpoint.compare.advice import check_run_advice

    for line in check_run_advice(before, prediction, run_dir).lines():
        console.print(line, style="bold", highlight=False)
