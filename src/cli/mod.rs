//! The subcommands of the `cordon` binary: the clap command tree here, one module per
//! subcommand (`run`, `session`, `probe` with `doctor`, `audit`); `serve` and `mcp` live in the
//! library ([`cordon::serve`], [`cordon::mcp`]). Output helpers that never panic on a
//! closed pipe, and the exit statuses, are shared by all of them.
//!
//! What it does not do: decide policy (the library does); it turns flags into requests
//! and results into output and exit statuses.

use clap::{Parser, Subcommand};
use cordon::error::CordonError;
use cordon::flags::parse_mode;
use cordon::mode::Mode;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

// Printing never panics: `println!` panics when stdout is a closed pipe
// (`cordon session show FILE | head`; cordon ignores SIGPIPE), so every line goes
// through these, which drop a failed write (the reader has gone) and carry on to the
// normal exit status.
macro_rules! outln {
    ($($arg:tt)*) => {{ let _ = writeln!(std::io::stdout(), $($arg)*); }};
}
macro_rules! out {
    ($($arg:tt)*) => {{ let _ = write!(std::io::stdout(), $($arg)*); }};
}
macro_rules! errln {
    ($($arg:tt)*) => {{ let _ = writeln!(std::io::stderr(), $($arg)*); }};
}

pub(crate) mod audit;
pub(crate) mod governed;
pub(crate) mod probe;
pub(crate) mod run;
pub(crate) mod session;

pub(crate) use run::RunArgs;

/// Exit status when cordon fails before the command runs.
pub(crate) const EXIT_SETUP_FAILED: u8 = 125;
/// Exit status when the program exists but cannot be executed.
pub(crate) const EXIT_NOT_EXECUTABLE: u8 = 126;
/// Exit status when the program is not found.
pub(crate) const EXIT_NOT_FOUND: u8 = 127;
/// Exit status when the reader of `--json` output went away (128 + SIGPIPE, as for
/// any pipeline writer whose reader left): the run was aborted, its result is lost.
pub(crate) const EXIT_STDOUT_GONE: u8 = 128 + 13;

#[derive(Parser, Debug)]
#[command(name = "cordon", version, about = "Run commands under OS confinement chosen from a mode ladder")]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Sub,
}

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant, reason = "parsed once per process; boxing buys nothing")]
pub(crate) enum Sub {
    /// Run a command under a sandbox mode.
    Run(Box<RunArgs>),
    /// Manage a session's mode override (an append-only event log; docs/escalation.md).
    #[command(subcommand)]
    Session(SessionCmd),
    /// Show what this host can enforce, per runner and mode.
    Probe {
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Serve requests as newline-delimited JSON-RPC over stdin/stdout (docs/protocol.md);
    /// the flags set the ceiling that requests may narrow but never widen.
    Serve(cordon::ceiling::CeilingArgs),
    /// Serve an MCP server over stdio with bash tools; the flags set the ceiling.
    Mcp(cordon::ceiling::CeilingArgs),
    /// Run the security regression battery against cordon's runners and modes on this
    /// host (or another sandbox's command prefix) and judge each probe by its effect
    /// (docs/audit.md).
    Audit(Box<audit::AuditArgs>),
    /// Verify with canaries which runner each mode uses here and whether it confines.
    Doctor {
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum SessionCmd {
    /// Append a set-mode event: later `cordon run --session FILE` calls run at MODE at most.
    SetMode {
        /// The session log (created if missing; keep it outside every writable root).
        file: PathBuf,
        /// read-only, workspace-write or full-access.
        #[arg(value_parser = parse_mode)]
        mode: Mode,
    },
    /// Append a standing grant: later `cordon run --session FILE` calls (confined ones)
    /// may write PATH, a protected path such as a repository's `.git` (`write PATH`), or
    /// reach the network (`network`). Nothing else changes.
    Grant {
        /// The session log (created if missing; keep it outside every writable root).
        file: PathBuf,
        /// `write` or `network`.
        #[arg(value_parser = ["write", "network"])]
        what: String,
        /// With `write`: the protected path (absolute).
        path: Option<PathBuf>,
    },
    /// Print the effective mode and the history.
    Show {
        /// The session log.
        file: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn error_exit(e: &CordonError, json: bool) -> ExitCode {
    errln!("cordon: error[{}]: {}", e.code(), e);
    if json {
        let obj = serde_json::json!({ "error": e.body() });
        outln!("{obj}");
    }
    ExitCode::from(match e {
        CordonError::ProgramNotFound { .. } => EXIT_NOT_FOUND,
        CordonError::ProgramNotExecutable { .. } | CordonError::ArgumentListTooLong { .. } => EXIT_NOT_EXECUTABLE,
        _ => EXIT_SETUP_FAILED,
    })
}

/// Write `value` as one JSON line on stdout. A closed pipe (`| head`) is not an error:
/// the reader has gone, and the exit status stays the command's.
pub(crate) fn print_json(value: &impl serde::Serialize) {
    let mut line = serde_json::to_vec(value).unwrap_or_default();
    line.push(b'\n');
    let _ = emit(&line);
}

/// Write `bytes` to stdout and flush. `Err` only for a closed pipe (`EPIPE`), which
/// callers treat as a quiet end of output rather than a panic (`println!` would panic:
/// cordon ignores `SIGPIPE`).
pub(crate) fn emit(bytes: &[u8]) -> Result<(), std::io::Error> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes).and_then(|_| out.flush())
}
