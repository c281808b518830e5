//! Number literals as PostgreSQL, DuckDB, Trino and Spark read them: `0.1` is an exact
//! `DECIMAL(1, 1)` (so `0.1 + 0.2` is `0.3` and `price * 1.1` stays a decimal), and a
//! number written with an exponent (`1e3`, `2.5E-4`) a `DOUBLE`. DataFusion reads the
//! first kind as a decimal when told to (`sql_parser.parse_float_as_decimal`, set in
//! `cluster::session_config`), and every such literal alike: `1e3` would become a decimal
//! of negative scale, which few kernels take, so those are cast here.
//!
//! DataFusion names an expression by its literals' debug form (`Decimal128(Some(15),2,1)`
//! for `1.5`); a select list item holding such a literal and no alias is named as written
//! (`x * 1.5`), which is what a client shows as the column's header.

use std::ops::ControlFlow;

use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{
    CastKind, DataType, ExactNumberInfo, Expr, Ident, Query, SelectItem, Value, ValueWithSpan,
    Visit, VisitMut, Visitor, VisitorMut,
};

use super::parse::{selects_mut, sql_statement_mut};

/// Names the select items that hold a fractional number literal and casts every number
/// with an exponent to `DOUBLE` (see the module documentation).
pub fn read_as_other_engines_do(statement: &mut Statement) {
    if let Some(statement) = sql_statement_mut(statement) {
        let _ = statement.visit(&mut Numbers);
    }
}

struct Numbers;

impl VisitorMut for Numbers {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        for select in selects_mut(&mut query.body) {
            for item in &mut select.projection {
                name_as_written(item);
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Some(number) = number(expr).filter(|n| has_exponent(n)) {
            *expr = Expr::Cast {
                kind: CastKind::Cast,
                array: false,
                expr: Box::new(Expr::value(Value::SingleQuotedString(number.to_string()))),
                data_type: DataType::Double(ExactNumberInfo::None),
                format: None,
            };
        }
        ControlFlow::Continue(())
    }
}

fn name_as_written(item: &mut SelectItem) {
    let SelectItem::UnnamedExpr(expr) = item else {
        return;
    };
    if !holds_fractional_number(expr) {
        return;
    }
    let alias = Ident::with_quote('"', expr.to_string());
    *item = SelectItem::ExprWithAlias {
        expr: expr.clone(),
        alias,
    };
}

fn holds_fractional_number(expr: &Expr) -> bool {
    struct Finder;
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            match number(expr) {
                Some(n) if !n.bytes().all(|b| b.is_ascii_digit()) => ControlFlow::Break(()),
                _ => ControlFlow::Continue(()),
            }
        }
    }
    expr.visit(&mut Finder).is_break()
}

fn number(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Value(ValueWithSpan {
            value: Value::Number(n, _),
            ..
        }) => Some(n),
        _ => None,
    }
}

fn has_exponent(number: &str) -> bool {
    number.contains(['e', 'E'])
}
