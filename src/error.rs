//! One error type for the whole server, classified the way clients see it.
//!
//! Every error carries a kind that maps to one Flight status code (see
//! `flight::status`), so a missing table is always `NOT_FOUND`, bad SQL always
//! `INVALID_ARGUMENT`, and so on. Messages never contain credentials: nothing that
//! holds storage properties or catalog secrets is ever formatted into one.

use datafusion::error::DataFusionError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    Unimplemented,
    Cancelled,
    /// The statement lost a race it cannot win by itself (a commit conflict that
    /// survived the retries, a schema change during a write): retrying it is safe.
    Aborted,
    /// A limit was reached (memory, held results); retrying later may work.
    ResourceExhausted,
    /// The server cannot take the statement now (it is shutting down, the catalog is
    /// busy, or the outcome of a commit could not be learned).
    Unavailable,
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
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }
}

impl From<iceberg::Error> for FloeError {
    fn from(e: iceberg::Error) -> Self {
        use iceberg::ErrorKind as K;
        // Errors raised by Floe's own catalog layer travel as the source of an iceberg error.
        if let Some(floe) =
            std::error::Error::source(&e).and_then(|s| s.downcast_ref::<FloeError>())
        {
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

impl From<DataFusionError> for FloeError {
    fn from(e: DataFusionError) -> Self {
        // Errors raised by Floe's own code travel through DataFusion wrapped as External.
        if let Some(floe) = find_floe_error(&e) {
            return floe;
        }
        let kind = match e.find_root() {
            DataFusionError::SQL(..)
            | DataFusionError::Plan(_)
            | DataFusionError::SchemaError(..)
            | DataFusionError::Configuration(_) => ErrorKind::InvalidArgument,
            DataFusionError::NotImplemented(_) => ErrorKind::Unimplemented,
            _ => ErrorKind::Internal,
        };
        Self::new(kind, e.find_root().to_string())
    }
}

fn find_floe_error(e: &DataFusionError) -> Option<FloeError> {
    match e {
        DataFusionError::External(inner) => inner.downcast_ref::<FloeError>().cloned(),
        DataFusionError::Context(_, inner) => find_floe_error(inner),
        DataFusionError::Shared(inner) => find_floe_error(inner),
        _ => None,
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
