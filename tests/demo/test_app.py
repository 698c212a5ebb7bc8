import json
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from pinchpoint.demo.app import FSYNC_FILE, SEED_ROWS, create_app


@pytest.fixture
def client(tmp_path: Path) -> FlaskClient:
    return create_app(tmp_path / "demo.sqlite3", tmp_path / "probe.log").test_client()


def test_lists_seeded_items_with_limit_and_offset(client: FlaskClient) -> None:
    items = client.get("/api/items?limit=5&offset=10").get_json()["items"]
    assert [item["id"] for item in items] == [11, 12, 13, 14, 15]
    assert len(client.get("/api/items?limit=1000").get_json()["items"]) == SEED_ROWS


@pytest.mark.parametrize("query", ["limit=0", "limit=1001", "limit=x", "offset=-1"])
def test_rejects_bad_paging(client: FlaskClient, query: str) -> None:
    assert client.get(f"/api/items?{query}").status_code == 400


def test_adds_and_gets_an_item(client: FlaskClient) -> None:
    created = client.post("/api/items", json={"name": "widget", "price": 3})
    assert created.status_code == 201
    item_id = created.get_json()["id"]
    assert item_id == SEED_ROWS + 1
    got = client.get(f"/api/items/{item_id}").get_json()
    assert got == {"id": item_id, "name": "widget", "price": 3}


@pytest.mark.parametrize("body", [{"name": "", "price": 1}, {"name": "x"}, [1, 2], "text"])
def test_rejects_bad_items(client: FlaskClient, body: object) -> None:
    assert client.post("/api/items", json=body).status_code == 400


def test_unknown_item_is_404(client: FlaskClient) -> None:
    assert client.get("/api/items/999999").status_code == 404


def test_seeds_only_once(tmp_path: Path) -> None:
    for _ in range(2):
        app = create_app(tmp_path / "demo.sqlite3", tmp_path / "probe.log")
    items = app.test_client().get("/api/items?limit=1000").get_json()["items"]
    assert len(items) == SEED_ROWS


def test_the_probe_is_mounted_and_logs_tagged_requests(tmp_path: Path) -> None:
    log = tmp_path / "probe.log"
    client = create_app(tmp_path / "demo.sqlite3", log).test_client()
    targets = [
        "/sys_perf_check?cpu=1&wait=0&pp_run=r1&pp_users=1&pp_req=7",
        "/api/items?limit=1&pp_run=r1&pp_users=1&pp_req=8",
        "/api/items?limit=1",
    ]
    for target in targets:
        # The probe logs a request when the server closes its response.
        with client.get(target) as response:
            assert response.status_code == 200
    uris = [json.loads(line)["uri"] for line in log.read_text().splitlines()]
    assert uris == targets[:2]


def test_wsgi_entry_needs_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from pinchpoint.demo.app import wsgi

    monkeypatch.delenv("PINCHPOINT_DEMO_DB", raising=False)
    monkeypatch.setenv("PINCHPOINT_PROBE_LOG", "/tmp/x.log")
    with pytest.raises(RuntimeError, match="PINCHPOINT_DEMO_DB"):
        wsgi()


def test_fsync_appends_and_syncs_as_asked(tmp_path: Path) -> None:
    client = create_app(tmp_path / "demo.sqlite3", tmp_path / "probe.log").test_client()
    answer = client.post("/api/fsync?kb=8&n=3")
    assert answer.status_code == 200
    body = answer.get_json()
    assert body["kb"] == 8 and body["n"] == 3 and body["fsync_s"] > 0
    assert (tmp_path / FSYNC_FILE).stat().st_size == 3 * 8 * 1024
    assert client.get("/api/fsync").get_json()["kb"] == 64
    for bad in ("kb=0", "kb=1025", "n=17", "n=x"):
        assert client.get(f"/api/fsync?{bad}").status_code == 400


@pytest.mark.parametrize("query", ["hold=-1", "hold=1001", "hold=x"])
def test_checkout_rejects_a_bad_hold(client: FlaskClient, query: str) -> None:
    assert client.post(f"/api/checkout?{query}").status_code == 400


def test_checkout_answers_the_time_it_held_the_lock(client: FlaskClient) -> None:
    answer = client.post("/api/checkout?hold=5")
    assert answer.status_code == 200 and answer.get_json() == {"held_ms": 5}
