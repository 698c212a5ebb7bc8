"""Prometheus answers made into resources.parquet rows, on answers recorded from a real
Prometheus scraping node_exporter (samples/prometheus_node_exporter.json); the queries
of the presets, the parts a long run is asked in, the overlay on the sampler's rows and
the plan's `[[prometheus]]` tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pyarrow as pa
import pytest

from pinchpoint.collect.sources import prometheus
from pinchpoint.collect.sources.prometheus import (
    PrometheusCollector,
    overlay,
    prometheus_duration,
    query_range,
    rate_window,
    scrape_interval,
)
from pinchpoint.collect.sources.promql import (
    QueryError,
    fill,
    matrix_values,
    rows_table,
    series_queries,
    series_rows,
)
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import parse_plan
from pinchpoint.plan.prometheus import Prometheus, Series
from pinchpoint.rundir.schemas import RESOURCES_SCHEMA

SAMPLE = json.loads(
    (Path(__file__).parent / "samples" / "prometheus_node_exporter.json").read_text()
)
ANSWERS: dict[str, Any] = SAMPLE["answers"]
SELECTOR = f'instance="{SAMPLE["instance"]}"'
NODE = Series(preset="node_exporter", selector=SELECTOR)


def recorded_columns() -> dict[str, dict[float, float]]:
    return {c: matrix_values(ANSWERS[c])[0] for c in series_queries(NODE)}


def test_the_presets_queries_are_those_recorded() -> None:
    for column, query in series_queries(NODE).items():
        assert fill(query, 4.0, 1.0) == SAMPLE["queries"][column], column


def test_recorded_answers_make_one_host_row_a_step() -> None:
    table = rows_table(series_rows("host", recorded_columns()))
    assert table.schema == RESOURCES_SCHEMA
    rows = table.to_pylist()
    grid = [float(SAMPLE["start"] + k) for k in range(SAMPLE["end"] - SAMPLE["start"] + 1)]
    assert [r["ts"] for r in rows] == grid
    cpus = len(ANSWERS["per_cpu_user"]["data"]["result"])
    assert max(r["cpu_nice_cores"] for r in rows) > 0.5
    for row in rows:
        assert row["component"] == "host"
        assert row["processes"] == cpus and isinstance(row["processes"], int)
        assert 0 <= row["cpu_cores"] <= cpus
        # A core was busy at low priority through the window's second half.
        assert 0 <= row["cpu_nice_cores"] <= row["cpu_cores"]
        assert 0 < row["rss_bytes"] < row["memory_limit_bytes"]
        assert isinstance(row["rss_bytes"], int) and isinstance(row["run_queue"], int)
        for share in ("cpu_pressure", "memory_pressure", "io_pressure", "disk_util"):
            assert 0 <= row[share] <= 1, share
        assert row["disk_read_bytes_s"] >= 0 and row["net_rx_bytes_s"] >= 0
        # Not in the answers (no `lo`, no link speed where they were recorded): null.
        assert row["net_loopback_bytes_s"] is None and row["net_util"] is None
        assert row["lock_waits"] is None and row["cpu_periods"] is None


def test_several_series_are_summed_by_time() -> None:
    answer = ANSWERS["per_cpu_user"]
    values, count = matrix_values(answer)
    assert count == len(answer["data"]["result"]) >= 2
    for ts, total in values.items():
        each = [float(v) for s in answer["data"]["result"] for t, v in s["values"] if t == ts]
        assert total == pytest.approx(sum(each))


def test_an_error_answer_raises_with_prometheus_message() -> None:
    with pytest.raises(QueryError, match=r"bad_data: .*parse error"):
        matrix_values(SAMPLE["error"]["answer"])
    with pytest.raises(QueryError, match="expected a matrix"):
        matrix_values({"status": "success", "data": {"resultType": "vector", "result": []}})
    with pytest.raises(QueryError, match="malformed"):
        matrix_values({"status": "success", "data": {"resultType": "matrix", "result": [{}]}})


def test_nan_and_infinite_values_are_left_out() -> None:
    result = [{"metric": {}, "values": [[1, "NaN"], [2, "+Inf"], [3, "0.5"]]}]
    answer = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    assert matrix_values(answer) == ({3.0: 0.5}, 1)


def _mock(handler: Any) -> httpx.Client:
    return httpx.Client(base_url="http://prometheus", transport=httpx.MockTransport(handler))


def test_a_long_run_is_asked_in_parts_of_at_most_10000_points() -> None:
    asked: list[dict[str, str]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        params = {k: v[0] for k, v in parse_qs(request.url.query.decode()).items()}
        asked.append(params)
        start, end = float(params["start"]), float(params["end"])
        points = [[start + k, "1"] for k in range(int(end - start) + 1)]
        data = {"resultType": "matrix", "result": [{"metric": {}, "values": points}]}
        return httpx.Response(200, json={"status": "success", "data": data})

    with _mock(answer) as http:
        values = query_range(http, "up", 1000.0, 26000.0, 1.0)
    assert [(float(a["start"]), float(a["end"])) for a in asked] == [
        (1000, 10999),
        (11000, 20999),
        (21000, 26000),
    ]
    assert len(values) == 25001 and asked[0]["query"] == "up"


def test_a_server_that_does_not_answer_json_is_lost_but_a_bad_query_is_not() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if "bad" in str(request.url):
            return httpx.Response(400, json=SAMPLE["error"]["answer"])
        return httpx.Response(502, text="<html>Bad Gateway</html>")

    with _mock(answer) as http:
        with pytest.raises(QueryError, match="bad_data"):
            query_range(http, "bad", 0.0, 1.0, 1.0)
        with pytest.raises(prometheus._Lost, match="HTTP 502"):
            query_range(http, "up", 0.0, 1.0, 1.0)


def test_the_scrape_interval_comes_from_the_targets() -> None:
    with _mock(lambda r: httpx.Response(200, json=SAMPLE["targets"])) as http:
        assert scrape_interval(http) == 1.0
    with _mock(lambda r: httpx.Response(404, json={"status": "error"})) as http:
        assert scrape_interval(http) is None
    assert prometheus_duration("1m30s") == 90 and prometheus_duration("250ms") == 0.25
    assert prometheus_duration("soon") is None
    assert rate_window(1.0, 1.0) == 4.0 and rate_window(30.0, 15.0) == 60.0


def test_cadvisor_selects_the_container_by_label() -> None:
    queries = series_queries(Series(preset="cadvisor", container='we"b', selector='job="k"'))
    assert 'container_memory_working_set_bytes{container="we\\"b",job="k"}' in queries["rss_bytes"]
    assert queries["cpu_periods"].endswith("* $step")
    assert fill(queries["cpu_throttled"], 2.5, 1.0).endswith("[2500ms])) * 1")
    named = series_queries(
        Series(preset="cadvisor", name="db", columns={"cpu_cores": "sum(x)", "lock_waits": "y"})
    )
    assert 'container_spec_memory_limit_bytes{name="db"}' in named["memory_limit_bytes"]
    assert named["cpu_cores"] == "sum(x)" and named["lock_waits"] == "y"
    assert series_queries(Series(columns={"threads": "z"})) == {"threads": "z"}


def _table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=RESOURCES_SCHEMA)


def test_overlay_replaces_merges_and_adds() -> None:
    sampled = _table(
        [
            {"ts": 10.0, "component": "host", "cpu_cores": 1.0, "processes": 2},
            {"ts": 10.0, "component": "app", "cpu_cores": 0.5, "rss_bytes": 7},
            {"ts": 11.0, "component": "app", "cpu_cores": 0.6, "rss_bytes": 8},
            {"ts": 10.0, "component": "generator", "cpu_cores": 0.1},
        ]
    )
    fetched = _table(
        [
            {"ts": 10.2, "component": "host", "cpu_cores": 1.5, "processes": 2},
            {"ts": 10.1, "component": "app", "cpu_cores": 9.0, "cpu_throttled": 3},
            {"ts": 13.0, "component": "app", "cpu_cores": 9.0, "cpu_throttled": 4},
            {"ts": 10.0, "component": "db", "cpu_cores": 0.2},
        ]
    )
    modes = {"host": ("replace", 1.0), "app": ("merge", 1.0), "db": ("merge", 1.0)}
    rows = overlay(sampled, fetched, modes).to_pylist()
    by = {(r["component"], r["ts"]): r for r in rows}
    assert sorted(by) == [
        ("app", 10.0),
        ("app", 11.0),
        ("db", 10.0),
        ("generator", 10.0),
        ("host", 10.2),
    ]
    assert by["host", 10.2]["cpu_cores"] == 1.5
    # The sampler's values stay; the nearest row within a step fills what it lacks.
    assert by["app", 10.0]["cpu_cores"] == 0.5 and by["app", 10.0]["cpu_throttled"] == 3
    assert by["app", 11.0]["cpu_throttled"] == 3 and by["app", 11.0]["rss_bytes"] == 8
    assert by["db", 10.0]["cpu_cores"] == 0.2 and by["generator", 10.0]["cpu_cores"] == 0.1
    assert (
        overlay(sampled, RESOURCES_SCHEMA.empty_table(), modes).to_pylist() == sampled.to_pylist()
    )


def test_the_collector_reads_every_column_and_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    by_query = {q: ANSWERS[c] for c, q in SAMPLE["queries"].items()}

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/targets":
            return httpx.Response(200, json=SAMPLE["targets"])
        query = parse_qs(request.url.query.decode())["query"][0]
        return httpx.Response(200, json=by_query[query])

    monkeypatch.setattr(prometheus, "client", lambda server: _mock(answer))
    server = Prometheus(url="http://prometheus", rate_window=4.0, series={"host": NODE})
    collector = PrometheusCollector([server])
    collector.start("run", 1.0)
    collector.stop()
    table = collector.overlay(RESOURCES_SCHEMA.empty_table())
    assert table.num_rows == len(recorded_columns()["cpu_cores"])
    [report] = collector.report()["prometheus"]
    assert report["status"] == "ok" and report["rate_window_s"] == 4.0
    assert report["series"]["host"]["used"] == "merge"
    assert report["series"]["host"]["no_data"] == ["net_loopback_bytes_s", "net_util"]
    assert collector.problems == []


PLAN = """[target]
url = "http://127.0.0.1:1"
[load]
users = 1
duration = "2s"
[[request]]
path = "/"
[[component]]
name = "app"
"""


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            "[prometheus.series.db]\npreset = 'node_exporter'",
            ":12: prometheus[0].series.db: 'db' is",
        ),
        ("[prometheus.series.app]\npreset = 'cadvisor'", "series.app.container: preset"),
        ("[prometheus.series.app]\ncolumns = { cpu = 'x' }", ":13: prometheus[0].series.app.col"),
        ("[prometheus.series.host]\nselector = 'a=b'", ":13: prometheus[0].series.host.selector"),
        ("token = 's3cret'\n[prometheus.series.host]\npreset = 'node_exporter'", "no secret"),
    ],
)
def test_plan_errors_name_the_line_and_field(table: str, message: str) -> None:
    with pytest.raises(PlanError) as error:
        parse_plan(PLAN + '[[prometheus]]\nurl = "http://p:9090"\n' + table, "plan.toml")
    assert message in str(error.value)


def test_credentials_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    series = {"host": NODE}
    with pytest.raises(PlanError, match="PP_TEST_TOKEN is not set"):
        prometheus.client(Prometheus(url="http://p", token_env="PP_TEST_TOKEN", series=series))
    monkeypatch.setenv("PP_TEST_TOKEN", "abc")
    bearer = Prometheus(url="http://p", token_env="PP_TEST_TOKEN", series=series)
    with prometheus.client(bearer) as http:
        assert http.headers["Authorization"] == "Bearer abc"
    monkeypatch.setenv("PP_TEST_USER", "u")
    monkeypatch.setenv("PP_TEST_PASSWORD", "p")
    basic = Prometheus(
        url="http://p", username_env="PP_TEST_USER", password_env="PP_TEST_PASSWORD", series=series
    )
    with prometheus.client(basic) as http:
        assert isinstance(http.auth, httpx.BasicAuth)
