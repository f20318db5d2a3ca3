//! The limits vocabulary of a result: which resource a limit covers ([`Resource`], the
//! result's `limit`) and what a run's limits were and how each was enforced
//! ([`AppliedLimits`], [`Mechanism`]). Kept here so the result carries them without
//! importing `crate::limits`, which plans and applies limits (and re-exports these).

use crate::vocab::{Gap, Restriction};
use serde::{Deserialize, Serialize};

/// One limited resource; also the value of a result's `limit` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Resource {
    /// Memory (bytes).
    Memory,
    /// Processes and threads.
    Pids,
    /// CPU seconds.
    Cpu,
}

impl Resource {
    /// The restriction that reports this resource's enforcement.
    pub fn restriction(self) -> Restriction {
        match self {
            Resource::Memory => Restriction::LimitMemory,
            Resource::Pids => Restriction::LimitPids,
            Resource::Cpu => Restriction::LimitCpu,
        }
    }
}

/// How one limit is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// A per-run cgroup v2.
    CgroupV2,
    /// A per-run cgroup in a v1 hierarchy.
    CgroupV1,
    /// An rlimit the child set on itself (per process, or per uid for `RLIMIT_NPROC`).
    Rlimit,
    /// Nothing: see the gap.
    None,
}

/// What a run's limits were and how each was enforced (the result's `limits`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedLimits {
    /// Memory limit in bytes.
    pub memory: u64,
    /// How it was enforced.
    pub memory_by: Mechanism,
    /// Process limit.
    pub pids: u64,
    /// How it was enforced.
    pub pids_by: Mechanism,
    /// CPU seconds per process, if limited.
    pub cpu: Option<u64>,
    /// `size=` of each private tmpfs (confined modes).
    pub tmpfs_size: u64,
    /// Every limit not fully enforced, default or explicit, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<Gap>,
}
