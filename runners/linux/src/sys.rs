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

pub(crate) fn errno() -> i32 {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() }
}

/// Write all of `data` to `path` with raw syscalls (used for the id maps).
pub(crate) fn write_file(path: &[u8], data: &[u8]) -> Result<(), i32> {
    // SAFETY: `path` is NUL-terminated (callers pass byte literals ending in \0 or
    // CString bytes with NUL); open/write/close are async-signal-safe.
    unsafe {
        let fd = libc::open(path.as_ptr() as *const libc::c_char, libc::O_WRONLY | libc::O_CLOEXEC);
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
