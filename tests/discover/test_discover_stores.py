"""init follows an app's connections to MariaDB and Redis: each a component of its own,
known by its program, sampled from inside through a variable the plan names (the
password stays out of the plan), with the address the app reached it at."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pinchpoint.discover.init import init_plan
from pinchpoint.discover.walk import kind_of
from pinchpoint.plan.model import parse_plan
from pinchpoint_lab.mariadb import MariadbServer, find_mariadb
from pinchpoint_lab.needs import nginx_missing
from pinchpoint_lab.redis_server import PASSWORD, RedisServer, find_redis
from pinchpoint_lab.store_stack import StoreStack, prepare_counters

pytestmark = pytest.mark.skipif(bool(nginx_missing()), reason="nginx is needed")


def _exported(text: str, variable: str) -> str:
    """The value the plan's comment says to export `variable` as."""
    found = re.search(rf'^#   export {variable}="([^"]+)"$', text, re.M)
    assert found is not None, text
    return found[1]


def test_kind_of_knows_mariadb_and_redis_by_their_programs() -> None:
    assert kind_of(["/usr/sbin/mariadbd", "--port=3306"], "/usr/sbin/mariadbd") == "mysql"
    assert kind_of(["mysqld"], "/usr/sbin/mysqld") == "mysql"
    # Debian's redis-server is a link to redis-check-rdb, which retitles its process.
    assert kind_of(["redis-server 127.0.0.1:6379"], "/usr/bin/redis-check-rdb") == "redis"
    assert kind_of(["redis-server *:6379"], "/usr/bin/redis-server") == "redis"
    assert kind_of(["/usr/bin/redis-cli"], "/usr/bin/redis-cli") is None


@pytest.mark.skipif(find_redis() is None, reason="redis-server is needed")
def test_init_follows_the_app_to_redis_and_names_the_url_to_set(tmp_path: Path) -> None:
    with RedisServer() as redis, StoreStack(tmp_path, 2, redis=redis) as stack:
        text, found = init_plan(f"{stack.url}/api/redis?loops=10")
    plan = parse_plan(text)
    named = {c.name: c for c in plan.component}
    assert named["app"].calls == ["redis"], found.problems
    store = named["redis"]
    assert store.role == "cache" and store.redis is not None
    assert store.redis.url_env == "PINCHPOINT_REDIS_URL"
    assert store.process is not None
    example = _exported(text, "PINCHPOINT_REDIS_URL")
    assert example == f"redis://:PASSWORD@127.0.0.1:{redis.port}/0"
    assert PASSWORD not in text  # its command line held it; the plan does not


@pytest.mark.skipif(find_mariadb() is None, reason="MariaDB is needed")
def test_init_follows_the_app_to_mariadb_and_samples_it_as_mysql(tmp_path: Path) -> None:
    with MariadbServer() as mariadb:
        prepare_counters(mariadb)
        with StoreStack(tmp_path, 2, mariadb=mariadb) as stack:
            text, found = init_plan(f"{stack.url}/api/hot?hold=0", "POST")
        assert found.status == 200
        plan = parse_plan(text)
        named = {c.name: c for c in plan.component}
        assert named["app"].calls == ["mariadb"], found.problems
        store = named["mariadb"]
        assert store.role == "database" and store.database is not None
        assert (store.database.kind, store.database.dsn_env) == ("mysql", "PINCHPOINT_MARIADB_DSN")
        assert store.process is not None and store.process.pid_file == str(mariadb.folder / "pid")
        example = _exported(text, "PINCHPOINT_MARIADB_DSN")
        assert example == f"mysql://USER:PASSWORD@127.0.0.1:{mariadb.port}/DATABASE"
