#!/bin/sh
# tests/gpu/bwd.sh - the attention backward (issue 29, sm90a) on a Hopper GPU, one command:
#   1. build fa4gen, libfa4rt and build/sim/sim_bwd
#   2. ptxas report and SASS of the d128, d64 and d256 main kernels (registers, spills, HGMMA count, local memory)
#   3. tests/sim/cases_bwd_sm90.txt through build/sim/sim_bwd on the GPU (the simulator's cases, fp64 reference)
#   4. tests/gpu/test_bwd.py: fp32 autograd reference vs fa4 and cuDNN, poisoned outputs, odd shapes
#   5. tests/gpu/test_autograd.py: the torch ops' autograd (vs fp32 and SDPA), torch.compile(fullgraph=True) and
#      CUDA-graph capture of a training step, a tiny LM's loss curve beside SDPA's (AUTOGRAD=0 skips it)
#   6. bench/host_step.py when HOST_STEP=1: the host's time per call of a training step's attention and its pieces
#   7. bench/bench_bwd.py: fa4 vs cuDNN backward TFLOP/s and peak extra memory (BENCH=0 skips it)
# Logs go to $OUT (default build/gpu-out): bwd_summary.txt (every step's last lines), bwd_details.txt, test_bwd.json,
# test_autograd.json, bench_bwd.txt, bench_bwd.json. Exit status 1 when a step failed.
# --only-profile: instead, where the time goes: bench/profile_bwd.py (every kernel of fa4's backward and of cuDNN's,
# per shape and variant: VARIANTS, SHAPES) into profile_bwd.txt, then ncu (clocks left alone) of fa4's main kernel
# for each shape of NCU_SHAPES (';'-separated) into ncu_<n>.txt.
set -u
cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:-build/gpu-out}
mkdir -p "$OUT"
CUDA=${CUDA_HOME:-/usr/local/cuda}
export PATH="$CUDA/bin:$PATH" PYTHONUNBUFFERED=1
export FA4GEN_CACHE_DIR=${FA4GEN_CACHE_DIR:-$(mktemp -d)}
if [ "${1:-}" = "--only-profile" ]; then
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
    make -j16 build/fa4gen build/libfa4rt.so > "$OUT/build.log" 2>&1 || { tail "$OUT/build.log"; exit 1; }
    python3 bench/profile_bwd.py --out "$OUT/profile_bwd.txt" --shapes "${SHAPES:-}" --variants "${VARIANTS:-default}" ||
        exit 1
    n=0
    echo "${NCU_SHAPES:-}" | tr ';' '\n' | while read -r s; do
        [ -n "$s" ] || continue
        n=$((n + 1))
        timeout 240 ncu --clock-control none --kernel-name regex:'fa4_mha_bwd_sm90a' --launch-skip 3 --launch-count 1 \
            --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
            --section WarpStateStats --section Occupancy --section LaunchStats --section SourceCounters \
            python3 bench/profile_bwd.py --shapes "$s" --calls 1 > "$OUT/ncu_$n.txt" 2>&1
        echo "ncu $s: rc=$? -> ncu_$n.txt ($(wc -l < "$OUT/ncu_$n.txt") lines)"
    done
    exit 0
fi
SUM=$OUT/bwd_summary.txt DET=$OUT/bwd_details.txt
: > "$SUM"; : > "$DET"
fail=0
step() { # step NAME CMD...: output into the details file; the last lines into the summary
    name=$1; shift
    t0=$(date +%s)
    "$@" > "$OUT/.step.log" 2>&1
    rc=$?
    { echo "==== $name (rc=$rc, $(( $(date +%s) - t0 ))s)"; cat "$OUT/.step.log"; } >> "$DET"
    { echo "==== $name (rc=$rc, $(( $(date +%s) - t0 ))s)"; tail -${TAIL:-3} "$OUT/.step.log"; } >> "$SUM"
    [ $rc -eq 0 ] || fail=1
    rm -f "$OUT/.step.log"
    return $rc
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader >> "$SUM" 2>&1
step build make -j16 build/fa4gen build/libfa4rt.so build/sim/sim_bwd || { cat "$SUM"; exit 1; }
sass() {
    for dm in 128:none 128:causal 64:causal 256:none; do
        d=${dm%%:*} m=${dm#*:}
        build/fa4gen mha-bwd --target sm90a --dtype bf16 --depth $d --mask $m -o "$OUT/.k.ptx" || return 1
        ptxas -arch=sm_90a -v "$OUT/.k.ptx" -o "$OUT/.k.cubin" 2>&1 | grep -E 'Used|spill|warning|error'
        echo "d$d $m: $(cuobjdump -sass "$OUT/.k.cubin" | grep -c HGMMA) HGMMA, $(cuobjdump -sass "$OUT/.k.cubin" | grep -c -E 'LDL|STL') LDL/STL"
    done
    rm -f "$OUT/.k.ptx" "$OUT/.k.cubin"
}
TAIL=12 step sass sass
TAIL=27 step sim_cases_gpu build/sim/sim_bwd --cases tests/sim/cases_bwd_sm90.txt
TAIL=60 step test_bwd python3 tests/gpu/test_bwd.py --out "$OUT/test_bwd.json"
if [ "${AUTOGRAD:-1}" != 0 ]; then
    TAIL=20 step test_autograd python3 tests/gpu/test_autograd.py --out "$OUT/test_autograd.json"
fi
if [ "${HOST_STEP:-0}" != 0 ]; then
    TAIL=12 step host_step python3 bench/host_step.py
fi
if [ "${BENCH:-1}" != 0 ]; then
    TAIL=12 step bench_bwd python3 bench/bench_bwd.py --out "$OUT/bench_bwd.txt" --json "$OUT/bench_bwd.json" \
        ${BENCH_ARGS:-}
fi
cat "$SUM"
exit $fail
