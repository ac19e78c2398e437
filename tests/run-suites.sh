#!/bin/sh
# tests/run-suites.sh STEP... - what `make test` and `make test-quick` run: `$MAKE STEP` for each step in
# turn (after a failing one too), every suite's closing line collected (tests/report.sh appends it to
# $FA4_TEST_SUMMARY), then each suite's line, each step's time, and last one line 'N passed, N failed'
# summing every suite, with each step's wall and CPU time (user + system of everything it ran: on a
# shared machine the CPU time says what a quiet one would take). A step that exits non-zero while no suite of it reported a failure (a build error,
# a script that stopped early) counts as one failure. Exit 1 on any failure.
#   FA4_TEST_OUT   where the summary files go (default build): test-summary.txt, test-times.txt
# Each step's make gets -j<CPUs> (its builds), unless make test was given -j itself.
set -u
MAKE=${MAKE:-make}
out=${FA4_TEST_OUT:-build}
mkdir -p "$out" || exit 1
FA4_TEST_SUMMARY=$(cd "$out" && pwd)/test-summary.txt
export FA4_TEST_SUMMARY
times=$out/test-times.txt
: > "$FA4_TEST_SUMMARY"; : > "$times"
# sum of the passed (field 1) or failed (field 2) counts of the summary's lines
total() { sed -n 's/.*: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$FA4_TEST_SUMMARY" | awk -v f="$1" '{ s += $f } END { print s + 0 }'; }
# CPU seconds (user + system) of this shell's finished children so far: `times` runs in this shell (in a
# $(...) subshell it would count the subshell's children), its second line read back from a file
cpuf=$out/test-cpu.txt
cpu() { awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); n += p[1] * 60 + p[2] } printf "%d", n }' "$cpuf"; }
# builds inside the steps use every core, unless make test itself was given -j
case " ${MAKEFLAGS:-}" in *j*) jobs= ;; *) jobs=-j$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2) ;; esac
t_all=$(date +%s); times > "$cpuf"; c_all=$(cpu)
for step in "$@"; do
    before=$(total 2)
    t0=$(date +%s); times > "$cpuf"; c0=$(cpu)
    $MAKE --no-print-directory $jobs "$step"; rc=$?
    times > "$cpuf"
    dt=$(( $(date +%s) - t0 )); dc=$(( $(cpu) - c0 ))
    if [ "$rc" -ne 0 ] && [ "$(total 2)" = "$before" ]; then
        sh "$(dirname "$0")/report.sh" "make $step (exit $rc before its suites reported)" 0 1 > /dev/null
    fi
    printf '%s %ss cpu=%ss rc=%s\n' "$step" "$dt" "$dc" "$rc" >> "$times"
done
times > "$cpuf"
dt_all=$(( $(date +%s) - t_all )); dc_all=$(( $(cpu) - c_all ))
echo
echo "==== suites"
sed 's/^/  /' "$FA4_TEST_SUMMARY"
echo "==== steps (wall, cpu): $(awk '{ sub("cpu=", "", $3); printf "%s%s %s %s", (NR > 1 ? ", " : ""), $1, $2, $3 }' "$times")"
echo "==== all: ${dt_all}s wall ($(( dt_all / 60 )) min $(( dt_all % 60 )) s), ${dc_all}s cpu; load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
pass=$(total 1); fail=$(total 2)
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
