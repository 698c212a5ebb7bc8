"""One sample of a database's backends as rows of db_activity.parquet.

A backend that waits for a lock is blocked by the head of a chain: behind the backend
that holds a row, the first waiter waits for its transaction (a `transactionid` lock) and
the next ones for the row itself (a `tuple` lock) held by that first waiter. Each waiter's
blocker is the backend at the head, found by following pg_blocking_pids to a backend
that does not wait for a lock. A wait for a transaction names no table: its table is one
both the waiter and that head hold a write lock on (the waiter's UPDATE took it before
it waited for the row).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pinchpoint.collect.database.normalize import normalize
from pinchpoint.collect.database.queries import Backend
from pinchpoint.logformats.postgresql import comment_tag
from pinchpoint.logformats.tag import Tag, find_tag

# The longest chain of blockers followed to its head.
MAX_CHAIN = 64


def head_of_chain(pid: int, backends: Mapping[int, Backend]) -> int | None:
    """The backend at the head of the chain that blocks `pid`: its first blocker, then
    that one's, while the blocker waits for a lock itself; None when nothing blocks it."""
    seen = {pid}
    blocker = None
    current = backends.get(pid)
    while current is not None and current.blockers and len(seen) < MAX_CHAIN:
        if current.blockers[0] in seen:  # a deadlock, until PostgreSQL breaks it
            break
        blocker = current.blockers[0]
        seen.add(blocker)
        current = backends.get(blocker)
        if current is None or not current.waits_for_lock:
            break
    return blocker


def waited_table(waiter: Backend, head: int | None, held: Mapping[int, set[str]]) -> str | None:
    """The table of the lock `waiter` waits for: its own relation, or for a transaction
    or a tuple without one, the table both it and the head hold a write lock on."""
    if waiter.lock_relation is not None:
        return waiter.lock_relation
    mine = held.get(waiter.pid, set())
    both = mine & held.get(head, set()) if head is not None else set()
    found = both or mine
    return ", ".join(sorted(found)) if found else None


def tag_of(query: str | None) -> Tag | None:
    """The run's tag in the statement's comment, if any."""
    if not query:
        return None
    text = comment_tag(query)
    return find_tag(text) if text is not None else None


def sample_rows(
    ts: float,
    component: str,
    backends: list[Backend],
    held: Mapping[int, set[str]],
    normalizer: Callable[[str], str] = normalize,
) -> list[dict[str, Any]]:
    """The rows of one sample: every backend, a waiter with its lock and blocker, each
    statement as `normalizer` names it (PostgreSQL's, or normalize_mysql)."""
    by_pid = {b.pid: b for b in backends}
    rows = []
    for b in backends:
        tag = tag_of(b.query)
        row: dict[str, Any] = {
            "ts": ts,
            "component": component,
            "pid": b.pid,
            "state": b.state,
            "wait_event_type": b.wait_event_type,
            "wait_event": b.wait_event,
            "statement": normalizer(b.query) if b.query else None,
            "tag_run": tag.run_id if tag else None,
            "tag_users": tag.users if tag else None,
            "tag_req": tag.req_id if tag else None,
        }
        if b.waits_for_lock:
            row.update(_waiting(b, by_pid, held, normalizer))
        rows.append(row)
    return rows


def _waiting(
    b: Backend,
    by_pid: Mapping[int, Backend],
    held: Mapping[int, set[str]],
    normalizer: Callable[[str], str],
) -> dict[str, Any]:
    head = head_of_chain(b.pid, by_pid)
    blocker = by_pid.get(head) if head is not None else None
    return {
        # Read a moment apart, pg_locks may no longer show the wait: its event names the type.
        "lock_type": b.lock_type or b.wait_event,
        "lock_mode": b.lock_mode,
        "lock_relation": waited_table(b, head, held),
        "blocker_pid": head,
        "blocker_statement": normalizer(blocker.query) if blocker and blocker.query else None,
        "blocker_state": blocker.state if blocker else None,
    }


def needs_tables(backends: list[Backend]) -> list[int]:
    """The backends whose held tables name a waited lock's table: the waiters without a
    relation and the heads of their chains."""
    by_pid = {b.pid: b for b in backends}
    pids: set[int] = set()
    for b in backends:
        if b.waits_for_lock and b.lock_relation is None:
            pids.add(b.pid)
            head = head_of_chain(b.pid, by_pid)
            if head is not None:
                pids.add(head)
    return sorted(pids)
