"""tiers.parquet as the collectors hand it over: rows, tables and record batches written in
the order they came, in row groups of about `group_rows` rows."""

from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pinchpoint.collect.gather import TierWriter
from pinchpoint.collect.logs.reader import TierRow
from pinchpoint.rundir.schemas import TIERS_SCHEMA


def batch(users: int, ids: list[int]) -> pa.RecordBatch:
    rows = [asdict(TierRow("nginx", users, i, 1.0, 0.01, None, 200)) for i in ids]
    return pa.RecordBatch.from_pylist(rows, schema=TIERS_SCHEMA)


def test_batches_and_rows_are_written_in_their_order_in_row_groups(tmp_path: Path) -> None:
    path = tmp_path / "tiers.parquet"
    with TierWriter(path, group_rows=4, req_id_offsets={4: 100}) as writer:
        writer.add(batch(1, [0, 1, 2]))
        writer.add(batch(4, [3, 4]))  # five rows pending: one row group
        writer.add([TierRow("app", 4, 5, 2.0, 0.02, None, 200)])
        writer.add(pa.Table.from_batches([batch(1, [6])]))
    assert writer.rows == 7
    written = pq.ParquetFile(path)
    groups = [written.metadata.row_group(i).num_rows for i in range(written.num_row_groups)]
    assert groups == [5, 1, 1]
    table = written.read()
    assert table.schema == TIERS_SCHEMA
    assert table["req_id"].to_pylist() == [0, 1, 2, 103, 104, 105, 6]
    assert table["component"].to_pylist() == ["nginx"] * 5 + ["app", "nginx"]


def test_no_rows_make_an_empty_table(tmp_path: Path) -> None:
    path = tmp_path / "tiers.parquet"
    with TierWriter(path) as writer:
        writer.add(batch(1, []))
    assert pq.read_table(path).equals(TIERS_SCHEMA.empty_table())
