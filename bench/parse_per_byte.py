"""Parse time per byte of every log format, at lines of 1 KB, 64 KB and 1 MB.

Each line is a valid-looking line of the format, padded in a field a client controls (the
URI, the user agent, the statement or the application name); `broken` is the same line
with ` x` after it, which matches no format, so a parser that backtracks shows it there.
64 KB is MAX_LINE_CHARS, the longest line parsed; a 1 MB line is over it and is refused
before any regex. Prints CPU ns per byte at each size (the best of a few rounds) and the
ratios 64KB/1KB and 1MB/1KB: flat parsing keeps the first near 1 or below, and the second
far below 1.

The Python parsers are timed on `parser.parse(line)`; the Rust nginx parser
(`pinchpoint._engine.NginxScanner`) on a file of such lines, read and classified.

    .venv/bin/python bench/parse_per_byte.py
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pinchpoint.collect.logs import fastlogs
from pinchpoint.collect.logs import reader as logs
from pinchpoint.logformats import get_parser
from pinchpoint.logformats.base import MAX_LINE_CHARS
from pinchpoint.logformats.nginx import COMBINED_FORMAT

SIZES = {"1KB": 1024, "64KB": MAX_LINE_CHARS, "1MB": 1 << 20}
TAG = "pp_run=r1&pp_users=4&pp_req=17"
TS = "22/Nov/2026:10:15:00 +0100"
URI_PAD = "/a/b-c_d.e"
AGENT_PAD = "Mozilla/5.0 (X11; Linux x86_64) "
NGINX_FORMAT = COMBINED_FORMAT + " rt=$request_time urt=$upstream_response_time msec=$msec"


def _pg_statement(uri: str) -> str:
    return f"SELECT '{uri}' /*pp_run='r1',pp_users='4',pp_req='17'*/"


def _csv(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


# name -> (format name, log_format, line of (uri, agent)); the uri is given without the tag.
FORMATS: dict[str, tuple[str, str | None, Callable[[str, str], str]]] = {
    "nginx": (
        "nginx",
        NGINX_FORMAT,
        lambda uri, agent: (
            f'10.0.0.1 - - [{TS}] "GET {uri}?{TAG} HTTP/1.1" 200 512 "-" "{agent}" '
            "rt=0.012 urt=0.010 msec=1795338900.123"
        ),
    ),
    # Free text, a literal without a space and a word: the text could end at each `:` of
    # a long word (quadratic before it was written to end at the first `:` of a run).
    "nginx ($http_a:$uri)": (
        "nginx",
        '$remote_addr - [$time_local] "$request" $status $http_user_agent:$uri $request_time',
        lambda uri, agent: (
            f'10.0.0.1 - [{TS}] "GET {uri}?{TAG} HTTP/1.1" 200 '
            f"{agent.replace(' ', ':')}:{uri}?{TAG} 0.012"
        ),
    ),
    "gunicorn": (
        "gunicorn",
        '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s" %(D)s',
        lambda uri, agent: (
            f'10.0.0.1 - - [{TS}] "GET {uri}?{TAG} HTTP/1.1" 200 512 "-" "{agent}" 12000'
        ),
    ),
    "apache": (
        "apache",
        '%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i" %D',
        lambda uri, agent: (
            f'10.0.0.1 - - [{TS}] "GET {uri}?{TAG} HTTP/1.1" 200 512 "-" "{agent}" 12000'
        ),
    ),
    "envoy": (
        "envoy",
        None,
        lambda uri, agent: (
            f'[2026-11-22T09:15:00.310Z] "GET {uri}?{TAG} HTTP/1.1" 200 - 0 2 12 10 "-" '
            f'"{agent}" "3f1c0a3e-1111" "127.0.0.1:10000" "127.0.0.1:8080"'
        ),
    ),
    "haproxy": (
        "haproxy",
        None,
        lambda uri, agent: (
            "<134>Nov 22 09:15:00 haproxy[14389]: 10.0.1.2:33317 [22/Nov/2026:09:15:00.655] "
            "http-in static/srv1 10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 "
            f'{{{agent}}} "GET {uri}?{TAG} HTTP/1.1"'
        ),
    ),
    "uwsgi": (
        "uwsgi",
        None,
        lambda uri, agent: (
            "[pid: 1235|app: 0|req: 1/1] 127.0.0.1 () {24 vars in 313 bytes} "
            f"[Sun Nov 22 03:00:01 2026] GET {uri}?{TAG} => generated 2 bytes in 53 msecs "
            "(HTTP/1.1 200) 1 headers in 45 bytes (1 switches on core 0)"
        ),
    ),
    "uwsgi logformat": (
        "uwsgi",
        '%(addr) - [%(ltime)] "%(method) %(uri) %(proto)" %(status) %(size) "%(referer)" '
        '"%(uagent)" %(msecs)',
        lambda uri, agent: (
            f'127.0.0.1 - [{TS}] "GET {uri}?{TAG} HTTP/1.1" 200 512 "-" "{agent}" 12'
        ),
    ),
    "postgresql": (
        "postgresql",
        "%m [%p] %q%u@%d %a ",
        lambda uri, agent: (
            f"2026-11-22 09:15:00.123 UTC [4242] app@shop {agent} LOG:  duration: 12.345 ms  "
            f"statement: {_pg_statement(uri)}"
        ),
    ),
    "postgresql csvlog": (
        "postgresql",
        "csvlog",
        lambda uri, agent: (
            '2026-11-22 09:15:00.123 UTC,"app","shop",4242,"127.0.0.1:5555",691f2d5c.1092,1,'
            '"SELECT",2026-11-22 09:15:00 UTC,3/14,0,LOG,00000,'
            + _csv(f"duration: 12.345 ms  statement: {_pg_statement(uri)}")
            + f",,,,,,,,,{_csv(agent)},{_csv('client backend')},,0"
        ),
    ),
    "postgresql jsonlog": (
        "postgresql",
        "jsonlog",
        lambda uri, agent: json.dumps(
            {
                "timestamp": "2026-11-22 09:15:00.123 UTC",
                "error_severity": "LOG",
                "message": f"duration: 12.345 ms  statement: {_pg_statement(uri)}",
                "application_name": agent,
            }
        ),
    ),
    "jsonlines": (
        "jsonlines",
        "uri=req.uri,duration_ms=ms,status=status,ts=ts",
        lambda uri, agent: json.dumps(
            {"ts": 1795338900.1, "req": {"uri": f"{uri}?{TAG}", "agent": agent}, "ms": 12.3}
            | {"status": 200}
        ),
    ),
    "probe": (
        "probe",
        None,
        lambda uri, agent: json.dumps(
            {"ts": 1795338900.1, "status": 200, "duration_s": 0.012, "uri": f"{uri}?{TAG}"}
            | {"agent": agent}
        ),
    ),
}


def padded(build: Callable[[str, str], str], field: str, size: int) -> str | None:
    """The line padded in `field` to `size` characters (None if the field is not in it)."""
    base = build("/", "agent")
    if field == "agent" and "agent" not in base:
        return None
    pad = URI_PAD if field == "uri" else AGENT_PAD
    room = size - len(base)
    filler = (pad * (room // len(pad) + 1))[:room]
    line = build("/" + filler, "agent") if field == "uri" else build("/", "agent" + filler)
    return line[:size] if len(line) > size else line


def per_byte(parse: Callable[[str], object], line: str, budget_s: float) -> float:
    """CPU ns per byte of parse(line), the best of three rounds of about budget_s / 3."""
    best = float("inf")
    for _ in range(3):
        count, start = 0, time.process_time()
        while True:
            parse(line)
            count += 1
            elapsed = time.process_time() - start
            if elapsed >= budget_s / 3:
                break
        best = min(best, elapsed / count)
    return best / len(line) * 1e9


def rust_per_byte(line: str, budget_s: float) -> float:
    """CPU ns per byte of the Rust nginx parser reading a file of copies of `line` (in the
    page cache), the best of rounds over about budget_s."""
    copies = max(4, (4 << 20) // len(line))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "access.log"
        path.write_text((line + "\n") * copies)
        best = float("inf")
        spent = 0.0
        while spent < budget_s:
            start = time.process_time()
            scanner = fastlogs.NginxScanner(
                str(path), 0, NGINX_FORMAT, "r1", logs.MAX_LINE_BYTES, True
            )
            while not scanner.next_batch(4096)["done"]:
                pass
            took = time.process_time() - start
            best, spent = min(best, took), spent + took
    return best / (copies * (len(line) + 1)) * 1e9


def rows(budget_s: float) -> list[tuple[str, str, str, list[float]]]:
    found = []
    for name, (format_name, log_format, build) in FORMATS.items():
        parser = get_parser(format_name, log_format)
        for field in ("uri", "agent"):
            lines = {label: padded(build, field, size) for label, size in SIZES.items()}
            if any(line is None for line in lines.values()):
                continue
            broken = {label: padded(build, field, size - 2) for label, size in SIZES.items()}
            for variant, texts in (
                ("valid", list(lines.values())),
                ("broken", [f"{line} x" for line in broken.values()]),
            ):
                found.append(
                    (name, field, variant, [per_byte(parser.parse, t, budget_s) for t in texts])
                )
                if name == "nginx" and fastlogs.available():
                    rust = [rust_per_byte(text, budget_s) for text in texts]
                    found.append(("nginx (Rust)", field, variant, rust))
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--budget", type=float, default=0.3, help="seconds of timing per line (default 0.3)"
    )
    args = ap.parse_args()
    header = f"{'format':<20} {'padded':<6} {'line':<7}" + "".join(
        f"{label + ' ns/B':>12}" for label in SIZES
    )
    print(header + f"{'64KB/1KB':>10}{'1MB/1KB':>10}")
    for name, field, variant, times in rows(args.budget):
        cells = "".join(f"{t:>12.3f}" for t in times)
        print(
            f"{name:<20} {field:<6} {variant:<7}{cells}"
            f"{times[1] / times[0]:>10.2f}{times[2] / times[0]:>10.3f}"
        )


if __name__ == "__main__":
    main()
