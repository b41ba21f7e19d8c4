//! Fleet `grid`: any Selenium Grid 4 endpoint (docker-selenium, a dedicated server, the
//! project's own hub from `grid/`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GridFleetSpec {}

impl GridFleetSpec {
    pub fn validate(&self, _viewers: u32) -> Result<(), (String, String)> {
        Err((
            "kind".into(),
            "the grid fleet is not available yet; use `kind: local`".into(),
        ))
    }
}
