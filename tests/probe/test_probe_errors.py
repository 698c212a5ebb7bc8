"""Bad requests to the probe get 400 naming the parameter, or 405; nothing runs past the cap."""

from __future__ import annotations

import math
import time

import pytest
from probe_helpers import inner_asgi, inner_wsgi, probe_call

from pinchpoint.probe import ProbeASGI, ProbeWSGI

KINDS = ["wsgi", "asgi"]

BAD_QUERIES = [
    ("cpu=abc", "cpu", "not a number"),
    ("cpu=", "cpu", "missing value"),
    ("cpu", "cpu", "missing value"),
    ("cpu=-1", "cpu", "negative"),
    ("cpu=-0.5", "cpu", "negative"),
    ("cpu=nan", "cpu", "finite"),
    ("cpu=NaN", "cpu", "finite"),
    ("cpu=inf", "cpu", "finite"),
    ("cpu=-inf", "cpu", "finite"),
    ("cpu=1e999", "cpu", "finite"),
    ("cpu=1&cpu=2", "cpu", "more than once"),
    ("wait=abc", "wait", "not a number"),
    ("wait=-3", "wait", "negative"),
    ("wait=nan", "wait", "finite"),
    ("wait=infinity", "wait", "finite"),
    ("wait=1&wait=1", "wait", "more than once"),
    ("bytes=abc", "bytes", "whole number"),
    ("bytes=1.5", "bytes", "whole number"),
    ("bytes=-1", "bytes", "whole number"),
    ("bytes=", "bytes", "whole number"),
    ("bytes=1e3", "bytes", "whole number"),
    ("bytes=10485761", "bytes", "cap"),
    ("bytes=99999999999999999999999999", "bytes", "cap"),
    ("bytes=5&bytes=5", "bytes", "more than once"),
    ("foo=1", "'foo'", "unknown parameter"),
    ("cpu=1&Cpu=2", "'Cpu'", "unknown parameter"),
    ("cpu=600&wait=600", "cpu + wait", "cap of 1000 ms"),
    ("cpu=1001", "cpu + wait", "cap of 1000 ms"),
    ("wait=1000.5", "cpu + wait", "cap of 1000 ms"),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("query", "name", "problem"), BAD_QUERIES)
def test_bad_parameter_gives_400_naming_it(kind: str, query: str, name: str, problem: str) -> None:
    # A pause of this process can slow one try; a refusal after doing the work asked (a
    # second and more: cpu=600&wait=600, wait=infinity) is slow every time.
    for _ in range(3):
        started = time.perf_counter()
        result = probe_call(kind, query)
        if (seconds := time.perf_counter() - started) < 0.5:
            break
    assert result.status == 400
    assert result.text.startswith(f"bad parameter {name}: ")
    assert problem in result.text
    assert result.headers.get("Content-Type", result.headers.get("content-type")).startswith(
        "text/plain"
    )
    # Refused before any work: well under the default 10 ms of CPU.
    assert seconds < 0.5


@pytest.mark.parametrize("kind", KINDS)
def test_error_message_does_not_echo_a_long_value(kind: str) -> None:
    result = probe_call(kind, "cpu=" + "x" * 5000)
    assert result.status == 400
    assert len(result.body) < 200


@pytest.mark.parametrize("kind", KINDS)
def test_cap_is_max_ms_and_the_cap_itself_is_allowed(kind: str) -> None:
    assert probe_call(kind, "cpu=20&wait=30", max_ms=50).status == 200
    refused = probe_call(kind, "cpu=20&wait=31", max_ms=50)
    assert refused.status == 400
    assert "cpu + wait: 51 ms is above the cap of 50 ms" in refused.text


@pytest.mark.parametrize("kind", KINDS)
def test_default_cpu_counts_against_a_small_cap(kind: str) -> None:
    result = probe_call(kind, "", max_ms=5)
    assert result.status == 400
    assert "cpu + wait" in result.text
    assert probe_call(kind, "cpu=5", max_ms=5).status == 200


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_other_methods_on_the_probe_path_give_405(kind: str, method: str) -> None:
    result = probe_call(kind, "cpu=1", method=method)
    assert result.status == 405
    assert method in result.text
    assert result.headers.get("Allow", result.headers.get("allow")) == "GET, HEAD"
    assert result.body != b"inner app body"


@pytest.mark.parametrize("probe", [ProbeWSGI, ProbeASGI])
@pytest.mark.parametrize(
    "options",
    [{"path": "sys_perf_check"}, {"max_ms": -1}, {"max_ms": math.nan}, {"max_ms": math.inf}],
)
def test_bad_options_are_refused_when_mounting(probe: type, options: dict[str, object]) -> None:
    inner = inner_wsgi if probe is ProbeWSGI else inner_asgi
    with pytest.raises(ValueError):
        probe(inner, **options)


@pytest.mark.parametrize("probe", [ProbeWSGI, ProbeASGI])
def test_unwritable_log_path_is_refused_when_mounting(probe: type, tmp_path: object) -> None:
    inner = inner_wsgi if probe is ProbeWSGI else inner_asgi
    with pytest.raises(OSError):
        probe(inner, log_path=f"{tmp_path}/missing-dir/timing.log")
