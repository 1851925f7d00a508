#!/usr/bin/env bash
# A point-of-sale system driving a terminal through the Horizon server, on one machine with
# nothing running: a server on SQLite in a temporary folder, a merchant, a terminal activated
# with it running `horizon-terminal serve` on the simulated radio, and a registered wallet. The
# POS (this script, with curl) makes an API key, registers a webhook endpoint with a one-file
# receiver (Tools/lib/webhook_receiver.py, which checks each event's signature and prints it),
# creates a payment intent for order ORDER-4711 on the terminal, the wallet pays what the till
# shows, the receiver prints the events it got, and the intent read by its order reference says
# `succeeded`. Exits non-zero when any step fails; stops every process it started and removes
# its folder on exit (KEEP=1 keeps the folder).
#
#   Tools/pos-example.sh              build (when needed) and run
#   Tools/pos-example.sh --bin DIR    run the programs already built in DIR
#   Tools/pos-example.sh --help
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh
source Tools/lib/shop.sh

usage() { sed -n '2,14s/^# \{0,1\}//p' "$0"; }
bin=""
while [ $# -gt 0 ]; do
    case "$1" in
    --help | -h) usage; exit 0 ;;
    --bin) [ -d "${2:-}" ] || die "--bin needs the directory of the built programs"; bin=$2; shift 2 ;;
    *) die "unknown argument $1 (see Tools/pos-example.sh --help)" ;;
    esac
done
if [ -z "$bin" ]; then
    ensure_swift
    ensure_debian_packages curl python3
    step "building horizon-server, horizon-terminal and horizon-wallet (a first build takes 8-15 minutes on 2 cores)"
    swift build 2>&1 | filter_build_output
    bin=$(swift build --show-bin-path)
fi
for tool in curl python3; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is needed (apt-get install $tool)"
done

shop_work_area horizon-pos
receiver_pid=""
pos_cleanup() {
    [ -n "$receiver_pid" ] && kill "$receiver_pid" 2>/dev/null || true
    shop_cleanup
}
trap pos_cleanup EXIT

# One API call: METHOD PATH TOKEN [JSON BODY] [HEADER]. The answer's body is in
# $work/answer.json, its status in `status`.
api() {
    local arguments=(-sS -o "$work/answer.json" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $3")
    [ -n "${4:-}" ] && arguments+=(-H "Content-Type: application/json" --data "$4")
    [ -n "${5:-}" ] && arguments+=(-H "$5")
    status=$(curl "${arguments[@]}" "$url$2") || die "curl could not reach $url$2"
}
# The answer's field named by a Python expression on `a` (the parsed JSON), e.g. a["id"].
field() { python3 -c 'import json, sys; a = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$work/answer.json" "$1"; }
expect_status() {
    case " $* " in *" $status "*) ;; *) die "the server answered $status: $(cat "$work/answer.json")" ;; esac
}

step "the shop: a server on SQLite with a merchant, a terminal and a wallet, in $work"
shop_create_merchant 'server   | '
# The webhook receiver runs on this machine: the server may post to private addresses here.
shop_start_server --webhooks-allow-private-addresses
echo "server   | listening on $url"
"$bin/horizon-terminal" activate --server "$url" --email "$email" --password-file "$work/merchant-password" \
    --label "Till 1, Market St" --data-dir "$work/terminal" | sed 's/^/terminal | /'
shop_register_wallet 'wallet   | '

step "the terminal runs as a service on the simulated radio, connected to the server for payment intents"
"$bin/horizon-terminal" radio --socket "$socket" >/dev/null 2>&1 &
radio_pid=$!
"$bin/horizon-terminal" serve --data-dir "$work/terminal" --radio-socket "$socket" \
    --control-socket "$work/control.sock" >"$work/terminal.out" 2>"$work/terminal.log" &
terminal_pid=$!
for _ in $(seq 1 150); do
    grep -q "terminal service ready" "$work/terminal.out" && break
    kill -0 "$terminal_pid" 2>/dev/null || die "horizon-terminal serve stopped: $(cat "$work/terminal.log")"
    sleep 0.1
done
grep -q "terminal service ready" "$work/terminal.out" || die "horizon-terminal serve was not ready within 15 s"
sed 's/^/terminal | /' "$work/terminal.out"

step "the POS: an API key, and a webhook endpoint with a receiver that prints each event"
api POST /v1/merchant/sessions "" "{\"email\": \"$email\", \"password\": \"$(cat "$work/merchant-password")\"}"
expect_status 200 201
admin=$(field 'a["token"]')
api GET /v1/merchant/terminals "$admin"
expect_status 200
terminal_id=$(field 'a["terminals"][0]["terminalId"]')
api POST /v1/merchant/api-keys "$admin" '{"name": "POS example", "scopes": ["intents:write", "webhooks:write"]}'
expect_status 201
key=$(field 'a["secret"]')
echo "pos      | API key $(field 'a["apiKey"]["redactedSecret"]') with scopes intents:write, webhooks:write"
python3 Tools/lib/webhook_receiver.py --port-file "$work/receiver.port" --secret-file "$work/receiver.secret" \
    >"$work/webhooks.log" 2>&1 &
receiver_pid=$!
for _ in $(seq 1 100); do
    [ -s "$work/receiver.port" ] && break
    kill -0 "$receiver_pid" 2>/dev/null || die "the webhook receiver stopped: $(cat "$work/webhooks.log")"
    sleep 0.1
done
[ -s "$work/receiver.port" ] || die "the webhook receiver did not start within 10 s"
receiver="http://127.0.0.1:$(cat "$work/receiver.port")/webhooks"
api POST /v1/merchant/webhook-endpoints "$key" \
    "{\"url\": \"$receiver\", \"eventTypes\": [\"intent.succeeded\", \"payment.succeeded\"], \"description\": \"POS example\"}"
expect_status 201
(umask 077 && field 'a["secret"]' >"$work/receiver.secret")
echo "pos      | webhook endpoint $(field 'a["webhookEndpoint"]["id"]') -> $receiver"

step "the POS creates a payment intent of 12.50 EUR for order ORDER-4711 on the terminal"
intent_body="{\"amount\": 1250, \"currency\": \"EUR\", \"reference\": \"ORDER-4711\", \"terminalId\": \"$terminal_id\", \"metadata\": {\"table\": \"7\"}}"
# The terminal's connection may take a moment: `terminal_offline` created nothing, so the same
# idempotency key is tried again.
for _ in $(seq 1 100); do
    api POST /v1/merchant/payment-intents "$key" "$intent_body" "Idempotency-Key: ORDER-4711-1"
    [ "$status" = 409 ] && grep -q terminal_offline "$work/answer.json" || break
    sleep 0.2
done
expect_status 201
intent=$(field 'a["id"]')
echo "pos      | payment intent $intent: $(field 'a["status"]')"
for _ in $(seq 1 100); do
    api GET "/v1/merchant/payment-intents/$intent" "$key"
    [ "$(field 'a["status"]')" = collecting ] && break
    sleep 0.1
done
[ "$(field 'a["status"]')" = collecting ] || die "the terminal did not collect the intent: $(cat "$work/answer.json")"
echo "pos      | payment intent $intent: collecting (the till shows 12.50 EUR)"

step "a wallet 40 cm from the till pays it"
"$bin/horizon-wallet" pay --yes --timeout 30 --data-dir "$work/wallet" --radio-socket "$socket" \
    --position 0.4,0 2>&1 | sed 's/^/wallet   | /' || die "the wallet's payment failed"

step "the webhook receiver's events"
for _ in $(seq 1 150); do
    grep -q "received intent.succeeded" "$work/webhooks.log" && break
    sleep 0.1
done
sed 's/^/webhook  | /' "$work/webhooks.log"
grep -q "received intent.succeeded .* signature=valid" "$work/webhooks.log" ||
    die "no signed intent.succeeded event reached the receiver within 15 s"

step "the POS reads the intent by its order reference"
api GET "/v1/merchant/payment-intents?reference=ORDER-4711" "$key"
expect_status 200
result=$(field 'a["paymentIntents"][0]["status"]')
echo "pos      | ORDER-4711: payment intent $(field 'a["paymentIntents"][0]["id"]') $result," \
    "paid $(field 'a["paymentIntents"][0]["payment"]["amount"]') minor units"
[ "$result" = succeeded ] || die "the intent is $result, not succeeded"
echo "pos example: ORDER-4711 succeeded"
