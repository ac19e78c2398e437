#!/bin/bash
# tests/gpu/run.sh [--quick] [--no-bench] [--only-bench] [--only-anchor] [--only-use] [--only-mla] [--only-mods] [--only-tests] [--only-serving] [--only-bad-args] [--only-stale] [--only-short] [-- test_mha args]
# One call on a Hopper GPU machine: build, correctness against the fp32
# reference, cold/warm "get kernel" timings, SASS of the d128 kernel, the
# simulator's anchor (tests/sim/cases_sm90.txt run by build/sim/sim_mha on this
# GPU, outputs dumped into $OUT/anchor.tar.xz for the CPU simulator to compare
# with: tests/sim/anchor.sh), sinks and score_mods (tests/sim/cases_mods_sm90.txt against the fp64
# reference, and test_mha's NVRTC-reference cases; the dynamic-tile cases of tests/sim/cases_dyn_sm90.txt),
# the ways it is used (the examples' own checks: JIT host twice, AOT host with JIT disabled, both again built
# against `make install` with pkg-config and CMake; the torch ops under torch.compile and CUDA graphs), the
# serving shapes (issue 15: split-KV cases of tests/sim/cases_split.txt against the fp64 reference, the
# combine kernel alone, and test_mha's split decode cases against the fp32 reference), stale rows past each
# sequence's end in paged and varlen caches
# (tests/sim/cases_stale.txt, steps stale_seedN, the context checked after them; alone: --only-stale), the
# benchmarks (bench/bench_score_mod.py decides the score_mod claims and link mode; bench/bench_decode.py the
# decode bandwidth, step decode_bench), and the wrong arguments of issue 26 (tests/gpu/test_bad_args.py, step
# bad_args, with the ways it is used or --only-bad-args: each refused naming the argument or giving its
# documented result, the context healthy afterwards), and (--only-short, alone: it builds only fa4gen and libfa4rt) short
# sequences: the phase timeline of short tiles (bench/short_timeline.py, config word timeline=1; step short_timeline)
# then fa4 and its variants against cuDNN on the short grid and the long control, under CUDA graphs and eagerly
# (bench/short_shapes.py; step short_bench), and each backend's clock and power replayed alone (bench/short_power.py;
# step short_power); SHORT_ARGS / SHORT_TIMELINE_ARGS / SHORT_POWER_ARGS pass more flags. Logs go to $OUT
# (default build/gpu-out); a summary prints last.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-build/gpu-out}
mkdir -p "$OUT"
QUICK=""; BENCH=1; TESTS=1; ANCHOR=1; USE=1; MLA=0; MODS=0; SERVING=1; BADARGS=0; STALE=0; SHORT=0; EXTRA=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=--quick ;;
        --no-bench) BENCH=0 ;;
        --only-bench) TESTS=0; ANCHOR=0; USE=0; SERVING=0 ;;
        --only-anchor) TESTS=0; BENCH=0; USE=0; SERVING=0 ;;
        --only-use) TESTS=0; BENCH=0; ANCHOR=0; SERVING=0 ;;
        --only-mla) TESTS=0; BENCH=0; ANCHOR=0; USE=0; SERVING=0; MLA=1 ;;  # the sparse MLA cases, its anchor and benchmark
        --only-mods) TESTS=0; BENCH=0; ANCHOR=0; USE=0; SERVING=0; MODS=1 ;; # sinks/score_mod cases and their benchmark
        --only-tests) BENCH=0; ANCHOR=0; USE=0; SERVING=0 ;;      # build, JIT timings, correctness, SASS
        --only-serving) TESTS=0; BENCH=0; ANCHOR=0; USE=0; SERVING=2 ;; # issue 15: varlen/paged/split cases + benchmarks
        --only-bad-args) TESTS=0; BENCH=0; ANCHOR=0; USE=0; SERVING=0; BADARGS=1 ;; # issue 26: wrong arguments
        --only-stale) TESTS=0; BENCH=0; ANCHOR=0; USE=0; SERVING=0; STALE=1 ;; # issue 26 item 5: stale rows, context
        --only-short) TESTS=0; BENCH=0; ANCHOR=0; USE=0; SERVING=0; SHORT=1 ;; # short sequences: timeline, grid vs cuDNN
        --) shift; EXTRA=("$@"); break ;;
        *) echo "usage: tests/gpu/run.sh [--quick] [--no-bench] [--only-bench] [--only-anchor] [--only-use] [--only-mla] [--only-mods] [--only-tests] [--only-serving] [--only-bad-args] [--only-stale] [--only-short] [-- test_mha args]"; exit 2 ;;
    esac
    shift
done
CUDA=${CUDA_HOME:-/usr/local/cuda}
export PATH="$CUDA/bin:$PATH"
declare -a SUMMARY
step() { # step NAME CMD...: run, log to $OUT/NAME.log, record the status
    local name=$1; shift
    local t0=$(date +%s.%N) start=$(date +%T)
    "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    local dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
    SUMMARY+=("$(printf '%-14s %s rc=%-3d %6.1fs  %s' "$name" "$start" "$rc" "$dt" "$(tail -1 "$OUT/$name.log" | cut -c1-90)")")
    return $rc
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1
GPU=$(head -1 "$OUT/gpu.txt")
# the GPU's clocks, power, temperatures and clock-event reasons once a second for the whole run (the
# benchmarks' notes log the same just before each shape)
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,clocks_event_reasons.active \
    --format=csv,noheader -l 1 > "$OUT/gpu_state.csv" 2>&1 &
SMI_PID=$!
trap 'kill $SMI_PID 2>/dev/null' EXIT
if [ "$SHORT" = 1 ] && [ "$TESTS$BENCH$ANCHOR$USE$SERVING$MLA$MODS$BADARGS$STALE" = 000000000 ]; then
    step build make -j16 build/fa4gen build/libfa4rt.so  # --only-short: the Python benches need only these
else
step build make -j16 all
step build_test gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Iruntime -I"$CUDA/include" \
    tests/gpu/test_mha.c build/libfa4rt.a -L"$CUDA/lib64" -L"$CUDA/lib64/stubs" -lnvrtc -lcuda -ldl -lpthread -lm \
    -o build/test_mha
fi
if [ "$TESTS" = 1 ]; then
    export FA4GEN_CACHE_DIR=$(mktemp -d)
    step jit_cold build/test_mha --timing
    step jit_warm build/test_mha --timing
    step correctness build/test_mha $QUICK --out "$OUT/correctness.txt" "${EXTRA[@]}"
fi
if [ "$TESTS" = 1 ] || [ "$SERVING" != 0 ]; then
    # varlen + paged KV (issue 15): the simulator's cases on the GPU, per sequence against the fp64 reference,
    # three input seeds; the log of all of them is $OUT/varlen.txt
    step build_varlen make -j16 build/sim/sim_varlen
    : > "$OUT/varlen.txt"
    for seed in 1 2 3; do
        step varlen_seed$seed env FA4GEN_CACHE_DIR="$(mktemp -d)" build/sim/sim_varlen --seed $seed \
            --cases tests/sim/cases_varlen_sm90.txt
        cat "$OUT/varlen_seed$seed.log" >> "$OUT/varlen.txt"
    done
    step varlen_gpu env FA4GEN_CACHE_DIR="$(mktemp -d)" build/sim/sim_varlen --seed 1 --cases tests/sim/cases_varlen_gpu.txt
    cat "$OUT/varlen_gpu.log" >> "$OUT/varlen.txt"
fi
if [ "$TESTS" = 1 ] || [ "$SERVING" != 0 ] || [ "$STALE" = 1 ]; then
    step build_stale make -j16 build/sim/sim_varlen
    # stale rows (issue 26 item 5): NaN/Inf in page tails, in pages only unused table entries name, in the next
    # varlen sequence's rows and a dense cache's rows past seqlen_k must not reach a sequence's O or LSE: the
    # sm90a cases of tests/sim/cases_stale.txt, three input seeds, and tests/sim/cases_stale_gpu.txt (serving
    # sizes), one process each; every log ends with the context checked after its cases (a fault would be
    # sticky): 'context: healthy'
    grep 'target=sm90a' tests/sim/cases_stale.txt > "$OUT/cases_stale_sm90a.txt"
    : > "$OUT/stale.txt"
    for seed in 1 2 3; do
        step stale_seed$seed env FA4GEN_CACHE_DIR="$(mktemp -d)" build/sim/sim_varlen --seed $seed \
            --cases "$OUT/cases_stale_sm90a.txt"
        cat "$OUT/stale_seed$seed.log" >> "$OUT/stale.txt"
    done
    step stale_gpu env FA4GEN_CACHE_DIR="$(mktemp -d)" build/sim/sim_varlen --seed 1 --cases tests/sim/cases_stale_gpu.txt
    cat "$OUT/stale_gpu.log" >> "$OUT/stale.txt"
    SUMMARY+=("$(printf '%-14s %s of 4 stale runs end with a healthy context' stale_context \
        "$(grep -c '^context: healthy' "$OUT/stale.txt")")")
fi
if [ "$TESTS" = 1 ]; then
    # SASS of the d128 kernel: the planned HGMMA count, no local memory
    build/fa4gen mha --target sm90a --dtype bf16 --depth 128 --mask causal -o build/sass_k.ptx &&
        ptxas -arch=sm_90a build/sass_k.ptx -o build/sass_k.cubin &&
        cuobjdump --dump-sass build/sass_k.cubin > "$OUT/sass_d128_causal.txt" 2>&1
    {
        echo "HGMMA instructions: $(grep -c HGMMA "$OUT/sass_d128_causal.txt")"
        echo "local memory (LDL/STL): $(grep -cE '\bLDL|\bSTL' "$OUT/sass_d128_causal.txt")"
        echo "MUFU.EX2: $(grep -c 'MUFU.EX2' "$OUT/sass_d128_causal.txt")"
    } > "$OUT/sass_summary.txt"
    SUMMARY+=("$(printf '%-14s %s' sass "$(tr '\n' ';' < "$OUT/sass_summary.txt")")")
    # issue 10: the soft-capped d128 causal kernel, mod spliced (no CALL, no local memory, 32 HGMMA) and called
    for mode in splice call; do
        FA4GEN_SCORE_MOD_LINK=$mode build/fa4gen mha --target sm90a --dtype bf16 --depth 128 --mask causal \
            --score-mod bench/softcap30.cu -o build/sass_mod_$mode.ptx &&
            ptxas -arch=sm_90a build/sass_mod_$mode.ptx -o build/sass_mod_$mode.cubin &&
            cuobjdump --dump-sass build/sass_mod_$mode.cubin > "$OUT/sass_softcap_$mode.txt" 2>&1
        echo "softcap $mode: HGMMA $(grep -c HGMMA "$OUT/sass_softcap_$mode.txt") CALL $(grep -c CALL \
            "$OUT/sass_softcap_$mode.txt") LDL/STL $(grep -cE '\bLDL|\bSTL' "$OUT/sass_softcap_$mode.txt")" \
            >> "$OUT/sass_summary.txt"
    done
fi
if [ "$ANCHOR" = 1 ]; then
    # the same binary and seeded inputs the simulator runs; this GPU's outputs are its anchor
    step build_sim make -j16 build/sim/sim_mha
    rm -rf "$OUT/anchor" && mkdir -p "$OUT/anchor"
    step anchor env FA4GEN_CACHE_DIR="$(mktemp -d)" build/sim/sim_mha --cases tests/sim/cases_sm90.txt \
        --dump "$OUT/anchor"
    # one archive: commit it as bench/results/<date>-<gpu>-sim-anchor.tar.xz
    tar cJf "$OUT/anchor.tar.xz" -C "$OUT/anchor" . && rm -rf "$OUT/anchor"
fi
if [ "$ANCHOR" = 1 ] || [ "$MLA" = 1 ]; then
    # sparse MLA: the simulator's cases (dumped: the simulator's anchor) and the large GPU-only ones
    rm -rf "$OUT/mla_anchor" && mkdir -p "$OUT/mla_anchor"
    step build_sim_mla make -j16 build/sim/sim_mla
    step mla_cases env FA4GEN_CACHE_DIR="$(mktemp -d)" build/sim/sim_mla --cases tests/sim/cases_mla_sm90.txt \
        --dump "$OUT/mla_anchor"
    tar cJf "$OUT/mla_anchor.tar.xz" -C "$OUT/mla_anchor" . && rm -rf "$OUT/mla_anchor"
    step mla_gpu_cases build/sim/sim_mla --cases tests/sim/cases_mla_gpu.txt
    # the sm100a sparse MLA cases: run for real on a cc 10.x GPU; on a Hopper each must be refused
    # (SKIP) with a message naming the sm90a kernel
    step mla_sm100 env FA4GEN_CACHE_DIR="$(mktemp -d)" build/sim/sim_mla --cases tests/sim/cases_mla_sm100.txt
    SUMMARY+=("$(printf '%-14s %s of %s cases refused naming sm90a (expected: all on cc 9.x, none on 10.x)' mla_sm100_cc \
        "$(grep -c '^SKIP.*sm90a' "$OUT/mla_sm100.log")" "$(grep -cE '^(PASS|FAIL|SKIP) ' "$OUT/mla_sm100.log")")")
fi
if [ "$ANCHOR" = 1 ] || [ "$MODS" = 1 ]; then
    # issue 10: sinks and score_mods on this GPU against the fp64 reference, dumped (a future anchor)
    step build_sim_mods make -j16 build/sim/sim_mha
    rm -rf "$OUT/mods_anchor" && mkdir -p "$OUT/mods_anchor"
    step mods_cases env FA4GEN_CACHE_DIR="$(mktemp -d)" build/sim/sim_mha --cases tests/sim/cases_mods_sm90.txt \
        --dump "$OUT/mods_anchor"
    tar cJf "$OUT/mods_anchor.tar.xz" -C "$OUT/mods_anchor" . && rm -rf "$OUT/mods_anchor"
    # dynamic tiles (runtime/sched.c): each case after the one before on one stream, some launched twice
    step dyn_cases env FA4GEN_CACHE_DIR="$(mktemp -d)" build/sim/sim_mha --no-skip --cases tests/sim/cases_dyn_sm90.txt
fi
if [ "$SERVING" != 0 ]; then
    # issue 15 (split-KV): the simulator's split cases on this GPU against the fp64 reference (dumped: a
    # future anchor), the combine kernel alone, and (--only-serving) test_mha's split decode cases against
    # the fp32 reference
    step build_serving make -j16 build/sim/sim_mha build/sim/test_combine
    grep 'target=sm90a' tests/sim/cases_split.txt > "$OUT/cases_split_sm90a.txt"
    rm -rf "$OUT/split_anchor" && mkdir -p "$OUT/split_anchor"
    step split_cases env FA4GEN_CACHE_DIR="$(mktemp -d)" build/sim/sim_mha --no-skip \
        --cases "$OUT/cases_split_sm90a.txt" --dump "$OUT/split_anchor"
    tar cJf "$OUT/split_anchor.tar.xz" -C "$OUT/split_anchor" . && rm -rf "$OUT/split_anchor"
    step combine env FA4GEN_CACHE_DIR="$(mktemp -d)" build/sim/test_combine
    # the Python binding's varlen decode with split-KV, dense and paged, against an fp32 reference per sequence
    step serving_py env FA4_LIB=build/libfa4rt.so python3 tests/gpu/test_serving_py.py
    if [ "$SERVING" = 2 ]; then
        step build_test_serving make -j16 all
        gcc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Iruntime -I"$CUDA/include" tests/gpu/test_mha.c \
            build/libfa4rt.a -L"$CUDA/lib64" -L"$CUDA/lib64/stubs" -lnvrtc -lcuda -ldl -lpthread -lm -o build/test_mha &&
            step split_decode build/test_mha --splits --out "$OUT/split_decode.txt" "${EXTRA[@]}"
    fi
fi
if { [ "$BENCH" = 1 ] || [ "$SERVING" = 2 ]; } && [ -f bench/bench_decode.py ]; then
    step decode_bench env PYTHONUNBUFFERED=1 FA4_LIB=build/libfa4rt.so python3 bench/bench_decode.py --graphs \
        --out "$OUT/bench_decode.txt" ${DECODE_BENCH_ARGS:-}
    # eight calls per graph (the layers of one decode step): the time per call without the graph's own launch
    step decode_bench_calls8 env PYTHONUNBUFFERED=1 FA4_LIB=build/libfa4rt.so python3 bench/bench_decode.py --graphs \
        --calls 8 --reps 10 --out "$OUT/bench_decode_calls8.txt" ${DECODE_BENCH_ARGS:-}
    # the same with kv_early (the split kernel streams its first K/V blocks under the previous kernel's tail;
    # column fa4[plain] is the call without it, in the same repetitions)
    step decode_bench_early env PYTHONUNBUFFERED=1 FA4_LIB=build/libfa4rt.so python3 bench/bench_decode.py --graphs \
        --calls 8 --reps 10 --kv-early --out "$OUT/bench_decode_early.txt" ${DECODE_BENCH_ARGS:-}
    # decode without a workspace (sm90a: the runtime's cluster split, bench/NOTES.md "cluster split")
    step decode_bench_nows env PYTHONUNBUFFERED=1 FA4_LIB=build/libfa4rt.so python3 bench/bench_decode.py --graphs \
        --calls 8 --reps 10 --no-ws --batches 1,2,4,8 --out "$OUT/bench_decode_nows.txt" ${DECODE_NOWS_ARGS:-}
    # the same shapes with fa4 reading K/V through 64-row pages and a shuffled block table, 8 calls per graph as
    # the dense table of record
    step decode_bench_paged env PYTHONUNBUFFERED=1 FA4_LIB=build/libfa4rt.so python3 bench/bench_decode.py --graphs --paged \
        --calls 8 --reps 10 --out "$OUT/bench_decode_paged.txt" ${DECODE_PAGED_ARGS:-}
    # paged with kv_early (lengths, table entries and first K/V blocks before the wait); fa4[plain] without
    step decode_bench_paged_early env PYTHONUNBUFFERED=1 FA4_LIB=build/libfa4rt.so python3 bench/bench_decode.py --graphs \
        --paged --kv-early --calls 8 --reps 10 --out "$OUT/bench_decode_paged_early.txt" ${DECODE_PAGED_ARGS:-}
fi
if [ "$USE" = 1 ]; then
    # issue 11: the examples check their own output on this GPU; the JIT host's second run must be a
    # disk-cache hit; the AOT host takes its kernel from its bundle with JIT disabled
    ucache=$(mktemp -d)
    step ex_jit_first env FA4GEN_CACHE_DIR="$ucache" FA4GEN_LOG=1 build/examples/jit_host
    step ex_jit_second env FA4GEN_CACHE_DIR="$ucache" FA4GEN_LOG=1 build/examples/jit_host --expect-cached
    step ex_aot env FA4GEN_CACHE_DIR="$ucache" FA4GEN_LOG=1 build/examples/aot_host
    step ex_aot_envjit env FA4GEN_CACHE_DIR="$(mktemp -d)" FA4GEN_DISABLE_JIT=1 build/examples/aot_host
    # the same hosts built against an install (pkg-config and, when cmake is here, CMake)
    step install_examples sh tests/install/run.sh
    # torch ops: eager vs fp32 reference, torch.compile(fullgraph=True), CUDA-graph capture/replay, errors
    step torch_ops env FA4_LIB=build/libfa4rt.so python3 tests/gpu/test_torch.py
fi
if [ "$USE" = 1 ] || [ "$BADARGS" = 1 ]; then
    # issue 26: every wrong-argument case of item 4 refused naming the argument (Python's checks, and the C API's
    # driver checks on bad pointers) or giving its documented result (topk_length -1, -2^31, past topk), then a
    # normal MHA and MLA call and torch.cuda.synchronize(): the context is healthy; the log also holds the host
    # cost of a cached call and of one cuPointerGetAttributes
    step bad_args env PYTHONUNBUFFERED=1 FA4_LIB=build/libfa4rt.so FA4GEN_CACHE_DIR="$(mktemp -d)" \
        python3 tests/gpu/test_bad_args.py
fi
if [ "$BENCH" = 1 ] && [ -f bench/bench_mha.py ]; then
    step bench env PYTHONUNBUFFERED=1 FA4_LIB=build/libfa4rt.so python3 bench/bench_mha.py --out "$OUT/bench.txt" ${BENCH_ARGS:-}
fi
if { [ "$BENCH" = 1 ] || [ "$MLA" = 1 ]; } && [ -f bench/bench_mla_sparse.py ]; then
    step bench_mla env PYTHONUNBUFFERED=1 FA4_LIB=build/libfa4rt.so python3 bench/bench_mla_sparse.py \
        --out "$OUT/bench_mla.txt" ${MLA_BENCH_ARGS:-}
fi
if { [ "$BENCH" = 1 ] || [ "$SERVING" = 2 ]; } && [ -f bench/bench_varlen.py ]; then
    # issue 15 (a): varlen causal prefill, 16 sequences 100..8k, d128 GQA 32/8, against torch's varlen paths
    step varlen_bench env PYTHONUNBUFFERED=1 FA4_LIB=build/libfa4rt.so python3 bench/bench_varlen.py \
        --out "$OUT/bench_varlen.txt"
fi
if { [ "$BENCH" = 1 ] || [ "$MODS" = 1 ]; } && [ -f bench/bench_score_mod.py ]; then
    step bench_mod env PYTHONUNBUFFERED=1 FA4_LIB=build/libfa4rt.so python3 bench/bench_score_mod.py \
        --out "$OUT/bench_score_mod.txt"
fi
if [ "$SHORT" = 1 ]; then
    # short sequences: the timeline first (where a short tile's time goes), then the grid; one kernel cache for
    # both, each step bounded so one that hangs leaves the other's log
    scache=$(mktemp -d)
    step short_timeline env PYTHONUNBUFFERED=1 FA4_LIB=build/libfa4rt.so FA4GEN_CACHE_DIR="$scache" \
        timeout "${SHORT_TIMELINE_TIMEOUT:-90}" python3 bench/short_timeline.py --out "$OUT/short_timeline.txt" \
        --json "$OUT/short_timeline.json" ${SHORT_TIMELINE_ARGS:-}
    step short_bench env PYTHONUNBUFFERED=1 FA4_LIB=build/libfa4rt.so FA4GEN_CACHE_DIR="$scache" \
        timeout "${SHORT_TIMEOUT:-120}" python3 bench/short_shapes.py --out "$OUT/short_shapes.txt" \
        --json "$OUT/short_shapes.json" ${SHORT_ARGS:-}
    step short_power env PYTHONUNBUFFERED=1 FA4_LIB=build/libfa4rt.so FA4GEN_CACHE_DIR="$scache" \
        timeout "${SHORT_POWER_TIMEOUT:-120}" python3 bench/short_power.py --out "$OUT/short_power.txt" \
        ${SHORT_POWER_ARGS:-}
fi
echo "== $GPU"
cat "$OUT/jit_cold.log" "$OUT/jit_warm.log" 2>/dev/null | grep "get kernel"
[ -f "$OUT/correctness.txt" ] && grep -E "FAIL" "$OUT/correctness.txt" | head -20
[ -f "$OUT/bench.txt" ] && cat "$OUT/bench.txt"
[ -f "$OUT/bench_score_mod.txt" ] && cat "$OUT/bench_score_mod.txt"
[ -f "$OUT/bench_decode.txt" ] && cat "$OUT/bench_decode.txt"
[ -f "$OUT/bench_decode_calls8.txt" ] && cat "$OUT/bench_decode_calls8.txt"
[ "$SHORT" = 1 ] && cat "$OUT/short_timeline.log" "$OUT/short_bench.log" "$OUT/short_power.log" 2>/dev/null
printf '%s\n' "${SUMMARY[@]}"
