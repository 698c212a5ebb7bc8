"""The demo app's shop journey as a Locust user, for `pinchpoint run` with a locustfile:
log in (a token and a session cookie), list the user's orders, read the first one (and
check that the answer is that order), post a note on it with the session cookie.

    pinchpoint demo --plan examples/shop_locust.toml     # on the demo stack
    pinchpoint run examples/shop_locust.toml             # on a stack of your own

pinchpoint runs these users under the plan's steps, tags each request with the run and
sends them to the plan's target (a class without `host` gets it). Each request is named
(`name=`), so the run's tables show `POST login`, `GET orders`, `GET detail`, `POST note`.
"""

from __future__ import annotations

import itertools
from typing import ClassVar

from locust import HttpUser, SequentialTaskSet, constant, task

ACCOUNTS = 200  # user0 .. user199 in the demo app
_next_account = itertools.count()


class Journey(SequentialTaskSet):
    order = 0

    @task
    def orders(self) -> None:
        with self.client.get(
            "/api/orders", headers=self.user.auth, name="orders", catch_response=True
        ) as answer:
            if answer.status_code != 200:
                answer.failure(f"orders: status {answer.status_code}")
                self.interrupt()
            self.order = answer.json()["orders"][0]["id"]

    @task
    def detail(self) -> None:
        with self.client.get(
            f"/api/orders/{self.order}", headers=self.user.auth, name="detail", catch_response=True
        ) as answer:
            if answer.status_code == 200 and answer.json().get("id") != self.order:
                answer.failure(f"detail: asked for order {self.order}, got {answer.json()['id']}")

    @task
    def note(self) -> None:
        self.client.post(
            f"/api/orders/{self.order}/notes",
            data={"note": f"walked by {self.user.account}"},
            name="note",
        )


class Shopper(HttpUser):
    wait_time = constant(0.02)
    tasks: ClassVar = [Journey]

    def on_start(self) -> None:
        n = next(_next_account) % ACCOUNTS
        self.account = f"user{n}"
        answer = self.client.post(
            "/api/login", json={"user": self.account, "password": f"pw-{n}"}, name="login"
        )
        self.auth = {"Authorization": f"Bearer {answer.json()['token']}"}
