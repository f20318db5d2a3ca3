#!/usr/bin/env python3
"""What observing write-intent syscalls costs file-creation-heavy work (see bench/README.md).

Runs a few workloads inside a workspace, each as:

  bare        the command itself, no cordon
  unobserved  cordon run --mode workspace-write --runner R --observe-writes off
  observed    cordon run --mode workspace-write --runner R --observe-writes on (the default)

for R in landlock and bwrap. All variants of all workloads run interleaved, round by
round, in a rotated order (a burst of load on a shared machine then hits every variant
alike); the figures are medians and ratios against baselines of the same run.

Workloads:
  c-build     make -j2 of a generated C project (20 .c files) from clean      (ext4)
  rust-build  cargo build --offline of a generated crate (10 modules, no deps),
              CARGO_HOME and the target dir inside the workspace, from clean   (ext4)
  tar-x       tar -x of a 20 000-file archive (250 directories)     (tmpfs, ext4)
  git-co      git checkout of 5 000 files that all differ between two commits
              (`git checkout OTHER -- .`: see the README for why)    (tmpfs, ext4)

When this cordon has no `--observe-writes` flag (`cordon run --help`), the plain
`cordon run` is measured as "unobserved" and the observed column says n/a.

    bench/observe_cost.py                     # full run, 5 rounds
    bench/observe_cost.py --quick --out /tmp/observe.md

A benchmark, not a test: it exits non-zero only when something is broken (a workload
or cordon failing, a workload that did not do its work).
"""

import argparse
import io
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Goals for observed / unobserved (median), from issue 11.
GOAL_BUILD = 1.10
GOAL_TAR = 1.50

# The write-intent path syscalls the supervisor observes (issue 11). open, openat,
# openat2 and creat count only with a write flag (O_WRONLY, O_RDWR, O_CREAT, O_TRUNC);
# utimensat only with a path (utimensat(fd, NULL, ...) is futimens: no path).
WRITE_SYSCALLS = [
    "open", "openat", "openat2", "creat",
    "mkdir", "mkdirat", "mknod", "mknodat",
    "unlink", "unlinkat", "rmdir",
    "rename", "renameat", "renameat2",
    "link", "linkat", "symlink", "symlinkat",
    "truncate",
    "chmod", "fchmodat", "fchmodat2", "chown", "lchown", "fchownat",
    "utime", "utimes", "futimesat", "utimensat",
    "setxattr", "lsetxattr", "removexattr", "lremovexattr",
]
OPEN_FAMILY = {"open", "openat", "openat2"}
WRITE_FLAG = re.compile(r"\bO_(WRONLY|RDWR|CREAT|TRUNC)\b")
STRACE_LINE = re.compile(r"^(?:\[pid\s+)?\d+\]?\s+(\w+)\((.*)$")


def log(msg):
    print(f"[observe] {msg}", file=sys.stderr, flush=True)


def die(msg):
    sys.exit(f"observe_cost: error: {msg}")


def run_checked(argv, what, **kw):
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)
    if r.returncode != 0:
        die(f"{what} failed (exit {r.returncode}): {' '.join(argv)}\n{r.stderr.decode(errors='replace')[-2000:]}")


def fs_type(path):
    """The filesystem type of the mount holding PATH, from /proc/self/mountinfo."""
    path = os.path.realpath(path)
    best, fstype = "", "?"
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            mnt = left.split()[4].replace("\\040", " ")
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                best, fstype = mnt, right.split()[0]
    return fstype


# ---------------------------------------------------------------- workloads


class Workload:
    """A command run in workspace WS; prepare() (untimed, every run) resets its state,
    check() (untimed) verifies the run did its work."""

    name = "?"
    goal = GOAL_BUILD
    kind = "build-like"

    def __init__(self, ws, fs_label):
        self.ws = ws
        self.fs = fs_label

    @property
    def label(self):
        return f"{self.name} ({self.fs})"

    def setup(self):
        raise NotImplementedError

    def prepare(self):
        pass

    def argv(self):
        raise NotImplementedError

    def check(self):
        pass

    def estimate(self):
        """Write-intent syscalls estimated from file counts, when strace is missing."""
        raise NotImplementedError


C_FUNCS_PER_FILE = 40


class CBuild(Workload):
    name = "c-build"

    def __init__(self, ws, fs_label, files):
        super().__init__(ws, fs_label)
        self.files = files
        self.proj = os.path.join(ws, "cproj")

    def setup(self):
        os.makedirs(self.proj)
        with open(os.path.join(self.proj, "common.h"), "w") as f:
            f.write("#include <stdio.h>\n#include <string.h>\n#include <stdlib.h>\n")
            for i in range(self.files):
                f.write(f"long unit{i}(long x);\n")
        for i in range(self.files):
            with open(os.path.join(self.proj, f"unit{i}.c"), "w") as f:
                f.write('#include "common.h"\n')
                for j in range(C_FUNCS_PER_FILE):
                    f.write(
                        f"static long f{j}(long x) {{\n"
                        f"    char buf[64];\n"
                        f"    snprintf(buf, sizeof buf, \"%ld-{i}-{j}\", x);\n"
                        f"    long s = 0;\n"
                        f"    for (size_t k = 0; k < strlen(buf); k++) s = s * 31 + buf[k];\n"
                        f"    return s ^ (x << {j % 7});\n}}\n"
                    )
                body = " + ".join(f"f{j}(x)" for j in range(C_FUNCS_PER_FILE))
                f.write(f"long unit{i}(long x) {{ return {body}; }}\n")
        with open(os.path.join(self.proj, "main.c"), "w") as f:
            f.write('#include "common.h"\nint main(int argc, char **argv) {\n    long s = argc;\n')
            for i in range(self.files):
                f.write(f"    s += unit{i}(s);\n")
            f.write('    printf("%ld\\n", s);\n    (void)argv;\n    return 0;\n}\n')
        with open(os.path.join(self.proj, "Makefile"), "w") as f:
            f.write(
                "CC ?= gcc\nCFLAGS ?= -O1\n"
                "OBJS := $(patsubst %.c,%.o,$(sort $(wildcard *.c)))\n"
                "prog: $(OBJS)\n\t$(CC) -o $@ $^\n"
                "%.o: %.c common.h\n\t$(CC) $(CFLAGS) -c $< -o $@\n"
            )

    def prepare(self):
        for name in os.listdir(self.proj):
            if name.endswith(".o") or name == "prog":
                os.unlink(os.path.join(self.proj, name))

    def argv(self):
        return ["make", "-s", "-j2", "-C", self.proj]

    def check(self):
        if not os.access(os.path.join(self.proj, "prog"), os.X_OK):
            die(f"{self.label}: no prog after make")

    def estimate(self):
        # Per compile unit: the .o, a couple of temporary files (.s), their unlinks.
        return (self.files + 1) * 4 + 3


RUST_FUNCS_PER_MODULE = 30


class RustBuild(Workload):
    name = "rust-build"

    def __init__(self, ws, fs_label, modules, cargo, rustc):
        super().__init__(ws, fs_label)
        self.modules = modules
        self.cargo, self.rustc = cargo, rustc
        self.proj = os.path.join(ws, "rproj")
        self.target = os.path.join(ws, "target")

    def setup(self):
        src = os.path.join(self.proj, "src")
        os.makedirs(src)
        os.makedirs(os.path.join(self.ws, "cargo-home"))
        with open(os.path.join(self.proj, "Cargo.toml"), "w") as f:
            f.write('[package]\nname = "benchcrate"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n')
        with open(os.path.join(src, "main.rs"), "w") as f:
            for m in range(self.modules):
                f.write(f"mod m{m};\n")
            f.write("fn main() {\n    let mut s: u64 = std::env::args().count() as u64;\n")
            for m in range(self.modules):
                f.write(f"    s = s.wrapping_add(m{m}::entry(s));\n")
            f.write('    println!("{s}");\n}\n')
        for m in range(self.modules):
            with open(os.path.join(src, f"m{m}.rs"), "w") as f:
                f.write("use std::collections::HashMap;\n\n")
                for j in range(RUST_FUNCS_PER_MODULE):
                    f.write(
                        f"fn f{j}(x: u64) -> u64 {{\n"
                        f"    let mut h: HashMap<u64, String> = HashMap::new();\n"
                        f"    h.insert(x, format!(\"{m}-{j}-{{x}}\"));\n"
                        f"    h.values().map(|v| v.len() as u64).sum::<u64>() ^ (x << {j % 7})\n}}\n"
                    )
                body = ".wrapping_add(".join(f"f{j}(x)" for j in range(RUST_FUNCS_PER_MODULE))
                body += ")" * (RUST_FUNCS_PER_MODULE - 1)
                f.write(f"pub fn entry(x: u64) -> u64 {{\n    {body}\n}}\n")

    def prepare(self):
        shutil.rmtree(self.target, ignore_errors=True)

    def argv(self):
        # The toolchain's own cargo and rustc, not rustup's proxies: the proxies read
        # (and may write) rustup's state, which is not what is measured here.
        return [
            "/usr/bin/env",
            f"CARGO_HOME={self.ws}/cargo-home",
            f"CARGO_TARGET_DIR={self.target}",
            f"RUSTC={self.rustc}",
            self.cargo, "build", "--offline", "--quiet",
            "--manifest-path", os.path.join(self.proj, "Cargo.toml"),
        ]

    def check(self):
        if not os.access(os.path.join(self.target, "debug", "benchcrate"), os.X_OK):
            die(f"{self.label}: no binary after cargo build")

    def estimate(self):
        # Incremental compilation writes a few files per codegen unit; cargo its
        # fingerprints and dep-info. A rough guess.
        return 60 + self.modules * 12


class TarExtract(Workload):
    name = "tar-x"
    goal = GOAL_TAR
    kind = "tar -x"

    def __init__(self, ws, fs_label, archive, files, dirs):
        super().__init__(ws, fs_label)
        self.archive, self.files, self.dirs = archive, files, dirs
        self.out = os.path.join(ws, "out")

    def setup(self):
        os.makedirs(self.ws, exist_ok=True)

    def prepare(self):
        shutil.rmtree(self.out, ignore_errors=True)
        os.mkdir(self.out)

    def argv(self):
        return ["tar", "-xf", self.archive, "-C", self.out]

    def check(self):
        n = sum(len(f) for _, _, f in os.walk(self.out))
        if n != self.files:
            die(f"{self.label}: {n} files extracted, expected {self.files}")

    def estimate(self):
        # One open(O_CREAT) per file, one mkdir and one utimensat per directory.
        return self.files + 2 * self.dirs


def make_archive(path, files, dirs):
    """A tar of FILES small files (40-400 bytes) spread over DIRS directories."""
    per_dir = -(-files // dirs)
    uid, gid = os.getuid(), os.getgid()
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        made = 0
        for d in range(dirs):
            ti = tarfile.TarInfo(f"tree/d{d // 25}/d{d}")
            ti.type, ti.mode, ti.uid, ti.gid, ti.mtime = tarfile.DIRTYPE, 0o755, uid, gid, 1_700_000_000
            tar.addfile(ti)
            for j in range(min(per_dir, files - made)):
                data = (f"file {d}/{j}\n" * (1 + (d * 7 + j) % 30)).encode()
                ti = tarfile.TarInfo(f"tree/d{d // 25}/d{d}/f{j}.txt")
                ti.size, ti.mode, ti.uid, ti.gid, ti.mtime = len(data), 0o644, uid, gid, 1_700_000_000
                tar.addfile(ti, io.BytesIO(data))
            made += min(per_dir, files - made)
    return made


class GitCheckout(Workload):
    """`git checkout OTHER -- .` with GIT_INDEX_FILE inside the worktree: cordon keeps
    .git read-only in workspace-write (protected path), so a branch switch, which
    writes .git/HEAD and .git/index, is refused inside it. The pathspec form rewrites
    the same files from the other commit and writes only the index, which the
    environment moves into the workspace."""

    name = "git-co"
    goal = GOAL_TAR
    kind = "git checkout"

    def __init__(self, ws, fs_label, files, dirs):
        super().__init__(ws, fs_label)
        self.files, self.dirs = files, dirs
        self.index = os.path.join(ws, ".bench-index")
        self.on = "a"

    def _write_tree(self, tag):
        per_dir = -(-self.files // self.dirs)
        for i in range(self.files):
            d = os.path.join(self.ws, f"src{i // per_dir}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, f"file{i}.txt"), "w") as f:
                f.write(f"{tag} {i:06d}\n" * 8)

    def setup(self):
        os.makedirs(self.ws)
        env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="b@example.invalid",
                   GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="b@example.invalid")
        git = ["git", "-C", self.ws]
        run_checked(git + ["init", "-q", "-b", "a"], "git init", env=env)
        # No automatic gc: a commit of thousands of files would start one in the
        # background, racing the explicit gc below and the timed runs.
        run_checked(git + ["config", "gc.auto", "0"], "git config", env=env)
        self._write_tree("a")
        run_checked(git + ["add", "-A"], "git add", env=env)
        run_checked(git + ["commit", "-q", "-m", "a"], "git commit", env=env)
        run_checked(git + ["checkout", "-q", "-b", "b"], "git checkout -b", env=env)
        self._write_tree("b")  # same paths and sizes, every file different
        run_checked(git + ["commit", "-q", "-a", "-m", "b"], "git commit", env=env)
        run_checked(git + ["checkout", "-q", "a"], "git checkout", env=env)
        run_checked(git + ["gc", "-q"], "git gc", env=env)  # packed: a small .git to walk
        shutil.copyfile(os.path.join(self.ws, ".git", "index"), self.index)
        self.on = "a"

    def argv(self):
        other = "b" if self.on == "a" else "a"
        return ["/usr/bin/env", f"GIT_INDEX_FILE={self.index}", "git", "-C", self.ws, "checkout", "-q", other, "--", "."]

    def done(self):
        """The run switched the worktree: the next one goes back."""
        self.on = "b" if self.on == "a" else "a"

    def check(self):
        per_dir = -(-self.files // self.dirs)
        for i in (0, self.files // 2, self.files - 1):
            with open(os.path.join(self.ws, f"src{i // per_dir}", f"file{i}.txt")) as f:
                if not f.read().startswith(f"{self.on} "):
                    die(f"{self.label}: file{i}.txt not from commit {self.on} after checkout")

    def estimate(self):
        # checkout_entry removes the old file and creates the new one (O_CREAT|O_EXCL),
        # plus the index lock and its rename.
        return 2 * self.files + 2


# ---------------------------------------------------------------- counting


def strace_known(names):
    """The NAMES this strace knows (an older one refuses e.g. fchmodat2)."""
    ok = []
    for n in names:
        r = subprocess.run(["strace", "-qq", "-e", "trace=" + n, "true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode == 0:
            ok.append(n)
    return ok


def count_write_syscalls(workload, traced):
    """(total, {syscall: n}) for one bare run under strace -f, tracing TRACED."""
    fd, trace = tempfile.mkstemp(prefix="observe-strace-", suffix=".txt")
    os.close(fd)
    try:
        workload.prepare()
        argv = ["strace", "-f", "-qq", "-e", "signal=none", "-e", "trace=" + ",".join(traced), "-o", trace]
        r = subprocess.run(argv + workload.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=workload.ws)
        if r.returncode != 0:
            die(f"{workload.label} under strace failed: {r.stderr.decode(errors='replace')[-2000:]}")
        if isinstance(workload, GitCheckout):
            workload.done()
        workload.check()
        counts = {}
        with open(trace, errors="replace") as f:
            for line in f:
                if "resumed>" in line:
                    continue  # the second half of a call already counted
                m = STRACE_LINE.match(line)
                if not m:
                    continue
                name, args = m.groups()
                if name in OPEN_FAMILY:
                    # Flags follow the path; a path with "O_CREAT" in it is not expected here.
                    if not WRITE_FLAG.search(args):
                        continue
                elif name == "utimensat" and re.match(r"\s*[^,]+,\s*NULL", args):
                    continue
                counts[name] = counts.get(name, 0) + 1
        return sum(counts.values()), counts
    finally:
        os.unlink(trace)


# ---------------------------------------------------------------- variants


class Variant:
    def __init__(self, name, runner, observe):
        self.name, self.runner, self.observe = name, runner, observe

    def argv(self, cordon, ws, cmd, flag_supported):
        if self.runner is None:
            return cmd
        out = [cordon, "run", "--mode", "workspace-write", "--runner", self.runner, "--cwd", ws, "--timeout", "600"]
        if flag_supported:
            # Explicit even for "on" (the default): the column says what was measured
            # whatever the default becomes.
            out += ["--observe-writes", "on" if self.observe else "off"]
        return out + ["--", *cmd]


def preflight(cordon, runner, ws):
    """(None, facts) when `cordon run --runner R` works here, else (why not, None)."""
    r = subprocess.run(
        [cordon, "run", "--json", "--mode", "workspace-write", "--runner", runner, "--cwd", ws, "--", "true"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    if r.returncode != 0:
        return (r.stderr.decode(errors="replace") + r.stdout.decode(errors="replace")).strip()[:300], None
    try:
        sb = json.loads(r.stdout)["sandbox"]
        enf = sb["enforcement"]
        gaps = ", ".join(g if isinstance(g, str) else json.dumps(g) for g in enf.get("gaps", [])) or "none"
        return None, f"runner {sb['runner']}: enforcement {enf['level']}, gaps: {gaps}"
    except (ValueError, KeyError, TypeError) as e:
        return f"unexpected --json output ({e})", None


def timed(argv, cwd):
    os.sync()  # no run pays for the previous run's writeback
    t0 = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        die(f"exit {r.returncode}: {' '.join(argv)}\n{r.stderr.decode(errors='replace')[-2000:]}")
    return dt


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=None, help="timed rounds (default 5, quick 2)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    ap.add_argument("--cordon", default=None, help="cordon binary (default: target/release/cordon, built if missing)")
    ap.add_argument("--quick", action="store_true", help="smoke run: smaller trees and projects, 2 rounds")
    ap.add_argument("--out", default=None, help="also write the tables as markdown to this file")
    ap.add_argument("--runners", default="landlock,bwrap", help="comma-separated (default landlock,bwrap)")
    ap.add_argument("--only", default=None, help="comma-separated workload names (c-build,rust-build,tar-x,git-co)")
    ap.add_argument("--ext4-dir", default=os.environ.get("BENCH_TMPDIR", "/var/tmp"),
                    help="disk-backed scratch (default $BENCH_TMPDIR or /var/tmp)")
    ap.add_argument("--control", action="store_true",
                    help="also run the unobserved variant a second time per round (an A/A control: the noise floor)")
    ap.add_argument("--tmpfs-dir", default=None,
                    help="tmpfs scratch (default: a tmpfs mounted for the run when root, else /dev/shm)")
    args = ap.parse_args()
    rounds = args.rounds if args.rounds is not None else (2 if args.quick else 5)
    if rounds < 1 or args.warmup < 0:
        die("--rounds must be >= 1 and --warmup >= 0")
    if args.quick:
        sizes = dict(c_files=6, rs_modules=3, tar_files=2000, tar_dirs=25, git_files=500, git_dirs=10)
    else:
        sizes = dict(c_files=20, rs_modules=10, tar_files=20000, tar_dirs=250, git_files=5000, git_dirs=50)

    cordon = args.cordon
    if cordon is None:
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
        cordon = os.path.join(target, "release", "cordon")
        if not os.path.exists(cordon):
            subprocess.run(["cargo", "build", "--release", "--bin", "cordon"], cwd=REPO, check=True)
    cordon = os.path.abspath(cordon)
    if not os.access(cordon, os.X_OK):
        die(f"no cordon binary at {cordon}")
    helptext = subprocess.run([cordon, "run", "--help"], capture_output=True, text=True).stdout
    flag_supported = "observe-writes" in helptext

    for tool in ("make", "gcc", "tar", "git"):
        if shutil.which(tool) is None:
            die(f"{tool} not found")
    strace = shutil.which("strace")
    cargo = rustc = None
    rust_note = None
    try:
        sysroot = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True, check=True).stdout.strip()
        cargo, rustc = os.path.join(sysroot, "bin", "cargo"), os.path.join(sysroot, "bin", "rustc")
        if not (os.access(cargo, os.X_OK) and os.access(rustc, os.X_OK)):
            cargo = rustc = None
    except (OSError, subprocess.CalledProcessError):
        pass
    if cargo is None:
        rust_note = "rust-build skipped: no cargo/rustc found"

    only = set(args.only.split(",")) if args.only else None
    if only and not only <= {"c-build", "rust-build", "tar-x", "git-co"}:
        die(f"--only: unknown workload(s) {', '.join(sorted(only - {'c-build', 'rust-build', 'tar-x', 'git-co'}))}")
    runners = [r for r in args.runners.split(",") if r]

    mounted = None
    bases = []
    try:
        ext4_base = tempfile.mkdtemp(prefix="cordon-observe-", dir=args.ext4_dir)
        bases.append(ext4_base)
        if args.tmpfs_dir:
            tmpfs_base = tempfile.mkdtemp(prefix="cordon-observe-", dir=args.tmpfs_dir)
            bases.append(tmpfs_base)
        elif os.geteuid() == 0:
            mnt = tempfile.mkdtemp(prefix="cordon-observe-tmpfs-", dir=args.ext4_dir)
            bases.append(mnt)
            if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2g,mode=0755", "tmpfs", mnt]).returncode == 0:
                mounted = mnt
                tmpfs_base = mnt
            else:
                tmpfs_base = tempfile.mkdtemp(prefix="cordon-observe-", dir="/dev/shm")
                bases.append(tmpfs_base)
        else:
            tmpfs_base = tempfile.mkdtemp(prefix="cordon-observe-", dir="/dev/shm")
            bases.append(tmpfs_base)
        fs_ext4, fs_tmpfs = fs_type(ext4_base), fs_type(tmpfs_base)
        if fs_tmpfs != "tmpfs":
            log(f"warning: {tmpfs_base} is {fs_tmpfs}, not tmpfs")

        archive = os.path.join(ext4_base, "tree.tar")
        log(f"generating the workloads (archive {sizes['tar_files']} files, repo {sizes['git_files']} files)")
        make_archive(archive, sizes["tar_files"], sizes["tar_dirs"])
        workloads = [CBuild(os.path.join(ext4_base, "c"), fs_ext4, sizes["c_files"])]
        if cargo:
            workloads.append(RustBuild(os.path.join(ext4_base, "rust"), fs_ext4, sizes["rs_modules"], cargo, rustc))
        for base, fs in ((tmpfs_base, fs_tmpfs), (ext4_base, fs_ext4)):
            workloads.append(TarExtract(os.path.join(base, "tar"), fs, archive, sizes["tar_files"], sizes["tar_dirs"]))
        for base, fs in ((tmpfs_base, fs_tmpfs), (ext4_base, fs_ext4)):
            workloads.append(GitCheckout(os.path.join(base, "git"), fs, sizes["git_files"], sizes["git_dirs"]))
        if only:
            workloads = [w for w in workloads if w.name in only]
        if not workloads:
            die(f"no workload left to run{' (' + rust_note + ')' if rust_note else ''}")
        for w in workloads:
            w.setup()

        notes = []
        if rust_note:
            notes.append(rust_note)
        if not flag_supported:
            notes.append("this cordon has no --observe-writes flag: `cordon run` measured as unobserved; observed n/a")
        usable = []
        for r in runners:
            why, facts = preflight(cordon, r, workloads[0].ws)
            if why:
                notes.append(f"runner {r} skipped: {why}")
            else:
                notes.append(f"preflight (`cordon run --json ... -- true`): {facts}")
                usable.append(r)
        variants = [Variant("bare", None, None)]
        for r in usable:
            variants.append(Variant(f"{r}/unobserved", r, False))
            if args.control:
                variants.append(Variant(f"{r}/unobserved-again", r, False))
            if flag_supported:
                variants.append(Variant(f"{r}/observed", r, True))

        counts = {}
        traced = strace_known(WRITE_SYSCALLS) if strace else []
        untraced = [n for n in WRITE_SYSCALLS if n not in traced]
        if strace and untraced:
            notes.append(f"this strace does not know {', '.join(untraced)}: not counted")
        for w in workloads:
            if strace:
                counts[w.label] = count_write_syscalls(w, traced) + ("strace",)
            else:
                counts[w.label] = (w.estimate(), {}, "estimate")
        count_method = "strace -f of one bare run" if strace else "estimated from file counts (no strace)"

        times = {(w.label, v.name): [] for w in workloads for v in variants}
        load_before = open("/proc/loadavg").read().split()[0]
        total = args.warmup + rounds
        for rnd in range(total):
            warm = rnd < args.warmup
            log(f"{'warmup' if warm else 'round'} {rnd + 1 - (0 if warm else args.warmup)}/{args.warmup if warm else rounds}")
            for wi, w in enumerate(workloads):
                n = len(variants)
                for k in range(n):
                    v = variants[(rnd + wi + k) % n]
                    w.prepare()
                    dt = timed(v.argv(cordon, w.ws, w.argv(), flag_supported), w.ws)
                    if isinstance(w, GitCheckout):
                        w.done()
                    w.check()
                    if not warm:
                        times[(w.label, v.name)].append(dt)
        load_after = open("/proc/loadavg").read().split()[0]

        report = render(args, cordon, flag_supported, rounds, sizes, workloads, usable, variants, times, counts,
                        count_method, notes, (load_before, load_after), (fs_tmpfs, tmpfs_base, fs_ext4, ext4_base))
        print(report)
        if args.out:
            with open(args.out, "w") as f:
                f.write(report)
            log(f"markdown written to {args.out}")
    finally:
        if mounted and subprocess.run(["umount", mounted]).returncode != 0:
            subprocess.run(["umount", "--lazy", mounted])  # busy: detach it, it goes when released
        for b in reversed(bases):
            shutil.rmtree(b, ignore_errors=True)


def render(args, cordon, flag_supported, rounds, sizes, workloads, runners, variants, times, counts, count_method,
           notes, loads, fsinfo):
    def med(w, v):
        t = times.get((w.label, v))
        return statistics.median(t) if t else None

    def f3(x):
        return "n/a" if x is None else f"{x:.3f}"

    def ratio(a, b):
        return None if a is None or b is None or b == 0 else a / b

    def fx(x):
        return "n/a" if x is None else f"{x:.2f}x"

    def paired(rs):
        """Median (min–max) of ratios paired by round."""
        return f"{statistics.median(rs):.2f} ({min(rs):.2f}–{max(rs):.2f})" if rs else "n/a"

    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    version = subprocess.run([cordon, "--version"], capture_output=True, text=True).stdout.strip()
    lines = [
        f"# cordon observe-writes cost — {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {'QUICK' if args.quick else 'FULL'}",
        "",
        f"- cordon: `{cordon}` ({version}), repo commit {commit or 'unknown'}",
        f"- host: {platform.system()} {platform.release()}, {os.cpu_count()} CPUs, uid {os.getuid()}, "
        f"load average before/after: {loads[0]}/{loads[1]}",
        f"- tmpfs scratch: {fsinfo[1]} ({fsinfo[0]}); disk scratch: {fsinfo[3]} ({fsinfo[2]})",
        f"- `--observe-writes`: {'supported' if flag_supported else 'NOT supported by this cordon (observed = n/a)'}",
        f"- {rounds} timed rounds after {args.warmup} warmup round(s), variants interleaved in a rotated order; "
        "seconds are medians of whole-command wall time",
        f"- write-intent syscalls: {count_method}",
        f"- goals (observed/unobserved): build-like <= {GOAL_BUILD:.2f}x, tar -x <= {GOAL_TAR:.2f}x "
        "(git checkout is judged against the tar goal)",
        "",
    ]
    sizes_txt = {
        "c-build": f"{sizes['c_files']} .c files + main.c, make -j2",
        "rust-build": f"{sizes['rs_modules']} modules, cargo build --offline (debug)",
        "tar-x": f"{sizes['tar_files']} files in {sizes['tar_dirs']} dirs",
        "git-co": f"{sizes['git_files']} files in {sizes['git_dirs']} dirs",
    }
    head = ("| workload | runner | bare s | unobserved s | observed s | obs/unobs | per round: median (range) | goal | obs/bare | unobs/bare "
            + ("| A/A control " if args.control else "")
            + "| write syscalls | µs per notification |")
    lines += [head, "|---|---|---:|---:|---:|---:|---:|---|---:|---:|" + ("---:|" if args.control else "") + "---:|---:|"]
    for w in workloads:
        n, per, how = counts[w.label]
        bare = med(w, "bare")
        for r in runners:
            un = med(w, f"{r}/unobserved")
            ob = med(w, f"{r}/observed") if flag_supported else None
            r_ou = ratio(ob, un)
            if r_ou is None:
                verdict = f"<= {w.goal:.2f}x"
            else:
                verdict = f"<= {w.goal:.2f}x {'ok' if r_ou <= w.goal else 'MISS'}"
            us = None if ob is None or un is None or not n else (ob - un) / n * 1e6
            # Paired by round (same load): their spread is the noise the median hides.
            pairs = [o / u for o, u in zip(times.get((w.label, f"{r}/observed"), []), times[(w.label, f"{r}/unobserved")])]
            spread = paired(pairs)
            control = ""
            if args.control:
                again = times[(w.label, f"{r}/unobserved-again")]
                aa = [a / u for a, u in zip(again, times[(w.label, f"{r}/unobserved")])]
                control = f" {fx(ratio(med(w, f'{r}/unobserved-again'), un))}, per round {paired(aa)} |"
            lines.append(
                f"| {w.label} | {r} | {f3(bare)} | {f3(un)} | {f3(ob)} | {fx(r_ou)} | {spread} | {verdict} | {fx(ratio(ob, bare))} "
                f"| {fx(ratio(un, bare))} |{control} {n}{'' if how == 'strace' else ' (est.)'} | {'n/a' if us is None else f'{us:.1f}'} |"
            )
    lines += ["", "Workloads:", ""]
    for w in workloads:
        n, per, how = counts[w.label]
        detail = ", ".join(f"{k} {v}" for k, v in sorted(per.items(), key=lambda kv: -kv[1])) if per else how
        lines.append(f"- {w.label}: {sizes_txt[w.name]}; write-intent syscalls per run: {n} ({detail})")
    lines += ["", "Per-round seconds (to judge the noise):", ""]
    for w in workloads:
        for v in variants:
            t = times[(w.label, v.name)]
            lines.append(f"- {w.label} {v.name}: " + " / ".join(f"{x:.3f}" for x in t))
    if notes:
        lines += ["", "Notes:", ""] + [f"- {x}" for x in notes]
    try:
        if float(loads[0]) >= (os.cpu_count() or 1) or float(loads[1]) >= (os.cpu_count() or 1):
            lines += ["", "WARNING: load average at or above the CPU count: other work was competing; "
                      "trust the ratios (same run, interleaved) more than the absolute seconds"]
    except ValueError:
        pass
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
