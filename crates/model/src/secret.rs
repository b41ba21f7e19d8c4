//! Secrets, as the rest of the tool holds them: a string that is serialised as it is (for
//! files of mode 0600) but never shown by `Debug`, and the user name and password of a
//! Selenium Grid's router (see `grid::auth` for how Grids get and use them).

use base64::Engine as _;
use http::HeaderValue;
use serde::{Deserialize, Serialize};

/// The user name of an external Grid's router (with [`PASSWORD_ENV`]).
pub const USER_ENV: &str = "VIEWERFLEET_GRID_USER";
/// The password of an external Grid's router (with [`USER_ENV`]).
pub const PASSWORD_ENV: &str = "VIEWERFLEET_GRID_PASSWORD";

/// A secret string: serialised as it is (for 0600 files), shown as `<redacted>`.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// 32 bytes from the operating system's random number generator, as 64 hex digits
    /// (safe in TOML strings, shell assignments and HCL without quoting).
    pub fn generate() -> Self {
        use rand::RngCore as _;
        let mut bytes = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        Self(hex::encode(bytes))
    }

    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that must write or send it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The user name and password the controller sends to a Grid's router.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GridCredentials {
    pub username: String,
    pub password: Secret,
}

/// `VIEWERFLEET_GRID_USER` / `VIEWERFLEET_GRID_PASSWORD` set one without the other, or
/// with a colon in the user name (which basic authentication cannot carry).
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("{set} is set but {unset} is not: a Grid with basic authentication takes both (unset both for a Grid without a password)")]
    Half {
        set: &'static str,
        unset: &'static str,
    },
    #[error("{USER_ENV} holds a colon, which basic authentication cannot carry in a user name; use a user name without one")]
    Colon,
}

impl GridCredentials {
    /// Credentials from [`USER_ENV`] and [`PASSWORD_ENV`]; `None` when neither is set.
    pub fn from_env() -> Result<Option<Self>, CredentialsError> {
        Self::from_values(
            std::env::var(USER_ENV).ok().filter(|v| !v.is_empty()),
            std::env::var(PASSWORD_ENV).ok().filter(|v| !v.is_empty()),
        )
    }

    /// As [`Self::from_env`], from the two values.
    pub fn from_values(
        user: Option<String>,
        password: Option<String>,
    ) -> Result<Option<Self>, CredentialsError> {
        match (user, password) {
            (None, None) => Ok(None),
            (Some(_), None) => Err(CredentialsError::Half {
                set: USER_ENV,
                unset: PASSWORD_ENV,
            }),
            (None, Some(_)) => Err(CredentialsError::Half {
                set: PASSWORD_ENV,
                unset: USER_ENV,
            }),
            (Some(user), Some(_)) if user.contains(':') => Err(CredentialsError::Colon),
            (Some(username), Some(password)) => Ok(Some(Self {
                username,
                password: Secret(password),
            })),
        }
    }

    /// The `Authorization` header value, marked sensitive (HTTP/2 never indexes it, and
    /// `Debug` of the header map does not show it).
    pub fn header(&self) -> HeaderValue {
        let token = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            self.username,
            self.password.expose()
        ));
        let mut value =
            HeaderValue::from_str(&format!("Basic {token}")).expect("base64 is a valid header");
        value.set_sensitive(true);
        value
    }
}
