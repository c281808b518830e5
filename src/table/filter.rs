//! DataFusion filters → Iceberg predicates, soundly.
//!
//! A translated predicate is handed to Iceberg planning (file pruning) and to the
//! reader (row-group pruning and row filtering), so it must never be *stronger* than
//! the SQL filter. Only exact translations are made: a comparison of a bare column with
//! a literal of exactly the column's type, `IS [NOT] NULL`, `IN`, and `AND`/`OR`/`NOT`
//! over fully translated children. Everything else is left to DataFusion, which
//! re-applies every filter anyway (pushdown is `Inexact`).
//!
//! A column whose type was promoted (int→long, float→double, wider decimal) is stored
//! in its old type in older files. Iceberg 0.10.1 compares those files' bounds (decoded
//! in the old type) and their values (the literal cast to the file's type, NULL when it
//! does not fit) wrongly against a literal of the new type, so such a column takes only
//! `IS [NOT] NULL`.
//!
//! The reader evaluates a predicate on a column its file lacks as if the column were
//! NULL, but such a column may have a value: an identity-partition value or an initial
//! default. The predicate given to the reader leaves those columns out entirely.
//!
//! Decimals are compared with literals only in planning (pruning files by their bounds
//! and partitions), never in the reader: given `p <= 1.50`, Iceberg 0.10.1's row filter
//! kept none of the rows of files Floe writes (decimals stored as Parquet integers).
//! Nor is a decimal that a partition spec truncates: Iceberg 0.10.1 projects the
//! comparison into a truncated literal of another scale, then fails to bind it ("Decimal
//! scale conversion is not supported"), failing the scan.

use std::collections::HashSet;

use datafusion::arrow::datatypes::{Decimal128Type, DecimalType};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use iceberg::expr::{Predicate, Reference};
use iceberg::spec::{Datum, PrimitiveType, Schema, TableMetadata, Transform, Type};

/// The columns a predicate may reference: the schema filters are bound to, and the
/// fields whose type changed in the table's history.
pub struct Columns<'a> {
    schema: &'a Schema,
    promoted: HashSet<i32>,
    excluded: HashSet<i32>,
    uncompared: HashSet<i32>,
    decimals: bool,
}

impl<'a> Columns<'a> {
    /// `schema` and every schema the table has had (its data files were written with
    /// one of them).
    pub fn new<'h>(schema: &'a Schema, history: impl IntoIterator<Item = &'h Schema>) -> Self {
        let promoted = changed_field_ids(schema, history);
        Self {
            schema,
            promoted,
            excluded: HashSet::new(),
            uncompared: HashSet::new(),
            decimals: true,
        }
    }

    /// The columns of `table`'s `schema` (its current one): every schema of its history,
    /// and no comparison of a decimal some partition spec truncates.
    pub fn of_table(metadata: &'a TableMetadata, schema: &'a Schema) -> Self {
        Self::new(schema, metadata.schemas_iter().map(|s| s.as_ref()))
            .not_comparing(truncated_decimals(metadata))
    }

    /// The same columns without `ids`, which no translation will reference.
    pub fn excluding(mut self, ids: impl IntoIterator<Item = i32>) -> Self {
        self.excluded.extend(ids);
        self
    }

    /// The same columns, none of `ids` compared with a literal.
    pub fn not_comparing(mut self, ids: impl IntoIterator<Item = i32>) -> Self {
        self.uncompared.extend(ids);
        self
    }

    /// The same columns, with no decimal compared with a literal: what the reader gets.
    pub fn without_decimal_comparisons(mut self) -> Self {
        self.decimals = false;
        self
    }
}

/// The conjunction of the filters that translate exactly, or `None` if none does.
pub fn filters_to_predicate(filters: &[Expr], columns: &Columns) -> Option<Predicate> {
    let translated = filters.iter().filter_map(|f| to_predicate(f, columns));
    joined_balanced(translated.collect(), &Predicate::and)
}

/// The fewest conditions joined by one `AND` or `OR` that Floe joins as a balanced tree
/// rather than one after another (see `sql::chains`): a tree as deep as it is long is
/// recursed through when a plan is encoded for executors (as JSON and protobuf), and
/// thousands of conditions overflowed the stack.
pub const BALANCED_FROM: usize = 32;

/// `items` joined by `join`: one after another when they are fewer than
/// [`BALANCED_FROM`], else as a balanced tree (halves under each join), which nests
/// only as deep as the logarithm of their count. `None` for no item.
pub fn joined_balanced<T>(items: Vec<T>, join: &impl Fn(T, T) -> T) -> Option<T> {
    if items.len() < BALANCED_FROM {
        return items.into_iter().reduce(join);
    }
    fn halves<T>(mut items: Vec<T>, join: &impl Fn(T, T) -> T) -> Option<T> {
        if items.len() <= 1 {
            return items.pop();
        }
        let right = items.split_off(items.len() / 2);
        Some(join(halves(items, join)?, halves(right, join)?))
    }
    halves(items, join)
}

/// Exact translation of one expression, or `None`.
pub fn to_predicate(expr: &Expr, columns: &Columns) -> Option<Predicate> {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And => Some(to_predicate(left, columns)?.and(to_predicate(right, columns)?)),
            Operator::Or => Some(to_predicate(left, columns)?.or(to_predicate(right, columns)?)),
            _ => comparison(left, *op, right, columns)
                .or_else(|| comparison(right, flip(*op)?, left, columns)),
        },
        Expr::Not(inner) => Some(to_predicate(inner, columns)?.negate()),
        Expr::IsNull(inner) => Some(reference(inner, columns)?.0.is_null()),
        Expr::IsNotNull(inner) => Some(reference(inner, columns)?.0.is_not_null()),
        Expr::InList(list) => {
            let (column, ty) = compared(&list.expr, columns)?;
            let values = list
                .list
                .iter()
                .map(|e| datum(e, &ty, Operator::Eq))
                .collect::<Option<Vec<_>>>()?;
            Some(if list.negated {
                column.is_not_in(values)
            } else {
                column.is_in(values)
            })
        }
        _ => None,
    }
}

/// `column op literal`.
fn comparison(column: &Expr, op: Operator, literal: &Expr, columns: &Columns) -> Option<Predicate> {
    let (column, ty) = compared(column, columns)?;
    let value = datum(literal, &ty, op)?;
    Some(match op {
        Operator::Eq => column.equal_to(value),
        Operator::NotEq => column.not_equal_to(value),
        Operator::Lt => column.less_than(value),
        Operator::LtEq => column.less_than_or_equal_to(value),
        Operator::Gt => column.greater_than(value),
        Operator::GtEq => column.greater_than_or_equal_to(value),
        _ => return None,
    })
}

/// The operator with its operands swapped (`5 < a` is `a > 5`).
fn flip(op: Operator) -> Option<Operator> {
    Some(match op {
        Operator::Eq | Operator::NotEq => op,
        Operator::Lt => Operator::Gt,
        Operator::LtEq => Operator::GtEq,
        Operator::Gt => Operator::Lt,
        Operator::GtEq => Operator::LtEq,
        _ => return None,
    })
}

/// A bare top-level column of primitive type, with its field id.
fn reference(expr: &Expr, columns: &Columns) -> Option<(Reference, PrimitiveType, i32)> {
    let Expr::Column(column) = expr else {
        return None;
    };
    let field = columns.schema.field_by_name(&column.name)?;
    if columns.excluded.contains(&field.id) {
        return None;
    }
    // Only top-level fields: a nested field of the same name must not match.
    columns.schema.as_struct().field_by_id(field.id)?;
    match field.field_type.as_ref() {
        Type::Primitive(p) => Some((Reference::new(column.name.clone()), p.clone(), field.id)),
        _ => None,
    }
}

/// A column that may be compared with a literal: one whose type never changed.
fn compared(expr: &Expr, columns: &Columns) -> Option<(Reference, PrimitiveType)> {
    let (column, ty, id) = reference(expr, columns)?;
    let decimal = matches!(ty, PrimitiveType::Decimal { .. });
    let comparable = !columns.promoted.contains(&id) && !columns.uncompared.contains(&id);
    (comparable && (columns.decimals || !decimal)).then_some((column, ty))
}

/// Decimal columns that some partition spec of the table truncates (see the module's
/// documentation).
fn truncated_decimals(metadata: &TableMetadata) -> HashSet<i32> {
    let schema = metadata.current_schema();
    metadata
        .partition_specs_iter()
        .flat_map(|spec| spec.fields())
        .filter(|field| matches!(field.transform, Transform::Truncate(_)))
        .map(|field| field.source_id)
        .filter(|id| {
            schema.field_by_id(*id).is_some_and(|f| {
                matches!(
                    *f.field_type,
                    Type::Primitive(PrimitiveType::Decimal { .. })
                )
            })
        })
        .collect()
}

/// The literal as an Iceberg datum of exactly the column's type.
fn datum(expr: &Expr, ty: &PrimitiveType, op: Operator) -> Option<Datum> {
    let Expr::Literal(value, _) = expr else {
        return None;
    };
    Some(match (ty, value) {
        (PrimitiveType::Boolean, ScalarValue::Boolean(Some(v))) => Datum::bool(*v),
        (PrimitiveType::Int, ScalarValue::Int32(Some(v))) => Datum::int(*v),
        (PrimitiveType::Long, ScalarValue::Int64(Some(v))) => Datum::long(*v),
        // NaN orders differently in Iceberg's metrics than in Arrow's kernels, so
        // floating point columns only take equality with a non-NaN value.
        (PrimitiveType::Float, ScalarValue::Float32(Some(v)))
            if op == Operator::Eq && !v.is_nan() =>
        {
            Datum::float(*v)
        }
        (PrimitiveType::Double, ScalarValue::Float64(Some(v)))
            if op == Operator::Eq && !v.is_nan() =>
        {
            Datum::double(*v)
        }
        (
            PrimitiveType::String,
            ScalarValue::Utf8(Some(v))
            | ScalarValue::LargeUtf8(Some(v))
            | ScalarValue::Utf8View(Some(v)),
        ) => Datum::string(v),
        (PrimitiveType::Decimal { scale, .. }, ScalarValue::Decimal128(Some(v), p, s))
            if u32::try_from(*s).ok() == Some(*scale) =>
        {
            // Iceberg makes decimals from text; the literal then takes the column's
            // precision, where its value fits.
            let text = Decimal128Type::format_decimal(*v, *p, *s);
            Datum::decimal_from_str(text)
                .ok()?
                .to(&Type::Primitive(ty.clone()))
                .ok()?
        }
        (PrimitiveType::Date, ScalarValue::Date32(Some(v))) => Datum::date(*v),
        (PrimitiveType::Timestamp, ScalarValue::TimestampMicrosecond(Some(v), None)) => {
            Datum::timestamp_micros(*v)
        }
        (PrimitiveType::Timestamptz, ScalarValue::TimestampMicrosecond(Some(v), Some(_))) => {
            Datum::timestamptz_micros(*v)
        }
        _ => return None,
    })
}

/// Top-level fields of `schema` whose type (with everything nested in it) differs in
/// some schema of `history`: older data files hold them in another shape.
fn changed_field_ids<'h>(
    schema: &Schema,
    history: impl IntoIterator<Item = &'h Schema>,
) -> HashSet<i32> {
    let mut changed = HashSet::new();
    for old in history {
        for field in schema.as_struct().fields() {
            if old
                .field_by_id(field.id)
                .is_some_and(|f| f.field_type != field.field_type)
            {
                changed.insert(field.id);
            }
        }
    }
    changed
}
