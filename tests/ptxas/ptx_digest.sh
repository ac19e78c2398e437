#!/bin/sh
# tests/ptxas/ptx_digest.sh [FA4GEN] - one line per config of the ptxas matrices: the config and the
# sha256 of the PTX fa4gen emits for it. Diff two runs to show that a change left every kernel it should
# not touch byte-identical:
#   sh tests/ptxas/ptx_digest.sh > before.txt; ...; sh tests/ptxas/ptx_digest.sh | diff before.txt -
# The lines: the sm_90a matrix as run.sh builds it and tests/ptxas/sm100_matrix.txt (the dense kernels),
# then tests/ptxas/split_matrix.txt (split-KV, combine) and the configs run_serving.sh builds (varlen,
# paged; its refused ones left out), tests/ptxas/mla_sm100_matrix.txt (sm_100a sparse MLA, both kernels),
# tests/ptxas/bwd_matrix.txt (the backward's kernels) and the "fits" configs of tests/ptxas/spill_matrix.txt.
set -u
FA4GEN=${1:-build/fa4gen}
here=$(dirname "$0")
tmp=${TMPDIR:-/tmp}/fa4_digest_list.$$
# the list a matrix script writes to "$list" (from list=$dir/list to the heredoc's end), on stdout
script_list() {
    sed -n '/^list=\$dir\/list$/,/^L$/p' "$1" | sed 's/^list=.*/list=\/dev\/stdout/; s/ >>* "\$list"$//; s/^cat >> "\$list" <<.L.$/cat <<'"'"'L'"'"'/' > "$tmp"
    sh "$tmp"
    rm -f "$tmp"
}
{
    script_list "$here/run.sh"
    grep -v '^#' "$here/sm100_matrix.txt" | grep .
    grep -v '^#' "$here/split_matrix.txt" | grep .
    script_list "$here/run_serving.sh" | grep -v '^refuse '
    grep -v '^#' "$here/mla_sm100_matrix.txt" | grep .
    grep -v '^#' "$here/bwd_matrix.txt" | grep .
    sed -n 's/^fits //p' "$here/spill_matrix.txt"
} | while IFS= read -r cfg; do
    printf '%s  %s\n' "$("$FA4GEN" "${cfg%% *}" --config "$cfg" | sha256sum | cut -c1-16)" "$cfg"
done
