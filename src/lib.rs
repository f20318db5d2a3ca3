//! cordon: a sandbox-first command executor.
//!
//! Every command runs under OS confinement chosen from the mode ladder
//! ([`Mode`]: `read-only` < `workspace-write` < `full-access`). The result says what
//! ran, what the sandbox refused and how completely it was enforced; when a confined
//! mode cannot be enforced, nothing runs and the error is
//! [`CordonError::SandboxUnavailable`] (`SANDBOX_UNAVAILABLE`).
//!
//! Data flow: [`Request`] → [`Executor::resolve`] → [`Spec`] → runner selection
//! ([`runner::select`], fail closed) → launch plan (pure) → spawn (the child applies
//! confinement, then execs) → bounded collectors → wait / timeout / abort → result.
//!
//! ```no_run
//! # async fn demo() -> Result<(), cordon::CordonError> {
//! use cordon::{Executor, ExecutorConfig, Mode, Request};
//! let exec = Executor::new(ExecutorConfig::default())?;
//! let mut req = Request::shell("echo hello > out.txt && cat out.txt");
//! req.policy.mode = Mode::WorkspaceWrite;
//! let result = exec.run(exec.resolve(req)?).await?;
//! assert_eq!(result.stdout.text, "hello\n");
//! # Ok(()) }
//! ```
#![deny(unsafe_code)]
#![deny(missing_docs)]

// The public API is what this crate root re-exports (below): build an
// [`Executor`], [`Executor::resolve`] a [`Request`] into a [`Spec`],
// [`Executor::run`] it (or [`Executor::start`] it for a [`Handle`]) and read the
// [`RunResult`]; escalation and sessions on top. `examples/run_json.rs` is the whole
// path, runnable (`cargo run --example run_json`).
//
// Modules are private to the crate unless something outside needs them: those
// marked "API" hold the types of the re-exported items (documented where they live);
// those marked "binary" are public only because the `cordon` executable (and its
// golden and differential tests) drive them, and are no stable API.

/// `eprintln!` that cannot panic: `eprintln!` panics when writing fails (stderr a pipe
/// whose reader is gone), which would take a `serve` or `mcp` server and every run it
/// owns down with it. A line that cannot be written is dropped.
macro_rules! eprintln_or_drop {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

#[cfg(target_os = "linux")]
pub mod audit; // binary: `cordon audit` and its probe program (Linux)
pub mod ceiling; // binary: the widest policy of a serve/mcp connection
#[cfg(target_os = "linux")]
mod denials; // crate: the seccomp supervisor (Linux)
pub mod doctor; // binary: `cordon doctor`
mod env; // crate: the credential scrub (its error is re-exported)
pub mod error; // API: CordonError and the per-area errors
pub mod escalation; // API: run, then ask and retry wider
pub mod exec; // API: the Executor (see the re-exports)
pub mod flags; // binary: the policy flags shared by run, serve and mcp
mod gitconfig; // crate: the run's private global git config
pub mod host; // API: HostFacts and the test knobs
pub mod layer; // API: held-back writes (HeldWrites in the result); applying them (Linux)
pub mod limits; // API: resource limits (LimitRequest in Request)
pub mod mcp; // binary: `cordon mcp`
pub mod mode; // API: the mode ladder
pub mod phases; // binary: phase timings of one CLI run (CORDON_TRACE_PHASES)
mod pin; // crate: checked paths pinned as open files
pub mod policy; // API: policy request and resolution
pub mod proxy; // API: the egress proxy of `--allow-host` (its allow-list and network log)
pub mod request; // API: Request, Spec, ExecutorConfig
pub mod result; // API: RunResult and the sandbox facts
pub mod runner; // API: runners, selection, the pure planners (golden-tested); its landlock,
                // passthrough and stage modules are private to the crate
pub mod serve; // binary: `cordon serve` and its wire protocol (`serve::protocol`)
pub mod session; // API: session mode overrides and governing files
#[cfg(target_os = "linux")]
mod tracee; // crate: a supervised task's memory, read by the supervisor (Linux)
mod vocab; // crate: the shared vocabulary (re-exported below)
#[cfg(target_os = "linux")]
mod writes; // crate: the supervisor's judgement of write-intent syscalls (Linux)

pub use error::EnvError;
pub use error::{CordonError, PolicyError, RunnerReason, WidthReason};
pub use escalation::{Approver, Decision, EscalatedOutcome, EscalationError, EscalationOptions, EscalationRequest};
pub use exec::{Executor, Handle, Interrupts, OutputRead, Status};
pub use host::HostFacts;
pub use limits::{LimitRequest, Limits};
pub use mode::Mode;
pub use policy::{ExecutionPolicy, PolicyRequest};
pub use request::{Command, ExecutorConfig, Output, Request, Spec, Stdin};
pub use result::{
    CollectedOutput, Denial, DenialKind, Enforcement, EnforcementLevel, Gap, LocalIpc, RunResult, SandboxFacts,
    SkippedRunner, Unobserved,
};
pub use runner::RunnerFailure;
pub use session::{GoverningFiles, SessionEvent};
pub use vocab::{
    parse_accepted_gaps, ProbeStatus, Restriction, RunnerChoice, RunnerKind, CONTAINER_GAPS, CONTAINER_PROFILE,
};
