"""Format strings made of literal text and fields (nginx's `$variable`, Apache's `%D`,
gunicorn's `%(D)s`, Envoy's `%DURATION%`, uWSGI's `%(msecs)`, PostgreSQL's `%m`): the
string compiled into a regex with one named group per field (`compile_fields`), and the
parser that reads a line's fields by their keys (`FieldsParser`). Each format says only
what its fields are (its `FieldOf`) and what a record is made of (its `record`).
"""

import re
from abc import abstractmethod
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from typing import ClassVar

from pinchpoint.logformats.base import ANY, QUOTED, WORD, FormatError, Record, inside_quotes
from pinchpoint.logformats.parsing import FormatParser
from pinchpoint.logformats.template import TEXT_ANY, TEXT_QUOTED, TEXT_WORD, Template


@dataclass(frozen=True, slots=True)
class Field:
    """A field of a format string: the key its value is read by, its pattern, and its
    kind of text (None if typed; see `template.py`)."""

    key: str
    pattern: str
    kind: str | None


def text_pattern(quoted: bool, word: bool) -> tuple[str, str]:
    """The pattern of a text field and its kind: a quoted value inside a quoted part of the
    format, else a word (`word`: its values never hold spaces) or free text."""
    if quoted:
        return QUOTED, TEXT_QUOTED
    return (WORD, TEXT_WORD) if word else (ANY, TEXT_ANY)


def field_pattern(
    name: str, typed: Mapping[str, str], words: Container[str], quoted: bool
) -> tuple[str, str | None]:
    """The pattern of a field and its kind: `typed[name]` for a typed field (kind None),
    else a text field's (`text_pattern`; a word if `name` is one of `words`)."""
    if name in typed:
        return typed[name], None
    return text_pattern(quoted, name in words)


# What a format makes of one field's match, told whether the field is inside a quoted
# part of the format: a Field, or literal text (`%%` is `%`; "" for nothing).
FieldOf = Callable[[re.Match[str], bool], Field | str]


def add_fields(
    template: Template,
    fmt: str,
    field: re.Pattern[str],
    field_of: FieldOf,
    group_name: str,
    groups: dict[str, str],
) -> None:
    """Adds `fmt`'s literal text and fields (the matches of `field`) to `template`. A key's
    first field gets a named group, `group_name` formatted with the key and the number
    of groups before it (`d{index}`, `v_{key}`), added to `groups` (key -> group name);
    a later field of the same key only has to match."""
    literals = ""
    end = 0
    for match in field.finditer(fmt):
        literal = fmt[end : match.start()]
        template.literal(literal)
        literals += literal
        end = match.end()
        found = field_of(match, inside_quotes(literals))
        if isinstance(found, str):
            template.literal(found)
            literals += found
        elif found.key in groups:
            template.field(f"(?:{found.pattern})", found.kind)
        else:
            groups[found.key] = group_name.format(key=found.key, index=len(groups))
            template.field(f"(?P<{groups[found.key]}>{found.pattern})", found.kind)
    template.literal(fmt[end:])


def compile_fields(
    fmt: str, field: re.Pattern[str], field_of: FieldOf, group_name: str, no_field: str
) -> tuple[re.Pattern[str], dict[str, str]]:
    """The regex of a whole line in format `fmt`, and its groups by key (see `add_fields`);
    FormatError(`no_field`) when `fmt` has no field."""
    template = Template()
    groups: dict[str, str] = {}
    add_fields(template, fmt, field, field_of, group_name, groups)
    if not groups:
        raise FormatError(no_field)
    return re.compile(template.regex()), groups


@dataclass(frozen=True)
class FieldsParser(FormatParser):
    """Lines of a compiled format string: a line that `regex` matches whole gives the
    record of its fields' values by key; any other does not parse."""

    log_format: str
    regex: re.Pattern[str]
    groups: dict[str, str]  # field key -> its group name
    # The keys of the fields that give a duration.
    DURATION_KEYS: ClassVar[tuple[str, ...]] = ()

    @property
    def gives_duration(self) -> bool:
        return any(key in self.groups for key in self.DURATION_KEYS)

    def read(self, line: str) -> Record | None:
        match = self.regex.fullmatch(line)
        if match is None:
            return None
        return self.record({key: match.group(group) for key, group in self.groups.items()})

    @abstractmethod
    def record(self, values: dict[str, str]) -> Record | None:
        """The record of a line's field values (by key), or None if they are not one."""
