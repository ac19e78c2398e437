/* mha.c - fa4_mha_fwd: validate, pick the config, get the kernel, encode the
 * tensor maps, launch.
 *
 * Guarantees: every check on the caller's arguments runs before the driver is
 * opened, so a bad argument is FA4_ERR_INVALID_ARGUMENT (naming it) on any
 * machine, with or without a GPU; nothing is launched unless every check,
 * including the tensor-map encodes, has passed. The launch ABI (parameter
 * order, grid, block, smem, cluster) follows the plan and is described at
 * launch() below.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

#define BAD(what, ...) rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, what ": " __VA_ARGS__)

static const int arg_dtype_bytes[] = {[FA4_BF16] = 2, [FA4_FP16] = 2, [FA4_E4M3] = 1};

/* One tensor as the kernel sees it: base, element strides (batch, seq, head). */
typedef struct { const char *name; const void *ptr; int64_t stride[3]; int batch, seqlen, heads, depth; } TensorArg;

/* Element strides with 0 replaced by the packed [batch, seqlen, heads, depth] layout. */
static void packed_strides(const int64_t in[3], int seqlen, int heads, int depth, int64_t out[3])
{
    const int64_t def[3] = {(int64_t)seqlen * heads * depth, (int64_t)heads * depth, depth};
    for (int i = 0; i < 3; i++) out[i] = in[i] ? in[i] : def[i];
}

static void tensors(const fa4_mha_args *a, TensorArg t[4])
{
    const int64_t *st[4] = {a->q_stride, a->k_stride, a->v_stride, a->o_stride};
    const void *ptr[4] = {a->q, a->k, a->v, a->o};
    static const char *const names[4] = {"q", "k", "v", "o"};
    for (int i = 0; i < 4; i++) {
        int kv = i == 1 || i == 2;
        t[i].name = names[i];
        t[i].ptr = ptr[i];
        t[i].batch = a->batch;
        t[i].seqlen = kv ? a->seqlen_k : a->seqlen_q;
        t[i].heads = kv ? a->heads_kv : a->heads_q;
        t[i].depth = i < 2 ? a->qk_depth : a->ov_depth;
        packed_strides(st[i], t[i].seqlen, t[i].heads, t[i].depth, t[i].stride);
    }
}

/* ---------------------------------------------------------------- checks */

static fa4_status read_args(fa4_ctx *ctx, const fa4_mha_args *in, fa4_mha_args *a)
{
    const fa4_mha_args def = FA4_MHA_ARGS_INIT;
    const size_t min = offsetof(fa4_mha_args, o_stride) + sizeof in->o_stride;
    *a = def;
    if (!in) return BAD("args", "NULL");
    if (in->size < min)
        return BAD("args->size", "%zu is smaller than the %zu bytes this library needs; set it to "
                   "sizeof(fa4_mha_args) (FA4_MHA_ARGS_INIT does)", in->size, min);
    memcpy(a, in, in->size < sizeof *a ? in->size : sizeof *a);
    return FA4_OK;
}

static fa4_status check_shape(fa4_ctx *ctx, const fa4_mha_args *a)
{
    if ((unsigned)a->dtype > FA4_E4M3) return BAD("dtype", "%d is not a fa4_dtype", (int)a->dtype);
    if (!a->q) return BAD("q", "NULL");
    if (!a->k) return BAD("k", "NULL");
    if (!a->v) return BAD("v", "NULL");
    if (!a->o) return BAD("o", "NULL");
    const int dims[5] = {a->batch, a->seqlen_q, a->seqlen_k, a->heads_q, a->heads_kv};
    static const char *const dim_names[5] = {"batch", "seqlen_q", "seqlen_k", "heads_q", "heads_kv"};
    for (int i = 0; i < 5; i++)
        if (dims[i] <= 0) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %d; must be > 0", dim_names[i], dims[i]);
    if (a->heads_q % a->heads_kv)
        return BAD("heads_kv", "%d does not divide heads_q = %d (the group, query heads per KV head, must be whole)",
                   a->heads_kv, a->heads_q);
    const int depth[2] = {a->qk_depth, a->ov_depth};
    for (int i = 0; i < 2; i++)
        if (depth[i] <= 0 || depth[i] % 16 || depth[i] > 1024)
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: %d; use a multiple of 16 up to 1024",
                           i ? "ov_depth" : "qk_depth", depth[i]);
    return FA4_OK;
}

/* TMA wants 16-byte aligned bases and 16-byte multiple strides below 2^40. */
static fa4_status check_layout(fa4_ctx *ctx, const fa4_mha_args *a)
{
    static const char *const axis[3] = {"batch", "seq", "head"};
    const int64_t *given[4] = {a->q_stride, a->k_stride, a->v_stride, a->o_stride};
    TensorArg t[4];
    tensors(a, t);
    int eb = arg_dtype_bytes[a->dtype];
    for (int i = 0; i < 4; i++) {
        if ((uintptr_t)t[i].ptr % 16)
            return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s: address %p is not 16-byte aligned (TMA needs it)",
                           t[i].name, t[i].ptr);
        for (int d = 0; d < 3; d++) {
            if (given[i][d] < 0)
                return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s_stride[%d] (%s): %lld; strides must be positive "
                               "(0 selects the packed layout)", t[i].name, d, axis[d], (long long)given[i][d]);
            int64_t bytes = t[i].stride[d] * eb;
            if (bytes % 16 || bytes >= ((int64_t)1 << 40))
                return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "%s_stride[%d] (%s): %lld elements = %lld bytes; TMA "
                               "needs a multiple of 16 bytes below 2^40", t[i].name, d, axis[d],
                               (long long)t[i].stride[d], (long long)bytes);
        }
    }
    if ((uintptr_t)a->lse % 4) return BAD("lse", "address %p is not 4-byte aligned", (void *)a->lse);
    return FA4_OK;
}

static fa4_status check_math(fa4_ctx *ctx, const fa4_mha_args *a)
{
    if (!isfinite(a->softmax_scale)) return BAD("softmax_scale", "%g is not finite", (double)a->softmax_scale);
    if ((unsigned)a->mask > FA4_MASK_WINDOW) return BAD("mask", "%d is not a fa4_mask", (int)a->mask);
    if (a->mask == FA4_MASK_WINDOW) {
        if (a->window_left < -1) return BAD("window_left", "%d; use >= 0, or -1 for unbounded", a->window_left);
        if (a->window_right < -1) return BAD("window_right", "%d; use >= 0, or -1 for unbounded", a->window_right);
    }
    return FA4_OK;
}

/* ---------------------------------------------------------------- config */

/* The config for a (target from the context, or placeholder sm90a for AUTO),
 * with args->config overrides, which may tune the kernel but not change
 * what it computes. */
/* The part of the tuning table that depends on the shape, not only on the
 * config (the plan's defaults cover depth, dtype and mask). Measured on an
 * H100 (bench/NOTES.md): short causal sequences have tiles of a few KV blocks,
 * so the persistent loop, where the next tile's Q and K/V load under this
 * tile's epilogue, beats one CTA per tile. Fills only what args->config left unset. */
static void shape_heuristics(Config *c, const fa4_mha_args *a)
{
    if (c->target != TARGET_SM90A || c->mask != MASK_CAUSAL || a->seqlen_k > 2048) return;
    if (c->persistent < 0) c->persistent = 1; /* with 2 stages the plan double-buffers Q too */
}

static fa4_status args_config(fa4_ctx *ctx, const fa4_mha_args *a, Config *c)
{
    static const DType dt[] = {[FA4_BF16] = DT_BF16, [FA4_FP16] = DT_FP16, [FA4_E4M3] = DT_E4M3};
    static const MaskKind mk[] = {[FA4_MASK_NONE] = MASK_NONE, [FA4_MASK_CAUSAL] = MASK_CAUSAL,
                                  [FA4_MASK_WINDOW] = MASK_WINDOW};
    config_init(c);
    c->kind = KIND_MHA;
    c->target = ctx->opt.target == FA4_TARGET_SM100A ? TARGET_SM100A : TARGET_SM90A;
    c->dtype = dt[a->dtype];
    c->qk_depth = a->qk_depth;
    c->ov_depth = a->ov_depth;
    c->group = a->heads_q / a->heads_kv;
    c->mask = mk[a->mask];
    if (c->mask == MASK_WINDOW) {
        c->window_left = a->window_left;
        c->window_right = a->window_right;
    }
    if (!a->config) {
        shape_heuristics(c, a);
        return FA4_OK;
    }
    Config want = *c;
    fa4_status s = rt_parse_config(ctx, a->config, c, "args->config");
    if (s) return s;
    const char *changed = c->kind != want.kind ? "kind"
                          : c->target != want.target ? "target (set it in fa4_options)"
                          : c->dtype != want.dtype ? "dtype"
                          : c->qk_depth != want.qk_depth || c->ov_depth != want.ov_depth ? "depth"
                          : c->group != want.group ? "group (heads_q / heads_kv)"
                          : c->mask != want.mask || c->window_left != want.window_left ||
                                    c->window_right != want.window_right
                              ? "mask"
                              : NULL;
    if (changed)
        return BAD("args->config", "'%s' changes %s, which the arguments decide; give only tuning keys "
                   "(bm bn stages swizzle pingpong persistent qtiles cta rescale poly)", a->config, changed);
    shape_heuristics(c, a);
    return FA4_OK;
}

/* Every check that needs no driver, then the config. */
static fa4_status prepare(fa4_ctx *ctx, const fa4_mha_args *in, fa4_mha_args *a, Config *c)
{
    fa4_status s;
    if ((s = read_args(ctx, in, a)) || (s = check_shape(ctx, a)) || (s = check_layout(ctx, a)) ||
        (s = check_math(ctx, a)))
        return s;
    return args_config(ctx, a, c);
}

/* Resolve AUTO from the device; an explicit target needs no driver here. */
static fa4_status resolve_target(fa4_ctx *ctx, Config *c)
{
    if (ctx->opt.target != FA4_TARGET_AUTO) return FA4_OK;
    fa4_status s = rt_driver(ctx);
    if (s) return s;
    return rt_device_target(ctx, &c->target);
}

fa4_status fa4_mha_config(fa4_ctx *ctx, const fa4_mha_args *args, char *buf, size_t n)
{
    if (!ctx) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "ctx: NULL");
    if (!buf || !n) return BAD("buf", "NULL or n == 0");
    buf[0] = 0;
    fa4_mha_args a;
    Config c;
    fa4_status s = prepare(ctx, args, &a, &c);
    if (s || (s = resolve_target(ctx, &c))) return s;
    Plan *p = malloc(sizeof *p);
    if (!p) return rt_fail(ctx, FA4_ERR_OUT_OF_MEMORY, "plan: out of memory");
    char err[512];
    if (plan_make(&c, p, err, sizeof err)) s = rt_fail(ctx, FA4_ERR_UNSUPPORTED, "config: %s", err);
    else if (strlen(p->canonical) >= n) s = BAD("n", "%zu is too small for the config text (%zu bytes)", n,
                                                 strlen(p->canonical) + 1);
    else strcpy(buf, p->canonical);
    free(p);
    return s;
}

/* ---------------------------------------------------------------- tensor maps */

static fa4_status encode_map(fa4_ctx *ctx, const MapSpec *m, const TensorArg *t, CUtensorMap *out)
{
    static const CUtensorMapDataType cu_dtype[DT_COUNT] = {
        [DT_BF16] = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, [DT_FP16] = CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        [DT_E4M3] = CU_TENSOR_MAP_DATA_TYPE_UINT8}; /* TMA moves e4m3 as bytes */
    CUtensorMapSwizzle sw = m->swizzle == 128 ? CU_TENSOR_MAP_SWIZZLE_128B
                            : m->swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                            : m->swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                               : CU_TENSOR_MAP_SWIZZLE_NONE;
    if ((int)m->depth != t->depth)
        return rt_fail(ctx, FA4_ERR_INTERNAL, "tensor map %s: plan depth %u differs from %s's depth %d", m->name,
                       m->depth, t->name, t->depth);
    int64_t eb = dtype_bytes[m->dtype];
    cuuint64_t dims[4] = {m->depth, (cuuint64_t)t->seqlen, (cuuint64_t)t->heads, (cuuint64_t)t->batch};
    /* Global strides of dims 1..3 in bytes: seq, head, batch. */
    cuuint64_t strides[3] = {(cuuint64_t)(t->stride[1] * eb), (cuuint64_t)(t->stride[2] * eb),
                             (cuuint64_t)(t->stride[0] * eb)};
    cuuint32_t box[4] = {m->box[0], m->box[1], m->box[2], m->box[3]};
    cuuint32_t elem[4] = {1, 1, 1, 1};
    memset(out, 0, sizeof *out);
    CUresult r = ctx->drv.TensorMapEncodeTiled(out, cu_dtype[m->dtype], 4, (void *)t->ptr, dims, strides, box, elem,
                                               CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r)
        return rt_fail(ctx, FA4_ERR_CUDA,
                       "%s: cuTensorMapEncodeTiled for map '%s' failed: %s (dims %llu,%llu,%llu,%llu; byte strides "
                       "%llu,%llu,%llu; box %u,%u,%u,%u; swizzle %d)", t->name, m->name, rt_cu_name(ctx, r),
                       (unsigned long long)dims[0], (unsigned long long)dims[1], (unsigned long long)dims[2],
                       (unsigned long long)dims[3], (unsigned long long)strides[0], (unsigned long long)strides[1],
                       (unsigned long long)strides[2], box[0], box[1], box[2], box[3], m->swizzle);
    return FA4_OK;
}

static fa4_status encode_maps(fa4_ctx *ctx, const Plan *p, const fa4_mha_args *a, CUtensorMap *maps)
{
    static const int which[TENSOR_COUNT] = {[TENSOR_Q] = 0, [TENSOR_K] = 1, [TENSOR_V] = 2, [TENSOR_O] = 3,
                                            [TENSOR_K_ROPE] = -1};
    if (!ctx->drv.TensorMapEncodeTiled)
        return rt_fail(ctx, FA4_ERR_NO_DRIVER, "driver: cuTensorMapEncodeTiled is missing; TMA needs a CUDA 12 driver");
    TensorArg t[4];
    tensors(a, t);
    for (int i = 0; i < p->n_maps; i++) {
        const MapSpec *m = &p->maps[i];
        if ((unsigned)m->tensor >= TENSOR_COUNT || which[m->tensor] < 0)
            return rt_fail(ctx, FA4_ERR_INTERNAL, "plan map '%s' names tensor %d, which mha does not have", m->name,
                           (int)m->tensor);
        fa4_status s = encode_map(ctx, m, &t[which[m->tensor]], &maps[i]);
        if (s) return s;
    }
    return FA4_OK;
}

/* ---------------------------------------------------------------- launch */

/* Launch ABI (both targets): params are the plan's tensor maps in order
 * (CUtensorMap, .param .align 128), then u64 lse (0 if none), u32 seqlen_q,
 * u32 seqlen_k, u32 heads_q, u32 batch, f32 scale_log2, f32 o_scale. The grid
 * covers ceil(seqlen_q / rows_per_cta) * heads_q * batch tiles, one CTA each,
 * or min(tiles, SMs) CTAs for a persistent kernel, rounded to whole clusters
 * (kernels skip tiles past the end). */
typedef struct {
    uint64_t lse;
    uint32_t seqlen_q, seqlen_k, heads_q, batch;
    float scale_log2, o_scale;
} LaunchScalars;

static fa4_status grid_size(fa4_ctx *ctx, const Plan *p, const fa4_mha_args *a, unsigned *grid)
{
    int cx = p->cluster[0] > 0 ? p->cluster[0] : 1;
    if (p->rows_per_cta <= 0) return rt_fail(ctx, FA4_ERR_INTERNAL, "plan: rows_per_cta is %d", p->rows_per_cta);
    uint64_t tiles = (uint64_t)((a->seqlen_q + p->rows_per_cta - 1) / p->rows_per_cta) * (uint64_t)a->heads_q *
                     (uint64_t)a->batch;
    if (p->persistent && tiles > (uint64_t)ctx->device.sm_count) tiles = (uint64_t)ctx->device.sm_count / cx * cx;
    tiles = (tiles + cx - 1) / cx * cx;
    if (tiles == 0 || tiles > 0x7fffffffu)
        return BAD("seqlen_q", "%d x heads_q %d x batch %d needs %llu CTAs; the grid allows 2^31 - 1", a->seqlen_q,
                   a->heads_q, a->batch, (unsigned long long)tiles);
    *grid = (unsigned)tiles;
    return FA4_OK;
}

static fa4_status launch(fa4_ctx *ctx, const fa4_kernel *k, const fa4_mha_args *a, float scale, CUstream stream)
{
    const Plan *p = &k->plan;
    CUtensorMap maps[PLAN_MAX_MAPS];
    void *params[PLAN_MAX_MAPS + 7];
    unsigned grid = 0;
    fa4_status s = grid_size(ctx, p, a, &grid);
    if (s || (s = encode_maps(ctx, p, a, maps))) return s;
    LaunchScalars v = {(uint64_t)(uintptr_t)a->lse, (uint32_t)a->seqlen_q, (uint32_t)a->seqlen_k,
                       (uint32_t)a->heads_q, (uint32_t)a->batch, scale * 1.4426950408889634f, 1.0f};
    int np = 0;
    for (int i = 0; i < p->n_maps; i++) params[np++] = &maps[i];
    void *scalars[7] = {&v.lse, &v.seqlen_q, &v.seqlen_k, &v.heads_q, &v.batch, &v.scale_log2, &v.o_scale};
    for (int i = 0; i < 7; i++) params[np++] = scalars[i];
    const int *cl = p->cluster;
    int cluster = (cl[0] > 0 ? cl[0] : 1) * (cl[1] > 0 ? cl[1] : 1) * (cl[2] > 0 ? cl[2] : 1);
    CUresult r;
    const char *what;
    if (cluster > 1) {
        if (!ctx->drv.LaunchKernelEx)
            return rt_fail(ctx, FA4_ERR_NO_DRIVER, "driver: cuLaunchKernelEx is missing; clusters need a CUDA 12 driver");
        CUlaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr.value.clusterDim.x = (unsigned)cl[0];
        attr.value.clusterDim.y = (unsigned)(cl[1] > 0 ? cl[1] : 1);
        attr.value.clusterDim.z = (unsigned)(cl[2] > 0 ? cl[2] : 1);
        CUlaunchConfig lc = {grid, 1, 1, (unsigned)p->threads, 1, 1, p->smem_launch, stream, &attr, 1};
        what = "cuLaunchKernelEx";
        r = ctx->drv.LaunchKernelEx(&lc, k->fn, params, NULL);
    } else {
        what = "cuLaunchKernel";
        r = ctx->drv.LaunchKernel(k->fn, grid, 1, 1, (unsigned)p->threads, 1, 1, p->smem_launch, stream, params,
                                  NULL);
    }
    if (r)
        return rt_fail(ctx, FA4_ERR_CUDA, "launch %s: %s(grid %u, block %d, smem %u, cluster %d) failed: %s",
                       p->symbol, what, grid, p->threads, p->smem_launch, cluster, rt_cu_name(ctx, r));
    return FA4_OK;
}

fa4_status fa4_mha_fwd(fa4_ctx *ctx, const fa4_mha_args *args, void *stream)
{
    if (!ctx) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "ctx: NULL");
    fa4_mha_args a;
    Config c;
    fa4_status s = prepare(ctx, args, &a, &c);
    if (s) return s;
    /* Only now the driver: everything above is the caller's arguments. */
    if ((s = rt_driver(ctx)) || (s = resolve_target(ctx, &c)) || (s = rt_check_target(ctx, c.target))) return s;
    char key[320];
    config_canonical(&c, key, sizeof key);
    uint64_t hash = rt_fnv1a(key, strlen(key), RT_FNV_SEED);
    fa4_kernel *k = rt_kernel_lookup(ctx, key, hash);
    fa4_kernel_stats st = {0};
    if (!k && (s = rt_kernel_build(ctx, key, hash, &c, &k, &st, FA4_ERR_UNSUPPORTED))) return s;
    float scale = a.softmax_scale != 0.0f ? a.softmax_scale : 1.0f / sqrtf((float)a.qk_depth);
    int pushed;
    if ((s = rt_ctx_enter(ctx, &pushed))) return s;
    s = launch(ctx, k, &a, scale, (CUstream)stream);
    rt_ctx_leave(ctx, pushed);
    return s;
}
