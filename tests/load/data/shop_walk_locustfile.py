"""The shop journey exactly as tests/load/test_flow_vs_locustfile.py's flow walks it:
every walk logs in again (a row of accounts per user), lists the orders, reads the
first one and posts a note, 20 ms between requests. A FastHttpUser: HttpUser's client
(requests) writes a POST's body after its head, and the app, reading the body, waits for
it inside its own time (about 1 ms more per POST on this journey)."""

from __future__ import annotations

import itertools
from typing import ClassVar

from locust import FastHttpUser, SequentialTaskSet, constant, task

_users = itertools.count()


class Walk(SequentialTaskSet):
    token = ""
    order = 0

    @task
    def login(self) -> None:
        n = self.user.index
        answer = self.client.post(
            "/api/login", json={"user": f"user{n}", "password": f"pw-{n}"}, name="login"
        )
        self.token = answer.json()["token"]

    @task
    def orders(self) -> None:
        auth = {"Authorization": f"Bearer {self.token}"}
        answer = self.client.get("/api/orders", headers=auth, name="orders")
        self.order = answer.json()["orders"][0]["id"]

    @task
    def detail(self) -> None:
        auth = {"Authorization": f"Bearer {self.token}"}
        self.client.get(f"/api/orders/{self.order}", headers=auth, name="detail")

    @task
    def note(self) -> None:
        self.client.post(f"/api/orders/{self.order}/notes", data={"note": "x"}, name="note")


class Walker(FastHttpUser):
    wait_time = constant(0.02)
    tasks: ClassVar = [Walk]

    def on_start(self) -> None:
        self.index = next(_users) % 200
