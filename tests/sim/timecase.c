/* timecase.c - one kernel/shape pair, timed on a GPU or predicted by the simulator's timing mode.
 *
 *   timecase [--iters N] WORDS...      (one case: key=value words)
 *   timecase [--iters N] --cases FILE  (one case per line; '#' comments)
 *
 * The same binary runs on both devices (it opens libcuda.so.1 with dlopen, as sim_mha does):
 *   - on a GPU: the call (fa4_mha_fwd or fa4_mla_sparse_fwd; a split-KV call is the split kernel and
 *     its combine) runs 3 times to warm up, then N times (default 20) back to back between two CUDA
 *     events; prints `TIME <case> us=<mean per call>`. Inputs stay resident: small shapes are L2-warm.
 *   - on the simulator with FA4SIM_TIMING=h100|b200 (LD_LIBRARY_PATH=build/sim): one call, each launch
 *     of it predicted (tests/sim/timing.h); prints `PRED <case> us=<sum of its launches> ...` and the
 *     simulator's line per launch. No output is checked here: sim_mha/sim_mla check numerics.
 *
 * Keys (defaults in brackets):
 *   kind=mha|mla [mha]     target=sm90a|sm100a [sm90a]     dtype=bf16|fp16|e4m3 [bf16]
 *   mha: batch [1] sq sk hq hkv [hq] qk [128] ov [qk] mask=none|causal [none] splits [1]
 *        mod=softcap30 (a score_mod; NVRTC) config="WORDS"
 *   mla: sq skv hq [128] dqk [576] topk [2048] config="WORDS" (indices: each row's topk distinct keys,
 *        spread over s_kv); dtype=e4m3: fp8 kv (sm100a), every scale 1
 * Inputs are U(-1, 1) from a fixed seed. Exit 1 when a call fails.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa4.h"
#include "harness.h"

typedef struct Case {
    int mla, target, dtype, batch, sq, sk, hq, hkv, qk, ov, causal, splits, mod, topk;
    char config[256];
    char text[512];
} Case;

static const char *const SOFTCAP30 =
    "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"
    "{ return 30.0f * tanhf(s * (1.0f / 30.0f)); }\n";

static int parse_case(char words[][WORD_MAX], int n, Case *c, char *err, size_t en)
{
    memset(c, 0, sizeof *c);
    c->dtype = FA4_BF16, c->target = FA4_TARGET_SM90A, c->batch = 1, c->qk = -1, c->ov = -1, c->hkv = -1;
    c->splits = 1, c->topk = 2048, c->hq = -1;
    size_t tl = 0;
    for (int i = 0; i < n; i++) {
        char *eq = strchr(words[i], '=');
        if (!eq) return errf(err, en, "word %s: want key=value", words[i]);
        *eq = 0;
        const char *k = words[i], *v = eq + 1;
        int r = 0, x = 0;
        if (!strcmp(k, "kind")) { static const char *const kn[] = {"mha", "mla"}; r = word_choice(k, v, kn, 2, &c->mla, err, en); }
        else if (!strcmp(k, "target")) { static const char *const tn[] = {"sm90a", "sm100a", "sm103a"}; r = word_choice(k, v, tn, 3, &x, err, en); c->target = (fa4_target)(FA4_TARGET_SM90A + x); }
        else if (!strcmp(k, "dtype")) { static const char *const dn[] = {"bf16", "fp16", "e4m3"}; r = word_choice(k, v, dn, 3, &x, err, en); c->dtype = x == 0 ? FA4_BF16 : x == 1 ? FA4_FP16 : FA4_E4M3; }
        else if (!strcmp(k, "batch")) r = word_int(k, v, 1, 4096, &c->batch, err, en);
        else if (!strcmp(k, "sq")) r = word_int(k, v, 1, 1 << 20, &c->sq, err, en);
        else if (!strcmp(k, "sk") || !strcmp(k, "skv")) r = word_int(k, v, 1, 1 << 20, &c->sk, err, en);
        else if (!strcmp(k, "hq")) r = word_int(k, v, 1, 4096, &c->hq, err, en);
        else if (!strcmp(k, "hkv")) r = word_int(k, v, 1, 4096, &c->hkv, err, en);
        else if (!strcmp(k, "qk") || !strcmp(k, "dqk")) r = word_int(k, v, 1, 1024, &c->qk, err, en);
        else if (!strcmp(k, "ov")) r = word_int(k, v, 1, 1024, &c->ov, err, en);
        else if (!strcmp(k, "topk")) r = word_int(k, v, 1, 1 << 16, &c->topk, err, en);
        else if (!strcmp(k, "splits")) r = word_int(k, v, 0, 64, &c->splits, err, en);
        else if (!strcmp(k, "mask")) { static const char *const mn[] = {"none", "causal"}; r = word_choice(k, v, mn, 2, &c->causal, err, en); }
        else if (!strcmp(k, "mod")) { static const char *const on[] = {"none", "softcap30"}; r = word_choice(k, v, on, 2, &c->mod, err, en); }
        else if (!strcmp(k, "config")) r = word_config(v, c->config, sizeof c->config, err, en);
        else return errf(err, en, "unknown key %s", k);
        if (r) return r;
        int w = snprintf(c->text + tl, sizeof c->text - tl, "%s%s=%s", tl ? " " : "", k, v);
        if (w > 0 && tl + (size_t)w < sizeof c->text) tl += (size_t)w;
    }
    if (!c->sq || !c->sk) return errf(err, en, "sq and sk (skv) are required");
    if (c->hq < 0) c->hq = c->mla ? 128 : 16;
    if (c->hkv < 0) c->hkv = c->hq;
    if (c->qk < 0) c->qk = c->mla ? 576 : 128;
    if (c->ov < 0) c->ov = c->qk;
    return 0;
}

typedef struct Ev {
    CUresult (*Create)(CUevent *, unsigned);
    CUresult (*Record)(CUevent, CUstream);
    CUresult (*Sync)(CUevent);
    CUresult (*Elapsed)(float *, CUevent, CUevent);
} Ev;

typedef struct Bufs { CUdeviceptr p[8]; size_t n[8]; int k; } Bufs;

static CUdeviceptr dalloc(Cu *cu, Bufs *b, size_t bytes, uint64_t *rng, int fill_bf16)
{
    CUdeviceptr d = 0;
    if (cu->MemAlloc(&d, bytes ? bytes : 16)) return 0;
    b->p[b->k] = d, b->n[b->k++] = bytes;
    if (fill_bf16) {
        uint16_t *h = malloc(bytes);
        if (!h) return 0;
        for (size_t i = 0; i < bytes / 2; i++) {
            double u = (double)(splitmix64(rng) >> 11) / 9007199254740992.0 * 2 - 1;
            float f = (float)u;
            uint32_t x;
            memcpy(&x, &f, 4);
            h[i] = (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16); /* bf16; for fp16 / e4m3 just bits */
            if (fill_bf16 == 2) h[i] &= 0x3bff; /* fp16: keep |x| < 1 */
            if (fill_bf16 == 3) h[i] &= 0x3737; /* e4m3 pairs: small finite values */
        }
        cu->MemcpyHtoD(d, h, bytes);
        free(h);
    } else {
        cu->MemsetD8(d, 0, bytes);
    }
    return d;
}

/* One call of the case's op. */
typedef struct Call { fa4_ctx *ctx; fa4_mha_args mha; fa4_mla_sparse_args mla; int mla_on; } Call;

static fa4_status call(Call *k) { return k->mla_on ? fa4_mla_sparse_fwd(k->ctx, &k->mla, NULL) : fa4_mha_fwd(k->ctx, &k->mha, NULL); }

static int setup(Cu *cu, const Case *c, Call *k, Bufs *b, char *err, size_t en)
{
    uint64_t rng = 0x5eed ^ fnv1a(c->text, strlen(c->text), 1469598103934665603ull);
    int fill = c->dtype == FA4_FP16 ? 2 : c->dtype == FA4_E4M3 ? 3 : 1;
    size_t es = c->dtype == FA4_E4M3 ? 1 : 2;
    if (c->mla) {
        int dv = 512;
        fa4_mla_sparse_args a = FA4_MLA_SPARSE_ARGS_INIT;
        a.q = (void *)(uintptr_t)dalloc(cu, b, (size_t)c->sq * c->hq * c->qk * 2, &rng, 1);
        a.kv = (void *)(uintptr_t)dalloc(cu, b, (size_t)c->sk * c->qk * es, &rng, es == 1 ? 3 : 1);
        a.kv_dtype = c->dtype == FA4_E4M3 ? FA4_E4M3 : FA4_BF16; /* fp8 kv: e4m3 bytes, every scale 1 */
        a.out = (void *)(uintptr_t)dalloc(cu, b, (size_t)c->sq * c->hq * dv * 2, &rng, 0);
        a.lse = (float *)(uintptr_t)dalloc(cu, b, (size_t)c->sq * c->hq * 4, &rng, 0);
        int32_t *idx = malloc((size_t)c->sq * c->topk * 4);
        if (!idx) return errf(err, en, "out of memory");
        for (int q = 0; q < c->sq; q++)
            for (int j = 0; j < c->topk; j++)
                idx[(size_t)q * c->topk + j] = (int32_t)(((int64_t)j * c->sk / c->topk + q * 7) % c->sk);
        CUdeviceptr di = dalloc(cu, b, (size_t)c->sq * c->topk * 4, &rng, 0);
        cu->MemcpyHtoD(di, idx, (size_t)c->sq * c->topk * 4);
        free(idx);
        a.indices = (const int32_t *)(uintptr_t)di;
        a.s_q = c->sq, a.s_kv = c->sk, a.h_q = c->hq, a.d_qk = c->qk, a.topk = c->topk;
        a.config = c->config[0] ? c->config : NULL;
        k->mla = a, k->mla_on = 1;
        return 0;
    }
    fa4_mha_args a = FA4_MHA_ARGS_INIT;
    a.dtype = c->dtype;
    a.q = (void *)(uintptr_t)dalloc(cu, b, (size_t)c->batch * c->sq * c->hq * c->qk * es, &rng, fill);
    a.k = (void *)(uintptr_t)dalloc(cu, b, (size_t)c->batch * c->sk * c->hkv * c->qk * es, &rng, fill);
    a.v = (void *)(uintptr_t)dalloc(cu, b, (size_t)c->batch * c->sk * c->hkv * c->ov * es, &rng, fill);
    a.o = (void *)(uintptr_t)dalloc(cu, b, (size_t)c->batch * c->sq * c->hq * c->ov * 2, &rng, 0);
    a.lse = (float *)(uintptr_t)dalloc(cu, b, (size_t)c->batch * c->sq * c->hq * 4, &rng, 0);
    a.batch = c->batch, a.seqlen_q = c->sq, a.seqlen_k = c->sk, a.heads_q = c->hq, a.heads_kv = c->hkv;
    a.qk_depth = c->qk, a.ov_depth = c->ov;
    a.mask = c->causal ? FA4_MASK_CAUSAL : FA4_MASK_NONE;
    a.config = c->config[0] ? c->config : NULL;
    if (c->mod) a.score_mod = SOFTCAP30;
    if (c->splits != 1) {
        a.num_splits = c->splits;
        int ns = 0;
        size_t ws = 0;
        fa4_status st = fa4_mha_split_count(k->ctx, &a, &ns, &ws);
        if (st) return errf(err, en, "fa4_mha_split_count: %s", fa4_status_string(st));
        a.workspace = (void *)(uintptr_t)dalloc(cu, b, ws, &rng, 0);
        a.workspace_size = ws;
    }
    k->mha = a;
    return 0;
}

static int run_case(Cu *cu, const Ev *ev, const Case *c, int iters)
{
    char err[512];
    Call k;
    memset(&k, 0, sizeof k);
    fa4_options o = FA4_OPTIONS_INIT;
    o.target = c->target;
    fa4_status st = fa4_create(&k.ctx, &o);
    if (st) { printf("FAIL %s fa4_create: %s\n", c->text, fa4_status_string(st)); return 1; }
    Bufs b = {{0}, {0}, 0};
    int rc = 0;
    void *lib = cu->lib;
    const char *(*last)(void) = (const char *(*)(void))dlsym(lib, "fa4sim_timing_last");
    void (*reset)(void) = (void (*)(void))dlsym(lib, "fa4sim_timing_reset");
    double (*total)(void) = (double (*)(void))dlsym(lib, "fa4sim_timing_total_us");
    if (setup(cu, c, &k, &b, err, sizeof err)) { printf("FAIL %s %s\n", c->text, err); rc = 1; goto done; }
    if (last && total && reset) { /* the simulator in timing mode: one call, predicted */
        reset();
        st = call(&k);
        if (!st) st = cu->CtxSynchronize() ? FA4_ERR_CUDA : FA4_OK;
        if (st) { printf("FAIL %s %s: %s\n", c->text, fa4_status_string(st), fa4_last_error(k.ctx)); rc = 1; goto done; }
        printf("PRED %s us=%.2f\n", c->text, total());
        goto done;
    }
    if (!ev->Create) { printf("FAIL %s: no CUDA events and no timing simulator\n", c->text); rc = 1; goto done; }
    for (int i = 0; i < 3 && !st; i++) st = call(&k);
    CUevent e0, e1;
    if (!st && (ev->Create(&e0, 0) || ev->Create(&e1, 0))) st = FA4_ERR_CUDA;
    if (!st) {
        ev->Record(e0, NULL);
        for (int i = 0; i < iters && !st; i++) st = call(&k);
        ev->Record(e1, NULL);
        ev->Sync(e1);
    }
    float ms = 0;
    if (!st && ev->Elapsed(&ms, e0, e1)) st = FA4_ERR_CUDA;
    if (st) { printf("FAIL %s %s: %s\n", c->text, fa4_status_string(st), fa4_last_error(k.ctx)); rc = 1; goto done; }
    printf("TIME %s us=%.2f\n", c->text, 1000.0 * ms / iters);
done:
    fflush(stdout);
    for (int i = 0; i < b.k; i++) cu->MemFree(b.p[i]);
    fa4_destroy(k.ctx);
    return rc;
}

int main(int argc, char **argv)
{
    int iters = 20, ai = 1;
    const char *file = NULL;
    while (ai < argc && !strncmp(argv[ai], "--", 2)) {
        if (!strcmp(argv[ai], "--iters") && ai + 1 < argc) iters = atoi(argv[++ai]);
        else if (!strcmp(argv[ai], "--cases") && ai + 1 < argc) file = argv[++ai];
        else { fprintf(stderr, "usage: timecase [--iters N] (--cases FILE | key=value...)\n"); return 2; }
        ai++;
    }
    if (iters < 1) iters = 1;
    Cu cu;
    char err[512];
    if (cu_open(&cu, err, sizeof err)) { fprintf(stderr, "timecase: %s\n", err); return 2; }
    Ev ev = {(CUresult(*)(CUevent *, unsigned))dlsym(cu.lib, "cuEventCreate"),
             (CUresult(*)(CUevent, CUstream))dlsym(cu.lib, "cuEventRecord"),
             (CUresult(*)(CUevent))dlsym(cu.lib, "cuEventSynchronize"),
             (CUresult(*)(float *, CUevent, CUevent))dlsym(cu.lib, "cuEventElapsedTime")};
    int fails = 0, runs = 0;
    char words[WORDS_MAX][WORD_MAX];
    Case c;
    if (file) {
        FILE *f = fopen(file, "r");
        if (!f) { fprintf(stderr, "timecase: %s: cannot open\n", file); return 2; }
        char line[LINE_MAX_CHARS];
        while (fgets(line, sizeof line, f)) {
            int n = split_words(line, words, WORDS_MAX, err, sizeof err);
            if (n < 0 || (n > 0 && parse_case(words, n, &c, err, sizeof err))) { fprintf(stderr, "timecase: %s\n", err); fails++; continue; }
            if (!n) continue;
            runs++;
            fails += run_case(&cu, &ev, &c, iters);
        }
        fclose(f);
    } else {
        int n = 0;
        for (; ai < argc && n < WORDS_MAX; ai++) snprintf(words[n++], WORD_MAX, "%s", argv[ai]);
        if (!n || parse_case(words, n, &c, err, sizeof err)) { fprintf(stderr, "timecase: %s\n", n ? err : "no case"); return 2; }
        runs++;
        fails += run_case(&cu, &ev, &c, iters);
    }
    printf("timecase: %d run, %d failed\n", runs, fails);
    return fails ? 1 : 0;
}
