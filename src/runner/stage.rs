//! Materialize a pure [`LaunchPlan`] into the child-side [`StagePlan`]: open the
//! Landlock ruleset, compile the seccomp filters, create mount points, convert paths
//! to C strings. This is the I/O half of planning; nothing here decides policy.

use super::plan::{EnvFdFormat, LandlockPlan, LaunchPlan, LayerUpper, MountStep, SeccompDelivery, SeccompPlan, SeedBy};
use super::seccomp::NetFilter;
use crate::pin::{open_no_symlinks, Pins};
use crate::vocab::RunnerKind;
use cordon_stage::{IdMaps, MountOp, OverlayUpper, StagePlan, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY};
use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Fds passed to the child are first duplicated to this number or above: one more
/// than the highest fd number any plan uses in the child
/// (`cordon_stage::helper::NOTIFY_FD`).
const PASS_FD_FLOOR: RawFd = cordon_stage::helper::NOTIFY_FD + 1;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub use super::error::MaterializeError;

mod fds;
mod ruleset;
pub use fds::{inherited_terminals, program_bytes, sealed_memfd};
pub use ruleset::build_ruleset;
pub(crate) use ruleset::write_access;

fn cstr(bytes: &[u8], what: impl Fn() -> String) -> Result<CString, MaterializeError> {
    CString::new(bytes).map_err(|_| MaterializeError::Nul { what: what() })
}

fn cpath(p: &Path) -> Result<CString, MaterializeError> {
    cstr(p.as_os_str().as_bytes(), || format!("path `{}`", p.display()))
}

/// The size of the empty tmpfs hiding cordon's state directory ([`MountStep::Hide`]):
/// one page (it is read-only and holds nothing).
const HIDE_TMPFS_SIZE: u64 = 4096;

/// The mount data of a private tmpfs with permissions `mode` (octal text), bounded
/// when a size is given: `/tmp` and `/dev/shm` are world-writable with the sticky bit
/// (`1777`), like the host's; the home's cache is its owner's only (`0700`); the one
/// hiding cordon's state directory nobody's (`0000`).
pub fn tmpfs_data(mode: &str, size: Option<u64>) -> String {
    match size {
        Some(n) => format!("mode={mode},size={n}"),
        None => format!("mode={mode}"),
    }
}

/// The overlay options every private layer is mounted with: redirects in a lower
/// layer are never followed, no inode index, no metadata-only copy-up (a layer's
/// files are copied up whole on their first change), one device number and distinct
/// inode numbers for every file (`xino=on`: without it a file changed in the layer
/// keeps the host file's device and inode numbers while a hard link made to it shows
/// the layer's, and `git clone` between two places in `/tmp` refuses the "different"
/// hard link); plus `userxattr` in a user namespace (overlayfs then keeps its own
/// attributes in `user.overlay.*`, the only namespace an unprivileged mounter may
/// write).
pub fn overlay_options(user_namespace: bool) -> Vec<(&'static str, Option<&'static str>)> {
    let mut o = vec![
        ("redirect_dir", Some("nofollow")),
        ("index", Some("off")),
        ("metacopy", Some("off")),
        ("xino", Some("on")),
    ];
    if user_namespace {
        o.push(("userxattr", None));
    }
    o
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
    observe_writes: bool,
) -> Result<Materialized, MaterializeError> {
    let program = cpath(&plan.program)?;
    let argv = plan
        .argv
        .iter()
        .map(|a| cstr(a.as_bytes(), || format!("argument `{}`", a.to_string_lossy())))
        .collect::<Result<Vec<_>, _>>()?;
    let env_pairs = envp;
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
    if ns.net {
        namespaces |= libc::CLONE_NEWNET as libc::c_ulong;
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
    // mount points the plan itself creates inside a fresh private tmpfs, or that
    // tmpfs itself (a workspace of `/tmp` is attached over the private `/tmp`).
    let pinned = |p: &Path| pins.id(p).ok_or_else(|| MaterializeError::Unpinned { path: p.to_path_buf() });
    // A mount point the plan created in a fresh tmpfs needs no check, unless a tree
    // attached earlier covers it (then the path resolves through that tree, which a
    // concurrent command can change).
    let attach_targets: Vec<&Path> = plan
        .mounts
        .iter()
        .filter_map(|m| if let MountStep::Attach { target, .. } = m { Some(target.as_path()) } else { None })
        .collect();
    let created: Vec<PathBuf> = plan
        .mounts
        .iter()
        .flat_map(|m| match m {
            MountStep::Mkdir { path } | MountStep::Tmpfs { target: path, .. } => vec![path.clone()],
            // Mount points made in a private layer's upper directory: directories of
            // the overlay whatever the host has at those names.
            MountStep::Overlay { target, mountpoints, mountpoint_files, .. } => std::iter::once(target.clone())
                .chain(mountpoints.iter().chain(mountpoint_files).map(|m| target.join(m)))
                .collect(),
            _ => Vec::new(),
        })
        .filter(|p| !attach_targets.iter().any(|t| p != t && p.starts_with(t)))
        // A held root's layer is mounted over the attached root: the mount points in
        // its upper directory are the layer's own, on top of that tree.
        .chain(plan.mounts.iter().flat_map(|m| match m {
            MountStep::Overlay { target, upper: LayerUpper::InClone { .. }, mountpoints, mountpoint_files, .. } => {
                mountpoints.iter().chain(mountpoint_files).map(|m| target.join(m)).collect()
            }
            _ => Vec::new(),
        }))
        .collect();
    let created: Vec<&Path> = created.iter().map(PathBuf::as_path).collect();
    let attached_slot = |target: &Path| {
        plan.mounts.iter().find_map(|m| match m {
            MountStep::Attach { slot, target: t } if t == target => Some(*slot),
            _ => None,
        })
    };
    // Staging tmpfs mounts take the slots after every clone's.
    let clone_slots = plan
        .mounts
        .iter()
        .filter_map(|m| if let MountStep::Clone { slot, .. } = m { Some(slot + 1) } else { None })
        .max()
        .unwrap_or(0);
    let options: Vec<(CString, Option<CString>)> = overlay_options(ns.user)
        .into_iter()
        .map(|(k, v)| {
            let c = |t: &str| cstr(t.as_bytes(), || "overlay option".into());
            Ok((c(k)?, v.map(c).transpose()?))
        })
        .collect::<Result<_, MaterializeError>>()?;
    // Every overlay keeps its mount's descriptor in a slot after the staging tmpfs
    // mounts', so that it is made writable again through it, never through a path.
    let staging_slots = plan
        .mounts
        .iter()
        .filter_map(|m| if let MountStep::Staging { staging, .. } = m { Some(staging + 1) } else { None })
        .max()
        .unwrap_or(0);
    let overlay_slot = |index: usize| {
        clone_slots
            + staging_slots
            + plan.mounts[..index].iter().filter(|m| matches!(m, MountStep::Overlay { .. })).count()
    };
    let layer_slot = |target: &Path| {
        plan.mounts.iter().enumerate().find_map(|(i, m)| match m {
            MountStep::Overlay { target: t, .. } if t == target => Some(overlay_slot(i)),
            _ => None,
        })
    };
    // The protected layout is cloned from each writable root as the host has it, opened
    // before anything is attached (a "pristine" source), in the slots after every
    // overlay's: cloning from the live root instead makes the kernel scan every mount
    // attached under it so far, once per path, which is quadratic in the number of
    // repositories.
    let pristine_slots =
        clone_slots + staging_slots + plan.mounts.iter().filter(|m| matches!(m, MountStep::Overlay { .. })).count();
    // Writable roots whose writes are held back in a layer (`LayerUpper::InClone`).
    let held: Vec<&Path> = plan
        .mounts
        .iter()
        .filter_map(|m| match m {
            MountStep::Overlay { target, upper: LayerUpper::InClone { .. }, .. } => Some(target.as_path()),
            _ => None,
        })
        .collect();
    let roots: Vec<&Path> = plan
        .mounts
        .iter()
        .filter_map(|m| if let MountStep::Clone { source, .. } = m { Some(source.as_path()) } else { None })
        .collect();
    let mut pristine: Vec<&Path> = Vec::new();
    let mut source_of = |target: &Path| -> Result<(usize, CString), MaterializeError> {
        let root = roots
            .iter()
            .filter(|r| target.starts_with(r) && target != **r)
            .min_by_key(|r| r.components().count())
            .ok_or_else(|| MaterializeError::Unpinned { path: target.to_path_buf() })?;
        let i = match pristine.iter().position(|p| p == root) {
            Some(i) => i,
            None => {
                pristine.push(root);
                pristine.len() - 1
            }
        };
        let rel = target.strip_prefix(root).unwrap_or(target);
        Ok((pristine_slots + i, cpath(rel)?))
    };
    let mut mounts = Vec::new();
    let mut slots = 0usize;
    for (index, m) in plan.mounts.iter().enumerate() {
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
            MountStep::Tmpfs { target, size } => MountOp::Tmpfs {
                target: cpath(target)?,
                data: cstr(tmpfs_data("1777", *size).as_bytes(), || "tmpfs data".into())?,
                expect: None,
            },
            // cordon's own state directory, by path (see `MountStep::Hide`).
            MountStep::Hide { target } => MountOp::Tmpfs {
                target: cpath(target)?,
                data: cstr(tmpfs_data("0000", Some(HIDE_TMPFS_SIZE)).as_bytes(), || "tmpfs data".into())?,
                expect: None,
            },
            // A host directory: mounted onto the pinned directory only.
            MountStep::HostTmpfs { target, size } => MountOp::Tmpfs {
                target: cpath(target)?,
                data: cstr(tmpfs_data("0700", *size).as_bytes(), || "tmpfs data".into())?,
                expect: Some(pinned(target)?),
            },
            MountStep::Staging { staging, size } => {
                slots = slots.max(clone_slots + staging + 1);
                let mut params = vec![(c"mode".to_owned(), c"0700".to_owned())];
                if let Some(n) = size {
                    params.push((c"size".to_owned(), cstr(n.to_string().as_bytes(), || "tmpfs size".into())?));
                }
                MountOp::StagingTmpfs { slot: clone_slots + staging, params }
            }
            MountStep::Overlay { target, pinned: is_pinned, above, upper, mountpoints, mountpoint_files } => MountOp::Overlay {
                target: cpath(target)?,
                expect: if *is_pinned { Some(pinned(target)?) } else { None },
                lower_above: above.iter().map(|a| Ok((cpath(a)?, pinned(a)?))).collect::<Result<_, MaterializeError>>()?,
                upper: match upper {
                    // Named after the step, so each overlay's directories are its own.
                    LayerUpper::Staged { staging } => OverlayUpper::Staged {
                        slot: clone_slots + staging,
                        upper: cstr(format!("u{index}").as_bytes(), || "upper".into())?,
                        work: cstr(format!("w{index}").as_bytes(), || "work".into())?,
                        // The first overlay of this staging tmpfs attaches it.
                        attach: !plan.mounts[..index].iter().any(|e| {
                            matches!(e, MountStep::Overlay { upper: LayerUpper::Staged { staging: s }, .. } if s == staging)
                        }),
                    },
                    LayerUpper::Kept { upper, work } => OverlayUpper::Dirs {
                        upper: cpath(upper)?,
                        upper_expect: pinned(upper)?,
                        work: cpath(work)?,
                        work_expect: pinned(work)?,
                    },
                    // A clone of a host directory (the held-writes storage) stands in for
                    // a staging tmpfs: the directories are made in it, on the host.
                    LayerUpper::InClone { slot, upper, work } => OverlayUpper::Staged {
                        slot: *slot,
                        upper: cstr(upper.as_bytes(), || "upper".into())?,
                        work: cstr(work.as_bytes(), || "work".into())?,
                        attach: !plan.mounts[..index].iter().any(|e| {
                            matches!(e, MountStep::Overlay { upper: LayerUpper::InClone { slot: s, .. }, .. } if s == slot)
                        }),
                    },
                },
                mountpoints: mountpoints.iter().map(|m| cpath(m)).collect::<Result<_, _>>()?,
                mountpoint_files: mountpoint_files.iter().map(|m| cpath(m)).collect::<Result<_, _>>()?,
                options: options.clone(),
                slot: {
                    slots = slots.max(overlay_slot(index) + 1);
                    overlay_slot(index)
                },
            },
            MountStep::Mkdir { path } => MountOp::Mkdir { path: cpath(path)? },
            MountStep::ReadOnlyRecursive => {
                MountOp::SetAttr { target: c"/".to_owned(), recursive: true, set: MOUNT_ATTR_RDONLY, clear: 0 }
            }
            // Attached roots: attributes are set through the tree's fd, never a path a
            // concurrent command could have swapped. Exposed trees are nodev and nosuid
            // throughout (a device node or setuid file sitting in a workspace stays
            // inert), and writable roots writable at their top mount only.
            MountStep::NoDevNoSuid { target } => match attached_slot(target) {
                Some(slot) => {
                    MountOp::SetAttrSlot { slot, recursive: true, set: MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID, clear: 0 }
                }
                None => return Err(MaterializeError::Unpinned { path: target.clone() }),
            },
            MountStep::ReadOnly { target } => match attached_slot(target) {
                Some(slot) => MountOp::SetAttrSlot { slot, recursive: true, set: MOUNT_ATTR_RDONLY, clear: 0 },
                None => return Err(MaterializeError::Unpinned { path: target.clone() }),
            },
            // Cloned from the pristine root, so the attributes are set here: nodev and
            // nosuid throughout as on every exposed tree, read-only for a protected
            // path, writable at the top (only, as a writable root) otherwise.
            MountStep::BindOver { target, access } => {
                use crate::policy::BindAccess;
                // A held root's writes go to its layer: what the grant reopens and the
                // directories holding protected paths are cloned from that layer, as the
                // command sees it (the rest, read-only, from the host's tree).
                let in_layer = held.iter().any(|r| target.starts_with(r));
                let live = *access != BindAccess::ReadOnly && in_layer;
                let (source_slot, source_rel) = if live {
                    (None, CString::default())
                } else {
                    let (slot, rel) = source_of(target)?;
                    slots = slots.max(slot + 1);
                    (Some(slot), rel)
                };
                let inert = MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID;
                let (set, clear_top) = match access {
                    BindAccess::ReadOnly => (inert | MOUNT_ATTR_RDONLY, 0),
                    BindAccess::Writable | BindAccess::Same => (inert, MOUNT_ATTR_RDONLY),
                };
                // Inside a held root's layer the target is the overlay's file (a mount
                // point in its upper directory, or the lower one seen through it), not
                // the pinned host file: entered without following symlinks, and only a
                // clone from the pristine host tree is checked.
                MountOp::BindOver {
                    target: cpath(target)?,
                    target_expect: if in_layer { None } else { Some(pinned(target)?) },
                    expect: if live { None } else { Some(pinned(target)?) },
                    source_slot,
                    source_rel,
                    set,
                    clear_top,
                }
            }
            MountStep::Writable { target } => match attached_slot(target).or_else(|| layer_slot(target)) {
                Some(slot) => MountOp::SetAttrSlot { slot, recursive: false, set: 0, clear: MOUNT_ATTR_RDONLY },
                // The private tmpfs mounts (already nodev, nosuid), in this fresh
                // namespace before anything else runs there.
                None => MountOp::SetAttr { target: cpath(target)?, recursive: false, set: 0, clear: MOUNT_ATTR_RDONLY },
            },
        };
        mounts.push(op);
    }
    // The pristine sources, opened first (before anything is attached or hidden).
    let at = mounts.iter().position(|m| matches!(m, MountOp::MakeRootPrivate)).map_or(0, |i| i + 1);
    for (i, root) in pristine.iter().enumerate().rev() {
        mounts
            .insert(at, MountOp::OpenPristine { path: cpath(root)?, slot: pristine_slots + i, expect: pinned(root)? });
    }
    // Seeded files the stage writes: after every mount, into a private tmpfs that is
    // writable by then.
    for f in plan.seed_files.iter().filter(|f| f.by == SeedBy::Stage) {
        mounts.push(MountOp::WriteFile { path: cpath(&f.path)?, content: f.content.clone() });
    }

    let late_rules = |paths: fn(&LandlockPlan) -> &Vec<PathBuf>| match &plan.landlock {
        Some(l) => {
            let bits = write_access(l.abi).bits();
            paths(l).iter().map(|p| Ok((cpath(p)?, bits))).collect::<Result<Vec<_>, MaterializeError>>()
        }
        None => Ok(Vec::new()),
    };
    let late_landlock_rules = late_rules(|l| &l.write_in_child)?;
    let late_landlock_tmpfs_rules = late_rules(|l| &l.write_in_child_tmpfs)?;
    let landlock = match &plan.landlock {
        Some(l) => Some((build_ruleset(l, &inherited_terminals(&stdio), pins)?, l.restrict_flags)),
        None => None,
    };
    // cordon's seccomp program: installed by the stage itself, or passed in a sealed
    // memfd to the helper that installs it (see `SeccompPlan`).
    let (seccomp, observed) = match plan.seccomp {
        Some(SeccompPlan { network, unix_allowlist, proxy, loopback, delivery: SeccompDelivery::Stage, .. }) => {
            let supervised = notify_socket.is_some();
            let net = NetFilter::select(network, unix_allowlist, proxy, loopback && supervised);
            let program = super::seccomp::compile_net(net, supervised, observe_writes)?;
            (vec![program.insns], program.observed)
        }
        _ => (Vec::new(), Default::default()),
    };
    // Every passed fd is duplicated above the highest child fd number first, so that
    // no `dup2` in the child's list overwrites a later entry's source.
    let seed_fds = plan.seed_files.iter().filter_map(|f| match f.by {
        SeedBy::Fd { child_fd } => Some(child_fd),
        _ => None,
    });
    let floor = plan.path_fds.iter().map(|(_, fd, _)| *fd).chain(seed_fds).map(|fd| fd + 1).max().unwrap_or(0);
    let floor = floor.max(PASS_FD_FLOOR);
    let mut keep: Vec<OwnedFd> = Vec::new();
    let mut pass = |fd: RawFd, child_fd: RawFd, what: &'static str| {
        let dup =
            cordon_stage::fds::dup_above(fd, floor).map_err(|source| MaterializeError::PassFd { what, source })?;
        let raw = dup.as_raw_fd();
        keep.push(dup);
        Ok::<(RawFd, RawFd), MaterializeError>((raw, child_fd))
    };
    let mut pass_fds = Vec::new();
    // A helper that installs the program from an fd, with a listener it hands back
    // when the plan supervises (the stage helper inside bubblewrap).
    let mut observed = observed;
    let mut helper_notify = false;
    if let Some(SeccompPlan {
        network,
        unix_allowlist,
        proxy,
        loopback,
        delivery: SeccompDelivery::Fd { child_fd },
        supervise,
    }) = plan.seccomp
    {
        helper_notify = supervise;
        let net = NetFilter::select(network, unix_allowlist, proxy, loopback && supervise);
        let program = super::seccomp::compile_net(net, supervise, observe_writes)?;
        if supervise {
            observed = program.observed.clone();
        }
        let bytes = program_bytes(&program.insns);
        // Ours is closed once the child holds its copy (`Materialized::keep`).
        let fd = sealed_memfd(&bytes).map_err(MaterializeError::SeccompFd)?;
        pass_fds.push(pass(fd.as_raw_fd(), child_fd, "the seccomp program")?);
    }
    if let Some(e) = &plan.env_fd {
        let mut bytes = Vec::new();
        for (k, v) in env_pairs {
            match e.format {
                EnvFdFormat::Entries => {
                    bytes.extend_from_slice(k.as_bytes());
                    bytes.push(b'=');
                    bytes.extend_from_slice(v.as_bytes());
                    bytes.push(0);
                }
                EnvFdFormat::BwrapSetenv => {
                    for part in [b"--setenv".as_slice(), k.as_bytes(), v.as_bytes()] {
                        bytes.extend_from_slice(part);
                        bytes.push(0);
                    }
                }
            }
        }
        let fd = sealed_memfd(&bytes)
            .map_err(|source| MaterializeError::PassFd { what: "the command's environment", source })?;
        pass_fds.push(pass(fd.as_raw_fd(), e.child_fd, "the command's environment")?);
    }
    // Seeded files bubblewrap copies in (`--file FD DEST`).
    for f in &plan.seed_files {
        if let SeedBy::Fd { child_fd } = f.by {
            let fd = sealed_memfd(&f.content)
                .map_err(|source| MaterializeError::PassFd { what: "a seeded file", source })?;
            pass_fds.push(pass(fd.as_raw_fd(), child_fd, "a seeded file")?);
        }
    }
    let mut helper_status = None;
    if let Some(h) = &plan.stage_helper {
        use cordon_stage::helper::{EXE_FD, RULESET_FD, STATUS_FD};
        let ruleset = build_ruleset(&h.landlock, &inherited_terminals(&stdio), pins)?;
        let exe = std::fs::File::open(&h.exe)
            .map_err(|source| MaterializeError::StageHelper { path: h.exe.clone(), source })?;
        let (status_read, status_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| MaterializeError::PassFd { what: "the helper's status pipe", source: e.into() })?;
        pass_fds.push(pass(ruleset.as_raw_fd(), RULESET_FD, "the Landlock ruleset")?);
        pass_fds.push(pass(status_write.as_raw_fd(), STATUS_FD, "the helper's status pipe")?);
        pass_fds.push(pass(exe.as_raw_fd(), EXE_FD, "the stage helper")?);
        // What the helper verifies inside, once bubblewrap has resolved every bind
        // destination and the working directory itself.
        let mut checks = Vec::new();
        for (path, _, writable) in &plan.path_fds {
            let id = pins.id(path).ok_or_else(|| MaterializeError::Unpinned { path: path.clone() })?;
            checks
                .extend_from_slice(format!("{} {} {} ", if *writable { 'w' } else { 'r' }, id.dev, id.ino).as_bytes());
            checks.extend_from_slice(path.as_os_str().as_bytes());
            checks.push(0);
        }
        for (path, read_only) in &h.checks {
            let id = pins.id(path).ok_or_else(|| MaterializeError::Unpinned { path: path.clone() })?;
            checks
                .extend_from_slice(format!("{} {} {} ", if *read_only { 'r' } else { 'w' }, id.dev, id.ino).as_bytes());
            checks.extend_from_slice(path.as_os_str().as_bytes());
            checks.push(0);
        }
        if let Some(id) = pins.id(&plan.cwd) {
            checks.extend_from_slice(format!("c {} {} .", id.dev, id.ino).as_bytes());
            checks.push(0);
        }
        let checks_fd =
            sealed_memfd(&checks).map_err(|source| MaterializeError::PassFd { what: "the helper's checks", source })?;
        pass_fds.push(pass(checks_fd.as_raw_fd(), cordon_stage::helper::CHECKS_FD, "the helper's checks")?);
        helper_status = Some(status_read);
        if helper_notify {
            let Some(sock) = notify_socket else { return Err(MaterializeError::NoSupervisor) };
            pass_fds.push(pass(sock, cordon_stage::helper::NOTIFY_FD, "the notification socket")?);
        }
    }
    // Pinned bind sources (bubblewrap's `--bind-fd`), reopened by the stage after its
    // mounts so that what it attached beneath them (the protected layout) comes along.
    for (path, child_fd, _) in &plan.path_fds {
        let fd = pins.fd(path).ok_or_else(|| MaterializeError::Unpinned { path: path.clone() })?;
        let (raw, child) = pass(fd.as_raw_fd(), *child_fd, "a pinned bind source")?;
        if !plan.mounts.is_empty() {
            mounts.push(MountOp::ReopenOnto { target: cpath(path)?, expect: pinned(path)?, fd: raw });
        }
        pass_fds.push((raw, child));
    }
    let cwd_in_layer = plan.mounts.iter().any(|m| {
        matches!(m, MountStep::Overlay { target, upper: LayerUpper::InClone { .. }, .. } if plan.cwd.starts_with(target))
    });
    let stage = StagePlan {
        program,
        argv,
        // With the environment in an fd, the stage's program gets none of it.
        envp: if plan.env_fd.is_some() { Vec::new() } else { envp },
        cwd,
        // A working directory inside a held root is seen through its layer (another
        // identity): entered without following symlinks instead.
        cwd_expect: if cwd_in_layer { None } else { pins.id(&plan.cwd) },
        cwd_no_symlinks: cwd_in_layer,
        stdio,
        namespaces,
        id_maps,
        mounts,
        loopback_up: plan.namespaces.net,
        mount_slots: slots,
        new_session: plan.new_session,
        // Always an init: pid 1 of the run's pid namespace, or else a supervising
        // subreaper, so that no process of the run outlives cordon (even SIGKILLed)
        // and nothing the run started is left to the host's init to reap.
        init: true,
        init_shares_memory: init_may_share_memory(plan, landlock.is_some()),
        no_new_privs: plan.no_new_privs,
        landlock,
        late_landlock_rules,
        late_landlock_tmpfs_rules,
        pass_fds,
        notify_socket: if observed.is_empty() || helper_notify { None } else { notify_socket },
        // The supervisor of a loopback run asks which unix sockets listen inside.
        unix_diag: !helper_notify && plan.seccomp.is_some_and(|s| s.loopback && s.supervise),
        drop_capabilities: plan.drop_capabilities,
        seccomp,
        limits: cordon_stage::ChildLimits::default(),
    };
    Ok(Materialized { stage, observed, keep, helper_status, helper_notify })
}

/// Whether the run's init may share cordon's memory (see
/// `cordon_stage::StagePlan::init_shares_memory`), from the plan and whether the
/// command gets a Landlock domain of its own (`landlocked`: a ruleset was built for
/// the stage, which fails the run rather than exec without it). The landlock runner
/// without a domain (Landlock ABI 1 with namespaces, where the mount layer confines
/// writes, or none at all) must not: the init would be pid 1 of the command's pid
/// namespace, dumpable and the command's uid, with cordon's memory and descriptors
/// behind `/proc/1`.
pub fn init_may_share_memory(plan: &LaunchPlan, landlocked: bool) -> bool {
    match plan.runner {
        RunnerKind::Passthrough => true,
        RunnerKind::Bwrap => plan.stage_helper.is_some(),
        RunnerKind::Landlock => landlocked,
        RunnerKind::Seatbelt => false,
    }
}

/// A materialized plan and what its seccomp notifications mean.
#[derive(Debug)]
pub struct Materialized {
    /// The child-side plan.
    pub stage: StagePlan,
    /// Observed syscalls (empty when no supervisor is attached).
    pub observed: std::collections::BTreeMap<i64, super::seccomp::Observed>,
    /// The sources of `stage.pass_fds`: keep them open until `spawn` returned.
    pub keep: Vec<OwnedFd>,
    /// The read end of the stage helper's status pipe (see
    /// `cordon_stage::helper::read_status`), when the plan has a helper.
    pub helper_status: Option<OwnedFd>,
    /// The stage helper will send its seccomp listener on the notification socket
    /// once bubblewrap has built the sandbox (later than `spawn` returns).
    pub helper_notify: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn program_bytes_are_the_raw_sock_filter_array() {
        let prog = [libc::sock_filter { code: 0x15, jt: 1, jf: 2, k: 0xC000_003E }];
        let b = program_bytes(&prog);
        assert_eq!(b.len(), 8);
        let mut expected = Vec::new();
        expected.extend_from_slice(&0x15u16.to_ne_bytes());
        expected.extend_from_slice(&[1, 2]);
        expected.extend_from_slice(&0xC000_003Eu32.to_ne_bytes());
        assert_eq!(b, expected);
        assert_eq!(std::mem::size_of::<libc::sock_filter>(), 8);
    }

    #[test]
    fn a_sealed_memfd_reads_back_and_cannot_be_changed() {
        let fd = sealed_memfd(&[7u8; 16]).unwrap();
        // A reader sharing the open file description, as a child does after `dup2`.
        let mut reader = std::fs::File::from(fd.try_clone().unwrap());
        let mut buf = Vec::new();
        reader.read_to_end(&mut buf).unwrap();
        assert_eq!(buf, [7u8; 16]);
        assert_eq!(nix::unistd::lseek(&fd, 0, nix::unistd::Whence::SeekCur).unwrap(), 16);
        let mut writer = std::fs::File::from(fd);
        assert!(std::io::Write::write_all(&mut writer, b"x").is_err());
    }
}
