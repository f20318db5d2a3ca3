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
//! What it does not do: it does not decide confinement (runners do) or classify
//! denials beyond the unambiguous (a seccomp kill).

pub mod capture;

use crate::env::build_environment;
use crate::error::CordonError;
use crate::host::HostFacts;
use crate::mode::Mode;
use crate::policy::resolve_policy;
use crate::request::{Command, ExecutorConfig, Output, Request, Spec, Stdin};
use crate::result::{Denial, RunResult, SandboxFacts};
use crate::runner::{self, stage, PlanInput, RunnerKind, Selection};
use capture::{Increment, StreamCapture};
use cordon_stage::{SpawnError, Step};
use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::future::Future;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

/// Pipe buffer size requested for captured streams (fewer wakeups at high volume).
const PIPE_SIZE: i32 = 1 << 20;
/// Read chunk for captured streams.
const READ_CHUNK: usize = 256 * 1024;
/// `PATH` used when the command's environment has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How long a supervising init may take to sweep a run it was told to end (it kills
/// and reaps every descendant, normally within milliseconds) before the run's group is
/// SIGKILLed, which would orphan descendants that left the group.
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
    for &(pid, supervised) in runs {
        if supervised {
            let _ = cordon_stage::request_sweep(pid);
        }
    }
    let start = std::time::Instant::now();
    let running = |pid: i32| {
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        matches!(nix::sys::wait::waitid(nix::sys::wait::Id::Pid(Pid::from_raw(pid)), flags), Ok(WaitStatus::StillAlive))
    };
    while start.elapsed() < SWEEP_WAIT && runs.iter().any(|&(pid, supervised)| supervised && running(pid)) {
        std::thread::sleep(Duration::from_millis(5));
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

/// The status of a background process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Still running.
    Running,
    /// Finished (exited, killed, timed out or aborted).
    Exited,
}

/// New output of a background process since the previous read.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct OutputRead {
    /// New stdout bytes (lossy UTF-8).
    pub stdout: String,
    /// New stderr bytes (lossy UTF-8).
    pub stderr: String,
    /// Some unread bytes were dropped from memory; the spill files have them.
    pub lossy: bool,
    /// The complete stdout, while spilling works.
    pub stdout_spill: Option<PathBuf>,
    /// The complete stderr, while spilling works.
    pub stderr_spill: Option<PathBuf>,
}

#[derive(Debug)]
struct HandleShared {
    pid: i32,
    stdout: StreamCapture,
    stderr: StreamCapture,
    cursors: Mutex<(u64, u64)>,
    abort: watch::Sender<bool>,
    result: watch::Receiver<Option<RunResult>>,
}

/// A background process started by [`Executor::start`].
#[derive(Debug, Clone)]
pub struct Handle {
    shared: Arc<HandleShared>,
}

impl Handle {
    /// The pid of the run's process-group leader as the host sees it: the run's init
    /// (pid 1 of its pid namespace when confined; otherwise a supervising subreaper
    /// whose child is the command). Signals to its group reach the command.
    pub fn pid(&self) -> i32 {
        self.shared.pid
    }

    /// Running or exited.
    pub fn status(&self) -> Status {
        if self.shared.result.borrow().is_some() {
            Status::Exited
        } else {
            Status::Running
        }
    }

    /// The exit code, once exited normally.
    pub fn exit_code(&self) -> Option<i32> {
        self.shared.result.borrow().as_ref().and_then(|r| r.exit_code)
    }

    /// The terminating signal, once killed by one.
    pub fn signal(&self) -> Option<i32> {
        self.shared.result.borrow().as_ref().and_then(|r| r.signal)
    }

    /// Resolves with the result when the process has finished. Never fails.
    pub fn done(&self) -> impl Future<Output = RunResult> + Send + 'static {
        let mut rx = self.shared.result.clone();
        async move {
            loop {
                if let Some(r) = rx.borrow_and_update().clone() {
                    return r;
                }
                if rx.changed().await.is_err() {
                    // The task is gone without a result: only possible if the runtime
                    // shut down; report what we know.
                    if let Some(r) = rx.borrow().clone() {
                        return r;
                    }
                    std::future::pending::<()>().await;
                }
            }
        }
    }

    /// Output produced since the previous call (only what is new).
    pub fn read_output(&self) -> OutputRead {
        let mut cur = self.shared.cursors.lock().unwrap_or_else(|p| p.into_inner());
        let Increment { bytes: out, lossy: lo } = self.shared.stdout.read_since(&mut cur.0);
        let Increment { bytes: err, lossy: le } = self.shared.stderr.read_since(&mut cur.1);
        OutputRead {
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
            lossy: lo || le,
            stdout_spill: self.shared.stdout.spill_path(),
            stderr_spill: self.shared.stderr.spill_path(),
        }
    }

    /// Stop the process (SIGTERM, grace, SIGKILL to its group). Returns false when it
    /// had already finished. Calling it again is harmless.
    pub fn kill(&self) -> bool {
        if self.status() == Status::Exited {
            return false;
        }
        let _ = self.shared.abort.send(true);
        true
    }
}

/// How a wait ended.
#[derive(Debug, Clone, Copy)]
enum Exit {
    Code(i32),
    Signal(i32),
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

fn signal_group(pid: i32, sig: Signal) {
    let _ = killpg(Pid::from_raw(pid), sig);
    let _ = kill(Pid::from_raw(pid), sig);
}

/// The command's own wait status, as reported by its init (4 bytes, native endian).
fn init_report(exit_status: Option<&OwnedFd>) -> Option<Exit> {
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

async fn wait_exit(pidfd: &AsyncFd<OwnedFd>, pid: i32, exit_status: Option<&OwnedFd>) -> Exit {
    loop {
        match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => return init_report(exit_status).unwrap_or(Exit::Code(code)),
            Ok(WaitStatus::Signaled(_, sig, _)) => return init_report(exit_status).unwrap_or(Exit::Signal(sig as i32)),
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            // Reaped elsewhere (the executor was dropped): it was killed.
            Err(_) => return Exit::Signal(libc::SIGKILL),
        }
        match pidfd.readable().await {
            Ok(mut guard) => guard.clear_ready(),
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

async fn drain(fd: OwnedFd, capture: StreamCapture) {
    let Ok(mut rx) = tokio::net::unix::pipe::Receiver::from_owned_fd(fd) else { return };
    // `read_buf` fills spare capacity without zeroing it first.
    let mut buf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    loop {
        buf.clear();
        match rx.read_buf(&mut buf).await {
            Ok(0) => break,
            Ok(_) => capture.push(&buf),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), CordonError> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| CordonError::io("creating a pipe", std::io::Error::from_raw_os_error(e as i32)))
}

/// Duplicate `fd` to a number above 2 (the stage requires it), close-on-exec.
fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, CordonError> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    cordon_stage::fds::dup_cloexec(fd.as_raw_fd()).map_err(|e| CordonError::io("duplicating a descriptor", e))
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
    Ok(candidate)
}

/// Everything a started process needs to finish its run.
struct Launched {
    pid: i32,
    /// The bwrap stage helper's status pipe (see `cordon_stage::helper`).
    helper_status: Option<OwnedFd>,
    exit_status: Option<OwnedFd>,
    supervisor: Option<crate::denials::Supervisor>,
    denials: crate::denials::DenialSink,
    /// cordon's egress proxy (`--allow-host` runs) and where it records refusals.
    proxy: Option<(crate::proxy::Proxy, crate::denials::DenialSink)>,
    policy: crate::policy::ExecutionPolicy,
    workdir: PathBuf,
    pidfd: AsyncFd<OwnedFd>,
    selection: Selection,
    enforcement: crate::result::Enforcement,
    stdout: StreamCapture,
    stderr: StreamCapture,
    collectors: Vec<tokio::task::JoinHandle<()>>,
    stdin_writer: Option<tokio::task::JoinHandle<()>>,
    run_dir: Option<PathBuf>,
    limits: crate::limits::RunLimits,
    guard: KillOnDrop,
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
        cordon_stage::signals::ignore_sigpipe();
        host.stage_helper = config.stage_helper.clone();
        let base = config.state_dir.clone().unwrap_or_else(std::env::temp_dir);
        let state_dir = private_state_dir(&base, host.euid)?;
        // Canonical once, so launch compares it with the (canonical) writable roots.
        let state_dir = state_dir.canonicalize().unwrap_or(state_dir);
        let cgroups = crate::limits::CgroupLayout::detect();
        crate::limits::sweep_stale(&cgroups);
        let memory_budget = crate::limits::memory_budget(&cgroups);
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
        let policy = resolve_policy(&req.policy, &workdir)?;
        let timeout = match req.timeout {
            Some(t) if t.is_zero() => {
                return Err(CordonError::InvalidRequest { field: "timeout", why: "must be greater than zero".into() })
            }
            Some(t) => t.min(cfg.max_timeout),
            None => cfg.default_timeout.min(cfg.max_timeout),
        };
        let output_cap = req.output_cap.unwrap_or(cfg.default_output_cap).min(cfg.max_output_cap);
        let limits =
            crate::limits::resolve_limits(&req.limits, &cfg.default_limits, &cfg.max_limits, self.memory_budget)
                .map_err(|e| CordonError::InvalidRequest { field: e.field, why: e.why })?;
        let spill_cap = req.spill_cap.unwrap_or(cfg.default_spill_cap).min(cfg.max_spill_cap);
        let ambient = cfg.ambient_env.clone().unwrap_or_else(|| std::env::vars_os().collect());
        let env = build_environment(ambient, &req.env, &[], &[])?;
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
        Ok(finish(launched, timeout, output_mode, &self.config, abort, spec.policy.mode).await)
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
            let result = finish(launched, timeout, output_mode, &config, abort, mode).await;
            let _ = result_tx.send(Some(result));
        });
        Ok(Handle { shared })
    }

    async fn launch(&self, spec: &Spec) -> Result<Launched, CordonError> {
        let selection = runner::select(&spec.policy, &self.host, spec.runner)?;
        // Every checked path, opened once without following symlinks; the plan's
        // grants, mounts and chdir are tied to these files (see `crate::pin`).
        let pins = crate::pin::Pins::take(&spec.policy, &spec.workdir)?;
        // Allowed host unix sockets, pinned now: the supervisor connects to these files.
        let allowed_sockets = spec
            .policy
            .allow_unix_sockets
            .iter()
            .map(|p| {
                crate::denials::AllowedSocket::pin(p)
                    .map_err(|source| crate::error::PolicyError::Changed { path: p.clone(), source })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if spec.policy.mode.is_confined() {
            let state = &self.state_dir;
            if let Some(root) =
                spec.policy.writable().into_iter().find(|w| state.starts_with(w) || w.starts_with(state))
            {
                return Err(crate::error::PolicyError::StateDirWritable { state_dir: state.clone(), root }.into());
            }
        }
        let program = resolve_program(&spec.argv[0], &spec.env, &spec.workdir)?;

        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let run_dir_path = self.state_dir.join(format!("run-{}-{id}-{:08x}", std::process::id(), random_u32()));

        let interactive = spec.stdin == Stdin::Inherit && std::io::IsTerminal::is_terminal(&std::io::stdin());
        let input = PlanInput {
            policy: &spec.policy,
            host: &self.host,
            program,
            argv: spec.argv.clone(),
            cwd: spec.workdir.clone(),
            run_dir: run_dir_path.clone(),
            new_session: !interactive,
            tmpfs_size: Some(spec.limits.tmpfs_size()),
        };
        let plan = selection.plan(&input).map_err(|e| CordonError::runner_failed(selection.runner, e))?;
        // Resource limits: the run's cgroups (best available), then the rlimits that
        // cover what they do not. A gap in a limit the caller set refuses to run
        // unless the policy allows best effort.
        let cg_name = format!("{}{}-{id}-{:08x}", crate::limits::CGROUP_PREFIX, std::process::id(), random_u32());
        let userns = plan.namespaces.user || selection.runner == RunnerKind::Bwrap;
        let limits = crate::limits::RunLimits::prepare(&self.cgroups, &cg_name, &spec.limits, self.host.euid, userns);
        let mut enforcement = plan.enforcement.clone();
        let limit_gaps = limits.explicit_gaps();
        if !limit_gaps.is_empty() && spec.policy.mode.is_confined() && !spec.policy.best_effort {
            let why: Vec<String> = limit_gaps.iter().map(|(r, w)| format!("{} ({w})", r.name())).collect();
            let reason = format!("cannot fully enforce: {}", why.join(", "));
            let reasons = vec![crate::error::RunnerReason { runner: selection.runner, reason }];
            return Err(CordonError::SandboxUnavailable { mode: spec.policy.mode, reasons });
        }
        for (r, reason) in limit_gaps {
            if enforcement.level == crate::result::EnforcementLevel::Full {
                enforcement.level = crate::result::EnforcementLevel::Partial;
            }
            enforcement.gaps.push(crate::result::Gap { restriction: r, reason });
        }
        let run_dir = if plan.needs_run_dir {
            let mk = |p: &Path| std::fs::DirBuilder::new().mode(0o700).create(p);
            mk(&run_dir_path)
                .and_then(|_| mk(&run_dir_path.join("tmp")))
                .and_then(|_| mk(&run_dir_path.join("shm")))
                .map_err(|e| CordonError::io(format!("creating the per-run directory {}", run_dir_path.display()), e))?;
            Some(run_dir_path)
        } else {
            None
        };
        let mut env = spec.env.clone();
        for (k, v) in &plan.env {
            env.retain(|(name, _)| name != k.as_str());
            env.push((k.into(), v.into()));
        }
        let proxy = start_proxy(&plan, spec, selection.runner, &mut env)?;
        // Network off looks like a machine without a network (ENETUNREACH); npm retries
        // that for more than a minute by default. Unless the caller chose otherwise,
        // it gives up at once (docs/denials.md).
        if spec.policy.mode.is_confined() && !spec.policy.network {
            for (k, v) in OFFLINE_ENV {
                if !env.iter().any(|(name, _)| name == k) {
                    env.push((k.into(), v.into()));
                }
            }
        }

        // Streams.
        let (stdin_fd, stdin_writer_fd): (OwnedFd, Option<OwnedFd>) = match &spec.stdin {
            Stdin::Null => {
                let f = std::fs::File::open("/dev/null").map_err(|e| CordonError::io("opening /dev/null", e))?;
                (above_stdio(f.into())?, None)
            }
            Stdin::Bytes(_) => {
                let (r, w) = pipe()?;
                (above_stdio(r)?, Some(w))
            }
            Stdin::Inherit => {
                (cordon_stage::fds::dup_cloexec(0).map_err(|e| CordonError::io("duplicating stdin", e))?, None)
            }
        };
        // Spill names carry cordon's pid: the startup sweep leaves a live writer's alone.
        let pid_tag = std::process::id();
        let spill = (spec.output == Output::Capture).then_some(self.state_dir.as_path());
        let stdout = StreamCapture::new(spec.output_cap, spec.spill_cap, spill, &format!("out-{pid_tag}-{id}-"));
        let stderr = StreamCapture::new(spec.output_cap, spec.spill_cap, spill, &format!("err-{pid_tag}-{id}-"));
        let mut readers = Vec::new();
        let child_out: [OwnedFd; 2] = match spec.output {
            Output::Capture => {
                let (r1, w1) = pipe()?;
                let (r2, w2) = pipe()?;
                let _ = nix::fcntl::fcntl(&w1, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_SIZE));
                readers.push((r1, stdout.clone()));
                readers.push((r2, stderr.clone()));
                [above_stdio(w1)?, above_stdio(w2)?]
            }
            Output::Inherit => [
                cordon_stage::fds::dup_cloexec(1).map_err(|e| CordonError::io("duplicating stdout", e))?,
                cordon_stage::fds::dup_cloexec(2).map_err(|e| CordonError::io("duplicating stderr", e))?,
            ],
        };
        let stdio = [stdin_fd.as_raw_fd(), child_out[0].as_raw_fd(), child_out[1].as_raw_fd()];
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
            &plan,
            &env,
            stdio,
            &self.host,
            notify_pair.as_ref().map(|(_, child)| child.as_raw_fd()),
            &pins,
            spec.observe_writes,
        )
        .map_err(|e| CordonError::runner_failed(selection.runner, e))?;
        let supervised = materialized.stage.notify_socket.is_some();
        let observed = materialized.observed;
        let passed_fds = materialized.keep;
        let helper_status = materialized.helper_status;
        let helper_notify = materialized.helper_notify;
        let mut stage_plan = materialized.stage;
        stage_plan.limits = limits.child();

        // Spawning blocks for the child's stage (well under a millisecond); doing it
        // inline avoids a thread hop per run.
        let spawned = cordon_stage::spawn(stage_plan);
        // The child has its copies now (or failed); close ours.
        drop(pins);
        drop(stdin_fd);
        drop(child_out);
        drop(passed_fds);
        let mut helper_socket = None;
        let listener = match notify_pair {
            Some((parent_end, child_end)) if supervised && spawned.is_ok() => {
                drop(child_end);
                Some(cordon_stage::notify::recv_fd(parent_end.as_fd()))
            }
            // The helper sends its listener only once bubblewrap has built the
            // sandbox: received by the supervisor task below.
            Some((parent_end, child_end)) if helper_notify && spawned.is_ok() => {
                drop(child_end);
                helper_socket = Some(parent_end);
                None
            }
            _ => None,
        };
        let spawned = match spawned {
            Ok(s) => s,
            Err(e) => {
                if let Some(dir) = &run_dir {
                    let _ = std::fs::remove_dir_all(dir);
                }
                return Err(spawn_error(e, selection.runner, &spec.argv[0]));
            }
        };
        let pid = spawned.pid;
        let exit_status_fd = spawned.exit_status;
        // Without a pid namespace the stage's init is a supervising subreaper.
        let supervised = !plan.namespaces.pid;
        self.registry.running.lock().unwrap_or_else(|p| p.into_inner()).insert(id, (pid, supervised));
        let guard = KillOnDrop { pid, supervised, armed: true, registry: self.registry.clone(), id };
        // `AsyncFd::new` is deprecated because a bare `RawFd` could be closed under it;
        // an `OwnedFd` that the `AsyncFd` owns cannot, and `register` needs `unsafe`.
        #[allow(deprecated)]
        let pidfd = AsyncFd::new(spawned.pidfd).map_err(|e| CordonError::io("watching the child", e))?;

        let denials: crate::denials::DenialSink = Arc::default();
        let allowed_sockets: Arc<[crate::denials::AllowedSocket]> = allowed_sockets.into();
        let write_rules = spec.observe_writes.then(|| write_rules(&plan, &spec.policy));
        let supervision = |observed| crate::denials::Supervision {
            observed,
            sink: denials.clone(),
            allowed: allowed_sockets.clone(),
            proxy: proxy.as_ref().map(|(p, _)| p.addr()),
            writes: write_rules.map(crate::writes::WriteJudge::new),
        };
        let source = match listener {
            Some(Ok(l)) => Some(crate::denials::ListenerSource::Listener(l)),
            Some(Err(e)) => {
                // The child installed a notifying filter: without a supervisor its
                // observed syscalls would fail with ENOSYS. Stop it; nothing useful ran.
                let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                drop(guard);
                return Err(CordonError::runner_failed(
                    selection.runner,
                    crate::runner::RunnerFailure::SeccompListener(e),
                ));
            }
            None => helper_socket.map(crate::denials::ListenerSource::Socket),
        };
        let supervisor = match source {
            Some(source) => match crate::denials::start(source, supervision(observed)) {
                Ok(s) => Some(s),
                Err(e) => {
                    let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                    drop(guard);
                    return Err(CordonError::io("starting the seccomp supervisor", e));
                }
            },
            None => None,
        };
        let collectors = readers.into_iter().map(|(fd, cap)| tokio::spawn(drain(fd, cap))).collect();
        let stdin_writer = match (&spec.stdin, stdin_writer_fd) {
            (Stdin::Bytes(bytes), Some(w)) => {
                let bytes = bytes.clone();
                Some(tokio::spawn(async move {
                    if let Ok(mut tx) = tokio::net::unix::pipe::Sender::from_owned_fd(w) {
                        // EPIPE (the command exited without reading) is harmless.
                        let _ = tx.write_all(&bytes).await;
                    }
                }))
            }
            _ => None,
        };
        Ok(Launched {
            pid,
            helper_status,
            exit_status: exit_status_fd,
            supervisor,
            denials,
            proxy,
            policy: spec.policy.clone(),
            workdir: spec.workdir.clone(),
            pidfd,
            enforcement,
            selection,
            stdout,
            stderr,
            collectors,
            stdin_writer,
            run_dir,
            limits,
            guard,
        })
    }
}

/// Start cordon's egress proxy when the plan routes the network through it
/// (`--allow-host`), and point the command at it (replacing any proxy settings of the
/// caller: nothing else is reachable). The channel is the supervised `connect()`; a
/// plan without a supervisor has none, and nothing runs (fail closed).
fn start_proxy(
    plan: &crate::runner::LaunchPlan,
    spec: &Spec,
    runner: RunnerKind,
    env: &mut Vec<(OsString, OsString)>,
) -> Result<Option<(crate::proxy::Proxy, crate::denials::DenialSink)>, CordonError> {
    let Some(seccomp) = plan.seccomp.filter(|s| s.proxy) else { return Ok(None) };
    if !seccomp.supervise {
        let reason = "--allow-host needs cordon's seccomp supervisor, which this runner's plan lacks".to_string();
        return Err(CordonError::SandboxUnavailable {
            mode: spec.policy.mode,
            reasons: vec![crate::error::RunnerReason { runner, reason }],
        });
    }
    let sink: crate::denials::DenialSink = Arc::default();
    let config = crate::proxy::ProxyConfig {
        allow: spec.policy.allow_hosts.clone(),
        test_resolve: crate::proxy::TestResolver::from_env(),
    };
    let proxy = crate::proxy::Proxy::start(config, sink.clone())
        .map_err(|e| CordonError::io("starting the egress proxy", e))?;
    for (k, v) in crate::proxy::client_env(proxy.addr()) {
        env.retain(|(name, _)| name.as_os_str() != k.as_str());
        env.push((k.into(), v.into()));
    }
    Ok(Some((proxy, sink)))
}

/// Variables set for a confined run with the network off, unless the caller set them.
const OFFLINE_ENV: [(&str, &str); 2] = [("npm_config_fetch_retries", "0"), ("PIP_RETRIES", "0")];

/// The rules the supervisor judges write-intent syscalls against: the run's own
/// Landlock ruleset (the landlock runner's, or the one the bwrap runner's stage helper
/// applies) and its mount layer.
fn write_rules(plan: &crate::runner::LaunchPlan, policy: &crate::policy::ExecutionPolicy) -> crate::writes::WriteRules {
    let landlock = plan.landlock.as_ref().or(plan.stage_helper.as_ref().map(|h| &h.landlock));
    let mut rules = crate::writes::WriteRules {
        landlock_abi: landlock.map(|l| l.abi),
        protected: policy.protected.clone(),
        // bubblewrap always builds a mount namespace, read-only outside the binds.
        mount_layer: plan.namespaces.mount || plan.runner == RunnerKind::Bwrap,
        read_only_mode: policy.mode == Mode::ReadOnly,
        // The landlock runner drops them in its stage; the bwrap runner's stage helper
        // verifies they are empty.
        capabilities_dropped: plan.drop_capabilities || plan.stage_helper.is_some(),
        ..Default::default()
    };
    if let Some(l) = landlock {
        rules.write = l.write.clone();
        rules.write_in_view = l.write_in_child.iter().chain(l.devices.iter()).cloned().collect();
    }
    rules
}

/// A random number for unique names (not a secret: names are created exclusively).
fn random_u32() -> u32 {
    let mut b = [0u8; 4];
    let _ = getrandom_bytes(&mut b);
    u32::from_ne_bytes(b)
}

fn getrandom_bytes(buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

fn spawn_error(e: SpawnError, runner: RunnerKind, argv0: &OsStr) -> CordonError {
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
        SpawnError::Stage(f) => CordonError::runner_failed(runner, crate::runner::RunnerFailure::Stage(f)),
        SpawnError::Parent { what, source } => CordonError::io(what, source),
    }
}

async fn finish(
    mut l: Launched,
    timeout: Duration,
    output_mode: Output,
    config: &ExecutorConfig,
    abort: impl Future<Output = ()>,
    mode: Mode,
) -> RunResult {
    let pid = l.pid;
    let mut timed_out = false;
    let mut aborted = false;
    let exit = {
        let wait = wait_exit(&l.pidfd, pid, l.exit_status.as_ref());
        tokio::pin!(wait);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        tokio::pin!(abort);
        let first = tokio::select! {
            biased;
            st = &mut wait => Some(st),
            _ = &mut deadline => { timed_out = true; None }
            _ = &mut abort => { aborted = true; None }
        };
        match first {
            Some(st) => st,
            None => {
                signal_group(pid, Signal::SIGTERM);
                match tokio::time::timeout(config.kill_grace, &mut wait).await {
                    Ok(st) => st,
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
    // The leader is reaped; nothing of its group may stay behind.
    let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    l.guard.armed = false;
    drop(l.guard);
    // Nor of its cgroups (which also hold processes that left the group); read what
    // the kernel recorded, then remove them.
    let evidence = l.limits.sweep().await;

    // Bounded wait for pipes that outliving grandchildren still hold; on timeout the
    // dropped future aborts the collectors.
    let drain_all = futures_join(std::mem::take(&mut l.collectors));
    let _ = tokio::time::timeout(config.drain_grace, drain_all).await;
    if let Some(w) = l.stdin_writer.take() {
        w.abort();
    }
    let (stdout, stderr) = match output_mode {
        Output::Capture => (l.stdout.finish(), l.stderr.finish()),
        Output::Inherit => Default::default(),
    };
    let (exit_code, signal) = match exit {
        Exit::Code(c) => (Some(c), None),
        Exit::Signal(s) => (None, Some(s)),
    };
    if let Some(s) = l.supervisor.take() {
        s.finish();
    }
    let network_log = l.proxy.take().map(|(proxy, sink)| {
        let log = proxy.finish();
        let refused = std::mem::take(&mut *sink.lock().unwrap_or_else(|p| p.into_inner()));
        for d in refused {
            crate::denials::record(&l.denials, d);
        }
        log
    });
    let mut denials: Vec<Denial> = std::mem::take(&mut *l.denials.lock().unwrap_or_else(|p| p.into_inner()));
    // Every entry comes from the supervisor's own observations; the command's stderr
    // only links its lines to them (docs/denials.md).
    if mode.is_confined() {
        denials.truncate(crate::denials::MAX_DENIALS);
        crate::denials::link_lines(&mut denials, &stderr.text, &l.workdir);
        denials.iter_mut().for_each(crate::denials::bound_text);
    }
    if let Some(dir) = &l.run_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    // The bwrap stage helper confined itself and executed the command only if it said
    // so before `execve`; anything else (a failed step, bubblewrap dying first) means
    // the command never ran in the complete sandbox.
    let runner_failed = match &l.helper_status {
        Some(fd) => cordon_stage::helper::read_status(fd.as_fd()) != cordon_stage::helper::HelperStatus::Executed,
        None => false,
    };
    let killed_by = match (signal, exit_code) {
        (Some(s), _) => Some(s),
        // bubblewrap reports a signalled command as 128 + N.
        (None, Some(c)) if l.selection.runner == RunnerKind::Bwrap && c > 128 => Some(c - 128),
        _ => None,
    };
    let (limit, limits) = l.limits.conclude(&evidence, killed_by);
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
            enforcement: l.enforcement,
            runner_failed,
            writable_roots: if mode.is_confined() { l.policy.writable() } else { vec![PathBuf::from("/")] },
            protected: l.policy.protected.clone(),
            skipped: l.selection.skipped,
            network_log,
        },
        limit,
        limits: Some(limits),
    }
}

/// Wait for every handle; abort the stragglers when this future is dropped.
async fn futures_join(handles: Vec<tokio::task::JoinHandle<()>>) {
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
