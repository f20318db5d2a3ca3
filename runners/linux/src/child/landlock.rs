//! Step 10: Landlock. Rules for trees that exist only in the child (its private
//! tmpfs) are added to the ruleset the parent built, then `landlock_restrict_self`.
//!
//! What it does not do: build the ruleset or choose its rules (the parent does).

use std::ffi::CString;
use std::os::fd::{AsRawFd, RawFd};

use super::prepared::{fail, Prepared};
use crate::status::{detail, Step};
use crate::sys::errno;

/// Step 10: the late rules, then `landlock_restrict_self` (nothing without a ruleset).
pub(super) fn restrict_self(p: &Prepared<'_>) {
    let plan = p.plan;
    if let Some((fd, flags)) = &plan.landlock {
        for (i, (path, access)) in plan.late_landlock_rules.iter().enumerate() {
            add_late_rule(p, fd.as_raw_fd(), path, *access, u32::try_from(i).unwrap_or(u32::MAX));
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

fn add_late_rule(p: &Prepared<'_>, ruleset: RawFd, path: &CString, access: u64, index: u32) {
    // SAFETY: open with a NUL-terminated path; O_PATH opens nothing but a reference.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        fail(p, Step::Landlock, errno(), detail::LANDLOCK_LATE_OPEN + index);
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
