/* host_cost.c - the host time of one fa4_mha_fwd / fa4_mla_sparse_fwd call on a cached kernel, against the
 * fake CUDA driver (tests/unit/fake_cuda.c: every driver call returns at once), so what is timed is
 * libfa4rt's own work: argument checks, the driver questions about each buffer (issue 26), the cache
 * lookup, tensor-map encodes and the parameter packing. Issue 27 item 4 wants the C call <= 3 us (with the
 * real driver's launch); the call memo (mha.c) and the pointer memo (buffers.c) are what get it there, and
 * the "pointer memo" case is the decode call with fa4_options.remember_buffers (opt-in; the default asks every pointer).
 *
 *   make bench-host        (runs build/bench/host_cost with LD_LIBRARY_PATH=build/fakecuda)
 *   build/bench/host_cost "mha decode"   (only the cases whose name starts so: for callgrind/perf)
 *   build/bench/host_cost                (on a GPU, without the fake: the same call through the real driver,
 *                                         real allocations and launches; decode and a tiny prefill)
 *
 * Prints the median of 15 rounds of 2000 calls per case, in ns per call, and the fake driver's
 * cuPointerGetAttributes calls per fa4 call. The fake records at most 16 launches and 128 tensor-map
 * encodes, so its records are cleared every 16 calls (the same for every build measured). Then the buffer
 * checks alone (rt_check_buffers over a decode call's five buffers), in one process so that a loaded
 * machine's noise does not hide them: the cost the driver questions add to a call, less the real
 * driver's own time per question (tests/gpu/test_bad_args.py prints that one on a GPU). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_cuda.h"
#include "rt_internal.h"

enum { CALLS = 2000, ROUNDS = 15, RESET_EVERY = 16 };

static FakeCuda *fk;
static FakeCudaResetFn fake_reset;

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef fa4_status (*CallFn)(fa4_ctx *, const void *);
static fa4_status call_mha(fa4_ctx *ctx, const void *a) { return fa4_mha_fwd(ctx, a, NULL); }
static fa4_status call_mla(fa4_ctx *ctx, const void *a) { return fa4_mla_sparse_fwd(ctx, a, NULL); }

static const char *only; /* argv[1]: run only the cases whose name starts with it */

/* The real driver (run without LD_LIBRARY_PATH=build/fakecuda on a GPU): real allocations, real launches. */
static CUresult (*real_sync)(void);

static int measure_real(const char *name, fa4_ctx *ctx, CallFn f, const void *args)
{
    enum { CHUNK = 200 }; /* synchronised between chunks, outside the timing: the launch queue never fills */
    if (f(ctx, args) != FA4_OK) {
        fprintf(stderr, "host_cost: %s: %s\n", name, fa4_last_error(ctx));
        return 1;
    }
    real_sync();
    double t[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double total = 0;
        for (int c = 0; c < CALLS; c += CHUNK) {
            real_sync();
            double t0 = now_ns();
            for (int i = 0; i < CHUNK; i++)
                if (f(ctx, args) != FA4_OK) {
                    fprintf(stderr, "host_cost: %s: %s\n", name, fa4_last_error(ctx));
                    return 1;
                }
            total += now_ns() - t0;
        }
        t[r] = total / CALLS;
    }
    real_sync();
    qsort(t, ROUNDS, sizeof t[0], cmp);
    printf("%-28s %6.0f ns per call (median of %d x %d, real driver; min %.0f, max %.0f)\n", name, t[ROUNDS / 2],
           ROUNDS, CALLS, t[0], t[ROUNDS - 1]);
    return 0;
}

/* On a GPU: decode (batch 4, 1 query, 512 keys, GQA 32/8, d128) and a tiny prefill ([1, 128, 8, 64] causal), the
 * kernels short so that the host is the bound. */
static int real_main(void *lib)
{
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(lib, "cuInit");
    CUresult (*get)(CUdevice *, int) = (CUresult(*)(CUdevice *, int))dlsym(lib, "cuDeviceGet");
    CUresult (*retain)(CUcontext *, CUdevice) = (CUresult(*)(CUcontext *, CUdevice))dlsym(lib, "cuDevicePrimaryCtxRetain");
    CUresult (*set)(CUcontext) = (CUresult(*)(CUcontext))dlsym(lib, "cuCtxSetCurrent");
    CUresult (*alloc)(CUdeviceptr *, size_t) = (CUresult(*)(CUdeviceptr *, size_t))dlsym(lib, "cuMemAlloc_v2");
    real_sync = (CUresult(*)(void))dlsym(lib, "cuCtxSynchronize");
    CUdevice d;
    CUcontext c;
    if (!init || !get || !retain || !set || !alloc || !real_sync || init(0) || get(&d, 0) || retain(&c, d) || set(c)) {
        fprintf(stderr, "host_cost: no usable CUDA driver (neither the fake one nor a GPU)\n");
        return 2;
    }
    CUdeviceptr p[5];
    for (int i = 0; i < 5; i++)
        if (alloc(&p[i], 64u << 20)) return 2;
    fa4_options o = FA4_OPTIONS_INIT;
    fa4_ctx *ctx = NULL;
    if (fa4_create(&ctx, &o) != FA4_OK) return 2;
    fa4_mha_args a = FA4_MHA_ARGS_INIT;
    a.q = (void *)p[0], a.k = (void *)p[1], a.v = (void *)p[2], a.o = (void *)p[3], a.lse = (float *)p[4];
    a.batch = 4, a.seqlen_q = 1, a.seqlen_k = 512, a.heads_q = 32, a.heads_kv = 8, a.qk_depth = a.ov_depth = 128;
    a.mask = FA4_MASK_CAUSAL;
    int bad = measure_real("mha decode (real driver)", ctx, call_mha, &a);
    fa4_mha_args t = a;
    t.batch = 1, t.seqlen_q = t.seqlen_k = 128, t.heads_q = t.heads_kv = 8, t.qk_depth = t.ov_depth = 64, t.lse = NULL;
    bad |= measure_real("mha tiny prefill (real driver)", ctx, call_mha, &t);
    fa4_options ro = o;
    ro.remember_buffers = 1;
    fa4_ctx *rctx = NULL;
    if (fa4_create(&rctx, &ro) != FA4_OK) return 2;
    bad |= measure_real("mha tiny prefill, pointer memo", rctx, call_mha, &t);
    fa4_destroy(rctx);
    fa4_destroy(ctx);
    return bad;
}

static int measure(const char *name, fa4_ctx *ctx, CallFn f, const void *args)
{
    if (only && strncmp(name, only, strlen(only))) return 0;
    fake_reset();
    if (f(ctx, args) != FA4_OK) { /* the first call builds the kernel */
        fprintf(stderr, "host_cost: %s: %s\n", name, fa4_last_error(ctx));
        return 1;
    }
    double t[ROUNDS];
    long queries = 0;
    for (int r = 0; r < ROUNDS; r++) {
        fake_reset();
        double t0 = now_ns();
        for (int i = 0; i < CALLS; i++) {
            if (fk->n_launches == RESET_EVERY) queries += fk->n_ptr_queries, fake_reset();
            if (f(ctx, args) != FA4_OK) {
                fprintf(stderr, "host_cost: %s: %s\n", name, fa4_last_error(ctx));
                return 1;
            }
        }
        t[r] = (now_ns() - t0) / CALLS;
        queries += fk->n_ptr_queries;
    }
    qsort(t, ROUNDS, sizeof t[0], cmp);
    printf("%-28s %6.0f ns per call (median of %d x %d; min %.0f, max %.0f), %.1f pointer queries per call\n",
           name, t[ROUNDS / 2], ROUNDS, CALLS, t[0], t[ROUNDS - 1], (double)queries / (ROUNDS * CALLS));
    return 0;
}

int main(int argc, char **argv)
{
    only = argc > 1 ? argv[1] : NULL;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    FakeCudaStateFn get = lib ? (FakeCudaStateFn)dlsym(lib, "fake_cuda_state") : NULL;
    fake_reset = lib ? (FakeCudaResetFn)dlsym(lib, "fake_cuda_reset") : NULL;
    FakeCudaMapFn map = lib ? (FakeCudaMapFn)dlsym(lib, "fake_cuda_map") : NULL;
    if (lib && (!get || !fake_reset || !map)) return real_main(lib); /* a real driver: time it on the GPU */
    if (!get || !fake_reset || !map) {
        fprintf(stderr, "host_cost: no libcuda.so.1; run with LD_LIBRARY_PATH=build/fakecuda (or on a GPU)\n");
        return 2;
    }
    fk = get();
    const uint64_t base = 0x200000000000ull; /* device memory the fake knows; nothing is behind it */
    if (map(base, 1ull << 40, 2 /* CU_MEMORYTYPE_DEVICE */, 0, 0)) return 2;
#define DEV(i) ((void *)(uintptr_t)(base + (uint64_t)(i) * (1ull << 32)))
    setenv("FAKE_CUDA_CC", "90", 1);
    fa4_options o = FA4_OPTIONS_INIT;
    o.target = FA4_TARGET_SM90A;
    fa4_ctx *ctx = NULL;
    if (fa4_create(&ctx, &o) != FA4_OK) return 2;
    int bad = 0;

    fa4_mha_args a = FA4_MHA_ARGS_INIT; /* decode-like: one query token, GQA 32/8, 4k keys, LSE */
    a.q = DEV(1), a.k = DEV(2), a.v = DEV(3), a.o = DEV(4), a.lse = DEV(5);
    a.batch = 4, a.seqlen_q = 1, a.seqlen_k = 4096, a.heads_q = 32, a.heads_kv = 8, a.qk_depth = a.ov_depth = 128;
    a.num_splits = 1;
    bad |= measure("mha decode (q k v o lse)", ctx, call_mha, &a);
    fa4_options ro = o;
    ro.remember_buffers = 1;
    fa4_ctx *rctx = NULL;
    if (fa4_create(&rctx, &ro) != FA4_OK) return 2;
    bad |= measure("mha decode, pointer memo", rctx, call_mha, &a);
    fa4_destroy(rctx);
    fa4_mha_args p = a; /* prefill: 2 x 2k causal */
    p.seqlen_q = p.seqlen_k = 2048, p.mask = FA4_MASK_CAUSAL, p.num_splits = 0;
    bad |= measure("mha prefill (q k v o lse)", ctx, call_mha, &p);

    fa4_mla_sparse_args m = FA4_MLA_SPARSE_ARGS_INIT;
    m.q = DEV(1), m.kv = DEV(2), m.indices = DEV(3), m.out = DEV(4), m.lse = DEV(5), m.max_logits = DEV(6);
    m.s_q = 64, m.s_kv = 8192, m.h_q = 128, m.d_qk = 576, m.topk = 2048;
    bad |= measure("mla sparse (6 buffers)", ctx, call_mla, &m);

    /* the decode call's buffers, as mha.c's check_buffers gives them */
    const RtBuffer b[5] = {{"q", a.q, 4ull * 32 * 128 * 2, 0}, {"k", a.k, 4ull * 4096 * 8 * 128 * 2, 0},
                           {"v", a.v, 4ull * 4096 * 8 * 128 * 2, 0}, {"o", a.o, 4ull * 32 * 128 * 2, 0},
                           {"lse", a.lse, 4ull * 32 * 4, 0}};
    double t[ROUNDS];
    if (only && strncmp("buffer", only, strlen(only))) goto done;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_ns();
        for (int i = 0; i < 100 * CALLS; i++)
            if (rt_check_buffers(ctx, b, 5)) return 1;
        t[r] = (now_ns() - t0) / (100 * CALLS);
    }
    qsort(t, ROUNDS, sizeof t[0], cmp);
    printf("%-28s %6.1f ns per call (median of %d x %d; min %.1f), of which the fake driver's 5 answers\n",
           "buffer checks alone (5)", t[ROUNDS / 2], ROUNDS, 100 * CALLS, t[0]);
done:
    fa4_destroy(ctx);
    return bad;
}
