//! The contract's data: everything the parent prepares for the child ([`StagePlan`]
//! and its parts). The child only reads it, between `clone` and `execve`, so every
//! value is ready to hand to a raw syscall (C strings, fds, BPF programs, bit masks).
//!
//! What it does not do: build a plan (the `cordon` library's `runner::stage` does) or
//! check one (the child's steps fail on what the kernel refuses).

use std::ffi::CString;
use std::io;
use std::os::fd::{OwnedFd, RawFd};

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
    /// Open the writable root `path` (without following any symlink; it must be
    /// `expect`) into `slot`, before anything is attached over it: the source
    /// [`MountOp::BindOver`] clones from (its mount holds the host's submounts only, so
    /// a clone from it stays cheap however many paths are attached under the root).
    OpenPristine {
        /// Absolute path of a writable root.
        path: CString,
        /// Slot the open directory is kept in.
        slot: usize,
        /// The identity the parent pinned for it.
        expect: FileIdentity,
    },
    /// Attach over `target` a recursive clone (`open_tree`) of `source_rel` under the
    /// pristine root in `source_slot`, with `MOUNT_ATTR_*` bits `set` on the whole
    /// clone and `clear_top` cleared on its top mount, before it is attached. `target`
    /// is opened without following any symlink and must be `target_expect`, the clone
    /// must be `expect` (either unchecked when `None`: what a held root's layer shows,
    /// made in this namespace before anything of the run's exists).
    /// The attached copy makes `target` a mount point: it cannot be renamed, replaced
    /// or removed (`EBUSY`), and with `MOUNT_ATTR_RDONLY` nothing beneath it changes.
    /// The clone's descriptor is closed at once: thousands of these need no more than
    /// two open files at a time.
    BindOver {
        /// Absolute path (a protected path, a reopened one, or a directory on the way
        /// to one).
        target: CString,
        /// The identity the parent pinned for `target`; `None` inside a held root's
        /// layer (the overlay's own inode, a mount point in its upper directory).
        target_expect: Option<FileIdentity>,
        /// The identity the parent pinned for the host file the clone must be; `None`
        /// for a clone of `target` itself inside a held root's layer.
        expect: Option<FileIdentity>,
        /// The [`MountOp::OpenPristine`] slot of its writable root; `None`: `target`
        /// itself as it looks now (inside a held root's layer).
        source_slot: Option<usize>,
        /// `target` relative to that root (empty without a slot).
        source_rel: CString,
        /// `MOUNT_ATTR_*` bits to set on the whole copy.
        set: u64,
        /// `MOUNT_ATTR_*` bits to clear on the copy's top mount.
        clear_top: u64,
    },
    /// Open `target` now (without following any symlink; it must be `expect`) and put
    /// it at descriptor `fd` (`dup2`), replacing what the parent passed there: a bind
    /// source for bubblewrap (`--bind-fd`) that carries this namespace's mounts
    /// beneath it (the protected paths attached by [`MountOp::BindOver`]), not the
    /// host's.
    ReopenOnto {
        /// Absolute path.
        target: CString,
        /// The identity the parent pinned for it.
        expect: FileIdentity,
        /// The descriptor number to replace (the parent's copy of the pinned source).
        fd: i32,
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
        /// When set, `target` is a host directory: it is opened without following any
        /// symlink and must be this identity, and the tmpfs is mounted onto that open
        /// directory (through `/proc/self/fd/N`, the fresh `/proc` of the namespace), so
        /// a path swapped after the parent's check cannot redirect the mount.
        expect: Option<FileIdentity>,
    },
    /// A fresh tmpfs made detached (`fsopen`, `fsconfig`, `fsmount`; `nosuid`, `nodev`),
    /// kept in slot `slot` for the upper and work directories of
    /// [`MountOp::Overlay`]s ([`OverlayUpper::Staged`]). The first overlay using it
    /// attaches it onto its own target, under itself: kernels before 6.15 take an
    /// overlay's upper only from a mount in the caller's namespace. Nothing of it is
    /// visible once the overlay is mounted on top.
    StagingTmpfs {
        /// Slot the mount's fd is kept in (shared with [`MountOp::CloneTree`] slots).
        slot: usize,
        /// `fsconfig` string parameters, e.g. `("size", "1073741824")`.
        params: Vec<(CString, CString)>,
    },
    /// An overlay filesystem on the directory `target` whose lower layer is that very
    /// directory (as it is before the overlay covers it): the command reads the host's
    /// files there, and every change (a write, a new file, a removal, a rename, a
    /// metadata change) lands in the upper directory, never in the host's. Mounted
    /// `nosuid,nodev` (a host device node seen through it cannot be opened as one).
    /// Special files keep their host identity out of reach: a FIFO opened through
    /// the overlay is the overlay inode's own pipe, and a unix socket file there
    /// accepts no `connect()` (overlayfs looks sockets up by the overlay's inode).
    ///
    /// Made with the mount API (`fsopen("overlay")`, `fsconfig`, `fsmount`):
    /// `lowerdir=[ABOVE:...:]TARGET`, `upperdir=U`, `workdir=W` and the options, each
    /// directory named as `/proc/self/fd/N` of a descriptor the child opened (so
    /// nothing is resolved by name twice); then attached (`move_mount`) onto the
    /// target's open descriptor: on top of whatever is mounted there (the staging
    /// tmpfs). The mount's descriptor is kept in `slot`, so a later
    /// [`MountOp::SetAttrSlot`] sets its attributes without a path.
    Overlay {
        /// The directory covered; also the lowest layer.
        target: CString,
        /// When set, `target` is opened without following any symlink and must be this
        /// identity (a pinned host directory); otherwise it is opened by path (a system
        /// directory: `/tmp`, `/dev/shm`).
        expect: Option<FileIdentity>,
        /// Read-only layers above the target (topmost first), each a directory opened
        /// without following symlinks and checked against its identity.
        lower_above: Vec<(CString, FileIdentity)>,
        /// Where changes go.
        upper: OverlayUpper,
        /// Directories to create inside the upper directory before mounting, relative
        /// to it and outermost first (mount points for trees attached later): each is
        /// then a directory of the overlay whatever the host has at that name, so no
        /// symlink planted in the lower layer redirects an attach.
        mountpoints: Vec<CString>,
        /// Empty files to create inside the upper directory the same way, after the
        /// directories (mount points for file trees attached later: a protected
        /// gitfile).
        mountpoint_files: Vec<CString>,
        /// Mount options: `(key, value)` (`fsconfig` string parameters such as
        /// `index=off`) or `(key, None)` (flags such as `userxattr`).
        options: Vec<(CString, Option<CString>)>,
        /// Slot the overlay's mount descriptor is kept in.
        slot: usize,
    },
    /// Create the file `path` (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600) holding
    /// `content`: a per-run file seeded into a fresh private tmpfs (the command's
    /// private global git config), after the mounts that make it writable.
    WriteFile {
        /// Absolute path inside a private tmpfs.
        path: CString,
        /// The bytes to write (bounded by the parent).
        content: Vec<u8>,
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

/// Where an overlay's changes go ([`MountOp::Overlay`]).
#[derive(Debug)]
pub enum OverlayUpper {
    /// New directories `upper` and `work` in the staging tmpfs of slot `slot` (see
    /// [`MountOp::StagingTmpfs`]), discarded with the run. The upper directory takes
    /// the mode of the target (and its owner where the namespace maps it), since it is
    /// what the overlay's root shows.
    Staged {
        /// Slot of the staging tmpfs.
        slot: usize,
        /// Name of the upper directory in it.
        upper: CString,
        /// Name of the work directory in it.
        work: CString,
        /// Attach the staging tmpfs onto the target first (after the target was
        /// opened as the lower layer): set on the first overlay using it.
        attach: bool,
    },
    /// Existing host directories kept across runs: each opened without following
    /// symlinks and checked against its identity. They must be on one filesystem.
    Dirs {
        /// The upper directory.
        upper: CString,
        /// Its pinned identity.
        upper_expect: FileIdentity,
        /// The work directory (empty, or left by an earlier mount of the same upper).
        work: CString,
        /// Its pinned identity.
        work_expect: FileIdentity,
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

/// Identity maps written for a child that lives in a new user namespace.
#[derive(Debug, Clone)]
pub struct IdMaps {
    /// `uid_map` contents, e.g. `"1000 1000 1\n"`.
    pub uid_map: CString,
    /// `gid_map` contents.
    pub gid_map: CString,
}

/// Everything the child needs, prepared by the parent. Build it, then [`spawn`](fn@crate::spawn) it.
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
    /// Enter `cwd` by opening it without following any symlink (`RESOLVE_NO_SYMLINKS`)
    /// and `fchdir`, instead of `chdir`: for a working directory seen through a private
    /// layer, whose identity differs from the host directory's (`cwd_expect` is then
    /// `None`). A component swapped for another real directory lands inside the same
    /// checked tree; one swapped for a symlink fails.
    pub cwd_no_symlinks: bool,
    /// The parent's fds that become the child's 0, 1 and 2. Each must be either
    /// equal to its target or greater than 2.
    pub stdio: [RawFd; 3],
    /// Extra `CLONE_NEW*` flags for `clone`.
    pub namespaces: libc::c_ulong,
    /// Identity maps, when `namespaces` contains `CLONE_NEWUSER`.
    pub id_maps: Option<IdMaps>,
    /// Mount operations, applied in order (needs `CLONE_NEWNS`).
    pub mounts: Vec<MountOp>,
    /// Bring the loopback interface up (step 5b) in the network namespace of the run's
    /// own (`CLONE_NEWNET` in `namespaces`): a fresh namespace has only `lo`, down.
    pub loopback_up: bool,
    /// Number of slots the [`MountOp::CloneTree`] operations use.
    pub mount_slots: usize,
    /// Call `setsid`; otherwise only `setpgid(0, 0)`.
    pub new_session: bool,
    /// Run a minimal init that reports the command's wait status on
    /// [`Spawned::exit_status`](crate::Spawned::exit_status). With `CLONE_NEWPID` it is pid 1 of the new pid
    /// namespace: it forwards signals to the command and reaps orphans (without it the
    /// command itself would be pid 1, which ignores signals it has no handler for:
    /// `kill -9 $$` would fail). Without `CLONE_NEWPID` it is a supervising subreaper
    /// that leads the run's process group, reaps and kills what the run leaves behind,
    /// and kills the run when cordon dies (see `init_stage`).
    pub init: bool,
    /// The init may share cordon's memory (`CLONE_VM`, where the architecture allows:
    /// no copy of cordon per run). Only when the command cannot reach the init: it
    /// restricts itself with Landlock (a domain scopes ptrace, and with it every
    /// `/proc/<pid>` file behind a ptrace check: `mem`, `environ`, `maps`, `fd/`, to
    /// processes inside it) or it runs under bubblewrap with cordon's stage helper
    /// (bubblewrap's own pid namespace, the helper's Landlock domain); or nothing is
    /// confined (full access: the command has cordon's uid and its `/proc` files
    /// anyway). Otherwise the init is a copy of cordon that makes itself non-dumpable
    /// before the command exists, so that nothing of cordon's (memory, descriptors,
    /// other runs' secrets) can be read through it.
    pub init_shares_memory: bool,
    /// Set `no_new_privs`.
    pub no_new_privs: bool,
    /// A Landlock ruleset fd and `landlock_restrict_self` flags.
    pub landlock: Option<(OwnedFd, u32)>,
    /// Landlock path-beneath rules added in the child after the mounts (for trees
    /// that only exist inside the child, such as its private tmpfs): path and
    /// `LANDLOCK_ACCESS_FS_*` bits.
    pub late_landlock_rules: Vec<(CString, u64)>,
    /// Late rules for private tmpfs mounts on host directories (the home's cache
    /// directory): each path is opened without following any symlink and must be a
    /// writable tmpfs, or the step fails with `ESTALE` (a host directory swapped in
    /// after the mount would otherwise receive the write grant). Indexed after
    /// [`StagePlan::late_landlock_rules`] in failure details.
    pub late_landlock_tmpfs_rules: Vec<(CString, u64)>,
    /// Drop every capability and verify that none is left.
    pub drop_capabilities: bool,
    /// seccomp BPF programs, installed in order.
    pub seccomp: Vec<Vec<libc::sock_filter>>,
    /// When set, the last seccomp program is installed with
    /// `SECCOMP_FILTER_FLAG_NEW_LISTENER` and the listener fd is sent (`SCM_RIGHTS`) on
    /// this socket to the parent, then closed: the command never holds it.
    pub notify_socket: Option<RawFd>,
    /// With [`StagePlan::notify_socket`]: a `NETLINK_SOCK_DIAG` socket is created in the
    /// command's network namespace (before any filter, which would refuse it) and sent
    /// in the same message, after the listener. The supervisor asks it which unix
    /// sockets listen inside the run (`notify::unix_listeners`), so it can tell a
    /// socket the run bound from a host daemon's.
    pub unix_diag: bool,
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
    /// Attach files the parent opened (write-only) in the run's cgroups (`cgroup.procs`,
    /// or a v1 hierarchy's `tasks`); the child writes `0` to each, moving itself in
    /// before it forks anything (while it has one thread, so `tasks` moves it whole).
    pub cgroup_procs: Vec<RawFd>,
    /// `(RLIMIT_*, soft, hard)` set with `prlimit64` on the child itself. A hard
    /// limit above the inherited one is lowered to it (never raised).
    pub rlimits: Vec<(u32, u64, u64)>,
    /// Write this to `/proc/self/oom_score_adj` (1000: the OOM killer picks the
    /// command before cordon; raising needs no privilege).
    pub oom_score_adj: Option<&'static [u8]>,
}
