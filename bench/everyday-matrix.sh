#!/usr/bin/env bash
# The everyday matrix on every runner and identity, before and after: runs
# bench/everyday.sh with each cordon binary given, under `--runner landlock` and
# `--runner bwrap`, as the current user and as an unprivileged one, and prints one table
# (a column per binary x runner x identity), the share per column, and every failure
# with its last line. Output: printed and written to --out.
#
# Usage: bench/everyday-matrix.sh [--before BIN] [--after BIN] [--user USER]
#                                 [--allow-host P]... [--only REGEX] [--out FILE]
#   --before BIN     an older cordon to compare with (e.g. a build of the last release)
#   --after BIN      the cordon to measure (default: target/release/cordon)
#   --user USER      the unprivileged identity (default cordon-test; needs root; "" for none)
#   --allow-host P   passed to everyday.sh for the rows that go through cordon's proxy
#   --only REGEX     only the rows whose name matches
#   --out FILE       where the report goes (default bench/everyday-latest.txt)
# EVERYDAY_USER_PATH is the unprivileged user's PATH (e.g. with a readable Rust
# toolchain's bin first); EVERYDAY_BASE where workspaces go (default /var/tmp).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
before="" after="" user=cordon-test out=$here/bench/everyday-latest.txt
pass_on=()
while [ $# -gt 0 ]; do
    case "$1" in
        --before) before=$2; shift 2 ;;
        --after) after=$2; shift 2 ;;
        --user) user=$2; shift 2 ;;
        --allow-host) pass_on+=(--allow-host "$2"); shift 2 ;;
        --only) pass_on+=(--only "$2"); shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h|--help) sed -n 2,18p "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[ -n "$after" ] || after=${CARGO_TARGET_DIR:-$here/target}/release/cordon
[ -x "$after" ] || { echo "no cordon at $after (cargo build --release, or pass --after)" >&2; exit 2; }
if [ -n "$user" ] && [ "$(id -u)" != 0 ]; then
    echo "running as $user needs root: measuring as $(id -un) only" >&2
    user=""
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/everyday-matrix-XXXXXX")
trap 'rm -rf "$work"' EXIT

columns=()
labels=()
[ -n "$before" ] && labels+=("before=$before")
labels+=("after=$after")
for lb in "${labels[@]}"; do
    label=${lb%%=*} bin=${lb#*=}
    for runner in landlock bwrap; do
        for who in "$(id -un)" ${user:+"$user"}; do
            col="$label $runner $who"
            f=$work/$(printf '%s' "$col" | tr ' ' _)
            echo "== $col ($bin)" >&2
            as=()
            [ "$who" != "$(id -un)" ] && as=(--as "$who")
            bash "$here/bench/everyday.sh" --cordon "$bin" --runner "$runner" "${as[@]}" \
                "${pass_on[@]}" --tsv "$f.tsv" > "$f.log" 2>&1
            grep -E '^passed' "$f.log" >&2 || tail -n 3 "$f.log" >&2
            columns+=("$col")
        done
    done
done

{
    echo "# bench/everyday-matrix.sh, $(date -u +%Y-%m-%d), $(uname -r), $(nproc) cores"
    for lb in "${labels[@]}"; do
        echo "# ${lb%%=*}: ${lb#*=} ($(git -C "$(dirname "${lb#*=}")" rev-parse --short HEAD 2>/dev/null || echo '?'))"
    done
    python3 - "$work" "${columns[@]}" <<'EOF'
import os, sys
work, cols = sys.argv[1], sys.argv[2:]
rows, table = [], {}
for c in cols:
    path = os.path.join(work, c.replace(" ", "_") + ".tsv")
    for line in open(path) if os.path.exists(path) else []:
        status, name, detail = (line.rstrip("\n").split("\t") + ["", ""])[:3]
        if name not in rows:
            rows.append(name)
        table[(c, name)] = (status, detail)
short = {"PASS": "pass", "FAIL": "FAIL", "SKIP": "skip", "KEPT": "kept", "LEAK": "LEAK"}
heads = [c.replace("landlock", "ll").replace("bwrap", "bw") for c in cols]
width = max(len(r) for r in rows) if rows else 10
print()
print(f"{'':{width}}  " + "  ".join(f"{h:>{max(len(h), 4)}}" for h in heads))
for r in rows:
    cells = [short.get(table.get((c, r), ("-",))[0], "-") for c in cols]
    print(f"{r:{width}}  " + "  ".join(f"{x:>{max(len(h), 4)}}" for x, h in zip(cells, heads)))
print()
print("share (protections not counted; skips are tools missing or failing on the host too):")
for c, h in zip(cols, heads):
    st = [table[(c, r)][0] for r in rows if (c, r) in table]
    p, f, s = st.count("PASS"), st.count("FAIL"), st.count("SKIP")
    share = f"{100 * p / (p + f):.1f}%" if p + f else "-"
    leaks = st.count("LEAK")
    print(f"  {h:<28} passed {p:>3} of {p + f:>3} ({share}), skipped {s}" + (f", {leaks} LEAK" if leaks else ""))
print()
print("failures (last line of the command's stderr, or what the check saw):")
for c, h in zip(cols, heads):
    for r in rows:
        status, detail = table.get((c, r), ("-", ""))
        if status in ("FAIL", "LEAK"):
            print(f"  [{h}] {r}: {detail}")
EOF
} > "$work/report"
cat "$work/report"
cp "$work/report" "$out"
echo "written to $out" >&2
