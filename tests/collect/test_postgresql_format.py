"""PostgreSQL duration lines: documented samples, and the three logs of a real server."""

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pinchpoint.collect.logs.reader import FileCounts, collect_component, mark
from pinchpoint.logformats import NOT_A_RECORD, FormatError, get_parser
from pinchpoint.logformats.postgresql import (
    POSTGRESQL_PREFIX,
    CsvlogParser,
    JsonlogParser,
    comment_tag,
    compile_prefix,
)
from pinchpoint.logformats.tag import Tag, find_tag, parse_header
from pinchpoint_lab.ports import free_port

SAMPLES = Path(__file__).parent / "samples"
TS = datetime(2026, 11, 22, 9, 15, 0, 123000, tzinfo=UTC).timestamp()
DEBIAN_PREFIX = "%m [%p] %q%u@%d "
APP_PREFIX = "%m [%p] %q%u@%d %a "


def tag_of(record) -> Tag | None:
    tag = find_tag(record.target) if record.target else None
    if tag is None and record.tag_header:
        tag = parse_header(record.tag_header)
    return tag


# --- stderr with a log_line_prefix ---------------------------------------------------------


def test_default_prefix_statement_with_sqlcommenter_comment() -> None:
    line = (
        "2026-11-22 09:15:00.123 UTC [4242] LOG:  duration: 12.345 ms  statement: "
        "SELECT * FROM t WHERE id = 1 /*pp_req='17',pp_run='r1',pp_users='4'*/"
    )
    record = get_parser("postgresql").parse(line)
    assert record is not None
    assert record.duration_s == 0.012345
    assert record.ts == TS
    assert record.status is None
    assert record.upstream_s is None
    assert tag_of(record) == Tag("r1", 4, 17)


def test_application_name_in_prefix_carries_the_tag() -> None:
    line = (
        "2026-11-22 09:15:00.123 UTC [4242] app@shop pp_run=r1&pp_users=8&pp_req=9 LOG:  "
        "duration: 0.050 ms  statement: SELECT 1"
    )
    record = get_parser("postgresql", APP_PREFIX).parse(line)
    assert record is not None
    assert record.duration_s == 0.00005
    assert tag_of(record) == Tag("r1", 8, 9)


def test_header_form_application_name() -> None:
    line = (
        "2026-11-22 09:15:00 UTC [4242]: [3-1] user=app,db=shop,app=run=r2; users=4; req=5 "
        "LOG:  duration: 1.000 ms  statement: SELECT 1"
    )
    parser = get_parser("postgresql", "%t [%p]: [%l-1] user=%u,db=%d,app=%a ")
    record = parser.parse(line)
    assert record is not None
    assert record.duration_s == 0.001
    assert record.ts == TS - 0.123  # %t has whole seconds
    assert tag_of(record) == Tag("r2", 4, 5)


def test_comment_wins_over_application_name() -> None:
    line = (
        "2026-11-22 09:15:00.123 UTC [1] u@d pp_run=r1&pp_users=2&pp_req=1 LOG:  duration: 2.5 ms  "
        "statement: SELECT 1 /*pp_run='r1',pp_users='8',pp_req='7'*/"
    )
    record = get_parser("postgresql", APP_PREFIX).parse(line)
    assert record is not None
    assert tag_of(record) == Tag("r1", 8, 7)


def test_extended_protocol_execute_is_a_record_parse_and_bind_are_not() -> None:
    parser = get_parser("postgresql", APP_PREFIX)
    prefix = "2026-11-22 09:15:00.123 UTC [77] app@shop pp_run=r1&pp_users=2&pp_req=3 LOG:  "
    assert parser.parse(prefix + "duration: 0.020 ms  parse <unnamed>: SELECT $1") is NOT_A_RECORD
    assert parser.parse(prefix + "duration: 0.010 ms  bind <unnamed>: SELECT $1") is NOT_A_RECORD
    record = parser.parse(prefix + "duration: 0.030 ms  execute <unnamed>: SELECT $1")
    assert record is not None
    assert record.duration_s == 0.00003
    assert tag_of(record) == Tag("r1", 2, 3)
    named = parser.parse(prefix + "duration: 0.030 ms  execute S_1/C_2: SELECT 1 /* pp_run=r9 */")
    assert named is not None
    assert tag_of(named) == Tag(
        "r1", 2, 3
    )  # the comment's tag has no users: the application_name's


def test_bare_duration_of_log_duration_and_verbose_sqlstate() -> None:
    parser = get_parser("postgresql", APP_PREFIX)
    record = parser.parse(
        "2026-11-22 09:15:00.123 UTC [77] app@shop pp_run=r1&pp_users=2&pp_req=3 LOG:  00000: "
        "duration: 0.125 ms"
    )
    assert record is not None
    assert record.duration_s == 0.000125
    assert tag_of(record) == Tag("r1", 2, 3)


@pytest.mark.parametrize(
    "line",
    [
        "2026-11-22 09:15:00.123 UTC [77] LOG:  database system is ready to accept connections",
        "2026-11-22 09:15:00.123 UTC [77] u@d LOG:  statement: SELECT 1",
        '2026-11-22 09:15:00.123 UTC [77] u@d ERROR:  relation "x" does not exist',
        "2026-11-22 09:15:00.123 UTC [77] u@d STATEMENT:  SELECT * FROM x",
        "2026-11-22 09:15:00.123 UTC [77] u@d LOG:  duration: 5.0 ms  plan:",
        "\t  FROM t /*pp_run='r1',pp_users='1',pp_req='1'*/",
    ],
)
def test_lines_other_than_statement_durations_are_not_records(line: str) -> None:
    assert get_parser("postgresql", DEBIAN_PREFIX).parse(line) is NOT_A_RECORD


@pytest.mark.parametrize(
    "line",
    [
        "not a log line",
        "2026-11-22 09:15:00.123 UTC [77] u@d LOG:  duration: x ms  statement: SELECT 1",
    ],
)
def test_lines_not_in_the_format_give_none(line: str) -> None:
    assert get_parser("postgresql", DEBIAN_PREFIX).parse(line) is None


def test_non_session_lines_skip_what_follows_q() -> None:
    parser = compile_prefix(DEBIAN_PREFIX)
    assert parser.regex.fullmatch("2026-11-22 09:15:00.123 UTC [77] LOG:  checkpoint starting")
    match = parser.regex.fullmatch("2026-11-22 09:15:00.123 UTC [77] bob@db LOG:  x")
    assert match is not None
    assert (match.group("e_u"), match.group("e_d")) == ("bob", "db")


def test_every_escape_compiles_and_padding_is_stripped() -> None:
    prefix = "%m|%t|%n|%s|%p|%P|%l|%c|%v|%x|%e|%Q|%r|%h|%b|%i|%u|%d|%-12a|%%|%z|"
    line = (
        "2026-11-22 09:15:00.123 UTC|2026-11-22 09:15:00 UTC|1795338900.500|"
        "2026-11-22 09:00:00 UTC|4242||7|691f2d5c.1092|3/14|0|00000|-123|127.0.0.1(5555)|"
        "127.0.0.1|client backend|SELECT|bob|shop|pp_run=r1&pp_users=2&pp_req=3|%||"
        "LOG:  duration: 1.5 ms  statement: SELECT 1"
    )
    short = line.replace("pp_run=r1&pp_users=2&pp_req=3", "x" + " " * 11)
    parser = get_parser("postgresql", prefix)
    record = parser.parse(line)
    assert record is not None
    assert record.ts == 1795338900.5  # %n wins
    assert tag_of(record) == Tag("r1", 2, 3)
    padded = parser.parse(short)
    assert padded is not None
    assert padded.tag_header == "x"


@pytest.mark.parametrize(
    ("zone", "offset_s"),
    [("UTC", 0), ("GMT", 0), ("+01", -3600), ("-0530", 5.5 * 3600), ("+05:30", -5.5 * 3600)],
)
def test_zones_with_known_offsets(zone: str, offset_s: float) -> None:
    line = f"2026-11-22 09:15:00.123 {zone} [1] LOG:  duration: 1.0 ms"
    record = get_parser("postgresql").parse(line)
    assert record is not None
    assert record.ts == pytest.approx(TS + offset_s)


def test_unknown_zone_abbreviation_gives_no_ts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("time.tzname", ("UTC", "UTC"))
    record = get_parser("postgresql").parse("2026-11-22 09:15:00.123 CET [1] LOG:  duration: 1 ms")
    assert record is not None
    assert record.ts is None
    assert record.duration_s == 0.001


@pytest.mark.parametrize(
    ("statement", "tag"),
    [
        ("SELECT 1 /*pp_run='r1',pp_users='4',pp_req='17'*/", "pp_run=r1&pp_users=4&pp_req=17"),
        (
            "/*action='list',pp_run='r%2E1',pp_users='4',traceparent='00-ab-cd-01'*/ SELECT 1",
            "pp_run=r.1&pp_users=4",
        ),
        ("SELECT 1 /* pp_run=r1&pp_users=4&pp_req=17 */", "pp_run=r1&pp_users=4&pp_req=17"),
        ("SELECT 1 /*pp_run='r1'*/ /*pp_run='r2',pp_users='3'*/", "pp_run=r2&pp_users=3"),
        ("SELECT 1 /*pp_run='r1&pp_users=9',pp_users='4'*/", None),  # damaged: no tag
        ("SELECT '/*pp_run' /*nothing*/", None),
        ("SELECT 1", None),
    ],
)
def test_comment_tag(statement: str, tag: str | None) -> None:
    assert comment_tag(statement) == tag


def test_prefix_with_a_line_break_is_refused() -> None:
    with pytest.raises(FormatError, match="line break"):
        get_parser("postgresql", "%m\n")


# --- csvlog and jsonlog ----------------------------------------------------------------------


def csv_row(message: str, app: str = "", severity: str = "LOG") -> str:
    message = message.replace('"', '""')
    return (
        '2026-11-22 09:15:00.123 UTC,"app","shop",4242,"127.0.0.1:5555",691f2d5c.1092,3,'
        f'"SELECT",2026-11-22 09:00:00 UTC,3/14,0,{severity},00000,"{message}",,,,,,,,,'
        f'"{app}","client backend",,0'
    )


def test_csvlog_row() -> None:
    parser = get_parser("postgresql", "csvlog")
    assert isinstance(parser, CsvlogParser)
    record = parser.parse(
        csv_row("duration: 3.250 ms  statement: SELECT 'a,b'", "pp_run=r1&pp_users=2&pp_req=3")
    )
    assert record is not None
    assert record.duration_s == 0.00325
    assert record.ts == TS
    assert tag_of(record) == Tag("r1", 2, 3)
    assert parser.parse(csv_row("duration: 3.250 ms", severity="ERROR")) is NOT_A_RECORD
    assert parser.parse(csv_row("connection authorized: user=app")) is NOT_A_RECORD
    assert parser.parse("2026-11-22 09:15:00.123 UTC,only,three") is None


def test_csvlog_record_over_several_lines_is_given_on_its_last_line() -> None:
    parser = get_parser("postgresql", "csvlog")
    lines = csv_row(
        "duration: 1.000 ms  statement: SELECT a,\n  b\nFROM t /*pp_run='r1',pp_users='4',pp_req='5'*/"
    ).split("\n")
    assert len(lines) == 3
    assert parser.parse(lines[0]) is NOT_A_RECORD
    assert parser.parse(lines[1]) is NOT_A_RECORD
    record = parser.parse(lines[2])
    assert record is not None
    assert record.duration_s == 0.001
    assert tag_of(record) == Tag("r1", 4, 5)
    # Continuation lines without their start (the mark fell inside the record) give None.
    assert parser.parse(lines[1]) is None
    assert parser.parse(lines[2]) is None


def test_jsonlog_object() -> None:
    parser = get_parser("postgresql", "jsonlog")
    assert isinstance(parser, JsonlogParser)
    line = (
        '{"timestamp":"2026-11-22 09:15:00.123 UTC","user":"app","dbname":"shop","pid":4242,'
        '"error_severity":"LOG","message":"duration: 0.500 ms  execute <unnamed>: SELECT $1 '
        "/*pp_run='r1',pp_users='4',pp_req='6'*/\",\"application_name\":\"psql\","
        '"backend_type":"client backend","query_id":0}'
    )
    record = parser.parse(line)
    assert record is not None
    assert record.duration_s == 0.0005
    assert record.ts == TS
    assert tag_of(record) == Tag("r1", 4, 6)
    assert parser.parse('{"error_severity":"LOG","message":"duration: x ms"}') is None
    assert parser.parse('{"error_severity":"LOG","message":"checkpoint starting"}') is NOT_A_RECORD
    assert parser.parse('{"error_severity":"DETAIL","message":"parameters: $1 = \'5\'"}') is (
        NOT_A_RECORD
    )
    assert parser.parse('{"message":"duration: 1 ms"}') is None
    assert parser.parse("[1, 2]") is None
    assert parser.parse("{not json") is None


@pytest.mark.parametrize(
    ("log_format", "sample"),
    [(APP_PREFIX, "postgresql.log"), ("csvlog", "postgresql.csv"), ("jsonlog", "postgresql.json")],
)
def test_documented_samples_through_collect_component(log_format: str, sample: str) -> None:
    path = SAMPLES / sample
    rows, counts = collect_component("db", path, get_parser("postgresql", log_format), "r1", None)
    # Every other line is the server's own (startup, parse, bind, DETAIL, ERROR): untagged.
    assert (counts.matched, counts.other_run, counts.unparseable) == (3, 1, 0)
    assert counts.untagged == counts.lines - 4
    assert [(row.users, row.req_id, row.duration_s) for row in rows] == [
        (4, 17, 0.012345),
        (8, 18, 0.0505),
        (8, 19, 0.00003),
    ]
    assert all(row.ts is not None and row.status is None for row in rows)


# --- a real server -------------------------------------------------------------------------


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


INITDB = _bin("initdb")
POSTGRES = _bin("postgres")


class PgError(Exception):
    pass


class PgClient:
    """Just enough of the frontend/backend protocol (v3, trust auth) to run statements."""

    def __init__(self, port: int, application_name: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        params = b"".join(
            key + b"\0" + value.encode() + b"\0"
            for key, value in (
                (b"user", "postgres"),
                (b"database", "postgres"),
                (b"application_name", application_name),
            )
        )
        body = struct.pack("!i", 196608) + params + b"\0"
        self.sock.sendall(struct.pack("!i", len(body) + 4) + body)
        self._until_ready()

    def _send(self, kind: bytes, payload: bytes) -> None:
        self.sock.sendall(kind + struct.pack("!i", len(payload) + 4) + payload)

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise PgError("connection closed")
            data += chunk
        return data

    def _until_ready(self) -> None:
        error = None
        for _ in range(10_000):
            kind = self._read(1)
            (length,) = struct.unpack("!i", self._read(4))
            payload = self._read(length - 4)
            if kind == b"E":
                error = payload
            elif kind == b"Z":
                if error is not None:
                    raise PgError(error.decode(errors="replace"))
                return
        raise PgError("no ReadyForQuery")

    def query(self, sql: str) -> None:
        """Simple protocol: one `statement:` line."""
        self._send(b"Q", sql.encode() + b"\0")
        self._until_ready()

    def extended(self, sql: str) -> None:
        """Extended protocol: `parse`, `bind` and `execute` lines."""
        self._send(b"P", b"\0" + sql.encode() + b"\0" + struct.pack("!h", 0))
        self._send(b"B", b"\0\0" + struct.pack("!hhh", 0, 0, 0))
        self._send(b"E", b"\0" + struct.pack("!i", 0))
        self._send(b"S", b"")
        self._until_ready()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._send(b"X", b"")
        self.sock.close()


@dataclass
class Postgres:
    process: subprocess.Popen[bytes]
    folder: Path
    port: int

    @property
    def logs(self) -> dict[str, Path]:
        return {
            APP_PREFIX: self.folder / "pg.log",
            "csvlog": self.folder / "pg.csv",
            "jsonlog": self.folder / "pg.json",
        }

    def stop(self) -> None:
        if self.process.poll() is None:
            # The postmaster (runuser, when there is one, does not pass signals on): fast shutdown.
            pid_file = self.folder / "data" / "postmaster.pid"
            with contextlib.suppress(OSError, ValueError, IndexError):
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def _as_user(command: list[str], user: str | None) -> list[str]:
    return ["runuser", "-u", user, "--", *command] if user else command


def _server_user() -> str | None:
    """Who runs the server: PostgreSQL refuses root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    pytest.skip("running as root and no postgres or nobody user to run PostgreSQL as")


def _wait_ready(server: Postgres) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            out = (server.folder / "server.out").read_text(errors="replace")
            pytest.fail(f"postgres exited with {server.process.returncode}: {out}")
        try:
            PgClient(server.port, "ready-check").close()
            return
        except (OSError, PgError):
            time.sleep(0.1)
    pytest.fail("postgres did not accept connections within 30 s")


@pytest.fixture
def postgres() -> Iterator[Postgres]:
    if INITDB is None or POSTGRES is None:
        pytest.skip("PostgreSQL server is not installed (apt: postgresql)")
    user = _server_user()
    if user is not None and shutil.which("runuser") is None:
        pytest.skip("running as root without runuser")
    folder = Path(tempfile.mkdtemp(prefix="pinchpoint-pg-"))
    process = None
    try:
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(folder, entry.pw_uid, entry.pw_gid)
        initdb = subprocess.run(
            _as_user(
                [INITDB, "-D", str(folder / "data"), "-U", "postgres", "--auth=trust", "--no-sync"],
                user,
            ),
            capture_output=True,
            timeout=120,
            cwd=folder,
            check=False,
        )
        if initdb.returncode != 0:
            pytest.fail(f"initdb failed: {initdb.stderr.decode(errors='replace')}")
        port = free_port()
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(port),
            "unix_socket_directories": str(folder),
            "logging_collector": "on",
            "log_destination": "stderr,csvlog,jsonlog",
            "log_directory": str(folder),
            "log_filename": "pg.log",
            "log_file_mode": "0644",
            "log_line_prefix": APP_PREFIX,
            "log_min_duration_statement": "0",
            "log_timezone": "UTC",
            "lc_messages": "C",
            "log_checkpoints": "off",
            "fsync": "off",
        }
        command = [POSTGRES, "-D", str(folder / "data")]
        for key, value in settings.items():
            command += ["-c", f"{key}={value}"]
        with open(folder / "server.out", "wb") as out:
            process = subprocess.Popen(
                _as_user(command, user),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=folder,
                start_new_session=True,
            )
        server = Postgres(process, folder, port)
        _wait_ready(server)
        yield server
    finally:
        if process is not None:
            Postgres(process, folder, 0).stop()
        shutil.rmtree(folder, ignore_errors=True)


def wait_for_text(path: Path, text: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.05)
    pytest.fail(f"{path} did not log {text!r}")


def test_real_postgres_logs_are_matched_by_tag(postgres: Postgres) -> None:
    tagged = PgClient(postgres.port, "pp_run=r1&pp_users=4&pp_req=17")
    plain = PgClient(postgres.port, "psql")
    header = PgClient(postgres.port, "run=r1; users=16; req=21")
    try:
        tagged.query("SELECT 0")  # before the mark
        wait_for_text(postgres.logs["jsonlog"], "SELECT 0")
        positions = {fmt: mark(path) for fmt, path in postgres.logs.items()}
        started = time.time()

        tagged.query("SELECT 1")
        tagged.query("SELECT pg_sleep(0.05) /*pp_run='r1',pp_users='8',pp_req='18'*/")
        tagged.extended("SELECT 2 /*pp_run='r1',pp_users='8',pp_req='19'*/")
        plain.query("SELECT 3")
        plain.query("SELECT 4 /*pp_run='r0',pp_users='1',pp_req='1'*/")
        plain.query("SELECT\n5 /*pp_run='r1',pp_users='2',pp_req='20'*/")
        header.query("SELECT 6")
        plain.query("SELECT 'done'")
        for path in postgres.logs.values():
            wait_for_text(path, "SELECT 'done'")
        finished = time.time()
    finally:
        for client in (tagged, plain, header):
            client.close()

    results = {
        fmt: collect_component("db", path, get_parser("postgresql", fmt), "r1", positions[fmt])
        for fmt, path in postgres.logs.items()
    }
    postgres.stop()

    # stderr: the extended protocol's parse and bind lines and the continuation line of the
    # two-line statement are no records (untagged); that statement's comment is on the
    # continuation line.
    rows, counts = results[APP_PREFIX]
    assert counts == FileCounts(
        component="db",
        path=str(postgres.logs[APP_PREFIX]),
        lines=11,
        matched=4,
        other_run=1,
        untagged=6,
        unparseable=0,
        unparseable_lines=[],
    )
    assert [(row.users, row.req_id) for row in rows] == [(4, 17), (8, 18), (8, 19), (16, 21)]
    # csvlog: the two-line record is given on its second line, its first line is no record.
    rows_csv, counts_csv = results["csvlog"]
    assert (counts_csv.lines, counts_csv.matched, counts_csv.other_run) == (11, 5, 1)
    assert (counts_csv.untagged, counts_csv.unparseable) == (5, 0)
    # jsonlog: one line a record.
    rows_json, counts_json = results["jsonlog"]
    assert (counts_json.lines, counts_json.matched, counts_json.other_run) == (10, 5, 1)
    assert (counts_json.untagged, counts_json.unparseable) == (4, 0)
    expected = [(4, 17), (8, 18), (8, 19), (2, 20), (16, 21)]
    for found in (rows_csv, rows_json):
        assert [(row.users, row.req_id) for row in found] == expected

    for found in (rows, rows_csv, rows_json):
        sleep = next(row for row in found if row.req_id == 18)
        assert 0.05 <= sleep.duration_s < 5
        for row in found:
            assert row.component == "db"
            assert 0 < row.duration_s < 5
            assert row.status is None and row.upstream_s is None
            assert row.ts is not None and started - 1 <= row.ts <= finished + 1
    # The three logs give the same durations (PostgreSQL writes one message to each).
    assert [row.duration_s for row in rows_csv] == [row.duration_s for row in rows_json]


def test_default_prefix_constant() -> None:
    assert POSTGRESQL_PREFIX == "%m [%p] "
