//! What a run reports: exit facts, collected output and sandbox facts.
//!
//! These types are the JSON contract of `cordon run --json` (field names are part of
//! the interface). They carry facts only; building them is the executor's job.

pub(crate) mod held;
pub(crate) mod limits;
pub(crate) mod network;

use crate::mode::Mode;
use crate::vocab::RunnerKind;
pub use crate::vocab::{Enforcement, EnforcementLevel, Gap, LocalIpc};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The reason in a network denial's evidence when the network is off (the filter's
/// reason, `crate::denials`): its live line names the flags that open the network.
pub(crate) const NETWORK_OFF_REASON: &str = "network off";

/// The outcome of one command. A nonzero exit, a timeout or an abort is a result, not
/// an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunResult {
    /// Exit status when the command exited normally.
    pub exit_code: Option<i32>,
    /// Terminating signal when it was killed by one.
    pub signal: Option<i32>,
    /// The deadline passed first (never true together with `aborted`).
    pub timed_out: bool,
    /// The caller aborted first (never true together with `timed_out`).
    pub aborted: bool,
    /// The deadline that applied, in milliseconds.
    pub timeout_ms: u64,
    /// Collected standard output.
    pub stdout: CollectedOutput,
    /// Collected standard error.
    pub stderr: CollectedOutput,
    /// What the sandbox applied, refused and could not enforce.
    pub sandbox: SandboxFacts,
    /// The resource limit the run ran into, judged from the kernel's evidence (see
    /// [`crate::limits::judge`]): `memory`, `pids` or `cpu`; `null` otherwise.
    #[serde(default)]
    pub limit: Option<limits::Resource>,
    /// The run's resource limits and how each was enforced.
    #[serde(default)]
    pub limits: Option<limits::AppliedLimits>,
    /// The writes this run made under its writable roots when they were held back in
    /// a private layer (an escalation's first run, `--preview`): what they were and
    /// whether they were applied to the host or dropped. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<held::HeldWrites>,
}

impl RunResult {
    /// The facts a person at a terminal should see after the command's own output
    /// (live mode, without `--json`): one short line per denial, the deadline, a
    /// resource limit that stopped the command, and each enforcement gap. Every line
    /// starts with `cordon: ` and holds only printable text.
    pub fn live_notes(&self) -> Vec<String> {
        let clean = |s: &str| crate::vocab::printable(s);
        let mut out = Vec::new();
        let mut network_off = false;
        // Writes refused under one protected path (a recursive `rm` in `.git`) are one
        // line for that path, not one per file.
        let groups = self.protected_groups();
        let dropped = self.sandbox.denials.iter().any(is_dropped_count);
        let mut grouped = std::collections::BTreeSet::new();
        for d in &self.sandbox.denials {
            if is_dropped_count(d) {
                // The count of the denials the report's bound left out.
                let text = d.evidence.strip_prefix("seccomp supervisor: ").unwrap_or(&d.evidence);
                out.push(format!("cordon: {}", clean(text)));
                continue;
            }
            let what = match d.kind {
                DenialKind::FileWrite => "write",
                DenialKind::FileRead => "read",
                DenialKind::Network => "network",
                DenialKind::Process => "process",
                DenialKind::Other => "syscall",
            };
            let why = match &d.proxy {
                // cordon's proxy: its typed reason, and what would let the request
                // through ("add --allow-host pypi.org:443").
                Some(p) => {
                    let why = p.why.why(p.host.as_ref());
                    match p.why.hint(p.host.as_ref()) {
                        Some(hint) => format!(" ({}: {})", clean(&why), clean(&hint)),
                        None => format!(" ({})", clean(&why)),
                    }
                }
                // Otherwise the evidence's last parenthesis: "(outside the writable roots)".
                None => d
                    .evidence
                    .rsplit_once(" (")
                    .and_then(|(_, r)| r.split_once(')'))
                    .map(|(r, _)| r)
                    .filter(|r| !r.contains("errno"))
                    .map(|r| {
                        if d.kind == DenialKind::Network && r == NETWORK_OFF_REASON {
                            network_off = true;
                            format!(" ({r}: --allow-host NAME reaches one host by name, --network every host)")
                        } else {
                            format!(" ({})", clean(r))
                        }
                    })
                    .unwrap_or_default(),
            };
            let group = d
                .target
                .as_deref()
                .and_then(|t| groups.iter().find(|(_, members)| members.len() > 1 && members.contains(&t)));
            if let Some((root, members)) = group {
                if grouped.insert(root.clone()) {
                    let rel = |t: &str| {
                        let p = Path::new(t);
                        clean(&p.strip_prefix(root).unwrap_or(p).display().to_string())
                    };
                    let mut list: Vec<String> = members.iter().take(3).map(|t| rel(t)).collect();
                    if members.len() > 3 {
                        list.push(format!("and {} more", members.len() - 3));
                    }
                    let count = match dropped {
                        true => format!("at least {} paths", members.len()),
                        false => format!("{} paths", members.len()),
                    };
                    // " (a protected path)" becomes ", a protected path".
                    let why = why.trim_start().trim_start_matches('(').trim_end_matches(')');
                    let why = if why.is_empty() { String::new() } else { format!(", {why}") };
                    let root = clean(&root.display().to_string());
                    out.push(format!("cordon: denied {what} {root} ({count}{why}): {}", list.join(", ")));
                }
                continue;
            }
            let target = d.target.as_deref().map(|t| format!(" {}", clean(t))).unwrap_or_default();
            out.push(format!("cordon: denied {what}{target}{why}"));
        }
        if network_off {
            // The run's own loopback and unix sockets were refused too: say why.
            if let Some(crate::vocab::LocalIpc::Refused { reason }) = &self.sandbox.local_ipc {
                out.push(format!(
                    "cordon: no local IPC in this run (a loopback server, a unix socket it binds): {}",
                    clean(reason)
                ));
            }
            out.push(
                "cordon: package registries by name: --allow-hosts python (pip), node (npm), rust (cargo), go, github \
                 (docs/network.md)"
                    .into(),
            );
        }
        if self.timed_out {
            out.push(format!(
                "cordon: timed out after {} ms; the command and its children were killed",
                self.timeout_ms
            ));
        }
        for (name, stream) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            if stream.undelivered > 0 {
                out.push(format!(
                    "cordon: {} bytes of the command's {name} were not delivered: its reader did not take them \
                     before the run ended",
                    stream.undelivered
                ));
            }
        }
        if let Some(r) = self.limit {
            out.push(format!("cordon: stopped by the {} limit", clean(&format!("{r:?}").to_lowercase())));
        }
        if self.sandbox.enforcement.level == EnforcementLevel::Partial {
            for g in &self.sandbox.enforcement.gaps {
                out.push(format!("cordon: not enforced: {} ({})", g.restriction, clean(&g.reason)));
            }
        }
        out
    }

    /// The command finished on its own terms and succeeded: exit status 0, no signal,
    /// no deadline, no abort, no resource limit. A grant cannot change the outcome of
    /// such a run, so escalation never asks after one (its denials are still reported).
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && self.signal.is_none() && !self.timed_out && !self.aborted && self.limit.is_none()
    }

    /// The refused writes under each protected path (the innermost one that holds the
    /// target), in the order seen: `(protected path, targets)`.
    fn protected_groups(&self) -> Vec<(PathBuf, Vec<&str>)> {
        let mut groups: Vec<(PathBuf, Vec<&str>)> = Vec::new();
        for d in self.sandbox.denials.iter().filter(|d| d.kind == DenialKind::FileWrite) {
            let Some(target) = d.target.as_deref() else { continue };
            let root = self
                .sandbox
                .protected
                .iter()
                .filter(|p| Path::new(target).starts_with(p))
                .max_by_key(|p| p.as_os_str().len());
            let Some(root) = root else { continue };
            match groups.iter_mut().find(|(r, _)| r == root) {
                Some((_, members)) => members.push(target),
                None => groups.push((root.clone(), vec![target])),
            }
        }
        groups
    }

    /// The conventional shell status: the exit code, or 128+N for signal N.
    pub fn shell_status(&self) -> i32 {
        match (self.exit_code, self.signal) {
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            (None, None) => 125,
        }
    }
}

/// Whether `d` is the entry that counts the denials the report's bound left out
/// (`crate::denials::MAX_DENIALS`): of kind `other`, without a target, not the proxy's.
fn is_dropped_count(d: &Denial) -> bool {
    d.kind == DenialKind::Other && d.target.is_none() && d.proxy.is_none()
}

/// One captured stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectedOutput {
    /// The tail kept in memory (lossy UTF-8; the spill file has the exact bytes).
    pub text: String,
    /// Bytes were dropped from the in-memory tail.
    pub truncated: bool,
    /// The complete stream, when it was spilled successfully (only its head, up to the
    /// spill cap, when `spill_truncated`).
    pub spill_path: Option<PathBuf>,
    /// The stream outgrew the spill cap: the spill file holds its first bytes only
    /// (with a cap of 0, no file was made). Added in protocol 1 as an additive field.
    #[serde(default)]
    pub spill_truncated: bool,
    /// The exact bytes were needed (the tail was truncated or is not valid UTF-8) but
    /// spilling them failed (no space, an I/O error): they are lost.
    #[serde(default)]
    pub spill_failed: bool,
    /// Live mode: bytes of this stream that cordon relayed and its destination did not
    /// take by the run's end (the reader of a named FIFO stopped reading): lost. With
    /// `> f 2>&1` both streams are one relay, counted as stdout. Omitted when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub undelivered: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The class of a refused operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DenialKind {
    /// A write, create, delete, rename, link or metadata change.
    FileWrite,
    /// A read.
    FileRead,
    /// A socket or connection.
    Network,
    /// Another process (signal, ptrace, ...).
    Process,
    /// Anything else the filter refused.
    Other,
}

/// One refusal by the sandbox, with the evidence it rests on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    /// What kind of operation.
    pub kind: DenialKind,
    /// The path, address or syscall, when known.
    pub target: Option<String>,
    /// What the verdict rests on: an observation cordon made itself (a seccomp
    /// notification it answered, a syscall it refused).
    pub evidence: String,
    /// The command's own diagnostic line about this target, when its stderr has one
    /// (linked to the denial for the reader; never evidence by itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
    /// Set by cordon's egress proxy only (`--allow-host` runs): the host and port it
    /// parsed from the request (normalized; never the command's text) and the typed
    /// reason. A host grant is built from this alone
    /// ([`ProxyRefusal::grantable`](crate::proxy::ProxyRefusal::grantable)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<network::ProxyRefusal>,
}

/// Syscalls cordon's seccomp supervisor could not judge, because it could not read
/// their arguments from the command's memory (a container's seccomp profile or its
/// ptrace rules can refuse that): the report of this run is incomplete, and says so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unobserved {
    /// How many.
    pub syscalls: u64,
    /// Why, and what it means for this run.
    pub reason: String,
}

/// A runner that selection passed over, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedRunner {
    /// The runner.
    pub runner: RunnerKind,
    /// Why it was not used.
    pub reason: String,
}

/// What the sandbox did for this run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxFacts {
    /// The mode actually applied.
    pub mode: Mode,
    /// The runner used.
    pub runner: RunnerKind,
    /// True only with evidence that the sandbox refused something.
    pub denied: bool,
    /// The refusals, with evidence.
    pub denials: Vec<Denial>,
    /// How completely the mode was enforced.
    pub enforcement: Enforcement,
    /// The runner's setup broke after the launch and the command never ran in the
    /// complete sandbox: today the `bwrap` runner's stage helper did not report that
    /// it executed the command (bubblewrap failed building the sandbox, or a step of
    /// the helper failed). Failures before the launch are errors (`RUNNER_FAILED`)
    /// instead, so this is always `false` for the `landlock` and `passthrough`
    /// runners.
    pub runner_failed: bool,
    /// The directories the command could write, as resolved and enforced (canonical;
    /// the workspace first), besides its private temp directories. `["/"]` in
    /// `full-access`, which confines nothing.
    #[serde(default)]
    pub writable_roots: Vec<PathBuf>,
    /// The paths kept read-only inside the writable roots (canonical).
    #[serde(default)]
    pub protected: Vec<PathBuf>,
    /// Host directories the command saw empty: on a host without overlayfs, `/tmp`,
    /// `/dev/shm` and the home's cache are fresh private tmpfs mounts, so a host file
    /// there (a log, a repository, a virtualenv) did not exist for the command. Empty
    /// where the run sees the host's files there through a private layer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<PathBuf>,
    /// The local IPC the command had with the network off (its own loopback and unix
    /// sockets, or none and why); absent with the network on and unconfined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_ipc: Option<crate::vocab::LocalIpc>,
    /// Stronger runners passed over during selection, with reasons.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedRunner>,
    /// The connections cordon's proxy made for the command (`--allow-host` runs only;
    /// bounded, see [`crate::proxy::MAX_NETWORK_LOG`]). Its refusals are `denials`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_log: Option<network::NetworkLog>,
    /// Observed syscalls whose arguments cordon could not read: refusals among them
    /// may be missing from `denials` (absent when every one was read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unobserved: Option<Unobserved>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::{AddrClass, ProxyRefusal, Refusal};

    fn result_with(denials: Vec<Denial>) -> RunResult {
        let mut r: RunResult = serde_json::from_value(serde_json::json!({
            "exit_code": 1, "signal": null, "timed_out": false, "aborted": false, "timeout_ms": 1000,
            "stdout": {"text": "", "truncated": false, "spill_path": null},
            "stderr": {"text": "", "truncated": false, "spill_path": null},
            "sandbox": {"mode": "workspace-write", "runner": "landlock", "denied": true, "denials": [],
                        "enforcement": {"level": "full", "gaps": []}, "runner_failed": false}
        }))
        .unwrap();
        r.sandbox.denials = denials;
        r
    }

    fn proxy_denial(host: Option<&str>, why: Refusal) -> Denial {
        let host = host.map(|h| h.parse().unwrap());
        Denial {
            kind: DenialKind::Network,
            target: host.as_ref().map(ToString::to_string),
            evidence: format!("proxy refused: {}", why.why(host.as_ref())),
            line: None,
            proxy: Some(ProxyRefusal { host, why }),
        }
    }

    #[test]
    fn network_denial_lines_say_why_and_what_would_open_them() {
        let doc = Refusal::Address { address: "203.0.113.80".parse().unwrap(), class: AddrClass::Reserved };
        let notes = result_with(vec![
            proxy_denial(Some("pypi.org:443"), doc),
            proxy_denial(Some("other.test:443"), Refusal::NotListed),
            proxy_denial(Some("pypi.org:22"), Refusal::Port),
            proxy_denial(None, Refusal::Malformed { problem: "a folded header line".into() }),
            Denial {
                kind: DenialKind::Network,
                target: Some("inet:203.0.113.80:443".into()),
                evidence: "seccomp supervisor: connect() refused with ENETUNREACH (errno 101) (network off)".into(),
                line: None,
                proxy: None,
            },
        ])
        .live_notes();
        assert_eq!(
            notes,
            [
                "cordon: denied network pypi.org:443 (resolves to 203.0.113.80, a reserved address: allow it with \
                 --allow-host 203.0.113.80 (or its range, e.g. 203.0.113.0/24))",
                "cordon: denied network other.test:443 (host not in the allow-list: add --allow-host other.test:443)",
                "cordon: denied network pypi.org:22 (port 22 is not allowed for this host: add --allow-host pypi.org:22)",
                "cordon: denied network (malformed request: a folded header line)",
                "cordon: denied network inet:203.0.113.80:443 (network off: --allow-host NAME reaches one host by name, \
                 --network every host)",
                "cordon: package registries by name: --allow-hosts python (pip), node (npm), rust (cargo), go, github \
                 (docs/network.md)",
            ]
        );
    }

    #[test]
    fn a_run_without_local_ipc_says_why_beside_its_network_denials() {
        let mut r = result_with(vec![Denial {
            kind: DenialKind::Network,
            target: Some("inet:127.0.0.1:8000".into()),
            evidence: "seccomp supervisor: connect() refused with EACCES (errno 13) (network off)".into(),
            line: None,
            proxy: None,
        }]);
        r.sandbox.local_ipc = Some(crate::vocab::LocalIpc::Refused { reason: "no network namespace".into() });
        let notes = r.live_notes();
        assert_eq!(
            notes[1],
            "cordon: no local IPC in this run (a loopback server, a unix socket it binds): no network namespace"
        );
        // With its own namespace, a refused connect elsewhere is no news about local IPC.
        r.sandbox.local_ipc = Some(crate::vocab::LocalIpc::OwnNamespace);
        assert!(!r.live_notes().iter().any(|l| l.contains("local IPC")));
        let json = serde_json::to_value(&r.sandbox).unwrap();
        assert_eq!(json["local_ipc"], serde_json::json!({"status": "own-namespace"}));
    }

    fn write(target: &str, why: &str) -> Denial {
        Denial {
            kind: DenialKind::FileWrite,
            target: Some(target.into()),
            evidence: format!("seccomp supervisor: unlinkat(removal) refused with EROFS ({why})"),
            line: None,
            proxy: None,
        }
    }

    fn protecting(denials: Vec<Denial>, protected: &[&str]) -> RunResult {
        let mut r = result_with(denials);
        r.sandbox.protected = protected.iter().map(PathBuf::from).collect();
        r
    }

    #[test]
    fn writes_under_one_protected_path_are_one_live_line() {
        let mut denials: Vec<Denial> =
            (0..6).map(|i| write(&format!("/ws/.git/objects/0{i}/abc"), "a protected path")).collect();
        denials.insert(2, write("/etc/x", "outside the writable roots"));
        denials.push(write("/ws/sub/.git/HEAD", "a protected path"));
        let notes = protecting(denials, &["/ws/.git", "/ws/sub/.git"]).live_notes();
        assert_eq!(
            notes,
            [
                "cordon: denied write /ws/.git (6 paths, a protected path): objects/00/abc, objects/01/abc, \
                 objects/02/abc, and 3 more",
                "cordon: denied write /etc/x (outside the writable roots)",
                "cordon: denied write /ws/sub/.git/HEAD (a protected path)",
            ]
        );
    }

    #[test]
    fn past_the_bound_the_group_says_at_least_and_the_rest_is_counted() {
        let mut denials: Vec<Denial> = (0..3).map(|i| write(&format!("/ws/.git/o{i}"), "a protected path")).collect();
        denials.push(Denial {
            kind: DenialKind::Other,
            target: None,
            evidence:
                "seccomp supervisor: 9 more distinct denials between the first ones and the latest are not listed"
                    .into(),
            line: None,
            proxy: None,
        });
        let notes = protecting(denials, &["/ws/.git"]).live_notes();
        assert_eq!(notes[0], "cordon: denied write /ws/.git (at least 3 paths, a protected path): o0, o1, o2");
        assert_eq!(notes[1], "cordon: 9 more distinct denials between the first ones and the latest are not listed");
    }
}
