/* sim_bwd.c - attention backward cases through fa4_mha_bwd, checked against the fp64 host reference
 * (ref_mha_bwd.c), which knows nothing of the kernels' tiles, workspace or layouts.
 *
 * Like sim_mha it dlopens libcuda.so.1, so the same binary runs on the CPU simulator
 * (LD_LIBRARY_PATH=build/sim, FA4SIM_CC=90 or 100; tests/sim/run.sh) and on a GPU; the runtime picks the
 * kernels of the device's target (sm90a or sm100a).
 *
 *   sim_bwd [--cases FILE] [--seed N] [--quiet] [CASE WORDS...]
 *
 * A case is one line of key=value words (tests/sim/cases_bwd_sm90.txt):
 *   dtype=bf16|fp16 d=64|128|256 hq=H hkv=H mask=none|causal|window:L,R
 *   batch=B sq=N sk=N          dense [batch, seqlen, heads, depth]
 *   q=L0,L1,.. k=L0,L1,..      varlen instead: per-sequence query and key lengths (0 allowed)
 *   tail=N                     varlen: packed rows after the last sequence (rows of no sequence: their dQ, dK,
 *                              dV must keep their poison)
 *   layout=packed|strided      strided: every tensor's head, seq and batch strides padded (padding poisoned;
 *                              dq/dk/dv padding must stay untouched)
 *   scale=X amp=X              softmax_scale (0: 1/sqrt(d)); Q is U(-amp, amp) (default 1)
 *   sink=rand                  a sink logit per head, U(-2, 2), and dsink checked
 *   dlse=rand                  dL/dLSE per row U(-1, 1) (fa4_mha_bwd_args.dlse)
 *   softcap=X                  the forward's soft-cap (s = X tanh(s / X)); 0: none
 *   config=WORDS               fa4_mha_bwd_args.config, commas for spaces ("bm=64,stages=1")
 *   det=1                      fa4_mha_bwd_args.deterministic = 1 (dQ added in kv-block order)
 *   runs=N                     call the backward N times (outputs and workspace poisoned again each time) and
 *                              compare dQ, dK, dV and the workspace (its f32 dQ sums) bit for bit with the
 *                              first call's: det=1 must match (FAIL otherwise); det=0 prints how many dQ and
 *                              accumulator elements differed (dq_differ=N accum_differ=N)
 *   resident=K                 the simulator runs K clusters at once for this case (FA4SIM_RESIDENT; ignored
 *                              on a GPU): CTAs meeting in the dQ accumulator interleave, each call differently
 * Inputs: Q, K, V, dO uniform from a stream seeded by the case text and --seed; O and LSE are the
 * reference forward's (O rounded to the dtype, LSE to f32): the backward alone is under test. The outputs
 * and the workspace are filled with 0xFF (NaN) before the call.
 * Checks: rel L2 of dQ, dK, dV each <= 1e-2 over the case (fp16: the same), no NaN; dsink within 1e-2
 * relative (of max(1, |ref|)); rows of no sequence and stride padding untouched. One line per case:
 * PASS|FAIL <case> dq=.. dk=.. dv=.. [dsink=..]; then 'sim_bwd: N passed, N failed'. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "fa4.h"
#include "harness.h"
#include "ref_mha_bwd.h"

enum { MAX_SEQ = 32, LINE = 512, PAD_HEAD = 8, PAD_SEQ = 16, PAD_BATCH = 64 /* elements */ };
#define REL_L2_TOL 1e-2
#define SINK_TOL 1e-2

typedef struct {
    RefDtype dtype;
    int d, hq, hkv, mask, wl, wr, batch, sq, sk, varlen, nseq, tail, strided, sink, dlse, det, runs, resident;
    double softcap;
    int lq[MAX_SEQ], lk[MAX_SEQ];
    double scale, amp;
    char config[128];
    char text[LINE];
} Case;

static int parse_list(const char *v, int *out, int *count)
{
    *count = 0;
    for (const char *s = v; *s;) {
        char *end;
        long x = strtol(s, &end, 10);
        if (end == s || x < 0 || x > 100000 || *count >= MAX_SEQ) return -1;
        out[(*count)++] = (int)x;
        if (*end && *end != ',') return -1;
        s = *end == ',' ? end + 1 : end;
    }
    return *count ? 0 : -1;
}

static int parse_case(const char *line, Case *c, char *err, size_t n)
{
    memset(c, 0, sizeof *c);
    c->dtype = REF_BF16, c->d = 128, c->hq = 2, c->hkv = 2, c->batch = 1, c->amp = 1.0;
    snprintf(c->text, sizeof c->text, "%s", line);
    c->text[strcspn(c->text, "\n")] = 0;
    char buf[LINE];
    snprintf(buf, sizeof buf, "%s", line);
    int nk = -1;
    char *cur = buf, *w, *v;
    int got;
    while ((got = kv_next(&cur, &w, &v, err, n)) > 0) {
        int x = atoi(v);
        if (!strcmp(w, "dtype")) c->dtype = !strcmp(v, "fp16") ? REF_FP16 : REF_BF16;
        else if (!strcmp(w, "d")) c->d = x;
        else if (!strcmp(w, "hq")) c->hq = x;
        else if (!strcmp(w, "hkv")) c->hkv = x;
        else if (!strcmp(w, "batch")) c->batch = x;
        else if (!strcmp(w, "sq")) c->sq = x;
        else if (!strcmp(w, "sk")) c->sk = x;
        else if (!strcmp(w, "tail")) c->tail = x;
        else if (!strcmp(w, "scale")) c->scale = atof(v);
        else if (!strcmp(w, "amp")) c->amp = atof(v);
        else if (!strcmp(w, "sink")) c->sink = !strcmp(v, "rand");
        else if (!strcmp(w, "dlse")) c->dlse = !strcmp(v, "rand");
        else if (!strcmp(w, "softcap")) c->softcap = atof(v);
        else if (!strcmp(w, "layout")) c->strided = !strcmp(v, "strided");
        else if (!strcmp(w, "mask")) {
            if (!strcmp(v, "none")) c->mask = REF_MASK_NONE;
            else if (!strcmp(v, "causal")) c->mask = REF_MASK_CAUSAL;
            else if (sscanf(v, "window:%d,%d", &c->wl, &c->wr) == 2) c->mask = REF_MASK_WINDOW;
            else return snprintf(err, n, "mask '%s'", v), -1;
        } else if (!strcmp(w, "q")) {
            if (parse_list(v, c->lq, &c->nseq)) return snprintf(err, n, "q list '%s'", v), -1;
            c->varlen = 1;
        } else if (!strcmp(w, "k")) {
            if (parse_list(v, c->lk, &nk)) return snprintf(err, n, "k list '%s'", v), -1;
        } else if (!strcmp(w, "det")) {
            c->det = atoi(v);
        } else if (!strcmp(w, "runs")) {
            c->runs = atoi(v);
            if (c->runs < 1 || c->runs > 8) return snprintf(err, n, "runs '%s': use 1..8", v), -1;
        } else if (!strcmp(w, "resident")) {
            c->resident = atoi(v);
            if (c->resident < 1 || c->resident > 16) return snprintf(err, n, "resident '%s': use 1..16", v), -1;
        } else if (!strcmp(w, "config")) {
            snprintf(c->config, sizeof c->config, "%s", v);
            for (char *s = c->config; *s; s++)
                if (*s == ',') *s = ' ';
        } else {
            return snprintf(err, n, "unknown key '%s'", w), -1;
        }
    }
    if (got < 0) return -1;
    if (c->varlen && nk != c->nseq) return snprintf(err, n, "q= and k= need the same number of lengths"), -1;
    if (!c->varlen && (c->sq < 1 || c->sk < 1)) return snprintf(err, n, "give sq= and sk=, or q= and k="), -1;
    if (c->varlen && c->strided) return snprintf(err, n, "layout=strided is for dense cases"), -1;
    if (c->hq < 1 || c->hkv < 1 || c->hq % c->hkv) return snprintf(err, n, "hq must be a multiple of hkv"), -1;
    return 0;
}

static double uniform(uint64_t *s) { return (double)(splitmix64(s) >> 11) * 0x1p-53 * 2.0 - 1.0; }

/* A tensor's layout: element strides (batch, seq, head) and its element count (with padding). */
typedef struct { int64_t st[3]; size_t elems; } Lay;

static Lay layout(const Case *c, int batch, int seq, int heads)
{
    Lay l;
    int pad = c->strided;
    l.st[2] = c->d + pad * PAD_HEAD;
    l.st[1] = l.st[2] * heads + pad * PAD_SEQ;
    l.st[0] = l.st[1] * seq + pad * PAD_BATCH;
    l.elems = (size_t)l.st[0] * (size_t)batch;
    return l;
}

static void *alloc_fill(RefDtype dt, size_t elems, uint64_t *st, double amp)
{
    unsigned char *p = malloc(elems * (size_t)ref_dtype_bytes(dt) + 16);
    if (p)
        for (size_t i = 0; i < elems; i++) ref_store(dt, p, (int64_t)i, amp * uniform(st));
    return p;
}

typedef struct { double num[3], den[3], sink_err; long nan, poison_bad; } Score;

/* One sequence (or the whole dense batch): the reference from the tensors at row offsets q0 / k0. */
typedef struct {
    const Case *c;
    int batch, lq, lk, q0, k0;
    const void *hq, *hk, *hv, *hdo;
    Lay lq_, lk_;
} View;

static int reference(const View *v, const double *sink, const double *dlse, double *o, double *lse, double *dq, double *dk, double *dv,
                     double *dsink)
{
    const Case *c = v->c;
    int eb = ref_dtype_bytes(c->dtype);
    RefBwd p;
    memset(&p, 0, sizeof p);
    p.dtype = c->dtype;
    p.q.data = (const unsigned char *)v->hq + (size_t)v->q0 * v->lq_.st[1] * eb;
    p.dout.data = (const unsigned char *)v->hdo + (size_t)v->q0 * v->lq_.st[1] * eb;
    p.k.data = (const unsigned char *)v->hk + (size_t)v->k0 * v->lk_.st[1] * eb;
    p.v.data = (const unsigned char *)v->hv + (size_t)v->k0 * v->lk_.st[1] * eb;
    memcpy(p.q.stride, v->lq_.st, sizeof p.q.stride);
    memcpy(p.dout.stride, v->lq_.st, sizeof p.dout.stride);
    memcpy(p.k.stride, v->lk_.st, sizeof p.k.stride);
    memcpy(p.v.stride, v->lk_.st, sizeof p.v.stride);
    p.batch = v->batch, p.seqlen_q = v->lq, p.seqlen_k = v->lk, p.heads_q = c->hq, p.heads_kv = c->hkv, p.depth = c->d;
    p.mask = (RefMask)c->mask, p.window_left = c->wl, p.window_right = c->wr;
    p.softmax_scale = c->scale;
    p.sink = sink;
    p.dlse = dlse;
    p.softcap = c->softcap;
    char err[256];
    if (ref_mha_bwd(&p, o, lse, dq, dk, dv, dsink, err, sizeof err)) return fprintf(stderr, "%s\n", err), -1;
    return 0;
}

static int run_case(Cu *cu, fa4_ctx *fa, const Case *c, uint64_t seed, int quiet)
{
    int cu_q[MAX_SEQ + 1] = {0}, cu_k[MAX_SEQ + 1] = {0}, max_q = 1, max_k = 1, nseq = c->varlen ? c->nseq : 1;
    if (c->varlen)
        for (int b = 0; b < c->nseq; b++) {
            cu_q[b + 1] = cu_q[b] + c->lq[b], cu_k[b + 1] = cu_k[b] + c->lk[b];
            if (c->lq[b] > max_q) max_q = c->lq[b];
            if (c->lk[b] > max_k) max_k = c->lk[b];
        }
    int B = c->varlen ? 1 : c->batch;
    int SQ = c->varlen ? cu_q[c->nseq] + c->tail : c->sq, SK = c->varlen ? cu_k[c->nseq] + c->tail : c->sk;
    if (SQ < 1) SQ = 1;
    if (SK < 1) SK = 1;
    int eb = ref_dtype_bytes(c->dtype), d = c->d;
    Lay lq = layout(c, B, SQ, c->hq), lk = layout(c, B, SK, c->hkv);
    uint64_t st = seed * 0x9e3779b97f4a7c15ull;
    for (const char *s = c->text; *s; s++) st = (st ^ (unsigned char)*s) * 0x100000001b3ull;
    void *hq = alloc_fill(c->dtype, lq.elems, &st, c->amp), *hk = alloc_fill(c->dtype, lk.elems, &st, 1.0);
    void *hv = alloc_fill(c->dtype, lk.elems, &st, 1.0), *hdo = alloc_fill(c->dtype, lq.elems, &st, 1.0);
    unsigned char *ho = malloc(lq.elems * eb), *gdq = malloc(lq.elems * eb), *gdk = malloc(lk.elems * eb);
    unsigned char *gdv = malloc(lk.elems * eb);
    size_t nq = (size_t)B * SQ * c->hq * d, nk = (size_t)B * SK * c->hkv * d, nl = (size_t)B * c->hq * SQ;
    double *ro = calloc(nq, sizeof *ro), *rdq = calloc(nq, sizeof *rdq), *rdk = calloc(nk, sizeof *rdk);
    double *rdv = calloc(nk, sizeof *rdv), *rl = malloc(nl * sizeof *rl), *rsink = calloc((size_t)c->hq, sizeof *rsink);
    double *sinkv = calloc((size_t)c->hq, sizeof *sinkv), *part = calloc((size_t)c->hq, sizeof *part);
    float *hl = malloc(nl * sizeof *hl), *hsink = malloc((size_t)c->hq * sizeof *hsink);
    float *gsink = malloc((size_t)c->hq * sizeof *gsink), *hg = malloc(nl * sizeof *hg);
    CUdeviceptr dq = 0, dk = 0, dv = 0, dO = 0, ddo = 0, dl = 0, ddq = 0, ddk = 0, ddv = 0, dcq = 0, dck = 0, dws = 0;
    CUdeviceptr ds = 0, dds = 0, dg = 0;
    const char *why = NULL;
    int rc = -1;
    Score sc;
    memset(&sc, 0, sizeof sc);
    if (!hq || !hk || !hv || !hdo || !ho || !gdq || !gdk || !gdv || !ro || !rdq || !rdk || !rdv || !rl || !rsink ||
        !sinkv || !part || !hl || !hsink || !gsink || !hg) {
        why = "out of host memory";
        goto done;
    }
    for (int h = 0; h < c->hq; h++) sinkv[h] = 2.0 * uniform(&st), hsink[h] = (float)sinkv[h];
    for (size_t i = 0; i < nl; i++) hg[i] = c->dlse ? (float)uniform(&st) : 0.0f;
    memset(ho, 0xFF, lq.elems * eb);
    for (size_t i = 0; i < nl; i++) rl[i] = -INFINITY;
    /* the reference, per sequence (varlen) or for the whole batch; its outputs land at the tensors' rows */
    for (int b = 0; b < nseq; b++) {
        View v = {c, c->varlen ? 1 : B, c->varlen ? c->lq[b] : SQ, c->varlen ? c->lk[b] : SK, cu_q[b], cu_k[b],
                  hq, hk, hv, hdo, lq, lk};
        if (!v.lq) continue;
        size_t vq = (size_t)v.batch * v.lq * c->hq * d, vk = (size_t)v.batch * (v.lk ? v.lk : 1) * c->hkv * d;
        double *o = calloc(vq, sizeof *o), *l = malloc((size_t)v.batch * c->hq * v.lq * sizeof *l);
        double *xq = calloc(vq, sizeof *xq), *xk = calloc(vk, sizeof *xk), *xv = calloc(vk, sizeof *xv);
        double *g = malloc((size_t)v.batch * c->hq * v.lq * sizeof *g);
        if (!o || !l || !xq || !xk || !xv || !g) {
            free(o), free(l), free(xq), free(xk), free(xv), free(g);
            why = "out of host memory";
            goto done;
        }
        for (int bb = 0; bb < v.batch; bb++) /* dL/dLSE of the view's rows, from the kernel's LSE layout */
            for (int h = 0; h < c->hq; h++)
                for (int i = 0; i < v.lq; i++)
                    g[((size_t)bb * c->hq + h) * v.lq + i] =
                        hg[c->varlen ? (size_t)h * SQ + v.q0 + i : ((size_t)bb * c->hq + h) * SQ + i];
        if (v.lk) {
            if (reference(&v, c->sink ? sinkv : NULL, c->dlse ? g : NULL, o, l, xq, xk, xv, part)) {
                free(o), free(l), free(xq), free(xk), free(xv), free(g);
                why = "reference failed";
                goto done;
            }
            for (int h = 0; h < c->hq; h++) rsink[h] += part[h];
        } else {
            for (size_t i = 0; i < (size_t)c->hq * v.lq; i++) l[i] = -INFINITY;
        }
        /* packed [batch, lq, hq, d] of the view into the case's full arrays, and O into the kernel's layout */
        for (int bb = 0; bb < v.batch; bb++)
            for (int i = 0; i < v.lq; i++)
                for (int h = 0; h < c->hq; h++) {
                    int row = v.q0 + i, gb = c->varlen ? 0 : bb;
                    for (int x = 0; x < d; x++) {
                        size_t src = (((size_t)bb * v.lq + i) * c->hq + h) * d + x;
                        size_t dst = (((size_t)gb * SQ + row) * c->hq + h) * d + x;
                        ro[dst] = o[src], rdq[dst] = xq[src];
                        ref_store(c->dtype, ho, gb * lq.st[0] + row * lq.st[1] + h * lq.st[2] + x, o[src]);
                    }
                    size_t li = c->varlen ? (size_t)h * SQ + row : ((size_t)gb * c->hq + h) * SQ + i;
                    rl[li] = l[((size_t)bb * c->hq + h) * v.lq + i];
                }
        for (int bb = 0; v.lk && bb < v.batch; bb++)
            for (int j = 0; j < v.lk; j++)
                for (int h = 0; h < c->hkv; h++)
                    for (int x = 0; x < d; x++) {
                        size_t src = (((size_t)bb * v.lk + j) * c->hkv + h) * d + x;
                        size_t dst = ((((size_t)(c->varlen ? 0 : bb)) * SK + v.k0 + j) * c->hkv + h) * d + x;
                        rdk[dst] = xk[src], rdv[dst] = xv[src];
                    }
        free(o), free(l), free(xq), free(xk), free(xv), free(g);
    }
    for (size_t i = 0; i < nl; i++) hl[i] = (float)rl[i];

    fa4_mha_bwd_args a = FA4_MHA_BWD_ARGS_INIT;
    a.dtype = c->dtype == REF_FP16 ? FA4_FP16 : FA4_BF16;
    a.batch = c->varlen ? c->nseq : B, a.seqlen_q = SQ, a.seqlen_k = SK, a.heads_q = c->hq, a.heads_kv = c->hkv;
    a.qk_depth = a.ov_depth = d;
    for (int i = 0; i < 3; i++) {
        a.q_stride[i] = a.o_stride[i] = a.do_stride[i] = a.dq_stride[i] = c->strided ? lq.st[i] : 0;
        a.k_stride[i] = a.v_stride[i] = a.dk_stride[i] = a.dv_stride[i] = c->strided ? lk.st[i] : 0;
    }
    a.softmax_scale = (float)c->scale;
    a.softcap = (float)c->softcap;
    a.mask = c->mask == REF_MASK_CAUSAL ? FA4_MASK_CAUSAL : c->mask == REF_MASK_WINDOW ? FA4_MASK_WINDOW : FA4_MASK_NONE;
    a.window_left = c->wl, a.window_right = c->wr;
    a.config = c->config[0] ? c->config : NULL;
    a.deterministic = c->det;
    if (c->varlen) {
        a.max_seqlen_q = max_q, a.max_seqlen_k = max_k;
        a.cu_seqlens_q_host = cu_q, a.cu_seqlens_k_host = cu_k;
        a.cu_seqlens_q = (const int32_t *)(uintptr_t)16, a.cu_seqlens_k = (const int32_t *)(uintptr_t)16; /* sizing */
    }
    if (c->sink) a.sink = (const float *)(uintptr_t)4, a.dsink = (float *)(uintptr_t)4;
    size_t ws = 0;
    if (fa4_mha_bwd_workspace_size(fa, &a, &ws)) {
        printf("FAIL %s\n  fa4_mha_bwd_workspace_size: %s\n", c->text, fa4_last_error(fa));
        rc = 1;
        goto done;
    }
    if (cu->MemAlloc(&dq, lq.elems * eb) || cu->MemAlloc(&dk, lk.elems * eb) || cu->MemAlloc(&dv, lk.elems * eb) ||
        cu->MemAlloc(&dO, lq.elems * eb) || cu->MemAlloc(&ddo, lq.elems * eb) || cu->MemAlloc(&dl, nl * 4) ||
        cu->MemAlloc(&ddq, lq.elems * eb) || cu->MemAlloc(&ddk, lk.elems * eb) || cu->MemAlloc(&ddv, lk.elems * eb) ||
        cu->MemAlloc(&dcq, sizeof cu_q) || cu->MemAlloc(&dck, sizeof cu_k) || cu->MemAlloc(&dws, ws ? ws : 16) ||
        cu->MemAlloc(&ds, (size_t)c->hq * 4) || cu->MemAlloc(&dds, (size_t)c->hq * 4) || cu->MemAlloc(&dg, nl * 4) ||
        cu->MemcpyHtoD(dg, hg, nl * 4) ||
        cu->MemcpyHtoD(dq, hq, lq.elems * eb) || cu->MemcpyHtoD(dk, hk, lk.elems * eb) ||
        cu->MemcpyHtoD(dv, hv, lk.elems * eb) || cu->MemcpyHtoD(dO, ho, lq.elems * eb) ||
        cu->MemcpyHtoD(ddo, hdo, lq.elems * eb) || cu->MemcpyHtoD(dl, hl, nl * 4) ||
        cu->MemcpyHtoD(dcq, cu_q, sizeof cu_q) || cu->MemcpyHtoD(dck, cu_k, sizeof cu_k) ||
        cu->MemcpyHtoD(ds, hsink, (size_t)c->hq * 4) || cu->MemsetD8(ddq, 0xFF, lq.elems * eb) ||
        cu->MemsetD8(ddk, 0xFF, lk.elems * eb) || cu->MemsetD8(ddv, 0xFF, lk.elems * eb) ||
        cu->MemsetD8(dws, 0xFF, ws ? ws : 16) || cu->MemsetD8(dds, 0xFF, (size_t)c->hq * 4)) {
        why = "device allocation or copy failed";
        goto done;
    }
    a.q = (const void *)(uintptr_t)dq, a.k = (const void *)(uintptr_t)dk, a.v = (const void *)(uintptr_t)dv;
    a.o = (const void *)(uintptr_t)dO, a.dout = (const void *)(uintptr_t)ddo, a.lse = (const float *)(uintptr_t)dl;
    a.dq = (void *)(uintptr_t)ddq, a.dk = (void *)(uintptr_t)ddk, a.dv = (void *)(uintptr_t)ddv;
    a.workspace = (void *)(uintptr_t)dws, a.workspace_size = ws;
    if (c->varlen) a.cu_seqlens_q = (const int32_t *)(uintptr_t)dcq, a.cu_seqlens_k = (const int32_t *)(uintptr_t)dck;
    if (c->sink) a.sink = (const float *)(uintptr_t)ds, a.dsink = (float *)(uintptr_t)dds;
    if (c->dlse) a.dlse = (const float *)(uintptr_t)dg;
    char cfg[400] = "";
    fa4_mha_bwd_config(fa, &a, cfg, sizeof cfg);
    if (!quiet) printf("  kernel: %s (workspace %zu bytes)\n", cfg, ws);
    double t0 = now_s();
    fa4_status s = fa4_mha_bwd(fa, &a, NULL);
    if (s) {
        printf("FAIL %s\n  fa4_mha_bwd: %s: %s\n", c->text, fa4_status_string(s), fa4_last_error(fa));
        rc = 1;
        goto done;
    }
    if (cu->CtxSynchronize() || cu->MemcpyDtoH(gdq, ddq, lq.elems * eb) || cu->MemcpyDtoH(gdk, ddk, lk.elems * eb) ||
        cu->MemcpyDtoH(gdv, ddv, lk.elems * eb) || cu->MemcpyDtoH(gsink, dds, (size_t)c->hq * 4)) {
        why = "synchronize or copy back failed";
        goto done;
    }
    long differ = 0, run_differ = 0, ws_differ = 0; /* the workspace holds the f32 dQ sums: the finer test */
    for (int r = 1; r < c->runs; r++) { /* the same call again: bit for bit the first call's under det=1 */
        size_t bq = lq.elems * eb, nk2 = lk.elems * eb, nw = ws ? ws : 16;
        unsigned char *x = malloc(bq + 2 * nk2), *w1 = malloc(nw), *w2 = malloc(nw);
        if (!x || !w1 || !w2 || cu->MemcpyDtoH(w1, dws, nw)) {
            free(x), free(w1), free(w2);
            why = "out of host memory";
            goto done;
        }
        if (cu->MemsetD8(ddq, 0xFF, bq) || cu->MemsetD8(ddk, 0xFF, nk2) || cu->MemsetD8(ddv, 0xFF, nk2) ||
            cu->MemsetD8(dws, 0xFF, ws ? ws : 16) || (s = fa4_mha_bwd(fa, &a, NULL)) || cu->CtxSynchronize() ||
            cu->MemcpyDtoH(x, ddq, bq) || cu->MemcpyDtoH(x + bq, ddk, nk2) || cu->MemcpyDtoH(x + bq + nk2, ddv, nk2) ||
            cu->MemcpyDtoH(w2, dws, nw)) {
            free(x), free(w1), free(w2);
            why = "a repeated call failed";
            goto done;
        }
        for (size_t e = 0; e < lq.elems; e++) differ += memcmp(x + e * eb, gdq + e * eb, eb) != 0;
        run_differ += memcmp(x + bq, gdk, nk2) != 0 || memcmp(x + bq + nk2, gdv, nk2) != 0;
        for (size_t e = 0; e + 4 <= nw; e += 4) ws_differ += memcmp(w1 + e, w2 + e, 4) != 0;
        free(x), free(w1), free(w2);
    }
    double t1 = now_s();
    /* compare every element; rows of no sequence (varlen) and padding must hold the poison */
    const struct { const unsigned char *got; const double *want; Lay l; int seq, heads; } out[3] = {
        {gdq, rdq, lq, SQ, c->hq}, {gdk, rdk, lk, SK, c->hkv}, {gdv, rdv, lk, SK, c->hkv}};
    for (int t = 0; t < 3; t++) {
        unsigned char *seen = calloc(out[t].l.elems, 1);
        if (!seen) { why = "out of host memory"; goto done; }
        for (int b = 0; b < B; b++)
            for (int r = 0; r < out[t].seq; r++) {
                int in_seq = !c->varlen;
                for (int q = 0; q < c->nseq && !in_seq; q++)
                    in_seq = t ? r >= cu_k[q] && r < cu_k[q + 1] : r >= cu_q[q] && r < cu_q[q + 1];
                for (int h = 0; h < out[t].heads; h++)
                    for (int x = 0; x < d; x++) {
                        int64_t e = b * out[t].l.st[0] + r * out[t].l.st[1] + h * out[t].l.st[2] + x;
                        seen[e] = 1;
                        double g = ref_load(c->dtype, out[t].got, e);
                        uint16_t raw;
                        memcpy(&raw, out[t].got + e * eb, 2);
                        if (!in_seq) {
                            sc.poison_bad += raw != 0xFFFF;
                            continue;
                        }
                        double w = out[t].want[(((size_t)b * out[t].seq + r) * out[t].heads + h) * d + x];
                        if (isnan(g)) { sc.nan++; continue; }
                        sc.num[t] += (g - w) * (g - w), sc.den[t] += w * w;
                    }
            }
        for (size_t e = 0; e < out[t].l.elems; e++) {
            uint16_t raw;
            memcpy(&raw, out[t].got + e * eb, 2);
            if (!seen[e]) sc.poison_bad += raw != 0xFFFF;
        }
        free(seen);
    }
    for (int h = 0; c->sink && h < c->hq; h++) {
        double err = fabs((double)gsink[h] - rsink[h]) / fmax(1.0, fabs(rsink[h]));
        if (isnan(gsink[h])) sc.nan++;
        else if (err > sc.sink_err) sc.sink_err = err;
    }
    {
        double rel[3];
        int ok = !sc.nan && !sc.poison_bad && (!c->sink || sc.sink_err <= SINK_TOL) &&
                 (!c->det || (!differ && !run_differ && !ws_differ));
        for (int t = 0; t < 3; t++) {
            rel[t] = sc.den[t] > 0 ? sqrt(sc.num[t] / sc.den[t]) : sqrt(sc.num[t]);
            ok = ok && rel[t] <= REL_L2_TOL;
        }
        printf("%s %s dq=%.2e dk=%.2e dv=%.2e", ok ? "PASS" : "FAIL", c->text, rel[0], rel[1], rel[2]);
        if (c->sink) printf(" dsink=%.2e", sc.sink_err);
        if (sc.nan || sc.poison_bad) printf(" nan=%ld poison=%ld", sc.nan, sc.poison_bad);
        double margin = fmax(fmax(rel[0], rel[1]), rel[2]) / REL_L2_TOL;
        if (c->sink) margin = fmax(margin, sc.sink_err / SINK_TOL);
        printf(" margin=%.2f", sc.nan || sc.poison_bad || isnan(margin) ? INFINITY : margin);
        if (c->runs > 1)
            printf(" runs=%d dq_differ=%ld accum_differ=%ld dkdv_differ=%ld", c->runs, differ, ws_differ, run_differ);
        printf(" (%.1fs)\n", t1 - t0);
        rc = !ok;
    }
done:
    if (why) printf("FAIL %s\n  %s\n", c->text, why);
    CUdeviceptr all[] = {dq, dk, dv, dO, ddo, dl, ddq, ddk, ddv, dcq, dck, dws, ds, dds, dg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) cu->MemFree(all[i]);
    free(hq), free(hk), free(hv), free(hdo), free(ho), free(gdq), free(gdk), free(gdv), free(ro), free(rdq);
    free(rdk), free(rdv), free(rl), free(rsink), free(sinkv), free(part), free(hl), free(hsink), free(gsink), free(hg);
    return why ? 1 : rc;
}

int main(int argc, char **argv)
{
    uint64_t seed = 1;
    const char *cases = NULL;
    int quiet = 0;
    char words[LINE] = "";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) parse_u64(argv[++i], &seed);
        else if (!strcmp(argv[i], "--cases") && i + 1 < argc) cases = argv[++i];
        else if (!strcmp(argv[i], "--quiet")) quiet = 1;
        else snprintf(words + strlen(words), sizeof words - strlen(words), "%s%s", words[0] ? " " : "", argv[i]);
    }
    char err[256];
    Cu cu;
    if (cu_open(&cu, err, sizeof err)) {
        fprintf(stderr, "sim_bwd: %s\n", err);
        return 2;
    }
    fa4_options opt = FA4_OPTIONS_INIT; /* target AUTO: the device's (the simulator's FA4SIM_CC) picks the kernels */
    fa4_ctx *fa;
    if (fa4_create(&fa, &opt)) {
        fprintf(stderr, "sim_bwd: fa4_create: %s\n", fa4_last_error(NULL));
        return 2;
    }
    int pass = 0, fail = 0;
    CaseLines cl;
    if (case_lines_open(&cl, cases, words)) {
        fprintf(stderr, "sim_bwd: cannot read %s\n", cases);
        return 2;
    }
    char line[LINE];
    while (case_lines_next(&cl, line, sizeof line)) {
        Case c;
        if (parse_case(line, &c, err, sizeof err)) {
            fprintf(stderr, "sim_bwd: bad case '%s': %s\n", line, err);
            return 2;
        }
        char res[16];
        snprintf(res, sizeof res, "%d", c.resident);
        if (c.resident) setenv("FA4SIM_RESIDENT", res, 1);
        int bad = run_case(&cu, fa, &c, seed, quiet);
        if (c.resident) unsetenv("FA4SIM_RESIDENT");
        if (bad) fail++;
        else pass++;
        fflush(stdout);
    }
    case_lines_close(&cl);
    fa4_destroy(fa);
    printf("sim_bwd: %d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}
