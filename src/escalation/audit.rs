//! The escalation audit log: one JSON line per decision, appended through a
//! descriptor opened once after the governing-file checks.

use super::*;

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// When the decision was made (RFC 3339, UTC).
    pub at: String,
    /// The call's fingerprint.
    pub fingerprint: String,
    /// Why cordon asked.
    pub trigger: Trigger,
    /// The command.
    pub command: CommandView,
    /// The canonical working directory.
    pub cwd: PathBuf,
    /// The call's mode.
    pub from: Mode,
    /// The mode asked for.
    pub to: Mode,
    /// The narrow grant asked for instead of a wider mode, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<Grant>,
    /// The caller's reason.
    pub justification: Option<String>,
    /// What the sandbox refused.
    pub denials: Vec<Denial>,
    /// Granted or refused.
    pub decision: Verdict,
    /// Why.
    pub reason: String,
    /// Who decided.
    pub approver: ApproverInfo,
}

impl AuditRecord {
    /// The audit line for `record`, stamped now.
    pub fn new(record: &EscalationRecord) -> AuditRecord {
        let r = &record.request;
        AuditRecord {
            at: rfc3339_utc(SystemTime::now()),
            fingerprint: r.fingerprint.clone(),
            trigger: r.trigger,
            command: r.command.clone(),
            cwd: r.cwd.clone(),
            from: r.from,
            to: r.to,
            grant: r.grant.clone(),
            justification: r.justification.clone(),
            denials: r.denials.clone(),
            decision: record.decision.verdict,
            reason: record.decision.reason.clone(),
            approver: record.approver.clone(),
        }
    }
}

/// An append-only JSON-lines log of escalation decisions. The file (0600) and missing
/// parent directories (0700) are created by [`AuditLog::prepare`], which opens it once,
/// by its canonical symlink-free location, as a regular file owned by the caller; every
/// record is appended through that descriptor.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<Option<std::fs::File>>,
}

impl AuditLog {
    /// A log at `path` (nothing is touched yet).
    pub fn new(path: impl Into<PathBuf>) -> AuditLog {
        AuditLog { path: path.into(), file: Mutex::new(None) }
    }

    /// `$XDG_STATE_HOME/cordon/audit.jsonl` when that variable is an absolute path,
    /// else `$HOME/.local/state/cordon/audit.jsonl`; `None` without either.
    pub fn default_path() -> Option<PathBuf> {
        let var = |k: &str| std::env::var_os(k).map(PathBuf::from).filter(|p| p.is_absolute());
        let state = var("XDG_STATE_HOME").or_else(|| var("HOME").map(|h| h.join(".local/state")))?;
        Some(state.join("cordon/audit.jsonl"))
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io_err(&self, source: std::io::Error) -> EscalationError {
        EscalationError::Audit { path: self.path.clone(), source }
    }

    /// Create the parent directories and the file if missing and open it (once; later
    /// calls keep the first descriptor), so a log that cannot be written is found before
    /// anything runs. A log that is not a regular file owned by the caller (`/dev/null`,
    /// a FIFO), or whose canonical path gains a symlink, is refused.
    pub fn prepare(&self) -> Result<(), EscalationError> {
        let mut slot = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_some() {
            return Ok(());
        }
        if let Some(parent) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
                .create(parent)
                .map_err(|e| self.io_err(e))?;
        }
        *slot = Some(open_governing(GoverningKind::AuditLog, &self.path, OpenFor::Append)?);
        Ok(())
    }

    /// Append one record: one `write` of the whole line on the `O_APPEND` descriptor;
    /// a cut-short record is truncated away or followed by a newline, so the next one
    /// starts on its own line.
    pub fn append(&self, record: &AuditRecord) -> Result<(), EscalationError> {
        self.prepare()?;
        let slot = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let file = slot.as_ref().ok_or_else(|| self.io_err(std::io::Error::other("the log is not open")))?;
        append_json_line(file, record).map_err(|e| self.io_err(e))
    }
}
