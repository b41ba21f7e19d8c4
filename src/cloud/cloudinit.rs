//! Cloud-init user data for the hub and the viewer nodes, built from the files in `grid/`
//! (the same ones terraform/ uses): `node.env` with this server's settings, the Grid TOML
//! templates, `node-bootstrap.sh`, and — when given — the viewer-slot script, all delivered
//! with `write_files` and run once from `runcmd`.

use super::CloudError;
use serde_json::json;

const TEMPLATE: &str = include_str!("../../grid/cloud-init.yaml.tftpl");
const BOOTSTRAP: &str = include_str!("../../grid/node-bootstrap.sh");
const HUB_TOML: &str = include_str!("../../grid/hub.toml");
const NODE_TOML: &str = include_str!("../../grid/node.toml");

/// Hetzner's limit for `user_data`.
pub const USER_DATA_LIMIT: usize = 32 * 1024;

/// Where the files land on the server.
pub const LIB_DIR: &str = "/usr/local/lib/viewerfleet";

/// Per-viewer link shaping on a node (applied by the viewer-slot script).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SlotShaping {
    pub down_kbit: Option<u32>,
    pub up_kbit: Option<u32>,
    pub delay_ms: Option<u32>,
}

/// What one server is.
#[derive(Debug, Clone)]
pub enum Role {
    Hub,
    Node {
        /// The hub as it appears in a URL: `[2001:db8::1]`.
        hub_addr: String,
        max_sessions: u32,
        shaping: SlotShaping,
    },
}

/// Builds `#cloud-config` user data for `role`. `viewer_slots_script` is the text of
/// `grid/viewer-slots.sh` (installed next to the bootstrap, which runs it when present).
pub fn user_data(role: &Role, viewer_slots_script: Option<&str>) -> Result<String, CloudError> {
    let mut env = vec![format!(
        "ROLE={}",
        if matches!(role, Role::Hub) {
            "hub"
        } else {
            "node"
        }
    )];
    env.push("SELENIUM_NPM_PACKAGE=@nightwatch/selenium-server@4.20.0".into());
    env.push("SELENIUM_JAR=selenium-server-4.20.0.jar".into());
    env.push("CHROME_BINARY=/usr/lib/chromium/chromium".into());
    if let Role::Node {
        hub_addr,
        max_sessions,
        shaping,
    } = role
    {
        env.push(format!("HUB_ADDR={hub_addr}"));
        env.push(format!("MAX_SESSIONS={max_sessions}"));
        for (k, v) in [
            ("SLOT_DOWN_KBIT", shaping.down_kbit),
            ("SLOT_UP_KBIT", shaping.up_kbit),
            ("SLOT_DELAY_MS", shaping.delay_ms),
        ] {
            if let Some(v) = v {
                env.push(format!("{k}={v}"));
            }
        }
    }
    let file = |path: &str, perm: &str, content: &str| json!({"path": path, "owner": "root:root", "permissions": perm, "content": content});
    let mut files = vec![
        file(
            "/etc/viewerfleet/node.env",
            "0644",
            &(env.join("\n") + "\n"),
        ),
        file(&format!("{LIB_DIR}/node-bootstrap.sh"), "0755", BOOTSTRAP),
    ];
    match role {
        Role::Hub => files.push(file(&format!("{LIB_DIR}/hub.toml"), "0644", HUB_TOML)),
        Role::Node { .. } => {
            files.push(file(&format!("{LIB_DIR}/node.toml"), "0644", NODE_TOML));
            if let Some(script) = viewer_slots_script {
                files.push(file(&format!("{LIB_DIR}/viewer-slots.sh"), "0755", script));
            }
        }
    }
    let config = json!({
        "write_files": files,
        "runcmd": [[format!("{LIB_DIR}/node-bootstrap.sh")]],
    });
    let yaml = yaml_serde::to_string(&config).map_err(|e| CloudError::Invalid {
        field: "user_data".into(),
        message: format!("cannot encode cloud-init YAML: {e}"),
    })?;
    let text = TEMPLATE.replace("${cloud_config}", yaml.trim_end());
    if text.len() > USER_DATA_LIMIT {
        return Err(CloudError::Invalid {
            field: "user_data".into(),
            message: format!("cloud-init user data is {} bytes, above Hetzner's 32 KiB; shorten grid/viewer-slots.sh", text.len()),
        });
    }
    Ok(text)
}
