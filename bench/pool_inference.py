"""How close Little's law comes to a pool's true size when nothing else tells it.

Takes the run folders a matrix run kept (`bench/diagnosis_matrix.py --keep DIR --json
FILE`), hides from each what the server said of its pool (the `pool_*` columns of
resources.parquet) and the plan's `workers`, analyzes it again, and compares the pool the
verdict inferred with the scenario's true slots, for every scenario whose truth is a full
worker pool of the app server.

    .venv/bin/python bench/pool_inference.py /tmp/keep /tmp/matrix.json
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pinchpoint.analyze import analyze

HIDDEN = ("pool_slots", "pool_kind", "pool_source")


def _hide(run: Path) -> None:
    table = pq.read_table(run / "resources.parquet")
    for name in HIDDEN:
        if name in table.column_names:
            index = table.column_names.index(name)
            table = table.set_column(
                index, name, pa.nulls(table.num_rows, table.schema.field(name).type)
            )
    pq.write_table(table, run / "resources.parquet")
    plan = run / "plan.toml"
    plan.write_text(re.sub(r"(?m)^workers = \d+\n", "", plan.read_text()))
    (run / "verdict.json").unlink(missing_ok=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("keep", type=Path)
    parser.add_argument("records", type=Path)
    args = parser.parse_args()
    near = judged = still = 0
    for record in json.loads(args.records.read_text()):
        spec, mode = record["spec"], "noisy" if record["noisy"] else "quiet"
        truth = spec["noisy_truth"] if record["noisy"] and spec["noisy_truth"] else spec["truth"]
        server = "uwsgi" if spec["server"].startswith("uwsgi") else "gunicorn"
        if truth["resource"] != "worker_pool" or truth["component"] != server:
            continue
        for folder in sorted((args.keep / spec["name"] / mode).glob("*")):
            run = Path(tempfile.mkdtemp()) / "run"
            shutil.copytree(folder, run)
            _hide(run)
            verdict = analyze(run)
            found = (verdict.get("pools") or {}).get(server)
            slots = spec["workers"] * spec["threads"]
            judged += 1
            # A range (a floor and a ceiling) is right when the truth lies within one of it.
            ok = (
                found is not None
                and found["slots"] - 1 <= slots <= found.get("most", found["slots"]) + 1
            )
            near += ok
            size = f"{found['slots']}-{found['most']}" if found and "most" in found else ""
            got = f"{size or found['slots']} ({found['found']})" if found else "none"
            named = verdict.get("bottleneck") or {}
            still += (named.get("component"), named.get("resource")) == (server, "worker_pool")
            print(
                f"{'ok ' if ok else 'BAD'} {spec['name']:<44} {mode} true {slots}, inferred "
                f"{got}; named {named.get('component')}:{named.get('resource')}"
            )
    print(f"\ninferred within one of the true pool (or its range): {near} of {judged}")
    print(f"the pool still named with its size hidden: {still} of {judged}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
