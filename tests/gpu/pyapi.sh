#!/bin/bash
# tests/gpu/pyapi.sh - issue 27 on one GPU machine, one call, about 3 minutes (after `make -j16 all`):
#   OUT=/some/dir bash tests/gpu/pyapi.sh
# Steps (each logs to $OUT/<step>.log; a summary prints last and goes to $OUT/summary.txt):
#   build        make -j16 all build/sim/sim_mha build/sim/test_kv_append build/bench/host_cost
#                build/bench/liblaunchfloor.so (no-op when built)
#   scoretf_gpu  tests/sim/cases_scoretf.txt's sm90a cases (built-in softcap / ALiBi) through build/sim/sim_mha
#                on this GPU against the fp64 reference
#   kv_append    build/sim/test_kv_append on this GPU: the kv-append kernel (dense and paged caches, bad lengths,
#                rows and table entries that must write nothing, the lengths out, refusals), byte for byte
#   fa_api       tests/gpu/test_fa_api.py: the FlashAttention API against an fp32 reference, kvcache (append kernel,
#                bad device values, splits), torch.compile(fullgraph=True), CUDA graphs
#   torch_ops    tests/python/test_torch_ops.py (schemas, fakes, make_fx, the eager-or-op decision) and
#                tests/gpu/test_torch.py (the older ops)
#   transformers tests/gpu/test_transformers.py: Llama / Qwen2 with random weights, logits and greedy generation
#                vs sdpa and eager (skips, saying why, without transformers)
#   host_py      bench/host_cost.py: host us per call behind a held GPU, fa4 eager beside SDPA, the op's dispatch,
#                the C call and its bare launch through ctypes, the kvcache decode step before/after (text + JSON)
#   host_c       build/bench/host_cost on the real driver: the C call beside its bare launch (decode, tiny
#                prefill, kv append), the driver's parts
#   scoretf_bench bench/bench_scoretf.py: softcap / ALiBi beside plain, TFLOP/s (text + JSON)
# Exit status: the number of failed steps. FA4GEN_CACHE_DIR is a fresh folder per step that compiles.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/pyapi-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FA4_LIB=$PWD/build/libfa4rt.so
CUDA=${CUDA_HOME:-/usr/local/cuda}
export PATH="$CUDA/bin:$PATH"
SUMMARY=()
fails=0
step() { # step NAME CMD...: run, log to $OUT/NAME.log, record the status and the log's last line
    local name=$1; shift
    local t0=$(date +%s)
    "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    [ $rc -ne 0 ] && fails=$((fails + 1))
    SUMMARY+=("$(printf '%-14s rc=%-3d %5ss  %s' "$name" "$rc" "$(( $(date +%s) - t0 ))" "$(tail -1 "$OUT/$name.log" | cut -c1-110)")")
    return $rc
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1
git log --oneline -1 > "$OUT/commit.txt" 2>&1
step build make -j16 all build/sim/sim_mha build/sim/test_kv_append build/bench/host_cost build/bench/liblaunchfloor.so
grep '^target=sm90a' tests/sim/cases_scoretf.txt > "$OUT/scoretf_sm90.txt"
step scoretf_gpu env FA4GEN_CACHE_DIR="$(mktemp -d)" build/sim/sim_mha --no-skip --cases "$OUT/scoretf_sm90.txt"
step kv_append env FA4GEN_CACHE_DIR="$(mktemp -d)" build/sim/test_kv_append
step fa_api env FA4GEN_CACHE_DIR="$(mktemp -d)" python3 tests/gpu/test_fa_api.py
step torch_ops_cpu python3 tests/python/test_torch_ops.py
step torch_ops env FA4GEN_CACHE_DIR="$(mktemp -d)" python3 tests/gpu/test_torch.py
step transformers env FA4GEN_CACHE_DIR="$(mktemp -d)" python3 tests/gpu/test_transformers.py
step host_py env FA4GEN_CACHE_DIR="$(mktemp -d)" python3 bench/host_cost.py --out "$OUT/host_cost_py.txt" \
    --json "$OUT/host_cost_py.json"
step host_c env FA4GEN_CACHE_DIR="$(mktemp -d)" build/bench/host_cost
step scoretf_bench env FA4GEN_CACHE_DIR="$(mktemp -d)" python3 bench/bench_scoretf.py --reps 30 \
    --out "$OUT/scoretf_bench.txt" --json "$OUT/scoretf_bench.json"
{ echo "pyapi.sh on $(head -1 "$OUT/gpu.txt") at $(cat "$OUT/commit.txt")"; printf '%s\n' "${SUMMARY[@]}";
  echo "pyapi: $(( ${#SUMMARY[@]} - fails )) passed, $fails failed"; } | tee "$OUT/summary.txt"
exit $fails
