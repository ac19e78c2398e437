#!/bin/sh
# tests/ptxas/run_serving.sh [FA4GEN] - the serving layouts of issue 15 (varlen=1, page=P) assemble
# (evidence level 1: ptxas): every config below, sm90a and sm100a, assembles with no warning, the plan's
# entry registers and 0 spill bytes. With CUOBJDUMP set, the SASS holds no local memory (LDL/STL) and as
# many tensor-core MMAs (HGMMA on sm_90a, UTC*MMA on sm_100a) as the same config without the serving words
# (varlen and paging change addressing, not math). The configs not built (the sm100a CTA pair, sm90a paged
# with bm 192; early=1 or prefetch beside varlen, cluster, cta=2 or without split) must be refused
# by the generator with a message naming the word.
# Prints one line per kernel and 'serving ptxas matrix: N passed, N failed'; exit 1 on failure.
set -u
. "$(dirname "$0")/lib.sh"
matrix_setup "$@"

list=$dir/list
for base in \
    "mha target=sm90a dtype=bf16 qk=128 ov=128 mask=causal" \
    "mha target=sm90a dtype=fp16 qk=128 ov=128 mask=none" \
    "mha target=sm90a dtype=bf16 qk=64 ov=64 group=4 mask=none" \
    "mha target=sm90a dtype=bf16 qk=256 ov=256 mask=causal" \
    "mha target=sm90a dtype=bf16 qk=128 ov=128 mask=window:128,0 persistent=1"; do
    echo "$base varlen=1"
    for p in 16 32 64 128 256; do echo "$base page=$p"; done
    echo "$base varlen=1 page=16"
    echo "$base varlen=1 page=256"
done > "$list"
for base in \
    "mha target=sm100a dtype=bf16 qk=128 ov=128 mask=causal" \
    "mha target=sm100a dtype=fp16 qk=64 ov=64 mask=none" \
    "mha target=sm100a dtype=bf16 qk=128 ov=128 group=4 mask=causal" \
    "mha target=sm100a dtype=bf16 qk=128 ov=128 qtiles=1 mask=window:128,0" \
    "mha target=sm100a dtype=e4m3 qk=128 ov=128 mask=causal"; do
    echo "$base varlen=1"
    for p in 16 64 256; do echo "$base page=$p"; done
    echo "$base varlen=1 page=16"
    echo "$base varlen=1 page=128"
done >> "$list"
cat >> "$list" <<'L'
mha target=sm90a dtype=bf16 qk=128 ov=128 mask=causal varlen=1 sink=1
mha target=sm90a dtype=bf16 qk=128 ov=128 mask=none varlen=1 page=64 bn=64 stages=4
mha target=sm100a dtype=bf16 qk=128 ov=128 mask=causal varlen=1 page=32 sink=1
refuse mha target=sm100a dtype=bf16 qk=128 ov=128 cta=2 mask=causal varlen=1
refuse mha target=sm100a dtype=bf16 qk=128 ov=128 cta=2 mask=causal page=64
refuse mha target=sm100a dtype=bf16 qk=192 ov=128 rope_split=1 mask=causal page=64
refuse mha target=sm90a dtype=bf16 qk=64 ov=64 bm=192 mask=causal page=64
refuse mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 split=1 early=1 varlen=1 mask=none
mha target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=64 stages=3 group=8 split=1 early=1 page=64 mask=none
mha target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=64 stages=3 group=4 split=1 early=1 page=16 mask=causal
mha target=sm100a dtype=bf16 qk=128 ov=128 group=8 split=1 early=1 page=64 mask=none
mha target=sm100a dtype=bf16 qk=128 ov=128 group=4 split=1 early=1 page=16 mask=causal
mha target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=64 stages=3 group=8 split=1 prefetch=4 page=16 mask=none
mha target=sm100a dtype=bf16 qk=128 ov=128 group=4 split=1 prefetch=3 page=32 mask=causal
refuse mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 split=1 prefetch=2 varlen=1 page=64 mask=none
refuse mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 cluster=8 early=1 mask=none
refuse mha target=sm90a dtype=bf16 qk=128 ov=128 group=8 early=1 mask=none
refuse mha target=sm100a dtype=bf16 qk=128 ov=128 group=8 split=1 early=1 cta=2 mask=none
L

# the tensor-core MMAs of a SASS dump
mma_in() { grep -cE 'HGMMA|UTC[A-Z]*MMA' "$1"; }

check() {
    cfg=$1; n=$2
    case "$cfg" in
    refuse\ *)
        cfg=${cfg#refuse }
        if "$FA4GEN" mha --config "$cfg" -o "$dir/k$n.ptx" 2>"$dir/e$n"; then
            echo "FAIL not refused: $cfg"; return 1
        fi
        grep -q 'varlen\|page\|bm\|cta\|early\|prefetch' "$dir/e$n" || { echo "FAIL refusal does not name the word: $cfg: $(cat "$dir/e$n")"; return 1; }
        echo "ok   refused: $cfg ($(cut -c1-80 "$dir/e$n"))"
        return 0 ;;
    esac
    arch=$(echo "$cfg" | sed -n 's/.*target=sm\([0-9]*\)a.*/sm_\1a/p')
    "$FA4GEN" mha --config "$cfg" -o "$dir/k$n.ptx" 2>"$dir/e$n" || { echo "FAIL generate: $cfg: $(cat "$dir/e$n")"; return 1; }
    out=$("$PTXAS" -arch="$arch" -v "$dir/k$n.ptx" -o "$dir/k$n.cubin" 2>&1) || { echo "FAIL ptxas: $cfg: $out"; return 1; }
    echo "$out" | grep -qi "warning" && { echo "FAIL ptxas warning: $cfg: $(echo "$out" | grep -i warning | head -2)"; return 1; }
    spills=$(echo "$out" | grep -o '[0-9]* bytes spill stores, [0-9]* bytes spill loads' | head -1)
    [ "$spills" = "0 bytes spill stores, 0 bytes spill loads" ] || { echo "FAIL spills: $cfg: $spills"; return 1; }
    regs=$(echo "$out" | sed -n 's/.*Used \([0-9]*\) registers.*/\1/p')
    want=$("$FA4GEN" explain --config "$cfg" --json | sed -n 's/.*"entry_regs": \([0-9]*\).*/\1/p')
    [ "$regs" = "$want" ] || { echo "FAIL registers: $cfg: ptxas $regs, plan $want"; return 1; }
    sass=""
    if [ -n "${CUOBJDUMP:-}" ]; then
        plain=$(echo "$cfg" | sed 's/ varlen=1//; s/ page=[0-9]*//; s/ bn=[0-9]*//')
        # the dense kernel with the same tile (paging may have lowered bn): the canonical form's bn
        bn=$("$FA4GEN" explain --config "$cfg" | sed -n 's/^config .* bn=\([0-9]*\) .*/\1/p')
        # its MMA count once per twin: the layouts of one base share it (a cuobjdump is ~0.8 s, ptxas ~0.6)
        twin=$dir/twin.$(printf '%s' "$plain bn=$bn" | cksum | cut -d' ' -f1)
        if [ ! -s "$twin" ]; then
            "$FA4GEN" mha --config "$plain bn=$bn" -o "$dir/b$n.ptx" &&
                "$PTXAS" -arch="$arch" "$dir/b$n.ptx" -o "$dir/b$n.cubin" || { echo "FAIL dense twin: $cfg"; return 1; }
            "$CUOBJDUMP" --dump-sass "$dir/b$n.cubin" > "$dir/b$n.sass" 2>/dev/null
            mma_in "$dir/b$n.sass" > "$twin"
        fi
        base=$(cat "$twin")
        "$CUOBJDUMP" --dump-sass "$dir/k$n.cubin" > "$dir/k$n.sass" 2>/dev/null
        got=$(mma_in "$dir/k$n.sass"); local_mem=$(grep -cE '\bLDL|\bSTL' "$dir/k$n.sass")
        [ "$got" = "$base" ] || { echo "FAIL SASS: $cfg: $got MMA, dense twin $base"; return 1; }
        [ "$local_mem" = 0 ] || { echo "FAIL SASS: $cfg: $local_mem LDL/STL"; return 1; }
        sass="  SASS: $got MMA (= dense), 0 LDL/STL"
    fi
    rm -f "$dir/k$n.ptx" "$dir/k$n.cubin" "$dir/k$n.sass" "$dir/b$n.ptx" "$dir/b$n.cubin" "$dir/b$n.sass"
    echo "ok   $cfg  regs $regs$sass"
}

run_matrix "serving ptxas matrix" "$list"
