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

Two text fields with nothing between them share a group when the second cannot hold
everything the first can (free text, then a word): the first may then need to end past
the start of the word. That is the one place left where the engine tries the ends of two
text fields against each other (quadratic in their length, on a line that does not match).
"""

import re

# Kinds of text field (see absorbs()).
TEXT_WORD, TEXT_ANY, TEXT_QUOTED, TEXT_ADDRESSES = "word", "any", "quoted", "addresses"


def absorbs(later: str, earlier: str) -> bool:
    """Whether a text field of kind `later` can hold all that one of kind `earlier` can, so
    that `earlier` right before it may end as early as it can."""
    return later == TEXT_ANY or (later == earlier and later != TEXT_ADDRESSES)


class Template:
    """The parts of a regex, added in the order of the format string."""

    def __init__(self) -> None:
        self._groups: list[list[str]] = [[]]
        # The kind of the text field just added, until a literal or typed field follows.
        self._text_before: str | None = None

    def literal(self, text: str) -> None:
        """Literal text of the format."""
        if text:
            self._groups[-1].append(re.escape(text))
            self._text_before = None

    def pattern(self, pattern: str) -> None:
        """A pattern of bounded length that is no field (such as `%` for `%%`)."""
        self._groups[-1].append(pattern)
        self._text_before = None

    def field(self, pattern: str, kind: str | None) -> None:
        """A field; `kind` is its kind of text (TEXT_WORD, TEXT_ANY...), or None for
        a typed field of bounded length. A text field starts a new atomic group."""
        before, self._text_before = self._text_before, kind
        starts_group = kind is not None and (before is None or absorbs(kind, before))
        if starts_group and self._groups[-1]:
            self._groups.append([])
        self._groups[-1].append(pattern)

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
