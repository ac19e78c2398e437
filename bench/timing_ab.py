"""timing_ab.py - does the simulator's timing model predict the sign of measured A/B differences? (issue 31)

    python3 bench/timing_ab.py MEASURED.json TABLE.tbl [--min-diff 0.03] [--jobs N] [--shapes SUBSTR]
                               [--out FILE]

MEASURED.json: a bench/short_shapes.py result (per shape, each variant's canonical config and its time under
CUDA graphs, all timed in one run on one GPU). TABLE.tbl: the GPU table to predict with (the one
tests/gpu/microbench.sh measured on that GPU). For every short shape and every variant whose kernel differs from
the default's and whose measured time differs from it by more than --min-diff, both kernels are predicted by
build/sim/timecase on the simulated device (FA4SIM_TIMING=TABLE, each config's tuning words pinned so the
runtime's shape rules pick exactly the measured kernel), and the line says whether the predicted difference has
the measured sign. No value of the table is fitted here: the measured times are only compared with.
Needs build/sim/libcuda.so.1 and build/sim/timecase; no GPU.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# every tuning word a variant may set (the shape and features come from the row): a word left out here would make
# the variant's prediction the default's kernel (store_wait / coords_late read +0.0% before they were listed)
TUNING = ("bm", "bn", "stages", "pingpong", "persistent", "rescale", "poly", "store_wait", "coords_late")


def case_of(row, config):
    """timecase's words for a short_shapes row run with this canonical config (tuning words pinned)."""
    words = dict(w.split("=", 1) for w in config.split()[1:] if "=" in w)
    pinned = " ".join("%s=%s" % (k, words[k]) for k in TUNING if k in words)
    return ("kind=mha batch=%d sq=%d sk=%d hq=%d hkv=%d qk=%d dtype=%s mask=%s config=\"%s\""
            % (row["B"], row["S"], row["S"], row["Hq"], row["Hkv"], row["D"], row["dtype"],
               "causal" if row["causal"] else "none", pinned))


def predict(case, table):
    """Predicted us of one case (the sum over its launches), or None with the reason."""
    with tempfile.TemporaryDirectory() as cache, tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write(case + "\n")
        f.flush()
        env = dict(os.environ, FA4GEN_COMPILER="driver-ptx", FA4GEN_CACHE_DIR=cache, FA4SIM_CC="90",
                   LD_LIBRARY_PATH=os.path.join(ROOT, "build", "sim"), FA4SIM_TIMING=os.path.abspath(table),
                   FA4SIM_TIMING_SAMPLES="2")
        r = subprocess.run([os.path.join(ROOT, "build", "sim", "timecase"), "--cases", f.name], env=env,
                           capture_output=True, text=True, timeout=600)
    m = re.search(r"^PRED .* us=([0-9.]+)", r.stdout, re.M)
    return (float(m.group(1)), "") if m else (None, (r.stdout + r.stderr).strip().splitlines()[-1:] or ["?"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("measured")
    ap.add_argument("table")
    ap.add_argument("--min-diff", type=float, default=0.03)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--shapes", default="")
    ap.add_argument("--out")
    args = ap.parse_args()
    d = json.load(open(args.measured))
    pairs = []
    for row in d["rows"]:
        if row.get("long") or (args.shapes and args.shapes not in row["shape"]):
            continue
        g, cfg = row["graph_us"], row["config"]
        for var, t in g.items():
            if var in ("cudnn", "default", "next") or var not in cfg or cfg[var] == cfg["default"] or t is None:
                continue
            diff = t / g["default"] - 1
            if abs(diff) > args.min_diff:
                pairs.append((row, var, diff))
    cases = sorted({case_of(r, r["config"][v]) for r, v, _ in pairs} | {case_of(r, r["config"]["default"])
                                                                        for r, _, _ in pairs})
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        pred = dict(zip(cases, pool.map(lambda c: predict(c, args.table), cases)))
    lines = ["# timing_ab.py: %s (%s) vs the timing model with %s; pairs whose measured times differ by more "
             "than %.0f%%" % (args.measured, d.get("gpu", "?"), args.table, 100 * args.min_diff),
             "%-32s %-14s %9s %9s %6s" % ("shape", "variant", "measured", "predicted", "sign")]
    agree = n = 0
    for row, var, diff in pairs:
        a, why_a = pred[case_of(row, row["config"]["default"])]
        b, why_b = pred[case_of(row, row["config"][var])]
        if a is None or b is None:
            lines.append("%-32s %-14s %+8.1f%% %9s  (%s)" % (row["shape"], var, 100 * diff, "NONE",
                                                              (why_a or why_b)[0][:80]))
            continue
        pdiff = b / a - 1
        ok = (pdiff > 0) == (diff > 0)
        agree += ok
        n += 1
        lines.append("%-32s %-14s %+8.1f%% %+8.1f%% %6s" % (row["shape"], var, 100 * diff, 100 * pdiff,
                                                            "ok" if ok else "WRONG"))
    lines.append("timing A/B: the model has the measured sign on %d of %d pairs (variant vs default, > %.0f%%)"
                 % (agree, n, 100 * args.min_diff))
    print("\n".join(lines), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0 if n and agree == n else 1


if __name__ == "__main__":
    sys.exit(main())
