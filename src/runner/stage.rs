//! Materialize a pure [`LaunchPlan`] into the child-side [`StagePlan`]: open the
//! Landlock ruleset, compile the seccomp filters, create mount points, convert paths
//! to C strings. This is the I/O half of planning; nothing here decides policy.

use super::{LandlockPlan, LaunchPlan, MountStep};
use crate::pin::{open_no_symlinks, Pins};
use cordon_stage::{IdMaps, MountOp, StagePlan, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY};
use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Why a plan could not be materialized.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MaterializeError {
    /// A string contains a NUL byte.
    #[error("{what} contains a NUL byte")]
    Nul {
        /// Which string.
        what: String,
    },
    /// The Landlock ruleset could not be built.
    #[error("building the Landlock ruleset: {0}")]
    Landlock(String),
    /// The seccomp filters could not be built.
    #[error(transparent)]
    Seccomp(#[from] super::seccomp::SeccompError),
    /// The seccomp program for a helper (bubblewrap) could not be put into its fd.
    #[error("passing the seccomp program to bubblewrap through a memfd: {0}")]
    SeccompFd(std::io::Error),
    /// A path the plan mounts, binds or grants was not pinned by the executor: the
    /// plan and the policy disagree (a bug), so nothing runs.
    #[error("`{path}` is used by the plan but was not pinned")]
    Unpinned {
        /// The path.
        path: PathBuf,
    },
    /// A pinned fd could not be duplicated for the child.
    #[error("passing the pinned `{path}` to the child: {source}")]
    PassFd {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A mount point could not be created.
    #[error("creating mount point `{path}`: {source}")]
    MountPoint {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

fn cstr(bytes: &[u8], what: impl Fn() -> String) -> Result<CString, MaterializeError> {
    CString::new(bytes).map_err(|_| MaterializeError::Nul { what: what() })
}

fn cpath(p: &Path) -> Result<CString, MaterializeError> {
    cstr(p.as_os_str().as_bytes(), || format!("path `{}`", p.display()))
}

/// Everything beneath a writable root except creating device nodes.
fn write_access(abi: u32) -> landlock::BitFlags<AccessFs> {
    AccessFs::from_all(ABI::from(abi as i32)) & !(AccessFs::MakeChar | AccessFs::MakeBlock)
}

/// Open a rule's directory: the pinned fd when the policy pinned it, else opened
/// without following a symlink in any component (`/`, per-run directories).
fn rule_fd(p: &Path, pins: &Pins) -> Result<OwnedFd, MaterializeError> {
    let fd = match pins.fd(p) {
        Some(fd) => fd.try_clone_to_owned(),
        None => open_no_symlinks(p),
    };
    fd.map_err(|e| MaterializeError::Landlock(format!("{}: {e}", p.display())))
}

/// Build the Landlock ruleset for `plan`; returns the ruleset fd. Rules are built on
/// open files (pinned ones where the policy pinned them), never on a path that a
/// concurrent command could have swapped for a symlink.
pub fn build_ruleset(plan: &LandlockPlan, extra_devices: &[PathBuf], pins: &Pins) -> Result<OwnedFd, MaterializeError> {
    let err = |e: &dyn std::fmt::Display| MaterializeError::Landlock(e.to_string());
    let abi = ABI::from(plan.abi as i32);
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    ruleset = ruleset.handle_access(AccessFs::from_all(abi)).map_err(|e| err(&e))?;
    if plan.deny_tcp {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi)).map_err(|e| err(&e))?;
    }
    if plan.scope_abstract_unix {
        ruleset = ruleset.scope(Scope::AbstractUnixSocket).map_err(|e| err(&e))?;
    }
    if plan.scope_signals {
        ruleset = ruleset.scope(Scope::Signal).map_err(|e| err(&e))?;
    }
    let mut created = ruleset.create().map_err(|e| err(&e))?;
    let read = AccessFs::from_read(abi);
    for p in &plan.read {
        created = created.add_rule(PathBeneath::new(rule_fd(p, pins)?, read)).map_err(|e| err(&e))?;
    }
    let write = write_access(plan.abi);
    for p in &plan.write {
        created = created.add_rule(PathBeneath::new(rule_fd(p, pins)?, write)).map_err(|e| err(&e))?;
    }
    let mut device = AccessFs::ReadFile | AccessFs::WriteFile;
    if plan.abi >= 5 {
        device |= AccessFs::IoctlDev;
    }
    if plan.abi >= 3 {
        device |= AccessFs::Truncate;
    }
    for p in plan.devices.iter().chain(extra_devices) {
        // A device the host lacks is simply not granted.
        if let Ok(fd) = PathFd::new(p) {
            created = created.add_rule(PathBeneath::new(fd, device)).map_err(|e| err(&e))?;
        }
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| MaterializeError::Landlock("the kernel did not return a ruleset".into()))
}

/// The terminals behind our own stdio fds: the command may keep writing to them when
/// it reopens them (`> /dev/stderr`).
pub fn inherited_terminals(stdio: &[RawFd; 3]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    use std::os::unix::fs::FileTypeExt;
    for fd in stdio {
        if let Ok(target) = std::fs::read_link(format!("/proc/self/fd/{fd}")) {
            let is_tty = target.starts_with("/dev/pts/") || target.starts_with("/dev/tty");
            let is_char = std::fs::metadata(&target).is_ok_and(|m| m.file_type().is_char_device());
            if is_tty && is_char && !out.contains(&target) {
                out.push(target);
            }
        }
    }
    out
}

/// Turn `plan` into a [`StagePlan`] with `stdio` as the child's fds 0, 1, 2. With a
/// `notify_socket`, the observed syscalls are routed to a supervisor whose listener
/// the child sends on that socket.
pub fn materialize(
    plan: &LaunchPlan,
    envp: &[(std::ffi::OsString, std::ffi::OsString)],
    stdio: [RawFd; 3],
    host: &crate::host::HostFacts,
    notify_socket: Option<RawFd>,
    pins: &Pins,
) -> Result<Materialized, MaterializeError> {
    let program = cpath(&plan.program)?;
    let argv = plan
        .argv
        .iter()
        .map(|a| cstr(a.as_bytes(), || format!("argument `{}`", a.to_string_lossy())))
        .collect::<Result<Vec<_>, _>>()?;
    let envp = envp
        .iter()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            cstr(&kv, || format!("environment variable `{}`", k.to_string_lossy()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let cwd = cpath(&plan.cwd)?;

    let mut namespaces: libc::c_ulong = 0;
    let ns = plan.namespaces;
    if ns.user {
        namespaces |= libc::CLONE_NEWUSER as libc::c_ulong;
    }
    if ns.mount {
        namespaces |= libc::CLONE_NEWNS as libc::c_ulong;
    }
    if ns.pid {
        namespaces |= libc::CLONE_NEWPID as libc::c_ulong;
    }
    if ns.ipc {
        namespaces |= libc::CLONE_NEWIPC as libc::c_ulong;
    }
    let id_maps = if ns.user {
        Some(IdMaps {
            uid_map: cstr(format!("{0} {0} 1\n", host.euid).as_bytes(), || "uid map".into())?,
            gid_map: cstr(format!("{0} {0} 1\n", host.egid).as_bytes(), || "gid map".into())?,
        })
    } else {
        None
    };

    // Every clone source must be the pinned file; every attach target too, except
    // mount points the plan itself creates inside a fresh private tmpfs.
    let pinned = |p: &Path| pins.id(p).ok_or_else(|| MaterializeError::Unpinned { path: p.to_path_buf() });
    let created: Vec<&Path> = plan
        .mounts
        .iter()
        .filter_map(|m| if let MountStep::Mkdir { path } = m { Some(path.as_path()) } else { None })
        .collect();
    let attached_slot = |target: &Path| {
        plan.mounts.iter().find_map(|m| match m {
            MountStep::Attach { slot, target: t } if t == target => Some(*slot),
            _ => None,
        })
    };
    let mut mounts = Vec::new();
    let mut slots = 0usize;
    for m in &plan.mounts {
        let op = match m {
            MountStep::MakeRootPrivate => MountOp::MakeRootPrivate,
            MountStep::Clone { source, slot } => {
                slots = slots.max(slot + 1);
                MountOp::CloneTree { source: cpath(source)?, slot: *slot, expect: Some(pinned(source)?) }
            }
            MountStep::Attach { slot, target } => MountOp::Attach {
                slot: *slot,
                target: cpath(target)?,
                expect: if created.contains(&target.as_path()) { None } else { Some(pinned(target)?) },
            },
            MountStep::Proc { required } => MountOp::Proc { target: c"/proc".to_owned(), optional: !required },
            MountStep::Tmpfs { target } => MountOp::Tmpfs { target: cpath(target)? },
            MountStep::Mkdir { path } => MountOp::Mkdir { path: cpath(path)? },
            MountStep::ReadOnlyRecursive => {
                MountOp::SetAttr { target: c"/".to_owned(), recursive: true, set: MOUNT_ATTR_RDONLY, clear: 0 }
            }
            // An attached root: its attributes are set through the tree's fd. Writable
            // roots are nodev and nosuid throughout (a device node or setuid file that
            // sits in a workspace stays inert), and writable at their top mount only.
            MountStep::Writable { target } => match attached_slot(target) {
                Some(slot) => {
                    mounts.push(MountOp::SetAttrSlot {
                        slot,
                        recursive: true,
                        set: MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID,
                        clear: 0,
                    });
                    MountOp::SetAttrSlot { slot, recursive: false, set: 0, clear: MOUNT_ATTR_RDONLY }
                }
                // The private tmpfs mounts (already nodev, nosuid), in this fresh
                // namespace before anything else runs there.
                None => MountOp::SetAttr { target: cpath(target)?, recursive: false, set: 0, clear: MOUNT_ATTR_RDONLY },
            },
        };
        mounts.push(op);
    }

    let late_landlock_rules = match &plan.landlock {
        Some(l) => {
            let bits = write_access(l.abi).bits();
            l.write_in_child.iter().map(|p| Ok((cpath(p)?, bits))).collect::<Result<Vec<_>, MaterializeError>>()?
        }
        None => Vec::new(),
    };
    let landlock = match &plan.landlock {
        Some(l) => Some((build_ruleset(l, &inherited_terminals(&stdio), pins)?, l.restrict_flags)),
        None => None,
    };
    let (seccomp, observed) = match plan.seccomp {
        Some(network_allowed) => {
            let program = super::seccomp::compile_program(network_allowed, notify_socket.is_some())?;
            (vec![program.insns], program.observed)
        }
        None => (Vec::new(), Default::default()),
    };
    let mut pass_fds = Vec::new();
    if let Some(s) = &plan.seccomp_fd {
        let bytes = super::bwrap::program_bytes(&super::seccomp::compile_filter(s.network_allowed)?);
        let fd = super::bwrap::seccomp_fd::create(&bytes).map_err(MaterializeError::SeccompFd)?;
        pass_fds.push((fd, s.child_fd));
    }
    // Pinned sources, duplicated above every child fd number so no `dup2` in the
    // child overwrites a source it still needs.
    let above = plan.path_fds.iter().map(|(_, fd)| *fd).max().unwrap_or(2) + 1;
    let mut held = Vec::new();
    for (path, child_fd) in &plan.path_fds {
        let fd = pins.fd(path).ok_or_else(|| MaterializeError::Unpinned { path: path.clone() })?;
        let owned = cordon_stage::fds::dup_cloexec_above(fd.as_raw_fd(), above)
            .map_err(|source| MaterializeError::PassFd { path: path.clone(), source })?;
        pass_fds.push((owned.as_raw_fd(), *child_fd));
        held.push(owned);
    }
    let stage = StagePlan {
        program,
        argv,
        envp,
        cwd,
        cwd_expect: pins.id(&plan.cwd),
        stdio,
        namespaces,
        id_maps,
        mounts,
        mount_slots: slots,
        new_session: plan.new_session,
        // Always an init: pid 1 of the run's pid namespace, or else a supervising
        // subreaper, so that no process of the run outlives cordon (even SIGKILLed)
        // and nothing the run started is left to the host's init to reap.
        init: true,
        no_new_privs: plan.no_new_privs,
        landlock,
        late_landlock_rules,
        pass_fds,
        notify_socket: if observed.is_empty() { None } else { notify_socket },
        drop_capabilities: plan.drop_capabilities,
        seccomp,
    };
    Ok(Materialized { stage, observed, held })
}

/// A materialized plan and what its seccomp notifications mean.
#[derive(Debug)]
pub struct Materialized {
    /// The child-side plan.
    pub stage: StagePlan,
    /// Observed syscalls (empty when no supervisor is attached).
    pub observed: std::collections::BTreeMap<i64, super::seccomp::Observed>,
    /// The fds `stage.pass_fds` names, kept open until the child is spawned.
    pub held: Vec<OwnedFd>,
}
