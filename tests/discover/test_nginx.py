"""nginx's tier from its config: the tokenizer, includes (globs, loops, unreadable files), the
server and location a request reaches, where it is passed on, the access log and its
format; then real demo nginx read from their masters, and the walk from a demo URL."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from pinchpoint.demo import DemoStack, NginxNotFound, find_nginx
from pinchpoint.demo.nginx import ProxyOptions
from pinchpoint.discover import nginx
from pinchpoint.discover.configs import MAX_FILE_BYTES
from pinchpoint.discover.init import init_plan
from pinchpoint.discover.nginx import Build, Command, command_line, describe, load, read_config
from pinchpoint.discover.nginx_conf import ConfigError, Disk, parse
from pinchpoint.discover.readers import READERS
from pinchpoint.discover.tier import Address, Tier
from pinchpoint.discover.walk import walk
from pinchpoint.logformats.nginx import COMBINED_FORMAT, NGINX_FORMAT
from pinchpoint.plan.model import parse_plan

try:
    NGINX: Path | None = find_nginx()
except NginxNotFound:
    NGINX = None
needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx is not installed")

PORT = 8080
TIMED = "rt=$request_time urt=$upstream_response_time msec=$msec"


def main_conf(root: Path, http: str, main: str = "") -> str:
    """An nginx.conf keeping every file it writes under root (so `nginx -T` writes nowhere
    else); its temp folder made."""
    (root / "temp").mkdir(parents=True, exist_ok=True)
    temp = "\n".join(
        f"    {kind}_temp_path {root}/temp/{kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        f"pid {root}/nginx.pid;\nerror_log {root}/error.log;\n{main}\n"
        f"events {{ worker_connections 64; }}\nhttp {{\n{temp}\n{http}\n}}\n"
    )


def write(root: Path, files: dict[str, str]) -> Path:
    """Writes the files under root; the path of the first."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root / next(iter(files))


def tier_of(conf: Path, path: str = "/", port: int = PORT, host: str = "127.0.0.1") -> Tier:
    """The tier the config's files give (read from disk, not through nginx -T)."""
    tier = Tier("nginx", "proxy", os.getpid())
    config = read_config(Disk(), str(conf), f"{conf.parent}/", Build(), None, tier)
    describe(config, Address(host, port), path, tier)
    return tier


def server(body: str, listen: str = f"127.0.0.1:{PORT}") -> str:
    return f"server {{\n  listen {listen};\n{body}\n}}\n"


def proxied(upstream: str = "http://127.0.0.1:9000") -> str:
    return server(f"  location / {{ proxy_pass {upstream}; }}")


# The config's text.


def test_a_master_title_split_at_spaces_gives_its_config_prefix_and_directives() -> None:
    title = (
        "nginx: master process /usr/sbin/nginx -p /srv/ng/ -c conf/x.conf -g daemon off; pid /p;"
    )
    command = command_line(title.split())
    assert command.binary == "/usr/sbin/nginx"
    assert command.options == {"-p": "/srv/ng/", "-c": "conf/x.conf", "-g": "daemon off; pid /p;"}
    assert command_line(["/usr/sbin/nginx", "-c/etc/n.conf"]).options == {"-c": "/etc/n.conf"}


def test_words_quotes_escapes_and_comments_read_as_nginx_reads_them() -> None:
    text = (
        "log_format x '\"$request\" $status'  # a comment\n"
        '    "a\\"b\\tc";\n'
        "set $v ${host}z;\n"
        'location ~ "^/a{2}$" { return 200; }\n'
    )
    log_format, set_, location = parse(text, "t.conf")
    assert (log_format.name, log_format.line) == ("log_format", 1)
    assert log_format.args == ["x", '"$request" $status', 'a"b\tc']
    assert (set_.args, set_.line) == (["$v", "${host}z"], 3)
    assert (location.args, location.line) == (["~", "^/a{2}$"], 4)
    assert location.block is not None and location.block[0].args == ["200"]


def test_a_config_that_does_not_close_says_where() -> None:
    with pytest.raises(ConfigError, match=r"t.conf: unexpected end of file"):
        parse("http {\n server {\n", "t.conf")
    with pytest.raises(ConfigError, match=r"t.conf:2: unexpected '}'"):
        parse("a b;\n}\n", "t.conf")
    with pytest.raises(ConfigError, match=r"t.conf:1: unclosed quote"):
        parse("a 'b;\n", "t.conf")


# Includes.


def test_includes_follow_globs_from_the_config_directory_and_notes_name_the_file(
    tmp_path: Path,
) -> None:
    conf = write(
        tmp_path,
        {
            "nginx.conf": main_conf(tmp_path, "  include conf.d/*.conf;\n  include sites/app;"),
            "conf.d/formats.conf": f"log_format timed '$remote_addr {TIMED}';\n",
            "conf.d/other.conf": proxied().replace(str(PORT), "9999"),
            "sites/app": "# the app\n"
            + server(
                f"  access_log {tmp_path}/app.log timed;\n  location / {{ proxy_pass http://127.0.0.1:9000; }}"
            ),
        },
    )
    tier = tier_of(conf)
    assert tier.next_hops == [Address("127.0.0.1", 9000)]
    assert tier.log_path == tmp_path / "app.log"
    assert tier.log_format_string == f"$remote_addr {TIMED}"
    assert f"access_log {tmp_path}/app.log timed from {tmp_path}/sites/app:4" in tier.notes
    assert f"log_format timed from {tmp_path}/conf.d/formats.conf:1" in tier.notes
    assert not [w for w in tier.warnings if "pid file" not in w]


def test_an_include_loop_is_left_out_with_a_warning_and_the_rest_is_read(tmp_path: Path) -> None:
    conf = write(
        tmp_path,
        {
            "nginx.conf": main_conf(tmp_path, "  include a.conf;"),
            "a.conf": f"include b.conf;\n{proxied()}",
            "b.conf": "include a.conf;\n",
        },
    )
    tier = tier_of(conf)
    assert tier.next_hops == [Address("127.0.0.1", 9000)]
    loop = [w for w in tier.warnings if "include loop" in w]
    assert loop == [
        f"include loop left out at {tmp_path}/b.conf:1: "
        f"{tmp_path}/a.conf → {tmp_path}/b.conf → {tmp_path}/a.conf"
    ]


def test_unreadable_missing_or_oversized_includes_give_warnings_not_errors(
    tmp_path: Path,
) -> None:
    conf = write(
        tmp_path,
        {
            "nginx.conf": main_conf(
                tmp_path, "  include conf.d/*.conf;\n  include missing.conf;\n  include big.conf;"
            ),
            "conf.d/a.conf": proxied(),
            "conf.d/broken.conf": "server { listen 1;\n",
        },
    )
    (tmp_path / "conf.d" / "dir.conf").mkdir()  # matched by the glob, but no file
    with (tmp_path / "big.conf").open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)
    tier = tier_of(conf)
    assert tier.next_hops == [Address("127.0.0.1", 9000)]
    warnings = "\n".join(tier.warnings)
    assert f"cannot read {tmp_path}/conf.d/dir.conf: Is a directory (included at" in warnings
    assert f"cannot read {tmp_path}/missing.conf: No such file or directory" in warnings
    assert f"{tmp_path}/big.conf is larger than 4 MiB: not read" in warnings
    assert f"{tmp_path}/conf.d/broken.conf: unexpected end of file" in warnings


# Where the request goes.


def test_a_pass_to_an_upstream_block_gives_its_servers_but_not_backup_or_down_ones(
    tmp_path: Path,
) -> None:
    upstream = (
        "upstream app {\n  least_conn;\n  server 127.0.0.1:9001 max_fails=3;\n"
        "  server localhost;\n  server unix:/run/app.sock;\n"
        "  server 127.0.0.1:9004 backup;\n  server 127.0.0.1:9005 down;\n  keepalive 8;\n}\n"
    )
    conf = write(tmp_path, {"nginx.conf": main_conf(tmp_path, upstream + proxied("http://app/x"))})
    tier = tier_of(conf)
    assert tier.next_hops == [
        Address("127.0.0.1", 9001),
        Address("localhost", 80),
        Address(unix=Path("/run/app.sock")),
    ]
    assert any("backup server 127.0.0.1:9004" in note for note in tier.notes)


@pytest.mark.parametrize(
    ("directive", "hop"),
    [
        ("uwsgi_pass 127.0.0.1:3031", Address("127.0.0.1", 3031)),
        ("uwsgi_pass unix:/run/uwsgi/app.sock", Address(unix=Path("/run/uwsgi/app.sock"))),
        ("fastcgi_pass 127.0.0.1:9000", Address("127.0.0.1", 9000)),
        ("grpc_pass grpc://[::1]:50051", Address("::1", 50051)),
        ("proxy_pass http://unix:/tmp/g.sock:/api/", Address(unix=Path("/tmp/g.sock"))),
        ("proxy_pass https://127.0.0.1", Address("127.0.0.1", 443)),
    ],
)
def test_each_kind_of_pass_names_its_next_hop(tmp_path: Path, directive: str, hop: Address) -> None:
    conf = write(
        tmp_path,
        {"nginx.conf": main_conf(tmp_path, server(f"  location / {{ {directive}; }}"))},
    )
    assert tier_of(conf).next_hops == [hop]


def test_a_pass_chosen_at_run_time_asks_for_the_next_tier_by_hand(tmp_path: Path) -> None:
    conf = write(tmp_path, {"nginx.conf": main_conf(tmp_path, proxied("http://$backend"))})
    tier = tier_of(conf)
    assert tier.next_hops == []
    assert any("picks its upstream at run time" in w for w in tier.warnings)


def test_the_server_is_the_one_named_for_the_host_else_the_default_else_the_first(
    tmp_path: Path,
) -> None:
    servers = (
        server("  location / { proxy_pass http://127.0.0.1:9001; }", "10.9.9.9:8080")
        + server("  location / { proxy_pass http://127.0.0.1:9002; }", "8080")
        + server(
            "  location / { proxy_pass http://127.0.0.1:9003; }", "127.0.0.1:8080 default_server"
        )
        + server(
            "  server_name shop.example *.api.example;\n"
            "  location / { proxy_pass http://127.0.0.1:9004; }",
            "8080",
        )
        + server("  location / { proxy_pass http://127.0.0.1:9005; }", "9090")
    )
    conf = write(tmp_path, {"nginx.conf": main_conf(tmp_path, servers)})

    def hop(host: str, port: int = PORT) -> int | None:
        return tier_of(conf, host=host, port=port).next_hops[0].port

    assert hop("127.0.0.1") == 9003  # default_server (10.9.9.9 is another address)
    assert hop("shop.example") == 9004
    assert hop("v1.api.example") == 9004
    assert hop("127.0.0.1", 9090) == 9005
    assert tier_of(conf, port=7070).warnings[-1] == (
        "no server block of the config listens at 127.0.0.1:7070"
    )


@pytest.mark.parametrize(
    ("path", "port"),
    [
        ("/", 9001),  # the exact match
        ("/index", 9002),  # the shortest prefix, no regex matches
        ("/static/app.css", 9003),  # ^~: no regex tried
        ("/api/v1/items.json", 9005),  # a regex beats the longest prefix
        ("/api/v1/items", 9004),  # the longest prefix
        ("/API/x.JSON", 9005),  # ~* ignores case
        ("/api/v1/admin/users", 9006),  # a location nested in the matched one
    ],
)
def test_the_location_is_chosen_as_nginx_chooses_it(tmp_path: Path, path: str, port: int) -> None:
    locations = (
        "  location = / { proxy_pass http://127.0.0.1:9001; }\n"
        "  location / { proxy_pass http://127.0.0.1:9002; }\n"
        "  location ^~ /static/ { proxy_pass http://127.0.0.1:9003; }\n"
        "  location /api/v1/ { proxy_pass http://127.0.0.1:9004;\n"
        "    location /api/v1/admin/ { proxy_pass http://127.0.0.1:9006; }\n  }\n"
        "  location ~* \\.json$ { proxy_pass http://127.0.0.1:9005; }\n"
        "  location ~ \\.css$ { proxy_pass http://127.0.0.1:9999; }\n"
    )
    conf = write(tmp_path, {"nginx.conf": main_conf(tmp_path, server(locations))})
    assert tier_of(conf, path).next_hops == [Address("127.0.0.1", port)]


def test_a_location_answering_itself_or_through_try_files_is_followed(tmp_path: Path) -> None:
    locations = (
        "  location /static { return 200 'ok'; }\n"
        "  location / { try_files $uri @app; }\n"
        "  location @app { proxy_pass http://127.0.0.1:9007; }\n"
    )
    conf = write(tmp_path, {"nginx.conf": main_conf(tmp_path, server(locations))})
    assert tier_of(conf, "/static/a").next_hops == []
    assert "that location answers with `return`: no next tier" in tier_of(conf, "/static").notes
    assert tier_of(conf, "/app").next_hops == [Address("127.0.0.1", 9007)]


# The access log.


def test_the_default_combined_format_warns_with_the_lines_to_add(tmp_path: Path) -> None:
    body = (
        f"  access_log {tmp_path}/access.log;\n  location / {{ proxy_pass http://127.0.0.1:9000; }}"
    )
    conf = write(tmp_path, {"nginx.conf": main_conf(tmp_path, server(body))})
    tier = tier_of(conf)
    assert (tier.log_path, tier.log_format) == (tmp_path / "access.log", "nginx")
    assert tier.log_format_string == COMBINED_FORMAT
    (warning,) = [w for w in tier.warnings if "log_format combined" in w]
    assert "has no $request_time, $upstream_response_time" in warning
    assert f"`log_format pinchpoint '{NGINX_FORMAT}';`" in warning
    assert f"`access_log {tmp_path}/access.log pinchpoint;`" in warning
    assert f"the http block ({conf}:5)" in warning


def test_no_access_log_at_all_is_nginxs_default_file_in_combined(tmp_path: Path) -> None:
    conf = write(tmp_path, {"nginx.conf": main_conf(tmp_path, proxied())})
    tier = tier_of(conf)
    assert tier.log_path == tmp_path / "logs/access.log"  # the prefix's, as Build() says
    assert tier.log_format_string == COMBINED_FORMAT
    assert any(
        f"add `access_log {tmp_path}/logs/access.log pinchpoint;`" in w for w in tier.warnings
    )


def test_a_custom_format_is_joined_as_nginx_joins_it_and_warns_of_nothing(
    tmp_path: Path,
) -> None:
    http = (
        "log_format timed escape=json '$remote_addr [$time_local] '\n"
        f"                 '\"$request\" $status {TIMED}';\n"
        f"access_log {tmp_path}/timed.log timed buffer=32k flush=1s;\n" + proxied()
    )
    conf = write(tmp_path, {"nginx.conf": main_conf(tmp_path, http)})
    tier = tier_of(conf)
    assert tier.log_format_string == f'$remote_addr [$time_local] "$request" $status {TIMED}'
    assert tier.log_path == tmp_path / "timed.log"
    assert [w for w in tier.warnings if "log_format" in w] == []


def test_the_innermost_access_log_wins_and_a_timed_one_is_chosen_among_several(
    tmp_path: Path,
) -> None:
    http = (
        f"log_format timed '$remote_addr {TIMED}';\n"
        f"access_log {tmp_path}/http.log timed;\n"
        + server(
            f"  access_log {tmp_path}/server.log timed;\n"
            "  location / {\n"
            f"    access_log {tmp_path}/plain.log;\n"
            f"    access_log {tmp_path}/location.log timed;\n"
            "    proxy_pass http://127.0.0.1:9000;\n  }\n"
            f"  location /s {{ proxy_pass http://127.0.0.1:9000; }}"
        )
    )
    conf = write(tmp_path, {"nginx.conf": main_conf(tmp_path, http)})
    assert tier_of(conf, "/a").log_path == tmp_path / "location.log"
    assert tier_of(conf, "/s").log_path == tmp_path / "server.log"


@pytest.mark.parametrize(
    ("access_log", "said"),
    [
        ("access_log off", "the access log is off at"),
        ("access_log syslog:server=unix:/dev/log", "the access log goes to syslog:server="),
        ("access_log /var/log/$host.log", "names its file with a variable"),
    ],
)
def test_a_log_that_is_off_or_not_a_file_leaves_no_log_and_warns(
    tmp_path: Path, access_log: str, said: str
) -> None:
    body = f"  {access_log};\n  location / {{ proxy_pass http://127.0.0.1:9000; }}"
    conf = write(tmp_path, {"nginx.conf": main_conf(tmp_path, server(body))})
    tier = tier_of(conf)
    assert tier.log_path is None
    assert any(said in w for w in tier.warnings)


# The process.


def test_the_pid_file_and_workers_come_from_the_main_context_or_the_defaults(
    tmp_path: Path,
) -> None:
    conf = write(tmp_path, {"nginx.conf": main_conf(tmp_path, proxied(), "worker_processes 3;")})
    tier = tier_of(conf)
    assert tier.pid_file == tmp_path / "nginx.pid"
    assert f"worker_processes 3 from {conf}:3" in tier.notes
    bare = write(tmp_path / "bare", {"nginx.conf": "events {}\nhttp {\n" + proxied() + "}\n"})
    tier = tier_of(bare)
    assert tier.pid_file == tmp_path / "bare/logs/nginx.pid"  # the prefix's, as Build() says
    assert "worker_processes 1 (nginx's default)" in tier.notes


# Through nginx itself.


@needs_nginx
def test_nginx_T_reads_the_config_as_the_files_do(tmp_path: Path) -> None:
    conf = write(
        tmp_path,
        {
            "nginx.conf": main_conf(tmp_path, f"log_format timed '{TIMED}';\ninclude c/*.conf;"),
            "c/app.conf": server(
                f"  access_log {tmp_path}/app.log timed;\n"
                "  location / { proxy_pass http://127.0.0.1:9000; }"
            ),
        },
    )
    assert NGINX is not None
    tier = Tier("nginx", "proxy", os.getpid())
    command = Command(
        str(NGINX), {"-p": f"{tmp_path}/", "-c": str(conf), "-g": "worker_processes 2;"}
    )
    describe(load(os.getpid(), command, tier), Address("127.0.0.1", PORT), "/", tier)
    assert tier.notes[0] == f"config read with `{NGINX} -T` from {conf}"
    assert "worker_processes 2 from the command line (-g):1" in tier.notes
    assert f"access_log {tmp_path}/app.log timed from {tmp_path}/c/app.conf:3" in tier.notes
    assert tier.next_hops == [Address("127.0.0.1", 9000)]


@needs_nginx
def test_when_nginx_T_fails_the_files_are_read_and_the_loop_reported(tmp_path: Path) -> None:
    conf = write(
        tmp_path,
        {
            "nginx.conf": main_conf(tmp_path, "include a.conf;"),
            "a.conf": f"include a.conf;\n{proxied()}",
        },
    )
    assert NGINX is not None
    tier = Tier("nginx", "proxy", os.getpid())
    command = Command(str(NGINX), {"-p": f"{tmp_path}/", "-c": str(conf)})
    describe(load(os.getpid(), command, tier), Address("127.0.0.1", PORT), "/", tier)
    assert tier.notes[0].startswith(f"`{NGINX} -T` failed (")
    assert tier.notes[0].endswith("): config files read from disk")
    assert any("include loop left out" in w for w in tier.warnings)
    assert tier.next_hops == [Address("127.0.0.1", 9000)]


# Real demo stacks.


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoStack]:
    if NGINX is None:
        pytest.skip("nginx is not installed")
    options = ProxyOptions(limit_conn=4, workers=2)
    with DemoStack(tmp_path_factory.mktemp("stack"), workers=1, proxy=options) as started:
        yield started


def master_of(pid_file: Path) -> psutil.Process:
    return psutil.Process(int(pid_file.read_text()))


@pytest.mark.timeout(90)
def test_a_demo_nginx_is_read_from_its_master(stack: DemoStack) -> None:
    master = master_of(stack.nginx_pid_file)
    address = Address("127.0.0.1", stack.nginx_port)
    tier = nginx.read(master.pid, master.cmdline(), address, "/sys_perf_check")
    assert (tier.name, tier.role, tier.pid) == ("nginx", "proxy", master.pid)
    assert tier.pid_file == stack.nginx_pid_file
    assert tier.log_path == stack.nginx_access_log
    assert (tier.log_format, tier.log_format_string) == ("nginx", NGINX_FORMAT)
    assert tier.next_hops == [Address("127.0.0.1", stack.gunicorn_port)]
    assert any(n.startswith(f"worker_processes 2 from {stack.nginx_conf}:") for n in tier.notes)
    assert any(n.startswith("limit_conn pinchpoint_conn 4 from") for n in tier.notes)
    assert tier.warnings == []
    # From one of its workers (what listens), the same tier.
    worker = master.children()[0]
    assert nginx.read(worker.pid, worker.cmdline(), address, "/sys_perf_check") == tier


@pytest.mark.timeout(90)
def test_the_walk_from_a_demo_url_goes_through_nginx_to_gunicorn(stack: DemoStack) -> None:
    found = walk(stack.url + "/sys_perf_check?wait=1", READERS)
    assert [t.name for t in found.tiers] == ["nginx", "gunicorn", "app"]
    assert found.calls["nginx"] == ["gunicorn"]
    assert found.tiers[0].log_path == stack.nginx_access_log
    # The plan init writes from it loads, nginx's log as the demo's own plan gives it.
    plan = parse_plan(init_plan(stack.url + "/sys_perf_check")[0])
    proxy = plan.component[0]
    assert proxy.log is not None and proxy.process is not None
    assert (proxy.name, proxy.calls) == ("nginx", ["gunicorn"])
    assert (proxy.log.path, proxy.log.format) == (str(stack.nginx_access_log), "nginx")
    assert proxy.log.log_format == NGINX_FORMAT
    assert proxy.process.pid_file == str(stack.nginx_pid_file)


@pytest.mark.timeout(90)
@needs_nginx
def test_the_walk_goes_through_two_nginx_in_a_row(tmp_path: Path) -> None:
    with DemoStack(tmp_path, workers=1, front="nginx2") as stack:
        found = walk(stack.url + "/", READERS)
    edge, inner, server, app = found.tiers
    assert [edge.name, inner.name, server.name, app.name] == ["nginx", "nginx2", "gunicorn", "app"]
    assert found.calls == {
        "nginx": ["nginx2"], "nginx2": ["gunicorn"], "gunicorn": ["app"], "app": []
    }  # fmt: skip
    assert (edge.log_path, edge.pid_file) == (stack.edge_access_log, stack.edge_pid_file)
    assert (inner.log_path, inner.pid_file) == (stack.nginx_access_log, stack.nginx_pid_file)
    assert any(n.startswith("upstream pinchpoint_upstream: server") for n in edge.notes)


def test_a_worker_just_forked_with_its_master_s_title_is_read_as_its_master() -> None:
    """Right after its fork a worker still shows its master's title: its master is the
    tier. A master whose parent is no nginx master is itself."""
    title = "nginx: master process /usr/sbin/nginx -c /etc/nginx/nginx.conf"
    inner = f'(exec -a "{title}" sleep 30) & wait'
    proc = subprocess.Popen(["bash", "-c", f"exec -a '{title}' bash -c '{inner}'"])
    try:
        master = psutil.Process(proc.pid)
        deadline = time.monotonic() + 10
        while not master.children() or not master.children()[0].cmdline()[0].startswith("nginx"):
            assert time.monotonic() < deadline, "the renamed child did not start"
            time.sleep(0.01)
        [worker] = master.children()
        assert nginx.master_of(worker.pid, worker.cmdline()) == (master.pid, master.cmdline())
        assert nginx.master_of(master.pid, master.cmdline()) == (master.pid, master.cmdline())
    finally:
        proc.kill()
        proc.wait()
