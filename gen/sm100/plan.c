/* sm100/plan.c - the sm_100a target: defaults, checks and the plan of the
 * FlashAttention-4 "2Q" MHA forward kernel.
 *
 * CTA = 16 warps: softmax warpgroups (one per 128-row Q tile, one row per
 * thread), a correction warpgroup (rescales O in TMEM, epilogue), one MMA
 * warp (TMEM allocation, every tcgen05.mma and commit), one TMA load warp.
 * TMEM holds S, P (over S) and O per Q tile; K and V stream through one
 * "fused" ring (odd slot count) or separate K and V rings (even), the
 * FA4Config rule of the FlashAttention-4 kernel. The numbers the emitter needs are all here.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../mha_bwd.h"
#include "../mha_plan.h"
#include "bwd100.h"
#include "mla100.h"
#include "sm100.h"

enum {
    SM100_SMEM_LIMIT = 232448, /* 228 KB carveout - 1 KB reserved */
    SM100_MMA_M = 128,
    SM100_TMEM_COLS = 512,
    SM100_WG = 128,
    SM100_WARP = 32,
    SM100_MIN_BN = 64,
    SM100_MAX_SLOTS = 8,
    SM100_S_CHUNK = 32,     /* S columns per tcgen05.ld */
    SM100_O_CHUNK = 16,     /* O columns per correction tcgen05.ld/st */
    SM100_STATS_COLS = 3,   /* TMEM columns of row statistics per Q tile: O factor, l, m */
    SM100_RESIDENT_BN = 128 /* S of this many columns fits the softmax registers (one pass) */
};

/* Registers per thread of each role; 128 x (2 x softmax + correction + other) = 65536.
 * Warpgroup 3 (MMA, load) gets 56, or 64 when the MMA warp issues more than
 * SM100_MMA_HEAVY MMAs per KV tile (ptxas keeps a descriptor word per Q K step
 * live); the correction warpgroup takes the rest. Measured with ptxas 13.0 on
 * tests/ptxas/sm100_matrix.txt: these are the splits with 0 spill bytes. */
enum { SM100_SFX_REGS = 192, SM100_OTHER_REGS = 56, SM100_OTHER_REGS_HEAVY = 64, SM100_MMA_HEAVY = 32,
       SM100_IDLE_REGS = 24 };
/* Where the softmax's 192 registers do not hold (ptxas 13.0, tests/ptxas/run_spills.sh), refused:
 * with (nearly) every exp2 on MUFU (poly under 6) and paged KV or a window open to the right,
 * ptxas keeps more exp2 in flight and spills 4-16 bytes (poly 6 and up: 0 over the paged, split,
 * varlen and window configs of the matrices; 200 softmax registers fix these but spill the
 * correction's 56 on bounded windows); the MLA prefill shape (qk 192 / ov 128) spills 8 bytes with
 * every 2nd exp2 on the polynomial (poly over 40), at 200 too. */
enum { SM100_MUFU_POLY_MIN = 6, SM100_MLA_POLY_MAX = 40 };

static int align_up(int x, int a) { return (x + a - 1) / a * a; }
static int chunk_of(const Config *c) { return c->swizzle / dtype_bytes[c->dtype]; }

/* The largest swizzle (128, 64, 32 B) whose chunk divides both depths (no padding) and, for
 * the CTA pair, splits V into an even number of chunks (each CTA loads half of them). */
static int best_swizzle(const Config *c)
{
    int eb = dtype_bytes[c->dtype], pair = c->cta_pair == 2;
    for (int sw = 128; sw >= 32; sw /= 2)
        if ((c->qk_depth * eb) % sw == 0 && (c->ov_depth * eb) % sw == 0 && (!pair || (c->ov_depth * eb / sw) % 2 == 0))
            return sw;
    /* else padded chunks: the largest swizzle whose (padded) V chunk count the pair can halve */
    for (int sw = 128; pair && sw >= 32; sw /= 2)
        if (((c->ov_depth * eb + sw - 1) / sw) % 2 == 0) return sw;
    return 128;
}

static int mma_k_of(DType dt) { return 32 / dtype_bytes[dt]; }

static int sm100_layout(const Config *c, Plan *p, char *err, size_t n);

/* Lay out a trial plan; returns its smem launch bytes (or UINT32_MAX when it does not lay out). */
static uint32_t trial(const Config *c, int bn, int stages)
{
    static const Plan zero;
    Plan p = zero;
    Config t = *c;
    t.bn = bn;
    t.stages = stages;
    p.cfg = t;
    char err[8];
    if (sm100_layout(&t, &p, err, sizeof err)) return UINT32_MAX;
    return p.smem_bytes + p.smem_align;
}

static void sm100_defaults(Config *c)
{
    if (!c->qtiles) c->qtiles = 2;
    if (!c->cta_pair) c->cta_pair = 1;
    if (!c->swizzle) c->swizzle = best_swizzle(c);
    if (!c->bm) c->bm = SM100_MMA_M * c->qtiles;
    if (c->rescale < 0) c->rescale = 8;
    if (c->exp2_poly < 0) c->exp2_poly = 25;
    if (c->qk_depth > 256 || c->swizzle % 32 || c->qtiles > 2 || c->qtiles < 1) return; /* check refuses */
    int mk = mma_k_of(c->dtype), chunk = chunk_of(c);
    int pov = align_up(c->ov_depth, chunk);
    int bn_fixed = c->bn, st_fixed = c->stages;
    /* BN from TMEM: qtiles x (S + O) <= 512 columns (FA4Config), at most 256 (MMA N) */
    int bn = (SM100_TMEM_COLS / c->qtiles - pov) / mk * mk;
    if (bn > SM100_RESIDENT_BN) bn = SM100_RESIDENT_BN;
    if (bn_fixed) bn = bn_fixed;
    /* then as many K/V slots as smem holds (3 at least, else lower BN) */
    for (; bn >= SM100_MIN_BN; bn -= 16) {
        if (bn % mk) continue;
        if (c->page && !bn_fixed && (bn & (bn - 1))) continue; /* paged: pages and tiles nest */
        int best = 0;
        if (st_fixed) best = trial(c, bn, st_fixed) <= SM100_SMEM_LIMIT ? st_fixed : 0;
        else
            for (int s = SM100_MAX_SLOTS; s >= 3 && !best; s--)
                if (trial(c, bn, s) <= SM100_SMEM_LIMIT) best = s;
        if (best) {
            c->bn = bn;
            c->stages = best;
            return;
        }
        if (bn_fixed) break;
    }
    /* nothing fits: keep the TMEM choice and let the plan say by how much */
    if (!c->bn) c->bn = bn_fixed ? bn_fixed : SM100_MIN_BN;
    if (!c->stages) c->stages = 3;
}

static int sm100_check(const Config *c, char *err, size_t n)
{
    if ((c->varlen || c->page) && c->cta_pair == 2)
        return plan_refuse(err, n, "%s is not built for the sm100a CTA pair (cta=2) yet; use cta=1",
                           c->varlen ? "varlen: 1" : "page: paged KV");
    if (c->page && c->rope_split)
        return plan_refuse(err, n, "page: paged KV with the rope part of K in its own tensor is not built; use one K");
    if (c->page && c->bn && (c->bn & (c->bn - 1)))
        return plan_refuse(err, n, "bn: %d is not allowed with paged KV; use a power of two, so a KV tile is whole "
                           "pages or lies inside one", c->bn);
    if (c->qk_depth == 256 || c->ov_depth == 256)
        return plan_refuse(err, n, "depth: 256 does not fit the sm100a 2Q layout (two O tiles of 256 TMEM columns leave "
                              "none for S; FA4 runs it as a pair-CTA single-O family, not implemented); use "
                              "target sm90a for depth 256");
    int mla = c->qk_depth == 192 && c->ov_depth == 128;
    if (!mla && (c->qk_depth != c->ov_depth || c->qk_depth < 64 || c->qk_depth > 128))
        return plan_refuse(err, n, "qk/ov: %d/%d is not allowed on sm100a; use qk = ov in 64..128 (64, 96 and 128 are "
                              "tested) or qk 192 / ov 128 (MLA prefill: 128 nope + 64 rope)", c->qk_depth, c->ov_depth);
    if (c->rope_split && !mla)
        return plan_refuse(err, n, "rope_split: 1 is only for MLA prefill (qk 192 / ov 128); this config has qk %d / ov %d",
                      c->qk_depth, c->ov_depth);
    if (c->rope_split && c->rope_dtype != c->dtype)
        return plan_refuse(err, n, "rope_dtype: %s differs from dtype %s; one QK^T MMA chain reads the nope and rope parts "
                              "of K with one kind and K step, so use rope_dtype=%s", dtype_name[c->rope_dtype],
                      dtype_name[c->dtype], dtype_name[c->dtype]);
    if (c->rope_split && 64 % (c->swizzle / dtype_bytes[c->dtype]))
        return plan_refuse(err, n, "rope_split: the 64 rope columns must be whole swizzle chunks, and swizzle %d holds %d %s "
                              "columns; use swizzle %d or less", c->swizzle, c->swizzle / dtype_bytes[c->dtype],
                      dtype_name[c->dtype], 64 * dtype_bytes[c->dtype]);
    /* (MLA with the pair would also need the k_rope box halved to k_rows: not planned, so refused here) */
    if (c->cta_pair == 2 && (c->qk_depth != c->ov_depth || c->qk_depth <= 64 || c->qk_depth > 128))
        return plan_refuse(err, n, "cta: 2 (the CTA pair, MMA M 256) is planned for qk = ov in 65..128 (FA4Config's rule: "
                              "d64 fills the MMA with one CTA and BN 192, larger depths run out of TMEM); this config "
                              "has qk %d / ov %d, so use cta=1", c->qk_depth, c->ov_depth);
    int v_chunks = (c->ov_depth * dtype_bytes[c->dtype] + c->swizzle - 1) / c->swizzle;
    if (c->cta_pair == 2 && v_chunks % 2)
        return plan_refuse(err, n, "cta: 2 splits V's %d columns into swizzle chunks, half loaded by each CTA of the pair, "
                              "and swizzle %d gives an odd %d chunks; use swizzle %d", c->ov_depth, c->swizzle,
                      v_chunks, best_swizzle(c));
    if (c->qtiles != 1 && c->qtiles != 2)
        return plan_refuse(err, n, "qtiles: %d is not allowed on sm100a; use 1 or 2", c->qtiles);
    if (c->bm != SM100_MMA_M * c->qtiles)
        return plan_refuse(err, n, "bm: %d is not allowed on sm100a with qtiles %d; bm is %d x qtiles = %d (set qtiles, "
                              "not bm)", c->bm, c->qtiles, SM100_MMA_M, SM100_MMA_M * c->qtiles);
    if (c->pingpong >= 0 || c->persistent >= 0)
        return plan_refuse(err, n, "pingpong/persistent: these are sm90a fields; leave them unset for sm100a");
    int mk = mma_k_of(c->dtype);
    if (c->bn < SM100_MIN_BN)
        return plan_refuse(err, n, "bn: %d is below the sm100a minimum of %d keys per KV tile (%d short)", c->bn,
                      SM100_MIN_BN, SM100_MIN_BN - c->bn);
    if (c->bn > SM100_RESIDENT_BN)
        return plan_refuse(err, n, "bn: %d is over %d; the softmax keeps a row of S in registers (one pass) and longer rows "
                              "need the two-pass variant, which spills with ptxas 13.0 and is not in this generator; "
                              "use bn <= %d", c->bn, SM100_RESIDENT_BN, SM100_RESIDENT_BN);
    if (c->bn % 16 || c->bn % mk)
        return plan_refuse(err, n, "bn: %d is not allowed on sm100a with %s; use a multiple of %d up to 256 (the MMA N "
                              "and K steps)", c->bn, dtype_name[c->dtype], mk > 16 ? mk : 16);
    int pov = align_up(c->ov_depth, chunk_of(c));
    int tmem = c->qtiles * (c->bn + pov);
    if (tmem > SM100_TMEM_COLS)
        return plan_refuse(err, n, "tmem: the plan needs %d columns (%d Q tiles x (S %d + O %d)) but a CTA has %d; %d over: "
                              "lower bn to %d or use qtiles 1", tmem, c->qtiles, c->bn, pov, SM100_TMEM_COLS,
                      tmem - SM100_TMEM_COLS, (SM100_TMEM_COLS / c->qtiles - pov) / mk * mk);
    if (c->stages < 3)
        return plan_refuse(err, n, "stages: %d K/V slots is below the sm100a minimum of 2 KV stages (3 slots in one fused "
                              "ring, or 4 as two rings of 2); %d short", c->stages, 3 - c->stages);
    if (c->mask == MASK_WINDOW && (c->window_left < -1 || c->window_right < -1))
        return plan_refuse(err, n, "mask window: bounds are >= 0, or -1 for none");
    if (c->rescale > 8)
        return plan_refuse(err, n, "rescale: %d is not allowed on sm100a; use 0..8 (log2 units; P may grow to 2^rescale "
                              "and must fit fp16 and e4m3)", c->rescale);
    if (c->exp2_poly > 50)
        return plan_refuse(err, n, "poly: %d is not allowed on sm100a; use 0..50 (percent of exp2 on the FMA pipe)",
                      c->exp2_poly);
    if (mla && c->exp2_poly > SM100_MLA_POLY_MAX)
        return plan_refuse(err, n, "poly: %d is not allowed for qk 192 / ov 128 on sm100a; it puts every 2nd exp2 on "
                           "the FMA polynomial, and the softmax then needs more than its %d registers (ptxas 13.0 "
                           "spills); use 0..%d (every 3rd or fewer)", c->exp2_poly, SM100_SFX_REGS,
                           SM100_MLA_POLY_MAX);
    int open_right = c->mask == MASK_WINDOW && c->window_left >= 0 && c->window_right < 0;
    if (c->exp2_poly < SM100_MUFU_POLY_MIN && (c->page || open_right))
        return plan_refuse(err, n, "poly: %d is not allowed on sm100a with %s; with (nearly) every exp2 on MUFU the "
                           "softmax needs more than its %d registers there (ptxas 13.0 spills); use %d..50 (the "
                           "default is 25)", c->exp2_poly, c->page ? "paged KV" : "a window open to the right (R = -1)",
                           SM100_SFX_REGS, SM100_MUFU_POLY_MIN);
    return 0;
}

/* Row mapping, MMA shapes and descriptors. */
static void plan_tiles(const Config *c, Plan *p)
{
    Sm100Plan *s = sm100_mut(p);
    s->mma_m = SM100_MMA_M * c->cta_pair;
    s->tile_rows = SM100_MMA_M;
    s->qtiles = c->qtiles;
    s->cta_pair = c->cta_pair;
    s->packed = c->group > 1 && SM100_MMA_M % c->group == 0;
    s->seq_rows = s->packed ? SM100_MMA_M / c->group : SM100_MMA_M;
    s->heads_per_tile = s->packed ? c->group : 1;
    plan_geometry(c, p);
    p->rows_per_cta = s->seq_rows * s->qtiles; /* sequence positions per CTA */
    p->heads_per_cta = s->heads_per_tile;
    s->qk_pad = p->qk_chunks * p->chunk_elems;
    s->ov_pad = p->ov_chunks * p->chunk_elems;
    p->persistent = 0;

    s->kind_f8 = c->dtype == DT_E4M3;
    s->mma_k = mma_k_of(c->dtype);
    s->qk_steps = s->qk_pad / s->mma_k;
    s->pv_steps = p->bn / s->mma_k;
    s->mma_per_kv = s->qtiles * (s->qk_steps + s->pv_steps);
    s->p_step_cols = s->mma_k * p->elem_bytes / 4;
    int fmt = sm100_format(c->dtype);
    Sm100InstrDesc qk = {s->mma_m, p->bn, 1, fmt, fmt, SM100_MAJOR_K, SM100_MAJOR_K, 0, 0};
    Sm100InstrDesc pv = {s->mma_m, s->ov_pad, 1, fmt, fmt, SM100_MAJOR_K, SM100_MAJOR_MN, 0, 0};
    s->idesc_qk = sm100_instr_desc(&qk);
    s->idesc_pv = sm100_instr_desc(&pv);
    s->q_chunk_bytes = (uint32_t)SM100_MMA_M * (uint32_t)c->swizzle;
    /* the pair splits MMA N: each CTA holds half of K's rows and half of V's column chunks */
    s->k_rows = p->bn / c->cta_pair;
    s->v_chunks = p->ov_chunks / c->cta_pair;
    s->k_chunk_bytes = (uint32_t)s->k_rows * (uint32_t)c->swizzle;
    s->v_chunk_bytes = (uint32_t)p->bn * (uint32_t)c->swizzle;
    s->desc_q = sm100_tile_desc(0, SM100_MAJOR_K, c->swizzle, 0);
    s->desc_k = s->desc_q;
    s->desc_v = sm100_tile_desc(0, SM100_MAJOR_MN, c->swizzle, s->v_chunk_bytes);
    s->k_nope_chunks = c->rope_split ? 128 / p->chunk_elems : p->qk_chunks;
}

static int sm100_layout(const Config *c, Plan *p, char *err, size_t n)
{
    (void)err;
    (void)n;
    Sm100Plan *s = sm100_mut(p);
    plan_tiles(c, p);
    char what[64];
    uint32_t sw = (uint32_t)c->swizzle;

    s->q_tile_bytes = s->q_chunk_bytes * (uint32_t)p->qk_chunks;
    s->k_tile_bytes = s->k_chunk_bytes * (uint32_t)p->qk_chunks;
    s->v_tile_bytes = s->v_chunk_bytes * (uint32_t)s->v_chunks;
    uint32_t cp = (uint32_t)c->cta_pair;
    s->tx_q = s->q_tile_bytes * cp;
    s->tx_k = s->k_tile_bytes * cp;
    s->tx_v = s->v_tile_bytes * cp;
    snprintf(what, sizeof what, "%d Q tile(s) %dx%d, %d chunks each; O staging after the loop", s->qtiles,
             SM100_MMA_M, s->qk_pad, p->qk_chunks);
    s->off_q = plan_smem(p, "q", s->q_tile_bytes * (uint32_t)s->qtiles, 1024, what);

    s->fused = c->stages % 2 == 1;
    s->n_rings = s->fused ? 1 : 2;
    if (s->fused) {
        Sm100Ring *r = &s->ring[0];
        r->slots = c->stages;
        r->slot_bytes = s->k_tile_bytes > s->v_tile_bytes ? s->k_tile_bytes : s->v_tile_bytes;
        snprintf(what, sizeof what, "fused K/V ring: %d slots x %u B (K and V alternate)", r->slots, r->slot_bytes);
        r->off = plan_smem(p, "kv", r->slot_bytes * (uint32_t)r->slots, 1024, what);
    } else {
        s->ring[0].slots = s->ring[1].slots = c->stages / 2;
        s->ring[0].slot_bytes = s->k_tile_bytes;
        s->ring[1].slot_bytes = s->v_tile_bytes;
        snprintf(what, sizeof what, "K ring: %d stages x %u B (%dx%d)", s->ring[0].slots, s->k_tile_bytes, s->k_rows,
                 s->qk_pad);
        s->ring[0].off = plan_smem(p, "k", s->k_tile_bytes * (uint32_t)s->ring[0].slots, 1024, what);
        snprintf(what, sizeof what, "V ring: %d stages x %u B (%dx%d)", s->ring[1].slots, s->v_tile_bytes, p->bn,
                 s->v_chunks * p->chunk_elems);
        s->ring[1].off = plan_smem(p, "v", s->v_tile_bytes * (uint32_t)s->ring[1].slots, 1024, what);
    }

    /* O: bf16 out for e4m3 in (the v descale folds into o_scale), else the input dtype */
    s->o_dtype = c->dtype == DT_E4M3 ? DT_BF16 : c->dtype;
    s->o_chunk_elems = c->swizzle / dtype_bytes[s->o_dtype];
    s->o_chunks = align_up(p->ov, s->o_chunk_elems) / s->o_chunk_elems;
    s->o_chunk_bytes = (uint32_t)SM100_MMA_M * sw;
    s->o_tile_bytes = s->o_chunk_bytes * (uint32_t)s->o_chunks;
    uint32_t q_all = s->q_tile_bytes * (uint32_t)s->qtiles;
    s->o_bufs = (int)(q_all / s->o_tile_bytes);
    if (s->o_bufs > s->qtiles) s->o_bufs = s->qtiles;
    if (s->o_bufs) {
        s->off_o = s->off_q;
    } else {
        s->o_bufs = 1;
        s->off_o = plan_smem(p, "o", s->o_tile_bytes, 1024, "O staging for the TMA store");
    }

    s->sfx_arrivals = SM100_WG;
    s->pair_arrivals = SM100_WG * c->cta_pair;
    s->bar_q_full = plan_mbar(p, "bar_q_full", s->qtiles, 1, "mbarrier per Q tile: Q landed (1 arrival + tx)");
    for (int r = 0; r < s->n_rings; r++) {
        Sm100Ring *g = &s->ring[r];
        const char *nm = s->fused ? "kv" : r ? "v" : "k";
        char name[24];
        snprintf(name, sizeof name, "bar_%s_full", nm);
        g->bar_full = plan_mbar(p, name, g->slots, 1, "mbarrier per slot: TMA landed (1 arrival + tx)");
        snprintf(name, sizeof name, "bar_%s_empty", nm);
        g->bar_empty = plan_mbar(p, name, g->slots, 1, "mbarrier per slot: MMAs read it (tcgen05.commit)");
    }
    mha_plan_kv_tail(p);
    if (p->kv_tail) /* one tail block per CTA (one tile each): its V's slot of the V ring */
        s->bar_v_tail = plan_mbar(p, "bar_v_tail", s->ring[s->fused ? 0 : 1].slots, 1,
                                  "mbarrier per V slot: a tail block's V landed (1 + tx)");
    s->bar_s_full = plan_mbar(p, "bar_s_full", s->qtiles, 1, "mbarrier per Q tile: S = Q K^T done (tcgen05.commit)");
    s->bar_corr_full = plan_mbar(p, "bar_corr_full", s->qtiles, s->sfx_arrivals, "mbarrier per Q tile: row factors stored (128)");
    s->bar_p_full = plan_mbar(p, "bar_p_full", s->qtiles, s->pair_arrivals, c->cta_pair == 2
                                  ? "mbarrier per Q tile: P in TMEM (128 softmax threads x 2 CTAs)"
                                  : "mbarrier per Q tile: P in TMEM (128 softmax threads)");
    s->bar_o_ready = plan_mbar(p, "bar_o_ready", s->qtiles, s->pair_arrivals, c->cta_pair == 2
                                   ? "mbarrier per Q tile: O rescaled (128 threads x 2 CTAs)"
                                   : "mbarrier per Q tile: O rescaled (128 correction threads)");
    s->bar_l_full = plan_mbar(p, "bar_l_full", s->qtiles, s->sfx_arrivals, "mbarrier per Q tile: final m and l stored (128)");
    s->bar_o_full = plan_mbar(p, "bar_o_full", s->qtiles, 1, "mbarrier per Q tile: last PV done (tcgen05.commit)");
    s->off_tmem_slot = plan_smem(p, "tmem_slot", 4, 16, "TMEM base address written by tcgen05.alloc");

    /* TMEM: S_t, then O_t; P (bf16/fp16: 2 per column, e4m3: 4) overwrites S_t from its first
     * column; the row statistics (O factor, final l, final m) take S_t's last 3 columns, past P:
     * S_t is in registers when they are written, and the next S_t MMA waits for O_t's rescale,
     * which reads them first. */
    int used = 0;
    s->tm_stats_l = 1; /* after the O factor: the epilogue reads l and m with one tcgen05.ld */
    for (int t = 0; t < s->qtiles; t++) {
        s->tm_s[t] = (uint32_t)(t * p->bn);
        s->tm_p[t] = s->tm_s[t];
        s->tm_stats[t] = s->tm_s[t] + (uint32_t)p->bn - SM100_STATS_COLS;
        s->tm_o[t] = (uint32_t)(s->qtiles * p->bn + t * s->ov_pad);
    }
    used = s->qtiles * (p->bn + s->ov_pad);
    s->tmem_need = used;
    p->tmem_cols = 32;
    while (p->tmem_cols < used) p->tmem_cols *= 2;

    s->s_chunk = SM100_S_CHUNK;
    s->o_chunk_cols = SM100_O_CHUNK;
    s->rescale = c->rescale;
    s->poly_every = c->exp2_poly ? (100 + c->exp2_poly / 2) / c->exp2_poly : 0;
    return 0;
}

static void plan_roles(const Config *c, Plan *p)
{
    Sm100Plan *s = sm100_mut(p);
    char job[96];
    p->threads = 4 * SM100_WG;
    p->entry_regs = (65536 / p->threads) / 8 * 8;
    s->warp_sfx0 = 0;
    s->warp_corr = 8;
    s->warp_mma = 12;
    s->warp_load = 13;
    s->sfx_regs = SM100_SFX_REGS;
    s->other_regs = s->mma_per_kv > SM100_MMA_HEAVY ? SM100_OTHER_REGS_HEAVY : SM100_OTHER_REGS;
    s->corr_regs = 65536 / SM100_WG - 2 * SM100_SFX_REGS - s->other_regs;
    s->idle_regs = SM100_IDLE_REGS;
    for (int t = 0; t < 2; t++) {
        char name[24];
        snprintf(name, sizeof name, "softmax%d", t);
        if (t < s->qtiles) {
            snprintf(job, sizeof job, "Q tile %d: one row per thread (tcgen05.ld 32x32b), P over S, row factors", t);
            plan_role(p, name, 4 * t, 4, s->sfx_regs, job);
        } else {
            plan_role(p, "idle", 4 * t, 4, s->idle_regs, "qtiles 1: no second Q tile; exits after the prologue");
        }
    }
    snprintf(job, sizeof job, "rescale O in TMEM when a warp's vote asks (> %d log2), epilogue, LSE", c->rescale);
    plan_role(p, "correction", s->warp_corr, 4, s->corr_regs, job);
    if (s->cta_pair == 2) {
        plan_role(p, "mma", s->warp_mma, 1, s->other_regs, "TMEM alloc/dealloc (pair); even CTA: one thread issues the MMAs");
        plan_role(p, "load", s->warp_load, 1, s->other_regs, "one thread: TMA of Q and this CTA's half of each K/V tile");
    } else {
        plan_role(p, "mma", s->warp_mma, 1, s->other_regs, "TMEM alloc/dealloc; one elected thread issues tcgen05.mma");
        plan_role(p, "load", s->warp_load, 1, s->other_regs, "one thread issues the TMA loads (Q tiles, K/V ring)");
    }
    if (p->kv_tail) {
        s->warp_scrub = 14;
        plan_role(p, "scrub", s->warp_scrub, 1, s->other_regs, "zeroes a tail block's V rows past the end (kv tail)");
        plan_role(p, "spare", s->warp_scrub + 1, 1, s->other_regs, "idle (share warpgroup 3's register budget)");
    } else {
        plan_role(p, "spare", 14, 2, s->other_regs, "idle (share warpgroup 3's register budget)");
    }
    s->bar_epilogue = plan_bar(p, "epilogue", SM100_WG, "correction warpgroup: O staged in smem, store may start");
    s->bar_tmem_free = plan_bar(p, "tmem_free", SM100_WG + 32, "correction + MMA warp: TMEM reads done, dealloc");
    if (p->kv_tail) {
        s->bar_scrub = plan_bar(p, "scrub", SM100_WARP, "scrub warp: its zeroed V rows before lane 0 releases the slot");
        plan_note(p, "kv tail", "a tail block's V lands on bar_v_tail; warp %d zeroes its rows past the end (%d B a "
                  "pass), fences, arrives on the slot's full barrier; K's rows there: scores masked", s->warp_scrub,
                  p->kv_tail_pass);
    }
}

static void plan_maps(const Config *c, Plan *p)
{
    const Sm100Plan *s = sm100_of(p);
    uint32_t ce = (uint32_t)p->chunk_elems;
    plan_map(p, "q", TENSOR_Q, c->dtype, (uint32_t)p->qk, ce, (uint32_t)s->seq_rows, (uint32_t)s->heads_per_tile,
             c->swizzle);
    uint32_t kdepth = c->rope_split ? 128u : (uint32_t)p->qk;
    /* paged KV: maps over the page pool, a box of one tile or of one page of it (gen/varlen.c) */
    uint32_t kv_box = (uint32_t)(c->page && c->page < p->bn ? c->page : p->bn);
    plan_map(p, "k", TENSOR_K, c->dtype, kdepth, ce, c->page ? kv_box : (uint32_t)s->k_rows, 1, c->swizzle);
    if (c->rope_split)
        plan_map(p, "k_rope", TENSOR_K_ROPE, c->rope_dtype, (uint32_t)(p->qk - 128), ce, (uint32_t)p->bn, 1,
                 c->swizzle);
    plan_map(p, "v", TENSOR_V, c->dtype, (uint32_t)p->ov, ce, c->page ? kv_box : (uint32_t)p->bn, 1, c->swizzle);
    plan_map(p, "o", TENSOR_O, s->o_dtype, (uint32_t)p->ov, (uint32_t)s->o_chunk_elems, (uint32_t)s->seq_rows,
             (uint32_t)s->heads_per_tile, c->swizzle);
}

static void plan_notes(const Config *c, Plan *p)
{
    const Sm100Plan *s = sm100_of(p);
    if (s->packed)
        plan_note(p, "rows", "GQA packed: row r of a Q tile = (seq q0 + r %% %d, head h0 + r / %d); %d heads per CTA",
                  s->seq_rows, s->seq_rows, s->heads_per_tile);
    else
        plan_note(p, "rows", "row r of Q tile t = seq m0 + %d t + r, one head per CTA", s->seq_rows);
    if (s->cta_pair == 2) {
        plan_note(p, "grid", "tiles = ceil(seqlen_q / %d) * heads_q / %d * batch, one cluster of 2 CTAs each",
                  2 * p->rows_per_cta, s->heads_per_tile);
        plan_note(p, "cta pair", "CTA r: rows m0 + %d r; per KV tile K rows %d r.., V chunks %d r..", p->rows_per_cta,
                  s->k_rows, s->v_chunks);
        plan_note(p, "pair sync", "even CTA issues the M%d MMAs, expects both CTAs' TMA bytes, commits to both",
                  s->mma_m);
    } else {
        plan_note(p, "grid", "tiles = ceil(seqlen_q / %d) * heads_q / %d * batch, one CTA each", p->rows_per_cta,
                  s->heads_per_tile);
    }
    if (s->fused)
        plan_note(p, "kv ring", "fused: %d slots of %u B, K(j) V(j) K(j+1) ... in load order", s->ring[0].slots,
                  s->ring[0].slot_bytes);
    else
        plan_note(p, "kv ring", "separate: K %d x %u B, V %d x %u B", s->ring[0].slots, s->ring[0].slot_bytes,
                  s->ring[1].slots, s->ring[1].slot_bytes);
    if (c->rope_split)
        plan_note(p, "rope", "K chunks 0..%d from map k (nope), %d..%d from map k_rope (%s)", s->k_nope_chunks - 1,
                  s->k_nope_chunks, p->qk_chunks - 1, dtype_name[c->rope_dtype]);
    plan_note(p, "qk mma", "%s SS M%d N%d: %d per Q tile per KV tile (K step %d)",
              s->kind_f8 ? "kind::f8f6f4" : "kind::f16", s->mma_m, p->bn, s->qk_steps, s->mma_k);
    plan_note(p, "pv mma", "%s TS M%d N%d (P from TMEM, V MN-major): %d per Q tile per KV tile",
              s->kind_f8 ? "kind::f8f6f4" : "kind::f16", s->mma_m, s->ov_pad, s->pv_steps);
    plan_note(p, "mma per kv tile", "%d tensor-core MMAs (%d Q tiles x (%d + %d))", s->mma_per_kv, s->qtiles,
              s->qk_steps, s->pv_steps);
    plan_note(p, "mma order", "S0=Q0K(i); S1=Q1K(i); then O0+=P0V(i-1), S0=Q0K(i+1), O1+=P1V(i-1), S1=Q1K(i+1)");
    plan_note(p, "idesc", "qk 0x%08X, pv 0x%08X", s->idesc_qk, s->idesc_pv);
    plan_note(p, "smem desc", "q/k 0x%016llX (K-major), v 0x%016llX (MN-major), start 0",
              (unsigned long long)s->desc_q, (unsigned long long)s->desc_v);
    plan_note(p, "tx bytes", "q %u per tile, k %u, v %u per KV tile", s->tx_q, s->tx_k, s->tx_v);
    plan_note(p, "softmax", "one pass: the S row in registers (tcgen05.ld of %d columns), P stored %d at a time",
              s->s_chunk, s->s_chunk * p->elem_bytes / 4);
    if (s->poly_every)
        plan_note(p, "exp2", "every %d-th element by the FMA polynomial (poly %d%%), the rest on MUFU", s->poly_every,
                  c->exp2_poly);
    plan_note(p, "rescale", "row max moves only when it grows by > %d (log2); correction warps vote (vote.sync.any)",
              c->rescale);
    plan_note(p, "o staging", "%s %s, %d buffer(s), tile t in buffer t %% %d", s->off_o == s->off_q ? "over" : "own",
              s->off_o == s->off_q ? "the Q tiles" : "entry o", s->o_bufs, s->o_bufs);
    plan_note(p, "registers", "softmax %d, correction %d, warpgroup 3 %d: 128 x %d = %d", s->sfx_regs, s->corr_regs,
              s->other_regs, s->qtiles * s->sfx_regs + (2 - s->qtiles) * s->idle_regs + s->corr_regs + s->other_regs,
              128 * (s->qtiles * s->sfx_regs + (2 - s->qtiles) * s->idle_regs + s->corr_regs + s->other_regs));
    if (c->dtype == DT_E4M3)
        plan_note(p, "fp8 scales", "host folds q*k descale into scale_log2 and the v descale into o_scale; O is bf16");
    plan_note(p, "lse", "natural log, f32 [batch, heads_q, seqlen_q]; -inf and O = 0 for rows that see no key");
}

static int sm100_plan(const Config *c, Plan *p, char *err, size_t n)
{
    if (sm100_layout(c, p, err, n)) return -1;
    const Sm100Plan *s = sm100_of(p);
    if (!sm100_mma_shape_ok(s->mma_m, p->bn, s->cta_pair, 0) || !sm100_mma_shape_ok(s->mma_m, s->ov_pad, s->cta_pair, 1))
        return plan_refuse(err, n, "bn/ov: M %d N %d (QK) or N %d (PV, TS) is not a tcgen05.mma shape", s->mma_m, p->bn,
                      s->ov_pad);
    if (p->tmem_cols > SM100_TMEM_COLS)
        return plan_refuse(err, n, "tmem: the plan needs %d columns but a CTA has %d; %d over", s->tmem_need,
                      SM100_TMEM_COLS, s->tmem_need - SM100_TMEM_COLS);
    p->cluster[0] = s->cta_pair;
    plan_roles(c, p);
    plan_maps(c, p);
    for (int t = 0; t < s->qtiles; t++) {
        char name[16], what[48];
        snprintf(name, sizeof name, "S%d", t);
        snprintf(what, sizeof what, "f32 scores of Q tile %d (%d x %d)", t, s->tile_rows, p->bn);
        plan_tmem(p, name, s->tm_s[t], (uint32_t)p->bn, what);
        snprintf(name, sizeof name, "P%d", t);
        snprintf(what, sizeof what, "%s P over S%d, %d per column", s->kind_f8 ? "e4m3" : dtype_name[c->dtype], t,
                 4 / p->elem_bytes);
        plan_tmem(p, name, s->tm_p[t], (uint32_t)(p->bn * p->elem_bytes / 4), what);
        snprintf(name, sizeof name, "R%d", t);
        snprintf(what, sizeof what, "row stats of tile %d over S%d: O factor, l, m", t, t);
        plan_tmem(p, name, s->tm_stats[t], SM100_STATS_COLS, what);
    }
    for (int t = 0; t < s->qtiles; t++) {
        char name[16], what[48];
        snprintf(name, sizeof name, "O%d", t);
        snprintf(what, sizeof what, "f32 output accumulator of Q tile %d", t);
        plan_tmem(p, name, s->tm_o[t], (uint32_t)s->ov_pad, what);
    }
    plan_notes(c, p);
    mha_plan_params(p);
    if (p->pdl_early_kv) /* the blocks the rings take before a slot is freed: a fused ring holds K and V */
        p->pdl_early_kv = s->fused ? s->ring[0].slots / 2
                                   : s->ring[0].slots < s->ring[1].slots ? s->ring[0].slots : s->ring[1].slots;
    return 0;
}

static const Family sm100_mha = {KIND_MHA, sm100_defaults, sm100_check, sm100_plan, sm100_emit_mha};

#define SM100_FAMILIES                                                                                           \
    {[KIND_MHA] = &sm100_mha, [KIND_MLA_SPARSE] = &sm100_mla_sparse, [KIND_COMBINE] = &combine_family,               \
     [KIND_KV_APPEND] = &kv_append_family, [KIND_MHA_BWD] = &sm100_mha_bwd, [KIND_MHA_BWD_PRE] = &mha_bwd_pre_family, \
     [KIND_MHA_BWD_DQ] = &mha_bwd_dq_family}

const Target target_sm100a = {
    .id = TARGET_SM100A, .name = "sm100a", .ptx_target = "sm_100a", .ptx_version = "8.7",
    .sm_major = 10, .sm_minor = 0, .smem_limit = SM100_SMEM_LIMIT, .families = SM100_FAMILIES,
};

/* B300 (Blackwell Ultra, compute capability 10.3): the same kernels, for .target sm_103a, which PTX ISA 8.8
 * introduced. ptxas 13.0 assembles every sm100a kernel for it (tests/ptxas/run_sm103.sh); the
 * instructions the kernels use (tcgen05.mma/ld/st/cp, TMA gather4, cta_group::2, setmaxnreg) are the
 * sm_100a set, which sm_103a keeps. The shared-memory carveout is the B200's (228 KB per SM). */
const Target target_sm103a = {
    .id = TARGET_SM103A, .name = "sm103a", .ptx_target = "sm_103a", .ptx_version = "8.8",
    .sm_major = 10, .sm_minor = 3, .smem_limit = SM100_SMEM_LIMIT, .families = SM100_FAMILIES,
};
