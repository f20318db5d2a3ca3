//! What an approver sees and answers: the [`EscalationRequest`] (with its views of
//! the command and policies), the [`Decision`] and the [`Approver`] trait.

use super::*;

/// The next rung above `mode`, if any.
pub fn next_wider(mode: Mode) -> Option<Mode> {
    Mode::ALL.into_iter().find(|m| *m > mode)
}

/// What made cordon ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// The confined run was denied; the retry would be the second run.
    Denied,
    /// The caller asked before anything ran.
    UpFront,
}

/// The command as the caller gave it (lossy UTF-8 for display; the fingerprint uses the
/// exact bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommandView {
    /// A shell string.
    Shell(String),
    /// A program and its arguments.
    Argv(Vec<String>),
}

impl From<&Command> for CommandView {
    fn from(c: &Command) -> Self {
        match c {
            Command::Shell(s) => CommandView::Shell(s.clone()),
            Command::Argv(v) => CommandView::Argv(v.iter().map(|a| a.to_string_lossy().into_owned()).collect()),
        }
    }
}

pub use crate::vocab::Grant;

/// A resolved policy as it appears in an escalation request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyView {
    /// The rung.
    pub mode: Mode,
    /// The canonical workspace.
    pub workspace: PathBuf,
    /// Writable roots besides the workspace (empty in `read-only`).
    pub writable_roots: Vec<PathBuf>,
    /// Protected paths inside writable roots.
    pub protected: Vec<PathBuf>,
    /// Network allowed below `full-access`.
    pub network: bool,
    /// Gaps tolerated.
    pub best_effort: bool,
}

impl From<&ExecutionPolicy> for PolicyView {
    fn from(p: &ExecutionPolicy) -> Self {
        PolicyView {
            mode: p.mode,
            workspace: p.workspace.clone(),
            writable_roots: p.writable_roots.clone(),
            protected: p.protected.clone(),
            network: p.network,
            best_effort: p.best_effort,
        }
    }
}

/// What an approver is asked. Serialized as one JSON object (see docs/escalation.md):
/// this is exactly what a [`ProgramApprover`] reads on stdin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EscalationRequest {
    /// Format version ([`REQUEST_VERSION`]).
    pub version: u32,
    /// Why cordon asks.
    pub trigger: Trigger,
    /// The command.
    pub command: CommandView,
    /// The canonical working directory.
    pub cwd: PathBuf,
    /// The mode of the call.
    pub from: Mode,
    /// The strictly wider mode asked for, for this one call (the call's own mode when
    /// [`EscalationRequest::grant`] is set).
    pub to: Mode,
    /// The one narrow grant asked for instead of a wider mode, when every denial names
    /// it (see [`Grant`]); the retry policy is the call's with only that changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<Grant>,
    /// The caller's reason, if given.
    pub justification: Option<String>,
    /// What the sandbox refused (empty when asked up front).
    pub denials: Vec<Denial>,
    /// The call's policy.
    pub policy: PolicyView,
    /// The policy the retry would run with.
    pub retry_policy: PolicyView,
    /// Names of the command's environment variables (values are not shown).
    pub env_names: Vec<String>,
    /// [`fingerprint`] of the call at its current policy.
    pub fingerprint: String,
    /// What the denied first run changed under its writable roots, when its writes were
    /// watched ([`EscalationOptions::hold_writes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_run_changes: Option<FirstRunChanges>,
    /// The files the command names whose contents the fingerprint covers (only with
    /// [`EscalationOptions::bind_files`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bound_files: Vec<BoundFileView>,
}

/// What the first run changed, as shown to the approver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirstRunChanges {
    /// The changes were held back in a private layer: none reached the host, and they
    /// are dropped now that a grant is asked for (granted or not). `false`: no layer
    /// could be had here, and these changes are on the host already; a retry runs on
    /// top of them.
    pub held_back: bool,
    /// The changes (at most [`crate::layer::MAX_LISTED_CHANGES`]).
    pub changes: Vec<crate::layer::Change>,
    /// More changes than listed (or too many files to compare).
    #[serde(default)]
    pub truncated: bool,
}

/// A file bound to the fingerprint, as shown to the approver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundFileView {
    /// Its path (as named, joined to the cwd).
    pub path: PathBuf,
    /// `fnv1a128:` hash of its contents (the retry compares the exact bytes).
    pub contents: String,
    /// Its size in bytes.
    pub size: u64,
}

/// Granted or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Run the call once more at the wider mode.
    Granted,
    /// Do not.
    Refused,
}

/// An approver's answer, with the reason recorded in the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// Granted or refused.
    pub verdict: Verdict,
    /// Why (e.g. `answered "y" on /dev/tty`, `program exited with status 1`).
    pub reason: String,
}

impl Decision {
    /// A grant.
    pub fn grant(reason: impl Into<String>) -> Decision {
        Decision { verdict: Verdict::Granted, reason: reason.into() }
    }

    /// A refusal.
    pub fn refuse(reason: impl Into<String>) -> Decision {
        Decision { verdict: Verdict::Refused, reason: reason.into() }
    }

    /// Whether it grants.
    pub fn is_granted(&self) -> bool {
        self.verdict == Verdict::Granted
    }
}

/// Who decided (for the audit log).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApproverInfo {
    /// `terminal`, `program`, or a library caller's own name.
    pub kind: String,
    /// The terminal device or program path, when there is one.
    pub detail: Option<String>,
}

/// Decides escalation requests. Implementations must fail closed: anything other than
/// an explicit grant is a refusal.
pub trait Approver: Send + Sync {
    /// Who this approver is.
    fn info(&self) -> ApproverInfo;
    /// Decide one request.
    fn decide<'a>(&'a self, req: &'a EscalationRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>>;
    /// Files this approver depends on (its program, its interpreter), checked before
    /// anything runs like every other governing file. Default: none.
    fn governing(&self) -> Vec<(GoverningKind, PathBuf)> {
        Vec::new()
    }
    /// Sees the denied first run just before [`Approver::decide`] (the terminal
    /// approver repeats its output, escaped, after resetting the terminal). Default:
    /// nothing.
    fn first_run(&self, _result: &RunResult) {}
    /// Called once the grant is recorded and checked, right before the granted run
    /// starts (the CLI says so on stderr, so the retry's output follows a line of
    /// cordon's own). Default: nothing.
    fn retry_starts(&self, _record: &EscalationRecord) {}
}
