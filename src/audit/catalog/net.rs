//! The network: every socket family and address class with the network off (judged by
//! loopback listeners the audit starts), reaching around cordon's egress proxy, and
//! the unix sockets of daemons outside (pathname and abstract, network off and on).

use super::{cordon_only, p, root_only, Class, Plan, Probe};
use crate::audit::fixture::{Fixture, Skip};
use crate::audit::watch::{Check, Connector};
use std::net::SocketAddr;

/// An attack sending to a listener of the audit: `op HOST PORT`.
fn to_trap(fx: &Fixture, op: &str, host: &str, tcp: bool, v6: bool) -> Result<Plan, Skip> {
    let (port, w) = if tcp { fx.tcp(v6)? } else { fx.udp(v6)? };
    Ok(Plan::op(fx, op, &[host, &port.to_string()]).watch_box(w))
}

/// A TCP listener at an exact loopback address.
fn tcp_at(fx: &Fixture, addr: &str, connect_to: &str) -> Result<Plan, Skip> {
    let a: SocketAddr = format!("{addr}:0").parse().map_err(|_| Skip(format!("bad address {addr}")))?;
    let (port, w) = fx.tcp_bind(a)?;
    Ok(Plan::op(fx, "tcp", &[connect_to, &port.to_string()]).watch_box(w))
}

pub(super) fn probes() -> Vec<Probe> {
    use Class::{HostUnix as U, Network as N, Proxy as P};
    vec![
        // ------------------------------------------------------------ network
        p(N, "tcp4", "TCP connect to a listener on 127.0.0.1; proves IPv4 TCP is closed", |fx| to_trap(fx, "tcp", "127.0.0.1", true, false)),
        p(N, "tcp6", "TCP connect to a listener on ::1; proves IPv6 TCP is closed", |fx| to_trap(fx, "tcp", "::1", true, true)),
        p(N, "tcp-v4-mapped", "TCP connect to ::ffff:127.0.0.1 on an IPv6 socket; proves v4-mapped addresses are closed", |fx| {
            to_trap(fx, "tcp", "::ffff:127.0.0.1", true, false)
        }),
        p(N, "tcp-any4", "TCP connect to 0.0.0.0 (the kernel routes it to loopback); proves the wildcard address is closed", |fx| {
            to_trap(fx, "tcp", "0.0.0.0", true, false)
        }),
        p(N, "tcp-any6", "TCP connect to :: (routed to ::1); proves the IPv6 wildcard address is closed", |fx| to_trap(fx, "tcp", "::", true, true)),
        p(N, "tcp-loopback-net", "TCP connect to a listener on 127.0.0.2; proves the whole loopback network is closed", |fx| {
            tcp_at(fx, "127.0.0.2", "127.0.0.2")
        }),
        p(N, "mptcp", "MPTCP connect to a loopback listener; proves other stream protocols are closed", |fx| {
            to_trap(fx, "mptcp", "127.0.0.1", true, false)
        }),
        p(N, "tcp-fastopen", "sendto(MSG_FASTOPEN) with no connect(); proves TCP Fast Open does not bypass connect filtering", |fx| {
            to_trap(fx, "tfo", "127.0.0.1", true, false)
        }),
        p(N, "udp4", "UDP sendto a socket on 127.0.0.1; proves IPv4 UDP is closed", |fx| to_trap(fx, "udp", "127.0.0.1", false, false)),
        p(N, "udp6", "UDP sendto a socket on ::1; proves IPv6 UDP is closed", |fx| to_trap(fx, "udp", "::1", false, true)),
        p(N, "udp-v4-mapped", "UDP sendto ::ffff:127.0.0.1; proves v4-mapped UDP is closed", |fx| {
            to_trap(fx, "udp", "::ffff:127.0.0.1", false, false)
        }),
        p(N, "udp-connect", "connect() a UDP socket, then send(); proves connected datagrams are closed", |fx| {
            to_trap(fx, "udp-connect", "127.0.0.1", false, false)
        }),
        p(N, "sendmmsg", "sendmmsg(2) a datagram; proves the batch send path is closed", |fx| to_trap(fx, "sendmmsg", "127.0.0.1", false, false)),
        p(N, "dns", "a DNS query over UDP to a resolver-shaped socket; proves name lookups cannot leak data", |fx| {
            to_trap(fx, "dns", "127.0.0.1", false, false)
        }),
        p(N, "raw-udp", "a UDP datagram built by hand on a raw socket; proves raw sockets are closed", |fx| {
            root_only(fx, "raw sockets need CAP_NET_RAW on the host")?;
            to_trap(fx, "raw-udp", "127.0.0.1", false, false)
        }),
        p(N, "netlink-route", "an RTM_GETLINK dump over netlink; proves the host's interfaces cannot be listed or configured", |fx| {
            Ok(Plan::op(fx, "netlink", &[]).watch(Check {
                effect: |r: &crate::audit::exec::RunOutput| {
                    let l = r.line.as_ref()?;
                    let names = l.detail.split("links=").nth(1)?;
                    names
                        .split(',')
                        .any(|n| !n.is_empty() && n != "lo")
                        .then(|| format!("the host's interfaces are visible: {names}"))
                },
                cleanup: || {},
            }))
        }),
        p(N, "listen", "listen on 127.0.0.1 while the host connects to it; proves nothing inside can serve the host", |fx| {
            let port = crate::audit::fixture::free_port()?;
            let c = Connector::start(port);
            Ok(Plan::op(fx, "listen", &["127.0.0.1", &port.to_string(), "1500"]).watch(c))
        }),
        // ------------------------------------------------------------ proxy
        p(P, "connect-loopback", "CONNECT 127.0.0.1:PORT through cordon's proxy; proves the proxy refuses loopback", |fx| proxy(fx, "proxy-connect", |port| vec![format!("127.0.0.1:{port}")])),
        p(P, "connect-allowed-name", "CONNECT localhost:PORT with `localhost:PORT` allowed; proves an allowed name resolving to loopback is still refused", |fx| {
            proxy(fx, "proxy-connect", |port| vec![format!("localhost:{port}")])
        }),
        p(P, "connect-decimal-ip", "CONNECT 2130706433:PORT (127.0.0.1 as one number); proves numeric spellings are refused", |fx| {
            proxy(fx, "proxy-connect", |port| vec![format!("2130706433:{port}")])
        }),
        p(P, "get-loopback", "GET http://127.0.0.1:PORT/ in absolute form through the proxy; proves plain HTTP is held to the same rules", |fx| {
            proxy(fx, "proxy-get", |port| vec![format!("http://127.0.0.1:{port}/")])
        }),
        p(P, "get-allowed-name", "GET http://localhost:PORT/ with the name allowed; proves HTTP to a loopback-resolving name is refused", |fx| {
            proxy(fx, "proxy-get", |port| vec![format!("http://localhost:{port}/")])
        }),
        p(P, "socks5-ip", "SOCKS5 CONNECT to 127.0.0.1; proves the SOCKS side refuses loopback", |fx| {
            proxy(fx, "socks5", |port| vec!["127.0.0.1".into(), port.to_string()])
        }),
        p(P, "socks5-name", "SOCKS5 CONNECT to the allowed name localhost; proves resolved loopback addresses are refused", |fx| {
            proxy(fx, "socks5", |port| vec!["localhost".into(), port.to_string()])
        }),
        p(P, "direct-tcp", "a direct TCP connect (no proxy) with --allow-host; proves the proxy is the only way out", |fx| {
            proxy(fx, "tcp", |port| vec!["127.0.0.1".into(), port.to_string()])
        }),
        p(P, "direct-tfo", "TCP Fast Open with --allow-host; proves it cannot skip the supervised connect", |fx| {
            proxy(fx, "tfo", |port| vec!["127.0.0.1".into(), port.to_string()])
        }),
        p(P, "direct-udp", "UDP with --allow-host; proves datagrams stay closed when names are allowed", |fx| {
            cordon_only(fx, "cordon's --allow-host")?;
            let (port, w) = fx.udp(false)?;
            Ok(Plan::op(fx, "udp", &["127.0.0.1", &port.to_string()])
                .watch_box(w)
                .flags(&["--allow-host", &format!("localhost:{port}")]))
        }),
        // ------------------------------------------------------------ host-unix
        p(U, "stream-path", "connect to a pathname unix socket a host daemon listens on; proves host daemons are unreachable", |fx| {
            let (name, w) = fx.unix_stream(Some(&fx.outside.join("daemon.sock")))?;
            Ok(Plan::op(fx, "unix-connect", &[&name]).watch_box(w))
        }),
        p(U, "dgram-path", "sendto a pathname unix datagram socket (journald-style); proves datagram daemons are unreachable", |fx| {
            let (name, w) = fx.unix_dgram(Some(&fx.outside.join("dgram.sock")))?;
            Ok(Plan::op(fx, "unix-dgram", &[&name]).watch_box(w))
        }),
        p(U, "stream-abstract", "connect to an abstract unix socket of the host; proves the abstract namespace is closed", |fx| {
            let (name, w) = fx.unix_stream(None)?;
            Ok(Plan::op(fx, "unix-abstract", &[&name]).watch_box(w))
        }),
        p(U, "dgram-abstract", "sendto an abstract unix datagram socket; proves abstract datagrams are closed", |fx| {
            let (name, w) = fx.unix_dgram(None)?;
            Ok(Plan::op(fx, "unix-abstract-dgram", &[&name]).watch_box(w))
        }),
        p(U, "socketpair-sendto", "sendto a daemon's path from a datagram socketpair end (no socket(), no connect()); proves pairs cannot reach out", |fx| {
            let (name, w) = fx.unix_dgram(Some(&fx.outside.join("pair.sock")))?;
            Ok(Plan::op(fx, "socketpair-dgram-send", &[&name]).watch_box(w))
        }),
        p(U, "net-on-stream-path", "with --network, connect to a host daemon's pathname socket; proves IP access does not open local daemons", |fx| {
            let (name, w) = fx.unix_stream(Some(&fx.outside.join("daemon.sock")))?;
            net_on(fx, Plan::op(fx, "unix-connect", &[&name]).watch_box(w))
        }),
        p(U, "net-on-stream-abstract", "with --network, connect to an abstract socket of the host; proves the abstract namespace stays closed", |fx| {
            let (name, w) = fx.unix_stream(None)?;
            net_on(fx, Plan::op(fx, "unix-abstract", &[&name]).watch_box(w))
        }),
        p(U, "net-on-dgram-path", "with --network, sendto a host datagram socket; proves datagram daemons stay closed", |fx| {
            let (name, w) = fx.unix_dgram(Some(&fx.outside.join("dgram.sock")))?;
            net_on(fx, Plan::op(fx, "unix-dgram", &[&name]).watch_box(w))
        }),
        p(U, "net-on-dgram-abstract", "with --network, sendto an abstract datagram socket; proves abstract datagrams stay closed", |fx| {
            let (name, w) = fx.unix_dgram(None)?;
            net_on(fx, Plan::op(fx, "unix-abstract-dgram", &[&name]).watch_box(w))
        }),
        p(U, "net-on-socketpair-sendto", "with --network, sendto a daemon's path from a datagram pair; proves pairs stay closed", |fx| {
            let (name, w) = fx.unix_dgram(Some(&fx.outside.join("pair.sock")))?;
            net_on(fx, Plan::op(fx, "socketpair-dgram-send", &[&name]).watch_box(w))
        }),
    ]
}

/// A probe through cordon's proxy: `--allow-host localhost:PORT` (so only the
/// address checks stand between the command and the listener), a TCP listener on
/// 127.0.0.1:PORT; the host control connects to it directly.
fn proxy(fx: &Fixture, op: &str, args: fn(u16) -> Vec<String>) -> Result<Plan, Skip> {
    cordon_only(fx, "cordon's --allow-host proxy")?;
    let (port, w) = fx.tcp(false)?;
    let a = args(port);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    Ok(Plan::op(fx, op, &a).watch_box(w).flags(&["--allow-host", &format!("localhost:{port}")]).control_op(
        fx,
        "tcp",
        &["127.0.0.1", &port.to_string()],
    ))
}

/// The same probe with cordon's `--network` (IP open): cordon only.
fn net_on(fx: &Fixture, plan: Plan) -> Result<Plan, Skip> {
    cordon_only(fx, "cordon's --network")?;
    Ok(plan.flags(&["--network"]))
}
