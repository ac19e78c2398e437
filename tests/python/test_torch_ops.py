"""tests/python/test_torch_ops.py - the torch.library registrations of python/fa4_torch.py on the CPU.

Without torch it says so and passes (CI does not install torch). With torch (any build, no GPU):
- the ops exist under torch.ops.fa4 with the schema the wrappers call;
- their fake (meta) implementations give the real ops' output shapes and dtypes;
- make_fx in fake mode traces a function through both ops into one graph (what torch.compile's
  fullgraph tracing relies on);
- CPU tensors raise fa4.Fa4Error naming the tensor, before anything reaches libfa4rt;
- the backward (issue 29): fa4::mha_bwd's schema and fake (gradients laid out as the real op allocates them),
  the autograd of fa4::mha_fwd, fa4::flash_attn and fa4::flash_attn_varlen traced by make_fx into one graph
  with fa4::mha_bwd (dlse only when the loss takes lse, dsink for a sink), AOTAutograd's backward graph
  (what torch.compile builds), and the refusals (ALiBi, a paged cache) raised when the backward is traced.
The GPU half (torch.compile fullgraph, CUDA-graph capture and replay, the runtime's messages) is
tests/gpu/test_torch.py. Prints 'torch ops: N passed, N failed'.
"""
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report import report  # noqa: E402  (tests/report.py: the suite line make test sums)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

try:
    import torch
except ImportError:
    print("torch ops: skipped (torch is not installed; tests/gpu/test_torch.py runs them on a GPU)")
    sys.exit(0)

import fa4  # noqa: E402
import fa4_torch  # noqa: E402

passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL %s %s" % (name, detail))


def raises(name, fn, want):
    try:
        fn()
    except fa4.Fa4Error as e:
        check(name, want in str(e), "message: %s" % e)
        return
    except Exception as e:  # noqa: BLE001 - any other exception is the failure being tested
        check(name, False, "raised %s: %s, expected Fa4Error" % (type(e).__name__, e))
        return
    check(name, False, "did not raise")


# the schemas
check("mha_fwd registered", hasattr(torch.ops.fa4, "mha_fwd"))
check("mla_sparse_fwd registered", hasattr(torch.ops.fa4, "mla_sparse_fwd"))
schema = str(torch.ops.fa4.mha_fwd.default._schema)
check("mha_fwd schema", "Tensor q, Tensor k, Tensor v, bool causal" in schema and "-> (Tensor, Tensor)" in schema, schema)

# fake implementations on meta tensors: shapes and dtypes of the real outputs
meta = dict(device="meta")
q = torch.empty(2, 100, 8, 128, dtype=torch.bfloat16, **meta)
k = torch.empty(2, 300, 2, 128, dtype=torch.bfloat16, **meta)
v = torch.empty(2, 300, 2, 64, dtype=torch.bfloat16, **meta)
o, lse = torch.ops.fa4.mha_fwd(q, k, v, True, None, None, None)
check("mha fake out", tuple(o.shape) == (2, 100, 8, 64) and o.dtype == torch.bfloat16, str((o.shape, o.dtype)))
check("mha fake lse", tuple(lse.shape) == (2, 8, 100) and lse.dtype == torch.float32, str((lse.shape, lse.dtype)))
o = fa4_torch.mha_fwd(q.half(), k.half(), v.half(), window=(64, 0))
check("mha fake fp16 + window", o.dtype == torch.float16 and tuple(o.shape) == (2, 100, 8, 64))
e4m3 = getattr(torch, "float8_e4m3fn", None)
if e4m3 is not None:
    o = fa4_torch.mha_fwd(q.to(e4m3), k.to(e4m3), k.to(e4m3))
    check("mha fake e4m3 -> bf16", o.dtype == torch.bfloat16)
qm = torch.empty(62, 128, 576, dtype=torch.bfloat16, **meta)
kv = torch.empty(4096, 1, 576, dtype=torch.bfloat16, **meta)
idx = torch.empty(62, 2048, dtype=torch.int32, **meta)
out, lse, mx = fa4_torch.mla_sparse_fwd(qm, kv, idx)
check("mla fake", tuple(out.shape) == (62, 128, 512) and out.dtype == torch.bfloat16 and
      tuple(lse.shape) == (62, 128) and tuple(mx.shape) == (62, 128) and mx.dtype == torch.float32)

# tracing through both ops in fake mode: one graph holding them
try:
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(q, k, v, qm, kv, idx):
        o = fa4_torch.mha_fwd(q, k, v, causal=True)
        out, _, _ = fa4_torch.mla_sparse_fwd(qm, kv, idx)
        return o.float().sum() + out.float().sum()

    real = [torch.empty(t.shape, dtype=t.dtype) for t in (q, k, v, qm, kv, idx)]  # CPU; fake mode wraps them
    gm = make_fx(f, tracing_mode="fake")(*real)
    code = gm.code
    check("make_fx traces fa4.mha_fwd", "fa4.mha_fwd" in code, code)
    check("make_fx traces fa4.mla_sparse_fwd", "fa4.mla_sparse_fwd" in code, code)
except Exception as e:  # noqa: BLE001
    check("make_fx", False, "%s: %s" % (type(e).__name__, e))

# torch.compile(fullgraph=True) on CPU tensors: tracing must pass (a graph break would raise before
# anything runs), then the real op refuses the CPU tensors with its own Fa4Error
try:
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, backend="eager")
    compiled(*real)
    check("torch.compile fullgraph", False, "no error from CPU tensors")
except fa4.Fa4Error as e:
    check("torch.compile(fullgraph=True) traces both ops", "CUDA tensor" in str(e), str(e))
except Exception as e:  # noqa: BLE001
    check("torch.compile(fullgraph=True) traces both ops", False, "%s: %s" % (type(e).__name__, str(e)[:1500]))

# bad devices and dtypes: Fa4Error naming the problem (the real op runs here: CPU tensors)
cq, ck, cv = (torch.zeros(1, 16, 2, 64, dtype=torch.bfloat16) for _ in range(3))
raises("CPU tensors", lambda: fa4_torch.mha_fwd(cq, ck, cv), "needs a CUDA tensor")
raises("fp32 mla", lambda: fa4_torch.mla_sparse_fwd(torch.zeros(2, 64, 576), torch.zeros(8, 1, 576),
                                                   torch.zeros(2, 64, dtype=torch.int32)), "CUDA tensor")

# the FlashAttention API ops (issue 27): schemas, fakes (out like q, lse shapes), make_fx and compile through them
for name in ("flash_attn", "flash_attn_varlen", "flash_attn_with_kvcache"):
    check(name + " registered", hasattr(torch.ops.fa4, name))
kv_schema = str(torch.ops.fa4.flash_attn_with_kvcache.default._schema)
check("flash_attn_with_kvcache mutates its caches", "Tensor(a1!) k_cache" in kv_schema and "Tensor(a2!) v_cache" in kv_schema,
      kv_schema)
qf = torch.empty(2, 100, 8, 128, dtype=torch.bfloat16, **meta)
kf = torch.empty(2, 300, 2, 128, dtype=torch.bfloat16, **meta)
o, lse = fa4_torch.flash_attn_func(qf, kf, kf, causal=True, window_size=(64, -1), softcap=30.0, return_lse=True)
check("flash_attn fake", tuple(o.shape) == (2, 100, 8, 128) and o.stride() == qf.stride() and
      tuple(lse.shape) == (2, 8, 100) and lse.dtype == torch.float32, str((o.shape, lse.shape)))
qt = torch.empty(2, 8, 100, 128, dtype=torch.bfloat16, **meta).transpose(1, 2)  # transformers' layout
check("flash_attn fake out keeps q's layout (empty_like)", fa4_torch.flash_attn_func(qt, kf, kf).stride() == qt.stride())
qv = torch.empty(300, 8, 128, dtype=torch.bfloat16, **meta)
cu = torch.empty(3, dtype=torch.int32, **meta)
o, lse = fa4_torch.flash_attn_varlen_func(qv, qv, qv, cu, cu, 200, 200, return_lse=True)
check("flash_attn_varlen fake", tuple(o.shape) == (300, 8, 128) and tuple(lse.shape) == (8, 300))
qd = torch.empty(4, 1, 8, 128, dtype=torch.bfloat16, **meta)
cache = torch.empty(4, 1024, 2, 128, dtype=torch.bfloat16, **meta)
new = torch.empty(4, 1, 2, 128, dtype=torch.bfloat16, **meta)
o, lse = fa4_torch.flash_attn_with_kvcache(qd, cache, cache, new, new, cache_seqlens=torch.empty(4, dtype=torch.int32,
                                           **meta), causal=True, return_softmax_lse=True)
check("flash_attn_with_kvcache fake", tuple(o.shape) == (4, 1, 8, 128) and tuple(lse.shape) == (4, 8, 1))
raises("flash_attn dropout", lambda: fa4_torch.flash_attn_func(qf, kf, kf, dropout_p=0.1), "dropout_p")
try:
    def g(q, k, v, kc, vc, kn, lens):
        o = fa4_torch.flash_attn_func(q, k, v, causal=True, softcap=20.0)
        d = fa4_torch.flash_attn_with_kvcache(q[:, :1], kc, vc, kn, kn, cache_seqlens=lens, causal=True)
        return o.float().sum() + d.float().sum()

    fa_real = [torch.empty(2, 100, 8, 128, dtype=torch.bfloat16), torch.empty(2, 300, 2, 128, dtype=torch.bfloat16),
               torch.empty(2, 300, 2, 128, dtype=torch.bfloat16), torch.empty(2, 512, 2, 128, dtype=torch.bfloat16),
               torch.empty(2, 512, 2, 128, dtype=torch.bfloat16), torch.empty(2, 1, 2, 128, dtype=torch.bfloat16),
               torch.zeros(2, dtype=torch.int32)]
    code = make_fx(g, tracing_mode="fake")(*fa_real).code
    check("make_fx traces fa4.flash_attn and fa4.flash_attn_with_kvcache",
          "fa4.flash_attn.default" in code and "fa4.flash_attn_with_kvcache" in code, code)
    torch._dynamo.reset()
    torch.compile(g, fullgraph=True, backend="eager")(*fa_real)
    check("torch.compile(fullgraph=True) through the FA ops", False, "no error from CPU tensors")
except fa4.Fa4Error as e:
    check("torch.compile(fullgraph=True) through the FA ops", "CUDA tensor" in str(e), str(e))
except Exception as e:  # noqa: BLE001
    check("torch.compile(fullgraph=True) through the FA ops", False, "%s: %s" % (type(e).__name__, str(e)[:1500]))


class _Attn(torch.nn.Module):  # what transformers' attention modules carry
    is_causal = True
    num_key_value_groups = 4


# eager calls skip the op only where nothing traces them (fa4_torch._direct): the wrappers' path, with CPU tensors
# taken for CUDA ones (fa4_torch._on_cuda) and fa4's functions replaced by recorders that say whether the op's
# implementation called them
def _path_checks():
    import inspect
    seen = []

    def recorder(name, lse_shape):
        def fn(q, *a, **kw):
            via_op = any(f.function.startswith(("_flash_attn", "_mha_fwd")) for f in inspect.stack())
            seen.append((name, via_op))
            o = torch.empty_like(q)
            want_lse = kw.get("return_lse", a[7] if name == "flash_attn_func" and len(a) > 7 else
                              a[12] if name == "flash_attn_with_kvcache" and len(a) > 12 else False) or via_op
            return (o, torch.empty(lse_shape(q), dtype=torch.float32)) if want_lse else o
        return fn

    saved = (fa4_torch._on_cuda, fa4.flash_attn_func, fa4.flash_attn_with_kvcache, fa4.mha_fwd)
    fa4_torch._on_cuda = lambda t: True
    fa4.mha_fwd = recorder("mha_fwd", lambda q: (q.shape[0], q.shape[2], q.shape[1]))
    fa4.flash_attn_func = recorder("flash_attn_func", lambda q: (q.shape[0], q.shape[2], q.shape[1]))
    fa4.flash_attn_with_kvcache = recorder("flash_attn_with_kvcache", lambda q: (q.shape[0], q.shape[2], q.shape[1]))
    try:
        q, k = torch.zeros(2, 16, 4, 64, dtype=torch.bfloat16), torch.zeros(2, 32, 2, 64, dtype=torch.bfloat16)
        seen.clear()
        o = fa4_torch.flash_attn_func(q, k, k, causal=True)
        check("eager flash_attn_func calls fa4 directly (no op)", seen == [("flash_attn_func", False)] and
              tuple(o.shape) == tuple(q.shape), str(seen))
        seen.clear()
        o, lse = fa4_torch.flash_attn_func(q, k, k, causal=True, return_lse=True)
        check("eager flash_attn_func, return_lse: directly, (out, lse)", seen == [("flash_attn_func", False)] and
              tuple(lse.shape) == (2, 4, 16), str(seen))
        seen.clear()
        kc, lens = torch.zeros(2, 64, 2, 64, dtype=torch.bfloat16), torch.zeros(2, dtype=torch.int32)
        fa4_torch.flash_attn_with_kvcache(q[:, :1], kc, kc, k[:, :1], k[:, :1], cache_seqlens=lens, causal=True)
        check("eager flash_attn_with_kvcache calls fa4 directly", seen == [("flash_attn_with_kvcache", False)],
              str(seen))
        seen.clear()
        qg = q.clone().requires_grad_()
        fa4_torch.flash_attn_func(qg, k, k, causal=True)
        check("q requiring grad: through the op (its autograd)", seen == [("flash_attn_func", True)], str(seen))
        seen.clear()
        with torch.no_grad():
            fa4_torch.flash_attn_func(qg, k, k, causal=True)
        check("q requiring grad under no_grad: directly", seen == [("flash_attn_func", False)], str(seen))
        seen.clear()
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode() as mode:
            fq, fk = mode.from_tensor(q), mode.from_tensor(k)
            fo = fa4_torch.flash_attn_func(fq, fk, fk, causal=True)
        check("FakeTensorMode: the op's fake (fa4 not called)", seen == [] and tuple(fo.shape) == tuple(q.shape),
              str(seen))
        from torch.fx.experimental.proxy_tensor import make_fx
        code = make_fx(lambda a, b: fa4_torch.flash_attn_func(a, b, b, causal=True), tracing_mode="real")(q, k).code
        check("make_fx (real tensors): the op in the graph", "fa4.flash_attn.default" in code, code)
        seen.clear()
        torch._dynamo.reset()
        co = torch.compile(lambda a, b: fa4_torch.flash_attn_func(a, b, b, causal=True) * 2, fullgraph=True,
                           backend="eager")(q, k)
        check("torch.compile(fullgraph=True): traced through the op, which runs fa4", tuple(co.shape) == tuple(q.shape)
              and seen and all(v for _, v in seen), str(seen))
        with torch.device("cpu"):  # a torch-function mode on the stack
            seen.clear()
            fa4_torch.flash_attn_func(q, k, k, causal=True)
        check("a torch-function mode (torch.device): through the op", seen == [("flash_attn_func", True)], str(seen))
        # transformers' function with gpt-oss sinks (s_aux): fa4.mha_fwd directly in eager mode, fa4::mha_fwd traced
        mod = _Attn()
        hq, hk = q.transpose(1, 2), k.transpose(1, 2)
        sink = torch.zeros(4)
        seen.clear()
        o, _ = fa4_torch.transformers_attention(mod, hq, hk, hk, None, scaling=0.125, s_aux=sink)
        check("transformers_attention with sinks, eager: fa4.mha_fwd directly", seen == [("mha_fwd", False)] and
              tuple(o.shape) == tuple(q.shape), str(seen))
        seen.clear()
        sg = sink.clone().requires_grad_()
        fa4_torch.transformers_attention(mod, hq, hk, hk, None, scaling=0.125, s_aux=sg)
        check("transformers_attention with sinks requiring grad: fa4::mha_fwd (dsink)", seen == [("mha_fwd", True)],
              str(seen))
        code = make_fx(lambda a, b, s: fa4_torch.transformers_attention(mod, a, b, b, None, s_aux=s)[0],
                       tracing_mode="fake")(hq, hk, sink).code
        check("transformers_attention with sinks, make_fx: fa4.mha_fwd.default in the graph",
              "fa4.mha_fwd.default" in code, code)
    except Exception as e:  # noqa: BLE001
        check("eager/op path checks", False, "%s: %s" % (type(e).__name__, str(e)[:1500]))
    finally:
        fa4_torch._on_cuda, fa4.flash_attn_func, fa4.flash_attn_with_kvcache, fa4.mha_fwd = saved


_path_checks()


# transformers' function on CPU tensors: [B, H, S, D] in, the Fa4Error of the CPU tensors out; padding refused
hq, hk = torch.zeros(1, 8, 16, 64, dtype=torch.bfloat16), torch.zeros(1, 2, 16, 64, dtype=torch.bfloat16)
raises("transformers_attention: CPU tensors", lambda: fa4_torch.transformers_attention(_Attn(), hq, hk, hk, None,
                                                                                      scaling=0.125), "CUDA tensor")
raises("transformers_attention: padding mask", lambda: fa4_torch.transformers_attention(
    _Attn(), hq, hk, hk, torch.ones(1, 16, dtype=torch.bool)), "attention_mask")


# ---------------------------------------------------------------- the backward (issue 29)
check("mha_bwd registered", hasattr(torch.ops.fa4, "mha_bwd"))
bschema = str(torch.ops.fa4.mha_bwd.default._schema)
check("mha_bwd schema", "Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, Tensor? dlse" in bschema and
      "-> (Tensor, Tensor, Tensor, Tensor)" in bschema, bschema)
check("mha_fwd takes sink and softcap (defaults keep the 7-argument call)",
      "Tensor? sink=None" in schema and "float softcap=0." in schema, schema)
qb = torch.empty(2, 8, 100, 128, dtype=torch.bfloat16, **meta).transpose(1, 2)  # [B, S, H, D] view of [B, H, S, D]
kb = torch.empty(2, 300, 2, 128, dtype=torch.bfloat16, **meta)
ob = torch.empty(2, 100, 8, 128, dtype=torch.bfloat16, **meta)
lb = torch.empty(2, 8, 100, **meta)
dq, dk, dv, ds = torch.ops.fa4.mha_bwd(ob, qb, kb, kb, ob, lb, None, True, None, None, 0.0, None, None, None, 0, 0, None)
check("mha_bwd fake: gradients like q, k, v (q's layout kept)", dq.shape == qb.shape and dq.stride() == qb.stride() and
      dk.shape == kb.shape and dv.dtype == torch.bfloat16 and tuple(ds.shape) == (0,), str((dq.stride(), ds.shape)))
qs = torch.empty(2, 100, 8, 256, dtype=torch.bfloat16, **meta)[..., :128]  # a sliced (not dense) view
dq = fa4_torch.mha_bwd(ob, qs, kb, kb, ob, lb, sink=torch.empty(8, **meta))
check("mha_bwd fake: a non-dense q gives a contiguous dq, and dsink [H]", len(dq) == 4 and dq[0].is_contiguous() and
      tuple(dq[3].shape) == (8,))


def _train_step(use_lse, sink_on):
    def step(q, k, v, sink):
        o, lse = fa4_torch.mha_fwd(q, k, v, causal=True, return_lse=True, sink=sink if sink_on else None)
        loss = o.float().square().sum() + (lse.sum() if use_lse else 0)
        return torch.autograd.grad(loss, (q, k, v, sink) if sink_on else (q, k, v))
    return step


try:
    from torch.fx.experimental.proxy_tensor import make_fx
    gq = torch.empty(2, 100, 8, 128, dtype=torch.bfloat16, requires_grad=True)
    gk = torch.empty(2, 300, 2, 128, dtype=torch.bfloat16, requires_grad=True)
    gs = torch.empty(8, requires_grad=True)
    for use_lse, sink_on in ((False, False), (True, True)):
        code = make_fx(_train_step(use_lse, sink_on), tracing_mode="fake")(gq, gk, gk.detach().requires_grad_(), gs).code
        line = [ln for ln in code.splitlines() if "fa4.mha_bwd" in ln]
        check("make_fx: a training step holds fa4.mha_fwd and fa4.mha_bwd (lse %s, sink %s)" % (use_lse, sink_on),
              "fa4.mha_fwd" in code and len(line) == 1, code)
        if line:
            args = line[0].split("(", 1)[1].split(", ")
            check("make_fx: dlse is %s" % ("lse's gradient" if use_lse else "None (lse unused)"),
                  (args[6] != "None") == use_lse, line[0])
    def fa_step(q, k, v):
        o = fa4_torch.flash_attn_func(q, k, v, causal=True, window_size=(64, -1), softcap=0.0)
        return torch.autograd.grad(o.float().sum(), (q, k, v))
    code = make_fx(fa_step, tracing_mode="fake")(gq, gk, gk.detach().requires_grad_()).code
    check("make_fx: flash_attn_func's backward is fa4.mha_bwd (window (64, 0): causal folded in)",
          "fa4.mha_bwd" in code and "[64, 0]" in code, code)
    vq = torch.empty(300, 8, 128, dtype=torch.bfloat16, requires_grad=True)
    vk = torch.empty(300, 2, 128, dtype=torch.bfloat16, requires_grad=True)
    cu3 = torch.zeros(3, dtype=torch.int32)
    def var_step(q, k, v, cu):
        o = fa4_torch.flash_attn_varlen_func(q, k, v, cu, cu, 200, 200, causal=True)
        return torch.autograd.grad(o.float().sum(), (q, k, v))
    code = make_fx(var_step, tracing_mode="fake")(vq, vk, vk.detach().requires_grad_(), cu3).code
    check("make_fx: flash_attn_varlen_func's backward is fa4.mha_bwd with cu_seqlens", "fa4.mha_bwd" in code and
          ", 200, 200, None)" in code, code)
    def det_step(q, k, v):
        o = fa4_torch.flash_attn_func(q, k, v, causal=True, deterministic=True)
        return torch.autograd.grad(o.float().sum(), (q, k, v))
    code = make_fx(det_step, tracing_mode="fake")(gq, gk, gk.detach().requires_grad_()).code
    check("make_fx: flash_attn_func(deterministic=True)'s backward is fa4.mha_bwd(..., deterministic=True)",
          "fa4.mha_bwd" in code and ", None, True)" in code, code)
    def det_var_step(q, k, v, cu):
        o = fa4_torch.flash_attn_varlen_func(q, k, v, cu, cu, 200, 200, causal=True, deterministic=True)
        return torch.autograd.grad(o.float().sum(), (q, k, v))
    code = make_fx(det_var_step, tracing_mode="fake")(vq, vk, vk.detach().requires_grad_(), cu3).code
    check("make_fx: flash_attn_varlen_func(deterministic=True) reaches fa4.mha_bwd",
          ", 200, 200, None, True)" in code, code)
    def det_mha_step(q, k, v):
        o = fa4_torch.mha_fwd(q, k, v, causal=True, deterministic=True)
        return torch.autograd.grad(o.float().sum(), (q, k, v))
    code = make_fx(det_mha_step, tracing_mode="fake")(gq, gk, gk.detach().requires_grad_()).code
    check("make_fx: mha_fwd(deterministic=True) reaches fa4.mha_bwd", ", None, True)" in code, code)
    def alibi_step(q, k, v):
        o = fa4_torch.flash_attn_func(q, k, v, alibi_slopes=torch.zeros(8))
        return torch.autograd.grad(o.float().sum(), (q,))
    raises("backward refuses ALiBi", lambda: make_fx(alibi_step, tracing_mode="fake")(gq, gk, gk), "alibi_slopes")
    def paged_step(q, k, v, cu):
        o = fa4_torch.flash_attn_varlen_func(q, k, v, cu, cu, 200, 200, block_table=torch.zeros(2, 4, dtype=torch.int32))
        return torch.autograd.grad(o.float().sum(), (q,))
    raises("backward refuses a paged cache", lambda: make_fx(paged_step, tracing_mode="fake")(
        vq, torch.empty(16, 64, 2, 128, dtype=torch.bfloat16), torch.empty(16, 64, 2, 128, dtype=torch.bfloat16), cu3),
        "block_table")
except Exception as e:  # noqa: BLE001
    check("make_fx through the backward", False, "%s: %s" % (type(e).__name__, str(e)[:1500]))

# AOTAutograd (torch.compile's joint graph, traced before anything runs): it holds fa4.mha_fwd and fa4.mha_bwd,
# and the forward graph compiled from it fa4.mha_fwd; the forward then runs for real and refuses the CPU tensors
try:
    from functorch.compile import aot_function, default_partition
    graphs = {}

    def partition(joint, *args, **kwargs):
        graphs["joint"] = joint.code
        return default_partition(joint, *args, **kwargs)

    def keep(name):
        def compiler(gm, _inputs):
            graphs[name] = gm.code
            return gm
        return compiler

    def loss_fn(q, k, v):
        return fa4_torch.mha_fwd(q, k, v, causal=True).float().square().sum()

    cq2 = torch.zeros(1, 64, 2, 64, dtype=torch.bfloat16, requires_grad=True)
    try:
        aot_function(loss_fn, fw_compiler=keep("fw"), bw_compiler=keep("bw"), partition_fn=partition)(
            cq2, cq2.detach().requires_grad_(), cq2.detach().requires_grad_())
    except fa4.Fa4Error:
        pass
    check("AOTAutograd: forward graph holds fa4.mha_fwd", "fa4.mha_fwd" in graphs.get("fw", ""), str(graphs.keys()))
    check("AOTAutograd: the joint graph holds fa4.mha_bwd", "fa4.mha_bwd" in graphs.get("joint", ""),
          graphs.get("joint", "no joint graph"))
except Exception as e:  # noqa: BLE001
    check("AOTAutograd", False, "%s: %s" % (type(e).__name__, str(e)[:1500]))

sys.exit(report("torch ops", passed, failed))
