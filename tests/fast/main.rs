//! The fast tier: everything that needs no browser, no Selenium Grid and no root — the
//! engine against the WebDriver stub, the command line, reports from crafted raw data,
//! refsite over sockets, the cloud code against the fake Hetzner API, the layering check.
//! `make test` runs it first (`cargo test --test fast`); it takes seconds.

#[path = "../support/mod.rs"]
mod support;

mod bad_input;
mod calibrate;
mod churn;
mod ci_gate;
mod cli;
mod cloud;
mod cloud_cli;
mod crates;
mod dashboards;
mod engine;
mod fuzz;
mod installed;
mod json_all;
mod json_output;
mod light_fidelity;
mod light_report;
mod netns_preflight;
mod node_load;
mod reaper;
mod reference;
mod refsite_cli;
mod refsite_http;
mod report_fixtures;
mod swarm_sweep;
mod thresholds_cli;
mod tls;
