//! Privilege, namespaces and mounts, keyrings, terminals, the other system-call entry
//! points, IPC, inherited descriptors, the environment and the run's report.

use super::{Fail, Op, OpFn, Outcome, Step, DEFAULT_DATA};
use cordon_stage::probe::{self as raw, abi, kernel};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};

pub(super) const OPS: &[(&str, OpFn)] = &[
    ("true", |_| Ok(())),
    ("privileged", privileged),
    ("bpf", |_| kernel::bpf_map_create().step("bpf(BPF_MAP_CREATE)").map(drop)),
    ("perf", |_| kernel::perf_event_open_self().step("perf_event_open").map(drop)),
    ("userfaultfd", |_| kernel::userfaultfd().step("userfaultfd").map(drop)),
    ("userfaultfd-dev", userfaultfd_dev),
    ("io-uring", |_| kernel::io_uring_setup().step("io_uring_setup").map(drop)),
    ("add-key", add_key),
    ("key-read", key_read),
    ("key-purge", |o| {
        let id = kernel::key_search(kernel::USER_KEYRING, &o.cstr(0)?).step("keyctl(SEARCH)")?;
        kernel::key_invalidate(id).step("keyctl(INVALIDATE)")
    }),
    ("key-join", |o| kernel::key_join_session(&o.cstr(0)?).step("keyctl(JOIN_SESSION_KEYRING)").map(drop)),
    ("mount-tmpfs", |o| {
        kernel::mount(Some(c"tmpfs"), &o.cstr(0)?, Some(c"tmpfs"), 0, Some(c"size=1m")).step("mount(tmpfs)")
    }),
    ("remount-write", |o| {
        let r = kernel::mount(None, &o.cstr(0)?, None, libc::MS_REMOUNT | libc::MS_BIND, None);
        then_write(o, r, "remount", 1)
    }),
    ("umount-write", |o| {
        let r = kernel::umount(&o.cstr(0)?, libc::MNT_DETACH);
        then_write(o, r, "umount2", 1)
    }),
    ("bind-write", |o| {
        let r = kernel::mount(Some(&o.cstr(0)?), &o.cstr(1)?, None, libc::MS_BIND, None);
        then_write(o, r, "mount(MS_BIND)", 2)
    }),
    ("open-tree-write", open_tree_write),
    ("fsopen", |_| kernel::fsopen(c"tmpfs").step("fsopen").map(drop)),
    ("chroot", |o| kernel::chroot(&o.cstr(0)?).step("chroot")),
    ("unshare", |o| kernel::unshare(ns_flags(o.text(0)?)?).step("unshare")),
    ("unshare-remount-write", |o| {
        let target = o.cstr(1)?;
        let r = kernel::unshare(ns_flags(o.text(0)?)?).and_then(|()| {
            let _ = kernel::mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None);
            kernel::mount(None, &target, None, libc::MS_REMOUNT | libc::MS_BIND, None)
        });
        then_write(o, r, "unshare+remount", 2)
    }),
    ("setns", |o| {
        let f = File::open(o.arg(0)?).step("open")?;
        kernel::setns(f.as_fd(), 0).step("setns")
    }),
    ("clone", |o| clone(o, false)),
    ("clone3", |o| clone(o, true)),
    ("setuid-write", |o| {
        let r = raw::setuid(o.num(0)?);
        then_write(o, r, "setuid", 1)
    }),
    ("sethostname", |o| kernel::set_hostname(o.text(0)?.as_bytes()).step("sethostname")),
    ("setdomainname", |o| kernel::set_domainname(o.text(0)?.as_bytes()).step("setdomainname")),
    ("write-file", |o| {
        let mut f = OpenOptions::new().write(true).open(o.arg(0)?).step("open")?;
        f.write_all(o.text(1)?.as_bytes()).step("write")
    }),
    ("tiocsti", |o| tiocsti(o, false)),
    ("tiocsti-hi", |o| tiocsti(o, true)),
    ("tioclinux", |o| tioclinux(o, false)),
    ("tioclinux-hi", |o| tioclinux(o, true)),
    ("i386-getpid", |o| arch(o).and_then(|_| abi::i386_getpid().step("getpid(i386)").map(drop))),
    ("i386-unshare-user", |o| arch(o).and_then(|_| abi::i386_unshare(libc::CLONE_NEWUSER).step("unshare(i386)"))),
    ("i386-udp", |o| arch(o).and_then(|_| abi::i386_udp4(o.num(0)?, false).step("sendto(i386)"))),
    ("i386-udp-socketcall", |o| arch(o).and_then(|_| abi::i386_udp4(o.num(0)?, true).step("socketcall(i386)"))),
    ("i386-tcp", |o| arch(o).and_then(|_| abi::i386_tcp4(o.num(0)?).step("connect(i386)"))),
    ("x32-getpid", |o| arch(o).and_then(|_| abi::x32_getpid().step("getpid(x32)").map(drop))),
    ("x32-unshare-user", |o| arch(o).and_then(|_| abi::x32_unshare(libc::CLONE_NEWUSER).step("unshare(x32)"))),
    ("x32-udp", |o| arch(o).and_then(|_| abi::x32_udp4(o.num(0)?).step("sendto(x32)"))),
    ("shmget", |o| ipc_create(o, Ipc::Shm)),
    ("msgget", |o| ipc_create(o, Ipc::Msg)),
    ("semget", |o| ipc_create(o, Ipc::Sem)),
    ("shm-read", shm_read),
    ("mq-open", |o| {
        kernel::mq_open(&o.cstr(0)?, libc::O_CREAT | libc::O_EXCL | libc::O_RDWR).step("mq_open").map(drop)
    }),
    ("fds", fds),
    ("fd-write", fd_write),
    ("environ", |o| {
        let all: Vec<String> =
            std::env::vars_os().map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy())).collect();
        o.note(all.join("\n"));
        Ok(())
    }),
    ("tmpdir", tmpdir),
    ("forge", forge),
    ("raise", |o| {
        let _ = io::stdout().flush();
        raw::proc::kill(std::process::id() as i32, o.num(0)?).step("kill(self)")
    }),
];

/// `privileged`: ok when the process holds anything the sandbox should have taken:
/// an effective, permitted or ambient capability, or `no_new_privs` unset. The detail
/// lists the status lines.
fn privileged(o: &mut Op) -> Outcome {
    let status = std::fs::read_to_string("/proc/self/status").step("read(/proc/self/status)")?;
    let field = |k: &str| -> String {
        status.lines().find_map(|l| l.strip_prefix(k)).map(|v| v.trim().to_string()).unwrap_or_default()
    };
    let nonzero = |k: &str| u64::from_str_radix(&field(k), 16).map(|v| v != 0).unwrap_or(true);
    let held: Vec<&str> = ["CapEff:", "CapPrm:", "CapAmb:"].into_iter().filter(|k| nonzero(k)).collect();
    let nnp = field("NoNewPrivs:") == "1";
    o.note(format!(
        "CapEff={} CapPrm={} CapAmb={} CapBnd={} NoNewPrivs={} Seccomp={}",
        field("CapEff:"),
        field("CapPrm:"),
        field("CapAmb:"),
        field("CapBnd:"),
        field("NoNewPrivs:"),
        field("Seccomp:")
    ));
    if held.is_empty() && nnp {
        return Err(io::Error::from_raw_os_error(libc::EPERM)).step("no capability held and no_new_privs set");
    }
    Ok(())
}

fn userfaultfd_dev(o: &mut Op) -> Outcome {
    // The ioctl needs no write access: fall back to a read-only open.
    let f = match OpenOptions::new().read(true).write(true).open("/dev/userfaultfd") {
        Ok(f) => f,
        Err(e) => {
            o.note(format!("open(O_RDWR): {e}"));
            File::open("/dev/userfaultfd").step("open(/dev/userfaultfd)")?
        }
    };
    raw::userfaultfd_dev_new(f.as_fd()).step("ioctl(USERFAULTFD_IOC_NEW)").map(drop)
}

/// `add-key DESC [user|session] [PAYLOAD]`: a `user` key in the user keyring (or the
/// session one).
fn add_key(o: &mut Op) -> Outcome {
    let ring = if o.text_or(1, "user") == "session" { kernel::SESSION_KEYRING } else { kernel::USER_KEYRING };
    let payload = o.text_or(2, "cordon-probe").to_string();
    let id = kernel::add_key(&o.cstr(0)?, payload.as_bytes(), ring).step("add_key")?;
    o.note(format!("key={id}"));
    Ok(())
}

/// `key-read DESC`: finds a key in the user keyring and prints its payload.
fn key_read(o: &mut Op) -> Outcome {
    let id = kernel::key_search(kernel::USER_KEYRING, &o.cstr(0)?).step("keyctl(SEARCH)")?;
    let payload = kernel::key_read(id).step("keyctl(READ)")?;
    o.note(format!("payload={}", String::from_utf8_lossy(&payload)));
    Ok(())
}

/// After a privileged step (whose refusal is noted), writes argument `file_arg`.
fn then_write(o: &mut Op, r: io::Result<()>, what: &str, file_arg: usize) -> Outcome {
    if let Err(e) = r {
        o.note(format!("{what}: {e}"));
    }
    let mut f = OpenOptions::new().write(true).create(true).truncate(true).open(o.arg(file_arg)?).step("open")?;
    f.write_all(DEFAULT_DATA.as_bytes()).step("write")
}

/// `open-tree-write PATH FILE`: clone the mount at PATH, clear its read-only flag,
/// attach it over PATH, then write FILE.
fn open_tree_write(o: &mut Op) -> Outcome {
    let path = o.cstr(0)?;
    let r = kernel::open_tree_clone(&path).and_then(|t| {
        kernel::mount_clear_attr(t.as_fd(), 1 /* MOUNT_ATTR_RDONLY */)?;
        kernel::move_mount(t.as_fd(), &path)
    });
    then_write(o, r, "open_tree+move_mount", 1)
}

/// Namespace names (`user,net,mnt,pid,ipc,uts,cgroup,time`) as `CLONE_NEW*` flags.
fn ns_flags(names: &str) -> Result<i32, Fail> {
    let mut f = 0;
    for n in names.split(',') {
        f |= match n {
            "user" => libc::CLONE_NEWUSER,
            "net" => libc::CLONE_NEWNET,
            "mnt" | "ns" => libc::CLONE_NEWNS,
            "pid" => libc::CLONE_NEWPID,
            "ipc" => libc::CLONE_NEWIPC,
            "uts" => libc::CLONE_NEWUTS,
            "cgroup" => libc::CLONE_NEWCGROUP,
            "time" => 0x80, // CLONE_NEWTIME
            "" => 0,
            other => return Err(Fail::Usage(format!("unknown namespace {other:?}"))),
        };
    }
    Ok(f)
}

/// `clone|clone3 [NAMESPACES]`: a child in new namespaces (or none) that exits at once.
fn clone(o: &mut Op, three: bool) -> Outcome {
    let flags = ns_flags(o.text_or(0, ""))? as u32 as u64;
    let _ = io::stdout().flush();
    let st = if three { raw::proc::clone3_and_reap(flags) } else { raw::proc::clone_and_reap(flags) }
        .step(if three { "clone3" } else { "clone" })?;
    o.note(format!("child status={st}"));
    Ok(())
}

/// A terminal to attack: `-` for stdin, else a path (read-write, then read-only: the
/// ioctls need no write access).
fn tty(o: &mut Op) -> Result<OwnedFd, Fail> {
    if o.text(0)? == "-" {
        return std::io::stdin().as_fd().try_clone_to_owned().step("dup(stdin)");
    }
    let f = match OpenOptions::new().read(true).write(true).custom_flags_noctty().open(o.arg(0)?) {
        Ok(f) => f,
        Err(e) => {
            o.note(format!("open(O_RDWR): {e}"));
            OpenOptions::new().read(true).custom_flags_noctty().open(o.arg(0)?).step("open")?
        }
    };
    Ok(f.into())
}

trait NoCtty {
    fn custom_flags_noctty(&mut self) -> &mut Self;
}

impl NoCtty for OpenOptions {
    fn custom_flags_noctty(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NOCTTY)
    }
}

/// `tiocsti TTY [TEXT]`: become the terminal's session leader when possible (so that,
/// without a filter, even an unprivileged process could inject), then push TEXT.
fn tiocsti(o: &mut Op, high: bool) -> Outcome {
    let fd = tty(o)?;
    if let Err(e) = raw::setsid() {
        o.note(format!("setsid: {e}"));
    }
    match raw::tiocsctty(fd.as_fd()) {
        Ok(()) => o.note("ctty=yes"),
        Err(e) => o.note(format!("TIOCSCTTY: {e}")),
    }
    let text = o.text_or(1, "x").to_string();
    for b in text.bytes() {
        raw::tiocsti(fd.as_fd(), b, high).step("ioctl(TIOCSTI)")?;
    }
    o.note(format!("injected {} bytes", text.len()));
    Ok(())
}

fn tioclinux(o: &mut Op, high: bool) -> Outcome {
    let fd = tty(o)?;
    let s = raw::tioclinux_shiftstate(fd.as_fd(), high).step("ioctl(TIOCLINUX)")?;
    o.note(format!("shiftstate={s}"));
    Ok(())
}

fn arch(_o: &Op) -> Outcome {
    if abi::SUPPORTED {
        Ok(())
    } else {
        Err(Fail::Unsupported("x32/i386 entry points exist only on x86_64".into()))
    }
}

enum Ipc {
    Shm,
    Msg,
    Sem,
}

/// `shmget|msgget|semget KEY`: creates a SysV object (`IPC_CREAT | IPC_EXCL`).
fn ipc_create(o: &mut Op, kind: Ipc) -> Outcome {
    let key: i32 = o.num(0)?;
    let flags = libc::IPC_CREAT | libc::IPC_EXCL | 0o666;
    let id = match kind {
        Ipc::Shm => kernel::shm_get(key, 4096, flags),
        Ipc::Msg => kernel::msg_get(key, flags),
        Ipc::Sem => kernel::sem_get(key, flags),
    }
    .step("get(IPC_CREAT)")?;
    o.note(format!("id={id}"));
    Ok(())
}

/// `shm-read KEY`: attaches an existing segment and prints its start.
fn shm_read(o: &mut Op) -> Outcome {
    let id = kernel::shm_get(o.num(0)?, 0, 0).step("shmget")?;
    let data = kernel::shm_read(id, 256).step("shmat")?;
    let end = data.iter().position(|b| *b == 0).unwrap_or(data.len());
    o.note(String::from_utf8_lossy(&data[..end]));
    Ok(())
}

/// Lists open descriptors above 2 and what they name.
fn fds(o: &mut Op) -> Outcome {
    let mut seen = vec![];
    for e in std::fs::read_dir("/proc/self/fd").step("opendir(/proc/self/fd)")?.flatten() {
        let n: i32 = e.file_name().to_string_lossy().parse().unwrap_or(-1);
        if n > 2 {
            let target = std::fs::read_link(e.path()).map(|p| p.display().to_string()).unwrap_or_default();
            seen.push(format!("{n}={target}"));
        }
    }
    o.note(seen.join(","));
    Ok(())
}

/// `fd-write FD [DATA]`: writes to an inherited descriptor by its number.
fn fd_write(o: &mut Op) -> Outcome {
    let n: i32 = o.num(0)?;
    let data = o.text_or(1, DEFAULT_DATA).to_string();
    raw::write_fd_number(n, data.as_bytes()).step("write").map(drop)
}

/// `tmpdir`: creates and removes a file in `$TMPDIR`.
fn tmpdir(o: &mut Op) -> Outcome {
    let dir = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
    o.note(format!("TMPDIR={dir}"));
    let path = std::path::Path::new(&dir).join(format!("probe-{}", std::process::id()));
    std::fs::write(&path, DEFAULT_DATA).step("create")?;
    std::fs::remove_file(&path).step("unlink")?;
    Ok(())
}

/// `forge TEXT [stdout|stderr] [EXIT]`: prints TEXT (as a confined tool might print a
/// refusal it never met) and exits with EXIT after the report line.
fn forge(o: &mut Op) -> Outcome {
    let text = o.text(0)?.replace("\\n", "\n");
    if o.text_or(1, "stderr") == "stdout" {
        let _ = writeln!(io::stdout(), "{text}");
    } else {
        let _ = writeln!(io::stderr(), "{text}");
    }
    Ok(())
}
