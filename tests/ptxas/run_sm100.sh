#!/bin/sh
# tests/ptxas/run_sm100.sh [FA4GEN] - every config of tests/ptxas/sm100_matrix.txt
# assembles with `ptxas -arch=sm_100a -v` (evidence level 1: ptxas) and:
#   - ptxas exits 0 and prints no warning (C7508: setmaxnreg ignored; nor any other)
#   - 0 bytes spill stores and loads
#   - the entry register count equals the plan's entry_regs (the role budgets of
#     setmaxnreg start from it)
#   - a plan with a cluster (the CTA pair) declares it: .reqnctapercluster
#   - the plan's smem map is consistent: entries in offset order, aligned, not
#     overlapping; smem.bytes = end of the last entry; smem.launch = bytes + base
#     alignment and <= 232448 (the sm_100a carveout)
# With SM100_CUBINS=DIR each cubin is kept there (named by the config's sha256) for sass_sm100.sh.
# Prints one line per config and 'sm100a ptxas matrix: N passed, N failed'; exit 1 on failure.
set -u
. "$(dirname "$0")/lib.sh"
FA4GEN=${1:-build/fa4gen}
MATRIX=${SM100_MATRIX:-$(dirname "$0")/sm100_matrix.txt}
PTXAS=${PTXAS:-ptxas}
command -v "$PTXAS" >/dev/null 2>&1 || PTXAS=/usr/local/cuda/bin/ptxas
LIMIT=232448
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# smem map check on the plan's JSON; prints nothing when consistent
smem_check() {
    json=$1
    bytes=$(echo "$json" | sed -n 's/.*"smem": {"bytes": \([0-9]*\).*/\1/p')
    launch=$(echo "$json" | sed -n 's/.*"smem": {[^}]*"launch": \([0-9]*\).*/\1/p')
    align=$(echo "$json" | sed -n 's/.*"smem": {[^}]*"base_align": \([0-9]*\).*/\1/p')
    echo "$json" | grep -o '"offset": [0-9]*, "size": [0-9]*, "align": [0-9]*' |
        sed 's/[^0-9 ]//g' | awk -v bytes="$bytes" -v launch="$launch" -v align="$align" -v limit="$LIMIT" '
        { off = $1; size = $2; al = $3
          if (off % al) printf "entry %d at %d not aligned to %d; ", NR, off, al
          if (off < end) printf "entry %d at %d overlaps the previous end %d; ", NR, off, end
          end = off + size }
        END { if (end != bytes) printf "smem.bytes %d != end of last entry %d; ", bytes, end
              if (launch != bytes + align) printf "smem.launch %d != bytes %d + base align %d; ", launch, bytes, align
              if (launch > limit) printf "smem.launch %d > %d by %d; ", launch, limit, launch - limit }'
}

check() {
    cfg=$1; n=$2
    ptx=$dir/k$n.ptx
    if ! "$FA4GEN" mha --config "$cfg" -o "$ptx" 2>"$dir/e$n"; then
        echo "FAIL generate: $cfg: $(cat "$dir/e$n")"; return 1
    fi
    out=$("$PTXAS" -arch=sm_100a -v "$ptx" -o "$dir/k$n.cubin" 2>&1) || { echo "FAIL ptxas: $cfg: $out"; return 1; }
    json=$("$FA4GEN" explain --config "$cfg" --json)
    cluster=$(echo "$json" | sed -n 's/.*"cluster": \[\([0-9]*\), \([0-9]*\), \([0-9]*\)\].*/\1, \2, \3/p')
    if [ "$cluster" != "1, 1, 1" ] && ! grep -q "^\.reqnctapercluster $cluster\$" "$ptx"; then
        echo "FAIL cluster: $cfg: plan cluster $cluster, PTX: $(grep reqnctapercluster "$ptx")"; return 1
    fi
    if [ -n "${SM100_CUBINS:-}" ]; then
        key=$(printf '%s' "$cfg" | sha256sum | cut -c1-32)
        cp "$dir/k$n.cubin" "$SM100_CUBINS/$key.tmp" && mv "$SM100_CUBINS/$key.tmp" "$SM100_CUBINS/$key.cubin"
    fi
    rm -f "$ptx" "$dir/k$n.cubin"
    echo "$out" | grep -q "C7508" && { echo "FAIL setmaxnreg ignored (C7508): $cfg"; return 1; }
    echo "$out" | grep -qi "warning" && { echo "FAIL ptxas warning: $cfg: $(echo "$out" | grep -i warning | head -2)"; return 1; }
    echo "$out" | grep -q "0 bytes spill stores, 0 bytes spill loads" || {
        echo "FAIL spills: $cfg: $(echo "$out" | grep spill)"; return 1; }
    regs=$(echo "$out" | sed -n 's/.*Used \([0-9]*\) registers.*/\1/p')
    want=$(echo "$json" | sed -n 's/.*"entry_regs": \([0-9]*\).*/\1/p')
    [ "$regs" = "$want" ] || { echo "FAIL registers: $cfg: ptxas $regs, plan $want"; return 1; }
    bad=$(smem_check "$json")
    [ -z "$bad" ] || { echo "FAIL smem map: $cfg: $bad"; return 1; }
    launch=$(echo "$json" | sed -n 's/.*"smem": {[^}]*"launch": \([0-9]*\).*/\1/p')
    echo "ok   $cfg  (regs $regs, smem $launch B, cluster $cluster)"
}

run_matrix "sm100a ptxas matrix" "$MATRIX"
