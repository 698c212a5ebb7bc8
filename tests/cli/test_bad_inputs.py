"""Bad input to the command line: each case is refused with exit code 2 and one line naming
the field (or flag) at fault, with no traceback, quickly, and before a run folder exists."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from .forked_cli import Done, ForkedCli

# Exit code, stderr and the CPU seconds of the longest case allowed: a check, not a
# benchmark. Each case is a child forked from one process that imported the command once
# (forked_cli.py), so its CPU is the refusal's own; the bound catches work done before the
# check (a pool of 10^12 users, a 40-day schedule). The command's CPU time, unlike its wall
# time, does not grow on a host busy with other tests; the wall time only has to end.
QUICK_S = 4.0
WALL_S = 15.0


class Took(NamedTuple):
    wall: float
    cpu: float


BASE = """\
[target]
url = "http://127.0.0.1:9/"

[load]
users = 1
duration = "1s"

[[request]]
path = "/"
"""

NGINX = """
[[component]]
name = "web"
[component.log]
path = "access.log"
format = "{format}"
log_format = '{log_format}'
"""

# (case id, (old, new) edit of BASE or the whole plan text, what the line must name)
PLAN_CASES: list[tuple[str, tuple[str, str] | str, str]] = [
    ("duration nan", ('duration = "1s"', "duration = nan"), "x.toml:6: load.duration"),
    ("duration inf", ('duration = "1s"', "duration = inf"), "x.toml:6: load.duration"),
    ("duration -inf", ('duration = "1s"', "duration = -inf"), "x.toml:6: load.duration"),
    ("duration 1e30h", ('duration = "1s"', 'duration = "1e30h"'), "x.toml:6: load.duration"),
    ("duration 1e30", ('duration = "1s"', "duration = 1e30"), "x.toml:6: load.duration"),
    ("duration 40 days", ('duration = "1s"', 'duration = "960h"'), "x.toml:6: load.duration"),
    ("timeout inf", ('duration = "1s"', 'duration = "1s"\ntimeout = inf'), "load.timeout"),
    ("warmup nan", ('duration = "1s"', 'duration = "1s"\nwarmup = nan'), "load.warmup"),
    ("think time nan", ('duration = "1s"', 'duration = "1s"\nthink_time = nan'), "think_time"),
    (
        "think time uniform inf",
        ('duration = "1s"', 'duration = "1s"\nthink_time = { uniform = [0, inf] }'),
        "think_time",
    ),
    ("request timeout nan", ('path = "/"', 'path = "/"\ntimeout = nan'), "request[0].timeout"),
    ("users 10^12", ("users = 1", "users = 1000000000000"), "x.toml:5: load.users"),
    ("users negative", ("users = 1", "users = -1"), "x.toml:5: load.users"),
    ("users 5000 digits", ("users = 1", "users = " + "9" * 5000), "x.toml"),
    ("threads 100000", ("users = 1", "users = 1\nthreads = 100000"), "load.threads"),
    (
        "upper 10^12 users",
        ("users = 1", "lower = 1\nupper = 1000000000000\nstep = 100000000000"),
        "load.upper",
    ),
    (
        "upper inf users",
        ("users = 1", "lower = 1\nupper = inf"),
        "load.upper",
    ),
    (
        "step nan",
        ("users = 1", "lower = 1\nupper = 2\nstep = nan"),
        "load.step",
    ),
    (
        "stage users 10^12",
        ('users = 1\nduration = "1s"', "[[load.stage]]\nusers = 1000000000000\nhold = 1"),
        "load.stage[0].users",
    ),
    (
        "phase rate nan",
        ('users = 1\nduration = "1s"', "[[load.phase]]\nduration = 1\narrival_rate = nan"),
        "load.phase[0].arrival_rate",
    ),
    (
        "phase rate inf",
        ('users = 1\nduration = "1s"', "[[load.phase]]\nduration = 1\narrival_rate = inf"),
        "load.phase[0].arrival_rate",
    ),
    (
        "phase duration inf",
        ('users = 1\nduration = "1s"', "[[load.phase]]\nduration = inf\narrival_rate = 1"),
        "load.phase[0].duration",
    ),
    (
        "max in flight 10^12",
        (
            'users = 1\nduration = "1s"',
            "max_in_flight = 1000000000000\n[[load.phase]]\nduration = 1\narrival_rate = 1",
        ),
        "load.max_in_flight",
    ),
    ("weight negative", ('path = "/"', 'path = "/"\nweight = -1'), "request[0].weight"),
    ("sampling nan", ("[[request]]", "[sampling]\ninterval = nan\n[[request]]"), "sampling"),
    ("port 99999", ("127.0.0.1:9/", "127.0.0.1:99999/"), "x.toml:2: target.url"),
    ("port 0", ("127.0.0.1:9/", "127.0.0.1:0/"), "x.toml:2: target.url"),
    ("port not a number", ("127.0.0.1:9/", "127.0.0.1:http/"), "x.toml:2: target.url"),
    ("ipv6 unclosed", ("127.0.0.1:9/", "[::1/"), "x.toml:2: target.url"),
    ("url scheme ftp", ("http://127.0.0.1:9/", "ftp://127.0.0.1:9/"), "x.toml:2: target.url"),
    ("url no host", ("http://127.0.0.1:9/", "http:///x"), "x.toml:2: target.url"),
    ("url space", ("127.0.0.1:9/", "127.0.0.1:9/a b"), "x.toml:2: target.url"),
    ("url crlf", ("127.0.0.1:9/", "127.0.0.1:9/\\r\\nX: 1"), "x.toml:2: target.url"),
    ("path space", ('path = "/"', 'path = "/a b"'), "x.toml:9: request[0].path"),
    ("path crlf", ('path = "/"', 'path = "/a\\r\\nX-Evil: 1"'), "x.toml:9: request[0].path"),
    ("path nul", ('path = "/"', 'path = "/a\\u0000"'), "x.toml:9: request[0].path"),
    ("path relative", ('path = "/"', 'path = "a"'), "x.toml:9: request[0].path"),
    ("method with space", ('path = "/"', 'path = "/"\nmethod = "GE T"'), "request[0].method"),
    ("method with crlf", ('path = "/"', 'path = "/"\nmethod = "GET\\r\\n"'), "request[0].method"),
    ("method empty", ('path = "/"', 'path = "/"\nmethod = ""'), "request[0].method"),
    (
        "header value crlf",
        ('path = "/"', 'path = "/"\nheaders = { "X-A" = "b\\r\\nX-B: c" }'),
        "request[0].headers.X-A",
    ),
    (
        "header name space",
        ('path = "/"', 'path = "/"\nheaders = { "X A" = "b" }'),
        "request[0].headers.X A",
    ),
    (
        "header name colon",
        ('path = "/"', 'path = "/"\nheaders = { "X:A" = "b" }'),
        "request[0].headers.X:A",
    ),
    (
        "agent port 99999",
        ("[[request]]", '[[agent]]\nname = "a"\nurl = "http://127.0.0.1:99999"\n[[request]]'),
        "agent[0].url",
    ),
    (
        "agent timeout inf",
        (
            "[[request]]",
            '[[agent]]\nname = "a"\nurl = "http://127.0.0.1:9"\ntimeout = inf\n[[request]]',
        ),
        "agent[0].timeout",
    ),
    (
        "agent token_env unset",
        (
            "[[request]]",
            '[[agent]]\nname = "a"\nurl = "http://127.0.0.1:9"\n'
            'token_env = "PINCHPOINT_TEST_UNSET"\n[[request]]',
        ),
        "x.toml:11: agent[0].token_env: environment variable PINCHPOINT_TEST_UNSET",
    ),
    (
        "agent ca_file missing",
        (
            "[[request]]",
            '[[agent]]\nname = "a"\nurl = "https://127.0.0.1:9"\n'
            'ca_file = "missing.pem"\n[[request]]',
        ),
        "x.toml:11: agent[0].ca_file: cannot read missing.pem",
    ),
    (
        "prometheus token_env unset",
        BASE + '[[prometheus]]\nurl = "http://127.0.0.1:9"\ntoken_env = "PINCHPOINT_TEST_UNSET"\n'
        '[prometheus.series.host]\npreset = "node_exporter"\n',
        "x.toml:12: prometheus[0].token_env",
    ),
    (
        "prometheus step nan",
        BASE + '[[prometheus]]\nurl = "http://127.0.0.1:9"\nstep = nan\n'
        '[prometheus.series.host]\npreset = "node_exporter"\n',
        "x.toml:12: prometheus[0].step",
    ),
    ("sla nan", BASE + "[sla]\np99_ms = nan\n", "x.toml:11: sla.p99_ms"),
    ("sla error rate inf", BASE + "[sla]\nerror_rate = inf\n", "x.toml:11: sla.error_rate"),
    ("host unresolvable", ("127.0.0.1:9", "pinchpoint-no-such-host.invalid:9"), "target.url"),
    (
        "nginx log_format no variable",
        BASE + NGINX.format(format="nginx", log_format="$"),
        "log_format",
    ),
    (
        "nginx log_format no duration",
        BASE + NGINX.format(format="nginx", log_format="$status"),
        "component[0].log.log_format",
    ),
    ("gunicorn log_format", BASE + NGINX.format(format="gunicorn", log_format="%("), "log_format"),
    ("haproxy log_format", BASE + NGINX.format(format="haproxy", log_format="%ci"), "log_format"),
    ("uwsgi log_format", BASE + NGINX.format(format="uwsgi", log_format="%("), "log_format"),
    ("apache log_format", BASE + NGINX.format(format="apache", log_format="%{"), "log_format"),
    ("envoy log_format", BASE + NGINX.format(format="envoy", log_format="%"), "log_format"),
    ("jsonlines log_format", BASE + NGINX.format(format="jsonlines", log_format="x"), "log_format"),
    ("probe log_format", BASE + NGINX.format(format="probe", log_format="x"), "log_format"),
    (
        "log path a folder",
        BASE
        + NGINX.format(format="nginx", log_format="$status $request_time").replace(
            "access.log", "."
        ),
        "x.toml:14: component[0].log.path: . is a folder",
    ),
    ("unknown format", BASE + NGINX.format(format="nginxx", log_format="$x"), "log.format"),
    (
        "pid 10^12",
        BASE + '[[component]]\nname = "w"\n[component.process]\npids = [1000000000000]\n',
        "component[0].process.pids",
    ),
    ("arrays nested 5000 deep", BASE + "x = " + "[" * 5000 + "]" * 5000 + "\n", "x.toml:10"),
    ("tables nested 5000 deep", BASE + "x = " + "{a = " * 5000 + "1" + "}" * 5000, "x.toml:10"),
    ("toml syntax", ("users = 1", "users = = 1"), "line 5"),
    ("empty plan", "", "x.toml: the plan is empty"),
    ("extra key", ('duration = "1s"', 'duration = "1s"\nduraton = 2'), "load.duraton"),
]


@pytest.fixture(scope="module")
def cli() -> Iterator[ForkedCli]:
    env = {**os.environ, "COLUMNS": "80"}
    env.pop("PINCHPOINT_TRACEBACK", None)
    env.pop("PINCHPOINT_TEST_UNSET", None)
    forked = ForkedCli(env)
    yield forked
    forked.close()


def _cli(cli: ForkedCli, args: list[str], cwd: Path) -> tuple[Done, Took]:
    (cwd / "tmp").mkdir(exist_ok=True)
    start = time.monotonic()
    done = cli.call(args, cwd, cwd / "tmp")
    return done, Took(time.monotonic() - start, done.cpu)


def _assert_refused(done: Done, seconds: Took, names: str, cwd: Path) -> None:
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len(lines) == 1, done.stderr
    assert names in lines[0]
    assert done.stdout == ""
    assert seconds.cpu < QUICK_S and seconds.wall < WALL_S, seconds
    assert not (cwd / "runs").exists() or not any((cwd / "runs").iterdir())
    assert not any((cwd / "tmp").iterdir())


def _plan_text(edit: tuple[str, str] | str) -> str:
    if isinstance(edit, str):
        return edit
    old, new = edit
    assert old in BASE
    return BASE.replace(old, new)


@pytest.mark.parametrize(
    ("edit", "names"), [c[1:] for c in PLAN_CASES], ids=[c[0] for c in PLAN_CASES]
)
def test_a_bad_plan_is_refused_by_run_in_one_line_before_a_run_folder_exists(
    cli: ForkedCli, tmp_path: Path, edit: tuple[str, str] | str, names: str
) -> None:
    (tmp_path / "x.toml").write_text(_plan_text(edit))
    done, seconds = _cli(cli, ["run", "x.toml", "-q"], tmp_path)
    _assert_refused(done, seconds, names, tmp_path)


@pytest.mark.parametrize(
    ("content", "names"),
    [
        (b"\xff\xfe\x00\x01binary\x00", "x.toml:1: not UTF-8"),
        (BASE.encode().replace(b'"/"', b'"/\xe9"'), "x.toml:9: not UTF-8"),
        (b"\x00" * 64, "x.toml"),
        (b"a = 1\n" * 200_000, "x.toml: larger than"),
    ],
    ids=["binary", "latin-1", "nul bytes", "1.2 MB"],
)
def test_a_plan_that_is_not_toml_text_is_refused_naming_its_line(
    cli: ForkedCli, tmp_path: Path, content: bytes, names: str
) -> None:
    (tmp_path / "x.toml").write_bytes(content)
    done, seconds = _cli(cli, ["run", "x.toml", "-q"], tmp_path)
    _assert_refused(done, seconds, names, tmp_path)


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--threads", "100000"], "--threads 100000"),
        (["--threads", "-1"], "--threads"),
        (["-d", "nan"], "-d/--duration nan"),
        (["-d", "inf"], "-d/--duration inf"),
        (["-d", "0"], "-d/--duration"),
        (["-d", "1e30"], "-d/--duration"),
        (["-c", "0"], "-c/--connections"),
        (["-c", "1000000000000"], "-c/--connections"),
        (["--rate", "inf"], "--rate inf"),
        (["--rate", "nan"], "--rate nan"),
        (["--rate", "-1"], "--rate"),
        (["--timeout", "0"], "--timeout"),
        (["--max-in-flight", "0"], "--max-in-flight"),
        (["--threads", "many"], "--threads"),
        (["--nope"], "--nope"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_a_bad_flag_of_load_is_refused_naming_the_flag(
    cli: ForkedCli, tmp_path: Path, args: list[str], names: str
) -> None:
    done, seconds = _cli(cli, ["load", "http://127.0.0.1:9/", *args], tmp_path)
    _assert_refused(done, seconds, names, tmp_path)


@pytest.mark.parametrize(
    ("url", "names"),
    [
        ("http://127.0.0.1:99999/", "TARGET"),
        ("http://[::1/", "TARGET"),
        ("http://127.0.0.1:9/a b", "TARGET"),
        ("http://127.0.0.1:9/\r\nX: 1", "TARGET"),
        ("ftp://127.0.0.1/", "TARGET"),
        ("http://pinchpoint-no-such-host.invalid/", "does not resolve"),
    ],
    ids=["port 99999", "ipv6 unclosed", "space", "crlf", "ftp", "unresolvable"],
)
def test_a_bad_url_given_to_load_is_refused(
    cli: ForkedCli, tmp_path: Path, url: str, names: str
) -> None:
    done, seconds = _cli(cli, ["load", url], tmp_path)
    _assert_refused(done, seconds, names, tmp_path)


def test_load_flags_given_with_a_plan_are_refused_not_ignored(
    cli: ForkedCli, tmp_path: Path
) -> None:
    (tmp_path / "plan.toml").write_text(BASE)
    done, seconds = _cli(cli, ["load", "plan.toml", "-c", "5", "-d", "1", "--rate", "10"], tmp_path)
    _assert_refused(done, seconds, "-c, -d, --rate go with a URL", tmp_path)


def test_load_refuses_a_bad_plan_before_it_starts(cli: ForkedCli, tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text(BASE.replace("users = 1", "users = 1\nthreads = 100000"))
    done, seconds = _cli(cli, ["load", "plan.toml"], tmp_path)
    _assert_refused(done, seconds, "plan.toml:6: load.threads", tmp_path)


def test_load_refuses_an_out_folder_that_is_a_file(cli: ForkedCli, tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("")
    done, seconds = _cli(cli, ["load", "http://127.0.0.1:9/", "--out", "taken"], tmp_path)
    _assert_refused(done, seconds, "--out taken: is a file", tmp_path)


@pytest.mark.parametrize(
    ("runs_dir", "names"),
    [("taken", "--runs-dir taken: is a file"), ("taken/runs", "is under taken, a file")],
    ids=["a file", "under a file"],
)
def test_run_refuses_a_runs_dir_that_cannot_hold_folders(
    cli: ForkedCli, tmp_path: Path, runs_dir: str, names: str
) -> None:
    (tmp_path / "taken").write_text("")
    (tmp_path / "x.toml").write_text(BASE)
    done, seconds = _cli(cli, ["run", "x.toml", "-q", "--runs-dir", runs_dir], tmp_path)
    _assert_refused(done, seconds, names, tmp_path)
    assert (tmp_path / "taken").read_text() == ""


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["run", "missing.toml"], "missing.toml"),
        (["run", "."], "'.'"),
        (["analyze", "empty"], "empty: not a run folder"),
        (["analyze", "missing"], "missing"),
        (["analyze", "broken"], "broken: cannot be analyzed"),
        (["demo", "--runs-dir", "taken"], "--runs-dir taken: is a file"),
        (["demo", "-t", "nan"], "--time nan"),
        (["compare", "empty", "empty", "--sla-ms", "nan"], "--sla-ms nan"),
        (["demo", "--workers", "100000"], "--workers"),
        (["import", "x.csv", "-f", "csv", "--runs-dir", "taken"], "--runs-dir taken"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_other_commands_refuse_bad_arguments_in_one_line(
    cli: ForkedCli, tmp_path: Path, args: list[str], names: str
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "run.json").write_text("{")
    (tmp_path / "taken").write_text("")
    done, seconds = _cli(cli, args, tmp_path)
    _assert_refused(done, seconds, names, tmp_path)


@pytest.mark.parametrize(
    "args",
    [["run"], ["run", "plan.toml", "--discover", "http://127.0.0.1:9/"]],
    ids=["none", "both"],
)
def test_run_takes_a_plan_file_or_discover_not_both_nor_neither(
    cli: ForkedCli, tmp_path: Path, args: list[str]
) -> None:
    (tmp_path / "plan.toml").write_text(BASE)
    done, seconds = _cli(cli, args, tmp_path)
    _assert_refused(done, seconds, "give a plan file or --discover URL", tmp_path)
