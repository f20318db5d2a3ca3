//! The Landlock ruleset of a plan, built on open files (pinned ones where the policy
//! pinned them) and returned as the fd the child restricts itself with.

use super::*;

/// Everything beneath a writable root except creating device nodes.
pub(crate) fn write_access(abi: u32) -> landlock::BitFlags<AccessFs> {
    AccessFs::from_all(ABI::from(abi as i32)) & !(AccessFs::MakeChar | AccessFs::MakeBlock)
}

/// Open a rule's directory: the pinned fd when the policy pinned it, else opened
/// without following a symlink in any component (`/`, per-run directories).
fn rule_fd(p: &Path, pins: &Pins) -> Result<OwnedFd, MaterializeError> {
    let fd = match pins.fd(p) {
        Some(fd) => fd.try_clone_to_owned(),
        None => open_no_symlinks(p),
    };
    fd.map_err(|source| MaterializeError::LandlockRule { path: p.to_path_buf(), source })
}

/// Build the Landlock ruleset for `plan`; returns the ruleset fd. Rules are built on
/// open files (pinned ones where the policy pinned them), never on a path that a
/// concurrent command could have swapped for a symlink.
pub fn build_ruleset(plan: &LandlockPlan, extra_devices: &[PathBuf], pins: &Pins) -> Result<OwnedFd, MaterializeError> {
    let err = MaterializeError::Landlock;
    let abi = ABI::from(plan.abi as i32);
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    ruleset = ruleset.handle_access(AccessFs::from_all(abi)).map_err(err)?;
    if plan.deny_tcp {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi)).map_err(err)?;
    }
    if plan.scope_abstract_unix {
        ruleset = ruleset.scope(Scope::AbstractUnixSocket).map_err(err)?;
    }
    if plan.scope_signals {
        ruleset = ruleset.scope(Scope::Signal).map_err(err)?;
    }
    let mut created = ruleset.create().map_err(err)?;
    let read = AccessFs::from_read(abi);
    for p in &plan.read {
        created = created.add_rule(PathBeneath::new(rule_fd(p, pins)?, read)).map_err(err)?;
    }
    let write = write_access(plan.abi);
    for p in &plan.write {
        created = created.add_rule(PathBeneath::new(rule_fd(p, pins)?, write)).map_err(err)?;
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
            created = created.add_rule(PathBeneath::new(fd, device)).map_err(err)?;
        }
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or(MaterializeError::NoRuleset)
}
