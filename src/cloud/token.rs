//! The Hetzner API token: read from `HCLOUD_TOKEN` or a file, and kept out of every log line,
//! `Debug` output, report and manifest (its `Debug` prints `<redacted>`, it has no `Display`).

use super::CloudError;
use std::path::Path;

/// A secret API token. Only [`ApiToken::expose`] gives the text, for the `Authorization` header.
#[derive(Clone)]
pub struct ApiToken(String);

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiToken(<redacted>)")
    }
}

impl ApiToken {
    pub fn new(text: impl Into<String>) -> Result<ApiToken, CloudError> {
        let text = text.into().trim().to_string();
        if text.is_empty() {
            return Err(CloudError::NoToken);
        }
        Ok(ApiToken(text))
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// `HCLOUD_TOKEN` if set and not empty, else the first line of `token_file`.
    pub fn load(token_file: Option<&str>) -> Result<ApiToken, CloudError> {
        if let Ok(text) = std::env::var("HCLOUD_TOKEN") {
            if !text.trim().is_empty() {
                return ApiToken::new(text);
            }
        }
        let Some(path) = token_file else {
            return Err(CloudError::NoToken);
        };
        let path = expand_home(path);
        let text = std::fs::read_to_string(&path).map_err(|err| CloudError::TokenFile {
            path: path.display().to_string(),
            message: err.to_string(),
        })?;
        ApiToken::new(text.lines().next().unwrap_or_default()).map_err(|_| CloudError::TokenFile {
            path: path.display().to_string(),
            message: "the file is empty; put the token on its first line".into(),
        })
    }
}

/// `~/x` → `$HOME/x`.
pub(crate) fn expand_home(path: &str) -> std::path::PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => path.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_token() {
        let token = ApiToken::new("s3cr3t-token-value\n").unwrap();
        assert_eq!(format!("{token:?}"), "ApiToken(<redacted>)");
        assert_eq!(token.expose(), "s3cr3t-token-value");
        assert!(ApiToken::new("  ").is_err());
    }
}
