//! GetSqlInfo: every code of the Flight SQL spec (server 0–11 and 100–101, SQL
//! syntax 500–576) with Floe's true values. The JDBC driver reads them all at once and
//! fails on a missing Boolean or Integer code, so none is left out (except the
//! Substrait versions, which are null: Floe takes no Substrait plans).

use std::collections::BTreeMap;

use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};
use arrow_flight::sql::{
    self as spec, SqlInfo, SqlSupportedCaseSensitivity, SqlSupportedTransaction,
    SqlSupportsConvert, SqlTransactionIsolationLevel,
};
use datafusion::execution::SessionStateBuilder;
use datafusion::sql::sqlparser::keywords::ALL_KEYWORDS;

use crate::error::{FloeError, Result};
use crate::sql::session;

/// The answers for a user who may change tables (`read_only` false) or not.
pub fn sql_info(read_only: bool) -> Result<SqlInfoData> {
    let mut info = SqlInfoDataBuilder::new();
    server_info(&mut info, read_only);
    syntax_info(&mut info);
    limits(&mut info);
    transactions_and_cursors(&mut info);
    info.build()
        .map_err(|e| FloeError::internal(format!("building SqlInfo: {e}")))
}

fn server_info(info: &mut SqlInfoDataBuilder, read_only: bool) {
    use SqlInfo::*;
    info.append(FlightSqlServerName, "Floe");
    info.append(FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
    info.append(FlightSqlServerArrowVersion, "58");
    info.append(FlightSqlServerReadOnly, read_only);
    info.append(FlightSqlServerSql, true);
    info.append(FlightSqlServerSubstrait, false);
    info.append(
        FlightSqlServerTransaction,
        SqlSupportedTransaction::None as i32,
    );
    info.append(FlightSqlServerCancel, true);
    info.append(FlightSqlServerBulkIngestion, true);
    info.append(FlightSqlServerIngestTransactionsSupported, false);
    // Milliseconds an idle prepared statement handle is kept.
    info.append(
        FlightSqlServerStatementTimeout,
        super::prepared::IDLE.as_millis() as i32,
    );
    info.append(FlightSqlServerTransactionTimeout, 0i32);
}

fn syntax_info(info: &mut SqlInfoDataBuilder) {
    use SqlInfo::*;
    info.append(SqlDdlCatalog, false);
    info.append(SqlDdlSchema, true);
    info.append(SqlDdlTable, true);
    // Unquoted names are lower-cased; quoted ones are kept as written.
    info.append(
        SqlIdentifierCase,
        SqlSupportedCaseSensitivity::SqlCaseSensitivityLowercase as i32,
    );
    info.append(SqlIdentifierQuoteChar, "\"");
    info.append(
        SqlQuotedIdentifierCase,
        SqlSupportedCaseSensitivity::SqlCaseSensitivityCaseInsensitive as i32,
    );
    info.append(SqlAllTablesAreSelectable, true);
    // DataFusion orders NULL as the largest value.
    info.append(
        SqlNullOrdering,
        spec::SqlNullOrdering::SqlNullsSortedHigh as i32,
    );
    info.append(SqlKeywords, ALL_KEYWORDS);
    let functions = FunctionLists::of_datafusion();
    info.append(SqlNumericFunctions, functions.numeric);
    info.append(SqlStringFunctions, functions.string);
    info.append(SqlSystemFunctions, functions.system);
    info.append(SqlDatetimeFunctions, functions.datetime);
    info.append(SqlSearchStringEscape, "\\");
    info.append(SqlExtraNameCharacters, "");
    info.append(SqlSupportsColumnAliasing, true);
    info.append(SqlNullPlusNullIsNull, true);
    info.append(SqlSupportsConvert, conversions());
    info.append(SqlSupportsTableCorrelationNames, true);
    info.append(SqlSupportsDifferentTableCorrelationNames, false);
    info.append(SqlSupportsExpressionsInOrderBy, true);
    info.append(SqlSupportsOrderByUnrelated, true);
    info.append(SqlSupportedGroupBy, bits(&[0, 1])); // unrelated, beyond SELECT
    info.append(SqlSupportsLikeEscapeClause, true);
    info.append(SqlSupportsNonNullableColumns, true);
    info.append(SqlSupportedGrammar, bits(&[0, 1])); // minimum, core
    info.append(SqlAnsi92SupportedLevel, bits(&[0])); // entry
    info.append(SqlSupportsIntegrityEnhancementFacility, false);
    info.append(
        SqlOuterJoinsSupportLevel,
        spec::SqlOuterJoinsSupportLevel::SqlFullOuterJoins as i32,
    );
    info.append(SqlSchemaTerm, "schema");
    info.append(SqlProcedureTerm, "procedure");
    info.append(SqlCatalogTerm, "catalog");
    info.append(SqlCatalogAtStart, true);
    info.append(SqlSchemasSupportedActions, 0i32);
    info.append(SqlCatalogsSupportedActions, 0i32);
    info.append(SqlSupportedPositionedCommands, 0i32);
    info.append(SqlSelectForUpdateSupported, false);
    info.append(SqlStoredProceduresSupported, false);
    info.append(SqlSupportedSubqueries, bits(&[0, 1, 2])); // comparisons, EXISTS, IN
    info.append(SqlCorrelatedSubqueriesSupported, true);
    info.append(SqlSupportedUnions, bits(&[0, 1])); // UNION, UNION ALL
}

/// Floe sets none of these limits: 0 means "no limit or unknown".
fn limits(info: &mut SqlInfoDataBuilder) {
    use SqlInfo::*;
    for code in [
        SqlMaxBinaryLiteralLength,
        SqlMaxCharLiteralLength,
        SqlMaxColumnNameLength,
        SqlMaxColumnsInGroupBy,
        SqlMaxColumnsInIndex,
        SqlMaxColumnsInOrderBy,
        SqlMaxColumnsInSelect,
        SqlMaxColumnsInTable,
        SqlMaxConnections,
        SqlMaxCursorNameLength,
        SqlMaxIndexLength,
        SqlDbSchemaNameLength,
        SqlMaxProcedureNameLength,
        SqlMaxCatalogNameLength,
        SqlMaxRowSize,
        SqlMaxStatementLength,
        SqlMaxStatements,
        SqlMaxTableNameLength,
        SqlMaxTablesInSelect,
        SqlMaxUsernameLength,
    ] {
        info.append(code, 0i64);
    }
    info.append(SqlMaxRowSizeIncludesBlobs, true);
}

/// No transactions (every statement commits on its own); results are read forward
/// only and are read-only.
fn transactions_and_cursors(info: &mut SqlInfoDataBuilder) {
    use SqlInfo::*;
    info.append(
        SqlDefaultTransactionIsolation,
        SqlTransactionIsolationLevel::SqlTransactionNone as i32,
    );
    info.append(SqlTransactionsSupported, false);
    info.append(SqlSupportedTransactionsIsolationLevels, bits(&[0]));
    info.append(SqlDataDefinitionCausesTransactionCommit, false);
    info.append(SqlDataDefinitionsInTransactionsIgnored, false);
    info.append(SqlSupportedResultSetTypes, bits(&[1])); // forward only
    info.append(SqlSupportedConcurrenciesForResultSetUnspecified, bits(&[1]));
    info.append(SqlSupportedConcurrenciesForResultSetForwardOnly, bits(&[1]));
    info.append(SqlSupportedConcurrenciesForResultSetScrollSensitive, 0i32);
    info.append(SqlSupportedConcurrenciesForResultSetScrollInsensitive, 0i32);
    info.append(SqlBatchUpdatesSupported, false);
    info.append(SqlSavepointsSupported, false);
    info.append(SqlNamedParametersSupported, false);
    info.append(SqlLocatorsUpdateCopy, false);
    info.append(SqlStoredFunctionsUsingCallSyntaxSupported, false);
}

fn bits(positions: &[u32]) -> i32 {
    positions.iter().map(|p| 1 << p).sum()
}

/// `CAST` between the JDBC type families: numbers and text convert to one another;
/// dates and times to and from text and each other; binary to and from text.
fn conversions() -> BTreeMap<i32, Vec<i32>> {
    use SqlSupportsConvert::*;
    let numbers = [
        SqlConvertBigint,
        SqlConvertBit,
        SqlConvertDecimal,
        SqlConvertFloat,
        SqlConvertInteger,
        SqlConvertNumeric,
        SqlConvertReal,
        SqlConvertSmallint,
        SqlConvertTinyint,
    ];
    let text = [SqlConvertChar, SqlConvertVarchar, SqlConvertLongvarchar];
    let times = [SqlConvertDate, SqlConvertTime, SqlConvertTimestamp];
    let binary = [
        SqlConvertBinary,
        SqlConvertVarbinary,
        SqlConvertLongvarbinary,
    ];
    let as_ints =
        |types: &[SqlSupportsConvert]| types.iter().map(|t| *t as i32).collect::<Vec<_>>();
    let mut map = BTreeMap::new();
    for from in numbers {
        map.insert(from as i32, as_ints(&[&numbers[..], &text[..]].concat()));
    }
    for from in text {
        let to = [&numbers[..], &text[..], &times[..], &binary[..]].concat();
        map.insert(from as i32, as_ints(&to));
    }
    for from in times {
        map.insert(from as i32, as_ints(&[&text[..], &times[..]].concat()));
    }
    for from in binary {
        map.insert(from as i32, as_ints(&[&text[..], &binary[..]].concat()));
    }
    map
}

/// DataFusion's scalar functions by the section its documentation files them under.
struct FunctionLists {
    numeric: Vec<String>,
    string: Vec<String>,
    datetime: Vec<String>,
    system: Vec<String>,
}

impl FunctionLists {
    fn of_datafusion() -> Self {
        let state = SessionStateBuilder::new().with_default_features().build();
        let mut lists = FunctionLists {
            numeric: Vec::new(),
            string: Vec::new(),
            datetime: Vec::new(),
            system: Vec::new(),
        };
        for (name, function) in state.scalar_functions() {
            let section = function.documentation().map(|d| d.doc_section.label);
            let list = match section {
                Some("Math Functions") => &mut lists.numeric,
                Some(
                    "String Functions" | "Binary String Functions" | "Regular Expression Functions",
                ) => &mut lists.string,
                Some("Time and Date Functions") => &mut lists.datetime,
                _ => &mut lists.system,
            };
            list.push(name.to_uppercase());
        }
        for name in session::FUNCTION_NAMES {
            if !lists
                .system
                .iter()
                .any(|listed| listed.eq_ignore_ascii_case(name))
            {
                lists.system.push(name.to_uppercase());
            }
        }
        for list in [
            &mut lists.numeric,
            &mut lists.string,
            &mut lists.datetime,
            &mut lists.system,
        ] {
            list.sort();
        }
        lists
    }
}
