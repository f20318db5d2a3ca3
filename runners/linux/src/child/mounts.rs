//! Step 5: the plan's mount operations, in order, in the child's private mount
//! namespace ([`MountOp`]). Each failure names the operation's index as the detail.
//! Attach targets, clone sources and tmpfs targets on host directories checked
//! against a pinned identity fail with `ESTALE` when they are another file.
//!
//! What it does not do: choose the mounts (the parent's plan does).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::prepared::{fail, Prepared};
use crate::contract::{FileIdentity, MountOp};
use crate::status::Step;
use crate::sys::{errno, open_path_no_symlinks, MountAttr, OPEN_TREE_CLONE};

const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x0000_0004;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x0000_0040;

/// Room for `/proc/self/fd/` and any fd number, NUL included.
const PROC_FD_PATH_LEN: usize = 32;

/// Write `/proc/self/fd/FD` and a NUL into `buf` (no allocation).
fn proc_fd_path(fd: RawFd, buf: &mut [u8; PROC_FD_PATH_LEN]) {
    const PREFIX: &[u8] = b"/proc/self/fd/";
    buf[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut digits = [0u8; 10];
    let mut n = fd.unsigned_abs();
    let mut len = 0;
    loop {
        digits[len] = b'0' + u8::try_from(n % 10).unwrap_or(0);
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for (i, d) in digits[..len].iter().rev().enumerate() {
        buf[PREFIX.len() + i] = *d;
    }
    buf[PREFIX.len() + len] = 0;
}

/// Open the host directory `target` without following symlinks and check it is the
/// pinned file `want` (`ESTALE` when it is another); a mount target reached through it
/// is the file the parent checked.
fn open_checked(p: &Prepared<'_>, target: &std::ffi::CStr, want: &FileIdentity, detail: u32) -> OwnedFd {
    let t = match open_path_no_symlinks(libc::AT_FDCWD, target) {
        Ok(t) => t,
        Err(e) => fail(p, Step::Mount, e.raw_os_error().unwrap_or(libc::EIO), detail),
    };
    match FileIdentity::of_fd(t.as_raw_fd()) {
        Ok(got) if got == *want => t,
        Ok(_) => fail(p, Step::Mount, libc::ESTALE, detail),
        Err(e) => fail(p, Step::Mount, e.raw_os_error().unwrap_or(libc::EIO), detail),
    }
}

/// [`MountOp::WriteFile`]: create `path` (never an existing file, never through a
/// symlink) and write all of `content`.
fn write_new_file(p: &Prepared<'_>, path: &std::ffi::CStr, content: &[u8], detail: u32) {
    // SAFETY: open with a NUL-terminated path owned by the plan.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        fail(p, Step::Mount, errno(), detail);
    }
    let mut done = 0usize;
    while done < content.len() {
        // SAFETY: write from the plan's buffer, within its length, to the fd opened above.
        let n = unsafe { libc::write(fd, content[done..].as_ptr() as *const libc::c_void, content.len() - done) };
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            let e = if n < 0 { errno() } else { libc::EIO };
            // SAFETY: closing the fd opened above.
            unsafe { libc::close(fd) };
            fail(p, Step::Mount, e, detail);
        }
        done += n as usize;
    }
    // SAFETY: closing the fd opened above.
    unsafe { libc::close(fd) };
}

/// Step 5: apply every mount operation of the plan, in order.
pub(super) fn apply_mounts(p: &mut Prepared<'_>) {
    let plan = p.plan;
    for (i, op) in plan.mounts.iter().enumerate() {
        let detail = u32::try_from(i).unwrap_or(u32::MAX);
        match op {
            MountOp::MakeRootPrivate => {
                // SAFETY: mount with static NUL-terminated strings and null data.
                let r = unsafe {
                    libc::mount(
                        std::ptr::null(),
                        c"/".as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    )
                };
                if r != 0 {
                    fail(p, Step::Mount, errno(), detail);
                }
            }
            MountOp::CloneTree { source, slot, expect } => {
                // SAFETY: open_tree with a NUL-terminated path owned by the plan.
                let fd = unsafe {
                    libc::syscall(
                        libc::SYS_open_tree,
                        libc::AT_FDCWD,
                        source.as_ptr(),
                        OPEN_TREE_CLONE
                            | libc::O_CLOEXEC as libc::c_uint
                            | libc::AT_RECURSIVE as libc::c_uint
                            | libc::AT_SYMLINK_NOFOLLOW as libc::c_uint,
                    )
                };
                if fd < 0 || *slot >= p.slots.len() {
                    fail(p, Step::Mount, errno(), detail);
                }
                #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
                let fd = fd as RawFd;
                p.slots[*slot] = fd;
                if let Some(want) = expect {
                    match FileIdentity::of_fd(fd) {
                        Ok(got) if got == *want => {}
                        Ok(_) => fail(p, Step::Mount, libc::ESTALE, detail),
                        Err(e) => fail(p, Step::Mount, e.raw_os_error().unwrap_or(libc::EIO), detail),
                    }
                }
            }
            MountOp::Attach { slot, target, expect } => {
                let fd = p.slots.get(*slot).copied().unwrap_or(-1);
                let r = match expect {
                    None => {
                        // SAFETY: move_mount from a detached tree fd to a NUL-terminated path.
                        unsafe {
                            libc::syscall(
                                libc::SYS_move_mount,
                                fd,
                                c"".as_ptr(),
                                libc::AT_FDCWD,
                                target.as_ptr(),
                                MOVE_MOUNT_F_EMPTY_PATH,
                            )
                        }
                    }
                    Some(want) => {
                        let t = open_checked(p, target, want, detail);
                        // SAFETY: move_mount between two fds the child owns.
                        unsafe {
                            libc::syscall(
                                libc::SYS_move_mount,
                                fd,
                                c"".as_ptr(),
                                t.as_raw_fd(),
                                c"".as_ptr(),
                                MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
                            )
                        }
                    }
                };
                if r != 0 {
                    fail(p, Step::Mount, errno(), detail);
                }
            }
            MountOp::SetAttrSlot { slot, recursive, set, clear } => {
                let fd = p.slots.get(*slot).copied().unwrap_or(-1);
                let attr = MountAttr { attr_set: *set, attr_clr: *clear, propagation: 0, userns_fd: 0 };
                let mut flags = libc::AT_EMPTY_PATH;
                if *recursive {
                    flags |= libc::AT_RECURSIVE;
                }
                // SAFETY: mount_setattr on a tree fd the child owns, an empty path and a
                // local struct whose size is passed alongside.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_mount_setattr,
                        fd,
                        c"".as_ptr(),
                        flags as libc::c_uint,
                        &attr as *const MountAttr,
                        std::mem::size_of::<MountAttr>(),
                    )
                };
                if r != 0 {
                    fail(p, Step::Mount, errno(), detail);
                }
            }
            MountOp::Proc { target, optional } => {
                // SAFETY: mount with NUL-terminated strings.
                let r = unsafe {
                    libc::mount(
                        c"proc".as_ptr(),
                        target.as_ptr(),
                        c"proc".as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                        std::ptr::null(),
                    )
                };
                if r != 0 && !optional {
                    fail(p, Step::Mount, errno(), detail);
                }
            }
            MountOp::Tmpfs { target, data, expect } => {
                // A host directory is mounted onto through the directory the child
                // opened and checked (`held` keeps it open until the mount is made).
                let mut proc_path = [0u8; PROC_FD_PATH_LEN];
                let mut held = None;
                let at: *const libc::c_char = match expect {
                    None => target.as_ptr(),
                    Some(want) => {
                        let t = open_checked(p, target, want, detail);
                        proc_fd_path(t.as_raw_fd(), &mut proc_path);
                        held = Some(t);
                        proc_path.as_ptr() as *const libc::c_char
                    }
                };
                // SAFETY: mount with NUL-terminated strings owned by the plan, static, or
                // the local buffer `proc_fd_path` filled (NUL-terminated).
                let r = unsafe {
                    libc::mount(
                        c"tmpfs".as_ptr(),
                        at,
                        c"tmpfs".as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV,
                        data.as_ptr() as *const libc::c_void,
                    )
                };
                if r != 0 {
                    fail(p, Step::Mount, errno(), detail);
                }
                drop(held);
            }
            MountOp::WriteFile { path, content } => write_new_file(p, path, content, detail),
            MountOp::Mkdir { path } => {
                // SAFETY: mkdir with a NUL-terminated path.
                let r = unsafe { libc::mkdir(path.as_ptr(), 0o755) };
                if r != 0 && errno() != libc::EEXIST {
                    fail(p, Step::Mount, errno(), detail);
                }
            }
            MountOp::SetAttr { target, recursive, set, clear } => {
                let attr = MountAttr { attr_set: *set, attr_clr: *clear, propagation: 0, userns_fd: 0 };
                let flags = if *recursive { libc::AT_RECURSIVE } else { 0 };
                // SAFETY: mount_setattr with a NUL-terminated path and a local struct
                // whose size is passed alongside.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_mount_setattr,
                        libc::AT_FDCWD,
                        target.as_ptr(),
                        flags as libc::c_uint,
                        &attr as *const MountAttr,
                        std::mem::size_of::<MountAttr>(),
                    )
                };
                if r != 0 {
                    fail(p, Step::Mount, errno(), detail);
                }
            }
        }
    }
}
