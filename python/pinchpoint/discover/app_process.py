"""What the readers of PHP-FPM, Tomcat and Node.js share: the server's main process as
/proc shows it, and the servers on this host its processes call."""

from __future__ import annotations

import psutil

from pinchpoint.collect.servers.pool import ServerProcess, read_process
from pinchpoint.discover.listeners import Sockets, tree_of
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
    tier.next_hops = Sockets.read().called_by(tree_of(tier.pid))
    for hop in tier.next_hops:
        tier.notes.append(f"calls {hop}: its processes hold connections to it")
