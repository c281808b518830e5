//! `LIKE` / `ILIKE` / `SIMILAR TO` with an `ESCAPE` character. DataFusion evaluates
//! only the backslash escape, and only finds out at execution; so a literal pattern
//! is rewritten here, at planning, to the backslash form, and anything else is
//! refused before it runs.

use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::logical_expr::LogicalPlan;
use datafusion::logical_expr::expr::{Expr, Like};

use crate::error::{FloeError, Result};

/// The plan with every custom-escape pattern in backslash form.
pub fn rewrite_escapes(plan: LogicalPlan) -> Result<LogicalPlan> {
    let plan = plan.transform_up_with_subqueries(|node| {
        node.map_expressions(|expr| expr.transform_up(|e| rewrite(e).map_err(Into::into)))
    })?;
    Ok(plan.data)
}

fn rewrite(expr: Expr) -> Result<Transformed<Expr>> {
    let (like, similar) = match expr {
        Expr::Like(like) if needs_rewrite(&like) => (like, false),
        Expr::SimilarTo(like) if needs_rewrite(&like) => (like, true),
        other => return Ok(Transformed::no(other)),
    };
    let escape = like.escape_char.unwrap_or('\\');
    let operator = match (similar, like.case_insensitive) {
        (true, _) => "SIMILAR TO",
        (false, true) => "ILIKE",
        (false, false) => "LIKE",
    };
    let Some(pattern) = literal_text(&like.pattern) else {
        return Err(FloeError::unimplemented(format!(
            "{operator} … ESCAPE '{escape}' needs a literal pattern"
        )));
    };
    let pattern = if similar {
        similar_to_backslash(&pattern, escape)
    } else {
        like_to_backslash(&pattern, escape)
    }
    .map_err(|problem| {
        FloeError::invalid(format!(
            "{operator} pattern '{pattern}' ESCAPE '{escape}': {problem}"
        ))
    })?;
    let rewritten = Like {
        pattern: Box::new(Expr::Literal(ScalarValue::Utf8(Some(pattern)), None)),
        escape_char: None,
        ..like
    };
    Ok(Transformed::yes(if similar {
        Expr::SimilarTo(rewritten)
    } else {
        Expr::Like(rewritten)
    }))
}

fn needs_rewrite(like: &Like) -> bool {
    like.escape_char.is_some_and(|c| c != '\\')
}

fn literal_text(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)),
            _,
        ) => Some(s.clone()),
        _ => None,
    }
}

/// A LIKE pattern with escape character `escape` in backslash form: `escape` followed
/// by any character stands for that character; a backslash is an ordinary character.
pub fn like_to_backslash(pattern: &str, escape: char) -> Result<String, &'static str> {
    translate(pattern, escape, |c| matches!(c, '%' | '_' | '\\'))
}

/// The same for SIMILAR TO, whose patterns DataFusion matches as regular expressions.
pub fn similar_to_backslash(pattern: &str, escape: char) -> Result<String, &'static str> {
    translate(pattern, escape, |c| "\\.^$|?*+()[]{}%_".contains(c))
}

fn translate(
    pattern: &str,
    escape: char,
    special: impl Fn(char) -> bool,
) -> Result<String, &'static str> {
    let mut out = String::with_capacity(pattern.len() + 4);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        let literal = if c == escape {
            chars
                .next()
                .ok_or("the pattern ends with the escape character")?
        } else if c == '\\' {
            '\\'
        } else {
            out.push(c);
            continue;
        };
        if special(literal) {
            out.push('\\');
        }
        out.push(literal);
    }
    Ok(out)
}
