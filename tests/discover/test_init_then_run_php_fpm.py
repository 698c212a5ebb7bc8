"""init, then run, on nginx → PHP-FPM with a static pool of 2 whose script waits 20 ms: the
plan init wrote, stepped for real from 1 to 7 users, finds PHP-FPM's pool full, its size
read from the pool file during the run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from app_stacks import FPM, FPM_FORMAT, NGINX, fastcgi_to, nginx_front, php_fpm
from discover_helpers import HOST

from pinchpoint.discover.init import init_plan
from pinchpoint.pipeline import execute
from pinchpoint.plan.model import parse_plan

# Times a stack that waits: one at a time, beside the parallel part.
pytestmark = [
    pytest.mark.timed,
    pytest.mark.timeout(120),
    pytest.mark.skipif(NGINX is None or not FPM, reason="nginx and PHP-FPM are needed"),
]
# 1, 3, 5, 7 users, 1.5 s each: a pool of 2 is full from 3 on.
LOAD = 'lower = 1\nupper = 7\nstep = 2\nduration = "1.5s"\nwarmup = "0.5s"\n'


def _shortened(text: str) -> str:
    """init's plan with its steps made those of LOAD, and sampled twice a second."""
    load = re.compile(r"^lower = \d+\nupper = \d+\nstep = \d+\nduration = .*\nwarmup = .*\n", re.M)
    assert load.search(text), text
    return load.sub(LOAD, text) + '\n[sampling]\ninterval = "0.5s"\n'


def test_init_then_run_finds_php_fpm_pool_of_two_full(tmp_path: Path) -> None:
    socket = tmp_path / "app.sock"
    pool = (
        f"pm = static\npm.max_children = 2\naccess.log = {tmp_path / 'fpm-access.log'}\n"
        f'access.format = "{FPM_FORMAT}"\n'
    )
    with (
        php_fpm(tmp_path, str(socket), pool, other=False),
        nginx_front(tmp_path, fastcgi_to(tmp_path, f"unix:{socket}")) as port,
    ):
        text, found = init_plan(f"http://{HOST}:{port}/page?ms=20")
        assert [t.name for t in found.tiers] == ["nginx", "php-fpm"], found.problems
        plan = _shortened(text)
        outcome = execute(parse_plan(plan), plan, tmp_path / "runs")
    verdict = outcome.verdict
    print(verdict["headline"], verdict["pools"], verdict["steps"][-1]["tiers"]["php-fpm"])  # -s
    assert not outcome.interrupted
    bottleneck = verdict["bottleneck"]
    assert bottleneck is not None, verdict["headline"]
    assert (bottleneck["component"], bottleneck["resource"]) == ("php-fpm", "worker_pool")
    assert bottleneck["starts_at_users"] in (3, 5)
    size = verdict["pools"]["php-fpm"]
    assert (size["slots"], size["found"]) == (2, "server")
    pool_file = tmp_path / "pool.d" / "app.conf"
    assert (
        f"pool app: pm = static, pm.max_children = 2 (config file {pool_file})" in (size["source"])
    )
    top = verdict["steps"][-1]["tiers"]["php-fpm"]
    assert 1.5 <= top["concurrency"] <= 2.3  # two workers, each 20 ms a request
    assert top["queue_p50_ms"] > 10  # the other 5 users wait in PHP-FPM's listen queue
