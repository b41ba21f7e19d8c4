//! ChromeDriver's vendor endpoints as fantoccini commands: network conditions and raw CDP.
//! Both also work through Selenium Grid 4, which forwards them to the node's driver.

use crate::model::scenario::LinkProfile;
use fantoccini::wd::WebDriverCompatibleCommand;
use url::{ParseError, Url};

/// `POST /session/{id}/chromium/network_conditions`. Throughputs are in bytes/s.
#[derive(Debug)]
pub(crate) struct NetworkConditions {
    pub latency_ms: u32,
    pub download_bytes_per_s: u64,
    pub upload_bytes_per_s: u64,
}

impl NetworkConditions {
    /// kbit/s in the scenario → bytes/s for Chromium (1 kbit = 1000 bit). An unset
    /// direction is left unthrottled (-1 in Chromium's terms is expressed by a huge value).
    pub(crate) fn from_link(p: &LinkProfile) -> Self {
        let bytes = |kbps: Option<u32>| kbps.map(|k| k as u64 * 1000 / 8).unwrap_or(0);
        Self {
            latency_ms: p.latency_ms.unwrap_or(0),
            download_bytes_per_s: bytes(p.download_kbps),
            upload_bytes_per_s: bytes(p.upload_kbps),
        }
    }
}

impl WebDriverCompatibleCommand for NetworkConditions {
    fn endpoint(&self, base: &Url, session: Option<&str>) -> Result<Url, ParseError> {
        base.join(&format!(
            "session/{}/chromium/network_conditions",
            session.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _url: &Url) -> (http::Method, Option<String>) {
        // ChromeDriver treats a throughput of 0 as "no limit" only in CDP; here -1 would be
        // rejected, so an unset direction gets a very large limit instead.
        let limit = |v: u64| if v == 0 { 1_000_000_000 } else { v };
        let body = serde_json::json!({
            "network_conditions": {
                "offline": false,
                "latency": self.latency_ms,
                "download_throughput": limit(self.download_bytes_per_s),
                "upload_throughput": limit(self.upload_bytes_per_s),
            }
        });
        (http::Method::POST, Some(body.to_string()))
    }
}

/// `POST /session/{id}/goog/cdp/execute`: one Chrome DevTools Protocol command.
#[derive(Debug)]
pub(crate) struct CdpCommand {
    method: String,
    params: serde_json::Value,
}

impl CdpCommand {
    pub fn new(method: &str, params: serde_json::Value) -> Self {
        Self {
            method: method.to_string(),
            params,
        }
    }
}

impl WebDriverCompatibleCommand for CdpCommand {
    fn endpoint(&self, base: &Url, session: Option<&str>) -> Result<Url, ParseError> {
        base.join(&format!(
            "session/{}/goog/cdp/execute",
            session.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _url: &Url) -> (http::Method, Option<String>) {
        let body = serde_json::json!({ "cmd": self.method, "params": self.params });
        (http::Method::POST, Some(body.to_string()))
    }
}

/// URL pattern of the HTTP-only throttling rule: every scheme (http, https, ws, wss), host,
/// port (default ones included), path and query. Measured against Chromium 156: `*://*/*`
/// matches default ports only, `*` nothing, and the empty pattern WebRTC data channels
/// too; a pattern that matches nothing is accepted silently.
pub(crate) const HTTP_URL_PATTERN: &str = "*://*:*";

/// The CDP parameters that throttle HTTP(S) and WebSocket requests only
/// (`Network.emulateNetworkConditionsByRule`, after `Network.enable`, which the rule needs
/// and which must stay enabled: `Network.disable` removes the throttling). Latency applies
/// to every request; throughputs are shared by all of a page's requests. `None` for a
/// direction means not throttled.
pub(crate) fn http_only_rules(
    latency_ms: u32,
    download_bytes_per_s: Option<u64>,
    upload_bytes_per_s: Option<u64>,
) -> serde_json::Value {
    // -1: no limit in that direction (CDP's convention).
    let throughput = |v: Option<u64>| v.map_or(-1i64, |b| b as i64);
    serde_json::json!({ "offline": false, "matchedNetworkConditions": [{
        "urlPattern": HTTP_URL_PATTERN,
        "latency": latency_ms,
        "downloadThroughput": throughput(download_bytes_per_s),
        "uploadThroughput": throughput(upload_bytes_per_s),
    }]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kbps_become_bytes_per_second() {
        let c = NetworkConditions::from_link(&LinkProfile {
            download_kbps: Some(2000),
            upload_kbps: Some(300),
            latency_ms: Some(500),
        });
        assert_eq!(c.download_bytes_per_s, 250_000);
        assert_eq!(c.upload_bytes_per_s, 37_500);
        let base = Url::parse("http://127.0.0.1:9515/").unwrap();
        assert_eq!(
            c.endpoint(&base, Some("abc")).unwrap().as_str(),
            "http://127.0.0.1:9515/session/abc/chromium/network_conditions"
        );
        let (_, body) = c.method_and_body(&base);
        let body: serde_json::Value = serde_json::from_str(&body.unwrap()).unwrap();
        assert_eq!(body["network_conditions"]["download_throughput"], 250_000);
        assert_eq!(body["network_conditions"]["latency"], 500);
    }

    #[test]
    fn http_only_rule_covers_every_url_and_leaves_an_unset_direction_free() {
        let rules = http_only_rules(500, Some(250_000), None);
        let list = rules["matchedNetworkConditions"].as_array().unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0]["urlPattern"], "*://*:*");
        assert_eq!(list[0]["downloadThroughput"], 250_000);
        assert_eq!(list[0]["uploadThroughput"], -1);
        assert_eq!(list[0]["latency"], 500);
        assert_eq!(rules["offline"], false);
    }
}
