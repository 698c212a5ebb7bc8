"""Fuzzing the OTLP receiver at length: --inputs export bodies, JSON and protobuf, each
handed to its decoder here and posted to a receiver running in its own process. One in
--edits is drawn by Hypothesis (built with hostile values and edited, as the tests'
tests/collect/otlp_bodies.py does); the others are that body edited again at random
(bytes cut out, put in, overwritten, doubled, or spliced from another body), which is
about 10 times faster than drawing each.

Prints how many inputs were tried, how many decoded and how many were refused, the
tracebacks (an exception from a decoder other than a refusal, an answer other than 200 or
400, anything the receiver wrote to its terminal), the hangs (an answer slower than
--hang-s), the slowest answer, whether the receiver counted every body, and its peak RSS.

    .venv/bin/python bench/fuzz_otlp.py
    .venv/bin/python bench/fuzz_otlp.py --inputs 100000 --hang-s 5 --seed 2
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

import httpx
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from collect.otlp_bodies import json_bodies, protobuf_bodies
from collect.otlp_process import ReceiverProcess
from pinchpoint.collect.traces.otlp_json import decode_json
from pinchpoint.collect.traces.otlp_proto import decode_protobuf
from pinchpoint.collect.traces.spans import PayloadError

KINDS = {"json": "application/json", "protobuf": "application/x-protobuf"}
HOSTILE = [b"9" * 5000, b"[" * 3000, b'"\\ud800"', b"\xff" * 11, b"\x0a\xff\xff\xff\x0f", b"\x00"]


def edited(body: bytes, other: bytes, rng: random.Random) -> bytes:
    """`body` with one to four random edits."""
    out = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(out))
        how = rng.randrange(6)
        if how == 0:
            del out[at : at + rng.randint(1, 64)]
        elif how == 1:
            out[at:at] = rng.choice(HOSTILE)
        elif how == 2:
            out[at : at + 4] = rng.randbytes(rng.randint(1, 4))
        elif how == 3 and out:
            out[at:at] = out[max(at - 200, 0) : at]  # a piece doubled
        elif how == 4 and other:
            cut = rng.randint(0, len(other))
            out[at:] = other[cut:]  # spliced with another body
        elif at < len(out):
            out[at] = rng.randrange(256)
    return bytes(out)


class Tally:
    def __init__(self, receiver: ReceiverProcess, hang_s: float) -> None:
        self.receiver = receiver
        self.client = httpx.Client(timeout=hang_s)
        self.outcomes: Counter[str] = Counter()
        self.tracebacks: list[str] = []
        self.hangs = 0
        self.slowest_s = 0.0
        self.posted = 0

    def one(self, kind: str, body: bytes) -> None:
        decode = decode_json if kind == "json" else decode_protobuf
        try:
            decode(body)
            self.outcomes[f"{kind} decoded"] += 1
        except PayloadError:
            self.outcomes[f"{kind} refused"] += 1
        except Exception:
            self.tracebacks.append(traceback.format_exc(limit=3))
        started = time.monotonic()
        try:
            answer = self.client.post(
                self.receiver.url, content=body, headers={"Content-Type": KINDS[kind]}
            )
        except httpx.TimeoutException:
            self.hangs += 1
            return
        finally:
            self.posted += 1
            self.slowest_s = max(self.slowest_s, time.monotonic() - started)
        if answer.status_code not in (200, 400):
            self.tracebacks.append(f"answered {answer.status_code}: {answer.text[:200]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=30_000)
    parser.add_argument("--hang-s", type=float, default=10.0)
    parser.add_argument("--edits", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    receiver = ReceiverProcess()
    tally = Tally(receiver, args.hang_s)
    rng = random.Random(args.seed)
    last: dict[str, bytes] = {"json": b"", "protobuf": b""}
    bodies = st.one_of(
        json_bodies().map(lambda body: ("json", body)),
        protobuf_bodies().map(lambda body: ("protobuf", body)),
    )

    @settings(
        max_examples=-(-args.inputs // args.edits),
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(bodies)
    def fuzz(case: tuple[str, bytes]) -> None:
        kind, body = case
        for index in range(args.edits):
            if tally.posted >= args.inputs:
                return
            tally.one(kind, body if index == 0 else edited(body, last[kind], rng))
            if tally.posted % 5000 == 0:
                print(f"  {tally.posted:,} inputs", flush=True)
        last[kind] = body

    started = time.monotonic()
    try:
        fuzz()
        tally.client.close()
        seen, stderr = receiver.stop(timeout=120)
    finally:
        receiver.kill()
    took = time.monotonic() - started

    tracebacks = tally.tracebacks + ([stderr] if stderr else [])
    own_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"inputs: {tally.posted:,} in {took:.0f}s ({tally.posted / took:.0f}/s)")
    for outcome, count in sorted(tally.outcomes.items()):
        if count:
            print(f"  {outcome}: {count:,}")
    print(f"tracebacks: {len(tracebacks)}")
    for found in tracebacks[:5]:
        print("  " + found.replace("\n", "\n  "))
    print(f"hangs (no answer within {args.hang_s:g}s): {tally.hangs}")
    print(f"slowest answer: {tally.slowest_s * 1000:.0f} ms")
    counted = seen["payloads"] + seen["rejected_payloads"]
    print(
        f"receiver: {seen['payloads']:,} payloads, {seen['rejected_payloads']:,} refused, "
        f"{seen['disconnects']} disconnects, {counted:,} of {tally.posted:,} bodies counted"
    )
    print(f"peak RSS: receiver {seen['peak_rss_mb']} MB, this process {own_peak:.0f} MB")


if __name__ == "__main__":
    main()
