//! The run's own network (the `loopback_only` filter, see `runner::seccomp`): the run
//! has a network namespace of its own, with only its loopback, and every `connect()`
//! stops here. The supervisor performs it itself, on the very socket object the
//! command named (taken with `pidfd_getfd`), to an address it checked, never letting
//! the kernel re-read the command's memory or descriptor table:
//!
//! 1. the socket must live in the run's namespace (its `SO_NETNS_COOKIE`): a socket
//!    from outside (a caller's stdio) is refused as with the network off;
//! 2. IP: a loopback address (127.0.0.0/8, `::1`, their mapped forms, the unspecified
//!    address) is connected — inside the run's namespace that is the run itself; any
//!    other address is refused (`ENETUNREACH`, as on a machine without a network) and
//!    recorded;
//! 3. abstract unix names are the namespace's own: connected;
//! 4. a pathname unix socket is resolved in the command's view and pinned; it is
//!    connected (through the pinned file, not the path) only when a socket of the
//!    run's own namespace listens on that very file (socket diagnostics of the
//!    namespace, `UNIX_DIAG_VFS`): a socket the run bound. A host daemon's socket —
//!    `/run/docker.sock`, or one a host process placed inside the workspace, before or
//!    during the run — is refused (`EACCES`) and recorded.
//!
//! A connect that succeeds is no denial. One that missed a host socket is: a connect
//! (or a `sendto()` with an address, which the filter also sends here, for the report
//! only) to a loopback port where the host has a TCP listener or a bound UDP socket and
//! the run none (the run's own sockets asked through the same diagnostics socket,
//! `inet_diag`; the host's from cordon's own `/proc/net` tables, read only then), and
//! a connect to an abstract name only the host has.
//!
//! What it does not do: see `sendmsg()` to an address (UDP to another host fails in
//! the kernel with `ENETUNREACH`, unrecorded; unix datagram sockets do not exist), or
//! tell a host socket from the run's by anything but the kernel's answer (the bound
//! file's superblock device and the low 32 bits of its inode number, as socket
//! diagnostics report them).

use super::net::{
    errno_text, handle, is_name_service_probe, read_raw_sockaddr, read_sockaddr, sockaddr_un, AllowedSocket,
};
use super::record::{push, DenialSink};
use crate::result::{Denial, DenialKind};
use crate::runner::seccomp::Observed;
use cordon_stage::local::BoundFile;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

/// The run's network namespace, as the supervisor knows it.
pub(super) struct OwnNet {
    /// A `NETLINK_SOCK_DIAG` socket created inside it by the stage.
    diag: OwnedFd,
    /// Its cookie (`SO_NETNS_COOKIE`).
    cookie: u64,
    /// The next diagnostics request's sequence number.
    seq: u32,
    /// Mount id → its superblock's device (major, minor), from the command's
    /// `mountinfo`.
    mount_devs: std::collections::HashMap<u64, (u32, u32)>,
}

/// Mount id → device (major, minor) of every line of a `mountinfo` text.
fn mount_devs(text: &str) -> impl Iterator<Item = (u64, (u32, u32))> + '_ {
    text.lines().filter_map(|l| {
        let mut f = l.split(' ');
        let id = f.next()?.parse::<u64>().ok()?;
        let (major, minor) = f.nth(1)?.split_once(':')?;
        Some((id, (major.parse().ok()?, minor.parse().ok()?)))
    })
}

impl OwnNet {
    /// From the diagnostics socket the stage sent with the listener.
    pub(super) fn new(diag: OwnedFd) -> std::io::Result<OwnNet> {
        cordon_stage::local::prepare_diag(diag.as_fd())?;
        let cookie = cordon_stage::local::netns_cookie(diag.as_fd())?;
        Ok(OwnNet { diag, cookie, seq: 1, mount_devs: Default::default() })
    }

    /// The identity socket diagnostics give the file `st` describes: its inode number
    /// and its superblock's device, which is the device of the mount it was reached
    /// through (`/proc/PID/mountinfo`, by mount id). `st_dev` itself will not do: an
    /// overlay (the run's private `/tmp` and `/dev/shm`) reports a per-layer device
    /// there, and btrfs a per-subvolume one.
    fn bound_file(&mut self, pid: u32, st: &cordon_stage::FileStat) -> Option<BoundFile> {
        if st.mnt_id == 0 {
            return None;
        }
        if !self.mount_devs.contains_key(&st.mnt_id) {
            // Mount ids are never reused while the mount exists, and the run cannot
            // mount: what is read once stays true for the run.
            let text = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).ok()?;
            self.mount_devs.extend(mount_devs(&text));
        }
        let &(major, minor) = self.mount_devs.get(&st.mnt_id)?;
        BoundFile::of_stat(libc::makedev(major, minor), st.ino)
    }

    fn listens_on(&mut self, file: BoundFile) -> bool {
        self.seq = self.seq.wrapping_add(1);
        cordon_stage::local::unix_listeners(self.diag.as_fd(), self.seq).is_ok_and(|l| l.contains(&file))
    }

    /// Whether a socket of the run's namespace takes what is sent to `addr`: a TCP
    /// listener (`stream`) or a bound UDP socket there, or at the wildcard address of
    /// its family (an IPv6 one takes IPv4 too). `true` when the namespace cannot be
    /// asked (the report then stays silent: no evidence).
    fn takes(&mut self, addr: SocketAddr, stream: bool) -> bool {
        use cordon_stage::local::{inet_sockets, TCP_LISTEN};
        let (proto, states) =
            if stream { (libc::IPPROTO_TCP, 1u32 << TCP_LISTEN) } else { (libc::IPPROTO_UDP, u32::MAX) };
        let v4 = v4_of(addr.ip());
        let families: &[i32] = if v4.is_some() { &[libc::AF_INET, libc::AF_INET6] } else { &[libc::AF_INET6] };
        for &family in families {
            self.seq = self.seq.wrapping_add(1);
            #[allow(clippy::cast_possible_truncation, reason = "address families and IP protocols fit in a byte")]
            let Ok(sockets) = inet_sockets(self.diag.as_fd(), self.seq, family as u8, proto as u8, states) else {
                return true;
            };
            if sockets.iter().any(|s| s.port() == addr.port() && covers(s.ip(), addr.ip())) {
                return true;
            }
        }
        false
    }

    /// Whether the host has something at `addr` that the run's own loopback does not:
    /// the evidence that a run's send or connect there missed a host socket.
    fn misses_host(&mut self, addr: SocketAddr, stream: bool) -> bool {
        !self.takes(addr, stream) && host_has_inet(addr, stream)
    }
}

/// The IPv4 address `ip` is or maps.
fn v4_of(ip: IpAddr) -> Option<Ipv4Addr> {
    match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
    }
}

/// Whether a socket bound to `bound` takes traffic for `to`: the same address, or the
/// wildcard address of its family (IPv6's also takes IPv4, dual-stack).
fn covers(bound: IpAddr, to: IpAddr) -> bool {
    bound.is_unspecified() || v4_of(bound).is_some_and(|b| v4_of(to) == Some(b)) || bound == to
}

/// What to check once a performed connect has its result.
#[derive(Debug, Clone)]
pub(super) enum Afterwards {
    /// Nothing.
    Nothing,
    /// A host socket the policy allows: connected with the caller's permissions.
    Allowed,
    /// A loopback IP address where the host has a socket and the run none (checked
    /// before the connect): recorded unless the connect reached something after all
    /// (a listener of the run's that came up meanwhile).
    MissedHost { target: String, stream: bool },
    /// An abstract unix name: was it only the host's?
    Abstract { name: Vec<u8> },
}

/// One decided `connect()` of a run with a network namespace of its own.
pub(super) enum LocalPlan {
    /// Refuse with this errno (already recorded, or not a denial).
    Refuse(i32),
    /// Connect `sock` (the command's own socket object) to `addr`; `pin` keeps the
    /// file `addr` names (`/proc/self/fd/N`) open until then.
    Perform { sock: OwnedFd, addr: Vec<u8>, pin: Option<OwnedFd>, after: Afterwards },
}

fn record(sink: &DenialSink, target: String, errno: i32, why: &str) {
    push(
        sink,
        Denial {
            kind: DenialKind::Network,
            target: Some(target),
            evidence: format!("seccomp supervisor: connect() refused with {} (network off: {why})", errno_text(errno)),
            line: None,
            proxy: None,
        },
    );
}

/// Decide one `connect()` under the loopback filter (see the module docs).
pub(super) fn plan_local_connect(
    n: &cordon_stage::notify::Notification,
    observed: &Observed,
    listener: &OwnedFd,
    own: &mut OwnNet,
    allowed: &[AllowedSocket],
    sink: &DenialSink,
) -> LocalPlan {
    let raw = read_raw_sockaddr(n.pid, n.args[1], n.args[2]);
    // The read is only trusted if the task is still blocked in this syscall; the bytes
    // are used as read (a later change of the command's memory is not seen).
    let raw = if cordon_stage::notify::id_valid(listener.as_fd(), n.id) { raw } else { None };
    let Some(raw) = raw else { return LocalPlan::Refuse(libc::EFAULT) };
    let sock = match cordon_stage::notify::take_socket(n.pid, n.args[0]) {
        Ok(s) => s,
        Err(e) => return LocalPlan::Refuse(e.raw_os_error().unwrap_or(libc::EBADF)),
    };
    let info = match cordon_stage::local::socket_info(sock.as_fd()) {
        Ok(i) => i,
        Err(e) => return LocalPlan::Refuse(e.raw_os_error().unwrap_or(libc::ENOTSOCK)),
    };
    if info.netns_cookie != own.cookie {
        // Not a socket of the run's namespace (one the caller passed as stdio): as
        // with the network off.
        return LocalPlan::Refuse(handle(n, observed, listener, sink));
    }
    let family = i32::from(u16::from_ne_bytes([raw[0], raw[1]]));
    match info.domain {
        libc::AF_INET | libc::AF_INET6 => {
            if family == libc::AF_UNSPEC {
                // Dissolves the association (UDP) or fails: nothing to reach.
                return LocalPlan::Perform { sock, addr: raw, pin: None, after: Afterwards::Nothing };
            }
            let Some(addr) = inet_addr(&raw) else { return LocalPlan::Refuse(libc::EAFNOSUPPORT) };
            if is_loopback(addr.ip()) {
                let stream = info.ty == libc::SOCK_STREAM;
                let after = if own.misses_host(addr, stream) {
                    Afterwards::MissedHost { target: inet_target(addr), stream }
                } else {
                    Afterwards::Nothing
                };
                return LocalPlan::Perform { sock, addr: raw, pin: None, after };
            }
            let target = read_sockaddr(n.pid, n.args[1], n.args[2]).unwrap_or_else(|| addr.to_string());
            record_off(sink, target, "connect()", libc::ENETUNREACH);
            LocalPlan::Refuse(libc::ENETUNREACH)
        }
        libc::AF_UNIX => {
            if family != libc::AF_UNIX || raw.len() <= 2 {
                return LocalPlan::Refuse(libc::EINVAL);
            }
            let rest = &raw[2..];
            if rest[0] == 0 {
                // Abstract names live in the run's namespace.
                let name = rest[1..].to_vec();
                return LocalPlan::Perform { sock, addr: raw, pin: None, after: Afterwards::Abstract { name } };
            }
            let end = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
            let path = &rest[..end];
            // A host socket the policy allows by path (`--allow-unix-socket`): to the
            // pinned file, with the caller's permissions.
            if let Some(ok) = allowed.iter().find(|a| a.path.as_os_str().as_bytes() == path) {
                return match sockaddr_un(&ok.via_fd()) {
                    Some(addr) => LocalPlan::Perform { sock, addr, pin: None, after: Afterwards::Allowed },
                    None => LocalPlan::Refuse(libc::ENAMETOOLONG),
                };
            }
            let target = format!("unix:{}", String::from_utf8_lossy(path));
            if is_name_service_probe(&target) {
                return LocalPlan::Refuse(libc::ENOENT);
            }
            let file = match crate::writes::open_in_view(n.pid, path) {
                Ok(f) => f,
                // What the kernel would answer for a path that leads nowhere.
                Err(e) => return LocalPlan::Refuse(e.raw_os_error().unwrap_or(libc::ENOENT)),
            };
            let Ok(st) = cordon_stage::statx(file.as_raw_fd(), c"", libc::AT_EMPTY_PATH) else {
                return LocalPlan::Refuse(libc::ENOENT);
            };
            if st.mode & libc::S_IFMT != libc::S_IFSOCK {
                return LocalPlan::Refuse(libc::ECONNREFUSED);
            }
            let own_socket = own.bound_file(n.pid, &st).is_some_and(|b| own.listens_on(b));
            if !own_socket {
                record(sink, target, libc::EACCES, "a unix socket the run did not bind");
                return LocalPlan::Refuse(libc::EACCES);
            }
            let Some(addr) = sockaddr_un(std::path::Path::new(&format!("/proc/self/fd/{}", file.as_raw_fd()))) else {
                return LocalPlan::Refuse(libc::ENAMETOOLONG);
            };
            LocalPlan::Perform { sock, addr, pin: Some(file), after: Afterwards::Nothing }
        }
        // No other family can be created under the filter.
        _ => LocalPlan::Refuse(handle(n, observed, listener, sink)),
    }
}

/// Judge one `bind()` under the loopback filter (for the report only: the answer is
/// a refusal the sandbox makes anyway, or `CONTINUE`): a pathname unix socket is a new
/// file, judged like `mknodat(AT_FDCWD, path)` by the run's write judge (when the run
/// observes writes); everything else continues.
pub(super) fn judge_bind(
    n: &cordon_stage::notify::Notification,
    listener: &OwnedFd,
    writes: Option<&mut crate::writes::WriteJudge>,
    sink: &DenialSink,
) -> crate::writes::Answer {
    let Some(judge) = writes else { return crate::writes::Answer::Continue };
    let Some(raw) = read_raw_sockaddr(n.pid, n.args[1], n.args[2]) else { return crate::writes::Answer::Continue };
    let family = i32::from(u16::from_ne_bytes([raw[0], raw[1]]));
    // Only a path the kernel would read whole: it ends within the address.
    let pathname = family == libc::AF_UNIX && raw.get(2).is_some_and(|b| *b != 0) && raw[2..].contains(&0);
    if !pathname {
        return crate::writes::Answer::Continue;
    }
    let args = [libc::AT_FDCWD as i64 as u64, n.args[1] + 2, u64::from(libc::S_IFSOCK), 0, 0, 0];
    let valid = || cordon_stage::notify::id_valid(listener.as_fd(), n.id);
    judge.judge("mknodat", n.pid, args, valid, &mut |mut d| {
        // Named as the command made it.
        d.evidence = d.evidence.replacen("mknodat(", "bind(", 1);
        push(sink, d)
    })
}

/// The IP address and port of an `AF_INET`/`AF_INET6` `sockaddr`.
fn inet_addr(raw: &[u8]) -> Option<SocketAddr> {
    let family = i32::from(u16::from_ne_bytes([*raw.first()?, *raw.get(1)?]));
    let port = u16::from_be_bytes([*raw.get(2)?, *raw.get(3)?]);
    match family {
        libc::AF_INET => {
            let ip: [u8; 4] = raw.get(4..8)?.try_into().ok()?;
            Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port))
        }
        libc::AF_INET6 => {
            let ip: [u8; 16] = raw.get(8..24)?.try_into().ok()?;
            Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port))
        }
        _ => None,
    }
}

/// Whether `ip` reaches the local host: loopback, unspecified, or their IPv4-mapped
/// forms (inside the run's namespace: the run itself).
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_unspecified(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.is_loopback() || v4.is_unspecified(),
            None => v6.is_loopback() || v6.is_unspecified(),
        },
    }
}

/// `inet:1.2.3.4:80` or `inet6:[::1]:80`.
fn inet_target(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => format!("inet:{a}"),
        SocketAddr::V6(a) => format!("inet6:{a}"),
    }
}

fn record_missed_host(sink: &DenialSink, target: String, stream: bool, call: &str) {
    let why = if stream {
        "the host's listener there is not reachable"
    } else {
        "the host's socket bound there is not reachable"
    };
    push(
        sink,
        Denial {
            kind: DenialKind::Network,
            target: Some(target),
            evidence: format!("seccomp supervisor: {call} to the run's own loopback (network off: {why})"),
            line: None,
            proxy: None,
        },
    );
}

/// After a performed connect: record what the host had there but the run could not
/// reach (see the module docs). `result` is the connect's errno (0: connected; a
/// non-blocking TCP connect answers `EINPROGRESS`, and the run had no listener there).
pub(super) fn after_connect(after: &Afterwards, result: i32, sink: &DenialSink) {
    match after {
        Afterwards::Nothing | Afterwards::Allowed => {}
        Afterwards::MissedHost { target, stream } => {
            // A datagram socket connects whatever is there; a stream one that
            // connected found a listener of the run's after all.
            if !*stream || result != 0 {
                record_missed_host(sink, target.clone(), *stream, "connect()");
            }
        }
        Afterwards::Abstract { name } => {
            if result == libc::ECONNREFUSED && host_has_abstract(name) {
                let target = format!("unix:@{}", String::from_utf8_lossy(name).trim_end_matches('\0'));
                record(sink, target, libc::ECONNREFUSED, "the host's abstract socket is not reachable");
            }
        }
    }
}

/// Judge one `sendto()` with an address under the loopback filter, for the report
/// only (the caller answers `CONTINUE`: the kernel sends within the run's namespace,
/// where any address but the run's loopback has no route): a datagram (or TCP Fast
/// Open) to a loopback address where the host has a socket and the run none is
/// recorded, and so is one to any other address.
pub(super) fn judge_sendto(
    n: &cordon_stage::notify::Notification,
    listener: &OwnedFd,
    own: &mut OwnNet,
    sink: &DenialSink,
) {
    let raw = read_raw_sockaddr(n.pid, n.args[4], n.args[5]);
    let raw = if cordon_stage::notify::id_valid(listener.as_fd(), n.id) { raw } else { None };
    let Some(addr) = raw.as_deref().and_then(inet_addr) else { return };
    let Ok(sock) = cordon_stage::notify::take_socket(n.pid, n.args[0]) else { return };
    let Ok(info) = cordon_stage::local::socket_info(sock.as_fd()) else { return };
    if info.netns_cookie != own.cookie || !matches!(info.domain, libc::AF_INET | libc::AF_INET6) {
        return;
    }
    let stream = info.ty == libc::SOCK_STREAM;
    if !is_loopback(addr.ip()) {
        record_sent(sink, inet_target(addr), "sendto()");
    } else if own.misses_host(addr, stream) {
        record_missed_host(sink, inet_target(addr), stream, "sendto()");
    }
}

fn record_sent(sink: &DenialSink, target: String, call: &str) {
    record_off(sink, target, call, libc::ENETUNREACH);
}

/// A refusal because the network is off, with the plain reason (its live line names
/// the flags that open the network: `crate::result::NETWORK_OFF_REASON`).
fn record_off(sink: &DenialSink, target: String, call: &str, errno: i32) {
    push(
        sink,
        Denial {
            kind: DenialKind::Network,
            target: Some(target),
            evidence: format!(
                "seccomp supervisor: {call} refused with {} ({})",
                errno_text(errno),
                crate::result::NETWORK_OFF_REASON
            ),
            line: None,
            proxy: None,
        },
    );
}

/// Whether cordon's own network namespace (the host's) has a TCP listener (`stream`)
/// or a bound UDP socket at `addr` (or at the wildcard address of its family, which
/// also takes IPv4 on a dual-stack IPv6 socket): from `/proc/self/net/{tcp,udp}{,6}`.
fn host_has_inet(addr: SocketAddr, stream: bool) -> bool {
    let proto = if stream { "tcp" } else { "udp" };
    // TCP_LISTEN for TCP; a bound, unconnected UDP socket shows TCP_CLOSE.
    let state = if stream { "0A" } else { "07" };
    let v4 = v4_of(addr.ip());
    let port = addr.port();
    let mut found = false;
    if let Some(v4) = v4 {
        found |= table_has(&format!("/proc/self/net/{proto}"), state, port, |hex| {
            parse_v4(hex).is_some_and(|ip| ip == v4 || ip.is_unspecified())
        });
    }
    found
        || table_has(&format!("/proc/self/net/{proto}6"), state, port, |hex| {
            parse_v6(hex).is_some_and(|ip| {
                ip.is_unspecified() || Some(ip) == v4.map(|v| v.to_ipv6_mapped()) || IpAddr::V6(ip) == addr.ip()
            })
        })
}

/// Whether a line of the table at `path` has state `state`, local port `port` and a
/// local address `addr_ok` accepts (hex, as the kernel prints it).
fn table_has(path: &str, state: &str, port: u16, addr_ok: impl Fn(&str) -> bool) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else { return false };
    text.lines().skip(1).any(|line| {
        let mut cols = line.split_whitespace();
        let (Some(_), Some(local), Some(_), Some(st)) = (cols.next(), cols.next(), cols.next(), cols.next()) else {
            return false;
        };
        let Some((hex, p)) = local.split_once(':') else { return false };
        st == state && u16::from_str_radix(p, 16).is_ok_and(|p| p == port) && addr_ok(hex)
    })
}

/// An IPv4 address as `/proc/net/tcp` prints it (the 32-bit word in host byte order).
fn parse_v4(hex: &str) -> Option<Ipv4Addr> {
    let word = u32::from_str_radix(hex, 16).ok()?;
    Some(Ipv4Addr::from(word.to_ne_bytes()))
}

/// An IPv6 address as `/proc/net/tcp6` prints it (four 32-bit words, each in host
/// byte order).
fn parse_v6(hex: &str) -> Option<Ipv6Addr> {
    if hex.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for i in 0..4 {
        let word = u32::from_str_radix(hex.get(i * 8..i * 8 + 8)?, 16).ok()?;
        bytes[i * 4..i * 4 + 4].copy_from_slice(&word.to_ne_bytes());
    }
    Some(Ipv6Addr::from(bytes))
}

/// Whether a unix socket of cordon's own network namespace (the host's) is bound to the
/// abstract `name` (`/proc/self/net/unix` prints it `@name`, NULs as `@`).
fn host_has_abstract(name: &[u8]) -> bool {
    let Ok(text) = std::fs::read_to_string("/proc/self/net/unix") else { return false };
    let want: String =
        std::iter::once('@').chain(name.iter().map(|b| if *b == 0 { '@' } else { char::from(*b) })).collect();
    let want = want.trim_end_matches('@');
    text.lines().skip(1).any(|l| l.split_whitespace().nth(7).is_some_and(|p| p.trim_end_matches('@') == want))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_devices_are_read_from_mountinfo() {
        let text = "22 1 0:21 / /proc rw,nosuid - proc proc rw\n\
                    97 29 254:0 /srv / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                    301 97 0:47 / /dev/shm rw - overlay overlay rw,lowerdir=/dev/shm\n\
                    garbage\n";
        let m: std::collections::HashMap<_, _> = mount_devs(text).collect();
        assert_eq!(m.get(&301), Some(&(0, 47)));
        assert_eq!(m.get(&97), Some(&(254, 0)));
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn only_the_local_host_counts_as_loopback() {
        for ip in ["127.0.0.1", "127.5.6.7", "0.0.0.0", "::1", "::", "::ffff:127.0.0.1", "::ffff:0.0.0.0"] {
            assert!(is_loopback(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["10.0.0.1", "169.254.169.254", "::ffff:10.0.0.1", "fe80::1", "2001:db8::1", "::2", "1.1.1.1"] {
            assert!(!is_loopback(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn socket_addresses_are_read_by_family() {
        let mut v4 = vec![0u8; 16];
        v4[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&8080u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[127, 0, 0, 1]);
        assert_eq!(inet_addr(&v4), Some("127.0.0.1:8080".parse().unwrap()));
        let mut v6 = vec![0u8; 28];
        v6[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        v6[2..4].copy_from_slice(&443u16.to_be_bytes());
        v6[8..24].copy_from_slice(&Ipv6Addr::LOCALHOST.octets());
        assert_eq!(inet_addr(&v6), Some("[::1]:443".parse().unwrap()));
        assert_eq!(inet_addr(&v4[..6]), None, "short");
    }

    #[test]
    fn the_hosts_tables_are_read_as_the_kernel_prints_them() {
        assert_eq!(parse_v4("0100007F"), Some(Ipv4Addr::LOCALHOST));
        assert_eq!(parse_v6("00000000000000000000000001000000"), Some(Ipv6Addr::LOCALHOST));
        assert_eq!(parse_v6("0000000000000000FFFF00000100007F"), Some(Ipv4Addr::LOCALHOST.to_ipv6_mapped()));
        // Sockets of this process are found. (Nothing is asserted of a port without
        // one: other tests running beside this one may take any free port.)
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        assert!(host_has_inet(addr, true));
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(host_has_inet(u.local_addr().unwrap(), false));
        let mapped = SocketAddr::new(IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped()), addr.port());
        assert!(host_has_inet(mapped, true), "a mapped address names the IPv4 listener");
        let any = std::net::TcpListener::bind("[::]:0").unwrap();
        let on_any = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), any.local_addr().unwrap().port());
        assert!(host_has_inet(on_any, true), "a dual-stack wildcard listener takes IPv4 loopback");
    }

    #[test]
    fn the_hosts_abstract_names_are_found() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("cordon-test-abstract-{}", std::process::id());
        let a = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let l = std::os::unix::net::UnixListener::bind_addr(&a).unwrap();
        assert!(host_has_abstract(name.as_bytes()));
        assert!(!host_has_abstract(format!("{name}-other").as_bytes()));
        drop(l);
    }
}
