//! Operating Floe: the statements running now (admission, query log, cancellation),
//! metrics, and the HTTP endpoint that serves them with health and readiness.

pub mod http;
pub mod metrics;
pub mod statements;
