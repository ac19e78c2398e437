#!/bin/sh
# tests/sim/mutants_bwd.sh - mutation tests of the attention backward on the simulator: proof that
# tests/sim/sim_bwd.c and the simulator catch a broken mha-bwd kernel.
#
# The sm_90a d128, d64 (bm 64) and d256 causal main kernels and the sm_100a d128 and d64 ones (the configs sim_bwd's cases
# run; cc 9.0 or 10.0 by the config's target) are generated, one line is changed (a deleted
# fence, barrier or wait, a wrong transpose or byte count), ptxas must still assemble the mutant, and the case
# runs with FA4SIM_PTX_REPLACE=mutant (tests/sim/cuda.c): it must FAIL (a simulator report -- hazard, deadlock,
# fault -- or a numeric mismatch). The unmutated kernel must PASS first.
# Not here: the dQ block's handshake between the writer and the consumers (dq_empty wait, wait_group.read):
# breaking it races only when a bulk reduction stays in flight for a whole m-block, and the simulator
# completes async ops within a few scheduler steps (sim.c max_latency), so no seed draws it.
#
#   sh tests/sim/mutants_bwd.sh        (needs build/fa4gen, build/sim/libcuda.so.1, build/sim/sim_bwd)
# Prints `caught NAME: how` or `MISSED NAME` per mutant, then `mutants_bwd: N passed, N failed`.
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$(pwd)
for f in build/fa4gen build/sim/sim_bwd build/sim/libcuda.so.1; do
    [ -f "$f" ] || { echo "mutants_bwd: $f missing"; exit 2; }
done
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fa4mutbwd.XXXXXX") || exit 2
trap 'rm -rf "$WORK"' EXIT
PTXAS=${PTXAS:-$(command -v ptxas || echo "${CUDA_HOME:-/usr/local/cuda}/bin/ptxas")}
run() { # run PTX: the case with PTX in place of the kernel; output in $WORK/out
    FA4GEN_COMPILER=driver-ptx FA4GEN_CACHE_DIR="$WORK/cache" FA4SIM_CC=$CC FA4SIM_SEED=${MUTANTS_SEED:-1} \
        FA4SIM_PTX_REPLACE="$1" LD_LIBRARY_PATH="$ROOT/build/sim" timeout 300 build/sim/sim_bwd $CASE \
        >"$WORK/out" 2>"$WORK/err"
}
# base CASE CONFIG: the kernel the next mutants change; it must pass unmutated
base() {
    CASE=$1 CONFIG=$2
    case "$CONFIG" in *target=sm100a*) CC=100 ARCH=sm_100a ;; *) CC=90 ARCH=sm_90a ;; esac
    build/fa4gen "${CONFIG%% *}" --config "$CONFIG" -o "$WORK/k.ptx" || exit 2
    rm -rf "$WORK/cache"
    if ! run "$WORK/k.ptx" || ! grep -q '^PASS' "$WORK/out"; then
        echo "mutants_bwd: the unmutated kernel fails"; cat "$WORK/out" "$WORK/err" | head; exit 2
    fi
    echo "unmutated: PASS ($CONFIG)"
}
pass=0 fail=0
# mutant NAME ANCHOR PATTERN OP [FROM TO]: the first line matching the ERE PATTERN after the first line
# matching ANCHOR (an empty ANCHOR: from the top) deleted (OP del) or edited by sub(FROM, TO) (OP sub).
mutant() {
    name=$1 anchor=$2 pat=$3 op=$4 from=${5:-} to=${6:-}
    ANCHOR=$anchor PAT=$pat OP=$op FROM=$from TO=$to awk '
        BEGIN { armed = ENVIRON["ANCHOR"] == ""; done = 0 }
        { line = $0 }
        !armed && index(line, ENVIRON["ANCHOR"]) { armed = 1; print; next }
        armed && !done && line ~ ENVIRON["PAT"] {
            done = 1
            if (ENVIRON["OP"] == "del") line = "    // mutant: deleted"
            else sub(ENVIRON["FROM"], ENVIRON["TO"], line)
        }
        { print line }
        END { if (!done) exit 3 }' "$WORK/k.ptx" >"$WORK/$name.ptx" || { echo "MISSED $name: did not apply"; fail=$((fail + 1)); return; }
    if cmp -s "$WORK/k.ptx" "$WORK/$name.ptx"; then echo "MISSED $name: no change"; fail=$((fail + 1)); return; fi
    if ! "$PTXAS" -arch=$ARCH "$WORK/$name.ptx" -o "$WORK/m.cubin" >"$WORK/ptxas.log" 2>&1; then
        echo "MISSED $name: ptxas rejects it"; fail=$((fail + 1)); return
    fi
    rm -rf "$WORK/cache"
    if run "$WORK/$name.ptx" && grep -q '^PASS' "$WORK/out"; then
        echo "MISSED $name"; fail=$((fail + 1))
    else
        how=$(grep -m1 -E 'hazard|deadlock|fault|HAZARD|DEADLOCK|FAULT' "$WORK/err" "$WORK/out" | cut -c1-110)
        [ -n "$how" ] || how=$(grep -m1 '^FAIL' "$WORK/out" | sed 's/.*mask=causal//' | cut -c1-110)
        echo "caught $name: $how"; pass=$((pass + 1))
    fi
}
base "dtype=bf16 d=128 hq=2 hkv=1 sq=200 sk=640 mask=causal" \
    "mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=128 group=2 stages=2 swizzle=128 mask=causal"
mutant ds_fence "dS^T to smem" 'fence\.proxy\.async' del
mutant ds_barrier "named barrier ds_ready" 'bar\.sync 1, 256' del
mutant s_wait "S^T is ready once" 'wgmma\.wait_group\.sync\.aligned 1' del
mutant all_wait "plan note dq wgmma);" 'wgmma\.wait_group\.sync\.aligned 0' del
mutant dq_fence "dQ to smem once" 'fence\.proxy\.async' del
mutant dq_tnsp_a "dQ = dS K:" 'wgmma\.mma_async' sub ' 1, 1, 1, 1;' ' 1, 1, 0, 1;'
mutant dkv_tnsp_b "dV += P^T dO" 'wgmma\.mma_async' sub ', 1, 1, 1, 1;' ', 1, 1, 1, 0;'
mutant q_tx "Q + nl2: wait for the slot" 'expect_tx' sub '16640;' '16624;'
mutant kv_done "named barrier kv_done" 'bar\.sync 2, 256' del
mutant q_release "the Q and dO slots are free" 'mbarrier\.arrive' del
# d64 with bm 64: the dQ tile is m64n32, so consumer 1's B (K) starts half a chunk into the swizzled rows
base "dtype=bf16 d=64 hq=2 hkv=2 sq=130 sk=200 mask=causal config=bm=64" \
    "mha-bwd target=sm90a dtype=bf16 qk=64 ov=64 bm=64 bn=128 group=1 stages=2 swizzle=128 mask=causal"
mutant d64_dq_half_chunk "dQ's B: K from column" 'mad\.lo\.u32 %cs_dq_k, %cs_dq_t, 2,' del
# the soft-cap's derivative (plan note softcap): dS takes P (1 - t^2), 1 - t^2 clamped at 0 where the mask set t = -inf
base "dtype=bf16 d=128 hq=2 hkv=2 sq=200 sk=200 mask=causal softcap=5 amp=3" \
    "mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=128 group=1 stages=2 swizzle=128 softcap=1 mask=causal"
mutant softcap_factor "plan note softcap: per pair" 'mul\.f32 %sc_g0, %s0, %sc_g0;' sub 'mul\.f32 %sc_g0, %s0, %sc_g0;' 'mov.f32 %sc_g0, %s0;'
mutant softcap_clamp "plan note softcap: per pair" 'max\.f32 %sc_g0' del
mutant softcap_tanh "plan note softcap: t = tanh" 'tanh\.approx\.f32 %s0,' del
# d256 (plan split_depth, sm90/mha_bwd_depth.c): P and dS exchanged through smem, dQ by red from registers
base "dtype=bf16 d=256 hq=2 hkv=1 sq=200 sk=200 mask=causal" \
    "mha-bwd target=sm90a dtype=bf16 qk=256 ov=256 bm=64 bn=64 group=2 stages=2 swizzle=128 mask=causal"
mutant d256_p_fence "P to 16-bit pairs" 'fence\.proxy\.async' del
mutant d256_p_barrier "P columns are in smem" 'bar\.sync 1, 256' del
mutant d256_ds_fence "dS = P (dP - D), D = rowsum" 'fence\.proxy\.async' del
mutant d256_ds_barrier "dS columns are in smem" 'bar\.sync 2, 256' del
mutant d256_dp_wait "dP is ready once the group before dV" 'wgmma\.wait_group\.sync\.aligned 1' del
mutant d256_dq_wait "dQ is ready once its group" 'wgmma\.wait_group\.sync\.aligned 1' del
mutant d256_all_wait "plan note dq: dQ +=" 'wgmma\.wait_group\.sync\.aligned 0' del
mutant d256_dv_tnsp_a "dV += P^T dO:" 'wgmma\.mma_async' sub ', 1, 1, 1, 1;' ', 1, 1, 0, 1;'
mutant d256_dq_tnsp_b "dQ = dS K:" 'wgmma\.mma_async' sub ', 0, 1, 1, 0, 1;' ', 0, 1, 1, 0, 0;'
mutant d256_red_layout "plan note dq: dQ +=" 'red\.global' sub '\+0\]' '+16]'
mutant d256_q_release "the Q and dO slots are free" 'mbarrier\.arrive' del
# deterministic=1: the turn counters; sim_bwd calls twice with 4 clusters resident (runs=2 resident=4) and wants the
# f32 dQ sums bit for bit the same, so a kernel that adds out of turn fails as soon as two calls interleave differently
base "dtype=bf16 d=128 hq=2 hkv=1 sq=64 sk=512 mask=none det=1 runs=2 resident=4" \
    "mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=128 group=2 stages=2 swizzle=128 deterministic=1 mask=none"
mutant det_no_wait "wait for rank x" 'setp\.ge\.u32 %dt_go' sub '%dt_want;' '0;'
mutant det_no_release "the next kv block's turn" 'red\.release\.gpu' del
base "dtype=bf16 d=256 hq=2 hkv=1 sq=64 sk=256 mask=none det=1 runs=2 resident=4" \
    "mha-bwd target=sm90a dtype=bf16 qk=256 ov=256 bm=64 bn=64 group=2 stages=2 swizzle=128 deterministic=1 mask=none"
mutant d256_det_no_wait "wait for rank x" 'setp\.ge\.u32 %dt_go' sub '%dt_want;' '0;'
mutant d256_det_no_turn_barrier "plan note deterministic: thread 0" 'bar\.sync %cs_turn_bar' del
mutant d256_det_no_done_barrier "every thread's adds are done" 'bar\.sync %cs_turn_bar' del
mutant d256_det_no_release "every thread's adds are done" 'red\.release\.gpu' del
# tail_split=1 (mha_bwd.h "Tail split"): on the simulator's 4 SMs the runtime splits the last of 6 tiles of 32
# iterations over 2 CTAs each (first 4), 4 clusters resident so a tile's parts run side by side
base "dtype=bf16 d=128 hq=2 hkv=2 sq=2048 sk=300 mask=none resident=4" \
    "mha-bwd target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=128 group=1 stages=2 swizzle=128 tail_split=1 mask=none"
mutant tail_no_sums "the last part: its lead waits" 'add\.f32 %dk0, %dk0, %tl_t0;' del
mutant tail_range "this part's iterations" 'div\.u32 %it0' del
mutant tail_slot "slot of the tile" 'mul\.wide\.u32 %tl_slot' sub '%tail_slot,' '%tail_part,'
mutant tail_no_release "not the last part" 'red\.release\.gpu' del
mutant tail_no_wait "the last part: its lead waits" 'setp\.ge\.u32 %tl_go' sub '%tl_want;' '0;'
# its pre kernel zeroes the partials' area (the caller's dq, poisoned by sim_bwd before each call)
base "dtype=bf16 d=128 hq=2 hkv=2 sq=2048 sk=300 mask=none" \
    "mha-bwd-pre target=sm90a dtype=bf16 qk=128 bm=64 tail_split=1"
mutant tail_no_zero "plan note tail split: the split tiles' area zeroed" 'st\.global\.v4\.f32' del
# sm_100a (gen/sm100/mha_bwd.c): TMEM accumulators, P^T and dS^T through smem, dQ^T (bm 64) by red.global.add
base "dtype=bf16 d=128 hq=2 hkv=1 sq=200 sk=300 mask=causal" \
    "mha-bwd target=sm100a dtype=bf16 qk=128 ov=128 bm=64 bn=128 group=2 stages=2 swizzle=128 mask=causal"
mutant b100_p_fence "P^T rows visible to the MMA" 'fence\.proxy\.async' del
mutant b100_ds_fence "dS^T rows visible to the MMA" 'fence\.proxy\.async' del
# the dV MMA waits on dP^T's barrier (just before p_full in the smem map) instead of P^T's
mutant b100_p_wait "dV += P^T dO:" 'add\.u32 %mm_bar, %smem' sub '164968;' '164960;'
mutant b100_s_ld_wait "S^T columns 0..31" 'tcgen05\.wait::ld' del
mutant b100_p_st_wait "the f32 P pieces are in TMEM" 'tcgen05\.wait::st' del
mutant b100_dkv_major "" 'mov\.u32 %mm_id_dkv' sub '0x0821' '0x0820'
mutant b100_dq_layout "dQ block of" 'red\.global' sub '\+0\]' '+4]'
# (not here: the epilogue's kv_done wait; once the last m-block's dq_full landed, every MMA has completed, so
# removing it changes nothing; it matters only for the plan's order, were dQ issued before dK)
# d64: bm 128, dQ = dS K (a query per TMEM lane, red.global.add.v2)
base "dtype=bf16 d=64 hq=2 hkv=2 sq=300 sk=200 mask=causal" \
    "mha-bwd target=sm100a dtype=bf16 qk=64 ov=64 bm=128 bn=128 group=1 stages=2 swizzle=128 mask=causal"
mutant b100_d64_dq_pair "dQ block of" 'red\.global\.add\.v2' sub '\+0\]' '+8]'
mutant b100_d64_mask "mask: key j" 'sub\.s32 %cp_lo, %cp_lo, %cp_q0' del
mutant b100_d64_q_release "nl2 read: the Q slot" 'mbarrier\.arrive' del
# sm_100a soft-cap: the P that dS takes (f32, over S^T) has the factor 1 - t^2, clamped at 0 where the mask set t = -inf
base "dtype=bf16 d=128 hq=2 hkv=2 sq=200 sk=200 mask=causal softcap=5 amp=3" \
    "mha-bwd target=sm100a dtype=bf16 qk=128 ov=128 bm=64 bn=128 group=1 stages=2 swizzle=128 softcap=1 mask=causal"
mutant b100_softcap_factor "S^T columns 0..31" 'mul\.f32 %cp_x0, %cp_x0, %cp_g0;' sub 'mul\.f32 %cp_x0, %cp_x0, %cp_g0;' 'mov.f32 %cp_x0, %cp_x0;'
mutant b100_softcap_tanh "plan note softcap: t = tanh" 'tanh\.approx\.f32 %cp_x0,' del
mutant b100_softcap_clamp "S^T columns 32..63" 'max\.f32 %cp_g0' del
# sm_100a deterministic=1: compute thread 0's turn wait and release, the compute warps' barrier before the reds.
# (Not here: the barrier after the reds. Without it thread 0 may release while another compute warp still adds, a
# window of a few instructions that no seed of the simulator's scheduler opened: that mutant survives.)
base "dtype=bf16 d=128 hq=2 hkv=1 sq=64 sk=512 mask=none det=1 runs=2 resident=4" \
    "mha-bwd target=sm100a dtype=bf16 qk=128 ov=128 bm=64 bn=128 group=2 stages=2 swizzle=128 deterministic=1 mask=none"
mutant b100_det_no_wait "wait for rank x" 'setp\.ge\.u32 %dt_go' sub '%dt_want;' '0;'
mutant b100_det_no_turn_barrier "compute thread 0 waits for this kv block's turn" 'bar\.sync' del
mutant b100_det_no_release "every thread's adds are done" 'red\.release\.gpu' del
# sm_100a CTA pair (cta=2): dS^T halves into both CTAs' DSX (the dQ^T MMA's B), the proxy fence before ds_full, the
# dQ^T lane's query half (layout B: lanes 64..127 hold queries 32..63)
base "dtype=bf16 d=128 hq=2 hkv=1 sq=200 sk=300 mask=causal config=cta=2" \
    "mha-bwd target=sm100a dtype=bf16 qk=128 ov=128 bm=64 bn=128 group=2 stages=2 swizzle=128 cta=2 mask=causal"
mutant b100_pair_dsx_peer "queries 32..63 into CTA 1's DSX" 'st\.shared::cluster' del
mutant b100_pair_ds_fence "dS^T rows visible to the MMA" 'fence\.proxy\.async' del
mutant b100_pair_dq_half "plan note dq: this lane's depth column" 'shr\.u32 %cp_sx' del
echo "mutants_bwd: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
