//! Escalation: one strictly wider retry of one exact call, granted by an approver.
//!
//! [`run_with_escalation`] runs a request. When the sandbox denied something
//! (`sandbox.denied`, which is true only with evidence), it builds an
//! [`EscalationRequest`] — the command, cwd, current mode, the strictly wider mode asked
//! for (default: the next rung), the caller's justification, the denials and a
//! fingerprint of the call — and hands it to an [`Approver`]. Only if the approver
//! grants it does the same spec (same argv, cwd, environment, stdin, deadline) run once
//! more, at the wider mode. A caller may also ask up front
//! ([`EscalationOptions::up_front`]): then nothing runs until the approver grants.
//!
//! Rules (tested in tests/escalation.rs, explained in docs/escalation.md):
//! - A target that is not strictly wider than the call's mode (by the ladder's `Ord`)
//!   is refused with [`EscalationError::NotWider`] before anything runs.
//! - Never offered for `SANDBOX_UNAVAILABLE` or any other error (those are `Err`, not a
//!   denied result), for a run whose runner failed or that was aborted, or when the
//!   wider mode cannot be enforced here.
//! - One shot: at most one retry per call; nothing is remembered, so the next call runs
//!   at its own (session or base) mode again.
//! - Every decision is appended to the [`AuditLog`] when one is given; an audit write
//!   that fails stops the retry (fail closed).
//! - The governing files ([`GoverningFiles`]: session file, audit log, approver program
//!   and its interpreter via [`Approver::governing`]) are checked against the call's
//!   policy and the wider policy before anything runs, and refused inside cordon's
//!   state directory; the audit log is opened once and appended through that fd.
//! - With [`EscalationOptions::bind_files`], the fingerprint covers the bytes of the
//!   files the command names, and the retry is refused if they changed.
//!
//! The threat model (the confined command as adversary) is in docs/escalation.md.
//!
//! What it does not do: it does not classify denials (the executor does), keep grants
//! for later calls, or change a session. The fingerprint is an identifier (FNV-1a
//! 128-bit over a canonical encoding), not a MAC: it names a call in the audit log and to
//! an approver; it proves nothing against someone who can write the log.

use crate::error::CordonError;
use crate::exec::Executor;
use crate::mode::Mode;
use crate::policy::{resolve_policy, ExecutionPolicy, PolicyRequest};
use crate::request::{Command, Output, Request, Spec};
use crate::result::{Denial, RunResult};
use crate::runner::{self, RunnerChoice};
use crate::session::{
    append_json_line, open_governing, rfc3339_utc, GoverningFileError, GoverningFiles, GoverningKind, OpenFor,
};
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::io::{BufRead, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// Version of the [`EscalationRequest`] JSON format.
pub const REQUEST_VERSION: u32 = 1;
/// How long a [`ProgramApprover`] may take before it is killed and the answer is no.
/// Long enough for a program that asks a person through some other channel.
pub const APPROVER_TIMEOUT: Duration = Duration::from_secs(600);
/// The terminal [`TerminalApprover`] asks on by default.
pub const DEFAULT_TTY: &str = "/dev/tty";
/// The fixed `PATH` a [`ProgramApprover`] runs with (and against which an
/// `#!/usr/bin/env NAME` line is resolved): never the caller's, which may name a
/// directory the confined command can write.
pub const APPROVER_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// Variables copied from cordon's environment into a [`ProgramApprover`]'s (besides
/// the fixed `PATH`); everything else is dropped.
const APPROVER_ENV_KEEP: &[&str] = &["HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ"];
/// The largest file [`EscalationOptions::bind_files`] binds; a bigger named file makes
/// the escalation fail rather than go unbound.
pub const MAX_BOUND_FILE: u64 = 16 * 1024 * 1024;
/// The most files bound to one fingerprint.
const MAX_BOUND_FILES: usize = 64;
/// The most lines of the first run's output the terminal prompt repeats (escaped).
const PROMPT_OUTPUT_LINES: usize = 20;
/// Sent to the terminal before the prompt: leave the alternate screen, show the cursor,
/// reset the scroll region, attributes, character sets and modes (soft reset, DECSTR),
/// then a full reset (RIS), so nothing a command left behind hides or fakes the prompt.
pub const TERMINAL_RESET: &str = "\x1b[?1049l\x1b[?25h\x1b[r\x1b[0m\x1b(B\x1b[!p\x1bc";
/// The longest answer read from the terminal; the rest of a longer line is ignored.
const MAX_ANSWER: u64 = 1024;
/// Domain prefix of the fingerprint encoding (bump the version if the encoding changes).
const FINGERPRINT_DOMAIN: &[u8] = b"cordon-call-fingerprint-v1";
/// FNV-1a 128-bit offset basis and prime.
const FNV128_OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
const FNV128_PRIME: u128 = 0x0000000001000000000000000000013b;

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
    /// The strictly wider mode asked for, for this one call.
    pub to: Mode,
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
    /// The files the command names whose contents the fingerprint covers (only with
    /// [`EscalationOptions::bind_files`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bound_files: Vec<BoundFileView>,
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

/// A named file's contents, read at approval time.
#[derive(Debug, Clone)]
struct BoundFile {
    path: PathBuf,
    bytes: Vec<u8>,
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
}

/// A stable identifier of one call under one policy: FNV-1a 128 over a canonical,
/// length-prefixed encoding of the mode, workspace, writable roots, protected paths,
/// network and best-effort flags, argv (exact bytes), cwd and the sorted environment
/// variable names. Printed as `fnv1a128:` and 32 hex digits. Not a MAC.
pub fn fingerprint(spec: &Spec) -> String {
    fingerprint_with(spec, &[])
}

/// [`fingerprint`], also covering the exact contents of `bound` files (a list field
/// `bound_files` of path and contents, appended after the others; with no bound files
/// the encoding and value are exactly [`fingerprint`]'s).
fn fingerprint_with(spec: &Spec, bound: &[BoundFile]) -> String {
    let mut enc = Encoder(Vec::with_capacity(512));
    enc.0.extend_from_slice(FINGERPRINT_DOMAIN);
    let p = &spec.policy;
    enc.field(b"mode", p.mode.as_str().as_bytes());
    enc.field(b"workspace", p.workspace.as_os_str().as_bytes());
    enc.list(b"writable_roots", p.writable_roots.iter().map(|r| r.as_os_str().as_bytes()));
    enc.list(b"protected", p.protected.iter().map(|r| r.as_os_str().as_bytes()));
    enc.field(b"network", if p.network { b"1" } else { b"0" });
    enc.field(b"best_effort", if p.best_effort { b"1" } else { b"0" });
    enc.list(b"argv", spec.argv.iter().map(|a| a.as_bytes()));
    enc.field(b"cwd", spec.workdir.as_os_str().as_bytes());
    let mut names: Vec<&[u8]> = spec.env.iter().map(|(k, _)| k.as_bytes()).collect();
    names.sort_unstable();
    names.dedup();
    enc.list(b"env_names", names.into_iter());
    if !bound.is_empty() {
        enc.raw(b"bound_files");
        enc.0.extend_from_slice(&(bound.len() as u64).to_be_bytes());
        for f in bound {
            enc.raw(f.path.as_os_str().as_bytes());
            enc.raw(&f.bytes);
        }
    }
    fnv1a128(&enc.0)
}

fn fnv1a128(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(FNV128_OFFSET, |h, b| (h ^ u128::from(*b)).wrapping_mul(FNV128_PRIME));
    format!("fnv1a128:{hash:032x}")
}

/// Tag, then length (u64 big-endian), then bytes: no two different inputs encode alike.
struct Encoder(Vec<u8>);

impl Encoder {
    fn raw(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
        self.0.extend_from_slice(bytes);
    }

    fn field(&mut self, tag: &[u8], value: &[u8]) {
        self.raw(tag);
        self.raw(value);
    }

    fn list<'a>(&mut self, tag: &[u8], items: impl ExactSizeIterator<Item = &'a [u8]>) {
        self.raw(tag);
        self.0.extend_from_slice(&(items.len() as u64).to_be_bytes());
        for item in items {
            self.raw(item);
        }
    }
}

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
    /// Bind the approval to the contents of the files the command names (`--bind-script`):
    /// the fingerprint covers their bytes as read when the approver is asked, and the
    /// retry is refused ([`EscalationError::BoundFileChanged`]) if any differs right
    /// before it runs. Named files: for a shell string, its whitespace-separated words;
    /// for argv, the arguments (and the program when given as a path); each that is a
    /// regular file, relative to the cwd.
    pub bind_files: bool,
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

/// Run `req`; when the confined run is denied, ask `approver` for one strictly wider
/// retry of exactly that call (or ask up front, per `opts`). See the module docs.
pub async fn run_with_escalation(
    exec: &Executor,
    req: Request,
    approver: &dyn Approver,
    opts: &EscalationOptions,
    audit: Option<&AuditLog>,
) -> Result<EscalatedOutcome, EscalationError> {
    run_with_escalation_until(exec, req, approver, opts, audit, std::future::pending()).await
}

/// Like [`run_with_escalation`]; `abort` resolving stops the running command (as in
/// [`Executor::run_until`]) or, while the approver decides, counts as a refusal.
pub async fn run_with_escalation_until(
    exec: &Executor,
    req: Request,
    approver: &dyn Approver,
    opts: &EscalationOptions,
    audit: Option<&AuditLog>,
    abort: impl Future<Output = ()>,
) -> Result<EscalatedOutcome, EscalationError> {
    let command = CommandView::from(&req.command);
    let policy_req = req.policy.clone();
    let spec = exec.resolve(req)?;
    let from = spec.policy.mode;
    for to in [opts.up_front, opts.on_denial].into_iter().flatten() {
        if to <= from {
            return Err(EscalationError::NotWider { from, to });
        }
    }
    let mut governing = opts.governing.clone();
    for (kind, path) in approver.governing() {
        governing.add(kind, path);
    }
    governing.refuse_under(exec.state_dir());
    governing.check(&spec.policy)?;
    // The wider spec is fixed now, before the command could change anything it names.
    let target = opts.up_front.or(opts.on_denial).or_else(|| next_wider(from));
    let wider = match target.map(|to| widen(&spec, &policy_req, to, opts)) {
        Some(Ok(w)) => {
            governing.check(&w.policy)?;
            Some(Ok(w))
        }
        other => other,
    };
    if let Some(log) = audit {
        log.prepare()?;
    }
    tokio::pin!(abort);

    if let Some(to) = opts.up_front {
        let wide = wider.unwrap_or_else(|| widen(&spec, &policy_req, to, opts))?;
        runner::select(&wide.policy, exec.host(), wide.runner)?;
        let bound = bind(&command, &spec, opts)?;
        let request = build_request(Trigger::UpFront, command, &spec, &wide, opts, Vec::new(), &bound);
        let record = ask(approver, request, audit, &mut abort).await?;
        let retry = if record.decision.is_granted() {
            recheck(&bound)?;
            Some(exec.run_until(wide, &mut abort).await)
        } else {
            None
        };
        return Ok(EscalatedOutcome { first: None, escalation: Some(record), not_offered: None, retry });
    }

    let first = exec.run_until(spec.clone(), &mut abort).await?;
    let mut outcome = EscalatedOutcome { first: None, escalation: None, not_offered: None, retry: None };
    if first.sandbox.denied {
        match offer(&first, wider, exec) {
            Err(why) => outcome.not_offered = Some(why),
            Ok(wide) => {
                let bound = bind(&command, &spec, opts)?;
                let denials = first.sandbox.denials.clone();
                let request = build_request(Trigger::Denied, command, &spec, &wide, opts, denials, &bound);
                approver.first_run(&first);
                let record = ask(approver, request, audit, &mut abort).await?;
                if record.decision.is_granted() {
                    recheck(&bound)?;
                    outcome.retry = Some(exec.run_until(wide, &mut abort).await);
                }
                outcome.escalation = Some(record);
            }
        }
    }
    outcome.first = Some(first);
    Ok(outcome)
}

/// The wider spec for a denied run, or why none is offered.
fn offer(first: &RunResult, wider: Option<Result<Spec, CordonError>>, exec: &Executor) -> Result<Spec, String> {
    if first.sandbox.runner_failed {
        return Err("the runner failed; a denial from a broken runner is not evidence".into());
    }
    if first.aborted {
        return Err("the run was aborted".into());
    }
    let wide = match wider {
        None => return Err(format!("{} is already the widest mode", first.sandbox.mode)),
        Some(Err(e)) => return Err(format!("the wider policy is not acceptable: [{}] {e}", e.code())),
        Some(Ok(w)) => w,
    };
    runner::select(&wide.policy, exec.host(), wide.runner)
        .map_err(|e| format!("{} cannot be enforced here: [{}] {e}", wide.policy.mode, e.code()))?;
    Ok(wide)
}

/// The same call at mode `to`: only the policy changes (the runner choice too when `to`
/// is unconfined, since a confinement backend does not apply there).
fn widen(spec: &Spec, policy_req: &PolicyRequest, to: Mode, opts: &EscalationOptions) -> Result<Spec, CordonError> {
    let policy = resolve_policy(&PolicyRequest { mode: to, ..policy_req.clone() }, &spec.workdir)?;
    let mut wide = spec.clone();
    wide.policy = policy;
    // The retry runs the program the first run would have run, found now, before the
    // command could plant another one earlier on `PATH` (`node_modules/.bin`, a
    // workspace `bin`): argv[0] becomes that absolute path.
    use std::os::unix::ffi::OsStrExt;
    if !wide.argv[0].as_bytes().contains(&b'/') {
        if let Ok(found) = crate::exec::resolve_program(&wide.argv[0], &wide.env, &wide.workdir) {
            wide.argv[0] = found.into_os_string();
        }
    }
    if let Some(output) = opts.retry_output {
        wide.output = output;
    }
    if !to.is_confined() {
        wide.runner = RunnerChoice::Auto;
    }
    Ok(wide)
}

fn build_request(
    trigger: Trigger,
    command: CommandView,
    spec: &Spec,
    wide: &Spec,
    opts: &EscalationOptions,
    denials: Vec<Denial>,
    bound: &[BoundFile],
) -> EscalationRequest {
    let mut env_names: Vec<String> = spec.env.iter().map(|(k, _)| k.to_string_lossy().into_owned()).collect();
    env_names.sort();
    env_names.dedup();
    EscalationRequest {
        version: REQUEST_VERSION,
        trigger,
        command,
        cwd: spec.workdir.clone(),
        from: spec.policy.mode,
        to: wide.policy.mode,
        justification: opts.justification.clone(),
        denials,
        policy: PolicyView::from(&spec.policy),
        retry_policy: PolicyView::from(&wide.policy),
        env_names,
        fingerprint: fingerprint_with(spec, bound),
        bound_files: bound
            .iter()
            .map(|f| BoundFileView { path: f.path.clone(), contents: fnv1a128(&f.bytes), size: f.bytes.len() as u64 })
            .collect(),
    }
}

/// The words of the command that may name files (see [`EscalationOptions::bind_files`]).
fn named_words(command: &CommandView) -> Vec<String> {
    match command {
        CommandView::Shell(s) => s
            .split(|c: char| c.is_whitespace() || ";|&<>()`'\"".contains(c))
            .filter(|w| !w.is_empty())
            .map(String::from)
            .collect(),
        CommandView::Argv(v) => {
            v.iter().enumerate().filter(|(i, a)| *i > 0 || a.contains('/')).map(|(_, a)| a.clone()).collect()
        }
    }
}

/// Read the files the command names, when the caller asked to bind them.
fn bind(command: &CommandView, spec: &Spec, opts: &EscalationOptions) -> Result<Vec<BoundFile>, EscalationError> {
    if !opts.bind_files {
        return Ok(Vec::new());
    }
    // A shell string that changes directory, quotes, expands or globs would make the
    // named word differ from the file that runs (`cd sub && bash build.sh`,
    // `bash bu''ild.sh`): binding it would approve the wrong bytes.
    if let CommandView::Shell(sh) = command {
        let tricky = sh.chars().any(|c| "'\"\\$`*?[]{}~".contains(c))
            || sh
                .split(|c: char| c.is_whitespace() || ";|&()".contains(c))
                .any(|w| matches!(w, "cd" | "pushd" | "popd"));
        if tricky {
            return Err(EscalationError::BindFailed {
                path: spec.workdir.clone(),
                why: "--bind-script needs a command whose file names are plain words: no cd, quotes, $, globs or \
                      backquotes (pass the command as argv instead)"
                    .into(),
            });
        }
    }
    let mut out: Vec<BoundFile> = Vec::new();
    for word in named_words(command) {
        let path = spec.workdir.join(&word);
        if out.iter().any(|f| f.path == path) || !std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            continue;
        }
        if out.len() == MAX_BOUND_FILES {
            return Err(EscalationError::BindFailed { path, why: format!("more than {MAX_BOUND_FILES} files") });
        }
        let bytes = read_bound(&path).map_err(|why| EscalationError::BindFailed { path: path.clone(), why })?;
        out.push(BoundFile { path, bytes });
    }
    Ok(out)
}

/// A bound file's bytes, read through one descriptor (a regular file, at most
/// [`MAX_BOUND_FILE`] bytes).
fn read_bound(path: &Path) -> Result<Vec<u8>, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let mut bytes = Vec::new();
    file.take(MAX_BOUND_FILE + 1).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_BOUND_FILE {
        return Err(format!("larger than {MAX_BOUND_FILE} bytes"));
    }
    Ok(bytes)
}

/// Right before the retry: every bound file still holds exactly the approved bytes.
fn recheck(bound: &[BoundFile]) -> Result<(), EscalationError> {
    for f in bound {
        let changed = |why: String| EscalationError::BoundFileChanged { path: f.path.clone(), why };
        let now = read_bound(&f.path).map_err(changed)?;
        if now != f.bytes {
            return Err(changed(format!("its contents are now {}, approved {}", fnv1a128(&now), fnv1a128(&f.bytes))));
        }
    }
    Ok(())
}

async fn ask<F: Future<Output = ()>>(
    approver: &dyn Approver,
    request: EscalationRequest,
    audit: Option<&AuditLog>,
    abort: &mut Pin<&mut F>,
) -> Result<EscalationRecord, EscalationError> {
    let decision = tokio::select! {
        d = approver.decide(&request) => d,
        _ = abort => Decision::refuse("interrupted while waiting for the approver"),
    };
    let record = EscalationRecord { request, decision, approver: approver.info() };
    if let Some(log) = audit {
        log.append(&AuditRecord::new(&record))?;
    }
    Ok(record)
}

// ------------------------------------------------------------------ approvers

/// Asks a policy program: the request as one JSON line on its stdin, then end-of-file;
/// exit status 0 grants, anything else (including failing to start, a signal or
/// [`APPROVER_TIMEOUT`]) refuses. Its stdout goes to cordon's stderr so it cannot
/// corrupt `--json` output.
///
/// The program (and the interpreter its `#!` line names) is resolved once, when the
/// approver is made: to a canonical path, pinned by device and inode. It is started by
/// that canonical path — never the path as given, which may pass through a symlink —
/// after checking it still names the pinned file, with a fixed environment
/// ([`APPROVER_PATH`] and a few locale/identity variables from cordon's) and `/` as its
/// working directory. [`Approver::governing`] hands the program and interpreter to the
/// governing-file check, so neither may lie inside or be reached through a writable
/// root. It runs unsandboxed: it is the caller's policy agent.
#[derive(Debug, Clone)]
pub struct ProgramApprover {
    program: PathBuf,
    canonical: PathBuf,
    interpreters: Vec<PathBuf>,
    pins: Vec<FilePin>,
    timeout: Duration,
}

/// A file the approver depends on, by canonical path and identity.
#[derive(Debug, Clone)]
struct FilePin {
    kind: GoverningKind,
    canonical: PathBuf,
    dev: u64,
    ino: u64,
}

impl FilePin {
    fn new(kind: GoverningKind, path: &Path) -> std::io::Result<FilePin> {
        let file = open_governing(kind, path, OpenFor::Pin).map_err(std::io::Error::other)?;
        let meta = file.metadata()?;
        let canonical = crate::session::canonical_location(path)?;
        Ok(FilePin { kind, canonical, dev: meta.dev(), ino: meta.ino() })
    }

    /// The canonical path still names the pinned file (opened without following any
    /// symlink).
    fn verify(&self) -> Result<(), String> {
        let file = open_governing(self.kind, &self.canonical, OpenFor::Pin).map_err(|e| e.to_string())?;
        let meta = file.metadata().map_err(|e| e.to_string())?;
        if (meta.dev(), meta.ino()) != (self.dev, self.ino) {
            return Err(format!("the {} `{}` was replaced after it was checked", self.kind, self.canonical.display()));
        }
        Ok(())
    }
}

/// The interpreter a `#!` line names: `[interpreter]`, or for `#!/usr/bin/env NAME`
/// `[env, NAME resolved on APPROVER_PATH]`. `None` for a file without `#!`.
fn shebang_interpreters(head: &[u8]) -> std::io::Result<Option<Vec<PathBuf>>> {
    let Some(rest) = head.strip_prefix(b"#!") else { return Ok(None) };
    let line = rest.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let not_found = |what: String| std::io::Error::new(std::io::ErrorKind::NotFound, what);
    let interp = PathBuf::from(words.next().ok_or_else(|| not_found("an empty #! line".into()))?);
    let mut out = vec![interp.clone()];
    if interp.file_name().is_some_and(|n| n == "env") {
        // env's options (-S splits the rest into words) and NAME=VALUE assignments come
        // before the program name.
        let name = words
            .find(|w| !w.starts_with('-') && !w.contains('='))
            .ok_or_else(|| not_found(format!("no program after {} in the #! line", interp.display())))?;
        let found = if name.contains('/') {
            PathBuf::from(name)
        } else {
            APPROVER_PATH
                .split(':')
                .map(|d| Path::new(d).join(name))
                .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
                .ok_or_else(|| not_found(format!("`{name}` (from the #! line) is not on {APPROVER_PATH}")))?
        };
        out.push(found);
    }
    Ok(Some(out))
}

impl ProgramApprover {
    /// An approver running `program` (a path, or a name looked up on `PATH`), resolved
    /// now — to its canonical path and, through its `#!` line, its interpreter — and
    /// pinned, so the file checked is the file that runs.
    pub fn find(program: &Path) -> std::io::Result<ProgramApprover> {
        let found = if program.as_os_str().as_bytes().contains(&b'/') {
            program.to_path_buf()
        } else {
            which::which(program).map_err(|e| std::io::Error::new(std::io::ErrorKind::NotFound, e.to_string()))?
        };
        let program = std::path::absolute(&found)?;
        let canonical = crate::session::canonical_location(&program)?;
        let pin = FilePin::new(GoverningKind::ApproverProgram, &canonical)?;
        let mut head = Vec::with_capacity(256);
        let file = std::fs::File::open(&canonical)?;
        let meta = file.metadata()?;
        if (meta.dev(), meta.ino()) != (pin.dev, pin.ino) {
            return Err(std::io::Error::other(format!("`{}` changed while it was being read", canonical.display())));
        }
        file.take(256).read_to_end(&mut head)?;
        let interpreters = shebang_interpreters(&head)?.unwrap_or_default();
        let mut pins = vec![pin];
        for i in &interpreters {
            pins.push(FilePin::new(GoverningKind::ApproverInterpreter, i)?);
        }
        Ok(ProgramApprover { program, canonical, interpreters, pins, timeout: APPROVER_TIMEOUT })
    }

    /// Use `timeout` instead of [`APPROVER_TIMEOUT`].
    pub fn with_timeout(mut self, timeout: Duration) -> ProgramApprover {
        self.timeout = timeout;
        self
    }

    /// The absolute path of the program, as given.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The canonical path it is started by.
    pub fn canonical(&self) -> &Path {
        &self.canonical
    }

    async fn run(&self, req: &EscalationRequest) -> Decision {
        for pin in &self.pins {
            if let Err(why) = pin.verify() {
                return Decision::refuse(format!("not started: {why}"));
            }
        }
        let mut input = match serde_json::to_vec(req) {
            Ok(v) => v,
            Err(e) => return Decision::refuse(format!("cannot encode the request: {e}")),
        };
        input.push(b'\n');
        let stdout = match std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned() {
            Ok(fd) => std::process::Stdio::from(fd),
            Err(_) => std::process::Stdio::null(),
        };
        let mut command = tokio::process::Command::new(&self.canonical);
        command.env_clear().env("PATH", APPROVER_PATH).current_dir("/");
        for k in APPROVER_ENV_KEEP {
            if let Some(v) = std::env::var_os(k) {
                command.env(k, v);
            }
        }
        let child = command.stdin(std::process::Stdio::piped()).stdout(stdout).kill_on_drop(true).spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => return Decision::refuse(format!("cannot start {}: {e}", self.canonical.display())),
        };
        let mut stdin = child.stdin.take();
        let talk = async {
            if let Some(mut s) = stdin.take() {
                // A program that decides without reading is fine (EPIPE is ignored).
                let _ = tokio::io::AsyncWriteExt::write_all(&mut s, &input).await;
            }
            child.wait().await
        };
        match tokio::time::timeout(self.timeout, talk).await {
            Err(_) => Decision::refuse(format!("no answer within {} s", self.timeout.as_secs())),
            Ok(Err(e)) => Decision::refuse(format!("waiting for the program: {e}")),
            Ok(Ok(status)) if status.success() => Decision::grant("program exited with status 0"),
            Ok(Ok(status)) => Decision::refuse(format!("program {status}")),
        }
    }
}

impl Approver for ProgramApprover {
    fn info(&self) -> ApproverInfo {
        ApproverInfo { kind: "program".into(), detail: Some(self.program.display().to_string()) }
    }

    fn decide<'a>(&'a self, req: &'a EscalationRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        Box::pin(self.run(req))
    }

    fn governing(&self) -> Vec<(GoverningKind, PathBuf)> {
        std::iter::once((GoverningKind::ApproverProgram, self.program.clone()))
            .chain(self.interpreters.iter().map(|i| (GoverningKind::ApproverInterpreter, i.clone())))
            .collect()
    }
}

/// Asks a person on the terminal (default `/dev/tty`, never stdin or stdout). It first
/// resets the terminal ([`TERMINAL_RESET`]: whatever scroll region, colours, hidden
/// cursor or alternate screen the command left is undone), repeats the tail of the
/// denied run's output with control characters escaped, then shows the command, the
/// denials with their evidence, the proposed mode and the fingerprint, escaped too, so
/// the command cannot repaint or hide the prompt. Only `y` or `yes` grants; an empty
/// answer, end of input, no terminal or anything else refuses. Type-ahead is discarded
/// before asking.
///
/// This protects the prompt only if the command could not write to the terminal
/// meanwhile: the CLI captures the first run's output under `--ask` and gives the
/// command no terminal descriptor (docs/escalation.md).
#[derive(Debug, Clone)]
pub struct TerminalApprover {
    tty: PathBuf,
    first_output: std::sync::Arc<Mutex<Option<String>>>,
}

impl Default for TerminalApprover {
    fn default() -> Self {
        TerminalApprover::on(DEFAULT_TTY)
    }
}

impl TerminalApprover {
    /// Ask on `tty` instead of `/dev/tty`.
    pub fn on(tty: impl Into<PathBuf>) -> TerminalApprover {
        TerminalApprover { tty: tty.into(), first_output: Default::default() }
    }

    fn ask_blocking(tty: &Path, prompt: &str) -> Decision {
        let file = match std::fs::OpenOptions::new().read(true).write(true).open(tty) {
            Ok(f) => f,
            Err(e) => return Decision::refuse(format!("no terminal to ask on ({}: {e})", tty.display())),
        };
        let _ = nix::sys::termios::tcflush(&file, nix::sys::termios::FlushArg::TCIFLUSH);
        let text = format!("{TERMINAL_RESET}{prompt}");
        if let Err(e) = (&file).write_all(text.as_bytes()).and_then(|_| (&file).flush()) {
            return Decision::refuse(format!("cannot write to {}: {e}", tty.display()));
        }
        let mut line = String::new();
        match std::io::BufReader::new(std::io::Read::take(&file, MAX_ANSWER)).read_line(&mut line) {
            Ok(0) => Decision::refuse("end of input (the default is no)"),
            Err(e) => Decision::refuse(format!("reading {}: {e}", tty.display())),
            Ok(_) => match line.trim().to_ascii_lowercase().as_str() {
                "y" | "yes" => Decision::grant(format!("answered \"{}\" on {}", line.trim(), tty.display())),
                "" => Decision::refuse("empty answer (the default is no)"),
                other => Decision::refuse(format!("answered \"{}\"", printable(other))),
            },
        }
    }
}

impl Approver for TerminalApprover {
    fn info(&self) -> ApproverInfo {
        ApproverInfo { kind: "terminal".into(), detail: Some(self.tty.display().to_string()) }
    }

    fn first_run(&self, result: &RunResult) {
        let mut shown = String::new();
        for (name, text) in [("stdout", &result.stdout.text), ("stderr", &result.stderr.text)] {
            if text.is_empty() {
                continue;
            }
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(PROMPT_OUTPUT_LINES);
            shown.push_str(&format!(
                "cordon: the denied run's {name} (last {} lines, control characters escaped):\n",
                lines.len() - from
            ));
            for line in &lines[from..] {
                shown.push_str(&format!("  | {}\n", clip(&printable(line), PROMPT_LINE)));
            }
        }
        *self.first_output.lock().unwrap_or_else(|p| p.into_inner()) = Some(shown);
    }

    fn decide<'a>(&'a self, req: &'a EscalationRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        let shown = self.first_output.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or_default();
        let prompt = format!("{shown}{}", terminal_prompt(req));
        let tty = self.tty.clone();
        Box::pin(async move {
            // A plain thread, not the blocking pool: if the caller stops waiting (abort),
            // a thread blocked on the terminal must not hold up runtime shutdown.
            let (tx, rx) = tokio::sync::oneshot::channel();
            let spawned = std::thread::Builder::new()
                .name("cordon-ask".into())
                .spawn(move || drop(tx.send(TerminalApprover::ask_blocking(&tty, &prompt))));
            match spawned {
                Err(e) => Decision::refuse(format!("cannot start the prompt thread: {e}")),
                Ok(_) => rx.await.unwrap_or_else(|_| Decision::refuse("the prompt ended without an answer")),
            }
        })
    }
}

/// `s` with control characters and bidirectional-text overrides escaped, so a hostile
/// command string cannot move the cursor, clear the prompt or reorder what is shown.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let bidi =
            matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        // Invisible characters that could hide or reorder text: zero-width ones, word
        // joiners, the BOM, tag characters, and the Unicode line/paragraph separators.
        let invisible = matches!(
            c,
            '\u{200b}'..='\u{200d}' | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{e0000}'..='\u{e007f}' | '\u{2028}' | '\u{2029}'
        );
        if c.is_control() || bidi || invisible {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn shell_word(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// What the mode allows, in one line, for the prompt.
fn describe(p: &PolicyView) -> String {
    match p.mode {
        Mode::FullAccess => "full-access: NO sandbox; it can change anything you can and use the network".into(),
        Mode::ReadOnly => "read-only: writes only a private temporary directory".into(),
        Mode::WorkspaceWrite => {
            let roots: Vec<String> = std::iter::once(&p.workspace)
                .chain(&p.writable_roots)
                .map(|r| printable(&r.display().to_string()))
                .collect();
            format!("workspace-write: may write {}", roots.join(", "))
        }
    }
}

/// The text [`TerminalApprover`] shows.
pub fn terminal_prompt(req: &EscalationRequest) -> String {
    let command = match &req.command {
        CommandView::Shell(s) => format!("bash -c {}", shell_word(s)),
        CommandView::Argv(v) => v.iter().map(|a| shell_word(a)).collect::<Vec<_>>().join(" "),
    };
    let mut t = String::new();
    match req.trigger {
        Trigger::Denied => t.push_str(&format!("\ncordon: the sandbox ({}) refused part of this command.\n", req.from)),
        Trigger::UpFront => {
            t.push_str(&format!("\ncordon: permission asked to run this command beyond {}.\n", req.from))
        }
    }
    t.push_str(&format!("  command:  {}\n", printable(&command)));
    t.push_str(&format!("  cwd:      {}\n", printable(&req.cwd.display().to_string())));
    // At most a few denials, each line bounded: text the command provoked must not push
    // cordon's own lines (command, cwd, the question) off the screen.
    for (i, d) in req.denials.iter().take(PROMPT_DENIALS).enumerate() {
        let target = d.target.as_deref().map(|s| format!(" {}", printable(s))).unwrap_or_default();
        let kind = serde_json::to_value(d.kind).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        let label = if i == 0 { "denied:  " } else { "         " };
        let line = format!("{kind}{target} ({})", printable(&d.evidence));
        t.push_str(&format!("  {label} {}\n", clip(&line, PROMPT_LINE)));
    }
    if req.denials.len() > PROMPT_DENIALS {
        t.push_str(&format!("            ... and {} more\n", req.denials.len() - PROMPT_DENIALS));
    }
    if let Some(j) = &req.justification {
        t.push_str(&format!("  reason:   {}\n", printable(j)));
    }
    for (i, f) in req.bound_files.iter().enumerate() {
        let label = if i == 0 { "bound:   " } else { "         " };
        let path = printable(&f.path.display().to_string());
        t.push_str(&format!("  {label} {path} ({} bytes, {})\n", f.size, f.contents));
    }
    t.push_str(&format!("  proposed: {}\n", describe(&req.retry_policy)));
    t.push_str(&format!("  call:     {}\n", req.fingerprint));
    // The command and directory again, right above the question.
    t.push_str(&format!("  command:  {}\n", clip(&printable(&command), PROMPT_LINE)));
    t.push_str(&format!("  cwd:      {}\n", clip(&printable(&req.cwd.display().to_string()), PROMPT_LINE)));
    t.push_str(&format!("Run this exact command once at {}? [y/N] ", req.to));
    t
}

/// Denials listed in the `--ask` prompt (the rest are counted).
const PROMPT_DENIALS: usize = 5;
/// The widest prompt line cordon prints for command-provoked text (characters).
const PROMPT_LINE: usize = 160;

/// `s` cut to `max` characters, marked with `…`.
fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Output, Stdin};
    use std::time::Duration;

    fn spec() -> Spec {
        Spec {
            argv: vec!["/bin/bash".into(), "-c".into(), "echo hi".into()],
            workdir: "/ws".into(),
            timeout: Duration::from_secs(1),
            output_cap: 1,
            spill_cap: 1,
            stdin: Stdin::Null,
            output: Output::Capture,
            env: vec![("PATH".into(), "/bin".into()), ("HOME".into(), "/h".into())],
            policy: ExecutionPolicy {
                mode: Mode::ReadOnly,
                workspace: "/ws".into(),
                writable_roots: vec![],
                protected: vec![],
                network: false,
                best_effort: false,
                allow_unix_sockets: Vec::new(),
            },
            runner: RunnerChoice::Auto,
            limits: crate::limits::Limits { memory: 1 << 30, pids: 64, cpu: None, explicit: vec![] },
        }
    }

    #[test]
    fn fingerprint_is_stable_and_sensitive() {
        let base = fingerprint(&spec());
        // Golden (checked against an independent Python FNV-1a 128 of the documented
        // encoding): changing the encoding must be a deliberate version bump.
        assert_eq!(base, "fnv1a128:2f216417ed9dfdb1fda6b51a736c1a1f");
        let mut s = spec();
        s.env.reverse();
        s.env[0].1 = "other value".into();
        assert_eq!(fingerprint(&s), base, "env order and values do not matter");
        let variants: [fn(&mut Spec); 9] = [
            |s| s.policy.mode = Mode::WorkspaceWrite,
            |s| s.policy.network = true,
            |s| s.policy.best_effort = true,
            |s| s.policy.writable_roots = vec!["/r".into()],
            |s| s.policy.protected = vec!["/ws/.git".into()],
            |s| s.argv[2] = "echo ho".into(),
            |s| s.argv = vec!["/bin/bash".into(), "-cecho hi".into()],
            |s| s.workdir = "/ws2".into(),
            |s| s.env.push(("LD_PRELOAD".into(), "x".into())),
        ];
        for v in variants {
            let mut s = spec();
            v(&mut s);
            assert_ne!(fingerprint(&s), base);
        }
    }

    #[test]
    fn the_retry_runs_the_program_found_before_the_first_run() {
        let dir = tempfile::tempdir().unwrap();
        let mut sp = spec();
        sp.workdir = dir.path().to_path_buf();
        sp.policy.workspace = dir.path().to_path_buf();
        sp.argv = vec!["sh".into(), "-c".into(), "true".into()];
        sp.env = vec![("PATH".into(), format!("{}:/usr/bin:/bin", dir.path().join("bin").display()).into())];
        let req = PolicyRequest { mode: Mode::ReadOnly, ..PolicyRequest::default() };
        let wide = widen(&sp, &req, Mode::WorkspaceWrite, &EscalationOptions::default()).unwrap();
        let found = std::path::PathBuf::from(&wide.argv[0]);
        assert!(found.is_absolute() && found.ends_with("sh"), "{found:?}");
        // A `sh` planted later earlier on PATH does not change what the retry runs.
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        assert!(!found.starts_with(dir.path()));
    }

    #[test]
    fn next_wider_climbs_the_ladder() {
        assert_eq!(next_wider(Mode::ReadOnly), Some(Mode::WorkspaceWrite));
        assert_eq!(next_wider(Mode::WorkspaceWrite), Some(Mode::FullAccess));
        assert_eq!(next_wider(Mode::FullAccess), None);
    }

    #[test]
    fn shebang_interpreters_use_the_fixed_path() {
        assert_eq!(shebang_interpreters(b"\x7fELF...").unwrap(), None);
        assert_eq!(shebang_interpreters(b"#!/bin/sh -e\nexit 0\n").unwrap(), Some(vec![PathBuf::from("/bin/sh")]));
        // env's options and assignments are skipped; the name is looked up on APPROVER_PATH.
        let got = shebang_interpreters(b"#!/usr/bin/env -S FOO=1 sh -e\n").unwrap().unwrap();
        assert_eq!(got[0], PathBuf::from("/usr/bin/env"));
        assert!(APPROVER_PATH.split(':').any(|d| got[1] == Path::new(d).join("sh")), "{got:?}");
        let err = shebang_interpreters(b"#!/usr/bin/env no-such-interpreter-here\n").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn printable_escapes_terminal_controls() {
        assert_eq!(printable("a\x1b[2Jb\rc\u{202e}d"), "a\\u{1b}[2Jb\\rc\\u{202e}d");
        assert_eq!(printable("héllo wörld"), "héllo wörld");
    }
}
