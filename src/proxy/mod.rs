//! cordon's own egress proxy: the only way out of a sandbox that may reach some hosts
//! by name (`--allow-host`; docs/network.md).
//!
//! One [`Proxy`] per run, in cordon's own process (outside the sandbox), listening on
//! `127.0.0.1:<ephemeral>`. It speaks:
//! 1. **HTTP `CONNECT host:port`** (HTTPS and other TLS): decided, resolved, checked,
//!    connected, then the bytes are relayed both ways untouched.
//! 2. **Plain HTTP in absolute form** (`GET http://host[:port]/path HTTP/1.1`): decided
//!    like a tunnel; the head is parsed strictly ([`http`]: no control characters,
//!    no folding, one unambiguous framing) and the request goes to the origin as a head
//!    cordon rebuilds from the parsed fields, in origin form, with `Host` set to the
//!    decided authority, `Connection: close` and no hop-by-hop or `Proxy-*` fields; its
//!    body is forwarded by its framing (`Content-Length`, or chunked, decoded and
//!    re-encoded) and nothing after it, so a second request on the same connection
//!    cannot reach another name on the same server.
//! 3. **SOCKS5** (no authentication, `CONNECT` only; hostname or IP targets; parsed by
//!    [`socks`]).
//!
//! Every decision is made on the name the client asked for ([`rules`]); DNS is
//! resolved here, each request anew, and every resolved address is checked before the
//! proxy connects to exactly the checked addresses (no second lookup a rebinding
//! server could answer differently). A refused request is answered (`400`/`403`, SOCKS
//! reply 2) and recorded as a [`Denial`](crate::result::Denial) of kind `network`
//! carrying a typed [`ProxyRefusal`]: the `host:port` cordon parsed and normalized
//! (never the client's text; none when there was nothing to parse) and the
//! [`Refusal`]; evidence `proxy refused: <why>`. An allowed connection is appended to
//! the run's [`NetworkLog`] (at most [`MAX_NETWORK_LOG`] entries).
//!
//! Refused outright: malformed requests (HTTP or SOCKS5), requests with
//! `Proxy-Authorization` (a client that has proxy credentials is chaining to another
//! proxy), a target that is not a strict DNS name or IP literal (`user@host`,
//! `%`-escapes, `127.1`, `*.example.org`), non-`http` schemes in absolute form,
//! origin-form requests (the proxy is not a web server), SOCKS `BIND` and
//! `UDP ASSOCIATE`, and request heads over [`MAX_HEAD`] bytes.
//!
//! What it does not do: it does not look inside a tunnel (an allowed host that is
//! itself a proxy, or that accepts uploads, is reachable with everything that
//! implies), and it does not confine the command: the sandbox's seccomp filter and
//! supervisor make the proxy the only address a command can connect to (see
//! `crate::denials`).

pub mod http;
pub mod presets;
pub mod rules;
pub mod socks;

pub use presets::Preset;
pub use rules::{AddrClass, AllowList, HostPattern, HostPort, PatternError, ProxyRefusal, Refusal, Via};
#[cfg(target_os = "linux")]
mod server;
pub use crate::result::network::{NetworkLog, NetworkLogEntry};
#[cfg(target_os = "linux")]
pub use server::{client_env, Proxy, ProxyConfig, TestResolver};
use std::time::Duration;

/// At most this many allowed connections are listed per run; later ones are counted
/// ([`NetworkLog::dropped`]). A package install opens tens of connections; the cap
/// keeps a looping command from growing the result without bound.
pub const MAX_NETWORK_LOG: usize = 256;
/// The longest request head (request line and headers) or SOCKS request accepted:
/// ordinary clients send well under 4 KiB.
pub const MAX_HEAD: usize = 16 * 1024;
/// How long a client may take to send its request head, and the proxy to connect to
/// an origin: a stalled peer must not hold a thread for the rest of the run.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// The most connections served at once (one thread each); more are refused.
pub const MAX_CONNECTIONS: usize = 128;
/// The variable that fills the test resolver map (debug builds only; [`TestResolver`]).
pub const TEST_RESOLVE_ENV: &str = "CORDON_TEST_RESOLVE";
