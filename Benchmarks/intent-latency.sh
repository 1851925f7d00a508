#!/usr/bin/env bash
# Server-driven collection's budget: a POS's intent created -> the terminal collecting it, median.
# Starts a throw-away horizon-server (embedded SQLite) on a free loopback port, then
# `horizon-bench intent-latency` activates a terminal key that keeps its intent connection as
# `horizon-terminal serve` does, creates intents for it and times each until it is claimed.
# Usage: Benchmarks/intent-latency.sh [--iterations N] [--bin DIR]  (DIR: the built programs,
# default .build/release; build with `swift build -c release` first). Writes
# Benchmarks/results/intent-latency-latest.json.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/.build/release"
iterations=50
while [ $# -gt 0 ]; do
    case "$1" in
        --iterations) iterations="$2"; shift 2 ;;
        --bin) bin="$2"; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
work="$(mktemp -d)"
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
printf 'correct horse battery staple\n' > "$work/password"
"$bin/horizon-server" init --data-dir "$work/server" >/dev/null
"$bin/horizon-server" merchants add "Bench Café" --email bench@example.com --currency EUR \
    --password-file "$work/password" --data-dir "$work/server" >/dev/null
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$bin/horizon-server" serve --data-dir "$work/server" --listen "127.0.0.1:$port" --log-level warning &
server_pid=$!
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    sleep 0.1
done
"$bin/horizon-bench" intent-latency --server "http://127.0.0.1:$port" --email bench@example.com \
    --password-file "$work/password" --intents "$iterations" \
    --output "$root/Benchmarks/results/intent-latency-latest.json"
