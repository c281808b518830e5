//! `LIKE` / `ILIKE` with an `ESCAPE` character, and `SIMILAR TO`. DataFusion evaluates
//! only the backslash escape, and only finds out at execution; so a literal pattern
//! is rewritten here, at planning, to the backslash form, and anything else is
//! refused before it runs.
//!
//! DataFusion 53 runs `SIMILAR TO` as a regular expression searched anywhere in the
//! text, its pattern as written: `'xs1' SIMILAR TO 's1'` was true and `'s1' SIMILAR TO
//! 's%'` false. SQL's `SIMILAR TO` matches the whole text, with `%` and `_` as in
//! `LIKE`, `.` an ordinary character, and `|`, `*`, `+`, `?`, `{m,n}`, `( )` and `[ ]`
//! as in regular expressions; a literal pattern becomes that regular expression,
//! anchored at both ends, as PostgreSQL makes it (backslash the escape character unless
//! `ESCAPE` names another).

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
        Expr::SimilarTo(like) => (like, true),
        other => return Ok(Transformed::no(other)),
    };
    let escape = like.escape_char.unwrap_or('\\');
    let operator = match (similar, like.case_insensitive) {
        (true, _) => "SIMILAR TO",
        (false, true) => "ILIKE",
        (false, false) => "LIKE",
    };
    let Some(pattern) = literal_text(&like.pattern) else {
        return Err(FloeError::unimplemented(if similar {
            format!("{operator} needs a literal pattern")
        } else {
            format!("{operator} … ESCAPE '{escape}' needs a literal pattern")
        }));
    };
    let pattern = if similar {
        similar_to_regex(&pattern, escape)
    } else {
        like_to_backslash(&pattern, escape).map_err(String::from)
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

/// A SIMILAR TO pattern with escape character `escape` as the regular expression that
/// matches the same texts (see the module documentation).
pub fn similar_to_regex(pattern: &str, escape: char) -> Result<String, String> {
    let mut out = String::with_capacity(pattern.len() + 12);
    out.push_str("^(?s:");
    // Inside `[…]` or `{…}`, where characters are copied as they are.
    let mut closing = None;
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == escape {
            let literal = chars
                .next()
                .ok_or("the pattern ends with the escape character")?;
            push_literal(&mut out, literal);
        } else if let Some(end) = closing {
            closing = (c != end).then_some(end);
            push_literal_if(&mut out, c, c == '\\');
        } else {
            match c {
                '%' => out.push_str(".*"),
                '_' => out.push('.'),
                '[' | '{' => {
                    closing = Some(if c == '[' { ']' } else { '}' });
                    out.push(c);
                }
                '|' | '*' | '+' | '?' | '(' | ')' => out.push(c),
                _ => push_literal(&mut out, c),
            }
        }
    }
    if let Some(end) = closing {
        return Err(format!("a '{end}' is missing"));
    }
    out.push_str(")$");
    regex::Regex::new(&out).map_err(|e| e.to_string())?;
    Ok(out)
}

/// `c` as a regular expression matching only itself.
fn push_literal(out: &mut String, c: char) {
    out.push_str(&regex::escape(c.encode_utf8(&mut [0; 4])));
}

fn push_literal_if(out: &mut String, c: char, escaped: bool) {
    if escaped {
        out.push('\\');
    }
    out.push(c);
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
