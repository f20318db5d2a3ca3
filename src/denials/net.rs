//! Refused network and process syscalls: reading the socket address, the allowed host
//! unix sockets (performed by the supervisor itself), and the record of each refusal.

use super::record::{push, DenialSink};
use crate::result::{Denial, DenialKind};
use crate::runner::seccomp::{Observed, ObservedKind};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Name-service sockets that glibc and systemd probe on every user lookup; refusing
/// them is not worth reporting.
pub const NAME_SERVICE_PROBES: [&str; 3] = ["/var/run/nscd/socket", "/run/nscd/socket", "/run/systemd/userdb/"];

pub(super) fn family_name(f: u64) -> String {
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

pub(super) fn type_name(t: u64) -> String {
    match (t & 0xf) as i32 {
        libc::SOCK_STREAM => "SOCK_STREAM".into(),
        libc::SOCK_DGRAM => "SOCK_DGRAM".into(),
        libc::SOCK_RAW => "SOCK_RAW".into(),
        libc::SOCK_SEQPACKET => "SOCK_SEQPACKET".into(),
        other => format!("type {other}"),
    }
}

/// Read a `sockaddr` from the task's memory as raw bytes (at most 128).
pub(super) fn read_raw_sockaddr(pid: u32, addr: u64, len: u64) -> Option<Vec<u8>> {
    if addr == 0 || len < 2 {
        return None;
    }
    let len = len.min(128) as usize;
    let mut buf = vec![0u8; len];
    let n = crate::tracee::read_task_memory(pid, addr, &mut buf)?;
    buf.truncate(n);
    (buf.len() >= 2).then_some(buf)
}

/// What the supervisor does with one `connect()` when some host unix sockets are
/// allowed by path.
pub(super) enum ConnectPlan {
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
    pub(super) fn via_fd(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }
}

/// The `sockaddr_un` bytes for an allowed socket path (from the policy, never from
/// the command's memory).
pub(super) fn sockaddr_un(path: &Path) -> Option<Vec<u8>> {
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
pub(super) fn plan_connect(
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
    // Only IP is performed on the command's behalf: cordon's own credentials are what
    // the kernel checks at connect time, and for IP they grant nothing the command's
    // would not (no privileged checks at connect). A netlink (or other) connect would
    // run with cordon's capabilities (a root caller's CAP_NET_ADMIN), so it is refused.
    if network_on && matches!(family, libc::AF_INET | libc::AF_INET6) {
        return ConnectPlan::Perform(raw);
    }
    ConnectPlan::Refuse(handle(n, observed, listener, sink))
}

/// Read a `sockaddr` from the task's memory and render it (`unix:/path`,
/// `unix:@abstract`, `inet:1.2.3.4:80`).
pub(super) fn read_sockaddr(pid: u32, addr: u64, len: u64) -> Option<String> {
    let buf = read_raw_sockaddr(pid, addr, len)?;
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

pub(super) fn is_name_service_probe(target: &str) -> bool {
    target.strip_prefix("unix:").is_some_and(|p| {
        NAME_SERVICE_PROBES.iter().any(|probe| p == *probe || (probe.ends_with('/') && p.starts_with(probe)))
    })
}

/// An errno as evidence text (`ENETUNREACH (errno 101)`).
pub(super) fn errno_text(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::ENOSYS => "ENOSYS",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EROFS => "EROFS",
        _ => return format!("errno {errno}"),
    };
    format!("{name} (errno {errno})")
}

/// Why a filter refuses, for the evidence text.
pub(super) fn filter_reason(filter: &str) -> &'static str {
    match filter {
        crate::runner::seccomp::NETWORK_OFF_FILTER => crate::result::NETWORK_OFF_REASON,
        crate::runner::seccomp::LOOPBACK_FILTER => crate::result::NETWORK_OFF_REASON,
        crate::runner::seccomp::HOST_UNIX_FILTER => "network on, unix sockets to the host closed",
        crate::runner::seccomp::HOST_UNIX_ALLOW_FILTER => "network on, only the allowed unix sockets",
        crate::runner::seccomp::PROXY_FILTER => "network by name: only cordon's proxy",
        _ => "sandbox rule",
    }
}

/// Answer one notification: record it (unless it is a name-service probe) and refuse
/// the syscall. Returns the errno answered.
pub(super) fn handle(
    n: &cordon_stage::notify::Notification,
    observed: &Observed,
    listener: &OwnedFd,
    sink: &DenialSink,
) -> i32 {
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
                    proxy: None,
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
                    proxy: None,
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
                    proxy: None,
                },
            );
            errno
        }
    }
}

/// Whether cordon's caller is root (the host's privileges are the baseline a refusal
/// is measured against).
pub(super) fn caller_is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Whether the host itself refuses syscall `name` with these arguments to a caller
/// without privileges: the mount API, `chroot`, `setns`, new namespaces other than a
/// user namespace (with one, the others are allowed), kernel loading, clocks, swap,
/// accounting, quotas; `bpf` and `perf_event_open` when the host's sysctls restrict
/// them.
pub(super) fn host_refuses_unprivileged(name: &str, args: &[u64; 6]) -> bool {
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

/// The proxy's address as a `sockaddr` of the family the command asked in, when the
/// command asked for exactly the proxy (`127.0.0.1:port`, or `::ffff:127.0.0.1:port`
/// on an IPv6 socket); `None` for any other address. The bytes are built from the
/// policy's address: only the comparison reads what the command wrote.
pub(super) fn proxy_sockaddr(raw: &[u8], proxy: std::net::SocketAddr) -> Option<Vec<u8>> {
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
