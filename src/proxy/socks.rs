//! The proxy's SOCKS5 parser (RFC 1928), strict and pure (no I/O): the greeting and
//! the request. The server reads until a parse says it has enough, so every byte the
//! client sends passes through these two functions.
//!
//! Refused: a version other than 5, a greeting offering no method, a request whose
//! reserved byte is not 0, an address type other than IPv4, domain name or IPv6, an
//! empty domain name. A domain name is returned as bytes: the caller parses it as a
//! strict host name (`super::rules::Target`), never as lossy text.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The SOCKS version this proxy speaks.
pub const VERSION: u8 = 5;
/// The method "no authentication required".
pub const NO_AUTH: u8 = 0;
/// The `CONNECT` command.
pub const CONNECT: u8 = 1;

/// Why a SOCKS5 message is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SocksError {
    /// A version byte other than 5.
    Version,
    /// A greeting that offers no method.
    NoMethods,
    /// A request whose reserved byte is not 0.
    Reserved,
    /// An address type other than 1 (IPv4), 3 (domain name), 4 (IPv6).
    AddressType,
    /// A domain name of length 0.
    EmptyName,
}

impl fmt::Display for SocksError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SocksError::Version => "not SOCKS version 5",
            SocksError::NoMethods => "a SOCKS5 greeting offering no method",
            SocksError::Reserved => "a SOCKS5 request with a nonzero reserved byte",
            SocksError::AddressType => "an unknown SOCKS5 address type",
            SocksError::EmptyName => "an empty SOCKS5 domain name",
        })
    }
}

/// A parse that needs more bytes (`Ok(None)`), failed, or produced a value and the
/// number of bytes it consumed.
pub type Parsed<T> = Result<Option<(T, usize)>, SocksError>;

/// Parse the greeting `VER NMETHODS METHODS...`: the methods offered.
pub fn parse_greeting(buf: &[u8]) -> Parsed<Vec<u8>> {
    let Some(&ver) = buf.first() else { return Ok(None) };
    if ver != VERSION {
        return Err(SocksError::Version);
    }
    let Some(&n) = buf.get(1) else { return Ok(None) };
    if n == 0 {
        return Err(SocksError::NoMethods);
    }
    let end = 2 + usize::from(n);
    Ok(buf.get(2..end).map(|m| (m.to_vec(), end)))
}

/// Where a SOCKS5 request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocksHost {
    /// An IP address (types 1 and 4).
    Ip(IpAddr),
    /// A domain name (type 3), as sent: to be parsed strictly by the caller.
    Name(Vec<u8>),
}

/// A SOCKS5 request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocksRequest {
    /// The command (1 `CONNECT`, 2 `BIND`, 3 `UDP ASSOCIATE`, or anything else sent).
    pub command: u8,
    /// The host.
    pub host: SocksHost,
    /// The port.
    pub port: u16,
}

/// Parse the request `VER CMD RSV ATYP ADDR PORT`.
pub fn parse_request(buf: &[u8]) -> Parsed<SocksRequest> {
    if buf.len() < 4 {
        if buf.first().is_some_and(|v| *v != VERSION) {
            return Err(SocksError::Version);
        }
        return Ok(None);
    }
    let (ver, command, rsv, atyp) = (buf[0], buf[1], buf[2], buf[3]);
    if ver != VERSION {
        return Err(SocksError::Version);
    }
    if rsv != 0 {
        return Err(SocksError::Reserved);
    }
    let (host, at) = match atyp {
        1 => {
            let Some(a) = buf.get(4..8) else { return Ok(None) };
            (SocksHost::Ip(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))), 8)
        }
        4 => {
            let Some(a) = buf.get(4..20) else { return Ok(None) };
            let mut o = [0u8; 16];
            o.copy_from_slice(a);
            (SocksHost::Ip(IpAddr::V6(Ipv6Addr::from(o))), 20)
        }
        3 => {
            let Some(&len) = buf.get(4) else { return Ok(None) };
            if len == 0 {
                return Err(SocksError::EmptyName);
            }
            let end = 5 + usize::from(len);
            let Some(name) = buf.get(5..end) else { return Ok(None) };
            (SocksHost::Name(name.to_vec()), end)
        }
        _ => return Err(SocksError::AddressType),
    };
    let Some(p) = buf.get(at..at + 2) else { return Ok(None) };
    Ok(Some((SocksRequest { command, host, port: u16::from_be_bytes([p[0], p[1]]) }, at + 2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greetings() {
        assert_eq!(parse_greeting(&[]), Ok(None));
        assert_eq!(parse_greeting(&[5]), Ok(None));
        assert_eq!(parse_greeting(&[5, 2, 0]), Ok(None));
        assert_eq!(parse_greeting(&[5, 2, 0, 2, 9]), Ok(Some((vec![0, 2], 4))));
        assert_eq!(parse_greeting(&[4, 1, 0]), Err(SocksError::Version));
        assert_eq!(parse_greeting(&[5, 0]), Err(SocksError::NoMethods));
    }

    #[test]
    fn requests() {
        let name = [&[5u8, 1, 0, 3, 6][..], b"a.test", &[1, 187]].concat();
        let want = SocksRequest { command: 1, host: SocksHost::Name(b"a.test".to_vec()), port: 443 };
        assert_eq!(parse_request(&name), Ok(Some((want, name.len()))));
        for cut in 0..name.len() {
            assert_eq!(parse_request(&name[..cut]), Ok(None), "{cut}");
        }
        let v4 = [5, 2, 0, 1, 127, 0, 0, 1, 0, 80, 99];
        let got = parse_request(&v4).unwrap().unwrap();
        assert_eq!(
            (got.0.command, got.0.host, got.0.port, got.1),
            (2, SocksHost::Ip("127.0.0.1".parse().unwrap()), 80, 10)
        );
        let mut v6 = vec![5, 1, 0, 4];
        v6.extend_from_slice(&"::1".parse::<Ipv6Addr>().unwrap().octets());
        v6.extend_from_slice(&[0, 22]);
        assert_eq!(parse_request(&v6).unwrap().unwrap().0.host, SocksHost::Ip("::1".parse().unwrap()));
        assert_eq!(parse_request(&[4, 1, 0, 1]), Err(SocksError::Version));
        assert_eq!(parse_request(&[4]), Err(SocksError::Version));
        assert_eq!(parse_request(&[5, 1, 1, 1]), Err(SocksError::Reserved));
        assert_eq!(parse_request(&[5, 1, 0, 9]), Err(SocksError::AddressType));
        assert_eq!(parse_request(&[5, 1, 0, 3, 0, 0, 80]), Err(SocksError::EmptyName));
    }
}
