//! Counts, positions and ranks as BIGINT, as PostgreSQL, DuckDB and Trino type them.
//! DataFusion 53 types `row_number`, `rank`, `dense_rank`, `ntile`, `cardinality`,
//! `array_length`, `array_ndims` and `array_position` as unsigned 64-bit integers, so
//! that `row_number() OVER (…) - rank() OVER (…)` or `cardinality(a) - cardinality(b)`
//! wrapped around to 18446744073709551614 instead of -2, `-ntile(3) OVER (…)` failed,
//! `n - 1` became a DECIMAL(21, 0), and JDBC clients, which have no unsigned type, were
//! handed one. Each is registered under its own name around the function it replaces,
//! whose values it casts.

use std::any::Any;
use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{
    ExpressionArgs, PartitionEvaluatorArgs, WindowFunctionSimplification, WindowUDFFieldArgs,
};
use datafusion::logical_expr::window_state::WindowAggState;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, LimitEffect, PartitionEvaluator, ReturnFieldArgs, ReversedUDWF,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, WindowUDF, WindowUDFImpl,
};
use datafusion::physical_expr::PhysicalExpr;

/// The window functions Floe registers in place of DataFusion's unsigned ones.
pub fn signed_window_functions() -> Vec<Arc<WindowUDF>> {
    use datafusion::functions_window::rank;
    let mut functions = vec![row_number()];
    functions.extend(
        [
            rank::rank_udwf(),
            rank::dense_rank_udwf(),
            super::ntile::ntile(),
        ]
        .into_iter()
        .map(signed_window_function),
    );
    functions
}

/// Floe's `row_number`, for plans Floe builds itself (their functions are found by
/// name on executors).
pub fn row_number() -> Arc<WindowUDF> {
    signed_window_function(datafusion::functions_window::row_number::row_number_udwf())
}

/// The scalar functions Floe registers in place of DataFusion's unsigned ones.
pub fn signed_scalar_functions() -> Vec<Arc<ScalarUDF>> {
    use datafusion::functions_nested::{cardinality, dimension, length, position};
    [
        cardinality::cardinality_udf(),
        length::array_length_udf(),
        dimension::array_ndims_udf(),
        position::array_position_udf(),
    ]
    .into_iter()
    .map(|unsigned| Arc::new(ScalarUDF::new_from_impl(SignedScalar { unsigned })))
    .collect()
}

fn signed_window_function(unsigned: Arc<WindowUDF>) -> Arc<WindowUDF> {
    Arc::new(WindowUDF::new_from_impl(SignedWindow { unsigned }))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SignedScalar {
    unsigned: Arc<ScalarUDF>,
}

impl ScalarUDFImpl for SignedScalar {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        self.unsigned.name()
    }

    fn aliases(&self) -> &[String] {
        self.unsigned.aliases()
    }

    fn signature(&self) -> &Signature {
        self.unsigned.signature()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.unsigned.coerce_types(arg_types)
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.unsigned
            .return_type(arg_types)
            .map(|_| DataType::Int64)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let field = self.unsigned.return_field_from_args(args)?;
        Ok(Arc::new(Field::new(
            field.name(),
            DataType::Int64,
            field.is_nullable(),
        )))
    }

    fn invoke_with_args(&self, mut args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        args.return_field = Arc::new(
            args.return_field
                .as_ref()
                .clone()
                .with_data_type(DataType::UInt64),
        );
        match self.unsigned.invoke_with_args(args)? {
            ColumnarValue::Array(values) => Ok(ColumnarValue::Array(signed(values)?)),
            ColumnarValue::Scalar(value) => {
                Ok(ColumnarValue::Scalar(value.cast_to(&DataType::Int64)?))
            }
        }
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.unsigned.documentation()
    }
}

fn signed(values: ArrayRef) -> Result<ArrayRef> {
    Ok(cast(&values, &DataType::Int64)?)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SignedWindow {
    unsigned: Arc<WindowUDF>,
}

impl WindowUDFImpl for SignedWindow {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        self.unsigned.name()
    }

    fn aliases(&self) -> &[String] {
        self.unsigned.aliases()
    }

    fn signature(&self) -> &Signature {
        self.unsigned.signature()
    }

    fn expressions(&self, args: ExpressionArgs) -> Vec<Arc<dyn PhysicalExpr>> {
        self.unsigned.expressions(args)
    }

    fn simplify(&self) -> Option<WindowFunctionSimplification> {
        self.unsigned.simplify()
    }

    fn partition_evaluator(
        &self,
        args: PartitionEvaluatorArgs,
    ) -> Result<Box<dyn PartitionEvaluator>> {
        Ok(Box::new(SignedEvaluator {
            unsigned: self.unsigned.partition_evaluator_factory(args)?,
        }))
    }

    fn field(&self, args: WindowUDFFieldArgs) -> Result<FieldRef> {
        let field = self.unsigned.field(args)?;
        Ok(Arc::new(Field::new(
            field.name(),
            DataType::Int64,
            field.is_nullable(),
        )))
    }

    fn sort_options(&self) -> Option<SortOptions> {
        self.unsigned.sort_options()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.unsigned.coerce_types(arg_types)
    }

    fn reverse_expr(&self) -> ReversedUDWF {
        match self.unsigned.reverse_expr() {
            ReversedUDWF::Reversed(reversed) => {
                ReversedUDWF::Reversed(signed_window_function(reversed))
            }
            same_or_none => same_or_none,
        }
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.unsigned.documentation()
    }

    fn limit_effect(&self, args: &[Arc<dyn PhysicalExpr>]) -> LimitEffect {
        self.unsigned.inner().limit_effect(args)
    }
}

#[derive(Debug)]
struct SignedEvaluator {
    unsigned: Box<dyn PartitionEvaluator>,
}

impl PartitionEvaluator for SignedEvaluator {
    fn memoize(&mut self, state: &mut WindowAggState) -> Result<()> {
        self.unsigned.memoize(state)
    }

    fn get_range(&self, idx: usize, n_rows: usize) -> Result<Range<usize>> {
        self.unsigned.get_range(idx, n_rows)
    }

    fn is_causal(&self) -> bool {
        self.unsigned.is_causal()
    }

    fn evaluate_all(&mut self, values: &[ArrayRef], num_rows: usize) -> Result<ArrayRef> {
        signed(self.unsigned.evaluate_all(values, num_rows)?)
    }

    fn evaluate(&mut self, values: &[ArrayRef], range: &Range<usize>) -> Result<ScalarValue> {
        self.unsigned
            .evaluate(values, range)?
            .cast_to(&DataType::Int64)
    }

    fn evaluate_all_with_rank(
        &self,
        num_rows: usize,
        ranks_in_partition: &[Range<usize>],
    ) -> Result<ArrayRef> {
        signed(
            self.unsigned
                .evaluate_all_with_rank(num_rows, ranks_in_partition)?,
        )
    }

    fn supports_bounded_execution(&self) -> bool {
        self.unsigned.supports_bounded_execution()
    }

    fn uses_window_frame(&self) -> bool {
        self.unsigned.uses_window_frame()
    }

    fn include_rank(&self) -> bool {
        self.unsigned.include_rank()
    }
}
