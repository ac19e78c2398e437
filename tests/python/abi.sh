#!/bin/sh
# tests/python/abi.sh - python/fa4.py's ctypes structs have fa4.h's sizes and field offsets.
# Prints 'python abi: N passed, N failed'.
set -u
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
${CC:-gcc} -std=c11 -Iruntime tests/python/abi.c -o "$out/abi" || exit 1
"$out/abi" > "$out/c.txt"
PYTHONPATH=python python3 - "$out/c.txt" <<'PY' || exit 1
import ctypes, os, sys, fa4
names = {"fa4_options": fa4._Options, "fa4_mha_args": fa4._MhaArgs, "fa4_mla_sparse_args": fa4._MlaSparseArgs,
         "fa4_bundle": fa4._Bundle, "fa4_cache_entry": fa4._CacheEntry,
         "fa4_mha_bwd_args": fa4._MhaBwdArgs, "fa4_kv_append_args": fa4._KvAppendArgs}
ok = bad = 0
for line in open(sys.argv[1]):
    key, val = line.split()
    if "." in key:
        s, f = key.split(".")
        got = getattr(names[s], f).offset
    else:
        got = ctypes.sizeof(names[key])
    if got == int(val):
        ok += 1
    else:
        bad += 1
        print("FAIL %s: C %s, python %d" % (key, val, got))
line = "python abi: %d passed, %d failed" % (ok, bad)
print(line)
if os.environ.get("FA4_TEST_SUMMARY"):  # make test's total (tests/report.sh)
    with open(os.environ["FA4_TEST_SUMMARY"], "a") as f:
        f.write(line + "\n")
sys.exit(1 if bad else 0)
PY
