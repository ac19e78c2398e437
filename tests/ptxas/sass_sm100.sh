#!/bin/sh
# tests/ptxas/sass_sm100.sh [FA4GEN] - evidence level 2 (SASS) for the sm_100a matrix,
# on any machine with ptxas and cuobjdump (+ nvdisasm; no GPU needed):
#   - the tensor-core MMAs (UTCHMMA kind::f16, UTCQMMA kind::f8f6f4) in the KV loop
#     (the innermost backward branch around MMAs) equal the plan's
#     "mma per kv tile", and the whole kernel has twice that (first block's S + tail's PV)
#   - no local memory: no LDL / STL
#   - TMEM traffic is there: LDTM and STTM (softmax, correction, epilogue)
#   - the CTA pair (plan cluster 2): every MMA and every TMA load is a .2CTA form; a single
#     CTA has none
# cuobjdump and nvdisasm: $CUOBJDUMP, PATH, or $CUDA_HOME/bin (pip: nvidia-cuda-cuobjdump,
# nvidia-cuda-nvdisasm). Without them it says so and exits 0 (nothing checked).
# With SM100_CUBINS=DIR a cubin run_sm100.sh kept there for the same config (same build, same ptxas) is
# disassembled instead of assembling the config again.
# Prints one line per config and 'sm100a sass matrix: N passed, N failed'; exit 1 on failure.
set -u
. "$(dirname "$0")/lib.sh"
FA4GEN=${1:-build/fa4gen}
MATRIX=${SM100_MATRIX:-$(dirname "$0")/sm100_matrix.txt}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PTXAS=${PTXAS:-ptxas}
command -v "$PTXAS" >/dev/null 2>&1 || PTXAS=$CUDA_HOME/bin/ptxas
CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || echo "$CUDA_HOME/bin/cuobjdump")}
if [ ! -x "$CUOBJDUMP" ]; then
    echo "sass_sm100: no cuobjdump (set CUOBJDUMP, or pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm); skipped"
    exit 0
fi
PATH=$PATH:$(dirname "$CUOBJDUMP"):$CUDA_HOME/bin
export PATH
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# SASS -> "total loop ldst mma2 tmem tma tma2": MMAs in the kernel, in the innermost loop that
# holds MMAs, LDL/STL, .2CTA MMAs, LDTM+STTM (0 unless both appear), TMA loads, .2CTA TMA loads
sass_counts() {
    awk '
    function hex(s,   v, i, c) {
        v = 0; s = tolower(s); sub(/^0x/, "", s)
        for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)) - 1; v = v * 16 + c }
        return v
    }
    BEGIN { n = 0; nb = 0; ldst = 0; mma2 = 0; ldtm = 0; sttm = 0; tma = 0; tma2 = 0 }
    match($0, /\/\*[0-9a-f]+\*\//) {
        addr = hex(substr($0, RSTART + 2, RLENGTH - 4))
        if ($0 ~ /UTC[A-Z]*MMA/) { mma[n++] = addr; if ($0 ~ /MMA[A-Z0-9.]*\.2CTA/) mma2++ }
        if ($0 ~ /[^A-Z]LDTM[ .]/) ldtm++
        if ($0 ~ /[^A-Z]STTM[ .]/) sttm++
        if ($0 ~ /UTMALDG/) { tma++; if ($0 ~ /UTMALDG[A-Z0-9.]*\.2CTA/) tma2++ }
        if ($0 ~ /[^A-Z](LDL|STL)[ .]/) ldst++
        if (match($0, /BRA[A-Z.]* (0x[0-9a-f]+)/)) {
            s = substr($0, RSTART, RLENGTH); sub(/.* /, "", s); t = hex(s)
            if (t < addr) { bt[nb] = t; ba[nb] = addr; nb++ }
        }
    }
    END {
        best = -1; cnt = 0
        for (b = 0; b < nb; b++) {
            c = 0
            for (i = 0; i < n; i++) if (mma[i] >= bt[b] && mma[i] <= ba[b]) c++
            if (c > 0 && (best < 0 || ba[b] - bt[b] < best)) { best = ba[b] - bt[b]; cnt = c }
        }
        printf "%d %d %d %d %d %d %d\n", n, cnt, ldst + 0, mma2, (ldtm && sttm) ? ldtm + sttm : 0, tma, tma2
    }'
}

check() {
    cfg=$1; k=$2
    kept=${SM100_CUBINS:+$SM100_CUBINS/$(printf '%s' "$cfg" | sha256sum | cut -c1-32).cubin}
    if [ -n "$kept" ] && [ -f "$kept" ]; then
        cp "$kept" "$dir/k$k.cubin"
    else
        "$FA4GEN" mha --config "$cfg" -o "$dir/k$k.ptx" 2>"$dir/e$k" || { echo "FAIL generate: $cfg: $(cat "$dir/e$k")"; return 1; }
        "$PTXAS" -arch=sm_100a "$dir/k$k.ptx" -o "$dir/k$k.cubin" 2>"$dir/e$k" || { echo "FAIL ptxas: $cfg"; return 1; }
    fi
    "$CUOBJDUMP" --dump-sass "$dir/k$k.cubin" >"$dir/k$k.sass" 2>"$dir/e$k" ||
        { echo "FAIL cuobjdump: $cfg: $(head -1 "$dir/e$k")"; return 1; }
    json=$("$FA4GEN" explain --config "$cfg" --json)
    want=$(echo "$json" | sed -n 's/.*"mma per kv tile": "\([0-9]*\) .*/\1/p')
    pair=$(echo "$json" | sed -n 's/.*"cluster": \[\([0-9]*\),.*/\1/p')
    set -- $(sass_counts <"$dir/k$k.sass")
    total=$1 loop=$2 ldst=$3 mma2=$4 tmem=$5 tma=$6 tma2=$7
    rm -f "$dir/k$k.ptx" "$dir/k$k.cubin" "$dir/k$k.sass"
    [ "$ldst" = 0 ] || { echo "FAIL local memory: $cfg: $ldst LDL/STL"; return 1; }
    [ "$loop" = "$want" ] || { echo "FAIL KV loop: $cfg: $loop tensor-core MMAs per iteration, plan $want"; return 1; }
    [ "$total" = $((2 * want)) ] || { echo "FAIL kernel: $cfg: $total tensor-core MMAs, want 2 x $want"; return 1; }
    [ "$tmem" -gt 0 ] || { echo "FAIL TMEM: $cfg: no LDTM or no STTM"; return 1; }
    if [ "$pair" = 2 ]; then want2=$total; wantt=$tma; else want2=0; wantt=0; fi
    [ "$mma2" = "$want2" ] && [ "$tma2" = "$wantt" ] && [ "$tma" -gt 0 ] ||
        { echo "FAIL cta group: $cfg: cluster $pair, $mma2 of $total MMAs and $tma2 of $tma TMA loads are .2CTA"; return 1; }
    echo "ok   $cfg  ($loop MMAs per KV tile, $total in all, $mma2 .2CTA; $tmem LDTM/STTM; $tma2/$tma TMA .2CTA; no LDL/STL)"
}

run_matrix "sm100a sass matrix" "$MATRIX"
