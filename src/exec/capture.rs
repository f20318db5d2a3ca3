//! Bounded output capture: keep the tail of a stream in memory, spill the complete
//! stream to a private file, and serve incremental reads.
//!
//! Memory per stream is bounded by twice the tail cap whatever the output size. The
//! spill file is created exclusively (`O_EXCL`, mode 0600) with a random name in a
//! private 0700 directory; its bytes are exactly the stream's first bytes (non-UTF-8
//! included), at most the spill cap ([`crate::request::DEFAULT_SPILL_CAP`] unless the
//! request asks for less): past it spilling stops, the file keeps the head and the
//! result says `spill_truncated` (the tail still ends the stream). A spill that fails
//! (an open, write or close error, `ENOSPC`) stops spilling, removes the file, withholds
//! the path and says `spill_failed`; the tail is still returned.
//!
//! Spill files are kept only when they hold something the tail does not (the tail was
//! truncated, or the bytes are not valid UTF-8); otherwise they are removed and
//! `spill_path` is null. A kept file belongs to whoever receives the result; the
//! executor removes it when nobody can ([`StreamCapture::discard`]).
//!
//! Retention: a kept spill file is the caller's to read and delete. At startup an
//! executor sweeps its private directory ([`sweep_stale_spills`]): a spill file whose
//! writer (the cordon process named in the file name) is gone and that was last
//! written more than [`SPILL_RETENTION`] ago is removed. Nothing else is touched: only
//! regular files (never a symlink, never followed) owned by this euid whose names have
//! exactly the spill shape `out-<pid>-<run>-<12 letters or digits>` (or `err-`), and
//! per-run directories a killed cordon left (`run-<pid>-<run>-<8 hex digits>`, and the
//! held-writes storage `held-<pid>-<run>-<8 hex digits>`: real directories of this
//! euid, by the same age and writer rule; removed without following symlinks, however
//! deep, and through the mode-0 work directories overlayfs leaves).
//!
//! What it does not do: it does not read pipes itself (the executor drains them).

use crate::result::CollectedOutput;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// How long a spill file whose writer is gone stays before a startup sweep removes it:
/// a day leaves a caller that received the path ample time to read it, and bounds
/// what runs nobody collected (a killed cordon, a lost result) keep on disk.
pub const SPILL_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);
/// Random characters at the end of a spill file name.
const SPILL_RAND_CHARS: usize = 12;

/// The pid of the cordon process that wrote a spill file named `name`, if the name has
/// exactly the shape cordon gives spill files: `out-<pid>-<run>-<12 alphanumerics>` or
/// `err-…`.
pub fn spill_writer_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("out-").or_else(|| name.strip_prefix("err-"))?;
    let mut parts = rest.split('-');
    let (pid, run, rand) = (parts.next()?, parts.next()?, parts.next()?);
    let digits = |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    if parts.next().is_some() || !digits(pid) || !digits(run) {
        return None;
    }
    if rand.len() != SPILL_RAND_CHARS || !rand.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    pid.parse().ok()
}

/// The pid of the cordon process that made a per-run directory named `name`, if the
/// name has exactly the shape the executor gives them: `run-<pid>-<run>-<8 hex digits>`
/// (or `held-`: a run's held-writes storage, see `crate::exec::Held`).
pub fn run_dir_writer_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("run-").or_else(|| name.strip_prefix("held-"))?;
    let mut parts = rest.split('-');
    let (pid, run, rand) = (parts.next()?, parts.next()?, parts.next()?);
    let digits = |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    if parts.next().is_some() || !digits(pid) || !digits(run) {
        return None;
    }
    if rand.len() != 8 || !rand.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    pid.parse().ok()
}

/// Remove the stale spill files in `dir` (cordon's private state directory for
/// `euid`): see the module docs for what counts. Per-run directories left by a cordon
/// that was killed (`run-<pid>-<run>-<hex>`, real directories of this euid, not
/// modified for the retention, their maker gone) go the same way, with their contents
/// (removed without following symlinks). `alive` says whether a pid still runs.
/// Returns what was removed.
pub fn sweep_stale_spills(
    dir: &Path,
    euid: u32,
    now: SystemTime,
    retention: Duration,
    alive: impl Fn(u32) -> bool,
) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return removed };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(text) = name.to_str() else { continue };
        let (pid, is_dir) = match (spill_writer_pid(text), run_dir_writer_pid(text)) {
            (Some(pid), _) => (pid, false),
            (None, Some(pid)) => (pid, true),
            (None, None) => continue,
        };
        // `DirEntry::metadata` does not follow symlinks.
        let Ok(meta) = entry.metadata() else { continue };
        let kind_ok = if is_dir { meta.file_type().is_dir() } else { meta.file_type().is_file() };
        if !kind_ok || meta.uid() != euid {
            continue;
        }
        let old = meta.modified().ok().and_then(|m| now.duration_since(m).ok()).is_some_and(|age| age > retention);
        if !old || alive(pid) {
            continue;
        }
        // unlink removes the name itself; it never follows a symlink. Nor does the
        // directory removal (it works relative to opened directories).
        let path = dir.join(&name);
        let gone = if is_dir { remove_private_dir(&path) } else { std::fs::remove_file(&path) };
        if gone.is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// Remove a directory of cordon's state directory with everything in it, without
/// following symlinks: on Linux also through unreadable directories (overlayfs's mode-0
/// work directory in a held-writes storage) and trees of any depth.
fn remove_private_dir(path: &Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    return crate::layer::apply::remove_storage(path);
    #[cfg(not(target_os = "linux"))]
    std::fs::remove_dir_all(path)
}

/// One stream's capture state.
#[derive(Debug)]
struct StreamState {
    cap: usize,
    spill_cap: u64,
    /// Bytes written to the spill file so far.
    spilled: u64,
    /// The spill cap was reached: the file holds only the stream's head.
    spill_truncated: bool,
    /// Opening, writing or closing the spill file failed (not: no spill directory).
    spill_error: bool,
    spill_dir: Option<PathBuf>,
    prefix: String,
    tail: Vec<u8>,
    total: u64,
    spill: Option<(File, PathBuf)>,
    spill_failed: bool,
    all_utf8: bool,
    pending_utf8: Vec<u8>,
    finished: Option<CollectedOutput>,
}

/// A shared, bounded capture of one stream.
#[derive(Debug, Clone)]
pub struct StreamCapture {
    inner: Arc<Mutex<StreamState>>,
}

/// New bytes since the last incremental read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Increment {
    /// The new bytes still held in memory.
    pub bytes: Vec<u8>,
    /// Some unread bytes were dropped from memory before this read (see the spill file).
    pub lossy: bool,
}

impl StreamCapture {
    /// A capture keeping at most `cap` bytes of tail, spilling at most `spill_cap`
    /// bytes into a new file in `spill_dir` (when given) named with `prefix` and a
    /// random suffix. The file is created lazily, the first time the stream holds more
    /// than the tail can (or at the end, for output that is not valid UTF-8), so small
    /// outputs touch no disk. A `spill_cap` of 0 never creates a file.
    pub fn new(cap: usize, spill_cap: u64, spill_dir: Option<&Path>, prefix: &str) -> StreamCapture {
        StreamCapture {
            inner: Arc::new(Mutex::new(StreamState {
                cap,
                spill_cap,
                spilled: 0,
                spill_truncated: false,
                spill_error: false,
                spill_dir: spill_dir.map(Path::to_path_buf),
                prefix: prefix.to_string(),
                tail: Vec::new(),
                total: 0,
                spill: None,
                spill_failed: spill_dir.is_none(),
                all_utf8: true,
                pending_utf8: Vec::new(),
                finished: None,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StreamState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Append bytes read from the stream.
    pub fn push(&self, bytes: &[u8]) {
        let mut s = self.lock();
        if bytes.is_empty() || s.finished.is_some() {
            return;
        }
        if s.spill.is_none() && !s.spill_failed && !s.spill_truncated && s.total + bytes.len() as u64 > s.cap as u64 {
            // Everything so far is still in the tail: start the spill with it.
            open_spill(&mut s);
        }
        if s.spill.is_some() && !s.spill_truncated {
            write_spill(&mut s, bytes);
        }
        if s.all_utf8 {
            track_utf8(&mut s, bytes);
        }
        s.total += bytes.len() as u64;
        let cap = s.cap;
        if bytes.len() >= cap {
            s.tail.clear();
            s.tail.extend_from_slice(&bytes[bytes.len() - cap..]);
        } else {
            s.tail.extend_from_slice(bytes);
            if s.tail.len() > cap.saturating_mul(2).max(cap + 4096) {
                let excess = s.tail.len() - cap;
                s.tail.drain(..excess);
            }
        }
    }

    /// Total bytes seen so far.
    pub fn total(&self) -> u64 {
        self.lock().total
    }

    /// Bytes after absolute offset `*cursor`, advancing it.
    pub fn read_since(&self, cursor: &mut u64) -> Increment {
        let s = self.lock();
        let held = s.tail.len().min(s.cap) as u64;
        let start = s.total - held;
        let lossy = *cursor < start;
        let from = (*cursor).max(start);
        let offset = (s.tail.len() as u64 - (s.total - from)) as usize;
        let bytes = s.tail[offset..].to_vec();
        *cursor = s.total;
        Increment { bytes, lossy }
    }

    /// The spill file's path while spilling works (and, after the stream finished,
    /// the kept file's path).
    pub fn spill_path(&self) -> Option<PathBuf> {
        let s = self.lock();
        if let Some(done) = &s.finished {
            return done.spill_path.clone();
        }
        if s.spill_failed {
            None
        } else {
            s.spill.as_ref().map(|(_, p)| p.clone())
        }
    }

    /// Close the spill file and produce the collected output (idempotent).
    pub fn finish(&self) -> CollectedOutput {
        let mut s = self.lock();
        if let Some(done) = &s.finished {
            return done.clone();
        }
        if !s.pending_utf8.is_empty() {
            s.all_utf8 = false;
        }
        if !s.all_utf8 && s.spill.is_none() && !s.spill_failed && !s.spill_truncated {
            // Not valid UTF-8: the text is lossy, so keep the exact bytes in a file.
            open_spill(&mut s);
        }
        let held = s.tail.len().min(s.cap);
        let tail_start = s.tail.len() - held;
        let truncated = s.total > held as u64;
        let text = String::from_utf8_lossy(&s.tail[tail_start..]).into_owned();
        // Keep only what later incremental reads can still return: the last `cap` bytes.
        s.tail.drain(..tail_start);
        s.tail.shrink_to_fit();
        let needed = truncated || !s.all_utf8;
        let mut spill_path = None;
        if let Some((file, path)) = s.spill.take() {
            // A close error (e.g. delayed ENOSPC on some filesystems) withholds the path.
            if !close_file(file) {
                s.spill_error = true;
            }
            if needed && !s.spill_error {
                spill_path = Some(path);
            } else {
                let _ = std::fs::remove_file(&path);
            }
        }
        let spill_truncated = needed && s.spill_truncated && !s.spill_error;
        // The exact bytes were needed and no file (not even a capped one) has them.
        let spill_failed = needed && spill_path.is_none() && !spill_truncated;
        let out = CollectedOutput { text, truncated, spill_path, spill_truncated, spill_failed, undelivered: 0 };
        s.finished = Some(out.clone());
        out
    }

    /// Remove the kept spill file, if any: its path never reached anyone (a caller
    /// that disconnected, a closed stdout). Call after [`StreamCapture::finish`].
    pub fn discard(&self) {
        let mut s = self.lock();
        if let Some((_, path)) = s.spill.take() {
            let _ = std::fs::remove_file(path);
        }
        if let Some(done) = s.finished.as_mut() {
            if let Some(path) = done.spill_path.take() {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    /// Simulate a failed spill (tests): the path must be withheld.
    #[cfg(test)]
    fn fail_spill_for_tests(&self) {
        let mut s = self.lock();
        s.spill_failed = true;
        s.spill_error = true;
    }
}

/// Append to the spill file, at most up to the spill cap; a write error ends spilling.
fn write_spill(s: &mut StreamState, bytes: &[u8]) {
    let room = s.spill_cap.saturating_sub(s.spilled);
    let take = bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX));
    let Some((file, _)) = s.spill.as_mut() else { return };
    if file.write_all(&bytes[..take]).is_err() {
        s.spill_failed = true;
        s.spill_error = true;
        if let Some((_, path)) = s.spill.take() {
            let _ = std::fs::remove_file(path);
        }
        return;
    }
    s.spilled += take as u64;
    if take < bytes.len() {
        s.spill_truncated = true;
    }
}

/// Create the spill file and write the bytes held so far (the whole stream: this
/// runs before the tail first drops anything), up to the spill cap. A cap of 0 creates
/// nothing and counts as reached.
fn open_spill(s: &mut StreamState) {
    if s.spill_cap == 0 {
        s.spill_truncated = true;
        return;
    }
    let Some(dir) = s.spill_dir.clone() else {
        s.spill_failed = true;
        return;
    };
    let created = tempfile::Builder::new()
        .prefix(&s.prefix)
        .rand_bytes(SPILL_RAND_CHARS)
        .tempfile_in(&dir)
        .and_then(|f| f.keep().map_err(|e| e.error));
    match created {
        Ok((file, path)) => {
            s.spill = Some((file, path));
            let held = std::mem::take(&mut s.tail);
            write_spill(s, &held);
            s.tail = held;
        }
        Err(_) => {
            s.spill_failed = true;
            s.spill_error = true;
        }
    }
}

fn close_file(file: File) -> bool {
    use std::os::fd::IntoRawFd;
    let fd = file.into_raw_fd();
    nix::unistd::close(fd).is_ok()
}

/// Track whether the stream so far is valid UTF-8, across chunk boundaries.
fn track_utf8(s: &mut StreamState, bytes: &[u8]) {
    let mut buf = std::mem::take(&mut s.pending_utf8);
    buf.extend_from_slice(bytes);
    match std::str::from_utf8(&buf) {
        Ok(_) => {}
        Err(e) => {
            if e.error_len().is_some() || buf.len() - e.valid_up_to() > 3 {
                s.all_utf8 = false;
            } else {
                s.pending_utf8 = buf[e.valid_up_to()..].to_vec();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_is_the_last_cap_bytes_and_memory_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let c = StreamCapture::new(10, u64::MAX, Some(dir.path()), "out-");
        for i in 0..1000u32 {
            c.push(format!("{i:04}\n").as_bytes());
            assert!(c.lock().tail.len() <= 10 + 4096 + 5);
        }
        let out = c.finish();
        assert_eq!(out.text, "0998\n0999\n");
        assert!(out.truncated);
        let spilled = std::fs::read(out.spill_path.unwrap()).unwrap();
        assert_eq!(spilled.len(), 5000);
    }

    #[test]
    fn small_utf8_output_keeps_no_spill_file() {
        let dir = tempfile::tempdir().unwrap();
        let c = StreamCapture::new(100, u64::MAX, Some(dir.path()), "out-");
        c.push("héllo".as_bytes());
        let out = c.finish();
        assert_eq!(out.text, "héllo");
        assert!(!out.truncated);
        assert_eq!(out.spill_path, None);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn non_utf8_output_keeps_exact_bytes_in_the_spill() {
        let dir = tempfile::tempdir().unwrap();
        let c = StreamCapture::new(100, u64::MAX, Some(dir.path()), "out-");
        c.push(&[0xff, 0x00, b'a', 0xc3]);
        let out = c.finish();
        assert!(!out.truncated);
        assert_eq!(std::fs::read(out.spill_path.unwrap()).unwrap(), vec![0xff, 0x00, b'a', 0xc3]);
    }

    #[test]
    fn utf8_split_across_chunks_is_still_utf8() {
        let dir = tempfile::tempdir().unwrap();
        let c = StreamCapture::new(100, u64::MAX, Some(dir.path()), "out-");
        let e = "é".as_bytes();
        c.push(&e[..1]);
        c.push(&e[1..]);
        assert_eq!(c.finish().spill_path, None);
    }

    #[test]
    fn failed_spill_withholds_the_path_but_keeps_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let c = StreamCapture::new(4, u64::MAX, Some(dir.path()), "out-");
        c.push(b"abcdefgh");
        c.fail_spill_for_tests();
        let out = c.finish();
        assert_eq!(out.text, "efgh");
        assert!(out.truncated);
        assert_eq!(out.spill_path, None);
    }

    #[test]
    fn spill_on_a_full_device_withholds_the_path() {
        // /dev/full answers every write with ENOSPC.
        let c = StreamCapture::new(4, u64::MAX, None, "out-");
        {
            let f = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
            let mut s = c.lock();
            s.spill = Some((f, PathBuf::from("/dev/full-not-a-real-spill")));
            s.spill_failed = false;
        }
        c.push(b"abcdefgh");
        let out = c.finish();
        assert_eq!(out.spill_path, None);
        assert_eq!(out.text, "efgh");
    }

    #[test]
    fn spill_stops_at_its_cap_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let c = StreamCapture::new(4, 10, Some(dir.path()), "out-");
        c.push(b"0123");
        c.push(b"456789abcdef");
        c.push(b"ghij");
        let out = c.finish();
        assert_eq!(out.text, "ghij");
        assert!(out.truncated && out.spill_truncated && !out.spill_failed, "{out:?}");
        assert_eq!(std::fs::read(out.spill_path.unwrap()).unwrap(), b"0123456789".to_vec());
        // A cap smaller than the tail already held when the spill starts.
        let c = StreamCapture::new(8, 3, Some(dir.path()), "out-");
        c.push(b"abcdefghij");
        let out = c.finish();
        assert!(out.spill_truncated, "{out:?}");
        assert_eq!(std::fs::read(out.spill_path.unwrap()).unwrap(), b"abc".to_vec());
        // Cap 0: no file at all, and the result says the spill was cut.
        let empty = tempfile::tempdir().unwrap();
        let c = StreamCapture::new(2, 0, Some(empty.path()), "out-");
        c.push(b"abcdef");
        let out = c.finish();
        assert!(out.spill_truncated && !out.spill_failed && out.spill_path.is_none(), "{out:?}");
        assert_eq!(std::fs::read_dir(empty.path()).unwrap().count(), 0);
        // Exactly at the cap is not truncated.
        let c = StreamCapture::new(2, 6, Some(dir.path()), "out-");
        c.push(b"abcdef");
        let out = c.finish();
        assert!(out.truncated && !out.spill_truncated, "{out:?}");
    }

    #[test]
    fn failed_spill_is_flagged_and_discard_removes_a_kept_file() {
        let dir = tempfile::tempdir().unwrap();
        let c = StreamCapture::new(4, u64::MAX, Some(&dir.path().join("missing")), "out-");
        c.push(b"abcdefgh");
        let out = c.finish();
        assert!(out.spill_failed && !out.spill_truncated && out.spill_path.is_none(), "{out:?}");
        // Small UTF-8 output needs no spill: nothing failed.
        let c = StreamCapture::new(100, u64::MAX, Some(&dir.path().join("missing")), "out-");
        c.push(b"abc");
        assert!(!c.finish().spill_failed);
        let c = StreamCapture::new(4, u64::MAX, Some(dir.path()), "out-");
        c.push(b"abcdefgh");
        let path = c.finish().spill_path.unwrap();
        assert!(path.exists());
        c.discard();
        assert!(!path.exists());
        assert_eq!(c.finish().spill_path, None);
    }

    #[test]
    fn spill_names_are_recognised_exactly() {
        assert_eq!(spill_writer_pid("out-123-4-abcDEF012345"), Some(123));
        assert_eq!(spill_writer_pid("err-1-1-000000000000"), Some(1));
        for foreign in [
            "out-123-4-abcDEF01234",
            "out-123-4-abcDEF0123456",
            "out-12a-4-abcDEF012345",
            "out-123-abcDEF012345",
            "out-123-4-abcDEF012345-x",
            "run-123-4-abcdef01",
            "log-123-4-abcDEF012345",
            "out--4-abcDEF012345",
            "out-123-4-abc.EF012345",
        ] {
            assert_eq!(spill_writer_pid(foreign), None, "{foreign}");
        }
        assert_eq!(run_dir_writer_pid("run-42-3-0badf00d"), Some(42));
        assert_eq!(run_dir_writer_pid("held-42-3-0badf00d"), Some(42));
        for foreign in [
            "run-42-3-0badf00",
            "run-42-3-0badf00g",
            "run-42-0badf00d",
            "out-42-3-0badf00d",
            "run-42-3-0badf00d-x",
            "held-42-3-0badf0",
        ] {
            assert_eq!(run_dir_writer_pid(foreign), None, "{foreign}");
        }
    }

    #[test]
    fn incremental_reads_return_only_new_bytes_and_flag_losses() {
        let c = StreamCapture::new(4, u64::MAX, None, "out-");
        let mut cur = 0;
        c.push(b"ab");
        assert_eq!(c.read_since(&mut cur), Increment { bytes: b"ab".to_vec(), lossy: false });
        assert_eq!(c.read_since(&mut cur), Increment { bytes: vec![], lossy: false });
        c.push(b"cdefgh");
        let inc = c.read_since(&mut cur);
        assert_eq!(inc.bytes, b"efgh".to_vec());
        assert!(inc.lossy);
        c.push(b"ij");
        assert_eq!(c.read_since(&mut cur), Increment { bytes: b"ij".to_vec(), lossy: false });
    }
}
