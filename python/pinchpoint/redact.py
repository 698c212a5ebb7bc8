"""What of a plan is secret, and keeping it out of the run folder.

A plan's secrets are the values of its secret request headers (Authorization, Cookie
and Proxy-Authorization, and those [target] secret_headers names) and the tokens and
passwords of its agents and Prometheus servers, which the plan only names by their
environment variables (token_env, password_env), and the user and password of a URL
(`http://user:password@host`). The engine sends the headers as written; the run folder
never holds them:

- its plan.toml is the plan's text with every string that decodes to a secret, however
  it is spelt (a TOML escape such as `\\u0073`, a literal or multi-line string), made
  `"<redacted>"` (a string holding one has it replaced by `<redacted>`), and every
  comment holding one made `# <redacted>`, and a URL's `user:password@` made
  `<redacted>@` wherever it is written;
- it is made with a umask of 077: the folder (and a runs folder made for it) is 0700,
  each file written into it 0600.

The same secrets are kept out of what a run says besides its plan: the reasons requests
failed (a check's expected text, a JSONPath's value, an error's text), warnings, run.json
and the load summary, as written to the run folder and printed (`Redactor`). Besides the
plan's, the values a flow's feed gives to a variable used in a secret header are secret.
They are redacted wherever they appear in a message, as written or escaped as the engine
quotes them (Rust's `{:?}`) or JSON does, and a tail cut from one (a reason is cut at
REASON_CHARS). A flow with a secret variable (a feed column or a capture used in a secret
header) can put values in its reasons that are known only while it runs: its reasons'
quoted texts are redacted whole. Every URL's `user:password@` is redacted too.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from pinchpoint.plan.flows import Flow
    from pinchpoint.plan.model import Plan

# Headers whose values are always secret (lower case).
SECRET_HEADERS = ("authorization", "cookie", "proxy-authorization")
REDACTED = "<redacted>"
# A secret this long is also redacted where it is part of a longer string; a shorter one
# only where a string is exactly it.
MIN_PART = 6
# What is written instead of a plan whose secrets could not be taken out of its text.
WITHHELD = (
    "# The plan is withheld: it holds a secret (a secret request header, or an agent's or\n"
    "# Prometheus server's token) that could not be redacted from its text.\n"
)
# A URL's user information: `scheme://` then `user:password@` (up to the last `@` before
# the path, query or fragment); the scheme is kept, the rest made REDACTED.
USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s/?#]*)@")
# A TOML basic string's escapes, to read the spelling of a secret in a comment.
_ESCAPE = re.compile(r"\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|x[0-9A-Fa-f]{2}|.)", re.DOTALL)
_SIMPLE = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", "e": "\x1b"}


def secret_values(plan: Plan) -> list[str]:
    """Every secret of the plan: its secret headers' values (and their credential parts:
    the value after `Bearer `, each cookie's value), the tokens and passwords its agents
    and Prometheus servers read from the environment, and its databases' DSNs and Redis
    URLs. Longest
    first."""
    names = {*SECRET_HEADERS, *(n.lower() for n in plan.target.secret_headers)}
    found: set[str] = set()
    headers = [r.headers for r in plan.request] + [s.headers for f in plan.flow for s in f.step]
    for request_headers in headers:
        for name, value in request_headers.items():
            if name.lower() in names and value and "${" not in value:
                found.add(value)
                found.update(p for p in _parts(value) if len(p) >= MIN_PART)
    variables = [a.token_env for a in plan.agent]
    variables += [v for p in plan.prometheus for v in (p.token_env, p.password_env)]
    variables += [
        c.database.dsn_env for c in plan.component if c.database is not None and c.database.dsn_env
    ]
    servers = [c.redis.url_env for c in plan.component if c.redis is not None]
    for variable in [*variables, *servers]:
        if variable and (value := os.environ.get(variable, "").strip()):
            found.add(value)
            # A URL's password alone (mysql://, redis://), as a client's error may quote it.
            found.update(p for p in url_credentials(value) if len(p) >= MIN_PART)
    urls = [plan.target.url, *(a.url for a in plan.agent), *(p.url for p in plan.prometheus)]
    found.update(p for url in urls for p in url_credentials(url))
    return sorted(found, key=lambda s: (-len(s), s))


def url_credentials(url: str) -> list[str]:
    """The password in a URL's `user:password@`, as written and percent-decoded."""
    from urllib.parse import unquote, urlsplit

    try:
        password = urlsplit(url).password
    except ValueError:
        return []
    return [password, unquote(password)] if password else []


def without_userinfo(text: str) -> str:
    """The text with every URL's `user:password@` made `<redacted>@`."""
    return USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)


def _parts(value: str) -> list[str]:
    """The credentials in a header value: after the scheme (`Bearer x`), and each
    `name=value` pair's value (cookies)."""
    parts = [value.split(None, 1)[1].strip()] if len(value.split(None, 1)) == 2 else []
    for piece in re.split(r"[;,]", value):
        if "=" in piece:
            parts.append(piece.split("=", 1)[1].strip().strip('"'))
    return parts


def redact_plan_text(text: str, secrets: list[str]) -> str:
    """The plan text with every string or comment holding a secret redacted; WITHHELD
    when a secret would still be found in it, as text or as a decoded string."""
    if not secrets and not _has_userinfo(text):
        return text
    out: list[str] = []
    at = 0
    for start, end, kind in _tokens(text):
        out.append(text[at:start])
        piece = text[start:end]
        if kind == "string" and _holds(value := _decode(piece), secrets):
            piece = _basic_string(
                REDACTED if value is None else without_userinfo(_without(value, secrets))
            )
        elif kind == "comment" and (_holds(piece, secrets) or _holds(_unescape(piece), secrets)):
            piece = f"# {REDACTED}"
        elif kind == "comment" and _has_userinfo(piece):
            piece = without_userinfo(piece)
        elif kind == "comment" and _has_userinfo(_unescape(piece)):
            piece = f"# {REDACTED}"
        elif kind == "string" and value is not None and _has_userinfo(value):
            piece = _basic_string(without_userinfo(value))
        out.append(piece)
        at = end
    out.append(text[at:])
    redacted = "".join(out)
    for secret in secrets:
        if len(secret) >= MIN_PART:
            redacted = redacted.replace(secret, REDACTED)
    return redacted if _clean(redacted, secrets) else WITHHELD


def _has_userinfo(text: str) -> bool:
    """Whether a URL in the text has a user or password not yet redacted."""
    return any(m.group(2) not in ("", REDACTED) for m in USERINFO.finditer(text))


def _holds(value: str | None, secrets: list[str]) -> bool:
    if value is None:  # a string that does not decode: taken for a secret, to be safe
        return True
    return any(s == value or (len(s) >= MIN_PART and s in value) for s in secrets)


def _without(value: str, secrets: list[str]) -> str:
    """The string with each secret in it (longest first) replaced; REDACTED if it is one."""
    if value in secrets:
        return REDACTED
    for secret in secrets:
        if len(secret) >= MIN_PART:
            value = value.replace(secret, REDACTED)
    return value


def _basic_string(value: str) -> str:
    """A TOML basic string (double quotes) that decodes to `value`."""
    return '"' + _escaped(value, _toml_control) + '"'


def _toml_control(c: str) -> str | None:
    return f"\\u{ord(c):04X}" if c < " " or c == "\x7f" else None


def _escaped(text: str, spell: Callable[[str], str | None]) -> str:
    """The text with quotes and backslashes escaped, and any other character that `spell`
    spells (not None) as it does."""
    return "".join("\\" + c if c in '"\\' else (spell(c) or c) for c in text)


def _clean(text: str, secrets: list[str]) -> bool:
    """No secret in the text, and none in any key or string it decodes to."""
    if any(s in text for s in secrets if len(s) >= MIN_PART):
        return False
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        return False
    strings = list(_strings(data))
    return not any(_holds(s, secrets) or _has_userinfo(s) for s in strings)


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _decode(literal: str) -> str | None:
    """What a TOML string literal (with its quotes) decodes to; None if it does not."""
    one_line = len(literal) >= 2 and literal[0] == literal[-1] and literal[:3] != literal[0] * 3
    if one_line and "\\" not in literal:
        return literal[1:-1]  # nothing to decode
    try:
        value = tomllib.loads(f"v = {literal}")["v"]
    except (tomllib.TOMLDecodeError, ValueError, KeyError):
        return None
    return value if isinstance(value, str) else None


def _unescape(text: str) -> str:
    """A comment read as if it were a basic string's content, escapes decoded."""

    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        if code[0] in "uUx" and len(code) > 1:
            try:
                return chr(int(code[1:], 16))
            except (ValueError, OverflowError):
                return m.group(0)
        return _SIMPLE.get(code, code)

    return _ESCAPE.sub(one, text)


def _tokens(text: str) -> Iterator[tuple[int, int, str]]:
    """The string literals (`string`, quotes included) and comments (`comment`, from
    `#` to the end of the line) of a TOML text, as (start, end, kind)."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            end = text.find("\n", i)
            end = n if end < 0 else end
            yield i, end, "comment"
            i = end
        elif c in "\"'":
            end = _string_end(text, i)
            yield i, end, "string"
            i = end
        else:
            i += 1


def _string_end(text: str, start: int) -> int:
    """Where the string literal starting at `start` ends (after its closing quotes)."""
    quote = text[start]
    n = len(text)
    if text.startswith(quote * 3, start):
        i = start + 3
        while i < n:
            if quote == '"' and text[i] == "\\":
                i += 2
            elif text.startswith(quote * 3, i):
                end = i + 3
                # Up to two more quotes before the closing three belong to the string.
                while end < n and end - i < 5 and text[end] == quote:
                    end += 1
                return end
            else:
                i += 1
        return n
    i = start + 1
    while i < n and text[i] != "\n":
        if quote == '"' and text[i] == "\\":
            i += 2
        elif text[i] == quote:
            return i + 1
        else:
            i += 1
    return min(i, n)


@contextmanager
def private_files() -> Iterator[None]:
    """Files and folders made inside are for this user only (umask 077); usable as a
    decorator. The umask is the process's: files other threads make meanwhile are
    private too."""
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


def private_dir(path: Path, exist_ok: bool = False) -> Path:
    """Makes the folder `path` (and its missing parents) for this user only: 0700. An
    existing empty folder is made 0700 too; one that holds files is left as it is."""
    with private_files():
        path.mkdir(mode=0o700, parents=True, exist_ok=exist_ok)
    if not any(path.iterdir()):
        path.chmod(0o700)
    return path


# The engine cuts a reason to this many characters (crates/pinchpoint-engine outcome.rs).
REASON_CHARS = 200
# A cut message's tail this long that begins a secret is taken for the secret, cut.
MIN_TAIL = 3
# A reason of a flow's step: `<flow>/<step>: <why>`, the step as the run's tables name it.
_FLOW_REASON = re.compile(r"^([A-Za-z0-9_-]+)/")
# A quoted text in a reason, as Rust's `{:?}` writes it (its end may be cut off).
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?$)')


@dataclass(frozen=True)
class Redactor:
    """Redacts secrets from messages: `text` for one, `value` for JSON-like data."""

    # Each spelling of a secret to find, with what replaces it.
    spellings: dict[str, str]
    # Their lengths, longest first: where a message is scanned.
    lengths: tuple[int, ...]
    # The secrets of MIN_PART characters or more, sorted: a cut tail is looked up here.
    long: tuple[str, ...]
    # Flows whose reasons' quoted texts are redacted whole.
    secret_flows: frozenset[str]

    @classmethod
    def of(cls, secrets: list[str], secret_flows: frozenset[str] = frozenset()) -> Redactor:
        spellings: dict[str, str] = {}
        for secret in secrets:
            for spelt in {secret, rust_quoted(secret), json.dumps(secret)[1:-1]}:
                if len(secret) >= MIN_PART:
                    spellings[spelt] = REDACTED
                spellings[f'"{spelt}"'] = f'"{REDACTED}"'
                spellings[f"'{spelt}'"] = f"'{REDACTED}'"
        lengths = tuple(sorted({len(s) for s in spellings}, reverse=True))
        long = tuple(sorted(s for s, put in spellings.items() if put == REDACTED))
        return cls(spellings, lengths, long, secret_flows)

    def text(self, message: str) -> str:
        """The message with every secret, cut secret and URL credential redacted."""
        match = _FLOW_REASON.match(message)
        if match is not None and match.group(1) in self.secret_flows:
            message = match.group(0) + _QUOTED.sub(f'"{REDACTED}"', message[match.end() :])
        redacted = self._whole(without_userinfo(message))
        return self._cut_tail(redacted) if len(message) >= REASON_CHARS else redacted

    def value(self, data: object) -> object:
        """JSON-like data (dicts, lists, strings) with every string (keys too) redacted."""
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, dict):
            return {self.value(k): self.value(v) for k, v in data.items()}
        if isinstance(data, list | tuple):
            return [self.value(v) for v in data]
        return data

    def mapping(self, data: dict[str, Any]) -> dict[str, Any]:
        """A JSON object (run.json, collection.json) with every string redacted."""
        return cast(dict[str, Any], self.value(data))

    def _whole(self, message: str) -> str:
        if not self.spellings:
            return message
        out: list[str] = []
        i, n = 0, len(message)
        while i < n:
            for length in self.lengths:
                if i + length <= n and (put := self.spellings.get(message[i : i + length])):
                    out.append(put)
                    i += length
                    break
            else:
                out.append(message[i])
                i += 1
        return "".join(out)

    def _cut_tail(self, message: str) -> str:
        """The message with a tail that begins a secret (the rest cut off) redacted."""
        top = min(len(message), max(self.lengths, default=0))
        for k in range(top, MIN_TAIL - 1, -1):
            tail = message[-k:]
            at = bisect.bisect_left(self.long, tail)
            if at < len(self.long) and self.long[at].startswith(tail):
                return message[:-k] + REDACTED
        return message


def rust_quoted(text: str) -> str:
    """The text as Rust's `{:?}` writes a string, without its quotes."""
    return _escaped(text, _rust_escape)


_RUST_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}


def _rust_escape(c: str) -> str | None:
    if c in _RUST_ESCAPES:
        return _RUST_ESCAPES[c]
    return None if c.isprintable() else f"\\u{{{ord(c):x}}}"


def plan_redactor(plan: Plan) -> Redactor:
    """The redactor of a plan's secrets (redact.secret_values and its feeds' secret
    values) and of the flows that have a secret variable."""
    names = {*SECRET_HEADERS, *(n.lower() for n in plan.target.secret_headers)}
    secrets = set(secret_values(plan))
    flows: set[str] = set()
    for flow in plan.flow:
        variables = secret_variables(flow, names)
        if variables:
            flows.add(flow.name)
        secrets.update(_feed_values(flow, variables))
    return Redactor.of(sorted(secrets), frozenset(flows))


def secret_variables(flow: Flow, names: set[str]) -> set[str]:
    """The variables a flow uses in the value of a secret header (`names`, lower case)."""
    from pinchpoint.plan.flows import variables_in

    return {
        variable
        for step in flow.step
        for name, value in step.headers.items()
        if name.lower() in names
        for variable in variables_in(value)
    }


def _feed_values(flow: Flow, variables: set[str]) -> set[str]:
    """The values the flow's feed gives to any of `variables`."""
    if flow.feed is None or not variables & set(flow.feed.columns()):
        return set()
    data = flow.feed.read()
    columns = [i for i, c in enumerate(data.columns) if c in variables]
    return {row[i] for row in data.rows for i in columns if row[i]}
