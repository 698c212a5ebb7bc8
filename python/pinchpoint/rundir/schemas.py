"""The columns of the run folder's Parquet tables that collection writes and the analysis
reads: `tiers.parquet` (one row per tier record of the run) and `resources.parquet` (one
row per component and sample)."""

import pyarrow as pa

# requests.parquet, one row per request sent: as the engine writes it
# (crates/pinchpoint-engine/src/arrow_io.rs), and a locustfile run (load/locust_child.py).
REQUESTS_SCHEMA = pa.schema(
    [
        pa.field("req_id", pa.uint64(), nullable=False),
        pa.field("step", pa.uint32(), nullable=False),
        pa.field("users", pa.uint32(), nullable=False),
        pa.field("endpoint", pa.uint16(), nullable=False),
        pa.field("start_us", pa.int64(), nullable=False),
        pa.field("intended_us", pa.int64(), nullable=False),
        pa.field("latency_us", pa.int64(), nullable=False),
        pa.field("service_us", pa.int64(), nullable=False),
        pa.field("status", pa.uint16(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("bytes", pa.uint64(), nullable=False),
        # The flow walk that sent it: the user's index and its iteration, as the built-ins
        # ${user_index} and ${iteration} of that walk; null for a request not in a flow.
        # Absent from the run folders of versions before them.
        pa.field("user_index", pa.uint32()),
        pa.field("iteration", pa.uint64()),
    ]
)

TIERS_SCHEMA = pa.schema(
    [
        pa.field("component", pa.string(), nullable=False),
        pa.field("users", pa.uint32(), nullable=False),
        pa.field("req_id", pa.uint64()),
        pa.field("ts", pa.float64()),
        pa.field("duration_s", pa.float64(), nullable=False),
        pa.field("upstream_s", pa.float64()),
        pa.field("status", pa.int32()),
        # Time the tier itself logged as queued before it served the request (HAProxy Tw).
        pa.field("queue_s", pa.float64()),
        # Records from spans: the span's kind (server, client, producer, consumer, internal
        # for a trace's root) and the tier that called it; null for log records.
        pa.field("span_kind", pa.string()),
        pa.field("parent", pa.string()),
    ]
)

RESOURCES_SCHEMA = pa.schema(
    [
        ("ts", pa.float64()),
        ("component", pa.string()),
        ("cpu_cores", pa.float64()),
        ("rss_bytes", pa.int64()),
        ("processes", pa.int32()),
        # The CPU quota of the cgroups the component's processes run in (null: none), and
        # in this interval the CFS periods, the throttled ones and the time throttled.
        ("cpu_quota_cores", pa.float64()),
        ("cpu_periods", pa.int64()),
        ("cpu_throttled", pa.int64()),
        ("cpu_throttled_s", pa.float64()),
        # Components and generator: their threads waiting for a CPU, on average over the
        # interval (run-queue delay from schedstat; null where the kernel keeps none).
        ("cpu_wait_cores", pa.float64()),
        # Processes whose title says they wait for a lock (PostgreSQL backends: "... waiting").
        ("lock_waits", pa.int32()),
        # Host rows only: the CPU of tasks at a positive nice value (low priority), in cores.
        ("cpu_nice_cores", pa.float64()),
        # Host rows only: the share of the interval in which some task waited for a CPU,
        # for memory and for I/O (pressure stall information), and the runnable tasks.
        ("cpu_pressure", pa.float64()),
        ("memory_pressure", pa.float64()),
        ("io_pressure", pa.float64()),
        ("run_queue", pa.int32()),
        # Bytes per second read from and written to storage: by a component's processes
        # (/proc/<pid>/io; null when not permitted), by the host's physical disks.
        ("disk_read_bytes_s", pa.float64()),
        ("disk_write_bytes_s", pa.float64()),
        # Host rows only: the busy share of the busiest physical disk; bytes per second
        # received and sent over the non-loopback interfaces, through loopback. See collect/resources/host.py.
        ("disk_util", pa.float64()),
        ("net_rx_bytes_s", pa.float64()),
        ("net_tx_bytes_s", pa.float64()),
        ("net_loopback_bytes_s", pa.float64()),
        # Host rows only: the link nearest its ceiling (shaped rate or speed), in any network
        # namespace: its share of it, its name, its bytes per second in that direction and
        # the ceiling; its shaper's queued bytes, drops and overlimits. See collect/resources/links.py.
        ("net_util", pa.float64()),
        ("net_link", pa.string()),
        ("net_link_bytes_s", pa.float64()),
        ("net_link_limit_bytes_s", pa.float64()),
        ("net_qdisc_backlog_bytes", pa.int64()),
        ("net_qdisc_drops_s", pa.float64()),
        ("net_qdisc_overlimits_s", pa.float64()),
        # The memory limit of the component's cgroups (null: none); the host's memory.
        ("memory_limit_bytes", pa.int64()),
        # Components and generator: threads of the processes; connections waiting in the
        # accept queues of their listening sockets, and the most those queues may hold
        # (null: not known); the connections to their listening ports they accepted (all
        # three null when their fds cannot be read). See collect/resources/sockets.py.
        ("threads", pa.int32()),
        ("listen_backlog", pa.int32()),
        ("listen_backlog_limit", pa.int32()),
        ("connections", pa.int32()),
        # The rates the component's cgroups throttle its disk reads and writes to, in bytes
        # per second (blkio or io.max; null: none). See collect/resources/cgroups.py.
        ("disk_read_limit_bytes_s", pa.int64()),
        ("disk_write_limit_bytes_s", pa.int64()),
        # An app server's pool as the server itself sets it (collect/servers/): its slots
        # (processes × threads; null for an event loop or no server found), its kind
        # (sync, threads, async), where each number was read, and the server (gunicorn,
        # uwsgi, uvicorn, node, php-fpm, tomcat, ...) whose knobs the advice names.
        ("pool_slots", pa.int32()),
        ("pool_kind", pa.string()),
        ("pool_source", pa.string()),
        ("pool_server", pa.string()),
    ]
)
# resources.parquet: columns added after the first five: a table without them (an older agent) gets nulls.
OPTIONAL_RESOURCE_COLUMNS = RESOURCES_SCHEMA.names[5:]

# db_activity.parquet: one row per backend and sample of a database component's server
# (collect/database/): pg_stat_activity's client backends, the sampler's own left out.
DB_ACTIVITY_SCHEMA = pa.schema(
    [
        pa.field("ts", pa.float64(), nullable=False),
        pa.field("component", pa.string(), nullable=False),
        pa.field("pid", pa.int32(), nullable=False),
        # active, idle, idle in transaction, ... (null: not permitted to see it).
        pa.field("state", pa.string()),
        pa.field("wait_event_type", pa.string()),
        pa.field("wait_event", pa.string()),
        # The statement normalized: comments out, literals and parameters as $1, $2, ...
        pa.field("statement", pa.string()),
        # The run's tag of its comment (pp_run, pp_users or pp_rate, pp_req), when present.
        pa.field("tag_run", pa.string()),
        pa.field("tag_users", pa.uint32()),
        pa.field("tag_req", pa.uint64()),
        # A backend waiting for a lock: the lock it waits for (pg_locks: its type, mode and
        # relation, for a transaction id the table both backends hold locks on), and the
        # backend at the head of the chain that blocks it (pg_blocking_pids) with its
        # statement (normalized) and state.
        pa.field("lock_type", pa.string()),
        pa.field("lock_mode", pa.string()),
        pa.field("lock_relation", pa.string()),
        pa.field("blocker_pid", pa.int32()),
        pa.field("blocker_statement", pa.string()),
        pa.field("blocker_state", pa.string()),
    ]
)

# db_statements.parquet: pg_stat_statements read about once a second while the run goes
# (where the extension is installed), the statements with the most execution time.
DB_STATEMENTS_SCHEMA = pa.schema(
    [
        pa.field("ts", pa.float64(), nullable=False),
        pa.field("component", pa.string(), nullable=False),
        pa.field("queryid", pa.int64(), nullable=False),
        pa.field("statement", pa.string()),
        pa.field("calls", pa.int64()),
        # Total execution time since the statistics were reset, in milliseconds.
        pa.field("exec_ms", pa.float64()),
    ]
)
