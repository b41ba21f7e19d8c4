//! The bottom layer: what a run is and what it leaves on disk, as plain data.
//!
//! - `scenario`: the YAML model of one run, validated into the typed `Plan` (fleet section
//!   included, already parsed);
//! - `rawdata`: the records a run appends as they arrive, and the manifest;
//! - `kinds`: the fixed sets (fleet kind, target kind, video kind, …), each an enum with one
//!   mapping to and from its name;
//! - `exit`: every exit code, and the error categories that choose one;
//! - `isolation`: how browsers ran (their user, Chromium's sandbox).
//!
//! Nothing here starts a process, opens a socket or knows the command line; every other
//! layer may use it, it uses none of them (its crate depends on no other of the workspace).

pub mod exit;
pub mod isolation;
pub mod kinds;
pub mod net;
pub mod rawdata;
pub mod scenario;
pub mod secret;
