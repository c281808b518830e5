//! A subquery's reference to a table of an outer query (`b.k` in `FROM t2 b WHERE EXISTS
//! (SELECT 1 FROM t1 c WHERE c.k = b.k)`), kept one where the subquery's own tables have
//! a column of the table's name (`t1.b`).
//!
//! SQL looks a qualified name's table up among the tables in scope, the subquery's
//! first, then the outer queries'. DataFusion 53 tries `b` as a column of the
//! subquery's tables first, `b.k` then being a field of it, and refused the statement
//! ("Cannot access field at argument 1: type Boolean is not Struct"). Each name whose
//! qualifier is a table of an outer query and not of the subquery is written with one
//! more part in front (`__floe_outer.b.k`, or the schema of an unaliased `db.b`): no
//! table or column of the subquery has that name, and the outer table's name matches
//! it as a name without a schema does.

use std::ops::ControlFlow;

use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{
    Expr, Ident, ObjectName, Query, Select, SetExpr, TableFactor, TableWithJoins, VisitMut,
    VisitorMut,
};

use super::parse::sql_statement_mut;

/// The part put in front of a qualified name whose table is an outer query's.
const OUTER: &str = "__floe_outer";

/// Rewrites the references of `statement`'s subqueries to tables of outer queries (see
/// the module documentation).
pub(super) fn outer_names_kept(statement: &mut DfStatement) {
    if let Some(statement) = sql_statement_mut(statement) {
        let _ = statement.visit(&mut Scopes(Vec::new()));
    }
}

/// The tables in scope in each query being visited, the innermost last: for each, its
/// name as written (an alias is one part).
struct Scopes(Vec<Vec<Vec<Ident>>>);

impl VisitorMut for Scopes {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let mut tables = Vec::new();
        tables_of(&query.body, &mut tables);
        self.0.push(tables);
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        self.0.pop();
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::CompoundIdentifier(parts) = expr
            && let [table, _column] = parts.as_slice()
            && let Some(prefix) = self.outer_prefix(table)
        {
            parts.splice(0..0, prefix);
        }
        ControlFlow::Continue(())
    }
}

impl Scopes {
    /// The parts to put before `table.column` where `table` is a table of an outer query
    /// and not of the innermost one.
    fn outer_prefix(&self, table: &Ident) -> Option<Vec<Ident>> {
        let (innermost, outer) = self.0.split_last()?;
        let named =
            |written: &&Vec<Ident>| written.last().is_some_and(|last| same_name(last, table));
        if innermost.iter().any(|w| named(&w)) {
            return None;
        }
        let written = outer
            .iter()
            .rev()
            .find_map(|scope| scope.iter().find(named))?;
        Some(match written.as_slice() {
            [_] => vec![Ident::with_quote('"', OUTER)],
            [schema @ .., _] => schema.to_vec(),
            [] => return None,
        })
    }
}

/// Whether two identifiers name the same thing (unquoted ones without case).
pub(super) fn same_name(a: &Ident, b: &Ident) -> bool {
    let normal = |i: &Ident| match i.quote_style {
        Some(_) => i.value.clone(),
        None => i.value.to_lowercase(),
    };
    normal(a) == normal(b)
}

/// The names of the tables of `select`, each as written (an alias is one part).
pub(super) fn tables_of_select(select: &Select) -> Vec<Vec<Ident>> {
    let mut tables = Vec::new();
    for from in &select.from {
        joined_tables(from, &mut tables);
    }
    tables
}

/// The names of the tables of the selects of `body`.
fn tables_of(body: &SetExpr, tables: &mut Vec<Vec<Ident>>) {
    match body {
        SetExpr::Select(select) => tables.extend(tables_of_select(select)),
        SetExpr::SetOperation { left, right, .. } => {
            tables_of(left, tables);
            tables_of(right, tables);
        }
        _ => {}
    }
}

fn joined_tables(from: &TableWithJoins, tables: &mut Vec<Vec<Ident>>) {
    let relations = std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation));
    for relation in relations {
        match relation {
            TableFactor::NestedJoin {
                table_with_joins,
                alias: None,
            } => joined_tables(table_with_joins, tables),
            TableFactor::Table {
                alias: Some(alias), ..
            }
            | TableFactor::Derived {
                alias: Some(alias), ..
            }
            | TableFactor::NestedJoin {
                alias: Some(alias), ..
            }
            | TableFactor::UNNEST {
                alias: Some(alias), ..
            }
            | TableFactor::Function {
                alias: Some(alias), ..
            } => tables.push(vec![alias.name.clone()]),
            TableFactor::Table {
                name, alias: None, ..
            } => tables.push(parts(name)),
            _ => {}
        }
    }
}

fn parts(name: &ObjectName) -> Vec<Ident> {
    name.0
        .iter()
        .filter_map(|part| part.as_ident().cloned())
        .collect()
}
