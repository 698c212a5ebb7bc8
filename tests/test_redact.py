"""The plan text kept in the run folder: every string that decodes to a secret, however it
is spelt, and every comment holding one, is redacted; the rest is left as written and
still parses to the same plan but for the secret values."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pinchpoint.plan.model import parse_plan
from pinchpoint.redact import REDACTED, WITHHELD, private_dir, redact_plan_text, secret_values

TOKEN = "Bearer s3cr3t-Token_42"
BASE = """\
[target]
url = "http://127.0.0.1:9"   # the target
{target_extra}
[load]
users = 1
duration = "1s"

[[request]]
path = "/"
{headers}
"""


def plan_text(headers: str, target_extra: str = "") -> str:
    return BASE.format(headers=headers, target_extra=target_extra)


def escaped(text: str, form: str = "u") -> str:
    width = 4 if form == "u" else 8
    return "".join(f"\\{form}{ord(c):0{width}X}" for c in text)


SPELLINGS = {
    "basic": f'"{TOKEN}"',
    "literal": f"'{TOKEN}'",
    "escaped u": f'"{escaped(TOKEN)}"',
    "escaped U": f'"{escaped(TOKEN, "U")}"',
    "one escaped": f'"Bearer \\u0073{TOKEN[8:]}"',
    "multi-line basic": f'"""\n{TOKEN}"""',
    "multi-line continued": '"""Bearer s3cr3t-\\\n     Token_42"""',
    "multi-line literal": f"'''{TOKEN}'''",
}


@pytest.mark.parametrize("spelling", SPELLINGS.values(), ids=SPELLINGS.keys())
def test_a_secret_header_is_redacted_however_it_is_spelt(spelling: str) -> None:
    text = plan_text(f"headers = {{ Authorization = {spelling}, Accept = 'text/plain' }}")
    plan = parse_plan(text)
    assert plan.request[0].headers["Authorization"] == TOKEN
    stored = redact_plan_text(text, secret_values(plan))
    again = parse_plan(stored)
    assert again.request[0].headers == {"Authorization": REDACTED, "Accept": "text/plain"}
    assert "s3cr3t" not in stored and "\\u" not in stored.lower()
    assert stored.replace(f'"{REDACTED}"', spelling) == text  # nothing else changed


def test_cookies_proxy_authorization_and_named_headers_are_secret() -> None:
    text = plan_text(
        "[request.headers]\n"
        'cookie = "a=1; session=abcdef123456"\n'
        'Proxy-Authorization = "Basic dXNlcjpwYXNz"\n'
        'X-Api-Key = "key-0987654321"\n'
        'X-Other = "not secret"\n',
        target_extra='secret_headers = ["X-API-KEY"]',
    )
    stored = redact_plan_text(text, secret_values(parse_plan(text)))
    headers = tomllib.loads(stored)["request"][0]["headers"]
    assert headers == {
        "cookie": REDACTED,
        "Proxy-Authorization": REDACTED,
        "X-Api-Key": REDACTED,
        "X-Other": "not secret",
    }


def test_a_secret_elsewhere_in_the_text_goes_too() -> None:
    text = f"# Authorization: {TOKEN}\n# or, escaped: {escaped('s3cr3t-Token_42')}\n" + plan_text(
        f'headers = {{ Authorization = "{TOKEN}" }}\n'
        '[[request]]\npath = "/?t=s3cr3t-Token_42"  # same token\n'
    )
    stored = redact_plan_text(text, secret_values(parse_plan(text)))
    assert "s3cr3t" not in stored and "\\u" not in stored
    assert stored.count(f"# {REDACTED}") == 2 and "# same token" in stored
    assert parse_plan(stored).request[1].path == f"/?t={REDACTED}"


def test_tokens_read_from_the_environment_are_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PP_TEST_AGENT_T", "agent-token-value-1")
    monkeypatch.setenv("PP_TEST_PROM_P", "prometheus-pass-2")
    text = plan_text(
        "# agent-token-value-1 and prometheus-pass-2\n"
        '[[agent]]\nname = "b"\nurl = "http://127.0.0.1:7070"\ntoken_env = "PP_TEST_AGENT_T"\n'
        '[[prometheus]]\nurl = "http://127.0.0.1:9090"\nusername_env = "USER"\n'
        'password_env = "PP_TEST_PROM_P"\n[prometheus.series.host]\npreset = "node_exporter"\n'
    )
    secrets = secret_values(parse_plan(text))
    assert {"agent-token-value-1", "prometheus-pass-2"} <= set(secrets)
    stored = redact_plan_text(text, secrets)
    assert "agent-token" not in stored and "prometheus-pass" not in stored
    assert 'token_env = "PP_TEST_AGENT_T"' in stored


def test_a_plan_without_secrets_is_stored_as_written() -> None:
    text = plan_text('headers = { Accept = "text/plain", X-Trace = "1" }  # a comment')
    assert secret_values(parse_plan(text)) == []
    assert redact_plan_text(text, []) == text


def test_a_secret_that_cannot_be_taken_out_withholds_the_plan() -> None:
    # A key spelt as the secret: replacing it would make two equal keys.
    text = plan_text(
        f'headers = {{ Authorization = "{TOKEN}" }}\n'
        f'[request.extra]\n"{TOKEN}" = 1\n"{REDACTED}" = 2\n'
    )
    assert redact_plan_text(text, [TOKEN]) == WITHHELD


def test_a_private_dir_is_0700(tmp_path: Path) -> None:
    made = private_dir(tmp_path / "runs" / "r1")
    assert made.stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "runs").stat().st_mode & 0o777 == 0o700
    with pytest.raises(FileExistsError):
        private_dir(made)
