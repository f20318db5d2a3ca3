//! The errors of the runners: why a runner could not plan ([`PlanError`]), why a plan
//! could not be materialized ([`MaterializeError`]), and what broke between
//! selection and `execve` ([`RunnerFailure`], the typed source of
//! `CordonError::RunnerFailed`).
//!
//! Kept in `crate::error`, below the runners, so that `CordonError` carries these
//! types without importing the module that selects runners (which returns
//! `CordonError`); `crate::runner::error` re-exports them.

use crate::vocab::RunnerKind;
use std::path::PathBuf;

/// Why a runner could not plan.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The runner does not exist on this OS or host (the probe's reason).
    #[error("{0}")]
    Unavailable(String),
    /// The Seatbelt planner refused a path or the mode.
    #[error(transparent)]
    Seatbelt(#[from] super::seatbelt::SeatbeltPlanError),
    /// A path cannot be expressed for this runner.
    #[error("path `{path}` cannot be passed to {runner}: {why}")]
    Path {
        /// The runner.
        runner: RunnerKind,
        /// The path.
        path: PathBuf,
        /// Why.
        why: &'static str,
    },
}

/// Why a plan could not be materialized.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MaterializeError {
    /// A string contains a NUL byte.
    #[error("{what} contains a NUL byte")]
    Nul {
        /// Which string.
        what: String,
    },
    /// The Landlock ruleset could not be built.
    #[error("building the Landlock ruleset: {0}")]
    #[cfg(target_os = "linux")]
    Landlock(#[source] landlock::RulesetError),
    /// A rule's directory could not be opened (without following symlinks).
    #[error("building the Landlock ruleset: {}: {source}", path.display())]
    LandlockRule {
        /// The directory.
        path: PathBuf,
        /// The error opening it.
        source: std::io::Error,
    },
    /// The kernel returned no ruleset fd.
    #[error("building the Landlock ruleset: the kernel did not return a ruleset")]
    NoRuleset,
    /// The seccomp filters could not be built.
    #[error(transparent)]
    #[cfg(target_os = "linux")]
    Seccomp(#[from] super::seccomp::SeccompError),
    /// The seccomp program for a helper (bubblewrap) could not be put into its fd.
    #[error("passing the seccomp program to bubblewrap through a memfd: {0}")]
    SeccompFd(#[source] std::io::Error),
    /// A path the plan mounts, binds or grants was not pinned by the executor: the
    /// plan and the policy disagree (a bug), so nothing runs.
    #[error("`{path}` is used by the plan but was not pinned")]
    Unpinned {
        /// The path.
        path: PathBuf,
    },
    /// An fd for the child could not be prepared.
    #[error("passing {what} to the sandbox: {source}")]
    PassFd {
        /// Which fd.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// The plan's stage helper hands a seccomp listener over, but no notification
    /// socket was given (its observed syscalls would block with nobody to answer).
    #[error("the stage helper's seccomp listener needs a notification socket")]
    NoSupervisor,
    /// The stage helper (the cordon executable) could not be opened.
    #[error("opening the stage helper `{path}`: {source}")]
    StageHelper {
        /// Its path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A mount point could not be created.
    #[error("creating mount point `{path}`: {source}")]
    MountPoint {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// What broke between selecting a runner and the command's `execve`: the typed
/// source of `CordonError::RunnerFailed` (its message is this one's).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunnerFailure {
    /// The runner could not plan the launch.
    #[error("planning: {0}")]
    Plan(#[from] PlanError),
    /// The plan could not be materialized.
    #[error(transparent)]
    Materialize(#[from] MaterializeError),
    /// The child reported a failed step of its stage (it has been reaped).
    #[error("{0}")]
    #[cfg(target_os = "linux")]
    Stage(cordon_stage::StageFailure),
    /// The runner's program could not be started (the direct launch: for `seatbelt`,
    /// `sandbox-exec`); nothing ran.
    #[error("starting {}: {source}", program.display())]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The stage's seccomp listener did not arrive.
    #[error("receiving the seccomp listener: {0}")]
    SeccompListener(#[source] std::io::Error),
    /// The `bwrap` runner's stage helper did not report that it executed the command:
    /// bubblewrap failed building the sandbox (its message is `stderr`), or a step of
    /// the helper failed. The command never ran.
    #[error("bubblewrap did not start the command: {}", if stderr.is_empty() { "no message" } else { stderr.as_str() })]
    Helper {
        /// The start of what bubblewrap (or the helper) wrote on stderr, bounded.
        stderr: String,
    },
}
