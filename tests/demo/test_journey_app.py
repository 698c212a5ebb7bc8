"""The demo app's shop journey (demo/journey.py): in Flask's test client, then through the
real stack (nginx → gunicorn with several workers)."""

from __future__ import annotations

import csv
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest
from flask.testing import FlaskClient

from pinchpoint.demo import DemoStack
from pinchpoint.demo.app import create_app
from pinchpoint.demo.env import WRONG_EVERY_ENV
from pinchpoint.demo.journey import (
    ACCOUNTS,
    MAX_NOTE_CHARS,
    SERVED_BY_HEADER,
    SESSION_COOKIE,
    order_ids,
)
from pinchpoint_lab.needs import nginx_missing

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FlaskClient:
    monkeypatch.delenv(WRONG_EVERY_ENV, raising=False)
    return create_app(tmp_path / "demo.sqlite3", tmp_path / "probe.log").test_client()


def login(client: FlaskClient, n: int) -> str:
    answer = client.post("/api/login", json={"user": f"user{n}", "password": f"pw-{n}"})
    assert answer.status_code == 200
    return str(answer.get_json()["token"])


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_login_answers_a_token_and_sets_the_session_cookie(client: FlaskClient) -> None:
    answer = client.post("/api/login", json={"user": "user7", "password": "pw-7"})
    assert answer.status_code == 200
    body = answer.get_json()
    assert body["user"] == "user7"
    assert len(body["token"]) == 32 and int(body["token"], 16) >= 0
    cookie = answer.headers["Set-Cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=") and "HttpOnly" in cookie and "Path=/" in cookie
    session = client.get_cookie(SESSION_COOKIE)
    assert session is not None and len(session.value) == 32 and session.value != body["token"]

    form = client.post("/api/login", data={"user": "user199", "password": "pw-199"})
    assert form.status_code == 200 and form.get_json()["user"] == "user199"
    assert form.get_json()["token"] != body["token"]


@pytest.mark.parametrize(
    "body", [{"user": "user7", "password": "pw-8"}, {"user": "nobody", "password": "pw-7"}]
)
def test_a_wrong_login_is_401(client: FlaskClient, body: dict[str, str]) -> None:
    answer = client.post("/api/login", json=body)
    assert answer.status_code == 401
    assert "error" in answer.get_json()
    assert client.get_cookie(SESSION_COOKIE) is None


def test_a_login_without_both_fields_is_400(client: FlaskClient) -> None:
    assert client.post("/api/login", data={"user": "user7"}).status_code == 400
    assert client.post("/api/login", json={"user": "user7", "password": 7}).status_code == 400


@pytest.mark.parametrize("header", [None, "Bearer ", "Bearer nope", "Basic dXNlcjc6cHctNw=="])
def test_orders_need_a_valid_bearer_token(client: FlaskClient, header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    assert client.get("/api/orders", headers=headers).status_code == 401
    assert client.get("/api/orders/22", headers=headers).status_code == 401


def test_the_whole_journey(client: FlaskClient) -> None:
    token = login(client, 7)
    orders = client.get("/api/orders", headers=bearer(token))
    assert orders.status_code == 200
    listed = orders.get_json()["orders"]
    assert [order["id"] for order in listed] == order_ids(7) == [22, 23, 24]
    assert all(set(order) == {"id", "item", "qty"} for order in listed)

    first = listed[0]
    detail = client.get(f"/api/orders/{first['id']}", headers=bearer(token))
    assert detail.status_code == 200
    body = detail.get_json()
    item = client.get(f"/api/items/{first['item']}").get_json()
    assert body == {"id": 22, "user": "user7", "item": item, "qty": first["qty"]}

    noted = client.post(f"/api/orders/{first['id']}/notes", data={"note": "leave at the door"})
    assert noted.status_code == 201
    assert noted.content_type.startswith("text/html")
    assert noted.get_data(as_text=True) == "<p>noted 22</p>"


def test_another_users_order_is_404(client: FlaskClient) -> None:
    token = login(client, 7)
    assert client.get(f"/api/orders/{order_ids(8)[0]}", headers=bearer(token)).status_code == 404
    assert client.get("/api/orders/999999", headers=bearer(token)).status_code == 404
    other = client.post(f"/api/orders/{order_ids(8)[0]}/notes", data={"note": "mine?"})
    assert other.status_code == 404


def test_notes_need_the_session_cookie(client: FlaskClient) -> None:
    token = login(client, 3)
    client.delete_cookie(SESSION_COOKIE)
    assert client.post("/api/orders/10/notes", data={"note": "hi"}).status_code == 401
    # The bearer token is not a session.
    answer = client.post("/api/orders/10/notes", data={"note": "hi"}, headers=bearer(token))
    assert answer.status_code == 401
    client.set_cookie(SESSION_COOKIE, "0" * 32)
    assert client.post("/api/orders/10/notes", data={"note": "hi"}).status_code == 401


def test_a_missing_or_oversize_note_is_400(client: FlaskClient) -> None:
    login(client, 3)
    url = f"/api/orders/{order_ids(3)[1]}/notes"
    assert client.post(url, data={"note": "x" * (MAX_NOTE_CHARS + 1)}).status_code == 400
    assert client.post(url, data={}).status_code == 400
    assert client.post(url, data={"note": ""}).status_code == 400
    assert client.post(url, json={"note": "as JSON"}).status_code == 400
    assert client.post(url, data={"note": "x" * MAX_NOTE_CHARS}).status_code == 201


def test_every_third_detail_has_a_wrong_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WRONG_EVERY_ENV, "3")
    client = create_app(tmp_path / "demo.sqlite3", tmp_path / "probe.log").test_client()
    token = login(client, 5)
    asked = order_ids(5) * 4
    answers = [client.get(f"/api/orders/{i}", headers=bearer(token)) for i in asked]
    assert [answer.status_code for answer in answers] == [200] * len(asked)
    shown = [answer.get_json()["id"] for answer in answers]
    wrong = [n for n, (got, want) in enumerate(zip(shown, asked, strict=True), 1) if got != want]
    assert wrong == [3, 6, 9, 12]


def test_a_bad_wrong_every_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WRONG_EVERY_ENV, "often")
    with pytest.raises(ValueError, match=WRONG_EVERY_ENV):
        create_app(tmp_path / "demo.sqlite3", tmp_path / "probe.log")


def test_the_accounts_file_matches_the_seeded_accounts(client: FlaskClient) -> None:
    with (ROOT / "examples" / "accounts.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == ACCOUNTS
    assert rows[0] == {"user": "user0", "password": "pw-0"}
    for row in rows[::50] + rows[-1:]:
        answer = client.post("/api/login", data=row)
        assert answer.status_code == 200, row


_NGINX_MISSING = nginx_missing()


def _keep_workers_busy(url: str, stop: threading.Event) -> None:
    """Occupies a worker at a time with a short wait, so the journey's requests land on
    whichever workers are free rather than on one."""
    with httpx.Client(base_url=url, trust_env=False, timeout=10) as busy:
        while not stop.is_set():
            busy.get("/sys_perf_check?cpu=0&wait=15")


@pytest.mark.timeout(120)
@pytest.mark.skipif(bool(_NGINX_MISSING), reason=_NGINX_MISSING)
def test_the_journey_through_nginx_across_gunicorn_workers(tmp_path: Path) -> None:
    with DemoStack(tmp_path / "stack", workers=4) as stack:
        master = psutil.Process(int(stack.gunicorn_pid_file.read_text()))
        workers = {str(worker.pid) for worker in master.children()}
        assert len(workers) == 4
        stop = threading.Event()
        busy = [
            threading.Thread(target=_keep_workers_busy, args=(stack.gunicorn_url, stop))
            for _ in range(2)
        ]
        for thread in busy:
            thread.start()
        token_elsewhere = cookie_elsewhere = 0
        served: set[str] = set()
        try:
            deadline = time.monotonic() + 60
            n = 0
            while n < 8 or not (token_elsewhere and cookie_elsewhere):
                assert time.monotonic() < deadline, "the journey never crossed workers"
                login_pid, token_pids, cookie_pid = _walk(stack.url, n % ACCOUNTS)
                served |= {login_pid, cookie_pid, *token_pids}
                token_elsewhere += any(pid != login_pid for pid in token_pids)
                cookie_elsewhere += cookie_pid != login_pid
                n += 1
        finally:
            stop.set()
            for thread in busy:
                thread.join()
    assert served <= workers and len(served) >= 2


def _walk(url: str, n: int) -> tuple[str, list[str], str]:
    """User n's journey through url, checked; the pids that served the login, the two
    requests with the token, and the note with the cookie."""
    with httpx.Client(base_url=url, trust_env=False, timeout=10) as client:
        logged = client.post("/api/login", json={"user": f"user{n}", "password": f"pw-{n}"})
        assert logged.status_code == 200
        token = logged.json()["token"]
        assert client.cookies.get(SESSION_COOKIE) is not None
        orders = client.get("/api/orders", headers=bearer(token))
        assert orders.status_code == 200
        ids = [order["id"] for order in orders.json()["orders"]]
        assert ids == order_ids(n)
        detail = client.get(f"/api/orders/{ids[0]}", headers=bearer(token))
        assert detail.status_code == 200
        assert detail.json()["id"] == ids[0] and detail.json()["user"] == f"user{n}"
        noted = client.post(f"/api/orders/{ids[0]}/notes", data={"note": f"from user{n}"})
        assert noted.status_code == 201 and noted.text == f"<p>noted {ids[0]}</p>"
        token_pids = [orders.headers[SERVED_BY_HEADER], detail.headers[SERVED_BY_HEADER]]
        return logged.headers[SERVED_BY_HEADER], token_pids, noted.headers[SERVED_BY_HEADER]
