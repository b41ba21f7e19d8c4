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
        warn_if_readable_by_others(&path);
        let bytes = crate::model::rawdata::read_regular_file(&path, 64 << 10).map_err(|err| {
            CloudError::TokenFile {
                path: path.display().to_string(),
                message: err.to_string(),
            }
        })?;
        let text = String::from_utf8_lossy(&bytes);
        ApiToken::new(text.lines().next().unwrap_or_default()).map_err(|_| CloudError::TokenFile {
            path: path.display().to_string(),
            message: "the file is empty; put the token on its first line".into(),
        })
    }
}

/// A token file other users can read gives them the project: say so (and how to fix it).
fn warn_if_readable_by_others(path: &Path) {
    if let Some(message) = readable_by_others(path) {
        tracing::warn!("{message}");
    }
}

/// The warning for a token file with group or world permissions, if it has them.
pub(crate) fn readable_by_others(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| {
        format!(
            "the API token file {} has mode {mode:03o}: other users of this machine can read it and control the Hetzner project; run `chmod 600 {}`",
            path.display(),
            path.display()
        )
    })
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
    fn token_files_readable_by_others_are_named() {
        use std::os::unix::fs::PermissionsExt;
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "tok\n").unwrap();
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        let warning = readable_by_others(file.path()).unwrap();
        assert!(
            warning.contains("mode 644") && warning.contains("chmod 600"),
            "{warning}"
        );
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(readable_by_others(file.path()), None);
    }

    #[test]
    fn debug_never_shows_the_token() {
        let token = ApiToken::new("s3cr3t-token-value\n").unwrap();
        assert_eq!(format!("{token:?}"), "ApiToken(<redacted>)");
        assert_eq!(token.expose(), "s3cr3t-token-value");
        assert!(ApiToken::new("  ").is_err());
    }
}
