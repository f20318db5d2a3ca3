//! Parent-side syscall wrappers: what cordon's own process calls (never the child):
//! host facts, process-wide signal settings, descriptor duplication, the parent's half
//! of seccomp user notifications, and the sweep request to a supervising init.
//!
//! What it does not do: anything between `clone` and `execve` (that is `child`,
//! `init` and `sys`).

use std::io;

use crate::init::SUPERVISOR_SWEEP_SIGNAL;

pub mod fds;
pub mod host;
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
