//! The caller's session in SQL: `USE schema` changes which schema unqualified names
//! mean, and functions answer from it: `current_user`, `session_user`,
//! `current_catalog`, `current_database()`, `current_schema()`, and `version()` naming
//! Floe. BI tools and SQL consoles use these when they connect.
//!
//! Sessions belong to the Flight layer; a statement reaches its caller's through
//! [`SessionSchema`].
//!
//! Each statement's context registers its own copies of the functions holding the
//! caller's values, and each call simplifies to a literal while the coordinator plans:
//! no executor has to know the session. The bare `user` keyword is not one of them: it
//! would shadow a column named `user` (such as `floe.running`'s).

use std::any::Any;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::Use;

use super::ddl::schema_name;
use super::{Caller, Engine};
use crate::error::{FloeError, Result};

/// Where a caller's session keeps its schema.
pub trait SessionSchema: Send + Sync + std::fmt::Debug {
    /// Unqualified names mean `schema` from now on.
    fn set(&self, schema: String) -> Result<()>;
}

impl Engine {
    /// `USE [SCHEMA | DATABASE] schema` (or `catalog.schema`): the caller's session takes the schema,
    /// which must exist and be readable by them.
    pub(super) async fn use_schema(&self, caller: &Caller, statement: &Use) -> Result<()> {
        let (Use::Object(name) | Use::Schema(name) | Use::Database(name)) = statement else {
            return Err(FloeError::unimplemented(format!(
                "{statement} is not supported"
            )));
        };
        let schema = schema_name(name, self.catalog_name())?;
        if !self.schema_visible(&caller.access, &schema).await? {
            return Err(FloeError::not_found(format!("schema '{schema}' not found")));
        }
        let Some(session) = &caller.session else {
            return Err(FloeError::invalid("USE needs a session"));
        };
        session.set(schema)
    }
}

/// What `version()` answers.
pub fn version() -> String {
    format!(
        "Floe {} (Apache DataFusion {})",
        env!("CARGO_PKG_VERSION"),
        datafusion::DATAFUSION_VERSION
    )
}

/// The functions' names, for Flight SQL's list of system functions.
pub const FUNCTION_NAMES: [&str; 6] = [
    "current_catalog",
    "current_database",
    "current_schema",
    "current_user",
    "session_user",
    "version",
];

/// Registers the session functions on `ctx`, answering for `user`, whose unqualified
/// names are in `schema` of `catalog`.
pub fn register_functions(ctx: &SessionContext, user: &str, catalog: &str, schema: &str) {
    let [
        current_catalog,
        current_database,
        current_schema,
        current_user,
        session_user,
        version,
    ] = FUNCTION_NAMES;
    for (name, value) in [
        (current_catalog, catalog),
        (current_database, catalog),
        (current_schema, schema),
        (current_user, user),
        (session_user, user),
        (version, &self::version()),
    ] {
        ctx.register_udf(ScalarUDF::new_from_impl(SessionValue::new(name, value)));
    }
}

/// A function of no arguments whose answer is fixed for the statement.
#[derive(Debug, PartialEq, Eq, Hash)]
struct SessionValue {
    name: &'static str,
    value: String,
    signature: Signature,
}

impl SessionValue {
    fn new(name: &'static str, value: &str) -> Self {
        Self {
            name,
            value: value.to_string(),
            signature: Signature::nullary(Volatility::Stable),
        }
    }

    fn scalar(&self) -> ScalarValue {
        ScalarValue::Utf8(Some(self.value.clone()))
    }
}

impl ScalarUDFImpl for SessionValue {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        Ok(ColumnarValue::Scalar(self.scalar()))
    }

    fn simplify(&self, _args: Vec<Expr>, _info: &SimplifyContext) -> DfResult<ExprSimplifyResult> {
        Ok(ExprSimplifyResult::Simplified(Expr::Literal(
            self.scalar(),
            None,
        )))
    }
}
