"""fa4 - a ctypes binding of libfa4rt for torch users.

    import fa4
    o = fa4.mha_fwd(q, k, v, causal=True)          # q, k, v: [B, S, H, D] CUDA bf16/fp16 tensors
    o, lse = fa4.mha_fwd(q, k, v, return_lse=True)  # lse: fp32 [B, H, S], natural log

Causal masks align bottom-right (query i sees key j <= i + Sk - Sq), as FlashAttention.
The library is build/libfa4rt.so next to this repository, or the path in $FA4_LIB.
"""
import ctypes
import math
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_BF16, _FP16 = 0, 1
_MASK_NONE, _MASK_CAUSAL, _MASK_WINDOW = 0, 1, 2


class _Options(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("version", ctypes.c_uint), ("device", ctypes.c_int),
                ("target", ctypes.c_int), ("cache_dir", ctypes.c_char_p), ("disk_cache", ctypes.c_int),
                ("verbose", ctypes.c_int)]


class _MhaArgs(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("dtype", ctypes.c_int),
                ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
                ("o", ctypes.c_void_p), ("lse", ctypes.c_void_p),
                ("batch", ctypes.c_int), ("seqlen_q", ctypes.c_int), ("seqlen_k", ctypes.c_int),
                ("heads_q", ctypes.c_int), ("heads_kv", ctypes.c_int), ("qk_depth", ctypes.c_int),
                ("ov_depth", ctypes.c_int),
                ("q_stride", ctypes.c_int64 * 3), ("k_stride", ctypes.c_int64 * 3),
                ("v_stride", ctypes.c_int64 * 3), ("o_stride", ctypes.c_int64 * 3),
                ("softmax_scale", ctypes.c_float), ("mask", ctypes.c_int),
                ("window_left", ctypes.c_int), ("window_right", ctypes.c_int), ("config", ctypes.c_char_p)]


class Fa4Error(RuntimeError):
    pass


_lib = None
_ctx = {}


def _load():
    global _lib
    if _lib is None:
        path = os.environ.get("FA4_LIB") or os.path.join(_HERE, "..", "build", "libfa4rt.so")
        _lib = ctypes.CDLL(path)
        _lib.fa4_status_string.restype = ctypes.c_char_p
        _lib.fa4_last_error.restype = ctypes.c_char_p
        _lib.fa4_last_error.argtypes = [ctypes.c_void_p]
        _lib.fa4_create.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_Options)]
        _lib.fa4_destroy.argtypes = [ctypes.c_void_p]
        _lib.fa4_mha_fwd.argtypes = [ctypes.c_void_p, ctypes.POINTER(_MhaArgs), ctypes.c_void_p]
        _lib.fa4_mha_config.argtypes = [ctypes.c_void_p, ctypes.POINTER(_MhaArgs), ctypes.c_char_p, ctypes.c_size_t]
    return _lib


def _check(status, ctx):
    if status != 0:
        lib = _load()
        raise Fa4Error("%s: %s" % (lib.fa4_status_string(status).decode(), lib.fa4_last_error(ctx).decode()))


def context(device=0):
    """The fa4 context of a CUDA device (created once, kept for the process)."""
    lib = _load()
    if device not in _ctx:
        opt = _Options(ctypes.sizeof(_Options), 1, device, 0, None, 1, 0)
        ctx = ctypes.c_void_p()
        _check(lib.fa4_create(ctypes.byref(ctx), ctypes.byref(opt)), None)
        _ctx[device] = ctx
    return _ctx[device]


def _args(q, k, v, o, lse, causal, window, softmax_scale, config):
    import torch
    for name, t in (("q", q), ("k", k), ("v", v), ("out", o)):
        if not t.is_cuda or t.dim() != 4 or t.stride(3) != 1:
            raise Fa4Error("%s: needs a CUDA tensor [B, S, H, D] with a contiguous last dim" % name)
    if q.dtype not in (torch.bfloat16, torch.float16) or k.dtype != q.dtype or v.dtype != q.dtype:
        raise Fa4Error("dtype: q, k, v must all be bf16 or all fp16")
    a = _MhaArgs()
    a.size = ctypes.sizeof(_MhaArgs)
    a.dtype = _BF16 if q.dtype == torch.bfloat16 else _FP16
    a.q, a.k, a.v, a.o = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
    a.lse = lse.data_ptr() if lse is not None else None
    a.batch, a.seqlen_q, a.heads_q, a.qk_depth = q.shape
    a.seqlen_k, a.heads_kv, a.ov_depth = k.shape[1], k.shape[2], v.shape[3]
    for field, t in (("q_stride", q), ("k_stride", k), ("v_stride", v), ("o_stride", o)):
        getattr(a, field)[:] = [t.stride(0), t.stride(1), t.stride(2)]
    a.softmax_scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[3])
    if window is not None:
        a.mask, a.window_left, a.window_right = _MASK_WINDOW, window[0], window[1]
    else:
        a.mask = _MASK_CAUSAL if causal else _MASK_NONE
    a.config = config.encode() if config else None
    return a


def mha_fwd(q, k, v, causal=False, softmax_scale=None, return_lse=False, config=None, out=None, window=None):
    """Attention forward on [B, S, H, D] tensors; returns out (and lse when asked)."""
    import torch
    o = out if out is not None else torch.empty(q.shape[:3] + (v.shape[3],), dtype=q.dtype, device=q.device)
    lse = torch.empty(q.shape[0], q.shape[2], q.shape[1], dtype=torch.float32, device=q.device) if return_lse else None
    ctx = context(q.device.index or 0)
    a = _args(q, k, v, o, lse, causal, window, softmax_scale, config)
    stream = torch.cuda.current_stream(q.device).cuda_stream
    _check(_load().fa4_mha_fwd(ctx, ctypes.byref(a), ctypes.c_void_p(stream)), ctx)
    return (o, lse) if return_lse else o


def mha_config(q, k, v, causal=False, config=None, window=None):
    """The canonical kernel config mha_fwd would use for these tensors."""
    import torch
    o = torch.empty(q.shape[:3] + (v.shape[3],), dtype=q.dtype, device=q.device)
    ctx = context(q.device.index or 0)
    a = _args(q, k, v, o, None, causal, window, None, config)
    buf = ctypes.create_string_buffer(512)
    _check(_load().fa4_mha_config(ctx, ctypes.byref(a), buf, 512), ctx)
    return buf.value.decode()
