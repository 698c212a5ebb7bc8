"""The demo stack's kinds, each started for real on 127.0.0.1: gunicorn's worker classes,
HAProxy or two nginx in front, nginx's static answer; their logs parse with the tag."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from stack_helpers import (
    assert_all_gone,
    concurrently,
    fetch,
    processes_of,
    records,
    tagged,
    wait_for_lines,
)

from pinchpoint.demo import DemoStack, NginxNotFound, StackError, find_nginx
from pinchpoint.demo.haproxy import find_haproxy
from pinchpoint.demo.nginx import ProxyOptions
from pinchpoint.logformats.gunicorn import GUNICORN_FORMAT

try:
    find_nginx()
except NginxNotFound as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))


def by_name(stack: DemoStack) -> dict[str, dict]:
    return {c["name"]: c for c in stack.components()}


def need_haproxy() -> None:
    try:
        find_haproxy()
    except StackError as exc:
        pytest.skip(str(exc))


@pytest.mark.timeout(90)
def test_gthread_workers_serve_threads_at_once_and_log_each_request(tmp_path: Path) -> None:
    with DemoStack(tmp_path, workers=1, worker_class="gthread", threads=3) as stack:
        components = by_name(stack)
        took, statuses = concurrently(
            stack.url, [tagged("/sys_perf_check?wait=500", req) for req in range(3)]
        )
        procs = processes_of(stack.gunicorn_pid_file)
    assert_all_gone(procs)
    assert statuses == [200] * 3
    assert took < 1.3  # three threads at once, not one after another (1.5 s)
    assert components["gunicorn"]["workers"] == 3
    assert components["gunicorn"]["log"]["log_format"] == GUNICORN_FORMAT
    rows = records(components["gunicorn"])
    assert sorted(row.req_id for row in rows) == [0, 1, 2]
    assert all(row.duration_s >= 0.5 for row in rows)


@pytest.mark.timeout(90)
def test_uvicorn_workers_await_the_probe_and_log_in_gunicorn_format(tmp_path: Path) -> None:
    with DemoStack(tmp_path, workers=1, worker_class="uvicorn") as stack:
        components = by_name(stack)
        took, statuses = concurrently(
            stack.url, [tagged("/sys_perf_check?wait=500", req) for req in range(6)]
        )
        status, body = fetch(stack.url + tagged("/api/items?limit=2", 6))
        assert status == 200 and [i["id"] for i in json.loads(body)["items"]] == [1, 2]
        status, body = fetch(stack.url + tagged("/api/fsync?kb=4&n=2", 7), method="POST")
        assert status == 200 and json.loads(body)["n"] == 2
        procs = processes_of(stack.gunicorn_pid_file)
        assert len(procs) == 2  # the master and one worker process
    assert_all_gone(procs)
    assert statuses == [200] * 6
    assert took < 1.5  # one process, six waits at once
    assert "workers" not in components["gunicorn"]  # no pool of slots on an event loop
    rows = records(components["gunicorn"])
    assert sorted(row.req_id for row in rows) == list(range(8))
    assert all(row.duration_s >= 0.5 for row in rows if row.req_id < 6)
    assert {row.req_id for row in records(components["app"])} == set(range(8))


@pytest.mark.timeout(90)
def test_haproxy_queues_past_maxconn_and_logs_the_wait(tmp_path: Path) -> None:
    need_haproxy()
    options = ProxyOptions(maxconn=1)
    with DemoStack(tmp_path / "new", workers=4, front="haproxy", proxy=options) as stack:
        components = by_name(stack)
        _, statuses = concurrently(
            stack.url, [tagged("/sys_perf_check?wait=300", req) for req in range(3)]
        )
        assert fetch(stack.url + tagged("/static", 3)) == (200, b"ok")
        procs = processes_of(stack.haproxy_pid_file) + processes_of(stack.gunicorn_pid_file)
        wait_for_lines(stack.haproxy_log, 4)
    assert_all_gone(procs)
    assert statuses == [200] * 3
    assert list(components) == ["haproxy", "gunicorn", "app"]
    assert components["haproxy"]["calls"] == ["gunicorn"]
    rows = {row.req_id: row for row in records(components["haproxy"])}
    assert sorted(rows) == [0, 1, 2, 3]
    # One at a time through maxconn 1: the last waited for the two before it.
    waits = sorted(rows[req].queue_s or 0.0 for req in range(3))
    assert waits[0] < 0.1 and waits[2] > 0.45, waits
    assert all(rows[req].upstream_s >= 0.3 for req in range(3))
    assert rows[3].upstream_s is None  # /static never reached the server
    assert sorted(row.req_id for row in records(components["gunicorn"])) == [0, 1, 2]


@pytest.mark.timeout(90)
def test_two_nginx_in_a_row_each_log_the_request(tmp_path: Path) -> None:
    with DemoStack(tmp_path, workers=2, front="nginx2") as stack:
        components = by_name(stack)
        assert fetch(stack.url + tagged("/sys_perf_check?wait=100", 0))[0] == 200
        assert fetch(stack.url + tagged("/static", 1)) == (200, b"ok\n")
        procs = processes_of(stack.edge_pid_file) + processes_of(stack.nginx_pid_file)
        assert len(procs) == 4  # two masters, two workers
    assert_all_gone(procs)
    assert list(components) == ["edge", "nginx", "gunicorn", "app"]
    assert [c["calls"] for c in components.values()] == [["nginx"], ["gunicorn"], ["app"], []]
    edge = {row.req_id: row for row in records(components["edge"])}
    inner = {row.req_id: row for row in records(components["nginx"])}
    assert sorted(edge) == sorted(inner) == [0, 1]
    # The edge waited on the inner nginx, which waited on gunicorn (milliseconds, rounded).
    assert edge[0].upstream_s >= inner[0].upstream_s >= 0.1
    assert inner[1].upstream_s is None  # the inner nginx answered /static itself
    assert [row.req_id for row in records(components["gunicorn"])] == [0]


@pytest.mark.timeout(60)
def test_nginx_answers_static_without_the_app(tmp_path: Path) -> None:
    with DemoStack(tmp_path, workers=1) as stack:
        for req in range(5):
            assert fetch(stack.url + tagged("/static", req)) == (200, b"ok\n")
        components = by_name(stack)
    assert sorted(row.req_id for row in records(components["nginx"])) == list(range(5))
    assert records(components["gunicorn"]) == []
    assert records(components["app"]) == []


def test_stack_options_are_checked(tmp_path: Path) -> None:
    for kwargs, match in (
        ({"worker_class": "eventlet"}, "worker_class"),
        ({"threads": 2}, "gthread"),
        ({"worker_class": "gthread", "threads": 0}, "threads"),
        ({"front": "traefik"}, "front"),
        ({"edge": ProxyOptions()}, "nginx2"),
        ({"proxy": ProxyOptions(maxconn=2)}, "HAProxy"),
        ({"front": "haproxy", "proxy": ProxyOptions(limit_conn=2)}, "limit_conn"),
        ({"front": "haproxy", "proxy": ProxyOptions(protocol="uwsgi")}, "uwsgi"),
    ):
        with pytest.raises(ValueError, match=match):
            DemoStack(tmp_path, **kwargs)


def need_uwsgi() -> None:
    from pinchpoint_lab.uwsgi import find_uwsgi, system_python_matches

    found = find_uwsgi()
    if found is None or (found.plugin and not system_python_matches()):
        pytest.skip("no uWSGI that runs this Python (pip install uwsgi, or Debian's plugin)")


@pytest.mark.timeout(120)
def test_uwsgi_threads_serve_at_once_and_count_as_workers(tmp_path: Path) -> None:
    from pinchpoint_lab.uwsgi import UwsgiStack

    need_uwsgi()
    with UwsgiStack(tmp_path, workers=1, threads=3) as stack:
        components = by_name(stack)
        took, statuses = concurrently(
            stack.url, [tagged("/sys_perf_check?wait=500", req) for req in range(3)]
        )
        procs = processes_of(stack.uwsgi_pid_file)
        wait_for_lines(stack.uwsgi_access_log, 3)
    assert_all_gone(procs)
    assert statuses == [200] * 3
    assert took < 1.3  # three threads at once, not one after another (1.5 s)
    assert components["uwsgi"]["workers"] == 3
    assert sorted(row.req_id for row in records(components["uwsgi"])) == [0, 1, 2]


@pytest.mark.timeout(120)
def test_haproxy_in_front_of_uwsgi_speaks_http_to_it(tmp_path: Path) -> None:
    from pinchpoint_lab.uwsgi import UwsgiStack

    need_uwsgi()
    need_haproxy()
    with UwsgiStack(tmp_path, workers=1, front="haproxy") as stack:
        assert fetch(stack.url + tagged("/sys_perf_check?wait=10", 0))[0] == 200
        components = by_name(stack)
        wait_for_lines(stack.haproxy_log, 1)
    assert list(components) == ["haproxy", "uwsgi", "app"]
    assert [row.req_id for row in records(components["haproxy"])] == [0]


@pytest.mark.timeout(90)
def test_gunicorn_reads_its_pool_from_a_config_file(tmp_path: Path) -> None:
    with DemoStack(
        tmp_path, workers=2, worker_class="gthread", threads=2, server_config="file"
    ) as stack:
        took, statuses = concurrently(
            stack.url, [tagged("/sys_perf_check?wait=500", req) for req in range(4)]
        )
        procs = processes_of(stack.gunicorn_pid_file)
        argv = procs[0].cmdline()
    assert_all_gone(procs)
    assert statuses == [200] * 4
    assert took < 1.3  # two processes of two threads at once
    assert len(procs) == 3  # the master and two workers
    config = tmp_path / "gunicorn.conf.py"
    assert argv[argv.index("-c") + 1] == str(config)
    assert not {"--workers", "--threads", "--worker-class"} & set(argv)
    settings: dict = {}
    exec(config.read_text(), settings)
    assert (settings["workers"], settings["threads"], settings["worker_class"]) == (
        2,
        2,
        "gthread",
    )


@pytest.mark.timeout(120)
def test_uwsgi_reads_its_options_from_an_ini_file(tmp_path: Path) -> None:
    from configparser import ConfigParser

    from pinchpoint_lab.uwsgi import UwsgiStack

    need_uwsgi()
    with UwsgiStack(tmp_path, workers=2, threads=2, server_config="file") as stack:
        took, statuses = concurrently(
            stack.url, [tagged("/sys_perf_check?wait=500", req) for req in range(4)]
        )
        procs = processes_of(stack.uwsgi_pid_file)
        argv = procs[0].cmdline()
    assert_all_gone(procs)
    assert statuses == [200] * 4
    assert took < 1.3
    assert len(procs) == 3  # the master and two processes
    ini = tmp_path / "uwsgi.ini"
    assert argv[1:] == ["--ini", str(ini)]
    options = ConfigParser(strict=False)
    options.read(ini)
    assert options["uwsgi"]["master"] == "true"
    assert (options["uwsgi"]["processes"], options["uwsgi"]["threads"]) == ("2", "2")


@pytest.mark.timeout(90)
def test_checkouts_pass_one_at_a_time_across_worker_processes(tmp_path: Path) -> None:
    def checkout(req: int) -> int:
        return fetch(stack.url + tagged("/api/checkout?hold=300", req), method="POST")[0]

    with DemoStack(tmp_path, workers=3) as stack:
        started = time.monotonic()
        with ThreadPoolExecutor(3) as pool:
            statuses = list(pool.map(checkout, range(3)))
        took = time.monotonic() - started
        waits, _ = concurrently(
            stack.url, [tagged("/sys_perf_check?wait=300", req) for req in range(3, 6)]
        )
    assert statuses == [200] * 3
    assert took >= 0.9  # three holds of 300 ms one after another, though 3 workers are free
    assert waits < 0.8  # the same workers wait at once on anything else
