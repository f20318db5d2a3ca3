//! `cordon probe` (what this host can enforce, per runner and mode) and
//! `cordon doctor` (canaries per mode, judged by effect).

use super::error_exit;
use cordon::error::CordonError;
use cordon::host::HostFacts;
use cordon::mode::Mode;
use cordon::policy::ExecutionPolicy;
use cordon::runner::{self, probe_runner, ProbeStatus, RunnerKind};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

pub(crate) fn doctor(json: bool) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return error_exit(&CordonError::Io { what: "starting the runtime".into(), source: e }, json),
    };
    let report = rt.block_on(cordon::doctor::diagnose());
    if json {
        outln!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        out!("{}", cordon::doctor::render(&report));
    }
    if report.confined_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

pub(crate) fn probe(json: bool) -> ExitCode {
    let host = HostFacts::detect();
    let report = probe_report(&host);
    if json {
        outln!("{report}");
    } else {
        print_probe(&host, &report);
    }
    ExitCode::SUCCESS
}

pub(crate) fn sample_policy(mode: Mode) -> ExecutionPolicy {
    ExecutionPolicy {
        mode,
        workspace: std::env::current_dir().unwrap_or_else(|_| "/".into()),
        writable_roots: Vec::new(),
        protected: vec![PathBuf::from(".git")],
        network: false,
        best_effort: false,
        accept_gaps: Vec::new(),
        allow_unix_sockets: Vec::new(),
        allow_hosts: Default::default(),
        git: Default::default(),
    }
}

pub(crate) fn probe_report(host: &HostFacts) -> serde_json::Value {
    let runners: Vec<serde_json::Value> =
        [RunnerKind::Landlock, RunnerKind::Bwrap, RunnerKind::Seatbelt, RunnerKind::Passthrough]
            .into_iter()
            .map(|kind| {
                let status = probe_runner(kind, host);
                let modes: Vec<serde_json::Value> = Mode::ALL
                    .into_iter()
                    .filter(|m| (*m == Mode::FullAccess) == (kind == RunnerKind::Passthrough))
                    .map(|mode| {
                        let enforcement = match status {
                            ProbeStatus::Available => {
                                serde_json::to_value(runner::runner_for(kind).enforcement(&sample_policy(mode), host))
                                    .unwrap_or_default()
                            }
                            _ => serde_json::Value::Null,
                        };
                        serde_json::json!({ "mode": mode, "enforcement": enforcement })
                    })
                    .collect();
                serde_json::json!({ "runner": kind, "probe": status, "modes": modes })
            })
            .collect();
    // The current directory judged as `cordon run` judges it (the same function as
    // `cordon doctor`), so probe, doctor and run agree on a workspace.
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let workspace = cordon::doctor::judge_workspace(host, &cwd.canonicalize().unwrap_or(cwd));
    let auto: Vec<serde_json::Value> = workspace
        .modes
        .iter()
        .map(|v| match (&v.runner, &v.error) {
            (Some(runner), _) => serde_json::json!({ "mode": v.mode, "runner": runner, "enforcement": v.enforcement }),
            (None, error) => serde_json::json!({ "mode": v.mode, "error": { "code": v.error_code, "message": error } }),
        })
        .collect();
    serde_json::json!({
        "host": {
            "os": host.os,
            "landlock_abi": host.landlock_abi,
            "kernel_landlock_abi": host.kernel_landlock_abi,
            "landlock_abi_cap": host.landlock_abi_cap,
            "seccomp": host.seccomp,
            "root": host.is_root(),
            "euid": host.euid,
            "namespaces": host.namespaces,
            "user_namespaces": matches!(host.namespaces, cordon::host::Namespaces::UserNamespace) || (host.is_root() && host.namespaces.available()),
            "mount_namespaces": host.namespaces.available(),
            "proc_mount": host.proc_mount,
            "net_namespace": host.net_namespace,
            "bwrap": host.bwrap,
        },
        "runners": runners,
        "workspace": workspace.path,
        "auto": auto,
        "limits": cordon::limits::probe_host(host.euid),
    })
}

pub(crate) fn print_probe(host: &HostFacts, report: &serde_json::Value) {
    outln!("host");
    outln!("  os:               {}", host.os);
    match host.landlock_abi_cap {
        Some(cap) => {
            outln!("  landlock ABI:     {} (kernel {}, capped to {cap})", host.landlock_abi, host.kernel_landlock_abi)
        }
        None => outln!("  landlock ABI:     {}", host.landlock_abi),
    }
    outln!("  seccomp:          {}", if host.seccomp { "yes" } else { "no" });
    outln!("  root:             {}", if host.is_root() { "yes" } else { "no" });
    let ns = match &host.namespaces {
        cordon::host::Namespaces::Direct => "yes (as root)".to_string(),
        cordon::host::Namespaces::UserNamespace => "yes (user namespace)".to_string(),
        cordon::host::Namespaces::Unavailable { reason } => format!("no: {reason}"),
    };
    outln!("  namespaces:       {ns}");
    if host.namespaces.available() {
        match &host.proc_mount {
            cordon::host::ProcMount::Fresh => outln!("  fresh /proc:      yes (a pid namespace per run)"),
            cordon::host::ProcMount::Refused { reason } => {
                outln!("  fresh /proc:      no, so no pid namespace per run (docs/containers.md): {reason}")
            }
        }
    }
    if host.namespaces.available() {
        match &host.net_namespace {
            cordon::host::NetNamespace::Available => {
                outln!("  network ns:       yes (local IPC with the network off: docs/network.md)")
            }
            cordon::host::NetNamespace::Unavailable { reason } => {
                outln!("  network ns:       no, so no local IPC with the network off (docs/network.md): {reason}")
            }
        }
    }
    outln!("  bwrap:            {}", host.bwrap.as_ref().map_or("not found".into(), |p| p.display().to_string()));
    let l = &report["limits"];
    outln!("resource limits (defaults; mechanism)");
    outln!("  memory:           {} bytes; {}", l["memory"], l["memory_by"].as_str().unwrap_or("?"));
    outln!("  pids:             {}; {}", l["pids"], l["pids_by"].as_str().unwrap_or("?"));
    outln!("  cpu:              none by default; {} (per process)", l["cpu_by"].as_str().unwrap_or("?"));
    for g in l["gaps"].as_array().into_iter().flatten() {
        outln!("    gap {}: {}", g["restriction"].as_str().unwrap_or("?"), g["reason"].as_str().unwrap_or(""));
    }
    outln!("runners");
    for r in report["runners"].as_array().into_iter().flatten() {
        let status = match &r["probe"]["status"] {
            serde_json::Value::String(s) if s == "available" => "available".to_string(),
            serde_json::Value::String(s) => format!("{s}: {}", r["probe"]["reason"].as_str().unwrap_or("")),
            _ => "?".into(),
        };
        outln!("  {:<12} {status}", r["runner"].as_str().unwrap_or("?"));
        for m in r["modes"].as_array().into_iter().flatten() {
            if m["enforcement"].is_null() {
                continue;
            }
            outln!(
                "    {:<16} {}",
                m["mode"].as_str().unwrap_or("?"),
                m["enforcement"]["level"].as_str().unwrap_or("?")
            );
            for g in m["enforcement"]["gaps"].as_array().into_iter().flatten() {
                outln!(
                    "      gap {}: {}",
                    g["restriction"].as_str().unwrap_or("?"),
                    g["reason"].as_str().unwrap_or("")
                );
            }
        }
    }
    outln!("auto selection for the workspace {}", report["workspace"].as_str().unwrap_or("?"));
    for a in report["auto"].as_array().into_iter().flatten() {
        match a.get("runner") {
            Some(r) => outln!(
                "  {:<16} {} ({})",
                a["mode"].as_str().unwrap_or("?"),
                r.as_str().unwrap_or("?"),
                a["enforcement"]["level"].as_str().unwrap_or("?")
            ),
            None => outln!(
                "  {:<16} {}: {}",
                a["mode"].as_str().unwrap_or("?"),
                a["error"]["code"].as_str().unwrap_or("?"),
                a["error"]["message"].as_str().unwrap_or("")
            ),
        }
    }
}
