//! Request parsing: one line of JSON-RPC into an id and a [`Method`] with typed
//! parameters, or an [`RpcError`] that names the problem. Pure and total (fuzzed).

use super::run::parse_run;
use super::{codes, RequestId, RpcError};
use crate::ceiling::RunParams;
use serde_json::{Map, Value};

/// The parameters of `hello`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HelloParams {
    /// Protocol versions the client speaks (any of them will do).
    pub protocol_versions: Option<Vec<u64>>,
    /// The client's name, for logs.
    pub client: Option<String>,
    /// What the client can do: `approve` means it answers the server's `approve`
    /// requests by asking its user (docs/protocol.md). Unknown entries are ignored.
    pub capabilities: Option<Vec<String>>,
}

/// A client's answer to one of the server's own requests (`approve`): a line with an
/// `id`, a `result` or an `error`, and no `method`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientResponse {
    /// The id of the server's request, a string.
    pub id: String,
    /// `result`, or the `error` object as `Err`.
    pub outcome: Result<Value, Value>,
}

/// The prefix of the ids of the server's own requests to the client.
pub const SERVER_REQUEST_ID_PREFIX: &str = "cordon-approve-";

/// `line` as a client's response to a server request, if it is one: a JSON object
/// without `method`, whose `id` is a string starting with [`SERVER_REQUEST_ID_PREFIX`]
/// and that has exactly one of `result` and `error`. Anything else is `None` (it is
/// then parsed as a request). Pure; never panics.
pub fn parse_response(line: &[u8]) -> Option<ClientResponse> {
    let Ok(Value::Object(mut obj)) = serde_json::from_slice::<Value>(line) else { return None };
    if obj.contains_key("method") {
        return None;
    }
    let Some(Value::String(id)) = obj.remove("id") else { return None };
    if !id.starts_with(SERVER_REQUEST_ID_PREFIX) {
        return None;
    }
    let outcome = match (obj.remove("result"), obj.remove("error")) {
        (Some(r), None) => Ok(r),
        (None, Some(e)) => Err(e),
        _ => return None,
    };
    Some(ClientResponse { id, outcome })
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

pub(super) fn type_name(v: &Value) -> &'static str {
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
pub(super) fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

pub(super) fn unknown_field(key: &str, known: &str) -> RpcError {
    RpcError::invalid_params(&truncate(key, 64), format!("unknown field (expected one of: {known})"))
}

fn no_params(params: Map<String, Value>) -> Result<(), RpcError> {
    match params.keys().next() {
        Some(k) => Err(unknown_field(k, "no params")),
        None => Ok(()),
    }
}

pub(super) fn want_string(field: &str, v: Value) -> Result<String, RpcError> {
    match v {
        Value::String(s) if s.contains('\0') => Err(RpcError::invalid_params(field, "contains a NUL byte")),
        Value::String(s) => Ok(s),
        other => Err(RpcError::invalid_params(field, format!("expected a string, got {}", type_name(&other)))),
    }
}

pub(super) fn want_u64(field: &str, v: Value) -> Result<u64, RpcError> {
    match &v {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| RpcError::invalid_params(field, format!("expected a non-negative integer, got {n}"))),
        other => {
            Err(RpcError::invalid_params(field, format!("expected a non-negative integer, got {}", type_name(other))))
        }
    }
}

pub(super) fn want_bool(field: &str, v: Value) -> Result<bool, RpcError> {
    match v {
        Value::Bool(b) => Ok(b),
        other => Err(RpcError::invalid_params(field, format!("expected true or false, got {}", type_name(&other)))),
    }
}

pub(super) fn want_strings(field: &str, v: Value) -> Result<Vec<String>, RpcError> {
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
            "capabilities" => out.capabilities = Some(want_strings("capabilities", value)?),
            other => return Err(unknown_field(other, "protocol_versions, client, capabilities")),
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Command;
    use crate::serve::protocol::response_ok;
    use serde_json::json;

    fn line(s: &str) -> Result<Incoming, ParseFailure> {
        parse_request(s.as_bytes())
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

    #[test]
    fn client_responses_are_told_apart_from_requests() {
        let r = parse_response(br#"{"jsonrpc":"2.0","id":"cordon-approve-3","result":{"grant":true}}"#).unwrap();
        assert_eq!((r.id.as_str(), r.outcome), ("cordon-approve-3", Ok(json!({"grant": true}))));
        let r = parse_response(br#"{"id":"cordon-approve-4","error":{"code":1,"message":"no"}}"#).unwrap();
        assert!(r.outcome.is_err());
        for not in [
            r#"{"id":"cordon-approve-3","method":"run","result":1}"#,
            r#"{"id":"other-3","result":1}"#,
            r#"{"id":3,"result":1}"#,
            r#"{"id":"cordon-approve-3","result":1,"error":{}}"#,
            r#"{"id":"cordon-approve-3"}"#,
            "[1]",
            "not json",
        ] {
            assert!(parse_response(not.as_bytes()).is_none(), "{not}");
        }
        let h = line(r#"{"id":1,"method":"hello","params":{"capabilities":["approve","x"]}}"#).unwrap();
        let Method::Hello(h) = h.method else { panic!() };
        assert_eq!(h.capabilities, Some(vec!["approve".to_string(), "x".to_string()]));
    }

    #[test]
    fn ceiling_only_fields_and_limit_forms() {
        let e = line(r#"{"id":1,"method":"run","params":{"command":"x","allow_system_root":true}}"#).unwrap_err();
        assert_eq!(e.error.data["field"], "allow_system_root");
        // The wire form: bytes as a number or with a suffix.
        let p =
            line(r#"{"id":1,"method":"run","params":{"command":"x","limit_memory":"64M","limit_pids":8}}"#).unwrap();
        let Method::Run(p) = p.method else { panic!() };
        assert_eq!(p.limits, crate::limits::LimitRequest { memory: Some(64 << 20), pids: Some(8), cpu: None });
        let e = line(r#"{"id":1,"method":"run","params":{"command":"x","limit_memory":"lots"}}"#).unwrap_err();
        assert_eq!(e.error.data["field"], "limit_memory");
    }
}
