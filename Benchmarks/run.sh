#!/bin/sh
# Builds the benchmark (and the terminal program it measures at rest) in release mode and runs
# it. Arguments go to horizon-bench, e.g.:
#   Benchmarks/run.sh                          # everything; writes Benchmarks/results/latest.json
#   Benchmarks/run.sh --quick                  # a smoke test (seconds)
#   Benchmarks/run.sh --only payment-cpu --iterations 500
#   Benchmarks/run.sh --bin .build/debug --quick   # programs already built in DIR (the test suite's
#                                                  # smoke run; debug numbers mean nothing)
# SCRATCH=/path overrides the build folder (default: SwiftPM's .build).
set -eu
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--bin" ]; then
    [ -x "${2:-}/horizon-bench" ] || { echo "run.sh: --bin needs a directory with horizon-bench and horizon-terminal" >&2; exit 2; }
    bin=$2
    shift 2
    exec "$bin/horizon-bench" --terminal-binary "$bin/horizon-terminal" "$@"
fi
scratch=${SCRATCH:+--scratch-path "$SCRATCH"}
# shellcheck disable=SC2086  # $scratch is empty or two words on purpose
swift build -c release $scratch --product horizon-bench >&2
# shellcheck disable=SC2086
swift build -c release $scratch --product horizon-terminal >&2
# shellcheck disable=SC2086
bin=$(swift build -c release $scratch --show-bin-path)
exec "$bin/horizon-bench" --terminal-binary "$bin/horizon-terminal" "$@"
