//! The command-line policy flags shared by `cordon run`, `cordon serve` and
//! `cordon mcp`: one clap argument group ([`PolicyArgs`]), flattened into each, and
//! the one mode parser ([`parse_mode`]).
//!
//! The help text here is `cordon run`'s; the servers reword it for a ceiling
//! ([`crate::ceiling::CeilingArgs`]) without changing the flags, their types or their
//! parsing. What it does not do: check or resolve anything (see [`crate::policy`]).

use crate::mode::Mode;
use crate::policy::PolicyRequest;
use std::path::PathBuf;

/// The policy flags: mode, workspace, writable roots and what may be reached.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PolicyArgs {
    /// Sandbox mode: read-only, workspace-write or full-access (default workspace-write;
    /// with --session, the session's mode, which --mode may only narrow).
    #[arg(long, value_parser = parse_mode)]
    pub mode: Option<Mode>,
    /// The workspace and working directory (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// An extra writable root (absolute path; repeatable).
    #[arg(long = "writable", value_name = "DIR")]
    pub writable: Vec<PathBuf>,
    /// Allow a writable root (or workspace) that is, lies inside or contains a system
    /// directory such as /etc, /usr or /var/lib (refused otherwise).
    #[arg(long)]
    pub allow_system_root: bool,
    /// Allow network access in confined modes.
    #[arg(long)]
    pub network: bool,
    /// Let the command connect to this host unix socket by path (absolute; repeatable;
    /// every other unix socket to the host stays closed, with or without --network).
    #[arg(long = "allow-unix-socket", value_name = "PATH")]
    pub allow_unix_socket: Vec<PathBuf>,
    /// Let the command reach this host by name through cordon's own proxy, and nothing
    /// else (repeatable; `pypi.org`, `*.pythonhosted.org`, optional `:port`; the
    /// network stays off otherwise; docs/network.md).
    #[arg(long = "allow-host", value_name = "PATTERN")]
    pub allow_host: Vec<crate::policy::hosts::HostPattern>,
    /// Like --allow-host for each host of a named list (repeatable): python (pypi.org,
    /// files.pythonhosted.org), node (registry.npmjs.org), rust (crates.io,
    /// index.crates.io, static.crates.io), go (proxy.golang.org, sum.golang.org), github
    /// (github.com, codeload.github.com, objects/raw.githubusercontent.com).
    #[arg(long = "allow-hosts", value_name = "PRESET", value_enum)]
    pub allow_hosts: Vec<crate::policy::presets::Preset>,
    /// Run even if the host cannot enforce every restriction; gaps are reported.
    #[arg(long)]
    pub best_effort: bool,
    /// Run when the only restrictions the host cannot enforce are these (comma-separated
    /// or repeated): `container` (the container profile: fs-write, fs-metadata,
    /// protected-paths, private-tmp, ipc, the gaps where a container's seccomp profile
    /// refuses namespaces; docs/containers.md) or restriction names. Any other gap still
    /// fails closed; the result lists the gaps.
    #[arg(long = "accept-gaps", value_name = "GAPS", value_delimiter = ',', value_parser = parse_gap_set)]
    pub accept_gaps: Vec<GapSet>,
}

/// One `--accept-gaps` value (a profile name or a restriction name), expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GapSet(pub Vec<crate::vocab::Restriction>);

/// Parse one `--accept-gaps` value.
pub fn parse_gap_set(s: &str) -> Result<GapSet, String> {
    crate::vocab::parse_accepted_gaps(s).map(GapSet)
}

/// The accepted gaps of several `--accept-gaps` values, sorted, without duplicates.
pub fn accepted_gaps(sets: &[GapSet]) -> Vec<crate::vocab::Restriction> {
    let mut out: Vec<_> = sets.iter().flat_map(|s| s.0.iter().copied()).collect();
    out.sort();
    out.dedup();
    out
}

impl PolicyArgs {
    /// The flags as a policy request (`--mode` missing: the default mode).
    pub fn request(&self) -> PolicyRequest {
        PolicyRequest {
            mode: self.mode.unwrap_or(PolicyRequest::default().mode),
            writable_roots: self.writable.clone(),
            network: self.network,
            best_effort: self.best_effort,
            accept_gaps: accepted_gaps(&self.accept_gaps),
            allow_system_root: self.allow_system_root,
            allow_unix_sockets: self.allow_unix_socket.clone(),
            allow_hosts: self
                .allow_host
                .iter()
                .cloned()
                .chain(self.allow_hosts.iter().flat_map(|p| p.patterns()))
                .collect(),
            ..PolicyRequest::default()
        }
    }
}

/// Parse a mode flag value (`read-only`, `workspace-write`, `full-access`).
pub fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse().map_err(|e: crate::mode::ParseModeError| e.to_string())
}

/// The approval flags of `cordon serve` and `cordon mcp` (docs/escalation.md): who is
/// asked for the narrow grant a denied call needs when the client cannot ask its user
/// itself, and where every decision is recorded.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ApprovalArgs {
    /// Ask PROGRAM for the narrow grant a denied call needs (a `.git` write, the
    /// network, one host) when the client cannot ask its user (no MCP elicitation, no
    /// `approve` capability): the request as JSON on its stdin, exit 0 grants. It runs
    /// unsandboxed, as your policy agent.
    #[arg(long, value_name = "PROGRAM")]
    pub approver: Option<PathBuf>,
    /// Append every approval decision here (JSON lines; default
    /// $XDG_STATE_HOME/cordon/audit.jsonl or ~/.local/state/cordon/audit.jsonl).
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
}
