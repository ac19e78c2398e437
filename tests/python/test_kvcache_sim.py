"""tests/python/test_kvcache_sim.py - fa4.flash_attn_with_kvcache and fa4.kv_append through the simulated driver
(issue 27): no GPU, no CUDA torch. The tensors are test_args_fuzz.py's duck-typed stand-ins over simulated device
memory, and the few torch calls the decode path makes (empty, empty_like, full, the raw current stream) go to a
stand-in module over the same allocator, so every line of the kvcache path runs: the append kernel (one launch),
its lengths out, the dense view, the dense cache read as pages (with and without cache_batch_idx), the paged cache.

  - each case against a plain-Python fp64 reference of the attention over the cache after the append, and every
    byte of both caches against a host model of the append (fa4.h fa4_kv_append's rule);
  - the case tests/gpu/test_fa_api.py failed on the H200 (a dense cache of more rows than q's batch, one int
    length, an append);
  - bad values: a cache_batch_idx entry outside the cache (that sequence writes nothing and sees no key: out 0,
    lse -inf), a negative length (the token before position 0 is not written);
  - launches: an append is one launch and the attention one more (the simulator counts them);
  - kv_append's fast path (a repeated signature adds no entry, a misaligned pointer is still refused);
  - refusals naming their argument: an int length past the cache, k's batch, a cache of fewer rows than the batch;
  - fa4._dense_table (the dense cache's page table) on real CPU torch tensors;
  - bench/launch_floor.c (build/bench/liblaunchfloor.so, bench/host_cost's floor under a call's host time): the
    launches of one decode step recorded, the caches and outputs reset, the launches replayed bare: the same caches
    and the same out and lse again (the floor does the call's work, parameter bytes and all).
Prints one line per case and 'kvcache sim: N passed, N failed'. Run by make unit.
"""
import math
import os
import random
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report import Tally  # noqa: E402  (tests/report.py: the suite line make test sums)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_args_fuzz as tf  # noqa: E402  (loads the simulated driver first)
from test_fa_api_sim import reference  # noqa: E402

fa4 = tf.fa4
tally = Tally()
check = tally.check


class FakeTorch:
    """The torch calls fa4's decode path makes, over the simulated device's allocator."""
    int32, float32, bfloat16 = tf.I32, tf.FP32, tf.BF16
    uint8 = tf.DType("uint8", 1, "B")

    class _C:
        @staticmethod
        def _cuda_getCurrentRawStream(index):
            return 0

    @staticmethod
    def device(kind, index=None):
        return (kind, index)

    @staticmethod
    def empty(shape, dtype=None, device=None):
        return tf.tensor((shape,) if isinstance(shape, int) else tuple(shape), dtype)

    @staticmethod
    def empty_like(t):
        return tf.tensor(t.shape, t.dtype)

    @staticmethod
    def full(shape, value, dtype=None, device=None):
        t = tf.tensor(tuple(shape), dtype)
        tf.upload(t, [value] * t.numel())
        return t


def dense_table_host(torch, b, per, rows, dev, idx):
    """fa4._dense_table's result, computed on the host (the stand-in has no tensor arithmetic; the real one is
    checked on CPU torch below)."""
    src = list(range(b)) if idx is None else [min(max(x, -1), rows) for x in tf.download(idx)]
    t = tf.tensor((b, per), tf.I32)
    tf.upload(t, [r * per + j for r in src for j in range(per)])
    return t


def raw(t):
    n = t.numel() * t.element_size()
    buf = (tf.ctypes.c_char * n)()
    tf.cu("cuMemcpyDtoH", tf.sim.cuMemcpyDtoH_v2(buf, t.ptr, n))
    return bytes(buf)


class Kv:
    """A decode case: q [b, sq, h, d], a cache (dense [rows, s_max, hkv, d] or paged [pages, page, hkv, d]), new
    rows [b, s_new, hkv, d]; host copies of everything, and the model of the cache after the append."""

    def __init__(self, rng, b, sq, s_new, h, hkv, d, lens, rows=None, s_max=32, page=0, pages=0, idx=None,
                 table=None):
        self.b, self.sq, self.s_new, self.h, self.hkv, self.d = b, sq, s_new, h, hkv, d
        self.lens, self.idx, self.page, self.table = lens, idx, page, table
        self.q = tf.tensor((b, sq, h, d), tf.BF16)
        self.hq = tf.rand_bf16(rng, self.q.numel())
        tf.upload(self.q, self.hq)
        shape = (pages, page, hkv, d) if page else (rows, s_max, hkv, d)
        self.kc, self.vc = tf.tensor(shape, tf.BF16), tf.tensor(shape, tf.BF16)
        self.hkc, self.hvc = tf.rand_bf16(rng, self.kc.numel()), tf.rand_bf16(rng, self.vc.numel())
        tf.upload(self.kc, self.hkc), tf.upload(self.vc, self.hvc)
        self.kn = self.vn = None
        if s_new:
            self.kn, self.vn = tf.tensor((b, s_new, hkv, d), tf.BF16), tf.tensor((b, s_new, hkv, d), tf.BF16)
            self.hkn, self.hvn = tf.rand_bf16(rng, self.kn.numel()), tf.rand_bf16(rng, self.vn.numel())
            tf.upload(self.kn, self.hkn), tf.upload(self.vn, self.hvn)
        self.cap = len(table[0]) * page if page else s_max
        self.slot_rows = page if page else s_max
        self.n_slots = pages if page else rows
        # the model: where token i of sequence b lands (None: not written), then the cache's contents
        self.wk, self.wv = list(self.hkc), list(self.hvc)
        row = hkv * d
        for s in range(b):
            for i in range(s_new):
                at = self.slot(s, lens[s] + i)
                if at is None:
                    continue
                src = (s * s_new + i) * row
                self.wk[at * row:(at + 1) * row] = self.hkn[src:src + row]
                self.wv[at * row:(at + 1) * row] = self.hvn[src:src + row]

    def slot(self, s, pos):
        """The cache row (in units of hkv x d) that position pos of sequence s lives in, or None."""
        if pos < 0 or pos >= self.cap:
            return None
        if self.page:
            pg = self.table[s][pos // self.page]
        else:
            pg = s if self.idx is None else self.idx[s]
        if pg < 0 or pg >= self.n_slots:
            return None
        return pg * self.slot_rows + pos % self.slot_rows

    def compare(self, name, out, lse, causal=True, softcap=0.0, launches=None):
        gk, gv = tf.download(self.kc), tf.download(self.vc)
        cache_ok = gk == self.wk and gv == self.wv
        go, gl = tf.download(out), tf.download(lse)
        b, sq, h, hkv, d = self.b, self.sq, self.h, self.hkv, self.d
        row = hkv * d
        worst_o = worst_l = 0.0
        empty_ok = True
        for s in range(b):
            n = max(0, min(self.lens[s] + self.s_new, self.cap))
            rows = [self.slot(s, j) for j in range(n)]
            q = self.hq[s * sq * h * d:(s + 1) * sq * h * d]
            if any(r is None for r in rows):  # a sequence whose row lies outside the cache: no key
                empty_ok &= all(x == 0.0 for x in go[s * sq * h * d:(s + 1) * sq * h * d])
                empty_ok &= all(math.isinf(x) and x < 0 for x in gl[s * h * sq:(s + 1) * h * sq])
                continue
            k = [x for r in rows for x in self.wk[r * row:(r + 1) * row]]
            v = [x for r in rows for x in self.wv[r * row:(r + 1) * row]]
            ro, rl = reference(q, k, v, sq, n, h, hkv, d, causal, (-1, -1), softcap, None)
            worst_o = max(worst_o, tf.close(go[s * sq * h * d:(s + 1) * sq * h * d], ro, 0)[1])
            worst_l = max(worst_l, tf.close(gl[s * h * sq:(s + 1) * h * sq], rl, 0)[1])
        ok = cache_ok and empty_ok and worst_o <= 2e-2 and worst_l <= 2e-3 and (launches is None or launches[0])
        check("flash_attn_with_kvcache " + name, ok, "max |dO| %.3g, max |dlse| %.3g, caches %s%s%s" % (
            worst_o, worst_l, "ok" if cache_ok else "WRONG", "" if empty_ok else ", empty rows WRONG",
            "" if launches is None else ", launches %s" % launches[1]))


def run(t, **kw):
    """flash_attn_with_kvcache on case t; returns (out, lse, launches)."""
    n0 = tf.launches()
    out, lse = fa4.flash_attn_with_kvcache(t.q, t.kc, t.vc, t.kn, t.vn, return_lse=True, causal=True, **kw)
    return out, lse, tf.launches() - n0


def refused(name, field, fn):
    n = tf.launches()
    try:
        fn()
        msg, ok = "accepted", False
    except fa4.Fa4Error as e:
        msg = str(e)
        ok = msg.startswith(field + ":") or ("invalid argument: " + field) in msg
    check("refused: " + name, ok and tf.launches() == n and tf.healthy(), msg[:150])


def dense_table_cpu():
    """fa4._dense_table on real (CPU) torch: row b's pages without cache_batch_idx, and clamped entries with it."""
    try:
        import torch
    except ImportError:
        check("fa4._dense_table on CPU torch", True, "(skipped: no torch)")
        return
    dev = ("cpu", 0)
    t = fa4._dense_table(torch, 3, 4, 5, dev, None)
    want = [[r * 4 + j for j in range(4)] for r in range(3)]
    ok = t.dtype == torch.int32 and t.is_contiguous() and t.tolist() == want
    t2 = fa4._dense_table(torch, 3, 4, 5, dev, None)
    idx = torch.tensor([2, -7, 9], dtype=torch.int32)
    t3 = fa4._dense_table(torch, 3, 4, 5, dev, idx)
    want3 = [[8, 9, 10, 11], [-4, -3, -2, -1], [20, 21, 22, 23]]  # -7 -> -1 and 9 -> 5: pages outside [0, 20)
    ok &= t2 is t and t3.dtype == torch.int32 and t3.is_contiguous() and t3.tolist() == want3
    check("fa4._dense_table on CPU torch (rows, cache_batch_idx clamped outside the pool)", ok,
          "%s / %s" % (t.tolist(), t3.tolist()))


def floor_replay(t, lens):
    """Records the launches of one decode step on case t (per-row lengths: the append and the attention), puts the
    caches back as they were and poisons out and lse, replays the launches bare, and compares again."""
    path = os.path.join(tf.ROOT, "build", "bench", "liblaunchfloor.so")
    if not os.path.exists(path):
        check("launch floor replay", False, "%s is missing (make build/bench/liblaunchfloor.so)" % path)
        return
    lf = tf.ctypes.CDLL(path)
    lf.lf_begin.argtypes = lf.lf_end.argtypes = lf.lf_replay.argtypes = [tf.ctypes.c_void_p]
    lf.lf_describe.argtypes = [tf.ctypes.c_char_p, tf.ctypes.c_size_t]
    ctx = fa4.context(0)
    if lf.lf_begin(ctx) != 0:
        check("launch floor replay", False, "lf_begin refused")
        return
    try:
        out, lse, n = run(t, cache_seqlens=lens)
    finally:
        rec = lf.lf_end(ctx)
    what = tf.ctypes.create_string_buffer(512)
    lf.lf_describe(what, 512)
    t.compare("decode step, per-row lengths, recorded by the launch floor", out, lse, launches=(n == 2, n))
    tf.upload(t.kc, t.hkc), tf.upload(t.vc, t.hvc)
    tf.upload(out, [float("nan")] * out.numel()), tf.upload(lse, [float("nan")] * lse.numel())
    n0 = tf.launches()
    e = lf.lf_replay(None)
    n1 = tf.launches() - n0
    check("launch floor: %d launches recorded, replayed bare (rc %d, %d launches)" % (rec, e, n1),
          rec == 2 and e == 0 and n1 == 2 and tf.healthy(), what.value.decode())
    t.compare("decode step replayed by the launch floor (caches reset, out/lse NaN before)", out, lse)


def main():
    rng = random.Random(27)
    dense_table_cpu()
    shim = FakeTorch()
    fa4._torch = lambda why: shim
    fa4._torch_mod = shim
    fa4._have_torch = True
    fa4._dense_table = dense_table_host

    # the H200's failing case: a cache of b + 2 rows, one int length, an append of 2 (dense view of rows 0..b-1)
    t = Kv(rng, 2, 2, 2, 4, 2, 64, [9, 9], rows=4)
    out, lse, n = run(t, cache_seqlens=9)
    t.compare("dense, cache of more rows than q's batch, int cache_seqlens, append 2", out, lse,
              launches=(n == 2, n))
    # per-row lengths: the append writes the lengths the attention reads (dense cache as pages)
    t = Kv(rng, 3, 1, 1, 4, 2, 64, [5, 17, 31], rows=4)
    lens = tf.tensor((3,), tf.I32)
    tf.upload(lens, t.lens)
    out, lse, n = run(t, cache_seqlens=lens)
    t.compare("dense, per-row cache_seqlens, append 1 (decode), lengths from the append", out, lse,
              launches=(n == 2, n))
    check("cache_seqlens left as it was (the lengths after go to a new tensor)", tf.download(lens) == [5, 17, 31])
    # cache_batch_idx permuted, chunked prefill of 3 tokens, softcap
    t = Kv(rng, 3, 3, 3, 4, 2, 64, [0, 12, 20], rows=5, idx=[4, 0, 2])
    lens, idx = tf.tensor((3,), tf.I32), tf.tensor((3,), tf.I32)
    tf.upload(lens, t.lens), tf.upload(idx, t.idx)
    out, lse, n = run(t, cache_seqlens=lens, cache_batch_idx=idx, softcap=5.0)
    t.compare("dense, cache_batch_idx permuted, append 3 (Sq 3), softcap 5", out, lse, softcap=5.0)
    # bad values: a row outside the cache (nothing written, no key), a negative length (position -1 not written)
    t = Kv(rng, 3, 1, 2, 4, 2, 64, [-1, 7, 3], rows=3, idx=[1, 3, 0])
    lens, idx = tf.tensor((3,), tf.I32), tf.tensor((3,), tf.I32)
    tf.upload(lens, t.lens), tf.upload(idx, t.idx)
    out, lse, n = run(t, cache_seqlens=lens, cache_batch_idx=idx)
    t.compare("dense bad: cache_batch_idx 3 of 3 rows (no key), length -1 (token 0 not written)", out, lse)
    # paged, page 16: an append across a page boundary; then no new tokens
    table = [[3, 0, 5], [1, 4, 2]]
    t = Kv(rng, 2, 2, 3, 4, 2, 64, [14, 30], page=16, pages=6, table=table)
    lens, bt = tf.tensor((2,), tf.I32), tf.tensor((2, 3), tf.I32)
    tf.upload(lens, t.lens), tf.upload(bt, [x for r in table for x in r])
    out, lse, n = run(t, cache_seqlens=lens, block_table=bt)
    t.compare("paged (page 16), append 3 across a page boundary", out, lse, launches=(n == 2, n))
    t2 = Kv(rng, 2, 1, 0, 4, 2, 64, [17, 40], page=16, pages=6, table=table)
    out, lse, n = run(t2, cache_seqlens=lens, block_table=bt)  # lens still [14, 30]: t2's own lens are unused
    t2.lens = [14, 30]
    t2.compare("paged, no new tokens (one launch)", out, lse, launches=(n == 1, n))
    # forced splits: the split kernel and the combine over the cache read as pages (a workspace allocated)
    t = Kv(rng, 2, 1, 1, 4, 2, 64, [20, 40], rows=2, s_max=64)
    lens = tf.tensor((2,), tf.I32)
    tf.upload(lens, t.lens)
    out, lse, n = run(t, cache_seqlens=lens, num_splits=2)
    t.compare("dense, per-row lengths, append 1, num_splits 2 (split + combine)", out, lse, launches=(n == 3, n))
    # dense, int length 0 and an append: the view holds just the new tokens; out and lse allocated by fa4
    t = Kv(rng, 2, 1, 2, 4, 2, 64, [0, 0], rows=2)
    out, lse, n = run(t, cache_seqlens=0)
    t.compare("dense, int cache_seqlens 0, append 2 (out, lse allocated)", out, lse, launches=(n == 2, n))
    # the same call again (the same tensors: an int length writes the same rows again): kv_append's fast path
    t = Kv(rng, 2, 2, 2, 4, 2, 64, [9, 9], rows=4)
    run(t, cache_seqlens=9)
    before, before_mha = len(fa4._kva_fast), len(fa4._fast)
    out, lse, n = run(t, cache_seqlens=9)
    t.compare("dense int length again (kv_append's and mha_fwd's fast paths)", out, lse, launches=(n == 2, n))
    check("fast paths: the repeated signature adds no entry", len(fa4._kva_fast) == before and
          len(fa4._fast) == before_mha, "kv_append %d -> %d, mha_fwd %d -> %d" % (
              before, len(fa4._kva_fast), before_mha, len(fa4._fast)))
    bad_k = tf.T(t.kn.ptr + 2, t.kn.shape, tf.BF16)
    refused("kv_append fast path, k misaligned by 2 bytes", "k",
            lambda: fa4.kv_append(t.kc, t.vc, bad_k, t.vn, 9, stream=0))
    refused("cache_seqlens 31 + 2 new tokens in a 32-row cache", "cache_seqlens",
            lambda: fa4.flash_attn_with_kvcache(t.q, t.kc, t.vc, t.kn, t.vn, 31))
    kb = tf.tensor((3, 2, 2, 64), tf.BF16)
    refused("k of batch 3, q of batch 2", "k", lambda: fa4.flash_attn_with_kvcache(t.q, t.kc, t.vc, kb, kb, 3))
    small = tf.tensor((1, 32, 2, 64), tf.BF16)
    refused("a dense cache of 1 row for batch 2 (no cache_batch_idx)", "k_cache",
            lambda: fa4.flash_attn_with_kvcache(t.q, small, small, t.kn, t.vn, 3))
    t = Kv(rng, 3, 1, 1, 4, 2, 64, [3, 20, 40], rows=3, s_max=48)
    lens = tf.tensor((3,), tf.I32)
    tf.upload(lens, t.lens)
    floor_replay(t, lens)
    return tally.done("kvcache sim")


if __name__ == "__main__":
    sys.exit(main())
