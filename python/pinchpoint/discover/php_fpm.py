"""The PHP-FPM tier, from the config its master runs: php-fpm.conf (named in the master's
title) and the pool files it includes; of them, the pool whose `listen` is where the
request reached PHP-FPM (the address nginx's fastcgi_pass names), its `pm` and
`pm.max_children`, its `access.log` and `access.format`; and the master's pid file."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pinchpoint.collect.servers.argv import count, option
from pinchpoint.collect.servers.php_fpm import FpmPool, config_path, pools
from pinchpoint.collect.servers.pool import ServerProcess
from pinchpoint.discover.app_process import add_calls, server_process
from pinchpoint.discover.configs import Unreadable, check_pid_file, host_matches, read_text
from pinchpoint.discover.tier import Address, Tier
from pinchpoint.discover.unknown import choose_processes
from pinchpoint.logformats.base import FormatError
from pinchpoint.logformats.php_fpm import DEFAULT_FORMAT, PHP_FPM_FORMAT, parser_for

NAME = "php-fpm"
# Where PHP-FPM takes a relative path from without `-p`: its pid file from its state folder,
# a pool's access.log from its install prefix (Debian's builds).
_STATE_DIR = "/var"
_INSTALL_PREFIX = "/usr"
_ESCAPE = re.compile(r"\\(.)")
# The keys of a parsed access.format whose values carry the run's tag.
_TAGGED = ("q", "e:HTTP_X_PINCHPOINT")


def read(pid: int, argv: list[str], address: Address, path: str) -> Tier:
    """The PHP-FPM tier whose master is `pid`, for a request that reached it at `address`."""
    process = server_process(pid, argv)
    tier = Tier(NAME, "app_server", pid)
    conf = config_path(process)
    if conf is None:
        tier.warnings.append(
            "its master names no php-fpm.conf (title or -y): its pools are not read; add its "
            "access log by hand"
        )
    else:
        tier.notes.append(f"php-fpm.conf {conf}, from its master's command line")
        _serving_pool(tier, process, address)
        _pid_file(tier, process, conf)
    if tier.pid_file is None:
        choose_processes(tier, argv)
    add_calls(tier)
    return tier


def _serving_pool(tier: Tier, process: ServerProcess, address: Address) -> None:
    found = pools(process)
    if not found:
        tier.warnings.append(f"no [pool] section could be read from {config_path(process)}")
        return
    serving = [p for p in found if _listens_at(p, address, process)]
    if not serving:
        listens = ", ".join(f"[{p.name}] {p.settings.get('listen', ('?', ''))[0]}" for p in found)
        tier.warnings.append(
            f"no pool listens at {address}, where the request reached PHP-FPM ({listens}): "
            "add its access log by hand"
        )
        return
    pool = serving[0]
    listen, where = pool.settings["listen"]
    tier.notes.append(f"pool [{pool.name}] serves the request: listen = {listen} from {where}")
    _size(tier, pool)
    others = [p.name for p in found if p is not pool]
    if others:
        tier.notes.append(
            f"the master also runs pools {', '.join(others)}: its processes are theirs too"
        )
    _access_log(tier, pool, process)


def _listens_at(pool: FpmPool, address: Address, process: ServerProcess) -> bool:
    """Whether the pool's `listen` (a socket path, `port`, `host:port` or `[v6]:port`)
    takes requests sent to `address`."""
    value = pool.settings.get("listen", ("", ""))[0]
    if not value:
        return False
    if address.unix is not None:
        return "/" in value and os.path.normpath(process.path(value)) == os.path.normpath(
            address.unix
        )
    host, sep, port = value.rpartition(":")
    if not port.isdigit():
        return False
    return int(port) == address.port and host_matches(host if sep else None, address.host)


def _size(tier: Tier, pool: FpmPool) -> None:
    children, where = pool.settings.get("pm.max_children", ("", ""))
    pm = pool.settings.get("pm", ("dynamic", "PHP-FPM's default"))[0]
    slots = count(children, os.cpu_count() or 1)
    if slots is None:
        tier.warnings.append(
            f"pool [{pool.name}] has no pm.max_children PHP-FPM can start with "
            f"({children!r}): its size is counted from its processes during the run"
        )
        return
    tier.slots = slots
    tier.notes.append(
        f"slots: {slots}, one request per process: pm = {pm}, pm.max_children = {slots} "
        f"from {where}"
    )


def _access_log(tier: Tier, pool: FpmPool, process: ServerProcess) -> None:
    where = pool.settings.get("listen", ("", "its pool file"))[1]
    if "access.log" not in pool.settings:
        tier.warnings.append(
            f"pool [{pool.name}] writes no access log: add `access.log = "
            f"/var/log/php-fpm.{pool.name}.access.log` and `access.format = "
            f'"{_in_file(PHP_FPM_FORMAT)}"` to [{pool.name}] in {where}, reload PHP-FPM and run '
            "init again"
        )
        return
    value, log_where = pool.settings["access.log"]
    prefix = option(process.argv, ("--prefix",), ("-p",)) or _INSTALL_PREFIX
    path = Path(value) if os.path.isabs(value) else Path(prefix) / value
    tier.notes.append(f"access.log {path} from {log_where}")
    written, format_where = pool.settings.get(
        "access.format", (DEFAULT_FORMAT, "PHP-FPM's default access.format")
    )
    fmt = _ESCAPE.sub(r"\1", written)
    try:
        parser = parser_for(fmt)
    except FormatError:
        tier.warnings.append(
            f"pool [{pool.name}]'s access.format ({format_where}) logs no duration: make it "
            f'`access.format = "{_in_file(PHP_FPM_FORMAT)}"` in {format_where}, reload '
            "PHP-FPM and run init again"
        )
        return
    if not any(key in parser.groups for key in _TAGGED):
        tier.warnings.append(
            f"pool [{pool.name}]'s access.format ({format_where}) logs no query (%q): its "
            "lines cannot be matched to the run's requests; write %r%Q%q where it has %r"
        )
    tier.log_path, tier.log_format, tier.log_format_string = path, "php-fpm", fmt
    tier.notes.append(f"access.format from {format_where}")


def _in_file(fmt: str) -> str:
    """A format as written inside the quotes of a pool file."""
    return fmt.replace('"', '\\"')


def _pid_file(tier: Tier, process: ServerProcess, conf: Path) -> None:
    """The `pid` of php-fpm.conf's [global] section, when it holds the master's pid."""
    try:
        text = read_text(conf)
    except Unreadable as e:
        tier.warnings.append(str(e))
        return
    value = _global_pid(text)
    if value is None:
        tier.notes.append(f"no pid in [global] of {conf}")
        return
    base = option(process.argv, ("--prefix",), ("-p",)) or _STATE_DIR
    path = Path(value) if os.path.isabs(value) else Path(base) / value
    if problem := check_pid_file(path, process.pid):
        tier.warnings.append(problem)
        return
    tier.pid_file = path
    tier.notes.append(f"pid {path} from [global] of {conf}")


def _global_pid(text: str) -> str | None:
    section = "global"
    found = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        key, sep, value = line.partition("=")
        if sep and section == "global" and key.strip() == "pid":
            found = value.split(";", 1)[0].strip().strip("\"'")
    return found or None
