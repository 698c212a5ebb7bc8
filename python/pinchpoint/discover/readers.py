"""The readers of each kind of server, by the name `walk.kind_of` gives it."""

from __future__ import annotations

from pinchpoint.discover import haproxy, nginx, node, php_fpm, tomcat
from pinchpoint.discover.appserver import read_asgi, read_gunicorn, read_uwsgi
from pinchpoint.discover.postgres import read_postgres
from pinchpoint.discover.stores import read_mysql, read_redis
from pinchpoint.discover.tier import Address, Tier
from pinchpoint.discover.walk import Reader

ROLES = {
    "nginx": "proxy",
    "haproxy": "proxy",
    "gunicorn": "app_server",
    "uwsgi": "app_server",
    "uvicorn": "app_server",
    "hypercorn": "app_server",
    "daphne": "app_server",
    "postgres": "database",
    "mysql": "database",
    "redis": "cache",
    "php-fpm": "app_server",
    "tomcat": "app_server",
    "node": "app_server",
}


def _known_only(kind: str) -> Reader:
    """A tier named for its kind, with its processes and no more: for servers whose configs
    are not read yet."""

    def read(pid: int, argv: list[str], address: Address, path: str) -> Tier:
        tier = Tier(kind, ROLES[kind], pid)
        tier.warnings.append(f"{kind}'s config is not read yet: add its log by hand")
        return tier

    return read


READERS: dict[str, Reader] = {kind: _known_only(kind) for kind in ROLES}
READERS["gunicorn"] = read_gunicorn
READERS["uwsgi"] = read_uwsgi
READERS["uvicorn"] = READERS["hypercorn"] = READERS["daphne"] = read_asgi
READERS["postgres"] = read_postgres
READERS["mysql"] = read_mysql
READERS["redis"] = read_redis
READERS["nginx"] = nginx.read
READERS["haproxy"] = haproxy.read
READERS["php-fpm"] = php_fpm.read
READERS["tomcat"] = tomcat.read
READERS["node"] = node.read
