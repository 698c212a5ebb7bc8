"""The engine's histograms, kept with the run: per step, and per step and endpoint.

`histograms.json` maps `"<step>"` to the step's HdrHistogram and `"<step>/<endpoint>"`
to the histogram of the plan's request number `endpoint` in that step (V2 serialized,
base64), so any tool reading HdrHistogram logs can merge or re-query them.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from pinchpoint.rundir import files


def _without_histograms(entry: dict) -> dict:
    out = {k: v for k, v in entry.items() if not k.endswith("hdr_v2")}
    if "endpoints" in out:
        out["endpoints"] = [_without_histograms(e) for e in out["endpoints"]]
    if "kinds" in out:
        out["kinds"] = {kind: _without_histograms(k) for kind, k in out["kinds"].items()}
    return out


def step_counts(summary: dict) -> list[dict]:
    """The engine's per-step counts and percentiles, without the serialized histograms."""
    return [_without_histograms(s) for s in summary["steps"]]


def histograms_document(summary: dict) -> dict[str, str]:
    doc = {}
    for s in summary["steps"]:
        doc[str(s["step"])] = base64.b64encode(s["hdr_v2"]).decode()
        for e in s.get("endpoints", []):
            if e["requests"]:
                doc[f"{s['step']}/{e['endpoint']}"] = base64.b64encode(e["hdr_v2"]).decode()
    return doc


def write_histograms(summary: dict, run_dir: Path) -> Path:
    path = run_dir / files.HISTOGRAMS
    path.write_text(json.dumps(histograms_document(summary)))
    return path
