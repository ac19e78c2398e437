#!/bin/sh
# tests/gpu/bwd_profile.sh - where the backward's time goes, one device call:
#   1. bench/profile_bwd.py: every kernel of fa4's backward (pre, main, dq) and of cuDNN's, per shape, per variant
#   2. ncu (clocks left alone) on fa4's main kernel for NCU_SHAPES: speed of light, memory and compute workload,
#      warp states (stall reasons), source counters
# Logs in $OUT (default build/gpu-out): profile_bwd.txt, ncu_<n>.txt. VARIANTS, SHAPES, NCU_SHAPES override.
set -u
cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:-build/gpu-out}
mkdir -p "$OUT"
CUDA=${CUDA_HOME:-/usr/local/cuda}
export PATH="$CUDA/bin:$PATH" PYTHONUNBUFFERED=1
export FA4GEN_CACHE_DIR=${FA4GEN_CACHE_DIR:-$(mktemp -d)}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
make -j16 build/fa4gen build/libfa4rt.so > "$OUT/build.log" 2>&1 || { tail "$OUT/build.log"; exit 1; }
python3 bench/profile_bwd.py --out "$OUT/profile_bwd.txt" --shapes "${SHAPES:-}" --variants "${VARIANTS:-default}" || exit 1
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
