//! Requests and specs: what a caller asks for, and the fully resolved form.
//!
//! [`crate::Executor::resolve`] fills every optional field of a [`Request`] from the
//! [`ExecutorConfig`] and caps it, producing a [`Spec`] in which every value is
//! explicit: a reader of a spec never wonders where a value came from.

use crate::limits::{LimitRequest, Limits};
use crate::policy::{ExecutionPolicy, PolicyRequest};
use crate::vocab::RunnerChoice;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// Default deadline of a command.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest deadline a request may ask for by default (a server raises or lifts it
/// with `--max-timeout`; the `cordon run` command line has no cap:
/// [`NO_TIMEOUT_CAP`]).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// [`ExecutorConfig::max_timeout`] for "no cap": any deadline a request can express.
pub const NO_TIMEOUT_CAP: Duration = Duration::MAX;

/// A timeout cap in milliseconds for a report (`max_timeout_ms`): `None` for
/// [`NO_TIMEOUT_CAP`] (or anything past `u64` milliseconds).
pub fn cap_millis(cap: Duration) -> Option<u64> {
    u64::try_from(cap.as_millis()).ok().filter(|_| cap != NO_TIMEOUT_CAP)
}

/// Parse a deadline cap given on a command line: seconds (a positive number, at most
/// 10^9) or `none` ([`NO_TIMEOUT_CAP`]).
pub fn parse_timeout_cap(s: &str) -> Result<Duration, String> {
    if s == "none" {
        return Ok(NO_TIMEOUT_CAP);
    }
    let secs: f64 = s.parse().map_err(|_| format!("`{s}` is not a number of seconds or `none`"))?;
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("the cap must be a positive number of seconds or `none`, got `{s}`"));
    }
    Ok(Duration::from_secs_f64(secs.min(1e9)))
}
/// Default in-memory tail per stream: enough for a model to read, small enough to
/// keep hundreds of concurrent runs cheap.
pub const DEFAULT_OUTPUT_CAP: usize = 64 * 1024;
/// The largest in-memory tail a request may ask for.
pub const MAX_OUTPUT_CAP: usize = 16 * 1024 * 1024;
/// Default spill cap per stream. Without one, `yes` writes ~250 MB/s to the host's
/// temp directory: ~30 GB by the default deadline, more than many disks by the longest.
/// 1 GiB keeps any log a caller would read in full, and a run's worst case (two
/// streams) at 2 GiB.
pub const DEFAULT_SPILL_CAP: u64 = 1 << 30;
/// The largest spill cap a request may ask for (larger ones are capped).
pub const MAX_SPILL_CAP: u64 = 4 << 30;
/// Grace between SIGTERM and SIGKILL when a run is stopped.
pub const KILL_GRACE: Duration = Duration::from_secs(3);
/// How long to keep draining pipes that outliving grandchildren hold open.
pub const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// The shell that runs shell-string commands.
pub const DEFAULT_SHELL: &str = "/bin/bash";

/// The command to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Command {
    /// A shell string, run as `bash -c STRING`.
    Shell(String),
    /// A program and its arguments (the program is looked up on the command's `PATH`).
    Argv(Vec<OsString>),
}

/// Where the command's stdin comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Stdin {
    /// Nothing: reads see end-of-file (`/dev/null`).
    #[default]
    Null,
    /// These bytes, then end-of-file. A command that exits without reading is fine.
    Bytes(Vec<u8>),
    /// The caller's own stdin (CLI live mode).
    Inherit,
}

/// What happens to the command's stdout and stderr.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Output {
    /// Captured: bounded tail in memory, complete stream spilled to a file.
    #[default]
    Capture,
    /// Passed straight through to the caller's stdout/stderr (CLI live mode).
    Inherit,
}

/// What a caller asks for. Everything but the command is optional.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The command.
    pub command: Command,
    /// Working directory and workspace (default: the current directory).
    pub workdir: Option<PathBuf>,
    /// Deadline (default and cap from the config).
    pub timeout: Option<Duration>,
    /// In-memory tail per stream, in bytes (default and cap from the config).
    pub output_cap: Option<usize>,
    /// Spill-file bytes per stream (default and cap from the config; 0: no file).
    pub spill_cap: Option<u64>,
    /// Stdin.
    pub stdin: Stdin,
    /// Output handling.
    pub output: Output,
    /// Extra environment variables (may not use the `CORDON_` namespace).
    pub env: Vec<(String, String)>,
    /// The policy.
    pub policy: PolicyRequest,
    /// Runner choice.
    pub runner: RunnerChoice,
    /// Resource limits (defaults and caps from the config, see [`crate::limits`]).
    pub limits: LimitRequest,
    /// Observe write-intent path syscalls for evidence of refused writes (default on;
    /// off only trades the `file-write` denial reports for speed, never enforcement:
    /// see docs/denials.md).
    pub observe_writes: bool,
    /// Keep the run's private caches in this directory across runs instead of
    /// discarding them: an existing directory the caller owns, not group- or
    /// world-writable, outside the workspace and every writable root, and allowed as a
    /// writable root (not a system or home-configuration directory). Its
    /// [`CACHE_DIR_CACHES`] subdirectory becomes a writable root of the run, where the
    /// cache variables without a private layer point (`XDG_STATE_HOME`, ...); its
    /// [`CACHE_DIR_LAYERS`] subdirectory keeps what runs add to the private layers over
    /// the home's cache and the toolchain homes (Linux, overlayfs), which no run can
    /// write except through its layers. `workspace-write` only (refused in `read-only`,
    /// ignored in `full-access`).
    pub cache_dir: Option<PathBuf>,
}

/// The subdirectory of a cache directory ([`Request::cache_dir`]) that is a writable
/// root of the run: where cache variables point.
pub const CACHE_DIR_CACHES: &str = "caches";

/// The subdirectory of a cache directory that holds the kept upper directories of the
/// private layers (one `ENCODED-PATH/{upper,work,lock}` per layered directory). Never a
/// writable root: a run changes it only through its layers.
pub const CACHE_DIR_LAYERS: &str = "layers";

impl Request {
    /// A request with every optional field at its default.
    pub fn new(command: Command) -> Request {
        Request {
            command,
            workdir: None,
            timeout: None,
            output_cap: None,
            spill_cap: None,
            stdin: Stdin::Null,
            output: Output::Capture,
            env: Vec::new(),
            policy: PolicyRequest::default(),
            runner: RunnerChoice::Auto,
            limits: LimitRequest::default(),
            observe_writes: true,
            cache_dir: None,
        }
    }

    /// A shell-string request.
    pub fn shell(command: impl Into<String>) -> Request {
        Request::new(Command::Shell(command.into()))
    }

    /// An argv request.
    pub fn argv<I, S>(argv: I) -> Request
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Request::new(Command::Argv(argv.into_iter().map(Into::into).collect()))
    }
}

/// The executor's defaults and caps.
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// Deadline when a request gives none.
    pub default_timeout: Duration,
    /// The longest deadline a request may ask for (a longer one is an error);
    /// [`NO_TIMEOUT_CAP`] for none.
    pub max_timeout: Duration,
    /// Tail size when a request gives none.
    pub default_output_cap: usize,
    /// The largest tail a request may ask for (larger ones are capped).
    pub max_output_cap: usize,
    /// Spill cap per stream when a request gives none.
    pub default_spill_cap: u64,
    /// The largest spill cap a request may ask for (larger ones are capped).
    pub max_spill_cap: u64,
    /// SIGTERM → SIGKILL grace.
    pub kill_grace: Duration,
    /// Bounded wait for pipes held by outliving grandchildren.
    pub drain_grace: Duration,
    /// Shell for shell-string commands.
    pub shell: PathBuf,
    /// Parent directory for spill files and per-run directories (default: the
    /// system temp dir). cordon creates a private 0700 directory inside it.
    pub state_dir: Option<PathBuf>,
    /// The ambient environment to scrub (default: this process's environment).
    pub ambient_env: Option<Vec<(OsString, OsString)>>,
    /// The cordon executable that the `bwrap` runner has bubblewrap execute as its
    /// stage helper (it applies Landlock and seccomp inside the sandbox). Default:
    /// the one the running binary registered
    /// ([`crate::host::register_stage_helper`], which the `cordon` CLI
    /// does); a library user sets it to a `cordon` binary. `None`: the `bwrap`
    /// runner declares an `fs-write` gap (and hard mode refuses it).
    pub stage_helper: Option<PathBuf>,
    /// Limits when a request gives none (`None` fields: the built-in defaults in
    /// [`crate::limits`]).
    pub default_limits: LimitRequest,
    /// The largest limits a request may ask for (`None` fields: the built-in caps).
    pub max_limits: LimitRequest,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            default_timeout: DEFAULT_TIMEOUT,
            max_timeout: MAX_TIMEOUT,
            default_output_cap: DEFAULT_OUTPUT_CAP,
            max_output_cap: MAX_OUTPUT_CAP,
            default_spill_cap: DEFAULT_SPILL_CAP,
            max_spill_cap: MAX_SPILL_CAP,
            kill_grace: KILL_GRACE,
            drain_grace: DRAIN_GRACE,
            shell: PathBuf::from(DEFAULT_SHELL),
            state_dir: None,
            ambient_env: None,
            stage_helper: crate::host::registered_stage_helper(),
            default_limits: LimitRequest::default(),
            max_limits: LimitRequest::default(),
        }
    }
}

/// A fully resolved request.
#[derive(Debug, Clone)]
pub struct Spec {
    /// argv; `argv[0]` is the program as given (or the shell).
    pub argv: Vec<OsString>,
    /// The canonical working directory.
    pub workdir: PathBuf,
    /// The deadline.
    pub timeout: Duration,
    /// The in-memory tail per stream.
    pub output_cap: usize,
    /// The spill-file bytes per stream.
    pub spill_cap: u64,
    /// Stdin.
    pub stdin: Stdin,
    /// Output handling.
    pub output: Output,
    /// The environment, scrubbed (the runner adds its own variables at launch).
    pub env: Vec<(OsString, OsString)>,
    /// The resolved policy.
    pub policy: ExecutionPolicy,
    /// Runner choice.
    pub runner: RunnerChoice,
    /// Resource limits, resolved.
    pub limits: Limits,
    /// Observe write-intent path syscalls (see [`Request::observe_writes`]).
    pub observe_writes: bool,
    /// The checked, canonical cache directory (see [`Request::cache_dir`]); its
    /// [`CACHE_DIR_CACHES`] subdirectory is one of the policy's writable roots.
    pub cache_dir: Option<PathBuf>,
}
