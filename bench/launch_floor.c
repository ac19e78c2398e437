/* launch_floor.c - the floor under a libfa4rt call's host time: the same kernel launches, bare (issue 27 item 4).
 *
 * lf_begin(ctx) wraps the context's driver launch entry points (ctx->drv.LaunchKernel, LaunchKernelEx: the ones
 * runtime/launch.c calls) so that every launch the context makes is recorded -- function, grid, block, shared
 * memory, attributes and a copy of every parameter's bytes (sizes from the kernel's plan) -- and still launched;
 * lf_end(ctx) puts the entry points back and returns how many launches it holds. lf_replay(stream) then launches
 * the recorded kernels again on stream through the same driver entry point with the same arguments: nothing of
 * libfa4rt runs, so its time per call is the driver's own floor for that work. bench/host_cost.c links it;
 * bench/host_cost.py loads it as build/bench/liblaunchfloor.so (ctypes: the same ctypes call cost as its
 * fa4_mha_fwd line). A bench tool: it reads libfa4rt's private context (rt_internal.h) of the same build, keeps
 * its recording in file-scope state, and is not thread-safe. */
#include <stdio.h>
#include <string.h>

#include "launch_floor.h"
#include "rt_internal.h"

enum { LF_MAX = 8, LF_PARAM_BYTES = 8192, LF_MAX_ATTR = 4 };

typedef struct {
    int ex; /* 1: cuLaunchKernelEx, 0: cuLaunchKernel */
    CUfunction fn;
    unsigned grid[3], block[3], smem;
    CUlaunchAttribute attr[LF_MAX_ATTR];
    unsigned n_attr;
    _Alignas(64) unsigned char bytes[LF_PARAM_BYTES]; /* the parameters' values, each at its own aligned offset */
    void *params[PLAN_MAX_PARAMS];
} LfLaunch;

static LfLaunch rec[LF_MAX];
static int n_rec, failed;
static fa4_ctx *hooked;
static CUresult (*real_launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               CUstream, void **, void **);
static CUresult (*real_launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);

/* The plan of the context's kernel whose function is fn (the memory cache holds every kernel it launched). */
static const Plan *plan_of(CUfunction fn)
{
    const KernelMap *m = &hooked->kernels;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slot[i].k && m->slot[i].k->fn == fn) return &m->slot[i].k->plan;
    return NULL;
}

/* Copies the values params[] points at into r (sizes from the plan's parameter list). */
static void keep_params(LfLaunch *r, CUfunction fn, void **params)
{
    const Plan *p = plan_of(fn);
    if (!p) {
        failed = 1;
        return;
    }
    size_t off = 0;
    for (int i = 0; i < p->n_params; i++) {
        size_t size = p->params[i].type == PARAM_TMAP ? sizeof(CUtensorMap) : p->params[i].type == PARAM_U64 ? 8 : 4;
        size_t align = p->params[i].type == PARAM_TMAP ? 64 : size;
        off = (off + align - 1) / align * align;
        if (off + size > LF_PARAM_BYTES) {
            failed = 1;
            return;
        }
        memcpy(r->bytes + off, params[i], size);
        r->params[i] = r->bytes + off;
        off += size;
    }
}

static CUresult rec_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                           unsigned smem, CUstream s, void **params, void **extra)
{
    if (n_rec < LF_MAX) {
        LfLaunch *r = &rec[n_rec++];
        memset(r, 0, sizeof *r);
        r->fn = f, r->smem = smem;
        r->grid[0] = gx, r->grid[1] = gy, r->grid[2] = gz, r->block[0] = bx, r->block[1] = by, r->block[2] = bz;
        keep_params(r, f, params);
    } else {
        failed = 1;
    }
    return real_launch(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}

static CUresult rec_launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    if (n_rec < LF_MAX && c->numAttrs <= LF_MAX_ATTR) {
        LfLaunch *r = &rec[n_rec++];
        memset(r, 0, sizeof *r);
        r->ex = 1, r->fn = f, r->smem = c->sharedMemBytes, r->n_attr = c->numAttrs;
        r->grid[0] = c->gridDimX, r->grid[1] = c->gridDimY, r->grid[2] = c->gridDimZ;
        r->block[0] = c->blockDimX, r->block[1] = c->blockDimY, r->block[2] = c->blockDimZ;
        if (c->numAttrs) memcpy(r->attr, c->attrs, sizeof(CUlaunchAttribute) * c->numAttrs);
        keep_params(r, f, params);
    } else {
        failed = 1;
    }
    return real_launch_ex(c, f, params, extra);
}

int lf_begin(void *ctx)
{
    fa4_ctx *c = ctx;
    if (!c || hooked || !c->drv.LaunchKernel) return -1;
    hooked = c, n_rec = 0, failed = 0;
    real_launch = c->drv.LaunchKernel, real_launch_ex = c->drv.LaunchKernelEx;
    c->drv.LaunchKernel = rec_launch;
    if (real_launch_ex) c->drv.LaunchKernelEx = rec_launch_ex;
    return 0;
}

int lf_end(void *ctx)
{
    fa4_ctx *c = ctx;
    if (!c || c != hooked) return -1;
    c->drv.LaunchKernel = real_launch, c->drv.LaunchKernelEx = real_launch_ex;
    hooked = NULL;
    return failed ? -1 : n_rec;
}

int lf_replay(void *stream)
{
    for (int i = 0; i < n_rec; i++) {
        LfLaunch *r = &rec[i];
        CUresult e;
        if (r->ex) {
            CUlaunchConfig c = {r->grid[0], r->grid[1], r->grid[2], r->block[0], r->block[1], r->block[2], r->smem,
                                (CUstream)stream, r->n_attr ? r->attr : NULL, r->n_attr};
            e = real_launch_ex(&c, r->fn, r->params, NULL);
        } else {
            e = real_launch(r->fn, r->grid[0], r->grid[1], r->grid[2], r->block[0], r->block[1], r->block[2], r->smem,
                            (CUstream)stream, r->params, NULL);
        }
        if (e) return (int)e;
    }
    return 0;
}

int lf_describe(char *buf, size_t n)
{
    size_t o = 0;
    if (n) buf[0] = 0;
    for (int i = 0; i < n_rec && o < n; i++) {
        const LfLaunch *r = &rec[i];
        int cl = 0;
        for (unsigned a = 0; a < r->n_attr; a++) cl |= r->attr[a].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        int pdl = 0;
        for (unsigned a = 0; a < r->n_attr; a++)
            pdl |= r->attr[a].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        o += (size_t)snprintf(buf + o, n - o, "%s%s grid %u block %u smem %u%s%s", i ? "; " : "",
                              r->ex ? "cuLaunchKernelEx" : "cuLaunchKernel", r->grid[0], r->block[0], r->smem,
                              cl ? " cluster" : "", pdl ? " pdl" : "");
    }
    return n_rec;
}
