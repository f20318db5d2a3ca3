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
use std::os::unix::fs::PermissionsExt;

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

/// A host directory under `/tmp` owned by the identity, removed when dropped.
fn host_tmp_dir(c: &Ctx, what: &str) -> HostPath {
    let d = host_path(c, "/tmp", what);
    c.mkdir(&d.0);
    d
}

case!(ctl_layer_git_clone_from_a_host_tmp_repository, |c| {
    // `git clone /tmp/x/origin.git` works in both confined modes (into the workspace, or
    // into TMPDIR in read-only), and the origin is not changed.
    if find_in_path("git").is_none() {
        return Err(Skip("git is not installed".into()));
    }
    let d = host_tmp_dir(c, "git");
    c.host_sh(&format!(
        "cd '{d}' && git init -q --bare -b main origin.git && git init -q -b main src && cd src && echo hi > f \
         && git add f && git commit -q -m first && git push -q ../origin.git main",
        d = d.0.display()
    ));
    let origin = d.0.join("origin.git");
    let before = tree(&origin);
    for mode in CONFINED {
        // Into TMPDIR (read-only) git links the objects within the private layer; an
        // unprivileged run's layer shows a hard link of a host file with another
        // inode number than the file (its user namespace cannot decode file handles),
        // which git refuses, so it copies there (docs/guarantees.md).
        let (into, how) = match mode {
            READ_ONLY if !c.id.is_root() => ("\"$TMPDIR/cloned\"", "--no-hardlinks"),
            READ_ONLY => ("\"$TMPDIR/cloned\"", ""),
            _ => ("cloned", ""),
        };
        let out = c.sh(
            &c.opts(mode),
            &format!(
                "git clone -q {how} '{}' {into} && git -C {into} log --format=%s && cat {into}/f",
                origin.display()
            ),
        )?;
        assert_eq!(out.exit_code(), Some(0), "{mode}: git clone from the host's /tmp: {out:?}");
        assert_eq!(out.out(), "first\nhi\n", "{mode}: {out:?}");
        assert_tree_unchanged(&before, &origin, &format!("{mode}: the origin repository"));
    }
    assert!(c.ws.join("cloned/.git").is_dir(), "the clone in the workspace is on the host");
});

case!(ctl_layer_virtualenv_under_another_tmp_directory, |c| {
    // A virtualenv made on the host under /tmp: its interpreter starts inside (before,
    // PROGRAM_NOT_FOUND: the private /tmp hid it), and `import` finds its packages.
    let Some(python) = ["/usr/bin/python3", "/usr/local/bin/python3"].iter().map(Path::new).find(|p| p.is_file())
    else {
        return Err(Skip("no system python3".into()));
    };
    let d = host_tmp_dir(c, "venv");
    let venv = d.0.join("venv");
    c.host_sh(&format!("'{}' -m venv --without-pip '{}'", python.display(), venv.display()));
    let site =
        c.host_sh(&format!("'{}/bin/python' -c 'import site; print(site.getsitepackages()[0])'", venv.display()));
    c.file(&Path::new(site.trim()).join("cordon_layer_probe.py"), "WHERE = 'venv'\n");
    for mode in CONFINED {
        let py = venv.join("bin/python");
        let out = c.cordon(
            &c.opts(mode),
            &[s(&py), "-c", "import sys, cordon_layer_probe as p; print(sys.prefix, p.WHERE)"],
        )?;
        assert_eq!(out.exit_code(), Some(0), "{mode}: {out:?}");
        assert_eq!(out.out().trim(), format!("{} venv", venv.display()), "{mode}: {out:?}");
    }
});

case!(ctl_layer_toolchain_homes_are_warm_and_writable, |c| {
    // A home with cargo's and npm's homes: what they hold is read inside, and what a
    // build adds there (a crate download, npm's cache and logs) is written, privately:
    // the host's homes are unchanged afterwards. A missing Go home is made in the run's
    // private temp dir (GOPATH), and a missing ~/.cache is created on the host (empty,
    // 0700) so that `mkdir -p ~/.cache/x` works inside.
    let home = c.root.join(format!("home-tc-{}", c.unique()));
    c.mkdir(&home);
    for d in [".cargo", ".cargo/registry", ".cargo/registry/cache", ".npm", ".npm/_logs"] {
        c.mkdir(&home.join(d));
    }
    let crate_file = c.sentinel(&home.join(".cargo/registry/cache/warm-1.0.0.crate"));
    let cargo_before = tree(&home.join(".cargo"));
    let npm_before = tree(&home.join(".npm"));
    let script = "cat ~/.cargo/registry/cache/warm-1.0.0.crate && echo new > ~/.cargo/registry/cache/fresh-1.0.0.crate \
                  && echo lock > ~/.cargo/.package-cache && mkdir -p ~/.npm/_cacache && echo log > ~/.npm/_logs/debug.log \
                  && echo \"cargo=${CARGO_HOME:-unset} npm=${npm_config_cache:-unset} gopath=$GOPATH\" \
                  && mkdir -p \"$GOPATH/pkg/mod\" && mkdir -p ~/.cache/x && echo ok";
    for mode in CONFINED {
        let mut o = c.opts(mode);
        o.env.push(("HOME".into(), s(&home).into()));
        let out = c.sh(&o, script)?;
        assert_eq!(out.exit_code(), Some(0), "{mode}: {out:?}");
        let lines: Vec<String> = out.out().lines().map(String::from).collect();
        assert_eq!(lines.first(), Some(&format!("sentinel {}", crate_file.path.display())), "{mode}: {out:?}");
        let vars = lines.get(1).cloned().unwrap_or_default();
        assert!(
            vars.starts_with("cargo=unset npm=unset gopath=/"),
            "{mode}: the homes are used where they are: {out:?}"
        );
        assert!(!vars.contains(&s(&home).to_string()), "{mode}: GOPATH in the read-only home: {out:?}");
        assert_eq!(lines.last().map(String::as_str), Some("ok"), "{mode}: {out:?}");
        assert_tree_unchanged(&cargo_before, &home.join(".cargo"), &format!("{mode}: the host's cargo home"));
        assert_tree_unchanged(&npm_before, &home.join(".npm"), &format!("{mode}: the host's npm home"));
        crate_file.assert_unchanged(&format!("{mode}: a warm crate"));
        assert_absent(&home.join("go"), &format!("{mode}: a Go home in the real home"));
        assert!(file_write_denials(&out).is_empty(), "{mode}: a write to a private layer was reported: {out:?}");
    }
    // ~/.cache: created by cordon (the caller's own home had none), empty, 0700.
    let cache = home.join(".cache");
    let meta = fs::metadata(&cache).expect("cordon made ~/.cache");
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    assert_eq!(meta.uid(), c.id.uid);
    assert_eq!(fs::read_dir(&cache).unwrap().count(), 0, "something inside reached the host's ~/.cache");
});

case!(layer_mount_points_read_no_wider_than_the_host, |c| {
    // A workspace under another user's directory in /tmp (mode 0711: the way through
    // is open, the listing is not): the layer over /tmp makes that directory a mount
    // point in its upper directory, and there it must keep the host's owner and mode.
    // Made by a privileged mounter with its own (0755, root), it let a command running
    // as root without capabilities list the directory and reach what the host keeps
    // from it.
    let other: u32 = if c.id.is_root() { 65534 } else { 0 };
    let d = host_path(c, "/tmp", "outer");
    fs::create_dir(&d.0).unwrap();
    let secret = d.0.join("secret-dir");
    fs::create_dir(&secret).unwrap();
    fs::write(secret.join("inner"), "x").unwrap();
    set_mode(&secret, 0o700);
    chown(&secret, other, other);
    let ws = d.0.join("ws");
    c.mkdir(&ws);
    chown(&d.0, other, other);
    set_mode(&d.0, 0o711);
    if !c.id.is_root() {
        // The host's answer to the same identity (root's would bypass the modes).
        c.host_probe("ls", &[s(&d.0)]).assert_refused_with(&["EACCES"], "control: listing the 0711 directory");
    }
    for mode in CONFINED {
        let o = opts_at(c, mode, &ws);
        c.probe_with(&o, "ls", &[s(&d.0)])?
            .assert_refused_with(&["EACCES"], &format!("{mode}: listing the 0711 parent"));
        c.probe_with(&o, "ls", &[s(&secret)])?
            .assert_refused_with(&["EACCES"], &format!("{mode}: listing another user's 0700 directory beside it"));
        let out = c.sh(&o, "stat -c %a \"$PWD/..\" && ls > \"$TMPDIR/f\" && echo ok")?;
        assert_eq!(out.out(), "711\nok\n", "{mode}: the parent keeps its mode; the workspace works: {out:?}");
    }
});

case!(layer_hides_cordons_state_directory, |c| {
    // cordon's state directory holds other runs' complete output (spill files) and the
    // held changes of runs in flight. In /tmp it was hidden by the fresh tmpfs; with a
    // private layer over the host's /tmp (and anywhere else) it must stay out of
    // reach. Control: the identity reads it on the host.
    let in_tmp = host_tmp_dir(c, "state");
    for base in [in_tmp.0.clone(), c.outside.join(format!("state-{}", c.unique()))] {
        c.mkdir(&base);
        let state = base.join(format!("cordon-{}", c.id.uid));
        c.mkdir(&state);
        set_mode(&state, 0o700);
        let spill = c.file(&state.join(format!("out-1-1-{}", "secretSpill1")), "another run's output\n");
        c.host_probe("read", &[s(&spill)]).assert_ok("control: the identity reads its state directory");
        for mode in CONFINED {
            let mut o = c.opts(mode);
            o.env.push(("TMPDIR".into(), s(&base).into()));
            let r = c.probe_with(&o, "read", &[s(&spill)])?;
            assert!(!r.detail.contains("another run"), "{mode}: a spill file read: {r:?}");
            r.assert_refused_with(&["EACCES", "ENOENT"], &format!("{mode}: {}", state.display()));
            c.probe_with(&o, "ls", &[s(&state)])?
                .assert_refused_with(&["EACCES", "ENOENT"], &format!("{mode}: listing"));
        }
    }
});

case!(layer_home_cache_made_only_in_cordons_own_home, |c| {
    // A missing `~/.cache` is made (for a private layer over it) only in cordon's own
    // home: a request naming another `HOME` (`--env HOME=...`, a serve client's `env`)
    // made cordon create `.cache` there, in any directory its uid owns (as root: /etc).
    let home = c.outside.join(format!("not-cordons-home-{}", c.unique()));
    c.mkdir(&home);
    for mode in CONFINED {
        let mut o = c.opts(mode);
        o.extra_args = vec!["--env".into(), format!("HOME={}", home.display())];
        let out = c.sh(&o, "echo \"$HOME\"")?;
        assert_eq!(out.out().trim(), s(&home), "{mode}: {out:?}");
        assert_absent(&home.join(".cache"), &format!("{mode}: cordon made .cache in a home the request named"));
    }
});
