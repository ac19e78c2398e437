"""tests/gpu/test_fa_api.py - fa4's FlashAttention API on a GPU (issue 27 item 2; tests/gpu/pyapi.sh runs it).

Against an fp32 torch reference written from FlashAttention's definitions (bottom-right causal, window_size
(left, right) with right = 0 under causal, softcap * tanh(s / softcap), ALiBi -slope |i + Sk - Sq - j|):
  flash_attn_func: d64/d128, bf16/fp16, causal, window, softcap, ALiBi, GQA/MQA, Sq != Sk, return shapes;
  flash_attn_varlen_func: ragged sequences, dense and paged (block_table), softcap + ALiBi;
  flash_attn_with_kvcache: no new tokens; k/v appended (the kv-append kernel) into a dense cache (cache_batch_idx
    permuted, per-row cache_seqlens, a cache of more rows than q's batch) and a paged one, Sq 1 and 4; int
    cache_seqlens; forced splits; bad device values (a length -1, cache_batch_idx past the cache); the caches'
    new rows checked;
  torch.compile(fullgraph=True) of a decode step through fa4_torch (append + attention) against eager;
  CUDA-graph capture of flash_attn_func and of a kvcache decode step (append in the graph), replayed on new data;
  dynamic tiles: two captured graphs replayed at once on two streams beside eager calls (each its own counter);
  fa4_torch's eager wrappers, which call fa4 directly (fa4_torch._direct), against the ops themselves: the same
    bits; with q requiring grad they take the op (a grad_fn, a gradient); transformers' function with sinks likewise
    (fa4::mha_fwd with a sink requiring grad: dsink).
Criteria: rel L2 of O <= 1e-2 (each sequence), max |LSE - ref| <= 1e-2 over rows that see a key.
Prints one line per case and 'fa api: N passed, N failed'.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import fa4  # noqa: E402
import fa4_torch  # noqa: E402

passed = failed = 0
DEV = "cuda"


def report(name, ok, detail=""):
    global passed, failed
    passed += bool(ok)
    failed += not ok
    print("%s %-70s %s" % ("ok  " if ok else "FAIL", name, detail), flush=True)


def ref(q, k, v, causal=False, window=(-1, -1), softcap=0.0, slopes=None, scale=None):
    """O [B, Sq, H, Dv] fp32 and LSE [B, H, Sq] of dense q [B, Sq, H, D], k, v [B, Sk, Hkv, D]."""
    b, sq, h, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    scale = scale or 1 / math.sqrt(d)
    qf = q.float().transpose(1, 2)
    kf = k.float().repeat_interleave(h // hkv, dim=2).transpose(1, 2)
    vf = v.float().repeat_interleave(h // hkv, dim=2).transpose(1, 2)
    s = qf @ kf.transpose(-1, -2) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(sq, device=q.device)[:, None]
    j = torch.arange(sk, device=q.device)[None, :]
    diag = i + sk - sq
    if slopes is not None:
        s = s - slopes.float()[None, :, None, None] * (diag - j).abs()[None, None]
    left, right = window
    if causal:
        right = 0
    vis = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if right >= 0:
        vis &= j <= diag + right
    if left >= 0:
        vis &= j >= diag - left
    s = s.masked_fill(~vis, -math.inf)
    lse = torch.logsumexp(s, -1)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return (p @ vf).transpose(1, 2), lse


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-12)).item()


def lse_err(got, want):
    fin = torch.isfinite(want)
    return (got[fin] - want[fin]).abs().max().item() if fin.any() else 0.0


def rnd(*shape, dtype=torch.bfloat16, amp=1.0):
    return (torch.randn(*shape, device=DEV) * amp).to(dtype)


def case_func(name, b, sq, sk, h, hkv, d, dtype=torch.bfloat16, causal=False, window=(-1, -1), softcap=0.0,
              alibi=False, scale=None, amp=1.0):
    q, k, v = rnd(b, sq, h, d, dtype=dtype, amp=amp), rnd(b, sk, hkv, d, dtype=dtype), rnd(b, sk, hkv, d, dtype=dtype)
    slopes = torch.tensor([2 ** (-8 * (i + 1) / h) for i in range(h)], device=DEV) if alibi else None
    try:
        o, lse = fa4.flash_attn_func(q, k, v, scale, causal, window, softcap, slopes, return_lse=True)
        o2 = fa4.flash_attn_func(q, k, v, scale, causal, window, softcap, slopes)  # the fast path, out only
        ro, rl = ref(q, k, v, causal, window, softcap, slopes, scale)
        e, le, e2 = rel(o, ro), lse_err(lse, rl), rel(o2, ro)
        shapes = tuple(o.shape) == (b, sq, h, d) and o.dtype == dtype and tuple(lse.shape) == (b, h, sq) and \
            lse.dtype == torch.float32 and isinstance(o2, torch.Tensor)
        report("flash_attn_func " + name, shapes and e <= 1e-2 and e2 <= 1e-2 and le <= 1e-2,
               "rel L2 %.2e (fast path %.2e), lse %.2e" % (e, e2, le))
    except Exception as ex:  # noqa: BLE001
        report("flash_attn_func " + name, False, "%s: %s" % (type(ex).__name__, str(ex)[:300]))


def case_varlen(name, lens_q, lens_k, h, hkv, d, causal=True, softcap=0.0, alibi=False, page=0):
    cq = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32, device=DEV)
    ck = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32, device=DEV)
    q, k, v = rnd(sum(lens_q), h, d), rnd(sum(lens_k), hkv, d), rnd(sum(lens_k), hkv, d)
    slopes = torch.tensor([2 ** (-8 * (i + 1) / h) for i in range(h)], device=DEV) if alibi else None
    try:
        bt = None
        kk, vv = k, v
        if page:  # the same keys through a shuffled page pool
            per = [(n + page - 1) // page for n in lens_k]
            n_pages = sum(per) + 3
            order = torch.randperm(n_pages, device=DEV)[:sum(per)]
            kk = torch.zeros(n_pages, page, hkv, d, dtype=k.dtype, device=DEV)
            vv = torch.zeros_like(kk)
            bt = torch.zeros(len(lens_k), max(per), dtype=torch.int32, device=DEV)
            at = 0
            for s, n in enumerate(lens_k):
                for p in range(per[s]):
                    pg = order[at]
                    at += 1
                    bt[s, p] = pg
                    rows = slice(int(ck[s]) + p * page, min(int(ck[s]) + (p + 1) * page, int(ck[s + 1])))
                    m = rows.stop - rows.start
                    kk[pg, :m], vv[pg, :m] = k[rows], v[rows]
        o, lse = fa4.flash_attn_varlen_func(q, kk, vv, cq, ck, max(lens_q), max(lens_k), None, causal, (-1, -1),
                                            softcap, slopes, True, bt)
        ok = tuple(o.shape) == (sum(lens_q), h, d) and tuple(lse.shape) == (h, sum(lens_q))
        worst = wl = 0.0
        for s in range(len(lens_q)):
            rq, rk = slice(int(cq[s]), int(cq[s + 1])), slice(int(ck[s]), int(ck[s + 1]))
            ro, rl = ref(q[rq][None], k[rk][None], v[rk][None], causal, (-1, -1), softcap, slopes)
            worst = max(worst, rel(o[rq], ro[0]))
            wl = max(wl, lse_err(lse[:, rq], rl[0]))
        report("flash_attn_varlen_func " + name, ok and worst <= 1e-2 and wl <= 1e-2, "rel L2 %.2e, lse %.2e" % (worst, wl))
    except Exception as ex:  # noqa: BLE001
        report("flash_attn_varlen_func " + name, False, "%s: %s" % (type(ex).__name__, str(ex)[:300]))


def case_kvcache(name, b, sq, s_new, h, hkv, d, s_max=512, paged=0, batch_idx=False, int_lens=False, softcap=0.0,
                 window=(-1, -1), splits=0):
    lens = [int(x) for x in torch.randint(1, s_max - s_new - 8, (b,))]
    if int_lens:
        lens = [lens[0]] * b
    q = rnd(b, sq, h, d)
    kn, vn = (rnd(b, s_new, hkv, d), rnd(b, s_new, hkv, d)) if s_new else (None, None)
    rows = torch.randperm(b + 2, device=DEV)[:b].to(torch.int32) if batch_idx else torch.arange(b, device=DEV,
                                                                                                 dtype=torch.int32)
    kc, vc = rnd(b + 2, s_max, hkv, d), rnd(b + 2, s_max, hkv, d)  # dense truth
    try:
        if paged:
            per = s_max // paged
            n_pages = (b + 2) * per
            perm = torch.randperm(n_pages, device=DEV)
            bt = perm[:b * per].view(b, per).to(torch.int32)
            kp = torch.zeros(n_pages, paged, hkv, d, dtype=kc.dtype, device=DEV)
            vp = torch.zeros_like(kp)
            for s in range(b):
                kp[bt[s].long()] = kc[s].view(per, paged, hkv, d)
                vp[bt[s].long()] = vc[s].view(per, paged, hkv, d)
            k_cache, v_cache, kwargs = kp, vp, dict(block_table=bt)
            truth_rows = torch.arange(b, device=DEV)
        else:
            k_cache, v_cache, kwargs = kc.clone(), vc.clone(), dict(cache_batch_idx=rows if batch_idx else None)
            truth_rows = rows.long()
        cs = lens[0] if int_lens else torch.tensor(lens, dtype=torch.int32, device=DEV)
        o, lse = fa4.flash_attn_with_kvcache(q, k_cache, v_cache, kn, vn, cs, softmax_scale=None, causal=True,
                                             window_size=window, softcap=softcap, return_lse=True, num_splits=splits,
                                             **kwargs)
        ok = tuple(o.shape) == (b, sq, h, d) and tuple(lse.shape) == (b, h, sq)
        worst = wl = 0.0
        cache_ok = True
        for s in range(b):
            kt, vt = kc[truth_rows[s]].clone(), vc[truth_rows[s]].clone()
            if s_new:
                kt[lens[s]:lens[s] + s_new], vt[lens[s]:lens[s] + s_new] = kn[s], vn[s]
            n = lens[s] + s_new
            ro, rl = ref(q[s:s + 1], kt[None, :n], vt[None, :n], True, window, softcap)
            worst = max(worst, rel(o[s], ro[0]))
            wl = max(wl, lse_err(lse[s], rl[0]))
            got_k = k_cache[truth_rows[s]] if not paged else k_cache[bt[s].long()].reshape(s_max, hkv, d)
            cache_ok &= bool(torch.equal(got_k[:n], kt[:n]))
        report("flash_attn_with_kvcache " + name, ok and cache_ok and worst <= 1e-2 and wl <= 1e-2,
               "rel L2 %.2e, lse %.2e, cache rows %s" % (worst, wl, "written" if cache_ok else "WRONG"))
    except Exception as ex:  # noqa: BLE001
        report("flash_attn_with_kvcache " + name, False, "%s: %s" % (type(ex).__name__, str(ex)[:300]))


def case_kvcache_bad():
    """Device values outside the cache (fa4.h fa4_kv_append): sequence 0's length is -1 (its first new token, at
    position -1, is not written; it then sees 1 key), sequence 1's cache_batch_idx lies past the cache (nothing
    written, no key: out 0, lse -inf), sequence 2 is ordinary."""
    name = "flash_attn_with_kvcache dense bad values: length -1, cache_batch_idx past the cache"
    try:
        b, h, hkv, d, s_max = 3, 8, 2, 128, 64
        q, kn, vn = rnd(b, 1, h, d), rnd(b, 2, hkv, d), rnd(b, 2, hkv, d)
        kc, vc = rnd(b, s_max, hkv, d), rnd(b, s_max, hkv, d)
        k0, v0 = kc.clone(), vc.clone()
        lens = torch.tensor([-1, 10, 20], dtype=torch.int32, device=DEV)
        idx = torch.tensor([2, b, 0], dtype=torch.int32, device=DEV)
        o, lse = fa4.flash_attn_with_kvcache(q, kc, vc, kn, vn, lens, idx, causal=True, return_lse=True)
        torch.cuda.synchronize()
        kt, vt = k0.clone(), v0.clone()
        kt[2, 0], vt[2, 0] = kn[0, 1], vn[0, 1]
        kt[0, 20:22], vt[0, 20:22] = kn[2], vn[2]
        cache_ok = bool(torch.equal(kc, kt) and torch.equal(vc, vt))
        r0, l0 = ref(q[0:1], kt[None, 2, :1], vt[None, 2, :1], True)
        r2, l2 = ref(q[2:3], kt[None, 0, :22], vt[None, 0, :22], True)
        worst = max(rel(o[0], r0[0]), rel(o[2], r2[0]))
        wl = max(lse_err(lse[0], l0[0]), lse_err(lse[2], l2[0]))
        empty = bool((o[1] == 0).all()) and bool(torch.isneginf(lse[1]).all())
        report(name, cache_ok and empty and worst <= 1e-2 and wl <= 1e-2,
               "rel L2 %.2e, lse %.2e, caches %s, sequence 1 %s" % (worst, wl, "ok" if cache_ok else "WRONG",
                                                                      "empty" if empty else "NOT EMPTY"))
    except Exception as ex:  # noqa: BLE001
        report(name, False, "%s: %s" % (type(ex).__name__, str(ex)[:300]))


def case_compile():
    b, h, hkv, d, s_max = 4, 16, 2, 128, 1024
    kc, vc = rnd(b, s_max, hkv, d), rnd(b, s_max, hkv, d)
    lens = torch.randint(10, 500, (b,), dtype=torch.int32, device=DEV)

    def step(q, kn, vn, kc, vc, lens):
        o = fa4_torch.flash_attn_with_kvcache(q, kc, vc, kn, vn, cache_seqlens=lens, causal=True)
        return fa4_torch.flash_attn_func(o, o, o, causal=True, softcap=30.0) * 2

    try:
        q, kn, vn = rnd(b, 1, h, d), rnd(b, 1, hkv, d), rnd(b, 1, hkv, d)
        k1, v1, k2, v2 = kc.clone(), vc.clone(), kc.clone(), vc.clone()
        want = step(q, kn, vn, k1, v1, lens)
        torch._dynamo.reset()
        got = torch.compile(step, fullgraph=True)(q, kn, vn, k2, v2, lens)
        torch.cuda.synchronize()
        e = rel(got, want)
        report("torch.compile(fullgraph=True): kvcache append + attention + softcap", e <= 1e-3 and
               torch.equal(k1, k2) and torch.equal(v1, v2), "rel L2 vs eager %.2e; caches equal %s" %
               (e, torch.equal(k1, k2) and torch.equal(v1, v2)))
    except Exception as ex:  # noqa: BLE001
        report("torch.compile(fullgraph=True): kvcache append + attention + softcap", False,
               "%s: %s" % (type(ex).__name__, str(ex)[:600]))


def case_graphs():
    try:
        b, s, h, d = 2, 256, 8, 128
        q, k, v = rnd(b, s, h, d), rnd(b, s, h, d), rnd(b, s, h, d)
        slopes = torch.rand(h, device=DEV) * 0.1
        fa4.flash_attn_func(q, k, v, causal=True, alibi_slopes=slopes)  # fetch the kernel before capturing
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            o = fa4.flash_attn_func(q, k, v, causal=True, alibi_slopes=slopes)
        for t in (q, k, v):
            t.copy_(rnd(*t.shape))
        g.replay()
        torch.cuda.synchronize()
        e = rel(o, ref(q, k, v, True, slopes=slopes)[0])
        report("CUDA graph: flash_attn_func (alibi) captured, replayed on new inputs", e <= 1e-2, "rel L2 %.2e" % e)

        bb, hh, hkv, s_max = 4, 16, 4, 512
        kc, vc = rnd(bb, s_max, hkv, d), rnd(bb, s_max, hkv, d)
        k0, v0 = kc.clone(), vc.clone()
        lens = torch.tensor([5, 100, 300, 17], dtype=torch.int32, device=DEV)
        qd, kn, vn = rnd(bb, 1, hh, d), rnd(bb, 1, hkv, d), rnd(bb, 1, hkv, d)

        def step():
            out = fa4_torch.flash_attn_with_kvcache(qd, kc, vc, kn, vn, cache_seqlens=lens, causal=True)
            lens.add_(1)
            return out

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        kc.copy_(k0), vc.copy_(v0), lens.copy_(torch.tensor([5, 100, 300, 17], dtype=torch.int32))
        g2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g2):
            od = step()
        kc.copy_(k0), vc.copy_(v0), lens.copy_(torch.tensor([5, 100, 300, 17], dtype=torch.int32))
        ok, worst = True, 0.0
        for it in range(3):  # three decode steps replayed: each appends one token and attends
            qd.copy_(rnd(bb, 1, hh, d)), kn.copy_(rnd(bb, 1, hkv, d)), vn.copy_(rnd(bb, 1, hkv, d))
            n = [int(x) for x in lens]
            g2.replay()
            torch.cuda.synchronize()
            for s in range(bb):
                k0[s, n[s]], v0[s, n[s]] = kn[s, 0], vn[s, 0]
                ro, _ = ref(qd[s:s + 1], k0[None, s, :n[s] + 1], v0[None, s, :n[s] + 1], True)
                worst = max(worst, rel(od[s], ro[0]))
                ok &= bool(torch.equal(kc[s, :n[s] + 1], k0[s, :n[s] + 1]))
        report("CUDA graph: kvcache decode step (append + attention) replayed 3 times", ok and worst <= 1e-2,
               "rel L2 %.2e, caches %s" % (worst, "ok" if ok else "WRONG"))
    except Exception as ex:  # noqa: BLE001
        report("CUDA graphs", False, "%s: %s" % (type(ex).__name__, str(ex)[:600]))


def case_dynamic_graphs():
    """Dynamic tiles (runtime/sched.c): an eager call counts tiles in its stream's counter, a captured one in its
    own, so two graphs captured on one stream and replayed at once on two streams, beside eager calls of the same
    shapes on a third, each compute every tile (a shared counter would leave rows of one of them unwritten)."""
    name = "dynamic tiles: 2 graphs on 2 streams beside eager calls, 4 rounds"
    try:
        shapes = [(8, 1024, 16, 128, False), (4, 1024, 16, 64, True)]  # full d128; causal d64 (L2 groups' order)
        sets = []
        for b, s, h, d, causal in shapes:
            q, k, v = rnd(b, s, h, d), rnd(b, s, h, d), rnd(b, s, h, d)
            cfg = fa4.mha_config(q, k, v, causal=causal)
            if " dynamic=1 " not in cfg:
                report(name, False, "the runtime's config for %s is not dynamic: %s" % ((b, s, h, d, causal), cfg))
                return
            fa4.flash_attn_func(q, k, v, causal=causal)  # eager first: the kernel and the counters' pool
            sets.append((q, k, v, causal))
        torch.cuda.synchronize()
        graphs, outs = [], []
        for q, k, v, causal in sets:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                outs.append(fa4.flash_attn_func(q, k, v, causal=causal))
            graphs.append(g)
        streams = [torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()]
        worst, worst_eager, finite = 0.0, 0.0, True
        for _ in range(4):
            for q, k, v, _c in sets:
                for t in (q, k, v):
                    t.copy_(rnd(*t.shape))
            torch.cuda.synchronize()
            for g, st in zip(graphs, streams):
                with torch.cuda.stream(st):
                    g.replay()
            with torch.cuda.stream(streams[2]):
                eager = [fa4.flash_attn_func(q, k, v, causal=c) for q, k, v, c in sets]
            torch.cuda.synchronize()
            for (q, k, v, c), o, oe in zip(sets, outs, eager):
                want = ref(q, k, v, c)[0]
                e, ee = rel(o, want), rel(oe, want)
                finite &= math.isfinite(e) and math.isfinite(ee)  # max() would drop a NaN
                worst, worst_eager = max(worst, e), max(worst_eager, ee)
        ok = finite and worst <= 1e-2 and worst_eager <= 1e-2
        report(name, ok, "rel L2 graphs %.2e, eager %.2e" % (worst, worst_eager))
    except Exception as ex:  # noqa: BLE001
        report(name, False, "%s: %s" % (type(ex).__name__, str(ex)[:600]))


def case_eager_paths():
    """fa4_torch's eager wrappers call fa4 directly; the same call through the op gives the same bits."""
    name = "fa4_torch eager (direct) == the op"
    try:
        q, k, v = rnd(2, 200, 8, 128), rnd(2, 300, 2, 128), rnd(2, 300, 2, 128)
        direct = fa4_torch._direct(q, k, v, None)
        o1, l1 = fa4_torch.flash_attn_func(q, k, v, causal=True, softcap=20.0, return_lse=True)
        o2, l2 = torch.ops.fa4.flash_attn(q, k, v, None, True, -1, -1, 20.0, None)
        cq = torch.tensor([0, 100, 200], dtype=torch.int32, device=DEV)
        ck = torch.tensor([0, 150, 300], dtype=torch.int32, device=DEV)
        qv, kv_, vv = q.reshape(400, 8, 128)[:200], k.reshape(600, 2, 128)[:300], v.reshape(600, 2, 128)[:300]
        o3 = fa4_torch.flash_attn_varlen_func(qv, kv_, vv, cq, ck, 100, 150, causal=True)
        o4, _ = torch.ops.fa4.flash_attn_varlen(qv, kv_, vv, cq, ck, 100, 150, None, True, -1, -1, 0.0, None, None)
        qg = q.clone().requires_grad_()
        og = fa4_torch.flash_attn_func(qg, k, v, causal=True, softcap=20.0)
        og.float().square().sum().backward()
        torch.cuda.synchronize()
        same = torch.equal(o1, o2) and torch.equal(l1, l2) and torch.equal(o3, o4) and torch.equal(og.detach(), o1)
        grad = og.grad_fn is not None and qg.grad is not None and bool(torch.isfinite(qg.grad).all())
        report(name, direct and same and grad, "direct %s, bits equal %s, grad through the op %s" % (direct, same,
                                                                                                    grad))
    except Exception as ex:  # noqa: BLE001
        report(name, False, "%s: %s" % (type(ex).__name__, str(ex)[:600]))
    name = "transformers_attention with sinks: eager == the op, dsink"
    try:
        class Attn(torch.nn.Module):
            is_causal = True
        q, k = rnd(2, 8, 96, 128), rnd(2, 2, 96, 128)  # transformers' [B, H, S, D]
        sink = torch.randn(8, device=DEV)
        o1, _ = fa4_torch.transformers_attention(Attn(), q, k, k, None, scaling=0.1, s_aux=sink)
        sg = sink.clone().requires_grad_()
        o2, _ = fa4_torch.transformers_attention(Attn(), q, k, k, None, scaling=0.1, s_aux=sg)
        o2.float().square().sum().backward()
        torch.cuda.synchronize()
        same = torch.equal(o1, o2.detach())
        grad = sg.grad is not None and bool(torch.isfinite(sg.grad).all()) and bool((sg.grad != 0).any())
        report(name, same and grad, "bits equal %s, dsink %s" % (same, "finite" if grad else sg.grad))
    except Exception as ex:  # noqa: BLE001
        report(name, False, "%s: %s" % (type(ex).__name__, str(ex)[:600]))


def main():
    torch.manual_seed(0)
    print("torch %s, %s, fa4 %s" % (torch.__version__, torch.cuda.get_device_name(), fa4.version()), flush=True)
    case_func("d128 causal", 2, 300, 300, 8, 8, 128, causal=True)
    case_func("d64 fp16 none, Sq < Sk", 2, 200, 333, 4, 4, 64, dtype=torch.float16)
    case_func("d128 causal Sq > Sk (rows that see no key)", 1, 300, 200, 4, 4, 128, causal=True)
    case_func("d128 GQA 16/4 causal", 2, 256, 512, 16, 4, 128, causal=True)
    case_func("d128 MQA 8/1 window (64, 16)", 1, 256, 256, 8, 1, 128, window=(64, 16))
    case_func("d128 causal + window (100, 100) = (100, 0)", 1, 300, 400, 4, 4, 128, causal=True, window=(100, 100))
    case_func("d128 softcap 30 (scale 1, scores past the cap)", 2, 256, 256, 8, 8, 128, causal=True, softcap=30.0,
              scale=1.0, amp=3.0)
    case_func("d64 softcap 5 fp16 none", 1, 200, 300, 4, 2, 64, dtype=torch.float16, softcap=5.0, amp=2.0)
    case_func("d128 alibi none (both sides)", 2, 200, 300, 8, 2, 128, alibi=True)
    case_func("d128 alibi causal + softcap 20", 2, 300, 300, 8, 8, 128, causal=True, alibi=True, softcap=20.0)
    case_func("d256 causal softcap 50", 1, 200, 200, 4, 4, 256, causal=True, softcap=50.0)
    case_func("decode Sq 1, GQA 32/8, alibi", 4, 1, 1000, 32, 8, 128, causal=True, alibi=True)
    case_varlen("3 sequences causal", [100, 1, 257], [150, 40, 257], 8, 2, 128)
    case_varlen("softcap 10 + alibi", [64, 200], [300, 200], 8, 8, 128, softcap=10.0, alibi=True)
    case_varlen("paged (page 64) causal", [30, 7, 100], [500, 300, 1000], 8, 2, 128, page=64)
    case_kvcache("dense, no new tokens", 3, 1, 0, 16, 4, 128)
    case_kvcache("dense append 1 (decode), cache_batch_idx permuted", 4, 1, 1, 16, 4, 128, batch_idx=True)
    case_kvcache("dense append 4 (Sq 4, chunked), softcap 30", 3, 4, 4, 8, 8, 128, softcap=30.0)
    case_kvcache("dense, int cache_seqlens, append 2", 2, 2, 2, 8, 2, 128, int_lens=True)
    case_kvcache("paged (page 64) append 1", 4, 1, 1, 16, 4, 128, paged=64)
    case_kvcache("paged (page 128) append 3, window (64, 0)", 3, 3, 3, 8, 2, 128, paged=128, window=(64, 0))
    case_kvcache("dense, int cache_seqlens, append 1, num_splits 3", 2, 1, 1, 16, 4, 128, int_lens=True, splits=3)
    case_kvcache("paged (page 16) append 2, num_splits 2", 2, 1, 2, 16, 2, 128, paged=16, splits=2)
    case_kvcache_bad()
    case_compile()
    case_graphs()
    case_dynamic_graphs()
    case_eager_paths()
    print("fa api: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
