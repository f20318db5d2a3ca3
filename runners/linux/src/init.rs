//! The minimal init every run starts under ([`StagePlan::init`](crate::StagePlan::init)).
//!
//! With a pid namespace it is pid 1: it applies the outer steps (1, 2, 4, 5), starts
//! the command with a vfork-style clone, then only forwards signals to it, reaps
//! orphans and reports the command's raw wait status on the exit-status pipe. Without
//! one it is the supervising child subreaper (see `init_stage`).
//!
//! It shares cordon's memory (`CLONE_VM`, where [`raw`](crate::raw) has the system
//! calls; a fork-style copy elsewhere): no page tables are copied at its clone, cordon
//! takes no copy-on-write faults after it, and its exit unmaps nothing. So it runs on
//! a stack of its own ([`stack`](crate::stack)), keeps what its signal handlers share
//! with its loop at the top of that stack (never in statics: several runs' inits may
//! be alive at once), and reads the parent's `Prepared` only while the parent is
//! blocked on the status pipe. Once it closes its copy of that pipe the parent resumes
//! and may free the plan, so from there on it touches only its own stack and makes
//! only raw system calls (a C library wrapper would write the `errno` of the cordon
//! thread that cloned it).
//!
//! What it does not do: decide anything about the command; it never execs.

use std::sync::atomic::Ordering;

use crate::child::caps::{set_own, NO_CAPS};
use crate::child::{fail, lower_own_rlimit, stage_inner, stage_outer, Prepared};
use crate::raw;
use crate::stack::{state_here, InitState};
use crate::status::{detail, Step, STAGE_SETUP_FAILED_EXIT};
use crate::sys::{errno, write_file_at};

extern "C" fn forward_signal(sig: libc::c_int) {
    let child = state_here().child.load(Ordering::Relaxed);
    if child > 0 {
        // The targets are the command's group and the command.
        raw::kill(-child, sig);
        raw::kill(child, sig);
    }
}

/// Signals the init forwards to the command (everything a caller sends to stop,
/// pause or notify a process; SIGKILL and SIGSTOP cannot be caught and are not needed:
/// SIGKILL to the init ends the whole namespace).
const FORWARDED_SIGNALS: [libc::c_int; 13] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGPIPE,
    libc::SIGALRM,
    libc::SIGTERM,
    libc::SIGCONT,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
    libc::SIGWINCH,
];

extern "C" fn inner_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the init's `Prepared`; the init is suspended (CLONE_VFORK) while
    // the command's stage runs.
    let p = unsafe { &mut *(arg as *mut Prepared<'_>) };
    stage_inner(p)
}

/// The clone entry point of the init, on its own stack (see `spawn`).
pub(crate) extern "C" fn init_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Prepared`; the parent stays blocked on the status
    // pipe (it frees nothing) until this init closes its copy of that pipe, and the
    // init does not read `Prepared` after that.
    let p = unsafe { &mut *(arg as *mut Prepared<'_>) };
    init_stage(p)
}

/// The init: pid 1 of a new pid namespace, or (without `CLONE_NEWPID`) a supervising
/// subreaper. Namespaces and mounts, then the command (vfork-style), then init duties.
///
/// The supervising init (every run without a pid namespace: passthrough, bubblewrap)
/// leads the run's process group and the command stays in it, so cordon's group
/// signals reach both; it ignores those signals itself (no-op handlers) so that it
/// outlives the command and can report its status. It is `PR_SET_CHILD_SUBREAPER`:
/// descendants orphaned during the run (bubblewrap's own pid-namespace init among
/// them) become its children, and it reaps them. When the command exits it SIGKILLs
/// every child it still has, and every orphan that is reparented to it as they die,
/// until it has none (via `/proc/self/task/<pid>/children`; without that file only
/// cordon's final group kill remains), then reports and exits. Its parent-death signal
/// is a catchable one ([`SUPERVISOR_PDEATHSIG`]): when cordon dies (even by SIGKILL)
/// it kills and reaps every descendant the same way, then exits. cordon ends a run it
/// must kill with [`SUPERVISOR_SWEEP_SIGNAL`] (see [`request_sweep`](crate::request_sweep)) rather than a
/// SIGKILL that would end the init before the descendants that left its group.
/// Whether the init is cloned with `CLONE_VM`: where this architecture has the raw
/// system calls and the plan allows it ([`StagePlan::init_shares_memory`](crate::StagePlan::init_shares_memory)).
pub(crate) fn shares_memory(plan: &crate::StagePlan) -> bool {
    raw::SHARED_INIT && plan.init_shares_memory
}

pub(crate) fn init_stage(p: &mut Prepared<'_>) -> ! {
    let state = state_here();
    let supervise = p.plan.namespaces & libc::CLONE_NEWPID as libc::c_ulong == 0;
    stage_outer(p, if supervise { SUPERVISOR_PDEATHSIG } else { libc::SIGKILL });
    if supervise {
        // cordon may have died before the parent-death signal was armed.
        if raw::getppid() != p.parent_pid {
            raw::exit(STAGE_SETUP_FAILED_EXIT);
        }
        // 3. The session step is the init's; the command joins its group.
        // SAFETY: setsid/setpgid with integer arguments.
        let r = unsafe {
            if p.plan.new_session {
                libc::setsid()
            } else {
                libc::setpgid(0, 0)
            }
        };
        if r < 0 {
            fail(p, Step::NewSession, errno(), detail::SESSION_INIT);
        }
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
            fail(p, Step::ParentDeathSignal, errno(), detail::PDEATH_SUBREAPER);
        }
        p.join_init_group = true;
    } else {
        // Our own process group, so group signals aimed at the caller's group miss us.
        // SAFETY: setpgid with integer arguments.
        unsafe { libc::setpgid(0, 0) };
    }
    if !shares_memory(p.plan) {
        // A copy of cordon, memory and descriptors (other runs' pipes, the parent's
        // pinned directories) until the close_range below: non-dumpable before the
        // command exists, so that from its first instruction nothing of it can be read
        // or opened through /proc (that needs CAP_SYS_PTRACE then, which the command
        // never has). The command's OOM score is set here first and inherited: its
        // process shares this memory until it execs, so its /proc files are root's from
        // now on. (A shared init must not do either: dumpability and an
        // `oom_score_adj` write belong to the memory, i.e. to cordon; its plan allows
        // sharing only where the command cannot reach it.)
        if let Some(adj) = p.plan.limits.oom_score_adj {
            if let Err(e) = write_file_at(p.proc_dir, b"self/oom_score_adj\0", adj) {
                fail(p, Step::Limits, e, detail::LIMITS_OOM_SCORE_ADJ);
            }
        }
        // SAFETY: prctl with integer arguments.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    }
    // SAFETY: `inner_entry` runs on the dedicated stack (the parent's allocation)
    // with a pointer to our `Prepared`; CLONE_VFORK suspends us until it has exec'd
    // or exited.
    let child = unsafe {
        libc::clone(
            inner_entry,
            p.inner_stack_top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            p as *mut Prepared<'_> as *mut libc::c_void,
        )
    };
    if child < 0 {
        fail(p, Step::Clone, errno(), detail::CLONE_COMMAND);
    }
    state.child.store(child, Ordering::Relaxed);
    let exit_fd = p.exit_fd;
    // No capabilities kept, and no core dump: one would hold cordon's memory. Only
    // the soft limit is lowered (a hard-limit change can be refused, e.g. by SELinux's
    // setrlimit check), and a failure is not fatal: the command runs already, and
    // failing here would orphan it.
    set_own(&NO_CAPS);
    let _ = lower_own_rlimit(libc::RLIMIT_CORE, 0, libc::RLIM_INFINITY);
    let handler =
        if supervise { supervisor_signal as *const () as usize } else { forward_signal as *const () as usize };
    let sweep = supervise.then_some((SUPERVISOR_SWEEP_SIGNAL, supervisor_sweep as *const () as usize));
    for (sig, handler) in FORWARDED_SIGNALS.into_iter().map(|s| (s, handler)).chain(sweep) {
        // SAFETY: installing an async-signal-safe handler with sigaction (the C
        // library's wrapper supplies the return trampoline; every signal stays
        // blocked until the loop below).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigfillset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    // From here on we are the init. Keep only the exit-status pipe: every other fd is
    // a copy of the parent's (other runs' pipes among them) and must not stay open.
    // Closing the status pipe lets the parent resume: after this, no `p`, raw calls only.
    #[allow(clippy::cast_sign_loss, reason = "fds are non-negative")]
    {
        if exit_fd > 0 {
            raw::close_range(0, (exit_fd - 1) as u32);
        }
        raw::close_range((exit_fd + 1) as u32, u32::MAX);
    }
    raw::unblock_all_signals();
    loop {
        let mut status: libc::c_int = 0;
        let r = raw::wait4(-1, &mut status, libc::__WALL);
        if r == child as isize {
            // The status first: a sweep signal during the sweep below must not lose it.
            report_status(state, status);
            if supervise {
                kill_and_reap_all_children(state, 0);
            }
            raw::exit(0);
        }
        if r < 0 && r != -(libc::EINTR as isize) {
            raw::exit(0);
        }
    }
}

/// The supervising init's parent-death signal: catchable, so that it can kill what the
/// run started before it dies (SIGKILL would end the init alone). SIGHUP is among the
/// signals the init handles; a SIGHUP that does not mean "cordon died" (the parent is
/// still there) is ignored.
pub const SUPERVISOR_PDEATHSIG: libc::c_int = libc::SIGHUP;

/// Sent by cordon to a supervising init (to its pid alone, never its group) to end the
/// run at once: the init SIGKILLs and reaps every descendant, reports the command's
/// status when it reaped it, and exits. A SIGKILL to the run's group would end the init
/// first and orphan descendants that left the group; this reaches them too. A real-time
/// signal (above the C library's reserved ones) that no command expects from cordon;
/// a command that sends it to its own group only ends its own run.
pub const SUPERVISOR_SWEEP_SIGNAL: libc::c_int = 40;

/// Write the command's raw wait status to the exit-status pipe (once).
fn report_status(state: &InitState, status: libc::c_int) {
    if state.reported.swap(true, Ordering::Relaxed) {
        return;
    }
    raw::write(state.exit_fd.load(Ordering::Relaxed), &status.to_ne_bytes());
}

/// The supervising init's [`SUPERVISOR_SWEEP_SIGNAL`] handler.
extern "C" fn supervisor_sweep(_sig: libc::c_int) {
    let state = state_here();
    let command = state.child.load(Ordering::Relaxed);
    if !kill_and_reap_all_children(state, command) {
        // 0 is the run's group, this init included.
        raw::kill(0, libc::SIGKILL);
    }
    raw::exit(0);
}

/// The supervising init's handler: a signal aimed at the run's group is for the
/// command (which got it too); once cordon is gone, kill everything and die.
extern "C" fn supervisor_signal(_sig: libc::c_int) {
    let state = state_here();
    if raw::getppid() == state.parent.load(Ordering::Relaxed) {
        return;
    }
    // Every descendant comes to this subreaper as its parent dies: kill and reap
    // until none is left (the run's group and those that left it alike).
    if kill_and_reap_all_children(state, 0) {
        raw::exit(0);
    }
    // No `children` file: kill the run's group, which includes this init, so this
    // does not return.
    raw::kill(0, libc::SIGKILL);
    raw::exit(0);
}

/// SIGKILL every child of this (single-threaded) process listed in
/// `/proc/self/task/<pid>/children`. Returns false when that file cannot be read.
/// Raw syscalls and stack buffers only (it runs in a signal handler and after fork).
fn kill_children() -> bool {
    let mut path = [0u8; 64];
    let prefix = b"/proc/self/task/";
    path[..prefix.len()].copy_from_slice(prefix);
    let mut n = prefix.len();
    #[allow(clippy::cast_sign_loss, reason = "a pid is positive")]
    {
        n += write_decimal(&mut path[n..], raw::getpid() as u32);
    }
    let suffix = b"/children\0";
    path[n..n + suffix.len()].copy_from_slice(suffix);
    let Ok(path) = std::ffi::CStr::from_bytes_until_nul(&path) else { return false };
    let fd = raw::open(path, libc::O_RDONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return false;
    }
    #[allow(clippy::cast_possible_truncation, reason = "an fd is an int widened to long")]
    let fd = fd as libc::c_int;
    let mut buf = [0u8; 4096];
    // Pids fit in an i32 (the kernel's PID_MAX_LIMIT is 2^22); saturate anyway.
    let mut current: i32 = -1;
    loop {
        let got = raw::read(fd, &mut buf);
        if got <= 0 {
            break;
        }
        for &b in &buf[..got as usize] {
            if b.is_ascii_digit() {
                current = current.max(0).saturating_mul(10).saturating_add(i32::from(b - b'0'));
            } else if current > 0 {
                raw::kill(current, libc::SIGKILL);
                current = -1;
            }
        }
    }
    if current > 0 {
        raw::kill(current, libc::SIGKILL);
    }
    raw::close(fd);
    true
}

/// Kill every remaining child, reap it, and repeat for the orphans reparented to this
/// subreaper as their parents die (a dying process's children are reparented before
/// it can be reaped), until there is no child left: then every descendant is gone.
/// Without the `children` file, return false at once (cordon's group kill is then the
/// only sweep). When it reaps `command` (> 0), its status is reported.
fn kill_and_reap_all_children(state: &InitState, command: libc::pid_t) -> bool {
    loop {
        let mut status = 0;
        // What has exited already, and whether any child is left at all, without
        // reading `/proc`: the common end of a run (the command alone, gone) costs one
        // wait4 answering ECHILD. No child left means no descendant left: an orphan is
        // reparented to this subreaper before its parent can be reaped.
        let r = raw::wait4(-1, &mut status, libc::__WALL | libc::WNOHANG);
        if r > 0 {
            if r == command as isize {
                report_status(state, status);
            }
            continue;
        }
        if r == -(libc::EINTR as isize) {
            continue;
        }
        if r < 0 {
            return true;
        }
        // Children alive: kill them, wait for one, and look again.
        if !kill_children() {
            return false;
        }
        let r = raw::wait4(-1, &mut status, libc::__WALL);
        if r > 0 && r == command as isize {
            report_status(state, status);
        }
    }
}

/// Write `v` in decimal at the start of `out`; returns the number of bytes.
fn write_decimal(out: &mut [u8], mut v: u32) -> usize {
    let mut digits = [0u8; 10];
    let mut n = 0;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..n {
        out[i] = digits[n - 1 - i];
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_decimal_writes_the_digits_and_returns_their_count() {
        let mut out = [0u8; 16];
        for (v, text) in [(0u32, "0"), (7, "7"), (10, "10"), (4_194_304, "4194304"), (u32::MAX, "4294967295")] {
            let n = write_decimal(&mut out, v);
            assert_eq!(&out[..n], text.as_bytes());
        }
    }
}
