"""`pinchpoint compare A B`: two runs side by side."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pinchpoint.cli.app import app
from pinchpoint.terminal import Console, fail

if TYPE_CHECKING:
    pass


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
    from pinchpoint.terminal.comparison import render_comparison

    try:
        if sla_ms is not None:
            from pinchpoint.cli.arguments import check_number

            check_number("--sla-ms", sla_ms, 0, 3_600_000, low_open=True)
        if out is not None:
            from pinchpoint.user_paths import check_output_file

            check_output_file(out, "--out")
        result = compare_runs(a, b, out, sla_ms)
    except (ValueError, FileNotFoundError) as e:
        fail(e)
        raise typer.Exit(2) from None
    if as_json:
        import json

        print(json.dumps(result.to_dict(), indent=2))
    else:
        render_comparison(result, Console())
