//! `median` of integers as a double: DataFusion 53's keeps its argument's type, so the
//! median of 30 and 31 was 30 (the mean of the middle two, cut to an integer), where
//! Spark, DuckDB and PostgreSQL's `percentile_cont(0.5)` answer 30.5. Floe's takes integers
//! as doubles and leaves everything else (floats, decimals, the work itself) to
//! DataFusion's; it replaces DataFusion's under the same name on the coordinator and on
//! executors.

use std::any::Any;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, plan_err};
use datafusion::functions_aggregate::median::Median as DataFusionMedian;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, GroupsAccumulator, Signature,
    Volatility,
};

/// The `median` aggregate Floe registers.
pub fn median() -> Arc<AggregateUDF> {
    Arc::new(AggregateUDF::new_from_impl(Median::default()))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Median {
    signature: Signature,
    /// DataFusion's, for everything but the argument's type.
    datafusion: DataFusionMedian,
}

impl Default for Median {
    fn default() -> Self {
        Median {
            signature: Signature::user_defined(Volatility::Immutable),
            datafusion: DataFusionMedian::new(),
        }
    }
}

impl AggregateUDFImpl for Median {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        self.datafusion.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [arg] = arg_types else {
            return plan_err!("median takes one argument, not {}", arg_types.len());
        };
        match arg {
            arg if arg.is_integer() || arg.is_null() => Ok(vec![DataType::Float64]),
            arg if arg.is_floating() || arg.is_decimal() => Ok(vec![arg.clone()]),
            arg => plan_err!("median takes a number, not {arg}"),
        }
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.datafusion.return_type(arg_types)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        self.datafusion.state_fields(args)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.datafusion.accumulator(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.datafusion.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        self.datafusion.create_groups_accumulator(args)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.datafusion.documentation()
    }
}
