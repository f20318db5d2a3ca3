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
use crate::policy::ExecutionPolicy;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
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

// ------------------------------------------------------------------ governing files

/// What a governing file is for (named in errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum GoverningKind {
    /// A session log (`--session`).
    SessionFile,
    /// The escalation audit log (`--audit-log`).
    AuditLog,
    /// The approver program (`--approver`), which runs unsandboxed.
    ApproverProgram,
    /// The interpreter named by the approver program's `#!` line (for `#!/usr/bin/env
    /// NAME`, both `env` and NAME resolved on the approver's fixed `PATH`).
    ApproverInterpreter,
    /// A configuration file.
    Config,
}

impl GoverningKind {
    /// Whether the file holds data cordon reads or appends (so it must be a regular
    /// file owned by the caller), rather than a program it runs.
    fn is_data(self) -> bool {
        matches!(self, GoverningKind::SessionFile | GoverningKind::AuditLog | GoverningKind::Config)
    }
}

impl fmt::Display for GoverningKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GoverningKind::SessionFile => "session file",
            GoverningKind::AuditLog => "audit log",
            GoverningKind::ApproverProgram => "approver program",
            GoverningKind::ApproverInterpreter => "approver interpreter",
            GoverningKind::Config => "config file",
        })
    }
}

/// A governing file the policy of a run would let the run change, or that is not the
/// kind of file it must be.
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
    /// Resolving the path given follows a symlink that lies inside the workspace or a
    /// `--writable` root (in any mode: a workspace-write run there could re-point it),
    /// so a command could change where the path leads.
    #[error("the {kind} `{file}` is reached through `{via}`, inside `{root}`, which a {mode} run may write; a command could re-point it. Name the file by a path outside the workspace and every --writable root")]
    ThroughWritableRoot {
        /// What the file is for.
        kind: GoverningKind,
        /// The path given.
        file: PathBuf,
        /// The location inside the root that the resolution visits.
        via: PathBuf,
        /// The writable root.
        root: PathBuf,
        /// The mode of the run.
        mode: Mode,
    },
    /// It lies in cordon's private state directory, where the spill files of confined
    /// commands (output they control) are kept.
    #[error("the {kind} `{file}` (canonical `{canonical}`) lies inside cordon's state directory `{dir}`, which holds files written by confined commands (output spills); keep governing files elsewhere")]
    InsideStateDir {
        /// What the file is for.
        kind: GoverningKind,
        /// The path given.
        file: PathBuf,
        /// Its canonical path.
        canonical: PathBuf,
        /// The state directory.
        dir: PathBuf,
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
    /// It is not a regular file (`/dev/null`, a FIFO, a socket, a directory...).
    #[error("the {kind} `{file}` is {what}, not a regular file; records written to it would be lost or read from somewhere else")]
    NotRegular {
        /// What the file is for.
        kind: GoverningKind,
        /// The path given.
        file: PathBuf,
        /// What it is instead.
        what: &'static str,
    },
    /// It belongs to another user.
    #[error("the {kind} `{file}` belongs to uid {owner}, not to the caller (uid {euid})")]
    NotOwned {
        /// What the file is for.
        kind: GoverningKind,
        /// The path given.
        file: PathBuf,
        /// Its owner.
        owner: u32,
        /// The caller.
        euid: u32,
    },
    /// It is no longer the file that was checked (replaced, or a symlink appeared on its
    /// canonical path).
    #[error("the {kind} `{file}` changed after it was checked ({why}); refusing to use it")]
    Changed {
        /// What the file is for.
        kind: GoverningKind,
        /// The path given.
        file: PathBuf,
        /// What differs.
        why: String,
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
    /// The stable error code: `GOVERNING_FILE_WRITABLE` when a run could change the
    /// file (inside or through a writable root, in the state directory, hard-linked),
    /// `GOVERNING_FILE_UNSAFE` when it is not a regular file owned by the caller or
    /// changed after the check, `GOVERNING_FILE_UNRESOLVABLE` otherwise.
    pub fn code(&self) -> &'static str {
        match self {
            GoverningFileError::InsideWritableRoot { .. }
            | GoverningFileError::ThroughWritableRoot { .. }
            | GoverningFileError::InsideStateDir { .. }
            | GoverningFileError::HardLinked { .. } => "GOVERNING_FILE_WRITABLE",
            GoverningFileError::NotRegular { .. }
            | GoverningFileError::NotOwned { .. }
            | GoverningFileError::Changed { .. } => "GOVERNING_FILE_UNSAFE",
            GoverningFileError::Unresolvable { .. } => "GOVERNING_FILE_UNRESOLVABLE",
        }
    }
}

/// The files that govern a run, checked against every confined policy it may run at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoverningFiles {
    files: Vec<(GoverningKind, PathBuf)>,
    state_dirs: Vec<PathBuf>,
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

    /// Refuse governing files inside `dir` in every mode: a directory holding files
    /// that confined commands fill (cordon's state directory with its output spills).
    pub fn refuse_under(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.state_dirs.push(dir.into());
        self
    }

    /// The files, in the order added.
    pub fn files(&self) -> &[(GoverningKind, PathBuf)] {
        &self.files
    }

    /// Refuse `policy` if a governing file lies inside its workspace or one of its
    /// `--writable` roots (in every mode: another call in that workspace could write it),
    /// or if resolving its path follows a symlink inside them,
    /// and refuse any governing file that has several hard links, lies in a refused
    /// directory ([`GoverningFiles::refuse_under`]), or — for data files (session,
    /// audit log) — exists but is not a regular file owned by the caller.
    pub fn check(&self, policy: &ExecutionPolicy) -> Result<(), GoverningFileError> {
        // The workspace and the --writable roots in every mode, not only this call's own
        // writable set: any ordinary workspace-write call in the same workspace can
        // rewrite a file there (a read-only call's session or approver included).
        let writable: Vec<PathBuf> =
            std::iter::once(policy.workspace.clone()).chain(policy.writable_roots.iter().cloned()).collect();
        let state_dirs: Vec<PathBuf> =
            self.state_dirs.iter().map(|d| d.canonicalize().unwrap_or_else(|_| d.clone())).collect();
        for (kind, file) in &self.files {
            let unresolvable = |source| GoverningFileError::Unresolvable { kind: *kind, file: file.clone(), source };
            let trail = resolve_trail(file).map_err(unresolvable)?;
            let canonical = trail.canonical.clone();
            if let Some(root) = writable.iter().find(|root| canonical.starts_with(root)) {
                return Err(GoverningFileError::InsideWritableRoot {
                    kind: *kind,
                    file: file.clone(),
                    canonical,
                    root: root.clone(),
                    mode: policy.mode,
                });
            }
            // A symlink followed on the way inside the workspace or a --writable root is
            // refused in every mode: any workspace-write run there could re-point it.
            let linkable: Vec<&PathBuf> = std::iter::once(&policy.workspace).chain(&policy.writable_roots).collect();
            for via in &trail.symlinks {
                if let Some(root) = linkable.iter().find(|root| via.starts_with(root)) {
                    return Err(GoverningFileError::ThroughWritableRoot {
                        kind: *kind,
                        file: file.clone(),
                        via: via.clone(),
                        root: (*root).clone(),
                        mode: Mode::WorkspaceWrite,
                    });
                }
            }
            if let Some(dir) = state_dirs.iter().find(|d| canonical.starts_with(d)) {
                return Err(GoverningFileError::InsideStateDir {
                    kind: *kind,
                    file: file.clone(),
                    canonical,
                    dir: dir.clone(),
                });
            }
            if let Ok(meta) = std::fs::symlink_metadata(&canonical) {
                inspect(*kind, file, &meta)?;
            }
        }
        Ok(())
    }
}

/// The checks on an existing governing file's metadata (of the file itself, never of a
/// symlink to it): regular, single link; for data files also owned by the caller.
fn inspect(kind: GoverningKind, file: &Path, meta: &std::fs::Metadata) -> Result<(), GoverningFileError> {
    use std::os::unix::fs::FileTypeExt;
    let ft = meta.file_type();
    if !ft.is_file() {
        let what = if ft.is_char_device() {
            "a character device"
        } else if ft.is_block_device() {
            "a block device"
        } else if ft.is_fifo() {
            "a FIFO"
        } else if ft.is_socket() {
            "a socket"
        } else if ft.is_dir() {
            "a directory"
        } else if ft.is_symlink() {
            "a symbolic link"
        } else {
            "not a regular file"
        };
        return Err(GoverningFileError::NotRegular { kind, file: file.to_path_buf(), what });
    }
    if kind != GoverningKind::ApproverInterpreter && meta.nlink() > 1 {
        return Err(GoverningFileError::HardLinked { kind, file: file.to_path_buf(), links: meta.nlink() });
    }
    let euid = nix::unistd::geteuid().as_raw();
    if kind.is_data() && meta.uid() != euid {
        return Err(GoverningFileError::NotOwned { kind, file: file.to_path_buf(), owner: meta.uid(), euid });
    }
    Ok(())
}

/// How [`open_governing`] opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenFor {
    /// Read it (it must exist).
    Read,
    /// Append to it (read-write, to see whether it ends in a newline), creating it 0600
    /// if missing (its directory must exist).
    Append,
    /// Hold it (`O_PATH`) to compare its identity later.
    Pin,
}

/// Open the governing file `path` once, by its canonical location and without
/// following any symlink on the way (`openat2` with `RESOLVE_NO_SYMLINKS`: a symlink
/// that appeared after the canonical path was computed is an error, not followed), and
/// check what was opened ([`GoverningFiles::check`]'s metadata rules, on the open
/// descriptor). A FIFO does not block the open (`O_NONBLOCK`); it is refused after.
pub(crate) fn open_governing(
    kind: GoverningKind,
    path: &Path,
    how: OpenFor,
) -> Result<std::fs::File, GoverningFileError> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
    let unresolvable = |source| GoverningFileError::Unresolvable { kind, file: path.to_path_buf(), source };
    let canonical = resolve_trail(path).map_err(unresolvable)?.canonical;
    if let Ok(meta) = std::fs::symlink_metadata(&canonical) {
        inspect(kind, path, &meta)?;
    }
    // openat2 refuses flags that do not apply (O_PATH takes only O_CLOEXEC here).
    let flags = OFlag::O_CLOEXEC
        | match how {
            OpenFor::Read => OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY,
            OpenFor::Append => OFlag::O_RDWR | OFlag::O_APPEND | OFlag::O_CREAT | OFlag::O_NONBLOCK | OFlag::O_NOCTTY,
            OpenFor::Pin => OFlag::O_PATH,
        };
    let mut how =
        OpenHow::new().flags(flags).resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    if flags.contains(OFlag::O_CREAT) {
        how = how.mode(nix::sys::stat::Mode::from_bits_truncate(GOVERNING_FILE_MODE));
    }
    let fd = nix::fcntl::openat2(nix::fcntl::AT_FDCWD, &canonical, how).map_err(|errno| match errno {
        nix::errno::Errno::ELOOP => GoverningFileError::Changed {
            kind,
            file: path.to_path_buf(),
            why: format!("a symbolic link appeared on its canonical path `{}`", canonical.display()),
        },
        other => unresolvable(std::io::Error::from(other)),
    })?;
    let file = std::fs::File::from(fd);
    let meta = file.metadata().map_err(unresolvable)?;
    inspect(kind, path, &meta)?;
    Ok(file)
}

/// Where resolving a path leads, and every location it visited on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trail {
    /// Each location looked up, in order, as a canonical directory plus one name: the
    /// directories walked through, every symlink followed (the link itself), and the
    /// final file.
    pub visited: Vec<PathBuf>,
    /// The symlinks followed, where each lies (a subset of `visited`).
    pub symlinks: Vec<PathBuf>,
    /// Where the path leads: the canonical path of the file when it exists, else of its
    /// nearest existing ancestor with the missing components appended.
    pub canonical: PathBuf,
}

/// The most symlinks followed while resolving one path (Linux's own limit).
const MAX_SYMLINKS: usize = 40;

/// Resolve `path` component by component as the kernel would (symlinks followed,
/// relative ones against the directory holding them; `..` of a canonical directory is
/// its parent), recording every location visited. Components below the first missing
/// one cannot be symlinks and are appended lexically.
pub fn resolve_trail(path: &Path) -> std::io::Result<Trail> {
    let absolute = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir()?.join(path) };
    let mut pending: std::collections::VecDeque<std::ffi::OsString> = std::collections::VecDeque::new();
    let push_front = |pending: &mut std::collections::VecDeque<std::ffi::OsString>, p: &Path| {
        let comps: Vec<std::ffi::OsString> = p
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_os_string()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect();
        for c in comps.into_iter().rev() {
            pending.push_front(c);
        }
    };
    push_front(&mut pending, &absolute);
    let mut cur = PathBuf::from("/");
    let mut visited = Vec::new();
    let mut symlinks = Vec::new();
    let mut links = 0usize;
    let mut missing = false;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            cur.pop();
            continue;
        }
        let next = cur.join(&name);
        visited.push(next.clone());
        if missing {
            cur = next;
            continue;
        }
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(std::io::Error::from_raw_os_error(libc::ELOOP));
                }
                let target = std::fs::read_link(&next)?;
                symlinks.push(next.clone());
                if target.is_absolute() {
                    cur = PathBuf::from("/");
                }
                push_front(&mut pending, &target);
            }
            Ok(_) => cur = next,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                missing = true;
                cur = next;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Trail { visited, symlinks, canonical: cur })
}

/// Where `path` is or would be created: the canonical path of the file when it exists,
/// else of its nearest existing ancestor with the missing components appended (missing
/// components cannot be symlinks, so `.` and `..` among them are resolved lexically).
pub fn canonical_location(path: &Path) -> std::io::Result<PathBuf> {
    resolve_trail(path).map(|t| t.canonical)
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
