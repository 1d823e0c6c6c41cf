#!/usr/bin/env bash
# make reliability: long, repeated runs that do not belong in make test (loopback only, bounded).
# Prints a table, writes it with the date and the machine to .build/reliability.md (untracked, so
# the working tree stays clean; LOGINKIT_RELIABILITY_REPORT=docs/reliability.md regenerates the
# committed report on request), and ends with the line "N passed, N failed". Settings (environment):
#   LOGINKIT_VIEWMODEL_RUNS (200), LOGINKIT_CRASH_KILLS_RELIABILITY (1000),
#   LOGINKIT_TOKEN_PROCESSES (16), LOGINKIT_TOKEN_ROUNDS (50), LOGINKIT_FUZZ_SECONDS (120 per target),
#   LOGINKIT_SANITIZERS ("thread address"; empty to skip), LOGINKIT_SANITIZER_WIDTH (6 tests at once
#   under a sanitizer)
set -uo pipefail
# Every trait on, as `make` builds (Package.swift; docs/architecture.md, "Weight").
SWIFT_TRAITS=${SWIFT_TRAITS:---enable-all-traits}
cd "$(dirname "$0")/.."
runs=${LOGINKIT_VIEWMODEL_RUNS:-200}
kills=${LOGINKIT_CRASH_KILLS_RELIABILITY:-1000}
fuzz_seconds=${LOGINKIT_FUZZ_SECONDS:-120}
sanitizers=${LOGINKIT_SANITIZERS-thread address}
width=${LOGINKIT_SANITIZER_WIDTH:-6}
processes=${LOGINKIT_TOKEN_PROCESSES:-16}
rounds=${LOGINKIT_TOKEN_ROUNDS:-50}
report=${LOGINKIT_RELIABILITY_REPORT:-.build/reliability.md}
mkdir -p "$(dirname "$report")"
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
passed=0
failed=0
rows=()

# record NAME SETTING RESULT STATUS(0 = pass)
record() {
    local verdict=pass
    if [ "$4" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); verdict=FAIL; fi
    rows+=("| $1 | $2 | $3 | $verdict |")
    echo "   → $3 ($verdict)"
}

# suite NAME SETTING FILTER [ENV…]: one swift test run of FILTER; its test count and time.
suite() {
    local name=$1 setting=$2 filter=$3
    shift 3
    echo "== $name"
    local started=$SECONDS status=0
    env "$@" timeout 1500 swift test $SWIFT_TRAITS --skip-build --filter "$filter" >"$log/run.log" 2>&1 || status=$?
    local count
    count=$(grep -oE 'Test run with [0-9]+ tests?' "$log/run.log" | grep -oE '[0-9]+' | head -n 1)
    if [ "$status" -ne 0 ]; then grep -E '✘' "$log/run.log" | head -n 8; fi
    record "$name" "$setting" "${count:-0} tests, $((SECONDS - started)) s, exit $status" "$status"
}

echo "== view-model and mock tests, $runs runs in a row (one process, Swift Testing's --repetitions)"
started=$SECONDS
bundle="$(swift build $SWIFT_TRAITS --show-bin-path)/LoginKitPackageTests.xctest"
"$bundle" --testing-library swift-testing --filter 'LoginViewModelTests|MockMisuseTests' --repetitions "$runs" >"$log/vm.log" 2>&1
vm_status=$?
vm_failed=$(grep -cE '✘ Test .*(failed|recorded an issue)' "$log/vm.log")
iterations=$(grep -cE 'Iteration [0-9]+ ended' "$log/vm.log")
if [ "$vm_status" -ne 0 ] || [ "$iterations" -ne "$runs" ]; then grep -E '✘' "$log/vm.log" | head -n 5; fi
record "view-model and mocks, repeated" "$runs runs" "$iterations runs, $vm_failed failures, $((SECONDS - started)) s, exit $vm_status" \
    "$(( vm_status != 0 || iterations != runs ))"

suite "crash safety: SIGKILL a process saving in a loop" "$kills kills" aSIGKILLedWriterNeverLeavesATornFile LOGINKIT_CRASH_KILLS="$kills"
suite "multi-process: \`loginkit token\` rounds, token expiring between rounds" "$processes processes × $rounds rounds" \
    concurrentTokenProcessesRefreshOncePerRound LOGINKIT_TOKEN_PROCESSES="$processes" LOGINKIT_TOKEN_ROUNDS="$rounds"
suite "client credentials: 200 callers of a second process, each round under a hang watchdog" "${LOGINKIT_HANG_ROUNDS:-2000} rounds" \
    ClientCredentialsHangStressTests LOGINKIT_HANG_ROUNDS="${LOGINKIT_HANG_ROUNDS:-2000}"
suite "fault matrix: each fault a typed error, store byte-identical, < 20 s" "16 faults × login, refresh" \
    FaultMatrixTests LOGINKIT_FAULT_REPORT="$log/faults.md"
suite "retries, Retry-After, store failures" "AuthService" 'serverFailuresAreTyped|AuthServiceRefreshTests|AuthServiceStoreFailureTests'
suite "TLS against openssl s_server (certificates made at test time)" "unknown CA, CA file, host, expiry, pins" TLSTests
suite "secrets: logs at trace, errors, CLI output; files 0600, directories 0700" "login, refresh, failures, logout" \
    'SecretLoggingTests|secretsNeverAppearInAnyOutput|aWrongPasswordIsRejectedCredentials|confidentialClientsAuthenticateBothWays|createsPrivateDirectoriesAndFiles|refusesADirectoryOthersCanWrite|sealedRoundTripHidesTheTokens'
suite "fuzz corpora replayed (seeds and past findings)" "Fuzz/Corpus" FuzzCorpusTests

echo "== libFuzzer, $fuzz_seconds s per target"
started=$SECONDS
LOGINKIT_FUZZ_SECONDS=$fuzz_seconds Fuzz/run.sh >"$log/fuzz.txt" 2>"$log/fuzz.err"
fuzz_status=$?
if [ ! -s "$log/fuzz.txt" ]; then
    tail -n 20 "$log/fuzz.err"
    record "libFuzzer" "build" "the fuzzers did not build" 1
fi
while read -r target executions findings code; do
    status=0
    if [ "$findings" -ne 0 ] || [ "$code" -ne 0 ]; then status=1; fi
    record "libFuzzer: $target" "$fuzz_seconds s, ASan" "$executions executions, $findings findings" "$status"
done <"$log/fuzz.txt"
echo "   fuzzing took $((SECONDS - started)) s (exit $fuzz_status)"

for sanitizer in $sanitizers; do
    echo "== the test suite under --sanitize=$sanitizer"
    started=$SECONDS
    status=0
    swift build $SWIFT_TRAITS --build-tests --sanitize="$sanitizer" --scratch-path ".build-$sanitizer" >"$log/$sanitizer-build.log" 2>&1 || status=$?
    if [ "$status" -eq 0 ]; then
        # The sanitizers slow everything 2-15x. Swift Testing starts every test at once: with 350
        # tests sharing 2 cores under a sanitizer, each test took as long as the whole run (52-68 s
        # for tests that need 0.1-0.9 s alone) and tests failed on their one-minute limits and on
        # the 5 s client timeout of the fault matrix (the in-process dev server's handlers wait for
        # the same cooperative pool). So at most $width tests run at once (Swift Testing's
        # SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH), and the PostgreSQL suites (whose
        # operation timeouts are 10 s and 5 s) run on their own, after the rest.
        sanitized() {
            SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$width LSAN_OPTIONS="suppressions=$PWD/scripts/lsan-suppressions.txt" \
                LOGINKIT_REQUIRE_MOTO=1 LOGINKIT_REQUIRE_POSTGRES=1 timeout 2400 scripts/with-postgres.sh scripts/with-moto.sh \
                swift test $SWIFT_TRAITS --skip-build --sanitize="$sanitizer" --scratch-path ".build-$sanitizer" "$@"
        }
        sanitized --skip 'Postgres(TokenStore|Outage|StoreClock|Changes|TLS)Tests|FleetStoreCLITests' >"$log/$sanitizer.log" 2>&1 || status=$?
        sanitized --filter 'Postgres(TokenStore|Outage|StoreClock|Changes|TLS)Tests|FleetStoreCLITests' >>"$log/$sanitizer.log" 2>&1 || status=$?
    else
        tail -n 20 "$log/$sanitizer-build.log"
    fi
    reports=$(grep -cE "WARNING: ThreadSanitizer|ERROR: AddressSanitizer|ERROR: LeakSanitizer" "$log/$sanitizer.log" 2>/dev/null)
    count=$(grep -oE 'Test run with [0-9]+ tests?' "$log/$sanitizer.log" 2>/dev/null | grep -oE '[0-9]+' | awk '{ sum += $1 } END { print sum }')
    if [ "${reports:-0}" -ne 0 ]; then
        status=1
        grep -A 12 -E "WARNING: ThreadSanitizer|ERROR: AddressSanitizer" "$log/$sanitizer.log" | head -n 40
    fi
    if [ "$status" -ne 0 ]; then
        # Keep the evidence: the temporary log directory goes when the script ends.
        mkdir -p .build/reliability-logs
        cp "$log/$sanitizer.log" ".build/reliability-logs/$sanitizer.log" 2>/dev/null || true
        grep -E "✘" "$log/$sanitizer.log" 2>/dev/null | head -n 10
        echo "   (log kept in .build/reliability-logs/$sanitizer.log)"
    fi
    record "sanitizer: $sanitizer" "whole test suite" "${count:-0} tests, ${reports:-0} reports, $((SECONDS - started)) s, exit $status" "$status"
done

table=$(
    echo "| check | setting | result | verdict |"
    echo "| --- | --- | --- | --- |"
    printf '%s\n' "${rows[@]}"
)
echo
echo "$table"

machine="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($(nproc) cores), $(uname -sr), $(swift --version 2>/dev/null | head -n 1)"
{
    echo "# Reliability"
    echo
    echo "\`make reliability\` (scripts/reliability.sh) runs the long, repeated checks that do not belong"
    echo "in \`make test\`. Loopback only; bounded (each run under \`timeout\`)."
    echo
    echo "What each check is and how to reproduce a failure: [reliability-guide.md](reliability-guide.md)."
    echo
    echo "## Latest run"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $machine."
    echo
    echo "$table"
    echo
    echo "$passed passed, $failed failed"
    if [ -s "$log/faults.md" ]; then
        echo
        echo "### The fault matrix"
        echo
        echo "Each fault injected by the dev server into the token endpoint, for a password login and for"
        echo "a refresh of an expired token (no retries, so that each fault is seen once; the retry policy"
        echo "has tests of its own). Store: the token file compared byte for byte before and after."
        echo
        echo "| fault | operation | error | store | time | verdict |"
        echo "| --- | --- | --- | --- | ---: | --- |"
        sort "$log/faults.md"
    fi
} >"$report"

echo "report: $report"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
