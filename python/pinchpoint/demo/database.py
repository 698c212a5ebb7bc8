"""What the demo app's PostgreSQL endpoints share: a connection per worker thread, and the
run's tag of the current request as a sqlcommenter comment on every statement, so the
database's statement log is matched to the run."""

from __future__ import annotations

import os
import threading
from typing import Any

from flask import request

from pinchpoint.logformats.tag import Tag, find_tag, parse_header


def sql_comment(tag: Tag | None) -> str:
    """The tag as a sqlcommenter comment (`/*pp_run='r1',pp_users='4',pp_req='17'*/`;
    an open-loop run's tag has `pp_rate` instead of `pp_users`)."""
    if tag is None:
        return ""
    level = f"pp_rate='{tag.rate:g}'" if tag.rate is not None else f"pp_users='{tag.users}'"
    fields = [f"pp_run='{tag.run_id}'", level]
    if tag.req_id is not None:
        fields.append(f"pp_req='{tag.req_id}'")
    return "/*" + ",".join(fields) + "*/"


def request_tag() -> Tag | None:
    """The run's tag of the current request, from its query or its X-Pinchpoint header."""
    tag = find_tag(request.query_string.decode("latin-1"))
    header = request.headers.get("X-Pinchpoint")
    return tag if tag is not None or header is None else parse_header(header)


class ThreadConnections:
    """One connection per worker thread: gthread's and uWSGI's threads must not share a
    transaction's connection, and one made before a fork is not this process's."""

    def __init__(self, dsn: str) -> None:
        # Imported now: a server that preloads the app (gunicorn --preload, uWSGI without
        # lazy-apps) imports it once, not in every worker's first request.
        import psycopg  # noqa: F401

        self.dsn = dsn
        self._connections: dict[tuple[int, int], Any] = {}

    def get(self) -> Any:
        import psycopg

        key = (os.getpid(), threading.get_ident())
        conn = self._connections.get(key)
        if conn is None or conn.closed:
            conn = self._connections[key] = psycopg.connect(
                self.dsn, autocommit=True, connect_timeout=10
            )
        return conn

    def drop(self) -> None:
        """Forgets this thread's connection after an error: the next request makes one."""
        self._connections.pop((os.getpid(), threading.get_ident()), None)
