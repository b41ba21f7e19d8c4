//! `fleet: kind: grid`: any Selenium Grid 4, by hub URL or a Terraform inventory file.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Defaults of the retry policy.
pub(crate) const DEFAULT_MAX_PARALLEL: u32 = 4;

/// How long a viewer holds its start permit (`max_parallel_starts`): from its session
/// request to its first frame — the session (≤ 5 s) and the player's time to first frame
/// (≈ 11 s measured by `calibrate` under the 2023 conditions).
pub const START_HOLD_S: f64 = 16.0;

/// `max_parallel_starts` a Grid fleet gets unless the scenario sets it: enough requests in
/// flight for the ramp's arrival rate (viewers per second × `START_HOLD_S`), from the
/// default up to 256. With too few, the fleet — not the hub — falls behind the ramp: 4 in
/// flight started 2.9 viewers/s where a 1000-viewer ramp of 120 s asks 8.3 (BENCHMARKS.md).
pub(crate) fn parallel_starts_for(viewers: u32, ramp: std::time::Duration) -> usize {
    let rate = f64::from(viewers) / ramp.as_secs_f64().max(1.0);
    ((rate * START_HOLD_S).ceil() as u32).clamp(DEFAULT_MAX_PARALLEL, 256) as usize
}
pub(crate) const DEFAULT_RETRIES: u32 = 6;
pub(crate) const DEFAULT_BACKOFF: &str = "2s";

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GridFleetSpec {
    /// Hub URL of any Selenium Grid 4, e.g. `http://127.0.0.1:4444/`.
    #[serde(default)]
    pub url: Option<String>,
    /// Instead of `url`: a JSON/YAML file listing hub URLs (Terraform's output).
    #[serde(default)]
    pub inventory: Option<PathBuf>,
    /// Session requests in flight at once [default: what the ramp's arrival rate needs,
    /// viewers per second × 16 s, at least 4 and at most 256]. Each is held until its
    /// viewer's first frame; the Grid queues what its nodes cannot take yet.
    #[serde(default)]
    pub max_parallel_starts: Option<u32>,
    /// Attempts after a refused session (`SessionNotCreated`, queue timeout) [default: 6].
    #[serde(default)]
    pub session_retries: Option<u32>,
    /// First wait before a retry; doubles each time, at most 60 s, each wait jittered
    /// (drawn from its upper half) [default: 2s].
    #[serde(default)]
    pub retry_backoff: Option<String>,
    /// Re-create viewers whose node was lost mid-run, when the Grid has capacity
    /// [default: true].
    #[serde(default)]
    pub recreate_lost: Option<bool>,
}

/// Where a Grid fleet finds its hubs.
#[derive(Debug, Clone, PartialEq)]
pub enum GridHubs {
    /// One hub, its URL checked and ending in `/`.
    Url(String),
    /// A file written by Terraform or `viewerfleet up`, read when the fleet starts.
    Inventory(PathBuf),
    /// Several hubs, each URL checked and ending in `/` (a cloud fleet split over hubs).
    Urls(Vec<String>),
}

/// `fleet: kind: grid`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct GridFleetPlan {
    pub hubs: GridHubs,
    pub max_parallel_starts: usize,
    pub session_retries: u32,
    pub retry_backoff: Duration,
    pub recreate_lost: bool,
    /// The hubs' router credentials, when the Grid was made by this tool (a cloud run);
    /// `None`: a local Grid's own, else `VIEWERFLEET_GRID_USER`/`_PASSWORD`, else none.
    pub credentials: Option<crate::secret::GridCredentials>,
}

impl GridFleetPlan {
    /// A Grid fleet on one hub with the default policy.
    pub fn with_url(url: &str) -> Result<Self, String> {
        GridFleetSpec {
            url: Some(url.to_string()),
            ..Default::default()
        }
        .plan()
        .map_err(|(_, message)| message)
    }

    /// A Grid fleet over several hubs with the default policy.
    pub fn with_urls(urls: &[String]) -> Result<Self, String> {
        let mut plan = Self::with_url(urls.first().ok_or("no hub URL")?)?;
        if urls.len() > 1 {
            plan.hubs = GridHubs::Urls(
                urls.iter()
                    .map(|u| check_hub_url(u))
                    .collect::<Result<_, _>>()?,
            );
        }
        Ok(plan)
    }
}

impl GridFleetSpec {
    pub fn plan(&self) -> Result<GridFleetPlan, (String, String)> {
        let hubs = match (&self.url, &self.inventory) {
            (None, None) => return Err((
                "url".into(),
                "give the hub's URL (e.g. `url: http://127.0.0.1:4444/`) or an `inventory` file"
                    .into(),
            )),
            (Some(_), Some(_)) => {
                return Err((
                    "inventory".into(),
                    "give either `url` or `inventory`, not both".into(),
                ))
            }
            (Some(url), None) => {
                GridHubs::Url(check_hub_url(url).map_err(|m| ("url".to_string(), m))?)
            }
            (None, Some(path)) => GridHubs::Inventory(path.clone()),
        };
        if self.max_parallel_starts == Some(0) {
            return Err(("max_parallel_starts".into(), "must be at least 1".into()));
        }
        let backoff = self.retry_backoff.as_deref().unwrap_or(DEFAULT_BACKOFF);
        let retry_backoff = humantime::parse_duration(backoff).map_err(|e| {
            (
                "retry_backoff".to_string(),
                format!("`{backoff}` is not a duration ({e}); write e.g. 2s or 500ms"),
            )
        })?;
        Ok(GridFleetPlan {
            hubs,
            max_parallel_starts: self.max_parallel_starts.unwrap_or(DEFAULT_MAX_PARALLEL) as usize,
            session_retries: self.session_retries.unwrap_or(DEFAULT_RETRIES),
            retry_backoff,
            recreate_lost: self.recreate_lost.unwrap_or(true),
            credentials: None,
        })
    }
}

/// A hub URL must be http(s) with a host; returned with a trailing `/` (fantoccini joins
/// paths onto it). `https://` hubs are reached over TLS with the system's roots (or
/// `SSL_CERT_FILE`'s), their BiDi sockets over `wss://`. Refused, with why: other schemes
/// (`ws://`, `wss://`: the hub's HTTP endpoint is wanted, its sockets follow from it),
/// credentials in the URL (they would be written to the manifest, the reports and the
/// logs, and no way to send them is built in), a query or a fragment (paths are joined
/// onto the URL).
pub(crate) fn check_hub_url(url: &str) -> Result<String, String> {
    let parsed = url::Url::parse(url)
        .map_err(|e| format!("`{url}` is not a URL ({e}); write e.g. http://127.0.0.1:4444/"))?;
    if matches!(parsed.scheme(), "ws" | "wss") {
        return Err(format!(
            "`{url}` is a WebSocket URL; give the hub's HTTP address (http:// or https://, e.g. https://grid.example:4444/): sessions are created over HTTP and their BiDi sockets (ws:// or wss://) follow from it"
        ));
    }
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
        return Err(format!(
            "`{url}` must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:4444/"
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!(
            "the hub URL for {} carries credentials (`user:password@`); viewerfleet cannot send them to a Grid, and it would write them into the manifest, the reports and the logs: put the hub behind a proxy that authenticates this machine instead, or reach it through an SSH tunnel",
            parsed.host_str().unwrap_or_default()
        ));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(format!(
            "`{url}` has a query or a fragment; give the hub's base URL (WebDriver paths such as session/… are joined onto it)"
        ));
    }
    let mut s = parsed.to_string();
    if !s.ends_with('/') {
        s.push('/');
    }
    Ok(s)
}

/// Hub URLs from an inventory file (see the module docs for the format).
pub fn read_inventory(path: &Path) -> anyhow::Result<Vec<String>> {
    // A regular file of at most 1 MiB: a device or a FIFO here would never end.
    let text = crate::rawdata::read_regular_file(path, 1024 * 1024)
        .and_then(|bytes| {
            String::from_utf8(bytes)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        })
        .map_err(|e| {
            anyhow::anyhow!(
                "fleet.inventory: cannot read {}: {e}; write it with `terraform output -json > {}`",
                path.display(),
                path.display()
            )
        })?;
    let value: serde_json::Value = yaml_serde::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "fleet.inventory: {} is neither JSON nor YAML: {e}",
            path.display()
        )
    })?;
    parse_inventory(&value).map_err(|m| anyhow::anyhow!("fleet.inventory: {}: {m}", path.display()))
}

fn parse_inventory(value: &serde_json::Value) -> Result<Vec<String>, String> {
    use serde_json::Value;
    let unwrap = |v: &Value| v.get("value").cloned().unwrap_or_else(|| v.clone());
    let urls: Vec<Value> = match value {
        Value::Array(items) => items.clone(),
        Value::Object(map) => match (map.get("hub_urls"), map.get("hub_url")) {
            (Some(list), _) => match unwrap(list) {
                Value::Array(items) => items,
                _ => return Err("`hub_urls` must be a list of URLs".into()),
            },
            (None, Some(one)) => vec![unwrap(one)],
            (None, None) => {
                return Err("expected a list of hub URLs, or an object with `hub_urls` or `hub_url` (terraform output -json)".into())
            }
        },
        _ => return Err("expected a list of hub URLs".into()),
    };
    if urls.is_empty() {
        return Err("lists no hub".into());
    }
    urls.iter()
        .map(|u| {
            u.as_str()
                .ok_or_else(|| format!("`{u}` is not a URL string"))
                .and_then(check_hub_url)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_or_inventory_is_required_and_checked() {
        let spec = GridFleetSpec::default();
        assert_eq!(spec.plan().unwrap_err().0, "url");
        let spec = GridFleetSpec {
            url: Some("localhost:4444".into()),
            ..Default::default()
        };
        let (field, msg) = spec.plan().unwrap_err();
        assert_eq!(field, "url");
        assert!(msg.contains("http://"), "{msg}");
        let spec = GridFleetSpec {
            url: Some("http://127.0.0.1:4444".into()),
            retry_backoff: Some("soon".into()),
            ..Default::default()
        };
        assert_eq!(spec.plan().unwrap_err().0, "retry_backoff");
        assert_eq!(
            check_hub_url("http://127.0.0.1:4444/wd/hub").unwrap(),
            "http://127.0.0.1:4444/wd/hub/"
        );
        assert_eq!(
            check_hub_url("https://grid.example:8443").unwrap(),
            "https://grid.example:8443/"
        );
    }

    #[test]
    fn hub_urls_that_cannot_work_are_refused_with_why() {
        let err = check_hub_url("https://me:s3cret@grid.example/").unwrap_err();
        assert!(err.contains("carries credentials"), "{err}");
        assert!(!err.contains("s3cret"), "the secret is not repeated: {err}");
        let err = check_hub_url("wss://grid.example/session/x/se/bidi").unwrap_err();
        assert!(err.contains("WebSocket URL"), "{err}");
        let err = check_hub_url("https://grid.example/?token=1").unwrap_err();
        assert!(err.contains("query"), "{err}");
        assert!(check_hub_url("ftp://grid.example/").is_err());
    }

    #[test]
    fn an_inventory_that_is_a_device_is_refused_not_read() {
        let err = read_inventory(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is a character device, not a regular file"),
            "{err}"
        );
    }

    #[test]
    fn inventories_from_terraform_or_plain_lists() {
        let tf = serde_json::json!({"hub_urls": {"sensitive": false, "type": ["list", "string"],
            "value": ["http://10.0.0.2:4444", "http://10.0.0.3:4444/"]}});
        assert_eq!(
            parse_inventory(&tf).unwrap(),
            vec!["http://10.0.0.2:4444/", "http://10.0.0.3:4444/"]
        );
        // `terraform output -json` of terraform/ (outputs `hub_url` and `inventory`).
        let tf_out = serde_json::json!({
            "hub_url": {"sensitive": false, "type": "string", "value": "http://1.2.3.4:4444/"},
            "inventory": {"value": {"run": "r", "hub_url": "http://1.2.3.4:4444/", "nodes": []}}});
        assert_eq!(
            parse_inventory(&tf_out).unwrap(),
            vec!["http://1.2.3.4:4444/"]
        );
        // The inventory object alone (what `viewerfleet up --inventory` writes).
        let inv = serde_json::json!({"run": "r", "hub_url": "http://1.2.3.4:4444/", "nodes": []});
        assert_eq!(parse_inventory(&inv).unwrap(), vec!["http://1.2.3.4:4444/"]);
        let one = serde_json::json!({"hub_url": {"value": "http://10.0.0.2:4444"}});
        assert_eq!(parse_inventory(&one).unwrap().len(), 1);
        let list: serde_json::Value = yaml_serde::from_str("- http://h:4444\n").unwrap();
        assert_eq!(parse_inventory(&list).unwrap(), vec!["http://h:4444/"]);
        assert!(parse_inventory(&serde_json::json!({"other": 1}))
            .unwrap_err()
            .contains("hub_urls"));
        assert!(parse_inventory(&serde_json::json!([])).is_err());
        assert!(parse_inventory(&serde_json::json!(["ftp://x"])).is_err());
    }
}
