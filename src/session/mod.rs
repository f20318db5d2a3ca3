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
//! resolves each path component by component ([`resolve_trail`]) and refuses a policy
//! whose writable roots contain one (canonical paths; a file that does not exist yet is
//! judged by its canonicalized parent), a path that follows a symlink lying inside the
//! workspace or a `--writable` root (in every mode), a file in cordon's state directory,
//! a file with more than one hard link, and a session file or audit log that is not a
//! regular file owned by the caller. Session files are then read and appended through a
//! descriptor opened with `openat2(RESOLVE_NO_SYMLINKS)` on the canonical path.
//!
//! What it does not do: it does not run anything, and it cannot protect governing
//! files from a `full-access` run, which is unconfined by definition (see
//! docs/escalation.md). Reading a malformed log is an error, never a guess: a corrupt or
//! unknown event fails closed rather than falling back to the default mode.

use crate::mode::Mode;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

mod governing;

pub use governing::{canonical_location, resolve_trail, GoverningFileError, GoverningFiles, GoverningKind, Trail};
pub(crate) use governing::{open_governing, OpenFor};

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
    /// A standing narrow grant for every later call of the session (see
    /// [`standing_grants`]).
    Grant {
        /// What is granted.
        grant: crate::vocab::Grant,
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
    /// A `grant` event stamped now.
    pub fn grant(grant: crate::vocab::Grant) -> SessionEvent {
        SessionEvent { at: rfc3339_utc(SystemTime::now()), change: SessionChange::Grant { grant } }
    }

    /// A `set-mode` event stamped now.
    pub fn set_mode(mode: Mode) -> SessionEvent {
        SessionEvent { at: rfc3339_utc(SystemTime::now()), change: SessionChange::SetMode { mode } }
    }
}

/// The effective mode after `events`, starting from `default`. Pure: the same events
/// always give the same mode, and `effective_mode(d, a ++ b) ==
/// effective_mode(effective_mode(d, a), b)`.
pub fn effective_mode(default: Mode, events: &[SessionEvent]) -> Mode {
    events.iter().fold(default, |mode, event| match event.change {
        SessionChange::SetMode { mode } => mode,
        SessionChange::Grant { .. } => mode,
    })
}

/// The standing narrow grants of a session (pure): every `grant` event, in order,
/// without repeats. Each applies to confined calls only and changes only its one thing
/// (a protected path becomes writable, or the network turns on); the mode still comes
/// from [`effective_mode`], and a call may still only narrow it.
pub fn standing_grants(events: &[SessionEvent]) -> Vec<crate::vocab::Grant> {
    let mut out: Vec<crate::vocab::Grant> = Vec::new();
    for e in events {
        if let SessionChange::Grant { grant } = &e.change {
            if !out.contains(grant) {
                out.push(grant.clone());
            }
        }
    }
    out
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
    /// The file is not a safe session file (not regular, not ours, hard-linked, or
    /// reached through a symlink that changed).
    #[error(transparent)]
    Governing(#[from] GoverningFileError),
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
            SessionError::Governing(e) => e.code(),
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

/// Read every event of the session log at `path`, through a descriptor opened on its
/// canonical, symlink-free location after checking that it is a regular file owned by
/// the caller with a single link (not `/dev/null`, a FIFO, or someone else's file).
pub fn read_events(path: &Path) -> Result<Vec<SessionEvent>, SessionError> {
    let file = match open_governing(GoverningKind::SessionFile, path, OpenFor::Read) {
        Ok(f) => f,
        Err(GoverningFileError::Unresolvable { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(SessionError::NotFound { path: path.to_path_buf() })
        }
        Err(e) => return Err(SessionError::Governing(e)),
    };
    let mut text = String::new();
    std::io::Read::read_to_string(&mut &file, &mut text).map_err(|source| SessionError::Io {
        what: "reading",
        path: path.to_path_buf(),
        source,
    })?;
    parse_events(path, &text)
}

/// Append `bytes` (one whole record, ending in a newline) to `file`, opened `O_APPEND`,
/// with one `write`. If the file does not end in a newline (an earlier append was cut
/// short, e.g. by a full disk) a newline is written first, so this record starts on a
/// line of its own. A short or failed write is undone by truncating back to the length
/// the file had, when nobody else appended meanwhile; either way the error is returned.
pub(crate) fn append_record(file: &std::fs::File, record: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let before = file.metadata()?.len();
    let mut line = Vec::with_capacity(record.len() + 1);
    if before > 0 {
        let mut last = [0u8; 1];
        file.read_exact_at(&mut last, before - 1)?;
        if last[0] != b'\n' {
            line.push(b'\n');
        }
    }
    line.extend_from_slice(record);
    let undo = |written: usize| {
        if file.metadata().is_ok_and(|m| m.len() == before + written as u64) {
            let _ = file.set_len(before);
        }
    };
    match (&mut &*file).write(&line) {
        Ok(n) if n == line.len() => Ok(()),
        Ok(n) => {
            undo(n);
            Err(std::io::Error::new(
                std::io::ErrorKind::WriteZero,
                format!("short write ({n} of {} bytes)", line.len()),
            ))
        }
        Err(e) => {
            undo(0);
            Err(e)
        }
    }
}

/// Append one JSON line to `file` (see [`append_record`]).
pub(crate) fn append_json_line(file: &std::fs::File, value: &impl Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    append_record(file, &line)
}

/// Append `event` to the session log at `path` (creating it 0600), through a
/// descriptor opened on its canonical, symlink-free location after the same checks as
/// [`read_events`].
pub fn append_event(path: &Path, event: &SessionEvent) -> Result<(), SessionError> {
    let file = open_governing(GoverningKind::SessionFile, path, OpenFor::Append)?;
    append_json_line(&file, event).map_err(|source| SessionError::Io {
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

#[cfg(test)]
mod tests {
    #[test]
    fn standing_grants_are_every_grant_once_and_leave_the_mode() {
        use crate::vocab::Grant;
        let git = Grant::Write { path: "/ws/.git".into() };
        let events = vec![
            SessionEvent::grant(git.clone()),
            SessionEvent::set_mode(Mode::ReadOnly),
            SessionEvent::grant(Grant::Network),
            SessionEvent::grant(git.clone()),
        ];
        assert_eq!(standing_grants(&events), vec![git, Grant::Network]);
        assert_eq!(effective_mode(Mode::WorkspaceWrite, &events), Mode::ReadOnly);
        let line = serde_json::to_string(&events[0]).unwrap();
        assert!(line.contains(r#""event":"grant""#) && line.contains(r#""kind":"write""#), "{line}");
    }

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

    #[test]
    fn trail_records_every_symlink_followed() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::fs::create_dir(real.join("ws")).unwrap();
        std::fs::create_dir(real.join("gov")).unwrap();
        std::fs::write(real.join("gov/f"), "").unwrap();
        // ws/a -> ../gov (relative), gov/l -> f
        std::os::unix::fs::symlink("../gov", real.join("ws/a")).unwrap();
        std::os::unix::fs::symlink("f", real.join("gov/l")).unwrap();
        let t = resolve_trail(&real.join("ws/a/l")).unwrap();
        assert_eq!(t.canonical, real.join("gov/f"));
        assert_eq!(t.symlinks, vec![real.join("ws/a"), real.join("gov/l")]);
        std::os::unix::fs::symlink("loop", real.join("loop")).unwrap();
        assert_eq!(resolve_trail(&real.join("loop")).unwrap_err().raw_os_error(), Some(libc::ELOOP));
    }

    #[test]
    fn a_cut_short_record_does_not_swallow_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        std::fs::write(&path, "{\"cut\":").unwrap();
        let file = open_governing(GoverningKind::AuditLog, &path, OpenFor::Append).unwrap();
        append_record(&file, b"{\"n\":1}\n").unwrap();
        append_record(&file, b"{\"n\":2}\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"cut\":\n{\"n\":1}\n{\"n\":2}\n");
    }

    #[test]
    fn governing_data_files_must_be_regular() {
        let err = open_governing(GoverningKind::SessionFile, Path::new("/dev/null"), OpenFor::Read).unwrap_err();
        assert!(matches!(err, GoverningFileError::NotRegular { what: "a character device", .. }), "{err}");
        assert_eq!(err.code(), "GOVERNING_FILE_UNSAFE");
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = open_governing(GoverningKind::AuditLog, &fifo, OpenFor::Append).unwrap_err();
        assert!(matches!(err, GoverningFileError::NotRegular { what: "a FIFO", .. }), "{err}");
    }
}
