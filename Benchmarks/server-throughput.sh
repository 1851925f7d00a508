#!/usr/bin/env bash
# How many payments a second one `horizon-server` settles on PostgreSQL, next to
# what PostgreSQL itself does on the same cluster, at the same client counts, in one run: pgbench
# with a script made of exactly the statements one payment executes
# (Benchmarks/payment-statements.sql, on the ledger the server just used: the budget's yardstick),
# and pgbench's TPC-B-like script. Each payment is a real submission: a Confirm signed by its wallet's
# key (verified by the server), sent by its terminal with the terminal's signature, settled
# exactly once (the run ends with scale-out's database checks). The embedded SQLite server's
# figure is measured the same way. At each level and on each store, the server process's CPU time
# over the payments (read just before the first and after the last) per payment, beside the
# cryptography the server must do for one payment timed alone (`horizon-bench server-crypto`,
# run right after): the budget's "within 2.5x of its cryptography".
#
#   Benchmarks/server-throughput.sh                      release build; 1, 4, 16 and 64 terminals
#   Benchmarks/server-throughput.sh --levels "1 4" --payments-per-terminal 20 --bin .build/debug   quick look
#   Benchmarks/server-throughput.sh --help
#
# Writes Benchmarks/results/server-throughput-latest.json and prints a table.
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh
source Tools/lib/postgres.sh

usage() {
    cat <<'EOF'
usage: Benchmarks/server-throughput.sh [options]

For each client count: Tools/scale-out.sh with one server, that many terminals paying one
after another (each with its own wallet), no duplicate submissions; then pgbench -c N on a
database of the same PostgreSQL cluster; then pgbench -c N -M extended with one payment's
statements (Benchmarks/payment-statements.sql) on a copy of the ledger the server just used; then the
same payments against a server on SQLite. The budget: horizon-server at 16 clients settles at
least 0.7x the payment script's transactions per second; and on each store the server's CPU per
payment (its process's CPU time over the payments / payments) is at most 2.5x its cryptography
for one payment alone (horizon-bench server-crypto, timed right after each run).

  --levels "1 4 16 64"          client counts (terminals, and pgbench clients)
  --payments-per-terminal N     payments each terminal makes at each level (default 40)
  --pgbench-seconds N           length of each pgbench run (default 10)
  --pgbench-scale N             pgbench -i scale factor (default 10: 1 million accounts rows)
  --crypto-iterations N         payments' worth of server cryptography timed after each run (default 2000)
  --bin DIR                     use horizon-server and horizon-bench already built in DIR
                                (default: a release build, 10-20 minutes the first time)
  --output FILE                 the JSON result (default Benchmarks/results/server-throughput-latest.json)
  -h, --help                    this text
EOF
}

levels="1 4 16 64"
per_terminal=40
pgbench_seconds=10
pgbench_scale=10
crypto_iterations=2000
bin=""
output="Benchmarks/results/server-throughput-latest.json"
number() { case "$2" in '' | *[!0-9]*) die "$1 needs a whole number (got '$2'); see --help" ;; esac; }
while [ $# -gt 0 ]; do
    case "$1" in
    --levels) [ -n "${2:-}" ] || die "--levels needs a list such as \"1 4 16\""; levels=$2; shift 2 ;;
    --payments-per-terminal) number "$1" "${2:-}"; per_terminal=$2; shift 2 ;;
    --pgbench-seconds) number "$1" "${2:-}"; pgbench_seconds=$2; shift 2 ;;
    --pgbench-scale) number "$1" "${2:-}"; pgbench_scale=$2; shift 2 ;;
    --crypto-iterations) number "$1" "${2:-}"; crypto_iterations=$2; shift 2 ;;
    --bin) [ -d "${2:-}" ] || die "--bin needs a directory with horizon-server and horizon-bench"; bin=$2; shift 2 ;;
    --output) [ -n "${2:-}" ] || die "--output needs a file"; output=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown option $1" ;;
    esac
done
for level in $levels; do number "--levels" "$level"; [ "$level" -ge 1 ] || die "--levels: at least 1 client"; done
[ "$per_terminal" -ge 1 ] || die "--payments-per-terminal must be at least 1"
[ "$crypto_iterations" -ge 1 ] || die "--crypto-iterations must be at least 1"

[ -n "$bin" ] || build_server_and_bench release

work=$(mktemp -d "${TMPDIR:-/tmp}/horizon-throughput.XXXXXX")
postgres_start_throwaway
trap 'postgres_stop_throwaway || true; rm -rf "$work"' EXIT
pg_bin=$(postgres_bin_dir)
pg=(-h "$HORIZON_PG_DIR/socket" -p "$HORIZON_PG_PORT" -U horizon_admin)
"$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 "${pg[@]}" -d postgres -c "CREATE DATABASE pgbench" >/dev/null
step "pgbench -i -s $pgbench_scale (TPC-B-like tables in their own database of the same cluster)"
"$pg_bin/pgbench" -i -q -s "$pgbench_scale" "${pg[@]}" pgbench >"$work/pgbench-init.log" 2>&1 ||
    { cat "$work/pgbench-init.log" >&2; die "pgbench -i failed"; }
# The load just written (a million rows) would otherwise be flushed during the first level.
"$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 "${pg[@]}" -d postgres -c "CHECKPOINT" >/dev/null

scale_out() {
    local database=$1 terminals=$2 result=$3
    Tools/scale-out.sh --bin "$bin" --database "$database" --servers 1 --terminals "$terminals" \
        --payments $((terminals * per_terminal)) --output "$result" -- \
        --copies 1 --late-retries 0 --timeout-every 0 >"$result.log" 2>&1 ||
        { tail -30 "$result.log" >&2; die "scale-out with $terminals terminals on $database failed (log above)"; }
    # The server's cryptography for one payment alone, on the same machine right after its payments.
    "$bin/horizon-bench" server-crypto --repetitions "$crypto_iterations" --result-file "${result%.json}-crypto.json" \
        >"$result.crypto.log" 2>&1 || { cat "$result.crypto.log" >&2; die "horizon-bench server-crypto failed"; }
}

for level in $levels; do
    step "$level client(s): horizon-server on PostgreSQL, $((level * per_terminal)) payments"
    scale_out "$HORIZON_TEST_POSTGRES_URL" "$level" "$work/horizon-postgres-$level.json"
    step "$level client(s): pgbench, $pgbench_seconds s"
    "$pg_bin/pgbench" -n -c "$level" -j "$((level < 2 ? level : 2))" -T "$pgbench_seconds" "${pg[@]}" pgbench \
        >"$work/pgbench-$level.txt" 2>&1 || { cat "$work/pgbench-$level.txt" >&2; die "pgbench -c $level failed"; }
    step "$level client(s): pgbench with one payment's statements, $pgbench_seconds s"
    # A copy of the ledger the server just used (its rows and indexes), so that the script's
    # payments stay out of the ledger the next level audits; in it, the level's wallets and
    # terminals, one per pgbench client.
    "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 "${pg[@]}" -d postgres -c "DROP DATABASE IF EXISTS payment_script" \
        -c "CREATE DATABASE payment_script TEMPLATE horizon_test OWNER horizon" >/dev/null
    "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$HORIZON_PG_DIR/socket" -p "$HORIZON_PG_PORT" -U horizon \
        -d payment_script -f Benchmarks/payment-statements-setup.sql >"$work/payment-script-setup-$level.txt" 2>&1 ||
        { cat "$work/payment-script-setup-$level.txt" >&2; die "Benchmarks/payment-statements-setup.sql failed"; }
    "$pg_bin/pgbench" -n -M extended -f Benchmarks/payment-statements.sql -c "$level" -j "$((level < 2 ? level : 2))" \
        -T "$pgbench_seconds" -h "$HORIZON_PG_DIR/socket" -p "$HORIZON_PG_PORT" -U horizon payment_script \
        >"$work/payment-script-$level.txt" 2>&1 ||
        { cat "$work/payment-script-$level.txt" >&2; die "pgbench -f Benchmarks/payment-statements.sql -c $level failed"; }
    step "$level client(s): horizon-server on SQLite, $((level * per_terminal)) payments"
    scale_out sqlite "$level" "$work/horizon-sqlite-$level.json"
done

python3 - "$work" "$output" "$levels" "$per_terminal" "$pgbench_seconds" "$pgbench_scale" <<'PY'
import json, os, re, sys, datetime, platform
work, output, levels, per_terminal, seconds, scale = sys.argv[1:7]
rows = []
for level in [int(x) for x in levels.split()]:
    pg = json.load(open(f"{work}/horizon-postgres-{level}.json"))
    lite = json.load(open(f"{work}/horizon-sqlite-{level}.json"))
    text = open(f"{work}/pgbench-{level}.txt").read()
    tps = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", text)
    latency = re.search(r"latency average = ([0-9.]+) ms", text)
    script_text = open(f"{work}/payment-script-{level}.txt").read()
    script_tps = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", script_text)
    script_latency = re.search(r"latency average = ([0-9.]+) ms", script_text)
    script_tps = float(script_tps.group(1)) if script_tps else None
    for report, name in ((pg, "PostgreSQL"), (lite, "SQLite")):
        failed = [c["name"] for c in report["checks"] if not c["passed"]]
        if failed:
            sys.exit(f"{name} at {level} clients: checks failed: {failed}")
    pgbench_tps = float(tps.group(1)) if tps else None
    def store(report, crypto_file):
        # The server's CPU per payment against its cryptography alone, timed right after.
        crypto = json.load(open(crypto_file))
        cpu = (report.get("serverCPU") or {}).get("millisecondsPerPayment")
        alone = crypto["serverCryptoMillisecondsPerPayment"]
        return {"paymentsPerSecond": report["paymentsPerSecond"], "payments": report["payments"],
                "latencyMilliseconds": report["paymentLatencyMilliseconds"],
                "serverCPUMillisecondsPerPayment": cpu,
                "serverCryptoMillisecondsPerPayment": alone,
                "serverCryptoOperations": crypto["cryptoOperations"],
                "ratioServerCPUToCrypto": cpu / alone if cpu is not None and alone > 0 else None}
    rows.append({
        "clients": level,
        "horizonPostgres": store(pg, f"{work}/horizon-postgres-{level}-crypto.json"),
        "horizonSQLite": store(lite, f"{work}/horizon-sqlite-{level}-crypto.json"),
        "pgbench": {"tps": pgbench_tps, "latencyAverageMilliseconds": float(latency.group(1)) if latency else None},
        "ratioToPgbench": (pg["paymentsPerSecond"] / pgbench_tps) if pgbench_tps else None,
        "paymentScript": {"tps": script_tps,
                          "latencyAverageMilliseconds": float(script_latency.group(1)) if script_latency else None},
        "ratioToPaymentScript": (pg["paymentsPerSecond"] / script_tps) if script_tps else None,
    })
at16 = next((row for row in rows if row["clients"] == 16), None)
result = {
    "generatedAt": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
    "method": (f"one horizon-server; N terminals pay one after another ({per_terminal} payments each, "
               "wallet-signed Confirms, terminal-signed requests, no duplicates); pgbench -c N -T "
               f"{seconds} -M extended with one payment's statements (Benchmarks/payment-statements.sql) on "
               "the ledger the server used, and TPC-B-like (scale {scale}), on the same PostgreSQL cluster; then the same "
               "payments on SQLite. Checks: every payment executed once, books balanced."),
    "levels": rows,
    # Every benchmark's budget lines have this shape (BENCHMARKS.md's table reads them).
    "budget": [{
        "item": "horizon-server on PostgreSQL / pgbench running one payment's statements "
                f"(Benchmarks/payment-statements.sql), 16 clients (p99 {at16['horizonPostgres']['latencyMilliseconds']['p99']:.1f} ms)"
                if at16 else "horizon-server on PostgreSQL / pgbench with one payment's statements, 16 clients (not run)",
        "measured": at16["ratioToPaymentScript"] if at16 else None,
        "limit": 0.7,
        "unit": "x (at least)",
        "p99Milliseconds": at16["horizonPostgres"]["latencyMilliseconds"]["p99"] if at16 else None,
        "met": (at16["ratioToPaymentScript"] or 0) >= 0.7 if at16 else None,
    }],
}
# The server's CPU per payment within 2.5x of its cryptography, on each store, at 16 clients.
for key, name in (("horizonPostgres", "PostgreSQL"), ("horizonSQLite", "SQLite")):
    point = at16[key] if at16 else None
    ratio = point["ratioServerCPUToCrypto"] if point else None
    result["budget"].append({
        "item": (f"server CPU per payment within 2.5x of its cryptography, {name}, 16 clients "
                 f"({point['serverCPUMillisecondsPerPayment']:.3f} / {point['serverCryptoMillisecondsPerPayment']:.3f} ms)")
                if ratio is not None else f"server CPU per payment within 2.5x of its cryptography, {name}, 16 clients (not run)",
        "measured": ratio,
        "limit": 2.5,
        "unit": "x",
        "met": ratio <= 2.5 if ratio is not None else None,
    })
os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
json.dump(result, open(output, "w"), indent=2, sort_keys=True)
print(f"{'clients':>7}  {'PG pay/s':>9}  {'p50 ms':>7}  {'p99 ms':>7}  {'script tps':>10}  {'ratio':>6}  {'TPC-B tps':>9}  {'ratio':>6}  {'SQLite pay/s':>12}  {'p50 ms':>7}")
for row in rows:
    pg, lite, bench = row["horizonPostgres"], row["horizonSQLite"], row["pgbench"]
    ratio = f"{row['ratioToPgbench']:.2f}" if row["ratioToPgbench"] else "-"
    script = row["paymentScript"]
    script_ratio = f"{row['ratioToPaymentScript']:.2f}" if row["ratioToPaymentScript"] else "-"
    print(f"{row['clients']:>7}  {pg['paymentsPerSecond']:>9.1f}  {pg['latencyMilliseconds']['median']:>7.1f}  "
          f"{pg['latencyMilliseconds']['p99']:>7.1f}  {script['tps'] or 0:>10.1f}  {script_ratio:>6}  "
          f"{bench['tps'] or 0:>9.1f}  {ratio:>6}  "
          f"{lite['paymentsPerSecond']:>12.1f}  {lite['latencyMilliseconds']['median']:>7.1f}")
print()
print("server CPU per payment against its cryptography alone (ms; budget: at most 2.5x)")
print(f"{'clients':>7}  {'PG CPU':>7}  {'crypto':>7}  {'ratio':>6}  {'SQLite CPU':>10}  {'crypto':>7}  {'ratio':>6}")
def ms(value, width, decimals=3):
    return f"{value:>{width}.{decimals}f}" if value is not None else f"{'-':>{width}}"
for row in rows:
    pg, lite = row["horizonPostgres"], row["horizonSQLite"]
    print(f"{row['clients']:>7}  {ms(pg['serverCPUMillisecondsPerPayment'], 7)}  "
          f"{ms(pg['serverCryptoMillisecondsPerPayment'], 7)}  {ms(pg['ratioServerCPUToCrypto'], 6, 2)}  "
          f"{ms(lite['serverCPUMillisecondsPerPayment'], 10)}  {ms(lite['serverCryptoMillisecondsPerPayment'], 7)}  "
          f"{ms(lite['ratioServerCPUToCrypto'], 6, 2)}")
print()
for line in result["budget"]:
    met = "met" if line["met"] else ("not met" if line["met"] is not None else "not run")
    measured = f"{line['measured']:.2f}" if line["measured"] is not None else "-"
    print(f"budget: {line['item']}: {measured} (limit {line['limit']}): {met}")
print(f"written to {output}")
PY
