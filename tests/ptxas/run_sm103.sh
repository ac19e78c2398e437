#!/bin/sh
# tests/ptxas/run_sm103.sh [FA4GEN] - the sm103a target (B300, compute capability 10.3): the sm100a kernels
# emitted for .target sm_103a (PTX ISA 8.8) assemble with `ptxas -arch=sm_103a -v` (evidence level 1: ptxas).
# The configs: every target=sm100a line of the sm100a MHA, sparse MLA, split, spill and backward matrices,
# plus the combine and kv-append kernels, with target=sm100a replaced by sm103a. For each:
#   - the PTX says `.target sm_103a` and `.version 8.8` (the ISA version that introduced sm_103a)
#   - ptxas exits 0, prints no warning, 0 spill bytes
#   - mha: the entry register count equals the plan's entry_regs (the setmaxnreg budgets start from it, as
#     on sm_100a); the others (whose threads need no setmaxnreg): at most it
# (the spill matrix's "refused" lines are the generator's refusals, target-independent: not repeated here)
# SM103_SAMPLE=K checks every K-th config only, the first included (default 1: all; make test's lane
# runs 1 in 24). Prints one line per config and 'sm103a ptxas matrix: N passed, N failed'.
set -u
. "$(dirname "$0")/lib.sh"
matrix_setup "$@"
here=$(dirname "$0")

list=$dir/list
for m in sm100_matrix.txt mla_sm100_matrix.txt split_matrix.txt spill_matrix.txt bwd_matrix.txt; do
    grep -v '^#' "$here/$m" | grep 'target=sm100a' | grep -v '^refused ' | sed -e 's/^fits //' -e 's/target=sm100a/target=sm103a/'
done > "$list"
cat >> "$list" <<'L'
combine target=sm103a dtype=bf16 ov=128
combine target=sm103a dtype=fp16 ov=512
kv-append target=sm103a dtype=bf16 qk=128 ov=128
kv-append target=sm103a dtype=e4m3 qk=576 ov=512
L

check() {
    cfg=$1; n=$2
    ptx=$dir/k$n.ptx
    kind=${cfg%% *}
    if ! "$FA4GEN" "$kind" --config "$cfg" -o "$ptx" 2>"$dir/e$n"; then
        echo "FAIL generate: $cfg: $(cat "$dir/e$n")"; return 1
    fi
    grep -q '^\.target sm_103a$' "$ptx" || { echo "FAIL .target: $cfg: $(grep '^\.target' "$ptx")"; return 1; }
    grep -q '^\.version 8\.8$' "$ptx" || { echo "FAIL .version: $cfg: $(grep '^\.version' "$ptx")"; return 1; }
    out=$("$PTXAS" -arch=sm_103a -v "$ptx" -o "$dir/k$n.cubin" 2>&1) || { echo "FAIL ptxas: $cfg: $out"; return 1; }
    rm -f "$ptx" "$dir/k$n.cubin"
    echo "$out" | grep -qi "warning" && { echo "FAIL ptxas warning: $cfg: $(echo "$out" | grep -i warning | head -2)"; return 1; }
    echo "$out" | grep "spill" | grep -qv "0 bytes spill stores, 0 bytes spill loads" && {
        echo "FAIL spills: $cfg: $(echo "$out" | grep spill | head -2)"; return 1; }
    regs=$(echo "$out" | sed -n 's/.*Used \([0-9]*\) registers.*/\1/p' | sort -n | tail -1)
    want=$("$FA4GEN" explain --config "$cfg" --json | sed -n 's/.*"entry_regs": \([0-9]*\).*/\1/p')
    case "$kind" in
    mha) [ "$regs" = "$want" ] || { echo "FAIL registers: $cfg: ptxas $regs, plan $want"; return 1; } ;;
    *) [ -z "$want" ] || [ "$regs" -le "$want" ] || { echo "FAIL registers: $cfg: ptxas $regs > plan $want"; return 1; } ;;
    esac
    echo "ok   $cfg  (regs $regs)"
}

MATRIX_SAMPLE=${SM103_SAMPLE:-1} run_matrix "sm103a ptxas matrix" "$list"
