"""Headless Chromium driven over the DevTools protocol: open a page, evaluate JavaScript
in it while it lives, and keep every console error and uncaught exception it raised."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import websocket

from pinchpoint_lab.ports import end

LISTENING = re.compile(r"DevTools listening on (ws://\S+)")


class Page:
    """One tab: `open(url)`, `evaluate(js)`; `errors` holds what its console reported."""

    def __init__(self, ws_url: str) -> None:
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.errors: list[str] = []
        self.call("Runtime.enable")
        self.call("Log.enable")
        self.call("Page.enable")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        sent = self.next_id
        self.ws.send(json.dumps({"id": sent, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == sent:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self._event(message)

    def _event(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            self.errors.append(f"exception: {text}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = [a.get("value", a.get("description")) for a in params.get("args", [])]
            self.errors.append(f"console.{params['type']}: {args}")
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} ({entry.get('url', '')})")

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            return None  # the page is between two documents
        return result["result"].get("value")

    def close(self) -> None:
        self.ws.close()


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def browser(profile: Path) -> Iterator[Page]:
    """A headless Chromium with a blank tab, closed on exit."""
    exe = chromium()
    if exe is None:
        raise RuntimeError("chromium not found (apt: chromium)")
    argv = [
        exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0", "about:blank",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    page: Page | None = None
    try:
        endpoint = _endpoint(proc)
        # Chromium keeps writing to stderr: read it away so that it never blocks on a pipe.
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # type: ignore[union-attr]
        port = endpoint.split(":")[2].split("/")[0]
        targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
        tab = next(t for t in targets if t.get("type") == "page")
        page = Page(tab["webSocketDebuggerUrl"])
        yield page
    finally:
        if page is not None:
            page.close()
        end(proc)


def _endpoint(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        if found := LISTENING.search(line):
            return found.group(1)
    raise RuntimeError("chromium did not start its DevTools endpoint:\n" + "".join(seen[-20:]))
