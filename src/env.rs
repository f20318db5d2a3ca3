//! Credential scrubbing: the environment a command sees, as a pure function.
//!
//! [`build_environment`] takes the ambient environment, the caller's extra variables,
//! cordon's managed `CORDON_*` variables and the runner's own variables (e.g. `TMPDIR`)
//! and applies these steps, in order:
//!
//! 1. Start from the ambient environment.
//! 2. Drop every ambient `CORDON_*` name: only cordon itself sets that namespace.
//! 3. Drop credential-shaped names ([`is_credential_name`]): any name containing
//!    `KEY`, `SECRET`, `TOKEN`, `PASSWORD`, `PASSWD`, `PASSPHRASE`, `CREDENTIAL` or
//!    `SSHPASS`, with a word (between `_`, `-` or `.`) `AUTH`, `OAUTH`,
//!    `AUTHORIZATION`, `PAT` or `PASS`, or ending in the word `PWD` after another
//!    (`MYSQL_PWD`), compared case-insensitively (`GIT_AUTHOR_NAME`, `PATH`, `PWD` and
//!    `OLDPWD` stay).
//! 4. Drop credential-shaped values ([`credential_value_kind`]), whatever the name: a
//!    URL with a password (`postgres://u:pw@db/x`, any scheme; a password holding
//!    `/`, `#`, `?` or `@`, encoded or not, included), a credential query
//!    parameter (`?access_token=...`) or a token-like user part (a Sentry DSN), a
//!    `.netrc` entry with a password, a well-known token
//!    prefix with the length and alphabet of a real token (GitHub, GitLab, Slack, AWS
//!    access key ids, Stripe, OpenAI, Anthropic, Google, npm, PyPI, Hugging Face), a
//!    private key block, or a signed JWT.
//! 5. Set the quiet-terminal defaults `NO_COLOR=1 TERM=dumb PAGER=cat GIT_PAGER=cat`;
//!    when the command's output goes to the caller's terminal
//!    ([`build_environment_for`] with `terminal`), only `PAGER=cat GIT_PAGER=cat`: the
//!    caller's `TERM` and colour settings (`NO_COLOR`, `CLICOLOR`, `FORCE_COLOR`,
//!    `COLORTERM`, ...) stay as they are.
//! 6. Apply the caller's extra variables. They are never scrubbed: passing a variable
//!    explicitly (`--env NAME=VALUE`, or `--env NAME` to keep the ambient value) is the
//!    way to keep a credential on purpose. A name that is empty, contains `=` or NUL,
//!    or lies in the `CORDON_` namespace is an error, never silently dropped.
//! 7. Apply the managed `CORDON_*` variables.
//! 8. Apply the runner's variables (they describe the sandbox, e.g. its `TMPDIR`).
//!
//! What it does not do: it recognizes only the shapes above (a password pasted alone
//! into an innocently named variable stays), and it does not read the process
//! environment itself — callers pass it in.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

/// Name fragments that mark a variable as a credential (compared case-insensitively).
pub const CREDENTIAL_MARKERS: [&str; 8] =
    ["KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "SSHPASS"];

/// Whole words of a name (split on `_`, `-`, `.`) that mark a credential; whole words
/// only, so `GIT_AUTHOR_NAME`, `PATH` and `PASSTHROUGH` stay.
pub const CREDENTIAL_NAME_WORDS: [&str; 5] = ["AUTH", "OAUTH", "AUTHORIZATION", "PAT", "PASS"];

/// A last word of a name that marks a credential when another word comes before it
/// (`MYSQL_PWD`, `DB_PWD`): the shell's own `PWD` and `OLDPWD` stay.
pub const CREDENTIAL_LAST_WORDS: [&str; 1] = ["PWD"];

/// The namespace reserved for cordon's managed variables.
pub const MANAGED_PREFIX: &str = "CORDON_";

/// Defaults that keep tools from paging or colouring captured output.
pub const QUIET_DEFAULTS: [(&str, &str); 4] =
    [("NO_COLOR", "1"), ("TERM", "dumb"), ("PAGER", "cat"), ("GIT_PAGER", "cat")];

pub use crate::error::EnvError;

fn is_managed(name: &OsStr) -> bool {
    name.as_bytes().len() >= MANAGED_PREFIX.len()
        && name.as_bytes()[..MANAGED_PREFIX.len()].eq_ignore_ascii_case(MANAGED_PREFIX.as_bytes())
}

/// Whether a variable name looks like it holds a credential (step 3).
pub fn is_credential_name(name: &OsStr) -> bool {
    let upper = name.as_bytes().to_ascii_uppercase();
    let words: Vec<&[u8]> = upper.split(|b| matches!(b, b'_' | b'-' | b'.')).collect();
    CREDENTIAL_MARKERS.iter().any(|m| upper.windows(m.len()).any(|w| w == m.as_bytes()))
        || words.iter().any(|w| CREDENTIAL_NAME_WORDS.iter().any(|m| *w == m.as_bytes()))
        || (words.len() > 1 && CREDENTIAL_LAST_WORDS.iter().any(|m| words[words.len() - 1] == m.as_bytes()))
}

/// A token prefix and what must follow it: the alphabet and the length range of the
/// rest, and whether the rest must mix letters and digits (random, not a word).
struct TokenShape {
    kind: &'static str,
    prefix: &'static str,
    alphabet: fn(u8) -> bool,
    len: std::ops::RangeInclusive<usize>,
    mixed: bool,
}

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}
fn alnum_dash(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}
fn alnum_dash_underscore(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}
fn alnum_underscore(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}
fn upper_digit(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}

/// Well-known token prefixes, longest first where one prefix extends another. Lengths
/// are those the providers issue, with some slack; `mixed` keeps words that merely
/// start like a token (`sk-learn-...`) out.
const TOKEN_SHAPES: &[TokenShape] = &[
    TokenShape { kind: "github-token", prefix: "ghp_", alphabet: alnum, len: 30..=255, mixed: true },
    TokenShape { kind: "github-token", prefix: "gho_", alphabet: alnum, len: 30..=255, mixed: true },
    TokenShape { kind: "github-token", prefix: "ghu_", alphabet: alnum, len: 30..=255, mixed: true },
    TokenShape { kind: "github-token", prefix: "ghs_", alphabet: alnum, len: 30..=255, mixed: true },
    TokenShape { kind: "github-token", prefix: "ghr_", alphabet: alnum, len: 30..=255, mixed: true },
    TokenShape { kind: "github-token", prefix: "github_pat_", alphabet: alnum_underscore, len: 22..=255, mixed: true },
    TokenShape { kind: "gitlab-token", prefix: "glpat-", alphabet: alnum_dash_underscore, len: 20..=255, mixed: true },
    TokenShape { kind: "slack-token", prefix: "xoxa-", alphabet: alnum_dash, len: 10..=255, mixed: true },
    TokenShape { kind: "slack-token", prefix: "xoxb-", alphabet: alnum_dash, len: 10..=255, mixed: true },
    TokenShape { kind: "slack-token", prefix: "xoxp-", alphabet: alnum_dash, len: 10..=255, mixed: true },
    TokenShape { kind: "slack-token", prefix: "xoxr-", alphabet: alnum_dash, len: 10..=255, mixed: true },
    TokenShape { kind: "slack-token", prefix: "xoxs-", alphabet: alnum_dash, len: 10..=255, mixed: true },
    TokenShape { kind: "aws-access-key-id", prefix: "AKIA", alphabet: upper_digit, len: 16..=16, mixed: false },
    TokenShape { kind: "aws-access-key-id", prefix: "ASIA", alphabet: upper_digit, len: 16..=16, mixed: false },
    TokenShape { kind: "stripe-key", prefix: "sk_live_", alphabet: alnum, len: 16..=255, mixed: true },
    TokenShape { kind: "stripe-key", prefix: "rk_live_", alphabet: alnum, len: 16..=255, mixed: true },
    TokenShape {
        kind: "anthropic-key",
        prefix: "sk-ant-",
        alphabet: alnum_dash_underscore,
        len: 32..=255,
        mixed: true,
    },
    TokenShape { kind: "openai-key", prefix: "sk-proj-", alphabet: alnum_dash_underscore, len: 32..=255, mixed: true },
    TokenShape { kind: "openai-key", prefix: "sk-", alphabet: alnum_dash_underscore, len: 32..=255, mixed: true },
    TokenShape { kind: "google-api-key", prefix: "AIza", alphabet: alnum_dash_underscore, len: 35..=35, mixed: false },
    TokenShape { kind: "npm-token", prefix: "npm_", alphabet: alnum, len: 36..=255, mixed: true },
    TokenShape { kind: "pypi-token", prefix: "pypi-", alphabet: alnum_dash_underscore, len: 40..=4096, mixed: true },
    TokenShape { kind: "huggingface-token", prefix: "hf_", alphabet: alnum, len: 30..=255, mixed: true },
];

/// Letters and digits both present (a random token, not a word).
fn is_mixed(rest: &[u8]) -> bool {
    rest.iter().any(u8::is_ascii_digit) && rest.iter().any(u8::is_ascii_alphabetic)
}

/// The token shape `word` has, if any.
fn token_kind(word: &[u8]) -> Option<&'static str> {
    let shape = TOKEN_SHAPES.iter().find(|t| word.starts_with(t.prefix.as_bytes()))?;
    let rest = &word[shape.prefix.len()..];
    let fits = shape.len.contains(&rest.len()) && rest.iter().all(|b| (shape.alphabet)(*b));
    (fits && (!shape.mixed || is_mixed(rest))).then_some(shape.kind)
}

/// A signed JWT: three base64url segments, the first two JSON objects (`eyJ`).
fn is_jwt(word: &[u8]) -> bool {
    let parts: Vec<&[u8]> = word.split(|b| *b == b'.').collect();
    let b64 = |p: &[u8]| p.len() >= 10 && p.iter().all(|b| alnum_dash_underscore(*b));
    parts.len() == 3 && parts[..2].iter().all(|p| p.starts_with(b"eyJ")) && parts.iter().all(|p| b64(p))
}

/// A byte of a URL's user name (RFC 3986 userinfo before the `:`: unreserved,
/// percent-encoded, sub-delims).
fn is_user_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=".contains(&b)
}

/// `s` starts with a host (a name, an IPv4 address or a bracketed IPv6 address, an
/// optional `:port`), then ends or goes on with a path, query, fragment or another
/// host of a list (`,`, `;`).
fn starts_with_host(s: &[u8]) -> bool {
    let host_len = if s.first() == Some(&b'[') {
        match s.iter().position(|b| *b == b']') {
            Some(i) if i > 1 && s[1..i].iter().all(|b| b.is_ascii_hexdigit() || matches!(b, b':' | b'.')) => i + 1,
            _ => return false,
        }
    } else {
        s.iter().take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'%')).count()
    };
    if host_len == 0 {
        return false;
    }
    let mut rest = &s[host_len..];
    if let Some(port) = rest.strip_prefix(b":") {
        let digits = port.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return false;
        }
        rest = &port[digits..];
    }
    rest.first().is_none_or(|b| matches!(b, b'/' | b'?' | b'#' | b',' | b';'))
}

/// Whether `value` holds a URL with a non-empty password (`scheme://user:password@host`),
/// anywhere in the value. The password is everything between the user name's `:` and
/// the last `@` that a host follows, so one holding characters the URL grammar would
/// have encoded (`/`, `#`, `?`, `@`: base64 secrets pasted as they are) or encoded ones
/// (`%2F`, `%40`) is seen. Not a password: `host:port/path@x` (digits after the `:`,
/// then a path), a path or query holding `:` and `@` (`https://h/a:b@c`), a user with
/// no password.
fn has_url_password(value: &[u8]) -> bool {
    let mut from = 0;
    while let Some(at) = value[from..].windows(3).position(|w| w == b"://").map(|i| from + i) {
        from = at + 3;
        // A scheme: a letter, then letters, digits, `+`, `-`, `.`.
        let scheme_len = value[..at]
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
            .count();
        if scheme_len == 0 || !value[at - scheme_len].is_ascii_alphabetic() {
            continue;
        }
        let rest = &value[from..];
        let url = &rest[..rest.iter().position(u8::is_ascii_whitespace).unwrap_or(rest.len())];
        let user_len = url.iter().take_while(|b| is_user_byte(**b)).count();
        if url.get(user_len) != Some(&b':') {
            continue;
        }
        let after = &url[user_len + 1..];
        let port = after.iter().take_while(|b| b.is_ascii_digit()).count();
        if (1..=5).contains(&port) && after.get(port).is_none_or(|b| matches!(b, b'/' | b'?' | b'#')) {
            continue;
        }
        let password_end =
            after.iter().enumerate().rev().find(|(i, b)| **b == b'@' && starts_with_host(&after[i + 1..]));
        if password_end.is_some_and(|(i, _)| i > 0) {
            return true;
        }
    }
    false
}

/// Query parameters that carry a credential in a URL (`?access_token=...`).
const CREDENTIAL_QUERY_KEYS: [&str; 11] = [
    "access_token",
    "token",
    "api_key",
    "apikey",
    "key",
    "secret",
    "client_secret",
    "password",
    "auth",
    "sig",
    "signature",
];

/// Whether `value` holds a URL that carries a credential outside a password: a query
/// parameter named like one with a value of 8 or more characters, or a token-like
/// user part without a password (`https://<32 hex>@o1.ingest.sentry.io/1`).
fn has_url_credential(value: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(value) else { return false };
    for (i, _) in text.match_indices("://") {
        let rest = &text[i + 3..];
        let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
        let url = &rest[..end];
        let authority_end = url.find(['/', '?', '#']).unwrap_or(url.len());
        if let Some(at) = url[..authority_end].rfind('@') {
            let user = &url[..at];
            if !user.contains(':') && user.len() >= 16 && is_mixed(user.as_bytes()) {
                return true;
            }
        }
        if let Some(q) = url.find('?') {
            for pair in url[q + 1..].split(['&', ';', '#']) {
                if let Some((k, v)) = pair.split_once('=') {
                    let k = k.to_ascii_lowercase();
                    if CREDENTIAL_QUERY_KEYS.contains(&k.as_str()) && v.len() >= 8 {
                        return true;
                    }
                }
            }
        }
    }
    false
}

/// A `.netrc`-style value: `machine`/`login`/`default` entries and the word
/// `password` (or `passwd`) followed by a value.
fn has_netrc_password(value: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(value) else { return false };
    let words: Vec<&str> = text.split_whitespace().collect();
    words.iter().any(|w| matches!(*w, "machine" | "login" | "default"))
        && words.windows(2).any(|w| matches!(w[0], "password" | "passwd") && !w[1].is_empty())
}

/// What kind of credential `value` looks like (step 4), or `None`. Pure; see the
/// module docs for the shapes.
pub fn credential_value_kind(value: &OsStr) -> Option<&'static str> {
    let v = value.as_bytes();
    if has_url_password(v) {
        return Some("url-with-password");
    }
    if has_url_credential(v) {
        return Some("url-with-credential");
    }
    if has_netrc_password(v) {
        return Some("netrc-password");
    }
    let has = |needle: &[u8]| v.windows(needle.len()).any(|w| w == needle);
    if has(b"-----BEGIN ") && has(b"PRIVATE KEY-----") {
        return Some("private-key");
    }
    // Tokens are words of the value (`Bearer ghp_...`, `a,b`): split on anything
    // outside the token alphabets, trimming a final `.`.
    let words = v.split(|b| !(alnum_dash_underscore(*b) || *b == b'.')).map(|w| w.strip_suffix(b".").unwrap_or(w));
    for w in words {
        if let Some(kind) = token_kind(w) {
            return Some(kind);
        }
        if is_jwt(w) {
            return Some("jwt");
        }
    }
    None
}

fn check_name(name: &str) -> Result<(), EnvError> {
    if name.is_empty() || name.contains('=') || name.contains('\0') {
        return Err(EnvError::InvalidName { name: name.to_string() });
    }
    Ok(())
}

fn check_value(name: &str, value: &str) -> Result<(), EnvError> {
    if value.contains('\0') {
        return Err(EnvError::InvalidValue { name: name.to_string() });
    }
    Ok(())
}

/// Build the command's environment (steps in the module docs) for captured output.
/// The result is sorted by name.
#[cfg(test)]
pub fn build_environment<I>(
    ambient: I,
    extra: &[(String, String)],
    managed: &[(String, String)],
    runner: &[(String, String)],
) -> Result<Vec<(OsString, OsString)>, EnvError>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    build_environment_for(ambient, extra, managed, runner, false)
}

/// The variables of [`QUIET_DEFAULTS`] that keep their ambient value when the
/// command's output is the caller's terminal (step 5).
pub const TERMINAL_KEPT: [&str; 2] = ["NO_COLOR", "TERM"];

/// [`build_environment`], for a command whose output goes to the caller's terminal
/// when `terminal` (step 5 then keeps the caller's `TERM` and colour settings).
pub fn build_environment_for<I>(
    ambient: I,
    extra: &[(String, String)],
    managed: &[(String, String)],
    runner: &[(String, String)],
    terminal: bool,
) -> Result<Vec<(OsString, OsString)>, EnvError>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    // Step 1.
    let mut env: BTreeMap<OsString, OsString> = ambient.into_iter().collect();
    // Step 2.
    env.retain(|name, _| !is_managed(name));
    // Step 3.
    env.retain(|name, _| !is_credential_name(name));
    // Step 4.
    env.retain(|_, value| credential_value_kind(value).is_none());
    // Step 5.
    for (name, value) in QUIET_DEFAULTS {
        if !(terminal && TERMINAL_KEPT.contains(&name)) {
            env.insert(name.into(), value.into());
        }
    }
    // Step 6.
    for (name, value) in extra {
        check_name(name)?;
        check_value(name, value)?;
        if is_managed(OsStr::new(name)) {
            return Err(EnvError::ReservedName { name: name.clone() });
        }
        env.insert(name.into(), value.into());
    }
    // Step 7.
    for (name, value) in managed {
        check_name(name)?;
        check_value(name, value)?;
        if !is_managed(OsStr::new(name)) {
            return Err(EnvError::UnmanagedName { name: name.clone() });
        }
        env.insert(name.into(), value.into());
    }
    // Step 8.
    for (name, value) in runner {
        check_name(name)?;
        check_value(name, value)?;
        env.insert(name.into(), value.into());
    }
    Ok(env.into_iter().collect())
}

/// The cache and state variables a confined run gets, relative to its private base
/// (the sandbox's `TMPDIR`, discarded with the run): the home directory is read-only,
/// so tools that keep a cache there would fail. Each reason is the tool that reads it.
/// Configuration (`XDG_CONFIG_HOME`) and data (`XDG_DATA_HOME`, Go's module cache,
/// Cargo's registry) are left alone: tools read them from the real, read-only home.
pub const PRIVATE_CACHE_VARS: [(&str, &str); 7] = [
    ("XDG_CACHE_HOME", ".cache"),       // the XDG base-directory spec: most tools
    ("XDG_STATE_HOME", ".local/state"), // logs and history (XDG)
    ("GOCACHE", ".cache/go-build"),     // go build's compiled-package cache
    ("PIP_CACHE_DIR", ".cache/pip"),    // pip's wheel and HTTP cache
    ("npm_config_cache", ".npm"),       // npm's cache and its debug logs
    ("YARN_CACHE_FOLDER", ".cache/yarn"),
    ("PRE_COMMIT_HOME", ".cache/pre-commit"), // pre-commit's hook environments
];

/// Whether the value `v` is a location the caller chose that a confined run can use
/// (pure): an absolute path, without `..`, inside one of the `writable` roots. Such a
/// cache or config location is kept instead of cordon's private one.
pub fn in_writable_root(v: &OsStr, writable: &[std::path::PathBuf]) -> bool {
    let p = std::path::Path::new(v);
    p.is_absolute()
        && !p.components().any(|c| c == std::path::Component::ParentDir)
        && writable.iter().any(|w| p.starts_with(w))
}

/// The toolchain homes: where package managers keep what they download during an
/// ordinary build, each with its variable and its place without it (relative to
/// `$HOME`). A confined run gets a private layer over each that exists (the host's
/// files readable, so a warm cache stays warm; what the build adds private), see
/// `runner::landlock::private_dirs`.
pub const TOOLCHAIN_HOMES: [(&str, &str); 3] = [
    ("CARGO_HOME", ".cargo"),     // cargo: the registry index, crate downloads, git checkouts
    ("GOPATH", "go"),             // Go: the module cache (`pkg/mod`), `go install`'s `bin`
    ("npm_config_cache", ".npm"), // npm: its cache (`_cacache`) and its debug logs (`_logs`)
];

/// Where each of [`TOOLCHAIN_HOMES`] is for `env` (pure): the variable's value when it
/// is an absolute path (`GOPATH`: its first entry), else `$HOME/<rel>`; nothing without
/// an absolute `HOME`.
pub fn toolchain_homes(env: &[(OsString, OsString)]) -> Vec<(&'static str, std::path::PathBuf)> {
    let get = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_os_str());
    let home = get("HOME").map(std::path::Path::new).filter(|h| h.is_absolute());
    TOOLCHAIN_HOMES
        .iter()
        .filter_map(|(name, rel)| {
            let set = get(name)
                .and_then(|v| v.as_bytes().split(|b| *b == b':').next())
                .map(|first| std::path::PathBuf::from(OsStr::from_bytes(first)))
                .filter(|p| p.is_absolute() && !p.components().any(|c| c == std::path::Component::ParentDir));
            set.or_else(|| home.map(|h| h.join(rel))).map(|p| (*name, p))
        })
        .collect()
}

/// What the command can write besides the caller's roots, for [`private_cache_env`].
#[derive(Debug, Clone, Copy, Default)]
pub struct PrivateView<'a> {
    /// The writable roots.
    pub writable: &'a [std::path::PathBuf],
    /// Directories the command sees as private writable layers or tmpfs mounts (its
    /// `/tmp`, `/dev/shm`, the layers over the home's cache and the toolchain homes).
    pub layers: &'a [std::path::PathBuf],
    /// Toolchain homes ([`toolchain_homes`]) that do not exist on the host.
    pub missing_homes: &'a [std::path::PathBuf],
}

/// Point each of [`PRIVATE_CACHE_VARS`] into `base` (pure): a run's private cache and
/// state locations. A variable already naming an absolute path inside one of the
/// writable roots or private layers is kept (the caller chose a usable location); one
/// that is unset while the tool's own default lies in a private layer stays unset (the
/// host's cache there stays warm, and what the run adds is private); any other value
/// (unset, relative, or in the read-only home) is replaced. `CARGO_HOME` and `GOPATH`
/// ([`TOOLCHAIN_HOMES`]) are set into `base` only when the home they name does not
/// exist on the host (the tool could not create it in the read-only home); an existing
/// one is used where it is (a private layer with a mount layer, read-only without).
pub fn private_cache_env(
    base: &std::path::Path,
    env: &[(OsString, OsString)],
    view: PrivateView<'_>,
) -> Vec<(OsString, OsString)> {
    let get = |name: &str| env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_os_str());
    let under = |p: &std::path::Path, dirs: &[std::path::PathBuf]| dirs.iter().any(|d| p.starts_with(d));
    let usable = |v: &OsStr| in_writable_root(v, view.writable) || in_writable_root(v, view.layers);
    let home = get("HOME").map(std::path::Path::new).filter(|h| h.is_absolute());
    let mut out: Vec<(OsString, OsString)> = PRIVATE_CACHE_VARS
        .iter()
        .filter(|(name, rel)| match get(name) {
            Some(v) => !usable(v),
            None => !home.is_some_and(|h| under(&h.join(rel), view.layers)),
        })
        .map(|(name, rel)| (OsString::from(name), base.join(rel).into_os_string()))
        .collect();
    for (name, path) in toolchain_homes(env) {
        let rel = TOOLCHAIN_HOMES.iter().find(|(n, _)| *n == name).map_or("", |(_, r)| *r);
        let taken = out.iter().any(|(n, _)| n == name);
        if !taken && view.missing_homes.contains(&path) && !usable(path.as_os_str()) {
            out.push((OsString::from(name), base.join(rel).into_os_string()));
        }
    }
    out
}

/// Whether a variable of `env` (other than [`PRIVATE_CACHE_VARS`], which cordon
/// replaces) names a place at or under `$HOME/.cache` (pure; values split at `:` like
/// `PATH`, absolute entries compared as written). Such a run keeps the host's cache
/// visible (read-only) instead of a fresh private tmpfs there: the caller pointed a
/// tool at what is in it (`PLAYWRIGHT_BROWSERS_PATH`, `HF_HOME`, a virtualenv's `bin`
/// on `PATH`), and an empty tmpfs would hide it.
pub fn names_home_cache(env: &[(OsString, OsString)]) -> bool {
    let Some(home) = env.iter().find(|(k, _)| k == "HOME").map(|(_, v)| std::path::Path::new(v)) else {
        return false;
    };
    if !home.is_absolute() {
        return false;
    }
    let cache = home.join(".cache");
    env.iter().filter(|(k, _)| !PRIVATE_CACHE_VARS.iter().any(|(n, _)| k == n)).any(|(_, v)| {
        v.as_bytes().split(|b| *b == b':').any(|entry| {
            let p = std::path::Path::new(OsStr::from_bytes(entry));
            p.is_absolute() && p.starts_with(&cache)
        })
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_variable_naming_the_home_cache_keeps_it_visible() {
        let env = |pairs: &[(&str, &str)]| -> Vec<(OsString, OsString)> {
            pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
        };
        let home = ("HOME", "/home/u");
        assert!(!names_home_cache(&env(&[home, ("PATH", "/usr/bin:/bin")])));
        assert!(names_home_cache(&env(&[home, ("PLAYWRIGHT_BROWSERS_PATH", "/home/u/.cache/ms-playwright")])));
        assert!(names_home_cache(&env(&[home, ("PATH", "/home/u/.cache/pypoetry/virtualenvs/x/bin:/usr/bin")])));
        assert!(names_home_cache(&env(&[home, ("X", "/home/u/.cache")])), "the directory itself");
        // What cordon replaces anyway, a look-alike and a relative value do not count.
        assert!(!names_home_cache(&env(&[home, ("XDG_CACHE_HOME", "/home/u/.cache")])));
        assert!(!names_home_cache(&env(&[home, ("X", "/home/u/.cachet")])));
        assert!(!names_home_cache(&env(&[home, ("X", ".cache/x")])));
        assert!(!names_home_cache(&env(&[("X", "/home/u/.cache/x")])), "no HOME");
    }

    #[test]
    fn private_caches_go_under_the_base_unless_already_in_a_writable_root() {
        use std::path::PathBuf;
        let env: Vec<(OsString, OsString)> = vec![
            ("XDG_CACHE_HOME".into(), "/home/u/.cache".into()),
            ("GOCACHE".into(), "/work/ws/.gocache".into()),
            ("PIP_CACHE_DIR".into(), "/work/ws/../escape".into()),
            ("npm_config_cache".into(), "rel".into()),
        ];
        let view = PrivateView { writable: &[PathBuf::from("/work/ws")], ..Default::default() };
        let got = private_cache_env(std::path::Path::new("/tmp"), &env, view);
        let get = |n: &str| got.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        assert_eq!(get("XDG_CACHE_HOME"), Some("/tmp/.cache".into()), "the read-only home is replaced");
        assert_eq!(get("GOCACHE"), None, "a location in a writable root is kept");
        assert_eq!(get("PIP_CACHE_DIR"), Some("/tmp/.cache/pip".into()), "`..` is never trusted");
        assert_eq!(get("npm_config_cache"), Some("/tmp/.npm".into()), "a relative path is replaced");
        assert_eq!(get("XDG_STATE_HOME"), Some("/tmp/.local/state".into()), "unset is set");
        assert_eq!(got.len(), PRIVATE_CACHE_VARS.len() - 1);
    }

    #[test]
    fn defaults_in_a_private_layer_stay_and_missing_toolchain_homes_move() {
        use std::path::PathBuf;
        let env: Vec<(OsString, OsString)> = vec![("HOME".into(), "/home/u".into())];
        let layers = [PathBuf::from("/tmp"), PathBuf::from("/home/u/.cache"), PathBuf::from("/home/u/.npm")];
        let missing = [PathBuf::from("/home/u/go")];
        let view = PrivateView { writable: &[], layers: &layers, missing_homes: &missing };
        let got = private_cache_env(std::path::Path::new("/tmp"), &env, view);
        let names: Vec<&OsStr> = got.iter().map(|(k, _)| k.as_os_str()).collect();
        // Unset, with the default in a layer: left to the tool (a warm cache stays warm).
        for kept in ["XDG_CACHE_HOME", "GOCACHE", "PIP_CACHE_DIR", "npm_config_cache", "YARN_CACHE_FOLDER"] {
            assert!(!names.contains(&OsStr::new(kept)), "{kept}: {got:?}");
        }
        // ~/.local/state has no layer; ~/go does not exist (cargo's home does: as it is).
        assert!(got.contains(&("XDG_STATE_HOME".into(), "/tmp/.local/state".into())), "{got:?}");
        assert!(got.contains(&("GOPATH".into(), "/tmp/go".into())), "{got:?}");
        assert!(!names.contains(&OsStr::new("CARGO_HOME")), "{got:?}");
        // A value in a layer is kept; one elsewhere in the read-only home is replaced.
        let env: Vec<(OsString, OsString)> = vec![
            ("HOME".into(), "/home/u".into()),
            ("XDG_CACHE_HOME".into(), "/tmp/xdg".into()),
            ("PIP_CACHE_DIR".into(), "/home/u/pipcache".into()),
        ];
        let got = private_cache_env(std::path::Path::new("/tmp"), &env, view);
        assert!(!got.iter().any(|(k, _)| k == "XDG_CACHE_HOME"), "{got:?}");
        assert!(got.contains(&("PIP_CACHE_DIR".into(), "/tmp/.cache/pip".into())), "{got:?}");
    }

    #[test]
    fn toolchain_homes_follow_their_variables_or_the_home() {
        use std::path::PathBuf;
        let env = |pairs: &[(&str, &str)]| -> Vec<(OsString, OsString)> {
            pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
        };
        let got = toolchain_homes(&env(&[("HOME", "/home/u"), ("GOPATH", "/srv/go:/other"), ("CARGO_HOME", "rel")]));
        assert_eq!(
            got,
            [
                ("CARGO_HOME", PathBuf::from("/home/u/.cargo")),
                ("GOPATH", PathBuf::from("/srv/go")),
                ("npm_config_cache", PathBuf::from("/home/u/.npm")),
            ]
        );
        let got = toolchain_homes(&env(&[("CARGO_HOME", "/opt/cargo")]));
        assert_eq!(got, [("CARGO_HOME", PathBuf::from("/opt/cargo"))], "no HOME: only absolute variables");
    }

    use super::*;

    #[test]
    fn step_4_url_credentials_and_netrc_words() {
        let kind = |v: &str| credential_value_kind(OsStr::new(v));
        assert_eq!(kind("https://x/api?access_token=abc123def456ghi789"), Some("url-with-credential"));
        assert_eq!(kind("https://h/p?a=1&api_key=ZZZZzzzz1234"), Some("url-with-credential"));
        assert_eq!(kind("https://0123456789abcdef0123456789abcdef@o1.ingest.sentry.io/1"), Some("url-with-credential"));
        assert_eq!(kind("machine github.com login u password hunter2secret"), Some("netrc-password"));
        // Look-alikes that must stay.
        for ok in [
            "https://example.com/path?page=2&sort=asc",
            "https://example.com/?key=short",
            "https://user@host/x",
            "ssh://git@github.com/org/repo.git",
            "git@github.com:org/repo.git",
            "a password prompt",
            "/usr/local/bin:/usr/bin",
        ] {
            assert_eq!(kind(ok), None, "{ok}");
        }
    }

    fn amb(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
    }

    fn get<'a>(env: &'a [(OsString, OsString)], name: &str) -> Option<&'a str> {
        env.iter().find(|(k, _)| k == name).map(|(_, v)| v.to_str().unwrap())
    }

    #[test]
    fn step1_keeps_ordinary_ambient_variables() {
        let env = build_environment(amb(&[("PATH", "/bin"), ("LANG", "C")]), &[], &[], &[]).unwrap();
        assert_eq!(get(&env, "PATH"), Some("/bin"));
        assert_eq!(get(&env, "LANG"), Some("C"));
    }

    #[test]
    fn step2_drops_ambient_cordon_namespace() {
        let env = build_environment(amb(&[("CORDON_MODE", "full-access"), ("cordon_x", "1")]), &[], &[], &[]).unwrap();
        assert_eq!(get(&env, "CORDON_MODE"), None);
        assert_eq!(get(&env, "cordon_x"), None);
    }

    #[test]
    fn step3_drops_credential_shaped_names_case_insensitively() {
        let env = build_environment(
            amb(&[
                ("OPENAI_API_KEY", "k"),
                ("github_token", "t"),
                ("DbPassword", "p"),
                ("AWS_SECRET_ACCESS_KEY", "s"),
                ("GOOGLE_APPLICATION_CREDENTIALS", "c"),
                ("HOME", "/h"),
            ]),
            &[],
            &[],
            &[],
        )
        .unwrap();
        let names: Vec<_> = env.iter().map(|(k, _)| k.to_str().unwrap()).collect();
        assert!(names.contains(&"HOME"));
        for gone in ["OPENAI_API_KEY", "github_token", "DbPassword", "AWS_SECRET_ACCESS_KEY"] {
            assert!(!names.contains(&gone), "{gone} survived");
        }
        assert!(!names.contains(&"GOOGLE_APPLICATION_CREDENTIALS"));
    }

    #[test]
    fn step3_word_markers_drop_auth_pat_pass_but_not_author_or_path() {
        // SSH_AUTH_SOCK too: the agent's socket is a credential in use (and unix sockets
        // to the host are closed anyway).
        for gone in [
            "NPM_AUTH",
            "GH_PAT",
            "SMTP_PASS",
            "DB_PASSWD",
            "HTTP_AUTHORIZATION",
            "oauth-client",
            "my.auth",
            "SSH_AUTH_SOCK",
            "MYSQL_PWD",
            "db_pwd",
            "GPG_PASSPHRASE",
            "BORG_PASSPHRASE",
            "SSH_KEY_PASSPHRASE",
            "SSHPASS",
        ] {
            assert!(is_credential_name(OsStr::new(gone)), "{gone} kept");
        }
        for kept in [
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "PATH",
            "PATCH_LEVEL",
            "PASSTHROUGH",
            "PWD",
            "OLDPWD",
            "pwd",
            "XAUTHORITY",
            "PWD_DIR",
            "INIT_CWD",
        ] {
            assert!(!is_credential_name(OsStr::new(kept)), "{kept} dropped");
        }
    }

    fn kind(v: &str) -> Option<&'static str> {
        credential_value_kind(OsStr::new(v))
    }

    // Synthetic tokens of the right shape (not real credentials).
    const B62: &str = "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0u1V2w3X4y5Z6";

    #[test]
    fn step4_url_with_password_is_a_credential_any_scheme() {
        assert_eq!(kind("postgres://u:pw@db/x"), Some("url-with-password"));
        assert_eq!(kind("redis://:hunter2@cache:6379/0"), Some("url-with-password"));
        assert_eq!(kind("https://user:p%40ss@example.com/simple"), Some("url-with-password"));
        assert_eq!(kind("amqp+ssl://guest:guest@mq"), Some("url-with-password"));
        // Passwords holding characters the URL grammar would have encoded, pasted as
        // they are (base64 secrets), or encoded.
        for v in [
            "postgresql://app:s3cr/et+Zx==@db/prod",
            "postgresql://app:s3cr/et@db.internal:5432/prod?sslmode=require",
            "postgres://app:a#b@db/x",
            "postgres://app:a?b@db/x",
            "postgres://app:a@b@db/x",
            "mysql://root:p%2Fw%23d%3F%40@127.0.0.1:3306/x",
            "redis://:Zm9v/YmFy@[::1]:6379",
            "postgresql://app:pw/x@db1,db2/prod",
            "https://u:9abc/def@h",
            "HOST=db URL=postgres://app:s3/cr@db/prod",
        ] {
            assert_eq!(kind(v), Some("url-with-password"), "{v}");
        }
        // Among several URLs (pip's extra index list).
        assert_eq!(
            kind("https://pypi.org/simple https://ci:s3cr3t@pkgs.example.com/simple"),
            Some("url-with-password")
        );
    }

    #[test]
    fn step4_url_look_alikes_are_kept() {
        for v in [
            "https://example.com/path",
            "postgres://user@host/db",
            "postgres://user:@host/db",
            "ssh://git@github.com/org/repo.git",
            "git@github.com:org/repo.git",
            "http://[::1]:8080/x",
            "https://host:8443/a@b:c",
            "https://example.com/?q=a:b@c",
            // Paths and queries with colons and `@`, ports before a path.
            "https://example.com/a:b@c",
            "https://unpkg.com/react@18/umd/react.js",
            "http://localhost:3000/@vite/client",
            "https://registry.example:4873/@scope%2fpkg",
            "https://example.com:8443/users/a:b@c.d",
            "ssh://git@host:22/path@x",
            "https://user@host:8080/x@y",
            "docker://registry:latest",
            "/srv/app:/opt/x@1:/usr/bin",
            "user:pass@host",
            "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
            "123e4567-e89b-12d3-a456-426614174000",
            "/usr/local/bin:/usr/bin:/bin",
            "en_US.UTF-8",
        ] {
            assert_eq!(kind(v), None, "{v}");
        }
    }

    #[test]
    fn step4_token_prefixes_are_credentials() {
        let t = |prefix: &str, n: usize| format!("{prefix}{}", &B62[..n]);
        let cases = [
            (t("ghp_", 36), "github-token"),
            (t("gho_", 36), "github-token"),
            (t("ghu_", 36), "github-token"),
            (t("ghs_", 36), "github-token"),
            (t("ghr_", 36), "github-token"),
            (format!("github_pat_{}_{}", &B62[..22], &B62[..40]), "github-token"),
            (t("glpat-", 20), "gitlab-token"),
            ("xoxb-1234567890-0987654321-AbCdEfGhIj".to_string(), "slack-token"),
            ("xoxp-1234567890-abcdefABCDEF".to_string(), "slack-token"),
            ("AKIAIOSFODNN7EXAMPLE".to_string(), "aws-access-key-id"),
            ("ASIAY34FZKBOKMUTVV7A".to_string(), "aws-access-key-id"),
            (t("sk_live_", 24), "stripe-key"),
            (t("rk_live_", 24), "stripe-key"),
            (t("sk-", 48), "openai-key"),
            (format!("sk-proj-{}-{}", &B62[..30], &B62[..20]), "openai-key"),
            (format!("sk-ant-api03-{}", &B62[..48]), "anthropic-key"),
            (t("AIza", 35), "google-api-key"),
            (t("npm_", 36), "npm-token"),
            (format!("pypi-AgEIcHlwaS5vcmc{}", &B62[..40]), "pypi-token"),
            (t("hf_", 34), "huggingface-token"),
        ];
        for (v, k) in &cases {
            assert_eq!(kind(v), Some(*k), "{v}");
            // Also as a word of a longer value.
            assert_eq!(kind(&format!("Bearer {v}")), Some(*k), "Bearer {v}");
        }
    }

    #[test]
    fn step4_private_keys_and_jwts_are_credentials() {
        let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----";
        assert_eq!(kind(pem), Some("private-key"));
        assert_eq!(kind("-----BEGIN RSA PRIVATE KEY-----\nMIIE"), Some("private-key"));
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        assert_eq!(kind(jwt), Some("jwt"));
    }

    #[test]
    fn step4_token_look_alikes_are_kept() {
        for v in [
            "sk-learn-compat-version-1",
            "ghp_short",
            "ghp_abcdefghijklmnopqrstuvwxyzabcdefghij",
            "AKIA-not-a-key",
            "AKIAIOSFODNN7EXAMPLEX",
            "npm_config_cache",
            "hf_hub_offline_mode_enabled_please",
            "-----BEGIN CERTIFICATE-----\nMIIB",
            "-----BEGIN PUBLIC KEY-----",
            "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.",
            "a.b.c",
            "python3.12",
        ] {
            assert_eq!(kind(v), None, "{v}");
        }
    }

    #[test]
    fn step4_drops_credential_values_whatever_the_name() {
        let ghp = format!("ghp_{}", &B62[..36]);
        let env = build_environment(
            amb(&[
                ("DATABASE_URL", "postgres://u:pw@db/x"),
                ("GITHUB_WORKSPACE_HINT", &ghp),
                ("HOMEPAGE", "https://example.com/path"),
                ("REVISION", "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"),
            ]),
            &[],
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(get(&env, "DATABASE_URL"), None);
        assert_eq!(get(&env, "GITHUB_WORKSPACE_HINT"), None);
        assert_eq!(get(&env, "HOMEPAGE"), Some("https://example.com/path"));
        assert!(get(&env, "REVISION").is_some());
    }

    #[test]
    fn step5_sets_quiet_defaults_over_ambient() {
        let env = build_environment(amb(&[("TERM", "xterm-256color"), ("PAGER", "less")]), &[], &[], &[]).unwrap();
        assert_eq!(get(&env, "TERM"), Some("dumb"));
        assert_eq!(get(&env, "PAGER"), Some("cat"));
        assert_eq!(get(&env, "GIT_PAGER"), Some("cat"));
        assert_eq!(get(&env, "NO_COLOR"), Some("1"));
    }

    #[test]
    fn step5_on_a_terminal_keeps_the_callers_term_and_colours() {
        let ambient = [("TERM", "xterm-256color"), ("COLORTERM", "truecolor"), ("FORCE_COLOR", "1"), ("PAGER", "less")];
        let env = build_environment_for(amb(&ambient), &[], &[], &[], true).unwrap();
        assert_eq!(get(&env, "TERM"), Some("xterm-256color"));
        assert_eq!(get(&env, "COLORTERM"), Some("truecolor"));
        assert_eq!(get(&env, "FORCE_COLOR"), Some("1"));
        assert_eq!(get(&env, "NO_COLOR"), None, "no colour switch the caller did not set");
        assert_eq!(get(&env, "PAGER"), Some("cat"), "still no pager");
        let env = build_environment_for(amb(&[("NO_COLOR", "1"), ("CLICOLOR", "0")]), &[], &[], &[], true).unwrap();
        assert_eq!(get(&env, "NO_COLOR"), Some("1"));
        assert_eq!(get(&env, "CLICOLOR"), Some("0"));
        assert_eq!(get(&env, "TERM"), None, "no TERM where the caller had none");
    }

    #[test]
    fn step6_extra_env_applies_and_rejects_bad_names() {
        let extra = vec![("TERM".to_string(), "vt100".to_string()), ("MY_VAR".into(), "v".into())];
        let env = build_environment(amb(&[]), &extra, &[], &[]).unwrap();
        assert_eq!(get(&env, "TERM"), Some("vt100"));
        assert_eq!(get(&env, "MY_VAR"), Some("v"));
        let err = build_environment(amb(&[]), &[("CORDON_MODE".into(), "x".into())], &[], &[]).unwrap_err();
        assert!(matches!(err, EnvError::ReservedName { .. }));
        let err = build_environment(amb(&[]), &[("A=B".into(), "x".into())], &[], &[]).unwrap_err();
        assert!(matches!(err, EnvError::InvalidName { .. }));
        let err = build_environment(amb(&[]), &[("".into(), "x".into())], &[], &[]).unwrap_err();
        assert!(matches!(err, EnvError::InvalidName { .. }));
        let err = build_environment(amb(&[]), &[("A".into(), "x\0y".into())], &[], &[]).unwrap_err();
        assert!(matches!(err, EnvError::InvalidValue { .. }));
        // Passed explicitly, a credential is kept on purpose (steps 3 and 4 scrub only
        // the ambient environment).
        let keep =
            vec![("DATABASE_URL".to_string(), "postgres://u:pw@db/x".to_string()), ("GH_PAT".into(), "p".into())];
        let env = build_environment(amb(&[("DATABASE_URL", "postgres://u:old@db/x")]), &keep, &[], &[]).unwrap();
        assert_eq!(get(&env, "DATABASE_URL"), Some("postgres://u:pw@db/x"));
        assert_eq!(get(&env, "GH_PAT"), Some("p"));
    }

    #[test]
    fn step7_managed_env_is_cordon_only() {
        let managed = vec![("CORDON_RUN_ID".to_string(), "7".to_string())];
        let env = build_environment(amb(&[("CORDON_RUN_ID", "evil")]), &[], &managed, &[]).unwrap();
        assert_eq!(get(&env, "CORDON_RUN_ID"), Some("7"));
        let err = build_environment(amb(&[]), &[], &[("HOME".into(), "/".into())], &[]).unwrap_err();
        assert!(matches!(err, EnvError::UnmanagedName { .. }));
    }

    #[test]
    fn step8_runner_variables_win() {
        let extra = vec![("TMPDIR".to_string(), "/elsewhere".to_string())];
        let runner = vec![("TMPDIR".to_string(), "/tmp".to_string())];
        let env = build_environment(amb(&[("TMPDIR", "/host")]), &extra, &[], &runner).unwrap();
        assert_eq!(get(&env, "TMPDIR"), Some("/tmp"));
    }
}
