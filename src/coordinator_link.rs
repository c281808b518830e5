//! How an executor process asks its coordinator for something a plan only names: Flight
//! actions on the coordinator's scheduler port (served by
//! `cluster::coordinator_service`), which every executor already reaches.

use std::sync::OnceLock;

use arrow_flight::Action;
use arrow_flight::flight_service_client::FlightServiceClient;
use bytes::Bytes;
use futures::TryStreamExt;
use tonic::transport::{Channel, Endpoint};

/// Largest message either side sends (the scheduler's own limit).
const MAX_MESSAGE_SIZE: usize = 64 * 1024 * 1024;

/// The coordinator's scheduler address (`host:port`) and a channel to it, connected on
/// first use and shared by every request of this process.
static COORDINATOR: OnceLock<(String, Channel)> = OnceLock::new();

/// Executors: the coordinator is the one whose scheduler is at `addr`.
pub fn set(addr: String) -> Result<(), String> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| format!("coordinator address {addr}: {e}"))?
        .connect_lazy();
    let _ = COORDINATOR.set((addr, channel));
    Ok(())
}

/// Whether this process knows a coordinator to ask (executor processes do; the
/// coordinator and its in-process executors hold everything themselves).
pub fn is_set() -> bool {
    COORDINATOR.get().is_some()
}

/// Runs action `kind` with `body` at the coordinator; its answers, in order. Errors say
/// what was asked and where.
pub async fn ask(kind: &str, body: Bytes) -> Result<Vec<Bytes>, String> {
    let Some((addr, channel)) = COORDINATOR.get() else {
        return Err(format!("{kind}: no coordinator to ask"));
    };
    let failed = |e: tonic::Status| format!("{kind} at the coordinator {addr}: {}", e.message());
    let mut client = FlightServiceClient::new(channel.clone())
        .max_decoding_message_size(MAX_MESSAGE_SIZE)
        .max_encoding_message_size(MAX_MESSAGE_SIZE);
    let action = Action {
        r#type: kind.to_string(),
        body,
    };
    let answers = client.do_action(action).await.map_err(failed)?.into_inner();
    let answers: Vec<arrow_flight::Result> = answers.try_collect().await.map_err(failed)?;
    Ok(answers.into_iter().map(|answer| answer.body).collect())
}
