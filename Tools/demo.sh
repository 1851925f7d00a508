#!/usr/bin/env bash
# The main job: the whole system on one machine with no database server. A Horizon server on
# SQLite, a merchant, a terminal activated with the server, a wallet registered with it (the
# one-time code read from the server's outbox), a payment with a tip over the simulated
# Bluetooth radio between two processes, then the transaction as the server reports it.
# Installs what the build needs (when missing) and builds first.
#
#   Tools/demo.sh                  pay 12.50 EUR with a 1.50 tip
#   Tools/demo.sh 30 3             pay 30.00 with a 3.00 tip
#   KEEP=1 Tools/demo.sh           keep the data directories afterwards
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh
source Tools/lib/shop.sh

amount=${1:-12.50}
tip=${2:-1.50}
case "$amount$tip" in
*[!0-9.]*) die "usage: Tools/demo.sh [AMOUNT] [TIP]   (e.g. Tools/demo.sh 12.50 1.50)" ;;
esac

ensure_swift
ensure_debian_packages
step "building horizon-server, horizon-terminal and horizon-wallet (a first build compiles swift-crypto, swift-nio, Hummingbird and AsyncHTTPClient: 8-15 minutes on 2 cores)"
swift build 2>&1 | filter_build_output
bin=$(swift build --show-bin-path)

shop_work_area horizon-demo

email="owner@corner.example"
printf 'correct horse battery staple\n' >"$work/merchant-password"
chmod 600 "$work/merchant-password"

step "the server: an issuer key, an SQLite database and a merchant, in $work/server"
"$bin/horizon-server" init --data-dir "$work/server" --listen 127.0.0.1:0 | sed 's/^/server   | /'
"$bin/horizon-server" merchants add "Corner Café" --email "$email" --currency EUR \
    --password-file "$work/merchant-password" --data-dir "$work/server" | sed 's/^/server   | /'
shop_start_server
echo "server   | listening on $url"

step "the terminal: a new key, activated with the server for Corner Café"
"$bin/horizon-terminal" activate --server "$url" --email "$email" --password-file "$work/merchant-password" \
    --label "Till 1, Market St" --data-dir "$work/terminal" | sed 's/^/terminal | /'

step "the wallet: registered with the server (a PUK by SMS, an activation link by mail: here, from the server's outbox)"
phone="+4915112345678"
"$bin/horizon-wallet" register --server "$url" --name "Alex" --email alex@example.com --phone "$phone" \
    --data-dir "$work/wallet" | sed 's/^/wallet   | /'
# The outbox shows a code only while it can be used.
outbox_code() {
    "$bin/horizon-server" outbox --to "$1" --limit 1 --data-dir "$work/server" |
        sed -n 's/.*PUK is \([0-9]\{8\}\).*/\1/p' | head -1
}
code=$(outbox_code "$phone")
link=$("$bin/horizon-server" outbox --to alex@example.com --limit 1 --data-dir "$work/server" |
    grep -o 'https\?://[^ ]*/v1/wallets/activation?[^ ]*' | head -1)
[ -n "$code" ] && [ -n "$link" ] || die "no PUK or activation link in the server's outbox"
echo "outbox   | SMS to $phone: PUK $code; mail to alex@example.com: an activation link"
# The wallet pins the server's anchor only with the fingerprint its operator publishes.
fingerprint=$("$bin/horizon-server" anchor --data-dir "$work/server" | sed -n 's/^fingerprint: *//p')
[ -n "$fingerprint" ] || die "no anchor fingerprint from horizon-server anchor"
echo "server   | anchor fingerprint $fingerprint"
"$bin/horizon-wallet" verify "$code" --data-dir "$work/wallet" | sed 's/^/wallet   | /'
# The link's button, pressed by the wallet (as a tap on the link would on a phone).
"$bin/horizon-wallet" activation-status --confirm-link "$link" --anchor-fingerprint "$fingerprint" \
    --data-dir "$work/wallet" | sed 's/^/wallet   | /'
"$bin/horizon-server" wallets top-up alex@example.com 100.00 --data-dir "$work/server" | sed 's/^/server   | /'

step "paying $amount + tip $tip: the terminal advertises, the wallet 40 cm away pays, the server settles"
"$bin/horizon-terminal" radio --socket "$socket" --idle-exit 30 >/dev/null &
radio_pid=$!
"$bin/horizon-terminal" pay "$amount" --data-dir "$work/terminal" --radio-socket "$socket" 2>&1 |
    sed -u 's/^/terminal | /' &
terminal_pid=$!
sleep 0.5
status=0
"$bin/horizon-wallet" pay --tip "$tip" --yes --data-dir "$work/wallet" --radio-socket "$socket" \
    --position 0.4,0 2>&1 | sed -u 's/^/wallet   | /' || status=$?
wait "$terminal_pid" || status=$?
terminal_pid=""

step "the transaction as the server records it"
"$bin/horizon-server" transactions --data-dir "$work/server" | sed 's/^/server   | /'
exit "$status"
