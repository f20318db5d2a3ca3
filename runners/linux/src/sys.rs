//! Raw syscall wrappers that both sides use: the child between `clone` and `execve`
//! (so each is async-signal-safe: one or a few raw syscalls on caller-owned memory, no
//! allocation, no locks) and the parent.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// `openat2(dirfd, path, O_PATH | O_CLOEXEC, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`:
/// an `O_PATH` fd for `path` refusing a symlink in ANY component (`ELOOP`).
/// Async-signal-safe (one raw syscall), so the child may use it.
pub fn open_path_no_symlinks(dirfd: RawFd, path: &std::ffi::CStr) -> io::Result<OwnedFd> {
    // `struct open_how` from <linux/openat2.h> (libc's is non-exhaustive).
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: openat2 with a NUL-terminated path and a local open_how whose size is
    // passed alongside.
    let fd = unsafe {
        libc::syscall(libc::SYS_openat2, dirfd, path.as_ptr(), &how as *const OpenHow, std::mem::size_of::<OpenHow>())
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
    let fd = fd as RawFd;
    // SAFETY: the kernel returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `OPEN_TREE_CLONE` from `<linux/mount.h>`: `open_tree` makes a detached copy.
pub(crate) const OPEN_TREE_CLONE: libc::c_uint = 1;

/// `struct mount_attr` from `<linux/mount.h>` (`mount_setattr`'s argument).
#[repr(C)]
pub(crate) struct MountAttr {
    pub(crate) attr_set: u64,
    pub(crate) attr_clr: u64,
    pub(crate) propagation: u64,
    pub(crate) userns_fd: u64,
}

pub(crate) fn errno() -> i32 {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() }
}

/// Write all of `data` to `path` with raw syscalls (used for the id maps).
pub(crate) fn write_file(path: &[u8], data: &[u8]) -> Result<(), i32> {
    write_file_at(libc::AT_FDCWD, path, data)
}

/// Write all of `data` to `path` relative to `dirfd` (`AT_FDCWD`: the working
/// directory) with raw syscalls.
pub(crate) fn write_file_at(dirfd: RawFd, path: &[u8], data: &[u8]) -> Result<(), i32> {
    // SAFETY: `path` is NUL-terminated (callers pass byte literals ending in \0 or
    // CString bytes with NUL); openat/write/close are async-signal-safe.
    unsafe {
        let fd = libc::openat(dirfd, path.as_ptr() as *const libc::c_char, libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(errno());
        }
        let n = libc::write(fd, data.as_ptr() as *const libc::c_void, data.len());
        let e = errno();
        libc::close(fd);
        if n != data.len() as isize {
            return Err(if n < 0 { e } else { libc::EIO });
        }
    }
    Ok(())
}

/// A control-message buffer for one `SCM_RIGHTS` fd, aligned for `cmsghdr`; shared by
/// the child's `send_fd` (listener hand-back) and the parent's
/// [`notify::recv_fd`](crate::notify::recv_fd).
#[repr(C, align(8))]
pub(crate) struct CmsgBuf {
    pub(crate) buf: [u8; 64],
}

/// What `statx` says of one file: identity, the mount it was reached through, type,
/// mode and owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    /// Device (`makedev(major, minor)`).
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// The id of the mount the path was resolved through (`STATX_MNT_ID`; 0 when the
    /// kernel does not report it).
    pub mnt_id: u64,
    /// `st_mode`.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// For a device node, its number (`makedev`).
    pub rdev: u64,
}

/// `statx(dirfd, path, flags, STATX_BASIC_STATS | STATX_MNT_ID)`.
pub fn statx(dirfd: RawFd, path: &std::ffi::CStr, flags: i32) -> io::Result<FileStat> {
    // SAFETY: statx_buf is plain data the kernel fills; zeroed is a valid value.
    let mut buf: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: statx with a NUL-terminated path and a buffer of the kernel's struct size.
    let r = unsafe { libc::statx(dirfd, path.as_ptr(), flags, libc::STATX_BASIC_STATS | libc::STATX_MNT_ID, &mut buf) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let dev = libc::makedev(buf.stx_dev_major, buf.stx_dev_minor);
    let rdev = libc::makedev(buf.stx_rdev_major, buf.stx_rdev_minor);
    let mnt_id = if buf.stx_mask & libc::STATX_MNT_ID != 0 { buf.stx_mnt_id } else { 0 };
    Ok(FileStat { dev, ino: buf.stx_ino, mnt_id, mode: u32::from(buf.stx_mode), uid: buf.stx_uid, rdev })
}
