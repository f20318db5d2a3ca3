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
use std::path::Path;
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

/// How long cordon may take to end once its deadline passed or it was signalled,
/// with its stdout a named FIFO that nobody reads: the run's end gives its relays at
/// most the drain grace (2 s) then; without that bound it waited a minute, or as long
/// as the reader held the FIFO. A hang catcher, not a timing claim.
const ENDS_WITHIN: Duration = Duration::from_secs(30);

/// A named FIFO whose read end this test holds open without ever reading (the reader
/// of issue 25 finding 6), and its write end for cordon's stdio.
fn stalled_fifo(ctx: &Ctx, name: &str) -> (std::fs::File, std::fs::File) {
    use std::os::unix::fs::OpenOptionsExt;
    let path = ctx.root.join(name);
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
    let reader = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&path).unwrap();
    let writer = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    (reader, writer)
}

/// Bytes waiting in the FIFO (`FIONREAD` on its read end).
fn pending(reader: &std::fs::File) -> usize {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through a valid pointer.
    unsafe { libc::ioctl(reader.as_raw_fd(), libc::FIONREAD, &mut n) };
    n as usize
}

/// Waits for `child` at most `within`; `None` (and the child killed) when it is still
/// running then.
fn exit_within(child: &mut std::process::Child, within: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < within {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Issue 25 finding 6: a stdout nobody reads (a named FIFO held open, never read) does
/// not keep cordon alive past its deadline, SIGTERM or SIGINT, whatever its stdio
/// relays are doing; `> fifo 2>&1` (one shared relay, and cordon's own lines on the
/// stalled FIFO) too. Judged by cordon's exit while the reader still holds the FIFO;
/// the positive control is a slow reader that receives every byte.
#[test]
fn a_stalled_stdout_does_not_keep_cordon_past_its_deadline_or_a_signal() {
    use std::os::unix::process::ExitStatusExt;
    each_identity("a_stalled_stdout_does_not_keep_cordon_past_its_deadline_or_a_signal", |ctx| {
        let flood = "head -c 1000000 /dev/zero; sleep 100";
        let start = |timeout: &str, shared: bool, fifo: &str| -> Result<_, Skip> {
            let (reader, writer) = stalled_fifo(ctx, fifo);
            let err = if shared { Stdio::from(writer.try_clone().unwrap()) } else { Stdio::null() };
            let mut child = ctx
                .host_cmd(&ctx.suite.cordon)
                .args(["run", "--mode", READ_ONLY, "--runner", &ctx.runner, "--timeout", timeout, "-c", flood])
                .stdout(writer)
                .stderr(err)
                .spawn()
                .unwrap();
            // The FIFO is full: the relay is blocked on it.
            let t = Instant::now();
            while pending(&reader) < 4096 {
                if let Some(st) = child.try_wait().unwrap() {
                    return Err(Skip(format!("cordon ended before writing ({st}); is the runner available?")));
                }
                assert!(t.elapsed() < START_WITHIN, "the command never wrote to the FIFO");
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok((reader, child))
        };
        let who = format!("as {} on {}", ctx.id.name, ctx.runner);
        // The deadline.
        let (reader, mut child) = start("3", false, "deadline")?;
        let st = exit_within(&mut child, ENDS_WITHIN);
        assert!(st.is_some(), "{who}: cordon outlived its 3 s deadline by {ENDS_WITHIN:?} on a stalled stdout");
        drop(reader);
        // SIGTERM, stdout and stderr one FIFO.
        let (reader, mut child) = start("600", true, "sigterm")?;
        // SAFETY: kill with a child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let st = exit_within(&mut child, ENDS_WITHIN);
        assert!(st.is_some(), "{who}: cordon ignored SIGTERM on a stalled `> fifo 2>&1`");
        drop(reader);
        // SIGINT: the command (a shell without a handler) dies of it, cordon too.
        let (reader, mut child) = start("600", false, "sigint")?;
        // SAFETY: kill with a child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let st = exit_within(&mut child, ENDS_WITHIN);
        assert!(st.is_some(), "{who}: cordon ignored SIGINT on a stalled stdout");
        assert_eq!(st.unwrap().signal(), Some(libc::SIGINT), "{who}: cordon ends as the command did");
        drop(reader);
        // Control: a reader that starts late receives everything.
        let (mut reader, writer) = stalled_fifo(ctx, "slow");
        let mut child = ctx
            .host_cmd(&ctx.suite.cordon)
            .args([
                "run",
                "--mode",
                READ_ONLY,
                "--runner",
                &ctx.runner,
                "--timeout",
                "60",
                "-c",
                "head -c 1000000 /dev/zero",
            ])
            .stdout(writer)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let mut got = 0usize;
        let mut buf = vec![0u8; 65536];
        let t = Instant::now();
        loop {
            match std::io::Read::read(&mut reader, &mut buf) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    assert!(t.elapsed() < ENDS_WITHIN, "{who}: the slow reader's copy never ended");
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("{who}: reading the FIFO: {e}"),
            }
        }
        let st = child.wait().unwrap();
        assert_eq!(got, 1_000_000, "{who}: control: a slow reader gets every byte ({st})");
        assert_eq!(st.code(), Some(0), "{who}: control");
        Ok(())
    });
}

/// A shell script run as the leader of a new session whose controlling terminal is a
/// fresh pseudo-terminal (what a person's terminal gives a command), as the identity.
struct OnPty {
    child: std::process::Child,
    master: std::fs::File,
    seen: Vec<u8>,
}

impl OnPty {
    fn start(ctx: &Ctx, script: &str, env: &[(&str, &str)]) -> OnPty {
        use std::os::fd::{AsRawFd, FromRawFd};
        use std::os::unix::process::CommandExt;
        let (mut m, mut s) = (-1, -1);
        // SAFETY: openpty writes two descriptors; the name, termios and size may be null.
        let r = unsafe { libc::openpty(&mut m, &mut s, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
        assert_eq!(r, 0, "openpty");
        // SAFETY: both descriptors were just made and are owned here.
        let (master, slave) = unsafe { (std::fs::File::from_raw_fd(m), std::fs::File::from_raw_fd(s)) };
        let mut cmd = ctx.host_cmd("/bin/bash");
        cmd.arg("-c").arg(script).env("CORDON", &ctx.suite.cordon);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdin(slave.try_clone().unwrap()).stdout(slave.try_clone().unwrap()).stderr(slave);
        // SAFETY: only setsid and ioctl (async-signal-safe) between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        // SAFETY: fcntl on a descriptor owned here.
        unsafe { libc::fcntl(master.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        OnPty { child, master, seen: Vec::new() }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen).into_owned()
    }

    /// Reads what the terminal shows until `want` appears (false after `within`).
    fn wait_for(&mut self, want: &str, within: Duration) -> bool {
        let start = Instant::now();
        let mut buf = [0u8; 4096];
        while start.elapsed() < within {
            match std::io::Read::read(&mut self.master, &mut buf) {
                Ok(n) if n > 0 => self.seen.extend_from_slice(&buf[..n]),
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
            if self.text().contains(want) {
                return true;
            }
        }
        false
    }

    /// Ctrl-C, typed on the terminal: the line discipline sends SIGINT to its
    /// foreground process group. A moment after the command said it is ready, so that
    /// it waits where a person would interrupt it (dash survives a SIGINT that lands
    /// between its `echo` and its next fork, unconfined as well).
    fn ctrl_c(&mut self) {
        std::thread::sleep(Duration::from_millis(500));
        self.master.write_all(b"\x03").unwrap();
    }

    /// The script's end within `within` (what the terminal showed is kept), or `None`
    /// when it still runs then (it is killed).
    fn end_within(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        loop {
            self.wait_for("\u{0}", Duration::from_millis(50));
            if let Some(st) = self.child.try_wait().unwrap() {
                self.wait_for("\u{0}", Duration::from_millis(200));
                return Some(st);
            }
            if start.elapsed() > within {
                // The whole session: the script and what it started.
                // SAFETY: kill with the negated pid of a session (and group) leader.
                unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
                let _ = self.child.wait();
                return None;
            }
        }
    }
}

/// How long a script on the terminal may take to stop after Ctrl-C (a hang catcher:
/// the commands sleep for a minute).
const STOPS_WITHIN: Duration = Duration::from_secs(30);

/// Issue 26, terminal semantics: Ctrl-C on a person's terminal reaches the command as
/// SIGINT (not SIGTERM), so its own handlers run, and cordon ends as the command did,
/// so the calling shell behaves as it would around the command itself. Under a real
/// pseudo-terminal, in every mode and runner, as root and unprivileged, judged by what
/// the terminal shows and by the shell's own end:
/// - Python's `KeyboardInterrupt` handler runs; the script around cordon stops;
/// - a `trap ... INT` runs and its `exit 130` is cordon's status (the script goes on);
/// - a `while true; do cordon run ...; done` loop stops on the first Ctrl-C.
#[test]
fn ctrl_c_on_a_terminal_reaches_the_command_as_sigint_and_stops_a_loop() {
    use std::os::unix::process::ExitStatusExt;
    each_identity("ctrl_c_on_a_terminal_reaches_the_command_as_sigint_and_stops_a_loop", |ctx| {
        let py = "/usr/bin/python3";
        if !Path::new(py).exists() {
            return Err(Skip("no /usr/bin/python3".into()));
        }
        let modes: Vec<(&str, String)> = CONFINED
            .iter()
            .map(|m| (*m, format!("--mode {m} --runner {}", ctx.runner)))
            .chain([(FULL_ACCESS, "--mode full-access".to_string())])
            .collect();
        for (mode, flags) in &modes {
            let who = format!("{mode} as {} on {}", ctx.id.name, ctx.runner);
            // Python's KeyboardInterrupt.
            let script = format!(
                "\"$CORDON\" run {flags} -- {py} -c 'import time\ntry:\n    print(\"ready\", flush=True)\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    print(\"interrupt-handled\", flush=True)\n    raise'; echo \"after $?\""
            );
            let mut t = OnPty::start(ctx, &script, &[]);
            if !t.wait_for("ready", START_WITHIN) {
                let _ = t.end_within(Duration::ZERO);
                if t.text().contains("SANDBOX_UNAVAILABLE") {
                    return Err(Skip(format!("{who}: {}", t.text().trim())));
                }
                panic!("{who}: the command never started: {:?}", t.text());
            }
            t.ctrl_c();
            let st = t.end_within(STOPS_WITHIN);
            let shown = t.text();
            assert!(st.is_some(), "{who}: the script still ran after Ctrl-C: {shown:?}");
            assert!(shown.contains("interrupt-handled"), "{who}: KeyboardInterrupt never ran: {shown:?}");
            assert_eq!(st.unwrap().signal(), Some(libc::SIGINT), "{who}: the shell did not stop on Ctrl-C: {shown:?}");
            assert!(!shown.contains("after"), "{who}: the shell went on after Ctrl-C: {shown:?}");
            // A shell trap: it runs, and its exit status is cordon's.
            let script = format!(
                "\"$CORDON\" run {flags} -- /bin/bash -c 'trap \"echo trapped; exit 130\" INT; echo ready; sleep 60 & wait'; echo \"status $?\""
            );
            let mut t = OnPty::start(ctx, &script, &[]);
            assert!(t.wait_for("ready", START_WITHIN), "{who}: the trap script never started: {:?}", t.text());
            t.ctrl_c();
            let st = t.end_within(STOPS_WITHIN);
            let shown = t.text();
            assert!(st.is_some(), "{who}: the trap script still ran after Ctrl-C: {shown:?}");
            assert!(shown.contains("trapped"), "{who}: the INT trap never ran: {shown:?}");
            if ctx.runner == "bwrap" && *mode != FULL_ACCESS {
                // bubblewrap reports a death by SIGINT as the status 130, so a 130 after
                // Ctrl-C counts as that death (docs/architecture.md): the shell stops.
                assert_eq!(st.unwrap().signal(), Some(libc::SIGINT), "{who}: {shown:?}");
            } else {
                assert!(shown.contains("status 130"), "{who}: cordon's status is not the trap's 130: {shown:?}");
            }
            // A loop around cordon stops on the first Ctrl-C.
            let script = format!(
                "while true; do \"$CORDON\" run {flags} -- /bin/sh -c 'echo ready; sleep 60'; echo looped; done"
            );
            let mut t = OnPty::start(ctx, &script, &[]);
            assert!(t.wait_for("ready", START_WITHIN), "{who}: the loop never started: {:?}", t.text());
            t.ctrl_c();
            let st = t.end_within(STOPS_WITHIN);
            let shown = t.text();
            assert!(st.is_some() && !shown.contains("looped"), "{who}: the loop went on after Ctrl-C: {shown:?}");
        }
        Ok(())
    });
}

/// Issue 26: live output on the caller's terminal keeps its `TERM` and colour
/// settings (they were forced to `TERM=dumb NO_COLOR=1`); output that is not a
/// terminal still gets the quiet defaults.
#[test]
fn live_output_on_a_terminal_keeps_term_and_colours() {
    each_identity("live_output_on_a_terminal_keeps_term_and_colours", |ctx| {
        let show = "echo \"[TERM=$TERM NO_COLOR=${NO_COLOR-unset} COLORTERM=${COLORTERM-unset}]\"";
        let env = [("TERM", "xterm-256color"), ("COLORTERM", "truecolor")];
        let script = format!("\"$CORDON\" run --mode read-only --runner {} -c '{show}'", ctx.runner);
        let mut t = OnPty::start(ctx, &script, &env);
        let st = t.end_within(STOPS_WITHIN);
        let shown = t.text();
        if shown.contains("SANDBOX_UNAVAILABLE") {
            return Err(Skip(shown.trim().to_string()));
        }
        assert!(st.is_some_and(|s| s.success()), "{shown:?}");
        assert!(shown.contains("[TERM=xterm-256color NO_COLOR=unset COLORTERM=truecolor]"), "on a terminal: {shown:?}");
        let script = format!("\"$CORDON\" run --mode read-only --runner {} -c '{show}' | cat", ctx.runner);
        let mut t = OnPty::start(ctx, &script, &env);
        t.end_within(STOPS_WITHIN);
        let shown = t.text();
        assert!(shown.contains("[TERM=dumb NO_COLOR=1 "), "into a pipe: {shown:?}");
        Ok(())
    });
}
