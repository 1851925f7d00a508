#!/usr/bin/env bash
# The CPU of one payment, both sides, files on a real disk, against its
# cryptography alone, in one run: with the terminal's in-process ledger (single box), and with
# the terminal settling through a running horizon-server (an activated terminal: the terminal's
# and the wallet's share, the server's process not counted; its CPU per payment is read from
# /proc and reported beside).
#
#   Benchmarks/terminal-share.sh                         release build; 500 payments each
#   Benchmarks/terminal-share.sh --bin .build/release --iterations 200
#   Benchmarks/terminal-share.sh --help
#
# Writes Benchmarks/results/terminal-share-latest.json and prints a table.
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh
source Tools/lib/shop.sh

usage() {
    cat <<'EOF'
usage: Benchmarks/terminal-share.sh [options]

  --iterations N   payments measured in each configuration (default 500)
  --disk DIR       where the SQLite files go (default: a temporary folder in the repository,
                   i.e. the repository's file system; the budget asks for a real disk)
  --bin DIR        horizon-server and horizon-bench already built in DIR (default: a release
                   build, 10-20 minutes the first time)
  --output FILE    the JSON result (default Benchmarks/results/terminal-share-latest.json)
  -h, --help       this text
EOF
}

iterations=500
disk=""
bin=""
output="Benchmarks/results/terminal-share-latest.json"
while [ $# -gt 0 ]; do
    case "$1" in
    --iterations)
        case "${2:-}" in '' | *[!0-9]*) die "--iterations needs a whole number (got '${2:-}')" ;; esac
        iterations=$2; shift 2 ;;
    --disk) [ -d "${2:-}" ] || die "--disk needs an existing directory"; disk=$2; shift 2 ;;
    --bin) [ -d "${2:-}" ] || die "--bin needs a directory with horizon-server and horizon-bench"; bin=$2; shift 2 ;;
    --output) [ -n "${2:-}" ] || die "--output needs a file"; output=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown option $1" ;;
    esac
done
[ "$iterations" -ge 10 ] || die "--iterations must be at least 10"

[ -n "$bin" ] || build_server_and_bench release

shop_work_area horizon-terminal-share
made_disk=""
if [ -z "$disk" ]; then
    disk=$(mktemp -d "$PWD/.build-terminal-share.XXXXXX")
    made_disk=$disk
fi
trap 'shop_cleanup; [ -z "$made_disk" ] || rm -rf "$made_disk"' EXIT
filesystem=$(df -T "$disk" | awk 'NR == 2 { print $2 }')

step "in-process ledger: $iterations payments, files on $filesystem"
"$bin/horizon-bench" --only payment-cpu --iterations "$iterations" --data-dir "$disk" \
    --output "$work/in-process.json" >"$work/in-process.log" 2>&1 ||
    { tail -20 "$work/in-process.log" >&2; die "horizon-bench (in-process) failed (above)"; }

step "through a horizon-server (SQLite, files on $filesystem): $iterations payments"
email="share@merchant.example"
printf 'terminal share benchmark\n' >"$work/password"
chmod 600 "$work/password"
"$bin/horizon-server" init --data-dir "$work/server" --database "sqlite:$disk/server-ledger.sqlite" \
    --listen 127.0.0.1:0 >"$work/init.log" 2>&1 || { cat "$work/init.log" >&2; die "horizon-server init failed"; }
shop_lift_rate_limit "$work/server/server.json"
"$bin/horizon-server" merchants add "Share Café" --email "$email" --currency EUR --password-file "$work/password" \
    --data-dir "$work/server" >"$work/merchant.log" 2>&1 || { cat "$work/merchant.log" >&2; die "merchants add failed"; }
shop_start_server
# utime + stime of the server process, in clock ticks.
server_ticks() { awk '{ print $14 + $15 }' "/proc/$server_pid/stat"; }
ticks_before=$(server_ticks)
"$bin/horizon-bench" --only payment-cpu --iterations "$iterations" --data-dir "$disk" \
    --through-server "$url" --through-server-database "sqlite:$disk/server-ledger.sqlite" \
    --through-server-email "$email" --through-server-password-file "$work/password" --output "$work/remote.json" >"$work/remote.log" 2>&1 ||
    { tail -20 "$work/remote.log" >&2; die "horizon-bench (through the server) failed (above)"; }
ticks_after=$(server_ticks)

python3 - "$work" "$output" "$filesystem" "$ticks_before" "$ticks_after" "$(getconf CLK_TCK)" "$iterations" <<'PY'
import json, os, sys
work, output, filesystem, before, after, hz, iterations = sys.argv[1:8]
local = json.load(open(f"{work}/in-process.json"))["paymentCPU"]
remote_report = json.load(open(f"{work}/remote.json"))
remote = remote_report["paymentCPU"]
# The server also served the set-up and the warm-up payments; per payment is over all of them.
payments = int(iterations) + remote["warmUpPayments"]
server_us = (int(after) - int(before)) * 1e6 / int(hz) / payments
result = {
    "generatedAt": remote_report["generatedAt"], "machine": remote_report["machine"], "fileSystem": filesystem,
    "inProcess": local, "throughServer": remote,
    "serverProcessCPUMicrosecondsPerPayment": round(server_us, 1),
    "serverProcessCPUNote": "utime+stime of the horizon-server process over the run (set-up and warm-up included), "
                            "per payment; clock-tick resolution",
    # The budget's two terminal-and-wallet lines, in every benchmark's shape.
    "budget": [
        {"item": f"CPU of a payment, both sides, in-process ledger / its cryptography (files on {filesystem}; the budget is for ext4)",
         "measured": local["ratioOfMedians"], "limit": 2.5, "unit": "x", "met": local["ratioOfMedians"] <= 2.5},
        {"item": f"the terminal's share through a server, both sides / its cryptography (files on {filesystem})",
         "measured": remote["ratioOfMedians"], "limit": 3, "unit": "x", "met": remote["ratioOfMedians"] <= 3},
    ],
}
os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
json.dump(result, open(output, "w"), indent=2, sort_keys=True)
row = "{:<34} {:>11} {:>10} {:>7}"
print(row.format("payment, both sides, " + filesystem, "payment µs", "crypto µs", "ratio"))
for name, r in (("in-process ledger", local), ("through horizon-server (share)", remote)):
    print(row.format(name, f"{r['paymentCPUMicroseconds']['median']:.0f}", f"{r['cryptoCPUMicroseconds']['median']:.0f}",
                     f"{r['ratioOfMedians']:.2f}x"))
print(f"the server's own process: {server_us:.0f} µs CPU per payment (not in the share above)")
print(f"written to {output}")
PY
