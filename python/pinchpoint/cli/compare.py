"""`pinchpoint compare A B`: two runs side by side."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pinchpoint.cli.app import app
from pinchpoint.compare.tolerances import Tolerances
from pinchpoint.terminal import Console, fail

if TYPE_CHECKING:
    from pinchpoint.compare.result import ComparisonResult


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
    gate: Annotated[
        bool,
        typer.Option(
            "--gate", help="Exit 1 when B (NEW) is worse than A (BASE) past the tolerances."
        ),
    ] = False,
    p95_ratio: Annotated[
        float, typer.Option("--p95-ratio", help="Gate: NEW's p95 at most this × BASE's.")
    ] = Tolerances.p95_ratio,
    p99_ratio: Annotated[
        float, typer.Option("--p99-ratio", help="Gate: NEW's p99 at most this × BASE's.")
    ] = Tolerances.p99_ratio,
    throughput_ratio: Annotated[
        float,
        typer.Option(
            "--throughput-ratio", help="Gate: NEW's successful req/s at least this × BASE's."
        ),
    ] = Tolerances.throughput_ratio,
    error_rate_rise: Annotated[
        float,
        typer.Option(
            "--error-rate-rise", help="Gate: NEW's failed share at most BASE's plus this."
        ),
    ] = Tolerances.error_rate_rise,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Gate: write its checks as JUnit XML here.")
    ] = None,
) -> None:
    """Compare two runs: percentile ladder, SLA error rate, significance, QQ plot; with
    --gate, a regression gate for CI."""
    from pinchpoint.compare import compare as compare_runs
    from pinchpoint.terminal.comparison import render_comparison

    try:
        from pinchpoint.cli.arguments import check_number
        from pinchpoint.plan.user_paths import check_output_file

        if sla_ms is not None:
            check_number("--sla-ms", sla_ms, 0, 3_600_000, low_open=True)
        tolerances = Tolerances(p95_ratio, p99_ratio, throughput_ratio, error_rate_rise)
        if gate:
            for flag, value in (("--p95-ratio", p95_ratio), ("--p99-ratio", p99_ratio)):
                check_number(flag, value, 0, 1000, low_open=True)
            check_number("--throughput-ratio", throughput_ratio, 0, 1000)
            check_number("--error-rate-rise", error_rate_rise, -1, 1)
        elif junit is not None:
            raise ValueError("--junit: is the report of --gate, which is not given")
        for path, flag in ((out, "--out"), (junit, "--junit")):
            if path is not None:
                check_output_file(path, flag)
        result = compare_runs(a, b, out, sla_ms)
    except (ValueError, FileNotFoundError) as e:
        fail(e)
        raise typer.Exit(2) from None
    if as_json:
        import json

        print(json.dumps(result.to_dict(), indent=2))
    else:
        render_comparison(result, Console())
    if gate:
        _gate(result, tolerances, a, b, junit, as_json)


def _gate(
    result: ComparisonResult, tolerances: Tolerances, a: Path, b: Path, junit: Path | None,
    as_json: bool,
) -> None:  # fmt: skip
    """Says each check (on stderr with --json), writes the JUnit report, exits 1 if any
    check failed."""
    import sys

    from pinchpoint.compare.gate import checks
    from pinchpoint.compare.junit import write_junit

    done = checks(result, tolerances)
    stream = sys.stderr if as_json else sys.stdout
    for check in done:
        print(f"gate: {check.line()}", file=stream)
    if junit is not None:
        try:
            write_junit(junit, done, str(a), str(b))
        except OSError as e:
            fail(f"--junit {junit}: cannot be written ({e.strerror or e})")
            raise typer.Exit(2) from None
    failed = [c.name for c in done if not c.passed]
    if failed:
        print(f"gate: FAILED ({', '.join(failed)})", file=stream)
        raise typer.Exit(1)
    print("gate: passed", file=stream)
