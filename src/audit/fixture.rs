//! One job's world: its directories (owned by the identity under test, so that only
//! the sandbox, never file permissions, can stop a write), and the helpers a probe's
//! setup uses to plant files, traps, victims and terminals there.
//!
//! Layout of a job under the audit's directory: `ws/` (the workspace), `outside/` (a
//! directory the identity could write without a sandbox), `home/` (its `HOME`).

use super::exec::{Identity, RunOutput, Target};
use super::watch::{self, Watch};
use crate::mode::Mode;
use std::fs;
use std::net::{Ipv6Addr, SocketAddr, TcpListener, UdpSocket};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Why a probe cannot be judged here (a missing tool, no IPv6 loopback, a target it
/// does not apply to).
#[derive(Debug, Clone)]
pub struct Skip(pub String);

/// `Err(Skip)` with a reason.
pub fn skip<T>(why: impl Into<String>) -> Result<T, Skip> {
    Err(Skip(why.into()))
}

/// The probe program's copies in the audit's directory, made before any job runs (a
/// program copied while other threads fork could not be executed: `ETXTBSY`).
#[derive(Clone, Debug)]
pub struct Programs {
    /// The cordon binary every identity can execute.
    pub cordon: PathBuf,
    /// Its setuid-root copy (root only).
    pub suid: Option<PathBuf>,
    /// Its copy with file capabilities (root only).
    pub fcaps: Option<PathBuf>,
}

/// A loopback TCP port free right now (bound, then released).
pub fn free_port() -> Result<u16, Skip> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Skip(format!("no loopback port: {e}")))
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

/// A job's directories and what its setup needs to know.
pub struct Fixture {
    /// The job's directory.
    pub root: PathBuf,
    /// The workspace (the probe's working directory; `--cwd` for cordon).
    pub ws: PathBuf,
    /// A directory outside every writable root, writable by the identity on the host.
    pub outside: PathBuf,
    /// The identity's `HOME` for this job.
    pub home: PathBuf,
    /// Who the probe runs as.
    pub id: Identity,
    /// Where it runs.
    pub target: Target,
    /// The cordon binary (the probe program), reachable by every identity.
    pub cordon: PathBuf,
    /// A setuid-root copy of it (when the audit runs as root).
    pub cordon_suid: Option<PathBuf>,
    /// A copy carrying file capabilities (`cap_dac_override+ep`; when root).
    pub cordon_fcaps: Option<PathBuf>,
    /// The tag of this job (ports, keys, names, process markers).
    pub tag: String,
}

impl Fixture {
    /// Creates the job's directories under `root`.
    pub fn new(root: PathBuf, id: Identity, target: Target, programs: &Programs) -> Fixture {
        let n = UNIQUE.fetch_add(1, Ordering::Relaxed);
        let tag = format!("cordon-audit-{}-{n}", std::process::id());
        let fx = Fixture {
            ws: root.join("ws"),
            outside: root.join("outside"),
            home: root.join("home"),
            root,
            id,
            target,
            cordon: programs.cordon.clone(),
            cordon_suid: programs.suid.clone(),
            cordon_fcaps: programs.fcaps.clone(),
            tag,
        };
        for d in [&fx.root, &fx.ws, &fx.outside, &fx.home] {
            fx.dir(d);
        }
        fx
    }

    /// The mode the target enforces (`None`: the host control).
    pub fn mode(&self) -> Option<Mode> {
        self.target.mode()
    }

    /// Whether the workspace is writable in this run (always on the host).
    pub fn ws_writable(&self) -> bool {
        self.mode().is_none_or(|m| m >= Mode::WorkspaceWrite)
    }

    /// A small number unique to this job (SysV keys).
    pub fn number(&self) -> u32 {
        let n: u32 = self.tag.rsplit('-').next().and_then(|s| s.parse().ok()).unwrap_or(0);
        0x0c0d_0000 ^ (std::process::id() << 12) ^ n
    }

    /// Gives `p` to the identity.
    pub fn own(&self, p: &Path) {
        let _ = std::os::unix::fs::lchown(p, Some(self.id.uid), Some(self.id.gid));
    }

    /// A directory (and parents), mode 0755, owned by the identity.
    pub fn dir(&self, p: &Path) -> PathBuf {
        let _ = fs::create_dir_all(p);
        let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o755));
        self.own(p);
        p.to_path_buf()
    }

    /// A file with `content`, mode 0644, owned by the identity.
    pub fn file(&self, p: &Path, content: &str) -> PathBuf {
        if let Some(parent) = p.parent() {
            if !parent.exists() {
                self.dir(parent);
            }
        }
        let _ = fs::write(p, content);
        let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o644));
        self.own(p);
        p.to_path_buf()
    }

    /// A file that must not change: created, then recorded.
    pub fn sentinel(&self, p: &Path) -> (PathBuf, Box<dyn Watch>) {
        self.file(p, &format!("sentinel {}\n", self.tag));
        (p.to_path_buf(), Box::new(watch::Sentinel::record(p)))
    }

    /// A symlink owned by the identity.
    pub fn symlink(&self, target: &Path, link: &Path) {
        let _ = std::os::unix::fs::symlink(target, link);
        self.own(link);
    }

    /// A loopback TCP listener (IPv4, or IPv6 `::1`) that must receive nothing.
    pub fn tcp(&self, v6: bool) -> Result<(u16, Box<dyn Watch>), Skip> {
        let a: SocketAddr = if v6 { (Ipv6Addr::LOCALHOST, 0).into() } else { ([127, 0, 0, 1], 0).into() };
        let l = TcpListener::bind(a)
            .map_err(|e| Skip(format!("no {} loopback listener: {e}", if v6 { "IPv6" } else { "IPv4" })))?;
        let _ = l.set_nonblocking(true);
        let port = l.local_addr().map(|a| a.port()).unwrap_or(0);
        Ok((port, Box::new(watch::TcpTrap(l))))
    }

    /// A TCP listener at exactly `addr` (a loopback address) that must receive nothing.
    pub fn tcp_bind(&self, addr: SocketAddr) -> Result<(u16, Box<dyn Watch>), Skip> {
        let l = TcpListener::bind(addr).map_err(|e| Skip(format!("no listener on {addr}: {e}")))?;
        let _ = l.set_nonblocking(true);
        let port = l.local_addr().map(|a| a.port()).unwrap_or(0);
        Ok((port, Box::new(watch::TcpTrap(l))))
    }

    /// A loopback UDP socket (IPv4, or IPv6 `::1`) that must receive nothing.
    pub fn udp(&self, v6: bool) -> Result<(u16, Box<dyn Watch>), Skip> {
        let a: SocketAddr = if v6 { (Ipv6Addr::LOCALHOST, 0).into() } else { ([127, 0, 0, 1], 0).into() };
        let s = UdpSocket::bind(a).map_err(|e| Skip(format!("no UDP loopback socket: {e}")))?;
        let port = s.local_addr().map(|a| a.port()).unwrap_or(0);
        Ok((port, Box::new(watch::UdpTrap(s))))
    }

    /// A unix stream listener (pathname, or abstract when `path` is `None`) that must
    /// receive nothing; returns the name to connect to.
    pub fn unix_stream(&self, path: Option<&Path>) -> Result<(String, Box<dyn Watch>), Skip> {
        use std::os::linux::net::SocketAddrExt;
        let (name, l) = match path {
            Some(p) => {
                let l = UnixListener::bind(p).map_err(|e| Skip(format!("bind {}: {e}", p.display())))?;
                self.own(p);
                let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o777));
                (p.display().to_string(), l)
            }
            None => {
                let name = format!("{}-stream", self.tag);
                let a = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
                    .map_err(|e| Skip(e.to_string()))?;
                (name, UnixListener::bind_addr(&a).map_err(|e| Skip(format!("abstract bind: {e}")))?)
            }
        };
        let _ = l.set_nonblocking(true);
        Ok((name, Box::new(watch::UnixTrap::Stream(l))))
    }

    /// A unix datagram socket (pathname, or abstract) that must receive nothing.
    pub fn unix_dgram(&self, path: Option<&Path>) -> Result<(String, Box<dyn Watch>), Skip> {
        use std::os::linux::net::SocketAddrExt;
        let (name, d) = match path {
            Some(p) => {
                let d = UnixDatagram::bind(p).map_err(|e| Skip(format!("bind {}: {e}", p.display())))?;
                self.own(p);
                let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o777));
                (p.display().to_string(), d)
            }
            None => {
                let name = format!("{}-dgram", self.tag);
                let a = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
                    .map_err(|e| Skip(e.to_string()))?;
                (name, UnixDatagram::bind_addr(&a).map_err(|e| Skip(format!("abstract bind: {e}")))?)
            }
        };
        let _ = d.set_nonblocking(true);
        Ok((name, Box::new(watch::UnixTrap::Dgram(d))))
    }

    /// A host command run as the identity (setup work such as `git init`), with a
    /// bounded wait; `Err` with its output when it fails.
    pub fn host_sh(&self, script: &str) -> Result<String, Skip> {
        let mut cmd = self.host_cmd("/bin/sh");
        cmd.arg("-c").arg(script);
        let out = cmd.output().map_err(|e| Skip(format!("run /bin/sh: {e}")))?;
        if !out.status.success() {
            return skip(format!(
                "host setup `{script}` failed: {}",
                super::exec::tail(&String::from_utf8_lossy(&out.stderr))
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn host_cmd(&self, program: &str) -> Command {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("PATH", super::PATH_ENV)
            .env("HOME", &self.home)
            .env("LANG", "C")
            .env("GIT_AUTHOR_NAME", "cordon-audit")
            .env("GIT_AUTHOR_EMAIL", "cordon-audit@example.invalid")
            .env("GIT_COMMITTER_NAME", "cordon-audit")
            .env("GIT_COMMITTER_EMAIL", "cordon-audit@example.invalid")
            .current_dir(&self.ws)
            .stdin(Stdio::null());
        if self.id.uid != cordon_stage::host::euid() {
            cmd.uid(self.id.uid).gid(self.id.gid);
        }
        cmd
    }

    /// What runs the probe program on the host as the identity (for setup and for
    /// watches that must look as the identity, such as its keyring).
    pub fn host_probe(&self) -> HostProbe {
        HostProbe { cordon: self.cordon.clone(), id: self.id.clone(), home: self.home.clone(), ws: self.ws.clone() }
    }

    /// Makes `dir` a git repository with one commit (on the host, as the identity).
    ///
    /// The repository is made once per audit (by git, on the host) and copied for each
    /// job, owned by the identity: the same bytes, without running git hundreds of times.
    pub fn git_repo(&self, dir: &Path) -> Result<PathBuf, Skip> {
        let template = git_template(&self.root)?;
        self.dir(dir);
        self.copy_tree(&template, dir).map_err(|e| Skip(format!("copy the repository template: {e}")))?;
        Ok(dir.to_path_buf())
    }

    /// Copies the tree `from` into the existing directory `to`, everything owned by the
    /// identity (modes kept).
    fn copy_tree(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        for e in fs::read_dir(from)? {
            let e = e?;
            let dest = to.join(e.file_name());
            let ty = e.file_type()?;
            if ty.is_dir() {
                fs::create_dir(&dest)?;
                fs::set_permissions(&dest, fs::metadata(e.path())?.permissions())?;
                self.copy_tree(&e.path(), &dest)?;
            } else if ty.is_symlink() {
                std::os::unix::fs::symlink(fs::read_link(e.path())?, &dest)?;
            } else {
                fs::copy(e.path(), &dest)?;
            }
            self.own(&dest);
        }
        Ok(())
    }

    /// A `sleep` of the identity on the host, with a secret in its environment: it
    /// must survive the run untouched (alive, not stopped, not traced, same priority
    /// and limits). Killed when the watch is cleaned up.
    pub fn victim(&self) -> Result<Victim, Skip> {
        let secret = format!("victim-secret-{}", self.tag);
        let mut cmd = self.host_cmd("/bin/sleep");
        cmd.arg("30").env("VICTIM_SECRET", &secret).stdout(Stdio::null()).stderr(Stdio::null());
        let child = cmd.spawn().map_err(|e| Skip(format!("spawn a victim: {e}")))?;
        let pid = child.id() as i32;
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            let env = fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            if String::from_utf8_lossy(&env).contains(&secret) {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let before = victim_state(pid);
        Ok(Victim { pid, secret, child: Some(child), before })
    }

    /// A pseudo-terminal whose slave end is in raw mode and owned by the identity;
    /// anything pushed into its input can be read back.
    pub fn pty(&self) -> Result<Pty, Skip> {
        use nix::fcntl::OFlag;
        let m = nix::pty::posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC)
            .map_err(|e| Skip(format!("posix_openpt: {e}")))?;
        nix::pty::grantpt(&m).map_err(|e| Skip(format!("grantpt: {e}")))?;
        nix::pty::unlockpt(&m).map_err(|e| Skip(format!("unlockpt: {e}")))?;
        let name = nix::pty::ptsname_r(&m).map_err(|e| Skip(format!("ptsname: {e}")))?;
        let slave: OwnedFd = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags_noctty()
            .open(&name)
            .map_err(|e| Skip(format!("open {name}: {e}")))?
            .into();
        if let Ok(mut t) = nix::sys::termios::tcgetattr(slave.as_fd()) {
            nix::sys::termios::cfmakeraw(&mut t);
            let _ = nix::sys::termios::tcsetattr(slave.as_fd(), nix::sys::termios::SetArg::TCSANOW, &t);
        }
        self.own(Path::new(&name));
        Ok(Pty { master: m, slave, path: PathBuf::from(name) })
    }
}

trait NoCtty {
    fn custom_flags_noctty(&mut self) -> &mut Self;
}

impl NoCtty for fs::OpenOptions {
    fn custom_flags_noctty(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NONBLOCK)
    }
}

/// A victim's observable state: scheduling state, tracer, nice value, limits.
fn victim_state(pid: i32) -> Option<(String, String, String, String)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let tracer = status.lines().find(|l| l.starts_with("TracerPid:"))?.to_string();
    let limits = fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    Some((rest.first()?.to_string(), tracer, rest.get(16)?.to_string(), limits))
}

/// A process of the identity that must survive the run untouched.
pub struct Victim {
    /// Its pid (on the host).
    pub pid: i32,
    /// The secret in its environment.
    pub secret: String,
    child: Option<Child>,
    before: Option<(String, String, String, String)>,
}

impl Watch for Victim {
    fn effect(&mut self, _: &RunOutput) -> Option<String> {
        if let Some(c) = self.child.as_mut() {
            if let Ok(Some(st)) = c.try_wait() {
                return Some(format!("the victim process {} died ({st})", self.pid));
            }
        }
        let now = victim_state(self.pid);
        let (Some(b), Some(n)) = (&self.before, &now) else { return Some("the victim's /proc entry is gone".into()) };
        if !matches!(n.0.as_str(), "S" | "R" | "D") {
            return Some(format!("the victim is in state {} (stopped or traced)", n.0));
        }
        if b.1 != n.1 {
            return Some(format!("the victim is traced ({})", n.1));
        }
        if b.2 != n.2 {
            return Some(format!("the victim's nice value changed {} -> {}", b.2, n.2));
        }
        if b.3 != n.3 {
            return Some("the victim's resource limits changed".into());
        }
        None
    }
    fn cleanup(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Victim {
    /// Start address (hex) of the victim's first mapping.
    pub fn some_address(&self) -> String {
        let maps = fs::read_to_string(format!("/proc/{}/maps", self.pid)).unwrap_or_default();
        let first = maps.lines().next().unwrap_or("0-");
        format!("0x{}", first.split('-').next().unwrap_or("0"))
    }
}

/// A pseudo-terminal created by the audit: nothing may reach its input queue.
pub struct Pty {
    master: nix::pty::PtyMaster,
    /// The slave end (the terminal a command could be given).
    pub slave: OwnedFd,
    /// The slave's path.
    pub path: PathBuf,
}

impl Watch for Pty {
    fn effect(&mut self, _: &RunOutput) -> Option<String> {
        let _ = &self.master;
        let mut got = vec![];
        let mut buf = [0u8; 256];
        while let Ok(n) = nix::unistd::read(self.slave.as_fd(), &mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        (!got.is_empty()).then(|| format!("{} bytes were injected into the terminal's input", got.len()))
    }
}

/// Runs `cordon __probe OP ...` on the host as one identity.
#[derive(Clone)]
pub struct HostProbe {
    cordon: PathBuf,
    id: Identity,
    home: PathBuf,
    ws: PathBuf,
}

impl HostProbe {
    /// Runs `op args` and returns its report line.
    pub fn run(&self, op: &str, args: &[&str]) -> Option<super::exec::ProbeLine> {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(&self.cordon);
        cmd.arg(super::probe::SUBCOMMAND).arg(op).args(args);
        cmd.env_clear().env("PATH", super::PATH_ENV).env("HOME", &self.home).current_dir(&self.ws);
        cmd.stdin(Stdio::null()).stderr(Stdio::null());
        if self.id.uid != cordon_stage::host::euid() {
            cmd.uid(self.id.uid).gid(self.id.gid);
        }
        let out = cmd.output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines().rev().find_map(|l| serde_json::from_str(l).ok())
    }
}

/// The audit's repository template (`<audit dir>/git-template`: one commit of a
/// README), made by git once, on first use.
fn git_template(job_root: &Path) -> Result<PathBuf, Skip> {
    static TEMPLATE: std::sync::Mutex<Option<Result<PathBuf, String>>> = std::sync::Mutex::new(None);
    let mut t = TEMPLATE.lock().unwrap_or_else(|e| e.into_inner());
    let audit_dir = job_root.parent().unwrap_or(job_root);
    let dir = audit_dir.join("git-template");
    match t.as_ref() {
        Some(Ok(p)) if *p == dir => return Ok(p.clone()),
        Some(Err(e)) => return Err(Skip(e.clone())),
        _ => {}
    }
    let made = (|| {
        if which::which("git").is_err() {
            return Err("no git on this host".to_string());
        }
        fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        fs::write(dir.join("README"), "hello\n").map_err(|e| e.to_string())?;
        let out = Command::new("git")
            // No template: no sample hooks to copy for every job (an empty hooks/ is made).
            .args(["-c", "init.defaultBranch=main", "init", "-q", "--template=", "."])
            .current_dir(&dir)
            .env_clear()
            .env("PATH", super::PATH_ENV)
            .env("HOME", &dir)
            .output()
            .and_then(|_| {
                Command::new("/bin/sh")
                    .args(["-c", "git add README && git commit -q -m 'initial commit'"])
                    .current_dir(&dir)
                    .env_clear()
                    .env("PATH", super::PATH_ENV)
                    .env("HOME", &dir)
                    .env("GIT_AUTHOR_NAME", "cordon-audit")
                    .env("GIT_AUTHOR_EMAIL", "cordon-audit@example.invalid")
                    .env("GIT_COMMITTER_NAME", "cordon-audit")
                    .env("GIT_COMMITTER_EMAIL", "cordon-audit@example.invalid")
                    .output()
            })
            .map_err(|e| format!("run git: {e}"))?;
        if !out.status.success() {
            return Err(format!("git commit failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        fs::create_dir_all(dir.join(".git/hooks")).map_err(|e| e.to_string())?;
        Ok(dir.clone())
    })();
    *t = Some(made.clone());
    made.map_err(Skip)
}
