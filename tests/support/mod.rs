//! Helpers shared by the test tiers; each tier includes the ones it needs.

#![allow(dead_code)]

pub mod clip;
pub mod fixtures;
pub mod grid;
pub mod hog;
pub mod internet;
pub mod process;
pub mod raw_run;
pub mod schema;
