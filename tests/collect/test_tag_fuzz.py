"""Property-based fuzzing of the tag parser: any text gives a valid tag or None, never an
exception; numbers of any length are read by value (leading zeros allowed) and refused
past their column's range; built tags parse back."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pinchpoint.logformats.tag import (
    RUN_ID,
    Tag,
    find_tag,
    header_value,
    parse_header,
    query_suffix,
)

MAX_USERS = 2**32 - 1
MAX_REQ_ID = 2**64 - 1
run_ids = st.from_regex(RUN_ID, fullmatch=True)
# Decimal texts of any length: small, near the limits, thousands of digits, zero-padded.
decimals = st.one_of(
    st.integers(0, 2**70).map(str),
    st.integers(0, 10).map(lambda n: "9" * (n * 1000 + 1)),
    st.tuples(st.integers(0, 6000), st.integers(0, MAX_REQ_ID)).map(
        lambda zeros_n: "0" * zeros_n[0] + str(zeros_n[1])
    ),
)


def value(text: str) -> int | None:
    """The value of a decimal text, None when it has more digits than any id (which int()
    would refuse past 4,300)."""
    digits = text.lstrip("0") or "0"
    return int(digits) if len(digits) <= 30 else None


def assert_valid(tag: Tag | None) -> None:
    if tag is None:
        return
    assert RUN_ID.fullmatch(tag.run_id)
    assert 0 <= tag.users <= MAX_USERS
    assert tag.req_id is None or 0 <= tag.req_id <= MAX_REQ_ID


@given(text=st.text(max_size=400))
def test_any_text_gives_a_valid_tag_or_none(text: str) -> None:
    assert_valid(find_tag(text))
    assert_valid(find_tag("pp_run=r&pp_users=" + text))
    assert_valid(parse_header(text))
    assert_valid(parse_header("run=r; users=" + text))


@given(run=run_ids, users=decimals, req=decimals)
def test_numbers_of_any_length_are_read_by_value(run: str, users: str, req: str) -> None:
    users_n, req_n = value(users), value(req)
    expected = None
    if users_n is not None and req_n is not None and users_n <= MAX_USERS and req_n <= MAX_REQ_ID:
        expected = Tag(run, users_n, req_n)
    assert find_tag(f"/p?pp_run={run}&pp_users={users}&pp_req={req}") == expected
    assert parse_header(f"run={run}; users={users}; req={req}") == expected


@given(run=run_ids, users=st.integers(0, MAX_USERS), req=st.integers(0, MAX_REQ_ID))
def test_built_tags_parse_back(run: str, users: int, req: int) -> None:
    assert find_tag("GET /x?a=1&" + query_suffix(run, users, req) + " HTTP/1.1") == Tag(
        run, users, req
    )
    assert parse_header(header_value(run, users, req)) == Tag(run, users, req)
