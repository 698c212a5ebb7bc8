"""Sampling Redis from inside: the plan's table, INFO's text, and a real redis-server
sampled while clients block, sleep and scan: its commands by time, its SLOWLOG, its
clients, and its main thread saturated at one core."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pinchpoint.analyze.redis import SATURATED, RedisSamples, evidence_lines, redis_inside
from pinchpoint.collect.database.sampling import DatabaseSampling
from pinchpoint.collect.redis.info import CommandStat, command_stats, info_fields
from pinchpoint.collect.redis.sampler import RedisSampler
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import parse_plan
from pinchpoint.plan.redis import Redis, parse_url
from pinchpoint.rundir import files
from pinchpoint.rundir.steady import Window

PLAN = """
[target]
url = "http://127.0.0.1:8080"
[load]
users = 1
duration = "1s"
[[request]]
path = "/"
[[component]]
name = "cache"
role = "cache"
[component.redis]
"""


def test_the_plan_names_the_variable_holding_the_url() -> None:
    plan = parse_plan(PLAN + 'url_env = "REDIS_URL"\nrate = 4\n')
    assert plan.component[0].redis == Redis(url_env="REDIS_URL", rate=4)
    for extra, fault in [
        ('url = "redis://:hunter2@db:6379"\n', "<plan>:13: component[0].redis.url: the plan holds no secret"),
        ('url_env = "REDIS_URL"\nrate = 50\n', "<plan>:14: component[0].redis.rate: Input should be less than or equal to 20"),
        ('url_env = "REDIS URL"\n', "<plan>:13: component[0].redis.url_env: String should match pattern"),
        ("rate = 2\n", "<plan>:12: component[0].redis.url_env: Field required"),
    ]:  # fmt: skip
        with pytest.raises(PlanError) as caught:
            parse_plan(PLAN + extra)
        assert str(caught.value).startswith(fault)


def test_the_url_and_its_password_are_secrets_of_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    from pinchpoint.redact import secret_values

    monkeypatch.setenv("REDIS_URL", "redis://app:hunter22@127.0.0.1:6380/0")
    plan = parse_plan(PLAN + 'url_env = "REDIS_URL"\n')
    assert {"redis://app:hunter22@127.0.0.1:6380/0", "hunter22"} <= set(secret_values(plan))
    address = parse_url("redis://app:hunter22@127.0.0.1:6380/0")
    assert (address.host, address.port, address.username, address.password) == (
        "127.0.0.1", 6380, "app", "hunter22",
    )  # fmt: skip
    for url, fault in [
        ("rediss://:hunter22@db", "must start with redis://"),
        ("redis://:hunter22@db:0x1", "port is not a number"),
        ("redis://:hunter22@:6379", "names no host"),
    ]:
        with pytest.raises(ValueError, match=fault) as caught:
            parse_url(url)
        assert "hunter22" not in str(caught.value)


def test_info_text_becomes_fields_and_command_stats() -> None:
    text = (
        "# CPU\r\nused_cpu_sys:1.5\r\nused_cpu_user_main_thread:0.25\r\n\r\n# Commandstats\r\n"
        "cmdstat_get:calls=21,usec=175,usec_per_call=8.33,rejected_calls=0,failed_calls=0\r\n"
        "cmdstat_client|list:calls=2,usec=30,usec_per_call=15.00\r\n"
        "cmdstat_odd:calls=x,usec=1\r\n"
    )
    assert info_fields(text)["used_cpu_sys"] == "1.5"
    assert "# CPU" not in info_fields(text)
    assert command_stats(text) == [CommandStat("get", 21, 175), CommandStat("client|list", 2, 30)]


def test_an_unset_or_bad_url_is_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PP_TEST_REDIS_BAD", "http://:hunter22@db")
    bad = RedisSampler("cache", Redis(url_env="PP_TEST_REDIS_BAD"))
    unset = RedisSampler("other", Redis(url_env="PP_TEST_REDIS_UNSET"))
    sampling = DatabaseSampling([], [bad, unset])
    sampling.start()
    sampling.stop()
    assert sampling.problems == [
        "redis cache: PP_TEST_REDIS_BAD: the URL must start with redis:// (rediss://, TLS, "
        "is not supported)",
        "redis other: PP_TEST_REDIS_UNSET is not set: the server was not sampled",
    ]


@pytest.fixture(scope="module")
def redis() -> Iterator[Any]:
    from pinchpoint_lab.redis_server import RedisServer, find_redis

    if find_redis() is None:
        pytest.skip("apt: redis-server")
    with RedisServer() as server:
        yield server


def _samples(folder: Path, began: float, ended: float) -> RedisSamples:
    return RedisSamples(
        pl.read_parquet(folder / files.REDIS_INFO),
        pl.read_parquet(folder / files.REDIS_COMMANDS),
        pl.read_parquet(folder / files.REDIS_SLOWLOG),
        [Window(0, 1, began, ended)],
    )


def test_commands_clients_and_the_slowlog_are_sampled(redis: Any, tmp_path: Path) -> None:
    redis.command("DEBUG", "SLEEP", "0.03")  # logged before the run: not the run's
    sampler = RedisSampler("cache", Redis(url_env=redis.url_env, rate=20))
    began = time.time()
    sampler.start()
    # The counts are the deltas from the first sample: none of the commands may precede it.
    deadline = time.monotonic() + 5
    while not sampler.info and time.monotonic() < deadline:
        time.sleep(0.01)
    blocker = redis.connect()
    waiting = threading.Thread(target=lambda: blocker.command("BLPOP", "queue", "2"))
    waiting.start()
    client = redis.connect()
    try:
        for i in range(300):
            client.command("SET", f"k{i}", "v")
            client.command("GET", f"k{i}")
        for _ in range(3):
            client.command("DEBUG", "SLEEP", "0.05")
        deadline = time.monotonic() + 5
        while not any(r["blocked_clients"] for r in sampler.info) and time.monotonic() < deadline:
            time.sleep(0.02)
        client.command("LPUSH", "queue", "job")
        waiting.join(5)
    finally:
        client.close()
        blocker.close()
        sampler.stop()
        # After the stop: its last sample, the run's last totals, is in the window, as a
        # run's sampler stops after its last step (a starved sampler may have taken no
        # other after the commands).
        ended = time.time()
    assert sampler.problems == []
    DatabaseSampling([], [sampler]).write(files.RunFolder(tmp_path))
    assert not (tmp_path / files.DB_ACTIVITY).exists()
    inside = redis_inside(_samples(tmp_path, began, ended), "cache", [Window(0, 1, began, ended)])
    by_name = {c["command"]: c for c in inside["commands"]}
    # DEBUG SLEEP holds the main thread 150 ms but takes no CPU: it leads by time.
    assert inside["commands"][0]["command"] == "debug"
    assert by_name["debug"]["calls"] == 3 and by_name["debug"]["busy_s"] >= 0.15
    assert (by_name["set"]["calls"], by_name["get"]["calls"]) == (300, 300)
    assert inside["slow"] == [
        {"command": "DEBUG", "entries": 3, "longest_ms": pytest.approx(50, abs=15)}
    ]
    assert inside["blocked_clients"] == 1
    # The two clients, and the sampler itself.
    assert inside["clients"] == 3
    assert inside["peak_cores"] is not None and not inside["saturated"]
    lines = evidence_lines({"component": "cache", "redis": inside})
    assert lines[1].startswith("cache's commands by time in the run (INFO commandstats): debug ")
    assert lines[2].startswith("cache's SLOWLOG in the run: DEBUG ×3 (up to ")


# A command that scans every key 12 times, for a third of a second or so: the sampler's
# INFO is answered between two of them.
SCANS = "for i = 1, 12 do redis.call('KEYS', 'nomatch*') end return 0"


@pytest.mark.serial
def test_a_scanning_redis_is_saturated_at_one_core(redis: Any, tmp_path: Path) -> None:
    redis.command("DEBUG", "POPULATE", "200000", "scan")
    sampler = RedisSampler("cache", Redis(url_env=redis.url_env, rate=10))
    sampler.start()
    time.sleep(0.3)
    # One connection for all the scripts: a connection and AUTH before each would leave
    # Redis waiting between them.
    conn = redis.connect()
    began = time.time()
    for _ in range(5):
        conn.command("EVAL", SCANS, "0")
    ended = time.time()
    conn.close()
    time.sleep(0.2)
    sampler.stop()
    redis.command("FLUSHALL")
    assert sampler.problems == []
    DatabaseSampling([], [sampler]).write(files.RunFolder(tmp_path))
    inside = redis_inside(_samples(tmp_path, began, ended), "cache", [Window(0, 1, began, ended)])
    print(f"\nRedis main thread: {inside['peak_cores']:.3f} cores at most")
    # Alone on the host (`make test` runs the serial tests alone), a whole core.
    assert inside["peak_cores"] >= SATURATED
    assert inside["saturated"]
    # A script's commands count in commandstats and in the script's own time.
    top = {c["command"]: c["calls"] for c in inside["commands"][:2]}
    assert set(top) == {"eval", "keys"}
    assert "EVAL" in {s["command"] for s in inside["slow"]}
    lines = evidence_lines({"component": "cache", "redis": inside})
    assert "(saturated: Redis runs its commands on one core) (INFO cpu)" in lines[0]
