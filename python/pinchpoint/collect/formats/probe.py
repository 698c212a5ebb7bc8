"""Timing lines of the pinchpoint probe middleware, one JSON object a line:

    {"ts": 1763800000.1, "method": "GET", "status": 200, "duration_s": 0.0102,
     "uri": "/sys_perf_check?cpu=2&pp_run=r&pp_users=4&pp_req=17"}

Text before the first `{` (a logging prefix) is ignored.
"""

import json
import math
from dataclasses import dataclass

from pinchpoint.collect.formats.base import FormatError, Record


def _number(value: object) -> float | None:
    # bool is an int subclass; true/false is not a time.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


@dataclass(frozen=True)
class ProbeParser:
    @property
    def gives_duration(self) -> bool:
        return True

    def parse(self, line: str) -> Record | None:
        start = line.find("{")
        if start < 0:
            return None
        try:
            data = json.loads(line[start:])
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        duration = _number(data.get("duration_s"))
        uri = data.get("uri")
        if duration is None or not isinstance(uri, str):
            return None
        status = data.get("status")
        return Record(
            duration_s=duration,
            status=status if isinstance(status, int) and not isinstance(status, bool) else None,
            ts=_number(data.get("ts")),
            target=uri,
        )


def parser_for(log_format: str | None) -> ProbeParser:
    if log_format is not None:
        raise FormatError("the probe log has a fixed format; do not give a log_format for it")
    return ProbeParser()
