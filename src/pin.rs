//! Path pinning: every directory a policy names, resolved once into an open file.
//!
//! A resolved [`ExecutionPolicy`](crate::policy::ExecutionPolicy) names its workspace,
//! writable roots, protected paths
//! and the working directory by canonical path. Between that check and the moment the
//! child mounts, grants and `chdir`s, a concurrent command (another run in the same
//! workspace) could swap a component of such a path for a symlink and redirect a grant
//! outside the checked tree. [`ExecutionPolicy::pin`](crate::policy::ExecutionPolicy::pin)
//! closes that window:
//!
//! 1. Each path is opened with `openat2(O_PATH, RESOLVE_NO_SYMLINKS)`: a symlink in ANY
//!    component fails the run (fail closed) instead of being followed. A canonical path
//!    has no symlinks, so a failure means something changed since the check.
//! 2. The open file's identity (`st_dev`, `st_ino`) is recorded while the fd keeps the
//!    inode alive (so the numbers cannot be reused).
//! 3. Everything downstream uses the fd or verifies against the identity, never the
//!    path string alone: Landlock rules are built on the fds; the child checks that each
//!    detached mount clone and each mount target is the pinned file and attaches onto
//!    the opened target; writable/read-only attributes are set on the attached tree's
//!    fd; after `chdir` the child checks the working directory's identity; bubblewrap
//!    receives the sources as fds (`--bind-fd`).
//!
//! What it does not do: it does not decide what may be writable (that is
//! [`crate::policy`], which also says what to pin). A rename of real directories (no symlink) inside a checked tree
//! only ever yields another directory inside that same tree, which the check already
//! allowed; protected paths are the exception, which is why every git directory
//! under a writable root is found by a walk at each resolution rather than trusted by
//! name (a gitdir moved aside by an earlier run is still found and protected).

use crate::error::PolicyError;
#[cfg(target_os = "linux")]
pub use cordon_stage::FileIdentity;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// One pinned path. Off Linux only the pinning itself is used (it refuses a path
/// that became a symlink); the direct launch passes paths, not descriptors.
#[derive(Debug)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub struct Pin {
    /// An `O_PATH` fd for it, opened without following symlinks; kept open for the
    /// paths whose grants are built on it (the workspace, writable roots, working
    /// directory), closed once the identity is read for the protected layout (the
    /// child checks those by identity only: thousands of repositories must not
    /// exhaust cordon's descriptors).
    pub fd: Option<OwnedFd>,
    /// Its identity while `fd` is open.
    pub id: FileIdentity,
}

/// Every path of one run's policy, pinned (see the module docs).
#[derive(Debug, Default)]
pub struct Pins {
    pins: Vec<Pin>,
    index: std::collections::HashMap<PathBuf, usize>,
}

/// Open `path` (absolute) without following a symlink in any component.
pub fn open_no_symlinks(path: &Path) -> std::io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    if !path.is_absolute() {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    #[cfg(target_os = "linux")]
    return cordon_stage::open_path_no_symlinks(libc::AT_FDCWD, &c);
    #[cfg(not(target_os = "linux"))]
    return portable::open_path_no_symlinks(&c);
}

/// The same on macOS, without the stage crate: `O_NOFOLLOW_ANY` (macOS 11) refuses a
/// symlink in any component, as `RESOLVE_NO_SYMLINKS` does on Linux.
#[cfg(not(target_os = "linux"))]
mod portable {
    use std::ffi::CStr;
    use std::os::fd::{OwnedFd, RawFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

    /// A file's identity (`st_dev`, `st_ino`), as the stage crate's on Linux.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct FileIdentity {
        /// `st_dev`.
        pub dev: u64,
        /// `st_ino`.
        pub ino: u64,
    }

    impl FileIdentity {
        /// The identity of an open file. Only the fds this module opened are passed in.
        pub fn of_fd(fd: RawFd) -> std::io::Result<FileIdentity> {
            let path = std::path::PathBuf::from(format!("/dev/fd/{fd}"));
            let meta = std::fs::metadata(path)?;
            Ok(FileIdentity { dev: meta.dev(), ino: meta.ino() })
        }
    }

    pub fn open_path_no_symlinks(path: &CStr) -> std::io::Result<OwnedFd> {
        let path = std::path::Path::new(std::ffi::OsStr::from_bytes(path.to_bytes()));
        let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW_ANY).open(path)?;
        Ok(f.into())
    }
}
#[cfg(not(target_os = "linux"))]
pub use portable::FileIdentity;

impl Pins {
    /// Pin one more path (a no-op if it is pinned already).
    pub fn add(&mut self, path: &Path) -> Result<(), PolicyError> {
        self.add_with(path, true)
    }

    /// Pin one more path by identity only (its fd is closed once the identity is read).
    pub fn add_identity(&mut self, path: &Path) -> Result<(), PolicyError> {
        self.add_with(path, false)
    }

    fn add_with(&mut self, path: &Path, keep_fd: bool) -> Result<(), PolicyError> {
        let known = self.index.get(path).copied();
        if known.is_some_and(|i| self.pins[i].fd.is_some() || !keep_fd) {
            return Ok(());
        }
        let changed = |source| PolicyError::Changed { path: path.to_path_buf(), source };
        let fd = open_no_symlinks(path).map_err(changed)?;
        let id = FileIdentity::of_fd(fd.as_raw_fd()).map_err(changed)?;
        match known {
            // Pinned by identity before, now needed open: the same file, or a change.
            Some(i) if self.pins[i].id != id => {
                return Err(changed(std::io::Error::from_raw_os_error(libc::ESTALE)));
            }
            Some(i) => self.pins[i].fd = Some(fd),
            None => {
                self.index.insert(path.to_path_buf(), self.pins.len());
                self.pins.push(Pin { fd: keep_fd.then_some(fd), id });
            }
        }
        Ok(())
    }

    fn get(&self, path: &Path) -> Option<&Pin> {
        self.index.get(path).map(|i| &self.pins[*i])
    }

    /// The pinned identity of `path`.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub fn id(&self, path: &Path) -> Option<FileIdentity> {
        self.get(path).map(|p| p.id)
    }

    /// The pinned fd of `path`.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub fn fd(&self, path: &Path) -> Option<BorrowedFd<'_>> {
        self.get(path).and_then(|p| p.fd.as_ref()).map(|fd| fd.as_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::Mode;
    use crate::policy::ExecutionPolicy;

    fn policy(ws: &Path) -> ExecutionPolicy {
        ExecutionPolicy {
            mode: Mode::WorkspaceWrite,
            workspace: ws.to_path_buf(),
            writable_roots: vec![],
            protected: vec![],
            network: false,
            best_effort: false,
            accept_gaps: Vec::new(),
            allow_unix_sockets: Vec::new(),
            allow_hosts: Default::default(),
            git: Default::default(),
        }
    }

    #[test]
    fn pins_real_directories_and_refuses_a_symlink_in_any_component() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let ws = base.join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        let pins = policy(&ws).pin(&ws.join("sub")).unwrap();
        let meta = std::fs::metadata(ws.join("sub")).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(pins.id(&ws.join("sub")), Some(FileIdentity { dev: meta.dev(), ino: meta.ino() }));
        assert!(pins.fd(&ws).is_some());

        // A component swapped for a symlink (to a real directory) is refused.
        let elsewhere = base.join("elsewhere");
        std::fs::create_dir_all(elsewhere.join("sub")).unwrap();
        std::fs::remove_dir(ws.join("sub")).unwrap();
        std::fs::remove_dir(&ws).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &ws).unwrap();
        let err = policy(&ws).pin(&ws.join("sub")).unwrap_err();
        assert!(matches!(err, PolicyError::Changed { .. }), "{err}");
    }
}
