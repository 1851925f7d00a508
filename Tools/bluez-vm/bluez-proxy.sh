#!/usr/bin/env bash
# The request proxy against a real bluetoothd, sourced by bluez-checks.sh after
# bluez-payments.sh (whose $work, helpers and adapters it uses): a Horizon server inside the VM
# (SQLite, loopback), a terminal activated with it on hci0, a registered wallet on hci1.
#
# The wallet loses its route to the server this way: it registered (and kept its token and the
# gateway key) while the server listened on one port; the server is then restarted on another,
# which only the terminal is told about. A network namespace would cut the route more cleanly
# (the simulated-radio test does that), but the kernel offers Bluetooth sockets only in the
# initial network namespace.

proxy_dir="$work/proxy"
proxy_phone=+4915112345678
proxy_server_pid=

proxy_server() { "$bin/horizon-server" "$@" --data-dir "$proxy_dir/server"; }
proxy_wallet() { timeout -k 5 120 "$bin/horizon-wallet" "$@" --data-dir "$proxy_dir/wallet"; }

proxy_start_server() {
    local port=$1
    # The program itself in the background (not a shell function), so that $! is its PID.
    "$bin/horizon-server" serve --data-dir "$proxy_dir/server" --listen "127.0.0.1:$port" --log-level warning \
        >>"$proxy_dir/proxy.server" 2>&1 &
    proxy_server_pid=$!
    for _ in $(seq 300); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        sleep 0.2
    done
    echo "      horizon-server did not listen on port $port"
    return 1
}

proxy_stop_server() {
    [ -n "$proxy_server_pid" ] || return 0
    kill -INT "$proxy_server_pid" 2>/dev/null
    wait_pid "$proxy_server_pid" 30 >/dev/null
    proxy_server_pid=
}

setup_proxy() {
    mkdir -p "$proxy_dir"
    echo "      (proxy check setup started at $(date +%T))"
    # virtme-ng brings the VM up without networking; loopback is all this needs.
    ip link set lo up 2>/dev/null
    printf 'correct horse battery staple\n' >"$proxy_dir/password"
    {
        proxy_server init &&
            proxy_server merchants add "VM Bistro" --email owner@vm.example --currency EUR \
                --password-file "$proxy_dir/password" &&
            proxy_start_server 18481 &&
            "$bin/horizon-terminal" activate --server http://127.0.0.1:18481 --email owner@vm.example \
                --password-file "$proxy_dir/password" --label "Till 1" --data-dir "$proxy_dir/terminal" &&
            proxy_wallet register --server http://127.0.0.1:18481 --name Alex --email alex@vm.example \
                --phone "$proxy_phone"
    } >>"$proxy_dir/proxy.setup" 2>&1 || return 1
    local code link fingerprint
    code=$(proxy_server outbox --to "$proxy_phone" --json 2>>"$proxy_dir/proxy.setup" | grep -o '[0-9]\{8\}' | head -1)
    link=$(proxy_server outbox --to alex@vm.example 2>>"$proxy_dir/proxy.setup" |
        grep -o 'https\?://[^ ]*/v1/wallets/activation?[^ ]*' | head -1)
    # The wallet pins the server's anchor only with the fingerprint its operator publishes.
    fingerprint=$(proxy_server anchor 2>>"$proxy_dir/proxy.setup" | sed -n 's/^fingerprint: *//p')
    {
        proxy_wallet verify "$code" &&
            proxy_wallet activation-status --confirm-link "$link" --anchor-fingerprint "$fingerprint" &&
            proxy_server wallets top-up alex@vm.example 100.00 &&
            proxy_wallet token
    } >>"$proxy_dir/proxy.setup" 2>&1 || return 1
    # The move: only the terminal learns the new port.
    proxy_stop_server
    sed -i 's#127.0.0.1:18481#127.0.0.1:18482#' "$proxy_dir/terminal/terminal.json" &&
        proxy_start_server 18482
}

show_proxy() {
    for file in "$proxy_dir"/proxy.*; do
        echo "      --- $file"
        sed 's/^/      /' "$file" | tail -40
    done
}

check_balance_through_terminal_then_pay() {
    [ "${KEEP_RADIOS:-}" = 1 ] || reset_radios
    "$bin/horizon-terminal" pay 7.50 --data-dir "$proxy_dir/terminal" --json --wait-for-wallet 120 \
        "${on_terminal_radio[@]}" >"$proxy_dir/proxy.terminal.json" 2>"$proxy_dir/proxy.terminal" &
    local pid=$!
    wait_for_log "$proxy_dir/proxy.terminal" "waiting for a wallet" 20 || {
        show_proxy
        return 1
    }
    # Direct, the wallet's server does not answer (and nothing is cached)...
    if proxy_wallet balance >"$proxy_dir/proxy.direct" 2>&1; then
        echo "      the wallet still reached its server directly"
        show_proxy
        return 1
    fi
    # ...through the terminal, over bluetoothd, it does; then it pays the same terminal.
    proxy_wallet balance --json --via-terminal --terminal-timeout 60 "${on_wallet_radio[@]}" \
        >"$proxy_dir/proxy.balance.json" 2>"$proxy_dir/proxy.balance" &&
        grep -q '"minorUnits" : 10000' "$proxy_dir/proxy.balance.json" &&
        grep -q '"viaTerminal" : true' "$proxy_dir/proxy.balance.json" &&
        grep -q 'through a nearby terminal: 2 request(s) relayed' "$proxy_dir/proxy.balance" &&
        proxy_wallet pay --yes --json --timeout 60 "${on_wallet_radio[@]}" >"$proxy_dir/proxy.wallet.json" \
            2>"$proxy_dir/proxy.wallet" &&
        wait_pid "$pid" 60 &&
        grep -q '"state" : "completed"' "$proxy_dir/proxy.terminal.json" || {
        kill -KILL "$pid" 2>/dev/null
        show_proxy
        return 1
    }
}
