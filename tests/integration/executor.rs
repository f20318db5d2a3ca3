//! Integration tests of the executor's process lifecycle, bounded capture, environment
//! scrub and the `cordon run` CLI contract.
//!
//! What it covers, through the library API (`cordon::Executor`) and the CLI binary:
//! - deadlines: a TERM-ignoring command is SIGKILLed after the grace, nothing of it stays;
//! - pipes held open by grandchildren do not hang a run (full-access and confined);
//! - spill files: byte-exact for 10 MB of binary output, kept only when needed, withheld
//!   when spilling fails (a tiny tmpfs, root only);
//! - the environment scrub, end to end;
//! - stdin delivery and harmless EPIPE;
//! - background handles: incremental reads, the `lossy` flag, kill, status, done;
//! - dropping the executor kills and reaps what it started; a finished foreground run
//!   leaves nothing of its group behind;
//! - `cordon run --json`: field names, exit statuses, pre-run errors, mode parsing.
//!
//! What it does not cover: confinement itself (tests/security.rs judges that with the
//! probe program).
//!
//! Confined cases need a runner that can enforce the mode here; without one they print
//! `SKIP <test>: <reason>`, and fail instead when `CORDON_MUST_ENFORCE=1`. No assertion
//! measures speed: time bounds only catch hangs and are far above the expected time.

use crate::common::cli::{cordon, CliOut};
use crate::common::{self, skip_or_fail, skip_regardless, PATH_ENV};
use cordon::{CordonError, Executor, ExecutorConfig, Handle, HostFacts, Mode, Request, RunResult, Status, Stdin};
use nix::errno::Errno;
use nix::unistd::Pid;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// A run that takes longer than this is hung (every command here needs well under 1 s;
/// the ones that sleep sleep 30–60 s, so finishing within this bound proves the kill).
const HANG: Duration = Duration::from_secs(25);
/// How long a killed process may take to disappear (reaping by init is asynchronous).
const GONE_WITHIN: Duration = Duration::from_secs(5);
/// A small SIGTERM → SIGKILL grace so TERM-ignoring commands die quickly.
const KILL_GRACE: Duration = Duration::from_millis(300);
/// A small pipe-drain grace so grandchild-held pipes are abandoned quickly.
const DRAIN_GRACE: Duration = Duration::from_millis(300);

// ------------------------------------------------------------------ fixtures

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

fn temp_dir(tag: &str) -> TempDir {
    common::temp_dir(&format!("exec-{tag}"))
}

/// A controlled ambient environment: tests never depend on the runner's own env.
fn base_env() -> Vec<(OsString, OsString)> {
    let mut env = vec![(OsString::from("PATH"), OsString::from(PATH_ENV))];
    if let Some(home) = std::env::var_os("HOME") {
        env.push(("HOME".into(), home));
    }
    env
}

fn test_config() -> ExecutorConfig {
    ExecutorConfig {
        kill_grace: KILL_GRACE,
        drain_grace: DRAIN_GRACE,
        ambient_env: Some(base_env()),
        ..Default::default()
    }
}

/// An executor with a private state directory and a workspace. Field order matters:
/// the executor is dropped (and its processes killed) before the directories go.
struct Fx {
    exec: Executor,
    ws: TempDir,
    state: TempDir,
}

impl Fx {
    fn new(tag: &str) -> Fx {
        Fx::with(tag, |_| {})
    }

    fn with(tag: &str, tweak: impl FnOnce(&mut ExecutorConfig)) -> Fx {
        let ws = temp_dir(&format!("{tag}-ws"));
        let state = temp_dir(&format!("{tag}-state"));
        let mut cfg = test_config();
        cfg.state_dir = Some(state.path().to_path_buf());
        tweak(&mut cfg);
        let exec = Executor::new(cfg).expect("create the executor");
        Fx { exec, ws, state }
    }

    fn ws(&self) -> &Path {
        self.ws.path()
    }

    /// The executor's private directory (spill files live here).
    fn spill_dir(&self) -> PathBuf {
        self.state.path().join(format!("cordon-{}", euid()))
    }

    fn req(&self, cmd: &str, mode: Mode) -> Request {
        let mut r = Request::shell(cmd);
        r.workdir = Some(self.ws().to_path_buf());
        r.policy.mode = mode;
        r
    }

    async fn try_run(&self, req: Request) -> Result<RunResult, CordonError> {
        let spec = self.exec.resolve(req)?;
        match tokio::time::timeout(HANG, self.exec.run(spec)).await {
            Ok(r) => r,
            Err(_) => panic!("run did not finish within {HANG:?}"),
        }
    }

    async fn run(&self, req: Request) -> RunResult {
        self.try_run(req).await.unwrap_or_else(|e| panic!("run failed: {} ({e})", e.code()))
    }

    /// Runs a confined request; `None` (after a loud skip) when the mode cannot be
    /// enforced on this host.
    async fn run_confined(&self, test: &str, req: Request) -> Option<RunResult> {
        assert!(req.policy.mode.is_confined());
        match self.try_run(req).await {
            Ok(r) => Some(r),
            Err(e @ CordonError::SandboxUnavailable { .. }) => {
                skip_or_fail(test, &e.to_string());
                None
            }
            Err(e) => panic!("{test}: confined run failed: {} ({e})", e.code()),
        }
    }

    async fn start_confined(&self, test: &str, req: Request) -> Option<Handle> {
        let spec = self.exec.resolve(req).expect("resolve");
        match self.exec.start(spec).await {
            Ok(h) => Some(h),
            Err(e @ CordonError::SandboxUnavailable { .. }) => {
                skip_or_fail(test, &e.to_string());
                None
            }
            Err(e) => panic!("{test}: start failed: {} ({e})", e.code()),
        }
    }

    async fn start(&self, req: Request) -> Handle {
        let spec = self.exec.resolve(req).expect("resolve");
        self.exec.start(spec).await.unwrap_or_else(|e| panic!("start failed: {} ({e})", e.code()))
    }

    /// Files cordon left in its private directory whose names start with `prefix`.
    fn state_files(&self, prefix: &str) -> Vec<PathBuf> {
        match std::fs::read_dir(self.spill_dir()) {
            Ok(rd) => {
                rd.flatten().filter(|e| e.file_name().to_string_lossy().starts_with(prefix)).map(|e| e.path()).collect()
            }
            Err(_) => Vec::new(),
        }
    }
}

/// Deterministic pseudo-random bytes (xorshift64*): mixed binary, mostly invalid UTF-8.
fn pseudo_random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A marker unique to this test process and call, to find processes by command line.
fn unique_marker() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    // A valid `sleep` argument that no other process is likely to carry.
    format!("59.{:05}{:03}{:02}7", std::process::id() % 100_000, nanos % 1000, N.fetch_add(1, Ordering::Relaxed) % 100)
}

// ------------------------------------------------------------------ processes

/// The state letter from `/proc/<pid>/stat` (`Z` = zombie), if the process exists.
fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next())
}

/// The parent pid from `/proc/<pid>/stat`, if the process exists.
fn ppid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `pid` is gone: `kill(pid, 0)` fails with ESRCH. A zombie whose reaping
/// is still pending counts as alive here; [`wait_gone`] waits it out.
fn gone(pid: i32) -> bool {
    match nix::sys::signal::kill(Pid::from_raw(pid), None) {
        Err(Errno::ESRCH) => true,
        Ok(()) => false,
        Err(e) => panic!("kill({pid}, 0): unexpected {e}"),
    }
}

/// Waits up to [`GONE_WITHIN`] for `pid` to disappear (ESRCH). Panics with the
/// process's state if it does not.
async fn assert_gone(pid: i32, what: &str) {
    let start = Instant::now();
    while !gone(pid) {
        if start.elapsed() > GONE_WITHIN {
            let state = proc_state(pid);
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            // Kill it so a failing test does not leak a 60 s sleeper.
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
            panic!(
                "{what} (pid {pid}) still exists {GONE_WITHIN:?} after the run: state {state:?}, cmdline {:?}",
                String::from_utf8_lossy(&cmd).replace('\0', " ")
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Host pids whose command line contains `marker`.
fn host_pids_with(marker: &str) -> Vec<i32> {
    let mut v = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        if pid == std::process::id() as i32 {
            continue;
        }
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmd).contains(marker) && proc_state(pid) != Some('Z') {
                v.push(pid);
            }
        }
    }
    v
}

/// Live processes whose argv is exactly `sleep <marker>`.
fn sleepers(marker: &str) -> usize {
    host_pids_with(marker)
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c == format!("sleep\0{marker}\0").as_bytes())
        })
        .count()
}

/// Waits until `n` processes `sleep <marker>` run.
async fn wait_for_sleepers(marker: &str, n: usize) {
    let start = Instant::now();
    while sleepers(marker) < n {
        assert!(start.elapsed() < HANG, "the {n} sleepers never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits up to [`GONE_WITHIN`] for every process carrying `marker` to disappear.
async fn assert_no_process_with(marker: &str, what: &str) {
    let start = Instant::now();
    loop {
        let left = host_pids_with(marker);
        if left.is_empty() {
            return;
        }
        if start.elapsed() > GONE_WITHIN {
            for p in &left {
                let _ = nix::sys::signal::kill(Pid::from_raw(*p), nix::sys::signal::Signal::SIGKILL);
            }
            panic!("{what}: processes carrying {marker} outlived the run: {left:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads a pid the command wrote to `path` (one line). Waits for the write when
/// `wait` is given.
async fn read_pid(path: &Path, wait: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            if s.ends_with('\n') {
                return s.trim().parse().unwrap_or_else(|_| panic!("{} holds no pid: {s:?}", path.display()));
            }
        }
        if start.elapsed() > wait {
            panic!("the command never wrote {}", path.display());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// SIGKILLs a pid on drop: cleanup for processes a test lets escape on purpose.
struct KillOnDrop(Vec<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = nix::sys::signal::kill(Pid::from_raw(*p), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// The cgroup layout found with `statmount` at the conventional mount points is the
/// one `mountinfo` gives (the fast path must not change where runs' cgroups go).
#[cfg(target_os = "linux")]
#[test]
fn cgroup_layout_by_statmount_matches_mountinfo() {
    let test = "cgroup_layout_by_statmount_matches_mountinfo";
    let cg = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let mi = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let by_mountinfo = cordon::limits::CgroupLayout::parse(&mi, &cg);
    match cordon::limits::CgroupLayout::by_statmount(&cg) {
        Some(fast) => assert_eq!(fast, by_mountinfo),
        None => skip_or_fail(test, "no statmount(2) here (Linux < 6.8), or the hierarchies are not at /sys/fs/cgroup"),
    }
}

/// A run's cgroups are gone by the time its result is returned. Judged by the
/// directories themselves, named from the command's own `/proc/self/cgroup`.
#[tokio::test(flavor = "multi_thread")]
async fn run_cgroups_are_removed_before_the_result() {
    let test = "run_cgroups_are_removed_before_the_result";
    let layout = cordon::limits::CgroupLayout::detect();
    let bases: Vec<PathBuf> = layout
        .v1
        .values()
        .cloned()
        .chain(layout.v2.clone())
        .chain(layout.v2_root.as_ref().map(|r| r.join(cordon::limits::V2_PARENT)))
        .collect();
    let fx = Fx::new("cg-removal");
    let r = fx.run(fx.req("cat /proc/self/cgroup", Mode::FullAccess)).await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    let name = r.stdout.text.lines().find_map(|l| l.rsplit('/').next().filter(|n| n.starts_with("cordon-run-")));
    let Some(name) = name else {
        skip_or_fail(test, &format!("the run had no cgroup of its own here: {}", r.stdout.text));
        return;
    };
    let left: Vec<PathBuf> = bases.iter().map(|b| b.join(name)).filter(|d| d.exists()).collect();
    assert_eq!(left, Vec::<PathBuf>::new(), "the run's cgroups outlived its result");
}

// ------------------------------------------------------------------ 1. deadlines

#[tokio::test(flavor = "multi_thread")]
async fn timeout_kills_a_term_ignoring_command_and_its_children() {
    let fx = Fx::new("timeout");
    let mut req = fx.req(
        "echo $$ > leader.pid; trap '' TERM; sleep 30 & echo $! > child.pid; wait; echo not-reached",
        Mode::FullAccess,
    );
    req.timeout = Some(Duration::from_millis(1500));
    let started = Instant::now();
    let r = fx.run(req).await;
    assert!(started.elapsed() < HANG);
    assert!(r.timed_out, "{r:?}");
    assert!(!r.aborted, "a timeout is never also an abort: {r:?}");
    assert_eq!(r.timeout_ms, 1500);
    assert_eq!(r.exit_code, None, "{r:?}");
    // TERM is ignored, so only the SIGKILL after the grace can have ended it.
    assert_eq!(r.signal, Some(libc::SIGKILL), "{r:?}");
    assert!(!r.stdout.text.contains("not-reached"));
    let leader = read_pid(&fx.ws().join("leader.pid"), Duration::ZERO).await;
    let child = read_pid(&fx.ws().join("child.pid"), Duration::ZERO).await;
    assert_gone(leader, "the timed-out shell").await;
    assert_gone(child, "the TERM-ignoring sleep it started").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_kills_a_term_ignoring_command_confined() {
    let test = "timeout_kills_a_term_ignoring_command_confined";
    let fx = Fx::new("timeout-conf");
    let m = unique_marker();
    let mut req = fx.req(&format!("trap '' TERM; sleep {m} & sleep {m}; echo not-reached"), Mode::WorkspaceWrite);
    req.timeout = Some(Duration::from_millis(1500));
    let Some(r) = fx.run_confined(test, req).await else { return };
    assert!(r.timed_out && !r.aborted, "{r:?}");
    assert_eq!(r.signal, Some(libc::SIGKILL), "{r:?}");
    assert_no_process_with(&m, "timed-out confined run").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_sends_a_deliverable_sigterm_in_every_mode() {
    // TERM → grace → KILL: a command with the default TERM disposition dies of the
    // SIGTERM, as it would outside the sandbox; only TERM-ignoring ones need the KILL.
    let test = "timeout_sends_a_deliverable_sigterm_in_every_mode";
    let fx = Fx::with("term", |c| c.kill_grace = Duration::from_secs(3));
    for mode in [Mode::FullAccess, Mode::WorkspaceWrite] {
        let mut req = Request::argv(["sleep", "30"]);
        req.workdir = Some(fx.ws().to_path_buf());
        req.policy.mode = mode;
        req.timeout = Some(Duration::from_millis(300));
        let r = if mode.is_confined() {
            match fx.run_confined(test, req).await {
                Some(r) => r,
                None => return,
            }
        } else {
            fx.run(req).await
        };
        assert!(r.timed_out && !r.aborted, "{mode}: {r:?}");
        assert_eq!(
            r.signal,
            Some(libc::SIGTERM),
            "{mode}: `sleep` must die of the SIGTERM, not the SIGKILL after the grace"
        );
    }
}

// ------------------------------------------------------------------ 2. held pipes

#[tokio::test(flavor = "multi_thread")]
async fn grandchild_holding_stdout_does_not_hang_full_access() {
    let fx = Fx::new("grandchild");
    // The plain form: the grandchild stays in the command's process group.
    let started = Instant::now();
    let r = fx.run(fx.req("(sleep 60 &) ; echo done", Mode::FullAccess)).await;
    assert!(started.elapsed() < HANG, "took {:?}", started.elapsed());
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(r.stdout.text.contains("done"), "{r:?}");

    // The escaping form: a new session, out of reach of the group kill. Full access
    // lets it live on, but the run must still return after the bounded drain.
    let started = Instant::now();
    let r = fx.run(fx.req("setsid sleep 60 & echo $! > gc.pid; echo done", Mode::FullAccess)).await;
    let gc = read_pid(&fx.ws().join("gc.pid"), Duration::ZERO).await;
    let _cleanup = KillOnDrop(vec![gc]);
    assert!(started.elapsed() < HANG, "took {:?}", started.elapsed());
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(r.stdout.text.contains("done"), "{r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn grandchild_holding_stdout_does_not_hang_confined() {
    let test = "grandchild_holding_stdout_does_not_hang_confined";
    let fx = Fx::new("grandchild-conf");
    let m = unique_marker();
    let started = Instant::now();
    let Some(r) = fx.run_confined(test, fx.req(&format!("(sleep {m} &) ; echo done"), Mode::WorkspaceWrite)).await
    else {
        return;
    };
    assert!(started.elapsed() < HANG, "took {:?}", started.elapsed());
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(r.stdout.text.contains("done"), "{r:?}");
    assert_no_process_with(&m, "grandchild of a confined run").await;

    // Leaving the session does not help inside the sandbox either.
    let m = unique_marker();
    let Some(r) = fx.run_confined(test, fx.req(&format!("setsid sleep {m} & echo done"), Mode::WorkspaceWrite)).await
    else {
        return;
    };
    assert!(r.stdout.text.contains("done"), "{r:?}");
    assert_no_process_with(&m, "setsid grandchild of a confined run").await;
}

// ------------------------------------------------------------------ 3, 4, 5. capture

fn assert_private_spill(fx: &Fx, path: &Path) {
    assert!(path.starts_with(fx.spill_dir()), "spill {} outside the private dir", path.display());
    let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "spill file mode");
    let dir_mode = std::fs::metadata(fx.spill_dir()).unwrap().permissions().mode() & 0o777;
    assert_eq!(dir_mode, 0o700, "state dir mode");
}

#[tokio::test(flavor = "multi_thread")]
async fn spill_is_byte_exact_for_10mb_of_binary_output() {
    let fx = Fx::new("spill10m");
    let blob = pseudo_random_bytes(10_000_000, 0x5eed);
    std::fs::write(fx.ws().join("blob"), &blob).unwrap();
    let cap = 64 * 1024;
    let mut req = fx.req("cat blob; cat blob >&2", Mode::FullAccess);
    req.output_cap = Some(cap);
    let r = fx.run(req).await;
    assert_eq!(r.exit_code, Some(0), "{:?}", r.stderr.text.get(..200));
    let want_tail = String::from_utf8_lossy(&blob[blob.len() - cap..]).into_owned();
    for (name, out) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
        assert!(out.truncated, "{name} not marked truncated");
        assert!(out.text == want_tail, "{name} tail is not the lossy text of the last {cap} bytes");
        let path = out.spill_path.as_ref().unwrap_or_else(|| panic!("{name}: no spill path"));
        assert_private_spill(&fx, path);
        let spilled = std::fs::read(path).unwrap();
        assert_eq!(spilled.len(), blob.len(), "{name} spill length");
        assert!(spilled == blob, "{name} spill bytes differ from the output");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn spill_is_byte_exact_confined() {
    let test = "spill_is_byte_exact_confined";
    let fx = Fx::new("spill-conf");
    let blob = pseudo_random_bytes(3_000_000, 0xbeef);
    std::fs::write(fx.ws().join("blob"), &blob).unwrap();
    let mut req = fx.req("cat blob", Mode::ReadOnly);
    req.output_cap = Some(4096);
    let Some(r) = fx.run_confined(test, req).await else { return };
    assert!(r.stdout.truncated);
    assert_eq!(r.stdout.text, String::from_utf8_lossy(&blob[blob.len() - 4096..]));
    let spilled = std::fs::read(r.stdout.spill_path.expect("spill path")).unwrap();
    assert!(spilled == blob, "spill bytes differ");
}

#[tokio::test(flavor = "multi_thread")]
async fn small_output_tail_and_spill_rules() {
    let fx = Fx::new("small");
    // Small valid UTF-8: exact text, nothing on disk.
    let r = fx.run(fx.req(r"printf 'h\303\251llo\nworld'; printf 'warn\n' >&2", Mode::FullAccess)).await;
    assert_eq!(r.stdout.text, "héllo\nworld");
    assert!(!r.stdout.truncated);
    assert_eq!(r.stdout.spill_path, None);
    assert_eq!(r.stderr.text, "warn\n");
    assert_eq!(r.stderr.spill_path, None);
    assert!(!r.stderr.truncated);
    assert!(fx.state_files("out-").is_empty(), "small UTF-8 output left files: {:?}", fx.state_files("out-"));
    assert!(fx.state_files("err-").is_empty(), "small UTF-8 output left files: {:?}", fx.state_files("err-"));

    // Empty streams.
    let r = fx.run(fx.req("true", Mode::FullAccess)).await;
    assert_eq!(r.stdout, cordon::CollectedOutput::default());
    assert_eq!(r.stderr, cordon::CollectedOutput::default());

    // Small non-UTF-8: the text is lossy, so the exact bytes are kept in a spill.
    let r = fx.run(fx.req(r"printf 'a\377b\000c\303'", Mode::FullAccess)).await;
    let want: &[u8] = b"a\xffb\x00c\xc3";
    assert!(!r.stdout.truncated);
    assert_eq!(r.stdout.text, String::from_utf8_lossy(want));
    let path = r.stdout.spill_path.as_ref().expect("non-UTF-8 output keeps its spill");
    assert_private_spill(&fx, path);
    assert_eq!(std::fs::read(path).unwrap(), want);
    assert_eq!(r.stderr.spill_path, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn tail_boundary_at_the_cap() {
    let fx = Fx::new("boundary");
    // Exactly the cap: not truncated, no spill.
    let mut req = fx.req("printf '%016d' 7", Mode::FullAccess);
    req.output_cap = Some(16);
    let r = fx.run(req).await;
    assert_eq!(r.stdout.text, "0000000000000007");
    assert!(!r.stdout.truncated);
    assert_eq!(r.stdout.spill_path, None);
    // One more byte: truncated, the tail is the last cap bytes, the spill has all.
    let mut req = fx.req("printf '%017d' 7", Mode::FullAccess);
    req.output_cap = Some(16);
    let r = fx.run(req).await;
    assert_eq!(r.stdout.text, "0000000000000007");
    assert!(r.stdout.truncated);
    assert_eq!(std::fs::read(r.stdout.spill_path.unwrap()).unwrap(), b"00000000000000007");
    // A multi-byte character cut by the cap: the tail is the lossy text of the bytes.
    let mut req = fx.req(r"printf 'xx\303\251yz'", Mode::FullAccess);
    req.output_cap = Some(3);
    let r = fx.run(req).await;
    assert_eq!(r.stdout.text, "\u{FFFD}yz");
    assert!(r.stdout.truncated);
    assert_eq!(std::fs::read(r.stdout.spill_path.unwrap()).unwrap(), "xxéyz".as_bytes());
}

/// A tmpfs mounted for the life of the guard (root only).
struct TinyTmpfs {
    dir: TempDir,
    mounted: bool,
}

impl TinyTmpfs {
    fn mount(size: &str) -> Result<TinyTmpfs, String> {
        if euid() != 0 {
            return Err("mounting a tmpfs needs root".into());
        }
        let dir = temp_dir("tinyfs");
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0755"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("running mount: {e}"))?;
        if !out.status.success() {
            return Err(format!("mount -t tmpfs failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(TinyTmpfs { dir, mounted: true })
    }
}

impl Drop for TinyTmpfs {
    fn drop(&mut self) {
        if self.mounted {
            let _ = std::process::Command::new("umount").arg("-l").arg(self.dir.path()).status();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_spill_withholds_the_path_but_keeps_the_tail() {
    let test = "failed_spill_withholds_the_path_but_keeps_the_tail";
    // Needs privilege, not a kernel sandbox feature: a loud skip, never a failure.
    let fs = match TinyTmpfs::mount("64k") {
        Ok(fs) => fs,
        Err(why) => return skip_regardless(test, &why),
    };
    let fx = Fx::with("spillfail", |c| c.state_dir = Some(fs.dir.path().to_path_buf()));
    // ~1.3 MB of ASCII: the spill hits ENOSPC long before the end.
    let mut req = fx.req("seq 1 200000", Mode::FullAccess);
    req.output_cap = Some(4096);
    let r = fx.run(req).await;
    let all: String = (1..=200_000).map(|i| format!("{i}\n")).collect();
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(r.stdout.truncated);
    assert_eq!(r.stdout.text, all[all.len() - 4096..], "the tail survives a failed spill");
    assert_eq!(r.stdout.spill_path, None, "a failed spill must not be offered as complete");
    assert!(r.stdout.spill_failed && !r.stdout.spill_truncated, "a failed spill must say so: {:?}", r.stdout);
    let left = fx.state_files("out-");
    assert!(left.is_empty(), "the partial spill file was left behind: {left:?}");
    drop(fx);
}

// ------------------------------------------------------------------ 6. environment

fn parse_env(text: &str) -> BTreeMap<String, String> {
    text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

async fn check_env_scrub(test: &str, mode: Mode) {
    let fx = Fx::with("env", |c| {
        let mut env = base_env();
        for (k, v) in [
            ("MY_API_KEY", "sk-1"),
            ("GITHUB_TOKEN", "ghp-2"),
            ("CORDON_X", "3"),
            ("db_password", "4"),
            ("TERM", "xterm-256color"),
            ("PAGER", "less"),
            ("PLAIN_VAR", "kept"),
        ] {
            env.push((k.into(), v.into()));
        }
        c.ambient_env = Some(env);
    });
    let mut req = fx.req("env", mode);
    req.env = vec![("EXTRA_VAR".into(), "extra value".into())];
    let r = if mode.is_confined() {
        match fx.run_confined(test, req).await {
            Some(r) => r,
            None => return,
        }
    } else {
        fx.run(req).await
    };
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    let env = parse_env(&r.stdout.text);
    for secret in ["MY_API_KEY", "GITHUB_TOKEN", "CORDON_X", "db_password"] {
        assert!(!env.contains_key(secret), "{mode}: {secret} leaked into the command: {env:?}");
    }
    for (k, v) in [("NO_COLOR", "1"), ("TERM", "dumb"), ("PAGER", "cat"), ("GIT_PAGER", "cat")] {
        assert_eq!(env.get(k).map(String::as_str), Some(v), "{mode}: {k}");
    }
    assert_eq!(env.get("EXTRA_VAR").map(String::as_str), Some("extra value"), "{mode}");
    assert_eq!(env.get("PLAIN_VAR").map(String::as_str), Some("kept"), "{mode}");
    assert_eq!(env.get("PATH").map(String::as_str), Some(PATH_ENV), "{mode}");
    for secret in ["sk-1", "ghp-2"] {
        assert!(!r.stdout.text.contains(secret), "{mode}: a secret value is visible");
    }

    // The managed namespace cannot be set through extra env, in any case.
    for name in ["CORDON_FOO", "cordon_foo"] {
        let mut req = fx.req("true", mode);
        req.env = vec![(name.into(), "1".into())];
        let err = fx.exec.resolve(req).expect_err("extra CORDON_* env must be refused");
        assert_eq!(err.code(), "INVALID_ENV", "{name}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn env_scrub_end_to_end_full_access() {
    check_env_scrub("env_scrub_end_to_end_full_access", Mode::FullAccess).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn env_scrub_end_to_end_confined() {
    check_env_scrub("env_scrub_end_to_end_confined", Mode::WorkspaceWrite).await;
}

// ------------------------------------------------------------------ 7. stdin

#[tokio::test(flavor = "multi_thread")]
async fn stdin_bytes_are_delivered_and_epipe_is_harmless() {
    let fx = Fx::new("stdin");
    let mut req = fx.req("cat", Mode::FullAccess);
    req.stdin = Stdin::Bytes(b"hello\nworld\n".to_vec());
    let r = fx.run(req).await;
    assert_eq!(r.exit_code, Some(0));
    assert_eq!(r.stdout.text, "hello\nworld\n");

    // More than a pipe buffer of binary stdin, echoed back byte for byte.
    let blob = pseudo_random_bytes(300_000, 7);
    let mut req = fx.req("cat", Mode::FullAccess);
    req.stdin = Stdin::Bytes(blob.clone());
    req.output_cap = Some(1024);
    let r = fx.run(req).await;
    assert_eq!(r.exit_code, Some(0));
    assert!(std::fs::read(r.stdout.spill_path.expect("spill")).unwrap() == blob, "stdin bytes changed in transit");

    // Without stdin the command reads end-of-file at once.
    let r = fx.run(fx.req("cat; echo eof", Mode::FullAccess)).await;
    assert_eq!(r.stdout.text, "eof\n");

    // The command exits without reading 10 MB: EPIPE on our side is harmless.
    let big = vec![b'x'; 10_000_000];
    let mut req = fx.req("true", Mode::FullAccess);
    req.stdin = Stdin::Bytes(big.clone());
    let r = fx.run(req).await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(!r.timed_out && !r.aborted);

    // Reads a little, then exits with the rest unread.
    let mut req = fx.req("head -c 5", Mode::FullAccess);
    req.stdin = Stdin::Bytes(big);
    let r = fx.run(req).await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert_eq!(r.stdout.text, "xxxxx");
}

#[tokio::test(flavor = "multi_thread")]
async fn stdin_bytes_are_delivered_confined() {
    let test = "stdin_bytes_are_delivered_confined";
    let fx = Fx::new("stdin-conf");
    let mut req = fx.req("cat", Mode::ReadOnly);
    req.stdin = Stdin::Bytes(b"confined\n".to_vec());
    let Some(r) = fx.run_confined(test, req).await else { return };
    assert_eq!(r.stdout.text, "confined\n");
}

// ------------------------------------------------------------------ 8. background

/// Polls `read_output` until the accumulated stdout ends with `want`; returns every
/// non-empty increment and whether any read was lossy.
async fn read_until(h: &Handle, acc: &mut String, want: &str) -> (Vec<String>, bool) {
    let start = Instant::now();
    let mut pieces = vec![];
    let mut lossy = false;
    while !acc.ends_with(want) {
        let o = h.read_output();
        lossy |= o.lossy;
        if !o.stdout.is_empty() {
            acc.push_str(&o.stdout);
            pieces.push(o.stdout);
        }
        assert!(start.elapsed() < HANG, "never saw {want:?}; got {acc:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (pieces, lossy)
}

async fn done_within(h: &Handle) -> RunResult {
    tokio::time::timeout(HANG, h.done()).await.expect("done() did not resolve")
}

// A run dropped while it is being spawned beside the runtime (another run is in
// flight, so the spawn goes to the spawner thread; the caller gives up after 0 to 3
// ms, some of which land while the stage runs): the drop waits for the spawner, the
// spawner ends the run nobody awaits, nothing of it survives, later runs are fine.
// Without cgroups (whose sweep would end such a run too), so in a process of its own.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_dropped_mid_spawn_leaves_nothing_behind() {
    let test = "a_run_dropped_mid_spawn_leaves_nothing_behind";
    if std::env::var_os("CORDON_TEST_DROP_MID_SPAWN").is_none() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([&format!("executor::{test}"), "--exact", "--nocapture", "--test-threads", "1"])
            .env("CORDON_TEST_DROP_MID_SPAWN", "1")
            .env("CORDON_DISABLE_CGROUPS", "1")
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && text.contains("1 passed"), "{text}");
        return;
    }
    let fx = Fx::new("drop-mid-spawn");
    let m = unique_marker();
    let busy = fx.start(fx.req("sleep 30", Mode::FullAccess)).await;
    let mut orphans = 0;
    for i in 0..24u64 {
        let spec = fx.exec.resolve(fx.req(&format!("sleep {m}"), Mode::FullAccess)).expect("resolve");
        if tokio::time::timeout(Duration::from_micros(i * 125), fx.exec.run(spec)).await.is_err() {
            orphans += 1;
        }
    }
    assert!(orphans > 0, "control: no run was dropped");
    assert_no_process_with(&m, "runs dropped mid-spawn").await;
    let r = fx.run(fx.req("echo still-fine", Mode::FullAccess)).await;
    assert_eq!(r.stdout.text, "still-fine\n", "{r:?}");
    assert!(busy.kill());
}

// The library's process is cordon: its OOM score stays its own after runs in every
// mode (a run's init shares its memory, and the kernel copies an oom_score_adj write
// to every process sharing the writer's memory), while each command gets 1000.
#[tokio::test(flavor = "multi_thread")]
async fn runs_leave_cordons_own_oom_score_alone() {
    let test = "runs_leave_cordons_own_oom_score_alone";
    let fx = Fx::new("oom-score");
    let own = std::fs::read_to_string("/proc/self/oom_score_adj").unwrap();
    for mode in [Mode::FullAccess, Mode::WorkspaceWrite, Mode::ReadOnly] {
        let req = fx.req("cat /proc/self/oom_score_adj", mode);
        let r = if mode.is_confined() {
            let Some(r) = fx.run_confined(test, req).await else { return };
            r
        } else {
            fx.run(req).await
        };
        assert_eq!(r.stdout.text, "1000\n", "{mode}: the command is the OOM killer's first choice: {r:?}");
        let now = std::fs::read_to_string("/proc/self/oom_score_adj").unwrap();
        assert_eq!(now, own, "{mode}: a run changed cordon's own oom_score_adj");
    }
}

// Many runs of one executor in flight at once: the later ones are spawned on the
// stage's spawner thread while the runtime serves the others, and every run's init
// shares cordon's memory with its state on a stack of its own. Each result must be its
// own run's: output, exit code, or the signal it died of.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_runs_each_report_their_own_outcome() {
    let test = "concurrent_runs_each_report_their_own_outcome";
    let fx = Fx::new("concurrent");
    let signals = [libc::SIGUSR1, libc::SIGUSR2, libc::SIGALRM, libc::SIGTERM];
    for mode in [Mode::FullAccess, Mode::WorkspaceWrite] {
        let mut handles = Vec::new();
        for i in 0..16usize {
            let end = if i % 4 == 3 { format!("kill -{} $$", signals[i / 4]) } else { format!("exit {}", 10 + i) };
            let req = fx.req(&format!("echo out-{i}; sleep 0.3; {end}"), mode);
            let h = if mode.is_confined() {
                let Some(h) = fx.start_confined(test, req).await else { return };
                h
            } else {
                fx.start(req).await
            };
            handles.push((i, h));
        }
        for (i, h) in handles {
            let r = done_within(&h).await;
            assert_eq!(r.stdout.text, format!("out-{i}\n"), "{mode} run {i}: {r:?}");
            if i % 4 == 3 {
                assert_eq!((r.exit_code, r.signal), (None, Some(signals[i / 4])), "{mode} run {i}: {r:?}");
            } else {
                assert_eq!((r.exit_code, r.signal), (Some(10 + i as i32), None), "{mode} run {i}: {r:?}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn background_reads_return_only_new_bytes() {
    let fx = Fx::new("bg-read");
    // Each line waits for a go-file, so the test decides when output appears.
    let script = "echo one; while [ ! -e go1 ]; do sleep 0.01; done; \
                  echo two; while [ ! -e go2 ]; do sleep 0.01; done; echo three";
    let mut req = fx.req(script, Mode::FullAccess);
    req.output_cap = Some(16);
    let h = fx.start(req).await;
    assert_eq!(h.status(), Status::Running);
    let mut acc = String::new();
    let (_, lossy1) = read_until(&h, &mut acc, "one\n").await;
    // Nothing new until go1 exists.
    let o = h.read_output();
    assert_eq!(o.stdout, "", "a second read repeated bytes");
    assert!(!o.lossy);
    std::fs::write(fx.ws().join("go1"), "").unwrap();
    let (_, lossy2) = read_until(&h, &mut acc, "two\n").await;
    std::fs::write(fx.ws().join("go2"), "").unwrap();
    let r = done_within(&h).await;
    let (_, lossy3) = read_until(&h, &mut acc, "three\n").await;
    assert_eq!(acc, "one\ntwo\nthree\n", "reads repeated or lost bytes");
    assert!(!(lossy1 || lossy2 || lossy3), "reads kept up, yet a read claimed to be lossy");
    let o = h.read_output();
    assert_eq!((o.stdout.as_str(), o.lossy), ("", false));
    assert_eq!(r.exit_code, Some(0));
    assert_eq!(h.status(), Status::Exited);
    assert_eq!(h.exit_code(), Some(0));
    assert!(!h.kill(), "kill() after the end must return false");
}

#[tokio::test(flavor = "multi_thread")]
async fn background_lossy_flag_is_honest() {
    let fx = Fx::new("bg-lossy");
    let mut req = fx.req("seq 1 100000", Mode::FullAccess);
    req.output_cap = Some(16);
    let h = fx.start(req).await;
    let r = done_within(&h).await;
    let all: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    let o = h.read_output();
    assert!(o.lossy, "bytes were dropped before being read, yet lossy is false");
    assert_eq!(o.stdout, all[all.len() - 16..], "the read is not the newest bytes held");
    let again = h.read_output();
    assert_eq!((again.stdout.as_str(), again.lossy), ("", false), "the loss is reported once");
    // The complete stream is in the spill the result names.
    assert!(r.stdout.truncated);
    let spill = r.stdout.spill_path.as_ref().expect("the truncated stream keeps its spill");
    assert!(std::fs::read(spill).unwrap() == all.as_bytes(), "spill differs from the stream");
}

#[tokio::test(flavor = "multi_thread")]
async fn background_kill_aborts_and_reports() {
    let fx = Fx::new("bg-kill");
    let h = fx.start(fx.req("echo $$ > leader.pid; sleep 30", Mode::FullAccess)).await;
    let leader = read_pid(&fx.ws().join("leader.pid"), Duration::from_secs(10)).await;
    // Handle::pid is the run's group leader: the supervising init, the command's parent.
    assert_eq!(ppid(leader), Some(h.pid()), "Handle::pid is the command's supervising init");
    assert_eq!(h.status(), Status::Running);
    assert_eq!(h.exit_code(), None);
    assert!(h.kill(), "kill() while running must return true");
    let r = done_within(&h).await;
    assert!(r.aborted, "{r:?}");
    assert!(!r.timed_out, "an abort is never also a timeout: {r:?}");
    assert_eq!(r.signal, Some(libc::SIGTERM), "{r:?}");
    assert_eq!(h.status(), Status::Exited);
    assert_eq!(h.signal(), Some(libc::SIGTERM));
    assert_eq!(h.exit_code(), None);
    assert!(!h.kill(), "a second kill() after the end must return false");
    // done() can be awaited again and gives the same result.
    assert_eq!(done_within(&h).await, r);
    assert_gone(leader, "the killed command").await;

    // A TERM-ignoring command is SIGKILLed after the grace.
    let h = fx.start(fx.req("trap '' TERM; sleep 30 & wait", Mode::FullAccess)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(h.kill());
    let r = done_within(&h).await;
    assert!(r.aborted && !r.timed_out, "{r:?}");
    assert_eq!(r.signal, Some(libc::SIGKILL), "{r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn background_kill_confined() {
    let test = "background_kill_confined";
    let fx = Fx::new("bg-kill-conf");
    let m = unique_marker();
    let Some(h) = fx.start_confined(test, fx.req(&format!("sleep {m} & sleep {m}"), Mode::WorkspaceWrite)).await else {
        return;
    };
    // Wait until both sleepers run, so the kill has something to kill.
    wait_for_sleepers(&m, 2).await;
    assert!(h.kill());
    let r = done_within(&h).await;
    assert!(r.aborted && !r.timed_out, "{r:?}");
    // Killed by a signal, or (the shell outliving its TERM-killed child, see
    // `timeout_sends_a_deliverable_sigterm_in_every_mode`) exited with 128+N.
    assert!(r.signal.is_some() || r.exit_code.is_some_and(|c| c > 128), "{r:?}");
    assert!(!h.kill());
    assert_no_process_with(&m, "killed confined background run").await;
}

/// A TERM-ignoring full-access run with a descendant that left its process group: the
/// hard kill after the grace reaches that descendant too (cordon asks the supervising
/// init to sweep instead of SIGKILLing the group, which would orphan it).
#[tokio::test(flavor = "multi_thread")]
async fn hard_kill_reaches_descendants_that_left_the_group() {
    let fx = Fx::new("sweep");
    let m = unique_marker();
    let h = fx.start(fx.req(&format!("trap '' TERM; setsid sleep {m} & sleep {m} & wait"), Mode::FullAccess)).await;
    wait_for_sleepers(&m, 2).await;
    assert!(h.kill());
    let r = done_within(&h).await;
    assert!(r.aborted, "{r:?}");
    assert_eq!(r.signal, Some(libc::SIGKILL), "the TERM-ignoring shell was killed after the grace: {r:?}");
    assert_no_process_with(&m, "hard-killed full-access run").await;
}

// ------------------------------------------------------------------ 9, 10. no leftovers

/// Dropping the executor ends full-access runs whole, including a descendant that
/// called `setsid`.
#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_executor_kills_descendants_that_left_the_group() {
    let fx = Fx::new("drop-setsid");
    let m = unique_marker();
    let h = fx.start(fx.req(&format!("setsid sleep {m} & sleep {m} & wait"), Mode::FullAccess)).await;
    wait_for_sleepers(&m, 2).await;
    drop(fx);
    assert_no_process_with(&m, "full-access run whose executor was dropped").await;
    done_within(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_executor_kills_and_reaps_everything() {
    let fx = Fx::new("drop");
    let mut handles = vec![];
    for i in 0..3 {
        let cmd = format!("sleep 60 & echo $! > gc{i}.pid; echo $$ > leader{i}.pid; wait");
        handles.push(fx.start(fx.req(&cmd, Mode::FullAccess)).await);
    }
    let mut pids = vec![];
    for (i, h) in handles.iter().enumerate() {
        let leader = read_pid(&fx.ws().join(format!("leader{i}.pid")), Duration::from_secs(10)).await;
        assert_eq!(ppid(leader), Some(h.pid()));
        pids.push((leader, "leader"));
        pids.push((h.pid(), "supervising init"));
        pids.push((read_pid(&fx.ws().join(format!("gc{i}.pid")), Duration::from_secs(10)).await, "child"));
    }
    let _cleanup = KillOnDrop(pids.iter().map(|p| p.0).collect());
    let Fx { exec, ws: _ws, state: _state } = fx;
    drop(exec);
    for (pid, what) in &pids {
        assert_gone(*pid, &format!("{what} of a run whose executor was dropped")).await;
    }
    for h in &handles {
        let r = done_within(h).await;
        assert_eq!(r.exit_code, None, "{r:?}");
        assert_eq!(h.status(), Status::Exited);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_executor_kills_confined_runs() {
    let test = "dropping_the_executor_kills_confined_runs";
    let fx = Fx::new("drop-conf");
    let m = unique_marker();
    let Some(h) = fx.start_confined(test, fx.req(&format!("sleep {m} & sleep {m}"), Mode::ReadOnly)).await else {
        return;
    };
    wait_for_sleepers(&m, 2).await;
    let leader = h.pid();
    drop(fx);
    assert_gone(leader, "leader of a confined run whose executor was dropped").await;
    assert_no_process_with(&m, "confined run whose executor was dropped").await;
    done_within(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn foreground_run_leaves_nothing_of_its_group() {
    let fx = Fx::new("fg-group");
    let r = fx.run(fx.req("sleep 60 & echo $!", Mode::FullAccess)).await;
    assert_eq!(r.exit_code, Some(0));
    let pid: i32 = r.stdout.text.trim().parse().expect("the background pid");
    let _cleanup = KillOnDrop(vec![pid]);
    assert_gone(pid, "a background job of a finished foreground run").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn foreground_run_leaves_nothing_confined() {
    let test = "foreground_run_leaves_nothing_confined";
    let fx = Fx::new("fg-group-conf");
    let m = unique_marker();
    let cmd = format!("sleep {m} & setsid sleep {m} & (trap '' TERM HUP; exec sleep {m}) & echo started");
    let Some(r) = fx.run_confined(test, fx.req(&cmd, Mode::WorkspaceWrite)).await else { return };
    assert_eq!(r.stdout.text, "started\n");
    assert_no_process_with(&m, "background jobs of a finished confined run").await;
}

// ------------------------------------------------------------------ fail closed (library)

#[tokio::test(flavor = "multi_thread")]
async fn sandbox_unavailable_runs_nothing() {
    let ws = temp_dir("unavail-ws");
    let state = temp_dir("unavail-state");
    let host = HostFacts::detect_with(|name| match name {
        "CORDON_DISABLE_RUNNERS" => Some("landlock,bwrap,seatbelt".into()),
        other => std::env::var(other).ok(),
    });
    let mut cfg = test_config();
    cfg.state_dir = Some(state.path().to_path_buf());
    let exec = Executor::with_host(cfg, host).unwrap();
    for mode in [Mode::ReadOnly, Mode::WorkspaceWrite] {
        let mut req = Request::shell("touch sentinel");
        req.workdir = Some(ws.path().to_path_buf());
        req.policy.mode = mode;
        req.policy.best_effort = true;
        let err = match exec.resolve(req) {
            Ok(spec) => exec.run(spec).await.expect_err("no runner can enforce the mode"),
            Err(e) => e,
        };
        assert_eq!(err.code(), "SANDBOX_UNAVAILABLE", "{mode}: {err}");
        assert!(!ws.path().join("sentinel").exists(), "{mode}: the command ran");
    }
    // full-access never needs a confining runner.
    let mut req = Request::shell("touch sentinel");
    req.workdir = Some(ws.path().to_path_buf());
    req.policy.mode = Mode::FullAccess;
    let r = exec.run(exec.resolve(req).unwrap()).await.unwrap();
    assert_eq!(r.exit_code, Some(0));
    assert!(ws.path().join("sentinel").exists());
}

// ------------------------------------------------------------------ 11, 12. CLI

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap_or_else(|| panic!("not an object: {v}")).keys().cloned().collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Asserts the exact field names of a `cordon run --json` result.
fn assert_result_shape(v: &Value) {
    assert_eq!(
        keys(v),
        set(&[
            "exit_code",
            "signal",
            "timed_out",
            "aborted",
            "timeout_ms",
            "stdout",
            "stderr",
            "sandbox",
            "limit",
            "limits"
        ]),
        "{v}"
    );
    let mut limits = keys(&v["limits"]);
    // `gaps` is present only when a limit is not fully enforced.
    limits.remove("gaps");
    assert_eq!(limits, set(&["memory", "memory_by", "pids", "pids_by", "cpu", "tmpfs_size"]), "limits: {v}");
    for s in ["stdout", "stderr"] {
        assert_eq!(
            keys(&v[s]),
            set(&["text", "truncated", "spill_path", "spill_truncated", "spill_failed"]),
            "{s}: {v}"
        );
        assert!(v[s]["spill_truncated"].is_boolean() && v[s]["spill_failed"].is_boolean(), "{v}");
        assert!(v[s]["text"].is_string() && v[s]["truncated"].is_boolean(), "{v}");
    }
    let mut sandbox = keys(&v["sandbox"]);
    // `skipped` is documented as present only when selection passed runners over.
    if sandbox.remove("skipped") {
        assert!(v["sandbox"]["skipped"].as_array().is_some_and(|a| !a.is_empty()), "{v}");
    }
    // `local_ipc` is present exactly when the run was confined with the network off.
    let confined = v["sandbox"]["mode"] != "full-access";
    assert_eq!(sandbox.remove("local_ipc"), confined, "local_ipc with the network off only: {v}");
    if confined {
        assert!(matches!(v["sandbox"]["local_ipc"]["status"].as_str(), Some("own-namespace" | "refused")), "{v}");
    }
    assert_eq!(
        sandbox,
        set(&["mode", "runner", "denied", "denials", "enforcement", "runner_failed", "writable_roots", "protected"]),
        "sandbox: {v}"
    );
    assert_eq!(keys(&v["sandbox"]["enforcement"]), set(&["level", "gaps"]), "{v}");
    assert!(v["sandbox"]["denials"].is_array() && v["sandbox"]["enforcement"]["gaps"].is_array(), "{v}");
    assert!(v["timed_out"].is_boolean() && v["aborted"].is_boolean() && v["timeout_ms"].is_u64(), "{v}");
}

/// `Some(out)` for a confined CLI run, or `None` after a loud skip on SANDBOX_UNAVAILABLE.
fn cli_confined(test: &str, out: CliOut) -> Option<CliOut> {
    if out.code == 125 && out.stdout.contains("SANDBOX_UNAVAILABLE") {
        skip_or_fail(test, out.stderr.trim());
        return None;
    }
    Some(out)
}

#[test]
fn cli_json_shape_and_exit_status() {
    let ws = temp_dir("cli-shape");
    let cwd = ws.path();
    let out = cordon(
        &["run", "--json", "--mode", "full-access", "--timeout", "2.5", "-c", "echo hi; echo oops >&2; exit 3"],
        cwd,
        &[],
    );
    assert_eq!(out.code, 3, "exit status mirrors the command; stderr: {}", out.stderr);
    let v = out.json();
    assert_result_shape(&v);
    assert_eq!(v["exit_code"], 3);
    assert_eq!(v["signal"], Value::Null);
    assert_eq!(v["timeout_ms"], 2500);
    assert_eq!(v["stdout"]["text"], "hi\n");
    assert_eq!(v["stderr"]["text"], "oops\n");
    assert_eq!(v["stdout"]["spill_path"], Value::Null);
    assert_eq!(v["sandbox"]["mode"], "full-access");
    assert_eq!(v["sandbox"]["runner"], "passthrough");
    assert_eq!(v["sandbox"]["enforcement"]["level"], "none");
    assert_eq!(v["sandbox"]["enforcement"]["gaps"], serde_json::json!([]));
    assert_eq!(v["sandbox"]["denied"], false);
    assert_eq!(v["sandbox"]["runner_failed"], false);

    let out = cordon(&["run", "--json", "--mode", "full-access", "-c", "kill -9 $$"], cwd, &[]);
    assert_eq!(out.code, 137, "killed by signal 9 → 128+9; stderr: {}", out.stderr);
    let v = out.json();
    assert_result_shape(&v);
    assert_eq!(v["signal"], 9);
    assert_eq!(v["exit_code"], Value::Null);

    // A timeout reports and exits as a SIGKILL/SIGTERM death, not success.
    let out = cordon(&["run", "--json", "--mode", "full-access", "--timeout", "0.3", "--", "sleep", "30"], cwd, &[]);
    let v = out.json();
    assert_result_shape(&v);
    assert_eq!(v["timed_out"], true, "{v}");
    assert_eq!(v["aborted"], false, "{v}");
    assert_eq!(out.code, 128 + v["signal"].as_i64().expect("signal") as i32);
}

/// `CORDON_TRACE_PHASES=1` (bench/spawn.sh's profile): one line on stderr naming every
/// phase of the run with a duration, after the command's own output; nothing without it.
#[test]
fn cli_phase_trace_names_every_phase_only_when_asked() {
    let ws = temp_dir("cli-phases");
    let args = ["run", "--mode", "full-access", "-c", "echo out; echo err >&2"];
    let out = cordon(&args, ws.path(), &[("CORDON_TRACE_PHASES", "1")]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "out\n");
    let line = out.stderr.lines().last().unwrap_or_default();
    let phases: Vec<(&str, u64)> = line
        .strip_prefix("cordon: phases (µs): ")
        .unwrap_or_else(|| panic!("no phase line last on stderr: {:?}", out.stderr))
        .split(' ')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or_else(|| panic!("not name=µs: {kv:?}"));
            (k, v.parse().unwrap_or_else(|_| panic!("not a number of µs: {kv:?}")))
        })
        .collect();
    let names: Vec<&str> = phases.iter().map(|(k, _)| *k).collect();
    for want in
        ["parse", "runtime", "host_facts", "cgroup_layout", "resolve", "plan", "stage_plan", "spawn", "command_exit"]
    {
        assert!(names.contains(&want), "phase {want} missing from {line}");
    }
    assert!(out.stderr.starts_with("err\n"), "the command's stderr comes first: {:?}", out.stderr);

    let plain = cordon(&args, ws.path(), &[("CORDON_TRACE_PHASES", "0")]);
    assert_eq!(plain.stderr, "err\n", "no trace unless CORDON_TRACE_PHASES=1");
}

#[test]
fn cli_confined_json_shape_and_runner() {
    let test = "cli_confined_json_shape_and_runner";
    let ws = temp_dir("cli-conf");
    let cwd = ws.path();
    let Some(out) = cli_confined(test, cordon(&["run", "--json", "--mode", "read-only", "-c", "exit 4"], cwd, &[]))
    else {
        return;
    };
    assert_eq!(out.code, 4, "stderr: {}", out.stderr);
    let v = out.json();
    assert_result_shape(&v);
    assert_eq!(v["sandbox"]["mode"], "read-only");
    assert_eq!(v["sandbox"]["runner"], "landlock", "{v}");
    assert_ne!(v["sandbox"]["enforcement"]["level"], "none", "{v}");
    // The default mode is workspace-write.
    let Some(out) = cli_confined(test, cordon(&["run", "--json", "--", "true"], cwd, &[])) else { return };
    assert_eq!(out.code, 0);
    assert_eq!(out.json()["sandbox"]["mode"], "workspace-write");
}

#[test]
fn cli_self_kill_status_in_confined_mode() {
    // `kill -9 $$` must end the command with 137 in every mode: a command that signals
    // itself expects to die (scripts use `kill $$` to abort).
    let test = "cli_self_kill_status_in_confined_mode";
    let ws = temp_dir("cli-selfkill");
    let Some(out) = cli_confined(
        test,
        cordon(&["run", "--json", "--mode", "workspace-write", "-c", "kill -9 $$; echo survived"], ws.path(), &[]),
    ) else {
        return;
    };
    let v = out.json();
    assert_eq!(v["stdout"]["text"], "", "the command survived its own SIGKILL: {v}");
    assert_eq!(out.code, 137, "{v}");
    assert_eq!(v["signal"], 9, "{v}");
}

#[test]
fn cli_errors_before_running() {
    let ws = temp_dir("cli-err");
    let cwd = ws.path();

    let out = cordon(&["run", "--json", "--cwd", "/nonexistent/cordon-test", "-c", "true"], cwd, &[]);
    assert_eq!(out.code, 125, "stderr: {}", out.stderr);
    assert_eq!(out.error_code(), "WORKDIR_UNAVAILABLE");
    assert!(out.stderr.contains("WORKDIR_UNAVAILABLE"), "stderr names the code: {}", out.stderr);

    for mode in ["read-only", "workspace-write"] {
        let out = cordon(
            &["run", "--json", "--mode", mode, "-c", "touch sentinel"],
            cwd,
            &[("CORDON_DISABLE_RUNNERS", "landlock,bwrap,seatbelt")],
        );
        assert_eq!(out.code, 125, "{mode}: stdout {} stderr {}", out.stdout, out.stderr);
        assert_eq!(out.error_code(), "SANDBOX_UNAVAILABLE", "{mode}");
        let reasons = &out.json()["error"]["reasons"];
        assert!(reasons.as_array().is_some_and(|r| !r.is_empty()), "{mode}: reasons per runner: {}", out.stdout);
        assert!(!cwd.join("sentinel").exists(), "{mode}: the command ran although no runner could enforce it");
    }

    let out = cordon(&["run", "--json", "--mode", "full-access", "--", "cordon-no-such-program-xyz"], cwd, &[]);
    assert_eq!(out.code, 127, "stderr: {}", out.stderr);
    assert_eq!(out.error_code(), "PROGRAM_NOT_FOUND");

    let script = cwd.join("not-executable.sh");
    std::fs::write(&script, "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = cordon(&["run", "--json", "--mode", "full-access", "--", "./not-executable.sh"], cwd, &[]);
    assert_eq!(out.code, 126, "stderr: {}", out.stderr);
    assert_eq!(out.error_code(), "PROGRAM_NOT_EXECUTABLE");

    let out = cordon(&["run", "--json", "--mode", "full-access", "--env", "CORDON_FOO=1", "-c", "true"], cwd, &[]);
    assert_eq!(out.code, 125, "stderr: {}", out.stderr);
    assert_eq!(out.error_code(), "INVALID_ENV");

    // Usage errors: exit 2, nothing on stdout.
    for args in [
        &["run", "--mode", "bogus", "--", "true"][..],
        &["run", "--timeout", "abc", "--", "true"],
        &["run", "--timeout", "0", "--", "true"],
        &["run", "--env", "NOEQUALS", "--", "true"],
        &["run", "--runner", "chroot", "--", "true"],
        &["run", "--json"],
        &["frobnicate"],
    ] {
        let out = cordon(args, cwd, &[]);
        assert_eq!(out.code, 2, "{args:?}: stdout {} stderr {}", out.stdout, out.stderr);
        assert_eq!(out.stdout, "", "{args:?}");
    }
}

#[test]
fn cli_unknown_flag_before_the_program_is_a_usage_error() {
    let ws = temp_dir("cli-flag");
    let cwd = ws.path();
    for args in [&["run", "--bogus", "--", "true"][..], &["run", "--json", "--no-such-flag", "-c", "true"]] {
        let out = cordon(args, cwd, &[]);
        assert_eq!(
            out.code, 2,
            "{args:?}: an unknown flag must be a usage error; stdout {} stderr {}",
            out.stdout, out.stderr
        );
    }
    // Hyphenated arguments after the program still belong to the program.
    let out = cordon(&["run", "--json", "--mode", "full-access", "--", "echo", "-n", "--bogus"], cwd, &[]);
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    assert_eq!(out.json()["stdout"]["text"], "--bogus");
}

#[test]
fn cli_mode_names_round_trip() {
    let test = "cli_mode_names_round_trip";
    let ws = temp_dir("cli-modes");
    for mode in ["read-only", "workspace-write", "full-access"] {
        let out = cordon(&["run", "--json", "--mode", mode, "--", "true"], ws.path(), &[]);
        let Some(out) =
            (if mode == "full-access" { Some(out) } else { cli_confined(&format!("{test} ({mode})"), out) })
        else {
            continue;
        };
        assert_eq!(out.code, 0, "stderr: {}", out.stderr);
        assert_eq!(out.json()["sandbox"]["mode"], mode);
    }
    for bad in ["Read-Only", "READ-ONLY", "readonly", "read_only", "", "full"] {
        let out = cordon(&["run", "--json", "--mode", bad, "--", "true"], ws.path(), &[]);
        assert_eq!(out.code, 2, "--mode {bad:?} must be rejected; stdout {}", out.stdout);
        assert!(out.stderr.contains("read-only, workspace-write or full-access"), "{bad:?}: {}", out.stderr);
    }
}

/// An argument over the kernel's per-string limit fails `execve` with E2BIG: its own
/// error code (the request is too big), not RUNNER_FAILED, and nothing runs.
#[tokio::test(flavor = "multi_thread")]
async fn argument_list_too_long_has_its_own_code() {
    let fx = Fx::new("e2big");
    let huge = "x".repeat(200 * 1024); // MAX_ARG_STRLEN is 128 KiB
    for mode in [Mode::FullAccess, Mode::WorkspaceWrite] {
        let mut req = Request::argv(["/bin/echo", huge.as_str()]);
        req.workdir = Some(fx.ws().to_path_buf());
        req.policy.mode = mode;
        match fx.try_run(req).await {
            Err(e) => assert_eq!(e.code(), "ARGUMENT_LIST_TOO_LONG", "{mode}: {e}"),
            Ok(r) => panic!("{mode}: ran with a 200 KiB argument: {r:?}"),
        }
    }
}

// ------------------------------------------------------- the bwrap stage helper

/// A bwrap request, or `None` (after a loud skip) when this host has no bubblewrap.
fn bwrap_req(test: &str, fx: &Fx, cmd: &str, mode: Mode) -> Option<Request> {
    if fx.exec.host().bwrap.is_none() {
        skip_or_fail(test, "bubblewrap is not installed");
        return None;
    }
    let mut r = fx.req(cmd, mode);
    r.runner = cordon::runner::RunnerChoice::Only(cordon::runner::RunnerKind::Bwrap);
    Some(r)
}

/// A program path that is not normalized (`ws/sub/../mark.sh`, `./mark.sh`) runs under
/// bubblewrap (issue 25 finding 9): it was refused as `INVALID_POLICY ... cannot be
/// passed to bwrap`, since bubblewrap takes only normalized paths; the executor now
/// hands every planner the normalized path. Judged by the marker the script writes.
#[tokio::test]
async fn bwrap_runs_a_program_path_that_is_not_normalized() {
    let test = "bwrap_runs_a_program_path_that_is_not_normalized";
    let fx = Fx::with("bwrap-badpath", |c| c.stage_helper = Some(env!("CARGO_BIN_EXE_cordon").into()));
    let Some(base) = bwrap_req(test, &fx, "true", Mode::WorkspaceWrite) else { return };
    std::fs::create_dir(fx.ws().join("sub")).unwrap();
    let script = fx.ws().join("mark.sh");
    std::fs::write(&script, "#!/bin/sh\necho ran >> \"$(dirname \"$0\")/marker\"\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let with_program = |program: &str| {
        let mut r = base.clone();
        r.command = cordon::Command::Argv(vec![program.into()]);
        r
    };
    let odd = format!("{}/sub/../mark.sh", fx.ws().display());
    for program in [script.to_str().unwrap(), &odd, "./mark.sh"] {
        let r = fx.try_run(with_program(program)).await.unwrap_or_else(|e| panic!("{program}: {} ({e})", e.code()));
        assert_eq!(r.exit_code, Some(0), "{program}: {r:?}");
        assert_eq!(std::fs::read_to_string(fx.ws().join("marker")).unwrap(), "ran\n", "{program}");
        std::fs::remove_file(fx.ws().join("marker")).unwrap();
    }
}

/// A FIFO with a reader opened non-blocking; returns the reader.
fn fifo_with_reader(path: &Path) -> std::fs::File {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o666)).expect("mkfifo");
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).expect("open the reader")
}

fn drain(reader: &mut std::fs::File) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    while let Ok(n) = reader.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

#[tokio::test]
async fn bwrap_without_a_stage_helper_declares_the_fs_write_gap() {
    let test = "bwrap_without_a_stage_helper_declares_the_fs_write_gap";
    // A library user who configured no helper: FIFOs outside stay writable under
    // bubblewrap alone, so hard mode refuses and best effort names the gap.
    let fx = Fx::with("nohelper", |c| c.stage_helper = None);
    let Some(req) = bwrap_req(test, &fx, "echo ran", Mode::ReadOnly) else { return };
    match fx.try_run(req.clone()).await {
        Err(CordonError::SandboxUnavailable { reasons, .. }) => {
            assert!(reasons.iter().any(|r| r.reason.contains("fs-write")), "{reasons:?}")
        }
        other => panic!("hard mode must refuse bwrap without a stage helper: {other:?}"),
    }
    let mut be = req;
    be.policy.best_effort = true;
    let r = fx.run(be).await;
    assert_eq!(r.stdout.text, "ran\n", "{r:?}");
    assert!(r.sandbox.enforcement.gaps.iter().any(|g| g.restriction == "fs-write"), "{r:?}");
}

#[tokio::test]
async fn bwrap_stage_helper_refuses_a_host_fifo() {
    let test = "bwrap_stage_helper_refuses_a_host_fifo";
    let fx = Fx::with("helper", |c| c.stage_helper = Some(env!("CARGO_BIN_EXE_cordon").into()));
    let outside = temp_dir("helper-outside");
    let fifo = outside.path().join("fifo");
    let mut reader = fifo_with_reader(&fifo);
    let cmd = format!("echo pwned > '{}'; echo done", fifo.display());
    let Some(req) = bwrap_req(test, &fx, &cmd, Mode::WorkspaceWrite) else { return };
    let Some(r) = fx.run_confined(test, req).await else { return };
    assert_eq!(r.stdout.text, "done\n", "the command ran: {r:?}");
    assert!(r.stderr.text.contains("Permission denied"), "{r:?}");
    assert!(drain(&mut reader).is_empty(), "a host FIFO reader received bytes: {r:?}");
    assert!(!r.sandbox.runner_failed && r.sandbox.enforcement.gaps.is_empty(), "{r:?}");
    // Control: the same write on the host arrives.
    std::process::Command::new("/bin/sh").arg("-c").arg(format!("echo x > '{}'", fifo.display())).status().unwrap();
    assert_eq!(drain(&mut reader), b"x\n");
}

#[tokio::test]
async fn bwrap_stage_helper_that_never_confines_fails_the_run() {
    let test = "bwrap_stage_helper_that_never_confines_fails_the_run";
    // Not a cordon binary: it exits without the helper's success record, so the run is
    // RUNNER_FAILED (an error, never a result claiming a level) and the command never
    // ran. Started in the background, the result says runner_failed with level none.
    let fx = Fx::with("badhelper", |c| c.stage_helper = Some("/bin/true".into()));
    let Some(req) = bwrap_req(test, &fx, "echo ran", Mode::ReadOnly) else { return };
    match fx.try_run(req).await {
        Err(e @ CordonError::SandboxUnavailable { .. }) => return skip_or_fail(test, &e.to_string()),
        Err(e) => assert_eq!(e.code(), "RUNNER_FAILED", "{e}"),
        Ok(r) => panic!("a failed helper gave a result: {r:?}"),
    }
    let Some(req) = bwrap_req(test, &fx, "echo ran", Mode::ReadOnly) else { return };
    let Some(h) = fx.start_confined(test, req).await else { return };
    let r = h.done().await;
    assert!(r.sandbox.runner_failed, "{r:?}");
    assert_eq!(r.sandbox.enforcement.level, cordon::EnforcementLevel::None, "{r:?}");
    assert!(!r.stdout.text.contains("ran"), "{r:?}");
}

#[tokio::test]
async fn bwrap_stage_helper_hands_its_listener_to_the_supervisor() {
    let test = "bwrap_stage_helper_hands_its_listener_to_the_supervisor";
    // A refused connect() is reported as a denial with the supervisor's evidence, as
    // under the landlock runner (to another host: the run's own loopback is its own).
    let fx = Fx::with("helpernotify", |c| c.stage_helper = Some(env!("CARGO_BIN_EXE_cordon").into()));
    let probe = "exec 3<>/dev/tcp/192.0.2.1/9; echo after";
    let Some(req) = bwrap_req(test, &fx, probe, Mode::ReadOnly) else { return };
    let Some(r) = fx.run_confined(test, req).await else { return };
    assert!(!r.sandbox.runner_failed, "{r:?}");
    assert!(
        r.sandbox
            .denials
            .iter()
            .any(|d| d.kind == cordon::DenialKind::Network && d.evidence.contains("seccomp supervisor")),
        "no supervisor evidence for a refused connect(): {r:?}"
    );
}

/// cordon's state directory (spill files) inside a writable root: the command could
/// swap it for a symlink and make cordon create files elsewhere, or forge a spill. With
/// a mount layer it is kept read-only like a protected path (a workspace of `/tmp`
/// holds it); without one the run is refused before anything runs. Judged by effect:
/// the workspace is writable, the state directory is not.
#[tokio::test(flavor = "multi_thread")]
async fn state_dir_inside_a_writable_root_stays_read_only() {
    let ws = temp_dir("statews");
    let mut cfg = test_config();
    std::fs::create_dir(ws.path().join("state")).unwrap();
    cfg.state_dir = Some(ws.path().join("state"));
    let exec = Executor::new(cfg).expect("create the executor");
    let state = exec.state_dir().to_path_buf();
    let marker = ws.path().join("ran");
    let forged = state.join("forged");
    let mut req = Request::shell(format!("touch {}; touch {}; true", marker.display(), forged.display()));
    req.workdir = Some(ws.path().to_path_buf());
    req.policy.mode = Mode::WorkspaceWrite;
    let spec = exec.resolve(req).expect("resolve");
    let mount_layer = exec.host().namespaces.available();
    match exec.run(spec).await {
        Err(e) => {
            assert!(!mount_layer, "with a mount layer the run must go ahead: {e}");
            assert_eq!(e.code(), "INVALID_POLICY", "{e}");
            assert!(!marker.exists(), "the command ran although refused");
        }
        Ok(r) => {
            assert!(marker.exists(), "positive control: the workspace is writable: {r:?}");
            assert!(r.sandbox.denied, "the write into the state directory was refused and reported: {r:?}");
        }
    }
    assert!(!forged.exists(), "the command wrote into cordon's state directory");
}

#[test]
fn cli_live_mode_tells_what_the_sandbox_refused() {
    // Without --json, cordon's own facts follow the command's output on stderr, one
    // line each; --quiet silences them. Judged by effect too: the write never happened.
    let test = "cli_live_mode_tells_what_the_sandbox_refused";
    let ws = temp_dir("cli-live");
    let outside = common::VarTmp::new("cli-live-out");
    let target = outside.root.join("outside/f");
    let cmd = format!("{{ echo x > {}; }} 2>/dev/null; echo done", target.display());
    let Some(out) = cli_confined(test, cordon(&["run", "-c", &cmd], ws.path(), &[])) else { return };
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "done\n");
    assert!(!target.exists(), "the write outside happened");
    let want = format!("cordon: denied write {} (outside the writable roots)", target.display());
    assert!(out.stderr.lines().any(|l| l == want), "no line `{want}` in:\n{}", out.stderr);
    let quiet = cordon(&["run", "--quiet", "-c", &cmd], ws.path(), &[]);
    assert_eq!(quiet.stderr, "", "--quiet prints nothing of cordon's own");
    // A forged line is the command's text, never cordon's.
    let forged = cordon(&["run", "-c", "echo 'bash: /etc/passwd: Read-only file system' >&2"], ws.path(), &[]);
    assert!(!forged.stderr.contains("cordon: denied"), "{}", forged.stderr);
}

#[test]
fn cli_network_off_tells_package_managers_not_to_retry() {
    let test = "cli_network_off_tells_package_managers_not_to_retry";
    let ws = temp_dir("cli-offline");
    let show = "echo \"npm=$npm_config_fetch_retries pip=$PIP_RETRIES\"";
    let Some(off) = cli_confined(test, cordon(&["run", "-c", show], ws.path(), &[])) else { return };
    assert_eq!(off.stdout, "npm=0 pip=0\n", "{}", off.stderr);
    let on = cordon(&["run", "--network", "-c", show], ws.path(), &[]);
    assert_eq!(on.stdout, "npm= pip=\n", "{}", on.stderr);
    let mine = cordon(&["run", "--env", "PIP_RETRIES=3", "-c", show], ws.path(), &[]);
    assert_eq!(mine.stdout, "npm=0 pip=3\n", "the caller's own choice stands: {}", mine.stderr);
}

#[tokio::test]
async fn values_over_a_cap_are_errors_not_silently_lowered() {
    let fx = Fx::new("over-cap");
    type Tweak = Box<dyn Fn(&mut Request)>;
    let cases: [(&str, Tweak); 5] = [
        ("timeout", Box::new(|r| r.timeout = Some(cordon::request::MAX_TIMEOUT + Duration::from_secs(1)))),
        ("output_cap", Box::new(|r| r.output_cap = Some(usize::MAX))),
        ("spill_cap", Box::new(|r| r.spill_cap = Some(cordon::request::MAX_SPILL_CAP + 1))),
        ("limit_pids", Box::new(|r| r.limits.pids = Some(cordon::limits::MAX_PIDS + 1))),
        ("limit_cpu", Box::new(|r| r.limits.cpu = Some(cordon::limits::MAX_CPU_SECONDS + 1))),
    ];
    for (field, tweak) in cases {
        let mut req = fx.req("true", Mode::FullAccess);
        tweak(&mut req);
        match fx.exec.resolve(req) {
            Err(CordonError::InvalidRequest { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field} over its cap: expected INVALID_REQUEST, got {other:?}"),
        }
    }
    // At the cap is fine.
    let mut req = fx.req("true", Mode::FullAccess);
    req.timeout = Some(cordon::request::MAX_TIMEOUT);
    req.limits.pids = Some(cordon::limits::MAX_PIDS);
    let spec = fx.exec.resolve(req).expect("values at their caps");
    assert_eq!(spec.timeout, cordon::request::MAX_TIMEOUT);
}

#[test]
fn probe_doctor_and_run_agree_on_the_workspace() {
    // `cordon probe` judges the current directory as `cordon run` does: in `/`,
    // `/tmp`, `$HOME`, a fresh directory and a git repository, for every mode, probe's
    // auto selection names the runner `run` uses, or the error code `run` gives.
    // `cordon doctor` reports the same verdicts for its current directory.
    if let Some(reason) = crate::common::cli::confined_unavailable() {
        return skip_or_fail("probe_doctor_and_run_agree_on_the_workspace", &reason);
    }
    let fresh = temp_dir("agree-fresh");
    let repo = temp_dir("agree-repo");
    let git = std::process::Command::new("git").args(["init", "-q"]).current_dir(repo.path()).status();
    assert!(git.is_ok_and(|s| s.success()), "git init");
    let mut dirs: Vec<PathBuf> = vec!["/".into(), "/tmp".into()];
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_dir()) {
        dirs.push(home);
    }
    dirs.extend([fresh.path().to_path_buf(), repo.path().to_path_buf()]);
    let verdicts = |auto: &Value| -> Vec<(String, String)> {
        auto.as_array()
            .expect("a list of modes")
            .iter()
            .map(|a| {
                let mode = a["mode"].as_str().unwrap().to_string();
                match a["runner"].as_str() {
                    Some(r) => (mode, format!("runner {r}")),
                    None => (mode, format!("error {}", a["error"]["code"].as_str().unwrap_or("?"))),
                }
            })
            .collect()
    };
    let mut errors = 0;
    for dir in &dirs {
        let probe = cordon(&["probe", "--json"], dir, &[]);
        assert_eq!(probe.code, 0, "{}", probe.stderr);
        let p = probe.json();
        assert_eq!(
            p["workspace"],
            dir.canonicalize().unwrap().to_str().unwrap(),
            "probe names the workspace it judged"
        );
        for (mode, said) in verdicts(&p["auto"]) {
            let run = cordon(&["run", "--json", "--mode", &mode, "--", "true"], dir, &[]);
            let v = run.json();
            let did = match v["sandbox"]["runner"].as_str() {
                Some(r) if run.code == 0 => format!("runner {r}"),
                _ => format!("error {}", v["error"]["code"].as_str().unwrap_or("?")),
            };
            assert_eq!(said, did, "{} in {}: probe and run disagree: {}", mode, dir.display(), run.stderr);
            errors += usize::from(did.starts_with("error"));
        }
    }
    assert!(errors > 0, "positive control: some directory (/, $HOME) is refused for workspace-write");
    let doctor = cordon(&["doctor", "--json"], Path::new("/"), &[]);
    let d = doctor.json();
    assert_eq!(d["workspace"]["path"], "/", "{}", doctor.stdout);
    let probe = cordon(&["probe", "--json"], Path::new("/"), &[]).json();
    let from_doctor: Vec<(String, String)> = d["workspace"]["modes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let mode = m["mode"].as_str().unwrap().to_string();
            match m["runner"].as_str() {
                Some(r) => (mode, format!("runner {r}")),
                None => (mode, format!("error {}", m["error_code"].as_str().unwrap_or("?"))),
            }
        })
        .collect();
    assert_eq!(from_doctor, verdicts(&probe["auto"]), "doctor and probe disagree in /");
}

/// Issue 26, limits: long runs are possible. `cordon run --timeout` has no cap (it was
/// 600 s, more an error); the default deadline stays 120 s. Judged by the deadline the
/// result says applied, in full-access (the deadline is the executor's, whatever the
/// mode).
#[test]
fn the_command_line_takes_a_deadline_past_ten_minutes() {
    let ws = tempfile::tempdir().unwrap();
    let long = cordon(&["run", "--json", "--mode", "full-access", "--timeout", "7200", "--", "true"], ws.path(), &[]);
    assert_eq!(long.json()["timeout_ms"], 7_200_000, "{}", long.stderr);
    assert_eq!(long.json()["exit_code"], 0);
    let default = cordon(&["run", "--json", "--mode", "full-access", "--", "true"], ws.path(), &[]);
    assert_eq!(default.json()["timeout_ms"], 120_000, "the default is unchanged: {}", default.stderr);
}

/// Issue 26, messages: a recursive `rm` under a protected `.git` is one live line for
/// that `.git` (with the count and a few paths), not one per file; a write elsewhere
/// keeps its own line. Judged by cordon's stderr and by the repository's files, which
/// are all still there.
#[test]
fn live_denials_under_a_protected_git_are_one_line() {
    let test = "live_denials_under_a_protected_git_are_one_line";
    if let Some(reason) = crate::common::cli::confined_unavailable() {
        return skip_or_fail(test, &reason);
    }
    let dirs = common::VarTmp::new("grouped-denials");
    let ws = dirs.ws();
    let objects = ws.join(".git/objects");
    for i in 0..12 {
        let d = objects.join(format!("{i:02}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("obj"), "x").unwrap();
    }
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::create_dir_all(ws.join(".git/refs")).unwrap();
    let out = cordon(&["run", "--mode", "workspace-write", "-c", "rm -rf .git/objects; touch /etc/cordon-x"], &ws, &[]);
    let lines: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("cordon: denied")).collect();
    let git = format!("cordon: denied write {} (", ws.join(".git").display());
    assert_eq!(lines.iter().filter(|l| l.starts_with(&git)).count(), 1, "one line for .git: {}", out.stderr);
    assert!(lines.iter().any(|l| l.starts_with(&git) && l.contains("paths, a protected path)")), "{}", out.stderr);
    assert!(lines.iter().any(|l| l.contains("/etc/cordon-x")), "the other write keeps its line: {}", out.stderr);
    assert_eq!(lines.len(), 2, "{}", out.stderr);
    assert_eq!(std::fs::read_dir(&objects).unwrap().count(), 12, "the objects are all still there");
}

/// Issue 26, messages: a workspace refused for `workspace-write` (`/`, a home, a
/// system directory) names the ways on: `--cwd DIR` or `--mode read-only`.
#[test]
fn a_refused_workspace_names_the_alternatives() {
    let out = cordon(&["run", "--cwd", "/", "--", "true"], Path::new("/"), &[]);
    assert_eq!(out.code, 125, "{}", out.stderr);
    assert!(out.stderr.contains("INVALID_POLICY"), "{}", out.stderr);
    assert!(out.stderr.contains("--cwd DIR") && out.stderr.contains("--mode read-only"), "{}", out.stderr);
    let ro = cordon(&["run", "--cwd", "/", "--mode", "read-only", "--", "true"], Path::new("/"), &[]);
    assert_eq!(ro.code, 0, "the alternative works: {}", ro.stderr);
}
