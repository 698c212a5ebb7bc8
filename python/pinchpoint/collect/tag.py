"""The tag every request carries: run id, users of the step, request id.

In the URL query it is `pp_run=<run id>&pp_users=<users>&pp_req=<request id>`, in the
header `X-Pinchpoint: run=<run id>; users=<users>; req=<request id>`.

`req_id` is optional when parsing: a record holding `pp_run` and `pp_users` but no
`pp_req` still belongs to a run and a load level (tiers.parquet allows a null req_id).
A field that is present but malformed makes the whole tag invalid (None): a damaged
tag must never be matched to a run.
"""

import re
from dataclasses import dataclass

HEADER = "X-Pinchpoint"

RUN_ID = re.compile(r"[A-Za-z0-9_.-]+")
_DECIMAL = re.compile(r"[0-9]+")
_MAX_USERS = 2**32 - 1  # tiers.parquet: users is uint32
_MAX_REQ_ID = 2**64 - 1  # req_id is uint64

# A query field starts the text or follows a query separator, whitespace or a quote.
_QUERY_FIELD = re.compile(r"(?:^|(?<=[?&;\s\"']))pp_(run|users|req)=([^&;\s\"'#]*)")


@dataclass(frozen=True, slots=True)
class Tag:
    run_id: str
    users: int
    req_id: int | None


def check_run_id(run_id: str) -> str:
    """Return `run_id` if it matches `[A-Za-z0-9_.-]+`, else raise ValueError."""
    if not RUN_ID.fullmatch(run_id):
        raise ValueError(f"invalid run id {run_id!r}: use only letters, digits, '_', '.', '-'")
    return run_id


def find_tag(text: str) -> Tag | None:
    """The tag in a URI, query string or request line, or None if there is no valid one."""
    if "pp_run=" not in text:
        return None
    fields: dict[str, str] = {}
    for match in _QUERY_FIELD.finditer(text):
        fields.setdefault(match.group(1), match.group(2))
    return _tag(fields.get("run"), fields.get("users"), fields.get("req"))


def parse_header(value: str) -> Tag | None:
    """The tag in an `X-Pinchpoint` header value, or None if it is missing or invalid."""
    fields: dict[str, str] = {}
    for part in value.split(";"):
        key, sep, field = part.partition("=")
        if sep:
            fields.setdefault(key.strip().lower(), field.strip())
    return _tag(fields.get("run"), fields.get("users"), fields.get("req"))


def query_suffix(run_id: str, users: int, req_id: int) -> str:
    """The query fields of the tag, without a leading `?` or `&`."""
    _check(run_id, users, req_id)
    return f"pp_run={run_id}&pp_users={users}&pp_req={req_id}"


def header_value(run_id: str, users: int, req_id: int) -> str:
    """The value of the `X-Pinchpoint` header."""
    _check(run_id, users, req_id)
    return f"run={run_id}; users={users}; req={req_id}"


def _check(run_id: str, users: int, req_id: int) -> None:
    check_run_id(run_id)
    if not 0 <= users <= _MAX_USERS:
        raise ValueError(f"users out of range: {users}")
    if not 0 <= req_id <= _MAX_REQ_ID:
        raise ValueError(f"request id out of range: {req_id}")


def _tag(run_id: str | None, users: str | None, req_id: str | None) -> Tag | None:
    if run_id is None or users is None or not RUN_ID.fullmatch(run_id):
        return None
    users_n = _integer(users, _MAX_USERS)
    if users_n is None:
        return None
    if req_id is None:
        return Tag(run_id, users_n, None)
    req_n = _integer(req_id, _MAX_REQ_ID)
    if req_n is None:
        return None
    return Tag(run_id, users_n, req_n)


def _integer(text: str, maximum: int) -> int | None:
    if not _DECIMAL.fullmatch(text):
        return None
    value = int(text)
    return value if value <= maximum else None
