#!/bin/sh
# tests/gpu/microbench.sh - the H100 microbenchmarks behind tests/sim/gpus/h100.tbl (tests/gpu/microbench.c),
# then the timing model's validation: the sm90a kernel/shape pairs of tests/sim/timing_cases_h100.txt timed
# with CUDA events (build/sim/timecase on the GPU) beside the simulator's prediction with the measured table
# (the same binary on the simulated device, FA4SIM_TIMING=$OUT/h100-measured.tbl, cases in parallel on the
# host's cores). One call on an H100 machine; no internet. Writes under $OUT (default build/gpu-out):
#   microbench.txt         one line per measured value
#   h100-measured.tbl      tests/sim/gpus/h100.tbl with the measured values in place (source `measured`; tma_lat
#                          and mbar_wake then `derived` by tests/sim/mb_replay.py --fix)
#   timing-validation.txt  per pair: measured us, predicted us, error; then the median |error| and the worst
# --only-microbench: stop after the table (the raw measurements: no replay).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/gpu-out}
mkdir -p build "$OUT" && OUT=$(cd "$OUT" && pwd)  # absolute: the simulator runs below name the table by it
CUDA=${CUDA_HOME:-/usr/local/cuda}
ONLY=0
[ "${1:-}" = "--only-microbench" ] && ONLY=1
gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I"$CUDA/include" tests/gpu/microbench.c \
    -L"$CUDA/lib64" -L"$CUDA/lib64/stubs" -lcuda -o build/microbench || exit 1
timeout 60 build/microbench tests/sim/gpus/h100.tbl "$OUT/h100-measured.tbl" | tee "$OUT/microbench.txt" || exit 1
[ "$ONLY" = 1 ] && exit 0
make -j"$(nproc)" build/fa4gen build/sim/libcuda.so.1 build/sim/timecase > "$OUT/timing-build.log" 2>&1 || { tail -20 "$OUT/timing-build.log"; exit 1; }
# the latencies measured with a loop around them (TMA load, mbarrier round trip) as the model charges them: the
# model replays those benchmarks' PTX and each value becomes the one that makes it read the measurement
python3 tests/sim/mb_replay.py --fix "$OUT/h100-measured.tbl" | tee -a "$OUT/microbench.txt" || exit 1
# what the model reads in each replayed benchmark with the final table, the gather rate and the soft-cap probe
# included (its GPU clocks: the 'probe softcap' line above)
python3 tests/sim/mb_replay.py "$OUT/h100-measured.tbl" | sed 's/^/replay /' | tee -a "$OUT/microbench.txt" || exit 1
cases=tests/sim/timing_cases_h100.txt
work=$(mktemp -d)
# predictions: one simulator process per case, all cores; 8 sampled CTAs a launch (a persistent grid's CTAs each walk
# their own tiles: with 2, B4 H16 S512 d64 causal read -23.6% in run 51, with 8 -9.3%)
grep -v '^\s*#' "$cases" | grep -v '^\s*$' > "$work/cases"
i=0
while IFS= read -r line; do
    i=$((i + 1))
    echo "$line" > "$work/c$i"
    ( d=$(mktemp -d); FA4GEN_COMPILER=driver-ptx FA4GEN_CACHE_DIR=$d LD_LIBRARY_PATH="$PWD/build/sim" FA4SIM_CC=90 \
        FA4SIM_TIMING="$OUT/h100-measured.tbl" FA4SIM_TIMING_SAMPLES=8 timeout 400 build/sim/timecase --cases "$work/c$i" > "$work/p$i" 2>"$work/e$i"; rm -rf "$d" ) &
    if [ $((i % $(nproc))) = 0 ]; then wait; fi
done < "$work/cases"
# measurements on the GPU meanwhile would share the CPU: wait for the predictions first
wait
FA4GEN_CACHE_DIR=$(mktemp -d) timeout 90 build/sim/timecase --cases "$cases" > "$work/time" 2>&1
cat "$work"/p* | grep '^PRED' > "$work/pred"
cat "$work"/e* | grep '^fa4sim-timing' > "$OUT/timing-predictions-detail.txt"
awk 'FILENAME == ARGV[1] { if ($1 == "PRED") { k = $0; sub(/^PRED /, "", k); sub(/ us=[^ ]*$/, "", k); p[k] = $NF; sub(/us=/, "", p[k]) } next }
     $1 == "TIME" { k = $0; sub(/^TIME /, "", k); sub(/ us=[^ ]*$/, "", k); t = $NF; sub(/us=/, "", t)
                    if (k in p) { e = (p[k] - t) / t; printf "%-70s measured_us=%9.2f predicted_us=%9.2f err=%+6.1f%%\n", k, t, p[k], 100 * e
                                  a[n++] = e < 0 ? -e : e } else printf "%-70s measured_us=%9.2f predicted_us=NONE\n", k, t }
     $1 == "FAIL" { print }
     END { if (!n) { print "timing validation: no pairs"; exit 1 }
           for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
           med = n % 2 ? a[int(n / 2)] : (a[n / 2 - 1] + a[n / 2]) / 2
           printf "timing validation (modelled vs run on this GPU): %d pairs, median |err| %.1f%%, worst %.1f%% (goal: <= 10%%, none > 20%%)\n", n, 100 * med, 100 * a[n - 1] }' \
    "$work/pred" "$work/time" | tee "$OUT/timing-validation.txt"
rm -rf "$work"
