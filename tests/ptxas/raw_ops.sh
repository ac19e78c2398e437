#!/bin/sh
# tests/ptxas/raw_ops.sh [FILE...] - kernel emitters speak in ops: no file of gen/sm90/ or
# gen/sm100/ other than the op layer (ops.c, ops_<part>.c) and the encodings (plan.c, desc.c) may spell an
# instruction the op layer owns. A spelling counts when it opens a C string literal, perhaps
# after a guard ("@%p " or "@%%p "): that is where an emitter writes an instruction, while prose
# in comments, notes and banners never opens one. Prints file:line of every raw spelling and
# 'raw ops lint: N passed, N failed' (one test per file, and one that the lint still catches a
# planted spelling); exit 1 on failure.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
# ([.] rather than a backslash: awk -v would take the backslash as an escape)
ops='mbarrier[.]|bar[.]|barrier[.]|shfl[.]|vote[.]|elect[.]|cvt[.]|cvta[.]|st[.]shared|ld[.]shared|fence[.]|cp[.]async|tcgen05[.]|wgmma[.]|setmaxnreg|mapa[.]'
pattern="\"(@!?%?%[A-Za-z_0-9]+ )?($ops)"

# scan FILE: print FILE:LINE: TEXT for each raw spelling outside C comments; status 1 if any.
scan() {
    awk -v pat="$pattern" -v f="$1" '
    {
        line = $0; out = ""
        # drop comments, keeping the line count: /* ... */ may span lines, // runs to the end
        while (line != "") {
            if (incom) {
                k = index(line, "*/")
                if (!k) { line = ""; break }
                line = substr(line, k + 2); incom = 0
            }
            a = index(line, "/*"); b = index(line, "//")
            if (a && (!b || a < b)) { out = out substr(line, 1, a - 1); line = substr(line, a + 2); incom = 1 }
            else if (b) { out = out substr(line, 1, b - 1); line = "" }
            else { out = out line; line = "" }
        }
        if (out ~ pat) { printf "%s:%d: %s\n", f, NR, $0; bad = 1 }
    }
    END { exit bad }' "$1"
}

if [ $# -gt 0 ]; then files="$*"; else
    files=$(ls "$root"/gen/sm90/*.c "$root"/gen/sm100/*.c | grep -Ev '/(ops(_[a-z0-9]+)?|plan|desc)\.c$')
fi
pass=0; fail=0
for f in $files; do
    if scan "$f"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done

# the lint itself: a planted raw spelling (guarded, as emitters write them) must be caught
tmp=$(mktemp)
printf '%s\n' '/* bar.sync in a comment is prose */' '    emit(e, "@%%p bar.sync 1, 128;");' > "$tmp"
if scan "$tmp" >/dev/null; then
    echo "raw ops lint: a planted 'bar.sync' was not caught"; fail=$((fail + 1))
else pass=$((pass + 1)); fi
rm -f "$tmp"

sh "$root/tests/report.sh" "raw ops lint" "$pass" "$fail"
