//! Credential scrubbing: the environment a command sees, as a pure function.
//!
//! [`build_environment`] takes the ambient environment, the caller's extra variables,
//! cordon's managed `CORDON_*` variables and the runner's own variables (e.g. `TMPDIR`)
//! and applies these steps, in order:
//!
//! 1. Start from the ambient environment.
//! 2. Drop every ambient `CORDON_*` name: only cordon itself sets that namespace.
//! 3. Drop credential-shaped names: any name containing `KEY`, `SECRET`, `TOKEN`,
//!    `PASSWORD` or `CREDENTIAL`, compared case-insensitively.
//! 4. Set the quiet-terminal defaults `NO_COLOR=1 TERM=dumb PAGER=cat GIT_PAGER=cat`.
//! 5. Apply the caller's extra variables. A name that is empty, contains `=` or NUL,
//!    or lies in the `CORDON_` namespace is an error, never silently dropped.
//! 6. Apply the managed `CORDON_*` variables.
//! 7. Apply the runner's variables (they describe the sandbox, e.g. its `TMPDIR`).
//!
//! What it does not do: it does not look inside values (a token pasted into `PATH`
//! stays), and it does not read the process environment itself — callers pass it in.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

/// Name fragments that mark a variable as a credential (compared case-insensitively).
pub const CREDENTIAL_MARKERS: [&str; 5] = ["KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL"];

/// The namespace reserved for cordon's managed variables.
pub const MANAGED_PREFIX: &str = "CORDON_";

/// Defaults that keep tools from paging or colouring captured output.
pub const QUIET_DEFAULTS: [(&str, &str); 4] =
    [("NO_COLOR", "1"), ("TERM", "dumb"), ("PAGER", "cat"), ("GIT_PAGER", "cat")];

/// A variable the caller asked for that cannot be set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvError {
    /// Extra env tried to set a name in the managed `CORDON_*` namespace.
    #[error("extra env may not set `{name}`: the CORDON_* namespace is managed by cordon")]
    ReservedName {
        /// The offending name.
        name: String,
    },
    /// The name is empty or contains `=` or NUL.
    #[error("invalid environment variable name `{name}`")]
    InvalidName {
        /// The offending name.
        name: String,
    },
    /// A value contains a NUL byte.
    #[error("the value of `{name}` contains a NUL byte")]
    InvalidValue {
        /// The variable whose value is invalid.
        name: String,
    },
    /// A managed variable does not start with `CORDON_`.
    #[error("managed env name `{name}` must start with CORDON_")]
    UnmanagedName {
        /// The offending name.
        name: String,
    },
}

fn is_managed(name: &OsStr) -> bool {
    name.as_bytes().len() >= MANAGED_PREFIX.len()
        && name.as_bytes()[..MANAGED_PREFIX.len()].eq_ignore_ascii_case(MANAGED_PREFIX.as_bytes())
}

/// Whether a variable name looks like it holds a credential (step 3).
pub fn is_credential_name(name: &OsStr) -> bool {
    let upper = name.as_bytes().to_ascii_uppercase();
    CREDENTIAL_MARKERS.iter().any(|m| upper.windows(m.len()).any(|w| w == m.as_bytes()))
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

/// Build the command's environment (steps in the module docs). The result is sorted
/// by name.
pub fn build_environment<I>(
    ambient: I,
    extra: &[(String, String)],
    managed: &[(String, String)],
    runner: &[(String, String)],
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
    for (name, value) in QUIET_DEFAULTS {
        env.insert(name.into(), value.into());
    }
    // Step 5.
    for (name, value) in extra {
        check_name(name)?;
        check_value(name, value)?;
        if is_managed(OsStr::new(name)) {
            return Err(EnvError::ReservedName { name: name.clone() });
        }
        env.insert(name.into(), value.into());
    }
    // Step 6.
    for (name, value) in managed {
        check_name(name)?;
        check_value(name, value)?;
        if !is_managed(OsStr::new(name)) {
            return Err(EnvError::UnmanagedName { name: name.clone() });
        }
        env.insert(name.into(), value.into());
    }
    // Step 7.
    for (name, value) in runner {
        check_name(name)?;
        check_value(name, value)?;
        env.insert(name.into(), value.into());
    }
    Ok(env.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn step4_sets_quiet_defaults_over_ambient() {
        let env = build_environment(amb(&[("TERM", "xterm-256color"), ("PAGER", "less")]), &[], &[], &[]).unwrap();
        assert_eq!(get(&env, "TERM"), Some("dumb"));
        assert_eq!(get(&env, "PAGER"), Some("cat"));
        assert_eq!(get(&env, "GIT_PAGER"), Some("cat"));
        assert_eq!(get(&env, "NO_COLOR"), Some("1"));
    }

    #[test]
    fn step5_extra_env_applies_and_rejects_bad_names() {
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
    }

    #[test]
    fn step6_managed_env_is_cordon_only() {
        let managed = vec![("CORDON_RUN_ID".to_string(), "7".to_string())];
        let env = build_environment(amb(&[("CORDON_RUN_ID", "evil")]), &[], &managed, &[]).unwrap();
        assert_eq!(get(&env, "CORDON_RUN_ID"), Some("7"));
        let err = build_environment(amb(&[]), &[], &[("HOME".into(), "/".into())], &[]).unwrap_err();
        assert!(matches!(err, EnvError::UnmanagedName { .. }));
    }

    #[test]
    fn step7_runner_variables_win() {
        let extra = vec![("TMPDIR".to_string(), "/elsewhere".to_string())];
        let runner = vec![("TMPDIR".to_string(), "/tmp".to_string())];
        let env = build_environment(amb(&[("TMPDIR", "/host")]), &extra, &[], &runner).unwrap();
        assert_eq!(get(&env, "TMPDIR"), Some("/tmp"));
    }
}
