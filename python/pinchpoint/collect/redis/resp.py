"""Just enough of the Redis protocol (RESP2) to ask a server INFO and SLOWLOG: one
command at a time over one TCP connection, every reply bounded in size and depth."""

from __future__ import annotations

import socket
from typing import Any

# The largest reply read (INFO commandstats of every command is a few KiB).
MAX_REPLY_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 8
MAX_ITEMS = 100_000


class RedisError(Exception):
    """The server answered an error, broke the protocol, or could not be reached."""


class RespConnection:
    """A connection to one Redis server; every read and write times out after `timeout_s`."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as e:
            raise RedisError(f"cannot connect to {host}:{port}: {e.strerror or e}") from None
        self._file = self._sock.makefile("rb")
        self._read = 0

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    def command(self, *args: str) -> Any:
        """The server's reply to one command: str, int, None, or a list of those."""
        payload = [f"*{len(args)}\r\n".encode()]
        for arg in args:
            data = arg.encode()
            payload.append(b"$%d\r\n%s\r\n" % (len(data), data))
        try:
            self._sock.sendall(b"".join(payload))
            self._read = 0
            return self._reply(0)
        except OSError as e:
            raise RedisError(f"the connection failed: {e.strerror or e}") from None

    def _line(self) -> bytes:
        line = self._file.readline(MAX_REPLY_BYTES)
        if not line.endswith(b"\r\n"):
            raise RedisError("the server closed the connection or sent a broken reply")
        self._count(len(line))
        return line[:-2]

    def _count(self, n: int) -> None:
        self._read += n
        if self._read > MAX_REPLY_BYTES:
            raise RedisError(f"a reply of more than {MAX_REPLY_BYTES} bytes")

    def _reply(self, depth: int) -> Any:
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode("utf-8", "replace")
        if kind == b"-":
            raise RedisError(rest.decode("utf-8", "replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            return self._bulk(int(rest))
        if kind == b"*":
            return self._array(int(rest), depth)
        raise RedisError(f"an unknown reply type {kind!r}")

    def _bulk(self, size: int) -> str | None:
        if size < 0:
            return None
        self._count(size + 2)
        data = self._file.read(size + 2)
        if len(data) != size + 2:
            raise RedisError("the server closed the connection in a reply")
        return data[:-2].decode("utf-8", "replace")

    def _array(self, count: int, depth: int) -> list[Any] | None:
        if count < 0:
            return None
        if depth >= MAX_DEPTH or count > MAX_ITEMS:
            raise RedisError("a reply nested too deep or with too many items")
        return [self._reply(depth + 1) for _ in range(count)]
