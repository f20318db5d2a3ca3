//! Raw operations for `cordon audit`'s probe program (`cordon __probe OP ...`, in the
//! `cordon` crate's `audit::probe`): one system call, or a short fixed sequence, per
//! function, each behind a safe signature, returning the kernel's errno as an
//! [`io::Error`].
//!
//! The probe attempts what a confined command might attempt (a write through a file
//! handle, a key added to a keyring, a 32-bit system call) so that the audit can judge,
//! from outside, whether the sandbox held. These wrappers exist because `std` and the
//! `cordon` crate (`#![deny(unsafe_code)]`) cannot issue those calls; they decide
//! nothing, retry nothing and interpret nothing.
//!
//! Sub-modules: `net` (sockets with raw families and addresses), `abi` (the i386 and
//! x32 entry points, x86_64 only), `proc` (processes: fork, clone, daemons, other
//! processes' memory), `kernel` (keyrings, mounts, namespaces, SysV IPC, `bpf` and the
//! other kernel surfaces).
//!
//! What it does not do: run inside the child between `clone` and `execve` (nothing
//! here is async-signal-safe by contract, except what the forked children of `proc`
//! call), or keep any state.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

pub mod abi;
pub mod kernel;
pub mod net;
pub mod proc;

/// `Ok(ret)` for a non-negative return, the thread's errno otherwise.
fn cvt(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Wraps a new file descriptor the kernel returned (as a `long`).
fn own_fd(ret: libc::c_long) -> io::Result<OwnedFd> {
    let fd = RawFd::try_from(cvt(ret)?).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `name_to_handle_at(path)` then `open_by_handle_at(<fd of path>, handle, flags)`:
/// opens a file by its handle (its inode) rather than by path. Needs
/// `CAP_DAC_READ_SEARCH` in the file system's user namespace.
pub fn open_by_handle(path: &CStr, flags: i32) -> io::Result<OwnedFd> {
    const MAX_HANDLE_SZ: usize = 128;
    #[repr(C)]
    struct Handle {
        handle_bytes: u32,
        handle_type: i32,
        f_handle: [u8; MAX_HANDLE_SZ],
    }
    let mut h = Handle { handle_bytes: 128, handle_type: 0, f_handle: [0; MAX_HANDLE_SZ] };
    let mut mount_id: libc::c_int = 0;
    // SAFETY: a NUL-terminated path, a handle buffer whose capacity is in handle_bytes,
    // and a local int for the mount id.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_name_to_handle_at,
            libc::AT_FDCWD,
            path.as_ptr(),
            &mut h as *mut Handle,
            &mut mount_id as *mut libc::c_int,
            0,
        )
    })?;
    let mount_fd = std::fs::File::open(path.to_str().map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?)?;
    // SAFETY: the handle the kernel just filled and an fd on the same mount.
    own_fd(unsafe {
        libc::syscall(libc::SYS_open_by_handle_at, mount_fd.as_raw_fd(), &h as *const Handle, flags | libc::O_CLOEXEC)
    })
}

/// `setxattr` (or `lsetxattr` with `nofollow`): sets extended attribute `name`.
pub fn set_xattr(path: &CStr, name: &CStr, value: &[u8], nofollow: bool) -> io::Result<()> {
    let (p, n, v) = (path.as_ptr(), name.as_ptr(), value.as_ptr().cast::<libc::c_void>());
    // SAFETY: NUL-terminated path and name; `value` is valid for its length.
    let r = unsafe {
        if nofollow {
            libc::lsetxattr(p, n, v, value.len(), 0)
        } else {
            libc::setxattr(p, n, v, value.len(), 0)
        }
    };
    cvt(r.into()).map(drop)
}

/// `fsetxattr` on an open descriptor.
pub fn fset_xattr(fd: BorrowedFd<'_>, name: &CStr, value: &[u8]) -> io::Result<()> {
    // SAFETY: an open fd, a NUL-terminated name, `value` valid for its length.
    let r = unsafe { libc::fsetxattr(fd.as_raw_fd(), name.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    cvt(r.into()).map(drop)
}

/// `lremovexattr`.
pub fn remove_xattr(path: &CStr, name: &CStr) -> io::Result<()> {
    // SAFETY: NUL-terminated path and name.
    let r = unsafe { libc::lremovexattr(path.as_ptr(), name.as_ptr()) };
    cvt(r.into()).map(drop)
}

/// `llistxattr`: the NUL-separated names of a file's extended attributes (at most
/// 64 KiB of them).
pub fn list_xattr(path: &CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 65536];
    // SAFETY: a NUL-terminated path and a buffer valid for its length.
    let n = unsafe { libc::llistxattr(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    let n = usize::try_from(cvt(n as libc::c_long)?).unwrap_or(0);
    buf.truncate(n);
    Ok(buf)
}

/// `TIOCSTI`: push one byte into a terminal's input queue. With `high_bits`, the
/// request number carries ones in its upper 32 bits (the kernel reads only the low
/// 32; a filter that compares all 64 would miss it).
pub fn tiocsti(fd: BorrowedFd<'_>, byte: u8, high_bits: bool) -> io::Result<()> {
    let req = libc::TIOCSTI | if high_bits { 0xffff_ffff_0000_0000 } else { 0 };
    // SAFETY: TIOCSTI reads one byte from the pointer, which points at a local.
    cvt(unsafe { libc::syscall(libc::SYS_ioctl, fd.as_raw_fd(), req, &byte as *const u8) }).map(drop)
}

/// `TIOCLINUX` with the read-only, harmless subcode `TIOCL_GETSHIFTSTATE` (6): the
/// returned byte is the keyboard shift state.
pub fn tioclinux_shiftstate(fd: BorrowedFd<'_>, high_bits: bool) -> io::Result<u8> {
    const TIOCLINUX: u64 = 0x541C;
    let req = TIOCLINUX | if high_bits { 0xffff_ffff_0000_0000 } else { 0 };
    let mut sub = [6u8, 0];
    // SAFETY: TIOCLINUX reads the subcode from, and writes at most one byte into, the
    // local two-byte buffer.
    cvt(unsafe { libc::syscall(libc::SYS_ioctl, fd.as_raw_fd(), req, sub.as_mut_ptr()) })?;
    Ok(sub[0])
}

/// `TIOCSCTTY`: make `fd` the caller's controlling terminal (after `setsid`).
pub fn tiocsctty(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: TIOCSCTTY takes an integer argument.
    cvt(unsafe { libc::syscall(libc::SYS_ioctl, fd.as_raw_fd(), libc::TIOCSCTTY, 0) }).map(drop)
}

/// `USERFAULTFD_IOC_NEW` on an open `/dev/userfaultfd`: a new userfaultfd.
pub fn userfaultfd_dev_new(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    const USERFAULTFD_IOC_NEW: u64 = 0xAA00;
    // SAFETY: the ioctl takes integer flags.
    own_fd(unsafe { libc::syscall(libc::SYS_ioctl, fd.as_raw_fd(), USERFAULTFD_IOC_NEW, libc::O_CLOEXEC) })
}

/// `prctl(PR_GET_NO_NEW_PRIVS)`.
pub fn no_new_privs() -> io::Result<bool> {
    // SAFETY: prctl with integer arguments.
    let r = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) };
    Ok(cvt(r.into())? == 1)
}

/// `setsid()`.
pub fn setsid() -> io::Result<()> {
    // SAFETY: setsid takes no arguments.
    cvt(unsafe { libc::setsid() }.into()).map(drop)
}

/// `setuid(uid)`: changes the process's user ids.
pub fn setuid(uid: u32) -> io::Result<()> {
    // SAFETY: setuid takes an integer.
    cvt(unsafe { libc::setuid(uid) }.into()).map(drop)
}

/// The real and effective user ids.
pub fn uids() -> (u32, u32) {
    // SAFETY: getuid and geteuid cannot fail.
    unsafe { (libc::getuid(), libc::geteuid()) }
}

/// `write(fd, data)` on a descriptor known only by its number (one inherited from
/// whoever started the process). The kernel checks the number; nothing is closed.
pub fn write_fd_number(fd: RawFd, data: &[u8]) -> io::Result<usize> {
    // SAFETY: `data` is valid for its length; an fd number that is not open fails
    // with EBADF and touches no memory.
    let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    Ok(usize::try_from(cvt(n as libc::c_long)?).unwrap_or(0))
}

/// Makes `cmd`'s child receive each `(fd, number)` as descriptor `number` (open across
/// `execve`), in addition to its standard streams: what an inherited descriptor looks
/// like to whatever the child starts. The descriptors stay owned by `cmd` (moved into
/// its pre-exec hook) and close with it.
pub fn inherit_fds(cmd: &mut std::process::Command, fds: Vec<(OwnedFd, RawFd)>) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook runs in the forked child before execve and only calls dup2 and
    // fcntl (async-signal-safe) on descriptors the closure owns; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            for (fd, number) in &fds {
                if libc::dup2(fd.as_raw_fd(), *number) < 0 {
                    return Err(io::Error::last_os_error());
                }
                let fl = libc::fcntl(*number, libc::F_GETFD);
                libc::fcntl(*number, libc::F_SETFD, fl & !libc::FD_CLOEXEC);
            }
            Ok(())
        });
    }
}
