//! `lag`, `lead`, `first_value`, `last_value` and `nth_value` as executors must compute
//! them. DataFusion 53 computes such a window over rows sorted the other way by reversing
//! it (`lead(x, 2) OVER (ORDER BY k)` beside `row_number() OVER (ORDER BY k DESC)`
//! becomes `lag` flagged as reversed), and `IGNORE NULLS` is a flag too; datafusion-proto
//! sends neither flag, so executors computed `lead` as `lag` over the reversed rows, and
//! ignored no NULL: wrong answers, which the coordinator alone never gave.
//!
//! Each flag is carried by the function's name instead: Floe registers, beside each of
//! these functions (which it replaces under its own name), a variant per combination of
//! flags (`floe_lag_reversed`, `floe_first_value_ignore_nulls`, …) that computes the
//! function with those flags whatever the flags it is given. A window with `IGNORE
//! NULLS` calls its variant; DataFusion's reversal finds the reversed variant.

use std::any::Any;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, new_empty_array};
use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::expr::{NullTreatment, WindowFunction};
use datafusion::logical_expr::function::{
    ExpressionArgs, PartitionEvaluatorArgs, WindowFunctionSimplification, WindowUDFFieldArgs,
};
use datafusion::logical_expr::{
    Documentation, Expr, LimitEffect, PartitionEvaluator, ReversedUDWF, Signature,
    WindowFunctionDefinition, WindowUDF, WindowUDFImpl,
};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Literal;

/// Every variant of each function, the plain ones under DataFusion's names.
pub fn window_variants() -> Vec<Arc<WindowUDF>> {
    let mut functions = vec![];
    for function in datafusion_functions() {
        for reversed in [false, true] {
            for ignore_nulls in [false, true] {
                functions.push(variant(Arc::clone(&function), reversed, ignore_nulls));
            }
        }
    }
    functions
}

fn datafusion_functions() -> [Arc<WindowUDF>; 5] {
    use datafusion::functions_window::{lead_lag, nth_value};
    [
        lead_lag::lag_udwf(),
        lead_lag::lead_udwf(),
        nth_value::first_value_udwf(),
        nth_value::last_value_udwf(),
        nth_value::nth_value_udwf(),
    ]
}

fn variant(function: Arc<WindowUDF>, reversed: bool, ignore_nulls: bool) -> Arc<WindowUDF> {
    let mut name = function.name().to_string();
    if reversed || ignore_nulls {
        name = format!("floe_{name}");
    }
    if reversed {
        name.push_str("_reversed");
    }
    if ignore_nulls {
        name.push_str("_ignore_nulls");
    }
    Arc::new(WindowUDF::new_from_impl(Variant {
        name,
        function,
        reversed,
        ignore_nulls,
    }))
}

/// `expr` calling the `IGNORE NULLS` variant of its function (its name, shown in the
/// plan and naming its column, is unchanged).
pub(super) fn ignoring_nulls(expr: &Expr) -> Option<Expr> {
    let Expr::WindowFunction(window) = expr else {
        return None;
    };
    let WindowFunctionDefinition::WindowUDF(function) = &window.fun else {
        return None;
    };
    if window.params.null_treatment != Some(NullTreatment::IgnoreNulls) {
        return None;
    }
    let plain = datafusion_functions()
        .into_iter()
        .find(|f| f.name() == function.name())?;
    Some(Expr::WindowFunction(Box::new(WindowFunction {
        fun: WindowFunctionDefinition::WindowUDF(variant(plain, false, true)),
        params: window.params.clone(),
    })))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Variant {
    name: String,
    /// DataFusion's function.
    function: Arc<WindowUDF>,
    reversed: bool,
    ignore_nulls: bool,
}

impl WindowUDFImpl for Variant {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn aliases(&self) -> &[String] {
        if self.reversed || self.ignore_nulls {
            &[]
        } else {
            self.function.aliases()
        }
    }

    fn signature(&self) -> &Signature {
        self.function.signature()
    }

    fn expressions(&self, args: ExpressionArgs) -> Vec<Arc<dyn PhysicalExpr>> {
        self.function.expressions(args)
    }

    fn partition_evaluator(
        &self,
        args: PartitionEvaluatorArgs,
    ) -> Result<Box<dyn PartitionEvaluator>> {
        if self.ignore_nulls
            && let Some(shift) = NonNullShift::of(&self.function, self.reversed, &args)?
        {
            return Ok(Box::new(shift));
        }
        self.function
            .partition_evaluator_factory(PartitionEvaluatorArgs::new(
                args.input_exprs(),
                args.input_fields(),
                self.reversed,
                self.ignore_nulls,
            ))
    }

    fn simplify(&self) -> Option<WindowFunctionSimplification> {
        self.function.simplify()
    }

    fn field(&self, args: WindowUDFFieldArgs) -> Result<FieldRef> {
        self.function.field(args)
    }

    fn sort_options(&self) -> Option<SortOptions> {
        self.function.sort_options()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.function.coerce_types(arg_types)
    }

    fn reverse_expr(&self) -> ReversedUDWF {
        match self.function.reverse_expr() {
            ReversedUDWF::Reversed(function) => {
                ReversedUDWF::Reversed(variant(function, !self.reversed, self.ignore_nulls))
            }
            ReversedUDWF::Identical => ReversedUDWF::Identical,
            ReversedUDWF::NotSupported => ReversedUDWF::NotSupported,
        }
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.function.documentation()
    }

    fn limit_effect(&self, args: &[Arc<dyn PhysicalExpr>]) -> LimitEffect {
        if self.reversed || self.ignore_nulls {
            // DataFusion's is for the function computed forwards, over every row.
            LimitEffect::Unknown
        } else {
            self.function.inner().limit_effect(args)
        }
    }
}

/// `lead` or `lag` `IGNORE NULLS`: the value of the n-th row with a value after (or
/// before) each row. DataFusion 53's answers NULL where the rows it looks ahead at
/// include NULLs (apache/datafusion#25471: `lead(v, 2) IGNORE NULLS` of 30, 40, NULL,
/// NULL, 70 is NULL at 30, not 70).
#[derive(Debug)]
struct NonNullShift {
    /// Rows with a value ahead of the current row (negative: behind it).
    ahead: i64,
    default: ScalarValue,
}

impl NonNullShift {
    /// The shift `function` computes, if it is `lead` or `lag` with a literal offset.
    fn of(
        function: &WindowUDF,
        reversed: bool,
        args: &PartitionEvaluatorArgs,
    ) -> Result<Option<NonNullShift>> {
        let forwards = match function.name() {
            "lead" => true,
            "lag" => false,
            _ => return Ok(None),
        };
        let (exprs, fields) = (args.input_exprs(), args.input_fields());
        let literal = |index: usize| {
            exprs.get(index).map(|e| {
                e.as_any()
                    .downcast_ref::<Literal>()
                    .map(|l| l.value().clone())
            })
        };
        let offset = match literal(1) {
            None => 1,
            Some(Some(value)) if value.is_null() => 0,
            Some(Some(value)) if value.data_type().is_integer() => {
                i64::try_from(value.cast_to(&DataType::Int64)?)?
            }
            Some(_) => return Ok(None),
        };
        let Some(value_type) = fields.first().map(|f| f.data_type()) else {
            return Ok(None);
        };
        let default = match literal(2) {
            None => ScalarValue::try_from(value_type)?,
            Some(Some(value)) if value.is_null() => ScalarValue::try_from(value_type)?,
            Some(Some(value)) => value.cast_to(value_type)?,
            Some(None) => return Ok(None),
        };
        let ahead = if forwards == reversed {
            -offset
        } else {
            offset
        };
        Ok(Some(NonNullShift { ahead, default }))
    }

    /// The row `self.ahead` rows with a value away from `row`, given the rows with one.
    fn source(&self, row: usize, with_value: &[usize]) -> Option<usize> {
        let steps = usize::try_from(self.ahead.unsigned_abs()).ok()?;
        if steps == 0 {
            return Some(row);
        }
        if self.ahead > 0 {
            let after = with_value.partition_point(|&r| r <= row);
            with_value.get(after.checked_add(steps - 1)?).copied()
        } else {
            let before = with_value.partition_point(|&r| r < row);
            with_value.get(before.checked_sub(steps)?).copied()
        }
    }
}

impl PartitionEvaluator for NonNullShift {
    fn evaluate_all(&mut self, values: &[ArrayRef], num_rows: usize) -> Result<ArrayRef> {
        let Some(column) = values.first() else {
            return exec_err!("lead or lag without a value");
        };
        let with_value: Vec<usize> = (0..num_rows).filter(|&r| column.is_valid(r)).collect();
        let shifted = (0..num_rows)
            .map(|row| match self.source(row, &with_value) {
                Some(source) => ScalarValue::try_from_array(column, source),
                None => Ok(self.default.clone()),
            })
            .collect::<Result<Vec<_>>>()?;
        if shifted.is_empty() {
            return Ok(new_empty_array(column.data_type()));
        }
        ScalarValue::iter_to_array(shifted)
    }
}
