//! refsite: the built-in reference P2P video site. It speaks PeerTube's interfaces (embed
//! URL and parameters, `network-info` player stats, `/api/v1/metrics/playback`, Prometheus
//! names, `/tracker/socket`) so the whole loop runs offline, and it counts what it really
//! served (ground truth).

use std::process::ExitCode;

/// `viewerfleet refsite`.
pub async fn cli_refsite(_args: crate::cli::RefsiteArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`viewerfleet refsite` is not available yet")
}
