//! The request protocol shared by `cordon serve` and `cordon mcp`: message parsing,
//! typed errors with stable codes, and the **ceiling** that requests may narrow but
//! never widen.
//!
//! Data flow of one request line (see docs/protocol.md for the wire reference):
//!
//! 1. [`LineSplitter`] cuts the byte stream into lines of at most [`MAX_LINE_BYTES`];
//!    a longer line is reported once as [`Frame::TooLong`] and the rest of it is
//!    discarded.
//! 2. [`parse_request`] turns a line into an [`Incoming`] (id + [`Method`] with typed
//!    params) or an [`RpcError`] that names the problem (and the id, when it could be
//!    read). It is pure: no I/O, no panics on any input (a fuzz target checks this).
//! 3. [`Ceiling::clamp`] turns [`RunParams`] into a [`Request`]: missing fields default
//!    to the ceiling, explicit fields may only narrow it; a widening field is refused
//!    with `CEILING_EXCEEDED` naming that field. It canonicalizes paths (I/O).
//! 4. After [`crate::Executor::resolve`], [`Ceiling::check_spec`] verifies the resolved
//!    spec once more (mode, workspace, every writable path, protected paths, network):
//!    a path swapped for a symlink between the clamp and the resolve cannot widen a run.
//!
//! What it does not do: it does not run anything (see [`crate::serve`]) and does not
//! format results for models (see [`crate::mcp`]).

use crate::error::CordonError;
use crate::mode::Mode;
use crate::policy::{resolve_policy, PolicyRequest};
use crate::request::{Command, Request, Spec, Stdin};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

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

// ------------------------------------------------------------------- framing

/// One unit cut from the input stream by [`LineSplitter`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A complete line (newline and a trailing `\r` removed).
    Line(Vec<u8>),
    /// A line longer than the limit; its bytes were discarded. `seen` is how many were
    /// seen before the limit was crossed (at least the limit plus one).
    TooLong {
        /// Bytes seen when the line was given up on.
        seen: usize,
    },
}

/// Cuts a byte stream into lines of at most `limit` bytes without ever buffering more
/// than `limit` bytes. Pure: feed it chunks, collect frames.
#[derive(Debug)]
pub struct LineSplitter {
    limit: usize,
    buf: Vec<u8>,
    discarding: bool,
}

impl LineSplitter {
    /// A splitter for lines of at most `limit` bytes.
    pub fn new(limit: usize) -> LineSplitter {
        LineSplitter { limit, buf: Vec::new(), discarding: false }
    }

    /// Feed a chunk; complete frames are appended to `out`.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<Frame>) {
        while !chunk.is_empty() {
            let nl = chunk.iter().position(|&b| b == b'\n');
            let (part, rest, ended) = match nl {
                Some(i) => (&chunk[..i], &chunk[i + 1..], true),
                None => (chunk, &chunk[chunk.len()..], false),
            };
            chunk = rest;
            if self.discarding {
                if ended {
                    self.discarding = false;
                }
                continue;
            }
            if self.buf.len() + part.len() > self.limit {
                out.push(Frame::TooLong { seen: self.buf.len() + part.len() });
                self.buf = Vec::new();
                self.discarding = !ended;
                continue;
            }
            self.buf.extend_from_slice(part);
            if ended {
                out.push(Frame::Line(take_line(&mut self.buf)));
            }
        }
    }

    /// End of input: a last line without a newline is still a line.
    pub fn finish(&mut self, out: &mut Vec<Frame>) {
        if !self.discarding && !self.buf.is_empty() {
            out.push(Frame::Line(take_line(&mut self.buf)));
        }
        self.discarding = false;
    }
}

fn take_line(buf: &mut Vec<u8>) -> Vec<u8> {
    let mut line = std::mem::take(buf);
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    line
}

/// Whether a line holds only whitespace (skipped silently, as JSON-lines readers do).
pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| b.is_ascii_whitespace())
}

// ------------------------------------------------------------------- parsing

/// The parameters of `run` and `start`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunParams {
    /// The command: a shell string or an argv.
    pub command: Option<Command>,
    /// Working directory (relative paths are taken from the ceiling's workspace).
    pub workdir: Option<PathBuf>,
    /// Deadline in milliseconds.
    pub timeout_ms: Option<u64>,
    /// In-memory tail per stream, in bytes.
    pub output_cap: Option<u64>,
    /// Spill-file bytes per stream (capped by the executor's maximum).
    pub spill_cap: Option<u64>,
    /// Bytes for the command's stdin.
    pub stdin: Option<String>,
    /// Extra environment variables, in the order given.
    pub env: Vec<(String, String)>,
    /// A mode at or below the ceiling's.
    pub mode: Option<Mode>,
    /// Writable roots within the ceiling's writable set.
    pub writable_roots: Option<Vec<PathBuf>>,
    /// Network, only if the ceiling allows it.
    pub network: Option<bool>,
    /// Resource limits, each at or below the ceiling's (`limit_memory` bytes,
    /// `limit_pids`, `limit_cpu` seconds).
    pub limits: crate::limits::LimitRequest,
}

/// The parameters of `hello`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HelloParams {
    /// Protocol versions the client speaks (any of them will do).
    pub protocol_versions: Option<Vec<u64>>,
    /// The client's name, for logs.
    pub client: Option<String>,
}

/// A request's method with its typed parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    /// Versioned handshake.
    Hello(HelloParams),
    /// Run in the foreground and answer with the result.
    Run(RunParams),
    /// Start in the background and answer with a handle.
    Start(RunParams),
    /// New output and status of a background process.
    Read {
        /// The handle from `start`.
        handle: u64,
    },
    /// Stop a background process (idempotent).
    Kill {
        /// The handle from `start`.
        handle: u64,
    },
    /// What this host can enforce under the ceiling.
    Probe,
}

/// A parsed request.
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming {
    /// The request id, echoed in the response exactly as sent (a string or a number).
    pub id: RequestId,
    /// What to do.
    pub method: Method,
}

/// Why a line could not be parsed: the id to answer with (null when it could not be
/// read) and the error.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseFailure {
    /// The request's id, or null.
    pub id: RequestId,
    /// The error.
    pub error: RpcError,
}

/// Parse one request line. Never panics, whatever the bytes.
pub fn parse_request(line: &[u8]) -> Result<Incoming, ParseFailure> {
    let fail = |id: RequestId, error: RpcError| ParseFailure { id, error };
    let value: Value = serde_json::from_slice(line).map_err(|e| {
        fail(RequestId::null(), RpcError::new(codes::PARSE_ERROR, "PARSE_ERROR", format!("not valid JSON: {e}")))
    })?;
    // The members again as raw text: the id is echoed exactly as written, and a member
    // given twice is refused (a JSON object parser would silently keep the last one).
    #[derive(serde::Deserialize)]
    struct Members<'a> {
        #[serde(borrow, default)]
        id: Option<&'a serde_json::value::RawValue>,
        #[serde(borrow, default, rename = "jsonrpc")]
        _jsonrpc: Option<&'a serde_json::value::RawValue>,
        #[serde(borrow, default, rename = "method")]
        _method: Option<&'a serde_json::value::RawValue>,
        #[serde(borrow, default, rename = "params")]
        _params: Option<&'a serde_json::value::RawValue>,
    }
    let raw_id = match serde_json::from_slice::<Members<'_>>(line) {
        Ok(m) => m.id.map(|r| RequestId(r.to_owned())),
        Err(e) if value.is_object() => {
            return Err(fail(
                RequestId::null(),
                RpcError::new(codes::INVALID_REQUEST, "INVALID_REQUEST", format!("malformed request: {e}")),
            ))
        }
        Err(_) => None,
    };
    let Value::Object(mut obj) = value else {
        return Err(fail(
            RequestId::null(),
            RpcError::new(codes::INVALID_REQUEST, "INVALID_REQUEST", "a request must be a JSON object"),
        ));
    };
    let id = match (obj.remove("id"), raw_id) {
        (Some(Value::String(_) | Value::Number(_)), Some(raw)) => raw,
        (None, _) | (Some(Value::String(_) | Value::Number(_)), None) => {
            return Err(fail(
                RequestId::null(),
                RpcError::new(
                    codes::INVALID_REQUEST,
                    "INVALID_REQUEST",
                    "missing `id` (cordon serve has no notifications: every request needs an id)",
                ),
            ))
        }
        (Some(other), _) => {
            return Err(fail(
                RequestId::null(),
                RpcError::new(
                    codes::INVALID_REQUEST,
                    "INVALID_REQUEST",
                    format!("`id` must be a string or a number, not {}", type_name(&other)),
                ),
            ))
        }
    };
    match obj.remove("jsonrpc") {
        None => {}
        Some(Value::String(v)) if v == "2.0" => {}
        Some(other) => {
            return Err(fail(
                id,
                RpcError::new(
                    codes::INVALID_REQUEST,
                    "INVALID_REQUEST",
                    format!("`jsonrpc` must be \"2.0\", not {other}"),
                ),
            ))
        }
    }
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        Some(other) => {
            return Err(fail(
                id,
                RpcError::new(
                    codes::INVALID_REQUEST,
                    "INVALID_REQUEST",
                    format!("`method` must be a string, not {}", type_name(&other)),
                ),
            ))
        }
        None => return Err(fail(id, RpcError::new(codes::INVALID_REQUEST, "INVALID_REQUEST", "missing `method`"))),
    };
    let params = match obj.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(other) => {
            return Err(fail(
                id,
                RpcError::new(
                    codes::INVALID_PARAMS,
                    "INVALID_PARAMS",
                    format!("`params` must be an object, not {}", type_name(&other)),
                ),
            ))
        }
    };
    if let Some(key) = obj.keys().next() {
        return Err(fail(
            id,
            RpcError::new(codes::INVALID_REQUEST, "INVALID_REQUEST", format!("unknown member `{key}` in the request")),
        ));
    }
    let parsed = match method.as_str() {
        "hello" => parse_hello(params).map(Method::Hello),
        "run" => parse_run(params).map(Method::Run),
        "start" => parse_run(params).map(Method::Start),
        "read" => parse_handle(params).map(|handle| Method::Read { handle }),
        "kill" => parse_handle(params).map(|handle| Method::Kill { handle }),
        "probe" => no_params(params).map(|()| Method::Probe),
        _ => Err(RpcError::new(
            codes::METHOD_NOT_FOUND,
            "METHOD_NOT_FOUND",
            format!("unknown method `{}` (methods: hello, run, start, read, kill, probe)", truncate(&method, 64)),
        )),
    };
    match parsed {
        Ok(method) => Ok(Incoming { id, method }),
        Err(e) => Err(fail(id, e)),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// At most `max` characters of `s` (for echoing client input in messages).
fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

fn unknown_field(key: &str, known: &str) -> RpcError {
    RpcError::invalid_params(&truncate(key, 64), format!("unknown field (expected one of: {known})"))
}

fn no_params(params: Map<String, Value>) -> Result<(), RpcError> {
    match params.keys().next() {
        Some(k) => Err(unknown_field(k, "no params")),
        None => Ok(()),
    }
}

fn want_string(field: &str, v: Value) -> Result<String, RpcError> {
    match v {
        Value::String(s) if s.contains('\0') => Err(RpcError::invalid_params(field, "contains a NUL byte")),
        Value::String(s) => Ok(s),
        other => Err(RpcError::invalid_params(field, format!("expected a string, got {}", type_name(&other)))),
    }
}

fn want_u64(field: &str, v: Value) -> Result<u64, RpcError> {
    match &v {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| RpcError::invalid_params(field, format!("expected a non-negative integer, got {n}"))),
        other => {
            Err(RpcError::invalid_params(field, format!("expected a non-negative integer, got {}", type_name(other))))
        }
    }
}

fn want_bool(field: &str, v: Value) -> Result<bool, RpcError> {
    match v {
        Value::Bool(b) => Ok(b),
        other => Err(RpcError::invalid_params(field, format!("expected true or false, got {}", type_name(&other)))),
    }
}

fn want_strings(field: &str, v: Value) -> Result<Vec<String>, RpcError> {
    match v {
        Value::Array(items) => {
            items.into_iter().enumerate().map(|(i, item)| want_string(&format!("{field}[{i}]"), item)).collect()
        }
        other => {
            Err(RpcError::invalid_params(field, format!("expected an array of strings, got {}", type_name(&other))))
        }
    }
}

fn parse_hello(params: Map<String, Value>) -> Result<HelloParams, RpcError> {
    let mut out = HelloParams::default();
    for (key, value) in params {
        if value.is_null() {
            continue;
        }
        match key.as_str() {
            "protocol_versions" => match value {
                Value::Array(items) => {
                    let versions = items
                        .into_iter()
                        .enumerate()
                        .map(|(i, v)| want_u64(&format!("protocol_versions[{i}]"), v))
                        .collect::<Result<Vec<_>, _>>()?;
                    out.protocol_versions = Some(versions);
                }
                other => {
                    return Err(RpcError::invalid_params(
                        "protocol_versions",
                        format!("expected an array of integers, got {}", type_name(&other)),
                    ))
                }
            },
            "client" => out.client = Some(want_string("client", value)?),
            other => return Err(unknown_field(other, "protocol_versions, client")),
        }
    }
    Ok(out)
}

const RUN_FIELDS: &str =
    "command, argv, workdir, timeout_ms, output_cap, spill_cap, stdin, env, mode, writable_roots, \
                          network, limit_memory, limit_pids, limit_cpu";

/// Parse the parameters of `run` / `start` (also used by the MCP tools' own fields).
pub fn parse_run(params: Map<String, Value>) -> Result<RunParams, RpcError> {
    let mut out = RunParams::default();
    let mut shell = None;
    let mut argv = None;
    for (key, value) in params {
        if value.is_null() {
            continue;
        }
        match key.as_str() {
            "command" => shell = Some(want_string("command", value)?),
            "argv" => {
                let v = want_strings("argv", value)?;
                if v.is_empty() {
                    return Err(RpcError::invalid_params("argv", "must name at least the program"));
                }
                if v[0].is_empty() {
                    return Err(RpcError::invalid_params("argv", "the program name is empty"));
                }
                argv = Some(v);
            }
            "workdir" => {
                let w = want_string("workdir", value)?;
                if w.is_empty() {
                    return Err(RpcError::invalid_params("workdir", "is empty"));
                }
                out.workdir = Some(PathBuf::from(w));
            }
            "timeout_ms" => {
                let t = want_u64("timeout_ms", value)?;
                if t == 0 {
                    return Err(RpcError::invalid_params("timeout_ms", "must be greater than zero"));
                }
                out.timeout_ms = Some(t);
            }
            "output_cap" => out.output_cap = Some(want_u64("output_cap", value)?),
            "limit_memory" => {
                out.limits.memory = Some(match value {
                    Value::String(s) => {
                        crate::limits::parse_bytes(&s).map_err(|e| RpcError::invalid_params("limit_memory", e))?
                    }
                    other => want_u64("limit_memory", other)?,
                })
            }
            "limit_pids" => out.limits.pids = Some(want_u64("limit_pids", value)?),
            "limit_cpu" => out.limits.cpu = Some(want_u64("limit_cpu", value)?),
            "spill_cap" => out.spill_cap = Some(want_u64("spill_cap", value)?),
            "stdin" => {
                out.stdin = Some(match value {
                    Value::String(s) => s,
                    other => {
                        return Err(RpcError::invalid_params(
                            "stdin",
                            format!("expected a string, got {}", type_name(&other)),
                        ))
                    }
                })
            }
            "env" => {
                let Value::Object(map) = value else {
                    return Err(RpcError::invalid_params(
                        "env",
                        format!("expected an object, got {}", type_name(&value)),
                    ));
                };
                for (name, v) in map {
                    if name.is_empty() || name.contains(['=', '\0']) {
                        return Err(RpcError::invalid_params(
                            "env",
                            format!("invalid variable name `{}`", truncate(&name, 64)),
                        ));
                    }
                    let v = want_string(&format!("env.{}", truncate(&name, 64)), v)?;
                    out.env.push((name, v));
                }
            }
            "mode" => {
                let m = want_string("mode", value)?;
                out.mode =
                    Some(m.parse().map_err(|e: crate::mode::ParseModeError| RpcError::invalid_params("mode", e))?);
            }
            "writable_roots" => {
                let roots = want_strings("writable_roots", value)?;
                if roots.iter().any(String::is_empty) {
                    return Err(RpcError::invalid_params("writable_roots", "contains an empty path"));
                }
                out.writable_roots = Some(roots.into_iter().map(PathBuf::from).collect());
            }
            "network" => out.network = Some(want_bool("network", value)?),
            other => return Err(unknown_field(other, RUN_FIELDS)),
        }
    }
    out.command = match (shell, argv) {
        (Some(_), Some(_)) => {
            return Err(RpcError::invalid_params("command", "give either `command` or `argv`, not both"))
        }
        (Some(s), None) => Some(Command::Shell(s)),
        (None, Some(v)) => Some(Command::Argv(v.into_iter().map(Into::into).collect())),
        (None, None) => None,
    };
    if out.command.is_none() {
        return Err(RpcError::invalid_params(
            "command",
            "missing (give `command` as a shell string or `argv` as an array)",
        ));
    }
    Ok(out)
}

fn parse_handle(params: Map<String, Value>) -> Result<u64, RpcError> {
    let mut handle = None;
    for (key, value) in params {
        match key.as_str() {
            "handle" => handle = Some(want_u64("handle", value)?),
            other => return Err(unknown_field(other, "handle")),
        }
    }
    handle.ok_or_else(|| RpcError::invalid_params("handle", "missing (the handle returned by `start`)"))
}

// ------------------------------------------------------------------- ceiling

/// The server flags that bound every request (`--mode`, `--cwd`, `--writable`,
/// `--network`, `--best-effort`).
#[derive(clap::Args, Debug, Clone)]
pub struct CeilingArgs {
    /// The widest mode a request may use: read-only, workspace-write or full-access.
    #[arg(long, default_value = "workspace-write", value_parser = parse_mode_arg)]
    pub mode: Mode,
    /// The workspace: every request's working directory lies inside it (default: the
    /// current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// An extra writable root requests may use (absolute path; repeatable).
    #[arg(long = "writable", value_name = "DIR")]
    pub writable: Vec<PathBuf>,
    /// Allow a writable root (or workspace) that is, lies inside or contains a system
    /// directory such as /etc, /usr or /var/lib; requests inherit it and cannot set it.
    #[arg(long)]
    pub allow_system_root: bool,
    /// Allow requests to turn the network on in confined modes.
    #[arg(long)]
    pub network: bool,
    /// A host unix socket every request may connect to by path (absolute; repeatable;
    /// requests inherit the list and cannot set it).
    #[arg(long = "allow-unix-socket", value_name = "PATH")]
    pub allow_unix_socket: Vec<PathBuf>,
    /// Run even where the host cannot enforce every restriction (gaps are reported).
    #[arg(long)]
    pub best_effort: bool,
    /// Ceiling limits: each request's default, and the most it may ask for.
    #[command(flatten)]
    pub limits: crate::limits::LimitArgs,
}

impl Default for CeilingArgs {
    /// The same defaults as the command line: `workspace-write` in the current directory.
    fn default() -> Self {
        CeilingArgs {
            mode: Mode::WorkspaceWrite,
            cwd: None,
            writable: Vec::new(),
            allow_system_root: false,
            network: false,
            allow_unix_socket: Vec::new(),
            best_effort: false,
            limits: crate::limits::LimitArgs::default(),
        }
    }
}

fn parse_mode_arg(s: &str) -> Result<Mode, String> {
    s.parse().map_err(|e: crate::mode::ParseModeError| e.to_string())
}

/// The widest policy a connection may use. Built once from the server flags, with
/// every path canonical.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ceiling {
    /// The widest mode.
    pub mode: Mode,
    /// The canonical workspace: working directories must lie inside it.
    pub workspace: PathBuf,
    /// Canonical extra writable roots (empty in `read-only`).
    pub writable_roots: Vec<PathBuf>,
    /// Requests may turn the network on in confined modes.
    pub network: bool,
    /// Runs may proceed with enforcement gaps (never settable by a request).
    pub best_effort: bool,
    /// Writable roots may be system directories (`--allow-system-root`; never settable
    /// by a request, which inherits it).
    pub allow_system_root: bool,
    /// Canonical host unix sockets requests may connect to (inherited, not settable).
    pub allow_unix_sockets: Vec<PathBuf>,
    /// Limits every request gets by default and may only lower.
    pub limits: crate::limits::LimitRequest,
}

impl Ceiling {
    /// Resolve the server flags (canonical paths; the same refusals as `cordon run`).
    pub fn from_args(args: &CeilingArgs) -> Result<Ceiling, CordonError> {
        let cwd = match &args.cwd {
            Some(c) => c.clone(),
            None => std::env::current_dir().map_err(|source| CordonError::Workdir { path: ".".into(), source })?,
        };
        let req = PolicyRequest {
            mode: args.mode,
            writable_roots: args.writable.clone(),
            network: args.network,
            best_effort: args.best_effort,
            allow_system_root: args.allow_system_root,
            allow_unix_sockets: args.allow_unix_socket.clone(),
            ..PolicyRequest::default()
        };
        let policy = resolve_policy(&req, &cwd)?;
        Ok(Ceiling {
            mode: policy.mode,
            workspace: policy.workspace,
            writable_roots: policy.writable_roots,
            network: policy.network,
            best_effort: policy.best_effort,
            allow_system_root: args.allow_system_root,
            allow_unix_sockets: policy.allow_unix_sockets,
            limits: args.limits.request(),
        })
    }

    /// A request's limits: each missing one takes the ceiling's, each given one may
    /// only be at or below the ceiling's (`CEILING_EXCEEDED` otherwise).
    fn clamp_limits(&self, asked: crate::limits::LimitRequest) -> Result<crate::limits::LimitRequest, RpcError> {
        let pick = |field: &'static str, asked: Option<u64>, ceiling: Option<u64>| match (asked, ceiling) {
            (Some(a), Some(c)) if a > c => Err(RpcError::ceiling(field, format!("asked for {a}, the ceiling is {c}"))
                .with("requested", a.to_string())
                .with("ceiling", c.to_string())),
            (a, c) => Ok(a.or(c)),
        };
        Ok(crate::limits::LimitRequest {
            memory: pick("limit_memory", asked.memory, self.limits.memory)?,
            pids: pick("limit_pids", asked.pids, self.limits.pids)?,
            cpu: pick("limit_cpu", asked.cpu, self.limits.cpu)?,
        })
    }

    /// Whether a request may turn the network on.
    pub fn allows_network(&self) -> bool {
        self.network || self.mode == Mode::FullAccess
    }

    /// The directories a request may make writable (workspace first); `None` means
    /// anywhere (`full-access`).
    pub fn writable_set(&self) -> Option<Vec<PathBuf>> {
        match self.mode {
            Mode::FullAccess => None,
            Mode::ReadOnly => Some(Vec::new()),
            Mode::WorkspaceWrite => {
                Some(std::iter::once(self.workspace.clone()).chain(self.writable_roots.iter().cloned()).collect())
            }
        }
    }

    fn allows_write_under(&self, path: &Path) -> bool {
        match self.writable_set() {
            None => true,
            Some(set) => set.iter().any(|w| path.starts_with(w)),
        }
    }

    /// The ceiling's protected paths as they are now (`.git` may appear after start).
    fn protected_now(&self) -> Result<Vec<PathBuf>, RpcError> {
        if self.mode != Mode::WorkspaceWrite {
            return Ok(Vec::new());
        }
        let req = PolicyRequest {
            mode: self.mode,
            writable_roots: self.writable_roots.clone(),
            network: self.network,
            best_effort: self.best_effort,
            allow_system_root: self.allow_system_root,
            ..PolicyRequest::default()
        };
        resolve_policy(&req, &self.workspace)
            .map(|p| p.protected)
            .map_err(|e| RpcError::cordon(&CordonError::InvalidPolicy(e)))
    }

    /// Turn request params into a [`Request`]: missing fields take the ceiling's
    /// value, explicit fields may only narrow it. A widening field is refused with
    /// `CEILING_EXCEEDED` naming the field. Relative paths are taken from the ceiling's
    /// workspace; all paths are canonicalized (symlinks resolved) before comparison.
    pub fn clamp(&self, params: RunParams) -> Result<Request, RpcError> {
        let Some(command) = params.command else {
            return Err(RpcError::invalid_params("command", "missing"));
        };
        let mode = params.mode.unwrap_or(self.mode);
        if mode > self.mode {
            return Err(RpcError::ceiling("mode", format!("asked for {mode}, the ceiling is {}", self.mode))
                .with("requested", mode.as_str())
                .with("ceiling", self.mode.as_str()));
        }
        let workdir = match &params.workdir {
            None => self.workspace.clone(),
            Some(w) => {
                let joined = self.workspace.join(w);
                let canon = joined
                    .canonicalize()
                    .map_err(|source| RpcError::cordon(&CordonError::Workdir { path: joined.clone(), source }))?;
                if !canon.starts_with(&self.workspace) {
                    return Err(RpcError::ceiling(
                        "workdir",
                        format!("`{}` is outside the workspace `{}`", canon.display(), self.workspace.display()),
                    )
                    .with("ceiling", self.workspace.display().to_string()));
                }
                canon
            }
        };
        let writes = mode == Mode::WorkspaceWrite;
        let protected = if writes { self.protected_now()? } else { Vec::new() };
        if let Some(p) = protected.iter().find(|p| workdir.starts_with(p)) {
            return Err(RpcError::ceiling(
                "workdir",
                format!("`{}` lies inside protected path `{}`, which stays read-only", workdir.display(), p.display()),
            ));
        }
        let network = params.network.unwrap_or(self.network);
        if network && !self.allows_network() {
            return Err(RpcError::ceiling("network", "the server was started without --network"));
        }
        let writable_roots = match params.writable_roots {
            // By default the whole writable set of the ceiling stays writable, also
            // when the working directory is a subdirectory of the workspace.
            None if writes => self.writable_set().unwrap_or_else(|| self.writable_roots.clone()),
            None => Vec::new(),
            Some(roots) => {
                let mut out = Vec::new();
                for root in roots {
                    let joined = self.workspace.join(&root);
                    let canon = joined.canonicalize().map_err(|source| {
                        RpcError::cordon(&CordonError::InvalidPolicy(crate::error::PolicyError::Root {
                            path: joined.clone(),
                            source,
                        }))
                    })?;
                    if !self.allows_write_under(&canon) {
                        return Err(RpcError::ceiling(
                            "writable_roots",
                            format!("`{}` is not inside the ceiling's writable set", canon.display()),
                        )
                        .with("path", canon.display().to_string()));
                    }
                    if let Some(p) = protected.iter().find(|p| canon.starts_with(p)) {
                        return Err(RpcError::ceiling(
                            "writable_roots",
                            format!("`{}` lies inside protected path `{}`", canon.display(), p.display()),
                        ));
                    }
                    crate::policy::real_writable_path(&joined, &canon, &self.writable_set().unwrap_or_default())
                        .map_err(|e| RpcError::cordon(&CordonError::InvalidPolicy(e)))?;
                    out.push(canon);
                }
                out
            }
        };
        // The workspace (the working directory) itself is not repeated as a root.
        let writable_roots: Vec<PathBuf> = writable_roots.into_iter().filter(|r| *r != workdir).collect();
        let mut req = Request::new(command);
        req.workdir = Some(workdir);
        req.timeout = params.timeout_ms.map(Duration::from_millis);
        req.output_cap = params.output_cap.map(|c| usize::try_from(c).unwrap_or(usize::MAX));
        req.spill_cap = params.spill_cap;
        req.stdin = match params.stdin {
            Some(s) => Stdin::Bytes(s.into_bytes()),
            None => Stdin::Null,
        };
        req.env = params.env;
        req.policy = PolicyRequest {
            mode,
            writable_roots,
            network,
            best_effort: self.best_effort,
            allow_system_root: self.allow_system_root,
            allow_unix_sockets: self.allow_unix_sockets.clone(),
            ..PolicyRequest::default()
        };
        req.limits = self.clamp_limits(params.limits)?;
        Ok(req)
    }

    /// Verify a resolved spec against the ceiling: the final word on "never wider".
    /// Catches anything that changed between [`Ceiling::clamp`] and the resolve (a
    /// directory swapped for a symlink by a concurrent command, a new `.git`).
    pub fn check_spec(&self, spec: &Spec) -> Result<(), RpcError> {
        let p = &spec.policy;
        if p.mode > self.mode {
            return Err(RpcError::ceiling("mode", format!("resolved to {}, the ceiling is {}", p.mode, self.mode)));
        }
        for (field, path) in [("workdir", &spec.workdir), ("workdir", &p.workspace)] {
            if !path.starts_with(&self.workspace) {
                return Err(RpcError::ceiling(field, format!("`{}` resolved outside the workspace", path.display())));
            }
        }
        if p.network && !self.allows_network() {
            return Err(RpcError::ceiling("network", "resolved with the network on"));
        }
        if p.best_effort && !self.best_effort {
            return Err(RpcError::ceiling("best_effort", "resolved as best effort"));
        }
        if let Some(s) = p.allow_unix_sockets.iter().find(|s| !self.allow_unix_sockets.contains(s)) {
            return Err(RpcError::ceiling(
                "allow_unix_sockets",
                format!("`{}` is not allowed by the server", s.display()),
            ));
        }
        if p.mode == Mode::WorkspaceWrite {
            let protected = self.protected_now()?;
            for w in p.writable() {
                if !self.allows_write_under(&w) {
                    return Err(RpcError::ceiling(
                        "writable_roots",
                        format!("`{}` resolved outside the ceiling", w.display()),
                    ));
                }
                if let Some(pp) = protected.iter().find(|pp| w.starts_with(pp)) {
                    return Err(RpcError::ceiling(
                        "writable_roots",
                        format!("`{}` lies inside protected path `{}`", w.display(), pp.display()),
                    ));
                }
            }
            for pp in &protected {
                let exposed = p.writable().iter().any(|w| pp.starts_with(w));
                if exposed && !p.protected.contains(pp) {
                    return Err(RpcError::ceiling(
                        "workdir",
                        format!("protected path `{}` would not stay read-only", pp.display()),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The ceiling as JSON (for `hello` and tool descriptions).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> Result<Incoming, ParseFailure> {
        parse_request(s.as_bytes())
    }

    #[test]
    fn splitter_cuts_lines_and_discards_long_ones() {
        let mut s = LineSplitter::new(8);
        let mut out = Vec::new();
        s.push(b"abc\r\nde", &mut out);
        s.push(b"f\n0123456789", &mut out);
        s.push(b"more\nok\n", &mut out);
        s.push(b"tail", &mut out);
        s.finish(&mut out);
        assert_eq!(
            out,
            vec![
                Frame::Line(b"abc".to_vec()),
                Frame::Line(b"def".to_vec()),
                Frame::TooLong { seen: 10 },
                Frame::Line(b"ok".to_vec()),
                Frame::Line(b"tail".to_vec()),
            ]
        );
    }

    #[test]
    fn splitter_limit_is_inclusive_and_long_line_with_newline_in_same_chunk() {
        let mut s = LineSplitter::new(4);
        let mut out = Vec::new();
        s.push(b"1234\n12345\nx\n", &mut out);
        assert_eq!(out, vec![Frame::Line(b"1234".to_vec()), Frame::TooLong { seen: 5 }, Frame::Line(b"x".to_vec())]);
    }

    #[test]
    fn parses_methods() {
        let r =
            line(r#"{"jsonrpc":"2.0","id":1,"method":"run","params":{"command":"echo hi","timeout_ms":5}}"#).unwrap();
        assert_eq!(r.id, json!(1));
        let Method::Run(p) = r.method else { panic!() };
        assert_eq!(p.command, Some(Command::Shell("echo hi".into())));
        assert_eq!(p.timeout_ms, Some(5));
        let r = line(r#"{"id":"a","method":"kill","params":{"handle":3}}"#).unwrap();
        assert_eq!(r.method, Method::Kill { handle: 3 });
        let r = line(r#"{"id":2,"method":"probe"}"#).unwrap();
        assert_eq!(r.method, Method::Probe);
        let r = line(r#"{"id":2,"method":"start","params":{"argv":["ls","-l"],"env":{"A":"1"}}}"#).unwrap();
        let Method::Start(p) = r.method else { panic!() };
        assert_eq!(p.command, Some(Command::Argv(vec!["ls".into(), "-l".into()])));
        assert_eq!(p.env, vec![("A".to_string(), "1".to_string())]);
    }

    #[test]
    fn ids_are_echoed_exactly_and_duplicate_members_refused() {
        for raw in ["18446744073709551616", "1.50", "-0", r#""x\u0041""#, "12345678901234567890123"] {
            let r = line(&format!(r#"{{"id": {raw} ,"method":"probe"}}"#)).unwrap();
            assert_eq!(r.id.as_str(), raw);
            let out = String::from_utf8(response_ok(&r.id, json!(1))).unwrap();
            assert_eq!(out, format!(r#"{{"jsonrpc":"2.0","id":{raw},"result":1}}"#));
        }
        let e = line(r#"{"id":1,"id":2,"method":"probe"}"#).unwrap_err();
        assert_eq!((e.id.as_str(), e.error.code), ("null", codes::INVALID_REQUEST), "{:?}", e.error);
        let e = line(r#"{"id":1,"method":"probe","method":"run"}"#).unwrap_err();
        assert_eq!(e.error.code, codes::INVALID_REQUEST);
    }

    #[test]
    fn errors_name_the_problem_and_keep_the_id() {
        let e = line("not json").unwrap_err();
        assert_eq!((e.id.value(), e.error.code), (Value::Null, codes::PARSE_ERROR));
        let e = line("[1]").unwrap_err();
        assert_eq!(e.error.code, codes::INVALID_REQUEST);
        let e = line(r#"{"method":"run"}"#).unwrap_err();
        assert!(e.error.message.contains("missing `id`"));
        let e = line(r#"{"id":7,"method":"nope"}"#).unwrap_err();
        assert_eq!((e.id.value(), e.error.code), (json!(7), codes::METHOD_NOT_FOUND));
        let e = line(r#"{"id":7,"method":"run","params":{"command":5}}"#).unwrap_err();
        assert_eq!(e.error.data["field"], "command");
        assert!(e.error.message.contains("expected a string"), "{}", e.error.message);
        let e = line(r#"{"id":7,"method":"run","params":{"cmd":"x"}}"#).unwrap_err();
        assert_eq!(e.error.data["field"], "cmd");
        let e = line(r#"{"id":7,"method":"run","params":{}}"#).unwrap_err();
        assert_eq!(e.error.data["field"], "command");
        let e = line(r#"{"id":7,"method":"run","params":{"command":"x","argv":["y"]}}"#).unwrap_err();
        assert_eq!(e.error.code, codes::INVALID_PARAMS);
        let e = line(r#"{"id":7,"method":"read","params":{"handle":-1}}"#).unwrap_err();
        assert_eq!(e.error.data["field"], "handle");
        let e = line(r#"{"id":7,"method":"run","params":{"command":"x","mode":"root"}}"#).unwrap_err();
        assert_eq!(e.error.data["field"], "mode");
        let e = line(r#"{"id":{"a":1},"method":"run"}"#).unwrap_err();
        assert_eq!(e.id, Value::Null);
        let e = line(r#"{"id":1,"jsonrpc":"1.0","method":"probe"}"#).unwrap_err();
        assert_eq!(e.id, json!(1));
        let e = line(r#"{"id":1,"method":"run","params":{"command":"x","timeout_ms":0}}"#).unwrap_err();
        assert_eq!(e.error.data["field"], "timeout_ms");
        let e = line(r#"{"id":1,"method":"run","params":{"command":"a\u0000b"}}"#).unwrap_err();
        assert_eq!(e.error.data["field"], "command");
        let json = e.error.to_json();
        assert_eq!(json["data"]["code"], "INVALID_PARAMS");
    }

    fn ceiling(dir: &Path, mode: Mode) -> Ceiling {
        Ceiling::from_args(&CeilingArgs { mode, cwd: Some(dir.to_path_buf()), ..CeilingArgs::default() }).unwrap()
    }

    fn params(cmd: &str) -> RunParams {
        RunParams { command: Some(Command::Shell(cmd.into())), ..RunParams::default() }
    }

    #[test]
    fn allow_system_root_is_a_ceiling_flag_requests_inherit_and_cannot_set() {
        let dir = tempfile::tempdir().unwrap();
        for allow in [false, true] {
            let args = CeilingArgs { cwd: Some(dir.path().into()), allow_system_root: allow, ..CeilingArgs::default() };
            let c = Ceiling::from_args(&args).unwrap();
            assert_eq!(c.allow_system_root, allow);
            assert_eq!(c.to_json()["allow_system_root"], allow);
            assert_eq!(c.clamp(params("true")).unwrap().policy.allow_system_root, allow);
        }
        let e = line(r#"{"id":1,"method":"run","params":{"command":"x","allow_system_root":true}}"#).unwrap_err();
        assert_eq!(e.error.data["field"], "allow_system_root");
        // A system directory as the ceiling's root is refused without the flag.
        let args =
            CeilingArgs { cwd: Some(dir.path().into()), writable: vec!["/etc".into()], ..CeilingArgs::default() };
        let err = Ceiling::from_args(&args).unwrap_err();
        assert!(matches!(err, CordonError::InvalidPolicy(crate::error::PolicyError::TooWide { .. })), "{err}");
    }

    #[test]
    fn limits_take_the_ceiling_and_may_only_lower_it() {
        use crate::limits::{LimitArgs, LimitRequest};
        let dir = tempfile::tempdir().unwrap();
        let args = CeilingArgs {
            cwd: Some(dir.path().to_path_buf()),
            limits: LimitArgs { memory: Some(1 << 30), pids: Some(100), cpu: None },
            ..CeilingArgs::default()
        };
        let c = Ceiling::from_args(&args).unwrap();
        // Missing: the ceiling's (explicit, so a host that cannot enforce it refuses).
        let r = c.clamp(params("true")).unwrap();
        assert_eq!(r.limits, LimitRequest { memory: Some(1 << 30), pids: Some(100), cpu: None });
        // Lower: taken; no ceiling (cpu): anything the executor's caps allow.
        let lower = LimitRequest { memory: Some(64 << 20), pids: Some(10), cpu: Some(5) };
        let r = c.clamp(RunParams { limits: lower, ..params("true") }).unwrap();
        assert_eq!(r.limits, lower);
        // Higher: CEILING_EXCEEDED naming the field.
        for (asked, field) in [
            (LimitRequest { memory: Some(2 << 30), ..LimitRequest::default() }, "limit_memory"),
            (LimitRequest { pids: Some(101), ..LimitRequest::default() }, "limit_pids"),
        ] {
            let e = c.clamp(RunParams { limits: asked, ..params("x") }).unwrap_err();
            assert_eq!(e.data["field"], field, "{e:?}");
        }
        // The wire form: bytes as a number or with a suffix.
        let p =
            line(r#"{"id":1,"method":"run","params":{"command":"x","limit_memory":"64M","limit_pids":8}}"#).unwrap();
        let Method::Run(p) = p.method else { panic!() };
        assert_eq!(p.limits, LimitRequest { memory: Some(64 << 20), pids: Some(8), cpu: None });
        let e = line(r#"{"id":1,"method":"run","params":{"command":"x","limit_memory":"lots"}}"#).unwrap_err();
        assert_eq!(e.error.data["field"], "limit_memory");
    }

    #[test]
    fn clamp_defaults_to_the_ceiling_and_refuses_widening() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(dir.path().join("other")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("other"), ws.join("escape")).unwrap();
        let c = ceiling(&ws, Mode::WorkspaceWrite);
        let ws = ws.canonicalize().unwrap();

        let r = c.clamp(params("true")).unwrap();
        assert_eq!(r.workdir.as_deref(), Some(ws.as_path()));
        assert_eq!(r.policy.mode, Mode::WorkspaceWrite);
        assert!(!r.policy.network);

        // A subdirectory keeps the whole workspace writable.
        let r = c.clamp(RunParams { workdir: Some("sub".into()), ..params("true") }).unwrap();
        assert_eq!(r.workdir, Some(ws.join("sub")));
        assert_eq!(r.policy.writable_roots, vec![ws.clone()]);

        let narrow = c.clamp(RunParams { mode: Some(Mode::ReadOnly), ..params("true") }).unwrap();
        assert_eq!(narrow.policy.mode, Mode::ReadOnly);
        assert!(narrow.policy.writable_roots.is_empty());

        let field = |p: RunParams| c.clamp(p).unwrap_err().data["field"].as_str().unwrap().to_string();
        assert_eq!(field(RunParams { mode: Some(Mode::FullAccess), ..params("x") }), "mode");
        assert_eq!(field(RunParams { network: Some(true), ..params("x") }), "network");
        assert_eq!(field(RunParams { workdir: Some("/".into()), ..params("x") }), "workdir");
        assert_eq!(field(RunParams { workdir: Some("escape".into()), ..params("x") }), "workdir");
        assert_eq!(field(RunParams { workdir: Some("..".into()), ..params("x") }), "workdir");
        assert_eq!(field(RunParams { workdir: Some(".git".into()), ..params("x") }), "workdir");
        assert_eq!(field(RunParams { writable_roots: Some(vec!["/var".into()]), ..params("x") }), "writable_roots");
        assert_eq!(field(RunParams { writable_roots: Some(vec!["escape".into()]), ..params("x") }), "writable_roots");
        assert_eq!(field(RunParams { writable_roots: Some(vec![".git".into()]), ..params("x") }), "writable_roots");
        let e = c.clamp(RunParams { workdir: Some("missing".into()), ..params("x") }).unwrap_err();
        assert_eq!(e.name, "WORKDIR_UNAVAILABLE");
    }

    #[test]
    fn read_only_ceiling_refuses_every_write_root() {
        let dir = tempfile::tempdir().unwrap();
        let c = ceiling(dir.path(), Mode::ReadOnly);
        let e = c.clamp(RunParams { writable_roots: Some(vec![".".into()]), ..params("x") }).unwrap_err();
        assert_eq!(e.data["field"], "writable_roots");
        let e = c.clamp(RunParams { mode: Some(Mode::WorkspaceWrite), ..params("x") }).unwrap_err();
        assert_eq!(e.data["field"], "mode");
    }

    #[test]
    fn check_spec_refuses_a_resolved_widening() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let c = ceiling(&ws, Mode::WorkspaceWrite);
        let exec = crate::Executor::new(crate::ExecutorConfig::default()).unwrap();
        let ok = exec.resolve(c.clamp(params("true")).unwrap()).unwrap();
        c.check_spec(&ok).unwrap();
        let mut wide = ok.clone();
        wide.policy.writable_roots.push(dir.path().canonicalize().unwrap());
        assert_eq!(c.check_spec(&wide).unwrap_err().data["field"], "writable_roots");
        let mut wide = ok.clone();
        wide.policy.mode = Mode::FullAccess;
        assert_eq!(c.check_spec(&wide).unwrap_err().data["field"], "mode");
        let mut wide = ok;
        wide.policy.network = true;
        assert_eq!(c.check_spec(&wide).unwrap_err().data["field"], "network");
    }
}
