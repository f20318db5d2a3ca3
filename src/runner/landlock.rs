//! The `landlock` runner (Linux): Landlock + seccomp + namespaces + capability drop,
//! applied in the child between `clone` and `exec` (see the `cordon-stage` crate for
//! the child's ordered contract).
//!
//! Layers and what each enforces:
//! - **Landlock** (ABI-dependent): reads everywhere; writes only beneath the writable
//!   roots, the private temp dirs and a few device files; truncation (ABI 3); TCP
//!   bind/connect denied (ABI 4); device ioctls (ABI 5); abstract unix sockets and
//!   signals scoped (ABI 6); denial audit records (ABI 7). Also confines ptrace-style
//!   access (`/proc/<pid>/mem`, `environ`) to processes of the same sandbox.
//! - **Mount layer** (root, or a user namespace): private mount, pid and IPC
//!   namespaces; `/tmp` and `/dev/shm` replaced by per-run directories (and the home's
//!   home's cache and toolchain homes by private layers: [`private_dirs`]); the whole tree
//!   read-only except the writable roots (which stops chmod/chown/utimes/xattrs and
//!   truncation outside them, with `EROFS`); protected subpaths re-attached read-only
//!   (rename/delete of the mount point fails with `EBUSY`, links across it `EXDEV`);
//!   a fresh `/proc` for the new pid namespace; when the command exits, the kernel
//!   kills everything left in its pid namespace.
//! - **seccomp** (`profiles/seccomp/confined.json`): see [`super::seccomp`].
//! - **Privileges**: `no_new_privs`, every capability dropped and verified, only stdio
//!   inherited.
//!
//! What it does not do: it cannot hide files from reading (reads are allowed
//! everywhere the host allows), it does not limit CPU, memory or disk use, and the
//! command runs as pid 1 of its namespace (signals it has no handler for, sent from
//! inside, are ignored by the kernel for pid 1).

use super::error::PlanError;
use super::plan::{
    enforcement_from_gaps, LandlockPlan, LaunchPlan, LayerUpper, MountStep, NamespacePlan, PlanInput, Runner,
    SeccompDelivery, SeccompPlan, SeedBy,
};
use crate::host::{HostFacts, Namespaces};
use crate::mode::Mode;
use crate::policy::ExecutionPolicy;
use crate::result::Enforcement;
use crate::vocab::{LocalIpc, ProbeStatus, Restriction, RunnerKind};
use std::path::{Path, PathBuf};

mod layers;
pub use layers::{hide_steps, private_dir_steps, private_dirs, private_tmp_steps};

/// The staging tmpfs numbers: one for `/tmp`, one for `/dev/shm` (each with its own
/// size bound, as without overlayfs), one for every private layer of the home's
/// directories.
pub const STAGING_TMP: [usize; 2] = [0, 1];
/// See [`STAGING_TMP`].
pub const STAGING_HOME: usize = 2;

/// Device files the command may open for writing.
pub const WRITABLE_DEVICES: [&str; 6] =
    ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"];

/// `LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON`: keep logging denials after `execve`.
pub const LANDLOCK_LOG_NEW_EXEC_ON: u32 = 2;

/// The `landlock` runner.
#[derive(Debug, Clone, Copy, Default)]
pub struct LandlockRunner;

fn ns_reason(host: &HostFacts) -> String {
    match &host.namespaces {
        Namespaces::Unavailable { reason } => reason.clone(),
        _ => String::new(),
    }
}

/// The gaps of the landlock runner for `policy` on `host` (pure).
pub fn landlock_gaps(policy: &ExecutionPolicy, host: &HostFacts) -> Vec<(Restriction, String)> {
    use Restriction::*;
    let abi = host.landlock_abi;
    let ns = host.namespaces.available();
    let why_ns = ns_reason(host);
    // A pid namespace of the run's own needs a fresh /proc (see `HostFacts::proc_mount`):
    // without one the run keeps the container's /proc and its init is a supervising
    // subreaper instead of pid 1.
    let pid_ns = ns && host.proc_mount.fresh();
    let why_pid = match &host.proc_mount {
        crate::host::ProcMount::Refused { reason } if ns => reason.clone(),
        _ => why_ns.clone(),
    };
    let mut gaps = Vec::new();
    for r in Restriction::requested_by(policy) {
        let gap = match r {
            FsWrite if abi < 2 && ns => Some(
                "device files and FIFOs outside the writable roots stay writable: Landlock ABI 1 is left out (it \
                 refuses every cross-directory rename) and read-only mounts do not cover special files"
                    .to_string(),
            ),
            FsWrite if !ns => Some(format!(
                "device nodes already inside the writable roots stay usable: without a mount namespace they \
                 cannot be attached nodev, and Landlock refuses only creating them: {why_ns}"
            )),
            FsWrite | Network | UnixSockets | HostUnixSockets | TerminalInjection | SyscallFilter | Privileges
            | FdIsolation => None,
            FsTruncate if abi < 3 && !ns => Some(format!(
                "Landlock ABI {abi} < 3 cannot restrict truncate, and the read-only mount layer is unavailable: {why_ns}"
            )),
            FsMetadata if !ns => Some(format!(
                "Landlock does not cover chmod/chown/utimes/xattrs and the read-only mount layer is unavailable: {why_ns}"
            )),
            ProtectedPaths if !ns => Some(format!(
                "Landlock cannot keep a subpath of a writable root read-only and the mount layer is unavailable, so \
                 git directories, registered submodule paths and the directories holding them stay writable (what \
                 appears where host git looks is still moved aside when the run ends): {why_ns}"
            )),
            PrivateTmp if !ns => Some(format!(
                "/tmp and /dev/shm stay readable and shared (not writable) without a mount namespace: {why_ns}"
            )),
            Signals if abi < 6 && !pid_ns => Some(format!(
                "Landlock ABI {abi} < 6 cannot scope signals and no pid namespace is available: {why_pid}"
            )),
            // Without a pid namespace the run's init is a supervising subreaper: every
            // descendant is reparented to it and killed when the run ends. It holds
            // while the command cannot kill or trace the init, i.e. with Landlock's
            // signal scope (ABI 6); ptrace is refused by Landlock and seccomp.
            ProcessLifetime if abi < 6 && !pid_ns => Some(format!(
                "without a pid namespace the run's supervising init could be killed by the command (Landlock ABI \
                 {abi} < 6 cannot scope signals), and what it started would outlive the run: {why_pid}"
            )),
            // Landlock (ABI >= 1) refuses ptrace-style access to processes outside the
            // command's domain; with the mount layer at ABI 1 Landlock is left out, and
            // only a pid namespace with its own /proc hides other processes.
            ProcessInspection if abi < 2 && ns && !pid_ns => Some(format!(
                "Landlock ABI {abi} is left out with the mount layer, and without a pid namespace other processes' \
                 /proc entries stay reachable: {why_pid}"
            )),
            Ipc if !ns => Some(format!("SysV and POSIX message queues are shared without an IPC namespace: {why_ns}")),
            PrivateTmp => shared_private_tmpfs(policy)
                .map(|p| format!("{} is attached over the private tmpfs, so the host's directory is shared", p.display())),
            DeviceIoctl if abi < 5 => Some(format!("Landlock ABI {abi} < 5 cannot restrict device ioctls")),
            _ => None,
        };
        if let Some(reason) = gap {
            gaps.push((r, reason));
        }
    }
    // The runner's own promise (see `Restriction::DenialAudit`).
    if policy.mode.is_confined() && abi < 7 {
        gaps.push((DenialAudit, format!("Landlock ABI {abi} < 7 cannot log the sandbox's denials")));
    }
    gaps
}

/// The private temp directory a confined run's `TMPDIR` names inside the sandbox
/// (pure), for both Linux runners with private tmpfs mounts: `/tmp`, unless the
/// workspace is `/tmp` or lies under it. The workspace is what the caller asked for,
/// so it is attached there as asked and the private `TMPDIR` moves to the private
/// `/dev/shm` instead.
pub fn sandbox_tmpdir(policy: &ExecutionPolicy) -> &'static str {
    if policy.workspace.starts_with(PRIVATE_TMPFS[0]) {
        PRIVATE_TMPFS[1]
    } else {
        PRIVATE_TMPFS[0]
    }
}

/// The private tmpfs mounts Landlock grants writes beneath (pure): both, except one
/// that holds a read-only workspace. Landlock rules accumulate across mount points,
/// so a write grant on `/tmp` would also cover a read-only workspace attached under
/// it, leaving only its read-only mount, which does not stop opening an existing
/// FIFO for writing. Without the grant the workspace stays read-only by both layers
/// (the run's `TMPDIR` is the other tmpfs, see [`sandbox_tmpdir`]).
pub fn private_tmpfs_writable(policy: &ExecutionPolicy) -> Vec<PathBuf> {
    PRIVATE_TMPFS
        .iter()
        .filter(|t| policy.mode >= crate::mode::Mode::WorkspaceWrite || !policy.workspace.starts_with(t))
        .map(PathBuf::from)
        .collect()
}

/// An extra writable root attached over a private tmpfs (`/tmp` or `/dev/shm`
/// itself), which leaves the host's directory shared (pure). A workspace there is
/// not one: it is the directory the caller asked to work in, and the run's private
/// `TMPDIR` moves to the other tmpfs (see [`sandbox_tmpdir`]).
pub fn shared_private_tmpfs(policy: &ExecutionPolicy) -> Option<PathBuf> {
    exposed_paths(policy)
        .into_iter()
        .filter(|p| *p != policy.workspace)
        .find(|p| PRIVATE_TMPFS.iter().any(|t| Path::new(t).starts_with(p)))
}

/// The host directories a run with a mount layer sees empty (pure): without
/// overlayfs, `/tmp`, `/dev/shm` and the home's cache are fresh tmpfs mounts that
/// hide the host's files (a path the policy exposes there excepted).
pub fn hidden_dirs(input: &PlanInput<'_>) -> Vec<PathBuf> {
    if input.host.overlay.available() || !input.policy.mode.is_confined() {
        return Vec::new();
    }
    let exposed = exposed_paths(input.policy);
    let mut out: Vec<PathBuf> =
        PRIVATE_TMPFS.iter().map(PathBuf::from).filter(|t| !exposed.iter().any(|p| t.starts_with(p))).collect();
    out.extend(private_dirs(input).into_iter().map(|d| d.path));
    out
}

/// The host paths attached inside the sandbox on top of the read-only tree: the
/// writable roots (workspace first in `workspace-write`), and a read-only workspace
/// only when it lives under a private tmpfs (elsewhere it is visible anyway).
pub fn exposed_paths(policy: &ExecutionPolicy) -> Vec<PathBuf> {
    let mut out = policy.writable();
    if out.is_empty() && PRIVATE_TMPFS.iter().any(|t| policy.workspace.starts_with(t)) {
        out.push(policy.workspace.clone());
    }
    out
}

impl Runner for LandlockRunner {
    fn kind(&self) -> RunnerKind {
        RunnerKind::Landlock
    }

    fn probe(&self, host: &HostFacts) -> ProbeStatus {
        if host.os != "linux" {
            return ProbeStatus::Unsupported(format!("Landlock is Linux-only (this is {})", host.os));
        }
        if host.landlock_abi == 0 {
            let why = match host.landlock_abi_cap {
                Some(0) => format!("Landlock disabled by {}=0", crate::host::ENV_LANDLOCK_ABI_MAX),
                _ => {
                    "the kernel has no Landlock, or it is not enabled at boot (add landlock to the lsm= boot parameter)"
                        .to_string()
                }
            };
            return ProbeStatus::Unavailable(why);
        }
        if !host.seccomp {
            return ProbeStatus::Unavailable("seccomp filters are not available in this kernel".into());
        }
        ProbeStatus::Available
    }

    fn enforcement(&self, policy: &ExecutionPolicy, host: &HostFacts) -> Enforcement {
        enforcement_from_gaps(landlock_gaps(policy, host))
    }

    fn plan_with(&self, input: &PlanInput<'_>, enforcement: Enforcement) -> Result<LaunchPlan, PlanError> {
        let policy = input.policy;
        let host = input.host;
        let abi = host.landlock_abi;
        let ns = host.namespaces.available();
        let own_net = ns && host.net_namespace.available() && own_network(policy);
        let namespaces = if ns {
            NamespacePlan {
                user: matches!(host.namespaces, Namespaces::UserNamespace),
                mount: true,
                // Only with a /proc of its own (see `landlock_gaps`).
                pid: host.proc_mount.fresh(),
                ipc: true,
                net: own_net,
            }
        } else {
            NamespacePlan::default()
        };
        // Landlock ABI 1 refuses every cross-directory rename or link once any
        // filesystem right is handled, which would break ordinary work inside the
        // workspace. With the mount layer, writes are already confined by read-only
        // mounts, so ABI 1 Landlock is left out; ptrace-style isolation then rests on
        // the pid namespace, its own /proc (required) and seccomp.
        let use_landlock = abi >= 2 || !ns;
        let mut mounts = if ns { mount_steps(input) } else { Vec::new() };
        if !use_landlock {
            for m in &mut mounts {
                if let MountStep::Proc { required } = m {
                    *required = true;
                }
            }
        }
        let tmpdir = if ns { PathBuf::from(sandbox_tmpdir(policy)) } else { input.run_tmp() };
        let private = if ns { PrivateTmp::InChild } else { PrivateTmp::Host(input.run_tmp(), input.run_shm()) };
        // Without a mount namespace the home stays read-only: nothing can be mounted.
        // The held roots' layers too: Landlock checks a rule on a mount's root, not on
        // the directory it covers, so each layer's root needs its own write rule.
        let layers = if ns {
            private_dirs(input).into_iter().map(|d| d.path).chain(held_roots(input)).collect()
        } else {
            Vec::new()
        };
        let landlock = landlock_plan(policy, abi, private, layers, own_net);
        let mut env = vec![("TMPDIR".into(), tmpdir.to_string_lossy().into_owned())];
        let (git_env, seed_files) = input.git_config_in(&tmpdir, if ns { SeedBy::Stage } else { SeedBy::Executor });
        env.extend(git_env);
        Ok(LaunchPlan {
            runner: RunnerKind::Landlock,
            program: input.program.clone(),
            argv: input.argv.clone(),
            env,
            cwd: input.cwd.clone(),
            namespaces,
            mounts,
            landlock: use_landlock.then_some(landlock),
            seccomp: Some(SeccompPlan {
                network: policy.network || !policy.mode.is_confined(),
                unix_allowlist: !policy.allow_unix_sockets.is_empty(),
                proxy: policy.network_by_proxy(),
                loopback: own_net,
                delivery: SeccompDelivery::Stage,
                supervise: true,
            }),
            path_fds: Vec::new(),
            stage_helper: None,
            env_fd: None,
            drop_capabilities: true,
            no_new_privs: true,
            new_session: input.new_session,
            needs_run_dir: !ns,
            seed_files,
            hidden: if ns { hidden_dirs(input) } else { Vec::new() },
            local_ipc: local_ipc(policy, host, true),
            enforcement,
        })
    }
}

/// Where a run's private temp directories are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrivateTmp {
    /// Fresh tmpfs mounts on `/tmp` and `/dev/shm` that exist only inside the child:
    /// their rules are added there (`LandlockPlan::write_in_child`).
    InChild,
    /// Per-run host directories (`tmp`, `shm`) standing in for them.
    Host(PathBuf, PathBuf),
}

/// The Landlock rules of a confined run (pure), shared by both Linux runners (the
/// `bwrap` runner applies them in its stage helper): read and execute everywhere;
/// write beneath the writable roots, the private temp directories, the private
/// layers over the home's directories (`layers`, see [`private_dirs`]) and the
/// [`WRITABLE_DEVICES`]; TCP denied with the network off (ABI 4); abstract unix
/// sockets (network off) and signals scoped (ABI 6); audit logging (ABI 7). This
/// is the one place rule paths come from.
pub fn landlock_plan(
    policy: &ExecutionPolicy,
    abi: u32,
    private: PrivateTmp,
    layers: Vec<PathBuf>,
    own_network: bool,
) -> LandlockPlan {
    let mut write = policy.writable();
    let mut write_in_child = Vec::new();
    match private {
        PrivateTmp::InChild => write_in_child.extend(private_tmpfs_writable(policy)),
        PrivateTmp::Host(tmp, shm) => write.extend([tmp, shm]),
    }
    LandlockPlan {
        abi,
        read: vec![PathBuf::from("/")],
        write,
        write_in_child,
        write_in_child_tmpfs: layers,
        devices: WRITABLE_DEVICES.iter().map(PathBuf::from).collect(),
        // In a network namespace of its own the command may bind and connect on its
        // own loopback (nothing else exists there); Landlock's TCP rules know ports only.
        deny_tcp: policy.network_restricted() && !own_network && abi >= 4,
        // In every confined mode: with the network on, seccomp refuses unix sockets
        // too (`host_unix_closed`); the scope is the kernel's own second layer.
        scope_abstract_unix: abi >= 6,
        scope_signals: abi >= 6,
        restrict_flags: if abi >= 7 { LANDLOCK_LOG_NEW_EXEC_ON } else { 0 },
    }
}

/// Whether a confined run with a mount layer gets a network namespace of its own
/// (pure), for both Linux runners: whenever the network is off, and not reached by
/// name through cordon's proxy (its supervisor connects the command's sockets to the
/// proxy on the host's loopback, which a socket in another namespace cannot reach).
/// The command then has only its own loopback: a test suite's servers, `listen()` and
/// `connect()` on 127.0.0.1 and ::1, and its own unix sockets work, and nothing on the
/// host's network (its loopback included) is reachable.
pub fn own_network(policy: &ExecutionPolicy) -> bool {
    policy.network_restricted() && !policy.network_by_proxy()
}

/// The local IPC a run of `policy` has on `host` (pure), for both Linux runners:
/// `None` unless the network is off; its own network namespace where one can be made
/// and a supervisor (`supervised`) judges its connects; otherwise refused, with why.
pub fn local_ipc(policy: &ExecutionPolicy, host: &HostFacts, supervised: bool) -> Option<LocalIpc> {
    if !policy.network_restricted() {
        return None;
    }
    let reason = if policy.network_by_proxy() {
        "hosts by name (--allow-host) keep the host's network namespace, where cordon's proxy listens".to_string()
    } else if let Namespaces::Unavailable { reason } = &host.namespaces {
        format!("no namespaces: {reason}")
    } else if let crate::host::NetNamespace::Unavailable { reason } = &host.net_namespace {
        reason.clone()
    } else if !supervised {
        "no supervisor judges the run's connects (bubblewrap without cordon's stage helper)".to_string()
    } else {
        return Some(LocalIpc::OwnNamespace);
    };
    Some(LocalIpc::Refused { reason })
}

/// Private mounts replacing the host's shared temp directories.
pub const PRIVATE_TMPFS: [&str; 2] = ["/tmp", "/dev/shm"];

/// The mount steps of a confined run (pure). Order matters:
/// 1. private propagation; 2. detached clones of every exposed path (and of a held
///    run's storage), taken before anything is hidden; 3. a fresh `/proc`; 4. `/tmp`
///    and `/dev/shm` made private ([`private_tmp_steps`]: a private layer over the
///    host's, or a fresh tmpfs), with mount points for exposed paths that live there;
///    5. the exposed paths (shallow first), then the private layers over the home's
///    directories ([`private_dir_steps`]), and cordon's state directory hidden
///    ([`hide_steps`]); 6. everything read-only, then the layers holding a held run's
///    writes ([`held_roots`]), the home's layers writable again (without overlayfs: the
///    tmpfs on the home's cache, mounted now so that it stays writable), and every
///    exposed tree `nodev,nosuid` (the private mounts are mounted so); 7. `/tmp`,
///    `/dev/shm` and the writable roots writable again (a held root's layer is); 8. the
///    protected layout
///    ([`ExecutionPolicy::self_binds`](crate::policy::ExecutionPolicy::self_binds)),
///    shallow first, each path attached over itself: protected paths read-only (cloned
///    from the host's tree), paths a grant reopened writable and every directory on the
///    way to one made a mount point (so none can be renamed away), cloned from the host's
///    tree too, or from a held root's layer so that their writes stay held.
///
/// Note: Landlock grants the private `/tmp` write access beneath it, and Landlock
/// rules accumulate across mount points, so a read-only workspace attached under
/// `/tmp` relies on its read-only mount (step 6) for writes: the mount layer is
/// what makes this placement safe.
pub fn mount_steps(input: &PlanInput<'_>) -> Vec<MountStep> {
    let policy = input.policy;
    let mut exposed = exposed_paths(policy);
    // Shallow first, so nested roots are attached on top of their parents.
    exposed.sort_by_key(|p| p.components().count());
    let (mut clones, attach) = super::plan::clone_and_attach(exposed.iter());
    // Held writes: the storage is cloned with the rest (before anything hides it); the
    // protected layout is attached last, on top of the layers.
    let held = held_roots(input);
    let storage_slot = clones.len();
    if let (false, Some(h)) = (held.is_empty(), &input.held) {
        clones.push(MountStep::Clone { source: h.storage.clone(), slot: storage_slot });
    }
    let mut steps = vec![MountStep::MakeRootPrivate];
    steps.extend(clones);
    // Required where it is planned: in a pid namespace the host's /proc would name
    // other processes by pids that mean something else inside. Where no fresh procfs
    // can be mounted (a container's masked /proc) there is no pid namespace, and the
    // inherited /proc, made read-only below, names the run's processes correctly.
    if input.host.proc_mount.fresh() {
        steps.push(MountStep::Proc { required: true });
    }
    steps.extend(private_tmp_steps(input, &exposed));
    steps.extend(attach);
    let (layers, layers_after) = private_dir_steps(input, &private_dirs(input));
    steps.extend(layers);
    steps.extend(hide_steps(input));
    steps.push(MountStep::ReadOnlyRecursive);
    if let Some(h) = input.held.as_ref().filter(|_| !held.is_empty()) {
        let layout = policy.self_binds();
        for (i, root) in held.iter().enumerate() {
            let (upper, work) = super::plan::held_dirs(i);
            let (mut mountpoints, mut mountpoint_files) = (Vec::new(), Vec::new());
            for (p, _) in layout.iter().filter(|(p, _)| p.starts_with(root)) {
                let rel = p.strip_prefix(root).unwrap_or(p);
                let mut cur = PathBuf::new();
                let parts: Vec<_> = rel.components().collect();
                for (n, c) in parts.iter().enumerate() {
                    cur.push(c);
                    let last = n + 1 == parts.len();
                    if last && h.protected_files.contains(p) {
                        mountpoint_files.push(cur.clone());
                    } else if !mountpoints.contains(&cur) {
                        mountpoints.push(cur.clone());
                    }
                }
            }
            steps.push(MountStep::Overlay {
                target: root.clone(),
                pinned: true,
                above: Vec::new(),
                upper: LayerUpper::InClone { slot: storage_slot, upper, work },
                mountpoints,
                mountpoint_files,
            });
        }
    }
    steps.extend(layers_after);
    // The attached trees keep their host mounts' flags: a host filesystem mounted
    // without nodev would let a device node in a writable root be opened (Landlock
    // grants writes there, and mknod's refusal does not cover nodes that already exist).
    for p in &exposed {
        steps.push(MountStep::NoDevNoSuid { target: p.clone() });
    }
    for t in PRIVATE_TMPFS {
        steps.push(MountStep::Writable { target: PathBuf::from(t) });
    }
    for w in policy.writable() {
        // A held root's clone stays read-only under its layer (the layer is writable).
        if !held.contains(&w) {
            steps.push(MountStep::Writable { target: w });
        }
    }
    // The protected layout last, over everything (a held root's layer included).
    steps.extend(super::plan::self_bind_steps(policy));
    steps
}

/// The writable roots whose writes the run holds back (pure): every writable root of a
/// `workspace-write` policy when the executor asked ([`PlanInput::held`]), this host
/// has overlayfs and a mount namespace, and no root lies inside another (a nested
/// root would need a layer stacked on its parent's); otherwise none. Shallow first.
pub fn held_roots(input: &PlanInput<'_>) -> Vec<PathBuf> {
    let policy = input.policy;
    let able = input.held.is_some()
        && policy.mode == Mode::WorkspaceWrite
        && input.host.overlay.available()
        && input.host.namespaces.available();
    if !able {
        return Vec::new();
    }
    let roots = policy.writable();
    let nested = roots.iter().any(|r| roots.iter().any(|o| o != r && r.starts_with(o)));
    if nested {
        return Vec::new();
    }
    roots
}

/// The directories to create inside a private tmpfs so `target` can be attached
/// there, outermost first (pure). Empty when `target` is not under one.
pub fn mountpoint_dirs(target: &Path) -> Vec<PathBuf> {
    for public in PRIVATE_TMPFS {
        if let Ok(rel) = target.strip_prefix(public) {
            let mut out = Vec::new();
            let mut cur = PathBuf::from(public);
            for c in rel.components() {
                cur.push(c);
                out.push(cur.clone());
            }
            return out;
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::Mode;
    use crate::result::EnforcementLevel;
    use crate::runner::plan::{Keep, PrivateDir};

    fn host(abi: u32, ns: bool) -> HostFacts {
        HostFacts {
            os: "linux",
            kernel_landlock_abi: 7,
            landlock_abi: abi,
            landlock_abi_cap: None,
            seccomp: true,
            euid: 1000,
            egid: 1000,
            namespaces: if ns {
                Namespaces::UserNamespace
            } else {
                Namespaces::Unavailable { reason: "blocked".into() }
            },
            overlay: if ns {
                crate::host::Overlay::Available
            } else {
                crate::host::Overlay::Unavailable { reason: "no mount namespace".into() }
            },
            net_namespace: if ns {
                crate::host::NetNamespace::Available
            } else {
                crate::host::NetNamespace::Unavailable { reason: "no namespaces".into() }
            },
            bwrap: None,
            proc_mount: Default::default(),
            disabled_runners: vec![],
            stage_helper: None,
        }
    }

    fn without_overlay(mut h: HostFacts) -> HostFacts {
        h.overlay = crate::host::Overlay::Unavailable { reason: "test".into() };
        h
    }

    fn policy(mode: Mode) -> ExecutionPolicy {
        ExecutionPolicy {
            mode,
            workspace: "/tmp/ws".into(),
            writable_roots: vec!["/srv/out".into()],
            protected: vec!["/tmp/ws/.git".into()],
            network: false,
            best_effort: false,
            accept_gaps: Vec::new(),
            allow_unix_sockets: Vec::new(),
            allow_hosts: Default::default(),
            git: Default::default(),
        }
    }

    #[test]
    fn full_on_abi7_with_namespaces() {
        let e = LandlockRunner.enforcement(&policy(Mode::WorkspaceWrite), &host(7, true));
        assert_eq!(e.level, EnforcementLevel::Full, "{e:?}");
    }

    #[test]
    fn every_older_abi_has_gaps() {
        for abi in [1, 2, 3, 4, 5, 6] {
            let e = LandlockRunner.enforcement(&policy(Mode::WorkspaceWrite), &host(abi, true));
            assert_eq!(e.level, EnforcementLevel::Partial, "abi {abi}");
            assert!(e.gaps.iter().any(|g| g.restriction == "denial-audit"));
        }
        let e4 = LandlockRunner.enforcement(&policy(Mode::ReadOnly), &host(4, true));
        assert!(e4.gaps.iter().any(|g| g.restriction == "device-ioctl"));
    }

    #[test]
    fn a_network_namespace_of_its_own_only_with_the_network_off_and_namespaces() {
        let plan = |p: &ExecutionPolicy, h: &HostFacts| {
            let input = PlanInput {
                policy: p,
                host: h,
                program: "/bin/true".into(),
                argv: vec!["true".into()],
                cwd: "/tmp/ws".into(),
                run_dir: "/run/c/r1".into(),
                new_session: true,
                tmpfs_size: None,
                private_dirs: Vec::new(),
                git_config: None,
                held: None,
                state_dir: None,
            };
            let plan = LandlockRunner.plan(&input).unwrap();
            let seccomp = plan.seccomp.unwrap();
            assert_eq!(seccomp.loopback, plan.namespaces.net, "the filter follows the namespace");
            // The result says what the plan gives: its own namespace, or none and why.
            assert_eq!(plan.local_ipc.is_some(), !p.network, "reported with the network off only");
            assert_eq!(matches!(plan.local_ipc, Some(LocalIpc::OwnNamespace)), plan.namespaces.net);
            let deny_tcp = plan.landlock.as_ref().is_some_and(|l| l.deny_tcp);
            (plan.namespaces.net, deny_tcp)
        };
        for mode in [Mode::ReadOnly, Mode::WorkspaceWrite] {
            // Network off, namespaces: its own loopback, Landlock leaves TCP to it.
            assert_eq!(plan(&policy(mode), &host(7, true)), (true, false), "{mode}");
            // No namespaces, or none for the network: the host's, TCP denied as before.
            assert_eq!(plan(&policy(mode), &host(7, false)), (false, true), "{mode}");
            let no_netns = HostFacts {
                net_namespace: crate::host::NetNamespace::Unavailable { reason: "refused".into() },
                ..host(7, true)
            };
            assert_eq!(plan(&policy(mode), &no_netns), (false, true), "{mode}");
            assert_eq!(
                local_ipc(&policy(mode), &no_netns, true),
                Some(LocalIpc::Refused { reason: "refused".into() }),
                "the host's reason"
            );
            // Network on: the host's (IP is allowed anyway).
            let on = ExecutionPolicy { network: true, ..policy(mode) };
            assert_eq!(plan(&on, &host(7, true)), (false, false), "{mode}");
            // Hosts by name: the host's, where cordon's proxy listens.
            let mut by_name = policy(mode);
            by_name.allow_hosts = crate::proxy::AllowList::parse(&["pypi.org".to_string()]).unwrap();
            assert_eq!(plan(&by_name, &host(7, true)), (false, true), "{mode}");
        }
    }

    #[test]
    fn no_namespaces_names_the_mount_layer_gaps() {
        let e = LandlockRunner.enforcement(&policy(Mode::WorkspaceWrite), &host(7, false));
        let names: Vec<_> = e.gaps.iter().map(|g| g.restriction.as_str()).collect();
        for want in ["fs-write", "fs-metadata", "protected-paths", "private-tmp", "ipc"] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        // The supervising init keeps process-lifetime while the command cannot kill
        // it (Landlock's signal scope, ABI 6); below, both are gaps.
        assert!(!names.contains(&"process-lifetime") && !names.contains(&"signals"), "{names:?}");
        let e5 = LandlockRunner.enforcement(&policy(Mode::WorkspaceWrite), &host(5, false));
        let names5: Vec<_> = e5.gaps.iter().map(|g| g.restriction.as_str()).collect();
        assert!(names5.contains(&"process-lifetime") && names5.contains(&"signals"), "{names5:?}");
    }

    #[test]
    fn the_container_profile_is_exactly_the_gaps_without_namespaces() {
        use crate::vocab::{RunnerChoice, CONTAINER_GAPS};
        for abi in [6, 7] {
            let e = LandlockRunner.enforcement(&policy(Mode::WorkspaceWrite), &host(abi, false));
            let mut names: Vec<_> =
                e.gaps.iter().map(|g| g.restriction).filter(|r| *r != Restriction::DenialAudit).collect();
            names.sort();
            let mut want = CONTAINER_GAPS.to_vec();
            want.sort();
            assert_eq!(names, want, "abi {abi}");
            // Read-only asks for less: a subset.
            let ro = LandlockRunner.enforcement(&policy(Mode::ReadOnly), &host(abi, false));
            let ro_gap = |g: &crate::vocab::Gap| {
                CONTAINER_GAPS.contains(&g.restriction) || g.restriction == Restriction::DenialAudit
            };
            assert!(ro.gaps.iter().all(ro_gap), "{ro:?}");
        }
        // Hard mode refuses it; accepting exactly the profile runs it, listing the gaps;
        // accepting less refuses again.
        let mut p = policy(Mode::WorkspaceWrite);
        let h = host(7, false);
        assert!(crate::runner::select(&p, &h, RunnerChoice::Auto).is_err());
        p.accept_gaps = CONTAINER_GAPS.to_vec();
        let sel = crate::runner::select(&p, &h, RunnerChoice::Auto).unwrap();
        assert_eq!(sel.runner, RunnerKind::Landlock);
        assert_eq!(sel.enforcement.level, EnforcementLevel::Partial);
        p.accept_gaps.retain(|r| *r != Restriction::Ipc);
        assert!(crate::runner::select(&p, &h, RunnerChoice::Auto).is_err());
        // Below ABI 6 the profile does not cover process-lifetime and signals.
        p.accept_gaps = CONTAINER_GAPS.to_vec();
        assert!(crate::runner::select(&p, &host(5, false), RunnerChoice::Auto).is_err());
    }

    #[test]
    fn without_a_fresh_proc_there_is_no_pid_namespace_and_nothing_else_changes() {
        let p = policy(Mode::WorkspaceWrite);
        let mut h = host(7, true);
        h.proc_mount = crate::host::ProcMount::Refused { reason: "masked".into() };
        let e = LandlockRunner.enforcement(&p, &h);
        assert_eq!(e.level, EnforcementLevel::Full, "{e:?}");
        let input = PlanInput {
            policy: &p,
            host: &h,
            program: "/bin/true".into(),
            argv: vec!["true".into()],
            cwd: "/tmp/ws".into(),
            run_dir: "/run/c/r1".into(),
            new_session: true,
            tmpfs_size: None,
            private_dirs: Vec::new(),
            git_config: None,
            held: None,
            state_dir: None,
        };
        let plan = LandlockRunner.plan(&input).unwrap();
        assert!(plan.namespaces.mount && plan.namespaces.ipc && !plan.namespaces.pid, "{:?}", plan.namespaces);
        assert!(!plan.mounts.iter().any(|m| matches!(m, MountStep::Proc { .. })), "{:?}", plan.mounts);
        assert!(plan.mounts.contains(&MountStep::ReadOnlyRecursive), "the inherited /proc is made read-only too");
        // Below ABI 6 the supervising init could be killed, and signals are unscoped.
        let e5 = LandlockRunner.enforcement(&p, &crate::host::HostFacts { landlock_abi: 5, ..h.clone() });
        let names: Vec<_> = e5.gaps.iter().map(|g| g.restriction.as_str()).collect();
        assert!(names.contains(&"process-lifetime") && names.contains(&"signals"), "{names:?}");
        // At ABI 1 Landlock is left out with the mount layer: nothing hides other processes.
        let e1 = LandlockRunner.enforcement(&p, &crate::host::HostFacts { landlock_abi: 1, ..h });
        assert!(e1.gaps.iter().any(|g| g.restriction == "process-inspection"), "{e1:?}");
    }

    #[test]
    fn held_roots_get_a_layer_with_the_protected_paths_read_only_on_top() {
        let p = policy(Mode::WorkspaceWrite);
        let h = host(7, true);
        let held = crate::runner::HeldInput { storage: "/var/state/held-1".into(), protected_files: Vec::new() };
        let input = PlanInput {
            policy: &p,
            host: &h,
            program: "/bin/true".into(),
            argv: vec!["true".into()],
            cwd: "/tmp/ws".into(),
            run_dir: "/run/c/r1".into(),
            new_session: true,
            tmpfs_size: Some(1 << 20),
            private_dirs: Vec::new(),
            git_config: None,
            held: Some(held),
            state_dir: None,
        };
        assert_eq!(held_roots(&input), vec![PathBuf::from("/tmp/ws"), PathBuf::from("/srv/out")]);
        let steps = mount_steps(&input);
        let pos = |f: &dyn Fn(&MountStep) -> bool| steps.iter().position(f).unwrap_or_else(|| panic!("{steps:#?}"));
        let storage =
            pos(&|s| matches!(s, MountStep::Clone { source, .. } if source == Path::new("/var/state/held-1")));
        let tmp = pos(&|s| matches!(s, MountStep::Overlay { target, .. } if target == Path::new("/tmp")));
        let ro = pos(&|s| *s == MountStep::ReadOnlyRecursive);
        let layer = pos(&|s| {
            matches!(s, MountStep::Overlay { target, upper: LayerUpper::InClone { upper, .. }, mountpoints, .. }
                if target == Path::new("/tmp/ws") && upper == "r0-upper" && *mountpoints == [PathBuf::from(".git")])
        });
        let git = pos(&|s| {
            *s == MountStep::BindOver { target: "/tmp/ws/.git".into(), access: crate::policy::BindAccess::ReadOnly }
        });
        // The storage is cloned before /tmp is replaced; the layer comes after the tree
        // went read-only; .git is attached once, read-only, on top of it.
        assert!(storage < tmp && ro < layer && layer < git, "{steps:#?}");
        let git_attaches = steps.iter().filter(|s| match s {
            MountStep::Attach { target, .. } | MountStep::BindOver { target, .. } => target.ends_with(".git"),
            _ => false,
        });
        assert_eq!(git_attaches.count(), 1);
        // The clone under the layer stays read-only; Landlock's rule is on the layer.
        assert!(!steps.contains(&MountStep::Writable { target: "/tmp/ws".into() }));
        let plan = LandlockRunner.plan(&input).unwrap();
        assert!(plan.landlock.unwrap().write_in_child_tmpfs.contains(&PathBuf::from("/tmp/ws")));
        // Without overlayfs, or for a read-only policy: no layer.
        assert!(held_roots(&PlanInput { host: &without_overlay(h.clone()), ..input.clone() }).is_empty());
        let ro_policy = policy(Mode::ReadOnly);
        assert!(held_roots(&PlanInput { policy: &ro_policy, ..input.clone() }).is_empty());
    }

    #[test]
    fn mount_steps_attach_nested_paths_after_parents_and_keep_protected_read_only() {
        let p = policy(Mode::WorkspaceWrite);
        let h = host(7, true);
        let input = PlanInput {
            policy: &p,
            host: &h,
            program: "/bin/true".into(),
            argv: vec!["true".into()],
            cwd: "/tmp/ws".into(),
            run_dir: "/run/c/r1".into(),
            new_session: true,
            tmpfs_size: Some(1 << 20),
            private_dirs: Vec::new(),
            git_config: None,
            held: None,
            state_dir: None,
        };
        let steps = mount_steps(&PlanInput { host: &without_overlay(h.clone()), ..input.clone() });
        let attach_targets: Vec<_> = steps
            .iter()
            .filter_map(|s| if let MountStep::Attach { target, .. } = s { Some(target.clone()) } else { None })
            .collect();
        assert!(attach_targets.contains(&PathBuf::from("/tmp/ws")));
        // The protected layout comes last, over the finished view, read-only.
        let git = steps
            .iter()
            .position(|s| {
                *s == MountStep::BindOver { target: "/tmp/ws/.git".into(), access: crate::policy::BindAccess::ReadOnly }
            })
            .unwrap();
        let writable = steps.iter().position(|s| *s == MountStep::Writable { target: "/tmp/ws".into() }).unwrap();
        assert!(writable < git);
        let tmpfs = steps
            .iter()
            .position(|s| matches!(s, MountStep::Tmpfs { target, .. } if target == Path::new("/tmp")))
            .unwrap();
        let mkdir = steps.iter().position(|s| *s == MountStep::Mkdir { path: "/tmp/ws".into() }).unwrap();
        let first_attach = steps.iter().position(|s| matches!(s, MountStep::Attach { .. })).unwrap();
        let last_clone = steps.iter().rposition(|s| matches!(s, MountStep::Clone { .. })).unwrap();
        assert!(last_clone < tmpfs && tmpfs < mkdir && mkdir < first_attach);
        assert!(!steps.contains(&MountStep::Writable { target: "/tmp/ws/.git".into() }));
        assert!(steps.contains(&MountStep::Writable { target: "/tmp/ws".into() }));
        let ro = steps.iter().position(|s| *s == MountStep::ReadOnlyRecursive).unwrap();
        let last_attach = steps.iter().rposition(|s| matches!(s, MountStep::Attach { .. })).unwrap();
        assert!(last_attach < ro);
        // With overlayfs: a private layer over the host's /tmp, the workspace's mount
        // point made in its upper directory (no Mkdir through the host's tree), and
        // the same order.
        let steps = mount_steps(&input);
        let overlay = steps
            .iter()
            .position(|s| {
                matches!(s, MountStep::Overlay { target, mountpoints, pinned: false, .. }
                    if target == Path::new("/tmp") && *mountpoints == [PathBuf::from("ws")])
            })
            .expect("an overlay on /tmp");
        assert!(matches!(steps[overlay - 1], MountStep::Staging { staging: 0, size: Some(_) }));
        assert!(!steps.iter().any(|s| matches!(s, MountStep::Mkdir { .. } | MountStep::Tmpfs { .. })));
        let first_attach = steps.iter().position(|s| matches!(s, MountStep::Attach { .. })).unwrap();
        let last_clone = steps.iter().rposition(|s| matches!(s, MountStep::Clone { .. })).unwrap();
        assert!(last_clone < overlay && overlay < first_attach);
        assert!(steps.contains(&MountStep::Writable { target: "/tmp".into() }));
    }

    #[test]
    fn the_home_cache_gets_a_private_layer_unless_the_policy_exposes_a_path_there() {
        let mut p = policy(Mode::WorkspaceWrite);
        p.workspace = "/home/u/p".into();
        p.protected = vec!["/home/u/p/.git".into()];
        let h = host(7, true);
        let input = |p: &ExecutionPolicy, cache: &str| {
            let cwd = p.workspace.clone();
            (p.clone(), cwd, PathBuf::from(cache))
        };
        let plan_for = |p: &ExecutionPolicy, cwd: PathBuf, cache: PathBuf, h: &HostFacts| {
            let input = PlanInput {
                policy: p,
                host: h,
                program: "/bin/true".into(),
                argv: vec!["true".into()],
                cwd,
                run_dir: "/run/c/r1".into(),
                new_session: true,
                tmpfs_size: Some(1 << 20),
                private_dirs: vec![PrivateDir { path: cache, keep: Keep::Discard, home_cache: true }],
                git_config: Some(b"[user]\n".to_vec()),
                held: None,
                state_dir: None,
            };
            let got = private_dirs(&input).into_iter().map(|d| d.path).next();
            (got, LandlockRunner.plan(&input).unwrap())
        };
        let (p1, cwd, cache) = input(&p, "/home/u/.cache");
        let (got, plan) = plan_for(&p1, cwd.clone(), cache.clone(), &h);
        assert_eq!(got.as_deref(), Some(cache.as_path()));
        let ro = plan.mounts.iter().position(|m| *m == MountStep::ReadOnlyRecursive).unwrap();
        let layer = plan.mounts.iter().position(|m| {
            *m == MountStep::Overlay {
                target: cache.clone(),
                pinned: true,
                above: Vec::new(),
                upper: LayerUpper::Staged { staging: STAGING_HOME },
                mountpoints: Vec::new(),
                mountpoint_files: Vec::new(),
            }
        });
        // Mounted before the tree goes read-only (a kept upper must be on a writable
        // mount then), and made writable again after, through its descriptor.
        assert!(layer.is_some_and(|t| t < ro), "mounted before the tree went read-only: {:?}", plan.mounts);
        let writable = plan.mounts.iter().position(|m| *m == MountStep::Writable { target: cache.clone() });
        assert!(writable.is_some_and(|w| w > ro), "{:?}", plan.mounts);
        assert!(plan.mounts.contains(&MountStep::Staging { staging: STAGING_HOME, size: Some(1 << 20) }));
        assert_eq!(plan.landlock.as_ref().unwrap().write_in_child_tmpfs, std::slice::from_ref(&cache));
        assert!(plan.hidden.is_empty());
        assert_eq!(plan.seed_files.len(), 1);
        assert_eq!(plan.seed_files[0].by, SeedBy::Stage);
        assert_eq!(plan.seed_files[0].path, Path::new("/tmp/.gitconfig-r1"));
        assert!(plan.env.contains(&("GIT_CONFIG_GLOBAL".into(), "/tmp/.gitconfig-r1".into())));
        // Without overlayfs: a fresh tmpfs, and the result names what it hides.
        let (_, plan) = plan_for(&p1, cwd, cache.clone(), &without_overlay(h.clone()));
        let ro = plan.mounts.iter().position(|m| *m == MountStep::ReadOnlyRecursive).unwrap();
        let tmpfs =
            plan.mounts.iter().position(|m| *m == MountStep::HostTmpfs { target: cache.clone(), size: Some(1 << 20) });
        assert!(tmpfs.is_some_and(|t| t > ro), "mounted after the tree went read-only: {:?}", plan.mounts);
        assert_eq!(plan.hidden, [PathBuf::from("/tmp"), PathBuf::from("/dev/shm"), cache.clone()]);
        // A workspace (or a writable root, a protected path, the working directory)
        // at or beneath it, or it inside a writable root: no layer.
        let mut under = p.clone();
        under.workspace = "/home/u/.cache/w".into();
        let mut root_above = p.clone();
        root_above.writable_roots = vec!["/home/u".into()];
        let mut root_below = p.clone();
        root_below.writable_roots = vec!["/home/u/.cache/sccache".into()];
        for q in [under, root_above, root_below] {
            let (q, cwd, cache) = input(&q, "/home/u/.cache");
            let (got, plan) = plan_for(&q, cwd, cache, &h);
            assert_eq!(got, None, "{q:?}");
            assert!(!plan.mounts.iter().any(|m| matches!(m, MountStep::Overlay { pinned: true, .. })));
            assert!(!plan.mounts.iter().any(|m| matches!(m, MountStep::Staging { staging: STAGING_HOME, .. })));
            assert!(plan.landlock.unwrap().write_in_child_tmpfs.is_empty());
        }
        let (q, _, cache) = input(&p, "/home/u/.cache");
        assert_eq!(plan_for(&q, "/home/u/.cache/x".into(), cache, &h).0, None, "the working directory there");
        // Under a private tmpfs it is covered anyway.
        let (q, cwd, cache) = input(&p, "/tmp/home/.cache");
        assert_eq!(plan_for(&q, cwd, cache, &h).0, None);
        // Without a mount namespace nothing is mounted, and the executor writes the seed.
        let (q, cwd, cache) = input(&p, "/home/u/.cache");
        let (_, plan) = plan_for(&q, cwd, cache, &host(7, false));
        assert!(plan.mounts.is_empty() && plan.landlock.as_ref().unwrap().write_in_child_tmpfs.is_empty());
        assert_eq!(plan.seed_files[0].by, SeedBy::Executor);
        assert_eq!(plan.seed_files[0].path, Path::new("/run/c/r1/tmp/.gitconfig"));
        // A writable root where the seed would go is the caller's, and one that holds
        // it makes the temp dir the host's shared one: no private config either way.
        for root in ["/tmp/.gitconfig-r1", "/tmp"] {
            let mut there = p.clone();
            there.writable_roots = vec![root.into()];
            let (q, cwd, cache) = input(&there, "/home/u/.cache");
            let (_, plan) = plan_for(&q, cwd, cache, &h);
            assert!(plan.seed_files.is_empty() && !plan.env.iter().any(|(k, _)| k == "GIT_CONFIG_GLOBAL"), "{root}");
        }
    }

    #[test]
    fn private_dirs_nested_in_another_are_covered_by_it() {
        let p = policy(Mode::WorkspaceWrite);
        let h = host(7, true);
        let dir = |p: &str| PrivateDir { path: p.into(), keep: Keep::Discard, home_cache: false };
        let input = PlanInput {
            policy: &p,
            host: &h,
            program: "/bin/true".into(),
            argv: vec!["true".into()],
            cwd: "/tmp/ws".into(),
            run_dir: "/run/c/r1".into(),
            new_session: true,
            tmpfs_size: None,
            private_dirs: vec![
                PrivateDir { home_cache: true, ..dir("/home/u/.cache") },
                dir("/home/u/.cache/cargo"),
                dir("/home/u/.npm"),
                dir("/home/u/.npm"),
                dir("relative"),
            ],
            git_config: None,
            held: None,
            state_dir: None,
        };
        let got: Vec<PathBuf> = private_dirs(&input).into_iter().map(|d| d.path).collect();
        assert_eq!(got, [PathBuf::from("/home/u/.cache"), PathBuf::from("/home/u/.npm")]);
        // Without overlayfs only the home's cache keeps one (a tmpfs).
        let bare = without_overlay(h.clone());
        let got: Vec<PathBuf> = private_dirs(&PlanInput { host: &bare, ..input }).into_iter().map(|d| d.path).collect();
        assert_eq!(got, [PathBuf::from("/home/u/.cache")]);
    }

    #[test]
    fn mountpoint_dirs_cover_each_level_under_private_tmpfs() {
        assert_eq!(mountpoint_dirs(Path::new("/tmp/a/b")), vec![PathBuf::from("/tmp/a"), PathBuf::from("/tmp/a/b")]);
        assert!(mountpoint_dirs(Path::new("/home/x")).is_empty());
        assert!(mountpoint_dirs(Path::new("/tmp")).is_empty());
        assert!(mountpoint_dirs(Path::new("/tmpfoo/x")).is_empty());
    }

    #[test]
    fn a_selection_is_planned_without_probing_again() {
        use crate::runner::{select, Selection};
        use crate::vocab::RunnerChoice;
        let p = policy(Mode::WorkspaceWrite);
        let h = host(7, true);
        let selection = select(&p, &h, RunnerChoice::Only(RunnerKind::Landlock)).unwrap();
        assert_eq!(selection.runner, RunnerKind::Landlock);
        let input = |host| PlanInput {
            policy: &p,
            host,
            program: "/bin/true".into(),
            argv: vec!["true".into()],
            cwd: "/tmp/ws".into(),
            run_dir: "/run/x".into(),
            new_session: true,
            tmpfs_size: None,
            private_dirs: Vec::new(),
            git_config: None,
            held: None,
            state_dir: None,
        };
        let plan = selection.plan(&input(&h)).unwrap();
        assert_eq!(plan.enforcement, selection.enforcement);
        // Planning a selection neither probes (this host's probe fails) nor
        // recomputes the enforcement (the selection's report is the plan's).
        let unprobed = host(0, true);
        assert!(matches!(LandlockRunner.probe(&unprobed), ProbeStatus::Unavailable(_)));
        assert!(LandlockRunner.plan(&input(&unprobed)).is_err(), "the direct path still probes");
        let marked = Enforcement {
            level: EnforcementLevel::Partial,
            gaps: vec![crate::vocab::Gap { restriction: Restriction::DenialAudit, reason: "from selection".into() }],
        };
        let carried = Selection { runner: RunnerKind::Landlock, enforcement: marked.clone(), skipped: Vec::new() };
        assert_eq!(carried.plan(&input(&unprobed)).unwrap().enforcement, marked);
    }
}
