#!/bin/bash
# The BlueZ part of the benchmarks: builds horizon-bench in release mode and runs
# `horizon-bench --only bluez` inside the throw-away VM of Tools/bluez-vm (QEMU, a real
# bluetoothd, two linked virtual controllers hci0 and hci1). The terminal radio is on hci0, the
# wallet radio on hci1, both in the one benchmark process. The VM may write only to the results
# folder (--rwdir); the JSON lands there, the table is printed and kept next to it.
#
#   Benchmarks/bluez-vm.sh                                 # 200 raw round trips per series, 20 payments (~3-4 min)
#   Benchmarks/bluez-vm.sh --quick                         # 10 round trips, 3 payments: a smoke test
#   Benchmarks/bluez-vm.sh --bluez-payments 10 --bluez-round-trips 200
#
# Arguments go to horizon-bench. Environment: SCRATCH=/path (build folder, default SwiftPM's
# .build), OUTPUT=file.json (default Benchmarks/results/bluez-latest.json; its folder is created),
# TRACE=1 (HORIZON_BLUEZ_TRACE=1: every D-Bus step of the BlueZ layer on standard error),
# BLUEZ_VM_TIMEOUT (seconds for the whole VM, default here 1500). Exit code: horizon-bench's (1
# when BlueZ was not measured), or run-in-vm.sh's (125 BlueZ never came up, 124 timeout, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
for argument in "$@"; do
    case $argument in
    -h | --help)
        # The header above, then horizon-bench's own options, without booting a VM or touching
        # the results.
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        echo
        echo "horizon-bench's options (those after --only bluez apply):"
        # Not `swift build --show-bin-path`: it waits for SwiftPM's lock, held by a running build or test.
        built="${SCRATCH:-$root/.build}/release/horizon-bench"
        if [ -x "$built" ]; then "$built" --help; else
            echo "  (build it first: swift build -c release --product horizon-bench)"
        fi
        exit 0
        ;;
    esac
done
scratch=()
[ -n "${SCRATCH:-}" ] && scratch=(--scratch-path "$SCRATCH")
swift build -c release "${scratch[@]}" --product horizon-bench >&2
bin=$(swift build -c release "${scratch[@]}" --show-bin-path)

output=${OUTPUT:-$root/Benchmarks/results/bluez-latest.json}
case $output in /*) ;; *) output=$root/$output ;; esac
results=$(dirname "$output")
mkdir -p "$results"
table=${output%.json}.txt

# The VM sees its own emulated processors; the machine it runs on goes into the result too.
model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)
memory=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- Sources Benchmarks 2>/dev/null || commit="$commit with local changes"
host="$(nproc) × ${model:-unknown CPU}, $memory, kernel $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg) before the VM booted; VM: QEMU TCG (software emulation), ${BLUEZ_VM_CPUS:-2} vCPUs, ${BLUEZ_VM_MEMORY:-2G}; source $commit"

command=("$bin/horizon-bench")
[ "${TRACE:-0}" = 1 ] && command=(/usr/bin/env HORIZON_BLUEZ_TRACE=1 "$bin/horizon-bench")

status=0
BLUEZ_VM_TIMEOUT=${BLUEZ_VM_TIMEOUT:-1500} Tools/bluez-vm/run-in-vm.sh --rwdir "$results" -- \
    "${command[@]}" --only bluez --output "$output" --bluez-host "$host" "$@" | tee "$table" || status=$?
echo "[bluez-vm.sh] result: $output, table: $table (exit $status)" >&2
exit "$status"
