//! `LIKE` patterns of several `%`-separated parts (`'%special%requests%'`), matched by
//! searching for each part in turn.
//!
//! Arrow matches a pattern of one part itself (`'x'`, `'x%'`, `'%x'`, `'%x%'`) and turns
//! any other into a regular expression, which costs several times as much per value:
//! TPC-H q13's `o_comment NOT LIKE '%special%requests%'` took more of its time than
//! reading the column. A physical optimizer rule replaces such a `LIKE` (only `%`, no
//! `_`, no escape, case sensitive) in filters by [`LikeSegments`]: the first part must
//! start the value, the last end it, and each part between is searched for (memchr's
//! substring search) after the previous one; the leftmost match of each leaves the most
//! room for the next, so this finds a match wherever there is one.

use std::any::Any;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, BooleanArray};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::physical_expr::expressions::{LikeExpr, Literal, NotExpr};
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use memchr::memmem::Finder;

use super::node_rule::{NodeRule, on_filter};

/// The function's name, by which executors decode it.
pub const NAME: &str = "floe_like_segments";

/// `floe_like_segments(value, pattern)`: whether `value` is `LIKE pattern`, for a pattern
/// of `%`-separated parts without `_` or `\` (the rule only writes such calls).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct LikeSegments {
    signature: Signature,
}

impl Default for LikeSegments {
    fn default() -> Self {
        Self {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for LikeSegments {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [
            values,
            ColumnarValue::Scalar(ScalarValue::Utf8(Some(pattern))),
        ] = args.args.as_slice()
        else {
            return exec_err!("{NAME} takes a string and a pattern");
        };
        let Some(pattern) = Pattern::of(pattern) else {
            return exec_err!("{NAME}: '{pattern}' is not a pattern of parts");
        };
        let values = values.to_array(args.number_rows)?;
        Ok(ColumnarValue::Array(Arc::new(pattern.matches(&values)?)))
    }
}

/// A `LIKE` pattern split at its `%`s.
struct Pattern<'a> {
    prefix: &'a [u8],
    middle: Vec<Finder<'a>>,
    suffix: &'a [u8],
}

impl<'a> Pattern<'a> {
    /// The pattern of `like`, if it has only `%` wildcards and Arrow would match it with
    /// a regular expression (two parts or more).
    fn of(like: &'a str) -> Option<Self> {
        if like.contains(['_', '\\']) {
            return None;
        }
        let parts: Vec<&str> = like.split('%').collect();
        let [prefix, middle @ .., suffix] = parts.as_slice() else {
            return None;
        };
        let middle: Vec<Finder<'a>> = middle
            .iter()
            .filter(|part| !part.is_empty())
            .map(|part| Finder::new(part.as_bytes()))
            .collect();
        let one_part =
            middle.len() + usize::from(!prefix.is_empty()) + usize::from(!suffix.is_empty()) <= 1;
        if one_part {
            return None;
        }
        Some(Self {
            prefix: prefix.as_bytes(),
            middle,
            suffix: suffix.as_bytes(),
        })
    }

    fn is_match(&self, value: &[u8]) -> bool {
        if value.len() < self.prefix.len() + self.suffix.len()
            || !value.starts_with(self.prefix)
            || !value.ends_with(self.suffix)
        {
            return false;
        }
        let mut rest = &value[self.prefix.len()..value.len() - self.suffix.len()];
        for part in &self.middle {
            match part.find(rest) {
                Some(at) => rest = &rest[at + part.needle().len()..],
                None => return false,
            }
        }
        true
    }

    fn matches(&self, values: &ArrayRef) -> Result<BooleanArray> {
        let matched = |value: Option<&str>| value.map(|v| self.is_match(v.as_bytes()));
        Ok(match values.data_type() {
            DataType::Utf8 => values.as_string::<i32>().iter().map(matched).collect(),
            DataType::LargeUtf8 => values.as_string::<i64>().iter().map(matched).collect(),
            DataType::Utf8View => values.as_string_view().iter().map(matched).collect(),
            other => return exec_err!("{NAME}: cannot match values of type {other}"),
        })
    }
}

/// Replaces, in filters, each `LIKE` that [`Pattern::of`] takes by a call of
/// [`LikeSegments`].
pub(super) const LIKE_SEGMENTS: NodeRule = NodeRule {
    name: "floe_like_segments",
    rewrite: |node| on_filter(node, with_segments_calls),
};

fn with_segments_calls(filter: &FilterExec) -> Result<Option<FilterExec>> {
    let schema = filter.input().schema();
    let predicate = filter.predicate().clone().transform_up(|expr| {
        Ok(match segments_call(&expr, &schema)? {
            Some(call) => Transformed::yes(call),
            None => Transformed::no(expr),
        })
    })?;
    if !predicate.transformed {
        return Ok(None);
    }
    let rewritten = FilterExecBuilder::from(filter)
        .with_predicate(predicate.data)
        .build()?;
    Ok(Some(rewritten))
}

/// `expr` as a call of [`LikeSegments`] (under `NOT` for `NOT LIKE`), where it is a
/// `LIKE` of a string with a pattern of parts.
fn segments_call(
    expr: &Arc<dyn PhysicalExpr>,
    schema: &SchemaRef,
) -> Result<Option<Arc<dyn PhysicalExpr>>> {
    let Some(like) = expr.as_any().downcast_ref::<LikeExpr>() else {
        return Ok(None);
    };
    let Some(pattern) = like.pattern().as_any().downcast_ref::<Literal>() else {
        return Ok(None);
    };
    let ScalarValue::Utf8(Some(text)) = pattern.value() else {
        return Ok(None);
    };
    let string = matches!(
        like.expr().data_type(schema)?,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    );
    if like.case_insensitive() || !string || Pattern::of(text).is_none() {
        return Ok(None);
    }
    let call: Arc<dyn PhysicalExpr> = Arc::new(ScalarFunctionExpr::try_new(
        Arc::new(ScalarUDF::new_from_impl(LikeSegments::default())),
        vec![like.expr().clone(), like.pattern().clone()],
        schema,
        Arc::new(ConfigOptions::default()),
    )?);
    Ok(Some(match like.negated() {
        true => Arc::new(NotExpr::new(call)),
        false => call,
    }))
}
