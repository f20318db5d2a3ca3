//! Path resolution in the command's own view (its root, its working directory or the
//! directory descriptor it passed; symbolic links followed as the kernel follows them)
//! and the file-system queries the judge makes.

use super::Id;
use std::collections::VecDeque;
use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How many symbolic links one path may cross (the kernel's limit).
pub(super) const MAX_SYMLINKS: usize = 40;

/// The longest path argument read from a command's memory.
pub(super) const PATH_MAX: usize = 4096;

/// Read a NUL-terminated path from the task's memory, page by page.
pub(super) fn read_path(pid: u32, mut addr: u64) -> Option<Vec<u8>> {
    if addr == 0 {
        return None;
    }
    let mut out = Vec::new();
    while out.len() < PATH_MAX {
        let to_page_end = 4096 - (addr as usize % 4096);
        let mut buf = [0u8; 4096];
        let want = to_page_end.min(PATH_MAX - out.len());
        let n = crate::tracee::read_task_memory(pid, addr, &mut buf[..want])?;
        if n == 0 {
            return None;
        }
        if let Some(end) = buf[..n].iter().position(|b| *b == 0) {
            out.extend_from_slice(&buf[..end]);
            return Some(out);
        }
        out.extend_from_slice(&buf[..n]);
        addr += n as u64;
    }
    None
}

/// A resolved path: its directory (an `O_PATH` fd in the command's view), the last
/// component, and the path as the command's view shows it.
pub(super) struct Resolved {
    pub(super) dir: OwnedFd,
    pub(super) name: Vec<u8>,
    pub(super) shown: PathBuf,
}

/// Resolve `path` from `base` (shown as `base_shown`) inside `root`, following
/// symbolic links the way the kernel does for the command: absolute ones from its
/// root, `..` never above it; the last component followed when `follow_last`.
pub(super) fn resolve(
    root: &OwnedFd,
    root_id: Id,
    base: Option<OwnedFd>,
    base_shown: PathBuf,
    path: &[u8],
    follow_last: bool,
) -> Option<Resolved> {
    let mut queue: VecDeque<Vec<u8>> =
        path.split(|b| *b == b'/').filter(|c| !c.is_empty() && *c != b".").map(|c| c.to_vec()).collect();
    let trailing_dir = path.ends_with(b"/");
    let mut shown = base_shown;
    let mut links = 0usize;
    if queue.is_empty() {
        // "/" or "." itself: the object is a directory, never created or written.
        return None;
    }
    // Fast path: no `..` and no symbolic link before the last component: the
    // directory opens in one `openat2` that refuses to cross a link (`ELOOP` sends the
    // path through the walk below).
    if !queue.iter().any(|c| c == b"..") {
        let last = queue.back().cloned().unwrap_or_default();
        let from = base.as_ref().unwrap_or(root);
        let dir = if queue.len() == 1 {
            from.try_clone().ok()
        } else {
            let parent: Vec<u8> = queue.iter().take(queue.len() - 1).cloned().collect::<Vec<_>>().join(&b'/');
            CString::new(parent).ok().and_then(|p| cordon_stage::open_path_no_symlinks(from.as_raw_fd(), &p).ok())
        };
        if let Some(dir) = dir {
            let last_is_link =
                || fstatat_nofollow(dir.as_fd(), &last).is_some_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK);
            if !(follow_last || trailing_dir) || !last_is_link() {
                for c in queue.iter() {
                    shown.push(OsStr::from_bytes(c));
                }
                return Some(Resolved { dir, name: last, shown });
            }
        }
    }
    let mut cur = match base {
        Some(b) => b,
        None => root.try_clone().ok()?,
    };
    loop {
        let c = queue.pop_front()?;
        let last = queue.is_empty();
        if c == b".." {
            let st = fstat(cur.as_fd())?;
            if (st.st_dev, st.st_ino) != root_id {
                cur = openat_name(cur.as_fd(), b"..", libc::O_PATH | libc::O_DIRECTORY).ok()?;
                shown.pop();
            }
            if last {
                return None;
            }
            continue;
        }
        if last && !follow_last && !trailing_dir {
            return Some(Resolved { dir: cur, shown: shown.join(OsStr::from_bytes(&c)), name: c });
        }
        match fstatat_nofollow(cur.as_fd(), &c) {
            None if last => return Some(Resolved { dir: cur, shown: shown.join(OsStr::from_bytes(&c)), name: c }),
            None => return None,
            Some(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => {
                links += 1;
                if links > MAX_SYMLINKS {
                    return None;
                }
                let target = readlinkat(cur.as_fd(), &c)?;
                if target.first() == Some(&b'/') {
                    cur = root.try_clone().ok()?;
                    shown = PathBuf::from("/");
                }
                let mut parts: Vec<Vec<u8>> =
                    target.split(|b| *b == b'/').filter(|p| !p.is_empty() && *p != b".").map(|p| p.to_vec()).collect();
                while let Some(p) = parts.pop() {
                    queue.push_front(p);
                }
                if queue.is_empty() {
                    return None;
                }
            }
            Some(_) if last => return Some(Resolved { dir: cur, shown: shown.join(OsStr::from_bytes(&c)), name: c }),
            Some(_) => {
                cur = openat_name(cur.as_fd(), &c, libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW).ok()?;
                shown.push(OsStr::from_bytes(&c));
            }
        }
    }
}

pub(super) fn open_path(p: &str) -> std::io::Result<OwnedFd> {
    let c = CString::new(p).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    nix::fcntl::open(
        c.as_c_str(),
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(std::io::Error::from)
}

pub(super) fn openat_path(dir: BorrowedFd<'_>, rel: &Path, flags: i32) -> std::io::Result<OwnedFd> {
    openat_name(dir, rel.as_os_str().as_bytes(), flags)
}

pub(super) fn openat_name(dir: BorrowedFd<'_>, name: &[u8], flags: i32) -> std::io::Result<OwnedFd> {
    let c = CString::new(name).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    nix::fcntl::openat(
        dir,
        c.as_c_str(),
        nix::fcntl::OFlag::from_bits_retain(flags | libc::O_CLOEXEC),
        nix::sys::stat::Mode::empty(),
    )
    .map_err(std::io::Error::from)
}

pub(super) fn dup(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    fd.try_clone_to_owned().ok()
}

pub(super) fn fstat(fd: BorrowedFd<'_>) -> Option<libc::stat> {
    nix::sys::stat::fstat(fd).ok()
}

pub(super) fn fstatat_nofollow(dir: BorrowedFd<'_>, name: &[u8]) -> Option<libc::stat> {
    let c = CString::new(name).ok()?;
    nix::sys::stat::fstatat(dir, c.as_c_str(), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).ok()
}

pub(super) fn readlinkat(dir: BorrowedFd<'_>, name: &[u8]) -> Option<Vec<u8>> {
    let c = CString::new(name).ok()?;
    nix::fcntl::readlinkat(dir, c.as_c_str()).ok().map(|s| s.as_bytes().to_vec())
}

pub(super) fn mount_read_only(fd: BorrowedFd<'_>) -> bool {
    nix::sys::statvfs::fstatvfs(fd).is_ok_and(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
}

pub(super) fn id_of_fd(fd: BorrowedFd<'_>) -> Option<Id> {
    fstat(fd).map(|s| (s.st_dev, s.st_ino))
}

pub(super) fn id_of_path(p: &Path) -> Option<Id> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

/// `AT_FDCWD` as a descriptor, for paths that are absolute (`/proc/PID/cwd/...`).
pub(super) fn cwd_sentinel() -> BorrowedFd<'static> {
    nix::fcntl::AT_FDCWD
}

/// Whether the directory `name` in `dir` has no entries (an unreadable one counts as
/// not empty: the judge then leaves the answer to the kernel).
pub(super) fn dir_is_empty(dir: BorrowedFd<'_>, name: &[u8]) -> bool {
    let Ok(fd) = openat_name(dir, name, libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW) else { return false };
    match std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd())) {
        Ok(mut entries) => entries.next().is_none(),
        Err(_) => false,
    }
}

/// Whether the permission checks alone (mode bits and ACLs, for this thread's
/// credentials: the supervisor thread drops root's overrides) refuse `mode` on `name`
/// in `dir` (`EACCES`; any other answer, a read-only mount's `EROFS` included, is not
/// theirs).
pub(super) fn dac_refuses(dir: BorrowedFd<'_>, name: &[u8], mode: nix::unistd::AccessFlags, follow: bool) -> bool {
    let Ok(c) = CString::new(name) else { return false };
    let flags = if follow {
        nix::fcntl::AtFlags::AT_EACCESS
    } else {
        nix::fcntl::AtFlags::AT_EACCESS | nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW
    };
    matches!(nix::unistd::faccessat(dir, c.as_c_str(), mode, flags), Err(nix::errno::Errno::EACCES))
}

/// `statx` of `name` in `dir` (following a last link when `follow`), with the mount.
pub(super) fn statx_at(dir: BorrowedFd<'_>, name: &[u8], follow: bool) -> Option<cordon_stage::FileStat> {
    let c = CString::new(name).ok()?;
    let flags = if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
    cordon_stage::statx(dir.as_raw_fd(), &c, flags).ok()
}

/// The id of the mount `fd` was reached through (0 when the kernel does not say).
pub(super) fn mount_id(fd: BorrowedFd<'_>) -> u64 {
    cordon_stage::statx(fd.as_raw_fd(), c"", libc::AT_EMPTY_PATH).map(|s| s.mnt_id).unwrap_or(0)
}
