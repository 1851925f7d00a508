#!/usr/bin/env bash
# Fuzzes one wire decoder with libFuzzer. Builds horizon-fuzz for libFuzzer
# (release, AddressSanitizer, -DFUZZING) into its own scratch path, .build-fuzz, so it never
# disturbs the normal build, then runs it on the committed corpus.
#
#   Tools/fuzz.sh TARGET [SECONDS]     fuzz TARGET (frame|message|advertisement|handshake), default 600 s;
#                                      new inputs go to .build-fuzz/corpus/TARGET, crashes to
#                                      .build-fuzz/crashes/TARGET/, the log to .build-fuzz/logs/TARGET.log
#   Tools/fuzz.sh --minimize TARGET    rewrite Tools/horizon-fuzz/corpus/TARGET as the smallest set
#                                      (libFuzzer -merge=1) covering it and .build-fuzz/corpus/TARGET
#   Tools/fuzz.sh --seed TARGET        add seed inputs made from real encodings to the corpus
#
# A crash file replays in a normal build: swift run horizon-fuzz replay TARGET FILE
# (CI replays the whole committed corpus: Tests/HorizonFaultTests/CorpusReplayTests.swift).
# NICE (default 10) sets the priority; extra arguments after SECONDS go to libFuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
source Tools/lib/setup.sh

targets="frame message advertisement handshake"
scratch=.build-fuzz
usage() {
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit "${1:-2}"
}

mode=fuzz
case "${1:-}" in
--minimize) mode=minimize; shift ;;
--seed) mode=seed; shift ;;
-h | --help) usage 0 ;;
"") usage ;;
esac
target="${1:-}"
case " $targets " in
*" $target "*) ;;
*) usage ;;
esac
shift

corpus="Tools/horizon-fuzz/corpus/$target"
work="$scratch/corpus/$target"
# Crashes go to crashes/, not artifacts/: SwiftPM owns <scratch>/artifacts and empties it.
mkdir -p "$corpus" "$work" "$scratch/crashes/$target" "$scratch/logs"

ensure_swift
ensure_debian_packages

if [ "$mode" = seed ]; then
    step "writing seeds for $target (normal debug build)"
    swift build --product horizon-fuzz 2>&1 | filter_build_output
    "$(swift build --show-bin-path)/horizon-fuzz" seed "$target" "$corpus"
    exit 0
fi

step "building horizon-fuzz for libFuzzer (release, AddressSanitizer) into $scratch"
nice -n "${NICE:-10}" swift build -c release --product horizon-fuzz --scratch-path "$scratch" \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING 2>&1 | filter_build_output
binary="$(swift build -c release --scratch-path "$scratch" --show-bin-path)/horizon-fuzz"

# Swift's own crash reporter would hold a crashing input for seconds; libFuzzer reports it instead.
export SWIFT_BACKTRACE=enable=no
export HORIZON_FUZZ_TARGET="$target"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"

# The longest input each target needs: a 31-byte advertisement; an 8 KiB message's fragments.
case "$target" in
advertisement) max_len=64 ;;
*) max_len=9000 ;;
esac

if [ "$mode" = minimize ]; then
    step "minimizing $corpus with the finds in $work (libFuzzer -merge=1)"
    merged="$scratch/merged/$target"
    rm -rf "$merged"
    mkdir -p "$merged"
    nice -n "${NICE:-10}" "$binary" -merge=1 -max_len="$max_len" "$merged" "$corpus" "$work" 2>&1 |
        grep -E '^MERGE-OUTER|^INFO: (Seed|Loaded)' || true
    [ -n "$(ls -A "$merged")" ] || die "the merge produced nothing; $corpus is left as it was"
    rm -f "$corpus"/*
    cp "$merged"/* "$corpus"/
    echo "$corpus: $(find "$corpus" -type f | wc -l) files, $(du -sh "$corpus" | cut -f1)"
    exit 0
fi

seconds="${1:-600}"
shift || true
log="$scratch/logs/$target.log"
step "fuzzing $target for $seconds s (log: $log)"
status=0
nice -n "${NICE:-10}" "$binary" "$work" "$corpus" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$scratch/crashes/$target/" "$@" \
    >"$log" 2>&1 || status=$?
grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::|^INFO: (Seed|Loaded|[0-9]+ files found)' "$log" || true
if [ "$status" -ne 0 ]; then
    grep -E 'ERROR|finding|Fatal error|SUMMARY' "$log" | head -20 >&2 || true
    echo "fuzzing $target found a problem (exit $status); the input is in $scratch/crashes/$target/" >&2
    exit "$status"
fi
echo "no crash; new inputs: $(find "$work" -type f | wc -l) in $work (Tools/fuzz.sh --minimize $target keeps the useful ones)"
