"""The matrix's plans with their components replaced by what `pinchpoint init` finds."""

from __future__ import annotations

from pinchpoint_lab.matrix.run import without_components

PLAN = """[target]
url = "http://127.0.0.1:1"

[[request]]
path = "/x"

[[component]]
name = "nginx"
calls = ["gunicorn"]
[component.log]
path = "a.log"
format = "nginx"
[component.process]
pid_file = "n.pid"

[[otlp]]
listen = "127.0.0.1:4318"

[[component]]
name = "gunicorn"
"""


def test_only_the_component_tables_are_left_out() -> None:
    left = without_components(PLAN)
    assert "[[component]]" not in left and "[component." not in left
    assert 'pid_file = "n.pid"' not in left and 'name = "gunicorn"' not in left
    assert '[[otlp]]\nlisten = "127.0.0.1:4318"' in left
    assert '[[request]]\npath = "/x"' in left
