"""`pinchpoint run PLAN`: a plan against a stack, from load to verdict and report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pinchpoint.cli.app import FindKnee, Quiet, RunsDir, app, show_outcome
from pinchpoint.plan.errors import PlanError
from pinchpoint.terminal import Console, fail, sla_outcome, warn

if TYPE_CHECKING:
    from rich.console import Console as RichConsole

    from pinchpoint.compare.advice_shapes import Prediction
    from pinchpoint.load.control import LiveControl
    from pinchpoint.outputs.live_page import LivePage
    from pinchpoint.outputs.openmetrics import MetricsServer
    from pinchpoint.outputs.remote_write import MetricsPush
    from pinchpoint.plan.model import Plan


@app.command()
def run(
    plan_file: Annotated[
        Path | None,
        typer.Argument(help="The plan (TOML).", exists=True, dir_okay=False, show_default=False),
    ] = None,
    discover: Annotated[
        str | None,
        typer.Option(
            "--discover",
            metavar="URL",
            help="Run the plan `pinchpoint init URL` would write (kept in the run folder) "
            "instead of a plan file.",
        ),
    ] = None,
    runs_dir: RunsDir = Path("runs"),
    quiet: Quiet = False,
    find_knee: FindKnee = False,
    locustfile: Annotated[
        Path | None,
        typer.Option(
            "--locustfile",
            help="Run this locustfile's users under the plan's closed-loop steps instead of "
            "its requests (load.locustfile).",
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="auto|ADDRESS",
            help="Send the load from generators on this Ray cluster (generators.ray): "
            "auto, ray://head:10001 or head:6379.",
        ),
    ] = None,
    generators: Annotated[
        int | None,
        typer.Option(
            "--generators",
            min=1,
            help="How many generators on Ray (generators.count); default one per alive node.",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print the verdict and the SLA results as JSON (the rest to stderr)."
        ),
    ] = False,
    profile: Annotated[
        bool,
        typer.Option(
            "--profile",
            help="Sample the Python tiers' hot functions with py-spy during the heaviest step "
            "(the plan's [profile]).",
        ),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="FILE.jsonl",
            help="Append one JSON object per second of the run to this file (requests, "
            "errors by class, latency percentiles, step).",
            dir_okay=False,
        ),
    ] = None,
    metrics: Annotated[
        str | None,
        typer.Option(
            "--metrics",
            metavar="HOST:PORT",
            help="Serve the run's live metrics on http://HOST:PORT/metrics for Prometheus "
            "(requests, errors by class, latency histogram by step, load, generator CPU). "
            "Unauthenticated: any address given is listened on; 127.0.0.1 keeps it local.",
        ),
    ] = None,
    metrics_linger: Annotated[
        float,
        typer.Option(
            "--metrics-linger",
            metavar="SECONDS",
            min=0.0,
            help="Keep answering --metrics this long after the run, so that a scraper "
            "reads its final values (at least the scrape interval; Ctrl-C ends it).",
        ),
    ] = 5.0,
    metrics_push: Annotated[
        str | None,
        typer.Option(
            "--metrics-push",
            metavar="URL",
            help="Push the --metrics series each second by Prometheus remote write to this "
            "URL (Prometheus' /api/v1/write, Mimir's /api/v1/push), and once more at the end.",
        ),
    ] = None,
    metrics_push_header: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics-push-header",
            metavar="'NAME: VALUE'",
            help="A header of each push, such as 'Authorization: Bearer TOKEN' or "
            "'X-Scope-OrgID: team' (repeat for more).",
        ),
    ] = None,
    serve: Annotated[
        str | None,
        typer.Option(
            "--serve",
            metavar="HOST:PORT",
            help="Serve a page that follows the run on http://HOST:PORT/ (the steps so far, "
            "latency and throughput each second, the knee so far), then the run's report "
            "at the same address. Off loopback it needs the token printed with its address.",
        ),
    ] = None,
    serve_linger: Annotated[
        float,
        typer.Option(
            "--serve-linger",
            metavar="SECONDS",
            min=0.0,
            help="Keep serving the report this long after the run (Ctrl-C ends it).",
        ),
    ] = 60.0,
    check_advice: Annotated[
        Path | None,
        typer.Option(
            "--check-advice",
            metavar="RUN",
            help="After applying the advice of an earlier run (its run folder), print the "
            "throughput it predicted against this run's (kept in advice_check.json).",
            file_okay=False,
        ),
    ] = None,
) -> None:
    """Run a plan against a stack: step the load, collect every tier's records, find the bottleneck.

    Exits 1 when the plan's SLA is broken (after writing the run folder and report), 4 when
    an objective with `abort` stopped it."""
    from pinchpoint.plan.model import Plan, parse_plan

    if (plan_file is None) == (discover is None):
        fail("give a plan file or --discover URL (one of them)")
        raise typer.Exit(2)
    try:
        text, source = _plan_text(plan_file, discover)
        if locustfile is not None:
            plan, text = Plan.with_locustfile(text, source, locustfile)
        else:
            plan = parse_plan(text, source)
        if find_knee:
            plan = plan.with_find_knee(text, source)
        if ray is not None or generators is not None:
            plan = plan.with_generators(ray, generators)
        if profile:
            plan, text = plan.with_profile(text)
        if out is not None:
            from pinchpoint.plan.world import check_output

            check_output(out, "--out")
        # Imported once the plan reads: it loads the engine.
        from pinchpoint.load.preflight import check_run

        check_run(plan, text, source, runs_dir, locustfile is not None)
        predicted = _prediction(check_advice)
    except PlanError as e:
        fail(e)
        raise typer.Exit(2) from None
    from pinchpoint.load.interrupts import catching
    from pinchpoint.outputs import fan_out, seconds_out, serving
    from pinchpoint.outputs.remote_write import pushing
    from pinchpoint.pipeline import execute, new_run_id
    from pinchpoint.rundir import files
    from pinchpoint.terminal.live import LiveView

    console = Console(stderr=True) if as_json else Console()
    run_id = new_run_id()
    # A flag wins over the plan's [output].
    server = _metrics_server(
        metrics or plan.output.metrics,
        run_id,
        plan.endpoints(),
        "--metrics" if metrics else f"{source}: [output] metrics",
    )
    push = _metrics_push(metrics_push, metrics_push_header or [], run_id, plan.endpoints(), console)
    page = _live_page(
        serve or plan.output.serve,
        run_id,
        console,
        "--serve" if serve else f"{source}: [output] serve",
        _control(plan, console),
    )
    with (
        serving(
            (server, metrics_linger), (page, serve_linger), unless=lambda: bool(caught.signals)
        ),
        catching(say=lambda line: warn(line, console)) as caught,
    ):
        try:
            with (
                LiveView(console, quiet) as view,
                seconds_out(out, run_id) as seconds,
                pushing(push, lambda line: warn(line, console)),
            ):
                ticks = fan_out(view, seconds, server, push, page)
                outcome = execute(
                    plan,
                    text,
                    runs_dir,
                    on_tick=ticks,
                    run_id=run_id,
                    on_stage=page.stage if page is not None else None,
                    control=page.control if page is not None else None,
                )
        except PlanError as e:
            fail(e)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            left = runs_dir / run_id
            fail(f"Interrupted before {left} was complete: pinchpoint analyze {left} recovers it")
            raise typer.Exit(caught.exit_code() or 130) from None
        show_outcome(outcome, console)
        if check_advice is not None and predicted is not None:
            _advice_check(check_advice, predicted, outcome.run_dir, console)
        sla_met = sla_outcome(outcome, console, as_json)
        if page is not None:
            page.finish(outcome.run_dir / files.REPORT, str(outcome.verdict.get("headline", "")))
            if serve_linger > 0:
                console.print(
                    f"The report is served on {page.url} for {serve_linger:g} s "
                    "more (Ctrl-C ends it)."
                )
    if outcome.stopped is not None:
        fail(f"The run stopped early: {outcome.stopped}")
        raise typer.Exit(3)
    if outcome.aborted is not None:
        raise typer.Exit(4)
    if caught.signals or outcome.interrupted:
        raise typer.Exit(caught.exit_code() or 130)
    if not sla_met:
        raise typer.Exit(1)


def _prediction(run_dir: Path | None) -> Prediction | None:
    """The prediction of the run --check-advice names, read before any load."""
    if run_dir is None:
        return None
    from pinchpoint.compare.advice import read_prediction

    try:
        return read_prediction(run_dir)
    except (OSError, ValueError) as e:
        raise PlanError(f"--check-advice {e}") from None


def _advice_check(before: Path, predicted: Prediction, run_dir: Path, console: RichConsole) -> None:
    from rich.text import Text

    from pinchpoint.compare.advice import check_run_advice

    try:
        checked = check_run_advice(before, predicted, run_dir)
    except (OSError, ValueError) as e:
        warn(f"--check-advice: {e}", console)
        return
    for line in checked.lines():
        console.print(Text(line), highlight=False)


def _metrics_server(
    address: str | None, run_id: str, requests: list[str], said: str
) -> MetricsServer | None:
    """The --metrics server, listening before the run folder is made; exits 2 when the
    address cannot be listened on."""
    if address is None:
        return None
    from pinchpoint.outputs.openmetrics import MetricsServer
    from pinchpoint.plan.output import parse_address

    try:
        host, port = parse_address(address)
        return MetricsServer(host, port, run_id, requests=requests)
    except ValueError as e:
        fail(f"{said} {address}: {e}")
    except OSError as e:
        fail(f"{said} {address}: cannot listen ({e.strerror or e})")
    raise typer.Exit(2)


def _metrics_push(
    url: str | None, headers: list[str], run_id: str, requests: list[str], console: RichConsole
) -> MetricsPush | None:
    """The --metrics-push pusher, its URL and headers checked before the run folder is
    made; exits 2 on a bad one."""
    if url is None:
        if headers:
            fail("--metrics-push-header goes with --metrics-push URL")
            raise typer.Exit(2)
        return None
    from pinchpoint.outputs.remote_write import MetricsPush, check_push_url, parse_header

    try:
        check_push_url(url)
        said = dict(parse_header(h) for h in headers)
    except ValueError as e:
        fail(f"--metrics-push {url}: {e}" if not headers else f"--metrics-push-header {e}")
        raise typer.Exit(2) from None
    return MetricsPush(url, run_id, requests, said, say=lambda line: warn(line, console))


def _control(plan: Plan, console: RichConsole) -> LiveControl:
    """The changes of users the live page takes, each said on the terminal."""
    from pinchpoint.load.control import LiveControl

    return LiveControl(plan, say=lambda line: console.print(line, highlight=False))


def _live_page(
    address: str | None, run_id: str, console: RichConsole, said: str, control: LiveControl
) -> LivePage | None:
    """The --serve page, listening before the run folder is made (its address printed);
    exits 2 when the address cannot be listened on."""
    if address is None:
        return None
    from pinchpoint.outputs.live_page import LivePage
    from pinchpoint.plan.output import parse_address

    try:
        host, port = parse_address(address)
        page = LivePage(host, port, run_id, control=control)
    except ValueError as e:
        fail(f"{said} {address}: {e}")
    except OSError as e:
        fail(f"{said} {address}: cannot listen ({e.strerror or e})")
    else:
        console.print(f"Live page: {', '.join(page.urls)}")
        if control.fixed is None:
            console.print(f"Change its users: pinchpoint control {page.url} --users N")
        return page
    raise typer.Exit(2)


def _plan_text(plan_file: Path | None, url: str | None) -> tuple[str, str]:
    """The plan's text and the name its errors are reported under."""
    from pinchpoint.plan.model import read_plan_text

    if plan_file is not None:
        return read_plan_text(plan_file), str(plan_file)
    from pinchpoint.discover.init import init_plan

    text, found = init_plan(str(url))
    for problem in found.problems:
        warn(problem)
    tiers = " → ".join(t.name for t in found.tiers) or "no tier: the target only"
    typer.echo(f"Tiers found by `pinchpoint init`: {tiers}", err=True)
    return text, f"the plan init wrote for {url}"
