//! Compiles cordon's seccomp programs (`profiles/seccomp/*.json`) at build time, for
//! every variant a run can ask for, when the target is Linux on the build host's own
//! architecture. Otherwise each CLI run of a confined mode would parse 30 KB of JSON
//! and compile its program again (about 0.2 to 0.3 ms; docs/performance.md).
//!
//! The compiler is the library's own source (`src/runner/seccomp`, included below), so
//! the programs are the ones a run would compile; a unit test compares every variant
//! with a fresh compilation anyway. For other targets (a cross build, macOS) the table
//! is empty and runs compile at run time, as before.

use std::fmt::Write as _;
use std::path::PathBuf;

#[allow(dead_code, unused_imports, clippy::all)]
#[path = "src/runner/seccomp/mod.rs"]
mod seccomp;

/// The library reads its table from `runner::seccomp_precompiled`; here it is empty.
mod seccomp_precompiled {
    pub(crate) static TABLE: &[crate::seccomp::PrecompiledProgram] = &[];
}

fn main() {
    for f in [
        "build.rs",
        "src/runner/seccomp/mod.rs",
        "src/runner/seccomp/syscalls.rs",
        "profiles/seccomp/confined.json",
        "profiles/seccomp/observe.json",
        "profiles/seccomp/write_intent.json",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    // The compiler takes syscall numbers and the audit architecture from this build
    // script's own platform: only right when the target is the same.
    let native = cfg!(target_os = "linux")
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ARCH") == std::env::consts::ARCH;
    let mut code = String::from("&[\n");
    if native {
        for key in seccomp::PRECOMPILED_KEYS {
            let [proxy, network, unix, supervised, writes] = key;
            // A variant that does not compile is left to the run, which reports why.
            let Ok(p) = seccomp::compile_program_uncached(network, unix, proxy, supervised, writes) else { continue };
            let _ = write!(code, "    PrecompiledProgram {{\n        key: {key:?},\n        insns: &[");
            for i in &p.insns {
                let _ = write!(code, "({}, {}, {}, {:#x}), ", i.code, i.jt, i.jf, i.k);
            }
            code.push_str("],\n        observed: &[");
            for (nr, o) in &p.observed {
                let _ = write!(code, "({nr}, {:?}, ObservedKind::{:?}, {}, {:?}), ", o.name, o.kind, o.errno, o.filter);
            }
            code.push_str("],\n    },\n");
        }
    }
    code.push_str("]\n");
    let out = PathBuf::from(var("OUT_DIR")).join("seccomp_precompiled.rs");
    std::fs::write(&out, code).unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}
