//! Column statistics of a planned scan, from the manifests of its snapshot: null counts,
//! minimum and maximum of each output column over the files the scan reads. The join
//! planner needs them to estimate join sizes (a key's range bounds its distinct values),
//! and exact ones answer `count(*)`, `min` and `max` without reading data files.
//!
//! String columns also get a distinct count, a rough one (see [`estimated_distinct`]):
//! Iceberg's manifests record none, and without it an equality on a status column and
//! one on a name would be guessed alike.
//!
//! Exact only when true: the scan reads every row of its files (no delete files, no row
//! filter), every file records the column's metric, and the bound is the value itself
//! (integers, decimals, dates, times; string and binary bounds may be cut short, and
//! float bounds leave NaN out, so those are bounds only). Otherwise the values are
//! bounds (`Inexact`) or absent.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex};

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::common::stats::{ColumnStatistics, Precision};
use futures::{StreamExt, TryStreamExt};
use iceberg::io::FileIO;
use iceberg::scan::FileScanTask;
use iceberg::spec::{
    DataFile, Datum, Manifest, ManifestContentType, ManifestFile, ManifestList, PrimitiveLiteral,
    PrimitiveType, Snapshot,
};
use iceberg::table::Table;

use crate::error::Result;

/// Scans over more data files than this get no column statistics: reading their
/// manifests a second time would cost more than the estimates are worth.
const MAX_FILES: usize = 10_000;

/// Manifests read at once.
const CONCURRENT_READS: usize = 8;

/// What the manifests tell of a scan's columns.
pub struct ScanStatistics {
    /// The output columns' field ids.
    fields: Vec<i32>,
    /// Over the scan's files; `None` when they could not be had cheaply.
    metrics: Option<Metrics>,
    /// The stored bytes of the output columns in the scan's files, where every file
    /// records each of their sizes: what reading them costs, far less than the files'
    /// sizes when a few columns of many are read.
    pub column_bytes: Option<u64>,
}

impl ScanStatistics {
    /// Of each output column; counts and bounds exact if `exact_rows` (the scan reads
    /// every row of its files) and every file recorded them.
    pub fn columns(&self, exact_rows: bool) -> Vec<ColumnStatistics> {
        self.fields
            .iter()
            .map(|id| match &self.metrics {
                Some(metrics) => metrics.column(*id, exact_rows),
                None => ColumnStatistics::new_unknown(),
            })
            .collect()
    }
}

/// Statistics for `fields` (output columns, by field id, typed as `schema`), over the
/// files of `tasks`; all absent when they cannot be had cheaply.
pub async fn column_statistics<'t>(
    table: &Table,
    snapshot: &Snapshot,
    tasks: impl Iterator<Item = &'t FileScanTask>,
    fields: &[i32],
    schema: &SchemaRef,
) -> Result<ScanStatistics> {
    let absent = || ScanStatistics {
        fields: fields.to_vec(),
        metrics: None,
        column_bytes: None,
    };
    let files: HashSet<&str> = tasks.map(|t| t.data_file_path.as_str()).collect();
    if files.is_empty() || files.len() > MAX_FILES {
        return Ok(absent());
    }
    // Bounds are compared as values of the column's current type: a file written
    // before a type promotion (int to bigint) has bounds of the older type.
    let wanted: HashMap<i32, &DataType> = fields
        .iter()
        .zip(schema.fields())
        .map(|(id, field)| (*id, field.data_type()))
        .collect();
    let mut metrics = Metrics::default();
    let file_io = table.file_io();
    let data_manifests = cached_data_manifests(table, snapshot).await?;
    let mut manifests = futures::stream::iter(data_manifests.iter().cloned())
        .map(|m| cached_manifest(file_io.clone(), m))
        .buffer_unordered(CONCURRENT_READS);
    while let Some(manifest) = manifests.try_next().await? {
        for entry in manifest.entries().iter().filter(|e| e.is_alive()) {
            let file = entry.data_file();
            if files.contains(file.file_path()) {
                metrics.add(&wanted, file);
            }
        }
    }
    if metrics.files != files.len() {
        // A file the manifests do not list (another snapshot's): no claims.
        return Ok(absent());
    }
    Ok(ScanStatistics {
        fields: fields.to_vec(),
        column_bytes: metrics.stored_bytes(fields),
        metrics: Some(metrics),
    })
}

/// Manifest list and manifest entries kept in the [`ManifestCache`] at most.
const CACHED_ENTRIES: usize = 200_000;

/// Manifest lists and manifests read before, by path. Iceberg never rewrites either in
/// place, so a path always names the same content; the planner's own cache lives and
/// dies with each table.
#[derive(Default)]
struct ManifestCache {
    /// The data manifests each manifest list names.
    lists: HashMap<String, Arc<Vec<ManifestFile>>>,
    manifests: HashMap<String, Arc<Manifest>>,
    /// Entries of both, in all.
    entries: usize,
}

impl ManifestCache {
    /// Makes room for `entries` more (by forgetting everything when full).
    fn reserve(&mut self, entries: usize) {
        if self.entries + entries > CACHED_ENTRIES {
            *self = ManifestCache::default();
        }
        self.entries += entries;
    }
}

static MANIFESTS: LazyLock<Mutex<ManifestCache>> = LazyLock::new(Mutex::default);

fn manifest_cache() -> std::sync::MutexGuard<'static, ManifestCache> {
    MANIFESTS.lock().unwrap_or_else(|e| e.into_inner())
}

async fn cached_data_manifests(
    table: &Table,
    snapshot: &Snapshot,
) -> Result<Arc<Vec<ManifestFile>>> {
    let path = snapshot.manifest_list();
    if let Some(hit) = manifest_cache().lists.get(path) {
        return Ok(hit.clone());
    }
    let bytes = table.file_io().new_input(path)?.read().await?;
    let list = ManifestList::parse_with_version(&bytes, table.metadata().format_version())?;
    let data: Arc<Vec<ManifestFile>> = Arc::new(
        list.consume_entries()
            .into_iter()
            .filter(|m| m.content == ManifestContentType::Data)
            .collect(),
    );
    let mut cache = manifest_cache();
    cache.reserve(data.len());
    cache.lists.insert(path.to_string(), data.clone());
    Ok(data)
}

async fn cached_manifest(file_io: FileIO, file: ManifestFile) -> Result<Arc<Manifest>> {
    if let Some(hit) = manifest_cache().manifests.get(&file.manifest_path) {
        return Ok(hit.clone());
    }
    let manifest = Arc::new(file.load_manifest(&file_io).await?);
    let mut cache = manifest_cache();
    cache.reserve(manifest.entries().len());
    cache.manifests.insert(file.manifest_path, manifest.clone());
    Ok(manifest)
}

/// Per field id, over the files seen: the sum of null counts and the extreme bounds,
/// with the number of files that recorded each.
#[derive(Default)]
struct Metrics {
    files: usize,
    nulls: HashMap<i32, (u64, usize)>,
    /// Stored bytes of each column, and the files that recorded them.
    sizes: HashMap<i32, (u64, usize)>,
    /// Values (nulls included) of each string column, and the files that recorded them.
    string_values: HashMap<i32, (u64, usize)>,
    lower: HashMap<i32, Bound>,
    upper: HashMap<i32, Bound>,
}

/// The extreme bound of a column over the files seen.
struct Bound {
    value: ScalarValue,
    /// Whether `value` is a value of the column, not only a bound (see `is_the_value`).
    is_value: bool,
    /// Files whose bound was seen.
    seen: usize,
}

impl Metrics {
    fn add(&mut self, wanted: &HashMap<i32, &DataType>, file: &DataFile) {
        self.files += 1;
        for (id, data_type) in wanted {
            if let Some(n) = file.null_value_counts().get(id) {
                let entry = self.nulls.entry(*id).or_insert((0, 0));
                *entry = (entry.0 + n, entry.1 + 1);
            }
            if let Some(n) = file.column_sizes().get(id) {
                let entry = self.sizes.entry(*id).or_insert((0, 0));
                *entry = (entry.0.saturating_add(*n), entry.1 + 1);
            }
            let string = matches!(
                data_type,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            );
            if let Some(n) = file.value_counts().get(id).filter(|_| string) {
                let entry = self.string_values.entry(*id).or_insert((0, 0));
                *entry = (entry.0.saturating_add(*n), entry.1 + 1);
            }
            if let Some(v) = file.lower_bounds().get(id) {
                extend(&mut self.lower, *id, v, data_type, Ordering::Less);
            }
            if let Some(v) = file.upper_bounds().get(id) {
                extend(&mut self.upper, *id, v, data_type, Ordering::Greater);
            }
        }
    }

    /// The stored bytes of `fields` in all files, if every file recorded each of them.
    fn stored_bytes(&self, fields: &[i32]) -> Option<u64> {
        if fields.is_empty() {
            return None;
        }
        fields.iter().try_fold(0u64, |total, id| {
            let (bytes, seen) = self.sizes.get(id)?;
            (*seen == self.files).then(|| total.saturating_add(*bytes))
        })
    }

    fn column(&self, id: i32, exact_rows: bool) -> ColumnStatistics {
        let everywhere = |seen: usize| seen == self.files;
        let mut column = ColumnStatistics::new_unknown();
        if let Some((nulls, seen)) = self.nulls.get(&id) {
            column.null_count = if exact_rows && everywhere(*seen) {
                Precision::Exact(*nulls as usize)
            } else {
                Precision::Inexact(*nulls as usize)
            };
        }
        let bound = |bounds: &HashMap<i32, Bound>| {
            let bound = bounds.get(&id)?;
            let value = bound.value.clone();
            Some(if exact_rows && everywhere(bound.seen) && bound.is_value {
                Precision::Exact(value)
            } else {
                Precision::Inexact(value)
            })
        };
        // Bounds recorded by only some files bound nothing.
        if let Some(min) = bound(&self.lower).filter(|_| self.all_recorded(&self.lower, id)) {
            column.min_value = min;
        }
        if let Some(max) = bound(&self.upper).filter(|_| self.all_recorded(&self.upper, id)) {
            column.max_value = max;
        }
        if let Some(distinct) = self.distinct_strings(id) {
            column.distinct_count = Precision::Inexact(distinct);
        }
        column
    }

    /// [`estimated_distinct`] of string column `id`, where every file recorded its size,
    /// values and nulls.
    fn distinct_strings(&self, id: i32) -> Option<usize> {
        let recorded = |metric: &HashMap<i32, (u64, usize)>| {
            metric
                .get(&id)
                .filter(|(_, seen)| *seen == self.files)
                .map(|(sum, _)| *sum)
        };
        let values = recorded(&self.string_values)?;
        let non_null = values.checked_sub(recorded(&self.nulls)?)?;
        estimated_distinct(recorded(&self.sizes)?, non_null)
    }

    fn all_recorded(&self, bounds: &HashMap<i32, Bound>, id: i32) -> bool {
        bounds
            .get(&id)
            .is_some_and(|bound| bound.seen == self.files)
    }
}

/// The distinct values of a column stored in `bytes` holding `values` non-null values,
/// roughly: about 2 to the power of the bits each value takes, at most the values.
///
/// Writers store a column of few distinct values as a dictionary and each value as its
/// index in it, bit-packed; compression cannot make indices of unordered values much
/// smaller than their entropy, so a value takes about log2(distinct) bits (TPC-H at
/// scale 1, as pyiceberg writes it: 2 distinct values take 0.9 bits each, 3 take
/// 1.2–1.4, 7 take 3.0, 40 take 5.9, 1,000 take 10.1), while names and comments take
/// more bits than their count needs and end at the count. Sorted values compress below
/// that, so the estimate errs low, as for any column of long runs of one value.
pub fn estimated_distinct(bytes: u64, values: u64) -> Option<usize> {
    if values == 0 {
        return None;
    }
    let bits_per_value = bytes as f64 * 8.0 / values as f64;
    let distinct = 2f64
        .powf(bits_per_value.min(63.0))
        .min(values as f64)
        .max(1.0);
    Some(distinct.round() as usize)
}

/// Takes a file's bound of column `id` into the extreme one (`beyond`: `Less` for the
/// lower bound). A bound that cannot be a value of the column's type is not seen, so
/// the column gets no bound.
fn extend(
    bounds: &mut HashMap<i32, Bound>,
    id: i32,
    datum: &Datum,
    data_type: &DataType,
    beyond: Ordering,
) {
    let Some(value) = scalar(datum, data_type) else {
        return;
    };
    let is_value = is_the_value(datum);
    match bounds.get_mut(&id) {
        Some(bound) => {
            if value.partial_cmp(&bound.value) == Some(beyond) {
                bound.value = value;
                bound.is_value = is_value;
            }
            bound.seen += 1;
        }
        None => {
            bounds.insert(
                id,
                Bound {
                    value,
                    is_value,
                    seen: 1,
                },
            );
        }
    }
}

/// Whether a bound is a value of the column, not only a bound: writers may cut string
/// and binary bounds short (Iceberg's default keeps 16 characters), and float bounds
/// leave NaN out.
fn is_the_value(datum: &Datum) -> bool {
    !matches!(
        datum.literal(),
        PrimitiveLiteral::String(_)
            | PrimitiveLiteral::Binary(_)
            | PrimitiveLiteral::Float(_)
            | PrimitiveLiteral::Double(_)
    )
}

/// A bound as a value of the output column's type.
fn scalar(datum: &Datum, data_type: &DataType) -> Option<ScalarValue> {
    literal_scalar(datum.data_type(), datum.literal(), data_type)
}

/// An Iceberg value of type `ty` as a value of Arrow type `data_type`; `None` for types
/// without a plain Arrow counterpart here (UUID, fixed, binary, nanosecond times).
pub fn literal_scalar(
    ty: &PrimitiveType,
    literal: &PrimitiveLiteral,
    data_type: &DataType,
) -> Option<ScalarValue> {
    let value = match (ty, literal) {
        (PrimitiveType::Boolean, PrimitiveLiteral::Boolean(b)) => ScalarValue::Boolean(Some(*b)),
        (PrimitiveType::Int, PrimitiveLiteral::Int(i)) => ScalarValue::Int32(Some(*i)),
        (PrimitiveType::Date, PrimitiveLiteral::Int(i)) => ScalarValue::Date32(Some(*i)),
        (PrimitiveType::Long, PrimitiveLiteral::Long(i)) => ScalarValue::Int64(Some(*i)),
        (PrimitiveType::Time, PrimitiveLiteral::Long(i)) => {
            ScalarValue::Time64Microsecond(Some(*i))
        }
        (PrimitiveType::Timestamp, PrimitiveLiteral::Long(i)) => {
            ScalarValue::TimestampMicrosecond(Some(*i), None)
        }
        (PrimitiveType::Timestamptz, PrimitiveLiteral::Long(i)) => {
            ScalarValue::TimestampMicrosecond(Some(*i), Some("+00:00".into()))
        }
        (PrimitiveType::Float, PrimitiveLiteral::Float(f)) => ScalarValue::Float32(Some(f.0)),
        (PrimitiveType::Double, PrimitiveLiteral::Double(f)) => ScalarValue::Float64(Some(f.0)),
        (PrimitiveType::String, PrimitiveLiteral::String(s)) => ScalarValue::Utf8(Some(s.clone())),
        (PrimitiveType::Decimal { precision, scale }, PrimitiveLiteral::Int128(i)) => {
            ScalarValue::Decimal128(Some(*i), u8::try_from(*precision).ok()?, *scale as i8)
        }
        _ => return None,
    };
    if value.data_type() == *data_type {
        Some(value)
    } else {
        value.cast_to(data_type).ok()
    }
}
