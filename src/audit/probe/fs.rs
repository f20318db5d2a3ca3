//! File operations: every way to write, create, remove, rename or link a file, and
//! to change its metadata, by path, through a descriptor, a handle or a magic link.

use super::{Op, OpFn, Outcome, Step, DEFAULT_DATA};
use cordon_stage::probe as raw;
use nix::fcntl::{AtFlags, OFlag, RenameFlags, AT_FDCWD};
use nix::sys::stat::{Mode, SFlag};
use nix::sys::time::TimeSpec;
use nix::unistd::{Gid, Uid};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::OpenOptionsExt;

pub(super) const OPS: &[(&str, OpFn)] = &[
    ("write", |o| open_write(o, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, true)),
    ("overwrite", |o| open_write(o, libc::O_WRONLY, true)),
    ("append", |o| open_write(o, libc::O_WRONLY | libc::O_APPEND, true)),
    ("create", |o| open_write(o, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, true)),
    ("open-trunc", |o| open_write(o, libc::O_WRONLY | libc::O_TRUNC, false)),
    ("open-w", |o| open_write(o, libc::O_WRONLY | libc::O_NONBLOCK, false)),
    ("open-w-write", |o| open_write(o, libc::O_WRONLY | libc::O_NONBLOCK, true)),
    ("read", read),
    ("ls", ls),
    ("truncate", |o| nix::unistd::truncate(o.arg(0)?, o.num(1)?).map_err(io::Error::from).step("truncate")),
    ("ftruncate", |o| {
        let f = opts(libc::O_WRONLY).open(o.arg(0)?).step("open")?;
        nix::unistd::ftruncate(f.as_fd(), o.num(1)?).map_err(io::Error::from).step("ftruncate")
    }),
    ("unlink", |o| std::fs::remove_file(o.arg(0)?).step("unlink")),
    ("mkdir", |o| std::fs::create_dir(o.arg(0)?).step("mkdir")),
    ("rmdir", |o| std::fs::remove_dir(o.arg(0)?).step("rmdir")),
    ("rename", |o| std::fs::rename(o.arg(0)?, o.arg(1)?).step("rename")),
    ("exchange", |o| rename2(o, RenameFlags::RENAME_EXCHANGE)),
    ("rename-noreplace", |o| rename2(o, RenameFlags::RENAME_NOREPLACE)),
    ("link", |o| std::fs::hard_link(o.arg(0)?, o.arg(1)?).step("link")),
    ("link-write", link_write),
    ("symlink", |o| std::os::unix::fs::symlink(o.arg(0)?, o.arg(1)?).step("symlink")),
    ("symlink-write", symlink_write),
    ("fdlink-write", fdlink_write),
    ("reopen-write", reopen_write),
    ("open-by-handle", open_by_handle),
    ("tmpfile-link", tmpfile_link),
    ("openat-write", openat_write),
    ("mknod", mknod),
    ("mkfifo", |o| {
        nix::unistd::mkfifo(o.arg(0)?, Mode::from_bits_truncate(0o644)).map_err(io::Error::from).step("mkfifo")
    }),
    ("chmod", |o| chmod(o, false)),
    ("fchmod", |o| chmod(o, true)),
    ("chown", |o| chown(o, false)),
    ("fchown", |o| chown(o, true)),
    ("utimes", |o| utimes(o, false)),
    ("futimes", |o| utimes(o, true)),
    ("setxattr", |o| raw::set_xattr(&o.cstr(0)?, &o.cstr(1)?, o.text(2)?.as_bytes(), true).step("lsetxattr")),
    ("fsetxattr", |o| {
        let f = opts(libc::O_RDONLY).open(o.arg(0)?).step("open(O_RDONLY)")?;
        raw::fset_xattr(f.as_fd(), &o.cstr(1)?, o.text(2)?.as_bytes()).step("fsetxattr")
    }),
    ("removexattr", |o| raw::remove_xattr(&o.cstr(0)?, &o.cstr(1)?).step("lremovexattr")),
];

/// OpenOptions with raw `open(2)` flags (read/write mode included) and mode 0644.
fn opts(flags: i32) -> OpenOptions {
    let mut o = OpenOptions::new();
    let acc = flags & libc::O_ACCMODE;
    o.read(acc == libc::O_RDONLY || acc == libc::O_RDWR);
    o.write(acc == libc::O_WRONLY || acc == libc::O_RDWR);
    if acc == libc::O_RDONLY && flags & (libc::O_CREAT | libc::O_TRUNC) != 0 {
        o.write(true);
    }
    o.custom_flags(flags & !libc::O_ACCMODE).mode(0o644);
    o
}

/// Writes all of `data` (the op's data argument) to `f`.
fn write_data(f: &mut File, data: &str) -> Outcome {
    f.write_all(data.as_bytes()).step("write")
}

/// `open(path, flags)` and, with `write`, the data (argument 2 or the default).
fn open_write(o: &mut Op, flags: i32, write: bool) -> Outcome {
    // O_CREAT needs a mode; OpenOptions's create flags are set through custom_flags.
    let mut f = opts(flags).open(o.arg(0)?).step("open")?;
    if write {
        let data = o.text_or(1, DEFAULT_DATA).to_string();
        write_data(&mut f, &data)?;
    }
    Ok(())
}

fn read(o: &mut Op) -> Outcome {
    let mut f = File::open(o.arg(0)?).step("open")?;
    let mut buf = vec![0u8; 16384];
    let n = f.read(&mut buf).step("read")?;
    o.note(String::from_utf8_lossy(&buf[..n]));
    Ok(())
}

fn ls(o: &mut Op) -> Outcome {
    let mut names: Vec<String> = std::fs::read_dir(o.arg(0)?)
        .step("opendir")?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    o.note(names.join(","));
    Ok(())
}

fn rename2(o: &mut Op, flags: RenameFlags) -> Outcome {
    nix::fcntl::renameat2(AT_FDCWD, o.arg(0)?, AT_FDCWD, o.arg(1)?, flags).map_err(io::Error::from).step("renameat2")
}

/// `link(SRC, DST)` (its refusal noted), then append to DST.
fn link_write(o: &mut Op) -> Outcome {
    if let Err(e) = std::fs::hard_link(o.arg(0)?, o.arg(1)?) {
        o.note(format!("link: {e}"));
    }
    let mut f = opts(libc::O_WRONLY | libc::O_APPEND).open(o.arg(1)?).step("open")?;
    let data = o.text_or(2, DEFAULT_DATA).to_string();
    write_data(&mut f, &data)
}

/// `symlink(TARGET, LINK)` (its refusal noted), then create/append through LINK.
fn symlink_write(o: &mut Op) -> Outcome {
    if let Err(e) = std::os::unix::fs::symlink(o.arg(0)?, o.arg(1)?) {
        o.note(format!("symlink: {e}"));
    }
    let mut f = opts(libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND).open(o.arg(1)?).step("open")?;
    let data = o.text_or(2, DEFAULT_DATA).to_string();
    write_data(&mut f, &data)
}

/// Links SRC (reached through an `O_PATH` fd) to DST with `AT_EMPTY_PATH`, then
/// through `/proc/self/fd`, then appends to DST.
fn fdlink_write(o: &mut Op) -> Outcome {
    let src = opts(libc::O_PATH).open(o.arg(0)?).step("open(O_PATH)")?;
    if let Err(e) = nix::unistd::linkat(src.as_fd(), "", AT_FDCWD, o.arg(1)?, AtFlags::AT_EMPTY_PATH) {
        o.note(format!("linkat(AT_EMPTY_PATH): {e}"));
        let proc = format!("/proc/self/fd/{}", src.as_raw_fd());
        if let Err(e) = nix::unistd::linkat(AT_FDCWD, proc.as_str(), AT_FDCWD, o.arg(1)?, AtFlags::AT_SYMLINK_FOLLOW) {
            o.note(format!("linkat(/proc/self/fd): {e}"));
        }
    }
    let mut f = opts(libc::O_WRONLY | libc::O_APPEND).open(o.arg(1)?).step("open")?;
    let data = o.text_or(2, DEFAULT_DATA).to_string();
    write_data(&mut f, &data)
}

/// Opens PATH read-only, then re-opens it for writing through `/proc/self/fd/N`.
fn reopen_write(o: &mut Op) -> Outcome {
    let f = File::open(o.arg(0)?).step("open(O_RDONLY)")?;
    let proc = format!("/proc/self/fd/{}", f.as_raw_fd());
    let mut w = opts(libc::O_WRONLY | libc::O_APPEND).open(proc).step("open(/proc/self/fd, O_WRONLY)")?;
    let data = o.text_or(1, DEFAULT_DATA).to_string();
    write_data(&mut w, &data)
}

/// `name_to_handle_at` + `open_by_handle_at(O_WRONLY)`: by inode, not by path.
fn open_by_handle(o: &mut Op) -> Outcome {
    let fd = raw::open_by_handle(&o.cstr(0)?, libc::O_WRONLY | libc::O_APPEND).step("open_by_handle_at")?;
    let mut f = File::from(fd);
    let data = o.text_or(1, DEFAULT_DATA).to_string();
    write_data(&mut f, &data)
}

/// `open(DIR, O_TMPFILE)`, write, then link it in as DEST (by `AT_EMPTY_PATH`, then
/// through `/proc/self/fd`).
fn tmpfile_link(o: &mut Op) -> Outcome {
    let mut f = opts(libc::O_WRONLY | libc::O_TMPFILE).open(o.arg(0)?).step("open(O_TMPFILE)")?;
    write_data(&mut f, DEFAULT_DATA)?;
    match nix::unistd::linkat(f.as_fd(), "", AT_FDCWD, o.arg(1)?, AtFlags::AT_EMPTY_PATH) {
        Ok(()) => {
            o.note("linked via AT_EMPTY_PATH");
            return Ok(());
        }
        Err(e) => o.note(format!("linkat(AT_EMPTY_PATH): {e}")),
    }
    let proc = format!("/proc/self/fd/{}", f.as_raw_fd());
    nix::unistd::linkat(AT_FDCWD, proc.as_str(), AT_FDCWD, o.arg(1)?, AtFlags::AT_SYMLINK_FOLLOW)
        .map_err(io::Error::from)
        .step("linkat(/proc/self/fd)")?;
    o.note("linked via /proc/self/fd");
    Ok(())
}

/// `open(DIR, O_PATH | O_DIRECTORY)` then `openat(dirfd, NAME, O_WRONLY | O_CREAT)`.
fn openat_write(o: &mut Op) -> Outcome {
    let dir = nix::fcntl::open(o.arg(0)?, OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(io::Error::from)
        .step("open(O_PATH)")?;
    let fd = nix::fcntl::openat(
        dir.as_fd(),
        o.arg(1)?,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_TRUNC | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o644),
    )
    .map_err(io::Error::from)
    .step("openat")?;
    let mut f = File::from(fd);
    let data = o.text_or(2, DEFAULT_DATA).to_string();
    write_data(&mut f, &data)
}

/// `mknod(PATH, S_IFCHR | 0666, makedev(MAJOR, MINOR))`.
fn mknod(o: &mut Op) -> Outcome {
    let dev = libc::makedev(o.num(1)?, o.num(2)?);
    nix::sys::stat::mknod(o.arg(0)?, SFlag::S_IFCHR, Mode::from_bits_truncate(0o666), dev)
        .map_err(io::Error::from)
        .step("mknod(S_IFCHR)")
}

fn chmod(o: &mut Op, through_fd: bool) -> Outcome {
    let mode: u32 = o.num(1)?;
    if through_fd {
        let f = File::open(o.arg(0)?).step("open(O_RDONLY)")?;
        return nix::sys::stat::fchmod(f.as_fd(), Mode::from_bits_truncate(mode))
            .map_err(io::Error::from)
            .step("fchmod");
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(o.arg(0)?, std::fs::Permissions::from_mode(mode)).step("chmod")
}

fn chown(o: &mut Op, through_fd: bool) -> Outcome {
    let (uid, gid): (u32, u32) = (o.num(1)?, o.num(2)?);
    if through_fd {
        let f = File::open(o.arg(0)?).step("open(O_RDONLY)")?;
        return nix::unistd::fchown(f.as_fd(), Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))
            .map_err(io::Error::from)
            .step("fchown");
    }
    std::os::unix::fs::lchown(o.arg(0)?, Some(uid), Some(gid)).step("lchown")
}

/// Sets both times to 2001-09-09 (1e9 s): by path (`utimensat`, no follow) or through
/// a read-only descriptor (`futimens`).
fn utimes(o: &mut Op, through_fd: bool) -> Outcome {
    let t = TimeSpec::new(1_000_000_000, 0);
    if through_fd {
        let f = File::open(o.arg(0)?).step("open(O_RDONLY)")?;
        return nix::sys::stat::futimens(f.as_fd(), &t, &t).map_err(io::Error::from).step("futimens");
    }
    nix::sys::stat::utimensat(AT_FDCWD, o.arg(0)?, &t, &t, nix::sys::stat::UtimensatFlags::NoFollowSymlink)
        .map_err(io::Error::from)
        .step("utimensat")
}
