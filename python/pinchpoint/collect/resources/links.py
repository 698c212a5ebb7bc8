"""Network links and their ceilings, in this network namespace and in every named one
(those of `ip netns`, under /run/netns): the host row's `net_util`, `net_link` and
`net_qdisc_*` columns.

A link is one interface of one namespace, named `<netns>/<ifname>` (only `<ifname>` in
this namespace). Its ceiling for sending is the rate of a shaper on its egress, when its
root qdisc is `tbf` (its rate) or `htb` (the sum of its root classes' `ceil`), else its
speed (`/sys/class/net/<if>/speed`); for receiving it is its speed. Virtual interfaces
often report no speed, and loopback none: a link with no ceiling is not counted.

Cost: the namespaces, ceilings and speeds are read every REFRESH_S seconds (`tc -s -j
qdisc` in each namespace, `tc class show` for an htb; in a named one also `ip netns exec
... /sys/class/net/*/speed`: a few ms per namespace). Each sample reads the byte counters
(this namespace's are given; a short-lived thread enters each named namespace with
setns and reads its /proc/net/dev, falling back to `ip -n <ns> -s -j link`) and, when the
link nearest its ceiling carries traffic and has a qdisc, that namespace's `tc -s -j
qdisc`: well under 1 ms per sample, plus about 3 to 5 ms for that one `tc` run.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NETNS_DIR = Path("/run/netns")
SYS_CLASS_NET = Path("/sys/class/net")
REFRESH_S = 5.0
COLUMNS = (
    "net_util",
    "net_link",
    "net_link_bytes_s",
    "net_link_limit_bytes_s",
    "net_qdisc_backlog_bytes",
    "net_qdisc_drops_s",
    "net_qdisc_overlimits_s",
)
_TIMEOUT_S = 2.0
_MBIT = 125_000  # bytes per second in a Mbit/s
_RATE_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_HTB_ROOT_CEIL = re.compile(r"^class htb \S+ root .*?\bceil (\d+(?:\.\d+)?)([KMGT]?)bit\b", re.M)
_CLONE_NEWNET = 0x40000000
_SPEEDS = "cd /sys/class/net && grep -s . */speed"

Key = tuple[str, str]  # (namespace, interface); "" is this namespace


@dataclass(frozen=True)
class Qdisc:
    """A root qdisc's counters at one moment."""

    at: float  # monotonic seconds
    backlog: int  # bytes queued
    drops: int
    overlimits: int


@dataclass
class _Ceiling:
    speed: float | None = None  # bytes/s each way
    shaped: float | None = None  # bytes/s sent

    def sending(self) -> float | None:
        known = [x for x in (self.shaped, self.speed) if x]
        return min(known) if known else None


class LinkReader:
    """The link nearest its ceiling between two reads, in any namespace."""

    def __init__(
        self,
        netns_dir: Path = NETNS_DIR,
        sys_class_net: Path = SYS_CLASS_NET,
        refresh_s: float = REFRESH_S,
    ) -> None:
        self._netns_dir = netns_dir
        self._sys_class_net = sys_class_net
        self.refresh_s = refresh_s
        self._refreshed_at: float | None = None
        self._namespaces: list[str] = []
        self._ceilings: dict[Key, _Ceiling] = {}
        self._counters: dict[Key, tuple[int, int]] = {}
        self._qdiscs: dict[Key, Qdisc] = {}
        self._missing: set[str] = set()  # programs not installed

    def read(self, here: Mapping[str, tuple[int, int]], elapsed: float) -> dict[str, Any]:
        """The columns of COLUMNS from this namespace's byte counters {ifname: (received,
        sent)} and the others' (read now), as rates over the `elapsed` seconds since the
        previous read."""
        now = time.monotonic()
        qdiscs: dict[Key, Qdisc] = {}
        if self._refreshed_at is None or now - self._refreshed_at >= self.refresh_s:
            self._refreshed_at = now
            qdiscs = self._refresh()
        counters = {("", name): c for name, c in here.items()}
        counters.update(self._namespace_counters())
        before, self._counters = self._counters, counters
        out: dict[str, Any] = dict.fromkeys(COLUMNS)
        busiest = self._busiest(counters, before, elapsed) if elapsed > 0 else None
        if busiest is not None:
            share, key, rate, limit = busiest
            out.update(
                net_util=share,
                net_link=f"{key[0]}/{key[1]}" if key[0] else key[1],
                net_link_bytes_s=rate,
                net_link_limit_bytes_s=limit,
            )
            if rate > 0 and key not in qdiscs and key in self._qdiscs:
                qdiscs.update(self._tc(key[0])[0])
            out.update(_queue(qdiscs.get(key), self._qdiscs.get(key)))
        self._qdiscs.update(qdiscs)
        return out

    def _busiest(
        self,
        counters: Mapping[Key, tuple[int, int]],
        before: Mapping[Key, tuple[int, int]],
        elapsed: float,
    ) -> tuple[float, Key, float, float] | None:
        best: tuple[float, Key, float, float] | None = None
        for key, ceiling in self._ceilings.items():
            now, then = counters.get(key), before.get(key)
            if now is None or then is None:
                continue
            received = max(0, now[0] - then[0]) / elapsed
            sent = max(0, now[1] - then[1]) / elapsed
            for rate, limit in ((sent, ceiling.sending()), (received, ceiling.speed)):
                if limit and (best is None or rate / limit > best[0]):
                    best = (rate / limit, key, rate, limit)
        return best

    def _refresh(self) -> dict[Key, Qdisc]:
        """Reads the namespaces, shapers and speeds again; the qdiscs read meanwhile."""
        try:
            self._namespaces = sorted(os.listdir(self._netns_dir))
        except OSError:
            self._namespaces = []
        ceilings: dict[Key, _Ceiling] = {}
        qdiscs: dict[Key, Qdisc] = {}
        for ns in ["", *self._namespaces]:
            found, rates = self._tc(ns)
            qdiscs.update(found)
            for key, rate in rates.items():
                ceilings.setdefault(key, _Ceiling()).shaped = rate
            speeds = self._speeds_here() if not ns else self._speeds_in(ns)
            for name, speed in speeds.items():
                ceilings.setdefault((ns, name), _Ceiling()).speed = speed
        self._ceilings = ceilings
        return qdiscs

    def _tc(self, ns: str) -> tuple[dict[Key, Qdisc], dict[Key, float]]:
        """The root qdiscs of namespace `ns` and the rates of those that shape."""
        out = self._run(["tc", *_netns(ns), "-s", "-j", "qdisc", "show"])
        now = time.monotonic()
        qdiscs: dict[Key, Qdisc] = {}
        rates: dict[Key, float] = {}
        for q in _json_list(out):
            dev = q.get("dev")
            if not q.get("root") or not isinstance(dev, str) or q.get("kind") == "noqueue":
                continue
            key = (ns, dev)
            qdiscs[key] = Qdisc(
                now, int(q.get("backlog", 0)), int(q.get("drops", 0)), int(q.get("overlimits", 0))
            )
            rate = None
            if q.get("kind") == "tbf":
                rate = (q.get("options") or {}).get("rate")
            elif q.get("kind") == "htb":
                rate = self._htb_ceiling(ns, dev)
            if isinstance(rate, int | float) and rate > 0:
                rates[key] = float(rate)
        return qdiscs, rates

    def _htb_ceiling(self, ns: str, dev: str) -> float | None:
        """The sum of the `ceil` of an htb's root classes, in bytes per second."""
        text = self._run(["tc", *_netns(ns), "class", "show", "dev", dev]) or ""
        ceils = [
            float(n) * _RATE_UNITS[unit.lower()] / 8 for n, unit in _HTB_ROOT_CEIL.findall(text)
        ]
        return sum(ceils) or None

    def _speeds_here(self) -> dict[str, float]:
        speeds: dict[str, float] = {}
        try:
            names = os.listdir(self._sys_class_net)
        except OSError:
            return {}
        for name in names:
            try:
                mbit = int((self._sys_class_net / name / "speed").read_text())
            except (OSError, ValueError):
                continue  # down, or no speed
            if mbit > 0:
                speeds[name] = mbit * _MBIT
        return speeds

    def _speeds_in(self, ns: str) -> dict[str, float]:
        # The speed is only in sysfs, which shows a namespace's interfaces only when
        # mounted from inside it: `ip netns exec` does that.
        text = self._run(["ip", "netns", "exec", ns, "sh", "-c", _SPEEDS], check=False)
        speeds: dict[str, float] = {}
        for line in (text or "").splitlines():
            path, _, value = line.partition(":")
            name = path.removesuffix("/speed")
            if value.strip().isdigit() and int(value) > 0:
                speeds[name] = int(value) * _MBIT
        return speeds

    def _namespace_counters(self) -> dict[Key, tuple[int, int]]:
        """The byte counters of every named namespace's interfaces."""
        if not self._namespaces:
            return {}
        found: dict[Key, tuple[int, int]] = {}
        failed: list[str] = []
        # A thread of its own enters each namespace and ends there: no other thread's
        # namespace ever changes.
        reader = threading.Thread(
            target=_read_counters, args=(self._netns_dir, self._namespaces, found, failed)
        )
        reader.start()
        reader.join()
        for ns in failed:
            found.update(self._link_counters(ns))
        return found

    def _link_counters(self, ns: str) -> dict[Key, tuple[int, int]]:
        out = self._run(["ip", "-n", ns, "-s", "-j", "link", "show"])
        counters = {}
        for link in _json_list(out):
            stats = link.get("stats64") or link.get("stats") or {}
            rx, tx = stats.get("rx", {}).get("bytes"), stats.get("tx", {}).get("bytes")
            if isinstance(link.get("ifname"), str) and isinstance(rx, int) and isinstance(tx, int):
                counters[(ns, link["ifname"])] = (rx, tx)
        return counters

    def _run(self, argv: list[str], check: bool = True) -> str | None:
        """stdout of a short run of `ip` or `tc`; None when it fails (and check is True)
        or is not installed."""
        if argv[0] in self._missing:
            return None
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
            )
        except FileNotFoundError:
            self._missing.add(argv[0])
            return None
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 or not check else None


def _read_counters(
    netns_dir: Path, namespaces: list[str], found: dict[Key, tuple[int, int]], failed: list[str]
) -> None:
    """In this thread: enters each namespace and reads its /proc/net/dev into `found`;
    the namespaces it cannot enter (not root, no setns) go to `failed`."""
    setns = _setns()
    for ns in namespaces:
        try:
            fd = os.open(netns_dir / ns, os.O_RDONLY)
        except OSError:
            continue  # deleted meanwhile
        try:
            if setns is None or setns(fd, _CLONE_NEWNET) != 0:
                failed.append(ns)
                continue
            with open("/proc/thread-self/net/dev", "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            failed.append(ns)
            continue
        finally:
            os.close(fd)
        for line in text.splitlines()[2:]:
            name, _, numbers = line.partition(":")
            fields = numbers.split()
            if len(fields) >= 9 and fields[0].isdigit() and fields[8].isdigit():
                found[(ns, name.strip())] = (int(fields[0]), int(fields[8]))


def _setns() -> Callable[[int, int], int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.setns
    except (OSError, AttributeError):
        return None


def _queue(now: Qdisc | None, before: Qdisc | None) -> dict[str, Any]:
    if now is None:
        return {}
    out: dict[str, Any] = {"net_qdisc_backlog_bytes": now.backlog}
    if before is not None and now.at > before.at:
        span = now.at - before.at
        out["net_qdisc_drops_s"] = max(0, now.drops - before.drops) / span
        out["net_qdisc_overlimits_s"] = max(0, now.overlimits - before.overlimits) / span
    return out


def _netns(ns: str) -> list[str]:
    return ["-n", ns] if ns else []


def _json_list(text: str | None) -> list[dict[str, Any]]:
    try:
        data = json.loads(text or "[]")
    except ValueError:
        return []
    return [x for x in data if isinstance(x, dict)] if isinstance(data, list) else []
