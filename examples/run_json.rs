//! The library's whole path in one program: a [`cordon::Request`] is resolved into a
//! [`cordon::Spec`] (policy, environment and limits fixed), run under the strongest
//! runner that enforces `workspace-write`, and its [`cordon::RunResult`] printed as
//! JSON (the result object `cordon run --json` prints, indented).
//!
//! ```sh
//! cargo run --example run_json
//! ```
//!
//! The command writes a file into a fresh workspace and reads it back. When this host
//! cannot enforce the mode, nothing runs and the program prints the typed error
//! (`SANDBOX_UNAVAILABLE`) instead, exiting 1. `cargo test --examples` runs it too
//! (see the test at the end).

use cordon::{CordonError, Executor, ExecutorConfig, Mode, Request, RunResult};
use std::path::Path;

/// The command the example runs inside the workspace.
const COMMAND: &str = "echo hello > hello.txt && cat hello.txt";

/// Resolve and run [`COMMAND`] in `workspace` under `workspace-write`.
fn run_in(workspace: &Path) -> Result<RunResult, CordonError> {
    let exec = Executor::new(ExecutorConfig::default())?;
    let mut req = Request::shell(COMMAND);
    req.workdir = Some(workspace.to_path_buf());
    req.policy.mode = Mode::WorkspaceWrite;
    let spec = exec.resolve(req)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    rt.block_on(exec.run(spec))
}

fn main() {
    let workspace = tempfile::tempdir().expect("a temporary workspace");
    match run_in(workspace.path()) {
        Ok(result) => println!("{}", serde_json::to_string_pretty(&result).expect("a result serializes")),
        Err(e) => {
            let body = serde_json::json!({ "error": { "code": e.code(), "message": e.to_string() } });
            println!("{body}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_runs_a_command_in_the_workspace() {
        let workspace = tempfile::tempdir().unwrap();
        match run_in(workspace.path()) {
            Ok(r) => {
                assert_eq!(r.exit_code, Some(0), "{r:?}");
                assert_eq!(r.stdout.text, "hello\n", "{r:?}");
                assert_eq!(r.sandbox.mode, Mode::WorkspaceWrite);
                // The effect, seen from outside: the file is in the workspace.
                assert_eq!(std::fs::read_to_string(workspace.path().join("hello.txt")).unwrap(), "hello\n");
                // The printing path: the program itself.
                main();
            }
            Err(e @ CordonError::SandboxUnavailable { .. }) => {
                if std::env::var("CORDON_MUST_ENFORCE").is_ok_and(|v| v == "1") {
                    panic!("CORDON_MUST_ENFORCE=1: {e}");
                }
                eprintln!("SKIP the_example_runs_a_command_in_the_workspace: {e}");
            }
            Err(e) => panic!("{}: {e}", e.code()),
        }
    }
}
