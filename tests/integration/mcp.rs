//! `cordon mcp` driven by the official MCP Python SDK (`mcp` from PyPI): the script
//! `tests/clients/mcp_client.py` spawns the server over stdio, lists its tools and
//! calls them, judging effects from outside the sandbox.
//!
//! Python: `CORDON_TEST_PYTHON` (`.ci/run` points it at a virtual environment with
//! `mcp` installed), else `python3` if it can import `mcp`. Without one, or on a host
//! that cannot run confined modes, each test prints `SKIP <test>: <reason>` (a panic
//! with `CORDON_MUST_ENFORCE=1`).

use std::path::PathBuf;
use std::process::Command;

use crate::common::cli::client_scenario;
use crate::common::{skip_or_fail, VarTmp};

/// A Python that can import the MCP SDK, or why there is none.
fn python_with_mcp() -> Result<PathBuf, String> {
    let (candidate, from_env) = match std::env::var_os("CORDON_TEST_PYTHON") {
        Some(p) => (PathBuf::from(p), true),
        None => (PathBuf::from("python3"), false),
    };
    let out = Command::new(&candidate).args(["-c", "import mcp"]).output();
    match out {
        Ok(o) if o.status.success() => Ok(candidate),
        Ok(o) => Err(format!(
            "{} cannot import the MCP SDK ({}){}",
            candidate.display(),
            String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or(""),
            if from_env { "" } else { "; set CORDON_TEST_PYTHON to a Python with `pip install mcp`" }
        )),
        Err(e) => Err(format!("cannot run {}: {e}", candidate.display())),
    }
}

fn scenario(test: &str, name: &str) {
    let dirs = VarTmp::new(&format!("mcp-{name}"));
    let py = match python_with_mcp() {
        Ok(p) => p,
        Err(reason) => return skip_or_fail(test, &reason),
    };
    client_scenario(test, &py, "mcp_client.py", &dirs, name);
}

#[test]
fn mcp_lists_tools_and_runs_a_command() {
    scenario("mcp_lists_tools_and_runs_a_command", "tools");
}

#[test]
fn mcp_write_outside_workspace_denied_with_facts() {
    scenario("mcp_write_outside_workspace_denied_with_facts", "denied");
}

#[test]
fn mcp_read_only_ceiling_explained() {
    scenario("mcp_read_only_ceiling_explained", "readonly");
}

#[test]
fn mcp_refused_workspace_still_serves_typed_errors() {
    scenario("mcp_refused_workspace_still_serves_typed_errors", "refused");
}

#[test]
fn mcp_background_command_read_and_kill() {
    scenario("mcp_background_command_read_and_kill", "background");
}

#[test]
fn mcp_elicitation_asks_the_user_for_a_narrow_grant() {
    // Issue 27: a refused `git commit` is asked about through MCP elicitation; granted,
    // the commit lands; declined, nothing changes; without elicitation, a tool error.
    if which::which("git").is_err() {
        return crate::common::skip_regardless("mcp_elicitation_asks_the_user_for_a_narrow_grant", "no git");
    }
    scenario("mcp_elicitation_asks_the_user_for_a_narrow_grant", "approve");
}
