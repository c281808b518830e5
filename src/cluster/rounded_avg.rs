//! `avg` of a decimal, rounded to its last digit as Spark rounds it and PostgreSQL at
//! that scale (half away from zero). DataFusion 53 divides the sum by the count truncating: the
//! average of 0.00, 0.01 and 0.01 (scale 2, so a result of scale 6) was 0.006666
//! instead of 0.006667.
//!
//! Floe's `avg` is DataFusion's (same types, states and accumulators, so partial and
//! final aggregates on different processes agree) with only the final division of a
//! `DECIMAL` average replaced, computed in 256 bits from the state (count, sum).

use std::any::Any;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Decimal128Array};
use datafusion::arrow::datatypes::{
    DataType, Decimal128Type, DecimalType, FieldRef, UInt64Type, i256,
};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, EmitTo, GroupsAccumulator,
    ReversedUDAF, Signature,
};

/// Floe's `avg` (also `mean`), replacing DataFusion's in sessions and on executors.
pub fn avg() -> Arc<AggregateUDF> {
    let datafusion = datafusion::functions_aggregate::average::avg_udaf();
    Arc::new(AggregateUDF::new_from_impl(RoundedAvg { datafusion }))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct RoundedAvg {
    datafusion: Arc<AggregateUDF>,
}

impl AggregateUDFImpl for RoundedAvg {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        self.datafusion.name()
    }

    fn aliases(&self) -> &[String] {
        self.datafusion.aliases()
    }

    fn signature(&self) -> &Signature {
        self.datafusion.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.datafusion.return_type(arg_types)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        self.datafusion.state_fields(args)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let average = Average::of(&args);
        let inner = self.datafusion.accumulator(args)?;
        Ok(match average {
            Some(average) => Box::new(RoundedAccumulator { inner, average }),
            None => inner,
        })
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.datafusion.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        let average = Average::of(&args);
        let inner = self.datafusion.create_groups_accumulator(args)?;
        Ok(match average {
            Some(average) => Box::new(RoundedGroups { inner, average }),
            None => inner,
        })
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        ReversedUDAF::Identical
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.datafusion.documentation()
    }
}

/// How a sum of one decimal type becomes the average's type.
#[derive(Clone, Copy, Debug)]
struct Average {
    /// Powers of ten between the sum's scale and the average's.
    shift: u32,
    precision: u8,
    scale: i8,
}

impl Average {
    /// Where the aggregate is a decimal's average (the other types keep DataFusion's).
    fn of(args: &AccumulatorArgs) -> Option<Self> {
        let DataType::Decimal128(_, sum_scale) = args.expr_fields.first()?.data_type() else {
            return None;
        };
        let DataType::Decimal128(precision, scale) = *args.return_type() else {
            return None;
        };
        let shift = u32::try_from(i16::from(scale) - i16::from(*sum_scale)).ok()?;
        Some(Self {
            shift,
            precision,
            scale,
        })
    }

    /// `sum / count` at the average's scale, rounded half away from zero; `None` for
    /// no value.
    fn of_sum(&self, sum: Option<i256>, count: u64) -> Result<Option<i128>> {
        let Some(sum) = sum.filter(|_| count > 0) else {
            return Ok(None);
        };
        let numerator = sum.wrapping_mul(i256::from_i128(10i128.pow(self.shift)));
        let count = i256::from_i128(i128::from(count));
        let (quotient, remainder) = (numerator.wrapping_div(count), numerator.wrapping_rem(count));
        let rounded = if remainder.wrapping_abs().wrapping_mul(i256::from_i128(2)) >= count {
            quotient.wrapping_add(i256::from_i128(numerator.signum().as_i128()))
        } else {
            quotient
        };
        match rounded.to_i128() {
            Some(v) if Decimal128Type::is_valid_decimal_precision(v, self.precision) => Ok(Some(v)),
            _ => exec_err!("Arithmetic Overflow in AvgAccumulator"),
        }
    }

    fn data_type(&self) -> DataType {
        DataType::Decimal128(self.precision, self.scale)
    }
}

/// DataFusion's accumulator of a decimal average, with Floe's final division.
#[derive(Debug)]
struct RoundedAccumulator {
    inner: Box<dyn Accumulator>,
    average: Average,
}

impl Accumulator for RoundedAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.inner.update_batch(values)
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let (sum, count) = match self.inner.state()?.as_slice() {
            [ScalarValue::UInt64(count), ScalarValue::Decimal128(sum, ..)] => {
                (sum.map(i256::from_i128), count.unwrap_or(0))
            }
            // avg(DISTINCT x): the distinct values.
            [ScalarValue::List(values)] => distinct_sum(values.values())?,
            _ => return self.inner.evaluate(),
        };
        let value = self.average.of_sum(sum, count)?;
        ScalarValue::new_primitive::<Decimal128Type>(value, &self.average.data_type())
    }

    fn size(&self) -> usize {
        self.inner.size()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.inner.state()
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.inner.merge_batch(states)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.inner.retract_batch(values)
    }

    fn supports_retract_batch(&self) -> bool {
        self.inner.supports_retract_batch()
    }
}

/// The sum (exact, in 256 bits) and count of distinct values.
fn distinct_sum(values: &ArrayRef) -> Result<(Option<i256>, u64)> {
    let Some(values) = values.as_primitive_opt::<Decimal128Type>() else {
        return exec_err!("avg(DISTINCT) of {} values", values.data_type());
    };
    let count = (values.len() - values.null_count()) as u64;
    let sum = values
        .iter()
        .flatten()
        .fold(i256::ZERO, |sum, v| sum.wrapping_add(i256::from_i128(v)));
    Ok((Some(sum), count))
}

/// DataFusion's groups accumulator of a decimal average, with Floe's final division.
struct RoundedGroups {
    inner: Box<dyn GroupsAccumulator>,
    average: Average,
}

impl GroupsAccumulator for RoundedGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.inner
            .update_batch(values, group_indices, opt_filter, total_num_groups)
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let state = self.inner.state(emit_to)?;
        let [counts, sums] = state.as_slice() else {
            return exec_err!("avg: a state of {} arrays", state.len());
        };
        let (counts, sums) = (
            counts.as_primitive::<UInt64Type>(),
            sums.as_primitive::<Decimal128Type>(),
        );
        let averages = (0..sums.len())
            .map(|i| {
                let sum = sums.is_valid(i).then(|| i256::from_i128(sums.value(i)));
                self.average.of_sum(sum, counts.value(i))
            })
            .collect::<Result<Decimal128Array>>()?;
        Ok(Arc::new(averages.with_data_type(self.average.data_type())))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        self.inner.state(emit_to)
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.inner
            .merge_batch(values, group_indices, opt_filter, total_num_groups)
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        self.inner.convert_to_state(values, opt_filter)
    }

    fn supports_convert_to_state(&self) -> bool {
        self.inner.supports_convert_to_state()
    }

    fn size(&self) -> usize {
        self.inner.size()
    }
}
