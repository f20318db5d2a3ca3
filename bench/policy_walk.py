#!/usr/bin/env python3
"""What the git-directory search costs when a policy is resolved (see bench/README.md).

Builds two workspaces, a small one (10 files) and a large one (100 000 files by
default, in 1 000 directories, with a few nested repositories), then runs
`cordon run --mode workspace-write --cwd WS -- true` on each, interleaved, and reports
the median wall time of each, the time the large tree adds and the ratio. Both sides
pay for the same sandbox; the difference is the search (plus one read-only mount per
nested repository).

    bench/policy_walk.py                    # release build, 100 000 files, 30 runs each
    bench/policy_walk.py --files 20000 --runs 10 --cordon target/debug/cordon

A benchmark, not a test: it exits non-zero only when cordon fails to run.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES_PER_DIR = 100
NESTED_REPOS = 10


def fake_repo(path):
    """A directory the search counts as a git directory (HEAD, objects/, refs/)."""
    for d in ("objects", "refs/heads", "hooks"):
        os.makedirs(os.path.join(path, d), exist_ok=True)
    with open(os.path.join(path, "HEAD"), "w") as f:
        f.write("ref: refs/heads/main\n")


def build_tree(root, files, repos):
    os.makedirs(root)
    dirs = max(1, files // FILES_PER_DIR)
    made = 0
    for i in range(dirs):
        # Two levels: 10 top directories, the rest below them.
        d = os.path.join(root, f"top{i % 10}", f"d{i}")
        os.makedirs(d)
        for j in range(min(FILES_PER_DIR, files - made)):
            with open(os.path.join(d, f"f{j}.txt"), "w") as f:
                f.write("x\n")
        made += min(FILES_PER_DIR, files - made)
        if i < repos:
            fake_repo(os.path.join(d, ".git"))
    return made


def run_once(cordon, ws):
    start = time.perf_counter()
    r = subprocess.run(
        [cordon, "run", "--mode", "workspace-write", "--cwd", ws, "--", "true"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    elapsed = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f"cordon failed on {ws}: {r.stderr.decode(errors='replace')}")
    return elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=100_000, help="files in the large tree (default 100000)")
    ap.add_argument("--runs", type=int, default=30, help="runs per tree (default 30)")
    ap.add_argument("--cordon", default=None, help="cordon binary (default: target/release/cordon, built if missing)")
    args = ap.parse_args()

    cordon = args.cordon
    if cordon is None:
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
        cordon = os.path.join(target, "release", "cordon")
        if not os.path.exists(cordon):
            subprocess.run(["cargo", "build", "--release", "--bin", "cordon"], cwd=REPO, check=True)

    base = tempfile.mkdtemp(prefix="cordon-policy-walk-", dir=os.environ.get("BENCH_TMPDIR", "/var/tmp"))
    try:
        small, large = os.path.join(base, "small"), os.path.join(base, "large")
        build_tree(small, 10, 0)
        made = build_tree(large, args.files, NESTED_REPOS)
        entries = sum(len(d) + len(f) for _, d, f in os.walk(large))
        for ws in (small, large):  # warm the dentry cache and the binary
            run_once(cordon, ws)
        times = {small: [], large: []}
        for _ in range(args.runs):
            for ws in (small, large):
                times[ws].append(run_once(cordon, ws))
        s_med = statistics.median(times[small]) * 1000
        l_med = statistics.median(times[large]) * 1000
        added = l_med - s_med
        print(f"cordon:            {cordon}")
        print(f"large tree:        {made} files, {entries} entries, {NESTED_REPOS} nested repositories")
        print(f"runs per tree:     {args.runs} (interleaved), medians:")
        print(f"  10 files:        {s_med:8.2f} ms")
        print(f"  {made} files:  {l_med:8.2f} ms")
        print(f"added by the tree: {added:8.2f} ms ({added * 1000 / max(entries, 1):.2f} us per entry)")
        print(f"ratio:             {l_med / s_med:8.2f}x")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
