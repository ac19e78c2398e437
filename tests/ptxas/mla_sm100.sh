#!/bin/sh
# tests/ptxas/mla_sm100.sh [FA4GEN] - the sm_100a sparse MLA matrix (tests/ptxas/mla_sm100_matrix.txt):
# evidence level 1 (ptxas) for every config, and level 2 (SASS) where cuobjdump is found
# ($CUOBJDUMP, PATH, $CUDA_HOME/bin; make sass-test fetches one):
#   - ptxas -arch=sm_100a -v exits 0 with no warning and 0 spill bytes; its register count is at
#     most the plan's entry_regs (the kernel's 192 threads need no setmaxnreg)
#   - SASS: no LDL/STL; the tensor-core MMAs (UTCHMMA) equal the plan note "mma issue sites";
#     UTMALDG.2D.GATHER4 (the rows of a block) and UTMALDG.3D (Q) equal the plan note "tma issue
#     sites"; LDTM and STTM present; cta_group 2 (the CTA pair): every MMA and every TMA load is a
#     .2CTA form; cta_group 1: none is; tma_store 1: UTMASTG equals the plan note "o store" (else none)
# Prints one line per config and 'sm100a sparse MLA matrix: N passed, N failed'; exit 1 on failure.
set -u
. "$(dirname "$0")/lib.sh"
FA4GEN=${1:-build/fa4gen}
MATRIX=${MLA_SM100_MATRIX:-$(dirname "$0")/mla_sm100_matrix.txt}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PTXAS=${PTXAS:-ptxas}
command -v "$PTXAS" >/dev/null 2>&1 || PTXAS=$CUDA_HOME/bin/ptxas
CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || echo "$CUDA_HOME/bin/cuobjdump")}
[ -x "$CUOBJDUMP" ] || CUOBJDUMP=
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

note() { echo "$1" | sed -n "s/.*\"$2\": \"\\([0-9]*\\) .*/\\1/p"; }

check() {
    cfg=$1; n=$2
    ptx=$dir/k$n.ptx
    "$FA4GEN" mla-sparse --config "$cfg" -o "$ptx" 2>"$dir/e$n" || { echo "FAIL generate: $cfg: $(cat "$dir/e$n")"; return 1; }
    out=$("$PTXAS" -arch=sm_100a -v "$ptx" -o "$dir/k$n.cubin" 2>&1) || { echo "FAIL ptxas: $cfg: $out"; return 1; }
    json=$("$FA4GEN" explain --config "$cfg" --json)
    echo "$out" | grep -qi "warning" && { echo "FAIL ptxas warning: $cfg: $(echo "$out" | grep -i warning | head -2)"; return 1; }
    echo "$out" | grep -q "0 bytes spill stores, 0 bytes spill loads" || { echo "FAIL spills: $cfg: $(echo "$out" | grep spill)"; return 1; }
    regs=$(echo "$out" | sed -n 's/.*Used \([0-9]*\) registers.*/\1/p')
    cap=$(echo "$json" | sed -n 's/.*"entry_regs": \([0-9]*\).*/\1/p')
    [ "$regs" -le "$cap" ] || { echo "FAIL registers: $cfg: ptxas $regs > plan $cap"; return 1; }
    sass="no SASS (no cuobjdump)"
    if [ -n "$CUOBJDUMP" ]; then
        "$CUOBJDUMP" --dump-sass "$dir/k$n.cubin" >"$dir/k$n.sass" 2>"$dir/e$n" || { echo "FAIL cuobjdump: $cfg: $(head -1 "$dir/e$n")"; return 1; }
        s=$dir/k$n.sass
        mma=$(grep -c 'UTC[A-Z]*MMA' "$s"); mma2=$(grep -c 'UTC[A-Z]*MMA[A-Z0-9.]*\.2CTA' "$s")
        tma=$(grep -c 'UTMALDG' "$s"); tma2=$(grep -c 'UTMALDG[A-Z0-9.]*\.2CTA' "$s")
        g4=$(grep -c 'UTMALDG[A-Z0-9.]*\.GATHER4' "$s"); q3=$(grep -c 'UTMALDG\.3D' "$s")
        ldst=$(grep -cE '[^A-Z](LDL|STL)[ .]' "$s"); ldtm=$(grep -c 'LDTM' "$s"); sttm=$(grep -c 'STTM' "$s")
        tst=$(grep -c 'UTMASTG' "$s"); want_st=$(note "$json" "o store"); want_st=${want_st:-0}
        sites=$(note "$json" "mma issue sites"); per=$(note "$json" "mma per kv block")
        want_g4=$(echo "$json" | sed -n 's/.*"tma issue sites": "[0-9]* (gather4 \([0-9]*\), Q \([0-9]*\)).*/\1/p')
        want_q=$(echo "$json" | sed -n 's/.*"tma issue sites": "[0-9]* (gather4 \([0-9]*\), Q \([0-9]*\)).*/\2/p')
        pair=$(echo "$json" | sed -n 's/.*"cluster": \[\([0-9]*\),.*/\1/p')
        [ "$ldst" = 0 ] || { echo "FAIL local memory: $cfg: $ldst LDL/STL"; return 1; }
        [ "$mma" = "$sites" ] || { echo "FAIL MMAs: $cfg: $mma UTCHMMA, plan issue sites $sites"; return 1; }
        [ "$g4" = "$want_g4" ] && [ "$q3" = "$want_q" ] || { echo "FAIL TMA: $cfg: $g4 gather4 and $q3 3-D loads, plan $want_g4 and $want_q"; return 1; }
        [ "$ldtm" -gt 0 ] && [ "$sttm" -gt 0 ] || { echo "FAIL TMEM: $cfg: LDTM $ldtm, STTM $sttm"; return 1; }
        [ "$tst" = "$want_st" ] || { echo "FAIL TMA store: $cfg: $tst UTMASTG, plan o store $want_st"; return 1; }
        if [ "$pair" = 2 ]; then w_mma=$mma; w_tma=$tma; else w_mma=0; w_tma=0; fi
        [ "$mma2" = "$w_mma" ] && [ "$tma2" = "$w_tma" ] ||
            { echo "FAIL cta group: $cfg: cluster $pair, $mma2 of $mma MMAs and $tma2 of $tma TMA loads are .2CTA"; return 1; }
        sass="SASS: $mma UTCHMMA ($per per kv block, $mma2 .2CTA), $g4 gather4 + $q3 3-D TMA ($tma2 .2CTA), LDTM $ldtm STTM $sttm, $tst TMA store, no LDL/STL"
    fi
    rm -f "$ptx" "$dir/k$n.cubin" "$dir/k$n.sass"
    echo "ok   $cfg  (regs $regs; $sass)"
}

run_matrix "sm100a sparse MLA matrix" "$MATRIX"
