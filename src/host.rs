//! Host facts: what this machine can enforce (Landlock ABI, seccomp, namespaces,
//! bubblewrap), read once and passed into the pure planners.
//!
//! Reading is cheap (a syscall and a few `/proc` reads) and never spawns anything; the
//! facts are claims about availability, and a run that finds them wrong fails closed
//! at spawn time. `cordon doctor` verifies them by running canaries.
//!
//! Test knobs: `CORDON_LANDLOCK_ABI_MAX=N` caps the Landlock ABI (behave as an older
//! kernel); `CORDON_DISABLE_RUNNERS=a,b` makes runners unavailable;
//! `CORDON_DISABLE_USERNS=1` behaves as a host that blocks user namespaces;
//! `CORDON_DISABLE_OVERLAY=1` as one that cannot mount overlay filesystems (the
//! private layers fall back to empty tmpfs mounts, see [`Overlay`]).

use crate::vocab::RunnerKind;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Environment variable capping the Landlock ABI cordon uses.
pub const ENV_LANDLOCK_ABI_MAX: &str = "CORDON_LANDLOCK_ABI_MAX";
/// Environment variable listing runners to treat as unavailable.
pub const ENV_DISABLE_RUNNERS: &str = "CORDON_DISABLE_RUNNERS";
/// Environment variable making cordon behave as if user namespaces were blocked.
pub const ENV_DISABLE_USERNS: &str = "CORDON_DISABLE_USERNS";
/// Environment variable making cordon behave as if overlay filesystems could not be
/// mounted.
pub const ENV_DISABLE_OVERLAY: &str = "CORDON_DISABLE_OVERLAY";

/// The first kernel that lets a user namespace mount overlayfs (5.11).
const OVERLAY_USERNS_KERNEL: (u32, u32) = (5, 11);

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

/// Whether the mount layer can put a private writable layer (overlayfs) over a host
/// directory: the host's files stay readable there while every change the run makes
/// is kept in a private upper directory. Without it, `/tmp`, `/dev/shm` and the home's
/// cache are fresh empty tmpfs mounts that hide the host's files (the result names
/// them in `sandbox.hidden`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Overlay {
    /// Overlay mounts are expected to work (the kernel has overlayfs and, for an
    /// unprivileged caller, is new enough to allow it in a user namespace). A host
    /// where the mount fails anyway fails the run closed, naming the step.
    Available,
    /// Not available.
    Unavailable {
        /// Why not.
        reason: String,
    },
}

impl Overlay {
    /// Whether overlay mounts can be planned.
    pub fn available(&self) -> bool {
        matches!(self, Overlay::Available)
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
    /// Whether private layers over host directories can be mounted (overlayfs).
    pub overlay: Overlay,
    /// The bubblewrap binary, when found on `PATH`.
    pub bwrap: Option<PathBuf>,
    /// Runners disabled by `CORDON_DISABLE_RUNNERS`.
    pub disabled_runners: Vec<RunnerKind>,
    /// The cordon executable the `bwrap` runner has bubblewrap execute as its stage
    /// helper (Landlock and seccomp applied inside the sandbox, see
    /// `runner::bwrap`, Linux). `detect` fills in the one the running binary
    /// registered ([`register_stage_helper`]); the executor
    /// takes [`crate::ExecutorConfig::stage_helper`]. `None`: no helper, and the
    /// `bwrap` runner declares an `fs-write` gap.
    pub stage_helper: Option<PathBuf>,
}

static STAGE_HELPER: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Declare `exe` (a `cordon` binary that dispatches `runner::bwrap::STAGE_HELPER_ARG` to
/// `runner::bwrap::stage_helper_main`, Linux) as this process's stage helper; the `cordon` CLI registers
/// itself at startup. The first registration wins.
pub fn register_stage_helper(exe: PathBuf) {
    let _ = STAGE_HELPER.set(exe);
}

/// The registered stage helper, if any (the default of
/// [`crate::ExecutorConfig::stage_helper`]).
pub fn registered_stage_helper() -> Option<PathBuf> {
    STAGE_HELPER.get().cloned()
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn has_cap_sys_admin() -> bool {
    #[cfg(target_os = "linux")]
    if let Some(effective) = cordon_stage::host::effective_capabilities() {
        return effective & (1 << CAP_SYS_ADMIN) != 0;
    }
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

/// `major.minor` of a kernel release string such as `6.18.44-fc` (pure).
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Whether overlay mounts can be planned (pure on what it is given): overlayfs is
/// known to the kernel (`/proc/filesystems`, or its module is loaded), and a caller
/// that needs a user namespace runs Linux 5.11 or later.
fn detect_overlay(
    filesystems: Option<&str>,
    module_loaded: bool,
    release: &str,
    userns: bool,
    disabled: bool,
) -> Overlay {
    if disabled {
        return Overlay::Unavailable { reason: format!("overlay mounts disabled by {ENV_DISABLE_OVERLAY}") };
    }
    let known = filesystems.is_some_and(|f| f.lines().any(|l| l.split_whitespace().last() == Some("overlay")));
    if !known && !module_loaded {
        return Overlay::Unavailable {
            reason: "the kernel has no overlay filesystem (overlayfs is not built in or loaded)".into(),
        };
    }
    if userns && kernel_version(release).is_none_or(|v| v < OVERLAY_USERNS_KERNEL) {
        return Overlay::Unavailable {
            reason: format!(
                "Linux {release} does not let a user namespace mount overlayfs (5.11 or later does); run as root or \
                 on a newer kernel"
            ),
        };
    }
    Overlay::Available
}

/// Where bubblewrap is looked for, in order: system directories only, never `PATH`.
/// bubblewrap runs before any confinement (as root with every capability when cordon is
/// root), so a `bwrap` planted by a sandboxed run in a directory that happens to be on
/// `PATH` (an empty or `.` entry, `node_modules/.bin`, a direnv `bin`) would be code the
/// command wrote, run unconfined.
pub const BWRAP_CANDIDATES: [&str; 3] = ["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"];

/// The first [`BWRAP_CANDIDATES`] entry that is a trusted executable (pure policy on
/// [`trusted_file`]).
fn trusted_bwrap(euid: u32) -> Option<PathBuf> {
    BWRAP_CANDIDATES.iter().map(PathBuf::from).find(|p| trusted_file(p, euid))
}

/// Whether `path` is a regular, executable file that neither it nor any directory above
/// it could be replaced by anyone but root or `euid`: each is owned by root (or `euid`)
/// and not writable by group or others. Symlinks are followed only where they are too
/// (`/bin -> usr/bin`), each hop judged the same way.
pub fn trusted_file(path: &Path, euid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(real) = path.canonicalize() else { return false };
    let owner_ok = |m: &std::fs::Metadata| (m.uid() == 0 || m.uid() == euid) && m.mode() & 0o022 == 0;
    let Ok(meta) = std::fs::metadata(&real) else { return false };
    if !meta.is_file() || meta.mode() & 0o111 == 0 || !owner_ok(&meta) {
        return false;
    }
    // Every directory above the real file (the candidates' own link hops, such as
    // `/bin -> usr/bin`, live in `/`, which is one of them).
    let mut cur = real.parent();
    while let Some(dir) = cur {
        match std::fs::metadata(dir) {
            Ok(m) if owner_ok(&m) => {}
            _ => return false,
        }
        cur = dir.parent();
    }
    true
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
        #[cfg(target_os = "linux")]
        let kernel_abi = cordon_stage::host::landlock_abi();
        #[cfg(not(target_os = "linux"))]
        let kernel_abi = 0;
        let cap = env(ENV_LANDLOCK_ABI_MAX).and_then(|v| v.trim().parse::<u32>().ok());
        let abi = cap.map_or(kernel_abi, |c| c.min(kernel_abi));
        let euid = nix::unistd::geteuid().as_raw();
        let egid = nix::unistd::getegid().as_raw();
        let disable_userns = env(ENV_DISABLE_USERNS).is_some_and(|v| v == "1");
        let namespaces = if linux {
            detect_namespaces(euid, disable_userns)
        } else {
            Namespaces::Unavailable { reason: format!("namespaces are Linux-only (this is {os})") }
        };
        let overlay = if linux && namespaces.available() {
            let release = read_trim("/proc/sys/kernel/osrelease").unwrap_or_default();
            detect_overlay(
                std::fs::read_to_string("/proc/filesystems").ok().as_deref(),
                Path::new("/sys/module/overlay").exists(),
                &release,
                matches!(namespaces, Namespaces::UserNamespace),
                env(ENV_DISABLE_OVERLAY).is_some_and(|v| v == "1"),
            )
        } else {
            Overlay::Unavailable { reason: "no mount namespace".into() }
        };
        let bwrap = if linux { trusted_bwrap(euid) } else { None };
        let disabled_runners = env(ENV_DISABLE_RUNNERS)
            .map(|v| v.split(',').filter_map(|n| n.trim().parse::<RunnerKind>().ok()).collect())
            .unwrap_or_default();
        HostFacts {
            os,
            kernel_landlock_abi: kernel_abi,
            landlock_abi: abi,
            landlock_abi_cap: cap,
            #[cfg(target_os = "linux")]
            seccomp: cordon_stage::host::seccomp_available(),
            #[cfg(not(target_os = "linux"))]
            seccomp: false,
            euid,
            egid,
            namespaces,
            overlay,
            bwrap,
            disabled_runners,
            stage_helper: registered_stage_helper(),
        }
    }

    /// Whether running as root.
    pub fn is_root(&self) -> bool {
        self.euid == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_needs_the_filesystem_and_for_a_user_namespace_linux_5_11() {
        let fs = "nodev\ttmpfs\nnodev\toverlay\n";
        assert_eq!(detect_overlay(Some(fs), false, "6.18.4-x", true, false), Overlay::Available);
        assert_eq!(detect_overlay(Some("nodev\ttmpfs\n"), true, "5.11.0", true, false), Overlay::Available);
        assert!(!detect_overlay(Some("nodev\ttmpfs\n"), false, "6.1.0", false, false).available());
        assert!(!detect_overlay(Some(fs), false, "5.10.200", true, false).available());
        assert_eq!(detect_overlay(Some(fs), false, "5.10.200", false, false), Overlay::Available, "root");
        assert!(!detect_overlay(Some(fs), false, "garbage", true, false).available());
        assert!(!detect_overlay(Some(fs), false, "6.18", false, true).available(), "the knob");
        assert_eq!(kernel_version("6.18.44-fc-v1300"), Some((6, 18)));
    }

    #[test]
    fn bwrap_is_only_taken_from_trusted_system_directories() {
        // A file anyone could have planted: in a directory under the world-writable /tmp.
        let dir = tempfile::tempdir_in("/tmp").unwrap();
        let planted = dir.path().join("bwrap");
        std::fs::write(&planted, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(!trusted_file(&planted, nix::unistd::geteuid().as_raw()));
        // Whatever PATH says (an empty entry resolves against the working directory).
        let facts = HostFacts::detect_with(|k| (k == "PATH").then(|| format!(":{}", dir.path().display())));
        assert!(facts.bwrap.as_deref().is_none_or(|b| BWRAP_CANDIDATES.iter().any(|c| std::path::Path::new(c) == b)));
        if std::path::Path::new("/usr/bin/bwrap").exists() {
            assert!(trusted_file(std::path::Path::new("/usr/bin/bwrap"), 0));
        }
    }
}
