"""`pinchpoint load`: the engine alone, as wrk or vegeta are used."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pinchpoint.cli.app import Quiet, app
from pinchpoint.plan.errors import PlanError
from pinchpoint.terminal import Console, fail, warn

if TYPE_CHECKING:
    pass


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
    abort_on_error_rate: Annotated[
        float | None,
        typer.Option(
            "--abort-on-error-rate",
            metavar="SHARE",
            help="Stop as soon as one second's failed requests pass this share (0.5: half); "
            "exits 4.",
        ),
    ] = None,
    quiet: Quiet = False,
) -> None:
    """A plain load test with no diagnosis: throughput, latency percentiles and errors.

    Exits 4 when --abort-on-error-rate (or the plan's [sla] abort) stopped it."""
    _check_load(ctx)
    from pinchpoint.load.plain import UrlLoad, plain_load
    from pinchpoint.terminal.live import LiveView

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
            abort_on_error_rate,
        )
    elif http2 or insecure or ca_file is not None:
        fail(
            "--http2, --insecure and --ca-file go with a URL: "
            "a plan sets http, insecure and ca_file in [target]"
        )
        raise typer.Exit(2)
    else:
        source = Path(target)
    from pinchpoint.load.interrupts import catching

    with catching(say=warn) as caught:
        try:
            with LiveView(None, quiet or as_json) as view:
                summary = plain_load(source, out, on_tick=view)
        except (PlanError, OSError) as e:
            fail(e)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            fail("Interrupted again before the summary was written")
            raise typer.Exit(caught.exit_code() or 130) from None
        from pinchpoint.report.load_summary import interrupted_line, render_summary

        if as_json:
            import json

            print(json.dumps(summary, indent=2))
            if summary["interrupted"]:
                warn(interrupted_line(summary))
        else:
            render_summary(summary, Console())
    if caught.signals:
        raise typer.Exit(caught.exit_code())
    if summary.get("aborted"):
        if as_json:
            warn(f"Aborted: {summary['aborted']}")
        raise typer.Exit(4)


def _check_load(ctx: typer.Context) -> None:
    """`pinchpoint load`'s arguments, checked before anything starts; exits 2 on a bad one."""
    from pinchpoint.cli.arguments import check_load_args

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
