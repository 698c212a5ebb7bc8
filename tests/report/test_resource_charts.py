"""The accept-backlog and host I/O charts: drawn when the samples have those columns."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
from fake_run import make_verdict

from pinchpoint.collect.resources.sampler import conform
from pinchpoint.report.html import write_report
from pinchpoint.report.resource_charts import backlog_over_time, more_over_time


def with_new_columns(run_dir: Path) -> pl.DataFrame:
    """The fake run's samples in today's schema: gunicorn's backlog grows, the host's
    disk and network carry bytes."""
    frame = pl.from_arrow(conform(pq.read_table(run_dir / "resources.parquet")))
    assert isinstance(frame, pl.DataFrame)
    t0 = float(frame["ts"].min())
    is_host = pl.col("component") == "host"
    frame = frame.with_columns(
        listen_backlog=pl.when(pl.col("component") == "gunicorn")
        .then(((pl.col("ts") - t0) * 2).cast(pl.Int32))
        .when(is_host)
        .then(None)
        .otherwise(0),
        disk_write_bytes_s=pl.when(is_host).then(pl.lit(3e6)).otherwise(None),
        net_loopback_bytes_s=pl.when(is_host).then(pl.lit(8e6)).otherwise(None),
    )
    pq.write_table(frame.to_arrow(), run_dir / "resources.parquet")
    return frame


def test_the_report_draws_backlog_and_host_io(run_dir: Path) -> None:
    frame = with_new_columns(run_dir)
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert page.count('class="plotly-graph-div"') == 11
    resources = page[page.index('id="resources"') :]
    assert 'id="pp-backlog-time"' in resources and 'id="pp-io-time"' in resources

    figure = backlog_over_time(frame, make_verdict(), float(frame["ts"].min()), [], None)
    assert figure is not None
    lines = {trace["name"]: trace for trace in figure.data}
    assert set(lines) == {"nginx", "gunicorn"}  # not the host, not the generator
    assert max(lines["gunicorn"]["y"]) == int(frame["listen_backlog"].max())


def test_old_samples_have_no_such_charts(run_dir: Path) -> None:
    frame = pl.read_parquet(run_dir / "resources.parquet")
    assert more_over_time(frame, make_verdict(), 0.0, [], None) == []
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert page.count('class="plotly-graph-div"') == 9
    assert 'id="pp-backlog-time"' not in page and 'id="pp-io-time"' not in page
