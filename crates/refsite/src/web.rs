//! Where the player page's files come from: the copy built into the binary (when
//! `web/node_modules` was installed at build time, see `build.rs`), or a `web/` folder —
//! `--web`/`VIEWERFLEET_WEB`, or the source tree's when the binary carries none. Only the
//! files `page::servable_web_path` allows are served either way.

use super::RefsiteError;
use std::borrow::Cow;
use std::path::{Path, PathBuf};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/web_files.rs"));
}

/// The files the page needs, relative to `web/`: the template, the player and the three
/// npm packages' files its import map names.
const NEEDED: [&str; 8] = [
    "embed.html",
    "light.html",
    "player.js",
    "light.js",
    "p2p-config.js",
    "node_modules/hls.js/dist/hls.mjs",
    "node_modules/p2p-media-loader-core/dist/p2p-media-loader-core.es.min.js",
    "node_modules/p2p-media-loader-hlsjs/dist/p2p-media-loader-hlsjs.es.min.js",
];

/// The player page's files.
#[derive(Debug, Clone, PartialEq)]
pub enum WebFiles {
    /// Built into this binary.
    Embedded,
    /// A `web/` folder.
    Dir(PathBuf),
}

impl WebFiles {
    /// The built-in copy when the binary carries one, else the source tree's `web/`.
    pub fn built_in() -> Self {
        if embedded::EMBEDDED.is_some() {
            WebFiles::Embedded
        } else {
            WebFiles::Dir(super::default_web_dir())
        }
    }

    /// Checks that every file the page needs is there, before anything is started.
    pub fn check(&self) -> Result<(), RefsiteError> {
        match self {
            WebFiles::Embedded => Ok(()),
            WebFiles::Dir(dir) => match NEEDED.iter().map(|f| dir.join(f)).find(|p| !p.is_file()) {
                Some(missing) => Err(RefsiteError::WebDeps(missing)),
                None => Ok(()),
            },
        }
    }

    /// A file by its `web/`-relative path.
    pub async fn read(&self, path: &str) -> std::io::Result<Cow<'static, [u8]>> {
        match self {
            WebFiles::Embedded => embedded::EMBEDDED
                .and_then(|files| files.iter().find(|(p, _)| *p == path))
                .map(|(_, bytes)| Cow::Borrowed(*bytes))
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound)),
            WebFiles::Dir(dir) => Ok(Cow::Owned(tokio::fs::read(dir.join(path)).await?)),
        }
    }

    /// Where the files come from, for the start-up message.
    pub fn describe(&self) -> String {
        match self {
            WebFiles::Embedded => "built into this binary".into(),
            WebFiles::Dir(dir) => dir.display().to_string(),
        }
    }

    /// The folder, when the files come from one.
    pub fn dir(&self) -> Option<&Path> {
        match self {
            WebFiles::Dir(dir) => Some(dir),
            WebFiles::Embedded => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_built_in_copy_serves_what_the_source_tree_holds() {
        // This crate's tests are built with `web/node_modules` installed (`make test`).
        assert_eq!(WebFiles::built_in(), WebFiles::Embedded);
        let source = WebFiles::Dir(super::super::default_web_dir());
        for file in NEEDED {
            let (a, b) = (WebFiles::Embedded.read(file).await, source.read(file).await);
            assert_eq!(a.unwrap(), b.unwrap(), "{file}");
        }
        assert!(WebFiles::Embedded.read("package.json").await.is_err());
    }

    #[test]
    fn a_folder_without_the_packages_is_refused_naming_the_missing_file() {
        let empty = tempfile::tempdir().unwrap();
        let err = WebFiles::Dir(empty.path().to_path_buf())
            .check()
            .unwrap_err();
        assert!(err.to_string().contains("embed.html"), "{err}");
        assert!(err.to_string().contains("make web-deps"), "{err}");
    }
}
