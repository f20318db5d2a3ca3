//! The Linux runners (`landlock`, `bwrap`) on an OS that is not Linux: they still
//! exist, and say `Unsupported` (STYLE rule 4). Their planners, the seccomp compiler
//! and the child-side stage (`runners/linux/`) are compiled on Linux only, because
//! they name Linux system calls and constants.
//!
//! What it does not do: plan anything (`plan_with` fails with the probe's reason).

use super::error::PlanError;
use super::plan::{LaunchPlan, PlanInput, Runner};
use crate::host::HostFacts;
use crate::policy::ExecutionPolicy;
use crate::result::Enforcement;
use crate::vocab::{ProbeStatus, RunnerKind};

/// A Linux runner on another OS.
#[derive(Debug, Clone, Copy)]
pub struct LinuxOnlyRunner(RunnerKind);

/// `landlock` off Linux.
pub static LINUX_ONLY_LANDLOCK: LinuxOnlyRunner = LinuxOnlyRunner(RunnerKind::Landlock);
/// `bwrap` off Linux.
pub static LINUX_ONLY_BWRAP: LinuxOnlyRunner = LinuxOnlyRunner(RunnerKind::Bwrap);

impl LinuxOnlyRunner {
    fn reason(&self, host: &HostFacts) -> String {
        format!("the {} runner is Linux-only (this is {})", self.0, host.os)
    }
}

impl Runner for LinuxOnlyRunner {
    fn kind(&self) -> RunnerKind {
        self.0
    }

    fn probe(&self, host: &HostFacts) -> ProbeStatus {
        ProbeStatus::Unsupported(self.reason(host))
    }

    fn enforcement(&self, _policy: &ExecutionPolicy, _host: &HostFacts) -> Enforcement {
        Enforcement::none()
    }

    fn plan_with(&self, input: &PlanInput<'_>, _enforcement: Enforcement) -> Result<LaunchPlan, PlanError> {
        Err(PlanError::Unavailable(self.reason(input.host)))
    }
}
