//! Spawning: clone a child that applies a [`StagePlan`] and wait for its verdict.
//!
//! Children are cloned from the main thread or from long-lived spawner threads (so
//! the parent-death signal means "cordon exited"). Without an init the child is a
//! vfork-style clone (`CLONE_VM|CLONE_VFORK`) on a dedicated stack that runs every
//! step itself; with an init it is a `CLONE_VM` clone (no `CLONE_VFORK`: it outlives
//! the call) on a stack from the `stack` pool that runs `init::init_stage`, and the
//! init starts the command vfork-style.
//! Everything the child reads is prepared here, before the clone
//! (`child::Prepared`). The parent then reads the status pipe: a
//! [`StageFailure`] record, or end-of-file once the command has exec'd.
//!
//! What it does not do: wait for, signal or reap a child that reached `execve`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use crate::child::{child_entry, Prepared};
use crate::contract::StagePlan;
use crate::init::init_entry;
use crate::raw;
use crate::stack;
use crate::status::{decode_record, detail, StageFailure, Step, STATUS_RECORD_LEN};

/// Stack size for the child between clone and exec (it makes only raw syscalls).
const CHILD_STACK_SIZE: usize = 128 * 1024;

/// A child that passed its stage and is running the command.
#[derive(Debug)]
pub struct Spawned {
    /// Its pid (in cordon's pid namespace). It leads its own process group when the
    /// plan asked for a new session.
    pub pid: libc::pid_t,
    /// A pidfd for it: readable once it exits.
    pub pidfd: OwnedFd,
    /// With an init: a pipe on which the init writes the command's raw wait status
    /// (4 bytes, native endian) before it exits. Nothing on it means the init was
    /// killed (then so was everything in its namespace).
    pub exit_status: Option<OwnedFd>,
}

/// Why [`spawn`] did not produce a running command.
#[derive(Debug)]
pub enum SpawnError {
    /// The parent-side preparation failed (pipe, pidfd, the spawner thread).
    Parent {
        /// What was being done.
        what: &'static str,
        /// The error.
        source: io::Error,
    },
    /// The child reported a failed step; it has been reaped.
    Stage(StageFailure),
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpawnError::Parent { what, source } => write!(f, "{what}: {source}"),
            SpawnError::Stage(s) => s.fmt(f),
        }
    }
}

impl std::error::Error for SpawnError {}

/// What the spawner thread does with the outcome of a spawn (see [`spawn_queued`]).
pub type Reply = Box<dyn FnOnce(Result<Spawned, SpawnError>) + Send>;

type Job = (StagePlan, Reply);

/// Spawner threads: as many as the machine has CPUs, from 2 to 4, so that runs
/// queued by a busy executor set up in parallel (each spawn blocks its thread for the
/// run's stage, about a millisecond).
const SPAWNERS_MIN: usize = 2;
const SPAWNERS_MAX: usize = 4;

/// The spawner threads live as long as the process. Children are cloned from them so
/// that `PR_SET_PDEATHSIG` (which fires when the *thread* that created the child
/// exits) means "cordon exited", not "some worker thread retired". They take jobs
/// from one queue: the next free one spawns.
fn spawner() -> &'static Mutex<mpsc::Sender<Job>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = std::sync::Arc::new(Mutex::new(rx));
        let n =
            std::thread::available_parallelism().map_or(SPAWNERS_MIN, |n| n.get().clamp(SPAWNERS_MIN, SPAWNERS_MAX));
        for _ in 0..n {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name("cordon-spawner".into())
                .spawn(move || loop {
                    let job = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok((plan, reply)) = job else { return };
                    reply(spawn_here(plan));
                })
                .expect("cannot start the cordon spawner thread");
        }
        Mutex::new(tx)
    })
}

/// Clone a child that applies `plan` and executes the program.
///
/// Blocks until the child has either executed the program or reported a failed step
/// (the stage takes well under a millisecond). Call it from a blocking context.
pub fn spawn(plan: StagePlan) -> Result<Spawned, SpawnError> {
    // The main thread lives as long as the process, so a child cloned from it gets
    // the right parent-death semantics without a thread hop.
    // SAFETY: getpid/gettid cannot fail.
    if unsafe { libc::getpid() == libc::gettid() } {
        return spawn_here(plan);
    }
    let (tx, rx) = mpsc::channel();
    spawn_queued(
        plan,
        Box::new(move |outcome| {
            let _ = tx.send(outcome);
        }),
    )?;
    rx.recv().map_err(|_| SpawnError::Parent {
        what: "waiting for the spawner thread",
        source: io::Error::other("spawner thread is gone"),
    })?
}

/// Like [`spawn`], but returns at once: the spawner thread spawns and calls `reply`
/// with the outcome (for a caller that has other work while the stage runs, such as
/// an async runtime serving other runs). `reply` runs on the spawner thread and must
/// not block it for long; when it cannot deliver a [`Spawned`] to anyone, it must
/// end that run itself (nothing else knows of it).
pub fn spawn_queued(plan: StagePlan, reply: Reply) -> Result<(), SpawnError> {
    let guard = spawner().lock().unwrap_or_else(|p| p.into_inner());
    guard.send((plan, reply)).map_err(|_| SpawnError::Parent {
        what: "handing the plan to the spawner thread",
        source: io::Error::other("spawner thread is gone"),
    })
}

fn spawn_here(plan: StagePlan) -> Result<Spawned, SpawnError> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid two-element array for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(SpawnError::Parent { what: "creating the status pipe", source: io::Error::last_os_error() });
    }
    // SAFETY: pipe2 succeeded, so both fds are open and owned by nobody else.
    let (status_read, status_write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };

    let mut argv: Vec<*const libc::c_char> = plan.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = plan.envp.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    let filters = plan
        .seccomp
        .iter()
        .map(|p| {
            let len = u16::try_from(p.len()).map_err(|_| SpawnError::Parent {
                what: "a seccomp program longer than sock_fprog can describe",
                source: io::ErrorKind::InvalidInput.into(),
            })?;
            Ok(libc::sock_fprog { len, filter: p.as_ptr() as *mut libc::sock_filter })
        })
        .collect::<Result<_, SpawnError>>()?;
    // The host's /proc for the command's `oom_score_adj` (see `Prepared::proc_dir`).
    let proc_dir = match plan.limits.oom_score_adj {
        Some(_) => host_proc_dir().map_err(|source| SpawnError::Parent { what: "opening /proc", source })?,
        None => -1,
    };
    let mut prepared = Prepared {
        plan: &plan,
        argv,
        envp,
        slots: vec![-1; plan.mount_slots],
        filters,
        status_fd: status_write.as_raw_fd(),
        last_cap: last_capability(),
        exit_fd: -1,
        inner_stack_top: 0,
        ok_record: false,
        join_init_group: false,
        // SAFETY: getpid has no arguments and cannot fail.
        parent_pid: unsafe { libc::getpid() },
        proc_dir,
    };
    if plan.init {
        return spawn_with_init(prepared, status_read, status_write);
    }

    // The child runs on its own stack while sharing our memory (CLONE_VM) and we
    // are suspended until it execs or exits (CLONE_VFORK): no page tables are copied,
    // which is what makes spawning from a large, multi-threaded parent cheap. All
    // signals are blocked around the clone so no parent handler runs on the child's
    // stack; the child resets dispositions before unblocking.
    let mut stack = vec![0u8; CHILD_STACK_SIZE];
    // SAFETY: the stack grows down; the top is the end of the allocation, rounded
    // down to 16 bytes as the ABI requires.
    let stack_top = unsafe { stack.as_mut_ptr().add(CHILD_STACK_SIZE) } as usize & !0xf;
    let namespaces = libc::c_int::try_from(plan.namespaces).map_err(|_| SpawnError::Parent {
        what: "namespace flags outside clone's int",
        source: io::ErrorKind::InvalidInput.into(),
    })?;
    let flags = namespaces | libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;
    // SAFETY: a zeroed sigset_t is a valid (empty) set.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: sigfillset/pthread_sigmask on local sets.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: `child_entry` runs on the dedicated stack with a pointer to `prepared`,
    // which outlives the child's use of it: CLONE_VFORK suspends this thread until
    // the child has exec'd or exited. The child makes only raw syscalls.
    let pid = unsafe {
        libc::clone(
            child_entry,
            stack_top as *mut libc::c_void,
            flags,
            &mut prepared as *mut Prepared<'_> as *mut libc::c_void,
        )
    };
    let clone_errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
    // SAFETY: restoring the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    drop(stack);
    if pid < 0 {
        return Err(SpawnError::Stage(StageFailure {
            step: Step::Clone,
            errno: clone_errno,
            detail: detail::CLONE_CHILD,
        }));
    }
    let pid = pid as libc::pid_t;
    drop(status_write);
    finish_spawn(pid, status_read, None)
}

/// Wait for the stage's verdict (a failure record, or end-of-file once the command
/// has exec'd) and open a pidfd for `pid`.
fn finish_spawn(pid: libc::pid_t, status_read: OwnedFd, exit_status: Option<OwnedFd>) -> Result<Spawned, SpawnError> {
    // Read the status record; EOF means the exec succeeded. Raw reads: an init that
    // shares our memory may be writing this thread's `errno` until it closes its copy
    // of the pipe, and leaving before EOF while it still reads the plan would free
    // the plan under it.
    let mut record = [0u8; STATUS_RECORD_LEN];
    let mut got = 0usize;
    while got < record.len() {
        #[allow(clippy::cast_sign_loss, reason = "checked non-negative")]
        match raw::read(status_read.as_raw_fd(), &mut record[got..]) {
            0 => break,
            n if n > 0 => got += n as usize,
            n if n == -(libc::EINTR as isize) => {}
            n => {
                // SAFETY: kill on our own unreaped child; reap waits for it to be gone.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                reap(pid);
                #[allow(clippy::cast_possible_truncation, reason = "an errno")]
                return Err(SpawnError::Parent {
                    what: "reading the stage's status pipe",
                    source: io::Error::from_raw_os_error(-n as i32),
                });
            }
        }
    }
    if got == record.len() {
        reap(pid);
        return Err(SpawnError::Stage(decode_record(&record)));
    }

    // SAFETY: pidfd_open on our own unreaped child; the returned fd (if any) is new.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        let err = io::Error::last_os_error();
        // SAFETY: kill/waitpid on our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        reap(pid);
        return Err(SpawnError::Parent { what: "opening a pidfd for the child", source: err });
    }
    #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
    let pidfd = pidfd as RawFd;
    // SAFETY: pidfd_open returned a fresh fd we now own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok(Spawned { pid, pidfd, exit_status })
}

/// The init variant of [`spawn_here`]: a child that shares our memory but runs on a
/// stack of its own (see `init`) becomes pid 1 or the supervising init, sets up
/// namespaces and mounts, starts the command with a vfork-style clone, then serves as
/// init.
fn spawn_with_init(
    mut prepared: Prepared<'_>,
    status_read: OwnedFd,
    status_write: OwnedFd,
) -> Result<Spawned, SpawnError> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid two-element array for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(SpawnError::Parent { what: "creating the exit-status pipe", source: io::Error::last_os_error() });
    }
    // SAFETY: pipe2 succeeded, so both fds are open and owned by nobody else.
    let (exit_read, exit_write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    prepared.exit_fd = exit_write.as_raw_fd();
    // The command's stack (used until it execs, which is before our status read ends).
    let mut stack = vec![0u8; CHILD_STACK_SIZE];
    // SAFETY: the top of the allocation, rounded down to 16 bytes.
    prepared.inner_stack_top = unsafe { stack.as_mut_ptr().add(CHILD_STACK_SIZE) } as usize & !0xf;
    let namespaces = libc::c_int::try_from(prepared.plan.namespaces).map_err(|_| SpawnError::Parent {
        what: "namespace flags outside clone's int",
        source: io::ErrorKind::InvalidInput.into(),
    })?;
    let init_stack =
        stack::take().map_err(|source| SpawnError::Parent { what: "mapping a stack for the run's init", source })?;
    init_stack.prepare(prepared.parent_pid, prepared.exit_fd);
    let shared = if crate::init::shares_memory(prepared.plan) { libc::CLONE_VM } else { 0 };
    let flags = namespaces | shared | libc::SIGCHLD;
    // SAFETY: a zeroed sigset_t is a valid (empty) set.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: sigfillset/pthread_sigmask on local sets.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: `init_entry` runs on the init stack with a pointer to `prepared`, which
    // lives until this function returns; the init reads it only until it closes its
    // copy of the status pipe, and `finish_spawn` returns only after that (or after
    // the init is gone). Without CLONE_VM the child works on its own copy.
    let pid = unsafe {
        libc::clone(init_entry, init_stack.top(), flags, &mut prepared as *mut Prepared<'_> as *mut libc::c_void)
    };
    let clone_errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
    // SAFETY: restoring the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    if pid < 0 {
        stack::done(init_stack);
        return Err(SpawnError::Stage(StageFailure {
            step: Step::Clone,
            errno: clone_errno,
            detail: detail::CLONE_CHILD,
        }));
    }
    drop(status_write);
    drop(exit_write);
    let result = finish_spawn(pid, status_read, Some(exit_read));
    // The command has exec'd (or is gone) and the init no longer reads `prepared`.
    drop(stack);
    match &result {
        // The init runs on: its stack comes back once its pidfd says it exited.
        Ok(spawned) => stack::in_use(init_stack, &spawned.pidfd),
        // Every error path of `finish_spawn` reaped the init.
        Err(_) => stack::done(init_stack),
    }
    result
}

/// Wait for `pid` to be gone (raw `wait4`: after a failure record the init may still
/// run in C library wrappers that write this thread's `errno`, and stopping early
/// would hand its stack to the next run).
fn reap(pid: libc::pid_t) {
    let mut status = 0;
    while raw::wait4(pid, &mut status, 0) == -(libc::EINTR as isize) {}
}

/// cordon's `/proc` (`O_PATH`, close-on-exec), opened once per process: the mount
/// cannot change under a running cordon, and every spawn with an `oom_score_adj` needs
/// it. A failure is not remembered (the next spawn tries again).
fn host_proc_dir() -> io::Result<RawFd> {
    static PROC: OnceLock<OwnedFd> = OnceLock::new();
    if let Some(fd) = PROC.get() {
        return Ok(fd.as_raw_fd());
    }
    // SAFETY: open with a static NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(c"/proc".as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd we own; a racing spawn's duplicate is dropped (closed) by `set`.
    let _ = PROC.set(unsafe { OwnedFd::from_raw_fd(fd) });
    Ok(PROC.get().map_or(fd, |f| f.as_raw_fd()))
}

/// The highest capability number the running kernel knows (read once per process:
/// it cannot change while the kernel runs).
pub(crate) fn last_capability() -> u32 {
    static LAST: OnceLock<u32> = OnceLock::new();
    *LAST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/cap_last_cap").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(63)
    })
}
