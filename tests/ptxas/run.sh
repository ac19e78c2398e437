#!/bin/sh
# tests/ptxas/run.sh FA4GEN - every config of the sm_90a test matrix assembles
# with `ptxas -arch=sm_90a`, with 0 spill bytes, no ignored setmaxnreg (C7508)
# and no wgmma serialisation (C7514), and uses the registers the plan says.
# Runs the sm_100a matrix too when its script exists. Prints 'N passed, N failed'.
set -u
. "$(dirname "$0")/lib.sh"
matrix_setup "$@"

# The matrix: depth x dtype x mask x group x swizzle x stages (+ bm 192 and bn variants).
list=$dir/list
for d in 64 128 256; do for t in bf16 fp16; do for m in none causal window:64,0; do
  for g in 1 4; do for sw in 32 64 128; do for st in 2 3; do
    [ "$d" = 256 ] && [ "$st" = 3 ] && continue
    [ "$d" = 256 ] && [ "$sw" = 32 ] && continue
    echo "mha target=sm90a dtype=$t qk=$d ov=$d group=$g stages=$st swizzle=$sw mask=$m"
  done; done; done
done; done; done > "$list"
cat >> "$list" <<'L'
mha target=sm90a dtype=bf16 qk=64 ov=64 bm=192 bn=128 mask=causal
mha target=sm90a dtype=fp16 qk=128 ov=128 bm=192 bn=80 mask=none
mha target=sm90a dtype=bf16 qk=128 ov=128 bn=176 mask=none
mha target=sm90a dtype=fp16 qk=128 ov=128 bn=64 stages=4 mask=causal
mha target=sm90a dtype=bf16 qk=256 ov=256 bn=64 mask=causal
mha target=sm90a dtype=bf16 qk=64 ov=64 poly=25 mask=causal
mha target=sm90a dtype=fp16 qk=128 ov=128 poly=12 rescale=0 mask=none
mha target=sm90a dtype=bf16 qk=128 ov=128 bm=64 mask=causal
mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 mask=none
mha target=sm90a dtype=fp16 qk=128 ov=128 bn=128 persistent=1 mask=causal
mha target=sm90a dtype=bf16 qk=64 ov=64 bm=128 persistent=1 mask=causal
mha target=sm90a dtype=bf16 qk=64 ov=64 bm=64 bn=64 mask=none
mha target=sm90a dtype=bf16 qk=128 ov=128 bn=128 store_wait=1 coords_late=1 mask=none
mha target=sm90a dtype=bf16 qk=64 ov=64 bm=64 bn=64 occupancy=2 mask=none
mha target=sm90a dtype=fp16 qk=64 ov=64 bm=64 bn=128 persistent=1 occupancy=2 mask=causal
mha target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=64 group=4 persistent=1 occupancy=2 mask=causal
mha target=sm90a dtype=bf16 qk=256 ov=256 bn=48 mask=none
mha target=sm90a dtype=fp16 qk=256 ov=256 bn=48 group=4 persistent=1 mask=causal
mla-sparse target=sm90a dtype=bf16 qk=576
mla-sparse target=sm90a dtype=bf16 qk=512
mla-sparse target=sm90a dtype=bf16 qk=576 rescale=0
mla-sparse target=sm90a dtype=bf16 qk=576 tma_store=0
mla-sparse target=sm90a dtype=bf16 qk=512 tma_store=0
L

check() {
    cfg=$1; n=$2
    ptx=$dir/k$n.ptx
    if ! "$FA4GEN" "${cfg%% *}" --config "$cfg" -o "$ptx" 2>"$dir/e$n"; then
        echo "FAIL generate: $cfg: $(cat "$dir/e$n")"; return 1
    fi
    out=$("$PTXAS" -arch=sm_90a -v "$ptx" -o "$dir/k$n.cubin" 2>&1) || { echo "FAIL ptxas: $cfg: $out"; return 1; }
    rm -f "$ptx" "$dir/k$n.cubin"
    echo "$out" | grep -q "0 bytes spill stores, 0 bytes spill loads" || { echo "FAIL spills: $cfg"; return 1; }
    echo "$out" | grep -q "C7508" && { echo "FAIL setmaxnreg ignored (C7508): $cfg"; return 1; }
    echo "$out" | grep -q "C7514" && { echo "FAIL wgmma serialised (C7514): $cfg"; return 1; }
    regs=$(echo "$out" | sed -n 's/.*Used \([0-9]*\) registers.*/\1/p')
    want=$("$FA4GEN" explain --config "$cfg" --json | sed -n 's/.*"entry_regs": \([0-9]*\).*/\1/p')
    [ "$regs" = "$want" ] || { echo "FAIL registers: $cfg: ptxas $regs, plan $want"; return 1; }
    echo "ok   $cfg"
}

rc=0
run_matrix "sm90a ptxas matrix" "$list" || rc=1
if [ -x tests/ptxas/run_sm100.sh ]; then
    sh tests/ptxas/run_sm100.sh "$FA4GEN" || rc=1
fi
exit $rc
