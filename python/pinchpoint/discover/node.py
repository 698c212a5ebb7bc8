"""The Node.js tier: one process, or a cluster master whose workers serve, each an event
loop. Node.js and Express log no requests of their own, so the tier has no log until the
app logs with morgan in a format pinchpoint reads; the warning gives the line to add."""

from __future__ import annotations

import os

from pinchpoint.collect.servers import node
from pinchpoint.discover.app_process import add_calls, server_process
from pinchpoint.discover.tier import Address, Tier
from pinchpoint.discover.unknown import choose_processes

NAME = "node"
# A morgan format the `morgan` log format reads: its end, status, time until the response
# was sent, and the URL carrying the run's tag.
MORGAN_LINE = ':remote-addr [:date[iso]] ":method :url" :status :total-time'


def read(pid: int, argv: list[str], address: Address, path: str) -> Tier:
    """The Node.js tier whose first process is `pid`."""
    process = server_process(pid, argv)
    tier = Tier(NAME, "app_server", pid)
    pool = node.read(process, os.cpu_count() or 1, files=False)
    tier.notes.append(f"{pool.source}: no fixed pool of slots")
    choose_processes(tier, argv)
    log = process.path("access.log")
    tier.warnings.append(
        "Node.js logs no requests of its own: with Express, add `app.use(require('morgan')("
        f"'{MORGAN_LINE}', {{ stream: require('fs').createWriteStream('{log}', "
        "{ flags: 'a' }) }))` before its routes (npm install morgan), then give this "
        f'component [component.log] path = "{log}", format = "morgan", '
        f"log_format = '{MORGAN_LINE}'"
    )
    add_calls(tier)
    return tier
