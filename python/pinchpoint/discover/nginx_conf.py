"""nginx's config as nginx reads it: words, quotes and comments; directives in blocks; each
`include` replaced by the directives of the files it names, each directive with its file
and line.

The files come from a Source: the dump of `nginx -T` (every file nginx read, as it read
them) or the disk. An include loop, an unreadable file or one that does not parse gives a
warning and is left out; the rest is read.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import PurePath
from typing import Protocol

from pinchpoint.collect.servers import files
from pinchpoint.discover.configs import MOST_FILES, Unreadable, read_text, under


class ConfigError(Exception):
    """Text that is not an nginx config; the message says where."""


@dataclass
class Directive:
    """One directive: its name and arguments, where it is written, and the directives of its
    block (None for a simple directive ending in `;`)."""

    name: str
    args: list[str]
    file: str
    line: int
    block: list[Directive] | None = None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def all(self, name: str) -> list[Directive]:
        """The directives of this block called `name`, in order."""
        return [d for d in self.block or [] if d.name == name]

    def first(self, name: str) -> Directive | None:
        found = self.all(name)
        return found[0] if found else None


@dataclass(frozen=True)
class _Token:
    text: str
    line: int
    # `;`, `{` or `}` outside quotes.
    punct: bool = False


_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "t": "\t", "r": "\r", "n": "\n"}


def _unescape(text: str) -> str:
    """As nginx reads a word: `\\"`, `\\'`, `\\\\`, `\\t`, `\\r`, `\\n` escaped; any other
    backslash kept."""
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1 : i + 2] in _ESCAPES:
            out.append(_ESCAPES[text[i + 1]])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _tokens(text: str, file: str) -> Iterator[_Token]:
    i, line, n = 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif c == "#":
            end = text.find("\n", i)
            i = n if end == -1 else end
        elif c in ";{}":
            yield _Token(c, line, punct=True)
            i += 1
        elif c in "\"'":
            end = _closing_quote(text, i)
            if end == -1:
                raise ConfigError(f"{file}:{line}: unclosed quote")
            yield _Token(_unescape(text[i + 1 : end]), line)
            line += text.count("\n", i, end)
            i = end + 1
        else:
            end = _word_end(text, i, file, line)
            yield _Token(_unescape(text[i:end]), line)
            line += text.count("\n", i, end)
            i = end


def _closing_quote(text: str, start: int) -> int:
    quote, i = text[start], start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == quote:
            return i
        else:
            i += 1
    return -1


def _word_end(text: str, i: int, file: str, line: int) -> int:
    """Where the unquoted word starting at i ends: at a space, `;`, `{` or `}`, but a
    `${name}` and an escaped character are inside it."""
    n = len(text)
    while i < n and not text[i].isspace() and text[i] not in ";{}":
        if text[i] == "\\":
            i += 2
        elif text.startswith("${", i):
            close = text.find("}", i)
            if close == -1:
                raise ConfigError(f"{file}:{line}: unclosed ${{")
            i = close + 1
        else:
            i += 1
    return min(i, n)


Include = Callable[[Directive], list[Directive]]


def parse(text: str, file: str, include: Include | None = None) -> list[Directive]:
    """The directives of a config file's text; `include` gives the directives an `include`
    stands for (by default it stays as it is)."""
    return _block(_tokens(text, file), file, include, closing=False)


# Blocks nested deeper are refused: real configs nest a handful (http, server, location, if).
MOST_NESTED = 64


def _block(
    tokens: Iterator[_Token], file: str, include: Include | None, closing: bool, depth: int = 0
) -> list[Directive]:
    if depth > MOST_NESTED:
        raise ConfigError(f"{file}: blocks nested over {MOST_NESTED} deep")
    out: list[Directive] = []
    words: list[str] = []
    line = 0
    for token in tokens:
        if not token.punct:
            line = line if words else token.line
            words.append(token.text)
        elif token.text == ";" and words:
            directive = Directive(words[0], words[1:], file, line)
            out += include(directive) if include and directive.name == "include" else [directive]
            words = []
        elif token.text == "{" and words:
            out.append(
                Directive(
                    words[0], words[1:], file, line, _block(tokens, file, include, True, depth + 1)
                )
            )
            words = []
        elif token.text == "}" and closing and not words:
            return out
        else:
            raise ConfigError(f"{file}:{token.line}: unexpected {token.text!r}")
    if closing or words:
        raise ConfigError(f"{file}: unexpected end of file (a missing `}}` or `;`)")
    return out


class Source(Protocol):
    """Where config files are read from."""

    def read(self, path: str) -> str: ...

    def glob(self, pattern: str) -> list[str]: ...


class Disk:
    """The files on this host's disk."""

    def read(self, path: str) -> str:
        return read_text(path)

    def glob(self, pattern: str) -> list[str]:
        return files.glob(pattern)


_DUMP_HEADER = re.compile(r"^# configuration file (.+):$", re.MULTILINE)


class Dump:
    """The files `nginx -T` printed, each after a `# configuration file PATH:` line."""

    def __init__(self, text: str) -> None:
        parts = _DUMP_HEADER.split(text)
        self.files = {
            path: body.removeprefix("\n")
            for path, body in zip(parts[1::2], parts[2::2], strict=True)
        }

    @property
    def main(self) -> str | None:
        """The main config file: the first one printed."""
        return next(iter(self.files), None)

    def read(self, path: str) -> str:
        if path not in self.files:
            raise Unreadable(f"{path} is not in the output of nginx -T")
        return self.files[path]

    def glob(self, pattern: str) -> list[str]:
        return sorted(path for path in self.files if PurePath(path).match(pattern))


class Loader:
    """Reads a config and the files it includes from a source; what could not be read is in
    `warnings`, the files read in `files`."""

    def __init__(self, source: Source, conf_prefix: str) -> None:
        self.source = source
        self.conf_prefix = conf_prefix
        self.files: list[str] = []
        self.warnings: list[str] = []
        self._reading: list[str] = []

    def load(self, path: str, via: str | None = None) -> list[Directive]:
        """The directives of the file at path, its includes followed."""
        if path in self._reading:
            chain = " → ".join([*self._reading[self._reading.index(path) :], path])
            self.warnings.append(f"include loop left out at {via}: {chain}")
            return []
        if len(self.files) >= MOST_FILES:
            self.warnings.append(f"more than {MOST_FILES} config files: {path} not read")
            return []
        try:
            text = self.source.read(path)
        except Unreadable as e:
            self.warnings.append(f"{e}{f' (included at {via})' if via else ''}")
            return []
        return self.parse(text, path)

    def parse(self, text: str, path: str) -> list[Directive]:
        """The directives of text read from path (or given on the command line)."""
        self.files.append(path)
        self._reading.append(path)
        try:
            return parse(text, path, self._include)
        except ConfigError as e:
            self.warnings.append(f"{e}: the file is left out")
            return []
        finally:
            self._reading.pop()

    def _include(self, directive: Directive) -> list[Directive]:
        if len(directive.args) != 1:
            self.warnings.append(f"include at {directive.where} takes one file: left out")
            return []
        pattern = under(self.conf_prefix, directive.args[0])
        paths = self.source.glob(pattern) if glob.has_magic(pattern) else [pattern]
        return [d for path in paths for d in self.load(path, directive.where)]
