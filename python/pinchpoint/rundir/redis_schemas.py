"""The tables of a Redis component sampled from inside (collect/redis/)."""

from __future__ import annotations

import pyarrow as pa

# redis_info.parquet: one row per sample of a Redis component's INFO cpu and clients.
REDIS_INFO_SCHEMA = pa.schema(
    [
        pa.field("ts", pa.float64(), nullable=False),
        pa.field("component", pa.string(), nullable=False),
        # CPU seconds since the server started: the whole process's, and its main thread's
        # (Redis 6.2 on; null before), the one thread that runs every command.
        pa.field("used_cpu_sys", pa.float64()),
        pa.field("used_cpu_user", pa.float64()),
        pa.field("used_cpu_sys_main_thread", pa.float64()),
        pa.field("used_cpu_user_main_thread", pa.float64()),
        pa.field("connected_clients", pa.int64()),
        # Clients waiting in a blocking command (BLPOP, WAIT, ...).
        pa.field("blocked_clients", pa.int64()),
    ]
)

# redis_commands.parquet: INFO commandstats per sample: each command's calls and the
# microseconds the server spent running it, both totals since it started.
REDIS_COMMANDS_SCHEMA = pa.schema(
    [
        pa.field("ts", pa.float64(), nullable=False),
        pa.field("component", pa.string(), nullable=False),
        pa.field("command", pa.string(), nullable=False),
        pa.field("calls", pa.int64()),
        pa.field("usec", pa.int64()),
    ]
)

# redis_slowlog.parquet: the SLOWLOG entries logged while the run went: when the command
# started (Unix seconds), how long it ran, and its name alone (its arguments, keys and
# values, may be secrets) with how many arguments it had.
REDIS_SLOWLOG_SCHEMA = pa.schema(
    [
        pa.field("component", pa.string(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("started", pa.float64()),
        pa.field("duration_us", pa.int64()),
        pa.field("command", pa.string()),
        pa.field("arguments", pa.int32()),
    ]
)
