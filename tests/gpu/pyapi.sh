#!/bin/bash
# tests/gpu/pyapi.sh - fa4 for Python users on one GPU machine, one call, no internet (about 100 s on an H100 once
# built; a fresh machine adds the build):
#   OUT=/some/dir bash tests/gpu/pyapi.sh          (SCORETF=0 skips the softcap/ALiBi benchmark)
# The correctness steps run side by side (each its own process and kernel cache; nothing in them is timed), then the
# timed steps one at a time on an otherwise idle GPU. Each step logs to $OUT/<step>.log; the summary prints last and
# goes to $OUT/summary.txt, the host-cost table to $OUT/host_table.txt.
#   build        make -j16 of what the steps run (no-op when built)
#   -- side by side --
#   scoretf_gpu  tests/sim/cases_scoretf.txt's sm90a cases (built-in softcap / ALiBi) through build/sim/sim_mha on
#                this GPU against the fp64 reference
#   kv_append    build/sim/test_kv_append on this GPU: the kv-append kernel (dense and paged caches, bad lengths,
#                rows and table entries that must write nothing, the lengths out, refusals), byte for byte
#   fa_api       tests/gpu/test_fa_api.py: the FlashAttention API against an fp32 reference; kvcache (the append
#                kernel, a cache of more rows than q's batch, bad device values, splits); torch.compile(fullgraph=True);
#                CUDA graphs; fa4_torch's eager wrappers against the ops (same bits; autograd through the op)
#   torch_ops_cpu tests/python/test_torch_ops.py (schemas, fakes, make_fx, which path an eager call takes)
#   torch_ops    tests/gpu/test_torch.py (the older ops: compile, CUDA graphs, no host sync, errors)
#   transformers tests/gpu/test_transformers.py: Llama / Qwen2 with random weights, logits and greedy generation
#                vs sdpa and eager (skips, saying why, without transformers)
#   -- one at a time --
#   host         bench/host_cost.py --c-bench build/bench/host_cost: host us per call behind a held GPU -- eager
#                flash_attn_func beside SDPA, the torch op, the C call beside its bare launch (from C and through
#                ctypes), the kvcache decode step -- ending in one table (host_table.txt; host_cost_py.json, the C
#                bench's own lines in host_cost_c.txt)
#   scoretf_bench bench/bench_scoretf.py: softcap / ALiBi beside plain, TFLOP/s (text + JSON)
# Exit status: the number of failed steps. The wheel test (tests/install/wheel.sh) needs PyPI and is not run here.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/pyapi-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FA4_LIB=$PWD/build/libfa4rt.so
CUDA=${CUDA_HOME:-/usr/local/cuda}
export PATH="$CUDA/bin:$PATH"
T0=$(date +%s)
# one private kernel cache for every step: a kernel two steps need is compiled once
CACHE=$(mktemp -d)
SUMMARY=()
fails=0
run_step() { # run_step NAME CMD...: run (at most STEP_TIMEOUT s, default 600), log to $OUT/NAME.log, leave "rc seconds" in $OUT/NAME.rc
    local name=$1; shift
    local t0=$(date +%s)
    timeout "${STEP_TIMEOUT:-600}" "$@" > "$OUT/$name.log" 2>&1
    echo "$? $(( $(date +%s) - t0 ))" > "$OUT/$name.rc"
}
record() { # record NAME: the step's status and its log's last line into the summary
    local rc=1 secs=0
    read -r rc secs < "$OUT/$1.rc" || true
    [ "$rc" -ne 0 ] && fails=$((fails + 1))
    SUMMARY+=("$(printf '%-14s rc=%-3d %4ss  %s' "$1" "$rc" "$secs" "$(tail -1 "$OUT/$1.log" | cut -c1-110)")")
}
step() { run_step "$@"; record "$1"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1
git log --oneline -1 > "$OUT/commit.txt" 2>&1
step build make -j16 build/fa4gen build/libfa4rt.so build/sim/sim_mha build/sim/test_kv_append \
    build/bench/host_cost build/bench/liblaunchfloor.so
grep '^target=sm90a' tests/sim/cases_scoretf.txt > "$OUT/scoretf_sm90.txt"
PAR=(scoretf_gpu kv_append fa_api torch_ops_cpu torch_ops transformers)
run_step scoretf_gpu env FA4GEN_CACHE_DIR="$CACHE" build/sim/sim_mha --no-skip --cases "$OUT/scoretf_sm90.txt" &
run_step kv_append env FA4GEN_CACHE_DIR="$CACHE" build/sim/test_kv_append &
run_step fa_api env FA4GEN_CACHE_DIR="$CACHE" python3 tests/gpu/test_fa_api.py &
run_step torch_ops_cpu python3 tests/python/test_torch_ops.py &
run_step torch_ops env FA4GEN_CACHE_DIR="$CACHE" python3 tests/gpu/test_torch.py &
run_step transformers env FA4GEN_CACHE_DIR="$CACHE" python3 tests/gpu/test_transformers.py &
wait
for s in "${PAR[@]}"; do record "$s"; done
step host env FA4GEN_CACHE_DIR="$CACHE" python3 bench/host_cost.py --c-bench build/bench/host_cost \
    --c-out "$OUT/host_cost_c.txt" --out "$OUT/host_cost_py.txt" --json "$OUT/host_cost_py.json"
sed -n '/^## host cost table/,$p' "$OUT/host.log" > "$OUT/host_table.txt"
if [ "${SCORETF:-1}" != 0 ]; then
    step scoretf_bench env FA4GEN_CACHE_DIR="$CACHE" python3 bench/bench_scoretf.py --reps 30 \
        --out "$OUT/scoretf_bench.txt" --json "$OUT/scoretf_bench.json"
fi
{ echo "pyapi.sh on $(head -1 "$OUT/gpu.txt") at $(cat "$OUT/commit.txt"), $(( $(date +%s) - T0 )) s"
  printf '%s\n' "${SUMMARY[@]}"; cat "$OUT/host_table.txt"
  echo "pyapi: $(( ${#SUMMARY[@]} - fails )) passed, $fails failed"; } | tee "$OUT/summary.txt"
exit $fails
