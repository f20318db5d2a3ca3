//! The network vocabulary of a result: the connections cordon's egress proxy made
//! ([`NetworkLog`]), what it refused and why ([`ProxyRefusal`], [`Refusal`]), and the
//! words both are made of: a strictly parsed [`HostPort`], the way a client came
//! ([`Via`]) and the class of an address by where the kernel connects it
//! ([`AddrClass`], [`classify`]).
//!
//! Kept here, below every room that reports or decides network access, so the result
//! can carry a proxy's refusal without importing the proxy. The host patterns and
//! allow-lists that decide are `crate::policy::hosts`; the proxy that applies them is
//! `crate::proxy` (docs/network.md).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// The longest host name accepted (RFC 1035: 253 characters in text form).
pub const MAX_HOST_LEN: usize = 253;
/// The longest label of a host name (RFC 1035).
const MAX_LABEL_LEN: usize = 63;

pub(crate) fn parse_port(p: &str) -> Option<u16> {
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    p.parse::<u16>().ok().filter(|p| *p != 0)
}

/// Normalize a DNS name the strict way: lower-case, one trailing dot removed, labels
/// of `[a-z0-9-]` (1 to 63 characters, no leading or trailing `-`), at most 253
/// characters, and a last label that starts with a letter (so `127.1`, `0x7f.1` and
/// `2130706433`, which resolvers read as IP addresses, are never names).
pub fn normalize_name(name: &str) -> Option<String> {
    let lower = name.to_ascii_lowercase();
    let n = lower.strip_suffix('.').unwrap_or(&lower);
    if n.is_empty() || n.len() > MAX_HOST_LEN {
        return None;
    }
    for label in n.split('.') {
        let ok = !label.is_empty()
            && label.len() <= MAX_LABEL_LEN
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !ok {
            return None;
        }
    }
    let last = n.rsplit('.').next()?;
    if !last.as_bytes()[0].is_ascii_lowercase() {
        return None;
    }
    Some(n.to_string())
}

/// How a client reached the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Via {
    /// An HTTP `CONNECT` tunnel (HTTPS, or anything else over TLS).
    Connect,
    /// A plain-HTTP request in absolute form (`GET http://host/path`).
    Http,
    /// A SOCKS5 `CONNECT`.
    Socks5,
}

impl Via {
    /// The ports allowed when the pattern names none: 443 for a tunnel, 80 for plain
    /// HTTP, either for SOCKS5 (which carries both).
    pub fn default_ports(self) -> &'static [u16] {
        match self {
            Via::Connect => &[443],
            Via::Http => &[80],
            Via::Socks5 => &[443, 80],
        }
    }
}

/// The host a client asked for, parsed strictly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A DNS name (normalized).
    Name(String),
    /// An IP literal.
    Ip(IpAddr),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Name(n) => write!(f, "{n}"),
            Target::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
            Target::Ip(IpAddr::V4(a)) => write!(f, "{a}"),
        }
    }
}

impl Target {
    /// Parse the host a client sent (`[v6]` brackets allowed); `None` when it is neither
    /// a strict DNS name nor an IP literal.
    pub fn parse(host: &str) -> Option<Target> {
        let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
        if let Some(v6) = bare {
            return v6.parse::<Ipv6Addr>().ok().map(|a| Target::Ip(IpAddr::V6(a)));
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Some(Target::Ip(ip));
        }
        normalize_name(host).map(Target::Name)
    }
}

/// A host and port as cordon's proxy parsed them from a request: a normalized name or
/// an IP literal, and a port from 1 to 65535. Built only by cordon (from a parsed
/// [`Target`], or by [`FromStr`], which is as strict); its text form is `name:port`,
/// `1.2.3.4:port` or `[v6]:port`, never a wildcard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    /// The host.
    pub host: Target,
    /// The port.
    pub port: u16,
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Why a `host:port` is not one exact host and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not one exact host and port (`name:port`, `1.2.3.4:port` or `[v6]:port`)")]
pub struct NotHostPort;

impl FromStr for HostPort {
    type Err = NotHostPort;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (host, port) = if s.starts_with('[') {
            let end = s.find(']').ok_or(NotHostPort)?;
            (&s[..=end], s[end + 1..].strip_prefix(':').ok_or(NotHostPort)?)
        } else {
            s.rsplit_once(':').filter(|(h, _)| !h.contains(':')).ok_or(NotHostPort)?
        };
        let host = Target::parse(host).ok_or(NotHostPort)?;
        if matches!(host, Target::Ip(ip) if classify(ip) == AddrClass::Unspecified) {
            return Err(NotHostPort);
        }
        Ok(HostPort { host, port: parse_port(port).ok_or(NotHostPort)? })
    }
}

impl serde::Serialize for HostPort {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for HostPort {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Why cordon's proxy refused a request (typed: the evidence text, the live hint and
/// whether a host grant could help all follow from it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Refusal {
    /// No pattern names the host (or the IP literal).
    NotListed,
    /// A pattern names the host, but not this port.
    Port,
    /// The host is, or resolves to, an address the list does not open.
    Address {
        /// The address.
        address: IpAddr,
        /// Its class (where the kernel would connect).
        class: AddrClass,
    },
    /// The name did not resolve.
    Unresolved,
    /// The request names the proxy's own address.
    ProxyItself,
    /// The request carries `Proxy-Authorization` (a client chaining to another proxy).
    ProxyCredentials,
    /// SOCKS5 `BIND` or `UDP ASSOCIATE`.
    SocksCommand,
    /// Neither `CONNECT` nor an absolute `http://` request (origin form, `https://` in
    /// absolute form, another scheme).
    NotAProxyRequest,
    /// The host part is not a strict DNS name or IP literal (`user@host`, `%`-escapes,
    /// `*.example.org`, `127.1`), or the port is not a number from 1 to 65535.
    BadHost,
    /// The request is not well-formed (HTTP or SOCKS5 framing).
    Malformed {
        /// What is wrong, in cordon's words (never the client's bytes).
        problem: String,
    },
}

impl Refusal {
    /// The evidence text (after `proxy refused: `), for the refused `host`.
    pub fn why(&self, host: Option<&HostPort>) -> String {
        match self {
            Refusal::NotListed => match host.map(|h| &h.host) {
                Some(Target::Ip(_)) => "IP address not in the allow-list".into(),
                _ => "host not in the allow-list".into(),
            },
            Refusal::Port => match host {
                Some(h) => format!("port {} is not allowed for this host", h.port),
                None => "port not allowed for this host".into(),
            },
            Refusal::Address { address, class } => match host.map(|h| &h.host) {
                Some(Target::Ip(_)) => format!("{} is {}", shown_ip(*address), class.described()),
                _ => format!("resolves to {}, {}", shown_ip(*address), class.described()),
            },
            Refusal::Unresolved => "the name did not resolve".into(),
            Refusal::ProxyItself => "the proxy itself".into(),
            Refusal::ProxyCredentials => "proxy credentials sent (a chained proxy?)".into(),
            Refusal::SocksCommand => "SOCKS5 BIND and UDP ASSOCIATE are not offered".into(),
            Refusal::NotAProxyRequest => "not an absolute http:// request or CONNECT".into(),
            Refusal::BadHost => "not a host name or IP address".into(),
            Refusal::Malformed { problem } => format!("malformed request: {problem}"),
        }
    }
}

pub(crate) fn shown_ip(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(a) => format!("[{a}]"),
        IpAddr::V4(a) => a.to_string(),
    }
}

/// A refusal of cordon's proxy, as recorded in a denial: what cordon parsed from the
/// request (`host`, absent when the request named no host and port cordon could
/// parse) and why it refused.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProxyRefusal {
    /// The host and port the proxy parsed (normalized), when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostPort>,
    /// Why.
    pub why: Refusal,
}

impl ProxyRefusal {
    /// The one host and port a host grant could open for this refusal: only a host the
    /// list did not name (or not on this port), since listing it would then have made
    /// the proxy connect to it. A refusal for an address, credentials, a SOCKS
    /// command or a malformed request is not helped by listing a host: `None`.
    pub fn grantable(&self) -> Option<&HostPort> {
        match self.why {
            Refusal::NotListed | Refusal::Port => self.host.as_ref(),
            _ => None,
        }
    }
}

/// Equal addresses, an IPv4-mapped IPv6 address equal to its IPv4 form.
pub(crate) fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    canonical_ip(a) == canonical_ip(b)
}

pub(crate) fn canonical_ip(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => a,
        },
        v4 => v4,
    }
}

/// The class of an address by where the kernel connects it, for
/// [`AllowList::check_addrs`](crate::policy::hosts::AllowList::check_addrs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AddrClass {
    /// Globally routable.
    Global,
    /// Private networks: 10/8, 172.16/12, 192.168/16, 100.64/10 (shared), fc00::/7
    /// (unique local) and the deprecated site-local fec0::/10.
    Private,
    /// 127/8, ::1.
    Loopback,
    /// One of the host's own interface addresses (not loopback): a connection to it
    /// reaches the host's own listeners, as loopback does.
    Host,
    /// 169.254/16, fe80::/10.
    LinkLocal,
    /// A cloud metadata endpoint: 169.254.169.254, fd00:ec2::254.
    Metadata,
    /// 0/8, `::` (and their mapped forms): the kernel connects `0.0.0.0` and `::` to
    /// loopback.
    Unspecified,
    /// 224/4, ff00::/8, 255.255.255.255.
    Multicast,
    /// Reserved, documentation, benchmarking and other special-purpose ranges, and
    /// IPv6 transition prefixes whose embedded IPv4 address cannot be checked (Teredo).
    Reserved,
}

impl AddrClass {
    /// A short name for evidence text.
    pub fn name(self) -> &'static str {
        match self {
            AddrClass::Global => "global",
            AddrClass::Private => "private-network",
            AddrClass::Loopback => "loopback",
            AddrClass::Host => "this host's own",
            AddrClass::LinkLocal => "link-local",
            AddrClass::Metadata => "metadata",
            AddrClass::Unspecified => "unspecified",
            AddrClass::Multicast => "multicast",
            AddrClass::Reserved => "reserved",
        }
    }

    /// "a reserved address", "an unspecified address (it connects to loopback)".
    pub(crate) fn described(self) -> String {
        let article = if matches!(self, AddrClass::Unspecified) { "an" } else { "a" };
        match self {
            AddrClass::Unspecified => format!("{article} unspecified address (it connects to this host's loopback)"),
            AddrClass::Host => "one of this host's own addresses".into(),
            c => format!("{article} {} address", c.name()),
        }
    }
}

/// [`classify`], with the host's own addresses (other than loopback and unspecified)
/// as [`AddrClass::Host`].
pub fn class_on(ip: IpAddr, host_addrs: &[IpAddr]) -> AddrClass {
    let class = classify(ip);
    match class {
        AddrClass::Loopback | AddrClass::Unspecified => class,
        _ if host_addrs.iter().any(|h| same_ip(*h, ip)) => AddrClass::Host,
        _ => class,
    }
}

/// Classify an IPv4 address.
fn classify_v4(a: Ipv4Addr) -> AddrClass {
    let o = a.octets();
    match o {
        [169, 254, 169, 254] => AddrClass::Metadata,
        [0, ..] => AddrClass::Unspecified,
        [127, ..] => AddrClass::Loopback,
        [10, ..] | [192, 168, ..] => AddrClass::Private,
        [172, b, ..] if (16..32).contains(&b) => AddrClass::Private,
        [100, b, ..] if (64..128).contains(&b) => AddrClass::Private,
        [169, 254, ..] => AddrClass::LinkLocal,
        [255, 255, 255, 255] => AddrClass::Multicast,
        [a, ..] if (224..240).contains(&a) => AddrClass::Multicast,
        [a, ..] if a >= 240 => AddrClass::Reserved,
        [192, 0, 0, _] | [192, 0, 2, _] | [198, 51, 100, _] | [203, 0, 113, _] | [192, 88, 99, _] => {
            AddrClass::Reserved
        }
        [198, b, ..] if b == 18 || b == 19 => AddrClass::Reserved,
        _ => AddrClass::Global,
    }
}

/// Classify an address (IPv6 forms that embed an IPv4 address are classified by it:
/// mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`).
pub fn classify(ip: IpAddr) -> AddrClass {
    let v6 = match ip {
        IpAddr::V4(v4) => return classify_v4(v4),
        IpAddr::V6(v6) => v6,
    };
    let s = v6.segments();
    if v6 == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254) {
        return AddrClass::Metadata;
    }
    if v6.is_unspecified() {
        return AddrClass::Unspecified;
    }
    if v6.is_loopback() {
        return AddrClass::Loopback;
    }
    let embedded = |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    if let Some(v4) = v6.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    if s[..6] == [0; 6] {
        return classify_v4(embedded(s[6], s[7])).max_special();
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return classify_v4(embedded(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return classify_v4(embedded(s[1], s[2]));
    }
    match s[0] {
        x if x & 0xfe00 == 0xfc00 => AddrClass::Private,
        x if x & 0xffc0 == 0xfec0 => AddrClass::Private,
        x if x & 0xffc0 == 0xfe80 => AddrClass::LinkLocal,
        x if x & 0xff00 == 0xff00 => AddrClass::Multicast,
        // Teredo (2001::/32) hides an IPv4 address; 2001:db8::/32 is documentation;
        // 100::/64 discards; 64:ff9b:1::/48 is local-use NAT64.
        0x2001 if s[1] == 0 || s[1] == 0x0db8 => AddrClass::Reserved,
        0x0100 if s[1..4] == [0, 0, 0] => AddrClass::Reserved,
        0x0064 if s[1] == 0xff9b => AddrClass::Reserved,
        _ => AddrClass::Global,
    }
}

impl AddrClass {
    /// The deprecated IPv4-compatible form (`::a.b.c.d`) is never global.
    fn max_special(self) -> AddrClass {
        if self == AddrClass::Global {
            AddrClass::Reserved
        } else {
            self
        }
    }
}

/// One connection the proxy made for the command.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NetworkLogEntry {
    /// The host the client asked for (a name, or an IP literal).
    pub host: String,
    /// The port.
    pub port: u16,
    /// The address the proxy connected to.
    pub address: String,
    /// How the client came.
    pub via: Via,
}

/// The allowed connections of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NetworkLog {
    /// The connections, in order (at most `crate::proxy::MAX_NETWORK_LOG`).
    pub entries: Vec<NetworkLogEntry>,
    /// How many more were made and not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
