"""Where nginx sends a request: the `server` listening where it arrived, the `location`
its path matches (as nginx chooses: `=`, the longest prefix, `^~`, regexes in order), and
the addresses that location passes it on to (an `upstream`'s servers included)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pinchpoint.discover.configs import host_matches
from pinchpoint.discover.nginx_conf import Directive
from pinchpoint.discover.tier import Address, Tier

_PASSES = ("proxy_pass", "uwsgi_pass", "fastcgi_pass", "grpc_pass", "scgi_pass")
_SCHEME_PORTS = {"http": 80, "https": 443, "grpc": 80, "grpcs": 443}


@dataclass(frozen=True)
class _Listen:
    host: str | None
    port: int | None
    unix: str | None
    default: bool


def _host_port(spec: str, default_port: int | None) -> tuple[str | None, int | None]:
    """`host:port`, `[v6]:port`, `host` or `port` as its host and port."""
    if spec.isdigit():
        return None, int(spec)
    if spec.startswith("["):
        host, _, rest = spec[1:].partition("]")
        port = rest.removeprefix(":")
        return host, int(port) if port.isdigit() else default_port
    host, sep, port = spec.rpartition(":")
    if sep and port.isdigit():
        return host, int(port)
    return spec, default_port


def _listens(server: Directive) -> list[_Listen]:
    found = []
    for listen in server.all("listen") or [Directive("listen", ["80"], server.file, server.line)]:
        spec = listen.args[0] if listen.args else "80"
        default = bool({"default_server", "default"} & set(listen.args[1:]))
        if spec.startswith("unix:"):
            found.append(_Listen(None, None, spec.removeprefix("unix:"), default))
        else:
            host, port = _host_port(spec, 80)
            found.append(_Listen(host, port, None, default))
    return found


def _reaches(listen: _Listen, address: Address) -> bool:
    if address.unix is not None:
        return listen.unix is not None and Path(listen.unix) == address.unix
    return listen.port == address.port and host_matches(listen.host, address.host)


def _serves_name(server: Directive, host: str) -> bool:
    for directive in server.all("server_name"):
        for name in directive.args:
            if name == host or (name.startswith("*.") and host.endswith(name[1:])):
                return True
            if name.startswith(".") and (host == name[1:] or host.endswith(name)):
                return True
            if name.endswith(".*") and host.startswith(name[:-1]):
                return True
    return False


def server_for(http: Directive, address: Address, tier: Tier) -> Directive | None:
    """The server block a request to address reaches: the one named for its host, else the
    default_server, else the first listening there."""
    listening = [(s, at) for s in http.all("server") for at in _listens(s) if _reaches(at, address)]
    if not listening:
        tier.warnings.append(f"no server block of the config listens at {address}")
        return None
    host = address.host or ""
    named = [s for s, _ in listening if _serves_name(s, host)]
    defaults = [s for s, listen in listening if listen.default]
    if named:
        server, why = named[0], f"server_name {host}"
    elif defaults:
        server, why = defaults[0], "default_server"
    else:
        server, why = listening[0][0], "the first listening there"
    tier.notes.append(f"server block {server.where} ({why}) serves {address}")
    return server


def _location_spec(location: Directive) -> tuple[str, str]:
    """A location's modifier (`=`, `^~`, `~`, `~*`, `@` or none) and its pattern."""
    args = location.args
    if len(args) >= 2:
        return args[0], args[1]
    spec = args[0] if args else ""
    for modifier in ("=", "^~", "~*", "~", "@"):
        if spec.startswith(modifier) and len(spec) > len(modifier):
            return modifier, spec[len(modifier) :]
    return "", spec


def _regex_matches(pattern: str, path: str, modifier: str) -> bool:
    try:
        return re.search(pattern, path, re.IGNORECASE if modifier == "~*" else 0) is not None
    except re.error:  # PCRE that Python's re does not take: taken not to match
        return False


def _location(block: Directive, path: str) -> Directive | None:
    """The location of block that serves path, as nginx chooses: an exact `=` match, else
    the longest prefix if it is `^~`, else the first regex that matches, else the longest
    prefix."""
    longest: tuple[int, str, Directive | None] = (-1, "", None)
    regexes = []
    for location in block.all("location"):
        modifier, pattern = _location_spec(location)
        if modifier == "=" and path == pattern:
            return location
        if modifier in ("", "^~") and path.startswith(pattern) and len(pattern) > longest[0]:
            longest = (len(pattern), modifier, location)
        elif modifier in ("~", "~*"):
            regexes.append((location, modifier, pattern))
    if longest[1] == "^~":
        return longest[2]
    for location, modifier, pattern in regexes:
        if _regex_matches(pattern, path, modifier):
            return location
    return longest[2]


def locations_for(server: Directive, path: str) -> list[Directive]:
    """The locations nested one in the next that serve path, outermost first."""
    found = _location(server, path)
    return [found, *locations_for(found, path)] if found is not None else []


def _pass_of(location: Directive) -> Directive | None:
    return next((d for d in location.block or [] if d.name in _PASSES), None)


def _named(server: Directive, name: str) -> Directive | None:
    named = (loc for loc in server.all("location") if _location_spec(loc) == ("@", name))
    return next(named, None)


def next_hops(
    locations: list[Directive], server: Directive, http: Directive, path: str, tier: Tier
) -> None:
    if not locations:
        tier.notes.append(f"no location of {server.where} matches {path}: nginx serves files")
        return
    location = locations[-1]
    tier.notes.append(f"location {' '.join(location.args)} from {location.where} serves {path}")
    passing = _pass_of(location)
    try_files = location.first("try_files")
    last = try_files.args[-1] if try_files is not None and try_files.args else ""
    if passing is None and last.startswith("@"):
        named = _named(server, last[1:])
        passing = _pass_of(named) if named is not None else None
    if passing is None:
        answer = "answers with `return`" if location.first("return") else "serves files"
        tier.notes.append(f"that location {answer}: no next tier")
        return
    if not passing.args or "$" in passing.args[0]:
        tier.warnings.append(
            f"{passing.name} at {passing.where} picks its upstream at run time: add the next "
            "tier's component by hand"
        )
        return
    tier.notes.append(f"{passing.name} {passing.args[0]} from {passing.where}")
    upstreams = {u.args[0]: u for u in http.all("upstream") if u.args}
    tier.next_hops += _hops(passing, upstreams, tier)


def _hops(passing: Directive, upstreams: dict[str, Directive], tier: Tier) -> list[Address]:
    """The addresses a *_pass value names: its host and port, a unix socket, or the servers
    of an upstream block."""
    scheme, sep, rest = passing.args[0].partition("://")
    if not sep:
        scheme, rest = "", passing.args[0]
    if rest.startswith("unix:"):
        return [Address(unix=Path(rest.removeprefix("unix:").split(":", 1)[0]))]
    host, port = _host_port(rest.split("/", 1)[0], None)
    if port is None and host in upstreams:
        return _upstream_hops(upstreams[host], tier)
    port = port or _SCHEME_PORTS.get(scheme)
    if host is None or port is None:
        tier.warnings.append(
            f"{passing.name} at {passing.where} names no port: add the next tier by hand"
        )
        return []
    return [Address(host, port)]


def _upstream_hops(upstream: Directive, tier: Tier) -> list[Address]:
    hops = []
    for server in upstream.all("server"):
        if not server.args or "down" in server.args[1:]:
            continue
        if "backup" in server.args[1:]:
            tier.notes.append(f"backup server {server.args[0]} from {server.where} not followed")
            continue
        spec = server.args[0]
        if spec.startswith("unix:"):
            hops.append(Address(unix=Path(spec.removeprefix("unix:"))))
        else:
            host, port = _host_port(spec, 80)
            hops.append(Address(host, port))
        tier.notes.append(f"upstream {upstream.args[0]}: server {spec} from {server.where}")
    return hops
