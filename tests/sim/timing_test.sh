#!/bin/sh
# tests/sim/timing_test.sh - the timing mode's own checks (make sim-test step `timing`): a fixed small
# sm90a case predicted twice (and under another scheduler seed) gives the same line; a table with half the
# tensor-core rate predicts a longer time, one with a missing key is refused; the line names its units; the
# latencies h200.tbl derives from microbenchmarks replay to the measured values, and so do the gather rate and the
# integer division's cost; a decode kernel's L2 prefetches are priced; a programmatic dependent launch pays the PDL
# gap; ready warps alternate and wgmmas in flight slow the other warps' instructions; a dynamic grid's sampled CTAs take
# a stride's tiles.
# Prints `timing: N passed, N failed`. Needs build/sim/libcuda.so.1 and build/sim/timecase.
set -u
cd "$(dirname "$0")/../.."
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
export FA4GEN_COMPILER=driver-ptx FA4GEN_CACHE_DIR="$w/cache" LD_LIBRARY_PATH="$PWD/build/sim" FA4SIM_CC=90
case1="kind=mha batch=1 sq=128 sk=512 hq=1 qk=64"
pass=0; fail=0
ok() { if [ "$1" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $2"; fi; }
pred() { FA4SIM_TIMING=$1 build/sim/timecase $case1 2>&1 | grep '^fa4sim-timing' | head -1; }
a=$(pred h100); b=$(pred h100); c=$(FA4SIM_SEED=7 pred h100)
echo "$a"
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ]; ok $? "deterministic: the same case predicted twice and under another seed"
us() { echo "$1" | sed 's/.*predicted_us=\([0-9.]*\).*/\1/'; }
echo "$a" | grep -q 'bottleneck=[a-z0-9]* util: issue=.* tc=.* tma='; ok $? "the line names the bottleneck and each unit"
sed 's/^tc_macs .*/tc_macs 1024 derived half the rate (test)/' tests/sim/gpus/h100.tbl > "$w/slow.tbl"
d=$(pred "$w/slow.tbl")
awk -v x="$(us "$a")" -v y="$(us "$d")" 'BEGIN { exit !(y > x * 1.05) }'; ok $? "half the tensor rate: $(us "$a") -> $(us "$d") us must grow"
grep -v '^mufu_lat' tests/sim/gpus/h100.tbl > "$w/bad.tbl"
FA4SIM_TIMING="$w/bad.tbl" build/sim/timecase $case1 > "$w/bad.out" 2>&1
grep -q 'key mufu_lat missing' "$w/bad.out"; ok $? "a table without mufu_lat is refused"
for g in h100 b200; do
    FA4SIM_TIMING=$g FA4SIM_CC=$([ $g = b200 ] && echo 100 || echo 90) build/sim/timecase --iters 1 kind=mha batch=1 sq=1 sk=1 hq=1 \
        target=$([ $g = b200 ] && echo sm100a || echo sm90a) > /dev/null 2>&1; ok $? "the $g table loads and a 1x1 case predicts"
done
# the microbenchmark-derived latencies of h200.tbl: the model replaying each benchmark's PTX reads its measurement
# (tma_lat 803.5, mbar_wake 83.0 measured on the H200 in run 9; tests/sim/mb_replay.py), within 1%
python3 tests/sim/mb_replay.py tests/sim/gpus/h200.tbl "$w/mb" > "$w/mb.out" 2>&1
awk '$1 == "tma_lat" { t = $7 } $1 == "mbar_wake" { m = $7 } END { exit !(t > 795 && t < 812 && m > 82 && m < 84) }' "$w/mb.out"
ok $? "h200.tbl's tma_lat and mbar_wake replay to their measurements: $(awk '{ printf "%s %s ", $1, $7 }' "$w/mb.out")"
# the cp.async gather rate (cpa_sm_bw) as the model charges it: the gather microbenchmark's replay reads the
# table's value within 10%. Not closer: the replay of this loop (2 blocks in flight, 128 threads) jumps with the
# clock rounding of its ready times, 107.6-118.8 B/clk for cpa_sm_bw 120.5-122.0 (run 9 measured 121.7, run 19 121.5)
awk '$1 == "cpa_sm_bw" { r = $7; t = $4 } END { exit !(t > 0 && r > 0.90 * t && r < 1.10 * t) }' "$w/mb.out"
ok $? "the gather microbenchmark replays to h200.tbl's cpa_sm_bw: $(awk '$1 == "cpa_sm_bw" { print $4 " -> " $7 }' "$w/mb.out")"
# the soft-cap probe (88 independent spliced tanh chains a thread): with ptxas's interleaving approximated the model
# reads 2178 clocks a pass (H200 run 5 measured 3244); issuing in PTX order it read 8191
awk '$1 == "softcap" { r = $5 } END { exit !(r > 0 && r < 4500) }' "$w/mb.out"
ok $? "the soft-cap probe's replay interleaves its chains: $(awk '$1 == "softcap" { print $5 }' "$w/mb.out") clk/pass (< 4500)"
# a 32-bit integer division (idiv_clk, mb_idiv on the H200 in run 58: 35.76 clocks a warp division, 8 chains a thread
# each its own divisor): the replay of the probe reads the table's value within 3% -- the model charges ptxas's
# sequence (18 issue slots, the MUFU unit for idiv_clk) and lets independent divisions overlap as ptxas interleaves them
awk '$1 == "idiv_clk" { t = $4; r = $7 } END { exit !(t > 0 && r > 0.97 * t && r < 1.03 * t) }' "$w/mb.out"
ok $? "the division probe replays to h200.tbl's idiv_clk: $(awk '$1 == "idiv_clk" { print $4 " -> " $7 }' "$w/mb.out")"
# the wgmma SS rate by width (tc_frac_nN, measured on the H200 in run 7): each mb_wgmma_nN replay reads the table's
# fraction within 2%, and a narrow QK tile (bn 32: m64n32k16 at 0.62 of the N 256 rate) predicts slower than the
# same table with every fraction 1
awk '$1 ~ /^tc_frac_n/ { n++; if (!($4 > 0 && $7 > 0.98 * $4 && $7 < 1.02 * $4)) bad++ } END { exit !(n == 6 && !bad) }' "$w/mb.out"
ok $? "the narrow-N wgmma benchmarks replay to h200.tbl's tc_frac_nN: $(awk '$1 ~ /^tc_frac_n/ { printf "%s %s ", $4, $7 }' "$w/mb.out")"
# the st.global probes (mb_st_frag: 8 lines x 16 B a warp instruction; mb_st_line: 128 contiguous bytes; H200 run 8):
# each replays to the clocks its table value stands for (8 x st_line, 128 / st_bw) within 2%
awk '$1 ~ /^st_(line|bw)$/ { n++; if (!($4 > 0 && $7 > 0.98 * $4 && $7 < 1.02 * $4)) bad++ } END { exit !(n == 2 && !bad) }' "$w/mb.out"
ok $? "the st.global benchmarks replay to h200.tbl's st_line and st_bw: $(awk '$1 ~ /^st_(line|bw)$/ { printf "%s %s ", $4, $7 }' "$w/mb.out")"
# the tensor pipe shared among warpgroups (mb_wgmma_pair, H200 run 9: 1080 / 1073 clocks a round, both after ~8
# wgmmas' time): the replay's two warpgroups finish within 2% of each other (first come, first served: 671 / 1245)
awk '$1 == "pair" { a = $5; b = $7; exit !(a > 0 && b > 0 && a > 0.98 * b && a < 1.02 * b) }' "$w/mb.out"
ok $? "two warpgroups' wgmma groups issued together finish together (shared pipe): $(awk '$1 == "pair" { print $5 " / " $7 }' "$w/mb.out")"
# FMA runs beside wgmmas (mb_wgmma_beside, H200 run 9b: 1, 2 FMUL chains a warp 1.00x; 4, 16 chains 2.83x): the replay
# leaves the sparse chains free and slows the wgmmas at least 2x beside the unbroken runs
awk '$1 == "beside" { c1 = $(NF-9); c2 = $(NF-8); c4 = $(NF-7); c16 = $(NF-6); gsub("x", "", c1); gsub("x", "", c2); gsub("x", "", c4); gsub("x", "", c16)
                      exit !(c1 < 1.02 && c2 < 1.02 && c4 > 2 && c16 > 2) }' "$w/mb.out"
ok $? "FMA runs beside wgmmas: $(awk '$1 == "beside" { print $(NF-9), $(NF-8), $(NF-7), $(NF-6) }' "$w/mb.out") for 1, 2, 4, 16 chains"
# ready warps alternate (mb_share_fma / _mufu, H200 run 20: the two warps of each sub-partition ended within 0.1% / 5%):
# in the replay the latest of the eight warps ends within 2% of the earliest, for both probes
awk '$1 == "share" { lo = 1e30; hi = 0; for (i = 9; i <= 16; i++) { if ($i < lo) lo = $i; if ($i > hi) hi = $i }
                     if (!(lo > 0 && hi < 1.02 * lo)) bad = 1; n++ } END { exit !(n == 2 && !bad) }' "$w/mb.out"
ok $? "two always-ready warps a sub-partition share its issue: $(awk '$1 == "share" { printf "%s: %s..%s ", $2, $9, $16 }' "$w/mb.out")"
# wgmmas in flight slow the other warps (mb_softmax_beside, H200 run 22: the softmax 1.45x slower, the wgmmas not): the
# replay's softmax beside them is at least 1.15x its time alone, the wgmma iteration beside it under 1.15x its time alone
awk '$2 == "mb_softmax" { alone = $5 } $2 == "mb_softmax_beside" { besd = $5; it = $12 } $1 == "beside" { walone = $5 }
     END { exit !(alone > 0 && besd > 1.15 * alone && walone > 0 && it < 1.15 * walone) }' "$w/mb.out"
ok $? "the softmax beside wgmmas: $(awk '$2 == "mb_softmax" { printf "%s alone, ", $5 } $2 == "mb_softmax_beside" { printf "%s beside, wgmmas %s", $5, $12 }' "$w/mb.out")"
# FA4SIM_TC_QUEUE=8 (opt-in: wgmmas first come, first served, 8 accepted an SM; mb_wgmma_issue, H200 run 23: 1119 clocks
# to issue a QK-sized group behind the other warpgroup's, 1582 to its end): the replay's issue waits, its end follows
FA4SIM_TC_QUEUE=8 python3 tests/sim/mb_replay.py tests/sim/gpus/h200.tbl "$w/mb" > "$w/mbq.out" 2>&1
awk '$1 == "issue" && $2 == "mb_wgmma_issue" { i = $5; e = $16 } END { exit !(i > 500 && e > 1400) }' "$w/mbq.out" &&
    awk '$1 == "issue" && $2 == "mb_wgmma_issue" { exit !($5 < 100) }' "$w/mb.out"
ok $? "the wgmma issue queue (FA4SIM_TC_QUEUE=8): $(awk '$2 == "mb_wgmma_issue" { print $5 " clk to issue" }' "$w/mbq.out"), without it $(awk '$2 == "mb_wgmma_issue" { print $5 }' "$w/mb.out")"
case32="kind=mha batch=1 sq=256 sk=1024 hq=2 qk=128 config=\"bn=32 stages=3\""
sed 's/^\(tc_frac_n[0-9]*\) .*/\1 1 derived the N 256 rate (test)/' tests/sim/gpus/h200.tbl > "$w/flat.tbl"
n32=$(eval FA4SIM_TIMING=tests/sim/gpus/h200.tbl build/sim/timecase $case32 2>&1 | grep '^fa4sim-timing' | head -1)
f32=$(eval FA4SIM_TIMING="$w/flat.tbl" build/sim/timecase $case32 2>&1 | grep '^fa4sim-timing' | head -1)
awk -v x="$(us "$f32")" -v y="$(us "$n32")" 'BEGIN { exit !(x > 0 && y > x * 1.02) }'
ok $? "bn 32 at the measured narrow-N rate: $(us "$f32") -> $(us "$n32") us must grow"
# the L2 prefetch before griddepcontrol.wait (split-KV decode, prefetch=N blocks; pf_bw, pf_gbs, pf_head_us from the PDL probe,
# H200 run 12): prefetch=0 names no prefetched bytes; prefetch=8 names them and moves the launch's DRAM bound (its bytes at
# pf_gbs, less the head start); with pf_gbs = hbm_gbs and no head start (a test table) the bound is prefetch=0's again
dec="kind=mha batch=1 sq=1 sk=4096 hq=16 hkv=2 qk=128 splits=4"
dline() { FA4SIM_TIMING=$1 build/sim/timecase $dec config=prefetch=$2 2>&1 | grep '^fa4sim-timing: fa4_mha' | head -1; }
hbm() { echo "$1" | sed 's/.*hbm_us=\([0-9.]*\).*/\1/'; }
sed 's/^pf_head_us .*/pf_head_us 1e-9 derived none (test)/; s/^pf_gbs .*/pf_gbs 4479 derived = hbm_gbs (test)/' tests/sim/gpus/h200.tbl > "$w/pf.tbl"
p0=$(dline tests/sim/gpus/h200.tbl 0); p8=$(dline tests/sim/gpus/h200.tbl 8); q8=$(dline "$w/pf.tbl" 8)
! echo "$p0" | grep -q l2_prefetch_mb && echo "$p8" | grep -q 'l2_prefetch_mb=[1-9]' &&
    awk -v a="$(hbm "$p0")" -v b="$(hbm "$p8")" -v c="$(hbm "$q8")" 'BEGIN { exit !(a > 0 && b != a && c == a) }'
ok $? "decode prefetch=8 prices its L2 prefetches: hbm_us $(hbm "$p0") -> $(hbm "$p8") ($(hbm "$q8") at pf_gbs = hbm_gbs, no head start)"
# the stream's gap after the previous kernel (the PDL probe, H200 run 19): every forward kernel is a programmatic dependent
# launch, charged gap_pdl_us; a table with gap_pdl_us 10 us more moves its prediction by exactly that, launch_us not at all
sed 's/^gap_pdl_us .*/gap_pdl_us 10.7509 derived run 19 + 10 (test)/' tests/sim/gpus/h200.tbl > "$w/gap.tbl"
sed 's/^launch_us .*/launch_us 12.423 derived run 19 + 10 (test)/' tests/sim/gpus/h200.tbl > "$w/plain.tbl"
g0=$(pred tests/sim/gpus/h200.tbl); g1=$(pred "$w/gap.tbl"); g2=$(pred "$w/plain.tbl")
awk -v a="$(us "$g0")" -v b="$(us "$g1")" -v c="$(us "$g2")" 'BEGIN { exit !(a > 0 && b - a > 9.99 && b - a < 10.01 && c == a) }'
ok $? "a PDL launch pays gap_pdl_us, not launch_us: $(us "$g0") -> $(us "$g1") us (gap_pdl_us + 10), $(us "$g2") (launch_us + 10)"
# the DRAM bound shared by uneven places (dram_us): B64 H16 S256 d128 causal is at the DRAM bound either way; the
# L2-group stride (head_major=0) leaves its busiest CTA 1.13x the mean, the walk 1.03x (counted), and on the H200
# the stride took 4.6% longer (run 44). With the bound shared, the stride's grid ends later than the bound and
# than the walk's; a bare maximum of the makespan and the bound read both at the bound. Both static (dynamic=0: the
# runtime's rule gives these heads of two m-blocks the counter, whose balancing the model does not price).
du() { echo "$1" | sed 's/.*dram_us=\([0-9.]*\).*/\1/'; }
sline() { FA4SIM_TIMING=tests/sim/gpus/h200.tbl FA4SIM_TIMING_SAMPLES=8 build/sim/timecase kind=mha batch=64 sq=256 sk=256 hq=16 qk=128 mask=causal config="$1" 2>&1 | grep '^fa4sim-timing: fa4_mha' | head -1; }
uw=$(sline "head_major=1 dynamic=0"); us0=$(sline "head_major=0 dynamic=0")
awk -v d="$(du "$us0")" -v h="$(hbm "$us0")" -v w="$(us "$uw")" -v s="$(us "$us0")" \
    'BEGIN { exit !(h > 0 && d > h * 1.02 && s > w * 1.02) }'
ok $? "uneven CTAs share the DRAM bound: the stride's dram_us $(du "$us0") against hbm_us $(hbm "$us0"); predicted $(us "$us0") us against the walk's $(us "$uw")"
# a dynamic kernel's tile counter under sampling (sim.c atom_timed): a sampled CTA takes a plain stride's tiles, as
# the grid's CTAs taking turns at the counter hand them out, not every tile the counter holds (16 tiles on 4 SMs:
# alone at the counter, CTA 0 would take 13, the launch predicted ~3x longer)
dyn() { FA4SIM_SMS=4 FA4SIM_TIMING=tests/sim/gpus/h200.tbl build/sim/timecase kind=mha batch=2 sq=512 sk=512 hq=2 qk=128 config="$1" 2>&1 | grep '^fa4sim-timing: fa4_mha' | head -1; }
ds=$(dyn "head_major=0"); dd=$(dyn "head_major=0 dynamic=1")
awk -v s="$(us "$ds")" -v d="$(us "$dd")" 'BEGIN { exit !(s > 0 && d > 0.98 * s && d < 1.03 * s) }'
ok $? "a dynamic grid's sampled CTAs take the stride's tiles: $(us "$dd") us against the static stride's $(us "$ds")"
echo "timing: $pass passed, $fail failed"
[ "$fail" = 0 ]
