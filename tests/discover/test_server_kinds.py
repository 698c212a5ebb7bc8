"""Which server a listener runs, from its program (/proc/PID/exe) and command line."""

from __future__ import annotations

import pytest

from pinchpoint.discover.readers import READERS
from pinchpoint.discover.walk import kind_of

BOOTSTRAP = "org.apache.catalina.startup.Bootstrap"


@pytest.mark.parametrize(
    ("argv", "exe", "kind"),
    [
        (["php-fpm:", "master", "process", "(/etc/php/8.2/fpm/php-fpm.conf)"],
         "/usr/sbin/php-fpm8.2", "php-fpm"),
        (["php-fpm: pool www"], "", "php-fpm"),  # its program unreadable: its title
        (["php", "-S", "127.0.0.1:8000"], "/usr/bin/php8.2", None),  # the php interpreter
        (["/usr/bin/java", "-Dcatalina.base=/var/lib/tomcat10", BOOTSTRAP, "start"],
         "/usr/lib/jvm/java-17-openjdk-amd64/bin/java", "tomcat"),
        (["java", "-jar", "app.jar"], "/usr/lib/jvm/java-17-openjdk-amd64/bin/java", None),
        (["node", "server.js"], "/usr/bin/node", "node"),
        (["node", "server.js"], "", "node"),
        (["/usr/bin/node_exporter"], "/usr/bin/node_exporter", None),
        # A title may say anything: a program of its own is known by that program.
        (["php-fpm: master process (/x.conf)"], "/usr/sbin/nginx", "nginx"),
    ],
)  # fmt: skip
def test_kind_of_a_listener(argv: list[str], exe: str, kind: str | None) -> None:
    assert kind_of(argv, exe) == kind
    if kind is not None:
        assert kind in READERS
