//! `floe_cast_label(value, 'type')`: `value` itself. DataFusion 53 names a cast by the
//! expression it casts, so `sum(k)` and `sum(CAST(k AS DOUBLE))` are both `sum(t.k)` and
//! the statement fails ("duplicate unqualified field name"). Floe's SQL layer then wraps
//! the casts inside function calls in this call, whose name carries the type.

use std::any::Any;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// The function's name, by which SQL and executors find it.
pub const NAME: &str = "floe_cast_label";

pub fn cast_label() -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(CastLabel {
        signature: Signature::any(2, Volatility::Immutable),
    }))
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct CastLabel {
    signature: Signature,
}

impl ScalarUDFImpl for CastLabel {
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
        match arg_types.first() {
            Some(value) => Ok(value.clone()),
            None => plan_err!("{NAME} takes a value and a label"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        match args.args.into_iter().next() {
            Some(value) => Ok(value),
            None => plan_err!("{NAME} takes a value and a label"),
        }
    }
}
