//! Escalation: one strictly wider retry of one exact call, granted by an approver.
//!
//! [`run_with_escalation`] runs a request. When the sandbox denied something
//! (`sandbox.denied`, which is true only with evidence), it builds an
//! [`EscalationRequest`] — the command, cwd, current mode, the strictly wider mode asked
//! for (default: the next rung), the caller's justification, the denials and a
//! fingerprint of the call — and hands it to an [`Approver`]. Only if the approver
//! grants it does the same spec (same argv, cwd, environment, stdin, deadline) run once
//! more, at the wider mode. A caller may also ask up front
//! ([`EscalationOptions::up_front`]): then nothing runs until the approver grants.
//!
//! Rules (tested in tests/escalation.rs, explained in docs/escalation.md):
//! - A target that is not strictly wider than the call's mode (by the ladder's `Ord`)
//!   is refused with [`EscalationError::NotWider`] before anything runs.
//! - Never offered for `SANDBOX_UNAVAILABLE` or any other error (those are `Err`, not a
//!   denied result), for a run that succeeded ([`RunResult::succeeded`]: a grant could
//!   not change its outcome), for a run whose runner failed or that was aborted, or
//!   when the wider mode cannot be enforced here.
//! - One shot: at most one retry per call; nothing is remembered, so the next call runs
//!   at its own (session or base) mode again.
//! - Every decision is appended to the [`AuditLog`] when one is given; an audit write
//!   that fails stops the retry (fail closed).
//! - The governing files ([`GoverningFiles`]: session file, audit log, approver program
//!   and its interpreter via [`Approver::governing`]) are checked against the call's
//!   policy and the wider policy before anything runs, and refused inside cordon's
//!   state directory; the audit log is opened once and appended through that fd.
//! - The fingerprint covers the bytes of the files the command names inside the
//!   workspace and writable roots (with [`EscalationOptions::bind_files`], of every
//!   named file), and the retry is refused if they changed.
//!
//! The threat model (the confined command as adversary) is in docs/escalation.md.
//!
//! What it does not do: it does not classify denials (the executor does), keep grants
//! for later calls, or change a session. The fingerprint is an identifier (FNV-1a
//! 128-bit over a canonical encoding), not a MAC: it names a call in the audit log and to
//! an approver; it proves nothing against someone who can write the log.

use crate::error::CordonError;
use crate::exec::Executor;
use crate::mode::Mode;
use crate::policy::{resolve_policy, ExecutionPolicy, PolicyRequest};
use crate::request::{Command, Output, Request, Spec};
use crate::result::{Denial, RunResult};
use crate::runner::{self, RunnerChoice};
use crate::session::{
    append_json_line, open_governing, rfc3339_utc, GoverningFileError, GoverningFiles, GoverningKind, OpenFor,
};
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::io::{BufRead, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

mod approver;
mod audit;
mod fingerprint;
mod outcome;
mod prompt;
mod request;

pub use approver::{ProgramApprover, TerminalApprover};
pub use audit::{AuditLog, AuditRecord};
pub use fingerprint::fingerprint;
use fingerprint::{bind, fingerprint_granting, fnv1a128, recheck, BoundFile};
pub use outcome::{EscalatedOutcome, EscalationError, EscalationOptions, EscalationRecord};
pub use prompt::{approval_text, fresh_boundary, printable, terminal_prompt};
use prompt::{clip, PROMPT_LINE};
pub use request::{
    next_wider, Approver, ApproverInfo, BoundFileView, CommandView, Decision, EscalationRequest, FirstRunChanges,
    Grant, PolicyView, Trigger, Verdict,
};

/// Version of the [`EscalationRequest`] JSON format.
pub const REQUEST_VERSION: u32 = 1;
/// How long a [`ProgramApprover`] may take before it is killed and the answer is no.
/// Long enough for a program that asks a person through some other channel.
pub const APPROVER_TIMEOUT: Duration = Duration::from_secs(600);
/// The terminal [`TerminalApprover`] asks on by default.
pub const DEFAULT_TTY: &str = "/dev/tty";
/// The fixed `PATH` a [`ProgramApprover`] runs with (and against which an
/// `#!/usr/bin/env NAME` line is resolved): never the caller's, which may name a
/// directory the confined command can write.
pub const APPROVER_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// Variables copied from cordon's environment into a [`ProgramApprover`]'s (besides
/// the fixed `PATH`); everything else is dropped.
const APPROVER_ENV_KEEP: &[&str] = &["HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ"];
/// The largest file an approval is bound to; a bigger named file means no approver is
/// asked (or, up front, an error) rather than an unbound approval.
pub const MAX_BOUND_FILE: u64 = 16 * 1024 * 1024;
/// The most files bound to one fingerprint.
const MAX_BOUND_FILES: usize = 64;
/// The most lines of the first run's output the terminal prompt repeats (escaped).
const PROMPT_OUTPUT_LINES: usize = 20;
/// Sent to the terminal before the prompt: leave the alternate screen, show the cursor,
/// reset the scroll region, attributes, character sets and modes (soft reset, DECSTR),
/// then a full reset (RIS), so nothing a command left behind hides or fakes the prompt.
pub const TERMINAL_RESET: &str = "\x1b[?1049l\x1b[?25h\x1b[r\x1b[0m\x1b(B\x1b[!p\x1bc";
/// Random bytes in a fence boundary ([`fresh_boundary`]): unguessable, so command
/// output cannot close the fence early and continue as if cordon were speaking.
pub const BOUNDARY_BYTES: usize = 16;
/// The longest answer read from the terminal; the rest of a longer line is ignored.
const MAX_ANSWER: u64 = 1024;
/// Domain prefix of the fingerprint encoding (bump the version if the encoding changes).
const FINGERPRINT_DOMAIN: &[u8] = b"cordon-call-fingerprint-v1";
/// FNV-1a 128-bit offset basis and prime.
const FNV128_OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
const FNV128_PRIME: u128 = 0x0000000001000000000000000000013b;

/// Run `req`; when the confined run is denied, ask `approver` for one strictly wider
/// retry of exactly that call (or ask up front, per `opts`). See the module docs.
pub async fn run_with_escalation(
    exec: &Executor,
    req: Request,
    approver: &dyn Approver,
    opts: &EscalationOptions,
    audit: Option<&AuditLog>,
) -> Result<EscalatedOutcome, EscalationError> {
    run_with_escalation_until(exec, req, approver, opts, audit, std::future::pending()).await
}

/// Like [`run_with_escalation`]; `abort` resolving stops the running command (as in
/// [`Executor::run_until`]) or, while the approver decides, counts as a refusal.
pub async fn run_with_escalation_until(
    exec: &Executor,
    req: Request,
    approver: &dyn Approver,
    opts: &EscalationOptions,
    audit: Option<&AuditLog>,
    abort: impl Future<Output = ()>,
) -> Result<EscalatedOutcome, EscalationError> {
    let command = CommandView::from(&req.command);
    let policy_req = req.policy.clone();
    let spec = exec.resolve(req)?;
    run_resolved_with_escalation(exec, spec, &policy_req, command, approver, opts, audit, abort).await
}

/// [`run_with_escalation_until`] for a call already resolved into `spec` (from
/// `policy_req`, the policy part of its request, and with `command` as the caller gave
/// it): `cordon serve` and `cordon mcp` resolve and check each request against their
/// ceiling first.
#[allow(clippy::too_many_arguments)]
pub async fn run_resolved_with_escalation(
    exec: &Executor,
    spec: Spec,
    policy_req: &PolicyRequest,
    command: CommandView,
    approver: &dyn Approver,
    opts: &EscalationOptions,
    audit: Option<&AuditLog>,
    abort: impl Future<Output = ()>,
) -> Result<EscalatedOutcome, EscalationError> {
    let from = spec.policy.mode;
    for to in [opts.up_front, opts.on_denial].into_iter().flatten() {
        if to <= from {
            return Err(EscalationError::NotWider { from, to });
        }
    }
    let mut governing = opts.governing.clone();
    for (kind, path) in approver.governing() {
        governing.add(kind, path);
    }
    governing.refuse_under(exec.state_dir());
    governing.check(&spec.policy)?;
    // The wider spec is fixed now, before the command could change anything it names.
    let target = opts.up_front.or(opts.on_denial).or_else(|| if opts.narrow_only { None } else { next_wider(from) });
    let wider = match target.map(|to| widen(&spec, policy_req, to)) {
        Some(Ok(w)) => {
            governing.check(&w.policy)?;
            Some(Ok(w))
        }
        other => other,
    };
    if let Some(log) = audit {
        log.prepare()?;
    }
    tokio::pin!(abort);

    if let Some(to) = opts.up_front {
        let wide = wider.unwrap_or_else(|| widen(&spec, policy_req, to))?;
        runner::select(&wide.policy, exec.host(), wide.runner)?;
        let bound = bind(&command, &spec, opts)?;
        let request = build_request(Trigger::UpFront, command, &spec, &wide, opts, Vec::new(), &bound, None);
        let record = ask(approver, request, audit, &mut abort).await?;
        let retry = if record.decision.is_granted() {
            recheck(&bound)?;
            approver.retry_starts(&record);
            Some(exec.run_until(retry_spec(wide, opts), &mut abort).await)
        } else {
            None
        };
        return Ok(EscalatedOutcome { first: None, escalation: Some(record), not_offered: None, retry });
    }

    // A narrow grant's retry runs the program found now, like a wider mode's (`widen`).
    let program = pinned_program(&spec);
    let (mut first, mut held) = if opts.hold_writes {
        exec.run_held_until(spec.clone(), &mut abort).await?
    } else {
        (exec.run_until(spec.clone(), &mut abort).await?, crate::exec::Held::Nothing)
    };
    let mut outcome = EscalatedOutcome { first: None, escalation: None, not_offered: None, retry: None };
    if first.sandbox.denied {
        // The narrowest grant first: when every denial names one protected path, or
        // the network, only that is asked for (unless the caller named a mode).
        let mut narrow = if opts.on_denial.is_none() { narrow_grant(&first, &spec) } else { None };
        if let (Some((_, s)), Some(found)) = (&mut narrow, &program) {
            s.argv[0] = found.clone();
        }
        if let Some((_, s)) = &narrow {
            governing.check(&s.policy)?;
        }
        let (grant, wider) = match narrow {
            Some((g, s)) => (Some(g), Some(Ok(s))),
            None if opts.narrow_only => (None, Some(Err(NARROW_ONLY_NOT_OFFERED.to_string()))),
            None => {
                (None, wider.map(|w| w.map_err(|e| format!("the wider policy is not acceptable: [{}] {e}", e.code()))))
            }
        };
        // Fail closed: a named file that cannot be bound (too large, unreadable) means
        // no approval is asked for, and the first run's result stands.
        match offer(&first, wider, exec).and_then(|w| Ok((w, bind(&command, &spec, opts).map_err(|e| e.to_string())?)))
        {
            Err(why) => outcome.not_offered = Some(why),
            Ok((wide, bound)) => {
                let denials = first.sandbox.denials.clone();
                let mut request = build_request(Trigger::Denied, command, &spec, &wide, opts, denials, &bound, grant);
                let (changes, truncated) = held.changes();
                if held.held_back() || !changes.is_empty() {
                    request.first_run_changes =
                        Some(FirstRunChanges { held_back: held.held_back(), changes, truncated });
                }
                approver.first_run(&first);
                let record = ask(approver, request, audit, &mut abort).await?;
                // Asked: the first run's held writes are dropped whatever the answer, so
                // a retry starts from the workspace as it was before the call.
                first.held =
                    std::mem::replace(&mut held, crate::exec::Held::Nothing).settle(crate::layer::Fate::Discarded);
                if record.decision.is_granted() {
                    recheck(&bound)?;
                    approver.retry_starts(&record);
                    outcome.retry = Some(exec.run_until(retry_spec(wide, opts), &mut abort).await);
                }
                outcome.escalation = Some(record);
            }
        }
    }
    // Nobody was asked: the first run's held writes are its result, applied to the host.
    if let Some(applied) = held.settle(crate::layer::Fate::Applied) {
        first.held = Some(applied);
    }
    outcome.first = Some(first);
    Ok(outcome)
}

/// The spec the granted retry runs: `wide` with the caller's retry output handling
/// ([`EscalationOptions::retry_output`]), for a wider mode and a narrow grant alike.
fn retry_spec(mut wide: Spec, opts: &EscalationOptions) -> Spec {
    if let Some(output) = opts.retry_output {
        wide.output = output;
    }
    wide
}

/// The narrowest grant covering every denial of `first`, and the retry spec with only
/// that allowed (pure): see [`grant_for`]. Anything else: `None`, and the whole-mode
/// escalation applies.
pub fn narrow_grant(first: &RunResult, spec: &Spec) -> Option<(Grant, Spec)> {
    let grant = grant_for(&first.sandbox.denials, &spec.policy)?;
    let mut wide = spec.clone();
    match &grant {
        Grant::Network => wide.policy.network = true,
        // As narrow as git's own write commands when `path` is a git directory.
        Grant::Write { path } => wide.policy.grant_write(path),
        Grant::Host { host } => {
            // Exactly that host and port: never a wildcard, a range or another port.
            let pattern = host.parse::<crate::result::network::HostPort>().ok()?.pattern();
            let mut patterns = wide.policy.allow_hosts.patterns().to_vec();
            patterns.push(pattern);
            wide.policy.allow_hosts = crate::policy::hosts::AllowList::new(patterns);
        }
    }
    Some((grant, wide))
}

/// The one grant that covers every one of `denials` under `policy`: every denial a
/// refused write inside one protected path (the innermost that holds them all: that
/// path may then be written, see [`ExecutionPolicy::grant_write`]; the mode, the
/// network and every other path stay as they were), every denial a refusal of
/// cordon's proxy that listing one exact host and port would have let through (that
/// host and port, as the proxy parsed them), or every denial a refused network
/// operation in a confined policy with the network off. When that path is a git
/// directory and every write went to one entry host git takes commands from (`hooks`,
/// `config`: [`crate::policy::GIT_COMMAND_SOURCES`]), the grant is that entry, whose
/// prompt says so; a mix of both is granted git's own files only. (It looks at the
/// filesystem only to tell a git directory.)
pub fn grant_for(denials: &[Denial], policy: &ExecutionPolicy) -> Option<Grant> {
    use crate::result::DenialKind;
    if denials.is_empty() || !policy.mode.is_confined() {
        return None;
    }
    // Under `--allow-host` (or when cordon's proxy refused anything): every denial a
    // refusal that listing the same one host and port would have let through, as the
    // proxy parsed and normalized them (`ProxyRefusal::grantable`), never text the
    // command sent. A refusal with no such host (a malformed request, credentials, an
    // address the list does not open) offers no host grant.
    fn grantable(d: &Denial) -> Option<&crate::result::network::HostPort> {
        d.proxy.as_ref().and_then(|p| p.grantable())
    }
    if !policy.allow_hosts.is_empty() || denials.iter().any(|d| d.proxy.is_some()) {
        let host = grantable(&denials[0])?;
        let same = denials.iter().all(|d| grantable(d) == Some(host));
        return same.then(|| Grant::Host { host: host.to_string() });
    }
    if denials.iter().all(|d| d.kind == DenialKind::Network) {
        return (!policy.network).then_some(Grant::Network);
    }
    let targets: Vec<&Path> = denials
        .iter()
        .map(|d| (d.kind == DenialKind::FileWrite).then_some(d.target.as_deref()).flatten().map(Path::new))
        .collect::<Option<_>>()?;
    let path = policy
        .protected
        .iter()
        .filter(|p| targets.iter().all(|t| t.starts_with(p)))
        .max_by_key(|p| p.components().count())?;
    if crate::policy::is_git_dir(path) {
        let entry = |t: &Path| t.strip_prefix(path).ok().and_then(|r| r.iter().next()).map(|c| path.join(c));
        let first = entry(targets[0]);
        let source = first.filter(|e| {
            e.symlink_metadata().is_ok()
                && e.file_name().is_some_and(|n| crate::policy::GIT_COMMAND_SOURCES.iter().any(|s| n == *s))
                && targets.iter().all(|t| entry(t).as_ref() == Some(e))
        });
        if let Some(source) = source {
            return Some(Grant::Write { path: source });
        }
    }
    Some(Grant::Write { path: path.clone() })
}

/// Why a denied run that succeeded leads to no request: a grant could not change its
/// outcome (`import requests` probing IPv6 with the network off, `python3 -m venv`).
pub const SUCCEEDED_NOT_OFFERED: &str = "the command succeeded (exit status 0); a grant could not change the outcome";

/// Why a denied run leads to no request under [`EscalationOptions::narrow_only`] when
/// its denials name more than one thing.
pub const NARROW_ONLY_NOT_OFFERED: &str =
    "no single narrow grant (one protected path, the network, one host) covers these denials, and only a narrow \
     grant can be asked for here";

/// The wider spec for a denied run, or why none is offered.
fn offer(first: &RunResult, wider: Option<Result<Spec, String>>, exec: &Executor) -> Result<Spec, String> {
    if first.succeeded() {
        return Err(SUCCEEDED_NOT_OFFERED.into());
    }
    if first.sandbox.runner_failed {
        return Err("the runner failed; a denial from a broken runner is not evidence".into());
    }
    if first.aborted {
        return Err("the run was aborted".into());
    }
    let wide = match wider {
        None => return Err(format!("{} is already the widest mode", first.sandbox.mode)),
        Some(Err(why)) => return Err(why),
        Some(Ok(w)) => w,
    };
    runner::select(&wide.policy, exec.host(), wide.runner)
        .map_err(|e| format!("{} cannot be enforced here: [{}] {e}", wide.policy.mode, e.code()))?;
    Ok(wide)
}

/// The program a retry runs, found before the first run: the absolute path `argv[0]`
/// names on the call's `PATH` now, before the command could plant another one earlier
/// on it (`node_modules/.bin`, a workspace `bin`). `None` when argv[0] is already a
/// path or is not found (the retry then fails as the first run did).
fn pinned_program(spec: &Spec) -> Option<std::ffi::OsString> {
    if spec.argv[0].as_bytes().contains(&b'/') {
        return None;
    }
    crate::exec::resolve_program(&spec.argv[0], &spec.env, &spec.workdir).ok().map(PathBuf::into_os_string)
}

/// The same call at mode `to`: only the policy changes (the runner choice too when `to`
/// is unconfined, since a confinement backend does not apply there).
fn widen(spec: &Spec, policy_req: &PolicyRequest, to: Mode) -> Result<Spec, CordonError> {
    let policy = resolve_policy(&PolicyRequest { mode: to, ..policy_req.clone() }, &spec.workdir)?;
    let mut wide = spec.clone();
    wide.policy = policy;
    if let Some(found) = pinned_program(spec) {
        wide.argv[0] = found;
    }
    if !to.is_confined() {
        wide.runner = RunnerChoice::Auto;
    }
    Ok(wide)
}

#[allow(clippy::too_many_arguments)]
fn build_request(
    trigger: Trigger,
    command: CommandView,
    spec: &Spec,
    wide: &Spec,
    opts: &EscalationOptions,
    denials: Vec<Denial>,
    bound: &[BoundFile],
    grant: Option<Grant>,
) -> EscalationRequest {
    let mut env_names: Vec<String> = spec.env.iter().map(|(k, _)| k.to_string_lossy().into_owned()).collect();
    env_names.sort();
    env_names.dedup();
    EscalationRequest {
        version: REQUEST_VERSION,
        trigger,
        command,
        cwd: spec.workdir.clone(),
        from: spec.policy.mode,
        to: wide.policy.mode,
        fingerprint: fingerprint_granting(spec, bound, grant.as_ref()),
        grant,
        justification: opts.justification.clone(),
        denials,
        policy: PolicyView::from(&spec.policy),
        retry_policy: PolicyView::from(&wide.policy),
        env_names,
        bound_files: bound
            .iter()
            .map(|f| BoundFileView { path: f.path.clone(), contents: fnv1a128(&f.bytes), size: f.bytes.len() as u64 })
            .collect(),
        first_run_changes: None,
    }
}

async fn ask<F: Future<Output = ()>>(
    approver: &dyn Approver,
    request: EscalationRequest,
    audit: Option<&AuditLog>,
    abort: &mut Pin<&mut F>,
) -> Result<EscalationRecord, EscalationError> {
    let decision = tokio::select! {
        d = approver.decide(&request) => d,
        _ = abort => Decision::refuse("interrupted while waiting for the approver"),
    };
    let record = EscalationRecord { request, decision, approver: approver.info() };
    if let Some(log) = audit {
        log.append(&AuditRecord::new(&record))?;
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::approver::shebang_interpreters;
    use super::*;
    use crate::proxy::{ProxyRefusal, Refusal};
    use crate::request::{Output, Stdin};
    use std::time::Duration;

    fn spec() -> Spec {
        Spec {
            argv: vec!["/bin/bash".into(), "-c".into(), "echo hi".into()],
            workdir: "/ws".into(),
            timeout: Duration::from_secs(1),
            output_cap: 1,
            spill_cap: 1,
            stdin: Stdin::Null,
            output: Output::Capture,
            env: vec![("PATH".into(), "/bin".into()), ("HOME".into(), "/h".into())],
            policy: ExecutionPolicy {
                mode: Mode::ReadOnly,
                workspace: "/ws".into(),
                writable_roots: vec![],
                protected: vec![],
                network: false,
                best_effort: false,
                accept_gaps: Vec::new(),
                allow_unix_sockets: Vec::new(),
                allow_hosts: Default::default(),
                git: Default::default(),
            },
            runner: RunnerChoice::Auto,
            limits: crate::limits::Limits { memory: 1 << 30, pids: 64, cpu: None, explicit: vec![] },
            observe_writes: true,
            cache_dir: None,
        }
    }

    #[test]
    fn a_write_to_hooks_alone_is_granted_as_hooks() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let git = ws.join(".git");
        for d in ["objects", "refs", "hooks"] {
            std::fs::create_dir_all(git.join(d)).unwrap();
        }
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let mut policy = spec().policy;
        policy.mode = Mode::WorkspaceWrite;
        policy.workspace = ws.clone();
        policy.protected = vec![git.clone()];
        let d = |p: &str| Denial {
            kind: crate::result::DenialKind::FileWrite,
            target: Some(git.join(p).display().to_string()),
            evidence: String::new(),
            line: None,
            proxy: None,
        };
        let hooks = vec![d("hooks/post-commit"), d("hooks/pre-push")];
        assert_eq!(grant_for(&hooks, &policy), Some(Grant::Write { path: git.join("hooks") }));
        // A commit that also plants a hook: git's own files only.
        let mixed = vec![d("index.lock"), d("hooks/post-commit")];
        assert_eq!(grant_for(&mixed, &policy), Some(Grant::Write { path: git.clone() }));
        // The innermost protected path holding every denial: a submodule's git dir.
        policy.protected.push(git.join("modules/sub"));
        let sub = vec![d("modules/sub/index.lock"), d("modules/sub/objects/x")];
        assert_eq!(grant_for(&sub, &policy), Some(Grant::Write { path: git.join("modules/sub") }));
    }

    #[test]
    fn the_fingerprint_carries_the_grant() {
        let s = spec();
        let plain = fingerprint_granting(&s, &[], None);
        assert_eq!(plain, fingerprint(&s), "no grant: the call's own fingerprint");
        let git = fingerprint_granting(&s, &[], Some(&Grant::Write { path: "/ws/.git".into() }));
        let other = fingerprint_granting(&s, &[], Some(&Grant::Write { path: "/ws/sub/.git".into() }));
        let net = fingerprint_granting(&s, &[], Some(&Grant::Network));
        assert!(plain != git && git != other && git != net && plain != net);
    }

    #[test]
    fn narrow_grant_only_when_every_denial_names_it() {
        use crate::result::{Denial, DenialKind, RunResult};
        let mut s = spec();
        s.policy.mode = Mode::WorkspaceWrite;
        s.policy.protected = vec!["/ws/.git".into(), "/ws/sub/.git".into()];
        let denial = |kind, target: &str| Denial {
            kind,
            target: Some(target.into()),
            evidence: "seccomp supervisor".into(),
            line: None,
            proxy: None,
        };
        let out = serde_json::json!({"text": "", "truncated": false, "spill_path": null,
                                     "spill_truncated": false, "spill_failed": false});
        let run = |denials: Vec<Denial>| {
            let mut r: RunResult = serde_json::from_value(serde_json::json!({
                "exit_code": 1, "signal": null, "timed_out": false, "aborted": false, "timeout_ms": 1,
                "stdout": out, "stderr": out,
                "sandbox": {"mode": "workspace-write", "runner": "landlock", "denied": true, "denials": [],
                            "enforcement": {"level": "full", "gaps": []}, "runner_failed": false,
                            "writable_roots": [], "protected": [], "skipped": []},
                "limit": null, "limits": null
            }))
            .unwrap();
            r.sandbox.denials = denials;
            r
        };
        let (g, wide) = narrow_grant(&run(vec![denial(DenialKind::FileWrite, "/ws/.git/index.lock")]), &s).unwrap();
        assert_eq!(g, Grant::Write { path: "/ws/.git".into() });
        assert_eq!(wide.policy.protected, vec![PathBuf::from("/ws/sub/.git")], "only that path opens");
        assert_eq!((wide.policy.mode, wide.policy.network), (Mode::WorkspaceWrite, false));
        // Two protected paths, a write elsewhere, or a mix with the network: no narrow grant.
        for ds in [
            vec![denial(DenialKind::FileWrite, "/ws/.git/a"), denial(DenialKind::FileWrite, "/ws/sub/.git/b")],
            vec![denial(DenialKind::FileWrite, "/etc/passwd")],
            vec![denial(DenialKind::FileWrite, "/ws/.git/a"), denial(DenialKind::Network, "1.2.3.4:443")],
            vec![denial(DenialKind::Process, "kill")],
        ] {
            assert!(narrow_grant(&run(ds.clone()), &s).is_none(), "{ds:?}");
        }
        let (g, wide) = narrow_grant(&run(vec![denial(DenialKind::Network, "1.2.3.4:443")]), &s).unwrap();
        assert_eq!(g, Grant::Network);
        assert!(wide.policy.network && wide.policy.protected == s.policy.protected);
        // Under --allow-host: one host the proxy refused, for one retry; anything else
        // (two hosts, a direct attempt) no narrow grant.
        let mut proxied = s.clone();
        proxied.policy.allow_hosts = crate::policy::hosts::AllowList::parse(&["pypi.org"]).unwrap();
        let refusal = |host: Option<&str>, why: Refusal| Denial {
            kind: DenialKind::Network,
            target: host.map(Into::into),
            evidence: "proxy refused: not in the allow-list".into(),
            line: None,
            proxy: Some(ProxyRefusal { host: host.map(|h| h.parse().unwrap()), why }),
        };
        let refused = |host: &str| refusal(Some(host), Refusal::NotListed);
        let (g, wide) = narrow_grant(&run(vec![refused("files.example:443")]), &proxied).unwrap();
        assert_eq!(g, Grant::Host { host: "files.example:443".into() });
        let hosts: Vec<String> = wide.policy.allow_hosts.patterns().iter().map(|p| p.to_string()).collect();
        assert!(
            hosts.contains(&"files.example:443".to_string()) && hosts.contains(&"pypi.org".to_string()),
            "{hosts:?}"
        );
        assert!(!wide.policy.network, "the network stays off");
        let address =
            Refusal::Address { address: "203.0.113.8".parse().unwrap(), class: crate::proxy::AddrClass::Reserved };
        for ds in [
            vec![refused("a.example:443"), refused("b.example:443")],
            vec![refused("a.example:443"), denial(DenialKind::Network, "socket(AF_INET, SOCK_DGRAM)")],
            // Refusals a host grant cannot help, or that name no parsed host.
            vec![refusal(Some("a.example:443"), Refusal::ProxyCredentials)],
            vec![refusal(Some("a.example:443"), Refusal::SocksCommand)],
            vec![refusal(Some("a.example:443"), address.clone())],
            vec![refusal(None, Refusal::BadHost)],
            vec![refusal(None, Refusal::Malformed { problem: "x".into() })],
            // A denial whose text looks like a proxy refusal but that the proxy did not
            // record: its target is never a grant (a wildcard least of all).
            vec![Denial { target: Some("*.example.org:443".into()), proxy: None, ..refused("a.example:443") }],
        ] {
            assert!(narrow_grant(&run(ds.clone()), &proxied).is_none(), "{ds:?}");
        }
        // The proxy's refusals name the host grant also when the policy at hand does not
        // list hosts (the model-facing text judges with the ceiling's network flag).
        assert_eq!(
            grant_for(&[refused("files.example:443")], &s.policy),
            Some(Grant::Host { host: "files.example:443".into() })
        );
        assert_eq!(grant_for(&[refusal(None, Refusal::BadHost)], &s.policy), None);
        s.policy.mode = Mode::FullAccess;
        assert!(narrow_grant(&run(vec![denial(DenialKind::Network, "x")]), &s).is_none());
    }

    #[test]
    fn fingerprint_is_stable_and_sensitive() {
        let base = fingerprint(&spec());
        // Golden (checked against an independent Python FNV-1a 128 of the documented
        // encoding): changing the encoding must be a deliberate version bump.
        assert_eq!(base, "fnv1a128:2f216417ed9dfdb1fda6b51a736c1a1f");
        let mut s = spec();
        s.env.reverse();
        s.env[0].1 = "other value".into();
        assert_eq!(fingerprint(&s), base, "env order and values do not matter");
        let variants: [fn(&mut Spec); 11] = [
            |s| s.policy.allow_hosts = crate::policy::hosts::AllowList::parse(&["pypi.org"]).unwrap(),
            |s| s.policy.allow_hosts = crate::policy::hosts::AllowList::parse(&["pypi.org:8443"]).unwrap(),
            |s| s.policy.mode = Mode::WorkspaceWrite,
            |s| s.policy.network = true,
            |s| s.policy.best_effort = true,
            |s| s.policy.writable_roots = vec!["/r".into()],
            |s| s.policy.protected = vec!["/ws/.git".into()],
            |s| s.argv[2] = "echo ho".into(),
            |s| s.argv = vec!["/bin/bash".into(), "-cecho hi".into()],
            |s| s.workdir = "/ws2".into(),
            |s| s.env.push(("LD_PRELOAD".into(), "x".into())),
        ];
        for v in variants {
            let mut s = spec();
            v(&mut s);
            assert_ne!(fingerprint(&s), base);
        }
    }

    #[test]
    fn the_retry_runs_the_program_found_before_the_first_run() {
        let dir = tempfile::tempdir().unwrap();
        let mut sp = spec();
        sp.workdir = dir.path().to_path_buf();
        sp.policy.workspace = dir.path().to_path_buf();
        sp.argv = vec!["sh".into(), "-c".into(), "true".into()];
        sp.env = vec![("PATH".into(), format!("{}:/usr/bin:/bin", dir.path().join("bin").display()).into())];
        let req = PolicyRequest { mode: Mode::ReadOnly, ..PolicyRequest::default() };
        let wide = widen(&sp, &req, Mode::WorkspaceWrite).unwrap();
        let found = std::path::PathBuf::from(&wide.argv[0]);
        assert!(found.is_absolute() && found.ends_with("sh"), "{found:?}");
        // A `sh` planted later earlier on PATH does not change what the retry runs.
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        assert!(!found.starts_with(dir.path()));
    }

    #[test]
    fn next_wider_climbs_the_ladder() {
        assert_eq!(next_wider(Mode::ReadOnly), Some(Mode::WorkspaceWrite));
        assert_eq!(next_wider(Mode::WorkspaceWrite), Some(Mode::FullAccess));
        assert_eq!(next_wider(Mode::FullAccess), None);
    }

    #[test]
    fn shebang_interpreters_use_the_fixed_path() {
        assert_eq!(shebang_interpreters(b"\x7fELF...").unwrap(), None);
        assert_eq!(shebang_interpreters(b"#!/bin/sh -e\nexit 0\n").unwrap(), Some(vec![PathBuf::from("/bin/sh")]));
        // env's options and assignments are skipped; the name is looked up on APPROVER_PATH.
        let got = shebang_interpreters(b"#!/usr/bin/env -S FOO=1 sh -e\n").unwrap().unwrap();
        assert_eq!(got[0], PathBuf::from("/usr/bin/env"));
        assert!(APPROVER_PATH.split(':').any(|d| got[1] == Path::new(d).join("sh")), "{got:?}");
        let err = shebang_interpreters(b"#!/usr/bin/env no-such-interpreter-here\n").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn printable_escapes_terminal_controls() {
        assert_eq!(printable("a\x1b[2Jb\rc\u{202e}d"), "a\\u{1b}[2Jb\\rc\\u{202e}d");
        assert_eq!(printable("héllo wörld"), "héllo wörld");
    }
}
