//! Differential test of cordon's seccomp compiler (`src/runner/seccomp/`).
//!
//! cordon compiles the filters of `profiles/seccomp/confined.json` into ONE program of
//! its own design. seccompiler compiles the same JSON into one program per filter,
//! which the kernel would stack. Both are loaded and run by the same classic-BPF
//! interpreter (`tests/cbpf`, written from the kernel's semantics, including its
//! load-time checks and its multi-filter precedence), over:
//! - every syscall number `0..=MAX_NR` and a few edge numbers, on the native entry
//!   point, the x32 entry point (x86_64: the same arch with bit 30 set in the number)
//!   and foreign `AUDIT_ARCH_*` values (i386, arm, the other 64-bit arches);
//! - argument values taken from the profile (each value, masked value and mask; ±1;
//!   with bits set in the upper 32 bits; in the upper half only; pairwise ORs within
//!   one argument), and random arguments from a seeded generator;
//! - each program variant a run can use (network on/off × supervised or not).
//!
//! The profile is read generically (whatever filters, rules and operators it holds), so
//! the test keeps working when rules change. Every verdict must be identical except
//! the deliberate differences listed in [`deliberate`], each with its reason.

use crate::cbpf::{
    jump, stmt, Insn, LoadError, SeccompData, SplitMix64, Stack, BPF_A, BPF_ABS, BPF_ADD, BPF_ALU, BPF_AND, BPF_B,
    BPF_DIV, BPF_IMM, BPF_JA, BPF_JEQ, BPF_JGE, BPF_JGT, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_LDX, BPF_LEN, BPF_LSH,
    BPF_MEM, BPF_MISC, BPF_MOD, BPF_MUL, BPF_NEG, BPF_OR, BPF_RET, BPF_RSH, BPF_ST, BPF_STX, BPF_SUB, BPF_TAX, BPF_TXA,
    BPF_W, BPF_X, BPF_XOR, SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_KILL_THREAD,
    SECCOMP_RET_LOG, SECCOMP_RET_TRACE, SECCOMP_RET_TRAP, SECCOMP_RET_USER_NOTIF,
};
use cordon::runner::seccomp::{compile_net, filter_names_net, syscall_number, NetFilter, Observed, CONFINED_PROFILE};
use std::collections::{BTreeMap, BTreeSet};

/// The x32 ABI's marker bit in syscall numbers (x86_64).
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
/// Highest syscall number tried on each entry point: above every number x86_64, i386,
/// arm, aarch64 and riscv64 define today (all below 600), with room for growth.
const MAX_NR: u32 = 1023;
/// Numbers at the edges: just below and at the x32 bit, the sign bit, -1 and -2.
const EDGE_NRS: [u32; 6] = [0x3fff_ffff, 0x4000_0000, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 0xffff_fffe];

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;
const AUDIT_ARCH_ARM: u32 = 0x4000_0028;
const AUDIT_ARCH_RISCV64: u32 = 0xC000_00F3;

/// Random argument vectors per syscall number (all numbers) and per syscall the profile
/// names.
const RANDOM_PER_NR: usize = 16;
const RANDOM_PER_NAMED: usize = 2000;
/// The same for the lighter runs over mutants.
const RANDOM_PER_NAMED_LIGHT: usize = 200;
const SEED: u64 = 0x636f_7264_6f6e_2121;

fn native() -> (u32, seccompiler::TargetArch) {
    match std::env::consts::ARCH {
        "x86_64" => (AUDIT_ARCH_X86_64, seccompiler::TargetArch::x86_64),
        "aarch64" => (AUDIT_ARCH_AARCH64, seccompiler::TargetArch::aarch64),
        "riscv64" => (AUDIT_ARCH_RISCV64, seccompiler::TargetArch::riscv64),
        other => panic!("cordon builds seccomp filters for x86_64, aarch64 and riscv64 only, not {other}"),
    }
}

/// One way into the kernel: an arch value and bits the entry point sets in the number.
#[derive(Debug, Clone, Copy)]
struct Entry {
    name: &'static str,
    arch: u32,
    nr_bits: u32,
}

fn entries() -> Vec<Entry> {
    let (native_arch, _) = native();
    let mut e = vec![Entry { name: "native", arch: native_arch, nr_bits: 0 }];
    if native_arch == AUDIT_ARCH_X86_64 {
        e.push(Entry { name: "x32", arch: native_arch, nr_bits: X32_SYSCALL_BIT });
    }
    for (name, arch) in [
        ("i386", AUDIT_ARCH_I386),
        ("arm", AUDIT_ARCH_ARM),
        ("x86_64", AUDIT_ARCH_X86_64),
        ("aarch64", AUDIT_ARCH_AARCH64),
        ("riscv64", AUDIT_ARCH_RISCV64),
    ] {
        if arch != native_arch {
            e.push(Entry { name, arch, nr_bits: 0 });
        }
    }
    e
}

/// Deliberate differences between cordon's program and seccompiler's, each with its
/// reason. Anything else is a mismatch.
fn deliberate(d: &SeccompData, cordon: u32, _reference: u32) -> Option<&'static str> {
    let (native_arch, _) = native();
    // cordon's ABI guard kills every number at or above the x32 bit on x86_64 (x32
    // calls, and numbers with bit 31 set, which name no syscall). seccompiler has no x32
    // guard: its rules compare the plain numbers, so an x32 call (e.g. connect as
    // 0x4000002a) matches none of them and is allowed; that is the bypass cordon's
    // guard exists for.
    if native_arch == AUDIT_ARCH_X86_64
        && d.arch == native_arch
        && d.nr >= X32_SYSCALL_BIT
        && cordon == SECCOMP_RET_KILL_PROCESS
    {
        return Some("x32 guard: cordon kills syscall numbers >= the x32 bit; seccompiler has no such guard");
    }
    None
}

/// Argument values the profile names, per syscall and argument index, and all together.
#[derive(Debug, Default)]
struct ProfileValues {
    per_syscall: BTreeMap<String, BTreeMap<usize, BTreeSet<u64>>>,
    all: BTreeSet<u64>,
}

/// The neighbours of a value that a wrong comparison would confuse with it.
fn variants(b: u64) -> [u64; 9] {
    const HIGH: u64 = 0xffff_ffff_0000_0000;
    [b, b.wrapping_add(1), b.wrapping_sub(1), b | HIGH, b & !HIGH, (b & !HIGH) << 32, b | (1 << 32), b | (1 << 63), !b]
}

fn profile_values() -> ProfileValues {
    let json: serde_json::Value = serde_json::from_str(CONFINED_PROFILE).expect("profile is JSON");
    // bases[syscall][index] = values and masks named for that argument.
    let mut bases: BTreeMap<String, BTreeMap<usize, BTreeSet<u64>>> = BTreeMap::new();
    for (filter_name, filter) in json.as_object().expect("profile is an object of filters") {
        let rules = filter["filter"].as_array().unwrap_or_else(|| panic!("filter {filter_name} has no rules"));
        for rule in rules {
            let syscall = rule["syscall"].as_str().expect("rule names a syscall").to_string();
            let per_index = bases.entry(syscall).or_default();
            for arg in rule["args"].as_array().into_iter().flatten() {
                let index = arg["index"].as_u64().expect("argument index") as usize;
                let val = arg["val"].as_u64().expect("argument value");
                let set = per_index.entry(index).or_default();
                set.insert(val);
                // Operators with an operand (masked_eq today) contribute it too.
                if let Some(obj) = arg["op"].as_object() {
                    for operand in obj.values().filter_map(serde_json::Value::as_u64) {
                        set.extend([operand, val & operand, val | !operand]);
                    }
                }
            }
        }
    }
    let mut out = ProfileValues::default();
    out.all.extend([0, 1, u64::MAX, u64::from(u32::MAX), 1 << 32, 1 << 63]);
    for (syscall, per_index) in bases {
        let entry = out.per_syscall.entry(syscall).or_default();
        for (index, set) in per_index {
            let vals: Vec<u64> = set.iter().copied().collect();
            let mut combined: BTreeSet<u64> = set;
            for (i, a) in vals.iter().enumerate() {
                for b in &vals[i + 1..] {
                    combined.insert(a | b);
                }
            }
            let expanded: BTreeSet<u64> = combined.iter().flat_map(|&b| variants(b)).chain([0, u64::MAX]).collect();
            out.all.extend(&expanded);
            entry.insert(index, expanded);
        }
    }
    out
}

/// How much of the case space a comparison covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Every number on every entry point, every value, many random vectors.
    Full,
    /// The numbers the profile names and a sample of the others, on the native entry
    /// point, with the product of the named ones' argument values and a few random
    /// vectors (for the many mutant runs).
    Light,
}

/// The argument vectors tried for one syscall number.
fn argument_vectors(
    named: Option<&BTreeMap<usize, BTreeSet<u64>>>,
    values: &ProfileValues,
    scope: Scope,
    rng: &mut SplitMix64,
) -> Vec<[u64; 6]> {
    let all: Vec<u64> = values.all.iter().copied().collect();
    let mut out = vec![[0u64; 6]];
    if scope == Scope::Full {
        out.extend(all.iter().map(|&v| [v; 6]));
    }
    let random_arg = |rng: &mut SplitMix64| {
        if rng.next_u64() & 1 == 0 {
            rng.next_u64()
        } else {
            all[rng.below(all.len())]
        }
    };
    for _ in 0..RANDOM_PER_NR {
        out.push(std::array::from_fn(|_| random_arg(rng)));
    }
    let Some(per_index) = named else { return out };
    // The full product over the indices the rules check (other arguments 0), then the
    // same values with random other arguments.
    let mut product: Vec<[u64; 6]> = vec![[0; 6]];
    for (&index, set) in per_index {
        product = product
            .into_iter()
            .flat_map(|args| {
                set.iter().map(move |&v| {
                    let mut a = args;
                    a[index] = v;
                    a
                })
            })
            .collect();
    }
    out.extend(&product);
    let picks: Vec<(usize, Vec<u64>)> = per_index.iter().map(|(&i, s)| (i, s.iter().copied().collect())).collect();
    let random = if scope == Scope::Full { RANDOM_PER_NAMED } else { RANDOM_PER_NAMED_LIGHT };
    for _ in 0..random {
        let mut a: [u64; 6] = std::array::from_fn(|_| random_arg(rng));
        for (index, vals) in &picks {
            if rng.below(4) != 0 {
                a[*index] = vals[rng.below(vals.len())];
            }
        }
        out.push(a);
    }
    out
}

fn from_libc(p: &[libc::sock_filter]) -> Vec<Insn> {
    p.iter().map(|i| Insn { code: i.code, jt: i.jt, jf: i.jf, k: i.k }).collect()
}

fn from_seccompiler(p: &[seccompiler::sock_filter]) -> Vec<Insn> {
    p.iter().map(|i| Insn { code: i.code, jt: i.jt, jf: i.jf, k: i.k }).collect()
}

/// One program variant: cordon's single filter, seccompiler's stacked filters.
struct Subjects {
    label: String,
    cordon: Vec<Insn>,
    observed: BTreeMap<i64, Observed>,
    reference: Stack,
    /// Every errno the installed filters answer with.
    errnos: BTreeSet<u32>,
}

fn subjects(network_allowed: bool, supervised: bool) -> Subjects {
    subjects_for(network_allowed, false, supervised)
}

fn subjects_for(network_allowed: bool, unix_allowlist: bool, supervised: bool) -> Subjects {
    subjects_with(network_allowed, unix_allowlist, false, supervised)
}

fn subjects_with(network_allowed: bool, unix_allowlist: bool, proxy: bool, supervised: bool) -> Subjects {
    subjects_net(NetFilter::select(network_allowed, unix_allowlist, proxy, false), supervised)
}

fn subjects_net(net: NetFilter, supervised: bool) -> Subjects {
    let (_, target) = native();
    let program = compile_net(net, supervised, false).expect("cordon compiles the profile");
    let map = seccompiler::compile_from_json(CONFINED_PROFILE.as_bytes(), target).expect("seccompiler compiles it");
    let json: serde_json::Value = serde_json::from_str(CONFINED_PROFILE).unwrap();
    let mut reference = Stack::default();
    let mut errnos = BTreeSet::new();
    // Installed in cordon's order: for a syscall in two filters the kernel would keep
    // the newest filter's errno, which cordon's compiler refuses to guess.
    for name in filter_names_net(net) {
        let prog = map.get(name).unwrap_or_else(|| panic!("seccompiler lacks filter {name}"));
        reference.install(&from_seccompiler(prog)).unwrap_or_else(|e| panic!("kernel would refuse {name}: {e:?}"));
        if let Some(e) = json[name]["match_action"]["errno"].as_u64() {
            errnos.insert(e as u32);
        }
    }
    Subjects {
        label: format!("network filter {net:?} supervised={supervised}"),
        cordon: from_libc(&program.insns),
        observed: program.observed,
        reference,
        errnos,
    }
}

#[derive(Debug, Default)]
struct Outcome {
    cases: u64,
    mismatches: Vec<String>,
    mismatch_count: u64,
    deliberate: BTreeMap<&'static str, u64>,
    /// cordon's raw verdicts (before mapping notifications to errnos) and how often.
    verdicts: BTreeMap<u32, u64>,
}

/// Run both sides over every case. `cordon` may be a mutant of the real program.
fn compare(s: &Subjects, cordon: &[Insn], scope: Scope) -> Outcome {
    let mut stack = Stack::default();
    stack.install(cordon).unwrap_or_else(|e| panic!("kernel would refuse cordon's program ({}): {e:?}", s.label));
    let values = profile_values();
    let named: BTreeMap<u32, &BTreeMap<usize, BTreeSet<u64>>> = values
        .per_syscall
        .iter()
        .filter_map(|(name, per_index)| Some((u32::try_from(syscall_number(name)?).ok()?, per_index)))
        .collect();
    let mut rng = SplitMix64(SEED);
    let mut out = Outcome::default();
    let (native_arch, _) = native();
    for entry in entries() {
        let foreign = entry.arch != native_arch;
        if scope == Scope::Light && entry.arch != native_arch {
            continue;
        }
        let nrs: Vec<u32> = if scope == Scope::Full {
            (0..=MAX_NR).map(|n| n | entry.nr_bits).chain(EDGE_NRS).collect()
        } else {
            // The named numbers and a sample of the rest (which reach the final allow).
            named.keys().copied().chain((0..=MAX_NR).step_by(37)).map(|n| n | entry.nr_bits).collect()
        };
        for nr in nrs {
            // Foreign arches are refused before the number is read: a few vectors do.
            let per_index = if foreign { None } else { named.get(&(nr & !entry.nr_bits)).copied() };
            let mut vectors = argument_vectors(per_index, &values, scope, &mut rng);
            if foreign {
                vectors.truncate(4);
            }
            for args in vectors {
                let d = SeccompData { nr, arch: entry.arch, instruction_pointer: rng.next_u64(), args };
                let raw = stack.run(&d);
                *out.verdicts.entry(raw).or_default() += 1;
                let reference = s.reference.run(&d);
                // A supervised program notifies where the plain one answers an errno; the
                // supervisor answers that errno (Observed::errno), so compare that.
                let mine = match s.observed.get(&i64::from(nr)) {
                    Some(o) if raw == SECCOMP_RET_USER_NOTIF && !foreign => SECCOMP_RET_ERRNO | o.errno,
                    _ => raw,
                };
                out.cases += 1;
                if mine == reference {
                    continue;
                }
                if let Some(why) = deliberate(&d, mine, reference) {
                    *out.deliberate.entry(why).or_default() += 1;
                    continue;
                }
                out.mismatch_count += 1;
                if out.mismatches.len() < 20 {
                    out.mismatches.push(format!(
                        "{} {} nr={nr:#x} args={args:#x?}: cordon {mine:#010x}, seccompiler {reference:#010x}",
                        s.label, entry.name
                    ));
                }
            }
        }
    }
    out
}

fn variants_to_check() -> Vec<Subjects> {
    let mut v = Vec::new();
    for network_allowed in [false, true] {
        for supervised in [false, true] {
            v.push(subjects(network_allowed, supervised));
        }
    }
    // Network on with allow-listed unix sockets (connect() supervised or refused).
    for supervised in [false, true] {
        v.push(subjects_for(true, true, supervised));
    }
    // Proxy mode (`--allow-host`): TCP streams, every connect() supervised or refused.
    for supervised in [false, true] {
        v.push(subjects_with(false, false, true, supervised));
    }
    // The run's own network namespace: IP and unix streams, connect() and bind()
    // supervised or refused.
    for supervised in [false, true] {
        v.push(subjects_net(NetFilter::Loopback, supervised));
    }
    v
}

#[test]
fn cordon_and_seccompiler_agree_on_every_syscall() {
    let (native_arch, _) = native();
    for s in variants_to_check() {
        let out = compare(&s, &s.cordon, Scope::Full);
        eprintln!(
            "{}: {} cases, {} mismatches, deliberate {:?}, {} instructions vs {} filters",
            s.label,
            out.cases,
            out.mismatch_count,
            out.deliberate,
            s.cordon.len(),
            s.reference.len()
        );
        assert_eq!(out.mismatch_count, 0, "{}:\n{}", s.label, out.mismatches.join("\n"));
        // The cases reached every kind of verdict the program has: allow, kill, each
        // errno of the installed filters, and notifications when supervised.
        assert!(out.verdicts.contains_key(&SECCOMP_RET_ALLOW), "{}", s.label);
        assert!(out.verdicts.contains_key(&SECCOMP_RET_KILL_PROCESS), "{}", s.label);
        for errno in &s.errnos {
            let notified = s.observed.values().any(|o| o.errno == *errno);
            let seen = out.verdicts.contains_key(&(SECCOMP_RET_ERRNO | errno));
            assert!(seen || notified, "{}: no case got errno {errno}", s.label);
        }
        if !s.observed.is_empty() {
            assert!(out.verdicts.contains_key(&SECCOMP_RET_USER_NOTIF), "{}", s.label);
        }
        // Every listed deliberate difference is still exercised (so the list cannot rot).
        if native_arch == AUDIT_ARCH_X86_64 {
            assert_eq!(out.deliberate.len(), 1, "{}: {:?}", s.label, out.deliberate);
        }
    }
}

/// The comparison is sensitive: programs that differ from cordon's in one constant are
/// caught. Every return value, compared constant, mask and argument offset is changed in
/// turn (an `ALLOW` becomes `LOG`: the kernel discards `ALLOW`'s data bits, so flipping
/// one would be no change at all).
#[test]
fn the_comparison_catches_a_changed_program() {
    let s = subjects(false, false);
    let mut caught = 0;
    let mut survivors = Vec::new();
    for pc in 0..s.cordon.len() {
        let mut mutant = s.cordon.clone();
        let i = &mut mutant[pc];
        match i.code {
            c if c == BPF_RET | BPF_K && i.k == SECCOMP_RET_ALLOW => i.k = SECCOMP_RET_LOG,
            c if c == BPF_RET | BPF_K => i.k ^= 1,
            c if c == BPF_JMP | BPF_JEQ | BPF_K => i.k ^= 1,
            c if c == BPF_ALU | BPF_AND | BPF_K => i.k ^= 1,
            c if c == BPF_LD | BPF_W | BPF_ABS && i.k >= 16 => i.k ^= 8,
            _ => continue,
        }
        // The ABI guard at the head of the program only shows on other entry points and
        // unnamed numbers: those mutants get the full run.
        let scope = if pc < 6 { Scope::Full } else { Scope::Light };
        if compare(&s, &mutant, scope).mismatch_count > 0 {
            caught += 1;
        } else {
            survivors.push(format!("pc {pc}: {:?} -> {:?}", s.cordon[pc], mutant[pc]));
        }
    }
    eprintln!("mutants caught: {caught}");
    assert!(survivors.is_empty(), "mutants the differential test missed: {survivors:#?}");
    assert!(caught > 20, "too few mutants: {caught}");
}

// ---- the interpreter itself, against hand-written programs ----

fn data(nr: u32, args: [u64; 6]) -> SeccompData {
    SeccompData { nr, arch: AUDIT_ARCH_X86_64, instruction_pointer: 0x1234_5678_9abc_def0, args }
}

fn run(prog: &[Insn], d: &SeccompData) -> u32 {
    let mut s = Stack::default();
    s.install(prog).expect("valid program");
    s.run(d)
}

#[test]
fn interpreter_loads_read_seccomp_data_in_native_order() {
    let d = data(59, [0x1111_2222_3333_4444, 5, 6, 7, 8, 0xaaaa_bbbb_cccc_dddd]);
    let at = |k: u32| run(&[stmt(BPF_LD | BPF_W | BPF_ABS, k), stmt(BPF_RET | BPF_A, 0)], &d);
    assert_eq!(at(0), 59);
    assert_eq!(at(4), AUDIT_ARCH_X86_64);
    let (lo, hi) = if cfg!(target_endian = "little") { (8, 12) } else { (12, 8) };
    assert_eq!(at(lo), 0x9abc_def0);
    assert_eq!(at(hi), 0x1234_5678);
    let (lo, hi) = if cfg!(target_endian = "little") { (16, 20) } else { (20, 16) };
    assert_eq!(at(lo), 0x3333_4444);
    assert_eq!(at(hi), 0x1111_2222);
    assert_eq!(at(56 + lo - 16), 0xcccc_dddd);
    // LEN loads become sizeof(struct seccomp_data).
    assert_eq!(run(&[stmt(BPF_LD | BPF_W | BPF_LEN, 0), stmt(BPF_RET | BPF_A, 0)], &d), 64);
    let ldx_len = [stmt(BPF_LDX | BPF_W | BPF_LEN, 0), stmt(BPF_MISC | BPF_TXA, 0), stmt(BPF_RET | BPF_A, 0)];
    assert_eq!(run(&ldx_len, &d), 64);
}

#[test]
fn interpreter_alu_jumps_memory_and_misc() {
    let d = data(0, [0; 6]);
    let alu = |op: u16, a: u32, k: u32| {
        run(&[stmt(BPF_LD | BPF_IMM, a), stmt(BPF_ALU | op | BPF_K, k), stmt(BPF_RET | BPF_A, 0)], &d)
    };
    let alu_x = |op: u16, a: u32, x: u32| {
        let p = [
            stmt(BPF_LDX | BPF_IMM, x),
            stmt(BPF_LD | BPF_IMM, a),
            stmt(BPF_ALU | op | BPF_X, 0),
            stmt(BPF_RET | BPF_A, 0),
        ];
        run(&p, &d)
    };
    assert_eq!(alu(BPF_ADD, u32::MAX, 2), 1);
    assert_eq!(alu(BPF_SUB, 1, 2), u32::MAX);
    assert_eq!(alu(BPF_MUL, 0x8000_0001, 2), 2);
    assert_eq!(alu(BPF_DIV, 7, 2), 3);
    assert_eq!(alu(BPF_OR, 0xf0, 0x0f), 0xff);
    assert_eq!(alu(BPF_AND, 0xf0, 0x3c), 0x30);
    assert_eq!(alu(BPF_XOR, 0xff, 0x0f), 0xf0);
    assert_eq!(alu(BPF_LSH, 1, 31), 0x8000_0000);
    assert_eq!(alu(BPF_RSH, 0x8000_0000, 31), 1);
    assert_eq!(run(&[stmt(BPF_LD | BPF_IMM, 1), stmt(BPF_ALU | BPF_NEG, 0), stmt(BPF_RET | BPF_A, 0)], &d), u32::MAX);
    assert_eq!(alu_x(BPF_ADD, 40, 2), 42);
    assert_eq!(alu_x(BPF_SUB, 40, 2), 38);
    assert_eq!(alu_x(BPF_MUL, 40, 2), 80);
    assert_eq!(alu_x(BPF_DIV, 40, 3), 13);
    assert_eq!(alu_x(BPF_OR, 8, 1), 9);
    assert_eq!(alu_x(BPF_AND, 9, 1), 1);
    assert_eq!(alu_x(BPF_XOR, 9, 1), 8);
    // Shift amounts from X are taken modulo 32.
    assert_eq!(alu_x(BPF_LSH, 1, 33), 2);
    assert_eq!(alu_x(BPF_RSH, 4, 34), 1);
    // Division by a zero X ends the program with 0 (SECCOMP_RET_KILL_THREAD).
    assert_eq!(alu_x(BPF_DIV, 40, 0), SECCOMP_RET_KILL_THREAD);

    let cond = |op: u16, a: u32, k: u32| {
        let p = [
            stmt(BPF_LD | BPF_IMM, a),
            jump(BPF_JMP | op | BPF_K, k, 1, 0),
            stmt(BPF_RET | BPF_K, 0),
            stmt(BPF_RET | BPF_K, 1),
        ];
        run(&p, &d) == 1
    };
    let cond_x = |op: u16, a: u32, x: u32| {
        let p = [
            stmt(BPF_LDX | BPF_IMM, x),
            stmt(BPF_LD | BPF_IMM, a),
            jump(BPF_JMP | op | BPF_X, 0, 1, 0),
            stmt(BPF_RET | BPF_K, 0),
            stmt(BPF_RET | BPF_K, 1),
        ];
        run(&p, &d) == 1
    };
    for (f, name) in [(&cond as &dyn Fn(u16, u32, u32) -> bool, "k"), (&cond_x, "x")] {
        assert!(f(BPF_JEQ, 5, 5) && !f(BPF_JEQ, 5, 6), "{name}");
        assert!(f(BPF_JGT, 6, 5) && !f(BPF_JGT, 5, 5), "{name}");
        assert!(f(BPF_JGE, 5, 5) && !f(BPF_JGE, 4, 5), "{name}");
        assert!(f(BPF_JSET, 6, 2) && !f(BPF_JSET, 6, 1), "{name}");
        // Comparisons are unsigned.
        assert!(f(BPF_JGT, 0x8000_0000, 1), "{name}");
    }
    // JA skips k instructions.
    let ja = [stmt(BPF_JMP | BPF_JA, 1), stmt(BPF_RET | BPF_K, 0), stmt(BPF_RET | BPF_K, 7)];
    assert_eq!(run(&ja, &d), 7);
    // Scratch memory, TAX/TXA, RET A.
    let mem = [
        stmt(BPF_LD | BPF_IMM, 11),
        stmt(BPF_ST, 3),
        stmt(BPF_LDX | BPF_IMM, 22),
        stmt(BPF_STX, 15),
        stmt(BPF_LD | BPF_MEM, 15),
        stmt(BPF_MISC | BPF_TAX, 0),
        stmt(BPF_LD | BPF_MEM, 3),
        stmt(BPF_ALU | BPF_ADD | BPF_X, 0),
        stmt(BPF_LDX | BPF_MEM, 3),
        stmt(BPF_ALU | BPF_ADD | BPF_X, 0),
        stmt(BPF_RET | BPF_A, 0),
    ];
    assert_eq!(run(&mem, &d), 44);
    let txa = [stmt(BPF_LDX | BPF_IMM, 9), stmt(BPF_MISC | BPF_TXA, 0), stmt(BPF_RET | BPF_A, 0)];
    assert_eq!(run(&txa, &d), 9);
    // A and X start at 0.
    assert_eq!(run(&[stmt(BPF_RET | BPF_A, 0)], &d), 0);
}

#[test]
fn interpreter_refuses_what_the_kernel_refuses() {
    use crate::cbpf::Filter;
    let ret = stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    let err = |p: &[Insn]| Filter::load(p).unwrap_err();
    assert_eq!(err(&[]), LoadError::Length(0));
    assert_eq!(err(&vec![ret; 4097]), LoadError::Length(4097));
    assert_eq!(err(&[stmt(0xffff, 0), ret]), LoadError::UnknownOpcode { pc: 0, code: 0xffff });
    assert_eq!(err(&[stmt(BPF_ALU | BPF_DIV | BPF_K, 0), ret]), LoadError::DivideByZero { pc: 0 });
    assert_eq!(err(&[stmt(BPF_ALU | BPF_LSH | BPF_K, 32), ret]), LoadError::ShiftTooFar { pc: 0 });
    assert_eq!(err(&[stmt(BPF_ST, 16), ret]), LoadError::MemoryIndex { pc: 0 });
    assert_eq!(err(&[stmt(BPF_JMP | BPF_JA, 1), ret]), LoadError::JumpOutOfRange { pc: 0 });
    assert_eq!(err(&[jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1), ret]), LoadError::JumpOutOfRange { pc: 0 });
    assert_eq!(err(&[ret, stmt(BPF_LD | BPF_IMM, 0)]), LoadError::NoFinalReturn);
    assert_eq!(err(&[stmt(BPF_LD | BPF_MEM, 0), ret]), LoadError::UninitializedMemory { pc: 0 });
    // A word stored on one branch only is not valid after the join.
    let one_branch = [jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1), stmt(BPF_ST, 2), stmt(BPF_LD | BPF_MEM, 2), ret];
    assert_eq!(err(&one_branch), LoadError::UninitializedMemory { pc: 2 });
    // Classic BPF has these; seccomp does not.
    assert_eq!(err(&[stmt(BPF_ALU | BPF_MOD | BPF_K, 3), ret]), LoadError::NotForSeccomp { pc: 0, code: 0x94 });
    assert_eq!(err(&[stmt(BPF_LD | BPF_B | BPF_ABS, 0), ret]), LoadError::NotForSeccomp { pc: 0, code: 0x30 });
    assert_eq!(err(&[stmt(BPF_LD | BPF_W | BPF_ABS, 2), ret]), LoadError::DataOffset { pc: 0, k: 2 });
    assert_eq!(err(&[stmt(BPF_LD | BPF_W | BPF_ABS, 64), ret]), LoadError::DataOffset { pc: 0, k: 64 });
    // The path limit counts every attached filter plus 4 each.
    let mut s = Stack::default();
    let big = vec![ret; 4096];
    for _ in 0..7 {
        s.install(&big).unwrap();
    }
    assert!(matches!(s.install(&big), Err(LoadError::PathTooLong(_))));
}

#[test]
fn interpreter_stacks_filters_like_the_kernel() {
    let d = data(101, [0; 6]);
    let ret = |v: u32| vec![stmt(BPF_RET | BPF_K, v)];
    let stack = |rets: &[u32]| {
        let mut s = Stack::default();
        for r in rets {
            s.install(&ret(*r)).unwrap();
        }
        s.run(&d)
    };
    // Precedence, highest first.
    let order = [
        SECCOMP_RET_KILL_PROCESS,
        SECCOMP_RET_KILL_THREAD,
        SECCOMP_RET_TRAP,
        SECCOMP_RET_ERRNO | 1,
        SECCOMP_RET_USER_NOTIF,
        SECCOMP_RET_TRACE,
        SECCOMP_RET_LOG,
        SECCOMP_RET_ALLOW,
    ];
    for (i, hi) in order.iter().enumerate() {
        for lo in &order[i..] {
            assert_eq!(stack(&[*hi, *lo]), *hi, "{hi:#x} over {lo:#x}");
            assert_eq!(stack(&[*lo, *hi]), *hi, "{hi:#x} over {lo:#x}");
        }
    }
    // Equal actions: the most recently installed filter's data wins (this is what a
    // merged program cannot reproduce without knowing the order, hence cordon's
    // compiler refuses a syscall named in two filters).
    assert_eq!(stack(&[SECCOMP_RET_ERRNO | 1, SECCOMP_RET_ERRNO | 13]), SECCOMP_RET_ERRNO | 13);
    assert_eq!(stack(&[SECCOMP_RET_ERRNO | 13, SECCOMP_RET_ERRNO | 1]), SECCOMP_RET_ERRNO | 1);
    assert_eq!(stack(&[SECCOMP_RET_TRACE | 5, SECCOMP_RET_TRACE | 6, SECCOMP_RET_ALLOW]), SECCOMP_RET_TRACE | 6);
    // All ALLOW: the data is dropped (the start value is plain ALLOW).
    assert_eq!(stack(&[SECCOMP_RET_ALLOW | 3]), SECCOMP_RET_ALLOW);
    // Unknown actions compare by their signed action bits, like the kernel.
    assert_eq!(stack(&[0x7ffe_0000, SECCOMP_RET_ALLOW]), 0x7ffe_0000);
    assert_eq!(stack(&[0x7ffe_0000, SECCOMP_RET_LOG]), SECCOMP_RET_LOG);
}
