"""nginx access log parsing: the Rust parser, the collector, the Python parser and GoAccess,
on one core.

Writes an nginx access log (default ~1 GB) in a custom log_format with upstream retries,
tagged lines of the run, lines of another run, untagged lines and a few broken ones;
then, each pinned to the same core, with the file in the page cache, in interleaved
rounds (medians kept):

- the Rust parser alone (`pinchpoint._engine.NginxScanner.next_batch`): batches of columns;
- the collector as a run uses it (`LocalCollector.collect_logs` into `gather.write_logs`):
  from the log to tiers.parquet and collection.json in a run folder;
- the records as TierRows (`fastlogs.match_file`, what the agent streams);
- once: the Python parser (`formats/nginx.py` + `logs.match_lines`) on a sample of the
  lines, and GoAccess (`apt-get install goaccess`) with the matching --log-format.

Then each other log_format of `OTHER_FORMATS` (pinchpoint's own, its gRPC one with the tag
in a logged header, one with ISO 8601 times, one shaped as JSON) on a log of its own of
--other-mb MB, through the collector beside the Rust parser alone.

Reports lines per CPU-second of each and their ratios to the Rust parser, and checks that
the collector's tiers.parquet holds the same rows as the Python parser's on a sample.

    .venv/bin/python bench/nginx_parse.py --size-mb 1024
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from pinchpoint.collect.gather import TierWriter, write_logs
from pinchpoint.collect.logs import fastlogs
from pinchpoint.collect.logs import reader as logs
from pinchpoint.collect.logs.reader import FileCounts, match_lines, read_from
from pinchpoint.collect.sources.local import LocalCollector
from pinchpoint.logformats.nginx import NGINX_FORMAT, NGINX_GRPC_FORMAT, parser_for
from pinchpoint.plan.model import Component, Log

LOG_FORMAT = (
    '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" rt=$request_time uct="$upstream_connect_time" '
    'uht="$upstream_header_time" urt="$upstream_response_time" ua="$upstream_addr" msec=$msec'
)
GOACCESS_FORMAT = (
    '%h - %e [%d:%t %^] "%r" %s %b "%R" "%u" rt=%T uct="%^" uht="%^" urt="%^" ua="%^" msec=%^'
)
# Other log_formats the Rust parser reads, each through the collector.
OTHER_FORMATS = {
    "pinchpoint": NGINX_FORMAT,
    "pinchpoint gRPC (tag header)": NGINX_GRPC_FORMAT,
    "ISO 8601 time": (
        '$remote_addr [$time_iso8601] "$request" $status $body_bytes_sent '
        'rt=$request_time urt="$upstream_response_time" "$http_user_agent"'
    ),
    "JSON": (
        '{"time":"$time_iso8601","addr":"$remote_addr","request":"$request",'
        '"status":$status,"rt":$request_time,"urt":"$upstream_response_time",'
        '"agent":"$http_user_agent"}'
    ),
}
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


def line_values(rng: random.Random, n: int, t: float) -> dict[str, str]:
    """One record's variables; about 7 in 10 of the run, 1 in 10 of another run, 2 in 10
    untagged. The tag is in the URI and, as gRPC calls log it, in `http_x_pinchpoint`."""
    kind = rng.random()
    path = rng.choice(PATHS)
    tag, header = "", "-"
    if kind < 0.7:
        users = 1 + n // 500_000
        tag = f"?cpu=2&pp_run={RUN_ID}&pp_users={users}&pp_req={n}"
        header = f"run={RUN_ID}; users={users}; req={n}"
    elif kind < 0.8:
        tag = f"?pp_run=20261121-090000-ffff&pp_users=4&pp_req={n}"
        header = f"run=20261121-090000-ffff; users=4; req={n}"
    elif kind < 0.85:
        tag = "?q=%22x%22&page=2"
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
    date = f"{g.tm_year}-{g.tm_mon:02d}-{g.tm_mday:02d}"
    clock = f"{g.tm_hour:02d}:{g.tm_min:02d}:{g.tm_sec:02d}"
    month = MONTHS[g.tm_mon - 1]
    return {
        "remote_addr": f"10.{n % 7}.{n % 251}.{n % 13 + 1}",
        "remote_user": "-",
        "time_local": f"{g.tm_mday:02d}/{month}/{g.tm_year}:{clock} +0000",
        "time_iso8601": f"{date}T{clock}+00:00",
        "request": f"GET {path}{tag} HTTP/1.1",
        "status": str(status),
        "body_bytes_sent": str(rng.randrange(200, 9000)),
        "http_referer": rng.choice(REFERERS),
        "http_user_agent": rng.choice(AGENTS),
        "request_time": f"{rt:.3f}",
        "upstream_connect_time": uct,
        "upstream_header_time": uct,
        "upstream_response_time": urt,
        "upstream_addr": addr,
        "msec": f"{t:.3f}",
        "http_x_pinchpoint": header,
    }


def renderer(log_format: str) -> Callable[[dict[str, str]], str]:
    """A line of `log_format` from a record's variables."""
    pieces = re.split(r"\$(\w+)", log_format)
    names, literals = pieces[1::2], pieces[0::2]

    def render(values: dict[str, str]) -> str:
        out = [literals[0]]
        for name, literal in zip(names, literals[1:], strict=True):
            out += (values[name], literal)
        return "".join(out)

    return render


def log_line(rng: random.Random, n: int, t: float, log_format: str = LOG_FORMAT) -> str:
    return renderer(log_format)(line_values(rng, n, t)) + "\n"


def write_log(path: Path, size_mb: int, seed: int = 1, log_format: str = LOG_FORMAT) -> int:
    """Writes about `size_mb` MB of lines; returns the number of lines."""
    rng = random.Random(seed)
    render = renderer(log_format)
    target = size_mb * 1_000_000
    written = lines = 0
    t = 1795338900.0
    with open(path, "w", buffering=1 << 20) as file:
        while written < target:
            block = []
            for _ in range(10_000):
                t += 0.0005
                block.append(render(line_values(rng, lines, t)) + "\n")
                lines += 1
                if lines % 1000 == 0:
                    block.append(f"garbage line {lines}\n")
                    lines += 1
            text = "".join(block)
            file.write(text)
            written += len(text)
    return lines


def cpu_rust(
    path: Path, batch_lines: int, log_format: str = LOG_FORMAT
) -> tuple[float, float, dict[str, int]]:
    """CPU and wall seconds of the Rust parser over the whole file, and its counts."""
    scanner = fastlogs.NginxScanner(
        str(path), 0, log_format, RUN_ID, logs.MAX_LINE_BYTES, sys.version_info >= (3, 12)
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


def cpu_collector(
    path: Path, run_dir: Path, log_format: str = LOG_FORMAT
) -> tuple[float, float, int]:
    """CPU and wall seconds of a run's collection of the log into `run_dir`
    (tiers.parquet, collection.json), and the rows tiers.parquet holds."""
    log = Log(path=str(path), format="nginx", log_format=log_format)
    collector = LocalCollector([Component(name="nginx", log=log)])
    collector.read_whole_logs(RUN_ID)
    run_dir.mkdir(exist_ok=True)
    cpu, wall = time.process_time(), time.perf_counter()
    write_logs([collector], RUN_ID, run_dir, ["nginx"])
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu, wall, pq.ParquetFile(run_dir / "tiers.parquet").metadata.num_rows


def cpu_rows(path: Path) -> tuple[float, float, int]:
    """CPU and wall seconds of the records as TierRows (Rust parser, then an object each)."""
    counts = FileCounts("nginx", str(path))
    cpu, wall = time.process_time(), time.perf_counter()
    rows = fastlogs.match_file("nginx", path, 0, parser_for(LOG_FORMAT), RUN_ID, counts)
    assert rows is not None
    n = sum(1 for _ in rows)
    return time.process_time() - cpu, time.perf_counter() - wall, n


def same_as_python(sample: Path, workdir: Path, log_format: str) -> str:
    """Whether the collector's tiers.parquet and collection counts on `sample` are the
    Python parser's: "yes", or what differs."""
    parser = parser_for(log_format)
    counts = FileCounts("nginx", str(sample))
    python = workdir / "python.parquet"
    with TierWriter(python) as writer:
        writer.add(list(match_lines("nginx", read_from(sample, 0), parser, RUN_ID, counts)))
    run_dir = workdir / "sample-run"
    cpu_collector(sample, run_dir, log_format)
    rust = pq.read_table(run_dir / "tiers.parquet")
    collected = json.loads((run_dir / "collection.json").read_text())
    found = collected["components"]["nginx"]["files"][str(sample)]
    if found != counts.as_dict():
        return f"NO: counts {found} against {counts.as_dict()}"
    if not rust.equals(pq.read_table(python)):
        return "NO: the rows differ"
    return f"yes ({rust.num_rows:,} rows)"


# CPU seconds of one go.
Measure = Callable[[], float]


def interleaved(measures: dict[str, Measure], rounds: int) -> dict[str, list[float]]:
    """CPU seconds of each measure per round, run one after the other in each round."""
    taken: dict[str, list[float]] = {name: [] for name in measures}
    for _ in range(rounds):
        for name, measure in measures.items():
            taken[name].append(measure())
    return taken


def report(lines: int, taken: dict[str, list[float]], base: str) -> None:
    """Lines per CPU-second of each (median), and the median of its ratios to `base`
    round by round."""
    print(f"{'':32} {'CPU s':>8} {'lines/CPU-s':>13} {'vs ' + base:>14} {'ratios':>20}")
    for name, cpus in taken.items():
        ratios = [b / c for b, c in zip(taken[base], cpus, strict=True)]
        spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
        print(
            f"{name:32} {statistics.median(cpus):8.2f} {lines / statistics.median(cpus):13,.0f} "
            f"{statistics.median(ratios):14.3f} {spread:>20}"
        )


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
    ap.add_argument("--other-mb", type=int, default=256, help="size of each other format's log")
    ap.add_argument("--sample-lines", type=int, default=200_000, help="lines for the Python parser")
    ap.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)), help="CPU to pin to")
    ap.add_argument("--batch-lines", type=int, default=65536)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (medians kept)")
    ap.add_argument("--dir", type=Path, default=None, help="where to write the log (default: temp)")
    ap.add_argument("--no-goaccess", action="store_true")
    ap.add_argument("--no-others", action="store_true", help="leave out OTHER_FORMATS")
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
        warm(log)

        sample = workdir / "sample.log"
        with open(log, "rb") as src, open(sample, "wb") as dst:
            dst.writelines(itertools.islice(src, args.sample_lines))
        same = same_as_python(sample, workdir, LOG_FORMAT)
        print(
            f"sample of {args.sample_lines:,} lines: collector's tiers.parquet is Python's: {same}"
        )
        py_cpu, _ = cpu_python(sample)

        *_, totals = cpu_rust(log, args.batch_lines)
        print(f"rust counts: {totals}")
        run_dir = workdir / "run"
        taken = interleaved(
            {
                "rust parser alone (columns)": lambda: cpu_rust(log, args.batch_lines)[0],
                "collector to tiers.parquet": lambda: cpu_collector(log, run_dir)[0],
                "rust + TierRows (agent stream)": lambda: cpu_rows(log)[0],
            },
            args.rounds,
        )
        n_rows = pq.ParquetFile(run_dir / "tiers.parquet").metadata.num_rows
        rust_rate = totals["read"] / statistics.median(taken["rust parser alone (columns)"])
        taken["python parser (sample, once)"] = [py_cpu * totals["read"] / args.sample_lines]
        if not args.no_goaccess:
            found = run_goaccess(log, args.core, workdir)
            if found is not None:
                ga_cpu, _, general = found
                print(
                    "goaccess: total_requests {total_requests:,}, valid {valid_requests:,}, "
                    "failed {failed_requests:,}".format(**general)
                )
                taken["goaccess 1.x (JSON, once)"] = [ga_cpu]
        print(
            f"\nall pinned to CPU {args.core}; {size / 1e6:.0f} MB log, {totals['read']:,} lines;"
        )
        print(f"rows in tiers.parquet: {n_rows:,}; {args.rounds} interleaved rounds\n")
        for name in ("python parser (sample, once)", "goaccess 1.x (JSON, once)"):
            if name in taken:  # run once: its one figure stands for each round
                taken[name] = taken[name] * args.rounds
        report(totals["read"], taken, "rust parser alone (columns)")
        collector_rate = totals["read"] / statistics.median(taken["collector to tiers.parquet"])
        print(
            f"\nrust parser: {size / statistics.median(taken['rust parser alone (columns)']) / 1e6:,.0f} MB per CPU-second"
        )
        print(f"rust parser alone: {rust_rate:,.0f} lines/CPU-s")
        met = "met" if collector_rate >= 1e6 else "NOT met"
        print(f"target 1,000,000 lines/CPU-s through the collector: {met}")
        log.unlink()
        if not args.no_others:
            other_formats(workdir, args)


def other_formats(workdir: Path, args: argparse.Namespace) -> None:
    """Each of OTHER_FORMATS on a log of its own: the collector beside the Rust parser."""
    print(f"\nother log_formats, {args.other_mb} MB each, {args.rounds} interleaved rounds:")
    for name, log_format in OTHER_FORMATS.items():
        log = workdir / "other.log"
        write_log(log, args.other_mb, log_format=log_format)
        warm(log)
        sample = workdir / "other-sample.log"
        with open(log, "rb") as src, open(sample, "wb") as dst:
            dst.writelines(itertools.islice(src, args.sample_lines // 4))
        same = same_as_python(sample, workdir, log_format)
        *_, totals = cpu_rust(log, args.batch_lines, log_format)
        run_dir = workdir / "other-run"
        taken = interleaved(
            {
                "rust parser alone": lambda: cpu_rust(log, args.batch_lines, log_format)[0],  # noqa: B023
                "collector to tiers.parquet": lambda: cpu_collector(log, run_dir, log_format)[0],  # noqa: B023
            },
            args.rounds,
        )
        n_rows = pq.ParquetFile(run_dir / "tiers.parquet").metadata.num_rows
        print(f"\n{name}: {log_format}")
        print(f"{totals['read']:,} lines, {n_rows:,} rows; same as Python on a sample: {same}")
        report(totals["read"], taken, "rust parser alone")
        log.unlink()


def warm(path: Path) -> None:
    """Reads the file into the page cache."""
    with open(path, "rb") as file:
        while file.read(1 << 24):
            pass


if __name__ == "__main__":
    main()
