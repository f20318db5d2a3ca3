//! The host patterns and allow-lists of `--allow-host`, and the proxy's decisions, as
//! pure functions: host patterns (`--allow-host`), strict
//! matching of the name a client asked for, the classes of addresses a name may
//! resolve to, and the typed reason of every refusal.
//!
//! What it decides:
//! 1. **The name.** A request names a host; it is allowed only if an [`AllowList`]
//!    pattern matches it exactly (`pypi.org`) or as a proper subdomain of a wildcard
//!    (`*.pythonhosted.org` matches `files.pythonhosted.org`, not `pythonhosted.org`,
//!    not `evil-pythonhosted.org`). Names are compared lower-cased with one trailing
//!    dot removed; anything that is not a plain DNS name (`user@host`, `%`-escapes,
//!    spaces, a last label that is not alphabetic such as `127.1` or `0x7f.1`) is
//!    refused before any pattern is consulted.
//! 2. **IP literals** are allowed only when that address is listed as a pattern, or
//!    lies in a listed address range (`198.51.100.0/24`).
//! 3. **The port**: the pattern's `:port`, or the default of the way the client came
//!    ([`Via::default_ports`]: 443 for `CONNECT`, 80 for plain HTTP, either for SOCKS5).
//! 4. **The addresses** the name resolved to ([`AllowList::check_addrs`]), on every
//!    resolution, by where the kernel would connect ([`AddrClass`]):
//!    - the unspecified addresses (`0.0.0.0`, `::`, and their mapped forms) connect to
//!      this host's loopback: never connected to, whatever is listed;
//!    - loopback, the cloud metadata endpoints and the host's own interface addresses
//!      only when that exact IP is listed;
//!    - a global address always; a private-network address for a name listed exactly
//!      (an internal registry);
//!    - any other special-purpose address (documentation, benchmarking, link-local,
//!      private under a wildcard, ...) when it lies in a listed address or range — the
//!      explicit way to allow a name behind a fake-IP resolver or a mirror that answers
//!      with such addresses.
//!
//!    If any resolved address is refused, the whole request is (a mixed answer is a
//!    rebinding attempt or a misconfiguration, and either way not worth guessing about).
//!
//! Every refusal is a [`Refusal`]; what cordon parsed from the request travels with it
//! as a [`HostPort`] ([`ProxyRefusal`]), never the text the client sent, so a host
//! grant can only name what the proxy would have connected to.
//!
//! What it does not do: it cannot tell what an allowed host does with the bytes (an
//! allowed domain that accepts uploads is an exfiltration channel; docs/network.md).

//!
//! The words these decisions are made of ([`HostPort`], [`Target`], [`Via`],
//! [`Refusal`], [`AddrClass`]) are the result's network vocabulary
//! (`crate::result`'s network module), re-exported here and from `crate::proxy::rules`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use crate::result::network::{canonical_ip, normalize_name, parse_port, same_ip, shown_ip};
pub use crate::result::network::{
    class_on, classify, AddrClass, HostPort, NotHostPort, ProxyRefusal, Refusal, Target, Via, MAX_HOST_LEN,
};

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
    /// The host part is not a DNS name, a `*.suffix` wildcard, an IP address or range.
    #[error(
        "`--allow-host {pattern}`: `{host}` is not a host name, a `*.domain` wildcard, an IP address or an \
         address range (`198.51.100.0/24`)"
    )]
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
    /// An unspecified address (`0.0.0.0`, `::`): the kernel connects it to this host's
    /// loopback, so it would open loopback under another name.
    #[error(
        "`--allow-host {pattern}`: the unspecified address connects to this host's loopback; list the loopback \
         address itself (`127.0.0.1`, `[::1]`) if that is what you mean"
    )]
    Unspecified {
        /// The pattern as given.
        pattern: String,
    },
    /// An address range whose prefix length is out of bounds, whose address has host
    /// bits set (`198.51.100.7/24`), or that covers every address (`/0`).
    #[error("`--allow-host {pattern}`: {why}")]
    BadRange {
        /// The pattern as given.
        pattern: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// An address range (`198.51.100.0/24`, `2001:db8::/32`): the network address has no
/// host bits set, and the prefix is at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct IpRange {
    net: IpAddr,
    prefix: u8,
}

impl IpRange {
    /// Parse `ADDR/PREFIX` (no brackets).
    fn parse(s: &str) -> Result<IpRange, &'static str> {
        let (a, p) = s.split_once('/').ok_or("not an address range")?;
        let net: IpAddr = a.parse().map_err(|_| "not an address range")?;
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err("the prefix length must be a number");
        }
        let prefix: u8 = p.parse().map_err(|_| "the prefix length must be a number")?;
        let bits = if net.is_ipv4() { 32 } else { 128 };
        if prefix > bits {
            return Err("the prefix length is longer than the address");
        }
        if prefix == 0 {
            return Err("a range of every address is not a list of hosts (use --network)");
        }
        let r = IpRange { net, prefix };
        if r.masked(net) != bits_of(net) {
            return Err("the address has host bits set (write the network address, e.g. 198.51.100.0/24)");
        }
        Ok(r)
    }

    /// `ip`'s bits with everything after the prefix cleared.
    fn masked(&self, ip: IpAddr) -> u128 {
        let width: u32 = if ip.is_ipv4() { 32 } else { 128 };
        let keep = u32::from(self.prefix).min(width);
        if keep == 0 {
            return 0;
        }
        let full = if width == 128 { u128::MAX } else { (1u128 << width) - 1 };
        bits_of(ip) & (u128::MAX << (width - keep)) & full
    }

    /// The range of `prefix` bits around `ip` (a /24 or /64 to suggest in a hint).
    fn around(ip: IpAddr, prefix: u8) -> IpRange {
        let bits = IpRange { net: ip, prefix }.masked(ip);
        let net = match ip {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(bits as u32)),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(bits)),
        };
        IpRange { net, prefix }
    }

    /// Whether `ip` lies in the range (an IPv4-mapped IPv6 address is judged as its
    /// IPv4 form, so it lies only in IPv4 ranges).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical_ip(ip);
        ip.is_ipv4() == self.net.is_ipv4() && self.masked(ip) == bits_of(self.net)
    }

    /// Whether every address of `other` lies in this range.
    fn covers(&self, other: &IpRange) -> bool {
        other.prefix >= self.prefix && self.contains(other.net)
    }
}

fn bits_of(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.net, self.prefix)
    }
}

/// What a pattern's host part is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum HostMatch {
    /// Exactly this name (lower-case, no trailing dot).
    Exact(String),
    /// Any proper subdomain of this name.
    Suffix(String),
    /// Exactly this address: as an IP literal, and as what a listed name resolves to,
    /// whatever its class (loopback and metadata included) except unspecified.
    Ip(IpAddr),
    /// Any address of this range, as an IP literal or as what a listed name resolves
    /// to, except loopback, metadata and the host's own addresses (those need the
    /// exact IP listed) and the unspecified addresses (never).
    Range(IpRange),
}

/// One `--allow-host` pattern: `pypi.org`, `*.githubusercontent.com`, `10.0.0.5`,
/// `[fd00::1]`, `198.51.100.0/24`, each with an optional `:port`.
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

    /// Whether the pattern's port rule admits `port` for a client that came `via`.
    fn admits_port(&self, port: u16, via: Via) -> bool {
        match self.port {
            Some(allowed) => allowed == port,
            None => via.default_ports().contains(&port),
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostMatch::Exact(n) => write!(f, "{n}")?,
            HostMatch::Suffix(n) => write!(f, "*.{n}")?,
            HostMatch::Ip(IpAddr::V6(a)) => write!(f, "[{a}]")?,
            HostMatch::Ip(IpAddr::V4(a)) => write!(f, "{a}")?,
            HostMatch::Range(r) if r.net.is_ipv6() => write!(f, "[{r}]")?,
            HostMatch::Range(r) => write!(f, "{r}")?,
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
        if host.contains('/') {
            let range = IpRange::parse(host).map_err(|why| match why {
                "not an address range" => bad_host(host),
                why => PatternError::BadRange { pattern: pattern.into(), why },
            })?;
            return Ok(HostPattern { host: HostMatch::Range(range), port });
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            if classify(ip) == AddrClass::Unspecified {
                return Err(PatternError::Unspecified { pattern: pattern.into() });
            }
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

impl HostPort {
    /// The pattern that allows exactly this host and port, and nothing else.
    pub fn pattern(&self) -> HostPattern {
        let host = match &self.host {
            Target::Name(n) => HostMatch::Exact(n.clone()),
            Target::Ip(ip) => HostMatch::Ip(*ip),
        };
        HostPattern { host, port: Some(self.port) }
    }
}

/// What a pattern grants once it matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// A wildcard: globally routable addresses, and those of listed addresses and ranges.
    Wildcard,
    /// A name listed exactly: also private-network addresses.
    ExactName,
    /// An IP literal matched by a listed address or range.
    Address,
}

impl Refusal {
    /// What would let the request through, for a person (the live denial line), if
    /// anything: the flag that lists it, or why nothing can.
    pub fn hint(&self, host: Option<&HostPort>) -> Option<String> {
        let h = host?;
        match self {
            Refusal::NotListed | Refusal::Port => Some(format!("add --allow-host {h}")),
            Refusal::Address { address, class } => Some(match class {
                AddrClass::Unspecified => "never connected to (it reaches this host's loopback)".into(),
                AddrClass::Loopback | AddrClass::Metadata | AddrClass::Host => {
                    format!("only that exact address can open it: --allow-host {}:{}", shown_ip(*address), h.port)
                }
                AddrClass::Private if matches!(h.host, Target::Name(_)) => format!(
                    "list the name exactly (--allow-host {}) or the address (--allow-host {})",
                    h.host,
                    shown_ip(*address)
                ),
                _ => {
                    let a = canonical_ip(*address);
                    let range = IpRange::around(a, if a.is_ipv4() { 24 } else { 64 });
                    let range = HostPattern { host: HostMatch::Range(range), port: None };
                    format!("allow it with --allow-host {} (or its range, e.g. {range})", shown_ip(*address))
                }
            }),
            _ => None,
        }
    }
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
    /// covered by one ceiling pattern: the same pattern, an exact name under a ceiling
    /// wildcard, or a range inside a ceiling range, with the same port rule. An exact
    /// IP is covered only by the same IP: it may open addresses a range never does.)
    pub fn within(&self, ceiling: &AllowList) -> bool {
        self.patterns.iter().all(|p| {
            ceiling.patterns.iter().any(|c| {
                c.port == p.port
                    && match (&c.host, &p.host) {
                        (a, b) if a == b => true,
                        (HostMatch::Suffix(s), HostMatch::Exact(n)) => is_proper_subdomain(n, s),
                        (HostMatch::Suffix(s), HostMatch::Suffix(n)) => is_proper_subdomain(n, s),
                        (HostMatch::Range(c), HostMatch::Range(r)) => c.covers(r),
                        _ => false,
                    }
            })
        })
    }

    /// Decide the host and port a client asked for, before any resolution.
    pub fn decide(&self, target: &Target, port: u16, via: Via) -> Result<Grant, Refusal> {
        if let Target::Ip(ip) = target {
            let class = classify(*ip);
            if class == AddrClass::Unspecified {
                return Err(Refusal::Address { address: *ip, class });
            }
        }
        let mut name_matched = false;
        for p in &self.patterns {
            let grant = match (&p.host, target) {
                (HostMatch::Exact(n), Target::Name(t)) if n == t => Grant::ExactName,
                (HostMatch::Suffix(s), Target::Name(t)) if is_proper_subdomain(t, s) => Grant::Wildcard,
                (HostMatch::Ip(a), Target::Ip(t)) if same_ip(*a, *t) => Grant::Address,
                (HostMatch::Range(r), Target::Ip(t)) if r.contains(*t) => Grant::Address,
                _ => continue,
            };
            name_matched = true;
            if p.admits_port(port, via) {
                return Ok(grant);
            }
        }
        Err(if name_matched { Refusal::Port } else { Refusal::NotListed })
    }

    /// Judge an IP literal a client asked for before the list is consulted: an address
    /// that reaches this host or its cloud (unspecified, loopback, metadata, one of the
    /// host's own `host_addrs`) is refused for what it is unless that exact IP is
    /// listed, so such a refusal is never "not in the allow-list" — the one a host
    /// grant could lift. An approver is never asked to open the host by an address it
    /// may not recognize as the host's.
    pub fn check_literal(&self, ip: IpAddr, port: u16, via: Via, host_addrs: &[IpAddr]) -> Result<(), Refusal> {
        let class = class_on(ip, host_addrs);
        let reaches_host = matches!(class, AddrClass::Loopback | AddrClass::Metadata | AddrClass::Host);
        if class == AddrClass::Unspecified
            || (reaches_host && self.lists_address(ip, port, via) != Some(Listed::Exactly))
        {
            return Err(Refusal::Address { address: ip, class });
        }
        Ok(())
    }

    /// How the list opens address `ip` on `port` (for a client that came `via`): listed
    /// exactly, inside a listed range, or not at all.
    fn lists_address(&self, ip: IpAddr, port: u16, via: Via) -> Option<Listed> {
        let mut found = None;
        for p in self.patterns.iter().filter(|p| p.admits_port(port, via)) {
            match &p.host {
                HostMatch::Ip(a) if same_ip(*a, ip) => return Some(Listed::Exactly),
                HostMatch::Range(r) if r.contains(ip) => found = Some(Listed::InRange),
                _ => {}
            }
        }
        found
    }

    /// Check every address a request's host resolved to (or its IP literal), by where
    /// the kernel would connect: `Ok` when the proxy may connect to all of them, or the
    /// refusal for the first one it may not. `host_addrs` are the host's own interface
    /// addresses (loopback's siblings: they reach the host's own listeners);
    /// `test_loopback` marks a name resolved by the test resolver map, which may reach
    /// loopback addresses (see `crate::proxy::TestResolver`).
    pub fn check_addrs(
        &self,
        grant: Grant,
        port: u16,
        via: Via,
        addrs: &[IpAddr],
        host_addrs: &[IpAddr],
        test_loopback: bool,
    ) -> Result<(), Refusal> {
        if addrs.is_empty() {
            return Err(Refusal::Unresolved);
        }
        for a in addrs {
            let class = class_on(*a, host_addrs);
            let listed = self.lists_address(*a, port, via);
            let ok = match class {
                AddrClass::Unspecified => false,
                AddrClass::Loopback if test_loopback => true,
                AddrClass::Loopback | AddrClass::Metadata | AddrClass::Host => listed == Some(Listed::Exactly),
                AddrClass::Global => true,
                AddrClass::Private if grant == Grant::ExactName => true,
                _ => listed.is_some(),
            };
            if !ok {
                return Err(Refusal::Address { address: *a, class });
            }
        }
        Ok(())
    }
}

/// How [`AllowList::lists_address`] found an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listed {
    Exactly,
    InRange,
}

/// `name` is `suffix` with at least one more label in front (`a.b.c` under `b.c`).
fn is_proper_subdomain(name: &str, suffix: &str) -> bool {
    name.len() > suffix.len() + 1 && name.ends_with(suffix) && name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
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
        assert_eq!(l.decide(&name("git.example.org"), 443, Via::Connect), Err(Refusal::Port));
    }

    #[test]
    fn ip_literals_need_the_ip_listed() {
        let l = list(&["pypi.org", "10.0.0.5", "[fd00::1]"]);
        let ip = |s: &str| Target::parse(s).unwrap();
        assert!(l.decide(&ip("151.101.0.223"), 443, Via::Connect).is_err());
        assert!(l.decide(&ip("169.254.169.254"), 80, Via::Http).is_err());
        assert_eq!(l.decide(&ip("10.0.0.5"), 443, Via::Connect), Ok(Grant::Address));
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
            ("0.1.2.3", AddrClass::Unspecified),
            ("::", AddrClass::Unspecified),
            ("::ffff:0.0.0.0", AddrClass::Unspecified),
            ("::0.0.0.2", AddrClass::Unspecified),
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

    /// `check_addrs` for a name decided by `list`, on port 443 through `CONNECT`.
    fn check(list: &AllowList, grant: Grant, addrs: &[&str], own: &[&str], test: bool) -> Result<(), Refusal> {
        let ip = |s: &&str| s.parse::<IpAddr>().unwrap();
        let addrs: Vec<IpAddr> = addrs.iter().map(ip).collect();
        let own: Vec<IpAddr> = own.iter().map(ip).collect();
        list.check_addrs(grant, 443, Via::Connect, &addrs, &own, test)
    }

    #[test]
    fn resolutions_are_checked_by_grant() {
        let l = AllowList::default();
        assert!(check(&l, Grant::Wildcard, &["151.101.0.223"], &[], false).is_ok());
        assert_eq!(check(&l, Grant::Wildcard, &[], &[], false), Err(Refusal::Unresolved));
        // A wildcard never reaches anything but global addresses.
        assert!(check(&l, Grant::Wildcard, &["10.0.0.1"], &[], false).is_err());
        // A mixed answer is refused as a whole.
        assert!(check(&l, Grant::ExactName, &["151.101.0.223", "127.0.0.1"], &[], false).is_err());
        // An exact name may reach a private network, never loopback or metadata.
        assert!(check(&l, Grant::ExactName, &["10.0.0.1"], &[], false).is_ok());
        for bad in ["127.0.0.1", "::1", "169.254.169.254", "fd00:ec2::254", "0.0.0.0", "169.254.3.4", "224.0.0.1"] {
            match check(&l, Grant::ExactName, &[bad], &[], false) {
                Err(Refusal::Address { address, .. }) => assert_eq!(address, bad.parse::<IpAddr>().unwrap()),
                other => panic!("{bad}: {other:?}"),
            }
        }
        // The test map's names may reach loopback, and nothing else special.
        assert!(check(&l, Grant::ExactName, &["127.0.0.1"], &[], true).is_ok());
        assert!(check(&l, Grant::ExactName, &["169.254.169.254"], &[], true).is_err());
    }

    #[test]
    fn the_unspecified_addresses_are_never_connected_to() {
        // They connect to loopback: not as patterns, not as IP literals, not as what a
        // name resolves to, whatever else is listed.
        for p in ["0.0.0.0", "0.0.0.0:8080", "[::]:8080", "::", "[::ffff:0.0.0.0]:80", "0.1.2.3"] {
            assert!(matches!(p.parse::<HostPattern>(), Err(PatternError::Unspecified { .. })), "{p} parsed");
        }
        let l = list(&["127.0.0.1:8080", "[::1]:8080", "allowed.test:8080", "0.0.0.0/1:8080"]);
        for t in ["0.0.0.0", "[::]", "[::ffff:0.0.0.0]"] {
            let r = l.decide(&Target::parse(t).unwrap(), 8080, Via::Connect);
            assert!(matches!(r, Err(Refusal::Address { class: AddrClass::Unspecified, .. })), "{t}: {r:?}");
        }
        for a in ["0.0.0.0", "::", "::ffff:0.0.0.0"] {
            let r = l.check_addrs(Grant::ExactName, 8080, Via::Connect, &[a.parse().unwrap()], &[], true);
            assert!(matches!(r, Err(Refusal::Address { class: AddrClass::Unspecified, .. })), "{a}: {r:?}");
        }
        assert!("0.0.0.0:80".parse::<HostPort>().is_err());
        assert!("[::]:80".parse::<HostPort>().is_err());
    }

    #[test]
    fn the_hosts_own_addresses_count_as_the_host() {
        let own = ["10.88.0.1", "192.0.2.2", "fd00::2"];
        let l = list(&["registry.test", "10.0.0.0/8", "192.0.2.0/24", "[fd00::/8]"]);
        for a in own {
            // Neither an exact name (private addresses) nor a range opens them.
            let r = check(&l, Grant::ExactName, &[a], &own, false);
            assert!(matches!(r, Err(Refusal::Address { class: AddrClass::Host, .. })), "{a}: {r:?}");
            let r = l.decide(&Target::parse(a).unwrap(), 443, Via::Connect);
            assert_eq!(r, Ok(Grant::Address), "{a}: the range matches the literal");
            assert!(check(&l, Grant::Address, &[a], &own, false).is_err(), "{a}");
        }
        // Mapped forms too.
        assert!(check(&l, Grant::ExactName, &["::ffff:10.88.0.1"], &own, false).is_err());
        // Only the exact address opens one.
        let exact = list(&["registry.test", "10.88.0.1"]);
        assert!(check(&exact, Grant::ExactName, &["10.88.0.1"], &own, false).is_ok());
        assert!(check(&exact, Grant::Address, &["10.88.0.1"], &own, false).is_ok());
        // Another private address is still an exact name's.
        assert!(check(&exact, Grant::ExactName, &["10.88.0.2"], &own, false).is_ok());
    }

    #[test]
    fn literals_that_reach_the_host_are_refused_for_what_they_are() {
        let own: Vec<IpAddr> = vec!["10.88.0.1".parse().unwrap()];
        let l = list(&["pypi.org", "127.0.0.2:8080", "10.0.0.0/8"]);
        let lit = |a: &str, port| l.check_literal(a.parse().unwrap(), port, Via::Connect, &own);
        for (a, class) in [
            ("127.0.0.1", AddrClass::Loopback),
            ("::1", AddrClass::Loopback),
            ("::ffff:127.0.0.1", AddrClass::Loopback),
            ("169.254.169.254", AddrClass::Metadata),
            ("10.88.0.1", AddrClass::Host),
            ("0.0.0.0", AddrClass::Unspecified),
        ] {
            assert!(matches!(lit(a, 8080), Err(Refusal::Address { class: c, .. }) if c == class), "{a}");
        }
        // Listed exactly (address and port): left to the list.
        assert_eq!(lit("127.0.0.2", 8080), Ok(()));
        assert!(lit("127.0.0.2", 443).is_err());
        // Anything else is left to the list (which may then say "not in the allow-list").
        assert_eq!(lit("151.101.0.223", 443), Ok(()));
        assert_eq!(lit("10.1.2.3", 443), Ok(()));
    }

    #[test]
    fn listed_addresses_and_ranges_open_special_purpose_resolutions() {
        // A name whose addresses are in a documentation range (a mirror, a fake-IP
        // resolver): refused by itself, opened by listing the address or its range.
        let alone = list(&["pypi.org"]);
        let r = check(&alone, Grant::ExactName, &["203.0.113.80"], &[], false);
        assert!(matches!(r, Err(Refusal::Address { class: AddrClass::Reserved, .. })), "{r:?}");
        for with in ["203.0.113.80", "203.0.113.0/24", "203.0.0.0/16", "203.0.113.80:443"] {
            let l = list(&["pypi.org", with]);
            assert!(check(&l, Grant::ExactName, &["203.0.113.80"], &[], false).is_ok(), "{with}");
            assert!(check(&l, Grant::Wildcard, &["203.0.113.80"], &[], false).is_ok(), "{with}");
        }
        // The range's port rule applies: a range for 8443 does not open 443.
        let l = list(&["pypi.org", "203.0.113.0/24:8443"]);
        assert!(check(&l, Grant::ExactName, &["203.0.113.80"], &[], false).is_err());
        // A range opens private addresses for wildcards, link-local, benchmarking...
        let l = list(&["*.corp.example", "10.0.0.0/8", "169.254.0.0/16", "198.18.0.0/15", "[2001:db8::/32]"]);
        for a in ["10.1.2.3", "169.254.3.4", "198.19.0.7", "2001:db8::7", "::ffff:10.1.2.3"] {
            assert!(check(&l, Grant::Wildcard, &[a], &[], false).is_ok(), "{a}");
        }
        // ...never loopback, metadata or unspecified, even when the range covers them.
        let l = list(&["registry.test", "0.0.0.0/1", "127.0.0.0/8", "169.254.0.0/16", "[::/1]"]);
        for a in ["127.0.0.1", "169.254.169.254", "0.0.0.0", "::1", "fd00:ec2::254", "::"] {
            assert!(check(&l, Grant::ExactName, &[a], &[], false).is_err(), "{a}");
            if let Some(t) = Target::parse(a).or_else(|| Target::parse(&format!("[{a}]"))) {
                let r = l
                    .decide(&t, 443, Via::Connect)
                    .and_then(|g| l.check_addrs(g, 443, Via::Connect, &[a.parse().unwrap()], &[], false));
                assert!(r.is_err(), "{a} as a literal");
            }
        }
        // ...unless that exact address is listed.
        let l = list(&["registry.test", "127.0.0.1", "169.254.169.254"]);
        assert!(check(&l, Grant::ExactName, &["127.0.0.1"], &[], false).is_ok());
        assert!(check(&l, Grant::ExactName, &["169.254.169.254"], &[], false).is_ok());
        assert!(check(&l, Grant::ExactName, &["127.0.0.2"], &[], false).is_err());
    }

    #[test]
    fn ranges_parse_strictly() {
        for (s, shown) in [
            ("198.51.100.0/24", "198.51.100.0/24"),
            ("198.51.100.0/24:443", "198.51.100.0/24:443"),
            ("10.0.0.0/8", "10.0.0.0/8"),
            ("2001:db8::/32", "[2001:db8::/32]"),
            ("[2001:db8::/32]:443", "[2001:db8::/32]:443"),
            ("203.0.113.80/32", "203.0.113.80/32"),
        ] {
            assert_eq!(s.parse::<HostPattern>().unwrap().to_string(), shown, "{s}");
        }
        for bad in [
            "198.51.100.7/24",
            "198.51.100.0/33",
            "0.0.0.0/0",
            "[::/0]",
            "198.51.100.0/",
            "198.51.100.0/x",
            "198.51.100.0/+8",
            "pypi.org/24",
            "/24",
            "198.51.100.0/24/1",
        ] {
            assert!(bad.parse::<HostPattern>().is_err(), "{bad} parsed");
        }
        let r = IpRange::parse("198.51.100.0/24").unwrap();
        assert!(r.contains("198.51.100.255".parse().unwrap()));
        assert!(r.contains("::ffff:198.51.100.1".parse().unwrap()));
        assert!(!r.contains("198.51.101.0".parse().unwrap()));
        assert!(!r.contains("::1".parse().unwrap()));
        let r6 = IpRange::parse("2001:db8::/32").unwrap();
        assert!(r6.contains("2001:db8:ffff::1".parse().unwrap()));
        assert!(!r6.contains("2001:db9::1".parse().unwrap()));
        assert!(IpRange::parse("0.0.0.0/1").unwrap().contains("127.0.0.1".parse().unwrap()));
        assert!(IpRange::parse("128.0.0.0/1").unwrap().contains("255.0.0.1".parse().unwrap()));
    }

    #[test]
    fn host_ports_are_exact_and_normalized() {
        for (s, shown) in
            [("PyPI.org.:443", "pypi.org:443"), ("10.0.0.5:80", "10.0.0.5:80"), ("[fd00::1]:8443", "[fd00::1]:8443")]
        {
            let hp: HostPort = s.parse().unwrap();
            assert_eq!(hp.to_string(), shown);
            assert_eq!(hp.pattern().to_string(), shown, "the pattern of a host port is that host port");
        }
        for bad in [
            "*.example.org:443",
            "example.org",
            "example.org:0",
            "example.org:99999",
            "user@example.org:443",
            "fd00::1:443",
            "[fd00::1]",
            "127.1:80",
            "10.0.0.0/8:80",
            "a b:80",
            "",
        ] {
            assert!(bad.parse::<HostPort>().is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn only_listing_refusals_are_grantable() {
        let hp: HostPort = "other.test:443".parse().unwrap();
        let grantable = |why: Refusal, host: Option<HostPort>| ProxyRefusal { host, why }.grantable().cloned();
        assert_eq!(grantable(Refusal::NotListed, Some(hp.clone())), Some(hp.clone()));
        assert_eq!(grantable(Refusal::Port, Some(hp.clone())), Some(hp.clone()));
        assert_eq!(grantable(Refusal::NotListed, None), None);
        for why in [
            Refusal::ProxyCredentials,
            Refusal::SocksCommand,
            Refusal::Unresolved,
            Refusal::ProxyItself,
            Refusal::Address { address: "203.0.113.80".parse().unwrap(), class: AddrClass::Reserved },
            Refusal::Malformed { problem: "x".into() },
        ] {
            assert_eq!(grantable(why.clone(), Some(hp.clone())), None, "{why:?}");
        }
    }

    #[test]
    fn refusals_say_why_and_what_would_open_them() {
        let hp = |s: &str| s.parse::<HostPort>().unwrap();
        let (name, ip) = (hp("pypi.org:443"), hp("10.0.0.5:443"));
        assert_eq!(Refusal::NotListed.why(Some(&name)), "host not in the allow-list");
        assert_eq!(Refusal::NotListed.why(Some(&ip)), "IP address not in the allow-list");
        assert_eq!(Refusal::NotListed.hint(Some(&name)).unwrap(), "add --allow-host pypi.org:443");
        assert_eq!(Refusal::Port.why(Some(&name)), "port 443 is not allowed for this host");
        let doc = Refusal::Address { address: "203.0.113.80".parse().unwrap(), class: AddrClass::Reserved };
        assert_eq!(doc.why(Some(&name)), "resolves to 203.0.113.80, a reserved address");
        assert_eq!(
            doc.hint(Some(&name)).unwrap(),
            "allow it with --allow-host 203.0.113.80 (or its range, e.g. 203.0.113.0/24)"
        );
        let lo = Refusal::Address { address: "127.0.0.1".parse().unwrap(), class: AddrClass::Loopback };
        assert_eq!(lo.hint(Some(&name)).unwrap(), "only that exact address can open it: --allow-host 127.0.0.1:443");
        let any = Refusal::Address { address: "0.0.0.0".parse().unwrap(), class: AddrClass::Unspecified };
        assert!(any.why(Some(&hp("127.0.0.1:80"))).contains("connects to this host's loopback"));
        assert!(Refusal::ProxyCredentials.hint(Some(&name)).is_none());
        assert!(Refusal::NotListed.hint(None).is_none());
        // Every range the hint suggests parses back.
        let v6 = Refusal::Address { address: "2001:db8::7".parse().unwrap(), class: AddrClass::Reserved };
        let h = v6.hint(Some(&name)).unwrap();
        assert!(h.ends_with("[2001:db8::/64])"), "{h}");
        assert!("[2001:db8::/64]".parse::<HostPattern>().is_ok());
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
        // Ranges inside ranges; an exact address only under itself (it may open what
        // no range does).
        let ceiling = list(&["198.51.100.0/24", "10.0.0.5"]);
        assert!(list(&["198.51.100.128/25", "198.51.100.0/24", "10.0.0.5"]).within(&ceiling));
        assert!(!list(&["198.51.0.0/16"]).within(&ceiling));
        assert!(!list(&["198.51.100.7"]).within(&ceiling));
        assert!(!list(&["198.51.100.0/24:443"]).within(&ceiling));
    }
}
