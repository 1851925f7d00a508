#!/usr/bin/env bash
# A/B of the CPU of one payment between builds: runs
# `horizon-bench --only payment-cpu` of each build in turn, round after round (the order rotates
# each round, so a drift in the machine's load falls on every build alike), on tmpfs and on the
# repository's own file system (a real disk: SQLite syncs each payment), and reports the median
# over the rounds of each build's per-run medians.
#
#   Benchmarks/compare-payment-cpu.sh before=/work/old/.build/release/horizon-bench after=.build/release/horizon-bench
#   Benchmarks/compare-payment-cpu.sh --rounds 12 --iterations 1000 a=BIN b=BIN c=BIN
#
# Writes Benchmarks/results/payment-cpu-compare-latest.json and prints a table. Build each
# side with `swift build -c release --product horizon-bench` (in a worktree for an old commit),
# and run it on a quiet machine: nothing else building or testing.
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh

usage() {
    cat <<'EOF'
usage: Benchmarks/compare-payment-cpu.sh [options] LABEL=HORIZON_BENCH [LABEL=HORIZON_BENCH ...]

  --rounds N        rounds; each runs every build once per file system (default 10)
  --iterations N    payments per run (default 500)
  --disk DIR        the real-disk directory (default: a temporary one under the repository)
  --output FILE     the JSON result (default Benchmarks/results/payment-cpu-compare-latest.json)
  -h, --help        this text
EOF
}

rounds=10
iterations=500
disk=""
output="Benchmarks/results/payment-cpu-compare-latest.json"
labels=()
binaries=()
number() { case "$2" in '' | *[!0-9]*) die "$1 needs a whole number (got '$2'); see --help" ;; esac; }
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) number "$1" "${2:-}"; rounds=$2; shift 2 ;;
    --iterations) number "$1" "${2:-}"; iterations=$2; shift 2 ;;
    --disk) [ -d "${2:-}" ] || die "--disk needs an existing directory"; disk=$2; shift 2 ;;
    --output) [ -n "${2:-}" ] || die "--output needs a file"; output=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *=*)
        label=${1%%=*} binary=${1#*=}
        [ -n "$label" ] || die "$1: the label before = is empty"
        [ -x "$binary" ] || die "$1: $binary is not an executable horizon-bench"
        labels+=("$label"); binaries+=("$binary"); shift ;;
    *) usage >&2; die "unknown argument $1 (builds are given as LABEL=PATH)" ;;
    esac
done
[ "${#labels[@]}" -ge 1 ] || { usage >&2; die "name at least one build as LABEL=PATH"; }
[ "$rounds" -ge 1 ] && [ "$iterations" -ge 10 ] || die "--rounds at least 1, --iterations at least 10"

work=$(mktemp -d "${TMPDIR:-/tmp}/horizon-compare.XXXXXX")
tmpfs_dir=$(mktemp -d /dev/shm/horizon-compare.XXXXXX)
[ -n "$disk" ] || disk=$(mktemp -d "$PWD/.build-compare.XXXXXX")
trap 'rm -rf "$work" "$tmpfs_dir"; case "$disk" in "$PWD"/.build-compare.*) rm -rf "$disk" ;; esac' EXIT
df -T "$disk" | awk 'NR == 2 { print "real disk: " $2 " (" $1 ")" }'
step "$rounds rounds × ${#labels[@]} builds × 2 file systems, $iterations payments a run (load now: $(cut -d' ' -f1-3 /proc/loadavg))"

count=${#labels[@]}
for round in $(seq 1 "$rounds"); do
    for offset in $(seq 0 $((count - 1))); do
        index=$(((offset + round) % count))
        for fs in tmpfs disk; do
            dir=$tmpfs_dir
            [ "$fs" = disk ] && dir=$disk
            rm -rf "${dir:?}"/*
            "${binaries[$index]}" --only payment-cpu --iterations "$iterations" --data-dir "$dir" \
                --output "$work/${labels[$index]}-$fs-$round.json" >/dev/null 2>"$work/err" ||
                { cat "$work/err" >&2; die "${labels[$index]} failed (above)"; }
        done
    done
    printf '  round %s of %s done (load %s)\n' "$round" "$rounds" "$(cut -d' ' -f1 /proc/loadavg)"
done

python3 - "$work" "$output" "$rounds" "$iterations" "${labels[@]}" <<'PY'
import json, statistics, sys, platform, os, datetime
work, output, rounds, iterations, labels = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
result = {"generatedAt": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
          "machine": {"cpus": os.cpu_count(), "kernel": platform.release()},
          "rounds": rounds, "iterations": iterations, "builds": {}}
print(f"\n{'build':<12} {'fs':<6} {'payment µs':>11} {'crypto µs':>10} {'ratio':>7}   (medians of {rounds} runs)")
for label in labels:
    result["builds"][label] = {}
    for fs in ("tmpfs", "disk"):
        runs = [json.load(open(f"{work}/{label}-{fs}-{r}.json"))["paymentCPU"] for r in range(1, rounds + 1)]
        payment = statistics.median(r["paymentCPUMicroseconds"]["median"] for r in runs)
        crypto = statistics.median(r["cryptoCPUMicroseconds"]["median"] for r in runs)
        ratio = statistics.median(r["ratioOfMedians"] for r in runs)
        result["builds"][label][fs] = {"paymentMicroseconds": round(payment, 1), "cryptoMicroseconds": round(crypto, 1),
                                       "ratioOfMedians": round(ratio, 3),
                                       "perRunPaymentMicroseconds": [round(r["paymentCPUMicroseconds"]["median"], 1) for r in runs]}
        print(f"{label:<12} {fs:<6} {payment:>11.0f} {crypto:>10.0f} {ratio:>6.2f}x")
base = labels[0]
for label in labels[1:]:
    for fs in ("tmpfs", "disk"):
        a = result["builds"][base][fs]["paymentMicroseconds"]; b = result["builds"][label][fs]["paymentMicroseconds"]
        print(f"{label} against {base}, {fs}: {100 * (b - a) / a:+.1f} % payment CPU")
os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
json.dump(result, open(output, "w"), indent=2, sort_keys=True)
print(f"\nwritten: {output}")
PY
