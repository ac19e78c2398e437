"""timing_ab.py - does the simulator's timing model predict the sign of measured A/B differences? (issue 31)

    python3 bench/timing_ab.py MEASURED.json TABLE.tbl [--min-diff 0.03] [--jobs N] [--shapes SUBSTR]
                               [--out FILE]
    python3 bench/timing_ab.py --list bench/timing_ab_notes.txt [--measured TIME.txt] [--jobs N] [--out FILE]
    python3 bench/timing_ab.py --cases bench/timing_ab_notes.txt [ROUNDS]  (the timecase lines, for tests/gpu/ab_notes.sh)

MEASURED.json: a bench/short_shapes.py result (per shape, each variant's canonical config and its time under
CUDA graphs, all timed in one run on one GPU). TABLE.tbl: the GPU table to predict with (the one
tests/gpu/microbench.sh measured on that GPU). For every short shape and every variant whose kernel differs from
the default's and whose measured time differs from it by more than --min-diff, both kernels are predicted by
build/sim/timecase on the simulated device (FA4SIM_TIMING=TABLE, each config's tuning words pinned so the
runtime's shape rules pick exactly the measured kernel), and the line says whether the predicted difference has
the measured sign. No value of the table is fitted here: the measured times are only compared with.
--list FILE: the A/B experiments bench/NOTES.md records (one per line: table | timecase words | base config | variant
config | measured change | source), each predicted with its GPU's table (tests/sim/gpus/NAME.tbl). With
--measured: build/sim/timecase's TIME lines of the same cases timed again on a GPU (tests/gpu/ab_notes.sh), today's
kernels; the sign is then checked against that run (the recorded change is printed beside it), with its GPU's table:
a case timed in several rounds gives the median of the per-round changes, and a pair is judged only when that median
is over 3% and every round's change has its sign ("noisy" otherwise: the GPU measured no change it repeats).
Needs build/sim/libcuda.so.1 and build/sim/timecase; no GPU. TIMING_AB_SAMPLES=N: clusters simulated per launch
(default 8, about 20 minutes for the list on 2 cores; the persistent grids' CTAs each walk their own tiles, and 2
samples misjudge their spread).
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
# a predicted change smaller than this is "no difference": wrong against a measured one over the threshold
NONE = 0.005
MIN_DIFF = 0.03  # measured changes at most this large are not judged
# every tuning word a variant may set (the shape and features come from the row): a word left out here would make
# the variant's prediction the default's kernel (store_wait / coords_late read +0.0% before they were listed)
TUNING = ("bm", "bn", "stages", "pingpong", "persistent", "rescale", "poly", "store_wait", "coords_late", "occupancy",
          "head_major", "diag_half")


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
                   FA4SIM_TIMING_SAMPLES=os.environ.get("TIMING_AB_SAMPLES", "8"))
        r = subprocess.run([os.path.join(ROOT, "build", "sim", "timecase"), "--cases", f.name], env=env,
                           capture_output=True, text=True, timeout=600)
    m = re.search(r"^PRED .* us=([0-9.]+)", r.stdout, re.M)
    return (float(m.group(1)), "") if m else (None, (r.stdout + r.stderr).strip().splitlines()[-1:] or ["?"])


def sign_ok(pdiff, diff):
    """The predicted change has the measured one's sign (and is not too small to be one)."""
    return abs(pdiff) >= NONE and (pdiff > 0) == (diff > 0)


def emit(lines, out):
    print("\n".join(lines), flush=True)
    if out:
        with open(out, "w") as f:
            f.write("\n".join(lines) + "\n")


def with_config(words, config):
    return words if config == "-" else '%s config="%s"' % (words, config)


def read_list(path, gpu=None):
    """The recorded experiments: (gpu, its table, words, base case, variant case, recorded change, variant, source);
    gpu names the table to predict with instead of each line's own."""
    rows = []
    for line in open(path):
        if line.strip() and not line.startswith("#"):
            f = [x.strip() for x in line.split("|")]
            g = gpu or f[0]
            table = os.path.join(ROOT, "tests", "sim", "gpus", g + ".tbl")
            rows.append((g, table, f[1], with_config(f[1], f[2]), with_config(f[1], f[3]), float(f[4]) / 100,
                         f[3], f[5]))
    return rows


def read_times(path):
    """timecase's `TIME <case> us=X` lines: {case: [us of each round, in file order]} (tests/gpu/ab_notes.sh times
    the case list AB_ROUNDS times)."""
    t = {}
    for line in open(path):
        m = re.match(r"^TIME (.*) us=([0-9.]+)", line)
        if m:
            t.setdefault(m.group(1).strip(), []).append(float(m.group(2)))
    return t


def measured_change(tb, tv):
    """A pair's measured change from its rounds: (median of the per-round changes, lowest, highest). A round is the
    i-th timing of each case (the rounds alternate the cases' order, so each round's two timings are close in time)."""
    d = sorted(v / b - 1 for b, v in zip(tb, tv))
    return d[len(d) // 2] if len(d) % 2 else (d[len(d) // 2 - 1] + d[len(d) // 2]) / 2, d[0], d[-1]


def run_list(path, jobs, out, measured=None, gpu=None):
    """--list: the recorded experiments, each against its own GPU's table (or against a run of today's kernels)."""
    rows = read_list(path, gpu)
    times = read_times(measured) if measured else None
    cases = sorted({(r[1], r[3]) for r in rows} | {(r[1], r[4]) for r in rows})
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        pred = dict(zip(cases, pool.map(lambda c: predict(c[1], c[0]), cases)))
    lines = ["# timing_ab.py --list %s: each recorded A/B experiment predicted with %s" %
             (path, "the %s table, measured again in %s (today's kernels)" % (gpu, measured) if times
              else "its GPU's table"),
             "%-5s %-62s %-20s %9s %9s %9s %6s" % ("gpu", "case", "variant", "recorded", "measured", "predicted",
                                                   "sign")]
    agree = n = 0
    for g, table, words, base, var, rec, vname, src in rows:
        (a, why_a), (b, why_b) = pred[(table, base)], pred[(table, var)]
        diff, lo, hi = rec, rec, rec
        if times is not None:
            tb, tv = times.get(base.replace('"', "")), times.get(var.replace('"', ""))  # timecase drops the quotes
            if tb is None or tv is None:
                lines.append("%-5s %-62s %-20s %+8.1f%% %9s" % (g, words, vname, 100 * rec, "NONE"))
                continue
            diff, lo, hi = measured_change(tb, tv)
        if a is None or b is None:
            lines.append("%-5s %-62s %-20s %+8.1f%% %+8.1f%% %9s  (%s)" % (g, words, vname, 100 * rec, 100 * diff,
                                                                          "NONE", (why_a or why_b)[0][:80]))
            continue
        pdiff = b / a - 1
        spread = "" if lo == hi else "  rounds %+.1f..%+.1f%%" % (100 * lo, 100 * hi)
        # judged: a change over 3% whose every round has its sign (a pair whose rounds disagree measured no change)
        verdict = "<= 3%" if abs(diff) <= MIN_DIFF else "noisy" if lo < 0 < hi else None
        if verdict:
            lines.append("%-5s %-62s %-20s %+8.1f%% %+8.1f%% %+8.1f%% %6s%s" % (
                g, words, vname, 100 * rec, 100 * diff, 100 * pdiff, verdict, spread))
            continue
        ok = sign_ok(pdiff, diff)
        agree, n = agree + ok, n + 1
        lines.append("%-5s %-62s %-20s %+8.1f%% %+8.1f%% %+8.1f%% %6s%s" % (
            g, words, vname, 100 * rec, 100 * diff, 100 * pdiff, "ok" if ok else "WRONG", spread))
    rounds = max((len(v) for v in times.values()), default=0) if times else 0
    lines.append("timing A/B (recorded experiments%s): the model has the measured sign on %d of %d that differ by "
                 "more than 3%%%s" % (", timed again" if times else "", agree, n,
                                      " in the median of %d rounds, each round with that sign" % rounds
                                      if rounds > 1 else ""))
    emit(lines, out)
    return 0 if n and agree == n else 1


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--cases":
        # --cases LIST [ROUNDS]: the cases ROUNDS times, every other round in reverse order (a drift in the GPU's
        # state then falls on base and variant alike)
        cases = sorted({c for r in read_list(sys.argv[2]) for c in (r[3], r[4])})
        rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1
        print("\n".join(c for i in range(rounds) for c in (cases if i % 2 == 0 else cases[::-1])))
        return 0
    if len(sys.argv) > 2 and sys.argv[1] == "--list":
        ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
        ap.add_argument("--list", required=True)
        ap.add_argument("--measured", help="timecase TIME lines of the same cases (tests/gpu/ab_notes.sh)")
        ap.add_argument("--gpu", default="h200", help="with --measured: the table to predict with [h200]")
        ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
        ap.add_argument("--out")
        a = ap.parse_args()
        return run_list(a.list, a.jobs, a.out, a.measured, a.gpu if a.measured else None)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("measured")
    ap.add_argument("table")
    ap.add_argument("--min-diff", type=float, default=MIN_DIFF)
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
        ok = sign_ok(pdiff, diff)
        agree += ok
        n += 1
        lines.append("%-32s %-14s %+8.1f%% %+8.1f%% %6s" % (row["shape"], var, 100 * diff, 100 * pdiff,
                                                            "ok" if ok else "WRONG"))
    lines.append("timing A/B: the model has the measured sign on %d of %d pairs (variant vs default, > %.0f%%)"
                 % (agree, n, 100 * args.min_diff))
    emit(lines, args.out)
    return 0 if n and agree == n else 1


if __name__ == "__main__":
    sys.exit(main())
