//! `FETCH FIRST n ROWS ONLY` (SQL's standard spelling of `LIMIT`, which JDBC tools and
//! Oracle or DB2 users write; also after `OFFSET n ROWS`) is written as `LIMIT n`,
//! which DataFusion 53 takes and `FETCH` it refuses. `WITH TIES` and `PERCENT` stay
//! refused.

use std::ops::ControlFlow;

use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{Expr, LimitClause, Query, Value, VisitMut, VisitorMut};

use super::parse::sql_statement_mut;

/// `statement` with each plain `FETCH FIRST n ROWS ONLY` as `LIMIT n`.
pub(super) fn fetch_as_limit(statement: &mut Statement) {
    if let Some(statement) = sql_statement_mut(statement) {
        let _ = statement.visit(&mut Fetches);
    }
}

struct Fetches;

impl VisitorMut for Fetches {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let plain = query
            .fetch
            .as_ref()
            .is_some_and(|f| !f.with_ties && !f.percent);
        let limited = matches!(
            query.limit_clause,
            Some(
                LimitClause::LimitOffset { limit: Some(_), .. }
                    | LimitClause::OffsetCommaLimit { .. }
            )
        );
        if plain && !limited {
            let rows = query
                .fetch
                .take()
                .and_then(|fetch| fetch.quantity)
                .unwrap_or_else(|| Expr::value(Value::Number("1".to_string(), false)));
            query.limit_clause = Some(match query.limit_clause.take() {
                Some(LimitClause::LimitOffset {
                    offset, limit_by, ..
                }) => LimitClause::LimitOffset {
                    limit: Some(rows),
                    offset,
                    limit_by,
                },
                _ => LimitClause::LimitOffset {
                    limit: Some(rows),
                    offset: None,
                    limit_by: vec![],
                },
            });
        }
        ControlFlow::Continue(())
    }
}
