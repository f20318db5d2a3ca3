//! Finishing one run: the wait (deadline, abort, kill sequence, sweep), the drain of
//! its output, the denials and limits concluded into the [`RunResult`].

use super::launch::Launched;
use super::*;
/// How a wait ended.
#[derive(Debug, Clone, Copy)]
pub(super) enum Exit {
    Code(i32),
    Signal(i32),
}

pub(super) fn signal_group(pid: i32, sig: Signal) {
    let _ = killpg(Pid::from_raw(pid), sig);
    let _ = kill(Pid::from_raw(pid), sig);
}

/// Deliver SIGINT to the command's process group (a caller's Ctrl-C), once, the way
/// each launch arranges the run's processes:
/// - pid 1 of a confined run's pid namespace (the stage's init) forwards it to the
///   command and its group: the init alone is signalled;
/// - a supervising init leads the run's group with the command in it, and ignores the
///   signal itself: the group is signalled (passthrough, Landlock without namespaces);
/// - under bubblewrap, bubblewrap's monitor (the child of cordon's init, which would
///   forward the signal to it) leads a session of its own and would die of the signal,
///   while bubblewrap's pid 1 (its child) leads the command's session and, as a pid
///   namespace's init, ignores it: that group alone is signalled, found through
///   `/proc`'s children lists (nothing is signalled before it exists);
/// - the direct launch: the leader's group, unless it is cordon's own (an interactive
///   run on the caller's terminal, which signalled the command itself).
pub(super) fn interrupt_run(pid: i32, runner: RunnerKind, supervised: bool) {
    let pid_t = Pid::from_raw(pid);
    if nix::unistd::getpgid(Some(pid_t)).is_ok_and(|g| g == nix::unistd::getpgrp()) {
        return;
    }
    if runner == RunnerKind::Bwrap {
        #[cfg(target_os = "linux")]
        if let Some(group) = first_child(pid).and_then(first_child).and_then(process_group) {
            let _ = killpg(Pid::from_raw(group), Signal::SIGINT);
        }
        return;
    }
    if supervised || runner == RunnerKind::Passthrough || super::direct::is_direct(runner) {
        let _ = killpg(pid_t, Signal::SIGINT);
    } else {
        let _ = kill(pid_t, Signal::SIGINT);
    }
}

/// The first child of `pid` (`/proc/<pid>/task/<pid>/children`).
#[cfg(target_os = "linux")]
fn first_child(pid: i32) -> Option<i32> {
    let list = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    list.split_whitespace().next()?.parse().ok()
}

/// The process group of `pid`, from `/proc/<pid>/stat` (after the command name:
/// state, parent, group).
#[cfg(target_os = "linux")]
fn process_group(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(2)?.parse().ok()
}

/// The command's own wait status, as reported by its init (4 bytes, native endian).
pub(super) fn init_report(exit_status: Option<&OwnedFd>) -> Option<Exit> {
    let fd = exit_status?;
    let mut buf = [0u8; 4];
    let n = nix::unistd::read(fd, &mut buf).ok()?;
    if n != 4 {
        return None;
    }
    let status = i32::from_ne_bytes(buf);
    if libc::WIFEXITED(status) {
        Some(Exit::Code(libc::WEXITSTATUS(status)))
    } else if libc::WIFSIGNALED(status) {
        Some(Exit::Signal(libc::WTERMSIG(status)))
    } else {
        None
    }
}

/// How the executor learns that a run's leader exited.
pub(super) enum ExitWatch {
    /// The leader's pidfd (the stage's spawn, Linux): readable once it exits.
    #[cfg(target_os = "linux")]
    Pidfd(AsyncFd<OwnedFd>),
    /// No exit notification (the direct launch, see `super::direct`): a
    /// `waitpid(WNOHANG)` every [`super::direct::POLL_EXIT`].
    Poll,
}

pub(super) async fn wait_exit(watch: &ExitWatch, pid: i32, exit_status: Option<&OwnedFd>) -> Exit {
    loop {
        match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => return init_report(exit_status).unwrap_or(Exit::Code(code)),
            Ok(WaitStatus::Signaled(_, sig, _)) => return init_report(exit_status).unwrap_or(Exit::Signal(sig as i32)),
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            // Reaped elsewhere (the executor was dropped): it was killed.
            Err(_) => return Exit::Signal(libc::SIGKILL),
        }
        match watch {
            #[cfg(target_os = "linux")]
            ExitWatch::Pidfd(pidfd) => match pidfd.readable().await {
                Ok(mut guard) => guard.clear_ready(),
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            },
            ExitWatch::Poll => tokio::time::sleep(super::direct::POLL_EXIT).await,
        }
    }
}

/// A caller's interrupts (Ctrl-C at the CLI): each increment of the counter is
/// delivered to the command's process group as SIGINT; the run goes on until the
/// command decides to end.
pub type Interrupts = tokio::sync::watch::Receiver<u32>;

/// Resolves at the next interrupt; never when there is no sender any more.
async fn next_interrupt(interrupts: &mut Option<Interrupts>) {
    if let Some(rx) = interrupts {
        if rx.changed().await.is_ok() {
            return;
        }
    }
    std::future::pending().await
}

pub(super) async fn finish(
    mut l: Launched,
    timeout: Duration,
    output_mode: Output,
    config: &ExecutorConfig,
    abort: impl Future<Output = ()>,
    mut interrupts: Option<Interrupts>,
    mode: Mode,
) -> RunResult {
    let pid = l.pid;
    let mut timed_out = false;
    let mut aborted = false;
    let mut interrupted = false;
    let deadline_at = tokio::time::Instant::now().checked_add(timeout);
    tokio::pin!(abort);
    let exit = {
        let wait = wait_exit(&l.exit_watch, pid, l.exit_status.as_ref());
        tokio::pin!(wait);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let first = loop {
            break tokio::select! {
                biased;
                st = &mut wait => Some(st),
                _ = &mut deadline => { timed_out = true; None }
                _ = &mut abort => { aborted = true; None }
                _ = next_interrupt(&mut interrupts) => {
                    interrupted = true;
                    interrupt_run(pid, l.selection.runner, l.guard.supervised);
                    continue;
                }
            };
        };
        match first {
            Some(st) => st,
            None => {
                signal_group(pid, Signal::SIGTERM);
                match tokio::time::timeout(config.kill_grace, &mut wait).await {
                    Ok(st) => st,
                    #[cfg(target_os = "linux")]
                    Err(_) if l.guard.supervised => {
                        // The init kills everything, those that left the group too.
                        let _ = cordon_stage::request_sweep(pid);
                        match tokio::time::timeout(SWEEP_WAIT, &mut wait).await {
                            Ok(st) => st,
                            Err(_) => {
                                signal_group(pid, Signal::SIGKILL);
                                wait.await
                            }
                        }
                    }
                    Err(_) => {
                        signal_group(pid, Signal::SIGKILL);
                        wait.await
                    }
                }
            }
        }
    };
    crate::phases::mark("command_exit");
    // The leader is reaped; nothing of its group may stay behind.
    let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    l.guard.armed = false;
    drop(l.guard);
    // Nor of its cgroups (which also hold processes that left the group); read what
    // the kernel recorded, then remove them.
    let evidence = l.limits.sweep().await;
    crate::phases::mark("cgroup_sweep");

    // Bounded wait for pipes that outliving grandchildren still hold; on timeout the
    // dropped future aborts the collectors.
    let drain_all = futures_join(std::mem::take(&mut l.collectors));
    let _ = tokio::time::timeout(config.drain_grace, drain_all).await;
    // Relayed stdio: the destination takes its time, within the run's deadline (at
    // most `relay::RELAY_GRACE`, at least the drain grace); a run that timed out, was
    // aborted or interrupted gives it only the drain grace, and an abort or interrupt
    // meanwhile ends the wait. What is not delivered then is reported, never waited
    // on (see `super::relay`).
    let mut relays = std::mem::take(&mut l.relays);
    let bound = if timed_out || aborted || interrupted {
        config.drain_grace
    } else {
        // (A deadline too far to be an instant: no bound but the grace.)
        let left = deadline_at.map_or(Duration::MAX, |at| at.saturating_duration_since(tokio::time::Instant::now()));
        left.clamp(config.drain_grace, super::relay::RELAY_GRACE.max(config.drain_grace))
    };
    {
        let all_ended = async {
            for r in relays.iter_mut() {
                r.ended().await;
            }
        };
        tokio::select! {
            _ = all_ended => {}
            _ = tokio::time::sleep(bound) => {}
            _ = &mut abort, if !aborted => {}
            _ = next_interrupt(&mut interrupts) => {}
        }
    }
    let mut undelivered = [0u64; 2];
    for r in relays {
        let stream = r.stream;
        let n = r.stop().await;
        match stream {
            super::relay::Stream::Stdout => undelivered[0] += n,
            super::relay::Stream::Stderr => undelivered[1] += n,
            super::relay::Stream::Stdin => {}
        }
    }
    // The command is gone: its stdin's copy stops where it is.
    drop(l.stdin_relay.take());
    if let Some(w) = l.stdin_writer.take() {
        w.abort();
    }
    let (mut stdout, mut stderr) = match output_mode {
        Output::Capture => (l.stdout.finish(), l.stderr.finish()),
        Output::Inherit => Default::default(),
    };
    stdout.undelivered = undelivered[0];
    stderr.undelivered = undelivered[1];
    let (exit_code, signal) = match exit {
        Exit::Code(c) => (Some(c), None),
        Exit::Signal(s) => (None, Some(s)),
    };
    #[cfg(target_os = "linux")]
    if let Some(s) = l.supervisor.take() {
        s.finish();
    }
    // The proxy's refusals are denials of the same run; what it let through is listed.
    #[cfg(target_os = "linux")]
    let network_log = l.proxy.take().map(|(proxy, sink)| {
        let log = proxy.finish();
        let refused = std::mem::take(&mut *sink.lock().unwrap_or_else(|p| p.into_inner())).into_vec();
        for d in refused {
            crate::denials::record(&l.denials, d);
        }
        log
    });
    #[cfg(not(target_os = "linux"))]
    let network_log = None;
    let unobserved = super::launch::take_unobserved(&l.denials);
    #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
    let mut denials: Vec<Denial> = super::launch::take_denials(&l.denials);
    // Every entry comes from the supervisor's own observations; the command's stderr
    // only links its lines to them (docs/denials.md).
    #[cfg(target_os = "linux")]
    if mode.is_confined() {
        denials.truncate(crate::denials::MAX_DENIALS);
        crate::denials::link_lines(&mut denials, &stderr.text, &l.workdir);
        denials.iter_mut().for_each(crate::denials::bound_text);
    }
    if let Some(dir) = &l.run_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    // The run's namespace (and with it the overlays on the kept layers) is gone: the
    // next run may write them.
    drop(std::mem::take(&mut l.layer_locks));
    // Nothing of the run is left: what it planted where host git would read it (a
    // sentinel of the policy) is moved aside now, and reported.
    for q in crate::policy::seal(&l.policy) {
        let evidence = match &q.moved_to {
            Some(to) => {
                format!("found after the run where host git reads it (moved aside to {}: {})", to.display(), q.kind)
            }
            None => format!("found after the run where host git reads it (NOT moved aside, review it: {})", q.kind),
        };
        denials.push(Denial {
            kind: crate::result::DenialKind::FileWrite,
            target: Some(q.path.display().to_string()),
            evidence,
            line: None,
            proxy: None,
        });
    }
    // The bwrap stage helper confined itself and executed the command only if it said
    // so before `execve`; anything else (a failed step, bubblewrap dying first) means
    // the command never ran in the complete sandbox.
    #[cfg(target_os = "linux")]
    let runner_failed = match &l.helper_status {
        Some(fd) => cordon_stage::helper::read_status(fd.as_fd()) != cordon_stage::helper::HelperStatus::Executed,
        None => false,
    };
    // Off Linux there is no stage helper.
    #[cfg(not(target_os = "linux"))]
    let runner_failed = false;
    let killed_by = match (signal, exit_code) {
        (Some(s), _) => Some(s),
        // bubblewrap reports a signalled command as 128 + N.
        (None, Some(c)) if l.selection.runner == RunnerKind::Bwrap && c > 128 => Some(c - 128),
        _ => None,
    };
    let (limit, limits) = l.limits.conclude(&evidence, killed_by);
    // Nothing was enforced on a command that never ran: a failed runner's result never
    // claims a level (`Executor::run_until` turns it into `RUNNER_FAILED`).
    let enforcement = if runner_failed { crate::vocab::Enforcement::none() } else { l.enforcement };
    RunResult {
        exit_code,
        signal,
        timed_out,
        aborted,
        timeout_ms: timeout.as_millis() as u64,
        stdout,
        stderr,
        sandbox: SandboxFacts {
            mode,
            runner: l.selection.runner,
            denied: !denials.is_empty(),
            denials,
            enforcement,
            runner_failed,
            writable_roots: if mode.is_confined() { l.policy.writable() } else { vec![PathBuf::from("/")] },
            protected: l.policy.protected.clone(),
            hidden: l.hidden,
            // Like the level, never claimed for a command that never ran.
            local_ipc: if runner_failed { None } else { l.local_ipc },
            skipped: l.selection.skipped,
            network_log,
            unobserved,
        },
        limit,
        limits: Some(limits),
        held: None,
    }
}

/// Wait for every handle; abort the stragglers when this future is dropped.
pub(super) async fn futures_join(handles: Vec<tokio::task::JoinHandle<()>>) {
    struct AbortAll(Vec<tokio::task::AbortHandle>);
    impl Drop for AbortAll {
        fn drop(&mut self) {
            for h in &self.0 {
                h.abort();
            }
        }
    }
    let _abort = AbortAll(handles.iter().map(|h| h.abort_handle()).collect());
    for h in handles {
        let _ = h.await;
    }
}
