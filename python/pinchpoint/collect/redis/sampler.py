"""Samples a Redis server from inside while the load runs: INFO cpu and clients, and INFO
commandstats `rate` times a second, SLOWLOG about once a second (each entry once).

One connection per Redis component, each reply cut off after a timeout and a size, in
the bounded thread of collect/sampler_thread.py. It asks only INFO, SLOWLOG GET and (with
a password in the URL) AUTH. Every failure (no URL, a refused connection, an
error reply) becomes a problem the run reports as a warning; the run goes on with what
was sampled.
"""

from __future__ import annotations

import time
from typing import Any

from pinchpoint.collect.redis.info import command_stats, info_fields, number
from pinchpoint.collect.redis.resp import RedisError, RespConnection
from pinchpoint.collect.sampler_thread import SamplerThread
from pinchpoint.plan.redis import Redis, parse_url

TIMEOUT_S = 2.0
# SLOWLOG keeps 128 entries by default: read that many each second.
SLOWLOG_COUNT = 128
CPU_FIELDS = (
    "used_cpu_sys",
    "used_cpu_user",
    "used_cpu_sys_main_thread",
    "used_cpu_user_main_thread",
)


class RedisSampler(SamplerThread):
    """Samples one Redis component's server in a thread of its own."""

    kind = "redis"
    join_s = 3.0

    def __init__(self, component: str, redis: Redis) -> None:
        super().__init__(component, redis.rate)
        self.redis = redis
        self.info: list[dict[str, Any]] = []
        self.commands: list[dict[str, Any]] = []
        self.slowlog: list[dict[str, Any]] = []
        self._seen_slow: set[int] = set()
        self._slowlog_primed = False
        self._conn: RespConnection | None = None

    def start(self) -> None:
        """Starts the thread; a missing or malformed URL is a problem, not an error."""
        url = self.redis.url()
        if url is None:
            self._problem(f"{self.redis.url_env} is not set: the server was not sampled")
            return
        try:
            parse_url(url)
        except ValueError as e:
            self._problem(f"{self.redis.url_env}: {e}")
            return
        self._start(url)

    def _kept(self) -> int:
        return len(self.info) + len(self.commands)

    def _slow_read(self) -> None:
        self._read_slowlog()

    def _last_read(self) -> None:
        self._sample()  # the run's last totals
        if self._conn is not None:
            self._read_slowlog()

    def _connected(self, url: str) -> bool:
        if self._conn is not None:
            return True
        address = parse_url(url)
        try:
            self._conn = RespConnection(address.host, address.port, TIMEOUT_S)
            if address.password is not None:
                login = [address.username] if address.username else []
                self._conn.command("AUTH", *login, address.password)
        except RedisError as e:
            self._failed(f"cannot connect: {e}")
            return False
        return True

    def _sample(self) -> None:
        assert self._conn is not None
        try:
            cpu = info_fields(self._info("cpu"))
            clients = info_fields(self._info("clients"))
            stats = command_stats(self._info("commandstats"))
        except RedisError as e:
            self._failed(f"INFO failed: {e}")
            return
        now = time.time()
        row: dict[str, Any] = {"ts": now, "component": self.component}
        row.update({name: number(cpu, name) for name in CPU_FIELDS})
        for name in ("connected_clients", "blocked_clients"):
            value = number(clients, name)
            row[name] = int(value) if value is not None else None
        self.info.append(row)
        self.commands.extend(
            {"ts": now, "component": self.component, "command": s.command, "calls": s.calls,
             "usec": s.usec}
            for s in stats
        )  # fmt: skip

    def _info(self, section: str) -> str:
        assert self._conn is not None
        text = self._conn.command("INFO", section)
        if not isinstance(text, str):
            raise RedisError(f"INFO {section} answered {type(text).__name__}, not text")
        return text

    def _read_slowlog(self) -> None:
        """The entries logged since sampling began, each once (the first read marks the
        entries already there, from before the run, as seen)."""
        assert self._conn is not None
        try:
            entries = self._conn.command("SLOWLOG", "GET", str(SLOWLOG_COUNT)) or []
        except RedisError as e:
            self._failed(f"SLOWLOG failed: {e}")
            return
        for entry in entries:
            if not isinstance(entry, list) or len(entry) < 4 or not isinstance(entry[0], int):
                continue
            if entry[0] not in self._seen_slow:
                self._seen_slow.add(entry[0])
                if self._slowlog_primed:
                    self.slowlog.append(self._slow_row(entry))
        self._slowlog_primed = True

    def _slow_row(self, entry: list[Any]) -> dict[str, Any]:
        argv = entry[3] if isinstance(entry[3], list) else []
        return {
            "component": self.component,
            "id": entry[0],
            "started": float(entry[1]) if isinstance(entry[1], int) else None,
            "duration_us": entry[2] if isinstance(entry[2], int) else None,
            "command": str(argv[0]).upper() if argv else None,
            "arguments": max(0, len(argv) - 1),
        }
