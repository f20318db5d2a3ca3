//! What a child reads through descriptors: data in a sealed memfd (the seccomp
//! program as bytes, the environment, the helper's checks) and the terminals behind
//! our own stdio, which the command may reopen.

use std::os::fd::{OwnedFd, RawFd};
use std::path::PathBuf;

/// A new sealed, close-on-exec memfd holding `bytes`, positioned at offset 0: how
/// data reaches a child that reads it after `execve` (the seccomp program, the
/// command's environment, the stage helper's checks). The seals keep it from being
/// changed after the fact; the caller owns the fd and passes it like any other
/// (`Materialized::keep` holds it until the child has its copy).
pub fn sealed_memfd(bytes: &[u8]) -> std::io::Result<OwnedFd> {
    use nix::fcntl::{fcntl, FcntlArg, SealFlag};
    use nix::sys::memfd::{memfd_create, MFdFlags};
    use std::io::{Seek, SeekFrom, Write};
    let fd = memfd_create(c"cordon-bwrap-seccomp", MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING)
        .map_err(std::io::Error::from)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    file.seek(SeekFrom::Start(0))?;
    let seals = SealFlag::F_SEAL_WRITE | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_SEAL;
    fcntl(&file, FcntlArg::F_ADD_SEALS(seals)).map_err(std::io::Error::from)?;
    Ok(OwnedFd::from(file))
}

/// The bytes bubblewrap's `--seccomp FD` reads: the raw `struct sock_filter` array
/// in native byte order (`u16 code; u8 jt; u8 jf; u32 k`), 8 bytes per instruction.
pub fn program_bytes(program: &[libc::sock_filter]) -> Vec<u8> {
    let mut out = Vec::with_capacity(program.len() * 8);
    for insn in program {
        out.extend_from_slice(&insn.code.to_ne_bytes());
        out.push(insn.jt);
        out.push(insn.jf);
        out.extend_from_slice(&insn.k.to_ne_bytes());
    }
    out
}

/// The terminals behind our own stdio fds: the command may keep writing to them when
/// it reopens them (`> /dev/stderr`).
pub fn inherited_terminals(stdio: &[RawFd; 3]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    for fd in stdio {
        let Ok(own) = std::fs::metadata(format!("/proc/self/fd/{fd}")) else { continue };
        if !own.file_type().is_char_device() {
            continue;
        }
        let Ok(mut target) = std::fs::read_link(format!("/proc/self/fd/{fd}")) else { continue };
        if !target.starts_with("/dev/") {
            // Reopened through a private read-only mount (`exec::streams::handover`): the
            // link names that mount's root. The host's name of the same device, for a
            // pseudo-terminal (majors 136 to 143) or the controlling terminal.
            let (major, minor) = (libc::major(own.rdev()), libc::minor(own.rdev()));
            target = match major {
                136..=143 => PathBuf::from(format!("/dev/pts/{}", (major - 136) * 256 + minor)),
                5 if minor == 0 => PathBuf::from("/dev/tty"),
                _ => continue,
            };
        }
        let is_tty = target.starts_with("/dev/pts/") || target.starts_with("/dev/tty");
        let same = std::fs::metadata(&target).is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == own.rdev());
        if is_tty && same && !out.contains(&target) {
            out.push(target);
        }
    }
    out
}
