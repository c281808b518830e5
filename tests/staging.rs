//! Staging files of a bulk ingest: what is spooled comes back row for row, in order, in
//! files of about the roll size; a broken upload or a truncated file fails.

use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, StringArray};
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use floe::catalog::StorageSpec;
use floe::table::staging::{StagedFile, group_staged, read_staged, spool};
use futures::TryStreamExt;
use iceberg::io::FileIO;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]))
}

fn batch(start: i64, rows: i64) -> RecordBatch {
    let ids: Vec<i64> = (start..start + rows).collect();
    let names: Vec<Option<String>> = ids
        .iter()
        .map(|i| (i % 3 != 0).then(|| format!("name {i}")))
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(names)),
        ],
    )
    .expect("valid batch")
}

fn upload(
    batches: Vec<Result<RecordBatch, DataFusionError>>,
) -> datafusion::execution::SendableRecordBatchStream {
    Box::pin(RecordBatchStreamAdapter::new(
        schema(),
        futures::stream::iter(batches),
    ))
}

fn staging_dir() -> (tempfile::TempDir, String, FileIO) {
    let dir = tempfile::tempdir().expect("temp dir");
    let location = format!("file://{}/write/_staging", dir.path().display());
    (dir, location, StorageSpec::default().file_io())
}

/// Every row of `files`, in order, as one batch.
async fn read_all(file_io: &FileIO, files: &[StagedFile]) -> RecordBatch {
    let mut batches = Vec::new();
    for file in files {
        let read: Vec<RecordBatch> = read_staged(file_io.clone(), file.clone(), schema())
            .try_collect()
            .await
            .expect("reads back");
        batches.extend(read);
    }
    concat_batches(&schema(), &batches).expect("one schema")
}

#[tokio::test(flavor = "multi_thread")]
async fn spooled_batches_come_back_in_files_of_about_the_roll_size() {
    let (_dir, location, file_io) = staging_dir();
    let mut sent: Vec<RecordBatch> = (0..40).map(|i| batch(i * 500, 500)).collect();
    sent.insert(7, batch(0, 0));
    let roll = 32 * 1024;
    let files = spool(
        upload(sent.iter().cloned().map(Ok).collect()),
        &file_io,
        &location,
        "w1",
        roll,
    )
    .await
    .expect("spools");

    assert!(files.len() > 2, "rolled into several files: {files:?}");
    assert!(files[..files.len() - 1].iter().all(|f| f.size >= roll));
    assert!(
        files
            .iter()
            .all(|f| f.path.starts_with(&format!("{location}/w1-")))
    );
    assert_eq!(files.iter().map(|f| f.rows).sum::<u64>(), 20_000);
    let back = read_all(&file_io, &files).await;
    let sent = concat_batches(&schema(), &sent).expect("one schema");
    assert_eq!(back, sent, "the same rows, in order");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_file_comes_back_whole() {
    let (_dir, location, file_io) = staging_dir();
    // About 25 MB in one file: several row groups, each read with its own ranges.
    let sent: Vec<RecordBatch> = (0..12).map(|i| batch(i * 100_000, 100_000)).collect();
    let files = spool(
        upload(sent.iter().cloned().map(Ok).collect()),
        &file_io,
        &location,
        "w1",
        u64::MAX,
    )
    .await
    .expect("spools");
    assert_eq!(files.len(), 1);
    assert!(files[0].size > 20 * 1024 * 1024, "{:?}", files[0]);
    let sent = concat_batches(&schema(), &sent).expect("one schema");
    assert_eq!(read_all(&file_io, &files).await, sent);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_upload_fails_the_spool() {
    let (_dir, location, file_io) = staging_dir();
    let broken = vec![
        Ok(batch(0, 10)),
        Ok(batch(10, 10)),
        Err(DataFusionError::Execution("the client went away".into())),
        Ok(batch(20, 10)),
    ];
    let error = spool(upload(broken), &file_io, &location, "w1", 1024)
        .await
        .expect_err("fails");
    assert!(error.message.contains("the client went away"), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_truncated_staging_file_fails_to_read() {
    let (_dir, location, file_io) = staging_dir();
    let files = spool(
        upload((0..4).map(|i| Ok(batch(i * 100, 100))).collect()),
        &file_io,
        &location,
        "w1",
        u64::MAX,
    )
    .await
    .expect("spools");
    let [file] = &files[..] else {
        panic!("one file: {files:?}")
    };
    let path = file.path.trim_start_matches("file://");
    let bytes = std::fs::read(path).expect("staged file");
    std::fs::write(path, &bytes[..bytes.len() - 100]).expect("truncates");
    let truncated = StagedFile {
        size: file.size - 100,
        ..file.clone()
    };
    let read: Result<Vec<RecordBatch>, _> = read_staged(file_io.clone(), truncated, schema())
        .try_collect()
        .await;
    assert!(read.is_err(), "a truncated file is an error");
}

#[test]
fn staged_files_are_spread_round_robin_over_at_most_the_partitions() {
    let files: Vec<StagedFile> = (0..5)
        .map(|i| StagedFile {
            path: format!("f{i}"),
            size: 10,
            rows: 1,
        })
        .collect();
    let paths = |groups: Vec<Vec<StagedFile>>| -> Vec<Vec<String>> {
        groups
            .into_iter()
            .map(|g| g.into_iter().map(|f| f.path).collect())
            .collect()
    };
    assert_eq!(
        paths(group_staged(&files, 2)),
        vec![vec!["f0", "f2", "f4"], vec!["f1", "f3"]]
    );
    assert_eq!(paths(group_staged(&files, 8)).len(), 5);
    assert_eq!(paths(group_staged(&[], 4)), vec![Vec::<String>::new()]);
}
