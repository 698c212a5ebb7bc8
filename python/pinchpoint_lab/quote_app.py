"""A shop that quotes wrong prices on purpose, and keeps count of them: the journey of
the flow tests that rebuild users' walks and compare captured values.

- `GET /api/account/<user>`: `{"user": 3, "budget": 80}`, the user's budget
  (`budget(user)`).
- `GET /api/catalogue/<n>`: `{"item": 4, "price": 11.48}`, item `n % ITEMS + 1` and its
  price (`price(item)`).
- `GET /api/quote/<n>?user=<user>`: `{"item": 4, "price": 11.48, "total": 76.0}`, the
  same item's price and the cart's total, between 0.9 and 1.08 times the user's budget.
  Every `wrong_every`th quote is wrong, alternately by its price (a cent more than the
  catalogue's) and by its total (a quarter above the budget).
- `POST /api/pay`: `{"paid": true}`.

Every request's tag (`pp_req` in the query) is kept with its path in the `Ledger`, and
each wrong quote's by its kind.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from pinchpoint_lab.serving import Quiet, serving

ITEMS = 20
_ROUTE = re.compile(r"/api/(account|catalogue|quote)/(\d+)")


def budget(user: int) -> float:
    return 50.0 + 10 * (user % 5)


def price(item: int) -> float:
    return round(5 + 1.37 * item, 2)


def total(user: int, n: int) -> float:
    """A right quote's total: 0.9 to 1.08 times the budget, above it one quote in three."""
    return round(budget(user) * (0.9 + 0.02 * (n % 10)), 2)


@dataclass
class Ledger:
    """What the shop served: each tagged request's path by its `pp_req`, and the
    `pp_req` of each wrong quote by kind (`price`, `total`)."""

    paths: dict[int, str] = field(default_factory=dict)
    wrong: dict[str, set[int]] = field(default_factory=lambda: {"price": set(), "total": set()})
    quotes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wrong_ids(self) -> set[int]:
        with self.lock:
            return self.wrong["price"] | self.wrong["total"]


class _Shop(Quiet):
    # The head and body in one write (the server flushes after each request): written
    # apart, the body waits for the client's delayed ACK, 40 ms an answer.
    wbufsize = 1 << 16
    ledger: Ledger
    wrong_every: int

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        req = int(query["pp_req"][0]) if "pp_req" in query else None
        route = _ROUTE.fullmatch(url.path)
        if route is None:
            self._answer(404, {"error": f"no {url.path}"})
            return
        kind, n = route.group(1), int(route.group(2))
        with self.ledger.lock:
            if req is not None:
                self.ledger.paths[req] = url.path
        if kind == "account":
            self._answer(200, {"user": n, "budget": budget(n)})
        elif kind == "catalogue":
            item = n % ITEMS + 1
            self._answer(200, {"item": item, "price": price(item)})
        else:
            self._answer(200, self._quote(n, int(query.get("user", ["0"])[0]), req))

    def _quote(self, n: int, user: int, req: int | None) -> dict:
        item = n % ITEMS + 1
        quote = {"item": item, "price": price(item), "total": total(user, n)}
        with self.ledger.lock:
            self.ledger.quotes += 1
            turn = self.ledger.quotes
            if self.wrong_every and turn % self.wrong_every == 0:
                kind = "price" if turn // self.wrong_every % 2 else "total"
                if kind == "price":
                    quote["price"] = round(quote["price"] + 0.01, 2)
                else:
                    quote["total"] = budget(user) * 1.25
                if req is not None:
                    self.ledger.wrong[kind].add(req)
        return quote

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if "pp_req" in query:
            with self.ledger.lock:
                self.ledger.paths[int(query["pp_req"][0])] = url.path
        self._answer(200 if url.path == "/api/pay" else 404, {"paid": url.path == "/api/pay"})

    def _answer(self, status: int, body: dict) -> None:
        self.answer(status, json.dumps(body).encode(), "application/json")


@contextmanager
def serve_quotes(wrong_every: int) -> Iterator[tuple[str, Ledger]]:
    """The shop on 127.0.0.1 in a thread, every `wrong_every`th quote wrong (0: none);
    yields its URL and its ledger."""
    ledger = Ledger()
    handler = type("Shop", (_Shop,), {"ledger": ledger, "wrong_every": wrong_every})
    with serving(handler) as port:
        yield f"http://127.0.0.1:{port}", ledger
