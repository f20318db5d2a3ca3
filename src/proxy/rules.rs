//! The proxy's decisions, as pure functions: host patterns (`--allow-host`), strict
//! matching of the name a client asked for, and the classes of addresses a name may
//! resolve to.
//!
//! What it decides:
//! 1. **The name.** A request names a host; it is allowed only if an [`AllowList`]
//!    pattern matches it exactly (`pypi.org`) or as a proper subdomain of a wildcard
//!    (`*.pythonhosted.org` matches `files.pythonhosted.org`, not `pythonhosted.org`,
//!    not `evil-pythonhosted.org`). Names are compared lower-cased with one trailing
//!    dot removed; anything that is not a plain DNS name (`user@host`, `%`-escapes,
//!    spaces, a last label that is not alphabetic such as `127.1` or `0x7f.1`) is
//!    refused before any pattern is consulted.
//! 2. **IP literals** are allowed only when that address is listed as a pattern.
//! 3. **The port**: the pattern's `:port`, or the default of the way the client came
//!    ([`Via::default_ports`]: 443 for `CONNECT`, 80 for plain HTTP, either for SOCKS5).
//! 4. **The addresses** the name resolved to ([`check_addrs`]), on every resolution:
//!    an address that is not globally routable ([`AddrClass`]) is refused unless the
//!    pattern that allowed the request lists that very IP; a name listed exactly (not a
//!    wildcard) may also reach private-network addresses (an internal registry), never
//!    loopback, link-local, metadata, unspecified, multicast or reserved ones. If any
//!    resolved address is refused, the whole request is (a mixed answer is a rebinding
//!    attempt or a misconfiguration, and either way not worth guessing about).
//!
//! What it does not do: it cannot tell what an allowed host does with the bytes (an
//! allowed domain that accepts uploads is an exfiltration channel; docs/network.md).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// The longest host name accepted (RFC 1035: 253 characters in text form).
pub const MAX_HOST_LEN: usize = 253;
/// The longest label of a host name (RFC 1035).
const MAX_LABEL_LEN: usize = 63;

/// Why an `--allow-host` pattern is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatternError {
    /// The pattern is empty.
    #[error("`--allow-host` pattern is empty")]
    Empty,
    /// The port is not a number from 1 to 65535.
    #[error("`--allow-host {pattern}`: port must be a number from 1 to 65535")]
    BadPort {
        /// The pattern as given.
        pattern: String,
    },
    /// The host part is not a DNS name, a `*.suffix` wildcard or an IP address.
    #[error("`--allow-host {pattern}`: `{host}` is not a host name, a `*.domain` wildcard or an IP address")]
    BadHost {
        /// The pattern as given.
        pattern: String,
        /// The host part.
        host: String,
    },
    /// A wildcard names a top-level domain only (`*.com`), or is a bare `*`.
    #[error("`--allow-host {pattern}`: a wildcard must name a domain of at least two labels (`*.example.org`)")]
    WildcardTooBroad {
        /// The pattern as given.
        pattern: String,
    },
}

/// What a pattern's host part is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum HostMatch {
    /// Exactly this name (lower-case, no trailing dot).
    Exact(String),
    /// Any proper subdomain of this name.
    Suffix(String),
    /// Exactly this address (as an IP literal, and the only address it may reach).
    Ip(IpAddr),
}

/// One `--allow-host` pattern: `pypi.org`, `*.githubusercontent.com`, `10.0.0.5`,
/// `[fd00::1]`, each with an optional `:port`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HostPattern {
    host: HostMatch,
    port: Option<u16>,
}

impl HostPattern {
    /// The port the pattern names, if any.
    pub fn port(&self) -> Option<u16> {
        self.port
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostMatch::Exact(n) => write!(f, "{n}")?,
            HostMatch::Suffix(n) => write!(f, "*.{n}")?,
            HostMatch::Ip(IpAddr::V6(a)) => write!(f, "[{a}]")?,
            HostMatch::Ip(IpAddr::V4(a)) => write!(f, "{a}")?,
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

impl serde::Serialize for HostPattern {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for HostPattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Split `host[:port]` / `[v6][:port]` / bare `v6`; `None` when malformed.
fn split_host_port(s: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            a => Some((host, Some(a.strip_prefix(':')?))),
        };
    }
    match s.matches(':').count() {
        0 => Some((s, None)),
        1 => s.split_once(':').map(|(h, p)| (h, Some(p))),
        // A bare IPv6 address (no port possible without brackets).
        _ => Some((s, None)),
    }
}

fn parse_port(p: &str) -> Option<u16> {
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

impl FromStr for HostPattern {
    type Err = PatternError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let pattern = s.trim();
        if pattern.is_empty() {
            return Err(PatternError::Empty);
        }
        let bad_host = |host: &str| PatternError::BadHost { pattern: pattern.into(), host: host.into() };
        let (host, port) = split_host_port(pattern).ok_or_else(|| bad_host(pattern))?;
        let port = match port {
            None => None,
            Some(p) => Some(parse_port(p).ok_or_else(|| PatternError::BadPort { pattern: pattern.into() })?),
        };
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(HostPattern { host: HostMatch::Ip(ip), port });
        }
        if host == "*" {
            return Err(PatternError::WildcardTooBroad { pattern: pattern.into() });
        }
        if let Some(suffix) = host.strip_prefix("*.") {
            let name = normalize_name(suffix).ok_or_else(|| bad_host(host))?;
            if !name.contains('.') {
                return Err(PatternError::WildcardTooBroad { pattern: pattern.into() });
            }
            return Ok(HostPattern { host: HostMatch::Suffix(name), port });
        }
        let name = normalize_name(host).ok_or_else(|| bad_host(host))?;
        Ok(HostPattern { host: HostMatch::Exact(name), port })
    }
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

/// What a pattern grants once it matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// A wildcard: globally routable addresses only.
    Wildcard,
    /// A name listed exactly: also private-network addresses.
    ExactName,
    /// An IP listed exactly: that address, whatever its class.
    ExactIp(IpAddr),
}

/// The patterns a run may reach. Empty means nothing is reachable (never "anything").
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct AllowList {
    patterns: Vec<HostPattern>,
}

impl AllowList {
    /// Build from patterns (kept sorted and without duplicates).
    pub fn new(mut patterns: Vec<HostPattern>) -> AllowList {
        patterns.sort();
        patterns.dedup();
        AllowList { patterns }
    }

    /// Parse each of `patterns`.
    pub fn parse<S: AsRef<str>>(patterns: &[S]) -> Result<AllowList, PatternError> {
        let parsed = patterns.iter().map(|p| p.as_ref().parse()).collect::<Result<Vec<_>, _>>()?;
        Ok(AllowList::new(parsed))
    }

    /// The patterns.
    pub fn patterns(&self) -> &[HostPattern] {
        &self.patterns
    }

    /// True when no host is allowed.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Is every host this list allows also allowed by `ceiling`? (Each pattern must be
    /// covered by one ceiling pattern: the same pattern, or an exact name under a
    /// ceiling wildcard, with the same port rule.)
    pub fn within(&self, ceiling: &AllowList) -> bool {
        self.patterns.iter().all(|p| {
            ceiling.patterns.iter().any(|c| {
                c.port == p.port
                    && match (&c.host, &p.host) {
                        (a, b) if a == b => true,
                        (HostMatch::Suffix(s), HostMatch::Exact(n)) => is_proper_subdomain(n, s),
                        (HostMatch::Suffix(s), HostMatch::Suffix(n)) => is_proper_subdomain(n, s),
                        _ => false,
                    }
            })
        })
    }

    /// Decide the host and port a client asked for, before any resolution.
    pub fn decide(&self, target: &Target, port: u16, via: Via) -> Result<Grant, String> {
        let mut name_matched = false;
        for p in &self.patterns {
            let grant = match (&p.host, target) {
                (HostMatch::Exact(n), Target::Name(t)) if n == t => Grant::ExactName,
                (HostMatch::Suffix(s), Target::Name(t)) if is_proper_subdomain(t, s) => Grant::Wildcard,
                (HostMatch::Ip(a), Target::Ip(t)) if same_ip(*a, *t) => Grant::ExactIp(*a),
                _ => continue,
            };
            name_matched = true;
            let port_ok = match p.port {
                Some(allowed) => allowed == port,
                None => via.default_ports().contains(&port),
            };
            if port_ok {
                return Ok(grant);
            }
        }
        if name_matched {
            return Err(format!("port {port} is not allowed for this host"));
        }
        Err(match target {
            Target::Ip(_) => "IP address not in the allow-list".into(),
            Target::Name(_) => "host not in the allow-list".into(),
        })
    }
}

/// `name` is `suffix` with at least one more label in front (`a.b.c` under `b.c`).
fn is_proper_subdomain(name: &str, suffix: &str) -> bool {
    name.len() > suffix.len() + 1 && name.ends_with(suffix) && name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
}

/// Equal addresses, an IPv4-mapped IPv6 address equal to its IPv4 form.
fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    canonical_ip(a) == canonical_ip(b)
}

fn canonical_ip(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => a,
        },
        v4 => v4,
    }
}

/// The class of an address, for [`check_addrs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrClass {
    /// Globally routable.
    Global,
    /// Private networks: 10/8, 172.16/12, 192.168/16, 100.64/10 (shared), fc00::/7
    /// (unique local) and the deprecated site-local fec0::/10.
    Private,
    /// 127/8, ::1.
    Loopback,
    /// 169.254/16, fe80::/10.
    LinkLocal,
    /// A cloud metadata endpoint: 169.254.169.254, fd00:ec2::254.
    Metadata,
    /// 0/8, ::.
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
            AddrClass::LinkLocal => "link-local",
            AddrClass::Metadata => "metadata",
            AddrClass::Unspecified => "unspecified",
            AddrClass::Multicast => "multicast",
            AddrClass::Reserved => "reserved",
        }
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

/// Check every address a request's name resolved to (or its IP literal): `Ok` with
/// the addresses to try, in order, or `Err` with why. `test_loopback` marks a name
/// resolved by the test resolver map, which may reach loopback addresses only
/// (see `super::TestResolver`).
pub fn check_addrs(grant: Grant, addrs: &[IpAddr], test_loopback: bool) -> Result<(), String> {
    if addrs.is_empty() {
        return Err("the name did not resolve".into());
    }
    for a in addrs {
        let class = classify(*a);
        let ok = match (class, grant) {
            (AddrClass::Global, _) => true,
            (_, Grant::ExactIp(listed)) if same_ip(listed, *a) => true,
            (AddrClass::Private, Grant::ExactName) => true,
            (AddrClass::Loopback, _) if test_loopback => true,
            _ => false,
        };
        if !ok {
            return Err(format!("resolves to a {} address ({a})", class.name()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(p: &[&str]) -> AllowList {
        AllowList::parse(p).unwrap()
    }

    fn name(n: &str) -> Target {
        Target::parse(n).unwrap()
    }

    #[test]
    fn patterns_parse_strictly() {
        for (s, shown) in [
            ("pypi.org", "pypi.org"),
            ("PyPI.org.", "pypi.org"),
            ("*.githubusercontent.com", "*.githubusercontent.com"),
            ("registry.npmjs.org:8443", "registry.npmjs.org:8443"),
            ("10.0.0.5", "10.0.0.5"),
            ("[fd00::1]:443", "[fd00::1]:443"),
            ("fd00::1", "[fd00::1]"),
        ] {
            assert_eq!(s.parse::<HostPattern>().unwrap().to_string(), shown, "{s}");
        }
        for bad in ["", "*", "*.com", "a..b", "-a.org", "a_b.org", "pypi.org:0", "pypi.org:x", "pypi.org:65536"] {
            assert!(bad.parse::<HostPattern>().is_err(), "{bad} parsed");
        }
        for bad in ["user@pypi.org", "py%70i.org", "pypi.org/", "*.*.org", "a.*.org", "127.1", "0x7f.1", "2130706433"] {
            assert!(bad.parse::<HostPattern>().is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn names_match_exactly_or_as_proper_subdomains() {
        let l = list(&["pypi.org", "*.pythonhosted.org"]);
        assert_eq!(l.decide(&name("pypi.org"), 443, Via::Connect), Ok(Grant::ExactName));
        assert_eq!(l.decide(&name("PYPI.ORG."), 443, Via::Connect), Ok(Grant::ExactName));
        assert_eq!(l.decide(&name("files.pythonhosted.org"), 443, Via::Connect), Ok(Grant::Wildcard));
        assert_eq!(l.decide(&name("a.b.pythonhosted.org"), 443, Via::Connect), Ok(Grant::Wildcard));
        for refused in
            ["evil-pypi.org", "pypi.org.evil.com", "www.pypi.org", "pythonhosted.org", "evilpythonhosted.org"]
        {
            assert!(l.decide(&name(refused), 443, Via::Connect).is_err(), "{refused} allowed");
        }
        assert!(Target::parse("pypi.org@evil.com").is_none());
        assert!(Target::parse("127.1").is_none());
        assert!(Target::parse("pypi.org\0").is_none());
    }

    #[test]
    fn ports_follow_the_pattern_or_the_way_in() {
        let l = list(&["pypi.org", "git.example.org:8080"]);
        assert!(l.decide(&name("pypi.org"), 443, Via::Connect).is_ok());
        assert!(l.decide(&name("pypi.org"), 80, Via::Connect).is_err());
        assert!(l.decide(&name("pypi.org"), 80, Via::Http).is_ok());
        assert!(l.decide(&name("pypi.org"), 443, Via::Http).is_err());
        assert!(l.decide(&name("pypi.org"), 22, Via::Socks5).is_err());
        assert!(l.decide(&name("git.example.org"), 8080, Via::Connect).is_ok());
        assert!(l.decide(&name("git.example.org"), 443, Via::Connect).unwrap_err().contains("port 443"));
    }

    #[test]
    fn ip_literals_need_the_ip_listed() {
        let l = list(&["pypi.org", "10.0.0.5", "[fd00::1]"]);
        let ip = |s: &str| Target::parse(s).unwrap();
        assert!(l.decide(&ip("151.101.0.223"), 443, Via::Connect).is_err());
        assert!(l.decide(&ip("169.254.169.254"), 80, Via::Http).is_err());
        assert_eq!(l.decide(&ip("10.0.0.5"), 443, Via::Connect), Ok(Grant::ExactIp("10.0.0.5".parse().unwrap())));
        assert!(l.decide(&ip("::ffff:10.0.0.5"), 443, Via::Connect).is_ok());
        assert!(l.decide(&ip("[fd00::1]"), 443, Via::Connect).is_ok());
    }

    #[test]
    fn an_empty_list_allows_nothing() {
        let l = AllowList::default();
        assert!(l.decide(&name("pypi.org"), 443, Via::Connect).is_err());
    }

    #[test]
    fn addresses_are_classified() {
        let c = |s: &str| classify(s.parse().unwrap());
        assert_eq!(c("151.101.0.223"), AddrClass::Global);
        assert_eq!(c("2a04:4e42::223"), AddrClass::Global);
        for (a, class) in [
            ("127.0.0.1", AddrClass::Loopback),
            ("127.8.9.10", AddrClass::Loopback),
            ("::1", AddrClass::Loopback),
            ("::ffff:127.0.0.1", AddrClass::Loopback),
            ("::127.0.0.1", AddrClass::Loopback),
            ("64:ff9b::7f00:1", AddrClass::Loopback),
            ("2002:7f00:1::", AddrClass::Loopback),
            ("10.1.2.3", AddrClass::Private),
            ("172.31.0.1", AddrClass::Private),
            ("192.168.1.1", AddrClass::Private),
            ("100.64.0.1", AddrClass::Private),
            ("fd12::1", AddrClass::Private),
            ("169.254.169.254", AddrClass::Metadata),
            ("::ffff:169.254.169.254", AddrClass::Metadata),
            ("fd00:ec2::254", AddrClass::Metadata),
            ("169.254.1.1", AddrClass::LinkLocal),
            ("fe80::1", AddrClass::LinkLocal),
            ("0.0.0.0", AddrClass::Unspecified),
            ("::", AddrClass::Unspecified),
            ("224.0.0.1", AddrClass::Multicast),
            ("ff02::1", AddrClass::Multicast),
            ("255.255.255.255", AddrClass::Multicast),
            ("240.0.0.1", AddrClass::Reserved),
            ("2001::1", AddrClass::Reserved),
            ("::8.8.8.8", AddrClass::Reserved),
        ] {
            assert_eq!(c(a), class, "{a}");
        }
    }

    #[test]
    fn resolutions_are_checked_by_grant() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let global = [ip("151.101.0.223")];
        assert!(check_addrs(Grant::Wildcard, &global, false).is_ok());
        assert!(check_addrs(Grant::Wildcard, &[], false).is_err());
        // A wildcard never reaches anything but global addresses.
        assert!(check_addrs(Grant::Wildcard, &[ip("10.0.0.1")], false).is_err());
        // A mixed answer is refused as a whole.
        assert!(check_addrs(Grant::ExactName, &[ip("151.101.0.223"), ip("127.0.0.1")], false).is_err());
        // An exact name may reach a private network, never loopback or metadata.
        assert!(check_addrs(Grant::ExactName, &[ip("10.0.0.1")], false).is_ok());
        for bad in ["127.0.0.1", "::1", "169.254.169.254", "fd00:ec2::254", "0.0.0.0", "169.254.3.4", "224.0.0.1"] {
            let e = check_addrs(Grant::ExactName, &[ip(bad)], false).unwrap_err();
            assert!(e.starts_with("resolves to a"), "{bad}: {e}");
        }
        // An exact IP reaches that IP whatever its class, and only it.
        assert!(check_addrs(Grant::ExactIp(ip("169.254.169.254")), &[ip("169.254.169.254")], false).is_ok());
        assert!(check_addrs(Grant::ExactIp(ip("10.0.0.5")), &[ip("10.0.0.6")], false).is_err());
        // The test map's names may reach loopback, and nothing else special.
        assert!(check_addrs(Grant::ExactName, &[ip("127.0.0.1")], true).is_ok());
        assert!(check_addrs(Grant::ExactName, &[ip("169.254.169.254")], true).is_err());
    }

    #[test]
    fn a_request_stays_within_its_ceiling() {
        let ceiling = list(&["pypi.org", "*.pythonhosted.org", "git.example.org:8080"]);
        assert!(list(&["pypi.org"]).within(&ceiling));
        assert!(list(&["files.pythonhosted.org", "*.a.pythonhosted.org"]).within(&ceiling));
        assert!(AllowList::default().within(&ceiling));
        assert!(!list(&["pythonhosted.org"]).within(&ceiling));
        assert!(!list(&["pypi.org:8443"]).within(&ceiling));
        assert!(!list(&["git.example.org"]).within(&ceiling));
        assert!(!list(&["evil-pypi.org"]).within(&ceiling));
        assert!(!list(&["pypi.org"]).within(&AllowList::default()));
    }
}
