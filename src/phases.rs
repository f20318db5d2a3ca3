//! Where one `cordon run` spends its time: timestamps at the phase boundaries of the
//! CLI's run, printed to stderr when it ends (`CORDON_TRACE_PHASES=1`). This is the
//! profile behind docs/performance.md, kept in the code so anyone can take it again
//! (`bench/spawn.sh` prints its medians).
//!
//! Off unless turned on; a mark is then one relaxed atomic load. The CLI turns it on
//! from the environment; a library caller that runs one command at a time may too
//! ([`enable`], then [`take`] after each run: `examples/spawn_bench.rs`). Marks of
//! concurrent runs in one process (serve) would interleave.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Set to `1`, `cordon run` prints its phase timings (µs) on stderr at the end.
pub const ENV_TRACE_PHASES: &str = "CORDON_TRACE_PHASES";

static ON: AtomicBool = AtomicBool::new(false);
static MARKS: Mutex<Vec<(&'static str, Instant)>> = Mutex::new(Vec::new());

/// Start tracing when [`ENV_TRACE_PHASES`] is `1` (`cordon run`, before it parses its
/// arguments).
pub fn enable_from_env() {
    if std::env::var_os(ENV_TRACE_PHASES).is_some_and(|v| v == "1") {
        enable();
    }
}

/// Start tracing (and mark the start).
pub fn enable() {
    ON.store(true, Ordering::Relaxed);
    mark("start");
}

/// The phases since the last [`take`] (or the start): each one's name and length in
/// microseconds, named by the mark that ends it. Tracing restarts from now.
pub fn take() -> Vec<(&'static str, u64)> {
    let mut marks = MARKS.lock().unwrap_or_else(|p| p.into_inner());
    let phases = durations(&marks);
    marks.clear();
    marks.push(("start", Instant::now()));
    phases
}

fn durations(marks: &[(&'static str, Instant)]) -> Vec<(&'static str, u64)> {
    marks
        .windows(2)
        .map(|w| (w[1].0, u64::try_from(w[1].1.duration_since(w[0].1).as_micros()).unwrap_or(u64::MAX)))
        .collect()
}

/// The phase named `name` ends now (a no-op unless tracing).
pub fn mark(name: &'static str) {
    if ON.load(Ordering::Relaxed) {
        MARKS.lock().unwrap_or_else(|p| p.into_inner()).push((name, Instant::now()));
    }
}

/// One line, `cordon: phases (µs): name=N ...` (each phase's length, named by the
/// mark that ends it), or `None` when not tracing.
pub fn report() -> Option<String> {
    if !ON.load(Ordering::Relaxed) {
        return None;
    }
    let marks = MARKS.lock().unwrap_or_else(|p| p.into_inner());
    let phases: Vec<String> = durations(&marks).iter().map(|(name, us)| format!("{name}={us}")).collect();
    Some(format!("cordon: phases (µs): {}", phases.join(" ")))
}
