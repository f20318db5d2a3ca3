//! The `seatbelt` runner (macOS): `/usr/bin/sandbox-exec` with a generated profile.
//! Planning lives in [`super::plan`] (pure, golden-tested on every OS); this module
//! is the runner seam: it turns the planner's argv into a [`LaunchPlan`] and reports
//! the enforcement Seatbelt reaches.
//!
//! What it does not do yet: launch. cordon's process stage (`runners/linux/`) uses Linux
//! system calls, so on macOS `probe()` reports the runner unavailable and confined
//! modes fail closed with `SANDBOX_UNAVAILABLE` (docs/seatbelt.md).

use super::plan::{plan_seatbelt, SeatbeltInput, SANDBOX_EXEC_PATH};
use crate::host::HostFacts;
use crate::policy::ExecutionPolicy;
use crate::result::Enforcement;
use crate::runner::error::PlanError;
use crate::runner::plan::{enforcement_from_gaps, LaunchPlan, NamespacePlan, PlanInput, Runner};
use crate::vocab::{ProbeStatus, Restriction, RunnerKind};
use std::path::PathBuf;

/// `sandbox-exec`, always by absolute path.
pub const SANDBOX_EXEC: &str = SANDBOX_EXEC_PATH;

/// The `seatbelt` runner.
#[derive(Debug, Clone, Copy, Default)]
pub struct SeatbeltRunner;

/// Restrictions Seatbelt cannot enforce (see docs/seatbelt.md for each).
pub fn seatbelt_gaps(policy: &ExecutionPolicy) -> Vec<(Restriction, String)> {
    let mut gaps = Vec::new();
    for r in Restriction::requested_by(policy) {
        let reason = match r {
            Restriction::ProcessLifetime => {
                Some("Seatbelt has no pid namespace: a process that calls setsid can outlive the run")
            }
            Restriction::Ipc => Some("Seatbelt profiles here do not isolate SysV IPC"),
            Restriction::PrivateTmp => Some("macOS has no mount namespace: /tmp is not replaced, only not writable"),
            _ => None,
        };
        if let Some(reason) = reason {
            gaps.push((r, reason.to_string()));
        }
    }
    gaps
}

impl Runner for SeatbeltRunner {
    fn kind(&self) -> RunnerKind {
        RunnerKind::Seatbelt
    }

    fn probe(&self, host: &HostFacts) -> ProbeStatus {
        if host.os != "macos" {
            return ProbeStatus::Unsupported(format!("Seatbelt is macOS-only (this is {})", host.os));
        }
        ProbeStatus::Unavailable(
            "cordon's process stage is Linux-only in this version; the seatbelt planner exists but cannot launch yet"
                .into(),
        )
    }

    fn enforcement(&self, policy: &ExecutionPolicy, _host: &HostFacts) -> Enforcement {
        enforcement_from_gaps(seatbelt_gaps(policy))
    }

    fn plan_with(&self, input: &PlanInput<'_>, enforcement: Enforcement) -> Result<LaunchPlan, PlanError> {
        let policy = input.policy;
        let tmpdir = input.run_tmp();
        let seatbelt = plan_seatbelt(&SeatbeltInput {
            mode: policy.mode,
            workspace: &policy.workspace,
            writable_roots: &policy.writable_roots,
            protected: &policy.protected,
            tmpdir: &tmpdir,
            network: policy.network,
            program: input.program.as_os_str(),
            args: input.argv.get(1..).unwrap_or(&[]),
        })?;
        Ok(LaunchPlan {
            runner: RunnerKind::Seatbelt,
            program: PathBuf::from(SANDBOX_EXEC),
            argv: seatbelt.argv,
            env: seatbelt.env.into_iter().map(|(k, v)| (k, v.to_string_lossy().into_owned())).collect(),
            cwd: input.cwd.clone(),
            namespaces: NamespacePlan::default(),
            mounts: Vec::new(),
            landlock: None,
            seccomp: None,
            path_fds: Vec::new(),
            stage_helper: None,
            env_fd: None,
            drop_capabilities: false,
            no_new_privs: false,
            new_session: input.new_session,
            needs_run_dir: true,
            enforcement,
        })
    }
}
