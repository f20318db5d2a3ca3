//! The proxy itself (Linux: it feeds the seccomp supervisor's denial record): the
//! listener, CONNECT, absolute-URI HTTP and SOCKS5, each decision by [`super::rules`].

use super::rules::{self, Grant, Target, Via};
use super::*;
use crate::denials::DenialSink;
use crate::result::{Denial, DenialKind};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A map of test-only names to addresses, so tests can reach local servers by name
/// without DNS. Honoured only in debug builds (`cfg!(debug_assertions)`): a release
/// build never reads [`TEST_RESOLVE_ENV`]. Its names are the only ones whose
/// resolution may be a loopback address ([`rules::check_addrs`]); every other check
/// applies to them as to DNS answers (so a test name mapped to `169.254.169.254` shows
/// the metadata refusal), and the allow-list still decides whether they are reachable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TestResolver {
    map: Vec<(String, IpAddr)>,
}

impl TestResolver {
    /// Parse `name=ip,name=ip` (debug builds only; `None` otherwise, or when unset).
    /// Entries whose name is not strict or whose address does not parse are ignored.
    pub fn from_env() -> Option<TestResolver> {
        if !cfg!(debug_assertions) {
            return None;
        }
        let spec = std::env::var(TEST_RESOLVE_ENV).ok()?;
        Some(TestResolver::parse(&spec))
    }

    fn parse(spec: &str) -> TestResolver {
        let map = spec
            .split(',')
            .filter_map(|e| {
                let (n, a) = e.split_once('=')?;
                let ip: IpAddr = a.trim().parse().ok()?;
                rules::normalize_name(n.trim()).map(|n| (n, ip))
            })
            .collect();
        TestResolver { map }
    }

    fn lookup(&self, name: &str) -> Option<IpAddr> {
        self.map.iter().find(|(n, _)| n == name).map(|(_, a)| *a)
    }
}

/// What a proxy needs.
#[derive(Debug, Clone, Default)]
pub struct ProxyConfig {
    /// The hosts the run may reach.
    pub allow: AllowList,
    /// The test resolver map (tests only; see [`TestResolver`]).
    pub test_resolve: Option<TestResolver>,
}

struct Shared {
    config: ProxyConfig,
    own: SocketAddr,
    log: Mutex<NetworkLog>,
    denials: DenialSink,
    live: AtomicUsize,
    stop: AtomicBool,
}

impl Shared {
    fn refuse(&self, target: String, why: &str) {
        crate::denials::record(
            &self.denials,
            Denial {
                kind: DenialKind::Network,
                target: Some(target),
                evidence: format!("proxy refused: {why}"),
                line: None,
            },
        );
    }

    fn allowed(&self, entry: NetworkLogEntry) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if log.entries.len() < MAX_NETWORK_LOG {
            log.entries.push(entry);
        } else {
            log.dropped += 1;
        }
    }
}

/// A running proxy; stops when finished or dropped (open tunnels end with the run's
/// processes, whose sockets close).
pub struct Proxy {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Bind `127.0.0.1:0` and serve until finished.
    pub fn start(config: ProxyConfig, denials: DenialSink) -> io::Result<Proxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let own = listener.local_addr()?;
        let shared = Arc::new(Shared {
            config,
            own,
            log: Mutex::new(NetworkLog::default()),
            denials,
            live: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        let thread =
            std::thread::Builder::new().name("cordon-proxy".into()).spawn(move || accept_loop(&listener, &s))?;
        Ok(Proxy { shared, thread: Some(thread) })
    }

    /// The address the command is told to use (and the only one it may connect to).
    pub fn addr(&self) -> SocketAddr {
        self.shared.own
    }

    /// Stop accepting, and return the connections made.
    pub fn finish(mut self) -> NetworkLog {
        self.stop();
        let log = self.shared.log.lock().unwrap_or_else(|p| p.into_inner());
        log.clone()
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.shared.own, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The environment that points clients at the proxy at `addr` (the `*_proxy`
/// variables in both cases, npm's and git's settings). `NO_PROXY` is empty: nothing
/// bypasses the proxy (a direct connection would be refused anyway).
pub fn client_env(addr: SocketAddr) -> Vec<(String, String)> {
    let http = format!("http://{addr}");
    let socks = format!("socks5h://{addr}");
    let mut env = Vec::new();
    for (name, value) in
        [("HTTP_PROXY", &http), ("HTTPS_PROXY", &http), ("ALL_PROXY", &socks), ("NO_PROXY", &String::new())]
    {
        env.push((name.to_string(), value.clone()));
        env.push((name.to_ascii_lowercase(), value.clone()));
    }
    env.push(("npm_config_proxy".into(), http.clone()));
    env.push(("npm_config_https_proxy".into(), http.clone()));
    env.push(("GIT_CONFIG_COUNT".into(), "1".into()));
    env.push(("GIT_CONFIG_KEY_0".into(), "http.proxy".into()));
    env.push(("GIT_CONFIG_VALUE_0".into(), http));
    env
}

fn accept_loop(listener: &TcpListener, s: &Arc<Shared>) {
    for conn in listener.incoming() {
        if s.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(conn) = conn else { continue };
        if s.live.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            s.live.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        let s2 = s.clone();
        let spawned = std::thread::Builder::new().name("cordon-proxy-conn".into()).spawn(move || {
            serve_client(conn, &s2);
            s2.live.fetch_sub(1, Ordering::SeqCst);
        });
        if spawned.is_err() {
            s.live.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn serve_client(conn: TcpStream, s: &Shared) {
    let _ = conn.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
    let _ = conn.set_nodelay(true);
    let mut reader = BufReader::with_capacity(MAX_HEAD, conn);
    let first = match reader.fill_buf() {
        Ok([]) | Err(_) => return,
        Ok(b) => b[0],
    };
    if first == 5 {
        socks5(reader, s);
    } else {
        http(reader, s);
    }
}

/// Resolve a decided target and check its addresses; the addresses to connect to.
fn resolve_checked(s: &Shared, target: &Target, port: u16, grant: Grant) -> Result<Vec<SocketAddr>, String> {
    let (addrs, test) = match target {
        Target::Ip(ip) => (vec![*ip], false),
        Target::Name(n) => match s.config.test_resolve.as_ref().and_then(|t| t.lookup(n)) {
            Some(ip) => (vec![ip], true),
            None => {
                let found = (n.as_str(), port).to_socket_addrs().map_err(|_| "the name did not resolve".to_string())?;
                let mut v: Vec<IpAddr> = found.map(|a| a.ip()).collect();
                v.dedup();
                (v, false)
            }
        },
    };
    rules::check_addrs(grant, &addrs, test)?;
    Ok(addrs.into_iter().map(|ip| SocketAddr::new(ip, port)).collect())
}

/// Why [`open`] made no connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NotOpened {
    /// Refused (and recorded as a denial).
    Refused,
    /// Allowed, but no checked address answered: not a refusal by the sandbox, so not
    /// a denial.
    Unreachable,
}

/// Decide, resolve, check and connect.
fn open(s: &Shared, host: &str, port: u16, via: Via) -> Result<TcpStream, NotOpened> {
    let shown = format!("{host}:{port}");
    let Some(target) = Target::parse(host) else {
        s.refuse(shown, "not a host name or IP address");
        return Err(NotOpened::Refused);
    };
    let shown = format!("{target}:{port}");
    let decided = s.config.allow.decide(&target, port, via).and_then(|g| resolve_checked(s, &target, port, g));
    let addrs = match decided {
        Ok(a) => a,
        Err(why) => {
            s.refuse(shown, &why);
            return Err(NotOpened::Refused);
        }
    };
    for a in &addrs {
        if *a == s.own {
            s.refuse(shown, "the proxy itself");
            return Err(NotOpened::Refused);
        }
    }
    for a in &addrs {
        if let Ok(up) = TcpStream::connect_timeout(a, HANDSHAKE_TIMEOUT) {
            let _ = up.set_nodelay(true);
            s.allowed(NetworkLogEntry { host: target.to_string(), port, address: a.to_string(), via });
            return Ok(up);
        }
    }
    Err(NotOpened::Unreachable)
}

/// The relay buffer: `std::io::copy` between two sockets moves 8 KiB per call (its
/// splice fast path needs a pipe); 64 KiB per call costs fewer syscalls per megabyte.
const RELAY_BUFFER: usize = 64 * 1024;

/// Copy until `from` ends, [`RELAY_BUFFER`] bytes at a time.
fn pump(from: &mut impl Read, to: &mut impl Write) -> io::Result<u64> {
    let mut buf = vec![0u8; RELAY_BUFFER];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        total += n as u64;
    }
}

/// Relay both ways until each side has finished; `pending` (bytes the client sent
/// after its head) goes to the origin first.
fn relay(client: BufReader<TcpStream>, up: TcpStream) {
    let pending = client.buffer().to_vec();
    let client = client.into_inner();
    let _ = client.set_read_timeout(None);
    let (Ok(mut c_read), Ok(mut u_write)) = (client.try_clone(), up.try_clone()) else { return };
    let to_up = std::thread::Builder::new().name("cordon-proxy-up".into()).spawn(move || {
        if u_write.write_all(&pending).is_ok() {
            let _ = pump(&mut c_read, &mut u_write);
        }
        let _ = u_write.shutdown(Shutdown::Write);
    });
    let (mut u_read, mut c_write) = (up, client);
    let _ = pump(&mut u_read, &mut c_write);
    let _ = c_write.shutdown(Shutdown::Write);
    if let Ok(t) = to_up {
        let _ = t.join();
    }
}

/// Read a request head (through the blank line), bounded by [`MAX_HEAD`].
fn read_head(r: &mut BufReader<TcpStream>) -> Option<Vec<String>> {
    let mut lines = Vec::new();
    let mut total = 0;
    loop {
        let mut line = Vec::new();
        let n = r.by_ref().take((MAX_HEAD - total) as u64 + 1).read_until(b'\n', &mut line).ok()?;
        total += n;
        if n == 0 || total > MAX_HEAD || !line.ends_with(b"\n") {
            return None;
        }
        let text = String::from_utf8(line).ok()?;
        let text = text.trim_end_matches(['\r', '\n']).to_string();
        if text.is_empty() {
            return Some(lines);
        }
        lines.push(text);
    }
}

fn answer(conn: &mut TcpStream, status: &str, why: &str) {
    let body = format!("cordon proxy: {why}\n");
    let _ = write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// Split an authority `host[:port]` (`[v6]:port` too); `None` when malformed.
fn split_authority(a: &str, default_port: Option<u16>) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = a.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        (format!("[{h}]"), after.strip_prefix(':'))
    } else {
        match a.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (a.to_string(), None),
        }
    };
    let port = match port {
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => p.parse().ok()?,
        Some(_) => return None,
        None => default_port?,
    };
    Some((host, port))
}

fn http(mut reader: BufReader<TcpStream>, s: &Shared) {
    let Some(head) = read_head(&mut reader) else { return };
    let Ok(mut conn) = reader.get_ref().try_clone() else { return };
    let Some(request_line) = head.first() else { return };
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        answer(&mut conn, "400 Bad Request", "malformed request line");
        return;
    };
    if !version.starts_with("HTTP/1.") {
        answer(&mut conn, "400 Bad Request", "HTTP/1.x only");
        return;
    }
    let headers: Vec<(String, String)> = head[1..]
        .iter()
        .filter_map(|l| l.split_once(':').map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string())))
        .collect();
    let via = if method == "CONNECT" { Via::Connect } else { Via::Http };
    let authority = if via == Via::Connect {
        split_authority(target, None).map(|(h, p)| (h, p, String::new()))
    } else if let Some(rest) = target.strip_prefix("http://") {
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let path = match &rest[end..] {
            p if p.starts_with('/') => p.to_string(),
            p => format!("/{p}"),
        };
        split_authority(&rest[..end], Some(80)).map(|(h, p)| (h, p, path))
    } else {
        let shown = target.chars().take(80).collect::<String>();
        s.refuse(shown, "not an absolute http:// request or CONNECT");
        answer(&mut conn, "403 Forbidden", "only CONNECT and absolute http:// requests");
        return;
    };
    let Some((host, port, path)) = authority else {
        s.refuse(target.chars().take(80).collect(), "malformed host or port");
        answer(&mut conn, "403 Forbidden", "malformed host or port");
        return;
    };
    if headers.iter().any(|(n, _)| n == "proxy-authorization") {
        s.refuse(format!("{host}:{port}"), "proxy credentials sent (a chained proxy?)");
        answer(&mut conn, "403 Forbidden", "proxy credentials are not accepted");
        return;
    }
    let mut up = match open(s, &host, port, via) {
        Ok(up) => up,
        Err(NotOpened::Refused) => {
            answer(&mut conn, "403 Forbidden", &format!("{host}:{port} is not allowed"));
            return;
        }
        Err(NotOpened::Unreachable) => {
            answer(&mut conn, "502 Bad Gateway", &format!("{host}:{port} did not answer"));
            return;
        }
    };
    if via == Via::Connect {
        if conn.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").is_ok() {
            relay(reader, up);
        }
        return;
    }
    // Plain HTTP: the request in origin form, for this authority only.
    let host_header = if port == 80 { host.clone() } else { format!("{host}:{port}") };
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: {host_header}\r\n");
    let mut body = Body::None;
    for (name, value) in &headers {
        match name.as_str() {
            "host" | "connection" | "proxy-connection" | "keep-alive" | "proxy-authorization" => continue,
            "content-length" => match value.parse::<u64>() {
                Ok(n) if matches!(body, Body::None) => body = Body::Length(n),
                _ => {
                    answer(&mut conn, "400 Bad Request", "conflicting body framing");
                    return;
                }
            },
            "transfer-encoding" => {
                if !value.eq_ignore_ascii_case("chunked") || !matches!(body, Body::None) {
                    answer(&mut conn, "400 Bad Request", "unsupported body framing");
                    return;
                }
                body = Body::Chunked;
            }
            _ => {}
        }
        let original =
            head[1..].iter().find(|l| l.split_once(':').is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(name)));
        if let Some(line) = original {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    if up.write_all(out.as_bytes()).is_err() {
        return;
    }
    let _ = reader.get_ref().set_read_timeout(None);
    let Ok(mut back) = up.try_clone() else { return };
    let Ok(mut client_out) = reader.get_ref().try_clone() else { return };
    let sender = std::thread::Builder::new().name("cordon-proxy-body".into()).spawn(move || {
        let _ = forward_body(&mut reader, &mut up, body);
    });
    let _ = pump(&mut back, &mut client_out);
    let _ = client_out.shutdown(Shutdown::Both);
    let _ = back.shutdown(Shutdown::Both);
    if let Ok(t) = sender {
        let _ = t.join();
    }
}

/// How a plain-HTTP request's body is framed.
#[derive(Debug, Clone, Copy)]
enum Body {
    None,
    Length(u64),
    Chunked,
}

/// Forward exactly the request body and nothing after it.
fn forward_body(r: &mut BufReader<TcpStream>, up: &mut TcpStream, body: Body) -> io::Result<()> {
    match body {
        Body::None => Ok(()),
        Body::Length(n) => {
            let copied = io::copy(&mut r.by_ref().take(n), up)?;
            if copied == n {
                Ok(())
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            }
        }
        Body::Chunked => loop {
            let mut line = Vec::new();
            r.by_ref().take(1024).read_until(b'\n', &mut line)?;
            if !line.ends_with(b"\n") {
                return Err(io::ErrorKind::InvalidData.into());
            }
            up.write_all(&line)?;
            let text = String::from_utf8_lossy(&line);
            let size = text.trim().split(';').next().unwrap_or("");
            let size = u64::from_str_radix(size.trim(), 16).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
            if size == 0 {
                // Trailers, through the blank line.
                loop {
                    let mut t = Vec::new();
                    r.by_ref().take(MAX_HEAD as u64).read_until(b'\n', &mut t)?;
                    if !t.ends_with(b"\n") {
                        return Err(io::ErrorKind::InvalidData.into());
                    }
                    up.write_all(&t)?;
                    if t == b"\r\n" || t == b"\n" {
                        return Ok(());
                    }
                }
            }
            let copied = io::copy(&mut r.by_ref().take(size + 2), up)?;
            if copied != size + 2 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        },
    }
}

/// SOCKS5 reply codes (RFC 1928).
const SOCKS_OK: u8 = 0;
const SOCKS_NOT_ALLOWED: u8 = 2;
const SOCKS_UNREACHABLE: u8 = 4;
const SOCKS_BAD_COMMAND: u8 = 7;
const SOCKS_BAD_ADDRESS: u8 = 8;

fn socks_reply(conn: &mut TcpStream, code: u8) {
    // The bound address is not disclosed (0.0.0.0:0).
    let _ = conn.write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0]);
}

fn socks5(mut reader: BufReader<TcpStream>, s: &Shared) {
    let Ok(mut conn) = reader.get_ref().try_clone() else { return };
    let mut hello = [0u8; 2];
    if reader.read_exact(&mut hello).is_err() {
        return;
    }
    let mut methods = vec![0u8; usize::from(hello[1])];
    if reader.read_exact(&mut methods).is_err() {
        return;
    }
    if !methods.contains(&0) {
        // Only "no authentication": credentials would be for another proxy.
        let _ = conn.write_all(&[5, 0xff]);
        return;
    }
    if conn.write_all(&[5, 0]).is_err() {
        return;
    }
    let mut req = [0u8; 4];
    if reader.read_exact(&mut req).is_err() || req[0] != 5 {
        return;
    }
    let host = match req[3] {
        1 => {
            let mut a = [0u8; 4];
            if reader.read_exact(&mut a).is_err() {
                return;
            }
            Ipv4Addr::from(a).to_string()
        }
        4 => {
            let mut a = [0u8; 16];
            if reader.read_exact(&mut a).is_err() {
                return;
            }
            format!("[{}]", std::net::Ipv6Addr::from(a))
        }
        3 => {
            let mut len = [0u8; 1];
            if reader.read_exact(&mut len).is_err() {
                return;
            }
            let mut name = vec![0u8; usize::from(len[0])];
            if reader.read_exact(&mut name).is_err() {
                return;
            }
            String::from_utf8_lossy(&name).into_owned()
        }
        _ => {
            socks_reply(&mut conn, SOCKS_BAD_ADDRESS);
            return;
        }
    };
    let mut port = [0u8; 2];
    if reader.read_exact(&mut port).is_err() {
        return;
    }
    let port = u16::from_be_bytes(port);
    if req[1] != 1 {
        s.refuse(format!("{host}:{port}"), "SOCKS5 BIND and UDP ASSOCIATE are not offered");
        socks_reply(&mut conn, SOCKS_BAD_COMMAND);
        return;
    }
    match open(s, &host, port, Via::Socks5) {
        Ok(up) => {
            socks_reply(&mut conn, SOCKS_OK);
            relay(reader, up);
        }
        Err(NotOpened::Refused) => socks_reply(&mut conn, SOCKS_NOT_ALLOWED),
        Err(NotOpened::Unreachable) => socks_reply(&mut conn, SOCKS_UNREACHABLE),
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
