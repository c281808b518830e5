//! What the catalog holds, for clients that browse it (Flight SQL's GetCatalogs,
//! GetDbSchemas and GetTables): schema and table names, and each table's columns as
//! queries return them.

use datafusion::arrow::datatypes::SchemaRef;
use iceberg::{NamespaceIdent, TableIdent};

use super::{Caller, Engine};
use crate::arrow_compat::client_schema;
use crate::auth::Access;
use crate::error::Result;
use crate::table::plan_schema;

pub struct TableInfo {
    pub schema_name: String,
    pub table_name: String,
    /// Only when asked for.
    pub columns: Option<TableColumns>,
}

pub struct TableColumns {
    pub schema: SchemaRef,
    /// Each column's comment, in the order of `schema`'s fields.
    pub docs: Vec<Option<String>>,
}

impl Engine {
    pub fn catalog_name(&self) -> &str {
        &self.catalog_name
    }

    /// The schema (namespace) names matching a LIKE `pattern` that `caller` may read,
    /// sorted.
    pub async fn schema_names(
        &self,
        caller: &Caller,
        pattern: Option<&str>,
    ) -> Result<Vec<String>> {
        let mut names: Vec<String> = self
            .catalog
            .list_namespaces(None)
            .await?
            .iter()
            .map(NamespaceIdent::to_url_string)
            .filter(|name| caller.access.can_read(name))
            .filter(|name| pattern.is_none_or(|p| like_matches(p, name)))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Whether schema `name` exists and `access` may read it (a schema the caller may not
    /// read is, to them, one that does not exist).
    pub async fn schema_visible(&self, access: &Access, name: &str) -> Result<bool> {
        Ok(access.can_read(name)
            && self
                .catalog
                .namespace_exists(&NamespaceIdent::new(name.to_string()))
                .await?)
    }

    /// The tables whose schema and name match the LIKE patterns, sorted; with their
    /// columns if `with_columns`. A table that cannot be loaded is left out (and
    /// logged): one broken table must not hide the others from a client's browser.
    pub async fn tables(
        &self,
        caller: &Caller,
        schema_pattern: Option<&str>,
        table_pattern: Option<&str>,
        with_columns: bool,
    ) -> Result<Vec<TableInfo>> {
        let mut tables = Vec::new();
        for schema_name in self.schema_names(caller, schema_pattern).await? {
            let namespace = NamespaceIdent::new(schema_name.clone());
            let mut idents = self.catalog.list_tables(&namespace).await?;
            idents.retain(|t| table_pattern.is_none_or(|p| like_matches(p, t.name())));
            idents.sort_by(|a, b| a.name().cmp(b.name()));
            for ident in idents {
                let columns = match with_columns {
                    true => match self.table_columns(&ident).await {
                        Ok(columns) => Some(columns),
                        Err(e) => {
                            tracing::warn!(table = %ident, "listing tables: {e}");
                            continue;
                        }
                    },
                    false => None,
                };
                tables.push(TableInfo {
                    schema_name: schema_name.clone(),
                    table_name: ident.name().to_string(),
                    columns,
                });
            }
        }
        Ok(tables)
    }

    async fn table_columns(&self, ident: &TableIdent) -> Result<TableColumns> {
        let table = self.catalog.load_table(ident).await?;
        let schema = table.metadata().current_schema();
        Ok(TableColumns {
            schema: client_schema(plan_schema(schema)?.as_ref()),
            docs: schema
                .as_struct()
                .fields()
                .iter()
                .map(|f| f.doc.clone())
                .collect(),
        })
    }
}

/// SQL `LIKE` as metadata patterns use it: `%` any run, `_` any one character, `\`
/// escapes the next character. Linear in the pattern times the text.
pub fn like_matches(pattern: &str, text: &str) -> bool {
    let mut tokens = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        tokens.push(match c {
            '%' => Token::Any,
            '_' => Token::One,
            '\\' => Token::Char(chars.next().unwrap_or('\\')),
            c => Token::Char(c),
        });
    }
    let text: Vec<char> = text.chars().collect();
    // matched[i]: the tokens so far can match the first i characters of the text.
    let mut matched = vec![false; text.len() + 1];
    matched[0] = true;
    for token in tokens {
        let mut next = vec![false; text.len() + 1];
        for i in 0..=text.len() {
            next[i] = match token {
                Token::Any => matched[i] || (i > 0 && next[i - 1]),
                Token::One => i > 0 && matched[i - 1],
                Token::Char(c) => i > 0 && matched[i - 1] && text[i - 1] == c,
            };
        }
        matched = next;
    }
    matched[text.len()]
}

#[derive(Clone, Copy)]
enum Token {
    Any,
    One,
    Char(char),
}
