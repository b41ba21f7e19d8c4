//! Hetzner Cloud: planning (node counts and cost), fleets of cloud nodes made for one run,
//! and the guarantee that none of them keeps billing afterwards.
//!
//! - `token`, `api`, `pacer`: the API token (never shown); the API with the `hcloud` crate's
//!   models, retries, pagination, many actions per poll, and the request budget (3600 per
//!   hour) paced by the `RateLimit-*` headers; `HCLOUD_ENDPOINT` points it elsewhere.
//! - `pricing`, `sizing`: what can be ordered in the location (per-location deprecation) and
//!   at what price; nodes from a per-viewer budget, fitted to the project's server limit.
//! - `cloudinit`: user data for hub and nodes, built from the files in `grid/`.
//! - `provision`: labels, SSH key, firewalls, hub, IPv6-only nodes, idempotent creates;
//!   teardown by run label (servers first, confirmed gone).
//! - `hub`: waiting for nodes to register with the Selenium hub.
//! - `heartbeat`: the dead man's switch a running controller keeps on its hub.
//! - `up`: a whole fleet made for one run (sized, provisioned, registered) and its teardown;
//!   `guard`: teardown on every exit path.
//! - `reaper`: a process of its own that outlives the controller and deletes the run when
//!   the controller dies without doing so, or when a fleet left standing reaches its TTL.
//! - `gc`: leftovers of crashed runs, decided resource by resource.
//!
//! The `fleet: kind: hcloud` settings are in `model::scenario::fleet::hcloud`; the `Fleet`
//! the engine uses is `fleet::hcloud`; the fake API for tests is in the test kit (`kit/`).

pub mod api;
pub mod canary;
pub mod cloudinit;
pub mod gc;
pub mod guard;
pub(crate) mod heartbeat;
pub mod hub;
pub mod hub_sizing;
pub(crate) mod pacer;
pub mod pricing;
pub mod provision;
pub mod reaper;
pub mod sizing;
pub mod tfvars;
pub mod token;
pub mod up;

/// Everything that can go wrong talking to Hetzner, each with what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    #[error("no Hetzner Cloud API token: set HCLOUD_TOKEN, or fleet.token_file to a file holding it (Hetzner Console → project → Security → API tokens, Read & Write)")]
    NoToken,
    #[error("cannot read the API token from {path}: {message}")]
    TokenFile { path: String, message: String },
    #[error("the Hetzner API refused the token (401 unauthorized); check HCLOUD_TOKEN or fleet.token_file, and that the token has Read & Write rights")]
    Unauthorized,
    #[error("Hetzner refused {what}: resource_limit_exceeded ({message}). Ask Hetzner for a higher limit (Console → project → Limits → request an increase), spread the viewers over several projects or locations, or use `fleet: grid` with servers you already have")]
    LimitExceeded { what: String, message: String },
    #[error("{what}: still rate-limited (429) after waiting 15 minutes for the project's request budget (3600 per hour); other tools of the project may be using it: wait, then run again")]
    RateLimited { what: String },
    #[error("{what}: the API keeps failing (status {status}) after retries; try again later")]
    Transient { what: String, status: u16 },
    #[error("{what}: the API answered {status} {code}: {message}")]
    Api {
        what: String,
        status: u16,
        code: String,
        message: String,
    },
    #[error("{what}: {message}")]
    Transport { what: String, message: String },
    #[error("action {what} failed: {code}: {message}")]
    Action {
        what: String,
        code: String,
        message: String,
    },
    #[error("timed out waiting for {what}")]
    Timeout { what: String },
    #[error("fleet.{field}: {message}")]
    Invalid { field: String, message: String },
    #[error("interrupted (Ctrl-C or SIGTERM)")]
    Cancelled,
    #[error("not confirmed: {what} was not created. Answer `y` at the prompt, or pass --yes (or set VIEWERFLEET_YES=1) where nobody can answer, as in scripts and CI")]
    NotConfirmed { what: String },
    #[error("teardown of run {run} is incomplete: deleted {}; left: {}. Run `viewerfleet down {run}` to try again, or delete what carries the label viewerfleet-run={run} in the Hetzner Console (servers first)", deleted.summary(), left.join("; "))]
    TeardownIncomplete {
        run: String,
        deleted: provision::Deleted,
        left: Vec<String>,
    },
    #[error("cannot start the reaper that deletes the run if this controller dies ({0}); nothing was created")]
    NoReaper(String),
    #[error(
        "provisioning stopped on an internal error (a bug: {0}); the run's servers were deleted"
    )]
    Panicked(String),
}
