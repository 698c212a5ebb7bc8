"""Log formats: each turns one log line into a Record.

A format is a name and a factory taking the format string configured for the
tier (or None for pinchpoint's default); add one by adding a module and a row to
_FACTORIES. Its parser is a `FormatParser` (`parsing.py`: the length limit, then the
format's reading), a `FieldsParser` for a format string of fields (`fields.py`), and
says only what its fields are and what a record is made of.
"""

from collections.abc import Callable

from pinchpoint.logformats import (
    apache,
    envoy,
    gunicorn,
    haproxy,
    jsonlines,
    morgan,
    nginx,
    php_fpm,
    postgresql,
    probe,
    tomcat,
    uwsgi,
)
from pinchpoint.logformats.base import NOT_A_RECORD, FormatError, LineParser, Record

__all__ = [
    "NOT_A_RECORD",
    "FormatError",
    "LineParser",
    "Record",
    "get_parser",
    "known_formats",
]

_FACTORIES: dict[str, Callable[[str | None], LineParser]] = {
    "nginx": nginx.parser_for,
    "gunicorn": gunicorn.parser_for,
    "probe": probe.parser_for,
    "uwsgi": uwsgi.parser_for,
    "postgresql": postgresql.parser_for,
    "haproxy": haproxy.parser_for,
    "apache": apache.parser_for,
    "envoy": envoy.parser_for,
    "jsonlines": jsonlines.parser_for,
    "tomcat": tomcat.parser_for,
    "php-fpm": php_fpm.parser_for,
    "morgan": morgan.parser_for,
}


def known_formats() -> list[str]:
    return sorted(_FACTORIES)


def get_parser(format_name: str, log_format: str | None = None) -> LineParser:
    """The parser for a named format, compiled from `log_format` when the format takes one.

    Raises FormatError for an unknown name, a format string that does not compile,
    or one that logs no duration.
    """
    factory = _FACTORIES.get(format_name)
    if factory is None:
        raise FormatError(
            f"unknown log format {format_name!r}; known formats: {', '.join(known_formats())}"
        )
    return factory(log_format)
