//! The code generator: the named filters of a profile compiled into one classic-BPF
//! program (the layout in the module's documentation).

use super::syscalls::ARCH_SPECIFIC;
use super::{
    insn, jump, native_audit_arch, ret_insn, syscall_number, Cond, Insn, JsonAction, JsonFilter, JsonOp, JsonRule,
    Observed, ObservedKind, Program, Ret, SeccompError, AND_K, JEQ_K, JGE_K, LD_W_ABS, OFFSET_ARCH, OFFSET_ARGS,
    OFFSET_NR, RET_K, RET_USER_NOTIF, WRITE_INTENT_FILTER, X32_SYSCALL_BIT,
};
use std::collections::BTreeMap;

/// Compile the named filters of `profile` into one program; rules for syscalls in
/// `observe` return `SECCOMP_RET_USER_NOTIF`.
pub(super) fn compile(
    profile: &str,
    filters: &[&'static str],
    observe: &[(String, ObservedKind)],
    write_rules: &[JsonRule],
) -> Result<Program, SeccompError> {
    let mut map: BTreeMap<String, JsonFilter> =
        serde_json::from_str(profile).map_err(|e| SeccompError::Profile(e.to_string()))?;
    let mut filters = filters.to_vec();
    let writes = !write_rules.is_empty();
    if writes {
        // The write-intent rules become one more filter whose every rule notifies.
        map.insert(
            WRITE_INTENT_FILTER.into(),
            JsonFilter {
                mismatch_action: "allow".into(),
                match_action: JsonAction { errno: 0 },
                filter: write_rules.to_vec(),
            },
        );
        filters.push(WRITE_INTENT_FILTER);
    }
    let filters = &filters[..];
    let mut observed: BTreeMap<i64, Observed> = BTreeMap::new();
    // simple[ret] = syscall numbers refused without argument checks.
    let mut simple: BTreeMap<Ret, Vec<i64>> = BTreeMap::new();
    // checked[nr] = rules (conditions, return) in profile order.
    let mut checked: BTreeMap<i64, Vec<(Vec<Cond>, Ret)>> = BTreeMap::new();
    // Which filter named each syscall first (a syscall may have several rules, all in
    // one filter).
    let mut owner: BTreeMap<&str, &'static str> = BTreeMap::new();
    for name in filters {
        let name_of_filter: &'static str = name;
        let f = map.get(*name).ok_or(SeccompError::Missing(name))?;
        for rule in &f.filter {
            let first = *owner.entry(rule.syscall.as_str()).or_insert(*name);
            if first != *name {
                return Err(SeccompError::DuplicateSyscall { syscall: rule.syscall.clone(), first, second: name });
            }
        }
        if f.mismatch_action != "allow" {
            return Err(SeccompError::Profile(format!("filter {name}: mismatch_action must be \"allow\"")));
        }
        let errno = f.match_action.errno;
        for rule in &f.filter {
            let Some(nr) = syscall_number(&rule.syscall) else {
                if ARCH_SPECIFIC.contains(&rule.syscall.as_str()) {
                    continue;
                }
                return Err(SeccompError::UnknownSyscall(rule.syscall.clone()));
            };
            let write_rule = name_of_filter == WRITE_INTENT_FILTER;
            let ret = match observe.iter().find(|(name, _)| *name == rule.syscall) {
                _ if write_rule => {
                    observed.insert(
                        nr,
                        Observed {
                            name: rule.syscall.clone(),
                            kind: ObservedKind::Write,
                            errno: 0,
                            filter: name_of_filter,
                        },
                    );
                    Ret::Notify
                }
                Some((name, kind)) => {
                    observed.insert(nr, Observed { name: name.clone(), kind: *kind, errno, filter: name_of_filter });
                    Ret::Notify
                }
                None => Ret::Errno(errno),
            };
            if rule.args.is_empty() {
                simple.entry(ret).or_default().push(nr);
                continue;
            }
            let mut conds = Vec::new();
            for c in &rule.args {
                if c.index > 5 {
                    return Err(SeccompError::Profile(format!("{}: argument index {} > 5", rule.syscall, c.index)));
                }
                let qword = match c.width.as_str() {
                    "dword" => false,
                    "qword" => true,
                    other => return Err(SeccompError::Profile(format!("{}: argument type {other}", rule.syscall))),
                };
                let (mask, negate) = match c.op {
                    JsonOp::Eq => (u64::MAX, false),
                    JsonOp::Ne => (u64::MAX, true),
                    JsonOp::MaskedEq(m) => (m, false),
                };
                if negate && qword {
                    return Err(SeccompError::Profile(format!("{}: `ne` is supported on dwords only", rule.syscall)));
                }
                conds.push(Cond { index: c.index, qword, mask, val: c.val, negate });
            }
            checked.entry(nr).or_default().push((conds, ret));
        }
    }
    // A syscall refused outright must not also appear with argument checks.
    for nrs in simple.values() {
        if let Some(nr) = nrs.iter().find(|n| checked.contains_key(n)) {
            return Err(SeccompError::Profile(format!("syscall {nr} is both refused and argument-checked")));
        }
    }

    let arch = native_audit_arch()?;
    // Observing writes means a supervisor answers: it also refuses foreign-ABI
    // syscalls (ENOSYS) and records them, so that a SIGSYS is never needed as evidence.
    let foreign = if writes { RET_USER_NOTIF } else { libc::SECCOMP_RET_KILL_PROCESS };
    let mut prog = vec![
        insn(LD_W_ABS, OFFSET_ARCH, 0, 0),
        insn(JEQ_K, arch, 1, 0),
        insn(RET_K, foreign, 0, 0),
        insn(LD_W_ABS, OFFSET_NR, 0, 0),
    ];
    if std::env::consts::ARCH == "x86_64" {
        prog.push(insn(JGE_K, X32_SYSCALL_BIT, 0, 1));
        prog.push(insn(RET_K, foreign, 0, 0));
    }
    // Argument-free rules: one jeq each to a shared return at the end of the program
    // (after the argument-checked section, which comes first; see below).
    let jumps_total: usize = simple.values().map(Vec::len).sum();
    let mut checked_code: Vec<Insn> = Vec::new();
    for (nr, rules) in &checked {
        let mut group: Vec<Insn> = Vec::new();
        for (conds, ret) in rules {
            // (insn, how a mismatch jumps to the next rule: 0 none, 1 on false, 2 on true)
            let mut block: Vec<(Insn, u8)> = Vec::new();
            for c in conds {
                let lo = OFFSET_ARGS + 8 * c.index as u32;
                let words: &[(u32, u32, u32)] = &[(lo + 4, (c.mask >> 32) as u32, (c.val >> 32) as u32)];
                let low = (lo, c.mask as u32, c.val as u32);
                let mut parts: Vec<(u32, u32, u32)> = Vec::new();
                if c.qword {
                    parts.extend_from_slice(words);
                }
                parts.push(low);
                for (off, mask, val) in parts {
                    block.push((insn(LD_W_ABS, off, 0, 0), 0));
                    if mask != u32::MAX {
                        block.push((insn(AND_K, mask, 0, 0), 0));
                    }
                    block.push((insn(JEQ_K, val & mask, 0, 0), if c.negate { 2 } else { 1 }));
                }
            }
            block.push((ret_insn(*ret), 0));
            let len = block.len();
            for (k, (mut i, mismatch)) in block.into_iter().enumerate() {
                match mismatch {
                    1 => i.jf = jump(len - (k + 1))?,
                    2 => i.jt = jump(len - (k + 1))?,
                    _ => {}
                }
                group.push(i);
            }
        }
        group.push(insn(RET_K, libc::SECCOMP_RET_ALLOW, 0, 0));
        // Header: if nr matches, fall into the group; otherwise skip it. The
        // accumulator is reloaded with nr by every group header's preceding load.
        checked_code.push(insn(LD_W_ABS, OFFSET_NR, 0, 0));
        checked_code.push(insn(JEQ_K, *nr as u32, 0, jump(group.len())?));
        checked_code.extend(group);
    }
    // The argument-checked groups come first (each header jumps over its own group
    // only), then the argument-free jeqs, which jump over the rest of the jeqs to the
    // shared returns: no jump spans the whole program, so it may outgrow 255
    // instructions (the proxy filter with the write-intent rules does). Each syscall is
    // in one section only (checked above), so the order does not change any verdict.
    prog.extend(checked_code);
    let shared_returns: Vec<Ret> = simple.keys().copied().collect();
    let mut idx = 0usize;
    for (ret, nrs) in &simple {
        let ret_pos = shared_returns.iter().position(|e| e == ret).unwrap_or(0);
        for nr in nrs {
            // Distance from the instruction after this jeq to the shared return.
            let remaining_jumps = jumps_total - idx - 1;
            let dist = remaining_jumps + 1 + ret_pos;
            // Reload the number: the last checked group's test left it in place, but
            // say so rather than rely on it.
            if idx == 0 {
                prog.push(insn(LD_W_ABS, OFFSET_NR, 0, 0));
            }
            prog.push(insn(JEQ_K, *nr as u32, jump(dist)?, 0));
            idx += 1;
        }
    }
    prog.push(insn(RET_K, libc::SECCOMP_RET_ALLOW, 0, 0));
    for ret in shared_returns {
        prog.push(ret_insn(ret));
    }
    Ok(Program { insns: prog, observed })
}
