#!/usr/bin/env bash
# Spawn cost, side by side: what each way of starting `/bin/true` adds over starting it
# bare, measured in one interleaved run (so machine noise hits every row alike), as
# median added milliseconds and as a ratio. Rows: cordon (CLI: --version alone,
# full-access, workspace-write with the landlock runner, the bwrap runner), the library
# (a warm Executor against std::process::Command in the same process), `cordon serve`
# (sequential and 64 in flight), and the peers installed here: bubblewrap alone with
# cordon's bwrap policy, a minimal Landlock wrapper (bench/landlock_floor.c: the kernel
# work alone), Anthropic's sandbox-runtime (`srt`) and OpenAI's Codex sandbox
# (`codex sandbox`). A missing peer is skipped and said so. Also measured: what one
# cgroup attach costs on this host (docs/performance.md says why it matters).
#
# Usage: bench/spawn.sh [--quick] [--no-build] [--runs N] [--rounds N]
#   --quick     40 runs per command in 2 rounds (default 200 in 4)
#   --no-build  use the existing target/release binaries (and the static build in
#               target/x86_64-unknown-linux-gnu/release when newer than them)
# The static rows are the same CLI built by `cargo build-static` (x86_64 glibc Linux);
# a phase profile of one CLI run follows the table (CORDON_TRACE_PHASES=1).
# Peers are looked up on PATH and in $SPAWN_PEERS/node_modules/.bin (e.g. after
# `npm install --prefix DIR @anthropic-ai/sandbox-runtime @openai/codex`; both need
# ripgrep and socat). Needs hyperfine (>= 1.13), jq, python3; cc for the floor row.
# SPAWN_BASELINE=<an older cordon binary> adds alternating serve rounds through it
# (64 in flight) and the throughput ratio.
# Results: printed, and written to bench/spawn-latest.txt. A benchmark, not a test: it
# exits 0 whatever the figures say.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
runs=200 rounds=4 build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) runs=40 rounds=2 ;;
        --no-build) build=0 ;;
        --runs) runs=$2; shift ;;
        --rounds) rounds=$2; shift ;;
        -h|--help) sed -n 2,25p "$0"; exit 0 ;;
        *) echo "spawn.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
for t in hyperfine jq python3; do
    command -v "$t" >/dev/null 2>&1 || { echo "spawn.sh: $t is needed (apt-get install $t)" >&2; exit 2; }
done
target=${CARGO_TARGET_DIR:-$here/target}
if [ "$build" = 1 ]; then
    (cd "$here" && cargo build -q --release --bin cordon --example spawn_bench)
    # The statically linked build (`cargo build-static`, .cargo/config.toml), where
    # it builds: x86_64 glibc Linux.
    if [ "$(uname -m)" = x86_64 ]; then
        (cd "$here" && cargo build-static -q 2>/dev/null) || echo "spawn.sh: cargo build-static failed; no static rows" >&2
    fi
fi
cordon=$target/release/cordon
static=$target/x86_64-unknown-linux-gnu/release/cordon
libbench=$target/release/examples/spawn_bench
[ -x "$cordon" ] && [ -x "$libbench" ] || { echo "spawn.sh: build first (cargo build --release --example spawn_bench)" >&2; exit 2; }

work=$(mktemp -d /var/tmp/cordon-spawn-XXXXXX)
trap 'rm -rf "$work"' EXIT
ws=$work/ws
mkdir -p "$ws" && git -C "$ws" init -q . 2>/dev/null || mkdir -p "$ws/.git"
out=$work/out.txt
say() { printf '%s\n' "$*" | tee -a "$out"; }
q() { printf '%q' "$1"; }

say "cordon spawn cost — $(date -u +%Y-%m-%dT%H:%M:%SZ)  commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')"
say "host: $(uname -sr), $(nproc) CPUs, uid $(id -u), load $(cut -d' ' -f1-3 /proc/loadavg)"

# --- one cgroup attach (the per-run cost of cordon's default limits; see docs/performance.md)
attach=$(python3 - <<'EOF' 2>/dev/null || true
import os, statistics, time
def own(ctrl):
    for line in open("/proc/self/cgroup"):
        _, ctrls, path = line.rstrip("\n").split(":", 2)
        if ctrl in ctrls.split(","):
            return f"/sys/fs/cgroup/{ctrl}{path}".rstrip("/")
    return None
base = own("pids") or own("memory")
if base is None and os.path.exists("/sys/fs/cgroup/cgroup.procs"):
    base = "/sys/fs/cgroup"
probe = f"{base}/cordon-spawn-probe-{os.getpid()}"
os.mkdir(probe)
def attach(file):
    # A fresh single-threaded child moves itself, as a run's init does; 50 ms apart,
    # so each attach starts cold (no writer within the last RCU grace period).
    times = []
    for _ in range(5):
        time.sleep(0.05)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            fd = os.open(f"{probe}/{file}", os.O_WRONLY)
            t = time.perf_counter(); os.write(fd, b"0")
            os.write(w, str((time.perf_counter() - t) * 1e3).encode()); os._exit(0)
        os.waitpid(pid, 0); times.append(float(os.read(r, 64))); os.close(r); os.close(w)
    return statistics.median(times)
try:
    procs = attach("cgroup.procs")
    tasks = f", tasks (what cordon writes on v1) {attach('tasks'):.3f} ms" if os.path.exists(f"{probe}/tasks") else ""
finally:
    os.rmdir(probe)
print(f"cgroup.procs {procs:.3f} ms{tasks} (medians of 5, {base})")
EOF
)
say "one cgroup attach on this host: ${attach:-not measured (needs root and a writable cgroup)}"

# --- the CLI rows and the peers (hyperfine -N, interleaved rounds, pooled)
names=() cmds=()
row() { names+=("$1"); cmds+=("$2"); }
Q=$(q "$cordon")
row bare "/bin/true"
row cordon-version "$Q --version"
row cordon-full-access "$Q run --mode full-access -- /bin/true"
row cordon-landlock "$Q run --mode workspace-write --runner landlock -- /bin/true"
if [ -x "$static" ] && [ "$static" -nt "$cordon" -o "$build" = 1 ]; then
    S=$(q "$static")
    row static-version "$S --version"
    row static-full-access "$S run --mode full-access -- /bin/true"
    row static-landlock "$S run --mode workspace-write --runner landlock -- /bin/true"
else
    say "skip static rows: no static build newer than the default one (cargo build-static)"
fi
if "$cordon" run -q --mode workspace-write --runner bwrap -- /bin/true >/dev/null 2>&1; then
    row cordon-bwrap "$Q run --mode workspace-write --runner bwrap -- /bin/true"
else
    say "skip cordon-bwrap: the bwrap runner does not run here"
fi
if command -v bwrap >/dev/null 2>&1; then
    row bwrap-alone "$(q "$(command -v bwrap)") --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --tmpfs /dev/shm --bind $(q "$ws") $(q "$ws") --ro-bind $(q "$ws/.git") $(q "$ws/.git") --unshare-all --new-session --die-with-parent --cap-drop ALL -- /bin/true"
else
    say "skip bwrap-alone: bubblewrap not installed"
fi
if command -v cc >/dev/null 2>&1 && cc -O2 -o "$work/landlock_floor" "$here/bench/landlock_floor.c" 2>/dev/null \
    && "$work/landlock_floor" "$ws" /bin/true; then
    row landlock-floor "$(q "$work/landlock_floor") $(q "$ws") /bin/true"
else
    say "skip landlock-floor: no C compiler, or Landlock unavailable"
fi
peer() { # NAME: the first of PATH and $SPAWN_PEERS/node_modules/.bin that has it
    if command -v "$1" >/dev/null 2>&1; then command -v "$1"
    elif [ -n "${SPAWN_PEERS:-}" ] && [ -x "$SPAWN_PEERS/node_modules/.bin/$1" ]; then echo "$SPAWN_PEERS/node_modules/.bin/$1"
    fi
}
srt=$(peer srt || true)
if [ -n "$srt" ] && (cd "$ws" && timeout 60 "$srt" /bin/true) >/dev/null 2>&1; then
    row sandbox-runtime "$(q "$srt") /bin/true"
else
    say "skip sandbox-runtime: srt not installed or not working here${srt:+ ($srt)}"
fi
codex=$(peer codex || true)
if [ -n "$codex" ] && (cd "$ws" && timeout 60 "$codex" sandbox -c 'sandbox_mode="workspace-write"' /bin/true) >/dev/null 2>&1; then
    row codex-sandbox "$(q "$codex") sandbox -c sandbox_mode=\"workspace-write\" /bin/true"
else
    say "skip codex-sandbox: codex not installed or not working here${codex:+ ($codex)}"
fi

per_round=$(( (runs + rounds - 1) / rounds ))
n=${#names[@]}
for r in $(seq "$rounds"); do
    args=(-N --warmup 5 --runs "$per_round" --style none --export-json "$work/hf-$r.json")
    for k in $(seq 0 $((n - 1))); do
        i=$(( (r - 1 + k) % n ))
        args+=(-n "${names[$i]}" "${cmds[$i]}")
    done
    (cd "$ws" && hyperfine "${args[@]}" >/dev/null)
done
declare -A med
while IFS=$'\t' read -r name m; do med[$name]=$m; done < <(jq -rs '
    [.[].results[]] | group_by(.command)[]
    | (map(.times) | add | map(. * 1000) | sort) as $t | ($t | length) as $n
    | [.[0].command, (if $n % 2 == 1 then $t[($n - 1) / 2] else ($t[$n / 2 - 1] + $t[$n / 2]) / 2 end)] | @tsv' "$work"/hf-*.json)
bare=${med[bare]}
say ""
say "CLI and peers: whole process, hyperfine -N, $((per_round * rounds)) runs each ($rounds interleaved rounds), median ms"
say "$(printf '  %-20s %9s %10s %8s' row median 'added' 'x bare')"
for name in "${names[@]}"; do
    m=${med[$name]}
    say "$(printf '  %-20s %9.3f %+10.3f %8.2f' "$name" "$m" "$(echo "$m - $bare" | bc -l)" "$(echo "$m / $bare" | bc -l)")"
done

# --- where one CLI run's time goes (CORDON_TRACE_PHASES=1; docs/performance.md)
say ""
say "phases of one CLI run, /bin/true (CORDON_TRACE_PHASES=1), medians of $per_round runs, µs"
for mode in full-access workspace-write; do
    line=$(cd "$ws" && for _ in $(seq "$per_round"); do
        CORDON_TRACE_PHASES=1 "$cordon" run --mode "$mode" -- /bin/true 2>&1 >/dev/null | grep '^cordon: phases'
    done | python3 -c '
import collections, statistics, sys
d = collections.OrderedDict()
for line in sys.stdin:
    for kv in line.split(":", 2)[2].split():
        k, v = kv.split("=")
        d.setdefault(k, []).append(int(v))
print(" ".join(f"{k}={statistics.median(v):.0f}" for k, v in d.items()), f"(sum {sum(statistics.median(v) for v in d.values()):.0f})")
')
    say "  $mode: $line"
done

# --- the library, warm (in-process baseline)
declare -A lib_added
say ""
say "library, warm executor, sequential (/bin/true vs std::process::Command in the same process)"
for mode in full-access workspace-write; do
    j=$(cd "$ws" && CORDON_TRACE_PHASES=1 "$libbench" "$runs" "$mode")
    lib_added[$mode]=$(jq -r '.added_ms.median' <<<"$j")
    say "$(jq -r '"  \(.mode) (\(.runner)): median \(.cordon_ms.median*1000|round/1000) ms vs \(.bare_ms.median*1000|round/1000) ms bare, added \(.added_ms.median*1000|round/1000) ms"' <<<"$j")"
    say "$(jq -r '"    phases (µs, medians): " + ([.phases_us[] | "\(.[0])=\(.[1])"] | join(" "))' <<<"$j")"
done

# --- serve: sequential and 64 in flight (and, with SPAWN_BASELINE=<an older cordon
# binary>, the same loads through it, alternating rounds, for the throughput ratio)
say ""
say "cordon serve, workspace-write, echo per run"
serve_round() { # BINARY INFLIGHT TOTAL JSON
    python3 "$here/bench/serve_load.py" --cordon "$1" --serve-only --runs "$3" --inflight "$2" --json "$4" >/dev/null || true
}
for inflight in 1 64; do
    total=$(( inflight == 1 ? runs : runs * 2 ))
    serve_round "$cordon" "$inflight" "$total" "$work/serve-$inflight.json"
    if [ -f "$work/serve-$inflight.json" ]; then
        say "$(jq -r --arg i "$inflight" '"  \($i) in flight: \(.serve.runs_per_second) runs/s, \((1000 / .serve.runs_per_second * 1000 | round) / 1000) ms per run, latency p50 \(.serve.latency_ms_p50) ms, lost \(.serve.lost), bad \(.serve.bad)"' "$work/serve-$inflight.json")"
    else
        say "  $inflight in flight: serve_load.py failed"
    fi
done
if [ -n "${SPAWN_BASELINE:-}" ] && [ -x "$SPAWN_BASELINE" ]; then
    say "  against SPAWN_BASELINE=$SPAWN_BASELINE, 64 in flight, $rounds alternating rounds of $((runs * 2)) runs (median runs/s):"
    for r in $(seq "$rounds"); do
        serve_round "$SPAWN_BASELINE" 64 $((runs * 2)) "$work/base-$r.json"
        serve_round "$cordon" 64 $((runs * 2)) "$work/this-$r.json"
    done
    base_rps=$(jq -s 'map(.serve.runs_per_second) | sort | .[length/2|floor]' "$work"/base-*.json 2>/dev/null || echo nan)
    this_rps=$(jq -s 'map(.serve.runs_per_second) | sort | .[length/2|floor]' "$work"/this-*.json 2>/dev/null || echo nan)
    serve_ratio=$(echo "scale=2; $this_rps / $base_rps" | bc -l 2>/dev/null || echo nan)
    say "    baseline $base_rps, this build $this_rps: ${serve_ratio}x"
fi

say ""
add() { echo "${med[$1]:-nan} - $bare" | bc -l 2>/dev/null || echo nan; }
goal() { # LABEL VALUE LIMIT
    local verdict=miss
    [ "$(echo "$2 <= $3" | bc -l 2>/dev/null || echo 0)" = 1 ] && verdict=met
    say "$(printf '  goal %-46s %+8.3f ms (limit +%s) %s' "$1" "$2" "$3" "$verdict")"
}
say "goals (issue 14; medians)"
goal "CLI workspace-write over bare" "$(add cordon-landlock)" 1.0
goal "CLI full-access over bare" "$(add cordon-full-access)" 0.5
if [ -n "${med[static-landlock]:-}" ]; then
    goal "CLI workspace-write over bare, static build" "$(add static-landlock)" 1.0
    goal "CLI full-access over bare, static build" "$(add static-full-access)" 0.5
fi
if [ -n "${med[cordon-bwrap]:-}" ] && [ -n "${med[bwrap-alone]:-}" ]; then
    goal "bwrap runner over bubblewrap alone" "$(echo "${med[cordon-bwrap]} - ${med[bwrap-alone]}" | bc -l)" 1.0
fi
for mode in full-access workspace-write; do
    [ -n "${lib_added[$mode]:-}" ] && goal "library $mode over Command" "${lib_added[$mode]}" 0.5
done
if [ -n "${serve_ratio:-}" ]; then
    verdict=miss
    [ "$(echo "$serve_ratio >= 2" | bc -l 2>/dev/null || echo 0)" = 1 ] && verdict=met
    say "$(printf '  goal %-46s %8sx    (limit 2x)   %s' "serve 64 in flight over SPAWN_BASELINE" "$serve_ratio" "$verdict")"
else
    say "  goal serve 64 in flight, 2x the build before issue 14: set SPAWN_BASELINE to judge it"
fi
cp "$out" "$here/bench/spawn-latest.txt"
