//! `cordon mcp`: an MCP server over stdio (the `rmcp` crate) whose tools run shell
//! commands under the cordon sandbox.
//!
//! Tools: `bash` (run and wait), `bash_start` (background), `bash_read` (new output
//! and status), `bash_kill`. Every tool result carries the output tails and the
//! sandbox facts twice: as text written for a model (exit code, stdout/stderr tails,
//! the mode, and a plain sentence when something was refused or the mode is
//! read-only, saying how to get a wider mode) and as `structuredContent` (the same
//! JSON as `cordon run --json`, or the `read`/`kill` replies of `cordon serve`).
//!
//! The server flags set the [`Ceiling`]; tool arguments have no field that could widen
//! it (mode, writable roots and network are not arguments), and the working directory
//! is checked against it like every `cordon serve` request. Unknown arguments are
//! refused, not ignored.
//!
//! Approval: when a `bash` call failed because the sandbox refused one thing a single
//! narrow grant covers (a `.git` write, the network, one host), cordon asks the user
//! for exactly that grant for one retry — through MCP elicitation when the client
//! declared it (`approve`), else through the server's `--approver` program — and
//! records the decision in the audit log. No tool argument can ask for it; a client
//! that cannot elicit on a server without `--approver` gets a tool error naming the
//! way out. Never a wider mode (docs/escalation.md).
//!
//! A server whose workspace is refused (`INVALID_POLICY`: `/`, a home directory, a
//! system directory...) still starts: it answers `initialize` and lists its tools, and
//! every tool call returns that typed error with a sentence for the model (ask the
//! user to restart the server on a project directory), instead of exiting before the
//! client could read anything.
//!
//! Lifecycle: when the client disconnects (closes stdin, or closes stdout: `poll` on
//! fd 1 reports it), every process the connection started is killed and reaped before
//! the server exits.
//!
//! Command output in the model-facing text sits between two lines carrying a fresh
//! random boundary per tool result (`<<<cordon-output-HEX` / `>>>cordon-output-HEX`,
//! 16 random bytes), and denial targets, evidence and spill paths are escaped, so a
//! command cannot print a line that reads as cordon's own.
//!
//! What it does not do: it does not parse the wire protocol itself (rmcp does) or
//! decide policy (the ceiling and the executor do).

use crate::ceiling::{Ceiling, CeilingArgs, RunParams};
use crate::escalation::printable;
use crate::exec::Status;
use crate::mode::Mode;
use crate::request::Command;
use crate::result::{CollectedOutput, DenialKind, EnforcementLevel, RunResult};
use crate::serve::connection::{Approvals, Approved, Connection, KillReply, ReadReply, Started};
use crate::serve::protocol::RpcError;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde::Deserialize;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

mod approve;
mod text;

pub use text::{ceiling_sentence, describe_run, describe_run_fenced, output_boundary};
use text::{describe_approved, describe_kill, describe_read, describe_started, refused};

/// Exit status when the server cannot start.
const EXIT_SETUP_FAILED: u8 = 125;
/// Output tail per stream kept for a tool result: enough context for a model, small
/// enough not to flood its context window. The full stream is in the spill file.
pub const MCP_OUTPUT_CAP: u64 = 16 * 1024;

/// Arguments of the `bash` and `bash_start` tools.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    /// The shell command, run with `bash -c`.
    pub command: String,
    /// Working directory: relative to the workspace, or an absolute path inside it
    /// (default: the workspace).
    #[serde(default)]
    pub workdir: Option<String>,
    /// Deadline in milliseconds (default 120000; at most the server's cap, 600000
    /// unless it was started with `--max-timeout`). The command is stopped when it
    /// passes.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Memory limit in bytes (default and maximum set by the server).
    #[serde(default)]
    pub limit_memory: Option<u64>,
    /// Process limit (default and maximum set by the server).
    #[serde(default)]
    pub limit_pids: Option<u64>,
    /// CPU seconds per process (default and maximum set by the server).
    #[serde(default)]
    pub limit_cpu: Option<u64>,
}

/// Arguments of the `bash_read` and `bash_kill` tools.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandleArgs {
    /// The handle returned by `bash_start`.
    pub handle: u64,
}

/// The MCP server: one per connection.
#[derive(Clone)]
pub struct CordonMcp {
    /// The connection, or why the server's own policy was refused.
    conn: Result<Arc<Connection>, RpcError>,
    tool_router: ToolRouter<CordonMcp>,
}

impl std::fmt::Debug for CordonMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CordonMcp").field("conn", &self.conn).finish_non_exhaustive()
    }
}

/// Entry point of `cordon mcp`.
pub fn main(args: CeilingArgs) -> ExitCode {
    // A refused workspace is the caller's choice, not a broken host: the server still
    // starts and answers every call with the error (see the module docs).
    let ceiling = match Ceiling::from_args(&args) {
        Ok(c) => Ok(c),
        Err(e @ crate::error::CordonError::InvalidPolicy(_)) => Err(RpcError::cordon(&e)),
        Err(e) => {
            eprintln_or_drop!("cordon mcp: error[{}]: {}", e.code(), e);
            return ExitCode::from(EXIT_SETUP_FAILED);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln_or_drop!("cordon mcp: error[IO_ERROR]: starting the runtime: {e}");
            return ExitCode::from(EXIT_SETUP_FAILED);
        }
    };
    let code = rt.block_on(async move {
        let conn = match ceiling {
            Ok(ceiling) => {
                let conn = Connection::new(ceiling, args.executor_config()).map_err(|e| RpcError::cordon(&e));
                match conn.and_then(|c| c.with_approvals(Approvals::from_args(&args.approval)?)) {
                    Ok(s) => Ok(Arc::new(s)),
                    Err(e) => {
                        eprintln_or_drop!("cordon mcp: error[{}]: {}", e.name, e.message);
                        return ExitCode::from(EXIT_SETUP_FAILED);
                    }
                }
            }
            Err(refused) => {
                eprintln_or_drop!("cordon mcp: serving errors only: error[{}]: {}", refused.name, refused.message);
                Err(refused)
            }
        };
        let mut signals = crate::serve::signal_counter();
        let server = match &conn {
            Ok(conn) => CordonMcp::new(conn.clone()),
            Err(refused) => CordonMcp::refusing(refused.clone()),
        };
        let code = match server.serve(rmcp::transport::stdio_pipes()).await {
            Ok(running) => {
                tokio::select! {
                    r = running.waiting() => {
                        if let Err(e) = r {
                            eprintln_or_drop!("cordon mcp: the server task failed: {e}");
                        }
                    }
                    _ = signals.wait_for(|n| *n > 0) => {}
                    // The client closed our stdout: nobody can read a result any more.
                    _ = crate::serve::stdout_gone() => {}
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln_or_drop!("cordon mcp: error[MCP_INIT]: {e}");
                ExitCode::from(EXIT_SETUP_FAILED)
            }
        };
        // Graceful unless signalled (again) meanwhile; whatever is left is SIGKILLed
        // and reaped when the connection's executor is dropped.
        let seen = *signals.borrow_and_update();
        if let Ok(conn) = &conn {
            tokio::select! {
                _ = conn.shutdown() => {}
                _ = signals.wait_for(|n| *n > seen) => {}
            }
        }
        code
    });
    rt.shutdown_timeout(Duration::from_millis(200));
    code
}

#[tool_router]
impl CordonMcp {
    /// A server for one connection.
    pub fn new(conn: Arc<Connection>) -> CordonMcp {
        let mut tool_router = Self::tool_router();
        let ceiling = conn.ceiling().clone();
        let facts = ceiling_sentence(&ceiling);
        for (name, route) in tool_router.map.iter_mut() {
            let base = route.attr.description.clone().unwrap_or_default();
            if name == "bash" || name == "bash_start" {
                route.attr.description = Some(format!("{base} {facts}").into());
            }
        }
        CordonMcp { conn: Ok(conn), tool_router }
    }

    /// A server whose own policy was refused (`refused`, e.g. `INVALID_POLICY` for a
    /// workspace of `/`): it lists its tools and answers every call with the error.
    pub fn refusing(refused: RpcError) -> CordonMcp {
        let mut tool_router = Self::tool_router();
        let facts = startup_refusal_sentence(&refused);
        for (name, route) in tool_router.map.iter_mut() {
            let base = route.attr.description.clone().unwrap_or_default();
            if name == "bash" || name == "bash_start" {
                route.attr.description = Some(format!("{base} {facts}").into());
            }
        }
        CordonMcp { conn: Err(refused), tool_router }
    }

    /// The connection, or the tool result every call gets when the server's policy
    /// was refused.
    fn ready(&self) -> Result<&Arc<Connection>, CallToolResult> {
        self.conn.as_ref().map_err(|refused| {
            let text = format!("Nothing ran. {}", startup_refusal_sentence(refused));
            let mut out = CallToolResult::error(vec![ContentBlock::text(text)]);
            out.structured_content = Some(serde_json::json!({ "error": refused.to_json() }));
            out
        })
    }

    /// Run a shell command in the sandbox and wait for it.
    #[tool(
        name = "bash",
        description = "Run a shell command (bash -c) inside the cordon sandbox and wait for it. Returns the exit code, the tails of stdout and stderr, and what the sandbox allowed or refused."
    )]
    async fn bash(
        &self,
        Parameters(args): Parameters<BashArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let conn = match self.ready() {
            Ok(c) => c,
            Err(refused) => return Ok(refused),
        };
        let ceiling = conn.ceiling().clone();
        // The user is asked through the client when it can elicit; else the server's
        // --approver; else nobody, and the result names the way out.
        let elicit = approve::ElicitApprover::for_request(&context);
        let client = elicit.as_ref().ok().map(|a| a as &dyn crate::escalation::Approver);
        Ok(match conn.run_approved(run_params(args), client).await {
            Ok(mut approved) => {
                if let (Some((_, why)), Err(no_elicit)) = (&mut approved.unasked, &elicit) {
                    *why = format!("{no_elicit}, and the server was started without --approver");
                }
                bash_result(&approved, &ceiling)
            }
            Err(e) => refused(&e, &ceiling),
        })
    }

    /// Start a shell command in the background.
    #[tool(
        name = "bash_start",
        description = "Start a shell command (bash -c) in the background inside the cordon sandbox, for servers, watchers and long builds. Returns a handle for bash_read and bash_kill. It is stopped when its timeout passes or when this MCP session ends."
    )]
    async fn bash_start(&self, Parameters(args): Parameters<BashArgs>) -> Result<CallToolResult, ErrorData> {
        let conn = match self.ready() {
            Ok(c) => c,
            Err(refused) => return Ok(refused),
        };
        let ceiling = conn.ceiling().clone();
        Ok(match conn.start(run_params(args)).await {
            Ok(started) => {
                let text = describe_started(&started, &ceiling);
                let mut out = CallToolResult::success(vec![ContentBlock::text(text)]);
                out.structured_content = serde_json::to_value(&started).ok();
                out
            }
            Err(e) => refused(&e, &ceiling),
        })
    }

    /// Read new output of a background command.
    #[tool(
        name = "bash_read",
        description = "Read what a background command (from bash_start) printed since the previous bash_read, and whether it is still running; once it has exited, also its exit code and sandbox facts.",
        annotations(read_only_hint = true)
    )]
    async fn bash_read(&self, Parameters(args): Parameters<HandleArgs>) -> Result<CallToolResult, ErrorData> {
        let conn = match self.ready() {
            Ok(c) => c,
            Err(refused) => return Ok(refused),
        };
        let ceiling = conn.ceiling().clone();
        Ok(match conn.read(args.handle).await {
            Ok(reply) => {
                let text = describe_read(&reply, &ceiling);
                let mut out = CallToolResult::success(vec![ContentBlock::text(text)]);
                out.structured_content = serde_json::to_value(&reply).ok();
                out
            }
            Err(e) => refused(&e, &ceiling),
        })
    }

    /// Stop a background command.
    #[tool(
        name = "bash_kill",
        description = "Stop a background command started with bash_start (SIGTERM, then SIGKILL to its whole process group). Safe to call again; says whether it was still running.",
        annotations(idempotent_hint = true)
    )]
    async fn bash_kill(&self, Parameters(args): Parameters<HandleArgs>) -> Result<CallToolResult, ErrorData> {
        let conn = match self.ready() {
            Ok(c) => c,
            Err(refused) => return Ok(refused),
        };
        let ceiling = conn.ceiling().clone();
        Ok(match conn.kill(args.handle).await {
            Ok(reply) => {
                let text = describe_kill(&reply);
                let mut out = CallToolResult::success(vec![ContentBlock::text(text)]);
                out.structured_content = serde_json::to_value(&reply).ok();
                out
            }
            Err(e) => refused(&e, &ceiling),
        })
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CordonMcp {
    fn get_info(&self) -> ServerConfig {
        let instructions = match &self.conn {
            Ok(conn) => format!(
                "Shell commands run under the cordon sandbox. {} The sandbox mode is fixed by the user who \
                 started this server; no tool argument can widen it. When a command fails because the \
                 sandbox refused one thing (a .git write, the network), cordon itself may ask the user to allow \
                 exactly that for one retry. When a command is refused by the sandbox, do not try to work \
                 around it.",
                ceiling_sentence(conn.ceiling())
            ),
            Err(refused) => format!("Shell commands cannot run here. {}", startup_refusal_sentence(refused)),
        };
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cordon", env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions)
    }
}

/// What the model is told when the server's own policy was refused.
fn startup_refusal_sentence(refused: &RpcError) -> String {
    format!(
        "This cordon server's workspace was refused when it started: {} ({}). Every tool call fails the same \
         way until the user restarts the server with a usable workspace (`cordon mcp --cwd DIR`, a project \
         directory); tell the user, and do not try to work around it.",
        printable(&refused.message),
        refused.name
    )
}

/// The tool result of a `bash` call: the text for the model (an error when a grant was
/// needed and nobody could be asked) and the `cordon run --json` object of the result
/// that counts, with `escalation` when the user was asked.
fn bash_result(approved: &Approved, ceiling: &Ceiling) -> CallToolResult {
    let (text, is_error) = describe_approved(approved, ceiling);
    let mut out = if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    if let Some(result) = approved.outcome.result() {
        let mut value = serde_json::to_value(result).unwrap_or_default();
        if let Some(report) = approved.outcome.report() {
            value["escalation"] = report;
        }
        out.structured_content = Some(value);
    }
    out
}

fn run_params(args: BashArgs) -> RunParams {
    RunParams {
        command: Some(Command::Shell(args.command)),
        workdir: args.workdir.filter(|w| !w.is_empty()).map(Into::into),
        timeout_ms: args.timeout_ms,
        output_cap: Some(MCP_OUTPUT_CAP),
        limits: crate::limits::LimitRequest { memory: args.limit_memory, pids: args.limit_pids, cpu: args.limit_cpu },
        ..RunParams::default()
    }
}
