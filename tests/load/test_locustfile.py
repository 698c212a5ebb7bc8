"""A locustfile's users under pinchpoint's closed-loop steps (`[load] locustfile`,
`pinchpoint run --locustfile`): the shop journey of examples/shop_locustfile.py against
the real demo stack (nginx → gunicorn), every request tagged and found in the tiers'
records; a failed check as the `check` error class; a run stopped by SIGINT; and the
files and plans that cannot run, refused naming what is wrong."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import time
from pathlib import Path

import polars as pl
import psutil
import pyarrow.parquet as pq
import pytest
from load_helpers import http_server
from signal_helpers import finish, nginx, start, wait_until

from pinchpoint import pipeline
from pinchpoint.demo import DemoStack
from pinchpoint.demo.env import WRONG_EVERY_ENV
from pinchpoint.demo.plan import component_lines
from pinchpoint.load.hdr import decode_v2
from pinchpoint.load.locust_steps import check_locustfile
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files
from pinchpoint.rundir.schemas import REQUESTS_SCHEMA
from pinchpoint_lab.needs import nginx_missing

ROOT = Path(__file__).resolve().parents[2]
SHOP = ROOT / "examples" / "shop_locustfile.py"
NAMES = ["POST login", "GET orders", "GET detail", "POST note"]


needs_nginx = pytest.mark.skipif(bool(nginx_missing()), reason=nginx_missing())


def _plan(
    url: str, load: str, locustfile: Path | str = SHOP, components: list | None = None
) -> str:
    text = f'[target]\nurl = "{url}"\n\n[load]\nlocustfile = "{locustfile}"\n{load}\n'
    return text + "\n".join(component_lines(components or [])) + "\n"


@needs_nginx
def test_the_shop_journey_runs_under_the_steps_with_every_request_tagged(tmp_path: Path) -> None:
    load = 'lower = 2\nupper = 4\nstep = 2\nduration = "3s"\nwarmup = "0.5s"'
    with DemoStack(tmp_path / "stack", workers=2) as stack:
        text = _plan(stack.url, load, components=stack.components())
        outcome = pipeline.execute(parse_plan(text, "shop.toml"), text, tmp_path / "runs")
    run_dir = outcome.run_dir
    assert pq.read_schema(run_dir / files.REQUESTS).remove_metadata() == REQUESTS_SCHEMA
    requests = pl.read_parquet(run_dir / files.REQUESTS)
    run = json.loads((run_dir / files.RUN).read_text())
    assert run["endpoint_names"] == NAMES
    assert not run["interrupted"] and run["records"] == requests.height
    # Each step held its users and tagged its requests with them, in its window.
    assert [s["users"] for s in run["steps"]] == [2, 4]
    for s in run["steps"]:
        assert 2.9 <= s["end"] - s["start"] <= 3.5
    counts = [s["requests"] for s in run["load_steps"]]
    assert sum(counts) == requests.height and min(counts) > 30
    for step, users in ((0, 2), (1, 4)):
        mine = requests.filter(pl.col("step") == step)
        assert set(mine["users"].to_list()) == {users}
        assert mine.height == counts[step]
    # No error; logins and reads 200, notes 201; one login a user, the walk repeated.
    assert requests["error"].null_count() == requests.height
    statuses = dict(requests.group_by("endpoint").agg(pl.col("status").max()).iter_rows())
    assert statuses == {0: 200, 1: 200, 2: 200, 3: 201}
    per_endpoint = dict(requests.group_by("endpoint").len().iter_rows())
    assert per_endpoint[0] == 4 and min(per_endpoint[i] for i in (1, 2, 3)) > 20
    assert requests["req_id"].n_unique() == requests.height
    # Every request carried the tag: nginx, gunicorn and the app logged each of them.
    tiers = pl.read_parquet(run_dir / files.TIERS)
    for component in ("nginx", "gunicorn", "app"):
        theirs = tiers.filter(pl.col("component") == component)
        assert sorted(theirs["req_id"].to_list()) == sorted(requests["req_id"].to_list())
    joined = requests.join(tiers.filter(pl.col("component") == "nginx"), on="req_id")
    assert (joined["users"] == joined["users_right"]).all()
    # The histograms are real HdrHistograms of the answered latencies.
    histograms = json.loads((run_dir / files.HISTOGRAMS).read_text())
    for step in (0, 1):
        counts_step = decode_v2(base64.b64decode(histograms[str(step)]))
        assert counts_step.sum() == counts[step]
    named = {e["endpoint"]: e for e in outcome.verdict["endpoints"]}
    assert list(named) == NAMES
    assert {"nginx", "gunicorn", "app"} <= set(named["GET detail"]["steps"][-1]["tiers"])
    assert "GET detail" in (run_dir / files.REPORT).read_text()


@needs_nginx
def test_a_failed_check_is_the_check_error_class(tmp_path: Path) -> None:
    load = 'users = 3\nduration = "3s"\nwarmup = "0s"'
    with DemoStack(tmp_path / "stack", workers=1, app_env={WRONG_EVERY_ENV: "3"}) as stack:
        text = _plan(stack.url, load)
        outcome = pipeline.execute(parse_plan(text, "shop.toml"), text, tmp_path / "runs")
    requests = pl.read_parquet(outcome.run_dir / files.REQUESTS)
    detail = requests.filter(pl.col("endpoint") == 2)
    wrong = detail.filter(pl.col("error") == "check")
    # One worker answers every third detail with another order: a third fail their check.
    assert detail.height >= 30
    assert abs(wrong.height / detail.height - 1 / 3) < 0.05
    assert set(wrong["status"].to_list()) == {200}
    assert requests.filter(pl.col("endpoint") != 2)["error"].null_count() == (
        requests.height - detail.height
    )
    run = json.loads((outcome.run_dir / files.RUN).read_text())
    assert any("asked for order" in r for r in run["error_reasons"]["check"])
    assert run["load_steps"][0]["errors"] == {"check": wrong.height}


def _check(tmp_path: Path, source: str, load: str = 'users = 1\nduration = "1s"') -> PlanError:
    locustfile = tmp_path / "lf.py"
    locustfile.write_text(source)
    plan = parse_plan(_plan("http://127.0.0.1:9", load, locustfile), "x.toml")
    with pytest.raises(PlanError) as caught:
        check_locustfile(plan, "x.toml:6: load.locustfile")
    return caught.value


def test_a_file_without_a_user_class_is_refused(tmp_path: Path) -> None:
    error = _check(
        tmp_path, "from locust import HttpUser\n\nclass Base(HttpUser):\n    abstract = True\n"
    )
    assert str(error).startswith(f"x.toml:6: load.locustfile: {tmp_path / 'lf.py'}: ")
    assert "defines no Locust User class" in str(error)


def test_a_file_that_fails_to_import_is_refused(tmp_path: Path) -> None:
    error = _check(tmp_path, "x = 1 / 0\n")
    assert "lf.py: fails to load: ZeroDivisionError: division by zero" in str(error)


def test_a_user_class_with_another_host_is_refused(tmp_path: Path) -> None:
    source = (
        "from locust import HttpUser, task\n\n"
        "class Elsewhere(HttpUser):\n    host = 'http://192.0.2.1:8080'\n\n"
        "    @task\n    def hit(self):\n        self.client.get('/')\n"
    )
    error = _check(tmp_path, source)
    assert "Elsewhere.host is http://192.0.2.1:8080, not the plan's target" in str(error)


def test_open_loop_and_find_knee_plans_are_refused(tmp_path: Path) -> None:
    opened = 'loop = "open"\nlower = 1\nupper = 2\nduration = "1s"'
    knee = 'lower = 1\nupper = 4\nduration = "2s"\nfind_knee = true'
    phases = '[[load.phase]]\nduration = "1s"\narrival_rate = 5'
    for load in (opened, knee, phases):
        with pytest.raises(PlanError, match=r"load\.locustfile: a locustfile's users run closed"):
            parse_plan(_plan("http://127.0.0.1:9", load), "x.toml")
    # A plan for a locustfile needs no [[request]]; one without either still does.
    assert parse_plan(_plan("http://127.0.0.1:9", 'users = 1\nduration = "1s"'), "x.toml")
    with pytest.raises(PlanError, match="nothing to send"):
        parse_plan('[target]\nurl = "http://127.0.0.1:9"\n[load]\nusers = 1\nduration = "1s"\n')


def test_the_command_line_names_a_missing_locustfile(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text('[target]\nurl = "http://127.0.0.1:9"\n[load]\nusers = 1\nduration = "1s"\n')
    proc = start(["run", str(plan), "--locustfile", "missing.py"], cwd=tmp_path)
    code, _, err = finish(proc, 30)
    assert code == 2
    assert "--locustfile: missing.py: no such file" in err
    assert not (tmp_path / "runs").exists()


OFF_TARGET_AFTER_10 = """
from locust import HttpUser, constant, task

SENT = [0]


class Away(HttpUser):
    wait_time = constant(0.01)

    @task
    def hit(self):
        SENT[0] += 1
        self.client.get("/ok" if SENT[0] <= 10 else "http://localhost:{port}/elsewhere")
"""


def test_a_request_off_the_target_mid_run_stops_it_with_its_folder_complete(
    tmp_path: Path,
) -> None:
    """Found by issue 38: the run was stopped, rightly, but its folder had no run.json,
    verdict or report, and the terminal did not name it."""
    with http_server() as (port, seen):
        (tmp_path / "lf.py").write_text(OFF_TARGET_AFTER_10.replace("{port}", str(port)))
        (tmp_path / "plan.toml").write_text(
            f'[target]\nurl = "http://127.0.0.1:{port}"\n[load]\nlocustfile = "lf.py"\n'
            'users = 1\nduration = "20s"\nwarmup = "0s"\n'
        )
        code, out, err = finish(start(["run", "plan.toml", "-q"], cwd=tmp_path), 60)
        sent = seen.count()
    said = " ".join(err.split())
    assert code == 3, err
    assert "unexpected error" not in said and "Traceback" not in said
    assert re.search(
        r"The run stopped early: \S+lf.py: sends to http://localhost:\d+/elsewhere, which "
        r"connects to http://localhost:\d+, off the plan's target",
        said,
    ), err
    [run_dir] = (tmp_path / "runs").iterdir()
    assert f"Run folder: runs/{run_dir.name}" in out
    run = json.loads((run_dir / files.RUN).read_text())
    assert run["interrupted"] and "off the plan's target" in run["stopped"]
    assert (run_dir / files.VERDICT).is_file() and (run_dir / files.REPORT).is_file()
    # The ten requests to the target are kept; the one off it was never sent.
    assert run["records"] == pl.read_parquet(run_dir / files.REQUESTS).height == sent == 10
    [step] = run["steps"]
    assert step["end"] - step["start"] < 10.0


LOADS_ONCE = """
import os

from locust import HttpUser, constant, task

if os.path.exists("loaded"):
    raise RuntimeError("loaded twice")
open("loaded", "w").close()


class Hit(HttpUser):
    wait_time = constant(0.01)

    @task
    def hit(self):
        self.client.get("/")
"""


def test_a_locustfile_that_fails_to_load_in_the_run_leaves_its_folder_complete(
    tmp_path: Path,
) -> None:
    """It loaded for the check before the run, and fails in the run's own process: the
    run ends with nothing sent, its folder complete and named, and exit code 3."""
    (tmp_path / "lf.py").write_text(LOADS_ONCE)
    (tmp_path / "plan.toml").write_text(
        '[target]\nurl = "http://127.0.0.1:9"\n[load]\nlocustfile = "lf.py"\n'
        'users = 1\nduration = "20s"\nwarmup = "0s"\n'
    )
    code, out, err = finish(start(["run", "plan.toml", "-q"], cwd=tmp_path), 60)
    said = " ".join(err.split())
    assert code == 3, err
    assert "The run stopped early: " in said and "lf.py: fails to load: RuntimeError" in said
    [run_dir] = (tmp_path / "runs").iterdir()
    assert f"Run folder: runs/{run_dir.name}" in out
    run = json.loads((run_dir / files.RUN).read_text())
    assert run["interrupted"] and "loaded twice" in run["stopped"] and run["records"] == 0
    assert (run_dir / files.VERDICT).is_file() and (run_dir / files.REPORT).is_file()


def test_sigint_stops_the_locust_users_and_keeps_what_they_measured(tmp_path: Path) -> None:
    with nginx(tmp_path / "nginx") as server:
        (tmp_path / "lf.py").write_text(
            "from locust import HttpUser, task, constant\n\n"
            "class Hit(HttpUser):\n    wait_time = constant(0.01)\n\n"
            "    @task\n    def hit(self):\n        self.client.get('/ok', name='ok')\n"
        )
        plan = tmp_path / "plan.toml"
        plan.write_text(
            f'[target]\nurl = "http://127.0.0.1:{server.port}"\n[load]\n'
            'lower = 2\nupper = 4\nstep = 2\nduration = "30s"\n\n[[request]]\npath = "/"\n'
        )
        proc = start(["run", str(plan), "--locustfile", "lf.py", "-q"], cwd=tmp_path)
        wait_until(lambda: server.answered() > 20, 20, "Locust users sending")
        began = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        code, _, err = finish(proc, 30)
        stopped_in = time.monotonic() - began
    assert code == 130, err
    assert stopped_in < 10
    (run_dir,) = (tmp_path / "runs").iterdir()
    run = json.loads((run_dir / files.RUN).read_text())
    requests = pl.read_parquet(run_dir / files.REQUESTS)
    assert run["interrupted"] and run["endpoint_names"] == ["GET ok"]
    assert len(run["steps"]) == 1 and requests.height == run["records"] > 20
    assert requests["error"].null_count() == requests.height
    # No Locust process of this run is left behind.
    assert _locust_children(tmp_path) == []


def _locust_children(cwd: Path) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        cmdline = proc.info["cmdline"] or []
        if "pinchpoint.load.locust_child" in cmdline and proc.info["cwd"] == str(cwd):
            found.append(proc.pid)
    return found


def test_pinchpoint_load_refuses_a_locustfile_plan(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(_plan("http://127.0.0.1:9", 'users = 1\nduration = "1s"'))
    code, _, err = finish(start(["load", str(plan)], cwd=tmp_path), 30)
    assert code == 2
    assert "load.locustfile: pinchpoint load sends the engine's requests" in err
