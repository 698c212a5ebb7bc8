"""A format string (nginx's `log_format`, Apache's `LogFormat`...) compiled into a regex
whose match costs time linear in the line's length.

A format is literal text and fields. A text field (a word, a quoted value, free text)
can end at more than one place, and the regex engine tries its ends one after the other;
a typed field (a number of at most MAX_DIGITS digits, a status, a time) has a bounded
length. A regex that let the engine try every end of every text field against every end
of the others would cost time polynomial in the line's length on a line that does not
match (cubic for three fields).

So the regex is made of atomic groups, one per run of fields that starts at a text field:
the text field, then the literals and typed fields that follow it, up to the next text
field. Inside a group the engine backtracks as usual, so a text field ends at the first
place (in the engine's order) from which the typed fields and literals after it match.
Once a group has matched, no later group makes it try another end: each part of the line
is scanned about once. A line that would need a text field to end at a later place for
a later group to match does not parse; the Rust nginx matcher (`matcher.rs`) cuts its
search at the same places.

A text field that comes after another, with only literal text between them, shares its
group when the earlier one may need to end past it for the line to match (free text,
then a space and a word: the free text ends at the last space before the word); see
splits(). That is the one place left where the engine tries the ends of two text fields
against each other. Its scans do not overlap when the later one is a word and the literal
starts with a space. When the literal holds no space (`$http_a:$uri`), the free text could
end at each `:` of a long word and the word be scanned again from each: quadratic time on
a line that does not match. There the free text is written to end at the first `:` of a
run of non-space text only: a later `:` of the same run leaves the word ending where the
first one does, so it can match no more than the first, and each run is scanned once.
"""

import re
from collections.abc import Callable

from pinchpoint.logformats.base import ANY as ANY_LAZY
from pinchpoint.logformats.base import QUOTED, WORD

# A word before a space, and a quoted value before its quote, can end at one place only:
# there, possessive patterns match the same text as the lazy ones, several times faster.
_ONE_END: dict[str, tuple[Callable[[str], bool], str]] = {
    WORD: (lambda literal: literal[:1].isspace(), r"\S*+"),
    QUOTED: (lambda literal: literal[:1] == '"', r"(?:[^\"\\]++|\\.)*+"),
}

# Kinds of text field: a word, free text, a quoted value, a list of addresses, and a
# time that ends in a word (PostgreSQL's `%m`).
TEXT_WORD, TEXT_ANY, TEXT_QUOTED = "word", "any", "quoted"
TEXT_ADDRESSES, TEXT_STAMP = "addresses", "stamp"


def splits(earlier: str, literal: str, later: str) -> bool:
    """Whether a text field of kind `later`, after one of kind `earlier` and `literal`
    between them, may start a new group: when the earlier one can end at one place only
    (a word before a space, a quoted value before its quote), or when the later one can
    hold all that the earlier one and the literal can, so that the earlier one loses
    nothing by ending as early as it can."""
    first = literal[:1]
    if (earlier in (TEXT_WORD, TEXT_STAMP) and first.isspace()) or (
        earlier == TEXT_QUOTED and first == '"'
    ):
        return True
    if later == TEXT_ANY:
        return True
    if later == earlier == TEXT_WORD:
        return not any(c.isspace() for c in literal)
    if later == earlier == TEXT_QUOTED:
        return '"' not in literal and "\\" not in literal
    return False


class Template:
    """The parts of a regex, added in the order of the format string."""

    def __init__(self) -> None:
        self._groups: list[list[str]] = [[]]
        # The kind of the last text field and the literal text after it, until a typed
        # field follows.
        self._text_before: str | None = None
        self._literal = ""
        # Where the last text field's pattern is in the current group.
        self._text_at: int | None = None

    def literal(self, text: str) -> None:
        """Literal text of the format."""
        if not text:
            return
        if not self._literal and self._text_before is not None:
            self._one_end(text)
        self._groups[-1].append(re.escape(text))
        self._literal += text

    def _one_end(self, literal: str) -> None:
        """Makes the text field just added possessive if `literal` after it leaves it one
        place to end (the same matches, found faster)."""
        last = self._groups[-1][-1]
        for lazy, (ends_once, possessive) in _ONE_END.items():
            if ends_once(literal) and last.endswith(lazy + ")"):
                self._groups[-1][-1] = last.removesuffix(lazy + ")") + possessive + ")"

    def field(self, pattern: str, kind: str | None) -> None:
        """A field; `kind` is its kind of text (TEXT_WORD, TEXT_ANY...), or None for a
        typed field of bounded length. A text field starts a new atomic group, but where
        the text field before it may need to end past it (see splits())."""
        before, literal = self._text_before, self._literal
        self._text_before, self._literal = kind, ""
        starts_group = kind is not None and (before is None or splits(before, literal, kind))
        if (
            not starts_group
            and before == TEXT_ANY
            and kind == TEXT_WORD
            and literal
            and not any(c.isspace() for c in literal)
            and self._text_at is not None
        ):
            self._end_at_first_in_run(literal)
        if starts_group and self._groups[-1]:
            self._groups.append([])
        self._groups[-1].append(pattern)
        if kind is not None:
            self._text_at = len(self._groups[-1]) - 1

    def _end_at_first_in_run(self, literal: str) -> None:
        """Free text before `literal` and a word: it ends at the first `literal` of a run of
        non-space text (any run, the earliest that lets the line match)."""
        group = self._groups[-1]
        assert self._text_at is not None
        text = group[self._text_at]
        if not text.endswith(ANY_LAZY + ")"):
            return
        not_literal = rf"(?:(?!{re.escape(literal)})\S)*+"
        group[self._text_at] = text.removesuffix(ANY_LAZY + ")") + rf"(?:.*?\s)??{not_literal})"

    def groups(self) -> list[str]:
        """The atomic groups' contents, in order (none for an empty format)."""
        return ["".join(parts) for parts in self._groups if parts]

    def regex(self, tail: str = "") -> str:
        """The whole regex, with `tail` and the end of the line inside the last group."""
        return atomic(self.groups(), tail + r"\Z")


def atomic(groups: list[str], tail: str) -> str:
    """`groups` as atomic groups, `tail` inside the last one (its own group if none)."""
    if not groups:
        return f"(?>{tail})"
    *head, last = groups
    return "".join(f"(?>{group})" for group in head) + f"(?>{last}{tail})"
