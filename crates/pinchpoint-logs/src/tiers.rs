//! A batch's matched records as an Arrow record batch of `tiers.parquet`'s columns
//! (`TIERS_SCHEMA` in `pinchpoint/rundir/schemas.py`), so that they reach the run folder
//! with no object per record.

use std::iter;
use std::sync::{Arc, LazyLock};

use arrow_array::{
    ArrayRef, Float64Array, Int32Array, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};

use crate::scan::Rows;

/// The columns of `tiers.parquet`, in order, as `TIERS_SCHEMA` declares them.
pub static TIERS_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("component", DataType::Utf8, false),
        Field::new("users", DataType::UInt32, false),
        Field::new("req_id", DataType::UInt64, true),
        Field::new("ts", DataType::Float64, true),
        Field::new("duration_s", DataType::Float64, false),
        Field::new("upstream_s", DataType::Float64, true),
        Field::new("status", DataType::Int32, true),
        Field::new("queue_s", DataType::Float64, true),
        Field::new("span_kind", DataType::Utf8, true),
        Field::new("parent", DataType::Utf8, true),
    ]))
});

/// The records of component `component`: the columns a log gives, the others null.
pub fn tiers_batch(component: &str, rows: Rows) -> Result<RecordBatch, ArrowError> {
    let n = rows.len();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(iter::repeat_n(component, n))),
        Arc::new(UInt32Array::from(rows.users)),
        Arc::new(UInt64Array::from(rows.req_id)),
        Arc::new(Float64Array::from(rows.ts)),
        Arc::new(Float64Array::from(rows.duration_s)),
        Arc::new(Float64Array::from(rows.upstream_s)),
        Arc::new(Int32Array::from(rows.status)),
        Arc::new(Float64Array::new_null(n)),
        Arc::new(StringArray::new_null(n)),
        Arc::new(StringArray::new_null(n)),
    ];
    RecordBatch::try_new(TIERS_SCHEMA.clone(), columns)
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int32Type, UInt64Type};
    use arrow_array::Array;

    use super::*;

    #[test]
    fn rows_become_the_columns_of_tiers_parquet() {
        let rows = Rows {
            users: vec![4, 0],
            req_id: vec![Some(17), None],
            ts: vec![None, Some(1795338900.25)],
            duration_s: vec![0.021, 0.5],
            upstream_s: vec![Some(0.02), None],
            status: vec![Some(200), None],
        };
        let batch = tiers_batch("nginx", rows).unwrap();
        assert_eq!(batch.num_rows(), 2);
        let schema = batch.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            [
                "component",
                "users",
                "req_id",
                "ts",
                "duration_s",
                "upstream_s",
                "status",
                "queue_s",
                "span_kind",
                "parent"
            ]
        );
        assert_eq!(
            batch
                .column(0)
                .as_string::<i32>()
                .iter()
                .collect::<Vec<_>>(),
            [Some("nginx"); 2]
        );
        let ids = batch.column(2).as_primitive::<UInt64Type>();
        assert_eq!(ids.iter().collect::<Vec<_>>(), [Some(17), None]);
        let ts = batch.column(3).as_primitive::<Float64Type>();
        assert_eq!(ts.iter().collect::<Vec<_>>(), [None, Some(1795338900.25)]);
        let status = batch.column(6).as_primitive::<Int32Type>();
        assert_eq!(status.iter().collect::<Vec<_>>(), [Some(200), None]);
        for i in 7..10 {
            assert_eq!(batch.column(i).null_count(), 2, "column {i}");
        }
        assert_eq!(batch.column(8).as_string::<i32>().len(), 2);
    }

    #[test]
    fn no_rows_make_an_empty_batch() {
        let batch = tiers_batch("app", Rows::default()).unwrap();
        assert_eq!((batch.num_rows(), batch.num_columns()), (0, 10));
    }
}
