//! Private layers: the host's `/tmp`, `/dev/shm` and the home's cache (and toolchain
//! homes) are readable inside every confined mode, while everything the command does
//! there stays in a private upper directory (overlayfs) and never reaches the host.
//!
//! Judged by effect on the host: a sentinel unchanged, a host FIFO reader and a host
//! unix listener that received nothing, no new file. Positive controls: the host's
//! files are read inside, and changes are seen inside the same run. Without overlayfs
//! (`CORDON_DISABLE_OVERLAY=1`) the same places are empty tmpfs mounts, and the result
//! names them (`sandbox.hidden`).

use super::*;

/// A host path under `/tmp` or `/dev/shm` (file, FIFO or socket), removed when dropped.
struct HostPath(PathBuf);
impl Drop for HostPath {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A fresh host path in `dir` (short: unix socket paths hold 108 bytes).
fn host_path(c: &Ctx, dir: &str, what: &str) -> HostPath {
    HostPath(PathBuf::from(format!("{dir}/cordon-l{}-{what}-{}", std::process::id(), c.unique())))
}

/// The `sandbox.hidden` list of a run.
fn hidden(out: &CordonOut) -> Vec<String> {
    out.j()["sandbox"]["hidden"].as_array().into_iter().flatten().filter_map(|v| v.as_str().map(String::from)).collect()
}

case!(layer_host_tmp_readable_changes_private, |c| {
    // A host file in /tmp is read inside; writing, truncating, renaming, removing,
    // linking and changing it are seen inside the same run and reach nothing on the host.
    for dir in ["/tmp", "/dev/shm"] {
        for mode in CONFINED {
            let f = host_path(c, dir, "f");
            let sent = c.sentinel(&f.0);
            let created = host_path(c, dir, "new");
            let script = format!(
                "f='{f}'; cat \"$f\" && ls -a {dir} | grep -c -- \"$(basename \"$f\")\" \
                 && echo private > \"$f\" && cat \"$f\" && chmod 600 \"$f\" && touch -d @1 \"$f\" \
                 && ln \"$f\" \"$f.hl\" && echo via-link >> \"$f.hl\" && cat \"$f\" \
                 && mv \"$f\" \"$f.moved\" && rm \"$f.moved\" && echo new > '{new}' && echo done",
                f = f.0.display(),
                new = created.0.display(),
            );
            let out = c.sh(&c.opts(mode), &script)?;
            let text = out.out();
            assert_eq!(out.exit_code(), Some(0), "{dir} {mode}: every change works inside: {out:?}");
            let lines: Vec<&str> = text.lines().collect();
            let host_line = format!("sentinel {}", f.0.display());
            assert_eq!(lines.first(), Some(&host_line.as_str()), "{dir} {mode}: host file read: {out:?}");
            assert_eq!(lines.get(1), Some(&"1"), "{dir} {mode}: host file listed: {out:?}");
            assert_eq!(lines.get(2), Some(&"private"), "{dir} {mode}: the change is seen inside: {out:?}");
            assert_eq!(lines.get(3), Some(&"private"), "{dir} {mode}: {out:?}");
            assert_eq!(lines.get(4), Some(&"via-link"), "{dir} {mode}: the hard link is the same file: {out:?}");
            assert_eq!(lines.last(), Some(&"done"), "{dir} {mode}: {out:?}");
            sent.assert_unchanged(&format!("{dir} {mode}: a change to a host file through the private layer"));
            for p in [PathBuf::from(format!("{}.hl", f.0.display())), created.0.clone()] {
                assert_absent(&p, &format!("{dir} {mode}: a file made inside reached the host"));
            }
            assert!(
                !file_write_denials(&out).iter().any(|(t, _)| t.starts_with(dir)),
                "{dir} {mode}: a change in the private layer was reported as a denial: {out:?}"
            );
            assert!(hidden(&out).is_empty(), "{dir} {mode}: {out:?}");
        }
    }
    // Each run starts from the host's files, never from an earlier run's changes.
    let f = host_path(c, "/tmp", "per-run");
    c.file(&f.0, "host\n");
    let first = c.sh(&c.opts(WORKSPACE_WRITE), &format!("echo first > '{}'", f.0.display()))?;
    assert_eq!(first.exit_code(), Some(0), "{first:?}");
    let second = c.sh(&c.opts(WORKSPACE_WRITE), &format!("cat '{}'", f.0.display()))?;
    assert_eq!(second.out().trim(), "host", "a second run saw the first run's change: {second:?}");
    // Without overlayfs: an empty tmpfs, and the result says what it hid.
    for mode in CONFINED {
        let out = c.sh(&without_overlay(c.opts(mode)), &format!("cat '{}'", f.0.display()))?;
        assert_ne!(out.exit_code(), Some(0), "{mode}: the host file was visible on a tmpfs: {out:?}");
        let h = hidden(&out);
        assert!(h.iter().any(|p| p == "/tmp") && h.iter().any(|p| p == "/dev/shm"), "{mode}: {h:?} in {out:?}");
    }
});

case!(layer_host_fifo_in_tmp_receives_nothing, |c| {
    // A FIFO seen through the private layer is the layer's own pipe: a host reader of
    // the host's FIFO receives nothing, whether the writer blocks or not; a reader and
    // a writer inside the run still talk through it.
    for dir in ["/tmp", "/dev/shm"] {
        for how in BOTH_AND_HOST {
            let path = host_path(c, dir, "fifo");
            let mut fifo = HostFifo::new(c, &path.0);
            c.chown_to_me(&path.0);
            let r = attempt(c, how, "append-nb", &[s(&fifo.path), "pwned"])?;
            if is_control(how, &r, "write into a host FIFO with a reader") {
                assert!(!fifo.received().is_empty(), "control: the host reader received nothing");
                continue;
            }
            r.assert_refused_with(&["ENXIO", "EACCES"], &format!("{dir} {how}: no reader on the layer's pipe"));
            // A blocking writer, and one with a reader of its own inside.
            let o = c.opts(how);
            let script = format!(
                "f='{f}'; (cat \"$f\" > \"$TMPDIR/got\" &) ; sleep 0.2; echo inside > \"$f\"; sleep 0.2; \
                 cat \"$TMPDIR/got\"; timeout 1 sh -c \"echo pwned > '$f'\"; true",
                f = fifo.path.display()
            );
            let out = c.sh(&o, &script)?;
            let got = fifo.received();
            assert!(
                got.is_empty(),
                "{dir} {how}: the host reader received {:?} from inside\n{out:?}",
                String::from_utf8_lossy(&got)
            );
            assert!(out.out().lines().any(|l| l == "inside"), "{dir} {how}: the FIFO works inside: {out:?}");
        }
    }
});

case!(layer_host_unix_socket_in_tmp_receives_nothing, |c| {
    // A host daemon's socket in /tmp: no connect() through the private layer reaches
    // it, with the network off or on (where unix sockets of the host are closed as
    // everywhere: `host-unix-sockets`).
    for how in BOTH_AND_HOST {
        for network in [false, true] {
            let path = host_path(c, "/tmp", "s");
            let trap = UnixTrap::stream_path(c, &path.0);
            let r = if how == HOST {
                c.host_probe("unix-connect", &[s(&path.0)])
            } else {
                let mut o = c.opts(how);
                o.network = network;
                c.probe_with(&o, "unix-connect", &[s(&path.0)])?
            };
            if is_control(how, &r, "connect to a host unix socket in /tmp") {
                assert!(trap.touched_within(500), "control: the listener saw nothing");
                break;
            }
            r.assert_refused_with(&["EACCES", "EPERM", "ECONNREFUSED"], &format!("{how} network={network}"));
            trap.assert_untouched(&format!("{how} network={network}: a host unix socket in /tmp"));
        }
    }
});

case!(layer_host_devices_in_tmp_unusable, |c| {
    // The private layers are nodev: a device node in the host's /tmp (planted by the
    // host's root) does not open as a device. A null-like node (c 1:3) and a kmsg-like
    // one (c 1:11); the probe only opens them for writing.
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Skip("creating device nodes on the host needs the suite to run as root".into()));
    }
    let mut nodes = Vec::new();
    for (name, minor) in [("null", "3"), ("kmsg", "11")] {
        let node = host_path(c, "/tmp", name);
        let st = std::process::Command::new("mknod").args(["-m", "0666"]).arg(&node.0).args(["c", "1", minor]).status();
        assert!(st.is_ok_and(|s| s.success()), "mknod {}", node.0.display());
        c.chown_to_me(&node.0);
        c.host_probe("open-w", &[s(&node.0)]).assert_ok("control: the node opens for writing on the host");
        nodes.push(node);
    }
    for mode in CONFINED {
        for node in &nodes {
            c.probe(mode, "open-w", &[s(&node.0)])?
                .assert_refused_with(&["EACCES", "EPERM"], &format!("open {} ({mode})", node.0.display()));
        }
    }
});

case!(layer_reads_no_wider_than_the_host, |c| {
    // overlayfs opens the host's files with the credentials of whoever mounted it
    // (cordon's stage, with every capability in its namespace); the command's own
    // permission check comes first, so a file or directory of another user the
    // command cannot read elsewhere stays unreadable in the layer.
    let other: u32 = if c.id.is_root() { 65534 } else { 0 };
    let f = host_path(c, "/tmp", "other");
    fs::write(&f.0, "other's secret\n").unwrap();
    chown(&f.0, other, other);
    set_mode(&f.0, 0o600);
    let d = host_path(c, "/tmp", "otherdir");
    fs::create_dir(&d.0).unwrap();
    fs::write(d.0.join("inner"), "x").unwrap();
    chown(&d.0, other, other);
    set_mode(&d.0, 0o700);
    // The same file outside the layer: the command's reach without it.
    let outside = c.outside.join("other");
    fs::write(&outside, "other's secret\n").unwrap();
    chown(&outside, other, other);
    set_mode(&outside, 0o600);
    for mode in CONFINED {
        let plain = c.probe(mode, "read", &[s(&outside)])?;
        plain.assert_refused_with(&["EACCES"], "control: another user's 0600 file outside /tmp");
        let r = c.probe(mode, "read", &[s(&f.0)])?;
        assert!(!r.detail.contains("secret"), "{mode}: read through the layer: {r:?}");
        r.assert_refused_with(&["EACCES"], &format!("{mode}: another user's 0600 file in /tmp"));
        c.probe(mode, "ls", &[s(&d.0)])?.assert_refused_with(&["EACCES"], "another user's 0700 directory in /tmp");
        c.probe(mode, "read", &[s(&d.0.join("inner"))])?
            .assert_refused_with(&["EACCES"], "a file in another user's 0700 directory in /tmp");
    }
});
