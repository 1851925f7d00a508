#!/bin/bash
# Where the raw BlueZ round trip goes, hop by hop: runs a short
# `horizon-bench --only bluez` in the Tools/bluez-vm VM while btmon records the HCI traffic of
# both controllers and dbus-monitor the system bus, then matches each quiet raw round trip (its
# 20-byte payload carries its index) across both traces and prints the median time of each hop:
#
#   wallet WriteValue call  → hci1 sends the ATT Write Request          (D-Bus + bluetoothd, wallet side)
#   hci1 TX → hci0 RX                                                  (the virtual radio)
#   hci0 RX → bluetoothd calls the terminal's WriteValue               (bluetoothd + D-Bus, terminal side)
#   the call → the terminal's PropertiesChanged (its echo)             (HorizonDBus, the BlueZ layer, the app)
#   PropertiesChanged → hci0 sends the notification                    (D-Bus + bluetoothd, terminal side)
#   hci1 RX → bluetoothd's PropertiesChanged for the wallet            (bluetoothd + D-Bus, wallet side)
#
# dbus-monitor stamps a message when it reads its copy, a little after the recipient could; the
# HCI stamps are the kernel's. Both are CLOCK_REALTIME, so they can be compared. Recording costs
# time too, so the round trips are slower than in bluez-vm.sh; the shares are what this is for.
#
#   Benchmarks/bluez-profile.sh            # ~1-2 min; prints the hops; traces kept in a new /tmp folder
#   OUT=/some/dir Benchmarks/bluez-profile.sh
set -euo pipefail
if [ "${1:-}" = --guest ]; then
    # Inside the VM: record while the benchmark runs.
    out=$2
    shift 2
    btmon -w /tmp/hci.snoop >/dev/null 2>&1 &
    btmon_pid=$!
    dbus-monitor --system "type='method_call',member='WriteValue'" "type='signal',member='PropertiesChanged'" \
        >/tmp/dbus.log 2>&1 &
    monitor_pid=$!
    sleep 2
    status=0
    "$@" || status=$?
    sleep 1
    kill "$btmon_pid" "$monitor_pid" 2>/dev/null || true
    sleep 0.5
    btmon -P -T -C 200 -r /tmp/hci.snoop >"$out/btmon.txt" 2>&1 || true
    cp /tmp/dbus.log "$out/dbus.log"
    exit "$status"
fi

cd "$(dirname "$0")/.."
root=$(pwd)
scratch=()
[ -n "${SCRATCH:-}" ] && scratch=(--scratch-path "$SCRATCH")
swift build -c release "${scratch[@]}" --product horizon-bench >&2
bin=$(swift build -c release "${scratch[@]}" --show-bin-path)
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/horizon-bluez-profile.XXXXXX")}
mkdir -p "$out"
chmod 0777 "$out" # written by root inside the VM
Tools/bluez-vm/run-in-vm.sh --rwdir "$out" -- "$root/Benchmarks/bluez-profile.sh" --guest "$out" \
    "$bin/horizon-bench" --only bluez --quick --bluez-blocks 1 --bluez-payments 1 --bluez-round-trips 20 \
    --output "$out/result.json" >"$out/table.txt"

python3 - "$out" <<'EOF'
import json, re, statistics, sys
from datetime import datetime, timezone

out = sys.argv[1]
QUIET = "5a" * 18  # the raw round trips' filler after their 2-byte index

# HCI: ACL packets with their ATT PDU and value.
header = re.compile(r"^([<>]) ACL Data (TX|RX).*\[(hci\d)\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)")
hci, current = {}, None
for line in open(f"{out}/btmon.txt", errors="replace"):
    match = header.match(line)
    if match:
        stamp = datetime.strptime(match.group(4), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=timezone.utc)
        current = {"dir": match.group(2), "hci": match.group(3), "t": stamp.timestamp(), "op": None}
        continue
    text = line.strip()
    if current is None:
        continue
    if text.startswith("ATT: "):
        current["op"] = text[5:].split(" (")[0]
    elif text.startswith("Data: ") and current["op"]:
        data, op = text[6:], current["op"]
        if op == "Write Request" and len(data) == 40 and data[4:] == QUIET:
            hci.setdefault(data[:4], {}).setdefault(("write", current["hci"], current["dir"]), current["t"])
        elif "Notification" in op and len(data) == 48 and data[12:] == QUIET:
            hci.setdefault(data[8:12], {}).setdefault(("notify", current["hci"], current["dir"]), current["t"])
        current = None

# D-Bus: WriteValue calls and PropertiesChanged signals carrying a raw round trip's bytes.
bus, lines = {}, open(f"{out}/dbus.log", errors="replace").read().split("\n")
i = 0
while i < len(lines):
    line = lines[i]
    i += 1
    if not line.startswith(("method call", "signal")):
        continue
    body = []
    while i < len(lines) and lines[i].startswith(" "):
        body.append(lines[i])
        i += 1
    data = "".join(b.strip().replace(" ", "") for b in body if re.fullmatch(r"\s+([0-9a-f]{2}\s?)+", b))
    stamp = float(re.search(r"time=([\d.]+)", line).group(1))
    if "member=WriteValue" in line and len(data) == 40 and data[4:] == QUIET:
        who = "wallet call" if "destination=org.bluez" in line else "terminal call"
        bus.setdefault(data[:4], {}).setdefault(who, stamp)
    elif "member=PropertiesChanged" in line and len(data) == 48 and data[12:] == QUIET:
        who = "terminal signal" if "/org/horizon/" in line else "wallet signal"
        bus.setdefault(data[8:12], {}).setdefault(who, stamp)

hops = {
    "wallet WriteValue call -> hci1 TX write (D-Bus, bluetoothd)": ("wallet call", ("write", "hci1", "TX")),
    "hci1 TX -> hci0 RX write (virtual radio)": (("write", "hci1", "TX"), ("write", "hci0", "RX")),
    "hci0 RX -> WriteValue call to the terminal (bluetoothd, D-Bus)": (("write", "hci0", "RX"), "terminal call"),
    "the call -> the terminal's PropertiesChanged (HorizonDBus, BlueZ layer, echo)": ("terminal call", "terminal signal"),
    "PropertiesChanged -> hci0 TX notification (D-Bus, bluetoothd)": ("terminal signal", ("notify", "hci0", "TX")),
    "hci0 TX -> hci1 RX notification (virtual radio)": (("notify", "hci0", "TX"), ("notify", "hci1", "RX")),
    "hci1 RX -> PropertiesChanged for the wallet (bluetoothd, D-Bus)": (("notify", "hci1", "RX"), "wallet signal"),
}
values = {name: [] for name in hops}
for index, stamps in hci.items():
    stamps = {**stamps, **bus.get(index, {})}
    for name, (start, end) in hops.items():
        if start in stamps and end in stamps:
            values[name].append((stamps[end] - stamps[start]) * 1000)
result = json.load(open(f"{out}/result.json"))["bluez"]["rawRoundTrip"]
print(f"raw round trips matched in both traces: {min(len(v) for v in values.values())}")
for name, samples in values.items():
    if samples:
        print(f"  {statistics.median(samples):6.2f} ms  {name}")
print(
    "the benchmark's own view of the same series: round trip %.1f ms = write leg %.1f + notification leg %.1f (medians)"
    % tuple(result[k]["median"] for k in ("roundTripMilliseconds", "writeLegMilliseconds", "notificationLegMilliseconds"))
)
print(f"traces: {out}/btmon.txt, {out}/dbus.log; the run: {out}/table.txt")
EOF
