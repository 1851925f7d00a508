#!/bin/sh
# Builds the benchmark (and the terminal program it measures at rest) in release mode and runs
# it. Arguments go to horizon-bench, e.g.:
#   Benchmarks/run.sh                          # everything; writes Benchmarks/results/latest.json
#   Benchmarks/run.sh --quick                  # a smoke test (seconds)
#   Benchmarks/run.sh --only payment-cpu --iterations 500
# SCRATCH=/path overrides the build folder (default: SwiftPM's .build).
set -eu
cd "$(dirname "$0")/.."
scratch=${SCRATCH:+--scratch-path "$SCRATCH"}
# shellcheck disable=SC2086  # $scratch is empty or two words on purpose
swift build -c release $scratch --product horizon-bench >&2
# shellcheck disable=SC2086
swift build -c release $scratch --product horizon-terminal >&2
# shellcheck disable=SC2086
bin=$(swift build -c release $scratch --show-bin-path)
exec "$bin/horizon-bench" --terminal-binary "$bin/horizon-terminal" "$@"
