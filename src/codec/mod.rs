//! Floe's physical extension codec: Floe's plan nodes as `proto/floe.proto` messages,
//! everything else delegated to Ballista's own codec (its shuffle nodes travel through
//! the same hooks). A leading tag byte tells the two apart.

use std::sync::Arc;

use ballista_core::serde::BallistaPhysicalExtensionCodec;
use datafusion::common::{Result as DfResult, internal_err};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::ScalarUDF;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::PhysicalExtensionCodec;
use iceberg::scan::{FileScanTask, FileScanTaskDeleteFile};
use iceberg::spec::{FormatVersion, PartitionSpec, Schema};
use prost::Message;

use crate::catalog::StorageSpec;
use crate::cluster::like_segments::{self, LikeSegments};
use crate::error::{FloeError, Result};
use crate::table::constants;
use crate::table::position_deletes::PositionDeleteWriteExec;
use crate::table::scan::{IcebergScanExec, ScanParts, TaskGroups};
use crate::table::staged_scan::StagedScanExec;
use crate::table::staging::{StagedFile, schema_from_ipc, schema_to_ipc};
use crate::table::transforms::{self, TransformUdf};
use crate::table::write::{IcebergWriteExec, ParquetSettings, WriteSpec};

pub mod task_groups;

/// Generated from `proto/floe.proto`.
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/floe.plan.rs"));
}

const TAG_BALLISTA: u8 = 0;
const TAG_FLOE: u8 = 1;

#[derive(Debug, Default)]
pub struct FloePhysicalCodec {
    ballista: BallistaPhysicalExtensionCodec,
}

impl PhysicalExtensionCodec for FloePhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        match buf.split_first() {
            Some((&TAG_BALLISTA, rest)) => self.ballista.try_decode(rest, inputs, ctx),
            Some((&TAG_FLOE, rest)) => Ok(decode_node(rest, inputs)?),
            _ => internal_err!("plan node without a known codec tag"),
        }
    }

    fn try_encode(&self, node: Arc<dyn ExecutionPlan>, buf: &mut Vec<u8>) -> DfResult<()> {
        let message = if let Some(scan) = node.as_any().downcast_ref::<IcebergScanExec>() {
            proto::floe_node::Node::Scan(encode_scan(scan)?)
        } else if let Some(write) = node.as_any().downcast_ref::<IcebergWriteExec>() {
            proto::floe_node::Node::Write(encode_write(&write.spec, false)?)
        } else if let Some(write) = node.as_any().downcast_ref::<PositionDeleteWriteExec>() {
            proto::floe_node::Node::Write(encode_write(&write.spec, true)?)
        } else if let Some(staged) = node.as_any().downcast_ref::<StagedScanExec>() {
            proto::floe_node::Node::StagedScan(encode_staged_scan(staged))
        } else {
            buf.push(TAG_BALLISTA);
            return self.ballista.try_encode(node, buf);
        };
        buf.push(TAG_FLOE);
        proto::FloeNode {
            node: Some(message),
        }
        .encode(buf)
        .map_err(|e| FloeError::internal(format!("encoding a plan node: {e}")))?;
        Ok(())
    }

    fn try_encode_udf(&self, node: &ScalarUDF, buf: &mut Vec<u8>) -> DfResult<()> {
        match node.inner().as_any().downcast_ref::<TransformUdf>() {
            Some(udf) => {
                buf.extend(encode_transform(udf)?);
                Ok(())
            }
            // Others (Floe's `LikeSegments` too) are decoded by their name alone.
            None => self.ballista.try_encode_udf(node, buf),
        }
    }

    fn try_decode_udf(&self, name: &str, buf: &[u8]) -> DfResult<Arc<ScalarUDF>> {
        if name.starts_with(transforms::PREFIX) {
            let udf = decode_transform(buf)?;
            return Ok(Arc::new(ScalarUDF::new_from_impl(udf)));
        }
        if name == like_segments::NAME {
            return Ok(Arc::new(ScalarUDF::new_from_impl(LikeSegments::default())));
        }
        self.ballista.try_decode_udf(name, buf)
    }
}

/// A partition transform function: its transform and input type, as JSON.
fn encode_transform(udf: &TransformUdf) -> Result<Vec<u8>> {
    let wire = (udf.transform.to_string(), udf.input.to_string());
    serde_json::to_vec(&wire).map_err(|e| FloeError::internal(format!("encoding a transform: {e}")))
}

fn decode_transform(buf: &[u8]) -> Result<TransformUdf> {
    let (transform, input): (String, String) = serde_json::from_slice(buf)
        .map_err(|e| FloeError::internal(format!("decoding a transform: {e}")))?;
    let transform = transform
        .parse()
        .map_err(|e| FloeError::internal(format!("decoding a transform: {e}")))?;
    let input = input
        .parse()
        .map_err(|e| FloeError::internal(format!("decoding a transform's input type: {e}")))?;
    TransformUdf::try_new(transform, input)
}

fn decode_node(buf: &[u8], inputs: &[Arc<dyn ExecutionPlan>]) -> Result<Arc<dyn ExecutionPlan>> {
    let node = proto::FloeNode::decode(buf)
        .map_err(|e| FloeError::internal(format!("decoding a plan node: {e}")))?;
    match node.node {
        Some(proto::floe_node::Node::Scan(scan)) => Ok(Arc::new(decode_scan(scan)?)),
        Some(proto::floe_node::Node::Write(write)) => {
            let [input] = inputs else {
                return Err(FloeError::internal(
                    "IcebergWriteExec takes exactly one input",
                ));
            };
            let position_deletes = write.position_deletes;
            let spec = Arc::new(decode_write(write)?);
            match position_deletes {
                true => Ok(Arc::new(PositionDeleteWriteExec::try_new(
                    input.clone(),
                    spec,
                )?)),
                false => Ok(Arc::new(IcebergWriteExec::try_new(input.clone(), spec)?)),
            }
        }
        Some(proto::floe_node::Node::StagedScan(staged)) => {
            Ok(Arc::new(decode_staged_scan(staged)?))
        }
        None => Err(FloeError::internal("empty Floe plan node")),
    }
}

/// A scan's wire form: its tasks listed per group, or, past
/// [`task_groups::INLINE_TASKS`], kept at the coordinator for each task to fetch.
pub fn encode_scan(scan: &IcebergScanExec) -> Result<proto::ScanNode> {
    let (groups, groups_at_coordinator) = match &scan.groups {
        TaskGroups::Listed(groups) if scan.task_count() > Some(task_groups::INLINE_TASKS) => {
            task_groups::keep(&scan.scan_id, groups);
            (Vec::new(), groups.len())
        }
        TaskGroups::Listed(groups) => {
            let listed = groups
                .iter()
                .map(|tasks| {
                    Ok(proto::TaskGroup {
                        tasks: tasks.iter().map(encode_task).collect::<Result<_>>()?,
                    })
                })
                .collect::<Result<_>>()?;
            (listed, 0)
        }
        TaskGroups::AtCoordinator(count) => (Vec::new(), *count),
    };
    Ok(proto::ScanNode {
        table: scan.parts.table.clone(),
        schema_json: to_json(scan.parts.schema.as_ref())?,
        project_field_ids: scan.parts.project_field_ids.clone(),
        predicate_json: scan.parts.predicate.as_ref().map(to_json).transpose()?,
        name_mapping_json: scan.parts.name_mapping.clone(),
        storage: Some(encode_storage(&scan.parts.storage)),
        groups,
        case_sensitive: scan.parts.case_sensitive,
        reshaped_field_ids: scan.parts.reshaped_field_ids.clone(),
        scan_id: scan.scan_id.clone(),
        groups_at_coordinator: groups_at_coordinator as u32,
        positions: scan.parts.positions,
    })
}

fn encode_task(task: &FileScanTask) -> Result<proto::FileTask> {
    Ok(proto::FileTask {
        data_file_path: task.data_file_path.clone(),
        file_size_in_bytes: task.file_size_in_bytes,
        start: task.start,
        length: task.length,
        record_count: task.record_count,
        data_file_format: task.data_file_format.to_string(),
        deletes_json: task.deletes.iter().map(to_json).collect::<Result<_>>()?,
        identity_constants: constants::attached(task)
            .iter()
            .map(|c| {
                Ok(proto::PartitionConstant {
                    field_id: c.0,
                    value_json: constants::to_json(c, &task.schema)?,
                })
            })
            .collect::<Result<_>>()?,
    })
}

pub fn decode_scan(node: proto::ScanNode) -> Result<IcebergScanExec> {
    let schema: Arc<Schema> = Arc::new(from_json(&node.schema_json)?);
    let groups = if node.groups_at_coordinator > 0 {
        TaskGroups::AtCoordinator(node.groups_at_coordinator as usize)
    } else {
        let listed = node
            .groups
            .into_iter()
            .map(|group| {
                group
                    .tasks
                    .into_iter()
                    .map(|task| decode_task(task, &schema))
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        TaskGroups::Listed(Arc::new(listed))
    };
    let parts = ScanParts {
        table: node.table,
        schema,
        project_field_ids: node.project_field_ids,
        predicate: node.predicate_json.as_deref().map(from_json).transpose()?,
        name_mapping: node.name_mapping_json,
        storage: decode_storage(node.storage),
        case_sensitive: node.case_sensitive,
        reshaped_field_ids: node.reshaped_field_ids,
        positions: node.positions,
    };
    IcebergScanExec::with_groups(parts, node.scan_id, groups)
}

/// The per-node parts (schema, projection, predicate) are re-attached by
/// `IcebergScanExec::try_new`.
fn decode_task(task: proto::FileTask, schema: &Arc<Schema>) -> Result<FileScanTask> {
    let identity_constants = task
        .identity_constants
        .iter()
        .map(|c| constants::from_json(c.field_id, &c.value_json, schema))
        .collect::<Result<Vec<_>>>()?;
    let mut decoded = FileScanTask {
        file_size_in_bytes: task.file_size_in_bytes,
        start: task.start,
        length: task.length,
        record_count: task.record_count,
        data_file_path: task.data_file_path,
        data_file_format: task
            .data_file_format
            .parse()
            .map_err(|e| FloeError::internal(format!("data file format: {e}")))?,
        schema: schema.clone(),
        project_field_ids: Vec::new(),
        predicate: None,
        deletes: task
            .deletes_json
            .iter()
            .map(|d| from_json::<FileScanTaskDeleteFile>(d))
            .collect::<Result<_>>()?,
        partition: None,
        partition_spec: None,
        name_mapping: None,
        case_sensitive: true,
    };
    constants::attach(&mut decoded, &identity_constants, schema)?;
    Ok(decoded)
}

fn encode_write(spec: &WriteSpec, position_deletes: bool) -> Result<proto::WriteNode> {
    Ok(proto::WriteNode {
        table: spec.table.clone(),
        schema_json: to_json(spec.schema.as_ref())?,
        partition_spec_json: to_json(spec.partition_spec.as_ref())?,
        storage: Some(encode_storage(&spec.storage)),
        data_location: spec.data_location.clone(),
        write_id: spec.write_id.clone(),
        format_version: spec.format_version as i32,
        target_file_size_bytes: spec.target_file_size_bytes,
        compression_codec: spec.parquet.codec.clone(),
        page_row_limit: spec.parquet.page_row_limit as u64,
        page_size_bytes: spec.parquet.page_size_bytes as u64,
        clustered: spec.clustered,
        position_deletes,
    })
}

fn decode_write(node: proto::WriteNode) -> Result<WriteSpec> {
    let format_version = match node.format_version {
        1 => FormatVersion::V1,
        2 => FormatVersion::V2,
        3 => FormatVersion::V3,
        v => return Err(FloeError::internal(format!("unknown format version {v}"))),
    };
    Ok(WriteSpec {
        table: node.table,
        schema: Arc::new(from_json(&node.schema_json)?),
        partition_spec: Arc::new(from_json::<PartitionSpec>(&node.partition_spec_json)?),
        storage: decode_storage(node.storage),
        data_location: node.data_location,
        write_id: node.write_id,
        format_version,
        target_file_size_bytes: node.target_file_size_bytes,
        parquet: ParquetSettings::decoded(
            node.compression_codec,
            node.page_row_limit,
            node.page_size_bytes,
        ),
        clustered: node.clustered,
    })
}

pub fn encode_staged_scan(scan: &StagedScanExec) -> proto::StagedScanNode {
    proto::StagedScanNode {
        schema_ipc: schema_to_ipc(&scan.schema),
        storage: Some(encode_storage(&scan.storage)),
        groups: scan
            .groups
            .iter()
            .map(|files| proto::StagedFileGroup {
                files: files
                    .iter()
                    .map(|file| proto::StagedFile {
                        path: file.path.clone(),
                        size: file.size,
                        rows: file.rows,
                    })
                    .collect(),
            })
            .collect(),
    }
}

pub fn decode_staged_scan(node: proto::StagedScanNode) -> Result<StagedScanExec> {
    let groups = node
        .groups
        .into_iter()
        .map(|group| {
            group
                .files
                .into_iter()
                .map(|file| StagedFile {
                    path: file.path,
                    size: file.size,
                    rows: file.rows,
                })
                .collect()
        })
        .collect();
    Ok(StagedScanExec::new(
        schema_from_ipc(&node.schema_ipc)?,
        decode_storage(node.storage),
        groups,
    ))
}

fn encode_storage(storage: &StorageSpec) -> proto::StorageSpec {
    proto::StorageSpec {
        props: storage.props.clone(),
    }
}

fn decode_storage(storage: Option<proto::StorageSpec>) -> StorageSpec {
    StorageSpec {
        props: storage.map(|s| s.props).unwrap_or_default(),
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value)
        .map_err(|e| FloeError::internal(format!("encoding a plan node: {e}")))
}

fn from_json<T: serde::de::DeserializeOwned>(json: &str) -> Result<T> {
    serde_json::from_str(json)
        .map_err(|e| FloeError::internal(format!("decoding a plan node: {e}")))
}
