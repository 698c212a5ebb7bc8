"""A network link with a fixed ceiling: a network namespace joined to this one by a veth
pair, both directions shaped by a token bucket (`tc qdisc ... tbf`).

    with ShapedLink(rate_bytes_s=2_000_000) as link:
        server = link.popen([sys.executable, "-m", "http.server", "8000",
                             "--bind", link.ns_address])
        ...  # fetch http://{link.ns_address}:8000/ from this namespace

The pair's two ends get the two addresses of a /30 of 10.213.0.0/16 that no interface
uses yet. Needs root, `ip` and `tc`. On exit the processes started in the namespace are
killed, and the veth pair and the namespace are deleted, also when setting up failed.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from pinchpoint.demo.errors import StackError
from pinchpoint.lifecycle import Started

POOL = ipaddress.IPv4Network("10.213.0.0/16")
LATENCY_MS = 50.0
# The smallest bucket: a few full frames, so the shaper never holds back a lone frame.
MIN_BURST_BYTES = 16 * 1024
_TIMEOUT_S = 10.0
_GONE_WAIT_S = 5.0


class ShapedLink(Started):
    """A network namespace whose veth link to this namespace carries at most
    `rate_bytes_s` bytes per second each way (tbf on both ends' egress).

    `burst_bytes` is the bucket (default: 20 ms of the rate, at least MIN_BURST_BYTES);
    `latency_ms` bounds how long a packet may wait in the shaper's queue before it is
    dropped.
    """

    def __init__(
        self,
        rate_bytes_s: int,
        burst_bytes: int | None = None,
        latency_ms: float = LATENCY_MS,
    ) -> None:
        if rate_bytes_s <= 0:
            raise ValueError(f"rate_bytes_s must be positive, got {rate_bytes_s}")
        self.rate_bytes_s = rate_bytes_s
        self.burst_bytes = burst_bytes or max(MIN_BURST_BYTES, rate_bytes_s // 50)
        self.latency_ms = latency_ms
        token = secrets.token_hex(4)
        self.netns = f"pinchpoint-{token}"
        # Interface names hold at most 15 characters.
        self.host_if = f"pp{token}h"
        self.ns_if = f"pp{token}n"
        self.host_address = ""
        self.ns_address = ""
        self._procs: list[subprocess.Popen[Any]] = []
        self._made = False

    @property
    def prefix(self) -> list[str]:
        """The argv prefix that runs a command inside the namespace."""
        return ["ip", "netns", "exec", self.netns]

    @property
    def link(self) -> str:
        """The shaped namespace end as resources.parquet names it in `net_link`."""
        return f"{self.netns}/{self.ns_if}"

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Starts `argv` inside the namespace (kwargs as for subprocess.Popen); it is
        killed on exit if still running."""
        if not self._made:
            raise RuntimeError("the link is not set up")
        proc = subprocess.Popen([*self.prefix, *argv], **kwargs)
        self._procs.append(proc)
        return proc

    def start(self) -> None:
        """Makes the namespace, the veth pair, the addresses and the shapers."""
        if self._made:
            raise RuntimeError("the link is already set up")
        self._made = True
        try:
            net = _free_subnet()
            host, peer = (str(a) for a in net.hosts())
            _ip("netns", "add", self.netns)
            _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
            _ip("link", "set", self.ns_if, "netns", self.netns)
            _ip("addr", "add", f"{host}/{net.prefixlen}", "dev", self.host_if)
            _ip("-n", self.netns, "addr", "add", f"{peer}/{net.prefixlen}", "dev", self.ns_if)
            _ip("link", "set", self.host_if, "up")
            _ip("-n", self.netns, "link", "set", self.ns_if, "up")
            _ip("-n", self.netns, "link", "set", "lo", "up")
            self._shape([], self.host_if)
            self._shape(["-n", self.netns], self.ns_if)
            self.host_address, self.ns_address = host, peer
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Kills what runs in the namespace, deletes the veth pair and the namespace, and
        waits (boundedly) until the pair is gone. Idempotent."""
        if not self._made:
            return
        self._made = False
        for proc in self._procs:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=_TIMEOUT_S)
        self._procs = []
        for pid in _netns_pids(self.netns):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        _ip("link", "del", self.host_if, check=False)
        _ip("netns", "del", self.netns, check=False)
        deadline = time.monotonic() + _GONE_WAIT_S
        while _exists(self.host_if) and time.monotonic() < deadline:
            time.sleep(0.05)

    def _shape(self, where: list[str], dev: str) -> None:
        _run(
            [
                "tc",
                *where,
                "qdisc",
                "add",
                "dev",
                dev,
                "root",
                "tbf",
                "rate",
                f"{self.rate_bytes_s * 8}bit",
                "burst",
                str(self.burst_bytes),
                "latency",
                f"{self.latency_ms:g}ms",
            ]
        )


def _free_subnet() -> ipaddress.IPv4Network:
    """The first /30 of POOL that overlaps no address of this namespace."""
    listed = json.loads(_run(["ip", "-j", "addr", "show"]) or "[]")
    used = [
        ipaddress.ip_interface(f"{a['local']}/{a['prefixlen']}").network
        for link in listed
        for a in link.get("addr_info", [])
        if a.get("family") == "inet"
    ]
    for net in POOL.subnets(new_prefix=30):
        if not any(net.overlaps(other) for other in used):
            return net
    raise StackError(f"no free /30 left in {POOL}")


def _netns_pids(netns: str) -> list[int]:
    out = _run(["ip", "netns", "pids", netns], check=False) or ""
    return [int(word) for word in out.split() if word.isdigit()]


def _exists(dev: str) -> bool:
    return _run(["ip", "link", "show", dev], check=False) is not None


def _ip(*args: str, check: bool = True) -> str | None:
    return _run(["ip", *args], check=check)


def _run(argv: list[str], check: bool = True) -> str | None:
    """stdout of argv; None when it fails and check is False."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        if check:
            raise StackError(f"{' '.join(argv)}: {e}") from e
        return None
    if done.returncode != 0:
        if check:
            raise StackError(f"{' '.join(argv)} failed: {done.stderr.strip()}")
        return None
    return done.stdout
