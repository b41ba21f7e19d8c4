//! The real tier: real Chromium and ChromeDriver, a real Selenium Grid 4, network
//! namespaces and tc (as root), ffmpeg and WebRTC. Few viewers, short runs; `make test`
//! runs it after the fast tier, one test at a time (`--test-threads=1`): the tests share
//! the machine's two cores, and several create system-wide resources.

#[path = "../support/mod.rs"]
mod support;

mod calibrate_local;
mod churn_run;
mod cloud_grid;
mod cloud_slots;
mod dashboards_prometheus;
mod grid_auth;
mod grid_bench;
mod grid_light;
mod grid_local;
mod grid_nat;
mod grid_node_loss;
mod grid_refsite;
mod grid_scale;
mod grid_tls;
mod headroom;
mod ladder_local;
mod light_peers;
mod light_peertube;
mod nat_pairs;
mod nat_types;
mod netns_gc;
mod netns_run;
mod netns_shaping;
mod netns_slot_churn;
mod per_browser;
mod record_lost;
mod refsite_browsers;
mod report_html_chromium;
mod run_local;
mod slot_guard;
mod starved_node;
mod throttle_modes;
mod viewer_local;
