//! The wire protocol of `cordon serve` (and the parameter parsing `cordon mcp` shares):
//! line framing, JSON-RPC message parsing and typed errors with stable codes.
//!
//! Data flow of one request line (see docs/protocol.md for the wire reference):
//!
//! 1. [`LineSplitter`] ([`frame`]) cuts the byte stream into lines of at most
//!    [`MAX_LINE_BYTES`]; a longer line is reported once as [`Frame::TooLong`] and the
//!    rest of it is discarded.
//! 2. [`parse_request`] ([`params`]) turns a line into an [`Incoming`] (id +
//!    [`Method`] with typed params) or an [`RpcError`] that names the problem (and the
//!    id, when it could be read). It is pure: no I/O, no panics on any input (a fuzz
//!    target checks this).
//! 3. The request's [`RunParams`] then go through the ceiling ([`crate::ceiling`]):
//!    clamp, resolve, check; a [`CeilingError`] becomes an [`RpcError`] here.
//!
//! What it does not do: it does not bound requests (see [`crate::ceiling`]), does not
//! run anything (see [`crate::serve`]) and does not format results for models (see
//! [`crate::mcp`]).

use crate::ceiling::CeilingError;
use crate::error::CordonError;
use serde::Serialize;
use serde_json::{json, Map, Value};

pub mod frame;
pub mod params;
pub mod run;

pub use crate::ceiling::RunParams;
pub use frame::{is_blank, Frame, LineSplitter};
pub use params::{
    parse_request, parse_response, ClientResponse, HelloParams, Incoming, Method, ParseFailure,
    SERVER_REQUEST_ID_PREFIX,
};

/// The protocol version of `cordon serve` (the `hello` handshake reports it). It
/// changes only for incompatible changes; additions are announced as capabilities.
pub const PROTOCOL_VERSION: u64 = 1;

/// The longest request line accepted, newline excluded: 1 MiB holds any sensible
/// command and stdin, and bounds what one line can make the server buffer.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// What `hello` announces the server can do. Clients test membership; new entries may
/// appear without a protocol version change.
pub const CAPABILITIES: &[&str] = &[
    "run",
    "start",
    "read",
    "kill",
    "probe",
    "argv",
    "stdin",
    "env",
    "narrow-mode",
    "narrow-workdir",
    "narrow-writable-roots",
    "narrow-network",
    "approve",
];

/// JSON-RPC error codes used by cordon (the standard ones and cordon's own range).
pub mod codes {
    /// The line is not JSON (or is too long).
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON is not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// A parameter is missing, mistyped or unknown.
    pub const INVALID_PARAMS: i64 = -32602;
    /// A bug in cordon (never expected).
    pub const INTERNAL_ERROR: i64 = -32603;
    /// cordon failed before the command ran (`error.data.code` names the cordon error,
    /// e.g. `SANDBOX_UNAVAILABLE`).
    pub const CORDON_ERROR: i64 = -32000;
    /// The request asked for more than the server's ceiling.
    pub const CEILING_EXCEEDED: i64 = -32001;
    /// No background process has that handle.
    pub const UNKNOWN_HANDLE: i64 = -32002;
    /// Too many background processes are running on this connection.
    pub const TOO_MANY_PROCESSES: i64 = -32003;
    /// The client asked for a protocol version this server does not speak.
    pub const UNSUPPORTED_VERSION: i64 = -32004;
    /// The server is shutting down (its input closed); nothing new starts.
    pub const SHUTTING_DOWN: i64 = -32005;
}

/// A protocol error: JSON-RPC `code`, a stable machine name (`error.data.code`), a
/// human message and optional extra data.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// JSON-RPC code (see [`codes`]).
    pub code: i64,
    /// Stable name, e.g. `INVALID_PARAMS`, `CEILING_EXCEEDED`, `SANDBOX_UNAVAILABLE`.
    pub name: &'static str,
    /// What went wrong, for people.
    pub message: String,
    /// Extra machine-readable facts (merged into `error.data`).
    pub data: Map<String, Value>,
}

impl RpcError {
    /// An error without extra data.
    pub fn new(code: i64, name: &'static str, message: impl Into<String>) -> RpcError {
        RpcError { code, name, message: message.into(), data: Map::new() }
    }

    /// Add one fact to `error.data`.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> RpcError {
        self.data.insert(key.to_string(), value.into());
        self
    }

    /// A missing, mistyped or unknown parameter; `field` is named in the message and
    /// in `error.data.field`.
    pub fn invalid_params(field: &str, why: impl std::fmt::Display) -> RpcError {
        RpcError::new(codes::INVALID_PARAMS, "INVALID_PARAMS", format!("invalid params: `{field}`: {why}"))
            .with("field", field)
    }

    /// A field that would widen the ceiling.
    pub fn ceiling(field: &str, why: impl std::fmt::Display) -> RpcError {
        RpcError::new(
            codes::CEILING_EXCEEDED,
            "CEILING_EXCEEDED",
            format!("`{field}` would widen the server's ceiling: {why}"),
        )
        .with("field", field)
    }

    /// A cordon error from before the command ran.
    pub fn cordon(e: &CordonError) -> RpcError {
        let mut err = RpcError::new(codes::CORDON_ERROR, e.code(), e.to_string());
        let reasons = e.runner_reasons();
        if !reasons.is_empty() {
            err = err.with("reasons", serde_json::to_value(reasons).unwrap_or_default());
        }
        err
    }

    /// The `error` object of a response.
    pub fn to_json(&self) -> Value {
        let mut data = self.data.clone();
        data.insert("code".into(), Value::from(self.name));
        json!({ "code": self.code, "message": self.message, "data": data })
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.name, self.code, self.message)
    }
}

/// A success response line (without the trailing newline).
pub fn response_ok(id: &RequestId, result: Value) -> Vec<u8> {
    #[derive(Serialize)]
    struct Ok<'a> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        result: Value,
    }
    serde_json::to_vec(&Ok { jsonrpc: "2.0", id, result }).unwrap_or_else(|_| b"{}".to_vec())
}

/// An error response line (without the trailing newline).
pub fn response_err(id: &RequestId, err: &RpcError) -> Vec<u8> {
    #[derive(Serialize)]
    struct Err<'a> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        error: Value,
    }
    serde_json::to_vec(&Err { jsonrpc: "2.0", id, error: err.to_json() }).unwrap_or_else(|_| b"{}".to_vec())
}

/// A request id exactly as the client wrote it (its raw JSON text: a string or a
/// number, never rewritten, so `18446744073709551616` or `1.50` come back as sent).
#[derive(Debug, Clone)]
pub struct RequestId(Box<serde_json::value::RawValue>);

impl RequestId {
    /// The `null` id of responses to requests whose id could not be read.
    pub fn null() -> RequestId {
        RequestId(serde_json::value::RawValue::from_string("null".into()).expect("null is JSON"))
    }

    /// The raw JSON text.
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The id as a JSON value (numbers may lose precision: for comparisons only).
    pub fn value(&self) -> Value {
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }
}

impl PartialEq for RequestId {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<Value> for RequestId {
    fn eq(&self, other: &Value) -> bool {
        self.value() == *other
    }
}

impl Serialize for RequestId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl From<CeilingError> for RpcError {
    fn from(e: CeilingError) -> RpcError {
        match e {
            CeilingError::Exceeded { field, why, data } => {
                data.into_iter().fold(RpcError::ceiling(field, why), |err, (k, v)| err.with(k, v))
            }
            CeilingError::MissingCommand => RpcError::invalid_params("command", "missing"),
            CeilingError::Cordon(e) => RpcError::cordon(&e),
            // `CeilingError` is non-exhaustive for callers outside the crate only.
        }
    }
}
