"""Times that servers log without a UTC offset, or with a zone abbreviation.

uWSGI (`ctime`), HAProxy (`06/Feb/2009:12:14:14.655`) and PostgreSQL (`... CET`) log
wall-clock times. pinchpoint collects on the machine that runs the tier, so a time
without an offset is read in this machine's local time zone.
"""

import re
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta, timezone

_MONTHS = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
        start=1,
    )
}
_UTC_NAMES = {"UTC", "GMT", "UCT", "Z", "ZULU", "UNIVERSAL", "ETC/UTC", "ETC/GMT"}
_OFFSET = re.compile(r"([+-])(\d{2})(?::?(\d{2}))?")


def scaled(text: str | None, exponent: int) -> float | None:
    """The decimal number `text` times 10**exponent, correctly rounded (`"0.018", -3` gives
    1.8e-05 where `0.018 / 1000` gives 1.7999999999999997e-05); None if not a number."""
    if text is None:
        return None
    try:
        return float(f"{text}e{exponent}")
    except ValueError:
        return None


def first_scaled(values: Mapping[str, str], keys: Iterable[tuple[str, int]]) -> float | None:
    """The first value of `values` at one of `keys` that is a number, scaled by the
    key's exponent (as `scaled`); None if there is none."""
    for key, exponent in keys:
        number = scaled(values.get(key), exponent)
        if number is not None:
            return number
    return None


def month_number(name: str) -> int | None:
    """1 to 12 for an English month abbreviation (any case), else None."""
    return _MONTHS.get(name[:3].lower()) if len(name) >= 3 else None


def local_timestamp(
    year: int, month: int, day: int, hour: int, minute: int, second: int, micro: int = 0
) -> float | None:
    """Unix seconds of a wall-clock time in this machine's local time zone, or None."""
    try:
        return datetime(year, month, day, hour, minute, second, micro).timestamp()
    except (ValueError, OverflowError):
        return None


def zone_offset(zone: str) -> timezone | None:
    """The zone of a logged zone name: UTC, a numeric offset (`+01`, `-0530`, `+05:30`),
    or this machine's local zone when the name is one of its abbreviations; else None."""
    if zone.upper() in _UTC_NAMES:
        return UTC
    match = _OFFSET.fullmatch(zone)
    if match is not None:
        sign, hours, minutes = match.groups()
        offset = timedelta(hours=int(hours), minutes=int(minutes or 0))
        return timezone(-offset if sign == "-" else offset)
    return None


def zoned_timestamp(when: datetime, zone: str) -> float | None:
    """Unix seconds of a naive wall-clock time logged with zone name `zone`, or None
    when the zone cannot be known (an abbreviation other than this machine's)."""
    tz = zone_offset(zone)
    if tz is not None:
        return when.replace(tzinfo=tz).timestamp()
    if zone in time.tzname:
        return when.timestamp()  # naive: local time
    return None
