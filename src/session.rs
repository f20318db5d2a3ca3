//! Session overrides: a durable, per-session mode kept as an append-only event log,
//! and the guard that keeps such governing files out of the runs they govern.
//!
//! A session file is JSON lines, one event per line, only ever appended to:
//!
//! ```text
//! {"at":"2025-06-01T12:00:00.000Z","event":"set-mode","mode":"read-only"}
//! ```
//!
//! The effective mode is a pure fold over the events ([`effective_mode`]): start from a
//! default, each `set-mode` replaces it. A call may then only narrow it ([`narrow`]:
//! the lower rung of the session's mode and the call's own request), never widen it.
//!
//! Governing files — the session file, the escalation audit log, the approver program
//! (anything that decides how later runs are confined) — must not be writable by the
//! runs they govern, or a command could widen its own policy. [`GoverningFiles::check`]
//! refuses a policy whose writable roots contain one (canonical paths; a file that does
//! not exist yet is judged by its canonicalized parent), and refuses a governing file
//! with more than one hard link (another name could sit inside a writable root).
//!
//! What it does not do: it does not run anything, and it cannot protect governing
//! files from a `full-access` run, which is unconfined by definition (see
//! docs/escalation.md). Reading a malformed log is an error, never a guess: a corrupt or
//! unknown event fails closed rather than falling back to the default mode.

use crate::mode::Mode;
use crate::policy::ExecutionPolicy;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The mode of a session whose log holds no `set-mode` event yet: the CLI's default
/// mode, so an empty session changes nothing.
pub const DEFAULT_SESSION_MODE: Mode = Mode::WorkspaceWrite;

/// Permissions of session files and audit logs cordon creates: they reveal commands.
pub const GOVERNING_FILE_MODE: u32 = 0o600;

/// The longest session-log line accepted; a longer one is corruption, not an event.
const MAX_EVENT_LINE: usize = 64 * 1024;

/// One change recorded in a session log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum SessionChange {
    /// From now on the session's mode is `mode`.
    SetMode {
        /// The new mode.
        mode: Mode,
    },
}

/// One line of a session log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionEvent {
    /// When it was appended (RFC 3339, UTC). Informational: the fold uses order only.
    pub at: String,
    /// What changed.
    #[serde(flatten)]
    pub change: SessionChange,
}

impl SessionEvent {
    /// A `set-mode` event stamped now.
    pub fn set_mode(mode: Mode) -> SessionEvent {
        SessionEvent { at: rfc3339_utc(SystemTime::now()), change: SessionChange::SetMode { mode } }
    }
}

/// The effective mode after `events`, starting from `default`. Pure: the same events
/// always give the same mode, and `effective_mode(d, a ++ b) ==
/// effective_mode(effective_mode(d, a), b)`.
pub fn effective_mode(default: Mode, events: &[SessionEvent]) -> Mode {
    events.iter().fold(default, |_, event| match event.change {
        SessionChange::SetMode { mode } => mode,
    })
}

/// The mode one call runs at: the session's mode, narrowed by the call's own request
/// (the lower rung of the two). Never wider than either.
pub fn narrow(session: Mode, requested: Option<Mode>) -> Mode {
    requested.map_or(session, |r| r.min(session))
}

/// Why a session log cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The file does not exist (a typo must not silently fall back to the default mode;
    /// `cordon session set-mode` creates it).
    #[error("session file `{path}` does not exist (create it with `cordon session set-mode {path} MODE`)")]
    NotFound {
        /// The path given.
        path: PathBuf,
    },
    /// Reading or appending failed.
    #[error("{what} session file `{path}`: {source}")]
    Io {
        /// `reading` or `appending to`.
        what: &'static str,
        /// The path given.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A line is not a known event.
    #[error("session file `{path}` line {line}: {why}")]
    Malformed {
        /// The path given.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
}

impl SessionError {
    /// The stable error code (`SESSION_NOT_FOUND`, `SESSION_IO`, `SESSION_MALFORMED`).
    pub fn code(&self) -> &'static str {
        match self {
            SessionError::NotFound { .. } => "SESSION_NOT_FOUND",
            SessionError::Io { .. } => "SESSION_IO",
            SessionError::Malformed { .. } => "SESSION_MALFORMED",
        }
    }
}

/// Parse a session log's text. Blank lines are skipped; anything else must be an event.
pub fn parse_events(path: &Path, text: &str) -> Result<Vec<SessionEvent>, SessionError> {
    let mut events = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let malformed = |why: String| SessionError::Malformed { path: path.to_path_buf(), line: i + 1, why };
        if line.len() > MAX_EVENT_LINE {
            return Err(malformed(format!("longer than {MAX_EVENT_LINE} bytes")));
        }
        events.push(serde_json::from_str(line).map_err(|e| malformed(e.to_string()))?);
    }
    Ok(events)
}

/// Read every event of the session log at `path`.
pub fn read_events(path: &Path) -> Result<Vec<SessionEvent>, SessionError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SessionError::NotFound { path: path.to_path_buf() })
        }
        Err(source) => return Err(SessionError::Io { what: "reading", path: path.to_path_buf(), source }),
    };
    parse_events(path, &text)
}

/// Append one JSON line to `path` (created 0600 if missing) with a single `write` on an
/// `O_APPEND` descriptor, so concurrent appenders never interleave within a line.
pub(crate) fn append_json_line(path: &Path, value: &impl Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut file = std::fs::OpenOptions::new().append(true).create(true).mode(GOVERNING_FILE_MODE).open(path)?;
    file.write_all(&line)
}

/// Append `event` to the session log at `path` (creating it).
pub fn append_event(path: &Path, event: &SessionEvent) -> Result<(), SessionError> {
    append_json_line(path, event).map_err(|source| SessionError::Io {
        what: "appending to",
        path: path.to_path_buf(),
        source,
    })
}

/// `time` as RFC 3339 UTC with milliseconds (`2025-06-01T12:00:00.000Z`).
pub fn rfc3339_utc(time: SystemTime) -> String {
    let d = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

// ------------------------------------------------------------------ governing files

/// What a governing file is for (named in errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GoverningKind {
    /// A session log (`--session`).
    SessionFile,
    /// The escalation audit log (`--audit-log`).
    AuditLog,
    /// The approver program (`--approver`), which runs unsandboxed.
    ApproverProgram,
    /// A configuration file.
    Config,
}

impl fmt::Display for GoverningKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GoverningKind::SessionFile => "session file",
            GoverningKind::AuditLog => "audit log",
            GoverningKind::ApproverProgram => "approver program",
            GoverningKind::Config => "config file",
        })
    }
}

/// A governing file the policy of a run would let the run change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GoverningFileError {
    /// It lies inside a writable root of the run.
    #[error("the {kind} `{file}` (canonical `{canonical}`) lies inside `{root}`, which a {mode} run may write; a command could change its own policy. Keep it outside the workspace and every --writable root")]
    InsideWritableRoot {
        /// What the file is for.
        kind: GoverningKind,
        /// The path given.
        file: PathBuf,
        /// Its canonical path.
        canonical: PathBuf,
        /// The writable root containing it.
        root: PathBuf,
        /// The mode of the run.
        mode: Mode,
    },
    /// It has other hard links, which could lie inside a writable root.
    #[error("the {kind} `{file}` has {links} hard links; another name for it could lie inside a writable root. Use a file with a single link")]
    HardLinked {
        /// What the file is for.
        kind: GoverningKind,
        /// The path given.
        file: PathBuf,
        /// Its link count.
        links: u64,
    },
    /// Its location cannot be resolved.
    #[error("cannot resolve the {kind} `{file}`: {source}")]
    Unresolvable {
        /// What the file is for.
        kind: GoverningKind,
        /// The path given.
        file: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl GoverningFileError {
    /// The stable error code: `GOVERNING_FILE_WRITABLE` for the first two variants,
    /// `GOVERNING_FILE_UNRESOLVABLE` otherwise.
    pub fn code(&self) -> &'static str {
        match self {
            GoverningFileError::InsideWritableRoot { .. } | GoverningFileError::HardLinked { .. } => {
                "GOVERNING_FILE_WRITABLE"
            }
            GoverningFileError::Unresolvable { .. } => "GOVERNING_FILE_UNRESOLVABLE",
        }
    }
}

/// The files that govern a run, checked against every confined policy it may run at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoverningFiles {
    files: Vec<(GoverningKind, PathBuf)>,
}

impl GoverningFiles {
    /// No governing files.
    pub fn new() -> GoverningFiles {
        GoverningFiles::default()
    }

    /// Add a file (resolved at each [`GoverningFiles::check`], so one created later is
    /// judged where it really is).
    pub fn add(&mut self, kind: GoverningKind, path: impl Into<PathBuf>) -> &mut Self {
        self.files.push((kind, path.into()));
        self
    }

    /// The files, in the order added.
    pub fn files(&self) -> &[(GoverningKind, PathBuf)] {
        &self.files
    }

    /// Refuse `policy` if one of its writable roots contains a governing file, or if a
    /// governing file has several hard links. `full-access` is not checked: it confines
    /// nothing, so nothing could be kept from it.
    pub fn check(&self, policy: &ExecutionPolicy) -> Result<(), GoverningFileError> {
        if !policy.mode.is_confined() {
            return Ok(());
        }
        let writable = policy.writable();
        for (kind, file) in &self.files {
            let canonical = canonical_location(file).map_err(|source| GoverningFileError::Unresolvable {
                kind: *kind,
                file: file.clone(),
                source,
            })?;
            if let Some(root) = writable.iter().find(|root| canonical.starts_with(root)) {
                return Err(GoverningFileError::InsideWritableRoot {
                    kind: *kind,
                    file: file.clone(),
                    canonical,
                    root: root.clone(),
                    mode: policy.mode,
                });
            }
            if let Ok(meta) = std::fs::metadata(&canonical) {
                if meta.is_file() && meta.nlink() > 1 {
                    return Err(GoverningFileError::HardLinked {
                        kind: *kind,
                        file: file.clone(),
                        links: meta.nlink(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// Where `path` is or would be created: the canonical path of the file when it exists,
/// else of its nearest existing ancestor with the missing components appended (missing
/// components cannot be symlinks, so `.` and `..` among them are resolved lexically).
pub fn canonical_location(path: &Path) -> std::io::Result<PathBuf> {
    let absolute = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir()?.join(path) };
    let mut missing = Vec::new();
    let mut existing = absolute.as_path();
    loop {
        match existing.canonicalize() {
            Ok(mut base) => {
                for component in missing.iter().rev() {
                    match component {
                        Component::ParentDir => {
                            base.pop();
                        }
                        Component::Normal(name) => base.push(name),
                        _ => {}
                    }
                }
                return Ok(base);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let Some(parent) = existing.parent() else { return Err(e) };
                if let Some(last) = existing.components().next_back() {
                    missing.push(last);
                }
                existing = parent;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(mode: Mode) -> SessionEvent {
        SessionEvent { at: "t".into(), change: SessionChange::SetMode { mode } }
    }

    #[test]
    fn fold_takes_the_last_set_mode() {
        assert_eq!(effective_mode(Mode::WorkspaceWrite, &[]), Mode::WorkspaceWrite);
        let events = [set(Mode::FullAccess), set(Mode::ReadOnly)];
        assert_eq!(effective_mode(Mode::WorkspaceWrite, &events), Mode::ReadOnly);
    }

    #[test]
    fn narrow_never_widens() {
        for s in Mode::ALL {
            assert_eq!(narrow(s, None), s);
            for r in Mode::ALL {
                assert_eq!(narrow(s, Some(r)), s.min(r));
            }
        }
    }

    #[test]
    fn event_json_is_exact() {
        let e = SessionEvent {
            at: "2025-06-01T12:00:00.000Z".into(),
            change: SessionChange::SetMode { mode: Mode::ReadOnly },
        };
        let text = serde_json::to_string(&e).unwrap();
        assert_eq!(text, r#"{"at":"2025-06-01T12:00:00.000Z","event":"set-mode","mode":"read-only"}"#);
        assert_eq!(serde_json::from_str::<SessionEvent>(&text).unwrap(), e);
    }

    #[test]
    fn malformed_and_unknown_events_fail_closed() {
        let p = Path::new("s.jsonl");
        let ok = r#"{"at":"x","event":"set-mode","mode":"read-only"}"#;
        assert_eq!(parse_events(p, &format!("{ok}\n\n{ok}\n")).unwrap().len(), 2);
        for bad in [
            r#"{"at":"x","event":"set-mode","mode":"root"}"#,
            r#"{"at":"x","event":"grant-everything"}"#,
            r#"{"at":"x","event":"set-mode","mo"#,
            "not json",
        ] {
            let err = parse_events(p, &format!("{ok}\n{bad}\n")).unwrap_err();
            assert!(matches!(err, SessionError::Malformed { line: 2, .. }), "{bad}: {err}");
        }
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + std::time::Duration::from_millis(951_782_400_123); // leap day
        assert_eq!(rfc3339_utc(t), "2000-02-29T00:00:00.123Z");
        let t = UNIX_EPOCH + std::time::Duration::from_secs(4_102_444_799);
        assert_eq!(rfc3339_utc(t), "2099-12-31T23:59:59.000Z");
    }

    #[test]
    fn canonical_location_of_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        let link = dir.path().join("link");
        std::fs::create_dir(real.join("d")).unwrap();
        std::os::unix::fs::symlink(real.join("d"), &link).unwrap();
        assert_eq!(canonical_location(&link.join("new/x/../f")).unwrap(), real.join("d/new/f"));
        assert_eq!(canonical_location(&link).unwrap(), real.join("d"));
    }
}
