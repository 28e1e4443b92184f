//! Reliability: the store contract, model-based and concurrent schedules, crashes, and
//! hostile input.

#[path = "../common/mod.rs"]
mod common;

mod concurrency;
mod crash;
mod freshness;
mod fuzz;
mod hostile;
mod model_based;
#[cfg(feature = "postgres")]
mod postgres;
mod store_conformance;
