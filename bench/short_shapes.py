"""short_shapes.py - fa4gen's sm90a MHA forward on short sequences against cuDNN (torch SDPA), one run, one GPU.

    python3 bench/short_shapes.py [--out FILE] [--json FILE] [--grid short|small] [--shapes SUBSTR] [--variants "default;bm=64;next"]
                                  [--no-long] [--reps N] [--gap-us US] [--list]

The grid: 32 short shapes (seqlen 64..2048, batch x heads up to 4096 tiles, d64/d128/d256, causal and full, GQA
and not, bf16 and fp16), then the long shapes of bench/bench_mha.py (the table of record) as a control.
Per shape, every backend (fa4's default, fa4 with each variant's config words, cuDNN) is timed two ways, the
backends taking turns within every repetition (benchlib.time_interleaved):
  graph  a CUDA graph of `calls` calls (inputs rotated among sets so L2 never holds a call's inputs: the sets
         together exceed 160 MB), replayed behind a GPU-side hold so the host's launch is not in the time; the
         median replay / calls: the kernel's time;
  eager  the same calls issued from Python between two events: what a caller looping over the op sees (host cost
         included where it exceeds the kernel's).
The ratio is cuDNN's time / fa4's (> 1: fa4 faster); the issue's target is >= 1.05 under graphs. TFLOP/s counts
4*B*H*Sq*Sk*D (halved for causal); roof = max(FLOPs at the measured cuBLAS rate, Q+K+V+O bytes at the measured
device-to-device copy rate): no kernel beats it. Every fa4 column is checked against cuDNN once (rel L2 <= 1e-2).

Variants: config words (fa4.mha_fwd(config=...)) or 'next', the candidate shape rule next_rule() below (not the
runtime's rule yet: it decides words from the shape, and this run compares it with the runtime's). A variant whose
kernel is the default's (same canonical config) shows '='. Every kernel the run needs is compiled first, in
parallel threads (fa4.compile fills the disk cache), so the timing loop never waits on ptxas.

--list needs no GPU: the grid with tiles, waves, padding and the model's predicted time per variant (model()).
"""
import argparse
import datetime
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))

SMS_H100 = 132

SHORT = [  # name, B, Hq, Hkv, S, D, causal, dtype
    # the table
    ("B64 H8 S256 d128 full", 64, 8, 8, 256, 128, False, "bf16"),
    ("B32 H16 S512 d64 full", 32, 16, 16, 512, 64, False, "bf16"),
    ("B128 H16 S128 d64 causal", 128, 16, 16, 128, 64, True, "bf16"),
    ("B16 H32 S1024 d128 causal", 16, 32, 32, 1024, 128, True, "bf16"),
    ("B8 H32/8 S512 d128 causal", 8, 32, 8, 512, 128, True, "bf16"),
    # d128
    ("B128 H16 S128 d128 full", 128, 16, 16, 128, 128, False, "bf16"),
    ("B64 H16 S256 d128 causal", 64, 16, 16, 256, 128, True, "bf16"),
    ("B32 H16 S384 d128 full", 32, 16, 16, 384, 128, False, "bf16"),
    ("B32 H16 S512 d128 full", 32, 16, 16, 512, 128, False, "bf16"),
    ("B16 H16 S1024 d128 full", 16, 16, 16, 1024, 128, False, "bf16"),
    ("B8 H16 S2048 d128 full", 8, 16, 16, 2048, 128, False, "bf16"),
    ("B8 H16 S2048 d128 causal", 8, 16, 16, 2048, 128, True, "bf16"),
    ("B32 H32/8 S256 d128 full", 32, 32, 8, 256, 128, False, "bf16"),
    ("B8 H32/8 S1024 d128 causal", 8, 32, 8, 1024, 128, True, "bf16"),
    ("B4 H28/4 S1024 d128 causal", 4, 28, 4, 1024, 128, True, "bf16"),
    # d64
    ("B256 H16 S64 d64 full", 256, 16, 16, 64, 64, False, "bf16"),
    ("B64 H12 S77 d64 full", 64, 12, 12, 77, 64, False, "bf16"),
    ("B32 H12 S197 d64 full", 32, 12, 12, 197, 64, False, "bf16"),
    ("B64 H16 S256 d64 causal", 64, 16, 16, 256, 64, True, "bf16"),
    ("B16 H16 S1024 d64 causal", 16, 16, 16, 1024, 64, True, "bf16"),
    ("B8 H16 S2048 d64 full", 8, 16, 16, 2048, 64, False, "bf16"),
    # d256
    ("B64 H8 S256 d256 full", 64, 8, 8, 256, 256, False, "bf16"),
    ("B16 H16 S512 d256 causal", 16, 16, 16, 512, 256, True, "bf16"),
    ("B8 H16 S1024 d256 full", 8, 16, 16, 1024, 256, False, "bf16"),
    ("B4 H16 S2048 d256 causal", 4, 16, 16, 2048, 256, True, "bf16"),
    # fp16
    ("fp16 B64 H8 S256 d128 full", 64, 8, 8, 256, 128, False, "fp16"),
    ("fp16 B16 H32 S1024 d128 causal", 16, 32, 32, 1024, 128, True, "fp16"),
    ("fp16 B32 H16 S512 d64 full", 32, 16, 16, 512, 64, False, "fp16"),
    ("fp16 B16 H32/8 S512 d128 full", 16, 32, 8, 512, 128, False, "fp16"),
    # fewer tiles than SMs, or about as many
    ("B4 H16 S128 d128 full", 4, 16, 16, 128, 128, False, "bf16"),
    ("B2 H8 S512 d128 causal", 2, 8, 8, 512, 128, True, "bf16"),
    ("B1 H16 S2048 d128 causal", 1, 16, 16, 2048, 128, True, "bf16"),
]

# --grid small: calls of fewer 128-row tiles than half the SMs (one prompt, or a few, of a chat's length): each
# tile's CTA leaves the other SMs idle, where 64-row tiles would give twice the tiles
SMALL = [
    ("B1 H16 S128 d128 full", 1, 16, 16, 128, 128, False, "bf16"),
    ("B2 H16 S256 d128 full", 2, 16, 16, 256, 128, False, "bf16"),
    ("B4 H16 S128 d128 full", 4, 16, 16, 128, 128, False, "bf16"),
    ("B1 H32/8 S256 d128 full", 1, 32, 8, 256, 128, False, "bf16"),
    ("B1 H8 S1024 d128 causal", 1, 8, 8, 1024, 128, True, "bf16"),
    ("B2 H8 S512 d128 causal", 2, 8, 8, 512, 128, True, "bf16"),
    ("fp16 B2 H16 S256 d128 causal", 2, 16, 16, 256, 128, True, "fp16"),
    ("B4 H16 S128 d64 full", 4, 16, 16, 128, 64, False, "bf16"),
    ("B2 H8 S512 d64 causal", 2, 8, 8, 512, 64, True, "bf16"),
    ("B1 H16 S512 d256 full", 1, 16, 16, 512, 256, False, "bf16"),
    ("B2 H8 S512 d256 causal", 2, 8, 8, 512, 256, True, "bf16"),
    ("B1 H32 S512 d128 causal", 1, 32, 32, 512, 128, True, "bf16"),
]

VARIANTS = "default;persistent=0;bm=64;bm=128;bn=128;bn=64;stages=3;next"
LONG_VARIANTS = "default;next"


def long_shapes():
    """bench_mha.py's table of record, in this file's tuple form."""
    from bench_mha import SHAPES
    return [(name, B, Hq, Hkv, S, D, causal, "fp16" if "16" in str(dt) and "bfloat" not in str(dt) else "bf16")
            for name, B, Hq, Hkv, S, D, causal, dt in SHAPES]


def cdiv(a, b):
    return -(-a // b)


def pad(x, b):
    return cdiv(x, b) * b


# ---------------------------------------------------------------- the kernel's config words, as the runtime fills them

SMEM_LIMIT = 232448  # gen/sm90/plan.c SM90_SMEM_LIMIT


def words_of(text):
    return dict(w.split("=", 1) for w in text.split()) if text else {}


def config_of(D, causal, S, words, eb=2):
    """bm, bn, stages, persistent, q_slots of the sm90a kernel for these words: a mirror of gen/sm90/plan.c's
    defaults and runtime/mha_pick.c's shape rule at this commit, for the model and --list only (the GPU run
    prints the runtime's own canonical config beside every number)."""
    w = {k: int(v) for k, v in words.items()}
    bm = w.get("bm", 192 if D <= 64 else 128)
    stages = w.get("stages", 2)
    bn = w.get("bn")
    if bn is None:
        bn = 128 if D <= 64 else (128 if causal else 176) if D <= 128 else (64 if causal else 80)
        while bn > 16 and bm * D * eb + stages * bn * 2 * D * eb + 2048 > SMEM_LIMIT:
            bn -= 16
    persistent = w.get("persistent", 1 if (not causal or S <= 2048) else 0)
    rings = 2 * bn * D * eb * stages + 64 * stages + 64
    q_slots = 2 if persistent and 2 * bm * D * eb + rings + 1024 <= SMEM_LIMIT else 1
    return {"bm": bm, "bn": bn, "stages": stages, "persistent": persistent, "q_slots": q_slots,
            "head_major": w.get("head_major", 2 if persistent or not causal else 0)}


def next_rule(B, Hq, Hkv, S, D, causal, sms=SMS_H100):
    """The candidate shape rule for short sequences (seqlen <= 2048), as config words, or None (the runtime's
    choice). It picks the tile (bm of 192 (d64), 128 or 64; bn the default's, 128 or 64 (64: d64/d256 full, or
    S <= 64)) with the least modelled time (model(): per CTA, its tiles' padded MMA time plus a fixed cost per
    tile), and leaves the default unless that is at least 5% less. What it trades (bench/NOTES.md "short
    sequences"): padded query rows and keys (d128 S256 full: 2 blocks of 176 = 352 keys for 256; d64 S64: 192
    rows for 64) against more tiles, each paying the fixed cost, and a half-empty grid (64 tiles on 132 SMs)
    against bm 64's smaller, less efficient tiles. Not the runtime's rule: this run compares the two."""
    if S > 2048:
        return None
    base = model(("", B, Hq, Hkv, S, D, causal, "bf16"), "", sms=sms)
    d = base["config"]
    best, best_us = "", base["pred_us"]
    for bm in ([192, 128, 64] if D <= 64 else [128, 64]):
        for bn in sorted({d["bn"], 128, 64}, reverse=True):
            if bn > d["bn"] or (bn == 64 and causal and S > 64):
                continue
            words = " ".join(w for w in ("bm=%d" % bm if bm != d["bm"] else "", "bn=%d" % bn if bn != d["bn"] else "")
                             if w)
            us = model(("", B, Hq, Hkv, S, D, causal, "bf16"), words, sms=sms)["pred_us"]
            if us < best_us:
                best, best_us = words, us
    return best if best and best_us <= 0.95 * base["pred_us"] else None


def variant_words(var, shape):
    """The config words of a variant on a shape ('' for the default; None when 'next' keeps the default)."""
    if var == "default":
        return ""
    if var == "next":
        return next_rule(*shape[1:7]) or ""
    return var.replace(",", " ")


# ---------------------------------------------------------------- the model (predictions, not measurements)

# per-tile time the SM spends outside the MMAs that the pipeline does not hide (first QK's latency, the first
# block's softmax and the last PV unoverlapped, the epilogue, the O store's wait): fitted to the table (H100,
# fa4 default: time / tiles per SM - padded MMA time at 700 TFLOP/s = 2.1-3.3 us, 4.7 at B64 H8 S256 d128, which is
# also at 64% of the copy roof) until the timeline (bench/short_timeline.py) measures the phases
FIX_PERSISTENT_US = 3.0
FIX_ONE_TILE_US = 4.0  # + the CTA's launch and prologue, and its Q and first K/V with nothing to hide them under
EFF_BM64 = 0.75        # one consumer: its softmax is not hidden under another warpgroup's MMAs
LAUNCH_US = 1.5        # the kernel boundary inside a graph


def model(shape, words, ceiling=700e12, bw=3.0e12, sms=SMS_H100):
    """Predicted kernel time (us) and the facts behind it for one shape and config words."""
    name, B, Hq, Hkv, S, D, causal, dt = shape
    c = config_of(D, causal, S, words_of(words))
    bm, bn = c["bm"], c["bn"]
    nm = cdiv(S, bm)
    rate = ceiling / sms  # flop/s of one SM
    eff = EFF_BM64 if bm == 64 else 1.0
    fix = FIX_PERSISTENT_US if c["persistent"] else FIX_ONE_TILE_US
    tile_us = []
    for i in reversed(range(nm)):  # m-blocks descend (longest causal rows first), as the kernel orders them
        keys = min(S, (i + 1) * bm) if causal else S
        blocks = cdiv(keys, bn)
        tile_us.append(blocks * 4 * bm * bn * D / rate / eff * 1e6 + fix)
    # plan note tile order (gen/kernel.c tile_coords): head-major, each head's m-blocks consecutive (1; 2 = that unless
    # every head's K+V fits 24 MB of L2: then one group of all heads), or (0) groups of the heads whose K+V fit, each
    # group's heads side by side for every m-block
    units = B * Hq
    fit = min(max((24 << 20) // (2 * D * 2) // S, 1), units)
    group = {0: fit, 1: 1, 2: 1 if fit < units else units}[c["head_major"]]
    tiles = []
    for g0 in range(0, units, group):
        tiles += [t for t in tile_us for _ in range(min(group, units - g0))]
    ctas = min(len(tiles), sms)
    load = [0.0] * ctas
    if c["persistent"]:  # head-major walks waves of `ctas` tiles in alternating direction (mha_tile_first)
        for t, us in enumerate(tiles):
            w, r = divmod(t, ctas)
            load[ctas - 1 - r if c["head_major"] and w % 2 else r] += us
    else:  # the hardware hands the next tile to the first SM free
        for us in tiles:
            j = min(range(ctas), key=load.__getitem__)
            load[j] += us
    compute_us = max(load)
    flops = 4 * B * Hq * S * S * D / (2 if causal else 1)
    nbytes = (2 * B * S * Hq * D + 2 * B * S * Hkv * D) * 2
    mem_us = nbytes / bw * 1e6
    roof_us = max(flops / ceiling, nbytes / bw) * 1e6
    pred = max(compute_us, mem_us) + LAUNCH_US
    useful = S * S / (2 if causal else 1)
    padded = sum(cdiv(min(S, (i + 1) * bm) if causal else S, bn) * bn * bm for i in range(nm))
    return {"config": c, "tiles": len(tiles), "waves": len(tiles) / sms, "pad_eff": useful / padded,
            "compute_us": compute_us, "mem_us": mem_us, "roof_us": roof_us, "pred_us": pred, "flops": flops,
            "bytes": nbytes}


def name_matches(name, spec):
    """spec: substrings joined by '|' (any one matches); empty matches every name."""
    return not spec or any(alt and alt in name for alt in spec.split("|"))


def list_grid(shapes, variants):
    lines = ["# short_shapes.py --list: the model's predictions (us), no GPU; nominal 700 TFLOP/s, 3.0 TB/s, 132 SMs",
             "%-32s %6s %6s %6s %8s %8s | %s" % ("shape", "tiles", "waves", "pad", "roof", "default",
                                                "  ".join("%s" % v for v in variants if v != "default"))]
    for sh in shapes:
        d = model(sh, "")
        cells = []
        for v in variants:
            if v == "default":
                continue
            w = variant_words(v, sh)
            m = model(sh, w)
            same = m["config"] == d["config"]
            cells.append("%s=%s" % (v if v != "next" else "next[%s]" % (w or "-"),
                                    "=" if same else "%.1f" % m["pred_us"]))
        lines.append("%-32s %6d %6.1f %5.0f%% %8.1f %8.1f | %s" % (
            sh[0], d["tiles"], d["waves"], 100 * d["pad_eff"], d["roof_us"], d["pred_us"], "  ".join(cells)))
    return lines


# ---------------------------------------------------------------- the GPU run

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--json")
    ap.add_argument("--shapes", default="", help="substring filter on shape names ('|' between alternatives)")
    ap.add_argument("--grid", choices=("short", "small"), default="short",
                    help="short: the issue's 32 shapes; small: calls of fewer 128-row tiles than half the SMs")
    ap.add_argument("--variants", default=VARIANTS, help="';'-separated fa4 variants: config words (commas between "
                    "words), 'default' (the runtime's choice) and 'next' (the candidate rule)")
    ap.add_argument("--long-variants", default=LONG_VARIANTS)
    ap.add_argument("--no-long", action="store_true", help="leave out bench_mha.py's long shapes")
    ap.add_argument("--reps", type=int, default=15, help="graph replays per backend (long shapes: half)")
    ap.add_argument("--eager-reps", type=int, default=5)
    ap.add_argument("--list", action="store_true", help="the grid and the model's predictions; no GPU")
    ap.add_argument("--gap-us", type=float, default=0,
                    help="in each graph, a GPU spin of this many us after every call: a kernel that lets no dependent "
                    "launch early, as most kernels before an attention call (a GEMM) do; times include it")
    args = ap.parse_args()
    variants = [v.strip() for v in args.variants.split(";") if v.strip()]
    if "default" not in variants:
        variants.insert(0, "default")
    long_variants = [v.strip() for v in args.long_variants.split(";") if v.strip()]
    shapes = [s for s in (SMALL if args.grid == "small" else SHORT) if name_matches(s[0], args.shapes)]
    longs = [] if args.no_long else [s for s in long_shapes() if name_matches(s[0], args.shapes)]
    if args.list:
        print("\n".join(list_grid(shapes, variants) + list_grid(longs, long_variants)[1:]))
        return

    import torch
    import fa4
    from benchlib import capture, gpu_state, matmul_ceiling, time_interleaved, write_lines
    from bench_mha import sdpa
    from torch.nn.attention import SDPBackend

    t_start = time.time()
    dev = torch.cuda.get_device_properties(0)
    sms = dev.multi_processor_count
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    torch.manual_seed(0)
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(200):  # clocks up before anything is timed
        x @ x
    del x
    ceiling = matmul_ceiling(10) * 1e12
    a = torch.empty(1 << 29, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    b.copy_(a)
    ev0.record()
    for _ in range(10):
        b.copy_(a)
    ev1.record()
    ev1.synchronize()
    bw = 2 * a.numel() * 10 / (ev0.elapsed_time(ev1) / 1e3)  # read + write bytes per second
    del a, b
    lines = ["# fa4gen sm90a MHA forward on short sequences vs cuDNN (torch SDPA), %s, %s (%d SMs), torch %s, "
             "cuDNN %s" % (datetime.date.today(), torch.cuda.get_device_name(), sms, torch.__version__,
                           torch.backends.cudnn.version()),
             "# cuBLAS bf16 8192^3 %.0f TFLOP/s, device copy %.2f TB/s (the roofs); GPU %s" % (
                 ceiling / 1e12, bw / 1e12, gpu_state()),
             "# graph: median of %d replays of `calls` calls (inputs rotated), per call; eager: %d loops of the same "
             "calls; ratio = cuDNN time / fa4 time%s" % (args.reps, args.eager_reps, "; each graph call followed by a "
                                                         "%.1f us GPU spin (--gap-us), in the times" % args.gap_us
                                                         if args.gap_us else "")]
    print("\n".join(lines), flush=True)

    # ---- every kernel first, compiled in parallel (disk cache), so the timing never waits on ptxas
    plan = []  # (shape, [(variant, words, canonical or error)])
    texts = set()
    for sh, vs in [(s, variants) for s in shapes] + [(s, long_variants) for s in longs]:
        name, B, Hq, Hkv, S, D, causal, dt = sh
        q = torch.empty(B, S, Hq, D, device="cuda", dtype=dtypes[dt])
        k = torch.empty(B, S, Hkv, D, device="cuda", dtype=dtypes[dt])
        cols = []
        for var in vs:
            words = variant_words(var, sh)
            try:
                cfg = fa4.mha_config(q, k, k, causal=causal, config=words or None)
                texts.add(cfg)
            except Exception as e:
                cfg = "n/a: " + str(e)[:120]
            cols.append((var, words, cfg))
        plan.append((sh, cols))
        del q, k
    t0 = time.time()
    from concurrent.futures import ThreadPoolExecutor
    errors = []

    def build(text):
        try:
            fa4.compile(text)
        except Exception as e:
            errors.append("%s: %s" % (text, str(e)[:100]))

    with ThreadPoolExecutor(max_workers=max(1, min(16, (os.cpu_count() or 2) - 1))) as pool:
        list(pool.map(build, sorted(texts)))
    lines.append("# %d kernels compiled in %.1f s (parallel, into the disk cache)%s" % (
        len(texts), time.time() - t0, "; failed: " + "; ".join(errors[:3]) if errors else ""))
    print(lines[-1], flush=True)

    head0 = "%-32s %5s %7s %8s %8s %6s" % ("shape", "calls", "roof_us", "cudnn_us", "fa4_us", "ratio")
    head = head0 + "".join(" %9s" % (v[:9]) for v in variants if v != "default")
    head += " | %8s %8s %6s  check" % ("eager fa4", "cudnn", "ratio")
    lines.append(head)
    print(head, flush=True)
    rows = []
    long_head = False
    for sh, cols in plan:
        name = sh[0]
        if sh in longs and not long_head:  # the control's own header: its variants' columns
            long_head = True
            lines.append(head0 + "".join(" %9s" % v[:9] for v in long_variants if v != "default") +
                         " | %8s %8s %6s  check" % ("eager fa4", "cudnn", "ratio"))
            print(lines[-1], flush=True)
        sets = ref = None
        try:
            name, B, Hq, Hkv, S, D, causal, dt = sh
            is_long = sh in longs
            vs = long_variants if is_long else variants
            flops = 4 * B * Hq * S * S * D / (2 if causal else 1)
            nbytes = (2 * B * S * Hq * D + 2 * B * S * Hkv * D) * 2
            est_ms = max(flops / 0.45e15, nbytes / 2.0e12) * 1e3 + 0.005
            calls = max(2, min(20, int(2.0 / est_ms)))
            nsets = max(2, min(calls, math.ceil(160e6 / nbytes)))
            sets = []
            for _ in range(nsets):
                q = torch.randn(B, S, Hq, D, device="cuda", dtype=dtypes[dt])
                k = torch.randn(B, S, Hkv, D, device="cuda", dtype=dtypes[dt])
                v = torch.randn(B, S, Hkv, D, device="cuda", dtype=dtypes[dt])
                sets.append((q, k, v, torch.empty_like(q)))
            gqa = Hkv != Hq
            cud = sdpa(SDPBackend.CUDNN_ATTENTION, causal, gqa)
            # backends: distinct kernels only ('=' for a variant whose canonical config an earlier column has)
            backends, alias, checks = [], {}, {}
            seen = {}
            ref = None
            try:
                ref = cud(*sets[0]).transpose(1, 2).float()
                backends.append(("cudnn", cud))
            except Exception as e:
                checks["cudnn"] = "n/a (%s)" % str(e)[:60]
            for var, words, cfg in cols:
                if cfg.startswith("n/a"):
                    checks[var] = cfg
                    continue
                if cfg in seen:
                    alias[var] = seen[cfg]
                    continue
                seen[cfg] = var
                fn = (lambda q, k, v, o, w=words or None, c=causal: fa4.mha_fwd(q, k, v, causal=c, config=w, out=o))
                try:
                    got = fn(*sets[0]).float()
                    torch.cuda.synchronize()
                    if ref is None:
                        checks[var] = "no reference"
                    else:
                        rel = ((got - ref).norm() / ref.norm()).item()
                        checks[var] = "%.1e" % rel + ("" if rel <= 1e-2 else " FAIL")  # NaN fails too
                    backends.append((var, fn))
                except Exception as e:
                    checks[var] = "n/a (%s)" % str(e)[:60]
            names = [n for n, _ in backends]
            graphs = []
            gap = int(args.gap_us * 2000)  # cycles; >= gap_us at clocks up to 2 GHz

            def then_gap(x, fn):
                fn(*x)
                if gap:
                    torch.cuda._sleep(gap)
            for _, fn in backends:
                graphs.append(capture(lambda x, fn=fn: then_gap(x, fn), [sets[i % nsets] for i in range(calls)]))
            reps = max(5, args.reps // 2) if is_long else args.reps
            g_ms = time_interleaved([g.replay for g in graphs], [()], reps, warmup=2, hold_us=100)
            graph_us = {n: ms / calls * 1e3 for n, ms in zip(names, g_ms)}

            def loop(fn):
                def run():
                    for i in range(calls):
                        fn(*sets[i % nsets])
                return run

            e_ms = time_interleaved([loop(fn) for _, fn in backends], [()], args.eager_reps, warmup=1)
            eager_us = {n: ms / calls * 1e3 for n, ms in zip(names, e_ms)}
            for var, src in alias.items():
                graph_us[var], eager_us[var] = graph_us.get(src), eager_us.get(src)
            del graphs
            roof_us = max(flops / ceiling, nbytes / bw) * 1e6
            cu = graph_us.get("cudnn")

            def ratio(var, table=graph_us):
                t, c = table.get(var), table.get("cudnn")
                return c / t if t and c else None

            cells = ""
            for var in vs:
                if var == "default":
                    continue
                r = ratio(var)
                cells += " %9s" % ("=" if var in alias and alias[var] == "default" else "%.3f" % r if r else "n/a")
            fa = graph_us.get("default")
            er = ratio("default", eager_us)
            line = "%-32s %5d %7.1f %8s %8s %6s%s | %8s %8s %6s  %s" % (
                name, calls, roof_us, "%.1f" % cu if cu else "n/a", "%.1f" % fa if fa else "n/a",
                "%.3f" % ratio("default") if ratio("default") else "n/a", cells,
                "%.1f" % eager_us["default"] if eager_us.get("default") else "n/a",
                "%.1f" % eager_us["cudnn"] if eager_us.get("cudnn") else "n/a", "%.3f" % er if er else "n/a",
                " ".join("%s:%s" % (v, checks[v]) for v in checks if not checks[v].startswith("n/a") and
                         "FAIL" in checks[v]) or "ok")
            lines.append(line)
            print(line, flush=True)
            for var, words, cfg in cols:
                if var not in alias:
                    lines.append("#   %-14s %s%s" % (var, cfg, "" if var != "next" else "  (words: %s)" % (words or "-")))
            rows.append({"shape": name, "B": B, "Hq": Hq, "Hkv": Hkv, "S": S, "D": D, "causal": causal, "dtype": dt,
                         "long": is_long, "calls": calls, "sets": nsets, "flops": flops, "bytes": nbytes,
                         "roof_us": roof_us, "graph_us": graph_us, "eager_us": eager_us,
                         "config": {var: cfg for var, _, cfg in cols}, "words": {var: w for var, w, _ in cols},
                         "alias": alias, "check": checks,
                         "pred_us": {var: model(sh, w, ceiling, bw, sms)["pred_us"] for var, w, _ in cols}})
            sets = ref = None  # freed before the next shape allocates
            torch.cuda.empty_cache()
        except Exception as e:  # one shape's failure (a backend refusing capture, memory) leaves the rest
            lines.append("%-32s error: %s" % (name, str(e)[:200]))
            print(lines[-1], flush=True)
            sets = ref = None
            torch.cuda.empty_cache()

    # ---- summary: the issue's count, per variant, and the long shapes' control
    short = [r for r in rows if not r["long"]]

    def rat(r, var):
        t, c = r["graph_us"].get(var), r["graph_us"].get("cudnn")
        return c / t if t and c else None

    def geo(xs):
        xs = [x for x in xs if x]
        return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")

    first = len(lines)
    lines.append("# ---- summary (graphs; ratio = cuDNN / fa4)")
    for var in variants:
        rs = [rat(r, var) for r in short]
        lines.append("# %-14s >= 1.05x on %2d of %d short shapes, geomean %.3f, min %.3f" % (
            var, sum(1 for x in rs if x and x >= 1.05), len(short), geo(rs), min([x for x in rs if x] or [0])))
    best = [max([x for x in (rat(r, v) for v in variants) if x] or [0]) for r in short]
    lines.append("# %-14s >= 1.05x on %2d of %d short shapes, geomean %.3f" % (
        "best variant", sum(1 for x in best if x >= 1.05), len(short), geo(best)))
    for r in rows:
        if r["long"]:
            lines.append("# long %-26s default %.3f, next %s (%s)" % (
                r["shape"], rat(r, "default") or 0, "%.3f" % rat(r, "next") if rat(r, "next") else "n/a",
                "same kernel" if r["alias"].get("next") == "default" else "words %s" % r["words"].get("next")))
    errs = [abs(r["pred_us"]["default"] / r["graph_us"]["default"] - 1) for r in short if r["graph_us"].get("default")]
    if errs:
        lines.append("# model: median |predicted / measured - 1| of the default %.0f%% (constants in short_shapes.py)"
                     % (100 * statistics.median(errs)))
    lines.append("# GPU at the end: %s; wall %.0f s" % (gpu_state(), time.time() - t_start))
    print("\n".join(lines[first:]), flush=True)
    write_lines(args.out, lines)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "sms": sms, "torch": torch.__version__,
                       "cudnn": torch.backends.cudnn.version(), "ceiling_tflops": ceiling / 1e12,
                       "copy_tbps": bw / 1e12, "variants": variants, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
