//! The proxy's decisions and their words, at their old path: the host patterns and
//! allow-lists live with policy (`crate::policy::hosts`, which policy, flags, the
//! ceiling and escalation use), the words a result carries (a parsed host and port,
//! the class of an address, a refusal) with the result (`crate::result`).

pub use crate::policy::hosts::{AllowList, Grant, HostPattern, IpRange, PatternError};
pub use crate::result::network::{
    class_on, classify, normalize_name, AddrClass, HostPort, NotHostPort, ProxyRefusal, Refusal, Target, Via,
    MAX_HOST_LEN,
};
