//! Parent-side syscall wrappers: what cordon's own process calls (never the child):
//! host facts, process-wide signal settings, descriptor duplication, the parent's half
//! of seccomp user notifications, and the sweep request to a supervising init.
//!
//! What it does not do: anything between `clone` and `execve` (that is `child`,
//! `init` and `sys`).

use std::io;

use crate::init::SUPERVISOR_SWEEP_SIGNAL;

pub mod canary;
pub mod fds;
pub mod host;
pub mod local;
pub mod mounts;
pub mod notify;
pub mod signals;

/// Tell the supervising init `pid` to end its run now ([`SUPERVISOR_SWEEP_SIGNAL`]).
pub fn request_sweep(pid: libc::pid_t) -> io::Result<()> {
    // SAFETY: kill with integer arguments.
    if unsafe { libc::kill(pid, SUPERVISOR_SWEEP_SIGNAL) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `CAP_DAC_OVERRIDE`, `CAP_DAC_READ_SEARCH`, `CAP_FOWNER`: root's permission overrides.
const PERMISSION_OVERRIDES: [u32; 3] = [1, 2, 3];

/// Clear root's permission overrides (`CAP_DAC_OVERRIDE`, `CAP_DAC_READ_SEARCH`,
/// `CAP_FOWNER`) from the calling **thread's** effective set, so that its path lookups
/// and `faccessat(AT_EACCESS)` answer as they would for a sandboxed root (which has no
/// capabilities) — ACLs included. The permitted set is kept (nothing is lost for good);
/// other threads are unaffected. A caller without them changes nothing.
pub fn drop_thread_permission_overrides() -> io::Result<()> {
    use crate::child::caps::{get_own, set_own, NO_CAPS};
    let mut data = NO_CAPS;
    if !get_own(&mut data) {
        return Err(io::Error::last_os_error());
    }
    for cap in PERMISSION_OVERRIDES {
        data[0].effective &= !(1 << cap);
    }
    // The calling thread only (capabilities are per thread).
    if !set_own(&data) {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Put root's permission overrides back into the calling thread's effective set (from
/// its permitted set): for a thread started by one that dropped them
/// ([`drop_thread_permission_overrides`]) and that acts for the caller, not the
/// command. A caller without them changes nothing.
pub fn restore_thread_permission_overrides() -> io::Result<()> {
    use crate::child::caps::{get_own, set_own, NO_CAPS};
    let mut data = NO_CAPS;
    if !get_own(&mut data) {
        return Err(io::Error::last_os_error());
    }
    for cap in PERMISSION_OVERRIDES {
        data[0].effective |= data[0].permitted & (1 << cap);
    }
    if !set_own(&data) {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
