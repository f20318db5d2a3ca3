//! The namespace canary: one short-lived child that tries what the landlock runner's
//! stage does with namespaces and mounts, so that host facts are what the kernel (and
//! any seccomp profile or masked `/proc` of a container runtime) actually allows,
//! not what sysctls suggest.
//!
//! The child is a fork-style `clone` into new mount, pid and IPC namespaces (and a user
//! namespace unless the caller has `CAP_SYS_ADMIN`). There it makes its mounts private,
//! mounts a tmpfs on the given directory, creates a directory in it, mounts a fresh
//! procfs there (the step a container's masked `/proc` refuses: the kernel's
//! `mount_too_revealing`), clones the tmpfs with `open_tree` and makes it read-only
//! with `mount_setattr`. Apart from those (right after the first mount step, so a refused
//! mount leaves it tried), it makes a network namespace of its own
//! (`unshare(CLONE_NEWNET)`) and sets its `lo` up, as the stage does for a run with the
//! network off (a seccomp profile or LSM may refuse that alone). Everything it made dies
//! with it. It uses
//! raw system calls only (the parent may be multi-threaded) and writes one record of
//! errnos to a pipe.
//!
//! What it does not do: decide anything (the `cordon` library's host facts read the
//! record) or cache (the library does).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// One canary's outcome: 0 for a step that worked, else its errno; a step after a
/// failed one that it needs is [`CanaryReport::NOT_TRIED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CanaryReport {
    /// The `clone` with the namespace flags (`EPERM` under a seccomp profile that
    /// refuses namespaces, such as Docker's default), then, in a user namespace, the
    /// id maps.
    pub clone: i32,
    /// `mount(MS_REC|MS_PRIVATE)` on `/`.
    pub private: i32,
    /// A tmpfs on the scratch directory.
    pub tmpfs: i32,
    /// A fresh procfs (in the new pid namespace) on a directory of that tmpfs.
    pub proc: i32,
    /// `open_tree(OPEN_TREE_CLONE | AT_RECURSIVE)` of the tmpfs.
    pub open_tree: i32,
    /// `mount_setattr(MOUNT_ATTR_RDONLY, AT_RECURSIVE)` on the tmpfs.
    pub setattr: i32,
    /// `unshare(CLONE_NEWNET)`, then `lo` up in that namespace (`SIOCSIFFLAGS`).
    pub net: i32,
}

impl CanaryReport {
    /// The errno recorded for a step that was not tried (an earlier one it needs failed).
    pub const NOT_TRIED: i32 = -1;
    const FIELDS: usize = 7;
    const LEN: usize = Self::FIELDS * 4;

    fn to_bytes(self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        let fields = [self.clone, self.private, self.tmpfs, self.proc, self.open_tree, self.setattr, self.net];
        for (i, v) in fields.iter().enumerate() {
            out[i * 4..i * 4 + 4].copy_from_slice(&v.to_ne_bytes());
        }
        out
    }

    fn from_bytes(b: &[u8; Self::LEN]) -> CanaryReport {
        let at = |i: usize| i32::from_ne_bytes([b[i * 4], b[i * 4 + 1], b[i * 4 + 2], b[i * 4 + 3]]);
        CanaryReport {
            clone: at(0),
            private: at(1),
            tmpfs: at(2),
            proc: at(3),
            open_tree: at(4),
            setattr: at(5),
            net: at(6),
        }
    }
}

fn last_errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// The id maps a canary in a user namespace writes for itself: `uid_map` and `gid_map`
/// contents (`"ID ID 1\n"`), as the stage writes them.
#[derive(Debug, Clone, Copy)]
pub struct CanaryIdMaps<'a> {
    /// `uid_map`.
    pub uid_map: &'a [u8],
    /// `gid_map`.
    pub gid_map: &'a [u8],
}

/// Run the canary with `CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC` (and
/// `CLONE_NEWUSER` with these id maps when `user_namespace` is set), mounting on
/// `scratch`: an existing directory (the child's tmpfs hides it in the child's own
/// mount namespace only). `proc_dir` is a NUL-terminated path below `scratch`
/// (`scratch` + `/p`). Blocks until the child exited (a few mounts: well under a
/// millisecond).
pub fn run(
    user_namespace: Option<CanaryIdMaps<'_>>,
    scratch: &std::ffi::CStr,
    proc_dir: &std::ffi::CStr,
) -> io::Result<CanaryReport> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two fds into the local array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two new fds that nothing else owns.
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
    if user_namespace.is_some() {
        flags |= libc::CLONE_NEWUSER;
    }
    let flags = (flags | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: a fork-style clone (no CLONE_VM, no new stack): the child runs on a copy
    // of this thread's stack and memory and, below, makes raw system calls only
    // before `_exit` (another thread of the parent may have held a lock at the fork).
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    if pid < 0 {
        return Ok(CanaryReport { clone: last_errno(), ..CanaryReport::default() });
    }
    if pid == 0 {
        let report = child(user_namespace, scratch, proc_dir);
        let bytes = report.to_bytes();
        // SAFETY: write from a local buffer to the pipe's write end; then `_exit`
        // (no destructors, no atexit handlers in the forked copy).
        unsafe {
            libc::write(write_end.as_raw_fd(), bytes.as_ptr().cast(), bytes.len());
            libc::_exit(0);
        }
    }
    drop(write_end);
    #[allow(clippy::cast_possible_truncation, reason = "the kernel returns a pid (an int) widened to long")]
    let pid = pid as libc::pid_t;
    let mut buf = [0u8; CanaryReport::LEN];
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: read into the unfilled tail of the local buffer.
        let n = unsafe { libc::read(read_end.as_raw_fd(), buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        if n < 0 && last_errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            break;
        }
        got += n as usize;
    }
    let mut status = 0;
    loop {
        // SAFETY: waitpid on the child this call created.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        if r >= 0 || last_errno() != libc::EINTR {
            break;
        }
    }
    if got != buf.len() {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the namespace canary died before reporting"));
    }
    Ok(CanaryReport::from_bytes(&buf))
}

/// The child's steps (raw system calls only).
fn child(maps: Option<CanaryIdMaps<'_>>, scratch: &std::ffi::CStr, proc_dir: &std::ffi::CStr) -> CanaryReport {
    let mut r = CanaryReport {
        private: CanaryReport::NOT_TRIED,
        tmpfs: CanaryReport::NOT_TRIED,
        proc: CanaryReport::NOT_TRIED,
        open_tree: CanaryReport::NOT_TRIED,
        setattr: CanaryReport::NOT_TRIED,
        net: CanaryReport::NOT_TRIED,
        ..CanaryReport::default()
    };
    let step = |ok: bool| if ok { 0 } else { crate::sys::errno() };
    if let Some(maps) = maps {
        // A mount by an unmapped uid fails (EOVERFLOW for procfs): map as the stage does.
        for (path, data) in [
            (&b"/proc/self/setgroups\0"[..], &b"deny"[..]),
            (b"/proc/self/uid_map\0", maps.uid_map),
            (b"/proc/self/gid_map\0", maps.gid_map),
        ] {
            if let Err(e) = crate::sys::write_file(path, data) {
                r.clone = e;
                return r;
            }
        }
    }
    // SAFETY: mount with static NUL-terminated strings and null data.
    r.private = step(
        unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        } == 0,
    );
    r.net = network();
    if r.private != 0 {
        return r;
    }
    // SAFETY: mount with NUL-terminated strings (the caller's path, static others).
    r.tmpfs = step(
        unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                scratch.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                c"mode=0700,size=65536".as_ptr().cast(),
            )
        } == 0,
    );
    if r.tmpfs != 0 {
        return r;
    }
    // SAFETY: mkdir with the caller's NUL-terminated path, inside the fresh tmpfs.
    if unsafe { libc::mkdir(proc_dir.as_ptr(), 0o700) } == 0 {
        // SAFETY: mount with NUL-terminated strings.
        r.proc = step(
            unsafe {
                libc::mount(
                    c"proc".as_ptr(),
                    proc_dir.as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                )
            } == 0,
        );
    } else {
        r.proc = crate::sys::errno();
    }
    // SAFETY: open_tree with the caller's NUL-terminated path.
    let tree = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            scratch.as_ptr(),
            crate::sys::OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_RECURSIVE as libc::c_uint,
        )
    };
    r.open_tree = step(tree >= 0);
    let attr = crate::sys::MountAttr {
        attr_set: crate::contract::MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: mount_setattr with the caller's NUL-terminated path and a local struct
    // whose size is passed alongside.
    r.setattr = step(
        unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                libc::AT_FDCWD,
                scratch.as_ptr(),
                libc::AT_RECURSIVE as libc::c_uint,
                &attr as *const crate::sys::MountAttr,
                std::mem::size_of::<crate::sys::MountAttr>(),
            )
        } == 0,
    );
    r
}

/// A network namespace of the child's own with `lo` up: 0, or the first errno.
fn network() -> i32 {
    // SAFETY: unshare with a flag; the namespace is this (forked) child's alone.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return crate::sys::errno();
    }
    // SAFETY: socket with integer arguments; closed below.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return crate::sys::errno();
    }
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    #[allow(clippy::cast_possible_truncation, reason = "IFF_UP | IFF_RUNNING fit in the short ifr_flags")]
    {
        req.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    }
    // SAFETY: ioctl(SIOCSIFFLAGS) reads a local ifreq.
    let up = unsafe { libc::ioctl(s, libc::SIOCSIFFLAGS as _, &req as *const libc::ifreq) };
    let e = if up == 0 { 0 } else { crate::sys::errno() };
    // SAFETY: closing the socket opened above.
    unsafe { libc::close(s) };
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_round_trips() {
        let r = CanaryReport { clone: 0, private: 0, tmpfs: 0, proc: libc::EPERM, open_tree: 0, setattr: -1, net: 1 };
        assert_eq!(CanaryReport::from_bytes(&r.to_bytes()), r);
    }

    #[test]
    fn the_canary_runs_here() {
        // This host (root, or a user namespace) allows all of it; elsewhere the record
        // must still come back.
        let euid = crate::host::euid();
        let caps = crate::host::effective_capabilities().unwrap_or(0);
        let direct = euid == 0 && caps & (1 << 21) != 0;
        let (uid, gid) = (format!("{euid} {euid} 1\n"), format!("{0} {0} 1\n", crate::host::egid()));
        let maps = CanaryIdMaps { uid_map: uid.as_bytes(), gid_map: gid.as_bytes() };
        let r = run((!direct).then_some(maps), c"/tmp", c"/tmp/p").unwrap();
        if std::env::var("CORDON_MUST_ENFORCE").as_deref() == Ok("1") {
            assert_eq!(r, CanaryReport::default(), "every step works on the CI host");
        }
    }
}
