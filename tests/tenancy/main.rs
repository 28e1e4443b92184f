//! Projects, API keys and credits.

#[path = "../common/mod.rs"]
mod common;

mod credits;
mod projects;
