//! The kernel's other doors: namespaces and the mount API, keyrings, terminals,
//! tunables and cgroups, privilege gain, and the other system-call entry points.
//!
//! Several operations here have no effect outside by themselves (creating a
//! namespace, a BPF map, an io_uring): those are judged by the probe's own answer
//! ([`Worked`]), and their host control shows the operation works unconfined.
//! Where a gained privilege would show outside, the probe follows through (a
//! remount followed by a write outside) and the write is what is judged.

use super::{p, root_only, s, Class, Plan, Probe};
use crate::audit::exec::RunOutput;
use crate::audit::fixture::{skip, Fixture, Skip};
use crate::audit::watch::{Appears, Check, Output, Sentinel, Worked};
use std::path::{Path, PathBuf};

/// The mount point the host resolves `path` through (longest `/proc/self/mountinfo`
/// prefix): the mount a remount attack inside would aim at.
fn mount_point_of(path: &Path) -> String {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let p = s(path);
    info.lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .filter(|mp| p == *mp || p.starts_with(&format!("{}/", mp.trim_end_matches('/'))) || *mp == "/")
        .max_by_key(|mp| mp.len())
        .unwrap_or("/")
        .to_string()
}

/// A mount attack followed by a write of `outside/new`: the write is judged; the host
/// control is the write alone (the mount call itself could change the host).
fn mount_then_write(fx: &Fixture, op: &str, first: &[&str]) -> Result<Plan, Skip> {
    let f = fx.outside.join("new");
    let mut args: Vec<String> = first.iter().map(|a| a.to_string()).collect();
    args.push(s(&f));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Ok(Plan::op(fx, op, &args).watch(Appears::new(&f)).control_op(fx, "write", &[&s(&f)]).dangerous())
}

/// `unshare NAMESPACES`, judged by its own answer.
fn unshare(fx: &Fixture, ns: &str) -> Result<Plan, Skip> {
    Ok(Plan::op(fx, "unshare", &[ns]).watch(Worked))
}

/// A host terminal the command is given by path or as stdin, and an injection.
fn tty_attack(fx: &Fixture, op: &str, as_stdin: bool) -> Result<Plan, Skip> {
    let pty = fx.pty()?;
    let path = s(&pty.path);
    let mut plan = Plan::op(fx, op, &[if as_stdin { "-" } else { &path }, "id\n"]);
    if as_stdin {
        let fd = pty.slave.try_clone().map_err(|e| Skip(format!("dup the terminal: {e}")))?;
        plan.stdin = Some(fd);
    }
    Ok(plan.watch(pty))
}

/// The request reached the terminal layer (the kernel's own `ENOTTY` for `/dev/null`)
/// instead of being refused by a filter.
fn reached_tty(r: &RunOutput) -> Option<String> {
    let l = r.line.as_ref()?;
    (l.errname == "ENOTTY" || l.ok).then(|| format!("{} reached the terminal layer ({})", l.op, l.errname))
}

/// The host's domain name, watched and restored (jobs touching it hold the `uts` lock).
/// A cleanup restores the name the host had before the audit's first such probe, never
/// the one read by its own setup: a job's first setup runs before it takes the lock,
/// while another job may hold the name changed, and restoring that would leave the
/// host renamed.
fn domainname_watch() -> impl crate::audit::watch::Watch {
    const F: &str = "/proc/sys/kernel/domainname";
    static ORIGINAL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let read = || std::fs::read_to_string(F).unwrap_or_default();
    let original = ORIGINAL.get_or_init(read);
    let before = read();
    Check {
        effect: move |_: &RunOutput| {
            let now = read();
            (now != before).then(|| format!("the host's domain name changed to {:?}", now.trim()))
        },
        cleanup: move || {
            if read() != *original {
                let _ = cordon_stage::probe::kernel::set_domainname(original.trim_end().as_bytes());
            }
        },
    }
}

/// A file in the workspace owned by another uid (65534), mode 0600: only a process
/// holding capabilities (or that uid) could change it.
fn foreign_file(fx: &Fixture) -> (PathBuf, Sentinel) {
    let f = fx.file(&fx.ws.join("foreign"), "owned by someone else\n");
    let _ = std::os::unix::fs::chown(&f, Some(65534), Some(65534));
    let _ = std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o600));
    let w = Sentinel::record(&f);
    (f, w)
}

pub(super) fn probes() -> Vec<Probe> {
    use Class::{Abi as A, Kernel as K, Keyrings as Y, Namespaces as N, Privilege as V, Terminal as T};
    vec![
        // ------------------------------------------------------------ namespaces
        p(N, "user", "unshare(CLONE_NEWUSER); proves no user namespace (a door to root-only kernel code) can be made", |fx| unshare(fx, "user")),
        p(N, "user-mnt", "unshare(user+mount); proves no private mount table can be made", |fx| unshare(fx, "user,mnt")),
        p(N, "user-net", "unshare(user+net); proves no network namespace can be made", |fx| unshare(fx, "user,net")),
        p(N, "user-pid", "unshare(user+pid); proves no pid namespace can be made", |fx| unshare(fx, "user,pid")),
        p(N, "user-ipc", "unshare(user+ipc); proves no IPC namespace can be made", |fx| unshare(fx, "user,ipc")),
        p(N, "user-uts", "unshare(user+uts); proves no UTS namespace can be made", |fx| unshare(fx, "user,uts")),
        p(N, "user-cgroup", "unshare(user+cgroup); proves no cgroup namespace can be made", |fx| unshare(fx, "user,cgroup")),
        p(N, "user-time", "unshare(user+time); proves no time namespace can be made", |fx| unshare(fx, "user,time")),
        p(N, "clone-user", "clone(CLONE_NEWUSER); proves the clone path is filtered like unshare", |fx| {
            Ok(Plan::op(fx, "clone", &["user"]).watch(Worked))
        }),
        p(N, "clone3-user", "clone3 with CLONE_NEWUSER (flags in memory a filter cannot read); proves clone3 is closed", |fx| {
            Ok(Plan::op(fx, "clone3", &["user"]).watch(Worked))
        }),
        p(N, "setns-net", "setns into the network namespace of a process outside; proves namespaces cannot be joined", |fx| {
            let v = fx.victim()?;
            Ok(Plan::op(fx, "setns", &[&format!("/proc/{}/ns/net", v.pid)]).watch(Worked).watch(v))
        }),
        p(N, "setns-mnt", "setns into the mount namespace of a process outside; proves the host's mount table cannot be joined", |fx| {
            let v = fx.victim()?;
            Ok(Plan::op(fx, "setns", &[&format!("/proc/{}/ns/mnt", v.pid)]).watch(Worked).watch(v))
        }),
        p(N, "mount-tmpfs", "mount a tmpfs in the workspace; proves the mount call is refused", |fx| {
            root_only(fx, "mounting needs CAP_SYS_ADMIN on the host")?;
            let d = fx.dir(&fx.ws.join("mnt"));
            let dc = std::ffi::CString::new(s(&d)).map_err(|_| Skip("path".into()))?;
            Ok(Plan::op(fx, "mount-tmpfs", &[&s(&d)]).watch(Worked).dangerous().on_cleanup(move || {
                let _ = cordon_stage::probe::kernel::umount(&dc, libc::MNT_DETACH);
            }))
        }),
        p(N, "remount-rw", "remount the mount holding a directory outside read-write, then write there; proves the read-only view cannot be undone", |fx| {
            let mp = mount_point_of(&fx.outside);
            mount_then_write(fx, "remount-write", &[&mp])
        }),
        p(N, "umount", "unmount the mount holding a directory outside, then write there; proves the view cannot be peeled off", |fx| {
            let mp = mount_point_of(&fx.outside);
            mount_then_write(fx, "umount-write", &[&mp])
        }),
        p(N, "bind", "bind-mount a directory outside onto the workspace, then write through it; proves bind mounts are refused", |fx| {
            let d = fx.dir(&fx.ws.join("mnt"));
            let f = d.join("new");
            let out = fx.outside.join("new");
            let dc = std::ffi::CString::new(s(&d)).map_err(|_| Skip("path".into()))?;
            Ok(Plan::op(fx, "bind-write", &[&s(&fx.outside), &s(&d), &s(&f)])
                .watch(Appears::new(&out))
                .control_op(fx, "write", &[&s(&out)])
                .dangerous()
                .on_cleanup(move || {
                    let _ = cordon_stage::probe::kernel::umount(&dc, libc::MNT_DETACH);
                }))
        }),
        p(N, "open-tree", "open_tree a clone of the mount holding a directory outside, clear its read-only flag, move_mount it back, write; proves the new mount API is closed", |fx| {
            let mp = mount_point_of(&fx.outside);
            mount_then_write(fx, "open-tree-write", &[&mp])
        }),
        p(N, "unshare-remount", "unshare user+mount, remount the view read-write, then write outside; proves a private mount table unlocks nothing", |fx| {
            let mp = mount_point_of(&fx.outside);
            let f = fx.outside.join("new");
            Ok(Plan::op(fx, "unshare-remount-write", &["user,mnt", &mp, &s(&f)]).watch(Appears::new(&f)))
        }),
        p(N, "fsopen", "fsopen(\"tmpfs\") of the new mount API; proves file system contexts cannot be made", |fx| {
            Ok(Plan::op(fx, "fsopen", &[]).watch(Worked))
        }),
        p(N, "chroot", "chroot(2) into the workspace; proves the root cannot be changed (a step of many escapes)", |fx| {
            Ok(Plan::op(fx, "chroot", &[&s(&fx.ws)]).watch(Worked))
        }),
        // ------------------------------------------------------------ keyrings
        p(Y, "add-user-key", "add a key to the user keyring shared with the host; proves nothing can be stored in it", |fx| {
            let desc = format!("{}-key", fx.tag);
            let hp = fx.host_probe();
            let d2 = desc.clone();
            let hp2 = hp.clone();
            let check = Check {
                effect: move |_: &RunOutput| {
                    let l = hp.run("key-read", &[&desc])?;
                    l.ok.then(|| "a key appeared in the user's keyring".to_string())
                },
                cleanup: move || {
                    let _ = hp2.run("key-purge", &[&d2]);
                },
            };
            Ok(Plan::op(fx, "add-key", &[&format!("{}-key", fx.tag), "user"]).watch(check).lock("keyring"))
        }),
        p(Y, "read-user-key", "read a secret key the user holds in its keyring; proves keyring secrets stay unread", |fx| {
            let desc = format!("{}-secret", fx.tag);
            let secret = format!("keyring-secret-{}", fx.tag);
            let hp = fx.host_probe();
            let added = hp.run("add-key", &[&desc, "user", &secret]);
            if !added.is_some_and(|l| l.ok) {
                return skip("cannot add a key to the user keyring on this host");
            }
            let d2 = desc.clone();
            Ok(Plan::op(fx, "key-read", &[&desc])
                .watch(Output::contains(&secret, "the keyring secret"))
                .lock("keyring")
                .on_cleanup(move || {
                    let _ = hp.run("key-purge", &[&d2]);
                }))
        }),
        p(Y, "session-key", "add a key to the session keyring; proves the keyring system calls are closed", |fx| {
            Ok(Plan::op(fx, "add-key", &[&format!("{}-s", fx.tag), "session"]).watch(Worked))
        }),
        p(Y, "join-session", "join a named session keyring; proves keyrings cannot be joined", |fx| {
            Ok(Plan::op(fx, "key-join", &[&format!("{}-ring", fx.tag)]).watch(Worked))
        }),
        // ------------------------------------------------------------ terminal
        p(T, "tiocsti-path", "TIOCSTI into a host terminal opened by path; proves keystrokes cannot be injected", |fx| tty_attack(fx, "tiocsti", false)),
        p(T, "tiocsti-hi-path", "TIOCSTI with high bits set in the request number; proves the filter reads only the low 32 bits as the kernel does", |fx| {
            tty_attack(fx, "tiocsti-hi", false)
        }),
        p(T, "tiocsti-stdin", "TIOCSTI into the terminal given as standard input; proves the caller's terminal is safe", |fx| tty_attack(fx, "tiocsti", true)),
        p(T, "tiocsti-hi-stdin", "TIOCSTI (high bits) into the terminal given as stdin; proves the variant is closed there too", |fx| {
            tty_attack(fx, "tiocsti-hi", true)
        }),
        p(T, "tioclinux", "TIOCLINUX on /dev/null; proves the request is refused before any terminal code sees it", |fx| {
            Ok(Plan::op(fx, "tioclinux", &["/dev/null"]).watch(Check { effect: reached_tty, cleanup: || {} }))
        }),
        p(T, "tioclinux-hi", "TIOCLINUX with high bits on /dev/null; proves the variant is refused too", |fx| {
            Ok(Plan::op(fx, "tioclinux-hi", &["/dev/null"]).watch(Check { effect: reached_tty, cleanup: || {} }))
        }),
        // ------------------------------------------------------------ kernel
        p(K, "setdomainname", "setdomainname(2); proves the host's names cannot be changed", |fx| {
            root_only(fx, "changing the domain name needs CAP_SYS_ADMIN")?;
            Ok(Plan::op(fx, "setdomainname", &[&fx.tag]).watch(domainname_watch()).lock("uts"))
        }),
        p(K, "proc-sys-write", "write /proc/sys/kernel/domainname; proves kernel tunables are read-only", |fx| {
            root_only(fx, "writing /proc/sys needs root")?;
            Ok(Plan::op(fx, "write-file", &["/proc/sys/kernel/domainname", &fx.tag]).watch(domainname_watch()).lock("uts"))
        }),
        p(K, "proc-sys-same-value", "write /proc/sys/vm/swappiness's own value back; proves /proc/sys is read-only whatever is written", |fx| {
            root_only(fx, "writing /proc/sys needs root")?;
            let v = std::fs::read_to_string("/proc/sys/vm/swappiness").map_err(|e| Skip(format!("read swappiness: {e}")))?;
            Ok(Plan::op(fx, "write-file", &["/proc/sys/vm/swappiness", v.trim()]).watch(Worked))
        }),
        p(K, "cgroup-escape", "move itself to the root of the host's cgroup tree; proves the run's cgroups cannot be left", |fx| {
            root_only(fx, "moving between cgroups needs root on the host")?;
            let procs = ["/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/pids/cgroup.procs", "/sys/fs/cgroup/memory/cgroup.procs"]
                .into_iter()
                .find(|p| Path::new(p).exists())
                .ok_or_else(|| Skip("no cgroup.procs found".into()))?;
            Ok(Plan::op(fx, "write-file", &[procs, "0"]).watch(Worked))
        }),
        p(K, "oom-score", "raise then lower its own oom_score_adj; proves the command cannot make the OOM killer pick someone else", |_| {
            let mut plan = Plan::sh("echo 1000 > /proc/self/oom_score_adj && echo 0 > /proc/self/oom_score_adj && echo oom-score-lowered")
                .watch(Output::contains("oom-score-lowered", "a lowered OOM score"));
            plan.prints_line = false;
            Ok(plan)
        }),
        // ------------------------------------------------------------ privilege
        p(V, "capabilities", "read its own capability sets and no_new_privs; proves nothing is held and no privilege can be regained", |fx| {
            Ok(Plan::op(fx, "privileged", &[]).watch(Worked))
        }),
        p(V, "setuid-binary", "execute a setuid-root copy of the probe; proves setuid bits grant nothing", |fx| {
            let suid = fx.cordon_suid.clone().ok_or_else(|| Skip("no setuid copy: the audit is not root".into()))?;
            Ok(Plan::argv(vec![s(&suid), crate::audit::probe::SUBCOMMAND.into(), "privileged".into()]).watch(Worked).exec_refusal_holds())
        }),
        p(V, "setuid-write", "a setuid-root copy writes a root-owned file in the workspace; proves setuid cannot beat file permissions", |fx| {
            if fx.id.is_root() {
                return skip("the identity is root: the file's permissions do not stop it anyway");
            }
            let suid = fx.cordon_suid.clone().ok_or_else(|| Skip("no setuid copy: the audit is not root".into()))?;
            let f = fx.file(&fx.ws.join("root-owned"), "root's file\n");
            let _ = std::os::unix::fs::chown(&f, Some(0), Some(0));
            let w = Sentinel::record(&f);
            Ok(Plan::argv(vec![s(&suid), crate::audit::probe::SUBCOMMAND.into(), "overwrite".into(), s(&f), "pwned\n".into()])
                .watch(w)
                .exec_refusal_holds())
        }),
        p(V, "file-capabilities", "execute a copy carrying cap_dac_override in its file capabilities; proves file capabilities grant nothing", |fx| {
            let copy = fx.cordon_fcaps.clone().ok_or_else(|| Skip("no file-capability copy: the audit is not root".into()))?;
            Ok(Plan::argv(vec![s(&copy), crate::audit::probe::SUBCOMMAND.into(), "privileged".into()]).watch(Worked).exec_refusal_holds())
        }),
        p(V, "dac-override", "as root, overwrite a 0600 file of another user in the workspace; proves CAP_DAC_OVERRIDE is gone", |fx| {
            root_only(fx, "only root holds CAP_DAC_OVERRIDE")?;
            let (f, w) = foreign_file(fx);
            Ok(Plan::op(fx, "overwrite", &[&s(&f), "pwned\n"]).watch(w))
        }),
        p(V, "chown", "as root, give a workspace file to another user; proves CAP_CHOWN is gone", |fx| {
            root_only(fx, "only root holds CAP_CHOWN")?;
            let f = fx.file(&fx.ws.join("mine"), "mine\n");
            let w = Sentinel::record(&f);
            Ok(Plan::op(fx, "chown", &[&s(&f), "12345", "12345"]).watch(w))
        }),
        p(V, "fowner", "as root, chmod a file of another user in the workspace; proves CAP_FOWNER is gone", |fx| {
            root_only(fx, "only root holds CAP_FOWNER")?;
            let (f, w) = foreign_file(fx);
            Ok(Plan::op(fx, "chmod", &[&s(&f), "0666"]).watch(w))
        }),
        p(V, "setuid-call", "as root, setuid(65534) then write that user's 0600 file; proves CAP_SETUID is gone", |fx| {
            root_only(fx, "only root holds CAP_SETUID")?;
            let (f, w) = foreign_file(fx);
            Ok(Plan::op(fx, "setuid-write", &["65534", &s(&f)]).watch(w))
        }),
        p(V, "bpf", "bpf(BPF_MAP_CREATE); proves the BPF subsystem is out of reach", |fx| Ok(Plan::op(fx, "bpf", &[]).watch(Worked))),
        p(V, "perf", "perf_event_open on itself; proves performance events are out of reach", |fx| Ok(Plan::op(fx, "perf", &[]).watch(Worked))),
        p(V, "userfaultfd", "userfaultfd(2); proves the syscall behind many kernel exploits is closed", |fx| {
            Ok(Plan::op(fx, "userfaultfd", &[]).watch(Worked))
        }),
        p(V, "userfaultfd-dev", "USERFAULTFD_IOC_NEW on /dev/userfaultfd; proves the device route is closed too", |fx| {
            Ok(Plan::op(fx, "userfaultfd-dev", &[]).watch(Worked))
        }),
        // ------------------------------------------------------------ abi
        p(A, "io-uring", "io_uring_setup(2); proves io_uring (which bypasses syscall filters) is closed", |fx| {
            Ok(Plan::op(fx, "io-uring", &[]).watch(Worked))
        }),
        p(A, "i386-getpid", "getpid through int 0x80 (the i386 entry point); proves foreign entry points are closed", |fx| {
            Ok(Plan::op(fx, "i386-getpid", &[]).watch(Worked))
        }),
        p(A, "i386-unshare", "unshare(CLONE_NEWUSER) through int 0x80; proves filters cannot be sidestepped by the i386 numbers", |fx| {
            Ok(Plan::op(fx, "i386-unshare-user", &[]).watch(Worked))
        }),
        p(A, "i386-udp", "socket+sendto through int 0x80 to a loopback socket; proves the network is closed on that entry point", |fx| {
            let (port, w) = fx.udp(false)?;
            Ok(Plan::op(fx, "i386-udp", &[&port.to_string()]).watch_box(w))
        }),
        p(A, "i386-socketcall", "socketcall(2) SOCKET+SENDTO through int 0x80; proves the multiplexed socket call is closed", |fx| {
            let (port, w) = fx.udp(false)?;
            Ok(Plan::op(fx, "i386-udp-socketcall", &[&port.to_string()]).watch_box(w))
        }),
        p(A, "i386-tcp", "TCP connect through int 0x80 to a loopback listener; proves TCP is closed there too", |fx| {
            let (port, w) = fx.tcp(false)?;
            Ok(Plan::op(fx, "i386-tcp", &[&port.to_string()]).watch_box(w))
        }),
        p(A, "x32-getpid", "getpid with its x32 number (bit 30 set); proves the x32 entry point is closed", |fx| {
            Ok(Plan::op(fx, "x32-getpid", &[]).watch(Worked))
        }),
        p(A, "x32-udp", "socket+sendto with x32 numbers to a loopback socket; proves the network is closed there too", |fx| {
            let (port, w) = fx.udp(false)?;
            Ok(Plan::op(fx, "x32-udp", &[&port.to_string()]).watch_box(w))
        }),
    ]
}
