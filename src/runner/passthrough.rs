//! The `passthrough` runner: no confinement at all. Only `full-access` may use it
//! (selection enforces that). It still gets the executor's process hygiene: its own
//! process group, a scrubbed environment, only stdio inherited, group kill at the end.
//!
//! Like every run without a pid namespace, it runs under the stage's supervising init
//! (a child subreaper leading the run's process group): processes that leave the
//! group (`setsid`) are still its descendants and are killed when the command exits,
//! when cordon ends the run (a sweep request to the init) or when cordon dies.
//!
//! What it does not do: restrict anything.

use super::plan::{LaunchPlan, NamespacePlan, PlanInput, Runner};
use crate::host::HostFacts;
use crate::policy::ExecutionPolicy;
use crate::result::Enforcement;
use crate::vocab::{ProbeStatus, RunnerKind};

/// The `passthrough` runner.
#[derive(Debug, Clone, Copy, Default)]
pub struct PassthroughRunner;

impl Runner for PassthroughRunner {
    fn kind(&self) -> RunnerKind {
        RunnerKind::Passthrough
    }

    fn probe(&self, _host: &HostFacts) -> ProbeStatus {
        ProbeStatus::Available
    }

    fn enforcement(&self, _policy: &ExecutionPolicy, _host: &HostFacts) -> Enforcement {
        Enforcement::none()
    }

    fn plan_with(
        &self,
        input: &PlanInput<'_>,
        enforcement: Enforcement,
    ) -> Result<LaunchPlan, super::error::PlanError> {
        Ok(LaunchPlan {
            runner: RunnerKind::Passthrough,
            program: input.program.clone(),
            argv: input.argv.clone(),
            env: Vec::new(),
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
            needs_run_dir: false,
            seed_files: Vec::new(),
            hidden: Vec::new(),
            local_ipc: None,
            enforcement,
        })
    }
}
