//! Processes: forks and clones whose children only sleep, write one file or exit
//! (raw system calls only, so forking from a threaded process stays sound), and the
//! calls that reach other processes (signals, `ptrace`, their memory, their limits).

use super::{cvt, own_fd};
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// Sleeps `ms` milliseconds with `nanosleep` (async-signal-safe; restarts on `EINTR`).
fn sleep_ms(ms: u64) {
    let mut ts = libc::timespec {
        tv_sec: libc::time_t::try_from(ms / 1000).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::try_from((ms % 1000) * 1_000_000).unwrap_or(0),
    };
    loop {
        let mut rem = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: nanosleep reads one local timespec and writes the other.
        if unsafe { libc::nanosleep(&ts, &mut rem) } == 0 {
            return;
        }
        // SAFETY: reading this thread's errno slot.
        if unsafe { *libc::__errno_location() } != libc::EINTR {
            return;
        }
        ts = rem;
    }
}

/// In a forked child: stdin, stdout and stderr become `/dev/null` (so the run's
/// pipes do not wait for this process).
fn detach_stdio() {
    // SAFETY: open/dup2/close on a literal path and the standard fds.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::dup2(null, 2);
            if null > 2 {
                libc::close(null);
            }
        }
    }
}

/// In a forked child: creates `path` (mode 0644) and writes `survived\n` into it.
fn write_marker(path: &CStr) {
    // SAFETY: a NUL-terminated path; write reads the literal.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o644);
        if fd >= 0 {
            libc::write(fd, b"survived\n".as_ptr().cast(), 9);
            libc::close(fd);
        }
    }
}

/// In a forked child: ignore every signal that can be ignored.
fn ignore_signals() {
    for sig in 1..65 {
        // SAFETY: setting SIG_IGN has no memory effects; invalid numbers fail harmlessly.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
}

/// `fork()` and return the child's pid; the child runs `child` (raw calls only) and
/// `_exit(0)`s.
fn fork_then(child: impl FnOnce()) -> io::Result<libc::pid_t> {
    // SAFETY: the child only makes the async-signal-safe raw calls of this module
    // (open, dup2, write, nanosleep, setsid, signal, fork) and `_exit`s; it never
    // returns into Rust code that could take a lock.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        child();
        // SAFETY: _exit never returns and runs no destructors or atexit handlers.
        unsafe { libc::_exit(0) };
    }
    cvt(pid.into()).map(|_| pid)
}

/// `waitpid(pid, 0)`: the wait status.
pub fn wait(pid: libc::pid_t) -> io::Result<i32> {
    let mut st = 0;
    // SAFETY: waitpid writes the status into a local.
    cvt(unsafe { libc::waitpid(pid, &mut st, libc::__WALL) }.into())?;
    Ok(st)
}

/// Forks up to `n` children that each sleep `ms` and exit, stopping at the first
/// refused fork. Returns how many were forked and the refusal, if any. The children
/// are not waited for (a pids limit must stop the loop while they live).
pub fn fork_sleepers(n: usize, ms: u64) -> (usize, Option<io::Error>) {
    for done in 0..n {
        if let Err(e) = fork_then(|| {
            detach_stdio();
            sleep_ms(ms);
        }) {
            return (done, Some(e));
        }
    }
    (n, None)
}

/// How a late writer leaves its parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detach {
    /// A plain child, same session and process group.
    Background,
    /// The classic daemon: fork, `setsid`, fork again; the first child exits.
    Daemon,
    /// A daemon that also ignores every signal it can.
    Stubborn,
}

/// Starts a process that, `ms` milliseconds later, creates `path`, then lingers ten
/// times as long — a process that must not outlive the run (whether or not it could
/// write). Returns the pid of the first child (already reaped for the daemon forms).
pub fn late_writer(how: Detach, ms: u64, path: &CStr) -> io::Result<libc::pid_t> {
    let pid = fork_then(|| {
        if how != Detach::Background {
            // SAFETY: setsid takes no arguments.
            unsafe { libc::setsid() };
            if how == Detach::Stubborn {
                ignore_signals();
            } else {
                // SAFETY: ignoring SIGHUP has no memory effects.
                unsafe { libc::signal(libc::SIGHUP, libc::SIG_IGN) };
            }
            // SAFETY: the grandchild only runs the raw calls below and `_exit`s.
            let grandchild = unsafe { libc::fork() };
            if grandchild != 0 {
                return;
            }
        }
        detach_stdio();
        sleep_ms(ms);
        write_marker(path);
        sleep_ms(ms.saturating_mul(10));
    })?;
    if how != Detach::Background {
        wait(pid)?;
    }
    Ok(pid)
}

/// `clone(flags | SIGCHLD)` without a new stack (a fork with flags); the child exits
/// at once and is reaped. Returns the wait status.
pub fn clone_and_reap(flags: u64) -> io::Result<i32> {
    let flags = flags | libc::SIGCHLD as u64;
    // SAFETY: a fork-like clone (no CLONE_VM): the child has its own copy of memory
    // and only calls _exit.
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    if pid == 0 {
        // SAFETY: _exit never returns.
        unsafe { libc::_exit(0) };
    }
    let pid = libc::pid_t::try_from(cvt(pid)?).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    wait(pid)
}

/// `clone3` with `flags` (no new stack); the child exits at once and is reaped.
pub fn clone3_and_reap(flags: u64) -> io::Result<i32> {
    #[repr(C)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
    }
    let args = CloneArgs {
        flags,
        pidfd: 0,
        child_tid: 0,
        parent_tid: 0,
        exit_signal: libc::SIGCHLD as u64,
        stack: 0,
        stack_size: 0,
        tls: 0,
    };
    // SAFETY: clone3 reads the local argument struct; without CLONE_VM and a stack the
    // child is a fork-like copy that only calls _exit.
    let pid = unsafe { libc::syscall(libc::SYS_clone3, &args as *const CloneArgs, std::mem::size_of::<CloneArgs>()) };
    if pid == 0 {
        // SAFETY: _exit never returns.
        unsafe { libc::_exit(0) };
    }
    let pid = libc::pid_t::try_from(cvt(pid)?).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    wait(pid)
}

/// `kill(pid, sig)`.
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: kill takes integers.
    cvt(unsafe { libc::kill(pid, sig) }.into()).map(drop)
}

/// `pidfd_open(pid, 0)`.
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes integers.
    own_fd(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) })
}

/// `pidfd_send_signal(fd, sig, NULL, 0)`.
pub fn pidfd_send_signal(fd: BorrowedFd<'_>, sig: i32) -> io::Result<()> {
    // SAFETY: no siginfo is passed.
    cvt(unsafe { libc::syscall(libc::SYS_pidfd_send_signal, fd.as_raw_fd(), sig, std::ptr::null::<u8>(), 0) }).map(drop)
}

/// `pidfd_getfd(pidfd, target_fd, 0)`: a duplicate of another process's descriptor.
pub fn pidfd_getfd(pidfd: BorrowedFd<'_>, target_fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_getfd takes integers.
    own_fd(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target_fd, 0) })
}

/// `ptrace(PTRACE_ATTACH)` (or `PTRACE_SEIZE`), wait for the stop, then detach.
pub fn ptrace_attach_detach(pid: i32, seize: bool) -> io::Result<()> {
    let req = if seize { libc::PTRACE_SEIZE } else { libc::PTRACE_ATTACH };
    // SAFETY: attach/seize take no pointers (addr and data are null).
    cvt(unsafe { libc::ptrace(req, pid, std::ptr::null_mut::<u8>(), std::ptr::null_mut::<u8>()) })?;
    if !seize {
        let _ = wait(pid);
    }
    // SAFETY: detach with a null signal.
    unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, std::ptr::null_mut::<u8>(), std::ptr::null_mut::<u8>()) };
    Ok(())
}

/// `process_vm_readv`: up to `len` bytes of another process's memory at `addr`.
pub fn process_vm_read(pid: i32, addr: usize, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: len };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: len };
    // SAFETY: the local iovec covers `buf`; the remote one is only read by the kernel
    // in the other process (it faults there, not here).
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    buf.truncate(usize::try_from(cvt(n as libc::c_long)?).unwrap_or(0));
    Ok(buf)
}

/// `process_vm_writev`: writes `data` into another process's memory at `addr`.
pub fn process_vm_write(pid: i32, addr: usize, data: &[u8]) -> io::Result<usize> {
    let local = libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: data.len() };
    // SAFETY: the local iovec covers `data`, which the kernel only reads; the remote
    // address is written in the other process, not this one.
    let n = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
    Ok(usize::try_from(cvt(n as libc::c_long)?).unwrap_or(0))
}

/// `setpriority(PRIO_PROCESS, pid, prio)`.
pub fn set_priority(pid: u32, prio: i32) -> io::Result<()> {
    // SAFETY: setpriority takes integers.
    cvt(unsafe { libc::setpriority(libc::PRIO_PROCESS, pid, prio) }.into()).map(drop)
}

/// `prlimit(pid, RLIMIT_NOFILE, {n, n}, NULL)`.
pub fn prlimit_nofile(pid: i32, n: u64) -> io::Result<()> {
    let rl = libc::rlimit { rlim_cur: n, rlim_max: n };
    // SAFETY: prlimit reads the local rlimit; no old-limit buffer is passed.
    cvt(unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &rl, std::ptr::null_mut()) }.into()).map(drop)
}

/// `setrlimit(resource, {value, value})` on this process (raising a hard limit needs
/// `CAP_SYS_RESOURCE`).
pub fn set_own_limit(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
    let rl = libc::rlimit { rlim_cur: value, rlim_max: value };
    // SAFETY: setrlimit reads the local rlimit.
    cvt(unsafe { libc::setrlimit(resource, &rl) }.into()).map(drop)
}
