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

/// Whether this test process can make host mounts (the suite runs as root in CI).
fn can_mount() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A host bind mount, unmounted (lazily) when dropped.
struct BindMount(PathBuf);
impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// An approver that refuses every request (nothing a run provokes is granted).
fn refusing_approver(c: &Ctx) -> Vec<String> {
    let approver = c.outside.join(format!("refuse-{}.sh", c.unique()));
    c.file(&approver, "#!/bin/sh\ncat > /dev/null\nexit 1\n");
    set_mode(&approver, 0o755);
    vec!["--approver".into(), s(&approver).into(), "--audit-log".into(), s(&c.outside.join("audit.jsonl")).into()]
}

case!(held_writes_never_enter_a_host_mount_in_the_root, |c| {
    // A host mount inside the workspace (a bind mount of a directory outside, as a
    // volume would be) is read-only in a run. A held layer showed the directory beneath
    // it, not its contents, and applying it wrote into the mounted directory and
    // emptied it (`rm -rf data; mkdir data`). Such a root is not held (the run writes
    // directly, `--preview` is refused) and the apply engine never crosses a mount:
    // the files outside stay as they were. Control: the identity can write there on
    // the host.
    if !can_mount() {
        skip_regardless("held_writes_never_enter_a_host_mount_in_the_root", "needs root to make a host mount");
        return Ok(());
    }
    let vol = c.outside.join("vol");
    c.mkdir(&vol);
    let keep = c.sentinel(&vol.join("keep.txt"));
    let data = c.ws.join("data");
    c.mkdir(&data);
    let ok = std::process::Command::new("mount").arg("--bind").arg(&vol).arg(&data).status();
    assert!(ok.is_ok_and(|s| s.success()), "mount --bind");
    let _mount = BindMount(data.clone());
    c.host_sh("echo c > data/control && rm data/control");
    let before = tree(&vol);
    let mut o = c.opts(WORKSPACE_WRITE);
    o.extra_args = refusing_approver(c);
    let out = c.sh(&o, "echo new > data/new; rm -rf data; mkdir data; echo in > data/in; echo ok > ordinary")?;
    keep.assert_unchanged("the mounted directory's file");
    assert_tree_unchanged(&before, &vol, "a held layer's changes reached a host mount inside the root");
    assert_eq!(fs::read_to_string(c.ws.join("ordinary")).unwrap(), "ok\n", "control: the run's change: {out:?}");
    // Held or not, a mount point is never entered.
    if !out.j()["held"].is_null() {
        let skipped = out.j()["held"]["skipped"].to_string();
        assert!(skipped.contains("mount point"), "the mount point is named as skipped: {out:?}");
    }
    let mut o = c.opts(WORKSPACE_WRITE);
    o.extra_args = vec!["--preview".into()];
    o.expect_error = true;
    let out = c.sh(&o, "echo new > data/new")?;
    assert_eq!(out.j()["error"]["code"], "PREVIEW_UNAVAILABLE", "{out:?}");
    assert_tree_unchanged(&before, &vol, "a refused preview");
});

case!(held_writes_of_a_deep_tree_are_bounded, |c| {
    // A command makes a directory tree thousands of levels deep in its layer: cordon
    // lists and applies it without exhausting its stack (it aborted, leaving no result,
    // part of the tree and the layer's storage behind), applies what lies within the
    // bound, says what it skipped, and removes the storage however deep it is.
    if c.runner == "bwrap" {
        // Nothing is held under bubblewrap (see `held_writes_cannot_reach_the_host`).
        return Ok(());
    }
    let base = c.outside.join(format!("state-{}", c.unique()));
    c.mkdir(&base);
    let mut o = c.opts(WORKSPACE_WRITE);
    o.env.push(("TMPDIR".into(), s(&base).into()));
    o.extra_args = refusing_approver(c);
    o.extra_args.extend(["--observe-writes".into(), "off".into()]);
    let script = "echo top > top.txt && python3 -c '
import os
for i in range(5000):
    os.mkdir(\"d\"); os.chdir(\"d\")
open(\"leaf\", \"w\").write(\"leaf\")
'";
    let out = c.sh(&o, script)?;
    assert_eq!(out.exit_code(), Some(0), "{out:?}");
    assert_eq!(out.j()["held"]["fate"], "applied", "{out:?}");
    assert_eq!(fs::read_to_string(c.ws.join("top.txt")).unwrap(), "top\n", "control: a shallow change applied");
    let skipped = out.j()["held"]["skipped"].to_string();
    assert!(skipped.contains("more than 256 directories"), "the deep part is skipped and said so: {skipped}");
    let state = base.join(format!("cordon-{}", c.id.uid));
    assert!(
        names_in(&state).iter().all(|n| !n.starts_with("held-")),
        "the held storage was left: {:?}",
        names_in(&state)
    );
});

case!(held_writes_leave_no_storage_behind, |c| {
    // Every held run's storage (an upper and a work directory per root, in cordon's
    // state directory) is removed when the run is settled, for an unprivileged caller
    // too: overlayfs leaves its work directory mode 0, which its owner cannot open.
    let base = c.outside.join(format!("state-{}", c.unique()));
    c.mkdir(&base);
    let state = base.join(format!("cordon-{}", c.id.uid));
    for preview in [true, false] {
        let mut o = c.opts(WORKSPACE_WRITE);
        o.env.push(("TMPDIR".into(), s(&base).into()));
        o.extra_args = if preview { vec!["--preview".into()] } else { refusing_approver(c) };
        o.expect_error = preview && c.runner == "bwrap";
        let out = c.sh(&o, "mkdir -p a/b && echo x > a/b/c && echo y > y")?;
        if !o.expect_error {
            assert_eq!(out.exit_code(), Some(0), "{out:?}");
        }
        let left: Vec<String> = names_in(&state).into_iter().filter(|n| n.starts_with("held-")).collect();
        assert!(left.is_empty(), "preview {preview}: the held storage was left: {left:?}");
    }
    assert_eq!(fs::read_to_string(c.ws.join("a/b/c")).unwrap(), "x\n", "control: the applied run's change");
});

case!(held_writes_keep_the_host_owner_of_a_nested_repositorys_parent, |c| {
    // A nested repository's `.git` is protected, so its parent directories are mount
    // points in the layer. Made with the mounter's owner and mode, they let a command
    // running as root (without capabilities) write into and delete from another user's
    // directory it cannot change on the host; applied as root, those changes landed.
    if !can_mount() {
        skip_regardless("held_writes_keep_the_host_owner_of_a_nested_repositorys_parent", "needs root to chown");
        return Ok(());
    }
    if find_in_path("git").is_none() {
        return Err(Skip("git is not installed".into()));
    }
    let other: u32 = if c.id.is_root() { 65534 } else { 0 };
    c.git_init();
    c.host_sh("mkdir sub && git -C sub init -q && echo theirs > sub/file");
    let sub = c.ws.join("sub");
    std::process::Command::new("chown").args(["-R", &format!("{other}:{other}")]).arg(&sub).status().unwrap();
    let before = tree(&sub);
    let mut o = c.opts(WORKSPACE_WRITE);
    o.extra_args = refusing_approver(c);
    let out = c.sh(&o, "echo x > sub/new; rm -f sub/file; echo ok > ordinary; true")?;
    assert_tree_unchanged(&before, &sub, "another user's directory above a nested repository changed");
    assert_eq!(fs::read_to_string(c.ws.join("ordinary")).unwrap(), "ok\n", "control: the run's change: {out:?}");
});
