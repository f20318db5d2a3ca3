//! Step 5: the plan's mount operations, in order, in the child's private mount
//! namespace ([`MountOp`]). Each failure names the operation's index as the detail.
//! Attach targets, clone sources and tmpfs targets on host directories checked
//! against a pinned identity fail with `ESTALE` when they are another file.
//!
//! What it does not do: choose the mounts (the parent's plan does).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::prepared::{fail, Prepared};
use crate::contract::{FileIdentity, MountOp, OverlayUpper};
use crate::status::Step;
use crate::sys::{errno, open_path_no_symlinks, MountAttr, OPEN_TREE_CLONE};

const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x0000_0004;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x0000_0040;

/// Room for `/proc/self/fd/` and any fd number, NUL included.
const PROC_FD_PATH_LEN: usize = 32;

/// `FSOPEN_CLOEXEC`, `FSMOUNT_CLOEXEC` from `<linux/mount.h>`.
const FSOPEN_CLOEXEC: libc::c_uint = 1;
const FSMOUNT_CLOEXEC: libc::c_uint = 1;
/// `FSCONFIG_SET_FLAG`, `FSCONFIG_SET_STRING`, `FSCONFIG_CMD_CREATE` from `<linux/mount.h>`.
const FSCONFIG_SET_FLAG: libc::c_uint = 0;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;

/// Room for an overlay's `lowerdir`: a few `/proc/self/fd/N` names joined by `:`
/// (longer fails with `E2BIG`).
const OVERLAY_DATA_LEN: usize = 512;

/// A NUL-terminated string built in a fixed buffer (no allocation in the child).
struct DataBuf {
    buf: [u8; OVERLAY_DATA_LEN],
    len: usize,
}

impl DataBuf {
    fn new() -> DataBuf {
        DataBuf { buf: [0; OVERLAY_DATA_LEN], len: 0 }
    }

    /// Append `bytes`, keeping room for the NUL; `Err(E2BIG)` when it does not fit.
    fn push(&mut self, bytes: &[u8]) -> Result<(), i32> {
        if self.len + bytes.len() >= OVERLAY_DATA_LEN {
            return Err(libc::E2BIG);
        }
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
        self.buf[self.len] = 0;
        Ok(())
    }

    /// Append `/proc/self/fd/FD`.
    fn push_fd(&mut self, fd: RawFd) -> Result<(), i32> {
        let mut path = [0u8; PROC_FD_PATH_LEN];
        proc_fd_path(fd, &mut path);
        let end = path.iter().position(|b| *b == 0).unwrap_or(0);
        self.push(&path[..end])
    }

    fn as_ptr(&self) -> *const libc::c_char {
        self.buf.as_ptr() as *const libc::c_char
    }
}

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

/// Open a mount target: the pinned host directory checked against `expect`, or a
/// system directory by path (`O_PATH`, symlinks followed as a path mount would).
fn open_target(p: &Prepared<'_>, target: &std::ffi::CStr, expect: Option<&FileIdentity>, detail: u32) -> OwnedFd {
    if let Some(want) = expect {
        return open_checked(p, target, want, detail);
    }
    // SAFETY: open with a NUL-terminated path owned by the plan.
    let fd = unsafe { libc::open(target.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        fail(p, Step::Mount, errno(), detail);
    }
    // SAFETY: the kernel returned a new fd that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// [`MountOp::StagingTmpfs`]: a detached tmpfs with the plan's parameters; its fd
/// goes into `slot`.
fn staging_tmpfs(p: &mut Prepared<'_>, slot: usize, params: &[(std::ffi::CString, std::ffi::CString)], detail: u32) {
    if slot >= p.slots.len() {
        fail(p, Step::Mount, libc::EINVAL, detail);
    }
    // SAFETY: fsopen with a static NUL-terminated name.
    let fs = unsafe { libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), FSOPEN_CLOEXEC) };
    if fs < 0 {
        fail(p, Step::Mount, errno(), detail);
    }
    #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
    // SAFETY: the kernel returned a new fd that nothing else owns.
    let fs = unsafe { OwnedFd::from_raw_fd(fs as RawFd) };
    for (key, value) in params {
        // SAFETY: fsconfig with the fd above and NUL-terminated strings owned by the plan.
        let r = unsafe {
            libc::syscall(libc::SYS_fsconfig, fs.as_raw_fd(), FSCONFIG_SET_STRING, key.as_ptr(), value.as_ptr(), 0)
        };
        if r != 0 {
            fail(p, Step::Mount, errno(), detail);
        }
    }
    if let Err(e) = fs_config(fs.as_raw_fd(), FSCONFIG_CMD_CREATE, std::ptr::null(), std::ptr::null()) {
        fail(p, Step::Mount, e, detail);
    }
    let attrs = crate::contract::MOUNT_ATTR_NOSUID | crate::contract::MOUNT_ATTR_NODEV;
    // SAFETY: fsmount on the configured context above.
    let m = unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, attrs) };
    if m < 0 {
        fail(p, Step::Mount, errno(), detail);
    }
    #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
    let m = m as RawFd;
    p.slots[slot] = m;
}

/// Attach the detached mount `tree` onto the directory `onto` (`move_mount`).
fn attach_onto(tree: RawFd, onto: &OwnedFd) -> Result<(), i32> {
    // SAFETY: move_mount between two fds the child owns.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            onto.as_raw_fd(),
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    if r != 0 {
        return Err(errno());
    }
    Ok(())
}

/// `mkdirat(dir, name, mode)`, then an fd on the new directory (never a symlink).
fn make_dir(dir: RawFd, name: &std::ffi::CStr, mode: libc::mode_t) -> Result<OwnedFd, i32> {
    // SAFETY: mkdirat and openat with a NUL-terminated name owned by the plan.
    unsafe {
        if libc::mkdirat(dir, name.as_ptr(), mode) != 0 {
            return Err(errno());
        }
        let fd =
            libc::openat(dir, name.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(errno());
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// [`OverlayUpper::Staged`]: the upper and work directories in the staging tmpfs. The
/// upper one takes the lower root's mode, and its owner where this namespace maps it
/// (a user namespace maps only the caller: a root-owned `/tmp` then shows the caller
/// as owner, as a fresh tmpfs would), since the overlay's root shows its attributes.
fn staged_dirs(
    p: &Prepared<'_>,
    lower: &OwnedFd,
    slot: usize,
    upper: &std::ffi::CStr,
    work: &std::ffi::CStr,
    detail: u32,
) -> (OwnedFd, OwnedFd) {
    let stage = p.slots.get(slot).copied().unwrap_or(-1);
    // SAFETY: fstat fills a zeroed, properly sized local struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: see above; `lower` is an fd the child owns.
    if unsafe { libc::fstat(lower.as_raw_fd(), &mut st) } != 0 {
        fail(p, Step::Mount, errno(), detail);
    }
    let u = make_dir(stage, upper, 0o700).unwrap_or_else(|e| fail(p, Step::Mount, e, detail));
    // SAFETY: fchown/fchmod on the directory the child just created.
    unsafe {
        let r = libc::fchown(u.as_raw_fd(), st.st_uid, st.st_gid);
        // An owner this user namespace does not map cannot be given (EINVAL).
        if r != 0 && errno() != libc::EINVAL && errno() != libc::EPERM {
            fail(p, Step::Mount, errno(), detail);
        }
        if libc::fchmod(u.as_raw_fd(), st.st_mode & 0o7777) != 0 {
            fail(p, Step::Mount, errno(), detail);
        }
    }
    let w = make_dir(stage, work, 0o700).unwrap_or_else(|e| fail(p, Step::Mount, e, detail));
    (u, w)
}

/// `fsconfig(fs, cmd, key, value)` with raw pointers (null for none).
fn fs_config(fs: RawFd, cmd: libc::c_uint, key: *const libc::c_char, value: *const libc::c_char) -> Result<(), i32> {
    // SAFETY: fsconfig with an fd the child owns and NUL-terminated strings (or null)
    // that outlive the call.
    let r = unsafe { libc::syscall(libc::SYS_fsconfig, fs, cmd, key, value, 0) };
    if r != 0 {
        return Err(errno());
    }
    Ok(())
}

/// Give the mount-point directory `m` just made in the upper directory `u` the owner
/// and mode of the lower layer's directory of that name, when there is one: a
/// directory of the upper layer is what the overlay shows (its owner, its mode), and
/// the overlay's mounter reads the lower layer with its own credentials. A mount point
/// made `0755` by a privileged mounter would let the command list, enter and write
/// a directory the host keeps from it (another user's `0700` directory on the way to
/// the workspace in `/tmp`, another user's directory above a nested repository in a
/// held root). An owner this user namespace does not map stays the mounter (there the
/// mounter's own reads of the lower layer are held to the host's permissions).
fn like_lower(p: &Prepared<'_>, lower: &OwnedFd, u: &OwnedFd, m: &std::ffi::CStr, detail: u32) {
    // SAFETY: fstatat fills a zeroed, properly sized local struct; `lower` is an fd the
    // child owns and `m` a NUL-terminated relative path owned by the plan.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: see above.
    if unsafe { libc::fstatat(lower.as_raw_fd(), m.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0
        || st.st_mode & libc::S_IFMT != libc::S_IFDIR
    {
        return;
    }
    // SAFETY: fchownat/fchmodat on the directory the child just made in its private
    // upper directory (nothing else can reach it yet, so no symlink can be there).
    unsafe {
        let r = libc::fchownat(u.as_raw_fd(), m.as_ptr(), st.st_uid, st.st_gid, libc::AT_SYMLINK_NOFOLLOW);
        if r != 0 && errno() != libc::EINVAL && errno() != libc::EPERM {
            fail(p, Step::Mount, errno(), detail);
        }
        if libc::fchmodat(u.as_raw_fd(), m.as_ptr(), st.st_mode & 0o7777, 0) != 0 {
            fail(p, Step::Mount, errno(), detail);
        }
    }
}

/// [`MountOp::Overlay`].
fn overlay(p: &mut Prepared<'_>, op: &MountOp, detail: u32) {
    let MountOp::Overlay { target, expect, lower_above, upper, mountpoints, mountpoint_files, options, slot } = op
    else {
        return;
    };
    if *slot >= p.slots.len() || lower_above.len() > MAX_LOWER_ABOVE {
        fail(p, Step::Mount, libc::E2BIG, detail);
    }
    let lower = open_target(p, target, expect.as_ref(), detail);
    let mut above: [Option<OwnedFd>; MAX_LOWER_ABOVE] = [const { None }; MAX_LOWER_ABOVE];
    for (i, (path, want)) in lower_above.iter().enumerate() {
        above[i] = Some(open_checked(p, path, want, detail));
    }
    let (u, w) = match upper {
        OverlayUpper::Staged { slot, upper, work, attach } => {
            if *attach {
                let stage = p.slots.get(*slot).copied().unwrap_or(-1);
                if let Err(e) = attach_onto(stage, &lower) {
                    fail(p, Step::Mount, e, detail);
                }
            }
            staged_dirs(p, &lower, *slot, upper, work, detail)
        }
        OverlayUpper::Dirs { upper, upper_expect, work, work_expect } => {
            (open_checked(p, upper, upper_expect, detail), open_checked(p, work, work_expect, detail))
        }
    };
    for m in mountpoints {
        // SAFETY: mkdirat with a NUL-terminated relative path owned by the plan, in the
        // upper directory the child holds.
        if unsafe { libc::mkdirat(u.as_raw_fd(), m.as_ptr(), 0o755) } != 0 && errno() != libc::EEXIST {
            fail(p, Step::Mount, errno(), detail);
        }
        like_lower(p, &lower, &u, m, detail);
    }
    for m in mountpoint_files {
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: openat with a NUL-terminated relative path owned by the plan, in the
        // upper directory the child holds; the fd is closed at once.
        let fd = unsafe { libc::openat(u.as_raw_fd(), m.as_ptr(), flags, 0o600) };
        if fd < 0 {
            fail(p, Step::Mount, errno(), detail);
        }
        // SAFETY: the kernel returned a new fd that nothing else owns.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    // SAFETY: fsopen with a static NUL-terminated name.
    let fs = unsafe { libc::syscall(libc::SYS_fsopen, c"overlay".as_ptr(), FSOPEN_CLOEXEC) };
    if fs < 0 {
        fail(p, Step::Mount, errno(), detail);
    }
    #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
    // SAFETY: the kernel returned a new fd that nothing else owns.
    let fs = unsafe { OwnedFd::from_raw_fd(fs as RawFd) };
    let configured = (|| {
        let mut lowers = DataBuf::new();
        for fd in above.iter().flatten() {
            lowers.push_fd(fd.as_raw_fd())?;
            lowers.push(b":")?;
        }
        lowers.push_fd(lower.as_raw_fd())?;
        fs_config(fs.as_raw_fd(), FSCONFIG_SET_STRING, c"lowerdir".as_ptr(), lowers.as_ptr())?;
        for (key, fd) in [(c"upperdir", &u), (c"workdir", &w)] {
            let mut dir = DataBuf::new();
            dir.push_fd(fd.as_raw_fd())?;
            fs_config(fs.as_raw_fd(), FSCONFIG_SET_STRING, key.as_ptr(), dir.as_ptr())?;
        }
        for (key, value) in options {
            match value {
                Some(v) => fs_config(fs.as_raw_fd(), FSCONFIG_SET_STRING, key.as_ptr(), v.as_ptr())?,
                None => fs_config(fs.as_raw_fd(), FSCONFIG_SET_FLAG, key.as_ptr(), std::ptr::null())?,
            }
        }
        fs_config(fs.as_raw_fd(), FSCONFIG_CMD_CREATE, std::ptr::null(), std::ptr::null())
    })();
    if let Err(e) = configured {
        fail(p, Step::Mount, e, detail);
    }
    let attrs = crate::contract::MOUNT_ATTR_NOSUID | crate::contract::MOUNT_ATTR_NODEV;
    // SAFETY: fsmount on the configured context above.
    let m = unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, attrs) };
    if m < 0 {
        fail(p, Step::Mount, errno(), detail);
    }
    #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
    let m = m as RawFd;
    p.slots[*slot] = m;
    if let Err(e) = attach_onto(m, &lower) {
        fail(p, Step::Mount, e, detail);
    }
}

/// Read-only layers an overlay may have above its target.
const MAX_LOWER_ABOVE: usize = 2;

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
            MountOp::OpenPristine { path, slot, expect } => {
                let fd = open_checked(p, path, expect, detail);
                if *slot >= p.slots.len() {
                    fail(p, Step::Mount, libc::EINVAL, detail);
                }
                p.slots[*slot] = std::os::fd::IntoRawFd::into_raw_fd(fd);
            }
            MountOp::BindOver { target, target_expect, expect, source_slot, source_rel, set, clear_top } => {
                let t = match target_expect {
                    Some(want) => open_checked(p, target, want, detail),
                    None => match open_path_no_symlinks(libc::AT_FDCWD, target) {
                        Ok(t) => t,
                        Err(e) => fail(p, Step::Mount, e.raw_os_error().unwrap_or(libc::EIO), detail),
                    },
                };
                let source = match source_slot {
                    Some(slot) => p.slots.get(*slot).copied().unwrap_or(-1),
                    None => t.as_raw_fd(),
                };
                // SAFETY: open_tree on a slot fd the child owns and a NUL-terminated
                // relative path owned by the plan.
                let fd = unsafe {
                    libc::syscall(
                        libc::SYS_open_tree,
                        source,
                        source_rel.as_ptr(),
                        OPEN_TREE_CLONE
                            | libc::O_CLOEXEC as libc::c_uint
                            | libc::AT_RECURSIVE as libc::c_uint
                            | libc::AT_SYMLINK_NOFOLLOW as libc::c_uint
                            | if source_slot.is_none() { libc::AT_EMPTY_PATH as libc::c_uint } else { 0 },
                    )
                };
                if fd < 0 {
                    fail(p, Step::Mount, errno(), detail);
                }
                #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
                // SAFETY: the kernel just returned this fd to us; nothing else owns it.
                let tree = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as RawFd) };
                // A component swapped for a symlink on the way would clone another file.
                if let Some(want) = expect {
                    match FileIdentity::of_fd(tree.as_raw_fd()) {
                        Ok(got) if got == *want => {}
                        Ok(_) => fail(p, Step::Mount, libc::ESTALE, detail),
                        Err(e) => fail(p, Step::Mount, e.raw_os_error().unwrap_or(libc::EIO), detail),
                    }
                }
                for (bits, clear, recursive) in [(*set, false, true), (*clear_top, true, false)] {
                    if bits == 0 {
                        continue;
                    }
                    let (attr_set, attr_clr) = if clear { (0, bits) } else { (bits, 0) };
                    let attr = MountAttr { attr_set, attr_clr, propagation: 0, userns_fd: 0 };
                    let mut flags = libc::AT_EMPTY_PATH;
                    if recursive {
                        flags |= libc::AT_RECURSIVE;
                    }
                    // SAFETY: mount_setattr on the detached tree's fd, an empty path and a
                    // local struct whose size is passed alongside.
                    let r = unsafe {
                        libc::syscall(
                            libc::SYS_mount_setattr,
                            tree.as_raw_fd(),
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
                // SAFETY: move_mount between two fds the child owns.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_move_mount,
                        tree.as_raw_fd(),
                        c"".as_ptr(),
                        t.as_raw_fd(),
                        c"".as_ptr(),
                        MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
                    )
                };
                if r != 0 {
                    fail(p, Step::Mount, errno(), detail);
                }
            }
            MountOp::ReopenOnto { target, expect, fd } => {
                let t = open_checked(p, target, expect, detail);
                // SAFETY: dup2 between fds the child owns (the target number is the
                // parent's copy of the pinned source, replaced on purpose).
                if unsafe { libc::dup2(t.as_raw_fd(), *fd) } < 0 {
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
            MountOp::StagingTmpfs { slot, params } => staging_tmpfs(p, *slot, params, detail),
            MountOp::Overlay { .. } => overlay(p, op, detail),
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
