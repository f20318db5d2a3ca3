//! Step 10: Landlock. Rules for trees that exist only in the child (its private
//! tmpfs mounts) are added to the ruleset the parent built, then
//! `landlock_restrict_self`. A private mount on a host directory (a layer over the
//! home's cache or a toolchain home) is checked first: reached without any symlink,
//! the root of a tmpfs or overlay mount, and writable.
//!
//! What it does not do: build the ruleset or choose its rules (the parent does).

use std::ffi::CString;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};

use super::prepared::{fail, Prepared};
use crate::status::{detail, Step};
use crate::sys::{errno, open_path_no_symlinks};

/// Step 10: the late rules, then `landlock_restrict_self` (nothing without a ruleset).
pub(super) fn restrict_self(p: &Prepared<'_>) {
    let plan = p.plan;
    if let Some((fd, flags)) = &plan.landlock {
        for (i, (path, access)) in plan.late_landlock_rules.iter().enumerate() {
            add_late_rule(p, fd.as_raw_fd(), path, *access, u32::try_from(i).unwrap_or(u32::MAX), false);
        }
        let first = plan.late_landlock_rules.len();
        for (i, (path, access)) in plan.late_landlock_tmpfs_rules.iter().enumerate() {
            let index = u32::try_from(first + i).unwrap_or(u32::MAX);
            add_late_rule(p, fd.as_raw_fd(), path, *access, index, true);
        }
        // SAFETY: landlock_restrict_self on a ruleset fd the parent created.
        let r = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), *flags) };
        if r != 0 {
            fail(p, Step::Landlock, errno(), detail::LANDLOCK_RESTRICT);
        }
    }
}

/// `struct landlock_path_beneath_attr` (packed in the kernel's UAPI).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}
/// `LANDLOCK_RULE_PATH_BENEATH`.
const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;

/// `TMPFS_MAGIC` from `<linux/magic.h>`.
const TMPFS_MAGIC: libc::c_long = 0x0102_1994;
/// `OVERLAYFS_SUPER_MAGIC` from `<linux/magic.h>`.
const OVERLAYFS_MAGIC: libc::c_long = 0x794c_7630;
/// `STATX_ATTR_MOUNT_ROOT` from `<linux/stat.h>` (Linux 5.8).
const STATX_ATTR_MOUNT_ROOT: u64 = 0x2000;

/// Whether the open `fd` is a private mount the stage made on a host directory: the
/// root of its mount, a tmpfs or an overlay, writable (`ESTALE` otherwise: a host
/// directory swapped in at that path after the mount is none of these).
fn private_mount_root(fd: RawFd) -> Result<(), i32> {
    // SAFETY: fstatfs/fstatvfs/statx fill zeroed, properly sized local structs; `fd`
    // is open and the path is a static empty string (AT_EMPTY_PATH).
    let (fs, vfs, stx) = unsafe {
        let mut fs: libc::statfs = std::mem::zeroed();
        let mut vfs: libc::statvfs = std::mem::zeroed();
        let mut stx: libc::statx = std::mem::zeroed();
        if libc::fstatfs(fd, &mut fs) != 0
            || libc::fstatvfs(fd, &mut vfs) != 0
            || libc::statx(fd, c"".as_ptr(), libc::AT_EMPTY_PATH, 0, &mut stx) != 0
        {
            return Err(errno());
        }
        (fs, vfs, stx)
    };
    let kind = fs.f_type as libc::c_long;
    let root = stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT == 0 || stx.stx_attributes & STATX_ATTR_MOUNT_ROOT != 0;
    if (kind != TMPFS_MAGIC && kind != OVERLAYFS_MAGIC) || !root || vfs.f_flag & libc::ST_RDONLY != 0 {
        return Err(libc::ESTALE);
    }
    Ok(())
}

fn add_late_rule(p: &Prepared<'_>, ruleset: RawFd, path: &CString, access: u64, index: u32, tmpfs: bool) {
    let fd = if tmpfs {
        match open_path_no_symlinks(libc::AT_FDCWD, path) {
            // The rule is added below and the fd closed there.
            Ok(fd) => fd.into_raw_fd(),
            Err(e) => {
                fail(p, Step::Landlock, e.raw_os_error().unwrap_or(libc::EIO), detail::LANDLOCK_LATE_OPEN + index)
            }
        }
    } else {
        // SAFETY: open with a NUL-terminated path; O_PATH opens nothing but a reference.
        unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) }
    };
    if fd < 0 {
        fail(p, Step::Landlock, errno(), detail::LANDLOCK_LATE_OPEN + index);
    }
    if tmpfs {
        if let Err(e) = private_mount_root(fd) {
            // SAFETY: closing the fd opened above.
            unsafe { libc::close(fd) };
            fail(p, Step::Landlock, e, detail::LANDLOCK_LATE_OPEN + index);
        }
    }
    let attr = PathBeneathAttr { allowed_access: access, parent_fd: fd };
    // SAFETY: landlock_add_rule with a ruleset fd, the rule type and a pointer to a
    // local packed struct the kernel reads.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    let e = errno();
    // SAFETY: closing the O_PATH fd opened above.
    unsafe { libc::close(fd) };
    if r != 0 {
        fail(p, Step::Landlock, e, detail::LANDLOCK_LATE_ADD + index);
    }
}
