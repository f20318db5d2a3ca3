//! Governed runs of `cordon run`: a session file's mode overrides and standing grants,
//! and one-shot escalation (`--ask`, `--approver`), with every decision announced and
//! recorded (docs/escalation.md).

use super::run::{cli_config, print_live_notes, replay, RunArgs, StdoutWatch};
use super::{error_exit, EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_SETUP_FAILED, EXIT_STDOUT_GONE};
use cordon::error::CordonError;
use cordon::mode::Mode;
use cordon::request::{Output, Request};
use cordon::Executor;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// The `cordon run` flags that bring in a session or escalation (docs/escalation.md).
pub(crate) struct Governance {
    mode: Option<Mode>,
    session: Option<PathBuf>,
    ask: bool,
    approver: Option<PathBuf>,
    audit_log: Option<PathBuf>,
    escalate_to: Option<Mode>,
    justification: Option<String>,
    bind_script: bool,
    quiet: bool,
}

impl Governance {
    pub(crate) fn from_args(a: &RunArgs) -> Governance {
        Governance {
            mode: a.policy.mode,
            session: a.session.clone(),
            ask: a.ask,
            approver: a.approver.clone(),
            audit_log: a.audit_log.clone(),
            escalate_to: a.escalate_to,
            justification: a.justification.clone(),
            bind_script: a.bind_script,
            quiet: a.quiet,
        }
    }

    pub(crate) fn active(&self) -> bool {
        self.session.is_some() || self.ask || self.approver.is_some()
    }
}

/// Print an error (and, with --json, `{"error": ..., "escalation": ...}`).
pub(crate) fn governed_fail(
    code: &str,
    message: &str,
    escalation: Option<serde_json::Value>,
    json: bool,
    exit: u8,
) -> ExitCode {
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
pub(crate) fn run_governed(mut req: Request, g: Governance, json: bool) -> ExitCode {
    use cordon::escalation::{self as esc, EscalationError};
    use cordon::session::{self, GoverningKind};
    let fail = |code: &str, message: String| governed_fail(code, &message, None, json, EXIT_SETUP_FAILED);
    let live = req.output == Output::Inherit || (g.ask && !json);
    let mut opts = esc::EscalationOptions {
        up_front: g.escalate_to,
        justification: g.justification.clone(),
        bind_files: g.bind_script,
        retry_output: live.then_some(Output::Inherit),
        // The first run's writes are held back while an approver may be asked.
        hold_writes: true,
        ..Default::default()
    };
    if let Some(file) = &g.session {
        let events = match session::read_events(file) {
            Ok(e) => e,
            Err(e) => return fail(e.code(), e.to_string()),
        };
        let mode = session::effective_mode(session::DEFAULT_SESSION_MODE, &events);
        req.policy.mode = session::narrow(mode, g.mode);
        // Standing grants: each opens its one thing for confined calls, nothing else.
        if req.policy.mode.is_confined() {
            for grant in session::standing_grants(&events) {
                match grant {
                    esc::Grant::Network => req.policy.network = true,
                    esc::Grant::Write { path } => req.policy.unprotected.push(path),
                    esc::Grant::Host { host } => {
                        if let Ok(exact) = host.parse::<cordon::proxy::HostPort>() {
                            req.policy.allow_hosts.push(exact.pattern());
                        }
                    }
                }
            }
        }
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
    // The decision line goes out right before a granted run starts, so the retry's
    // output follows it; otherwise (refused, or the retry did not start) at the end.
    let approver = approver.map(|inner| Announcing { inner, announced: Default::default() });
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
    let abort = gone.abort_on_signal_or_gone(json, true);
    let outcome = rt.block_on(async {
        let exec = Executor::new(cli_config())?;
        match &approver {
            Some(a) => esc::run_with_escalation_until(&exec, req, a, &opts, audit.as_ref(), abort).await,
            None => {
                let spec = exec.resolve(req)?;
                opts.governing.refuse_under(exec.state_dir());
                opts.governing.check(&spec.policy)?;
                let first = exec.run_until(spec, abort).await?;
                Ok(esc::EscalatedOutcome { first: Some(first), escalation: None, not_offered: None, retry: None })
            }
        }
    });
    // As in `run`: the runs are over, a signal now ends cordon at once.
    #[cfg(target_os = "linux")]
    cordon_stage::signals::restore_default(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP]);
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
    let announced = approver.as_ref().is_some_and(|a| a.announced.load(std::sync::atomic::Ordering::SeqCst));
    if let Some(rec) = outcome.escalation.as_ref().filter(|_| !announced) {
        errln!("{}", decision_line(rec, false));
    }
    // The first run's held-back writes were dropped when a grant was asked for.
    let dropped = outcome
        .first
        .as_ref()
        .and_then(|f| f.held.as_ref())
        .filter(|h| h.fate == cordon::layer::Fate::Discarded && !h.changes.is_empty());
    if let Some(h) = dropped {
        errln!(
            "cordon: the first run's {} change(s) to the workspace were held back and dropped; it is as it was before \
             the command",
            h.changes.len()
        );
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
    } else if !g.quiet {
        print_live_notes(result);
    }
    ExitCode::from((result.shell_status() & 0xff) as u8)
}

/// The stderr line saying what was decided (escaped); `starting`: the granted run
/// starts now.
fn decision_line(rec: &cordon::escalation::EscalationRecord, starting: bool) -> String {
    use cordon::escalation::{printable, Trigger, Verdict};
    let verdict = if rec.decision.verdict == Verdict::Granted { "granted" } else { "refused" };
    let asked = match &rec.request.grant {
        Some(grant) => format!("grant `{}` for one retry", printable(&grant.to_string())),
        None => format!("escalation to {}", rec.request.to),
    };
    let next = match (starting, rec.request.trigger) {
        (false, _) => "",
        (true, Trigger::Denied) => "; running the command once more",
        (true, Trigger::UpFront) => "; running the command",
    };
    format!("cordon: {asked} {verdict} ({}){next}", printable(&rec.decision.reason))
}

/// The CLI's approver: the chosen one, plus the decision line printed right before a
/// granted run starts.
struct Announcing {
    inner: Box<dyn cordon::escalation::Approver>,
    announced: std::sync::atomic::AtomicBool,
}

impl cordon::escalation::Approver for Announcing {
    fn info(&self) -> cordon::escalation::ApproverInfo {
        self.inner.info()
    }

    fn decide<'a>(
        &'a self,
        req: &'a cordon::escalation::EscalationRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = cordon::escalation::Decision> + Send + 'a>> {
        self.inner.decide(req)
    }

    fn governing(&self) -> Vec<(cordon::session::GoverningKind, PathBuf)> {
        self.inner.governing()
    }

    fn first_run(&self, result: &cordon::RunResult) {
        self.inner.first_run(result)
    }

    fn retry_starts(&self, record: &cordon::escalation::EscalationRecord) {
        self.inner.retry_starts(record);
        errln!("{}", decision_line(record, true));
        self.announced.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}
