//! A classic-BPF interpreter with the kernel's seccomp semantics, for tests only.
//!
//! It answers "what would the kernel do with these filters for this syscall", so that
//! cordon's seccomp compiler can be checked against another compiler (seccompiler) by
//! a third party that shares neither's assumptions. It is written from the kernel's
//! documented behaviour, not from either compiler:
//! - instruction encoding: `include/uapi/linux/bpf_common.h` and `filter.h`;
//! - load-time checks: `bpf_check_classic` and `check_load_and_stores` in
//!   `net/core/filter.c`, then `seccomp_check_filter` in `kernel/seccomp.c` (which
//!   narrows the opcode set and rewrites `LEN` loads into immediates);
//! - run-time semantics: classic BPF as the kernel converts it (A and X start at 0,
//!   32-bit wrapping arithmetic, division by a zero X ends the program with 0, shift
//!   amounts in X are taken modulo 32, jumps are forward only);
//! - several filters: every filter runs, newest first, and the result with the highest
//!   precedence (lowest `(s32)(ret & SECCOMP_RET_ACTION_FULL)`) wins; for equal actions
//!   the most recently installed filter's value is kept (`seccomp_run_filters`, and
//!   `Documentation/userspace-api/seccomp_filter.rst`: "only the SECCOMP_RET_DATA from
//!   the most recently installed filter will be returned").
//!
//! What it does not model: ancillary `SKF_AD_*` loads (seccomp rejects every load
//! outside `struct seccomp_data` anyway), what the kernel does with a verdict (errno
//! clamping to `MAX_ERRNO`, signals, notifications), and constant blinding or JITs.
#![allow(dead_code)] // each test binary uses a different part

/// Instruction classes (`BPF_CLASS`).
pub const BPF_LD: u16 = 0x00;
pub const BPF_LDX: u16 = 0x01;
pub const BPF_ST: u16 = 0x02;
pub const BPF_STX: u16 = 0x03;
pub const BPF_ALU: u16 = 0x04;
pub const BPF_JMP: u16 = 0x05;
pub const BPF_RET: u16 = 0x06;
pub const BPF_MISC: u16 = 0x07;
/// Load sizes (`BPF_SIZE`).
pub const BPF_W: u16 = 0x00;
pub const BPF_H: u16 = 0x08;
pub const BPF_B: u16 = 0x10;
/// Load modes (`BPF_MODE`).
pub const BPF_IMM: u16 = 0x00;
pub const BPF_ABS: u16 = 0x20;
pub const BPF_IND: u16 = 0x40;
pub const BPF_MEM: u16 = 0x60;
pub const BPF_LEN: u16 = 0x80;
pub const BPF_MSH: u16 = 0xa0;
/// ALU operations (`BPF_OP`).
pub const BPF_ADD: u16 = 0x00;
pub const BPF_SUB: u16 = 0x10;
pub const BPF_MUL: u16 = 0x20;
pub const BPF_DIV: u16 = 0x30;
pub const BPF_OR: u16 = 0x40;
pub const BPF_AND: u16 = 0x50;
pub const BPF_LSH: u16 = 0x60;
pub const BPF_RSH: u16 = 0x70;
pub const BPF_NEG: u16 = 0x80;
pub const BPF_MOD: u16 = 0x90;
pub const BPF_XOR: u16 = 0xa0;
/// Jump operations (`BPF_OP`).
pub const BPF_JA: u16 = 0x00;
pub const BPF_JEQ: u16 = 0x10;
pub const BPF_JGT: u16 = 0x20;
pub const BPF_JGE: u16 = 0x30;
pub const BPF_JSET: u16 = 0x40;
/// Operand source (`BPF_SRC`): the constant `k` or the X register.
pub const BPF_K: u16 = 0x00;
pub const BPF_X: u16 = 0x08;
/// Return value source (`BPF_RVAL`): the accumulator.
pub const BPF_A: u16 = 0x10;
/// `BPF_MISCOP`.
pub const BPF_TAX: u16 = 0x00;
pub const BPF_TXA: u16 = 0x80;

/// Scratch memory words (`BPF_MEMWORDS`).
pub const BPF_MEMWORDS: u32 = 16;
/// Longest classic program (`BPF_MAXINSNS`).
pub const BPF_MAXINSNS: usize = 4096;
/// `sizeof(struct seccomp_data)`: `int nr; __u32 arch; __u64 instruction_pointer;
/// __u64 args[6];`.
pub const SECCOMP_DATA_LEN: u32 = 64;
/// Limit on the instructions on any path through a task's filters, with a 4-instruction
/// penalty per filter (`MAX_INSNS_PER_PATH`: 256 KiB of `struct sock_filter`).
pub const MAX_INSNS_PER_PATH: usize = (1 << 18) / 8;

/// seccomp return actions (`include/uapi/linux/seccomp.h`).
pub const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
pub const SECCOMP_RET_KILL_THREAD: u32 = 0x0000_0000;
pub const SECCOMP_RET_TRAP: u32 = 0x0003_0000;
pub const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
pub const SECCOMP_RET_USER_NOTIF: u32 = 0x7fc0_0000;
pub const SECCOMP_RET_TRACE: u32 = 0x7ff0_0000;
pub const SECCOMP_RET_LOG: u32 = 0x7ffc_0000;
pub const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
pub const SECCOMP_RET_ACTION_FULL: u32 = 0xffff_0000;
pub const SECCOMP_RET_DATA: u32 = 0x0000_ffff;

/// One instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    /// Opcode.
    pub code: u16,
    /// Forward jump if true.
    pub jt: u8,
    /// Forward jump if false.
    pub jf: u8,
    /// Operand.
    pub k: u32,
}

/// `BPF_STMT`.
pub fn stmt(code: u16, k: u32) -> Insn {
    Insn { code, jt: 0, jf: 0, k }
}

/// `BPF_JUMP`.
pub fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
    Insn { code, jt, jf, k }
}

/// What a filter sees (`struct seccomp_data`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeccompData {
    /// The syscall number as the entry point passed it (x32 numbers carry bit 30).
    pub nr: u32,
    /// `AUDIT_ARCH_*` of the entry point.
    pub arch: u32,
    /// Where the syscall instruction was.
    pub instruction_pointer: u64,
    /// The six argument registers, full width.
    pub args: [u64; 6],
}

impl SeccompData {
    /// The structure as the filter reads it: native byte order, no padding.
    pub fn bytes(&self) -> [u8; SECCOMP_DATA_LEN as usize] {
        let mut b = [0u8; SECCOMP_DATA_LEN as usize];
        b[0..4].copy_from_slice(&self.nr.to_ne_bytes());
        b[4..8].copy_from_slice(&self.arch.to_ne_bytes());
        b[8..16].copy_from_slice(&self.instruction_pointer.to_ne_bytes());
        for (i, a) in self.args.iter().enumerate() {
            b[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        b
    }
}

/// Why the kernel would refuse to load a program (`EINVAL`, or `ENOMEM` for the path
/// limit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// No instructions, or more than `BPF_MAXINSNS`.
    Length(usize),
    /// An opcode classic BPF does not have.
    UnknownOpcode { pc: usize, code: u16 },
    /// An opcode classic BPF has but seccomp refuses (packet loads, `MOD`, `MSH`...).
    NotForSeccomp { pc: usize, code: u16 },
    /// Division by the constant 0.
    DivideByZero { pc: usize },
    /// A constant shift by 32 or more.
    ShiftTooFar { pc: usize },
    /// A scratch memory index of 16 or more.
    MemoryIndex { pc: usize },
    /// A jump past the end.
    JumpOutOfRange { pc: usize },
    /// The last instruction is not a return.
    NoFinalReturn,
    /// Some path reads a scratch word before storing it.
    UninitializedMemory { pc: usize },
    /// A `seccomp_data` load that is unaligned or out of bounds.
    DataOffset { pc: usize, k: u32 },
    /// The task's filters would exceed `MAX_INSNS_PER_PATH`.
    PathTooLong(usize),
}

/// A program that passed the kernel's load-time checks, rewritten as the kernel
/// rewrites it (`LEN` loads become immediates of `sizeof(struct seccomp_data)`).
#[derive(Debug, Clone)]
pub struct Filter {
    insns: Vec<Insn>,
}

fn class(code: u16) -> u16 {
    code & 0x07
}

/// Opcodes classic BPF knows (`chk_code_allowed`).
fn classic_opcode(code: u16) -> bool {
    let alu = |op: u16| [BPF_ALU | op | BPF_K, BPF_ALU | op | BPF_X];
    let mut ok: Vec<u16> = Vec::new();
    for op in [BPF_ADD, BPF_SUB, BPF_MUL, BPF_DIV, BPF_MOD, BPF_AND, BPF_OR, BPF_XOR, BPF_LSH, BPF_RSH] {
        ok.extend(alu(op));
    }
    ok.push(BPF_ALU | BPF_NEG);
    for size in [BPF_W, BPF_H, BPF_B] {
        ok.push(BPF_LD | size | BPF_ABS);
        ok.push(BPF_LD | size | BPF_IND);
    }
    ok.extend([BPF_LD | BPF_W | BPF_LEN, BPF_LD | BPF_IMM, BPF_LD | BPF_MEM]);
    ok.extend([BPF_LDX | BPF_W | BPF_LEN, BPF_LDX | BPF_B | BPF_MSH, BPF_LDX | BPF_IMM, BPF_LDX | BPF_MEM]);
    ok.extend([BPF_ST, BPF_STX, BPF_MISC | BPF_TAX, BPF_MISC | BPF_TXA, BPF_RET | BPF_K, BPF_RET | BPF_A]);
    ok.push(BPF_JMP | BPF_JA);
    for op in [BPF_JEQ, BPF_JGE, BPF_JGT, BPF_JSET] {
        ok.push(BPF_JMP | op | BPF_K);
        ok.push(BPF_JMP | op | BPF_X);
    }
    ok.contains(&code)
}

/// Opcodes seccomp accepts after the classic checks (`seccomp_check_filter`): no
/// packet loads other than aligned words of `seccomp_data`, no `MOD`, no `MSH`.
fn seccomp_opcode(code: u16) -> bool {
    let is_cond_jump = class(code) == BPF_JMP && code != (BPF_JMP | BPF_JA);
    let is_alu = class(code) == BPF_ALU;
    match code {
        c if c == BPF_LD | BPF_W | BPF_ABS || c == BPF_LD | BPF_W | BPF_LEN || c == BPF_LDX | BPF_W | BPF_LEN => true,
        c if c == BPF_ALU | BPF_MOD | BPF_K || c == BPF_ALU | BPF_MOD | BPF_X => false,
        c if c == BPF_LD | BPF_IMM || c == BPF_LDX | BPF_IMM || c == BPF_LD | BPF_MEM || c == BPF_LDX | BPF_MEM => true,
        c if c == BPF_ST || c == BPF_STX || c == BPF_MISC | BPF_TAX || c == BPF_MISC | BPF_TXA => true,
        c if c == BPF_RET | BPF_K || c == BPF_RET | BPF_A || c == BPF_JMP | BPF_JA => true,
        _ => is_alu || is_cond_jump,
    }
}

fn is_cond_jump(code: u16) -> bool {
    class(code) == BPF_JMP && code != (BPF_JMP | BPF_JA)
}

impl Filter {
    /// Check `insns` as `seccomp(SECCOMP_SET_MODE_FILTER)` would, in the kernel's order.
    pub fn load(insns: &[Insn]) -> Result<Filter, LoadError> {
        let flen = insns.len();
        if flen == 0 || flen > BPF_MAXINSNS {
            return Err(LoadError::Length(flen));
        }
        // bpf_check_classic: opcode known, per-opcode constraints.
        for (pc, i) in insns.iter().enumerate() {
            if !classic_opcode(i.code) {
                return Err(LoadError::UnknownOpcode { pc, code: i.code });
            }
            let c = i.code;
            if (c == BPF_ALU | BPF_DIV | BPF_K || c == BPF_ALU | BPF_MOD | BPF_K) && i.k == 0 {
                return Err(LoadError::DivideByZero { pc });
            }
            if (c == BPF_ALU | BPF_LSH | BPF_K || c == BPF_ALU | BPF_RSH | BPF_K) && i.k >= 32 {
                return Err(LoadError::ShiftTooFar { pc });
            }
            if (c == BPF_LD | BPF_MEM || c == BPF_LDX | BPF_MEM || c == BPF_ST || c == BPF_STX) && i.k >= BPF_MEMWORDS {
                return Err(LoadError::MemoryIndex { pc });
            }
            if c == BPF_JMP | BPF_JA && u64::from(i.k) >= (flen - pc - 1) as u64 {
                return Err(LoadError::JumpOutOfRange { pc });
            }
            if is_cond_jump(c) && (pc + usize::from(i.jt) + 1 >= flen || pc + usize::from(i.jf) + 1 >= flen) {
                return Err(LoadError::JumpOutOfRange { pc });
            }
        }
        let last = insns[flen - 1].code;
        if last != BPF_RET | BPF_K && last != BPF_RET | BPF_A {
            return Err(LoadError::NoFinalReturn);
        }
        check_load_and_stores(insns)?;
        // seccomp_check_filter: the seccomp subset, data loads in bounds, LEN rewritten.
        let mut out = insns.to_vec();
        for (pc, i) in out.iter_mut().enumerate() {
            if !seccomp_opcode(i.code) {
                return Err(LoadError::NotForSeccomp { pc, code: i.code });
            }
            if i.code == BPF_LD | BPF_W | BPF_ABS && (i.k >= SECCOMP_DATA_LEN || i.k & 3 != 0) {
                return Err(LoadError::DataOffset { pc, k: i.k });
            }
            if i.code == BPF_LD | BPF_W | BPF_LEN {
                *i = stmt(BPF_LD | BPF_IMM, SECCOMP_DATA_LEN);
            }
            if i.code == BPF_LDX | BPF_W | BPF_LEN {
                *i = stmt(BPF_LDX | BPF_IMM, SECCOMP_DATA_LEN);
            }
        }
        Ok(Filter { insns: out })
    }

    /// The instructions as loaded.
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// Run the filter on one syscall and return its 32-bit verdict.
    pub fn run(&self, data: &SeccompData) -> u32 {
        let bytes = data.bytes();
        let mut a: u32 = 0;
        let mut x: u32 = 0;
        // Every read of a word is preceded by a store on every path (checked at load),
        // so the initial value is never observed.
        let mut mem = [0u32; BPF_MEMWORDS as usize];
        let mut pc = 0usize;
        loop {
            let i = self.insns[pc];
            pc += 1;
            let src = if i.code & BPF_X != 0 { x } else { i.k };
            match class(i.code) {
                BPF_LD => match i.code & 0xe0 {
                    BPF_ABS => {
                        let o = i.k as usize;
                        a = u32::from_ne_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
                    }
                    BPF_IMM => a = i.k,
                    BPF_MEM => a = mem[i.k as usize],
                    _ => unreachable!("rejected at load: {:#x}", i.code),
                },
                BPF_LDX => match i.code & 0xe0 {
                    BPF_IMM => x = i.k,
                    BPF_MEM => x = mem[i.k as usize],
                    _ => unreachable!("rejected at load: {:#x}", i.code),
                },
                BPF_ST => mem[i.k as usize] = a,
                BPF_STX => mem[i.k as usize] = x,
                BPF_ALU => {
                    a = match i.code & 0xf0 {
                        BPF_ADD => a.wrapping_add(src),
                        BPF_SUB => a.wrapping_sub(src),
                        BPF_MUL => a.wrapping_mul(src),
                        BPF_DIV => {
                            if src == 0 {
                                // Only reachable through X (a constant 0 is refused at
                                // load): classic BPF ends the program with 0.
                                return 0;
                            }
                            a / src
                        }
                        BPF_OR => a | src,
                        BPF_AND => a & src,
                        BPF_XOR => a ^ src,
                        // Constant shifts are < 32 (checked at load); the kernel masks a
                        // shift amount taken from X to 5 bits.
                        BPF_LSH => a << (src & 31),
                        BPF_RSH => a >> (src & 31),
                        BPF_NEG => a.wrapping_neg(),
                        _ => unreachable!("rejected at load: {:#x}", i.code),
                    }
                }
                BPF_JMP => {
                    let op = i.code & 0xf0;
                    if op == BPF_JA {
                        pc += i.k as usize;
                        continue;
                    }
                    let taken = match op {
                        BPF_JEQ => a == src,
                        BPF_JGT => a > src,
                        BPF_JGE => a >= src,
                        BPF_JSET => a & src != 0,
                        _ => unreachable!("rejected at load: {:#x}", i.code),
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                BPF_RET => return if i.code & BPF_A != 0 { a } else { i.k },
                BPF_MISC => {
                    if i.code & 0xf8 == BPF_TXA {
                        a = x;
                    } else {
                        x = a;
                    }
                }
                _ => unreachable!("classes are 3 bits"),
            }
        }
    }
}

/// `check_load_and_stores`: walking forward, a scratch word is valid after a store;
/// at a jump target only the words valid on every incoming edge stay valid.
fn check_load_and_stores(insns: &[Insn]) -> Result<(), LoadError> {
    let mut masks = vec![u16::MAX; insns.len()];
    let mut valid: u16 = 0;
    for (pc, i) in insns.iter().enumerate() {
        valid &= masks[pc];
        let c = i.code;
        if c == BPF_ST || c == BPF_STX {
            valid |= 1 << i.k;
        } else if c == BPF_LD | BPF_MEM || c == BPF_LDX | BPF_MEM {
            if valid & (1 << i.k) == 0 {
                return Err(LoadError::UninitializedMemory { pc });
            }
        } else if c == BPF_JMP | BPF_JA {
            masks[pc + 1 + i.k as usize] &= valid;
            valid = u16::MAX;
        } else if is_cond_jump(c) {
            masks[pc + 1 + usize::from(i.jt)] &= valid;
            masks[pc + 1 + usize::from(i.jf)] &= valid;
            valid = u16::MAX;
        }
    }
    Ok(())
}

/// The precedence key of a verdict: lower wins (`ACTION_ONLY`).
pub fn action_only(ret: u32) -> i32 {
    (ret & SECCOMP_RET_ACTION_FULL) as i32
}

/// A task's filters, in installation order.
#[derive(Debug, Clone, Default)]
pub struct Stack {
    filters: Vec<Filter>,
}

impl Stack {
    /// Attach one more filter (`seccomp_attach_filter`'s length check).
    pub fn install(&mut self, insns: &[Insn]) -> Result<(), LoadError> {
        let f = Filter::load(insns)?;
        let total: usize = f.insns.len() + self.filters.iter().map(|f| f.insns.len() + 4).sum::<usize>();
        if total > MAX_INSNS_PER_PATH {
            return Err(LoadError::PathTooLong(total));
        }
        self.filters.push(f);
        Ok(())
    }

    /// How many filters are attached.
    pub fn len(&self) -> usize {
        self.filters.len()
    }

    /// The kernel's verdict for one syscall (`seccomp_run_filters`): start from
    /// `ALLOW`, run every filter newest first, keep a result only if its action has
    /// strictly higher precedence, so for equal actions the newest filter's data stays.
    pub fn run(&self, data: &SeccompData) -> u32 {
        let mut ret = SECCOMP_RET_ALLOW;
        for f in self.filters.iter().rev() {
            let cur = f.run(data);
            if action_only(cur) < action_only(ret) {
                ret = cur;
            }
        }
        ret
    }
}

/// A small deterministic generator (SplitMix64), so runs are reproducible without a
/// dependency.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A random index below `n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}
