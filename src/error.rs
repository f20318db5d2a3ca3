//! The typed errors of cordon. Errors are for failures before or around the command
//! (bad input, an unusable host, broken infrastructure); what the command itself did is
//! always a [`crate::RunResult`].
//!
//! Every error has a stable [`CordonError::code`] (e.g. `SANDBOX_UNAVAILABLE`) that the
//! CLI prints and puts in its JSON error object.

use crate::mode::Mode;
pub(crate) mod runner;
pub(crate) mod seatbelt;
#[cfg(target_os = "linux")]
pub(crate) mod seccomp;

use crate::vocab::RunnerKind;
use runner::{PlanError, RunnerFailure};
use serde::Serialize;
use std::path::PathBuf;

/// Why one runner cannot enforce the requested mode on this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunnerReason {
    /// The runner.
    pub runner: RunnerKind,
    /// Why it was not usable.
    pub reason: String,
}

/// The policy asked for something that cannot be granted as written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The workspace does not exist or is not a directory.
    #[error("workspace `{path}` is not usable: {source}")]
    Workspace {
        /// The path given.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The `--cache-dir` cannot be used.
    #[error("cache directory `{path}` cannot be used: {why}")]
    CacheDir {
        /// The path given.
        path: PathBuf,
        /// Which rule refused it.
        why: String,
    },
    /// A writable root is relative.
    #[error("writable root `{path}` must be an absolute path")]
    RelativeRoot {
        /// The path given.
        path: PathBuf,
    },
    /// A writable root does not exist or is not a directory.
    #[error("writable root `{path}` is not usable: {source}")]
    Root {
        /// The path given.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A writable root (or workspace in `workspace-write`) that would open too much.
    #[error("`{path}` cannot be writable: {why}")]
    TooWide {
        /// The canonical path.
        path: PathBuf,
        /// What it would expose.
        why: WidthReason,
    },
    /// The workspace of a `workspace-write` run (the working directory, `--cwd`) would
    /// open too much (a home, `/`, a system directory): the refusal names the ways on.
    #[error(
        "`{path}` cannot be the workspace of a workspace-write run: {why}; run from a project directory \
         (or pass `--cwd DIR`), or use `--mode read-only`, which writes nothing there"
    )]
    WorkspaceTooWide {
        /// The canonical path.
        path: PathBuf,
        /// What it would expose.
        why: WidthReason,
    },
    /// Looking for git directories under a writable root failed; nothing ran, because
    /// a repository that was not found could not be protected.
    #[error("cannot search writable root `{root}` for git directories: `{path}`: {source}")]
    Discovery {
        /// The writable root being searched.
        root: PathBuf,
        /// The entry that could not be read.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A writable root holds more entries than the git-directory search visits.
    #[error(
        "writable root `{root}` holds more than {limit} entries to search for git directories; \
         pass a narrower directory"
    )]
    DiscoveryLimit {
        /// The writable root being searched when the bound was reached.
        root: PathBuf,
        /// The bound (entries visited per call).
        limit: usize,
    },
    /// More protected paths than a run can attach read-only.
    #[error(
        "writable root `{root}` holds more than {limit} git directories to keep read-only; pass a narrower directory"
    )]
    TooManyProtected {
        /// The writable root whose search crossed the bound.
        root: PathBuf,
        /// The bound.
        limit: usize,
    },
    /// A file host git reads to know where to look (a repository's index) could not
    /// be read, so what it registers could not be protected. Nothing ran.
    #[error("cannot read `{path}`, which host git reads to find submodules: {why}")]
    GitFile {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: GitFileError,
    },
    /// A path host git's configuration names (an included file, `core.hooksPath`, a
    /// program) reaches into a writable root through a symlink that a command could
    /// re-point there.
    #[error("`{path}` ({what}) resolves through a symlink inside a writable root to `{resolved}`; name the real path")]
    GitConfigLink {
        /// The path as configured (made absolute).
        path: PathBuf,
        /// Where it resolves to.
        resolved: PathBuf,
        /// What names it.
        what: &'static str,
    },
    /// A writable root lies inside a protected subpath.
    #[error("writable root `{root}` lies inside protected path `{protected}`")]
    RootInsideProtected {
        /// The writable root.
        root: PathBuf,
        /// The protected path containing it.
        protected: PathBuf,
    },
    /// A checked path could not be pinned without following a symlink: it changed
    /// between the check and the launch (a component swapped for a symlink), or it
    /// vanished. Nothing ran.
    #[error("`{path}` changed after cordon checked it (a symlink in its path, or it is gone): {source}")]
    Changed {
        /// The canonical path that was checked.
        path: PathBuf,
        /// The error opening it without following symlinks.
        source: std::io::Error,
    },
    /// A writable root was given through a symlink. Such a link may have been planted by an earlier sandboxed run to
    /// redirect the grant, so cordon refuses it instead of following it.
    #[error("`{path}` passes through a symlink (it resolves to `{resolved}`); give the real path")]
    SymlinkRoot {
        /// The path as given.
        path: PathBuf,
        /// Where it resolves to.
        resolved: PathBuf,
    },
    /// cordon's private state directory (spill files, per-run directories) contains a
    /// writable root, or lies inside one where no mount layer can keep it read-only
    /// (inside one with a mount layer it is re-attached read-only, like `.git`): the
    /// command could swap it for a symlink and make cordon create files elsewhere, or
    /// forge a spill file. Point `TMPDIR` (or `ExecutorConfig::state_dir`) outside the
    /// workspace.
    #[error("cordon's state directory `{state_dir}` overlaps the writable root `{root}`; set TMPDIR outside it")]
    StateDirWritable {
        /// The state directory.
        state_dir: PathBuf,
        /// The writable root.
        root: PathBuf,
    },
    /// `--allow-host` with `--network`: the network is either open or reachable by
    /// name through cordon's proxy, not both.
    #[error("`--allow-host` cannot be combined with `--network` (which already opens every host)")]
    AllowHostsWithNetwork,
    /// An allowed unix socket is not usable as one.
    #[error("unix socket `{path}` cannot be allowed: {why}")]
    UnixSocket {
        /// The path given.
        path: PathBuf,
        /// Why.
        why: &'static str,
    },
    /// A path of the policy (or the program, or the working directory) cannot be
    /// expressed to the selected runner (bubblewrap takes only absolute, normalized
    /// paths without NUL, and cannot show a working directory hidden under its
    /// private tmpfs). Nothing ran.
    #[error("path `{path}` cannot be passed to {runner}: {why}")]
    RunnerPath {
        /// The runner.
        runner: RunnerKind,
        /// The path.
        path: PathBuf,
        /// Why.
        why: &'static str,
    },
    /// A protected path is a symlink, which a writable workspace could replace.
    #[error("protected path `{path}` is a symlink; cordon cannot keep it from being replaced (point the workspace at the real directory)")]
    ProtectedSymlink {
        /// The symlink.
        path: PathBuf,
    },
}

/// Why a file host git reads could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitFileError {
    /// Reading it failed.
    #[error("{0}")]
    Io(std::io::Error),
    /// Its contents are not an index cordon can read (an unknown version or a
    /// truncated entry); host git would refuse it too, or cordon is older than it.
    #[error("not a git index cordon can read ({0:?})")]
    Index(IndexError),
}

/// Why a path cannot be a writable root (see `crate::policy` for the rules).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WidthReason {
    /// `/`.
    FilesystemRoot,
    /// The path is a home directory or one of its ancestors.
    ContainsHome {
        /// The home directory.
        home: PathBuf,
    },
    /// The path is or lies inside a configuration location of a home directory.
    HomeConfig {
        /// The configuration location (`~/.ssh`, `~/bin`, ...).
        dir: PathBuf,
    },
    /// The path is, lies inside or contains a system directory.
    SystemDir {
        /// The system directory.
        dir: PathBuf,
    },
}

impl std::fmt::Display for WidthReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WidthReason::FilesystemRoot => write!(f, "it is the root of the filesystem"),
            WidthReason::ContainsHome { home } => write!(
                f,
                "it is or contains the home directory `{}` (dotfiles there configure other programs)",
                home.display()
            ),
            WidthReason::HomeConfig { dir } => write!(
                f,
                "it is or lies inside `{}`, where shell, ssh, git or desktop configuration lives",
                dir.display()
            ),
            WidthReason::SystemDir { dir } => write!(
                f,
                "it is, lies inside or contains the system directory `{}` (pass --allow-system-root, or set \
                 `allow_system_root`, if that is really meant)",
                dir.display()
            ),
        }
    }
}

/// Every error cordon returns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CordonError {
    /// No runner can enforce the requested mode here. Nothing ran.
    #[error("no runner can enforce mode {mode} on this host: {}", format_reasons(.reasons))]
    SandboxUnavailable {
        /// The mode that was requested.
        mode: Mode,
        /// One reason per runner tried.
        reasons: Vec<RunnerReason>,
    },
    /// The policy is not acceptable as written.
    #[error(transparent)]
    InvalidPolicy(#[from] PolicyError),
    /// The environment the caller asked for is not acceptable.
    #[error(transparent)]
    InvalidEnv(#[from] EnvError),
    /// A request field is out of range or malformed.
    #[error("invalid request: {field}: {why}")]
    InvalidRequest {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// The working directory is missing or unusable.
    #[error("working directory `{path}` is not usable: {source}")]
    Workdir {
        /// The path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The program was not found.
    #[error("program `{program}` not found")]
    ProgramNotFound {
        /// The program as given.
        program: String,
    },
    /// The program exists but cannot be executed.
    #[error("program `{program}` is not executable: {source}")]
    ProgramNotExecutable {
        /// The program as given.
        program: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The arguments and environment exceed the kernel's limit for `execve` (`E2BIG`):
    /// the request is too big, not the runner broken. Nothing ran.
    #[error("the arguments and environment of `{program}` exceed the kernel's limit for a new program (E2BIG); pass large data through stdin or a file")]
    ArgumentListTooLong {
        /// The program as given.
        program: String,
    },
    /// A preview (`--preview`) was asked for where the run's writes cannot be held
    /// back in a private layer: nothing ran, since its writes would reach the host.
    #[error("cannot preview here: {why}; nothing ran")]
    PreviewUnavailable {
        /// Why no layer can be had.
        why: String,
    },
    /// The shell used for shell-string commands is unusable.
    #[error("shell `{path}` is not usable: {why}")]
    Shell {
        /// The configured shell.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The runner broke while setting up the sandbox; the command did not run.
    #[error("runner {runner} failed before the command ran: {source}")]
    RunnerFailed {
        /// The runner.
        runner: RunnerKind,
        /// What failed (the step, and the error or errno).
        source: RunnerFailure,
    },
    /// Local infrastructure failed (pipes, temp dirs, ...).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

fn format_reasons(reasons: &[RunnerReason]) -> String {
    if reasons.is_empty() {
        return "no runner exists for this platform".into();
    }
    reasons.iter().map(|r| format!("{}: {}", r.runner, r.reason)).collect::<Vec<_>>().join("; ")
}

impl CordonError {
    /// The stable error code (`SANDBOX_UNAVAILABLE`, `INVALID_POLICY`, ...).
    pub fn code(&self) -> &'static str {
        match self {
            CordonError::SandboxUnavailable { .. } => "SANDBOX_UNAVAILABLE",
            CordonError::InvalidPolicy(_) => "INVALID_POLICY",
            CordonError::InvalidEnv(_) => "INVALID_ENV",
            CordonError::InvalidRequest { .. } => "INVALID_REQUEST",
            CordonError::Workdir { .. } => "WORKDIR_UNAVAILABLE",
            CordonError::ProgramNotFound { .. } => "PROGRAM_NOT_FOUND",
            CordonError::ProgramNotExecutable { .. } => "PROGRAM_NOT_EXECUTABLE",
            CordonError::ArgumentListTooLong { .. } => "ARGUMENT_LIST_TOO_LONG",
            CordonError::PreviewUnavailable { .. } => "PREVIEW_UNAVAILABLE",
            CordonError::Shell { .. } => "SHELL_UNUSABLE",
            CordonError::RunnerFailed { .. } => "RUNNER_FAILED",
            CordonError::Io { .. } => "IO_ERROR",
        }
    }

    /// The error as the CLI and `probe` report it in JSON: `{code, message}`, plus
    /// `reasons` (one per runner) for `SANDBOX_UNAVAILABLE`. (`cordon serve` wraps the
    /// same facts in a JSON-RPC error object.)
    pub fn body(&self) -> serde_json::Value {
        let mut body = serde_json::json!({ "code": self.code(), "message": self.to_string() });
        let reasons = self.runner_reasons();
        if !reasons.is_empty() {
            body["reasons"] = serde_json::to_value(reasons).unwrap_or_default();
        }
        body
    }

    /// The per-runner reasons of a `SANDBOX_UNAVAILABLE` error (empty otherwise).
    pub fn runner_reasons(&self) -> &[RunnerReason] {
        match self {
            CordonError::SandboxUnavailable { reasons, .. } => reasons,
            _ => &[],
        }
    }

    /// A failure of `runner` between selection and `execve`. A path the runner
    /// cannot express is the policy's problem, not the runner's: it is
    /// `INVALID_POLICY` ([`PolicyError::RunnerPath`]); everything else is
    /// `RUNNER_FAILED`.
    pub(crate) fn runner_failed(runner: RunnerKind, failure: impl Into<RunnerFailure>) -> Self {
        match failure.into() {
            RunnerFailure::Plan(PlanError::Path { runner, path, why }) => {
                CordonError::InvalidPolicy(PolicyError::RunnerPath { runner, path, why })
            }
            source => CordonError::RunnerFailed { runner, source },
        }
    }

    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        CordonError::Io { what: what.into(), source }
    }
}

/// A variable the caller asked for that cannot be set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvError {
    /// Extra env tried to set a name in the managed `CORDON_*` namespace.
    #[error("extra env may not set `{name}`: the CORDON_* namespace is managed by cordon")]
    ReservedName {
        /// The offending name.
        name: String,
    },
    /// The name is empty or contains `=` or NUL.
    #[error("invalid environment variable name `{name}`")]
    InvalidName {
        /// The offending name.
        name: String,
    },
    /// A value contains a NUL byte.
    #[error("the value of `{name}` contains a NUL byte")]
    InvalidValue {
        /// The variable whose value is invalid.
        name: String,
    },
    /// A managed variable does not start with `CORDON_`.
    #[error("managed env name `{name}` must start with CORDON_")]
    UnmanagedName {
        /// The offending name.
        name: String,
    },
}

/// Why a git index could not be read (`crate::policy`'s reader of git's formats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexError {
    /// Not an index (signature), or a version this reader does not know.
    Format,
    /// An entry or extension runs past the end of the file, or a path is malformed.
    Truncated,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::error::MaterializeError;

    #[test]
    fn a_path_the_runner_cannot_take_is_a_policy_error() {
        let e = CordonError::runner_failed(
            RunnerKind::Bwrap,
            PlanError::Path { runner: RunnerKind::Bwrap, path: "/a/../b".into(), why: "not normalized" },
        );
        assert_eq!(e.code(), "INVALID_POLICY");
        assert_eq!(e.to_string(), "path `/a/../b` cannot be passed to bwrap: not normalized");
    }

    #[test]
    fn runner_failures_keep_their_message_and_source() {
        let e = CordonError::runner_failed(RunnerKind::Landlock, PlanError::Unavailable("no landlock".into()));
        assert_eq!(e.code(), "RUNNER_FAILED");
        assert_eq!(e.to_string(), "runner landlock failed before the command ran: planning: no landlock");
        let io = std::io::Error::from_raw_os_error(libc::ENOENT);
        let e = CordonError::runner_failed(
            RunnerKind::Landlock,
            MaterializeError::LandlockRule { path: "/w".into(), source: io },
        );
        assert_eq!(e.code(), "RUNNER_FAILED");
        assert!(e
            .to_string()
            .starts_with("runner landlock failed before the command ran: building the Landlock ruleset: /w: "));
        // The chain reaches the io::Error (typed, not a string).
        let mut cur: &dyn std::error::Error = &e;
        while let Some(next) = cur.source() {
            cur = next;
        }
        assert!(cur.downcast_ref::<std::io::Error>().is_some(), "{cur:?}");
    }
}
