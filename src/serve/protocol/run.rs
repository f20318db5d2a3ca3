//! The parameters of `run` and `start`: a serde type with `deny_unknown_fields`
//! ([`RunParamsWire`]) whose fields are read by the same typed checks as every other
//! parameter, then assembled into the [`RunParams`] the ceiling clamps.
//!
//! The protocol's error contract is kept exactly: a field of the wrong type names the
//! field (`argv[1]`, `env.NAME`) in `error.data.field`; `null` means "not given" (for
//! any member, an unknown one too); the
//! first bad field in key order is the one reported; an unknown field lists the known
//! ones. serde's own error carries only a message, so a field's [`RpcError`] travels
//! beside it in a thread-local slot.

use super::params::{truncate, type_name, unknown_field, want_bool, want_string, want_strings, want_u64};
use super::RpcError;
use crate::ceiling::RunParams;
use crate::mode::Mode;
use crate::request::Command;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use std::cell::Cell;
use std::path::PathBuf;

/// The known fields, in the order error messages list them.
const RUN_FIELDS: &str = "command, argv, workdir, timeout_ms, output_cap, spill_cap, stdin, env, mode, \
                          writable_roots, network, allow_hosts, limit_memory, limit_pids, limit_cpu, \
                          observe_writes";

thread_local! {
    /// The typed error of the field whose check failed inside `serde_json::from_value`
    /// (which is synchronous, on this thread): set by [`field`], taken by [`parse_run`].
    static FIELD_ERROR: Cell<Option<RpcError>> = const { Cell::new(None) };
}

/// The wire form of the parameters of `run` / `start`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunParamsWire {
    /// A shell string (`bash -c`).
    #[serde(default, deserialize_with = "de_command")]
    pub command: Option<String>,
    /// A program and its arguments.
    #[serde(default, deserialize_with = "de_argv")]
    pub argv: Option<Vec<String>>,
    /// Working directory.
    #[serde(default, deserialize_with = "de_workdir")]
    pub workdir: Option<PathBuf>,
    /// Deadline in milliseconds (above zero).
    #[serde(default, deserialize_with = "de_timeout_ms")]
    pub timeout_ms: Option<u64>,
    /// In-memory tail per stream, in bytes.
    #[serde(default, deserialize_with = "de_output_cap")]
    pub output_cap: Option<u64>,
    /// Spill-file bytes per stream.
    #[serde(default, deserialize_with = "de_spill_cap")]
    pub spill_cap: Option<u64>,
    /// Bytes for the command's stdin.
    #[serde(default, deserialize_with = "de_stdin")]
    pub stdin: Option<String>,
    /// Extra environment variables, in the order given.
    #[serde(default, deserialize_with = "de_env")]
    pub env: Option<Vec<(String, String)>>,
    /// A mode at or below the ceiling's.
    #[serde(default, deserialize_with = "de_mode")]
    pub mode: Option<Mode>,
    /// Writable roots within the ceiling's writable set.
    #[serde(default, deserialize_with = "de_writable_roots")]
    pub writable_roots: Option<Vec<PathBuf>>,
    /// Network on or off.
    #[serde(default, deserialize_with = "de_network")]
    pub network: Option<bool>,
    /// Hosts reachable by name through cordon's proxy, within the ceiling's.
    #[serde(default, deserialize_with = "de_allow_hosts")]
    pub allow_hosts: Option<Vec<crate::policy::hosts::HostPattern>>,
    /// Memory limit: bytes, as a number or with a K/M/G/T suffix.
    #[serde(default, deserialize_with = "de_limit_memory")]
    pub limit_memory: Option<u64>,
    /// Process limit.
    #[serde(default, deserialize_with = "de_limit_pids")]
    pub limit_pids: Option<u64>,
    /// CPU seconds per process.
    #[serde(default, deserialize_with = "de_limit_cpu")]
    pub limit_cpu: Option<u64>,
    /// Observe write-intent syscalls for denial evidence (default true).
    #[serde(default, deserialize_with = "de_observe_writes")]
    pub observe_writes: Option<bool>,
}

/// Read one field: `null` is "not given"; otherwise `check` types it, and its error
/// waits in [`FIELD_ERROR`] while serde unwinds.
fn field<'de, D: Deserializer<'de>, T>(
    d: D,
    check: impl FnOnce(Value) -> Result<T, RpcError>,
) -> Result<Option<T>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        v => check(v).map(Some).map_err(|e| {
            FIELD_ERROR.with(|c| c.set(Some(e)));
            serde::de::Error::custom("invalid parameter")
        }),
    }
}

macro_rules! de_field {
    ($name:ident, $t:ty, $check:expr) => {
        fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<$t>, D::Error> {
            field(d, $check)
        }
    };
}

de_field!(de_command, String, |v| want_string("command", v));
de_field!(de_argv, Vec<String>, |v| {
    let v = want_strings("argv", v)?;
    if v.is_empty() {
        return Err(RpcError::invalid_params("argv", "must name at least the program"));
    }
    if v[0].is_empty() {
        return Err(RpcError::invalid_params("argv", "the program name is empty"));
    }
    Ok(v)
});
de_field!(de_workdir, PathBuf, |v| {
    let w = want_string("workdir", v)?;
    if w.is_empty() {
        return Err(RpcError::invalid_params("workdir", "is empty"));
    }
    Ok(PathBuf::from(w))
});
de_field!(de_timeout_ms, u64, |v| {
    let t = want_u64("timeout_ms", v)?;
    if t == 0 {
        return Err(RpcError::invalid_params("timeout_ms", "must be greater than zero"));
    }
    Ok(t)
});
de_field!(de_output_cap, u64, |v| want_u64("output_cap", v));
de_field!(de_spill_cap, u64, |v| want_u64("spill_cap", v));
de_field!(de_limit_pids, u64, |v| want_u64("limit_pids", v));
de_field!(de_limit_cpu, u64, |v| want_u64("limit_cpu", v));
de_field!(de_limit_memory, u64, |v| match v {
    Value::String(s) => crate::limits::parse_bytes(&s).map_err(|e| RpcError::invalid_params("limit_memory", e)),
    other => want_u64("limit_memory", other),
});
de_field!(de_stdin, String, |v| match v {
    Value::String(s) => Ok(s),
    other => Err(RpcError::invalid_params("stdin", format!("expected a string, got {}", type_name(&other)))),
});
de_field!(de_env, Vec<(String, String)>, |v| {
    let Value::Object(map) = v else {
        return Err(RpcError::invalid_params("env", format!("expected an object, got {}", type_name(&v))));
    };
    let mut out = Vec::new();
    for (name, v) in map {
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(RpcError::invalid_params("env", format!("invalid variable name `{}`", truncate(&name, 64))));
        }
        let v = want_string(&format!("env.{}", truncate(&name, 64)), v)?;
        out.push((name, v));
    }
    Ok(out)
});
de_field!(de_mode, Mode, |v| {
    let m = want_string("mode", v)?;
    m.parse().map_err(|e: crate::mode::ParseModeError| RpcError::invalid_params("mode", e))
});
de_field!(de_writable_roots, Vec<PathBuf>, |v| {
    let roots = want_strings("writable_roots", v)?;
    if roots.iter().any(String::is_empty) {
        return Err(RpcError::invalid_params("writable_roots", "contains an empty path"));
    }
    Ok(roots.into_iter().map(PathBuf::from).collect())
});
de_field!(de_network, bool, |v| want_bool("network", v));
de_field!(de_allow_hosts, Vec<crate::policy::hosts::HostPattern>, |v| {
    let patterns = want_strings("allow_hosts", v)?;
    patterns.iter().map(|p| p.parse().map_err(|e| RpcError::invalid_params("allow_hosts", e))).collect()
});
de_field!(de_observe_writes, bool, |v| want_bool("observe_writes", v));

/// The field serde named as unknown, recovered from its message (whose shape serde
/// fixes: the field between a known prefix and the known list).
fn unknown_key(e: &serde_json::Error) -> Option<String> {
    let suffix = <serde_json::Error as serde::de::Error>::unknown_field("", RUN_WIRE_FIELDS).to_string();
    let suffix = suffix.strip_prefix("unknown field ``")?;
    let msg = e.to_string();
    Some(msg.strip_prefix("unknown field `")?.strip_suffix(suffix)?.strip_suffix('`')?.to_string())
}

/// The field names serde knows (the struct's, in declaration order).
const RUN_WIRE_FIELDS: &[&str] = &[
    "command",
    "argv",
    "workdir",
    "timeout_ms",
    "output_cap",
    "spill_cap",
    "stdin",
    "env",
    "mode",
    "writable_roots",
    "network",
    "allow_hosts",
    "limit_memory",
    "limit_pids",
    "limit_cpu",
    "observe_writes",
];

/// Parse the parameters of `run` / `start`.
pub fn parse_run(mut params: Map<String, Value>) -> Result<RunParams, RpcError> {
    // `null` is "not given" for every member, an unknown one included.
    params.retain(|_, v| !v.is_null());
    FIELD_ERROR.with(|c| c.set(None));
    let wire: RunParamsWire = serde_json::from_value(Value::Object(params)).map_err(|e| {
        FIELD_ERROR.with(Cell::take).unwrap_or_else(|| match unknown_key(&e) {
            Some(key) => unknown_field(&key, RUN_FIELDS),
            None => RpcError::invalid_params("params", e),
        })
    })?;
    wire.into_params()
}

impl RunParamsWire {
    /// Exactly one of `command` and `argv`, then the [`RunParams`].
    pub fn into_params(self) -> Result<RunParams, RpcError> {
        let command = match (self.command, self.argv) {
            (Some(_), Some(_)) => {
                return Err(RpcError::invalid_params("command", "give either `command` or `argv`, not both"))
            }
            (Some(s), None) => Command::Shell(s),
            (None, Some(v)) => Command::Argv(v.into_iter().map(Into::into).collect()),
            (None, None) => {
                return Err(RpcError::invalid_params(
                    "command",
                    "missing (give `command` as a shell string or `argv` as an array)",
                ))
            }
        };
        Ok(RunParams {
            command: Some(command),
            workdir: self.workdir,
            timeout_ms: self.timeout_ms,
            output_cap: self.output_cap,
            spill_cap: self.spill_cap,
            stdin: self.stdin,
            env: self.env.unwrap_or_default(),
            mode: self.mode,
            writable_roots: self.writable_roots,
            network: self.network,
            allow_hosts: self.allow_hosts,
            limits: crate::limits::LimitRequest {
                memory: self.limit_memory,
                pids: self.limit_pids,
                cpu: self.limit_cpu,
            },
            observe_writes: self.observe_writes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(v: Value) -> RpcError {
        let Value::Object(m) = v else { panic!() };
        parse_run(m).unwrap_err()
    }

    #[test]
    fn errors_keep_the_hand_parser_contract() {
        // `null` is "not given", also for an unknown member.
        let Value::Object(m) = json!({"command": "true", "bogus": null, "mode": null}) else { panic!() };
        assert_eq!(parse_run(m).unwrap().mode, None);
        // An unknown member is named exactly, backticks and all, truncated to 64.
        let e = err(json!({"command": "x", "a`, expected one of `command": 1}));
        assert_eq!(e.data["field"], "a`, expected one of `command");
        assert!(e.message.ends_with(&format!("(expected one of: {RUN_FIELDS})")), "{}", e.message);
        let long = "k".repeat(80);
        assert_eq!(err(json!({ long.as_str(): 1 })).data["field"], format!("{}…", "k".repeat(64)));
        // The first bad member in key order is the one reported.
        assert_eq!(err(json!({"argv": [1], "bogus": 1, "command": 2})).data["field"], "argv[0]");
        assert_eq!(err(json!({"zz": 1, "mode": "root"})).data["field"], "mode");
        assert_eq!(err(json!({"env": {"A": 1}})).data["field"], "env.A");
        // A failed field does not leak into the next parse.
        let _ = err(json!({"mode": 1}));
        assert_eq!(err(json!({"bogus": 1})).data["field"], "bogus");
    }

    #[test]
    fn allow_hosts_are_parsed_strictly() {
        let Value::Object(m) = json!({"command": "true", "allow_hosts": ["PyPI.org", "*.pythonhosted.org:443"]}) else {
            panic!()
        };
        let hosts: Vec<String> = parse_run(m).unwrap().allow_hosts.unwrap().iter().map(|h| h.to_string()).collect();
        assert_eq!(hosts, ["pypi.org", "*.pythonhosted.org:443"]);
        for bad in [json!("pypi.org"), json!([1]), json!(["*.com"]), json!(["user@pypi.org"]), json!(["pypi.org:0"])] {
            let e = err(json!({"command": "x", "allow_hosts": bad}));
            assert!(e.data["field"].as_str().is_some_and(|f| f.starts_with("allow_hosts")), "{bad}: {}", e.message);
        }
    }
}
