//! Spawn cost through the library, warm: one [`cordon::Executor`] and one tokio runtime
//! run `/bin/true` many times in a row, interleaved with the same number of
//! `std::process::Command` spawns of `/bin/true` from this process (the baseline, measured
//! in the same run so machine noise hits both alike). Prints one JSON object: the median
//! and mean milliseconds per run of each side, and the added cost.
//!
//! ```sh
//! cargo run --release --example spawn_bench -- [ROUNDS] [MODE] [RUNNER]
//! ```
//!
//! `ROUNDS` (default 200), `MODE` (`workspace-write`, `read-only` or `full-access`;
//! default `workspace-write`), `RUNNER` (`landlock`, `bwrap` or `auto`; default `auto`).
//! The working directory is a fresh temporary workspace. `bench/spawn.sh` runs it.
//! With `CORDON_TRACE_PHASES=1` the object also holds `phases_us`: `[name, median µs]`
//! for each phase of a run, in order (see `cordon::phases`), the library's profile.

use cordon::{Executor, ExecutorConfig, Mode, Request, RunnerChoice};
use std::time::Instant;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let mode: Mode = args.get(2).map(|m| m.parse().expect("a mode")).unwrap_or(Mode::WorkspaceWrite);
    let runner: RunnerChoice = args.get(3).map(|r| r.parse().expect("a runner")).unwrap_or(RunnerChoice::Auto);
    let workspace = tempfile::tempdir().expect("a temporary workspace");
    let exec = Executor::new(ExecutorConfig::default()).expect("an executor");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let request = || {
        let mut req = Request::argv(["/bin/true"]);
        req.workdir = Some(workspace.path().to_path_buf());
        req.policy.mode = mode;
        req.runner = runner;
        req
    };
    // One warm-up of each side (page cache, lazily built executor state).
    let first = rt.block_on(exec.run(exec.resolve(request()).expect("the request resolves"))).expect("a run");
    assert_eq!(first.exit_code, Some(0), "{first:?}");
    let runner_used = first.sandbox.runner.to_string();
    std::process::Command::new("/bin/true").status().expect("/bin/true runs");

    let trace = std::env::var_os(cordon::phases::ENV_TRACE_PHASES).is_some_and(|v| v == "1");
    let mut phases: Vec<(&'static str, Vec<f64>)> = Vec::new();
    let (mut bare, mut confined) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        let t = Instant::now();
        let status = std::process::Command::new("/bin/true").status().expect("/bin/true runs");
        bare.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(status.success());

        if trace {
            cordon::phases::enable();
            let _ = cordon::phases::take(); // from here: this run's phases only
        }
        let t = Instant::now();
        let result = rt.block_on(async { exec.run(exec.resolve(request())?).await }).expect("a run");
        confined.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(result.exit_code, Some(0), "{result:?}");
        if trace {
            cordon::phases::mark("result");
            for (name, us) in cordon::phases::take() {
                match phases.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, v)) => v.push(us as f64),
                    None => phases.push((name, vec![us as f64])),
                }
            }
        }
    }
    let (bare_mean, confined_mean) = (mean(&bare), mean(&confined));
    let (bare_med, confined_med) = (median(&mut bare), median(&mut confined));
    // In the order the phases happen: [[name, median µs], ...].
    let phases_us: Vec<serde_json::Value> =
        phases.iter_mut().map(|(name, v)| serde_json::json!([name, median(v).round()])).collect();
    let mut out = serde_json::json!({
        "rounds": rounds,
        "mode": mode.to_string(),
        "runner": runner_used,
        "bare_ms": { "median": bare_med, "mean": bare_mean },
        "cordon_ms": { "median": confined_med, "mean": confined_mean },
        "added_ms": { "median": confined_med - bare_med, "mean": confined_mean - bare_mean },
    });
    if trace {
        out["phases_us"] = serde_json::Value::Array(phases_us);
    }
    println!("{out}");
}
