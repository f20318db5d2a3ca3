//! The `cordon` command line: `run`, `probe`.
//!
//! Exit statuses: the command's own status (128+N for signal N); 125 when anything
//! failed before the command ran (stderr names the error code); 127 when the program
//! was not found; 126 when it is not executable; 2 for bad flags; 141 (128 + SIGPIPE)
//! when `--json` output has no reader any more (cordon aborts the run as soon as its
//! stdout, a pipe or socket, reports the reader gone, and removes the run's spill
//! files, since nobody can receive their paths).

use clap::{Parser, Subcommand};
use cordon::error::CordonError;
use cordon::flags::{parse_mode, PolicyArgs};
use cordon::host::HostFacts;
use cordon::mode::Mode;
use cordon::policy::ExecutionPolicy;
use cordon::request::{Command, ExecutorConfig, Output, Request, Stdin};
use cordon::runner::{self, probe_runner, ProbeStatus, RunnerChoice, RunnerKind};
use cordon::Executor;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

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

/// Exit status when cordon fails before the command runs.
const EXIT_SETUP_FAILED: u8 = 125;
/// Exit status when the program exists but cannot be executed.
const EXIT_NOT_EXECUTABLE: u8 = 126;
/// Exit status when the program is not found.
const EXIT_NOT_FOUND: u8 = 127;
/// Exit status when the reader of `--json` output went away (128 + SIGPIPE, as for
/// any pipeline writer whose reader left): the run was aborted, its result is lost.
const EXIT_STDOUT_GONE: u8 = 128 + 13;

#[derive(Parser, Debug)]
#[command(name = "cordon", version, about = "Run commands under OS confinement chosen from a mode ladder")]
struct Cli {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant, reason = "parsed once per process; boxing buys nothing")]
enum Sub {
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
    /// Verify with canaries which runner each mode uses here and whether it confines.
    Doctor {
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum SessionCmd {
    /// Append a set-mode event: later `cordon run --session FILE` calls run at MODE at most.
    SetMode {
        /// The session log (created if missing; keep it outside every writable root).
        file: PathBuf,
        /// read-only, workspace-write or full-access.
        #[arg(value_parser = parse_mode)]
        mode: Mode,
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

#[derive(clap::Args, Debug)]
#[command(trailing_var_arg = true, group = clap::ArgGroup::new("approval").args(["ask", "approver"]))]
struct RunArgs {
    /// Mode, workspace, writable roots, network, unix sockets, best effort.
    #[command(flatten)]
    policy: PolicyArgs,
    /// Runner: auto, landlock, bwrap, seatbelt or passthrough.
    // Listed right after --mode (ties in display order sort by name).
    #[arg(long, default_value = "auto", value_parser = parse_runner, display_order = 0)]
    runner: RunnerChoice,
    /// Deadline in seconds (default 120, at most 600).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    timeout: Option<Duration>,
    #[command(flatten)]
    limits: cordon::limits::LimitArgs,
    /// Capture output and print one JSON result object on stdout.
    #[arg(long)]
    json: bool,
    /// In-memory tail per stream, in bytes (with --json).
    #[arg(long, value_name = "BYTES")]
    output_cap: Option<usize>,
    /// Spill-file bytes per stream (with --json; K, M, G suffixes; default 1G, at most
    /// 4G; 0: no file). Past it the file keeps the head and `spill_truncated` is set.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    spill_cap: Option<u64>,
    /// Extra environment variable NAME=VALUE, or NAME to keep cordon's own value
    /// (repeatable; CORDON_* is reserved). Never scrubbed: the way to pass a credential on purpose.
    #[arg(long = "env", value_name = "NAME[=VALUE]", value_parser = parse_env)]
    env: Vec<(String, String)>,
    /// Pass cordon's stdin to the command (default: the command's stdin is empty).
    #[arg(long)]
    stdin: bool,
    /// Take the mode from this session log; --mode may only narrow it.
    #[arg(long, value_name = "FILE")]
    session: Option<PathBuf>,
    /// When the sandbox denied something, ask on the terminal (/dev/tty) for one retry
    /// at the next wider mode (the default answer is no).
    #[arg(long)]
    ask: bool,
    /// Like --ask, but ask PROGRAM: the request as JSON on its stdin, exit 0 grants.
    /// It runs unsandboxed, as your policy agent.
    #[arg(long, value_name = "PROGRAM")]
    approver: Option<PathBuf>,
    /// Append every escalation decision here (JSON lines; default
    /// $XDG_STATE_HOME/cordon/audit.jsonl or ~/.local/state/cordon/audit.jsonl).
    #[arg(long, value_name = "FILE", requires = "approval")]
    audit_log: Option<PathBuf>,
    /// Ask up front for this strictly wider mode; nothing runs unless it is granted.
    #[arg(long, value_name = "MODE", value_parser = parse_mode, requires = "approval")]
    escalate_to: Option<Mode>,
    /// Why the wider mode is needed (shown to the approver and logged).
    #[arg(long, value_name = "TEXT", requires = "approval")]
    justification: Option<String>,
    /// Bind the approval to the contents of the files the command names (e.g. the
    /// script in `bash build.sh`): they enter the fingerprint, and the retry is refused
    /// if one changed after the approval.
    #[arg(long, requires = "approval")]
    bind_script: bool,
    /// Run a shell string with bash -c instead of PROGRAM ARGS.
    #[arg(short = 'c', long = "shell", value_name = "STRING", conflicts_with = "argv")]
    shell: Option<String>,
    /// The program and its arguments (after `--`).
    #[arg(value_name = "PROGRAM", num_args = 0..)]
    argv: Vec<OsString>,
}

fn parse_runner(s: &str) -> Result<RunnerChoice, String> {
    s.parse()
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.parse().map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("timeout must be a positive number of seconds, got `{s}`"));
    }
    Ok(Duration::from_secs_f64(secs.min(1e9)))
}

/// A byte count: digits with an optional binary suffix K, M or G (case-insensitive).
fn parse_bytes(s: &str) -> Result<u64, String> {
    let (digits, shift) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 10),
        Some((i, 'm' | 'M')) => (&s[..i], 20),
        Some((i, 'g' | 'G')) => (&s[..i], 30),
        _ => (s, 0),
    };
    let n: u64 = digits.parse().map_err(|_| format!("`{s}` is not a byte count (digits, then K, M or G)"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("`{s}` is too large"))
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        // `--env NAME`: keep this process's value (it would otherwise be scrubbed).
        None if !s.is_empty() => match std::env::var(s) {
            Ok(v) => Ok((s.to_string(), v)),
            Err(std::env::VarError::NotPresent) => Err(format!("`{s}` is not set in cordon's environment")),
            Err(std::env::VarError::NotUnicode(_)) => Err(format!("the value of `{s}` is not UTF-8")),
        },
        _ => Err(format!("`{s}` is not NAME=VALUE or NAME")),
    }
}

/// What the CLI registers as the bwrap runner's stage helper: this very executable.
const CLI_STAGE_HELPER: &str = "/proc/self/exe";

fn main() -> ExitCode {
    // bubblewrap executes this binary as the bwrap runner's stage helper inside the
    // sandbox (see cordon::runner::bwrap); it never returns.
    if std::env::args_os().nth(1).is_some_and(|a| a == cordon::runner::bwrap::STAGE_HELPER_ARG) {
        cordon::runner::bwrap::stage_helper_main(std::env::args_os().skip(2).collect());
    }
    // This binary is its own stage helper. `/proc/self/exe` names the running file
    // even after the path is replaced (an upgrade during `cordon serve`).
    cordon::runner::bwrap::register_stage_helper(PathBuf::from(CLI_STAGE_HELPER));
    // `cordon run` is the hot path (an agent may spawn thousands of short commands):
    // build only its parser instead of the whole command tree (~0.15 ms saved).
    if std::env::args_os().nth(1).is_some_and(|a| a == "run") {
        use clap::{Args, FromArgMatches};
        let cmd = RunArgs::augment_args(
            clap::Command::new("run").bin_name("cordon run").about("Run a command under a sandbox mode."),
        );
        let parsed = cmd.try_get_matches_from(std::env::args_os().skip(1)).and_then(|m| RunArgs::from_arg_matches(&m));
        return match parsed {
            Ok(args) => run(args),
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
        Sub::Run(args) => run(*args),
        Sub::Probe { json } => probe(json),
        Sub::Session(cmd) => session_cmd(cmd),
        Sub::Doctor { json } => doctor(json),
        Sub::Serve(args) => cordon::serve::main(args),
        Sub::Mcp(args) => cordon::mcp::main(args),
    }
}

fn error_exit(e: &CordonError, json: bool) -> ExitCode {
    errln!("cordon: error[{}]: {}", e.code(), e);
    if json {
        let mut obj = serde_json::json!({ "error": { "code": e.code(), "message": e.to_string() } });
        let reasons = e.runner_reasons();
        if !reasons.is_empty() {
            obj["error"]["reasons"] = serde_json::to_value(reasons).unwrap_or_default();
        }
        outln!("{obj}");
    }
    ExitCode::from(match e {
        CordonError::ProgramNotFound { .. } => EXIT_NOT_FOUND,
        CordonError::ProgramNotExecutable { .. } | CordonError::ArgumentListTooLong { .. } => EXIT_NOT_EXECUTABLE,
        _ => EXIT_SETUP_FAILED,
    })
}

fn run(args: RunArgs) -> ExitCode {
    let json = args.json;
    let governance = Governance::from_args(&args);
    if args.ask && args.stdin && std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        // The command would hold the terminal the question is asked on.
        errln!(
            "cordon: error: --ask with --stdin on a terminal would hand the command the terminal cordon asks on; \
             redirect stdin from a file or pipe, or use --approver"
        );
        return ExitCode::from(2);
    }
    let command = match (args.shell, args.argv.is_empty()) {
        (Some(s), _) => Command::Shell(s),
        (None, false) => Command::Argv(args.argv),
        (None, true) => {
            errln!("cordon: error: no command given (usage: cordon run [OPTIONS] -- PROGRAM [ARGS...])");
            return ExitCode::from(2);
        }
    };
    let mut req = Request::new(command);
    req.workdir = args.policy.cwd.clone();
    req.timeout = args.timeout;
    req.output_cap = args.output_cap;
    req.limits = args.limits.request();
    req.spill_cap = args.spill_cap;
    req.env = args.env;
    req.stdin = if args.stdin { Stdin::Inherit } else { Stdin::Null };
    // Under --ask the first run never writes to the terminal: its output is captured,
    // so nothing it prints can still be in force (or on screen) when cordon asks.
    req.output = if json || args.ask { Output::Capture } else { Output::Inherit };
    req.runner = args.runner;
    req.policy = args.policy.request();
    if governance.active() {
        return run_governed(req, governance, json);
    }
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return error_exit(&CordonError::Io { what: "starting the runtime".into(), source: e }, json),
    };
    let gone = StdoutWatch::default();
    let abort = gone.abort_on_signal_or_gone(json);
    let outcome = rt.block_on(async move {
        let exec = Executor::new(ExecutorConfig::default())?;
        let spec = exec.resolve(req)?;
        exec.run_until(spec, abort).await
    });
    match outcome {
        Ok(result) => {
            if json && !gone.deliver(&result, &[&result]) {
                return ExitCode::from(EXIT_STDOUT_GONE);
            }
            ExitCode::from((result.shell_status() & 0xff) as u8)
        }
        Err(e) => error_exit(&e, json),
    }
}

/// Whether `--json` output still has a reader.
#[derive(Debug, Default, Clone)]
struct StdoutWatch {
    gone: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl StdoutWatch {
    /// The run's abort: SIGINT/SIGTERM/SIGHUP, or (with `json`) stdout's reader gone.
    fn abort_on_signal_or_gone(&self, json: bool) -> impl std::future::Future<Output = ()> + 'static {
        let gone = self.gone.clone();
        async move {
            if !json {
                return interrupted().await;
            }
            tokio::select! {
                _ = interrupted() => {}
                _ = stdout_gone() => gone.store(true, std::sync::atomic::Ordering::SeqCst),
            }
        }
    }

    /// Print the result line; when stdout is gone (seen by the watch or by the write),
    /// remove the spill files of `results` (their paths reach nobody) and say so.
    fn deliver(&self, value: &impl serde::Serialize, results: &[&cordon::RunResult]) -> bool {
        let mut ok = !self.gone.load(std::sync::atomic::Ordering::SeqCst);
        if ok {
            let mut out = std::io::stdout().lock();
            ok = serde_json::to_writer(&mut out, value).is_ok() && out.write_all(b"\n").is_ok() && out.flush().is_ok();
        }
        if !ok {
            for r in results {
                for p in [&r.stdout.spill_path, &r.stderr.spill_path].into_iter().flatten() {
                    let _ = std::fs::remove_file(p);
                }
            }
            eprintln!("cordon: stdout is closed; the run was stopped and its result dropped");
        }
        ok
    }
}

/// Resolves when fd 1 reports `POLLERR` or `POLLHUP`: the reader of a pipe or socket
/// closed its end. Never resolves for a file or a terminal that stays open. A thread
/// blocks in `poll` (no events requested: errors and hang-ups are always reported).
async fn stdout_gone() {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let watcher = std::thread::Builder::new().name("stdout-watch".into()).spawn(move || {
        let stdout = std::io::stdout();
        loop {
            let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {
                    let r = fds[0].revents().unwrap_or(PollFlags::empty());
                    if r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP) {
                        let _ = tx.send(());
                        return;
                    }
                    if r.contains(PollFlags::POLLNVAL) {
                        return;
                    }
                }
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return,
            }
        }
    });
    if watcher.is_ok() && rx.await.is_ok() {
        return;
    }
    std::future::pending::<()>().await
}

/// The `cordon run` flags that bring in a session or escalation (docs/escalation.md).
struct Governance {
    mode: Option<Mode>,
    session: Option<PathBuf>,
    ask: bool,
    approver: Option<PathBuf>,
    audit_log: Option<PathBuf>,
    escalate_to: Option<Mode>,
    justification: Option<String>,
    bind_script: bool,
}

impl Governance {
    fn from_args(a: &RunArgs) -> Governance {
        Governance {
            mode: a.policy.mode,
            session: a.session.clone(),
            ask: a.ask,
            approver: a.approver.clone(),
            audit_log: a.audit_log.clone(),
            escalate_to: a.escalate_to,
            justification: a.justification.clone(),
            bind_script: a.bind_script,
        }
    }

    fn active(&self) -> bool {
        self.session.is_some() || self.ask || self.approver.is_some()
    }
}

/// Print an error (and, with --json, `{"error": ..., "escalation": ...}`).
fn governed_fail(code: &str, message: &str, escalation: Option<serde_json::Value>, json: bool, exit: u8) -> ExitCode {
    errln!("cordon: error[{code}]: {message}");
    if json {
        let mut obj = serde_json::json!({ "error": { "code": code, "message": message } });
        if let Some(e) = escalation {
            obj["escalation"] = e;
        }
        outln!("{obj}");
    }
    ExitCode::from(exit)
}

/// `cordon run` with --session, --ask or --approver.
fn run_governed(mut req: Request, g: Governance, json: bool) -> ExitCode {
    use cordon::escalation::{self as esc, EscalationError, Verdict};
    use cordon::session::{self, GoverningKind};
    let fail = |code: &str, message: String| governed_fail(code, &message, None, json, EXIT_SETUP_FAILED);
    let live = req.output == Output::Inherit || (g.ask && !json);
    let mut opts = esc::EscalationOptions {
        up_front: g.escalate_to,
        justification: g.justification.clone(),
        bind_files: g.bind_script,
        retry_output: live.then_some(Output::Inherit),
        ..Default::default()
    };
    if let Some(file) = &g.session {
        let events = match session::read_events(file) {
            Ok(e) => e,
            Err(e) => return fail(e.code(), e.to_string()),
        };
        let mode = session::effective_mode(session::DEFAULT_SESSION_MODE, &events);
        req.policy.mode = session::narrow(mode, g.mode);
        if req.policy.mode < g.mode.unwrap_or(mode) {
            errln!("cordon: --mode {} narrowed to the session's mode {mode}", g.mode.unwrap_or(mode));
        }
        opts.governing.add(GoverningKind::SessionFile, file);
    }
    let approver: Option<Box<dyn esc::Approver>> = match &g.approver {
        _ if g.ask => Some(Box::new(esc::TerminalApprover::default())),
        // The program and its interpreter are governing files through the approver.
        Some(p) => match esc::ProgramApprover::find(p) {
            Ok(a) => Some(Box::new(a)),
            Err(e) => return fail("APPROVER_NOT_FOUND", format!("approver program `{}`: {e}", p.display())),
        },
        None => None,
    };
    let audit = match (&approver, g.audit_log.clone().or_else(esc::AuditLog::default_path)) {
        (None, _) => None,
        (Some(_), Some(path)) => {
            opts.governing.add(GoverningKind::AuditLog, &path);
            Some(esc::AuditLog::new(path))
        }
        (Some(_), None) => {
            return fail("AUDIT_LOG_FAILED", "no place for the audit log: pass --audit-log FILE or set HOME".into())
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return error_exit(&CordonError::Io { what: "starting the runtime".into(), source: e }, json),
    };
    let gone = StdoutWatch::default();
    let abort = gone.abort_on_signal_or_gone(json);
    let outcome = rt.block_on(async {
        let exec = Executor::new(ExecutorConfig::default())?;
        match &approver {
            Some(a) => esc::run_with_escalation_until(&exec, req, a.as_ref(), &opts, audit.as_ref(), abort).await,
            None => {
                let spec = exec.resolve(req)?;
                opts.governing.refuse_under(exec.state_dir());
                opts.governing.check(&spec.policy)?;
                let first = exec.run_until(spec, abort).await?;
                Ok(esc::EscalatedOutcome { first: Some(first), escalation: None, not_offered: None, retry: None })
            }
        }
    });
    let outcome = match outcome {
        Ok(o) => o,
        Err(EscalationError::Cordon(e)) => return error_exit(&e, json),
        Err(e) => return fail(e.code(), e.to_string()),
    };
    // The first run was captured for --ask: show it now that the decision is made
    // (a granted retry has already streamed its own output instead).
    if g.ask && !json && !outcome.retry.as_ref().is_some_and(|r| r.is_ok()) {
        if let Some(first) = &outcome.first {
            replay(&first.stdout, &mut std::io::stdout());
            replay(&first.stderr, &mut std::io::stderr());
        }
    }
    if let Some(rec) = &outcome.escalation {
        let verdict = if rec.decision.verdict == Verdict::Granted { "granted" } else { "refused" };
        errln!("cordon: escalation to {} {verdict} ({})", rec.request.to, esc::printable(&rec.decision.reason));
    }
    if let Some(why) = &outcome.not_offered {
        errln!("cordon: no escalation offered: {}", esc::printable(why));
    }
    let report = outcome.report();
    if let Some(Err(e)) = &outcome.retry {
        let exit = match e {
            CordonError::ProgramNotFound { .. } => EXIT_NOT_FOUND,
            CordonError::ProgramNotExecutable { .. } | CordonError::ArgumentListTooLong { .. } => EXIT_NOT_EXECUTABLE,
            _ => EXIT_SETUP_FAILED,
        };
        return governed_fail(e.code(), &e.to_string(), report, json, exit);
    }
    let Some(result) = outcome.result() else {
        let msg = "escalation refused; nothing ran";
        return governed_fail("ESCALATION_REFUSED", msg, report, json, EXIT_SETUP_FAILED);
    };
    if json {
        let mut value = serde_json::to_value(result).unwrap_or_default();
        if let Some(r) = report {
            value["escalation"] = r;
        }
        let all: Vec<&cordon::RunResult> =
            outcome.first.iter().chain(outcome.retry.iter().filter_map(|r| r.as_ref().ok())).collect();
        if !gone.deliver(&value, &all) {
            return ExitCode::from(EXIT_STDOUT_GONE);
        }
    }
    ExitCode::from((result.shell_status() & 0xff) as u8)
}

/// Write `value` as one JSON line on stdout. A closed pipe (`| head`) is not an error:
/// the reader has gone, and the exit status stays the command's.
fn print_json(value: &impl serde::Serialize) {
    let mut line = serde_json::to_vec(value).unwrap_or_default();
    line.push(b'\n');
    let _ = emit(&line);
}

/// Write `bytes` to stdout and flush. `Err` only for a closed pipe (`EPIPE`), which
/// callers treat as a quiet end of output rather than a panic (`println!` would panic:
/// cordon ignores `SIGPIPE`).
fn emit(bytes: &[u8]) -> Result<(), std::io::Error> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes).and_then(|_| out.flush())
}

/// Print a captured stream of the first run (its complete spill file when the tail was
/// truncated) to `to`; a closed pipe ends it quietly.
fn replay(stream: &cordon::result::CollectedOutput, to: &mut dyn Write) {
    let spilled =
        stream.truncated.then(|| stream.spill_path.as_ref().and_then(|p| std::fs::File::open(p).ok())).flatten();
    let _ = match spilled {
        Some(mut f) => std::io::copy(&mut f, to).map(drop),
        None => to.write_all(stream.text.as_bytes()),
    };
    let _ = to.flush();
}

/// `cordon session set-mode` / `cordon session show`.
fn session_cmd(cmd: SessionCmd) -> ExitCode {
    use cordon::escalation::printable;
    use cordon::session::{self, SessionChange, SessionError, DEFAULT_SESSION_MODE};
    let fail = |e: SessionError| {
        errln!("cordon: error[{}]: {e}", e.code());
        ExitCode::FAILURE
    };
    match cmd {
        SessionCmd::SetMode { file, mode } => {
            // Appending to a corrupt log would hide the corruption behind a valid line.
            match session::read_events(&file) {
                Ok(_) | Err(SessionError::NotFound { .. }) => {}
                Err(e) => return fail(e),
            }
            match session::append_event(&file, &session::SessionEvent::set_mode(mode)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            }
        }
        SessionCmd::Show { file, json } => {
            let events = match session::read_events(&file) {
                Ok(e) => e,
                Err(e) => return fail(e),
            };
            let mode = session::effective_mode(DEFAULT_SESSION_MODE, &events);
            if json {
                let obj = serde_json::json!({
                    "file": file, "effective_mode": mode, "default_mode": DEFAULT_SESSION_MODE, "events": events,
                });
                print_json(&obj);
            } else {
                let mut text = format!("effective mode: {mode}\n");
                text.push_str(&format!("history ({} events, starting from {DEFAULT_SESSION_MODE}):\n", events.len()));
                for e in &events {
                    match &e.change {
                        SessionChange::SetMode { mode } => {
                            text.push_str(&format!("  {}  set-mode {mode}\n", printable(&e.at)))
                        }
                    }
                }
                // A closed pipe (`| head`) ends the output quietly.
                let _ = emit(text.as_bytes());
            }
            ExitCode::SUCCESS
        }
    }
}

/// Resolves when cordon receives SIGINT, SIGTERM or SIGHUP (the command is aborted).
async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) =
        (signal(SignalKind::interrupt()), signal(SignalKind::terminate()), signal(SignalKind::hangup()))
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
}

fn doctor(json: bool) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return error_exit(&CordonError::Io { what: "starting the runtime".into(), source: e }, json),
    };
    let report = rt.block_on(cordon::doctor::diagnose());
    if json {
        outln!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        out!("{}", cordon::doctor::render(&report));
    }
    if report.confined_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn probe(json: bool) -> ExitCode {
    let host = HostFacts::detect();
    let report = probe_report(&host);
    if json {
        outln!("{report}");
    } else {
        print_probe(&host, &report);
    }
    ExitCode::SUCCESS
}

fn sample_policy(mode: Mode) -> ExecutionPolicy {
    ExecutionPolicy {
        mode,
        workspace: std::env::current_dir().unwrap_or_else(|_| "/".into()),
        writable_roots: Vec::new(),
        protected: vec![PathBuf::from(".git")],
        network: false,
        best_effort: false,
        allow_unix_sockets: Vec::new(),
    }
}

fn probe_report(host: &HostFacts) -> serde_json::Value {
    let runners: Vec<serde_json::Value> =
        [RunnerKind::Landlock, RunnerKind::Bwrap, RunnerKind::Seatbelt, RunnerKind::Passthrough]
            .into_iter()
            .map(|kind| {
                let status = probe_runner(kind, host);
                let modes: Vec<serde_json::Value> = Mode::ALL
                    .into_iter()
                    .filter(|m| (*m == Mode::FullAccess) == (kind == RunnerKind::Passthrough))
                    .map(|mode| {
                        let enforcement = match status {
                            ProbeStatus::Available => {
                                serde_json::to_value(runner::runner_for(kind).enforcement(&sample_policy(mode), host))
                                    .unwrap_or_default()
                            }
                            _ => serde_json::Value::Null,
                        };
                        serde_json::json!({ "mode": mode, "enforcement": enforcement })
                    })
                    .collect();
                serde_json::json!({ "runner": kind, "probe": status, "modes": modes })
            })
            .collect();
    let auto: Vec<serde_json::Value> = Mode::ALL
        .into_iter()
        .map(|mode| match runner::select(&sample_policy(mode), host, RunnerChoice::Auto) {
            Ok(sel) => serde_json::json!({ "mode": mode, "runner": sel.runner, "enforcement": sel.enforcement }),
            Err(e) => serde_json::json!({ "mode": mode, "error": { "code": e.code(), "message": e.to_string() } }),
        })
        .collect();
    serde_json::json!({
        "host": {
            "os": host.os,
            "landlock_abi": host.landlock_abi,
            "kernel_landlock_abi": host.kernel_landlock_abi,
            "landlock_abi_cap": host.landlock_abi_cap,
            "seccomp": host.seccomp,
            "root": host.is_root(),
            "euid": host.euid,
            "namespaces": host.namespaces,
            "user_namespaces": matches!(host.namespaces, cordon::host::Namespaces::UserNamespace) || (host.is_root() && host.namespaces.available()),
            "mount_namespaces": host.namespaces.available(),
            "bwrap": host.bwrap,
        },
        "runners": runners,
        "auto": auto,
        "limits": cordon::limits::probe_host(host.euid),
    })
}

fn print_probe(host: &HostFacts, report: &serde_json::Value) {
    outln!("host");
    outln!("  os:               {}", host.os);
    match host.landlock_abi_cap {
        Some(cap) => {
            outln!("  landlock ABI:     {} (kernel {}, capped to {cap})", host.landlock_abi, host.kernel_landlock_abi)
        }
        None => outln!("  landlock ABI:     {}", host.landlock_abi),
    }
    outln!("  seccomp:          {}", if host.seccomp { "yes" } else { "no" });
    outln!("  root:             {}", if host.is_root() { "yes" } else { "no" });
    let ns = match &host.namespaces {
        cordon::host::Namespaces::Direct => "yes (as root)".to_string(),
        cordon::host::Namespaces::UserNamespace => "yes (user namespace)".to_string(),
        cordon::host::Namespaces::Unavailable { reason } => format!("no: {reason}"),
    };
    outln!("  namespaces:       {ns}");
    outln!("  bwrap:            {}", host.bwrap.as_ref().map_or("not found".into(), |p| p.display().to_string()));
    let l = &report["limits"];
    outln!("resource limits (defaults; mechanism)");
    outln!("  memory:           {} bytes; {}", l["memory"], l["memory_by"].as_str().unwrap_or("?"));
    outln!("  pids:             {}; {}", l["pids"], l["pids_by"].as_str().unwrap_or("?"));
    outln!("  cpu:              none by default; {} (per process)", l["cpu_by"].as_str().unwrap_or("?"));
    for g in l["gaps"].as_array().into_iter().flatten() {
        outln!("    gap {}: {}", g["restriction"].as_str().unwrap_or("?"), g["reason"].as_str().unwrap_or(""));
    }
    outln!("runners");
    for r in report["runners"].as_array().into_iter().flatten() {
        let status = match &r["probe"]["status"] {
            serde_json::Value::String(s) if s == "available" => "available".to_string(),
            serde_json::Value::String(s) => format!("{s}: {}", r["probe"]["reason"].as_str().unwrap_or("")),
            _ => "?".into(),
        };
        outln!("  {:<12} {status}", r["runner"].as_str().unwrap_or("?"));
        for m in r["modes"].as_array().into_iter().flatten() {
            if m["enforcement"].is_null() {
                continue;
            }
            outln!(
                "    {:<16} {}",
                m["mode"].as_str().unwrap_or("?"),
                m["enforcement"]["level"].as_str().unwrap_or("?")
            );
            for g in m["enforcement"]["gaps"].as_array().into_iter().flatten() {
                outln!(
                    "      gap {}: {}",
                    g["restriction"].as_str().unwrap_or("?"),
                    g["reason"].as_str().unwrap_or("")
                );
            }
        }
    }
    outln!("auto selection");
    for a in report["auto"].as_array().into_iter().flatten() {
        match a.get("runner") {
            Some(r) => outln!(
                "  {:<16} {} ({})",
                a["mode"].as_str().unwrap_or("?"),
                r.as_str().unwrap_or("?"),
                a["enforcement"]["level"].as_str().unwrap_or("?")
            ),
            None => {
                outln!("  {:<16} {}", a["mode"].as_str().unwrap_or("?"), a["error"]["code"].as_str().unwrap_or("?"))
            }
        }
    }
}
