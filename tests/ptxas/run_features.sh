#!/bin/sh
# tests/ptxas/run_features.sh [FA4GEN] - MHA kernels with sinks and a score_mod (issue 10), and the built-in
# softcap=1 / alibi=1 (issue 27; each alone and both with a sink) on both
# targets assemble (evidence level 1: ptxas): every config of the list below, with sink=1, with each
# mod of tests/ptxas/mods/ (fa4gen --score-mod: NVRTC compiles it, the splice copies it into every
# score site), and with sink + soft-capping: ptxas exits 0 without warnings (C7508 setmaxnreg
# ignored, C7514 wgmma serialised), the plan's entry registers, no call left in the PTX, and 0 spill
# bytes -- except for the mods marked ~ below (CUDA's accurate tanhf, an aux table read per score),
# whose spills are printed as "note", not failed: a whole S row is live in the sm_100a softmax role
# (192 registers) and ptxas hoists the mod's loads and ex2/rcp for ILP (4-8 bytes; see README).
# With CUOBJDUMP set, the SASS holds no local memory (LDL/STL) beyond spills and no more CALL than
# the same config without features (sm_100a kernels have 3 CALL.REL.NOINC of their own).
# Prints one line per kernel and 'feature ptxas matrix: N passed, N failed'; exit 1 on failure.
set -u
. "$(dirname "$0")/lib.sh"
matrix_setup "$@"
MODS=$(dirname "$0")/mods

list=$dir/list
for base in \
    "mha target=sm90a dtype=bf16 qk=128 ov=128 mask=causal" \
    "mha target=sm90a dtype=fp16 qk=64 ov=64 group=4 mask=none" \
    "mha target=sm90a dtype=bf16 qk=256 ov=256 mask=window:64,0" \
    "mha target=sm100a dtype=bf16 qk=128 ov=128 mask=causal" \
    "mha target=sm100a dtype=fp16 qk=64 ov=64 group=8 mask=none" \
    "mha target=sm100a dtype=e4m3 qk=128 ov=128 mask=causal" \
    "mha target=sm100a dtype=bf16 qk=128 ov=128 cta=2 mask=window:64,0" \
    "mha target=sm100a dtype=bf16 qk=192 ov=128 rope_split=1 mask=causal"; do
    echo "$base sink=1|"
    for m in softcap30_approx alibi relbias~ softcap30~; do echo "$base|$m"; done
    echo "$base sink=1|softcap30_approx"
    # the built-in score transforms (issue 27 item 2): config words, no score_mod
    echo "$base softcap=1|"
    echo "$base alibi=1|"
    echo "$base softcap=1 alibi=1 sink=1|"
done > "$list"

sass_counts() { # CUBIN -> "CALLs LDL/STLs"
    sass=$("$CUOBJDUMP" --dump-sass "$1" 2>&1) || return 1
    echo "$(echo "$sass" | grep -c 'CALL') $(echo "$sass" | grep -cE '\bLDL|\bSTL')"
}

check() {
    line=$1; n=$2
    cfg=${line%|*}; mod=${line##*|}; spill_ok=0
    case "$mod" in *~) mod=${mod%\~}; spill_ok=1 ;; esac
    arch=$(echo "$cfg" | sed -n 's/.*target=sm\([0-9]*\)a.*/sm_\1a/p')
    ptx=$dir/k$n.ptx
    set -- --config "$cfg"
    [ -n "$mod" ] && set -- "$@" --score-mod "$MODS/$mod.cu"
    if ! "$FA4GEN" mha "$@" -o "$ptx" 2>"$dir/e$n"; then
        echo "FAIL generate: $line: $(cat "$dir/e$n")"; return 1
    fi
    out=$("$PTXAS" -arch="$arch" -v "$ptx" -o "$dir/k$n.cubin" 2>&1) || { echo "FAIL ptxas: $line: $out"; return 1; }
    grep -q 'call\.' "$ptx" && { echo "FAIL a call is left in the PTX: $line"; return 1; }
    echo "$out" | grep -qi "warning" && { echo "FAIL ptxas warning: $line: $(echo "$out" | grep -i warning | head -2)"; return 1; }
    spills=$(echo "$out" | grep -o '[0-9]* bytes spill stores, [0-9]* bytes spill loads' | head -1)
    note=""
    if [ "$spills" != "0 bytes spill stores, 0 bytes spill loads" ]; then
        [ $spill_ok = 1 ] || { echo "FAIL spills: $line: $spills"; return 1; }
        note="  (note: $spills)"
    fi
    regs=$(echo "$out" | sed -n 's/.*Used \([0-9]*\) registers.*/\1/p')
    want=$("$FA4GEN" explain "$@" --json | sed -n 's/.*"entry_regs": \([0-9]*\).*/\1/p')
    [ "$regs" = "$want" ] || { echo "FAIL registers: $line: ptxas $regs, plan $want"; return 1; }
    if [ -n "${CUOBJDUMP:-}" ]; then
        plain=$(echo "$cfg" | sed 's/ sink=1//')
        "$FA4GEN" mha --config "$plain" -o "$dir/b$n.ptx" && "$PTXAS" -arch="$arch" "$dir/b$n.ptx" -o "$dir/b$n.cubin" &&
            base=$(sass_counts "$dir/b$n.cubin") && got=$(sass_counts "$dir/k$n.cubin") ||
            { echo "FAIL cuobjdump: $line"; return 1; }
        [ "${got% *}" -le "${base% *}" ] || { echo "FAIL SASS: $line: ${got% *} CALL, ${base% *} without features"; return 1; }
        [ "${got#* }" = 0 ] || [ -n "$note" ] || { echo "FAIL SASS: $line: ${got#* } LDL/STL"; return 1; }
        rm -f "$dir/b$n.ptx" "$dir/b$n.cubin"
    fi
    rm -f "$ptx" "$dir/k$n.cubin"
    echo "ok   $cfg${mod:+ --score-mod $mod}$note"
}

run_matrix "feature ptxas matrix" "$list"
