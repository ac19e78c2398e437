#!/bin/sh
# tests/sim/run.sh - the simulator suite (make sim-test; part of make test).
#   1. the units' own tests: test_tc (tensor cores), test_tma (TMA), test_core (the interpreter, barriers,
#      bulk copies, cp.async and each kind of report on hand-written PTX), test_ref_mla (the sparse MLA
#      reference), sim_mha --self-test (reference)
#   2. every sm_100a case of tests/sim/cases_sm100.txt through fa4_mha_fwd on the simulated
#      cc 10.0 device, under scheduler seeds 1, 2 and one drawn at random for this run (printed:
#      FA4SIM_SEED=N reproduces it)
#   3. every sm_90a case of tests/sim/cases_sm90.txt on the simulated cc 9.0 device, under the
#      same seeds, each compared with what an H100 computed on the same inputs (the anchor,
#      bench/results/*-h100-sim-anchor.tar.xz, made by tests/gpu/run.sh)
#   3b. the sm_90a sink and score_mod cases of tests/sim/cases_mods_sm90.txt against the fp64 reference
#      only (no H100 anchor holds them yet)
#   3b'. the built-in softcap and ALiBi (issue 27) of tests/sim/cases_scoretf.txt per target, against the fp64
#      reference (input seed = scheduler seed)
#   3c. the varlen and paged-KV cases of tests/sim/cases_varlen_sm90.txt (cc 9.0) and cases_varlen_sm100.txt
#      (cc 10.0) through build/sim/sim_varlen, against the fp64 reference per sequence, the scheduler seed
#      also drawing the inputs
#   3d. stale rows (issue 26 item 5): tests/sim/cases_stale.txt per target through build/sim/sim_varlen: NaN/Inf
#      in every K/V row that is no key of the sequence checked (page tails, pages only unused table entries
#      name, the next varlen sequence's rows, a dense cache's rows past seqlen_k) must not reach its O or LSE
#   4. the sm_90a sparse MLA cases of tests/sim/cases_mla_sm90.txt (build/sim/sim_mla), under the same
#      seeds, compared with an H100's outputs on the same inputs (*-h100-mla-sparse-sim-anchor.tar.xz)
#   5. the sm_100a sparse MLA cases of tests/sim/cases_mla_sm100.txt on the simulated cc 10.0 device,
#      under the same seeds, against the fp64 reference (no GPU anchor: no Blackwell here)
#   5b. split-KV (issue 15): build/sim/test_combine (the combine kernel alone: -inf rows, NaN partials
#      it must not read), then tests/sim/cases_split.txt per target under the same seeds (scheduler and
#      input seed) against the fp64 reference
#   5b'. the KV-cache append (issue 27): build/sim/test_kv_append per target (dense and paged caches, bad lengths,
#      rows and table entries that must write nothing, the lengths out, refusals)
#   5c. the attention backward (issue 29): tests/sim/cases_bwd_sm90.txt through build/sim/sim_bwd (cc 9.0) and
#      tests/sim/cases_bwd_sm100.txt (cc 10.0: the runtime picks the sm100a kernel) against the fp64 reference
#      (ref_mha_bwd.c), the scheduler seed also drawing the inputs
#   6. tests/sim/mutants.sh: mutated kernels must fail (and tests/sim/mutants_bwd.sh, the backward's)
# Seeds 1 and 2 run side by side (CI has 2 cores), then the random one beside the mutants; each seed's
# lines print in seed order once it is done.
# Prints one line per step and 'sim suite: N passed, N failed'; exit 1 on failure.
# Needs: build/fa4gen, build/sim/libcuda.so.1, build/sim/sim_mha, build/sim/sim_varlen,
# build/sim/sim_bwd, build/sim/test_{tc,tma,core,ref_mla,combine,kv_append}.
set -u
cd "$(dirname "$0")/../.."
B=build
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export FA4GEN_COMPILER=driver-ptx FA4GEN_CACHE_DIR="$work/cache" LD_LIBRARY_PATH="$PWD/$B/sim"
pass=0; fail=0
log=$work/log
step() { # step NAME CMD...: run, keep the log ($log), print its last line
    name=$1; shift
    t0=$(date +%s)
    if "$@" > "$log" 2>&1; then r=ok; pass=$((pass + 1)); else r=FAILED; fail=$((fail + 1)); fi
    printf '%-6s %-34s %4ss  %s\n' "$r" "$name" $(( $(date +%s) - t0 )) "$(tail -1 "$log")"
    if [ "$r" = FAILED ]; then grep -v '^PASS\|^  ' "$log" | head -40 | sed 's/^/    /'; fi
}

step "test_tc" $B/sim/test_tc
step "test_tma" $B/sim/test_tma
step "timing" sh tests/sim/timing_test.sh
step "test_core" $B/sim/test_core
step "test_ref_mla" $B/sim/test_ref_mla
step "sim_mha --self-test" $B/sim/sim_mha --self-test

step "sim_mla --self-test" $B/sim/sim_mla --self-test
anchor=$(ls bench/results/*-h100-sim-anchor.tar.xz 2>/dev/null | tail -1)
mkdir -p "$work/anchor" "$work/mla_anchor"
[ -n "$anchor" ] && tar xJf "$anchor" -C "$work/anchor"
mla_anchor=$(ls bench/results/*-h100-mla-sparse-sim-anchor.tar.xz 2>/dev/null | tail -1)
[ -n "$mla_anchor" ] && tar xJf "$mla_anchor" -C "$work/mla_anchor"
random_seed=$(( $(od -An -N2 -tu2 /dev/urandom) + 3 ))
grep 'target=sm90a' tests/sim/cases_split.txt > "$work/split90.txt"
grep 'target=sm100a' tests/sim/cases_split.txt > "$work/split100.txt"
grep 'target=sm90a' tests/sim/cases_stale.txt > "$work/stale90.txt"
grep 'target=sm100a' tests/sim/cases_stale.txt > "$work/stale100.txt"
grep '^target=sm90a' tests/sim/cases_scoretf.txt > "$work/stf90.txt"
grep '^target=sm100a' tests/sim/cases_scoretf.txt > "$work/stf100.txt"
step "combine kernel alone (-inf rows)" env FA4SIM_CC=90 $B/sim/test_combine
step "kv-append sm90a (bad positions)" env FA4SIM_CC=90 $B/sim/test_kv_append
step "kv-append sm100a (bad positions)" env FA4SIM_CC=100 $B/sim/test_kv_append
# seed_steps SEED: every seeded step (in a subshell of its own: its log files are $work/*.SEED)
seed_steps() {
    seed=$1 log=$work/log.$1
    step "split-KV sm90a, seed $seed" env FA4SIM_SEED=$seed FA4SIM_CC=90 \
        $B/sim/sim_mha --quiet --no-skip --seed $seed --cases "$work/split90.txt"
    step "split-KV sm100a, seed $seed" env FA4SIM_SEED=$seed FA4SIM_CC=100 \
        $B/sim/sim_mha --quiet --no-skip --seed $seed --cases "$work/split100.txt"
    step "sm100a cases, seed $seed" env FA4SIM_SEED=$seed FA4SIM_CC=100 \
        $B/sim/sim_mha --quiet --no-skip --cases tests/sim/cases_sm100.txt
    step "sm90a cases vs H100, seed $seed" env FA4SIM_SEED=$seed FA4SIM_CC=90 \
        $B/sim/sim_mha --quiet --no-skip --cases tests/sim/cases_sm90.txt --compare "$work/anchor"
    cp "$log" "$work/mha90.log.$seed"
    step "sm90a sinks + score_mod, seed $seed" env FA4SIM_SEED=$seed FA4SIM_CC=90 \
        $B/sim/sim_mha --quiet --no-skip --cases tests/sim/cases_mods_sm90.txt
    step "sm90a softcap + alibi, seed $seed" env FA4SIM_SEED=$seed FA4SIM_CC=90 \
        $B/sim/sim_mha --quiet --no-skip --seed $seed --cases "$work/stf90.txt"
    step "sm100a softcap + alibi, seed $seed" env FA4SIM_SEED=$seed FA4SIM_CC=100 \
        $B/sim/sim_mha --quiet --no-skip --seed $seed --cases "$work/stf100.txt"
    step "sm90a varlen + paged, seed $seed" env FA4SIM_SEED=$seed FA4SIM_CC=90 \
        $B/sim/sim_varlen --quiet --seed $seed --cases tests/sim/cases_varlen_sm90.txt
    step "sm100a varlen + paged, seed $seed" env FA4SIM_SEED=$seed FA4SIM_CC=100 \
        $B/sim/sim_varlen --quiet --seed $seed --cases tests/sim/cases_varlen_sm100.txt
    step "sm90a stale rows, seed $seed" env FA4SIM_SEED=$seed FA4SIM_CC=90 \
        $B/sim/sim_varlen --quiet --seed $seed --cases "$work/stale90.txt"
    step "sm100a stale rows, seed $seed" env FA4SIM_SEED=$seed FA4SIM_CC=100 \
        $B/sim/sim_varlen --quiet --seed $seed --cases "$work/stale100.txt"
    step "sm90a sparse MLA vs H100, seed $seed" env FA4SIM_SEED=$seed FA4SIM_CC=90 \
        $B/sim/sim_mla --quiet --no-skip --cases tests/sim/cases_mla_sm90.txt --compare "$work/mla_anchor"
    cp "$log" "$work/mla90.log.$seed"
    step "sm100a sparse MLA, seed $seed" env FA4SIM_SEED=$seed FA4SIM_CC=100 \
        $B/sim/sim_mla --quiet --no-skip --cases tests/sim/cases_mla_sm100.txt
    step "sm90a attention backward, seed $seed" env FA4SIM_SEED=$seed FA4SIM_CC=90 \
        $B/sim/sim_bwd --quiet --seed $seed --cases tests/sim/cases_bwd_sm90.txt
    step "sm100a attention backward, seed $seed" env FA4SIM_SEED=$seed FA4SIM_CC=100 \
        $B/sim/sim_bwd --quiet --seed $seed --cases tests/sim/cases_bwd_sm100.txt
}
(seed_steps 1 > "$work/out.1") &
(seed_steps 2 > "$work/out.2") &
wait
(seed_steps $random_seed > "$work/out.3") &
[ -f tests/sim/mutants.sh ] && (log=$work/log.mut; step "mutants" sh tests/sim/mutants.sh > "$work/out.4"
    step "mutants (backward)" sh tests/sim/mutants_bwd.sh >> "$work/out.4") &
wait
for f in "$work/out.1" "$work/out.2" "$work/out.3" "$work/out.4"; do
    [ -f "$f" ] || continue
    cat "$f"
    pass=$((pass + $(grep -c '^ok ' "$f"))); fail=$((fail + $(grep -c '^FAILED ' "$f")))
done
[ -f tests/sim/mutants.sh ] && [ ! -s "$work/out.4" ] && { echo "FAILED mutants printed nothing"; fail=$((fail + 1)); }
for s in 1 2 $random_seed; do
    if [ -z "$anchor" ] || [ "$(grep -c 'cmp_o=' "$work/mha90.log.$s" 2>/dev/null)" -lt 20 ]; then
        echo "FAILED the H100 MHA anchor is missing or compared fewer than 20 cases (seed $s)"; fail=$((fail + 1))
    fi
    if [ -z "$mla_anchor" ] || [ "$(grep -c 'cmp_o=' "$work/mla90.log.$s" 2>/dev/null)" -lt 20 ]; then
        echo "FAILED the H100 sparse MLA anchor is missing or compared fewer than 20 cases (seed $s)"; fail=$((fail + 1))
    fi
done
echo "sim suite: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
