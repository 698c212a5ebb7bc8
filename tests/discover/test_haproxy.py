"""HAProxy's tier from its config files: words and sections, the frontend bound where the
request arrived, its backend's servers, its log and format, limits and pid file; then real
HAProxy (the demo's, and one in master-worker mode as systemd runs it) read from their
processes, and the walk from a demo URL."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from pinchpoint.demo import DemoStack, NginxNotFound, StackError, find_nginx
from pinchpoint.demo.haproxy import find_haproxy
from pinchpoint.demo.nginx import ProxyOptions
from pinchpoint.discover import haproxy
from pinchpoint.discover.haproxy import (
    DEMO_LOG,
    HTTPLOG_FORMAT,
    Command,
    command_line,
    describe,
)
from pinchpoint.discover.haproxy_conf import config_files, load, words
from pinchpoint.discover.init import init_plan
from pinchpoint.discover.listeners import Sockets, root_of
from pinchpoint.discover.readers import READERS
from pinchpoint.discover.tier import Address, Tier
from pinchpoint.discover.walk import walk
from pinchpoint.plan.model import parse_plan
from pinchpoint_lab.ports import free_port


def _haproxy() -> Path | None:
    try:
        find_nginx()  # the demo stack checks for it whatever its front
        return find_haproxy()
    except (StackError, NginxNotFound):
        return None


HAPROXY = _haproxy()
needs_haproxy = pytest.mark.skipif(HAPROXY is None, reason="HAProxy (and nginx) not installed")
PORT = 8080

GLOBAL = """\
global
    maxconn 4096
    nbthread 2
    pidfile /run/haproxy-test.pid
    log /dev/log local0
    log /dev/log local1 notice

defaults
    mode http
    log global
    option httplog
    timeout connect 5s
"""


def write(root: Path, files: dict[str, str]) -> list[str]:
    """Writes the files under root; their paths, in order."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return [str(root / name) for name in files]


def tier_of(
    paths: list[str], port: int = PORT, pid: int | None = None, command: Command | None = None
) -> Tier:
    """The tier the config files give for a request to 127.0.0.1:port."""
    tier = Tier("haproxy", "proxy", pid or os.getpid())
    files, warnings = config_files(paths, "/")
    sections, _, unread = load(files)
    tier.warnings += warnings + unread
    describe(sections, command or Command(paths), "/", Address("127.0.0.1", port), tier)
    return tier


def front(body: str = "    default_backend app\n", bind: str = f"127.0.0.1:{PORT}") -> str:
    return f"frontend web\n    bind {bind}\n{body}"


BACKEND = "backend app\n    server app1 127.0.0.1:9000 check\n"


# The config's text.


def test_words_split_as_haproxy_splits_them() -> None:
    assert words('log-format "%ci:%cp [%tr] %ft" # the format') == [
        "log-format",
        "%ci:%cp [%tr] %ft",
    ]
    assert words(r"log-format %ci\ %cp\ [%t]\#") == ["log-format", "%ci %cp [%t]#"]
    assert words("  server  app1\t127.0.0.1:9 'a b'\"c\"  ") == [
        "server",
        "app1",
        "127.0.0.1:9",
        "a bc",
    ]
    assert words("# only a comment") == []


def test_the_command_line_gives_configs_pid_file_and_directory() -> None:
    argv = "haproxy -Ws -f /etc/haproxy/haproxy.cfg -f conf.d -p /run/haproxy.pid"
    argv += " -S /run/haproxy-master.sock -sf 12 13"
    assert command_line(argv.split()) == Command(
        ["/etc/haproxy/haproxy.cfg", "conf.d"], "/run/haproxy.pid"
    )
    assert command_line(["haproxy", "-C", "/srv", "-db", "--", "a.cfg", "b.cfg"]) == Command(
        ["a.cfg", "b.cfg"], None, "/srv"
    )


# Where the request goes.


def test_a_debian_style_config_logging_to_syslog_warns_how_to_log_to_a_file(
    tmp_path: Path,
) -> None:
    config = GLOBAL + "\n" + front() + "    maxconn 300\n\n" + BACKEND
    tier = tier_of(write(tmp_path, {"haproxy.cfg": config}))
    cfg = tmp_path / "haproxy.cfg"
    assert tier.next_hops == [Address("127.0.0.1", 9000)]
    assert tier.pid_file == Path("/run/haproxy-test.pid")
    assert tier.log_path is None
    assert f"maxconn 4096 in global from {cfg}:2" in tier.notes
    assert f"nbthread 2 in global from {cfg}:3" in tier.notes
    assert f"maxconn 300 in frontend web from {cfg}:17" in tier.notes
    assert f"option httplog from {cfg}:11" in tier.notes
    assert f"default_backend app from {cfg}:16" in tier.notes
    (syslog,) = [w for w in tier.warnings if "syslog" in w]
    assert syslog.startswith(f"HAProxy logs to syslog at /dev/log ({cfg}:5): which file the")
    assert syslog.endswith(DEMO_LOG)


def test_a_config_directory_is_read_in_name_order_each_file_its_own_sections(
    tmp_path: Path,
) -> None:
    paths = write(
        tmp_path,
        {
            "conf.d/20-front.cfg": front(),
            "conf.d/10-global.cfg": GLOBAL,
            "conf.d/30-back.cfg": BACKEND,
            "conf.d/README": "not a config\n",
        },
    )
    directory = str(Path(paths[0]).parent)
    files, _ = config_files([directory], "/")
    assert [Path(f).name for f in files] == ["10-global.cfg", "20-front.cfg", "30-back.cfg"]
    tier = tier_of([directory])
    assert tier.next_hops == [Address("127.0.0.1", 9000)]
    # The frontend takes the defaults of the file before it.
    assert f"option httplog from {tmp_path}/conf.d/10-global.cfg:11" in tier.notes


def test_a_listen_section_passes_to_its_own_servers_as_they_are_written(tmp_path: Path) -> None:
    config = GLOBAL + (
        f"listen web\n    bind :::{PORT},127.0.0.1:9100-9110\n"
        "    default-server maxconn 8\n"
        "    server a 127.0.0.1:9001 maxconn 2\n"
        "    server b 127.0.0.1\n"  # the port the request came to
        "    server c ipv4@127.0.0.1:+1\n"
        "    server d unix@/run/app.sock\n"
        "    server e /run/other.sock\n"
        "    server f 127.0.0.1:9006 backup\n"
        "    server g 127.0.0.1:9007 disabled\n"
    )
    paths = write(tmp_path, {"haproxy.cfg": config})
    tier = tier_of(paths)
    assert tier.next_hops == [
        Address("127.0.0.1", 9001),
        Address("127.0.0.1", PORT),
        Address("127.0.0.1", PORT + 1),
        Address(unix=Path("/run/app.sock")),
        Address(unix=Path("/run/other.sock")),
    ]
    notes = "\n".join(tier.notes)
    assert "server a 127.0.0.1:9001 from" in notes and "at most 2 requests at once" in notes
    assert "server b 127.0.0.1 from" in notes and "at most 8 requests at once" in notes
    assert tier.limit == 2 + 4 * 8  # the servers followed, each its maxconn or the default's
    assert "server f 127.0.0.1:9006 backup from" in notes and "not followed" in notes
    assert tier_of(paths, port=9105).next_hops[1] == Address("127.0.0.1", 9105)


def test_the_frontend_is_the_one_bound_to_the_port_with_its_named_defaults(
    tmp_path: Path,
) -> None:
    config = GLOBAL + (
        "defaults tcpish\n    mode tcp\n    option tcplog\n"
        "defaults web\n    mode http\n    log global\n    option httplog\n"
        "    default_backend other\n"
        "frontend first from tcpish\n    bind 127.0.0.1:7000\n    default_backend app\n"
        f"frontend second from web\n    bind *:{PORT}\n"
        "    use_backend app if { path_beg /api }\n"
        f"{BACKEND}backend other\n    server o 127.0.0.1:9009\n"
    )
    paths = write(tmp_path, {"haproxy.cfg": config})
    tier = tier_of(paths)
    assert any(n.startswith(f"frontend second from {tmp_path}") for n in tier.notes)
    assert tier.next_hops == [Address("127.0.0.1", 9009)]  # the defaults' default_backend
    assert any(n.startswith("use_backend app if { path_beg /api } from") for n in tier.notes)
    tcp = tier_of(paths, port=7000)
    assert any("is not `mode http`" in w for w in tcp.warnings)
    assert any("HAProxy logs with `option tcplog`" in w for w in tcp.warnings)
    nowhere = tier_of(paths, port=7070)
    assert (
        nowhere.warnings[-1] == "no frontend or listen section of the config binds 127.0.0.1:7070"
    )


def test_missing_config_files_give_warnings_and_a_folder_gives_its_regular_files(
    tmp_path: Path,
) -> None:
    write(tmp_path, {"conf.d/a.cfg": GLOBAL + front() + BACKEND})
    # HAProxy reads a folder's regular `*.cfg` files only.
    (tmp_path / "conf.d" / "b.cfg").mkdir()
    os.mkfifo(tmp_path / "conf.d" / "c.cfg")
    tier = tier_of([str(tmp_path / "conf.d"), str(tmp_path / "missing.cfg")])
    assert tier.next_hops == [Address("127.0.0.1", 9000)]
    assert not [w for w in tier.warnings if "b.cfg" in w or "c.cfg" in w]
    assert f"cannot read {tmp_path}/missing.cfg: No such file or directory" in tier.warnings


# The log.


def logging_to_stdout(frontend: str) -> str:
    return (
        "global\n    log stdout format raw local0 info\n"
        "defaults\n    mode http\n    log global\n" + frontend + BACKEND
    )


@contextlib.contextmanager
def writing_to(output: Path | int) -> Iterator[int]:
    """A process whose stdout is output (a file, or a pipe): what `log stdout` writes to."""
    if isinstance(output, Path):
        with output.open("w") as f:
            process = subprocess.Popen(["sleep", "60"], stdout=f)
    else:
        process = subprocess.Popen(["sleep", "60"], stdout=output)
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def test_logging_to_stdout_gives_the_file_stdout_goes_to(tmp_path: Path) -> None:
    paths = write(
        tmp_path,
        {"h.cfg": logging_to_stdout(front("    option httplog\n    default_backend app\n"))},
    )
    with writing_to(tmp_path / "out.log") as pid:
        tier = tier_of(paths, pid=pid)
    assert (tier.log_path, tier.log_format, tier.log_format_string) == (
        tmp_path / "out.log",
        "haproxy",
        None,
    )
    with writing_to(subprocess.PIPE) as pid:
        piped = tier_of(paths, pid=pid)
    assert piped.log_path is None
    assert any("which goes to pipe:[" in w for w in piped.warnings)


@pytest.mark.parametrize(
    ("format_line", "string", "warned"),
    [
        (f'log-format "{HTTPLOG_FORMAT}"', None, False),
        ('log-format "%ci [%tr] %ST %Ta %{+Q}r"', "%ci [%tr] %ST %Ta %{+Q}r", True),
    ],
)
def test_a_log_format_is_httplog_written_out_or_kept_and_warned_of(
    tmp_path: Path, format_line: str, string: str | None, warned: bool
) -> None:
    body = f"    {format_line}\n    default_backend app\n"
    paths = write(tmp_path, {"h.cfg": logging_to_stdout(front(body))})
    with writing_to(tmp_path / "out.log") as pid:
        tier = tier_of(paths, pid=pid)
    assert (tier.log_format, tier.log_format_string) == ("haproxy", string)
    assert any("is not httplog's" in w for w in tier.warnings) == warned


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("    no option httplog\n", "HAProxy logs with `no option httplog`"),
        ("    option httplog clf\n", "HAProxy logs with `option httplog clf`"),
        ("", "HAProxy logs with no `option httplog`"),
        ("    option httplog\n    no log\n", "logs nowhere: log to HAProxy's stdout"),
    ],
)
def test_logs_the_haproxy_format_cannot_read_are_warned_of(
    tmp_path: Path, body: str, said: str
) -> None:
    paths = write(tmp_path, {"h.cfg": logging_to_stdout(front(body + "    default_backend app\n"))})
    tier = tier_of(paths)
    assert tier.log_path is None
    assert any(said in w for w in tier.warnings), tier.warnings


def test_without_a_pid_file_the_warning_says_where_to_add_one(tmp_path: Path) -> None:
    paths = write(tmp_path, {"h.cfg": logging_to_stdout(front())})
    tier = tier_of(paths)
    assert tier.pid_file is None
    assert (
        "HAProxy writes no pid file: add `pidfile /run/haproxy.pid` to its global section "
        f"({tmp_path}/h.cfg:1), or start it with -p"
    ) in tier.warnings


# Real HAProxy.


@needs_haproxy
@pytest.mark.timeout(60)
def test_a_master_worker_haproxy_is_read_from_its_master(tmp_path: Path) -> None:
    port = free_port()
    paths = write(
        tmp_path,
        {
            "conf.d/10-global.cfg": "global\n    log stdout format raw local0 info\n"
            "defaults\n    mode http\n    log global\n    option httplog\n"
            "    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n",
            "conf.d/20-web.cfg": front(bind=f"127.0.0.1:{port}") + BACKEND,
        },
    )
    argv = [str(HAPROXY), "-Ws", "-f", str(Path(paths[0]).parent), "-p", str(tmp_path / "h.pid")]
    with (tmp_path / "out.log").open("w") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        # the master binds before it forks the worker that keeps the socket: wait past it
        listener = wait_for_listener(port, other_than=process.pid)
        master = root_of(listener)
        tier = haproxy.read(
            master, psutil.Process(master).cmdline(), Address("127.0.0.1", port), "/"
        )
    finally:
        process.terminate()
        process.wait(10)
    assert master == process.pid != listener  # the master above the worker that listens
    assert tier.pid_file == tmp_path / "h.pid"
    assert tier.log_path == tmp_path / "out.log"
    assert tier.next_hops == [Address("127.0.0.1", 9000)]
    assert tier.warnings == []


def wait_for_listener(port: int, other_than: int | None = None) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pid = Sockets.read().tcp.get(port)
        if pid is not None and pid != other_than:
            return pid
        time.sleep(0.05)
    raise AssertionError(f"no process other than {other_than} listens on {port}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoStack]:
    if HAPROXY is None:
        pytest.skip("HAProxy (and nginx) not installed")
    options = ProxyOptions(maxconn=3)
    with DemoStack(
        tmp_path_factory.mktemp("stack"), workers=1, front="haproxy", proxy=options
    ) as started:
        yield started


@pytest.mark.timeout(90)
def test_the_demo_haproxy_is_read_from_its_process(stack: DemoStack) -> None:
    pid = int(stack.haproxy_pid_file.read_text())
    argv = psutil.Process(pid).cmdline()
    tier = haproxy.read(pid, argv, Address("127.0.0.1", stack.nginx_port), "/sys_perf_check")
    assert (tier.name, tier.role, tier.pid) == ("haproxy", "proxy", pid)
    assert tier.log_path == stack.haproxy_log
    assert (tier.log_format, tier.log_format_string) == ("haproxy", None)
    assert tier.next_hops == [Address("127.0.0.1", stack.gunicorn_port)]
    assert any("at most 3 requests at once" in n for n in tier.notes)
    # The demo writes HAProxy's pid file itself: HAProxy's config and command line do not say.
    assert tier.pid_file is None
    assert [w for w in tier.warnings if "pid file" not in w] == []


@pytest.mark.timeout(90)
def test_the_walk_from_a_demo_url_goes_through_haproxy_to_gunicorn(stack: DemoStack) -> None:
    found = walk(stack.url + "/sys_perf_check", READERS)
    assert [t.name for t in found.tiers] == ["haproxy", "gunicorn", "app"]
    assert found.calls["haproxy"] == ["gunicorn"]
    assert found.tiers[0].log_path == stack.haproxy_log
    # The plan init writes from it loads, HAProxy's log in the httplog format.
    plan = parse_plan(init_plan(stack.url + "/sys_perf_check")[0])
    proxy = plan.component[0]
    assert proxy.log is not None and proxy.process is not None
    assert (proxy.name, proxy.calls) == ("haproxy", ["gunicorn"])
    assert (proxy.log.path, proxy.log.format, proxy.log.log_format) == (
        str(stack.haproxy_log),
        "haproxy",
        None,
    )
    assert proxy.process.pids == [int(stack.haproxy_pid_file.read_text())]
