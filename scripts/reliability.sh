#!/usr/bin/env bash
# make reliability: long, repeated runs that do not belong in make test.
# Today: the view-model and mock tests 200 times in a row, and the store crash test with 1000 kills.
# Ends with the line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${LOGINKIT_VIEWMODEL_RUNS:-200}
kills=${LOGINKIT_CRASH_KILLS_RELIABILITY:-1000}
passed=0
failed=0

echo "== view-model and mock tests, $runs runs"
vm_failed=0
for i in $(seq 1 "$runs"); do
    if ! swift test --skip-build --filter 'LoginViewModelTests|MockMisuseTests' >/tmp/loginkit-vm-run.log 2>&1; then
        vm_failed=$((vm_failed + 1))
        echo "run $i failed:"; grep -E '✘' /tmp/loginkit-vm-run.log | head -5
    fi
done
echo "view-model/mock runs: $runs, failed: $vm_failed"
if [ "$vm_failed" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi

echo "== store crash safety, $kills SIGKILLs"
if LOGINKIT_CRASH_KILLS=$kills swift test --skip-build --filter aSIGKILLedWriterNeverLeavesATornFile >/tmp/loginkit-crash.log 2>&1; then
    echo "crash test: $kills kills, 0 torn or lost files"
    passed=$((passed + 1))
else
    grep -E '✘' /tmp/loginkit-crash.log | head -10
    failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
