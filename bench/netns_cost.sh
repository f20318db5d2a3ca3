#!/usr/bin/env bash
# What a network namespace of the run's own costs (local IPC with the network off,
# docs/network.md): the same confined runs with it and without it
# (CORDON_DISABLE_NETNS=1, which plans the network-off filter in the host's
# namespace), side by side.
#
# 1. `cordon run --mode workspace-write -- /bin/true` (landlock runner), hyperfine -N,
#    both rows interleaved in rounds: median ms and the difference.
# 2. `cordon serve` churn: ROUNDS rounds of RUNS runs with 64 in flight
#    (bench/serve_load.py --serve-only), alternating with and without; runs/s per
#    round, so a namespace teardown that falls behind shows as later rounds slowing
#    down. As root, the kernel's `net_namespace` slab (live plus dying namespaces) is
#    read before, right after and 5 s after the churn.
#
# Usage: bench/netns_cost.sh [path/to/cordon] [runs-per-row] [churn-rounds] [churn-runs]
# (defaults: target/release/cordon 200 4 512). Needs hyperfine (>= 1.13) and python3.
# A benchmark, not a test: it prints, it does not judge.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cordon=${1:-$here/target/release/cordon}
runs=${2:-200}
rounds=${3:-4}
churn=${4:-512}
[ -x "$cordon" ] || { echo "netns_cost.sh: no cordon at $cordon (cargo build --release)" >&2; exit 2; }
command -v hyperfine >/dev/null || { echo "netns_cost.sh: hyperfine is needed" >&2; exit 2; }
work=$(mktemp -d /var/tmp/cordon-netns-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ws"
slab() { awk '$1 == "net_namespace" { print $2 }' /proc/slabinfo 2>/dev/null || true; }

echo "cordon netns cost — $(date -u +%FT%TZ)  $(uname -sr), $(nproc) CPUs, uid $(id -u), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "1. cordon run --mode workspace-write -- /bin/true (landlock), hyperfine -N, $runs runs per row in 4 rounds"
per=$((runs / 4))
for r in 1 2 3 4; do
    hyperfine -N -w 5 -r "$per" --export-json "$work/r$r.json" \
        -n with-netns "env -u CORDON_DISABLE_NETNS $cordon run --cwd $work/ws --mode workspace-write --runner landlock -- /bin/true" \
        -n without "env CORDON_DISABLE_NETNS=1 $cordon run --cwd $work/ws --mode workspace-write --runner landlock -- /bin/true" \
        >/dev/null 2>&1
done
python3 - "$work" <<'EOF'
import json, statistics, sys, glob
times = {}
for f in sorted(glob.glob(sys.argv[1] + "/r*.json")):
    for r in json.load(open(f))["results"]:
        times.setdefault(r["command"], []).extend(r["times"])
med = {k: statistics.median(v) * 1000 for k, v in times.items()}
for k, v in med.items():
    print(f"  {k:12} median {v:7.3f} ms  ({len(times[k])} runs)")
print(f"  difference   {med['with-netns'] - med['without']:+.3f} ms per run")
EOF
echo
echo "2. cordon serve churn, workspace-write, 64 in flight, $rounds rounds of $churn runs each way (alternating)"
before=$(slab)
for r in $(seq 1 "$rounds"); do
    for how in with without; do
        if [ "$how" = with ]; then envset="-u CORDON_DISABLE_NETNS"; else envset="CORDON_DISABLE_NETNS=1"; fi
        # shellcheck disable=SC2086
        line=$(env $envset python3 "$here/bench/serve_load.py" --cordon "$cordon" --runs "$churn" --inflight 64 \
            --serve-only | grep '^cordon serve')
        echo "  round $r $how netns: ${line#cordon serve }"
    done
done
after=$(slab)
sleep 5
later=$(slab)
if [ -n "$before" ]; then
    echo "  net_namespace slab objects: $before before, $after right after, $later 5 s later"
fi
