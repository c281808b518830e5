//! Arithmetic on numbers as PostgreSQL and DuckDB do it, where DataFusion differs. Two
//! analyzer rules (run once per statement, before DataFusion's optimizer) rewrite
//! expressions, keeping their names:
//!
//! * A division with a decimal operand gives a `DOUBLE`, as in DuckDB. DataFusion divides
//!   decimals keeping 4 more fractional digits than the dividend has: with `0.1` read as
//!   a decimal (`src/sql/numbers.rs`), `1 / 3.0` was `0.3333` and `1.5 / 7` `0.21428`
//!   (PostgreSQL: `0.33333333333333333333`, DuckDB `0.3333333333333333`). Sums,
//!   differences and products of decimals stay exact decimals.
//! * A decimal meeting a float (compared, `IN`, `BETWEEN`, a `CASE`'s or `coalesce`'s
//!   values, a union's column) is a `DOUBLE`, as in PostgreSQL and DuckDB; DataFusion
//!   made the float a `DECIMAL(30, 15)`, which NaN and values past 10^15 overflow.
//! * A cast of a decimal or a float to an integer type rounds to the nearest integer (a
//!   decimal's halves away from zero, a float's to the even neighbour); Arrow's cast drops
//!   the fraction: `CAST(2.7 AS INT)` was 2, `CAST(-2.5 AS INT)` -2 (PostgreSQL: 3 and
//!   -3). The same holds for the casts DataFusion adds itself, such as a decimal inserted
//!   into an `INT` column. The value is rounded by `round` (decimals) or
//!   `floe_round_half_even` (floats, also known to executors) before the cast.

use std::any::Any;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Float32Array, Float64Array};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{Column, DFSchema, Result, ScalarValue, plan_err};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    BinaryExpr, Cast, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, Projection,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TryCast, Union, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use super::expression_rule;

/// The float rounding function's name, by which plans and executors find it.
pub const ROUND_HALF_EVEN: &str = "floe_round_half_even";

/// Decimals as `DOUBLE`s where they are divided or meet a float; runs before DataFusion's
/// type coercion, so the expressions above (a comparison, a union) are coerced to the
/// new type.
#[derive(Debug)]
pub(super) struct DecimalsAsDoubles;

impl AnalyzerRule for DecimalsAsDoubles {
    fn name(&self) -> &str {
        "floe_decimals_as_doubles"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let plan = expression_rule::rewrite_expressions(plan, meets_values, decimals_as_doubles)?;
        Ok(expression_rule::rewrite_nodes(plan.data, union_as_doubles)?.data)
    }
}

/// Casts to integer types with their values rounded first; runs after DataFusion's type
/// coercion (which adds casts of its own) and before its simplifier folds literals.
#[derive(Debug)]
pub(super) struct RoundedIntegerCasts;

impl AnalyzerRule for RoundedIntegerCasts {
    fn name(&self) -> &str {
        "floe_rounded_integer_casts"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let is_integer_cast = |e: &Expr| match e {
            Expr::Cast(Cast { data_type, .. }) | Expr::TryCast(TryCast { data_type, .. }) => {
                data_type.is_integer()
            }
            _ => false,
        };
        Ok(expression_rule::rewrite_expressions(plan, is_integer_cast, rounded_before_cast)?.data)
    }
}

/// Whether `expr` brings values of several types together: DataFusion's coercion gives
/// a float and a decimal a `DECIMAL(30, 15)`, which a float past 10^15 or a NaN overflows
/// (`x > 100.1` over a `DOUBLE` column failed "Cannot cast to Decimal128(30, 15)").
fn meets_values(expr: &Expr) -> bool {
    match expr {
        Expr::BinaryExpr(b) => !matches!(b.op, Operator::And | Operator::Or),
        Expr::Between(_) | Expr::InList(_) | Expr::Case(_) => true,
        Expr::ScalarFunction(f) => CHOOSING_FUNCTIONS.contains(&f.name()),
        _ => false,
    }
}

/// Functions that answer one of their arguments, so coerce them to one type.
const CHOOSING_FUNCTIONS: [&str; 6] = ["coalesce", "nullif", "greatest", "least", "nvl", "nvl2"];

/// `expr` with its decimal operands cast to `DOUBLE`: of a division, and wherever a float
/// is among the values `expr` compares or chooses from.
fn decimals_as_doubles(mut expr: Expr, schema: &DFSchema) -> Transformed<Expr> {
    let changed = match &mut expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if !matches!(op, Operator::And | Operator::Or) =>
        {
            let always = *op == Operator::Divide;
            as_doubles([left.as_mut(), right.as_mut()], always, schema)
        }
        Expr::Between(between) => as_doubles(
            [
                between.expr.as_mut(),
                between.low.as_mut(),
                between.high.as_mut(),
            ],
            false,
            schema,
        ),
        Expr::InList(list) => as_doubles(
            std::iter::once(list.expr.as_mut()).chain(&mut list.list),
            false,
            schema,
        ),
        Expr::Case(case) => {
            // `CASE x WHEN v …` compares `x` with each `v`.
            let compared = match case.expr.as_deref_mut() {
                Some(value) => as_doubles(
                    std::iter::once(value).chain(
                        case.when_then_expr
                            .iter_mut()
                            .map(|(when, _)| when.as_mut()),
                    ),
                    false,
                    schema,
                ),
                None => false,
            };
            let results = (case
                .when_then_expr
                .iter_mut()
                .map(|(_, then)| then.as_mut()))
            .chain(case.else_expr.as_deref_mut());
            as_doubles(results, false, schema) || compared
        }
        Expr::ScalarFunction(f) if CHOOSING_FUNCTIONS.contains(&f.name()) => {
            as_doubles(&mut f.args, false, schema)
        }
        _ => false,
    };
    match changed {
        true => Transformed::yes(expr),
        false => Transformed::no(expr),
    }
}

/// Casts the decimal `operands` to `DOUBLE` where one of them is a float (or, `always`,
/// where any is a decimal); whether it cast any.
fn as_doubles<'a>(
    operands: impl IntoIterator<Item = &'a mut Expr>,
    always: bool,
    schema: &DFSchema,
) -> bool {
    let operands: Vec<(&mut Expr, Option<DataType>)> = (operands.into_iter())
        .map(|e| {
            let data_type = e.get_type(schema).ok();
            (e, data_type)
        })
        .collect();
    let decimal = |t: &Option<DataType>| t.as_ref().is_some_and(is_decimal);
    let float = |t: &Option<DataType>| t.as_ref().is_some_and(DataType::is_floating);
    let any_decimal = operands.iter().any(|(_, t)| decimal(t));
    if !any_decimal || !(always || operands.iter().any(|(_, t)| float(t))) {
        return false;
    }
    for (operand, data_type) in operands {
        if decimal(&data_type) {
            let value = std::mem::replace(operand, Expr::Literal(ScalarValue::Null, None));
            *operand = Expr::Cast(Cast::new(Box::new(value), DataType::Float64));
        }
    }
    true
}

/// A union whose inputs give a column as a float in one and as a decimal in another: the
/// decimal ones cast it to `DOUBLE`.
fn union_as_doubles(node: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    let LogicalPlan::Union(union) = &node else {
        return Ok(Transformed::no(node));
    };
    let width = union.schema.fields().len();
    if union
        .inputs
        .iter()
        .any(|input| input.schema().fields().len() != width)
    {
        return Ok(Transformed::no(node));
    }
    let types_of = |i: usize| {
        union
            .inputs
            .iter()
            .map(move |input| input.schema().field(i).data_type())
    };
    let doubled: Vec<bool> = (0..width)
        .map(|i| types_of(i).any(is_decimal) && types_of(i).any(DataType::is_floating))
        .collect();
    if !doubled.contains(&true) {
        return Ok(Transformed::no(node));
    }
    let inputs = (union.inputs.iter())
        .map(|input| with_doubles(input, &doubled))
        .collect::<Result<Vec<_>>>()?;
    Ok(Transformed::yes(LogicalPlan::Union(
        Union::try_new_with_loose_types(inputs)?,
    )))
}

/// `input` with its decimal columns that are `doubled` cast to `DOUBLE`.
fn with_doubles(input: &Arc<LogicalPlan>, doubled: &[bool]) -> Result<Arc<LogicalPlan>> {
    let columns = (input.schema().iter().zip(doubled)).map(|((qualifier, field), doubled)| {
        let column = Expr::Column(Column::from((qualifier, field)));
        match *doubled && is_decimal(field.data_type()) {
            true => Expr::Cast(Cast::new(Box::new(column), DataType::Float64)).alias(field.name()),
            false => column,
        }
    });
    let projection = Projection::try_new(columns.collect(), input.clone())?;
    Ok(Arc::new(LogicalPlan::Projection(projection)))
}

fn is_decimal(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Decimal32(..)
            | DataType::Decimal64(..)
            | DataType::Decimal128(..)
            | DataType::Decimal256(..)
    )
}

/// `expr`, a cast of a decimal with a fraction or of a float to an integer type, with
/// its value rounded first.
fn rounded_before_cast(expr: Expr, schema: &DFSchema) -> Transformed<Expr> {
    let (inner, data_type) = match &expr {
        Expr::Cast(Cast { expr, data_type }) | Expr::TryCast(TryCast { expr, data_type }) => {
            (expr, data_type)
        }
        _ => return Transformed::no(expr),
    };
    if !data_type.is_integer() || is_rounded(inner) {
        return Transformed::no(expr);
    }
    let rounding = match inner.get_type(schema) {
        Ok(DataType::Decimal32(_, s) | DataType::Decimal64(_, s))
        | Ok(DataType::Decimal128(_, s) | DataType::Decimal256(_, s))
            if s > 0 =>
        {
            datafusion::functions::math::round()
        }
        Ok(DataType::Float32 | DataType::Float64) => round_half_even(),
        _ => return Transformed::no(expr),
    };
    let rounded = |inner: Box<Expr>| {
        Box::new(Expr::ScalarFunction(ScalarFunction::new_udf(
            rounding,
            vec![*inner],
        )))
    };
    Transformed::yes(match expr {
        Expr::Cast(Cast { expr, data_type }) => Expr::Cast(Cast::new(rounded(expr), data_type)),
        Expr::TryCast(TryCast { expr, data_type }) => {
            Expr::TryCast(TryCast::new(rounded(expr), data_type))
        }
        other => other,
    })
}

/// Whether `expr` is already rounded by this rule (the analyzer may run twice).
fn is_rounded(expr: &Expr) -> bool {
    matches!(expr, Expr::ScalarFunction(f) if matches!(f.name(), "round" | ROUND_HALF_EVEN))
}

/// `floe_round_half_even(x)`: a float rounded to the nearest integer, halves to even.
pub fn round_half_even() -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(RoundHalfEven {
        signature: Signature::uniform(
            1,
            vec![DataType::Float32, DataType::Float64],
            Volatility::Immutable,
        ),
    }))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct RoundHalfEven {
    signature: Signature,
}

impl ScalarUDFImpl for RoundHalfEven {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        ROUND_HALF_EVEN
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [t @ (DataType::Float32 | DataType::Float64)] => Ok(t.clone()),
            _ => plan_err!("{ROUND_HALF_EVEN} takes one float"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [value] = args.args.as_slice() else {
            return plan_err!("{ROUND_HALF_EVEN} takes one float");
        };
        Ok(match value {
            ColumnarValue::Scalar(ScalarValue::Float64(v)) => {
                ColumnarValue::Scalar(ScalarValue::Float64(v.map(f64::round_ties_even)))
            }
            ColumnarValue::Scalar(ScalarValue::Float32(v)) => {
                ColumnarValue::Scalar(ScalarValue::Float32(v.map(f32::round_ties_even)))
            }
            ColumnarValue::Array(array) => ColumnarValue::Array(rounded_array(array)?),
            ColumnarValue::Scalar(other) => {
                return plan_err!("{ROUND_HALF_EVEN} takes a float, not {}", other.data_type());
            }
        })
    }
}

fn rounded_array(array: &ArrayRef) -> Result<ArrayRef> {
    if let Some(floats) = array.as_any().downcast_ref::<Float64Array>() {
        let rounded: Float64Array = floats.unary(f64::round_ties_even);
        return Ok(Arc::new(rounded));
    }
    if let Some(floats) = array.as_any().downcast_ref::<Float32Array>() {
        let rounded: Float32Array = floats.unary(f32::round_ties_even);
        return Ok(Arc::new(rounded));
    }
    plan_err!("{ROUND_HALF_EVEN} takes a float, not {}", array.data_type())
}
