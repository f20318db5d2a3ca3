//! Denial classification: `sandbox.denied` is true only with evidence.
//!
//! Evidence, strongest first:
//! 1. **The kernel, through a seccomp supervisor** ([`supervise`]): refused syscalls
//!    the `observe` profile lists (`socket`, `connect`, `bind`, `ptrace`,
//!    `process_vm_*`) notify cordon instead of failing in the kernel; cordon records
//!    the syscall, reads its target (the socket address) and answers with the
//!    profile's errno. The answer is always a refusal, so reading the target's memory
//!    (a time-of-check/time-of-use hazard for allow decisions) only affects the report.
//!    Name-service probes (`nscd`, systemd's userdb) are answered `ENOENT` — as if no
//!    daemon ran — and not reported: every `ls -l` makes them.
//! 2. **SIGSYS**: the seccomp filter kills foreign-ABI syscalls.
//! 3. **Diagnostics checked against the policy** ([`classify_diagnostics`]): a stderr
//!    line ending in "Read-only file system", "Permission denied" or "Operation not
//!    permitted" that names a path counts only if (a) the policy forbids writing that
//!    path (outside the writable roots, or inside a protected path) and (b) the host
//!    itself would allow the write (not a read-only mount, and the caller's uid may
//!    write there): so a command printing "Permission denied" itself about a path it
//!    may write, a host permission error, `ENOENT`, a missing program or a timeout
//!    are never denials.
//!
//! What it does not do: it cannot see a refused write that the command neither
//! reports nor fails on (the kernel's Landlock audit records need privileges to read);
//! and it reads only the captured stderr tail.

use crate::policy::ExecutionPolicy;
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

/// Error messages (C locale) that may mark a refused write.
const REFUSAL_MESSAGES: [(&str, i32); 6] = [
    ("Read-only file system", libc::EROFS),
    // Node.js and libuv: "EROFS: read-only file system, open '/x'".
    ("EROFS: read-only file system", libc::EROFS),
    ("Permission denied", libc::EACCES),
    ("EACCES: permission denied", libc::EACCES),
    ("Operation not permitted", libc::EPERM),
    ("EPERM: operation not permitted", libc::EPERM),
];

/// Shell prefixes whose redirection errors name a bare file (`bash: line 1: out: ...`).
const SHELL_PREFIXES: [&str; 6] = ["bash:", "sh:", "dash:", "zsh:", "/bin/bash:", "/bin/sh:"];

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
    if network_on {
        return ConnectPlan::Perform(raw);
    }
    ConnectPlan::Refuse(handle(n, observed, listener, sink))
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

/// Why a filter refuses, for the evidence text.
fn filter_reason(filter: &str) -> &'static str {
    match filter {
        crate::runner::seccomp::NETWORK_OFF_FILTER => "network off",
        crate::runner::seccomp::HOST_UNIX_FILTER => "network on, unix sockets to the host closed",
        crate::runner::seccomp::HOST_UNIX_ALLOW_FILTER => "network on, only the allowed unix sockets",
        _ => "sandbox rule",
    }
}

/// Answer one notification: record it (unless it is a name-service probe) and refuse
/// the syscall. Returns the errno answered.
fn handle(n: &cordon_stage::notify::Notification, observed: &Observed, listener: &OwnedFd, sink: &DenialSink) -> i32 {
    let errno = observed.errno as i32;
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
                    evidence: format!("seccomp supervisor: socket() refused with errno {errno} ({why})"),
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
            push(
                sink,
                Denial {
                    kind: DenialKind::Network,
                    target: Some(target.unwrap_or_else(|| "(address unreadable)".into())),
                    evidence: format!("seccomp supervisor: {}() refused with errno {errno} ({why})", observed.name),
                },
            );
            errno
        }
        name => {
            let kind = match observed.kind {
                ObservedKind::Network => DenialKind::Network,
                ObservedKind::Process => DenialKind::Process,
            };
            push(
                sink,
                Denial {
                    kind,
                    target: Some(format!("{name}()")),
                    evidence: format!("seccomp supervisor: {name}() refused with errno {errno}"),
                },
            );
            errno
        }
    }
}

/// Wait for a seccomp listener on `sock` (sent by the bwrap runner's stage helper
/// once bubblewrap has built the sandbox), then [`supervise`] it. Returns when the
/// socket closes without one (the helper failed before its seccomp step). Dropping
/// the socket releases a listener still in flight, so the command's observed calls
/// then fail with `ENOSYS` instead of waiting.
pub async fn receive_and_supervise(
    sock: OwnedFd,
    observed: BTreeMap<i64, Observed>,
    sink: DenialSink,
    allowed: Arc<[AllowedSocket]>,
) {
    #[allow(deprecated)]
    let Ok(fd) = tokio::io::unix::AsyncFd::new(sock) else {
        return;
    };
    loop {
        let Ok(mut guard) = fd.readable().await else { return };
        match cordon_stage::notify::recv_fd(fd.get_ref().as_fd()) {
            Ok(listener) => return supervise(listener, observed, sink, allowed).await,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => guard.clear_ready(),
            Err(_) => return,
        }
    }
}

/// Serve seccomp notifications from `listener` until the sandbox is gone (or the task
/// is aborted). Unknown syscall numbers are refused with `EPERM`. With `allowed`
/// host unix sockets, `connect()` calls are decided by `plan_connect`: an allowed
/// one is performed by the supervisor itself on the command's socket (on a blocking
/// thread, so other notifications keep being answered) and answered with its result.
pub async fn supervise(
    listener: OwnedFd,
    observed: BTreeMap<i64, Observed>,
    sink: DenialSink,
    allowed: Arc<[AllowedSocket]>,
) {
    // `AsyncFd::new` is deprecated because a bare RawFd could be closed under it; an
    // OwnedFd that the AsyncFd owns cannot.
    #[allow(deprecated)]
    let Ok(fd) = tokio::io::unix::AsyncFd::new(listener) else {
        return;
    };
    loop {
        let Ok(mut guard) = fd.readable().await else { return };
        // NOTIF_RECV blocks (it ignores O_NONBLOCK), and epoll readiness can be stale:
        // receive only what a zero-timeout poll says is pending.
        match pending(&fd) {
            Pending::Notification => {}
            Pending::Nothing => {
                guard.clear_ready();
                continue;
            }
            Pending::Gone => return,
        }
        match cordon_stage::notify::recv(fd.get_ref().as_fd()) {
            Ok(n) => {
                let o = observed.get(&(n.nr as i64));
                let allow_list = o.is_some_and(|o| {
                    o.name == "connect"
                        && (o.filter == crate::runner::seccomp::HOST_UNIX_ALLOW_FILTER || !allowed.is_empty())
                });
                let errno = match o {
                    Some(o) if allow_list => match plan_connect(&n, o, fd.get_ref(), &allowed, &sink) {
                        ConnectPlan::Refuse(errno) => errno,
                        ConnectPlan::Perform(addr) => {
                            // Answered from the blocking thread once the connect is done.
                            if let Ok(answer) = fd.get_ref().try_clone() {
                                tokio::task::spawn_blocking(move || {
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
                                tokio::task::yield_now().await;
                                continue;
                            }
                            libc::EAGAIN
                        }
                    },
                    Some(o) => handle(&n, o, fd.get_ref(), &sink),
                    None => libc::EPERM,
                };
                let _ = cordon_stage::notify::respond_error(fd.get_ref().as_fd(), n.id, errno);
                // A command can keep notifications pending forever (a flood of refused
                // calls); readiness waits do not count against tokio's budget, so yield
                // or the deadline, the exit watcher and signal handling would starve.
                tokio::task::yield_now().await;
            }
            // The task went away between poll and receive.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::ENOENT)) => {}
            Err(_) => return,
        }
    }
}

enum Pending {
    Notification,
    Nothing,
    Gone,
}

/// What a zero-timeout poll says about the listener.
fn pending(fd: &tokio::io::unix::AsyncFd<OwnedFd>) -> Pending {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut p = [PollFd::new(fd.get_ref().as_fd(), PollFlags::POLLIN)];
    match poll(&mut p, PollTimeout::ZERO) {
        Ok(0) => Pending::Nothing,
        Ok(_) => {
            let r = p[0].revents().unwrap_or(PollFlags::empty());
            if r.contains(PollFlags::POLLIN) {
                Pending::Notification
            } else if r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL) {
                Pending::Gone
            } else {
                Pending::Nothing
            }
        }
        Err(nix::errno::Errno::EINTR) => Pending::Nothing,
        Err(_) => Pending::Gone,
    }
}

/// Whether the policy lets the command write `path` (inside the sandbox's view).
fn policy_allows_write(policy: &ExecutionPolicy, path: &Path) -> bool {
    if policy.protected.iter().any(|p| path.starts_with(p)) {
        return false;
    }
    if policy.writable().iter().any(|w| path.starts_with(w)) {
        return true;
    }
    if path.starts_with(&policy.workspace) {
        // A read-only workspace, even one that lives under /tmp.
        return false;
    }
    // The private tmpfs mounts are writable in every confined mode.
    path.starts_with("/tmp") || path.starts_with("/dev/shm")
}

/// Whether the host itself would allow the caller to write `path` (no sandbox):
/// the nearest existing ancestor (or the path) is on a writable mount and writable
/// by the caller's uid.
fn host_allows_write(path: &Path) -> bool {
    let mut cur = Some(path);
    while let Some(p) = cur {
        if p.symlink_metadata().is_ok() {
            // The path itself when it exists, else the directory it would be made in.
            if let Ok(st) = nix::sys::statvfs::statvfs(p) {
                if st.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY) {
                    return false;
                }
            }
            return nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok();
        }
        cur = p.parent();
    }
    false
}

/// Candidate paths in one diagnostic line that ends with a refusal message.
fn candidate_paths(line: &str, message: &str) -> Vec<String> {
    let mut out = Vec::new();
    // Quoted paths: 'x', "x", ‘x’, `x'.
    for (open, close) in [('\'', '\''), ('"', '"'), ('‘', '’'), ('`', '\'')] {
        let mut rest = line;
        while let Some(i) = rest.find(open) {
            let after = &rest[i + open.len_utf8()..];
            let Some(j) = after.find(close) else { break };
            let q = &after[..j];
            // A quoted operand is a path even without a slash (`touch 'new'`).
            if !q.is_empty() && (q.contains('/') || !q.contains(char::is_whitespace)) {
                out.push(q.to_string());
            }
            rest = &after[j + close.len_utf8()..];
        }
    }
    // "prefix: PATH: message" and "... PATH: message".
    if let Some(head) = line.find(message).map(|i| line[..i].trim_end()) {
        if let Some(head) = head.strip_suffix(':') {
            let seg = head.rsplit(": ").next().unwrap_or(head).trim();
            let last = seg.rsplit(' ').next().unwrap_or(seg).trim_matches(|c| c == '\'' || c == '"');
            let from_shell = SHELL_PREFIXES.iter().any(|p| line.starts_with(p)) && !seg.contains(' ');
            if !last.is_empty() && (last.contains('/') || last.starts_with('.') || from_shell) {
                out.push(last.to_string());
            }
        }
    }
    out
}

/// Denials evidenced by diagnostic lines (see the module docs for the rules).
///
/// `mount_layer`: the run had read-only mounts. Then every refused write outside the
/// writable roots surfaces as `EROFS` (the mount check precedes Landlock's), so
/// "Permission denied" / "Operation not permitted" lines count only for device files
/// (which read-only mounts do not cover); a command printing those words itself is
/// not mistaken for the sandbox.
pub fn classify_diagnostics(stderr: &str, policy: &ExecutionPolicy, workdir: &Path, mount_layer: bool) -> Vec<Denial> {
    let mut out: Vec<Denial> = Vec::new();
    if !policy.mode.is_confined() {
        return out;
    }
    for line in stderr.lines() {
        let Some((message, errno)) = REFUSAL_MESSAGES.iter().find(|(m, _)| line.contains(m)) else { continue };
        for cand in candidate_paths(line, message) {
            let path = crate::policy::lexical_normalize(workdir, Path::new(&cand));
            if mount_layer && *errno != libc::EROFS && !path.starts_with("/dev") {
                continue;
            }
            if policy_allows_write(policy, &path) || !host_allows_write(&path) {
                continue;
            }
            let target = Some(path.display().to_string());
            if out.iter().any(|d| d.target == target) {
                continue;
            }
            let why = if policy.protected.iter().any(|p| path.starts_with(p)) {
                "a protected path"
            } else {
                "outside the writable roots"
            };
            out.push(Denial {
                kind: DenialKind::FileWrite,
                target,
                evidence: format!(
                    "stderr `{}` (errno {errno}); the path is {why} and the host alone would allow the write",
                    line.trim()
                ),
            });
            break;
        }
        if out.len() >= MAX_DENIALS {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::Mode;

    fn policy(mode: Mode, ws: &Path) -> ExecutionPolicy {
        ExecutionPolicy {
            mode,
            workspace: ws.to_path_buf(),
            writable_roots: vec![],
            protected: vec![ws.join(".git")],
            network: false,
            best_effort: false,
            allow_unix_sockets: Vec::new(),
        }
    }

    #[test]
    fn extracts_paths_from_common_tools() {
        let cases = [
            ("bash: line 1: /etc/evil: Read-only file system", "Read-only file system", "/etc/evil"),
            ("touch: cannot touch '/etc/x': Read-only file system", "Read-only file system", "/etc/x"),
            ("OSError: [Errno 30] Read-only file system: '/usr/x'", "Read-only file system", "/usr/x"),
            (
                "fatal: Unable to create '/w/.git/index.lock': Read-only file system",
                "Read-only file system",
                "/w/.git/index.lock",
            ),
            (
                "error: could not lock config file .git/config: Read-only file system",
                "Read-only file system",
                ".git/config",
            ),
            ("mkdir: cannot create directory ‘/opt/x’: Permission denied", "Permission denied", "/opt/x"),
            ("bash: line 1: new-file: Read-only file system", "Read-only file system", "new-file"),
            ("Error: EROFS: read-only file system, open '/x/node'", "EROFS: read-only file system", "/x/node"),
        ];
        for (line, msg, want) in cases {
            assert!(candidate_paths(line, msg).iter().any(|c| c == want), "{line}: {:?}", candidate_paths(line, msg));
        }
    }

    #[test]
    fn writes_inside_the_workspace_or_tmp_are_not_denials() {
        let ws = tempfile::tempdir().unwrap();
        let p = policy(Mode::WorkspaceWrite, ws.path());
        let line = format!("bash: {}/x: Permission denied\n/tmp/y: Read-only file system", ws.path().display());
        assert!(classify_diagnostics(&line, &p, ws.path(), true).is_empty());
    }

    #[test]
    fn a_write_outside_that_the_host_allows_is_a_denial() {
        let ws = tempfile::tempdir().unwrap();
        // Not under /tmp: inside the sandbox /tmp is a private, writable tmpfs.
        let outside = tempfile::tempdir_in("/var/tmp").unwrap();
        let p = policy(Mode::WorkspaceWrite, ws.path());
        let line = format!("bash: line 1: {}/x: Read-only file system", outside.path().display());
        let d = classify_diagnostics(&line, &p, ws.path(), true);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].kind, DenialKind::FileWrite);
    }

    #[test]
    fn protected_paths_are_denials_and_read_only_mode_covers_the_workspace() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join(".git")).unwrap();
        let p = policy(Mode::WorkspaceWrite, ws.path());
        let d = classify_diagnostics("bash: .git/config: Read-only file system", &p, ws.path(), true);
        assert_eq!(d.len(), 1);
        let ro = policy(Mode::ReadOnly, ws.path());
        let d = classify_diagnostics("touch: cannot touch 'new': Read-only file system", &ro, ws.path(), true);
        assert_eq!(d.len(), 1, "{d:?}");
    }

    #[test]
    fn writes_to_the_private_tmp_are_not_denials() {
        let ws = tempfile::tempdir_in("/var/tmp").unwrap();
        let p = policy(Mode::ReadOnly, ws.path());
        assert!(classify_diagnostics("bash: /tmp/x: Read-only file system", &p, ws.path(), true).is_empty());
    }

    #[test]
    fn ordinary_errors_are_not_denials() {
        let ws = tempfile::tempdir().unwrap();
        let p = policy(Mode::WorkspaceWrite, ws.path());
        for line in [
            "cat: /nonexistent: No such file or directory",
            "grep: x: Is a directory",
            "Permission denied",
            "bash: foo: command not found",
        ] {
            assert!(classify_diagnostics(line, &p, ws.path(), true).is_empty(), "{line}");
        }
        let full = policy(Mode::FullAccess, ws.path());
        assert!(classify_diagnostics("bash: /etc/x: Permission denied", &full, ws.path(), true).is_empty());
        // With read-only mounts, refusals are EROFS: printed "Permission denied" is not one.
        let outside = tempfile::tempdir_in("/var/tmp").unwrap();
        let fake = format!("{}/x: Permission denied", outside.path().display());
        assert!(classify_diagnostics(&fake, &p, ws.path(), true).is_empty());
        assert_eq!(classify_diagnostics(&fake, &p, ws.path(), false).len(), 1);
    }

    #[test]
    fn name_service_probes_are_recognized() {
        assert!(is_name_service_probe("unix:/var/run/nscd/socket"));
        assert!(is_name_service_probe("unix:/run/systemd/userdb/io.systemd.Multiplexer"));
        assert!(!is_name_service_probe("unix:/var/run/docker.sock"));
    }
}
