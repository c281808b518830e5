//! Iceberg partition transforms as DataFusion functions, computed by Iceberg's own
//! transform code. A partitioned write requires its input hash-distributed on them
//! (`write::IcebergWriteExec::required_input_distribution`): rows of one partition
//! value then reach one task, which writes one file for it (times the rolling size),
//! however many tasks the write has. The functions cross to executors inside plans
//! through Floe's codec (`codec::encode_transform`), so executors register nothing.

use std::any::Any;
use std::sync::Arc;

use datafusion::arrow::array::new_empty_array;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::{Result as DfResult, config::ConfigOptions};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr, expressions::Column};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use iceberg::spec::{PartitionSpec, Schema as IcebergSchema, Transform};
use iceberg::transform::create_transform_function;

use crate::error::{FloeError, Result, iceberg_to_df};

/// Name prefix of the transform functions (`iceberg_transform_day`, …).
pub const PREFIX: &str = "iceberg_transform_";

/// `transform` applied to a column of type `input`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TransformUdf {
    pub transform: Transform,
    pub input: DataType,
    name: String,
    output: DataType,
    signature: Signature,
}

impl TransformUdf {
    pub fn try_new(transform: Transform, input: DataType) -> Result<Self> {
        // The output type is what Iceberg's code makes of the input type.
        let function = create_transform_function(&transform)?;
        let output = function
            .transform(new_empty_array(&input))?
            .data_type()
            .clone();
        Ok(Self {
            name: format!("{PREFIX}{transform}"),
            signature: Signature::exact(vec![input.clone()], Volatility::Immutable),
            transform,
            input,
            output,
        })
    }
}

impl ScalarUDFImpl for TransformUdf {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(self.output.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let [column] = args.args.as_slice() else {
            return datafusion::common::internal_err!("{} takes one argument", self.name);
        };
        let values = column.to_array(args.number_rows)?;
        let function = create_transform_function(&self.transform).map_err(iceberg_to_df)?;
        Ok(ColumnarValue::Array(
            function.transform(values).map_err(iceberg_to_df)?,
        ))
    }
}

/// Name prefix of the columns that carry a write's partition values.
const VALUE_COLUMN_PREFIX: &str = "__floe_partition_value_";

/// `input` (the table's top-level columns in order) with the partition values of
/// `spec` appended as columns; `input` itself if the table is unpartitioned or a
/// partition source is not a top-level column.
///
/// The write requires its input hash-distributed on these columns rather than on the
/// transform calls: Ballista encodes a shuffle's hash expressions without Floe's codec,
/// so an executor could not decode a transform there, while a projection is encoded
/// with it.
pub fn with_partition_values(
    input: Arc<dyn ExecutionPlan>,
    spec: &PartitionSpec,
    schema: &IcebergSchema,
) -> Result<Arc<dyn ExecutionPlan>> {
    if spec.is_unpartitioned() {
        return Ok(input);
    }
    let input_schema = input.schema();
    let top_level = schema.as_struct().fields();
    let mut exprs: Vec<ProjectionExpr> = input_schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| ProjectionExpr::new(Arc::new(Column::new(f.name(), i)), f.name().clone()))
        .collect();
    for (n, field) in spec.fields().iter().enumerate() {
        let source = top_level.iter().position(|f| f.id == field.source_id);
        let Some((index, source)) = source.and_then(|i| Some((i, input_schema.fields().get(i)?)))
        else {
            return Ok(input);
        };
        let udf = TransformUdf::try_new(field.transform, source.data_type().clone())?;
        let call = ScalarFunctionExpr::try_new(
            Arc::new(ScalarUDF::new_from_impl(udf)),
            vec![Arc::new(Column::new(source.name(), index))],
            &input_schema,
            Arc::new(ConfigOptions::default()),
        )
        .map_err(|e| FloeError::internal(format!("partition expression: {e}")))?;
        exprs.push(ProjectionExpr::new(
            Arc::new(call),
            format!("{VALUE_COLUMN_PREFIX}{n}"),
        ));
    }
    let projection = ProjectionExec::try_new(exprs, input)
        .map_err(|e| FloeError::internal(format!("partition values: {e}")))?;
    Ok(Arc::new(projection))
}

/// The partition value columns [`with_partition_values`] appended to `schema`.
pub fn partition_value_columns(schema: &Schema) -> Vec<Arc<dyn PhysicalExpr>> {
    schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| f.name().starts_with(VALUE_COLUMN_PREFIX))
        .map(|(i, f)| Arc::new(Column::new(f.name(), i)) as Arc<dyn PhysicalExpr>)
        .collect()
}
