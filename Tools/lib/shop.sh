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

# Serves the data directory $work/server in the background and sets `url` once it listens
# (within 10 s), or dies with the server's own words.
shop_start_server() {
    "$bin/horizon-server" serve --data-dir "$work/server" --log-level warning >"$work/server.out" 2>"$work/server.log" &
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

# Lifts the per-peer rate limit in the server's settings file $1 (server.json): a benchmark's
# requests all come from 127.0.0.1, and one shop's limit is not what it measures.
shop_lift_rate_limit() {
    sed -i -e 's/"rateLimitBurst" : [0-9]*/"rateLimitBurst" : 1000000/' \
        -e 's/"rateLimitPerSecond" : [0-9.e+]*/"rateLimitPerSecond" : 1000000/' "$1"
    grep -q '"rateLimitBurst" : 1000000' "$1" || die "could not raise the rate limit in $1 (has its format changed?)"
}
