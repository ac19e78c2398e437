#!/bin/sh
# tests/ptxas/run_spills.sh [FA4GEN] - the configs of issue 26 item 6 that were accepted and spilled
# (tests/ptxas/spill_matrix.txt): each either assembles with 0 spill bytes (ptxas -v) or is refused
# by the generator with one line that says why (evidence level 1: ptxas).
# Prints one line per config and 'spill matrix: N passed, N failed'; exit 1 on failure.
set -u
. "$(dirname "$0")/lib.sh"
matrix_setup "$@"

check() {
    line=$1; n=$2
    verdict=${line%% *}; cfg=${line#* }; needle=
    if [ "$verdict" = refused ]; then needle=${cfg%% *}; cfg=${cfg#* }; fi
    kind=${cfg%% *}
    arch=$(echo "$cfg" | sed -n 's/.*target=sm\([0-9]*\)a.*/sm_\1a/p')
    ptx=$dir/k$n.ptx
    if ! "$FA4GEN" "$kind" --config "$cfg" -o "$ptx" 2>"$dir/e$n"; then
        err=$(cat "$dir/e$n")
        if [ "$verdict" = refused ] && [ "$(echo "$err" | wc -l)" = 1 ] && echo "$err" | grep -q "$needle"; then
            echo "ok   refused: $cfg ($err)"
            return 0
        fi
        echo "FAIL generate: $cfg: $err"
        return 1
    fi
    [ "$verdict" = fits ] || { echo "FAIL accepted (want a refusal naming '$needle'): $cfg"; return 1; }
    out=$("$PTXAS" -arch="$arch" -v "$ptx" -o "$dir/k$n.cubin" 2>&1) || { echo "FAIL ptxas: $cfg: $out"; return 1; }
    spills=$(echo "$out" | grep -o '[0-9]* bytes spill stores, [0-9]* bytes spill loads' | sort -u)
    [ "$spills" = "0 bytes spill stores, 0 bytes spill loads" ] || { echo "FAIL spills: $cfg: $spills"; return 1; }
    rm -f "$ptx" "$dir/k$n.cubin"
    echo "ok   fits: $cfg (0 spills)"
}

run_matrix "spill matrix" "$(dirname "$0")/spill_matrix.txt"
