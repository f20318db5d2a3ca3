//! Spill files on the host's disk (issue 12, disk part), judged by what is on disk.
//!
//! - `yes` with `--spill-cap 1M` leaves at most 1 MiB on disk and says `spill_truncated`;
//! - a `--json` run whose stdout reader went away ends promptly (exit 141), leaves no
//!   process and no spill file; a live-mode run leaves no spill file;
//! - the startup sweep removes a stale spill (and per-run directory) whose writer is
//!   gone, and leaves a fresh one, one whose writer lives, foreign files, other
//!   directories and symlinks (and what they point to) alone.
//!
//! A failed spill (`spill_failed`) is covered in `executor.rs` here (a full tmpfs) and
//! the capture's unit tests. Each CLI case gets its own `TMPDIR`, so cordon's private
//! directory `$TMPDIR/cordon-<euid>` holds only this case's files. Time bounds only
//! catch hangs.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime};
use tempfile::TempDir;

/// A cordon invocation that takes longer than this is hung.
const HANG: Duration = Duration::from_secs(30);

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

fn temp_dir(tag: &str) -> TempDir {
    crate::common::temp_dir(&format!("spill-{tag}"))
}

/// cordon's private directory under `tmp`.
fn state_dir(tmp: &Path) -> PathBuf {
    tmp.join(format!("cordon-{}", euid()))
}

/// Spill files (`out-…`, `err-…`) in cordon's private directory under `tmp`.
fn spills(tmp: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(state_dir(tmp)) {
        Ok(rd) => rd
            .flatten()
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with("out-") || n.starts_with("err-")
            })
            .map(|e| e.path())
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn cordon(tmp: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(crate::common::cli::cordon_bin());
    cmd.args(args).env("TMPDIR", tmp).current_dir(tmp).stdin(Stdio::null()).stderr(Stdio::inherit());
    cmd
}

fn wait_bounded(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if start.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: cordon did not finish within {HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn marker() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("57.{:05}{:03}{:02}1", std::process::id() % 100_000, nanos % 1000, N.fetch_add(1, Ordering::Relaxed) % 100)
}

/// Live processes whose argv is exactly `sleep <marker>`.
fn sleepers(marker: &str) -> Vec<i32> {
    let want = format!("sleep\0{marker}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok().map(|p| (p, e.path())))
        .filter(|(_, p)| std::fs::read(p.join("cmdline")).is_ok_and(|c| c == want.as_bytes()))
        .filter(|(_, p)| {
            std::fs::read_to_string(p.join("stat"))
                .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, r)| !r.trim_start().starts_with('Z')))
        })
        .map(|(pid, _)| pid)
        .collect()
}

#[test]
fn spill_cap_bounds_the_file_and_says_truncated() {
    let tmp = temp_dir("cap");
    let mut child = cordon(
        tmp.path(),
        &["run", "--json", "--mode", "full-access", "--timeout", "3", "--spill-cap", "1M", "--", "yes"],
    )
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    wait_bounded(&mut child, "yes with --spill-cap 1M");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out:.300}"));
    let stdout = &v["stdout"];
    assert_eq!(stdout["truncated"], true, "{stdout:.300}");
    assert_eq!(stdout["spill_truncated"], true, "the capped spill must say so");
    assert_eq!(stdout["spill_failed"], false);
    let path = PathBuf::from(stdout["spill_path"].as_str().expect("the capped head is kept"));
    let files = spills(tmp.path());
    assert_eq!(files, vec![path.clone()], "exactly the reported spill file is on disk");
    let size = std::fs::metadata(&path).unwrap().len();
    assert_eq!(size, 1 << 20, "the spill holds exactly the cap");
    let head = std::fs::read(&path).unwrap();
    assert!(head.chunks(2).all(|c| c == b"y\n"), "the spill holds the stream's first bytes");
    let total: u64 = files.iter().map(|f| std::fs::metadata(f).unwrap().blocks() * 512).sum();
    assert!(total <= (1 << 20) + 64 * 1024, "on disk: {total} bytes");
}

#[test]
fn closed_stdout_stops_the_run_and_leaves_no_spill() {
    let tmp = temp_dir("closed");
    let m = marker();
    let script = format!("head -c 2000000 /dev/zero; sleep {m}");
    let mut child = cordon(tmp.path(), &["run", "--json", "--mode", "full-access", "-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The output is spilled and the command sleeps: then the reader goes away.
    let start = Instant::now();
    while sleepers(&m).is_empty() || spills(tmp.path()).is_empty() {
        assert!(start.elapsed() < HANG, "the run never spilled and slept");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(child.stdout.take());
    let status = wait_bounded(&mut child, "stdout closed mid-run");
    assert_eq!(status.code(), Some(141), "128 + SIGPIPE: the result could not be delivered");
    assert!(sleepers(&m).is_empty(), "the command outlived cordon");
    assert_eq!(spills(tmp.path()), Vec::<PathBuf>::new(), "the spill nobody can receive was left on disk");
}

#[test]
fn stdout_closed_before_the_run_leaves_nothing() {
    // `cordon run --json -- sleep 100 | head -c0`
    let tmp = temp_dir("closed0");
    let m = marker();
    let (r, w) = nix::unistd::pipe().unwrap();
    drop(r);
    let mut child = cordon(tmp.path(), &["run", "--json", "--mode", "full-access", "--", "sleep", &m])
        .stdout(Stdio::from(w))
        .spawn()
        .unwrap();
    let status = wait_bounded(&mut child, "stdout closed from the start");
    assert_eq!(status.code(), Some(141));
    assert!(sleepers(&m).is_empty(), "the command outlived cordon");
    assert_eq!(spills(tmp.path()), Vec::<PathBuf>::new());
}

#[test]
fn live_mode_leaves_no_spill() {
    let tmp = temp_dir("live");
    let mut child = cordon(
        tmp.path(),
        &[
            "run",
            "--mode",
            "full-access",
            "-c",
            "head -c 2000000 /dev/zero; printf '\\377'; head -c 300000 /dev/zero >&2",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    let status = wait_bounded(&mut child, "live mode");
    assert_eq!(status.code(), Some(0));
    assert_eq!(out.len(), 2_000_001, "live output passes straight through");
    assert_eq!(spills(tmp.path()), Vec::<PathBuf>::new(), "live mode spilled to disk");
}

/// Sets a file's modification time `age` in the past (not through symlinks).
fn age(path: &Path, age: Duration) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - age).unwrap();
}

#[test]
fn startup_sweep_removes_only_stale_spills_of_gone_writers() {
    let tmp = temp_dir("sweep");
    let dir = state_dir(tmp.path());
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    // A pid that is surely gone: a child that exited and was reaped.
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let me = std::process::id();
    let two_days = Duration::from_secs(2 * 24 * 3600);
    let mk = |name: &str, old: bool| {
        let p = dir.join(name);
        std::fs::write(&p, b"spilled bytes").unwrap();
        if old {
            age(&p, two_days);
        }
        p
    };
    let stale = mk(&format!("out-{dead}-1-abcdefABCDEF"), true);
    let stale_err = mk(&format!("err-{dead}-7-0123456789ab"), true);
    let fresh = mk(&format!("out-{dead}-2-abcdefABCDEF"), false);
    let live_writer = mk(&format!("out-{me}-3-abcdefABCDEF"), true);
    let foreign = mk("notes.txt", true);
    let foreign_shaped = mk(&format!("out-{dead}-4-abcdefABCDEF.keep"), true);
    let subdir = dir.join(format!("err-{dead}-5-abcdefABCDEF"));
    std::fs::create_dir(&subdir).unwrap();
    // A symlink with a spill's name, pointing at an old file outside the directory.
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, b"not cordon's").unwrap();
    age(&victim, two_days);
    let link = dir.join(format!("out-{dead}-6-abcdefABCDEF"));
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    // A per-run directory a killed cordon left, holding a symlink out of it: the
    // directory goes, the symlink's target stays.
    let run_dir = dir.join(format!("run-{dead}-8-0badf00d"));
    std::fs::create_dir_all(run_dir.join("tmp")).unwrap();
    let outside = tmp.path().join("outside-target");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("keep"), b"keep").unwrap();
    std::os::unix::fs::symlink(&outside, run_dir.join("tmp/escape")).unwrap();
    let dir_age = |p: &Path| {
        let f = std::fs::File::open(p).unwrap();
        f.set_modified(SystemTime::now() - two_days).unwrap();
    };
    dir_age(&run_dir);
    let fresh_run_dir = dir.join(format!("run-{dead}-9-0badf00d"));
    std::fs::create_dir(&fresh_run_dir).unwrap();
    // The held-writes storage of a killed cordon: an upper directory with a copy the
    // command made setuid, and overlayfs's work directory, left mode 0 (its owner
    // cannot open it without privilege).
    let held = dir.join(format!("held-{dead}-10-0badf00d"));
    std::fs::create_dir_all(held.join("r0-upper/deep/er")).unwrap();
    std::fs::write(held.join("r0-upper/deep/er/tool"), b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(held.join("r0-upper/deep/er/tool"), std::os::unix::fs::PermissionsExt::from_mode(0o4755))
        .unwrap();
    std::os::unix::fs::symlink(&outside, held.join("r0-upper/escape")).unwrap();
    std::fs::create_dir_all(held.join("r0-work/work")).unwrap();
    std::fs::set_permissions(held.join("r0-work/work"), std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    // A tree the command made deeper than a path can name and than cordon has
    // descriptors (a left storage made every later run whose writable root held it
    // fail): removed all the same.
    drop(deep_chain(&held.join("r0-upper"), 3000));
    dir_age(&held);

    // Starting cordon sweeps (any command; full-access needs no sandbox).
    let mut child = cordon(tmp.path(), &["run", "--mode", "full-access", "--", "true"]).spawn().unwrap();
    assert_eq!(wait_bounded(&mut child, "sweep").code(), Some(0));

    assert!(!stale.exists() && !stale_err.exists(), "the stale spills of a gone writer were not swept");
    assert!(!run_dir.exists(), "the stale per-run directory of a gone cordon was not swept");
    assert!(!held.exists(), "the held-writes storage of a gone cordon was not swept");
    assert_eq!(std::fs::read(outside.join("keep")).unwrap(), b"keep", "the sweep followed a symlink");
    assert!(fresh_run_dir.exists(), "the sweep removed a per-run directory younger than the retention");
    for (p, why) in [
        (&fresh, "a spill younger than the retention"),
        (&live_writer, "a spill whose writer still runs"),
        (&foreign, "a foreign file"),
        (&foreign_shaped, "a file not named exactly like a spill"),
        (&subdir, "a directory"),
        (&victim, "a symlink's target"),
    ] {
        assert!(p.exists(), "the sweep removed {why}: {}", p.display());
    }
    assert!(std::fs::symlink_metadata(&link).is_ok(), "the sweep removed a symlink");
    assert_eq!(std::fs::read(&victim).unwrap(), b"not cordon's");
}

/// Make `levels` nested directories `d/d/.../d` in `dir`, one at a time relative to
/// the last (the whole path is longer than `PATH_MAX`), with a file at the bottom; the
/// bottom directory's descriptor.
pub(crate) fn deep_chain(dir: &Path, levels: usize) -> std::os::fd::OwnedFd {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let open = |at: libc::c_int, name: &std::ffi::CStr| {
        // SAFETY: openat with a NUL-terminated name; the result is checked and owned.
        let fd = unsafe { libc::openat(at, name.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        assert!(fd >= 0, "openat: {}", std::io::Error::last_os_error());
        // SAFETY: a fresh descriptor nothing else owns.
        unsafe { OwnedFd::from_raw_fd(fd) }
    };
    let start = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    let mut cur = open(libc::AT_FDCWD, &start);
    for _ in 0..levels {
        // SAFETY: mkdirat relative to a directory descriptor we own.
        assert_eq!(unsafe { libc::mkdirat(cur.as_raw_fd(), c"d".as_ptr(), 0o755) }, 0, "mkdirat");
        cur = open(cur.as_raw_fd(), c"d");
    }
    // SAFETY: as above.
    let fd = unsafe {
        libc::openat(cur.as_raw_fd(), c"leaf".as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC, 0o644)
    };
    assert!(fd >= 0, "leaf");
    // SAFETY: a fresh descriptor nothing else owns.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    cur
}
