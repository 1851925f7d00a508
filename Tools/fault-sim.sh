#!/usr/bin/env bash
# The longer seeded fault simulation: RUNS shops of TRANSACTIONS wallet attempts
# each, seeds FIRST-SEED, FIRST-SEED+1, ..., with link cuts, loss, duplication, reordering,
# movement, clock skew and crashes after durable writes; the exactly-once invariants are checked
# from the ledger's and the wallets' SQLite files after every run
# (Tests/HorizonFaultTests/FaultSimulation.swift says what a run does).
#
#   Tools/fault-sim.sh [RUNS] [TRANSACTIONS] [FIRST-SEED]    default 100 runs of 1000 from seed 1000
#   HORIZON_FAULT_SEED=N Tools/fault-sim.sh                  replay one seed (a failure prints its seed)
#   HORIZON_FAULT_SEED=N HORIZON_FAULT_TRACE=1 Tools/fault-sim.sh   ... with the stuck devices' radio trace
#
# CI runs only the fixed seed set (swift test --filter HorizonFaultTests, about 40 s in a debug
# build). SCRATCH picks the build directory (default .build).
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh

ensure_swift
ensure_debian_packages
scratch=(--scratch-path "${SCRATCH:-.build}")

step "building package and tests"
swift build --build-tests "${scratch[@]}" 2>&1 | filter_build_output

if [ -n "${HORIZON_FAULT_SEED:-}" ]; then
    step "replaying fault simulation seed $HORIZON_FAULT_SEED"
    exec swift test --skip-build "${scratch[@]}" --filter 'FaultSimulationTests/replaysOneSeed'
fi

export HORIZON_FAULT_RUNS="${1:-100}"
export HORIZON_FAULT_TRANSACTIONS="${2:-1000}"
export HORIZON_FAULT_FIRST_SEED="${3:-1000}"
step "fault simulation: $HORIZON_FAULT_RUNS runs of $HORIZON_FAULT_TRANSACTIONS attempts from seed $HORIZON_FAULT_FIRST_SEED"
exec swift test --skip-build "${scratch[@]}" --filter 'FaultSimulationTests/aLongerRun'
