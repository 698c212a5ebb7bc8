import pytest

from pinchpoint.logformats import FormatError, get_parser, known_formats
from pinchpoint.logformats.gunicorn import GunicornParser
from pinchpoint.logformats.nginx import NGINX_FORMAT, NginxParser
from pinchpoint.logformats.probe import ProbeParser


def test_known_formats() -> None:
    assert known_formats() == [
        "apache", "envoy", "gunicorn", "haproxy", "jsonlines", "morgan", "nginx", "php-fpm",
        "postgresql", "probe", "tomcat", "uwsgi",
    ]  # fmt: skip


def test_names_give_their_parsers_with_default_formats() -> None:
    nginx = get_parser("nginx", None)
    assert isinstance(nginx, NginxParser)
    assert nginx.log_format == NGINX_FORMAT
    assert isinstance(get_parser("gunicorn"), GunicornParser)
    assert isinstance(get_parser("probe"), ProbeParser)


def test_custom_format_string_is_compiled() -> None:
    parser = get_parser("nginx", "$status $request_time")
    record = parser.parse("200 0.5")
    assert record is not None
    assert record.duration_s == 0.5


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(
        FormatError,
        match="unknown log format 'lighttpd'; known formats: apache, envoy, gunicorn, haproxy, "
        "jsonlines, morgan, nginx, php-fpm, postgresql, probe, tomcat, uwsgi",
    ):
        get_parser("lighttpd", None)
