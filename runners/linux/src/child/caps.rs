//! Step 11: capabilities. The bounding set is emptied and securebits locked (when the
//! process holds `CAP_SETPCAP`), the ambient set cleared, effective, permitted and
//! inheritable cleared, then everything read back and verified. The capability ABI
//! types are shared with the init, which clears its own sets too.
//!
//! What it does not do: keep any capability; there is no allow-list.

use super::prepared::{fail, Prepared};
use crate::status::{detail, Step};
use crate::sys::errno;

/// `struct __user_cap_header_struct` / `__user_cap_data_struct` for capset/capget.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct CapData {
    pub(crate) effective: u32,
    pub(crate) permitted: u32,
    pub(crate) inheritable: u32,
}
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
/// Every set empty.
pub(crate) const NO_CAPS: [CapData; 2] = [CapData { effective: 0, permitted: 0, inheritable: 0 }; 2];

/// Read the calling thread's capability sets (raw `capget`, version 3; async-signal
/// safe). `false` on error, with `errno` set.
pub(crate) fn get_own(data: &mut [CapData; 2]) -> bool {
    let mut header = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    // SAFETY: capget with a v3 header and a two-element data array to fill.
    unsafe { libc::syscall(libc::SYS_capget, &mut header as *mut CapHeader, data.as_mut_ptr()) == 0 }
}

/// Set the calling thread's capability sets (raw `capset`, version 3; async-signal
/// safe). `false` on error, with `errno` set.
pub(crate) fn set_own(data: &[CapData; 2]) -> bool {
    let mut header = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    // SAFETY: capset with a v3 header and a two-element data array.
    unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut CapHeader, data.as_ptr()) == 0 }
}

const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;

/// `CAP_SETPCAP`: needed to shrink the bounding set and lock securebits.
const CAP_SETPCAP: u32 = 8;

pub(super) fn drop_all_capabilities(p: &Prepared<'_>) {
    let mut before = NO_CAPS;
    if !get_own(&mut before) {
        fail(p, Step::Capabilities, errno(), detail::CAPS_GET);
    }
    // Without CAP_SETPCAP (an unprivileged caller with no user namespace) the bounding
    // set cannot shrink; it also cannot matter: such a process has no capabilities,
    // and no_new_privs stops exec from granting any (setuid bits and file
    // capabilities are ignored).
    let can_shrink_bounding = before[0].permitted & (1 << CAP_SETPCAP) != 0;
    if can_shrink_bounding {
        for cap in 0..=p.last_cap {
            // SAFETY: prctl with integer arguments.
            let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
            if r != 0 && errno() != libc::EINVAL {
                fail(p, Step::Capabilities, errno(), cap);
            }
        }
        let bits = SECBIT_NOROOT
            | SECBIT_NOROOT_LOCKED
            | SECBIT_NO_SETUID_FIXUP
            | SECBIT_NO_SETUID_FIXUP_LOCKED
            | SECBIT_KEEP_CAPS_LOCKED
            | SECBIT_NO_CAP_AMBIENT_RAISE
            | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0) } != 0 {
            fail(p, Step::Capabilities, errno(), detail::CAPS_SECUREBITS);
        }
    }
    // SAFETY: prctl with integer arguments.
    let r = unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0, 0, 0) };
    if r != 0 && errno() != libc::EINVAL {
        fail(p, Step::Capabilities, errno(), detail::CAPS_AMBIENT_CLEAR);
    }
    if !set_own(&NO_CAPS) {
        fail(p, Step::Capabilities, errno(), detail::CAPS_SET);
    }
    // Verify: read back; every set must be empty.
    let mut now = [CapData { effective: 1, permitted: 1, inheritable: 1 }; 2];
    if !get_own(&mut now) {
        fail(p, Step::Capabilities, errno(), detail::CAPS_VERIFY_GET);
    }
    if now.iter().any(|d| d.effective != 0 || d.permitted != 0 || d.inheritable != 0) {
        fail(p, Step::Capabilities, libc::EPERM, detail::CAPS_LEFT);
    }
    // The ambient set needs no separate check: the kernel keeps it a subset of
    // permitted ∩ inheritable, both verified empty above.
    if can_shrink_bounding {
        for cap in 0..=p.last_cap {
            // SAFETY: prctl with integer arguments.
            if unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong, 0, 0, 0) } == 1 {
                fail(p, Step::Capabilities, libc::EPERM, detail::CAPS_BOUNDING_LEFT + cap);
            }
        }
    }
}
