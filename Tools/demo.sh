#!/usr/bin/env bash
# The main job: a terminal and a wallet pay each other over the simulated radio and print both
# sides' view and the ledger entry. Installs what the build needs (when missing) and builds first.
#
#   Tools/demo.sh                     pay 12.50 EUR with a 1.50 tip
#   Tools/demo.sh 30 --tip 3 --seed 7 any horizon-demo options (see --help)
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh

ensure_swift
ensure_debian_packages

step "building horizon-demo (a first build compiles swift-crypto: 1-3 minutes on 2 cores)"
swift build --product horizon-demo 2>&1 | filter_build_output

step "paying over the simulated radio"
exec "$(swift build --show-bin-path)/horizon-demo" "$@"
