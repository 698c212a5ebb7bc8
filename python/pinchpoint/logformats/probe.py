"""Timing lines of the pinchpoint probe middleware, one JSON object a line:

    {"ts": 1763800000.1, "method": "GET", "status": 200, "duration_s": 0.0102,
     "uri": "/sys_perf_check?cpu=2&pp_run=r&pp_users=4&pp_req=17"}

Text before the first `{` (a logging prefix) is ignored. A line longer than MAX_LINE_CHARS,
whose duration is not a number from 0 to MAX_DURATION_S or whose status is a number
outside 100-999 does not parse.
"""

import math
from dataclasses import dataclass

from pinchpoint.logformats.base import STATUS_CODES, FormatError, Record
from pinchpoint.logformats.parsing import FormatParser, after_prefix
from pinchpoint.logformats.values import duration


def _number(value: object) -> float | None:
    """A finite JSON number as a float, else None (an integer too large for a float too)."""
    # bool is an int subclass; true/false is not a time.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


@dataclass(frozen=True)
class ProbeParser(FormatParser):
    def read(self, line: str) -> Record | None:
        data = after_prefix(line)
        if data is None:
            return None
        seconds = duration(_number(data.get("duration_s")))
        uri = data.get("uri")
        if seconds is None or not isinstance(uri, str):
            return None
        status = data.get("status")
        if not isinstance(status, int) or isinstance(status, bool):
            status = None
        elif status not in STATUS_CODES:
            return None
        return Record(
            duration_s=seconds,
            status=status,
            ts=_number(data.get("ts")),
            target=uri,
        )


def parser_for(log_format: str | None) -> ProbeParser:
    if log_format is not None:
        raise FormatError("the probe log has a fixed format; do not give a log_format for it")
    return ProbeParser()
