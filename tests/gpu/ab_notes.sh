#!/bin/sh
# tests/gpu/ab_notes.sh - the A/B experiments bench/NOTES.md records (bench/timing_ab_notes.txt) timed again on this
# GPU with today's kernels: build/sim/timecase (CUDA events, the real driver) over every base and variant case, the
# TIME lines into $OUT/ab_notes_time.txt. Then, on any machine:
#   python3 bench/timing_ab.py --list bench/timing_ab_notes.txt --measured ab_notes_time.txt --gpu h200
set -u
cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:-build/gpu-out}
mkdir -p "$OUT"
export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"
make -j16 build/sim/timecase > "$OUT/ab-build.log" 2>&1 || { tail "$OUT/ab-build.log"; exit 1; }
# AB_ROUNDS rounds of the whole list, every other one reversed: a pair's change is the median of its rounds'
python3 bench/timing_ab.py --cases bench/timing_ab_notes.txt "${AB_ROUNDS:-5}" > "$OUT/ab_cases.txt" || exit 1
FA4GEN_CACHE_DIR=$(mktemp -d) timeout 400 build/sim/timecase --cases "$OUT/ab_cases.txt" > "$OUT/ab_notes_time.txt" 2>&1
rc=$?
grep -c '^TIME' "$OUT/ab_notes_time.txt" | sed 's/$/ cases timed/'
grep -v '^TIME' "$OUT/ab_notes_time.txt" | tail -5
exit $rc
