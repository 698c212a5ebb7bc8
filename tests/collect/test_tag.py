import pytest

from pinchpoint.logformats.tag import (
    Tag,
    check_run_id,
    find_tag,
    header_value,
    parse_header,
    query_suffix,
)


def test_tag_in_request_line_is_found_among_other_query_fields() -> None:
    line = "GET /sys_perf_check?cpu=2&pp_run=20261122-101500-a1b2&pp_users=4&pp_req=17 HTTP/1.1"
    assert find_tag(line) == Tag("20261122-101500-a1b2", 4, 17)


def test_tag_in_bare_query_string_and_in_any_field_order() -> None:
    assert find_tag("pp_req=3&pp_users=8&pp_run=r.1_x") == Tag("r.1_x", 8, 3)


def test_tag_without_request_id_has_none_req_id() -> None:
    assert find_tag("/x?pp_run=r1&pp_users=2") == Tag("r1", 2, None)


@pytest.mark.parametrize(
    "text",
    [
        "/x?a=1",
        "/x?pp_run=r1&pp_req=5",  # no users
        "/x?pp_users=2&pp_req=5",  # no run
        "/x?pp_run=bad!id&pp_users=2&pp_req=5",  # run id outside the charset
        "/x?pp_run=&pp_users=2&pp_req=5",  # empty run id
        "/x?pp_run=r1&pp_users=two&pp_req=5",
        "/x?pp_run=r1&pp_users=2&pp_req=-5",
        "/x?pp_run=r1&pp_users=4294967296&pp_req=5",  # users beyond uint32
        "/x?pp_run=r1&pp_users=2&pp_req=18446744073709551616",  # req id beyond uint64
        "/x?xpp_run=r1&pp_users=2",  # another field whose name ends in pp_run
    ],
)
def test_missing_or_malformed_tag_is_none(text: str) -> None:
    assert find_tag(text) is None


def test_first_occurrence_of_a_field_wins() -> None:
    assert find_tag("/x?pp_run=a&pp_users=1&pp_req=2&pp_run=b") == Tag("a", 1, 2)


def test_header_parses_with_or_without_spaces() -> None:
    assert parse_header("run=r1; users=4; req=17") == Tag("r1", 4, 17)
    assert parse_header("req=17;run=r1;users=4") == Tag("r1", 4, 17)


@pytest.mark.parametrize("value", ["", "-", "run=r1", "run=r/1; users=4; req=1", "users=4; req=1"])
def test_header_missing_or_malformed_is_none(value: str) -> None:
    assert parse_header(value) is None


def test_built_query_and_header_parse_back() -> None:
    assert query_suffix("r1", 4, 17) == "pp_run=r1&pp_users=4&pp_req=17"
    assert find_tag("/p?" + query_suffix("r1", 4, 17)) == Tag("r1", 4, 17)
    assert parse_header(header_value("r1", 4, 17)) == Tag("r1", 4, 17)


@pytest.mark.parametrize("run_id", ["", "a b", "a&b", "é", "a/b"])
def test_building_with_bad_run_id_raises(run_id: str) -> None:
    with pytest.raises(ValueError, match="invalid run id"):
        query_suffix(run_id, 1, 1)
    with pytest.raises(ValueError, match="invalid run id"):
        check_run_id(run_id)


def test_open_loop_tag_carries_the_rate_instead_of_users() -> None:
    line = "GET /p?x=1&pp_run=r1&pp_rate=7.5&pp_req=17 HTTP/1.1"
    assert find_tag(line) == Tag("r1", 0, 17, 7.5)
    assert find_tag("/p?pp_run=r1&pp_rate=5&pp_req=3") == Tag("r1", 0, 3, 5.0)
    assert parse_header("run=r1; rate=0.833; req=9") == Tag("r1", 0, 9, 0.833)
    # A closed-loop tag has no rate.
    assert find_tag("/p?pp_run=r1&pp_users=4&pp_req=3").rate is None


@pytest.mark.parametrize(
    "text",
    [
        "/p?pp_run=r1&pp_rate=fast&pp_req=1",
        "/p?pp_run=r1&pp_rate=-5&pp_req=1",
        "/p?pp_run=r1&pp_rate=5.&pp_req=1",
        "/p?pp_run=r1&pp_rate=&pp_req=1",
        "/p?pp_run=r1&pp_rate=5&pp_req=x",
    ],
)
def test_malformed_rate_tag_is_none(text: str) -> None:
    assert find_tag(text) is None
