/* example_gpu.h - what the examples share: the CUDA driver opened with dlopen (so they
 * build and start on machines without one), bf16 inputs, one causal GQA attention call
 * through fa4_mha_fwd, and a check of four output rows against a plain CPU reference. */
#ifndef FA4_EXAMPLE_GPU_H
#define FA4_EXAMPLE_GPU_H

#include <cuda.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa4.h"

enum { B = 2, SQ = 384, SK = 512, HQ = 8, HKV = 2, D = 128 };

typedef struct {
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSynchronize)(void);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*HtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*DtoH)(void *, CUdeviceptr, size_t);
} Cu;

static int open_cuda(Cu *cu)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return -1;
    const char *names[] = {"cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent",
                           "cuCtxSynchronize", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoD_v2",
                           "cuMemcpyDtoH_v2"};
    void **slots = (void **)cu;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(slots[i] = dlsym(lib, names[i]))) return -1;
    CUdevice dev;
    return cu->Init(0) || cu->DeviceGet(&dev, 0) ? -1 : 0; /* a driver without a device: no GPU */
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Reference O[b, i, h, :] for packed [batch, seq, heads, depth] tensors, causal bottom-right. */
static void reference_row(const uint16_t *q, const uint16_t *k, const uint16_t *v, int b, int i, int h, float scale,
                          float *out)
{
    int hk = h / (HQ / HKV), last = i + SK - SQ;
    double *s = malloc(sizeof(double) * SK), mx = -INFINITY, sum = 0;
    for (int j = 0; j <= last && j < SK; j++) {
        double dot = 0;
        for (int d = 0; d < D; d++)
            dot += from_bf16(q[(((size_t)b * SQ + i) * HQ + h) * D + d]) *
                   from_bf16(k[(((size_t)b * SK + j) * HKV + hk) * D + d]);
        s[j] = dot * scale;
        if (s[j] > mx) mx = s[j];
    }
    for (int d = 0; d < D; d++) out[d] = 0;
    for (int j = 0; j <= last && j < SK; j++) {
        double p = exp(s[j] - mx);
        sum += p;
        for (int d = 0; d < D; d++) out[d] += (float)(p * from_bf16(v[(((size_t)b * SK + j) * HKV + hk) * D + d]));
    }
    for (int d = 0; d < D; d++) out[d] = sum > 0 ? (float)(out[d] / sum) : 0.0f;
    free(s);
}

static int fail(fa4_ctx *ctx, const char *what, fa4_status s)
{
    fprintf(stderr, "%s: %s: %s\n", what, fa4_status_string(s), fa4_last_error(ctx));
    return 1;
}

/* The call every example makes: causal attention, bf16, GQA 8:2, d128. fa4_mha_config
 * validates pointers as fa4_mha_fwd does, so 16-byte aligned placeholders stand in for them
 * until run_on_gpu sets the real ones. */
static fa4_mha_args example_args(void)
{
    fa4_mha_args a = FA4_MHA_ARGS_INIT;
    a.q = a.k = a.v = a.o = (void *)(uintptr_t)0x100000;
    a.batch = B, a.seqlen_q = SQ, a.seqlen_k = SK, a.heads_q = HQ, a.heads_kv = HKV, a.qk_depth = a.ov_depth = D;
    a.mask = FA4_MASK_CAUSAL;
    return a;
}

static const char *source_name(int source)
{
    static const char *const names[] = {"memory cache", "disk cache", "compiled (JIT)", "linked bundle"};
    return source >= 0 && source < 4 ? names[source] : "?";
}

/* Run example_args on the GPU and check four rows of O against the CPU reference. */
static int run_on_gpu(fa4_ctx *ctx, const Cu *cu)
{
    size_t nq = (size_t)B * SQ * HQ * D, nk = (size_t)B * SK * HKV * D;
    uint16_t *hq = malloc(nq * 2), *hk = malloc(nk * 2), *hv = malloc(nk * 2), *ho = malloc(nq * 2);
    srand(1);
    for (size_t i = 0; i < nq; i++) hq[i] = to_bf16((float)((double)rand() / RAND_MAX * 2 - 1));
    for (size_t i = 0; i < nk; i++) hk[i] = to_bf16((float)((double)rand() / RAND_MAX * 2 - 1));
    for (size_t i = 0; i < nk; i++) hv[i] = to_bf16((float)((double)rand() / RAND_MAX * 2 - 1));
    CUdevice dev;
    CUcontext pctx;
    CUdeviceptr dq, dk, dv, dout;
    if (cu->Init(0) || cu->DeviceGet(&dev, 0) || cu->PrimaryCtxRetain(&pctx, dev) || cu->CtxSetCurrent(pctx) ||
        cu->MemAlloc(&dq, nq * 2) || cu->MemAlloc(&dk, nk * 2) || cu->MemAlloc(&dv, nk * 2) ||
        cu->MemAlloc(&dout, nq * 2) || cu->HtoD(dq, hq, nq * 2) || cu->HtoD(dk, hk, nk * 2) ||
        cu->HtoD(dv, hv, nk * 2)) {
        fprintf(stderr, "CUDA setup failed\n");
        return 1;
    }
    fa4_mha_args a = example_args();
    a.q = (void *)dq, a.k = (void *)dk, a.v = (void *)dv, a.o = (void *)dout;
    fa4_status s = fa4_mha_fwd(ctx, &a, NULL);
    if (s) return fail(ctx, "fa4_mha_fwd", s);
    if (cu->CtxSynchronize() || cu->DtoH(ho, dout, nq * 2)) {
        fprintf(stderr, "CUDA: kernel or copy-back failed\n");
        return 1;
    }
    float ref[D], worst = 0;
    const int rows[4][3] = {{0, 0, 0}, {0, SQ - 1, 3}, {1, SQ / 2, 7}, {1, 17, 5}};
    for (int r = 0; r < 4; r++) {
        reference_row(hq, hk, hv, rows[r][0], rows[r][1], rows[r][2], 1.0f / sqrtf((float)D), ref);
        for (int d = 0; d < D; d++) {
            float got = from_bf16(ho[(((size_t)rows[r][0] * SQ + rows[r][1]) * HQ + rows[r][2]) * D + d]);
            worst = fmaxf(worst, fabsf(got - ref[d]));
        }
    }
    printf("max |O - reference| over 4 rows: %.4g (%s)\n", worst, worst < 2e-2f ? "ok" : "MISMATCH");
    cu->MemFree(dq), cu->MemFree(dk), cu->MemFree(dv), cu->MemFree(dout);
    free(hq), free(hk), free(hv), free(ho);
    return worst < 2e-2f ? 0 : 1;
}


#endif
