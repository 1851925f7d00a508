#!/usr/bin/env bash
# Fuzzes the HTTP API against its contract: schemathesis (every check; Tools/lib/api-fuzz.toml
# names the few an operation cannot pass by construction, and why) against a running
# horizon-server on SQLite, then on PostgreSQL, with signed requests: a terminal key activated on
# that server and a registered wallet key sign the operations the contract marks HorizonSignature
# (Tools/lib/api_fuzz.py), the merchant's admin session carries the merchant service's.
# schemathesis is installed with pip into .build/schemathesis-venv when missing.
#
#   Tools/api-fuzz.sh                    both stores, 25 examples per operation
#   Tools/api-fuzz.sh --store sqlite     one store (sqlite or postgres)
#   Tools/api-fuzz.sh --examples 100     more examples per operation
#   KEEP=1 Tools/api-fuzz.sh             keep the data directories and reports afterwards
#
# PostgreSQL: HORIZON_TEST_POSTGRES_URL's cluster when exported with HORIZON_PG_DIR (a fresh
# database is made in it and dropped after), else a throw-away cluster (Tools/lib/postgres.sh).
# Exits non-zero when schemathesis reports any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh
source Tools/lib/postgres.sh
source Tools/lib/shop.sh

stores="sqlite postgres"
examples=25
while [ $# -gt 0 ]; do
    case "$1" in
    --store) stores="${2:?--store needs sqlite or postgres}"; shift 2 ;;
    --examples) examples="${2:?--examples needs a number}"; shift 2 ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
    esac
done
case "$examples" in '' | *[!0-9]*) die "--examples must be a number" ;; esac

# One version: a newer schemathesis brings new checks, which belong in a change of their own.
venv=.build/schemathesis-venv
schemathesis_version=4.32.5
if ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -qx "schemathesis, version $schemathesis_version"; then
    ensure_debian_packages python3-venv
    step "installing schemathesis $schemathesis_version and cryptography into $venv (pip)"
    python3 -m venv "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$venv/bin/pip" install -q "schemathesis==$schemathesis_version" cryptography ||
        die "pip could not install schemathesis"
fi

ensure_swift
step "building horizon-server"
swift build --product horizon-server 2>&1 | filter_build_output
bin=$(swift build --show-bin-path)

shop_work_area horizon-api-fuzz
pg_database=""
drop_database() {
    if [ -n "$pg_database" ]; then
        "$(postgres_bin_dir)/psql" -X -q -h "$HORIZON_PG_DIR/socket" -p "$HORIZON_PG_PORT" -U horizon_admin \
            -d postgres -c "DROP DATABASE IF EXISTS $pg_database WITH (FORCE)" >/dev/null 2>&1 || true
    fi
}
trap 'drop_database; shop_cleanup' EXIT

# The PostgreSQL database first (in this shell: its traps clean up at exit), then both stores at
# once, each with its own server and work area: schemathesis and a debug server each keep about
# one core busy, and the two runs share nothing.
database=""
case " $stores " in
*" postgres "*)
    if [ -z "${HORIZON_PG_DIR:-}" ] || [ ! -d "${HORIZON_PG_DIR:-}/socket" ]; then
        postgres_start_throwaway
        # Its own trap replaced this script's: both clean up now.
        trap 'drop_database; shop_cleanup; postgres_stop_throwaway' EXIT
    fi
    HORIZON_PG_PORT=${HORIZON_PG_PORT:-$(printf '%s' "${HORIZON_TEST_POSTGRES_URL:-}" | sed -n 's/.*port=\([0-9]*\).*/\1/p')}
    pg_database="horizon_fuzz_$$"
    "$(postgres_bin_dir)/psql" -X -q -v ON_ERROR_STOP=1 -h "$HORIZON_PG_DIR/socket" -p "$HORIZON_PG_PORT" \
        -U horizon_admin -d postgres -c "CREATE DATABASE $pg_database OWNER horizon" >/dev/null ||
        die "could not create a database for the fuzz run"
    database="postgres://horizon@/$pg_database?host=$HORIZON_PG_DIR/socket&port=$HORIZON_PG_PORT"
    ;;
esac
for store in $stores; do
    case "$store" in sqlite | postgres) ;; *) die "--store must be sqlite or postgres (got $store)" ;; esac
done

# One store's run, in a subshell of its own (its `work`, `url` and `server_pid` are its own);
# exits non-zero when schemathesis reports a failure.
fuzz_store() (
    local store=$1 database=""
    [ "$store" = postgres ] && database=$2
    work="$top/$store-area"
    mkdir -p "$work"
    server_pid=""
    trap '[ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null; wait' EXIT
    step "schemathesis on $store: a server, a merchant, a terminal and a wallet in $work"
    email="owner@fuzz.example"
    printf 'correct horse battery staple\n' >"$work/merchant-password"
    chmod 600 "$work/merchant-password"
    "$bin/horizon-server" init --data-dir "$work/server" --listen 127.0.0.1:0 ${database:+--database "$database"} \
        >"$work/init.log" 2>&1 || { cat "$work/init.log" >&2; die "horizon-server init failed ($store)"; }
    # Every generated request comes from 127.0.0.1: the per-peer limit is not under test here.
    shop_lift_rate_limit "$work/server/server.json"
    "$bin/horizon-server" merchants add "Fuzz Shop" --email "$email" --currency EUR \
        --password-file "$work/merchant-password" --data-dir "$work/server" >/dev/null
    shop_start_server
    "$venv/bin/python" Tools/lib/api_fuzz.py setup "$url" "$work/state.json" "$bin/horizon-server" \
        "$work/server" "$email" "correct horse battery staple"
    "$bin/horizon-server" wallets top-up fuzz-wallet@example.com 100.00 --data-dir "$work/server" >/dev/null
    local run_status=0 root
    # Run from the work area: schemathesis keeps its replay data in .schemathesis/ there.
    root=$(pwd)
    (cd "$work" && PYTHONPATH="$root/Tools/lib" SCHEMATHESIS_HOOKS=api_fuzz HORIZON_FUZZ_STATE="$work/state.json" \
        "$root/$venv/bin/schemathesis" --config-file "$root/Tools/lib/api-fuzz.toml" run "$root/Sources/HorizonAPI/openapi.yaml" --url "$url" \
        --max-examples "$examples" --seed 1 --workers 1 --request-timeout 10 \
        --report junit --report-dir "$work/report" --output-truncate false) ||
        run_status=$?
    if [ "$run_status" -ne 0 ]; then
        printf 'schemathesis on %s: failures (above); the server log is %s/server.log\n' "$store" "$work" >&2
    fi
    exit "$run_status"
)

top=$work
pids=()
for store in $stores; do
    fuzz_store "$store" "$database" >"$top/$store.out" 2>&1 &
    pids+=("$!")
done
step "schemathesis running on: $stores (at once; each one's output follows when it ends)"
status=0
failed=""
set -- $stores
for pid in "${pids[@]}"; do
    store=$1
    shift
    run_status=0
    wait "$pid" || run_status=$?
    cat "$top/$store.out"
    if [ "$run_status" -ne 0 ]; then
        status=1
        failed="$failed $store"
    fi
done
drop_database
pg_database=""
if [ "$status" -eq 0 ]; then
    echo "schemathesis: no failures on: $stores"
else
    echo "schemathesis: failures on:$failed" >&2
fi
exit "$status"
