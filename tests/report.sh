#!/bin/sh
# tests/report.sh LABEL PASSED FAILED - a suite's closing line, 'LABEL: N passed, N failed'.
# Every suite of make test ends with it: printed, and appended to $FA4_TEST_SUMMARY when that is set
# (make test sets it; tests/run-suites.sh sums the file into the one last line). Exit 1 when FAILED > 0.
line="$1: $2 passed, $3 failed"
echo "$line"
if [ -n "${FA4_TEST_SUMMARY:-}" ]; then echo "$line" >> "$FA4_TEST_SUMMARY"; fi
[ "$3" -eq 0 ]
