#!/usr/bin/env bash
# The scale-out proof, with real processes: several `horizon-server serve`
# processes on one database, terminals activated and wallets registered through their
# endpoints, every payment id submitted to all servers at once and retried (once after a
# deliberate client timeout), then the database read back: every id executed exactly once, one
# transaction per id, postings sum to zero per currency, no negative wallet, each wallet debited
# exactly its payments. The driver is `horizon-bench scale-out` (its --help has the details).
#
#   Tools/scale-out.sh                         2000 payments, 10 terminals, 2 servers, throw-away PostgreSQL
#   Tools/scale-out.sh --payments 20000 --servers 3
#   Tools/scale-out.sh --database postgres://horizon@db.example/horizon   an existing database
#   Tools/scale-out.sh --kill-restart          SIGKILL one server mid-run, restart it on its port
#   Tools/scale-out.sh --failover              a primary and a synchronous standby; SIGKILL the
#                                              primary mid-run, promote the standby
#   Tools/scale-out.sh --rolling-upgrade       the servers behind HAProxy; each drained, stopped,
#                                              upgraded and started again while terminals pay
#   Tools/scale-out.sh --help
#
# Exit status: 0 when every check passed, 1 when one failed (or the run could not be set up).
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh
source Tools/lib/postgres.sh
source Tools/lib/shop.sh

usage() {
    cat <<'EOF'
usage: Tools/scale-out.sh [options] [-- horizon-bench scale-out options]

Starts N horizon-server processes on one database, drives payments through all of them at
once from `horizon-bench scale-out`, and checks from the database that every payment id was
executed exactly once and the books balance. Prints a summary; writes a JSON result.

  --payments N        payments in all (default 2000)
  --terminals N       terminals paying in parallel, each with its own wallet (default 10)
  --servers N         server processes (default 2)
  --database URL      postgres://… to use an existing database (its ledger schema is migrated
                      and a new merchant added; nothing is removed), or `sqlite` for one SQLite
                      file shared by the processes. Default: a throw-away PostgreSQL
                      (Tools/lib/postgres.sh: installed when missing, removed afterwards).
  --kill-restart      SIGKILL the last server once a quarter of the payments are done, restart
                      it on the same port: exactly-once must hold across the crash
  --failover          run on a throw-away PostgreSQL primary with a synchronous standby (the
                      servers get both hosts in one URL); once a quarter of the payments are
                      done SIGKILL the primary and, a second later, promote the standby with
                      pg_ctl promote: every payment approved before must be there once, every
                      one left unanswered must settle once when retried; prints the counts
  --rolling-upgrade   put the servers behind one address (HAProxy, installed when missing), and
                      once a quarter of the payments are done upgrade them one at a time while
                      the terminals keep paying: drain it in HAProxy (new requests go to the
                      others), wait for its requests in flight, SIGTERM it (it finishes what it
                      has), start the upgraded binary on its port, put it back. No terminal may
                      see a single failed request, and every payment must run exactly once
  --upgrade-bin DIR   with --rolling-upgrade: the horizon-server to start as the upgrade
                      (default: the same binary again), and the horizon-bench that drives the
                      run. --bin's horizon-server (the previous version) creates the database and
                      serves until it is replaced, so it runs on the schema the upgrade migrated
  --release           build and run release binaries (real figures; slow first build)
  --bin DIR           use the horizon-server and horizon-bench already built in DIR (no build)
  --output FILE       the JSON result (default Benchmarks/results/scale-out-latest.json)
  --profile FILE      record the servers under `perf record -g` into FILE from the first payment
                      to the last (Benchmarks/server-profile.sh reads it); not with --kill-restart,
                      --failover or --rolling-upgrade
  --keep              keep the work directory (server logs, settings) afterwards
  -h, --help          this text

Anything after `--` goes to `horizon-bench scale-out` (e.g. -- --copies 2 --timeout-every 5).
EOF
}

payments=2000
terminals=10
servers=2
database=""
kill_restart=""
failover=""
rolling=""
upgrade_bin=""
release=""
bin=""
output="Benchmarks/results/scale-out-latest.json"
keep=""
profile=""
extra=()
number() { case "$2" in '' | *[!0-9]*) die "$1 needs a whole number (got '$2'); see --help" ;; esac; }
while [ $# -gt 0 ]; do
    case "$1" in
    --payments) number "$1" "${2:-}"; payments=$2; shift 2 ;;
    --terminals) number "$1" "${2:-}"; terminals=$2; shift 2 ;;
    --servers) number "$1" "${2:-}"; servers=$2; shift 2 ;;
    --database) [ -n "${2:-}" ] || die "--database needs a URL or 'sqlite'"; database=$2; shift 2 ;;
    --kill-restart) kill_restart=1; shift ;;
    --failover) failover=1; shift ;;
    --rolling-upgrade) rolling=1; shift ;;
    --upgrade-bin) [ -x "${2:-}/horizon-server" ] && [ -x "${2:-}/horizon-bench" ] ||
        die "--upgrade-bin needs a directory with horizon-server and horizon-bench"; upgrade_bin=$2; shift 2 ;;
    --release) release=1; shift ;;
    --bin) [ -d "${2:-}" ] || die "--bin needs a directory with horizon-server and horizon-bench"; bin=$2; shift 2 ;;
    --output) [ -n "${2:-}" ] || die "--output needs a file"; output=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --profile) [ -n "${2:-}" ] || die "--profile needs a file for perf's data"; profile=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; die "unknown option $1" ;;
    esac
done
[ "$servers" -ge 1 ] && [ "$servers" -le 16 ] || die "--servers must be 1 to 16"
[ "$terminals" -ge 1 ] || die "--terminals must be at least 1"
[ "$payments" -ge 1 ] || die "--payments must be at least 1"
if [ -n "$kill_restart" ] && [ "$servers" -lt 2 ]; then die "--kill-restart needs --servers 2 or more"; fi
if [ -n "$rolling" ]; then
    [ "$servers" -ge 2 ] || die "--rolling-upgrade needs --servers 2 or more (one keeps serving while another is upgraded)"
    [ -z "$kill_restart$failover" ] || die "--rolling-upgrade stops servers gently; drop --kill-restart and --failover"
fi
[ -z "$upgrade_bin" ] || [ -n "$rolling" ] || die "--upgrade-bin goes with --rolling-upgrade"
if [ -n "$profile" ]; then
    [ -z "$kill_restart$failover$rolling" ] || die "--profile records a steady run; drop --kill-restart, --failover and --rolling-upgrade"
    command -v perf >/dev/null || die "--profile needs perf (apt-get install linux-perf)"
fi
if [ -n "$failover" ]; then
    [ -z "$database" ] || die "--failover starts its own primary and standby; drop --database"
    [ -z "$kill_restart" ] || die "--failover and --kill-restart kill one thing each; choose one"
fi

if [ -z "$bin" ]; then
    if [ -n "$release" ]; then build_server_and_bench release; else build_server_and_bench debug; fi
fi
for program in horizon-server horizon-bench; do
    # With --upgrade-bin, the driver is the upgrade's.
    if [ "$program" = horizon-bench ] && [ -n "$upgrade_bin" ]; then continue; fi
    [ -x "$bin/$program" ] || die "$bin/$program is missing; build it (swift build --product $program) or drop --bin"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/horizon-scale-out.XXXXXX")
started_postgres=""
started_pair=""
setup_note=""
case "$database" in
"")
    # Each sets its own EXIT trap; ours (below) replaces it and stops the cluster too.
    if [ -n "$failover" ]; then
        postgres_start_replicated_pair
        started_pair=1
        database=$HORIZON_FAILOVER_URL
        setup_note="throw-away PostgreSQL $("$(postgres_bin_dir)/postgres" --version | awk '{print $3}') primary and synchronous standby on Unix sockets"
    else
        postgres_start_throwaway
        started_postgres=1
        database=$HORIZON_TEST_POSTGRES_URL
        setup_note="throw-away PostgreSQL $("$(postgres_bin_dir)/postgres" --version | awk '{print $3}') on a Unix socket"
    fi
    ;;
sqlite) database="sqlite:$work/ledger.sqlite"; setup_note="one SQLite file shared by the processes" ;;
postgres://* | postgresql://*) setup_note="PostgreSQL given with --database" ;;
*) die "--database must be a postgres:// URL or 'sqlite' (got $database)" ;;
esac

cleanup() {
    local status=$?
    for file in "$work"/server-*.pid; do
        [ -f "$file" ] || continue
        kill -TERM "$(cat "$file")" 2>/dev/null || true
    done
    for file in "$work"/server-*.pid; do
        [ -f "$file" ] || continue
        local pid
        pid=$(cat "$file")
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    [ -n "${watcher_pid:-}" ] && kill "$watcher_pid" 2>/dev/null || true
    [ -f "$work/perf.pid" ] && kill -TERM "$(cat "$work/perf.pid")" 2>/dev/null || true
    [ -n "${proxy_pid:-}" ] && kill "$proxy_pid" 2>/dev/null || true
    if [ -n "$keep" ]; then echo "work directory kept: $work" >&2; else rm -rf "$work"; fi
    if [ -n "$started_postgres" ]; then postgres_stop_throwaway || true; fi
    if [ -n "$started_pair" ]; then postgres_stop_replicated_pair || true; fi
    exit "$status"
}
trap cleanup EXIT

step "one database for $servers server processes: $(printf '%s' "$database" | sed 's/:[^:@/]*@/:***@/')"
"$bin/horizon-server" init --data-dir "$work/server" --database "$database" --listen 127.0.0.1:0 >"$work/init.log" 2>&1 ||
    { cat "$work/init.log" >&2; die "horizon-server init failed (above)"; }
shop_lift_rate_limit "$work/server/server.json"

run_id=$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
email="scale-$run_id@merchant.example"
printf 'scale-out password %s\n' "$run_id" >"$work/password"
chmod 600 "$work/password"
"$bin/horizon-server" merchants add "Scale-out Café $run_id" --email "$email" --currency EUR \
    --password-file "$work/password" --data-dir "$work/server" >"$work/merchant.log" 2>&1 ||
    { cat "$work/merchant.log" >&2; die "horizon-server merchants add failed (above)"; }

# Starts server $1 listening on $2 (a port, 0 for any free one); its URL goes to server-$1.url.
start_server() {
    local index=$1 port=$2 program=${3:-$bin/horizon-server} url=""
    : >"$work/server-$index.out"
    "$program" serve --data-dir "$work/server" --listen "127.0.0.1:$port" --log-level warning \
        >"$work/server-$index.out" 2>>"$work/server-$index.log" &
    echo $! >"$work/server-$index.pid"
    # Watched through its pid file; disowned so that a deliberate SIGKILL prints no job notice.
    disown $!
    # Up to 60 s: a debug build on a loaded machine (the test suite runs this) starts slowly.
    for _ in $(seq 1 600); do
        url=$(sed -n 's/^listening on //p' "$work/server-$index.out")
        [ -n "$url" ] && break
        kill -0 "$(cat "$work/server-$index.pid")" 2>/dev/null ||
            die "server $index stopped: $(tail -n 5 "$work/server-$index.log")"
        sleep 0.1
    done
    [ -n "$url" ] || die "server $index did not start within 60 s: $(tail -n 5 "$work/server-$index.log")"
    echo "$url" >"$work/server-$index.url"
}

step "starting $servers horizon-server processes"
urls=()
for index in $(seq 1 "$servers"); do
    start_server "$index" 0
    urls+=(--server "$(cat "$work/server-$index.url")")
    echo "server $index | pid $(cat "$work/server-$index.pid"), $(cat "$work/server-$index.url")" >&2
done

# Waits until the driver holds its payments (--hold-at): the point where a watcher acts. Fails
# when the driver ended without holding (it failed before): then there is nothing to do.
wait_for_hold() {
    while :; do
        sleep 0.05
        [ -f "$work/driver.log" ] || continue
        [ ! -f "$work/driver-ended" ] || return 1
        if grep -q 'scale-out: holding at payment' "$work/driver.log"; then return 0; fi
    done
}

watcher_pid=""
proxy_pid=""
if [ -n "$rolling" ]; then
    ensure_debian_packages "${HORIZON_PROXY_PACKAGES[@]}"
    haproxy=$(command -v haproxy || echo /usr/sbin/haproxy)
    [ -x "$haproxy" ] || die "haproxy is not installed (apt-get install haproxy)"
    proxy_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # Every choice here is one an operator's own configuration needs for a rolling upgrade:
    # - health checks on /ready every 300 ms, each given 3 s (a busy server is slow, not down), so a
#   stopped or restarted server is seen within a second;
    # - `retry-on` with `redispatch`: a request whose connection failed, or was closed before
    #   an answer (a server that just stopped), is sent again to another server. Safe for every
    #   Horizon request: a payment is settled by its id, so a repeated one gets the first answer;
    # - the admin socket: `set server … state drain` sends a server no new requests while those
    #   in flight finish, and `state ready` brings it back.
    {
        cat <<EOF
global
    stats socket $work/haproxy.sock mode 600 level admin
    maxconn 2000

defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout queue 30s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response response-timeout
    option httpchk GET /ready
    timeout check 3s
    default-server inter 300ms fastinter 100ms fall 3 rise 1

frontend horizon
    bind 127.0.0.1:$proxy_port
    default_backend servers

backend servers
    balance roundrobin
EOF
        for index in $(seq 1 "$servers"); do
            printf '    server s%s %s check\n' "$index" "$(sed 's|^http://||; s|/.*$||' "$work/server-$index.url")"
        done
    } >"$work/haproxy.cfg"
    "$haproxy" -c -q -f "$work/haproxy.cfg" || die "HAProxy refused its configuration ($work/haproxy.cfg)"
    "$haproxy" -db -f "$work/haproxy.cfg" >"$work/haproxy.log" 2>&1 &
    proxy_pid=$!
    disown "$proxy_pid"
    # Sends one command to HAProxy's admin socket and prints the answer.
    haproxy_command() {
        python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall((sys.argv[2] + "\n").encode())
answer = b""
while chunk := s.recv(65536):
    answer += chunk
print(answer.decode(), end="")' "$work/haproxy.sock" "$1"
    }
    # Field $2 of server $1 from `show stat` (CSV whose first line names the fields).
    haproxy_field() {
        haproxy_command "show stat" | awk -F, -v server="s$1" -v field="$2" '
            NR == 1 { sub(/^# /, ""); for (i = 1; i <= NF; i++) if ($i == field) column = i; next }
            $1 == "servers" && $2 == server { print $column }'
    }
    for _ in $(seq 1 100); do [ -S "$work/haproxy.sock" ] && break; sleep 0.1; done
    [ -S "$work/haproxy.sock" ] || die "HAProxy did not start: $(tail -n 5 "$work/haproxy.log")"
    for index in $(seq 1 "$servers"); do
        for _ in $(seq 1 100); do [ "$(haproxy_field "$index" status)" = UP ] && break; sleep 0.1; done
        [ "$(haproxy_field "$index" status)" = UP ] || die "HAProxy does not see server $index up: $(tail -n 5 "$work/haproxy.log")"
    done
    echo "HAProxy $("$haproxy" -v | awk 'NR == 1 {print $3}') | pid $proxy_pid, http://127.0.0.1:$proxy_port in front of $servers servers" >&2
    urls=(--server "http://127.0.0.1:$proxy_port")
    (
        wait_for_hold || exit 0
        # The terminals go on paying (slowly, until the upgrade is done) while each server in
        # turn is drained, stopped, upgraded and started.
        touch "$work/go"
        for index in $(seq 1 "$servers"); do
            pid=$(cat "$work/server-$index.pid")
            port=$(sed 's/.*://' "$work/server-$index.url")
            haproxy_command "set server servers/s$index state drain" >/dev/null
            # Requests already sent to it finish there (30 s at most).
            for _ in $(seq 1 300); do [ "$(haproxy_field "$index" scur)" = 0 ] && break; sleep 0.1; done
            kill -TERM "$pid"
            for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            if kill -0 "$pid" 2>/dev/null; then
                echo "scale-out.sh: server $index did not stop within 60 s of SIGTERM" >&2
                exit 1
            fi
            echo "scale-out.sh: drained and stopped server $index (pid $pid)" >&2
            start_server "$index" "$port" "${upgrade_bin:-$bin}/horizon-server"
            haproxy_command "set server servers/s$index state ready" >/dev/null
            for _ in $(seq 1 100); do [ "$(haproxy_field "$index" status)" = UP ] && break; sleep 0.1; done
            [ "$(haproxy_field "$index" status)" = UP ] ||
                { echo "scale-out.sh: HAProxy does not see the upgraded server $index up" >&2; exit 1; }
            echo "scale-out.sh: upgraded server $index serves again on port $port (pid $(cat "$work/server-$index.pid"))" >&2
        done
        touch "$work/upgraded"
    ) &
    watcher_pid=$!
    extra=(--hold-at "$(((payments + 3) / 4))" --hold-until-file "$work/go" --pause-ms 20
        --pause-until-file "$work/upgraded" --copies 1 --late-retries 0 --timeout-every 0 --expect-no-failures
        "${extra[@]}")
    setup_note="$setup_note; behind HAProxy, each server drained, stopped, upgraded and started again mid-run"
fi

if [ -n "$kill_restart" ]; then
    # Once a quarter of the payments are done, SIGKILL the last server (no graceful anything:
    # requests in flight are cut, transactions in flight abandoned) and restart it on its port.
    (
        last=$servers
        # The driver holds its payments from the quarter on until $work/go exists (--hold-at), so
        # the kill comes at that point however fast the run is.
        wait_for_hold || exit 0
        pid=$(cat "$work/server-$last.pid")
        port=$(sed 's/.*://' "$work/server-$last.url")
        kill -KILL "$pid" 2>/dev/null && echo "scale-out.sh: SIGKILLed server $last (pid $pid)" >&2
        while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
        # Payments go on while the server is down (their copies for it fail and are retried on
        # the others), then it comes back.
        touch "$work/go"
        sleep 0.5
        start_server "$last" "$port"
        echo "scale-out.sh: restarted server $last on port $port (pid $(cat "$work/server-$last.pid"))" >&2
        echo restarted >"$work/restarted"
    ) &
    watcher_pid=$!
    extra=(--hold-at "$(((payments + 3) / 4))" --hold-until-file "$work/go" "${extra[@]}")
    setup_note="$setup_note; server $servers SIGKILLed and restarted mid-run"
fi

if [ -n "$failover" ]; then
    # Once a quarter of the payments are done, the primary dies with everything in flight;
    # payments go on meeting no primary for a second (answered 503, retried with the same id),
    # then the standby is promoted and the servers find it by themselves.
    (
        wait_for_hold || exit 0
        postgres_kill_primary
        date +%s.%N >"$work/primary-killed"
        echo "scale-out.sh: SIGKILLed the PostgreSQL primary" >&2
        touch "$work/go"
        sleep 1
        postgres_promote_standby
        echo "scale-out.sh: promoted the standby (pg_ctl promote)" >&2
        echo promoted >"$work/promoted"
    ) &
    watcher_pid=$!
    extra=(--hold-at "$(((payments + 3) / 4))" --hold-until-file "$work/go" --primary-killed-file "$work/primary-killed"
        --timeout-every 0 "${extra[@]}")
    setup_note="$setup_note; the primary SIGKILLed mid-run, the standby promoted"
fi

if [ -n "$profile" ]; then
    # perf starts once the driver holds at the first payment (activation and registration, with
    # their password hashing, stay out of the profile) and stops when the driver ends.
    (
        wait_for_hold || exit 0
        pids=$(cat "$work"/server-*.pid | paste -sd, -)
        perf record -g -o "$profile" -p "$pids" >"$work/perf.log" 2>&1 &
        echo $! >"$work/perf.pid"
        for _ in $(seq 1 100); do [ -s "$profile" ] && break; sleep 0.1; done
        sleep 0.5
        kill -0 "$(cat "$work/perf.pid")" 2>/dev/null ||
            { echo "scale-out.sh: perf record did not start: $(tail -n 5 "$work/perf.log")" >&2; touch "$work/go"; exit 1; }
        touch "$work/go"
    ) &
    watcher_pid=$!
    extra=(--hold-at 0 --hold-until-file "$work/go" "${extra[@]}")
    setup_note="$setup_note; recorded by perf record -g"
fi
# The servers' CPU time is read just before and after the payments (the driver reads it); not
# when a server is replaced mid-run.
if [ -z "$kill_restart$rolling" ]; then
    for index in $(seq 1 "$servers"); do extra=(--server-pid "$(cat "$work/server-$index.pid")" "${extra[@]}"); done
fi

step "driving $payments payments from $terminals terminals through $servers servers"
status=0
"${upgrade_bin:-$bin}/horizon-bench" scale-out "${urls[@]}" --database "$database" --email "$email" --password-file "$work/password" \
    --payments "$payments" --terminals "$terminals" --result-file "$output" \
    --setup "$servers horizon-server processes, $setup_note" "${extra[@]}" 2> >(tee "$work/driver.log" >&2) ||
    status=$?
touch "$work/driver-ended"
if [ -n "$profile" ] && [ -f "$work/perf.pid" ]; then
    perf_pid=$(cat "$work/perf.pid")
    rm -f "$work/perf.pid"
    kill -TERM "$perf_pid" 2>/dev/null || true
    # perf writes its data when told to stop; its process is not a child of this shell.
    for _ in $(seq 1 600); do kill -0 "$perf_pid" 2>/dev/null || break; sleep 0.1; done
    [ -s "$profile" ] || { echo "scale-out.sh: perf wrote no data: $(tail -n 5 "$work/perf.log")" >&2; [ "$status" -eq 0 ] && status=1; }
fi
if [ -n "$watcher_pid" ]; then
    wait "$watcher_pid" 2>/dev/null || true
    watcher_pid=""
    if [ -n "$kill_restart" ] && [ ! -f "$work/restarted" ]; then
        echo "scale-out.sh: the run ended before the server could be killed and restarted; use more --payments" >&2
        [ "$status" -eq 0 ] && status=1
    fi
    if [ -n "$rolling" ] && [ ! -f "$work/upgraded" ]; then
        echo "scale-out.sh: the run ended before every server was upgraded; use more --payments" >&2
        [ "$status" -eq 0 ] && status=1
    fi
    if [ -n "$failover" ] && [ ! -f "$work/promoted" ]; then
        echo "scale-out.sh: the run ended before the primary could be killed and the standby promoted; use more --payments" >&2
        [ "$status" -eq 0 ] && status=1
    fi
fi
for index in $(seq 1 "$servers"); do
    if ! kill -0 "$(cat "$work/server-$index.pid")" 2>/dev/null; then
        echo "scale-out.sh: server $index is no longer running: $(tail -n 5 "$work/server-$index.log")" >&2
        [ "$status" -eq 0 ] && status=1
    fi
done
exit "$status"
