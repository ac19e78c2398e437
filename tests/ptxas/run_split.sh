#!/bin/sh
# tests/ptxas/run_split.sh [FA4GEN] - split-KV kernels (split=1) and the combine kernels of both
# targets (tests/ptxas/split_matrix.txt) assemble (evidence level 1: ptxas): ptxas -v exits 0 with
# no warning other than the known C7508/C7514 notes, 0 spill bytes, and (MHA) the plan's entry
# registers. With CUOBJDUMP set, the SASS of every kernel holds no local memory (LDL/STL).
# Prints one line per kernel and 'split ptxas matrix: N passed, N failed'; exit 1 on failure.
set -u
. "$(dirname "$0")/lib.sh"
matrix_setup "$@"

check() {
    cfg=$1; n=$2
    kind=${cfg%% *}
    arch=$(echo "$cfg" | sed -n 's/.*target=sm\([0-9]*\)a.*/sm_\1a/p')
    ptx=$dir/k$n.ptx
    "$FA4GEN" "$kind" --config "$cfg" -o "$ptx" 2>"$dir/e$n" || { echo "FAIL generate: $cfg: $(cat "$dir/e$n")"; return 1; }
    out=$("$PTXAS" -arch="$arch" -v "$ptx" -o "$dir/k$n.cubin" 2>&1) || { echo "FAIL ptxas: $cfg: $out"; return 1; }
    echo "$out" | grep -i "warning" | grep -qv 'C7508\|C7514' &&
        { echo "FAIL ptxas warning: $cfg: $(echo "$out" | grep -i warning | head -2)"; return 1; }
    spills=$(echo "$out" | grep -o '[0-9]* bytes spill stores, [0-9]* bytes spill loads' | head -1)
    [ "$spills" = "0 bytes spill stores, 0 bytes spill loads" ] || { echo "FAIL spills: $cfg: $spills"; return 1; }
    regs=$(echo "$out" | sed -n 's/.*Used \([0-9]*\) registers.*/\1/p')
    if [ "$kind" = mha ]; then
        want=$("$FA4GEN" explain --config "$cfg" --json | sed -n 's/.*"entry_regs": \([0-9]*\).*/\1/p')
        [ "$regs" = "$want" ] || { echo "FAIL registers: $cfg: ptxas $regs, plan $want"; return 1; }
    fi
    if [ -n "${CUOBJDUMP:-}" ]; then
        ldl=$("$CUOBJDUMP" --dump-sass "$dir/k$n.cubin" 2>&1 | grep -cE '\bLDL|\bSTL')
        [ "$ldl" = 0 ] || { echo "FAIL SASS: $cfg: $ldl LDL/STL"; return 1; }
    fi
    rm -f "$ptx" "$dir/k$n.cubin"
    echo "ok   $cfg  ($regs registers, 0 spills)"
}

run_matrix "split ptxas matrix" "$(dirname "$0")/split_matrix.txt"
