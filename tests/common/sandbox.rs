//! Harness for cordon's security suite (`tests/security.rs`) and the lifecycle suite
//! (`tests/lifecycle.rs`); Linux only.
//!
//! What it provides:
//! - [`suite`]: built once per test binary. Compiles `tests/probe/probe.c` with `cc`
//!   into `/var/tmp/cordon-tests-<pid>/` (mode 0755; NOT under `/tmp`, which is private
//!   inside the sandbox) and copies the `cordon` binary there, so an unprivileged uid can
//!   execute both even when the repository lives under `/root`.
//! - Identities: when the suite runs as root every case runs as root AND as an
//!   unprivileged uid (`CORDON_TEST_USER`, default `nobody`); otherwise as the current
//!   user only. Each case gets its own directories owned by the identity under test:
//!   otherwise DAC, not the sandbox, would block the write and the test would prove
//!   nothing.
//! - [`Ctx::cordon`] / [`Ctx::probe`]: run `cordon run --json` as the identity and parse
//!   both cordon's JSON and the probe's report line.
//! - [`Ctx::host_probe`]: the same probe operation run directly on the host as the
//!   identity: the positive control showing that the operation works without cordon.
//! - Effect observers: [`Sentinel`] (a file whose content and metadata must not change),
//!   [`TcpTrap`], [`UdpTrap`], [`UnixTrap`] (listeners that must receive nothing),
//!   [`Victim`] (a process that must survive untouched), [`Pty`].
//! - Skips go through the shared [`skip_or_fail`] (`SKIP <test>: <reason>` on the
//!   terminal, or a failure under `CORDON_MUST_ENFORCE=1`).

use std::collections::HashMap;
use std::ffi::CString;
use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::cli::run_bounded;
use super::{find_in_path, loud, skip_or_fail, skip_regardless, Skip, PATH_ENV};

pub const READ_ONLY: &str = "read-only";
pub const WORKSPACE_WRITE: &str = "workspace-write";
pub const FULL_ACCESS: &str = "full-access";
/// The confined rungs of the mode ladder.
pub const CONFINED: [&str; 2] = [READ_ONLY, WORKSPACE_WRITE];

/// errnos that mean "the filesystem layer refused" (Landlock, read-only mounts, ...).
pub const FS_DENIED: &[&str] = &["EACCES", "EPERM", "EROFS", "EXDEV"];
/// errnos that mean "a filter refused the syscall", plus death by SIGSYS.
pub const FILTERED: &[&str] = &["EPERM", "EACCES", "ENOSYS", "SIGSYS"];
/// errnos the contract allows for a refused socket().
pub const NET_DENIED: &[&str] = &["EACCES", "EPERM", "ENETUNREACH"];

// ------------------------------------------------------------------ suite

pub struct Suite {
    /// `/var/tmp/cordon-tests-<pid>`, mode 0755.
    pub dir: PathBuf,
    pub probe: PathBuf,
    pub cordon: PathBuf,
    /// A root-owned setuid copy of the probe (only when running as root).
    pub probe_suid: Option<PathBuf>,
    pub identities: Vec<Identity>,
}

static SUITE: OnceLock<Result<Suite, String>> = OnceLock::new();

/// The per-binary fixture, or the reason the whole suite must skip.
pub fn suite() -> Result<&'static Suite, Skip> {
    SUITE.get_or_init(build_suite).as_ref().map_err(|e| Skip(e.clone()))
}

fn build_suite() -> Result<Suite, String> {
    if !cfg!(target_os = "linux") {
        return Err("not Linux: the confined runners under test here are Linux runners".into());
    }
    let cc = find_in_path("cc").ok_or("no `cc` in PATH: cannot build the probe")?;
    let base = std::env::var_os("CORDON_TEST_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/var/tmp"));
    clean_stale(&base);
    clean_stale(Path::new("/tmp"));
    let dir = base.join(format!("cordon-tests-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    set_mode(&dir, 0o755);

    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/probe/probe.c");
    let probe = dir.join("probe");
    let out = Command::new(&cc)
        .args(["-O2", "-Wall", "-o"])
        .arg(&probe)
        .arg(&src)
        .output()
        .map_err(|e| format!("run cc: {e}"))?;
    // A probe that does not compile is a bug in the suite, not a host limitation.
    assert!(out.status.success(), "probe.c failed to compile:\n{}", String::from_utf8_lossy(&out.stderr));
    set_mode(&probe, 0o755);

    let cordon = dir.join("cordon");
    fs::copy(env!("CARGO_BIN_EXE_cordon"), &cordon).expect("copy cordon binary");
    set_mode(&cordon, 0o755);
    // A host file anyone could write without the sandbox (fs_system_paths_read_only).
    let sentinel = dir.join("suite-sentinel");
    fs::write(&sentinel, "suite sentinel\n").unwrap();
    set_mode(&sentinel, 0o666);

    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let mut identities = vec![];
    let probe_suid = if me == 0 {
        let p = dir.join("probe-suid");
        fs::copy(&probe, &p).expect("copy probe");
        chown(&p, 0, 0);
        set_mode(&p, 0o4755);
        Some(p)
    } else {
        None
    };
    if me == 0 {
        identities.push(Identity::new("root", 0, 0, &dir));
        let name = std::env::var("CORDON_TEST_USER").unwrap_or_else(|_| "nobody".into());
        let (uid, gid) = lookup_user(&name).unwrap_or_else(|| panic!("CORDON_TEST_USER={name}: no such user"));
        assert_ne!(uid, 0, "CORDON_TEST_USER must name an unprivileged user");
        identities.push(Identity::new(&name, uid, gid, &dir));
    } else {
        // SAFETY: getegid has no preconditions and cannot fail.
        let gid = unsafe { libc::getegid() };
        identities.push(Identity::new("self", me, gid, &dir));
    }
    Ok(Suite { dir, probe, cordon, probe_suid, identities })
}

/// Removes `cordon-tests-<pid>*` entries left by earlier runs whose process is gone.
fn clean_stale(base: &Path) {
    let Ok(rd) = fs::read_dir(base) else { return };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(rest) = name.strip_prefix("cordon-tests-") else { continue };
        let pid: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        if pid.is_empty() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let _ = fs::remove_dir_all(e.path());
    }
}

fn lookup_user(name: &str) -> Option<(u32, u32)> {
    if let Ok(uid) = name.parse::<u32>() {
        return Some((uid, uid));
    }
    let c = CString::new(name).ok()?;
    // SAFETY: getpwnam returns a pointer to static storage or null; read immediately.
    let pw = unsafe { libc::getpwnam(c.as_ptr()) };
    if pw.is_null() {
        return None;
    }
    // SAFETY: `pw` is non-null and points to getpwnam's static record, read before any other passwd call.
    unsafe { Some(((*pw).pw_uid, (*pw).pw_gid)) }
}

pub fn set_mode(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap_or_else(|e| panic!("chmod {}: {e}", p.display()));
}

pub fn chown(p: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(p, Some(uid), Some(gid)).unwrap_or_else(|e| panic!("chown {}: {e}", p.display()));
}

// ------------------------------------------------------------------ identities

#[derive(Clone, Debug)]
pub struct Identity {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// HOME for this identity: a directory it owns, inside the suite dir.
    pub home: PathBuf,
}

impl Identity {
    fn new(name: &str, uid: u32, gid: u32, dir: &Path) -> Identity {
        let home = dir.join(format!("home-{name}"));
        fs::create_dir_all(&home).unwrap();
        set_mode(&home, 0o755);
        chown(&home, uid, gid);
        Identity { name: name.into(), uid, gid, home }
    }

    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// Applies this identity to a command (uid/gid only when it differs from ours).
    pub fn apply(&self, cmd: &mut Command) {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if self.uid != me {
            cmd.uid(self.uid).gid(self.gid);
        }
        cmd.env("HOME", &self.home);
    }
}

// ------------------------------------------------------------------ per-case context

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// One test case for one identity: its own directory tree, owned by the identity.
pub struct Ctx {
    pub test: String,
    pub suite: &'static Suite,
    pub id: Identity,
    /// `<suite>/<test>/<identity>`, owned by the identity.
    pub root: PathBuf,
    /// The workspace (`--cwd`).
    pub ws: PathBuf,
    /// A directory outside the workspace the identity could write to without cordon.
    pub outside: PathBuf,
    /// The confined runner this pass exercises (`landlock` or `bwrap`); passed as
    /// `--runner` to every confined run that does not name one itself.
    pub runner: String,
}

/// The confined runners every case runs under, in order (`CORDON_TEST_RUNNERS`,
/// comma-separated, default `landlock,bwrap`).
pub fn test_runners() -> Vec<String> {
    std::env::var("CORDON_TEST_RUNNERS")
        .unwrap_or_else(|_| "landlock,bwrap".into())
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(String::from)
        .collect()
}

/// Runs `f` once per identity. A `Skip` is reported loudly (or fails the test when
/// `CORDON_MUST_ENFORCE=1`); a panic fails the test and names the identity.
pub fn each_identity(test: &str, f: impl Fn(&Ctx) -> Result<(), Skip>) {
    let suite = match suite() {
        Ok(s) => s,
        Err(Skip(r)) => return skip_or_fail(test, &r),
    };
    for runner in test_runners() {
        for id in &suite.identities {
            eprintln!("=== {test} as {} (uid {}) on {runner}", id.name, id.uid);
            let ctx = Ctx::new(test, suite, id.clone(), &runner);
            if let Err(Skip(r)) = f(&ctx) {
                skip_or_fail(&format!("{test} [as {} on {runner}]", id.name), &r);
            }
        }
    }
}

/// Like [`each_identity`], but only for the unprivileged identity (the suite must run
/// as root to have one distinct from itself).
pub fn unprivileged_only(test: &str, f: impl Fn(&Ctx) -> Result<(), Skip>) {
    let suite = match suite() {
        Ok(s) => s,
        Err(Skip(r)) => return skip_or_fail(test, &r),
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let Some(id) = suite.identities.iter().find(|i| i.uid != 0 && i.uid != me) else {
        // Not a sandbox gap: the case needs root to switch to a separate uid.
        skip_regardless(test, "needs to run as root to use a separate unprivileged uid");
        return;
    };
    for runner in test_runners() {
        eprintln!("=== {test} as {} (uid {}) on {runner}", id.name, id.uid);
        let ctx = Ctx::new(test, suite, id.clone(), &runner);
        if let Err(Skip(r)) = f(&ctx) {
            skip_or_fail(&format!("{test} [as {} on {runner}]", id.name), &r);
        }
    }
}

impl Ctx {
    fn new(test: &str, suite: &'static Suite, id: Identity, runner: &str) -> Ctx {
        let tdir = suite.dir.join(test);
        fs::create_dir_all(&tdir).unwrap();
        set_mode(&tdir, 0o755);
        let root = tdir.join(format!("{}-{runner}", id.name));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        let ctx = Ctx {
            test: test.into(),
            suite,
            root: root.clone(),
            ws: root.join("ws"),
            outside: root.join("outside"),
            id,
            runner: runner.into(),
        };
        ctx.chown_to_me(&root);
        set_mode(&root, 0o755);
        ctx.mkdir(&ctx.ws);
        ctx.mkdir(&ctx.outside);
        ctx
    }

    /// A unique token for names (ports, keys, /tmp paths) in this case.
    pub fn unique(&self) -> String {
        format!("{}-{}-{}", std::process::id(), self.id.name, COUNTER.fetch_add(1, Ordering::Relaxed))
    }

    pub fn chown_to_me(&self, p: &Path) {
        chown(p, self.id.uid, self.id.gid);
    }

    /// Creates a directory (and parents below `root`) owned by the identity, mode 0755.
    pub fn mkdir(&self, p: &Path) {
        fs::create_dir_all(p).unwrap_or_else(|e| panic!("mkdir {}: {e}", p.display()));
        set_mode(p, 0o755);
        self.chown_to_me(p);
    }

    /// Writes a file owned by the identity (mode 0644).
    pub fn file(&self, p: &Path, content: &str) -> PathBuf {
        fs::write(p, content).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
        set_mode(p, 0o644);
        self.chown_to_me(p);
        p.to_path_buf()
    }

    /// A sentinel file owned by the identity, whose content and metadata are recorded.
    pub fn sentinel(&self, p: &Path) -> Sentinel {
        self.file(p, &format!("sentinel {}\n", p.display()));
        Sentinel::record(p)
    }

    pub fn symlink(&self, target: &Path, link: &Path) {
        std::os::unix::fs::symlink(target, link).unwrap();
        self.chown_to_me(link);
    }

    /// A command run directly on the host as this identity (no cordon).
    pub fn host_cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear().env("PATH", PATH_ENV).env("LANG", "C");
        self.id.apply(&mut cmd);
        cmd.current_dir(&self.ws);
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Runs a shell snippet on the host as the identity; panics if it fails.
    pub fn host_sh(&self, script: &str) -> String {
        let out = self
            .host_cmd("/bin/sh")
            .arg("-c")
            .arg(script)
            .env("GIT_AUTHOR_NAME", "cordon-test")
            .env("GIT_AUTHOR_EMAIL", "cordon-test@example.invalid")
            .env("GIT_COMMITTER_NAME", "cordon-test")
            .env("GIT_COMMITTER_EMAIL", "cordon-test@example.invalid")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "host setup `{script}` failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Makes the workspace a git repository with one commit (done on the host).
    pub fn git_init(&self) {
        self.file(&self.ws.join("README"), "hello\n");
        self.host_sh("git init -q -b main . && git add README && git commit -q -m 'initial commit'");
    }

    /// The positive control: the same probe operation, directly on the host.
    pub fn host_probe(&self, op: &str, args: &[&str]) -> ProbeResult {
        let out = self.host_cmd(&self.suite.probe).arg(op).args(args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let sig = out.status.signal().map(signal_name);
        parse_probe(op, &text, sig, out.status.code(), None)
            .unwrap_or_else(|Skip(r)| panic!("host probe {op} unsupported: {r}"))
    }

    // -------------------------------------------------------------- cordon

    pub fn opts(&self, mode: &str) -> RunOpts {
        RunOpts { mode: mode.into(), cwd: Some(self.ws.clone()), ..RunOpts::default() }
    }

    /// `cordon run` with `opts` and `argv` as this identity. Turns SANDBOX_UNAVAILABLE
    /// for a confined mode into a Skip; panics if cordon's output is not the contract.
    pub fn cordon(&self, opts: &RunOpts, argv: &[&str]) -> Result<CordonOut, Skip> {
        let mut cmd = Command::new(&self.suite.cordon);
        cmd.env_clear().env("PATH", PATH_ENV).env("LANG", "C").env("USER", &self.id.name);
        self.id.apply(&mut cmd);
        cmd.arg("run").arg("--json").args(["--timeout", "30"]);
        if !opts.mode.is_empty() {
            cmd.args(["--mode", &opts.mode]);
        }
        // The pass's runner for confined runs; full-access always runs passthrough.
        let unconfined = opts.mode == "full-access";
        if let Some(r) = opts.runner.clone().or_else(|| (!unconfined).then(|| self.runner.clone())) {
            cmd.args(["--runner", &r]);
        }
        if let Some(cwd) = &opts.cwd {
            cmd.arg("--cwd").arg(cwd);
        }
        for w in &opts.writable {
            cmd.arg("--writable").arg(w);
        }
        if opts.network {
            cmd.arg("--network");
        }
        cmd.args(&opts.extra_args);
        cmd.arg("--").args(argv);
        for (k, v) in &opts.env {
            cmd.env(k, v);
        }
        for k in &opts.env_remove {
            cmd.env_remove(k);
        }
        cmd.current_dir(opts.process_cwd.as_ref().unwrap_or(&self.ws));
        match opts.stdin.as_ref() {
            Some(fd) => cmd.stdin(Stdio::from(fd.try_clone().unwrap())),
            None => cmd.stdin(Stdio::null()),
        };
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        if !opts.inherit_fds.is_empty() {
            let fds = opts.inherit_fds.clone();
            // SAFETY: only dup2/fcntl (async-signal-safe) between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    for &(src, dst) in &fds {
                        if libc::dup2(src, dst) < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        let fl = libc::fcntl(dst, libc::F_GETFD);
                        libc::fcntl(dst, libc::F_SETFD, fl & !libc::FD_CLOEXEC);
                    }
                    Ok(())
                });
            }
        }
        let desc = format!("cordon run --mode {} -- {}", opts.mode, argv.join(" "));
        let out = run_bounded(cmd, &desc);
        let json: Option<Value> = serde_json::from_str(out.stdout.trim()).ok();
        let res = CordonOut { status: out.status, stdout: out.stdout, stderr: out.stderr, json };
        if let Some(err) = res.json.as_ref().and_then(|j| j.get("error")) {
            let code = err.get("code").and_then(Value::as_str).unwrap_or("");
            if code == "SANDBOX_UNAVAILABLE" && opts.mode != FULL_ACCESS && !opts.expect_error {
                assert_eq!(res.status.code(), Some(125), "SANDBOX_UNAVAILABLE must exit 125: {res:?}");
                return Err(Skip(format!(
                    "cordon reports SANDBOX_UNAVAILABLE for {}: {}",
                    opts.mode,
                    err.get("message").and_then(Value::as_str).unwrap_or("?")
                )));
            }
        }
        if !opts.expect_error {
            assert!(
                res.json.as_ref().is_some_and(|j| j.get("exit_code").is_some()),
                "`{desc}` did not print the run-result JSON object: {res:?}"
            );
        }
        Ok(res)
    }

    /// Runs the probe under cordon in `mode` with the workspace as cwd.
    pub fn probe(&self, mode: &str, op: &str, args: &[&str]) -> Result<ProbeResult, Skip> {
        self.probe_with(&self.opts(mode), op, args)
    }

    pub fn probe_with(&self, opts: &RunOpts, op: &str, args: &[&str]) -> Result<ProbeResult, Skip> {
        self.probe_bin_with(&self.suite.probe, opts, op, args)
    }

    pub fn probe_bin_with(&self, bin: &Path, opts: &RunOpts, op: &str, args: &[&str]) -> Result<ProbeResult, Skip> {
        let bin = bin.to_str().unwrap();
        let mut argv = vec![bin, op];
        argv.extend_from_slice(args);
        let out = self.cordon(opts, &argv)?;
        let j = out.json.as_ref().unwrap();
        let text = j["stdout"]["text"].as_str().unwrap_or("").to_string();
        let sig = signal_of(&j["signal"]);
        let code = j["exit_code"].as_i64().map(|c| c as i32);
        let r = parse_probe(op, &text, sig, code, Some(out))?;
        if std::env::var_os("CORDON_TEST_TRACE").is_some() {
            loud(&format!(
                "TRACE {} [{}] {} {} {} -> ok={} {}{} {:?}",
                self.test,
                self.id.name,
                opts.mode,
                op,
                args.join(" "),
                r.ok,
                r.errname,
                r.signal.as_deref().unwrap_or(""),
                r.detail.chars().take(160).collect::<String>()
            ));
        }
        Ok(r)
    }

    /// Like [`Ctx::probe_with`], but cordon may refuse: `Ok(Err(out))` when it printed an
    /// error object or its runner broke before the command ran (`runner_failed`).
    pub fn probe_or_refusal(
        &self,
        opts: &RunOpts,
        op: &str,
        args: &[&str],
    ) -> Result<Result<ProbeResult, CordonOut>, Skip> {
        let mut o = opts.clone();
        o.expect_error = true;
        let probe = self.suite.probe.to_str().unwrap();
        let mut argv = vec![probe, op];
        argv.extend_from_slice(args);
        let out = self.cordon(&o, &argv)?;
        let ran = out.json.as_ref().is_some_and(|j| {
            j.get("error").is_none() && j.get("exit_code").is_some() && j["sandbox"]["runner_failed"] != true
        });
        if !ran {
            return Ok(Err(out));
        }
        let j = out.json.as_ref().unwrap();
        let text = j["stdout"]["text"].as_str().unwrap_or("").to_string();
        let sig = signal_of(&j["signal"]);
        let code = j["exit_code"].as_i64().map(|c| c as i32);
        Ok(Ok(parse_probe(op, &text, sig, code, Some(out))?))
    }

    /// Runs `sh -c SCRIPT` under cordon.
    pub fn sh(&self, opts: &RunOpts, script: &str) -> Result<CordonOut, Skip> {
        self.cordon(opts, &["/bin/sh", "-c", script])
    }

    /// A victim process (`sleep 60`) of this identity, with a secret in its environment
    /// and a recognisable cwd; killed when dropped.
    pub fn victim(&self) -> Victim {
        let tag = self.unique();
        let cwd = self.root.join(format!("victim-cwd-{tag}"));
        self.mkdir(&cwd);
        let secret = format!("victim-secret-{tag}");
        let mut cmd = self.host_cmd("/bin/sleep");
        cmd.arg("60").current_dir(&cwd).env("VICTIM_SECRET", &secret);
        let child = cmd.spawn().expect("spawn victim");
        let pid = child.id();
        // Wait until it has exec'd sleep (its environ then holds the secret).
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if fs::read(format!("/proc/{pid}/environ"))
                .map(|e| String::from_utf8_lossy(&e).contains(&secret))
                .unwrap_or(false)
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // A known nice value (the suite may run under `nice`, which the victim would
        // inherit): root may lower it, and then every identity can raise it again,
        // so the nice-value observers of the process tests are never blind.
        // SAFETY: geteuid takes nothing and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            // SAFETY: setpriority on a pid this test just spawned; no memory is passed.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, pid, 0) };
        }
        Victim { child, pid, secret, cwd_tag: tag }
    }
}

// ------------------------------------------------------------------ running cordon

#[derive(Default, Clone)]
pub struct RunOpts {
    /// `--mode`; empty means "do not pass --mode" (the default mode).
    pub mode: String,
    pub runner: Option<String>,
    /// `--cwd`; `None` means "do not pass --cwd".
    pub cwd: Option<PathBuf>,
    /// The cordon process's own working directory (default: the workspace).
    pub process_cwd: Option<PathBuf>,
    pub writable: Vec<PathBuf>,
    pub network: bool,
    pub env: Vec<(String, String)>,
    /// Variables removed from cordon's environment (after `env` and the identity's HOME).
    pub env_remove: Vec<String>,
    pub extra_args: Vec<String>,
    /// (source fd in the test process, fd number in cordon) kept without CLOEXEC.
    pub inherit_fds: Vec<(RawFd, RawFd)>,
    pub stdin: Option<std::sync::Arc<OwnedFd>>,
    /// The caller expects an error object (do not turn it into a skip or a panic).
    pub expect_error: bool,
}

pub struct CordonOut {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub json: Option<Value>,
}

impl std::fmt::Debug for CordonOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cordon exited {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}", self.status, self.stdout, self.stderr)
    }
}

impl CordonOut {
    pub fn j(&self) -> &Value {
        self.json.as_ref().expect("cordon printed no JSON")
    }
    /// The command's stdout as collected by cordon.
    pub fn out(&self) -> String {
        self.j()["stdout"]["text"].as_str().unwrap_or("").to_string()
    }
    pub fn err(&self) -> String {
        self.j()["stderr"]["text"].as_str().unwrap_or("").to_string()
    }
    pub fn exit_code(&self) -> Option<i64> {
        self.j()["exit_code"].as_i64()
    }
    pub fn signal(&self) -> Option<String> {
        signal_of(&self.j()["signal"])
    }
    pub fn assert_success(&self) -> &Self {
        assert_eq!(self.exit_code(), Some(0), "command should have succeeded: {self:?}");
        self
    }
}

pub fn signal_name(n: i32) -> String {
    match n {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        31 => "SIGSYS",
        _ => return format!("SIG{n}"),
    }
    .to_string()
}

/// cordon's `signal` field: null, a number or a name.
fn signal_of(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => n.as_i64().map(|n| signal_name(n as i32)),
        Value::String(s) if s.is_empty() => None,
        Value::String(s) if s.starts_with("SIG") => Some(s.clone()),
        Value::String(s) => Some(format!("SIG{}", s.to_uppercase())),
        _ => None,
    }
}

// ------------------------------------------------------------------ probe results

pub struct ProbeResult {
    pub op: String,
    pub ok: bool,
    pub errno: i64,
    pub errname: String,
    pub detail: String,
    /// Set when the probe died of a signal (SIGSYS from seccomp, usually).
    pub signal: Option<String>,
    /// The cordon run that carried it (None for host probes).
    pub run: Option<CordonOut>,
}

impl std::fmt::Debug for ProbeResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "probe {}: ok={} errno={} ({}) signal={:?} detail={:?}",
            self.op, self.ok, self.errno, self.errname, self.signal, self.detail
        )?;
        if let Some(r) = &self.run {
            write!(f, "\n{r:?}")?;
        }
        Ok(())
    }
}

fn parse_probe(
    op: &str,
    text: &str,
    signal: Option<String>,
    code: Option<i32>,
    run: Option<CordonOut>,
) -> Result<ProbeResult, Skip> {
    let line = text.lines().rev().find(|l| l.starts_with("{\"op\""));
    let Some(line) = line else {
        // No report: acceptable only if a signal killed the probe. Anything else (the
        // probe never ran) must not pass as "refused". bubblewrap's own pid 1 reports a
        // command killed by signal N as exit 128+N (documented in docs/bwrap.md).
        let bwrap_signal = run
            .as_ref()
            .filter(|r| r.j()["sandbox"]["runner"] == "bwrap")
            .and(code)
            .filter(|c| (129..=128 + 64).contains(c))
            .map(|c| signal_name(c - 128));
        let signal = signal.or(bwrap_signal);
        if signal.is_some() {
            return Ok(ProbeResult {
                op: op.into(),
                ok: false,
                errno: 0,
                errname: String::new(),
                detail: String::new(),
                signal,
                run,
            });
        }
        panic!("probe {op} printed no report (exit {code:?}); did it run at all?\n{run:?}");
    };
    let v: Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("probe {op} printed invalid JSON {line:?}: {e}"));
    let r = ProbeResult {
        op: v["op"].as_str().unwrap_or("").into(),
        ok: v["ok"].as_bool().unwrap_or(false),
        errno: v["errno"].as_i64().unwrap_or(0),
        errname: v["errname"].as_str().unwrap_or("").into(),
        detail: v["detail"].as_str().unwrap_or("").into(),
        signal,
        run,
    };
    match r.errname.as_str() {
        "USAGE" => panic!("test bug: {r:?}"),
        "UNSUPPORTED" => Err(Skip(format!("probe {op}: {}", r.detail))),
        _ => Ok(r),
    }
}

impl ProbeResult {
    /// Whether the refusal is one of `allowed` (an errno name, or "SIGSYS" etc.).
    pub fn refused_with(&self, allowed: &[&str]) -> bool {
        if self.ok {
            return false;
        }
        match &self.signal {
            Some(s) => allowed.contains(&s.as_str()),
            None => allowed.contains(&self.errname.as_str()),
        }
    }

    #[track_caller]
    pub fn assert_refused(&self, why: &str) -> &Self {
        assert!(!self.ok, "{why}: the sandbox allowed it\n{self:?}");
        self
    }

    #[track_caller]
    pub fn assert_refused_with(&self, allowed: &[&str], why: &str) -> &Self {
        self.assert_refused(why);
        assert!(
            self.refused_with(allowed),
            "{why}: refused, but with {}{} instead of one of {allowed:?}\n{self:?}",
            self.errname,
            self.signal.as_deref().map(|s| format!(" / {s}")).unwrap_or_default()
        );
        self
    }

    #[track_caller]
    pub fn assert_ok(&self, why: &str) -> &Self {
        assert!(self.ok && self.signal.is_none(), "{why}: it should work\n{self:?}");
        self
    }
}

// ------------------------------------------------------------------ effect observers

/// A file whose content and metadata must not change.
pub struct Sentinel {
    pub path: PathBuf,
    content: Vec<u8>,
    meta: (u64, u32, u32, u32, i64, i64, i64, i64, u64),
    xattrs: Vec<u8>,
}

fn meta_of(p: &Path) -> (u64, u32, u32, u32, i64, i64, i64, i64, u64) {
    let m = fs::symlink_metadata(p).unwrap();
    (m.ino(), m.mode(), m.uid(), m.gid(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec(), m.nlink())
}

fn xattr_list(p: &Path) -> Vec<u8> {
    let c = CString::new(p.to_str().unwrap()).unwrap();
    let mut buf = vec![0u8; 4096];
    // SAFETY: buf is valid for its length.
    let n = unsafe { libc::llistxattr(c.as_ptr(), buf.as_mut_ptr() as *mut _, buf.len()) };
    buf.truncate(n.max(0) as usize);
    buf
}

/// A file's bytes, or a directory's sorted entry names.
fn read_content(p: &Path) -> std::io::Result<Vec<u8>> {
    if fs::symlink_metadata(p)?.is_dir() {
        let mut names: Vec<String> =
            fs::read_dir(p)?.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        Ok(names.join("\n").into_bytes())
    } else {
        fs::read(p)
    }
}

impl Sentinel {
    pub fn record(p: &Path) -> Sentinel {
        Sentinel { path: p.to_path_buf(), content: read_content(p).unwrap(), meta: meta_of(p), xattrs: xattr_list(p) }
    }

    /// Panics unless the file is still there with the same content, inode, owner, mode,
    /// timestamps (ctime catches any metadata change), link count and xattrs.
    #[track_caller]
    pub fn assert_unchanged(&self, why: &str) {
        if let Err(e) = self.check() {
            panic!("{why}: {e}");
        }
    }

    /// `Err(what changed)` if the file's content or metadata differ from the record.
    pub fn check(&self) -> Result<(), String> {
        let p = self.path.display();
        let now = read_content(&self.path).map_err(|e| format!("sentinel {p} is gone ({e})"))?;
        if now != self.content {
            return Err(format!(
                "sentinel {p} content changed: {:?} -> {:?}",
                String::from_utf8_lossy(&self.content),
                String::from_utf8_lossy(&now)
            ));
        }
        let m = meta_of(&self.path);
        if m != self.meta {
            return Err(format!(
                "sentinel {p} metadata changed (ino, mode, uid, gid, mtime, mtime_ns, ctime, ctime_ns, nlink): {:?} -> {m:?}",
                self.meta
            ));
        }
        if xattr_list(&self.path) != self.xattrs {
            return Err(format!("sentinel {p} xattrs changed"));
        }
        Ok(())
    }
}

#[track_caller]
pub fn assert_absent(p: &Path, why: &str) {
    assert!(fs::symlink_metadata(p).is_err(), "{why}: {} exists (the sandbox let it be created)", p.display());
}

/// A loopback TCP listener that must receive nothing.
pub struct TcpTrap {
    pub listener: TcpListener,
    pub port: u16,
}

impl TcpTrap {
    pub fn v4() -> TcpTrap {
        Self::bind("127.0.0.1:0".parse().unwrap()).unwrap()
    }
    pub fn v6() -> Result<TcpTrap, Skip> {
        Self::bind("[::1]:0".parse().unwrap()).map_err(|e| Skip(format!("no IPv6 loopback: {e}")))
    }
    fn bind(a: SocketAddr) -> std::io::Result<TcpTrap> {
        let listener = TcpListener::bind(a)?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        Ok(TcpTrap { listener, port })
    }
    pub fn port_s(&self) -> String {
        self.port.to_string()
    }
    /// Whether a connection arrived within `ms` (a short bounded wait).
    pub fn connected_within(&self, ms: u64) -> bool {
        let deadline = Instant::now() + Duration::from_millis(ms);
        loop {
            if let Ok((mut s, _)) = self.listener.accept() {
                let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
                let mut b = [0u8; 8];
                let _ = s.read(&mut b);
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    #[track_caller]
    pub fn assert_untouched(&self, why: &str) {
        assert!(!self.connected_within(200), "{why}: the TCP listener on port {} got a connection", self.port);
    }
}

/// A loopback UDP socket that must receive nothing.
pub struct UdpTrap {
    pub sock: UdpSocket,
    pub port: u16,
}

impl UdpTrap {
    pub fn v4() -> UdpTrap {
        Self::bind("127.0.0.1:0".parse().unwrap()).unwrap()
    }
    pub fn v6() -> Result<UdpTrap, Skip> {
        Self::bind(SocketAddr::new(Ipv6Addr::LOCALHOST.into(), 0)).map_err(|e| Skip(format!("no IPv6 loopback: {e}")))
    }
    fn bind(a: SocketAddr) -> std::io::Result<UdpTrap> {
        let sock = UdpSocket::bind(a)?;
        sock.set_read_timeout(Some(Duration::from_millis(200)))?;
        let port = sock.local_addr()?.port();
        Ok(UdpTrap { sock, port })
    }
    pub fn port_s(&self) -> String {
        self.port.to_string()
    }
    pub fn received(&self) -> bool {
        let mut b = [0u8; 512];
        self.sock.recv_from(&mut b).is_ok()
    }
    #[track_caller]
    pub fn assert_untouched(&self, why: &str) {
        assert!(!self.received(), "{why}: the UDP socket on port {} received a datagram", self.port);
    }
}

/// A unix-socket daemon stand-in (pathname or abstract) that must receive nothing.
pub enum UnixTrap {
    Stream(UnixListener),
    Dgram(UnixDatagram),
}

impl UnixTrap {
    pub fn stream_path(ctx: &Ctx, p: &Path) -> UnixTrap {
        let l = UnixListener::bind(p).unwrap();
        ctx.chown_to_me(p);
        set_mode(p, 0o777);
        l.set_nonblocking(true).unwrap();
        UnixTrap::Stream(l)
    }
    pub fn dgram_path(ctx: &Ctx, p: &Path) -> UnixTrap {
        let d = UnixDatagram::bind(p).unwrap();
        ctx.chown_to_me(p);
        set_mode(p, 0o777);
        d.set_nonblocking(true).unwrap();
        UnixTrap::Dgram(d)
    }
    pub fn stream_abstract(name: &str) -> UnixTrap {
        use std::os::linux::net::SocketAddrExt;
        let a = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let l = UnixListener::bind_addr(&a).unwrap();
        l.set_nonblocking(true).unwrap();
        UnixTrap::Stream(l)
    }
    pub fn dgram_abstract(name: &str) -> UnixTrap {
        use std::os::linux::net::SocketAddrExt;
        let a = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let d = UnixDatagram::bind_addr(&a).unwrap();
        d.set_nonblocking(true).unwrap();
        UnixTrap::Dgram(d)
    }
    pub fn touched_within(&self, ms: u64) -> bool {
        let deadline = Instant::now() + Duration::from_millis(ms);
        loop {
            let hit = match self {
                UnixTrap::Stream(l) => l.accept().is_ok(),
                UnixTrap::Dgram(d) => d.recv(&mut [0u8; 64]).is_ok(),
            };
            if hit {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    #[track_caller]
    pub fn assert_untouched(&self, why: &str) {
        assert!(!self.touched_within(200), "{why}: the unix socket received a connection/datagram");
    }
}

/// A free loopback TCP port (bound then released; a small race, acceptable in tests).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Tries to connect to 127.0.0.1:port until `done()` says stop; true if any connect worked.
pub fn connect_attempts(port: u16, done: impl Fn() -> bool) -> bool {
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() && Instant::now() < deadline {
        if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(50)) {
            let _ = s.write_all(b"X");
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A `sleep 60` owned by the identity under test; killed on drop.
pub struct Victim {
    pub child: Child,
    pub pid: u32,
    pub secret: String,
    pub cwd_tag: String,
}

impl Victim {
    pub fn pid_s(&self) -> String {
        self.pid.to_string()
    }
    fn stat_fields(&self) -> Vec<String> {
        let s = fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        // comm may contain spaces: fields start after the last ')'.
        let rest = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
        rest.split_whitespace().map(String::from).collect()
    }
    /// Alive, not a zombie, not stopped, not traced.
    #[track_caller]
    pub fn assert_untouched(&mut self, why: &str) {
        if let Err(e) = self.check() {
            panic!("{why}: {e}");
        }
    }

    pub fn check(&mut self) -> Result<(), String> {
        if self.child.try_wait().unwrap().is_some() {
            return Err("the victim process died".into());
        }
        let f = self.stat_fields();
        let state = f.first().cloned().unwrap_or_default();
        if !(state == "S" || state == "R" || state == "D") {
            return Err(format!("victim state is {state:?} (stopped/traced/zombie?)"));
        }
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        if !status.contains("TracerPid:\t0\n") {
            return Err("victim is being traced".into());
        }
        Ok(())
    }
    pub fn nice(&self) -> String {
        self.stat_fields().get(16).cloned().unwrap_or_default()
    }
    pub fn limits(&self) -> String {
        fs::read_to_string(format!("/proc/{}/limits", self.pid)).unwrap_or_default()
    }
    /// Start address (hex) of the victim's first mapping.
    pub fn some_address(&self) -> String {
        let maps = fs::read_to_string(format!("/proc/{}/maps", self.pid)).unwrap();
        let first = maps.lines().next().unwrap();
        format!("0x{}", first.split('-').next().unwrap())
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A pseudo-terminal pair created by the test, slave owned by the identity and in raw
/// mode, so anything pushed into its input queue can be read back from the slave.
pub struct Pty {
    pub master: OwnedFd,
    pub slave: std::sync::Arc<OwnedFd>,
    pub slave_path: PathBuf,
}

impl Pty {
    pub fn new(ctx: &Ctx) -> Result<Pty, Skip> {
        // SAFETY: plain libc calls on fds we own.
        unsafe {
            let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            if m < 0 {
                return Err(Skip(format!("posix_openpt: {}", std::io::Error::last_os_error())));
            }
            let master = OwnedFd::from_raw_fd(m);
            if libc::grantpt(m) != 0 || libc::unlockpt(m) != 0 {
                return Err(Skip("grantpt/unlockpt failed".into()));
            }
            let mut buf = [0 as libc::c_char; 128];
            if libc::ptsname_r(m, buf.as_mut_ptr(), buf.len()) != 0 {
                return Err(Skip("ptsname_r failed".into()));
            }
            let name = std::ffi::CStr::from_ptr(buf.as_ptr()).to_str().unwrap().to_string();
            let c = CString::new(name.clone()).unwrap();
            let s = libc::open(c.as_ptr(), libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NONBLOCK);
            if s < 0 {
                return Err(Skip(format!("open {name}: {}", std::io::Error::last_os_error())));
            }
            let mut t: libc::termios = std::mem::zeroed();
            libc::tcgetattr(s, &mut t);
            libc::cfmakeraw(&mut t);
            libc::tcsetattr(s, libc::TCSANOW, &t);
            let slave_path = PathBuf::from(&name);
            chown(&slave_path, ctx.id.uid, ctx.id.gid);
            Ok(Pty { master, slave: std::sync::Arc::new(OwnedFd::from_raw_fd(s)), slave_path })
        }
    }
    /// Bytes waiting in the slave's input queue (bounded wait).
    pub fn pending_input(&self, ms: u64) -> String {
        let deadline = Instant::now() + Duration::from_millis(ms);
        let mut got = vec![];
        loop {
            let mut b = [0u8; 256];
            // SAFETY: reading into a valid buffer from an fd we own (non-blocking).
            let n = unsafe { libc::read(self.slave.as_raw_fd(), b.as_mut_ptr() as *mut _, b.len()) };
            if n > 0 {
                got.extend_from_slice(&b[..n as usize]);
                continue;
            }
            if Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        String::from_utf8_lossy(&got).into_owned()
    }
}

/// Parses `Key: value;` pairs from the probe's `caps` detail.
pub fn status_fields(detail: &str) -> HashMap<String, String> {
    detail
        .split(';')
        .filter_map(|kv| kv.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// An fd number for a file opened without CLOEXEC semantics in the child (see RunOpts).
pub fn open_append(p: &Path) -> fs::File {
    fs::OpenOptions::new().append(true).open(p).unwrap()
}

pub fn raw(f: &fs::File) -> RawFd {
    f.as_raw_fd()
}
