//! The operations endpoint (`metrics_addr`): `GET /metrics` (Prometheus), `/health`
//! (the process answers) and `/ready` (it can run statements: the catalog answers and
//! an executor is alive; `503` with the reason otherwise).

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::sql::Engine;

/// Serves the endpoint on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    engine: Arc<Engine>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let router = Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(|| async { "ok\n" }))
        .route("/ready", get(ready))
        .with_state(engine);
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn metrics(State(engine): State<Arc<Engine>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        engine.metrics_text().await,
    )
}

async fn ready(State(engine): State<Arc<Engine>>) -> impl IntoResponse {
    match engine.readiness().await {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}\n"),
        ),
    }
}
