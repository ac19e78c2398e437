#!/bin/sh
# tests/ptxas/pow2_div.sh [FA4GEN] - no kernel divides by a power of two: ptxas 13.0 does not strength-reduce a
# PTX div or rem by an immediate (div.u32 by 128 assembles to 14 SASS instructions: I2F, MUFU.RCP, F2I and a
# correction; cuobjdump, sm_90a and sm_100a alike), so the generator spells those as shifts and masks
# (gen/ptx.c emit_div_imm / emit_rem_imm; bench/NOTES.md "The integer division"). Every kind of kernel on every
# target, in the forms that reach other code paths (GQA packed, split, cluster, varlen, paged, 64-row tiles,
# fp16/e4m3, the CTA pair, the backward's kernels, the combine, the kv append), is generated and its PTX searched
# for a div or rem whose divisor is an immediate power of two (1 included). A planted line must be caught.
# Prints one line per kernel that fails and 'pow2 div lint: N passed, N failed'; exit 1 on failure.
set -u
fa4gen=${1:-build/fa4gen}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pass=0; fail=0

# a div/rem whose last operand is 1, 2, 4, ..., 2^31 (decimal, as the generator prints immediates)
found() {
    grep -nE '(div|rem)\.[us](32|64) [^,]+, [^,]+, (1|2|4|8|16|32|64|128|256|512|1024|2048|4096|8192|16384|32768|65536|131072|262144|524288|1048576|2097152|4194304|8388608|16777216|33554432|67108864|134217728|268435456|536870912|1073741824|2147483648);' "$1"
}

check() { # a fa4gen command line: generate, search
    ptx=$dir/k.ptx
    # shellcheck disable=SC2086 # the words of the command line
    if ! "$fa4gen" "$@" -o "$ptx" > "$dir/err" 2>&1; then
        echo "FAIL fa4gen $*: $(head -c 200 "$dir/err")"; fail=$((fail + 1)); return
    fi
    if hit=$(found "$ptx"); then
        echo "FAIL fa4gen $*: a division by a power of two: $(echo "$hit" | head -2)"; fail=$((fail + 1))
    else
        pass=$((pass + 1))
    fi
}

for cfg in \
    "mha target=sm90a dtype=bf16 qk=64 ov=64 mask=causal" \
    "mha target=sm90a dtype=bf16 qk=128 ov=128 mask=none" \
    "mha target=sm90a dtype=fp16 qk=256 ov=256 mask=causal" \
    "mha target=sm90a dtype=bf16 qk=128 ov=128 group=4 mask=causal" \
    "mha target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=64 group=8 stages=3 split=1 prefetch=2 mask=causal" \
    "mha target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=64 group=8 stages=3 split=1 cluster=4 mask=none" \
    "mha target=sm90a dtype=bf16 qk=128 ov=128 varlen=1 mask=causal" \
    "mha target=sm90a dtype=bf16 qk=128 ov=128 bm=64 bn=64 stages=3 group=8 split=1 page=64 mask=none" \
    "mha target=sm90a dtype=bf16 qk=64 ov=64 bm=64 bn=64 pingpong=0 occupancy=2 mask=none" \
    "mha target=sm90a dtype=bf16 qk=128 ov=128 mask=window:64,0" \
    "mha target=sm100a dtype=bf16 qk=128 ov=128 mask=causal" \
    "mha target=sm100a dtype=bf16 qk=64 ov=64 group=8 mask=none" \
    "mha target=sm100a dtype=e4m3 qk=128 ov=128 mask=causal" \
    "mha target=sm100a dtype=bf16 qk=128 ov=128 cta=2 mask=causal" \
    "mha target=sm100a dtype=bf16 qk=128 ov=128 group=8 split=1 page=64 mask=none" \
    "mha target=sm100a dtype=bf16 qk=192 ov=128 mask=causal" \
    "mha target=sm103a dtype=bf16 qk=128 ov=128 mask=causal" \
    "mla-sparse target=sm90a dtype=bf16 qk=576 ov=512" \
    "mla-sparse target=sm100a dtype=bf16 qk=576 ov=512 cta_group=2" \
    "mla-sparse target=sm100a dtype=bf16 qk=576 ov=512 cta_group=1"; do
    check "${cfg%% *}" --config "$cfg"
done
check mha-bwd --target sm90a --depth 256 # (d256: sm90a only)
for t in sm90a sm100a; do
    for d in 64 128; do check mha-bwd --target $t --depth $d; done
    check mha-bwd --target $t --depth 128 --mask causal --group 4
    check mha-bwd-pre --target $t --depth 128
    check mha-bwd-dq --target $t --depth 128
    check combine --target $t --ov-depth 128
    check kv-append --target $t --depth 128
done

# the lint itself: a planted division by 128 is found, a division by a register or by 96 is not
printf '    div.u32 %%a, %%b, 128;\n' > "$dir/planted.ptx"
printf '    div.u32 %%a, %%b, %%c;\n    rem.u32 %%a, %%b, 96;\n' > "$dir/clean.ptx"
if found "$dir/planted.ptx" > /dev/null && ! found "$dir/clean.ptx" > /dev/null; then pass=$((pass + 1))
else echo "FAIL the lint: a planted division by 128 not found, or a clean one flagged"; fail=$((fail + 1)); fi

sh "$(dirname "$0")/../report.sh" "pow2 div lint" "$pass" "$fail"
