//! The planning vocabulary of the runners: the [`Runner`] trait, what a policy
//! requests ([`Restriction::requested_by`]), the inputs of planning ([`PlanInput`])
//! and the pure launch plan ([`LaunchPlan`] and its parts).
//!
//! Every runner module and the materializer import from here; this module imports
//! none of them (selection, which names the runners, lives in `runner/mod.rs`).
//! Nothing here does I/O.

use super::error::PlanError;
use crate::host::HostFacts;
use crate::policy::ExecutionPolicy;
use crate::vocab::{Enforcement, EnforcementLevel, Gap, ProbeStatus, Restriction, RunnerKind};
use serde::Serialize;
use std::ffi::OsString;
use std::path::PathBuf;

// Which restrictions a policy requests is the runners' business (the vocabulary
// module only names them).
impl Restriction {
    /// The restrictions a policy requests.
    pub fn requested_by(policy: &ExecutionPolicy) -> Vec<Restriction> {
        use Restriction::*;
        if !policy.mode.is_confined() {
            return Vec::new();
        }
        let mut r = vec![FsWrite, FsTruncate, FsMetadata];
        if !policy.protected.is_empty() || !policy.git.reopened.is_empty() {
            r.push(ProtectedPaths);
        }
        r.push(PrivateTmp);
        if !policy.network {
            r.extend([Network, UnixSockets]);
        }
        r.extend([
            HostUnixSockets,
            Signals,
            ProcessInspection,
            ProcessLifetime,
            Ipc,
            DeviceIoctl,
            TerminalInjection,
            SyscallFilter,
            Privileges,
            FdIsolation,
        ]);
        r
    }
}

/// Build an [`Enforcement`] from the gaps found among the requested restrictions.
pub fn enforcement_from_gaps(gaps: Vec<(Restriction, String)>) -> Enforcement {
    let level = if gaps.is_empty() { EnforcementLevel::Full } else { EnforcementLevel::Partial };
    Enforcement { level, gaps: gaps.into_iter().map(|(r, reason)| Gap { restriction: r, reason }).collect() }
}

/// Inputs to planning, all resolved beforehand (no I/O during planning).
#[derive(Debug, Clone)]
pub struct PlanInput<'a> {
    /// The resolved policy.
    pub policy: &'a ExecutionPolicy,
    /// Host facts.
    pub host: &'a HostFacts,
    /// Absolute program path.
    pub program: PathBuf,
    /// argv including `argv[0]`.
    pub argv: Vec<OsString>,
    /// The working directory (canonical).
    pub cwd: PathBuf,
    /// Where the per-run private directory (0700, holding `tmp/` and `shm/`) is
    /// created if the plan needs one (`LaunchPlan::needs_run_dir`).
    pub run_dir: PathBuf,
    /// Start a new session (no controlling terminal).
    pub new_session: bool,
    /// `size=` of each private tmpfs (`/tmp`, `/dev/shm`, and the one holding the
    /// private layers of the home's directories), in bytes; `None` leaves the
    /// kernel's default (half of RAM).
    pub tmpfs_size: Option<u64>,
    /// Host directories the run gets a private writable layer over, each a real
    /// directory, canonical and pinned by the executor: the home's cache first, then
    /// the toolchain homes (cargo's, Go's, npm's). A runner with a mount layer puts an
    /// overlay on each (the host's files readable, changes private), or, without
    /// overlayfs, a fresh tmpfs on the cache alone; unless the policy exposes a path
    /// there (see `landlock::private_dirs`).
    pub private_dirs: Vec<PrivateDir>,
    /// The run's private global git config (see `crate::gitconfig`): `None` leaves
    /// git's own lookup alone; `Some(seed)` makes the runner point `GIT_CONFIG_GLOBAL`
    /// at [`GIT_CONFIG_FILE`] in the run's private temp dir, written with `seed`
    /// before the command starts (an empty seed writes nothing: git creates the file
    /// on its first write).
    pub git_config: Option<Vec<u8>>,
    /// Hold the run's writes under its writable roots back (see
    /// `crate::exec::Executor::run_held_until`): the storage directory, pinned by the
    /// executor, that receives an upper and a work directory per root. Only the
    /// landlock runner with overlayfs takes it (`landlock::held_roots`).
    pub held: Option<HeldInput>,
    /// cordon's private state directory (other runs' spill files, the held-writes
    /// storage of runs in flight), which a run with a mount layer must not read: where
    /// the command would see it (a private layer over the host's `/tmp`, or a host
    /// directory outside the private mounts) an empty read-only tmpfs covers it
    /// ([`MountStep::Hide`]). `None` hides nothing.
    pub state_dir: Option<PathBuf>,
}

/// What a planner needs to hold a run's writes back ([`PlanInput::held`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeldInput {
    /// The storage directory (pinned): an upper and a work directory per root are
    /// made in it.
    pub storage: PathBuf,
    /// The protected paths that are files (gitfiles), not directories: their mount
    /// points in a layer are files.
    pub protected_files: Vec<PathBuf>,
}

/// The names of root `i`'s upper and work directories in the held-writes storage.
pub fn held_dirs(i: usize) -> (String, String) {
    (format!("r{i}-upper"), format!("r{i}-work"))
}

/// The name of the run's private global git config in its private temp dir, followed
/// by the run directory's name (unique, with a random part) where the temp dir may
/// show the host's `/tmp`, in which any local user could have made a file of a fixed
/// name (without the dash in the executor's own per-run directory).
pub const GIT_CONFIG_FILE: &str = ".gitconfig-";

/// A host directory a confined run gets a private writable layer over (see
/// [`PlanInput::private_dirs`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PrivateDir {
    /// The directory (canonical, pinned).
    pub path: PathBuf,
    /// Where its changes go.
    pub keep: Keep,
    /// It is the home's cache: without overlayfs it still gets a fresh (empty) tmpfs,
    /// as a cache may start empty; the toolchain homes then stay read-only.
    pub home_cache: bool,
}

/// Where the changes a run makes in a [`PrivateDir`] go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "keep", rename_all = "kebab-case")]
pub enum Keep {
    /// Into the run's private staging tmpfs: discarded with the run.
    Discard,
    /// Into `upper` (with overlayfs's `work`, on the same filesystem), kept for the
    /// next run (`--cache-dir`); the executor pinned both and holds the directory's
    /// lock for the run.
    Upper {
        /// The kept upper directory.
        upper: PathBuf,
        /// Its work directory.
        work: PathBuf,
    },
    /// Another run holds the kept `upper`: it is read as a layer above the host's
    /// directory, and this run's changes are discarded.
    ReadUpper {
        /// The kept upper directory (pinned).
        upper: PathBuf,
    },
}

/// A file written into the run's private temp dir before the command starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeedFile {
    /// Its path as the command sees it.
    pub path: PathBuf,
    /// Its bytes (shown by length only).
    #[serde(serialize_with = "serialize_len")]
    pub content: Vec<u8>,
    /// Who writes it.
    pub by: SeedBy,
}

fn serialize_len<S: serde::Serializer>(content: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(content.len() as u64)
}

/// Who writes a [`SeedFile`]: whoever can reach the private temp dir.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "by", rename_all = "kebab-case")]
pub enum SeedBy {
    /// The child's stage, after its mounts (the private tmpfs exists only there).
    Stage,
    /// The executor, before spawning (the private temp dir is a host directory in the
    /// per-run directory).
    Executor,
    /// bubblewrap (`--file FD DEST`), from a sealed memfd the child inherits as
    /// `child_fd`.
    Fd {
        /// The fd number in the child.
        child_fd: i32,
    },
}

impl PlanInput<'_> {
    /// The private global git config of a run whose private temp dir is `tmpdir` (in
    /// the command's view): the environment variable and the file to seed (pure).
    /// Nothing when a path the policy exposes lies there (a writable root named
    /// `/tmp/.gitconfig` is the caller's, not the run's), nor when one holds it (with
    /// `--writable /tmp` the temp dir is the host's shared `/tmp`: the file would outlive
    /// the run where every local user can plant or read it).
    pub fn git_config_in(&self, tmpdir: &std::path::Path, by: SeedBy) -> (Vec<(String, String)>, Vec<SeedFile>) {
        let Some(seed) = &self.git_config else { return (Vec::new(), Vec::new()) };
        // Inside the sandbox the temp dir may show the host's (a private layer over
        // it): a name of its own per run. The executor's per-run directory is the
        // run's alone.
        let path = match by {
            SeedBy::Executor => tmpdir.join(GIT_CONFIG_FILE.trim_end_matches('-')),
            _ => {
                let tag = self.run_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                tmpdir.join(format!("{GIT_CONFIG_FILE}{tag}"))
            }
        };
        let policy = self.policy;
        let mut exposed = std::iter::once(&policy.workspace).chain(policy.writable_roots.iter());
        if exposed.any(|p| p.starts_with(&path) || path.starts_with(p)) {
            return (Vec::new(), Vec::new());
        }
        let env = vec![("GIT_CONFIG_GLOBAL".to_string(), path.to_string_lossy().into_owned())];
        let files = if seed.is_empty() { Vec::new() } else { vec![SeedFile { path, content: seed.clone(), by }] };
        (env, files)
    }
}

impl PlanInput<'_> {
    /// The private temp dir inside the run dir.
    pub fn run_tmp(&self) -> PathBuf {
        self.run_dir.join("tmp")
    }
    /// The private shared-memory dir inside the run dir.
    pub fn run_shm(&self) -> PathBuf {
        self.run_dir.join("shm")
    }
}

/// A path-level mount step (materialized into the stage's mount ops).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum MountStep {
    /// Private propagation for the whole tree.
    MakeRootPrivate,
    /// Detached clone of `source` kept in `slot`.
    Clone {
        /// Source path.
        source: PathBuf,
        /// Slot index.
        slot: usize,
    },
    /// Attach `slot` at `target`.
    Attach {
        /// Slot index.
        slot: usize,
        /// Target path.
        target: PathBuf,
    },
    /// Fresh procfs for the new pid namespace. When not `required`, a failure keeps
    /// the host's `/proc` (Landlock still confines ptrace-style access to it).
    Proc {
        /// Fail the run if it cannot be mounted.
        required: bool,
    },
    /// A fresh tmpfs at `target`, private to the run.
    Tmpfs {
        /// Target path.
        target: PathBuf,
        /// Its `size=` in bytes (`None`: the kernel's default).
        size: Option<u64>,
    },
    /// Create a directory (a mount point inside a fresh tmpfs).
    Mkdir {
        /// The directory.
        path: PathBuf,
    },
    /// Everything read-only, recursively.
    ReadOnlyRecursive,
    /// `nodev` and `nosuid` on the tree attached at `target`, recursively: a device
    /// node planted in (or already inside) an exposed path cannot be opened as a
    /// device, and no set-id bit takes effect there.
    NoDevNoSuid {
        /// Target path (an attached exposed path).
        target: PathBuf,
    },
    /// Make the mount at `target` writable again (non-recursive).
    Writable {
        /// Target path.
        target: PathBuf,
    },
    /// Make the tree attached at `target` read-only (recursive): a protected path
    /// attached after the tree went read-only (on top of a held root's layer).
    ReadOnly {
        /// Target path (an attached slot's).
        target: PathBuf,
    },
    /// A fresh private tmpfs (mode 0700, nosuid, nodev) that holds the upper and work
    /// directories of the [`MountStep::Overlay`]s naming `staging`; the first of them
    /// attaches it under itself, where the overlay hides it.
    Staging {
        /// Its number, which overlays name.
        staging: usize,
        /// Its `size=` in bytes (`None`: the kernel's default).
        size: Option<u64>,
    },
    /// A private writable layer over the directory `target` (overlayfs, `nosuid`,
    /// `nodev`): the host's files there stay readable, every change lands in the
    /// upper directory and never in the host's (FIFOs, sockets and device nodes seen
    /// through it do not reach the host's: see `cordon_stage::MountOp::Overlay`).
    Overlay {
        /// The directory covered, which is also the overlay's lowest layer.
        target: PathBuf,
        /// `target` is a host directory the executor pinned (as for [`MountStep::Staging`]).
        pinned: bool,
        /// Pinned read-only layers above the target (a kept upper another run holds).
        above: Vec<PathBuf>,
        /// Where changes go.
        upper: LayerUpper,
        /// Mount points for trees attached later under `target`, relative to it,
        /// outermost first: created in the upper directory before the overlay is
        /// mounted, so each is a directory whatever the host has at that name.
        mountpoints: Vec<PathBuf>,
        /// Empty files made the same way, after the directories (mount points for a
        /// protected gitfile).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        mountpoint_files: Vec<PathBuf>,
    },
    /// An empty tmpfs (mode 0, nosuid, nodev, read-only with the rest of the tree)
    /// over `target`, cordon's private state directory ([`PlanInput::state_dir`]), so
    /// the command cannot read what is there. Mounted by path before the tree goes
    /// read-only: the directory is cordon's own (owned by its uid, mode 0700, in a
    /// sticky `/tmp` when there), no other user can swap it.
    Hide {
        /// cordon's state directory.
        target: PathBuf,
    },
    /// Attach `target` over itself, as the tree looks at that point (after every
    /// writable root is in place): see [`crate::policy::ExecutionPolicy::self_binds`].
    BindOver {
        /// The pinned path.
        target: PathBuf,
        /// Read-only, writable, or as the tree around it.
        access: crate::policy::BindAccess,
    },
    /// A fresh private tmpfs (mode 0700, nosuid, nodev) on the host directory
    /// `target`, which the executor pinned: the child mounts onto the directory it
    /// opened without following symlinks and checked against the pin. Mounted after
    /// the tree became read-only, so it stays writable.
    HostTmpfs {
        /// The pinned host directory (the home's cache directory).
        target: PathBuf,
        /// Its `size=` in bytes (`None`: the kernel's default).
        size: Option<u64>,
    },
}

/// Where a [`MountStep::Overlay`]'s changes go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "in", rename_all = "kebab-case")]
pub enum LayerUpper {
    /// New directories in the staging tmpfs numbered `staging`.
    Staged {
        /// The [`MountStep::Staging`] number.
        staging: usize,
    },
    /// Pinned host directories kept across runs.
    Kept {
        /// The upper directory.
        upper: PathBuf,
        /// Its work directory.
        work: PathBuf,
    },
    /// New directories `upper` and `work` in the host directory cloned into `slot`
    /// (by a [`MountStep::Clone`] of the held-writes storage), which the executor reads
    /// after the run; the first overlay naming the slot attaches the clone under itself.
    InClone {
        /// The clone's slot.
        slot: usize,
        /// Name of the upper directory in it.
        upper: String,
        /// Name of the work directory in it.
        work: String,
    },
}

/// The [`MountStep::BindOver`] steps of `policy`, shallow first (pure).
pub fn self_bind_steps(policy: &ExecutionPolicy) -> Vec<MountStep> {
    policy.self_binds().into_iter().map(|(target, access)| MountStep::BindOver { target, access }).collect()
}

/// Detached clones of `paths` (slot `i` for the `i`-th) and the steps attaching each
/// over itself, as two lists: every clone is taken before anything is attached (so no
/// source is hidden yet), and the materializer ties both to the pinned files.
pub fn clone_and_attach<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> (Vec<MountStep>, Vec<MountStep>) {
    paths
        .enumerate()
        .map(|(slot, p)| (MountStep::Clone { source: p.clone(), slot }, MountStep::Attach { slot, target: p.clone() }))
        .unzip()
}

/// Landlock rules, described as data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LandlockPlan {
    /// ABI to build the ruleset for.
    pub abi: u32,
    /// Directories readable and executable beneath.
    pub read: Vec<PathBuf>,
    /// Directories fully writable beneath.
    pub write: Vec<PathBuf>,
    /// Directories fully writable beneath that exist only inside the child (its
    /// private tmpfs mounts); their rules are added in the child.
    pub write_in_child: Vec<PathBuf>,
    /// Private tmpfs mounts on host directories (the home's cache), fully writable
    /// beneath: their rules are added in the child on the path opened without
    /// following symlinks and checked to be a writable tmpfs.
    pub write_in_child_tmpfs: Vec<PathBuf>,
    /// Device files that may be opened for writing (and ioctl'd).
    pub devices: Vec<PathBuf>,
    /// Handle TCP bind/connect (deny all).
    pub deny_tcp: bool,
    /// Scope abstract unix sockets.
    pub scope_abstract_unix: bool,
    /// Scope signals.
    pub scope_signals: bool,
    /// `landlock_restrict_self` flags (audit logging).
    pub restrict_flags: u32,
}

/// Which namespaces to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct NamespacePlan {
    /// Through a user namespace (unprivileged).
    pub user: bool,
    /// Mount namespace.
    pub mount: bool,
    /// Pid namespace.
    pub pid: bool,
    /// IPC namespace.
    pub ipc: bool,
    /// Network namespace of the run's own, its loopback brought up by the stage: IP
    /// reaches only the run itself (and abstract unix names are the run's own).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub net: bool,
}

/// cordon's seccomp program for one run: which filters, how the program reaches the
/// command, and whether the syscalls it refuses are reported. A value, so that the
/// executor and the materializer ask the plan, never which runner made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SeccompPlan {
    /// Compile the filters with the network allowed (no `network_off` filter).
    pub network: bool,
    /// Some host unix sockets are allowed by path: the filters route every
    /// `connect()` to the supervisor (see `seccomp::HOST_UNIX_ALLOW_FILTER`).
    pub unix_allowlist: bool,
    /// The command reaches the network through cordon's proxy only (`--allow-host`):
    /// the filters are `seccomp::PROXY_FILTER`'s, whatever `network` and
    /// `unix_allowlist` say (see `crate::proxy`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub proxy: bool,
    /// The network is off, but the command has a network namespace of its own (only
    /// its loopback) and a supervisor: the filters are `seccomp::LOOPBACK_FILTER`'s
    /// (IP sockets, `bind()` and `listen()` stay; every `connect()` is judged by the
    /// supervisor: the run's own loopback and the unix sockets it listens on), unless
    /// `network` or `proxy` choose another.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub loopback: bool,
    /// How the program reaches the command.
    pub delivery: SeccompDelivery,
    /// The observed syscalls are routed to cordon's supervisor, which records them as
    /// denials: the installer (the stage, or the stage helper) hands its listener
    /// over a notification socket the executor creates.
    pub supervise: bool,
}

/// How cordon's seccomp program reaches the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "via", rename_all = "kebab-case")]
pub enum SeccompDelivery {
    /// The stage installs it itself, last before `execve`.
    Stage,
    /// Compiled into a sealed memfd the child inherits as `child_fd` (above 2), for a
    /// confinement helper to install (bubblewrap's `--seccomp FD`, or cordon's stage
    /// helper inside bubblewrap).
    Fd {
        /// The fd number the program has in the child.
        child_fd: i32,
    },
}

/// How the command's environment reaches it when it does not travel in the stage's
/// own `execve`: a sealed memfd the child inherits as `child_fd`. The stage then
/// executes its program (bubblewrap) with an empty environment, so no variable of the
/// request (`LD_PRELOAD`, `GLIBC_TUNABLES`, ...) is acted on by a process that is not
/// yet confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EnvFd {
    /// The fd number in the child (above 2).
    pub child_fd: i32,
    /// What the memfd holds.
    pub format: EnvFdFormat,
}

/// The content of an [`EnvFd`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EnvFdFormat {
    /// `NAME=value` entries, each ending in NUL (read by cordon's stage helper).
    Entries,
    /// bubblewrap arguments `--setenv NAME value`, NUL-separated (`--args FD`).
    BwrapSetenv,
}

/// cordon's stage helper, executed by bubblewrap inside the finished sandbox: the
/// parent builds the Landlock ruleset from `landlock` and passes it, the seccomp
/// program ([`SeccompDelivery::Fd`]), a status pipe and the executable `exe` as
/// inherited fds (numbers in `cordon_stage::helper`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageHelperPlan {
    /// The cordon executable (opened by the parent; bubblewrap executes it through
    /// `/proc/self/fd/N`, so it need not be visible inside).
    pub exe: PathBuf,
    /// The Landlock rules (the same as the landlock runner's).
    pub landlock: LandlockPlan,
    /// The helper installs the supervised seccomp program and hands its listener to
    /// cordon's supervisor (`cordon_stage::helper::NOTIFY_FD`), so refused network and
    /// process syscalls are reported as denials.
    pub supervised: bool,
    /// Paths attached beneath the bind sources by cordon's stage (the protected
    /// layout, [`crate::policy::ExecutionPolicy::self_binds`]) that the helper verifies
    /// inside too, each with whether it must be read-only.
    pub checks: Vec<(PathBuf, bool)>,
    /// With `supervised`: the helper sends a socket diagnostics socket of the
    /// sandbox's network namespace (bubblewrap's own, its loopback up) with the
    /// listener, for the supervisor's judgement of unix `connect()`s
    /// (`cordon_stage::StagePlan::unix_diag`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unix_diag: bool,
}

/// A complete, pure description of how to launch one command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaunchPlan {
    /// The runner that made it.
    pub runner: RunnerKind,
    /// Absolute program path to exec.
    pub program: PathBuf,
    /// argv including `argv[0]`.
    pub argv: Vec<OsString>,
    /// Environment variables the runner sets (they win over everything).
    pub env: Vec<(String, String)>,
    /// Working directory.
    pub cwd: PathBuf,
    /// Namespaces.
    pub namespaces: NamespacePlan,
    /// Mount steps.
    pub mounts: Vec<MountStep>,
    /// Landlock rules.
    pub landlock: Option<LandlockPlan>,
    /// cordon's seccomp filters, when the run gets them.
    pub seccomp: Option<SeccompPlan>,
    /// Pinned paths whose fds the child inherits at the given numbers, and whether
    /// each is bound writable: a helper binds exactly those files (bubblewrap's
    /// `--bind-fd`), and the stage helper inside verifies each destination.
    pub path_fds: Vec<(PathBuf, i32, bool)>,
    /// The command's environment through an inherited fd instead of `execve`.
    pub env_fd: Option<EnvFd>,
    /// A confinement stage applied by cordon's helper inside bubblewrap, after
    /// bubblewrap built the sandbox (see `runner::bwrap`, Linux).
    pub stage_helper: Option<StageHelperPlan>,
    /// Drop all capabilities.
    pub drop_capabilities: bool,
    /// Set `no_new_privs`.
    pub no_new_privs: bool,
    /// New session.
    pub new_session: bool,
    /// The executor must create the per-run directory before spawning (and remove it
    /// after the run).
    pub needs_run_dir: bool,
    /// Files written into the run's private temp dir before the command starts (its
    /// private global git config).
    pub seed_files: Vec<SeedFile>,
    /// Host directories the command sees empty: a fresh tmpfs stands there instead of
    /// a private layer over the host's files (no overlayfs on this host), so a file
    /// the host has there does not exist for the command. Reported in the result.
    pub hidden: Vec<PathBuf>,
    /// The local IPC the command has with the network off (`None` with the network on
    /// or unconfined). Reported in the result.
    pub local_ipc: Option<crate::vocab::LocalIpc>,
    /// The report this plan achieves.
    pub enforcement: Enforcement,
}

impl LaunchPlan {
    /// The directories the command sees as private and writable that its mounts make
    /// (the private `/tmp` and `/dev/shm`, the layers over the home's directories), in
    /// the command's view.
    pub fn private_mounts(&self) -> Vec<PathBuf> {
        self.mounts
            .iter()
            .filter_map(|m| match m {
                MountStep::Tmpfs { target, .. }
                | MountStep::HostTmpfs { target, .. }
                | MountStep::Overlay { target, .. } => Some(target.clone()),
                _ => None,
            })
            .collect()
    }
}

/// One confinement backend.
pub trait Runner {
    /// Which runner this is.
    fn kind(&self) -> RunnerKind;
    /// Whether it can work on this host.
    fn probe(&self, host: &HostFacts) -> ProbeStatus;
    /// The enforcement it would reach for `policy` on `host` (assuming `probe` passed).
    fn enforcement(&self, policy: &ExecutionPolicy, host: &HostFacts) -> Enforcement;
    /// Plan a launch (pure, no probing): `enforcement` is the report
    /// [`Runner::enforcement`] gave for `input`'s policy and host, computed once by
    /// [`super::select`] and carried in the [`super::Selection`] ([`super::Selection::plan`]).
    fn plan_with(&self, input: &PlanInput<'_>, enforcement: Enforcement) -> Result<LaunchPlan, PlanError>;
    /// Probe, then plan: for callers that did not go through [`super::select`] (the golden
    /// tests of the planners). The executor plans a [`super::Selection`] instead.
    fn plan(&self, input: &PlanInput<'_>) -> Result<LaunchPlan, PlanError> {
        if let ProbeStatus::Unavailable(r) | ProbeStatus::Unsupported(r) = self.probe(input.host) {
            return Err(PlanError::Unavailable(r));
        }
        self.plan_with(input, self.enforcement(input.policy, input.host))
    }
}
