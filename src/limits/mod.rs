//! Resource limits per run: memory, processes and CPU time, so that nothing a command
//! does can take the host (or cordon) down.
//!
//! Three layers, best available first, each reported for what it is:
//!
//! 1. **A per-run cgroup** ([`RunCgroup`]), where cordon can create one: cgroup v2
//!    (`memory.max`, `memory.swap.max`, `memory.oom.group`, `pids.max`) in cordon's
//!    own cgroup when that subtree is delegated to it, or under `<v2 root>/cordon`
//!    when the root passes both controllers down (root on a pure v2 host), else the
//!    v1 `memory`
//!    (`memory.limit_in_bytes`, `memory.memsw.limit_in_bytes`) and `pids` (`pids.max`)
//!    hierarchies (root on a hybrid host), plus v1 `cpuacct` for CPU evidence. The
//!    child joins it before it forks anything (the stage writes `0` to the
//!    attach fds opened here: `cgroup.procs`, or a v1 hierarchy's `tasks`, the one
//!    migration that skips the kernel's global threadgroup lock); after the run every process left in it is
//!    killed and the cgroup removed. It bounds the run's total: every process, and the
//!    pages of its private tmpfs (charged to the writer's memory cgroup).
//! 2. **rlimits** set by the child on itself ([`plan_limits`]): `RLIMIT_CPU` always
//!    (CPU seconds per process: a process that forks gets a fresh budget per child;
//!    the run's wall time is bounded by its timeout); `RLIMIT_NPROC` when no pids
//!    cgroup exists and the kernel applies it to the uid ([`nproc_exempt`]: it exempts
//!    the host's root, but not the root of a rootless container, which is another uid
//!    of the host; inside a user namespace it counts the run's own processes, outside
//!    it every process of the uid, so there only an explicit limit is applied); `RLIMIT_DATA` when no memory
//!    cgroup exists and the caller set the limit explicitly (per process, not the
//!    run's total: a gap; it also counts reserved address space, which
//!    AddressSanitizer's shadow memory cannot live with, so a default is not applied).
//!    `RLIMIT_AS` is never used: runtimes that reserve large address ranges (JVM, Go,
//!    V8) would fail under it.
//! 3. **`oom_score_adj` = 1000** in the child: whatever the mechanism, the OOM killer
//!    picks the command before cordon.
//!
//! The private tmpfs mounts (`/tmp`, `/dev/shm`) each get `size=` = memory / 4
//! ([`Limits::tmpfs_size`]): a full one answers `ENOSPC` (a clean error rather than
//! an OOM kill), and both together leave half the memory limit to the processes.
//!
//! Defaults and caps are fractions of [`memory_budget`]: `MemTotal`, or the lower
//! limit of the memory cgroup cordon itself runs in (a container, a CI job).
//!
//! What it does not do: it does not share one budget among concurrent runs (each run
//! has its own), and it does not make CPU time a per-run total (cgroup `cpu.max` is a
//! rate, not a budget).

use crate::vocab::{Gap, Restriction};
use serde::Serialize;
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

mod cgroup;
pub use crate::result::limits::{AppliedLimits, Mechanism, Resource};
pub use cgroup::*;

/// Default memory limit, as a percentage of the host's `MemTotal` (or of the limit
/// of the memory cgroup cordon runs in, when lower: see [`memory_budget`]): the host
/// keeps the other half for itself and for cordon.
pub const DEFAULT_MEMORY_PERCENT: u64 = 50;
/// The largest memory limit a request may ask for, as a percentage of the budget.
pub const MAX_MEMORY_PERCENT: u64 = 90;
/// `MemTotal` assumed when `/proc/meminfo` cannot be read.
pub const FALLBACK_MEM_TOTAL: u64 = 4 << 30;
/// Smallest memory limit accepted: below this even a shell cannot start.
pub const MIN_MEMORY: u64 = 8 << 20;
/// Default process limit: ample for parallel builds (`make -j`, test runners), far
/// below what exhausts a host's pid space (`pid_max` is 32768 or more).
pub const DEFAULT_PIDS: u64 = 4096;
/// The largest process limit a request may ask for.
pub const MAX_PIDS: u64 = 32768;
/// Default CPU seconds per process: none (the run's timeout bounds its wall time).
pub const DEFAULT_CPU_SECONDS: Option<u64> = None;
/// The largest CPU limit a request may ask for (one day).
pub const MAX_CPU_SECONDS: u64 = 24 * 3600;
/// Each private tmpfs may hold memory / this many bytes (both: half the limit).
pub const TMPFS_SHARE: u64 = 4;
/// What the child writes to `/proc/self/oom_score_adj`: the OOM killer's first pick.
pub const OOM_SCORE_ADJ: &[u8] = b"1000";
// The rlimit resource numbers as the stage takes them (`u32` on glibc, `int` on musl).
#[allow(clippy::unnecessary_cast)]
const RLIMIT_NPROC: u32 = libc::RLIMIT_NPROC as u32;
#[allow(clippy::unnecessary_cast)]
const RLIMIT_DATA: u32 = libc::RLIMIT_DATA as u32;
#[allow(clippy::unnecessary_cast)]
const RLIMIT_CPU: u32 = libc::RLIMIT_CPU as u32;
/// Prefix of every per-run cgroup directory.
pub const CGROUP_PREFIX: &str = "cordon-run-";

/// Limits a caller asks for; `None` takes the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LimitRequest {
    /// Memory in bytes.
    pub memory: Option<u64>,
    /// Processes (and threads).
    pub pids: Option<u64>,
    /// CPU seconds per process.
    pub cpu: Option<u64>,
}

/// Resolved limits of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Memory in bytes.
    pub memory: u64,
    /// Processes.
    pub pids: u64,
    /// CPU seconds per process.
    pub cpu: Option<u64>,
    /// The limits the caller set explicitly (the rest are defaults). A gap in an
    /// explicit limit makes a run without `best_effort` refuse; a gap in a default is
    /// reported in the result's `limits` only.
    pub explicit: Vec<Resource>,
}

impl Limits {
    /// `size=` of each private tmpfs: a quarter of the memory limit.
    pub fn tmpfs_size(&self) -> u64 {
        self.memory / TMPFS_SHARE
    }
}

/// The host's `MemTotal` in bytes (read once): `sysinfo(2)` on Linux (the same
/// figure, without formatting and parsing `/proc/meminfo`), else `/proc/meminfo`.
pub fn mem_total() -> u64 {
    static TOTAL: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TOTAL.get_or_init(|| {
        #[cfg(target_os = "linux")]
        if let Some(total) = cordon_stage::host::total_ram() {
            return total;
        }
        std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| parse_mem_total(&s)).unwrap_or(FALLBACK_MEM_TOTAL)
    })
}

/// The memory cordon may plan with: the host's `MemTotal`, or less when cordon
/// itself lives in a memory cgroup with a lower limit (a container, a systemd unit,
/// a CI job) — the defaults and caps are fractions of this, so a default limit never
/// exceeds what the enclosing cgroup allows (which would let the enclosing cgroup's
/// OOM killer act first, among cordon's own processes).
pub fn memory_budget(layout: &CgroupLayout) -> u64 {
    let mut budget = mem_total();
    let v1 = layout.v1.get("memory").map(|d| (d, "memory.limit_in_bytes"));
    let v2 = layout.v2.as_ref().map(|d| (d, "memory.max"));
    for (own, file) in v1.into_iter().chain(v2) {
        // Limits are hierarchical: the lowest on the way up to the hierarchy's root.
        for dir in own.ancestors() {
            let Ok(text) = std::fs::read_to_string(dir.join(file)) else { break };
            if let Ok(limit) = text.trim().parse::<u64>() {
                budget = budget.min(limit);
            }
        }
    }
    budget
}

/// `MemTotal` from `/proc/meminfo` text, in bytes.
pub fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// Why a limit in a request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitError {
    /// The request field.
    pub field: &'static str,
    /// Why.
    pub why: String,
}

/// Fill and cap a limit request: an absent limit takes `defaults`' value (or the
/// built-in default), every default is capped by `caps` (or the built-in cap), and an
/// explicit value over its cap is an error (never silently lowered). Zero
/// and a memory limit under [`MIN_MEMORY`] are refused.
pub fn resolve_limits(
    req: &LimitRequest,
    defaults: &LimitRequest,
    caps: &LimitRequest,
    mem_total: u64,
) -> Result<Limits, LimitError> {
    let max_memory = caps.memory.unwrap_or(mem_total.saturating_mul(MAX_MEMORY_PERCENT) / 100);
    let max_pids = caps.pids.unwrap_or(MAX_PIDS);
    let max_cpu = caps.cpu.unwrap_or(MAX_CPU_SECONDS);
    for (field, v) in [("limit_memory", req.memory), ("limit_pids", req.pids), ("limit_cpu", req.cpu)] {
        if v == Some(0) {
            return Err(LimitError { field, why: "must be greater than zero".into() });
        }
    }
    // An explicit value over its cap is an error, never silently lowered.
    for (field, v, cap) in
        [("limit_memory", req.memory, max_memory), ("limit_pids", req.pids, max_pids), ("limit_cpu", req.cpu, max_cpu)]
    {
        if let Some(v) = v.filter(|&v| v > cap) {
            return Err(LimitError { field, why: format!("{v} is over the cap of {cap}") });
        }
    }
    if let Some(m) = req.memory.filter(|&m| m < MIN_MEMORY) {
        return Err(LimitError { field: "limit_memory", why: format!("{m} bytes is below the minimum {MIN_MEMORY}") });
    }
    let memory = req
        .memory
        .or(defaults.memory)
        .unwrap_or(mem_total.saturating_mul(DEFAULT_MEMORY_PERCENT) / 100)
        .min(max_memory);
    let pids = req.pids.or(defaults.pids).unwrap_or(DEFAULT_PIDS).min(max_pids);
    let cpu = req.cpu.or(defaults.cpu).or(DEFAULT_CPU_SECONDS).map(|c| c.min(max_cpu));
    let mut explicit = Vec::new();
    if req.memory.is_some() {
        explicit.push(Resource::Memory);
    }
    if req.pids.is_some() {
        explicit.push(Resource::Pids);
    }
    if req.cpu.is_some() {
        explicit.push(Resource::Cpu);
    }
    Ok(Limits { memory, pids, cpu, explicit })
}

/// Parse a byte count with an optional binary suffix: `K`, `M`, `G`, `T` (also
/// `KiB`/`KB`-style spellings, all powers of 1024).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("`{s}` is not a byte count (e.g. 512M, 2G)"))?;
    let shift = match suffix.to_ascii_uppercase().trim_end_matches("IB").trim_end_matches('B') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(format!("`{s}`: unknown suffix `{suffix}` (expected K, M, G or T)")),
    };
    n.checked_mul(1 << shift).ok_or_else(|| format!("`{s}` is too large"))
}

/// The limit flags shared by `cordon run` and the server ceilings (`serve`, `mcp`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::Args)]
pub struct LimitArgs {
    /// Memory limit of the run (processes and private tmpfs), bytes with an optional
    /// K/M/G/T suffix (default: half of the host's RAM, at most 90%; more is an error).
    #[arg(long = "limit-memory", value_name = "BYTES", value_parser = parse_bytes)]
    pub memory: Option<u64>,
    /// Process (and thread) limit of the run (default 4096, at most 32768; more is an error).
    #[arg(long = "limit-pids", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub pids: Option<u64>,
    /// CPU seconds per process (RLIMIT_CPU; default: none, the timeout bounds the run; at
    /// most 86400, more is an error).
    #[arg(long = "limit-cpu", value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub cpu: Option<u64>,
}

impl LimitArgs {
    /// As a request.
    pub fn request(&self) -> LimitRequest {
        LimitRequest { memory: self.memory, pids: self.pids, cpu: self.cpu }
    }
}

/// What the host's cgroups covered for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Coverage {
    /// The memory controller, and which version.
    pub memory: Option<Mechanism>,
    /// The pids controller, and which version.
    pub pids: Option<Mechanism>,
}

/// The child-side half of the limits, planned (pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitPlan {
    /// `(RLIMIT_*, soft, hard)` for the child.
    pub rlimits: Vec<(u32, u64, u64)>,
    /// The report.
    pub applied: AppliedLimits,
    /// Gaps, per restriction, with reasons (explicit and default limits alike).
    pub gaps: Vec<(Restriction, String)>,
}

/// Whether the kernel exempts a process of uid `euid` from `RLIMIT_NPROC`: its uid is
/// the host's root (the initial user namespace's uid 0). The root of a rootless
/// container is another uid of the host (its `uid_map` says which), and is not exempt;
/// capabilities, the kernel's other exemption, are dropped in every confined run.
/// Reads `/proc/self/uid_map` only for uid 0.
pub fn nproc_exempt(euid: u32) -> bool {
    if euid != 0 {
        return false;
    }
    match std::fs::read_to_string("/proc/self/uid_map") {
        Ok(map) => maps_to_host_root(&map, euid),
        Err(_) => true,
    }
}

/// Whether `uid` maps to the host's uid 0 in `uid_map` text (pure).
pub fn maps_to_host_root(uid_map: &str, uid: u32) -> bool {
    uid_map.lines().any(|l| {
        let f: Vec<u64> = l.split_whitespace().filter_map(|v| v.parse().ok()).collect();
        matches!(f[..], [inside, outside, count] if u64::from(uid) >= inside && u64::from(uid) < inside + count
            && outside + (u64::from(uid) - inside) == 0)
    })
}

/// Plan the rlimits and the report for `limits`, given what the cgroups covered,
/// whether the kernel exempts the caller's uid from `RLIMIT_NPROC` ([`nproc_exempt`])
/// and whether the command gets its own user namespace (pure). `why_no_cgroup`
/// explains a missing controller.
pub fn plan_limits(
    limits: &Limits,
    coverage: Coverage,
    nproc_exempt: bool,
    userns: bool,
    why_no_cgroup: &str,
) -> LimitPlan {
    let mut rlimits = Vec::new();
    let mut gaps = Vec::new();
    let pids_by = match coverage.pids {
        Some(m) => m,
        // In a user namespace the kernel counts the run's own processes; outside one,
        // every process (thread) of the uid: stricter than asked, never looser, but a
        // default could starve a busy desktop session, so only an explicit limit.
        None if !nproc_exempt && (userns || limits.explicit.contains(&Resource::Pids)) => {
            rlimits.push((RLIMIT_NPROC, limits.pids, limits.pids));
            Mechanism::Rlimit
        }
        None if !nproc_exempt => {
            gaps.push((
                Restriction::LimitPids,
                format!(
                    "no pids cgroup could be created ({why_no_cgroup}), and outside a user namespace RLIMIT_NPROC \
                     counts every process of the uid, so the default is not applied"
                ),
            ));
            Mechanism::None
        }
        None => {
            gaps.push((
                Restriction::LimitPids,
                format!(
                    "RLIMIT_NPROC does not apply to the host's uid 0 and no pids cgroup could be created: \
                     {why_no_cgroup}"
                ),
            ));
            Mechanism::None
        }
    };
    let memory_by = match coverage.memory {
        Some(m) => m,
        // RLIMIT_DATA also counts address space reserved but never touched, so it
        // stops programs that reserve large ranges (AddressSanitizer's shadow memory
        // fails to map under any RLIMIT_DATA): only an explicit limit gets it.
        None if limits.explicit.contains(&Resource::Memory) => {
            rlimits.push((RLIMIT_DATA, limits.memory, limits.memory));
            gaps.push((
                Restriction::LimitMemory,
                format!(
                    "no memory cgroup could be created ({why_no_cgroup}): RLIMIT_DATA bounds each process, not the \
                     run's total"
                ),
            ));
            Mechanism::Rlimit
        }
        None => {
            gaps.push((
                Restriction::LimitMemory,
                format!(
                    "no memory cgroup could be created ({why_no_cgroup}), and RLIMIT_DATA would break programs that \
                     reserve large address ranges (AddressSanitizer), so the default is not applied; the OOM killer \
                     still picks the command before cordon (oom_score_adj 1000)"
                ),
            ));
            Mechanism::None
        }
    };
    if let Some(cpu) = limits.cpu {
        // Soft: SIGXCPU at the limit; hard one second later: SIGKILL if it was caught.
        rlimits.push((RLIMIT_CPU, cpu, cpu.saturating_add(1)));
    }
    let applied = AppliedLimits {
        memory: limits.memory,
        memory_by,
        pids: limits.pids,
        pids_by,
        cpu: limits.cpu,
        tmpfs_size: limits.tmpfs_size(),
        gaps: gaps.iter().map(|(r, why)| Gap { restriction: *r, reason: why.clone() }).collect(),
    };
    LimitPlan { rlimits, applied, gaps }
}

/// One run's limits, from creation of its cgroups to the verdict: what the executor
/// holds between planning and the result.
#[derive(Debug)]
pub struct RunLimits {
    limits: Limits,
    cgroup: RunCgroup,
    plan: LimitPlan,
}

impl RunLimits {
    /// Create the run's cgroups (named `name`) and plan the rest for a caller with
    /// `euid`; `userns`: the command gets its own user namespace.
    pub fn prepare(layout: &CgroupLayout, name: &str, limits: &Limits, euid: u32, userns: bool) -> RunLimits {
        let cgroup = RunCgroup::create(layout, name, limits);
        let plan = plan_limits(limits, cgroup.coverage(), nproc_exempt(euid), userns, &cgroup.why_not());
        RunLimits { limits: limits.clone(), cgroup, plan }
    }

    /// Limits on a launch path that applies none (the direct launch of the `seatbelt`
    /// runner: no cgroups off Linux, and no child-side code to set rlimits): every
    /// limit is a gap saying `why`, defaults and explicit limits alike.
    pub fn unapplied(limits: &Limits, why: &str) -> RunLimits {
        let mut gaps = vec![(Restriction::LimitMemory, why.to_string()), (Restriction::LimitPids, why.to_string())];
        if limits.cpu.is_some() {
            gaps.push((Restriction::LimitCpu, why.to_string()));
        }
        let applied = AppliedLimits {
            memory: limits.memory,
            memory_by: Mechanism::None,
            pids: limits.pids,
            pids_by: Mechanism::None,
            cpu: limits.cpu,
            tmpfs_size: limits.tmpfs_size(),
            gaps: gaps.iter().map(|(r, why)| Gap { restriction: *r, reason: why.clone() }).collect(),
        };
        let plan = LimitPlan { rlimits: Vec::new(), applied, gaps };
        RunLimits { limits: limits.clone(), cgroup: RunCgroup::default(), plan }
    }

    /// The gaps in limits the caller set explicitly: these are enforcement gaps
    /// (and refuse a confined run without `best_effort`).
    pub fn explicit_gaps(&self) -> Vec<(Restriction, String)> {
        self.plan
            .gaps
            .iter()
            .filter(|(r, _)| self.limits.explicit.iter().any(|e| e.restriction() == *r))
            .cloned()
            .collect()
    }

    /// What the child applies.
    #[cfg(target_os = "linux")]
    pub fn child(&self) -> cordon_stage::ChildLimits {
        cordon_stage::ChildLimits {
            cgroup_procs: self.cgroup.procs_fds(),
            rlimits: self.plan.rlimits.clone(),
            oom_score_adj: Some(OOM_SCORE_ADJ),
        }
    }

    /// After the command's leader is reaped: kill whatever is left in the run's
    /// cgroups, read what they recorded and remove them (off the async runtime).
    pub async fn sweep(&mut self) -> Evidence {
        let cgroup = std::mem::take(&mut self.cgroup);
        // Usually nothing is left (the leader's exit ended the rest): read and remove
        // at once, without a thread (a CLI run would otherwise start one just for this).
        let cgroup = match cgroup.finish_if_empty() {
            Ok((evidence, rest)) => {
                if !rest.is_removed() {
                    tokio::task::spawn_blocking(move || drop(rest));
                }
                return evidence;
            }
            Err(cgroup) => cgroup,
        };
        tokio::task::spawn_blocking(move || {
            cgroup.kill_all();
            cgroup.evidence()
        })
        .await
        .unwrap_or_default()
    }

    /// The limit the run ran into (see [`judge`]) and the report.
    pub fn conclude(self, evidence: &Evidence, killed_by: Option<i32>) -> (Option<Resource>, AppliedLimits) {
        (judge(&self.limits, evidence, killed_by), self.plan.applied)
    }
}

/// What the run's cgroups recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Evidence {
    /// Processes the OOM killer killed in the run's memory cgroup.
    pub oom_kills: u64,
    /// Forks refused at `pids.max`.
    pub pids_max: u64,
    /// The run's total CPU time in nanoseconds, when a cgroup accounted it.
    pub cpu_ns: Option<u64>,
}

/// Which limit ended (or hampered) the run, judged from evidence (pure):
/// `memory` when the OOM killer killed a process in the run's memory cgroup;
/// `pids` when the pids cgroup refused a fork; `cpu` when the command died of
/// `SIGXCPU` (the kernel's signal at the soft `RLIMIT_CPU`), or of `SIGKILL` while
/// a cgroup measured at least the limit in CPU time (the hard limit). `killed_by` is
/// the command's terminating signal (for bubblewrap, `exit_code - 128`).
pub fn judge(limits: &Limits, ev: &Evidence, killed_by: Option<i32>) -> Option<Resource> {
    if ev.oom_kills > 0 {
        return Some(Resource::Memory);
    }
    if ev.pids_max > 0 {
        return Some(Resource::Pids);
    }
    let cpu = limits.cpu?;
    let spent = ev.cpu_ns.is_some_and(|ns| ns >= cpu.saturating_mul(1_000_000_000));
    // A SIGXCPU the command sent itself must not pass for the limit: where a cgroup
    // measured the CPU time, at least half of it must be there too. RLIMIT_CPU is
    // checked against tick-sampled process time, the cgroup counts nanoseconds: on a
    // loaded machine (a busy VM with steal time) the ticks run well ahead of the
    // cgroup, and 90% proved too tight (the limit went unreported).
    let most = ev.cpu_ns.is_some_and(|ns| ns.saturating_mul(2) >= cpu.saturating_mul(1_000_000_000));
    let measured_or_unknown = ev.cpu_ns.is_none() || most;
    match killed_by {
        Some(libc::SIGXCPU) if measured_or_unknown => Some(Resource::Cpu),
        Some(libc::SIGKILL) if spent => Some(Resource::Cpu),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim(memory: u64, pids: u64, cpu: Option<u64>) -> Limits {
        Limits { memory, pids, cpu, explicit: Vec::new() }
    }

    #[test]
    fn bytes_take_binary_suffixes() {
        assert_eq!(parse_bytes("64M"), Ok(64 << 20));
        assert_eq!(parse_bytes("1g"), Ok(1 << 30));
        assert_eq!(parse_bytes("512KiB"), Ok(512 << 10));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("12X").is_err());
        assert!(parse_bytes("M").is_err());
        assert!(parse_bytes("99999999999T").is_err());
    }

    #[test]
    fn resolve_fills_defaults_caps_and_records_explicit_limits() {
        let none = LimitRequest::default();
        let l = resolve_limits(&none, &none, &none, 8 << 30).unwrap();
        assert_eq!(l, Limits { memory: 4 << 30, pids: DEFAULT_PIDS, cpu: None, explicit: vec![] });
        let req = LimitRequest { memory: Some(100 << 30), pids: Some(64), cpu: Some(1) };
        let err = resolve_limits(&req, &none, &none, 8 << 30).unwrap_err();
        assert_eq!(err.field, "limit_memory", "over MAX_MEMORY_PERCENT is an error, not capped");
        let req = LimitRequest { memory: Some(2 << 30), ..req };
        let l = resolve_limits(&req, &none, &none, 8 << 30).unwrap();
        assert_eq!((l.memory, l.pids, l.cpu), (2 << 30, 64, Some(1)));
        assert_eq!(l.explicit, vec![Resource::Memory, Resource::Pids, Resource::Cpu]);
        let caps = LimitRequest { memory: Some(4 << 30), pids: Some(10), cpu: Some(5) };
        let err = resolve_limits(&req, &none, &caps, 8 << 30).unwrap_err();
        assert_eq!(err.field, "limit_pids");
        let l = resolve_limits(&LimitRequest { pids: Some(10), ..req }, &none, &caps, 8 << 30).unwrap();
        assert_eq!((l.memory, l.pids, l.cpu), (2 << 30, 10, Some(1)));
        // Defaults above a cap are lowered to it (they are not the caller's values).
        let l = resolve_limits(&none, &LimitRequest { pids: Some(99), ..none }, &caps, 8 << 30).unwrap();
        assert_eq!(l.pids, 10);
        assert!(resolve_limits(&LimitRequest { pids: Some(0), ..none }, &none, &none, 1 << 30).is_err());
        assert!(resolve_limits(&LimitRequest { memory: Some(1024), ..none }, &none, &none, 1 << 30).is_err());
    }

    #[test]
    fn only_the_host_root_is_exempt_from_rlimit_nproc() {
        // The host, a rootful container: uid 0 is the host's root.
        assert!(maps_to_host_root("         0          0 4294967295\n", 0));
        // A rootless container: its root is uid 1001 of the host.
        assert!(!maps_to_host_root("         0       1001          1\n         1     100000      65536\n", 0));
        assert!(!nproc_exempt(1000));
    }

    #[test]
    fn plan_prefers_cgroups_and_names_each_gap() {
        let l = lim(1 << 30, 64, Some(2));
        let full = Coverage { memory: Some(Mechanism::CgroupV1), pids: Some(Mechanism::CgroupV1) };
        let p = plan_limits(&l, full, true, false, "");
        assert!(p.gaps.is_empty());
        assert_eq!(p.rlimits, vec![(RLIMIT_CPU, 2, 3)]);
        // Root without cgroups: pids is a gap (uid 0 ignores RLIMIT_NPROC); a default
        // memory limit is not applied as RLIMIT_DATA, an explicit one is (per process).
        let p = plan_limits(&l, Coverage::default(), true, false, "read-only");
        let names: Vec<_> = p.gaps.iter().map(|(r, _)| *r).collect();
        assert_eq!(names, vec![Restriction::LimitPids, Restriction::LimitMemory]);
        assert_eq!(p.rlimits, vec![(RLIMIT_CPU, 2, 3)]);
        assert_eq!((p.applied.pids_by, p.applied.memory_by), (Mechanism::None, Mechanism::None));
        let explicit = Limits { explicit: vec![Resource::Memory], ..l.clone() };
        let p = plan_limits(&explicit, Coverage::default(), true, false, "read-only");
        assert!(p.rlimits.contains(&(RLIMIT_DATA, 1 << 30, 1 << 30)));
        assert_eq!(p.applied.memory_by, Mechanism::Rlimit);
        // Unprivileged without cgroups: RLIMIT_NPROC holds the pids.
        let p = plan_limits(&l, Coverage::default(), false, true, "x");
        assert!(p.rlimits.contains(&(RLIMIT_NPROC, 64, 64)));
        assert_eq!(p.applied.pids_by, Mechanism::Rlimit);
        assert_eq!(p.gaps.len(), 1);
        // Outside a user namespace only an explicit limit is applied (it counts the whole uid).
        let p = plan_limits(&l, Coverage::default(), false, false, "x");
        assert_eq!(p.applied.pids_by, Mechanism::None);
        let explicit = Limits { explicit: vec![Resource::Pids], ..l.clone() };
        let p = plan_limits(&explicit, Coverage::default(), false, false, "x");
        assert_eq!(p.applied.pids_by, Mechanism::Rlimit);
        assert_eq!(p.applied.tmpfs_size, 1 << 28);
    }

    #[test]
    fn judge_reports_only_with_evidence() {
        let l = lim(1 << 30, 64, Some(1));
        let none = Evidence::default();
        assert_eq!(judge(&l, &none, Some(libc::SIGKILL)), None, "a bare SIGKILL is no evidence");
        assert_eq!(judge(&l, &Evidence { oom_kills: 1, ..none }, Some(libc::SIGKILL)), Some(Resource::Memory));
        assert_eq!(judge(&l, &Evidence { pids_max: 3, ..none }, None), Some(Resource::Pids));
        assert_eq!(judge(&l, &none, Some(libc::SIGXCPU)), Some(Resource::Cpu));
        let spent = Evidence { cpu_ns: Some(1_200_000_000), ..none };
        assert_eq!(judge(&l, &spent, Some(libc::SIGKILL)), Some(Resource::Cpu));
        assert_eq!(judge(&lim(1 << 30, 64, None), &none, Some(libc::SIGXCPU)), None, "no cpu limit, no cpu verdict");
        // A SIGXCPU the command sent itself, with a cgroup that measured next to no CPU.
        let idle = Evidence { cpu_ns: Some(5_000_000), ..none };
        assert_eq!(judge(&l, &idle, Some(libc::SIGXCPU)), None, "a self-sent SIGXCPU is no evidence");
        // On a loaded machine the tick-sampled process time (RLIMIT_CPU) runs ahead of
        // the cgroup's nanoseconds: a real limit hit with 0.7 s measured still counts.
        let loaded = Evidence { cpu_ns: Some(700_000_000), ..none };
        assert_eq!(judge(&l, &loaded, Some(libc::SIGXCPU)), Some(Resource::Cpu));
    }

    #[test]
    fn layout_of_a_hybrid_host() {
        let mi = "\
30 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
35 30 0:31 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
36 30 0:32 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
37 30 0:33 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
";
        let cg = "8:pids:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/x\n0::/\n";
        let l = CgroupLayout::parse(mi, cg);
        assert_eq!(l.v2, Some(PathBuf::from("/sys/fs/cgroup/unified")));
        assert_eq!(l.v2_root, Some(PathBuf::from("/sys/fs/cgroup/unified")));
        assert_eq!(l.v1["memory"], PathBuf::from("/sys/fs/cgroup/memory/process_api/abc"));
        assert_eq!(l.v1["pids"], PathBuf::from("/sys/fs/cgroup/pids"));
        assert_eq!(l.v1["cpuacct"], PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/x"));
        // A container whose mount root is its own cgroup.
        let mi = "31 25 0:27 /ct /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let l = CgroupLayout::parse(mi, "0::/ct/sub\n");
        assert_eq!(l.v2, Some(PathBuf::from("/sys/fs/cgroup/sub")));
        assert_eq!(l.v2_root, None, "a container's mount is not the hierarchy's root");
    }

    #[test]
    fn v2_runs_go_to_a_delegated_own_cgroup_else_a_shared_parent_at_the_root() {
        // A fake hierarchy: regular files stand in for the cgroupfs control files.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let own = root.join("user.slice/session.scope");
        std::fs::create_dir_all(&own).unwrap();
        let set = |d: &Path, v: &str| std::fs::write(d.join("cgroup.subtree_control"), v).unwrap();
        set(&own, "memory pids");
        set(&root, "");
        let layout =
            CgroupLayout { v2: Some(own.clone()), v2_root: Some(root.clone()), v1: BTreeMap::new(), disabled: false };
        assert_eq!(v2_parent(&layout, &own).unwrap(), own, "a delegated subtree is used as is");
        set(&own, "");
        assert!(v2_parent(&layout, &own).is_err(), "neither own cgroup nor root pass the controllers");
        set(&root, "cpu memory pids");
        let shared = root.join(V2_PARENT);
        std::fs::create_dir(&shared).unwrap();
        set(&shared, "");
        assert_eq!(v2_parent(&layout, &own).unwrap(), shared);
        assert_eq!(std::fs::read_to_string(shared.join("cgroup.subtree_control")).unwrap(), "+memory +pids");
    }

    #[test]
    fn the_memory_budget_is_the_lowest_limit_above_cordon() {
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path().join("a/b");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(own.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        std::fs::write(dir.path().join("a/memory.limit_in_bytes"), "1073741824\n").unwrap();
        let mut layout = CgroupLayout::default();
        layout.v1.insert("memory".into(), own);
        assert_eq!(memory_budget(&layout), mem_total().min(1 << 30));
        assert_eq!(memory_budget(&CgroupLayout::default()), mem_total());
    }

    #[test]
    fn stale_cgroups_of_dead_cordons_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let dead = dir.path().join(format!("{CGROUP_PREFIX}999999999-1-00000000"));
        let alive = dir.path().join(format!("{CGROUP_PREFIX}{}-1-00000000", std::process::id()));
        let other = dir.path().join("user.slice");
        for d in [&dead, &alive, &other] {
            std::fs::create_dir(d).unwrap();
        }
        sweep_stale_in(dir.path());
        assert!(!dead.exists() && alive.exists() && other.exists());
    }

    #[test]
    fn keyed_files() {
        assert_eq!(keyed("low 0\nhigh 0\nmax 0\noom 2\noom_kill 1\n", "oom_kill"), 1);
        assert_eq!(keyed("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "oom_kill"), 3);
        assert_eq!(keyed("max 7\n", "max"), 7);
        assert_eq!(keyed("", "max"), 0);
    }

    #[test]
    fn mem_total_parses() {
        assert_eq!(parse_mem_total("MemTotal:       24684092 kB\nMemFree: 1 kB\n"), Some(24684092 * 1024));
    }
}
