//! The child's view of the plan: `Prepared` holds the pointers and numbers the child
//! reads, all built by the parent before `clone` (so the child never allocates), and
//! `fail` is how any step reports a failure and exits. Every step module imports
//! these two; nothing here imports a step.

use std::os::fd::RawFd;

use crate::contract::StagePlan;
use crate::status::{write_record, Step, STAGE_SETUP_FAILED_EXIT};

/// Pointers the child reads; built in the parent so the child never allocates.
pub(crate) struct Prepared<'a> {
    pub(crate) plan: &'a StagePlan,
    pub(crate) argv: Vec<*const libc::c_char>,
    pub(crate) envp: Vec<*const libc::c_char>,
    pub(crate) slots: Vec<RawFd>,
    pub(crate) filters: Vec<libc::sock_fprog>,
    pub(crate) status_fd: RawFd,
    pub(crate) last_cap: u32,
    /// Init mode: the write end of the exit-status pipe, and the command's stack top.
    pub(crate) exit_fd: RawFd,
    pub(crate) inner_stack_top: usize,
    /// The helper writes a success record before `execve` (its status pipe is also
    /// held by bubblewrap's monitor, so end-of-file cannot mean success there).
    pub(crate) ok_record: bool,
    /// Supervising init (no pid namespace): the command stays in the init's process
    /// group instead of starting its own (step 3 is the init's).
    pub(crate) join_init_group: bool,
    /// The pid of the process that spawns (cordon), for the init's parent-death check.
    pub(crate) parent_pid: libc::pid_t,
    /// `/proc` as cordon sees it (opened by the parent when the plan sets
    /// `oom_score_adj`, else -1): the command's step 1b writes its `oom_score_adj`
    /// through it, since the run's own `/proc` (and, read-only mode, every mount of
    /// its namespace) is read-only.
    pub(crate) proc_dir: RawFd,
}

/// Report a failed step on the status pipe and exit. Never returns.
pub(crate) fn fail(p: &Prepared<'_>, step: Step, errno: i32, detail: u32) -> ! {
    write_record(p.status_fd, step, errno, detail);
    // SAFETY: _exit(2) is async-signal-safe and cannot fail.
    unsafe { libc::_exit(STAGE_SETUP_FAILED_EXIT) }
}
