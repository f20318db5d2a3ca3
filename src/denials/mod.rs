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
//! 4. **A run with a network namespace of its own** (`local`): every `connect()` is
//!    performed here on the command's own socket object, to its loopback, its abstract
//!    names or a pathname socket its namespace listens on, or refused and recorded;
//!    `bind()` and `sendto()` with an address are judged for the report only.
//!
//! Every answer is a refusal, a `CONTINUE`, or the result of a connect the supervisor
//! performed on the socket object the command named, to an address the supervisor
//! built or checked (an allowed host unix socket's pinned path, the proxy's address, a
//! loopback address, a pinned socket file a socket of the run listens on), so reading
//! the task's memory — a time-of-check/time-of-use hazard for allow decisions — can only
//! affect the report, never let anything through. The command's stderr is
//! only used to link its own line to an entry ([`link_lines`]); it never creates one.

use crate::result::{Denial, DenialKind};
use crate::runner::seccomp::{Observed, ObservedKind};
use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

mod local;
mod net;
mod record;
pub use net::AllowedSocket;
use net::{handle, plan_connect, ConnectPlan};
use record::push;
pub(crate) use record::record;
pub use record::{bound_text, link_lines, DenialSink, MAX_DENIALS};

/// Where the supervisor gets its listener from.
pub enum ListenerSource {
    /// The landlock runner's stage sent it before `spawn` returned (with, for a run
    /// with a network namespace of its own, a socket diagnostics socket of it).
    Listener(OwnedFd, Option<OwnedFd>),
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
        // Judge paths with a sandboxed root's permissions, never more (a root caller's
        // overrides would reveal what the command cannot see, and ignore ACLs in the
        // judge's permission checks). No-op for other callers.
        let _ = cordon_stage::drop_thread_permission_overrides();
        let (listener, diag) = match source {
            ListenerSource::Listener(l, diag) => (l, diag),
            ListenerSource::Socket(sock) => match wait_for_listener(&sock, &stop_r) {
                Some(l) => l,
                None => return,
            },
        };
        // Cheaper wake-ups (Linux 6.6); without it, only slower.
        let _ = cordon_stage::notify::set_sync_wakeup(listener.as_fd());
        let sink = s.sink.clone();
        // Without it (or unusable), the loopback filter's connects are all refused.
        let own = diag.and_then(|d| local::OwnNet::new(d).ok());
        serve(listener, own, &stop_r, s);
        let (count, errno) = crate::tracee::take_unread();
        if count > 0 {
            sink.lock().unwrap_or_else(|p| p.into_inner()).unread = Some((count, errno));
        }
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

fn wait_for_listener(sock: &OwnedFd, stop: &OwnedFd) -> Option<(OwnedFd, Option<OwnedFd>)> {
    loop {
        wait(sock, stop)?;
        match cordon_stage::notify::recv_fds(sock.as_fd()) {
            Ok(mut fds) => {
                let diag = (fds.len() > 1).then(|| fds.pop()).flatten();
                return Some((fds.swap_remove(0), diag));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return None,
        }
    }
}

fn serve(listener: OwnedFd, mut own: Option<local::OwnNet>, stop: &OwnedFd, mut s: Supervision) {
    let native = crate::runner::seccomp::native_audit_arch().unwrap_or(0);
    while wait(&listener, stop).is_some() {
        let n = match cordon_stage::notify::recv(listener.as_fd()) {
            Ok(n) => n,
            // The task went away between poll and receive.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::ENOENT)) => continue,
            Err(_) => return,
        };
        let l = listener.as_fd();
        let foreign = n.arch != native
            || (cfg!(target_arch = "x86_64") && (n.nr as u32) & crate::runner::seccomp::X32_SYSCALL_BIT != 0);
        if foreign {
            push(
                &s.sink,
                Denial {
                    kind: DenialKind::Other,
                    target: Some(format!("syscall {} of foreign ABI 0x{:08x}", n.nr, n.arch)),
                    evidence: "seccomp supervisor: a syscall through a foreign entry point (e.g. 32-bit int 0x80) refused with ENOSYS".into(),
                    line: None,
                    proxy: None,
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
                crate::writes::Answer::Refuse(errno) | crate::writes::Answer::HostFails(errno) => {
                    cordon_stage::notify::respond_error(l, n.id, errno)
                }
            };
            continue;
        }
        if o.name == "sendto" && o.filter == crate::runner::seccomp::LOOPBACK_FILTER {
            if let Some(own) = own.as_mut() {
                local::judge_sendto(&n, &listener, own, &s.sink);
            }
            let _ = cordon_stage::notify::respond_continue(l, n.id);
            continue;
        }
        if o.name == "bind" && o.filter == crate::runner::seccomp::LOOPBACK_FILTER {
            let _ = match local::judge_bind(&n, &listener, s.writes.as_mut(), &s.sink) {
                crate::writes::Answer::Continue => cordon_stage::notify::respond_continue(l, n.id),
                crate::writes::Answer::Refuse(errno) | crate::writes::Answer::HostFails(errno) => {
                    cordon_stage::notify::respond_error(l, n.id, errno)
                }
            };
            continue;
        }
        if o.name == "connect" && o.filter == crate::runner::seccomp::LOOPBACK_FILTER {
            let plan = match own.as_mut() {
                Some(own) => local::plan_local_connect(&n, o, &listener, own, &s.allowed, &s.sink),
                None => local::LocalPlan::Refuse(handle(&n, o, &listener, &s.sink)),
            };
            let errno = match plan {
                local::LocalPlan::Refuse(errno) => errno,
                local::LocalPlan::Perform { sock, addr, pin, after } => match listener.try_clone() {
                    Ok(answer) => {
                        let sink = s.sink.clone();
                        // Answered from its own thread once the connect is done (a
                        // listener's full backlog may hold it).
                        let spawned = std::thread::Builder::new().name("cordon-connect".into()).spawn(move || {
                            if matches!(after, local::Afterwards::Allowed) {
                                // The caller's socket, by its policy: the caller's
                                // permissions. (The run's own: the judge's, inherited.)
                                let _ = cordon_stage::restore_thread_permission_overrides();
                            }
                            let waiting = || cordon_stage::notify::id_valid(answer.as_fd(), n.id);
                            let r = cordon_stage::notify::connect_socket(sock.as_fd(), &addr, waiting);
                            drop(pin);
                            let errno = r.err().map_or(0, |e| e.raw_os_error().unwrap_or(libc::EIO));
                            local::after_connect(&after, errno, &sink);
                            let _ = if errno == 0 {
                                cordon_stage::notify::respond_value(answer.as_fd(), n.id, 0)
                            } else {
                                cordon_stage::notify::respond_error(answer.as_fd(), n.id, errno)
                            };
                        });
                        if spawned.is_ok() {
                            continue;
                        }
                        libc::EAGAIN
                    }
                    Err(_) => libc::EAGAIN,
                },
            };
            let _ = cordon_stage::notify::respond_error(l, n.id, errno);
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
                            // This connect is the caller's (to the socket its policy
                            // names): with the caller's permissions, not the judge's.
                            let _ = cordon_stage::restore_thread_permission_overrides();
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

#[cfg(test)]
mod tests {
    use super::net::{is_name_service_probe, proxy_sockaddr};

    #[test]
    fn only_reads_the_task_did_not_cause_are_counted_and_reported() {
        // A bad pointer or a task that is gone says nothing about the supervisor.
        for errno in [libc::EFAULT, libc::EIO, libc::ESRCH] {
            crate::tracee::note_unread(errno);
        }
        assert_eq!(crate::tracee::take_unread(), (0, 0));
        // A refused read (a seccomp profile, ptrace rules) is counted, first errno kept.
        crate::tracee::note_unread(libc::EPERM);
        crate::tracee::note_unread(libc::EACCES);
        let (count, errno) = crate::tracee::take_unread();
        assert_eq!((count, errno), (2, libc::EPERM));
        let mut rec = super::record::Recorded::default();
        rec.unread = Some((count, errno));
        let u = rec.unobserved().unwrap();
        assert_eq!(u.syscalls, 2);
        assert!(u.reason.contains("Operation not permitted") && u.reason.contains("missing from denials"), "{u:?}");
        assert!(super::record::Recorded::default().unobserved().is_none());
    }
    use super::record::{names_path, Recorded};
    use super::*;
    use std::path::Path;

    fn denial(kind: DenialKind, target: &str) -> Denial {
        Denial { kind, target: Some(target.into()), evidence: "seccomp supervisor".into(), line: None, proxy: None }
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
    fn past_the_bound_the_latest_are_kept_and_the_rest_counted() {
        let mut r = Recorded::default();
        for i in 0..70 {
            r.push(denial(DenialKind::FileWrite, &format!("/out/{i}")));
        }
        r.push(denial(DenialKind::FileWrite, "/out/69"));
        let v = r.into_vec();
        assert_eq!(v.len(), MAX_DENIALS);
        assert_eq!(v[0].target.as_deref(), Some("/out/0"));
        assert_eq!(v[MAX_DENIALS - 2].target.as_deref(), Some("/out/69"), "the latest one is listed");
        let last = &v[MAX_DENIALS - 1];
        assert_eq!(last.kind, DenialKind::Other);
        assert!(last.evidence.contains("7 more"), "{}", last.evidence);
    }

    #[test]
    fn a_flood_of_one_kind_never_hides_another() {
        let mut r = Recorded::default();
        for i in 0..48 {
            r.push(denial(DenialKind::FileWrite, &format!("/out/{i}")));
        }
        r.push(denial(DenialKind::Network, "inet:10.0.0.1:443"));
        for i in 48..200 {
            r.push(denial(DenialKind::FileWrite, &format!("/out/{i}")));
        }
        let v = r.into_vec();
        assert!(v.len() <= MAX_DENIALS);
        assert!(v.iter().any(|d| d.kind == DenialKind::Network), "the network denial was pushed out");
    }

    #[test]
    fn name_service_probes_are_recognized() {
        assert!(is_name_service_probe("unix:/var/run/nscd/socket"));
        assert!(is_name_service_probe("unix:/run/systemd/userdb/io.systemd.Multiplexer"));
        assert!(!is_name_service_probe("unix:/var/run/docker.sock"));
    }
}
