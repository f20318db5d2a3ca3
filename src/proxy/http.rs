//! The proxy's HTTP/1.1 parser, strict and pure (no I/O): a request head, the request
//! target, the body framing and chunked bodies. What the proxy sends to an origin is
//! rebuilt from what this module parsed ([`origin_head`], [`encode_chunk`]), never
//! copied from the client's lines.
//!
//! Refused (RFC 9112 allows a recipient to accept some of these; an intermediary
//! that accepts what the origin reads differently is how requests are smuggled):
//! 1. any control character other than the CRLF that ends a line: a bare CR, a bare
//!    LF (every line ends with CRLF), NUL, DEL, and the rest of C0 — horizontal tab
//!    only as whitespace inside a header value;
//! 2. a request line other than `METHOD SP TARGET SP HTTP/1.x` (one space each, a
//!    token method, a target of visible ASCII);
//! 3. a header line starting with whitespace (obsolete line folding), a name that is
//!    not a token or whitespace before the colon;
//! 4. more than one `Content-Length` or `Transfer-Encoding`, both together, a length
//!    that is not plain digits, a transfer coding other than `chunked`, a
//!    `Transfer-Encoding` on an HTTP/1.0 request;
//! 5. a head over [`MAX_HEAD`](super::MAX_HEAD) bytes (the reader's bound);
//! 6. in a chunked body: a size that is not 1 to 16 hex digits, an extension with a
//!    control character, data not followed by CRLF, a trailer line that is not a
//!    well-formed header field, a size line or trailer section over its bound.
//!
//! What it does not do: it parses requests only (the origin's response is relayed
//! to the client untouched: the client is the command, and it is already confined),
//! and it does not interpret methods or header values beyond the framing.

use std::fmt;

/// The longest chunk-size line (with extensions) accepted.
pub const MAX_CHUNK_LINE: usize = 1024;

/// Why a request is refused, in cordon's own words (the text never quotes the client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeadError {
    /// No CRLF CRLF within the head's bound.
    TooLong,
    /// A line does not end with CRLF, or holds a bare CR or LF.
    LineEnding,
    /// A control character (NUL, DEL, C0) where none may be.
    ControlCharacter,
    /// Not `METHOD SP TARGET SP HTTP/1.x`.
    RequestLine,
    /// An HTTP version other than 1.0 and 1.1.
    Version,
    /// A header line that starts with whitespace (obsolete line folding).
    ObsFold,
    /// A header name that is not a token, or whitespace before the colon.
    HeaderName,
    /// More than one `Content-Length`, or a value that is not plain digits.
    ContentLength,
    /// `Transfer-Encoding` other than one `chunked`, or on an HTTP/1.0 request.
    TransferEncoding,
    /// Both `Content-Length` and `Transfer-Encoding`.
    ConflictingFraming,
    /// The request target is not `http://authority[/path]` (or, for `CONNECT`,
    /// `host:port`), or its authority holds userinfo or a fragment.
    Target,
}

impl fmt::Display for HeadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HeadError::TooLong => "request head over 16 KiB",
            HeadError::LineEnding => "a line not ended by CRLF, or a bare CR or LF",
            HeadError::ControlCharacter => "a control character in the request line or a header",
            HeadError::RequestLine => "not a request line (METHOD SP TARGET SP HTTP/1.x)",
            HeadError::Version => "an HTTP version other than 1.0 and 1.1",
            HeadError::ObsFold => "a folded header line",
            HeadError::HeaderName => "a header name that is not a token",
            HeadError::ContentLength => "duplicate or invalid Content-Length",
            HeadError::TransferEncoding => "a Transfer-Encoding other than one chunked",
            HeadError::ConflictingFraming => "both Content-Length and Transfer-Encoding",
            HeadError::Target => "a request target that is not http://host[:port][/path] or host:port",
        })
    }
}

/// One header field as parsed: the name as sent (a token), and the value without
/// surrounding whitespace (visible ASCII, space, tab and bytes from 0x80).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The name, as sent (a token: compare it ignoring ASCII case).
    pub name: String,
    /// The value, trimmed.
    pub value: Vec<u8>,
}

/// A request head as parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// The method (a token).
    pub method: String,
    /// The request target (visible ASCII).
    pub target: String,
    /// The minor version: `HTTP/1.0` or `HTTP/1.1`.
    pub minor: u8,
    /// The header fields, in order.
    pub fields: Vec<Field>,
}

/// How a request's body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked.
    Chunked,
}

/// `tchar` of RFC 9110.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A byte allowed inside a field value (RFC 9110 `field-vchar`, space, tab).
fn is_value_byte(b: u8) -> bool {
    (0x21..=0x7e).contains(&b) || b == b' ' || b == b'\t' || b >= 0x80
}

/// Parse a complete request head: the bytes through the CRLF CRLF that ends it, and
/// nothing after.
pub fn parse_head(head: &[u8]) -> Result<RequestHead, HeadError> {
    let body = head.strip_suffix(b"\r\n\r\n").ok_or(HeadError::LineEnding)?;
    if body.is_empty() {
        return Err(HeadError::RequestLine);
    }
    // Every line ends with CRLF: split on CRLF, then no CR or LF may remain.
    let mut lines = Vec::new();
    let mut rest = body;
    loop {
        match rest.windows(2).position(|w| w == b"\r\n") {
            Some(i) => {
                lines.push(&rest[..i]);
                rest = &rest[i + 2..];
            }
            None => {
                lines.push(rest);
                break;
            }
        }
    }
    if lines.iter().any(|l| l.contains(&b'\r') || l.contains(&b'\n')) {
        return Err(HeadError::LineEnding);
    }
    let (request_line, field_lines) = lines.split_first().ok_or(HeadError::RequestLine)?;
    let (method, target, minor) = request_line_parts(request_line)?;
    let fields = field_lines.iter().map(|l| parse_field(l)).collect::<Result<Vec<_>, _>>()?;
    Ok(RequestHead { method, target, minor, fields })
}

fn request_line_parts(line: &[u8]) -> Result<(String, String, u8), HeadError> {
    if line.iter().any(|b| b.is_ascii_control()) {
        return Err(HeadError::ControlCharacter);
    }
    let mut parts = line.split(|b| *b == b' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::RequestLine);
    };
    if method.is_empty() || !method.iter().all(|b| is_tchar(*b)) {
        return Err(HeadError::RequestLine);
    }
    if target.is_empty() || !target.iter().all(|b| (0x21..=0x7e).contains(b)) {
        return Err(HeadError::RequestLine);
    }
    let minor = match version {
        b"HTTP/1.1" => 1,
        b"HTTP/1.0" => 0,
        v if v.starts_with(b"HTTP/") => return Err(HeadError::Version),
        _ => return Err(HeadError::RequestLine),
    };
    // Checked above: tokens and visible ASCII are UTF-8.
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ok((text(method), text(target), minor))
}

fn parse_field(line: &[u8]) -> Result<Field, HeadError> {
    if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
        return Err(HeadError::ObsFold);
    }
    let colon = line.iter().position(|b| *b == b':').ok_or(HeadError::HeaderName)?;
    let (name, value) = (&line[..colon], &line[colon + 1..]);
    if name.is_empty() || !name.iter().all(|b| is_tchar(*b)) {
        return Err(HeadError::HeaderName);
    }
    if !value.iter().all(|b| is_value_byte(*b)) {
        return Err(HeadError::ControlCharacter);
    }
    let ws = |b: &u8| *b == b' ' || *b == b'\t';
    let start = value.iter().position(|b| !ws(b)).unwrap_or(value.len());
    let end = value.iter().rposition(|b| !ws(b)).map_or(start, |i| i + 1);
    Ok(Field { name: String::from_utf8_lossy(name).into_owned(), value: value[start..end].to_vec() })
}

impl RequestHead {
    /// The fields named `name` (ignoring ASCII case).
    pub fn fields_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Field> + 'a {
        self.fields.iter().filter(move |f| f.name.eq_ignore_ascii_case(name))
    }

    /// The body's framing (point 4 of the module doc).
    pub fn framing(&self) -> Result<Framing, HeadError> {
        let lengths: Vec<&Field> = self.fields_named("content-length").collect();
        let codings: Vec<&Field> = self.fields_named("transfer-encoding").collect();
        match (lengths.as_slice(), codings.as_slice()) {
            ([], []) => Ok(Framing::None),
            ([_, ..], [_, ..]) => Err(HeadError::ConflictingFraming),
            ([one], []) => {
                let v = &one.value;
                if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
                    return Err(HeadError::ContentLength);
                }
                String::from_utf8_lossy(v).parse().map(Framing::Length).map_err(|_| HeadError::ContentLength)
            }
            ([], [one]) if self.minor == 1 && one.value.eq_ignore_ascii_case(b"chunked") => Ok(Framing::Chunked),
            ([], _) => Err(HeadError::TransferEncoding),
            _ => Err(HeadError::ContentLength),
        }
    }
}

/// Where a proxy request goes, as parsed from its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyTarget {
    /// `CONNECT host:port`: the host text (brackets kept for IPv6) and the port.
    Tunnel {
        /// The host, to be parsed strictly by the caller.
        host: String,
        /// The port (1 to 65535).
        port: u16,
    },
    /// `METHOD http://host[:port][/path]`: the host, the port (80 by default) and the
    /// path in origin form (`/` when absent).
    Absolute {
        /// The host, to be parsed strictly by the caller.
        host: String,
        /// The port (1 to 65535).
        port: u16,
        /// The origin-form path and query (starts with `/`).
        path: String,
    },
}

/// Split an authority `host[:port]` (`[v6]:port` too); `None` when malformed (a port
/// that is not 1 to 5 digits from 1 to 65535, userinfo, an empty host).
fn split_authority(a: &str, default_port: Option<u16>) -> Option<(String, u16)> {
    if a.contains('@') {
        return None;
    }
    let (host, port) = if let Some(rest) = a.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (format!("[{h}]"), port)
    } else {
        match a.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (a.to_string(), None),
        }
    };
    if host.is_empty() || host == "[]" {
        return None;
    }
    let port = match port {
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => p.parse().ok()?,
        Some(_) => return None,
        None => default_port?,
    };
    (port != 0).then_some((host, port))
}

/// What the client asked the proxy for: `Ok(None)` when the request is neither
/// `CONNECT` nor an absolute `http://` request (origin form, `https://`, another
/// scheme), `Err` when it is one of those but malformed.
pub fn proxy_target(head: &RequestHead) -> Result<Option<ProxyTarget>, HeadError> {
    if head.method == "CONNECT" {
        let (host, port) = split_authority(&head.target, None).ok_or(HeadError::Target)?;
        return Ok(Some(ProxyTarget::Tunnel { host, port }));
    }
    let t = &head.target;
    let Some(rest) = t.get(..7).filter(|s| s.eq_ignore_ascii_case("http://")).map(|_| &t[7..]) else {
        return Ok(None);
    };
    if rest.contains('#') {
        return Err(HeadError::Target);
    }
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (host, port) = split_authority(&rest[..end], Some(80)).ok_or(HeadError::Target)?;
    let path = match &rest[end..] {
        "" => "/".to_string(),
        p if p.starts_with('/') => p.to_string(),
        p => format!("/{p}"),
    };
    Ok(Some(ProxyTarget::Absolute { host, port, path }))
}

/// Header fields the proxy never passes on: hop-by-hop fields (RFC 9110 §7.6.1),
/// the client's `Host` (replaced by the decided authority), proxy credentials, and
/// the framing fields (rebuilt from [`Framing`]); every other `Proxy-*` field is
/// dropped too (they are meant for a proxy).
const DROPPED: [&str; 11] = [
    "host",
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
    "content-length",
    "transfer-encoding",
];

/// The head cordon sends to the origin for an absolute-form request, rebuilt from
/// parsed fields: `METHOD PATH HTTP/1.1`, `Host: host_header`, every other field as
/// `Name: value` except hop-by-hop, `Proxy-*` and framing ones and those the client's `Connection` names,
/// the framing of `framing`, and `Connection: close`.
pub fn origin_head(head: &RequestHead, path: &str, host_header: &str, framing: Framing) -> Vec<u8> {
    let nominated: Vec<String> = head
        .fields_named("connection")
        .flat_map(|f| f.value.split(|b| *b == b',').map(|t| String::from_utf8_lossy(t).trim().to_ascii_lowercase()))
        .collect();
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(format!("{} {path} HTTP/1.1\r\nHost: {host_header}\r\n", head.method).as_bytes());
    for f in &head.fields {
        let lower = f.name.to_ascii_lowercase();
        if DROPPED.contains(&lower.as_str()) || lower.starts_with("proxy-") || nominated.contains(&lower) {
            continue;
        }
        out.extend_from_slice(f.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(&f.value);
        out.extend_from_slice(b"\r\n");
    }
    match framing {
        Framing::None => {}
        Framing::Length(n) => out.extend_from_slice(format!("Content-Length: {n}\r\n").as_bytes()),
        Framing::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out
}

/// Why a chunked body is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChunkError {
    /// A size line that is not 1 to 16 hex digits with well-formed extensions, or
    /// over [`MAX_CHUNK_LINE`].
    Size,
    /// Chunk data not followed by CRLF.
    DataEnd,
    /// A trailer line that is not a header field, or a trailer section over the
    /// head's bound.
    Trailer,
}

impl fmt::Display for ChunkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ChunkError::Size => "an invalid chunk size line",
            ChunkError::DataEnd => "chunk data not followed by CRLF",
            ChunkError::Trailer => "an invalid chunked trailer",
        })
    }
}

/// Where a [`ChunkedDecoder`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ChunkState {
    /// Reading a size line (the bytes so far).
    Size(Vec<u8>),
    /// Reading this many more data bytes.
    Data(u64),
    /// Expecting the CRLF after data (how many of its bytes were seen).
    DataEnd(u8),
    /// Reading the trailer section (the bytes so far, through complete lines).
    Trailer(Vec<u8>),
    /// The body ended.
    Done,
}

/// A streaming decoder of a chunked body: fed the client's bytes, it yields the data
/// and stops exactly at the body's end (bytes after it are never consumed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkedDecoder {
    state: ChunkState,
    trailer_limit: usize,
}

impl ChunkedDecoder {
    /// A decoder whose trailer section may hold at most `trailer_limit` bytes.
    pub fn new(trailer_limit: usize) -> ChunkedDecoder {
        ChunkedDecoder { state: ChunkState::Size(Vec::new()), trailer_limit }
    }

    /// Whether the body ended.
    pub fn is_done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Consume a prefix of `input`, appending the data it carries to `data`; returns
    /// how many bytes were consumed (all of `input`, or up to the body's end).
    /// Trailer fields are checked and dropped.
    pub fn feed(&mut self, input: &[u8], data: &mut Vec<u8>) -> Result<usize, ChunkError> {
        let mut i = 0;
        while i < input.len() {
            match &mut self.state {
                ChunkState::Done => break,
                ChunkState::Size(line) => {
                    let b = input[i];
                    i += 1;
                    line.push(b);
                    if line.len() > MAX_CHUNK_LINE {
                        return Err(ChunkError::Size);
                    }
                    if b == b'\n' {
                        let size = chunk_size(line)?;
                        self.state = if size == 0 { ChunkState::Trailer(Vec::new()) } else { ChunkState::Data(size) };
                    }
                }
                ChunkState::Data(left) => {
                    let n = usize::try_from(*left).unwrap_or(usize::MAX).min(input.len() - i);
                    data.extend_from_slice(&input[i..i + n]);
                    i += n;
                    *left -= n as u64;
                    if *left == 0 {
                        self.state = ChunkState::DataEnd(0);
                    }
                }
                ChunkState::DataEnd(seen) => {
                    let want = if *seen == 0 { b'\r' } else { b'\n' };
                    if input[i] != want {
                        return Err(ChunkError::DataEnd);
                    }
                    i += 1;
                    *seen += 1;
                    if *seen == 2 {
                        self.state = ChunkState::Size(Vec::new());
                    }
                }
                ChunkState::Trailer(t) => {
                    let b = input[i];
                    i += 1;
                    t.push(b);
                    if t.len() > self.trailer_limit {
                        return Err(ChunkError::Trailer);
                    }
                    if b == b'\n' {
                        if t.as_slice() == b"\r\n" || t.ends_with(b"\r\n\r\n") {
                            let fields = t.strip_suffix(b"\r\n").unwrap_or(t);
                            check_trailer(fields)?;
                            self.state = ChunkState::Done;
                        } else if !t.ends_with(b"\r\n") {
                            return Err(ChunkError::Trailer);
                        }
                    }
                }
            }
        }
        Ok(i)
    }
}

/// The size of a chunk-size line (`HEX [; ext] CRLF`).
fn chunk_size(line: &[u8]) -> Result<u64, ChunkError> {
    let line = line.strip_suffix(b"\r\n").ok_or(ChunkError::Size)?;
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 || digits > 16 {
        return Err(ChunkError::Size);
    }
    let ext = &line[digits..];
    // Extensions (`;name[=value]`, possibly quoted) are dropped: only printable ASCII,
    // space and tab, and they start with `;` (optionally after whitespace).
    let ext_ok = ext.is_empty()
        || (ext.iter().all(|b| (0x20..=0x7e).contains(b) || *b == b'\t')
            && ext.iter().find(|b| **b != b' ' && **b != b'\t') == Some(&b';'));
    if !ext_ok {
        return Err(ChunkError::Size);
    }
    let hex = String::from_utf8_lossy(&line[..digits]);
    u64::from_str_radix(&hex, 16).map_err(|_| ChunkError::Size)
}

/// Check a trailer section (header fields, each ended by CRLF; empty is fine).
fn check_trailer(fields: &[u8]) -> Result<(), ChunkError> {
    if fields.is_empty() {
        return Ok(());
    }
    let mut head = b"X / HTTP/1.1\r\n".to_vec();
    head.extend_from_slice(fields);
    head.extend_from_slice(b"\r\n");
    parse_head(&head).map(|_| ()).map_err(|_| ChunkError::Trailer)
}

/// One chunk of `data` as cordon sends it upstream (`SIZE CRLF DATA CRLF`); empty data
/// gives the last chunk with no trailer (`0 CRLF CRLF`).
pub fn encode_chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(s: &str) -> Result<RequestHead, HeadError> {
        parse_head(s.as_bytes())
    }

    #[test]
    fn well_formed_heads_parse() {
        let h = head("GET http://a.test/x?y=1 HTTP/1.1\r\nHost: a.test\r\nX-A:  1 \t\r\nEmpty:\r\n\r\n").unwrap();
        assert_eq!((h.method.as_str(), h.target.as_str(), h.minor), ("GET", "http://a.test/x?y=1", 1));
        assert_eq!(h.fields.len(), 3);
        assert_eq!(h.fields[1], Field { name: "X-A".into(), value: b"1".to_vec() });
        assert_eq!(h.fields[2].value, b"");
        assert_eq!(h.framing(), Ok(Framing::None));
        let h = head("CONNECT [::1]:443 HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!(h.minor, 0);
        assert_eq!(proxy_target(&h), Ok(Some(ProxyTarget::Tunnel { host: "[::1]".into(), port: 443 })));
        // obs-text in values passes as opaque bytes.
        assert_eq!(
            head("GET http://a/ HTTP/1.1\r\nX: caf\u{e9}\r\n\r\n").unwrap().fields[0].value,
            "caf\u{e9}".as_bytes()
        );
    }

    #[test]
    fn malformed_heads_are_refused() {
        for (bad, why) in [
            ("GET http://a/ HTTP/1.1\r\nX-A: 1\r\rY: 2\r\n\r\n", HeadError::LineEnding),
            ("GET http://a/ HTTP/1.1\nHost: a\r\n\r\n", HeadError::LineEnding),
            ("GET http://a/ HTTP/1.1\r\nHost: a\n\r\n", HeadError::LineEnding),
            ("GET http://a/ HTTP/1.1\r\nX: a\0b\r\n\r\n", HeadError::ControlCharacter),
            ("GET http://a/ HTTP/1.1\r\nX: a\x7fb\r\n\r\n", HeadError::ControlCharacter),
            ("GET http://a/ HTTP/1.1\r\nX: a\x0bb\r\n\r\n", HeadError::ControlCharacter),
            ("GET http://a/\x01 HTTP/1.1\r\n\r\n", HeadError::ControlCharacter),
            ("GET\thttp://a/ HTTP/1.1\r\n\r\n", HeadError::ControlCharacter),
            ("GET http://a/ HTTP/1.1\r\nX: 1\r\n folded\r\n\r\n", HeadError::ObsFold),
            ("GET http://a/ HTTP/1.1\r\n\tX: 1\r\n\r\n", HeadError::ObsFold),
            ("GET http://a/ HTTP/1.1\r\nX : 1\r\n\r\n", HeadError::HeaderName),
            ("GET http://a/ HTTP/1.1\r\n: 1\r\n\r\n", HeadError::HeaderName),
            ("GET http://a/ HTTP/1.1\r\nNoColon\r\n\r\n", HeadError::HeaderName),
            ("GET  http://a/ HTTP/1.1\r\n\r\n", HeadError::RequestLine),
            ("GET http://a/ HTTP/1.1 \r\n\r\n", HeadError::RequestLine),
            ("G(T http://a/ HTTP/1.1\r\n\r\n", HeadError::RequestLine),
            ("GET http://a/ HTTP/2.0\r\n\r\n", HeadError::Version),
            ("GET http://a/ HTTP/1.1\r\n\r\n\r\n", HeadError::HeaderName),
            ("\r\n\r\n", HeadError::RequestLine),
            ("GET http://a/ HTTP/1.1\r\n", HeadError::LineEnding),
        ] {
            assert_eq!(head(bad).map(|_| ()), Err(why), "{bad:?}");
        }
    }

    #[test]
    fn framing_is_one_unambiguous_length_or_chunked() {
        let framing = |fields: &str| head(&format!("POST http://a/ HTTP/1.1\r\n{fields}\r\n")).unwrap().framing();
        assert_eq!(framing("Content-Length: 5\r\n"), Ok(Framing::Length(5)));
        assert_eq!(framing("transfer-encoding: Chunked\r\n"), Ok(Framing::Chunked));
        for (bad, why) in [
            ("Content-Length: 5\r\nContent-Length: 5\r\n", HeadError::ContentLength),
            ("Content-Length: 5, 5\r\n", HeadError::ContentLength),
            ("Content-Length: +5\r\n", HeadError::ContentLength),
            ("Content-Length: 0x5\r\n", HeadError::ContentLength),
            ("Content-Length: \r\n", HeadError::ContentLength),
            ("Content-Length: 99999999999999999999\r\n", HeadError::ContentLength),
            ("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", HeadError::ConflictingFraming),
            ("Transfer-Encoding: gzip, chunked\r\n", HeadError::TransferEncoding),
            ("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", HeadError::TransferEncoding),
            ("Transfer-Encoding: xchunked\r\n", HeadError::TransferEncoding),
        ] {
            assert_eq!(framing(bad), Err(why), "{bad:?}");
        }
        let old = head("POST http://a/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
        assert_eq!(old.framing(), Err(HeadError::TransferEncoding));
    }

    #[test]
    fn targets_are_parsed_strictly() {
        let target = |line: &str| proxy_target(&head(&format!("{line} HTTP/1.1\r\n\r\n")).unwrap());
        let abs = |host: &str, port, path: &str| {
            Ok(Some(ProxyTarget::Absolute { host: host.into(), port, path: path.into() }))
        };
        assert_eq!(target("GET http://a.test"), abs("a.test", 80, "/"));
        assert_eq!(target("GET HTTP://a.test:8080/x?q"), abs("a.test", 8080, "/x?q"));
        assert_eq!(target("GET http://a.test?q"), abs("a.test", 80, "/?q"));
        assert_eq!(target("GET http://[::1]:81/"), abs("[::1]", 81, "/"));
        assert_eq!(target("GET /x"), Ok(None));
        assert_eq!(target("GET https://a.test/"), Ok(None));
        for bad in [
            "GET http://u@a.test/",
            "GET http://a.test:0/",
            "GET http://a.test:99999/",
            "GET http://a.test:/",
            "GET http:///x",
            "GET http://a.test/#f",
            "CONNECT a.test",
            "CONNECT a.test:443x",
            "CONNECT :443",
            "CONNECT []:443",
        ] {
            assert_eq!(target(bad), Err(HeadError::Target), "{bad}");
        }
    }

    #[test]
    fn the_origin_head_is_rebuilt_from_parsed_fields() {
        let h = head(
            "POST http://a.test/up HTTP/1.0\r\nHost: other.test\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n\
             Proxy-Connection: keep-alive\r\nProxy-Cont-Length: 5\r\nUpgrade: h2c\r\nAccept:  */* \r\n\
             Content-Length: 3\r\n\r\n",
        )
        .unwrap();
        let out = origin_head(&h, "/up", "a.test:8080", h.framing().unwrap());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "POST /up HTTP/1.1\r\nHost: a.test:8080\r\nAccept: */*\r\nContent-Length: 3\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn chunked_bodies_decode_to_their_end_and_no_further() {
        let mut d = ChunkedDecoder::new(1024);
        let mut data = Vec::new();
        let body = b"3;ext=\"q\"\r\nabc\r\n0\r\nX-T: 1\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n";
        let n = d.feed(body, &mut data).unwrap();
        assert!(d.is_done());
        assert_eq!(data, b"abc");
        assert_eq!(&body[n..], b"GET /smuggled HTTP/1.1\r\n\r\n");
        // Byte by byte, the same.
        let mut d = ChunkedDecoder::new(1024);
        let mut data2 = Vec::new();
        let mut used = 0;
        for b in body.iter() {
            if d.is_done() {
                break;
            }
            used += d.feed(std::slice::from_ref(b), &mut data2).unwrap();
        }
        assert_eq!((data2, used), (data, n));
        for bad in [
            &b"5\r\nabc\r\n0\r\n\r\n"[..],
            b"zz\r\n",
            b"-1\r\n",
            b"0x3\r\nabc\r\n",
            b"3\nabc\r\n",
            b"3\r\nabc\n",
            b"3\r\nabcX\r\n",
            b"3;a\rb\r\nabc\r\n",
            b"3 x\r\nabc\r\n",
            b"11111111111111111\r\n",
            b"0\r\nX-T 1\r\n\r\n",
            b"0\r\n folded\r\n\r\n",
            b"0\r\nX: 1\n\r\n",
        ] {
            let mut d = ChunkedDecoder::new(1024);
            assert!(d.feed(bad, &mut Vec::new()).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        let mut d = ChunkedDecoder::new(8);
        assert_eq!(d.feed(b"0\r\nX-Long: 123456\r\n\r\n", &mut Vec::new()), Err(ChunkError::Trailer));
        assert_eq!(encode_chunk(b"abc"), b"3\r\nabc\r\n");
        assert_eq!(encode_chunk(b""), b"0\r\n\r\n");
    }
}
