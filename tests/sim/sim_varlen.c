/* sim_varlen.c - variable-length (varlen) and paged-KV MHA cases through fa4_mha_fwd, checked sequence by sequence
 * against the fp64 host reference (ref_mha.c), which sees each sequence as its own dense batch-1
 * problem: it knows nothing of the kernel's packing, tiles or clamps.
 *
 * Like sim_mha it dlopens libcuda.so.1, so the same binary runs on the CPU simulator
 * (LD_LIBRARY_PATH=build/sim, tests/sim/run.sh) and on a GPU (tests/gpu/run.sh, step varlen).
 *
 *   sim_varlen [--cases FILE] [--seed N] [--quiet]
 *
 * A case is one line of words (tests/sim/cases_varlen_sm90.txt):
 *   target=sm90a dtype=bf16|fp16 qk=D hq=H hkv=H mask=none|causal|window:L,R
 *   q=L0,L1,... k=L0,L1,...   per-sequence query and key lengths (0 allowed), as many of each
 *   tail=N                    packed rows after the last sequence (in no sequence: O and LSE there must
 *                             keep their poison)
 *   lse=0|1 config=WORDS(comma-separated) host=0|1 (pass the host mirrors of cu_seqlens; default 1)
 *   varlen=0                  dense q/o [batch, seqlen, heads, depth] (every q length equal, tail 0;
 *                             LSE [batch, heads, seqlen]); without page=, every k length equal too
 *   page=P                    paged K, V: a pool of pages in shuffled order, block_table [batch, max_pages]
 *                             (max_pages = the longest sequence's pages + 1; entries past a sequence's
 *                             pages hold garbage: -1, past the pool, or other sequences' pages)
 *   bad=N                     N entries inside sequences' pages made invalid (alternately -1 and
 *                             num_pages + 3): the reference drops those pages' keys (a score of -inf)
 *   splits=N                  fa4_mha_args.num_splits (0: the runtime picks; default 1), with a workspace
 *                             of fa4_mha_split_count's size filled with 0xFF (NaN) bytes (paged decode)
 *   kv_early=0|1              fa4_mha_args.kv_early (default 0; paged decode: the split kernel reads the
 *                             lengths, table entries and first K/V blocks before griddepcontrol.wait)
 *   late=1                    (paged, simulator only: skipped on a GPU) seqlens_k and the block table are
 *                             the previous grid's late writes (fa4sim_late_write): loads before the
 *                             kernel's griddepcontrol.wait read other lengths and a table of other pages;
 *                             a kernel that loads K/V by them, or by entries read for another block than
 *                             the new length gives, fails
 *   stale=nan|inf|-inf|mix    every K and V row that is no key of any sequence holds that value (mix: NaN,
 *                             +Inf, -Inf row by row), as a real cache's stale rows do: paged, the rows past
 *                             each sequence's length in its last page and the spare pages, one of which the
 *                             table entry right after each sequence's pages names; varlen, the packed rows
 *                             after the last sequence (tail=) and those of the stale_seq= sequences; dense
 *                             (varlen=0, no page), the rows past seqlen_k of a cache of cap= rows a batch.
 *                             Q rows of no sequence (tail=) hold it too. No such value may reach a checked
 *                             sequence's O or LSE
 *   stale_in=k|v|kv           which of K and V hold the stale rows (default kv)
 *   stale_seq=I,J,..          (varlen, not paged) these sequences' own Q, K, V rows hold the stale value: they
 *                             are not checked, and their neighbours' tail blocks read their rows
 *   cap=N                     (dense: varlen=0, no page) K and V are a cache of N >= seqlen_k rows a batch,
 *                             passed with that batch stride
 *   sink=rand                 fa4_mha_args.sink: a logit U(-2, 2) per query head
 *   mod=softcap30             fa4_mha_args.score_mod: 30 tanh(s / 30)
 * Checks: every O element of every sequence's rows is finite and rel L2 <= 1e-2 over the case; LSE
 * (natural log, [heads_q, total_q]) within 1e-3 relative; rows that see no key: O = 0, LSE = -inf;
 * rows of no sequence: O bytes and LSE words untouched (poison 0xFF). After the last case the context
 * must still work (a synchronize and a copy): the line 'context: healthy' says so. */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "fa4.h"
#include "harness.h"
#include "ref_mha.h"

enum { MAX_SEQ = 64, LINE = 512 };
#define REL_L2_TOL 1e-2
#define LSE_TOL 1e-3

typedef struct {
    fa4_target target;
    RefDtype dtype;
    int qk, hq, hkv, mask, wl, wr, nseq, tail, lse, host, varlen, page, bad, splits, kv_early, late;
    int stale, stale_k, stale_v, cap, sink, mod; /* STALE_*, K / V hold it; dense cache rows; sink=rand; mod= */
    int lq[MAX_SEQ], lk[MAX_SEQ];
    unsigned char stale_seq[MAX_SEQ]; /* stale_seq=: these sequences' rows hold the stale value */
    char config[128];
    char text[LINE];
} Case;

/* ---------------------------------------------------------------- cases */

enum { STALE_NONE, STALE_NAN, STALE_INF, STALE_NEG_INF, STALE_MIX };
static const char *const STALE_NAMES[] = {"none", "nan", "inf", "-inf", "mix"};

/* mod=softcap30 (sim_mha's, fa4.h's score_mod contract); the reference's side is softcap() */
static const char SOFTCAP30_SRC[] = "__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)\n"
                                    "{ return 30.0f * tanhf(s * (1.0f / 30.0f)); }\n";

static int parse_list(const char *v, int *out, int *count)
{
    *count = 0;
    for (const char *s = v; *s;) {
        char *end;
        long x = strtol(s, &end, 10);
        if (end == s || x < 0 || x > 100000 || *count >= MAX_SEQ) return -1;
        out[(*count)++] = (int)x;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return *count ? 0 : -1;
}

static int parse_case(const char *line, Case *c, char *err, size_t n)
{
    memset(c, 0, sizeof *c);
    c->target = FA4_TARGET_SM90A, c->dtype = REF_BF16, c->qk = 128, c->hq = 2, c->hkv = 2, c->lse = 1, c->host = 1;
    c->varlen = 1, c->splits = 1, c->stale_k = c->stale_v = 1;
    snprintf(c->text, sizeof c->text, "%s", line);
    char buf[LINE];
    snprintf(buf, sizeof buf, "%s", line);
    int nk = -1;
    char *cur = buf, *w, *v;
    int got;
    while ((got = kv_next(&cur, &w, &v, err, n)) > 0) {
        int x = atoi(v);
        if (!strcmp(w, "target")) c->target = !strcmp(v, "sm100a") ? FA4_TARGET_SM100A : FA4_TARGET_SM90A;
        else if (!strcmp(w, "dtype")) c->dtype = !strcmp(v, "fp16") ? REF_FP16 : REF_BF16;
        else if (!strcmp(w, "qk")) c->qk = x;
        else if (!strcmp(w, "hq")) c->hq = x;
        else if (!strcmp(w, "hkv")) c->hkv = x;
        else if (!strcmp(w, "tail")) c->tail = x;
        else if (!strcmp(w, "lse")) c->lse = x;
        else if (!strcmp(w, "host")) c->host = x;
        else if (!strcmp(w, "varlen")) c->varlen = x;
        else if (!strcmp(w, "page")) c->page = x;
        else if (!strcmp(w, "bad")) c->bad = x;
        else if (!strcmp(w, "splits")) c->splits = x;
        else if (!strcmp(w, "kv_early")) c->kv_early = x;
        else if (!strcmp(w, "late")) c->late = x;
        else if (!strcmp(w, "cap")) c->cap = x;
        else if (!strcmp(w, "sink")) {
            if (strcmp(v, "rand")) return snprintf(err, n, "sink '%s': only rand", v), -1;
            c->sink = 1;
        } else if (!strcmp(w, "mod")) {
            if (strcmp(v, "softcap30")) return snprintf(err, n, "mod '%s': only softcap30", v), -1;
            c->mod = 1;
        } else if (!strcmp(w, "stale")) {
            c->stale = -1;
            for (int i = 1; i < (int)(sizeof STALE_NAMES / sizeof STALE_NAMES[0]); i++)
                if (!strcmp(v, STALE_NAMES[i])) c->stale = i;
            if (c->stale < 0) return snprintf(err, n, "stale '%s': nan, inf, -inf or mix", v), -1;
        } else if (!strcmp(w, "stale_in")) {
            c->stale_k = strchr(v, 'k') != NULL, c->stale_v = strchr(v, 'v') != NULL;
            if (!c->stale_k && !c->stale_v) return snprintf(err, n, "stale_in '%s': k, v or kv", v), -1;
        } else if (!strcmp(w, "stale_seq")) {
            int list[MAX_SEQ], np;
            if (parse_list(v, list, &np)) return snprintf(err, n, "stale_seq list '%s'", v), -1;
            for (int i = 0; i < np; i++) {
                if (list[i] >= MAX_SEQ) return snprintf(err, n, "stale_seq %d: past the sequences", list[i]), -1;
                c->stale_seq[list[i]] = 1;
            }
        }
        else if (!strcmp(w, "mask")) {
            if (!strcmp(v, "none")) c->mask = REF_MASK_NONE;
            else if (!strcmp(v, "causal")) c->mask = REF_MASK_CAUSAL;
            else if (sscanf(v, "window:%d,%d", &c->wl, &c->wr) == 2) c->mask = REF_MASK_WINDOW;
            else return snprintf(err, n, "mask '%s'", v), -1;
        } else if (!strcmp(w, "q")) {
            if (parse_list(v, c->lq, &c->nseq)) return snprintf(err, n, "q list '%s'", v), -1;
        } else if (!strcmp(w, "k")) {
            if (parse_list(v, c->lk, &nk)) return snprintf(err, n, "k list '%s'", v), -1;
        } else if (!strcmp(w, "config")) {
            snprintf(c->config, sizeof c->config, "%s", v);
            for (char *s = c->config; *s; s++)
                if (*s == ',') *s = ' ';
        } else {
            return snprintf(err, n, "unknown key '%s'", w), -1;
        }
    }
    if (got < 0) return -1;
    if (!c->nseq || nk != c->nseq) return snprintf(err, n, "q= and k= need the same number of lengths"), -1;
    if (c->late && (!c->page || c->kv_early))
        return snprintf(err, n, "late=1 needs page= and no kv_early (which promises those reads)"), -1;
    for (int b = 1; b < c->nseq && !c->varlen; b++)
        if (c->lq[b] != c->lq[0] || (!c->page && c->lk[b] != c->lk[0]) || c->tail)
            return snprintf(err, n, "varlen=0 needs equal lengths (k too unless paged) and tail=0"), -1;
    if (c->cap && (c->varlen || c->page || c->cap < c->lk[0]))
        return snprintf(err, n, "cap=%d needs dense K, V (varlen=0, no page) and cap >= the kv length", c->cap), -1;
    for (int b = 0; b < MAX_SEQ; b++)
        if (c->stale_seq[b] && (b >= c->nseq || !c->varlen || c->page || !c->stale))
            return snprintf(err, n, "stale_seq=%d needs stale=, varlen K, V (no page) and a sequence of that index", b),
                   -1;
    return 0;
}

/* ---------------------------------------------------------------- one case */

static double uniform(uint64_t *s) { return (double)(splitmix64(s) >> 11) * 0x1p-53 * 2.0 - 1.0; }

typedef struct { double num, den, lse_err; long nan, empty_bad, poison_bad; } Score;

/* The paged pool of a case: num_pages pages of `page` rows; table [nseq, max_pages]; invalid[b][p]
 * marks the pages of sequence b whose entry was made invalid. */
typedef struct {
    int num_pages, max_pages;
    int32_t *table;
    unsigned char *invalid;
} Pages;

/* The reference's score hook: the case's score_mod (mod=softcap30), then an invalid page's keys are not
 * there. */
typedef struct { const Case *c; const Pages *pg; int b; } DropCtx;
static double drop_invalid(const void *ctx, double s, int b, int h, int q, int k)
{
    const DropCtx *d = ctx;
    (void)b, (void)h, (void)q;
    if (d->c->mod) s = 30.0 * tanh(s / 30.0);
    if (d->c->page && d->pg->invalid[(size_t)d->b * d->pg->max_pages + k / d->c->page]) return -INFINITY;
    return s;
}

/* The stale value of row r (stale=): NaN, +Inf, -Inf, or the three in turn. */
static double stale_value(int kind, size_t r)
{
    static const double mix[3] = {NAN, INFINITY, -INFINITY};
    return kind == STALE_NAN ? NAN : kind == STALE_INF ? INFINITY : kind == STALE_NEG_INF ? -INFINITY : mix[r % 3];
}

/* Row r (of row_elems elements) of each of the n tensors takes the stale value. */
static void stale_row(const Case *c, void *const *t, int n, size_t r, size_t row_elems)
{
    for (int i = 0; i < n; i++)
        if (t[i])
            for (size_t x = 0; x < row_elems; x++) ref_store(c->dtype, t[i], (int64_t)(r * row_elems + x), stale_value(c->stale, r));
}

static void *random_tensor(RefDtype dt, size_t elems, uint64_t *st, double amp)
{
    unsigned char *p = malloc(elems * (size_t)ref_dtype_bytes(dt) + 1);
    if (p)
        for (size_t i = 0; i < elems; i++) ref_store(dt, p, (int64_t)i, amp * uniform(st));
    return p;
}

/* One sequence against the reference; its rows are [q0, q0 + lq) of O and of LSE's rows. */
static size_t lse_index(const Case *c, int b, int h, int i, int row, int total_q)
{
    return c->varlen ? (size_t)h * total_q + row : ((size_t)b * c->hq + h) * c->lq[0] + i;
}

/* hk, hv: the sequence's own kv rows [lk, hkv, d] (gathered from the pages when paged). */
static int check_sequence(const Case *c, int b, const int *cu_q, const void *hq_, const void *hk, const void *hv,
                          const Pages *pg, const double *sink, const unsigned char *o, const float *lse, int total_q,
                          Score *sc)
{
    int lq = c->lq[b], lk = c->lk[b], d = c->qk, eb = ref_dtype_bytes(c->dtype);
    if (!lq) return 0;
    size_t no = (size_t)lq * c->hq * d, nl = (size_t)c->hq * lq;
    double *ro = calloc(no, sizeof *ro), *rl = malloc(nl * sizeof *rl);
    if (!ro || !rl) return free(ro), free(rl), -1;
    if (lk) {
        RefMha p = {0};
        p.dtype = c->dtype;
        p.q.data = (const unsigned char *)hq_ + (size_t)cu_q[b] * c->hq * d * eb;
        p.k.data = hk;
        p.v.data = hv;
        DropCtx drop = {c, pg, b};
        if (c->page || c->mod) p.score_mod = drop_invalid, p.mod_ctx = &drop;
        p.sink = sink;
        p.batch = 1, p.seqlen_q = lq, p.seqlen_k = lk, p.heads_q = c->hq, p.heads_kv = c->hkv;
        p.qk_depth = p.ov_depth = d;
        p.mask = (RefMask)c->mask, p.window_left = c->wl, p.window_right = c->wr;
        char err[256];
        if (ref_mha_fwd(&p, ro, rl, err, sizeof err)) {
            fprintf(stderr, "reference: %s\n", err);
            return free(ro), free(rl), -1;
        }
    } else {
        for (size_t i = 0; i < nl; i++) rl[i] = -INFINITY; /* no key: O = 0, LSE = -inf */
    }
    for (int i = 0; i < lq; i++)
        for (int h = 0; h < c->hq; h++) {
            int row = cu_q[b] + i, empty = isinf(rl[(size_t)h * lq + i]);
            for (int x = 0; x < d; x++) {
                double got = ref_load(c->dtype, o, ((int64_t)row * c->hq + h) * d + x);
                double want = ro[((size_t)i * c->hq + h) * d + x];
                if (isnan(got)) {
                    sc->nan++;
                    continue;
                }
                sc->num += (got - want) * (got - want), sc->den += want * want;
                if (empty && got != 0.0) sc->empty_bad++;
            }
            if (!c->lse) continue;
            double g = lse[lse_index(c, b, h, i, row, total_q)], w = rl[(size_t)h * lq + i];
            if (isnan(g)) sc->nan++;
            else if (empty) sc->empty_bad += !(isinf(g) && g < 0);
            else if (fabs(g - w) / fmax(1.0, fabs(w)) > sc->lse_err) sc->lse_err = fabs(g - w) / fmax(1.0, fabs(w));
        }
    free(ro), free(rl);
    return 0;
}

/* A shuffled page pool for the case's kv lengths: every sequence's pages distinct, table entries past a
 * sequence's pages garbage, c->bad entries inside sequences' pages invalid. */
static int make_pages(const Case *c, uint64_t *st, Pages *pg)
{
    int need = 0;
    pg->max_pages = 1;
    for (int b = 0; b < c->nseq; b++) {
        int np = (c->lk[b] + c->page - 1) / c->page;
        need += np;
        if (np + 1 > pg->max_pages) pg->max_pages = np + 1;
    }
    pg->num_pages = need + 3; /* spare pages nobody owns */
    size_t nt = (size_t)(c->nseq > 0 ? c->nseq : 0) * (size_t)pg->max_pages; /* gcc: nseq >= 0 (parse_list) */
    int *perm = malloc(sizeof(int) * (size_t)pg->num_pages);
    pg->table = malloc(sizeof(int32_t) * nt);
    pg->invalid = calloc(nt, 1);
    if (!perm || !pg->table || !pg->invalid) return free(perm), -1;
    for (int i = 0; i < pg->num_pages; i++) perm[i] = i;
    for (int i = pg->num_pages - 1; i > 0; i--) {
        int j = (int)(splitmix64(st) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    int next = 0, bad = 0;
    for (int b = 0; b < c->nseq; b++) {
        int np = (c->lk[b] + c->page - 1) / c->page;
        for (int p = 0; p < pg->max_pages; p++) {
            int32_t *e = &pg->table[(size_t)b * pg->max_pages + p];
            if (p < np) {
                *e = perm[next++];
            } else if (c->stale && p == np) { /* stale=: a spare page, all stale rows */
                *e = perm[need + b % 3];
            } else { /* never read: garbage of every kind */
                uint64_t r = splitmix64(st) % 3;
                *e = r == 0 ? -1 : r == 1 ? pg->num_pages + 7 : perm[splitmix64(st) % (uint64_t)pg->num_pages];
            }
        }
    }
    /* the invalid ones: spread over the sequences that have pages */
    for (int b = 0, tries = 0; bad < c->bad && tries < 1000; b = (b + 1) % c->nseq, tries++) {
        int np = (c->lk[b] + c->page - 1) / c->page;
        if (!np) continue;
        int p = (int)(splitmix64(st) % (uint64_t)np);
        size_t i = (size_t)b * pg->max_pages + p;
        if (pg->invalid[i]) continue;
        pg->invalid[i] = 1;
        pg->table[i] = bad % 2 ? pg->num_pages + 3 : -1;
        bad++;
    }
    free(perm);
    return 0;
}

/* The simulator's fa4sim_late_write (tests/sim/cuda.c); NULL on a GPU's driver. */
typedef int (*LateWrite)(CUdeviceptr dst, const void *src, size_t n);

/* late=1: what loads before the wait see -- lengths moved by blocks (the kernel clamps them) and every
 * entry one page further -- with the case's own as the late writes that replace them. 0, or -1. */
static int late_writes(Cu *cu, LateWrite late, const Case *c, const Pages *pg, CUdeviceptr dtab, CUdeviceptr dlen)
{
    size_t nt = (size_t)(c->nseq > 0 ? c->nseq : 0) * (size_t)pg->max_pages; /* gcc: nseq >= 0 (parse_list) */
    int32_t *old = malloc(sizeof(int32_t) * (nt > MAX_SEQ ? nt : MAX_SEQ));
    if (!late || !old) return free(old), -1;
    int rc = 0;
    for (size_t i = 0; i < nt; i++) old[i] = (pg->table[i] + 1) % pg->num_pages;
    rc |= cu->MemcpyHtoD(dtab, old, sizeof(int32_t) * nt) || late(dtab, pg->table, sizeof(int32_t) * nt);
    for (int b = 0; b < c->nseq; b++) old[b] = b % 2 ? c->lk[b] / 2 : c->lk[b] + 300;
    rc |= cu->MemcpyHtoD(dlen, old, sizeof(int32_t) * (size_t)c->nseq) ||
          late(dlen, c->lk, sizeof(int32_t) * (size_t)c->nseq);
    free(old);
    return rc ? -1 : 0;
}

static int run_case(Cu *cu, LateWrite late, fa4_ctx *fa, const Case *c, uint64_t seed, int quiet)
{
    int cu_q[MAX_SEQ + 1] = {0}, cu_k[MAX_SEQ + 1] = {0}, max_q = 1;
    for (int b = 0; b < c->nseq; b++) {
        cu_q[b + 1] = cu_q[b] + c->lq[b], cu_k[b + 1] = cu_k[b] + c->lk[b];
        if (c->lq[b] > max_q) max_q = c->lq[b];
    }
    int total_q = cu_q[c->nseq] + c->tail, total_k = cu_k[c->nseq] + c->tail, d = c->qk;
    if (total_q < 1) total_q = 1; /* the packed tensors are never empty */
    if (total_k < 1) total_k = 1;
    int eb = ref_dtype_bytes(c->dtype);
    uint64_t st = seed * 0x9e3779b97f4a7c15ull ^ (uint64_t)strlen(c->text);
    for (const char *s = c->text; *s; s++) st = (st ^ (unsigned char)*s) * 0x100000001b3ull;
    Pages pg = {0};
    if (c->page && make_pages(c, &st, &pg)) return printf("FAIL %s\n  out of host memory\n", c->text), 1;
    /* paged: the pool holds num_pages x page rows; dense with cap=: batch x cap rows; the sequences' own rows
     * are gathered for the reference */
    size_t kv_rows = c->page ? (size_t)pg.num_pages * c->page : c->cap ? (size_t)c->nseq * c->cap : (size_t)total_k;
    size_t row_elems = (size_t)c->hkv * d;
    size_t nq = (size_t)total_q * c->hq * d, nkv = kv_rows * row_elems, nl = (size_t)c->hq * total_q;
    void *hq = random_tensor(c->dtype, nq, &st, 2.0), *hk = random_tensor(c->dtype, nkv, &st, 1.0);
    void *hv = random_tensor(c->dtype, nkv, &st, 1.0);
    unsigned char *ho = malloc(nq * (size_t)eb);
    float *hl = malloc(nl * sizeof(float));
    unsigned char *gk = malloc(((size_t)cu_k[c->nseq] + 1) * row_elems * eb);
    unsigned char *gv = malloc(((size_t)cu_k[c->nseq] + 1) * row_elems * eb);
    float *hsink = malloc(sizeof(float) * (size_t)c->hq);
    double *rsink = malloc(sizeof(double) * (size_t)c->hq);
    CUdeviceptr dq = 0, dk = 0, dv = 0, dout = 0, dl = 0, dcq = 0, dck = 0, dtab = 0, dlen = 0, dws = 0, dsink = 0;
    int rc = -1;
    Score sc = {0};
    const char *why = "";
    size_t tab_bytes = (size_t)c->nseq * pg.max_pages * sizeof(int32_t);
    if (!hq || !hk || !hv || !ho || !hl || !gk || !gv || !hsink || !rsink) {
        why = "out of host memory";
        goto done;
    }
    for (int h = 0; h < c->hq && c->sink; h++) rsink[h] = hsink[h] = (float)(2.0 * uniform(&st)); /* sink=rand */
    if (c->stale) { /* the rows of no sequence's keys (and of stale_seq= sequences) take the stale value */
        void *kv[2] = {c->stale_k ? hk : NULL, c->stale_v ? hv : NULL}, *qt[1] = {hq};
        if (c->page) {
            unsigned char *used = calloc(kv_rows, 1);
            if (!used) {
                why = "out of host memory";
                goto done;
            }
            for (int b = 0; b < c->nseq; b++)
                for (int r = 0; r < c->lk[b]; r++) {
                    size_t e = (size_t)b * pg.max_pages + r / c->page;
                    if (!pg.invalid[e]) used[(size_t)pg.table[e] * c->page + r % c->page] = 1;
                }
            for (size_t r = 0; r < kv_rows; r++)
                if (!used[r]) stale_row(c, kv, 2, r, row_elems);
            free(used);
        } else if (c->cap) {
            for (int b = 0; b < c->nseq; b++)
                for (int r = c->lk[b]; r < c->cap; r++) stale_row(c, kv, 2, (size_t)b * c->cap + r, row_elems);
        } else {
            for (size_t r = (size_t)cu_k[c->nseq]; r < (size_t)total_k; r++) stale_row(c, kv, 2, r, row_elems);
            for (int b = 0; b < c->nseq; b++)
                for (int r = cu_k[b]; c->stale_seq[b] && r < cu_k[b + 1]; r++) stale_row(c, kv, 2, (size_t)r, row_elems);
        }
        if (c->varlen) {
            for (size_t r = (size_t)cu_q[c->nseq]; r < (size_t)total_q; r++) stale_row(c, qt, 1, r, (size_t)c->hq * d);
            for (int b = 0; b < c->nseq; b++)
                for (int r = cu_q[b]; c->stale_seq[b] && r < cu_q[b + 1]; r++)
                    stale_row(c, qt, 1, (size_t)r, (size_t)c->hq * d);
        }
    }
    /* each sequence's kv rows in order: from the packed tensor, or row r of page table[b][r / page] */
    for (int b = 0; b < c->nseq; b++)
        for (int r = 0; r < c->lk[b]; r++) {
            size_t src = c->cap ? (size_t)b * c->cap + r : (size_t)cu_k[b] + r, dst = (size_t)cu_k[b] + r;
            if (c->page && pg.invalid[(size_t)b * pg.max_pages + r / c->page]) {
                /* dropped by the reference (its scores are -inf): zeros, as 0 x NaN would be NaN there too */
                memset(gk + dst * row_elems * eb, 0, row_elems * eb);
                memset(gv + dst * row_elems * eb, 0, row_elems * eb);
                continue;
            }
            if (c->page) src = (size_t)pg.table[(size_t)b * pg.max_pages + r / c->page] * c->page + r % c->page;
            memcpy(gk + dst * row_elems * eb, (unsigned char *)hk + src * row_elems * eb, row_elems * eb);
            memcpy(gv + dst * row_elems * eb, (unsigned char *)hv + src * row_elems * eb, row_elems * eb);
        }
    if (cu->MemAlloc(&dq, nq * eb) || cu->MemAlloc(&dk, nkv * eb) || cu->MemAlloc(&dv, nkv * eb) ||
        cu->MemAlloc(&dout, nq * eb) || cu->MemAlloc(&dl, nl * 4) || cu->MemAlloc(&dcq, sizeof cu_q) ||
        cu->MemAlloc(&dck, sizeof cu_k) || cu->MemcpyHtoD(dq, hq, nq * eb) || cu->MemcpyHtoD(dk, hk, nkv * eb) ||
        cu->MemcpyHtoD(dv, hv, nkv * eb) || cu->MemcpyHtoD(dcq, cu_q, sizeof cu_q) ||
        cu->MemcpyHtoD(dck, cu_k, sizeof cu_k) || cu->MemsetD8(dout, 0xFF, nq * eb) || cu->MemsetD8(dl, 0xFF, nl * 4) ||
        (c->page && (cu->MemAlloc(&dtab, tab_bytes) || cu->MemcpyHtoD(dtab, pg.table, tab_bytes) ||
                     cu->MemAlloc(&dlen, sizeof(int32_t) * (size_t)c->nseq) ||
                     cu->MemcpyHtoD(dlen, c->lk, sizeof(int32_t) * (size_t)c->nseq))) ||
        (c->sink && (cu->MemAlloc(&dsink, sizeof(float) * (size_t)c->hq) ||
                     cu->MemcpyHtoD(dsink, hsink, sizeof(float) * (size_t)c->hq)))) {
        why = "device allocation or copy failed";
        goto done;
    }
    if (c->late && late_writes(cu, late, c, &pg, dtab, dlen)) {
        why = "late writes failed";
        goto done;
    }
    fa4_mha_args a = FA4_MHA_ARGS_INIT;
    a.dtype = c->dtype == REF_FP16 ? FA4_FP16 : FA4_BF16;
    a.q = (const void *)(uintptr_t)dq, a.k = (const void *)(uintptr_t)dk, a.v = (const void *)(uintptr_t)dv;
    a.o = (void *)(uintptr_t)dout;
    a.lse = c->lse ? (float *)(uintptr_t)dl : NULL;
    a.batch = c->nseq, a.seqlen_q = total_q, a.seqlen_k = total_k, a.heads_q = c->hq, a.heads_kv = c->hkv;
    if (!c->varlen) a.seqlen_q = c->lq[0], a.seqlen_k = c->lk[0];
    a.qk_depth = a.ov_depth = d;
    a.mask = c->mask == REF_MASK_CAUSAL ? FA4_MASK_CAUSAL : c->mask == REF_MASK_WINDOW ? FA4_MASK_WINDOW : FA4_MASK_NONE;
    a.window_left = c->wl, a.window_right = c->wr;
    a.config = c->config[0] ? c->config : NULL;
    if (c->cap) /* a cache of cap rows a batch: rows past seqlen_k are outside the tensor the kernel sees */
        for (int t = 0; t < 2; t++) {
            int64_t *stride = t ? a.v_stride : a.k_stride;
            stride[0] = (int64_t)c->cap * c->hkv * d, stride[1] = (int64_t)c->hkv * d, stride[2] = d;
        }
    if (c->sink) a.sink = (const float *)(uintptr_t)dsink;
    if (c->mod) a.score_mod = SOFTCAP30_SRC;
    if (c->varlen) {
        a.cu_seqlens_q = (const int32_t *)(uintptr_t)dcq;
        a.max_seqlen_q = max_q;
        if (c->host) a.cu_seqlens_q_host = cu_q;
        if (!c->page) {
            a.cu_seqlens_k = (const int32_t *)(uintptr_t)dck;
            if (c->host) a.cu_seqlens_k_host = cu_k;
        }
    }
    if (c->page) {
        a.block_table = (const int32_t *)(uintptr_t)dtab, a.seqlens_k = (const int32_t *)(uintptr_t)dlen;
        a.page_size = c->page, a.max_pages = pg.max_pages, a.num_pages = pg.num_pages;
        a.seqlen_k = 0;
    }
    a.kv_early = c->kv_early;
    if (c->splits != 1) {
        int ns = 0;
        size_t ws = 0;
        a.num_splits = c->splits;
        if (fa4_mha_split_count(fa, &a, &ns, &ws) || (ws && (cu->MemAlloc(&dws, ws) || cu->MemsetD8(dws, 0xFF, ws)))) {
            why = fa4_last_error(fa)[0] ? fa4_last_error(fa) : "workspace allocation failed";
            goto done;
        }
        a.workspace = ws ? (void *)(uintptr_t)dws : NULL, a.workspace_size = ws;
        if (!quiet) printf("  splits: %d, workspace %zu bytes\n", ns, ws);
    }
    char cfg[512] = "";
    fa4_mha_config(fa, &a, cfg, sizeof cfg);
    if (!quiet) printf("  kernel: %s\n", cfg);
    fa4_status s = fa4_mha_fwd(fa, &a, NULL);
    if (s) {
        printf("FAIL %s\n  fa4_mha_fwd: %s: %s\n", c->text, fa4_status_string(s), fa4_last_error(fa));
        rc = 1;
        goto done;
    }
    if (cu->CtxSynchronize() || cu->MemcpyDtoH(ho, dout, nq * eb) || cu->MemcpyDtoH(hl, dl, nl * 4)) {
        why = "synchronize or copy back failed";
        goto done;
    }
    for (int b = 0; b < c->nseq; b++)
        if (!c->stale_seq[b] && /* a stale_seq= sequence's own output is not defined */
            check_sequence(c, b, cu_q, hq, gk + (size_t)cu_k[b] * row_elems * eb, gv + (size_t)cu_k[b] * row_elems * eb,
                           &pg, c->sink ? rsink : NULL, ho, hl, total_q, &sc)) {
            why = "reference failed";
            goto done;
        }
    /* rows of no sequence keep their poison, in O and in LSE */
    for (size_t i = (size_t)cu_q[c->nseq] * c->hq * d * eb; i < nq * (size_t)eb; i++) sc.poison_bad += ho[i] != 0xFF;
    for (int h = 0; h < c->hq && c->varlen; h++)
        for (int r = cu_q[c->nseq]; r < total_q; r++) {
            uint32_t w;
            memcpy(&w, &hl[(size_t)h * total_q + r], 4);
            sc.poison_bad += w != 0xFFFFFFFFu;
        }
    if (!c->lse)
        for (size_t i = 0; i < nl; i++) {
            uint32_t w;
            memcpy(&w, &hl[i], 4);
            sc.poison_bad += w != 0xFFFFFFFFu; /* lse = NULL: nothing written */
        }
    double rel = sc.den > 0 ? sqrt(sc.num / sc.den) : sqrt(sc.num);
    int ok = !sc.nan && !sc.empty_bad && !sc.poison_bad && rel <= REL_L2_TOL && sc.lse_err <= LSE_TOL;
    /* margin: the larger error / bound (a NaN or a bad row: inf) */
    double margin = sc.nan || sc.empty_bad || sc.poison_bad ? INFINITY : fmax(rel / REL_L2_TOL, sc.lse_err / LSE_TOL);
    printf("%s %s  rel_l2=%.2e lse_err=%.2e nan=%ld empty_bad=%ld poison_bad=%ld margin=%.2f\n", ok ? "PASS" : "FAIL",
           c->text, rel, sc.lse_err, sc.nan, sc.empty_bad, sc.poison_bad, margin);
    rc = ok ? 0 : 1;
done:
    if (rc < 0) printf("FAIL %s\n  %s\n", c->text, why), rc = 1;
    CUdeviceptr all[] = {dq, dk, dv, dout, dl, dcq, dck, dtab, dlen, dws, dsink};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) cu->MemFree(all[i]);
    free(hq), free(hk), free(hv), free(ho), free(hl), free(gk), free(gv), free(pg.table), free(pg.invalid);
    free(hsink), free(rsink);
    return rc;
}

int main(int argc, char **argv)
{
    const char *file = "tests/sim/cases_varlen_sm90.txt";
    uint64_t seed = 1;
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cases") && i + 1 < argc) file = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--quiet")) quiet = 1;
        else {
            fprintf(stderr, "usage: sim_varlen [--cases FILE] [--seed N] [--quiet]\n");
            return 2;
        }
    }
    CaseLines cl;
    if (case_lines_open(&cl, file, NULL)) return fprintf(stderr, "sim_varlen: cannot open %s\n", file), 2;
    Cu cu;
    char err[256];
    if (cu_open(&cu, err, sizeof err)) return fprintf(stderr, "sim_varlen: %s\n", err), 2;
    fa4_ctx *fa[3] = {0};
    int pass = 0, fail = 0, skip = 0;
    LateWrite late = NULL;
    void *sym = dlsym(cu.lib, "fa4sim_late_write");
    memcpy(&late, &sym, sizeof sym); /* POSIX: data and function pointers convert */
    char line[LINE];
    while (case_lines_next(&cl, line, sizeof line)) {
        Case c;
        if (parse_case(line, &c, err, sizeof err)) {
            printf("FAIL %s\n  case: %s\n", line, err);
            fail++;
            continue;
        }
        if (!fa[c.target]) {
            fa4_options o = FA4_OPTIONS_INIT;
            o.target = c.target;
            if (fa4_create(&fa[c.target], &o)) return fprintf(stderr, "fa4_create: %s\n", fa4_last_error(NULL)), 2;
        }
        if (c.late && !late) { /* a GPU: no way to delay another grid's writes past our reads */
            printf("SKIP %s\n  late=1 needs the simulator\n", c.text);
            skip++;
            continue;
        }
        if (run_case(&cu, late, fa[c.target], &c, seed, quiet)) fail++;
        else pass++;
    }
    case_lines_close(&cl);
    for (int i = 0; i < 3; i++) fa4_destroy(fa[i]);
    /* the context after every case (a fault, e.g. a read through a garbage page number, would be sticky) */
    CUdeviceptr probe = 0;
    uint32_t word = 0x600dF00Du, back = 0;
    int healthy = !cu.CtxSynchronize() && !cu.MemAlloc(&probe, sizeof word) && !cu.MemcpyHtoD(probe, &word, sizeof word) &&
                  !cu.CtxSynchronize() && !cu.MemcpyDtoH(&back, probe, sizeof back) && back == word;
    if (probe) cu.MemFree(probe);
    printf("context: %s\n", healthy ? "healthy (synchronize, allocate, copy there and back)" : "BROKEN");
    if (!healthy) fail++;
    printf("sim_varlen (seed %llu): %d passed, %d failed", (unsigned long long)seed, pass, fail);
    if (skip) printf(", %d skipped (late=1 on a GPU)", skip);
    printf("\n");
    return fail ? 1 : 0;
}
