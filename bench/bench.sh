#!/usr/bin/env bash
# cordon benchmark: output throughput and spawn cost, reported as ratios against
# baselines measured in the same run (see bench/README.md).
#
#   bench/bench.sh            full run: 1 GiB of output, 300 spawns per command
#   bench/bench.sh --quick    smoke run: 256 MiB, 50 spawns per command
#
# Works from any cwd, as root or not. Needs cargo, hyperfine, GNU time and jq
# (the last three are installed with apt-get when missing and possible).

# Functions are called indirectly (traps, the SIDES table): not unreachable.
# shellcheck disable=SC2317

set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
RESULTS="$SCRIPT_DIR/results-latest.txt"

# ---------------------------------------------------------------- options
QUICK=0
STRICT=0
BUILD=1
SIZE_MIB=""
ROUNDS=""
SPAWN_ROUNDS=""
RUNS=""
WARMUP=""

usage() {
    cat <<'EOF'
usage: bench/bench.sh [--quick] [--strict] [--no-build] [--size-mib N] [--rounds N]
                      [--runs N] [--warmup N] [--spawn-rounds N]

  --quick       smoke run: 256 MiB of output, 2 rounds, 50 spawns per command
  --strict      exit 1 when a target is missed (default: report only)
  --no-build    skip `cargo build --release` (use the existing binary)
  --size-mib N  output volume in MiB (a multiple of 64; default 1024, quick 256)
  --rounds N    throughput rounds per side (default 3, quick 2)
  --runs N      hyperfine runs per spawn command (default 300, quick 50)
  --warmup N    hyperfine warmup runs per round (default 30, quick 5)
  --spawn-rounds N  split the spawn runs into N interleaved hyperfine rounds
                (default 3, quick 2); the times of all rounds are pooled

Environment: BENCH_TMPDIR  where the scratch directory goes (default $TMPDIR or
/tmp); it needs about 2x the output volume free, on a disk-backed filesystem.
Results: printed and written to bench/results-latest.txt.
EOF
}

while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1 ;;
        --strict) STRICT=1 ;;
        --no-build) BUILD=0 ;;
        --size-mib) SIZE_MIB=${2:?--size-mib needs a value}; shift ;;
        --rounds) ROUNDS=${2:?--rounds needs a value}; shift ;;
        --runs) RUNS=${2:?--runs needs a value}; shift ;;
        --warmup) WARMUP=${2:?--warmup needs a value}; shift ;;
        --spawn-rounds) SPAWN_ROUNDS=${2:?--spawn-rounds needs a value}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "bench: unknown option: $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

if [ "$QUICK" = 1 ]; then
    : "${SIZE_MIB:=256}" "${ROUNDS:=2}" "${RUNS:=50}" "${WARMUP:=5}" "${SPAWN_ROUNDS:=2}"
else
    : "${SIZE_MIB:=1024}" "${ROUNDS:=3}" "${RUNS:=300}" "${WARMUP:=30}" "${SPAWN_ROUNDS:=3}"
fi
for v in SIZE_MIB ROUNDS RUNS WARMUP SPAWN_ROUNDS; do
    case "${!v}" in ''|*[!0-9]*) echo "bench: $v must be a positive integer" >&2; exit 2 ;; esac
    [ "${!v}" -gt 0 ] || { echo "bench: $v must be positive" >&2; exit 2; }
done
CHUNK_MIB=64
if [ $((SIZE_MIB % CHUNK_MIB)) -ne 0 ]; then
    echo "bench: --size-mib must be a multiple of $CHUNK_MIB" >&2
    exit 2
fi
REPEAT=$((SIZE_MIB / CHUNK_MIB))
BYTES=$((SIZE_MIB * 1024 * 1024))

RSS_TARGET_KIB=$((32 * 1024))   # cordon peak RSS ≤ 32 MiB
TPUT_TARGET=0.80                # cordon throughput ≥ 0.8× baseline
LL_VS_FULL_MS=0.5               # landlock ≤ full-access (passthrough) + 0.5 ms
LL_VS_BARE_MS=1.0               # landlock ≤ bare + 1 ms

log() { printf '[bench] %s\n' "$*" >&2; }
die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- dependencies
SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
APT_UPDATED=0
apt_install() {
    command -v apt-get >/dev/null 2>&1 || return 1
    if [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then return 1; fi
    log "installing $* with apt-get"
    if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "$@" >&2; then
        [ "$APT_UPDATED" = 1 ] && return 1
        $SUDO apt-get update -q >&2 || return 1
        APT_UPDATED=1
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "$@" >&2 || return 1
    fi
}
have_gnu_time() {
    local out   # no pipe into grep -q: with pipefail, an early grep exit can fail it
    [ -x /usr/bin/time ] && out=$(/usr/bin/time -v true 2>&1) && [[ $out == *'Maximum resident set size'* ]]
}

[ "$BUILD" = 0 ] || command -v cargo >/dev/null 2>&1 || die "cargo not found"
command -v hyperfine >/dev/null 2>&1 || apt_install hyperfine || die "hyperfine missing (apt-get install hyperfine, or cargo install hyperfine)"
command -v jq >/dev/null 2>&1 || apt_install jq || die "jq missing (apt-get install jq)"
have_gnu_time || apt_install time || true
have_gnu_time || die "GNU time missing at /usr/bin/time (apt-get install time)"
hyperfine -N --runs 1 --style none true >/dev/null 2>&1 || die "hyperfine does not support -N (need hyperfine ≥ 1.13)"

# ---------------------------------------------------------------- build
if [ "$BUILD" = 1 ]; then
    log "cargo build --release"
    (cd "$REPO" && cargo build --release) >&2
fi
TARGET_DIR=$(cd "$REPO" && cargo metadata --format-version 1 --no-deps 2>/dev/null | jq -r .target_directory) || true
[ -n "$TARGET_DIR" ] || TARGET_DIR="${CARGO_TARGET_DIR:-$REPO/target}"
CORDON="$TARGET_DIR/release/cordon"
[ -x "$CORDON" ] || die "no binary at $CORDON (build failed, or run without --no-build)"

# ---------------------------------------------------------------- scratch space
SCRATCH_BASE=${BENCH_TMPDIR:-${TMPDIR:-/tmp}}
WORK=$(mktemp -d "$SCRATCH_BASE/cordon-bench.XXXXXX")
cleanup() {
    # Everything the run creates lives under $WORK: the source, the baseline
    # output, cordon's spill files (TMPDIR points inside), the workspace.
    rm -rf -- "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$WORK/tmp" "$WORK/ws/.git"
# cordon's state and spill directory ($TMPDIR/cordon-<uid>) lands inside $WORK.
export TMPDIR="$WORK/tmp"

need_kib=$(( (BYTES * 3 + CHUNK_MIB * 1024 * 1024) / 1024 + 256 * 1024 ))
free_kib=$(df -Pk "$WORK" | awk 'NR==2 {print $4}')
[ "$free_kib" -ge "$need_kib" ] || die "need $((need_kib / 1024)) MiB free under $SCRATCH_BASE, have $((free_kib / 1024)) MiB (set BENCH_TMPDIR)"
FSTYPE=$(stat -f -c %T "$WORK")

# ---------------------------------------------------------------- helpers
now_ns() { date +%s%N; }
# ms/s arithmetic and formatting through awk (bash has no floats).
calc() { awk "BEGIN { printf \"%s\", $* }"; }
fmt() { awk -v x="$1" -v p="${2:-2}" 'BEGIN { printf "%.*f", p, x }'; }
# ok|MISS for a comparison "a <= b" or "a >= b".
verdict() { awk -v a="$1" -v op="$2" -v b="$3" 'BEGIN { ok = (op == "<=") ? (a <= b) : (a >= b); print ok ? "ok" : "MISS" }'; }
MISSES=0
note_verdict() { [ "$1" = ok ] || MISSES=$((MISSES + 1)); }
# Quote one word for hyperfine -N (POSIX shell-words splitting).
shq() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
minimum() { awk 'NR == 1 || $1 < m { m = $1 } END { print m }'; }
maximum() { awk 'NR == 1 || $1 > m { m = $1 } END { print m }'; }

# ================================================================ 1. throughput
log "throughput: generating a ${CHUNK_MIB} MiB random source, repeated ${REPEAT}x = ${SIZE_MIB} MiB"
SRC="$WORK/src.bin"
head -c "${CHUNK_MIB}M" /dev/urandom >"$SRC"
cat "$SRC" >/dev/null   # warm the page cache: both sides read it from memory
PRODUCER=(cat)
for _ in $(seq "$REPEAT"); do PRODUCER+=("$SRC"); done

BASE_OUT="$WORK/baseline.out"
PIPE_OUT="$WORK/pipe.out"
base_times=() pipe_times=() cordon_times=() base_rss=() cordon_rss=()
SPILL_SIZE_OK=ok SPILL_CONTENT=ok SPILL_REMOVED=ok SPILL_SIZES=()

# The baseline file is opened with O_APPEND (>>) on an empty file: GNU cat >= 9.0
# otherwise uses copy_file_range(2) for file-to-file copies, an in-kernel copy that
# never passes the bytes through the producer, so it would not be "the producer
# writing the same bytes". With O_APPEND cat falls back to read/write with the same
# 128 KiB buffer it uses for a pipe.
run_baseline() {
    local t0 t1
    : >"$BASE_OUT"
    sync
    t0=$(now_ns)
    /usr/bin/time -v -o "$WORK/time-base.txt" "${PRODUCER[@]}" >>"$BASE_OUT"
    t1=$(now_ns)
    base_times+=("$(calc "($t1 - $t0) / 1e9")")
    base_rss+=("$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time-base.txt")")
}

# Reference only (no target): the same producer into a pipe read by a plain `cat`
# that appends to a file. Shows how much of cordon's gap is the pipe itself.
run_pipe() {
    local t0 t1
    : >"$PIPE_OUT"
    sync
    t0=$(now_ns)
    "${PRODUCER[@]}" | cat >>"$PIPE_OUT"
    t1=$(now_ns)
    pipe_times+=("$(calc "($t1 - $t0) / 1e9")")
}

run_cordon() {
    local t0 t1 rc=0
    sync
    t0=$(now_ns)
    /usr/bin/time -v -o "$WORK/time-cordon.txt" \
        "$CORDON" run --json --mode full-access -- "${PRODUCER[@]}" >"$WORK/cordon.json" 2>"$WORK/cordon.err" || rc=$?
    t1=$(now_ns)
    [ "$rc" -eq 0 ] || die "cordon run --json exited $rc: $(head -c 2000 "$WORK/cordon.json") $(head -c 2000 "$WORK/cordon.err")"
    jq -e '.exit_code == 0' "$WORK/cordon.json" >/dev/null || die "the producer failed under cordon: $(head -c 2000 "$WORK/cordon.json")"
    cordon_times+=("$(calc "($t1 - $t0) / 1e9")")
    cordon_rss+=("$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time-cordon.txt")")
    SPILL=$(jq -r '.stdout.spill_path // empty' "$WORK/cordon.json")
    if [ -z "$SPILL" ] || [ ! -f "$SPILL" ]; then
        die "no stdout.spill_path in cordon's JSON (or the file is gone): $(head -c 2000 "$WORK/cordon.json")"
    fi
}

SIDES=(run_baseline run_cordon run_pipe)
for round in $(seq "$ROUNDS"); do
    log "throughput round $round/$ROUNDS"
    # Rotate the order so no side always runs right after another's writeback.
    for k in 0 1 2; do "${SIDES[$(( (round - 1 + k) % 3 ))]}"; done
    size=$(stat -c %s "$SPILL")
    SPILL_SIZES+=("$size")
    [ "$size" -eq "$BYTES" ] || SPILL_SIZE_OK=MISS
    for f in "$BASE_OUT" "$PIPE_OUT"; do
        [ "$(stat -c %s "$f")" -eq "$BYTES" ] || die "$f holds $(stat -c %s "$f") bytes, expected $BYTES"
    done
    if [ "$round" -eq 1 ]; then
        cmp -s "$SPILL" "$BASE_OUT" || SPILL_CONTENT=MISS
    fi
    rm -f -- "$SPILL" "$BASE_OUT" "$PIPE_OUT"
    [ ! -e "$SPILL" ] || SPILL_REMOVED=MISS
done
# Nothing else may be left in cordon's spill directory.
LEFTOVER=$(find "$TMPDIR" -type f | wc -l)
[ "$LEFTOVER" -eq 0 ] || SPILL_REMOVED=MISS
rm -f -- "$SRC"

T_BASE=$(printf '%s\n' "${base_times[@]}" | median)
T_CORD=$(printf '%s\n' "${cordon_times[@]}" | median)
T_BASE_MIN=$(printf '%s\n' "${base_times[@]}" | minimum)
T_PIPE=$(printf '%s\n' "${pipe_times[@]}" | median)
T_PIPE_MIN=$(printf '%s\n' "${pipe_times[@]}" | minimum)
T_CORD_MIN=$(printf '%s\n' "${cordon_times[@]}" | minimum)
RSS_CORD=$(printf '%s\n' "${cordon_rss[@]}" | maximum)
RSS_BASE=$(printf '%s\n' "${base_rss[@]}" | maximum)
TPUT_RATIO=$(calc "$T_BASE / $T_CORD")
TPUT_RATIO_MIN=$(calc "$T_BASE_MIN / $T_CORD_MIN")
V_TPUT=$(verdict "$TPUT_RATIO" ">=" "$TPUT_TARGET"); note_verdict "$V_TPUT"
V_RSS=$(verdict "$RSS_CORD" "<=" "$RSS_TARGET_KIB"); note_verdict "$V_RSS"
note_verdict "$SPILL_SIZE_OK"; note_verdict "$SPILL_CONTENT"; note_verdict "$SPILL_REMOVED"

# ================================================================ 2. spawn cost
WS="$WORK/ws"
cd "$WS"
Q_CORDON=$(shq "$CORDON")
Q_WS=$(shq "$WS")
Q_GIT=$(shq "$WS/.git")
NAMES=(bare version full-access landlock)
CMDS=(
    "true"
    "$Q_CORDON --version"
    "$Q_CORDON run --mode full-access -- true"
    "$Q_CORDON run --mode workspace-write --runner landlock -- true"
)
DESCS=(
    "true (no wrapper)"
    "cordon --version (start, no run)"
    "cordon full-access (passthrough)"
    "cordon workspace-write (landlock)"
)

# Preflight: each command must succeed once, and landlock must really be landlock.
LL_JSON=$("$CORDON" run --json --mode workspace-write --runner landlock -- true 2>"$WORK/preflight.err") \
    || die "cordon's landlock runner failed here: $LL_JSON $(head -c 2000 "$WORK/preflight.err")"
LL_FACTS=$(jq -r '"runner=\(.sandbox.runner) enforcement=\(.sandbox.enforcement.level)"' <<<"$LL_JSON")
[ "$(jq -r .sandbox.runner <<<"$LL_JSON")" = landlock ] || die "expected the landlock runner, got: $LL_FACTS"
"$CORDON" run --mode full-access -- true >/dev/null 2>"$WORK/preflight.err" \
    || die "cordon run --mode full-access -- true failed: $(head -c 2000 "$WORK/preflight.err")"

# cordon's own bwrap runner, when this build implements it.
if "$CORDON" run --mode workspace-write --runner bwrap -- true >/dev/null 2>&1; then
    NAMES+=(cordon-bwrap)
    CMDS+=("$Q_CORDON run --mode workspace-write --runner bwrap -- true")
    DESCS+=("cordon workspace-write (bwrap runner)")
fi

BWRAP_NOTE=""
if command -v bwrap >/dev/null 2>&1; then
    BWRAP=$(command -v bwrap)
    BWRAP_ARGS="--ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --tmpfs /dev/shm --bind $Q_WS $Q_WS --ro-bind $Q_GIT $Q_GIT --unshare-all --new-session --die-with-parent --cap-drop ALL -- true"
    if eval "$(shq "$BWRAP") $BWRAP_ARGS" >/dev/null 2>"$WORK/bwrap.err"; then
        NAMES+=(bwrap)
        CMDS+=("$(shq "$BWRAP") $BWRAP_ARGS")
        DESCS+=("bubblewrap, equivalent policy")
    else
        BWRAP_NOTE="bwrap present but failed here: $(head -c 200 "$WORK/bwrap.err" | tr '\n' ' ')"
    fi
else
    BWRAP_NOTE="bwrap not installed: no bubblewrap comparison"
fi

# Load on a shared machine comes in bursts; hyperfine runs each command's batch in
# one go, so a burst would land on one command only. Split the runs into rounds,
# each running every command (in a rotated order), and pool the times.
RUNS_PER_ROUND=$(( (RUNS + SPAWN_ROUNDS - 1) / SPAWN_ROUNDS ))
TOTAL_RUNS=$((RUNS_PER_ROUND * SPAWN_ROUNDS))
LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)
N=${#NAMES[@]}
for r in $(seq "$SPAWN_ROUNDS"); do
    HF_ARGS=(-N --warmup "$WARMUP" --runs "$RUNS_PER_ROUND" --style basic --export-json "$WORK/spawn-$r.json")
    for k in $(seq 0 $((N - 1))); do
        i=$(( (r - 1 + k) % N ))
        HF_ARGS+=(-n "${NAMES[$i]}" "${CMDS[$i]}")
    done
    log "spawn cost round $r/$SPAWN_ROUNDS: hyperfine -N, $RUNS_PER_ROUND runs + $WARMUP warmup per command (cwd: workspace with a .git)"
    hyperfine "${HF_ARGS[@]}" >&2
done
LOAD_AFTER=$(cut -d' ' -f1 /proc/loadavg)

# name -> "median mean stddev min max" in ms, over the pooled times of all rounds
declare -A ST
while IFS=$'\t' read -r name med mean sd mn mx; do
    ST[$name]="$med $mean $sd $mn $mx"
done < <(jq -rs '
    [.[].results[]] | group_by(.command)[]
    | (map(.times) | add | map(. * 1000) | sort) as $t
    | ($t | length) as $n
    | ($t | add / $n) as $mean
    | [ .[0].command,
        (if $n % 2 == 1 then $t[($n - 1) / 2] else ($t[$n / 2 - 1] + $t[$n / 2]) / 2 end),
        $mean,
        (if $n > 1 then (($t | map((. - $mean) * (. - $mean)) | add) / ($n - 1) | sqrt) else 0 end),
        $t[0], $t[-1] ]
    | @tsv' "$WORK"/spawn-*.json)
get() { local a; read -r -a a <<<"${ST[$1]}"; echo "${a[$2]}"; }   # 0 med 1 mean 2 sd 3 min 4 max

B_MED=$(get bare 0); B_MEAN=$(get bare 1)
F_MED=$(get full-access 0); F_MEAN=$(get full-access 1)
L_MED=$(get landlock 0); L_MEAN=$(get landlock 1)
D_LF_MED=$(calc "$L_MED - $F_MED"); D_LF_MEAN=$(calc "$L_MEAN - $F_MEAN")
D_LB_MED=$(calc "$L_MED - $B_MED"); D_LB_MEAN=$(calc "$L_MEAN - $B_MEAN")
V_LF=$(verdict "$D_LF_MED" "<=" "$LL_VS_FULL_MS"); note_verdict "$V_LF"
V_LB=$(verdict "$D_LB_MED" "<=" "$LL_VS_BARE_MS"); note_verdict "$V_LB"
V_LF_MEAN=$(verdict "$D_LF_MEAN" "<=" "$LL_VS_FULL_MS")
V_LB_MEAN=$(verdict "$D_LB_MEAN" "<=" "$LL_VS_BARE_MS")
cd "$REPO"

# ================================================================ 3. summary
COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null)" ]; then COMMIT="$COMMIT+dirty"; fi
CPU=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || true)
rounds() { local x out=(); for x in "$@"; do out+=("$(fmt "$x" 3)"); done; (IFS=/; echo "${out[*]}"); }
MIB() { fmt "$(calc "$1 / 1024")" 1; }
signed() { awk -v x="$1" 'BEGIN { printf "%+.3f", x }'; }

{
    echo "cordon bench — $(date -u +%Y-%m-%dT%H:%M:%SZ)  commit $COMMIT  $( [ "$QUICK" = 1 ] && echo QUICK || echo FULL )"
    echo "host: $(uname -sr) $(uname -m), $(nproc) CPUs${CPU:+ ($CPU)}, uid $(id -u), load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "scratch: $SCRATCH_BASE ($FSTYPE)"
    echo
    echo "1. Output throughput: ${SIZE_MIB} MiB of random bytes (cat of a ${CHUNK_MIB} MiB file x${REPEAT}), $ROUNDS rounds each"
    printf '   %-44s %9s %9s %10s %10s\n' "" "median s" "min s" "MiB/s med" "peak RSS"
    printf '   %-44s %9s %9s %10s %10s\n' "baseline: cat ... >> file" \
        "$(fmt "$T_BASE" 3)" "$(fmt "$T_BASE_MIN" 3)" "$(fmt "$(calc "$SIZE_MIB / $T_BASE")" 0)" "$(MIB "$RSS_BASE") MiB"
    printf '   %-44s %9s %9s %10s %10s\n' "reference: cat ... | cat >> file" \
        "$(fmt "$T_PIPE" 3)" "$(fmt "$T_PIPE_MIN" 3)" "$(fmt "$(calc "$SIZE_MIB / $T_PIPE")" 0)" "-"
    printf '   %-44s %9s %9s %10s %10s\n' "cordon run --json --mode full-access -- cat" \
        "$(fmt "$T_CORD" 3)" "$(fmt "$T_CORD_MIN" 3)" "$(fmt "$(calc "$SIZE_MIB / $T_CORD")" 0)" "$(MIB "$RSS_CORD") MiB"
    printf '   %-44s baseline %s | pipe %s | cordon %s\n' "per round, s (to judge the noise)" \
        "$(rounds "${base_times[@]}")" "$(rounds "${pipe_times[@]}")" "$(rounds "${cordon_times[@]}")"
    printf '   %-44s %s x (min/min %s x)   target >= %s x   [%s]\n' "throughput ratio cordon/baseline (median)" \
        "$(fmt "$TPUT_RATIO" 2)" "$(fmt "$TPUT_RATIO_MIN" 2)" "$TPUT_TARGET" "$V_TPUT"
    printf '   %-44s %s x (no target)\n' "reference: pipe/baseline (median)" "$(fmt "$(calc "$T_BASE / $T_PIPE")" 2)"
    printf '   %-44s %s MiB (%s KiB)   target <= 32 MiB   [%s]\n' "cordon peak RSS (max over rounds)" \
        "$(MIB "$RSS_CORD")" "$RSS_CORD" "$V_RSS"
    printf '   %-44s %s B, expected %s B   [%s]\n' "spill file size (every round)" \
        "$(printf '%s\n' "${SPILL_SIZES[@]}" | sort -u | paste -sd/)" "$BYTES" "$SPILL_SIZE_OK"
    printf '   %-44s [%s]\n' "spill bytes identical to the baseline file" "$SPILL_CONTENT"
    printf '   %-44s [%s]\n' "spill files removed, none left behind" "$SPILL_REMOVED"
    echo
    echo "2. Spawn cost: whole process, hyperfine -N, $TOTAL_RUNS runs per command ($SPAWN_ROUNDS interleaved rounds of $RUNS_PER_ROUND, $WARMUP warmup each); ms"
    echo "   cwd = a workspace with a .git; load average before/after: $LOAD_BEFORE/$LOAD_AFTER"
    echo "   $LL_FACTS (landlock preflight)"
    printf '   %-14s %-34s %7s %7s %6s %7s | %-15s | %-15s | %6s %6s\n' \
        "name" "what" "median" "mean" "sd" "min" "d bare med/mean" "d full med/mean" "x bare" "x full"
    for i in "${!NAMES[@]}"; do
        n=${NAMES[$i]}
        med=$(get "$n" 0); mean=$(get "$n" 1); sd=$(get "$n" 2); mn=$(get "$n" 3)
        if [ "$n" = bare ]; then db="-"; else db="$(signed "$(calc "$med - $B_MED")")/$(signed "$(calc "$mean - $B_MEAN")")"; fi
        if [ "$n" = bare ] || [ "$n" = version ] || [ "$n" = full-access ]; then df_="-"; else df_="$(signed "$(calc "$med - $F_MED")")/$(signed "$(calc "$mean - $F_MEAN")")"; fi
        printf '   %-14s %-34s %7s %7s %6s %7s | %-15s | %-15s | %6s %6s\n' \
            "$n" "${DESCS[$i]}" "$(fmt "$med" 3)" "$(fmt "$mean" 3)" "$(fmt "$sd" 3)" "$(fmt "$mn" 3)" \
            "$db" "$df_" "$(fmt "$(calc "$med / $B_MED")" 2)" "$(fmt "$(calc "$med / $F_MED")" 2)"
    done
    printf '   target: landlock <= full-access + %s ms   median %s ms [%s]   (mean %s ms [%s])\n' \
        "$LL_VS_FULL_MS" "$(signed "$D_LF_MED")" "$V_LF" "$(signed "$D_LF_MEAN")" "$V_LF_MEAN"
    printf '   target: landlock <= bare + %s ms          median %s ms [%s]   (mean %s ms [%s])\n' \
        "$LL_VS_BARE_MS" "$(signed "$D_LB_MED")" "$V_LB" "$(signed "$D_LB_MEAN")" "$V_LB_MEAN"
    [ -z "$BWRAP_NOTE" ] || echo "   note: $BWRAP_NOTE"
    if awk -v a="$LOAD_BEFORE" -v b="$LOAD_AFTER" -v n="$(nproc)" 'BEGIN { exit !((a >= n) || (b >= n)) }'; then
        echo "   WARNING: load average at or above the CPU count during the spawn runs: other work was competing; rerun when quiet"
    fi
    echo
    if [ "$MISSES" -eq 0 ]; then echo "all targets met"; else echo "$MISSES target(s) missed (headline figures: medians)"; fi
} >"$WORK/summary.txt"

echo >&2
cat "$WORK/summary.txt"
if cp "$WORK/summary.txt" "$RESULTS" 2>/dev/null; then
    log "summary written to $RESULTS"
else
    log "warning: could not write $RESULTS (the summary is above)"
fi

if [ "$STRICT" = 1 ] && [ "$MISSES" -ne 0 ]; then exit 1; fi
exit 0
