"""How hdr_spectrum.txt and wrk2_latency.txt were made (needs `pip install hdrhistogram`).

hdr_spectrum.txt is the HdrHistogram Python library's own percentile output. wrk2 could
not be installed here, so wrk2_latency.txt is wrk2's documented `--latency` text around
a spectrum built the way HdrHistogram_c's hdr_percentiles_print (which wrk2 calls)
builds it: a row per percentile tick, 5 ticks per half distance, values in ms.
"""

import io
import math
from pathlib import Path

from hdrh.histogram import HdrHistogram

HERE = Path(__file__).parent


def hdr_spectrum() -> None:
    h = HdrHistogram(1, 60_000_000, 3)
    for v in range(100, 2100):  # 2000 values, 100 … 2099 µs
        h.record_value(v)
    h.record_value(25_000)
    buf = io.BytesIO()
    h.output_percentile_distribution(buf, 1.0)
    (HERE / "hdr_spectrum.txt").write_bytes(buf.getvalue())


def units(us: float) -> str:
    for unit, scale in (("s", 1e6), ("ms", 1e3)):
        if us >= scale:
            return f"{us / scale:.2f}{unit}"
    return f"{us:.2f}us"


def wrk2_latency() -> None:
    h = HdrHistogram(1, 60_000_000, 3)
    values = range(1, 10_001)  # 10000 values, 1 … 10000 µs
    for v in values:
        h.record_value(v)
    out = [
        "Running 10s test @ http://127.0.0.1:8080/",
        "  2 threads and 16 connections",
        "  Thread calibration: mean lat.: 5.012ms, rate sampling interval: 10ms",
        "  Thread calibration: mean lat.: 4.987ms, rate sampling interval: 10ms",
        "  Thread Stats   Avg      Stdev     Max   +/- Stdev",
        "    Latency     5.00ms    2.89ms  10.00ms   57.74%",
        "    Req/Sec   527.13     61.20   777.00     68.12%",
        "  Latency Distribution (HdrHistogram - Recorded Latency)",
    ]
    for p in (50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 99.999, 100.0):
        out.append(f"{p:7.3f}%{units(h.get_value_at_percentile(p)):>10}")
    out += ["", "  Detailed Percentile spectrum:"]
    out += [f"{'Value':>12} {'Percentile':>12} {'TotalCount':>12} {'1/(1-Percentile)':>12}", ""]
    buckets: dict[int, int] = {}
    for v in values:
        top = h.get_highest_equivalent_value(v)
        buckets[top] = buckets.get(top, 0) + 1
    total = sum(buckets.values())
    cumulative = 0
    tick = 0.0
    for top in sorted(buckets):
        cumulative += buckets[top]
        while tick <= 100.0 * cumulative / total:
            pct = tick / 100.0
            out.append(f"{top / 1000:12.3f} {pct:12f} {cumulative:12d} {1 / (1 - pct):12.2f}")
            half_distances = int(math.log(100 / (100.0 - tick)) / math.log(2)) + 1
            tick += 100.0 / (5 * 2**half_distances)
            if cumulative == total:
                break
    out.append(f"{max(buckets) / 1000:12.3f} {1.0:12f} {total:12d} {'inf':>12}")
    mean, stdev = h.get_mean_value() / 1000, h.get_stddev() / 1000
    out += [
        f"#[Mean    = {mean:12.3f}, StdDeviation   = {stdev:12.3f}]",
        f"#[Max     = {h.get_max_value() / 1000:12.3f}, Total count    = {total:12d}]",
        f"#[Buckets = {h.bucket_count:12d}, SubBuckets     = {h.sub_bucket_count:12d}]",
        "----------------------------------------------------------",
        "  10000 requests in 10.00s, 1.17MB read",
        "  Socket errors: connect 0, read 0, write 0, timeout 3",
        "  Non-2xx or 3xx responses: 12",
        "Requests/sec:   1000.00",
        "Transfer/sec:    120.06KB",
    ]
    (HERE / "wrk2_latency.txt").write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    hdr_spectrum()
    wrk2_latency()
