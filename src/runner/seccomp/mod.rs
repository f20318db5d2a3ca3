//! cordon's seccomp filter: rules as data (`profiles/seccomp/confined.json`, in
//! seccompiler's JSON format with a comment on every rule) compiled into ONE compact
//! classic-BPF program.
//!
//! Why our own code generator: attaching a filter costs time roughly proportional to
//! its length, and it is paid on every spawn. seccompiler emits one program per
//! filter with generic argument checks (337 instructions in four programs for these
//! rules); this compiler emits a single program of about 160, with every
//! argument-free rule a single jump to a shared return. The JSON stays valid
//! seccompiler input, and `tests/seccomp_differential.rs` runs this compiler's program
//! and seccompiler's stacked programs through one classic-BPF interpreter with the
//! kernel's semantics (`tests/cbpf`) over every syscall number, entry point and the
//! profile's argument values: the verdicts must agree except where listed there (the
//! x32 guard below, which seccompiler lacks).
//!
//! Merging filters into one program is only sound when no syscall has rules in two of
//! them: the kernel, running stacked filters, keeps the action of highest precedence
//! and, for equal actions, the data of the most recently installed filter. The compiler
//! refuses such a profile ([`SeccompError::DuplicateSyscall`]) rather than pick one.
//!
//! Program layout:
//! 1. ABI guard: kill the process on any architecture other than the native one
//!    (e.g. 32-bit `int 0x80` entry on x86_64) and on x32 syscall numbers, so foreign
//!    entry points cannot bypass the rules.
//! 2. Rules with argument checks (per syscall: all conditions of a rule must hold).
//! 3. Argument-free rules: `jeq nr → return its errno`.
//! 4. Allow.
//!
//! Filters used: `deny_eperm` and `deny_enosys` always; `network_off` when the network
//! is off (`socket()` refused with `EACCES`), or `loopback_only` instead when the run
//! has a network namespace of its own and a supervisor (IP and unix stream sockets,
//! `bind()`, `listen()`; every `connect()` goes to the supervisor, which reaches only
//! the namespace's loopback and the unix sockets the run itself listens on); `host_unix_closed` when it is on
//! (`socket(AF_UNIX, …)` and datagram `socketpair()` refused with `EACCES`: `connect()`
//! must stay open for IP, and the filter cannot read the address it is given, so a
//! unix socket that could reach a host daemon must not exist at all); `proxy_only`
//! instead of either when the run reaches some hosts by name through cordon's proxy
//! (`--allow-host`; TCP stream sockets may exist, every `connect()` goes to the
//! supervisor, which connects only to the proxy; no UDP, raw, SCTP, `bind`, `listen`
//! or TCP Fast Open).
//!
//! What it does not do: it does not restrict paths (Landlock and the mount layer do),
//! and argument checks cannot see memory (so `clone3` is answered `ENOSYS`).

use serde::Deserialize;
use std::collections::BTreeMap;

mod syscalls;
pub use syscalls::syscall_number;

mod compile;
use compile::compile;

/// The filter rules, as data.
pub const CONFINED_PROFILE: &str = include_str!("../../../profiles/seccomp/confined.json");

/// Filters installed on every confined run.
pub const ALWAYS_FILTERS: [&str; 2] = ["deny_eperm", "deny_enosys"];
/// The filter added when the network is off.
pub const NETWORK_OFF_FILTER: &str = "network_off";
/// The filter added when the network is on: no unix sockets that could reach the host.
pub const HOST_UNIX_FILTER: &str = "host_unix_closed";
/// The filter added when the network is on and some host unix sockets are allowed by
/// path: unix stream sockets may exist, and every `connect()` goes to the supervisor,
/// which performs it itself (see `crate::denials`); without one, `connect()` fails.
pub const HOST_UNIX_ALLOW_FILTER: &str = "host_unix_allowlist";

/// The filter added when the network is off and the run has a network namespace of
/// its own (only its loopback): IP sockets, `bind()` and `listen()` stay (they reach
/// nothing outside), and every `connect()` goes to the supervisor, which performs it
/// itself: loopback addresses inside the namespace, abstract unix names (scoped by the
/// namespace) and pathname unix sockets that a socket of the run's own namespace
/// listens on (see `crate::denials`); without one, `connect()` fails.
pub const LOOPBACK_FILTER: &str = "loopback_only";

/// The filter used instead of the network ones when the command may reach some hosts
/// by name through cordon's egress proxy (`crate::proxy`): TCP stream sockets may
/// exist, and every `connect()` goes to the supervisor, which performs it itself only
/// to the proxy's address (see `crate::denials`); without one, `connect()` fails.
pub const PROXY_FILTER: &str = "proxy_only";

/// One classic BPF instruction (`struct sock_filter`).
pub type Insn = libc::sock_filter;

pub use crate::error::seccomp::SeccompError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonFilter {
    mismatch_action: String,
    match_action: JsonAction,
    filter: Vec<JsonRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonAction {
    errno: u32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRule {
    syscall: String,
    #[serde(default)]
    args: Vec<JsonCond>,
    #[allow(dead_code)]
    comment: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonCond {
    index: u8,
    #[serde(rename = "type")]
    width: String,
    op: JsonOp,
    val: u64,
    #[allow(dead_code)]
    comment: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case")]
enum JsonOp {
    Eq,
    Ne,
    MaskedEq(u64),
}

/// `AUDIT_ARCH_*` of the native architecture.
pub(crate) fn native_audit_arch() -> Result<u32, SeccompError> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(0xC000_003E),
        "aarch64" => Ok(0xC000_00B7),
        "riscv64" => Ok(0xC000_00F3),
        other => Err(SeccompError::UnsupportedArch(other)),
    }
}

/// The x32 ABI marks its syscall numbers with this bit (x86_64 only).
pub(crate) const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const AND_K: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
/// `offsetof(struct seccomp_data, nr)`.
const OFFSET_NR: u32 = 0;
/// `offsetof(struct seccomp_data, arch)`.
const OFFSET_ARCH: u32 = 4;
/// `offsetof(struct seccomp_data, args)`; each argument is 8 bytes, low word first on
/// the little-endian architectures built here.
const OFFSET_ARGS: u32 = 16;

fn insn(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
    Insn { code, jt, jf, k }
}

fn ret_errno(errno: u32) -> Insn {
    insn(RET_K, libc::SECCOMP_RET_ERRNO | (errno & libc::SECCOMP_RET_DATA), 0, 0)
}

fn jump(dist: usize) -> Result<u8, SeccompError> {
    u8::try_from(dist).map_err(|_| SeccompError::TooLong)
}

struct Cond {
    index: u8,
    qword: bool,
    mask: u64,
    val: u64,
    negate: bool,
}

/// Which syscalls a supervisor observes (`profiles/seccomp/observe.json`).
pub const OBSERVE_PROFILE: &str = include_str!("../../../profiles/seccomp/observe.json");

/// The class of an observed refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ObservedKind {
    /// Sockets and connections.
    Network,
    /// Other processes, namespaces, mounts and kernel facilities.
    Process,
    /// A path syscall that may change the filesystem (`profiles/seccomp/write_intent.json`):
    /// not a refusal, a question. The supervisor refuses it only where the enforced
    /// policy refuses it anyway, and lets the kernel run everything else.
    #[serde(skip)]
    Write,
}

/// A refused syscall the supervisor is told about (instead of the kernel answering).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// Syscall name.
    pub name: String,
    /// Its class.
    pub kind: ObservedKind,
    /// The errno the profile answers it with.
    pub errno: u32,
    /// The profile filter whose rule refused it (`network_off`, `host_unix_closed`, ...).
    pub filter: &'static str,
}

/// A compiled filter and, when supervised, what its notifications mean.
#[derive(Debug, Clone)]
pub struct Program {
    /// The BPF instructions.
    pub insns: Vec<Insn>,
    /// Syscall number → observed rule (empty when not supervised).
    pub observed: BTreeMap<i64, Observed>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ObserveFile {
    observe: Vec<ObserveRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ObserveRule {
    syscall: String,
    kind: ObservedKind,
    #[allow(dead_code)]
    comment: String,
}

/// Write-intent path syscalls a supervisor may observe (see [`ObservedKind::Write`]).
pub const WRITE_INTENT_PROFILE: &str = include_str!("../../../profiles/seccomp/write_intent.json");

/// The pseudo-filter name of the write-intent rules.
pub const WRITE_INTENT_FILTER: &str = "write_intent";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteIntentFile {
    #[allow(dead_code)]
    about: String,
    write_intent: Vec<JsonRule>,
}

/// `SECCOMP_RET_USER_NOTIF`.
pub const RET_USER_NOTIF: u32 = 0x7fc0_0000;

/// How a matching rule returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ret {
    Errno(u32),
    Notify,
}

fn ret_insn(r: Ret) -> Insn {
    match r {
        Ret::Errno(e) => ret_errno(e),
        Ret::Notify => insn(RET_K, RET_USER_NOTIF, 0, 0),
    }
}

/// Compiled programs by `[network filter][supervised][writes]`.
type ProgramCache = [[[std::sync::OnceLock<Result<Program, SeccompError>>; 2]; 2]; NetFilter::ALL.len()];

/// The network filter a confined run installs beside [`ALWAYS_FILTERS`] (one of the
/// profile's; see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NetFilter {
    /// [`NETWORK_OFF_FILTER`]: no IP sockets, no `connect()` or `bind()`.
    Off,
    /// [`LOOPBACK_FILTER`]: the network is off, but the run has a network namespace of
    /// its own (only its loopback), so IP sockets, `bind()` and `listen()` stay; every
    /// `connect()` goes to the supervisor (a pathname unix socket must be one the run
    /// bound).
    Loopback,
    /// [`HOST_UNIX_FILTER`]: the network is on; no unix sockets.
    HostUnixClosed,
    /// [`HOST_UNIX_ALLOW_FILTER`]: the network is on; some host unix sockets by path.
    HostUnixAllowlist,
    /// [`PROXY_FILTER`]: some hosts by name through cordon's proxy.
    Proxy,
}

impl NetFilter {
    /// Every variant, in the order of their cache index.
    pub const ALL: [NetFilter; 5] = [
        NetFilter::Off,
        NetFilter::Loopback,
        NetFilter::HostUnixClosed,
        NetFilter::HostUnixAllowlist,
        NetFilter::Proxy,
    ];

    /// The filter for a run: with `proxy`, [`NetFilter::Proxy`] whatever the others say
    /// (the command reaches the network through cordon's proxy only; allowed host unix
    /// sockets are decided by the same supervised `connect()`); with the network off,
    /// [`NetFilter::Loopback`] when the run has a network namespace of its own and a
    /// supervisor (`loopback`), else [`NetFilter::Off`] (`unix_allowlist` changes only
    /// the network-on filter: with the network off, `connect()` is supervised already).
    pub fn select(network_allowed: bool, unix_allowlist: bool, proxy: bool, loopback: bool) -> NetFilter {
        match (network_allowed, unix_allowlist) {
            _ if proxy => NetFilter::Proxy,
            (false, _) if loopback => NetFilter::Loopback,
            (false, _) => NetFilter::Off,
            (true, false) => NetFilter::HostUnixClosed,
            (true, true) => NetFilter::HostUnixAllowlist,
        }
    }

    /// The profile's name of the filter.
    pub fn name(self) -> &'static str {
        match self {
            NetFilter::Off => NETWORK_OFF_FILTER,
            NetFilter::Loopback => LOOPBACK_FILTER,
            NetFilter::HostUnixClosed => HOST_UNIX_FILTER,
            NetFilter::HostUnixAllowlist => HOST_UNIX_ALLOW_FILTER,
            NetFilter::Proxy => PROXY_FILTER,
        }
    }
}

/// The profile's filters that a confined run installs, in installation order (the
/// order matters only to a kernel that runs them as separate programs; cordon merges
/// them into one, which is why a syscall may appear in one of them only).
pub fn filter_names(network_allowed: bool) -> Vec<&'static str> {
    filter_names_for(network_allowed, false)
}

/// Like [`filter_names`], for a policy that allows some host unix sockets by path
/// (`unix_allowlist`; only changes the network-on filter: with the network off,
/// `connect()` is supervised already).
pub fn filter_names_for(network_allowed: bool, unix_allowlist: bool) -> Vec<&'static str> {
    filter_names_with(network_allowed, unix_allowlist, false)
}

/// Like [`filter_names_for`]; with `proxy`, the network filter is [`PROXY_FILTER`]
/// whatever the other two say ([`NetFilter::select`]).
pub fn filter_names_with(network_allowed: bool, unix_allowlist: bool, proxy: bool) -> Vec<&'static str> {
    filter_names_net(NetFilter::select(network_allowed, unix_allowlist, proxy, false))
}

/// The filters installed with network filter `net`.
pub fn filter_names_net(net: NetFilter) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = ALWAYS_FILTERS.to_vec();
    names.push(net.name());
    names
}

/// Compile the filter for a confined run without a supervisor (one program; every
/// refusal answered by the kernel).
pub fn compile_filter(network_allowed: bool) -> Result<Vec<Insn>, SeccompError> {
    Ok(compile_program(network_allowed, false)?.insns)
}

/// Compile the filter for a confined run; when `supervised`, the observed syscalls
/// notify the supervisor instead of failing in the kernel.
pub fn compile_program(network_allowed: bool, supervised: bool) -> Result<Program, SeccompError> {
    compile_program_for(network_allowed, false, supervised)
}

/// Like [`compile_program`], with [`filter_names_for`]'s unix allow-list variant.
pub fn compile_program_for(
    network_allowed: bool,
    unix_allowlist: bool,
    supervised: bool,
) -> Result<Program, SeccompError> {
    compile_observing(network_allowed, unix_allowlist, supervised, false)
}

/// Like [`compile_program_for`]; with `writes` (only meaningful when `supervised`), the
/// write-intent path syscalls notify the supervisor too ([`ObservedKind::Write`]), and
/// foreign-ABI syscalls notify it instead of killing the process (it refuses them with
/// `ENOSYS` and records them: a `SIGSYS` a command sends itself is then no evidence).
pub fn compile_observing(
    network_allowed: bool,
    unix_allowlist: bool,
    supervised: bool,
    writes: bool,
) -> Result<Program, SeccompError> {
    compile_observing_with(network_allowed, unix_allowlist, false, supervised, writes)
}

/// Like [`compile_observing`], with [`filter_names_with`]'s proxy variant.
pub fn compile_observing_with(
    network_allowed: bool,
    unix_allowlist: bool,
    proxy: bool,
    supervised: bool,
    writes: bool,
) -> Result<Program, SeccompError> {
    compile_net(NetFilter::select(network_allowed, unix_allowlist, proxy, false), supervised, writes)
}

/// The program of a confined run with network filter `net` (see
/// [`compile_observing`] for `supervised` and `writes`).
pub fn compile_net(net: NetFilter, supervised: bool, writes: bool) -> Result<Program, SeccompError> {
    let writes = writes && supervised;
    // The profile is embedded, so each variant compiles to the same program every time:
    // compile it once per process (a long-lived `cordon serve` spawns thousands), or
    // take it from the build (build.rs: a CLI run would compile it every time).
    static CACHE: std::sync::OnceLock<ProgramCache> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = (net, supervised, writes);
    cache[net as usize][supervised as usize][writes as usize]
        .get_or_init(|| match precompiled(key) {
            Some(program) => Ok(program),
            None => compile_program_uncached(net, supervised, writes),
        })
        .clone()
}

/// A program compiled by build.rs: `key` is `(network filter, supervised, writes)`,
/// instructions as `(code, jt, jf, k)`, observed rules as `(nr, name, kind, errno,
/// filter)`.
pub struct PrecompiledProgram {
    /// Which variant.
    pub key: (NetFilter, bool, bool),
    /// Its instructions.
    pub insns: &'static [(u16, u8, u8, u32)],
    /// What its notifications mean.
    pub observed: &'static [(i64, &'static str, ObservedKind, u32, &'static str)],
}

/// Every variant build.rs compiles (`writes` only with `supervised`, as
/// [`compile_net`] normalizes it).
pub const PRECOMPILED_KEYS: [(NetFilter, bool, bool); 3 * NetFilter::ALL.len()] = {
    let mut keys = [(NetFilter::Off, false, false); 3 * NetFilter::ALL.len()];
    let mut i = 0;
    while i < keys.len() {
        let (supervised, writes) = match i % 3 {
            0 => (false, false),
            1 => (true, false),
            _ => (true, true),
        };
        keys[i] = (NetFilter::ALL[i / 3], supervised, writes);
        i += 1;
    }
    keys
};

/// The build's program for `key`, if it compiled one for this target.
fn precompiled(key: (NetFilter, bool, bool)) -> Option<Program> {
    let p = super::seccomp_precompiled::TABLE.iter().find(|p| p.key == key)?;
    Some(Program {
        insns: p.insns.iter().map(|&(code, jt, jf, k)| Insn { code, jt, jf, k }).collect(),
        observed: p
            .observed
            .iter()
            .map(|&(nr, name, kind, errno, filter)| (nr, Observed { name: name.into(), kind, errno, filter }))
            .collect(),
    })
}

pub(crate) fn compile_program_uncached(
    net: NetFilter,
    supervised: bool,
    writes: bool,
) -> Result<Program, SeccompError> {
    let names = filter_names_net(net);
    let observe: Vec<(String, ObservedKind)> = if supervised {
        let f: ObserveFile = serde_json::from_str(OBSERVE_PROFILE).map_err(|e| SeccompError::Profile(e.to_string()))?;
        f.observe.into_iter().map(|r| (r.syscall, r.kind)).collect()
    } else {
        Vec::new()
    };
    let write_rules = if writes {
        let f: WriteIntentFile =
            serde_json::from_str(WRITE_INTENT_PROFILE).map_err(|e| SeccompError::Profile(e.to_string()))?;
        f.write_intent
    } else {
        Vec::new()
    };
    compile(CONFINED_PROFILE, &names, &observe, &write_rules)
}

#[cfg(test)]
#[path = "../../../tests/cbpf/mod.rs"]
mod cbpf;

#[cfg(test)]
mod tests {
    use super::*;

    /// build.rs's programs are the ones this compiler builds at run time, variant by
    /// variant; a native Linux build has every one of them.
    #[test]
    fn precompiled_programs_equal_fresh_compilations() {
        let flat = |p: &Program| p.insns.iter().map(|i| (i.code, i.jt, i.jf, i.k)).collect::<Vec<_>>();
        let mut found = 0;
        for key in PRECOMPILED_KEYS {
            let (net, supervised, writes) = key;
            let fresh = compile_program_uncached(net, supervised, writes);
            let Some(built) = precompiled(key) else { continue };
            found += 1;
            let fresh = fresh.unwrap_or_else(|e| panic!("{key:?}: precompiled, but does not compile now: {e}"));
            assert_eq!(flat(&built), flat(&fresh), "{key:?}: instructions differ");
            assert_eq!(built.observed, fresh.observed, "{key:?}: observed rules differ");
        }
        // build.rs says when it built the table (a native Linux build).
        if cfg!(cordon_precompiled_seccomp) {
            assert_eq!(found, PRECOMPILED_KEYS.len(), "a native Linux build precompiles every variant");
        }
        // The keys are distinct and cover writes only with supervision.
        let mut keys = PRECOMPILED_KEYS.to_vec();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), PRECOMPILED_KEYS.len());
        assert!(keys.iter().all(|k| !k.2 || k.1));
    }

    /// Run `prog` on one syscall through the test tree's classic-BPF interpreter (the
    /// kernel's load checks and semantics; `tests/cbpf`), shared with the differential
    /// test against seccompiler (`tests/seccomp_differential.rs`).
    fn run(prog: &[Insn], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let insns: Vec<cbpf::Insn> =
            prog.iter().map(|i| cbpf::Insn { code: i.code, jt: i.jt, jf: i.jf, k: i.k }).collect();
        let filter = cbpf::Filter::load(&insns).expect("the kernel would refuse this program");
        filter.run(&cbpf::SeccompData { nr, arch, instruction_pointer: 0, args })
    }

    const NATIVE: u32 = 0xC000_003E;
    const EPERM: u32 = libc::SECCOMP_RET_ERRNO | 1;

    #[test]
    fn verdicts() {
        let p = compile_filter(false).unwrap();
        assert!(p.len() < 200, "program grew to {}", p.len());
        let allow = libc::SECCOMP_RET_ALLOW;
        let kill = libc::SECCOMP_RET_KILL_PROCESS;
        assert_eq!(run(&p, NATIVE, libc::SYS_read as u32, [0; 6]), allow);
        assert_eq!(run(&p, NATIVE, libc::SYS_ptrace as u32, [0; 6]), EPERM);
        assert_eq!(run(&p, NATIVE, libc::SYS_io_uring_setup as u32, [0; 6]), EPERM);
        assert_eq!(run(&p, NATIVE, libc::SYS_clone3 as u32, [0; 6]), libc::SECCOMP_RET_ERRNO | 38);
        let eacces = libc::SECCOMP_RET_ERRNO | 13;
        assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [2, 1, 0, 0, 0, 0]), eacces);
        assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [10, 2, 0, 0, 0, 0]), eacces);
        // AF_UNIX: stream and seqpacket (with flags) allowed; dgram and raw refused.
        let cloexec_nonblock = (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as u64;
        assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [1, 1 | cloexec_nonblock, 0, 0, 0, 0]), allow);
        assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [1, 5, 0, 0, 0, 0]), allow);
        for ty in [0u64, 2, 3, 4, 6, 7, 9, 10, 11, 13, 15] {
            assert_eq!(
                run(&p, NATIVE, libc::SYS_socket as u32, [1, ty | cloexec_nonblock, 0, 0, 0, 0]),
                eacces,
                "type {ty}"
            );
        }
        assert_eq!(run(&p, NATIVE, libc::SYS_connect as u32, [3, 0, 0, 0, 0, 0]), eacces);
        // socketpair: stream pairs fine, datagram/raw pairs and other families refused.
        assert_eq!(run(&p, NATIVE, libc::SYS_socketpair as u32, [1, 1 | cloexec_nonblock, 0, 0, 0, 0]), allow);
        assert_eq!(run(&p, NATIVE, libc::SYS_socketpair as u32, [1, 5, 0, 0, 0, 0]), allow);
        for ty in [2u64, 3, 4, 6] {
            assert_eq!(run(&p, NATIVE, libc::SYS_socketpair as u32, [1, ty, 0, 0, 0, 0]), eacces, "type {ty}");
        }
        assert_eq!(run(&p, NATIVE, libc::SYS_socketpair as u32, [2, 1, 0, 0, 0, 0]), eacces);
        // prlimit64 on self fine, on another pid refused.
        assert_eq!(run(&p, NATIVE, libc::SYS_prlimit64 as u32, [0, 0, 0, 0, 0, 0]), allow);
        assert_eq!(run(&p, NATIVE, libc::SYS_prlimit64 as u32, [1, 0, 0, 0, 0, 0]), EPERM);
        assert_eq!(run(&p, NATIVE, libc::SYS_bind as u32, [3, 0, 0, 0, 0, 0]), eacces);
        // ioctl: TIOCSTI refused, also with high bits set; other ioctls allowed.
        assert_eq!(run(&p, NATIVE, libc::SYS_ioctl as u32, [0, 0x5412, 0, 0, 0, 0]), EPERM);
        assert_eq!(run(&p, NATIVE, libc::SYS_ioctl as u32, [0, 0xffff_ffff_0000_5412, 0, 0, 0, 0]), EPERM);
        assert_eq!(run(&p, NATIVE, libc::SYS_ioctl as u32, [0, 0x541C, 0, 0, 0, 0]), EPERM);
        assert_eq!(run(&p, NATIVE, libc::SYS_ioctl as u32, [0, 0x5401, 0, 0, 0, 0]), allow);
        // clone: plain fork allowed, any namespace flag refused.
        assert_eq!(run(&p, NATIVE, libc::SYS_clone as u32, [libc::SIGCHLD as u64, 0, 0, 0, 0, 0]), allow);
        for flag in [libc::CLONE_NEWUSER, libc::CLONE_NEWNS, libc::CLONE_NEWPID, libc::CLONE_NEWNET] {
            let flags = (flag | libc::SIGCHLD) as u64 | 0xdead_0000_0000_0000;
            assert_eq!(run(&p, NATIVE, libc::SYS_clone as u32, [flags, 0, 0, 0, 0, 0]), EPERM);
        }
        // Foreign architecture and x32 numbers are killed.
        assert_eq!(run(&p, 0x4000_0003, 1, [0; 6]), kill);
        assert_eq!(run(&p, NATIVE, 0x4000_0027, [0; 6]), kill);
    }

    #[test]
    fn supervised_program_notifies_for_observed_syscalls() {
        let p = compile_program(false, true).unwrap();
        let notify = RET_USER_NOTIF;
        assert_eq!(run(&p.insns, NATIVE, libc::SYS_connect as u32, [3, 0, 0, 0, 0, 0]), notify);
        assert_eq!(run(&p.insns, NATIVE, libc::SYS_socket as u32, [2, 1, 0, 0, 0, 0]), notify);
        assert_eq!(run(&p.insns, NATIVE, libc::SYS_socket as u32, [1, 1, 0, 0, 0, 0]), libc::SECCOMP_RET_ALLOW);
        assert_eq!(run(&p.insns, NATIVE, libc::SYS_ptrace as u32, [0; 6]), notify);
        assert_eq!(run(&p.insns, NATIVE, libc::SYS_bpf as u32, [0; 6]), notify);
        // Probed by libuv on every start and tolerated: refused, not observed.
        assert_eq!(run(&p.insns, NATIVE, libc::SYS_io_uring_setup as u32, [0; 6]), EPERM);
        assert_eq!(p.observed[&libc::SYS_connect].errno, 13);
        assert_eq!(p.observed[&libc::SYS_ptrace].errno, 1);
        let unsupervised = compile_program(false, false).unwrap();
        assert!(unsupervised.observed.is_empty());
    }

    #[test]
    fn observing_writes_notifies_only_write_intent_path_syscalls() {
        let p = compile_observing(false, false, true, true).unwrap();
        let notify = RET_USER_NOTIF;
        let allow = libc::SECCOMP_RET_ALLOW;
        let at = |flags: i32| [libc::AT_FDCWD as u64, 0x1000, flags as u64, 0, 0, 0];
        assert_eq!(run(&p.insns, NATIVE, libc::SYS_openat as u32, at(libc::O_RDONLY | libc::O_CLOEXEC)), allow);
        assert_eq!(run(&p.insns, NATIVE, libc::SYS_openat as u32, at(libc::O_RDONLY | libc::O_DIRECTORY)), allow);
        for flags in [libc::O_WRONLY, libc::O_RDWR, libc::O_CREAT, libc::O_TRUNC, libc::O_WRONLY | libc::O_APPEND] {
            assert_eq!(run(&p.insns, NATIVE, libc::SYS_openat as u32, at(flags)), notify, "flags {flags:#x}");
        }
        for nr in [libc::SYS_mkdirat, libc::SYS_unlinkat, libc::SYS_renameat2, libc::SYS_symlinkat, libc::SYS_utimensat]
        {
            assert_eq!(run(&p.insns, NATIVE, nr as u32, [0; 6]), notify, "syscall {nr}");
            assert_eq!(p.observed[&nr].kind, ObservedKind::Write);
        }
        // Descriptor-based and read-only calls never stop.
        for nr in [libc::SYS_write, libc::SYS_ftruncate, libc::SYS_fchmod, libc::SYS_read, libc::SYS_newfstatat] {
            assert_eq!(run(&p.insns, NATIVE, nr as u32, [0; 6]), allow, "syscall {nr}");
        }
        // Foreign entry points go to the supervisor (refused there, and recorded).
        assert_eq!(run(&p.insns, 0x4000_0003, 1, [0; 6]), notify);
        assert_eq!(run(&p.insns, NATIVE, 0x4000_0027, [0; 6]), notify);
        // Unsupervised, nothing notifies and foreign entry points are killed.
        let plain = compile_observing(false, false, false, true).unwrap();
        assert_eq!(run(&plain.insns, 0x4000_0003, 1, [0; 6]), libc::SECCOMP_RET_KILL_PROCESS);
        assert_eq!(run(&plain.insns, NATIVE, libc::SYS_mkdirat as u32, [0; 6]), allow);
    }

    #[test]
    fn network_on_keeps_ip_and_closes_unix_sockets() {
        let p = compile_filter(true).unwrap();
        let allow = libc::SECCOMP_RET_ALLOW;
        let eacces = libc::SECCOMP_RET_ERRNO | 13;
        let flags = (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as u64;
        // IP sockets, connect() and bind() stay open.
        assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [2, 1, 0, 0, 0, 0]), allow);
        assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [10, 2 | flags, 0, 0, 0, 0]), allow);
        assert_eq!(run(&p, NATIVE, libc::SYS_connect as u32, [3, 0, 0, 0, 0, 0]), allow);
        assert_eq!(run(&p, NATIVE, libc::SYS_bind as u32, [3, 0, 0, 0, 0, 0]), allow);
        // No unix socket of any type, with or without flags, and high bits do not
        // dodge the dword family check.
        for ty in [1u64, 2, 3, 5] {
            assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [1, ty, 0, 0, 0, 0]), eacces, "type {ty}");
            assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [1 | (1 << 32), ty | flags, 0, 0, 0, 0]), eacces);
        }
        // socketpair: stream and seqpacket pairs stay; datagram/raw pairs refused.
        assert_eq!(run(&p, NATIVE, libc::SYS_socketpair as u32, [1, 1 | flags, 0, 0, 0, 0]), allow);
        assert_eq!(run(&p, NATIVE, libc::SYS_socketpair as u32, [1, 5, 0, 0, 0, 0]), allow);
        for ty in [2u64, 3, 4, 6, 9, 13] {
            assert_eq!(run(&p, NATIVE, libc::SYS_socketpair as u32, [1, ty | flags, 0, 0, 0, 0]), eacces, "type {ty}");
        }
        assert_eq!(run(&p, NATIVE, libc::SYS_ptrace as u32, [0; 6]), EPERM);
        // Supervised, the refusals are observed and named by their filter.
        let sup = compile_program(true, true).unwrap();
        assert_eq!(run(&sup.insns, NATIVE, libc::SYS_socket as u32, [1, 1, 0, 0, 0, 0]), RET_USER_NOTIF);
        assert_eq!(run(&sup.insns, NATIVE, libc::SYS_socket as u32, [2, 1, 0, 0, 0, 0]), allow);
        assert_eq!(run(&sup.insns, NATIVE, libc::SYS_connect as u32, [3, 0, 0, 0, 0, 0]), allow);
        assert_eq!(sup.observed[&libc::SYS_socket].filter, HOST_UNIX_FILTER);
        assert_eq!(sup.observed[&libc::SYS_socket].errno, 13);
        assert!(!sup.observed.contains_key(&libc::SYS_connect));
    }

    #[test]
    fn proxy_mode_keeps_tcp_streams_and_supervises_every_connect() {
        let allow = libc::SECCOMP_RET_ALLOW;
        let eacces = libc::SECCOMP_RET_ERRNO | 13;
        let flags = (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as u64;
        for (network, unix) in [(false, false), (true, false), (true, true)] {
            assert_eq!(filter_names_with(network, unix, true), ["deny_eperm", "deny_enosys", PROXY_FILTER]);
            let p = compile_observing_with(network, unix, true, false, false).unwrap().insns;
            // TCP stream sockets (with flags, protocol 0 or IPPROTO_TCP) may exist.
            for fam in [2u64, 10] {
                assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [fam, 1 | flags, 0, 0, 0, 0]), allow);
                assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [fam, 1, 6, 0, 0, 0]), allow);
                // UDP, raw, SCTP, MPTCP and unknown types are refused.
                for ty in [2u64, 3, 4, 5, 6, 7, 9, 10, 11, 13, 15] {
                    assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [fam, ty | flags, 0, 0, 0, 0]), eacces, "{ty}");
                }
                for proto in [17u64, 132, 262, 255] {
                    assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [fam, 1, proto, 0, 0, 0]), eacces, "{proto}");
                }
            }
            // Other families refused; unix sockets as with the network off.
            for fam in [16u64, 17, 40, 0, 3] {
                assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [fam, 1, 0, 0, 0, 0]), eacces, "family {fam}");
            }
            assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [1, 1, 0, 0, 0, 0]), allow);
            assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [1, 2, 0, 0, 0, 0]), eacces);
            assert_eq!(run(&p, NATIVE, libc::SYS_socketpair as u32, [2, 1, 0, 0, 0, 0]), eacces);
            // Without a supervisor no connect, bind or listen; no TCP Fast Open.
            for nr in [libc::SYS_connect, libc::SYS_bind, libc::SYS_listen] {
                assert_eq!(run(&p, NATIVE, nr as u32, [3, 0, 0, 0, 0, 0]), eacces, "{nr}");
            }
            let fastopen = libc::MSG_FASTOPEN as u64;
            assert_eq!(run(&p, NATIVE, libc::SYS_sendto as u32, [3, 0, 0, fastopen, 0, 0]), eacces);
            assert_eq!(run(&p, NATIVE, libc::SYS_sendto as u32, [3, 0, 0, libc::MSG_NOSIGNAL as u64, 0, 0]), allow);
            assert_eq!(run(&p, NATIVE, libc::SYS_sendmsg as u32, [3, 0, fastopen | 0x4000, 0, 0, 0]), eacces);
            assert_eq!(run(&p, NATIVE, libc::SYS_sendmsg as u32, [3, 0, 0, 0, 0, 0]), allow);
            assert_eq!(run(&p, NATIVE, libc::SYS_sendmmsg as u32, [3, 0, 1, fastopen, 0, 0]), eacces);
            // Supervised, connect() goes to the supervisor, named by the proxy filter.
            let sup = compile_observing_with(network, unix, true, true, false).unwrap();
            assert_eq!(run(&sup.insns, NATIVE, libc::SYS_connect as u32, [3, 0, 0, 0, 0, 0]), RET_USER_NOTIF);
            assert_eq!(sup.observed[&libc::SYS_connect].filter, PROXY_FILTER);
        }
    }

    #[test]
    fn loopback_mode_keeps_tcp_udp_and_unix_streams_and_supervises_every_connect() {
        let allow = libc::SECCOMP_RET_ALLOW;
        let eacces = libc::SECCOMP_RET_ERRNO | 13;
        let flags = (libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK) as u64;
        for unix in [false, true] {
            assert_eq!(NetFilter::select(false, unix, false, true), NetFilter::Loopback);
        }
        assert_eq!(NetFilter::select(false, false, true, true), NetFilter::Proxy, "hosts by name keep the proxy");
        assert_eq!(NetFilter::select(true, false, false, true), NetFilter::HostUnixClosed, "network on");
        assert_eq!(filter_names_net(NetFilter::Loopback), ["deny_eperm", "deny_enosys", LOOPBACK_FILTER]);
        let p = compile_net(NetFilter::Loopback, false, false).unwrap().insns;
        for fam in [2u64, 10] {
            // TCP and UDP (with flags, protocol 0 or their own) may exist.
            for (ty, proto) in [(1u64, 0u64), (1, 6), (2, 0), (2, 17)] {
                assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [fam, ty | flags, proto, 0, 0, 0]), allow);
            }
            // Raw, SEQPACKET (SCTP), DCCP, packet and unknown types are refused.
            for ty in [0u64, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [fam, ty | flags, 0, 0, 0, 0]), eacces, "{ty}");
            }
            // SCTP, MPTCP, UDP-Lite, ICMP (ping sockets) refused.
            for proto in [132u64, 262, 136, 1, 58, 255] {
                assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [fam, 1, proto, 0, 0, 0]), eacces, "{proto}");
                assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [fam, 2, proto, 0, 0, 0]), eacces, "{proto}");
            }
        }
        // Netlink, packet, vsock and unknown families refused; unix as with the network off.
        for fam in [16u64, 17, 40, 0, 3] {
            assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [fam, 1, 0, 0, 0, 0]), eacces, "family {fam}");
        }
        assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [1, 1 | flags, 0, 0, 0, 0]), allow);
        assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [1, 5, 0, 0, 0, 0]), allow);
        for ty in [2u64, 3, 9] {
            assert_eq!(run(&p, NATIVE, libc::SYS_socket as u32, [1, ty, 0, 0, 0, 0]), eacces, "unix {ty}");
            assert_eq!(run(&p, NATIVE, libc::SYS_socketpair as u32, [1, ty, 0, 0, 0, 0]), eacces, "pair {ty}");
        }
        assert_eq!(run(&p, NATIVE, libc::SYS_socketpair as u32, [1, 1, 0, 0, 0, 0]), allow);
        assert_eq!(run(&p, NATIVE, libc::SYS_socketpair as u32, [2, 1, 0, 0, 0, 0]), eacces);
        // Listening and TCP Fast Open reach only the run's own namespace.
        assert_eq!(run(&p, NATIVE, libc::SYS_listen as u32, [3, 0, 0, 0, 0, 0]), allow);
        let fastopen = libc::MSG_FASTOPEN as u64;
        assert_eq!(run(&p, NATIVE, libc::SYS_sendto as u32, [3, 0, 0, fastopen, 0, 0]), allow);
        // Without a supervisor neither connect nor bind.
        for nr in [libc::SYS_connect, libc::SYS_bind] {
            assert_eq!(run(&p, NATIVE, nr as u32, [3, 0, 0, 0, 0, 0]), eacces, "{nr}");
        }
        // Supervised, both go to the supervisor, named by the loopback filter; so does a
        // sendto() with an address (for the report), not one without.
        let sup = compile_net(NetFilter::Loopback, true, true).unwrap();
        for nr in [libc::SYS_connect, libc::SYS_bind] {
            assert_eq!(run(&sup.insns, NATIVE, nr as u32, [3, 0, 0, 0, 0, 0]), RET_USER_NOTIF);
            assert_eq!(sup.observed[&nr].filter, LOOPBACK_FILTER);
        }
        let sendto = libc::SYS_sendto as u32;
        assert_eq!(run(&sup.insns, NATIVE, sendto, [3, 0x1000, 1, 0, 0x7fff_0000_1000, 16]), RET_USER_NOTIF);
        assert_eq!(run(&sup.insns, NATIVE, sendto, [3, 0x1000, 1, 0, 0, 0]), allow);
        assert_eq!(sup.observed[&libc::SYS_sendto].filter, LOOPBACK_FILTER);
    }

    #[test]
    fn every_rule_has_a_reason_and_seccompiler_accepts_the_profile() {
        let json: serde_json::Value = serde_json::from_str(CONFINED_PROFILE).unwrap();
        for (name, filter) in json.as_object().unwrap() {
            for rule in filter["filter"].as_array().unwrap() {
                let comment = rule["comment"].as_str().unwrap_or("");
                assert!(comment.len() > 10, "rule {rule} in {name} lacks a reason");
                for arg in rule["args"].as_array().into_iter().flatten() {
                    assert!(arg["comment"].as_str().is_some(), "argument check in {rule} lacks a comment");
                }
            }
        }
        let arch = seccompiler::TargetArch::x86_64;
        seccompiler::compile_from_json(CONFINED_PROFILE.as_bytes(), arch).expect("seccompiler rejects the profile");
    }

    #[test]
    fn a_syscall_in_two_filters_is_refused_at_compile_time() {
        // Stacked, the kernel would answer ptrace with the newest filter's errno; merged,
        // the old compiler silently took the lowest. Neither is what the author wrote.
        let profile = r#"{
          "a": { "mismatch_action": "allow", "match_action": { "errno": 13 },
                 "filter": [ { "syscall": "ptrace", "comment": "refused in a" },
                             { "syscall": "bpf", "comment": "refused in a" } ] },
          "b": { "mismatch_action": "allow", "match_action": { "errno": 1 },
                 "filter": [ { "syscall": "ptrace", "args": [ { "index": 0, "type": "dword", "op": "eq", "val": 16, "comment": "PTRACE_ATTACH" } ], "comment": "refused in b" } ] }
        }"#;
        let err = compile(profile, &["a", "b"], &[], &[]).unwrap_err();
        assert_eq!(err, SeccompError::DuplicateSyscall { syscall: "ptrace".into(), first: "a", second: "b" });
        assert!(err.to_string().contains("`ptrace` in two filters, `a` and `b`"), "{err}");
        // Each filter alone is fine, and so are several rules for one syscall in one filter
        // (clone and socket in the real profile).
        assert!(compile(profile, &["a"], &[], &[]).is_ok());
        assert!(compile(profile, &["b"], &[], &[]).is_ok());
        for network_allowed in [false, true] {
            compile_program(network_allowed, true).expect("the real profile names each syscall in one filter");
            compile_observing_with(network_allowed, false, true, true, true)
                .expect("the proxy variant names each syscall in one filter, with the write rules too");
            compile_net(NetFilter::Loopback, true, true)
                .expect("the loopback variant names each syscall in one filter, with the write rules too");
        }
    }

    #[test]
    fn ioctl_checks_compare_only_the_low_32_bits() {
        let json: serde_json::Value = serde_json::from_str(CONFINED_PROFILE).unwrap();
        for rule in json["deny_eperm"]["filter"].as_array().unwrap() {
            if rule["syscall"] == "ioctl" || rule["syscall"] == "clone" {
                assert_eq!(rule["args"][0]["type"], "dword", "{rule}");
            }
        }
    }
}
