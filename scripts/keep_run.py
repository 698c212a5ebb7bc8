"""Keeps a run folder as a recorded test run: copied under tests/data/runs/NAME with the
stack's working folder cut out of every path it holds (text files and Parquet strings),
so that no machine's paths are recorded.

    .venv/bin/python scripts/keep_run.py RUN_DIR NAME --strip /tmp/pinchpoint-matrix-abc/
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "runs"
# What the analysis reads; the digest and the report are made again from these.
KEPT = ("plan.toml", "run.json", "collection.json", "requests.parquet", "tiers.parquet",
        "resources.parquet", "verdict.json")  # fmt: skip


def _strip_table(path: Path, prefix: str) -> None:
    table = pq.read_table(path)
    columns = []
    for column in table.columns:
        if pa.types.is_string(column.type):
            column = pc.replace_substring(column, prefix, "")
        columns.append(column)
    pq.write_table(pa.Table.from_arrays(columns, schema=table.schema), path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("name")
    parser.add_argument("--strip", action="append", default=[], help="a path prefix to cut")
    args = parser.parse_args()
    target = DATA / args.name
    target.mkdir(parents=True)
    for name in KEPT:
        if (args.run_dir / name).exists():
            shutil.copy2(args.run_dir / name, target / name)
    for path in target.iterdir():
        for prefix in args.strip:
            if path.suffix == ".parquet":
                _strip_table(path, prefix)
            elif path.suffix in (".json", ".toml"):
                path.write_text(path.read_text().replace(prefix, ""))
    print(target)


if __name__ == "__main__":
    main()
