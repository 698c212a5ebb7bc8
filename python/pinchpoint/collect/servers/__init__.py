"""What an app server says of its own pool: its workers, their threads and their kind, read
from its command line, its environment and its config files, never from the plan."""

from __future__ import annotations

from pinchpoint.collect.servers import (
    daphne,
    gunicorn,
    hypercorn,
    node,
    php_fpm,
    tomcat,
    uvicorn,
    uwsgi,
)
from pinchpoint.collect.servers.pool import Pool, ServerProcess, read_process

__all__ = ["Pool", "ServerProcess", "pool_of", "read_process"]


def pool_of(process: ServerProcess, cores: int, files: bool = True) -> Pool | None:
    """The pool of the server whose main process is `process`; None when it is no server
    whose pool can be read (a proxy, a database, an unknown program)."""
    if gunicorn.is_gunicorn(process.argv):
        return gunicorn.read(process, cores, files)
    if uwsgi.is_uwsgi(process.argv):
        return uwsgi.read(process, cores, files)
    if uvicorn.is_uvicorn(process.argv):
        return uvicorn.read(process, cores, files)
    if hypercorn.is_hypercorn(process.argv):
        return hypercorn.read(process, cores, files)
    if daphne.is_daphne(process.argv):
        return daphne.read(process, cores, files)
    if php_fpm.is_php_fpm(process.argv):
        return php_fpm.read(process, cores, files)
    if tomcat.is_tomcat(process.argv):
        return tomcat.read(process, cores, files)
    if node.is_node(process.argv):
        return node.read(process, cores, files)
    return None
