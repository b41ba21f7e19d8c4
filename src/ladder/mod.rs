//! Capacity ladders: a scenario run at increasing viewer counts, each step a normal run
//! folder; knee detection with stated rules; per-viewer costs fitted on the healthy steps;
//! a projection for a user-given server; a capacity report.

pub mod fit;
pub mod knee;
pub mod project;
