"""Plan files: valid plans load, bad ones are refused naming file, line and field."""

from __future__ import annotations

import pytest

from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import check_url, parse_duration, parse_plan

GOOD = """\
[target]
url = "http://127.0.0.1:8080/base"

[load]
lower = 2
upper = 10
step = 4
duration = "1.5s"
think_time = "250ms"

[[request]]
path = "/sys_perf_check?cpu=2"

[[component]]
name = "app"
role = "app"

[[component]]
name = "nginx"
role = "proxy"
calls = ["gunicorn"]
[component.log]
path = "access.log"
format = "nginx"

[[component]]
name = "gunicorn"
calls = ["app"]
workers = 2
[component.process]
pid_file = "gunicorn.pid"
"""


def test_good_plan_loads_with_its_steps_and_durations() -> None:
    plan = parse_plan(GOOD)
    assert plan.load.step_users() == [2, 6, 10]
    assert plan.load.duration == 1.5
    assert plan.load.think_time.constant == 0.25
    assert (plan.target.host, plan.target.port, plan.target.base_path) == (
        "127.0.0.1",
        8080,
        "/base",
    )


def test_tiers_are_ordered_from_the_entry_to_the_leaves() -> None:
    assert parse_plan(GOOD).tiers() == ["nginx", "gunicorn", "app"]


@pytest.mark.parametrize(
    ("text", "value"),
    [("6s", 6.0), ("500ms", 0.5), ("2m", 120.0), ("1h", 3600.0), (3, 3.0), ("1.5", 1.5)],
)
def test_durations_take_units(text: object, value: float) -> None:
    assert parse_duration(text) == value


@pytest.mark.parametrize(
    "bad", ["6 sec", "-1s", "", True, "fast", float("nan"), float("inf"), 1e30, "1e30h", "721h"]
)
def test_bad_durations_are_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        (
            "step = 4",
            "step = 4\nsteps = 3",
            "plan.toml:8: load.steps: Extra inputs are not permitted",
        ),
        (
            'format = "nginx"',
            'format = "nginxx"',
            "plan.toml:24: component[1].log.format: unknown log format 'nginxx'",
        ),
        ("workers = 2", "workers = 0", "plan.toml:29: component[2].workers"),
        ('duration = "1.5s"', 'duration = "soon"', "plan.toml:8: load.duration"),
        ('url = "http://127.0.0.1:8080/base"', 'url = "ftp://x"', "plan.toml:2: target.url"),
        ('calls = ["app"]', 'calls = ["db"]', "calls 'db', which the plan does not list"),
        (
            'pid_file = "gunicorn.pid"',
            'pid_file = "g.pid"\nname = "gunicorn"',
            "exactly one of pid_file",
        ),
    ],
)
def test_errors_name_the_file_line_and_field(old: str, new: str, where: str) -> None:
    with pytest.raises(PlanError) as e:
        parse_plan(GOOD.replace(old, new), "plan.toml")
    assert where in str(e.value)


def test_upper_below_lower_is_refused() -> None:
    with pytest.raises(PlanError, match="upper \\(1\\) is below lower \\(2\\)"):
        parse_plan(GOOD.replace("upper = 10", "upper = 1"), "plan.toml")


def test_toml_syntax_errors_name_the_line() -> None:
    with pytest.raises(PlanError, match=r"plan.toml: .*line 5"):
        parse_plan(GOOD.replace("lower = 2", "lower = = 2"), "plan.toml")


def test_the_longest_duration_is_thirty_days() -> None:
    assert parse_duration("720h") == 30 * 86400.0


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:99999/",
        "http://127.0.0.1:0/",
        "http://[::1/",
        "http://h/a b",
        "http://h/\r\n",
        "http://h\t/",
        "ftp://h/",
        "http://",
    ],
)
def test_urls_that_cannot_be_sent_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        check_url(url)


@pytest.mark.parametrize("url", ["http://127.0.0.1:65535/a?b=c", "https://[::1]/", "http://h"])
def test_urls_that_can_be_sent_are_kept(url: str) -> None:
    assert check_url(url) == url


def test_brackets_inside_strings_and_comments_do_not_count_as_nesting() -> None:
    deep = "[" * 100
    text = GOOD.replace(
        'path = "/sys_perf_check?cpu=2"',
        f'path = "/{deep}"  # {deep}\nbody = """\n{deep}\n"""\nmethod = \'{deep}\'',
    )
    with pytest.raises(PlanError, match=r"plan.toml:\d+: request\[0\].method"):
        parse_plan(text, "plan.toml")


def test_a_log_format_that_does_not_compile_names_its_line() -> None:
    text = GOOD.replace('format = "nginx"', 'format = "nginx"\nlog_format = "$status"')
    with pytest.raises(PlanError, match=r"plan.toml:25: component\[1\].log.log_format: .*"):
        parse_plan(text, "plan.toml")


def test_a_database_connection_without_a_password_is_taken_and_one_with_is_refused() -> None:
    base = (
        '[target]\nurl = "http://127.0.0.1:8080"\n[load]\nlower = 1\nupper = 1\nduration = "1s"\n'
        '[[request]]\npath = "/"\n'
    )
    table = '[[component]]\nname = "pg"\nrole = "database"\n[component.database]\n'
    plan = parse_plan(base + table + 'connection = "host=127.0.0.1 port=5432 user=app"\n')
    assert plan.component[0].database is not None
    assert plan.component[0].database.dsn() == "host=127.0.0.1 port=5432 user=app"
    for secret in ("host=h user=app password=hunter2", "postgresql://app:hunter2@h/db"):
        with pytest.raises(PlanError, match="the plan holds no secret") as refused:
            parse_plan(base + table + f'connection = "{secret}"\n')
        assert "hunter2" not in str(refused.value)
    with pytest.raises(PlanError, match="set dsn_env"):
        parse_plan(base + table + "rate = 5\n")
