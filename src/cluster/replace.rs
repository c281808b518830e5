//! `replace(s, from, to)` with an empty `from` leaves `s` as it is, as PostgreSQL,
//! DuckDB, Spark and MySQL do; DataFusion 53's inserts `to` between every two characters
//! (`replace('abc', '', 'x')` was `'xaxbxcx'`). Floe's replaces DataFusion's under the
//! same name on the coordinator and on executors, and leaves every other row to it.

use std::any::Any;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use datafusion::arrow::compute::{cast, kernels::zip::zip};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::functions::string::replace::ReplaceFunc;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};

pub fn replace() -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(Replace::default()))
}

#[derive(Debug, PartialEq, Eq, Hash, Default)]
struct Replace {
    datafusion: ReplaceFunc,
}

impl ScalarUDFImpl for Replace {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        self.datafusion.name()
    }

    fn signature(&self) -> &Signature {
        self.datafusion.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.datafusion.return_type(arg_types)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.datafusion.documentation()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [text, from, to] = args.args.as_slice() else {
            return plan_err!("replace takes a text, what to replace and its replacement");
        };
        if matches!(from, ColumnarValue::Scalar(from) if !is_empty(from)) {
            return self.datafusion.invoke_with_args(args);
        }
        // The rows whose text stays: an empty `from` and a replacement (NULL gives NULL).
        let rows = args.number_rows;
        let (from, to) = (from.to_array(rows)?, to.to_array(rows)?);
        let kept: BooleanArray = empty_values(&from)?
            .iter()
            .enumerate()
            .map(|(row, empty)| Some(empty == Some(true) && to.is_valid(row)))
            .collect();
        let text = cast(&text.to_array(rows)?, args.return_field.data_type())?;
        let replaced = self.datafusion.invoke_with_args(args)?.to_array(rows)?;
        Ok(ColumnarValue::Array(zip(&kept, &text, &replaced)?))
    }
}

fn is_empty(value: &ScalarValue) -> bool {
    matches!(
        value,
        ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s))
            if s.is_empty()
    )
}

/// Which values of `from` are empty strings.
fn empty_values(from: &ArrayRef) -> Result<BooleanArray> {
    let from = cast(from, &DataType::Utf8)?;
    Ok(from
        .as_string::<i32>()
        .iter()
        .map(|value| Some(value.is_some_and(str::is_empty)))
        .collect())
}
