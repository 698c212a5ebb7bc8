"""One valid line of each log format, built from the fields a client controls (the URI and
the user agent) and the values pinchpoint reads (the duration and the status), for the
parser fuzz tests.

`FormatCase.line(uri, agent, millis, status)` gives a line whose record has duration
`millis` ms, status `status` and the tag of `uri` (or of the statement's comment, for
PostgreSQL). Fields hold the URI and agent as they are: callers keep to characters that
each server writes unescaped (see AGENT_CHARS and URI_CHARS).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from pinchpoint.logformats.nginx import COMBINED_FORMAT

# Characters of a user agent and of a URI that no format escapes or treats as a separator.
AGENT_CHARS = "abcXYZ019 /.;()-_+"
URI_CHARS = "abcXYZ019/-._~%"
RUN_ID = "r1"
TS = "22/Nov/2026:10:15:00 +0100"
# A number of this many digits is past every field's limit.
HUGE_DIGITS = 5000


@dataclass(frozen=True)
class FormatCase:
    name: str
    format_name: str
    log_format: str | None
    # uri, agent, duration in ms (as logged), status -> line
    build: Callable[[str, str, str, str], str]
    # The duration's unit as logged, in ms (1000 for seconds, 0.001 for microseconds).
    unit_ms: float
    # Whether the tag is in the statement's comment (PostgreSQL) rather than the URI.
    tag_in_comment: bool = False
    # Whether the format logs a status.
    has_status: bool = True

    def line(self, uri: str, agent: str, millis: int, status: int) -> str:
        """A valid line; `millis` is a whole number of ms, logged in the format's unit."""
        return self.build(uri, agent, _in_unit(millis, self.unit_ms), str(status))


def _in_unit(millis: int, unit_ms: float) -> str:
    if unit_ms == 1000:
        return f"{millis // 1000}.{millis % 1000:03d}"
    if unit_ms == 0.001:
        return str(millis * 1000)
    return str(millis)


def _pg_statement(uri: str, tag: str) -> str:
    users, req = _query_numbers(tag)
    return f"SELECT '{uri}' /*pp_run='{RUN_ID}',pp_users='{users}',pp_req='{req}'*/"


def _query_numbers(uri: str) -> tuple[str, str]:
    fields = dict(item.split("=", 1) for item in uri.split("?", 1)[1].split("&"))
    return fields["pp_users"], fields["pp_req"]


def _csv(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


NGINX_LOG_FORMAT = COMBINED_FORMAT + " rt=$request_time urt=$upstream_response_time msec=$msec"
GUNICORN_LOG_FORMAT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s" %(D)s'
APACHE_LOG_FORMAT = '%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i" %D'
UWSGI_LOG_FORMAT = (
    '%(addr) - [%(ltime)] "%(method) %(uri) %(proto)" %(status) %(size) "%(referer)" '
    '"%(uagent)" %(msecs)'
)
TOMCAT_LOG_FORMAT = '%h %l %u %t "%r" %s %b "%{Referer}i" "%{User-Agent}i" %D'
PHP_FPM_LOG_FORMAT = '%R - %u %t "%m %r%Q%q" %s %{mili}d "%{HTTP_USER_AGENT}e"'
PG_PREFIX = "%m [%p] %q%u@%d %a "
JSONLINES_MAPPING = "uri=req.uri,duration_ms=ms,status=status,ts=ts"

CASES = [
    FormatCase(
        "nginx",
        "nginx",
        NGINX_LOG_FORMAT,
        lambda uri, agent, rt, status: (
            f'10.0.0.1 - - [{TS}] "GET {uri} HTTP/1.1" {status} 512 "-" "{agent}" '
            f"rt={rt} urt=0.010 msec=1795338900.123"
        ),
        unit_ms=1000,
    ),
    FormatCase(
        "gunicorn",
        "gunicorn",
        GUNICORN_LOG_FORMAT,
        lambda uri, agent, us, status: (
            f'10.0.0.1 - - [{TS}] "GET {uri} HTTP/1.1" {status} 512 "-" "{agent}" {us}'
        ),
        unit_ms=0.001,
    ),
    FormatCase(
        "apache",
        "apache",
        APACHE_LOG_FORMAT,
        lambda uri, agent, us, status: (
            f'10.0.0.1 - - [{TS}] "GET {uri} HTTP/1.1" {status} 512 "-" "{agent}" {us}'
        ),
        unit_ms=0.001,
    ),
    FormatCase(
        "tomcat",
        "tomcat",
        TOMCAT_LOG_FORMAT,
        lambda uri, agent, us, status: (
            f'10.0.0.1 - - [{TS}] "GET {uri} HTTP/1.1" {status} 512 "-" "{agent}" {us}'
        ),
        unit_ms=0.001,
    ),
    FormatCase(
        "php-fpm",
        "php-fpm",
        PHP_FPM_LOG_FORMAT,
        lambda uri, agent, ms, status: f'10.0.0.1 -  {TS} "GET {uri}" {status} {ms} "{agent}"',
        unit_ms=1,
    ),
    FormatCase(
        "morgan",
        "morgan",
        None,
        lambda uri, agent, ms, status: (
            f'10.0.0.1 - - [{TS}] "GET {uri} HTTP/1.1" {status} 512 "-" "{agent}" {ms}'
        ),
        unit_ms=1,
    ),
    FormatCase(
        "envoy",
        "envoy",
        None,
        lambda uri, agent, ms, status: (
            f'[2026-11-22T09:15:00.310Z] "GET {uri} HTTP/1.1" {status} - 0 2 {ms} 10 "-" '
            f'"{agent}" "3f1c0a3e-1111" "127.0.0.1:10000" "127.0.0.1:8080"'
        ),
        unit_ms=1,
    ),
    FormatCase(
        "haproxy",
        "haproxy",
        None,
        lambda uri, agent, ms, status: (
            "<134>Nov 22 09:15:00 haproxy[14389]: 10.0.1.2:33317 [22/Nov/2026:09:15:00.655] "
            f"http-in static/srv1 10/0/30/69/{ms} {status} 2750 - - ---- 1/1/1/1/0 0/0 "
            f'{{{agent}}} "GET {uri} HTTP/1.1"'
        ),
        unit_ms=1,
    ),
    FormatCase(
        "uwsgi",
        "uwsgi",
        None,
        lambda uri, agent, ms, status: (
            "[pid: 1235|app: 0|req: 1/1] 127.0.0.1 () {24 vars in 313 bytes} "
            f"[Sun Nov 22 03:00:01 2026] GET {uri} => generated 2 bytes in {ms} msecs "
            f"(HTTP/1.1 {status}) 1 headers in 45 bytes (1 switches on core 0)"
        ),
        unit_ms=1,
    ),
    FormatCase(
        "uwsgi-logformat",
        "uwsgi",
        UWSGI_LOG_FORMAT,
        lambda uri, agent, ms, status: (
            f'127.0.0.1 - [{TS}] "GET {uri} HTTP/1.1" {status} 512 "-" "{agent}" {ms}'
        ),
        unit_ms=1,
    ),
    FormatCase(
        "postgresql",
        "postgresql",
        PG_PREFIX,
        lambda uri, agent, ms, status: (
            f"2026-11-22 09:15:00.123 UTC [4242] app@shop {agent} LOG:  duration: {ms} ms  "
            f"statement: {_pg_statement(uri.split('?')[0], uri)}"
        ),
        unit_ms=1,
        tag_in_comment=True,
        has_status=False,
    ),
    FormatCase(
        "postgresql-csvlog",
        "postgresql",
        "csvlog",
        lambda uri, agent, ms, status: (
            '2026-11-22 09:15:00.123 UTC,"app","shop",4242,"127.0.0.1:5555",691f2d5c.1092,1,'
            '"SELECT",2026-11-22 09:15:00 UTC,3/14,0,LOG,00000,'
            + _csv(f"duration: {ms} ms  statement: {_pg_statement(uri.split('?')[0], uri)}")
            + f",,,,,,,,,{_csv(agent)},{_csv('client backend')},,0"
        ),
        unit_ms=1,
        tag_in_comment=True,
        has_status=False,
    ),
    FormatCase(
        "postgresql-jsonlog",
        "postgresql",
        "jsonlog",
        lambda uri, agent, ms, status: json.dumps(
            {
                "timestamp": "2026-11-22 09:15:00.123 UTC",
                "user": "app",
                "error_severity": "LOG",
                "message": f"duration: {ms} ms  statement: "
                + _pg_statement(uri.split("?")[0], uri),
                "application_name": agent,
            }
        ),
        unit_ms=1,
        tag_in_comment=True,
        has_status=False,
    ),
    FormatCase(
        "jsonlines",
        "jsonlines",
        JSONLINES_MAPPING,
        lambda uri, agent, ms, status: (
            f'{{"ts": 1795338900.1, "req": {{"uri": {json.dumps(uri)}, "agent": '
            f'{json.dumps(agent)}}}, "ms": {ms}, "status": {status}}}'
        ),
        unit_ms=1,
    ),
    FormatCase(
        "probe",
        "probe",
        None,
        lambda uri, agent, s, status: (
            f'{{"ts": 1795338900.1, "method": "GET", "status": {status}, "duration_s": {s}, '
            f'"uri": {json.dumps(uri)}, "agent": {json.dumps(agent)}}}'
        ),
        unit_ms=1000,
    ),
]
CASE_IDS = [case.name for case in CASES]


def tagged_uri(path: str, users: int, req: int) -> str:
    return f"/{path}?pp_run={RUN_ID}&pp_users={users}&pp_req={req}"
