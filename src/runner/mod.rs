//! Runners: one module per confinement backend behind the small [`Runner`] trait, and
//! [`select`], which picks one and fails closed.
//!
//! A runner can [`Runner::probe`] the host (is it usable at all?), report the
//! [`Enforcement`] it would reach for a policy (which [`Restriction`]s it can enforce
//! here and which are gaps), and plan a launch ([`Runner::plan_with`]): a pure value
//! describing argv, environment, namespaces, mounts, Landlock rules and cordon's
//! seccomp program ([`SeccompPlan`]). [`select`] probes and rates the runners once and
//! returns a [`Selection`], which plans itself ([`Selection::plan`]) with what it
//! found; the executor materializes ([`stage::materialize`]) and spawns the plan.
//! Errors: [`error`] ([`PlanError`], [`RunnerFailure`]).
//!
//! Selection rules: `full-access` uses `passthrough`. A confined mode uses the first
//! runner (strongest first) that is available and fully enforces the policy; with
//! `best_effort`, failing that, the available runner with the fewest gaps. Otherwise
//! `SANDBOX_UNAVAILABLE`, with one reason per runner tried. An explicitly requested
//! runner that cannot work fails closed; there is no silent fallback.

pub mod bwrap;
pub mod error;
pub mod landlock;
pub mod macos;
pub mod passthrough;
pub mod seatbelt;
pub mod seccomp;
pub mod stage;

use crate::error::{CordonError, RunnerReason};
use crate::host::HostFacts;
use crate::mode::Mode;
use crate::policy::ExecutionPolicy;
use crate::result::SkippedRunner;
use crate::vocab::{Enforcement, EnforcementLevel, Gap};
use serde::Serialize;
use std::ffi::OsString;
use std::path::PathBuf;

pub use crate::vocab::{ProbeStatus, Restriction, RunnerChoice, RunnerKind};
pub use error::{PlanError, RunnerFailure};

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
        if !policy.protected.is_empty() {
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
    /// `size=` of each private tmpfs (`/tmp`, `/dev/shm`), in bytes; `None` leaves
    /// the kernel's default (half of RAM).
    pub tmpfs_size: Option<u64>,
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
    /// bubblewrap built the sandbox (see [`bwrap`]).
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
    /// The report this plan achieves.
    pub enforcement: Enforcement,
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
    /// [`select`] and carried in the [`Selection`] ([`Selection::plan`]).
    fn plan_with(&self, input: &PlanInput<'_>, enforcement: Enforcement) -> Result<LaunchPlan, PlanError>;
    /// Probe, then plan: for callers that did not go through [`select`] (the golden
    /// tests of the planners). The executor plans a [`Selection`] instead.
    fn plan(&self, input: &PlanInput<'_>) -> Result<LaunchPlan, PlanError> {
        if let ProbeStatus::Unavailable(r) | ProbeStatus::Unsupported(r) = self.probe(input.host) {
            return Err(PlanError::Unavailable(r));
        }
        self.plan_with(input, self.enforcement(input.policy, input.host))
    }
}

/// The runner implementation for a kind.
pub fn runner_for(kind: RunnerKind) -> &'static dyn Runner {
    match kind {
        RunnerKind::Landlock => &landlock::LandlockRunner,
        RunnerKind::Bwrap => &bwrap::BwrapRunner,
        RunnerKind::Seatbelt => &macos::SeatbeltRunner,
        RunnerKind::Passthrough => &passthrough::PassthroughRunner,
    }
}

/// Probe a runner, honouring `CORDON_DISABLE_RUNNERS`.
pub fn probe_runner(kind: RunnerKind, host: &HostFacts) -> ProbeStatus {
    if host.disabled_runners.contains(&kind) {
        return ProbeStatus::Unavailable(format!("disabled by {}", crate::host::ENV_DISABLE_RUNNERS));
    }
    runner_for(kind).probe(host)
}

/// Confined runners for this OS, strongest first.
pub fn confined_candidates(host: &HostFacts) -> Vec<RunnerKind> {
    match host.os {
        "linux" => vec![RunnerKind::Landlock, RunnerKind::Bwrap],
        "macos" => vec![RunnerKind::Seatbelt],
        _ => vec![RunnerKind::Landlock, RunnerKind::Bwrap, RunnerKind::Seatbelt],
    }
}

/// The outcome of selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// The runner chosen.
    pub runner: RunnerKind,
    /// The enforcement it reaches.
    pub enforcement: Enforcement,
    /// Stronger runners passed over.
    pub skipped: Vec<SkippedRunner>,
}

impl Selection {
    /// Plan the launch of the selected runner (pure). Selection already probed the
    /// runner and computed its enforcement; neither is done again.
    pub fn plan(&self, input: &PlanInput<'_>) -> Result<LaunchPlan, PlanError> {
        runner_for(self.runner).plan_with(input, self.enforcement.clone())
    }
}

fn gap_summary(e: &Enforcement) -> String {
    let names: Vec<String> = e.gaps.iter().map(|g| format!("{} ({})", g.restriction, g.reason)).collect();
    format!("cannot fully enforce: {}", names.join(", "))
}

/// Pick a runner for `policy`, failing closed (see module docs).
pub fn select(policy: &ExecutionPolicy, host: &HostFacts, choice: RunnerChoice) -> Result<Selection, CordonError> {
    let mode = policy.mode;
    if mode == Mode::FullAccess {
        return match choice {
            RunnerChoice::Auto | RunnerChoice::Only(RunnerKind::Passthrough) => {
                match probe_runner(RunnerKind::Passthrough, host) {
                    ProbeStatus::Available => Ok(Selection {
                        runner: RunnerKind::Passthrough,
                        enforcement: Enforcement::none(),
                        skipped: Vec::new(),
                    }),
                    ProbeStatus::Unavailable(r) | ProbeStatus::Unsupported(r) => Err(CordonError::SandboxUnavailable {
                        mode,
                        reasons: vec![RunnerReason { runner: RunnerKind::Passthrough, reason: r }],
                    }),
                }
            }
            RunnerChoice::Only(kind) => Err(CordonError::InvalidRequest {
                field: "runner",
                why: format!("full-access runs unconfined; runner {kind} applies only to confined modes"),
            }),
        };
    }
    let candidates = match choice {
        RunnerChoice::Auto => confined_candidates(host),
        RunnerChoice::Only(RunnerKind::Passthrough) => {
            return Err(CordonError::SandboxUnavailable {
                mode,
                reasons: vec![RunnerReason {
                    runner: RunnerKind::Passthrough,
                    reason: format!("passthrough applies no confinement and may only run full-access, not {mode}"),
                }],
            })
        }
        RunnerChoice::Only(kind) => vec![kind],
    };
    let mut reasons = Vec::new();
    let mut partial: Option<(RunnerKind, Enforcement)> = None;
    for kind in candidates {
        match probe_runner(kind, host) {
            ProbeStatus::Available => {}
            ProbeStatus::Unavailable(r) | ProbeStatus::Unsupported(r) => {
                reasons.push(RunnerReason { runner: kind, reason: r });
                continue;
            }
        }
        let enforcement = runner_for(kind).enforcement(policy, host);
        if enforcement.level == EnforcementLevel::Full {
            return Ok(Selection { runner: kind, enforcement, skipped: to_skipped(&reasons) });
        }
        reasons.push(RunnerReason { runner: kind, reason: gap_summary(&enforcement) });
        if partial.as_ref().is_none_or(|(_, best)| enforcement.gaps.len() < best.gaps.len()) {
            partial = Some((kind, enforcement));
        }
    }
    if policy.best_effort {
        if let Some((runner, enforcement)) = partial {
            let skipped = to_skipped(&reasons).into_iter().filter(|s| s.runner != runner).collect();
            return Ok(Selection { runner, enforcement, skipped });
        }
    }
    Err(CordonError::SandboxUnavailable { mode, reasons })
}

fn to_skipped(reasons: &[RunnerReason]) -> Vec<SkippedRunner> {
    reasons.iter().map(|r| SkippedRunner { runner: r.runner, reason: r.reason.clone() }).collect()
}
