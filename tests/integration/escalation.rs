//! Escalation: one strictly wider retry of one exact call, granted by an approver.
//!
//! What it covers, through the library (`cordon::escalation`) and the CLI binary:
//! - granted: the retry runs once at the wider mode, judged by effect (a file outside
//!   the workspace appears only after the grant); read-only → workspace-write stays
//!   confined (outside writes still fail in the retry);
//! - refused: nothing re-ran (the effect is absent), the approver was asked once;
//! - not strictly wider: a typed error before anything runs, the approver never asked;
//! - `SANDBOX_UNAVAILABLE` never escalates (library and CLI), the approver never asked;
//! - up front: nothing runs until granted; a refusal runs nothing (`ESCALATION_REFUSED`);
//! - one shot: the next call is back at the session mode, the session log untouched;
//! - `--ask` through a pseudo-terminal (python3's `pty`): `y` grants; `n`, an empty
//!   line and end of input refuse; the prompt shows command, denials and proposed mode;
//! - `--approver`: the program reads exactly the request JSON; its exit status decides;
//!   its stdout cannot corrupt `--json`;
//! - every decision lands in the audit log (JSON lines), default path included;
//! - audit log and approver program inside a writable root are refused;
//! - issue 17, the approval layer under attack (`attack_*`, by effect, CLI cases as
//!   root and as `CORDON_TEST_USER`): an approver symlink swapped by the command, an
//!   `env python3` approver with a planted `python3` on a workspace `PATH`, a session
//!   re-pointed through a workspace symlink or to `/dev/null`, a spill file of forged
//!   events as the session, an audit log redirected, discarded or cut short, a script
//!   rewritten between the approval and the retry (`--bind-script`), a first run that
//!   tries to hide the `--ask` prompt (checked on a pty), and `session show` into a
//!   closed pipe.
//!
//! How a denial is produced: the commands end with `python3 -c '<x32 syscall>'`,
//! which cordon's seccomp supervisor refuses with ENOSYS and records in every confined
//! mode, and which merely fails, harmlessly, when unconfined (a write outside would
//! be the other way, but an unconfined retry would then write to the host). The effect
//! judged is always a file the command tries to write before that, and the command
//! exits with that write's status: a run that succeeds is never escalated (a grant
//! could not change its outcome), so the denied first run must fail.
//!
//! Cases that run confined commands print `SKIP <test>: <reason>` without a runner that
//! enforces the modes here (or off x86_64, or without python3), and fail instead when
//! `CORDON_MUST_ENFORCE=1`.

use crate::common::cli::{confined_unavailable, cordon, cordon_bin, CliOut};
use crate::common::{skip_or_fail, skip_regardless, temp_dir};
use cordon::escalation::{
    self, AuditLog, AuditRecord, Decision, EscalationError, EscalationOptions, EscalationRequest, Trigger, Verdict,
};
use cordon::session::{self, GoverningKind, SessionEvent};
use cordon::{Approver, CordonError, Executor, ExecutorConfig, HostFacts, Mode, Request};
use serde_json::Value;
use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Mutex;
use tempfile::TempDir;

/// Ends a shell command so that a confined run is denied with evidence (the supervisor
/// refuses an x32 syscall number with ENOSYS and records it) while an unconfined one
/// is not; either way the command exits with the status of what came before the tail.
const DENY_TAIL: &str = "s=$?; python3 -c 'import ctypes; ctypes.CDLL(None).syscall(0x40000027)'; exit $s";

// ------------------------------------------------------------------ skipping

/// Why confined escalation cases cannot be judged here, if they cannot.
fn cannot_judge() -> Option<String> {
    if !cfg!(target_arch = "x86_64") {
        return Some("the denial trigger (an x32 syscall) exists only on x86_64".into());
    }
    if which::which("python3").is_err() {
        return Some("no python3 (used for the denial trigger and the pseudo-terminal)".into());
    }
    confined_unavailable()
}

/// True when the case should return early (after a loud skip, or a failure under
/// `CORDON_MUST_ENFORCE=1`).
fn skip(test: &str) -> bool {
    match cannot_judge() {
        None => false,
        Some(reason) => {
            skip_or_fail(test, &reason);
            true
        }
    }
}

// ------------------------------------------------------------------ fixtures

struct Dirs {
    _root: TempDir,
    /// The workspace (cwd of the runs).
    ws: PathBuf,
    /// Outside every writable root: where effects of full-access runs land.
    out: PathBuf,
    /// Outside every writable root: session files, audit logs, approver scripts.
    gov: PathBuf,
}

fn dirs(tag: &str) -> Dirs {
    let root = temp_dir(&format!("esc-{tag}"));
    let base = root.path().canonicalize().unwrap();
    let [ws, out, gov] = ["ws", "out", "gov"].map(|d| base.join(d));
    for d in [&ws, &out, &gov] {
        std::fs::create_dir(d).unwrap();
    }
    Dirs { _root: root, ws, out, gov }
}

/// A shell command that writes `target` and then is denied when confined.
fn write_then_deny(target: &Path) -> String {
    format!("echo granted > '{}'; {DENY_TAIL}", target.display())
}

fn executor() -> Executor {
    Executor::new(ExecutorConfig::default()).expect("executor")
}

fn request(cmd: &str, cwd: &Path, mode: Mode) -> Request {
    let mut req = Request::shell(cmd);
    req.workdir = Some(cwd.to_path_buf());
    req.policy.mode = mode;
    req
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// An approver with a fixed answer that records every request it sees, and optionally
/// checks a condition at decision time.
struct Scripted {
    grant: bool,
    seen: Mutex<Vec<EscalationRequest>>,
    at_decision: Box<dyn Fn() + Send + Sync>,
}

impl Scripted {
    fn new(grant: bool) -> Scripted {
        Scripted { grant, seen: Mutex::new(Vec::new()), at_decision: Box::new(|| {}) }
    }

    fn calls(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

impl Approver for Scripted {
    fn info(&self) -> escalation::ApproverInfo {
        escalation::ApproverInfo { kind: "test".into(), detail: None }
    }

    fn decide<'a>(&'a self, req: &'a EscalationRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        (self.at_decision)();
        self.seen.lock().unwrap().push(req.clone());
        let d = if self.grant { Decision::grant("test grants") } else { Decision::refuse("test refuses") };
        Box::pin(async move { d })
    }
}

fn audit_lines(path: &Path) -> Vec<AuditRecord> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("audit line {l:?}: {e}")))
        .collect()
}

// ------------------------------------------------------------------ library

#[test]
fn granted_retry_runs_once_at_the_wider_mode() {
    if skip("granted_retry_runs_once_at_the_wider_mode") {
        return;
    }
    let d = dirs("grant");
    let target = d.out.join("effect");
    let approver = Scripted::new(true);
    let log = AuditLog::new(d.gov.join("audit.jsonl"));
    let opts = EscalationOptions { justification: Some("needs ~/out".into()), ..Default::default() };
    let req = request(&write_then_deny(&target), &d.ws, Mode::WorkspaceWrite);
    let outcome =
        rt().block_on(escalation::run_with_escalation(&executor(), req, &approver, &opts, Some(&log))).expect("run");

    let first = outcome.first.as_ref().expect("first run");
    assert!(first.sandbox.denied, "first run must be denied: {first:?}");
    assert_eq!(first.sandbox.mode, Mode::WorkspaceWrite);
    let seen = approver.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "asked exactly once");
    let req = &seen[0];
    assert_eq!((req.trigger, req.from, req.to), (Trigger::Denied, Mode::WorkspaceWrite, Mode::FullAccess));
    assert_eq!(req.cwd, d.ws);
    assert_eq!(req.justification.as_deref(), Some("needs ~/out"));
    assert_eq!(req.denials, first.sandbox.denials);
    assert!(!req.denials.is_empty());
    assert!(req.fingerprint.starts_with("fnv1a128:") && req.fingerprint.len() == 9 + 32, "{}", req.fingerprint);
    assert_eq!(req.command, escalation::CommandView::Shell(write_then_deny(&target)));

    let retry = outcome.retry.as_ref().expect("a retry").as_ref().expect("the retry ran");
    assert_eq!(retry.sandbox.mode, Mode::FullAccess);
    assert_eq!(retry.exit_code, Some(0), "{retry:?}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "granted\n", "the effect appears after the grant");
    assert!(std::ptr::eq(outcome.result().unwrap(), retry));

    let lines = audit_lines(log.path());
    assert_eq!(lines.len(), 1);
    let l = &lines[0];
    assert_eq!(
        (l.decision, l.from, l.to, l.trigger),
        (Verdict::Granted, Mode::WorkspaceWrite, Mode::FullAccess, Trigger::Denied)
    );
    assert_eq!(l.fingerprint, req.fingerprint);
    assert_eq!(l.approver.kind, "test");
}

#[test]
fn refused_means_nothing_reran() {
    if skip("refused_means_nothing_reran") {
        return;
    }
    let d = dirs("refuse");
    let target = d.out.join("effect");
    let approver = Scripted::new(false);
    let log = AuditLog::new(d.gov.join("audit.jsonl"));
    let req = request(&write_then_deny(&target), &d.ws, Mode::WorkspaceWrite);
    let outcome = rt()
        .block_on(escalation::run_with_escalation(&executor(), req, &approver, &Default::default(), Some(&log)))
        .expect("run");
    assert_eq!(approver.calls(), 1);
    assert!(outcome.retry.is_none());
    assert!(!target.exists(), "refused: the write must never have happened");
    let rec = outcome.escalation.as_ref().unwrap();
    assert_eq!(rec.decision.verdict, Verdict::Refused);
    assert!(outcome.result().unwrap().sandbox.denied);
    let lines = audit_lines(log.path());
    assert_eq!(lines.len(), 1);
    assert_eq!((lines[0].decision, lines[0].reason.as_str()), (Verdict::Refused, "test refuses"));
}

#[test]
fn read_only_to_workspace_write_stays_confined() {
    if skip("read_only_to_workspace_write_stays_confined") {
        return;
    }
    let d = dirs("ro-ww");
    let inside = d.ws.join("inside");
    let outside = d.out.join("outside");
    let cmd = format!("echo in > '{}'; echo out > '{}'; {DENY_TAIL}", inside.display(), outside.display());
    let approver = Scripted::new(true);
    let outcome = rt()
        .block_on(escalation::run_with_escalation(
            &executor(),
            request(&cmd, &d.ws, Mode::ReadOnly),
            &approver,
            &Default::default(),
            None,
        ))
        .expect("run");
    assert_eq!(approver.seen.lock().unwrap()[0].to, Mode::WorkspaceWrite, "default: the next rung");
    let retry = outcome.retry.unwrap().unwrap();
    assert_eq!(retry.sandbox.mode, Mode::WorkspaceWrite);
    assert!(retry.sandbox.denied, "the retry is confined too (the foreign syscall again)");
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "in\n", "the workspace became writable");
    assert!(!outside.exists(), "outside the workspace stays read-only in workspace-write");
}

#[test]
fn not_strictly_wider_is_refused_before_anything_runs() {
    let d = dirs("not-wider");
    let target = d.ws.join("ran");
    let cmd = format!("echo ran > '{}'", target.display());
    let approver = Scripted::new(true);
    let cases = [
        (Mode::WorkspaceWrite, Some(Mode::WorkspaceWrite), None),
        (Mode::WorkspaceWrite, Some(Mode::ReadOnly), None),
        (Mode::FullAccess, Some(Mode::FullAccess), None),
        (Mode::WorkspaceWrite, None, Some(Mode::ReadOnly)),
        (Mode::ReadOnly, None, Some(Mode::ReadOnly)),
    ];
    for (mode, up_front, on_denial) in cases {
        let opts = EscalationOptions { up_front, on_denial, ..Default::default() };
        let err = rt()
            .block_on(escalation::run_with_escalation(&executor(), request(&cmd, &d.ws, mode), &approver, &opts, None))
            .expect_err("must be refused");
        let to = up_front.or(on_denial).unwrap();
        assert!(matches!(err, EscalationError::NotWider { from, to: t } if from == mode && t == to), "{err}");
        assert_eq!(err.code(), "ESCALATION_NOT_WIDER");
    }
    assert_eq!(approver.calls(), 0);
    assert!(!target.exists(), "nothing ran");
}

/// An executor that sees no confined runner (as with `CORDON_DISABLE_RUNNERS`).
fn executor_without_runners() -> Executor {
    let host = HostFacts::detect_with(|k| match k {
        "CORDON_DISABLE_RUNNERS" => Some("landlock,bwrap,seatbelt".into()),
        _ => std::env::var(k).ok(),
    });
    Executor::with_host(ExecutorConfig::default(), host).unwrap()
}

#[test]
fn sandbox_unavailable_never_escalates() {
    let d = dirs("unavail");
    let target = d.out.join("effect");
    let approver = Scripted::new(true);
    let err = rt()
        .block_on(escalation::run_with_escalation(
            &executor_without_runners(),
            request(&write_then_deny(&target), &d.ws, Mode::WorkspaceWrite),
            &approver,
            &Default::default(),
            None,
        ))
        .expect_err("nothing can confine workspace-write here");
    assert!(matches!(err, EscalationError::Cordon(CordonError::SandboxUnavailable { .. })), "{err}");
    assert_eq!(err.code(), "SANDBOX_UNAVAILABLE");
    assert_eq!(approver.calls(), 0, "SANDBOX_UNAVAILABLE is never offered as a retry");
    assert!(!target.exists(), "nothing ran");
}

#[test]
fn up_front_to_an_unenforceable_mode_asks_nobody() {
    // Only the passthrough runner exists: workspace-write cannot be enforced, so asking
    // a person to approve it would be pointless.
    let d = dirs("unavail-up");
    let approver = Scripted::new(true);
    let opts = EscalationOptions { up_front: Some(Mode::WorkspaceWrite), ..Default::default() };
    let err = rt()
        .block_on(escalation::run_with_escalation(
            &executor_without_runners(),
            request("true", &d.ws, Mode::ReadOnly),
            &approver,
            &opts,
            None,
        ))
        .expect_err("unavailable");
    assert_eq!(err.code(), "SANDBOX_UNAVAILABLE");
    assert_eq!(approver.calls(), 0, "nobody is asked for a mode this host cannot enforce");
}

#[test]
fn up_front_nothing_runs_until_granted() {
    if skip("up_front_nothing_runs_until_granted") {
        return;
    }
    let d = dirs("upfront");
    let target = d.out.join("effect");
    for grant in [false, true] {
        let _ = std::fs::remove_file(&target);
        let mut approver = Scripted::new(grant);
        let watched = target.clone();
        approver.at_decision = Box::new(move || assert!(!watched.exists(), "ran before the decision"));
        let opts = EscalationOptions {
            up_front: Some(Mode::FullAccess),
            justification: Some("writes ../out".into()),
            ..Default::default()
        };
        let cmd = format!("echo granted > '{}'", target.display());
        let outcome = rt()
            .block_on(escalation::run_with_escalation(
                &executor(),
                request(&cmd, &d.ws, Mode::WorkspaceWrite),
                &approver,
                &opts,
                None,
            ))
            .expect("run");
        let seen = approver.seen.lock().unwrap()[0].clone();
        assert_eq!((seen.trigger, seen.from, seen.to), (Trigger::UpFront, Mode::WorkspaceWrite, Mode::FullAccess));
        assert!(seen.denials.is_empty());
        assert!(outcome.first.is_none(), "up front: no first run");
        if grant {
            let r = outcome.retry.unwrap().unwrap();
            assert_eq!((r.sandbox.mode, r.exit_code), (Mode::FullAccess, Some(0)));
            assert!(target.exists());
        } else {
            assert!(outcome.refused_up_front());
            assert!(!target.exists(), "refused up front: nothing ran");
        }
    }
}

#[test]
fn no_denial_no_question() {
    if skip("no_denial_no_question") {
        return;
    }
    let d = dirs("clean");
    let approver = Scripted::new(true);
    let outcome = rt()
        .block_on(escalation::run_with_escalation(
            &executor(),
            request("echo ok > ok", &d.ws, Mode::WorkspaceWrite),
            &approver,
            &Default::default(),
            None,
        ))
        .expect("run");
    assert_eq!(approver.calls(), 0);
    assert!(outcome.escalation.is_none() && outcome.retry.is_none() && outcome.report().is_none());
    assert!(d.ws.join("ok").exists());
}

#[test]
fn one_shot_then_back_to_the_session_mode() {
    if skip("one_shot_then_back_to_the_session_mode") {
        return;
    }
    let d = dirs("oneshot");
    let sess = d.gov.join("session.jsonl");
    session::append_event(&sess, &SessionEvent::set_mode(Mode::ReadOnly)).unwrap();
    let before = std::fs::read(&sess).unwrap();
    let session_mode = || session::effective_mode(session::DEFAULT_SESSION_MODE, &session::read_events(&sess).unwrap());
    let mut opts = EscalationOptions::default();
    opts.governing.add(GoverningKind::SessionFile, &sess);
    let approver = Scripted::new(true);
    let exec = executor();

    // Call 1: denied at the session mode, escalated once to workspace-write.
    let first = d.ws.join("first");
    let cmd = format!("echo 1 > '{}'; {DENY_TAIL}", first.display());
    let outcome = rt()
        .block_on(escalation::run_with_escalation(&exec, request(&cmd, &d.ws, session_mode()), &approver, &opts, None))
        .expect("run");
    assert_eq!(outcome.retry.unwrap().unwrap().sandbox.mode, Mode::WorkspaceWrite);
    assert!(first.exists());

    // Call 2: back at read-only, without asking anybody.
    let second = d.ws.join("second");
    let spec = exec.resolve(request(&format!("echo 2 > '{}'", second.display()), &d.ws, session_mode())).unwrap();
    let r = rt().block_on(exec.run(spec)).unwrap();
    assert_eq!(r.sandbox.mode, Mode::ReadOnly);
    assert!(!second.exists(), "the grant did not outlive its call");
    assert_eq!(std::fs::read(&sess).unwrap(), before, "escalation never touches the session");
    assert_eq!(approver.calls(), 1);
}

#[test]
fn governing_files_are_checked_against_the_wider_policy() {
    let d = dirs("gov-wider");
    let sess = d.ws.join("session.jsonl"); // inside the workspace
    session::append_event(&sess, &SessionEvent::set_mode(Mode::ReadOnly)).unwrap();
    let marker = d.out.join("ran");
    let mut opts = EscalationOptions::default();
    opts.governing.add(GoverningKind::SessionFile, &sess);
    let approver = Scripted::new(true);
    // read-only alone could not write it, but the retry at workspace-write could.
    let err = rt()
        .block_on(escalation::run_with_escalation(
            &executor(),
            request(&format!("echo > '{}'", marker.display()), &d.ws, Mode::ReadOnly),
            &approver,
            &opts,
            None,
        ))
        .expect_err("refused");
    assert_eq!(err.code(), "GOVERNING_FILE_WRITABLE");
    let msg = err.to_string();
    assert!(msg.contains(&sess.display().to_string()) && msg.contains(&d.ws.display().to_string()), "{msg}");
    assert!(!marker.exists() && approver.calls() == 0);
}

#[test]
fn prompt_escapes_hostile_command_text() {
    let req = EscalationRequest {
        version: escalation::REQUEST_VERSION,
        trigger: Trigger::Denied,
        command: escalation::CommandView::Shell("rm -rf ~ \r\x1b[2K echo harmless".into()),
        cwd: "/ws".into(),
        from: Mode::WorkspaceWrite,
        to: Mode::FullAccess,
        grant: None,
        justification: Some("\x1b]0;title\x07".into()),
        denials: vec![],
        policy: escalation::PolicyView {
            mode: Mode::WorkspaceWrite,
            workspace: "/ws".into(),
            writable_roots: vec![],
            protected: vec![],
            network: false,
            best_effort: false,
        },
        retry_policy: escalation::PolicyView {
            mode: Mode::FullAccess,
            workspace: "/ws".into(),
            writable_roots: vec![],
            protected: vec![],
            network: false,
            best_effort: false,
        },
        env_names: vec![],
        fingerprint: "fnv1a128:0".into(),
        bound_files: vec![],
        first_run_changes: None,
    };
    let p = escalation::terminal_prompt(&req);
    assert!(!p.contains('\x1b') && !p.contains('\r') && !p.contains('\x07'), "{p:?}");
    assert!(p.contains("rm -rf ~") && p.contains("full-access") && p.ends_with("[y/N] "));
}

// ------------------------------------------------------------------ CLI

/// An approver script (outside every writable root) that saves its stdin to `dump`,
/// prints noise on stdout, and exits with `status`.
fn approver_script(dir: &Path, dump: &Path, status: i32) -> PathBuf {
    let path = dir.join(format!("approve-{status}.sh"));
    let text = format!("#!/bin/sh\ncat > '{}'\necho 'approver noise on stdout'\nexit {status}\n", dump.display());
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn cli_approver_receives_exactly_the_request() {
    if skip("cli_approver_receives_exactly_the_request") {
        return;
    }
    let d = dirs("cli-approver");
    let target = d.out.join("effect");
    let dump = d.gov.join("request.json");
    let log = d.gov.join("audit.jsonl");
    let script = approver_script(&d.gov, &dump, 0);
    let cmd = write_then_deny(&target);
    let args =
        ["run", "--json", "--approver", s(&script), "--audit-log", s(&log), "--justification", "why", "-c", &cmd];
    let out = cordon(&args, &d.ws, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = out.json();
    assert_eq!(v["sandbox"]["mode"], "full-access", "the top-level result is the retry's");
    let esc = &v["escalation"];
    assert_eq!(esc["decision"]["verdict"], "granted");
    assert_eq!(esc["approver"]["kind"], "program");
    assert_eq!(esc["first_run"]["sandbox"]["denied"], true);

    let raw = std::fs::read_to_string(&dump).unwrap();
    assert!(raw.ends_with('\n') && raw.matches('\n').count() == 1, "one JSON line: {raw:?}");
    let got: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(got, esc["request"], "the program saw exactly the request that was reported");
    assert_eq!(got["version"], 1);
    assert_eq!(got["command"]["shell"], cmd.as_str());
    assert_eq!(got["cwd"], s(&d.ws));
    assert_eq!((got["from"].as_str(), got["to"].as_str()), (Some("workspace-write"), Some("full-access")));
    assert_eq!(got["justification"], "why");
    assert!(!got["denials"].as_array().unwrap().is_empty());
    assert_eq!(got["retry_policy"]["mode"], "full-access");
    assert!(got["env_names"].as_array().unwrap().iter().any(|n| n == "PATH"));
    assert!(std::fs::read_to_string(&target).unwrap() == "granted\n");

    let lines = audit_lines(&log);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].fingerprint, got["fingerprint"].as_str().unwrap());
    assert_eq!(lines[0].approver.detail.as_deref(), Some(s(&script)));
}

#[test]
fn cli_approver_nonzero_exit_refuses() {
    if skip("cli_approver_nonzero_exit_refuses") {
        return;
    }
    let d = dirs("cli-approver-no");
    let target = d.out.join("effect");
    let script = approver_script(&d.gov, &d.gov.join("req.json"), 3);
    let log = d.gov.join("audit.jsonl");
    let cmd = write_then_deny(&target);
    let out = cordon(&["run", "--json", "--approver", s(&script), "--audit-log", s(&log), "-c", &cmd], &d.ws, &[]);
    let v = out.json();
    assert_eq!(out.code, 1, "the denied first run's status (its refused write): {}", out.stderr);
    assert_eq!(v["sandbox"]["mode"], "workspace-write");
    assert_eq!(v["escalation"]["decision"]["verdict"], "refused");
    assert!(v["escalation"]["decision"]["reason"].as_str().unwrap().contains('3'));
    assert!(v["escalation"].get("first_run").is_none(), "no retry, so the top level is the first run");
    assert!(!target.exists());
    assert_eq!(audit_lines(&log)[0].decision, Verdict::Refused);
}

#[test]
fn cli_sandbox_unavailable_never_calls_the_approver() {
    let d = dirs("cli-unavail");
    let dump = d.gov.join("req.json");
    let script = approver_script(&d.gov, &dump, 0);
    let log = d.gov.join("audit.jsonl");
    let out = cordon(
        &["run", "--json", "--approver", s(&script), "--audit-log", s(&log), "-c", &write_then_deny(&d.out.join("x"))],
        &d.ws,
        &[("CORDON_DISABLE_RUNNERS", "landlock,bwrap,seatbelt")],
    );
    assert_eq!(out.code, 125, "{}", out.stderr);
    assert_eq!(out.json()["error"]["code"], "SANDBOX_UNAVAILABLE");
    assert!(!dump.exists(), "the approver was never started");
    assert!(audit_lines(&log).is_empty(), "no decision, nothing logged");
    assert!(!d.out.join("x").exists());
}

#[test]
fn cli_up_front_refused_runs_nothing() {
    let d = dirs("cli-upfront");
    let marker = d.ws.join("ran");
    let script = approver_script(&d.gov, &d.gov.join("req.json"), 1);
    let log = d.gov.join("audit.jsonl");
    let cmd = format!("echo > '{}'", marker.display());
    let args = [
        "run",
        "--json",
        "--approver",
        s(&script),
        "--audit-log",
        s(&log),
        "--escalate-to",
        "full-access",
        "--justification",
        "j",
        "-c",
        &cmd,
    ];
    let out = cordon(&args, &d.ws, &[]);
    assert_eq!(out.code, 125, "{}", out.stderr);
    let v = out.json();
    assert_eq!(v["error"]["code"], "ESCALATION_REFUSED");
    assert_eq!(v["escalation"]["request"]["trigger"], "up-front");
    assert_eq!(v["escalation"]["request"]["justification"], "j");
    assert!(!marker.exists(), "nothing ran");
    assert_eq!(audit_lines(&log)[0].trigger, Trigger::UpFront);
}

#[test]
fn cli_up_front_granted_runs_once_at_the_wider_mode() {
    let d = dirs("cli-upfront-yes");
    let marker = d.out.join("ran");
    let script = approver_script(&d.gov, &d.gov.join("req.json"), 0);
    let log = d.gov.join("audit.jsonl");
    let cmd = format!("echo once >> '{}'", marker.display());
    let args =
        ["run", "--json", "--approver", s(&script), "--audit-log", s(&log), "--escalate-to", "full-access", "-c", &cmd];
    let out = cordon(&args, &d.ws, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["sandbox"]["mode"], "full-access");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "once\n");
}

#[test]
fn cli_not_strictly_wider_is_a_typed_error() {
    let d = dirs("cli-not-wider");
    let script = approver_script(&d.gov, &d.gov.join("req.json"), 0);
    let log = d.gov.join("audit.jsonl");
    for (mode, to) in [("workspace-write", "read-only"), ("workspace-write", "workspace-write")] {
        let args = [
            "run",
            "--json",
            "--mode",
            mode,
            "--approver",
            s(&script),
            "--audit-log",
            s(&log),
            "--escalate-to",
            to,
            "--",
            "true",
        ];
        let out = cordon(&args, &d.ws, &[]);
        assert_eq!(out.code, 125);
        assert_eq!(out.json()["error"]["code"], "ESCALATION_NOT_WIDER");
    }
    assert!(!d.gov.join("req.json").exists());
}

#[test]
fn cli_flags_need_an_approver() {
    let d = dirs("cli-flags");
    for extra in [&["--audit-log", "/var/tmp/x"][..], &["--escalate-to", "full-access"], &["--justification", "j"]] {
        let mut args = vec!["run"];
        args.extend_from_slice(extra);
        args.extend(["--", "true"]);
        assert_eq!(cordon(&args, &d.ws, &[]).code, 2, "{extra:?} without --ask/--approver");
    }
    let out = cordon(&["run", "--ask", "--approver", "/bin/true", "--", "true"], &d.ws, &[]);
    assert_eq!(out.code, 2, "--ask and --approver are exclusive");
}

#[test]
fn cli_audit_log_and_approver_inside_a_writable_root_are_refused() {
    let d = dirs("cli-gov");
    let marker = d.out.join("ran");
    let cmd = format!("echo > '{}'", marker.display());
    let extra = d.out.join("extra");
    std::fs::create_dir(&extra).unwrap();
    let outside_script = approver_script(&d.gov, &d.gov.join("req.json"), 0);
    let inside_script = approver_script(&d.ws, &d.gov.join("req.json"), 0);
    let cases: Vec<(Vec<String>, PathBuf)> = vec![
        (vec!["--audit-log".into(), s(&d.ws.join("audit.jsonl")).into()], d.ws.clone()),
        (vec!["--audit-log".into(), s(&d.ws.join("new/dir/audit.jsonl")).into()], d.ws.clone()),
        (
            vec!["--audit-log".into(), s(&extra.join("a.jsonl")).into(), "--writable".into(), s(&extra).into()],
            extra.clone(),
        ),
    ];
    for (flags, root) in cases {
        let mut args: Vec<&str> = vec!["run", "--json", "--approver", s(&outside_script)];
        args.extend(flags.iter().map(String::as_str));
        args.extend(["-c", &cmd]);
        let out = cordon(&args, &d.ws, &[]);
        assert_eq!(out.code, 125, "{flags:?}: {}", out.stderr);
        let v = out.json();
        assert_eq!(v["error"]["code"], "GOVERNING_FILE_WRITABLE", "{flags:?}");
        assert!(v["error"]["message"].as_str().unwrap().contains(s(&root)), "names the root: {v}");
    }
    assert!(!d.ws.join("new").exists(), "a refused audit log is not created");
    let out = cordon(
        &["run", "--json", "--approver", s(&inside_script), "--audit-log", s(&d.gov.join("a.jsonl")), "-c", &cmd],
        &d.ws,
        &[],
    );
    assert_eq!(out.json()["error"]["code"], "GOVERNING_FILE_WRITABLE");
    assert!(out.json()["error"]["message"].as_str().unwrap().contains("approver program"));
    assert!(!marker.exists(), "nothing ran");
}

#[test]
fn cli_default_audit_log_follows_xdg_state_home() {
    let d = dirs("cli-xdg");
    let state = d.gov.join("state");
    let script = approver_script(&d.gov, &d.gov.join("req.json"), 1);
    let args = ["run", "--json", "--approver", s(&script), "--escalate-to", "full-access", "--", "true"];
    let out = cordon(&args, &d.ws, &[("XDG_STATE_HOME", s(&state))]);
    assert_eq!(out.code, 125, "{}", out.stderr);
    let lines = audit_lines(&state.join("cordon/audit.jsonl"));
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].decision, Verdict::Refused);
    let mode = std::fs::metadata(state.join("cordon/audit.jsonl")).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "the audit log is private");
}

// ------------------------------------------------------------------ --ask through a pty

/// What [`pty_session`] saw.
struct PtyOut {
    /// cordon's exit status.
    code: i32,
    /// cordon's stdout, when it went to a file (else empty: it is in the transcript).
    stdout: String,
    /// Everything cordon wrote to the terminal.
    transcript: String,
    /// A `[y/N] ` question appeared and was answered.
    answered: bool,
}

/// Runs cordon on a new pseudo-terminal (python3's `pty.fork`); when `answer` is given,
/// waits for the prompt and types it. cordon's stdout goes to a file when
/// `stdout_to_file` (so the JSON stays apart from the prompt), else to the terminal.
fn pty_session(args: &[&str], cwd: &Path, answer: Option<&str>, stdout_to_file: bool, scratch: &Path) -> PtyOut {
    const DRIVER: &str = r#"
import os, pty, select, sys, time
out_path, transcript_path, answer, cwd = sys.argv[1:5]
argv = sys.argv[5:]
pid, fd = pty.fork()
if pid == 0:
    os.chdir(cwd)
    if out_path != "-":
        o = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(o, 1)
    os.execv(argv[0], argv)
buf, answered, deadline = b"", False, time.time() + 60
while time.time() < deadline:
    r, _, _ = select.select([fd], [], [], 0.1)
    if r:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        buf += data
    if answer and not answered and b"[y/N] " in buf:
        os.write(fd, answer.encode().decode("unicode_escape").encode())
        answered = True
if time.time() >= deadline:
    os.kill(pid, 9)  # hung (e.g. the answer went to a fake prompt); do not wait forever
_, status = os.waitpid(pid, 0)
open(transcript_path, "wb").write(buf)
code = os.waitstatus_to_exitcode(status)
open(transcript_path + ".status", "w").write("%d %d" % (code, answered))
"#;
    let out = scratch.join("pty-stdout");
    let _ = std::fs::remove_file(&out);
    let transcript = scratch.join("pty-transcript");
    let status = std::process::Command::new("python3")
        .arg("-c")
        .arg(DRIVER)
        .args([if stdout_to_file { s(&out) } else { "-" }, s(&transcript), answer.unwrap_or(""), s(cwd), &cordon_bin()])
        .args(args)
        .status()
        .expect("python3");
    assert!(status.success(), "the pty driver failed: {status:?}");
    let facts = std::fs::read_to_string(format!("{}.status", transcript.display())).unwrap();
    let (code, answered) = facts.split_once(' ').unwrap();
    PtyOut {
        code: code.parse().unwrap(),
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        transcript: String::from_utf8_lossy(&std::fs::read(&transcript).unwrap()).into_owned(),
        answered: answered == "1",
    }
}

/// [`pty_session`] with stdout to a file, answering the prompt, which must appear:
/// (exit status, cordon's stdout, the terminal transcript).
fn cordon_on_pty(args: &[&str], cwd: &Path, answer: &str, scratch: &Path) -> (i32, String, String) {
    let o = pty_session(args, cwd, Some(answer), true, scratch);
    assert!(o.answered, "no prompt appeared: {}", o.transcript);
    (o.code, o.stdout, o.transcript)
}

#[test]
fn cli_ask_on_a_terminal() {
    if skip("cli_ask_on_a_terminal") {
        return;
    }
    let d = dirs("cli-ask");
    let log = d.gov.join("audit.jsonl");
    let cases = [("y\n", true), ("YES\n", true), ("n\n", false), ("\n", false), ("\\x04", false), ("maybe\n", false)];
    for (i, (answer, granted)) in cases.into_iter().enumerate() {
        let target = d.out.join(format!("effect-{i}"));
        let cmd = write_then_deny(&target);
        let args = ["run", "--json", "--ask", "--audit-log", s(&log), "--justification", "test", "-c", &cmd];
        let (code, stdout, transcript) = cordon_on_pty(&args, &d.ws, answer, &d.gov);
        assert!(transcript.contains("refused part of this command"), "{transcript}");
        assert!(transcript.contains("echo granted >"), "shows the command: {transcript}");
        assert!(transcript.contains("denied:") && transcript.contains("foreign"), "shows the denials: {transcript}");
        assert!(transcript.contains("full-access: NO sandbox"), "shows the proposed mode: {transcript}");
        let v: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        assert_eq!(target.exists(), granted, "answer {answer:?}: {transcript}");
        let verdict = if granted { "granted" } else { "refused" };
        assert_eq!(v["escalation"]["decision"]["verdict"], verdict, "answer {answer:?}");
        assert_eq!(code, if granted { 0 } else { 1 }, "answer {answer:?}: the status of the run that counts");
        assert_eq!(v["escalation"]["approver"]["kind"], "terminal");
    }
    let lines = audit_lines(&log);
    assert_eq!(lines.len(), cases.len());
    assert!(lines.iter().zip(cases).all(|(l, (_, g))| (l.decision == Verdict::Granted) == g));
}

#[test]
fn cli_ask_without_a_terminal_refuses() {
    if skip("cli_ask_without_a_terminal_refuses") {
        return;
    }
    if which::which("setsid").is_err() {
        return skip_regardless("cli_ask_without_a_terminal_refuses", "no setsid (util-linux) to drop the terminal");
    }
    let d = dirs("cli-ask-notty");
    let target = d.out.join("effect");
    let log = d.gov.join("audit.jsonl");
    // setsid: no controlling terminal, so /dev/tty cannot be opened.
    let out = std::process::Command::new("setsid")
        .args(["-w", &cordon_bin(), "run", "--json", "--ask", "--audit-log", s(&log), "-c"])
        .arg(write_then_deny(&target))
        .current_dir(&d.ws)
        .stdin(Stdio::null())
        .output()
        .expect("setsid");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {:?}", out));
    assert_eq!(v["escalation"]["decision"]["verdict"], "refused");
    assert!(v["escalation"]["decision"]["reason"].as_str().unwrap().contains("no terminal"));
    assert!(!target.exists());
}

// ------------------------------------------------------------------ the approval layer under attack
//
// Issue 17: the confined command is the adversary. Each case is judged by effect (a
// marker the attacker's program would create, the session's mode after the attack, the
// audit log's content, the bytes on the terminal) and the CLI cases run once per
// identity: as the current user and, when that is root, as `CORDON_TEST_USER` too.

/// (uid, gid) to run cordon as: `None` for the current identity.
fn identities() -> Vec<Option<(u32, u32)>> {
    let mut out = vec![None];
    let me = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m)).unwrap_or(1);
    if me == 0 {
        if let Ok(name) = std::env::var("CORDON_TEST_USER") {
            let id = |flag: &str| {
                let o = std::process::Command::new("id").arg(flag).arg(&name).output().expect("id");
                String::from_utf8_lossy(&o.stdout).trim().parse::<u32>().expect("a numeric id")
            };
            out.push(Some((id("-u"), id("-g"))));
        }
    }
    out
}

/// `dirs(tag)`, owned (recursively, later files too) by `id`.
fn dirs_as(tag: &str, id: Option<(u32, u32)>) -> Dirs {
    let d = dirs(tag);
    chown_tree(d.ws.parent().unwrap(), id);
    d
}

fn chown_tree(p: &Path, id: Option<(u32, u32)>) {
    let Some((uid, gid)) = id else { return };
    std::os::unix::fs::lchown(p, Some(uid), Some(gid)).unwrap();
    if std::fs::symlink_metadata(p).unwrap().is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            chown_tree(&e.unwrap().path(), id);
        }
    }
}

fn cordon_as(id: Option<(u32, u32)>, args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> CliOut {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(cordon_bin());
    cmd.args(args).current_dir(cwd).stdin(Stdio::null());
    cmd.envs(env.iter().copied());
    if let Some((uid, gid)) = id {
        let home = cwd.parent().unwrap().join("gov");
        cmd.uid(uid).gid(gid).env("HOME", home).env_remove("XDG_STATE_HOME");
    }
    let out = cmd.output().expect("spawn cordon");
    CliOut {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn write_script(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn attack_approver_symlink_swapped_by_the_command_never_runs() {
    if skip("attack_approver_symlink_swapped_by_the_command_never_runs") {
        return;
    }
    for id in identities() {
        let d = dirs("att-approver-link");
        let marker = d.out.join("approver-replaced");
        let real = approver_script(&d.gov, &d.gov.join("req.json"), 0);
        let evil = d.ws.join("evil.sh");
        write_script(&evil, &format!("#!/bin/sh\nid > '{}'\nexit 0\n", marker.display()));
        let link = d.ws.join("approve");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        chown_tree(d.ws.parent().unwrap(), id);
        let log = d.gov.join("audit.jsonl");
        let target = d.out.join("effect");
        // The command re-points the approver link to its own program, then is denied.
        let cmd = format!("ln -sfn '{}' '{}'; {}", evil.display(), link.display(), write_then_deny(&target));
        let out =
            cordon_as(id, &["run", "--json", "--approver", s(&link), "--audit-log", s(&log), "-c", &cmd], &d.ws, &[]);
        assert!(!marker.exists(), "{id:?}: the command's program ran as the approver");
        assert!(!target.exists(), "{id:?}: nothing ran");
        assert_eq!(out.code, 125, "{id:?}: {}", out.stderr);
        assert_eq!(out.json()["error"]["code"], "GOVERNING_FILE_WRITABLE", "{id:?}");
        // Positive control: the real approver, named directly, grants.
        let out = cordon_as(
            id,
            &["run", "--json", "--approver", s(&real), "--audit-log", s(&log), "-c", &write_then_deny(&target)],
            &d.ws,
            &[],
        );
        assert_eq!(out.code, 0, "{id:?}: {}", out.stderr);
        assert!(target.exists() && !marker.exists(), "{id:?}");
    }
}

#[test]
fn attack_env_shebang_approver_ignores_a_workspace_path() {
    if skip("attack_env_shebang_approver_ignores_a_workspace_path") {
        return;
    }
    if !["/usr/local/bin/python3", "/usr/bin/python3", "/bin/python3"].iter().any(|p| Path::new(p).exists()) {
        return skip_regardless("attack_env_shebang_approver_ignores_a_workspace_path", "no python3 on the fixed PATH");
    }
    for id in identities() {
        let d = dirs("att-approver-env");
        let marker = d.out.join("planted-python-ran");
        let approver = d.gov.join("approve.py");
        write_script(&approver, "#!/usr/bin/env python3\nimport sys\nsys.stdin.read()\nsys.exit(3)\n");
        let bin = d.ws.join("bin");
        std::fs::create_dir(&bin).unwrap();
        write_script(&bin.join("python3"), &format!("#!/bin/sh\necho planted > '{}'\nexit 0\n", marker.display()));
        chown_tree(d.ws.parent().unwrap(), id);
        let log = d.gov.join("audit.jsonl");
        let target = d.out.join("effect");
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
        let out = cordon_as(
            id,
            &["run", "--json", "--approver", s(&approver), "--audit-log", s(&log), "-c", &write_then_deny(&target)],
            &d.ws,
            &[("PATH", &path)],
        );
        assert!(!marker.exists(), "{id:?}: the workspace's python3 ran as the approver's interpreter: {}", out.stderr);
        assert_eq!(out.json()["escalation"]["decision"]["verdict"], "refused", "{id:?}: {}", out.stderr);
        assert!(!target.exists(), "{id:?}");
    }
}

#[test]
fn attack_session_through_a_workspace_symlink_is_refused() {
    if skip("attack_session_through_a_workspace_symlink_is_refused") {
        return;
    }
    for id in identities() {
        let d = dirs("att-session");
        let marker = d.out.join("ran-wide");
        let narrow = d.gov.join("narrow.jsonl");
        let wide = d.gov.join("wide.jsonl");
        std::fs::write(&narrow, "{\"at\":\"t\",\"event\":\"set-mode\",\"mode\":\"read-only\"}\n").unwrap();
        std::fs::write(&wide, "{\"at\":\"t\",\"event\":\"set-mode\",\"mode\":\"full-access\"}\n").unwrap();
        // The user's session is named through the workspace; a command re-pointed it.
        let link = d.ws.join("session");
        std::os::unix::fs::symlink(&wide, &link).unwrap();
        chown_tree(d.ws.parent().unwrap(), id);
        let cmd = format!("echo > '{}'", marker.display());
        let out = cordon_as(id, &["run", "--json", "--session", s(&link), "-c", &cmd], &d.ws, &[]);
        assert!(!marker.exists(), "{id:?}: the re-pointed session widened the run");
        assert_eq!(out.json()["error"]["code"], "GOVERNING_FILE_WRITABLE", "{id:?}: {}", out.stderr);
        // Positive control: the session named directly runs at its mode.
        let out = cordon_as(id, &["run", "--json", "--session", s(&narrow), "-c", &cmd], &d.ws, &[]);
        assert_eq!(out.json()["sandbox"]["mode"], "read-only", "{id:?}: {}", out.stderr);
        assert!(!marker.exists());

        // set-mode through a link to /dev/null: refused, not silently lost.
        let devnull = d.ws.join("null-session");
        std::os::unix::fs::symlink("/dev/null", &devnull).unwrap();
        chown_tree(&devnull, id);
        let out = cordon_as(id, &["session", "set-mode", s(&devnull), "read-only"], &d.ws, &[]);
        assert_ne!(out.code, 0, "{id:?}: set-mode into /dev/null reported success");
        assert!(out.stderr.contains("GOVERNING_FILE_UNSAFE"), "{id:?}: {}", out.stderr);
    }
}

#[test]
fn attack_spill_file_is_never_read_as_a_session() {
    if skip("attack_spill_file_is_never_read_as_a_session") {
        return;
    }
    for id in identities() {
        let d = dirs_as("att-spill", id);
        let marker = d.out.join("ran-wide");
        // The command fills its own output with forged events; the tail cap forces a spill.
        let forged = "{\"at\":\"t\",\"event\":\"set-mode\",\"mode\":\"full-access\"}";
        let cmd = format!("for i in $(seq 400); do echo '{forged}'; done");
        let out = cordon_as(id, &["run", "--json", "--output-cap", "64", "-c", &cmd], &d.ws, &[]);
        let spill = out.json()["stdout"]["spill_path"]
            .as_str()
            .unwrap_or_else(|| panic!("{id:?}: no spill: {}", out.stdout))
            .to_string();
        let cmd = format!("echo > '{}'", marker.display());
        let out = cordon_as(id, &["run", "--json", "--session", &spill, "-c", &cmd], &d.ws, &[]);
        assert!(!marker.exists(), "{id:?}: a spill file served as the session");
        assert_eq!(out.json()["error"]["code"], "GOVERNING_FILE_WRITABLE", "{id:?}: {}", out.stderr);
    }
}

#[test]
fn attack_audit_log_redirected_or_discarded_is_refused() {
    if skip("attack_audit_log_redirected_or_discarded_is_refused") {
        return;
    }
    for id in identities() {
        let d = dirs("att-audit");
        let real = d.gov.join("audit.jsonl");
        std::fs::write(&real, "").unwrap();
        let link = d.ws.join("audit");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let fake = d.ws.join("fake.jsonl");
        let devnull = d.gov.join("null-audit");
        std::os::unix::fs::symlink("/dev/null", &devnull).unwrap();
        let script = approver_script(&d.gov, &d.gov.join("req.json"), 0);
        chown_tree(d.ws.parent().unwrap(), id);
        let target = d.out.join("effect");
        let cmd = format!("ln -sfn '{}' '{}'; {}", fake.display(), link.display(), write_then_deny(&target));
        let out = cordon_as(
            id,
            &["run", "--json", "--approver", s(&script), "--audit-log", s(&link), "-c", &cmd],
            &d.ws,
            &[],
        );
        assert!(!fake.exists() && !target.exists(), "{id:?}: the decision went to the command's file");
        assert_eq!(out.json()["error"]["code"], "GOVERNING_FILE_WRITABLE", "{id:?}: {}", out.stderr);
        for null in [devnull.as_path(), Path::new("/dev/null")] {
            let args =
                ["run", "--json", "--approver", s(&script), "--audit-log", s(null), "-c", &write_then_deny(&target)];
            let out = cordon_as(id, &args, &d.ws, &[]);
            assert_eq!(out.json()["error"]["code"], "GOVERNING_FILE_UNSAFE", "{id:?} {null:?}: {}", out.stderr);
            assert!(!target.exists(), "{id:?}: a grant was recorded nowhere");
        }
        // A record cut short (full disk) does not swallow the next one.
        std::fs::write(&real, "{\"at\":\"cut short").unwrap();
        chown_tree(&real, id);
        let refuse = approver_script(&d.gov, &d.gov.join("req.json"), 1);
        chown_tree(&refuse, id);
        let args = [
            "run",
            "--json",
            "--approver",
            s(&refuse),
            "--audit-log",
            s(&real),
            "--escalate-to",
            "full-access",
            "--",
            "true",
        ];
        let out = cordon_as(id, &args, &d.ws, &[]);
        assert_eq!(out.code, 125, "{id:?}: {}", out.stderr);
        let text = std::fs::read_to_string(&real).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{id:?}: {text:?}");
        let rec: AuditRecord = serde_json::from_str(lines[1]).unwrap_or_else(|e| panic!("{id:?}: {e}: {text:?}"));
        assert_eq!(rec.decision, Verdict::Refused);
        assert!(text.ends_with('\n'));
    }
}

#[test]
fn attack_bound_script_rewritten_before_the_retry_does_not_run() {
    if skip("attack_bound_script_rewritten_before_the_retry_does_not_run") {
        return;
    }
    let d = dirs("att-bind");
    let script = d.ws.join("build.sh");
    let payload = d.out.join("payload");
    std::fs::write(&script, format!("echo build; false\n{DENY_TAIL}\n")).unwrap();
    let cmd = "bash build.sh";
    for bind in [false, true] {
        let _ = std::fs::remove_file(&payload);
        std::fs::write(&script, format!("echo build; false\n{DENY_TAIL}\n")).unwrap();
        let mut approver = Scripted::new(true);
        let (s2, p2) = (script.clone(), payload.clone());
        // Between the approval and the retry, build.sh becomes a different program.
        approver.at_decision = Box::new(move || {
            std::fs::write(&s2, format!("echo pwned > '{}'\n", p2.display())).unwrap();
        });
        let opts = EscalationOptions { bind_files: bind, ..Default::default() };
        let res = rt().block_on(escalation::run_with_escalation(
            &executor(),
            request(cmd, &d.ws, Mode::WorkspaceWrite),
            &approver,
            &opts,
            None,
        ));
        // Bound by default (the script lies in the workspace), and with --bind-script.
        let err = res.expect_err("the retry must be refused");
        assert_eq!(err.code(), "BOUND_FILE_CHANGED", "bind {bind}: {err}");
        assert!(!payload.exists(), "bind {bind}: the rewritten script ran under the approval");
        let seen = approver.seen.lock().unwrap()[0].clone();
        assert_eq!(seen.bound_files.len(), 1);
        assert_eq!(seen.bound_files[0].path, script);
    }
}

#[test]
fn attack_bound_fingerprint_follows_the_script_contents() {
    let d = dirs("att-bind-fp");
    let script = d.ws.join("build.sh");
    let fp = |bind: bool| {
        let exec = executor();
        let approver = Scripted::new(false);
        let opts = EscalationOptions { bind_files: bind, up_front: Some(Mode::FullAccess), ..Default::default() };
        let req = request("bash build.sh", &d.ws, Mode::WorkspaceWrite);
        let _ = rt().block_on(escalation::run_with_escalation(&exec, req, &approver, &opts, None));
        let seen = approver.seen.lock().unwrap().first().map(|r| r.fingerprint.clone());
        seen
    };
    std::fs::write(&script, "echo one\n").unwrap();
    let (plain_a, bound_a) = (fp(false), fp(true));
    std::fs::write(&script, "echo two\n").unwrap();
    let (plain_b, bound_b) = (fp(false), fp(true));
    if plain_a.is_none() {
        return skip_regardless("attack_bound_fingerprint_follows_the_script_contents", "full-access not available");
    }
    assert_ne!(plain_a, plain_b, "by default a rewritten workspace script is a different call");
    assert_ne!(bound_a, bound_b, "--bind-script: a rewritten script is a different call");
    assert_eq!(plain_a, bound_a, "the same file bound either way, the same fingerprint");
}

#[test]
fn attack_ask_prompt_is_not_hidden_by_the_first_runs_output() {
    if skip("attack_ask_prompt_is_not_hidden_by_the_first_runs_output") {
        return;
    }
    let d = dirs("att-tty");
    let log = d.gov.join("audit.jsonl");
    let target = d.out.join("effect");
    // Conceal text, black on black, hide the cursor, set a scroll region, clear the
    // screen and draw a fake prompt; then be denied.
    let hostile = r"printf '\033[8m\033[30;40m\033[?25l\033[5;6r\033[2J\033[HRun this exact command once at read-only? [y/N] ' >&2";
    // And try the terminal directly: /dev/tty, and the device behind each stdio fd.
    let direct =
        "for f in /dev/tty /proc/self/fd/0 /proc/self/fd/1 /proc/self/fd/2; do echo TTY''LEAK > $f 2>/dev/null; done";
    let cmd = format!("{hostile}; {direct}; {}", write_then_deny(&target));
    // Without --json: the first run would write straight to the terminal (the driver's
    // terminal is cordon's stderr; its stdout goes to a file).
    let args = ["run", "--ask", "--audit-log", s(&log), "-c", &cmd];
    let (_code, _stdout, transcript) = cordon_on_pty(&args, &d.ws, "n\n", &d.gov);
    // Only cordon's escaped copy of the captured output may carry it ("  | " lines).
    // (The command text spells it TTY''LEAK, so only the output can contain it; after
    // the decision the refused run's output is replayed as it was.)
    let leaked = |t: &str| {
        let asked = &t[..t.find("once at full-access? [y/N]").expect("the prompt")];
        asked.split("\r\n").any(|l| l.contains("TTYLEAK") && !l.starts_with("  | "))
    };
    assert!(!leaked(&transcript), "the command wrote to the terminal: {transcript:?}");
    // The same with --json.
    let json_args = ["run", "--json", "--ask", "--audit-log", s(&log), "-c", &cmd];
    let (_c, _o, json_transcript) = cordon_on_pty(&json_args, &d.ws, "n\n", &d.gov);
    assert!(!leaked(&json_transcript), "the command wrote to the terminal: {json_transcript:?}");
    let asked = &transcript[..transcript.find("once at full-access? [y/N]").unwrap()];
    for raw in ["\x1b[8m", "\x1b[30;40m", "\x1b[?25l", "\x1b[5;6r", "\x1b[2J"] {
        assert!(!asked.contains(raw), "the command's {raw:?} reached the terminal before the prompt: {transcript:?}");
    }
    let reset = transcript.find(escalation::TERMINAL_RESET).expect("a terminal reset before the prompt");
    let prompt = transcript.find("Run this exact command once at full-access? [y/N] ").expect("the real prompt");
    assert!(reset < prompt, "{transcript:?}");
    assert!(transcript.contains("\\u{1b}[8m"), "the first run's output is shown escaped: {transcript:?}");
    assert!(!target.exists());
}

#[test]
fn session_show_into_a_closed_pipe_does_not_panic() {
    let d = dirs("epipe");
    let file = d.gov.join("s.jsonl");
    let line = "{\"at\":\"2026-01-01T00:00:00.000Z\",\"event\":\"set-mode\",\"mode\":\"read-only\"}\n";
    std::fs::write(&file, line.repeat(4000)).unwrap();
    for json in [false, true] {
        let mut cmd = std::process::Command::new(cordon_bin());
        cmd.args(["session", "show", s(&file)]).stdout(Stdio::piped()).stderr(Stdio::piped());
        if json {
            cmd.arg("--json");
        }
        let mut child = cmd.spawn().unwrap();
        drop(child.stdout.take()); // the reader (`head`) is gone
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_eq!(out.status.code(), Some(0), "{stderr}");
    }
}

#[test]
fn attack_governing_files_in_the_workspace_are_refused_in_every_mode() {
    if skip("attack_governing_files_in_the_workspace_are_refused_in_every_mode") {
        return;
    }
    for id in identities() {
        let d = dirs("att-gov-ws");
        let marker = d.out.join("ran-unconfined");
        // A session file kept in the workspace while its mode is read-only (the docs
        // accept that), and a refusing approver plus its audit log in the workspace.
        let sess = d.ws.join("session.jsonl");
        std::fs::write(&sess, "{\"at\":\"t\",\"event\":\"set-mode\",\"mode\":\"read-only\"}\n").unwrap();
        let approver = d.ws.join("approve.sh");
        write_script(&approver, "#!/bin/sh\nexit 1\n");
        let log = d.ws.join("audit.jsonl");
        chown_tree(d.ws.parent().unwrap(), id);
        // Any ordinary workspace-write call in that workspace (the adversary) widens the
        // session and turns the approver into a yes-man.
        let forge = "echo '{\"at\":\"t\",\"event\":\"set-mode\",\"mode\":\"full-access\"}' >> session.jsonl; \
                     printf '#!/bin/sh\\nexit 0\\n' > approve.sh";
        let out = cordon_as(id, &["run", "--json", "-c", forge], &d.ws, &[]);
        assert_eq!(out.code, 0, "{id:?}: the workspace-write run itself: {}", out.stderr);
        let cmd = format!("echo > '{}'", marker.display());
        let out = cordon_as(id, &["run", "--json", "--session", s(&sess), "-c", &cmd], &d.ws, &[]);
        assert!(!marker.exists(), "{id:?}: a session file in the workspace widened the run to full-access");
        assert_eq!(out.json()["error"]["code"], "GOVERNING_FILE_WRITABLE", "{id:?}: {}", out.stdout);
        let out = cordon_as(
            id,
            &[
                "run",
                "--json",
                "--mode",
                "read-only",
                "--escalate-to",
                "full-access",
                "--approver",
                s(&approver),
                "--audit-log",
                s(&log),
                "-c",
                &cmd,
            ],
            &d.ws,
            &[],
        );
        assert!(!marker.exists(), "{id:?}: an approver in the workspace granted full-access");
        assert_eq!(out.json()["error"]["code"], "GOVERNING_FILE_WRITABLE", "{id:?}: {}", out.stdout);
        // Positive control: the same session and approver kept outside the workspace.
        let sess2 = d.gov.join("session.jsonl");
        std::fs::write(&sess2, "{\"at\":\"t\",\"event\":\"set-mode\",\"mode\":\"read-only\"}\n").unwrap();
        chown_tree(&sess2, id);
        let out = cordon_as(id, &["run", "--json", "--session", s(&sess2), "-c", &cmd], &d.ws, &[]);
        assert_eq!(out.json()["sandbox"]["mode"], "read-only", "{id:?}: {}", out.stdout);
        assert!(!marker.exists());
    }
}

#[test]
fn cli_approver_sees_a_file_write_denial_in_live_mode() {
    // Without --json the command's output streams live; the supervisor still records
    // the refused write, so the approver is asked (it used to see no denial at all).
    if skip("cli_approver_sees_a_file_write_denial_in_live_mode") {
        return;
    }
    let d = dirs("cli-approver-live");
    let target = d.out.join("live-effect");
    let dump = d.gov.join("request.json");
    let log = d.gov.join("audit.jsonl");
    let script = approver_script(&d.gov, &dump, 1);
    let cmd = format!("echo x > '{}'; s=$?; echo done; exit $s", target.display());
    let out = cordon(&["run", "--approver", s(&script), "--audit-log", s(&log), "-c", &cmd], &d.ws, &[]);
    assert!(out.stdout.contains("done"), "live output: {}", out.stdout);
    assert!(!target.exists(), "refused: nothing was written outside");
    let raw =
        std::fs::read_to_string(&dump).unwrap_or_else(|e| panic!("the approver was not asked ({e}): {}", out.stderr));
    let got: Value = serde_json::from_str(raw.trim()).unwrap();
    let denials = got["denials"].as_array().cloned().unwrap_or_default();
    assert!(
        denials.iter().any(|x| x["kind"] == "file-write" && x["target"] == s(&target)),
        "the request names the refused write: {raw}"
    );
    assert!(out.stderr.contains("cordon: denied write"), "live notes: {}", out.stderr);
}

// ------------------------------------------------------------------ narrow grants

/// A git repository in `ws` with one commit, made on the host.
fn git_repo(ws: &Path) {
    let sh = |script: &str| {
        let out = std::process::Command::new("/bin/sh").arg("-c").arg(script).current_dir(ws).output().unwrap();
        assert!(out.status.success(), "{script}: {out:?}");
    };
    sh("git init -q -b main . && echo a > a.txt && git add a.txt \
        && git -c user.name=t -c user.email=t@x commit -q -m one && echo b >> a.txt");
}

fn commit_count(ws: &Path) -> usize {
    let out = std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "rev-list", "--count", "HEAD"])
        .current_dir(ws)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0)
}

#[test]
fn cli_git_commit_through_a_narrow_write_grant() {
    // `git commit` is denied in workspace-write (.git is protected). The approver is
    // asked for exactly that grant, "write .git" for one retry, not for full-access:
    // the retry commits (judged on the host) with the mode and the network unchanged,
    // and the grant is in the request, the audit log and the fingerprint.
    if skip("cli_git_commit_through_a_narrow_write_grant") {
        return;
    }
    if which::which("git").is_err() {
        return skip_regardless("cli_git_commit_through_a_narrow_write_grant", "no git");
    }
    let d = dirs("narrow-git");
    git_repo(&d.ws);
    let dump = d.gov.join("request.json");
    let log = d.gov.join("audit.jsonl");
    let script = approver_script(&d.gov, &dump, 0);
    let cmd = "git -c user.name=t -c user.email=t@x commit -qam two";
    let args = ["run", "--json", "--approver", s(&script), "--audit-log", s(&log), "-c", cmd];
    let out = cordon(&args, &d.ws, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(commit_count(&d.ws), 2, "the granted retry committed");
    let v = out.json();
    assert_eq!(v["sandbox"]["mode"], "workspace-write", "the retry stayed confined: {v}");
    let esc = &v["escalation"];
    assert_eq!(esc["first_run"]["sandbox"]["denied"], true);
    let git = d.ws.join(".git");
    let req: Value = serde_json::from_str(&std::fs::read_to_string(&dump).unwrap()).unwrap();
    assert_eq!(req["grant"], serde_json::json!({"kind": "write", "path": s(&git)}), "{req}");
    assert_eq!((req["from"].as_str(), req["to"].as_str()), (Some("workspace-write"), Some("workspace-write")));
    assert_eq!(req["retry_policy"]["network"], false, "the network stays off: {req}");
    assert!(!req["retry_policy"]["protected"].as_array().unwrap().iter().any(|p| p == s(&git)), "{req}");
    let lines = audit_lines(&log);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].grant, Some(escalation::Grant::Write { path: git.clone() }));
    assert_eq!(lines[0].fingerprint, req["fingerprint"].as_str().unwrap());
    // The --ask prompt asks for exactly that grant.
    let parsed: EscalationRequest = serde_json::from_value(req.clone()).unwrap();
    let prompt = escalation::terminal_prompt(&parsed);
    // A git directory: git's own files only, never what host git runs.
    let what = format!("allowed to write git's own files in {}", git.display());
    assert!(
        prompt.contains(&what) && prompt.contains("not its config or hooks") && prompt.contains("network unchanged")
    );
    assert!(!prompt.contains("full-access"), "{prompt}");
    assert!(out.stderr.contains("grant `write"), "{}", out.stderr);
}

#[test]
fn cli_forged_denial_never_reaches_the_approver() {
    // A command that only prints what a denial looks like, and fails, was not denied:
    // the approver is never asked and nothing is retried.
    if skip("cli_forged_denial_never_reaches_the_approver") {
        return;
    }
    let d = dirs("narrow-forged");
    let dump = d.gov.join("request.json");
    let script = approver_script(&d.gov, &dump, 0);
    let git = d.ws.join(".git");
    let cmd = format!(
        "echo \"fatal: Unable to create '{0}/index.lock': Read-only file system\" >&2; \
         echo 'cordon: denied write {0}/index.lock (a protected path)' >&2; exit 128",
        git.display()
    );
    let out = cordon(&["run", "--json", "--approver", s(&script), "-c", &cmd], &d.ws, &[]);
    assert_eq!(out.code, 128, "{}", out.stderr);
    assert!(!dump.exists(), "the approver was asked about a forged denial");
    assert_eq!(out.json()["sandbox"]["denied"], false);
}

// ------------------------------------------------------------------ asked only when it could help

/// A passing test run that tries the network on the way (a reachability check that
/// tolerates failure): its connect to another host is refused with the network off (a
/// real denial), and the run passes anyway. (urllib3's IPv6 probe, a `bind` on `::1`,
/// was the example until runs got a loopback of their own: it now succeeds.)
const PASSING_WITH_A_DENIAL: &str = "python3 -c '
import socket
try:
    socket.create_connection((\"192.0.2.1\", 80), 1)
except OSError:
    pass
print(\"1 passed\")
'";

#[test]
fn cli_a_passing_run_with_a_denial_asks_nobody() {
    // A grant could not change the outcome of a run that succeeded: no approver is
    // asked (--approver, --ask), nothing is retried, and the denial is still reported.
    if skip("cli_a_passing_run_with_a_denial_asks_nobody") {
        return;
    }
    let d = dirs("passing");
    let dump = d.gov.join("request.json");
    let log = d.gov.join("audit.jsonl");
    let script = approver_script(&d.gov, &dump, 0);
    let args = ["run", "--json", "--approver", s(&script), "--audit-log", s(&log), "-c", PASSING_WITH_A_DENIAL];
    let out = cordon(&args, &d.ws, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = out.json();
    assert_eq!(v["sandbox"]["denied"], true, "the denial is reported: {v}");
    assert_eq!(v["sandbox"]["denials"][0]["kind"], "network", "{v}");
    assert!(v["stdout"]["text"].as_str().unwrap().contains("1 passed"), "{v}");
    assert!(v["escalation"]["not_offered"].as_str().unwrap().contains("succeeded"), "{v}");
    assert!(v["escalation"]["request"].is_null() && v["escalation"]["first_run"].is_null(), "{v}");
    assert!(!dump.exists(), "the approver was asked after a passing run");
    assert!(audit_lines(&log).is_empty(), "no decision, no audit line");

    // Live mode: the output and the denial line, no question, no retry.
    let live =
        cordon(&["run", "--approver", s(&script), "--audit-log", s(&log), "-c", PASSING_WITH_A_DENIAL], &d.ws, &[]);
    assert_eq!(live.code, 0, "{}", live.stderr);
    assert_eq!(live.stdout.matches("1 passed").count(), 1, "ran once: {}", live.stdout);
    assert!(live.stderr.contains("cordon: denied network"), "{}", live.stderr);
    assert!(!dump.exists());

    // --ask on a terminal: no question appears; the run's output is shown once.
    let o =
        pty_session(&["run", "--ask", "--audit-log", s(&log), "-c", PASSING_WITH_A_DENIAL], &d.ws, None, true, &d.gov);
    assert_eq!(o.code, 0, "{}", o.transcript);
    assert!(!o.transcript.contains("[y/N]") && !o.answered, "asked after a passing run: {}", o.transcript);
    assert_eq!(o.stdout.matches("1 passed").count(), 1, "{}", o.stdout);
    assert!(o.transcript.contains("cordon: denied network"), "{}", o.transcript);
    assert!(audit_lines(&log).is_empty());

    // Control: the same denial in a run that fails asks for the network grant.
    let failing = format!("{PASSING_WITH_A_DENIAL}; exit 1");
    let out = cordon(&["run", "--json", "--approver", s(&script), "--audit-log", s(&log), "-c", &failing], &d.ws, &[]);
    assert_eq!(out.json()["escalation"]["request"]["grant"]["kind"], "network", "{}", out.stdout);
    assert!(dump.exists(), "control: a failing run asks");
}

// ------------------------------------------------------------------ the retry's output is the user's

#[test]
fn cli_ask_shows_the_granted_retrys_output() {
    // `--ask` in live mode: the first run is captured (shown escaped in the prompt), and
    // the granted retry — here a narrow `.git` grant, confined like the first run —
    // writes to cordon's stdout and stderr as a run without --ask would: to a file, and
    // to the terminal (which it sees as a terminal). It used to be captured and lost.
    if skip("cli_ask_shows_the_granted_retrys_output") {
        return;
    }
    if which::which("git").is_err() {
        return skip_regardless("cli_ask_shows_the_granted_retrys_output", "no git");
    }
    let cmd = "test -t 1 && echo out-tty; echo out-line; echo err-line >&2; \
               git -c user.name=t -c user.email=t@x commit -q --allow-empty -m two";
    for stdout_to_file in [true, false] {
        let d = dirs("ask-output");
        git_repo(&d.ws);
        let log = d.gov.join("audit.jsonl");
        let o = pty_session(
            &["run", "--ask", "--audit-log", s(&log), "-c", cmd],
            &d.ws,
            Some("y\n"),
            stdout_to_file,
            &d.gov,
        );
        assert!(o.answered, "{}", o.transcript);
        assert_eq!(o.code, 0, "the retry's status: {}", o.transcript);
        assert_eq!(commit_count(&d.ws), 2, "the granted retry committed");
        let asked = o.transcript.find("[y/N] ").expect("the question");
        let (before, after) = o.transcript.split_at(asked);
        assert!(before.contains("  | out-line"), "the first run's output is in the prompt: {before}");
        assert!(
            before.contains(&format!("proposed: write git's own files in {}", d.ws.join(".git").display())),
            "proposed names the grant: {before}"
        );
        assert_eq!(before.matches("command:").count(), 1, "command shown once: {before}");
        assert_eq!(before.matches("cwd:").count(), 1, "cwd shown once: {before}");
        let started = after.find("running the command once more").expect("the decision line before the retry");
        let retry = &after[started..];
        assert_eq!(retry.matches("err-line\r\n").count(), 1, "the retry's stderr on the terminal: {after:?}");
        if stdout_to_file {
            assert_eq!(o.stdout, "out-line\n", "the retry's stdout, once, in the file: {:?}", o.stdout);
            assert!(!after.contains("out-line"), "{after:?}");
        } else {
            assert_eq!(
                retry.matches("out-tty\r\nout-line\r\n").count(),
                1,
                "the retry's stdout on the terminal: {after:?}"
            );
        }
    }
}

#[test]
fn cli_approver_live_retry_streams_its_output() {
    // `--approver` in live mode: both runs stream (the first as it runs); the retry's
    // output follows cordon's decision line.
    if skip("cli_approver_live_retry_streams_its_output") {
        return;
    }
    if which::which("git").is_err() {
        return skip_regardless("cli_approver_live_retry_streams_its_output", "no git");
    }
    let d = dirs("approver-output");
    git_repo(&d.ws);
    let script = approver_script(&d.gov, &d.gov.join("req.json"), 0);
    let cmd = "echo out-line; echo err-line >&2; git -c user.name=t -c user.email=t@x commit -q --allow-empty -m two";
    let out =
        cordon(&["run", "--approver", s(&script), "--audit-log", s(&d.gov.join("a.jsonl")), "-c", cmd], &d.ws, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "out-line\nout-line\n", "{}", out.stderr);
    let (_, retry) = out.stderr.split_once("running the command once more\n").expect(&out.stderr);
    assert_eq!(retry, "err-line\n", "{}", out.stderr);
    assert_eq!(commit_count(&d.ws), 2);
}

// ------------------------------------------------------------------ approvals bound to what will run

#[test]
fn attack_script_rewritten_by_the_first_run_is_not_approved_by_fingerprint() {
    // A policy program that grants calls by fingerprint ("always allow this exact
    // call"). The call `bash build.sh` is approved once for the script as it is. Then
    // a helper the script runs (not named in the command) turns malicious and rewrites
    // build.sh during the confined first run: by default the fingerprint covers the
    // bytes of named files inside writable roots, so the rewritten script is a
    // different call, the program refuses, and its payload never runs.
    if skip("attack_script_rewritten_by_the_first_run_is_not_approved_by_fingerprint") {
        return;
    }
    for id in identities() {
        let d = dirs("att-fp");
        let (effect, payload) = (d.out.join("effect"), d.out.join("payload"));
        let (allow, dump) = (d.gov.join("allow"), d.gov.join("request.json"));
        std::fs::write(&allow, "none").unwrap();
        let approver = d.gov.join("by-fingerprint.sh");
        write_script(
            &approver,
            &format!(
                "#!/bin/sh\nreq=$(cat)\nprintf '%s' \"$req\" > '{dump}'\n\
                 case \"$req\" in *\"\\\"fingerprint\\\":\\\"$(cat '{allow}')\\\"\"*) exit 0;; esac\nexit 1\n",
                dump = dump.display(),
                allow = allow.display()
            ),
        );
        let original = format!("sh ./step.sh\necho built > '{}'\n", effect.display());
        std::fs::write(d.ws.join("build.sh"), &original).unwrap();
        std::fs::write(d.ws.join("step.sh"), "true\n").unwrap();
        std::fs::write(d.ws.join("evil.sh"), format!("echo pwned > '{}'\n", payload.display())).unwrap();
        chown_tree(d.ws.parent().unwrap(), id);
        let log = d.gov.join("audit.jsonl");
        let run = || {
            cordon_as(
                id,
                &["run", "--json", "--approver", s(&approver), "--audit-log", s(&log), "--", "bash", "build.sh"],
                &d.ws,
                &[],
            )
        };
        // The call as it is: refused, and its fingerprint learnt.
        let out = run();
        assert_eq!(out.json()["escalation"]["decision"]["verdict"], "refused", "{id:?}: {}", out.stdout);
        let req: Value = serde_json::from_str(&std::fs::read_to_string(&dump).unwrap()).unwrap();
        assert_eq!(req["bound_files"][0]["path"], s(&d.ws.join("build.sh")), "{id:?}: {req}");
        std::fs::write(&allow, req["fingerprint"].as_str().unwrap()).unwrap();
        // Control: the same call is now granted by fingerprint, and its retry runs.
        let out = run();
        assert_eq!(out.json()["escalation"]["decision"]["verdict"], "granted", "{id:?}: {}", out.stdout);
        assert!(effect.exists(), "{id:?}: control: the granted retry ran");
        std::fs::remove_file(&effect).unwrap();
        // The attack: the helper rewrites build.sh during the first run. Without a
        // layer to hold the first run's writes (CORDON_DISABLE_OVERLAY=1) the rewrite
        // reaches the host, the bound fingerprint differs and the program refuses.
        // With one (the default here), the rewrite is held back and dropped: the
        // approved script is the one on the host and the one the retry runs.
        for no_layer in [true, false] {
            std::fs::write(d.ws.join("step.sh"), "mv evil.sh build.sh\n").unwrap();
            std::fs::write(d.ws.join("build.sh"), &original).unwrap();
            std::fs::write(d.ws.join("evil.sh"), format!("echo pwned > '{}'\n", payload.display())).unwrap();
            chown_tree(d.ws.parent().unwrap(), id);
            let _ = std::fs::remove_file(&effect);
            let env: &[(&str, &str)] = if no_layer { &[("CORDON_DISABLE_OVERLAY", "1")] } else { &[] };
            let out = cordon_as(
                id,
                &["run", "--json", "--approver", s(&approver), "--audit-log", s(&log), "--", "bash", "build.sh"],
                &d.ws,
                env,
            );
            let v = out.json();
            assert!(!payload.exists(), "{id:?} (no layer: {no_layer}): the rewritten script ran under the approval");
            if no_layer {
                assert_eq!(v["escalation"]["decision"]["verdict"], "refused", "{id:?}: {}", out.stdout);
                assert!(!effect.exists(), "{id:?}");
                let req: Value = serde_json::from_str(&std::fs::read_to_string(&dump).unwrap()).unwrap();
                assert_ne!(req["fingerprint"].as_str(), Some(std::fs::read_to_string(&allow).unwrap().as_str()));
            } else {
                assert_eq!(v["escalation"]["decision"]["verdict"], "granted", "{id:?}: {}", out.stdout);
                assert!(effect.exists(), "{id:?}: the approved script ran");
            }
        }
    }
}

// ------------------------------------------------------------------ a retry from where the first run started

/// Whether this host holds writes back (overlayfs with a mount namespace, the landlock
/// runner); under `CORDON_MUST_ENFORCE=1` it must.
fn layers_here(test: &str) -> bool {
    let exec = executor();
    let d = dirs("can-hold");
    let spec = exec.resolve(request("true", &d.ws, Mode::WorkspaceWrite)).unwrap();
    match exec.can_hold(&spec) {
        Ok(()) => true,
        Err(why) => {
            skip_or_fail(test, &format!("writes cannot be held back here: {why}"));
            false
        }
    }
}

#[test]
fn cli_compound_commit_lands_once_after_a_granted_retry() {
    // `echo v2 >> README && git add README && git commit`: the first run appends, then
    // is refused at `git add` (.git protected). Its append is held back and dropped
    // when the grant is asked for, so the granted retry appends once and commits once;
    // a refused grant leaves the workspace exactly as it was.
    if skip("cli_compound_commit_lands_once_after_a_granted_retry") || which::which("git").is_err() {
        return;
    }
    if !layers_here("cli_compound_commit_lands_once_after_a_granted_retry") {
        return;
    }
    for id in identities() {
        let d = dirs("compound");
        git_repo(&d.ws);
        std::process::Command::new("git").args(["checkout", "-q", "--", "a.txt"]).current_dir(&d.ws).status().unwrap();
        chown_tree(d.ws.parent().unwrap(), id);
        let yes = approver_script(&d.gov, &d.gov.join("yes.json"), 0);
        let no = approver_script(&d.gov, &d.gov.join("no.json"), 1);
        let log = d.gov.join("audit.jsonl");
        let cmd = "echo v2 >> a.txt && git add a.txt && git -c user.name=t -c user.email=t@x commit -qm edit";
        let status = |ws: &Path| {
            let o = std::process::Command::new("git")
                .args(["-c", "safe.directory=*", "status", "--porcelain"])
                .current_dir(ws)
                .output()
                .unwrap();
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        // Refused: nothing half done.
        let out =
            cordon_as(id, &["run", "--json", "--approver", s(&no), "--audit-log", s(&log), "-c", cmd], &d.ws, &[]);
        let v = out.json();
        assert_eq!(v["escalation"]["decision"]["verdict"], "refused", "{id:?}: {}", out.stdout);
        assert_eq!(
            std::fs::read_to_string(d.ws.join("a.txt")).unwrap(),
            "a\n",
            "{id:?}: the refused run's append stayed"
        );
        assert_eq!(status(&d.ws), "", "{id:?}: the workspace changed");
        assert_eq!(commit_count(&d.ws), 1);
        let req: Value = serde_json::from_str(&std::fs::read_to_string(d.gov.join("no.json")).unwrap()).unwrap();
        let changes = &req["first_run_changes"];
        assert_eq!(changes["held_back"], true, "{id:?}: {req}");
        assert_eq!(changes["changes"][0]["path"], s(&d.ws.join("a.txt")), "{id:?}: {req}");
        assert_eq!(v["held"]["fate"], "discarded", "{id:?}: {v}");
        assert!(out.stderr.contains("held back and dropped"), "{id:?}: {}", out.stderr);
        // Granted: the retry starts from the untouched workspace; v2 once, one commit.
        let out =
            cordon_as(id, &["run", "--json", "--approver", s(&yes), "--audit-log", s(&log), "-c", cmd], &d.ws, &[]);
        assert_eq!(out.code, 0, "{id:?}: {}", out.stderr);
        assert_eq!(std::fs::read_to_string(d.ws.join("a.txt")).unwrap(), "a\nv2\n", "{id:?}: v2 twice?");
        assert_eq!(commit_count(&d.ws), 2);
        assert_eq!(status(&d.ws), "", "{id:?}");
        let show = std::process::Command::new("git")
            .args(["-c", "safe.directory=*", "show", "HEAD:a.txt"])
            .current_dir(&d.ws)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&show.stdout), "a\nv2\n", "{id:?}: the commit holds v2 once");
    }
}

#[test]
fn cli_writes_are_applied_when_nobody_is_asked() {
    // Under --approver a run that needs no grant behaves as without the layer: its
    // writes reach the host (modes, links, times, removals), listed in `held`.
    if skip("cli_writes_are_applied_when_nobody_is_asked")
        || !layers_here("cli_writes_are_applied_when_nobody_is_asked")
    {
        return;
    }
    let d = dirs("applied");
    std::fs::write(d.ws.join("gone"), "x").unwrap();
    std::fs::create_dir(d.ws.join("olddir")).unwrap();
    std::fs::write(d.ws.join("olddir/f"), "f").unwrap();
    let script = approver_script(&d.gov, &d.gov.join("req.json"), 0);
    let cmd = "echo new > new && chmod 750 new && ln -s new link && ln new hard && rm gone && rm -rf olddir \
               && mkdir -p a/b && echo c > a/b/c && touch -d @1000000000 a/b/c && mkfifo pipe";
    let out = cordon(
        &["run", "--json", "--approver", s(&script), "--audit-log", s(&d.gov.join("a.jsonl")), "-c", cmd],
        &d.ws,
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = out.json();
    assert_eq!(v["held"]["fate"], "applied", "{v}");
    assert!(!d.gov.join("req.json").exists(), "nobody was asked");
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    assert_eq!(std::fs::read_to_string(d.ws.join("new")).unwrap(), "new\n");
    assert_eq!(std::fs::metadata(d.ws.join("new")).unwrap().mode() & 0o7777, 0o750);
    assert_eq!(std::fs::read_link(d.ws.join("link")).unwrap(), Path::new("new"));
    assert_eq!(std::fs::metadata(d.ws.join("hard")).unwrap().ino(), std::fs::metadata(d.ws.join("new")).unwrap().ino());
    assert!(!d.ws.join("gone").exists() && !d.ws.join("olddir").exists());
    assert_eq!(std::fs::metadata(d.ws.join("a/b/c")).unwrap().mtime(), 1_000_000_000);
    assert!(std::fs::symlink_metadata(d.ws.join("pipe")).unwrap().file_type().is_fifo());
}

#[test]
fn cli_preview_lists_the_changes_and_leaves_the_host_as_it_was() {
    if skip("cli_preview_lists_the_changes_and_leaves_the_host_as_it_was") {
        return;
    }
    if !layers_here("cli_preview_lists_the_changes_and_leaves_the_host_as_it_was") {
        return;
    }
    let d = dirs("preview");
    std::fs::write(d.ws.join("README"), "a\n").unwrap();
    let cmd = "echo b >> README && echo n > new && rm README.bak 2>/dev/null; mkdir d && echo x > d/x";
    let out = cordon(&["run", "--json", "--preview", "-c", cmd], &d.ws, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = out.json();
    assert_eq!(v["held"]["fate"], "preview", "{v}");
    let listed: Vec<(String, String)> = v["held"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["path"].as_str().unwrap().to_string(), c["change"].as_str().unwrap().to_string()))
        .collect();
    for (p, c) in [("README", "modified"), ("new", "created"), ("d", "created"), ("d/x", "created")] {
        assert!(listed.contains(&(s(&d.ws.join(p)).to_string(), c.to_string())), "{p} {c}: {listed:?}");
    }
    assert_eq!(std::fs::read_to_string(d.ws.join("README")).unwrap(), "a\n", "the host changed");
    assert!(!d.ws.join("new").exists() && !d.ws.join("d").exists());
    // Live mode: one line per change.
    let live = cordon(&["run", "--preview", "-c", cmd], &d.ws, &[]);
    assert!(
        live.stderr.contains(&format!("cordon: would have modified {}", d.ws.join("README").display())),
        "{}",
        live.stderr
    );
    assert!(!d.ws.join("new").exists());
}

#[test]
fn cli_without_a_layer_the_approver_sees_what_the_first_run_changed() {
    // CORDON_DISABLE_OVERLAY=1 emulates a host without overlayfs: the first run writes
    // to the host, and the approver is shown exactly what it changed; --preview is
    // refused before anything runs.
    if skip("cli_without_a_layer_the_approver_sees_what_the_first_run_changed") || which::which("git").is_err() {
        return;
    }
    let d = dirs("no-layer");
    git_repo(&d.ws);
    let dump = d.gov.join("req.json");
    let script = approver_script(&d.gov, &dump, 1);
    let env = [("CORDON_DISABLE_OVERLAY", "1")];
    let cmd = "echo v2 >> a.txt && echo n > new.txt && git add a.txt";
    let out = cordon(
        &["run", "--json", "--approver", s(&script), "--audit-log", s(&d.gov.join("a.jsonl")), "-c", cmd],
        &d.ws,
        &env,
    );
    assert_eq!(out.json()["escalation"]["decision"]["verdict"], "refused", "{}", out.stdout);
    let req: Value = serde_json::from_str(&std::fs::read_to_string(&dump).unwrap()).unwrap();
    let fc = &req["first_run_changes"];
    assert_eq!(fc["held_back"], false, "{req}");
    let paths: Vec<&str> = fc["changes"].as_array().unwrap().iter().map(|c| c["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&s(&d.ws.join("a.txt"))) && paths.contains(&s(&d.ws.join("new.txt"))), "{paths:?}");
    assert!(d.ws.join("new.txt").exists(), "no layer: the first run's writes are on the host");
    let parsed: EscalationRequest = serde_json::from_value(req).unwrap();
    let prompt = escalation::terminal_prompt(&parsed);
    assert!(prompt.contains("already made on the host") && prompt.contains("new.txt"), "{prompt}");
    let out = cordon(&["run", "--json", "--preview", "-c", "echo x > preview-ran"], &d.ws, &env);
    assert_eq!(out.code, 125, "{}", out.stderr);
    assert_eq!(out.json()["error"]["code"], "PREVIEW_UNAVAILABLE");
    assert!(!d.ws.join("preview-ran").exists(), "nothing ran");
}
