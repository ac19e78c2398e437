#!/bin/sh
# tests/ptxas/ptx_digest.sh [FA4GEN] - one line per config of the ptxas matrices: the config and the
# sha256 of the PTX fa4gen emits for it. Diff two runs to show that a change left every kernel it should
# not touch byte-identical:
#   sh tests/ptxas/ptx_digest.sh > before.txt; ...; sh tests/ptxas/ptx_digest.sh | diff before.txt -
# The lines: the sm_90a matrix as run.sh builds it and tests/ptxas/sm100_matrix.txt (the dense kernels),
# then tests/ptxas/split_matrix.txt (split-KV, combine) and the configs run_serving.sh builds (varlen,
# paged; its refused ones left out), tests/ptxas/mla_sm100_matrix.txt (sm_100a sparse MLA, both kernels),
# tests/ptxas/bwd_matrix.txt (the backward's kernels), the "fits" configs of tests/ptxas/spill_matrix.txt and
# run_features.sh's list (sinks, softcap=1, alibi=1, and its score_mod files: "CONFIG|MOD"). A config fa4gen
# refuses prints "FAIL" in place of the digest.
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
# run_features.sh's list (from list=$dir/list to the loop's done), on stdout
features_list() {
    sed -n '/^list=\$dir\/list$/,/^done > "\$list"$/p' "$1" | sed '1d; s/^done > "\$list"$/done/' > "$tmp"
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
    features_list "$here/run_features.sh"
} | while IFS= read -r line; do
    cfg=${line%|*}; mod=${line##*|}; mod=${mod%\~}
    set -- "${cfg%% *}" --config "$cfg"
    case "$line" in *\|) ;; *\|*) set -- "$@" --score-mod "$here/mods/$mod.cu" ;; esac
    if ptx=$("$FA4GEN" "$@" 2>/dev/null); then
        printf '%s  %s\n' "$(printf '%s\n' "$ptx" | sha256sum | cut -c1-16)" "$line"
    else
        printf 'FAIL              %s\n' "$line"
    fi
done
