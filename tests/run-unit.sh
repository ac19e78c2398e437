#!/bin/sh
# tests/run-unit.sh PROGRAM... - runs cmocka unit test programs and sums their tests: prints each
# program's output, then 'LABEL: N passed, N failed' (tests/report.sh; LABEL is $UNIT_LABEL, default
# 'unit tests'). A program that exits non-zero without a cmocka failure count (a crash, a setup
# error) counts as one failed test.
label=${UNIT_LABEL:-unit tests}
pass=0; fail=0
for t in "$@"; do
    out=$("$t" 2>&1); rc=$?
    printf '%s\n' "$out"
    p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
    f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
    pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0}))
    if [ "$rc" -ne 0 ]; then
        echo "FAILED: $t (exit $rc)" >&2
        [ "${f:-0}" -gt 0 ] || fail=$((fail + 1))
    fi
done
sh "$(dirname "$0")/report.sh" "$label" "$pass" "$fail"
