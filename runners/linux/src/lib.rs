//! cordon's child-side stage: everything that happens between `clone` and `exec`.
//!
//! This crate is the far side of the exec boundary. The parent (the `cordon` library)
//! prepares a [`StagePlan`] — C strings, a Landlock ruleset fd, compiled BPF programs,
//! a list of mount operations — and hands it to [`spawn`]. `spawn` clones a child on a
//! dedicated long-lived thread and the child applies the plan with raw system calls
//! only (no allocation, no locks, no panics: the parent may be multi-threaded, so
//! only async-signal-safe work is allowed between `clone` and `execve`).
//!
//! # The child's contract, in order
//!
//! 1. Parent-death signal (`PR_SET_PDEATHSIG`), so the command dies with cordon.
//!    Then the run's resource limits ([`ChildLimits`]): join the run's cgroups (a
//!    raw `write("0")` to each `cgroup.procs` fd the parent opened), set the rlimits,
//!    and make this process (and so the command) the OOM killer's first choice.
//! 2. Signal dispositions reset to default and the signal mask cleared (the parent
//!    ignores `SIGPIPE`; the command must not inherit that).
//! 3. New session (`setsid`): no controlling terminal, so no `TIOCSTI` into the
//!    caller's terminal; the child leads its own process group. When the plan keeps
//!    the session (an interactive caller's job control), `setpgid` still gives the
//!    child its own process group.
//! 4. User-namespace identity maps, when the plan created a user namespace
//!    (`setgroups` deny, then `uid_map`, `gid_map` mapping the caller's ids onto
//!    themselves).
//! 5. Mount operations, in plan order (private propagation, detached clones of the
//!    sources, attaching them, `/proc`, recursive read-only).
//! 6. Standard streams: the plan's three fds become 0, 1, 2.
//! 7. Every other fd is marked close-on-exec (`close_range`), so only stdio crosses
//!    (plus any fd the plan passes explicitly, e.g. bubblewrap's seccomp program).
//! 8. Working directory.
//! 9. `no_new_privs`.
//! 10. Landlock: rules for trees that exist only in the child (its private tmpfs)
//!     are added to the parent's ruleset, then `landlock_restrict_self`.
//! 11. Capabilities: bounding set emptied and securebits locked (when the process
//!     holds `CAP_SETPCAP`; otherwise it has no capabilities to lose and
//!     `no_new_privs` keeps it so), ambient cleared, effective/permitted/inheritable
//!     cleared, then read back and verified.
//! 12. seccomp filters, last, in plan order.
//! 13. `execve`.
//!
//! With an init ([`StagePlan::init`]), steps 1, 2, 4 and 5 are the init's; it then
//! starts the command, which takes steps 3 and 6 to 13. Without a pid namespace the
//! init supervises instead of being pid 1: it takes step 3 itself (the command joins
//! its process group), its parent-death signal is [`SUPERVISOR_PDEATHSIG`], and it is a
//! child subreaper that kills and reaps every process the run leaves behind.
//!
//! If a step fails, the child writes a [`StageFailure`] record (step, errno, detail)
//! to a close-on-exec status pipe and exits with [`STAGE_SETUP_FAILED_EXIT`]. The parent
//! reads the pipe: end-of-file means `execve` succeeded.
//!
//! The `bwrap` runner's stage helper ([`helper`]) runs steps 9 to 13 again, in the
//! process bubblewrap executes inside the finished sandbox (Landlock cannot be applied
//! before bubblewrap mounts); it reports on its own status pipe, with an explicit
//! success record before `execve`.
//!
//! # What this crate does not do
//!
//! It makes no policy decisions: which paths are writable, which syscalls are refused
//! and what the run reports are decided by the parent. It does not wait for, signal or
//! reap the child beyond returning its pid and a pidfd.
#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(clippy::cast_possible_truncation)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

/// Exit status of a child whose stage failed before `execve` (the status pipe says why).
pub const STAGE_SETUP_FAILED_EXIT: i32 = 125;

/// One step of the child's contract; its number travels in a [`StageFailure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Step {
    /// `clone` itself (reported by the parent side).
    Clone = 0,
    /// `PR_SET_PDEATHSIG`.
    ParentDeathSignal = 1,
    /// Resetting signal dispositions and mask.
    Signals = 2,
    /// `setsid`.
    NewSession = 3,
    /// Writing the user-namespace id maps.
    IdMaps = 4,
    /// A mount operation (the detail is its index in the plan).
    Mount = 5,
    /// Installing stdin/stdout/stderr.
    Stdio = 6,
    /// Marking inherited fds close-on-exec.
    CloseFds = 7,
    /// `chdir` to the working directory.
    Chdir = 8,
    /// `PR_SET_NO_NEW_PRIVS`.
    NoNewPrivs = 9,
    /// `landlock_restrict_self`.
    Landlock = 10,
    /// Dropping capabilities.
    Capabilities = 11,
    /// Installing a seccomp filter (the detail is its index).
    Seccomp = 12,
    /// `execve`.
    Exec = 13,
    /// Applying [`ChildLimits`] (the detail: 0 cgroup, 1 rlimit, 2 oom_score_adj,
    /// plus 16 × the index).
    Limits = 14,
}

impl Step {
    fn from_u32(v: u32) -> Option<Step> {
        use Step::*;
        Some(match v {
            0 => Clone,
            1 => ParentDeathSignal,
            2 => Signals,
            3 => NewSession,
            4 => IdMaps,
            5 => Mount,
            6 => Stdio,
            7 => CloseFds,
            8 => Chdir,
            9 => NoNewPrivs,
            10 => Landlock,
            11 => Capabilities,
            12 => Seccomp,
            13 => Exec,
            14 => Limits,
            _ => return None,
        })
    }

    /// A stable lower-case name for messages and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Step::Clone => "clone",
            Step::ParentDeathSignal => "parent-death-signal",
            Step::Signals => "signals",
            Step::NewSession => "new-session",
            Step::IdMaps => "id-maps",
            Step::Mount => "mount",
            Step::Stdio => "stdio",
            Step::CloseFds => "close-fds",
            Step::Chdir => "chdir",
            Step::NoNewPrivs => "no-new-privs",
            Step::Landlock => "landlock",
            Step::Capabilities => "capabilities",
            Step::Seccomp => "seccomp",
            Step::Exec => "exec",
            Step::Limits => "limits",
        }
    }
}

/// Why the child did not reach the command: the step, the errno and a step detail
/// (the mount or filter index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageFailure {
    /// The step that failed.
    pub step: Step,
    /// The errno the failing call returned.
    pub errno: i32,
    /// Index of the failing mount operation or seccomp filter; 0 otherwise.
    pub detail: u32,
}

impl std::fmt::Display for StageFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "sandbox setup step `{}` (#{}) failed: {}",
            self.step.name(),
            self.detail,
            io::Error::from_raw_os_error(self.errno)
        )
    }
}

/// A mount operation applied inside the child's private mount namespace.
#[derive(Debug)]
pub enum MountOp {
    /// Make every mount private (`MS_REC|MS_PRIVATE` on `/`) so nothing propagates back.
    MakeRootPrivate,
    /// Take a detached recursive clone of `source` (`open_tree`) into slot `slot`.
    /// Done before anything is attached, so sources hidden later stay reachable.
    CloneTree {
        /// Absolute source path.
        source: CString,
        /// Slot index the detached tree is kept in until attached.
        slot: usize,
        /// The identity the parent pinned for `source`: the clone's root must be that
        /// very directory or file, or the step fails (the path was swapped).
        expect: Option<FileIdentity>,
    },
    /// Attach the tree in `slot` at `target` (`move_mount`).
    Attach {
        /// Slot filled by an earlier [`MountOp::CloneTree`].
        slot: usize,
        /// Absolute target path (must exist).
        target: CString,
        /// When set, `target` is opened without following any symlink and must be
        /// this identity; the tree is attached onto that open file, so a path swapped
        /// after the check cannot redirect the mount.
        expect: Option<FileIdentity>,
    },
    /// `mount_setattr` on the tree held in `slot` (after it was attached, the mount it
    /// refers to), never on a path that could have been swapped.
    SetAttrSlot {
        /// Slot filled by an earlier [`MountOp::CloneTree`].
        slot: usize,
        /// Apply to the whole subtree (`AT_RECURSIVE`).
        recursive: bool,
        /// `MOUNT_ATTR_*` bits to set.
        set: u64,
        /// `MOUNT_ATTR_*` bits to clear.
        clear: u64,
    },
    /// Mount a fresh procfs for the new pid namespace at `target`; a failure is
    /// ignored when `optional` (the host `/proc` then stays).
    Proc {
        /// Usually `/proc`.
        target: CString,
        /// Whether a failure is tolerated.
        optional: bool,
    },
    /// Mount a fresh tmpfs at `target` (nosuid, nodev) with mount data `data`
    /// (`mode=1777`, and a `size=` bound). It lives and dies with the mount
    /// namespace, so nothing is left on the host.
    Tmpfs {
        /// Usually `/tmp` or `/dev/shm`.
        target: CString,
        /// The mount data, e.g. `mode=1777,size=1073741824`.
        data: CString,
    },
    /// Create a directory (an existing one is fine): mount points inside a fresh tmpfs.
    Mkdir {
        /// Absolute path.
        path: CString,
    },
    /// `mount_setattr` on `target`: set and clear `MOUNT_ATTR_*` bits.
    SetAttr {
        /// Absolute path of a mount root.
        target: CString,
        /// Apply to the whole subtree (`AT_RECURSIVE`).
        recursive: bool,
        /// `MOUNT_ATTR_*` bits to set.
        set: u64,
        /// `MOUNT_ATTR_*` bits to clear.
        clear: u64,
    },
}

/// `MOUNT_ATTR_RDONLY` from `<linux/mount.h>`.
pub const MOUNT_ATTR_RDONLY: u64 = 0x0000_0001;
/// `MOUNT_ATTR_NOSUID` from `<linux/mount.h>`.
pub const MOUNT_ATTR_NOSUID: u64 = 0x0000_0002;
/// `MOUNT_ATTR_NODEV` from `<linux/mount.h>`.
pub const MOUNT_ATTR_NODEV: u64 = 0x0000_0004;

/// A file's identity (`st_dev`, `st_ino`), pinned by the parent while it holds the
/// file open, so the numbers cannot be reused for another file meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileIdentity {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

impl FileIdentity {
    /// The identity of an open file (async-signal-safe: one `fstat`).
    pub fn of_fd(fd: RawFd) -> io::Result<FileIdentity> {
        // SAFETY: fstat fills a zeroed, properly sized local struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: see above; `fd` is only read.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(FileIdentity { dev: st.st_dev, ino: st.st_ino })
    }
}

/// `openat2(dirfd, path, O_PATH | O_CLOEXEC, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`:
/// an `O_PATH` fd for `path` refusing a symlink in ANY component (`ELOOP`).
/// Async-signal-safe (one raw syscall), so the child may use it.
pub fn open_path_no_symlinks(dirfd: RawFd, path: &std::ffi::CStr) -> io::Result<OwnedFd> {
    // `struct open_how` from <linux/openat2.h> (libc's is non-exhaustive).
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: openat2 with a NUL-terminated path and a local open_how whose size is
    // passed alongside.
    let fd = unsafe {
        libc::syscall(libc::SYS_openat2, dirfd, path.as_ptr(), &how as *const OpenHow, std::mem::size_of::<OpenHow>())
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
    let fd = fd as RawFd;
    // SAFETY: the kernel returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Identity maps written for a child that lives in a new user namespace.
#[derive(Debug, Clone)]
pub struct IdMaps {
    /// `uid_map` contents, e.g. `"1000 1000 1\n"`.
    pub uid_map: CString,
    /// `gid_map` contents.
    pub gid_map: CString,
}

/// Everything the child needs, prepared by the parent. Build it, then [`spawn`] it.
#[derive(Debug)]
pub struct StagePlan {
    /// Absolute path of the program to execute.
    pub program: CString,
    /// `argv`, including `argv[0]`.
    pub argv: Vec<CString>,
    /// The complete environment, as `NAME=value`.
    pub envp: Vec<CString>,
    /// Working directory (absolute).
    pub cwd: CString,
    /// The identity the parent pinned for `cwd`: after `chdir`, the working directory
    /// must be that directory, or the stage fails (a component was swapped).
    pub cwd_expect: Option<FileIdentity>,
    /// The parent's fds that become the child's 0, 1 and 2. Each must be either
    /// equal to its target or greater than 2.
    pub stdio: [RawFd; 3],
    /// Extra `CLONE_NEW*` flags for `clone`.
    pub namespaces: libc::c_ulong,
    /// Identity maps, when `namespaces` contains `CLONE_NEWUSER`.
    pub id_maps: Option<IdMaps>,
    /// Mount operations, applied in order (needs `CLONE_NEWNS`).
    pub mounts: Vec<MountOp>,
    /// Number of slots the [`MountOp::CloneTree`] operations use.
    pub mount_slots: usize,
    /// Call `setsid`; otherwise only `setpgid(0, 0)`.
    pub new_session: bool,
    /// Run a minimal init that reports the command's wait status on
    /// [`Spawned::exit_status`]. With `CLONE_NEWPID` it is pid 1 of the new pid
    /// namespace: it forwards signals to the command and reaps orphans (without it the
    /// command itself would be pid 1, which ignores signals it has no handler for:
    /// `kill -9 $$` would fail). Without `CLONE_NEWPID` it is a supervising subreaper
    /// that leads the run's process group, reaps and kills what the run leaves behind,
    /// and kills the run when cordon dies (see `init_stage`).
    pub init: bool,
    /// Set `no_new_privs`.
    pub no_new_privs: bool,
    /// A Landlock ruleset fd and `landlock_restrict_self` flags.
    pub landlock: Option<(OwnedFd, u32)>,
    /// Landlock path-beneath rules added in the child after the mounts (for trees
    /// that only exist inside the child, such as its private tmpfs): path and
    /// `LANDLOCK_ACCESS_FS_*` bits.
    pub late_landlock_rules: Vec<(CString, u64)>,
    /// Drop every capability and verify that none is left.
    pub drop_capabilities: bool,
    /// seccomp BPF programs, installed in order.
    pub seccomp: Vec<Vec<libc::sock_filter>>,
    /// When set, the last seccomp program is installed with
    /// `SECCOMP_FILTER_FLAG_NEW_LISTENER` and the listener fd is sent (`SCM_RIGHTS`) on
    /// this socket to the parent, then closed: the command never holds it.
    pub notify_socket: Option<RawFd>,
    /// Extra fds passed across exec: `(parent fd, child fd)`. Child fds must be above
    /// 2 and distinct; sources must not collide with any child fd number. Used to hand
    /// a confinement helper (bubblewrap) its seccomp program.
    pub pass_fds: Vec<(RawFd, RawFd)>,
    /// Resource limits applied right after the parent-death signal.
    pub limits: ChildLimits,
}

/// Resource limits the child applies to itself before anything else, so every
/// process of the run (an init included) is bounded and counted from the start.
#[derive(Debug, Default)]
pub struct ChildLimits {
    /// `cgroup.procs` fds the parent opened (write-only) in the run's cgroups; the
    /// child writes `0` to each, moving itself in before it forks anything.
    pub cgroup_procs: Vec<RawFd>,
    /// `(RLIMIT_*, soft, hard)` set with `prlimit64` on the child itself. A hard
    /// limit above the inherited one is lowered to it (never raised).
    pub rlimits: Vec<(u32, u64, u64)>,
    /// Write this to `/proc/self/oom_score_adj` (1000: the OOM killer picks the
    /// command before cordon; raising needs no privilege).
    pub oom_score_adj: Option<&'static [u8]>,
}

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

type Job = (StagePlan, mpsc::Sender<Result<Spawned, SpawnError>>);

/// The spawner thread lives as long as the process. Children are cloned from it so
/// that `PR_SET_PDEATHSIG` (which fires when the *thread* that created the child
/// exits) means "cordon exited", not "some worker thread retired".
fn spawner() -> &'static Mutex<mpsc::Sender<Job>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("cordon-spawner".into())
            .spawn(move || {
                for (plan, reply) in rx {
                    let _ = reply.send(spawn_here(plan));
                }
            })
            .expect("cannot start the cordon spawner thread");
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
    {
        let guard = spawner().lock().unwrap_or_else(|p| p.into_inner());
        guard.send((plan, tx)).map_err(|_| SpawnError::Parent {
            what: "handing the plan to the spawner thread",
            source: io::Error::other("spawner thread is gone"),
        })?;
    }
    rx.recv().map_err(|_| SpawnError::Parent {
        what: "waiting for the spawner thread",
        source: io::Error::other("spawner thread is gone"),
    })?
}

/// Pointers the child reads; built in the parent so the child never allocates.
struct Prepared<'a> {
    plan: &'a StagePlan,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    slots: Vec<RawFd>,
    filters: Vec<libc::sock_fprog>,
    status_fd: RawFd,
    last_cap: u32,
    /// Init mode: the write end of the exit-status pipe, and the command's stack top.
    exit_fd: RawFd,
    inner_stack_top: usize,
    /// The helper writes a success record before `execve` (its status pipe is also
    /// held by bubblewrap's monitor, so end-of-file cannot mean success there).
    ok_record: bool,
    /// Supervising init (no pid namespace): the command stays in the init's process
    /// group instead of starting its own (step 3 is the init's).
    join_init_group: bool,
    /// The pid of the process that spawns (cordon), for the init's parent-death check.
    parent_pid: libc::pid_t,
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
        return Err(SpawnError::Stage(StageFailure { step: Step::Clone, errno: clone_errno, detail: 0 }));
    }
    let pid = pid as libc::pid_t;
    drop(status_write);
    finish_spawn(pid, status_read, None)
}

/// Wait for the stage's verdict (a failure record, or end-of-file once the command
/// has exec'd) and open a pidfd for `pid`.
fn finish_spawn(pid: libc::pid_t, status_read: OwnedFd, exit_status: Option<OwnedFd>) -> Result<Spawned, SpawnError> {
    // Read the status record; EOF means the exec succeeded.
    let mut record = [0u8; STATUS_RECORD_LEN];
    let mut got = 0usize;
    while got < record.len() {
        // SAFETY: reading into the unfilled tail of a local buffer.
        let n = unsafe {
            libc::read(status_read.as_raw_fd(), record[got..].as_mut_ptr() as *mut libc::c_void, record.len() - got)
        };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if n == 0 {
            break;
        }
        got += n as usize;
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

/// The init variant of [`spawn_here`]: a fork-style child (its own copy of memory,
/// so it can outlive this call) becomes pid 1, sets up namespaces and mounts, starts
/// the command with a vfork-style clone, then serves as init.
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
    // The command's stack, in the init's copy of this allocation.
    let mut stack = vec![0u8; CHILD_STACK_SIZE];
    // SAFETY: the top of the allocation, rounded down to 16 bytes.
    prepared.inner_stack_top = unsafe { stack.as_mut_ptr().add(CHILD_STACK_SIZE) } as usize & !0xf;
    let flags = prepared.plan.namespaces | libc::SIGCHLD as libc::c_ulong;
    // SAFETY: a zeroed sigset_t is a valid (empty) set.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: sigfillset/pthread_sigmask on local sets.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: a raw clone without CLONE_VM behaves like fork: the child gets its own
    // copy of the address space and only runs `init_stage`, which never returns.
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    if pid == 0 {
        init_stage(&mut prepared);
    }
    let clone_errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
    // SAFETY: restoring the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    drop(stack);
    if pid < 0 {
        return Err(SpawnError::Stage(StageFailure { step: Step::Clone, errno: clone_errno, detail: 0 }));
    }
    drop(status_write);
    drop(exit_write);
    #[allow(clippy::cast_possible_truncation, reason = "the kernel returns a pid (an int) widened to long")]
    let pid = pid as libc::pid_t;
    finish_spawn(pid, status_read, Some(exit_read))
}

/// The command's pid inside the namespace, for the init's signal forwarder.
static INIT_CHILD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn forward_signal(sig: libc::c_int) {
    let child = INIT_CHILD.load(std::sync::atomic::Ordering::Relaxed);
    if child > 0 {
        // SAFETY: kill is async-signal-safe; the targets are the command and its group.
        unsafe {
            libc::kill(-child, sig);
            libc::kill(child, sig);
        }
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
/// must kill with [`SUPERVISOR_SWEEP_SIGNAL`] (see [`request_sweep`]) rather than a
/// SIGKILL that would end the init before the descendants that left its group.
fn init_stage(p: &mut Prepared<'_>) -> ! {
    let supervise = p.plan.namespaces & libc::CLONE_NEWPID as libc::c_ulong == 0;
    stage_outer(p, false, if supervise { SUPERVISOR_PDEATHSIG } else { libc::SIGKILL });
    if supervise {
        // cordon may have died before the parent-death signal was armed.
        // SAFETY: getppid has no arguments.
        if unsafe { libc::getppid() } != p.parent_pid {
            // SAFETY: _exit cannot fail.
            unsafe { libc::_exit(STAGE_SETUP_FAILED_EXIT) };
        }
        SUPERVISOR_PARENT.store(p.parent_pid, std::sync::atomic::Ordering::Relaxed);
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
            fail(p, Step::NewSession, errno(), 2);
        }
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
            fail(p, Step::ParentDeathSignal, errno(), 1);
        }
        p.join_init_group = true;
    } else {
        // Our own process group, so group signals aimed at the caller's group miss us.
        // SAFETY: setpgid with integer arguments.
        unsafe { libc::setpgid(0, 0) };
    }
    // SAFETY: `inner_entry` runs on the dedicated stack (this process's copy of the
    // parent's allocation) with a pointer to our `Prepared`; CLONE_VFORK suspends us
    // until it has exec'd or exited.
    let child = unsafe {
        libc::clone(
            inner_entry,
            p.inner_stack_top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            p as *mut Prepared<'_> as *mut libc::c_void,
        )
    };
    if child < 0 {
        fail(p, Step::Clone, errno(), 1);
    }
    INIT_CHILD.store(child, std::sync::atomic::Ordering::Relaxed);
    // From here on we are the init. Keep only the exit-status pipe: every other fd is
    // a copy of the parent's (other runs' pipes among them) and must not stay open.
    let exit_fd = p.exit_fd;
    // SAFETY: close_range with integer arguments; the exit fd is kept.
    unsafe {
        if exit_fd > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, (exit_fd - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (exit_fd + 1) as u32, u32::MAX, 0u32);
    }
    // No ptrace-style access to pid 1 from inside, and no capabilities kept.
    // SAFETY: prctl and capset with integer/local arguments.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        let mut header = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
        let zero = [CapData { effective: 0, permitted: 0, inheritable: 0 }; 2];
        libc::syscall(libc::SYS_capset, &mut header as *mut CapHeader, zero.as_ptr());
    }
    let handler =
        if supervise { supervisor_signal as *const () as usize } else { forward_signal as *const () as usize };
    SUPERVISOR_EXIT_FD.store(exit_fd, std::sync::atomic::Ordering::Relaxed);
    let sweep = supervise.then_some((SUPERVISOR_SWEEP_SIGNAL, supervisor_sweep as *const () as usize));
    for (sig, handler) in FORWARDED_SIGNALS.into_iter().map(|s| (s, handler)).chain(sweep) {
        // SAFETY: installing an async-signal-safe handler with sigaction.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigfillset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    // SAFETY: sigemptyset/sigprocmask on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: wait4 for any child into a local status word.
        let r = unsafe { libc::wait4(-1, &mut status, libc::__WALL, std::ptr::null_mut()) };
        if r == child {
            // The status first: a sweep signal during the sweep below must not lose it.
            report_status(exit_fd, status);
            if supervise {
                kill_and_reap_all_children(0);
            }
            // SAFETY: _exit cannot fail.
            unsafe { libc::_exit(0) };
        }
        if r < 0 && errno() != libc::EINTR {
            // SAFETY: _exit cannot fail.
            unsafe { libc::_exit(0) };
        }
    }
}

/// The supervising init's parent-death signal: catchable, so that it can kill what the
/// run started before it dies (SIGKILL would end the init alone). SIGHUP is among the
/// signals the init handles; a SIGHUP that does not mean "cordon died" (the parent is
/// still there) is ignored.
pub const SUPERVISOR_PDEATHSIG: libc::c_int = libc::SIGHUP;

/// cordon's pid, as the supervising init saw it at start.
static SUPERVISOR_PARENT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
/// The init's exit-status pipe, for the sweep handler.
static SUPERVISOR_EXIT_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
/// The command's wait status was written to the exit-status pipe.
static STATUS_REPORTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Sent by cordon to a supervising init (to its pid alone, never its group) to end the
/// run at once: the init SIGKILLs and reaps every descendant, reports the command's
/// status when it reaped it, and exits. A SIGKILL to the run's group would end the init
/// first and orphan descendants that left the group; this reaches them too. A real-time
/// signal (above the C library's reserved ones) that no command expects from cordon;
/// a command that sends it to its own group only ends its own run.
pub const SUPERVISOR_SWEEP_SIGNAL: libc::c_int = 40;

/// Tell the supervising init `pid` to end its run now ([`SUPERVISOR_SWEEP_SIGNAL`]).
pub fn request_sweep(pid: libc::pid_t) -> io::Result<()> {
    // SAFETY: kill with integer arguments.
    if unsafe { libc::kill(pid, SUPERVISOR_SWEEP_SIGNAL) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Write the command's raw wait status to the exit-status pipe (once).
fn report_status(exit_fd: RawFd, status: libc::c_int) {
    if STATUS_REPORTED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let bytes = status.to_ne_bytes();
    // SAFETY: write is async-signal-safe; the buffer is local.
    unsafe { libc::write(exit_fd, bytes.as_ptr() as *const libc::c_void, bytes.len()) };
}

/// The supervising init's [`SUPERVISOR_SWEEP_SIGNAL`] handler.
extern "C" fn supervisor_sweep(_sig: libc::c_int) {
    let command = INIT_CHILD.load(std::sync::atomic::Ordering::Relaxed);
    if !kill_and_reap_all_children(command) {
        // SAFETY: kill is async-signal-safe; 0 is the run's group, this init included.
        unsafe { libc::kill(0, libc::SIGKILL) };
    }
    // SAFETY: _exit cannot fail.
    unsafe { libc::_exit(0) };
}

/// The supervising init's handler: a signal aimed at the run's group is for the
/// command (which got it too); once cordon is gone, kill everything and die.
extern "C" fn supervisor_signal(_sig: libc::c_int) {
    // SAFETY: getppid has no arguments.
    let parent = unsafe { libc::getppid() };
    if parent == SUPERVISOR_PARENT.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    // Every descendant comes to this subreaper as its parent dies: kill and reap
    // until none is left (the run's group and those that left it alike).
    if kill_and_reap_all_children(0) {
        // SAFETY: _exit cannot fail.
        unsafe { libc::_exit(0) };
    }
    // No `children` file: kill the run's group, which includes this init, so this
    // does not return.
    // SAFETY: kill is async-signal-safe; 0 is this process's group.
    unsafe {
        libc::kill(0, libc::SIGKILL);
        libc::_exit(0);
    }
}

/// SIGKILL every child of this (single-threaded) process listed in
/// `/proc/self/task/<pid>/children`. Returns false when that file cannot be read.
/// Raw syscalls and stack buffers only (it runs in a signal handler and after fork).
fn kill_children() -> bool {
    let mut path = [0u8; 64];
    let prefix = b"/proc/self/task/";
    path[..prefix.len()].copy_from_slice(prefix);
    let mut n = prefix.len();
    // SAFETY: getpid has no arguments.
    let pid = unsafe { libc::getpid() };
    n += write_decimal(&mut path[n..], pid as u32);
    let suffix = b"/children\0";
    path[n..n + suffix.len()].copy_from_slice(suffix);
    // SAFETY: `path` is NUL-terminated; open/read/close are async-signal-safe.
    let fd = unsafe { libc::open(path.as_ptr() as *const libc::c_char, libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    let mut buf = [0u8; 4096];
    // Pids fit in an i32 (the kernel's PID_MAX_LIMIT is 2^22); saturate anyway.
    let mut current: i32 = -1;
    loop {
        // SAFETY: reading into a local buffer.
        let got = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if got <= 0 {
            break;
        }
        for &b in &buf[..got as usize] {
            if b.is_ascii_digit() {
                current = current.max(0).saturating_mul(10).saturating_add(i32::from(b - b'0'));
            } else if current > 0 {
                // SAFETY: kill with integer arguments.
                unsafe { libc::kill(current, libc::SIGKILL) };
                current = -1;
            }
        }
    }
    if current > 0 {
        // SAFETY: kill with integer arguments.
        unsafe { libc::kill(current, libc::SIGKILL) };
    }
    // SAFETY: closing the fd opened above.
    unsafe { libc::close(fd) };
    true
}

/// Kill every remaining child, reap it, and repeat for the orphans reparented to this
/// subreaper as their parents die (a dying process's children are reparented before
/// it can be reaped), until there is no child left: then every descendant is gone.
/// Without the `children` file, return false at once (cordon's group kill is then the
/// only sweep). When it reaps `command` (> 0), its status is reported.
fn kill_and_reap_all_children(command: libc::pid_t) -> bool {
    loop {
        if !kill_children() {
            return false;
        }
        let mut status = 0;
        // SAFETY: wait4 for any child into a local status word.
        let r = unsafe { libc::wait4(-1, &mut status, libc::__WALL, std::ptr::null_mut()) };
        if r > 0 && r == command {
            report_status(SUPERVISOR_EXIT_FD.load(std::sync::atomic::Ordering::Relaxed), status);
        }
        if r < 0 && errno() != libc::EINTR {
            return true;
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

fn reap(pid: libc::pid_t) {
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
}

/// The highest capability number the running kernel knows.
fn last_capability() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(63)
}

/// Stack size for the child between clone and exec (it makes only raw syscalls).
const CHILD_STACK_SIZE: usize = 128 * 1024;

extern "C" fn child_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Prepared` the parent passed to clone; the parent is
    // suspended (CLONE_VFORK) so nothing else touches it.
    let p = unsafe { &mut *(arg as *mut Prepared<'_>) };
    child_stage(p)
}

/// Report a failed step on the status pipe and exit. Never returns.
fn fail(p: &Prepared<'_>, step: Step, errno: i32, detail: u32) -> ! {
    write_record(p.status_fd, step, errno, detail);
    // SAFETY: _exit(2) is async-signal-safe and cannot fail.
    unsafe { libc::_exit(STAGE_SETUP_FAILED_EXIT) }
}

/// Size of one status record: step, errno, detail (native-endian `u32`, `i32`, `u32`).
pub const STATUS_RECORD_LEN: usize = 12;

/// Write one status record (raw syscall only).
fn write_record(fd: RawFd, step: Step, errno: i32, detail: u32) {
    let mut record = [0u8; STATUS_RECORD_LEN];
    record[0..4].copy_from_slice(&(step as u32).to_ne_bytes());
    record[4..8].copy_from_slice(&errno.to_ne_bytes());
    record[8..12].copy_from_slice(&detail.to_ne_bytes());
    // SAFETY: write(2) is async-signal-safe; the buffer is local.
    unsafe { libc::write(fd, record.as_ptr() as *const libc::c_void, record.len()) };
}

/// Decode one status record written by the stage or the helper.
fn decode_record(record: &[u8; STATUS_RECORD_LEN]) -> StageFailure {
    let step = u32::from_ne_bytes([record[0], record[1], record[2], record[3]]);
    let errno = i32::from_ne_bytes([record[4], record[5], record[6], record[7]]);
    let detail = u32::from_ne_bytes([record[8], record[9], record[10], record[11]]);
    StageFailure { step: Step::from_u32(step).unwrap_or(Step::Exec), errno, detail }
}

fn errno() -> i32 {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() }
}

/// Write all of `data` to `path` with raw syscalls (used for the id maps).
fn write_file(path: &[u8], data: &[u8]) -> Result<(), i32> {
    // SAFETY: `path` is NUL-terminated (callers pass byte literals ending in \0 or
    // CString bytes with NUL); open/write/close are async-signal-safe.
    unsafe {
        let fd = libc::open(path.as_ptr() as *const libc::c_char, libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(errno());
        }
        let n = libc::write(fd, data.as_ptr() as *const libc::c_void, data.len());
        let e = errno();
        libc::close(fd);
        if n != data.len() as isize {
            return Err(if n < 0 { e } else { libc::EIO });
        }
    }
    Ok(())
}

const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x0000_0004;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x0000_0040;

/// `struct mount_attr` from `<linux/mount.h>`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `struct __user_cap_header_struct` / `__user_cap_data_struct` for capset/capget.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;

/// The child side without an init: outer then inner steps. Never returns.
fn child_stage(p: &mut Prepared<'_>) -> ! {
    stage_outer(p, true, libc::SIGKILL);
    stage_inner(p)
}

/// Steps 1, 2, 4 and 5: parent-death signal, signal dispositions, identity maps,
/// mounts. `unblock` clears the signal mask (the init keeps it full until its
/// forwarders are installed).
fn stage_outer(p: &mut Prepared<'_>, unblock: bool, pdeath_signal: libc::c_int) {
    let plan = p.plan;
    // SAFETY (whole function): every call below is a raw, async-signal-safe syscall on
    // memory prepared by the parent before clone; nothing allocates or takes a lock.

    // 1. Parent-death signal.
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, pdeath_signal as libc::c_ulong, 0, 0, 0) } != 0 {
        fail(p, Step::ParentDeathSignal, errno(), 0);
    }
    apply_limits(p);

    // 2. Signals: default dispositions, empty mask.
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP || (32..=34).contains(&sig) {
            continue;
        }
        // SAFETY: signal() with SIG_DFL on a valid signal number; failures for
        // numbers the kernel does not accept are harmless and ignored.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
    if unblock {
        unblock_signals(p);
    }

    // 4. Identity maps in a new user namespace.
    if let Some(maps) = &plan.id_maps {
        if let Err(e) = write_file(b"/proc/self/setgroups\0", b"deny") {
            fail(p, Step::IdMaps, e, 0);
        }
        if let Err(e) = write_file(b"/proc/self/uid_map\0", maps.uid_map.as_bytes()) {
            fail(p, Step::IdMaps, e, 1);
        }
        if let Err(e) = write_file(b"/proc/self/gid_map\0", maps.gid_map.as_bytes()) {
            fail(p, Step::IdMaps, e, 2);
        }
    }

    // 5. Mounts.
    for (i, op) in plan.mounts.iter().enumerate() {
        let detail = u32::try_from(i).unwrap_or(u32::MAX);
        match op {
            MountOp::MakeRootPrivate => {
                // SAFETY: mount with static NUL-terminated strings and null data.
                let r = unsafe {
                    libc::mount(
                        std::ptr::null(),
                        c"/".as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    )
                };
                if r != 0 {
                    fail(p, Step::Mount, errno(), detail);
                }
            }
            MountOp::CloneTree { source, slot, expect } => {
                // SAFETY: open_tree with a NUL-terminated path owned by the plan.
                let fd = unsafe {
                    libc::syscall(
                        libc::SYS_open_tree,
                        libc::AT_FDCWD,
                        source.as_ptr(),
                        OPEN_TREE_CLONE
                            | libc::O_CLOEXEC as libc::c_uint
                            | libc::AT_RECURSIVE as libc::c_uint
                            | libc::AT_SYMLINK_NOFOLLOW as libc::c_uint,
                    )
                };
                if fd < 0 || *slot >= p.slots.len() {
                    fail(p, Step::Mount, errno(), detail);
                }
                #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
                let fd = fd as RawFd;
                p.slots[*slot] = fd;
                if let Some(want) = expect {
                    match FileIdentity::of_fd(fd) {
                        Ok(got) if got == *want => {}
                        Ok(_) => fail(p, Step::Mount, libc::ESTALE, detail),
                        Err(e) => fail(p, Step::Mount, e.raw_os_error().unwrap_or(libc::EIO), detail),
                    }
                }
            }
            MountOp::Attach { slot, target, expect } => {
                let fd = p.slots.get(*slot).copied().unwrap_or(-1);
                let r = match expect {
                    None => {
                        // SAFETY: move_mount from a detached tree fd to a NUL-terminated path.
                        unsafe {
                            libc::syscall(
                                libc::SYS_move_mount,
                                fd,
                                c"".as_ptr(),
                                libc::AT_FDCWD,
                                target.as_ptr(),
                                MOVE_MOUNT_F_EMPTY_PATH,
                            )
                        }
                    }
                    Some(want) => {
                        let t = match open_path_no_symlinks(libc::AT_FDCWD, target) {
                            Ok(t) => t,
                            Err(e) => fail(p, Step::Mount, e.raw_os_error().unwrap_or(libc::EIO), detail),
                        };
                        match FileIdentity::of_fd(t.as_raw_fd()) {
                            Ok(got) if got == *want => {}
                            Ok(_) => fail(p, Step::Mount, libc::ESTALE, detail),
                            Err(e) => fail(p, Step::Mount, e.raw_os_error().unwrap_or(libc::EIO), detail),
                        }
                        // SAFETY: move_mount between two fds the child owns.
                        unsafe {
                            libc::syscall(
                                libc::SYS_move_mount,
                                fd,
                                c"".as_ptr(),
                                t.as_raw_fd(),
                                c"".as_ptr(),
                                MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
                            )
                        }
                    }
                };
                if r != 0 {
                    fail(p, Step::Mount, errno(), detail);
                }
            }
            MountOp::SetAttrSlot { slot, recursive, set, clear } => {
                let fd = p.slots.get(*slot).copied().unwrap_or(-1);
                let attr = MountAttr { attr_set: *set, attr_clr: *clear, propagation: 0, userns_fd: 0 };
                let mut flags = libc::AT_EMPTY_PATH;
                if *recursive {
                    flags |= libc::AT_RECURSIVE;
                }
                // SAFETY: mount_setattr on a tree fd the child owns, an empty path and a
                // local struct whose size is passed alongside.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_mount_setattr,
                        fd,
                        c"".as_ptr(),
                        flags as libc::c_uint,
                        &attr as *const MountAttr,
                        std::mem::size_of::<MountAttr>(),
                    )
                };
                if r != 0 {
                    fail(p, Step::Mount, errno(), detail);
                }
            }
            MountOp::Proc { target, optional } => {
                // SAFETY: mount with NUL-terminated strings.
                let r = unsafe {
                    libc::mount(
                        c"proc".as_ptr(),
                        target.as_ptr(),
                        c"proc".as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                        std::ptr::null(),
                    )
                };
                if r != 0 && !optional {
                    fail(p, Step::Mount, errno(), detail);
                }
            }
            MountOp::Tmpfs { target, data } => {
                // SAFETY: mount with NUL-terminated strings owned by the plan or static.
                let r = unsafe {
                    libc::mount(
                        c"tmpfs".as_ptr(),
                        target.as_ptr(),
                        c"tmpfs".as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV,
                        data.as_ptr() as *const libc::c_void,
                    )
                };
                if r != 0 {
                    fail(p, Step::Mount, errno(), detail);
                }
            }
            MountOp::Mkdir { path } => {
                // SAFETY: mkdir with a NUL-terminated path.
                let r = unsafe { libc::mkdir(path.as_ptr(), 0o755) };
                if r != 0 && errno() != libc::EEXIST {
                    fail(p, Step::Mount, errno(), detail);
                }
            }
            MountOp::SetAttr { target, recursive, set, clear } => {
                let attr = MountAttr { attr_set: *set, attr_clr: *clear, propagation: 0, userns_fd: 0 };
                let flags = if *recursive { libc::AT_RECURSIVE } else { 0 };
                // SAFETY: mount_setattr with a NUL-terminated path and a local struct
                // whose size is passed alongside.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_mount_setattr,
                        libc::AT_FDCWD,
                        target.as_ptr(),
                        flags as libc::c_uint,
                        &attr as *const MountAttr,
                        std::mem::size_of::<MountAttr>(),
                    )
                };
                if r != 0 {
                    fail(p, Step::Mount, errno(), detail);
                }
            }
        }
    }
}

/// Step 1b: join the run's cgroups, set the rlimits, volunteer for the OOM killer.
fn apply_limits(p: &Prepared<'_>) {
    let limits = &p.plan.limits;
    for (i, &fd) in limits.cgroup_procs.iter().enumerate() {
        // SAFETY: write(2) of a static byte to an fd the parent opened for us.
        let n = unsafe { libc::write(fd, b"0".as_ptr() as *const libc::c_void, 1) };
        if n != 1 {
            fail(p, Step::Limits, errno(), 16 * u32::try_from(i).unwrap_or(0));
        }
    }
    for (i, &(resource, soft, hard)) in limits.rlimits.iter().enumerate() {
        let detail = 1 + 16 * u32::try_from(i).unwrap_or(0);
        let mut old = libc::rlimit64 { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: prlimit64 on ourselves (pid 0) reading into a local struct.
        if unsafe { libc::syscall(libc::SYS_prlimit64, 0, resource, std::ptr::null::<libc::rlimit64>(), &mut old) } != 0
        {
            fail(p, Step::Limits, errno(), detail);
        }
        let max = hard.min(old.rlim_max);
        let new = libc::rlimit64 { rlim_cur: soft.min(max), rlim_max: max };
        // SAFETY: prlimit64 on ourselves with a local struct; lowering needs no privilege.
        if unsafe { libc::syscall(libc::SYS_prlimit64, 0, resource, &new, std::ptr::null_mut::<libc::rlimit64>()) } != 0
        {
            fail(p, Step::Limits, errno(), detail);
        }
    }
    if let Some(adj) = limits.oom_score_adj {
        if let Err(e) = write_file(b"/proc/self/oom_score_adj\0", adj) {
            fail(p, Step::Limits, e, 2);
        }
    }
}

fn unblock_signals(p: &Prepared<'_>) {
    // SAFETY: sigemptyset/sigprocmask on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        if libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut()) != 0 {
            fail(p, Step::Signals, errno(), 0);
        }
    }
}

/// Steps 3 and 6 to 13: session, stdio, fds, cwd, no_new_privs, Landlock,
/// capabilities, seccomp, exec. Never returns.
fn stage_inner(p: &mut Prepared<'_>) -> ! {
    let plan = p.plan;
    unblock_signals(p);
    // 3. New session, or at least a process group of its own (under a supervising
    // init, the init's group: it took this step).
    if p.join_init_group {
    } else if plan.new_session {
        // SAFETY: setsid has no arguments.
        if unsafe { libc::setsid() } < 0 {
            fail(p, Step::NewSession, errno(), 0);
        }
    } else {
        // SAFETY: setpgid with integer arguments (0, 0: this process, its own pid).
        if unsafe { libc::setpgid(0, 0) } < 0 {
            fail(p, Step::NewSession, errno(), 1);
        }
    }

    // 6. Standard streams.
    for (target, &src) in (0 as RawFd..).zip(plan.stdio.iter()) {
        if src == target {
            // SAFETY: clearing FD_CLOEXEC on an fd the plan says is ours.
            if unsafe { libc::fcntl(src, libc::F_SETFD, 0) } != 0 {
                fail(p, Step::Stdio, errno(), target as u32);
            }
        } else {
            // SAFETY: dup2 between fds; sources are > 2 so no earlier target is reused.
            if unsafe { libc::dup2(src, target) } < 0 {
                fail(p, Step::Stdio, errno(), target as u32);
            }
        }
    }

    // 7. Only stdio (and the plan's passed fds) cross exec: mark everything else
    // close-on-exec. (Marking rather than closing keeps the status pipe and the
    // ruleset fd usable until exec.)
    // SAFETY: close_range with integer arguments.
    let r = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) };
    if r != 0 {
        fail(p, Step::CloseFds, errno(), 0);
    }
    for &(src, dst) in &plan.pass_fds {
        // SAFETY: dup2/fcntl on fds the plan names; dup2 clears close-on-exec on the
        // new descriptor, and an fd duplicated onto itself is cleared explicitly.
        let r = unsafe {
            if src == dst {
                libc::fcntl(src, libc::F_SETFD, 0)
            } else {
                libc::dup2(src, dst)
            }
        };
        if r < 0 {
            fail(p, Step::CloseFds, errno(), dst as u32);
        }
    }

    // 8. Working directory.
    // SAFETY: chdir with a NUL-terminated path.
    if unsafe { libc::chdir(plan.cwd.as_ptr()) } != 0 {
        fail(p, Step::Chdir, errno(), 0);
    }
    if let Some(want) = plan.cwd_expect {
        // The directory we are in now, whatever path led here: it must be the one
        // the parent pinned (a swapped component lands elsewhere).
        // SAFETY: open with a static NUL-terminated path; the fd is closed below.
        let dot = unsafe { libc::open(c".".as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        let got = if dot < 0 { Err(io::Error::last_os_error()) } else { FileIdentity::of_fd(dot) };
        if dot >= 0 {
            // SAFETY: closing the fd opened just above.
            unsafe { libc::close(dot) };
        }
        match got {
            Ok(got) if got == want => {}
            Ok(_) => fail(p, Step::Chdir, libc::ESTALE, 1),
            Err(e) => fail(p, Step::Chdir, e.raw_os_error().unwrap_or(libc::EIO), 1),
        }
    }
    confine_and_exec(p)
}

/// Steps 9 to 13: no_new_privs, Landlock, capabilities, seccomp, exec. Shared by the
/// cloned child and the bwrap runner's stage helper ([`helper`]). Never returns.
fn confine_and_exec(p: &mut Prepared<'_>) -> ! {
    let plan = p.plan;
    // 9. no_new_privs.
    // SAFETY: prctl with integer arguments.
    if plan.no_new_privs && unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        fail(p, Step::NoNewPrivs, errno(), 0);
    }

    // 10. Landlock: late rules for child-only trees, then restrict.
    if let Some((fd, flags)) = &plan.landlock {
        for (i, (path, access)) in plan.late_landlock_rules.iter().enumerate() {
            add_late_rule(p, fd.as_raw_fd(), path, *access, u32::try_from(i).unwrap_or(u32::MAX));
        }
        // SAFETY: landlock_restrict_self on a ruleset fd the parent created.
        let r = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), *flags) };
        if r != 0 {
            fail(p, Step::Landlock, errno(), 0);
        }
    }

    // 11. Capabilities.
    if plan.drop_capabilities {
        drop_all_capabilities(p);
    }

    // 12. seccomp, last.
    let last = p.filters.len().saturating_sub(1);
    for (i, prog) in p.filters.iter().enumerate() {
        let listen = i == last && plan.notify_socket.is_some();
        let flags: libc::c_ulong = if listen { SECCOMP_FILTER_FLAG_NEW_LISTENER } else { 0 };
        // SAFETY: seccomp(SET_MODE_FILTER) with a sock_fprog pointing at a BPF program
        // the parent compiled and still owns.
        let r = unsafe {
            libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, flags, prog as *const libc::sock_fprog)
        };
        if r < 0 {
            fail(p, Step::Seccomp, errno(), u32::try_from(i).unwrap_or(u32::MAX));
        }
        if listen {
            #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
            let listener = r as RawFd;
            if let Some(sock) = plan.notify_socket {
                if let Err(e) = send_fd(sock, listener) {
                    fail(p, Step::Seccomp, e, u32::try_from(i).unwrap_or(u32::MAX).saturating_add(100));
                }
            }
            // SAFETY: closing the listener fd this step just received.
            unsafe { libc::close(listener) };
        }
    }

    // 13. exec. The helper first says it got this far (see [`helper`]); a failed
    // execve then adds its failure record after that one.
    if p.ok_record {
        write_record(p.status_fd, Step::Exec, 0, 0);
    }
    // SAFETY: execve with NUL-terminated, null-terminated arrays built before clone.
    unsafe { libc::execve(plan.program.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr()) };
    fail(p, Step::Exec, errno(), 0);
}

/// `SECCOMP_FILTER_FLAG_NEW_LISTENER`.
const SECCOMP_FILTER_FLAG_NEW_LISTENER: libc::c_ulong = 1 << 3;

/// A control-message buffer for one `SCM_RIGHTS` fd, aligned for `cmsghdr`; shared by
/// the child's [`send_fd`] and the parent's [`notify::recv_fd`].
#[repr(C, align(8))]
struct CmsgBuf {
    buf: [u8; 64],
}

/// Send `fd` over the unix socket `sock` with `SCM_RIGHTS` (raw syscalls only).
fn send_fd(sock: RawFd, fd: RawFd) -> Result<(), i32> {
    let mut control = CmsgBuf { buf: [0; 64] };
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr() as *mut libc::c_void, iov_len: 1 };
    // SAFETY: building a msghdr over local buffers; CMSG_* macros compute offsets
    // within `control`, which is large enough for one int payload.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.buf.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = libc::CMSG_SPACE(RawFd::BITS / 8) as usize;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(RawFd::BITS / 8) as usize;
        std::ptr::copy_nonoverlapping(
            &fd as *const RawFd as *const u8,
            libc::CMSG_DATA(cmsg),
            std::mem::size_of::<RawFd>(),
        );
        if libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) < 0 {
            return Err(errno());
        }
    }
    Ok(())
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
        fail(p, Step::Landlock, errno(), 1000 + index);
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
        fail(p, Step::Landlock, e, 2000 + index);
    }
}

/// `CAP_SETPCAP`: needed to shrink the bounding set and lock securebits.
const CAP_SETPCAP: u32 = 8;

fn drop_all_capabilities(p: &Prepared<'_>) {
    let mut before = [CapData { effective: 0, permitted: 0, inheritable: 0 }; 2];
    let mut header = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    // SAFETY: capget with a v3 header and a two-element data array to fill.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header as *mut CapHeader, before.as_mut_ptr()) } != 0 {
        fail(p, Step::Capabilities, errno(), 99);
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
            fail(p, Step::Capabilities, errno(), 104);
        }
    }
    // SAFETY: prctl with integer arguments.
    let r = unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0, 0, 0) };
    if r != 0 && errno() != libc::EINVAL {
        fail(p, Step::Capabilities, errno(), 100);
    }
    let mut header = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    let zero = [CapData { effective: 0, permitted: 0, inheritable: 0 }; 2];
    // SAFETY: capset with a v3 header and a two-element data array.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut CapHeader, zero.as_ptr()) } != 0 {
        fail(p, Step::Capabilities, errno(), 101);
    }
    // Verify: read back; every set must be empty.
    let mut now = [CapData { effective: 1, permitted: 1, inheritable: 1 }; 2];
    let mut header = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    // SAFETY: capget with a v3 header and a two-element data array to fill.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header as *mut CapHeader, now.as_mut_ptr()) } != 0 {
        fail(p, Step::Capabilities, errno(), 102);
    }
    if now.iter().any(|d| d.effective != 0 || d.permitted != 0 || d.inheritable != 0) {
        fail(p, Step::Capabilities, libc::EPERM, 103);
    }
    // The ambient set needs no separate check: the kernel keeps it a subset of
    // permitted ∩ inheritable, both verified empty above.
    if can_shrink_bounding {
        for cap in 0..=p.last_cap {
            // SAFETY: prctl with integer arguments.
            if unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong, 0, 0, 0) } == 1 {
                fail(p, Step::Capabilities, libc::EPERM, 200 + cap);
            }
        }
    }
}

/// The bwrap runner's stage helper: steps 9 to 13 of the contract, run by a process
/// that bubblewrap executed after it built the sandbox's mounts (Landlock refuses
/// mount operations to a restricted task, so it cannot be applied before bubblewrap).
///
/// The parent's stage passes its fds through bubblewrap at fixed numbers
/// ([`SECCOMP_FD`](helper::SECCOMP_FD), [`RULESET_FD`](helper::RULESET_FD), [`STATUS_FD`](helper::STATUS_FD), [`EXE_FD`](helper::EXE_FD), [`ENV_FD`](helper::ENV_FD)); bubblewrap executes
/// `/proc/self/fd/EXE_FD`, i.e. the cordon binary, which calls [`run`](helper::run). In order:
///
/// 1. every fd above stdio is marked close-on-exec and the executable's fd closed;
/// 2. cordon's seccomp program is read from [`SECCOMP_FD`](helper::SECCOMP_FD) (its read offset reaching
///    the program's length is the parent's evidence that bubblewrap finished), and the
///    command's environment from [`ENV_FD`](helper::ENV_FD); then every identity in
///    [`CHECKS_FD`](helper::CHECKS_FD) is verified (each bind destination bubblewrap
///    resolved is the file cordon pinned, protected ones read-only; the working
///    directory is the pinned one);
/// 3. `no_new_privs` (already set by the parent's stage; set again, harmless);
/// 4. Landlock: the rules for trees that exist only inside (the private tmpfs) are
///    added to the parent's ruleset ([`RULESET_FD`](helper::RULESET_FD)), then `landlock_restrict_self`;
/// 5. capabilities dropped and verified (bubblewrap's `--cap-drop ALL` left none);
/// 6. the seccomp program, last (with a listener sent to cordon's supervisor on
///    [`NOTIFY_FD`](helper::NOTIFY_FD) and closed, when asked);
/// 7. a success record on [`STATUS_FD`](helper::STATUS_FD), then `execve`.
///
/// A failed step writes a [`StageFailure`] record on [`STATUS_FD`](helper::STATUS_FD) and exits with
/// [`STAGE_SETUP_FAILED_EXIT`]; the command never runs. The parent reads the pipe
/// after the run: a failure record, or no success record at all (bubblewrap or the
/// helper died first), means the sandbox was never complete.
pub mod helper {
    use super::*;

    /// cordon's seccomp program (raw `struct sock_filter` array) in the sandbox.
    pub const SECCOMP_FD: RawFd = 3;
    /// The Landlock ruleset the parent created (rules bound to host inodes, which
    /// bubblewrap's binds share).
    pub const RULESET_FD: RawFd = 4;
    /// The write end of the helper's status pipe.
    pub const STATUS_FD: RawFd = 5;
    /// The cordon executable bubblewrap executes as `/proc/self/fd/6`.
    pub const EXE_FD: RawFd = 6;
    /// The command's environment (`NAME=value` entries, each ending in NUL). The
    /// helper itself runs with bubblewrap's near-empty environment: were the command's
    /// variables in it, `LD_PRELOAD` and friends would load code into the helper
    /// before it confines itself.
    pub const ENV_FD: RawFd = 7;
    /// A unix socket to cordon's supervisor: with [`HelperPlan::notify`], the seccomp
    /// listener is sent on it and closed before `execve` (as in step 12).
    pub const NOTIFY_FD: RawFd = 8;
    /// The identities to verify inside the finished sandbox before confining: entries
    /// `KIND DEV INO PATH`, each ending in NUL, where KIND is `r` (a bind that must be
    /// this file and read-only: a protected path), `w` (a bind that must be this file)
    /// or `c` (the working directory must be this directory; PATH is `.`). bubblewrap
    /// resolves bind destinations itself, so a destination swapped after cordon's check
    /// (a concurrent run renaming a directory inside the workspace) is caught here.
    pub const CHECKS_FD: RawFd = 9;

    /// What the helper does, parsed from its arguments by the caller.
    #[derive(Debug)]
    pub struct HelperPlan {
        /// `landlock_restrict_self` flags.
        pub restrict_flags: u32,
        /// Landlock rules for trees that exist only inside: path and access bits.
        pub late_landlock_rules: Vec<(CString, u64)>,
        /// Absolute path of the command.
        pub program: CString,
        /// The command's `argv`, `argv[0]` included.
        pub argv: Vec<CString>,
        /// Install the seccomp program with a listener and send it on [`NOTIFY_FD`].
        pub notify: bool,
    }

    fn give_up(step: Step, errno: i32, detail: u32) -> ! {
        write_record(STATUS_FD, step, errno, detail);
        // SAFETY: _exit cannot fail.
        unsafe { libc::_exit(STAGE_SETUP_FAILED_EXIT) }
    }

    /// Report unusable helper arguments (step `exec`, `EINVAL`, detail 1) and exit.
    pub fn refuse_arguments() -> ! {
        give_up(Step::Exec, libc::EINVAL, 1)
    }

    /// Read `fd` to its end.
    fn read_all(fd: RawFd) -> Result<Vec<u8>, i32> {
        let mut bytes = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: read into a local buffer of the given length.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
            if n < 0 {
                if errno() == libc::EINTR {
                    continue;
                }
                return Err(errno());
            }
            if n == 0 {
                return Ok(bytes);
            }
            bytes.extend_from_slice(&buf[..n as usize]);
        }
    }

    /// The command's environment from [`ENV_FD`].
    fn read_env() -> Result<Vec<CString>, i32> {
        let bytes = read_all(ENV_FD)?;
        if bytes.last().is_some_and(|b| *b != 0) {
            return Err(libc::EINVAL);
        }
        bytes.split(|b| *b == 0).filter(|e| !e.is_empty()).map(|e| CString::new(e).map_err(|_| libc::EINVAL)).collect()
    }

    /// Check every entry of [`CHECKS_FD`] (see there); a mismatch fails step `mount`
    /// (`ESTALE`: another file than the one cordon pinned; `EROFS`: a protected path
    /// that is not read-only) with the entry's index as detail.
    fn verify_identities() {
        let bytes = match read_all(CHECKS_FD) {
            Ok(b) => b,
            Err(e) => give_up(Step::Mount, e, u32::MAX),
        };
        for (i, entry) in bytes.split(|b| *b == 0).filter(|e| !e.is_empty()).enumerate() {
            let detail = u32::try_from(i).unwrap_or(u32::MAX);
            let mut parts = entry.splitn(4, |b| *b == b' ');
            let (Some(kind), Some(dev), Some(ino), Some(path)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                give_up(Step::Mount, libc::EINVAL, detail)
            };
            let num = |b: &[u8]| std::str::from_utf8(b).ok().and_then(|t| t.parse::<u64>().ok());
            let (Some(dev), Some(ino), Ok(path)) = (num(dev), num(ino), CString::new(path)) else {
                give_up(Step::Mount, libc::EINVAL, detail)
            };
            let fd = match open_path_no_symlinks(libc::AT_FDCWD, &path) {
                Ok(fd) => fd,
                Err(e) => give_up(Step::Mount, e.raw_os_error().unwrap_or(libc::EIO), detail),
            };
            match FileIdentity::of_fd(fd.as_raw_fd()) {
                Ok(got) if got == (FileIdentity { dev, ino }) => {}
                Ok(_) => give_up(Step::Mount, libc::ESTALE, detail),
                Err(e) => give_up(Step::Mount, e.raw_os_error().unwrap_or(libc::EIO), detail),
            }
            if kind == b"r" {
                // SAFETY: fstatvfs fills a zeroed, properly sized local struct.
                let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
                // SAFETY: see above; the fd is open.
                if unsafe { libc::fstatvfs(fd.as_raw_fd(), &mut st) } != 0 {
                    give_up(Step::Mount, errno(), detail);
                }
                if st.f_flag & libc::ST_RDONLY == 0 {
                    give_up(Step::Mount, libc::EROFS, detail);
                }
            }
        }
    }

    /// Read cordon's seccomp program from [`SECCOMP_FD`].
    fn read_program() -> Result<Vec<libc::sock_filter>, i32> {
        let bytes = read_all(SECCOMP_FD)?;
        if bytes.is_empty() || bytes.len() % 8 != 0 || bytes.len() / 8 > u16::MAX as usize {
            return Err(libc::EINVAL);
        }
        Ok(bytes
            .chunks_exact(8)
            .map(|c| libc::sock_filter {
                code: u16::from_ne_bytes([c[0], c[1]]),
                jt: c[2],
                jf: c[3],
                k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect())
    }

    /// Apply the helper's steps (see the module docs) and execute the command.
    /// Never returns: on failure it reports on [`STATUS_FD`] and exits.
    pub fn run(plan: HelperPlan) -> ! {
        // 1. Only stdio crosses the final exec; the executable's fd goes now.
        // SAFETY: close_range/close with integer arguments.
        let r = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) };
        if r != 0 {
            give_up(Step::CloseFds, errno(), 0);
        }
        // SAFETY: closing the executable's fd, which nothing in this process uses.
        unsafe { libc::close(EXE_FD) };
        // 2. The seccomp program.
        let program = match read_program() {
            Ok(p) => p,
            Err(e) => give_up(Step::Seccomp, e, 300),
        };
        // SAFETY: fcntl(F_GETFD) only checks that the fd is open.
        if unsafe { libc::fcntl(RULESET_FD, libc::F_GETFD) } < 0 {
            give_up(Step::Landlock, errno(), 3000);
        }
        // SAFETY: the parent's stage placed the ruleset at RULESET_FD and nothing
        // else in this process owns it.
        let ruleset = unsafe { OwnedFd::from_raw_fd(RULESET_FD) };
        let envp = match read_env() {
            Ok(e) => e,
            Err(e) => give_up(Step::Exec, e, 2),
        };
        verify_identities();
        let stage = StagePlan {
            program: plan.program,
            argv: plan.argv,
            envp,
            cwd: c"/".to_owned(),
            cwd_expect: None,
            stdio: [0, 1, 2],
            namespaces: 0,
            id_maps: None,
            mounts: Vec::new(),
            mount_slots: 0,
            new_session: false,
            init: false,
            no_new_privs: true,
            landlock: Some((ruleset, plan.restrict_flags)),
            late_landlock_rules: plan.late_landlock_rules,
            drop_capabilities: true,
            seccomp: vec![program],
            notify_socket: plan.notify.then_some(NOTIFY_FD),
            pass_fds: Vec::new(),
            // Inherited from cordon's stage, which applied them before bubblewrap ran.
            limits: ChildLimits::default(),
        };
        let mut argv: Vec<*const libc::c_char> = stage.argv.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut envp: Vec<*const libc::c_char> = stage.envp.iter().map(|a| a.as_ptr()).collect();
        envp.push(std::ptr::null());
        let filters = stage
            .seccomp
            .iter()
            .map(|p| {
                // `read_program` refused programs longer than `u16::MAX` instructions.
                let len = u16::try_from(p.len()).unwrap_or_else(|_| give_up(Step::Seccomp, libc::EINVAL, 301));
                libc::sock_fprog { len, filter: p.as_ptr() as *mut libc::sock_filter }
            })
            .collect();
        let mut prepared = Prepared {
            plan: &stage,
            argv,
            envp,
            slots: Vec::new(),
            filters,
            status_fd: STATUS_FD,
            last_cap: last_capability(),
            exit_fd: -1,
            inner_stack_top: 0,
            ok_record: true,
            join_init_group: false,
            // SAFETY: getpid has no arguments and cannot fail.
            parent_pid: unsafe { libc::getpid() },
        };
        // 3 to 7.
        confine_and_exec(&mut prepared)
    }

    /// What the helper's status pipe says, read by the parent after the run.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum HelperStatus {
        /// The helper confined itself completely and called `execve` for the command.
        Executed,
        /// A step failed (the command never ran).
        Failed(StageFailure),
        /// No record: bubblewrap or the helper died before the helper finished (the
        /// command never ran confined by it).
        NeverReached,
    }

    /// Read every record on the helper's status pipe (without blocking: the pipe is
    /// switched to non-blocking mode) and judge them.
    pub fn read_status(fd: std::os::fd::BorrowedFd<'_>) -> HelperStatus {
        let raw = fd.as_raw_fd();
        // SAFETY: fcntl with integer arguments on a borrowed, open fd.
        unsafe {
            let flags = libc::fcntl(raw, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(raw, libc::F_SETFL, flags | libc::O_NONBLOCK);
            }
        }
        let mut bytes = Vec::new();
        let mut buf = [0u8; 256];
        loop {
            // SAFETY: read into a local buffer of the given length.
            let n = unsafe { libc::read(raw, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                break;
            }
            bytes.extend_from_slice(&buf[..n as usize]);
        }
        judge(&bytes)
    }

    /// The verdict on the raw bytes of the status pipe (pure).
    pub fn judge(bytes: &[u8]) -> HelperStatus {
        let mut status = HelperStatus::NeverReached;
        for chunk in bytes.chunks_exact(STATUS_RECORD_LEN) {
            let mut record = [0u8; STATUS_RECORD_LEN];
            record.copy_from_slice(chunk);
            let f = decode_record(&record);
            status = if f.step == Step::Exec && f.errno == 0 {
                match status {
                    HelperStatus::Failed(_) => status,
                    _ => HelperStatus::Executed,
                }
            } else {
                HelperStatus::Failed(f)
            };
        }
        status
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn rec(step: Step, errno: i32, detail: u32) -> Vec<u8> {
            let mut v = Vec::new();
            v.extend_from_slice(&(step as u32).to_ne_bytes());
            v.extend_from_slice(&errno.to_ne_bytes());
            v.extend_from_slice(&detail.to_ne_bytes());
            v
        }

        #[test]
        fn only_a_clean_success_record_means_executed() {
            assert_eq!(judge(&[]), HelperStatus::NeverReached);
            assert_eq!(judge(&rec(Step::Exec, 0, 0)), HelperStatus::Executed);
            let lock = StageFailure { step: Step::Landlock, errno: libc::EPERM, detail: 0 };
            assert_eq!(judge(&rec(Step::Landlock, libc::EPERM, 0)), HelperStatus::Failed(lock));
            // execve failed after the success record.
            let mut both = rec(Step::Exec, 0, 0);
            both.extend(rec(Step::Exec, libc::ENOENT, 0));
            assert!(matches!(judge(&both), HelperStatus::Failed(f) if f.errno == libc::ENOENT));
            // A torn record is not a success.
            assert_eq!(judge(&rec(Step::Exec, 0, 0)[..8]), HelperStatus::NeverReached);
        }
    }
}

/// Host facts only raw syscalls can read.
pub mod host {
    /// The Landlock ABI version the running kernel offers (0: none or disabled).
    pub fn landlock_abi() -> u32 {
        const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
        // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only returns a number.
        let v = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        u32::try_from(v).unwrap_or(0)
    }

    /// Whether seccomp filter mode is available (`PR_GET_SECCOMP` answers).
    pub fn seccomp_available() -> bool {
        // SAFETY: prctl with integer arguments.
        unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
    }

    /// The effective uid.
    pub fn euid() -> u32 {
        // SAFETY: geteuid cannot fail.
        unsafe { libc::geteuid() }
    }

    /// The effective gid.
    pub fn egid() -> u32 {
        // SAFETY: getegid cannot fail.
        unsafe { libc::getegid() }
    }
}

/// Process-wide signal settings the parent needs.
pub mod signals {
    /// Ignore `SIGPIPE` in this process, so writing stdin bytes to a command that
    /// exited without reading yields `EPIPE` instead of killing cordon. (Rust binaries
    /// already do this at startup; library users may not.) Children get the default
    /// disposition back in the stage.
    pub fn ignore_sigpipe() {
        // SAFETY: installing SIG_IGN for SIGPIPE has no memory-safety implications.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    }
}

/// seccomp user notifications: the parent-side half (receive the listener, read
/// notifications, answer them). cordon only ever answers with an error, so the
/// classic time-of-check/time-of-use problem of reading the target's memory cannot
/// widen anything: the address read is used for the report, never for a decision to
/// allow.
pub mod notify {
    use std::io;
    use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

    /// One notification: the syscall a sandboxed task is blocked in.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Notification {
        /// Cookie to answer with.
        pub id: u64,
        /// The task's pid, in the listener owner's pid namespace.
        pub pid: u32,
        /// Syscall number.
        pub nr: i32,
        /// `AUDIT_ARCH_*`.
        pub arch: u32,
        /// Raw arguments.
        pub args: [u64; 6],
    }

    #[repr(C)]
    #[derive(Default)]
    struct SeccompData {
        nr: i32,
        arch: u32,
        instruction_pointer: u64,
        args: [u64; 6],
    }

    #[repr(C)]
    #[derive(Default)]
    struct SeccompNotif {
        id: u64,
        pid: u32,
        flags: u32,
        data: SeccompData,
    }

    #[repr(C)]
    struct SeccompNotifResp {
        id: u64,
        val: i64,
        error: i32,
        flags: u32,
    }

    const IOC_WRITE_READ: u64 = 3;
    const IOC_WRITE: u64 = 1;
    const fn ioc(dir: u64, nr: u64, size: u64) -> u64 {
        (dir << 30) | (size << 16) | ((b'!' as u64) << 8) | nr
    }
    const NOTIF_RECV: u64 = ioc(IOC_WRITE_READ, 0, std::mem::size_of::<SeccompNotif>() as u64);
    const NOTIF_SEND: u64 = ioc(IOC_WRITE_READ, 1, std::mem::size_of::<SeccompNotifResp>() as u64);
    const NOTIF_ID_VALID: u64 = ioc(IOC_WRITE, 2, 8);

    /// A close-on-exec `AF_UNIX` socket pair for handing over the listener.
    pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: socketpair fills a two-element array.
        let r =
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both fds are fresh and ours.
        Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
    }

    /// Receive one fd sent with `SCM_RIGHTS` (non-blocking: the child sent it before
    /// `spawn` returned).
    pub fn recv_fd(sock: BorrowedFd<'_>) -> io::Result<OwnedFd> {
        let mut control = super::CmsgBuf { buf: [0; 64] };
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec { iov_base: byte.as_mut_ptr() as *mut libc::c_void, iov_len: 1 };
        // SAFETY: recvmsg into local buffers; the control message is parsed with the
        // CMSG_* macros within the buffer's bounds and checked for type and length.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.buf.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = control.buf.len();
            let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC);
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            if cmsg.is_null()
                || (*cmsg).cmsg_level != libc::SOL_SOCKET
                || (*cmsg).cmsg_type != libc::SCM_RIGHTS
                || (*cmsg).cmsg_len < libc::CMSG_LEN(RawFd::BITS / 8) as usize
            {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "no descriptor in the message"));
            }
            let mut fd: RawFd = -1;
            std::ptr::copy_nonoverlapping(
                libc::CMSG_DATA(cmsg),
                &mut fd as *mut RawFd as *mut u8,
                std::mem::size_of::<RawFd>(),
            );
            if fd < 0 {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "bad descriptor in the message"));
            }
            Ok(OwnedFd::from_raw_fd(fd))
        }
    }

    /// Receive the next notification (call when the listener is readable).
    pub fn recv(listener: BorrowedFd<'_>) -> io::Result<Notification> {
        let mut n = SeccompNotif::default();
        // SAFETY: ioctl(NOTIF_RECV) fills a zeroed struct of the size the request encodes.
        let r = unsafe { libc::ioctl(listener.as_raw_fd(), NOTIF_RECV as _, &mut n as *mut SeccompNotif) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Notification { id: n.id, pid: n.pid, nr: n.data.nr, arch: n.data.arch, args: n.data.args })
    }

    /// Whether notification `id` is still pending (its task has not died or been
    /// interrupted): check after reading the task's memory.
    pub fn id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
        let mut id = id;
        // SAFETY: ioctl(NOTIF_ID_VALID) reads a u64.
        unsafe { libc::ioctl(listener.as_raw_fd(), NOTIF_ID_VALID as _, &mut id as *mut u64) == 0 }
    }

    /// Complete the syscall with return value `val` (no error): the supervisor did the
    /// work itself (see [`connect_on_behalf`]).
    pub fn respond_value(listener: BorrowedFd<'_>, id: u64, val: i64) -> io::Result<()> {
        let mut resp = SeccompNotifResp { id, val, error: 0, flags: 0 };
        // SAFETY: ioctl(NOTIF_SEND) reads a response struct of the encoded size.
        let r = unsafe { libc::ioctl(listener.as_raw_fd(), NOTIF_SEND as _, &mut resp as *mut SeccompNotifResp) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// `PIDFD_THREAD` (`O_EXCL`, Linux 6.9): a pidfd for a thread, so that
    /// `pidfd_getfd` reads that thread's own descriptor table.
    const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

    /// Connect the socket `fd` of thread `tid` (blocked in a notified `connect()`) to
    /// `addr`, a complete `sockaddr` the supervisor chose: the socket is taken with
    /// `pidfd_getfd` from that thread's descriptor table (the same open file, so the
    /// command's socket is the one that connects) and connected here, never letting the
    /// kernel re-read the command's memory. The connect runs non-blocking and is waited
    /// for in slices of [`CONNECT_SLICE_MS`]; between slices `still_waiting()` is asked
    /// (the supervisor answers whether the command is still blocked in the call), so a
    /// peer that never accepts cannot hold the supervisor after the command is gone. The
    /// socket's own file flags are restored before returning.
    pub fn connect_on_behalf(tid: u32, fd: u64, addr: &[u8], still_waiting: impl Fn() -> bool) -> io::Result<()> {
        let target_fd = i32::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
        let len = libc::socklen_t::try_from(addr.len()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        if addr.len() < 2 || addr.len() > std::mem::size_of::<libc::sockaddr_storage>() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let tid = libc::pid_t::try_from(tid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
        // SAFETY: pidfd_open with integer arguments.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) };
        if pidfd < 0 {
            // Without PIDFD_THREAD (older kernels) a non-leader thread cannot be named:
            // refuse rather than read another descriptor table.
            return Err(io::Error::last_os_error());
        }
        #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
        // SAFETY: the kernel returned a new fd that nothing else owns.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
        // SAFETY: pidfd_getfd with integer arguments.
        let sock = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target_fd, 0) };
        if sock < 0 {
            return Err(io::Error::last_os_error());
        }
        #[allow(clippy::cast_possible_truncation, reason = "the kernel returns an fd (an int) widened to long")]
        // SAFETY: the kernel returned a new fd that nothing else owns.
        let sock = unsafe { OwnedFd::from_raw_fd(sock as RawFd) };
        // A properly aligned copy of the address.
        // SAFETY: sockaddr_storage is plain old data; all zeroes is a valid value.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        // SAFETY: copying `addr.len()` bytes (checked above to fit) into the storage.
        unsafe {
            std::ptr::copy_nonoverlapping(addr.as_ptr(), &mut storage as *mut _ as *mut u8, addr.len());
        }
        // SAFETY: fcntl(F_GETFL) on an fd we own.
        let flags = unsafe { libc::fcntl(sock.as_raw_fd(), libc::F_GETFL) };
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        let blocking = flags & libc::O_NONBLOCK == 0;
        // SAFETY: fcntl(F_SETFL) on an fd we own (the flag is restored below).
        if blocking && unsafe { libc::fcntl(sock.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let result = connect_wait(&sock, &storage, len, blocking, &still_waiting);
        if blocking {
            // SAFETY: fcntl(F_SETFL) restoring the flags read above.
            unsafe { libc::fcntl(sock.as_raw_fd(), libc::F_SETFL, flags) };
        }
        result
    }

    /// How long one wait for a pending connect lasts before the supervisor checks that
    /// the command is still waiting for it.
    pub const CONNECT_SLICE_MS: i32 = 100;

    fn connect_wait(
        sock: &OwnedFd,
        storage: &libc::sockaddr_storage,
        len: libc::socklen_t,
        blocking: bool,
        still_waiting: &impl Fn() -> bool,
    ) -> io::Result<()> {
        loop {
            // SAFETY: connect with a valid socket and an address of the given length.
            let r = unsafe {
                libc::connect(sock.as_raw_fd(), storage as *const libc::sockaddr_storage as *const libc::sockaddr, len)
            };
            if r == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            let pending =
                matches!(e.raw_os_error(), Some(libc::EINPROGRESS) | Some(libc::EAGAIN) | Some(libc::EALREADY));
            if !blocking || !pending {
                // A non-blocking socket gets the kernel's own answer (EINPROGRESS ...).
                return Err(e);
            }
            // The command asked for a blocking connect: wait for it, in slices.
            if !still_waiting() {
                return Err(io::Error::from_raw_os_error(libc::EINTR));
            }
            if e.raw_os_error() == Some(libc::EAGAIN) {
                // A unix listener's full backlog: nothing to poll on; try again later.
                std::thread::sleep(std::time::Duration::from_millis(CONNECT_SLICE_MS.unsigned_abs().into()));
                continue;
            }
            loop {
                let mut p = libc::pollfd { fd: sock.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
                // SAFETY: poll on one pollfd we own.
                let n = unsafe { libc::poll(&mut p, 1, CONNECT_SLICE_MS) };
                if n > 0 {
                    break;
                }
                if !still_waiting() {
                    return Err(io::Error::from_raw_os_error(libc::EINTR));
                }
            }
            // TCP: the outcome is in SO_ERROR.
            {
                let mut err: libc::c_int = 0;
                let mut l = libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).unwrap_or(4);
                // SAFETY: getsockopt into a local int of the given size.
                let r = unsafe {
                    libc::getsockopt(
                        sock.as_raw_fd(),
                        libc::SOL_SOCKET,
                        libc::SO_ERROR,
                        &mut err as *mut libc::c_int as *mut libc::c_void,
                        &mut l,
                    )
                };
                if r != 0 {
                    return Err(io::Error::last_os_error());
                }
                return if err == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(err)) };
            }
        }
    }

    /// Fail the syscall with `errno`.
    pub fn respond_error(listener: BorrowedFd<'_>, id: u64, errno: i32) -> io::Result<()> {
        // A refusal must carry an errno: 0 would make the syscall report success.
        let errno = if errno > 0 { errno } else { libc::EPERM };
        let mut resp = SeccompNotifResp { id, val: 0, error: -errno, flags: 0 };
        // SAFETY: ioctl(NOTIF_SEND) reads a response struct of the encoded size.
        let r = unsafe { libc::ioctl(listener.as_raw_fd(), NOTIF_SEND as _, &mut resp as *mut SeccompNotifResp) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// File-descriptor helpers the parent needs.
pub mod fds {
    use std::io;
    use std::os::fd::{FromRawFd, OwnedFd, RawFd};

    /// Duplicate `fd` to a new close-on-exec descriptor numbered 3 or above.
    pub fn dup_cloexec(fd: RawFd) -> io::Result<OwnedFd> {
        dup_cloexec_above(fd, 3)
    }

    /// Duplicate `fd` to a new close-on-exec descriptor numbered `min` or above.
    pub fn dup_cloexec_above(fd: RawFd, min: RawFd) -> io::Result<OwnedFd> {
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) with integer arguments.
        let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, min) };
        if new < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fcntl returned a fresh descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(new) })
    }

    /// Duplicate `fd` to a new close-on-exec descriptor numbered `floor` or above.
    pub fn dup_above(fd: RawFd, floor: RawFd) -> io::Result<OwnedFd> {
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) with integer arguments.
        let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, floor) };
        if new < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fcntl returned a fresh descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(new) })
    }
}
