import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import psutil
import pytest

from pinchpoint.demo import DemoStack, NginxNotFound, StackError, find_nginx
from pinchpoint.demo import nginx as demo_nginx
from pinchpoint.logformats.gunicorn import GUNICORN_FORMAT
from pinchpoint.logformats.nginx import NGINX_FORMAT

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"
PROBE_TARGET = "/sys_perf_check?cpu=1&wait=2&pp_run=t1&pp_users=1&pp_req=1"

try:
    find_nginx()
except NginxNotFound as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def fetch(url: str, data: bytes | None = None) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json"} if data is not None else {}
    request = urllib.request.Request(url, data=data, headers=headers)
    with _opener.open(request, timeout=10) as response:
        return response.status, response.read()


def stack_processes(pid_files: list[Path]) -> list[psutil.Process]:
    masters = [psutil.Process(int(path.read_text())) for path in pid_files]
    return masters + [child for master in masters for child in master.children(recursive=True)]


def assert_all_gone(procs: list[psutil.Process]) -> None:
    # is_running() is False once a process is gone, even if its pid was reused since. A
    # worker may outlive its master's exit by the master's stop timeout on a busy host.
    psutil.wait_procs(procs, timeout=15)
    assert [proc.pid for proc in procs if proc.is_running()] == []


def lines_with(path: Path, text: str) -> list[str]:
    return [line for line in path.read_text().splitlines() if text in line]


@pytest.mark.timeout(90)
def test_stack_serves_the_probe_and_the_api_and_logs_the_tag(tmp_path: Path) -> None:
    with DemoStack(tmp_path / "stack", workers=2) as stack:
        procs = stack_processes([stack.nginx_pid_file, stack.gunicorn_pid_file])
        assert len(procs) == 2 + 1 + 2  # two masters, one nginx worker, two gunicorn workers

        status, body = fetch(stack.url + PROBE_TARGET)
        assert status == 200
        assert json.loads(body)["cpu_ms"] == 1.0

        status, body = fetch(stack.url + "/api/items?limit=3")
        assert status == 200
        items = json.loads(body)["items"]
        assert [item["id"] for item in items] == [1, 2, 3]

        new = json.dumps({"name": "widget", "price": 9.5}).encode()
        status, body = fetch(stack.url + "/api/items", data=new)
        assert status == 201
        item_id = json.loads(body)["id"]
        status, body = fetch(f"{stack.url}/api/items/{item_id}")
        assert json.loads(body) == {"id": item_id, "name": "widget", "price": 9.5}

        status, _ = fetch(stack.gunicorn_url + "/api/items?limit=1")
        assert status == 200

    assert_all_gone(procs)
    # Each tier writes its log line after answering, so the logs are read once all stopped.
    nginx_lines = lines_with(stack.nginx_access_log, "pp_run=t1")
    assert len(nginx_lines) == 1
    assert " 200 " in nginx_lines[0] and "urt=" in nginx_lines[0]
    assert len(lines_with(stack.gunicorn_access_log, "pp_run=t1")) == 1
    probe_lines = lines_with(stack.probe_log, "pp_run=t1")
    assert len(probe_lines) == 1
    assert json.loads(probe_lines[0])["status"] == 200


@pytest.mark.timeout(90)
def test_an_exception_inside_the_with_stops_everything(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"), DemoStack(tmp_path, workers=2) as stack:
        procs = stack_processes([stack.nginx_pid_file, stack.gunicorn_pid_file])
        raise RuntimeError("boom")
    assert_all_gone(procs)


@pytest.mark.timeout(90)
def test_workers_are_children_of_the_gunicorn_master(tmp_path: Path) -> None:
    with DemoStack(tmp_path, workers=4) as stack:
        master = psutil.Process(int(stack.gunicorn_pid_file.read_text()))
        workers = master.children()
        assert len(workers) == 4
        assert all("gunicorn" in " ".join(worker.cmdline()) for worker in workers)
        components = {component["name"]: component for component in stack.components()}
    assert_all_gone([master, *workers])

    assert [c["calls"] for c in components.values()] == [["gunicorn"], ["app"], []]
    assert components["gunicorn"]["workers"] == 4
    assert components["gunicorn"]["log"]["log_format"] == GUNICORN_FORMAT
    assert components["nginx"]["log"]["log_format"] == NGINX_FORMAT
    assert components["nginx"]["process"] == {"pid_file": str(stack.nginx_pid_file)}
    assert components["app"]["log"] == {"path": str(stack.probe_log), "format": "probe"}


_RUN_UNTIL_SIGNALLED = textwrap.dedent(
    """
    import json, signal, sys, time
    from pathlib import Path
    from pinchpoint.demo import DemoStack
    # As from an interactive shell: a job started in the background (CI under nohup or
    # `&`) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt for it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with DemoStack(Path(sys.argv[1]), workers=2) as stack:
        print(json.dumps([str(stack.nginx_pid_file), str(stack.gunicorn_pid_file)]), flush=True)
        time.sleep(60)
    """
)


@pytest.mark.timeout(90)
# SIGKILL cannot be handled: the kernel's parent-death signal (via setpriv) stops the stack.
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_signal_to_pinchpoint_stops_everything(tmp_path: Path, sig: signal.Signals) -> None:
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR)}
    with subprocess.Popen(
        [sys.executable, "-c", _RUN_UNTIL_SIGNALLED, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as runner:
        try:
            line = runner.stdout.readline() if runner.stdout else ""
            procs = stack_processes([Path(path) for path in json.loads(line)])
            runner.send_signal(sig)
            runner.wait(timeout=30)
        finally:
            runner.kill()
    assert runner.returncode != 0
    assert_all_gone(procs)


@pytest.mark.timeout(90)
def test_a_stack_that_fails_to_start_says_why_and_leaves_nothing(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        stack = DemoStack(tmp_path, nginx_port=port, startup_timeout_s=20)
        with pytest.raises(StackError, match="Address already in use"), stack:
            pass
    assert not any(
        str(tmp_path) in " ".join(proc.info["cmdline"] or [])
        for proc in psutil.process_iter(["cmdline"])
    )


def test_a_bad_config_fails_with_nginx_message(tmp_path: Path) -> None:
    paths = demo_nginx.NginxPaths(tmp_path)
    paths.conf.write_text("events {}\nhttp { no_such_directive on; }\n")
    with pytest.raises(StackError, match='unknown directive "no_such_directive"'):
        demo_nginx.check_config(find_nginx(), paths)


def test_missing_nginx_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(demo_nginx, "_FALLBACK_DIRS", (str(tmp_path),))
    with pytest.raises(NginxNotFound, match="apt-get install nginx-light") as caught:
        find_nginx()
    assert "make demo" in str(caught.value)


def test_config_has_the_log_format_and_keeps_files_in_workdir(tmp_path: Path) -> None:
    paths = demo_nginx.NginxPaths(tmp_path)
    text = demo_nginx.render_config(paths, 8081, 8082, run_as_root=False)
    assert f"log_format pinchpoint '{NGINX_FORMAT}';" in text
    assert f"access_log {tmp_path}/nginx-access.log pinchpoint;" in text
    assert "proxy_pass http://127.0.0.1:8082;" in text
    assert "listen 127.0.0.1:8081" in text
    assert "user " not in text
    for line in text.splitlines():
        if "_temp_path" in line or line.startswith(("pid ", "error_log ")):
            assert str(tmp_path) in line
    assert "user root;" in demo_nginx.render_config(paths, 8081, 8082, run_as_root=True)


def test_ports_must_differ(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="both listen"):
        DemoStack(tmp_path, nginx_port=8080, gunicorn_port=8080)


@pytest.mark.timeout(90)
def test_the_sampler_counts_the_stack_from_its_pid_files(tmp_path: Path) -> None:
    from pinchpoint.collect.resources.sampler import ProcessSelector, ResourceSampler

    with DemoStack(tmp_path, workers=3) as stack:
        targets = {
            c["name"]: ProcessSelector.from_dict(c["process"])
            for c in stack.components()
            if "process" in c
        }
        with ResourceSampler(targets, interval_s=0.1) as sampler:
            for _ in range(20):
                fetch(stack.url + "/sys_perf_check?cpu=5&wait=0")
    rows = sampler.rows()
    assert {r["processes"] for r in rows if r["component"] == "nginx"} == {2}
    assert {r["processes"] for r in rows if r["component"] == "gunicorn"} == {4}
    assert max(r["cpu_cores"] for r in rows if r["component"] == "gunicorn") > 0.05
