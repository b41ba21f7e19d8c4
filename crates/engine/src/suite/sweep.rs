//! `suite --swarm-sizes 4,16,64,256`: every scenario (and every `--apply` mode) once per
//! swarm size N, its real viewers kept (`viewers.count`) and N − viewers light peers beside
//! them, so the comparison can show how P2P offload grows with the swarm
//! (`report::swarm_curve`). A run is named `<scenario>[@<mode>]@<N>`.

use super::SuiteError;
use crate::model::scenario::{Overrides, Plan};
use crate::report::swarm_curve::SwarmPoint;
use anyhow::Context;
use std::path::{Path, PathBuf};

/// The swarm sizes of a sweep: positive, ascending, each once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepSizes(Vec<u32>);

impl SweepSizes {
    /// The sizes, ascending.
    pub fn sizes(&self) -> &[u32] {
        &self.0
    }
}

impl std::str::FromStr for SweepSizes {
    type Err = String;

    /// A comma list of positive whole numbers, in any order, repeats allowed: `4,16,64,256`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let usage = |why: String| {
            format!(
                "--swarm-sizes `{text}`: {why}; give a comma list of swarm sizes (each the scenario's viewers plus light peers), e.g. --swarm-sizes 4,16,64,256"
            )
        };
        let mut sizes = Vec::new();
        for item in text.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(usage("an empty size".into()));
            }
            let size: u32 = item
                .parse()
                .map_err(|_| usage(format!("`{item}` is not a whole number")))?;
            if size == 0 {
                return Err(usage("a swarm of 0".into()));
            }
            sizes.push(size);
        }
        sizes.sort_unstable();
        sizes.dedup();
        Ok(Self(sizes))
    }
}

/// A sweep the scenarios cannot make (a `SuiteError`, so the suite exits 2).
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("{file}: --swarm-sizes keeps each scenario's real viewers and fills the swarm with light peers, so it needs a number of viewers, not `auto` ({given}): {fix}")]
    AutoViewers {
        file: PathBuf,
        /// Where `auto` came from: `--viewers auto` or `viewers.count: auto`.
        given: &'static str,
        fix: &'static str,
    },
    #[error("--swarm-sizes {size}: {file} runs {viewers} real viewers, more than a swarm of {size}: give sizes of at least {viewers}, or fewer viewers with --viewers")]
    BelowViewers {
        file: PathBuf,
        size: u32,
        viewers: u32,
    },
}

/// One scenario (one mode) at one swarm size.
#[derive(Debug, Clone)]
pub struct Sized {
    pub name: String,
    pub overrides: Overrides,
    pub plan: Plan,
    pub swarm: SwarmPoint,
}

/// The scenario `series` (a file stem, `@<mode>` when the suite runs modes), whose plan
/// with `overrides` is `plan`, once per size: its viewers and size − viewers light peers.
pub(crate) fn expand(
    series: &str,
    path: &Path,
    overrides: &Overrides,
    plan: &Plan,
    sizes: &SweepSizes,
) -> anyhow::Result<Vec<Sized>> {
    if plan.auto.is_some() {
        let (given, fix) = if overrides.viewers.is_auto() {
            ("--viewers auto", "give --viewers N instead")
        } else {
            (
                "viewers.count: auto",
                "write a number in viewers.count, or give --viewers N",
            )
        };
        let err = SweepError::AutoViewers {
            file: path.to_path_buf(),
            given,
            fix,
        };
        return Err(SuiteError::from(err).into());
    }
    let viewers = plan.viewers;
    if let Some(&size) = sizes.sizes().iter().find(|&&n| n < viewers) {
        let err = SweepError::BelowViewers {
            file: path.to_path_buf(),
            size,
            viewers,
        };
        return Err(SuiteError::from(err).into());
    }
    sizes
        .sizes()
        .iter()
        .map(|&size| {
            let light = size - viewers;
            let overrides = Overrides {
                light_peers: Some(light),
                ..overrides.clone()
            };
            let plan = crate::model::scenario::load(path, &overrides).with_context(|| {
                format!(
                    "--swarm-sizes {size}: {} with {viewers} viewers and {light} light peers",
                    path.display()
                )
            })?;
            Ok(Sized {
                name: format!("{series}@{size}"),
                overrides,
                plan,
                swarm: SwarmPoint::new(series, viewers, light),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_a_sorted_comma_list_of_positive_numbers_each_once() {
        let sizes: SweepSizes = "64, 4,16,4,256".parse().unwrap();
        assert_eq!(sizes.sizes(), [4, 16, 64, 256]);
        assert_eq!("7".parse::<SweepSizes>().unwrap().sizes(), [7]);
        for (bad, why) in [
            ("", "an empty size"),
            ("4,,16", "an empty size"),
            ("4,", "an empty size"),
            ("4,x", "`x` is not a whole number"),
            ("-4", "`-4` is not a whole number"),
            ("2.5", "`2.5` is not a whole number"),
            ("0,4", "a swarm of 0"),
            ("99999999999", "is not a whole number"),
        ] {
            let err = bad.parse::<SweepSizes>().unwrap_err();
            assert!(
                err.starts_with("--swarm-sizes")
                    && err.contains(why)
                    && err.contains("4,16,64,256"),
                "{bad}: {err}"
            );
        }
    }
}
