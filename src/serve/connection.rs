//! One connection's executor: requests clamped to the ceiling, background processes
//! owned by the connection, and a shutdown that kills and reaps all of them.
//!
//! Shared by `cordon serve` (JSON lines) and `cordon mcp` (MCP tools). Every method
//! returns either a value or an [`RpcError`] with a stable code; none panics on client
//! input.
//!
//! Limits (constants below): at most [`MAX_RUNNING_JOBS`] background processes run at
//! once; at most [`MAX_KEPT_JOBS`] handles, holding at most [`MAX_BACKGROUND_TAILS`]
//! bytes of output tails between them, are remembered (the oldest finished ones are
//! forgotten first; a `start` that cannot fit while the rest still run is refused).
//!
//! What it does not do: it does not read or write the transport (see
//! [`crate::serve`], [`crate::mcp`]).

mod approvals;
pub use approvals::{Approvals, Approved};

use super::protocol::{
    codes, HelloParams, Method, RpcError, RunParams, CAPABILITIES, MAX_LINE_BYTES, PROTOCOL_VERSION,
};
use crate::ceiling::Ceiling;
use crate::error::CordonError;
use crate::escalation::{
    self, Approver, AuditLog, CommandView, EscalatedOutcome, EscalationError, EscalationOptions, Grant, ProgramApprover,
};
use crate::exec::{Executor, Handle, Status};
use crate::host::HostFacts;
use crate::mode::Mode;
use crate::policy::{resolve_policy, PolicyRequest};
use crate::request::ExecutorConfig;
use crate::result::RunResult;
use crate::runner::{self, probe_runner, RunnerChoice, RunnerKind};
use crate::session::{GoverningFiles, GoverningKind};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::watch;

/// Background processes that may run at once per connection: far more than an agent
/// needs, few enough that a runaway client cannot exhaust the host's pids.
pub const MAX_RUNNING_JOBS: usize = 128;
/// Handles remembered per connection (finished ones are forgotten oldest first), so a
/// long connection's memory stays bounded.
pub const MAX_KEPT_JOBS: usize = 1024;
/// Output tail bytes (twice each handle's `output_cap`: both streams) the remembered
/// background handles of one connection may hold: every kept handle at the default
/// cap, or four at the largest. Memory per tail byte is at most about three (the tail
/// and the finished result's text), so this bounds a connection's background output
/// near 400 MiB instead of leaving it to the handle count.
pub const MAX_BACKGROUND_TAILS: usize = MAX_KEPT_JOBS * 2 * crate::request::DEFAULT_OUTPUT_CAP;
/// Requests handled at once per `cordon serve` connection; beyond it the server stops
/// reading until one finishes (backpressure, never an error).
pub const MAX_IN_FLIGHT: usize = 256;
/// How long `kill` and shutdown wait for a process to be reaped after signalling it:
/// the executor's SIGTERM→SIGKILL grace plus its pipe-drain grace, plus a margin.
const REAP_WAIT: Duration =
    Duration::from_secs(crate::request::KILL_GRACE.as_secs() + crate::request::DRAIN_GRACE.as_secs() + 2);

struct Job {
    handle: Handle,
    mode: Mode,
    /// Its in-memory tail per stream (what a `read` reply can carry).
    output_cap: usize,
}

#[derive(Default)]
struct Jobs {
    next: u64,
    map: BTreeMap<u64, Job>,
    closed: bool,
    /// Slots reserved by `start` calls still launching: counted against the limit
    /// together with the running jobs, so concurrent starts can never overshoot it.
    starting: usize,
    /// Tail bytes reserved by `start` calls still launching.
    starting_tails: usize,
}

/// A connection's executor and background processes.
pub struct Connection {
    exec: Executor,
    ceiling: Ceiling,
    approvals: Approvals,
    /// The client said in `hello` that it answers `approve` requests (`cordon serve`),
    /// and its name.
    client_approves: Mutex<Option<String>>,
    jobs: Mutex<Jobs>,
    shutdown: watch::Sender<bool>,
    /// Spill files named in responses the transport has written: the client's now.
    delivered: Mutex<std::collections::HashSet<PathBuf>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("ceiling", &self.ceiling).finish_non_exhaustive()
    }
}

/// The answer to `start`.
#[derive(Debug, Clone, Serialize)]
pub struct Started {
    /// The handle for `read` and `kill`.
    pub handle: u64,
    /// The pid of the run's process-group leader, as seen by the host (the run's init;
    /// the command is its child).
    pub pid: i32,
    /// The mode it runs under.
    pub mode: Mode,
}

/// The answer to `read`: only what is new since the previous read.
#[derive(Debug, Clone, Serialize)]
pub struct ReadReply {
    /// The handle.
    pub handle: u64,
    /// `running` or `exited`.
    pub status: Status,
    /// New stdout (lossy UTF-8).
    pub stdout: String,
    /// New stderr (lossy UTF-8).
    pub stderr: String,
    /// Some unread bytes were dropped from memory; the spill files have them.
    pub lossy: bool,
    /// The complete stdout, while it is being spilled.
    pub stdout_spill: Option<PathBuf>,
    /// The complete stderr, while it is being spilled.
    pub stderr_spill: Option<PathBuf>,
    /// The exit code, once exited normally.
    pub exit_code: Option<i32>,
    /// The terminating signal, once killed by one.
    pub signal: Option<i32>,
    /// The full result (sandbox facts included), once exited.
    pub result: Option<RunResult>,
}

/// The answer to `kill`.
#[derive(Debug, Clone, Serialize)]
pub struct KillReply {
    /// The handle.
    pub handle: u64,
    /// It was still running (false: it had already exited; nothing was done).
    pub was_running: bool,
    /// The status after the kill (`exited` unless it outlived the reap wait).
    pub status: Status,
    /// The exit code, if it exited normally.
    pub exit_code: Option<i32>,
    /// The terminating signal, if killed by one.
    pub signal: Option<i32>,
}

impl Connection {
    /// A connection under `ceiling`.
    pub fn new(ceiling: Ceiling, config: ExecutorConfig) -> Result<Connection, CordonError> {
        let exec = Executor::new(config)?;
        let (shutdown, _) = watch::channel(false);
        Ok(Connection {
            exec,
            ceiling,
            approvals: Approvals::default(),
            client_approves: Mutex::new(None),
            jobs: Mutex::new(Jobs::default()),
            shutdown,
            delivered: Mutex::default(),
        })
    }

    /// The same connection, asking `approvals` for denied calls' narrow grants. The
    /// audit log and the approver program must lie outside every writable root of the
    /// ceiling (`GOVERNING_FILE_WRITABLE` otherwise, found here, before anything runs).
    pub fn with_approvals(mut self, approvals: Approvals) -> Result<Connection, RpcError> {
        let mut governing = GoverningFiles::new();
        if let Some(log) = &approvals.audit {
            governing.add(GoverningKind::AuditLog, log.path());
        }
        for (kind, path) in approvals.program.iter().flat_map(|p| p.governing()) {
            governing.add(kind, path);
        }
        governing.refuse_under(self.exec.state_dir());
        let spec = self
            .spec(RunParams { command: Some(crate::request::Command::Shell("true".into())), ..Default::default() })?;
        let gov = |e: crate::session::GoverningFileError| RpcError::new(codes::CORDON_ERROR, e.code(), e.to_string());
        governing.check(&spec.policy).map_err(gov)?;
        self.approvals = approvals;
        Ok(self)
    }

    /// The name of the client, when it said in `hello` that it answers `approve`
    /// requests (its user decides a denied call's narrow grant).
    pub fn client_approves(&self) -> Option<String> {
        self.client_approves.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The approval settings.
    pub fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    /// The output tail bytes (both streams) the answer to `method` can carry: what the
    /// transport reserves from its pending-output budget before dispatching it.
    pub fn output_reservation(&self, method: &Method) -> usize {
        let cfg = self.exec.config();
        let cap = match method {
            Method::Run(p) => p
                .output_cap
                .map_or(cfg.default_output_cap, |c| usize::try_from(c).unwrap_or(usize::MAX))
                .min(cfg.max_output_cap),
            Method::Read { handle } => self.jobs().map.get(handle).map_or(0, |j| j.output_cap),
            _ => 0,
        };
        // A run that may ask for a grant answers with two results (the retry's, and
        // the first run's under `escalation.first_run`).
        let asking =
            matches!(method, Method::Run(_)) && (self.approvals.program.is_some() || self.client_approves().is_some());
        cap.saturating_mul(if asking { 4 } else { 2 })
    }

    /// Record spill files named in a response the client received.
    pub fn mark_delivered(&self, paths: &[PathBuf]) {
        if !paths.is_empty() {
            self.delivered.lock().unwrap_or_else(|p| p.into_inner()).extend(paths.iter().cloned());
        }
    }

    /// Remove the spill files of finished background processes whose paths no
    /// delivered response named (call when the connection is over: nobody else can
    /// receive them).
    pub async fn discard_undelivered_spills(&self) {
        let handles: Vec<Handle> = self.jobs().map.values().map(|j| j.handle.clone()).collect();
        let delivered = self.delivered.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for h in handles {
            if h.status() != Status::Exited {
                continue;
            }
            let r = h.done().await;
            for p in [r.stdout.spill_path, r.stderr.spill_path].into_iter().flatten() {
                if !delivered.contains(&p) {
                    let _ = std::fs::remove_file(p);
                }
            }
        }
    }

    /// The ceiling.
    pub fn ceiling(&self) -> &Ceiling {
        &self.ceiling
    }

    /// The executor's configuration.
    pub fn config(&self) -> &ExecutorConfig {
        self.exec.config()
    }

    fn jobs(&self) -> std::sync::MutexGuard<'_, Jobs> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn closed_error() -> RpcError {
        RpcError::new(codes::SHUTTING_DOWN, "SHUTTING_DOWN", "the server is shutting down; nothing new starts")
    }

    /// Answer one parsed request.
    pub async fn dispatch(&self, method: Method) -> Result<Value, RpcError> {
        match method {
            Method::Hello(p) => self.hello(&p),
            Method::Run(p) => self.run(p).await.map(|r| to_value(&r)),
            Method::Start(p) => self.start(p).await.map(|s| to_value(&s)),
            Method::Read { handle } => self.read(handle).await.map(|r| to_value(&r)),
            Method::Kill { handle } => self.kill(handle).await.map(|r| to_value(&r)),
            Method::Probe => Ok(self.probe()),
        }
    }

    /// The versioned handshake.
    pub fn hello(&self, p: &HelloParams) -> Result<Value, RpcError> {
        if let Some(versions) = &p.protocol_versions {
            if !versions.contains(&PROTOCOL_VERSION) {
                return Err(RpcError::new(
                    codes::UNSUPPORTED_VERSION,
                    "UNSUPPORTED_VERSION",
                    format!("this server speaks protocol version {PROTOCOL_VERSION} only"),
                )
                .with("supported", json!([PROTOCOL_VERSION])));
            }
        }
        if p.capabilities.iter().flatten().any(|c| c == "approve") {
            let name = p.client.clone().unwrap_or_else(|| "an unnamed client".into());
            *self.client_approves.lock().unwrap_or_else(|p| p.into_inner()) = Some(name);
        }
        let cfg = self.exec.config();
        Ok(json!({
            "protocol": "cordon",
            "protocol_version": PROTOCOL_VERSION,
            "cordon_version": env!("CARGO_PKG_VERSION"),
            "capabilities": CAPABILITIES,
            "ceiling": self.ceiling.to_json(),
            "limits": {
                "max_line_bytes": MAX_LINE_BYTES,
                "max_in_flight": MAX_IN_FLIGHT,
                "max_running_background": MAX_RUNNING_JOBS,
                "max_kept_handles": MAX_KEPT_JOBS,
                "max_background_tails": MAX_BACKGROUND_TAILS,
                "default_timeout_ms": cfg.default_timeout.as_millis() as u64,
                "max_timeout_ms": crate::request::cap_millis(cfg.max_timeout),
                "default_output_cap": cfg.default_output_cap,
                "max_output_cap": cfg.max_output_cap,
                "default_spill_cap": cfg.default_spill_cap,
                "max_spill_cap": cfg.max_spill_cap,
                "max_pending_output": super::MAX_PENDING_OUTPUT,
            },
        }))
    }

    /// Clamp, resolve, check: the ceiling's protected paths are searched once (by the
    /// clamp) and the request's policy is resolved once (by the executor).
    fn spec(&self, p: RunParams) -> Result<crate::request::Spec, RpcError> {
        let clamped = self.ceiling.clamp(p)?;
        let spec = self.exec.resolve(clamped.request).map_err(|e| RpcError::cordon(&e))?;
        self.ceiling.check_spec(&spec, &clamped.protected)?;
        Ok(spec)
    }

    /// Run in the foreground. The run is aborted if the connection shuts down.
    pub async fn run(&self, p: RunParams) -> Result<RunResult, RpcError> {
        let spec = self.spec(p)?;
        let mut rx = self.shutdown.subscribe();
        if *rx.borrow_and_update() {
            return Err(Self::closed_error());
        }
        let abort = async move {
            let _ = rx.wait_for(|down| *down).await;
        };
        self.exec.run_until(spec, abort).await.map_err(|e| RpcError::cordon(&e))
    }

    /// Run in the foreground; when the sandbox denied something that one narrow grant
    /// (a protected path, the network, one host) would let through and the run failed,
    /// ask `client` (the connection's own client, when it can ask its user) or else the
    /// `--approver` program for exactly that grant, for one retry of this exact call.
    /// Never a wider mode; every decision goes to the audit log first (fail closed: no
    /// audit log, nobody is asked). The retry is the user's decision beyond the
    /// ceiling's protected paths or network, for this one call.
    pub async fn run_approved(&self, p: RunParams, client: Option<&dyn Approver>) -> Result<Approved, RpcError> {
        let command = p.command.as_ref().map(CommandView::from);
        let clamped = self.ceiling.clamp(p)?;
        let policy_req = clamped.request.policy.clone();
        let spec = self.exec.resolve(clamped.request).map_err(|e| RpcError::cordon(&e))?;
        self.ceiling.check_spec(&spec, &clamped.protected)?;
        let mut rx = self.shutdown.subscribe();
        if *rx.borrow_and_update() {
            return Err(Self::closed_error());
        }
        let abort = async move {
            let _ = rx.wait_for(|down| *down).await;
        };
        let approver: Option<&dyn Approver> = client.or(self.approvals.program.as_ref().map(|p| p as &dyn Approver));
        let (Some(approver), Some(audit), Some(command)) = (approver, &self.approvals.audit, command) else {
            let why = if self.approvals.audit.is_none() {
                "there is no audit log to record a decision in (set HOME or start the server with --audit-log FILE)"
            } else {
                "the client cannot ask its user and the server has no --approver"
            };
            let policy = spec.policy.clone();
            let first = self.exec.run_until(spec, abort).await.map_err(|e| RpcError::cordon(&e))?;
            let could_help =
                first.sandbox.denied && !first.succeeded() && !first.aborted && !first.sandbox.runner_failed;
            let unasked = could_help.then(|| escalation::grant_for(&first.sandbox.denials, &policy)).flatten();
            return Ok(Approved {
                outcome: EscalatedOutcome { first: Some(first), escalation: None, not_offered: None, retry: None },
                unasked: unasked.map(|g| (g, why.to_string())),
            });
        };
        let mut opts = EscalationOptions { narrow_only: true, hold_writes: true, ..Default::default() };
        // Checked against this call's policy and its retry's (a `.git` grant must not
        // make the log writable).
        opts.governing.add(GoverningKind::AuditLog, audit.path());
        let outcome = escalation::run_resolved_with_escalation(
            &self.exec,
            spec,
            &policy_req,
            command,
            approver,
            &opts,
            Some(audit),
            abort,
        )
        .await
        .map_err(|e| match e {
            EscalationError::Cordon(e) => RpcError::cordon(&e),
            other => RpcError::new(codes::CORDON_ERROR, other.code(), other.to_string()),
        })?;
        Ok(Approved { outcome, unasked: None })
    }

    /// Start in the background.
    pub async fn start(&self, p: RunParams) -> Result<Started, RpcError> {
        let spec = self.spec(p)?;
        let mode = spec.policy.mode;
        let output_cap = spec.output_cap;
        {
            let mut jobs = self.jobs();
            if jobs.closed {
                return Err(Self::closed_error());
            }
            let running = jobs.map.values().filter(|j| j.handle.status() == Status::Running).count() + jobs.starting;
            if running >= MAX_RUNNING_JOBS {
                return Err(RpcError::new(
                    codes::TOO_MANY_PROCESSES,
                    "TOO_MANY_PROCESSES",
                    format!(
                        "{running} background processes are running (limit {MAX_RUNNING_JOBS}); kill or wait for one"
                    ),
                ));
            }
            let tails = output_cap.saturating_mul(2);
            // Finished handles can be forgotten to make room; running ones cannot.
            let held: usize = jobs
                .map
                .values()
                .filter(|j| j.handle.status() == Status::Running)
                .map(|j| j.output_cap.saturating_mul(2))
                .sum::<usize>()
                + jobs.starting_tails;
            if held.saturating_add(tails) > MAX_BACKGROUND_TAILS {
                return Err(RpcError::new(
                    codes::TOO_MANY_PROCESSES,
                    "TOO_MANY_PROCESSES",
                    format!(
                        "running background processes hold {held} bytes of output tails and this one needs {tails} \
                         (limit {MAX_BACKGROUND_TAILS} per connection); kill or wait for one, or ask for a smaller \
                         output_cap"
                    ),
                ));
            }
            forget_oldest_finished(&mut jobs, tails);
            jobs.starting += 1;
            jobs.starting_tails += tails;
        }
        let started = self.exec.start(spec).await.map_err(|e| RpcError::cordon(&e));
        let handle = match started {
            Ok(h) => h,
            Err(e) => {
                let mut jobs = self.jobs();
                jobs.starting -= 1;
                jobs.starting_tails -= output_cap.saturating_mul(2);
                return Err(e);
            }
        };
        let pid = handle.pid();
        let id = {
            let mut jobs = self.jobs();
            jobs.starting -= 1;
            jobs.starting_tails -= output_cap.saturating_mul(2);
            if jobs.closed {
                None
            } else {
                jobs.next += 1;
                let id = jobs.next;
                jobs.map.insert(id, Job { handle: handle.clone(), mode, output_cap });
                forget_oldest_finished(&mut jobs, 0);
                Some(id)
            }
        };
        match id {
            Some(handle) => Ok(Started { handle, pid, mode }),
            None => {
                // Shutdown began while it was starting: it must not outlive the connection.
                handle.kill();
                let _ = tokio::time::timeout(REAP_WAIT, handle.done()).await;
                Err(Self::closed_error())
            }
        }
    }

    fn job(&self, id: u64) -> Result<(Handle, Mode), RpcError> {
        self.jobs().map.get(&id).map(|j| (j.handle.clone(), j.mode)).ok_or_else(|| {
            RpcError::new(codes::UNKNOWN_HANDLE, "UNKNOWN_HANDLE", format!("no background process has handle {id}"))
                .with("handle", id)
        })
    }

    /// The mode a background process runs under.
    pub fn job_mode(&self, id: u64) -> Result<Mode, RpcError> {
        self.job(id).map(|(_, m)| m)
    }

    /// New output and the status of a background process.
    pub async fn read(&self, id: u64) -> Result<ReadReply, RpcError> {
        let (handle, _) = self.job(id)?;
        // Status first: once exited, every byte is already captured, so this read
        // holds the rest of the output.
        let exited = handle.status() == Status::Exited;
        let out = handle.read_output();
        let result = if exited { Some(handle.done().await) } else { None };
        Ok(ReadReply {
            handle: id,
            status: if exited { Status::Exited } else { Status::Running },
            stdout: out.stdout,
            stderr: out.stderr,
            lossy: out.lossy,
            stdout_spill: out.stdout_spill,
            stderr_spill: out.stderr_spill,
            exit_code: result.as_ref().and_then(|r| r.exit_code),
            signal: result.as_ref().and_then(|r| r.signal),
            result,
        })
    }

    /// Stop a background process and wait (bounded) until it is reaped. Idempotent.
    pub async fn kill(&self, id: u64) -> Result<KillReply, RpcError> {
        let (handle, _) = self.job(id)?;
        let was_running = handle.kill();
        let _ = tokio::time::timeout(REAP_WAIT, handle.done()).await;
        Ok(KillReply {
            handle: id,
            was_running,
            status: handle.status(),
            exit_code: handle.exit_code(),
            signal: handle.signal(),
        })
    }

    /// What this host can enforce for each mode at or below the ceiling.
    pub fn probe(&self) -> Value {
        let host = self.exec.host();
        let runners: Vec<Value> =
            [RunnerKind::Landlock, RunnerKind::Bwrap, RunnerKind::Seatbelt, RunnerKind::Passthrough]
                .into_iter()
                .map(|kind| json!({ "runner": kind, "probe": probe_runner(kind, host) }))
                .collect();
        let modes: Vec<Value> =
            Mode::ALL.into_iter().filter(|m| *m <= self.ceiling.mode).map(|m| self.probe_mode(m, host)).collect();
        json!({
            "host": host,
            "ceiling": self.ceiling.to_json(),
            "runners": runners,
            "modes": modes,
            "limits": crate::limits::probe_host(host.euid),
        })
    }

    fn probe_mode(&self, mode: Mode, host: &HostFacts) -> Value {
        let req = PolicyRequest {
            mode,
            writable_roots: self.ceiling.writable_roots.clone(),
            network: self.ceiling.network,
            best_effort: self.ceiling.best_effort,
            accept_gaps: self.ceiling.accept_gaps.clone(),
            allow_system_root: self.ceiling.allow_system_root,
            ..PolicyRequest::default()
        };
        let selected = resolve_policy(&req, &self.ceiling.workspace)
            .map_err(CordonError::from)
            .and_then(|policy| runner::select(&policy, host, RunnerChoice::Auto));
        match selected {
            Ok(sel) => json!({ "mode": mode, "runner": sel.runner, "enforcement": sel.enforcement }),
            Err(e) => json!({ "mode": mode, "error": RpcError::cordon(&e).to_json() }),
        }
    }

    /// Stop everything: abort foreground runs, kill every background process and wait
    /// (bounded) until each is reaped. Nothing new starts afterwards. Whatever is still
    /// alive when the connection is dropped is SIGKILLed and reaped by the executor.
    pub async fn shutdown(&self) {
        let _ = self.shutdown.send(true);
        self.close_background().await;
    }

    /// Stop every background process and wait (bounded) until each is reaped; no new
    /// one starts afterwards. Foreground runs in flight go on (end of input: they
    /// finish and are answered).
    pub async fn close_background(&self) {
        let handles: Vec<Handle> = {
            let mut jobs = self.jobs();
            jobs.closed = true;
            jobs.map.values().map(|j| j.handle.clone()).collect()
        };
        for h in &handles {
            h.kill();
        }
        let _ = tokio::time::timeout(REAP_WAIT, async {
            for h in &handles {
                h.done().await;
            }
        })
        .await;
    }
}

/// Output tail bytes the remembered handles hold (both streams each).
fn kept_tails(jobs: &Jobs) -> usize {
    jobs.map.values().map(|j| j.output_cap.saturating_mul(2)).sum()
}

/// Forget the oldest finished handles while more than [`MAX_KEPT_JOBS`] are kept or
/// their tails and `more` (plus starts in progress) exceed [`MAX_BACKGROUND_TAILS`].
fn forget_oldest_finished(jobs: &mut Jobs, more: usize) {
    while jobs.map.len() > MAX_KEPT_JOBS || kept_tails(jobs) + jobs.starting_tails + more > MAX_BACKGROUND_TAILS {
        let oldest = jobs.map.iter().find(|(_, j)| j.handle.status() == Status::Exited).map(|(id, _)| *id);
        match oldest {
            Some(id) => {
                jobs.map.remove(&id);
            }
            None => break,
        }
    }
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or_else(|e| json!({ "serialization_error": e.to_string() }))
}
