#!/usr/bin/env bash
# Where a `horizon-server`'s CPU goes while it settles payments: a short burst of real payments
# (Tools/scale-out.sh: terminal-signed requests, wallet-signed Confirms, exactly-once checks after)
# against one server on SQLite, and with --postgres on a throw-away PostgreSQL too, recorded with
# `perf record -g` from the first payment to the last. Writes perf's top entries (at least 1% of
# the samples, self time), demangled, and the samples summed by module: Horizon's own code,
# swift-nio, Hummingbird, OpenAPI runtime, postgres-nio, Crypto/BoringSSL, SQLite, Foundation, the
# Swift runtime, libc, the kernel.
#
#   Benchmarks/server-profile.sh                          release build, SQLite
#   Benchmarks/server-profile.sh --postgres               SQLite, then PostgreSQL
#   Benchmarks/server-profile.sh --bin .build/debug --payments 40 --terminals 2   quick look (numbers meaningless)
#
# Writes Benchmarks/results/server-profile-latest.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh

usage() {
    cat <<'EOF'
usage: Benchmarks/server-profile.sh [options]

Runs Tools/scale-out.sh with one server and --profile (perf record -g on the server, from the
first payment to the last), then summarises `perf report --no-children` by module.

  --postgres          profile the server on a throw-away PostgreSQL as well as on SQLite
  --payments N        payments per store (default 2000)
  --terminals N       terminals paying at once (default 16)
  --kernel            sample the kernel too: lowers kernel.perf_event_paranoid to 1 with sudo
                      (by default, at 2, perf samples only user space: system calls, the network
                      stack and file syncs are then missing from the percentages)
  --bin DIR           use horizon-server and horizon-bench already built in DIR
                      (default: a release build, 10-20 minutes the first time)
  --output FILE       the summary (default Benchmarks/results/server-profile-latest.txt)
  --keep              keep perf's data files (their directory is printed)
  -h, --help          this text
EOF
}

postgres=""
payments=2000
terminals=16
kernel=""
bin=""
output="Benchmarks/results/server-profile-latest.txt"
keep=""
number() { case "$2" in '' | *[!0-9]*) die "$1 needs a whole number (got '$2'); see --help" ;; esac; }
while [ $# -gt 0 ]; do
    case "$1" in
    --postgres) postgres=1; shift ;;
    --payments) number "$1" "${2:-}"; payments=$2; shift 2 ;;
    --terminals) number "$1" "${2:-}"; terminals=$2; shift 2 ;;
    --kernel) kernel=1; shift ;;
    --bin) [ -d "${2:-}" ] || die "--bin needs a directory with horizon-server and horizon-bench"; bin=$2; shift 2 ;;
    --output) [ -n "${2:-}" ] || die "--output needs a file"; output=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown option $1" ;;
    esac
done
[ "$payments" -ge 1 ] || die "--payments must be at least 1"
[ "$terminals" -ge 1 ] || die "--terminals must be at least 1"

perf=$(command -v perf || true)
[ -n "$perf" ] || die "perf is not installed: sudo apt-get install linux-perf"
# perf_event_paranoid: 2 lets a user profile their own processes in user space, 1 the kernel
# too; above 2 (some distributions' default) nothing at all.
paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo 2)
wanted=2
[ -z "$kernel" ] || wanted=1
if [ "$paranoid" -gt "$wanted" ]; then
    echo "server-profile.sh: kernel.perf_event_paranoid is $paranoid; perf needs $wanted to profile" \
        "$([ -n "$kernel" ] && echo "the server and the kernel" || echo "the server's user space")." >&2
    echo "server-profile.sh: setting it with: sudo sysctl -w kernel.perf_event_paranoid=$wanted (until the next boot)" >&2
    sudo sysctl -w "kernel.perf_event_paranoid=$wanted" >/dev/null ||
        die "could not set kernel.perf_event_paranoid; run: sudo sysctl -w kernel.perf_event_paranoid=$wanted"
fi
"$perf" record -q -o /dev/null -- true >/dev/null 2>&1 ||
    die "perf record cannot run here (a container without perf events?): try '$perf record -- true' for the reason"

[ -n "$bin" ] || build_server_and_bench release

work=$(mktemp -d "${TMPDIR:-/tmp}/horizon-profile.XXXXXX")
cleanup() { if [ -n "$keep" ]; then echo "perf data kept in $work" >&2; else rm -rf "$work"; fi; }
trap cleanup EXIT

stores=(sqlite)
[ -z "$postgres" ] || stores+=(postgres)
for store in "${stores[@]}"; do
    step "$store: $payments payments from $terminals terminals, one server under perf record -g"
    database=()
    [ "$store" = sqlite ] && database=(--database sqlite)
    # Without --database, scale-out.sh starts (and removes) a throw-away PostgreSQL.
    Tools/scale-out.sh --bin "$bin" "${database[@]}" --servers 1 --terminals "$terminals" --payments "$payments" \
        --profile "$work/$store.data" --output "$work/$store.json" -- \
        --copies 1 --late-retries 0 --timeout-every 0 >"$work/$store.log" 2>&1 ||
        { tail -30 "$work/$store.log" >&2; die "scale-out on $store failed (log above)"; }
    "$perf" report -i "$work/$store.data" --no-children --percent-limit 0 --stdio --sort dso,sym -g none \
        >"$work/$store.report" 2>"$work/$store.report.log" ||
        { cat "$work/$store.report.log" >&2; die "perf report failed on $store"; }
    grep -q '%' "$work/$store.report" ||
        die "perf took no samples of the server on $store ($(tail -n 2 "$work/$store.report.log")); try --keep and perf report -i"
    "$perf" report -i "$work/$store.data" --children --percent-limit 2 --stdio --sort sym -g none \
        >"$work/$store.inclusive" 2>>"$work/$store.report.log" ||
        { cat "$work/$store.report.log" >&2; die "perf report --children failed on $store"; }
done

swift_demangle=$(command -v swift-demangle || true)
[ -n "$swift_demangle" ] || swift_demangle="$(dirname "$(command -v swift)")/swift-demangle"
python3 - "$work" "$output" "$swift_demangle" "$bin" "${stores[@]}" <<'PY'
import datetime, json, os, re, subprocess, sys
work, output, demangler, bin_dir, *stores = sys.argv[1:]

# A Swift module's name, or a C symbol's prefix, to the package it comes from (first match wins).
MODULE_GROUPS = [
    (r"Horizon", "Horizon (this project)"),
    (r"_?NIO|CNIO|c_nio_|llhttp", "swift-nio"),
    (r"Hummingbird|OpenAPIHummingbird", "Hummingbird"),
    (r"OpenAPIRuntime|HTTPTypes", "OpenAPI runtime and HTTP types"),
    (r"PostgresNIO|_ConnectionPoolModule", "postgres-nio"),
    (r"Crypto|_Crypto|CCryptoBoringSSL|_*(ecp_nistz256|ecp_|p256_|beeu_|bn_|sha256_block|sha512_block|aes_hw|aesni_|gcm_)",
     "Crypto/BoringSSL"),
    (r"sqlite3", "SQLite"),
    (r"Logging|Metrics|CoreMetrics|Tracing|Instrumentation|ServiceContext|Prometheus", "logging, metrics, tracing"),
    (r"Foundation", "Foundation"),
    (r"(Swift|_Concurrency|Synchronization|_StringProcessing|Dispatch)$|_*swift", "Swift runtime and standard library"),
    (r"Atomics|DequeModule|OrderedCollections|_RopeModule|InternalCollectionsUtilities|AsyncAlgorithms|ServiceLifecycle"
     r"|UnixSignals|Mustache", "other packages (collections, atomics, lifecycle…)"),
]
# Shared libraries, by file name.
LIBRARY_GROUPS = [
    (r"^libFoundation|^lib_FoundationICU", "Foundation"),
    (r"^libswift|^libdispatch|^libBlocksRuntime", "Swift runtime and standard library"),
    (r"^libsqlite3", "SQLite"),
    (r"^libcrypto|^libssl", "Crypto/BoringSSL"),
    (r"^libc\.|^libm\.|^ld-linux|^libpthread|^libstdc\+\+|^libgcc|^libz\.", "libc"),
    (r"kernel", "kernel"),
]

def module_of(full):
    """The module a demangled symbol's code belongs to (a C symbol is its own name)."""
    extension = re.search(r"\(extension in (\w+)\):", full)
    if extension:
        return extension.group(1)
    if full.startswith("protocol witness"):
        conformance = re.search(r" in (\w+)$", full)
        if conformance:
            return conformance.group(1)
    # "generic specialization <…> of X": X is the code, the parameters are not.
    while True:
        match = re.match(r"^[\w ]*specialization <", full)
        if not match:
            break
        depth, index = 1, match.end()
        while index < len(full) and depth:
            depth += {"<": 1, ">": -1}.get(full[index], 0)
            index += 1
        full = full[index:].removeprefix(" of ")
    qualified = re.search(r"\b([A-Za-z_]\w*)\.[A-Za-z_(]", full)
    return qualified.group(1) if qualified else full

def group_of(dso, module):
    if os.path.basename(dso).startswith("horizon-server") or dso == "[unknown]":
        for pattern, group in MODULE_GROUPS:
            if re.match(pattern, module):
                return group
        return "other (horizon-server)" if dso != "[unknown]" else "unknown"
    for pattern, group in LIBRARY_GROUPS:
        if re.search(pattern, os.path.basename(dso)):
            return group
    return f"other ({dso})"

def report(path):
    """The event, and (percent, dso, symbol) for each line of `perf report --sort dso,sym -g none --stdio`."""
    event, found = "", []
    for line in open(path):
        header = re.match(r"# Samples: (\S+)\s+of event '([^']*)'", line)
        if header:
            event = f"{header.group(1)} samples of {header.group(2)}"
        match = re.match(r"\s+([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*\S)", line)
        if match:
            found.append((float(match.group(1)), match.group(2), match.group(4)))
    return event, found

def inclusive(path):
    """(with callees, self, symbol) for each line of `perf report --children --sort sym -g none --stdio`."""
    found = []
    for line in open(path):
        match = re.match(r"\s+([\d.]+)%\s+([\d.]+)%\s+\[(.)\]\s+(.*\S)", line)
        if match:
            found.append((float(match.group(1)), float(match.group(2)), match.group(4)))
    return found

def demangled(symbols, *options):
    if not symbols or not os.access(demangler, os.X_OK):
        return {s: s for s in symbols}
    text = subprocess.run([demangler, "--compact", *options], input="\n".join(symbols), capture_output=True,
                          text=True).stdout.splitlines()
    return dict(zip(symbols, text)) if len(text) == len(symbols) else {s: s for s in symbols}

out = [
    f"horizon-server profile, {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
    f"binaries: {bin_dir}; perf record -g (frame pointers) on the one server process, from the first payment to the last",
    "percentages: self time (perf report --no-children) of the samples perf took; modules from the demangled symbols",
]
for store in stores:
    result = json.load(open(f"{work}/{store}.json"))
    cpu = result.get("serverCPU") or {}
    event, found = report(f"{work}/{store}.report")
    callers = inclusive(f"{work}/{store}.inclusive")
    symbols = sorted({symbol for _, _, symbol in found} | {symbol for _, _, symbol in callers})
    full, simple = demangled(symbols), demangled(symbols, "--simplified")
    groups = {}
    for percent, dso, symbol in found:
        group = group_of(dso, module_of(full[symbol]))
        groups[group] = groups.get(group, 0) + percent
    out += ["", f"== {'SQLite' if store == 'sqlite' else 'PostgreSQL'}: {result['payments']} payments, "
                f"{result['paymentsPerSecond']:.0f}/s, {result['terminals']} terminals"
                + (f"; server CPU {cpu['millisecondsPerPayment']:.3f} ms per payment" if cpu else "")]
    out.append(f"{event}" + ("; user space only (kernel.perf_event_paranoid: --kernel samples the kernel too)"
                             if event.endswith(":u") else ""))
    out += ["", "By module (self time, all samples)"]
    for group, percent in sorted(groups.items(), key=lambda item: -item[1]):
        out.append(f"  {percent:6.2f}%  {group}")
    out += ["", "Top entries (at least 1% self time)"]
    for percent, dso, symbol in found:
        if percent < 1:
            break
        group = group_of(dso, module_of(full[symbol]))
        out.append(f"  {percent:6.2f}%  [{group}]  {simple[symbol][:160]}  ({os.path.basename(dso)})")
    # Asynchronous Swift code runs as jobs: a function's callees are counted with it only up to
    # its next suspension, so these shares are lower bounds.
    out += ["", "Horizon's own functions with their callees (at least 2%; up to each suspension point)"]
    for total, self_time, symbol in [entry for entry in callers
                                     if group_of("horizon-server", module_of(full[entry[2]])).startswith("Horizon")][:20]:
        out.append(f"  {total:6.2f}%  (self {self_time:5.2f}%)  {simple[symbol][:160]}")
os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
open(output, "w").write("\n".join(out) + "\n")
print("\n".join(out))
print(f"\nwritten to {output}")
PY
