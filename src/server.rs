//! Starting the two roles: `floe serve` (coordinator with an embedded scheduler and
//! optional in-process executors) and `floe executor`.

use std::sync::Arc;
use std::time::Duration;

use crate::cluster::{Cluster, ClusterOptions, spawn_local_executor};
use crate::config::ServeConfig;
use crate::error::Result;
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
    let cluster = Cluster::start(&ClusterOptions {
        scheduler_addr: config.scheduler_addr,
        catalog_name: config.catalog.name.clone(),
        target_partitions: config.target_partitions,
    })
    .await?;
    for _ in 0..config.local_executors {
        spawn_local_executor(config.scheduler_addr, config.executor_slots)?;
    }
    cluster
        .wait_for_executors(config.local_executors, Duration::from_secs(60))
        .await?;
    tracing::info!(
        scheduler = %config.scheduler_addr,
        local_executors = config.local_executors,
        data_dir = %config.data_dir.display(),
        "coordinator ready"
    );
    let engine = Arc::new(Engine::new(catalog, config.catalog.name.clone(), cluster));
    crate::flight::serve(engine, config.flight_addr, shutdown_signal()).await?;
    tracing::info!("stopped");
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
