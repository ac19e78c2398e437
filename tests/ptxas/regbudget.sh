#!/bin/sh
# tests/ptxas/regbudget.sh [FA4GEN] - the register budgets of every kernel that uses setmaxnreg, checked
# statically against the 64K registers of an SM (evidence level: the plan and the PTX, no ptxas needed).
# For each config of the sm_100a MHA, sm_100a sparse MLA, split and backward matrices, and the sm_90a
# configs below, `fa4gen explain` prints the plan's roles -- "roles (N threads; R registers per thread at
# entry)" and one line per role "NAME warps A..B regs X" -- which is the claim; the generated PTX is the
# fact. Checked:
#   - the roles' warps cover 0 .. N/32 - 1 once each, and every warpgroup has one budget (setmaxnreg acts
#     on a whole warpgroup);
#   - sum over warps of 32 x budget <= 65536 / CTAs per SM (.minnctapersm of the PTX, else 1), and
#     N x R <= the same: the CTA's share of the register file at entry and after every setmaxnreg;
#   - every setmaxnreg of the PTX requests a role's budget (and the one its role banner's "plan regs X"
#     names, where the banner names one), .dec lowers and .inc raises the entry count R, and each immediate
#     is a multiple of 8 in 24..256;
#   - a kernel with roles of different budgets executes setmaxnreg (a plan of budgets the PTX never
#     requests would be a claim without effect).
# A kernel without setmaxnreg whose plan claims more than the SM holds prints WARN (ptxas, not the plan,
# sets its register count then). Prints one line per kernel with a budget and 'register budgets: N passed, N failed'; exit 1 on failure.
set -u
. "$(dirname "$0")/lib.sh"
matrix_setup "$@"
here=$(dirname "$0")
pass=0
fail=0

# check CFG: the config's plan and PTX
check() {
    cfg=$1
    kind=${cfg%% *}
    plan=$("$FA4GEN" explain --config "$cfg" 2>&1) || { echo "FAIL $cfg: explain: $(echo "$plan" | head -1)"; return 1; }
    "$FA4GEN" "$kind" --config "$cfg" -o "$dir/k.ptx" 2>"$dir/err" || { echo "FAIL $cfg: $(head -1 "$dir/err")"; return 1; }
    head=$(echo "$plan" | sed -n 's/^roles (\([0-9]*\) threads; \([0-9]*\) registers per thread at entry).*/\1 \2/p')
    [ -n "$head" ] || return 2 # no roles (a kernel without warp specialisation)
    minctas=$(sed -n 's/^\.minnctapersm \([0-9]*\).*/\1/p' "$dir/k.ptx" | head -1)
    echo "$plan" | sed -n 's/^  \([a-z0-9_]*\) *warps *\([0-9]*\)\.\.\([0-9]*\) *regs *\([0-9]*\).*/\1 \2 \3 \4/p' >"$dir/roles"
    grep -n 'setmaxnreg\|// ====' "$dir/k.ptx" >"$dir/ptx_lines"
    why=$(awk -v head="$head" -v minctas="${minctas:-1}" '
        FILENAME == ARGV[1] {                 # roles: name first last regs
            for (w = $2; w <= $3; w++) { n[w]++; b[w] = $4 }
            budgets[$4] = 1
            if (NR == 1) fb = $4
            else if ($4 != fb) differ = 1
            next
        }
        {                                     # PTX lines: banners and setmaxnreg
            ln = $0; sub(/:.*/, "", ln); ln += 0
            if ($0 ~ /\/\/ ====/) { banner = $0; bline = ln; next }
            if ($0 !~ /setmaxnreg[.](inc|dec)/) next
            nset++
            v = $0; sub(/.*u32 */, "", v); sub(/;.*/, "", v); v += 0
            if (v % 8 || v < 24 || v > 256) err = err sprintf("setmaxnreg %d: not a multiple of 8 in 24..256; ", v)
            if ($0 ~ /\.dec/ && v >= entry) err = err sprintf(".dec to %d does not lower the entry %d; ", v, entry)
            if ($0 ~ /\.inc/ && v <= entry) err = err sprintf(".inc to %d does not raise the entry %d; ", v, entry)
            if (ln - bline <= 1 && banner ~ /plan regs/ && banner !~ ("plan regs " v "[^0-9]"))
                err = err sprintf("setmaxnreg %d under a banner that says otherwise: %s; ", v, banner)
            if (!(v in budgets)) err = err sprintf("setmaxnreg %d is the budget of no role; ", v)
        }
        BEGIN { split(head, h, " "); threads = h[1]; entry = h[2]; differ = 0 }
        END {
            share = int(65536 / minctas)
            warps = threads / 32
            sum = 0
            for (w = 0; w < warps; w++) {
                if (n[w] != 1) err = err sprintf("warp %d in %d roles; ", w, n[w] + 0)
                sum += 32 * b[w]
                g = int(w / 4)
                if (g in gb && gb[g] != b[w]) err = err sprintf("warpgroup %d has budgets %d and %d; ", g, gb[g], b[w])
                gb[g] = b[w]
            }
            for (w in n) if (w + 0 >= warps) err = err sprintf("role warp %d past the %d warps; ", w, warps)
            if (!nset) warn = 1 # no setmaxnreg: the budgets are caps for ptxas, no deadlock can follow
            if (sum > share) err = err sprintf("role budgets sum to %d registers > %d (64K / %d CTA(s) per SM); ", sum, share, minctas)
            if (threads * entry > share) err = err sprintf("entry %d x %d threads = %d > %d; ", entry, threads, threads * entry, share)
            if (differ && !nset) err = err "roles of different budgets but no setmaxnreg; "
            printf "%s|%d|%d|%d", err, sum, share, warn
        }' "$dir/roles" "$dir/ptx_lines")
    err=${why%%|*}
    rest=${why#*|}
    sum=${rest%%|*} rest=${rest#*|}
    share=${rest%%|*} warn=${rest#*|}
    if [ -n "$err" ] && [ "$warn" = 1 ]; then
        # no setmaxnreg: ptxas picks the register count (and a launch of too many fails loudly), so a plan
        # whose claim exceeds the SM is a wrong claim, not a deadlock
        echo "WARN $cfg: no setmaxnreg, but the plan claims: $err"
        return 0
    fi
    if [ -n "$err" ]; then echo "FAIL $cfg: $err"; return 1; fi
    echo "ok   $cfg: $sum of $share registers"
    return 0
}

run() {
    while IFS= read -r cfg; do
        case "$cfg" in ''|'#'*) continue ;; esac
        case "$cfg" in mha\ *|mla-sparse\ *|mha-bwd\ *) ;; *) continue ;; esac
        check "$cfg"
        echo "rc $?" >>"$dir/rcs"
    done
}

: >"$dir/rcs"
{
    cat "$here/sm100_matrix.txt" "$here/mla_sm100_matrix.txt" "$here/split_matrix.txt" "$here/bwd_matrix.txt"
    # sm_90a: the default tiles of each depth and dtype, pingpong and not, and the sparse MLA kernel
    for d in 64 128 256; do
        for t in bf16 fp16; do echo "mha target=sm90a dtype=$t qk=$d ov=$d mask=causal"; done
    done
    echo "mha target=sm90a dtype=bf16 qk=128 ov=128 bm=128 bn=128 stages=2 pingpong=1 persistent=1 rescale=0 mask=causal"
    echo "mha target=sm90a dtype=bf16 qk=128 ov=128 pingpong=0 mask=none"
    echo "mla-sparse target=sm90a dtype=bf16 qk=576 ov=512"
} | run
pass=$(grep -c '^rc 0' "$dir/rcs")
fail=$(grep -c '^rc 1' "$dir/rcs")
sh "$here/../report.sh" "register budgets" "$pass" "$fail"
