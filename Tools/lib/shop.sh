# shellcheck shell=bash
# The one-machine shop that Tools/demo.sh and Tools/dashboard-check.sh both set up: a work area
# removed on exit (KEEP=1 keeps it) with the processes they start, and a horizon-server serving
# from it. Needs `bin` (the built programs) and `die` (Tools/lib/setup.sh).

# Makes `work` (a fresh folder under /tmp named after PREFIX) and `socket` (the radio's), and
# stops the server, radio and terminal started into `server_pid`, `radio_pid` and
# `terminal_pid` when the script exits.
shop_work_area() {
    work=$(mktemp -d "/tmp/$1.XXXXXX")
    socket="$work/radio.sock"
    server_pid=""
    radio_pid=""
    terminal_pid=""
    trap shop_cleanup EXIT
}

shop_cleanup() {
    [ -n "$terminal_pid" ] && kill "$terminal_pid" 2>/dev/null || true
    [ -n "$radio_pid" ] && kill "$radio_pid" 2>/dev/null || true
    [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    if [ -z "${KEEP:-}" ]; then rm -rf "$work"; else echo "data kept in $work"; fi
}

# Serves the data directory $work/server in the background (arguments: more `serve` options) and
# sets `url` once it listens (within 10 s), or dies with the server's own words.
shop_start_server() {
    "$bin/horizon-server" serve --data-dir "$work/server" --log-level warning "$@" >"$work/server.out" 2>"$work/server.log" &
    server_pid=$!
    url=""
    for _ in $(seq 1 100); do
        url=$(sed -n 's/^listening on //p' "$work/server.out")
        [ -n "$url" ] && return 0
        kill -0 "$server_pid" 2>/dev/null || die "horizon-server stopped: $(cat "$work/server.log")"
        sleep 0.1
    done
    die "horizon-server did not start within 10 s: $(cat "$work/server.log")"
}

# Lifts the per-peer rate limit and the sign-ins per address in the server's settings file $1
# (server.json): a benchmark's requests (and its terminals' activations) all come from 127.0.0.1,
# and one shop's limit is not what it measures.
shop_lift_rate_limit() {
    python3 - "$1" <<'PY' || die "could not raise the limits in $1 (is it the server's settings file?)"
import json, sys
path = sys.argv[1]
with open(path) as handle:
    settings = json.load(handle)
settings.update(rateLimitBurst=1000000, rateLimitPerSecond=1000000, signInsPerAddress=1000000)
with open(path, "w") as handle:
    json.dump(settings, handle, indent=2, sort_keys=True)
PY
}

# Sets `email` and writes the merchant's password to $work/merchant-password, then makes a
# server in $work/server (an issuer key, an SQLite database, listening on any free port) with the
# merchant "Corner Café" (EUR) signing in with them. Each line it says starts with $1.
shop_create_merchant() {
    email="owner@corner.example"
    printf 'correct horse battery staple\n' >"$work/merchant-password"
    chmod 600 "$work/merchant-password"
    "$bin/horizon-server" init --data-dir "$work/server" --listen 127.0.0.1:0 | sed "s@^@$1@"
    "$bin/horizon-server" merchants add "Corner Café" --email "$email" --currency EUR \
        --password-file "$work/merchant-password" --data-dir "$work/server" | sed "s@^@$1@"
}

# A wallet in $work/wallet registered with the server at `url` as Alex (a PUK by SMS and an
# activation link by mail, both read from the server's outbox, the link pressed with the anchor's
# published fingerprint) and topped up with 100.00. Each line it says starts with $1.
shop_register_wallet() {
    local phone="+4915112345678" code link fingerprint
    "$bin/horizon-wallet" register --server "$url" --name "Alex" --email alex@example.com --phone "$phone" \
        --data-dir "$work/wallet" | sed "s@^@$1@"
    # The outbox shows a code only while it can be used.
    code=$("$bin/horizon-server" outbox --to "$phone" --limit 1 --data-dir "$work/server" |
        sed -n 's/.*PUK is \([0-9]\{8\}\).*/\1/p' | head -1)
    link=$("$bin/horizon-server" outbox --to alex@example.com --limit 1 --data-dir "$work/server" |
        grep -o 'https\?://[^ ]*/v1/wallets/activation?[^ ]*' | head -1)
    [ -n "$code" ] && [ -n "$link" ] || die "no PUK or activation link in the server's outbox"
    fingerprint=$("$bin/horizon-server" anchor --data-dir "$work/server" | sed -n 's/^fingerprint: *//p')
    [ -n "$fingerprint" ] || die "no anchor fingerprint from horizon-server anchor"
    "$bin/horizon-wallet" verify "$code" --data-dir "$work/wallet" | sed "s@^@$1@"
    "$bin/horizon-wallet" activation-status --confirm-link "$link" --anchor-fingerprint "$fingerprint" \
        --data-dir "$work/wallet" | sed "s@^@$1@"
    "$bin/horizon-server" wallets top-up alex@example.com 100.00 --data-dir "$work/server" | sed "s@^@$1@"
}
