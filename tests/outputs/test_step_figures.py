"""Per-step figures of a real run, live: steps of 1.5 s, whose seconds straddle their
boundaries, counted in the `--out` lines and on `/metrics` by the step each request was
sent in, equal to requests.parquet's per-step counts."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import polars as pl

from pinchpoint.rundir import files
from pinchpoint_cli import run_scraped_at_its_end
from pinchpoint_lab.serving import serving

SAMPLE = re.compile(r'^(?P<name>[a-z_]+)\{run_id="[^"]*",step="(?P<step>\d+)"\} (?P<value>\S+)$')


class _Target(BaseHTTPRequestHandler):
    """5 ms then 200 on /ok, 503 at once on anything else."""

    def do_GET(self) -> None:
        ok = self.path.startswith("/ok")
        if ok:
            time.sleep(0.005)
        self.send_response(200 if ok else 503)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        return


def _by_step(text: str, name: str) -> dict[int, int]:
    out = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and m["name"] == name:
            out[int(m["step"])] = int(float(m["value"]))
    return out


def test_out_lines_and_metrics_count_each_step_as_its_records(tmp_path: Path) -> None:
    with serving(_Target) as target:
        (tmp_path / "plan.toml").write_text(
            f'[target]\nurl = "http://127.0.0.1:{target}"\n\n'
            '[load]\nlower = 2\nupper = 6\nstep = 2\nduration = "1.5s"\nwarmup = "0s"\n'
            'think_time = "10ms"\n\n'
            '[[request]]\npath = "/ok"\nweight = 4\n\n[[request]]\npath = "/fail"\n'
        )
        returncode, stderr, scraped = run_scraped_at_its_end(tmp_path, "--out", "s.jsonl")
    assert returncode in (0, 1), stderr
    [run_dir] = (tmp_path / "runs").iterdir()
    records = pl.read_parquet(run_dir / files.REQUESTS)
    sent = dict(records.group_by("step").len().iter_rows())
    failed = dict(records.filter(pl.col("status") >= 400).group_by("step").len().iter_rows())
    answered = dict(records.filter(pl.col("error").is_null()).group_by("step").len().iter_rows())
    lines = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    out_sent: Counter[int] = Counter()
    out_failed: Counter[int] = Counter()
    for line in lines:
        out_sent[line["step"]] += line["requests"]
        out_failed[line["step"]] += line["errors"]
    print(f"\nrequests.parquet {sent}, --out {dict(out_sent)}, {len(lines)} lines")
    assert sorted(sent) == [0, 1, 2] and all(failed.get(s) for s in sent)
    assert dict(out_sent) == sent and dict(out_failed) == failed
    # A second straddling a boundary is two lines, each with its step's share of it.
    assert len(lines) > len({x["time"] for x in lines})
    for step in sent:
        ran = sum(x["seconds"] for x in lines if x["step"] == step)
        assert 1.2 < ran < 1.9, (step, ran)
    assert _by_step(scraped, "pinchpoint_step_requests_total") == sent
    assert _by_step(scraped, "pinchpoint_step_errors_total") == failed
    assert _by_step(scraped, "pinchpoint_latency_seconds_count") == answered
