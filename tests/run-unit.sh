#!/bin/sh
# Runs every cmocka unit test binary given; prints one closing summary line.
pass=0; fail=0
for t in "$@"; do
    if "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $t" >&2; fi
done
echo "unit test programs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
