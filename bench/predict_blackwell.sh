#!/bin/sh
# bench/predict_blackwell.sh [GPU] [SAMPLES] - modelled sm100a predictions (the simulator's timing mode, table
# tests/sim/gpus/GPU.tbl, default b200; b300 runs the sm103a kernels, the ones a B300 loads, on the simulated
# cc 10.3 device) for the kernel/shape pairs of bench/NOTES.md "Blackwell predictions":
# one `PRED` and one `fa4sim-timing` line per launch each. Needs build/sim/libcuda.so.1 and build/sim/timecase.
# FA4SIM_TIMING_SENS=1 in the environment adds each assumed value's +-25% effect (about 45 windows a case).
# Each case takes 2-30 s on one core with SAMPLES=2 (default). Evidence level: modelled.
set -u
cd "$(dirname "$0")/.."
gpu=${1:-b200}
samples=${2:-2}
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
case "$gpu" in b300) t=sm103a cc=103 ;; *) t=sm100a cc=100 ;; esac
export FA4GEN_COMPILER=driver-ptx FA4GEN_CACHE_DIR="$w/cache" LD_LIBRARY_PATH="$PWD/build/sim" FA4SIM_CC=$cc \
       FA4SIM_TIMING="$gpu" FA4SIM_TIMING_SAMPLES="$samples"
m="kind=mha target=$t batch=2 sq=8192 sk=8192 hq=16"
while IFS='|' read -r name words cfg; do
    case "$name" in ''|'#'*) continue ;; esac
    # shellcheck disable=SC2086
    if [ -n "$cfg" ]; then out=$(build/sim/timecase --iters 1 $words "config=$cfg" 2>&1)
    else out=$(build/sim/timecase --iters 1 $words 2>&1); fi
    echo "$out" | grep '^PRED' | sed "s/^PRED /PRED $name: /"
    echo "$out" | grep '^fa4sim-timing\|^FAIL'
done <<CASES
mha-d128-full|$m qk=128
mha-d128-causal|$m qk=128 mask=causal
mha-d64-full|$m qk=64
mha-d64-causal|$m qk=64 mask=causal
mha-d128-full-cta2|$m qk=128|cta=2
mha-d128-causal-cta2|$m qk=128 mask=causal|cta=2
mha-d128-gqa8-full|kind=mha target=$t batch=2 sq=8192 sk=8192 hq=32 hkv=4 qk=128
mha-d128-e4m3-full|$m qk=128 dtype=e4m3
mla-prefill-d192-full|$m qk=192 ov=128
mla-prefill-d192-causal|$m qk=192 ov=128 mask=causal
mla-sparse-head128-slots1|kind=mla target=$t sq=4096 skv=8192 hq=128 topk=2048|cta_group=2 num_mbars=1
mla-sparse-head128-slots2|kind=mla target=$t sq=4096 skv=8192 hq=128 topk=2048|cta_group=2 b_topk=64 num_mbars=2
mla-sparse-head64|kind=mla target=$t sq=4096 skv=8192 hq=128 topk=2048|cta_group=1
mla-sparse-head64-fp8|kind=mla target=$t sq=4096 skv=8192 hq=128 topk=2048 dtype=e4m3
CASES
