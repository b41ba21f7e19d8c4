//! viewerfleet's test kit, kept out of the product: nothing in `viewerfleet` links it, and
//! its binary (`viewerfleet-kit`) is what tests, benchmarks and dry runs start.
//!
//! - `fake_hcloud`: a faithful stand-in for the Hetzner Cloud API (the one part of the
//!   product's world that cannot run here for real);
//! - `webdriver_stub`: a WebDriver endpoint that answers in microseconds, looks like a
//!   Selenium Grid hub and serves a viewer page and an exporter, so a whole run can target it
//!   without a browser (the engine's fast tests and the controller benchmark);
//! - `controller_bench`: the controller benchmark, measuring `viewerfleet run` from outside;
//! - `tls_proxy`: `https://` with a test CA in front of a plain hub (Grids behind a TLS
//!   proxy), for HTTP and the WebSocket upgrade of BiDi alike;
//! - `json_schema`: a checker for the subset of JSON Schema that `schemas/` uses;
//! - `relay_grid`: a real Selenium Grid 4 hub with relay nodes in front of the stub (every
//!   WebDriver call crosses the real hub, no browser runs);
//! - `hub_bench`: the hub benchmark on that Grid: creations per second, the hub's CPU and
//!   memory per session.
//!
//! The kit reads the product's raw data as any user would: by its documented JSON shape.

pub mod controller_bench;
pub mod fake_hcloud;
pub mod hub_bench;
pub mod json_schema;
pub mod relay_grid;
pub mod tls_proxy;
pub mod webdriver_stub;

/// Makes a child die with its parent (SIGTERM when the parent ends, even by `kill -9`), so
/// an interrupted benchmark or test leaves nothing behind.
pub fn dies_with_parent(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        })
    }
}
