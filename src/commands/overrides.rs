//! The one conversion from the override flags (`cli::ScaleArgs`, `cli::SwarmArgs`) to the
//! scenario's `Overrides`: the flags are read once here, and what they cannot mean
//! together is refused here, before any scenario is read.

use crate::cli::{ScaleArgs, SwarmArgs, ViewerCountArg};
use crate::model::exit::bad_input;
use crate::model::scenario::{Overrides, ViewersOverride};

impl ScaleArgs {
    /// `--viewers` and `--max-viewers` as one `ViewersOverride`: a maximum bounds a governed
    /// ramp, so it goes with `--viewers auto` or a file's `count: auto`, never `--viewers N`.
    pub fn viewers(&self) -> anyhow::Result<ViewersOverride> {
        let max = self.max_viewers;
        match self.viewers {
            None => Ok(ViewersOverride::AsWritten { max }),
            Some(ViewerCountArg::Auto) => Ok(ViewersOverride::Auto { max }),
            Some(ViewerCountArg::Count(n)) if max.is_none() => Ok(ViewersOverride::Fixed(n)),
            Some(ViewerCountArg::Count(n)) => Err(bad_input(anyhow::anyhow!(
                "--max-viewers bounds a governed ramp: use it with --viewers auto or a file's `count: auto`, not with --viewers {n}"
            ))),
        }
    }

    /// The scenario's overrides these flags and `swarm`'s make; the command adds its own
    /// (`--fleet`, `--apply`, `--canary`) with `..`.
    pub fn overrides(&self, swarm: &SwarmArgs) -> anyhow::Result<Overrides> {
        Ok(Overrides {
            viewers: self.viewers()?,
            duration: self.duration,
            per_browser: swarm.per_browser,
            light_peers: swarm.light_peers,
            light_runtime: swarm.light_runtime,
            ..Overrides::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scale(viewers: Option<ViewerCountArg>, max_viewers: Option<u32>) -> ScaleArgs {
        ScaleArgs {
            viewers,
            max_viewers,
            duration: None,
        }
    }

    #[test]
    fn a_maximum_goes_with_a_governed_ramp_only() {
        let of = |v, m| scale(v, m).viewers().map_err(|e| e.to_string());
        assert_eq!(of(None, None), Ok(ViewersOverride::default()));
        assert_eq!(
            of(None, Some(9)),
            Ok(ViewersOverride::AsWritten { max: Some(9) })
        );
        assert_eq!(
            of(Some(ViewerCountArg::Auto), Some(9)),
            Ok(ViewersOverride::Auto { max: Some(9) })
        );
        assert_eq!(
            of(Some(ViewerCountArg::Count(4)), None),
            Ok(ViewersOverride::Fixed(4))
        );
        let err = of(Some(ViewerCountArg::Count(4)), Some(9)).unwrap_err();
        assert!(err.contains("not with --viewers 4"), "{err}");
    }
}
