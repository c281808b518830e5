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
//! Such a window calls a window function of Floe's instead (`floe_frame_min`, …), which
//! feeds DataFusion's own sliding accumulator the rows entering and leaving the frame,
//! keeping track itself of the rows the accumulator holds, and answers NULL (0 for
//! `count`) for a frame without a value.

use std::any::Any;
use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::expr::{WindowFunction, WindowFunctionParams};
use datafusion::logical_expr::function::{
    AccumulatorArgs, PartitionEvaluatorArgs, WindowUDFFieldArgs,
};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, Expr, LogicalPlan, PartitionEvaluator, Signature, WindowFrame,
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

const PREFIX: &str = "floe_frame_";

/// The window functions Floe registers on the coordinator and on executors.
pub fn frame_aggregates() -> Vec<Arc<WindowUDF>> {
    datafusion::functions_aggregate::all_default_aggregate_functions()
        .into_iter()
        .filter(|aggregate| FRAMED.contains(&aggregate.name()))
        .map(|aggregate| Arc::new(WindowUDF::new_from_impl(FrameAggregate::new(aggregate))))
        .collect()
}

/// `plan` with each window aggregate that DataFusion would compute wrongly over its
/// moving frame replaced by Floe's window function of that aggregate, under the same name.
pub fn moving_frames_computed_by_floe(plan: LogicalPlan) -> Result<LogicalPlan> {
    super::window_functions_replaced(plan, framed)
}

/// `expr` calling Floe's window function, where DataFusion's sliding path would
/// answer it wrongly.
fn framed(expr: &Expr) -> Option<Expr> {
    let Expr::WindowFunction(function) = expr else {
        return None;
    };
    let WindowFunctionDefinition::AggregateUDF(aggregate) = &function.fun else {
        return None;
    };
    let params = &function.params;
    let plain = !params.distinct && params.filter.is_none() && params.null_treatment.is_none();
    let name = aggregate.name();
    let wrong = WRONG_OVER_NULLS.contains(&name) || may_empty_between_rows(&params.window_frame);
    if !(plain && FRAMED.contains(&name) && wrong && !params.window_frame.is_ever_expanding()) {
        return None;
    }
    let udwf = WindowUDF::new_from_impl(FrameAggregate::new(Arc::clone(aggregate)));
    Some(Expr::WindowFunction(Box::new(WindowFunction {
        fun: WindowFunctionDefinition::WindowUDF(Arc::new(udwf)),
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

#[derive(Debug, PartialEq, Eq, Hash)]
struct FrameAggregate {
    name: String,
    aggregate: Arc<AggregateUDF>,
}

impl FrameAggregate {
    fn new(aggregate: Arc<AggregateUDF>) -> Self {
        FrameAggregate {
            name: format!("{PREFIX}{}", aggregate.name()),
            aggregate,
        }
    }
}

impl WindowUDFImpl for FrameAggregate {
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
        let return_field = self.aggregate.return_field(args.input_fields())?;
        let no_value = if self.aggregate.name() == "count" {
            ScalarValue::Int64(Some(0))
        } else {
            ScalarValue::try_from(return_field.data_type())?
        };
        let accumulators = Accumulators {
            aggregate: Arc::clone(&self.aggregate),
            return_field,
            arguments: args.input_exprs().to_vec(),
            argument_fields: args.input_fields().to_vec(),
        };
        Ok(Box::new(FrameEvaluator {
            accumulator: accumulators.new_accumulator()?,
            accumulators,
            held: 0..0,
            values_held: 0,
            no_value,
        }))
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

/// One partition's frames, in order: DataFusion moves both ends of a frame only forward.
#[derive(Debug)]
struct FrameEvaluator {
    accumulator: Box<dyn Accumulator>,
    accumulators: Accumulators,
    /// The rows the accumulator holds.
    held: Range<usize>,
    /// How many of them have a value (no NULL argument).
    values_held: usize,
    /// The answer for a frame without a value.
    no_value: ScalarValue,
}

impl FrameEvaluator {
    /// `evaluate` is given the arguments' columns, then the window's `ORDER BY` columns.
    fn arguments<'a>(&self, values: &'a [ArrayRef]) -> &'a [ArrayRef] {
        &values[..self.accumulators.arguments.len()]
    }

    fn add(&mut self, values: &[ArrayRef], rows: Range<usize>) -> Result<()> {
        if !rows.is_empty() {
            let slice = slices(self.arguments(values), &rows);
            self.values_held += with_values(&slice);
            self.accumulator.update_batch(&slice)?;
        }
        Ok(())
    }

    fn remove(&mut self, values: &[ArrayRef], rows: Range<usize>) -> Result<()> {
        if !rows.is_empty() {
            let slice = slices(self.arguments(values), &rows);
            self.values_held -= with_values(&slice);
            self.accumulator.retract_batch(&slice)?;
        }
        Ok(())
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
        if overlaps {
            self.add(values, held.end..range.end)?;
            self.remove(values, held.start..range.start)?;
        } else {
            // Retracting every value leaves some accumulators (variance) dividing by zero.
            self.accumulator = self.accumulators.new_accumulator()?;
            self.values_held = 0;
            self.add(values, range.clone())?;
        }
        self.held = range.clone();
        if self.values_held == 0 {
            // Its rows are all NULL: a fresh accumulator holds as much.
            self.accumulator = self.accumulators.new_accumulator()?;
            return Ok(self.no_value.clone());
        }
        self.accumulator.evaluate()
    }
}

fn slices(values: &[ArrayRef], rows: &Range<usize>) -> Vec<ArrayRef> {
    values
        .iter()
        .map(|v| v.slice(rows.start, rows.len()))
        .collect()
}

/// The rows of `slice` where no argument is NULL (those an aggregate counts).
fn with_values(slice: &[ArrayRef]) -> usize {
    let rows = slice.first().map_or(0, |v| v.len());
    match slice {
        [] => rows,
        [only] => rows - only.logical_null_count(),
        several => (0..rows)
            .filter(|&row| several.iter().all(|v| !v.is_null(row)))
            .count(),
    }
}
