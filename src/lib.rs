//! Floe: an Arrow Flight SQL server for Apache Iceberg tables, distributed with Ballista.
//!
//! Data flows one way: [`flight`] (the Flight SQL service) → [`sql`] (statement
//! routing, per-statement table resolution, DDL, commits) → [`cluster`] (the embedded
//! Ballista scheduler and executors) and [`table`] (Iceberg scan and write nodes) →
//! [`catalog`] (the Iceberg catalog). [`codec`] carries Floe's plan nodes to executors;
//! [`auth`] says who the caller is and what they may touch.

pub mod arrow_compat;
pub mod auth;
pub mod catalog;
pub mod cluster;
pub mod codec;
pub mod config;
pub mod coordinator_link;
pub mod error;
pub mod flight;
pub mod ops;
pub mod server;
pub mod sql;
pub mod table;
