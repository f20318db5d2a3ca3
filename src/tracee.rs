//! Reading a supervised task's memory from the seccomp supervisor thread (Linux): the
//! path and socket-address arguments of a stopped syscall, for `crate::denials` (the
//! supervisor) and `crate::writes` (its judgement of writes), and the count of reads
//! that failed for a reason other than the task's own, which the run's result reports
//! (`SandboxFacts::unobserved`).
//!
//! What it does not do: decide anything. A read is a time-of-check/time-of-use hazard
//! for allow decisions, so what is read only ever feeds a refusal or the report.

thread_local! {
    /// Reads of a task's memory that failed for a reason other than the task's own
    /// (a bad pointer, the task gone) on this supervisor thread: how many, and the
    /// first errno. See [`read_task_memory`].
    static UNREAD: std::cell::Cell<(u64, i32)> = const { std::cell::Cell::new((0, 0)) };
}

/// Read a task's memory for the supervisor (see `cordon_stage::notify::read_memory`).
/// A failure that is not the task's own doing (`EFAULT`, `EIO`: a bad pointer the
/// kernel would refuse too; `ESRCH`: the task is gone) is counted, so the run's result
/// can say that some syscalls went unjudged (`SandboxFacts::unobserved`) instead of
/// reporting no denials.
pub(crate) fn read_task_memory(pid: u32, addr: u64, buf: &mut [u8]) -> Option<usize> {
    match cordon_stage::notify::read_memory(pid, addr, buf) {
        Ok(n) => Some(n),
        Err(e) => {
            note_unread(e.raw_os_error().unwrap_or(libc::EIO));
            None
        }
    }
}

/// Count a failed read on this thread, unless the task caused it (see
/// [`read_task_memory`]).
pub(crate) fn note_unread(errno: i32) {
    if !matches!(errno, libc::EFAULT | libc::EIO | libc::ESRCH) {
        UNREAD.with(|u| {
            let (n, first) = u.get();
            u.set((n + 1, if n == 0 { errno } else { first }));
        });
    }
}

/// The failed reads counted on this thread so far (how many, the first errno), and
/// start counting again.
pub(crate) fn take_unread() -> (u64, i32) {
    UNREAD.with(|u| u.take())
}
