"""The stores an app calls that are sampled from inside rather than read from a log: MySQL
or MariaDB (`[component.database] kind = "mysql"`) and Redis (`[component.redis]`). Their
connection strings hold a password init cannot know and the plan must not hold: the plan
names the variable to set, and gives the address the app reached the server at."""

from __future__ import annotations

from pathlib import Path

from pinchpoint.collect.servers.argv import option
from pinchpoint.discover.configs import check_pid_file
from pinchpoint.discover.tier import Address, Tier
from pinchpoint.discover.unknown import choose_processes

MYSQL = "mysql"
REDIS = "redis"


def read_mysql(pid: int, argv: list[str], address: Address, path: str) -> Tier:
    """The tier of the MariaDB (mariadbd) or MySQL (mysqld) whose server process is `pid`:
    its pid file from `--pid-file`, sampled from inside."""
    name = "mariadb" if Path(argv[0] if argv else "").name.startswith("mariadb") else "mysql"
    tier = Tier(name, "database", pid, sampled_as=MYSQL)
    given = option(argv, ("--pid-file",))
    problem = check_pid_file(Path(given), pid) if given else "no --pid-file on its command line"
    if given and problem is None:
        tier.pid_file = Path(given)
        tier.notes.append(f"pid file {given}, from its command line")
    else:
        tier.notes.append(f"{problem}: its processes are found otherwise")
        choose_processes(tier, argv)
    tier.client_dsn = f"mysql://USER:PASSWORD@{_host_port(address)}/DATABASE"
    tier.notes.append(
        f"{name}: its statements, sessions and lock waits are sampled from inside "
        "(performance_schema, information_schema), not read from a log"
    )
    return tier


def read_redis(pid: int, argv: list[str], address: Address, path: str) -> Tier:
    """The tier of the Redis whose server process is `pid`, sampled from inside (INFO,
    commandstats, SLOWLOG). Redis retitles its process (`redis-server 127.0.0.1:6379`):
    whether it asks a password is not known, so the URL shows where one goes."""
    tier = Tier(REDIS, "cache", pid, sampled_as=REDIS)
    choose_processes(tier, argv)
    tier.client_dsn = f"redis://:PASSWORD@{_host_port(address)}/0"
    tier.notes.append(
        "redis: its CPU (its main thread's), clients and commands are sampled from inside "
        "(INFO, SLOWLOG), not read from a log"
    )
    return tier


def _host_port(address: Address) -> str:
    if address.unix is not None:
        return "localhost"
    host = address.host or "127.0.0.1"
    return f"[{host}]:{address.port}" if ":" in host else f"{host}:{address.port}"


def sampled_lines(tier: Tier) -> list[str]:
    """The table that samples the store from inside: the variable to set, and what to set
    it to, the password left for the user to fill in."""
    variable = f"PINCHPOINT_{tier.name.upper().replace('-', '_')}_" + (
        "URL" if tier.sampled_as == REDIS else "DSN"
    )
    example = tier.client_dsn or ""
    if tier.sampled_as == REDIS:
        return [
            "[component.redis]",
            f"# Before `pinchpoint run`, set {variable} to the URL the apps connect with",
            "# (the password in it, never in the plan; no `:PASSWORD@` where it asks none):",
            f'#   export {variable}="{example}"',
            f'url_env = "{variable}"',
        ]
    return [
        "[component.database]",
        f"# Before `pinchpoint run`, set {variable} to a connection URL as the apps' user",
        "# and database (the password in it, never in the plan):",
        f'#   export {variable}="{example}"',
        f'dsn_env = "{variable}"',
        'kind = "mysql"',
    ]
