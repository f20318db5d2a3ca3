//! `cordon run`: flags to a request, the run (or the governed run: session,
//! approvers, escalation), the result as JSON or the command's own output and status.

use super::governed::{run_governed, Governance};
use super::{error_exit, EXIT_STDOUT_GONE};
use cordon::error::CordonError;
use cordon::flags::{parse_mode, PolicyArgs};
use cordon::mode::Mode;
use cordon::request::{Command, ExecutorConfig, Output, Request, Stdin};
use cordon::runner::RunnerChoice;
use cordon::serve::stdout_gone;
use cordon::Executor;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args, Debug)]
#[command(about = "Run a command under a sandbox mode", long_about = None, trailing_var_arg = true, group = clap::ArgGroup::new("approval").args(["ask", "approver"]))]
pub(crate) struct RunArgs {
    /// Mode, workspace, writable roots, network, unix sockets, best effort.
    #[command(flatten)]
    pub(crate) policy: PolicyArgs,
    /// Runner: auto, landlock, bwrap, seatbelt or passthrough.
    // Listed right after --mode (ties in display order sort by name).
    #[arg(long, default_value = "auto", value_parser = parse_runner, display_order = 0)]
    runner: RunnerChoice,
    /// Deadline in seconds (default 120; any length: unlike `serve` and `mcp`, whose
    /// requests are capped by `--max-timeout`, the command line has no cap).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    timeout: Option<Duration>,
    /// Print nothing of cordon's own after the command's output (live mode: denials,
    /// a deadline, a limit or an enforcement gap are otherwise one line each on stderr).
    #[arg(long, short = 'q')]
    pub(crate) quiet: bool,
    /// Observe write-intent path syscalls for evidence of refused writes: on (default)
    /// or off (faster file-creation-heavy work; refused writes are then not reported).
    /// Enforcement is the same, except without a mount namespace: there the observer
    /// also refuses writes into protected paths (`.git`) as a best effort, which off
    /// drops (the result declares `protected-paths` a gap there either way).
    #[arg(long, value_name = "on|off", value_parser = parse_on_off, default_value = "on", action = clap::ArgAction::Set)]
    observe_writes: bool,
    #[command(flatten)]
    limits: cordon::limits::LimitArgs,
    /// Capture output and print one JSON result object on stdout.
    #[arg(long)]
    json: bool,
    /// In-memory tail per stream, in bytes (with --json; default 65536, at most 16777216;
    /// more is an error).
    #[arg(long, value_name = "BYTES")]
    output_cap: Option<usize>,
    /// Spill-file bytes per stream (with --json; K, M, G suffixes; default 1G, at most
    /// 4G, more is an error; 0: no file). Past it the file keeps the head and
    /// `spill_truncated` is set.
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
    pub(crate) session: Option<PathBuf>,
    /// When the sandbox denied something, ask on the terminal (/dev/tty) for one retry
    /// at the next wider mode (the default answer is no).
    #[arg(long)]
    pub(crate) ask: bool,
    /// Like --ask, but ask PROGRAM: the request as JSON on its stdin, exit 0 grants.
    /// It runs unsandboxed, as your policy agent.
    #[arg(long, value_name = "PROGRAM")]
    pub(crate) approver: Option<PathBuf>,
    /// Append every escalation decision here (JSON lines; default
    /// $XDG_STATE_HOME/cordon/audit.jsonl or ~/.local/state/cordon/audit.jsonl).
    #[arg(long, value_name = "FILE", requires = "approval")]
    pub(crate) audit_log: Option<PathBuf>,
    /// Ask up front for this strictly wider mode; nothing runs unless it is granted.
    #[arg(long, value_name = "MODE", value_parser = parse_mode, requires = "approval")]
    pub(crate) escalate_to: Option<Mode>,
    /// Why the wider mode is needed (shown to the approver and logged).
    #[arg(long, value_name = "TEXT", requires = "approval")]
    pub(crate) justification: Option<String>,
    /// Bind the approval to the contents of every file the command names, wherever it
    /// lies, and refuse commands whose file names are not plain words. Without it, the
    /// named files inside the workspace and writable roots are bound (e.g. the script
    /// in `bash build.sh`): they enter the fingerprint, and the retry is refused if one
    /// changed after the approval.
    #[arg(long, requires = "approval")]
    pub(crate) bind_script: bool,
    /// Run with the command's writes to the workspace and writable roots held back in
    /// a private layer, list them (`held` in the JSON, one line each on stderr in live
    /// mode), and drop them: the host is left as it was. Refused where no layer can be
    /// had (workspace-write on Linux with overlayfs only).
    #[arg(long, conflicts_with_all = ["ask", "approver", "escalate_to"])]
    preview: bool,
    /// Keep the private caches in DIR across runs instead of discarding them with the
    /// run: what runs add to ~/.cache and the toolchain homes (~/.cargo, ~/go, ~/.npm)
    /// is kept in DIR/layers, and the cache variables without such a home point into
    /// DIR/caches, which becomes writable. A directory you own, outside the workspace
    /// and writable roots, not a system or home-configuration directory
    /// (workspace-write only).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Run a shell string with bash -c instead of PROGRAM ARGS.
    #[arg(short = 'c', long = "shell", value_name = "STRING", conflicts_with = "argv")]
    shell: Option<String>,
    /// The program and its arguments (after `--`).
    #[arg(value_name = "PROGRAM", num_args = 0..)]
    argv: Vec<OsString>,
}

pub(crate) fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("expected `on` or `off`, got `{s}`")),
    }
}

pub(crate) fn parse_runner(s: &str) -> Result<RunnerChoice, String> {
    s.parse()
}

pub(crate) fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.parse().map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("timeout must be a positive number of seconds, got `{s}`"));
    }
    Ok(Duration::from_secs_f64(secs.min(1e9)))
}

/// A byte count: digits with an optional binary suffix K, M or G (case-insensitive).
pub(crate) fn parse_bytes(s: &str) -> Result<u64, String> {
    let (digits, shift) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 10),
        Some((i, 'm' | 'M')) => (&s[..i], 20),
        Some((i, 'g' | 'G')) => (&s[..i], 30),
        _ => (s, 0),
    };
    let n: u64 = digits.parse().map_err(|_| format!("`{s}` is not a byte count (digits, then K, M or G)"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("`{s}` is too large"))
}

pub(crate) fn parse_env(s: &str) -> Result<(String, String), String> {
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

pub(crate) fn run(args: RunArgs) -> ExitCode {
    let json = args.json;
    let quiet = args.quiet;
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
    req.observe_writes = args.observe_writes;
    req.cache_dir = args.cache_dir.clone();
    req.policy = args.policy.request();
    if governance.active() {
        return run_governed(req, governance, json);
    }
    let preview = args.preview;
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return error_exit(&CordonError::Io { what: "starting the runtime".into(), source: e }, json),
    };
    let gone = StdoutWatch::default();
    // Ctrl-C (SIGINT) is the command's to handle: it is delivered to its process
    // group; SIGTERM and SIGHUP abort the run (and, with --json, a reader gone).
    let abort = gone.abort_on_signal_or_gone(json, preview);
    let interrupts = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = interrupts.clone();
    let outcome = rt.block_on(async move {
        cordon::phases::mark("runtime");
        let sigint = interrupt_counter(counted);
        let exec = Executor::new(cli_config())?;
        cordon::phases::mark("stale_sweep");
        let spec = exec.resolve(req)?;
        if preview {
            // Nothing may reach the host: refused before anything runs where the
            // writes could not be held back. Ctrl-C aborts a preview.
            exec.can_hold(&spec).map_err(|why| CordonError::PreviewUnavailable { why })?;
            let (mut result, held) = exec.run_held_until(spec, abort).await?;
            result.held = held.settle(cordon::layer::Fate::Preview);
            return Ok(result);
        }
        let result = exec.run_interruptible(spec, abort, sigint).await;
        cordon::phases::mark("result");
        result
    });
    // Nothing of the run is left to clean up: a signal now ends cordon at once, even
    // while it writes to a reader that stopped reading.
    #[cfg(target_os = "linux")]
    cordon_stage::signals::restore_default(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP]);
    let interrupted = interrupts.load(std::sync::atomic::Ordering::SeqCst) > 0;
    match outcome {
        Ok(result) => {
            if json && !gone.deliver(&result, &[&result]) {
                return ExitCode::from(EXIT_STDOUT_GONE);
            }
            if !json && !quiet {
                print_live_notes(&result);
                if let Some(held) = &result.held {
                    print_held(held);
                }
            }
            cordon::phases::mark("print");
            if let Some(phases) = cordon::phases::report() {
                errln!("{phases}");
            }
            end_like(&result, interrupted)
        }
        Err(e) => error_exit(&e, json),
    }
}

/// The executor's configuration for `cordon run`: the defaults, without a cap on the
/// deadline (the caller is the one who chose it; the default stays 120 s).
pub(crate) fn cli_config() -> ExecutorConfig {
    ExecutorConfig { max_timeout: cordon::request::NO_TIMEOUT_CAP, ..ExecutorConfig::default() }
}

/// cordon's exit status: the command's. A command that died of SIGINT (Ctrl-C) ends
/// cordon by SIGINT too, so that a calling shell stops its loop as it would for the
/// command itself (bash does only for a child that died of SIGINT). Under bubblewrap,
/// whose monitor reports a command's death by signal N as the status 128 + N, a 130
/// after cordon received SIGINT counts as that death.
pub(crate) fn end_like(result: &cordon::RunResult, interrupted: bool) -> ExitCode {
    let by_sigint = result.signal == Some(libc::SIGINT)
        || (interrupted
            && result.sandbox.runner == cordon::runner::RunnerKind::Bwrap
            && result.exit_code == Some(128 + libc::SIGINT));
    if by_sigint {
        let _ = std::io::stdout().flush();
        #[cfg(target_os = "linux")]
        cordon_stage::signals::die_by(libc::SIGINT);
    }
    ExitCode::from((result.shell_status() & 0xff) as u8)
}

/// Counts SIGINT into `count` and publishes it as the run's interrupts. Call inside
/// the runtime (it registers the handler at once).
fn interrupt_counter(count: std::sync::Arc<std::sync::atomic::AtomicU32>) -> cordon::Interrupts {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = tokio::sync::watch::channel(0u32);
    match signal(SignalKind::interrupt()) {
        Ok(mut int) => {
            tokio::spawn(async move {
                while int.recv().await.is_some() {
                    let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    if tx.send(n).is_err() {
                        return;
                    }
                }
            });
        }
        // No handler: SIGINT keeps its default (it ends cordon, and the parent-death
        // signal ends the run).
        Err(_) => drop(tx),
    }
    rx
}

/// How long cordon's own lines after a live run may take to be written: a reader that
/// stopped reading (a stalled named FIFO as stderr) does not keep cordon waiting.
const NOTES_WRITE_BOUND: Duration = cordon::request::DRAIN_GRACE;

/// Live mode: cordon's own facts about the run, one line each, after its output,
/// written within [`NOTES_WRITE_BOUND`] (what is not written by then is dropped).
pub(crate) fn print_live_notes(result: &cordon::RunResult) {
    let notes = result.live_notes();
    if notes.is_empty() {
        return;
    }
    let text: String = notes.iter().map(|n| format!("{n}\n")).collect();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::Builder::new().name("cordon-notes".into()).spawn(move || {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
        let _ = tx.send(());
    });
    if writer.is_ok() {
        let _ = rx.recv_timeout(NOTES_WRITE_BOUND);
    }
}

/// Live mode: what a preview held back and dropped, one line per change (escaped).
fn print_held(held: &cordon::layer::HeldWrites) {
    use cordon::layer::ChangeKind;
    let mut err = std::io::stderr().lock();
    let n = held.changes.len();
    let _ = writeln!(err, "cordon: preview: {n} change(s), dropped; the host is unchanged");
    for c in &held.changes {
        let what = match c.change {
            ChangeKind::Created => "created",
            ChangeKind::Modified => "modified",
            ChangeKind::Removed => "removed",
        };
        let _ =
            writeln!(err, "cordon: would have {what} {}", cordon::escalation::printable(&c.path.display().to_string()));
    }
    if held.truncated {
        let _ = writeln!(err, "cordon: ... and more (the list is cut)");
    }
    for s in &held.skipped {
        let path = cordon::escalation::printable(&s.path.display().to_string());
        let _ = writeln!(err, "cordon: would not apply {path}: {}", cordon::escalation::printable(&s.why));
    }
}

/// Whether `--json` output still has a reader.
#[derive(Debug, Default, Clone)]
pub(crate) struct StdoutWatch {
    gone: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl StdoutWatch {
    /// The run's abort: SIGTERM/SIGHUP (and SIGINT with `sigint`), or (with `json`)
    /// stdout's reader gone.
    pub(crate) fn abort_on_signal_or_gone(
        &self,
        json: bool,
        sigint: bool,
    ) -> impl std::future::Future<Output = ()> + 'static {
        let gone = self.gone.clone();
        async move {
            if !json {
                return interrupted(sigint).await;
            }
            tokio::select! {
                _ = interrupted(sigint) => {}
                _ = stdout_gone() => gone.store(true, std::sync::atomic::Ordering::SeqCst),
            }
        }
    }

    /// Print the result line; when stdout is gone (seen by the watch or by the write),
    /// remove the spill files of `results` (their paths reach nobody) and say so.
    pub(crate) fn deliver(&self, value: &impl serde::Serialize, results: &[&cordon::RunResult]) -> bool {
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

/// Print a captured stream of the first run (its complete spill file when the tail was
/// truncated) to `to`; a closed pipe ends it quietly.
pub(crate) fn replay(stream: &cordon::result::CollectedOutput, to: &mut dyn Write) {
    let spilled =
        stream.truncated.then(|| stream.spill_path.as_ref().and_then(|p| std::fs::File::open(p).ok())).flatten();
    let _ = match spilled {
        Some(mut f) => std::io::copy(&mut f, to).map(drop),
        None => to.write_all(stream.text.as_bytes()),
    };
    let _ = to.flush();
}

/// Resolves when cordon receives SIGTERM or SIGHUP, or SIGINT with `sigint` (the
/// command is aborted).
pub(crate) async fn interrupted(sigint: bool) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut hup)) = (signal(SignalKind::terminate()), signal(SignalKind::hangup())) else {
        return std::future::pending().await;
    };
    let mut int = if sigint { signal(SignalKind::interrupt()).ok() } else { None };
    let int_recv = async {
        match int.as_mut() {
            Some(s) => s.recv().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = int_recv => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
}
