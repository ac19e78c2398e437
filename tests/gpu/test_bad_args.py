"""tests/gpu/test_bad_args.py - issue 26, item 4, on a GPU (tests/gpu/run.sh, step bad_args; PyTorch).

Each wrong-argument case of the issue must raise fa4.Fa4Error naming the argument (Python's checks), or, where
the case goes straight to the C API with a bad pointer (ctypes, Python's checks bypassed), return
FA4_ERR_INVALID_ARGUMENT naming it (the runtime asks the driver about every pointer), or give the documented
result (topk_length below 0: an empty row; above topk: topk). Nothing of a refused call may launch, so the CUDA
context must stay healthy: every case ends with torch.cuda.synchronize(), and after all of them a normal MHA
and sparse MLA call run and match a torch reference.

  dense / varlen MHA and sparse MLA out with too few rows; indices with fewer rows than q
  out, attn_sink, topk_length on the CPU; out fp32
  num_splits=2**32+1, max_seqlen_q=2**32+9, window=(2**32+5, 0)
  topk_length -1, -2**31 (empty rows), topk + 1 and 2**31 - 1 (= topk)
  C API: out in an allocation one row short, in host memory (pageable and pinned), in managed memory
  (accepted), indices one row short, attn_sink / topk_length host pointers

It also prints the host cost of a cached call (fa4_mha_fwd through ctypes, the driver checks included) and of
one cuPointerGetAttributes, for the issue's <= 3 us budget. Prints one line per case and
'bad args: N passed, N failed'. `--list` prints the cases and needs no GPU (nor torch).
"""
import ctypes
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import fa4  # noqa: E402

INVALID = 1  # FA4_ERR_INVALID_ARGUMENT
passed = failed = 0


def report(name, ok, detail=""):
    global passed, failed
    passed += bool(ok)
    failed += not ok
    print("%s %-58s %s" % ("ok  " if ok else "FAIL", name, detail[:240]), flush=True)


class Env:
    """The tensors of the cases: a small dense and varlen MHA problem and a sparse MLA one, on cuda:0."""

    def __init__(self, torch):
        self.t = torch
        d = self.dev = torch.device("cuda", 0)
        torch.manual_seed(26)
        self.B, self.SQ, self.SK, self.H, self.HK, self.D = 2, 128, 256, 8, 2, 128
        self.q = torch.randn(self.B, self.SQ, self.H, self.D, device=d, dtype=torch.bfloat16)
        self.k = torch.randn(self.B, self.SK, self.HK, self.D, device=d, dtype=torch.bfloat16)
        self.v = torch.randn(self.B, self.SK, self.HK, self.D, device=d, dtype=torch.bfloat16)
        self.lens = [100, 28]
        self.cu_q = torch.tensor([0, 100, 128], dtype=torch.int32, device=d)
        self.cu_k = torch.tensor([0, 200, 256], dtype=torch.int32, device=d)
        self.vq = self.q[0].clone()  # [128, H, D] packed rows
        self.vk, self.vv = self.k[0].clone(), self.v[0].clone()
        self.SQM, self.SKV, self.HQ, self.DQK, self.TOPK = 4, 1024, 64, 576, 128
        self.mq = torch.randn(self.SQM, self.HQ, self.DQK, device=d, dtype=torch.bfloat16)
        self.kv = torch.randn(self.SKV, 1, self.DQK, device=d, dtype=torch.bfloat16)
        self.idx = torch.stack([torch.randperm(self.SKV, device=d)[:self.TOPK] for _ in range(self.SQM)]).int()
        self.sink = torch.zeros(self.HQ, device=d, dtype=torch.float32)
        self.tklen = torch.full((self.SQM,), self.TOPK, dtype=torch.int32, device=d)

    def mla_ref(self, lengths=None):
        """out, lse, max_logits of the sparse MLA problem in fp32 (rows of length <= 0 empty)."""
        torch = self.t
        out = torch.zeros(self.SQM, self.HQ, 512, device=self.dev)
        lse = torch.full((self.SQM, self.HQ), math.inf, device=self.dev)
        mx = torch.full((self.SQM, self.HQ), -math.inf, device=self.dev)
        for s in range(self.SQM):
            n = self.TOPK if lengths is None else max(0, min(lengths[s], self.TOPK))
            if n == 0:
                continue
            kv = self.kv[self.idx[s, :n].long(), 0].float()
            logit = self.mq[s].float() @ kv.T / math.sqrt(self.DQK)
            out[s] = torch.softmax(logit, -1) @ kv[:, :512]
            lse[s], mx[s] = torch.logsumexp(logit, -1), logit.max(-1).values
        return out, lse, mx

    def mha_ref(self):
        torch = self.t
        g = self.H // self.HK
        q = self.q.float().transpose(1, 2)
        k = self.k.float().repeat_interleave(g, 2).transpose(1, 2)
        v = self.v.float().repeat_interleave(g, 2).transpose(1, 2)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.D)
        i = torch.arange(self.SQ, device=self.dev)[:, None]
        j = torch.arange(self.SK, device=self.dev)[None, :]
        s = s.masked_fill(j > i + self.SK - self.SQ, -math.inf)
        return (torch.softmax(s, -1) @ v).transpose(1, 2)


# ---------------------------------------------------------------- the C API with one pointer replaced

class Driver:
    """The few libcuda calls the C-API cases need (the context torch made current)."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        self.lib.cuMemAllocManaged.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t, ctypes.c_uint]
        self.lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        self.lib.cuPointerGetAttributes.argtypes = [ctypes.c_uint, ctypes.POINTER(ctypes.c_int),
                                                    ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64]

    def alloc(self, n, managed=False):
        p = ctypes.c_uint64()
        r = self.lib.cuMemAllocManaged(ctypes.byref(p), n, 1) if managed else self.lib.cuMemAlloc_v2(ctypes.byref(p), n)
        if r:
            raise RuntimeError("cuMemAlloc%s(%d) failed: %d" % ("Managed" if managed else "", n, r))
        return p.value

    def free(self, p):
        self.lib.cuMemFree_v2(p)


def c_call(entry, a):
    """fa4_mha_fwd / fa4_mla_sparse_fwd on args a, on the default stream: (status, message)."""
    lib = fa4._load()
    ctx = fa4.context(0)
    s = getattr(lib, entry)(ctx, ctypes.byref(a), None)
    return s, lib.fa4_last_error(ctx).decode()


def mha_c_args(e, out):
    return fa4._args(e.q, e.k, e.v, out, None, True, None, None, None)


def mla_c_args(e, out, lse, mx, sink=None, tklen=None):
    return fa4._mla_args(e.mq, e.kv, e.idx, out, lse, mx, None, sink, tklen, None, None, 0)[0]


# ---------------------------------------------------------------- cases

def cases():
    """(name, kind, fn, want): kind 'raise' (fn(env) must raise Fa4Error whose message starts with want), 'c'
    (fn(env, drv) returns (status, message): FA4_ERR_INVALID_ARGUMENT starting with want), 'check' (fn(env, drv)
    returns (ok, detail))."""
    T = lambda e: e.t  # noqa: E731
    mha = lambda e, **kw: fa4.mha_fwd(e.q, e.k, e.v, causal=True, **kw)  # noqa: E731
    def varlen(e, **kw):
        args = dict(cu_seqlens_q=e.cu_q, cu_seqlens_k=e.cu_k, max_seqlen_q=100)
        args.update(kw)
        return fa4.mha_fwd(e.vq, e.vk, e.vv, causal=True, **args)

    mla = lambda e, **kw: fa4.mla_sparse_fwd(e.mq, e.kv, e.idx, **kw)  # noqa: E731
    bf16 = lambda e, *s: T(e).empty(*s, device=e.dev, dtype=T(e).bfloat16)  # noqa: E731

    def out_short_c(e, drv):
        row = e.H * e.D * 2
        p = drv.alloc(e.B * e.SQ * row - row)
        a = mha_c_args(e, T(e).empty_like(e.q))
        a.o = p
        try:
            return c_call("fa4_mha_fwd", a)
        finally:
            drv.free(p)

    def out_host_c(e, drv, pinned):
        host = T(e).empty(e.q.shape, dtype=T(e).bfloat16, pin_memory=pinned)
        a = mha_c_args(e, T(e).empty_like(e.q))
        a.o = host.data_ptr()
        return c_call("fa4_mha_fwd", a)

    def out_ctypes_c(e, drv):
        buf = ctypes.create_string_buffer(e.q.numel() * 2 + 64)
        a = mha_c_args(e, T(e).empty_like(e.q))
        a.o = (ctypes.addressof(buf) + 15) // 16 * 16
        return c_call("fa4_mha_fwd", a)

    def out_managed_c(e, drv):
        p = drv.alloc(e.q.numel() * 2, managed=True)
        try:
            a = mha_c_args(e, T(e).empty_like(e.q))
            a.o = p
            s, msg = c_call("fa4_mha_fwd", a)
            T(e).cuda.synchronize()
            return s == 0, "status %d %s" % (s, msg)
        finally:
            drv.free(p)

    def mla_outs(e):
        t = T(e)
        return bf16(e, e.SQM, e.HQ, 512), t.empty(e.SQM, e.HQ, device=e.dev), t.empty(e.SQM, e.HQ, device=e.dev)

    def indices_short_c(e, drv):
        p = drv.alloc((e.SQM - 1) * e.TOPK * 4)
        a = mla_c_args(e, *mla_outs(e))
        a.indices = p
        try:
            return c_call("fa4_mla_sparse_fwd", a)
        finally:
            drv.free(p)

    def mla_host_c(e, drv, field, n, dtype):
        host = T(e).zeros(n, dtype=dtype)
        a = mla_c_args(e, *mla_outs(e))
        setattr(a, field, host.data_ptr())
        return c_call("fa4_mla_sparse_fwd", a)

    def tklen_result(e, drv, lengths, want_lengths):
        t = T(e)
        tk = t.tensor(lengths, dtype=t.int32, device=e.dev)
        out, lse, mx = fa4.mla_sparse_fwd(e.mq, e.kv, e.idx, topk_length=tk)
        t.cuda.synchronize()
        ro, rl, rm = e.mla_ref(want_lengths)
        bad = []
        for s in range(e.SQM):
            if max(0, min(want_lengths[s], e.TOPK)) == 0:
                if not (out[s] == 0).all() or not (lse[s] == math.inf).all() or not (mx[s] == -math.inf).all():
                    bad.append("row %d (length %d) is not the empty row" % (s, lengths[s]))
            else:
                err = (out[s].float() - ro[s]).abs().max().item()
                lerr = (lse[s] - rl[s]).abs().max().item()
                if err > 2e-2 or lerr > 1e-3:
                    bad.append("row %d (length %d): max |dout| %.3g, |dlse| %.3g" % (s, lengths[s], err, lerr))
        return not bad, "; ".join(bad) or "lengths %s read as %s" % (lengths, want_lengths)

    K = 128  # Env.TOPK: the sparse MLA problem's topk
    return [
        ("mha out with too few rows", "raise", lambda e: mha(e, out=bf16(e, e.B, e.SQ - 1, e.H, e.D)), "out"),
        ("varlen out with too few rows", "raise", lambda e: varlen(e, out=bf16(e, e.SQ - 1, e.H, e.D)), "out"),
        ("mla out with too few rows", "raise", lambda e: mla(e, out=bf16(e, e.SQM - 1, e.HQ, 512)), "out"),
        ("mla indices with fewer rows than q", "raise",
         lambda e: fa4.mla_sparse_fwd(e.mq, e.kv, e.idx[:-1].contiguous()), "indices"),
        ("mha out on the cpu", "raise",
         lambda e: mha(e, out=T(e).empty(e.q.shape, dtype=T(e).bfloat16)), "out"),
        ("mla attn_sink on the cpu", "raise", lambda e: mla(e, attn_sink=e.sink.cpu()), "attn_sink"),
        ("mla topk_length on the cpu", "raise", lambda e: mla(e, topk_length=e.tklen.cpu()), "topk_length"),
        ("mha out fp32", "raise", lambda e: mha(e, out=T(e).empty(e.q.shape, device=e.dev)), "out"),
        ("mla out fp32", "raise", lambda e: mla(e, out=T(e).empty(e.SQM, e.HQ, 512, device=e.dev)), "out"),
        ("num_splits=2**32+1", "raise", lambda e: mha(e, num_splits=2 ** 32 + 1), "num_splits"),
        ("max_seqlen_q=2**32+9", "raise", lambda e: varlen(e, max_seqlen_q=2 ** 32 + 9), "max_seqlen_q"),
        ("window=(2**32+5, 0)", "raise",
         lambda e: fa4.mha_fwd(e.q, e.k, e.v, window=(2 ** 32 + 5, 0)), "window[0]"),
        ("topk_length -1 and -2**31: empty rows", "check",
         lambda e, d: tklen_result(e, d, [-1, -2 ** 31, 5, K], [0, 0, 5, K]), None),
        ("topk_length topk+1 and 2**31-1: topk", "check",
         lambda e, d: tklen_result(e, d, [K + 1, 2 ** 31 - 1, 0, 77], [K, K, 0, 77]), None),
        ("C: out in an allocation one row short", "c", out_short_c, "o"),
        ("C: out in pageable host memory (torch cpu)", "c", lambda e, d: out_host_c(e, d, False), "o"),
        ("C: out in page-locked host memory", "c", lambda e, d: out_host_c(e, d, True), "o"),
        ("C: out in a ctypes host buffer", "c", out_ctypes_c, "o"),
        ("C: indices in an allocation one row short", "c", indices_short_c, "indices"),
        ("C: attn_sink a host pointer", "c",
         lambda e, d: mla_host_c(e, d, "attn_sink", e.HQ, T(e).float32), "attn_sink"),
        ("C: topk_length a host pointer", "c",
         lambda e, d: mla_host_c(e, d, "topk_length", e.SQM, T(e).int32), "topk_length"),
        ("C: out in managed memory runs", "check", out_managed_c, None),
    ]


def run_case(env, drv, name, kind, fn, want):
    torch = env.t
    try:
        if kind == "raise":
            try:
                fn(env)
                report(name, False, "accepted")
            except fa4.Fa4Error as ex:
                msg = str(ex)
                report(name, msg.startswith(want + ":") or msg.startswith(want + " ") or
                       msg.startswith(want + "["), msg)
        elif kind == "c":
            s, msg = fn(env, drv)
            report(name, s == INVALID and msg.startswith(want + ":"), "status %d: %s" % (s, msg))
        else:
            ok, detail = fn(env, drv)
            report(name, ok, detail)
        torch.cuda.synchronize()  # a launch that faulted would show here, and in every case after
    except Exception as ex:  # noqa: BLE001 - a crash of the case is its failure
        report(name, False, "%s: %s" % (type(ex).__name__, ex))


def healthy_calls(env):
    torch = env.t
    try:
        o = fa4.mha_fwd(env.q, env.k, env.v, causal=True)
        out, lse, mx = fa4.mla_sparse_fwd(env.mq, env.kv, env.idx)
        torch.cuda.synchronize()
        err = ((o.float() - env.mha_ref()).norm() / env.mha_ref().norm()).item()
        ro, rl, _ = env.mla_ref()
        merr = (out.float() - ro).abs().max().item()
        report("context healthy: mha and mla run and match", err < 1e-2 and merr < 2e-2,
               "mha rel L2 %.2e, mla max |dout| %.2e" % (err, merr))
    except Exception as ex:  # noqa: BLE001
        report("context healthy: mha and mla run and match", False, "%s: %s" % (type(ex).__name__, ex))


def host_cost(env, drv):
    """Microseconds per cached fa4_mha_fwd through ctypes (driver checks included) and per
    cuPointerGetAttributes of the five attributes the runtime asks."""
    torch = env.t
    out = torch.empty_like(env.q)
    a = mha_c_args(env, out)
    lib, ctx = fa4._load(), fa4.context(0)
    f = lib.fa4_mha_fwd
    f(ctx, ctypes.byref(a), None)
    torch.cuda.synchronize()
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        f(ctx, ctypes.byref(a), None)
    call = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    attrs = (ctypes.c_int * 5)(2, 9, 8, 11, 12)  # memory type, ordinal, managed, range start, range size
    vals = (ctypes.c_uint64 * 5)()
    data = (ctypes.c_void_p * 5)(*[ctypes.addressof(vals) + 8 * i for i in range(5)])
    g = drv.lib.cuPointerGetAttributes
    t0 = time.perf_counter()
    for _ in range(n):
        g(5, attrs, data, env.q.data_ptr())
    query = (time.perf_counter() - t0) / n * 1e6
    print("host: fa4_mha_fwd cached %.2f us per call through ctypes (5 pointers asked); cuPointerGetAttributes "
          "%.2f us per pointer through ctypes" % (call, query), flush=True)


def main():
    if "--list" in sys.argv:
        for c in cases():
            print(c[0])
        return 0
    import torch
    print("torch %s, %s, fa4 %s" % (torch.__version__, torch.cuda.get_device_name(), fa4.version()), flush=True)
    env, drv = Env(torch), Driver()
    for name, kind, fn, want in cases():
        run_case(env, drv, name, kind, fn, want)
    healthy_calls(env)
    try:
        host_cost(env, drv)
    except Exception as ex:  # noqa: BLE001 - a number for the log, not a check
        print("host: not measured (%s: %s)" % (type(ex).__name__, ex))
    print("bad args: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
