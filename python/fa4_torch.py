"""fa4_torch - fa4gen's operators as torch.library custom ops, for torch.compile and CUDA graphs.

    import fa4_torch
    o = fa4_torch.mha_fwd(q, k, v, causal=True)              # or torch.ops.fa4.mha_fwd(...)
    out, lse, max_logits = fa4_torch.mla_sparse_fwd(q, kv, indices)

The ops `fa4::mha_fwd` and `fa4::mla_sparse_fwd` call the ctypes binding (fa4.py) and have
fake (meta) implementations, so torch.compile(fullgraph=True) traces through them without a
graph break. The FlashAttention wrappers (flash_attn_func, flash_attn_varlen_func,
flash_attn_with_kvcache) call fa4 directly in eager mode when nothing traces the call and no input
needs autograd (the op's dispatch costs more than the kernel launch there); when autograd tracks an input and
nothing traces, mha_fwd and the FlashAttention wrappers run the ops' own forward and backward through a
torch.autograd.Function (_EagerGrad); otherwise they take the op. Each call launches on torch's current stream, never synchronises the host, and
allocates its outputs with torch (libfa4rt allocates no device memory), so CUDA-graph capture
and replay work once the kernel has been fetched: run the op once before capturing (the first
call of a config generates, compiles and loads its kernel, which a capture cannot do).
Bad shapes, dtypes or devices raise fa4.Fa4Error with the runtime's message.
"""
from typing import List, Optional, Tuple

try:
    import torch
except ModuleNotFoundError as e:
    if e.name != "torch":
        raise
    raise ImportError("fa4_torch needs PyTorch: pip install fa4gen[torch]", name="torch") from None

import fa4

Tensor = torch.Tensor
_MLA_DV = 512  # fa4.h: out holds the first 512 columns of kv (V)


def _check_fake(cond, msg):
    if not cond:
        raise fa4.Fa4Error(msg)


# ---------------------------------------------------------------- eager calls without the op (issue 27 item 4)
# A call through a torch.library custom op pays its dispatch (~50 us a call in eager mode on the H200 host,
# bench/NOTES.md "host cost"). The FlashAttention wrappers below call fa4 directly when nothing could tell the
# difference: not compiling (torch.compile), no dispatch mode (make_fx, FakeTensor, functionalization, proxies), no
# torch-function mode, no functorch transform, no torch.jit trace; plain CUDA tensors only (no subclass, no meta or
# CPU tensor: the op's fake and its messages stay theirs) and none that autograd would track (the ops carry the
# autograd registration). Every other call takes the op, as before: torch.compile, its CUDA graphs and tracing see
# it. A CUDA-graph capture in eager mode runs the same code either way.
def _modes_off():
    return not (torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack() or
                torch._C._is_torch_function_mode_enabled() or torch._C._are_functorch_transforms_active() or
                torch._C._get_tracing_state() is not None)


try:  # a torch without one of these probes takes the op always
    _modes_off()
except AttributeError:
    def _modes_off():
        return False


def _on_cuda(t):
    return t.is_cuda


def _plain(*tensors):
    """Plain CUDA tensors (None skipped) and nothing that traces: an op's implementation may run without the op."""
    if not _modes_off():
        return False
    return all(t is None or (type(t) is Tensor and _on_cuda(t)) for t in tensors)


def _direct(q, *tensors):
    """True when this call may skip the op (see above): q and every given tensor plain, q on CUDA, no grad."""
    if not _plain(q):
        return False
    grad = torch.is_grad_enabled()
    if grad and q.requires_grad:
        return False
    for t in tensors:
        if t is not None and (type(t) is not Tensor or (grad and t.requires_grad)):
            return False
    return True


# An eager call that autograd tracks would pay two custom-op dispatches, the forward's and the backward's
# (~180 us of host time each on the H200 host, bench/NOTES.md "training step"), against ~330 us of kernels for a
# training step's attention at B16 H16 S512. When nothing traces the call (_plain), the wrappers run the op's own
# implementation, setup_context and backward formula through this autograd.Function instead, and the backward calls
# fa4::mha_bwd's implementation directly; the same calls under torch.compile, make_fx, fake tensors or functorch take
# the ops and their registered autograd, as before.
class _EagerGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, impl, setup, bwd, *inputs):
        output = impl(*inputs)
        setup(ctx, inputs, output)
        ctx.formula = bwd
        return output

    @staticmethod
    def backward(ctx, *grads):
        return (None, None, None) + tuple(ctx.formula(ctx, *grads))


def _with_grad(impl, op, setup, bwd, tensors, *inputs):
    """op(*inputs), or the same through _EagerGrad when autograd tracks one of the tensors and nothing traces."""
    if torch.is_grad_enabled() and _plain(*tensors) and any(t is not None and t.requires_grad for t in tensors):
        return _EagerGrad.apply(impl, setup, bwd, *inputs)
    return op(*inputs)


# ---------------------------------------------------------------- mha_fwd

def _mha_fwd_impl(q: Tensor, k: Tensor, v: Tensor, causal: bool, softmax_scale: Optional[float],
                  window: Optional[List[int]], config: Optional[str], sink: Optional[Tensor] = None,
                  softcap: float = 0.0, deterministic: bool = False) -> Tuple[Tensor, Tensor]:
    return fa4.mha_fwd(q, k, v, causal=causal, softmax_scale=softmax_scale, return_lse=True, config=config,
                       window=tuple(window) if window is not None else None, sink=sink, softcap=softcap or None)


_mha_fwd = torch.library.custom_op("fa4::mha_fwd", _mha_fwd_impl, mutates_args=())


@_mha_fwd.register_fake
def _mha_fwd_fake(q, k, v, causal, softmax_scale, window, config, sink=None, softcap=0.0, deterministic=False):
    _check_fake(q.dim() == 4 and k.dim() == 4 and v.dim() == 4, "q, k, v: need [B, S, H, D] tensors")
    b, s, h, _ = q.shape
    o = q.new_empty((b, s, h, v.shape[3]), dtype=fa4._out_dtype(torch, q))
    lse = q.new_empty((b, h, s), dtype=torch.float32)
    return o, lse


def mha_fwd(q, k, v, causal=False, softmax_scale=None, return_lse=False, config=None, window=None, sink=None,
            softcap=None, deterministic=False):
    """fa4.mha_fwd as the torch op fa4::mha_fwd: [B, S, H, D] CUDA tensors (bf16/fp16); returns out,
    or (out, lse) with lse fp32 [B, H, S] (natural log). sink: fp32 [H] sink logits; softcap: the built-in
    soft-cap (None/0: none). Differentiable (sm90a, depths 64/128/256): dq, dk, dv, and dsink for a sink that
    requires grad; a loss on lse differentiates too. deterministic: the backward sums dQ in a fixed order
    (bit-identical gradients run to run; the forward is deterministic either way)."""
    o, lse = _with_grad(_mha_fwd_impl, torch.ops.fa4.mha_fwd, _mha_fwd_setup, _mha_fwd_bwd, (q, k, v, sink),
                        q, k, v, causal, softmax_scale, list(window) if window is not None else None, config, sink,
                        float(softcap or 0.0), fa4._bool("deterministic", deterministic))
    return (o, lse) if return_lse else o


# ---------------------------------------------------------------- mla_sparse_fwd

@torch.library.custom_op("fa4::mla_sparse_fwd", mutates_args=())
def _mla_sparse_fwd(q: Tensor, kv: Tensor, indices: Tensor, sm_scale: Optional[float], attn_sink: Optional[Tensor],
                    topk_length: Optional[Tensor], config: Optional[str]) -> Tuple[Tensor, Tensor, Tensor]:
    return fa4.mla_sparse_fwd(q, kv, indices, sm_scale=sm_scale, attn_sink=attn_sink, topk_length=topk_length,
                              config=config)


@_mla_sparse_fwd.register_fake
def _mla_sparse_fwd_fake(q, kv, indices, sm_scale, attn_sink, topk_length, config):
    _check_fake(q.dim() == 3, "q: needs a [s_q, h_q, d_qk] tensor")
    s_q, h_q, _ = q.shape
    out = q.new_empty((s_q, h_q, _MLA_DV), dtype=torch.bfloat16)
    lse = q.new_empty((s_q, h_q), dtype=torch.float32)
    return out, lse, q.new_empty((s_q, h_q), dtype=torch.float32)


def mla_sparse_fwd(q, kv, indices, sm_scale=None, attn_sink=None, topk_length=None, config=None):
    """fa4.mla_sparse_fwd as the torch op fa4::mla_sparse_fwd; returns (out, lse, max_logits)."""
    return torch.ops.fa4.mla_sparse_fwd(q, kv, indices, sm_scale, attn_sink, topk_length, config)


# ---------------------------------------------------------------- the FlashAttention API (issue 27 item 2)
# The ops fa4::flash_attn, fa4::flash_attn_varlen and fa4::flash_attn_with_kvcache (which writes the new tokens
# into k_cache and v_cache: mutates_args) always return (out, lse); the wrappers below take FlashAttention's
# arguments (fa4.flash_attn_func's docstrings) and drop lse unless asked. Their fake implementations allocate
# as the real ones do (out like q where the shapes agree), so compiled graphs see the real strides.

def _window(window_size):
    w = (-1, -1) if window_size is None else tuple(-1 if x is None else x for x in window_size)
    if len(w) != 2:
        raise fa4.Fa4Error("window_size: %r; give (left, right)" % (window_size,))
    return w


def _fake_out(q, v):
    dt = fa4._out_dtype(torch, q)
    if v.shape[-1] == q.shape[-1] and dt == q.dtype:
        return torch.empty_like(q)
    return q.new_empty(tuple(q.shape[:-1]) + (v.shape[-1],), dtype=dt)


def _flash_attn_impl(q: Tensor, k: Tensor, v: Tensor, softmax_scale: Optional[float], causal: bool, window_left: int,
                     window_right: int, softcap: float, alibi_slopes: Optional[Tensor],
                     deterministic: bool = False) -> Tuple[Tensor, Tensor]:
    return fa4.flash_attn_func(q, k, v, softmax_scale, causal, (window_left, window_right), softcap, alibi_slopes,
                               return_lse=True)


_flash_attn = torch.library.custom_op("fa4::flash_attn", _flash_attn_impl, mutates_args=())


@_flash_attn.register_fake
def _flash_attn_fake(q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
                     deterministic=False):
    _check_fake(q.dim() == 4 and k.dim() == 4 and v.dim() == 4, "q, k, v: need [B, S, H, D] tensors")
    b, s, h, _ = q.shape
    return _fake_out(q, v), q.new_empty((b, h, s), dtype=torch.float32)


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                    return_lse=False, *, dropout_p=0.0, deterministic=False, return_attn_probs=False):
    """fa4.flash_attn_func as the torch op fa4::flash_attn (torch.compile, CUDA graphs); an eager call that nothing
    traces calls fa4 directly (_direct). deterministic: the backward sums dQ in a fixed order (bit-identical dq)."""
    if dropout_p or deterministic or return_attn_probs:
        fa4._fa_refuse(dropout_p, deterministic, return_attn_probs)
    if _direct(q, k, v, alibi_slopes):
        return fa4.flash_attn_func(q, k, v, softmax_scale, causal, window_size, softcap, alibi_slopes, return_lse)
    wl, wr = _window(window_size)
    o, lse = _with_grad(_flash_attn_impl, torch.ops.fa4.flash_attn, _flash_attn_setup, _flash_attn_bwd,
                        (q, k, v, alibi_slopes), q, k, v, softmax_scale, causal, wl, wr, float(softcap or 0.0),
                        alibi_slopes, bool(deterministic))
    return (o, lse) if return_lse else o


def _flash_attn_varlen_impl(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                            max_seqlen_q: int, max_seqlen_k: int, softmax_scale: Optional[float], causal: bool,
                            window_left: int, window_right: int, softcap: float, alibi_slopes: Optional[Tensor],
                            block_table: Optional[Tensor], deterministic: bool = False) -> Tuple[Tensor, Tensor]:
    return fa4.flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale,
                                      causal, (window_left, window_right), softcap, alibi_slopes, True, block_table)


_flash_attn_varlen = torch.library.custom_op("fa4::flash_attn_varlen", _flash_attn_varlen_impl, mutates_args=())


@_flash_attn_varlen.register_fake
def _flash_attn_varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                            window_left, window_right, softcap, alibi_slopes, block_table, deterministic=False):
    _check_fake(q.dim() == 3, "q: needs a packed [total_q, H, D] tensor")
    t, h, _ = q.shape
    return _fake_out(q, v), q.new_empty((h, t), dtype=torch.float32)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=None,
                           causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False,
                           block_table=None, *, dropout_p=0.0, deterministic=False, return_attn_probs=False):
    """fa4.flash_attn_varlen_func as the torch op fa4::flash_attn_varlen (eager: directly, as flash_attn_func)."""
    if dropout_p or deterministic or return_attn_probs:
        fa4._fa_refuse(dropout_p, deterministic, return_attn_probs)
    if _direct(q, k, v, cu_seqlens_q, cu_seqlens_k, alibi_slopes, block_table):
        return fa4.flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                          softmax_scale, causal, window_size, softcap, alibi_slopes, return_lse,
                                          block_table)
    wl, wr = _window(window_size)
    o, lse = _with_grad(_flash_attn_varlen_impl, torch.ops.fa4.flash_attn_varlen, _flash_attn_varlen_setup,
                        _flash_attn_varlen_bwd, (q, k, v, cu_seqlens_q, cu_seqlens_k, alibi_slopes, block_table), q,
                        k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, wl, wr,
                        float(softcap or 0.0), alibi_slopes, block_table, bool(deterministic))
    return (o, lse) if return_lse else o


@torch.library.custom_op("fa4::flash_attn_with_kvcache", mutates_args=("k_cache", "v_cache"))
def _flash_attn_with_kvcache(q: Tensor, k_cache: Tensor, v_cache: Tensor, k: Optional[Tensor], v: Optional[Tensor],
                             cache_seqlens: Optional[Tensor], cache_seqlens_int: Optional[int],
                             cache_batch_idx: Optional[Tensor], block_table: Optional[Tensor],
                             softmax_scale: Optional[float], causal: bool, window_left: int, window_right: int,
                             softcap: float, num_splits: int, alibi_slopes: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    return fa4.flash_attn_with_kvcache(q, k_cache, v_cache, k, v,
                                       cache_seqlens if cache_seqlens is not None else cache_seqlens_int,
                                       cache_batch_idx, block_table, softmax_scale, causal, (window_left, window_right),
                                       softcap, num_splits, True, alibi_slopes=alibi_slopes)


@_flash_attn_with_kvcache.register_fake
def _flash_attn_with_kvcache_fake(q, k_cache, v_cache, k, v, cache_seqlens, cache_seqlens_int, cache_batch_idx,
                                  block_table, softmax_scale, causal, window_left, window_right, softcap, num_splits,
                                  alibi_slopes):
    _check_fake(q.dim() == 4, "q: needs a [B, Sq, H, D] tensor")
    b, s, h, _ = q.shape
    return _fake_out(q, v_cache), q.new_empty((b, h, s), dtype=torch.float32)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, cache_batch_idx=None,
                            block_table=None, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            num_splits=0, return_lse=False, *, alibi_slopes=None, rotary_cos=None, rotary_sin=None,
                            cache_leftpad=None, rotary_interleaved=True, return_softmax_lse=None):
    """fa4.flash_attn_with_kvcache as the torch op fa4::flash_attn_with_kvcache (k_cache, v_cache mutated; eager:
    directly, as flash_attn_func)."""
    for name, val in (("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin), ("cache_leftpad", cache_leftpad)):
        if val is not None:
            raise fa4.Fa4Error("%s: given; fa4's kernels apply no rotary embedding and take no left padding" % name)
    return_lse = fa4._fa_lse_flag(return_lse, return_softmax_lse)
    if _direct(q, k_cache, v_cache, k, v, cache_seqlens if isinstance(cache_seqlens, Tensor) else None,
               cache_batch_idx, block_table, alibi_slopes):
        return fa4.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens, cache_batch_idx, block_table,
                                           softmax_scale, causal, window_size, softcap, num_splits, return_lse,
                                           alibi_slopes=alibi_slopes)
    wl, wr = _window(window_size)
    cs_t = cache_seqlens if isinstance(cache_seqlens, torch.Tensor) else None
    cs_i = None if cs_t is not None or cache_seqlens is None else int(cache_seqlens)
    o, lse = torch.ops.fa4.flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cs_t, cs_i, cache_batch_idx, block_table,
                                                   softmax_scale, causal, wl, wr, float(softcap or 0.0),
                                                   int(num_splits), alibi_slopes)
    return (o, lse) if return_lse else o


# ---------------------------------------------------------------- the backward (issue 29)
# fa4::mha_bwd runs the three backward kernels (fa4.mha_bwd) with every buffer from torch's allocator, on torch's
# current stream, without a host sync: autograd formulas that call it trace under torch.compile(fullgraph=True) and
# replay inside CUDA graphs (run a step before capturing: the first call of a config builds its kernels). The
# forward ops below register their autograd through _mha_backward; they save q, k, v, out and lse (nothing of
# size S^2). A loss that uses the forward's lse differentiates through it (fa4_mha_bwd_args.dlse).

def _bwd_ready(t):
    """Strides the backward's TMA maps take: last dim contiguous, the others positive multiples of 16 bytes (a dim
    of one element excepted). autograd's grad_out may be an expanded (stride 0) or sliced view."""
    eb = t.element_size()
    return t.stride(-1) == 1 and all(n == 1 or (s > 0 and s * eb % 16 == 0)
                                     for s, n in zip(t.stride()[:-1], t.shape[:-1]))


def _bwd_in(t):
    """t, or a contiguous copy when its strides or its base (16-byte aligned) do not suit the backward."""
    return t if _bwd_ready(t) and t.data_ptr() % 16 == 0 else t.contiguous()


def _bwd_out(like):
    """A gradient buffer shaped like `like`: its layout where the backward takes it (decided on strides alone, so the
    fake implementation allocates the same), else contiguous."""
    g = torch.empty_like(like)
    return g if _bwd_ready(g) else torch.empty(like.shape, dtype=like.dtype, device=like.device)


def _mha_bwd_impl(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, dlse: Optional[Tensor],
                  causal: bool, softmax_scale: Optional[float], window: Optional[List[int]], softcap: float,
                  sink: Optional[Tensor], cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor],
                  max_seqlen_q: int, max_seqlen_k: int, config: Optional[str],
                  deterministic: bool = False) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    dq, dk, dv = _bwd_out(q), _bwd_out(k), _bwd_out(v)
    varlen = cu_seqlens_q is not None
    r = fa4.mha_bwd(_bwd_in(dout), _bwd_in(q), _bwd_in(k), _bwd_in(v), _bwd_in(out), lse.contiguous(), causal=causal,
                    softmax_scale=softmax_scale, window=tuple(window) if window is not None else None, config=config,
                    sink=sink.contiguous() if sink is not None else None, cu_seqlens_q=cu_seqlens_q,
                    cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q if varlen else None,
                    max_seqlen_k=max_seqlen_k if varlen else None, dq=dq, dk=dk, dv=dv, softcap=softcap or None,
                    dlse=dlse.contiguous() if dlse is not None else None, deterministic=deterministic)
    return dq, dk, dv, (r[3] if sink is not None else q.new_empty((0,), dtype=torch.float32))


_mha_bwd = torch.library.custom_op("fa4::mha_bwd", _mha_bwd_impl, mutates_args=())


@_mha_bwd.register_fake
def _mha_bwd_fake(dout, q, k, v, out, lse, dlse, causal, softmax_scale, window, softcap, sink, cu_seqlens_q,
                  cu_seqlens_k, max_seqlen_q, max_seqlen_k, config, deterministic=False):
    return _bwd_out(q), _bwd_out(k), _bwd_out(v), q.new_empty((sink.shape[0] if sink is not None else 0,),
                                                              dtype=torch.float32)


def mha_bwd(dout, q, k, v, out, lse, causal=False, softmax_scale=None, window=None, softcap=None, sink=None,
            dlse=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0, config=None,
            deterministic=False):
    """fa4.mha_bwd as the torch op fa4::mha_bwd (any strides: a layout the kernels cannot read is copied first);
    returns (dq, dk, dv), and dsink too when sink is given. deterministic: dQ in a fixed order (fa4.mha_bwd)."""
    r = torch.ops.fa4.mha_bwd(dout, q, k, v, out, lse, dlse, causal, softmax_scale,
                              list(window) if window is not None else None, float(softcap or 0.0), sink, cu_seqlens_q,
                              cu_seqlens_k, int(max_seqlen_q or 0), int(max_seqlen_k or 0), config,
                              fa4._bool("deterministic", deterministic))
    return r if sink is not None else r[:3]


def _mha_backward(ctx, grad_out, grad_lse):
    """The gradients of a forward op that saved (q, k, v, out, lse[, sink]) with ctx.bwd: a dict of fa4::mha_bwd's
    mask, scale, softcap and varlen arguments (and ctx.refuse: why this forward has no backward, or None). Returns
    (dq, dk, dv, dsink); dsink None without a sink. grad_out / grad_lse None: that output took no gradient."""
    if ctx.refuse:
        raise fa4.Fa4Error(ctx.refuse)
    q, k, v, out, lse, *rest = ctx.saved_tensors
    sink = rest[0] if rest else None
    if grad_out is None:
        grad_out = torch.zeros_like(out)
    b = ctx.bwd
    run = _mha_bwd_impl if _plain(grad_out, q, k, v, out, lse, grad_lse, sink) else torch.ops.fa4.mha_bwd
    dq, dk, dv, dsink = run(grad_out, q, k, v, out, lse, grad_lse, b["causal"], b["softmax_scale"], b["window"],
                            b["softcap"], sink, b.get("cu_seqlens_q"), b.get("cu_seqlens_k"), b.get("max_seqlen_q", 0),
                            b.get("max_seqlen_k", 0), None, b.get("deterministic", False))
    return dq, dk, dv, (dsink if sink is not None else None)


def _save(ctx, q, k, v, output, sink, refuse, **bwd):
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, *(() if sink is None else (sink,)))
    ctx.set_materialize_grads(False)  # an output that takes no gradient arrives as None (no dlse pass)
    ctx.refuse, ctx.bwd = refuse, bwd


def _window_arg(causal, wl, wr):
    """FlashAttention's (causal, left, right) as mha_bwd's causal and window list."""
    c, w = fa4._fa_mask(causal, (wl, wr))
    return c, (list(w) if w is not None else None)


def _mha_fwd_setup(ctx, inputs, output):
    q, k, v, causal, softmax_scale, window, config, sink, softcap, *det = inputs
    _save(ctx, q, k, v, output, sink, None, causal=causal, softmax_scale=softmax_scale,
          window=list(window) if window is not None else None, softcap=softcap, deterministic=bool(det and det[0]))


def _mha_fwd_bwd(ctx, grad_out, grad_lse):
    dq, dk, dv, dsink = _mha_backward(ctx, grad_out, grad_lse)
    return dq, dk, dv, None, None, None, None, dsink, None, None


def _flash_attn_setup(ctx, inputs, output):
    q, k, v, softmax_scale, causal, wl, wr, softcap, alibi_slopes, *det = inputs
    c, w = _window_arg(causal, wl, wr)
    _save(ctx, q, k, v, output, None, "alibi_slopes: the backward has no ALiBi yet" if alibi_slopes is not None
          else None, causal=c, softmax_scale=softmax_scale, window=w, softcap=softcap, deterministic=bool(det and det[0]))


def _flash_attn_bwd(ctx, grad_out, grad_lse):
    dq, dk, dv, _ = _mha_backward(ctx, grad_out, grad_lse)
    return (dq, dk, dv) + (None,) * 7


def _flash_attn_varlen_setup(ctx, inputs, output):
    (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, wl, wr, softcap,
     alibi_slopes, block_table, *det) = inputs
    c, w = _window_arg(causal, wl, wr)
    refuse = ("alibi_slopes: the backward has no ALiBi yet" if alibi_slopes is not None else
              "block_table: the backward takes packed k, v (cu_seqlens_k), not a paged cache"
              if block_table is not None else None)
    _save(ctx, q, k, v, output, None, refuse, causal=c, softmax_scale=softmax_scale, window=w, softcap=softcap,
          cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
          deterministic=bool(det and det[0]))


def _flash_attn_varlen_bwd(ctx, grad_out, grad_lse):
    dq, dk, dv, _ = _mha_backward(ctx, grad_out, grad_lse)
    return (dq, dk, dv) + (None,) * 12


torch.library.register_autograd("fa4::mha_fwd", _mha_fwd_bwd, setup_context=_mha_fwd_setup)
torch.library.register_autograd("fa4::flash_attn", _flash_attn_bwd, setup_context=_flash_attn_setup)
torch.library.register_autograd("fa4::flash_attn_varlen", _flash_attn_varlen_bwd, setup_context=_flash_attn_varlen_setup)


# ---------------------------------------------------------------- transformers (issue 27 item 3)

def transformers_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, sliding_window=None,
                           softcap=None, is_causal=None, s_aux=None, **kwargs):
    """transformers' attention-function signature (transformers 5: q, k, v [B, H, S, D], the module's scaling,
    sliding_window, softcap; s_aux: gpt-oss sinks) over fa4.flash_attn_func; returns ([B, S, H, D], None).
    Prefill and decode with a DynamicCache (Sq < Sk: bottom-right causal), GQA (k, v keep their heads), sliding
    windows (keys q - sliding_window + 1 .. q, transformers' own mask), softcap built in. A padding mask (a batch of
    unequal lengths) is refused: its unpadding is not implemented here."""
    if attention_mask is not None:
        raise fa4.Fa4Error("attention_mask: a padding mask (a batch of unequal lengths); the fa4 attention function "
                           "takes batches without padding (left-padded generation: use sdpa)")
    if dropout:
        raise fa4.Fa4Error("dropout: %r; fa4 has no attention dropout (set model.eval())" % (dropout,))
    if kwargs.get("output_attentions"):
        raise fa4.Fa4Error("output_attentions: fa4 does not return attention weights (use eager)")
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    q, k, v = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
    window = (-1, -1)
    if sliding_window is not None and k.shape[1] > sliding_window:
        window = (sliding_window - 1, sliding_window - 1)  # FlashAttention's reading (causal sets right = 0)
    if s_aux is not None:  # sinks: fa4::mha_fwd (its autograd gives dsink), or fa4 directly as _direct allows
        c, w = fa4._fa_mask(bool(causal), window)
        sink = s_aux.float().contiguous()
        fwd = fa4.mha_fwd if _direct(q, k, v, sink) else mha_fwd
        o = fwd(q, k, v, causal=c, window=w, softmax_scale=scaling, softcap=softcap or None, sink=sink)
    else:
        o = flash_attn_func(q, k, v, softmax_scale=scaling, causal=bool(causal), window_size=window,
                            softcap=softcap or 0.0)
    return o, None


def register_transformers(name="fa4"):
    """Register fa4 as transformers' attention implementation `name`, so from_pretrained / from_config(...,
    attn_implementation="fa4") uses it; its mask function is FlashAttention's (no mask for a batch without
    padding). Returns name."""
    from transformers import AttentionInterface
    AttentionInterface.register(name, transformers_attention)
    try:
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, flash_attention_mask
        ALL_MASK_ATTENTION_FUNCTIONS.register(name, flash_attention_mask)
    except ImportError:  # an older transformers builds no mask for unknown names
        pass
    return name
