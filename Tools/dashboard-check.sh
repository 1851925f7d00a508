#!/usr/bin/env bash
# The merchant dashboard in a real browser: a Horizon server on SQLite, a merchant with an admin
# password, a terminal and a wallet on that server, a payment over the simulated radio between
# the CLIs, a card added with its 3-D Secure challenge answered in the browser, then headless
# Chromium signs in, sees the day's sales and the chart on the home page, finds the payment by
# search, opens its page, downloads the CSV, refunds it after confirming, sets the time zone and
# visits every page at a desktop width (1280 px) and again at a phone's (390 px), where no page
# may scroll sideways or hide an amount (Tools/lib/dashboard_browser.py). A screenshot of each
# page is written to .build/test-output/dashboard/ (or $HORIZON_TEST_OUTPUT/dashboard):
# desktop-*.png, phone-*.png, 3ds-*.png. Fails when any step's expected text is missing.
# Installs Chromium when missing; expects a built package (Tools/test.sh builds first).
#
#   Tools/dashboard-check.sh                 run the check
#   README_SHOT=docs/dashboard.png Tools/dashboard-check.sh   also write docs/dashboard.md's picture
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh
source Tools/lib/shop.sh

ensure_debian_packages "${HORIZON_BROWSER_PACKAGES[@]}"
command -v python3 >/dev/null 2>&1 || die "python3 is needed to drive Chromium"
bin=$(swift build --show-bin-path)
for program in horizon-server horizon-terminal horizon-wallet; do
    [ -x "$bin/$program" ] || die "$bin/$program is not built; run swift build first"
done
output="${HORIZON_TEST_OUTPUT:-.build/test-output}/dashboard"
rm -rf "$output"
mkdir -p "$output"

shop_work_area horizon-dashboard

email="owner@corner.example"
label="Till 1, Market St"
printf 'correct horse battery staple\n' >"$work/merchant-password"
chmod 600 "$work/merchant-password"

step "dashboard check: a server on SQLite with a merchant, in $work/server"
"$bin/horizon-server" init --data-dir "$work/server" --listen 127.0.0.1:0 >/dev/null
"$bin/horizon-server" merchants add "Corner Café" --email "$email" --currency EUR \
    --password-file "$work/merchant-password" --data-dir "$work/server" >/dev/null
shop_start_server

step "dashboard check: a terminal and a wallet on the server; a card added through 3-D Secure in the browser pays 12.50 EUR with a 1.50 tip over the simulated radio"
"$bin/horizon-terminal" activate --server "$url" --email "$email" --password-file "$work/merchant-password" \
    --label "$label" --data-dir "$work/terminal" >/dev/null
phone="+4915112345678"
"$bin/horizon-wallet" register --server "$url" --name "Alex" --email alex@example.com --phone "$phone" \
    --data-dir "$work/wallet" >/dev/null
# A PUK by SMS, an activation link by mail: registering needs both.
outbox_code() {
    "$bin/horizon-server" outbox --to "$1" --limit 1 --data-dir "$work/server" |
        sed -n 's/.*PUK is \([0-9]\{8\}\).*/\1/p' | head -1
}
code=$(outbox_code "$phone")
link=$("$bin/horizon-server" outbox --to alex@example.com --limit 1 --data-dir "$work/server" |
    grep -o 'https\?://[^ ]*/v1/wallets/activation?[^ ]*' | head -1)
[ -n "$code" ] && [ -n "$link" ] || die "no PUK or activation link in the server's outbox"
fingerprint=$("$bin/horizon-server" anchor --data-dir "$work/server" | sed -n 's/^fingerprint: *//p')
"$bin/horizon-wallet" verify "$code" --data-dir "$work/wallet" >/dev/null
"$bin/horizon-wallet" activation-status --confirm-link "$link" --anchor-fingerprint "$fingerprint" \
    --data-dir "$work/wallet" >/dev/null
"$bin/horizon-server" wallets top-up alex@example.com 100.00 --data-dir "$work/server" >/dev/null

step "dashboard check: a card that needs 3-D Secure, its challenge answered in headless Chromium"
HORIZON_WALLET_CARD_CVC=123 "$bin/horizon-wallet" cards add --cardholder "Alex Doe" --number "4000 0000 0000 3220" \
    --expiry 12/30 --wait 120 --data-dir "$work/wallet" >"$work/card.out" 2>&1 &
card_pid=$!
challenge=""
for _ in $(seq 1 300); do
    challenge=$(grep -o 'https\?://[^ ]*3ds[^ ]*' "$work/card.out" | head -1 || true)
    [ -n "$challenge" ] && break
    kill -0 "$card_pid" 2>/dev/null || die "horizon-wallet cards add stopped: $(cat "$work/card.out")"
    sleep 0.1
done
[ -n "$challenge" ] || die "horizon-wallet cards add printed no challenge link: $(cat "$work/card.out")"
python3 Tools/lib/dashboard_browser.py --challenge-url "$challenge" --output "$output" ||
    die "the 3-D Secure challenge failed in the browser"
wait "$card_pid" || die "horizon-wallet cards add failed after the challenge: $(cat "$work/card.out")"
grep -q "it can pay" "$work/card.out" || die "the card was not added: $(cat "$work/card.out")"
card_id=$("$bin/horizon-wallet" cards list --data-dir "$work/wallet" | awk 'NR == 1 { print $1 }')
[ -n "$card_id" ] || die "horizon-wallet cards list shows no card"
"$bin/horizon-terminal" radio --socket "$socket" --idle-exit 30 >/dev/null &
radio_pid=$!
"$bin/horizon-terminal" pay 12.50 --register anna --data-dir "$work/terminal" --radio-socket "$socket" \
    >"$work/terminal.out" 2>&1 &
terminal_pid=$!
sleep 0.5
"$bin/horizon-wallet" pay --tip 1.50 --card "$card_id" --yes --data-dir "$work/wallet" --radio-socket "$socket" --position 0.4,0 \
    >"$work/wallet.out" 2>&1 || die "the wallet's payment failed: $(cat "$work/wallet.out")"
wait "$terminal_pid" || die "the terminal's payment failed: $(cat "$work/terminal.out")"
terminal_pid=""

step "dashboard check: headless Chromium at $url/dashboard/"
shot=()
[ -n "${README_SHOT:-}" ] && shot=(--readme-shot "$README_SHOT")
python3 Tools/lib/dashboard_browser.py --url "$url" --email "$email" --password-file "$work/merchant-password" \
    --output "$output" --amount "12.50 EUR" --total "14.00 EUR" --terminal-label "$label" --refund "${shot[@]}"
