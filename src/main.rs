//! The `cordon` command line: `run`, `probe`.
//!
//! Exit statuses: the command's own status (128+N for signal N); 125 when anything
//! failed before the command ran (stderr names the error code); 127 when the program
//! was not found; 126 when it is not executable; 2 for bad flags; 141 (128 + SIGPIPE)
//! when `--json` output has no reader any more (cordon aborts the run as soon as its
//! stdout, a pipe or socket, reports the reader gone, and removes the run's spill
//! files, since nobody can receive their paths).

mod cli;

use clap::Parser;
use cli::{Cli, RunArgs, Sub};
use std::path::PathBuf;
use std::process::ExitCode;

/// What the CLI registers as the bwrap runner's stage helper: this very executable.
const CLI_STAGE_HELPER: &str = "/proc/self/exe";

fn main() -> ExitCode {
    // bubblewrap executes this binary as the bwrap runner's stage helper inside the
    // sandbox (see cordon::runner::bwrap); it never returns.
    #[cfg(target_os = "linux")]
    if std::env::args_os().nth(1).is_some_and(|a| a == cordon::runner::bwrap::STAGE_HELPER_ARG) {
        cordon::runner::bwrap::stage_helper_main(std::env::args_os().skip(2).collect());
    }
    // `cordon audit`'s probe program (inside the sandbox under test, or on the host as
    // the control): one operation, one JSON line; it never returns.
    #[cfg(target_os = "linux")]
    if std::env::args_os().nth(1).is_some_and(|a| a == cordon::audit::probe::SUBCOMMAND) {
        cordon::audit::probe::main(std::env::args_os().skip(2).collect());
    }
    // This binary is its own stage helper. `/proc/self/exe` names the running file
    // even after the path is replaced (an upgrade during `cordon serve`).
    cordon::host::register_stage_helper(PathBuf::from(CLI_STAGE_HELPER));
    // `cordon run` is the hot path (an agent may spawn thousands of short commands):
    // build only its parser instead of the whole command tree (~0.15 ms saved).
    if std::env::args_os().nth(1).is_some_and(|a| a == "run") {
        // Only here: a run reports its phases at its end; serve and mcp never would,
        // and their marks would pile up.
        cordon::phases::enable_from_env();
        use clap::{Args, FromArgMatches};
        let cmd = RunArgs::augment_args(
            clap::Command::new("run").bin_name("cordon run").about("Run a command under a sandbox mode."),
        );
        let parsed = cmd.try_get_matches_from(std::env::args_os().skip(1)).and_then(|m| RunArgs::from_arg_matches(&m));
        return match parsed {
            Ok(args) => {
                cordon::phases::mark("parse");
                cli::run::run(args)
            }
            Err(e) => {
                let _ = e.print();
                ExitCode::from(if e.use_stderr() { 2 } else { 0 })
            }
        };
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match cli.command {
        Sub::Run(args) => cli::run::run(*args),
        Sub::Probe { json } => cli::probe::probe(json),
        Sub::Session(cmd) => cli::session::session_cmd(cmd),
        Sub::Doctor { json } => cli::probe::doctor(json),
        Sub::Audit(args) => cli::audit::audit(*args),
        Sub::Serve(args) => cordon::serve::main(args),
        Sub::Mcp(args) => cordon::mcp::main(args),
    }
}
