"""`--serve 0.0.0.0:PORT`: the page's printed addresses are this host's own, each one a
page that answers, never the wildcard; a named address is printed as given."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import psutil

from pinchpoint.outputs.addresses import reachable_hosts
from pinchpoint.outputs.live_page import LivePage


def _own_ipv4() -> set[str]:
    return {
        a.address
        for addresses in psutil.net_if_addrs().values()
        for a in addresses
        if a.family.name == "AF_INET"
    }


def test_a_wildcard_page_is_printed_at_each_address_and_each_answers() -> None:
    with LivePage("0.0.0.0", 0, "r1") as page:
        urls = page.urls
        print(f"\n{urls}")
        assert page.url == urls[0] and all("0.0.0.0" not in url for url in urls)
        assert {url.split("//", 1)[1].split(":", 1)[0] for url in urls} == _own_ipv4()
        assert urls[-1].startswith(f"http://127.0.0.1:{page.port}/?token=")
        for url in urls:
            assert httpx.get(url, timeout=5).status_code == 200, url


def test_a_named_address_is_printed_as_given() -> None:
    assert reachable_hosts("127.0.0.1") == ["127.0.0.1"]
    assert reachable_hosts("::1") == ["[::1]"]
    assert reachable_hosts("localhost") == ["localhost"]
    both = reachable_hosts("::")
    assert "127.0.0.1" in both and "[::1]" in both and "::" not in both


def test_run_prints_the_wildcard_s_addresses(tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text(
        '[target]\nurl = "http://127.0.0.1:9"\n\n[load]\nusers = 1\nduration = "1s"\n\n'
        '[[request]]\npath = "/"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "pinchpoint", "run", "plan.toml", "-q", "--serve", "0.0.0.0:0",
         "--serve-linger", "0"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "COLUMNS": "400"},
    )  # fmt: skip
    [line] = [x for x in done.stdout.splitlines() if x.startswith("Live page: ")]
    print(f"\n{line}")
    assert "0.0.0.0" not in line and "http://127.0.0.1:" in line
    for address in _own_ipv4():
        assert f"http://{address}:" in line
