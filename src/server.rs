//! Starting the two roles: `floe serve` (coordinator with an embedded scheduler and
//! optional in-process executors) and `floe executor`.

use std::sync::Arc;
use std::time::Duration;

use crate::cluster::{Cluster, ClusterOptions};
use crate::config::ServeConfig;
use crate::error::Result;
use crate::ops::statements::Statements;
use crate::sql::Engine;

/// Runs the coordinator until SIGINT or SIGTERM.
pub async fn serve(config: ServeConfig) -> Result<()> {
    if let Some(path) = config.catalog.warehouse.strip_prefix("file://") {
        std::fs::create_dir_all(path).map_err(|e| {
            crate::error::FloeError::invalid(format!(
                "catalog.warehouse: cannot create {path}: {e}"
            ))
        })?;
    }
    let catalog = crate::catalog::connect(&config.catalog).await?;
    crate::table::journal::open(&config.data_dir.join("journal"))?;
    let recovered = crate::table::journal::recover(catalog.as_ref()).await?;
    if recovered != Default::default() {
        tracing::info!(
            committed = recovered.committed,
            discarded = recovered.discarded,
            kept = recovered.kept,
            "settled the writes the previous run left unfinished"
        );
    }
    let cluster = Cluster::start(&ClusterOptions {
        scheduler_addr: config.scheduler_addr,
        catalog_name: config.catalog.name.clone(),
        target_partitions: config.target_partitions,
        executor_wait: config.executor_wait,
        executor_timeout: config.executor_timeout,
    })
    .await?;
    if config.local_executors > 0 {
        cluster.hold_stage_outputs(config.shuffle_memory, config.shuffle_compression)?;
    }
    let executors = (0..config.local_executors)
        .map(|_| {
            cluster.spawn_local_executor(
                config.executor_slots,
                config.executor_memory,
                config.shuffle_compression,
            )
        })
        .collect::<Result<Vec<_>>>()?;
    cluster
        .wait_for_executors(config.local_executors, Duration::from_secs(60))
        .await?;
    cluster.local_executors_registered();
    tracing::info!(
        scheduler = %config.scheduler_addr,
        local_executors = config.local_executors,
        data_dir = %config.data_dir.display(),
        "coordinator ready"
    );
    let statements = Statements::new(
        config.max_concurrent_statements,
        config.statement_queue_timeout,
    );
    let engine = Arc::new(
        Engine::new(
            catalog,
            config.catalog.name.clone(),
            cluster.clone(),
            config.statement_timeout,
            statements,
        )
        .with_local_queries(config.local_query_max_bytes, config.executor_memory)?,
    );
    let (ops_stop, ops_stopped) = tokio::sync::oneshot::channel::<()>();
    if let Some(addr) = config.metrics_addr {
        serve_operations(addr, engine.clone(), ops_stopped).await?;
    }
    // The in-process executors stop on the same signal, so statements still waiting for
    // a job are cancelled (and fail cleanly) rather than left waiting.
    let (cancelled_tx, cancelled_rx) = tokio::sync::oneshot::channel();
    let stopping = cluster.clone();
    let shutdown = async move {
        shutdown_signal().await;
        let _ = cancelled_tx.send(stopping.cancel_all_jobs());
    };
    crate::flight::serve(
        engine,
        config.flight_addr,
        config.auth.as_ref(),
        config.tls.as_ref(),
        shutdown,
    )
    .await?;
    // Give the in-process executors a moment to wind down cancelled tasks, so that what
    // those tasks clean up on the way out is done before the process ends.
    if cancelled_rx.await.unwrap_or(0) > 0 {
        let wind_down = futures::future::join_all(executors);
        if tokio::time::timeout(Duration::from_secs(3), wind_down)
            .await
            .is_err()
        {
            tracing::info!("in-process executors did not stop within 3s");
        }
    }
    let _ = ops_stop.send(());
    cluster.remove_local_work_dirs();
    tracing::info!("stopped");
    Ok(())
}

/// Serves /metrics, /health and /ready on `addr` until `stop` fires.
async fn serve_operations(
    addr: std::net::SocketAddr,
    engine: Arc<Engine>,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        crate::error::FloeError::invalid(format!("metrics_addr: cannot listen on {addr}: {e}"))
    })?;
    tracing::info!("metrics, health and readiness on http://{addr}");
    tokio::spawn(async move {
        let stop = async {
            let _ = stop.await;
        };
        if let Err(e) = crate::ops::http::serve(listener, engine, stop).await {
            tracing::error!("the metrics endpoint stopped: {e}");
        }
    });
    Ok(())
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down: finishing in-flight statements");
}
