//! The recorded CLI and protocol outputs (`tests/record/`): `record.sh` runs a fixed set
//! of cordon invocations (help texts, errors, runs in each mode, serve and mcp
//! sessions, probe, doctor) and normalizes what changes from run to run; this suite
//! compares a fresh recording with `tests/record/expected/`, so a change of anything a
//! user sees is a reviewed diff. `CORDON_UPDATE_GOLDEN=1 cargo test --test integration
//! record::` re-records (review the diff before committing).
//!
//! Some recordings depend on the host (the identity, the Landlock ABI, bubblewrap, the
//! limits' mechanisms: `host.txt`); they are compared only where those facts are the
//! recorded ones (the CI host: root, Debian 12, Linux 6.18, cgroup v1). Elsewhere the
//! suite says which it left out.

use crate::common::cli::cordon_bin;
use crate::common::golden::{updating, UPDATE_ENV};
use crate::common::{loud, skip_or_fail, temp_dir};
use std::path::Path;
use std::process::Command;

/// Recordings that read the same on every Linux host (help texts, argument and policy
/// errors); every other recording depends on `host.txt`.
fn host_independent(name: &str) -> bool {
    name == "help.txt"
        || name.ends_with("-help.txt")
        || ["bad-", "invalid-", "session-", "run-nocmd", "run-notfound", "serve-invalid"]
            .iter()
            .any(|p| name.starts_with(p))
}

#[test]
fn recorded_outputs_match() {
    const TEST: &str = "record::recorded_outputs_match";
    if !cfg!(target_os = "linux") {
        return skip_or_fail(TEST, "the recordings are Linux runs");
    }
    if Command::new("python3").arg("-c").arg("").status().map_or(true, |s| !s.success()) {
        return skip_or_fail(TEST, "python3 (record.sh drives serve and mcp with it) is missing");
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/record");
    let expected = here.join("expected");
    let out = temp_dir("record");
    let status = Command::new(here.join("record.sh"))
        .arg(cordon_bin())
        .arg(out.path())
        .env_remove("CORDON_UPDATE_GOLDEN")
        .status()
        .expect("run tests/record/record.sh");
    assert!(status.success(), "record.sh failed: {status:?}");

    let names = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".txt"))
            .collect();
        v.sort();
        v
    };
    let recorded = names(out.path());
    if updating() {
        let _ = std::fs::remove_dir_all(&expected);
        std::fs::create_dir_all(&expected).unwrap();
        for name in &recorded {
            std::fs::copy(out.path().join(name), expected.join(name)).unwrap();
        }
        loud(&format!("NOTE {TEST}: re-recorded {} files into {}", recorded.len(), expected.display()));
        return;
    }
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
    let same_host = std::fs::read_to_string(expected.join("host.txt")).ok() == Some(read(&out.path().join("host.txt")));
    let mut differ = Vec::new();
    let mut left_out = Vec::new();
    for name in names(&expected).iter().chain(recorded.iter()).collect::<std::collections::BTreeSet<_>>() {
        if name != "host.txt" && !same_host && !host_independent(name) {
            left_out.push(name.clone());
            continue;
        }
        let (want, got) = (expected.join(name), out.path().join(name));
        if !want.exists() || !got.exists() || read(&want) != read(&got) {
            let diff = Command::new("diff").arg("-u").arg(&want).arg(&got).output().map(|o| o.stdout);
            differ.push(format!("{name}:\n{}", String::from_utf8_lossy(&diff.unwrap_or_default())));
        }
    }
    if !left_out.is_empty() {
        loud(&format!(
            "NOTE {TEST}: this host differs from the recording's (tests/record/expected/host.txt), so {} host-dependent recordings were not compared",
            left_out.len()
        ));
    }
    assert!(
        differ.is_empty(),
        "{} recorded outputs differ from tests/record/expected/:\n{}\nIf the change is meant, re-record with \
         {UPDATE_ENV}=1 cargo test --test integration record:: and review the diff",
        differ.len(),
        differ.join("\n")
    );
}

/// The long flags one `--help` text offers (`--mode`, `--allow-host`, ...).
fn help_flags(help: &str) -> Vec<String> {
    let mut flags: Vec<String> = help
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .flat_map(|l| l.split([' ', ',', '=', '<', '[']).filter(|w| w.starts_with("--") && w.len() > 2))
        .map(str::to_string)
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

#[test]
fn every_help_flag_is_documented() {
    // Every flag any subcommand's `--help` offers is written in the README or docs/, so
    // a new flag cannot land without a word for its users.
    let run = |args: &[&str]| {
        let out = Command::new(cordon_bin()).args(args).output().expect("run cordon --help");
        assert!(out.status.success(), "cordon {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let top = run(&["--help"]);
    let subcommands: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(subcommands.iter().any(|c| c == "run"), "no subcommands found in:\n{top}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = std::fs::read_to_string(root.join("README.md")).unwrap();
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            docs.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
    let mut missing = Vec::new();
    for sub in &subcommands {
        let mut helps = vec![(sub.clone(), run(&[sub, "--help"]))];
        // Nested subcommands (`session show`, ...).
        let nested: Vec<String> = helps[0]
            .1
            .lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .filter(|c| c != "help")
            .collect();
        for n in nested {
            helps.push((format!("{sub} {n}"), run(&[sub, &n, "--help"])));
        }
        for (name, help) in helps {
            for flag in help_flags(&help) {
                if flag != "--help" && flag != "--version" && !docs.contains(flag.as_str()) {
                    missing.push(format!("cordon {name} {flag}"));
                }
            }
        }
    }
    assert!(missing.is_empty(), "flags offered by --help but written nowhere in README.md or docs/: {missing:?}");
}
