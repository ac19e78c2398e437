#!/bin/sh
# tests/ptxas/ptx_digest.sh [FA4GEN] - one line per config of both ptxas matrices:
# the config and the sha256 of the PTX fa4gen emits for it. Diff two runs to show that a
# refactoring left every kernel byte-identical:
#   sh tests/ptxas/ptx_digest.sh > before.txt; ...; sh tests/ptxas/ptx_digest.sh | diff before.txt -
set -u
FA4GEN=${1:-build/fa4gen}
here=$(dirname "$0")
{
    # the sm_90a matrix as run.sh builds it (its list is the lines it echoes)
    sed -n '/^list=\$dir\/list$/,/^L$/p' "$here/run.sh" | sed 's/^list=.*/list=\/dev\/stdout/; s/ > "\$list"$//; s/^cat >> "\$list" <<.L.$/cat <<'"'"'L'"'"'/' > "${TMPDIR:-/tmp}/fa4_digest_list.$$"
    sh "${TMPDIR:-/tmp}/fa4_digest_list.$$"
    rm -f "${TMPDIR:-/tmp}/fa4_digest_list.$$"
    grep -v '^#' "$here/sm100_matrix.txt" | grep .
} | while IFS= read -r cfg; do
    printf '%s  %s\n' "$("$FA4GEN" "${cfg%% *}" --config "$cfg" | sha256sum | cut -c1-16)" "$cfg"
done
