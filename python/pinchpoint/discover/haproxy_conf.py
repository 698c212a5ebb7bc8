"""HAProxy's config as HAProxy reads it: lines of words (quotes, backslashes, comments) in
sections (`global`, `defaults`, `frontend`, `backend`, `listen`, ...), from the files and
directories of its `-f` options, each line with its file and line number."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from pinchpoint.collect.servers.files import regular_files_in as files_in
from pinchpoint.discover.configs import MOST_FILES, Unreadable, read_text, under

SECTIONS = frozenset(
    {
        "global",
        "defaults",
        "frontend",
        "backend",
        "listen",
        "userlist",
        "peers",
        "resolvers",
        "mailers",
        "program",
        "http-errors",
        "ring",
        "cache",
        "log-forward",
        "crt-store",
        "traces",
    }
)
# Proxies: the sections that take a `defaults` section's settings.
PROXIES = frozenset({"frontend", "backend", "listen"})
_ESCAPES = {"r": "\r", "n": "\n", "t": "\t"}


@dataclass
class Line:
    words: list[str]
    file: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def starts(self, *words: str) -> bool:
        return self.words[: len(words)] == list(words)

    def text(self, start: int = 0) -> str:
        return " ".join(self.words[start:])


@dataclass
class Section:
    """A section: its kind and name, its first line, the lines in it, and (for a proxy) the
    `defaults` section it takes its settings from."""

    kind: str
    name: str
    header: Line
    lines: list[Line] = field(default_factory=list)
    defaults: Section | None = None

    def all(self, *words: str) -> list[Line]:
        """The section's lines starting with these words, in order."""
        return [line for line in self.lines if line.starts(*words)]

    def last(self, *words: str) -> Line | None:
        found = self.all(*words)
        return found[-1] if found else None

    def setting(self, *words: str) -> Line | None:
        """The last line starting with these words here, else in its defaults section."""
        found = self.last(*words)
        if found is None and self.defaults is not None:
            return self.defaults.last(*words)
        return found


def words(text: str) -> list[str]:
    """A config line's words: spaces split them outside quotes; `#` outside quotes starts a
    comment; a backslash escapes the next character outside single quotes."""
    out: list[str] = []
    word: list[str] = []
    in_word, quote, i = False, "", 0
    while i < len(text):
        c = text[i]
        i += 1
        if quote and c == quote:
            quote = ""
        elif c == "\\" and quote != "'" and i < len(text):
            word.append(_ESCAPES.get(text[i], text[i]))
            in_word, i = True, i + 1
        elif quote or not (c in "\"'#" or c.isspace()):
            word.append(c)
            in_word = True
        elif c in "\"'":
            quote, in_word = c, True
        elif c == "#":
            break
        elif in_word:
            out.append("".join(word))
            word, in_word = [], False
    if in_word:
        out.append("".join(word))
    return out


def parse(text: str, file: str, sections: list[Section] | None = None) -> list[Section]:
    """The sections of a file's text, added to `sections` (those of the files before it,
    whose last `defaults` the proxies here take)."""
    sections = sections if sections is not None else []
    current: Section | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        found = words(raw)
        if not found or found[0].startswith("."):  # conditional blocks are not evaluated
            continue
        line = Line(found, file, number)
        if found[0] in SECTIONS:
            current = Section(found[0], found[1] if len(found) > 1 else "", line)
            current.defaults = _defaults_of(current, sections)
            sections.append(current)
        elif current is not None:
            current.lines.append(line)
    return sections


def _defaults_of(section: Section, before: list[Section]) -> Section | None:
    """The defaults a proxy takes: the one named after `from`, else the last one above."""
    if section.kind not in PROXIES:
        return None
    header = section.header.words
    named = header[header.index("from") + 1] if "from" in header[:-1] else None
    for candidate in reversed(before):
        if candidate.kind == "defaults" and (named is None or candidate.name == named):
            return candidate
    return None


def config_files(paths: list[str], base: str) -> tuple[list[str], list[str]]:
    """The files HAProxy reads for its `-f` paths (a directory's `*.cfg`, in name order),
    relative ones taken from base; and warnings for the paths that cannot be listed."""
    files, warnings = [], []
    for path in (under(base, p) for p in paths):
        if not os.path.isdir(path):
            files.append(path)
            continue
        try:
            names = [n for n in files_in(path) if n.endswith(".cfg")]
        except OSError as e:
            warnings.append(f"cannot list {path}: {e.strerror}")
            continue
        files += [os.path.join(path, n) for n in names]
    return files, warnings


def load(files: list[str]) -> tuple[list[Section], list[str], list[str]]:
    """The sections of the files, in order; the files read; and warnings for those that
    cannot be."""
    sections: list[Section] = []
    read, warnings = [], []
    for path in files[:MOST_FILES]:
        try:
            parse(read_text(path), path, sections)
        except Unreadable as e:
            warnings.append(str(e))
            continue
        read.append(path)
    return sections, read, warnings
