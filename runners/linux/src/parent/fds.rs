//! File-descriptor helpers the parent needs.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Duplicate `fd` to a new close-on-exec descriptor numbered 3 or above.
pub fn dup_cloexec(fd: RawFd) -> io::Result<OwnedFd> {
    dup_cloexec_above(fd, 3)
}

/// Duplicate `fd` to a new close-on-exec descriptor numbered `min` or above.
pub fn dup_cloexec_above(fd: RawFd, min: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) with integer arguments.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, min) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fcntl returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Duplicate `fd` to a new close-on-exec descriptor numbered `floor` or above.
pub fn dup_above(fd: RawFd, floor: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) with integer arguments.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, floor) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fcntl returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}
