//! Fleet `netns`: one machine emulating many hosts. Each viewer runs in its own network
//! namespace (slot) with its own IPv6 address and a tc-shaped link, so HTTP and WebRTC are
//! shaped alike; the target runs in a namespace of its own on the same bridge.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NetnsFleetSpec {}

impl NetnsFleetSpec {
    pub fn validate(&self, _viewers: u32) -> Result<(), (String, String)> {
        Err((
            "kind".into(),
            "the netns fleet is not available yet; use `kind: local`".into(),
        ))
    }
}
