//! Metadata tables, by Trino's names: `"t$snapshots"`, `"t$history"`, `"t$refs"`,
//! `"t$properties"`, `"t$manifests"`, `"t$files"` and `"t$partitions"`. Each is
//! computed on the coordinator from the statement's pinned table (its metadata, and for
//! the last three the current snapshot's manifests) and served as an in-memory table,
//! so projections, filters and joins apply as to any table.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Int32Array, Int64Array, MapBuilder, StringArray, StringBuilder,
    StructArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{Field, Fields};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::common::ScalarValue;
use datafusion::datasource::MemTable;
use iceberg::arrow::type_to_arrow_type;
use iceberg::spec::{
    DataContentType, ManifestContentType, ManifestList, ManifestStatus, SnapshotReference,
    SnapshotRetention, Struct, StructType, Type,
};
use iceberg::table::Table;

use super::statistics::literal_scalar;
use crate::error::{FloeError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataTable {
    Snapshots,
    History,
    Refs,
    Properties,
    Manifests,
    Files,
    Partitions,
}

impl MetadataTable {
    /// `("t", kind)` for `t$snapshots` and the like; `None` for any other name.
    pub fn split(name: &str) -> Option<(&str, Self)> {
        let (base, suffix) = name.rsplit_once('$')?;
        let kind = match suffix {
            "snapshots" => Self::Snapshots,
            "history" => Self::History,
            "refs" => Self::Refs,
            "properties" => Self::Properties,
            "manifests" => Self::Manifests,
            "files" => Self::Files,
            "partitions" => Self::Partitions,
            _ => return None,
        };
        (!base.is_empty()).then_some((base, kind))
    }

    /// This metadata table of `table`, as it is now.
    pub async fn provider(self, table: &Table) -> Result<Arc<dyn TableProvider>> {
        let batch = match self {
            Self::Snapshots => snapshots(table)?,
            Self::History => history(table)?,
            Self::Refs => refs(table)?,
            Self::Properties => properties(table)?,
            Self::Manifests => manifests(table).await?,
            Self::Files => files(table).await?,
            Self::Partitions => partitions(table).await?,
        };
        Ok(Arc::new(MemTable::try_new(
            batch.schema(),
            vec![vec![batch]],
        )?))
    }
}

/// Builds a batch from named columns (nullable unless said otherwise).
fn batch(columns: Vec<(&str, ArrayRef)>) -> Result<RecordBatch> {
    let columns = columns.into_iter().map(|(name, array)| (name, array, true));
    Ok(RecordBatch::try_from_iter_with_nullable(columns)?)
}

fn longs(values: impl IntoIterator<Item = i64>) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(values))
}

fn ints(values: impl IntoIterator<Item = i32>) -> ArrayRef {
    Arc::new(Int32Array::from_iter_values(values))
}

fn strings<S: AsRef<str>>(values: impl IntoIterator<Item = S>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(values))
}

fn utc_micros(millis: impl IntoIterator<Item = i64>) -> ArrayRef {
    let micros: Vec<i64> = millis.into_iter().map(|ms| ms * 1000).collect();
    Arc::new(TimestampMicrosecondArray::from(micros).with_timezone("+00:00"))
}

fn snapshots(table: &Table) -> Result<RecordBatch> {
    let mut snapshots: Vec<_> = table.metadata().snapshots().collect();
    snapshots.sort_by_key(|s| (s.timestamp_ms(), s.snapshot_id()));
    let mut summary = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    for snapshot in &snapshots {
        let properties: BTreeMap<_, _> = snapshot.summary().additional_properties.iter().collect();
        for (key, value) in properties {
            summary.keys().append_value(key);
            summary.values().append_value(value);
        }
        summary.append(true)?;
    }
    batch(vec![
        (
            "committed_at",
            utc_micros(snapshots.iter().map(|s| s.timestamp_ms())),
        ),
        (
            "snapshot_id",
            longs(snapshots.iter().map(|s| s.snapshot_id())),
        ),
        (
            "parent_id",
            Arc::new(Int64Array::from_iter(
                snapshots.iter().map(|s| s.parent_snapshot_id()),
            )),
        ),
        (
            "operation",
            strings(snapshots.iter().map(|s| s.summary().operation.as_str())),
        ),
        (
            "manifest_list",
            strings(snapshots.iter().map(|s| s.manifest_list())),
        ),
        ("summary", Arc::new(summary.finish())),
    ])
}

/// The current snapshot and its ancestors.
fn current_ancestors(table: &Table) -> HashSet<i64> {
    let metadata = table.metadata();
    let mut ancestors = HashSet::new();
    let mut next = metadata.current_snapshot_id();
    while let Some(id) = next {
        if !ancestors.insert(id) {
            break;
        }
        next = metadata
            .snapshot_by_id(id)
            .and_then(|s| s.parent_snapshot_id());
    }
    ancestors
}

fn history(table: &Table) -> Result<RecordBatch> {
    let metadata = table.metadata();
    let log = metadata.history();
    let ancestors = current_ancestors(table);
    let parent = |id: i64| {
        metadata
            .snapshot_by_id(id)
            .and_then(|s| s.parent_snapshot_id())
    };
    batch(vec![
        (
            "made_current_at",
            utc_micros(log.iter().map(|l| l.timestamp_ms)),
        ),
        ("snapshot_id", longs(log.iter().map(|l| l.snapshot_id))),
        (
            "parent_id",
            Arc::new(Int64Array::from_iter(
                log.iter().map(|l| parent(l.snapshot_id)),
            )),
        ),
        (
            "is_current_ancestor",
            Arc::new(BooleanArray::from_iter(
                log.iter().map(|l| Some(ancestors.contains(&l.snapshot_id))),
            )),
        ),
    ])
}

/// The table's named references (iceberg keeps them private; its JSON form has them).
pub fn named_refs(table: &Table) -> Result<BTreeMap<String, SnapshotReference>> {
    let json = serde_json::to_value(table.metadata())
        .map_err(|e| FloeError::internal(format!("table metadata: {e}")))?;
    match json.get("refs") {
        Some(refs) => serde_json::from_value(refs.clone())
            .map_err(|e| FloeError::internal(format!("table refs: {e}"))),
        None => Ok(BTreeMap::new()),
    }
}

fn refs(table: &Table) -> Result<RecordBatch> {
    let refs: Vec<(String, SnapshotReference)> = named_refs(table)?.into_iter().collect();
    let retention = |r: &SnapshotReference| match r.retention {
        SnapshotRetention::Branch {
            min_snapshots_to_keep,
            max_snapshot_age_ms,
            max_ref_age_ms,
        } => (
            "BRANCH",
            max_ref_age_ms,
            min_snapshots_to_keep,
            max_snapshot_age_ms,
        ),
        SnapshotRetention::Tag { max_ref_age_ms } => ("TAG", max_ref_age_ms, None, None),
    };
    let kept: Vec<_> = refs.iter().map(|(_, r)| retention(r)).collect();
    batch(vec![
        ("name", strings(refs.iter().map(|(n, _)| n))),
        ("type", strings(kept.iter().map(|k| k.0))),
        (
            "snapshot_id",
            longs(refs.iter().map(|(_, r)| r.snapshot_id)),
        ),
        (
            "max_reference_age_in_ms",
            Arc::new(Int64Array::from_iter(kept.iter().map(|k| k.1))),
        ),
        (
            "min_snapshots_to_keep",
            Arc::new(Int32Array::from_iter(kept.iter().map(|k| k.2))),
        ),
        (
            "max_snapshot_age_in_ms",
            Arc::new(Int64Array::from_iter(kept.iter().map(|k| k.3))),
        ),
    ])
}

fn properties(table: &Table) -> Result<RecordBatch> {
    let properties: BTreeMap<_, _> = table.metadata().properties().iter().collect();
    batch(vec![
        ("key", strings(properties.keys())),
        ("value", strings(properties.values())),
    ])
}

/// The current snapshot's manifests (none for a table without snapshots).
async fn current_manifests(table: &Table) -> Result<Vec<iceberg::spec::ManifestFile>> {
    let Some(snapshot) = table.metadata().current_snapshot() else {
        return Ok(Vec::new());
    };
    let bytes = table
        .file_io()
        .new_input(snapshot.manifest_list())?
        .read()
        .await?;
    let list = ManifestList::parse_with_version(&bytes, table.metadata().format_version())?;
    Ok(list.consume_entries().into_iter().collect())
}

async fn manifests(table: &Table) -> Result<RecordBatch> {
    let manifests = current_manifests(table).await?;
    let count = |f: fn(&iceberg::spec::ManifestFile) -> Option<u32>| {
        Arc::new(Int32Array::from_iter(
            manifests.iter().map(|m| f(m).map(|n| n as i32)),
        ))
    };
    let rows = |f: fn(&iceberg::spec::ManifestFile) -> Option<u64>| {
        Arc::new(Int64Array::from_iter(
            manifests.iter().map(|m| f(m).map(|n| n as i64)),
        ))
    };
    let content = |m: &iceberg::spec::ManifestFile| match m.content {
        ManifestContentType::Data => 0,
        ManifestContentType::Deletes => 1,
    };
    batch(vec![
        ("content", ints(manifests.iter().map(content))),
        ("path", strings(manifests.iter().map(|m| &m.manifest_path))),
        ("length", longs(manifests.iter().map(|m| m.manifest_length))),
        (
            "partition_spec_id",
            ints(manifests.iter().map(|m| m.partition_spec_id)),
        ),
        (
            "added_snapshot_id",
            longs(manifests.iter().map(|m| m.added_snapshot_id)),
        ),
        ("added_files_count", count(|m| m.added_files_count)),
        ("existing_files_count", count(|m| m.existing_files_count)),
        ("deleted_files_count", count(|m| m.deleted_files_count)),
        ("added_rows_count", rows(|m| m.added_rows_count)),
        ("existing_rows_count", rows(|m| m.existing_rows_count)),
        ("deleted_rows_count", rows(|m| m.deleted_rows_count)),
    ])
}

/// A live file of the current snapshot.
struct LiveFile {
    content: i32,
    path: String,
    format: String,
    spec_id: i32,
    partition: Struct,
    records: u64,
    bytes: u64,
}

async fn live_files(table: &Table) -> Result<Vec<LiveFile>> {
    let mut files = Vec::new();
    for manifest in current_manifests(table).await? {
        let spec_id = manifest.partition_spec_id;
        let loaded = manifest.load_manifest(table.file_io()).await?;
        for entry in loaded.entries() {
            if entry.status() == ManifestStatus::Deleted {
                continue;
            }
            let file = entry.data_file();
            files.push(LiveFile {
                content: match file.content_type() {
                    DataContentType::Data => 0,
                    DataContentType::PositionDeletes => 1,
                    DataContentType::EqualityDeletes => 2,
                },
                path: file.file_path().to_string(),
                format: file.file_format().to_string().to_uppercase(),
                spec_id,
                partition: file.partition().clone(),
                records: file.record_count(),
                bytes: file.file_size_in_bytes(),
            });
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// The default spec's partition type, if the table is partitioned.
fn partition_type(table: &Table) -> Result<Option<StructType>> {
    let metadata = table.metadata();
    let spec = metadata.default_partition_spec();
    if spec.fields().is_empty() {
        return Ok(None);
    }
    Ok(Some(spec.partition_type(metadata.current_schema())?))
}

/// The partition tuples of files of the default spec, as a struct column (NULL for
/// files of an older spec).
fn partition_column(table: &Table, ty: &StructType, tuples: &[(i32, &Struct)]) -> Result<ArrayRef> {
    let spec_id = table.metadata().default_partition_spec_id();
    let mut fields = Vec::new();
    let mut arrays = Vec::new();
    for (i, field) in ty.fields().iter().enumerate() {
        let Type::Primitive(primitive) = field.field_type.as_ref() else {
            return Err(FloeError::internal(
                "a partition field that is not primitive",
            ));
        };
        let data_type = type_to_arrow_type(&field.field_type)?;
        let null = ScalarValue::try_from(&data_type)?;
        let values = tuples.iter().map(|(spec, tuple)| {
            let literal = (*spec == spec_id)
                .then(|| tuple.iter().nth(i).flatten())
                .flatten()
                .and_then(|l| l.as_primitive_literal());
            literal
                .and_then(|l| literal_scalar(primitive, &l, &data_type))
                .unwrap_or_else(|| null.clone())
        });
        arrays.push(ScalarValue::iter_to_array(values)?);
        fields.push(Field::new(&field.name, data_type, true));
    }
    let nulls = tuples
        .iter()
        .map(|(spec, _)| *spec == spec_id)
        .collect::<Vec<_>>();
    Ok(Arc::new(StructArray::try_new(
        Fields::from(fields),
        arrays,
        Some(nulls.into()),
    )?))
}

async fn files(table: &Table) -> Result<RecordBatch> {
    let files = live_files(table).await?;
    let mut columns: Vec<(&str, ArrayRef)> = vec![
        ("content", ints(files.iter().map(|f| f.content))),
        ("file_path", strings(files.iter().map(|f| &f.path))),
        ("file_format", strings(files.iter().map(|f| &f.format))),
        ("spec_id", ints(files.iter().map(|f| f.spec_id))),
    ];
    if let Some(ty) = partition_type(table)? {
        let tuples: Vec<_> = files.iter().map(|f| (f.spec_id, &f.partition)).collect();
        columns.push(("partition", partition_column(table, &ty, &tuples)?));
    }
    columns.push((
        "record_count",
        longs(files.iter().map(|f| f.records as i64)),
    ));
    columns.push((
        "file_size_in_bytes",
        longs(files.iter().map(|f| f.bytes as i64)),
    ));
    batch(columns)
}

/// Per partition of the current snapshot (one row for an unpartitioned table with
/// data): its data rows, data files and their bytes.
async fn partitions(table: &Table) -> Result<RecordBatch> {
    let files = live_files(table).await?;
    let mut totals: HashMap<(i32, &Struct), (i64, i64, i64)> = HashMap::new();
    let mut order = Vec::new();
    for file in files.iter().filter(|f| f.content == 0) {
        let key = (file.spec_id, &file.partition);
        let total = totals.entry(key).or_insert_with(|| {
            order.push(key);
            (0, 0, 0)
        });
        total.0 += file.records as i64;
        total.1 += 1;
        total.2 += file.bytes as i64;
    }
    let ty = partition_type(table)?;
    if ty.is_none() {
        // One partition: every spec's files count together.
        let all = totals
            .values()
            .fold((0, 0, 0), |a, t| (a.0 + t.0, a.1 + t.1, a.2 + t.2));
        let rows = usize::from(all.1 > 0);
        return batch(vec![
            (
                "record_count",
                Arc::new(Int64Array::from(vec![all.0; rows])),
            ),
            ("file_count", Arc::new(Int64Array::from(vec![all.1; rows]))),
            ("total_size", Arc::new(Int64Array::from(vec![all.2; rows]))),
        ]);
    }
    let mut columns: Vec<(&str, ArrayRef)> = Vec::new();
    if let Some(ty) = &ty {
        columns.push(("partition", partition_column(table, ty, &order)?));
    }
    let total = |i: usize| -> ArrayRef {
        longs(order.iter().map(|k| {
            let t = totals[k];
            [t.0, t.1, t.2][i]
        }))
    };
    columns.push(("record_count", total(0)));
    columns.push(("file_count", total(1)));
    columns.push(("total_size", total(2)));
    batch(columns)
}
