"""Property-based fuzzing of `init`'s readers: the command lines of the servers it knows
(nginx, HAProxy, PostgreSQL, uWSGI, gunicorn) and their config files (nginx's, HAProxy's,
postgresql.conf, uWSGI's ini/yaml/xml/json, gunicorn.conf.py), from strategies of
plausible words and text with random bytes, control characters and deep nesting. A reader
gives its tier, with what it cannot read as warnings; it never raises, and every note and
warning it writes is one printable line.

The budget is Hypothesis's profile (tests/conftest.py); thousands of examples with

    HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest tests/discover/test_readers_fuzz.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from pinchpoint.collect.servers import gunicorn, uwsgi
from pinchpoint.collect.servers.pool import ServerProcess
from pinchpoint.discover import haproxy, nginx, pg_conf
from pinchpoint.discover.haproxy_conf import load
from pinchpoint.discover.nginx_conf import Disk
from pinchpoint.discover.tier import Address, Tier

FLAGS = ["-c", "-p", "-g", "-e", "-f", "-C", "-D", "--", "-T", "-V", "-q", "-s", "--ini"]
TITLE = ["nginx:", "master", "process", "uwsgi", "gunicorn", "postgres", "haproxy"]
PUNCT = ["{", "}", ";", '"', "'", "\\", "$", "${", "#", "=", ":", "[", "]", "(", ")", "<", ">"]
WORDS = [
    "http", "server", "listen", "location", "proxy_pass", "uwsgi_pass", "grpc_pass",
    "fastcgi_pass", "upstream", "include", "access_log", "log_format", "pid", "events",
    "worker_processes", "worker_connections", "limit_conn", "root", "return", "if",
    "global", "defaults", "frontend", "backend", "listen", "bind", "use_backend",
    "default_backend", "log", "option", "httplog", "maxconn", "mode", "stdout",
    "[uwsgi]", "processes", "threads", "socket", "http-socket", "logto", "master",
    "workers", "bind", "worker_class", "accesslog", "access_log_format",
    "log_destination", "logging_collector", "log_directory", "include_dir",
    "include_if_exists", "data_directory", "on", "off", "auto", "127.0.0.1:8000",
    "unix:/run/app.sock", "/", "/x", "*", "*.conf", "~", "^~", "=", "10", "-1", "1e400",
    "%d", "%(", "$remote_addr", "$request_time", "0x10", "\x00", "\x1b[31m", "\r",
]  # fmt: skip
word = st.one_of(st.sampled_from(WORDS + PUNCT), st.text(max_size=12))
separator = st.sampled_from([" ", "\n", "\t", "", " \\\n"])
config_text = st.one_of(
    st.lists(st.tuples(word, separator), max_size=80).map(
        lambda pairs: "".join(w + s for w, s in pairs)
    ),
    st.integers(1, 3000).map(lambda n: "http {" * n),
    st.binary(max_size=400).map(lambda b: b.decode("latin-1")),
)
argv = st.lists(
    st.one_of(st.sampled_from(FLAGS + TITLE + WORDS), st.text(max_size=20)), max_size=12
)


def printable_lines(tier: Tier) -> None:
    for line in tier.notes + tier.warnings:
        assert isinstance(line, str)


@given(argv)
def test_command_lines_are_read_whatever_they_hold(words: list[str]) -> None:
    command = nginx.command_line(words)
    assert isinstance(command.binary, str)
    assert haproxy.command_line(words).configs is not None
    _, folder = pg_conf.command_line(words)
    assert folder is None or isinstance(folder, Path)
    process = ServerProcess(1, words or ["x"], cwd=Path("/nonexistent"))
    assert isinstance(uwsgi.settings(process, files=False), dict)
    assert isinstance(gunicorn.settings(process, 2, files=False), dict)


@given(config_text, st.one_of(st.none(), config_text), argv)
@example("http {" * 2000, None, [])
def test_an_nginx_config_gives_a_tier_or_warnings(
    text: str, directives: str | None, words: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        conf = Path(folder) / "nginx.conf"
        conf.write_text(text, errors="surrogateescape")
        tier = Tier("nginx", "proxy", 1)
        config = nginx.read_config(Disk(), str(conf), folder + "/", nginx.Build(), directives, tier)
        nginx.describe(config, Address("127.0.0.1", 8080), "/x", tier)
    printable_lines(tier)


@given(config_text, argv)
@example("global\n" + "  log stdout format raw local0\n" * 5000, [])
def test_a_haproxy_config_gives_a_tier_or_warnings(text: str, words: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        conf = Path(folder) / "haproxy.cfg"
        conf.write_text(text, errors="surrogateescape")
        command = haproxy.command_line(["haproxy", "-f", str(conf), *words])
        sections, _, unread = load([str(conf)])
        tier = Tier("haproxy", "proxy", 1, warnings=list(unread))
        haproxy.describe(sections, command, folder, Address("127.0.0.1", 8080), tier)
    printable_lines(tier)


@given(config_text, argv)
def test_postgresql_conf_gives_settings_or_problems(text: str, words: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "postgresql.conf").write_text(text, errors="surrogateescape")
        found = pg_conf.settings_of(["postgres", "-D", folder, *words], Path(folder))
    assert all(isinstance(p, str) for p in found.problems)


@given(config_text, st.sampled_from(["ini", "yaml", "xml", "json"]), config_text)
@example("[" * 5000, "json", "(" * 5000)
@example("<a>" * 5000, "xml", "workers = " + "1 + " * 20000 + "1")
def test_app_server_configs_give_settings(text: str, kind: str, python: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        conf = Path(folder) / f"uwsgi.{kind}"
        conf.write_text(text, errors="surrogateescape")
        process = ServerProcess(1, ["uwsgi", f"--{kind}", str(conf)], cwd=Path(folder))
        assert all(isinstance(v, str) for v, _ in uwsgi.settings(process).values())
        (Path(folder) / "gunicorn.conf.py").write_text(python, errors="surrogateescape")
        process = ServerProcess(1, ["gunicorn", "app:app"], cwd=Path(folder))
        assert all(isinstance(v, str) for v, _ in gunicorn.settings(process, 2).values())
