//! The `seatbelt` runner (macOS): `/usr/bin/sandbox-exec` with a generated profile.
//! Planning lives in [`super::seatbelt`] (pure, tested on every OS); this module is
//! the runner seam.

use super::{LaunchPlan, PlanError, PlanInput, ProbeStatus, Runner, RunnerKind};
use crate::host::HostFacts;
use crate::policy::ExecutionPolicy;
use crate::result::Enforcement;

/// `sandbox-exec`, always by absolute path.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// The `seatbelt` runner.
#[derive(Debug, Clone, Copy, Default)]
pub struct SeatbeltRunner;

impl Runner for SeatbeltRunner {
    fn kind(&self) -> RunnerKind {
        RunnerKind::Seatbelt
    }

    fn probe(&self, host: &HostFacts) -> ProbeStatus {
        if host.os != "macos" {
            return ProbeStatus::Unsupported(format!("Seatbelt is macOS-only (this is {})", host.os));
        }
        ProbeStatus::Unavailable("the seatbelt runner's executor integration is not implemented yet".into())
    }

    fn enforcement(&self, _policy: &ExecutionPolicy, _host: &HostFacts) -> Enforcement {
        Enforcement::none()
    }

    fn plan(&self, _input: &PlanInput<'_>) -> Result<LaunchPlan, PlanError> {
        Err(PlanError::Unavailable("the seatbelt runner is only planned, not launched, in this version".into()))
    }
}
