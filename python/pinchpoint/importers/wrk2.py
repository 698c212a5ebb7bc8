"""wrk2's `--latency` output, or any HdrHistogram percentile distribution
(`outputPercentileDistribution` / `hdr_percentiles_print`): aggregates only.

The detailed percentile spectrum is the table under the header
`Value Percentile TotalCount 1/(1-Percentile)` (whitespace or CSV), a row per
percentile tick, closed by the `#[Mean = …]` footer. wrk2 prints values in ms; a bare
HdrHistogram table is read in the unit given (ms by default). Around it, wrk2's text
gives the request count and time, requests/s, socket errors, non-2xx/3xx responses and
its own short percentile list. With `-U`, a second, uncorrected spectrum follows; it is
kept apart. Bad rows in a table are skipped and counted.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinchpoint.importers.common import (
    SUMMARY_SCHEMA,
    Imported,
    ImportFormatError,
    Skipped,
    check_readable,
    open_text,
)

TOOL = "wrk2"
UNIT_US = {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3}
LADDER = (50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 99.999, 100)

HEADER = re.compile(r'^\s*"?Value"?[\s,]+"?Percentile"?[\s,]+"?Total\s?Count"?', re.I)
FOOTER = re.compile(r"^\s*#\[(.*)\]\s*$")
FOOTER_ITEM = re.compile(r"([A-Za-z][A-Za-z ]*?)\s*=\s*([-+0-9.eE]+|nan|inf)")
SHORT = re.compile(r"^\s*(\d+(?:\.\d+)?)%\s+(\d+(?:\.\d+)?)(us|ms|s|m|h)\s*$")
REQUESTS = re.compile(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h), ([\d.]+)([KMGT]?B) read")
RATE = re.compile(r"^\s*Requests/sec:\s*([\d.]+)")
RUNNING = re.compile(r"^\s*Running (\S+) test @ (\S+)")
THREADS = re.compile(r"^\s*(\d+) threads and (\d+) connections")
SOCKET = re.compile(
    r"^\s*Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", re.I
)
NON_2XX = re.compile(r"^\s*Non-2xx or 3xx responses: (\d+)")
DURATION_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
BYTES = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}


@dataclass
class Spectrum:
    label: str
    header_line: int
    rows: list[tuple[float, float, int]] = field(default_factory=list)  # value, pct, count
    footer: dict[str, float] = field(default_factory=dict)

    def total(self) -> int:
        counted = self.footer.get("total count") or self.footer.get("totalcount")
        return int(counted) if counted else self.rows[-1][2]


class BadRow(ValueError):
    pass


def read(path: Path, unit: str = "ms", tool: str = TOOL) -> Imported:
    path = check_readable(path)
    if unit not in UNIT_US:
        raise ImportFormatError(path, None, f"unknown unit {unit!r}; one of {', '.join(UNIT_US)}")
    skipped = Skipped()
    spectra: list[Spectrum] = []
    current: Spectrum | None = None
    label = "recorded"
    text: dict[str, Any] = {}
    reported: dict[str, dict[str, float]] = {}
    lines = 0
    for number, line in open_text(path):
        lines = number
        if "Uncorrected Latency" in line:
            label = "uncorrected"
        if HEADER.match(line):
            current = Spectrum(label, number)
            spectra.append(current)
            continue
        if current is not None:
            if not line.strip():
                continue
            footer = FOOTER.match(line)
            if footer:
                for key, value in FOOTER_ITEM.findall(footer.group(1)):
                    current.footer[key.strip().lower()] = float(value)
                continue
            if not current.footer and not _ends_table(line):
                try:
                    current.rows.append(_row(line, current.rows))
                except BadRow as exc:
                    skipped.add(number, str(exc))
                continue
            current = None
        _text_line(line, label, text, reported)
    spectra = [s for s in spectra if s.rows]
    if not spectra:
        what = "no HdrHistogram percentile table with rows (wrk2 prints it with --latency)"
        raise skipped.error(path, what)
    summary = _summary(spectra, unit, text, reported, tool)
    return Imported(tool=tool, lines=lines, skipped=skipped, summary=summary, sources=[path])


def _ends_table(line: str) -> bool:
    """A line after a table with no footer: a separator or wrk2's own text."""
    if line.lstrip().startswith("--"):
        return True
    text_lines = (SHORT, REQUESTS, RATE, RUNNING, THREADS, SOCKET, NON_2XX)
    return any(p.match(line) for p in text_lines) or "Latency" in line or "spectrum" in line


def _row(line: str, previous: list[tuple[float, float, int]]) -> tuple[float, float, int]:
    fields = line.replace(",", " ").split()
    if len(fields) not in (3, 4):
        raise BadRow(
            f"expected 3 or 4 fields (value, percentile, count, 1/(1-p)), found {len(fields)}"
        )
    try:
        value, percentile = float(fields[0]), float(fields[1])
        count = int(fields[2])
    except ValueError:
        raise BadRow(f"unreadable row {line.strip()!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise BadRow(f"value {fields[0]} is not a latency")
    if not 0 <= percentile <= 1:
        raise BadRow(f"percentile {fields[1]} is not between 0 and 1")
    if previous:
        last_value, last_percentile, last_count = previous[-1]
        if percentile < last_percentile or count < last_count or value < last_value:
            raise BadRow("row goes down from the one before it")
    return value, percentile, count


def _text_line(
    line: str, label: str, text: dict[str, Any], reported: dict[str, dict[str, float]]
) -> None:
    """wrk2's lines around the spectrum."""
    if m := SHORT.match(line):
        value_ms = round(float(m.group(2)) * DURATION_S[m.group(3)] * 1000, 6)
        reported.setdefault(label, {})[f"p{_pct(float(m.group(1)))}"] = value_ms
    elif m := RUNNING.match(line):
        text["url"] = m.group(2)
    elif m := THREADS.match(line):
        text["threads"], text["connections"] = int(m.group(1)), int(m.group(2))
    elif m := REQUESTS.match(line):
        text["requests"] = int(m.group(1))
        text["duration_s"] = float(m.group(2)) * DURATION_S[m.group(3)]
        text["bytes_read"] = round(float(m.group(4)) * BYTES[m.group(5)])
    elif m := RATE.match(line):
        text["throughput_rps"] = float(m.group(1))
    elif m := SOCKET.match(line):
        names = ("connect", "read", "write", "timeout")
        text["socket_errors"] = dict(zip(names, map(int, m.groups()), strict=True))
    elif m := NON_2XX.match(line):
        text["non_2xx_3xx"] = int(m.group(1))


def _summary(
    spectra: list[Spectrum],
    unit: str,
    text: dict[str, Any],
    reported: dict[str, dict[str, float]],
    tool: str,
) -> dict[str, Any]:
    scale = UNIT_US[unit] / 1000  # to ms
    main = spectra[0]
    summary: dict[str, Any] = {"schema": SUMMARY_SCHEMA, "tool": tool, "unit": unit}
    summary.update(_spectrum_entry(main, scale))
    summary["requests"] = text.get("requests", summary["count"])
    socket = text.get("socket_errors")
    if socket is not None or "non_2xx_3xx" in text:
        errors = sum((socket or {}).values()) + text.get("non_2xx_3xx", 0)
        summary["errors"] = errors
        summary["error_rate"] = errors / summary["requests"] if summary["requests"] else None
    for key in ("throughput_rps", "duration_s", "bytes_read", "url", "threads", "connections"):
        if key in text:
            summary[key] = text[key]
    for key in ("socket_errors", "non_2xx_3xx"):
        if key in text:
            summary[key] = text[key]
    if main.label in reported:
        summary["reported_ms"] = reported[main.label]
    for other in spectra[1:]:
        if other.label != main.label:
            entry = _spectrum_entry(other, scale)
            if other.label in reported:
                entry["reported_ms"] = reported[other.label]
            summary[other.label] = entry
    return summary


def _spectrum_entry(spectrum: Spectrum, scale: float) -> dict[str, Any]:
    total = spectrum.total()
    entry: dict[str, Any] = {
        "count": total,
        # The value of the first row holding the percentile's share of the count: the
        # spectrum's rows are ticks, so this is its upper bound.
        "latency_ms": {f"p{_pct(p)}": _ms(_at(spectrum, p / 100), scale) for p in LADDER},
        "min_ms": _ms(spectrum.rows[0][0], scale),
        "max_ms": _ms(spectrum.rows[-1][0], scale),
    }
    footer = spectrum.footer
    if "mean" in footer:
        entry["mean_ms"] = _ms(footer["mean"], scale)
    if "stddeviation" in footer:
        entry["stdev_ms"] = _ms(footer["stddeviation"], scale)
    entry["spectrum"] = [
        {"latency_ms": _ms(value, scale), "percentile": pct, "count": count}
        for value, pct, count in spectrum.rows
    ]
    return entry


def _at(spectrum: Spectrum, q: float) -> float:
    total = spectrum.rows[-1][2]
    target = max(1, math.ceil(q * total - 1e-9))
    for value, _, count in spectrum.rows:
        if count >= target:
            return value
    return spectrum.rows[-1][0]


def _ms(value: float, scale: float) -> float:
    return round(value * scale, 6)  # to the ns: no float noise such as 2.0060000000000002


def _pct(p: float) -> str:
    return f"{p:g}"
