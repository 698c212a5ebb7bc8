"""The Tomcat tier, from the server.xml its JVM runs (`-Dcatalina.base`, or `-config`): the
HTTP Connector listening where the request arrived, its threads (its own maxThreads or its
Executor's), and the AccessLogValve of that Connector's Service (on its Host, else its
Engine): its file (directory, prefix, date, suffix) and its pattern."""

from __future__ import annotations

import datetime
import xml.etree.ElementTree as ET
from pathlib import Path

from pinchpoint.collect.servers.files import read_text
from pinchpoint.collect.servers.pool import ServerProcess
from pinchpoint.collect.servers.tomcat import DEFAULT_THREADS, server_xml
from pinchpoint.discover.app_process import add_calls, server_process
from pinchpoint.discover.configs import check_pid_file, host_matches
from pinchpoint.discover.tier import Address, Tier
from pinchpoint.discover.unknown import choose_processes
from pinchpoint.logformats.base import FormatError
from pinchpoint.logformats.tomcat import NAMED, TOMCAT_FORMAT, parser_for

NAME = "tomcat"
_VALVE = "org.apache.catalina.valves.AccessLogValve"
# The valve's defaults (Tomcat 10's AccessLogValve).
_DEFAULTS = {
    "directory": "logs",
    "prefix": "access_log",
    "suffix": "",
    "pattern": "common",
    "rotatable": "true",
    "fileDateFormat": ".yyyy-MM-dd",
    "buffered": "true",
}
# SimpleDateFormat's letters in a fileDateFormat, as strftime's.
_DATE_LETTERS = {"yyyy": "%Y", "yy": "%y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M"}
# The keys of a parsed pattern whose values carry the run's tag.
_TAGGED = ("r", "q", "i:x-pinchpoint")
_PID_VARIABLE = "CATALINA_PID"


def read(pid: int, argv: list[str], address: Address, path: str) -> Tier:
    """The Tomcat tier whose JVM is `pid`, for a request that reached it at `address`."""
    process = server_process(pid, argv, environ=True)
    tier = Tier(NAME, "app_server", pid)
    config = server_xml(process)
    if config is None:
        tier.warnings.append(
            "its command line names no catalina.base: server.xml is not read; add its access "
            "log by hand"
        )
    else:
        _read_config(tier, process, config, address)
    _pid_file(tier, process)
    if tier.pid_file is None:
        choose_processes(tier, argv)
    add_calls(tier)
    return tier


def _read_config(tier: Tier, process: ServerProcess, config: Path, address: Address) -> None:
    try:
        root = ET.fromstring(read_text(config))
    except OSError as e:
        tier.warnings.append(f"cannot read {config}: {e.strerror or type(e).__name__}")
        return
    except (ET.ParseError, RecursionError) as e:
        tier.warnings.append(f"{config} is not XML Tomcat can read ({e})")
        return
    properties = _properties(process.argv)
    for service in root.iter("Service"):
        connector = _connector_at(service, address, properties)
        if connector is not None:
            tier.notes.append(f"Connector port {address.port} of Service {service.get('name')}")
            _threads(tier, service, connector, config, properties)
            _access_log(tier, service, config, properties)
            return
    tier.warnings.append(
        f"no HTTP Connector of {config} listens at {address}: add its access log by hand"
    )


def _properties(argv: list[str]) -> dict[str, str]:
    return dict(a[2:].partition("=")[::2] for a in argv if a.startswith("-D") and "=" in a)


def _filled(value: str, properties: dict[str, str]) -> str:
    """`${name}` filled from the command line's -D properties."""
    for name, known in properties.items():
        value = value.replace("${" + name + "}", known)
    return value


def _connector_at(
    service: ET.Element, address: Address, properties: dict[str, str]
) -> ET.Element | None:
    for connector in service.findall("Connector"):
        if "AJP" in connector.get("protocol", "").upper():
            continue
        port = _filled(connector.get("port", ""), properties)
        host = connector.get("address")
        if port == str(address.port) and host_matches(host, address.host):
            return connector
    return None


def _threads(
    tier: Tier,
    service: ET.Element,
    connector: ET.Element,
    config: Path,
    properties: dict[str, str],
) -> None:
    name = connector.get("executor")
    executors = {e.get("name"): e for e in service.findall("Executor")}
    owner = executors.get(name) if name else None
    value = (owner if owner is not None else connector).get("maxThreads")
    text = _filled(value, properties) if value is not None else str(DEFAULT_THREADS)
    threads = int(text) if text.isdigit() and int(text) > 0 else DEFAULT_THREADS
    what = f"Executor {name} maxThreads" if owner is not None else "maxThreads"
    said = f"{what} = {threads}" + (" (Tomcat's default)" if value is None else "")
    accept = connector.get("acceptCount", "100")
    tier.slots = threads
    tier.notes.append(
        f"slots: {threads} threads, one request each: {said}, acceptCount = {accept} from {config}"
    )


def _access_log(tier: Tier, service: ET.Element, config: Path, properties: dict[str, str]) -> None:
    valve = _valve(service)
    if valve is None:
        tier.warnings.append(
            f'Tomcat writes no access log: add `<Valve className="{_VALVE}" directory="logs" '
            f'prefix="access" suffix=".log" rotatable="false" buffered="false" '
            f'pattern="{_in_xml(TOMCAT_FORMAT)}"/>` inside the <Host> of {config}, restart '
            "Tomcat and run init again"
        )
        return
    given = {key: _filled(value, properties) for key, value in valve.attrib.items()}
    settings = {**_DEFAULTS, **given}
    path = _log_file(settings, properties)
    tier.notes.append(f"AccessLogValve of {config}: {path}")
    if settings["rotatable"].lower() == "true":
        tier.warnings.append(
            f"its AccessLogValve ({config}) starts a new file each day, named for the day: the "
            'plan names today\'s; set rotatable="false" on it to keep one file'
        )
    if settings["buffered"].lower() == "true":
        tier.warnings.append(
            f"its AccessLogValve ({config}) buffers its lines: the last of a run may reach the "
            'file late; set buffered="false" on it'
        )
    pattern = settings["pattern"]
    try:
        parser = parser_for(pattern)
    except FormatError:
        shown = NAMED.get(pattern.strip(), pattern)
        tier.warnings.append(
            f"its AccessLogValve's pattern ({config}) logs no time per request (no %D or %T): "
            f'make it pattern="{_in_xml(shown)} %D", restart Tomcat and run init again'
        )
        return
    if not any(key in parser.groups for key in _TAGGED):
        tier.warnings.append(
            f"its AccessLogValve's pattern ({config}) logs no request line (%r): its lines "
            "cannot be matched to the run's requests; add %r"
        )
    tier.log_path, tier.log_format, tier.log_format_string = path, "tomcat", pattern
    tier.notes.append(f"log pattern from the AccessLogValve of {config}")


def _valve(service: ET.Element) -> ET.Element | None:
    """The AccessLogValve that logs the Service's requests: its default Host's, else its
    Engine's."""
    engine = service.find("Engine")
    if engine is None:
        return None
    hosts = engine.findall("Host")
    default = [h for h in hosts if h.get("name") == engine.get("defaultHost")]
    for container in [*default, *hosts, engine]:
        for valve in container.findall("Valve"):
            if valve.get("className") == _VALVE:
                return valve
    return None


def _log_file(settings: dict[str, str], properties: dict[str, str]) -> Path:
    """The file the valve writes today: directory/prefix[date]suffix, its directory under
    catalina.base."""
    folder = Path(settings["directory"])
    if not folder.is_absolute():
        base = properties.get("catalina.base") or properties.get("catalina.home") or "/"
        folder = Path(base) / folder
    date = ""
    if settings["rotatable"].lower() == "true":
        pattern = settings["fileDateFormat"]
        for letters, code in _DATE_LETTERS.items():
            pattern = pattern.replace(letters, code)
        date = datetime.datetime.now().strftime(pattern)
    return folder / f"{settings['prefix']}{date}{settings['suffix']}"


def _in_xml(pattern: str) -> str:
    return pattern.replace('"', "&quot;")


def _pid_file(tier: Tier, process: ServerProcess) -> None:
    given = process.environ.get(_PID_VARIABLE)
    if not given:
        return
    path = process.path(given)
    if problem := check_pid_file(path, process.pid):
        tier.warnings.append(problem)
        return
    tier.pid_file = path
    tier.notes.append(f"pid file {path}, from {_PID_VARIABLE} in its environment")
