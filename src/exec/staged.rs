//! The staged launch (Linux): the plan materialized and spawned by `cordon_stage`
//! beside the runtime (`spawn_beside`), with the seccomp supervisor's listener and
//! the status pipes; and how a spawn failure becomes a `CordonError`.

use super::finish::ExitWatch;
use super::launch::{DenialSink, Started};
use super::supervision::write_rules;
use super::*;

/// What the stage's launch (Linux) needs from `Executor::launch`.
#[cfg(target_os = "linux")]
pub(super) struct Staged<'a> {
    pub(super) spec: &'a Spec,
    /// The run's policy (the spec's, with cordon's state directory protected when a
    /// writable root holds it).
    pub(super) policy: &'a crate::policy::ExecutionPolicy,
    /// The run's egress proxy address (`--allow-host`), for the supervisor.
    pub(super) proxy: Option<std::net::SocketAddr>,
    pub(super) plan: &'a crate::runner::LaunchPlan,
    pub(super) env: &'a [(OsString, OsString)],
    pub(super) stdio: [std::os::fd::RawFd; 3],
    pub(super) terminals: Vec<u64>,
    pub(super) pins: &'a crate::pin::Pins,
    pub(super) limits: &'a crate::limits::RunLimits,
    pub(super) runner: RunnerKind,
    pub(super) allowed_sockets: Vec<crate::denials::AllowedSocket>,
    pub(super) denials: &'a DenialSink,
}

#[cfg(target_os = "linux")]
impl Executor {
    /// Launch through the child-side stage (`cordon_stage::spawn`): the `landlock`,
    /// `bwrap` and `passthrough` runners on Linux.
    pub(super) async fn start_staged(&self, s: Staged<'_>) -> Result<Started, CordonError> {
        let Staged { spec, policy, proxy, plan, env, stdio, terminals, pins, limits, runner, allowed_sockets, denials } =
            s;
        // The landlock runner's stage (and the bwrap runner's stage helper) hands its
        // seccomp listener to a supervisor in this process, which records refused
        // network and process syscalls as evidence.
        let notify_pair = if plan.seccomp.is_some_and(|s| s.supervise) {
            Some(
                cordon_stage::notify::socketpair()
                    .map_err(|e| CordonError::io("creating the notification socket", e))?,
            )
        } else {
            None
        };
        let materialized = stage::materialize(
            plan,
            env,
            stdio,
            &self.host,
            notify_pair.as_ref().map(|(_, child)| child.as_raw_fd()),
            pins,
            spec.observe_writes,
        )
        .map_err(|e| CordonError::runner_failed(runner, e))?;
        let supervised_stage = materialized.stage.notify_socket.is_some();
        let observed = materialized.observed;
        let passed_fds = materialized.keep;
        let helper_status = materialized.helper_status;
        let helper_notify = materialized.helper_notify;
        let mut stage_plan = materialized.stage;
        stage_plan.limits = limits.child();
        crate::phases::mark("stage_plan");

        // Spawning blocks for the child's stage (about a millisecond). Alone, it is done
        // inline (no thread hop); with other runs in flight, on the spawner thread while
        // this runtime serves them.
        let others_running = !self.registry.running.lock().unwrap_or_else(|p| p.into_inner()).is_empty();
        let spawned = if others_running {
            spawn_beside(stage_plan, !plan.namespaces.pid).await
        } else {
            cordon_stage::spawn(stage_plan)
        };
        drop(passed_fds);
        let mut helper_socket = None;
        let listener = match notify_pair {
            Some((parent_end, child_end)) if supervised_stage && spawned.is_ok() => {
                drop(child_end);
                Some(cordon_stage::notify::recv_fds(parent_end.as_fd()))
            }
            // The helper sends its listener only once bubblewrap has built the
            // sandbox: received by the supervisor task.
            Some((parent_end, child_end)) if helper_notify && spawned.is_ok() => {
                drop(child_end);
                helper_socket = Some(parent_end);
                None
            }
            _ => None,
        };
        let spawned = spawned.map_err(|e| spawn_error(e, runner, &spec.argv[0]))?;
        let pid = spawned.pid;
        // Without a pid namespace the stage's init is a supervising subreaper.
        let supervised = !plan.namespaces.pid;
        // `AsyncFd::new` is deprecated because a bare `RawFd` could be closed under it;
        // an `OwnedFd` that the `AsyncFd` owns cannot, and `register` needs `unsafe`.
        #[allow(deprecated)]
        let pidfd = match AsyncFd::new(spawned.pidfd) {
            Ok(fd) => fd,
            Err(e) => {
                end_runs_now(&[(pid, supervised)]);
                return Err(CordonError::io("watching the child", e));
            }
        };
        let allowed_sockets: Arc<[crate::denials::AllowedSocket]> = allowed_sockets.into();
        let write_rules = spec.observe_writes.then(|| {
            let mut rules = write_rules(plan, policy);
            rules.terminals = terminals;
            rules
        });
        let supervision = crate::denials::Supervision {
            observed,
            sink: denials.clone(),
            allowed: allowed_sockets,
            writes: write_rules.map(crate::writes::WriteJudge::new),
            proxy,
        };
        let source = match listener {
            Some(Ok(mut fds)) => {
                // The listener first, then the diagnostics socket when the plan asked.
                let diag = (fds.len() > 1).then(|| fds.pop()).flatten();
                Some(crate::denials::ListenerSource::Listener(fds.swap_remove(0), diag))
            }
            Some(Err(e)) => {
                // The child installed a notifying filter: without a supervisor its
                // observed syscalls would fail with ENOSYS. Stop it; nothing useful ran.
                end_runs_now(&[(pid, supervised)]);
                return Err(CordonError::runner_failed(runner, crate::runner::RunnerFailure::SeccompListener(e)));
            }
            None => helper_socket.map(crate::denials::ListenerSource::Socket),
        };
        Ok(Started {
            pid,
            supervised,
            exit_watch: ExitWatch::Pidfd(pidfd),
            exit_status: spawned.exit_status,
            helper_status,
            supervision: source.map(|src| (src, supervision)),
        })
    }
}

/// Spawn on the stage's spawner thread and wait without blocking the runtime. If this
/// future is dropped before it has taken the spawned run, that run is ended (nothing
/// else would know of it). `supervised`: the run has no pid namespace (its init is a
/// supervising subreaper).
///
/// The plan names the caller's descriptors by number (stdio, passed fds, the
/// notification socket, cgroup attach files), and they must stay open until the
/// spawner is done with it: were they closed early, another run's new descriptors
/// could take those numbers. So a drop of this future before then waits for the
/// spawner (about a millisecond); being the innermost awaited future, it is dropped
/// before the caller's locals that own those descriptors.
#[cfg(target_os = "linux")]
async fn spawn_beside(plan: cordon_stage::StagePlan, supervised: bool) -> Result<cordon_stage::Spawned, SpawnError> {
    // Declared before the channel, so dropped after it: a dropped future closes the
    // channel first (a run in it, or one the reply can no longer deliver, is ended by
    // `Undelivered`'s drop), then waits for the spawner.
    let (finished, spawn_over) = std::sync::mpsc::channel::<()>();
    let _wait_on_drop = WaitForSpawn(spawn_over);
    let (tx, rx) = tokio::sync::oneshot::channel();
    cordon_stage::spawn_queued(
        plan,
        Box::new(move |outcome| {
            // Dropped when this reply ends (or is dropped unrun): the spawn is over,
            // and an orphan ended.
            let _finished = finished;
            let _ = tx.send(outcome.map(|s| Undelivered { spawned: Some(s), supervised }));
        }),
    )?;
    match rx.await {
        Ok(outcome) => outcome.and_then(|mut u| {
            u.spawned.take().ok_or_else(|| SpawnError::Parent {
                what: "taking the spawned run",
                source: std::io::Error::other("delivered twice"),
            })
        }),
        Err(_) => Err(SpawnError::Parent {
            what: "waiting for the spawner thread",
            source: std::io::Error::other("spawner thread is gone"),
        }),
    }
}

/// A spawned run on its way to the future that awaits it (see [`spawn_beside`]): if
/// it is dropped undelivered (that future was dropped first), the run is ended, since
/// nothing else knows of it.
#[cfg(target_os = "linux")]
struct Undelivered {
    spawned: Option<cordon_stage::Spawned>,
    supervised: bool,
}

#[cfg(target_os = "linux")]
impl Drop for Undelivered {
    fn drop(&mut self) {
        if let Some(orphan) = self.spawned.take() {
            end_runs_now(&[(orphan.pid, self.supervised)]);
        }
    }
}

/// Held by the awaiting future: its drop waits until the spawner's reply is over (the
/// reply holds the only sender and never sends: `recv` returns once it is dropped).
#[cfg(target_os = "linux")]
struct WaitForSpawn(std::sync::mpsc::Receiver<()>);

#[cfg(target_os = "linux")]
impl Drop for WaitForSpawn {
    fn drop(&mut self) {
        let _ = self.0.recv();
    }
}

#[cfg(target_os = "linux")]
pub(super) fn spawn_error(e: SpawnError, runner: RunnerKind, argv0: &OsStr) -> CordonError {
    let program = argv0.to_string_lossy().into_owned();
    match e {
        SpawnError::Stage(f) if f.step == Step::Exec && f.errno == libc::ENOENT => {
            CordonError::ProgramNotFound { program }
        }
        SpawnError::Stage(f) if f.step == Step::Exec && f.errno == libc::E2BIG => {
            CordonError::ArgumentListTooLong { program }
        }
        SpawnError::Stage(f)
            if f.step == Step::Exec && matches!(f.errno, libc::EACCES | libc::ENOEXEC | libc::EPERM) =>
        {
            CordonError::ProgramNotExecutable { program, source: std::io::Error::from_raw_os_error(f.errno) }
        }
        SpawnError::Stage(f) => {
            // Namespaces or mounts the host facts promised failed: the cached canary
            // answer is stale (the container's settings changed), so the next cordon
            // process asks the kernel again. This run still fails closed.
            if matches!(f.step, Step::Clone | Step::IdMaps | Step::Mount) {
                crate::host::forget_canary(cordon_stage::host::euid());
            }
            CordonError::runner_failed(runner, crate::runner::RunnerFailure::Stage(f))
        }
        SpawnError::Parent { what, source } => CordonError::io(what, source),
    }
}
