# tests/ptxas/lib.sh - sourced by the matrix scripts (run.sh, run_sm100.sh, sass_sm100.sh).
# run_matrix LABEL FILE: calls the script's `check CFG N` for every config line of FILE
# (blank lines and # comments skipped), prints 'LABEL: N passed, N failed', and
# returns 1 when any config failed.
run_matrix() {
    label=$1; file=$2; pass=0; fail=0; n=0
    while IFS= read -r cfg; do
        case "$cfg" in ''|'#'*) continue ;; esac
        n=$((n + 1))
        if check "$cfg" "$n"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
    done < "$file"
    echo "$label: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
