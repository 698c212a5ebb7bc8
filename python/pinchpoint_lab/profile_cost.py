"""What sampling costs the stack: the throughput while py-spy sampled one step, against
the same stretch of the other steps at the same load in the same run (the plan's stages
hold the same users; the profile samples one of them).

The stretch is the profile's window (profile.json), shifted to each other step by where
it lies in its own step, so both sides count the same part of a step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pinchpoint.rundir import files


@dataclass(frozen=True)
class ProfileCost:
    profiled_rps: float
    unprofiled_rps: float  # the mean of the other steps at the profiled step's load

    @property
    def cost(self) -> float:
        """The share of throughput lost while sampling (negative: none was lost)."""
        return 1.0 - self.profiled_rps / self.unprofiled_rps


def profile_cost(run_dir: Path, tier: str) -> ProfileCost:
    """The throughput within the profile's window of `tier` and within the same stretch of
    every other step at the same load."""
    folder = files.RunFolder(run_dir)
    profile = folder.read_json(files.PROFILE)
    steps = folder.read_run()["steps"]
    window = profile["tiers"][tier]
    profiled = steps[profile["step"]]
    offset = window["start"] - profiled["start"]
    length = window["end"] - window["start"]
    ends = _ends(folder)
    twins = [
        _rate(ends, s["start"] + offset, length)
        for s in steps
        if s["step"] != profiled["step"] and s["level"] == profiled["level"]
    ]
    if not twins:
        raise ValueError("no other step runs the profiled step's load")
    return ProfileCost(_rate(ends, window["start"], length), sum(twins) / len(twins))


def _ends(folder: files.RunFolder) -> pl.Series:
    """When each answered request ended, unix seconds."""
    frame = folder.read_frame(files.REQUESTS, ["start_us", "latency_us", "status"])
    answered = frame.filter(pl.col("status") == 200)
    return (answered["start_us"] + answered["latency_us"]) / 1e6


def _rate(ends: pl.Series, start: float, length: float) -> float:
    return int(ends.is_between(start, start + length).sum()) / length
