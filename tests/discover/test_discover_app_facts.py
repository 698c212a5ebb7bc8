"""What init reads of an app's processes beside their server: the OTEL_* variables its
exporter runs by (an [[otlp]] receiver where it sends, no other variable copied) and the
PostgreSQL it holds a connection to ([component.database], its clients' user and database,
never a password). Each plan is parsed by the plan loader."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from discover_helpers import HOST, running

from pinchpoint.discover.init import init_plan
from pinchpoint.plan.model import parse_plan
from pinchpoint_lab.ports import free_port

pytestmark = pytest.mark.timeout(120)

SECRET = "s3cr3t-Zq8"
# A plain HTTP server that opens a PostgreSQL connection first when given a DSN.
APP = """import http.server, os, sys
held = None
if os.environ.get("APP_DSN"):
    import psycopg
    held = psycopg.connect(os.environ["APP_DSN"], connect_timeout=10)
http.server.test(http.server.SimpleHTTPRequestHandler, http.server.ThreadingHTTPServer,
                 port=int(sys.argv[1]), bind="127.0.0.1")
"""


def _app(tmp_path: Path) -> tuple[list[str], int]:
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "index.html").write_text("ok")
    port = free_port()
    return [sys.executable, "app.py", str(port)], port


def test_an_apps_otel_exporter_gives_an_otlp_receiver_where_it_sends(tmp_path: Path) -> None:
    collector = free_port()
    env = {
        "OTEL_SERVICE_NAME": "shop",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector}",
        "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer {SECRET}",
        "SHOP_API_KEY": SECRET,
    }
    argv, port = _app(tmp_path)
    with running(argv, tmp_path, port, workers=0, env=env):
        text, found = init_plan(f"http://{HOST}:{port}/")
    plan = parse_plan(text, "plan.toml")
    [tier] = found.tiers
    assert tier.otel == {
        "OTEL_SERVICE_NAME": "shop",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector}",
    }
    # Nothing listens where it sends: pinchpoint receives there, the app unchanged.
    assert [o.listen for o in plan.otlp] == [f"127.0.0.1:{collector}"]
    assert f"They already send spans to 127.0.0.1:{collector}" in text
    assert SECRET not in text and "SHOP_API_KEY" not in text


def test_an_exporter_sending_to_a_collector_is_told_how_to_send_to_pinchpoint(
    tmp_path: Path,
) -> None:
    collector = free_port()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://localhost:{collector}"}
    argv, port = _app(tmp_path)
    taken = [sys.executable, "-m", "http.server", "--bind", HOST, str(collector)]
    with (
        running(taken, tmp_path, collector, workers=0),
        running(argv, tmp_path, port, workers=0, env=env),
    ):
        text, found = init_plan(f"http://{HOST}:{port}/")
    plan = parse_plan(text, "plan.toml")
    [listen] = [o.listen for o in plan.otlp]
    assert listen is not None and listen != f"127.0.0.1:{collector}"
    assert f"OTEL_EXPORTER_OTLP_ENDPOINT=http://{listen}" in text
    assert found.tiers[0].name == "python3"


@pytest.fixture(scope="module")
def postgres() -> Iterator[object]:
    from pinchpoint_lab.postgres import PostgresCluster, find_postgres

    if find_postgres() is None:
        pytest.skip("apt: postgresql")
    with PostgresCluster() as pg:
        yield pg


def test_an_app_holding_a_postgresql_connection_gives_its_database_table(
    tmp_path: Path, postgres: object
) -> None:
    from pinchpoint_lab.postgres import PostgresCluster

    assert isinstance(postgres, PostgresCluster)
    dsn = f"host={HOST} port={postgres.port} user=postgres dbname=postgres password={SECRET}"
    env = {"APP_DSN": dsn, "PGPASSWORD": SECRET}
    argv, port = _app(tmp_path)
    with running(argv, tmp_path, port, workers=0, env=env) as pid:
        text, found = init_plan(f"http://{HOST}:{port}/")
    plan = parse_plan(text, "plan.toml")
    assert [t.name for t in found.tiers] == ["python3", "postgres"], found.problems
    app, database = plan.component
    assert (app.role, app.calls) == ("service", ["postgres"])
    assert database.database is not None
    assert database.database.dsn_env == "PINCHPOINT_POSTGRES_DSN"
    assert found.tiers[1].client_dsn == (
        f"host={HOST} port={postgres.port} user=postgres dbname=postgres"
    )
    # The run connects as the clients do with no hand edit; the password stays out.
    assert database.database.connection == found.tiers[1].client_dsn
    assert database.database.dsn() == found.tiers[1].client_dsn
    assert SECRET not in text
    assert found.tiers[0].pid == pid
