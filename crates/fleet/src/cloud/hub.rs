//! Waiting for viewer nodes to register with the Selenium hub, by polling the hub's
//! `GET /status` (Selenium Grid 4: `value.nodes[].uri` and `availability`) and matching each
//! node's URI to a server's /64.

use super::provision::ServerInfo;
use super::CloudError;
use std::collections::BTreeSet;
use std::net::Ipv6Addr;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Environment variable naming another hub URL (for dry runs with `viewerfleet fake-hcloud`,
/// or a tunnel: `http://127.0.0.1:4444/`). A fleet of several hubs reaches each at the URL
/// with `{hub}` replaced by the hub's server name (`http://127.0.0.1:8089/hubs/{hub}/`),
/// or at the hub's entry of a comma-separated list (one tunnel each).
pub const HUB_URL_ENV: &str = "VIEWERFLEET_HCLOUD_HUB_URL";

/// The hub's WebDriver URL (ends in `/`); `override_url` replaces it (a tunnel, a dry run).
pub fn hub_url(hub: &ServerInfo, override_url: Option<&str>) -> String {
    if let Some(url) = override_url.map(str::trim).filter(|u| !u.is_empty()) {
        let url = url.to_string();
        return if url.ends_with('/') { url } else { url + "/" };
    }
    match (&hub.ipv4, hub.ipv6_host()) {
        (Some(v4), _) => format!("http://{v4}:{}/", super::provision::HUB_PORT),
        (None, Some(v6)) => format!("http://[{v6}]:{}/", super::provision::HUB_PORT),
        (None, None) => String::new(),
    }
}

/// Every hub's WebDriver URL, in order (see `HUB_URL_ENV` for the override's forms).
pub fn hub_urls(hubs: &[ServerInfo], override_url: Option<&str>) -> Vec<String> {
    let list: Vec<&str> = override_url
        .map(|u| {
            u.split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .collect()
        })
        .unwrap_or_default();
    hubs.iter()
        .enumerate()
        .map(|(k, hub)| match list.as_slice() {
            [] => hub_url(hub, None),
            [one] => hub_url(hub, Some(&one.replace("{hub}", &hub.name))),
            many => hub_url(hub, Some(&many[k % many.len()].replace("{hub}", &hub.name))),
        })
        .collect()
}

fn in_net(addr: &Ipv6Addr, net: &str) -> bool {
    let Some(base) = net
        .split('/')
        .next()
        .and_then(|b| b.parse::<Ipv6Addr>().ok())
    else {
        return false;
    };
    u128::from(*addr) >> 64 == u128::from(base) >> 64
}

/// Names of `nodes` that the hub lists as UP, from one `/status` answer.
pub fn registered(status: &serde_json::Value, nodes: &[ServerInfo]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for node in status["value"]["nodes"].as_array().into_iter().flatten() {
        if node["availability"].as_str().is_some_and(|a| a != "UP") {
            continue;
        }
        let Some(uri) = node["uri"].as_str() else {
            continue;
        };
        let host = uri.split("//").nth(1).unwrap_or_default();
        let Some(addr) = host
            .strip_prefix('[')
            .and_then(|h| h.split(']').next())
            .and_then(|h| h.parse::<Ipv6Addr>().ok())
        else {
            continue;
        };
        for server in nodes {
            if server
                .ipv6_net
                .as_deref()
                .is_some_and(|net| in_net(&addr, net))
            {
                out.insert(server.name.clone());
            }
        }
    }
    out
}

/// Polls the hubs (with the controller's router credentials) until every node registered with one of them, `timeout` passed (returns
/// who did) or `cancel`.
pub(crate) async fn wait_for_nodes(
    hub_urls: &[String],
    credentials: &crate::grid::auth::GridCredentials,
    nodes: &[ServerInfo],
    timeout: Duration,
    interval: Duration,
    cancel: &CancellationToken,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<BTreeSet<String>, CloudError> {
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::AUTHORIZATION, credentials.header());
    let client = crate::sys::tls::http_client_builder()
        .timeout(Duration::from_secs(10))
        .default_headers(headers)
        .build()
        .unwrap_or_default();
    let deadline = tokio::time::Instant::now() + timeout;
    let mut seen = BTreeSet::new();
    let mut last = usize::MAX;
    loop {
        for hub_url in hub_urls {
            if let Ok(resp) = client.get(format!("{hub_url}status")).send().await {
                if let Ok(status) = resp.json::<serde_json::Value>().await {
                    seen.extend(registered(&status, nodes));
                }
            }
        }
        if seen.len() != last {
            last = seen.len();
            progress(seen.len(), nodes.len());
        }
        if seen.len() >= nodes.len() || tokio::time::Instant::now() >= deadline {
            return Ok(seen);
        }
        tokio::select! {
            _ = cancel.cancelled() => return Err(CloudError::Cancelled),
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_nodes_by_their_64() {
        let nodes = vec![
            ServerInfo {
                id: 1,
                name: "n1".into(),
                ipv4: None,
                ipv6_net: Some("2001:db8:0:a::/64".into()),
                labels: Default::default(),
            },
            ServerInfo {
                id: 2,
                name: "n2".into(),
                ipv4: None,
                ipv6_net: Some("2001:db8:0:b::/64".into()),
                labels: Default::default(),
            },
        ];
        let status = serde_json::json!({"value": {"nodes": [
            {"uri": "http://[2001:db8:0:a::1]:5555", "availability": "UP"},
            {"uri": "http://[2001:db8:0:b::1]:5555", "availability": "DOWN"},
            {"uri": "http://[2001:db8:0:c::1]:5555", "availability": "UP"}
        ]}});
        assert_eq!(
            registered(&status, &nodes).into_iter().collect::<Vec<_>>(),
            vec!["n1"]
        );
    }

    #[test]
    fn each_hub_is_reached_at_its_own_url() {
        let hub = |name: &str, v4: &str| ServerInfo {
            id: 1,
            name: name.into(),
            ipv4: Some(v4.into()),
            ipv6_net: None,
            labels: Default::default(),
        };
        let hubs = [
            hub("vf-r-hub", "203.0.113.1"),
            hub("vf-r-hub-2", "203.0.113.2"),
        ];
        assert_eq!(
            hub_urls(&hubs, None),
            ["http://203.0.113.1:4444/", "http://203.0.113.2:4444/"]
        );
        assert_eq!(
            hub_urls(&hubs, Some("http://127.0.0.1:8089/hubs/{hub}")),
            [
                "http://127.0.0.1:8089/hubs/vf-r-hub/",
                "http://127.0.0.1:8089/hubs/vf-r-hub-2/"
            ]
        );
        assert_eq!(
            hub_urls(
                &hubs,
                Some("http://127.0.0.1:4444/, http://127.0.0.1:4445/")
            ),
            ["http://127.0.0.1:4444/", "http://127.0.0.1:4445/"]
        );
    }
}
