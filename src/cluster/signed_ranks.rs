//! `row_number`, `rank`, `dense_rank` and `ntile` as BIGINT, as PostgreSQL, DuckDB and
//! Trino type them. DataFusion 53 types them as unsigned 64-bit integers, so that
//! `row_number() OVER (…) - rank() OVER (…)` wrapped around to 18446744073709551611
//! instead of -5, `-ntile(3) OVER (…)` failed, and JDBC clients, which have no unsigned
//! type, were handed one. Each is registered under its own name around the function it
//! replaces, whose values it casts.

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
    Documentation, LimitEffect, PartitionEvaluator, ReversedUDWF, Signature, WindowUDF,
    WindowUDFImpl,
};
use datafusion::physical_expr::PhysicalExpr;

/// The window functions Floe registers in place of DataFusion's unsigned ones.
pub fn signed_ranks() -> Vec<Arc<WindowUDF>> {
    use datafusion::functions_window::{rank, row_number};
    [
        row_number::row_number_udwf(),
        rank::rank_udwf(),
        rank::dense_rank_udwf(),
        super::ntile::ntile(),
    ]
    .into_iter()
    .map(signed)
    .collect()
}

fn signed(unsigned: Arc<WindowUDF>) -> Arc<WindowUDF> {
    Arc::new(WindowUDF::new_from_impl(Signed { unsigned }))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Signed {
    unsigned: Arc<WindowUDF>,
}

impl WindowUDFImpl for Signed {
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
            ReversedUDWF::Reversed(reversed) => ReversedUDWF::Reversed(signed(reversed)),
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

impl SignedEvaluator {
    fn signed(values: ArrayRef) -> Result<ArrayRef> {
        Ok(cast(&values, &DataType::Int64)?)
    }
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
        Self::signed(self.unsigned.evaluate_all(values, num_rows)?)
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
        Self::signed(
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
