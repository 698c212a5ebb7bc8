"""nginx access log parsing: the Rust parser, the Python parser and GoAccess, on one core.

Writes an nginx access log (default ~1 GB) in a custom log_format with upstream retries,
tagged lines of the run, lines of another run, untagged lines and a few broken ones;
then, each pinned to the same core, with the file in the page cache:

- the Rust parser (`pinchpoint._engine.NginxScanner`): batches of columns;
- the same through the collector's path (`fastlogs.match_file`), which makes TierRows;
- the Python parser (`formats/nginx.py` + `logs.match_lines`) on a sample of the lines;
- GoAccess (`apt-get install goaccess`) with the matching --log-format, JSON output.

Reports lines per CPU-second of each and their ratios to the Rust parser, and checks that
the Rust and Python parsers count the sample's lines alike.

    .venv/bin/python bench/nginx_parse.py --size-mb 1024
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pinchpoint.collect.logs import fastlogs
from pinchpoint.collect.logs import reader as logs
from pinchpoint.collect.logs.reader import FileCounts, match_lines, read_from
from pinchpoint.logformats.nginx import parser_for

LOG_FORMAT = (
    '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" rt=$request_time uct="$upstream_connect_time" '
    'uht="$upstream_header_time" urt="$upstream_response_time" ua="$upstream_addr" msec=$msec'
)
GOACCESS_FORMAT = (
    '%h - %e [%d:%t %^] "%r" %s %b "%R" "%u" rt=%T uct="%^" uht="%^" urt="%^" ua="%^" msec=%^'
)
RUN_ID = "20261122-101500-a1b2"
AGENTS = [
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5",
    "curl/8.5.0",
    "pinchpoint/0.1",
    "python-httpx/0.27.0",
]
PATHS = ["/api/orders", "/api/users/42", "/sys_perf_check", "/static/app.js", "/search", "/"]
REFERERS = ["-", "https://shop.example.com/cart", "https://example.com/search?q=a+b"]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def log_line(rng: random.Random, n: int, t: float) -> str:
    """One line; about 7 in 10 of the run, 1 in 10 of another run, 2 in 10 untagged."""
    kind = rng.random()
    path = rng.choice(PATHS)
    if kind < 0.7:
        path += f"?cpu=2&pp_run={RUN_ID}&pp_users={1 + n // 500_000}&pp_req={n}"
    elif kind < 0.8:
        path += f"?pp_run=20261121-090000-ffff&pp_users=4&pp_req={n}"
    elif kind < 0.85:
        path += "?q=%22x%22&page=2"
    status, urt, uct, addr = 200, f"{rng.random() * 0.05:.3f}", "0.000", "10.0.0.7:8000"
    roll = rng.random()
    if roll < 0.03:  # a retry on a second upstream
        status, urt, uct = 200, f"0.{rng.randrange(100):03d}, {rng.random() * 0.05:.3f}", "-, 0.000"
        addr = "10.0.0.7:8000, 10.0.0.8:8000"
    elif roll < 0.05:
        status, urt, uct, addr = 404, "-", "-", "-"
    elif roll < 0.06:
        status = 502
    rt = float(urt.split(", ")[-1]) + 0.001 if urt != "-" else 0.0
    g = time.gmtime(t)
    when = f"{g.tm_mday:02d}/{MONTHS[g.tm_mon - 1]}/{g.tm_year}:{g.tm_hour:02d}:{g.tm_min:02d}:{g.tm_sec:02d} +0000"
    ip = f"10.{n % 7}.{n % 251}.{n % 13 + 1}"
    return (
        f'{ip} - - [{when}] "GET {path} HTTP/1.1" {status} {rng.randrange(200, 9000)} '
        f'"{rng.choice(REFERERS)}" "{rng.choice(AGENTS)}" rt={rt:.3f} uct="{uct}" '
        f'uht="{uct}" urt="{urt}" ua="{addr}" msec={t:.3f}\n'
    )


def write_log(path: Path, size_mb: int, seed: int = 1) -> int:
    """Writes about `size_mb` MB of lines; returns the number of lines."""
    rng = random.Random(seed)
    target = size_mb * 1_000_000
    written = lines = 0
    t = 1795338900.0
    with open(path, "w", buffering=1 << 20) as file:
        while written < target:
            block = []
            for _ in range(10_000):
                t += 0.0005
                block.append(log_line(rng, lines, t))
                lines += 1
                if lines % 1000 == 0:
                    block.append(f"garbage line {lines}\n")
                    lines += 1
            text = "".join(block)
            file.write(text)
            written += len(text)
    return lines


def cpu_rust(path: Path, batch_lines: int) -> tuple[float, float, dict[str, int]]:
    """CPU and wall seconds of the Rust parser over the whole file, and its counts."""
    scanner = fastlogs.NginxScanner(
        str(path), 0, LOG_FORMAT, RUN_ID, logs.MAX_LINE_BYTES, sys.version_info >= (3, 12)
    )
    totals = dict.fromkeys(("read", "lines", "matched", "other_run", "untagged", "unparseable"), 0)
    cpu, wall = time.process_time(), time.perf_counter()
    while True:
        batch = scanner.next_batch(batch_lines)
        for key in totals:
            totals[key] += batch[key]
        if batch["deferred"] is not None:
            raise SystemExit("a line was deferred to Python: the benchmark log should be ASCII")
        if batch["done"]:
            break
    return time.process_time() - cpu, time.perf_counter() - wall, totals


def cpu_rows(path: Path) -> tuple[float, float, int]:
    """CPU and wall seconds of the collector's path (Rust parser, then TierRows)."""
    counts = FileCounts("nginx", str(path))
    cpu, wall = time.process_time(), time.perf_counter()
    rows = fastlogs.match_file("nginx", path, 0, parser_for(LOG_FORMAT), RUN_ID, counts)
    assert rows is not None
    n = sum(1 for _ in rows)
    return time.process_time() - cpu, time.perf_counter() - wall, n


def cpu_python(path: Path) -> tuple[float, FileCounts]:
    counts = FileCounts("nginx", str(path))
    cpu = time.process_time()
    for _ in match_lines("nginx", read_from(path, 0), parser_for(LOG_FORMAT), RUN_ID, counts):
        pass
    return time.process_time() - cpu, counts


def run_goaccess(path: Path, core: int, workdir: Path) -> tuple[float, float, dict] | None:
    goaccess = shutil.which("goaccess")
    if goaccess is None:
        print("goaccess not found: install it with `apt-get install -y goaccess`")
        return None
    report = workdir / "goaccess.json"
    cmd = [
        *("taskset", "-c", str(core), goaccess, str(path), "--no-global-config", "--no-progress"),
        *(f"--log-format={GOACCESS_FORMAT}", "--date-format=%d/%b/%Y", "--time-format=%H:%M:%S"),
        *("-o", str(report)),
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    general = json.loads(report.read_text())["general"]
    return cpu, wall, general


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the log (default 1024)")
    ap.add_argument("--sample-lines", type=int, default=200_000, help="lines for the Python parser")
    ap.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)), help="CPU to pin to")
    ap.add_argument("--batch-lines", type=int, default=65536)
    ap.add_argument("--rounds", type=int, default=3, help="Rust runs (the median is kept)")
    ap.add_argument("--dir", type=Path, default=None, help="where to write the log (default: temp)")
    ap.add_argument("--no-goaccess", action="store_true")
    args = ap.parse_args()
    if not fastlogs.available():
        raise SystemExit("the Rust module is not built: run `make build`")
    os.sched_setaffinity(0, {args.core})

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        workdir = Path(tmp)
        log = workdir / "access.log"
        started = time.perf_counter()
        n_lines = write_log(log, args.size_mb)
        size = log.stat().st_size
        print(
            f"log: {size / 1e6:.0f} MB, {n_lines:,} lines, written in {time.perf_counter() - started:.0f} s"
        )
        with open(log, "rb") as file:  # into the page cache
            while file.read(1 << 24):
                pass

        runs = [cpu_rust(log, args.batch_lines) for _ in range(args.rounds)]
        rust_cpu, rust_wall, totals = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
        print(f"rust counts: {totals}")
        rows_cpu, rows_wall, n_rows = cpu_rows(log)

        sample = workdir / "sample.log"
        with open(log, "rb") as src, open(sample, "wb") as dst:
            dst.writelines(itertools.islice(src, args.sample_lines))
        py_cpu, py_counts = cpu_python(sample)
        rs_counts = FileCounts("nginx", str(sample))
        rows = fastlogs.match_file("nginx", sample, 0, parser_for(LOG_FORMAT), RUN_ID, rs_counts)
        assert rows is not None
        for _ in rows:
            pass
        same = "yes" if rs_counts == py_counts else f"NO: rust {rs_counts}, python {py_counts}"
        print(f"sample of {args.sample_lines:,} lines: Rust and Python counts identical: {same}")

        results = [
            ("rust parser (columns)", totals["read"], rust_cpu, rust_wall),
            ("rust + TierRows (collector)", totals["read"], rows_cpu, rows_wall),
            ("python parser (sample)", args.sample_lines, py_cpu, py_cpu),
        ]
        if not args.no_goaccess:
            found = run_goaccess(log, args.core, workdir)
            if found is not None:
                ga_cpu, ga_wall, general = found
                print(
                    "goaccess: total_requests {total_requests:,}, valid {valid_requests:,}, "
                    "failed {failed_requests:,}".format(**general)
                )
                results.append(("goaccess 1.x (JSON report)", n_lines, ga_cpu, ga_wall))

    rust_rate = totals["read"] / rust_cpu
    print(f"\nall pinned to CPU {args.core}; {size / 1e6:.0f} MB log; rows matched: {n_rows:,}\n")
    print(
        f"{'parser':30} {'lines':>12} {'CPU s':>8} {'wall s':>8} {'lines/CPU-s':>13} {'vs rust':>8}"
    )
    for name, lines, cpu, wall in results:
        rate = lines / cpu
        print(f"{name:30} {lines:12,} {cpu:8.2f} {wall:8.2f} {rate:13,.0f} {rate / rust_rate:8.3f}")
    print(f"\nrust parser: {size / rust_cpu / 1e6:,.0f} MB per CPU-second")
    print(f"target 1,000,000 lines/s per core: {'met' if rust_rate >= 1e6 else 'NOT met'}")


if __name__ == "__main__":
    main()
