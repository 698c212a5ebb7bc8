"""The target-only rule of a locustfile's users: a request goes to the plan's target
or nowhere. Checked with the address each HTTP client itself works out, not with a
parse of our own: a URL that `urlsplit` and urllib3 read differently
(`http://127.0.0.1:A\\@127.0.0.1:B/`) is judged by where it would connect.

- Before a request, `requests_address` (Locust's HttpSession: requests over urllib3)
  and `fast_address` (FastHttpSession: geventhttpclient) name the address the client
  connects to for the URL, found by the client's own code.
- Where the clients open their connections (urllib3's `HTTPConnection._new_conn`,
  geventhttpclient's `ConnectionPool._create_socket`), `guard_connections` refuses any
  other address: a redirect off the target, a proxy, a URL read otherwise than here.

An address is (scheme, host, port): the host lower-case, without brackets or a final dot.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

Address = tuple[str, str, int]

_DEFAULT_PORTS = {"http": 80, "https": 443}


class OffTarget(Exception):
    """A request the locustfile sends away from the plan's target: not sent."""


def address(scheme: str, host: str, port: int | None) -> Address:
    scheme = scheme.lower()
    host = host.strip("[]").rstrip(".").lower()
    return scheme, host, port if port is not None else _DEFAULT_PORTS.get(scheme, 0)


def target_address(url: str) -> Address:
    """The plan's target as urllib3 reads it."""
    from urllib3.util import parse_url

    parts = parse_url(url)
    return address(parts.scheme or "http", parts.host or "", parts.port)


@functools.cache
def _adapter() -> Any:
    import requests.adapters

    return requests.adapters.HTTPAdapter()


def requests_address(url: str) -> Address:
    """Where requests (through urllib3) connects for `url`: the connection pool its
    adapter picks for the prepared request. Raises what requests raises for a URL it
    cannot send."""
    import requests

    prepared = requests.PreparedRequest()
    prepared.prepare_url(url, None)
    pool = _adapter().get_connection_with_tls_context(prepared, verify=False)
    return address(pool.scheme, pool.host, pool.port)


def fast_address(url: str) -> Address:
    """Where geventhttpclient connects for `url`: the host and port HTTPClient.from_url
    makes its client for, TLS when the scheme is https."""
    from geventhttpclient.url import URL

    parsed = URL(url)
    # HTTPClient takes a port of 0 for none.
    return address(
        "https" if parsed.scheme == "https" else "http", parsed.host, parsed.port or None
    )


def guard_connections(target: Address, refused: Callable[[Address], None]) -> None:
    """Every connection urllib3 and geventhttpclient open goes to `target`: for another
    address `refused(address)` is called (it records it) and OffTarget raised before
    the connection is made."""
    import urllib3.connection
    from geventhttpclient.connectionpool import ConnectionPool, SSLConnectionPool

    def check(where: Address) -> None:
        if where != target:
            refused(where)
            raise OffTarget(f"{where[0]}://{where[1]}:{where[2]}: not the plan's target")

    new_conn = urllib3.connection.HTTPConnection._new_conn

    def guarded_new_conn(conn: Any) -> Any:
        tls = isinstance(conn, urllib3.connection.HTTPSConnection)
        check(address("https" if tls else "http", conn._dns_host, conn.port))
        return new_conn(conn)

    create_socket = ConnectionPool._create_socket

    def guarded_create_socket(pool: Any) -> Any:
        tls = isinstance(pool, SSLConnectionPool)
        check(address("https" if tls else "http", pool._connection_host, pool._connection_port))
        return create_socket(pool)

    urllib3.connection.HTTPConnection._new_conn = guarded_new_conn  # type: ignore[method-assign,assignment]
    ConnectionPool._create_socket = guarded_create_socket  # type: ignore[method-assign,assignment]
