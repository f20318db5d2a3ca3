//! The seccomp supervisor: `sandbox.denied` is true only with an observation cordon
//! made itself (docs/denials.md).
//!
//! One thread per run ([`start`]) serves the run's seccomp user notifications:
//! 1. **Write-intent path syscalls** are judged by [`crate::writes::WriteJudge`]: a
//!    write the enforced policy refuses is refused here (with the kernel's errno) and
//!    recorded; everything else continues into the kernel.
//! 2. **Refused network and process syscalls** (`profiles/seccomp/observe.json`) are
//!    recorded with their target (the socket address is read from the task's memory)
//!    and answered with the profile's errno — `ENETUNREACH` for IP with the network
//!    off, as on a machine without a network. Name-service probes (`nscd`, systemd's
//!    userdb) are answered `ENOENT`, as if no daemon ran, and not reported.
//! 3. **Foreign-ABI syscalls** are refused with `ENOSYS` and recorded.
//!
//! Every answer is a refusal or a `CONTINUE` (or, for an allowed host unix socket, the
//! result of a connect the supervisor performed to the path its policy names), so
//! reading the task's memory — a time-of-check/time-of-use hazard for allow decisions —
//! can only affect the report, never let anything through. The command's stderr is
//! only used to link its own line to an entry ([`link_lines`]); it never creates one.

use crate::result::{Denial, DenialKind};
use crate::runner::seccomp::{Observed, ObservedKind};
use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// At most this many denials are kept per run (the rest are counted in the last one).
pub const MAX_DENIALS: usize = 64;

/// Name-service sockets that glibc and systemd probe on every user lookup; refusing
/// them is not worth reporting.
pub const NAME_SERVICE_PROBES: [&str; 3] = ["/var/run/nscd/socket", "/run/nscd/socket", "/run/systemd/userdb/"];

/// The longest target or evidence text a denial carries (characters): text the
/// command provoked is shown to approvers and models, and must not be able to push
/// cordon's own lines off a screen.
pub const MAX_DENIAL_TEXT: usize = 240;

/// Cut a denial's target and evidence to [`MAX_DENIAL_TEXT`] characters (marked `…`).
pub fn bound_text(d: &mut Denial) {
    fn cut(s: &mut String) {
        if let Some((i, _)) = s.char_indices().nth(MAX_DENIAL_TEXT) {
            s.truncate(i);
            s.push('…');
        }
    }
    cut(&mut d.evidence);
    if let Some(t) = d.target.as_mut() {
        cut(t);
    }
}

/// Where the supervisor records what it saw.
pub type DenialSink = Arc<Mutex<Vec<Denial>>>;

/// Record a denial (once per kind and target; at most [`MAX_DENIALS`]). Also used by
/// cordon's egress proxy (`crate::proxy`), whose refusals are denials of the same run.
pub(crate) fn record(sink: &DenialSink, d: Denial) {
    push(sink, d)
}

fn push(sink: &DenialSink, d: Denial) {
    let mut v = sink.lock().unwrap_or_else(|p| p.into_inner());
    if v.iter().any(|e| e.kind == d.kind && e.target == d.target) {
        return;
    }
    if v.len() < MAX_DENIALS {
        v.push(d);
    }
}

fn family_name(f: u64) -> String {
    match f as i32 {
        libc::AF_UNIX => "AF_UNIX".into(),
        libc::AF_INET => "AF_INET".into(),
        libc::AF_INET6 => "AF_INET6".into(),
        libc::AF_NETLINK => "AF_NETLINK".into(),
        libc::AF_PACKET => "AF_PACKET".into(),
        libc::AF_VSOCK => "AF_VSOCK".into(),
        other => format!("family {other}"),
    }
}

fn type_name(t: u64) -> String {
    match (t & 0xf) as i32 {
        libc::SOCK_STREAM => "SOCK_STREAM".into(),
        libc::SOCK_DGRAM => "SOCK_DGRAM".into(),
        libc::SOCK_RAW => "SOCK_RAW".into(),
        libc::SOCK_SEQPACKET => "SOCK_SEQPACKET".into(),
        other => format!("type {other}"),
    }
}

/// Read a `sockaddr` from the task's memory as raw bytes (at most 128).
fn read_raw_sockaddr(pid: u32, addr: u64, len: u64) -> Option<Vec<u8>> {
    if addr == 0 || len < 2 {
        return None;
    }
    let len = len.min(128) as usize;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut buf = vec![0u8; len];
    let n = mem.read_at(&mut buf, addr).ok()?;
    buf.truncate(n);
    (buf.len() >= 2).then_some(buf)
}

/// What the supervisor does with one `connect()` when some host unix sockets are
/// allowed by path.
enum ConnectPlan {
    /// Refuse with this errno (already recorded, or quiet).
    Refuse(i32),
    /// Perform it on the command's behalf with these `sockaddr` bytes.
    Perform(Vec<u8>),
}

/// A host unix socket the policy allows, pinned: an `O_PATH` fd opened without
/// following symlinks when the run starts. The supervisor connects through
/// `/proc/self/fd/N`, so a command that renames or replaces the path later (it may
/// sit in a directory the command can write) cannot redirect the connect.
#[derive(Debug)]
pub struct AllowedSocket {
    /// The canonical path the policy names (what the command must ask for).
    pub path: PathBuf,
    /// The pinned socket file.
    pub fd: OwnedFd,
}

impl AllowedSocket {
    /// Pin `path` (absolute, canonical).
    pub fn pin(path: &Path) -> std::io::Result<AllowedSocket> {
        Ok(AllowedSocket { path: path.to_path_buf(), fd: crate::pin::open_no_symlinks(path)? })
    }

    /// The path that reaches exactly the pinned file from this process.
    fn via_fd(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }
}

/// The `sockaddr_un` bytes for an allowed socket path (from the policy, never from
/// the command's memory).
fn sockaddr_un(path: &Path) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let p = path.as_os_str().as_bytes();
    // sun_path is 108 bytes including the terminating NUL.
    if p.len() >= 108 {
        return None;
    }
    let mut v = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    v.extend_from_slice(p);
    v.push(0);
    Some(v)
}

/// Decide one `connect()` under an allow-list of host unix sockets (`allowed`,
/// canonical): a pathname unix address that is exactly an allowed path is performed
/// to the policy's own path; any other unix address is refused and recorded; other
/// families are performed with the bytes read once when the network is on, and
/// refused as before when it is off.
fn plan_connect(
    n: &cordon_stage::notify::Notification,
    observed: &Observed,
    listener: &OwnedFd,
    allowed: &[AllowedSocket],
    proxy: Option<std::net::SocketAddr>,
    sink: &DenialSink,
) -> ConnectPlan {
    let raw = read_raw_sockaddr(n.pid, n.args[1], n.args[2]);
    // The read is only trusted if the task is still blocked in this syscall; the
    // bytes are used as read (a later change of the command's memory is not seen).
    let raw = if cordon_stage::notify::id_valid(listener.as_fd(), n.id) { raw } else { None };
    let Some(raw) = raw else { return ConnectPlan::Refuse(libc::EFAULT) };
    let family = i32::from(u16::from_ne_bytes([raw[0], raw[1]]));
    let network_on = observed.filter == crate::runner::seccomp::HOST_UNIX_ALLOW_FILTER;
    if family == libc::AF_UNIX {
        let rest = &raw[2..];
        if rest.first().is_some_and(|b| *b != 0) {
            let end = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
            use std::os::unix::ffi::OsStrExt;
            let asked = Path::new(std::ffi::OsStr::from_bytes(&rest[..end]));
            if let Some(ok) = allowed.iter().find(|a| a.path.as_path() == asked) {
                if let Some(addr) = sockaddr_un(&ok.via_fd()) {
                    return ConnectPlan::Perform(addr);
                }
            }
        }
        return ConnectPlan::Refuse(handle(n, observed, listener, sink));
    }
    if observed.filter == crate::runner::seccomp::PROXY_FILTER {
        if let Some(addr) = proxy.and_then(|p| proxy_sockaddr(&raw, p)) {
            return ConnectPlan::Perform(addr);
        }
        return ConnectPlan::Refuse(handle(n, observed, listener, sink));
    }
    if network_on {
        return ConnectPlan::Perform(raw);
    }
    ConnectPlan::Refuse(handle(n, observed, listener, sink))
}

/// The proxy's address as a `sockaddr` of the family the command asked in, when the
/// command asked for exactly the proxy (`127.0.0.1:port`, or `::ffff:127.0.0.1:port`
/// on an IPv6 socket); `None` for any other address. The bytes are built from the
/// policy's address: only the comparison reads what the command wrote.
fn proxy_sockaddr(raw: &[u8], proxy: std::net::SocketAddr) -> Option<Vec<u8>> {
    let std::net::SocketAddr::V4(p) = proxy else { return None };
    let family = i32::from(u16::from_ne_bytes([raw[0], raw[1]]));
    let port = p.port().to_be_bytes();
    match family {
        libc::AF_INET if raw.len() >= 8 => {
            let asked_port = [raw[2], raw[3]];
            let asked_ip = std::net::Ipv4Addr::new(raw[4], raw[5], raw[6], raw[7]);
            (asked_port == port && asked_ip == *p.ip()).then(|| {
                let mut a = vec![0u8; std::mem::size_of::<libc::sockaddr_in>()];
                a[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
                a[2..4].copy_from_slice(&port);
                a[4..8].copy_from_slice(&p.ip().octets());
                a
            })
        }
        libc::AF_INET6 if raw.len() >= 24 => {
            let asked_port = [raw[2], raw[3]];
            let mut ip = [0u8; 16];
            ip.copy_from_slice(&raw[8..24]);
            let asked_ip = std::net::Ipv6Addr::from(ip);
            let mapped = p.ip().to_ipv6_mapped();
            (asked_port == port && asked_ip == mapped).then(|| {
                let mut a = vec![0u8; std::mem::size_of::<libc::sockaddr_in6>()];
                a[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
                a[2..4].copy_from_slice(&port);
                a[8..24].copy_from_slice(&mapped.octets());
                a
            })
        }
        _ => None,
    }
}

/// Read a `sockaddr` from the task's memory and render it (`unix:/path`,
/// `unix:@abstract`, `inet:1.2.3.4:80`).
fn read_sockaddr(pid: u32, addr: u64, len: u64) -> Option<String> {
    if addr == 0 || len < 2 {
        return None;
    }
    let len = len.min(128) as usize;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut buf = vec![0u8; len];
    let n = mem.read_at(&mut buf, addr).ok()?;
    buf.truncate(n);
    if buf.len() < 2 {
        return None;
    }
    let family = u16::from_ne_bytes([buf[0], buf[1]]) as i32;
    let rest = &buf[2..];
    match family {
        libc::AF_UNIX => {
            if rest.first() == Some(&0) {
                let name = String::from_utf8_lossy(&rest[1..]).trim_end_matches('\0').to_string();
                Some(format!("unix:@{name}"))
            } else {
                let end = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
                Some(format!("unix:{}", String::from_utf8_lossy(&rest[..end])))
            }
        }
        libc::AF_INET if rest.len() >= 6 => {
            let port = u16::from_be_bytes([rest[0], rest[1]]);
            Some(format!("inet:{}.{}.{}.{}:{port}", rest[2], rest[3], rest[4], rest[5]))
        }
        libc::AF_INET6 if rest.len() >= 22 => {
            let port = u16::from_be_bytes([rest[0], rest[1]]);
            let mut a = [0u8; 16];
            a.copy_from_slice(&rest[6..22]);
            Some(format!("inet6:[{}]:{port}", std::net::Ipv6Addr::from(a)))
        }
        other => Some(family_name(other as u64)),
    }
}

fn is_name_service_probe(target: &str) -> bool {
    target.strip_prefix("unix:").is_some_and(|p| {
        NAME_SERVICE_PROBES.iter().any(|probe| p == *probe || (probe.ends_with('/') && p.starts_with(probe)))
    })
}

/// An errno as evidence text (`ENETUNREACH (errno 101)`).
fn errno_text(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::ENOSYS => "ENOSYS",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::EROFS => "EROFS",
        _ => return format!("errno {errno}"),
    };
    format!("{name} (errno {errno})")
}

/// Why a filter refuses, for the evidence text.
fn filter_reason(filter: &str) -> &'static str {
    match filter {
        crate::runner::seccomp::NETWORK_OFF_FILTER => "network off",
        crate::runner::seccomp::HOST_UNIX_FILTER => "network on, unix sockets to the host closed",
        crate::runner::seccomp::HOST_UNIX_ALLOW_FILTER => "network on, only the allowed unix sockets",
        crate::runner::seccomp::PROXY_FILTER => "network by name: only cordon's proxy",
        _ => "sandbox rule",
    }
}

/// Answer one notification: record it (unless it is a name-service probe) and refuse
/// the syscall. Returns the errno answered.
fn handle(n: &cordon_stage::notify::Notification, observed: &Observed, listener: &OwnedFd, sink: &DenialSink) -> i32 {
    let mut errno = observed.errno as i32;
    // With the network off, an IP socket or connection fails the way it does on a
    // machine without a network (ENETUNREACH): clients give up at once instead of
    // retrying a permission error (docs/denials.md).
    let offline = observed.filter == crate::runner::seccomp::NETWORK_OFF_FILTER;
    if offline && observed.name == "socket" && matches!(n.args[0] as i32, libc::AF_INET | libc::AF_INET6) {
        errno = libc::ENETUNREACH;
    }
    let why = filter_reason(observed.filter);
    match observed.name.as_str() {
        // With the network on, only unix sockets are refused, and glibc's name-service
        // probes (nscd, systemd-userdb) create one in every `ls -l`, `id` or DNS lookup:
        // reporting those would mark nearly every networked run as denied. The
        // refusal holds (EACCES), but it names no target that tells a daemon from a
        // probe, so it is not recorded (docs/denials.md).
        "socket" if observed.filter == crate::runner::seccomp::HOST_UNIX_FILTER => errno,
        "socket" => {
            push(
                sink,
                Denial {
                    kind: DenialKind::Network,
                    target: Some(format!("socket({}, {})", family_name(n.args[0]), type_name(n.args[1]))),
                    evidence: format!("seccomp supervisor: socket() refused with {} ({why})", errno_text(errno)),
                    line: None,
                },
            );
            errno
        }
        "connect" | "bind" => {
            let target = read_sockaddr(n.pid, n.args[1], n.args[2]);
            // The read is only trusted if the task is still blocked in this syscall.
            let target = if cordon_stage::notify::id_valid(listener.as_fd(), n.id) { target } else { None };
            if observed.name == "connect" && target.as_deref().is_some_and(is_name_service_probe) {
                return libc::ENOENT;
            }
            if offline && observed.name == "connect" && target.as_deref().is_some_and(|t| t.starts_with("inet")) {
                errno = libc::ENETUNREACH;
            }
            push(
                sink,
                Denial {
                    kind: DenialKind::Network,
                    target: Some(target.unwrap_or_else(|| "(address unreadable)".into())),
                    evidence: format!(
                        "seccomp supervisor: {}() refused with {} ({why})",
                        observed.name,
                        errno_text(errno)
                    ),
                    line: None,
                },
            );
            errno
        }
        name => {
            let kind = match observed.kind {
                ObservedKind::Network => DenialKind::Network,
                ObservedKind::Process | ObservedKind::Write => DenialKind::Process,
            };
            // What the host alone refuses a caller without privileges is not the
            // sandbox's refusal (escalation could not help): not recorded.
            if !caller_is_root() && host_refuses_unprivileged(name, &n.args) {
                return errno;
            }
            push(
                sink,
                Denial {
                    kind,
                    target: Some(format!("{name}()")),
                    evidence: format!("seccomp supervisor: {name}() refused with {}", errno_text(errno)),
                    line: None,
                },
            );
            errno
        }
    }
}

/// Whether cordon's caller is root (the host's privileges are the baseline a refusal
/// is measured against).
fn caller_is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Whether the host itself refuses syscall `name` with these arguments to a caller
/// without privileges: the mount API, `chroot`, `setns`, new namespaces other than a
/// user namespace (with one, the others are allowed), kernel loading, clocks, swap,
/// accounting, quotas; `bpf` and `perf_event_open` when the host's sysctls restrict
/// them.
fn host_refuses_unprivileged(name: &str, args: &[u64; 6]) -> bool {
    let sysctl = |p: &str| std::fs::read_to_string(p).ok().and_then(|v| v.trim().parse::<i64>().ok());
    match name {
        "unshare" | "clone" => {
            let flags = args[0];
            let ns = (libc::CLONE_NEWNS
                | libc::CLONE_NEWUTS
                | libc::CLONE_NEWIPC
                | libc::CLONE_NEWPID
                | libc::CLONE_NEWNET
                | libc::CLONE_NEWCGROUP) as u64;
            flags & libc::CLONE_NEWUSER as u64 == 0 && flags & ns != 0
        }
        "mount" | "umount2" | "pivot_root" | "chroot" | "move_mount" | "open_tree" | "fsopen" | "fsconfig"
        | "fsmount" | "fspick" | "mount_setattr" | "setns" | "kexec_load" | "kexec_file_load" | "init_module"
        | "finit_module" | "delete_module" | "reboot" | "swapon" | "swapoff" | "acct" | "settimeofday"
        | "clock_settime" | "clock_adjtime" | "quotactl" | "vhangup" | "open_by_handle_at" => true,
        "bpf" => sysctl("/proc/sys/kernel/unprivileged_bpf_disabled").unwrap_or(1) != 0,
        "perf_event_open" => sysctl("/proc/sys/kernel/perf_event_paranoid").unwrap_or(3) > 2,
        _ => false,
    }
}

/// Where the supervisor gets its listener from.
pub enum ListenerSource {
    /// The landlock runner's stage sent it before `spawn` returned.
    Listener(OwnedFd),
    /// The bwrap runner's stage helper sends it on this socket once bubblewrap has
    /// built the sandbox (or closes the socket without one: the helper failed before
    /// its seccomp step).
    Socket(OwnedFd),
}

/// A running supervisor: one thread per run, blocked in `poll` on the listener.
pub struct Supervisor {
    stop: Option<OwnedFd>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Supervisor {
    /// Stop (once the command's processes are gone every notification was answered)
    /// and wait for the thread.
    pub fn finish(mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        // Dropping the stop pipe's write end wakes the thread, which then returns;
        // dropping the listener makes pending observed syscalls fail with ENOSYS.
        self.stop.take();
    }
}

/// What a supervisor needs for one run.
pub struct Supervision {
    /// Syscall number → what its notification means.
    pub observed: BTreeMap<i64, Observed>,
    /// Where denials are recorded.
    pub sink: DenialSink,
    /// Host unix sockets the policy allows by path.
    pub allowed: Arc<[AllowedSocket]>,
    /// The judge of write-intent syscalls (when the run observes writes).
    pub writes: Option<crate::writes::WriteJudge>,
    /// cordon's egress proxy for this run (`--allow-host`): under the proxy filter,
    /// a `connect()` to exactly this address is performed by the supervisor, to this
    /// address (from the policy, not from the command's memory); every other IP
    /// `connect()` is refused and recorded.
    pub proxy: Option<std::net::SocketAddr>,
}

/// Start supervising: a thread that serves seccomp notifications until the sandbox
/// is gone or [`Supervisor::finish`] is called. Unknown syscall numbers are refused
/// with `EPERM`; foreign-ABI syscalls with `ENOSYS` (recorded). With `allowed` host
/// unix sockets, `connect()` calls are decided by `plan_connect`: an allowed one is
/// performed by the supervisor itself on the command's socket (on its own thread, so
/// other notifications keep being answered) and answered with its result.
pub fn start(source: ListenerSource, s: Supervision) -> std::io::Result<Supervisor> {
    let (stop_r, stop_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(std::io::Error::from)?;
    let thread = std::thread::Builder::new().name("cordon-supervisor".into()).spawn(move || {
        let listener = match source {
            ListenerSource::Listener(l) => l,
            ListenerSource::Socket(sock) => match wait_for_listener(&sock, &stop_r) {
                Some(l) => l,
                None => return,
            },
        };
        // Cheaper wake-ups (Linux 6.6); without it, only slower.
        let _ = cordon_stage::notify::set_sync_wakeup(listener.as_fd());
        serve(listener, &stop_r, s);
    })?;
    Ok(Supervisor { stop: Some(stop_w), thread: Some(thread) })
}

/// Block until `fd` or `stop` is ready; `Some(true)`: `fd` has input.
fn wait(fd: &OwnedFd, stop: &OwnedFd) -> Option<bool> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    loop {
        let mut p = [PollFd::new(fd.as_fd(), PollFlags::POLLIN), PollFd::new(stop.as_fd(), PollFlags::POLLIN)];
        match poll(&mut p, PollTimeout::NONE) {
            Ok(_) => {
                let r = p[0].revents().unwrap_or(PollFlags::empty());
                if r.contains(PollFlags::POLLIN) {
                    return Some(true);
                }
                if r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL) {
                    return None;
                }
                if !p[1].revents().unwrap_or(PollFlags::empty()).is_empty() {
                    return None;
                }
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return None,
        }
    }
}

fn wait_for_listener(sock: &OwnedFd, stop: &OwnedFd) -> Option<OwnedFd> {
    loop {
        wait(sock, stop)?;
        match cordon_stage::notify::recv_fd(sock.as_fd()) {
            Ok(l) => return Some(l),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return None,
        }
    }
}

/// The native `AUDIT_ARCH_*` (notifications of other architectures are foreign).
fn native_arch() -> u32 {
    match std::env::consts::ARCH {
        "x86_64" => 0xC000_003E,
        "aarch64" => 0xC000_00B7,
        "riscv64" => 0xC000_00F3,
        _ => 0,
    }
}

fn serve(listener: OwnedFd, stop: &OwnedFd, mut s: Supervision) {
    let native = native_arch();
    while wait(&listener, stop).is_some() {
        let n = match cordon_stage::notify::recv(listener.as_fd()) {
            Ok(n) => n,
            // The task went away between poll and receive.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::ENOENT)) => continue,
            Err(_) => return,
        };
        let l = listener.as_fd();
        let foreign = n.arch != native || (cfg!(target_arch = "x86_64") && (n.nr as u32) & 0x4000_0000 != 0);
        if foreign {
            push(
                &s.sink,
                Denial {
                    kind: DenialKind::Other,
                    target: Some(format!("syscall {} of foreign ABI 0x{:08x}", n.nr, n.arch)),
                    evidence: "seccomp supervisor: a syscall through a foreign entry point (e.g. 32-bit int 0x80) refused with ENOSYS".into(),
                    line: None,
                },
            );
            let _ = cordon_stage::notify::respond_error(l, n.id, libc::ENOSYS);
            continue;
        }
        let Some(o) = s.observed.get(&(n.nr as i64)) else {
            let _ = cordon_stage::notify::respond_error(l, n.id, libc::EPERM);
            continue;
        };
        if o.kind == ObservedKind::Write {
            let answer = match s.writes.as_mut() {
                Some(judge) => {
                    let sink = s.sink.clone();
                    judge.judge(&o.name, n.pid, n.args, || cordon_stage::notify::id_valid(l, n.id), &mut |d| {
                        push(&sink, d)
                    })
                }
                None => crate::writes::Answer::Continue,
            };
            let _ = match answer {
                crate::writes::Answer::Continue => cordon_stage::notify::respond_continue(l, n.id),
                crate::writes::Answer::Refuse(errno) => cordon_stage::notify::respond_error(l, n.id, errno),
            };
            continue;
        }
        let allow_list = o.name == "connect"
            && (o.filter == crate::runner::seccomp::HOST_UNIX_ALLOW_FILTER
                || o.filter == crate::runner::seccomp::PROXY_FILTER
                || !s.allowed.is_empty());
        let errno = if allow_list {
            match plan_connect(&n, o, &listener, &s.allowed, s.proxy, &s.sink) {
                ConnectPlan::Refuse(errno) => errno,
                ConnectPlan::Perform(addr) => {
                    // Answered from its own thread once the connect is done.
                    if let Ok(answer) = listener.try_clone() {
                        let spawned = std::thread::Builder::new().name("cordon-connect".into()).spawn(move || {
                            let waiting = || cordon_stage::notify::id_valid(answer.as_fd(), n.id);
                            let r = cordon_stage::notify::connect_on_behalf(n.pid, n.args[0], &addr, waiting);
                            let _ = match r {
                                Ok(()) => cordon_stage::notify::respond_value(answer.as_fd(), n.id, 0),
                                Err(e) => cordon_stage::notify::respond_error(
                                    answer.as_fd(),
                                    n.id,
                                    e.raw_os_error().unwrap_or(libc::EIO),
                                ),
                            };
                        });
                        if spawned.is_ok() {
                            continue;
                        }
                    }
                    libc::EAGAIN
                }
            }
        } else {
            handle(&n, o, &listener, &s.sink)
        };
        let _ = cordon_stage::notify::respond_error(l, n.id, errno);
    }
}

/// Link each denial to the command's own diagnostic line about it, when its stderr
/// has one: a line naming the refused path (as given or relative to the working
/// directory) for a file write; a line about the network for a network denial. The
/// text never creates, removes or changes a denial: a command may print anything.
pub fn link_lines(denials: &mut [Denial], stderr: &str, workdir: &Path) {
    const NETWORK_WORDS: [&str; 6] =
        ["resolve", "unreachable", "connect", "Network", "network", "Name or service not known"];
    for d in denials.iter_mut() {
        let line = match (d.kind, d.target.as_deref()) {
            (DenialKind::FileWrite, Some(target)) => {
                let path = Path::new(target);
                let rel = path.strip_prefix(workdir).ok().map(|r| r.display().to_string());
                // The path as the command gave it (`... asked as `link/b``).
                let asked = d.evidence.rsplit_once("asked as `").and_then(|(_, a)| a.strip_suffix('`'));
                stderr
                    .lines()
                    .find(|l| [Some(target), rel.as_deref(), asked].into_iter().flatten().any(|r| names_path(l, r)))
            }
            (DenialKind::Network, _) => stderr.lines().find(|l| NETWORK_WORDS.iter().any(|w| l.contains(w))),
            _ => None,
        };
        if let Some(l) = line {
            let mut l = l.trim().to_string();
            if let Some((i, _)) = l.char_indices().nth(MAX_DENIAL_TEXT) {
                l.truncate(i);
                l.push('…');
            }
            d.line = Some(l);
        }
    }
}

/// Whether `line` names `path` as a whole word (not as part of a longer name).
fn names_path(line: &str, path: &str) -> bool {
    if path.is_empty() {
        return false;
    }
    let bounded = |c: Option<char>| c.is_none_or(|c| c.is_whitespace() || "'\"`‘’:,()[]".contains(c));
    line.match_indices(path)
        .any(|(i, _)| bounded(line[..i].chars().next_back()) && bounded(line[i + path.len()..].chars().next()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial(kind: DenialKind, target: &str) -> Denial {
        Denial { kind, target: Some(target.into()), evidence: "seccomp supervisor".into(), line: None }
    }

    #[test]
    fn only_the_proxy_address_is_performed_and_from_the_policy() {
        let proxy: std::net::SocketAddr = "127.0.0.1:4321".parse().unwrap();
        let v4 = |ip: [u8; 4], port: u16| {
            let mut a = vec![0u8; 16];
            a[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
            a[2..4].copy_from_slice(&port.to_be_bytes());
            a[4..8].copy_from_slice(&ip);
            a
        };
        let asked = v4([127, 0, 0, 1], 4321);
        assert_eq!(proxy_sockaddr(&asked, proxy), Some(asked.clone()));
        // Trailing bytes the command wrote are not passed on.
        let mut noisy = asked.clone();
        noisy[8..].fill(0xaa);
        assert_eq!(proxy_sockaddr(&noisy, proxy), Some(asked));
        for other in [v4([127, 0, 0, 1], 4322), v4([127, 0, 0, 2], 4321), v4([10, 0, 0, 1], 4321), v4([0; 4], 4321)] {
            assert_eq!(proxy_sockaddr(&other, proxy), None);
        }
        let v6 = |ip: std::net::Ipv6Addr, port: u16| {
            let mut a = vec![0u8; 28];
            a[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
            a[2..4].copy_from_slice(&port.to_be_bytes());
            a[8..24].copy_from_slice(&ip.octets());
            a
        };
        let mapped = std::net::Ipv4Addr::LOCALHOST.to_ipv6_mapped();
        assert_eq!(proxy_sockaddr(&v6(mapped, 4321), proxy), Some(v6(mapped, 4321)));
        assert_eq!(proxy_sockaddr(&v6(std::net::Ipv6Addr::LOCALHOST, 4321), proxy), None);
        let mut unix = vec![0u8; 16];
        unix[..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
        assert_eq!(proxy_sockaddr(&unix, proxy), None);
    }

    #[test]
    fn lines_are_linked_but_never_create_denials() {
        let mut none: Vec<Denial> = Vec::new();
        link_lines(&mut none, "bash: /etc/passwd: Read-only file system", Path::new("/w"));
        assert!(none.is_empty());
        let mut d = vec![denial(DenialKind::FileWrite, "/w/.git/index.lock"), denial(DenialKind::Network, "socket()")];
        link_lines(
            &mut d,
            "fatal: Unable to create '.git/index.lock': Read-only file system\ncurl: (6) Could not resolve host: x",
            Path::new("/w"),
        );
        assert!(d[0].line.as_deref().unwrap().contains("index.lock"));
        assert!(d[1].line.as_deref().unwrap().contains("resolve host"));
    }

    #[test]
    fn paths_are_named_as_whole_words() {
        assert!(names_path("sh: 1: cannot create l/z: Read-only file system", "l/z"));
        assert!(names_path("touch: cannot touch '/x/y': Permission denied", "/x/y"));
        assert!(!names_path("sh: 1: cannot create /var/tmp/out/a: Read-only", "out"));
        assert!(!names_path("/x/yz: denied", "/x/y"));
    }

    #[test]
    fn name_service_probes_are_recognized() {
        assert!(is_name_service_probe("unix:/var/run/nscd/socket"));
        assert!(is_name_service_probe("unix:/run/systemd/userdb/io.systemd.Multiplexer"));
        assert!(!is_name_service_probe("unix:/var/run/docker.sock"));
    }
}
