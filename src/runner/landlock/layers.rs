//! The private layers and the hidden state directory of a confined run with a mount
//! layer (pure step builders for both Linux runners' stages): which host directories
//! get a private writable layer, the steps that put them and the private `/tmp` and
//! `/dev/shm` in place, and the step that hides cordon's state directory.

use super::{mountpoint_dirs, PRIVATE_TMPFS, STAGING_HOME, STAGING_TMP};
use crate::runner::plan::{Keep, LayerUpper, MountStep, PlanInput, PrivateDir};
use std::path::{Path, PathBuf};

/// The host directories a confined run gets a private writable layer over (pure), for
/// both Linux runners with a mount layer: the executor's candidates
/// ([`PlanInput::private_dirs`]: the home's cache, the toolchain homes), minus each the
/// run must see as the host has it: a workspace, writable root, protected path,
/// allowed unix socket or the working directory at or beneath it, or it lying inside
/// the workspace or a writable root (then it is the caller's tree). One inside another
/// candidate is covered by that one's layer; one under a private tmpfs (`/tmp`,
/// `/dev/shm`) by that tmpfs. Without overlayfs only the home's cache remains (it gets
/// a fresh tmpfs instead: [`MountStep::HostTmpfs`]).
pub fn private_dirs(input: &PlanInput<'_>) -> Vec<PrivateDir> {
    let policy = input.policy;
    if !policy.mode.is_confined() {
        return Vec::new();
    }
    let overlap = |dir: &Path| {
        let overlaps = |p: &Path| p.starts_with(dir) || dir.starts_with(p);
        let exposed = std::iter::once(&policy.workspace)
            .chain(policy.writable_roots.iter())
            .chain(policy.protected.iter())
            .chain(std::iter::once(&input.cwd));
        let sockets = policy.allow_unix_sockets.iter();
        exposed.into_iter().any(|p| overlaps(p)) || sockets.into_iter().any(|p| p.starts_with(dir))
    };
    let candidates = &input.private_dirs;
    let overlay = input.host.overlay.available();
    candidates
        .iter()
        .enumerate()
        .filter(|(i, d)| {
            let p = d.path.as_path();
            p.is_absolute()
                && !PRIVATE_TMPFS.iter().any(|t| p.starts_with(t))
                && !overlap(p)
                // Nested in (or the same as) an earlier candidate, or nested in a later one.
                && !candidates.iter().enumerate().any(|(j, o)| j != *i && p.starts_with(&o.path) && (j < *i || o.path != p))
                && (overlay || d.home_cache)
        })
        .map(|(_, d)| d.clone())
        .collect()
}

/// The mount steps that put the private layers over `dirs` (pure; see
/// [`private_dirs`]), in two parts: what goes before the tree is made read-only, and
/// what goes after. With overlayfs, one staging tmpfs ([`STAGING_HOME`]) holding the
/// changes of every layer not kept elsewhere and an overlay per directory, all before
/// (a kept upper directory must still be on a writable mount when its overlay is
/// made), then each overlay writable again (through its mount's descriptor); without,
/// a fresh tmpfs on the home's cache, after (a new mount stays writable).
pub fn private_dir_steps(input: &PlanInput<'_>, dirs: &[PrivateDir]) -> (Vec<MountStep>, Vec<MountStep>) {
    if !input.host.overlay.available() {
        let after = dirs.iter().map(|d| MountStep::HostTmpfs { target: d.path.clone(), size: input.tmpfs_size });
        return (Vec::new(), after.collect());
    }
    let mut before = Vec::new();
    if dirs.iter().any(|d| !matches!(d.keep, Keep::Upper { .. })) {
        before.push(MountStep::Staging { staging: STAGING_HOME, size: input.tmpfs_size });
    }
    for d in dirs {
        let (upper, above) = match &d.keep {
            Keep::Discard => (LayerUpper::Staged { staging: STAGING_HOME }, Vec::new()),
            Keep::Upper { upper, work } => (LayerUpper::Kept { upper: upper.clone(), work: work.clone() }, Vec::new()),
            Keep::ReadUpper { upper } => (LayerUpper::Staged { staging: STAGING_HOME }, vec![upper.clone()]),
        };
        before.push(MountStep::Overlay {
            target: d.path.clone(),
            pinned: true,
            above,
            upper,
            mountpoints: Vec::new(),
            mountpoint_files: Vec::new(),
        });
    }
    let after = dirs.iter().map(|d| MountStep::Writable { target: d.path.clone() }).collect();
    (before, after)
}

/// The steps that make `/tmp` and `/dev/shm` private (pure), for both Linux runners'
/// stages: with overlayfs, each a private layer over the host's directory (mount
/// points for `exposed` paths under it made in its upper directory); without, a fresh
/// tmpfs with the mount points created in it.
pub fn private_tmp_steps(input: &PlanInput<'_>, exposed: &[PathBuf]) -> Vec<MountStep> {
    let mut steps = Vec::new();
    let overlay = input.host.overlay.available();
    for (t, staging) in PRIVATE_TMPFS.iter().zip(STAGING_TMP) {
        let target = PathBuf::from(t);
        if overlay {
            let mut mountpoints: Vec<PathBuf> = Vec::new();
            for p in exposed {
                for d in mountpoint_dirs(p) {
                    if let Ok(rel) = d.strip_prefix(&target) {
                        if !mountpoints.iter().any(|m| m == rel) {
                            mountpoints.push(rel.to_path_buf());
                        }
                    }
                }
            }
            steps.push(MountStep::Staging { staging, size: input.tmpfs_size });
            steps.push(MountStep::Overlay {
                target,
                pinned: false,
                above: Vec::new(),
                upper: LayerUpper::Staged { staging },
                mountpoints,
                mountpoint_files: Vec::new(),
            });
        } else {
            steps.push(MountStep::Tmpfs { target, size: input.tmpfs_size });
        }
    }
    if !overlay {
        let mut dirs: Vec<PathBuf> = Vec::new();
        for p in exposed {
            for d in mountpoint_dirs(p) {
                if !dirs.contains(&d) {
                    dirs.push(d);
                }
            }
        }
        steps.extend(dirs.into_iter().map(|path| MountStep::Mkdir { path }));
    }
    steps
}

/// The step that hides cordon's state directory ([`PlanInput::state_dir`]: other runs'
/// spill files, the held-writes storage of runs in flight) from a confined run with a
/// mount layer (pure), for both Linux runners' stages, after the exposed paths are
/// attached and before the tree goes read-only: an empty tmpfs over it
/// ([`MountStep::Hide`]). None where nothing shows it (under `/tmp` or `/dev/shm`
/// without overlayfs: their fresh tmpfs hides it), and none where it overlaps a path
/// the run must see as the host has it (a workspace or writable root holding it, which
/// then shows it read-only as a protected path; a protected path, the working
/// directory, an allowed socket, or a private layer, whose overlay would show it again).
pub fn hide_steps(input: &PlanInput<'_>) -> Vec<MountStep> {
    let policy = input.policy;
    let Some(state) = input.state_dir.as_ref().filter(|_| policy.mode.is_confined()) else { return Vec::new() };
    if PRIVATE_TMPFS.iter().any(|t| state.starts_with(t)) && !input.host.overlay.available() {
        return Vec::new();
    }
    let overlaps = |p: &Path| p.starts_with(state) || state.starts_with(p);
    let layers = private_dirs(input).into_iter().map(|d| d.path);
    let seen = std::iter::once(policy.workspace.clone())
        .chain(policy.writable_roots.iter().cloned())
        .chain(policy.protected.iter().cloned())
        .chain(policy.allow_unix_sockets.iter().cloned())
        .chain(std::iter::once(input.cwd.clone()))
        .chain(layers);
    if !state.is_absolute() || seen.into_iter().any(|p| overlaps(&p)) {
        return Vec::new();
    }
    vec![MountStep::Hide { target: state.clone() }]
}
