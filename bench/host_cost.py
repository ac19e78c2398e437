"""host_cost.py - the host time of one attention call on a cached kernel, fa4 beside SDPA (issue 27 item 4).

    python3 bench/host_cost.py [--calls 2000] [--rounds 7] [--json FILE] [--out FILE]

Per variant: warm-up, then `calls` calls back to back with nothing else on the host, timed with perf_counter
(in chunks of 250 calls with torch.cuda.synchronize between them, outside the timing, so a variant whose host
time is below its kernel's GPU time never waits on a full launch queue): host microseconds per call, median of
`rounds` rounds. The GPU work is tiny (q, k, v [1, 128, 8, 64] bf16,
causal), so the host is the bound; the launch queue does not fill. Variants:
  sdpa                      torch.nn.functional.scaled_dot_product_attention on [B, H, S, D] (is_causal)
  fa4.flash_attn_func       the eager Python call (FlashAttention API)
  fa4.mha_fwd               the same through fa4's own name
  fa4.mha_fwd out=, stream= the caller gives out and the stream (no allocation, no stream query)
  fa4_torch.flash_attn_func the torch.library op (custom-op dispatch on top)
  ctypes fa4_mha_fwd        the C call alone on a prepared fa4_mha_args, through ctypes (the C path + ~1 us)
  flash_attn_with_kvcache   a decode step: 1 token appended to a dense cache (per-row lengths) and attention
and the parts of the Python fast path by themselves (key, allocation, data_ptr, stream, struct copy).
Issue 27's targets: the eager Python call <= 15 us, the C call <= 3 us, SDPA (47 us there) in the same run.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fa4  # noqa: E402
import fa4_torch  # noqa: E402


CHUNK = 250  # calls between synchronisations (outside the timing): the launch queue (1024) never fills


def per_call_us(fn, calls, rounds):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t = []
    for _ in range(rounds):
        total = 0.0
        for c in range(0, calls, CHUNK):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(min(CHUNK, calls - c)):
                fn()
            total += time.perf_counter() - t0
        torch.cuda.synchronize()
        t.append(total / calls * 1e6)
    return statistics.median(t), min(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json")
    ap.add_argument("--out")
    o = ap.parse_args()
    dev = torch.device("cuda", 0)
    q, k, v = (torch.randn(1, 128, 8, 64, device=dev, dtype=torch.bfloat16) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    out = torch.empty_like(q)
    handle = torch.cuda.current_stream().cuda_stream
    F = torch.nn.functional.scaled_dot_product_attention

    # the C call alone: the args mha_fwd built, called again and again through ctypes
    a = fa4._args(q, k, v, out, None, True, None, None, None)
    lib, ctx = fa4._load(), fa4.context(0)
    c_fn = lib.fa4_mha_fwd

    kc, vc = (torch.randn(8, 1024, 8, 64, device=dev, dtype=torch.bfloat16) for _ in range(2))
    lens = torch.full((8,), 500, dtype=torch.int32, device=dev)
    qd, kn = torch.randn(8, 1, 32, 64, device=dev, dtype=torch.bfloat16), torch.randn(8, 1, 8, 64, device=dev,
                                                                                       dtype=torch.bfloat16)

    variants = [
        ("sdpa", lambda: F(qt, kt, vt, is_causal=True)),
        ("fa4.flash_attn_func", lambda: fa4.flash_attn_func(q, k, v, causal=True)),
        ("fa4.mha_fwd", lambda: fa4.mha_fwd(q, k, v, causal=True)),
        ("fa4.mha_fwd out=, stream=", lambda: fa4.mha_fwd(q, k, v, causal=True, out=out, stream=handle)),
        ("fa4_torch.flash_attn_func (op)", lambda: fa4_torch.flash_attn_func(q, k, v, causal=True)),
        ("ctypes fa4_mha_fwd (C call)", lambda: c_fn(ctx, ctypes.byref(a), handle)),
        ("flash_attn_with_kvcache decode (append + attn)",
         lambda: fa4.flash_attn_with_kvcache(qd, kc, vc, kn, kn, lens, causal=True)),
        ("sdpa again (drift check)", lambda: F(qt, kt, vt, is_causal=True)),
    ]
    key = (q.shape, q.stride(), q.dtype, q.device)
    tpl = bytes(a)
    parts = [
        ("part: signature key (3 tensors)", lambda: (q.shape, q.stride(), q.dtype, q.device, k.shape, k.stride(),
                                                      k.dtype, k.device, v.shape, v.stride(), v.dtype, v.device)),
        ("part: dict lookup of a key", lambda: fa4._fast.get(key)),
        ("part: torch.empty_like(q)", lambda: torch.empty_like(q)),
        ("part: 3 x data_ptr()", lambda: (q.data_ptr(), k.data_ptr(), v.data_ptr())),
        ("part: raw current stream", lambda: fa4._raw_stream(torch, 0)),
        ("part: torch.cuda.current_stream()", lambda: torch.cuda.current_stream().cuda_stream),
        ("part: args struct copy", lambda: fa4._MhaArgs.from_buffer_copy(tpl)),
    ]
    gpu = torch.cuda.get_device_name()
    lines = ["# bench/host_cost.py: host us per call, median (min) of %d rounds of %d calls; %s; torch %s; fa4 %s"
             % (o.rounds, o.calls, gpu, torch.__version__, fa4.version()),
             "# shape q, k, v [1, 128, 8, 64] bf16 causal (sdpa on [1, 8, 128, 64]); decode: 8 x 1 token, 32/8 heads, "
             "cache 1024 rows"]
    res = {"gpu": gpu, "torch": torch.__version__, "fa4": fa4.version(), "calls": o.calls, "rounds": o.rounds,
           "results": {}}
    for name, fn in variants + parts:
        med, lo = per_call_us(fn, o.calls, o.rounds)
        res["results"][name] = {"median_us": med, "min_us": lo}
        lines.append("%-48s %8.2f us  (min %.2f)" % (name, med, lo))
        print(lines[-1], flush=True)
    r = res["results"]
    lines.append("# targets: eager flash_attn_func %.2f us (<= 15), C call %.2f us (<= 3; ctypes included), sdpa %.2f us"
                 % (r["fa4.flash_attn_func"]["median_us"], r["ctypes fa4_mha_fwd (C call)"]["median_us"],
                    r["sdpa"]["median_us"]))
    print(lines[-1])
    if o.out:
        with open(o.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    if o.json:
        with open(o.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
