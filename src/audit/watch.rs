//! Observers outside the sandbox: each watches for one effect of a probe (a file that
//! changed, a listener that was reached, a victim that was touched, a secret that came
//! out, a process that survived) and says whether it happened.
//!
//! A probe that must be stopped passes when no watch saw its effect; a positive control
//! passes when every watch saw it. Each look is short and bounded (a non-blocking
//! `accept`, a `recv` with a brief timeout, a directory read), never a timing verdict.

use super::exec::RunOutput;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One observer of one effect.
pub trait Watch: Send {
    /// What the effect looked like, if it happened.
    fn effect(&mut self, run: &RunOutput) -> Option<String>;
    /// Undo what the probe (or the host control) left: called once, after `effect`.
    fn cleanup(&mut self) {}
}

/// A boxed watch.
pub type BoxWatch = Box<dyn Watch>;

/// A file's (or directory's) state: content or sorted names, identity, metadata, xattrs.
#[derive(Debug, PartialEq, Eq, Clone)]
struct FileState {
    content: Vec<u8>,
    meta: (u64, u32, u32, u32, i64, i64, i64, i64, u64, u64),
    xattrs: Vec<u8>,
}

fn state_of(p: &Path) -> Option<FileState> {
    let m = fs::symlink_metadata(p).ok()?;
    let content = if m.is_dir() {
        let mut names: Vec<String> =
            fs::read_dir(p).ok()?.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names.join("\n").into_bytes()
    } else if m.is_file() {
        fs::read(p).ok()?
    } else if m.file_type().is_symlink() {
        fs::read_link(p).ok()?.as_os_str().as_bytes().to_vec()
    } else {
        vec![]
    };
    let meta = (
        m.ino(),
        m.mode(),
        m.uid(),
        m.gid(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
        m.nlink(),
        m.size(),
    );
    let xattrs = CString::new(p.as_os_str().as_bytes())
        .ok()
        .and_then(|c| cordon_stage::probe::list_xattr(&c).ok())
        .unwrap_or_default();
    Some(FileState { content, meta, xattrs })
}

/// A file whose content and metadata must not change (and must not disappear).
pub struct Sentinel {
    path: PathBuf,
    before: Option<FileState>,
}

impl Sentinel {
    /// Records `path` as it is now.
    pub fn record(path: &Path) -> Sentinel {
        Sentinel { path: path.to_path_buf(), before: state_of(path) }
    }
}

impl Watch for Sentinel {
    fn effect(&mut self, _: &RunOutput) -> Option<String> {
        let now = state_of(&self.path);
        let p = self.path.display();
        match (&self.before, now) {
            (Some(_), None) => Some(format!("{p} is gone")),
            (None, Some(_)) => Some(format!("{p} appeared")),
            (Some(b), Some(n)) if b.content != n.content => Some(format!("{p} content changed")),
            (Some(b), Some(n)) if b.meta != n.meta => {
                Some(format!("{p} metadata changed (inode, mode, owner, times or links)"))
            }
            (Some(b), Some(n)) if b.xattrs != n.xattrs => Some(format!("{p} extended attributes changed")),
            _ => None,
        }
    }
}

/// A directory tree that must stay exactly as it is (every entry's identity, mode and
/// content).
pub struct Tree {
    root: PathBuf,
    before: BTreeMap<PathBuf, FileState>,
}

fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, FileState>) {
    if let Some(s) = state_of(dir) {
        out.insert(dir.to_path_buf(), s);
    }
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => walk(&p, out),
            Ok(_) => {
                if let Some(s) = state_of(&p) {
                    out.insert(p, s);
                }
            }
            Err(_) => {}
        }
    }
}

impl Tree {
    /// Records every entry under `root`.
    pub fn record(root: &Path) -> Tree {
        let mut before = BTreeMap::new();
        walk(root, &mut before);
        Tree { root: root.to_path_buf(), before }
    }
}

impl Watch for Tree {
    fn effect(&mut self, _: &RunOutput) -> Option<String> {
        let mut now = BTreeMap::new();
        walk(&self.root, &mut now);
        if now == self.before {
            return None;
        }
        let gone = self.before.keys().filter(|k| !now.contains_key(*k)).count();
        let new: Vec<_> =
            now.keys().filter(|k| !self.before.contains_key(*k)).map(|p| p.display().to_string()).collect();
        let changed: Vec<_> = self
            .before
            .iter()
            .filter(|(k, v)| now.get(*k).is_some_and(|n| n != *v))
            .map(|(k, _)| k.display().to_string())
            .collect();
        Some(format!("{} changed: {gone} removed, added {new:?}, modified {changed:?}", self.root.display()))
    }
}

/// A path that must not come into existence (or, for a control, must).
pub struct Appears {
    path: PathBuf,
    /// Remove it in cleanup (it lies outside the job's directory, e.g. in host `/tmp`).
    remove: bool,
}

impl Appears {
    /// Watches `path`, which does not exist yet.
    pub fn new(path: &Path) -> Appears {
        Appears { path: path.to_path_buf(), remove: false }
    }

    /// Watches a path outside the job's directory, removed afterwards if it appeared.
    pub fn outside_job(path: &Path) -> Appears {
        Appears { path: path.to_path_buf(), remove: true }
    }
}

impl Watch for Appears {
    fn effect(&mut self, _: &RunOutput) -> Option<String> {
        fs::symlink_metadata(&self.path).ok().map(|_| format!("{} exists", self.path.display()))
    }
    fn cleanup(&mut self) {
        if self.remove {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// A file that must end up with `content` (a control's effect).
pub struct Holds {
    path: PathBuf,
    content: String,
}

impl Holds {
    /// `path` must contain `content` after the run.
    pub fn new(path: &Path, content: &str) -> Holds {
        Holds { path: path.to_path_buf(), content: content.to_string() }
    }
}

impl Watch for Holds {
    fn effect(&mut self, _: &RunOutput) -> Option<String> {
        let got = fs::read_to_string(&self.path).ok()?;
        got.contains(&self.content).then(|| format!("{} holds {:?}", self.path.display(), self.content))
    }
}

/// A loopback TCP listener that must receive nothing.
pub struct TcpTrap(pub TcpListener);

impl Watch for TcpTrap {
    fn effect(&mut self, _: &RunOutput) -> Option<String> {
        // A connection that completed is queued in the backlog before the run ends.
        let port = self.0.local_addr().map(|a| a.port()).unwrap_or(0);
        self.0.accept().ok().map(|(mut s, from)| {
            let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
            let _ = s.read(&mut [0u8; 8]);
            format!("the listener on port {port} accepted a connection from {from}")
        })
    }
}

/// A loopback UDP socket that must receive nothing.
pub struct UdpTrap(pub UdpSocket);

impl Watch for UdpTrap {
    fn effect(&mut self, _: &RunOutput) -> Option<String> {
        let port = self.0.local_addr().map(|a| a.port()).unwrap_or(0);
        let _ = self.0.set_nonblocking(true);
        self.0
            .recv_from(&mut [0u8; 512])
            .ok()
            .map(|(n, from)| format!("UDP port {port} received {n} bytes from {from}"))
    }
}

/// A unix socket (pathname or abstract) that must receive nothing.
pub enum UnixTrap {
    /// A stream listener.
    Stream(UnixListener),
    /// A datagram socket.
    Dgram(UnixDatagram),
}

impl Watch for UnixTrap {
    fn effect(&mut self, _: &RunOutput) -> Option<String> {
        match self {
            UnixTrap::Stream(l) => l.accept().ok().map(|_| "the unix listener accepted a connection".into()),
            UnixTrap::Dgram(d) => d.recv(&mut [0u8; 64]).ok().map(|n| format!("the unix socket received {n} bytes")),
        }
    }
}

/// The command's output (stdout, stderr and the probe's detail) must not contain
/// `needle` (a secret it should never have seen); for a control, must.
pub struct Output {
    needle: String,
    what: String,
}

impl Output {
    /// Watches for `needle`, described as `what`.
    pub fn contains(needle: &str, what: &str) -> Output {
        Output { needle: needle.to_string(), what: what.to_string() }
    }
}

impl Watch for Output {
    fn effect(&mut self, run: &RunOutput) -> Option<String> {
        let detail = run.line.as_ref().map(|l| l.detail.as_str()).unwrap_or("");
        [run.stdout.as_str(), run.stderr.as_str(), detail]
            .iter()
            .any(|t| t.contains(&self.needle))
            .then(|| format!("the output shows {}", self.what))
    }
}

/// The probe's own report says the operation worked: the judgement for operations
/// with no effect outside (creating a kernel object, gaining a capability), whose
/// host control shows the operation works unconfined.
pub struct Worked;

impl Watch for Worked {
    fn effect(&mut self, run: &RunOutput) -> Option<String> {
        let l = run.line.as_ref()?;
        (l.ok && run.signal.is_none()).then(|| format!("{} worked: {}", l.op, short(&l.detail)))
    }
}

/// A number the probe reports in its detail (`key=N`) reached `at_least`.
pub struct Reached {
    key: &'static str,
    at_least: u64,
}

impl Reached {
    /// `key=N` with N at least `at_least`.
    pub fn new(key: &'static str, at_least: u64) -> Reached {
        Reached { key, at_least }
    }
}

impl Watch for Reached {
    fn effect(&mut self, run: &RunOutput) -> Option<String> {
        let detail = &run.line.as_ref()?.detail;
        let prefix = format!("{}=", self.key);
        let n: u64 = detail
            .split([' ', ';'])
            .find_map(|w| w.strip_prefix(&prefix))
            .and_then(|v| v.trim_end_matches('M').parse().ok())?;
        (n >= self.at_least).then(|| format!("{}={n}, unbounded (limit not reached by {})", self.key, self.at_least))
    }
}

/// A check of cordon's own run result (`--json`), for the report's honesty.
pub struct Report {
    check: fn(&serde_json::Value) -> Option<String>,
}

impl Report {
    /// `check` returns the effect it finds in the report (a lie, a missing denial).
    pub fn new(check: fn(&serde_json::Value) -> Option<String>) -> Report {
        Report { check }
    }
}

impl Watch for Report {
    fn effect(&mut self, run: &RunOutput) -> Option<String> {
        run.report.as_ref().and_then(self.check)
    }
}

/// Host processes whose command line holds `marker` (the job's unique token) must be
/// gone once the run has ended; cleanup kills any it finds.
pub struct Survivors {
    marker: String,
    found: Vec<i32>,
}

impl Survivors {
    /// Watches for processes carrying `marker` in their arguments.
    pub fn new(marker: &str) -> Survivors {
        Survivors { marker: marker.to_string(), found: vec![] }
    }
}

/// Pids of host processes whose command line contains `marker`.
pub fn pids_with(marker: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(rd) = fs::read_dir("/proc") else { return vec![] };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
        })
        .collect()
}

impl Watch for Survivors {
    fn effect(&mut self, _: &RunOutput) -> Option<String> {
        self.found = pids_with(&self.marker);
        let shown: Vec<i32> = self.found.iter().take(8).copied().collect();
        (!self.found.is_empty())
            .then(|| format!("{} process(es) outlived the run (pids {shown:?}...)", self.found.len()))
    }
    fn cleanup(&mut self) {
        // Only processes this job started (they carry its unique marker), by pid.
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let left = pids_with(&self.marker);
            if left.is_empty() || Instant::now() > deadline {
                break;
            }
            for pid in left {
                let _ = cordon_stage::probe::proc::kill(pid, libc::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn short(s: &str) -> String {
    let s = s.replace('\n', " ");
    if s.chars().count() > 120 {
        format!("{}…", s.chars().take(120).collect::<String>())
    } else {
        s
    }
}

/// A closure watch for one-off host state (a domain name, an IPC key, a keyring).
pub struct Check<F: FnMut(&RunOutput) -> Option<String> + Send, C: FnMut() + Send> {
    /// The effect check.
    pub effect: F,
    /// The cleanup.
    pub cleanup: C,
}

impl<F: FnMut(&RunOutput) -> Option<String> + Send, C: FnMut() + Send> Watch for Check<F, C> {
    fn effect(&mut self, run: &RunOutput) -> Option<String> {
        (self.effect)(run)
    }
    fn cleanup(&mut self) {
        (self.cleanup)()
    }
}

/// A FIFO a host process holds open for reading: nothing may arrive in it.
pub struct FifoReader {
    reader: std::fs::File,
}

impl FifoReader {
    /// Makes the FIFO at `path` (owned by the identity) and opens its read end.
    pub fn new(fx: &super::fixture::Fixture, path: &Path) -> Result<FifoReader, super::fixture::Skip> {
        use std::os::unix::fs::OpenOptionsExt;
        nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o666))
            .map_err(|e| super::fixture::Skip(format!("mkfifo {}: {e}", path.display())))?;
        fx.own(path);
        let _ = fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let reader = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| super::fixture::Skip(format!("open {}: {e}", path.display())))?;
        Ok(FifoReader { reader })
    }
}

impl Watch for FifoReader {
    fn effect(&mut self, _: &RunOutput) -> Option<String> {
        let mut buf = [0u8; 256];
        match self.reader.read(&mut buf) {
            Ok(n) if n > 0 => Some(format!("the host's reader of the FIFO received {n} bytes")),
            _ => None,
        }
    }
}

/// Connects to `127.0.0.1:port` from the host, again and again, while the run lasts:
/// a listener inside the sandbox must never accept the host's connection.
pub struct Connector {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<bool>>,
}

impl Connector {
    /// Starts connecting (every 20 ms, at most 30 s).
    pub fn start(port: u16) -> Connector {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            let until = Instant::now() + Duration::from_secs(30);
            while !flag.load(Ordering::Relaxed) && Instant::now() < until {
                if let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(50)) {
                    use std::io::Write;
                    let _ = s.write_all(b"X");
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            false
        });
        Connector { stop, thread: Some(thread) }
    }
}

impl Watch for Connector {
    fn effect(&mut self, _: &RunOutput) -> Option<String> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let reached = self.thread.take().and_then(|t| t.join().ok()).unwrap_or(false);
        reached.then(|| "the host reached a listener inside the sandbox".into())
    }
    fn cleanup(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
