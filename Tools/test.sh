#!/usr/bin/env bash
# Runs the whole Horizon test suite on a fresh Debian machine: installs what the build needs
# (when missing), builds the package and its tests, runs every test, then runs the BlueZ checks
# against a real bluetoothd in a throw-away VM (Tools/bluez-vm: adapters and five payment flows
# between two processes; about 5 minutes, at most 14).
#
#   Tools/test.sh              build and run everything
#   Tools/test.sh --filter X   pass-through to `swift test` (a subset; the VM step is skipped)
#   HORIZON_SKIP_VM=1 Tools/test.sh   everything but the VM step
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh

ensure_swift
ensure_debian_packages

step "building package and tests (a first build compiles swift-crypto: 1-3 minutes on 2 cores)"
swift build --build-tests 2>&1 | filter_build_output

if [ $# -gt 0 ]; then
    step "running tests ($*)"
    swift test --skip-build "$@"
    exit 0
fi

# Four runs, each its own process: many tests wait synchronously (programs run as processes, the
# seeded fault simulation computes for half a minute) and so hold Swift's cooperative threads,
# of which a 2-core machine has two; the D-Bus and BlueZ tests get their replies through tasks
# on those threads and would miss their timeouts behind them.
step "running the D-Bus and BlueZ tests (private dbus-daemons)"
swift test --skip-build --filter "HorizonDBusTests|HorizonBlueZTests"
step "running the other tests"
swift test --skip-build --skip "HorizonDBusTests|HorizonBlueZTests|HorizonFaultTests|HorizonToolsTests"
step "running the programs as processes, crash tests included"
swift test --skip-build --filter HorizonToolsTests
step "running the seeded fault simulation and the fuzz corpus replay"
swift test --skip-build --filter HorizonFaultTests

if [ -n "${HORIZON_SKIP_VM:-}" ]; then
    exit 0
fi

step "BlueZ checks against a real bluetoothd in a VM (QEMU, two virtual controllers from btvirt)"
status=0
Tools/bluez-vm/run-in-vm.sh --timeout 840 -- Tools/bluez-vm/bluez-checks.sh "$(swift build --show-bin-path)" || status=$?
case "$status" in
0) ;;
3 | 124 | 125)
    # The VM could not be had here (tools not installable, boot timeout, BlueZ never came up):
    # that says nothing about our code, so it is reported loudly, not failed.
    printf '\nWARNING: the BlueZ VM checks did not run (run-in-vm.sh exit %s; see Tools/bluez-vm/README.md)\n' "$status" >&2
    ;;
*) exit "$status" ;;
esac
