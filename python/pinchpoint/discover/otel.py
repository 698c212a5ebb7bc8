"""What an app's processes say of their OpenTelemetry exporter: the few `OTEL_*` variables
that say where its spans go, read from /proc/PID/environ with the process owner's rights.
No other variable is kept, not even other `OTEL_*` ones (OTEL_EXPORTER_OTLP_HEADERS holds
tokens); and the `[[otlp]]` receiver the plan suggests, with how to point the app at it."""

from __future__ import annotations

from urllib.parse import urlsplit

from pinchpoint.collect.servers.files import read_bytes
from pinchpoint.discover.listeners import Sockets
from pinchpoint.discover.tier import Address, Tier

# The variables kept: where spans go, over what, and under which service name.
KEPT = (
    "OTEL_SERVICE_NAME",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
)
MOST_ENVIRON_BYTES = 256 * 1024
# Where pinchpoint receives spans when the app's own endpoint is taken (a Collector there).
DEFAULT_LISTEN = Address("127.0.0.1", 4318)
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def otel_of(pids: set[int]) -> dict[str, str]:
    """The kept OTEL_* variables of these processes (the first process to set one wins, in
    pid order); {} when none sets one or none can be read."""
    found: dict[str, str] = {}
    for pid in sorted(pids):
        try:
            raw = read_bytes(f"/proc/{pid}/environ", MOST_ENVIRON_BYTES)
        except OSError:
            continue
        for entry in raw[:MOST_ENVIRON_BYTES].split(b"\0"):
            if not entry.startswith(b"OTEL_"):
                continue
            name, _, value = entry.decode(errors="replace").partition("=")
            if name in KEPT:
                found.setdefault(name, value)
    return found


def exports_traces(otel: dict[str, str]) -> bool:
    """Whether the variables say the app exports traces over OTLP (OTEL_TRACES_EXPORTER
    unset is otlp, as the SDKs read it)."""
    exporters = otel.get("OTEL_TRACES_EXPORTER", "otlp").lower().split(",")
    return bool(otel) and "otlp" in (e.strip() for e in exporters)


def otlp_lines(tiers: list[Tier], sockets: Sockets | None = None) -> list[str]:
    """The `[[otlp]]` table for the tiers whose processes export OTEL_* variables, with
    comments on how to point their exporter at it; [] when none does."""
    exporting = [t for t in tiers if t.otel]
    if not exporting:
        return []
    sockets = sockets if sockets is not None else Sockets.read()
    listen, already = _listen_at(exporting, sockets)
    lines = [f"# {t.name} exports OpenTelemetry: {_said(t.otel)}" for t in exporting]
    silent = [t.name for t in exporting if not exports_traces(t.otel)]
    if silent:
        lines.append(
            f"# warning: {', '.join(silent)} export no traces over OTLP (OTEL_TRACES_EXPORTER): "
            "set OTEL_TRACES_EXPORTER=otlp"
        )
    if already:
        lines.append(
            f"# They already send spans to {listen}, where nothing listens now: pinchpoint "
            "receives them there during the run (OTLP over HTTP: "
            "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf)."
        )
    else:
        lines += [
            f"# To receive their spans, point the exporter at pinchpoint and restart the app: "
            f"OTEL_EXPORTER_OTLP_ENDPOINT=http://{listen}",
            "# and OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf (pinchpoint receives OTLP over",
            f"# HTTP); or add an otlphttp exporter to http://{listen} to their Collector.",
        ]
    return [*lines, "[[otlp]]", f'listen = "{listen}"']


def _said(otel: dict[str, str]) -> str:
    return ", ".join(f"{k}={otel[k]}" for k in KEPT if k in otel)


def _listen_at(tiers: list[Tier], sockets: Sockets) -> tuple[str, bool]:
    """Where pinchpoint should listen: the loopback endpoint the app already sends to when
    nothing listens there, else the default port (the next one while it is taken)."""
    for tier in tiers:
        endpoint = tier.otel.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or tier.otel.get(
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        )
        if not endpoint:
            continue
        try:
            parts = urlsplit(endpoint)
            port = parts.port
        except ValueError:
            continue
        if parts.hostname in _LOOPBACK and port and sockets.listener(Address("127.0.0.1", port)):
            continue
        if parts.hostname in _LOOPBACK and port:
            return f"127.0.0.1:{port}", True
    port = DEFAULT_LISTEN.port or 4318
    while sockets.listener(Address("127.0.0.1", port)) is not None and port < 4418:
        port += 1
    return f"127.0.0.1:{port}", False
