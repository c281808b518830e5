//! Floe's Rust tests: one binary (link time), one module per concern.
//! End-to-end tests with real clients are in clients/tests (pytest).

mod arithmetic;
mod arrow_compat;
mod codec;
mod commit_path;
mod config;
mod errors;
mod estimates;
mod filter;
mod grouping;
mod maintenance;
mod metadata;
mod operations;
mod overwrite;
mod prepared;
mod results;
mod scan;
mod sql_parse;
mod staging;

mod support;
