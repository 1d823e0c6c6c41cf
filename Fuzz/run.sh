#!/usr/bin/env bash
# Builds the libFuzzer targets (with AddressSanitizer) and runs each for LOGINKIT_FUZZ_SECONDS
# (default 120) on a copy of its committed corpus. Prints one line per target:
#   <target> <executions> <findings> <exit status>
# A finding (crash, sanitizer report, broken invariant) is saved under Fuzz/Findings/<target>/ (not
# committed): reproduce it with `<binary> <file>`, fix it, then commit the file into
# Fuzz/Corpus/<target>/ so that `make test` replays it for ever (FuzzCorpusTests).
set -uo pipefail
cd "$(dirname "$0")"
seconds=${LOGINKIT_FUZZ_SECONDS:-120}
flags=(-c debug --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library)
# SwiftPM keeps the build plan of the path dependency (LoginKit, "..") across runs and can miss
# source files added to it since ("cannot find … in scope"): drop the plan, keep the objects.
rm -f .build-fuzz/debug.yaml .build-fuzz/debug/description.json
if ! swift build "${flags[@]}" >build.log 2>&1; then
    tail -n 30 build.log >&2
    echo "fuzz: build failed" >&2
    exit 2
fi
bin=$(swift build "${flags[@]}" --show-bin-path)
status=0
for source in Sources/fuzz-*/; do
    target=$(basename "$source")
    work=$(mktemp -d)
    cp Corpus/"$target"/* "$work"/
    mkdir -p Findings/"$target"
    log=$(mktemp)
    "$bin/$target" "$work" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix=Findings/"$target"/ >"$log" 2>&1
    code=$?
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -n 1)
    findings=$(find Findings/"$target" -type f | wc -l)
    if [ "$code" -ne 0 ] || [ "$findings" -ne 0 ]; then
        status=1
        grep -E 'ERROR|SUMMARY|==[0-9]+==|Fatal|abort' "$log" | head -n 10 >&2
    fi
    echo "$target ${runs:-0} $findings $code"
    rm -rf "$work" "$log"
done
exit "$status"
