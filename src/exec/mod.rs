//! The executor: resolve a request, pick a runner, spawn, collect, wait, kill.
//!
//! Process lifecycle is policy here: stdin is `/dev/null` unless given; the
//! environment is explicit (scrubbed); every run starts under an init (the stage
//! crate's): pid 1 of the run's own pid namespace in confined modes, otherwise a
//! supervising child subreaper that leads the run's process group, kills and reaps
//! whatever the run leaves behind, and kills the run when cordon dies, even by SIGKILL
//! (bubblewrap's pid-namespace init, which bubblewrap never reaps, is reaped there).
//!
//! A deadline or an abort sends SIGTERM to the whole group, waits
//! [`crate::request::KILL_GRACE`], then kills the run: a confined run's group is
//! SIGKILLed (its pid namespace ends with its init); a supervising init is asked to
//! sweep instead (`cordon_stage::request_sweep`: it kills every descendant, those that
//! left the group too), and its group is SIGKILLed only if it has not exited within a
//! second. Pipes still held open by outliving grandchildren are drained for at most
//! [`crate::request::DRAIN_GRACE`]. A run whose future is dropped, and an executor that
//! is dropped, end their runs the same way and reap them.
//!
//! Runs of the `seatbelt` runner (and every run off Linux) take the direct launch
//! instead (`exec::direct`): no init, the plan's program spawned as the leader of its own
//! process group, the same deadline, abort and kill sequence on that group.
//!
//! What it does not do: it does not decide confinement (runners do) or classify
//! denials beyond the unambiguous (a seccomp kill).

pub mod capture;
mod direct;
mod finish;
mod handle;
mod held;
mod launch;
mod private_dirs;
mod relay;
#[cfg(target_os = "linux")]
mod staged;
mod streams;
#[cfg(target_os = "linux")]
mod supervision;

use finish::finish;
pub use finish::Interrupts;
use handle::HandleShared;
pub use handle::{Handle, OutputRead, Status};
pub use held::Held;
#[cfg(target_os = "linux")]
pub use held::HeldLayer;

use crate::env::build_environment_for;
use crate::error::CordonError;
use crate::host::HostFacts;
use crate::mode::Mode;
use crate::policy::resolve_policy;
use crate::request::{Command, ExecutorConfig, Output, Request, Spec, Stdin};
use crate::result::{Denial, RunResult, SandboxFacts};
#[cfg(target_os = "linux")]
use crate::runner::stage;
use crate::runner::{self, PlanInput, RunnerKind, Selection};
use capture::{Increment, StreamCapture};
#[cfg(target_os = "linux")]
use cordon_stage::{SpawnError, Step};
use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::future::Future;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
#[cfg(target_os = "linux")]
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

/// Pipe buffer size requested for captured streams (fewer wakeups at high volume).
#[cfg(target_os = "linux")]
const PIPE_SIZE: i32 = 1 << 20;
/// Read chunk for captured streams.
const READ_CHUNK: usize = 256 * 1024;
/// `PATH` used when the command's environment has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How long a supervising init may take to sweep a run it was told to end (it kills
/// and reaps every descendant, normally within milliseconds) before the run's group is
/// SIGKILLed, which would orphan descendants that left the group.
#[cfg(target_os = "linux")]
const SWEEP_WAIT: Duration = Duration::from_secs(1);

/// Processes started and not yet reaped, by run id: the init's pid, and whether it is
/// a supervising init (no pid namespace).
#[derive(Debug, Default)]
struct Registry {
    running: Mutex<HashMap<u64, (i32, bool)>>,
}

impl Registry {
    fn kill_all(&self) {
        let runs: Vec<(i32, bool)> = self.running.lock().unwrap_or_else(|p| p.into_inner()).values().copied().collect();
        end_runs_now(&runs);
    }
}

/// End runs at once and reap their inits (blocking; for drops). A supervising init is
/// asked to sweep first (so descendants that left the group die too) and given up to
/// [`SWEEP_WAIT`]; then every run's group is SIGKILLed (a confined run's pid namespace
/// ends with its init).
fn end_runs_now(runs: &[(i32, bool)]) {
    // Only Linux runs have a supervising init (the stage crate's).
    #[cfg(target_os = "linux")]
    {
        for &(pid, supervised) in runs {
            if supervised {
                let _ = cordon_stage::request_sweep(pid);
            }
        }
        let start = std::time::Instant::now();
        let running = |pid: i32| {
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
            let id = nix::sys::wait::Id::Pid(Pid::from_raw(pid));
            matches!(nix::sys::wait::waitid(id, flags), Ok(WaitStatus::StillAlive))
        };
        while start.elapsed() < SWEEP_WAIT && runs.iter().any(|&(pid, supervised)| supervised && running(pid)) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    for &(pid, _) in runs {
        // Not reaped yet, so the pid (and its group id) cannot have been reused.
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    for &(pid, _) in runs {
        let _ = waitpid(Pid::from_raw(pid), None);
    }
}

/// Runs commands. Dropping it kills and reaps every process it started.
#[derive(Debug)]
pub struct Executor {
    config: ExecutorConfig,
    host: HostFacts,
    state_dir: PathBuf,
    registry: Arc<Registry>,
    next_id: AtomicU64,
    cgroups: crate::limits::CgroupLayout,
    /// What the memory defaults and caps are fractions of (see [`crate::limits::memory_budget`]).
    memory_budget: u64,
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.registry.kill_all();
    }
}

/// Create (or verify) the private state directory: a real directory owned by us with
/// no group or other access. A symlink or a foreign directory is refused.
fn private_state_dir(base: &Path, euid: u32) -> Result<PathBuf, CordonError> {
    let dir = base.join(format!("cordon-{euid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(CordonError::io(format!("creating state directory {}", dir.display()), e)),
    }
    let meta = std::fs::symlink_metadata(&dir)
        .map_err(|e| CordonError::io(format!("inspecting state directory {}", dir.display()), e))?;
    if !meta.is_dir() || meta.uid() != euid || meta.mode() & 0o077 != 0 {
        return Err(CordonError::io(
            format!("state directory {} is not a private directory owned by uid {euid}", dir.display()),
            std::io::Error::from_raw_os_error(libc::EPERM),
        ));
    }
    Ok(dir)
}

/// The file in the state directory whose modification time is the last startup sweep.
const SWEEP_STAMP: &str = "last-sweep";
/// How often an executor's start sweeps what killed cordons left behind.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether the startup sweep is due at `now` (no stamp in the private `state_dir`, or
/// one older than [`SWEEP_EVERY`], or one from the future); if so, the stamp is
/// renewed. A stamp that cannot be written means a sweep every time, as before.
fn sweep_due(state_dir: &Path, now: std::time::SystemTime) -> bool {
    let stamp = state_dir.join(SWEEP_STAMP);
    let fresh = std::fs::symlink_metadata(&stamp)
        .ok()
        .filter(|m| m.is_file())
        .and_then(|m| m.modified().ok())
        .and_then(|t| now.duration_since(t).ok())
        .is_some_and(|age| age < SWEEP_EVERY);
    if fresh {
        return false;
    }
    let _ = std::fs::remove_file(&stamp);
    let _ = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&stamp);
    true
}

/// Kills the group if the run is dropped before it finished.
struct KillOnDrop {
    pid: i32,
    supervised: bool,
    armed: bool,
    registry: Arc<Registry>,
    id: u64,
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.armed {
            end_runs_now(&[(self.pid, self.supervised)]);
        }
        self.registry.running.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.id);
    }
}

/// Look the program up the way `execvp` would, on the command's own `PATH`.
pub(crate) fn resolve_program(argv0: &OsStr, env: &[(OsString, OsString)], cwd: &Path) -> Result<PathBuf, CordonError> {
    let shown = argv0.to_string_lossy().into_owned();
    if argv0.is_empty() {
        return Err(CordonError::InvalidRequest { field: "command", why: "the program name is empty".into() });
    }
    let candidate = if argv0.as_bytes().contains(&b'/') {
        cwd.join(argv0)
    } else {
        let path = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone()).unwrap_or(DEFAULT_PATH.into());
        match which::which_in(argv0, Some(path), cwd) {
            Ok(p) => p,
            Err(_) => return Err(CordonError::ProgramNotFound { program: shown }),
        }
    };
    let meta = match std::fs::metadata(&candidate) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(CordonError::ProgramNotFound { program: shown })
        }
        Err(source) => return Err(CordonError::ProgramNotExecutable { program: shown, source }),
    };
    if meta.is_dir() {
        return Err(CordonError::ProgramNotExecutable {
            program: shown,
            source: std::io::Error::from_raw_os_error(libc::EISDIR),
        });
    }
    if let Err(e) = nix::unistd::access(&candidate, nix::unistd::AccessFlags::X_OK) {
        return Err(CordonError::ProgramNotExecutable {
            program: shown,
            source: std::io::Error::from_raw_os_error(e as i32),
        });
    }
    Ok(normalized(candidate))
}

/// `program` (an existing file) as an absolute path without `.`, `..`, `//` or a
/// trailing `/`, which every runner's planner accepts (`./x.sh` joined to the working
/// directory is `/ws/./x.sh`; bubblewrap and Seatbelt take only normalized paths): its
/// directory canonical (`sub/..` resolved as the kernel resolves it, through a
/// symlinked `sub`), its last component as given (a program that is a symlink is
/// still executed through the link, as `execve` would). A path that is normalized
/// already is returned as is, without a system call.
fn normalized(program: PathBuf) -> PathBuf {
    let rebuilt: PathBuf = program.components().collect();
    let plain =
        program.components().all(|c| matches!(c, std::path::Component::RootDir | std::path::Component::Normal(_)));
    if plain && rebuilt.as_os_str() == program.as_os_str() {
        return program;
    }
    match (program.parent(), program.file_name()) {
        (Some(dir), Some(name)) => dir.canonicalize().map(|d| d.join(name)).unwrap_or(program),
        _ => program,
    }
}

/// Check a caller's cache directory (see [`Request::cache_dir`]) and return it
/// canonical. The writable-root rules (system and home-configuration directories,
/// symlinks, git directories) are applied afterwards by `resolve_policy`, where it
/// joins the writable roots.
fn check_cache_dir(
    dir: &Path,
    workdir: &Path,
    roots: &[PathBuf],
    euid: u32,
    state_dir: &Path,
) -> Result<PathBuf, CordonError> {
    let refuse = |why: String| crate::error::PolicyError::CacheDir { path: dir.to_path_buf(), why };
    if !dir.is_absolute() {
        return Err(refuse("it must be an absolute path".into()).into());
    }
    let canon = dir.canonicalize().map_err(|e| refuse(e.to_string()))?;
    let meta = std::fs::metadata(&canon).map_err(|e| refuse(e.to_string()))?;
    if !meta.is_dir() {
        return Err(refuse("not a directory".into()).into());
    }
    if meta.uid() != euid {
        return Err(refuse(format!("it is owned by uid {}, not by the caller (uid {euid})", meta.uid())).into());
    }
    if meta.mode() & 0o022 != 0 {
        return Err(refuse("it is writable by other users".into()).into());
    }
    let mut writable = vec![workdir.to_path_buf()];
    for r in roots {
        writable.push(r.canonicalize().unwrap_or_else(|_| r.clone()));
    }
    if let Some(w) = writable.iter().find(|w| canon.starts_with(w) || w.starts_with(&canon)) {
        return Err(refuse(format!(
            "it overlaps `{}`; the cache must lie outside the workspace and the writable roots",
            w.display()
        ))
        .into());
    }
    if canon.starts_with(state_dir) || state_dir.starts_with(&canon) {
        return Err(refuse("it overlaps cordon's state directory".into()).into());
    }
    Ok(canon)
}

/// A runner that broke after the launch (bubblewrap's setup) is, like a failure before
/// it, the error `RUNNER_FAILED`: never a result that could be read as a confined run.
fn runner_failed_is_an_error(result: RunResult) -> Result<RunResult, CordonError> {
    if !result.sandbox.runner_failed {
        return Ok(result);
    }
    let stderr: String = result.stderr.text.lines().next().unwrap_or_default().chars().take(500).collect();
    Err(CordonError::runner_failed(result.sandbox.runner, crate::runner::RunnerFailure::Helper { stderr }))
}

/// The subdirectory `name` of a checked cache directory, made (0700) when missing; a
/// symlink or anything but a directory there is refused.
fn cache_subdir(dir: &Path, name: &str) -> Result<PathBuf, CordonError> {
    let sub = dir.join(name);
    let refuse = |why: String| crate::error::PolicyError::CacheDir { path: sub.clone(), why };
    match std::fs::DirBuilder::new().mode(0o700).create(&sub) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(refuse(e.to_string()).into()),
    }
    match std::fs::symlink_metadata(&sub) {
        Ok(m) if m.is_dir() => Ok(sub),
        Ok(_) => Err(refuse("not a directory (a symlink or a file)".into()).into()),
        Err(e) => Err(refuse(e.to_string()).into()),
    }
}

/// A request value above the executor's cap (`INVALID_REQUEST`, naming both).
fn over_cap(field: &'static str, asked: String, cap: String) -> CordonError {
    CordonError::InvalidRequest { field, why: format!("{asked} is over the cap of {cap}") }
}

impl Executor {
    /// An executor with `config`, reading the host's facts now.
    pub fn new(config: ExecutorConfig) -> Result<Executor, CordonError> {
        Self::with_host(config, HostFacts::detect())
    }

    /// An executor with explicit host facts (tests, `CORDON_*` knobs already applied).
    /// The bwrap runner's stage helper comes from `config` (see
    /// [`ExecutorConfig::stage_helper`]), overriding the facts' own.
    pub fn with_host(config: ExecutorConfig, mut host: HostFacts) -> Result<Executor, CordonError> {
        // Off Linux, Rust's runtime already ignores SIGPIPE in the `cordon` binary.
        #[cfg(target_os = "linux")]
        cordon_stage::signals::ignore_sigpipe();
        crate::phases::mark("host_facts");
        host.stage_helper = config.stage_helper.clone();
        let base = config.state_dir.clone().unwrap_or_else(std::env::temp_dir);
        let state_dir = private_state_dir(&base, host.euid)?;
        // Canonical once, so launch compares it with the (canonical) writable roots.
        let state_dir = state_dir.canonicalize().unwrap_or(state_dir);
        crate::phases::mark("state_dir");
        let cgroups = crate::limits::CgroupLayout::detect();
        crate::phases::mark("cgroup_layout");
        let memory_budget = crate::limits::memory_budget(&cgroups);
        // What killed cordons left behind, at most once a minute per state directory:
        // a CLI run would otherwise list every cgroup hierarchy and the state
        // directory each time (about 0.1 ms) for leftovers that are rare.
        crate::phases::mark("memory_budget");
        if sweep_due(&state_dir, std::time::SystemTime::now()) {
            crate::limits::sweep_stale(&cgroups);
            capture::sweep_stale_spills(
                &state_dir,
                host.euid,
                std::time::SystemTime::now(),
                capture::SPILL_RETENTION,
                |pid| {
                    // EPERM: it exists under another uid. Only ESRCH (or no valid pid) means gone.
                    i32::try_from(pid)
                        .is_ok_and(|p| p > 0 && !matches!(kill(Pid::from_raw(p), None), Err(nix::errno::Errno::ESRCH)))
                },
            );
        }
        Ok(Executor {
            config,
            host,
            state_dir,
            registry: Arc::default(),
            next_id: AtomicU64::new(1),
            cgroups,
            memory_budget,
        })
    }

    /// The host facts this executor plans with.
    pub fn host(&self) -> &HostFacts {
        &self.host
    }

    /// The private state directory: per-run directories and the output spill files,
    /// which hold bytes the confined commands chose (so never configuration).
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The executor's configuration.
    pub fn config(&self) -> &ExecutorConfig {
        &self.config
    }

    /// Fill and cap a request into a spec (see [`crate::request`]).
    pub fn resolve(&self, req: Request) -> Result<Spec, CordonError> {
        let cfg = &self.config;
        let workdir = match &req.workdir {
            Some(w) => w.clone(),
            None => {
                std::env::current_dir().map_err(|source| CordonError::Workdir { path: PathBuf::from("."), source })?
            }
        };
        let workdir =
            workdir.canonicalize().map_err(|source| CordonError::Workdir { path: workdir.clone(), source })?;
        if !workdir.is_dir() {
            return Err(CordonError::Workdir {
                path: workdir,
                source: std::io::Error::from_raw_os_error(libc::ENOTDIR),
            });
        }
        let cache_dir = match &req.cache_dir {
            Some(dir) if req.policy.mode == crate::mode::Mode::WorkspaceWrite => {
                Some(check_cache_dir(dir, &workdir, &req.policy.writable_roots, self.host.euid, &self.state_dir)?)
            }
            Some(dir) if req.policy.mode == crate::mode::Mode::ReadOnly => {
                return Err(crate::error::PolicyError::CacheDir {
                    path: dir.clone(),
                    why: "read-only mode has no writable directory; use workspace-write".into(),
                }
                .into())
            }
            _ => None,
        };
        let mut policy_req = req.policy.clone();
        // Hidden from every Linux run; other runs' held storage there is in flux.
        #[cfg(target_os = "linux")]
        policy_req.unsearched.extend(self.state_dir.canonicalize().ok());
        if let Some(dir) = &cache_dir {
            policy_req.writable_roots.push(cache_subdir(dir, crate::request::CACHE_DIR_CACHES)?);
        }
        let policy = resolve_policy(&policy_req, &workdir)?;
        let timeout = match req.timeout {
            Some(t) if t.is_zero() => {
                return Err(CordonError::InvalidRequest { field: "timeout", why: "must be greater than zero".into() })
            }
            // A value over a cap is an error, never silently lowered.
            Some(t) if t > cfg.max_timeout => {
                return Err(over_cap(
                    "timeout",
                    format!("{} ms", t.as_millis()),
                    format!("{} ms", cfg.max_timeout.as_millis()),
                ))
            }
            Some(t) => t,
            None => cfg.default_timeout.min(cfg.max_timeout),
        };
        if let Some(c) = req.output_cap.filter(|&c| c > cfg.max_output_cap) {
            return Err(over_cap("output_cap", format!("{c} bytes"), format!("{} bytes", cfg.max_output_cap)));
        }
        if let Some(c) = req.spill_cap.filter(|&c| c > cfg.max_spill_cap) {
            return Err(over_cap("spill_cap", format!("{c} bytes"), format!("{} bytes", cfg.max_spill_cap)));
        }
        let output_cap = req.output_cap.unwrap_or(cfg.default_output_cap).min(cfg.max_output_cap);
        let limits =
            crate::limits::resolve_limits(&req.limits, &cfg.default_limits, &cfg.max_limits, self.memory_budget)
                .map_err(|e| CordonError::InvalidRequest { field: e.field, why: e.why })?;
        let spill_cap = req.spill_cap.unwrap_or(cfg.default_spill_cap).min(cfg.max_spill_cap);
        let ambient = cfg.ambient_env.clone().unwrap_or_else(|| std::env::vars_os().collect());
        // Live output on the caller's terminal keeps its TERM and colour settings.
        let terminal = req.output == Output::Inherit && std::io::IsTerminal::is_terminal(&std::io::stdout());
        let env = build_environment_for(ambient, &req.env, &[], &[], terminal)?;
        let argv = match req.command {
            Command::Shell(s) => {
                if s.contains('\0') {
                    return Err(CordonError::InvalidRequest { field: "command", why: "contains a NUL byte".into() });
                }
                let shell = &cfg.shell;
                match std::fs::metadata(shell) {
                    Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => {}
                    Ok(_) => {
                        return Err(CordonError::Shell { path: shell.clone(), why: "not an executable file".into() })
                    }
                    Err(e) => return Err(CordonError::Shell { path: shell.clone(), why: e.to_string() }),
                }
                vec![shell.clone().into_os_string(), "-c".into(), s.into()]
            }
            Command::Argv(v) => {
                if v.is_empty() {
                    return Err(CordonError::InvalidRequest { field: "command", why: "argv is empty".into() });
                }
                v
            }
        };
        crate::phases::mark("resolve");
        Ok(Spec {
            argv,
            workdir,
            timeout,
            output_cap,
            spill_cap,
            stdin: req.stdin,
            output: req.output,
            env,
            policy,
            runner: req.runner,
            limits,
            observe_writes: req.observe_writes,
            cache_dir,
        })
    }

    /// Run a spec in the foreground and wait for its result.
    pub async fn run(&self, spec: Spec) -> Result<RunResult, CordonError> {
        self.run_until(spec, std::future::pending::<()>()).await
    }

    /// Like [`Executor::run`], aborting the command when `abort` resolves first.
    pub async fn run_until(&self, spec: Spec, abort: impl Future<Output = ()>) -> Result<RunResult, CordonError> {
        let timeout = spec.timeout;
        let output_mode = spec.output;
        let launched = self.launch(&spec).await?;
        runner_failed_is_an_error(
            finish(launched, timeout, output_mode, &self.config, abort, None, spec.policy.mode).await,
        )
    }

    /// Like [`Executor::run_until`], and each change of `interrupts` delivers SIGINT to
    /// the command's process group (a caller's Ctrl-C, as a terminal would deliver it):
    /// the command decides whether that ends it; the deadline and `abort` still apply.
    /// A run that was interrupted gives its relayed stdio only the drain grace at its end.
    pub async fn run_interruptible(
        &self,
        spec: Spec,
        abort: impl Future<Output = ()>,
        interrupts: Interrupts,
    ) -> Result<RunResult, CordonError> {
        let timeout = spec.timeout;
        let output_mode = spec.output;
        let launched = self.launch(&spec).await?;
        runner_failed_is_an_error(
            finish(launched, timeout, output_mode, &self.config, abort, Some(interrupts), spec.policy.mode).await,
        )
    }

    /// Start a spec in the background.
    pub async fn start(&self, spec: Spec) -> Result<Handle, CordonError> {
        let timeout = spec.timeout;
        let output_mode = spec.output;
        let mode = spec.policy.mode;
        let launched = self.launch(&spec).await?;
        let (abort_tx, mut abort_rx) = watch::channel(false);
        let (result_tx, result_rx) = watch::channel(None);
        let shared = Arc::new(HandleShared {
            pid: launched.pid,
            stdout: launched.stdout.clone(),
            stderr: launched.stderr.clone(),
            cursors: Mutex::new((0, 0)),
            abort: abort_tx,
            result: result_rx,
        });
        let config = self.config.clone();
        tokio::spawn(async move {
            let abort = async move {
                while !*abort_rx.borrow_and_update() {
                    if abort_rx.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
            };
            let result = finish(launched, timeout, output_mode, &config, abort, None, mode).await;
            let _ = result_tx.send(Some(result));
        });
        Ok(Handle { shared })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_paths_are_normalized_for_every_planner() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir(ws.join("sub")).unwrap();
        std::os::unix::fs::symlink(ws.join("sub"), ws.join("link")).unwrap();
        let script = ws.join("x.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::copy(&script, ws.join("sub/y.sh")).unwrap();
        let env = [];
        let found = |p: &str| resolve_program(OsStr::new(p), &env, &ws).unwrap();
        for p in ["./x.sh", "sub/../x.sh", "sub//../x.sh", ".//x.sh"] {
            assert_eq!(found(p), script, "{p}");
        }
        // `link/..` is the directory above the link's target, as the kernel resolves it.
        assert_eq!(found("./link/./y.sh"), ws.join("sub/y.sh"));
        assert_eq!(found("link/../x.sh"), script);
        // A program that is a symlink stays the link (argv[0]'s behaviour is the link's).
        std::os::unix::fs::symlink(&script, ws.join("alias")).unwrap();
        assert_eq!(found("./alias"), ws.join("alias"));
        assert_eq!(found(script.to_str().unwrap()), script);
    }

    #[test]
    fn the_startup_sweep_runs_at_most_once_a_minute() {
        let dir = tempfile::tempdir().unwrap();
        let now = std::time::SystemTime::now();
        assert!(sweep_due(dir.path(), now), "no stamp yet");
        assert!(!sweep_due(dir.path(), now), "just swept");
        assert!(!sweep_due(dir.path(), now + Duration::from_secs(30)));
        assert!(sweep_due(dir.path(), now + SWEEP_EVERY + Duration::from_secs(1)), "a minute later");
        // A stamp from the future (a clock set back) does not stop sweeps.
        assert!(sweep_due(dir.path(), now - Duration::from_secs(3600)));
        // Nor does something else at the stamp's name.
        let stamp = dir.path().join(SWEEP_STAMP);
        std::fs::remove_file(&stamp).unwrap();
        std::fs::create_dir(&stamp).unwrap();
        assert!(sweep_due(dir.path(), now));
    }
}
