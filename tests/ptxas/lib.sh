# tests/ptxas/lib.sh - sourced by the matrix scripts (run.sh, run_sm100.sh, sass_sm100.sh, run_split.sh,
# run_serving.sh, run_features.sh).
# matrix_setup [FA4GEN]: sets FA4GEN (default build/fa4gen), PTXAS (ptxas on PATH, else the toolkit's
# under CUDA_HOME) and dir, a scratch folder removed on exit.
matrix_setup() {
    FA4GEN=${1:-build/fa4gen}
    PTXAS=${PTXAS:-ptxas}
    command -v "$PTXAS" >/dev/null 2>&1 || PTXAS=${CUDA_HOME:-/usr/local/cuda}/bin/ptxas
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
}

# run_matrix LABEL FILE: calls the script's `check CFG N` for every config line of FILE
# (blank lines and # comments skipped), prints 'LABEL: N passed, N failed' (tests/report.sh), and
# returns 1 when any config failed.
#   MATRIX_LIST=1      check nothing: print 'LABEL: ENTRY' per entry (tests/docs_check.py counts them)
#   MATRIX_SAMPLE=K    check every K-th config only, the first included (make test-quick)
run_matrix() {
    label=$1; file=$2; pass=0; fail=0; n=0
    if [ -n "${MATRIX_LIST:-}" ]; then
        grep -v '^#' "$file" | grep . | sed "s|^|$label: |"
        return 0
    fi
    while IFS= read -r cfg; do
        case "$cfg" in ''|'#'*) continue ;; esac
        n=$((n + 1))
        if [ "${MATRIX_SAMPLE:-1}" -gt 1 ] && [ $(( (n - 1) % MATRIX_SAMPLE )) -ne 0 ]; then continue; fi
        if check "$cfg" "$n"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
    done < "$file"
    [ "${MATRIX_SAMPLE:-1}" -gt 1 ] && label="$label (1 config in $MATRIX_SAMPLE)"
    sh "$(dirname "$0")/../report.sh" "$label" "$pass" "$fail"
}
