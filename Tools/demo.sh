#!/usr/bin/env bash
# The main job: a terminal and a wallet, two separate processes, pay each other over the
# simulated Bluetooth radio; both sides' view and the ledger entry are printed. Installs what
# the build needs (when missing) and builds first.
#
#   Tools/demo.sh                  pay 12.50 EUR with a 1.50 tip
#   Tools/demo.sh 30 3             pay 30.00 with a 3.00 tip
#   KEEP=1 Tools/demo.sh           keep the data directories afterwards
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh

amount=${1:-12.50}
tip=${2:-1.50}
case "$amount$tip" in
*[!0-9.]*) die "usage: Tools/demo.sh [AMOUNT] [TIP]   (e.g. Tools/demo.sh 12.50 1.50)" ;;
esac

ensure_swift
ensure_debian_packages

step "building horizon-terminal and horizon-wallet (a first build compiles swift-crypto: 1-3 minutes on 2 cores)"
swift build 2>&1 | filter_build_output
bin=$(swift build --show-bin-path)

work=$(mktemp -d /tmp/horizon-demo.XXXXXX)
socket="$work/radio.sock"
radio_pid=""
terminal_pid=""
cleanup() {
    [ -n "$terminal_pid" ] && kill "$terminal_pid" 2>/dev/null || true
    [ -n "$radio_pid" ] && kill "$radio_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    if [ -z "${KEEP:-}" ]; then rm -rf "$work"; else echo "data kept in $work"; fi
}
trap cleanup EXIT

step "setting up a terminal and a wallet in $work"
"$bin/horizon-terminal" init --data-dir "$work/terminal" --merchant-name "Horizon Demo Café" | sed 's/^/terminal | /'
"$bin/horizon-wallet" init --data-dir "$work/wallet" --trust "$work/terminal/anchor.pub" | sed 's/^/wallet   | /'

step "paying $amount + tip $tip: the terminal advertises, the wallet 40 cm away pays it"
"$bin/horizon-terminal" radio --socket "$socket" --idle-exit 30 >/dev/null &
radio_pid=$!
"$bin/horizon-terminal" pay "$amount" --register "Demo cashier" --data-dir "$work/terminal" \
    --radio-socket "$socket" 2>&1 | sed -u 's/^/terminal | /' &
terminal_pid=$!
sleep 0.5
status=0
"$bin/horizon-wallet" pay --tip "$tip" --yes --data-dir "$work/wallet" --radio-socket "$socket" \
    --position 0.4,0 2>&1 | sed -u 's/^/wallet   | /' || status=$?
wait "$terminal_pid" || status=$?
terminal_pid=""

step "the ledger entry and the wallet's balance"
"$bin/horizon-terminal" transactions --data-dir "$work/terminal" | sed 's/^/ledger   | /'
"$bin/horizon-wallet" balance --data-dir "$work/wallet" --ledger "$work/terminal/ledger.sqlite" | sed 's/^/wallet   | /'
exit "$status"
