//! Viewer slots: network namespaces with their own IPv6 address, default route and a link
//! shaped in both directions with tc. Used by the `netns` fleet here and by Grid nodes on
//! cloud hosts (through the same `grid/viewer-slots.sh`, embedded here).
//!
//! Why namespaces: CDP throttling leaves WebRTC untouched, and peers on one host talk over
//! loopback candidates that no qdisc sees. A browser in its own namespace has one interface,
//! so a qdisc on it shapes HTTP and P2P alike.
//!
//! - `preflight`: root and iproute2 present, with a clear error otherwise.
//! - `slots`: brings slots up and down (runs the embedded script), parses what was applied.
//! - `inns`: runs code inside a namespace (HTTP GET, TCP listeners) from the root namespace.
//! - `gc`: finds and removes leftovers of crashed runs, by project prefix and owner PID.
//! - `wrapper`: the Chromium wrapper that enters a slot, and how its browsers will run
//!   (`probe_isolation`).

pub mod gc;
mod inns;
pub(crate) mod preflight;
pub mod slots;
pub(crate) mod wrapper;

pub use inns::{bind_tcp_in_netns, http_get_in_netns, run_in_netns};
pub use preflight::{check_host, HostEnv, SystemHostEnv};
pub use slots::{SlotAccess, SlotInfo, SlotNetwork, EMULATED_PUBLIC_IPV4};
pub use wrapper::probe_isolation;

/// Every namespace, bridge and veth this project creates starts with this.
pub(crate) const PROJECT_PREFIX: &str = "vf";

/// Errors of the slot machinery; each names what is needed to fix it.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("the netns fleet needs root (CAP_NET_ADMIN) to create network namespaces and tc qdiscs; run viewerfleet as root (e.g. with sudo) or use `fleet: {{kind: local}}`")]
    NotRoot,
    #[error("the netns fleet needs `{tool}` ({package}); install it (apt-get install {package}) or put it on PATH")]
    MissingTool {
        tool: &'static str,
        package: &'static str,
    },
    #[error("fleet.prefix: {0}")]
    BadPrefix(String),
    #[error("viewer-slots.sh {action} failed (exit {code}): {stderr}")]
    Script {
        action: String,
        code: i32,
        stderr: String,
    },
    #[error("network namespace `{ns}`: {message}")]
    Namespace { ns: String, message: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}
