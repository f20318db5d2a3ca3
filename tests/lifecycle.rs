//! No process of a run outlives cordon, and cordon hands no zombie to the host's init
//! (issue 12, lifecycle part).
//!
//! Judged from outside, by effect: processes are found in `/proc` by a unique argv
//! marker (`sleep <marker>`), never by cordon's own report.
//! - SIGKILL of `cordon run` in every mode (read-only, workspace-write on each confined
//!   runner, full-access) and of `cordon serve --mode full-access`: no process carrying
//!   the marker is left, including one that left the run's process group (`setsid`).
//! - bubblewrap runs leave no `[bwrap] <defunct>`: the test process makes itself a
//!   child subreaper (so orphans come to it instead of pid 1) and counts bwrap zombies
//!   among its children.
//!
//! Every case runs as root and as the unprivileged test user (`each_identity`). Time
//! bounds only catch hangs (a process that never goes away).
//!
//! Its own test binary: `bwrap_runs_leave_no_zombie` makes the test process a child
//! subreaper, a process-wide setting; other suites' orphans must not reach it.
#![cfg(target_os = "linux")]

mod common;

use common::*;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a killed process may take to disappear (reaping is asynchronous).
const GONE_WITHIN: Duration = Duration::from_secs(10);
/// How long the run's sleepers may take to start.
const START_WITHIN: Duration = Duration::from_secs(20);

/// A `sleep` argument no other process carries.
fn marker() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("58.{:05}{:03}{:02}3", std::process::id() % 100_000, nanos % 1000, N.fetch_add(1, Ordering::Relaxed) % 100)
}

fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next())
}

fn ppid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// Live (non-zombie) processes whose argv is exactly `sleep <marker>`.
fn sleepers(marker: &str) -> Vec<i32> {
    let want = format!("sleep\0{marker}\0");
    let mut v = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        if std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == want.as_bytes())
            && proc_state(pid).is_some_and(|s| s != 'Z')
        {
            v.push(pid);
        }
    }
    v
}

fn wait_for_sleepers(marker: &str, n: usize, what: &str) {
    let start = Instant::now();
    while sleepers(marker).len() < n {
        assert!(start.elapsed() < START_WITHIN, "{what}: the {n} sleepers never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn assert_no_sleepers(marker: &str, what: &str) {
    let start = Instant::now();
    loop {
        let left = sleepers(marker);
        if left.is_empty() {
            return;
        }
        if start.elapsed() > GONE_WITHIN {
            for p in &left {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*p), nix::sys::signal::Signal::SIGKILL);
            }
            panic!("{what}: processes `sleep {marker}` outlived cordon: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `sleep M` in the run's group, one that left it (`setsid`), and the shell waiting.
fn script(m: &str) -> String {
    format!("sleep {m} & setsid sleep {m} & sleep {m}")
}

fn cordon_cmd(ctx: &Ctx, args: &[&str]) -> Command {
    let mut cmd = ctx.host_cmd(&ctx.suite.cordon);
    cmd.args(args).stdout(Stdio::null()).stderr(Stdio::piped());
    cmd
}

/// Starts `cordon run` in `mode`, waits for its three sleepers, SIGKILLs cordon.
fn kill_cordon_mid_run(ctx: &Ctx, mode: &str) -> Result<(), Skip> {
    let m = marker();
    let mut args = vec!["run", "--json", "--timeout", "60", "--mode", mode];
    if mode != FULL_ACCESS {
        args.extend(["--runner", &ctx.runner]);
    }
    let s = script(&m);
    args.extend(["-c", &s]);
    let mut child = cordon_cmd(ctx, &args).spawn().unwrap();
    let what = format!("{mode} on {} as {}", ctx.runner, ctx.id.name);
    let start = Instant::now();
    while sleepers(&m).len() < 3 {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err);
            if err.contains("SANDBOX_UNAVAILABLE") {
                return Err(Skip(format!("{mode}: {}", err.trim())));
            }
            panic!("{what}: cordon ended early ({st}): {err}");
        }
        assert!(start.elapsed() < START_WITHIN, "{what}: the sleepers never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_no_sleepers(&m, &format!("SIGKILL of cordon run ({what})"));
    Ok(())
}

#[test]
fn sigkill_of_cordon_run_leaves_no_process_of_the_run() {
    each_identity("sigkill_of_cordon_run_leaves_no_process_of_the_run", |ctx| {
        // Positive control: the marker finder sees the same script's sleepers on the host.
        let m = marker();
        let mut host = ctx.host_cmd("/bin/sh");
        let mut h = host.arg("-c").arg(script(&m)).spawn().unwrap();
        wait_for_sleepers(&m, 3, "host control");
        let _ = Command::new("pkill").arg("-KILL").arg("-fx").arg(format!("sleep {m}")).status();
        let _ = h.wait();
        assert_no_sleepers(&m, "host control cleanup");

        kill_cordon_mid_run(ctx, FULL_ACCESS)?;
        for mode in CONFINED {
            kill_cordon_mid_run(ctx, mode)?;
        }
        Ok(())
    });
}

#[test]
fn sigkill_of_cordon_serve_full_access_leaves_no_process_of_the_run() {
    each_identity("sigkill_of_cordon_serve_full_access_leaves_no_process_of_the_run", |ctx| {
        let m = marker();
        let ws = ctx.ws.to_string_lossy().into_owned();
        let mut child = ctx
            .host_cmd(&ctx.suite.cordon)
            .args(["serve", "--mode", "full-access", "--cwd", &ws])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let req = serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "start",
            "params": { "command": script(&m), "mode": "full-access", "timeout_ms": 60000 }
        });
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{req}").unwrap();
        let run = serde_json::json!({
            "jsonrpc": "2.0", "id": 2, "method": "run",
            "params": { "command": format!("sleep {m}"), "mode": "full-access", "timeout_ms": 60000 }
        });
        writeln!(stdin, "{run}").unwrap();
        wait_for_sleepers(&m, 4, "serve full-access");
        child.kill().unwrap();
        child.wait().unwrap();
        drop(stdin);
        assert_no_sleepers(&m, &format!("SIGKILL of cordon serve --mode full-access as {}", ctx.id.name));
        Ok(())
    });
}

/// Zombie children of this process whose command is `bwrap`.
fn bwrap_zombie_children() -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut v = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim() == "bwrap" && proc_state(pid) == Some('Z') && ppid(pid) == Some(me) {
            v.push(pid);
        }
    }
    v
}

#[test]
fn bwrap_runs_leave_no_zombie() {
    // Orphans of this process's descendants come to it instead of pid 1, so a zombie
    // cordon handed over would show up here as a child nobody reaps.
    // SAFETY: prctl with integer arguments.
    assert_eq!(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }, 0);
    let runs = 5;
    each_identity("bwrap_runs_leave_no_zombie", |ctx| {
        for _ in 0..runs {
            let out = ctx.cordon(&RunOpts { runner: Some("bwrap".into()), ..ctx.opts(READ_ONLY) }, &["true"])?;
            assert_eq!(out.exit_code(), Some(0), "{out:?}");
        }
        // A zombie, once handed over, stays: no wait needed beyond the runs' end.
        std::thread::sleep(Duration::from_millis(200));
        let z = bwrap_zombie_children();
        assert!(z.is_empty(), "as {}: {runs} bwrap runs left unreaped bwrap processes: {z:?}", ctx.id.name);
        Ok(())
    });
}
