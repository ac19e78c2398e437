#!/bin/sh
# tests/ptxas/run_bwd.sh [FA4GEN] - the attention backward's kernels (issue 29) assemble (evidence level 1):
# every config of tests/ptxas/bwd_matrix.txt through ptxas -arch=sm_90a (sm_100a for target=sm100a) -v with no
# warning (C7508 setmaxnreg ignored, C7515 wgmma serialised, C7519/C7517 injected waits), 0 spill bytes and the
# plan's entry registers (sm_100a: at most those; its kernel runs without setmaxnreg); with CUOBJDUMP set
# (evidence level 2), the main kernels' SASS holds the plan's tensor-core ops and no local memory: sm_90a, HGMMA
# steps of S^T and dP^T per depth / 16, dV and dK per bm / 16, dQ per bn / 16; sm_100a, the UTC*MMA count of the
# plan's note "mma per m-block" (the loop body, not unrolled) and TMEM loads (LDTM).
# Prints one line per kernel and 'backward ptxas matrix: N passed, N failed'; exit 1 on failure.
set -u
. "$(dirname "$0")/lib.sh"
matrix_setup "$@"

check() {
    cfg=$1; n=$2
    ptx=$dir/k$n.ptx
    if ! "$FA4GEN" "${cfg%% *}" --config "$cfg" -o "$ptx" 2>"$dir/e$n"; then
        echo "FAIL generate: $cfg: $(cat "$dir/e$n")"; return 1
    fi
    case "$cfg" in *target=sm100a*) arch=sm_100a ;; *) arch=sm_90a ;; esac
    out=$("$PTXAS" -arch=$arch -v "$ptx" -o "$dir/k$n.cubin" 2>&1) || { echo "FAIL ptxas: $cfg: $out"; return 1; }
    if echo "$out" | grep -qiE "warning|C75[0-9][0-9]"; then
        echo "FAIL ptxas note: $cfg: $(echo "$out" | grep -iE 'warning|C75' | head -2)"; return 1
    fi
    spills=$(echo "$out" | grep -o '[0-9]* bytes spill stores, [0-9]* bytes spill loads' | head -1)
    [ "$spills" = "0 bytes spill stores, 0 bytes spill loads" ] || { echo "FAIL spills: $cfg: $spills"; return 1; }
    regs=$(echo "$out" | sed -n 's/.*Used \([0-9]*\) registers.*/\1/p')
    want=$("$FA4GEN" explain --config "$cfg" --json | sed -n 's/.*"entry_regs": \([0-9]*\).*/\1/p')
    case "$cfg" in
    mha-bwd\ *target=sm100a*) [ "$regs" -le "$want" ] || { echo "FAIL registers: $cfg: ptxas $regs > plan $want"; return 1; } ;;
    mha-bwd\ *) [ "$regs" = "$want" ] || { echo "FAIL registers: $cfg: ptxas $regs, plan $want"; return 1; } ;;
    esac
    sass=""
    case "$cfg" in mha-bwd\ *)
        if [ -n "${CUOBJDUMP:-}" ]; then
            s=$("$CUOBJDUMP" --dump-sass "$dir/k$n.cubin" 2>&1) || { echo "FAIL cuobjdump: $cfg"; return 1; }
            json=$("$FA4GEN" explain --config "$cfg" --json)
            d=$(echo "$json" | sed -n 's/.*"qk": \([0-9]*\).*/\1/p')
            bm=$(echo "$json" | sed -n 's/.*"bm": \([0-9]*\).*/\1/p')
            bn=$(echo "$json" | sed -n 's/.*"bn": \([0-9]*\).*/\1/p')
            local_mem=$(echo "$s" | grep -cE '\bLDL|\bSTL')
            [ "$local_mem" = 0 ] || { echo "FAIL SASS: $cfg: $local_mem LDL/STL"; return 1; }
            if [ "$arch" = sm_100a ]; then
                want_mma=$(echo "$json" | sed -n 's/.*"mma per m-block": "\([0-9]*\) tcgen05.*/\1/p')
                got_mma=$(echo "$s" | grep -cE 'UTC[A-Z]*MMA')
                ldtm=$(echo "$s" | grep -cE '[^A-Z]LDTM[ .]')
                [ -n "$want_mma" ] && [ "$got_mma" = "$want_mma" ] || {
                    echo "FAIL SASS: $cfg: $got_mma UTC*MMA, plan ${want_mma:-none}"; return 1; }
                [ "$ldtm" -gt 0 ] || { echo "FAIL SASS: $cfg: no LDTM (TMEM loads)"; return 1; }
                sass=", $got_mma UTC*MMA, $ldtm LDTM, no local memory"
            else
                want_mma=$((2 * d / 16 + 2 * bm / 16 + bn / 16))
                got_mma=$(echo "$s" | grep -c HGMMA)
                [ "$got_mma" = "$want_mma" ] || { echo "FAIL SASS: $cfg: $got_mma HGMMA, plan $want_mma"; return 1; }
                sass=", $got_mma HGMMA, no local memory"
            fi
        fi ;;
    esac
    echo "ok   $cfg: $regs registers at entry, 0 spills$sass"
}

run_matrix "backward ptxas matrix" "$(dirname "$0")/bwd_matrix.txt"
