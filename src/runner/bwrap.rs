//! The `bwrap` runner (Linux fallback): bubblewrap with cordon's seccomp filter.
//!
//! Not implemented yet: it reports itself unavailable so selection fails closed
//! instead of running anything under a half-built runner.

use super::{LaunchPlan, PlanError, PlanInput, ProbeStatus, Runner, RunnerKind};
use crate::host::HostFacts;
use crate::policy::ExecutionPolicy;
use crate::result::Enforcement;

/// The `bwrap` runner.
#[derive(Debug, Clone, Copy, Default)]
pub struct BwrapRunner;

impl Runner for BwrapRunner {
    fn kind(&self) -> RunnerKind {
        RunnerKind::Bwrap
    }

    fn probe(&self, host: &HostFacts) -> ProbeStatus {
        if host.os != "linux" {
            return ProbeStatus::Unsupported(format!("bubblewrap is Linux-only (this is {})", host.os));
        }
        ProbeStatus::Unavailable("the bwrap runner is not implemented in this version of cordon".into())
    }

    fn enforcement(&self, _policy: &ExecutionPolicy, _host: &HostFacts) -> Enforcement {
        Enforcement::none()
    }

    fn plan(&self, _input: &PlanInput<'_>) -> Result<LaunchPlan, PlanError> {
        Err(PlanError::Unavailable("the bwrap runner is not implemented".into()))
    }
}
