//! The `seatbelt` runner (macOS): `/usr/bin/sandbox-exec` with a generated profile.
//! Planning lives in [`super::plan`] (pure, golden-tested on every OS); this module
//! is the runner seam: it turns the planner's argv into a [`LaunchPlan`] whose program
//! is [`SandboxExec::binary`], and reports the enforcement Seatbelt reaches. The
//! executor launches the plan directly (`exec::direct`: own process group, exact
//! environment, the run's stdio, deadline and kill as for every run).
//!
//! # The `SandboxExec` seam
//!
//! The binary launched is `/usr/bin/sandbox-exec`, by absolute path, in every build
//! that ships. Only this crate's own unit tests (`cfg(test)`) can point it at a fake
//! (`tests/fake-sandbox-exec/sandbox-exec`, which records what it was given and runs
//! the command), so that the whole launch path runs end to end on Linux. The override
//! is a thread-local that exists only under `cfg(test)`: no environment variable,
//! feature or argument of any build can reach it (docs/seatbelt.md argues the choice).
//!
//! What it does not do: collect denial evidence. Seatbelt reports each denial to the
//! unified log (`Sandbox: <process>(<pid>) deny(1) <operation> <path>`); reading those
//! for this run's pids is designed in docs/seatbelt.md ("Denials") and not built, so
//! `sandbox.denied` stays false on this runner.

use super::plan::{plan_seatbelt, SeatbeltInput, SANDBOX_EXEC_PATH};
use crate::host::HostFacts;
use crate::policy::ExecutionPolicy;
use crate::result::Enforcement;
use crate::runner::error::PlanError;
use crate::runner::plan::{enforcement_from_gaps, LaunchPlan, NamespacePlan, PlanInput, Runner, SeedBy};
use crate::vocab::{ProbeStatus, Restriction, RunnerKind};
use std::path::PathBuf;

/// `sandbox-exec`, always by absolute path.
pub const SANDBOX_EXEC: &str = SANDBOX_EXEC_PATH;

/// The seam between the runner and the `sandbox-exec` binary it launches (see the
/// module docs).
#[derive(Debug, Clone, Copy)]
pub struct SandboxExec;

impl SandboxExec {
    /// The binary to launch: [`SANDBOX_EXEC`], except under a unit test's fake.
    pub fn binary() -> PathBuf {
        #[cfg(test)]
        if let Some(fake) = test_fake::current() {
            return fake;
        }
        PathBuf::from(SANDBOX_EXEC)
    }

    /// Whether a unit test's fake stands in for `sandbox-exec` (always false outside
    /// this crate's unit tests).
    pub fn faked() -> bool {
        #[cfg(test)]
        return test_fake::current().is_some();
        #[cfg(not(test))]
        false
    }
}

/// The test-only override of [`SandboxExec::binary`]: per thread, so concurrent unit
/// tests do not see each other's fake (`#[tokio::test]` runs on the test's thread).
#[cfg(test)]
pub(crate) mod test_fake {
    use std::cell::RefCell;
    use std::path::{Path, PathBuf};

    thread_local! {
        static FAKE: RefCell<Option<PathBuf>> = const { RefCell::new(None) };
    }

    /// The fake in use on this thread.
    pub(crate) fn current() -> Option<PathBuf> {
        FAKE.with(|f| f.borrow().clone())
    }

    /// Use `fake` as `sandbox-exec` on this thread until the guard is dropped.
    pub(crate) fn install(fake: &Path) -> Guard {
        FAKE.with(|f| *f.borrow_mut() = Some(fake.to_path_buf()));
        Guard
    }

    /// Removes the fake when dropped.
    pub(crate) struct Guard;

    impl Drop for Guard {
        fn drop(&mut self) {
            FAKE.with(|f| *f.borrow_mut() = None);
        }
    }
}

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
            Restriction::FdIsolation => Some(
                "the direct launch does not close descriptors that cordon itself inherited without close-on-exec \
                 (sandbox-exec passes them on; cordon's own are close-on-exec)",
            ),
            _ => None,
        };
        if let Some(reason) = reason {
            gaps.push((r, reason.to_string()));
        }
    }
    // The evidence behind `sandbox.denials` on Linux (the seccomp supervisor) has no
    // macOS counterpart yet: Seatbelt's own violation reports are not read.
    if policy.mode.is_confined() {
        gaps.push((
            Restriction::DenialAudit,
            "cordon does not read Seatbelt's violation reports yet: refusals are enforced but not reported".to_string(),
        ));
    }
    gaps
}

impl Runner for SeatbeltRunner {
    fn kind(&self) -> RunnerKind {
        RunnerKind::Seatbelt
    }

    fn probe(&self, host: &HostFacts) -> ProbeStatus {
        if SandboxExec::faked() {
            return ProbeStatus::Available;
        }
        if host.os != "macos" {
            return ProbeStatus::Unsupported(format!("Seatbelt is macOS-only (this is {})", host.os));
        }
        // Root-owned and writable by nobody else: a replaced sandbox-exec could run
        // the command unconfined.
        if !crate::host::trusted_file(std::path::Path::new(SANDBOX_EXEC), host.euid) {
            return ProbeStatus::Unavailable(format!("{SANDBOX_EXEC} is missing or not a trusted, root-owned file"));
        }
        ProbeStatus::Available
    }

    fn enforcement(&self, policy: &ExecutionPolicy, _host: &HostFacts) -> Enforcement {
        enforcement_from_gaps(seatbelt_gaps(policy))
    }

    fn plan_with(&self, input: &PlanInput<'_>, enforcement: Enforcement) -> Result<LaunchPlan, PlanError> {
        let policy = input.policy;
        let tmpdir = input.run_tmp();
        // Seatbelt denies by path, existing or not: a sentinel (a path host git would
        // read that does not exist yet) is denied like a protected path, so the
        // command cannot create it (the check when the run ends stays as well).
        let mut protected = policy.protected.clone();
        protected.extend(policy.git.sentinels.iter().map(|s| s.path.clone()));
        protected.sort();
        protected.dedup();
        let seatbelt = plan_seatbelt(&SeatbeltInput {
            mode: policy.mode,
            workspace: &policy.workspace,
            writable_roots: &policy.writable_roots,
            protected: &protected,
            tmpdir: &tmpdir,
            network: policy.network,
            program: input.program.as_os_str(),
            args: input.argv.get(1..).unwrap_or(&[]),
        })?;
        let mut env: Vec<(String, String)> =
            seatbelt.env.into_iter().map(|(k, v)| (k, v.to_string_lossy().into_owned())).collect();
        // The private TMPDIR is a host directory the executor creates: it writes the seed.
        let (git_env, seed_files) = input.git_config_in(&tmpdir, SeedBy::Executor);
        env.extend(git_env);
        Ok(LaunchPlan {
            runner: RunnerKind::Seatbelt,
            program: SandboxExec::binary(),
            argv: seatbelt.argv,
            env,
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
            seed_files,
            hidden: Vec::new(),
            // Seatbelt has no network namespace: with the network off the profile
            // allows no socket operation (`profiles/seatbelt/base.sb`).
            local_ipc: input.policy.network_restricted().then(|| crate::vocab::LocalIpc::Refused {
                reason: "the macOS sandbox has no network namespace of the run's own".into(),
            }),
            enforcement,
        })
    }
}
