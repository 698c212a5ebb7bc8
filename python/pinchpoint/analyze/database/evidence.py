"""What the database's samples say of a finding on that database, put in the finding
(`database`, in verdict.json) and in its evidence: for lock waits the locks, tables and
statements; for its CPU (or CPU quota) the statements by active time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from pinchpoint.analyze.causes import CAUSES
from pinchpoint.analyze.context import start_text
from pinchpoint.analyze.database.locks import lock_waits
from pinchpoint.analyze.database.samples import (
    DatabaseSamples,
    in_windows,
    onset_windows,
    read_samples,
)
from pinchpoint.analyze.database.statements import by_samples, by_stat_statements
from pinchpoint.analyze.findings import pct
from pinchpoint.analyze.thresholds import CARRIES
from pinchpoint.rundir.shapes import VerdictJson
from pinchpoint.rundir.view import RunView

# The locks and statements said in the evidence (verdict.json keeps up to five).
SAID = 3
# Words for the lock types PostgreSQL and InnoDB report.
LOCK_TYPES = {
    "transactionid": "a transaction id (the row another transaction updated)",
    "tuple": "a row",
    "relation": "the table",
    # InnoDB's (MySQL, MariaDB)
    "RECORD": "a row",
    "TABLE": "the table",
}


def add_database(verdict: VerdictJson, view: RunView) -> None:
    """Adds the database's inside to each finding on a sampled database component."""
    samples = read_samples(view)
    if samples is None:
        return
    sampled = samples.components()
    for finding in [verdict.get("bottleneck"), *(verdict.get("findings") or [])]:
        if not isinstance(finding, dict) or finding.get("component") not in sampled:
            continue
        inside = database_inside(samples, finding)
        if inside is not None:
            finding["database"] = inside
            finding["evidence"] = [*finding.get("evidence", []), *evidence_lines(finding)]
            if (sentence := lock_sentence(finding)) is not None:
                finding["summary"] = f"{finding.get('summary', '')} {sentence}".strip()
    _name_statement(verdict)


# A statement quoted in the headline is cut to this many characters.
HEADLINE_STATEMENT = 80


def _name_statement(verdict: VerdictJson) -> None:
    """The headline of a bottleneck carried by one request names the statement that holds
    most of the database's active time, where one does."""
    bottleneck = verdict.get("bottleneck")
    if not isinstance(bottleneck, dict) or not bottleneck.get("request"):
        return
    statements = (bottleneck.get("database") or {}).get("statements") or []
    if not statements or statements[0]["share"] < CARRIES:
        return
    text = str(statements[0]["statement"])
    if len(text) > HEADLINE_STATEMENT:
        text = text[: HEADLINE_STATEMENT - 1] + "…"
    verdict["headline"] = f"{verdict['headline']}: `{text}`"


def database_inside(samples: DatabaseSamples, finding: Mapping[str, Any]) -> dict[str, Any] | None:
    """The finding's `database`: its locks or its statements, from its onset step on."""
    cause = CAUSES.behind(str(finding.get("resource")))
    wanted = cause.database if cause is not None else None
    if wanted is None:
        return None
    component = str(finding["component"])
    windows = onset_windows(samples.windows, finding)
    activity = samples.activity.filter(pl.col("component") == component)
    inside: dict[str, Any] = {
        "from_step": windows[0].step if windows else None,
        "samples": in_windows(activity, windows)["ts"].n_unique(),
    }
    if wanted == "locks":
        inside.update(lock_waits(in_windows(activity, windows)))
        return inside
    statements = samples.statements
    if statements is not None:
        mine = statements.filter(pl.col("component") == component)
        found = by_stat_statements(mine, windows)
        if found is not None:
            return {**inside, "source": "pg_stat_statements", "statements": found}
    return {**inside, "source": "samples", "statements": by_samples(activity, windows)}


def evidence_lines(finding: Mapping[str, Any]) -> list[str]:
    """The finding's `database` in the evidence's words."""
    inside = finding["database"]
    name = finding["component"]
    since = f"from {start_text(finding)}"
    if "locks" in inside:
        return _lock_lines(name, since, inside)
    return _statement_lines(name, since, inside)


def _lock_lines(name: str, since: str, inside: dict[str, Any]) -> list[str]:
    if not inside["locks"]:
        return [f"{name}'s sampled backends {since}: none waited for a lock"]
    lines = [
        f"{name}'s backends in a transaction {since}: {pct(inside['waiting_share'])} of "
        f"{inside['backends']} sampled waited for a lock (pg_stat_activity, pg_locks)"
    ]
    for lock in inside["locks"][:SAID]:
        kind = LOCK_TYPES.get(str(lock["lock_type"]), str(lock["lock_type"]))
        holder = lock["holding"] or "a statement no longer seen"
        state = f" ({lock['holder_state']})" if lock.get("holder_state") else ""
        lines.append(
            f"{pct(lock['share'])} waited for {lock['mode'] or 'a lock'} on {kind} in table "
            f"{lock['relation'] or '?'}: `{lock['waiting']}` waits, held by `{holder}`{state}"
        )
    return lines


def _statement_lines(name: str, since: str, inside: dict[str, Any]) -> list[str]:
    if not inside["statements"]:
        return [f"{name}'s sampled backends {since}: none was seen running a statement"]
    source = "pg_stat_statements" if inside["source"] == "pg_stat_statements" else "sampled"
    said = "; ".join(
        f"`{s['statement']}` {pct(s['share'])} ({s['active_s']:.1f} s)"
        for s in inside["statements"][:SAID]
    )
    return [f"{name}'s statements by active time {since} ({source}): {said}"]


def lock_sentence(finding: Mapping[str, Any]) -> str | None:
    """The lock most waited for in one sentence, for the finding's summary."""
    locks = (finding.get("database") or {}).get("locks") or []
    if not locks:
        return None
    top = locks[0]
    kind = LOCK_TYPES.get(str(top["lock_type"]), str(top["lock_type"]))
    holder = top["holding"] or "a statement no longer seen"
    return (
        f"Most waits are for {top['mode'] or 'a lock'} on {kind} in table {top['relation']}: "
        f"`{top['waiting']}` waits while `{holder}` holds it."
    )
