//! The caller's side of an escalation: [`EscalationOptions`] in, an
//! [`EscalatedOutcome`] or an [`EscalationError`] out.

use super::*;

/// What the caller wants from [`run_with_escalation`].
#[derive(Debug, Clone, Default)]
pub struct EscalationOptions {
    /// Ask for this mode before anything runs (strictly wider than the call's mode);
    /// nothing runs unless it is granted.
    pub up_front: Option<Mode>,
    /// The mode to ask for after a denial (strictly wider; default: the next rung).
    pub on_denial: Option<Mode>,
    /// The caller's reason, shown to the approver.
    pub justification: Option<String>,
    /// Files no run of this call may be able to write.
    pub governing: GoverningFiles,
    /// Strict binding (`--bind-script`). The approval is always bound to the contents
    /// of the files the command names that lie inside the workspace or a writable root
    /// (a script, a Makefile: what a run could rewrite): the fingerprint covers their
    /// bytes as read when the approver is asked, and the retry is refused
    /// ([`EscalationError::BoundFileChanged`]) if any differs right before it runs.
    /// Strict binding binds every named file wherever it lies, and refuses a shell
    /// string whose words may not be the files that run (`cd`, quotes, `$`, globs).
    /// Named files: for a shell string, its words split on whitespace and shell
    /// punctuation; for argv, the arguments (and the program when given as a path);
    /// the VALUE of a `--opt=VALUE` word too; each that is a regular file, relative to
    /// the cwd. A named file that cannot be bound (over [`MAX_BOUND_FILE`], unreadable,
    /// more than 64) means no approver is asked (`not_offered`).
    pub bind_files: bool,
    /// Ask only for a narrow grant (one protected path, the network, one host), never
    /// for a wider mode: when no single grant covers the denials, nobody is asked
    /// (`not_offered`). `cordon serve` and `cordon mcp` set it: their ceiling's mode
    /// is the user's choice, and only what one denied call needs goes to the user.
    pub narrow_only: bool,
    /// Hold the first run's writes under its writable roots back (a private layer, see
    /// [`Executor::run_held_until`]): applied to the host when nobody is asked, dropped
    /// when a grant is asked for (granted or not), so a retry starts from the workspace
    /// as it was and a refusal leaves nothing half done. Where they cannot be held, the
    /// approver is shown what the first run changed on the host.
    pub hold_writes: bool,
    /// Output handling of the retry, when it should differ from the first run's (the
    /// CLI captures the first run under `--ask`, then streams the retry live).
    pub retry_output: Option<Output>,
}

/// A decision and what it was about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EscalationRecord {
    /// The request.
    pub request: EscalationRequest,
    /// The answer.
    pub decision: Decision,
    /// Who answered.
    pub approver: ApproverInfo,
}

/// What [`run_with_escalation`] did.
#[derive(Debug)]
pub struct EscalatedOutcome {
    /// The run at the call's own mode (`None` when asked up front: nothing ran first).
    pub first: Option<RunResult>,
    /// The escalation, when one was asked.
    pub escalation: Option<EscalationRecord>,
    /// Why a denied first run led to no request (e.g. the wider mode cannot be enforced
    /// here, the run was aborted, the mode is already the widest).
    pub not_offered: Option<String>,
    /// The one retry at the wider mode, when granted: its result, or why it could not
    /// start.
    pub retry: Option<Result<RunResult, CordonError>>,
}

impl EscalatedOutcome {
    /// The result the caller acts on: the retry's when it ran, else the first run's.
    pub fn result(&self) -> Option<&RunResult> {
        match &self.retry {
            Some(Ok(r)) => Some(r),
            _ => self.first.as_ref(),
        }
    }

    /// Nothing ran because an up-front request was refused.
    pub fn refused_up_front(&self) -> bool {
        self.first.is_none() && self.retry.is_none()
    }

    /// The `escalation` object of `cordon run --json` (see docs/escalation.md), or
    /// `None` when nothing was denied and nothing was asked.
    pub fn report(&self) -> Option<serde_json::Value> {
        let mut obj = serde_json::Map::new();
        if let Some(rec) = &self.escalation {
            obj.insert("request".into(), serde_json::to_value(&rec.request).ok()?);
            obj.insert("decision".into(), serde_json::to_value(&rec.decision).ok()?);
            obj.insert("approver".into(), serde_json::to_value(&rec.approver).ok()?);
        }
        if let Some(why) = &self.not_offered {
            obj.insert("not_offered".into(), why.clone().into());
        }
        if obj.is_empty() {
            return None;
        }
        if let (Some(first), Some(_)) = (&self.first, &self.retry) {
            obj.insert("first_run".into(), serde_json::to_value(first).ok()?);
        }
        Some(obj.into())
    }
}

/// Why [`run_with_escalation`] stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EscalationError {
    /// The target is not strictly wider than the call's mode.
    #[error("escalation from {from} to {to} is not strictly wider (the ladder is read-only < workspace-write < full-access)")]
    NotWider {
        /// The call's mode.
        from: Mode,
        /// The mode asked for.
        to: Mode,
    },
    /// The call itself failed before running (including `SANDBOX_UNAVAILABLE`).
    #[error(transparent)]
    Cordon(#[from] CordonError),
    /// A governing file would be writable by a run of this call.
    #[error(transparent)]
    GoverningFile(#[from] GoverningFileError),
    /// A file bound to the approval changed between the decision and the retry; the
    /// retry did not run.
    #[error("`{path}` changed after the approval was given ({why}); the retry did not run")]
    BoundFileChanged {
        /// The file.
        path: PathBuf,
        /// What differs.
        why: String,
    },
    /// A file the command names cannot be bound (unreadable or too large).
    #[error("cannot bind `{path}` to the approval: {why}")]
    BindFailed {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The decision could not be recorded; nothing more ran.
    #[error("appending to the audit log `{path}`: {source}")]
    Audit {
        /// The log.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl EscalationError {
    /// The stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            EscalationError::NotWider { .. } => "ESCALATION_NOT_WIDER",
            EscalationError::Cordon(e) => e.code(),
            EscalationError::GoverningFile(e) => e.code(),
            EscalationError::Audit { .. } => "AUDIT_LOG_FAILED",
            EscalationError::BoundFileChanged { .. } => "BOUND_FILE_CHANGED",
            EscalationError::BindFailed { .. } => "BIND_FAILED",
        }
    }
}
