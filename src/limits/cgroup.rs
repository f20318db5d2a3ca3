//! cgroups: where cordon's own cgroups live (v1 and v2), one run's cgroup from
//! creation to the sweep, and what the host offers (`probe_host`).

use super::*;
/// Where cordon's own cgroups live: the v2 directory and the v1 hierarchies'
/// directories, by controller.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CgroupLayout {
    /// cordon's cgroup in the unified (v2) hierarchy, when one is mounted.
    pub v2: Option<PathBuf>,
    /// Where the unified hierarchy's root is mounted (its top cgroup).
    pub v2_root: Option<PathBuf>,
    /// cordon's cgroup in each v1 hierarchy, by controller (`memory`, `pids`, `cpuacct`).
    pub v1: BTreeMap<String, PathBuf>,
    /// Cgroups are not used: [`ENV_DISABLE_CGROUPS`] is set (a host without them).
    pub disabled: bool,
}

/// Set to `1`, cordon behaves as on a host where it cannot create cgroups (tests,
/// and reproducing such hosts; see [`crate::host`] for the other knobs).
pub const ENV_DISABLE_CGROUPS: &str = "CORDON_DISABLE_CGROUPS";

/// The v1 controllers cordon uses.
pub(super) const V1_CONTROLLERS: [&str; 3] = ["memory", "pids", "cpuacct"];

impl CgroupLayout {
    /// Read `/proc/self/cgroup`, then where its hierarchies are mounted: by
    /// `statmount` at their conventional places where the kernel has it
    /// ([`CgroupLayout::by_statmount`]), else from `/proc/self/mountinfo`.
    pub fn detect() -> CgroupLayout {
        if std::env::var(ENV_DISABLE_CGROUPS).is_ok_and(|v| v == "1") {
            return CgroupLayout { disabled: true, ..CgroupLayout::default() };
        }
        let cg = read_proc("/proc/self/cgroup", 1 << 10);
        #[cfg(target_os = "linux")]
        if let Some(layout) = CgroupLayout::by_statmount(&cg) {
            return layout;
        }
        let mi = read_proc("/proc/self/mountinfo", 16 << 10);
        CgroupLayout::parse(&mi, &cg)
    }

    /// The layout from the mounts at the conventional places (`/sys/fs/cgroup` or
    /// `/sys/fs/cgroup/unified` for v2, `/sys/fs/cgroup/<controllers>` for a v1
    /// hierarchy, as `/proc/self/cgroup` names it), asked one by one with `statmount`.
    /// `None` unless every hierarchy cordon uses is found there, so that the answer is
    /// the one `mountinfo` would give.
    #[cfg(target_os = "linux")]
    pub fn by_statmount(proc_cgroup: &str) -> Option<CgroupLayout> {
        let mut mounts: BTreeMap<String, (String, PathBuf)> = BTreeMap::new();
        for line in proc_cgroup.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_id), Some(controllers)) = (parts.next(), parts.next()) else { continue };
            if controllers.is_empty() {
                let m = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
                    .into_iter()
                    .filter_map(cordon_stage::mounts::mount_at)
                    .find(|m| m.fs_type == "cgroup2")?;
                mounts.insert(String::new(), (m.root, m.point));
                continue;
            }
            let used: Vec<&str> = controllers.split(',').filter(|c| V1_CONTROLLERS.contains(c)).collect();
            if used.is_empty() {
                continue;
            }
            let m = cordon_stage::mounts::mount_at(&format!("/sys/fs/cgroup/{controllers}"))?;
            let opts: Vec<&str> = m.opts.split(',').collect();
            if m.fs_type != "cgroup" || !used.iter().all(|c| opts.contains(c)) {
                return None;
            }
            for c in used {
                mounts.insert(c.to_string(), (m.root.clone(), m.point.clone()));
            }
        }
        Some(CgroupLayout::from_mounts(&mounts, proc_cgroup))
    }

    /// The layout from mountinfo and `/proc/self/cgroup` text (pure).
    pub fn parse(mountinfo: &str, proc_cgroup: &str) -> CgroupLayout {
        // (root, mount point) per hierarchy: "" for v2, the controller for v1.
        let mut mounts: BTreeMap<String, (String, PathBuf)> = BTreeMap::new();
        for line in mountinfo.lines() {
            let Some((pre, post)) = line.split_once(" - ") else { continue };
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            let (Some(root), Some(point), Some(fstype)) = (pre.get(3), pre.get(4), post.first()) else { continue };
            let point = PathBuf::from(unescape_mountinfo(point));
            match *fstype {
                "cgroup2" => {
                    mounts.entry(String::new()).or_insert((root.to_string(), point));
                }
                "cgroup" => {
                    for opt in post.get(2).unwrap_or(&"").split(',') {
                        if V1_CONTROLLERS.contains(&opt) {
                            mounts.entry(opt.to_string()).or_insert((root.to_string(), point.clone()));
                        }
                    }
                }
                _ => {}
            }
        }
        CgroupLayout::from_mounts(&mounts, proc_cgroup)
    }

    /// The layout from each hierarchy's (mount root, mount point), keyed `""` for v2
    /// and by controller for v1, and `/proc/self/cgroup` text (pure).
    fn from_mounts(mounts: &BTreeMap<String, (String, PathBuf)>, proc_cgroup: &str) -> CgroupLayout {
        let mut layout = CgroupLayout::default();
        for line in proc_cgroup.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            for c in controllers.split(',') {
                let Some((root, point)) = mounts.get(c) else { continue };
                let Some(rel) = Path::new(path).strip_prefix(root).ok() else { continue };
                let dir = point.join(rel);
                if c.is_empty() {
                    if root == "/" {
                        layout.v2_root = Some(point.clone());
                    }
                    layout.v2 = Some(dir);
                } else {
                    layout.v1.insert(c.to_string(), dir);
                }
            }
        }
        layout
    }
}

/// A generated `/proc` file's text ("" when unreadable), read into a buffer of
/// `hint` bytes first: `read_to_string` would start with a 32-byte read and grow,
/// one system call per doubling, each regenerating part of the file.
fn read_proc(path: &str, hint: usize) -> String {
    use std::io::Read;
    let mut buf = Vec::with_capacity(hint);
    match std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut buf)) {
        Ok(_) => String::from_utf8(buf).unwrap_or_default(),
        Err(_) => String::new(),
    }
}

pub(crate) fn unescape_mountinfo(s: &str) -> String {
    s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
}

/// A run's cgroups: created before the spawn, emptied and removed when dropped.
#[derive(Debug, Default)]
pub struct RunCgroup {
    /// Directories created, each with its hierarchy: `""` for v2, else the v1
    /// controller.
    dirs: Vec<(&'static str, PathBuf)>,
    /// The attach file of each (`cgroup.procs`, or `tasks` on v1), open for writing
    /// (the child writes `0`).
    procs: Vec<OwnedFd>,
    coverage: Coverage,
    /// Why no cgroup (or not every controller) could be used.
    why_not: Vec<String>,
}

/// The shared parent of cordon's v2 run cgroups when its own cgroup cannot have
/// children with controllers: `<v2 root>/cordon`.
pub const V2_PARENT: &str = "cordon";

pub(super) fn v2_enabled(dir: &Path) -> std::io::Result<bool> {
    let controllers = std::fs::read_to_string(dir.join("cgroup.subtree_control"))?;
    let enabled: Vec<&str> = controllers.split_whitespace().collect();
    Ok(enabled.contains(&"memory") && enabled.contains(&"pids"))
}

/// Where a v2 run cgroup goes: cordon's own cgroup when it already passes `memory`
/// and `pids` to its children (a delegated subtree); else, when the hierarchy's root
/// does, [`V2_PARENT`] under it with both enabled (root, or a writable root). A cgroup
/// that holds processes cannot enable controllers for children ("no internal
/// processes"), which is why cordon does not enable them in its own.
pub(super) fn v2_parent(layout: &CgroupLayout, own: &Path) -> std::io::Result<PathBuf> {
    if v2_enabled(own)? {
        return Ok(own.to_path_buf());
    }
    let Some(root) = layout.v2_root.as_ref().filter(|r| v2_enabled(r).unwrap_or(false)) else {
        return Err(std::io::Error::other(
            "memory and pids are not enabled for child cgroups, neither in cordon's cgroup nor at the root",
        ));
    };
    let parent = root.join(V2_PARENT);
    match std::fs::create_dir(&parent) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    if !v2_enabled(&parent)? {
        write(&parent, "cgroup.subtree_control", "+memory +pids")?;
    }
    Ok(parent)
}

pub(super) fn write(dir: &Path, file: &str, value: &str) -> std::io::Result<()> {
    std::fs::write(dir.join(file), value)
}

pub(super) fn open_procs(dir: &Path) -> std::io::Result<OwnedFd> {
    open_for_attach(dir, "cgroup.procs")
}

/// The file the run's first process writes `0` to, to join a v1 cgroup: `tasks`
/// (moves the writing thread; the child is single-threaded then, so that is the whole
/// process), else `cgroup.procs`. Writing the calling thread to `tasks` is the one
/// migration the kernel makes without the global `cgroup_threadgroup_rwsem`, whose
/// write side waits for an RCU grace period (milliseconds on some hosts; see
/// docs/performance.md). A v2 domain cgroup has no such file: `cgroup.procs` there.
pub(super) fn open_v1_attach(dir: &Path) -> std::io::Result<OwnedFd> {
    open_for_attach(dir, "tasks").or_else(|_| open_procs(dir))
}

fn open_for_attach(dir: &Path, file: &str) -> std::io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_CLOEXEC).open(dir.join(file))?;
    Ok(f.into())
}

impl RunCgroup {
    /// Create the run's cgroups named `name` under cordon's own (v2 first, else the
    /// v1 `memory`, `pids` and `cpuacct` hierarchies) and write the limits. Never
    /// fails: what could not be created is left uncovered and [`RunCgroup::why_not`]
    /// says why.
    pub fn create(layout: &CgroupLayout, name: &str, limits: &Limits) -> RunCgroup {
        let mut cg = RunCgroup::default();
        if let Some(base) = &layout.v2 {
            match cg.try_v2(layout, base, name, limits) {
                Ok(()) => return cg,
                Err(e) => cg.why_not.push(format!("cgroup v2 at {}: {e}", base.display())),
            }
        }
        for controller in V1_CONTROLLERS {
            // cpuacct only measures, for the CPU verdict: skip it without a CPU limit.
            if controller == "cpuacct" && limits.cpu.is_none() {
                continue;
            }
            let Some(base) = layout.v1.get(controller) else { continue };
            if let Err(e) = cg.try_v1(controller, base, name, limits) {
                cg.why_not.push(format!("cgroup v1 {controller} at {}: {e}", base.display()));
            }
        }
        if layout.disabled {
            cg.why_not.push(format!("cgroups disabled by {ENV_DISABLE_CGROUPS}"));
        } else if layout.v2.is_none() && layout.v1.is_empty() {
            cg.why_not.push("no cgroup hierarchy is mounted".into());
        }
        cg
    }

    fn try_v2(&mut self, layout: &CgroupLayout, base: &Path, name: &str, limits: &Limits) -> std::io::Result<()> {
        let parent = v2_parent(layout, base)?;
        let dir = parent.join(name);
        std::fs::create_dir(&dir)?;
        self.dirs.push(("", dir.clone()));
        write(&dir, "memory.max", &limits.memory.to_string())?;
        let _ = write(&dir, "memory.swap.max", "0");
        let _ = write(&dir, "memory.oom.group", "1");
        write(&dir, "pids.max", &limits.pids.to_string())?;
        self.procs.push(open_procs(&dir)?);
        self.coverage = Coverage { memory: Some(Mechanism::CgroupV2), pids: Some(Mechanism::CgroupV2) };
        Ok(())
    }

    fn try_v1(&mut self, controller: &'static str, base: &Path, name: &str, limits: &Limits) -> std::io::Result<()> {
        let dir = base.join(name);
        std::fs::create_dir(&dir)?;
        self.dirs.push((controller, dir.clone()));
        match controller {
            "memory" => {
                write(&dir, "memory.limit_in_bytes", &limits.memory.to_string())?;
                // Swap included, where swap accounting exists (must follow the limit).
                if dir.join("memory.memsw.limit_in_bytes").exists() {
                    write(&dir, "memory.memsw.limit_in_bytes", &limits.memory.to_string())?;
                }
            }
            "pids" => write(&dir, "pids.max", &limits.pids.to_string())?,
            _ => {}
        }
        self.procs.push(open_v1_attach(&dir)?);
        match controller {
            "memory" => self.coverage.memory = Some(Mechanism::CgroupV1),
            "pids" => self.coverage.pids = Some(Mechanism::CgroupV1),
            _ => {}
        }
        Ok(())
    }

    /// What the cgroups cover.
    pub fn coverage(&self) -> Coverage {
        self.coverage
    }

    /// Why a controller is not covered (empty when all are).
    pub fn why_not(&self) -> String {
        if self.why_not.is_empty() {
            "unknown reason".into()
        } else {
            self.why_not.join("; ")
        }
    }

    /// The attach fds for the child (`cgroup.procs`, or `tasks` on v1).
    pub fn procs_fds(&self) -> Vec<RawFd> {
        self.procs.iter().map(|f| f.as_raw_fd()).collect()
    }

    /// Read what the cgroups recorded (in each hierarchy only its own files).
    pub fn evidence(&self) -> Evidence {
        let mut ev = Evidence::default();
        for (hierarchy, dir) in &self.dirs {
            let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
            match *hierarchy {
                "" => {
                    ev.oom_kills += keyed(&read("memory.events"), "oom_kill");
                    ev.pids_max += keyed(&read("pids.events"), "max");
                    ev.cpu_ns = Some(keyed(&read("cpu.stat"), "usage_usec").saturating_mul(1000));
                }
                "memory" => ev.oom_kills += keyed(&read("memory.oom_control"), "oom_kill"),
                "pids" => ev.pids_max += keyed(&read("pids.events"), "max"),
                _ => {
                    if let Ok(ns) = read("cpuacct.usage").trim().parse::<u64>() {
                        ev.cpu_ns = Some(ns);
                    }
                }
            }
        }
        ev
    }

    /// Whether every cgroup of the run is gone (or none was made).
    pub fn is_removed(&self) -> bool {
        self.dirs.is_empty()
    }

    /// Whether no process is left in the run's cgroups (unreadable counts as not empty).
    fn is_empty(&self) -> bool {
        self.dirs.iter().all(|(_, dir)| {
            std::fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|procs| procs.trim().is_empty())
        })
    }

    /// The common end of a run, without waiting: when no process is left, read the
    /// evidence and remove every cgroup that can go at once. `Err(self)` when a process
    /// is left (the caller kills them off the async runtime); `Ok((evidence, rest))`
    /// otherwise, `rest` holding the cgroups still busy for a moment (its drop retries).
    pub fn finish_if_empty(mut self) -> Result<(Evidence, RunCgroup), RunCgroup> {
        if !self.is_empty() {
            return Err(self);
        }
        let evidence = self.evidence();
        self.procs.clear();
        let mut busy = Vec::new();
        for (hierarchy, dir) in std::mem::take(&mut self.dirs).into_iter().rev() {
            if let Err(e) = std::fs::remove_dir(&dir) {
                if e.raw_os_error() == Some(libc::EBUSY) {
                    busy.push((hierarchy, dir));
                }
            }
        }
        busy.reverse();
        self.dirs = busy;
        Ok((evidence, self))
    }

    /// SIGKILL every process left in the run's cgroups, repeatedly, until they are
    /// empty (a fork bomb is bounded by `pids.max`, so this converges).
    pub fn kill_all(&self) {
        for _ in 0..200 {
            let mut any = false;
            for (_, dir) in &self.dirs {
                for pid in std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default().lines() {
                    if let Ok(pid) = pid.trim().parse::<i32>() {
                        any = true;
                        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
                    }
                }
            }
            if !any {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        self.procs.clear();
        self.kill_all();
        for (_, dir) in self.dirs.iter().rev() {
            // A cgroup whose last process is still exiting is busy for a moment.
            for _ in 0..100 {
                match std::fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                        std::thread::sleep(std::time::Duration::from_millis(5))
                    }
                    Err(_) => break,
                }
            }
        }
    }
}

/// Remove the empty per-run cgroups under `base` that a cordon process which no
/// longer exists left behind (it was killed before it could remove them). A cgroup
/// that still holds processes cannot be removed and stays.
pub fn sweep_stale(layout: &CgroupLayout) {
    let shared = layout.v2_root.as_ref().map(|r| r.join(V2_PARENT));
    for base in layout.v2.iter().chain(shared.iter()).chain(layout.v1.values()) {
        sweep_stale_in(base);
    }
}

pub(super) fn sweep_stale_in(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(CGROUP_PREFIX)) else { continue };
        let Some(pid) = rest.split('-').next().filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// `key N` from a flat-keyed cgroup file (0 when absent).
pub(super) fn keyed(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0)
}

/// What `cordon probe` and `cordon doctor` report about limits on this host: the
/// default values and the mechanism each would get for this process, found by
/// creating (and removing) a cgroup the way a run does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostLimits {
    /// Default memory limit (bytes).
    pub memory: u64,
    /// How a run's memory is limited.
    pub memory_by: Mechanism,
    /// Default process limit.
    pub pids: u64,
    /// How a run's processes are limited (confined modes, which get a user namespace
    /// when not root).
    pub pids_by: Mechanism,
    /// How CPU time is limited (always `RLIMIT_CPU`, per process).
    pub cpu_by: Mechanism,
    /// cordon's own cgroups.
    pub cgroups: CgroupLayout,
    /// What is missing, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<Gap>,
}

/// Probe this host's limit mechanisms (creates and removes one empty cgroup).
pub fn probe_host(euid: u32) -> HostLimits {
    let layout = CgroupLayout::detect();
    let none = LimitRequest::default();
    let limits = resolve_limits(&none, &none, &none, memory_budget(&layout)).unwrap_or(Limits {
        memory: FALLBACK_MEM_TOTAL / 2,
        pids: DEFAULT_PIDS,
        cpu: None,
        explicit: Vec::new(),
    });
    let cg = RunCgroup::create(&layout, &format!("{CGROUP_PREFIX}probe-{}", std::process::id()), &limits);
    let plan = plan_limits(&limits, cg.coverage(), super::nproc_exempt(euid), true, &cg.why_not());
    drop(cg);
    HostLimits {
        memory: limits.memory,
        memory_by: plan.applied.memory_by,
        pids: limits.pids,
        pids_by: plan.applied.pids_by,
        cpu_by: Mechanism::Rlimit,
        cgroups: layout,
        gaps: plan.applied.gaps,
    }
}
