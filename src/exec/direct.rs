//! The direct launch: the `seatbelt` runner's path (on every OS, so that Linux tests
//! exercise it end to end), and every runner's path off Linux, where the child-side
//! stage (`runners/linux/`) does not exist.
//!
//! The plan's program is spawned as is ([`std::process::Command`]): the plan's argv
//! (its `argv[0]` too), exactly the environment given (nothing inherited), the plan's
//! working directory, the run's stdio and nothing else (every other descriptor cordon
//! holds is close-on-exec), in its own process group unless the run shares the
//! terminal. A deadline, an abort or a dropped run then signal that group and reap the
//! leader, as for staged runs (`super::finish`); the exit is polled every
//! [`POLL_EXIT`] (`waitpid(WNOHANG)`), since macOS has no pidfd.
//!
//! What it does not do, each a named gap where it matters: it has no supervising init
//! (a process that leaves the group outlives the run: the runner's `process-lifetime`
//! gap), no seccomp supervisor (no denial evidence: `sandbox.denied` stays false, see
//! docs/seatbelt.md), and no child-side code, so no cgroup or rlimit
//! ([`NO_LIMITS`], reported by `RunLimits::unapplied`).

use super::finish::ExitWatch;
use super::launch::Started;
use crate::error::CordonError;
use crate::runner::{LaunchPlan, RunnerFailure, RunnerKind};
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::Duration;

/// How often a direct launch's leader is polled for its exit. Short next to any
/// command's run time; a missed exit costs at most this much latency.
pub(super) const POLL_EXIT: Duration = Duration::from_millis(5);

/// Why the direct launch has no denial supervisor (a gap's and a refusal's reason).
pub(super) const NO_SUPERVISOR: &str = "the direct launch (seatbelt) has no seccomp supervisor";

/// The limit gaps of the direct launch.
pub(super) const NO_LIMITS: &str =
    "the direct launch (seatbelt) applies no resource limit: no cgroups and no child-side rlimits on this path";

/// Whether runs of `runner` take the direct launch.
pub(super) fn is_direct(runner: RunnerKind) -> bool {
    runner == RunnerKind::Seatbelt || !cfg!(target_os = "linux")
}

/// Spawn the plan's program (see the module docs). `stdio` is borrowed: the child
/// gets copies, and the caller closes its own after this returns.
pub(super) fn start(
    plan: &LaunchPlan,
    env: &[(OsString, OsString)],
    stdio: [&OwnedFd; 3],
) -> Result<Started, RunnerFailure> {
    let failed = |source| RunnerFailure::Spawn { program: plan.program.clone(), source };
    let copy = |fd: &OwnedFd| fd.try_clone().map(Stdio::from).map_err(failed);
    let mut cmd = std::process::Command::new(&plan.program);
    if let Some((argv0, args)) = plan.argv.split_first() {
        cmd.arg0(argv0).args(args);
    }
    cmd.env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(&plan.cwd)
        .stdin(copy(stdio[0])?)
        .stdout(copy(stdio[1])?)
        .stderr(copy(stdio[2])?);
    if plan.new_session {
        // Its own process group, so that the whole group can be signalled. An
        // interactive run stays in cordon's group, which owns the terminal.
        cmd.process_group(0);
    }
    let child = cmd.spawn().map_err(failed)?;
    let pid = i32::try_from(child.id()).map_err(|_| failed(std::io::Error::from_raw_os_error(libc::ERANGE)))?;
    // Dropping a `Child` neither kills nor reaps it: the executor reaps it by pid.
    drop(child);
    Ok(Started {
        pid,
        supervised: false,
        exit_watch: ExitWatch::Poll,
        exit_status: None,
        #[cfg(target_os = "linux")]
        helper_status: None,
        #[cfg(target_os = "linux")]
        supervision: None,
    })
}

/// The error of a direct launch that did not start; nothing ran. Under `seatbelt` the
/// program is `sandbox-exec`, so any failure is the runner's; otherwise (passthrough
/// off Linux) the program is the command, and its errors are the command's.
pub(super) fn spawn_error(e: RunnerFailure, runner: RunnerKind) -> CordonError {
    let RunnerFailure::Spawn { program, source } = e else { return CordonError::runner_failed(runner, e) };
    if runner == RunnerKind::Seatbelt {
        return CordonError::runner_failed(runner, RunnerFailure::Spawn { program, source });
    }
    let shown = program.display().to_string();
    match source.raw_os_error() {
        Some(libc::ENOENT) => CordonError::ProgramNotFound { program: shown },
        Some(libc::E2BIG) => CordonError::ArgumentListTooLong { program: shown },
        Some(libc::EACCES | libc::ENOEXEC | libc::EPERM) => {
            CordonError::ProgramNotExecutable { program: shown, source }
        }
        _ => CordonError::runner_failed(runner, RunnerFailure::Spawn { program, source }),
    }
}
