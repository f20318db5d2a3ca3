#!/bin/sh
# Throughput of cordon's egress proxy (`--allow-host`, docs/network.md): a 100 MB
# download from a loopback HTTP server, once through the proxy and once directly
# (`--network`), each under the same runner, as the median of ROUNDS runs; prints the
# seconds and the ratio proxy/direct. Both runs include cordon's own start-up, which is
# small next to the transfer. The proxy run names the server by its IP
# (`--allow-host 127.0.0.1:PORT`), the one way a release build may reach loopback.
#
#   bench/proxy_throughput.sh [path/to/cordon] [ROUNDS]   (default: target/release/cordon, 5)
#
# A benchmark, not a test: it prints, it does not judge.
set -u
CORDON=${1:-target/release/cordon}
ROUNDS=${2:-5}
[ -x "$CORDON" ] || { echo "no cordon at $CORDON (cargo build --release)"; exit 2; }
CORDON=$(cd "$(dirname "$CORDON")" && pwd)/$(basename "$CORDON")
command -v curl >/dev/null || { echo "needs curl"; exit 2; }
command -v python3 >/dev/null || { echo "needs python3"; exit 2; }
DIR=$(mktemp -d /var/tmp/cordon-proxy-bench-XXXXXX)
WS="$DIR/ws"
mkdir -p "$WS" "$DIR/srv"
head -c 100000000 /dev/zero > "$DIR/srv/big"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
(cd "$DIR/srv" && exec python3 -m http.server "$PORT" --bind 127.0.0.1 >/dev/null 2>&1) &
SRV=$!
trap 'kill $SRV 2>/dev/null; rm -rf "$DIR"' EXIT
i=0
until curl -s -o /dev/null "http://127.0.0.1:$PORT/" || [ $i -ge 50 ]; do sleep 0.1; i=$((i+1)); done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
one() { # $1: extra flags
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    (cd "$WS" && "$CORDON" run --json $1 -- curl -sS -f -o /dev/null "http://127.0.0.1:$PORT/big") >"$DIR/out.json" 2>/dev/null
    end=$(date +%s.%N)
    grep -q '"exit_code":0' "$DIR/out.json" || { echo "run failed: $(head -c 400 "$DIR/out.json")" >&2; exit 1; }
    echo "$end - $start" | bc
}
printf '%-9s %10s %10s %7s\n' runner direct_s proxy_s ratio
for runner in landlock bwrap; do
    d=$(for _ in $(seq "$ROUNDS"); do one "--runner $runner --network"; done | median)
    p=$(for _ in $(seq "$ROUNDS"); do one "--runner $runner --allow-host 127.0.0.1:$PORT"; done | median)
    printf '%-9s %10.3f %10.3f %7.2f\n' "$runner" "$d" "$p" "$(echo "$p / $d" | bc -l)"
done
