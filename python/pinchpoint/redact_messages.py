"""Secrets kept out of what a run says besides its plan: the reasons requests failed
(a check's expected text, a JSONPath's value, an error's text), warnings, run.json and
the load summary, as written to the run folder and printed.

What is secret (redact.py): the plan's secret header values and credentials, the tokens
and passwords read from the environment, the passwords of its URLs, and the values a
flow's feed gives to a variable used in a secret header. Redacted wherever they appear
in a message, as written or escaped as the engine quotes them (Rust's `{:?}`) or JSON
does, and a tail cut from one (a reason is cut at REASON_CHARS). A flow with a secret
variable (a feed column or a capture used in a secret header) can put values in its
reasons that are known only while it runs: its reasons' quoted texts are redacted
whole. Every URL's `user:password@` is redacted too.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pinchpoint.redact import MIN_PART, REDACTED, SECRET_HEADERS, secret_values, without_userinfo

if TYPE_CHECKING:
    from pinchpoint.plan.flows import Flow
    from pinchpoint.plan.model import Plan

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
    out = []
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif c == "\0":
            out.append("\\0")
        elif not c.isprintable():
            out.append(f"\\u{{{ord(c):x}}}")
        else:
            out.append(c)
    return "".join(out)


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
