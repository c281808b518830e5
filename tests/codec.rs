//! Floe's physical codec: what crosses to executors decodes to the same plan node.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion_proto::physical_plan::PhysicalExtensionCodec;
use floe::catalog::StorageSpec;
use floe::codec::{FloePhysicalCodec, proto, task_groups};
use floe::table::constants;
use floe::table::plan_schema;
use floe::table::position_deletes::PositionDeleteWriteExec;
use floe::table::scan::{
    FILE_COLUMN, IcebergScanExec, POS_COLUMN, ScanParts, TaskGroups, group_tasks,
};
use floe::table::staged_scan::StagedScanExec;
use floe::table::staging::{StagedFile, group_staged};
use floe::table::write::{IcebergWriteExec, ParquetSettings, WriteSpec};
use iceberg::expr::{Bind, Reference};
use iceberg::spec::{Datum, FormatVersion, PartitionSpec, PrimitiveLiteral, Struct, Transform};
use prost::Message;

use crate::support::{position_delete, schema, task};

fn scan_parts() -> ScanParts {
    let predicate = Reference::new("id")
        .greater_than(Datum::long(5))
        .bind(schema(), true)
        .expect("binds");
    ScanParts {
        table: "sales.orders".into(),
        schema: schema(),
        project_field_ids: vec![2, 1],
        predicate: Some(predicate),
        name_mapping: Some(r#"[{"field-id": 1, "names": ["id"]}]"#.into()),
        storage: StorageSpec {
            props: HashMap::from([("s3.region".to_string(), "eu-west-1".to_string())]),
        },
        case_sensitive: true,
        reshaped_field_ids: vec![2],
        positions: false,
    }
}

fn round_trip(
    node: Arc<dyn ExecutionPlan>,
    inputs: &[Arc<dyn ExecutionPlan>],
) -> Arc<dyn ExecutionPlan> {
    let codec = FloePhysicalCodec::default();
    let mut buf = Vec::new();
    codec.try_encode(node, &mut buf).expect("encodes");
    codec
        .try_decode(&buf, inputs, &TaskContext::default())
        .expect("decodes")
}

#[test]
fn scan_node_decodes_to_the_same_partitions_and_tasks() {
    let mut with_deletes = task("file:///wh/t/data/b.parquet", 900);
    with_deletes.deletes = vec![position_delete("file:///wh/t/data/b-deletes.parquet")];
    let mut with_partition = task("file:///wh/t/data/c.parquet", 300);
    with_partition.partition = Some(Struct::empty());
    let mut with_constants = task("file:///wh/t/data/f.parquet", 10);
    let identity = vec![(2, PrimitiveLiteral::String("eu".into()))];
    constants::attach(&mut with_constants, &identity, &schema()).expect("attaches");
    let tasks = vec![
        with_constants,
        task("file:///wh/t/data/a.parquet", 1000),
        with_deletes,
        with_partition,
        task("file:///wh/t/data/d.parquet", 50),
        task("file:///wh/t/data/e.parquet", 700),
    ];
    let scan =
        IcebergScanExec::try_new(scan_parts(), group_tasks(tasks, 3, 0)).expect("valid scan");
    assert_eq!(scan.groups.len(), 3);

    let decoded = round_trip(Arc::new(scan.clone()), &[]);
    let decoded = decoded
        .as_any()
        .downcast_ref::<IcebergScanExec>()
        .expect("an IcebergScanExec");

    assert_eq!(
        decoded.groups, scan.groups,
        "same tasks in the same partitions"
    );
    let groups = decoded
        .groups
        .listed()
        .expect("a small scan lists its tasks");
    assert_eq!(
        decoded.properties().output_partitioning().partition_count(),
        3
    );
    assert_eq!(decoded.schema(), scan.schema());
    assert_eq!(decoded.parts.predicate, scan.parts.predicate);
    assert_eq!(decoded.parts.storage, scan.parts.storage);
    assert_eq!(decoded.parts.project_field_ids, vec![2, 1]);
    assert_eq!(decoded.parts.reshaped_field_ids, vec![2]);
    let first = &groups[0][0];
    assert_eq!(first.project_field_ids, vec![2, 1]);
    assert!(first.name_mapping.is_some());
    assert!(
        groups
            .iter()
            .flatten()
            .all(|t| t.partition.is_none() == t.partition_spec.is_none())
    );
    let carried: Vec<_> = groups
        .iter()
        .flatten()
        .map(constants::attached)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(carried, vec![identity]);
    let deletes: Vec<_> = groups.iter().flatten().flat_map(|t| &t.deletes).collect();
    assert_eq!(deletes.len(), 1);
}

#[tokio::test]
async fn a_scan_of_many_files_sends_each_task_only_its_own_group() {
    let tasks: Vec<_> = (0..100_000)
        .map(|i| {
            task(
                &format!("file:///wh/t/data/{i:06}-0-a1b2c3d4.parquet"),
                1000,
            )
        })
        .collect();
    let scan = Arc::new(
        IcebergScanExec::try_new(scan_parts(), group_tasks(tasks, 2, 0)).expect("valid scan"),
    );
    let codec = FloePhysicalCodec::default();
    let mut plan = Vec::new();
    codec.try_encode(scan.clone(), &mut plan).expect("encodes");
    // Listing the files would take 6.4 MB, in the plan of every task.
    assert!(
        plan.len() < 4096,
        "the plan every task receives does not list the files: {} bytes",
        plan.len()
    );
    let decoded = codec
        .try_decode(&plan, &[], &TaskContext::default())
        .expect("decodes");
    let decoded = decoded
        .as_any()
        .downcast_ref::<IcebergScanExec>()
        .expect("an IcebergScanExec");
    assert_eq!(decoded.groups, TaskGroups::AtCoordinator(2));
    assert_eq!(
        decoded.properties().output_partitioning().partition_count(),
        2
    );

    // What a remote executor's task gets: its own group, in messages of bounded size.
    let listed = scan
        .groups
        .listed()
        .expect("the coordinator lists its tasks");
    let scan_id = scan.scan_id.clone();
    let request = |partition| {
        proto::TaskGroupRequest {
            scan_id: scan_id.clone(),
            partition,
        }
        .encode_to_vec()
    };
    let answers = task_groups::serve(&request(1)).expect("the coordinator keeps the groups");
    assert_eq!(answers.len(), listed[1].len().div_ceil(1000));
    assert!(answers.iter().all(|a| a.len() < 256 * 1024));
    let paths: Vec<String> = answers
        .iter()
        .flat_map(|a| proto::TaskGroup::decode(a.clone()).expect("a group").tasks)
        .map(|t| t.data_file_path)
        .collect();
    let expected: Vec<String> = listed[1].iter().map(|t| t.data_file_path.clone()).collect();
    assert_eq!(paths, expected);
    // An in-process executor's task takes it from the coordinator's own registry.
    let fetched = task_groups::fetch(&scan_id, 0, &schema())
        .await
        .expect("fetched");
    assert_eq!(fetched, listed[0]);

    // Once no plan holds the scan, its groups are gone.
    drop(scan);
    let gone = task_groups::serve(&request(0)).expect_err("ended");
    assert!(gone.message.contains(&scan_id), "{}", gone.message);
}

#[test]
fn empty_scan_has_one_partition_and_survives_the_round_trip() {
    let scan = IcebergScanExec::try_new(scan_parts(), vec![]).expect("valid scan");
    assert_eq!(scan.properties().output_partitioning().partition_count(), 1);
    let decoded = round_trip(Arc::new(scan), &[]);
    assert_eq!(
        decoded.properties().output_partitioning().partition_count(),
        1
    );
}

fn write_spec(partition_spec: PartitionSpec, clustered: bool) -> WriteSpec {
    WriteSpec {
        table: "sales.orders".into(),
        schema: schema(),
        partition_spec: Arc::new(partition_spec),
        storage: StorageSpec::default(),
        data_location: "file:///wh/sales/orders/data".into(),
        write_id: "0190-abc".into(),
        format_version: FormatVersion::V2,
        target_file_size_bytes: 1 << 20,
        parquet: ParquetSettings {
            codec: "snappy".into(),
            page_row_limit: 7,
            page_size_bytes: 4096,
        },
        clustered,
    }
}

#[test]
fn write_node_decodes_to_the_same_spec() {
    let spec = PartitionSpec::builder(schema())
        .with_spec_id(4)
        .add_partition_field("name", "name_bucket", Transform::Bucket(8))
        .expect("valid field")
        .build()
        .expect("valid spec");
    let write = write_spec(spec, true);
    let input: Arc<dyn ExecutionPlan> =
        Arc::new(EmptyExec::new(plan_schema(&schema()).expect("schema")));
    let node = IcebergWriteExec::try_new(input.clone(), Arc::new(write.clone())).expect("valid");
    let decoded = round_trip(Arc::new(node), &[input]);
    let decoded = decoded
        .as_any()
        .downcast_ref::<IcebergWriteExec>()
        .expect("an IcebergWriteExec");
    let got = &decoded.spec;
    assert_eq!(got.partition_spec, write.partition_spec);
    assert_eq!(got.schema, write.schema);
    assert_eq!(got.write_id, write.write_id);
    assert_eq!(got.data_location, write.data_location);
    assert_eq!(got.format_version, write.format_version);
    assert_eq!(got.target_file_size_bytes, write.target_file_size_bytes);
    assert_eq!(got.parquet, write.parquet);
    assert!(got.clustered);
}

#[test]
fn parquet_settings_a_coordinator_did_not_send_are_the_defaults() {
    let defaults = ParquetSettings::of(&Default::default()).expect("no properties are valid");
    assert_eq!(ParquetSettings::decoded("zstd".into(), 0, 0), defaults);
    let sent = ParquetSettings::decoded("snappy".into(), 7, 4096);
    assert_eq!((sent.page_row_limit, sent.page_size_bytes), (7, 4096));
}

#[test]
fn position_delete_write_and_scan_with_positions_decode_as_themselves() {
    let parts = ScanParts {
        positions: true,
        ..scan_parts()
    };
    let scan = IcebergScanExec::try_new(parts, vec![vec![task("file:///wh/t/a.parquet", 10)]])
        .expect("valid scan");
    let columns: Vec<String> = scan
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(columns[2..], [FILE_COLUMN, POS_COLUMN]);
    let decoded = round_trip(Arc::new(scan.clone()), &[]);
    assert_eq!(decoded.schema(), scan.schema());

    let write = write_spec(PartitionSpec::unpartition_spec(), false);
    let input: Arc<dyn ExecutionPlan> = Arc::new(
        ProjectionExec::try_new(
            [FILE_COLUMN, POS_COLUMN].map(|name| {
                let index = scan.schema().index_of(name).expect("column");
                (
                    Arc::new(Column::new(name, index)) as Arc<dyn PhysicalExpr>,
                    name.to_string(),
                )
            }),
            Arc::new(scan),
        )
        .expect("projection"),
    );
    let node = PositionDeleteWriteExec::try_new(input.clone(), Arc::new(write)).expect("valid");
    let decoded = round_trip(Arc::new(node), &[input]);
    let decoded = decoded
        .as_any()
        .downcast_ref::<PositionDeleteWriteExec>()
        .expect("a PositionDeleteWriteExec");
    assert_eq!(decoded.spec.write_id, "0190-abc");
}

#[test]
fn staged_scan_node_decodes_to_the_same_partitions_and_files() {
    let files: Vec<StagedFile> = (0..5)
        .map(|i| StagedFile {
            path: format!("file:///wh/t/data/w1/_staging/w1-{i:05}.arrows"),
            size: 1000 + i,
            rows: 10 * i,
        })
        .collect();
    let schema = plan_schema(&schema()).expect("schema");
    let storage = StorageSpec {
        props: HashMap::from([("s3.region".to_string(), "eu-west-1".to_string())]),
    };
    let scan = StagedScanExec::new(schema.clone(), storage.clone(), group_staged(&files, 3));
    let decoded = round_trip(Arc::new(scan.clone()), &[]);
    let decoded = decoded
        .as_any()
        .downcast_ref::<StagedScanExec>()
        .expect("a StagedScanExec");
    assert_eq!(decoded.groups, scan.groups);
    assert_eq!(
        decoded.properties().output_partitioning().partition_count(),
        3
    );
    assert_eq!(decoded.schema(), schema);
    assert_eq!(decoded.storage, storage);
}
