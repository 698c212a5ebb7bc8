"""The commands' console, which escapes control characters in what it prints: a component's
name, a server's reply or a file's field holding an escape sequence would otherwise move the
cursor, recolour or retitle the terminal. Rich's own codes (styles, the live view's cursor
moves) are added after the text is escaped, and pass."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Span, Text

# C0 but newline and tab, DEL and C1, each as \xNN.
_ESCAPES = {
    code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0)) if chr(code) not in "\n\t"
}


def escape_controls(text: str) -> str:
    return text.translate(_ESCAPES)


def _clean(text: str) -> bool:
    return text.isprintable() or escape_controls(text) == text


class EscapingConsole(Console):
    """rich's Console, escaping text as it renders it: the one place text from outside
    reaches the terminal, whatever holds it (a line, a table's cell, the live view)."""

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        # A Text is escaped before it is laid out, so a table's column fits the escapes.
        if isinstance(renderable, Text) and not _clean(renderable.plain):
            renderable = _escaped(renderable)
        for segment in super().render(renderable, options):
            if segment.control or _clean(segment.text):
                yield segment
            else:
                yield Segment(escape_controls(segment.text), segment.style)


def _escaped(text: Text) -> Text:
    """`text` escaped, its styles over the same characters."""
    at = [0]
    for char in text.plain:
        at.append(at[-1] + len(escape_controls(char)))
    return Text(
        escape_controls(text.plain),
        style=text.style,
        justify=text.justify,
        overflow=text.overflow,
        no_wrap=text.no_wrap,
        end=text.end,
        tab_size=text.tab_size,
        spans=[Span(at[s.start], at[min(s.end, len(text.plain))], s.style) for s in text.spans],
    )
