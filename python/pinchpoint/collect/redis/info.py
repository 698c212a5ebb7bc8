"""INFO's text as values: `name:value` lines, and commandstats' lines of `key=value` pairs.

# CPU
used_cpu_sys:1.234567
used_cpu_sys_main_thread:1.001
# Commandstats
cmdstat_get:calls=21,usec=175,usec_per_call=8.33,rejected_calls=0,failed_calls=0
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CommandStat:
    """One command's totals since the server started (or CONFIG RESETSTAT)."""

    command: str
    calls: int
    usec: int


def info_fields(text: str) -> dict[str, str]:
    """The `name:value` fields of INFO's reply; headers, blank and odd lines left out."""
    fields = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name and not name.startswith("#"):
            fields[name.strip()] = value.strip()
    return fields


def number(fields: dict[str, str], name: str) -> float | None:
    """A field as a number; None when missing or not a number."""
    try:
        return float(fields[name])
    except (KeyError, ValueError):
        return None


def command_stats(text: str) -> list[CommandStat]:
    """The commands of INFO commandstats (`cmdstat_<name>`, subcommands as `a|b`)."""
    found = []
    for name, value in info_fields(text).items():
        if not name.startswith("cmdstat_"):
            continue
        pairs = dict(p.partition("=")[::2] for p in value.split(","))
        try:
            calls, usec = int(pairs["calls"]), int(pairs["usec"])
        except (KeyError, ValueError):
            continue
        found.append(CommandStat(name.removeprefix("cmdstat_"), calls, usec))
    return found
