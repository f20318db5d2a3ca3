//! Network operations: every socket family and address class, unix sockets
//! (pathname, abstract, pairs), listening, and requests through an HTTP or SOCKS5
//! proxy named by the environment.

use super::{Fail, Op, OpFn, Outcome, Step};
use cordon_stage::probe::net::{self as raw, RawAddr};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

const IPPROTO_MPTCP: i32 = 262;

pub(super) const OPS: &[(&str, OpFn)] = &[
    ("tcp", |o| stream_connect(o, 0)),
    ("mptcp", |o| stream_connect(o, IPPROTO_MPTCP)),
    ("tfo", tcp_fastopen),
    ("udp", |o| udp(o, Udp::SendTo, b"X")),
    ("udp-connect", |o| udp(o, Udp::Connect, b"X")),
    ("sendmmsg", |o| udp(o, Udp::Mmsg, b"X")),
    ("dns", |o| udp(o, Udp::SendTo, DNS_QUERY)),
    ("listen", listen),
    ("raw", |o| socket_only(o, libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP)),
    ("raw-udp", raw_udp),
    ("raw6", |o| socket_only(o, libc::AF_INET6, libc::SOCK_RAW, libc::IPPROTO_ICMPV6)),
    ("packet", |o| socket_only(o, libc::AF_PACKET, libc::SOCK_RAW, i32::from((libc::ETH_P_ALL as u16).to_be()))),
    ("ping", ping),
    ("netlink", netlink),
    ("socket", |o| {
        let (f, t, p) = (o.num(0)?, o.num(1)?, o.num(2)?);
        socket_only(o, f, t, p)
    }),
    ("socket-sweep", socket_sweep),
    ("unix-connect", |o| unix_stream(o, false, libc::SOCK_STREAM)),
    ("unix-seqpacket", |o| unix_stream(o, false, libc::SOCK_SEQPACKET)),
    ("unix-abstract", |o| unix_stream(o, true, libc::SOCK_STREAM)),
    ("unix-dgram", |o| unix_dgram(o, false)),
    ("unix-abstract-dgram", |o| unix_dgram(o, true)),
    ("socketpair", socketpair),
    ("socketpair-dgram-send", socketpair_dgram_send),
    ("proxy-connect", proxy_connect),
    ("proxy-get", proxy_get),
    ("socks5", socks5),
];

/// A DNS query for `example.com/A`, so a resolver-shaped listener sees a real one.
const DNS_QUERY: &[u8] = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01";

/// `struct sockaddr_in`/`sockaddr_in6` bytes for an IP literal and port.
pub(crate) fn inet_addr(ip: IpAddr, port: u16) -> RawAddr {
    let mut b = Vec::with_capacity(28);
    match ip {
        IpAddr::V4(v4) => {
            b.extend_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
            b.extend_from_slice(&port.to_be_bytes());
            b.extend_from_slice(&v4.octets());
            b.extend_from_slice(&[0; 8]);
        }
        IpAddr::V6(v6) => {
            b.extend_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
            b.extend_from_slice(&port.to_be_bytes());
            b.extend_from_slice(&[0; 4]);
            b.extend_from_slice(&v6.octets());
            b.extend_from_slice(&[0; 4]);
        }
    }
    RawAddr::new(&b).expect("at most 28 bytes")
}

/// A `sockaddr_un` for a path or (with `abstract_`) an abstract name.
fn unix_addr(name: &[u8], abstract_: bool) -> Result<RawAddr, Fail> {
    let mut b = Vec::with_capacity(110);
    b.extend_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
    if abstract_ {
        b.push(0);
        b.extend_from_slice(name);
    } else {
        b.extend_from_slice(name);
        b.push(0);
    }
    if b.len() > 110 {
        return Err(Fail::Usage("unix socket name too long".into()));
    }
    RawAddr::new(&b).ok_or_else(|| Fail::Usage("unix socket name too long".into()))
}

/// HOST (an IP literal) and PORT arguments.
fn host_port(o: &Op) -> Result<(IpAddr, u16), Fail> {
    let ip: IpAddr = o.text(0)?.parse().map_err(|_| Fail::Usage("HOST must be an IP literal".into()))?;
    Ok((ip, o.num(1)?))
}

fn family(ip: IpAddr) -> i32 {
    if ip.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    }
}

fn stream_connect(o: &mut Op, proto: i32) -> Outcome {
    let (ip, port) = host_port(o)?;
    let s = raw::socket(family(ip), libc::SOCK_STREAM, proto).step("socket")?;
    raw::connect(s.as_fd(), &inet_addr(ip, port)).step("connect")?;
    raw::send_to(s.as_fd(), b"X", 0, None).step("send").map(drop)
}

/// TCP Fast Open: connect and send in one `sendto(MSG_FASTOPEN)`, no `connect()`.
fn tcp_fastopen(o: &mut Op) -> Outcome {
    let (ip, port) = host_port(o)?;
    let s = raw::socket(family(ip), libc::SOCK_STREAM, 0).step("socket")?;
    raw::send_to(s.as_fd(), b"X", libc::MSG_FASTOPEN, Some(&inet_addr(ip, port))).step("sendto(MSG_FASTOPEN)").map(drop)
}

enum Udp {
    SendTo,
    Connect,
    Mmsg,
}

fn udp(o: &mut Op, how: Udp, payload: &[u8]) -> Outcome {
    let (ip, port) = host_port(o)?;
    let addr = inet_addr(ip, port);
    let s = raw::socket(family(ip), libc::SOCK_DGRAM, 0).step("socket")?;
    match how {
        Udp::SendTo => raw::send_to(s.as_fd(), payload, 0, Some(&addr)).step("sendto").map(drop),
        Udp::Connect => {
            raw::connect(s.as_fd(), &addr).step("connect")?;
            raw::send_to(s.as_fd(), payload, 0, None).step("send").map(drop)
        }
        Udp::Mmsg => raw::sendmmsg_to(s.as_fd(), payload, &addr).step("sendmmsg").map(drop),
    }
}

/// `listen HOST PORT MS`: bind, listen and accept for MS milliseconds; the detail
/// says how many connections arrived.
fn listen(o: &mut Op) -> Outcome {
    let (ip, port) = host_port(o)?;
    let ms: u64 = o.num(2)?;
    let s = raw::socket(family(ip), libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0).step("socket")?;
    let _ = raw::set_int_option(s.as_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1);
    raw::bind(s.as_fd(), &inet_addr(ip, port)).step("bind")?;
    raw::listen(s.as_fd(), 16).step("listen")?;
    let end = Instant::now() + Duration::from_millis(ms);
    let mut accepted = 0;
    while Instant::now() < end {
        match raw::accept(s.as_fd()) {
            Ok(_) => accepted += 1,
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    o.note(format!("listening; accepted={accepted}"));
    Ok(())
}

fn socket_only(_o: &mut Op, fam: i32, ty: i32, proto: i32) -> Outcome {
    raw::socket(fam, ty, proto).step("socket").map(drop)
}

/// An ICMP echo through an unprivileged ping socket.
fn ping(o: &mut Op) -> Outcome {
    let ip: IpAddr = o.text(0)?.parse().map_err(|_| Fail::Usage("HOST must be an IP literal".into()))?;
    let s = raw::socket(libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_ICMP).step("socket")?;
    let echo = [8u8, 0, 0, 0, 0, 0, 0, 0]; // type 8 (echo request), code 0
    raw::send_to(s.as_fd(), &echo, 0, Some(&inet_addr(ip, 0))).step("sendto").map(drop)
}

/// A UDP datagram to HOST:PORT (IPv4) built by hand on a raw socket.
fn raw_udp(o: &mut Op) -> Outcome {
    let (ip, port) = host_port(o)?;
    let s = raw::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_UDP).step("socket(SOCK_RAW)")?;
    let mut dgram = vec![];
    dgram.extend_from_slice(&40000u16.to_be_bytes()); // source port
    dgram.extend_from_slice(&port.to_be_bytes());
    dgram.extend_from_slice(&9u16.to_be_bytes()); // length: header + one byte
    dgram.extend_from_slice(&[0, 0]); // no checksum (allowed over IPv4)
    dgram.push(b'X');
    raw::send_to(s.as_fd(), &dgram, 0, Some(&inet_addr(ip, 0))).step("sendto").map(drop)
}

/// An `RTM_GETLINK` dump over a netlink route socket; the detail lists the interface
/// names (`links=lo,eth0`).
fn netlink(o: &mut Op) -> Outcome {
    let s = raw::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE).step("socket")?;
    let mut req = Vec::new();
    req.extend_from_slice(&20u32.to_ne_bytes()); // nlmsg_len
    req.extend_from_slice(&(libc::RTM_GETLINK).to_ne_bytes()); // nlmsg_type
    req.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
    req.extend_from_slice(&[0; 8]); // seq, pid
    req.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]); // rtgenmsg + padding
    let mut sa = (libc::AF_NETLINK as u16).to_ne_bytes().to_vec();
    sa.extend_from_slice(&[0; 10]);
    let addr = RawAddr::new(&sa).ok_or_else(|| Fail::Usage("address".into()))?;
    raw::send_to(s.as_fd(), &req, 0, Some(&addr)).step("sendto")?;
    let mut names = vec![];
    let mut buf = vec![0u8; 32768];
    'read: for _ in 0..64 {
        let n = raw::recv(s.as_fd(), &mut buf, 0).step("recv")?;
        let mut off = 0;
        while off + 16 <= n {
            let len = u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap_or_default()) as usize;
            let ty = u16::from_ne_bytes(buf[off + 4..off + 6].try_into().unwrap_or_default());
            if len < 16 || off + len > n || ty == libc::NLMSG_DONE as u16 || ty == libc::NLMSG_ERROR as u16 {
                break 'read;
            }
            // ifinfomsg (16 bytes) follows the header, then the attributes.
            let mut a = off + 32;
            while a + 4 <= off + len {
                let alen = u16::from_ne_bytes([buf[a], buf[a + 1]]) as usize;
                let aty = u16::from_ne_bytes([buf[a + 2], buf[a + 3]]);
                if alen < 4 || a + alen > off + len {
                    break;
                }
                if aty == libc::IFLA_IFNAME {
                    let v = &buf[a + 4..a + alen];
                    let end = v.iter().position(|b| *b == 0).unwrap_or(v.len());
                    names.push(String::from_utf8_lossy(&v[..end]).into_owned());
                }
                a += (alen + 3) & !3;
            }
            off += (len + 3) & !3;
        }
    }
    o.note(format!("links={}", names.join(",")));
    Ok(())
}

/// `socket()` for every family 0..64 and the common types; always ok, the detail
/// lists what could be created as `family/type`.
fn socket_sweep(o: &mut Op) -> Outcome {
    let mut made = vec![];
    for fam in 0..64 {
        for ty in [libc::SOCK_STREAM, libc::SOCK_DGRAM, libc::SOCK_RAW, libc::SOCK_SEQPACKET] {
            if raw::socket(fam, ty, 0).is_ok() {
                made.push(format!("{fam}/{ty}"));
            }
        }
    }
    o.note(format!("created=[{}]", made.join(",")));
    Ok(())
}

fn unix_stream(o: &mut Op, abstract_: bool, ty: i32) -> Outcome {
    use std::os::unix::ffi::OsStrExt;
    let addr = unix_addr(o.arg(0)?.as_bytes(), abstract_)?;
    let s = raw::socket(libc::AF_UNIX, ty, 0).step("socket")?;
    raw::connect(s.as_fd(), &addr).step("connect")?;
    raw::send_to(s.as_fd(), b"X", 0, None).step("send").map(drop)
}

fn unix_dgram(o: &mut Op, abstract_: bool) -> Outcome {
    use std::os::unix::ffi::OsStrExt;
    let addr = unix_addr(o.arg(0)?.as_bytes(), abstract_)?;
    let s = raw::socket(libc::AF_UNIX, libc::SOCK_DGRAM, 0).step("socket")?;
    raw::send_to(s.as_fd(), b"X", 0, Some(&addr)).step("sendto").map(drop)
}

fn socketpair(o: &mut Op) -> Outcome {
    let (a, b) = raw::socketpair(libc::AF_UNIX, libc::SOCK_STREAM).step("socketpair")?;
    raw::send_to(a.as_fd(), b"ping", 0, None).step("write")?;
    let mut buf = [0u8; 8];
    let n = raw::recv(b.as_fd(), &mut buf, 0).step("read")?;
    o.note(format!("read={}", String::from_utf8_lossy(&buf[..n])));
    Ok(())
}

/// A datagram pair end can `sendto()` a path: a host daemon's datagram socket reached
/// without `socket()` or `connect()`.
fn socketpair_dgram_send(o: &mut Op) -> Outcome {
    use std::os::unix::ffi::OsStrExt;
    let addr = unix_addr(o.arg(0)?.as_bytes(), false)?;
    let (a, _b): (OwnedFd, OwnedFd) = raw::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM).step("socketpair")?;
    raw::send_to(a.as_fd(), b"X", 0, Some(&addr)).step("sendto").map(drop)
}

/// The proxy named by `var` (`http://127.0.0.1:PORT` or `socks5h://...`).
fn proxy_addr(o: &mut Op, vars: &[&str]) -> Result<SocketAddr, Fail> {
    for v in vars {
        if let Ok(url) = std::env::var(v) {
            let rest = url.split("://").nth(1).unwrap_or(&url).trim_end_matches('/');
            if let Ok(a) = rest.parse::<SocketAddr>() {
                o.note(format!("{v}={url}"));
                return Ok(a);
            }
        }
    }
    Err(Fail::Os {
        step: format!("find a proxy in {}", vars.join("/")),
        err: io::Error::from_raw_os_error(libc::ENOENT),
    })
}

fn proxy_stream(a: SocketAddr) -> Result<TcpStream, Fail> {
    let s = TcpStream::connect_timeout(&a, Duration::from_secs(5)).step("connect(proxy)")?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    Ok(s)
}

/// The proxy's first reply line, or what it read.
fn reply_line(s: &mut TcpStream) -> String {
    let mut buf = vec![0u8; 512];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).lines().next().unwrap_or("").to_string()
}

fn refused_by_proxy(status: &str) -> Fail {
    Fail::Os { step: format!("proxy answered {status:?}"), err: io::Error::from_raw_os_error(libc::EACCES) }
}

/// `proxy-connect HOST:PORT`: an HTTP `CONNECT` through `$HTTPS_PROXY`, then one byte
/// through the tunnel.
fn proxy_connect(o: &mut Op) -> Outcome {
    let target = o.text(0)?.to_string();
    let a = proxy_addr(o, &["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"])?;
    let mut s = proxy_stream(a)?;
    write!(s, "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").step("write(CONNECT)")?;
    let status = reply_line(&mut s);
    if !status.contains(" 200") {
        return Err(refused_by_proxy(&status));
    }
    s.write_all(b"X").step("write(tunnel)")
}

/// `proxy-get URL`: an absolute-form `GET` through `$HTTP_PROXY`.
fn proxy_get(o: &mut Op) -> Outcome {
    let url = o.text(0)?.to_string();
    let a = proxy_addr(o, &["HTTP_PROXY", "http_proxy"])?;
    let mut s = proxy_stream(a)?;
    let host = url.split("://").nth(1).unwrap_or("").split('/').next().unwrap_or("").to_string();
    write!(s, "GET {url} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").step("write(GET)")?;
    let status = reply_line(&mut s);
    o.note(format!("status={status:?}"));
    if status.contains(" 403") || status.contains(" 502") || status.is_empty() {
        return Err(refused_by_proxy(&status));
    }
    Ok(())
}

/// `socks5 HOST PORT`: a SOCKS5 `CONNECT` through `$ALL_PROXY` (HOST an IP literal
/// or a name), then one byte.
fn socks5(o: &mut Op) -> Outcome {
    let host = o.text(0)?.to_string();
    let port: u16 = o.num(1)?;
    let a = proxy_addr(o, &["ALL_PROXY", "all_proxy"])?;
    let mut s = proxy_stream(a)?;
    s.write_all(&[5, 1, 0]).step("write(greeting)")?;
    let mut g = [0u8; 2];
    s.read_exact(&mut g).step("read(method)")?;
    let mut req = vec![5, 1, 0];
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => {
            req.push(1);
            req.extend_from_slice(&v4.octets());
        }
        Ok(IpAddr::V6(v6)) => {
            req.push(4);
            req.extend_from_slice(&v6.octets());
        }
        Err(_) => {
            req.push(3);
            req.push(u8::try_from(host.len()).map_err(|_| Fail::Usage("name too long".into()))?);
            req.extend_from_slice(host.as_bytes());
        }
    }
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).step("write(CONNECT)")?;
    let mut r = [0u8; 2];
    s.read_exact(&mut r).step("read(reply)")?;
    if r[1] != 0 {
        return Err(refused_by_proxy(&format!("SOCKS5 reply {}", r[1])));
    }
    let mut rest = [0u8; 8];
    let _ = s.read(&mut rest);
    s.write_all(b"X").step("write(tunnel)")
}
