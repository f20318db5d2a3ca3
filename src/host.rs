//! Host facts: what this machine can enforce (Landlock ABI, seccomp, namespaces,
//! bubblewrap), read once and passed into the pure planners.
//!
//! Namespaces are tried, not guessed from sysctls: a **namespace canary** (a child in
//! the new namespaces the landlock runner asks for, making the mounts it makes, a fresh
//! `/proc` among them: `cordon_stage::canary`) says what this host, its seccomp profile
//! and its container runtime really allow. Its answer is cached per host state in the
//! private state directory ([`canary_cache_key`]), so a run pays one small file read
//! (the canary itself, about a millisecond, runs once per boot, container, identity and
//! confinement). A run that finds a fact wrong still fails closed at spawn time, and
//! forgets the cached answer ([`forget_canary`]). `cordon doctor` verifies the
//! confined modes end to end with canaries judged by effect.
//!
//! Test knobs: `CORDON_LANDLOCK_ABI_MAX=N` caps the Landlock ABI (behave as an older
//! kernel); `CORDON_DISABLE_RUNNERS=a,b` makes runners unavailable;
//! `CORDON_DISABLE_USERNS=1` behaves as a host that blocks user namespaces;
//! `CORDON_DISABLE_OVERLAY=1` as one that cannot mount overlay filesystems (the
//! private layers fall back to empty tmpfs mounts, see [`Overlay`]);
//! `CORDON_DISABLE_FRESH_PROC=1` as a container whose runtime masks `/proc` (no fresh
//! procfs can be mounted); `CORDON_DISABLE_NETNS=1` as one that cannot make network
//! namespaces.

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
/// Environment variable making cordon behave as if no fresh procfs could be mounted
/// (a container runtime's masked `/proc`).
pub const ENV_DISABLE_FRESH_PROC: &str = "CORDON_DISABLE_FRESH_PROC";

/// The first kernel that lets a user namespace mount overlayfs (5.11).
const OVERLAY_USERNS_KERNEL: (u32, u32) = (5, 11);
/// Environment variable making cordon behave as if network namespaces could not be
/// made (runs then keep the host's, with IP and `connect()` refused as before).
pub const ENV_DISABLE_NETNS: &str = "CORDON_DISABLE_NETNS";

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

/// Whether a confined run with the network off can have a network namespace of its own
/// (local IPC: its loopback, the unix sockets it binds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum NetNamespace {
    /// The namespace canary made one and set its `lo` up.
    Available,
    /// Not available: such runs keep the host's network namespace with every socket
    /// but `socketpair()` closed (no gap: nothing is reachable; local servers inside
    /// the run do not work either).
    Unavailable {
        /// Why not.
        reason: String,
    },
}

impl NetNamespace {
    /// Whether a run can have a network namespace of its own.
    pub fn available(&self) -> bool {
        matches!(self, NetNamespace::Available)
    }
}

/// Whether a confined run can have a `/proc` of its own (for its own pid namespace).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(tag = "proc", rename_all = "kebab-case")]
pub enum ProcMount {
    /// A fresh procfs can be mounted in the run's namespaces.
    #[default]
    Fresh,
    /// It cannot: the run keeps the host's (the container's) `/proc`, read-only, and
    /// gets no pid namespace of its own.
    Refused {
        /// Why, and what would change it.
        reason: String,
    },
}

impl ProcMount {
    /// Whether a fresh procfs (and so a pid namespace of the run's own) is possible.
    pub fn fresh(&self) -> bool {
        matches!(self, ProcMount::Fresh)
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
    /// Whether a fresh procfs can be mounted in them (a container runtime's masked
    /// `/proc` forbids it).
    pub proc_mount: ProcMount,
    /// Whether private layers over host directories can be mounted (overlayfs).
    pub overlay: Overlay,
    /// Whether a network namespace of the run's own can be made beside the others
    /// (local IPC with the network off): not when namespaces are unavailable, when the
    /// namespace canary's `unshare(CLONE_NEWNET)` or `lo` up failed (a seccomp profile
    /// or LSM refusing network namespaces alone; `user.max_net_namespaces` 0), or with
    /// `CORDON_DISABLE_NETNS=1`.
    pub net_namespace: NetNamespace,
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

/// What the namespace canary says about namespaces and `/proc` (Linux): `namespaces` as
/// the cheap checks left them, confirmed or refused by trying (cached, see the module
/// docs). A canary that cannot run at all (no pipe, no fork) leaves the cheap answer:
/// a wrong fact still fails the run closed.
#[cfg(target_os = "linux")]
fn tried_namespaces(namespaces: Namespaces, euid: u32, egid: u32) -> (Namespaces, ProcMount, NetNamespace) {
    if let Namespaces::Unavailable { reason } = &namespaces {
        let reason = format!("no namespaces: {reason}");
        return (namespaces, ProcMount::Refused { reason: reason.clone() }, NetNamespace::Unavailable { reason });
    }
    let user = matches!(namespaces, Namespaces::UserNamespace);
    match canary_report(user, euid, egid) {
        Some(report) => {
            let (namespaces, proc) = interpret_canary(namespaces, &report);
            let net = interpret_canary_net(&namespaces, &report);
            (namespaces, proc, net)
        }
        None => (namespaces, ProcMount::Fresh, NetNamespace::Available),
    }
}

/// The network namespace fact a canary report gives (pure), once `namespaces` is
/// known.
#[cfg(target_os = "linux")]
pub fn interpret_canary_net(namespaces: &Namespaces, r: &cordon_stage::canary::CanaryReport) -> NetNamespace {
    if let Namespaces::Unavailable { reason } = namespaces {
        return NetNamespace::Unavailable { reason: format!("no namespaces: {reason}") };
    }
    match r.net {
        0 => NetNamespace::Available,
        errno => NetNamespace::Unavailable {
            reason: format!(
                "a network namespace of the run's own cannot be made: unshare(CLONE_NEWNET) and lo up: {}",
                if errno == cordon_stage::canary::CanaryReport::NOT_TRIED {
                    "not tried after an earlier step failed".to_string()
                } else {
                    errno_text(errno)
                }
            ),
        },
    }
}

/// `errno` as `EPERM (Operation not permitted)`.
#[cfg(target_os = "linux")]
fn errno_text(errno: i32) -> String {
    let e = nix::errno::Errno::from_raw(errno);
    format!("{e:?} ({})", e.desc())
}

/// The facts a canary report gives (pure).
#[cfg(target_os = "linux")]
pub fn interpret_canary(namespaces: Namespaces, r: &cordon_stage::canary::CanaryReport) -> (Namespaces, ProcMount) {
    let user = matches!(namespaces, Namespaces::UserNamespace);
    if r.clone != 0 {
        let flags = if user {
            "CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWIPC"
        } else {
            "CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWIPC"
        };
        let hint = match r.clone {
            libc::EPERM => " (as under a seccomp profile that refuses namespaces, such as Docker's default)",
            libc::ENOSPC | libc::EUSERS => " (the user namespace limit, user.max_user_namespaces)",
            _ => "",
        };
        let reason = format!("creating the sandbox's namespaces failed: clone({flags}): {}{hint}", errno_text(r.clone));
        return (
            Namespaces::Unavailable { reason: reason.clone() },
            ProcMount::Refused { reason: format!("no namespaces: {reason}") },
        );
    }
    for (step, errno) in [
        ("making the mounts private", r.private),
        ("mounting a tmpfs", r.tmpfs),
        ("open_tree(OPEN_TREE_CLONE)", r.open_tree),
        ("mount_setattr(MOUNT_ATTR_RDONLY)", r.setattr),
    ] {
        if errno != 0 {
            let why = if errno == cordon_stage::canary::CanaryReport::NOT_TRIED {
                "not tried after an earlier step failed".to_string()
            } else {
                errno_text(errno)
            };
            let reason = format!("the mount layer cannot be built here: {step}: {why}");
            return (
                Namespaces::Unavailable { reason: reason.clone() },
                ProcMount::Refused { reason: format!("no namespaces: {reason}") },
            );
        }
    }
    let proc = if r.proc == 0 {
        ProcMount::Fresh
    } else {
        ProcMount::Refused {
            reason: format!(
                "a fresh /proc cannot be mounted: {} (the container runtime masks parts of /proc, and the \
                 kernel refuses a new proc mount in a user namespace while they are masked)",
                errno_text(r.proc)
            ),
        }
    };
    (namespaces, proc)
}

/// The canary's cache file in the private state directory.
#[cfg(target_os = "linux")]
const CANARY_CACHE: &str = "host-canary";

/// What the canary's answer depends on, as one line: the boot, the identity and its
/// capabilities, the mount namespace (a container has its own, and so has every
/// namespaced run), the seccomp mode and `no_new_privs` (cordon inside a run of its
/// own differs there), cordon's version, and whether a user namespace is asked for. `None` when a part
/// cannot be read (then the canary runs every time). A handful of system calls: no
/// `/proc/self/status`, which the kernel formats in full for every read.
#[cfg(target_os = "linux")]
pub fn canary_cache_key(user: bool, euid: u32, egid: u32) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let boot = read_trim("/proc/sys/kernel/random/boot_id")?;
    let ns = |n: &str| std::fs::metadata(format!("/proc/self/ns/{n}")).ok().map(|m| m.ino());
    let caps = cordon_stage::host::effective_capabilities()?;
    let (seccomp, nnp) = cordon_stage::host::seccomp_and_no_new_privs();
    Some(format!(
        "cordon {} canary 4 boot={boot} euid={euid} egid={egid} user={user} caps={caps:x} mnt={} seccomp={seccomp} \
         nnp={nnp}",
        env!("CARGO_PKG_VERSION"),
        ns("mnt")?,
    ))
}

/// The private directory the cache lives in (`$TMPDIR/cordon-UID`, the executor's
/// default state directory), created 0700 if missing; `None` unless it is a real
/// directory owned by `euid` with no group or other access.
#[cfg(target_os = "linux")]
fn canary_cache_dir(euid: u32) -> Option<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let dir = std::env::temp_dir().join(format!("cordon-{euid}"));
    let meta = match std::fs::symlink_metadata(&dir) {
        Ok(m) => m,
        Err(_) => {
            std::fs::DirBuilder::new().mode(0o700).create(&dir).ok()?;
            std::fs::symlink_metadata(&dir).ok()?
        }
    };
    (meta.is_dir() && meta.uid() == euid && meta.mode() & 0o077 == 0).then_some(dir)
}

/// The cached report for `key`, when the cache file is ours (a regular file owned by
/// us, mode 0600, not a symlink) and holds this key.
#[cfg(target_os = "linux")]
fn read_canary_cache(dir: &Path, key: &str, euid: u32) -> Option<cordon_stage::canary::CanaryReport> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let mut f =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(dir.join(CANARY_CACHE)).ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() || meta.uid() != euid || meta.mode() & 0o077 != 0 {
        return None;
    }
    // One read: a line of key and a line of numbers, well under a page.
    let mut buf = [0u8; 1024];
    let n = f.read(&mut buf).ok()?;
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    let (stored, values) = text.split_once('\n')?;
    if stored != key {
        return None;
    }
    let v: Vec<i32> = values.split_whitespace().map(str::parse).collect::<Result<_, _>>().ok()?;
    let [clone, private, tmpfs, proc, open_tree, setattr, net] = v[..] else { return None };
    Some(cordon_stage::canary::CanaryReport { clone, private, tmpfs, proc, open_tree, setattr, net })
}

/// Store `report` for `key` (a new 0600 file renamed over the old one); failures
/// only mean the canary runs again next time.
#[cfg(target_os = "linux")]
fn write_canary_cache(dir: &Path, key: &str, r: &cordon_stage::canary::CanaryReport) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = dir.join(format!("{CANARY_CACHE}.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let Ok(mut f) =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(&tmp)
    else {
        return;
    };
    let text =
        format!("{key}\n{} {} {} {} {} {} {}\n", r.clone, r.private, r.tmpfs, r.proc, r.open_tree, r.setattr, r.net);
    if f.write_all(text.as_bytes()).is_err() || std::fs::rename(&tmp, dir.join(CANARY_CACHE)).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Forget the cached canary answer (a run found a fact wrong: its namespaces or mounts
/// failed), so that the next `cordon` process tries again.
pub fn forget_canary(euid: u32) {
    #[cfg(target_os = "linux")]
    if let Some(dir) = canary_cache_dir(euid) {
        let _ = std::fs::remove_file(dir.join(CANARY_CACHE));
    }
    #[cfg(not(target_os = "linux"))]
    let _ = euid;
}

/// The canary's report: cached for this host state, or run now (and cached).
#[cfg(target_os = "linux")]
fn canary_report(user: bool, euid: u32, egid: u32) -> Option<cordon_stage::canary::CanaryReport> {
    let key = canary_cache_key(user, euid, egid);
    let dir = canary_cache_dir(euid);
    if let (Some(dir), Some(key)) = (&dir, &key) {
        if let Some(r) = read_canary_cache(dir, key, euid) {
            return Some(r);
        }
    }
    // A scratch directory that exists (the child's tmpfs covers it in its own mount
    // namespace only); never `/` (a path below an overmounted root would resolve on
    // the host's file system).
    let scratch = ["/tmp", "/dev", "/run"].into_iter().find(|d| Path::new(d).is_dir())?;
    let c = |s: &str| std::ffi::CString::new(s).ok();
    let (uid_map, gid_map) = (format!("{euid} {euid} 1\n"), format!("{egid} {egid} 1\n"));
    let maps = cordon_stage::canary::CanaryIdMaps { uid_map: uid_map.as_bytes(), gid_map: gid_map.as_bytes() };
    let report = cordon_stage::canary::run(user.then_some(maps), &c(scratch)?, &c(&format!("{scratch}/p"))?).ok()?;
    if let (Some(dir), Some(key)) = (&dir, &key) {
        write_canary_cache(dir, key, &report);
    }
    Some(report)
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
        #[cfg(target_os = "linux")]
        let (namespaces, mut proc_mount, mut net_namespace) = tried_namespaces(namespaces, euid, egid);
        #[cfg(not(target_os = "linux"))]
        let mut proc_mount = ProcMount::Refused { reason: format!("procfs is Linux-only (this is {os})") };
        #[cfg(not(target_os = "linux"))]
        let mut net_namespace =
            NetNamespace::Unavailable { reason: format!("network namespaces are Linux-only (this is {os})") };
        if net_namespace.available() && env(ENV_DISABLE_NETNS).is_some_and(|v| v == "1") {
            net_namespace = NetNamespace::Unavailable {
                reason: format!("a network namespace of the run's own is disabled by {ENV_DISABLE_NETNS}"),
            };
        }
        if proc_mount.fresh() && env(ENV_DISABLE_FRESH_PROC).is_some_and(|v| v == "1") {
            proc_mount =
                ProcMount::Refused { reason: format!("a fresh /proc is disabled by {ENV_DISABLE_FRESH_PROC}") };
        }
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
            proc_mount,
            overlay,
            net_namespace,
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

    #[cfg(target_os = "linux")]
    #[test]
    fn the_canary_report_decides_namespaces_and_proc() {
        use cordon_stage::canary::CanaryReport;
        let ok = CanaryReport::default();
        assert_eq!(interpret_canary(Namespaces::UserNamespace, &ok), (Namespaces::UserNamespace, ProcMount::Fresh));
        // Docker's default seccomp profile: the clone is refused.
        let refused = CanaryReport { clone: libc::EPERM, ..ok };
        let (ns, proc) = interpret_canary(Namespaces::UserNamespace, &refused);
        assert!(matches!(&ns, Namespaces::Unavailable { reason } if reason.contains("seccomp profile")), "{ns:?}");
        assert!(!proc.fresh());
        // A masked /proc: everything but the proc mount works.
        let masked = CanaryReport { proc: libc::EPERM, ..ok };
        let (ns, proc) = interpret_canary(Namespaces::Direct, &masked);
        assert_eq!(ns, Namespaces::Direct);
        assert!(matches!(&proc, ProcMount::Refused { reason } if reason.contains("masks parts of /proc")), "{proc:?}");
        // A mount step refused: no mount layer.
        let no_setattr = CanaryReport { setattr: libc::ENOSYS, ..ok };
        assert!(!interpret_canary(Namespaces::Direct, &no_setattr).0.available());
        // Network namespaces refused alone: the others stay, local IPC goes.
        let no_net = CanaryReport { net: libc::EPERM, ..ok };
        assert_eq!(interpret_canary(Namespaces::Direct, &no_net), (Namespaces::Direct, ProcMount::Fresh));
        let net = interpret_canary_net(&Namespaces::Direct, &no_net);
        assert!(matches!(&net, NetNamespace::Unavailable { reason } if reason.contains("CLONE_NEWNET")), "{net:?}");
        assert!(interpret_canary_net(&Namespaces::Direct, &ok).available());
        assert!(!interpret_canary_net(&interpret_canary(Namespaces::Direct, &refused).0, &ok).available());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_canary_cache_holds_one_key_and_only_our_file() {
        use cordon_stage::canary::CanaryReport;
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let euid = nix::unistd::geteuid().as_raw();
        let r = CanaryReport { proc: libc::EPERM, ..CanaryReport::default() };
        write_canary_cache(dir.path(), "key one", &r);
        assert_eq!(read_canary_cache(dir.path(), "key one", euid), Some(r));
        assert_eq!(read_canary_cache(dir.path(), "key two", euid), None, "another host state");
        // A file others could have written is not trusted.
        let f = dir.path().join(CANARY_CACHE);
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(read_canary_cache(dir.path(), "key one", euid), None);
        // The key changes with the identity asked for.
        let a = canary_cache_key(true, euid, 0);
        let b = canary_cache_key(false, euid, 0);
        assert!(a.is_some() && a != b);
    }

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
