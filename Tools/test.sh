#!/usr/bin/env bash
# Runs the whole Horizon test suite on a fresh Debian machine: installs what the build needs
# (when missing), builds the package and its tests, and runs every test.
#
#   Tools/test.sh              build and run everything
#   Tools/test.sh --filter X   pass-through to `swift test` (run a subset)
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh

ensure_swift
ensure_debian_packages

step "building package and tests (a first build compiles swift-crypto: 1-3 minutes on 2 cores)"
swift build --build-tests 2>&1 | filter_build_output

step "running tests"
swift test --skip-build "$@"
