/* launch.c - one launch path for every kernel family: tensor maps encoded from
 * the plan's map specs, kernel arguments packed in the order of the plan's
 * parameter list (the same list the generator wrote the entry's .param lines
 * from, gen/kernel.c), and the (cluster) launch.
 *
 * A family's operator (mha.c) validates its arguments, describes its tensors
 * as RtTensor and its scalars by ScalarId, sizes the grid, and calls
 * rt_launch. It never packs a parameter itself, so the two sides of the ABI
 * cannot drift apart.
 */
#include <stdio.h>
#include <string.h>

#include "rt_internal.h"

static CUtensorMapSwizzle cu_swizzle(int bytes)
{
    return bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
         : bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B : CU_TENSOR_MAP_SWIZZLE_NONE;
}

/* One map of the plan over one tensor. The map's dtype is the plan's (e4m3
 * kernels store bf16 O) and must have the element size the strides were
 * checked with; its depth must be the tensor's. */
static fa4_status encode_map(fa4_ctx *ctx, const MapSpec *m, const RtTensor *t, CUtensorMap *out)
{
    static const CUtensorMapDataType cu_dtype[DT_COUNT] = {
        [DT_BF16] = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, [DT_FP16] = CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        [DT_E4M3] = CU_TENSOR_MAP_DATA_TYPE_UINT8}; /* TMA moves e4m3 as bytes */
    if (m->depth != t->dims[0])
        return rt_fail(ctx, FA4_ERR_INTERNAL, "tensor map %s: plan depth %u differs from %s's depth %llu", m->name,
                       m->depth, t->name, (unsigned long long)t->dims[0]);
    int eb = dtype_bytes[m->dtype];
    if (eb != t->elem_bytes)
        return rt_fail(ctx, FA4_ERR_INTERNAL, "tensor map %s: plan dtype %s (%d B) differs from the %d-byte elements "
                       "of %s the arguments were checked with", m->name, dtype_name[m->dtype], eb, t->elem_bytes,
                       t->name);
    if (m->rank < 1 || m->rank > t->rank || (m->mode == MAP_GATHER4 && m->rank != 2))
        return rt_fail(ctx, FA4_ERR_INTERNAL, "tensor map %s: rank %u (%s) does not fit %s of rank %u", m->name,
                       m->rank, m->mode == MAP_GATHER4 ? "gather4" : "tiled", t->name, t->rank);
    cuuint64_t dims[5];
    cuuint64_t strides[4];
    cuuint32_t box[5], elem[5] = {1, 1, 1, 1, 1};
    for (uint32_t i = 0; i < m->rank; i++) {
        dims[i] = t->dims[i];
        box[i] = m->box[i < 4 ? i : 3];
        if (i) strides[i - 1] = t->byte_strides[i - 1];
    }
    if (m->mode == MAP_GATHER4) box[1] = 1; /* four rows are gathered per copy */
    memset(out, 0, sizeof *out);
    CUresult r = ctx->drv.TensorMapEncodeTiled(out, cu_dtype[m->dtype], m->rank, (void *)t->ptr, dims, strides, box,
                                               elem, CU_TENSOR_MAP_INTERLEAVE_NONE, cu_swizzle(m->swizzle),
                                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r) {
        char d[160] = "", b[96] = "";
        for (uint32_t i = 0; i < m->rank; i++) {
            snprintf(d + strlen(d), sizeof d - strlen(d), "%s%llu", i ? "," : "", (unsigned long long)dims[i]);
            snprintf(b + strlen(b), sizeof b - strlen(b), "%s%u", i ? "," : "", box[i]);
        }
        char s[96] = "";
        for (uint32_t i = 1; i < m->rank; i++)
            snprintf(s + strlen(s), sizeof s - strlen(s), "%s%llu", i > 1 ? "," : "", (unsigned long long)strides[i - 1]);
        return rt_fail(ctx, FA4_ERR_CUDA, "%s: cuTensorMapEncodeTiled for map '%s' failed: %s (dims %s; byte strides "
                       "%s; box %s; swizzle %d)", t->name, m->name, rt_cu_name(ctx, r), d, s, b, m->swizzle);
    }
    return FA4_OK;
}

/* Every map the plan names gets its tensor, and every tensor the caller gave
 * is read by some map (a k_rope the kernel ignored would be a wrong answer). */
static fa4_status encode_maps(fa4_ctx *ctx, const Plan *p, const RtLaunch *l, CUtensorMap *maps)
{
    if (!ctx->drv.TensorMapEncodeTiled)
        return rt_fail(ctx, FA4_ERR_NO_DRIVER, "driver: cuTensorMapEncodeTiled is missing; TMA needs a CUDA 12 driver");
    int used[TENSOR_COUNT] = {0};
    for (int i = 0; i < p->n_maps; i++) {
        const MapSpec *m = &p->maps[i];
        if ((unsigned)m->tensor >= TENSOR_COUNT || !l->tensors[m->tensor].ptr)
            return rt_fail(ctx, FA4_ERR_INTERNAL, "plan map '%s' names tensor %s, which this call does not have",
                           m->name, (unsigned)m->tensor < TENSOR_COUNT ? tensor_name[m->tensor] : "(unknown)");
        used[m->tensor] = 1;
        fa4_status s = encode_map(ctx, m, &l->tensors[m->tensor], &maps[i]);
        if (s) return s;
    }
    for (int i = 0; i < TENSOR_COUNT; i++)
        if (l->tensors[i].ptr && !used[i])
            return rt_fail(ctx, FA4_ERR_INTERNAL, "plan %s has no tensor map for %s", p->canonical,
                           l->tensors[i].name);
    return FA4_OK;
}

/* mc holds maps encoded over the call's tensor bases (the caller vouches for the rest of the maps' inputs). */
static int cache_holds(const RtMapCache *mc, const RtLaunch *l)
{
    if (!mc || !mc->valid) return 0;
    for (int i = 0; i < TENSOR_COUNT; i++)
        if (mc->ptr[i] != l->tensors[i].ptr) return 0;
    return 1;
}

fa4_status rt_launch(fa4_ctx *ctx, const fa4_kernel *k, const RtLaunch *l, CUstream stream)
{
    return rt_launch_cached(ctx, k, l, stream, NULL);
}

fa4_status rt_launch_cached(fa4_ctx *ctx, const fa4_kernel *k, const RtLaunch *l, CUstream stream, RtMapCache *mc)
{
    const Plan *p = &k->plan;
    CUtensorMap own[PLAN_MAX_MAPS];
    CUtensorMap *maps = own;
    void *params[PLAN_MAX_PARAMS];
    if (cache_holds(mc, l)) {
        maps = mc->maps; /* cuTensorMapEncodeTiled is pure host work: the same inputs give the same map */
    } else {
        fa4_status s = encode_maps(ctx, p, l, own);
        if (s) return s;
        if (mc) {
            memcpy(mc->maps, own, sizeof(CUtensorMap) * (size_t)p->n_maps);
            for (int i = 0; i < TENSOR_COUNT; i++) mc->ptr[i] = l->tensors[i].ptr;
            mc->valid = 1;
        }
    }
    for (int i = 0; i < p->n_params; i++) {
        const ParamSpec *q = &p->params[i];
        if (q->type == PARAM_TMAP) {
            params[i] = &maps[q->index];
            continue;
        }
        if ((unsigned)q->index >= SCALAR_COUNT || !l->has_scalar[q->index])
            return rt_fail(ctx, FA4_ERR_INTERNAL, "kernel parameter p_%s of %s has no value in this call", q->name,
                           p->symbol);
        const RtScalar *v = &l->scalars[q->index];
        params[i] = q->type == PARAM_U64 ? (void *)&v->u64 : q->type == PARAM_U32 ? (void *)&v->u32 : (void *)&v->f32;
    }
    const int *cl = p->cluster;
    unsigned cdim[3] = {(unsigned)(cl[0] > 0 ? cl[0] : 1), (unsigned)(cl[1] > 0 ? cl[1] : 1),
                        (unsigned)(cl[2] > 0 ? cl[2] : 1)};
    unsigned cluster = cdim[0] * cdim[1] * cdim[2];
    CUresult r;
    const char *what;
    /* attributes: the cluster shape; programmatic stream serialization for a kernel that waits on
     * griddepcontrol (plan pdl_dependent), so its launch overlaps the previous kernel's tail. Without
     * cuLaunchKernelEx a dependent launches plainly: its wait then returns at once, stream order holds. */
    CUlaunchAttribute attr[2];
    unsigned n_attr = 0;
    memset(attr, 0, sizeof attr);
    if (cluster > 1) {
        attr[n_attr].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr[n_attr].value.clusterDim.x = cdim[0];
        attr[n_attr].value.clusterDim.y = cdim[1];
        attr[n_attr++].value.clusterDim.z = cdim[2];
    }
    if (p->pdl_dependent && ctx->drv.LaunchKernelEx) {
        attr[n_attr].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr[n_attr++].value.programmaticStreamSerializationAllowed = 1;
    }
    if (n_attr) {
        if (!ctx->drv.LaunchKernelEx)
            return rt_fail(ctx, FA4_ERR_NO_DRIVER, "driver: cuLaunchKernelEx is missing; clusters need a CUDA 12 driver");
        CUlaunchConfig lc = {l->grid, 1, 1, (unsigned)p->threads, 1, 1, p->smem_launch, stream, attr, n_attr};
        what = "cuLaunchKernelEx";
        r = ctx->drv.LaunchKernelEx(&lc, k->fn, params, NULL);
    } else {
        what = "cuLaunchKernel";
        r = ctx->drv.LaunchKernel(k->fn, l->grid, 1, 1, (unsigned)p->threads, 1, 1, p->smem_launch, stream, params,
                                  NULL);
    }
    if (r)
        return rt_fail(ctx, FA4_ERR_CUDA, "launch %s: %s(grid %u, block %d, smem %u, cluster %u) failed: %s",
                       p->symbol, what, l->grid, p->threads, p->smem_launch, cluster, rt_cu_name(ctx, r));
    return FA4_OK;
}
