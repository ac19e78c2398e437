#!/bin/sh
# tests/fuzz/parallel.sh SECONDS "NAME:WORKERS ..." BIN_DIR OUT_DIR
# Long libFuzzer runs on a many-core machine (the GPU host has 16 cores and no clang: the harnesses are
# built here with `make fuzz-build` and carried there). Each harness runs in fork mode with WORKERS
# processes for SECONDS over BIN_DIR/corpus_NAME (grown in place) plus the committed seeds; logs and the
# grown corpus (a tarball) go to OUT_DIR. Runs the harnesses side by side, waits for all.
set -u
secs=$1; spec=$2; bin=$3; out=$4
mkdir -p "$out"
for nw in $spec; do
    n=${nw%%:*}; w=${nw##*:}
    mkdir -p "$bin/corpus_$n"
    ( "$bin/fuzz_$n" -fork="$w" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$out/$n-" \
        "$bin/corpus_$n" "tests/fuzz/corpus/$n" > "$out/fuzz_$n.log" 2>&1
      echo "exit $?" >> "$out/fuzz_$n.log"
      tar -C "$bin" -cJf "$out/corpus_$n.tar.xz" "corpus_$n" ) &
done
wait
for nw in $spec; do n=${nw%%:*}
    echo "fuzz_$n: $(grep -E '^#[0-9]+' "$out/fuzz_$n.log" | tail -1) | $(tail -1 "$out/fuzz_$n.log")"
done
