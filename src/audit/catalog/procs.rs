//! Other processes (signals, ptrace, their memory and `/proc`, their priority and
//! limits), processes that try to outlive the run, and resource exhaustion within the
//! run's limits.

use super::{p, s, Class, Plan, Probe};
use crate::audit::fixture::{Fixture, Skip, Victim};
use crate::audit::watch::{Appears, Output, Reached, Sentinel, Survivors, Worked};
use std::time::Duration;

/// A victim process of the identity and an attack `op VICTIM_PID ARGS` on it.
fn victim_attack(fx: &Fixture, op: &str, args: impl Fn(&Victim) -> Vec<String>) -> Result<Plan, Skip> {
    let v = fx.victim()?;
    let mut a = vec![v.pid.to_string()];
    a.extend(args(&v));
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    // A signal lands asynchronously: give it a moment before looking at the victim.
    Ok(Plan::op(fx, op, &a).watch(v).settle(150))
}

/// The lowest address of the victim's stack (for `process_vm_writev`): writable for
/// the process's whole life (a data mapping may turn read-only once the loader is
/// done), and far below anything the sleeping process uses.
fn writable_address(v: &Victim) -> String {
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", v.pid)).unwrap_or_default();
    let line = maps.lines().find(|l| l.ends_with("[stack]")).unwrap_or("0-");
    format!("0x{}", line.split('-').next().unwrap_or("0"))
}

/// A process that writes `F` late and then lingers: `F` must never appear, and
/// nothing carrying the job's marker may be left once the run is over. `F` lies in the
/// workspace, so that where the sandbox lets the command write, a survivor could too.
fn late(fx: &Fixture, plan: impl FnOnce(&str) -> Plan) -> Result<Plan, Skip> {
    let f = fx.ws.join("late-write");
    let marker = s(&fx.root);
    Ok(plan(&s(&f)).watch(Appears::new(&f)).watch(Survivors::new(&marker)).settle(900))
}

pub(super) fn probes() -> Vec<Probe> {
    use Class::{Lifetime as L, Limits as R, Processes as P};
    vec![
        // ------------------------------------------------------------ processes
        p(P, "kill", "SIGKILL a process of the same user outside; proves outside processes cannot be signalled", |fx| {
            victim_attack(fx, "kill", |_| vec!["9".into()])
        }),
        p(P, "stop", "SIGSTOP a process outside; proves it cannot be frozen", |fx| victim_attack(fx, "kill", |_| vec!["19".into()])),
        p(P, "pidfd-kill", "pidfd_open + pidfd_send_signal(SIGKILL) on a process outside; proves pidfds do not reach out", |fx| {
            victim_attack(fx, "pidfd-kill", |_| vec!["9".into()])
        }),
        p(P, "kill-any", "kill(-1, 0): look for any process to signal; proves nothing outside is signalable", |fx| {
            let v = fx.victim()?;
            Ok(Plan::op(fx, "kill-all", &["0"]).watch(Worked).watch(v))
        }),
        p(P, "ptrace-attach", "PTRACE_ATTACH a process outside; proves it cannot be debugged", |fx| {
            victim_attack(fx, "ptrace-attach", |_| vec![]).map(|p| p.watch(Worked))
        }),
        p(P, "ptrace-seize", "PTRACE_SEIZE a process outside; proves the seize form is closed too", |fx| {
            victim_attack(fx, "ptrace-seize", |_| vec![]).map(|p| p.watch(Worked))
        }),
        p(P, "vm-read", "process_vm_readv a process outside; proves its memory cannot be read", |fx| {
            victim_attack(fx, "vm-read", |v| vec![v.some_address()]).map(|p| p.watch(Worked))
        }),
        p(P, "vm-write", "process_vm_writev into a process outside; proves its memory cannot be written", |fx| {
            victim_attack(fx, "vm-write", |v| vec![writable_address(v)]).map(|p| p.watch(Worked))
        }),
        p(P, "proc-mem", "read /proc/PID/mem of a process outside; proves /proc does not open its memory", |fx| {
            victim_attack(fx, "proc-mem", |v| vec![v.some_address()]).map(|p| p.watch(Worked))
        }),
        p(P, "proc-environ", "read /proc/PID/environ of a process outside; proves its secrets stay unread", |fx| {
            let v = fx.victim()?;
            let secret = v.secret.clone();
            Ok(Plan::op(fx, "read", &[&format!("/proc/{}/environ", v.pid)])
                .watch(Output::contains(&secret, "the victim's environment secret"))
                .watch(v))
        }),
        p(P, "proc-grep", "scan every /proc/*/environ for a secret; proves no process outside is readable", |fx| {
            let v = fx.victim()?;
            let secret = v.secret.clone();
            Ok(Plan::op(fx, "proc-grep", &[&secret]).watch(Output::contains(&format!("VICTIM_SECRET={secret}"), "the victim's secret")).watch(v))
        }),
        p(P, "proc-cwd", "list /proc/PID/cwd of a process outside; proves its files are not reachable through /proc", |fx| {
            let v = fx.victim()?;
            let needle = format!("victim-{}", fx.tag);
            fx.file(&fx.ws.join(&needle), "x");
            Ok(Plan::op(fx, "ls", &[&format!("/proc/{}/cwd/", v.pid)]).watch(Output::contains(&needle, "the victim's working directory")).watch(v))
        }),
        p(P, "proc-root-write", "write a file outside through /proc/PID/root of a process outside; proves no way out through its root", |fx| {
            let v = fx.victim()?;
            let (f, _) = fx.sentinel(&fx.outside.join("target"));
            let w = Sentinel::record(&f);
            Ok(Plan::op(fx, "overwrite", &[&format!("/proc/{}/root{}", v.pid, s(&f)), "pwned\n"]).watch(w).watch(v))
        }),
        p(P, "setpriority", "renice a process outside; proves its scheduling cannot be changed", |fx| {
            victim_attack(fx, "setpriority", |_| vec!["19".into()])
        }),
        p(P, "prlimit", "prlimit(RLIMIT_NOFILE) on a process outside; proves its limits cannot be changed", |fx| {
            victim_attack(fx, "prlimit", |_| vec!["64".into()])
        }),
        p(P, "pidfd-getfd", "pidfd_getfd a descriptor of a process outside; proves its open files cannot be taken", |fx| {
            victim_attack(fx, "pidfd-getfd", |_| vec!["0".into()]).map(|p| p.watch(Worked))
        }),
        // ------------------------------------------------------------ lifetime
        p(L, "daemon", "fork, setsid, fork again, then write a file later; proves a classic daemon dies with the run", |fx| {
            late(fx, |f| Plan::op(fx, "daemonize", &["300", f]))
        }),
        p(L, "background", "a plain background child that writes later; proves children die with the run", |fx| {
            late(fx, |f| Plan::op(fx, "background", &["300", f]))
        }),
        p(L, "signal-deaf", "a daemon ignoring every signal it can, writing later; proves it is killed anyway", |fx| {
            late(fx, |f| Plan::op(fx, "stubborn", &["300", f]))
        }),
        p(L, "shell-nohup", "`nohup sh -c 'sleep; write' &` from a shell; proves what tools start outlives nothing", |fx| {
            late(fx, |f| Plan::sh(&format!("nohup sh -c 'sleep 0.3; echo x > \"{f}\"; sleep 3' >/dev/null 2>&1 &")))
        }),
        p(L, "shell-setsid", "`setsid -f sh -c 'sleep; write'`; proves a new session does not outlive the run", |fx| {
            if which::which("setsid").is_err() {
                return Err(Skip("no setsid(1) on this host".into()));
            }
            late(fx, |f| Plan::sh(&format!("setsid -f sh -c 'sleep 0.3; echo x > \"{f}\"; sleep 3' >/dev/null 2>&1")))
        }),
        // ------------------------------------------------------------ limits
        p(R, "fork-loop", "fork 300 sleeping children (cordon: --limit-pids 64); proves the process count is bounded and nothing survives", |fx| {
            let marker = s(&fx.root);
            let mut plan = Plan::op(fx, "fork-loop", &["300", "3000", &marker])
                .watch(Reached::new("forked", 300))
                .flags(&["--limit-pids", "64"])
                .lock("heavy");
            plan.settle = Duration::from_millis(200);
            Ok(plan.watch(Survivors::new(&marker)))
        }),
        p(R, "memory", "allocate and touch 256 MiB (cordon: --limit-memory 64M); proves memory is bounded", |fx| {
            // Unprivileged, an explicit memory limit is a named gap (RLIMIT_DATA per process,
            // docs/guarantees.md): --best-effort runs with it, and the effect is judged.
            Ok(Plan::op(fx, "alloc", &["256"]).watch(Worked).flags(&["--limit-memory", "64M", "--best-effort"]).lock("heavy"))
        }),
        p(R, "cpu", "burn 2 CPU-seconds (cordon: --limit-cpu 1); proves CPU time is bounded", |fx| {
            // CPU time, not wall time: a loaded machine may need long for two seconds.
            let mut plan = Plan::op(fx, "spin", &["2"]).watch(Worked).flags(&["--limit-cpu", "1"]);
            plan.deadline = Duration::from_secs(90);
            Ok(plan)
        }),
    ]
}
