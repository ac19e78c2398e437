"""timeline_model.py - bench/short_timeline.py's phase table, from the simulator's timing mode instead of a GPU.

    python3 bench/timeline_model.py [--gpu h200] [--shapes SUBSTR] [--variants "default;bn=64"] [--out FILE]

The sm90a MHA forward with the config word timeline=1 runs on the simulated driver (build/sim/libcuda.so.1) with
FA4SIM_TIMING=GPU: the clusters of the timing window run under the model's clock, so each tile's clock64 stamps are
modelled cycles (converted to ns at the table's clock_ghz); clusters outside the window leave their tiles' records
unwritten, so the table holds the window's tiles only. Same shapes, phases and columns as short_timeline.py, so the
two tables of a kernel read side by side: which phase the model prices wrong (issue 31), where a short tile's time
goes when no GPU is at hand (issue 30). Modelled: say so when quoting it. CPU only (no torch): test_args_fuzz.py's
duck-typed tensors. Needs build/libfa4rt.so and build/sim/libcuda.so.1.
"""
import argparse
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")


def table_clock(gpu):
    """The table's SM clock (GHz): the modelled cycles' rate."""
    path = gpu if os.path.isfile(gpu) else os.path.join(ROOT, "tests", "sim", "gpus", gpu + ".tbl")
    for line in open(path):
        w = line.split()
        if w and w[0] == "clock_ghz":
            return float(w[1])
    sys.exit("timeline_model: %s has no clock_ghz" % path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu", default="h200", help="timing table: h100, h200 or a .tbl path (default h200)")
    ap.add_argument("--shapes", default="", help="only shapes whose name contains this")
    ap.add_argument("--variants", default="default", help="';'-separated config words (default: the runtime's pick)")
    ap.add_argument("--samples", type=int, default=4, help="clusters the timing window simulates (default 4)")
    ap.add_argument("--out", help="also write the tables here")
    a = ap.parse_args()
    # before the simulated driver loads: it reads these once
    os.environ.update(FA4SIM_TIMING=a.gpu, FA4SIM_CC="90", FA4SIM_TIMING_SAMPLES=str(a.samples),
                      FA4GEN_COMPILER="driver-ptx")
    os.environ.setdefault("FA4GEN_CACHE_DIR", os.path.join(ROOT, "build", "timeline-model-cache"))
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    sys.path.insert(0, HERE)
    import test_args_fuzz as tf  # noqa: E402  (loads the simulated driver)
    import short_timeline as stl  # noqa: E402
    ns = 1.0 / table_clock(a.gpu)
    lines = ["# bench/timeline_model.py --gpu %s: modelled phase timeline (simulator timing mode, %d clusters simulated; "
             "stamps in modelled cycles at %.3f ns/cycle)" % (a.gpu, a.samples, ns)]
    for name, b, hq, hkv, s, d, causal in stl.SHAPES:
        if a.shapes not in name:
            continue
        rng = random.Random(1)
        q = tf.tensor((b, s, hq, d), tf.BF16)
        k, v = (tf.tensor((b, s, hkv, d), tf.BF16) for _ in range(2))
        for t in (q, k, v):
            tf.upload(t, tf.rand_bf16(rng, t.numel()))
        for words in a.variants.split(";"):
            words = "" if words.strip() == "default" else words.strip()
            tiles = -(-s // 64) * hq * b  # room for the smallest tile: the plan's tile may be larger
            ws = tf.tensor(((tiles + 1) * stl.NSLOTS * 8,), tf.DType("uint8", 1, "B"))
            tf.upload(ws, [0] * ws.numel())
            o, lse = tf.tensor((b, s, hq, d), tf.BF16), tf.tensor((b, hq, s), tf.FP32)
            tf.fa4.mha_fwd(q, k, v, causal=causal, out=o, lse=lse, return_lse=True, stream=0, num_splits=1,
                           workspace=ws, config=(words + " timeline=1").strip())
            raw = ctypes_raw(tf, ws, (tiles + 1) * stl.NSLOTS * 8)
            recs = [r for r in stl.decode(raw, tiles) if r["c_tile"]]  # the window's tiles
            summ = stl.summarize(recs, ns_per_cycle=ns)
            label = "%s [%s] (modelled, %s)" % (name, words or "default", a.gpu)
            lines += stl.report(label, summ)
            print("\n".join(stl.report(label, summ)), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")


def ctypes_raw(tf, t, nbytes):
    import ctypes
    buf = ctypes.create_string_buffer(nbytes)
    tf.cu("cuMemcpyDtoH", tf.sim.cuMemcpyDtoH_v2(buf, t.ptr, nbytes))
    return buf.raw


if __name__ == "__main__":
    main()
