//! Runners: one module per confinement backend behind the small [`Runner`] trait, and
//! [`select`], which picks one and fails closed.
//!
//! A runner can [`Runner::probe`] the host (is it usable at all?), report the
//! [`Enforcement`] it would reach for a policy (which [`Restriction`]s it can enforce
//! here and which are gaps), and plan a launch ([`Runner::plan_with`]): a pure value
//! describing argv, environment, namespaces, mounts, Landlock rules and cordon's
//! seccomp program ([`SeccompPlan`]). [`select`] probes and rates the runners once and
//! returns a [`Selection`], which plans itself ([`Selection::plan`]) with what it
//! found; the executor materializes (`stage::materialize`) and spawns the plan.
//! Errors: [`error`] ([`PlanError`], [`RunnerFailure`]).
//!
//! Selection rules: `full-access` uses `passthrough`. A confined mode uses the first
//! runner (strongest first) that is available and fully enforces the policy; failing
//! that, the first whose every gap the caller accepts (`accept_gaps`, e.g. the
//! container profile); with `best_effort`, failing that, the available runner with the
//! fewest gaps. Otherwise `SANDBOX_UNAVAILABLE`, with one reason per runner tried. An explicitly requested
//! runner that cannot work fails closed; there is no silent fallback.

#[cfg(target_os = "linux")]
pub mod bwrap;
pub mod error;
#[cfg(target_os = "linux")]
pub(crate) mod landlock;
#[cfg(not(target_os = "linux"))]
mod linux_only;
pub(crate) mod passthrough;
pub mod plan;
pub mod seatbelt;
#[cfg(target_os = "linux")]
pub mod seccomp;
/// The seccomp programs build.rs compiled for this target (empty for a cross build).
#[cfg(target_os = "linux")]
mod seccomp_precompiled {
    use super::seccomp::{NetFilter, ObservedKind, PrecompiledProgram};
    pub(crate) static TABLE: &[PrecompiledProgram] = include!(concat!(env!("OUT_DIR"), "/seccomp_precompiled.rs"));
}
#[cfg(target_os = "linux")]
pub(crate) mod stage;

use crate::error::{CordonError, RunnerReason};
use crate::host::HostFacts;
use crate::mode::Mode;
use crate::policy::ExecutionPolicy;
use crate::result::SkippedRunner;
use crate::vocab::{Enforcement, EnforcementLevel};

pub use crate::vocab::{ProbeStatus, Restriction, RunnerChoice, RunnerKind};
pub use error::{PlanError, RunnerFailure};
pub use plan::{
    clone_and_attach, enforcement_from_gaps, held_dirs, EnvFd, EnvFdFormat, HeldInput, Keep, LandlockPlan, LaunchPlan,
    LayerUpper, MountStep, NamespacePlan, PlanInput, PrivateDir, Runner, SeccompDelivery, SeccompPlan, SeedBy,
    SeedFile, StageHelperPlan, GIT_CONFIG_FILE,
};

/// The runner implementation for a kind.
pub fn runner_for(kind: RunnerKind) -> &'static dyn Runner {
    match kind {
        #[cfg(target_os = "linux")]
        RunnerKind::Landlock => &landlock::LandlockRunner,
        #[cfg(target_os = "linux")]
        RunnerKind::Bwrap => &bwrap::BwrapRunner,
        #[cfg(not(target_os = "linux"))]
        RunnerKind::Landlock => &linux_only::LINUX_ONLY_LANDLOCK,
        #[cfg(not(target_os = "linux"))]
        RunnerKind::Bwrap => &linux_only::LINUX_ONLY_BWRAP,
        RunnerKind::Seatbelt => &seatbelt::SeatbeltRunner,
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
    let mut accepted: Option<(RunnerKind, Enforcement)> = None;
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
        if accepted.is_none() && enforcement.gaps.iter().all(|g| policy.accept_gaps.contains(&g.restriction)) {
            accepted = Some((kind, enforcement.clone()));
        }
        if partial.as_ref().is_none_or(|(_, best)| enforcement.gaps.len() < best.gaps.len()) {
            partial = Some((kind, enforcement));
        }
    }
    // Every gap accepted by name: the run's result lists them, as with best effort.
    if let Some((runner, enforcement)) = accepted {
        let skipped = to_skipped(&reasons).into_iter().filter(|s| s.runner != runner).collect();
        return Ok(Selection { runner, enforcement, skipped });
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
