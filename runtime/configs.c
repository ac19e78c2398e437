/* configs.c - fa4_mha_configs_for: every canonical config fa4_mha_fwd can pick for the calls a
 * workload describes (fa4.h), so that a bundle of them never misses.
 *
 * How: the workload is cut into classes of calls that differ in what the arguments decide (target,
 * SM count, dtype, depths, group, mask, layout and page, sink, kv_early, workspace). Within a class
 * the config depends on the shape only where runtime/mha_pick.c reads it, so the walk follows those
 * rules' breakpoints instead of every shape:
 *   - query lengths (seq_rows_q) are cut where seq_rows_q x group crosses RT_DECODE_TILE_ROWS (decode
 *     shape, decode tile) and RT_PACK_ROWS_MAX (a split plan is looked at), for d64 without GQA where
 *     seq_rows_q crosses RT_DECODE_TILE_ROWS and RT_SHORT_Q_ROWS (the short d64 tiles; causal also
 *     RT_SHORT_D64_CAUSAL_Q_ROWS), for d256 where it crosses RT_SHORT_D256_Q_ROWS (the short d256 blocks),
 *     for d128 without GQA at one and two m-blocks of the class's bm (the dynamic tiles' two-m-block rule),
 *     and where it crosses the split kernel's rows per tile (`decode`); within a piece those tests do not change;
 *   - kv lengths are cut where the rules' seqlen_k crosses RT_PERSISTENT_SEQLEN_K (persistent, the short full d128 bn)
 *     and, d64 over dense K/V, up to RT_SHORT_PAD_K where rt_least_pad_bn changes (the short d64 tile's bn), d256 over
 *     dense K/V at RT_D256_FINE_K_LO and RT_D256_FINE_K (the short d256 blocks of 32 keys);
 *   - what is left is the split count, which depends on the tiles (query tiles x heads / heads per CTA
 *     x batch) and the kv blocks: every tile count below the SM count that the ranges can make is
 *     walked (beyond it rt_split_choice gives 1), and every kv block count up to RT_SPLIT_KV_SATURATE
 *     (beyond it the count is the same), through rt_split_outcome, the runtime's own decision, with
 *     rt_split_choice's answers kept in a table per SM count;
 *   - the tile-order, small-grid and dynamic-tiles rules read batch and heads too (which tiles fill the SMs): every
 *     witness also lists the grids they may pick instead (rt_tile_order_twins; where rt_small_grid_open or
 *     rt_dynamic_open, the picks of grids of 1, 2, 4 .. 4 x SMs sequences of one kv head),
 *     and a dynamic pick its twin with dynamic=0 (a call with no tile counter runs that).
 * Each distinct decision keeps one witness: a concrete shape of the class that takes it. The witness
 * is then run through rt_mha_pick, the whole of fa4_mha_fwd's rules, and its configs (the combine
 * kernel's too) are what is listed; a witness that picks another decision than the walk predicted is
 * an internal error, so the walk cannot drift from the rules silently.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

#define BAD(what, ...) rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "workload->" what ": " __VA_ARGS__)

enum {
    LIST_MAX = 64,           /* entries of a workload list */
    SM_MAX = 1024,           /* an SM count */
    SEQ_MAX = 1 << 30,       /* a length */
    WITNESS_TEXT = 320,
    DEFAULT_SEQ_MAX = 131072,
    DEFAULT_BATCH_MAX = 256,
    DEFAULT_HEADS_MAX = 128,
};

/* ---------------------------------------------------------------- the workload, defaults filled */

typedef struct {
    TargetId targets[TARGET_COUNT];
    int n_targets;
    int sm[LIST_MAX], n_sm;             /* n_sm 0: per target, rt_sm_count */
    fa4_dtype dtypes[LIST_MAX];
    int n_dtypes;
    int qk[LIST_MAX], ov[LIST_MAX], n_depths;
    int groups[LIST_MAX], n_groups;
    int heads_min, heads_max;
    fa4_mask masks[LIST_MAX];           /* one FA4_MASK_WINDOW per window */
    int win[LIST_MAX][2], n_masks;
    int batch_min, batch_max;
    int q_lo[2], q_hi[2], n_q;          /* the query-length domain: one or two intervals */
    int k_min, k_max;
    unsigned layouts;
    int pages[LIST_MAX], n_pages;
    int sink[2], n_sink, early[2], n_early, ws[2], n_ws; /* the values each takes */
    int num_splits;
    const char *config;
} Work;

static int when_values(fa4_when w, fa4_when def, int out[2])
{
    if (w == FA4_WHEN_DEFAULT) w = def;
    if (w == FA4_WHEN_NEVER) return out[0] = 0, 1;
    if (w == FA4_WHEN_ALWAYS) return out[0] = 1, 1;
    out[0] = 0, out[1] = 1;
    return 2;
}

static fa4_status check_list(fa4_ctx *ctx, const char *name, const void *p, int n)
{
    if (n < 0 || n > LIST_MAX) return BAD("%s", "n = %d; use 0 (the default) to %d entries", name, n, LIST_MAX);
    if (n && !p) return BAD("%s", "NULL with %d entries", name, n);
    return FA4_OK;
}

/* min..max of a range field: 0..0 takes def_min..def_max. */
static fa4_status range_of(fa4_ctx *ctx, const char *name, int lo, int hi, int def_lo, int def_hi, int cap, int *out_lo,
                           int *out_hi)
{
    if (!lo && !hi) lo = def_lo, hi = def_hi;
    if (lo < 1 || hi < lo || hi > cap)
        return BAD("%s", "%d..%d; give 1 <= min <= max <= %d (0..0: the default)", name, lo, hi, cap);
    *out_lo = lo, *out_hi = hi;
    return FA4_OK;
}

static fa4_status read_targets(fa4_ctx *ctx, const fa4_workload *w, Work *k)
{
    fa4_status s = check_list(ctx, "targets", w->targets, w->n_targets);
    if (s) return s;
    for (int i = 0; i < w->n_targets; i++) {
        if (w->targets[i] != FA4_TARGET_SM90A && w->targets[i] != FA4_TARGET_SM100A && w->targets[i] != FA4_TARGET_SM103A)
            return BAD("targets", "[%d] = %d; name FA4_TARGET_SM90A, FA4_TARGET_SM100A or FA4_TARGET_SM103A", i,
                       (int)w->targets[i]);
        TargetId t = rt_target_of(w->targets[i]);
        int dup = 0;
        for (int j = 0; j < k->n_targets; j++) dup |= k->targets[j] == t;
        if (!dup) k->targets[k->n_targets++] = t;
    }
    if (k->n_targets) return FA4_OK;
    /* a context of one target bundles for it; AUTO for the two GPUs most machines hold (sm103a: name it) */
    if (ctx->opt.target != FA4_TARGET_AUTO) k->targets[k->n_targets++] = rt_target_of(ctx->opt.target);
    else k->targets[k->n_targets++] = TARGET_SM90A, k->targets[k->n_targets++] = TARGET_SM100A;
    return FA4_OK;
}

static fa4_status read_lists(fa4_ctx *ctx, const fa4_workload *w, Work *k)
{
    fa4_status s;
    if ((s = check_list(ctx, "sm_counts", w->sm_counts, w->n_sm_counts)) ||
        (s = check_list(ctx, "dtypes", w->dtypes, w->n_dtypes)) ||
        (s = check_list(ctx, "qk_depths", w->qk_depths, w->n_depths)) ||
        (s = check_list(ctx, "groups", w->groups, w->n_groups)) || (s = check_list(ctx, "masks", w->masks, w->n_masks)) ||
        (s = check_list(ctx, "windows", w->windows, w->n_windows)) ||
        (s = check_list(ctx, "page_sizes", w->page_sizes, w->n_page_sizes)))
        return s;
    for (int i = 0; i < w->n_sm_counts; i++) {
        if (w->sm_counts[i] < 1 || w->sm_counts[i] > SM_MAX)
            return BAD("sm_counts", "[%d] = %d; use 1..%d", i, w->sm_counts[i], SM_MAX);
        k->sm[k->n_sm++] = w->sm_counts[i];
    }
    for (int i = 0; i < w->n_dtypes; i++) {
        if ((unsigned)w->dtypes[i] > FA4_E4M3) return BAD("dtypes", "[%d] = %d is not a fa4_dtype", i, (int)w->dtypes[i]);
        k->dtypes[k->n_dtypes++] = w->dtypes[i];
    }
    if (!k->n_dtypes) k->dtypes[k->n_dtypes++] = FA4_BF16;
    for (int i = 0; i < w->n_depths; i++) {
        int qk = w->qk_depths[i], ov = w->ov_depths ? w->ov_depths[i] : qk;
        if (qk <= 0 || qk % 16 || qk > 1024 || ov <= 0 || ov % 16 || ov > 1024)
            return BAD("qk_depths", "[%d] = %d / %d; use multiples of 16 up to 1024", i, qk, ov);
        k->qk[k->n_depths] = qk, k->ov[k->n_depths++] = ov;
    }
    if (!k->n_depths) k->qk[0] = k->ov[0] = 128, k->n_depths = 1;
    for (int i = 0; i < w->n_groups; i++) {
        if (w->groups[i] < 1 || w->groups[i] > 1024) return BAD("groups", "[%d] = %d; use 1..1024", i, w->groups[i]);
        k->groups[k->n_groups++] = w->groups[i];
    }
    if (!k->n_groups) k->groups[k->n_groups++] = 1;
    return FA4_OK;
}

static fa4_status read_masks(fa4_ctx *ctx, const fa4_workload *w, Work *k)
{
    int windows = 0;
    if (w->n_windows % 2) return BAD("windows", "%d values; give (left, right) pairs", w->n_windows);
    for (int i = 0; i < w->n_windows; i++)
        if (w->windows[i] < -1 || w->windows[i] > FA4_WINDOW_MAX)
            return BAD("windows", "[%d] = %d; use 0..%d, or -1 for unbounded", i, w->windows[i], FA4_WINDOW_MAX);
    for (int i = 0; i < w->n_masks; i++) {
        fa4_mask m = w->masks[i];
        if ((unsigned)m > FA4_MASK_WINDOW) return BAD("masks", "[%d] = %d is not a fa4_mask", i, (int)m);
        if (m != FA4_MASK_WINDOW) {
            k->masks[k->n_masks++] = m;
            continue;
        }
        if (!w->n_windows) return BAD("masks", "[%d] is FA4_MASK_WINDOW; give its (left, right) in windows", i);
        for (int j = 0; j + 1 < w->n_windows && k->n_masks < LIST_MAX; j += 2, windows = 1) {
            k->masks[k->n_masks] = FA4_MASK_WINDOW;
            k->win[k->n_masks][0] = w->windows[j], k->win[k->n_masks++][1] = w->windows[j + 1];
        }
    }
    if (w->n_windows && !windows) return BAD("windows", "given, but masks names no FA4_MASK_WINDOW");
    if (!k->n_masks) k->masks[k->n_masks++] = FA4_MASK_CAUSAL;
    return FA4_OK;
}

static fa4_status read_shape(fa4_ctx *ctx, const fa4_workload *w, Work *k)
{
    fa4_status s;
    int qlo = 0, qhi = 0;
    if ((s = range_of(ctx, "heads_kv_min..max", w->heads_kv_min, w->heads_kv_max, 1, DEFAULT_HEADS_MAX, 1 << 16,
                      &k->heads_min, &k->heads_max)) ||
        (s = range_of(ctx, "batch_min..max", w->batch_min, w->batch_max, 1, DEFAULT_BATCH_MAX, 1 << 24, &k->batch_min,
                      &k->batch_max)) ||
        (s = range_of(ctx, "seqlen_q_min..max", w->seqlen_q_min, w->seqlen_q_max, 1, DEFAULT_SEQ_MAX, SEQ_MAX, &qlo,
                      &qhi)) ||
        (s = range_of(ctx, "seqlen_k_min..max", w->seqlen_k_min, w->seqlen_k_max, 1, DEFAULT_SEQ_MAX, SEQ_MAX,
                      &k->k_min, &k->k_max)))
        return s;
    if (w->decode_q < 0 || w->decode_q > SEQ_MAX) return BAD("decode_q", "%d; use 0 (none) to %d", w->decode_q, SEQ_MAX);
    k->q_lo[0] = qlo, k->q_hi[0] = qhi, k->n_q = 1;
    if (w->decode_q && w->decode_q + 1 < qlo) k->q_lo[1] = 1, k->q_hi[1] = w->decode_q, k->n_q = 2;
    else if (w->decode_q) k->q_lo[0] = 1, k->q_hi[0] = qhi > w->decode_q ? qhi : w->decode_q;
    k->layouts = w->layouts ? w->layouts : FA4_LAYOUT_DENSE;
    if (k->layouts & ~15u) return BAD("layouts", "0x%x holds bits that are no FA4_LAYOUT_*", k->layouts);
    for (int i = 0; i < w->n_page_sizes; i++) {
        int p = w->page_sizes[i];
        if (p < 16 || p > 256 || (p & (p - 1))) return BAD("page_sizes", "[%d] = %d; use powers of two in 16..256", i, p);
        k->pages[k->n_pages++] = p;
    }
    if ((k->layouts & (FA4_LAYOUT_PAGED | FA4_LAYOUT_VARLEN_PAGED)) && !k->n_pages)
        return BAD("page_sizes", "none given for a paged layout (FA4_LAYOUT_PAGED, FA4_LAYOUT_VARLEN_PAGED)");
    return FA4_OK;
}

static fa4_status read_work(fa4_ctx *ctx, const fa4_workload *in, Work *k)
{
    fa4_workload w = FA4_WORKLOAD_INIT;
    if (!in) return BAD("", "NULL");
    if (in->size < offsetof(fa4_workload, version) + sizeof in->version || !in->version)
        return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "workload->size, version: %zu, %u; initialise it with "
                       "FA4_WORKLOAD_INIT", in->size, in->version);
    memcpy(&w, in, in->size < sizeof w ? in->size : sizeof w);
    memset(k, 0, sizeof *k);
    fa4_status s;
    if ((s = read_targets(ctx, &w, k)) || (s = read_lists(ctx, &w, k)) || (s = read_masks(ctx, &w, k)) ||
        (s = read_shape(ctx, &w, k)))
        return s;
    const fa4_when *when[3] = {&w.sink, &w.kv_early, &w.workspace};
    for (int i = 0; i < 3; i++)
        if ((unsigned)*when[i] > FA4_WHEN_EITHER)
            return BAD("sink, kv_early, workspace", "%d is not a fa4_when", (int)*when[i]);
    k->n_sink = when_values(w.sink, FA4_WHEN_NEVER, k->sink);
    k->n_early = when_values(w.kv_early, FA4_WHEN_NEVER, k->early);
    k->n_ws = when_values(w.workspace, FA4_WHEN_EITHER, k->ws);
    if (w.num_splits < 0 || w.num_splits > FA4_MAX_SPLITS)
        return BAD("num_splits", "%d; use 0 (the runtime picks), 1 or 2..%d", w.num_splits, FA4_MAX_SPLITS);
    if (w.num_splits > 1 && w.sink == FA4_WHEN_ALWAYS)
        return BAD("num_splits", "%d with a sink on every call; fa4_mha_fwd refuses a split with a sink", w.num_splits);
    k->num_splits = w.num_splits;
    k->config = w.config;
    return FA4_OK;
}

/* ---------------------------------------------------------------- what was found */

typedef struct {
    char *config, *example, *note;
    uint64_t hash;   /* of config, or of note */
    TargetId target;
    int count;
} Found;

typedef struct {
    Found *v;
    int n, cap;
} FoundList;

/* rt_split_choice(t, sm, k) for t < sm, k <= RT_SPLIT_KV_SATURATE; 0: not asked yet. */
typedef struct {
    int sm;
    unsigned char *choice;
} ChoiceMemo;

typedef struct {
    fa4_ctx *ctx;
    Work w;
    FoundList configs, skips;
    ChoiceMemo memo[LIST_MAX + TARGET_COUNT];
    int n_memo;
    Plan *plan; /* scratch */
} Walk;

static int add_found(FoundList *l, const char *config, const char *example, const char *note, TargetId t)
{
    const char *key = config ? config : note;
    uint64_t h = rt_fnv1a(key, strlen(key), RT_FNV_SEED);
    for (int i = 0; i < l->n; i++) {
        Found *f = &l->v[i];
        if (f->hash == h && f->target == t && !strcmp(config ? f->config : f->note, key)) {
            f->count++;
            return 0;
        }
    }
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        Found *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        l->v = v, l->cap = cap;
    }
    Found f = {config ? strdup(config) : NULL, strdup(example), note ? strdup(note) : NULL, h, t, 1};
    if ((config && !f.config) || !f.example || (note && !f.note)) {
        free(f.config), free(f.example), free(f.note);
        return -1;
    }
    l->v[l->n++] = f;
    return 0;
}

static void free_found(FoundList *l)
{
    for (int i = 0; i < l->n; i++) free(l->v[i].config), free(l->v[i].example), free(l->v[i].note);
    free(l->v);
}

/* One call of the class, as a user would recognise it. */
static void describe(const RtMhaShape *s, char *buf, size_t n)
{
    static const char *const masks[] = {"none", "causal", "window"};
    static const char *const dtypes[] = {"bf16", "fp16", "e4m3"};
    int k = snprintf(buf, n, "%s (%d SMs) %s qk %d ov %d, %s", target_name[s->target], s->sm_count, dtypes[s->dtype],
                     s->qk_depth, s->ov_depth, masks[s->mask]);
    if (s->mask == FA4_MASK_WINDOW && k > 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ":%d,%d", s->window_left, s->window_right);
    if (k > 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ": batch %d, heads_q %d, heads_kv %d, %sseqlen_q %llu, %s %lld",
                      s->batch, s->heads_q, s->heads_kv, s->varlen ? "varlen, max_" : "",
                      (unsigned long long)s->seq_rows_q,
                      s->page_size ? "max_pages x page_size" : s->varlen ? "packed seqlen_k" : "seqlen_k",
                      (long long)s->seqlen_k);
    if (k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, "%s%s%s%s%s", s->page_size ? ", paged" : "", s->sink ? ", sink" : "",
                 s->num_splits ? ", num_splits forced" : "", s->workspace ? ", workspace" : ", no workspace",
                 s->kv_early ? ", kv_early" : "");
}

/* The canonical text of c, or (returns 1) why it does not plan. */
static int canonical(Walk *wk, const Config *c, char *out, size_t n)
{
    if (plan_make(c, wk->plan, out, n)) return 1;
    snprintf(out, n, "%s", wk->plan->canonical);
    return 0;
}

/* A dynamic config's twin with dynamic=0, which a call without a tile counter runs (runtime/sched.c); with
 * itself too (self): a config the rules may pick. One that does not plan is left out; -1 when out of memory. */
static int add_pick(Walk *wk, const Config *c, int self, const char *ex, TargetId t)
{
    char text[512];
    Config twin = *c;
    rt_static_walk(&twin);
    if (self && !canonical(wk, c, text, sizeof text) && add_found(&wk->configs, text, ex, NULL, t)) return -1;
    return c->dynamic > 0 && !canonical(wk, &twin, text, sizeof text) && add_found(&wk->configs, text, ex, NULL, t)
               ? -1 : 0;
}

static fa4_status record(Walk *wk, const RtMhaShape *s, const RtMhaPick *pk)
{
    char text[512], ex[WITNESS_TEXT];
    describe(s, ex, sizeof ex);
    int bad = canonical(wk, &pk->main, text, sizeof text);
    if (add_found(bad ? &wk->skips : &wk->configs, bad ? NULL : text, ex, bad ? text : NULL, s->target)) goto oom;
    if (!bad && add_pick(wk, &pk->main, 0, ex, s->target)) goto oom;
    Config twins[3]; /* the tile-order rules read batch, heads and lengths: list every grid they may pick */
    for (int i = 0, n = bad ? 0 : rt_tile_order_twins(&pk->main, s, twins); i < n; i++)
        if (add_pick(wk, &twins[i], 1, ex, s->target)) goto oom;
    if (!bad && pk->combine) {
        if (canonical(wk, &pk->comb, text, sizeof text))
            return rt_fail(wk->ctx, FA4_ERR_INTERNAL, "configs: the combine kernel of '%s' does not plan: %s", ex, text);
        if (add_found(&wk->configs, text, ex, NULL, s->target)) goto oom;
    }
    return FA4_OK;
oom:
    return rt_fail(wk->ctx, FA4_ERR_OUT_OF_MEMORY, "configs: out of memory");
}

/* ---------------------------------------------------------------- the split count's inputs */

static int split_choice(Walk *wk, int sm, uint64_t tiles, int kv_blocks)
{
    if (tiles >= (uint64_t)sm || kv_blocks < 1) return rt_split_choice(tiles, sm, kv_blocks);
    int k = kv_blocks < RT_SPLIT_KV_SATURATE ? kv_blocks : RT_SPLIT_KV_SATURATE;
    ChoiceMemo *m = NULL;
    for (int i = 0; i < wk->n_memo && !m; i++)
        if (wk->memo[i].sm == sm) m = &wk->memo[i];
    if (!m && wk->n_memo < (int)(sizeof wk->memo / sizeof wk->memo[0])) {
        m = &wk->memo[wk->n_memo];
        m->choice = calloc((size_t)sm * (RT_SPLIT_KV_SATURATE + 1), 1);
        if (m->choice) m->sm = sm, wk->n_memo++;
        else m = NULL;
    }
    if (!m) return rt_split_choice(tiles, sm, kv_blocks);
    unsigned char *c = &m->choice[tiles * (RT_SPLIT_KV_SATURATE + 1) + (size_t)k];
    if (!*c) *c = (unsigned char)rt_split_choice(tiles, sm, k);
    return *c;
}

/* The tile counts a piece of the class can make: products m x hh x b, m query tiles, hh heads per
 * tile row (heads_q / heads per CTA), b sequences; each count below the SM count with one
 * factorization, and one product at or past it (every such count picks alike). */
typedef struct {
    int sm;
    unsigned char *has;          /* [sm] */
    int *m, *h, *b;              /* [sm]: a witness of each count (h: heads_kv) */
    int big, big_m, big_h, big_b;
} Tiles;

static int tiles_make(Tiles *t, int sm, int m0, int m1, int h0, int h1, int g, int hpc, int b0, int b1)
{
    memset(t, 0, sizeof *t);
    t->sm = sm;
    t->has = calloc((size_t)sm, 1);
    t->m = calloc((size_t)sm, sizeof *t->m), t->h = calloc((size_t)sm, sizeof *t->h), t->b = calloc((size_t)sm, sizeof *t->b);
    if (!t->has || !t->m || !t->h || !t->b) return -1;
    for (int h = h0; h <= h1; h++) {
        if ((int64_t)h * g % hpc) continue; /* the runtime refuses heads a CTA's heads do not divide */
        int64_t hh = (int64_t)h * g / hpc;
        for (int m = m0; m <= m1; m++) {
            int64_t mh = hh * m;
            if (mh * b1 >= sm && !t->big) t->big = 1, t->big_m = m, t->big_h = h, t->big_b = b1;
            for (int b = b0; b <= b1 && mh * b < sm; b++) {
                int64_t x = mh * b;
                if (!t->has[x]) t->has[x] = 1, t->m[x] = m, t->h[x] = h, t->b[x] = b;
            }
            if (mh >= sm) break; /* larger m only make larger counts */
        }
        if (hh * m0 * b0 >= sm) break;
    }
    return 0;
}

static void tiles_free(Tiles *t)
{
    free(t->has), free(t->m), free(t->h), free(t->b);
}

/* ---------------------------------------------------------------- a class and its pieces */

/* A kv region: the rules' seqlen_k on one side of RT_PERSISTENT_SEQLEN_K, for sequences b0..b1.
 * kv0..kv1 (every step-th value) are the kv rows a tile streams (the split count reads them):
 * seqlen_k itself, or, varlen without pages, the mean length (the packed total over b). */
typedef struct {
    int side;           /* 0: seqlen_k <= RT_PERSISTENT_SEQLEN_K, 1: past it; 2 + i: the i-th run of one kv-length rule */
    int b0, b1;
    int64_t kv0, kv1, step;
    int varlen_total;   /* varlen without pages: seqlen_k is the packed total */
    int64_t tot0, tot1; /* its range (varlen_total) */
} Region;

/* The rules' seqlen_k for kv rows kv with b sequences; -1 when the region has no such shape. */
static int64_t region_seqlen_k(const Region *r, int64_t kv, int b)
{
    if (!r->varlen_total) return kv;
    int64_t total = kv * b;
    if (total < r->tot0) total = r->tot0;
    if (total > r->tot1) total = r->tot1;
    return total / b == kv ? total : -1;
}

/* The smallest kv of the region (a multiple of step) whose kv block count at bn is k, or -1. */
static int64_t kv_for_blocks(const Region *r, int64_t k, int bn)
{
    int64_t lo = (k - 1) * bn + 1, hi = k * bn;
    if (lo < r->kv0) lo = r->kv0;
    if (hi > r->kv1) hi = r->kv1;
    lo = (lo + r->step - 1) / r->step * r->step;
    return lo <= hi ? lo : -1;
}

/* A decision taken in a piece: its config follows from the decision, the query piece and the kv side
 * alone (the rules read nothing else), so a piece of another batch that takes it needs no witness. */
typedef struct {
    int side;
    uint64_t q0, q1;
    RtSplitOutcome o;
} Taken;

/* A class: everything but the shape numbers, and the walk's scratch. */
typedef struct {
    Walk *wk;
    RtMhaShape s0;   /* the class's arguments; the shape fields are set per witness */
    Config c0;       /* its config from the arguments */
    Taken *taken;    /* decisions already witnessed */
    int n_taken, cap_taken;
} Class;

/* 1 when (side, piece, decision) was witnessed already, else remembers it (-1: out of memory). */
static int taken(Class *cl, const Region *r, uint64_t q0, uint64_t q1, const RtSplitOutcome *o)
{
    RtSplitOutcome none = {0, 0, 0};
    if (!o) o = &none;
    for (int i = 0; i < cl->n_taken; i++) {
        const Taken *t = &cl->taken[i];
        if (t->side == r->side && t->q0 == q0 && t->q1 == q1 && t->o.path == o->path &&
            (t->o.splits > 1) == (o->splits > 1) && t->o.cluster == o->cluster)
            return 1;
    }
    if (cl->n_taken == cl->cap_taken) {
        int cap = cl->cap_taken ? 2 * cl->cap_taken : 32;
        Taken *v = realloc(cl->taken, (size_t)cap * sizeof *v);
        if (!v) return -1;
        cl->taken = v, cl->cap_taken = cap;
    }
    cl->taken[cl->n_taken++] = (Taken){r->side, q0, q1, *o};
    return 0;
}

/* The witness shape of a piece: query rows sq, heads_kv h, b sequences, kv rows kv. */
static int witness(const Class *cl, const Region *r, uint64_t sq, int h, int b, int64_t kv, RtMhaShape *s)
{
    *s = cl->s0;
    s->seq_rows_q = sq;
    s->heads_kv = h, s->heads_q = h * (cl->c0.group), s->batch = b;
    s->seqlen_k = region_seqlen_k(r, kv, b);
    return s->seqlen_k > 0 ? 0 : -1;
}

/* The whole rules on one witness, recorded; the decision must be the one the walk predicted. */
static fa4_status pick_witness(const Class *cl, const RtMhaShape *s, const RtSplitOutcome *want)
{
    RtMhaPick pk;
    fa4_status st = rt_mha_pick(cl->wk->ctx, s, 0, &pk);
    if (st) return st;
    if (want && (pk.path != want->path || (pk.splits > 1) != (want->splits > 1) || pk.main.cluster_split != want->cluster)) {
        char ex[WITNESS_TEXT];
        describe(s, ex, sizeof ex);
        return rt_fail(cl->wk->ctx, FA4_ERR_INTERNAL, "configs: the walk predicted split path %d, %d splits, cluster %d "
                       "for '%s', but the rules picked %d, %d, %d: configs.c no longer follows mha_pick.c",
                       want->path, want->splits, want->cluster, ex, pk.path, pk.splits, pk.main.cluster_split);
    }
    if ((st = record(cl->wk, s, &pk))) return st;
    /* the small-grid and dynamic-tiles rules read batch and heads, which a piece's one witness does not span: grids of
     * one kv head's group and 1, 2, 4 .. 4 x SMs sequences. Their thresholds (small: 128-row tiles <= SMs / 2;
     * dynamic: tiles >= 2 x SMs) are a factor of 4 or more apart, so a power of two falls in every region between */
    RtMhaShape t = *s;
    if (!rt_small_grid_open(&pk.main, s) && !rt_dynamic_open(&pk.main, s)) return FA4_OK;
    for (int64_t b = 1; b <= 4 * (int64_t)s->sm_count; b *= 2) {
        t.batch = (int)b, t.heads_kv = 1, t.heads_q = cl->c0.group;
        if ((st = rt_mha_pick(cl->wk->ctx, &t, 0, &pk)) || (st = record(cl->wk, &t, &pk))) return st;
    }
    return FA4_OK;
}

/* rt_split_outcome's fits in the walk: the cluster config's plan, asked once per n. */
typedef struct {
    fa4_ctx *ctx;
    const Config *sc;
    uint32_t tried, fits;
    fa4_status st;
} WalkFits;

static int walk_fits(void *u, int n)
{
    WalkFits *f = u;
    if (!(f->tried >> n & 1)) {
        RtSplitFacts facts;
        if ((f->st = rt_split_facts(f->ctx, f->sc, n, &facts))) return -1;
        f->tried |= 1u << n;
        f->fits |= (facts.cluster_fits >> n & 1) << n;
    }
    return (int)(f->fits >> n & 1);
}

/* The distinct decisions of one piece, each with a witness: up to FA4_MAX_CLUSTER_SPLIT of them. */
typedef struct {
    RtSplitOutcome o[FA4_MAX_CLUSTER_SPLIT + 2];
    int t[FA4_MAX_CLUSTER_SPLIT + 2];   /* witness tile count (sm: the big one) */
    int64_t k[FA4_MAX_CLUSTER_SPLIT + 2];
    int n;
} Decisions;

static int decision_add(Decisions *d, const RtSplitOutcome *o, int t, int64_t k)
{
    for (int i = 0; i < d->n; i++)
        if (d->o[i].path == o->path && (d->o[i].splits > 1) == (o->splits > 1) && d->o[i].cluster == o->cluster) return 0;
    if (d->n == (int)(sizeof d->o / sizeof d->o[0])) return 0;
    d->o[d->n] = *o, d->t[d->n] = t, d->k[d->n++] = k;
    return 1;
}

/* Every (tiles, kv blocks) of the piece through the runtime's decision. Stops once as many distinct
 * decisions are found as there can be: 2 with a workspace (split or not), FA4_MAX_CLUSTER_SPLIT on the
 * cluster path (none, or 2..FA4_MAX_CLUSTER_SPLIT CTAs). */
static fa4_status walk_counts(const Class *cl, const RtSplitPrelude *p, RtSplitScene sc, const Tiles *tl,
                              const int64_t *ks, int nk, Decisions *d)
{
    Walk *wk = cl->wk;
    WalkFits f = {wk->ctx, &p->sc, 0, 0, FA4_OK};
    int most = sc.cluster_ok && sc.decode ? FA4_MAX_CLUSTER_SPLIT : sc.pick && sc.use_ws ? 2 : 1;
    for (int t = 1; t <= tl->sm && d->n < most; t++) {
        int big = t == tl->sm;
        if (big ? !tl->big : !tl->has[t]) continue;
        sc.tiles = big ? (uint64_t)tl->big_m * (uint64_t)((int64_t)tl->big_h * cl->c0.group / p->f.hpc) * (uint64_t)tl->big_b
                       : (uint64_t)t;
        for (int i = 0; i < nk && d->n < most; i++) {
            sc.kv_blocks = (int)ks[i];
            int choice = sc.pick ? split_choice(wk, sc.sm_count, sc.tiles, sc.kv_blocks) : 1;
            RtSplitOutcome o;
            if (rt_split_outcome(&sc, choice, walk_fits, &f, &o)) return f.st;
            decision_add(d, &o, t, ks[i]);
        }
    }
    return FA4_OK;
}

/* One piece: query rows lo..hi (no rule threshold inside) in one kv region. */
static fa4_status walk_piece(Class *cl, const Region *r, uint64_t lo, uint64_t hi, int *cut)
{
    Walk *wk = cl->wk;
    const Work *w = &wk->w;
    RtMhaShape s;
    *cut = 0;
    if (witness(cl, r, lo, w->heads_min, r->b0, r->kv0, &s)) return FA4_OK; /* no such shape */
    Config c = cl->c0;
    rt_mha_shape_rules(&c, &s);
    RtSplitPrelude p;
    fa4_status st = rt_split_prelude(wk->ctx, &s, &c, 0, &p);
    if (st) return st;
    if (p.done) {
        int seen = taken(cl, r, lo, hi, NULL);
        return seen < 0 ? rt_fail(wk->ctx, FA4_ERR_OUT_OF_MEMORY, "configs: out of memory")
               : seen   ? FA4_OK
                        : pick_witness(cl, &s, NULL);
    }
    uint64_t rows = (uint64_t)p.f.rows;
    if (lo <= rows && rows < hi) { /* `decode` changes at the split kernel's rows: cut here first */
        *cut = (int)rows;
        return FA4_OK;
    }
    RtSplitScene sc;
    rt_split_scene(&s, &p, &sc);
    Tiles tl = {0};
    int64_t *ks = malloc((RT_SPLIT_KV_SATURATE + 2) * sizeof *ks);
    int nk = 0;
    if (!ks || tiles_make(&tl, sc.sm_count, (int)((lo + rows - 1) / rows), (int)((hi + rows - 1) / rows), w->heads_min,
                          w->heads_max, cl->c0.group, p.f.hpc, r->b0, r->b1)) {
        free(ks);
        tiles_free(&tl);
        return rt_fail(wk->ctx, FA4_ERR_OUT_OF_MEMORY, "configs: out of memory");
    }
    int64_t k0 = (r->kv0 + p.f.bn - 1) / p.f.bn, k1 = (r->kv1 + p.f.bn - 1) / p.f.bn;
    for (int64_t k = k0; k <= k1 && k <= RT_SPLIT_KV_SATURATE; k++)
        if (kv_for_blocks(r, k, p.f.bn) > 0) ks[nk++] = k;
    if (k0 > RT_SPLIT_KV_SATURATE) ks[nk++] = k0; /* every count past it picks alike */
    Decisions d = {0};
    st = walk_counts(cl, &p, sc, &tl, ks, nk, &d);
    for (int i = 0; i < d.n && !st; i++) {
        int seen = taken(cl, r, lo, hi, &d.o[i]);
        if (seen < 0) st = rt_fail(wk->ctx, FA4_ERR_OUT_OF_MEMORY, "configs: out of memory");
        if (seen) continue;
        int t = d.t[i], big = t == tl.sm;
        int m = big ? tl.big_m : tl.m[t], h = big ? tl.big_h : tl.h[t], b = big ? tl.big_b : tl.b[t];
        uint64_t sq = (uint64_t)(m - 1) * rows + 1;
        if (sq < lo) sq = lo;
        if (witness(cl, r, sq, h, b, kv_for_blocks(r, d.k[i], p.f.bn), &s))
            st = rt_fail(wk->ctx, FA4_ERR_INTERNAL, "configs: no witness shape for %d kv blocks", (int)d.k[i]);
        else
            st = pick_witness(cl, &s, &d.o[i]);
    }
    free(ks);
    tiles_free(&tl);
    return st;
}

/* Query rows lo..hi in region r, cut at the rules' thresholds (those of the group first, then the
 * split kernel's rows as walk_piece finds them). */
static fa4_status walk_queries(Class *cl, const Region *r, int lo, int hi)
{
    int g = cl->c0.group, cuts[4], n = 0;
    if (g > 1) cuts[n++] = RT_DECODE_TILE_ROWS / g, cuts[n++] = RT_PACK_ROWS_MAX / g;
    if (g == 1 && cl->c0.qk_depth == 64) cuts[n++] = RT_DECODE_TILE_ROWS, cuts[n++] = RT_SHORT_Q_ROWS; /* short d64 */
    if (g == 1 && cl->c0.qk_depth == 64 && cl->c0.mask == MASK_CAUSAL) cuts[n++] = RT_SHORT_D64_CAUSAL_Q_ROWS;
    if (cl->c0.qk_depth == 256) cuts[n++] = RT_SHORT_D256_Q_ROWS; /* short d256 */
    int bm = g == 1 && cl->c0.qk_depth == 128 ? rt_config_bm(&cl->c0) : 0;
    if (bm) cuts[n++] = bm, cuts[n++] = 2 * bm; /* d128 MHA: one and two m-blocks (the dynamic tiles' two-block rule) */
    int stack[2 * 64][2], top = 0;
    for (int i = 0; i < n; i++) /* pieces between the cuts, pushed last first */
        for (int j = i + 1; j < n; j++)
            if (cuts[j] < cuts[i]) { int x = cuts[i]; cuts[i] = cuts[j]; cuts[j] = x; }
    int from = lo, pieces[5][2], np = 0;
    for (int i = 0; i <= n; i++) {
        int to = i < n ? cuts[i] : hi;
        if (to > hi) to = hi;
        if (to >= from) pieces[np][0] = from, pieces[np++][1] = to, from = to + 1;
    }
    while (np) /* the shortest queries first */
        np--, stack[top][0] = pieces[np][0], stack[top++][1] = pieces[np][1];
    while (top) {
        int a = stack[--top][0], b = stack[top][1], cut;
        fa4_status st = walk_piece(cl, r, (uint64_t)a, (uint64_t)b, &cut);
        if (st) return st;
        if (!cut) continue;
        if (top + 2 > (int)(sizeof stack / sizeof stack[0]))
            return rt_fail(cl->wk->ctx, FA4_ERR_INTERNAL, "configs: too many query pieces");
        stack[top][0] = cut + 1, stack[top++][1] = b;
        stack[top][0] = a, stack[top++][1] = cut;
    }
    return FA4_OK;
}

/* The kv regions of a class and their query pieces. */
static fa4_status walk_class(Class *cl)
{
    const Work *w = &cl->wk->w;
    const int64_t T = RT_PERSISTENT_SEQLEN_K;
    int page = cl->s0.page_size, varlen_total = cl->s0.varlen && !page;
    int64_t step = page ? page : 1;
    /* paged: the table's reach, a whole number of pages covering some sequence of the range */
    int64_t lo = page ? (w->k_min + page - 1) / page * page : w->k_min;
    int64_t hi = page ? (w->k_max + page - 1) / page * page : w->k_max;
    Region rs[2 * (LIST_MAX + 2)];
    int n = 0;
    if (!varlen_total) {
        Region a = {0, w->batch_min, w->batch_max, lo, hi < T ? hi : T / step * step, step, 0, 0, 0};
        Region b = {1, w->batch_min, w->batch_max, lo > T ? lo : (T / step + 1) * step, hi, step, 0, 0, 0};
        if (!page && cl->c0.qk_depth == 64) /* the short d64 tile's bn: a region per run of one least-padding bn */
            while (a.kv0 <= a.kv1 && a.kv0 <= RT_SHORT_PAD_K && n < (int)(sizeof rs / sizeof rs[0]) - 2) {
                Region piece = a;
                int bn = rt_least_pad_bn(a.kv0);
                piece.side = 2 + n, piece.kv1 = a.kv0;
                while (piece.kv1 < a.kv1 && piece.kv1 < RT_SHORT_PAD_K && rt_least_pad_bn(piece.kv1 + 1) == bn)
                    piece.kv1++;
                rs[n++] = piece;
                a.kv0 = piece.kv1 + 1;
            }
        if (!page && cl->c0.qk_depth == 256) /* the short d256 blocks: 32 keys over (RT_D256_FINE_K_LO, RT_D256_FINE_K] */
            for (int i = 0; i < 2; i++) {
                int64_t cut = i ? RT_D256_FINE_K : RT_D256_FINE_K_LO;
                if (a.kv0 <= cut && cut < a.kv1) {
                    Region piece = a;
                    piece.side = 2 + n, piece.kv1 = cut;
                    rs[n++] = piece;
                    a.kv0 = cut + 1;
                }
            }
        if (a.kv0 <= a.kv1) rs[n++] = a;
        if (b.kv0 <= b.kv1) rs[n++] = b;
    } else {
        /* the packed total decides persistent, the mean the kv blocks: each batch below the SM count on
         * its own (its tiles are its own), and past it the smallest and the largest batch */
        int sm = cl->s0.sm_count, bs[2 * 1024 + 2], nb = 0;
        for (int b = w->batch_min; b <= w->batch_max && b < sm && nb < 2 * 1024; b++) bs[nb++] = b;
        int big0 = w->batch_min > sm ? w->batch_min : sm;
        if (w->batch_max >= big0) bs[nb++] = big0;
        if (w->batch_max > big0) bs[nb++] = w->batch_max;
        for (int i = 0; i < nb; i++) {
            int64_t b = bs[i], t0 = b * w->k_min, t1 = b * w->k_max;
            Region a = {0, (int)b, (int)b, t0 / b, (t1 < T ? t1 : T) / b, 1, 1, t0, t1 < T ? t1 : T};
            Region c = {1, (int)b, (int)b, (t0 > T ? t0 : T + 1) / b, t1 / b, 1, 1, t0 > T ? t0 : T + 1, t1};
            if (a.tot0 <= a.tot1) rs[n++] = a;
            if (c.tot0 <= c.tot1) rs[n++] = c;
            fa4_status st = FA4_OK;
            for (int j = 0; j < n && !st; j++)
                for (int q = 0; q < w->n_q && !st; q++) st = walk_queries(cl, &rs[j], w->q_lo[q], w->q_hi[q]);
            if (st) return st;
            n = 0;
        }
    }
    for (int j = 0; j < n; j++)
        for (int q = 0; q < w->n_q; q++) {
            fa4_status st = walk_queries(cl, &rs[j], w->q_lo[q], w->q_hi[q]);
            if (st) return st;
        }
    return FA4_OK;
}

/* ---------------------------------------------------------------- every class */

/* The layouts of the workload, as (varlen, page) pairs. */
static int layouts(const Work *w, int out[][2])
{
    int n = 0;
    if (w->layouts & FA4_LAYOUT_DENSE) out[n][0] = 0, out[n++][1] = 0;
    if (w->layouts & FA4_LAYOUT_VARLEN) out[n][0] = 1, out[n++][1] = 0;
    for (int i = 0; i < w->n_pages; i++) {
        if (w->layouts & FA4_LAYOUT_PAGED) out[n][0] = 0, out[n++][1] = w->pages[i];
        if (w->layouts & FA4_LAYOUT_VARLEN_PAGED) out[n][0] = 1, out[n++][1] = w->pages[i];
    }
    return n;
}

/* The classes, as an odometer over the lists (the last dimension turns fastest). */
enum { D_TARGET, D_SM, D_DTYPE, D_DEPTH, D_GROUP, D_MASK, D_LAYOUT, D_SINK, D_EARLY, D_WS, D_COUNT };

static fa4_status walk_all(Walk *wk)
{
    Work *w = &wk->w;
    int lay[2 * LIST_MAX + 2][2], n_lay = layouts(w, lay), sms[TARGET_COUNT][LIST_MAX], n_sms[TARGET_COUNT];
    for (int t = 0; t < w->n_targets; t++) {
        n_sms[t] = w->n_sm ? w->n_sm : 1;
        for (int i = 0; i < n_sms[t]; i++) sms[t][i] = w->n_sm ? w->sm[i] : rt_sm_count(wk->ctx, w->targets[t]);
    }
    int count[D_COUNT] = {w->n_targets, 0, w->n_dtypes, w->n_depths, w->n_groups, w->n_masks, n_lay, w->n_sink,
                          w->n_early, w->n_ws};
    int at[D_COUNT] = {0};
    for (;;) {
        count[D_SM] = n_sms[at[D_TARGET]];
        Class cl = {wk, {0}, {0}, NULL, 0, 0};
        RtMhaShape *s = &cl.s0;
        s->target = w->targets[at[D_TARGET]];
        s->sm_count = sms[at[D_TARGET]][at[D_SM]];
        s->dtype = w->dtypes[at[D_DTYPE]];
        s->qk_depth = w->qk[at[D_DEPTH]], s->ov_depth = w->ov[at[D_DEPTH]];
        s->heads_kv = 1, s->heads_q = w->groups[at[D_GROUP]], s->batch = 1;
        s->mask = w->masks[at[D_MASK]];
        s->window_left = w->win[at[D_MASK]][0], s->window_right = w->win[at[D_MASK]][1];
        s->varlen = lay[at[D_LAYOUT]][0], s->page_size = lay[at[D_LAYOUT]][1];
        s->sink = w->sink[at[D_SINK]], s->kv_early = w->early[at[D_EARLY]], s->workspace = w->ws[at[D_WS]];
        s->num_splits = w->num_splits, s->config = w->config;
        s->seq_rows_q = 1, s->seqlen_k = 1;
        fa4_status st = FA4_OK;
        if (!(s->sink && s->num_splits > 1)) { /* fa4_mha_fwd refuses those calls */
            st = rt_mha_base_config(wk->ctx, s, &cl.c0);
            if (!st) st = walk_class(&cl);
        }
        free(cl.taken);
        if (st) return st;
        int d = D_COUNT - 1;
        while (d >= 0 && ++at[d] == count[d]) at[d--] = 0;
        if (d < 0) return FA4_OK;
    }
}

fa4_status fa4_mha_configs_for(fa4_ctx *ctx, const fa4_workload *w, fa4_config_fn fn, void *user)
{
    if (!ctx) return rt_fail(NULL, FA4_ERR_INVALID_ARGUMENT, "ctx: NULL");
    if (!fn) return rt_fail(ctx, FA4_ERR_INVALID_ARGUMENT, "fn: NULL");
    Walk *wk = calloc(1, sizeof *wk);
    if (!wk || !(wk->plan = malloc(sizeof *wk->plan))) {
        free(wk);
        return rt_fail(ctx, FA4_ERR_OUT_OF_MEMORY, "configs: out of memory");
    }
    wk->ctx = ctx;
    fa4_status s = read_work(ctx, w, &wk->w);
    if (!s) s = walk_all(wk);
    int stop = 0;
    for (int i = 0; i < wk->configs.n && !s && !stop; i++) {
        fa4_config_entry e = {sizeof e, wk->configs.v[i].config, wk->configs.v[i].example, NULL, wk->configs.v[i].count};
        stop = fn(user, &e);
    }
    for (int i = 0; i < wk->skips.n && !s && !stop; i++) {
        const Found *f = &wk->skips.v[i];
        fa4_config_entry e = {sizeof e, NULL, f->example, f->note, f->count};
        stop = fn(user, &e);
    }
    free_found(&wk->configs);
    free_found(&wk->skips);
    for (int i = 0; i < wk->n_memo; i++) free(wk->memo[i].choice);
    free(wk->plan);
    free(wk);
    return s;
}
