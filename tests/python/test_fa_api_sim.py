"""tests/python/test_fa_api_sim.py - fa4's FlashAttention API (flash_attn_func, flash_attn_varlen_func) and the
Python fast path through the simulated driver, on duck-typed tensors (no torch, no GPU; test_args_fuzz.py's
helpers).

  - flash_attn_func against a plain-Python fp64 reference: causal (bottom-right), window_size (left, right) and
    with causal (right = 0), softcap, ALiBi (FlashAttention's -slope |i + Sk - Sq - j|), GQA, return_lse shapes;
  - flash_attn_varlen_func (two sequences) against the same reference per sequence;
  - the fast path: a second call of a signature reuses the first call's args (mha_fwd's _fast) and launches; what
    can differ between calls is still checked: a misaligned or zero pointer, a host pointer behind a "CUDA"
    tensor, a tensor on another device, another dtype -- each refused naming the argument, nothing launched;
  - what FlashAttention has and fa4 has not: dropout_p, return_attn_probs (deterministic: a bool, else refused), per-batch ALiBi,
    rotary_cos / cache_leftpad, each refused naming it.
Prints one line per case and 'fa api sim: N passed, N failed'. Run by make unit.
"""
import math
import os
import random
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report import Tally  # noqa: E402  (tests/report.py: the suite line make test sums)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_args_fuzz as tf  # noqa: E402  (loads the simulated driver first)

fa4 = tf.fa4
tally = Tally()
check = tally.check


def reference(q, k, v, sq, sk, h, hkv, d, causal, window, softcap, slopes, scale=None):
    """O [sq, h, d], lse [h, sq] of one sequence, FlashAttention's definitions, in double."""
    o, lse = [0.0] * (sq * h * d), [0.0] * (h * sq)
    scale = scale or 1 / math.sqrt(d)
    left, right = window
    if causal:
        right = 0
    for i in range(sq):
        diag = i + sk - sq
        for hh in range(h):
            g = hh // (h // hkv)
            qi = q[(i * h + hh) * d:(i * h + hh + 1) * d]
            s = []
            for j in range(sk):
                if (right >= 0 and j > diag + right) or (left >= 0 and j < diag - left):
                    continue
                x = scale * sum(a * b for a, b in zip(qi, k[(j * hkv + g) * d:(j * hkv + g + 1) * d]))
                if softcap:
                    x = softcap * math.tanh(x / softcap)
                if slopes:
                    x -= slopes[hh] * abs(diag - j)
                s.append((j, x))
            if not s:
                lse[hh * sq + i] = -math.inf
                continue
            mx = max(x for _, x in s)
            w = [(j, math.exp(x - mx)) for j, x in s]
            z = sum(x for _, x in w)
            lse[hh * sq + i] = mx + math.log(z)
            for c in range(d):
                o[(i * h + hh) * d + c] = sum(x * v[(j * hkv + g) * d + c] for j, x in w) / z
    return o, lse


class Dense:
    def __init__(self, rng, b=1, sq=16, sk=40, h=4, hkv=2, d=64, amp=1.0):
        self.b, self.sq, self.sk, self.h, self.hkv, self.d = b, sq, sk, h, hkv, d
        self.q, self.k, self.v = (tf.tensor((b, sq, h, d), tf.BF16), tf.tensor((b, sk, hkv, d), tf.BF16),
                                  tf.tensor((b, sk, hkv, d), tf.BF16))
        self.host = [[tf.bf16_value(tf.bf16_bits(amp * x)) for x in tf.rand_bf16(rng, t.numel())]
                     for t in (self.q, self.k, self.v)]
        for t, x in zip((self.q, self.k, self.v), self.host):
            tf.upload(t, x)
        self.out = tf.tensor((b, sq, h, d), tf.BF16)
        self.lse = tf.tensor((b, h, sq), tf.FP32)
        self.slopes = [2 ** (-8 * (i + 1) / h) for i in range(h)]
        self.alibi = tf.tensor((h,), tf.FP32)
        tf.upload(self.alibi, self.slopes)

    def compare(self, name, causal, window, softcap, alibi, scale=None):
        n = tf.launches()
        r = fa4.flash_attn_func(self.q, self.k, self.v, softmax_scale=scale, causal=causal, window_size=window,
                                softcap=softcap, alibi_slopes=self.alibi if alibi else None, return_lse=True,
                                out=self.out, lse=self.lse, stream=0)
        ok = isinstance(r, tuple) and len(r) == 2 and r[0] is self.out and tf.launches() > n
        go, gl = tf.download(self.out), tf.download(self.lse)
        b, sq, sk, h, hkv, d = self.b, self.sq, self.sk, self.h, self.hkv, self.d
        worst_o = worst_l = 0.0
        for s in range(b):
            q = self.host[0][s * sq * h * d:(s + 1) * sq * h * d]
            k = self.host[1][s * sk * hkv * d:(s + 1) * sk * hkv * d]
            v = self.host[2][s * sk * hkv * d:(s + 1) * sk * hkv * d]
            ro, rl = reference(q, k, v, sq, sk, h, hkv, d, causal, window, softcap,
                               self.slopes if alibi else None, scale)
            _, wo = tf.close(go[s * sq * h * d:(s + 1) * sq * h * d], ro, 0)
            _, wl = tf.close(gl[s * h * sq:(s + 1) * h * sq], rl, 0)
            worst_o, worst_l = max(worst_o, wo), max(worst_l, wl)
        check("flash_attn_func " + name, ok and worst_o <= 2e-2 and worst_l <= 2e-3,
              "max |dO| %.3g, max |dlse| %.3g" % (worst_o, worst_l))


def refused(name, field, fn):
    n = tf.launches()
    try:
        fn()
        msg, ok = "accepted", False
    except fa4.Fa4Error as e:
        msg = str(e)
        ok = msg.startswith(field + ":") or ("invalid argument: " + field) in msg
    check("refused: " + name, ok and tf.launches() == n and tf.healthy(), msg[:160])


def main():
    rng = random.Random(7)
    t = Dense(rng)
    t.compare("causal (bottom-right, sk > sq), GQA 4/2", True, (-1, -1), 0.0, False)
    t.compare("none", False, (-1, -1), 0.0, False)
    t.compare("window (8, 4)", False, (8, 4), 0.0, False)
    t.compare("causal + window (8, 8): right becomes 0", True, (8, 8), 0.0, False)
    t.compare("softcap 2 (scale 1: scores past the cap)", True, (-1, -1), 2.0, False, scale=1.0)
    t.compare("alibi, non-causal (both sides of the diagonal)", False, (-1, -1), 0.0, True)
    t.compare("alibi + softcap 5 + window (12, -1), causal", True, (12, -1), 5.0, True)
    d2 = Dense(rng, b=2, sq=1, sk=37, h=8, hkv=1)
    d2.compare("decode: sq 1, MQA 8/1, alibi + softcap", True, (-1, -1), 3.0, True)

    # the fast path: the signature is remembered after a call passes; the next call of it reuses the args
    sig = len(fa4._fast)
    t.compare("causal again (through the fast path)", True, (-1, -1), 0.0, False)
    check("fast path: no new signature for the repeated call", len(fa4._fast) == sig, "%d -> %d" % (sig, len(fa4._fast)))
    base = dict(causal=True, out=t.out, lse=t.lse, return_lse=True, stream=0)
    refused("fast path, q misaligned by 2 bytes", "q",
            lambda: fa4.flash_attn_func(tf.T(t.q.ptr + 2, t.q.shape, tf.BF16), t.k, t.v, **base))
    refused("fast path, q.data_ptr() 0", "q", lambda: fa4.flash_attn_func(tf.T(0, t.q.shape, tf.BF16), t.k, t.v, **base))
    host = tf.tensor(t.out.shape, tf.BF16, where="host")
    refused("fast path, out a host pointer behind a CUDA tensor", "o",
            lambda: fa4.flash_attn_func(t.q, t.k, t.v, causal=True, out=host, lse=t.lse, return_lse=True,
                                        stream=0))
    refused("fast path, k on device 1", "k",
            lambda: fa4.flash_attn_func(t.q, tf.T(t.k.ptr, t.k.shape, tf.BF16, device=("cuda", 1)), t.v, **base))
    refused("fast path, v float16", "v", lambda: fa4.flash_attn_func(t.q, t.k, tf.T(t.v.ptr, t.v.shape, tf.FP16), **base))
    refused("fast path, causal=1 (an int)", "causal",
            lambda: fa4.flash_attn_func(t.q, t.k, t.v, **dict(base, causal=1)))

    # varlen: two sequences of 8 and 5 query rows against 20 and 9 keys
    lq, lk, h, hkv, d = (8, 5), (20, 9), 2, 1, 64
    q, k, v = tf.tensor((sum(lq), h, d), tf.BF16), tf.tensor((sum(lk), hkv, d), tf.BF16), \
        tf.tensor((sum(lk), hkv, d), tf.BF16)
    hq_, hk_, hv_ = (tf.rand_bf16(rng, x.numel()) for x in (q, k, v))
    for x, y in ((q, hq_), (k, hk_), (v, hv_)):
        tf.upload(x, y)
    cq, ck = tf.tensor((3,), tf.I32), tf.tensor((3,), tf.I32)
    tf.upload(cq, [0, 8, 13])
    tf.upload(ck, [0, 20, 29])
    out, lse = tf.tensor((sum(lq), h, d), tf.BF16), tf.tensor((h, sum(lq)), tf.FP32)
    slopes = tf.tensor((h,), tf.FP32)
    tf.upload(slopes, [0.5, 0.125])
    fa4.mha_fwd(q, k, v, causal=True, cu_seqlens_q=cq, cu_seqlens_k=ck, max_seqlen_q=8, out=out, lse=lse,
                return_lse=True, stream=0, softcap=4.0, alibi_slopes=slopes)  # mha_fwd's own names
    r = fa4.flash_attn_varlen_func(q, k, v, cq, ck, 8, 20, None, True, (-1, -1), 4.0, slopes, True, out=out, lse=lse,
                                   stream=0)
    go, gl = tf.download(out), tf.download(lse)
    worst = 0.0
    for s, (q0, k0) in enumerate(((0, 0), (8, 20))):
        ro, rl = reference(hq_[q0 * h * d:(q0 + lq[s]) * h * d], hk_[k0 * hkv * d:(k0 + lk[s]) * hkv * d],
                           hv_[k0 * hkv * d:(k0 + lk[s]) * hkv * d], lq[s], lk[s], h, hkv, d, True, (-1, -1), 4.0,
                           [0.5, 0.125])
        worst = max(worst, tf.close(go[q0 * h * d:(q0 + lq[s]) * h * d], ro, 0)[1])
        worst = max(worst, tf.close([gl[hh * sum(lq) + q0 + i] for hh in range(h) for i in range(lq[s])], rl, 0)[1])
    check("flash_attn_varlen_func causal + softcap + alibi, 2 sequences", isinstance(r, tuple) and worst <= 2e-2,
          "max |d| %.3g" % worst)

    # what FlashAttention has and fa4 has not
    refused("dropout_p 0.1", "dropout_p", lambda: fa4.flash_attn_func(t.q, t.k, t.v, dropout_p=0.1, **base))
    refused("deterministic 2 (not a bool)", "deterministic",
            lambda: fa4.flash_attn_func(t.q, t.k, t.v, deterministic=2, **base))
    refused("return_attn_probs True", "return_attn_probs",
            lambda: fa4.flash_attn_func(t.q, t.k, t.v, return_attn_probs=True, **base))
    refused("alibi_slopes [batch, heads]", "alibi_slopes",
            lambda: fa4.flash_attn_func(t.q, t.k, t.v, alibi_slopes=tf.tensor((1, 4), tf.FP32), **base))
    refused("rotary_cos (kvcache)", "rotary_cos",
            lambda: fa4.flash_attn_with_kvcache(t.q, t.k, t.v, rotary_cos=t.alibi, cache_seqlens=3))
    refused("cache_leftpad (kvcache)", "cache_leftpad",
            lambda: fa4.flash_attn_with_kvcache(t.q, t.k, t.v, cache_leftpad=t.alibi, cache_seqlens=3))
    refused("window_size (1, 2, 3)", "window_size",
            lambda: fa4.flash_attn_func(t.q, t.k, t.v, window_size=(1, 2, 3), out=t.out, stream=0))  # noqa
    refused("softcap -1", "softcap", lambda: fa4.flash_attn_func(t.q, t.k, t.v, softcap=-1.0, **base))
    t.compare("causal after the refusals", True, (-1, -1), 0.0, False)
    return tally.done("fa api sim")


if __name__ == "__main__":
    sys.exit(main())
