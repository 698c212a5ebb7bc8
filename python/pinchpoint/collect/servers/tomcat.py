"""Tomcat's thread pool as its server.xml sets it: one Java process whose HTTP connectors
each serve `maxThreads` requests at once (200 unless set), from their own threads or from
the `<Executor>` they name; past them connections wait, `acceptCount` of them in the
listen backlog. server.xml is `$CATALINA_BASE/conf/server.xml` (or `-config FILE`), the
base read from `-Dcatalina.base`; `${name}` in an attribute is filled from the `-D`
properties of the command line."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from pinchpoint.collect.servers.files import read_text
from pinchpoint.collect.servers.pool import THREADS, Pool, ServerProcess

_BOOTSTRAP = "org.apache.catalina.startup.Bootstrap"
DEFAULT_THREADS = 200
_PROPERTY = re.compile(r"\$\{([^}]+)\}")


def is_tomcat(argv: Sequence[str]) -> bool:
    """Whether the command line is a JVM running Tomcat's Bootstrap."""
    return _BOOTSTRAP in argv


def _properties(argv: Sequence[str]) -> dict[str, str]:
    return dict(a[2:].partition("=")[::2] for a in argv if a.startswith("-D") and "=" in a)


def server_xml(process: ServerProcess) -> Path | None:
    """Its server.xml: `-config FILE` after Bootstrap, else `conf/server.xml` of its base."""
    argv = process.argv
    properties = _properties(argv)
    base = properties.get("catalina.base") or properties.get("catalina.home")
    after = argv[argv.index(_BOOTSTRAP) + 1 :] if _BOOTSTRAP in argv else []
    if "-config" in after[:-1]:
        name = after[after.index("-config") + 1]
        return Path(name) if Path(name).is_absolute() or base is None else Path(base) / name
    return None if base is None else Path(base) / "conf" / "server.xml"


def read(process: ServerProcess, cores: int, files: bool) -> Pool:
    """The pool of the Tomcat that `process` is: the threads of its HTTP connectors, an
    executor shared by several counted once; Tomcat's default when server.xml is not read."""
    path = server_xml(process) if files else None
    described = _connectors(path, _properties(process.argv)) if path is not None else None
    if not described:
        return Pool(
            "tomcat",
            THREADS,
            1,
            DEFAULT_THREADS,
            "Tomcat's default maxThreads (server.xml not read)",
        )
    pools: dict[str, tuple[int, str]] = {}
    for key, threads, text in described:
        pools.setdefault(key, (threads, text))
    threads = sum(t for t, _ in pools.values())
    sources = "; ".join(text for _, text in pools.values())
    return Pool("tomcat", THREADS, 1, threads, f"{sources} (config file {path})")


def _connectors(path: Path, properties: dict[str, str]) -> list[tuple[str, int, str]]:
    """Each HTTP connector's pool: a key (its executor's name, or the connector's own),
    its threads and what was read."""
    try:
        root = ET.fromstring(read_text(path))
    except (OSError, ET.ParseError, RecursionError):
        return []
    found = []
    for service in root.iter("Service"):
        executors = {e.get("name", ""): e for e in service.iter("Executor")}
        for index, connector in enumerate(service.iter("Connector")):
            if "AJP" in connector.get("protocol", "").upper():
                continue
            port = _filled(connector.get("port", "?"), properties)
            accept = _filled(connector.get("acceptCount", "100"), properties)
            executor = executors.get(connector.get("executor", ""))
            if executor is not None:
                name = executor.get("name", "")
                threads = _threads(executor.get("maxThreads"), properties)
                text = f"Connector port {port}: Executor {name} maxThreads = {threads}"
                key = f"executor {name}"
            else:
                threads = _threads(connector.get("maxThreads"), properties)
                text = f"Connector port {port}: maxThreads = {threads}"
                key = f"connector {index}"
            found.append((key, threads, f"{text}, acceptCount = {accept}"))
    return found


def _filled(value: str, properties: dict[str, str]) -> str:
    return _PROPERTY.sub(lambda m: properties.get(m.group(1), m.group(0)), value)


def _threads(value: str | None, properties: dict[str, str]) -> int:
    """maxThreads as Tomcat takes it: Tomcat's default when unset or not a positive count."""
    try:
        threads = int(_filled(value, properties)) if value is not None else DEFAULT_THREADS
    except ValueError:
        return DEFAULT_THREADS
    return threads if threads > 0 else DEFAULT_THREADS
