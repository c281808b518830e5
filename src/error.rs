//! One error type for the whole server, classified the way clients see it.
//!
//! Every error carries a kind that maps to one Flight status code (see
//! `flight::status`), so a missing table is always `NOT_FOUND`, bad SQL always
//! `INVALID_ARGUMENT`, and so on. Messages never contain credentials: nothing that
//! holds storage properties or catalog secrets is ever formatted into one.

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    Unimplemented,
    Cancelled,
    /// The statement ran past its time limit (and was cancelled).
    DeadlineExceeded,
    /// The statement lost a race it cannot win by itself (a commit conflict that
    /// survived the retries, a schema change during a write): retrying it is safe.
    Aborted,
    /// A limit was reached (memory, held results); retrying later may work.
    ResourceExhausted,
    /// The server cannot take the statement now (it is shutting down, the catalog is
    /// busy, or the outcome of a commit could not be learned).
    Unavailable,
    /// No valid credentials or token came with the call.
    Unauthenticated,
    /// The caller may not read or change what the statement touches.
    PermissionDenied,
    Internal,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct FloeError {
    pub kind: ErrorKind,
    pub message: String,
}

pub type Result<T, E = FloeError> = std::result::Result<T, E>;

impl FloeError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }
    pub fn already_exists(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::AlreadyExists, message)
    }
    pub fn unimplemented(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unimplemented, message)
    }
    pub fn aborted(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Aborted, message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unauthenticated, message)
    }
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::PermissionDenied, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }
    /// A statement that ran past `statement_timeout_secs` and was cancelled.
    pub fn statement_timeout(limit: std::time::Duration) -> Self {
        Self::new(
            ErrorKind::DeadlineExceeded,
            format!(
                "the statement ran longer than statement_timeout_secs = {}; it was cancelled",
                limit.as_secs()
            ),
        )
    }
}

impl From<iceberg::Error> for FloeError {
    fn from(e: iceberg::Error) -> Self {
        use iceberg::ErrorKind as K;
        // Errors raised by Floe's own catalog layer travel as the source of an iceberg error.
        if let Some(floe) = find_in_chain::<FloeError>(&e) {
            return floe.clone();
        }
        let kind = match e.kind() {
            K::NamespaceNotFound | K::TableNotFound => ErrorKind::NotFound,
            K::NamespaceAlreadyExists | K::TableAlreadyExists => ErrorKind::AlreadyExists,
            K::DataInvalid => ErrorKind::InvalidArgument,
            K::FeatureUnsupported => ErrorKind::Unimplemented,
            K::CatalogCommitConflicts => ErrorKind::Aborted,
            _ => ErrorKind::Internal,
        };
        Self::new(kind, e.to_string())
    }
}

impl From<datafusion::arrow::error::ArrowError> for FloeError {
    fn from(e: datafusion::arrow::error::ArrowError) -> Self {
        DataFusionError::from(e).into()
    }
}

impl From<DataFusionError> for FloeError {
    fn from(e: DataFusionError) -> Self {
        // Errors raised by Floe's own code travel through DataFusion wrapped as External.
        if let Some(floe) = find_in_chain::<FloeError>(&e) {
            return floe.clone();
        }
        let root = e.find_root();
        Self::new(kind_of(root), root.to_string())
    }
}

/// How a DataFusion error looks to the user. Errors in the user's data or SQL (a
/// division by zero, a failed cast, an overflow, a function's argument it refuses, a
/// regular expression that does not parse) are theirs to fix.
fn kind_of(root: &DataFusionError) -> ErrorKind {
    let pattern_error = find_in_chain::<regex::Error>(root).is_some()
        || find_in_chain::<regex_syntax::Error>(root).is_some();
    if pattern_error {
        return ErrorKind::InvalidArgument;
    }
    if let Some(arrow) = find_in_chain::<ArrowError>(root) {
        return match arrow {
            // Arrow's regular expression kernels (`regexp_like` of a column of patterns).
            ArrowError::ComputeError(message)
                if message.starts_with("Regular expression did not compile") =>
            {
                ErrorKind::InvalidArgument
            }
            ArrowError::DivideByZero
            | ArrowError::CastError(_)
            | ArrowError::ParseError(_)
            | ArrowError::ArithmeticOverflow(_) => ErrorKind::InvalidArgument,
            // Some kernels report an overflow as a compute error (`abs` of the smallest
            // BIGINT: "Int64Array overflow on abs(…)").
            ArrowError::ComputeError(message) if message.contains("overflow") => {
                ErrorKind::InvalidArgument
            }
            // A value cast to a decimal too narrow for it ("12345.6 is too large to store
            // in a Decimal128 of precision 4").
            ArrowError::InvalidArgumentError(message) if message.contains("too large to store") => {
                ErrorKind::InvalidArgument
            }
            ArrowError::NotYetImplemented(_) => ErrorKind::Unimplemented,
            _ => ErrorKind::Internal,
        };
    }
    match root {
        // DataFusion's "malformed input" while running: a function refusing its argument
        // (`lpad` to 10^11 characters, `date_trunc('fortnight', …)`, `make_date(2024, 13,
        // 1)`, `chr(-1)`); a broken invariant is `Internal`.
        DataFusionError::Execution(_)
        | DataFusionError::SQL(..)
        | DataFusionError::Plan(_)
        | DataFusionError::SchemaError(..)
        | DataFusionError::Configuration(_) => ErrorKind::InvalidArgument,
        DataFusionError::NotImplemented(_) => ErrorKind::Unimplemented,
        DataFusionError::ResourcesExhausted(_) => ErrorKind::ResourceExhausted,
        _ => ErrorKind::Internal,
    }
}

/// The first error of type `T` in `e`'s source chain, `e` included.
fn find_in_chain<'a, T: std::error::Error + 'static>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut current = Some(e);
    while let Some(error) = current {
        if let Some(found) = error.downcast_ref::<T>() {
            return Some(found);
        }
        current = error.source();
    }
    None
}

/// Ballista carries a failed task's error to the scheduler as text (its `Debug`
/// form). Executors report a Floe error as a marker inside that text, so its kind
/// survives the trip: `[floe-error KIND HEX-MESSAGE]`.
const REPORT_OPEN: &str = "[floe-error ";

impl FloeError {
    /// The error as executors report it; see [`FloeError::from_task_report`].
    pub fn task_report(&self) -> String {
        let hex: String = self.message.bytes().map(|b| format!("{b:02x}")).collect();
        format!("{REPORT_OPEN}{} {hex}]", self.kind.name())
    }

    /// The error an executor reported inside `text`, if it reported one.
    pub fn from_task_report(text: &str) -> Option<Self> {
        let rest = &text[text.find(REPORT_OPEN)? + REPORT_OPEN.len()..];
        let (kind, rest) = rest.split_once(' ')?;
        let (hex, _) = rest.split_once(']')?;
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
            .collect::<Option<Vec<u8>>>()?;
        Some(Self::new(
            ErrorKind::from_name(kind)?,
            String::from_utf8_lossy(&bytes),
        ))
    }
}

impl ErrorKind {
    const ALL: [ErrorKind; 12] = [
        ErrorKind::InvalidArgument,
        ErrorKind::NotFound,
        ErrorKind::AlreadyExists,
        ErrorKind::Unimplemented,
        ErrorKind::Cancelled,
        ErrorKind::DeadlineExceeded,
        ErrorKind::Aborted,
        ErrorKind::ResourceExhausted,
        ErrorKind::Unavailable,
        ErrorKind::Unauthenticated,
        ErrorKind::PermissionDenied,
        ErrorKind::Internal,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::NotFound => "not_found",
            ErrorKind::AlreadyExists => "already_exists",
            ErrorKind::Unimplemented => "unimplemented",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::DeadlineExceeded => "deadline_exceeded",
            ErrorKind::Aborted => "aborted",
            ErrorKind::ResourceExhausted => "resource_exhausted",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Unauthenticated => "unauthenticated",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::Internal => "internal",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

impl From<FloeError> for DataFusionError {
    fn from(e: FloeError) -> Self {
        DataFusionError::External(Box::new(e))
    }
}

/// Wraps an iceberg error for DataFusion, keeping its classification.
pub fn iceberg_to_df(e: iceberg::Error) -> DataFusionError {
    FloeError::from(e).into()
}

/// Maps an error to the gRPC status a client (or an executor) sees.
pub fn status(e: FloeError) -> tonic::Status {
    use tonic::Status;
    let message = e.message;
    match e.kind {
        ErrorKind::InvalidArgument => Status::invalid_argument(message),
        ErrorKind::NotFound => Status::not_found(message),
        ErrorKind::AlreadyExists => Status::already_exists(message),
        ErrorKind::Unimplemented => Status::unimplemented(message),
        ErrorKind::Cancelled => Status::cancelled(message),
        ErrorKind::DeadlineExceeded => Status::deadline_exceeded(message),
        ErrorKind::Aborted => Status::aborted(message),
        ErrorKind::ResourceExhausted => Status::resource_exhausted(message),
        ErrorKind::Unavailable => Status::unavailable(message),
        ErrorKind::Unauthenticated => Status::unauthenticated(message),
        ErrorKind::PermissionDenied => Status::permission_denied(message),
        ErrorKind::Internal => Status::internal(message),
    }
}
