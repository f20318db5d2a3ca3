#!/usr/bin/env bash
# Build a statically linked release binary of cordon (glibc static-pie).
#
# Why: a dynamically linked Rust binary spends ~0.4-0.6 ms in the dynamic loader
# before main() on every `cordon run`; static linking removes that, which matters
# when an agent spawns thousands of short commands. cordon uses no NSS or dlopen
# features, so static glibc is safe for it.
#
# Why a script: `-C target-feature=+crt-static` must not reach proc-macro crates,
# and cargo only keeps RUSTFLAGS away from them when --target is explicit.
set -euo pipefail
cd "$(dirname "$0")/.."
host=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    cargo build --release --target "$host" --bin cordon "$@"
echo "target/$host/release/cordon"
