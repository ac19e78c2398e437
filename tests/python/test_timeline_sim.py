"""tests/python/test_timeline_sim.py - the config word timeline=1 through fa4.mha_fwd on the simulated driver (no
torch, no GPU; test_args_fuzz.py's duck-typed tensors), and bench/short_timeline.py's decoder on its records.

  - the kernel with stamps writes O and LSE bit for bit as the kernel without them (same inputs), and both match
    the fp64 reference;
  - every tile's record: its id word names a CTA that strides to it (tile % grid), the producer's and consumer
    0's stamps are all written and in order (short_timeline.check), the globaltimer pair too; a tile never
    reached stays zero;
  - short_timeline.summarize gives every phase a count of the tiles;
  - refusals: a workspace that cannot hold the records, and timeline with a split, each naming what is wrong.
Prints one line per case and 'timeline sim: N passed, N failed'. Run by make unit.
"""
import ctypes
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import test_args_fuzz as tf  # noqa: E402  (loads the simulated driver first)
import short_timeline as stl  # noqa: E402
from report import Tally  # noqa: E402  (tests/report.py: the suite line make test sums)

fa4 = tf.fa4
tally = Tally()
check = tally.check


def raw(t, nbytes):
    buf = ctypes.create_string_buffer(nbytes)
    tf.cu("cuMemcpyDtoH", tf.sim.cuMemcpyDtoH_v2(buf, t.ptr, nbytes))
    return buf.raw


def run_case(label, b, s, h, d, causal, words, bm):
    rng = random.Random(7)
    q, k, v = (tf.tensor((b, s, h, d), tf.BF16) for _ in range(3))
    host = [tf.rand_bf16(rng, t.numel()) for t in (q, k, v)]
    for t, x in zip((q, k, v), host):
        tf.upload(t, x)
    tiles = -(-s // bm) * h * b
    outs = []
    for tl in (False, True):
        o, lse = tf.tensor((b, s, h, d), tf.BF16), tf.tensor((b, h, s), tf.FP32)
        kw = dict(causal=causal, out=o, lse=lse, return_lse=True, stream=0, config=words)
        ws = None
        if tl:
            ws = tf.tensor(((tiles + 1) * stl.NSLOTS * 8,), tf.DType("uint8", 1, "B"))
            tf.upload(ws, [0] * ws.numel())
            kw.update(config=words + " timeline=1", num_splits=1, workspace=ws)
        fa4.mha_fwd(q, k, v, **kw)
        check("%s: ran%s" % (label, " with timeline=1" if tl else ""), tf.healthy())
        outs.append((raw(o, o.numel() * 2), raw(lse, lse.numel() * 4), ws))
    check("%s: O and LSE bit-identical with the stamps" % label, outs[0][:2] == outs[1][:2])
    # the reference, per batch (test_args_fuzz.attention works on one sequence of [s, h, d])
    o_ref, lse_ref = [], []
    per = s * h * d
    for bi in range(b):
        ob, lb = tf.attention(host[0][bi * per:(bi + 1) * per], host[1][bi * per:(bi + 1) * per],
                              host[2][bi * per:(bi + 1) * per], s, s, h, h, d, causal)
        o_ref += ob
        lse_ref += lb
    o_got = [tf.bf16_value(x) for x in __import__("struct").unpack("<%dH" % (b * per), outs[1][0])]
    ok, worst = tf.close(o_got, o_ref, 2e-2)
    check("%s: O against the fp64 reference" % label, ok, "worst %.3g" % worst)
    ws = outs[1][2]
    all_raw = raw(ws, (tiles + 1) * stl.NSLOTS * 8)
    recs = stl.decode(all_raw, tiles + 1)
    extra = recs.pop()  # one record past the last tile: nothing may write it
    check("%s: nothing written past the last tile's record" % label,
          all(extra[sl] == 0 for sl in stl.SLOTS), str(extra))
    grid = max(r["cta"] for r in recs) + 1
    check("%s: each tile's id names the CTA that strides to it" % label,
          all(r["p_tile"] and r["cta"] == r["tile"] % grid for r in recs), "grid %d" % grid)
    bad = stl.check(recs)
    check("%s: every tile's stamps written and in order" % label, not bad, "; ".join(bad[:3]))
    summ = stl.summarize(recs)
    # the loop pass's stamps (c_qk_last, c_s_last) exist only in tiles of two or more kv blocks; the rest in every tile
    multi = [r for r in recs if r["c_qk_last"]]
    want = {name: len(multi) if {a, b} & {"c_qk_last", "c_s_last"} else tiles for name, a, b in stl.PHASES}
    check("%s: summarize counts every tile in each phase" % label,
          all(n == want[name] for name, (_, _, _, n) in summ["phases"].items()
              if name in want and not name.startswith("CL")),
          str({kk: vv[3] for kk, vv in summ["phases"].items()}))
    check("%s: a loop pass's stamps in order, between S0 and the mainloop's end" % label,
          all(r["c_s0"] <= r["c_qk_last"] <= r["c_s_last"] <= r["c_p_last"] <= r["c_pv_last"] <= r["c_main_end"]
              for r in multi) and all(r["c_p_last"] and r["c_pv_last"] for r in recs if r["c_tile"]),
          "%d tiles of two or more blocks" % len(multi))
    ctas = summ.get("ctas_table", [])
    check("%s: the per-CTA table has each CTA once, its tiles summing to the grid's, ends after starts, by end" % label,
          len({c["cta"] for c in ctas}) == len(ctas) == grid and sum(c["tiles"] for c in ctas) == tiles and
          all(c["end"] > c["start"] >= 0 for c in ctas) and [c["end"] for c in ctas] == sorted(c["end"] for c in ctas)
          and all(r["cta"] in {c["cta"] for c in ctas} for r in recs), str(ctas[:3]))
    print("\n".join(stl.report(label, summ)), flush=True)
    return q, k, v, tiles


def main():
    # 2 heads x 2 row blocks of 128: 4 tiles, 2 kv blocks of 128 each (the simulator has 132 "SMs": one tile a CTA)
    q, k, v, tiles = run_case("d64 full bm128", 1, 256, 2, 64, False, "bm=128 bn=128", 128)
    run_case("d64 causal bm64 (one consumer)", 1, 192, 1, 64, True, "bm=64 bn=64", 64)
    # refusals: too small a workspace names it; timeline with a split names the word
    o = tf.tensor((1, 256, 2, 64), tf.BF16)
    small = tf.tensor((tiles * stl.NSLOTS * 8 - 8,), tf.DType("uint8", 1, "B"))
    big = tf.tensor((1 << 20,), tf.DType("uint8", 1, "B"))  # room for 2 splits' partials
    before = tf.launches()
    for label, kw, needle in (
            ("workspace too small", dict(num_splits=1, workspace=small), "workspace"),
            ("with a split", dict(num_splits=2, workspace=big), "timeline")):
        try:
            fa4.mha_fwd(q, k, v, out=o, config="bm=128 bn=128 timeline=1", stream=0, **kw)
            check("refused: %s" % label, False, "accepted")
        except fa4.Fa4Error as e:
            check("refused: %s" % label, needle in str(e), str(e)[:160])
    check("refusals launched nothing", tf.launches() == before)
    sys.exit(tally.done("timeline sim"))


if __name__ == "__main__":
    main()
