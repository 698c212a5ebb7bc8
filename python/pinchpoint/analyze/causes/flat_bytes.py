"""A network path with a ceiling the host does not expose: the bytes per second stop at a
constant while nothing measured saturates."""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Ask, Cause, Finding
from pinchpoint.analyze.context import from_onset, load_text, rate_of
from pinchpoint.analyze.thresholds import FLAT_LOAD_GROWTH, FLAT_SPREAD, LARGE_RESPONSE
from pinchpoint.rundir.shapes import StepJson


def flat_bytes(tier: str, steps: list[StepJson], onset: StepJson) -> Finding | None:
    """Nothing measured saturates, yet the bytes the client receives per second stop at a
    ceiling past the onset while the load grows, and responses are large enough for a link
    to be what stops them: a network path with a ceiling the host does not expose."""
    after = from_onset(steps, onset)
    rates = [s.get("bytes_per_s") or 0.0 for s in after]
    sent = [s.get("requests") or 0 for s in after]
    if len(after) < 2 or min(rates) <= 0 or not all(sent):
        return None
    mean_size = sum(rates) / sum(s["throughput_rps"] or 1e-9 for s in after)
    grew = after[-1]["users"] >= FLAT_LOAD_GROWTH * max(after[0]["users"], 1)
    flat = max(rates) <= FLAT_SPREAD * min(rates)
    if not (grew and flat and mean_size >= LARGE_RESPONSE):
        return None
    ceiling = sum(rates) / len(rates)
    evidence = [
        f"the client received {ceiling * 8 / 1e6:.1f} Mbit/s from {load_text(onset)} to "
        f"{load_text(after[-1])} (within {100 * (FLAT_SPREAD - 1):.0f}%) while the load grew "
        f"{after[-1]['users'] / max(after[0]['users'], 1):.1f}×; responses of "
        f"{mean_size / 1024:.0f} KiB on average",
        "no worker pool, CPU, quota, lock or disk was saturated, and no link's ceiling is known",
    ]
    summary = (
        f"Throughput stops at a constant {ceiling * 8 / 1e6:.1f} Mbit/s from {load_text(onset)} "
        f"while nothing measured saturates and {tier}'s time grows: a network path with a "
        "ceiling (a shaped or slow link between the tiers, or to the client) is the likely "
        f"limit. {FLAT_BYTES.advice}"
    )
    return Finding(
        "network", FLAT_BYTES, onset["users"], evidence,
        f"a network path at {ceiling * 8 / 1e6:.1f} Mbit/s (inferred)", summary, rate_of(onset),
    )  # fmt: skip


def _find_flat_bytes(ask: Ask) -> Finding | None:
    return flat_bytes(ask.tier, ask.steps, ask.onset)


FLAT_BYTES = Cause(
    name="flat_bytes",
    resource="bandwidth",
    scope="tier",
    doc=__doc__,
    advice="Check the link's speed and shaping (tc -s qdisc), or send fewer bytes.",
    saturates="a network path with an unseen ceiling",
    reads=("bytes_per_s", "throughput_rps", "requests"),
    thresholds=("FLAT_LOAD_GROWTH", "FLAT_SPREAD", "LARGE_RESPONSE"),
    needs_cpu=False,
    find=_find_flat_bytes,
)
