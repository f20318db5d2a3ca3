//! cordon's seccomp filters: rules as data (`profiles/seccomp/confined.json`, in
//! seccompiler's JSON format with a comment on every rule) compiled to BPF, plus a
//! hand-written ABI guard.
//!
//! Filters are installed in this order (the kernel runs all of them and the strictest
//! verdict wins):
//! 1. [`abi_guard`]: kill the process on any architecture other than the native one
//!    (32-bit `int 0x80` entry on x86_64) and on x32 syscall numbers, so foreign entry
//!    points cannot bypass the rules below.
//! 2. `deny_eperm`: dangerous syscalls refused with `EPERM`.
//! 3. `deny_enosys`: `clone3` answered `ENOSYS` so libc falls back to `clone`.
//! 4. `network_off` (only when the network is off): `socket()` refused with `EACCES`.
//!
//! What it does not do: it does not restrict paths (Landlock and the mount layer do).

use seccompiler::{BpfProgram, TargetArch};
use std::collections::HashMap;

/// The filter rules, as data.
pub const CONFINED_PROFILE: &str = include_str!("../../profiles/seccomp/confined.json");

/// Names of the filters in [`CONFINED_PROFILE`], in installation order.
pub const ALWAYS_FILTERS: [&str; 2] = ["deny_eperm", "deny_enosys"];
/// The filter added when the network is off.
pub const NETWORK_OFF_FILTER: &str = "network_off";

/// Why the filters could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SeccompError {
    /// This architecture has no filter.
    #[error("seccomp filters are not built for architecture {0}")]
    UnsupportedArch(&'static str),
    /// The profile did not compile.
    #[error("seccomp profile does not compile: {0}")]
    Compile(String),
    /// A filter is missing from the profile.
    #[error("seccomp profile lacks filter `{0}`")]
    Missing(&'static str),
}

fn target_arch() -> Result<TargetArch, SeccompError> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(TargetArch::x86_64),
        "aarch64" => Ok(TargetArch::aarch64),
        "riscv64" => Ok(TargetArch::riscv64),
        other => Err(SeccompError::UnsupportedArch(other)),
    }
}

/// `AUDIT_ARCH_*` of the native architecture.
fn native_audit_arch() -> Result<u32, SeccompError> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(0xC000_003E),
        "aarch64" => Ok(0xC000_00B7),
        "riscv64" => Ok(0xC000_00F3),
        other => Err(SeccompError::UnsupportedArch(other)),
    }
}

/// The x32 ABI marks its syscall numbers with this bit (x86_64 only).
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

fn stmt(code: u16, k: u32) -> seccompiler::sock_filter {
    seccompiler::sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> seccompiler::sock_filter {
    seccompiler::sock_filter { code, jt, jf, k }
}

/// The ABI guard: native architecture only, and no x32 syscall numbers.
pub fn abi_guard() -> Result<BpfProgram, SeccompError> {
    const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    const OFFSET_NR: u32 = 0; // seccomp_data.nr
    const OFFSET_ARCH: u32 = 4; // seccomp_data.arch
    let arch = native_audit_arch()?;
    let x32_bound = if std::env::consts::ARCH == "x86_64" { X32_SYSCALL_BIT } else { u32::MAX };
    Ok(vec![
        stmt(LD_W_ABS, OFFSET_ARCH),
        jump(JEQ_K, arch, 1, 0),
        stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(LD_W_ABS, OFFSET_NR),
        jump(JGE_K, x32_bound, 0, 1),
        stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(RET_K, libc::SECCOMP_RET_ALLOW),
    ])
}

/// Compile the filters a confined run installs, in order.
pub fn compile_filters(network_allowed: bool) -> Result<Vec<BpfProgram>, SeccompError> {
    let arch = target_arch()?;
    let mut map: HashMap<String, BpfProgram> = seccompiler::compile_from_json(CONFINED_PROFILE.as_bytes(), arch)
        .map_err(|e| SeccompError::Compile(e.to_string()))?;
    let mut out = vec![abi_guard()?];
    for name in ALWAYS_FILTERS {
        out.push(map.remove(name).ok_or(SeccompError::Missing(name))?);
    }
    if !network_allowed {
        out.push(map.remove(NETWORK_OFF_FILTER).ok_or(SeccompError::Missing(NETWORK_OFF_FILTER))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_compiles_and_every_rule_has_a_comment() {
        let filters = compile_filters(false).unwrap();
        assert_eq!(filters.len(), 4);
        let json: serde_json::Value = serde_json::from_str(CONFINED_PROFILE).unwrap();
        for (name, filter) in json.as_object().unwrap() {
            for rule in filter["filter"].as_array().unwrap() {
                let comment = rule["comment"].as_str().unwrap_or("");
                assert!(comment.len() > 10, "rule {rule} in {name} lacks a reason");
                for arg in rule["args"].as_array().into_iter().flatten() {
                    assert!(arg["comment"].as_str().is_some(), "argument check in {rule} lacks a comment");
                }
            }
        }
    }

    #[test]
    fn ioctl_checks_compare_only_the_low_32_bits() {
        let json: serde_json::Value = serde_json::from_str(CONFINED_PROFILE).unwrap();
        for rule in json["deny_eperm"]["filter"].as_array().unwrap() {
            if rule["syscall"] == "ioctl" {
                assert_eq!(rule["args"][0]["type"], "dword", "{rule}");
            }
        }
    }

    #[test]
    fn network_filter_only_when_network_is_off() {
        assert_eq!(compile_filters(true).unwrap().len(), 3);
    }
}
