/* mha_bwd.c - fa4_mha_bwd: validate, pick the three configs (gen/mha_bwd.h), get the kernels, launch them
 * on one stream: mha-bwd-pre (D, nl2, the dQ accumulator zeroed), mha-bwd (dK, dV, the accumulator),
 * mha-bwd-dq (dQ, dsink).
 *
 * Guarantees, as fa4_mha_fwd's: every check on the caller's arguments runs before the driver is opened,
 * so a bad argument is FA4_ERR_INVALID_ARGUMENT naming it on any machine; nothing is launched unless every
 * check and the three kernels' fetches have passed. (The main kernel's tensor maps are encoded at its launch,
 * after the pre kernel's: a refused encode leaves only the workspace written.) Extents are computed in 64
 * bits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mha_bwd.h"
#include "rt_internal.h"

#define BAD(what, ...) rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, what ": " __VA_ARGS__)

/* The tensors of one call. */
enum { B_Q, B_K, B_V, B_O, B_DO, B_DQ, B_DK, B_DV, B_N };

typedef struct {
    const char *name;
    const void *ptr;
    const int64_t *given;
    int64_t stride[3]; /* elements: batch, seq, head */
    int batch, seqlen, heads, depth;
} BwdTensor;

static int64_t mul_sat(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

static void tensors(const fa4_mha_bwd_args *a, BwdTensor t[B_N])
{
    static const char *const names[B_N] = {"q", "k", "v", "o", "dout", "dq", "dk", "dv"};
    const void *ptr[B_N] = {a->q, a->k, a->v, a->o, a->dout, a->dq, a->dk, a->dv};
    const int64_t *st[B_N] = {a->q_stride, a->k_stride, a->v_stride, a->o_stride, a->do_stride, a->dq_stride,
                              a->dk_stride, a->dv_stride};
    for (int i = 0; i < B_N; i++) {
        int kv = i == B_K || i == B_V || i == B_DK || i == B_DV;
        t[i].name = names[i], t[i].ptr = ptr[i], t[i].given = st[i];
        t[i].batch = a->cu_seqlens_q ? 1 : a->batch;
        t[i].seqlen = kv ? a->seqlen_k : a->seqlen_q;
        t[i].heads = kv ? a->heads_kv : a->heads_q;
        t[i].depth = i == B_V || i == B_O || i == B_DO || i == B_DV ? a->ov_depth : a->qk_depth;
        const int64_t def[3] = {mul_sat(mul_sat(t[i].seqlen, t[i].heads), t[i].depth),
                                mul_sat(t[i].heads, t[i].depth), t[i].depth};
        for (int d = 0; d < 3; d++) t[i].stride[d] = st[i][d] ? st[i][d] : def[d];
    }
}

/* ---------------------------------------------------------------- checks (no driver) */

static fa4_status read_args(fa4_ctx *ctx, const fa4_mha_bwd_args *in, fa4_mha_bwd_args *a)
{
    const fa4_mha_bwd_args def = FA4_MHA_BWD_ARGS_INIT;
    const size_t min = offsetof(fa4_mha_bwd_args, dv_stride) + sizeof in->dv_stride;
    *a = def;
    if (!in) return BAD("args", "NULL");
    if (in->size < min)
        return BAD("args->size", "%zu is smaller than the %zu bytes this library needs; set it to "
                   "sizeof(fa4_mha_bwd_args) (FA4_MHA_BWD_ARGS_INIT does)", in->size, min);
    memcpy(a, in, in->size < sizeof *a ? in->size : sizeof *a);
    return FA4_OK;
}

static fa4_status check_shape(fa4_ctx *ctx, const fa4_mha_bwd_args *a, int need_ptrs)
{
    if (a->dtype != FA4_BF16 && a->dtype != FA4_FP16)
        return (unsigned)a->dtype > FA4_E4M3 ? BAD("dtype", "%d is not a fa4_dtype", (int)a->dtype)
                                             : rt_fail(ctx, FA4_ERR_UNSUPPORTED, "dtype: e4m3 has no backward; use "
                                                       "bf16 or fp16");
    if (a->score_mod)
        return rt_fail(ctx, FA4_ERR_UNSUPPORTED, "score_mod: a score_mod has no derivative the backward could use; "
                       "fa4_mha_bwd refuses it (train with the built-in masks and sinks)");
    if (need_ptrs) {
        BwdTensor t[B_N];
        tensors(a, t);
        for (int i = 0; i < B_N; i++)
            if (!t[i].ptr) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: NULL", t[i].name);
        if (!a->lse) return BAD("lse", "NULL; the backward needs the forward's LSE");
    }
    const int dims[5] = {a->batch, a->seqlen_q, a->seqlen_k, a->heads_q, a->heads_kv};
    static const char *const dim_names[5] = {"batch", "seqlen_q", "seqlen_k", "heads_q", "heads_kv"};
    for (int i = 0; i < 5; i++)
        if (dims[i] <= 0) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %d; must be > 0", dim_names[i], dims[i]);
    if (a->heads_q % a->heads_kv)
        return BAD("heads_kv", "%d does not divide heads_q = %d (the group, query heads per KV head, must be whole)",
                   a->heads_kv, a->heads_q);
    if (a->qk_depth != a->ov_depth)
        return rt_fail(ctx, FA4_ERR_UNSUPPORTED, "ov_depth: %d differs from qk_depth %d; the backward takes one depth",
                       a->ov_depth, a->qk_depth);
    if (a->qk_depth != 64 && a->qk_depth != 128 && a->qk_depth != 256)
        return rt_fail(ctx, a->qk_depth <= 0 || a->qk_depth % 16 || a->qk_depth > 1024 ? FA4_ERR_INVALID_ARGUMENT
                                                                                    : FA4_ERR_UNSUPPORTED,
                       "qk_depth: %d; the backward takes 64, 128 or 256", a->qk_depth);
    if (!!a->sink != !!a->dsink)
        return BAD(a->sink ? "dsink" : "sink", "%s; give both sink and dsink, or neither", a->sink ? "NULL" : "given");
    if ((uintptr_t)a->sink % 4 || (uintptr_t)a->dsink % 4 || (uintptr_t)a->lse % 4 || (uintptr_t)a->dlse % 4)
        return BAD("lse", "lse, dlse, sink and dsink must be 4-byte aligned f32 arrays");
    if (a->deterministic != 0 && a->deterministic != 1)
        return BAD("deterministic", "%d; use 0 (dQ summed in the order the CTAs arrive) or 1 (in a fixed order: "
                   "bit-identical runs)", a->deterministic);
    return FA4_OK;
}

static fa4_status check_cu_host(fa4_ctx *ctx, const char *name, const int32_t *cu, int batch, int rows, int max_len)
{
    if (cu[0] < 0) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s[0]: %d; must be >= 0", name, cu[0]);
    for (int b = 0; b < batch; b++) {
        if (cu[b + 1] < cu[b])
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: not monotone: [%d] = %d > [%d] = %d", name, b, cu[b],
                           b + 1, cu[b + 1]);
        if (cu[b + 1] - cu[b] > max_len)
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: sequence %d has %d rows, more than its max_seqlen %d",
                           name, b, cu[b + 1] - cu[b], max_len);
    }
    if (cu[batch] > rows)
        return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s[%d]: %d is past the tensor's %d packed rows", name, batch,
                       cu[batch], rows);
    return FA4_OK;
}

static fa4_status check_varlen(fa4_ctx *ctx, const fa4_mha_bwd_args *a)
{
    if (!a->cu_seqlens_q && !a->cu_seqlens_k) {
        if (a->max_seqlen_q || a->max_seqlen_k) return BAD("max_seqlen_q", "given without cu_seqlens_q/cu_seqlens_k");
        if (a->cu_seqlens_q_host || a->cu_seqlens_k_host) return BAD("cu_seqlens_q_host", "given without cu_seqlens_q");
        return FA4_OK;
    }
    if (!a->cu_seqlens_q || !a->cu_seqlens_k)
        return BAD(a->cu_seqlens_q ? "cu_seqlens_k" : "cu_seqlens_q", "NULL; varlen needs both cu_seqlens arrays");
    if ((uintptr_t)a->cu_seqlens_q % 4 || (uintptr_t)a->cu_seqlens_k % 4)
        return BAD("cu_seqlens_q", "the cu_seqlens arrays must be 4-byte aligned int32");
    if (a->max_seqlen_q < 1 || a->max_seqlen_q > a->seqlen_q)
        return BAD("max_seqlen_q", "%d; use 1..seqlen_q (%d, the packed q rows)", a->max_seqlen_q, a->seqlen_q);
    if (a->max_seqlen_k < 1 || a->max_seqlen_k > a->seqlen_k)
        return BAD("max_seqlen_k", "%d; use 1..seqlen_k (%d, the packed k rows)", a->max_seqlen_k, a->seqlen_k);
    const int64_t *st[B_N] = {a->q_stride, a->k_stride, a->v_stride, a->o_stride, a->do_stride, a->dq_stride,
                              a->dk_stride, a->dv_stride};
    static const char *const nm[B_N] = {"q", "k", "v", "o", "do", "dq", "dk", "dv"};
    for (int i = 0; i < B_N; i++)
        if (st[i][0])
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s_stride[0]: %lld; varlen tensors are packed rows with no "
                           "batch axis: leave it 0", nm[i], (long long)st[i][0]);
    fa4_status s;
    if (a->cu_seqlens_q_host &&
        (s = check_cu_host(ctx, "cu_seqlens_q", a->cu_seqlens_q_host, a->batch, a->seqlen_q, a->max_seqlen_q)))
        return s;
    if (a->cu_seqlens_k_host &&
        (s = check_cu_host(ctx, "cu_seqlens_k", a->cu_seqlens_k_host, a->batch, a->seqlen_k, a->max_seqlen_k)))
        return s;
    return FA4_OK;
}

#define MAX_SPAN ((int64_t)1 << 57)

/* Bytes from a tensor's first element past its last (INT64_MAX when over MAX_SPAN). */
static int64_t tensor_span(const BwdTensor *t)
{
    const int64_t count[3] = {t->batch, t->seqlen, t->heads};
    int64_t span = mul_sat(t->depth, 2);
    for (int d = 0; d < 3; d++) {
        int64_t part = mul_sat(mul_sat(count[d] - 1, t->stride[d]), 2);
        span = part > MAX_SPAN - span ? INT64_MAX : span + part;
    }
    return span;
}

/* TMA (q, k, v, dout, dk, dv) and 16-byte vector accesses (o, dq): 16-byte aligned bases and strides. */
static fa4_status check_layout(fa4_ctx *ctx, const fa4_mha_bwd_args *a)
{
    static const char *const axis[3] = {"batch", "seq", "head"};
    const int eb = 2;
    BwdTensor t[B_N];
    tensors(a, t);
    for (int i = 0; i < B_N; i++) {
        if ((uintptr_t)t[i].ptr % 16)
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: address %p is not 16-byte aligned", t[i].name, t[i].ptr);
        for (int d = 0; d < 3; d++) {
            if (t[i].given[d] < 0)
                return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s_stride[%d] (%s): %lld; strides must be positive "
                               "(0 selects the packed layout)", t[i].name, d, axis[d], (long long)t[i].given[d]);
            int64_t bytes = mul_sat(t[i].stride[d], eb);
            if (bytes % 16 || bytes >= ((int64_t)1 << 40))
                return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s_stride[%d] (%s): %lld elements = %lld bytes; "
                               "needs a multiple of 16 bytes below 2^40", t[i].name, d, axis[d],
                               (long long)t[i].stride[d], (long long)bytes);
        }
        int64_t span = tensor_span(&t[i]);
        if (span > MAX_SPAN || (uintptr_t)t[i].ptr > UINTPTR_MAX - (uintptr_t)span)
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: batch %d x seqlen %d x heads %d with strides (%lld, "
                           "%lld, %lld) spans over 2^57 bytes from %p", t[i].name, t[i].batch, t[i].seqlen,
                           t[i].heads, (long long)t[i].stride[0], (long long)t[i].stride[1], (long long)t[i].stride[2],
                           t[i].ptr);
    }
    uint64_t lse_rows = (uint64_t)(a->cu_seqlens_q ? 1 : a->batch) * (uint64_t)a->heads_q * (uint64_t)a->seqlen_q;
    if (lse_rows > ((uint64_t)1 << 32))
        return BAD("lse", "%llu rows; the kernels index LSE in 32 bits (at most 2^32 rows): split the batch",
                   (unsigned long long)lse_rows);
    return FA4_OK;
}

enum { MASK_SLACK = 512 };

static fa4_status check_math(fa4_ctx *ctx, const fa4_mha_bwd_args *a)
{
    if (!isfinite(a->softmax_scale) || a->softmax_scale < 0)
        return BAD("softmax_scale", "%g; use a finite scale >= 0 (0: 1/sqrt(depth))", (double)a->softmax_scale);
    if (!isfinite(a->softcap) || a->softcap < 0)
        return BAD("softcap", "%g; use a finite cap > 0, or 0 for none", (double)a->softcap);
    double s = a->softmax_scale != 0.0f ? (double)a->softmax_scale : 1.0 / sqrt((double)a->qk_depth);
    if (a->softcap > 0 && !((float)(s / a->softcap) > 0.0f && isfinite((float)(s / a->softcap)) &&
                            isfinite((float)(a->softcap * 1.4426950408889634))))
        return BAD("softcap", "%g with softmax_scale %g: the kernel's scales (x cap log2 e, / cap) leave float's range",
                   (double)a->softcap, s);
    if ((unsigned)a->mask > FA4_MASK_WINDOW) return BAD("mask", "%d is not a fa4_mask", (int)a->mask);
    if (a->mask == FA4_MASK_WINDOW) {
        if (a->window_left < -1 || a->window_left > FA4_WINDOW_MAX)
            return BAD("window_left", "%d; use 0..%d, or -1 for unbounded", a->window_left, FA4_WINDOW_MAX);
        if (a->window_right < -1 || a->window_right > FA4_WINDOW_MAX)
            return BAD("window_right", "%d; use 0..%d, or -1 for unbounded", a->window_right, FA4_WINDOW_MAX);
    }
    /* the kernel's key and query ranges are 32-bit signed: seqlen + a window bound + a tile */
    int64_t wl = a->mask == FA4_MASK_WINDOW ? a->window_left : 0, wr = a->mask == FA4_MASK_WINDOW ? a->window_right : 0;
    if ((int64_t)a->seqlen_k + (wl > wr ? wl : wr) + MASK_SLACK > INT32_MAX ||
        (int64_t)a->seqlen_q + (wl > wr ? wl : wr) + MASK_SLACK > INT32_MAX)
        return BAD("seqlen_k", "%d / seqlen_q %d with the window's bounds; the kernels need seqlen + bound <= 2^31 - %d",
                   a->seqlen_k, a->seqlen_q, MASK_SLACK + 1);
    return FA4_OK;
}

/* ---------------------------------------------------------------- configs */

static double bwd_scale(const fa4_mha_bwd_args *a)
{
    return a->softmax_scale != 0.0f ? (double)a->softmax_scale : 1.0 / sqrt((double)a->qk_depth);
}

/* The target of a call: the context's, or AUTO resolved from the device once the driver is loaded (before that, sm90a,
 * as the forward's questions; fa4_mha_bwd resolves AUTO again after its argument checks). Both targets' plans take
 * the same bm for a depth, so the workspace a call needs does not depend on it. */
static fa4_status bwd_target(fa4_ctx *ctx, TargetId *t)
{
    fa4_status s;
    *t = rt_target_of(ctx->opt.target);
    if (ctx->opt.target == FA4_TARGET_AUTO && rt_driver_ready(ctx))
        if ((s = rt_driver(ctx)) || (s = rt_device_target(ctx, t))) return s;
    return FA4_OK;
}

/* The main kernel's grid: one CTA per (kv block of bn keys, kv head, batch); varlen: blocks of the longest. */
static uint64_t main_tiles(const fa4_mha_bwd_args *a, int bn, int pair)
{
    uint64_t kv = (uint64_t)(a->cu_seqlens_q ? a->max_seqlen_k : a->seqlen_k), keys = (uint64_t)bn * (uint64_t)pair;
    return (kv + keys - 1) / keys * (uint64_t)pair * (uint64_t)a->heads_kv * (uint64_t)a->batch;
}

/* The split of the last wave's tiles (mha_bwd.h "Tail split") for the main kernel c of call a, or none: sm90a, no
 * mask (every tile does the same work), dense, deterministic=0, depth <= 128, one CTA per SM (the plan's shared
 * memory), and bwd_tail_pick's model finds a gain. */
static BwdTail tail_pick(fa4_ctx *ctx, const fa4_mha_bwd_args *a, const Config *c)
{
    BwdTail none;
    memset(&none, 0, sizeof none);
    none.grid = main_tiles(a, c->bn ? c->bn : 128, 1);
    if (c->target != TARGET_SM90A || c->mask != MASK_NONE || c->varlen || c->deterministic || c->qk_depth > 128 ||
        !c->bm || !c->bn)
        return none;
    uint64_t m_blocks = ((uint64_t)a->seqlen_q + (uint64_t)c->bm - 1) / (uint64_t)c->bm;
    uint64_t iters = m_blocks * (uint64_t)c->group;
    if (iters > 0x7fffffff) return none;
    return bwd_tail_pick(none.grid, rt_sm_count(ctx, c->target), (int)iters, c->bn, c->qk_depth);
}

/* The runtime's choice of tail_split (args->config may set it either way): on where tail_pick splits with the
 * plan's tile. */
static int tail_pays(fa4_ctx *ctx, const fa4_mha_bwd_args *a, const Config *c)
{
    Config t = *c;
    char err[256];
    if (t.target != TARGET_SM90A || t.mask != MASK_NONE || config_fill_defaults(&t, err, sizeof err)) return 0;
    return tail_pick(ctx, a, &t).parts > 0;
}

/* The main kernel's config for a on target t, args->config's tuning words over it. */
static fa4_status main_config(fa4_ctx *ctx, const fa4_mha_bwd_args *a, TargetId target, Config *c)
{
    static const MaskKind mk[] = {[FA4_MASK_NONE] = MASK_NONE, [FA4_MASK_CAUSAL] = MASK_CAUSAL,
                                  [FA4_MASK_WINDOW] = MASK_WINDOW};
    config_init(c);
    c->kind = KIND_MHA_BWD;
    c->target = target;
    c->dtype = a->dtype == FA4_FP16 ? DT_FP16 : DT_BF16;
    c->qk_depth = a->qk_depth, c->ov_depth = a->ov_depth;
    c->group = a->heads_q / a->heads_kv;
    c->mask = mk[a->mask];
    if (c->mask == MASK_WINDOW) c->window_left = a->window_left, c->window_right = a->window_right;
    c->varlen = a->cu_seqlens_q != NULL;
    c->softcap = a->softcap > 0.0f;
    c->deterministic = a->deterministic;
    int tail_given = 0;
    if (a->config) {
        Config want = *c;
        ConfigGiven g;
        fa4_status s = rt_parse_config_given(ctx, a->config, c, &g, "args->config");
        if (s) return s;
        tail_given = config_given_has(&g, "tail_split", NULL);
        if (c->kind != want.kind || c->target != want.target || c->dtype != want.dtype ||
            c->qk_depth != want.qk_depth || c->ov_depth != want.ov_depth || c->group != want.group ||
            c->mask != want.mask || c->window_left != want.window_left || c->window_right != want.window_right ||
            c->varlen != want.varlen || c->softcap != want.softcap || c->sink || c->score_mod ||
            c->deterministic < want.deterministic)
            return BAD("args->config", "'%s' changes what the arguments decide; give only tuning keys (bm bn stages; "
                       "deterministic=1 may ask for the ordered dQ)", a->config);
    }
    /* the runtime's pick unless the text set it either way; after the text, whose bm, bn, ... it depends on */
    if (!tail_given) c->tail_split = tail_pays(ctx, a, c);
    char err[512];
    Config t = *c;
    if (config_fill_defaults(&t, err, sizeof err) || config_check(&t, err, sizeof err))
        return rt_fail(ctx, FA4_ERR_UNSUPPORTED, "config: %s", err);
    *c = t;
    return FA4_OK;
}

static fa4_status prepare(fa4_ctx *ctx, const fa4_mha_bwd_args *in, fa4_mha_bwd_args *a, Config *c, int need_ptrs)
{
    fa4_status s;
    if ((s = read_args(ctx, in, a)) || (s = check_shape(ctx, a, need_ptrs)) || (s = check_varlen(ctx, a)) ||
        (need_ptrs && (s = check_layout(ctx, a))) || (s = check_math(ctx, a)))
        return s;
    TargetId t;
    if ((s = bwd_target(ctx, &t))) return s;
    return main_config(ctx, a, t, c);
}

/* The tensor's elements fill its span with no hole and no overlap: its axes of more than one element, by stride,
 * are packed one over the other above the depth. */
static int dense(const BwdTensor *t)
{
    int64_t count[3] = {t->batch, t->seqlen, t->heads}, expect = t->depth;
    int used[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) {
        int best = -1;
        for (int d = 0; d < 3; d++)
            if (!used[d] && count[d] > 1 && (best < 0 || t->stride[d] < t->stride[best])) best = d;
        if (best < 0) break;
        if (t->stride[best] != expect) return 0;
        used[best] = 1;
        expect = mul_sat(expect, count[best]);
    }
    return 1;
}

static int overlaps(const void *p, int64_t n, uintptr_t lo, uintptr_t hi)
{
    uintptr_t a = (uintptr_t)p;
    return p && n > 0 && a < hi && lo < a + (uintptr_t)n;
}

/* D and nl2 at the start of the caller's dq instead of the workspace: dq is written only by the last kernel
 * (mha-bwd-dq), after the main kernel's last read of them, and that kernel writes every element of a dense
 * non-varlen dq, so none of them survives; the workspace is then the dQ accumulator (+ sink partials) alone, as
 * cuDNN's. Not for varlen (rows outside every sequence are not written), a dq with holes (they are someone
 * else's memory) or too small for them, or a dq that overlaps an input or another output (the pre kernel writes
 * D and nl2 before the main kernel reads its inputs). A size query without pointers: the layout decides. */
static int stats_fit_dq(const fa4_mha_bwd_args *a, uint64_t stats_bytes)
{
    if (a->cu_seqlens_q) return 0;
    BwdTensor t[B_N];
    tensors(a, t);
    const BwdTensor *dq = &t[B_DQ];
    int64_t bytes = tensor_span(dq);
    if (!dense(dq) || bytes == INT64_MAX || stats_bytes > (uint64_t)bytes) return 0;
    if (!dq->ptr) return 1;
    uintptr_t lo = (uintptr_t)dq->ptr, hi = lo + (uintptr_t)bytes;
    if (hi < lo) return 0;
    for (int i = 0; i < B_N; i++)
        if (i != B_DQ && overlaps(t[i].ptr, tensor_span(&t[i]), lo, hi)) return 0;
    int64_t rows = mul_sat(mul_sat(a->batch, a->heads_q), a->seqlen_q), heads = a->heads_q;
    return !overlaps(a->lse, mul_sat(rows, 4), lo, hi) && !overlaps(a->dlse, mul_sat(rows, 4), lo, hi) &&
           !overlaps(a->sink, heads * 4, lo, hi) && !overlaps(a->dsink, heads * 4, lo, hi);
}

static BwdWorkspace workspace_of(const fa4_mha_bwd_args *a, const Config *c)
{
    int varlen = a->cu_seqlens_q != NULL, maxq = varlen ? a->max_seqlen_q : a->seqlen_q, det = c->deterministic;
    BwdWorkspace w = bwd_workspace(varlen, a->batch, a->heads_q, a->seqlen_q, maxq, a->qk_depth, c->bm,
                                   a->sink != NULL, 0, det);
    if (stats_fit_dq(a, w.stats_bytes))
        w = bwd_workspace(varlen, a->batch, a->heads_q, a->seqlen_q, maxq, a->qk_depth, c->bm, a->sink != NULL, 1,
                          det);
    return w;
}

fa4_status fa4_mha_bwd_workspace_size(fa4_ctx *ctx, const fa4_mha_bwd_args *args, size_t *bytes)
{
    if (!ctx) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "ctx: NULL");
    if (!bytes) return BAD("bytes", "NULL");
    fa4_mha_bwd_args a;
    Config c;
    fa4_status s = prepare(ctx, args, &a, &c, 0);
    if (s) return s;
    BwdWorkspace w = workspace_of(&a, &c);
    if (w.bytes > SIZE_MAX) return BAD("seqlen_q", "the workspace would be %llu bytes", (unsigned long long)w.bytes);
    *bytes = (size_t)w.bytes;
    return FA4_OK;
}

fa4_status fa4_mha_bwd_config(fa4_ctx *ctx, const fa4_mha_bwd_args *args, char *buf, size_t n)
{
    if (!ctx) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "ctx: NULL");
    if (!buf || !n) return BAD("buf", "NULL or n == 0");
    fa4_mha_bwd_args a;
    Config c;
    fa4_status s = prepare(ctx, args, &a, &c, 0);
    if (s) return s;
    char text[360];
    config_canonical(&c, text, sizeof text);
    if (strlen(text) >= n) return BAD("n", "%zu is too small for the config text (%zu bytes)", n, strlen(text) + 1);
    strcpy(buf, text);
    return FA4_OK;
}

/* ---------------------------------------------------------------- launches */

static fa4_status get_kernel(fa4_ctx *ctx, const Config *c, fa4_kernel **k)
{
    char key[360];
    config_canonical(c, key, sizeof key);
    uint64_t hash = rt_fnv1a(key, strlen(key), RT_FNV_SEED);
    fa4_kernel_stats st = {0};
    *k = rt_kernel_lookup(ctx, key, hash);
    return *k ? FA4_OK : rt_kernel_build(ctx, key, hash, c, NULL, k, &st, FA4_ERR_UNSUPPORTED);
}

static void set(RtLaunch *l, ScalarId id, RtScalar v)
{
    l->scalars[id] = v;
    l->has_scalar[id] = 1;
}
#define U64(x) ((RtScalar){.u64 = (uint64_t)(x)})
#define U32(x) ((RtScalar){.u32 = (uint32_t)(x)})
#define F32(x) ((RtScalar){.f32 = (float)(x)})
#define PTR(x) U64((uintptr_t)(x))

/* What every kernel of a call binds: the workspace parts, the shape, varlen. */
static void bind_common(RtLaunch *l, const fa4_mha_bwd_args *a, const BwdWorkspace *w)
{
    uint64_t ws = (uint64_t)(uintptr_t)a->workspace, stats = w->stats_in_dq ? (uint64_t)(uintptr_t)a->dq : ws;
    int varlen = a->cu_seqlens_q != NULL;
    set(l, SCALAR_DQ_ACCUM, U64(ws + w->dq_accum));
    set(l, SCALAR_DPSUM, U64(stats + w->dpsum));
    set(l, SCALAR_NLSE2, U64(stats + w->nlse2));
    set(l, SCALAR_SINK_PART, U64(ws + w->sink_part));
    set(l, SCALAR_DQ_SEM, U64(ws + w->dq_sem));
    set(l, SCALAR_SEQLEN_Q, U32(varlen ? a->max_seqlen_q : a->seqlen_q));
    set(l, SCALAR_SEQLEN_K, U32(varlen ? a->max_seqlen_k : a->seqlen_k));
    set(l, SCALAR_HEADS_Q, U32(a->heads_q));
    set(l, SCALAR_BATCH, U32(a->batch));
    set(l, SCALAR_Q_ROWS, U32(w->q_rows));
    set(l, SCALAR_CU_SEQLENS_Q, PTR(a->cu_seqlens_q));
    set(l, SCALAR_CU_SEQLENS_K, PTR(a->cu_seqlens_k));
    set(l, SCALAR_TOTAL_Q, U32(a->seqlen_q));
    set(l, SCALAR_TOTAL_K, U32(a->seqlen_k));
    set(l, SCALAR_SINK, PTR(a->sink));
    set(l, SCALAR_DSINK, PTR(a->dsink));
    set(l, SCALAR_LSE, PTR(a->lse));
    double s = bwd_scale(a);
    set(l, SCALAR_SCALE, F32(s));
    /* softcap: P = exp2(tanh(q.k s / cap) cap log2 e + nl2), as the forward's kernel_scales */
    set(l, SCALAR_SCALE_LOG2, F32((a->softcap > 0.0f ? (double)a->softcap : s) * 1.4426950408889634));
    set(l, SCALAR_SOFTCAP_SCALE, F32(a->softcap > 0.0f ? s / a->softcap : 0.0));
}

static void bind_strides(RtLaunch *l, const BwdTensor *t, ScalarId ptr, ScalarId sb, ScalarId ss, ScalarId sh,
                         int varlen)
{
    set(l, ptr, PTR(t->ptr));
    set(l, sb, U64(varlen ? 0 : t->stride[0]));
    set(l, ss, U64(t->stride[1]));
    set(l, sh, U64(t->stride[2]));
}

/* The grids (64-bit, then narrowed): pre and dq one CTA per (m-block, head, batch), main one per (kv block,
 * kv head, batch); the sm100a CTA pair (cta=2) two per 2 bn keys, CTAs 2i, 2i+1 a cluster (the plan's cluster
 * dims, set at launch). */
static fa4_status grids(fa4_ctx *ctx, const fa4_mha_bwd_args *a, const Config *c, const BwdWorkspace *w,
                        unsigned *g_aux, unsigned *g_main)
{
    int varlen = a->cu_seqlens_q != NULL;
    uint64_t aux = w->m_blocks * (uint64_t)a->heads_q * (uint64_t)a->batch;
    uint64_t main = main_tiles(a, c->bn, c->cta_pair == 2 ? 2 : 1);
    if (aux == 0 || aux > 0x7fffffffu || main == 0 || main > 0x7fffffffu)
        return BAD("batch", "%d x heads %d x seqlen (%d, %d) needs %llu / %llu CTAs; a grid allows 2^31 - 1", a->batch,
                   a->heads_q, a->seqlen_q, a->seqlen_k, (unsigned long long)aux, (unsigned long long)main);
    if (w->q_rows * (uint64_t)a->heads_q * (uint64_t)(varlen ? 1 : a->batch) > 0xffffffffu)
        return BAD("seqlen_q", "the workspace has over 2^32 rows; the kernels index them in 32 bits");
    *g_aux = (unsigned)aux, *g_main = (unsigned)main;
    return FA4_OK;
}

/* tail_split=1: the split (tail_pick) when its partials fit in the caller's dq after D and nl2, else none (the
 * kernel then runs every tile whole); the pre kernel zeroes the area, the main kernel's grid grows by the parts. */
static void bind_tail(fa4_ctx *ctx, const fa4_mha_bwd_args *a, const Config *c, const BwdWorkspace *w,
                      const BwdTensor *dq, RtLaunch *lp, RtLaunch *lm)
{
    BwdTail t = tail_pick(ctx, a, c);
    int64_t span = tensor_span(dq);
    if (!w->stats_in_dq || span == INT64_MAX || w->stats_bytes + t.bytes > (uint64_t)span || t.grid > 0x7fffffffu ||
        t.bytes > 0xffffffffu)
        memset(&t, 0, sizeof t);
    uint64_t area = (uint64_t)(uintptr_t)a->dq + w->stats_bytes;
    set(lm, SCALAR_TAIL_FIRST, U32(t.first));
    set(lm, SCALAR_TAIL_PARTS, U32(t.parts));
    set(lm, SCALAR_TAIL_WS, U64(t.parts ? area : 0));
    set(lp, SCALAR_TAIL_WS, U64(t.parts ? area : 0));
    set(lp, SCALAR_TAIL_BYTES, U32(t.bytes));
    if (t.parts) lm->grid = (unsigned)t.grid;
}

/* The workspace a call with config c needs against the caller's, and the grids. */
static fa4_status check_workspace(fa4_ctx *ctx, const fa4_mha_bwd_args *aa, const Config *c, BwdWorkspace *wp,
                                  unsigned *g_aux, unsigned *g_main)
{
    fa4_mha_bwd_args a = *aa;
    BwdWorkspace w = workspace_of(&a, c);
    *wp = w;
    if (!a.workspace)
        return BAD("workspace", "NULL; give a 16-byte aligned device buffer of %llu bytes "
                   "(fa4_mha_bwd_workspace_size)", (unsigned long long)w.bytes);
    if ((uintptr_t)a.workspace % 16) return BAD("workspace", "address %p is not 16-byte aligned", a.workspace);
    if (a.workspace_size < w.bytes)
        return BAD("workspace_size", "%zu bytes; this call needs %llu (fa4_mha_bwd_workspace_size)%s", a.workspace_size,
                   (unsigned long long)w.bytes, !w.stats_in_dq && a.workspace_size >= w.bytes - w.stats_bytes ?
                   ", with D and nl2 in it: this dq cannot hold them (varlen, strided with holes, too small, or "
                   "overlapping another tensor)" : "");
    if ((uintptr_t)a.workspace > UINTPTR_MAX - w.bytes) return BAD("workspace", "wraps the address space");
    return grids(ctx, &a, c, &w, g_aux, g_main);
}

fa4_status fa4_mha_bwd(fa4_ctx *ctx, const fa4_mha_bwd_args *args, void *stream)
{
    if (!ctx) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "ctx: NULL");
    fa4_mha_bwd_args a;
    Config c;
    fa4_status s = prepare(ctx, args, &a, &c, 1);
    if (s) return s;
    BwdWorkspace w;
    unsigned g_aux = 0, g_main = 0;
    if ((s = check_workspace(ctx, &a, &c, &w, &g_aux, &g_main))) return s;
    /* Only now the driver: everything above is the caller's arguments. AUTO: the device's target, whose
     * config is checked again (its refusals, and the workspace it needs). */
    if ((s = rt_driver(ctx))) return s;
    if (ctx->opt.target == FA4_TARGET_AUTO) {
        TargetId t;
        if ((s = rt_device_target(ctx, &t))) return s;
        if (t != c.target &&
            ((s = main_config(ctx, &a, t, &c)) || (s = check_workspace(ctx, &a, &c, &w, &g_aux, &g_main))))
            return s;
    }
    if ((s = rt_check_target(ctx, c.target))) return s;
    Config cp, cd;
    bwd_aux_config(&c, KIND_MHA_BWD_PRE, a.sink != NULL, &cp);
    bwd_aux_config(&c, KIND_MHA_BWD_DQ, a.sink != NULL, &cd);
    fa4_kernel *kp, *km, *kd;
    if ((s = get_kernel(ctx, &cp, &kp)) || (s = get_kernel(ctx, &c, &km)) || (s = get_kernel(ctx, &cd, &kd))) return s;

    int varlen = a.cu_seqlens_q != NULL;
    BwdTensor bt[B_N];
    tensors(&a, bt);
    RtLaunch lp, lm, ld;
    memset(&lp, 0, sizeof lp), memset(&lm, 0, sizeof lm), memset(&ld, 0, sizeof ld);
    bind_common(&lp, &a, &w), bind_common(&lm, &a, &w), bind_common(&ld, &a, &w);
    lp.grid = g_aux, ld.grid = g_aux, lm.grid = g_main;
    set(&lp, SCALAR_DLSE, PTR(a.dlse));
    bind_strides(&lp, &bt[B_O], SCALAR_OUT, SCALAR_OUT_STRIDE_B, SCALAR_OUT_STRIDE_S, SCALAR_OUT_STRIDE_H, varlen);
    bind_strides(&lp, &bt[B_DO], SCALAR_DOUT, SCALAR_DOUT_STRIDE_B, SCALAR_DOUT_STRIDE_S, SCALAR_DOUT_STRIDE_H, varlen);
    bind_strides(&ld, &bt[B_DQ], SCALAR_DQ, SCALAR_DQ_STRIDE_B, SCALAR_DQ_STRIDE_S, SCALAR_DQ_STRIDE_H, varlen);
    set(&lm, SCALAR_DK, PTR(a.dk)), set(&lm, SCALAR_DK_STRIDE_S, U64(bt[B_DK].stride[1]));
    set(&lm, SCALAR_DK_STRIDE_H, U64(bt[B_DK].stride[2])), set(&lm, SCALAR_DV, PTR(a.dv));
    set(&lm, SCALAR_DV_STRIDE_S, U64(bt[B_DV].stride[1])), set(&lm, SCALAR_DV_STRIDE_H, U64(bt[B_DV].stride[2]));
    set(&lm, SCALAR_DK_STRIDE_B, U64(varlen ? 0 : bt[B_DK].stride[0]));
    set(&lm, SCALAR_DV_STRIDE_B, U64(varlen ? 0 : bt[B_DV].stride[0]));
    static const struct { int arg; TensorId id; } maps[] = {{B_Q, TENSOR_Q}, {B_K, TENSOR_K}, {B_V, TENSOR_V},
                                                            {B_DO, TENSOR_DO}, {B_DK, TENSOR_DK}, {B_DV, TENSOR_DV}};
    int has_map[TENSOR_COUNT] = {0}; /* the kernel's maps (sm100a stores dK, dV without one) */
    for (int i = 0; i < km->plan.n_maps; i++)
        if ((unsigned)km->plan.maps[i].tensor < TENSOR_COUNT) has_map[km->plan.maps[i].tensor] = 1;
    for (size_t i = 0; i < sizeof maps / sizeof maps[0]; i++) {
        if (!has_map[maps[i].id]) continue;
        const BwdTensor *x = &bt[maps[i].arg];
        RtTensor *r = &lm.tensors[maps[i].id];
        r->name = x->name, r->ptr = x->ptr, r->elem_bytes = 2, r->rank = 4;
        r->dims[0] = (uint64_t)x->depth, r->dims[1] = (uint64_t)x->seqlen;
        r->dims[2] = (uint64_t)x->heads, r->dims[3] = (uint64_t)x->batch;
        r->byte_strides[0] = (uint64_t)(x->stride[1] * 2);
        r->byte_strides[1] = (uint64_t)(x->stride[2] * 2);
        r->byte_strides[2] = (uint64_t)(x->stride[0] * 2);
    }
    if (c.tail_split) bind_tail(ctx, &a, &c, &w, &bt[B_DQ], &lp, &lm);
    int pushed;
    if ((s = rt_ctx_enter(ctx, &pushed))) return s;
    if (!(s = rt_launch(ctx, kp, &lp, (CUstream)stream)) && !(s = rt_launch(ctx, km, &lm, (CUstream)stream)))
        s = rt_launch(ctx, kd, &ld, (CUstream)stream);
    rt_ctx_leave(ctx, pushed);
    return s;
}
