"""The probe as WSGI middleware."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from urllib.parse import quote
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from .timing import TimingLog, query_has_tag
from .work import (
    DEFAULT_MAX_MS,
    PROBE_PATH,
    Work,
    burn_cpu,
    check_options,
    log_path_of,
    plan,
    report,
    without_body,
)

_PATH_SAFE = "/:@!$&'()*+,;="

_ExcInfo = tuple[type[BaseException], BaseException, TracebackType] | tuple[None, None, None]


class ProbeWSGI:
    """Answers ``path`` with bounded work and passes every other request to ``app``.

    ``app.wsgi_app = ProbeWSGI(app.wsgi_app)`` (Flask) or
    ``application = ProbeWSGI(get_wsgi_application())`` (Django).
    """

    def __init__(
        self,
        app: WSGIApplication,
        *,
        path: str = PROBE_PATH,
        max_ms: float = DEFAULT_MAX_MS,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        check_options(path, max_ms)
        self.app = app
        self.path = path
        self.max_ms = max_ms
        log_path = log_path_of(log_path)
        self.log = TimingLog(log_path) if log_path is not None else None

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        target = self._probe if environ.get("PATH_INFO") == self.path else self.app
        if self.log is None or not _tagged(environ):
            return target(environ, start_response)
        timed = _TimedResponse(self.log, environ, start_response)
        try:
            timed.body = target(environ, timed.start_response)
        except BaseException:
            timed.close()
            raise
        return timed

    def _probe(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        started = time.perf_counter()
        method = environ["REQUEST_METHOD"]
        outcome = plan(method, environ.get("QUERY_STRING", ""), self.max_ms)
        if isinstance(outcome, Work):
            burn_cpu(outcome.cpu_ms)
            time.sleep(outcome.wait_ms / 1000)
            outcome = report(outcome, time.perf_counter() - started)
        if method == "HEAD":
            outcome = without_body(outcome)
        start_response(outcome.status_line, outcome.headers)
        return [outcome.body]


def _tagged(environ: WSGIEnvironment) -> bool:
    return "HTTP_X_PINCHPOINT" in environ or query_has_tag(environ.get("QUERY_STRING", ""))


def _uri(environ: WSGIEnvironment) -> str:
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if raw:
        return raw
    # WSGI strings are the request's bytes decoded as latin-1; quoting them back as latin-1
    # restores the bytes that were sent.
    path = quote(
        environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", ""),
        safe=_PATH_SAFE,
        encoding="latin-1",
    )
    query = environ.get("QUERY_STRING", "")
    return f"{path}?{query}" if query else path


class _TimedResponse:
    """Wraps a response iterable; logs the request when the server closes it."""

    def __init__(
        self, log: TimingLog, environ: WSGIEnvironment, start_response: StartResponse
    ) -> None:
        self.started = time.perf_counter()
        self.log = log
        self.method = environ.get("REQUEST_METHOD", "")
        self.uri = _uri(environ)
        self.status = 500
        self.body: Iterable[bytes] = ()
        self._start_response = start_response
        self._closed = False
        self._ended: float | None = None

    def start_response(
        self,
        status: str,
        headers: list[tuple[str, str]],
        exc_info: _ExcInfo | None = None,
    ) -> Callable[[bytes], object]:
        self.status = int(status.split(" ", 1)[0])
        return self._start_response(status, headers, exc_info)

    def __iter__(self) -> Iterator[bytes]:
        yield from self.body
        # The app's time ends with its last chunk: servers such as gunicorn log their own
        # time before they close the response, and the app's time must not outlast theirs.
        self._ended = time.perf_counter()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            ended = self._ended or time.perf_counter()
            self.log.write(self.method, self.uri, self.status, ended - self.started)
