//! The battery: every probe with its class, its one-line documentation (what it
//! tries, what it proves) and its setup, which plants the fixtures and observers and
//! says what to run.
//!
//! A probe's setup runs once per job (a probe on one target as one identity), in a
//! fresh `Fixture`; the host control calls the same setup with `Target::Host`.
//! Classes live in their own files: `files` (writes, metadata, the workspace,
//! special files), `git`, `net` (network, proxy, host unix sockets), `procs`
//! (processes, lifetime, limits), `kernel` (namespaces, keyrings, terminals, kernel
//! tunables, privilege, system-call entry points), `leaks` (IPC and shared state,
//! credentials, the report, controls).

mod files;
mod git;
mod kernel;
mod leaks;
mod net;
mod procs;

use super::exec::Target;
use super::fixture::{Fixture, Skip};
use super::watch::{BoxWatch, Watch};
use crate::mode::Mode;
use serde::Serialize;
use std::os::fd::{OwnedFd, RawFd};
use std::time::Duration;

/// A class of escape (or of control): the report's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Writes, creates, deletes, renames and links outside the writable roots.
    FsWrite,
    /// chmod, chown, times and extended attributes outside the writable roots.
    FsMetadata,
    /// Changes inside the workspace: refused in `read-only`, working in `workspace-write`.
    Workspace,
    /// FIFOs, device nodes and sockets planted in or outside the workspace.
    SpecialFiles,
    /// Protected git directories in all their forms.
    Git,
    /// Every socket family and address class with the network off.
    Network,
    /// Reaching around cordon's egress proxy (`--allow-host`).
    Proxy,
    /// Unix sockets of daemons outside (pathname and abstract), network off and on.
    HostUnix,
    /// Signals, ptrace, cross-process memory and `/proc` of other processes.
    Processes,
    /// Processes that outlive the run.
    Lifetime,
    /// Namespaces and the mount API.
    Namespaces,
    /// Kernel keyrings.
    Keyrings,
    /// Terminal injection.
    Terminal,
    /// Kernel tunables, `/proc/sys`, cgroups.
    Kernel,
    /// Privilege gain: capabilities, setuid and file capabilities, kernel surfaces.
    Privilege,
    /// Other system-call entry points and filter bypasses.
    Abi,
    /// Resource exhaustion within the run's limits.
    Limits,
    /// Shared `/tmp`, `/dev/shm`, SysV and POSIX IPC, inherited descriptors.
    Ipc,
    /// Credentials in the environment.
    Credentials,
    /// The report's honesty: real refusals reported, forged text not.
    Report,
    /// Positive controls: ordinary work that must keep working.
    Controls,
}

impl Class {
    /// Every class, in report order.
    pub const ALL: [Class; 21] = [
        Class::FsWrite,
        Class::FsMetadata,
        Class::Workspace,
        Class::SpecialFiles,
        Class::Git,
        Class::Network,
        Class::Proxy,
        Class::HostUnix,
        Class::Processes,
        Class::Lifetime,
        Class::Namespaces,
        Class::Keyrings,
        Class::Terminal,
        Class::Kernel,
        Class::Privilege,
        Class::Abi,
        Class::Limits,
        Class::Ipc,
        Class::Credentials,
        Class::Report,
        Class::Controls,
    ];

    /// The stable name.
    pub fn name(self) -> &'static str {
        match self {
            Class::FsWrite => "fs-write",
            Class::FsMetadata => "fs-metadata",
            Class::Workspace => "workspace",
            Class::SpecialFiles => "special-files",
            Class::Git => "git",
            Class::Network => "network",
            Class::Proxy => "proxy",
            Class::HostUnix => "host-unix",
            Class::Processes => "processes",
            Class::Lifetime => "lifetime",
            Class::Namespaces => "namespaces",
            Class::Keyrings => "keyrings",
            Class::Terminal => "terminal",
            Class::Kernel => "kernel",
            Class::Privilege => "privilege",
            Class::Abi => "abi",
            Class::Limits => "limits",
            Class::Ipc => "ipc",
            Class::Credentials => "credentials",
            Class::Report => "report",
            Class::Controls => "controls",
        }
    }
}

/// What must happen to the probe's effect inside the sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expect {
    /// An attack: no watch may see its effect.
    Stopped,
    /// A control: every watch must see its effect.
    Works,
}

/// How the host control runs, when not simply the same command on the host.
pub enum Control {
    /// The same command directly on the host.
    Same,
    /// Another command on the host with the same observable effect (the operation
    /// itself would be unsafe unconfined, e.g. a remount of the host's `/`).
    Argv(Vec<String>),
    /// A `cordon run` in `mode` with `argv`: for checks of cordon's own report, whose
    /// control needs a report.
    Cordon(Mode, Vec<String>),
}

/// What one job runs and watches.
pub struct Plan {
    /// The command inside the sandbox.
    pub argv: Vec<String>,
    /// The host control.
    pub control: Control,
    /// Attack or control.
    pub expect: Expect,
    /// The observers.
    pub watches: Vec<BoxWatch>,
    /// Extra `cordon run` flags.
    pub cordon_flags: Vec<String>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// Standard input.
    pub stdin: Option<OwnedFd>,
    /// Descriptors handed over beyond stdio.
    pub fds: Vec<(OwnedFd, RawFd)>,
    /// How long to wait after the run before looking (something may act late).
    pub settle: Duration,
    /// The audit's deadline for the run.
    pub deadline: Duration,
    /// Jobs sharing host state run one at a time per lock name.
    pub lock: Option<&'static str>,
    /// As root, run only inside a target that holds no privilege (the operation
    /// could change the host if the sandbox failed).
    pub dangerous: bool,
    /// The command prints a probe line (so a run without one did not happen).
    pub prints_line: bool,
    /// The sandbox refusing to execute the program at all (`EPERM`/`EACCES` at
    /// `execve`, as for a setuid file under `no_new_privs` on a `nosuid` mount) stops
    /// the attack.
    pub exec_refusal_holds: bool,
    /// Undo steps for what the setup planted outside the job's directory.
    pub cleanups: Vec<Box<dyn FnOnce() + Send>>,
}

/// The default deadline of one run.
pub const DEADLINE: Duration = Duration::from_secs(20);

impl Plan {
    /// `cordon __probe OP ARGS...`, an attack (no effect allowed).
    pub fn op(fx: &Fixture, op: &str, args: &[&str]) -> Plan {
        Plan::argv(probe_argv(fx, op, args))
    }

    /// Any command line, an attack.
    pub fn argv(argv: Vec<String>) -> Plan {
        Plan {
            argv,
            control: Control::Same,
            expect: Expect::Stopped,
            watches: vec![],
            cordon_flags: vec![],
            env: vec![],
            stdin: None,
            fds: vec![],
            settle: Duration::ZERO,
            deadline: DEADLINE,
            lock: None,
            dangerous: false,
            prints_line: true,
            exec_refusal_holds: false,
            cleanups: vec![],
        }
    }

    /// `/bin/sh -c SCRIPT` (prints no probe line).
    pub fn sh(script: &str) -> Plan {
        let mut p = Plan::argv(vec!["/bin/sh".into(), "-c".into(), script.into()]);
        p.prints_line = false;
        p
    }

    /// Adds an observer.
    pub fn watch(mut self, w: impl Watch + 'static) -> Plan {
        self.watches.push(Box::new(w));
        self
    }

    /// Adds a boxed observer.
    pub fn watch_box(mut self, w: BoxWatch) -> Plan {
        self.watches.push(w);
        self
    }

    /// A positive control: the effect must happen.
    pub fn works(mut self) -> Plan {
        self.expect = Expect::Works;
        self
    }

    /// A change inside the workspace: works where the workspace is writable, must be
    /// stopped where it is not.
    pub fn in_workspace(mut self, fx: &Fixture) -> Plan {
        self.expect = if fx.ws_writable() { Expect::Works } else { Expect::Stopped };
        self
    }

    /// Extra `cordon run` flags.
    pub fn flags(mut self, f: &[&str]) -> Plan {
        self.cordon_flags.extend(f.iter().map(|s| s.to_string()));
        self
    }

    /// An environment variable.
    pub fn env(mut self, k: &str, v: &str) -> Plan {
        self.env.push((k.into(), v.into()));
        self
    }

    /// The host control runs `op ARGS` instead.
    pub fn control_op(mut self, fx: &Fixture, op: &str, args: &[&str]) -> Plan {
        self.control = Control::Argv(probe_argv(fx, op, args));
        self
    }

    /// The control is a cordon run in `mode` of `op ARGS`.
    pub fn control_cordon(mut self, fx: &Fixture, mode: Mode, op: &str, args: &[&str]) -> Plan {
        self.control = Control::Cordon(mode, probe_argv(fx, op, args));
        self
    }

    /// Waits `ms` after the run before looking.
    pub fn settle(mut self, ms: u64) -> Plan {
        self.settle = Duration::from_millis(ms);
        self
    }

    /// Serializes with other jobs holding the same lock.
    pub fn lock(mut self, name: &'static str) -> Plan {
        self.lock = Some(name);
        self
    }

    /// Runs `f` when the job is over (to remove what the setup planted).
    pub fn on_cleanup(mut self, f: impl FnOnce() + Send + 'static) -> Plan {
        self.cleanups.push(Box::new(f));
        self
    }

    /// A refused `execve` of the program counts as stopped.
    pub fn exec_refusal_holds(mut self) -> Plan {
        self.exec_refusal_holds = true;
        self
    }

    /// Needs a confined target when root (see [`Plan::dangerous`]).
    pub fn dangerous(mut self) -> Plan {
        self.dangerous = true;
        self
    }
}

/// `[cordon, "__probe", op, args...]`.
pub fn probe_argv(fx: &Fixture, op: &str, args: &[&str]) -> Vec<String> {
    let mut v = vec![fx.cordon.display().to_string(), super::probe::SUBCOMMAND.into(), op.into()];
    v.extend(args.iter().map(|a| a.to_string()));
    v
}

/// One probe of the battery.
pub struct Probe {
    /// Its class.
    pub class: Class,
    /// Its name (unique within the class).
    pub name: &'static str,
    /// One line: what it tries, what it proves.
    pub doc: &'static str,
    /// Plants the fixtures and observers; says what to run.
    pub setup: fn(&Fixture) -> Result<Plan, Skip>,
}

impl Probe {
    /// `class/name`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.class.name(), self.name)
    }
}

/// Shorthand for a catalog entry.
pub(crate) const fn p(
    class: Class,
    name: &'static str,
    doc: &'static str,
    setup: fn(&Fixture) -> Result<Plan, Skip>,
) -> Probe {
    Probe { class, name, doc, setup }
}

/// The whole battery, in report order.
pub fn all() -> Vec<Probe> {
    let mut v = vec![];
    v.extend(files::probes());
    v.extend(git::probes());
    v.extend(net::probes());
    v.extend(procs::probes());
    v.extend(kernel::probes());
    v.extend(leaks::probes());
    v.sort_by_key(|p| Class::ALL.iter().position(|c| *c == p.class));
    v
}

/// `path` as text (every fixture path is UTF-8: the audit makes them).
pub(crate) fn s(p: &std::path::Path) -> String {
    p.display().to_string()
}

/// Skips on a target that is not cordon's (the check needs cordon's report or flags).
pub(crate) fn cordon_only(fx: &Fixture, why: &str) -> Result<(), Skip> {
    match fx.target {
        Target::Cordon { .. } | Target::Host => Ok(()),
        Target::Wrapper { .. } => Err(Skip(format!("not applicable to a wrapper: {why}"))),
    }
}

/// Skips unless the identity is root (the host control needs privilege).
pub(crate) fn root_only(fx: &Fixture, why: &str) -> Result<(), Skip> {
    if fx.id.is_root() {
        Ok(())
    } else {
        Err(Skip(format!("root only: {why}")))
    }
}
