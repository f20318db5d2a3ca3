//! Held-back writes (issue 27): while an approver may be asked, or with `--preview`, a
//! `workspace-write` run's writes under its writable roots go to a private overlay
//! and reach the host only when applied. These cases try to get a write to the host
//! from inside the layer — through a hard link to a file outside, a host FIFO in the
//! workspace, forged overlay whiteout and opaque attributes, a rename out of the root —
//! and judge on the host, by effect: during a preview nothing changes at all; when
//! the changes are applied, only what the command did to the workspace's own names
//! lands (the file outside keeps its content, the forged attributes remove nothing).
//! The `bwrap` runner holds nothing back: there `--preview` is refused before anything
//! runs (the positive control of that refusal: the marker never appears).

use super::*;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

/// The command: write through the hard link, into the FIFO (non-blocking: a writer
/// with no reader on its pipe gets ENXIO), forge whiteout and opaque attributes under
/// both prefixes, move a file out of the root, and leave one ordinary change.
const TRICKS: &str = r#"python3 - <<'PY'
import os
open("hl", "a").write("pwned\n")
try:
    fd = os.open("fifo", os.O_WRONLY | os.O_NONBLOCK)
    os.write(fd, b"through the fifo\n")
    print("fifo-open")
except OSError as e:
    print("fifo", e.errno)
for p in ("user", "trusted"):
    for path, name in (("keep", "overlay.opaque"), ("doc", "overlay.whiteout"), ("doc", "overlay.redirect")):
        try:
            os.setxattr(path, f"{p}.{name}", b"y")
            print("set", p, name)
        except OSError as e:
            print("refused", p, name, e.errno)
os.system("mv moved /tmp/moved")
open("ordinary", "w").write("ok\n")
PY"#;

case!(held_writes_cannot_reach_the_host, |c| {
    let victim_path = c.outside.join(format!("victim-{}", c.unique()));
    c.file(&victim_path, "victim\n");
    let linked = std::fs::hard_link(&victim_path, c.ws.join("hl")).is_ok();
    if !linked {
        c.file(&c.ws.join("hl"), "hl\n");
    }
    let victim = Sentinel::record(&victim_path);
    let fifo = c.ws.join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().map(|s| s.success()).unwrap_or(false);
    assert!(made, "mkfifo");
    c.chown_to_me(&fifo);
    // The host's reader: open (non-blocking) before the run, read after it.
    let reader = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .expect("open the FIFO for reading");
    c.mkdir(&c.ws.join("keep"));
    c.file(&c.ws.join("keep/k"), "k\n");
    c.file(&c.ws.join("doc"), "doc\n");
    c.file(&c.ws.join("moved"), "moved\n");
    let watched: Vec<Sentinel> =
        ["hl", "keep", "keep/k", "doc", "moved"].iter().map(|p| Sentinel::record(&c.ws.join(p))).collect();
    let read_fifo = || {
        let mut buf = [0u8; 256];
        match std::io::Read::read(&mut &reader, &mut buf) {
            Ok(n) => buf[..n].to_vec(),
            Err(_) => Vec::new(),
        }
    };

    let mut o = c.opts(WORKSPACE_WRITE);
    o.extra_args = vec!["--preview".into()];
    if c.runner == "bwrap" {
        // No layer under bubblewrap: refused before anything runs.
        o.expect_error = true;
        let marker = c.ws.join("ran");
        let out = c.sh(&o, &format!("touch {}", s(&marker)))?;
        assert_eq!(out.j()["error"]["code"], "PREVIEW_UNAVAILABLE", "{out:?}");
        assert_absent(&marker, "a refused preview ran the command");
        return Ok(());
    }
    let out = c.sh(&o, TRICKS)?;
    let text = out.out();
    assert_eq!(out.j()["held"]["fate"], "preview", "{out:?}");
    // `trusted.overlay.*` cannot be set (no CAP_SYS_ADMIN). `user.overlay.*` can: as
    // ordinary user data (a privileged layer), or escaped by overlayfs into
    // `user.overlay.overlay.*` (a layer in a user namespace, Linux 6.7+; refused
    // before). Either way applying must not read it as overlayfs's own: judged below.
    assert!(!text.contains("set trusted"), "an overlay attribute was set: {text}");
    // During and after a preview the host is as it was.
    victim.assert_unchanged("a write through a hard link in the layer reached the file outside");
    for w in &watched {
        w.assert_unchanged("a preview changed the host");
    }
    assert!(!c.ws.join("ordinary").exists(), "a preview's write reached the host");
    assert!(read_fifo().is_empty(), "the host's FIFO received a write from the layer");
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());

    // Applied (an approver is configured, nobody needs asking): the command's changes
    // to the workspace's names land, nothing else.
    let approver = c.outside.join(format!("approve-{}.sh", c.unique()));
    c.file(&approver, "#!/bin/sh\ncat > /dev/null\nexit 0\n");
    set_mode(&approver, 0o755);
    let mut o = c.opts(WORKSPACE_WRITE);
    o.extra_args =
        vec!["--approver".into(), s(&approver).into(), "--audit-log".into(), s(&c.outside.join("audit.jsonl")).into()];
    let out = c.sh(&o, TRICKS)?;
    assert_eq!(out.j()["held"]["fate"], "applied", "{out:?}");
    assert_eq!(fs::read_to_string(&victim_path).unwrap(), "victim\n", "the file outside was written through the link");
    assert_eq!(fs::read_to_string(c.ws.join("hl")).unwrap().lines().last(), Some("pwned"), "{out:?}");
    assert_eq!(fs::read_to_string(c.ws.join("keep/k")).unwrap(), "k\n", "a forged opaque attribute removed keep/");
    assert_eq!(fs::read_to_string(c.ws.join("doc")).unwrap(), "doc\n", "a forged whiteout removed doc");
    assert!(!c.ws.join("moved").exists(), "the command moved it away (to its private /tmp)");
    assert_eq!(fs::read_to_string(c.ws.join("ordinary")).unwrap(), "ok\n");
    assert!(read_fifo().is_empty(), "the host's FIFO received a write");
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO is still one");
});
