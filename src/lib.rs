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

pub mod denials;
pub mod doctor;
pub mod env;
pub mod error;
pub mod escalation;
pub mod exec;
pub mod host;
pub mod limits;
pub mod mcp;
pub mod mode;
pub mod pin;
pub mod policy;
pub mod protocol;
pub mod request;
pub mod result;
pub mod runner;
pub mod serve;
pub mod session;
pub mod vocab;

pub use error::{CordonError, PolicyError, RunnerReason};
pub use escalation::{Approver, Decision, EscalatedOutcome, EscalationError, EscalationOptions, EscalationRequest};
pub use exec::{Executor, Handle, OutputRead, Status};
pub use host::HostFacts;
pub use mode::Mode;
pub use policy::{ExecutionPolicy, PolicyRequest};
pub use request::{Command, ExecutorConfig, Output, Request, Spec, Stdin};
pub use result::{CollectedOutput, Denial, DenialKind, Enforcement, EnforcementLevel, Gap, RunResult, SandboxFacts};
pub use session::{GoverningFiles, SessionEvent};
pub use vocab::{ProbeStatus, Restriction, RunnerChoice, RunnerKind};
