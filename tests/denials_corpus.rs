//! Denial classification against a labeled corpus (`tests/corpus/denials.json`), run
//! under the real runner through the CLI. Reports precision and recall and holds them
//! to the targets (precision 1.0, recall ≥ 0.95). Effects are checked too: a denied
//! write leaves the scratch directory untouched, and the loopback listener never
//! receives a connection from a confined run.
//!
//! Set `CORDON_CORPUS_REPORT=path` to also write the report to a file.

use serde_json::Value;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const CORPUS: &str = include_str!("corpus/denials.json");

mod common;

use common::{skip_or_fail as skip, skip_regardless};

fn have(tool: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {tool} >/dev/null 2>&1")]).status().is_ok_and(|s| s.success())
}

fn sh(dir: &Path, script: &str) {
    let ok =
        Command::new("sh").arg("-c").arg(script).current_dir(dir).stdout(Stdio::null()).stderr(Stdio::null()).status();
    assert!(ok.is_ok_and(|s| s.success()), "setup failed in {}: {script}", dir.display());
}

struct Scratch(PathBuf);
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn listing(dir: &Path) -> Vec<(String, u32, Vec<u8>)> {
    use std::os::unix::fs::PermissionsExt;
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    let m = std::fs::symlink_metadata(e.path()).map(|m| m.permissions().mode()).unwrap_or(0);
                    (e.file_name().to_string_lossy().into_owned(), m, std::fs::read(e.path()).unwrap_or_default())
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn denial_classification_corpus() {
    let test = "denial_classification_corpus";
    let corpus: Value = serde_json::from_str(CORPUS).expect("corpus is valid JSON");
    let entries = corpus["entries"].as_array().expect("entries");
    let cordon = env!("CARGO_BIN_EXE_cordon");

    // A confined mode must work at all here.
    let probe = Command::new(cordon).args(["run", "--json", "--mode", "read-only", "--", "true"]).output().unwrap();
    if probe.status.code() == Some(125) {
        skip(test, &format!("confined runs unavailable: {}", String::from_utf8_lossy(&probe.stdout).trim()));
        return;
    }

    let root = PathBuf::from("/var/tmp").join(format!("cordon-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let _cleanup = Scratch(root.clone());

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let v6 = TcpListener::bind(("::1", port)).ok();
    let connections = Arc::new(AtomicUsize::new(0));
    for l in std::iter::once(listener).chain(v6) {
        let c = connections.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                if s.is_ok() {
                    c.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
    }
    let udp = std::net::UdpSocket::bind(("127.0.0.1", port)).ok();
    if let Some(u) = &udp {
        u.set_nonblocking(true).unwrap();
    }

    let (mut tp, mut fp, mut fneg, mut tn) = (0, 0, 0, 0);
    let mut lines = Vec::new();
    let mut skipped = Vec::new();
    for e in entries {
        let id = e["id"].as_str().unwrap();
        let needs: Vec<&str> =
            e["needs"].as_array().map(|a| a.iter().filter_map(|x| x.as_str()).collect()).unwrap_or_default();
        if let Some(missing) = needs.iter().find(|t| !have(t)) {
            skip_regardless(&format!("{test}/{id}"), &format!("`{missing}` is not installed"));
            skipped.push(id.to_string());
            continue;
        }
        let dir = root.join(id);
        let ws = dir.join("ws");
        let out = dir.join("out");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("existing"), "a original\n").unwrap();
        sh(
            &ws,
            "git init -q . && echo 'a line' > file.txt && git add file.txt && \
             git -c user.name=t -c user.email=t@t commit -qm init",
        );
        let subst = |s: &str| {
            s.replace("{WS}", &ws.display().to_string())
                .replace("{OUT}", &out.display().to_string())
                .replace("{PORT}", &port.to_string())
        };
        if let Some(setup) = e["setup"].as_str() {
            sh(&ws, &subst(setup));
        }
        let before = listing(&out);
        let mode = e["mode"].as_str().unwrap();
        let command = subst(e["command"].as_str().unwrap());
        let mut args = vec!["run".to_string(), "--json".into(), "--mode".into(), mode.into()];
        args.extend(["--cwd".into(), ws.display().to_string()]);
        args.extend(["--timeout".into(), e["timeout"].as_u64().unwrap_or(20).to_string()]);
        args.extend(["-c".into(), command.clone()]);
        let o = Command::new(cordon).args(&args).stdin(Stdio::null()).output().unwrap();
        let j: Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|err| panic!("{id}: not JSON ({err}): {}", String::from_utf8_lossy(&o.stdout)));
        assert!(j.get("error").is_none(), "{id}: cordon refused to run: {j}");
        let denied = j["sandbox"]["denied"].as_bool().unwrap();
        let kinds: Vec<String> = j["sandbox"]["denials"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["kind"].as_str().unwrap_or("").to_string())
            .collect();
        let expect_denied = e["expect"] == "denied";
        let want_kind = e["kind"].as_str();
        let verdict = match (expect_denied, denied) {
            (true, true) if want_kind.is_none_or(|k| kinds.iter().any(|g| g == k)) => {
                tp += 1;
                "TP"
            }
            (true, _) => {
                fneg += 1;
                "FN"
            }
            (false, true) => {
                fp += 1;
                "FP"
            }
            (false, false) => {
                tn += 1;
                "TN"
            }
        };
        lines.push(format!(
            "{verdict} {id:<32} mode={mode:<15} expect={:<10} denials={}",
            e["expect"].as_str().unwrap(),
            serde_json::to_string(&j["sandbox"]["denials"]).unwrap()
        ));
        // Effects: a confined run never changes the scratch directory outside.
        if mode != "full-access" {
            assert_eq!(listing(&out), before, "{id}: the sandbox let a write outside through: {j}");
        }
    }
    assert_eq!(connections.load(Ordering::SeqCst), 0, "a confined run reached the loopback listener");
    if let Some(u) = &udp {
        let mut buf = [0u8; 16];
        assert!(u.recv_from(&mut buf).is_err(), "a confined run reached the UDP listener");
    }

    let precision = if tp + fp == 0 { 1.0 } else { tp as f64 / (tp + fp) as f64 };
    let recall = if tp + fneg == 0 { 1.0 } else { tp as f64 / (tp + fneg) as f64 };
    let summary = format!(
        "denial corpus: precision {precision:.3} recall {recall:.3} (TP {tp}, FP {fp}, FN {fneg}, TN {tn}, skipped {})",
        skipped.len()
    );
    let report = format!("{}\n{summary}\n", lines.join("\n"));
    println!("{report}");
    if let Ok(path) = std::env::var("CORDON_CORPUS_REPORT") {
        let mut f = std::fs::File::create(path).unwrap();
        let _ = f.write_all(report.as_bytes());
    }
    assert_eq!(fp, 0, "false positives:\n{report}");
    assert!(recall >= 0.95, "recall below 0.95:\n{report}");
}
