#!/usr/bin/env bash
# Every benchmark of the performance budget, one after another, then BENCHMARKS.md's table of
# today's figures (Benchmarks/figures.py). Run it on a quiet machine: nothing else building or
# testing (about 15 minutes after the release build, 25 with the VM).
#
#   Benchmarks/all.sh                    release build, then everything, the VM included
#   Benchmarks/all.sh --no-vm            without the BlueZ VM (no QEMU, or no time)
#   Benchmarks/all.sh --bin DIR          programs already built in release mode in DIR
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh

usage() {
    cat <<'EOF'
usage: Benchmarks/all.sh [--bin DIR] [--no-vm]

Runs, writing each result to Benchmarks/results/:
  1. Benchmarks/server-throughput.sh   horizon-server on PostgreSQL beside pgbench (payment script
                                       and TPC-B), and on SQLite, at 1, 4, 16 and 64 clients
  2. Benchmarks/run.sh                 a payment's CPU against its cryptography (files in this
                                       repository's file system), latency, scaling, at rest
  3. Benchmarks/terminal-share.sh      the same on a real disk, in process and through a server
  4. Benchmarks/intent-latency.sh      a POS's intent reaching the terminal
  5. Benchmarks/bluez-vm.sh            the tap on real bluetoothd in the VM (skipped with --no-vm)
then Benchmarks/figures.py rewrites BENCHMARKS.md's "Today's figures" from every result's
budget lines (the table it replaces stays below, under "Earlier figures").

  --bin DIR     horizon-server, horizon-bench, horizon-terminal built with -c release in DIR
  --no-vm       leave out the BlueZ VM
  -h, --help    this text
EOF
}

bin=""
vm=1
while [ $# -gt 0 ]; do
    case "$1" in
    --bin) [ -d "${2:-}" ] || die "--bin needs a directory of release-built programs"; bin=$(cd "$2" && pwd); shift 2 ;;
    --no-vm) vm=0; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown option $1" ;;
    esac
done
if [ -z "$bin" ]; then
    build_server_and_bench release
    step "building horizon-terminal (release)"
    swift build -c release --product horizon-terminal 2>&1 | filter_build_output
fi
for program in horizon-server horizon-bench horizon-terminal; do
    [ -x "$bin/$program" ] || die "$bin has no $program (build it with swift build -c release --product $program)"
done
case "$bin" in *release*) ;; *) echo "warning: $bin does not look like a release build; the figures will mean nothing" >&2 ;; esac

data=$(mktemp -d "$PWD/.build-bench-data.XXXXXX")
trap 'rm -rf "$data"' EXIT
steps=$((4 + vm))
step "1/$steps server throughput (Benchmarks/server-throughput.sh)"
Benchmarks/server-throughput.sh --bin "$bin"
step "2/$steps a payment's CPU, latency, scaling, at rest (Benchmarks/run.sh; files on $(df -T "$data" | awk 'NR == 2 { print $2 }'))"
Benchmarks/run.sh --bin "$bin" --data-dir "$data" --output Benchmarks/results/latest.json
step "3/$steps the terminal's share (Benchmarks/terminal-share.sh)"
Benchmarks/terminal-share.sh --bin "$bin"
step "4/$steps server-driven collection (Benchmarks/intent-latency.sh)"
Benchmarks/intent-latency.sh --bin "$bin"
if [ "$vm" = 1 ]; then
    step "5/$steps the tap on real bluetoothd (Benchmarks/bluez-vm.sh)"
    Benchmarks/bluez-vm.sh
fi
step "BENCHMARKS.md's table (Benchmarks/figures.py)"
python3 Benchmarks/figures.py
python3 Benchmarks/figures.py --print
