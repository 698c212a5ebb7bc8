"""`pinchpoint demo`: the three-tier demo stack started, loaded and diagnosed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pinchpoint.cli.app import FindKnee, Quiet, RunsDir, app, show_outcome
from pinchpoint.plan.errors import PlanError
from pinchpoint.terminal import Console, fail, warn


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
) -> None:
    """Start nginx → gunicorn → Flask on loopback, step the load on it and name its bottleneck."""
    from pinchpoint.cli.arguments import check_demo_args

    try:
        check_demo_args(runs_dir, lower, upper, step, seconds, workers, cpu_ms, wait_ms)
    except PlanError as e:
        fail(e)
        raise typer.Exit(2) from None
    import tempfile

    from pinchpoint.demo import DemoStack, NginxNotFound, StackError
    from pinchpoint.demo.found import found_components
    from pinchpoint.demo.plan import demo_plan, plan_on_stack, probe_path
    from pinchpoint.interrupts import catching
    from pinchpoint.live import LiveView
    from pinchpoint.pipeline import execute
    from pinchpoint.plan.model import parse_plan, read_plan_text

    console = Console()
    with tempfile.TemporaryDirectory(prefix="pinchpoint-demo-") as tmp:
        try:
            stack = DemoStack(Path(tmp), workers=workers)
            with stack:
                if plan_file is not None:
                    source = str(plan_file)
                    text = plan_on_stack(
                        read_plan_text(plan_file), stack.url, stack.components(), source
                    )
                    how = f"Running {plan_file}"
                else:
                    source = "demo plan"
                    components, said = found_components(
                        stack.url + probe_path(cpu_ms, wait_ms), stack.components()
                    )
                    console.print(said, highlight=False)
                    text = demo_plan(
                        stack.url,
                        components,
                        lower,
                        upper,
                        step,
                        seconds,
                        cpu_ms,
                        wait_ms,
                        find_knee=find_knee,
                    )
                    how = (
                        f"Searching {lower}→{upper} users for the knee"
                        if find_knee
                        else f"Stepping {lower}→{upper} users by {step}"
                    )
                plan = parse_plan(text, source)
                per_step = (
                    ""
                    if plan_file is not None
                    else f", {seconds:g}s each, {cpu_ms:g} ms CPU + {wait_ms:g} ms wait per request"
                )
                console.print(
                    f"Demo stack up: nginx {stack.url} → gunicorn ({workers} workers) → Flask + probe. "
                    f"{how}{per_step}.",
                    highlight=False,
                )
                # As `pinchpoint run`: Ctrl-C or SIGTERM stops the load, the run folder is
                # finished with what was measured, and the exit code says it was cut short.
                with (
                    catching(say=lambda line: warn(line, console)) as caught,
                    LiveView(console, quiet) as view,
                ):
                    outcome = execute(plan, text, runs_dir, on_tick=view)
        except NginxNotFound as e:
            fail(e)
            raise typer.Exit(3) from None
        except StackError as e:
            fail(f"The demo stack did not start: {e}")
            raise typer.Exit(3) from None
        except (PlanError, ValueError) as e:
            fail(e)
            raise typer.Exit(2) from None
    show_outcome(outcome, console)
    if caught.signals or outcome.interrupted:
        raise typer.Exit(caught.exit_code() or 130)
