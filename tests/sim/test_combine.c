/* test_combine.c - the split-KV combine kernel alone (gen/combine.c), on the simulator or a GPU
 * (it dlopens libcuda.so.1 like sim_mha): hand-made partial outputs with the rows the MHA kernels
 * rarely make, checked against a double-precision merge.
 *   - a row whose every split has LSE -inf (its O_i are NaN: they must not be read): O = 0, LSE = -inf
 *   - a row with one finite split among -inf ones (NaN O elsewhere): O = O_i, LSE = lse_i
 *   - rows with finite LSEs far apart (e^-200 underflows) and close together
 * O goes to a strided output whose padding is NaN and must stay NaN; the partials are poisoned
 * around the rows. Target from FA4SIM_CC (100: sm100a, else sm90a). Prints one line per case and
 * 'test_combine: N passed, N failed'; exit 1 on failure. */
#include <cuda.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa4.h"

typedef struct {
    CUresult (*Init)(unsigned);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*HtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*DtoH)(void *, CUdeviceptr, size_t);
    CUresult (*Launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                       void **, void **);
    CUresult (*Sync)(void);
} Cu;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uni(void) /* U(-1, 1) */
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / (double)(1ull << 52) - 1.0;
}

static float bf16_to_f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* One case: splits, rows of a [batch=2, seqlen_q=5, heads=3, ov] output with a padded head stride; varlen: one
 * batch of the 5 tokens (partials in the varlen order [splits, heads, tokens]) with cu_seqlens_q = {1, 4}, so
 * tokens 0 and 4 belong to no sequence and their O and LSE must stay as they were (NaN). */
static int run_case(const Cu *cu, fa4_ctx *ctx, const char *target, int splits, int ov, int varlen)
{
    enum { B = 2, S = 5, H = 3, ROWS = B * H * S };
    int64_t sh = ov + 16, ss = H * sh, sb = S * ss; /* element strides, head padded by 16 */
    size_t o_elems = (size_t)B * (size_t)sb, po = (size_t)splits * ROWS * (size_t)ov;
    float *o_acc = malloc(po * 4), *lse_acc = malloc((size_t)splits * ROWS * 4), lse_out[ROWS];
    uint16_t *out = malloc(o_elems * 2);
    double *ref = malloc((size_t)ROWS * (size_t)ov * 8), ref_lse[ROWS];
    for (int r = 0; r < ROWS; r++) {
        int kind = r % 5; /* 0 all -inf, 1 one finite, 2 far apart, 3/4 random */
        int only = (int)((uni() + 1) * 0.5 * splits) % splits;
        for (int i = 0; i < splits; i++) {
            float l = kind == 0 ? -INFINITY : kind == 1 ? (i == only ? (float)(3 * uni()) : -INFINITY)
                      : kind == 2 ? (float)(i % 2 ? 100.0 + uni() : -100.0 + uni())
                      : (i % 3 == 1 && kind == 4) ? -INFINITY : (float)(2 * uni());
            lse_acc[(size_t)i * ROWS + r] = l;
            for (int c = 0; c < ov; c++)
                o_acc[((size_t)i * ROWS + r) * ov + c] = isinf(l) ? NAN : (float)uni();
        }
        double m = -INFINITY, sum = 0;
        for (int i = 0; i < splits; i++) m = fmax(m, lse_acc[(size_t)i * ROWS + r]);
        for (int i = 0; i < splits && !isinf(m); i++) sum += exp(lse_acc[(size_t)i * ROWS + r] - m);
        ref_lse[r] = isinf(m) ? -INFINITY : m + log(sum);
        for (int c = 0; c < ov; c++) {
            double acc = 0;
            for (int i = 0; i < splits && !isinf(m); i++) {
                double l = lse_acc[(size_t)i * ROWS + r];
                if (!isinf(l)) acc += exp(l - ref_lse[r]) * o_acc[((size_t)i * ROWS + r) * ov + c];
            }
            ref[(size_t)r * ov + c] = acc;
        }
    }
    char cfg[96];
    snprintf(cfg, sizeof cfg, "combine target=%s dtype=bf16 ov=%d", target, ov);
    fa4_kernel *k;
    fa4_kernel_info info = FA4_KERNEL_INFO_INIT;
    if (fa4_get_kernel(ctx, cfg, &k, NULL) || fa4_kernel_get_info(k, &info)) {
        printf("FAIL %s: %s\n", cfg, fa4_last_error(ctx));
        return 1;
    }
    /* varlen: the kernel's rows are the first batch's H x S, split stride H x S: compact the partials */
    size_t rows = varlen ? (size_t)H * S : ROWS;
    for (int i = 1; varlen && i < splits; i++) {
        memmove(lse_acc + (size_t)i * rows, lse_acc + (size_t)i * ROWS, rows * 4);
        memmove(o_acc + (size_t)i * rows * ov, o_acc + (size_t)i * ROWS * ov, rows * (size_t)ov * 4);
    }
    const int32_t cu_q[2] = {1, 4};
    CUdeviceptr d_o, d_l, d_out, d_lse, d_cu = 0;
    cu->MemAlloc(&d_o, po * 4), cu->MemAlloc(&d_l, (size_t)splits * ROWS * 4);
    cu->MemAlloc(&d_out, o_elems * 2), cu->MemAlloc(&d_lse, ROWS * 4);
    if (varlen) cu->MemAlloc(&d_cu, sizeof cu_q), cu->HtoD(d_cu, cu_q, sizeof cu_q);
    memset(out, 0xFF, o_elems * 2);
    memset(lse_out, 0xFF, sizeof lse_out);
    cu->HtoD(d_o, o_acc, po * 4), cu->HtoD(d_l, lse_acc, (size_t)splits * ROWS * 4);
    cu->HtoD(d_out, out, o_elems * 2), cu->HtoD(d_lse, lse_out, sizeof lse_out);
    uint64_t p_o = d_o, p_l = d_l, p_out = d_out, p_lse = d_lse, st[3] = {(uint64_t)sb, (uint64_t)ss, (uint64_t)sh};
    uint64_t p_cu = d_cu;
    uint32_t n = (uint32_t)splits, sq = S, hq = H, b = varlen ? 1 : B; /* varlen: batch = the sequences */
    void *params[] = {&p_o, &p_l, &p_out, &p_lse, &n, &sq, &hq, &b, &st[0], &st[1], &st[2], &p_cu};
    CUresult r = cu->Launch((CUfunction)info.function, (unsigned)(rows + 3) / 4, 1, 1, (unsigned)info.threads, 1, 1,
                            info.smem_bytes, NULL, params, NULL);
    if (!r) r = cu->Sync();
    cu->DtoH(out, d_out, o_elems * 2), cu->DtoH(lse_out, d_lse, sizeof lse_out);
    cu->MemFree(d_o), cu->MemFree(d_l), cu->MemFree(d_out), cu->MemFree(d_lse);
    if (d_cu) cu->MemFree(d_cu);
    double maxerr = 0, lse_err = 0;
    int bad = r != CUDA_SUCCESS, pad = 0, nan = 0, empty_bad = 0, outside_written = 0;
    for (int bb = 0; bb < (varlen ? 1 : B); bb++)
        for (int s = 0; s < S; s++)
            for (int h = 0; h < H; h++) {
                int row = (bb * H + h) * S + s;
                const uint16_t *o = out + bb * sb + s * ss + h * sh;
                if (varlen && (s < cu_q[0] || s >= cu_q[1])) { /* no sequence's token: untouched */
                    for (int c = 0; c < sh; c++) outside_written += !isnan(bf16_to_f(o[c]));
                    outside_written += !isnan(lse_out[row]);
                    continue;
                }
                for (int c = 0; c < sh; c++) {
                    float g = bf16_to_f(o[c]);
                    if (c >= ov) { pad += !isnan(g); continue; }
                    if (isnan(g)) { nan++; continue; }
                    double want = ref[(size_t)row * ov + c];
                    if (isinf(ref_lse[row])) empty_bad += g != 0.0f;
                    double e = fabs(g - want) / (fabs(want) + 1e-2);
                    if (e > maxerr) maxerr = e;
                }
                if (isinf(ref_lse[row])) empty_bad += !(isinf(lse_out[row]) && lse_out[row] < 0);
                else if (fabs(lse_out[row] - ref_lse[row]) > lse_err) lse_err = fabs(lse_out[row] - ref_lse[row]);
                if (isnan(lse_out[row])) nan++;
            }
    bad |= nan || pad || empty_bad || outside_written || maxerr > 1e-2 || lse_err > 1e-4;
    printf("%s %s splits=%d%s: launch=%d maxrel=%.3e lse_err=%.3e nan=%d padding_written=%d empty_bad=%d "
           "outside_written=%d\n", bad ? "FAIL" : "PASS", cfg, splits, varlen ? " varlen" : "", (int)r, maxerr,
           lse_err, nan, pad, empty_bad, outside_written);
    free(o_acc), free(lse_acc), free(out), free(ref);
    return bad;
}

int main(void)
{
    Cu cu;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "test_combine: dlopen(libcuda.so.1): %s\n", dlerror()); return 2; }
    const struct { const char *name; void *slot; } syms[] = {
        {"cuInit", &cu.Init}, {"cuMemAlloc_v2", &cu.MemAlloc}, {"cuMemFree_v2", &cu.MemFree},
        {"cuMemcpyHtoD_v2", &cu.HtoD}, {"cuMemcpyDtoH_v2", &cu.DtoH}, {"cuLaunchKernel", &cu.Launch},
        {"cuCtxSynchronize", &cu.Sync}};
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *p = dlsym(lib, syms[i].name);
        if (!p) { fprintf(stderr, "test_combine: libcuda.so.1 has no %s\n", syms[i].name); return 2; }
        memcpy(syms[i].slot, &p, sizeof p);
    }
    const char *cc = getenv("FA4SIM_CC");
    int sm100 = cc && !strcmp(cc, "100");
    fa4_options opt = FA4_OPTIONS_INIT;
    opt.target = sm100 ? FA4_TARGET_SM100A : FA4_TARGET_SM90A;
    fa4_ctx *ctx;
    if (fa4_create(&ctx, &opt)) { fprintf(stderr, "test_combine: %s\n", fa4_last_error(NULL)); return 2; }
    /* a kernel fetch opens the driver and makes its context current */
    fa4_kernel *k;
    if (fa4_get_kernel(ctx, sm100 ? "combine target=sm100a dtype=bf16 ov=64" : "combine target=sm90a dtype=bf16 ov=64",
                       &k, NULL)) {
        fprintf(stderr, "test_combine: %s\n", fa4_last_error(ctx));
        return 2;
    }
    int fail = 0, pass = 0;
    const int splits[] = {1, 2, 3, 16, 33, 128}, ovs[] = {64, 192}; /* 33, 128: past the first 32-lane chunk; the last */
    for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++)
        for (size_t j = 0; j < sizeof ovs / sizeof ovs[0]; j++) {
            int f = run_case(&cu, ctx, sm100 ? "sm100a" : "sm90a", splits[i], ovs[j], 0);
            fail += f, pass += !f;
        }
    for (int v = 0; v < 2; v++) { /* varlen rows, and tokens outside every sequence */
        int f = run_case(&cu, ctx, sm100 ? "sm100a" : "sm90a", v ? 33 : 3, v ? 64 : 192, 1);
        fail += f, pass += !f;
    }
    fa4_destroy(ctx);
    printf("test_combine: %d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}
