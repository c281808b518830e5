//! `ntile(n)` as SQL defines it (and PostgreSQL, Spark, Trino and DuckDB compute it): the
//! partition's rows split into `n` buckets whose sizes differ by at most one, the larger
//! buckets first. DataFusion 53's own gives row `i` of `r` the bucket `i * n / r + 1`,
//! which spreads the larger buckets out instead (30 rows in 4: 8, 7, 8, 7 rather than 8,
//! 8, 7, 7). It replaces DataFusion's under the same name on the coordinator and on
//! executors, as a BIGINT (`signed`); the signature stays DataFusion's.

use std::any::Any;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, UInt64Array};
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::functions_window::ntile::Ntile as DataFusionNtile;
use datafusion::logical_expr::function::{PartitionEvaluatorArgs, WindowUDFFieldArgs};
use datafusion::logical_expr::{
    Documentation, LimitEffect, PartitionEvaluator, Signature, WindowUDF, WindowUDFImpl,
};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Literal;

/// The `ntile` window function Floe registers.
pub fn ntile() -> Arc<WindowUDF> {
    Arc::new(WindowUDF::new_from_impl(Ntile::default()))
}

#[derive(Debug, Default, PartialEq, Eq, Hash)]
struct Ntile {
    /// DataFusion's, for everything but the buckets.
    datafusion: DataFusionNtile,
}

impl WindowUDFImpl for Ntile {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        self.datafusion.name()
    }

    fn signature(&self) -> &Signature {
        self.datafusion.signature()
    }

    fn partition_evaluator(
        &self,
        args: PartitionEvaluatorArgs,
    ) -> Result<Box<dyn PartitionEvaluator>> {
        let n = args
            .input_exprs()
            .first()
            .and_then(|expr| expr.as_any().downcast_ref::<Literal>())
            .map(|literal| literal.value().cast_to(&DataType::Int64));
        match n {
            Some(Ok(ScalarValue::Int64(Some(n)))) if n > 0 => Ok(Box::new(Buckets { n: n as u64 })),
            // The statement's to fix (PostgreSQL: "argument of ntile must be greater than zero").
            _ => plan_err!("NTILE takes a positive integer constant"),
        }
    }

    fn field(&self, args: WindowUDFFieldArgs) -> Result<FieldRef> {
        self.datafusion.field(args)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.datafusion.documentation()
    }

    fn limit_effect(&self, args: &[Arc<dyn PhysicalExpr>]) -> LimitEffect {
        self.datafusion.limit_effect(args)
    }
}

#[derive(Debug)]
struct Buckets {
    n: u64,
}

impl PartitionEvaluator for Buckets {
    fn evaluate_all(&mut self, _: &[ArrayRef], rows: usize) -> Result<ArrayRef> {
        let rows = rows as u64;
        let buckets: UInt64Array = (0..rows).map(|row| bucket_of(row, rows, self.n)).collect();
        Ok(Arc::new(buckets))
    }
}

/// The bucket (from 1) of row `row` (from 0) of `rows` split into `n` buckets: the first
/// `rows % n` buckets hold one row more than the others.
fn bucket_of(row: u64, rows: u64, n: u64) -> u64 {
    let (size, larger) = (rows / n, rows % n);
    let in_larger = larger * (size + 1);
    if row < in_larger {
        row / (size + 1) + 1
    } else {
        larger + (row - in_larger) / size + 1
    }
}
