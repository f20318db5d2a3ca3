//! Compiles cordon's seccomp programs (`profiles/seccomp/*.json`) at build time, for
//! every variant a run can ask for, when the build host is Linux and the target is the
//! host itself. Otherwise each CLI run of a confined mode would parse 30 KB of JSON and
//! compile its program again (about 0.3 ms; docs/performance.md).
//!
//! The compiler is the library's own source (`src/runner/seccomp`, included below), so
//! the programs are the ones a run would compile; a unit test compares every variant
//! with a fresh compilation anyway (it requires all of them when this script sets
//! `cordon_precompiled_seccomp`). The compiler takes syscall numbers, the audit
//! architecture and the x32 guard from the platform this script runs on, which is why
//! any other target (a cross build, x32, macOS) gets an empty table and compiles at run
//! time, as before. On a non-Linux host the compiler is not even built here (it needs
//! Linux-only `libc` items).

use std::path::PathBuf;

#[cfg(target_os = "linux")]
#[allow(dead_code, unused_imports, clippy::all)]
#[path = "src/runner/seccomp/mod.rs"]
mod seccomp;

/// The compiler's error type lives with the library's errors (`crate::error`).
#[cfg(target_os = "linux")]
#[path = "src/error/seccomp.rs"]
mod seccomp_error;
#[cfg(target_os = "linux")]
mod error {
    pub(crate) use super::seccomp_error as seccomp;
}

/// The library reads its table from `runner::seccomp_precompiled`; here it is empty.
#[cfg(target_os = "linux")]
mod seccomp_precompiled {
    pub(crate) static TABLE: &[crate::seccomp::PrecompiledProgram] = &[];
}

fn main() {
    for f in [
        "build.rs",
        "src/error/seccomp.rs",
        "src/runner/seccomp/mod.rs",
        "src/runner/seccomp/compile.rs",
        "src/runner/seccomp/syscalls.rs",
        "profiles/seccomp/confined.json",
        "profiles/seccomp/observe.json",
        "profiles/seccomp/write_intent.json",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    println!("cargo::rustc-check-cfg=cfg(cordon_precompiled_seccomp)");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    // Only right when the target is this script's own platform (see above).
    let native = !var("TARGET").is_empty() && var("TARGET") == var("HOST");
    let table = if native { precompiled_table() } else { None };
    if table.is_some() {
        println!("cargo::rustc-cfg=cordon_precompiled_seccomp");
    }
    let out = PathBuf::from(var("OUT_DIR")).join("seccomp_precompiled.rs");
    let code = table.unwrap_or_else(|| "&[]\n".to_string());
    std::fs::write(&out, code).unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}

/// The table of every variant, as Rust source (`None` off Linux).
#[cfg(not(target_os = "linux"))]
fn precompiled_table() -> Option<String> {
    None
}

/// The table of every variant, as Rust source.
#[cfg(target_os = "linux")]
fn precompiled_table() -> Option<String> {
    use std::fmt::Write as _;
    let mut code = String::from("&[\n");
    for key in seccomp::PRECOMPILED_KEYS {
        let (net, supervised, writes) = key;
        // A variant that does not compile is left to the run, which reports why.
        let Ok(p) = seccomp::compile_program_uncached(net, supervised, writes) else { continue };
        let _ = write!(
            code,
            "    PrecompiledProgram {{\n        key: (NetFilter::{net:?}, {supervised}, {writes}),\n        insns: &["
        );
        for i in &p.insns {
            let _ = write!(code, "({}, {}, {}, {:#x}), ", i.code, i.jt, i.jf, i.k);
        }
        code.push_str("],\n        observed: &[");
        for (nr, o) in &p.observed {
            let _ = write!(code, "({nr}, {:?}, ObservedKind::{:?}, {}, {:?}), ", o.name, o.kind, o.errno, o.filter);
        }
        code.push_str("],\n    },\n");
    }
    code.push_str("]\n");
    Some(code)
}
