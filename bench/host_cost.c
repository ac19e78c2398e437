/* host_cost.c - the host time of one fa4_mha_fwd / fa4_mla_sparse_fwd / fa4_kv_append call on a cached kernel.
 *
 * Against the fake CUDA driver (tests/unit/fake_cuda.c: every driver call returns at once), what is timed is
 * libfa4rt's own work: argument checks, the driver questions about each buffer (issue 26), the cache lookup,
 * tensor-map encodes and the parameter packing; the "pointer memo" case is the decode call with
 * fa4_options.remember_buffers (opt-in; the default asks every pointer). Prints the median of 15 rounds of 2000
 * calls per case, in ns per call, and the fake driver's cuPointerGetAttributes calls per fa4 call (the fake records
 * at most 16 launches and 128 tensor-map encodes, so its records are cleared every 16 calls). Then the buffer
 * checks alone (rt_check_buffers over a decode call's five buffers).
 *
 * On a GPU (run without the fake: the real driver, real allocations and launches), issue 27 item 4's target, the C
 * call fa4_mha_fwd on a cached kernel <= 3 us, measured so that the GPU cannot bound it: every round holds the GPU
 * with a spin kernel and times 128 calls behind it (real_main's comment has the method), beside the floor -- the
 * same launches recorded from one call and replayed bare (bench/launch_floor.c) -- and the driver's parts
 * (cuPointerGetAttributes, cuCtxGetCurrent, a minimal launch): decode, a tiny prefill and a decode step's KV append.
 *
 *   make bench-host        (runs build/bench/host_cost with LD_LIBRARY_PATH=build/fakecuda)
 *   build/bench/host_cost "mha decode"   (fake driver: only the cases whose name starts so, for callgrind/perf)
 *   build/bench/host_cost                (on a GPU, without the fake)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_cuda.h"
#include "launch_floor.h"
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

static fa4_status call_floor(fa4_ctx *ctx, const void *a)
{
    (void)ctx, (void)a;
    return lf_replay(NULL) ? FA4_ERR_CUDA : FA4_OK;
}

static const char *only; /* argv[1]: run only the cases whose name starts with it */

/* ---------------------------------------------------------------- on a GPU (the real driver)
 *
 * Method (bench/NOTES.md "host cost"): a tiny kernel's launches, back to back, can be bound by the GPU: once the
 * launch queue is full the host waits for the GPU, and the time per call is the kernel's. So each round first
 * holds the GPU with a spin kernel (HOLD_PTX: one thread spins on %globaltimer), then times CALLS_PER_ROUND calls
 * -- fewer than the queue holds -- while the GPU is still spinning, then synchronises (untimed). A round counts
 * only if the hold was still running when its last call returned (an event recorded after the hold was not yet
 * complete): otherwise a call may have waited for the GPU, and the round is run again with half the calls and twice
 * the hold (the hold was short, or the queue holds fewer launches of large parameter lists). Per case: the median over
 * ROUNDS_REAL rounds of the time per call.
 * The floor: the same launches (function, grid, block, shared memory, attributes, parameter bytes) recorded from
 * one fa4 call (bench/launch_floor.c) and replayed bare through the same driver entry point, timed the same way;
 * fa4's own cost is the call's time above it. */

enum { CALLS_PER_ROUND = 128, ROUNDS_REAL = 41, MIN_CALLS = 8, HOLD_NS_MIN = 2000000, HOLD_NS_MAX = 256000000,
       RERUNS_MAX = 16 };

static const char hold_ptx[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry fa4_bench_hold(.param .u64 p_ns)\n{\n"
    "    .reg .u64 %t0, %t, %n;\n    .reg .pred %p;\n"
    "    ld.param.u64 %n, [p_ns];\n    mov.u64 %t0, %globaltimer;\n"
    "$spin:\n    mov.u64 %t, %globaltimer;\n    sub.u64 %t, %t, %t0;\n    setp.lt.u64 %p, %t, %n;\n"
    "    @%p bra $spin;\n    ret;\n}\n";

typedef struct {
    CUresult (*Sync)(void);
    CUresult (*Launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                       void **, void **);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventQuery)(CUevent);
    CUresult (*PointerGetAttributes)(unsigned, CUpointer_attribute *, void **, CUdeviceptr);
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUfunction hold;
    CUevent held;
} Real;

static Real rd;

typedef int (*RealFn)(void *);

/* The median host ns per call of fn(arg) behind a held GPU (printed with its spread). The hold: at least
 * HOLD_NS_MIN, else 3x the round's calls at their unheld pace after 5 warm-up calls, at most HOLD_NS_MAX; a round
 * whose hold ended first is run again with half the calls and twice the hold (the hold was short, or the launch
 * queue holds fewer calls). */
static int timed(const char *name, RealFn fn, void *arg, double *out_ns)
{
    double t[ROUNDS_REAL];
    int n = CALLS_PER_ROUND, reruns = 0;
    for (int i = 0; i < 5; i++) /* the first calls pay one-time costs (the JIT): not the pace a hold must cover */
        if (fn(arg)) return fprintf(stderr, "host_cost: %s failed\n", name), 1;
    rd.Sync();
    double w0 = now_ns();
    for (int i = 0; i < 20; i++)
        if (fn(arg)) return fprintf(stderr, "host_cost: %s failed\n", name), 1;
    double warm = (now_ns() - w0) / 20;
    double want = 3 * n * warm < HOLD_NS_MIN ? HOLD_NS_MIN : 3 * n * warm;
    uint64_t hold_ns = (uint64_t)(want > HOLD_NS_MAX ? HOLD_NS_MAX : want);
    rd.Sync();
    for (int r = 0; r < ROUNDS_REAL;) {
        void *hp[] = {&hold_ns};
        rd.Sync();
        if (rd.Launch(rd.hold, 1, 1, 1, 1, 1, 1, 0, NULL, hp, NULL) || rd.EventRecord(rd.held, NULL))
            return fprintf(stderr, "host_cost: %s: the hold kernel did not launch\n", name), 1;
        double t0 = now_ns();
        for (int i = 0; i < n; i++)
            if (fn(arg)) return fprintf(stderr, "host_cost: %s failed\n", name), 1;
        double t1 = now_ns();
        CUresult q = rd.EventQuery(rd.held);
        rd.Sync();
        if (q != CUDA_ERROR_NOT_READY) { /* the hold ended before the calls: a call may have waited for the GPU */
            if (q != CUDA_SUCCESS) return fprintf(stderr, "host_cost: %s: cuEventQuery: %d\n", name, (int)q), 1;
            if (++reruns > RERUNS_MAX)
                return fprintf(stderr, "host_cost: %s: no round stayed ahead of the GPU\n", name), 1;
            n = n / 2 > MIN_CALLS ? n / 2 : MIN_CALLS;
            if (hold_ns < HOLD_NS_MAX) hold_ns *= 2;
            continue;
        }
        t[r++] = (t1 - t0) / n;
    }
    qsort(t, ROUNDS_REAL, sizeof t[0], cmp);
    *out_ns = t[ROUNDS_REAL / 2];
    printf("%-44s %7.0f ns per call (median of %d rounds of %d calls behind a held GPU; min %.0f, max %.0f; "
           "%d rounds rerun)\n", name, t[ROUNDS_REAL / 2], ROUNDS_REAL, n, t[0], t[ROUNDS_REAL - 1], reruns);
    fflush(stdout);
    return 0;
}

typedef struct { fa4_ctx *ctx; const fa4_mha_args *a; } MhaCall;
static int real_mha(void *p)
{
    const MhaCall *c = p;
    return fa4_mha_fwd(c->ctx, c->a, NULL) != FA4_OK;
}

/* decode with o alternating between two buffers: each call's o differs from the last, so its tensor map is
 * encoded anew (the cache keeps the maps of the last bases) */
typedef struct { fa4_ctx *ctx; fa4_mha_args a; void *o[2]; int i; } MhaFlip;
static int real_mha_flip(void *p)
{
    MhaFlip *c = p;
    c->a.o = c->o[c->i ^= 1];
    return fa4_mha_fwd(c->ctx, &c->a, NULL) != FA4_OK;
}

typedef struct { fa4_ctx *ctx; const fa4_kv_append_args *a; } KvaCall;
static int real_kva(void *p)
{
    const KvaCall *c = p;
    return fa4_kv_append(c->ctx, c->a, NULL) != FA4_OK;
}

static int real_floor(void *p)
{
    (void)p;
    return lf_replay(NULL) != 0;
}

/* One pointer's driver question, as buffers.c asks it (5 attributes). */
static int real_query(void *p)
{
    CUpointer_attribute attr[5] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    uint64_t v[5] = {0};
    void *data[5] = {&v[0], &v[1], &v[2], &v[3], &v[4]};
    return rd.PointerGetAttributes(5, attr, data, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS;
}

static int real_ctx_current(void *p)
{
    (void)p;
    CUcontext c;
    return rd.CtxGetCurrent(&c) != CUDA_SUCCESS;
}

static int real_hold0(void *p)
{
    (void)p;
    uint64_t ns = 0;
    void *hp[] = {&ns};
    return rd.Launch(rd.hold, 1, 1, 1, 1, 1, 1, 0, NULL, hp, NULL) != CUDA_SUCCESS;
}

/* Record the launches of one call of fn (bench/launch_floor.c); 0 when they can be replayed. */
static int record(fa4_ctx *ctx, RealFn fn, void *arg, const char *name)
{
    char what[512];
    if (lf_begin(ctx)) return fprintf(stderr, "host_cost: %s: cannot record launches\n", name), 1;
    int bad = fn(arg);
    int n = lf_end(ctx);
    rd.Sync();
    if (bad || n < 1) return fprintf(stderr, "host_cost: %s: recorded %d launches\n", name, n), 1;
    lf_describe(what, sizeof what);
    printf("  %s launches: %s\n", name, what);
    return 0;
}

/* fa4's call, its floor and what lies between, for one call shape; *ns_call / *ns_floor for the summary. */
static int case_pair(const char *name, fa4_ctx *ctx, RealFn fn, void *arg, double *ns_call, double *ns_floor)
{
    char n1[96], n2[96];
    snprintf(n1, sizeof n1, "%s: fa4 call", name);
    snprintf(n2, sizeof n2, "%s: floor (same launches, bare)", name);
    if (timed(n1, fn, arg, ns_call) || record(ctx, fn, arg, name) || timed(n2, real_floor, NULL, ns_floor)) return 1;
    printf("%-44s %7.0f ns per call above the floor\n", name, *ns_call - *ns_floor);
    return 0;
}

/* On a GPU: decode (batch 4, 1 query, 512 keys, GQA 32/8, d128), a tiny prefill ([1, 128, 8, 64] causal) and a
 * decode step's KV append (batch 8, 1 token, 8 kv heads, d128, a 1024-row cache): short kernels, so that a GPU
 * that is not held would bound the loop. */
static int real_main(void *lib)
{
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(lib, "cuInit");
    CUresult (*get)(CUdevice *, int) = (CUresult(*)(CUdevice *, int))dlsym(lib, "cuDeviceGet");
    CUresult (*retain)(CUcontext *, CUdevice) = (CUresult(*)(CUcontext *, CUdevice))dlsym(lib, "cuDevicePrimaryCtxRetain");
    CUresult (*set)(CUcontext) = (CUresult(*)(CUcontext))dlsym(lib, "cuCtxSetCurrent");
    CUresult (*alloc)(CUdeviceptr *, size_t) = (CUresult(*)(CUdeviceptr *, size_t))dlsym(lib, "cuMemAlloc_v2");
    CUresult (*memset8)(CUdeviceptr, unsigned char, size_t) =
        (CUresult(*)(CUdeviceptr, unsigned char, size_t))dlsym(lib, "cuMemsetD8_v2");
    CUresult (*load)(CUmodule *, const void *) = (CUresult(*)(CUmodule *, const void *))dlsym(lib, "cuModuleLoadData");
    CUresult (*getfn)(CUfunction *, CUmodule, const char *) =
        (CUresult(*)(CUfunction *, CUmodule, const char *))dlsym(lib, "cuModuleGetFunction");
    CUresult (*name)(char *, int, CUdevice) = (CUresult(*)(char *, int, CUdevice))dlsym(lib, "cuDeviceGetName");
    rd.Sync = (CUresult(*)(void))dlsym(lib, "cuCtxSynchronize");
    rd.Launch = (CUresult(*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void **, void **))dlsym(lib, "cuLaunchKernel");
    rd.EventCreate = (CUresult(*)(CUevent *, unsigned))dlsym(lib, "cuEventCreate");
    rd.EventRecord = (CUresult(*)(CUevent, CUstream))dlsym(lib, "cuEventRecord");
    rd.EventQuery = (CUresult(*)(CUevent))dlsym(lib, "cuEventQuery");
    rd.PointerGetAttributes = (CUresult(*)(unsigned, CUpointer_attribute *, void **, CUdeviceptr))dlsym(
        lib, "cuPointerGetAttributes");
    rd.CtxGetCurrent = (CUresult(*)(CUcontext *))dlsym(lib, "cuCtxGetCurrent");
    CUdevice d;
    CUcontext c;
    CUmodule m;
    char gpu[128] = "?";
    if (!init || !get || !retain || !set || !alloc || !memset8 || !load || !getfn || !rd.Sync || !rd.Launch ||
        !rd.EventCreate || !rd.EventRecord || !rd.EventQuery || !rd.PointerGetAttributes || !rd.CtxGetCurrent ||
        init(0) || get(&d, 0) || retain(&c, d) || set(c)) {
        fprintf(stderr, "host_cost: no usable CUDA driver (neither the fake one nor a GPU)\n");
        return 2;
    }
    if (load(&m, hold_ptx) || getfn(&rd.hold, m, "fa4_bench_hold") || rd.EventCreate(&rd.held, CU_EVENT_DISABLE_TIMING)) {
        fprintf(stderr, "host_cost: the hold kernel did not load\n");
        return 2;
    }
    if (name) name(gpu, sizeof gpu, d);
    printf("# bench/host_cost.c on %s (real driver): host ns per call, %d calls a round behind a held GPU "
           "(bench/NOTES.md \"host cost\")\n", gpu, CALLS_PER_ROUND);
    CUdeviceptr p[8];
    for (int i = 0; i < 8; i++)
        if (alloc(&p[i], 64u << 20) || memset8(p[i], 0, 64u << 20)) return 2;
    fa4_options o = FA4_OPTIONS_INIT;
    fa4_ctx *ctx = NULL, *rctx = NULL;
    fa4_options ro = o;
    ro.remember_buffers = 1;
    if (fa4_create(&ctx, &o) != FA4_OK || fa4_create(&rctx, &ro) != FA4_OK) return 2;
    fa4_mha_args a = FA4_MHA_ARGS_INIT;
    a.q = (void *)p[0], a.k = (void *)p[1], a.v = (void *)p[2], a.o = (void *)p[3], a.lse = (float *)p[4];
    a.batch = 4, a.seqlen_q = 1, a.seqlen_k = 512, a.heads_q = 32, a.heads_kv = 8, a.qk_depth = a.ov_depth = 128;
    a.mask = FA4_MASK_CAUSAL;
    fa4_mha_args t = a;
    t.batch = 1, t.seqlen_q = t.seqlen_k = 128, t.heads_q = t.heads_kv = 8, t.qk_depth = t.ov_depth = 64, t.lse = NULL;
    MhaCall dec = {ctx, &a}, dec_r = {rctx, &a}, pre = {ctx, &t}, pre_r = {rctx, &t};
    MhaFlip flip = {ctx, a, {(void *)p[3], (void *)p[5]}, 0};
    fa4_kv_append_args k = FA4_KV_APPEND_ARGS_INIT; /* a decode step's append: 8 sequences, 1 token, d128 */
    k.k = (void *)p[0], k.v = (void *)p[2], k.k_cache = (void *)p[1], k.v_cache = (void *)p[6];
    k.batch = 8, k.s_new = 1, k.heads_kv = 8, k.k_depth = k.v_depth = 128, k.cache_batch = 8, k.cache_rows = 1024;
    k.cache_seqlens = (const int32_t *)p[7], k.seqlens_out = (int32_t *)(p[7] + 256);
    KvaCall kva = {ctx, &k};
    double dc, df, pc, pf, kc, kf, x;
    int bad = case_pair("mha decode", ctx, real_mha, &dec, &dc, &df);
    bad |= timed("mha decode: fa4 call, remember_buffers=1", real_mha, &dec_r, &x);
    bad |= timed("mha decode: o alternating (a map encode a call)", real_mha_flip, &flip, &x);
    bad |= case_pair("mha tiny prefill", ctx, real_mha, &pre, &pc, &pf);
    bad |= timed("mha tiny prefill: fa4 call, remember_buffers=1", real_mha, &pre_r, &x);
    bad |= case_pair("kv append (decode step)", ctx, real_kva, &kva, &kc, &kf);
    double q, cur, h0;
    bad |= timed("driver: cuPointerGetAttributes (5 attributes)", real_query, (void *)p[1], &q);
    bad |= timed("driver: cuCtxGetCurrent", real_ctx_current, NULL, &cur);
    bad |= timed("driver: cuLaunchKernel of a 1-parameter kernel", real_hold0, NULL, &h0);
    if (!bad) {
        printf("summary: mha decode %.2f us = bare launch %.2f + fa4's own %.2f (5 pointer questions ~%.2f of it); "
               "tiny prefill %.2f us = %.2f + %.2f (4 questions ~%.2f); kv append %.2f us = %.2f + %.2f (6 "
               "questions ~%.2f)\n", dc / 1e3, df / 1e3, (dc - df) / 1e3, 5 * q / 1e3, pc / 1e3, pf / 1e3,
               (pc - pf) / 1e3, 4 * q / 1e3, kc / 1e3, kf / 1e3, (kc - kf) / 1e3, 6 * q / 1e3);
        printf("target (issue 27): the C call fa4_mha_fwd on a cached kernel <= 3 us: decode %.2f us, tiny prefill "
               "%.2f us; fa4's own part above the bare launch: %.2f / %.2f us (the bare launch alone: %.2f / %.2f us)\n",
               dc / 1e3, pc / 1e3, (dc - df) / 1e3, (pc - pf) / 1e3, df / 1e3, pf / 1e3);
    }
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
    setvbuf(stdout, NULL, _IOLBF, 0); /* each result line lands even if a run is cut short */
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
    /* its launches replayed bare (bench/launch_floor.c): on the fake, the fake's own launch cost */
    if (!only || !strncmp("mha decode, floor", only, strlen(only))) {
        fake_reset();
        int n = lf_begin(ctx) ? -1 : (call_mha(ctx, &a), lf_end(ctx));
        if (n != 1) {
            fprintf(stderr, "host_cost: recorded %d launches of one decode call (1 expected)\n", n);
            bad = 1;
        } else {
            bad |= measure("mha decode, floor (bare launch)", ctx, call_floor, NULL);
        }
    }
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
