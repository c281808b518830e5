//! Aggregates over moving window frames (`sum(x) OVER (ORDER BY d RANGE BETWEEN …)`)
//! computed with SQL's answers where DataFusion 53's sliding path gives wrong ones:
//!
//! * a `RANGE` frame that is empty between non-empty ones (`RANGE BETWEEN 3 FOLLOWING AND
//!   3 FOLLOWING` over keys with gaps, `INTERVAL '7 days' PRECEDING AND INTERVAL '1 day'
//!   PRECEDING` over dates with gaps) left the rows of the frame before it in the
//!   accumulator, so every aggregate after it counted them again
//!   (apache/datafusion#24184);
//! * `min` over a frame holding only NULLs answered the last value it had seen
//!   (apache/datafusion#23872);
//! * `avg` over a frame holding only NULLs answered NaN, and of a decimal divided by zero
//!   (apache/datafusion#22138).
//!
//! Such a window over a `RANGE` frame that may be empty between rows calls a window
//! function of Floe's instead (`floe_frame_min`, …), which feeds DataFusion's own sliding
//! accumulator the rows entering and leaving the frame, keeping track itself of the rows
//! the accumulator holds; it reads each partition whole. Over any other moving frame
//! (`ROWS`, `GROUPS`, a `RANGE` reaching the current row) DataFusion's streaming window
//! stays, with an aggregate of Floe's (`floe_sliding_min`, …) whose accumulator wraps
//! DataFusion's. Either answers NULL (0 for `count`) for a frame without a value, and
//! starts a fresh accumulator whenever the frame holds no value (retracting every value
//! leaves DataFusion's variance dividing by zero ever after).

use std::any::Any;
use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::expr::{WindowFunction, WindowFunctionParams};
use datafusion::logical_expr::function::{
    AccumulatorArgs, PartitionEvaluatorArgs, StateFieldsArgs, WindowUDFFieldArgs,
};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Expr, PartitionEvaluator, Signature, WindowFrame,
    WindowFrameBound, WindowFrameUnits, WindowFunctionDefinition, WindowUDF, WindowUDFImpl,
};
use datafusion::physical_expr::PhysicalExpr;

/// DataFusion's aggregates that Floe computes over moving frames itself.
const FRAMED: [&str; 9] = [
    "sum",
    "count",
    "avg",
    "min",
    "max",
    "stddev",
    "stddev_pop",
    "var_samp",
    "var_pop",
];

/// The aggregates whose sliding accumulators are wrong over any frame of only NULLs.
const WRONG_OVER_NULLS: [&str; 6] = ["min", "avg", "stddev", "stddev_pop", "var_samp", "var_pop"];

/// The window functions Floe registers on the coordinator and on executors.
pub fn frame_aggregates() -> Vec<Arc<WindowUDF>> {
    datafusion_aggregates(&FRAMED)
        .map(|aggregate| Arc::new(WindowUDF::new_from_impl(FloeAggregate::frame(aggregate))))
        .collect()
}

/// The aggregates Floe registers on the coordinator and on executors.
pub fn sliding_aggregates() -> Vec<Arc<AggregateUDF>> {
    datafusion_aggregates(&WRONG_OVER_NULLS)
        .map(|aggregate| {
            Arc::new(AggregateUDF::new_from_impl(FloeAggregate::sliding(
                aggregate,
            )))
        })
        .collect()
}

/// The aggregates of `names` as sessions have them (DataFusion's, `avg` Floe's).
fn datafusion_aggregates(names: &[&str]) -> impl Iterator<Item = Arc<AggregateUDF>> {
    datafusion::functions_aggregate::all_default_aggregate_functions()
        .into_iter()
        .map(|aggregate| match aggregate.name() {
            "avg" => super::rounded_avg::avg(),
            _ => aggregate,
        })
        .filter(|aggregate| names.contains(&aggregate.name()))
}

/// `expr` calling Floe's window function, where DataFusion's sliding path would
/// answer it wrongly.
pub(super) fn framed(expr: &Expr) -> Option<Expr> {
    let Expr::WindowFunction(function) = expr else {
        return None;
    };
    let WindowFunctionDefinition::AggregateUDF(aggregate) = &function.fun else {
        return None;
    };
    let params = &function.params;
    let plain = !params.distinct && params.filter.is_none() && params.null_treatment.is_none();
    let name = aggregate.name();
    if !plain || params.window_frame.is_ever_expanding() {
        return None;
    }
    let aggregate = Arc::clone(aggregate);
    let fun = if FRAMED.contains(&name) && may_empty_between_rows(&params.window_frame) {
        WindowFunctionDefinition::WindowUDF(Arc::new(WindowUDF::new_from_impl(
            FloeAggregate::frame(aggregate),
        )))
    } else if WRONG_OVER_NULLS.contains(&name) {
        WindowFunctionDefinition::AggregateUDF(Arc::new(AggregateUDF::new_from_impl(
            FloeAggregate::sliding(aggregate),
        )))
    } else {
        return None;
    };
    Some(Expr::WindowFunction(Box::new(WindowFunction {
        fun,
        params: WindowFunctionParams {
            args: params.args.clone(),
            partition_by: params.partition_by.clone(),
            order_by: params.order_by.clone(),
            window_frame: params.window_frame.clone(),
            filter: None,
            null_treatment: None,
            distinct: false,
        },
    })))
}

/// Whether a frame may hold no row between rows whose frames hold some: only a `RANGE`
/// frame can (its rows are found by value), and only where it does not reach the
/// current row.
fn may_empty_between_rows(frame: &WindowFrame) -> bool {
    frame.units == WindowFrameUnits::Range
        && (matches!(&frame.start_bound, WindowFrameBound::Following(v) if !v.is_null())
            || matches!(&frame.end_bound, WindowFrameBound::Preceding(v) if !v.is_null()))
}

/// DataFusion's aggregate under a name of Floe's: as a window function over frames that
/// may be empty between rows (`floe_frame_*`), or as an aggregate whose sliding
/// accumulator is right (`floe_sliding_*`).
#[derive(Debug, PartialEq, Eq, Hash)]
struct FloeAggregate {
    name: String,
    aggregate: Arc<AggregateUDF>,
}

impl FloeAggregate {
    fn frame(aggregate: Arc<AggregateUDF>) -> Self {
        let name = format!("floe_frame_{}", aggregate.name());
        FloeAggregate { name, aggregate }
    }

    fn sliding(aggregate: Arc<AggregateUDF>) -> Self {
        let name = format!("floe_sliding_{}", aggregate.name());
        FloeAggregate { name, aggregate }
    }
}

impl WindowUDFImpl for FloeAggregate {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        self.aggregate.signature()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.aggregate.coerce_types(arg_types)
    }

    fn field(&self, args: WindowUDFFieldArgs) -> Result<FieldRef> {
        let field = self.aggregate.return_field(args.input_fields())?;
        Ok(Arc::new(Field::new(
            args.name(),
            field.data_type().clone(),
            true,
        )))
    }

    fn partition_evaluator(
        &self,
        args: PartitionEvaluatorArgs,
    ) -> Result<Box<dyn PartitionEvaluator>> {
        let accumulators = Accumulators {
            aggregate: Arc::clone(&self.aggregate),
            return_field: self.aggregate.return_field(args.input_fields())?,
            arguments: args.input_exprs().to_vec(),
            argument_fields: args.input_fields().to_vec(),
        };
        Ok(Box::new(FrameEvaluator {
            accumulator: NullSafe::new(accumulators)?,
            held: 0..0,
        }))
    }
}

impl AggregateUDFImpl for FloeAggregate {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        self.aggregate.signature()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.aggregate.coerce_types(arg_types)
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.aggregate.return_type(arg_types)
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        self.aggregate.return_field(arg_fields)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        self.aggregate.state_fields(args)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.aggregate.accumulator(args)
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(NullSafe::new(Accumulators {
            aggregate: Arc::clone(&self.aggregate),
            return_field: Arc::clone(&args.return_field),
            arguments: args.exprs.to_vec(),
            argument_fields: args.expr_fields.to_vec(),
        })?))
    }
}

/// What it takes to make DataFusion's sliding accumulator of an aggregate.
#[derive(Debug)]
struct Accumulators {
    aggregate: Arc<AggregateUDF>,
    return_field: FieldRef,
    arguments: Vec<Arc<dyn PhysicalExpr>>,
    argument_fields: Vec<FieldRef>,
}

impl Accumulators {
    fn new_accumulator(&self) -> Result<Box<dyn Accumulator>> {
        let schema = Schema::new(self.argument_fields.clone());
        self.aggregate.create_sliding_accumulator(AccumulatorArgs {
            return_field: Arc::clone(&self.return_field),
            schema: &schema,
            ignore_nulls: false,
            order_bys: &[],
            is_reversed: false,
            name: self.aggregate.name(),
            is_distinct: false,
            exprs: &self.arguments,
            expr_fields: &self.argument_fields,
        })
    }
}

/// DataFusion's sliding accumulator, but for frames without a value: it answers NULL
/// (0 for `count`) for them, and starts afresh when the last value leaves.
#[derive(Debug)]
struct NullSafe {
    accumulator: Box<dyn Accumulator>,
    accumulators: Accumulators,
    /// How many rows it holds have a value (no NULL argument).
    values_held: usize,
    /// The answer for a frame without a value.
    no_value: ScalarValue,
}

impl NullSafe {
    fn new(accumulators: Accumulators) -> Result<Self> {
        let no_value = if accumulators.aggregate.name() == "count" {
            ScalarValue::Int64(Some(0))
        } else {
            ScalarValue::try_from(accumulators.return_field.data_type())?
        };
        Ok(NullSafe {
            accumulator: accumulators.new_accumulator()?,
            accumulators,
            values_held: 0,
            no_value,
        })
    }

    /// Forgets every row: the rows it holds are all NULL, or about to leave.
    fn restart(&mut self) -> Result<()> {
        self.accumulator = self.accumulators.new_accumulator()?;
        self.values_held = 0;
        Ok(())
    }
}

impl Accumulator for NullSafe {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.values_held += with_values(values);
        self.accumulator.update_batch(values)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let leaving = with_values(values);
        self.values_held -= leaving;
        match (self.values_held, leaving) {
            (0, 0) => Ok(()),
            (0, _) => self.restart(),
            _ => self.accumulator.retract_batch(values),
        }
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        if self.values_held == 0 {
            return Ok(self.no_value.clone());
        }
        self.accumulator.evaluate()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.accumulator.state()
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.accumulator.merge_batch(states)
    }

    fn size(&self) -> usize {
        size_of_val(self) + self.accumulator.size()
    }
}

/// One partition's frames, in order: DataFusion moves both ends of a frame only forward.
#[derive(Debug)]
struct FrameEvaluator {
    accumulator: NullSafe,
    /// The rows the accumulator holds.
    held: Range<usize>,
}

impl FrameEvaluator {
    /// `evaluate` is given the arguments' columns, then the window's `ORDER BY` columns.
    fn rows(&self, values: &[ArrayRef], rows: Range<usize>) -> Vec<ArrayRef> {
        values[..self.accumulator.accumulators.arguments.len()]
            .iter()
            .map(|v| v.slice(rows.start, rows.len()))
            .collect()
    }
}

impl PartitionEvaluator for FrameEvaluator {
    fn uses_window_frame(&self) -> bool {
        true
    }

    fn evaluate(&mut self, values: &[ArrayRef], range: &Range<usize>) -> Result<ScalarValue> {
        let held = self.held.clone();
        let overlaps = range.start < held.end
            && held.start < range.end
            && range.start >= held.start
            && range.end >= held.end;
        if !overlaps {
            self.accumulator.restart()?;
        }
        let (entering, leaving) = if overlaps {
            (held.end..range.end, held.start..range.start)
        } else {
            (range.clone(), 0..0)
        };
        if !entering.is_empty() {
            self.accumulator
                .update_batch(&self.rows(values, entering))?;
        }
        if !leaving.is_empty() {
            self.accumulator
                .retract_batch(&self.rows(values, leaving))?;
        }
        self.held = range.clone();
        self.accumulator.evaluate()
    }
}

/// The rows of `values` where no argument is NULL (those an aggregate counts).
fn with_values(values: &[ArrayRef]) -> usize {
    let rows = values.first().map_or(0, |v| v.len());
    match values {
        [] => rows,
        [only] => rows - only.logical_null_count(),
        several => (0..rows)
            .filter(|&row| several.iter().all(|v| !v.is_null(row)))
            .count(),
    }
}
