//! Host facts: what this machine can enforce (Landlock ABI, seccomp, namespaces,
//! bubblewrap), read once and passed into the pure planners.
//!
//! Reading is cheap (a syscall and a few `/proc` reads) and never spawns anything; the
//! facts are claims about availability, and a run that finds them wrong fails closed
//! at spawn time. `cordon doctor` verifies them by running canaries.
//!
//! Test knobs: `CORDON_LANDLOCK_ABI_MAX=N` caps the Landlock ABI (behave as an older
//! kernel); `CORDON_DISABLE_RUNNERS=a,b` makes runners unavailable;
//! `CORDON_DISABLE_USERNS=1` behaves as a host that blocks user namespaces.

use crate::runner::RunnerKind;
use serde::Serialize;
use std::path::PathBuf;

/// Environment variable capping the Landlock ABI cordon uses.
pub const ENV_LANDLOCK_ABI_MAX: &str = "CORDON_LANDLOCK_ABI_MAX";
/// Environment variable listing runners to treat as unavailable.
pub const ENV_DISABLE_RUNNERS: &str = "CORDON_DISABLE_RUNNERS";
/// Environment variable making cordon behave as if user namespaces were blocked.
pub const ENV_DISABLE_USERNS: &str = "CORDON_DISABLE_USERNS";

/// `CAP_SYS_ADMIN`'s bit number.
const CAP_SYS_ADMIN: u32 = 21;

/// How cordon can create the namespaces its mount layer needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "via", rename_all = "kebab-case")]
pub enum Namespaces {
    /// Directly: running as root with `CAP_SYS_ADMIN`.
    Direct,
    /// Through a new user namespace (unprivileged).
    UserNamespace,
    /// Not at all.
    Unavailable {
        /// Why not.
        reason: String,
    },
}

impl Namespaces {
    /// Whether namespaces can be created one way or another.
    pub fn available(&self) -> bool {
        !matches!(self, Namespaces::Unavailable { .. })
    }
}

/// Facts about this host that decide which runner can enforce what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostFacts {
    /// `linux`, `macos`, ...
    pub os: &'static str,
    /// The Landlock ABI the kernel offers (0: none).
    pub kernel_landlock_abi: u32,
    /// The Landlock ABI cordon uses (the kernel's, capped by `CORDON_LANDLOCK_ABI_MAX`).
    pub landlock_abi: u32,
    /// The cap from `CORDON_LANDLOCK_ABI_MAX`, when set.
    pub landlock_abi_cap: Option<u32>,
    /// seccomp filters can be installed.
    pub seccomp: bool,
    /// Effective uid.
    pub euid: u32,
    /// Effective gid.
    pub egid: u32,
    /// How namespaces can be created.
    pub namespaces: Namespaces,
    /// The bubblewrap binary, when found on `PATH`.
    pub bwrap: Option<PathBuf>,
    /// Runners disabled by `CORDON_DISABLE_RUNNERS`.
    pub disabled_runners: Vec<RunnerKind>,
    /// The cordon executable the `bwrap` runner has bubblewrap execute as its stage
    /// helper (Landlock and seccomp applied inside the sandbox, see
    /// [`crate::runner::bwrap`]). `detect` fills in the one the running binary
    /// registered ([`crate::runner::bwrap::register_stage_helper`]); the executor
    /// takes [`crate::ExecutorConfig::stage_helper`]. `None`: no helper, and the
    /// `bwrap` runner declares an `fs-write` gap.
    pub stage_helper: Option<PathBuf>,
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn has_cap_sys_admin() -> bool {
    let Some(status) = std::fs::read_to_string("/proc/self/status").ok() else { return false };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0)
}

fn detect_namespaces(euid: u32, disable_userns: bool) -> Namespaces {
    if euid == 0 && has_cap_sys_admin() {
        return Namespaces::Direct;
    }
    if disable_userns {
        return Namespaces::Unavailable { reason: format!("user namespaces disabled by {ENV_DISABLE_USERNS}") };
    }
    if read_trim("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return Namespaces::Unavailable {
            reason: "user namespaces are disabled (user.max_user_namespaces = 0)".into(),
        };
    }
    if read_trim("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return Namespaces::Unavailable {
            reason: "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)".into(),
        };
    }
    if read_trim("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        return Namespaces::Unavailable {
            reason:
                "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)"
                    .into(),
        };
    }
    Namespaces::UserNamespace
}

impl HostFacts {
    /// Read the facts of this host (honouring the test knobs in the module docs).
    pub fn detect() -> HostFacts {
        Self::detect_with(|name| std::env::var(name).ok())
    }

    /// Like [`HostFacts::detect`] with an explicit environment lookup (for tests).
    pub fn detect_with(env: impl Fn(&str) -> Option<String>) -> HostFacts {
        let os = std::env::consts::OS;
        let linux = os == "linux";
        let kernel_abi = if linux { cordon_stage::host::landlock_abi() } else { 0 };
        let cap = env(ENV_LANDLOCK_ABI_MAX).and_then(|v| v.trim().parse::<u32>().ok());
        let abi = cap.map_or(kernel_abi, |c| c.min(kernel_abi));
        let euid = cordon_stage::host::euid();
        let egid = cordon_stage::host::egid();
        let disable_userns = env(ENV_DISABLE_USERNS).is_some_and(|v| v == "1");
        let namespaces = if linux {
            detect_namespaces(euid, disable_userns)
        } else {
            Namespaces::Unavailable { reason: format!("namespaces are Linux-only (this is {os})") }
        };
        let path = env("PATH").unwrap_or_default();
        let bwrap = if linux {
            which::which_in("bwrap", Some(path), std::env::current_dir().unwrap_or_else(|_| "/".into())).ok()
        } else {
            None
        };
        let disabled_runners = env(ENV_DISABLE_RUNNERS)
            .map(|v| v.split(',').filter_map(|n| n.trim().parse::<RunnerKind>().ok()).collect())
            .unwrap_or_default();
        HostFacts {
            os,
            kernel_landlock_abi: kernel_abi,
            landlock_abi: abi,
            landlock_abi_cap: cap,
            seccomp: linux && cordon_stage::host::seccomp_available(),
            euid,
            egid,
            namespaces,
            bwrap,
            disabled_runners,
            stage_helper: crate::runner::bwrap::registered_stage_helper(),
        }
    }

    /// Whether running as root.
    pub fn is_root(&self) -> bool {
        self.euid == 0
    }
}
