//! The proxy itself (Linux: it feeds the seccomp supervisor's denial record): the
//! listener, CONNECT, absolute-URI HTTP and SOCKS5, each parsed by [`super::http`] or
//! [`super::socks`] and decided by [`super::rules`].

use super::http::{self, Framing, ProxyTarget};
use super::rules::{self, Grant, HostPort, ProxyRefusal, Refusal, Target, Via};
use super::socks::{self, SocksHost};
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
/// resolution may be a loopback address ([`AllowList::check_addrs`]); every other check
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
    /// The host's own interface addresses, judged like loopback
    /// ([`rules::AddrClass::Host`]). `None`: read them from the kernel for each
    /// request (addresses change while a run lasts); tests set them.
    pub host_addrs: Option<Vec<IpAddr>>,
}

struct Shared {
    config: ProxyConfig,
    own: SocketAddr,
    log: Mutex<NetworkLog>,
    denials: DenialSink,
    live: AtomicUsize,
    stop: AtomicBool,
}

/// The denial for a refusal: kind `network`, the parsed `host:port` as its target (none
/// when the request named nothing cordon could parse; the client's text is never a
/// target), evidence `proxy refused: <why>`, and the typed refusal.
fn refusal_denial(host: Option<HostPort>, why: Refusal) -> Denial {
    Denial {
        kind: DenialKind::Network,
        target: host.as_ref().map(ToString::to_string),
        evidence: format!("proxy refused: {}", why.why(host.as_ref())),
        line: None,
        proxy: Some(ProxyRefusal { host, why }),
    }
}

impl Shared {
    fn refuse(&self, host: Option<&HostPort>, why: Refusal) {
        crate::denials::record(&self.denials, refusal_denial(host.cloned(), why));
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
    if first == socks::VERSION {
        socks5(reader, s);
    } else {
        http(reader, s);
    }
}

/// The host's own interface addresses (every family, every interface), for
/// [`AllowList::check_addrs`]. When the kernel cannot list them, every address of the
/// request is taken for one of the host's own (fail closed: only an exactly listed IP
/// is then reached).
fn host_addrs(s: &Shared, resolved: &[IpAddr]) -> Vec<IpAddr> {
    if let Some(fixed) = &s.config.host_addrs {
        return fixed.clone();
    }
    match nix::ifaddrs::getifaddrs() {
        Ok(list) => list
            .filter_map(|i| {
                let a = i.address?;
                a.as_sockaddr_in()
                    .map(|v4| IpAddr::V4(v4.ip()))
                    .or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
            })
            .collect(),
        Err(_) => resolved.to_vec(),
    }
}

/// Resolve a decided target and check its addresses; the addresses to connect to.
fn resolve_checked(s: &Shared, target: &HostPort, via: Via, grant: Grant) -> Result<Vec<SocketAddr>, Refusal> {
    let port = target.port;
    let (addrs, test) = match &target.host {
        Target::Ip(ip) => (vec![*ip], false),
        Target::Name(n) => match s.config.test_resolve.as_ref().and_then(|t| t.lookup(n)) {
            Some(ip) => (vec![ip], true),
            None => {
                let found = (n.as_str(), port).to_socket_addrs().map_err(|_| Refusal::Unresolved)?;
                let mut v: Vec<IpAddr> = found.map(|a| a.ip()).collect();
                v.dedup();
                (v, false)
            }
        },
    };
    let own = host_addrs(s, &addrs);
    s.config.allow.check_addrs(grant, port, via, &addrs, &own, test)?;
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
fn open(s: &Shared, target: &HostPort, via: Via) -> Result<TcpStream, NotOpened> {
    let literal = match target.host {
        Target::Ip(ip) => s.config.allow.check_literal(ip, target.port, via, &host_addrs(s, &[ip])),
        Target::Name(_) => Ok(()),
    };
    let decided = literal
        .and_then(|()| s.config.allow.decide(&target.host, target.port, via))
        .and_then(|g| resolve_checked(s, target, via, g));
    let addrs = match decided {
        Ok(a) => a,
        Err(why) => {
            s.refuse(Some(target), why);
            return Err(NotOpened::Refused);
        }
    };
    if addrs.contains(&s.own) {
        s.refuse(Some(target), Refusal::ProxyItself);
        return Err(NotOpened::Refused);
    }
    for a in &addrs {
        if let Ok(up) = TcpStream::connect_timeout(a, HANDSHAKE_TIMEOUT) {
            let _ = up.set_nodelay(true);
            s.allowed(NetworkLogEntry {
                host: target.host.to_string(),
                port: target.port,
                address: a.to_string(),
                via,
            });
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

/// Why [`read_head`] returned no head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoHead {
    /// The client went away or stalled (nothing to refuse).
    Closed,
    /// Over [`MAX_HEAD`] bytes (refused).
    TooLong,
}

/// Read a request head: the bytes through the first empty line (CRLF, or a bare LF,
/// which [`http::parse_head`] then refuses), at most [`MAX_HEAD`] bytes.
fn read_head(r: &mut BufReader<TcpStream>) -> Result<Vec<u8>, NoHead> {
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        let budget = (MAX_HEAD - head.len()) as u64 + 1;
        let n = r.by_ref().take(budget).read_until(b'\n', &mut line).map_err(|_| NoHead::Closed)?;
        if head.len() + n > MAX_HEAD {
            return Err(NoHead::TooLong);
        }
        if n == 0 || !line.ends_with(b"\n") {
            return Err(NoHead::Closed);
        }
        head.extend_from_slice(&line);
        if line == b"\r\n" || line == b"\n" {
            return Ok(head);
        }
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

fn http(mut reader: BufReader<TcpStream>, s: &Shared) {
    let head = read_head(&mut reader);
    let Ok(mut conn) = reader.get_ref().try_clone() else { return };
    let malformed = |conn: &mut TcpStream, host: Option<&HostPort>, problem: String| {
        s.refuse(host, Refusal::Malformed { problem });
        answer(conn, "400 Bad Request", "malformed request");
    };
    let head = match head.map(|h| http::parse_head(&h)) {
        Err(NoHead::Closed) => return,
        Err(NoHead::TooLong) => return malformed(&mut conn, None, http::HeadError::TooLong.to_string()),
        Ok(Err(e)) => return malformed(&mut conn, None, e.to_string()),
        Ok(Ok(h)) => h,
    };
    let (host, port, path) = match http::proxy_target(&head) {
        Ok(Some(ProxyTarget::Tunnel { host, port })) => (host, port, None),
        Ok(Some(ProxyTarget::Absolute { host, port, path })) => (host, port, Some(path)),
        Ok(None) => {
            s.refuse(None, Refusal::NotAProxyRequest);
            return answer(&mut conn, "403 Forbidden", "only CONNECT and absolute http:// requests");
        }
        Err(_) => {
            s.refuse(None, Refusal::BadHost);
            return answer(&mut conn, "403 Forbidden", "malformed host or port");
        }
    };
    let Some(target) = Target::parse(&host).map(|host| HostPort { host, port }) else {
        s.refuse(None, Refusal::BadHost);
        return answer(&mut conn, "403 Forbidden", "malformed host or port");
    };
    let framing = match head.framing() {
        Ok(f) => f,
        Err(e) => return malformed(&mut conn, Some(&target), e.to_string()),
    };
    if head.fields_named("proxy-authorization").next().is_some() {
        s.refuse(Some(&target), Refusal::ProxyCredentials);
        return answer(&mut conn, "403 Forbidden", "proxy credentials are not accepted");
    }
    let via = if path.is_none() { Via::Connect } else { Via::Http };
    let mut up = match open(s, &target, via) {
        Ok(up) => up,
        Err(NotOpened::Refused) => return answer(&mut conn, "403 Forbidden", &format!("{target} is not allowed")),
        Err(NotOpened::Unreachable) => {
            return answer(&mut conn, "502 Bad Gateway", &format!("{target} did not answer"))
        }
    };
    let Some(path) = path else {
        if conn.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").is_ok() {
            relay(reader, up);
        }
        return;
    };
    // Plain HTTP: a head rebuilt from the parsed fields, in origin form, for the
    // decided authority only.
    let host_header = if port == 80 { target.host.to_string() } else { target.to_string() };
    if up.write_all(&http::origin_head(&head, &path, &host_header, framing)).is_err() {
        return;
    }
    let _ = reader.get_ref().set_read_timeout(None);
    let Ok(mut back) = up.try_clone() else { return };
    let Ok(mut client_out) = reader.get_ref().try_clone() else { return };
    let sink = s.denials.clone();
    let sender = std::thread::Builder::new().name("cordon-proxy-body".into()).spawn(move || {
        if let Err(BodyError::Malformed(e)) = forward_body(&mut reader, &mut up, framing) {
            // The origin got a head and part of a body: cut the connection so it
            // sees an incomplete request, never a second one (recorded first, so the
            // refusal is in the sink before the client sees its connection end).
            crate::denials::record(&sink, refusal_denial(Some(target), Refusal::Malformed { problem: e.to_string() }));
            let _ = up.shutdown(Shutdown::Both);
        }
    });
    let _ = pump(&mut back, &mut client_out);
    let _ = client_out.shutdown(Shutdown::Both);
    let _ = back.shutdown(Shutdown::Both);
    if let Ok(t) = sender {
        let _ = t.join();
    }
}

/// Why [`forward_body`] stopped early.
#[derive(Debug)]
enum BodyError {
    /// The client or the origin went away.
    Io,
    /// The chunked framing is invalid (refused).
    Malformed(http::ChunkError),
}

impl From<io::Error> for BodyError {
    fn from(_: io::Error) -> Self {
        BodyError::Io
    }
}

/// Forward exactly the request body and nothing after it: `Content-Length` bytes, or
/// the chunked body decoded and re-encoded by cordon (extensions and trailers dropped).
fn forward_body(r: &mut BufReader<TcpStream>, up: &mut TcpStream, framing: Framing) -> Result<(), BodyError> {
    match framing {
        Framing::None => Ok(()),
        Framing::Length(n) => {
            let copied = io::copy(&mut r.by_ref().take(n), up)?;
            if copied == n {
                Ok(())
            } else {
                Err(BodyError::Io)
            }
        }
        Framing::Chunked => {
            let mut decoder = http::ChunkedDecoder::new(MAX_HEAD);
            let mut data = Vec::with_capacity(RELAY_BUFFER);
            loop {
                let buf = r.fill_buf()?;
                if buf.is_empty() {
                    return Err(BodyError::Io);
                }
                data.clear();
                let used = decoder.feed(buf, &mut data).map_err(BodyError::Malformed)?;
                r.consume(used);
                if !data.is_empty() {
                    up.write_all(&http::encode_chunk(&data))?;
                }
                if decoder.is_done() {
                    up.write_all(&http::encode_chunk(&[]))?;
                    return Ok(());
                }
            }
        }
    }
}

/// SOCKS5 reply codes (RFC 1928).
const SOCKS_OK: u8 = 0;
const SOCKS_FAILURE: u8 = 1;
const SOCKS_NOT_ALLOWED: u8 = 2;
const SOCKS_UNREACHABLE: u8 = 4;
const SOCKS_BAD_COMMAND: u8 = 7;
const SOCKS_BAD_ADDRESS: u8 = 8;
/// The longest SOCKS5 message: a request with a 255-byte name.
const MAX_SOCKS_MESSAGE: usize = 4 + 1 + 255 + 2;

fn socks_reply(conn: &mut TcpStream, code: u8) {
    // The bound address is not disclosed (0.0.0.0:0).
    let _ = conn.write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0]);
}

/// Read one SOCKS5 message byte by byte until `parse` has it (so nothing after it is
/// consumed): `Ok(None)` when the client went away.
fn read_socks<T>(
    r: &mut BufReader<TcpStream>,
    parse: impl Fn(&[u8]) -> socks::Parsed<T>,
) -> Result<Option<T>, socks::SocksError> {
    let mut buf = Vec::new();
    loop {
        if let Some((v, _)) = parse(&buf)? {
            return Ok(Some(v));
        }
        let mut b = [0u8; 1];
        if buf.len() >= MAX_SOCKS_MESSAGE || r.read_exact(&mut b).is_err() {
            return Ok(None);
        }
        buf.push(b[0]);
    }
}

fn socks5(mut reader: BufReader<TcpStream>, s: &Shared) {
    let Ok(mut conn) = reader.get_ref().try_clone() else { return };
    let methods = match read_socks(&mut reader, socks::parse_greeting) {
        Ok(Some(m)) => m,
        Ok(None) => return,
        Err(e) => return s.refuse(None, Refusal::Malformed { problem: e.to_string() }),
    };
    if !methods.contains(&socks::NO_AUTH) {
        // Only "no authentication": credentials would be for another proxy.
        let _ = conn.write_all(&[5, 0xff]);
        return;
    }
    if conn.write_all(&[5, socks::NO_AUTH]).is_err() {
        return;
    }
    let req = match read_socks(&mut reader, socks::parse_request) {
        Ok(Some(r)) => r,
        Ok(None) => return,
        Err(e) => {
            s.refuse(None, Refusal::Malformed { problem: e.to_string() });
            let code = if e == socks::SocksError::AddressType { SOCKS_BAD_ADDRESS } else { SOCKS_FAILURE };
            return socks_reply(&mut conn, code);
        }
    };
    let host = match &req.host {
        SocksHost::Ip(ip) => Some(Target::Ip(*ip)),
        SocksHost::Name(n) => std::str::from_utf8(n).ok().and_then(Target::parse),
    };
    let Some(target) = host.filter(|_| req.port != 0).map(|host| HostPort { host, port: req.port }) else {
        s.refuse(None, Refusal::BadHost);
        return socks_reply(&mut conn, SOCKS_NOT_ALLOWED);
    };
    if req.command != socks::CONNECT {
        s.refuse(Some(&target), Refusal::SocksCommand);
        return socks_reply(&mut conn, SOCKS_BAD_COMMAND);
    }
    match open(s, &target, Via::Socks5) {
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
