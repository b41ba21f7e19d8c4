//! Every exit code viewerfleet ends with, in one place (README, "Exit codes"), and the
//! categories an error carries up to `main` so that a script can tell "fix your input" from
//! "the outside world failed" from "a threshold failed".
//!
//! The codes follow what users know: `0` success; `1` the command did its work but part of
//! it failed (viewers beyond `max_failed_viewers`, a run of a suite, a folder of `compare`);
//! `2` bad input, as clap and most Unix tools use it for usage errors; `69` and `70` from
//! sysexits(3) (`EX_UNAVAILABLE`: a service is unavailable; `EX_SOFTWARE`: an internal
//! error); `74` (`EX_IOERR`) when a run stopped because it could not record; `78` (sysexits
//! `EX_CONFIG`) when `plan` finds no fleet within the scenario's `fleet.server_limit`; `99`
//! for failed thresholds, as k6 does; `128 + signal` when interrupted.
//!
//! An error says which category it belongs to by its type, found anywhere in its `anyhow`
//! chain: `ScenarioError`, a `BadInput` or an `Unavailable` wrapper (this module), the cloud
//! layer's `CloudError` (by variant), the report loader's `LoadError`. `commands::exit_for`
//! reads the chain; everything else is `Internal`.

use serde::Serialize;

/// How a command ended: its exit code and the category scripts read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// `0`: everything the command was asked to do was done, every threshold passed.
    Ok,
    /// `1`: done, but part of it failed: more viewers failed than `max_failed_viewers`
    /// allows (`run`), a run of a `suite`, a folder of `compare`, a viewer of `calibrate`.
    Failed,
    /// `2`: bad input: a usage error, an invalid scenario or file, a folder that is not a
    /// run folder, a missing token. Fix the input; running again unchanged fails again.
    BadInput,
    /// `69`: the outside world failed: the target never answered, a Grid or the Hetzner
    /// API refused or kept failing. The input may be fine; try again later or fix the
    /// service.
    Unavailable,
    /// `70`: neither: this machine (a tool missing, a full disk, no permission) or a bug.
    Internal,
    /// `74`: the run stopped because a record could not be written (a full disk, an I/O
    /// error); what was recorded before is kept and reported.
    RecordLost,
    /// `78`: `plan` found no fleet within `fleet.server_limit`, neither all real viewers nor
    /// a mix with light peers; it says the fewest servers that would fit.
    OverServerLimit,
    /// `99`: the run finished and at least one of the scenario's `thresholds` failed.
    ThresholdsFailed,
    /// `130` (SIGINT) or `143` (SIGTERM): interrupted; what was measured so far is kept.
    Interrupted { sigterm: bool },
}

impl Exit {
    pub const SUCCESS: u8 = 0;
    pub const FAILED: u8 = 1;
    pub(crate) const BAD_INPUT: u8 = 2;
    pub(crate) const UNAVAILABLE: u8 = 69;
    pub(crate) const INTERNAL: u8 = 70;
    pub(crate) const RECORD_LOST: u8 = 74;
    pub const OVER_SERVER_LIMIT: u8 = 78;
    pub const THRESHOLDS_FAILED: u8 = 99;
    pub const SIGINT: u8 = 130;
    pub const SIGTERM: u8 = 143;

    /// The process exit code.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Ok => Self::SUCCESS,
            Exit::Failed => Self::FAILED,
            Exit::BadInput => Self::BAD_INPUT,
            Exit::Unavailable => Self::UNAVAILABLE,
            Exit::Internal => Self::INTERNAL,
            Exit::RecordLost => Self::RECORD_LOST,
            Exit::OverServerLimit => Self::OVER_SERVER_LIMIT,
            Exit::ThresholdsFailed => Self::THRESHOLDS_FAILED,
            Exit::Interrupted { sigterm: false } => Self::SIGINT,
            Exit::Interrupted { sigterm: true } => Self::SIGTERM,
        }
    }

    /// The category's one name (`--json`'s `outcome`, README's table).
    pub const fn as_str(self) -> &'static str {
        match self {
            Exit::Ok => "ok",
            Exit::Failed => "failed",
            Exit::BadInput => "bad-input",
            Exit::Unavailable => "unavailable",
            Exit::Internal => "internal-error",
            Exit::RecordLost => "record-lost",
            Exit::OverServerLimit => "over-server-limit",
            Exit::ThresholdsFailed => "thresholds-failed",
            Exit::Interrupted { .. } => "interrupted",
        }
    }

    /// The exit of a code this module gave out (`None` for a code it never gives).
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            Self::SUCCESS => Exit::Ok,
            Self::FAILED => Exit::Failed,
            Self::BAD_INPUT => Exit::BadInput,
            Self::UNAVAILABLE => Exit::Unavailable,
            Self::INTERNAL => Exit::Internal,
            Self::RECORD_LOST => Exit::RecordLost,
            Self::OVER_SERVER_LIMIT => Exit::OverServerLimit,
            Self::THRESHOLDS_FAILED => Exit::ThresholdsFailed,
            Self::SIGINT => Exit::Interrupted { sigterm: false },
            Self::SIGTERM => Exit::Interrupted { sigterm: true },
            _ => return None,
        })
    }

    /// The category an error's chain names through this layer's types (the wrappers below
    /// and `ScenarioError`), from the outermost cause inwards; `None` when none does.
    pub fn marked(err: &anyhow::Error) -> Option<Exit> {
        err.chain().find_map(|cause| {
            if cause.downcast_ref::<Unavailable>().is_some() {
                Some(Exit::Unavailable)
            } else if cause.downcast_ref::<BadInput>().is_some()
                || cause
                    .downcast_ref::<crate::scenario::ScenarioError>()
                    .is_some()
            {
                Some(Exit::BadInput)
            } else {
                None
            }
        })
    }

    /// Every category, in the order of README's table.
    pub const ALL: [Exit; 10] = [
        Exit::Ok,
        Exit::Failed,
        Exit::BadInput,
        Exit::Unavailable,
        Exit::Internal,
        Exit::RecordLost,
        Exit::OverServerLimit,
        Exit::ThresholdsFailed,
        Exit::Interrupted { sigterm: false },
        Exit::Interrupted { sigterm: true },
    ];
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Exit {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// An error caused by the outside world (a target that does not answer, a Grid that
/// refuses, a cloud API that keeps failing): exit code 69. Its message and causes are the
/// wrapped error's, unchanged.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Unavailable(pub anyhow::Error);

/// An error in what the user gave (a flag, a file, a URL that names nothing): exit code 2.
/// Its message and causes are the wrapped error's, unchanged.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct BadInput(pub anyhow::Error);

/// Marks an error as the outside world's (see [`Unavailable`]).
pub fn unavailable(err: impl Into<anyhow::Error>) -> anyhow::Error {
    Unavailable(err.into()).into()
}

/// Marks an error as bad input (see [`BadInput`]).
pub fn bad_input(err: impl Into<anyhow::Error>) -> anyhow::Error {
    BadInput(err.into()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_maps_back_to_its_exit_and_names_are_unique() {
        let mut names = std::collections::BTreeSet::new();
        for exit in Exit::ALL {
            assert_eq!(Exit::from_code(exit.code()), Some(exit));
            names.insert((exit.as_str(), exit.code()));
        }
        assert_eq!(names.len(), Exit::ALL.len());
        assert_eq!(Exit::from_code(3), None);
    }

    #[test]
    fn a_marked_error_keeps_its_message_and_causes() {
        let inner = anyhow::anyhow!("connection refused").context("the target did not answer");
        let err = unavailable(inner).context("run x");
        assert_eq!(
            format!("{err:#}"),
            "run x: the target did not answer: connection refused"
        );
        assert!(err
            .chain()
            .any(|c| c.downcast_ref::<Unavailable>().is_some()));
        let err = bad_input(anyhow::anyhow!("--steps needs counts"));
        assert_eq!(format!("{err:#}"), "--steps needs counts");
        assert!(err.downcast_ref::<BadInput>().is_some());
        assert_eq!(Exit::marked(&err), Some(Exit::BadInput));
        assert_eq!(Exit::marked(&anyhow::anyhow!("disk full")), None);
    }
}
