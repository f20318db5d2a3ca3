//! Process operations: reaching other processes (signals, `ptrace`, their memory,
//! `/proc`, their priority and limits, their namespaces), processes that try to
//! outlive the run, and resource exhaustion.

use super::{Op, OpFn, Outcome, Step};
use cordon_stage::probe::proc::{self as raw, Detach};
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::time::Duration;

pub(super) const OPS: &[(&str, OpFn)] = &[
    ("kill", |o| raw::kill(o.num(0)?, o.num(1)?).step("kill")),
    ("kill-all", |o| raw::kill(-1, o.num(0)?).step("kill(-1)")),
    ("pidfd-kill", |o| {
        let fd = raw::pidfd_open(o.num(0)?).step("pidfd_open")?;
        raw::pidfd_send_signal(fd.as_fd(), o.num(1)?).step("pidfd_send_signal")
    }),
    ("pidfd-getfd", |o| {
        let fd = raw::pidfd_open(o.num(0)?).step("pidfd_open")?;
        raw::pidfd_getfd(fd.as_fd(), o.num(1)?).step("pidfd_getfd").map(drop)
    }),
    ("ptrace-attach", |o| raw::ptrace_attach_detach(o.num(0)?, false).step("ptrace(PTRACE_ATTACH)")),
    ("ptrace-seize", |o| raw::ptrace_attach_detach(o.num(0)?, true).step("ptrace(PTRACE_SEIZE)")),
    ("vm-read", vm_read),
    ("vm-write", |o| raw::process_vm_write(o.num(0)?, o.num(1)?, &[0]).step("process_vm_writev").map(drop)),
    ("proc-mem", proc_mem),
    ("proc-grep", proc_grep),
    ("setpriority", |o| raw::set_priority(o.num(0)?, o.num(1)?).step("setpriority")),
    ("prlimit", |o| raw::prlimit_nofile(o.num(0)?, o.num(1)?).step("prlimit")),
    ("pid", pid),
    ("daemonize", |o| late_writer(o, Detach::Daemon)),
    ("background", |o| late_writer(o, Detach::Background)),
    ("stubborn", |o| late_writer(o, Detach::Stubborn)),
    ("sleep", |o| {
        std::thread::sleep(Duration::from_millis(o.num(0)?));
        Ok(())
    }),
    ("fork-loop", fork_loop),
    ("alloc", alloc),
    ("fill", fill),
    ("spin", spin),
];

fn vm_read(o: &mut Op) -> Outcome {
    let data = raw::process_vm_read(o.num(0)?, o.num(1)?, 64).step("process_vm_readv")?;
    o.note(format!("read {} bytes", data.len()));
    Ok(())
}

/// Reads 64 bytes of `/proc/PID/mem` at ADDR.
fn proc_mem(o: &mut Op) -> Outcome {
    let pid: i32 = o.num(0)?;
    let f = File::open(format!("/proc/{pid}/mem")).step("open")?;
    let mut buf = [0u8; 64];
    let n = f.read_at(&mut buf, o.num(1)?).step("pread")?;
    o.note(format!("read {n} bytes"));
    Ok(())
}

/// Scans every readable `/proc/PID/environ` for MARKER; always ok, the detail says
/// how many were scanned and the text around each match (so a leaked secret shows in
/// the output, where the audit looks for it).
fn proc_grep(o: &mut Op) -> Outcome {
    let marker = o.text(0)?.to_string();
    let (mut scanned, mut unreadable, mut hits) = (0, 0, vec![]);
    for e in std::fs::read_dir("/proc").step("opendir(/proc)")?.flatten() {
        let name = e.file_name();
        if !name.as_bytes().first().is_some_and(u8::is_ascii_digit) {
            continue;
        }
        match std::fs::read(e.path().join("environ")) {
            Ok(env) => {
                scanned += 1;
                let text = String::from_utf8_lossy(&env).replace('\0', "\n");
                hits.extend(text.lines().filter(|l| l.contains(&marker)).map(String::from));
            }
            Err(_) => unreadable += 1,
        }
    }
    o.note(format!("scanned={scanned} unreadable={unreadable} matches=[{}]", hits.join(",")));
    Ok(())
}

fn pid(o: &mut Op) -> Outcome {
    let me = std::process::id();
    o.note(format!("pid={me} ppid={}", std::os::unix::process::parent_id()));
    Ok(())
}

/// `daemonize|background|stubborn MS PATH`: a process that writes PATH after MS.
fn late_writer(o: &mut Op, how: Detach) -> Outcome {
    let path = CString::new(o.arg(1)?.as_bytes()).map_err(|_| super::Fail::Usage("NUL in path".into()))?;
    // Flush before forking so the child cannot repeat buffered output.
    let _ = io::stdout().flush();
    let pid = raw::late_writer(how, o.num(0)?, &path).step("fork")?;
    o.note(format!("started {how:?} (first child {pid})"));
    Ok(())
}

/// `fork-loop N MS [MARK]`: fork up to N children that sleep MS, stopping at the first
/// refused fork (the trailing MARK only makes the processes findable).
fn fork_loop(o: &mut Op) -> Outcome {
    let _ = io::stdout().flush();
    let (n, err) = raw::fork_sleepers(o.num(0)?, o.num(1)?);
    o.note(format!("forked={n}"));
    match err {
        Some(e) => Err(e).step("fork"),
        None => Ok(()),
    }
}

/// `alloc MB [HOLD_MS]`: allocate and touch MB mebibytes, one at a time.
fn alloc(o: &mut Op) -> Outcome {
    let mb: usize = o.num(0)?;
    let mut held: Vec<Vec<u8>> = Vec::new();
    for i in 0..mb {
        let mut probe = Vec::<u8>::new();
        if probe.try_reserve_exact(1 << 20).is_err() {
            o.note(format!("allocated={i}M"));
            return Err(io::Error::from_raw_os_error(libc::ENOMEM)).step("allocate");
        }
        drop(probe);
        // `vec![1u8; n]` fills with memset (fast even unoptimized): every page touched.
        held.push(vec![1u8; 1 << 20]);
    }
    o.note(format!("allocated={mb}M"));
    if o.len() > 1 {
        std::thread::sleep(Duration::from_millis(o.num(1)?));
    }
    drop(held);
    Ok(())
}

/// `fill PATH MAXBYTES`: write PATH in 64 KiB chunks until a write fails.
fn fill(o: &mut Op) -> Outcome {
    let max: u64 = o.num(1)?;
    let mut f = File::create(o.arg(0)?).step("open")?;
    let chunk = vec![b'x'; 1 << 16];
    let mut written = 0u64;
    while written < max {
        if let Err(e) = f.write_all(&chunk) {
            o.note(format!("bytes={written}"));
            return Err(e).step("write");
        }
        written += chunk.len() as u64;
    }
    o.note(format!("bytes={written}"));
    Ok(())
}

/// This process's CPU time (user + system) in clock ticks, from `/proc/self/stat`.
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|r| r.1).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the command name: state is field 3, utime 14, stime 15 (1-based).
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    get(11) + get(12)
}

/// `spin SECONDS`: burn that much CPU time (not wall time), then report it; a CPU
/// limit below it ends the process first.
fn spin(o: &mut Op) -> Outcome {
    let secs: u64 = o.num(0)?;
    // USER_HZ is 100 on every Linux configuration cordon runs on.
    let target = secs * 100;
    let mut x = 0u64;
    while cpu_ticks() < target {
        for _ in 0..5_000_000 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }
    o.note(format!("spun={secs}s"));
    Ok(())
}
