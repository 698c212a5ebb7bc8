"""A discovery as JSON, as an agent sends it: each tier with its facts, who calls whom,
what could not be followed and where the walk left the agent's host."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pinchpoint.discover.tier import Address, Tier
from pinchpoint.discover.walk import Discovery

# More than an agent's walk can find (walk.MOST_TIERS): anything beyond is not a discovery.
MOST_ITEMS = 64
MOST_TEXT = 4096


class WireError(ValueError):
    """A discovery answer that is not one."""


def address_json(address: Address) -> dict[str, Any]:
    if address.unix is not None:
        return {"unix": str(address.unix)}
    return {"host": address.host, "port": address.port}


def address_from(data: object) -> Address:
    if not isinstance(data, dict):
        raise WireError("an address must be an object")
    if "unix" in data:
        return Address(unix=Path(_text(data["unix"])))
    port = data.get("port")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise WireError(f"port must be an integer from 1 to 65535, not {port!r}")
    return Address(_text(data.get("host")), port)


def to_json(found: Discovery) -> dict[str, Any]:
    return {
        "tiers": [_tier_json(t) for t in found.tiers],
        "calls": found.calls,
        "problems": found.problems,
        "notes": found.notes,
        "leaves": [{"from": caller, "address": address_json(a)} for caller, a in found.leaves],
    }


def from_json(data: object, url: str) -> Discovery:
    """The discovery an agent answered with; raises WireError."""
    if not isinstance(data, dict):
        raise WireError("the answer is not an object")
    found = Discovery(url)
    found.tiers = [_tier_from(t) for t in _items(data.get("tiers"))]
    calls = data.get("calls") or {}
    if not isinstance(calls, dict):
        raise WireError("calls must be an object")
    found.calls = {_text(k): [_text(c) for c in _items(v)] for k, v in calls.items()}
    found.problems = [_text(p) for p in _items(data.get("problems"))]
    found.notes = [_text(n) for n in _items(data.get("notes"))]
    for leaf in _items(data.get("leaves")):
        if not isinstance(leaf, dict):
            raise WireError("a leaf must be an object")
        caller = leaf.get("from")
        found.leaves.append(
            (None if caller is None else _text(caller), address_from(leaf.get("address")))
        )
    return found


def _tier_json(tier: Tier) -> dict[str, Any]:
    return {
        "name": tier.name,
        "role": tier.role,
        "pid": tier.pid,
        "pid_file": _path(tier.pid_file),
        "log_path": _path(tier.log_path),
        "log_format": tier.log_format,
        "log_format_string": tier.log_format_string,
        "next_hops": [address_json(a) for a in tier.next_hops],
        "slots": tier.slots,
        "notes": tier.notes,
        "warnings": tier.warnings,
    }


def _tier_from(data: object) -> Tier:
    if not isinstance(data, dict):
        raise WireError("a tier must be an object")
    pid, slots = data.get("pid"), data.get("slots")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        raise WireError(f"a tier's pid must be a positive integer, not {pid!r}")
    if slots is not None and (not isinstance(slots, int) or isinstance(slots, bool) or slots < 1):
        raise WireError(f"a tier's slots must be a positive integer, not {slots!r}")
    return Tier(
        name=_text(data.get("name")),
        role=_text(data.get("role")),
        pid=pid,
        pid_file=_maybe_path(data.get("pid_file")),
        log_path=_maybe_path(data.get("log_path")),
        log_format=_maybe_text(data.get("log_format")),
        log_format_string=_maybe_text(data.get("log_format_string")),
        next_hops=[address_from(a) for a in _items(data.get("next_hops"))],
        slots=slots,
        notes=[_text(n) for n in _items(data.get("notes"))],
        warnings=[_text(w) for w in _items(data.get("warnings"))],
    )


def _items(value: object) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MOST_ITEMS:
        raise WireError(f"expected a list of at most {MOST_ITEMS} items")
    return value


def _text(value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > MOST_TEXT:
        raise WireError(f"expected a string of 1 to {MOST_TEXT} characters, not {value!r:.80}")
    return value


def _maybe_text(value: object) -> str | None:
    return None if value is None else _text(value)


def _maybe_path(value: object) -> Path | None:
    return None if value is None else Path(_text(value))


def _path(path: Path | None) -> str | None:
    return None if path is None else str(path)
