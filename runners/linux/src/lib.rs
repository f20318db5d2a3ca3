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
//!    Then (1b, in the process that execs the command, never in an init: see `init`)
//!    the run's resource limits ([`ChildLimits`]): join the run's cgroups (a raw
//!    `write("0")` to each attach fd the parent opened: `cgroup.procs`, or `tasks` on
//!    v1), set the rlimits, and make this process (and so the command) the OOM
//!    killer's first choice.
//! 2. Signal dispositions reset to default (the parent ignores `SIGPIPE`; the command
//!    must not inherit that). The signal mask stays full until just before `execve`
//!    (step 13): until then the process shares cordon's memory, and a core-dumping
//!    signal would write it out.
//! 3. New session (`setsid`): no controlling terminal, so no `TIOCSTI` into the
//!    caller's terminal; the child leads its own process group. When the plan keeps
//!    the session (an interactive caller's job control), `setpgid` still gives the
//!    child its own process group.
//! 4. User-namespace identity maps, when the plan created a user namespace
//!    (`setgroups` deny, then `uid_map`, `gid_map` mapping the caller's ids onto
//!    themselves).
//! 5. Mount operations, in plan order (private propagation, detached clones of the
//!    sources, attaching them, `/proc`, private tmpfs mounts, private overlay layers
//!    over host directories (the host's files readable, changes kept in a staging
//!    tmpfs), recursive read-only, a tmpfs onto a pinned host directory, per-run files
//!    written into a fresh tmpfs).
//! 6. Standard streams: the plan's three fds become 0, 1, 2.
//! 7. Every other fd is marked close-on-exec (`close_range`), so only stdio crosses
//!    (plus any fd the plan passes explicitly, e.g. bubblewrap's seccomp program).
//! 8. Working directory.
//! 9. `no_new_privs`.
//! 10. Landlock: rules for trees that exist only in the child (its private tmpfs
//!     mounts and overlays; one on a host directory only if it is a writable tmpfs or
//!     overlay, the root of its mount, reached without a symlink) are added to the
//!     parent's ruleset, then `landlock_restrict_self`.
//! 11. Capabilities: bounding set emptied and securebits locked (when the process
//!     holds `CAP_SETPCAP`; otherwise it has no capabilities to lose and
//!     `no_new_privs` keeps it so), ambient cleared, effective/permitted/inheritable
//!     cleared, then read back and verified.
//! 12. seccomp filters, last, in plan order.
//! 13. `execve`.
//!
//! With an init ([`StagePlan::init`]), steps 1, 2, 4 and 5 are the init's; it then
//! starts the command, which takes steps 1b, 3 and 6 to 13. Without a pid namespace the
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
//! # Layout
//!
//! | module | holds |
//! | --- | --- |
//! | `contract` | the data the parent hands the child: [`StagePlan`], [`MountOp`], [`IdMaps`], [`ChildLimits`], [`FileIdentity`] |
//! | `status` | the status record: [`Step`], [`StageFailure`], the [`detail`] numbers, encoding and decoding |
//! | `spawn` | [`spawn`]: the spawner thread, the vfork-style clone, the clone of an init (sharing cordon's memory), the parent's wait for the verdict |
//! | `init` | the minimal init (pid 1, or the supervising subreaper) and its signal handlers |
//! | `stack` | the init's own stack, the state its handlers find at its top, and the pool that reuses a stack once its init exited |
//! | `raw` | system calls issued without the C library (no `errno`), for the init once cordon runs on |
//! | `child` | the child's steps: outer (1, 2, 4, 5) and inner (3, 6 to 13), with mounts, Landlock, capabilities and seccomp (the listener hand-back) in submodules |
//! | [`helper`] | the bwrap runner's stage helper (steps 9 to 13 inside bubblewrap's sandbox) |
//! | `sys` | raw, async-signal-safe syscall wrappers both sides use ([`open_path_no_symlinks`]) |
//! | `parent` | parent-side syscall wrappers: [`host`], [`signals`], [`fds`], [`notify`], [`request_sweep`] |
//! | [`probe`] | raw operations for `cordon audit`'s probe program (one system call each behind a safe signature; never used between `clone` and `execve`) |
//!
//! Only `child`, `init`, `raw`, `sys`, `stack::state_here` and the parts of `status`
//! and `contract` they call run between `clone` and `execve` (and in the init);
//! everything there is async-signal-safe.
//!
//! # What this crate does not do
//!
//! It makes no policy decisions: which paths are writable, which syscalls are refused
//! and what the run reports are decided by the parent. It does not wait for, signal or
//! reap the child beyond returning its pid and a pidfd.
#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(clippy::cast_possible_truncation)]

mod child;
mod contract;
pub mod helper;
mod init;
mod parent;
pub mod probe;
mod raw;
mod spawn;
mod stack;
mod status;
mod sys;

pub use contract::{
    ChildLimits, FileIdentity, IdMaps, MountOp, OverlayUpper, StagePlan, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID,
    MOUNT_ATTR_RDONLY,
};
pub use init::{SUPERVISOR_PDEATHSIG, SUPERVISOR_SWEEP_SIGNAL};
pub use parent::{
    canary, drop_thread_permission_overrides, fds, host, local, mounts, notify, request_sweep,
    restore_thread_permission_overrides, signals,
};
pub use spawn::{spawn, spawn_queued, Reply, SpawnError, Spawned};
pub use status::{detail, StageFailure, Step, STAGE_SETUP_FAILED_EXIT, STATUS_RECORD_LEN};
pub use sys::{open_path_no_symlinks, statx, FileStat};
