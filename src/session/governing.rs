//! The governing-file guard: session files, the escalation audit log and the approver
//! program decide how later runs are confined, so no run may be able to write them.
//! [`GoverningFiles::check`] resolves each path component by component
//! ([`resolve_trail`]) and refuses a policy that could reach one (see the parent
//! module's docs for the full list of refusals); [`open_governing`] opens a session
//! file or audit log with `openat2(RESOLVE_NO_SYMLINKS)` on its canonical path.
//!
//! What it does not do: it cannot protect governing files from a `full-access` run,
//! which is unconfined by definition (docs/escalation.md).

use super::GOVERNING_FILE_MODE;
use crate::mode::Mode;
use crate::policy::ExecutionPolicy;
use serde::Serialize;
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

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
    let unresolvable = |source| GoverningFileError::Unresolvable { kind, file: path.to_path_buf(), source };
    let canonical = resolve_trail(path).map_err(unresolvable)?.canonical;
    if let Ok(meta) = std::fs::symlink_metadata(&canonical) {
        inspect(kind, path, &meta)?;
    }
    let fd = open_no_symlinks(&canonical, how).map_err(|errno| match errno {
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

/// Open `canonical` without following a symlink in any component.
#[cfg(target_os = "linux")]
fn open_no_symlinks(canonical: &Path, how: OpenFor) -> nix::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
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
    nix::fcntl::openat2(nix::fcntl::AT_FDCWD, canonical, how)
}

/// Open `canonical` without following a symlink in any component: `O_NOFOLLOW_ANY`
/// (macOS 11). macOS has no `O_PATH`: a pin opens the file for reading.
#[cfg(not(target_os = "linux"))]
fn open_no_symlinks(canonical: &Path, how: OpenFor) -> nix::Result<std::os::fd::OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    match how {
        OpenFor::Read | OpenFor::Pin => options.read(true),
        OpenFor::Append => options.read(true).append(true).create(true).mode(GOVERNING_FILE_MODE),
    };
    options.custom_flags(libc::O_NOFOLLOW_ANY | libc::O_NONBLOCK | libc::O_NOCTTY);
    let file =
        options.open(canonical).map_err(|e| nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
    Ok(file.into())
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
