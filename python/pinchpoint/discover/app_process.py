"""What the readers of PHP-FPM, Tomcat and Node.js share: the server's main process as
/proc shows it, and the servers on this host its processes call."""

from __future__ import annotations

import psutil

from pinchpoint.collect.servers.pool import ServerProcess, read_process
from pinchpoint.discover.hops import add_next_hops
from pinchpoint.discover.tier import Tier


def server_process(pid: int, argv: list[str], environ: bool = False) -> ServerProcess:
    """The main process `pid` with its children counted; its environment's server
    variables only when `environ`."""
    try:
        children = len(psutil.Process(pid).children())
    except psutil.Error:
        children = 0
    return read_process(pid, children, environ) or ServerProcess(pid, argv, children=children)


def add_calls(tier: Tier) -> None:
    """The listeners on this host its processes hold connections to, as its next hops."""
    add_next_hops(tier)
