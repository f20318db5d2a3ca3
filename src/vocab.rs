//! The shared vocabulary of cordon: the names every other module speaks in (which
//! runner, which restriction, how completely it was enforced, whether a runner can
//! work here).
//!
//! A leaf: it imports nothing from the rest of the crate, so the error, host, result
//! and runner modules can all use it without importing each other. What it does not
//! hold: anything that decides (which restrictions a policy requests lives with the
//! runners, in [`crate::runner`]; selection and planning too).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// The confinement backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunnerKind {
    /// Landlock + seccomp + namespaces + capability drop, applied in the child (Linux).
    Landlock,
    /// bubblewrap + cordon's seccomp filter (Linux fallback).
    Bwrap,
    /// `sandbox-exec` with a generated profile (macOS).
    Seatbelt,
    /// No confinement (`full-access` only).
    Passthrough,
}

impl RunnerKind {
    /// The stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunnerKind::Landlock => "landlock",
            RunnerKind::Bwrap => "bwrap",
            RunnerKind::Seatbelt => "seatbelt",
            RunnerKind::Passthrough => "passthrough",
        }
    }
}

impl fmt::Display for RunnerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunnerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "landlock" => Ok(RunnerKind::Landlock),
            "bwrap" => Ok(RunnerKind::Bwrap),
            "seatbelt" => Ok(RunnerKind::Seatbelt),
            "passthrough" => Ok(RunnerKind::Passthrough),
            other => Err(format!("unknown runner `{other}` (expected landlock, bwrap, seatbelt or passthrough)")),
        }
    }
}

/// Which runner the caller wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunnerChoice {
    /// The strongest runner that enforces the mode.
    #[default]
    Auto,
    /// Exactly this runner, or fail.
    #[serde(untagged)]
    Only(RunnerKind),
}

impl FromStr for RunnerChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "auto" {
            Ok(RunnerChoice::Auto)
        } else {
            s.parse().map(RunnerChoice::Only).map_err(|e: String| e.replace("(expected ", "(expected auto, "))
        }
    }
}

/// One restriction a confined mode requests. The names are stable (they appear in
/// `enforcement.gaps[].restriction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Restriction {
    /// No write, create, delete, rename or link outside the writable roots.
    FsWrite,
    /// No truncation outside the writable roots.
    FsTruncate,
    /// No chmod/chown/utimes/xattr changes outside the writable roots.
    FsMetadata,
    /// Protected subpaths (`.git`) stay read-only inside writable roots.
    ProtectedPaths,
    /// The host's `/tmp` and `/dev/shm` are neither writable nor shared.
    PrivateTmp,
    /// No IP, packet or netlink sockets (network off).
    Network,
    /// No unix sockets to daemons outside (pathname or abstract; network off).
    UnixSockets,
    /// No unix sockets to daemons outside (pathname or abstract) in every confined
    /// mode, also with the network on: `--network` means IP, not the host's local
    /// daemons (`docker.sock`, the D-Bus system bus, X11).
    HostUnixSockets,
    /// No signals to processes outside the sandbox.
    Signals,
    /// No ptrace, `process_vm_*` or `/proc/<pid>` access to processes outside.
    ProcessInspection,
    /// Nothing the command started outlives the run.
    ProcessLifetime,
    /// No SysV / POSIX message-queue IPC with the outside.
    Ipc,
    /// No ioctls on device files opened inside the sandbox.
    DeviceIoctl,
    /// No `TIOCSTI`/`TIOCLINUX` terminal injection.
    TerminalInjection,
    /// Dangerous syscalls refused (io_uring, bpf, perf, userfaultfd, keyrings, mounts,
    /// namespaces, foreign ABIs).
    SyscallFilter,
    /// No capabilities, `no_new_privs` set.
    Privileges,
    /// Only stdin/stdout/stderr cross into the sandbox.
    FdIsolation,
    /// The kernel records the sandbox's denials (Landlock audit, ABI 7). Not requested
    /// by a policy: it is part of the `landlock` runner's own contract (that runner
    /// refuses through Landlock, and promises the kernel's record of it), so it is a
    /// gap of that runner on hosts below ABI 7. Runners that refuse through mounts
    /// and seccomp alone (`bwrap`) make no such promise.
    DenialAudit,
    /// The run's memory (its processes and its private tmpfs pages) stays within
    /// its limit (see [`crate::limits`]). Reported in `enforcement` when the caller
    /// set the limit; a default limit's shortfall is reported in the result's `limits`.
    LimitMemory,
    /// The run's process count stays within its limit.
    LimitPids,
    /// Each process of the run stays within its CPU-seconds limit.
    LimitCpu,
}

impl Restriction {
    /// Every restriction, in declaration order.
    pub const ALL: [Restriction; 21] = [
        Restriction::FsWrite,
        Restriction::FsTruncate,
        Restriction::FsMetadata,
        Restriction::ProtectedPaths,
        Restriction::PrivateTmp,
        Restriction::Network,
        Restriction::UnixSockets,
        Restriction::HostUnixSockets,
        Restriction::Signals,
        Restriction::ProcessInspection,
        Restriction::ProcessLifetime,
        Restriction::Ipc,
        Restriction::DeviceIoctl,
        Restriction::TerminalInjection,
        Restriction::SyscallFilter,
        Restriction::Privileges,
        Restriction::FdIsolation,
        Restriction::DenialAudit,
        Restriction::LimitMemory,
        Restriction::LimitPids,
        Restriction::LimitCpu,
    ];

    /// The stable name (as serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            Restriction::FsWrite => "fs-write",
            Restriction::FsTruncate => "fs-truncate",
            Restriction::FsMetadata => "fs-metadata",
            Restriction::ProtectedPaths => "protected-paths",
            Restriction::PrivateTmp => "private-tmp",
            Restriction::Network => "network",
            Restriction::UnixSockets => "unix-sockets",
            Restriction::HostUnixSockets => "host-unix-sockets",
            Restriction::Signals => "signals",
            Restriction::ProcessInspection => "process-inspection",
            Restriction::ProcessLifetime => "process-lifetime",
            Restriction::Ipc => "ipc",
            Restriction::DeviceIoctl => "device-ioctl",
            Restriction::TerminalInjection => "terminal-injection",
            Restriction::SyscallFilter => "syscall-filter",
            Restriction::Privileges => "privileges",
            Restriction::FdIsolation => "fd-isolation",
            Restriction::DenialAudit => "denial-audit",
            Restriction::LimitMemory => "limit-memory",
            Restriction::LimitPids => "limit-pids",
            Restriction::LimitCpu => "limit-cpu",
        }
    }

    /// The stable name, owned.
    pub fn name(self) -> String {
        self.as_str().to_string()
    }
}

impl FromStr for Restriction {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Restriction::ALL.into_iter().find(|r| r.as_str() == s).ok_or_else(|| format!("unknown restriction `{s}`"))
    }
}

/// The name of the container profile: the gaps a confined run has where the
/// container's seccomp profile refuses namespaces (Docker's and containerd's default,
/// Kubernetes' `RuntimeDefault`), so that only Landlock, seccomp and the capability
/// drop confine it. `--accept-gaps container` accepts exactly [`CONTAINER_GAPS`].
pub const CONTAINER_PROFILE: &str = "container";

/// The container profile's gaps (see [`CONTAINER_PROFILE`] and docs/containers.md):
/// what a Landlock-only run (Landlock ABI 6 or newer, no namespaces) cannot enforce.
/// Device nodes already in a writable root stay usable (`fs-write`: nothing can be
/// mounted `nodev`); chmod, chown, utimes and xattrs outside the writable roots
/// (`fs-metadata`); `.git` inside the workspace is guarded only by cordon's supervisor,
/// best effort (`protected-paths`); the host's `/tmp` and `/dev/shm` stay readable
/// (`private-tmp`); SysV IPC and POSIX message queues are the container's
/// (`ipc`). Everything else is enforced as with namespaces.
pub const CONTAINER_GAPS: [Restriction; 5] = [
    Restriction::FsWrite,
    Restriction::FsMetadata,
    Restriction::ProtectedPaths,
    Restriction::PrivateTmp,
    Restriction::Ipc,
];

/// Parse one `--accept-gaps` value: a profile name ([`CONTAINER_PROFILE`]) or a
/// restriction name.
pub fn parse_accepted_gaps(s: &str) -> Result<Vec<Restriction>, String> {
    if s == CONTAINER_PROFILE {
        return Ok(CONTAINER_GAPS.to_vec());
    }
    s.parse::<Restriction>()
        .map(|r| vec![r])
        .map_err(|e| format!("{e} (expected `{CONTAINER_PROFILE}` or restriction names such as fs-metadata, ipc)"))
}

impl fmt::Display for Restriction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Restriction {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Restriction {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Whether a runner can work on this host at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "reason", rename_all = "kebab-case")]
pub enum ProbeStatus {
    /// Usable.
    Available,
    /// Would work on this OS, but not on this host now.
    Unavailable(String),
    /// Does not exist on this OS.
    Unsupported(String),
}

/// How completely the requested restrictions were enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnforcementLevel {
    /// Every requested restriction is enforced.
    Full,
    /// Some are not; `gaps` names them.
    Partial,
    /// No confinement at all (passthrough).
    None,
}

/// A requested restriction the runner could not enforce on this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
    /// The restriction (serialized as its stable name, see [`Restriction::as_str`]).
    pub restriction: Restriction,
    /// Why it is not enforced here.
    pub reason: String,
}

/// What local inter-process communication a confined run with the network off had
/// (`docs/network.md`). Not a restriction, so not in [`Enforcement`]: what the command
/// could do among its own processes beyond pipes and `socketpair()`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum LocalIpc {
    /// A network namespace of the run's own: its loopback (`127.0.0.0/8`, `::1`) and
    /// the unix sockets it binds and listens on, every `connect()` judged by cordon's
    /// supervisor.
    OwnNamespace,
    /// None: the run kept the host's network namespace, where its IP sockets and unix
    /// `connect()`s were refused (a local server inside the run does not work; nothing
    /// outside was reachable either).
    Refused {
        /// Why the run had no namespace of its own.
        reason: String,
    },
}

/// The enforcement report of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enforcement {
    /// Overall level.
    pub level: EnforcementLevel,
    /// Every requested restriction not enforced, with the reason.
    pub gaps: Vec<Gap>,
}

impl Enforcement {
    /// No confinement requested or applied.
    pub fn none() -> Self {
        Enforcement { level: EnforcementLevel::None, gaps: Vec::new() }
    }
}

/// `s` with control characters and bidirectional-text overrides escaped, so a hostile
/// command string cannot move the cursor, clear the prompt or reorder what is shown.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let bidi =
            matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        // Invisible characters that could hide or reorder text: zero-width ones, word
        // joiners, the BOM, tag characters, and the Unicode line/paragraph separators.
        let invisible = matches!(
            c,
            '\u{200b}'..='\u{200d}' | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{e0000}'..='\u{e007f}' | '\u{2028}' | '\u{2029}'
        );
        if c.is_control() || bidi || invisible {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The narrowest grant that lets a denied call through, asked for before any wider
/// mode: the retry stays in the same mode, with only this one thing allowed (see
/// `crate::escalation`; a session keeps standing grants, `crate::session`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Grant {
    /// Let the retry write this protected path (e.g. a repository's `.git`); every
    /// other restriction stays, the network included.
    Write {
        /// The protected path, as in the call's policy.
        path: PathBuf,
    },
    /// Let the retry reach the network (IP); every other restriction stays.
    Network,
    /// Let the retry reach one more host through cordon's proxy (`--allow-host` runs:
    /// the exact `host:port` the proxy refused); every other restriction stays.
    Host {
        /// The host and port, as the proxy refused them (`pypi.org:443`).
        host: String,
    },
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Grant::Write { path } => write!(f, "write {}", path.display()),
            Grant::Network => f.write_str("network"),
            Grant::Host { host } => write!(f, "host {host}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restriction_names_are_their_serialized_form() {
        for r in Restriction::ALL {
            assert_eq!(serde_json::to_value(r).unwrap(), serde_json::Value::String(r.as_str().into()));
            assert_eq!(serde_json::from_value::<Restriction>(r.as_str().into()).unwrap(), r);
            assert_eq!(r.to_string(), r.as_str());
        }
    }

    #[test]
    fn restriction_names_parse_and_the_container_profile_expands() {
        for r in Restriction::ALL {
            assert_eq!(r.as_str().parse::<Restriction>(), Ok(r));
        }
        assert_eq!(parse_accepted_gaps("container").unwrap(), CONTAINER_GAPS.to_vec());
        assert_eq!(parse_accepted_gaps("ipc").unwrap(), vec![Restriction::Ipc]);
        assert!(parse_accepted_gaps("everything").is_err());
    }

    #[test]
    fn a_gap_serializes_its_restriction_as_a_string() {
        let gap = Gap { restriction: Restriction::FsWrite, reason: "why".into() };
        assert_eq!(serde_json::to_string(&gap).unwrap(), r#"{"restriction":"fs-write","reason":"why"}"#);
    }
}
