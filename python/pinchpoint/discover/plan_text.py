"""The plan `init` writes: the target, a load with safe defaults, and each tier found as a
component, every fact with a comment on where it came from and every gap as a warning."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from pinchpoint.discover.otel import otlp_lines
from pinchpoint.discover.steps import Steps, steps_for
from pinchpoint.discover.stores import sampled_lines
from pinchpoint.discover.tier import Tier
from pinchpoint.discover.walk import Discovery


def _quoted(value: str) -> str:
    return json.dumps(value)


def plan_text(found: Discovery) -> str:
    """The plan's text; a target and load alone when no tier was found."""
    parts = urlsplit(found.url)
    path = parts.path or "/"
    if parts.query:
        path += f"?{parts.query}"
    target = f"{parts.scheme}://{parts.netloc}"
    steps = steps_for(found.tiers)
    lines = [
        "# Written by `pinchpoint init` from the processes serving this URL on this host.",
        "# Each component says where its facts came from; check them, then `pinchpoint run`.",
        *(f"# {n}" for n in found.notes),
        *(f"# warning: {p}" for p in found.problems),
        "",
        "[target]",
        f"url = {_quoted(target)}",
        "",
        "[load]",
        *_load_comment(steps),
        f"lower = {steps.lower}",
        f"upper = {steps.upper}",
        f"step = {steps.step}",
        f'duration = "{steps.duration_s}s"',
        'warmup = "1s"',
        'timeout = "10s"',
        "",
        "[[request]]",
        f"path = {_quoted(path)}",
        *([f"method = {_quoted(found.method)}"] if found.method != "GET" else []),
    ]
    for tier in found.tiers:
        lines += ["", *_component(tier, found.calls.get(tier.name, []))]
    spans = otlp_lines([t for t in found.tiers if t.host is None])
    if spans:
        lines += ["", *spans]
    for name, url in found.agents.items():
        if any(t.host == name for t in found.tiers):
            lines += ["", "[[agent]]", f"name = {_quoted(name)}", f"url = {_quoted(url)}"]
            if found.token_env:
                lines.append(f"token_env = {_quoted(found.token_env)}")
    return "\n".join(lines) + "\n"


def agent_components(found: Discovery) -> dict[str, str]:
    """Per agent that serves tiers, the `[[component]]` tables its own config must hold:
    an agent reads only the logs and pid files its config names."""
    out = {}
    for name in found.agents:
        tiers = [t for t in found.tiers if t.host == name]
        if tiers:
            lines = [
                f"# Add to agent {name}'s config, then restart it: `pinchpoint init` found these",
                "# tiers on its host.",
            ]
            for tier in tiers:
                lines += ["", *_watched(tier)]
            out[name] = "\n".join(lines) + "\n"
    return out


def _load_comment(steps: Steps) -> list[str]:
    lines = ["# From 1 user to about twice the requests the stack's pools serve at once."]
    if steps.finest is not None:
        lines.append(
            f"# Steps of {steps.step}: at most a third of its smallest pool or limit "
            f"({steps.finest}), to see where it starts to fill."
        )
    return lines


def _component(tier: Tier, calls: list[str]) -> list[str]:
    lines = [f"# {note}" for note in tier.notes]
    lines += [f"# warning: {warning}" for warning in tier.warnings]
    lines += [
        "[[component]]",
        f"name = {_quoted(tier.name)}",
        f"role = {_quoted(tier.role)}",
        f"calls = [{', '.join(_quoted(c) for c in calls)}]",
    ]
    if tier.host is not None:
        return [
            *lines,
            f"host = {_quoted(tier.host)}  # its log and processes: in the agent's config",
        ]
    lines += _watched(tier)[2:]
    if tier.sampled_as is not None:
        lines += sampled_lines(tier)
    elif tier.role == "database" and tier.name.startswith("postgres"):
        lines += _database(tier)
    return lines


def _database(tier: Tier) -> list[str]:
    """The `[component.database]` table: the server sampled from inside during the run,
    through a connection string the user puts in a variable (the plan holds no secret)."""
    variable = f"PINCHPOINT_{tier.name.upper().replace('-', '_').replace('.', '_')}_DSN"
    dsn = tier.client_dsn or "host=127.0.0.1 port=5432 user=USER dbname=DATABASE"
    said = "as its clients connect" if tier.client_dsn else "with the apps' user and database"
    if tier.client_dsn:
        return [
            "[component.database]",
            "# Sampled from inside during the run (pg_stat_activity, pg_locks), connecting",
            "# as its clients do; a password comes from PGPASSWORD or ~/.pgpass, never the",
            f"# plan. {variable}, where set, connects instead.",
            f"connection = {_quoted(tier.client_dsn)}",
            f"dsn_env = {_quoted(variable)}",
        ]
    return [
        "[component.database]",
        "# Sampled from inside during the run (pg_stat_activity, pg_locks). Before",
        f"# `pinchpoint run`, set {variable} to a connection string {said}, its password",
        "# in PGPASSWORD or ~/.pgpass, never in the plan:",
        f"#   export {variable}={_quoted(dsn)}",
        f"dsn_env = {_quoted(variable)}",
    ]


def _watched(tier: Tier) -> list[str]:
    """The component's name, log and processes: what the host that runs it reads."""
    lines = ["[[component]]", f"name = {_quoted(tier.name)}"]
    if tier.log_path is not None and tier.log_format is not None:
        lines += ["[component.log]", f"path = {_quoted(str(tier.log_path))}"]
        lines.append(f"format = {_quoted(tier.log_format)}")
        if tier.log_format_string is not None:
            lines.append(f"log_format = {_quoted(tier.log_format_string)}")
    if tier.role == "app":
        return lines  # it runs in its server's processes, sampled there
    lines.append("[component.process]")
    if tier.pid_file is not None:
        lines.append(f"pid_file = {_quoted(str(tier.pid_file))}")
    elif tier.process_name is not None:
        lines.append(f"name = {_quoted(tier.process_name)}  # no pid file: its processes' name")
    else:
        lines.append(f"pids = [{tier.pid}]  # no pid file found: valid while this process runs")
    return lines
