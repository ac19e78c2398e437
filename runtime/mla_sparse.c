/* mla_sparse.c - fa4_mla_sparse_fwd: sparse MLA prefill (fa4.h has the contract).
 *
 * Every argument is checked before anything is compiled or launched; the
 * kernel config comes from the arguments (kind mla-sparse, qk = d_qk) plus the
 * caller's tuning words; the launch binds the plan's parameter list
 * (runtime/launch.c). The gather kernel reads q, kv and indices with plain
 * loads (cp.async of 16 bytes), so q and kv rows must start on 16-byte
 * boundaries; out is written in bf16 pairs (4 bytes).
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

#define BAD(what, ...) rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, what ": " __VA_ARGS__)

enum { MLA_DV = 512, MLA_BF16 = 2 };

/* The caller's struct, older shorter ones included, over the defaults. */
static fa4_status read_args(fa4_ctx *ctx, const fa4_mla_sparse_args *in, fa4_mla_sparse_args *a)
{
    fa4_mla_sparse_args def = FA4_MLA_SPARSE_ARGS_INIT;
    if (!in) return BAD("args", "NULL");
    if (in->size < offsetof(fa4_mla_sparse_args, q_stride) || in->size > 1u << 20)
        return BAD("args->size", "%zu; initialise with FA4_MLA_SPARSE_ARGS_INIT", in->size);
    *a = def;
    memcpy(a, in, in->size < sizeof *a ? in->size : sizeof *a);
    a->size = sizeof *a;
    return FA4_OK;
}

static fa4_status check_shape(fa4_ctx *ctx, const fa4_mla_sparse_args *a, int block)
{
    if (!a->q || !a->kv || !a->indices || !a->out)
        return BAD(!a->q ? "q" : !a->kv ? "kv" : !a->indices ? "indices" : "out", "NULL");
    if (a->s_q < 1) return BAD("s_q", "%d; use >= 1", a->s_q);
    if (a->s_kv < 1) return BAD("s_kv", "%d; use >= 1", a->s_kv);
    if (a->d_qk != 576 && a->d_qk != 512) return BAD("d_qk", "%d; use 576 (512 nope + 64 rope) or 512", a->d_qk);
    if (a->h_q < 1) return BAD("h_q", "%d; use >= 1", a->h_q);
    if (a->h_q <= 128 ? a->h_q % 8 : a->h_q % 64)
        return rt_fail(ctx, FA4_ERR_UNSUPPORTED, "h_q: %d; use a multiple of 8 up to 128 (padded to 64 per CTA), "
                       "or a multiple of 64", a->h_q);
    if (a->topk < 1) return BAD("topk", "%d; use >= 1", a->topk);
    if (a->topk < block || a->topk % block)
        return rt_fail(ctx, FA4_ERR_UNSUPPORTED, "topk: %d; use a multiple of %d (the kernel's block of top-k "
                       "positions)", a->topk, block);
    if (!(a->sm_scale >= 0.0f) || a->sm_scale > 1e30f) return BAD("sm_scale", "%g; use a finite value >= 0 (0: 1/sqrt(d_qk))",
                                                                 (double)a->sm_scale);
    if (a->kv_dtype != FA4_BF16 && a->kv_dtype != FA4_E4M3)
        return BAD("kv_dtype", "%d; use FA4_BF16 or FA4_E4M3 (fp8 kv, sm100a)", (int)a->kv_dtype);
    if (a->kv_dtype == FA4_BF16 && (a->kv_scale || a->kv_scale_block))
        return BAD("kv_scale", "given for bf16 kv; scales are for kv_dtype FA4_E4M3 only");
    if (a->kv_scale_block && (a->kv_scale_block < 0 || a->kv_scale_block % 64 || a->d_qk % a->kv_scale_block))
        return BAD("kv_scale_block", "%d; use 0 (one scale per row) or a multiple of 64 dividing d_qk %d",
                   a->kv_scale_block, a->d_qk);
    return FA4_OK;
}

/* No buffer spans more: the widest virtual address space (x86-64 5-level paging), as mha.c. */
#define MAX_SPAN ((int64_t)1 << 57)

/* a x b, or INT64_MAX when it does not fit (every such value is then refused). */
static int64_t mul_sat(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

static int64_t add_sat(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

/* Bytes from a buffer's base to the end of its last row: (i x si + j x sj + row) elements. */
static int64_t span(int64_t i, int64_t si, int64_t j, int64_t sj, int64_t row, int64_t elem_bytes)
{
    return mul_sat(add_sat(add_sat(mul_sat(i, si), mul_sat(j, sj)), row), elem_bytes);
}

/* The buffers of a call and the bytes the kernel may touch from each base (the last row of the last token,
 * in 64 bits, saturated), in check order; strides must already be resolved (0 replaced). */
enum { B_Q, B_KV, B_IDX, B_OUT, B_LSE, B_MAXL, B_SINK, B_TKLEN, B_KVSCALE, N_BUFS };
static void buffers(const fa4_mla_sparse_args *a, RtBuffer b[N_BUFS])
{
    const int64_t rows = (int64_t)a->s_q * a->h_q, tok = a->s_q - 1, head = a->h_q - 1;
    const int64_t kvb = a->kv_dtype == FA4_E4M3 ? 1 : MLA_BF16;
    const int64_t scales = a->kv_scale_block ? a->d_qk / a->kv_scale_block : 1; /* per kv row */
    const RtBuffer v[N_BUFS] = {
        {"q", a->q, (uint64_t)span(tok, a->q_stride[0], head, a->q_stride[1], a->d_qk, MLA_BF16), 0},
        {"kv", a->kv, (uint64_t)span(a->s_kv - 1, a->kv_stride, 0, 0, a->d_qk, kvb), 0},
        {"indices", a->indices, (uint64_t)span(tok, a->indices_stride, 0, 0, a->topk, 4), 0},
        {"out", a->out, (uint64_t)span(tok, a->out_stride[0], head, a->out_stride[1], MLA_DV, MLA_BF16), 0},
        {"lse", a->lse, (uint64_t)span(0, 0, 0, 0, rows, 4), 0},
        {"max_logits", a->max_logits, (uint64_t)span(0, 0, 0, 0, rows, 4), 0},
        {"attn_sink", a->attn_sink, (uint64_t)span(0, 0, 0, 0, a->h_q, 4), 0},
        {"topk_length", a->topk_length, (uint64_t)span(0, 0, 0, 0, a->s_q, 4), 0},
        {"kv_scale", a->kv_scale, (uint64_t)span(a->s_kv - 1, scales, 0, 0, scales, 4), 0}};
    memcpy(b, v, sizeof v);
}

/* q and out hold [s_q, h_q, row] with free token and head strides: taken in stride order, each axis of more
 * than one index steps over at least the extent inside it, so no two elements share an address (out would
 * be written twice; fa4.h: a tensor may not overlap itself). */
static fa4_status check_overlap(fa4_ctx *ctx, const char *name, int64_t s_stride, int64_t h_stride, int s_q, int h_q,
                                int64_t row)
{
    const int64_t stride[2] = {s_stride, h_stride}, count[2] = {s_q, h_q};
    int inner = h_stride <= s_stride ? 1 : 0; /* the axis with the smaller stride is checked first */
    int64_t extent = row;
    for (int k = 0; k < 2; k++) {
        int d = k == 0 ? inner : 1 - inner;
        if (count[d] <= 1) continue;
        if (stride[d] < extent)
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s_stride[%d]: %lld steps over less than the %lld elements "
                           "inside it; a tensor's %s may not overlap", name, d, (long long)stride[d], (long long)extent,
                           d ? "heads" : "tokens");
        extent = add_sat(extent, mul_sat(count[d] - 1, stride[d]));
    }
    return FA4_OK;
}

/* Element strides (0: packed), each >= the span of what it skips, and the alignments the kernel's
 * loads and stores need. */
static fa4_status check_layout(fa4_ctx *ctx, fa4_mla_sparse_args *a)
{
    int64_t *st[] = {&a->q_stride[0], &a->q_stride[1], &a->kv_stride, &a->indices_stride, &a->out_stride[0],
                     &a->out_stride[1]};
    const int64_t def[] = {(int64_t)a->h_q * a->d_qk, a->d_qk, a->d_qk, a->topk, (int64_t)a->h_q * MLA_DV, MLA_DV};
    /* elements: 16 B for cp.async and TMA rows (16 e4m3 bytes for fp8 kv), 4 B for bf16 pair stores */
    const int64_t align[] = {8, 8, a->kv_dtype == FA4_E4M3 ? 16 : 8, 1, 2, 2};
    static const char *const name[] = {"q_stride[0]", "q_stride[1]", "kv_stride", "indices_stride", "out_stride[0]",
                                       "out_stride[1]"};
    for (int i = 0; i < 6; i++) {
        if (!*st[i]) *st[i] = def[i];
        if (*st[i] < 0 || *st[i] > ((int64_t)1 << 40))
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %lld; use 0 (packed) or a positive element stride",
                           name[i], (long long)*st[i]);
        if (*st[i] % align[i])
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %lld is not a multiple of %lld elements (%lld bytes, "
                           "the kernel's access width)", name[i], (long long)*st[i], (long long)align[i],
                           (long long)(align[i] * (i == 3 ? 4 : i == 2 && a->kv_dtype == FA4_E4M3 ? 1 : MLA_BF16)));
    }
    /* rows of kv and indices step over a whole row (a row is read whole); q and out per axis order */
    if (a->s_kv > 1 && a->kv_stride < a->d_qk)
        return BAD("kv_stride", "%lld is smaller than the %d elements of a kv row it steps over",
                   (long long)a->kv_stride, a->d_qk);
    if (a->s_q > 1 && a->indices_stride < a->topk)
        return BAD("indices_stride", "%lld is smaller than the %d indices of a row it steps over",
                   (long long)a->indices_stride, a->topk);
    fa4_status s;
    if ((s = check_overlap(ctx, "q", a->q_stride[0], a->q_stride[1], a->s_q, a->h_q, a->d_qk)) ||
        (s = check_overlap(ctx, "out", a->out_stride[0], a->out_stride[1], a->s_q, a->h_q, MLA_DV)))
        return s;
    /* the bytes each buffer spans: the last row of the last token, in 64 bits without overflow */
    static const unsigned align_of[N_BUFS] = {16, 16, 4, 4, 4, 4, 4, 4, 4};
    RtBuffer b[N_BUFS];
    buffers(a, b);
    for (int i = 0; i < N_BUFS; i++) {
        if ((uintptr_t)b[i].ptr % align_of[i])
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %p is not %u-byte aligned", b[i].name, b[i].ptr,
                           align_of[i]);
        if (b[i].ptr && (b[i].bytes > (uint64_t)MAX_SPAN || (uintptr_t)b[i].ptr > UINTPTR_MAX - (uintptr_t)b[i].bytes))
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: s_q %d, s_kv %d, h_q %d, topk %d with its strides span "
                           "%s bytes from %p; no buffer is that large (2^57)", b[i].name, a->s_q, a->s_kv, a->h_q,
                           a->topk, b[i].bytes == INT64_MAX ? "over 2^63" : "over 2^57", b[i].ptr);
    }
    /* the kernel indexes lse and max_logits [s_q, h_q] in 32 bits (gen/sm90/mla_sparse.c, cs_ix) */
    const int64_t rows = (int64_t)a->s_q * a->h_q;
    if ((a->lse || a->max_logits) && rows > ((int64_t)1 << 32))
        return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: s_q %d x h_q %d = %lld rows; the kernel indexes them in 32 "
                       "bits (at most 2^32): pass NULL or split s_q", a->lse ? "lse" : "max_logits", a->s_q, a->h_q,
                       (long long)rows);
    return FA4_OK;
}

/* O leaves by TMA store when a tensor map can address out (base and byte strides multiples of 16), else by
 * st.global from registers; a config that asks for the TMA store on other strides is refused. */
static fa4_status pick_o_store(fa4_ctx *ctx, const fa4_mla_sparse_args *a, Config *c)
{
    const char *why = (uintptr_t)a->out % 16 ? "out is not 16-byte aligned"
                    : (a->out_stride[0] * MLA_BF16) % 16 ? "out_stride[0] is not a multiple of 8 elements"
                    : (a->out_stride[1] * MLA_BF16) % 16 ? "out_stride[1] is not a multiple of 8 elements" : NULL;
    if (c->tma_store < 0) c->tma_store = !why;
    else if (c->tma_store == 1 && why)
        return BAD("args->config", "tma_store=1 needs out's base and strides in multiples of 16 bytes, but %s; drop "
                   "the word (the runtime then stores O with st.global)", why);
    return FA4_OK;
}

/* kind mla-sparse for the context's target, then the caller's tuning words, which may not change
 * what the arguments decide. */
static fa4_status args_config(fa4_ctx *ctx, const fa4_mla_sparse_args *a, Config *c)
{
    config_init(c);
    c->kind = KIND_MLA_SPARSE;
    c->target = rt_target_of(ctx->opt.target);
    c->dtype = a->kv_dtype == FA4_E4M3 ? DT_E4M3 : DT_BF16; /* the kv dtype (q and out are bf16) */
    c->qk_depth = a->d_qk;
    c->ov_depth = MLA_DV;
    if (!a->config) return FA4_OK;
    Config want = *c;
    fa4_status s = rt_parse_config(ctx, a->config, c, "args->config");
    if (s) return s;
    if (c->kind != want.kind || c->target != want.target || c->dtype != want.dtype || c->qk_depth != want.qk_depth ||
        c->ov_depth != want.ov_depth)
        return BAD("args->config", "'%s' changes the kind, target, dtype or depths, which the arguments decide; give "
                   "only tuning keys (sm90a: bn stages rescale tma_store; sm100a: cta_group b_topk num_mbars q_tmem_depth "
                   "tma_store rescale)", a->config);
    return FA4_OK;
}

/* The kernel runs only on its own GPU generation; an sm100a kernel on another one names the
 * sm90a kernel, the one a Hopper runs. */
static fa4_status check_device(fa4_ctx *ctx, TargetId t)
{
    const Device *v = &ctx->device;
    if (target_is_sm100(t) && v->cc_major != 10)
        return rt_fail(ctx, FA4_ERR_UNSUPPORTED, "target: the %s sparse MLA kernel (tcgen05, TMA gather4) "
                       "runs only on a GPU of compute capability 10.x, but device %d is %d.%d; on a cc 9.0 GPU use "
                       "target sm90a (the sm_90a sparse MLA kernel); nothing was compiled or launched",
                       target_name[t], ctx->opt.device, v->cc_major, v->cc_minor);
    return rt_check_target(ctx, t);
}

static fa4_status get_kernel(fa4_ctx *ctx, Config *c, fa4_kernel **k)
{
    char key[320];
    config_canonical(c, key, sizeof key);
    uint64_t hash = rt_fnv1a(key, strlen(key), RT_FNV_SEED);
    *k = rt_kernel_lookup(ctx, key, hash);
    fa4_kernel_stats st = {0};
    return *k ? FA4_OK : rt_kernel_build(ctx, key, hash, c, NULL, k, &st, FA4_ERR_UNSUPPORTED);
}

static fa4_status bind(fa4_ctx *ctx, const Plan *p, const fa4_mla_sparse_args *a, RtLaunch *l)
{
    memset(l, 0, sizeof *l);
    if (p->heads_per_cta <= 0) return rt_fail(ctx, FA4_ERR_INTERNAL, "plan: heads_per_cta is %d", p->heads_per_cta);
    /* a tile is one cluster (the CTA pair: 2 x heads_per_cta heads of one token); the grid holds at most
     * 2^31 - 1 CTAs */
    int64_t cl = p->cluster[0] > 0 ? p->cluster[0] : 1, tile_heads = (int64_t)p->heads_per_cta * cl;
    int64_t head_blocks = ((int64_t)a->h_q + tile_heads - 1) / tile_heads * cl;
    if ((int64_t)a->s_q * head_blocks > INT32_MAX)
        return BAD("s_q", "%d x %lld blocks of %d heads (h_q %d) = %lld CTAs; the grid allows 2^31 - 1", a->s_q,
                   (long long)head_blocks, p->heads_per_cta, a->h_q, (long long)a->s_q * head_blocks);
    l->grid = (unsigned)((int64_t)a->s_q * head_blocks);
    float scale = a->sm_scale != 0.0f ? a->sm_scale : 1.0f / sqrtf((float)a->d_qk);
    const struct { ScalarId id; RtScalar v; } v[] = {
        {SCALAR_Q, {.u64 = (uint64_t)(uintptr_t)a->q}}, {SCALAR_KV, {.u64 = (uint64_t)(uintptr_t)a->kv}},
        {SCALAR_INDICES, {.u64 = (uint64_t)(uintptr_t)a->indices}}, {SCALAR_OUT, {.u64 = (uint64_t)(uintptr_t)a->out}},
        {SCALAR_LSE, {.u64 = (uint64_t)(uintptr_t)a->lse}},
        {SCALAR_MAX_LOGITS, {.u64 = (uint64_t)(uintptr_t)a->max_logits}},
        {SCALAR_SINK, {.u64 = (uint64_t)(uintptr_t)a->attn_sink}},
        {SCALAR_TOPK_LENGTH, {.u64 = (uint64_t)(uintptr_t)a->topk_length}},
        {SCALAR_Q_STRIDE_S, {.u64 = (uint64_t)a->q_stride[0]}}, {SCALAR_Q_STRIDE_H, {.u64 = (uint64_t)a->q_stride[1]}},
        {SCALAR_KV_STRIDE, {.u64 = (uint64_t)a->kv_stride}}, {SCALAR_IDX_STRIDE, {.u64 = (uint64_t)a->indices_stride}},
        {SCALAR_OUT_STRIDE_S, {.u64 = (uint64_t)a->out_stride[0]}},
        {SCALAR_OUT_STRIDE_H, {.u64 = (uint64_t)a->out_stride[1]}},
        {SCALAR_SEQLEN_Q, {.u32 = (uint32_t)a->s_q}}, {SCALAR_S_KV, {.u32 = (uint32_t)a->s_kv}},
        {SCALAR_HEADS_Q, {.u32 = (uint32_t)a->h_q}}, {SCALAR_TOPK, {.u32 = (uint32_t)a->topk}},
        {SCALAR_SCALE_LOG2, {.f32 = (float)((double)scale * 1.4426950408889634)}},
        {SCALAR_SM_SCALE, {.f32 = scale}}, {SCALAR_KV_SCALE, {.u64 = (uint64_t)(uintptr_t)a->kv_scale}},
        {SCALAR_KV_SCALE_BLOCKS, {.u32 = (uint32_t)(a->kv_scale_block ? a->d_qk / a->kv_scale_block : 1)}}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) l->scalars[v[i].id] = v[i].v, l->has_scalar[v[i].id] = 1;
    /* the tensors the plan's maps read: q and out as (depth, h_q, s_q), kv as (d_qk, s_kv) rows for gather4 */
    int kvb = a->kv_dtype == FA4_E4M3 ? 1 : MLA_BF16;
    for (int i = 0; i < p->n_maps; i++) {
        TensorId t = p->maps[i].tensor;
        if (t == TENSOR_Q)
            l->tensors[t] = (RtTensor){"q", a->q, MLA_BF16, 3, {(uint64_t)a->d_qk, (uint64_t)a->h_q, (uint64_t)a->s_q},
                                       {(uint64_t)a->q_stride[1] * MLA_BF16, (uint64_t)a->q_stride[0] * MLA_BF16}};
        else if (t == TENSOR_K)
            l->tensors[t] = (RtTensor){"kv", a->kv, kvb, 2, {(uint64_t)a->d_qk, (uint64_t)a->s_kv},
                                       {(uint64_t)a->kv_stride * (uint64_t)kvb}};
        else if (t == TENSOR_O)
            l->tensors[t] = (RtTensor){"out", a->out, MLA_BF16, 3, {MLA_DV, (uint64_t)a->h_q, (uint64_t)a->s_q},
                                       {(uint64_t)a->out_stride[1] * MLA_BF16, (uint64_t)a->out_stride[0] * MLA_BF16}};
        else
            return rt_fail(ctx, FA4_ERR_INTERNAL, "plan %s: map '%s' reads tensor %s, which sparse MLA does not have",
                           p->canonical, p->maps[i].name, tensor_name[t]);
    }
    return FA4_OK;
}

/* Once the arguments and the config are settled (the context is current): the driver's word on every
 * buffer (buffers.c), then the kernel and its launch. */
static fa4_status run(fa4_ctx *ctx, const fa4_mla_sparse_args *a, Config *c, CUstream stream)
{
    RtBuffer b[N_BUFS];
    buffers(a, b);
    fa4_kernel *k;
    RtLaunch l;
    fa4_status s;
    if ((s = rt_check_buffers(ctx, b, N_BUFS)) || (s = get_kernel(ctx, c, &k)) || (s = bind(ctx, &k->plan, a, &l)))
        return s;
    return rt_launch(ctx, k, &l, stream);
}

fa4_status fa4_mla_sparse_fwd(fa4_ctx *ctx, const fa4_mla_sparse_args *args, void *stream)
{
    if (!ctx) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "ctx: NULL");
    fa4_mla_sparse_args a;
    Config c;
    fa4_status s;
    if ((s = read_args(ctx, args, &a)) || (s = args_config(ctx, &a, &c))) return s;
    /* AUTO: the device's target decides the kernel (sm90a on cc 9.x, sm100a on cc 10.x) */
    /* (without a driver the arguments are still checked first; the driver's absence is reported below) */
    if (ctx->opt.target == FA4_TARGET_AUTO && rt_driver(ctx) == FA4_OK) {
        if ((s = rt_device_target(ctx, &c.target))) return s;
        if (a.config && (s = rt_parse_config(ctx, a.config, &c, "args->config"))) return s;
    }
    /* sm100a: h_q a multiple of 128 takes the head-128 kernel (a CTA pair per token), others and fp8 kv
     * the head-64 one, unless the caller's config chose */
    if (target_is_sm100(c.target) && !c.cta_group) c.cta_group = a.h_q % 128 == 0 && a.kv_dtype != FA4_E4M3 ? 2 : 1;
    /* the block of top-k positions is the plan's; ask the generator before anything runs */
    Config filled = c;
    char err[512];
    if (config_fill_defaults(&filled, err, sizeof err) || config_check(&filled, err, sizeof err))
        return rt_fail(ctx, FA4_ERR_UNSUPPORTED, "config: %s", err);
    if ((s = check_shape(ctx, &a, target_is_sm100(filled.target) ? filled.b_topk : filled.bn)) ||
        (s = check_layout(ctx, &a)) || (s = pick_o_store(ctx, &a, &c)))
        return s;
    if ((s = rt_driver(ctx))) return s;
    if ((s = check_device(ctx, c.target))) return s;
    int pushed;
    if ((s = rt_ctx_enter(ctx, &pushed))) return s;
    s = run(ctx, &a, &c, (CUstream)stream);
    rt_ctx_leave(ctx, pushed);
    return s;
}
