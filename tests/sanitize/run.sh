#!/bin/sh
# tests/sanitize/run.sh - make test-sanitize: the CPU suite built with AddressSanitizer and
# UndefinedBehaviorSanitizer (any report fails the run; leak detection on).
# The working tree (less build/) is copied to build/san/src and built there with
# CC="$SAN_CC <sanitizer flags>", so every compile and every link (fa4gen, libfa4rt.so, the fake
# and simulated libcuda.so.1, the tests) carries them, whatever its own rule's flags; the normal
# build/ is left alone. Then: the unit tests, the launch tests through the fake driver, the
# simulator's test_core, test_tc, test_tma, sim_mha --self-test, a few sim_mha cases of each
# target through the simulated driver, and two cases in the timing mode.
#   SAN_CC (default clang, else gcc)   SAN_CASES (sim_mha cases per target, default 6)
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
CC_NAME=${SAN_CC:-$(command -v clang >/dev/null 2>&1 && echo clang || echo gcc)}
FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# gcc's -Wformat-truncation misreads bounds under -fsanitize (gen/sm100/plan.c): a false positive
case $CC_NAME in *gcc*) FLAGS="$FLAGS -Wno-format-truncation" ;; esac
SRC=build/san/src
rm -rf "$SRC" && mkdir -p "$SRC" || exit 1
tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C "$SRC" || exit 1
cd "$SRC" || exit 1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS="suppressions=$ROOT/tests/sanitize/lsan.supp:print_suppressions=0"
echo "test-sanitize: building with $CC_NAME $FLAGS"
make -s CC="$CC_NAME $FLAGS" CFLAGS="-O1 -g" build/fa4gen build/libfa4rt.so build/tests/test_launch \
    build/fakecuda/libcuda.so.1 build/sim/libcuda.so.1 build/sim/sim_mha build/sim/test_tc build/sim/test_tma \
    build/sim/test_core build/sim/timecase $(ls tests/unit/test_*.c | sed 's|tests/unit/\(.*\)\.c|build/tests/\1|' | grep -v test_launch) \
    || { echo "test-sanitize: build failed"; exit 1; }
# test_tc times one MMA against 1 ms, which ASan's slowdown brushes: UBSan only there (tc.c itself
# runs under ASan inside the simulated driver, in the sim_mha cases)
rm -f build/sim/test_tc
make -s CC="$CC_NAME -fsanitize=undefined -fno-sanitize-recover=all" build/sim/test_tc || exit 1
pass=0; fail=0
mkdir -p build/san-logs
step() { # step NAME CMD...
    name=$1; shift
    t0=$(date +%s)
    log=build/san-logs/$(echo "$name" | tr -c 'A-Za-z0-9_\n-' _).log
    if "$@" > "$log" 2>&1; then r=ok; pass=$((pass + 1)); else r=FAILED; fail=$((fail + 1)); fi
    printf '%-6s %-40s %4ss\n' "$r" "$name" $(( $(date +%s) - t0 ))
    [ $r = FAILED ] && { grep -B2 -A30 -m1 'Sanitizer\|runtime error\|FAILED\|ERROR' "$log" || tail -20 "$log"; } |
        head -60 | sed 's/^/    /'
    return 0
}
for t in build/tests/test_*; do
    case "$t" in build/tests/test_launch|build/tests/test_bundle|build/tests/test_aot) continue ;; esac
    step "$(basename "$t")" "$t"
done
step "test_launch (fake driver)" env LD_LIBRARY_PATH="$PWD/build/fakecuda" build/tests/test_launch
step "test_bundle (fake driver)" env LD_LIBRARY_PATH="$PWD/build/fakecuda" build/tests/test_bundle
step "test_aot (fake driver)" env LD_LIBRARY_PATH="$PWD/build/fakecuda" build/tests/test_aot
step "sim test_tc (UBSan)" build/sim/test_tc
step "sim test_tma" build/sim/test_tma
step "sim test_core" build/sim/test_core
step "sim_mha --self-test" build/sim/sim_mha --self-test
n=${SAN_CASES:-6}
for target in sm100 sm90; do
    grep -v '^#' tests/sim/cases_$target.txt | grep . | awk -v n="$n" 'NR % 7 == 1 && c < n { print; c++ }' \
        > build/san_cases_$target.txt
    cc=$([ $target = sm100 ] && echo 100 || echo 90)
    step "sim_mha $n $target cases" env FA4SIM_CC=$cc FA4GEN_COMPILER=driver-ptx FA4GEN_CACHE_DIR="$PWD/build/san_cache" \
        LD_LIBRARY_PATH="$PWD/build/sim" FA4SIM_SEED=1 build/sim/sim_mha --quiet --no-skip \
        --cases build/san_cases_$target.txt
done
# the timing mode's own state (the shared wgmma pipe's job lists, FMA runs, the store path) on a wgmma kernel and on
# the sparse MLA's per-thread st.global epilogue
printf '%s\n' "kind=mha batch=1 sq=256 sk=512 hq=2 qk=128" "kind=mla sq=2 skv=512 hq=64 topk=128 config=tma_store=0" \
    > build/san_timing.txt
step "timing mode, 2 sm90 cases" env FA4SIM_CC=90 FA4GEN_COMPILER=driver-ptx FA4GEN_CACHE_DIR="$PWD/build/san_cache" \
    LD_LIBRARY_PATH="$PWD/build/sim" FA4SIM_TIMING=h200 FA4SIM_TIMING_SAMPLES=1 build/sim/timecase --iters 1 \
    --cases build/san_timing.txt
echo "test-sanitize: $pass passed, $fail failed"
[ $fail -eq 0 ]
