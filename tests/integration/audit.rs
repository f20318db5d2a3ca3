//! `cordon audit` end to end, on a few probes: it passes against cordon's runners, it
//! fails (exit 1, the escape named) against no sandbox at all, its JUnit file has the
//! schema's required attributes, and it leaves nothing behind.

use crate::common::cli::{confined_unavailable, cordon};
use crate::common::skip_or_fail;
use std::path::Path;

/// A few probes of different kinds: a write outside, a loopback listener, a control.
const PROBES: [&str; 6] = ["--only", "fs-write/overwrite", "--only", "network/tcp4", "--only", "controls/pipes"];

#[test]
fn audit_holds_against_cordon_and_fails_without_a_sandbox() {
    if let Some(why) = confined_unavailable() {
        return skip_or_fail("audit_holds_against_cordon_and_fails_without_a_sandbox", &why);
    }
    let dir = tempfile::Builder::new().prefix("audit-it-").tempdir_in("/var/tmp").unwrap();
    let junit = dir.path().join("audit.xml");
    let d = dir.path().to_str().unwrap();
    let mut args = vec!["audit", "--dir", d, "--junit", junit.to_str().unwrap()];
    args.extend(PROBES);
    let out = cordon(&args, Path::new("/"), &[]);
    assert_eq!(out.code, 0, "every probe holds against cordon:\n{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("PASS  fs-write/overwrite"), "{}", out.stdout);
    assert!(out.stdout.contains("everything held"), "{}", out.stdout);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.starts_with("<?xml"), "{xml}");
    for attr in [
        "<testsuites name=",
        "<testsuite name=\"landlock/read-only as ",
        "tests=\"",
        "failures=\"",
        "<testcase classname=\"fs-write.landlock.read-only\" name=\"overwrite\" time=\"",
    ] {
        assert!(xml.contains(attr), "JUnit lacks {attr}: {xml}");
    }

    // No sandbox at all (`env` as the wrapper): the attacks must be reported, by
    // effect, and the control must still pass.
    let mut args = vec!["audit", "--dir", d, "--json", "--wrapper", "env"];
    args.extend(PROBES);
    let out = cordon(&args, Path::new("/"), &[]);
    assert_eq!(out.code, 1, "an unconfined run must fail the audit:\n{}{}", out.stdout, out.stderr);
    let j: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let outcome = |p: &str| {
        j["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["probe"] == p)
            .map(|v| v["outcome"].as_str().unwrap().to_string())
    };
    assert_eq!(outcome("fs-write/overwrite").as_deref(), Some("fail"), "{}", out.stdout);
    assert_eq!(outcome("network/tcp4").as_deref(), Some("fail"), "{}", out.stdout);
    assert_eq!(outcome("controls/pipes").as_deref(), Some("pass"), "{}", out.stdout);
    assert_eq!(j["leftovers"], serde_json::json!([]), "{}", out.stdout);

    // Nothing of the audit is left in its directory.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("audit.xml")], "the audit left {left:?}");
}
