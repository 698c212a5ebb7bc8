"""The redaction of what a run says (reasons, warnings, run.json): a secret is taken out
however the message spells it (as written, quoted by the engine's `{:?}`, JSON-escaped),
cut at the end of a reason, or inside a URL's `user:password@`; a flow with a secret
variable has its reasons' quoted texts redacted whole; the rest of a message is kept.
Random secrets in random reasons and URLs (Hypothesis) never come out."""

from __future__ import annotations

import json
import string
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pinchpoint.plan.model import parse_plan
from pinchpoint.redact import (
    REASON_CHARS,
    REDACTED,
    Redactor,
    plan_redactor,
    redact_plan_text,
    rust_quoted,
    secret_values,
)

SECRET = 'sec"ret\\Tok\n-42'


def test_a_secret_is_redacted_as_written_quoted_by_the_engine_or_json_escaped() -> None:
    redactor = Redactor.of([SECRET])
    for spelt in (SECRET, rust_quoted(SECRET), json.dumps(SECRET)[1:-1]):
        message = f"f/login: check contains: {spelt} is not in the body"
        assert redactor.text(message) == f"f/login: check contains: {REDACTED} is not in the body"


def test_a_short_secret_is_redacted_only_where_it_is_a_quoted_value() -> None:
    redactor = Redactor.of(["pw1"])
    assert redactor.text('check contains: "pw1" is not in pw1x') == (
        f'check contains: "{REDACTED}" is not in pw1x'
    )


def test_a_reason_cut_inside_a_secret_loses_the_part_kept() -> None:
    secret = "tok-Abcdefghij-0123456789"
    message = ("x" * (REASON_CHARS - 12) + f'"{secret}"')[:REASON_CHARS]
    out = Redactor.of([secret]).text(message)
    assert out == "x" * (REASON_CHARS - 12) + f'"{REDACTED}'
    assert Redactor.of([secret]).text("ends with tok") == "ends with tok"  # not cut


def test_the_reasons_of_a_flow_with_a_secret_variable_have_their_quoted_texts_redacted() -> None:
    redactor = Redactor.of([], frozenset({"shop"}))
    got = redactor.text('shop/GET /t: check json $.t: "abc", expected "d\\"e')
    assert got == f'shop/GET /t: check json $.t: "{REDACTED}", expected "{REDACTED}"'
    other = 'cart/GET /t: check json $.t: "abc", expected "def"'
    assert redactor.text(other) == other


def test_a_urls_credentials_are_redacted_and_the_rest_kept() -> None:
    message = "agent b (https://me:p%40ss@10.0.0.5:7070/v1) failed; see http://host/x?u=a@b"
    assert Redactor.of([]).text(message) == (
        f"agent b (https://{REDACTED}@10.0.0.5:7070/v1) failed; see http://host/x?u=a@b"
    )


def test_json_data_has_every_string_redacted_keys_too() -> None:
    data = {"error_reasons": {"check": [f"x {SECRET}"]}, SECRET: 1, "n": [2, None]}
    assert Redactor.of([SECRET]).mapping(data) == {
        "error_reasons": {"check": [f"x {REDACTED}"]},
        REDACTED: 1,
        "n": [2, None],
    }


def test_a_plans_redactor_holds_its_secret_feed_values_and_flows(tmp_path: Path) -> None:
    feed = tmp_path / "keys.csv"
    feed.write_text("key,user\nfeedkey-AAAA1111,ann\nfeedkey-BBBB2222,bob\n")
    text = f"""\
[target]
url = "http://ann:pw-Secret-99@127.0.0.1:9/"
secret_headers = ["X-Key"]
[load]
users = 1
duration = "1s"
[[flow]]
name = "shop"
feed = {{ file = "{feed}" }}
[[flow.step]]
path = "/${{user}}"
headers = {{ X-Key = "${{key}}" }}
[[flow]]
name = "browse"
[[flow.step]]
path = "/"
"""
    plan = parse_plan(text)
    redactor = plan_redactor(plan)
    assert redactor.secret_flows == frozenset({"shop"})
    said = redactor.text("keys feedkey-AAAA1111 and feedkey-BBBB2222 of ann, pw-Secret-99")
    assert said == f"keys {REDACTED} and {REDACTED} of ann, {REDACTED}"
    stored = redact_plan_text(text, secret_values(plan))
    assert f'url = "http://{REDACTED}@127.0.0.1:9/"' in stored
    assert "pw-Secret" not in stored and "ann:" not in stored
    assert parse_plan(stored).target.port == 9


_SECRET_CHARS = string.ascii_letters + string.digits + "-_.~!$&'()*+,;=:%\"\\ \n\té€"
_URL_CHARS = string.ascii_letters + string.digits + "-_.~!$&'()*+,;=:%"
secrets = st.text(_SECRET_CHARS, min_size=6, max_size=60).filter(lambda s: s.strip() == s)
url_parts = st.text(_URL_CHARS, min_size=6, max_size=30)
FORMS = [
    "{flow}/step {n}: check contains: {q} is not in the body",
    "{flow}/step {n}: check json $.token: {q}, expected {q}",
    "{flow}/step {n}: hook: ValueError: bad header {raw}",
    "agent b: {json} refused",
]


@given(
    secret=secrets,
    form=st.sampled_from(FORMS),
    before=st.text(string.printable, max_size=250),
    flow=st.sampled_from(["shop", "browse"]),
    secret_flow=st.booleans(),
)
def test_a_random_secret_in_a_random_reason_never_comes_out(
    secret: str, form: str, before: str, flow: str, secret_flow: bool
) -> None:
    quoted = f'"{rust_quoted(secret)}"'
    spelt = form.format(flow=flow, n=3, q=quoted, raw=secret, json=json.dumps(secret)[1:-1])
    message = (before + spelt)[:REASON_CHARS]  # the engine cuts a reason so
    redactor = Redactor.of([secret], frozenset({flow} if secret_flow else ()))
    out = redactor.text(message)
    for spelling in (secret, rust_quoted(secret), json.dumps(secret)[1:-1]):
        assert spelling not in out
        if len(message) == REASON_CHARS:
            cut = [k for k in range(3, len(spelling)) if out.endswith(spelling[:k])]
            assert cut == [], (message, out)


@given(user=url_parts, password=url_parts, before=st.text(string.printable, max_size=80))
def test_a_random_urls_credentials_never_come_out(user: str, password: str, before: str) -> None:
    message = f"{before} http://{user}:{password}@10.1.2.3:8080/x?y=1 after"
    out = Redactor.of([]).text(message)
    assert f"{user}:{password}" not in out
    assert out.endswith(f"http://{REDACTED}@10.1.2.3:8080/x?y=1 after")
