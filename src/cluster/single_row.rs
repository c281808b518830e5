//! `floe_single_row(v)`: the one value of its group, NULL for none, and an error for a
//! second row. A scalar subquery (`WHERE k = (SELECT k FROM t WHERE …)`) must give at
//! most one row; DataFusion 53 joins with all of them and answers a row for each, where
//! PostgreSQL and DuckDB refuse. Floe's SQL layer aggregates such a subquery with this.

use std::any::Any;
use std::mem::size_of_val;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, UInt64Type};
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};

use crate::error::FloeError;

/// The function's name, by which executors find it.
pub const NAME: &str = "floe_single_row";

pub fn single_row() -> Arc<AggregateUDF> {
    Arc::new(AggregateUDF::new_from_impl(SingleRow {
        signature: Signature::any(1, Volatility::Immutable),
    }))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SingleRow {
    signature: Signature,
}

impl AggregateUDFImpl for SingleRow {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [value] => Ok(value.clone()),
            _ => plan_err!("{NAME} takes one argument"),
        }
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(Field::new(
                format_state_name(args.name, "value"),
                args.return_field.data_type().clone(),
                true,
            )),
            Arc::new(Field::new(
                format_state_name(args.name, "rows"),
                DataType::UInt64,
                false,
            )),
        ])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(OneValue {
            value: ScalarValue::try_from(args.return_field.data_type())?,
            rows: 0,
        }))
    }
}

#[derive(Debug)]
struct OneValue {
    value: ScalarValue,
    rows: u64,
}

impl OneValue {
    /// Takes `rows` more rows, the value of the one there may be from `value`.
    fn take(&mut self, rows: u64, value: impl FnOnce() -> Result<ScalarValue>) -> Result<()> {
        if rows == 0 {
            return Ok(());
        }
        self.rows += rows;
        if self.rows > 1 {
            return Err(FloeError::invalid(
                "more than one row returned by a subquery used as an expression",
            )
            .into());
        }
        self.value = value()?;
        Ok(())
    }
}

impl Accumulator for OneValue {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let Some(values) = values.first() else {
            return Ok(());
        };
        self.take(values.len() as u64, || {
            ScalarValue::try_from_array(values, 0)
        })
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let [values, rows] = states else {
            return plan_err!("{NAME}: a state of a value and a row count");
        };
        for (i, rows) in rows
            .as_primitive::<UInt64Type>()
            .values()
            .iter()
            .enumerate()
        {
            self.take(*rows, || ScalarValue::try_from_array(values, i))?;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![
            self.value.clone(),
            ScalarValue::UInt64(Some(self.rows)),
        ])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(self.value.clone())
    }

    fn size(&self) -> usize {
        size_of_val(self) - size_of_val(&self.value) + self.value.size()
    }
}
