"""The `pinchpoint` command: a thin layer over the pipeline."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

# Imported by each command as it runs (the plan, the pipeline and the engine take
# seconds to import), so --help and a plan's error are printed at once.
from pinchpoint.plan_check import PlanError
from pinchpoint.terminal import Console, err_console, fail, sla_json, sla_outcome, warn

if TYPE_CHECKING:
    from rich.console import Console as RichConsole

# Plain help (rich_markup_mode=None): typer's rich help imports ~0.2 s of markdown and
# traceback rendering before printing a line.
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help=__doc__,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


RunsDir = Annotated[Path, typer.Option("--runs-dir", help="Where run folders are written.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No live view of the run.")]
FindKnee = Annotated[
    bool,
    typer.Option(
        "--find-knee",
        help="Double the users from lower until throughput stops scaling, bisect, stop "
        "(load.find_knee).",
    ),
]


def _show(outcome, console: RichConsole) -> None:
    from pinchpoint.report.terminal import render_steps, render_verdict

    console.print()
    if getattr(outcome, "search", None):
        console.print(f"Find knee: {outcome.search['summary']}", highlight=False)
    render_steps(outcome.verdict, console)
    render_verdict(outcome.verdict, console)
    if outcome.interrupted:
        console.print("[yellow]The run was interrupted: the results cover the steps it ran.[/]")
    for warning in getattr(outcome, "warnings", []):
        console.print(f"[yellow]Not collected: {warning}[/]", highlight=False)
    console.print(f"\nRun folder: {outcome.run_dir}   report: {outcome.run_dir / 'report.html'}")


@app.command()
def run(
    plan_file: Annotated[
        Path, typer.Argument(help="The plan (TOML).", exists=True, dir_okay=False)
    ],
    runs_dir: RunsDir = Path("runs"),
    quiet: Quiet = False,
    find_knee: FindKnee = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print the verdict and the SLA results as JSON (the rest to stderr)."
        ),
    ] = False,
) -> None:
    """Run a plan against a stack: step the load, collect every tier's records, find the bottleneck.

    Exits 1 when the plan's SLA is broken (after writing the run folder and report)."""
    from pinchpoint.plan import parse_plan, read_plan_text
    from pinchpoint.plan_check import check_before_run

    try:
        text = read_plan_text(plan_file)
        plan = parse_plan(text, str(plan_file))
        if find_knee and not plan.load.find_knee:
            from pinchpoint.load.find_knee import with_find_knee

            text = with_find_knee(text, str(plan_file))
            plan = parse_plan(text, f"{plan_file} with --find-knee")
        check_before_run(plan, text, str(plan_file), runs_dir)
    except PlanError as e:
        fail(e)
        raise typer.Exit(2) from None
    from pinchpoint.interrupts import catching
    from pinchpoint.live import LiveView
    from pinchpoint.pipeline import execute, new_run_id

    console = Console(stderr=True) if as_json else Console()
    run_id = new_run_id()
    with catching(say=lambda line: warn(line, console)) as caught:
        try:
            with LiveView(console, quiet) as view:
                outcome = execute(plan, text, runs_dir, on_tick=view, run_id=run_id)
        except PlanError as e:
            fail(e)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            left = runs_dir / run_id
            fail(f"Interrupted before {left} was complete: pinchpoint analyze {left} recovers it")
            raise typer.Exit(caught.exit_code() or 130) from None
        _show(outcome, console)
        sla_met = sla_outcome(plan.sla, outcome, console, as_json)
    if caught.signals or outcome.interrupted:
        raise typer.Exit(caught.exit_code() or 130)
    if not sla_met:
        raise typer.Exit(1)


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
) -> None:
    """Start nginx → gunicorn → Flask on loopback, step the load on it and name its bottleneck."""
    from pinchpoint.plan_check import check_demo_args

    try:
        check_demo_args(runs_dir, lower, upper, step, seconds, workers, cpu_ms, wait_ms)
    except PlanError as e:
        fail(e)
        raise typer.Exit(2) from None
    import tempfile

    from pinchpoint.demo import DemoStack, NginxNotFound, StackError
    from pinchpoint.demo.plan import demo_plan
    from pinchpoint.live import LiveView
    from pinchpoint.pipeline import execute
    from pinchpoint.plan import parse_plan

    console = Console()
    with tempfile.TemporaryDirectory(prefix="pinchpoint-demo-") as tmp:
        try:
            stack = DemoStack(Path(tmp), workers=workers)
            with stack:
                text = demo_plan(
                    stack.url,
                    stack.components(),
                    lower,
                    upper,
                    step,
                    seconds,
                    cpu_ms,
                    wait_ms,
                    find_knee=find_knee,
                )
                plan = parse_plan(text, "demo plan")
                how = (
                    f"Searching {lower}→{upper} users for the knee"
                    if find_knee
                    else f"Stepping {lower}→{upper} users by {step}"
                )
                console.print(
                    f"Demo stack up: nginx {stack.url} → gunicorn ({workers} workers) → Flask + probe. "
                    f"{how}, {seconds:g}s each, "
                    f"{cpu_ms:g} ms CPU + {wait_ms:g} ms wait per request.",
                    highlight=False,
                )
                with LiveView(console, quiet) as view:
                    outcome = execute(plan, text, runs_dir, on_tick=view)
        except NginxNotFound as e:
            fail(e)
            raise typer.Exit(3) from None
        except StackError as e:
            fail(f"The demo stack did not start: {e}")
            raise typer.Exit(3) from None
    _show(outcome, console)


@app.command()
def load(
    ctx: typer.Context,
    target: Annotated[
        str,
        typer.Argument(help="http(s)://host:port/path to load, or a plan file (.toml)."),
    ],
    connections: Annotated[
        int,
        typer.Option(
            "-c", "--connections", help="Closed-loop users, one keep-alive connection each."
        ),
    ] = 50,
    seconds: Annotated[float, typer.Option("-d", "--duration", help="Seconds to run.")] = 10.0,
    rate: Annotated[
        float | None,
        typer.Option("--rate", "-r", help="Open loop: requests per second, answered or not."),
    ] = None,
    poisson: Annotated[
        bool, typer.Option("--poisson", help="Open loop: Poisson arrivals (default: uniform).")
    ] = False,
    max_in_flight: Annotated[
        int, typer.Option("--max-in-flight", help="Open loop: the most requests in flight.")
    ] = 1000,
    threads: Annotated[
        int, typer.Option("--threads", help="Engine threads (0: one per core).")
    ] = 0,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Per-request timeout, seconds.")
    ] = 10.0,
    tag: Annotated[
        bool, typer.Option("--tag/--no-tag", help="Add the pinchpoint tag to each request.")
    ] = False,
    http2: Annotated[
        bool,
        typer.Option("--http2", help="HTTP/2: h2c on http://, negotiated by ALPN on https://."),
    ] = False,
    insecure: Annotated[
        bool, typer.Option("--insecure", help="https: accept any certificate, unchecked.")
    ] = False,
    ca_file: Annotated[
        Path | None,
        typer.Option("--ca-file", help="https: PEM certificates to trust besides the defaults."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Keep the run folder (requests.parquet, summary) here."),
    ] = None,
    quiet: Quiet = False,
) -> None:
    """A plain load test with no diagnosis: throughput, latency percentiles and errors."""
    _check_load(ctx)
    from pinchpoint.live import LiveView
    from pinchpoint.load.plain import UrlLoad, interrupted_line, plain_load, render_summary

    source: UrlLoad | Path
    if "://" in target:
        source = UrlLoad(
            target,
            connections,
            seconds,
            rate,
            "poisson" if poisson else "uniform",
            max_in_flight,
            threads,
            timeout,
            tag,
            http2,
            insecure,
            None if ca_file is None else str(ca_file),
        )
    elif http2 or insecure or ca_file is not None:
        fail(
            "--http2, --insecure and --ca-file go with a URL: "
            "a plan sets http, insecure and ca_file in [target]"
        )
        raise typer.Exit(2)
    else:
        source = Path(target)
    from pinchpoint.interrupts import catching

    with catching(say=warn) as caught:
        try:
            with LiveView(err_console(), quiet or as_json) as view:
                summary = plain_load(source, out, on_tick=view)
        except (PlanError, OSError) as e:
            fail(e)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            fail("Interrupted again before the summary was written")
            raise typer.Exit(caught.exit_code() or 130) from None
        if as_json:
            import json

            print(json.dumps(summary, indent=2))
            if summary["interrupted"]:
                warn(interrupted_line(summary))
        else:
            render_summary(summary, Console())
    if caught.signals:
        raise typer.Exit(caught.exit_code())


@app.command("import")
def import_(
    path: Annotated[
        Path, typer.Argument(help="The other tool's result file (or Locust CSV prefix).")
    ],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="csv, vegeta, k6, locust, wrk2 or hdr[:unit].")
    ],
    runs_dir: RunsDir = Path("runs"),
) -> None:
    """Turn another load tool's results into a run folder that can be compared."""
    from pinchpoint.imports import ImportFormatError, import_results
    from pinchpoint.plan_check import check_folder

    try:
        check_folder(runs_dir, "--runs-dir")
        run_dir = import_results(path, fmt, runs_dir)
    except (ImportFormatError, ValueError, OSError) as e:
        fail(e)
        raise typer.Exit(2) from None
    Console().print(f"Imported {path} as {run_dir}", highlight=False)


@app.command()
def compare(
    a: Annotated[Path, typer.Argument(help="Before: a run folder or a timestamp,latency CSV.")],
    b: Annotated[Path, typer.Argument(help="After: a run folder or a timestamp,latency CSV.")],
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the HTML comparison here.")
    ] = None,
    sla_ms: Annotated[
        float | None,
        typer.Option("--sla-ms", help="Responses slower than this count as SLA errors."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
) -> None:
    """Compare two runs: percentile ladder, SLA error rate, significance, QQ plot."""
    from pinchpoint.compare import compare as compare_runs
    from pinchpoint.compare import render_comparison

    try:
        if sla_ms is not None:
            from pinchpoint.plan_check import check_number

            check_number("--sla-ms", sla_ms, 0, 3_600_000, low_open=True)
        result = compare_runs(a, b, out, sla_ms)
    except (ValueError, FileNotFoundError) as e:
        fail(e)
        raise typer.Exit(2) from None
    if as_json:
        import json

        print(json.dumps(result.to_dict(), indent=2))
    else:
        render_comparison(result, Console())


@app.command()
def analyze(
    run_dir: Annotated[
        Path,
        typer.Argument(
            help="The run folder (runs/<run id>) to analyze again.", exists=True, file_okay=False
        ),
    ],
) -> None:
    """Recompute a run folder's verdict and report from what it holds."""
    if not any((run_dir / name).exists() for name in RUN_FILES):
        fail(f"{run_dir}: not a run folder: it holds none of {', '.join(RUN_FILES)}")
        raise typer.Exit(2)
    from pinchpoint.analyze import analyze as analyze_run
    from pinchpoint.recover import recover
    from pinchpoint.report.html import write_report
    from pinchpoint.report.terminal import render_steps, render_verdict

    try:
        recovery = recover(run_dir)  # a folder left by a killed run
        verdict = analyze_run(run_dir)
        write_report(run_dir)
    except (OSError, ValueError) as e:
        # A file of the folder missing or unreadable (json and parquet errors are ValueErrors).
        fail(f"{run_dir}: cannot be analyzed: {' '.join(str(e).split())}")
        raise typer.Exit(2) from None
    console = Console()
    if recovery.partial:
        warn(recovery.line(), console)
    render_steps(verdict, console)
    render_verdict(verdict, console)


@app.command()
def sla(
    run_dir: Annotated[
        Path,
        typer.Argument(
            help="The run folder (runs/<run id>) to check.", exists=True, file_okay=False
        ),
    ],
    plan_file: Annotated[
        Path | None,
        typer.Option(
            "--plan",
            help="Take the SLA table from this plan, not from the run's plan.toml.",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Check a run folder against its plan's SLA table: exits 1 when an objective is broken."""
    import json

    from pinchpoint.plan import read_plan_text
    from pinchpoint.sla import broken, check_sla, render_sla, sla_of_plan_text

    source = plan_file or run_dir / "plan.toml"
    try:
        objectives = sla_of_plan_text(read_plan_text(source), str(source))
        if objectives is None or objectives.is_empty():
            raise ValueError(f"{source}: no [sla] table to check")
        results = check_sla(objectives, run_dir)
    except (OSError, ValueError) as e:
        fail(e)
        raise typer.Exit(2) from None
    if as_json:
        print(json.dumps({"run_dir": str(run_dir), "sla": sla_json(results)}, indent=2))
    else:
        render_sla(results, Console())
    if broken(results):
        raise typer.Exit(1)


@app.command()
def agent(
    config: Annotated[
        Path, typer.Option("--config", "-c", help="The agent's config (TOML).", dir_okay=False)
    ],
    check: Annotated[
        bool, typer.Option("--check", help="Check the config and exit without serving.")
    ] = False,
) -> None:
    """Serve the logs and resource usage of this host's components to `pinchpoint run`."""
    from pinchpoint.agent import ConfigError, check_config, load_config, make_server, serve

    try:
        settings = load_config(config)
        if check:
            check_config(settings)
            Console().print(f"{config}: OK", highlight=False)
            return
        server = make_server(settings)
    except ConfigError as e:
        fail(e)
        raise typer.Exit(2) from None
    serve(server)


# A folder holding none of these is not a run folder.
RUN_FILES = ("run.json", "plan.toml", "requests.parquet", "requests.arrows")


def _check_load(ctx: typer.Context) -> None:
    """`pinchpoint load`'s arguments, checked before anything starts; exits 2 on a bad one."""
    from pinchpoint.plan_check import check_load_args

    given = {
        name
        for name in ctx.params
        if (source := ctx.get_parameter_source(name)) is not None
        and source.name not in ("DEFAULT", "DEFAULT_MAP")
    }
    try:
        check_load_args(ctx.params, given)
    except PlanError as e:
        fail(e)
        raise typer.Exit(2) from None


def main() -> None:
    """The command, with every usage error on one line and no traceback for the user
    (PINCHPOINT_TRACEBACK=1 shows an unexpected error's)."""
    from typer._click.exceptions import ClickException, NoArgsIsHelpError

    try:
        code = app(standalone_mode=False)
    except NoArgsIsHelpError as e:
        e.show()
        code = e.exit_code
    except ClickException as e:
        ctx = getattr(e, "ctx", None)
        where = f"{ctx.command_path}: " if ctx is not None else ""
        fail(f"{where}{' '.join(e.format_message().split())}")
        code = e.exit_code
    except typer.Abort:
        # Ctrl-C outside a run's own handling (see interrupts.py), or the end of input.
        fail("Aborted.")
        code = 130
    except Exception as e:
        if os.environ.get("PINCHPOINT_TRACEBACK"):
            raise
        fail(f"pinchpoint: unexpected error: {type(e).__name__}: {' '.join(str(e).split())}")
        code = 1
    sys.exit(code if isinstance(code, int) else 0)
