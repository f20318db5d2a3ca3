//! The **ceiling**: the widest policy a `cordon serve` or `cordon mcp` connection may
//! use, and the "never wider" check that every request passes through.
//!
//! 1. [`Ceiling::from_args`] resolves the server flags once (canonical paths, the same
//!    refusals as `cordon run`).
//! 2. [`Ceiling::clamp`] turns [`RunParams`] into a [`Request`]: missing fields default
//!    to the ceiling, explicit fields may only narrow it; a widening field is refused
//!    with [`CeilingError::Exceeded`] naming that field. It canonicalizes paths (I/O)
//!    and searches the ceiling's roots for protected paths once.
//! 3. After [`crate::Executor::resolve`], [`Ceiling::check_spec`] verifies the resolved
//!    spec once more (mode, workspace, every writable path, protected paths, network):
//!    a path swapped for a symlink between the clamp and the resolve cannot widen a run.
//!
//! What it does not do: it does not parse the wire (see [`crate::serve::protocol`]),
//! does not run anything (see [`crate::serve`]) and does not format its errors for a
//! protocol (`serve::protocol::RpcError` converts a [`CeilingError`]).

use crate::error::CordonError;
use crate::flags::PolicyArgs;
use crate::mode::Mode;
use crate::policy::{resolve_policy, PolicyRequest};
use crate::request::{Command, Request, Spec, Stdin};
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a client asks for in one run (`run`/`start` of `cordon serve`, the `bash`
/// tools of `cordon mcp`): every field may only narrow the ceiling.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunParams {
    /// The command: a shell string or an argv.
    pub command: Option<Command>,
    /// Working directory (relative paths are taken from the ceiling's workspace).
    pub workdir: Option<PathBuf>,
    /// Deadline in milliseconds.
    pub timeout_ms: Option<u64>,
    /// In-memory tail per stream, in bytes.
    pub output_cap: Option<u64>,
    /// Spill-file bytes per stream (capped by the executor's maximum).
    pub spill_cap: Option<u64>,
    /// Bytes for the command's stdin.
    pub stdin: Option<String>,
    /// Extra environment variables, in the order given.
    pub env: Vec<(String, String)>,
    /// A mode at or below the ceiling's.
    pub mode: Option<Mode>,
    /// Writable roots within the ceiling's writable set.
    pub writable_roots: Option<Vec<PathBuf>>,
    /// Network, only if the ceiling allows it.
    pub network: Option<bool>,
    /// Hosts reachable by name through cordon's proxy, each within the ceiling's
    /// `--allow-host` patterns (default: the ceiling's).
    pub allow_hosts: Option<Vec<crate::policy::hosts::HostPattern>>,
    /// Resource limits, each at or below the ceiling's (`limit_memory` bytes,
    /// `limit_pids`, `limit_cpu` seconds).
    pub limits: crate::limits::LimitRequest,
    /// Observe write-intent syscalls for denial evidence (default on; off changes the
    /// report, never the enforcement, so it is not bounded by the ceiling).
    pub observe_writes: Option<bool>,
}

/// Why a request does not fit under the ceiling.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CeilingError {
    /// A field would widen the ceiling (`CEILING_EXCEEDED`).
    #[error("`{field}` would widen the server's ceiling: {why}")]
    Exceeded {
        /// The request field, e.g. `mode` or `writable_roots`.
        field: &'static str,
        /// What was asked and what the ceiling allows.
        why: String,
        /// Extra machine-readable facts (`requested`, `ceiling`, `path`).
        data: Vec<(&'static str, String)>,
    },
    /// The request names no command (`INVALID_PARAMS` for the field `command`).
    #[error("invalid params: `command`: missing")]
    MissingCommand,
    /// cordon refused the request before anything ran (a missing working directory,
    /// an invalid policy).
    #[error(transparent)]
    Cordon(#[from] CordonError),
}

impl CeilingError {
    fn exceeded(field: &'static str, why: impl std::fmt::Display) -> CeilingError {
        CeilingError::Exceeded { field, why: why.to_string(), data: Vec::new() }
    }

    /// Add one fact to an [`CeilingError::Exceeded`] (other variants are unchanged).
    fn with(mut self, key: &'static str, value: impl Into<String>) -> CeilingError {
        if let CeilingError::Exceeded { data, .. } = &mut self {
            data.push((key, value.into()));
        }
        self
    }

    /// The request field the error names, if any.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            CeilingError::Exceeded { field, .. } => Some(field),
            CeilingError::MissingCommand => Some("command"),
            CeilingError::Cordon(_) => None,
        }
    }

    /// The stable error code: `CEILING_EXCEEDED`, `INVALID_PARAMS` or the cordon
    /// error's code.
    pub fn code(&self) -> &'static str {
        match self {
            CeilingError::Exceeded { .. } => "CEILING_EXCEEDED",
            CeilingError::MissingCommand => "INVALID_PARAMS",
            CeilingError::Cordon(e) => e.code(),
        }
    }
}

/// A request clamped to the ceiling, with the ceiling's protected paths as the clamp
/// found them (passed on to [`Ceiling::check_spec`]).
#[derive(Debug)]
pub struct Clamped {
    /// The request, never wider than the ceiling.
    pub request: Request,
    /// The ceiling's protected paths (empty unless the request writes in
    /// `workspace-write`).
    pub protected: Vec<PathBuf>,
}

/// The server flags that bound every request: the shared policy flags
/// ([`PolicyArgs`], with `--mode` defaulting to `workspace-write`) worded for a
/// ceiling, and the limit flags.
#[derive(clap::Args, Debug, Clone, Default)]
#[command(
    mut_arg("mode", |a| a
        .help("The widest mode a request may use: read-only, workspace-write or full-access")
        .default_value("workspace-write")),
    mut_arg("cwd", |a| a.help(
        "The workspace: every request's working directory lies inside it (default: the current directory)")),
    mut_arg("writable", |a| a.help("An extra writable root requests may use (absolute path; repeatable)")),
    mut_arg("allow_system_root", |a| a.help(
        "Allow a writable root (or workspace) that is, lies inside or contains a system directory such as /etc, \
         /usr or /var/lib; requests inherit it and cannot set it")),
    mut_arg("network", |a| a.help("Allow requests to turn the network on in confined modes")),
    mut_arg("allow_unix_socket", |a| a.help(
        "A host unix socket every request may connect to by path (absolute; repeatable; requests inherit the \
         list and cannot set it)")),
    mut_arg("allow_host", |a| a.help(
        "A host requests may reach by name through cordon's proxy (repeatable; `pypi.org`, `*.example.org`, \
         optional `:port`); every request gets these unless it names fewer (`allow_hosts`)")),
    mut_arg("allow_hosts", |a| a.help(
        "A named list of hosts requests may reach (repeatable; python, node, rust, go, github; see --allow-host)")),
    mut_arg("best_effort", |a| a.help(
        "Run even where the host cannot enforce every restriction (gaps are reported)")),
    mut_arg("accept_gaps", |a| a.help(
        "Run requests when the only restrictions the host cannot enforce are these: `container` (the container \
         profile, docs/containers.md) or restriction names; requests inherit it and cannot set it")),
)]
pub struct CeilingArgs {
    /// The policy flags (`--mode` missing: `workspace-write`, as on the command line).
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Ceiling limits: each request's default, and the most it may ask for.
    #[command(flatten)]
    pub limits: crate::limits::LimitArgs,
    /// The longest deadline a request may ask for, in seconds, or `none` for no cap
    /// (default 600; a request's default stays 120). For long builds, test suites and
    /// dev servers started in the background.
    #[arg(long, value_name = "SECONDS|none", value_parser = crate::request::parse_timeout_cap)]
    pub max_timeout: Option<std::time::Duration>,
    /// Who is asked for a denied call's narrow grant, and where decisions are logged
    /// (not part of the ceiling: a grant is one call's, approved by a person or policy).
    #[command(flatten)]
    pub approval: crate::flags::ApprovalArgs,
    /// Keep the private caches of every workspace-write request's run in DIR across
    /// runs, as `cordon run --cache-dir` does (requests cannot name another): DIR/caches
    /// becomes writable, DIR/layers keeps what runs add to the private layers over
    /// ~/.cache and the toolchain homes.
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// The widest policy a connection may use. Built once from the server flags, with
/// every path canonical.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ceiling {
    /// The widest mode.
    pub mode: Mode,
    /// The canonical workspace: working directories must lie inside it.
    pub workspace: PathBuf,
    /// Canonical extra writable roots (empty in `read-only`).
    pub writable_roots: Vec<PathBuf>,
    /// Requests may turn the network on in confined modes.
    pub network: bool,
    /// Runs may proceed with enforcement gaps (never settable by a request).
    pub best_effort: bool,
    /// Runs may proceed when their only gaps are these (`--accept-gaps`; inherited by
    /// every request, never settable by one). Shown in `hello` only when set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub accept_gaps: Vec<crate::vocab::Restriction>,
    /// Writable roots may be system directories (`--allow-system-root`; never settable
    /// by a request, which inherits it).
    pub allow_system_root: bool,
    /// Canonical host unix sockets requests may connect to (inherited, not settable).
    pub allow_unix_sockets: Vec<PathBuf>,
    /// Hosts requests may reach by name through cordon's proxy (`--allow-host`; the
    /// default of every request, which may name fewer). Shown in `hello` only when set,
    /// so a server without it answers as before.
    #[serde(skip_serializing_if = "crate::policy::hosts::AllowList::is_empty")]
    pub allow_hosts: crate::policy::hosts::AllowList,
    /// Limits every request gets by default and may only lower.
    pub limits: crate::limits::LimitRequest,
    /// The cache directory of every workspace-write request (`--cache-dir`; canonical,
    /// checked again for each request as `cordon run` checks its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_dir: Option<PathBuf>,
}

impl CeilingArgs {
    /// The executor's configuration for a connection: the defaults, with the server's
    /// `--max-timeout`.
    pub fn executor_config(&self) -> crate::request::ExecutorConfig {
        let mut config = crate::request::ExecutorConfig::default();
        if let Some(cap) = self.max_timeout {
            config.max_timeout = cap;
        }
        config
    }
}

impl Ceiling {
    /// Resolve the server flags (canonical paths; the same refusals as `cordon run`).
    pub fn from_args(args: &CeilingArgs) -> Result<Ceiling, CordonError> {
        let cwd = match &args.policy.cwd {
            Some(c) => c.clone(),
            None => std::env::current_dir().map_err(|source| CordonError::Workdir { path: ".".into(), source })?,
        };
        let policy = resolve_policy(&args.policy.request(), &cwd)?;
        Ok(Ceiling {
            mode: policy.mode,
            workspace: policy.workspace,
            writable_roots: policy.writable_roots,
            network: policy.network,
            best_effort: policy.best_effort,
            accept_gaps: policy.accept_gaps,
            allow_system_root: args.policy.allow_system_root,
            allow_unix_sockets: policy.allow_unix_sockets,
            allow_hosts: policy.allow_hosts,
            limits: args.limits.request(),
            cache_dir: match &args.cache_dir {
                Some(d) => Some(
                    d.canonicalize()
                        .map_err(|e| crate::error::PolicyError::CacheDir { path: d.clone(), why: e.to_string() })?,
                ),
                None => None,
            },
        })
    }

    /// A request's limits: each missing one takes the ceiling's, each given one may
    /// only be at or below the ceiling's (`CEILING_EXCEEDED` otherwise).
    fn clamp_limits(&self, asked: crate::limits::LimitRequest) -> Result<crate::limits::LimitRequest, CeilingError> {
        let pick = |field: &'static str, asked: Option<u64>, ceiling: Option<u64>| match (asked, ceiling) {
            (Some(a), Some(c)) if a > c => {
                Err(CeilingError::exceeded(field, format!("asked for {a}, the ceiling is {c}"))
                    .with("requested", a.to_string())
                    .with("ceiling", c.to_string()))
            }
            (a, c) => Ok(a.or(c)),
        };
        Ok(crate::limits::LimitRequest {
            memory: pick("limit_memory", asked.memory, self.limits.memory)?,
            pids: pick("limit_pids", asked.pids, self.limits.pids)?,
            cpu: pick("limit_cpu", asked.cpu, self.limits.cpu)?,
        })
    }

    /// Whether a request may turn the network on.
    pub fn allows_network(&self) -> bool {
        self.network || self.mode == Mode::FullAccess
    }

    /// The directories a request may make writable (workspace first); `None` means
    /// anywhere (`full-access`).
    pub fn writable_set(&self) -> Option<Vec<PathBuf>> {
        match self.mode {
            Mode::FullAccess => None,
            Mode::ReadOnly => Some(Vec::new()),
            Mode::WorkspaceWrite => {
                Some(std::iter::once(self.workspace.clone()).chain(self.writable_roots.iter().cloned()).collect())
            }
        }
    }

    fn allows_write_under(&self, path: &Path) -> bool {
        match self.writable_set() {
            None => true,
            Some(set) => set.iter().any(|w| path.starts_with(w)),
        }
    }

    /// The ceiling's protected paths as they are now (`.git` may appear after start).
    fn protected_now(&self) -> Result<Vec<PathBuf>, CeilingError> {
        if self.mode != Mode::WorkspaceWrite {
            return Ok(Vec::new());
        }
        let req = PolicyRequest {
            mode: self.mode,
            writable_roots: self.writable_roots.clone(),
            network: self.network,
            best_effort: self.best_effort,
            allow_system_root: self.allow_system_root,
            ..PolicyRequest::default()
        };
        resolve_policy(&req, &self.workspace)
            .map(|p| p.protected)
            .map_err(|e| CeilingError::Cordon(CordonError::InvalidPolicy(e)))
    }

    /// Turn request params into a [`Request`] (in [`Clamped`]): missing fields take the ceiling's
    /// value, explicit fields may only narrow it. A widening field is refused with
    /// `CEILING_EXCEEDED` naming the field. Relative paths are taken from the ceiling's
    /// workspace; all paths are canonicalized (symlinks resolved) before comparison.
    pub fn clamp(&self, params: RunParams) -> Result<Clamped, CeilingError> {
        let Some(command) = params.command else {
            return Err(CeilingError::MissingCommand);
        };
        let mode = params.mode.unwrap_or(self.mode);
        if mode > self.mode {
            return Err(CeilingError::exceeded("mode", format!("asked for {mode}, the ceiling is {}", self.mode))
                .with("requested", mode.as_str())
                .with("ceiling", self.mode.as_str()));
        }
        let workdir = match &params.workdir {
            None => self.workspace.clone(),
            Some(w) => {
                let joined = self.workspace.join(w);
                let canon = joined
                    .canonicalize()
                    .map_err(|source| CeilingError::Cordon(CordonError::Workdir { path: joined.clone(), source }))?;
                if !canon.starts_with(&self.workspace) {
                    return Err(CeilingError::exceeded(
                        "workdir",
                        format!("`{}` is outside the workspace `{}`", canon.display(), self.workspace.display()),
                    )
                    .with("ceiling", self.workspace.display().to_string()));
                }
                canon
            }
        };
        let writes = mode == Mode::WorkspaceWrite;
        let protected = if writes { self.protected_now()? } else { Vec::new() };
        if let Some(p) = protected.iter().find(|p| workdir.starts_with(p)) {
            return Err(CeilingError::exceeded(
                "workdir",
                format!("`{}` lies inside protected path `{}`, which stays read-only", workdir.display(), p.display()),
            ));
        }
        let network = params.network.unwrap_or(self.network);
        if network && !self.allows_network() {
            return Err(CeilingError::exceeded("network", "the server was started without --network"));
        }
        let allow_hosts = match params.allow_hosts {
            None => self.allow_hosts.patterns().to_vec(),
            Some(asked) => {
                let list = crate::policy::hosts::AllowList::new(asked.clone());
                if let Some(p) = asked
                    .iter()
                    .find(|p| !crate::policy::hosts::AllowList::new(vec![(*p).clone()]).within(&self.allow_hosts))
                {
                    return Err(CeilingError::exceeded(
                        "allow_hosts",
                        format!("`{p}` is not within the server's --allow-host patterns"),
                    ));
                }
                list.patterns().to_vec()
            }
        };
        let writable_roots = match params.writable_roots {
            // By default the whole writable set of the ceiling stays writable, also
            // when the working directory is a subdirectory of the workspace.
            None if writes => self.writable_set().unwrap_or_else(|| self.writable_roots.clone()),
            None => Vec::new(),
            Some(roots) => {
                let mut out = Vec::new();
                for root in roots {
                    let joined = self.workspace.join(&root);
                    let canon = joined.canonicalize().map_err(|source| {
                        CeilingError::Cordon(CordonError::InvalidPolicy(crate::error::PolicyError::Root {
                            path: joined.clone(),
                            source,
                        }))
                    })?;
                    if !self.allows_write_under(&canon) {
                        return Err(CeilingError::exceeded(
                            "writable_roots",
                            format!("`{}` is not inside the ceiling's writable set", canon.display()),
                        )
                        .with("path", canon.display().to_string()));
                    }
                    if let Some(p) = protected.iter().find(|p| canon.starts_with(p)) {
                        return Err(CeilingError::exceeded(
                            "writable_roots",
                            format!("`{}` lies inside protected path `{}`", canon.display(), p.display()),
                        ));
                    }
                    crate::policy::real_writable_path(&joined, &canon, &self.writable_set().unwrap_or_default())
                        .map_err(|e| CeilingError::Cordon(CordonError::InvalidPolicy(e)))?;
                    out.push(canon);
                }
                out
            }
        };
        // The workspace (the working directory) itself is not repeated as a root.
        let writable_roots: Vec<PathBuf> = writable_roots.into_iter().filter(|r| *r != workdir).collect();
        let mut req = Request::new(command);
        req.observe_writes = params.observe_writes.unwrap_or(true);
        req.workdir = Some(workdir);
        req.timeout = params.timeout_ms.map(Duration::from_millis);
        req.output_cap = params.output_cap.map(|c| usize::try_from(c).unwrap_or(usize::MAX));
        req.spill_cap = params.spill_cap;
        req.stdin = match params.stdin {
            Some(s) => Stdin::Bytes(s.into_bytes()),
            None => Stdin::Null,
        };
        req.env = params.env;
        req.policy = PolicyRequest {
            mode,
            writable_roots,
            network,
            best_effort: self.best_effort,
            accept_gaps: self.accept_gaps.clone(),
            allow_system_root: self.allow_system_root,
            allow_unix_sockets: self.allow_unix_sockets.clone(),
            allow_hosts,
            ..PolicyRequest::default()
        };
        req.limits = self.clamp_limits(params.limits)?;
        if writes {
            req.cache_dir = self.cache_dir.clone();
        }
        Ok(Clamped { request: req, protected })
    }

    /// Verify a resolved spec against the ceiling: the final word on "never wider".
    /// Catches anything that changed between [`Ceiling::clamp`] and the resolve (a
    /// directory swapped for a symlink by a concurrent command).
    ///
    /// `protected` is [`Clamped::protected`]: the ceiling's protected paths as the
    /// clamp found them, so one request searches the ceiling's roots only once (the
    /// resolve searches the request's own roots, and its finds must cover these).
    pub fn check_spec(&self, spec: &Spec, protected: &[PathBuf]) -> Result<(), CeilingError> {
        let p = &spec.policy;
        if p.mode > self.mode {
            return Err(CeilingError::exceeded(
                "mode",
                format!("resolved to {}, the ceiling is {}", p.mode, self.mode),
            ));
        }
        for (field, path) in [("workdir", &spec.workdir), ("workdir", &p.workspace)] {
            if !path.starts_with(&self.workspace) {
                return Err(CeilingError::exceeded(
                    field,
                    format!("`{}` resolved outside the workspace", path.display()),
                ));
            }
        }
        if p.network && !self.allows_network() {
            return Err(CeilingError::exceeded("network", "resolved with the network on"));
        }
        if p.best_effort && !self.best_effort {
            return Err(CeilingError::exceeded("best_effort", "resolved as best effort"));
        }
        if let Some(g) = p.accept_gaps.iter().find(|g| !self.accept_gaps.contains(g)) {
            return Err(CeilingError::exceeded("accept_gaps", format!("resolved accepting the {g} gap")));
        }
        if !p.allow_hosts.within(&self.allow_hosts) {
            return Err(CeilingError::exceeded("allow_hosts", "resolved with hosts the server does not allow"));
        }
        if let Some(s) = p.allow_unix_sockets.iter().find(|s| !self.allow_unix_sockets.contains(s)) {
            return Err(CeilingError::exceeded(
                "allow_unix_sockets",
                format!("`{}` is not allowed by the server", s.display()),
            ));
        }
        // The server's own cache directory, and only its writable part.
        if spec.cache_dir.is_some() && spec.cache_dir != self.cache_dir {
            return Err(CeilingError::exceeded("cache_dir", "resolved with another cache directory"));
        }
        let caches = spec.cache_dir.as_ref().map(|d| d.join(crate::request::CACHE_DIR_CACHES));
        if p.mode == Mode::WorkspaceWrite {
            for w in p.writable() {
                if !self.allows_write_under(&w) && caches.as_ref() != Some(&w) {
                    return Err(CeilingError::exceeded(
                        "writable_roots",
                        format!("`{}` resolved outside the ceiling", w.display()),
                    ));
                }
                if let Some(pp) = protected.iter().find(|pp| w.starts_with(pp)) {
                    return Err(CeilingError::exceeded(
                        "writable_roots",
                        format!("`{}` lies inside protected path `{}`", w.display(), pp.display()),
                    ));
                }
            }
            for pp in protected {
                let exposed = p.writable().iter().any(|w| pp.starts_with(w));
                if exposed && !p.protected.contains(pp) {
                    return Err(CeilingError::exceeded(
                        "workdir",
                        format!("protected path `{}` would not stay read-only", pp.display()),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The ceiling as JSON (for `hello` and tool descriptions).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ceiling(dir: &Path, mode: Mode) -> Ceiling {
        let policy = PolicyArgs { mode: Some(mode), cwd: Some(dir.to_path_buf()), ..PolicyArgs::default() };
        Ceiling::from_args(&CeilingArgs { policy, ..CeilingArgs::default() }).unwrap()
    }

    fn params(cmd: &str) -> RunParams {
        RunParams { command: Some(Command::Shell(cmd.into())), ..RunParams::default() }
    }

    #[test]
    fn allow_system_root_is_a_ceiling_flag_requests_inherit_and_cannot_set() {
        let dir = tempfile::tempdir().unwrap();
        for allow in [false, true] {
            let policy = PolicyArgs { cwd: Some(dir.path().into()), allow_system_root: allow, ..PolicyArgs::default() };
            let args = CeilingArgs { policy, ..CeilingArgs::default() };
            let c = Ceiling::from_args(&args).unwrap();
            assert_eq!(c.allow_system_root, allow);
            assert_eq!(c.to_json()["allow_system_root"], allow);
            assert_eq!(c.clamp(params("true")).unwrap().request.policy.allow_system_root, allow);
        }
        // A system directory as the ceiling's root is refused without the flag.
        let args = CeilingArgs {
            policy: PolicyArgs { cwd: Some(dir.path().into()), writable: vec!["/etc".into()], ..PolicyArgs::default() },
            ..CeilingArgs::default()
        };
        let err = Ceiling::from_args(&args).unwrap_err();
        assert!(matches!(err, CordonError::InvalidPolicy(crate::error::PolicyError::TooWide { .. })), "{err}");
    }

    #[test]
    fn limits_take_the_ceiling_and_may_only_lower_it() {
        use crate::limits::{LimitArgs, LimitRequest};
        let dir = tempfile::tempdir().unwrap();
        let args = CeilingArgs {
            policy: PolicyArgs { cwd: Some(dir.path().to_path_buf()), ..PolicyArgs::default() },
            limits: LimitArgs { memory: Some(1 << 30), pids: Some(100), cpu: None },
            ..Default::default()
        };
        let c = Ceiling::from_args(&args).unwrap();
        // Missing: the ceiling's (explicit, so a host that cannot enforce it refuses).
        let r = c.clamp(params("true")).unwrap().request;
        assert_eq!(r.limits, LimitRequest { memory: Some(1 << 30), pids: Some(100), cpu: None });
        // Lower: taken; no ceiling (cpu): anything the executor's caps allow.
        let lower = LimitRequest { memory: Some(64 << 20), pids: Some(10), cpu: Some(5) };
        let r = c.clamp(RunParams { limits: lower, ..params("true") }).unwrap().request;
        assert_eq!(r.limits, lower);
        // Higher: CEILING_EXCEEDED naming the field.
        for (asked, field) in [
            (LimitRequest { memory: Some(2 << 30), ..LimitRequest::default() }, "limit_memory"),
            (LimitRequest { pids: Some(101), ..LimitRequest::default() }, "limit_pids"),
        ] {
            let e = c.clamp(RunParams { limits: asked, ..params("x") }).unwrap_err();
            assert_eq!(e.field(), Some(field), "{e:?}");
        }
    }

    #[test]
    fn clamp_defaults_to_the_ceiling_and_refuses_widening() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(dir.path().join("other")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("other"), ws.join("escape")).unwrap();
        let c = ceiling(&ws, Mode::WorkspaceWrite);
        let ws = ws.canonicalize().unwrap();

        let r = c.clamp(params("true")).unwrap().request;
        assert_eq!(r.workdir.as_deref(), Some(ws.as_path()));
        assert_eq!(r.policy.mode, Mode::WorkspaceWrite);
        assert!(!r.policy.network);

        // A subdirectory keeps the whole workspace writable.
        let r = c.clamp(RunParams { workdir: Some("sub".into()), ..params("true") }).unwrap().request;
        assert_eq!(r.workdir, Some(ws.join("sub")));
        assert_eq!(r.policy.writable_roots, vec![ws.clone()]);

        let narrow = c.clamp(RunParams { mode: Some(Mode::ReadOnly), ..params("true") }).unwrap().request;
        assert_eq!(narrow.policy.mode, Mode::ReadOnly);
        assert!(narrow.policy.writable_roots.is_empty());

        let field = |p: RunParams| c.clamp(p).unwrap_err().field().unwrap().to_string();
        assert_eq!(field(RunParams { mode: Some(Mode::FullAccess), ..params("x") }), "mode");
        assert_eq!(field(RunParams { network: Some(true), ..params("x") }), "network");
        let host = |h: &str| Some(vec![h.parse().unwrap()]);
        assert_eq!(field(RunParams { allow_hosts: host("pypi.org"), ..params("x") }), "allow_hosts");
        assert_eq!(field(RunParams { workdir: Some("/".into()), ..params("x") }), "workdir");
        assert_eq!(field(RunParams { workdir: Some("escape".into()), ..params("x") }), "workdir");
        assert_eq!(field(RunParams { workdir: Some("..".into()), ..params("x") }), "workdir");
        assert_eq!(field(RunParams { workdir: Some(".git".into()), ..params("x") }), "workdir");
        assert_eq!(field(RunParams { writable_roots: Some(vec!["/var".into()]), ..params("x") }), "writable_roots");
        assert_eq!(field(RunParams { writable_roots: Some(vec!["escape".into()]), ..params("x") }), "writable_roots");
        assert_eq!(field(RunParams { writable_roots: Some(vec![".git".into()]), ..params("x") }), "writable_roots");
        let e = c.clamp(RunParams { workdir: Some("missing".into()), ..params("x") }).unwrap_err();
        assert_eq!(e.code(), "WORKDIR_UNAVAILABLE");
    }

    #[test]
    fn read_only_ceiling_refuses_every_write_root() {
        let dir = tempfile::tempdir().unwrap();
        let c = ceiling(dir.path(), Mode::ReadOnly);
        let e = c.clamp(RunParams { writable_roots: Some(vec![".".into()]), ..params("x") }).unwrap_err();
        assert_eq!(e.field(), Some("writable_roots"));
        let e = c.clamp(RunParams { mode: Some(Mode::WorkspaceWrite), ..params("x") }).unwrap_err();
        assert_eq!(e.field(), Some("mode"));
    }

    #[test]
    fn check_spec_refuses_a_resolved_widening() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let c = ceiling(&ws, Mode::WorkspaceWrite);
        let exec = crate::Executor::new(crate::ExecutorConfig::default()).unwrap();
        let clamped = c.clamp(params("true")).unwrap();
        let protected = clamped.protected.clone();
        let ok = exec.resolve(clamped.request).unwrap();
        c.check_spec(&ok, &protected).unwrap();
        let mut wide = ok.clone();
        wide.policy.writable_roots.push(dir.path().canonicalize().unwrap());
        assert_eq!(c.check_spec(&wide, &protected).unwrap_err().field().unwrap(), "writable_roots");
        let mut wide = ok.clone();
        wide.policy.mode = Mode::FullAccess;
        assert_eq!(c.check_spec(&wide, &protected).unwrap_err().field().unwrap(), "mode");
        let mut wide = ok.clone();
        wide.policy.network = true;
        assert_eq!(c.check_spec(&wide, &protected).unwrap_err().field().unwrap(), "network");
        let mut wide = ok;
        wide.policy.accept_gaps = vec![crate::Restriction::Ipc];
        assert_eq!(c.check_spec(&wide, &protected).unwrap_err().field().unwrap(), "accept_gaps");
    }

    #[test]
    fn accepted_gaps_are_the_ceilings_and_every_request_inherits_them() {
        let dir = tempfile::tempdir().unwrap();
        let policy = PolicyArgs {
            mode: Some(Mode::WorkspaceWrite),
            cwd: Some(dir.path().to_path_buf()),
            accept_gaps: vec![crate::flags::parse_gap_set("container").unwrap()],
            ..PolicyArgs::default()
        };
        let c = Ceiling::from_args(&CeilingArgs { policy, ..CeilingArgs::default() }).unwrap();
        let mut want = crate::CONTAINER_GAPS.to_vec();
        want.sort();
        assert_eq!(c.accept_gaps, want);
        let clamped = c.clamp(params("true")).unwrap();
        assert_eq!(clamped.request.policy.accept_gaps, want);
        let exec = crate::Executor::new(crate::ExecutorConfig::default()).unwrap();
        let spec = exec.resolve(clamped.request).unwrap();
        c.check_spec(&spec, &clamped.protected).unwrap();
        // Shown in `hello` only when set.
        assert!(c.to_json().to_string().contains("accept_gaps"));
        assert!(!ceiling(dir.path(), Mode::ReadOnly).to_json().to_string().contains("accept_gaps"));
    }

    #[test]
    fn the_cache_dir_is_the_servers_for_every_workspace_write_request() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let cache = dir.path().join("cache");
        for d in [&ws, &cache] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        }
        let policy = PolicyArgs { cwd: Some(ws.clone()), ..PolicyArgs::default() };
        let c = Ceiling::from_args(&CeilingArgs { policy, cache_dir: Some(cache.clone()), ..CeilingArgs::default() })
            .unwrap();
        let cache = cache.canonicalize().unwrap();
        let clamped = c.clamp(params("true")).unwrap();
        assert_eq!(clamped.request.cache_dir.as_deref(), Some(cache.as_path()));
        let ro = c.clamp(RunParams { mode: Some(Mode::ReadOnly), ..params("true") }).unwrap();
        assert_eq!(ro.request.cache_dir, None, "read-only runs have no cache directory");
        // Resolved: its `caches` part is a writable root, which the ceiling accepts;
        // another cache directory it does not.
        let exec = crate::Executor::new(crate::ExecutorConfig::default()).unwrap();
        let protected = clamped.protected.clone();
        let spec = exec.resolve(clamped.request).unwrap();
        assert!(spec.policy.writable_roots.contains(&cache.join(crate::request::CACHE_DIR_CACHES)), "{spec:?}");
        c.check_spec(&spec, &protected).unwrap();
        let mut other = spec;
        other.cache_dir = Some(dir.path().canonicalize().unwrap());
        assert_eq!(c.check_spec(&other, &protected).unwrap_err().field().unwrap(), "cache_dir");
    }
}
