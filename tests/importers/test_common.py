from __future__ import annotations

import polars as pl
import pytest

from pinchpoint.importers.common import (
    ERROR_CLASSES,
    RequestRows,
    assign_steps,
    classify_error,
    level_steps,
    rfc3339_us,
    seconds_to_us,
)


def test_rfc3339_keeps_microseconds_of_nanosecond_times() -> None:
    assert rfc3339_us("2026-11-22T10:15:00.123456789+01:00") == 1_795_338_900_123_456
    assert rfc3339_us("2026-11-22T09:15:00.123456Z") == 1_795_338_900_123_456
    assert rfc3339_us("2026-11-22T09:15:00Z") == 1_795_338_900_000_000
    assert rfc3339_us("2026-11-22T04:15:00.5-0500") == 1_795_338_900_500_000
    with pytest.raises(ValueError):
        rfc3339_us("22/11/2026 09:15")


def test_seconds_are_read_exactly() -> None:
    assert seconds_to_us("1459452334.73") == 1_459_452_334_730_000
    assert seconds_to_us("0.00141596794128") == 1416
    assert seconds_to_us("0.0000004") == 0
    assert seconds_to_us("0.0000005") == 1
    assert seconds_to_us("2") == 2_000_000
    assert seconds_to_us("1.5e-3") == 1500
    for bad in ("nan", "inf", "x"):
        with pytest.raises(ValueError):
            seconds_to_us(bad)


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ('Get "http://h/": dial tcp 127.0.0.1:1: connect: connection refused', "connect_refused"),
        ("dial: i/o timeout", "connect_timeout"),
        ("dial tcp: lookup nohost: no such host", "connect_error"),
        ("read tcp 1->2: read: connection reset by peer", "reset"),
        ("context deadline exceeded (Client.Timeout exceeded while awaiting headers)", "timeout"),
        ("unexpected EOF", "closed"),
        ("something odd", "io"),
    ],
)
def test_error_classes(message: str, kind: str) -> None:
    assert classify_error(message) == kind
    assert kind in ERROR_CLASSES  # the run folder's documented classes


def test_steps_from_user_counts() -> None:
    steps = level_steps([10.0, 11.0, 12.0, 13.0], [2, 2, 4, 8], start_s=9.5, end_s=14.0)
    assert steps == [
        {"step": 0, "users": 2, "start": 9.5, "end": 12.0},
        {"step": 1, "users": 4, "start": 12.0, "end": 13.0},
        {"step": 2, "users": 8, "start": 13.0, "end": 14.0},
    ]
    rows = RequestRows()
    for start_s in (9.6, 11.9, 12.0, 13.5):
        rows.add(round(start_s * 1e6), 1000)
    requests = assign_steps(rows.frame(), steps)
    assert requests["step"].to_list() == [0, 0, 1, 2]
    assert requests["users"].to_list() == [2, 2, 4, 8]
    assert requests.schema["users"] == pl.UInt32
