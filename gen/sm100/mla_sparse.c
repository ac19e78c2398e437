/* sm100/mla_sparse.c - sparse MLA prefill on sm_100a (DeepSeek-V3.2 top-k attention, FlashMLA's
 * contract; fa4.h): its defaults, checks, plan and kernel.
 *
 * Head-64 kernel (cta_group 1): one CTA per (query token, block of 64 query heads), M = 64.
 * Six warps (plan roles):
 *   softmax (warps 0-3)  one S row per lane pair: the M = 64 data path keeps row 16w + r of a
 *                        warp's quarter in lane r (D at lane 0) or lane 16 + r (D at lane 16),
 *                        so S = Q K^T is two MMAs per K step, key columns 0..b/2 at lane 0 and
 *                        b/2..b at lane 16; the pair combines max and sum with one shuffle and
 *                        writes the whole P row into both halves (both PV MMAs read it);
 *                        lazy rescale of O in TMEM; epilogue O / l, sink, lse, max_logits
 *   mma     (warp 4)     one thread: S = Q K^T (SS), O += P V (TS, P from TMEM), O columns
 *                        0..dv/2 at lane 0 and dv/2..dv at lane 16; commits onto mbarriers
 *   load    (warp 5)     Q with tiled TMA; per block the indices, their validity bits, and the
 *                        rows with TMA gather4 (four rows a copy, invalid rows skipped as
 *                        out-of-bounds coordinates); a block whose indices are all invalid
 *                        loads nothing, and MMA and softmax skip it
 * Every number comes from the plan; `fa4gen explain mla-sparse --target sm100a` prints it.
 */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../ops.h"
#include "../ops_copy.h"
#include "../softmax.h"
#include "mla100.h"
#include "sm100.h"

enum {
    MLA_DV = 512,             /* V: the first 512 columns of every kv row (fa4.h) */
    MLA_HEADS = 64,           /* query heads per CTA: the MMA M of the head-64 kernel */
    MLA_WARP = 32,
    MLA_SFX_WARPS = 4,
    MLA_LANE_HALF = 16,       /* the upper data-path half of M = 64 starts at this TMEM lane */
    MLA_TMEM_COLS = 512,
    MLA_SMEM_LIMIT = 232448,  /* sm_100a dynamic shared memory per CTA (228 KB - 1 KB) */
    MLA_O_CHUNK = 32,         /* O columns per tcgen05.ld/st */
    MLA_MAX_REGS = 248,       /* per thread at entry: 192 (320 with fp8) threads need no setmaxnreg */
    MLA_DQ_WARPS = 4,         /* fp8: the dequant warpgroup */
    MLA_RAW_STAGES = 2,       /* fp8: raw (e4m3) ring slots */
    MLA_RAW_BOX_MAX = 256,    /* fp8: bytes of a row per gather4 box: <= 256 elements, a 16 B multiple */
    MLA_UNIT = 16,            /* bytes of one swizzled smem unit */
    NAME = 40,
};

/* ------------------------------------------------------------ config */

static void mla_defaults(Config *c)
{
    if (!c->ov_depth || c->ov_depth == c->qk_depth) c->ov_depth = MLA_DV;
    if (!c->cta_group) c->cta_group = 1;
    if (!c->b_topk) c->b_topk = c->cta_group == 2 && c->dtype == DT_E4M3 ? 64 : 64 * c->cta_group;
    if (!c->num_mbars) c->num_mbars = c->cta_group == 2 || c->dtype == DT_E4M3 ? 1 : 2;
    if (!c->swizzle) c->swizzle = 128;
    if (!c->q_smem_depth) c->q_smem_depth = c->qk_depth - (c->q_tmem_depth > 0 ? c->q_tmem_depth : 0);
    if (c->q_tmem_depth < 0) c->q_tmem_depth = c->qk_depth - c->q_smem_depth;
    if (c->rescale < 0) c->rescale = 8;
    if (c->exp2_poly < 0) c->exp2_poly = 0;
    if (c->tma_store < 0) c->tma_store = 0; /* opt-in here: the staging must fit the kv ring (ostage_plan) */
}

static int mla_check(const Config *c, char *err, size_t n)
{
    if (c->dtype != DT_BF16 && c->dtype != DT_E4M3)
        return plan_refuse(err, n, "dtype: %s is not allowed for mla-sparse on sm100a; use bf16 (kv) or e4m3 (fp8 kv)",
                           dtype_name[c->dtype]);
    if (c->dtype == DT_E4M3 && c->cta_group == 2 && (c->b_topk != 64 || c->num_mbars != 1))
        return plan_refuse(err, n, "b_topk/num_mbars: %d/%d is not allowed for fp8 kv with cta_group 2; use 64/1 (one bf16 "
                           "slot of 32 + 64 rows beside two raw slots fits shared memory)", c->b_topk, c->num_mbars);
    if (c->qk_depth != 576 && c->qk_depth != 512)
        return plan_refuse(err, n, "qk: %d is not allowed for mla-sparse; use 576 (512 nope + 64 rope) or 512",
                           c->qk_depth);
    if (c->ov_depth != MLA_DV)
        return plan_refuse(err, n, "ov: %d is not allowed for mla-sparse; V is the first %d columns of kv",
                           c->ov_depth, MLA_DV);
    int cg = c->cta_group;
    if (cg == 1 && c->b_topk != 64)
        return plan_refuse(err, n, "b_topk: %d is not allowed for cta_group 1; use 64 (two QK MMAs of N 32, one per "
                           "TMEM lane half)", c->b_topk);
    if (cg == 2 && c->b_topk != 128 && c->b_topk != 64)
        return plan_refuse(err, n, "b_topk: %d is not allowed for cta_group 2; use 128 (64 positions gathered by each "
                           "CTA, one QK MMA of N 128, one slot) or 64 (32 each, N 64: two slots fit)", c->b_topk);
    if (c->q_tmem_depth > c->qk_depth)
        return plan_refuse(err, n, "q_tmem_depth: %d is not allowed with qk %d; Q has %d columns, q_smem_depth and "
                           "q_tmem_depth split them (each 0..%d)", c->q_tmem_depth, c->qk_depth, c->qk_depth,
                           c->qk_depth);
    if (c->q_smem_depth > c->qk_depth || c->q_tmem_depth < 0) /* the defaults derive one from the other */
        return plan_refuse(err, n, "q_smem_depth: %d is not allowed with qk %d; Q has %d columns, q_smem_depth and "
                           "q_tmem_depth split them (each 0..%d)", c->q_smem_depth, c->qk_depth, c->qk_depth,
                           c->qk_depth);
    if (c->q_smem_depth + c->q_tmem_depth != c->qk_depth)
        return plan_refuse(err, n, "q_smem_depth/q_tmem_depth: %d + %d is not d_qk %d; Q's columns are split between them",
                           c->q_smem_depth, c->q_tmem_depth, c->qk_depth);
    if (c->q_tmem_depth && cg != 2)
        return plan_refuse(err, n, "q_tmem_depth: %d is not allowed for cta_group 1 yet (only the head-128 kernel copies "
                           "Q to TMEM); use 0", c->q_tmem_depth);
    if (c->q_tmem_depth && (c->q_smem_depth < 64 || c->q_smem_depth % 64))
        return plan_refuse(err, n, "q_smem_depth: %d is not allowed; use a multiple of 64 (whole 128B-swizzled chunks), "
                           "at least 64", c->q_smem_depth);
    if (c->swizzle != 128)
        return plan_refuse(err, n, "swizzle: %d is not allowed for mla-sparse on sm100a; use 128", c->swizzle);
    if (c->mask != MASK_NONE)
        return plan_refuse(err, n, "mask: mla-sparse takes no mask; its index list says which keys a token sees");
    if (c->group != 1)
        return plan_refuse(err, n, "group: %d is not allowed for mla-sparse (one kv head); use 1", c->group);
    if (c->exp2_poly) return plan_refuse(err, n, "poly: %d is not allowed for mla-sparse on sm100a yet; use 0", c->exp2_poly);
    if (c->bm || c->bn || c->stages || c->qtiles || c->cta_pair)
        return plan_refuse(err, n, "bm/bn/stages/qtiles/cta: mla-sparse on sm100a has b_topk, num_mbars and cta_group "
                           "instead; leave them out");
    return 0;
}

/* ------------------------------------------------------------ plan */

static void mla_params(Plan *p)
{
    static const ScalarId u64s[] = {SCALAR_INDICES, SCALAR_OUT, SCALAR_LSE, SCALAR_MAX_LOGITS, SCALAR_SINK,
                                    SCALAR_TOPK_LENGTH, SCALAR_IDX_STRIDE, SCALAR_OUT_STRIDE_S, SCALAR_OUT_STRIDE_H};
    static const ScalarId u32s[] = {SCALAR_SEQLEN_Q, SCALAR_S_KV, SCALAR_HEADS_Q, SCALAR_TOPK};
    for (int i = 0; i < p->n_maps; i++) plan_param_map(p, i);
    for (size_t i = 0; i < sizeof u64s / sizeof u64s[0]; i++) plan_param_scalar(p, u64s[i], PARAM_U64);
    for (size_t i = 0; i < sizeof u32s / sizeof u32s[0]; i++) plan_param_scalar(p, u32s[i], PARAM_U32);
    plan_param_scalar(p, SCALAR_SCALE_LOG2, PARAM_F32);
    plan_param_scalar(p, SCALAR_SM_SCALE, PARAM_F32);
    if (mla100(p)->kv_fp8) {
        plan_param_scalar(p, SCALAR_KV_SCALE, PARAM_U64);
        plan_param_scalar(p, SCALAR_KV_SCALE_BLOCKS, PARAM_U32);
    }
}

/* The tensor maps: q as (d_qk, h_q, s_q), one box of 64 heads x one chunk; kv as (d_qk, s_kv)
 * for gather4, one chunk of a row per box row. */
static void mla_maps(Plan *p)
{
    const SparsePlan100 *s = mla100(p);
    plan_map(p, "q", TENSOR_Q, DT_BF16, (uint32_t)p->qk, (uint32_t)p->chunk_elems, (uint32_t)s->heads, 1,
             p->swizzle_bytes);
    p->maps[p->n_maps - 1].rank = 3;
    if (s->kv_fp8) /* e4m3 bytes: boxes of raw_box bytes, no swizzle (the dequant warpgroup reads them) */
        plan_map(p, "kv", TENSOR_K, DT_E4M3, (uint32_t)p->qk, (uint32_t)s->raw_box, 1, 1, 0);
    else
        plan_map(p, "kv", TENSOR_K, p->cfg.dtype, (uint32_t)p->qk, (uint32_t)p->chunk_elems, 1, 1, p->swizzle_bytes);
    p->maps[p->n_maps - 1].rank = 2;
    p->maps[p->n_maps - 1].mode = MAP_GATHER4;
    if (p->cfg.tma_store) { /* out as (d_v, h_q, s_q): boxes of one chunk x 64 heads, heads past h_q clipped */
        plan_map(p, "out", TENSOR_O, DT_BF16, (uint32_t)s->dv, (uint32_t)p->chunk_elems, (uint32_t)s->heads, 1,
                 p->swizzle_bytes);
        p->maps[p->n_maps - 1].rank = 3;
    }
}

static void mla_descriptors(Plan *p)
{
    SparsePlan100 *s = mla100_plan(p);
    int fmt = sm100_format(DT_BF16); /* Q, P and the kv the MMAs read (dequantised when fp8) are bf16 */
    Sm100InstrDesc qk = {s->heads, s->half_cols, 1, fmt, fmt, SM100_MAJOR_K, SM100_MAJOR_K, 0, 0};
    Sm100InstrDesc pv = {s->heads, s->o_cols, 1, fmt, fmt, SM100_MAJOR_K, SM100_MAJOR_MN, 0, 0};
    s->idesc_qk = sm100_instr_desc(&qk);
    s->idesc_pv = sm100_instr_desc(&pv);
    s->desc_q = sm100_tile_desc(0, SM100_MAJOR_K, p->swizzle_bytes, s->q_chunk_bytes);
    s->desc_k = sm100_tile_desc(0, SM100_MAJOR_K, p->swizzle_bytes, s->kv_chunk_bytes);
    s->desc_v = sm100_tile_desc(0, SM100_MAJOR_MN, p->swizzle_bytes, s->kv_chunk_bytes);
}

/* fp8: the raw ring (every row of a block, all d_qk bytes), the rows' coordinates and bits, its barriers */
static void raw_smem(Plan *p, int rows)
{
    SparsePlan100 *s = mla100_plan(p);
    int dq = MLA_DQ_WARPS * MLA_WARP;
    s->raw_stages = MLA_RAW_STAGES;
    /* the widest box dividing the row: 192 B for d_qk 576, 256 B for 512 */
    for (s->raw_box = MLA_RAW_BOX_MAX; p->qk % s->raw_box; s->raw_box -= MLA_UNIT) {}
    s->raw_chunks = p->qk / s->raw_box;
    s->raw_chunk_bytes = (uint32_t)(rows * s->raw_box);
    s->raw_stage_bytes = s->raw_chunk_bytes * (uint32_t)s->raw_chunks;
    s->tx_raw = s->raw_stage_bytes;
    s->off_raw = plan_smem(p, "raw", s->raw_stage_bytes * (uint32_t)s->raw_stages, 1024,
                           "fp8: gathered e4m3 rows, raw_box bytes a box, no swizzle (ring)");
    s->coord_stage_bytes = (uint32_t)rows * 4;
    s->off_coord = plan_smem(p, "coord", s->coord_stage_bytes * (uint32_t)s->raw_stages, 16,
                             "fp8: row of each position, -1 if invalid: the scales' rows (ring)");
    s->off_raw_mask = plan_smem(p, "raw_mask", s->mask_stage_bytes * (uint32_t)s->raw_stages, 8,
                                "fp8: validity bits of a raw slot (ring)");
    s->bar_raw_full = plan_mbar(p, "bar_raw_full", s->raw_stages, MLA_WARP,
                                "fp8: a raw slot's bytes landed (tx), the load warp's coordinates and bits");
    s->bar_raw_empty = plan_mbar(p, "bar_raw_empty", s->raw_stages, dq, "fp8: the dequant warpgroup read a raw slot");
}

static void mla_smem(Plan *p)
{
    SparsePlan100 *s = mla100_plan(p);
    int sw = p->swizzle_bytes;
    s->q_chunk_bytes = (uint32_t)(s->heads * sw);
    s->kv_chunk_bytes = (uint32_t)(s->block * sw);
    s->kv_stage_bytes = s->kv_chunk_bytes * (uint32_t)p->qk_chunks;
    s->k_half_bytes = (uint32_t)(s->block / 2 * sw);
    s->v_half_bytes = s->kv_chunk_bytes * (uint32_t)(s->o_cols / p->chunk_elems);
    s->off_q = plan_smem(p, "q", s->q_chunk_bytes * (uint32_t)p->qk_chunks, 1024,
                         "Q: 64 heads x d_qk, 128B-swizzled chunks of 64 columns");
    s->off_kv = plan_smem(p, "kv", s->kv_stage_bytes * (uint32_t)s->stages, 1024,
                          "gathered kv rows (ring): K = all columns, V = the first dv");
    s->mask_stage_bytes = (uint32_t)s->block / 8;
    s->off_mask = plan_smem(p, "mask", s->mask_stage_bytes * (uint32_t)s->stages, 8,
                            "validity bits of a block, bit c = position c (ring)");
    s->tx_q = s->q_chunk_bytes * (uint32_t)p->qk_chunks;
    s->tx_kv = s->kv_stage_bytes;
    int sfx = MLA_SFX_WARPS * MLA_WARP, dq = MLA_DQ_WARPS * MLA_WARP;
    if (s->kv_fp8) {
        raw_smem(p, s->block);
        s->dq_units = s->block * p->qk * p->elem_bytes / MLA_UNIT / dq;
    }
    s->bar_q_full = plan_mbar(p, "bar_q_full", 1, 1, "Q landed (tx)");
    s->bar_kv_full = plan_mbar(p, "bar_kv_full", s->stages, s->kv_fp8 ? dq : 1,
                               s->kv_fp8 ? "fp8: a slot dequantised to bf16, its bits written"
                                         : "a slot's rows landed (tx), its bits written");
    s->bar_kv_empty = plan_mbar(p, "bar_kv_empty", s->stages, 1 + sfx, "the MMAs and every softmax thread are done with a slot");
    s->bar_s_full = plan_mbar(p, "bar_s_full", MLA100_SBUFS, 1, "commit: S of a buffer written");
    s->bar_p_full = plan_mbar(p, "bar_p_full", 1, sfx, "softmax: P written (and O rescaled)");
    s->bar_pv_done = plan_mbar(p, "bar_pv_done", 1, 1, "commit: O += P V of a block done");
    s->off_tmem_slot = plan_smem(p, "tmem_slot", 4, 4, "TMEM base address (tcgen05.alloc)");
}

/* The pair: per CTA the Q of its 64 heads, its K rows (64 positions, all columns), the V columns
 * of its d_v half for all b_topk positions, and the softmax exchange buffer. */
static void pair_smem(Plan *p)
{
    SparsePlan100 *s = mla100_plan(p);
    int sw = p->swizzle_bytes, sfx = MLA_SFX_WARPS * MLA_WARP;
    s->k_rows = s->block / 2;
    s->v_chunks = s->dv / 2 / p->chunk_elems;
    s->q_chunk_bytes = (uint32_t)(s->heads * sw);
    s->kv_chunk_bytes = (uint32_t)(s->k_rows * sw);
    s->kv_stage_bytes = s->kv_chunk_bytes * (uint32_t)p->qk_chunks;
    s->v_chunk_bytes = (uint32_t)(s->block * sw);
    s->v_stage_bytes = s->v_chunk_bytes * (uint32_t)s->v_chunks;
    s->q_smem_chunks = p->cfg.q_smem_depth / p->chunk_elems;
    s->q_smem_steps = p->cfg.q_smem_depth / s->mma_k;
    s->qk_ahead = s->stages > 1 && !s->kv_fp8; /* K of block i+1 must sit in the other slot while V of block i is read */
    s->off_q = plan_smem(p, "q", s->q_chunk_bytes * (uint32_t)s->q_smem_chunks, 1024,
                         s->q_smem_chunks < p->qk_chunks
                             ? "Q: this CTA's 64 heads x q_smem_depth, 128B-swizzled chunks (the rest: TMEM)"
                             : "Q: this CTA's 64 heads x d_qk, 128B-swizzled chunks of 64 columns");
    s->off_kv = plan_smem(p, "k", s->kv_stage_bytes * (uint32_t)s->stages, 1024,
                          "K: this CTA's half of a block's rows, all columns (ring)");
    s->off_v = plan_smem(p, "v", s->v_stage_bytes * (uint32_t)s->stages, 1024,
                         "V: every row of a block, this CTA's d_v half (ring)");
    s->xchg_words = 2 + (uint32_t)s->block / 4; /* max, sum, the P words of one key half */
    s->off_xchg = plan_smem(p, "xchg", s->xchg_words * 4u * (uint32_t)sfx, 16,
                            "softmax: row max, row sum and P of one key half, per thread");
    s->mask_stage_bytes = (uint32_t)s->block / 8;
    s->off_mask = plan_smem(p, "mask", s->mask_stage_bytes * (uint32_t)s->stages, 8,
                            "validity bits of a block, bit c = position c (ring)");
    uint32_t own = s->kv_stage_bytes + s->v_stage_bytes;
    s->tx_q = 2 * s->q_chunk_bytes * (uint32_t)p->qk_chunks; /* both CTAs' loads land on the even CTA's barriers */
    s->tx_kv = s->qk_ahead ? 2 * s->kv_stage_bytes : 2 * own; /* qk_ahead: K on bar_kv_full, V on bar_v_full */
    s->tx_v = s->qk_ahead ? 2 * s->v_stage_bytes : 0;
    s->pair_arrivals = 2 * sfx;
    if (s->kv_fp8) raw_smem(p, s->block);
    s->bar_q_full = plan_mbar(p, "bar_q_full", 1, 1, "even CTA: both CTAs' Q landed (tx)");
    if (s->kv_fp8)
        s->bar_kv_full = plan_mbar(p, "bar_kv_full", s->stages, 2 * MLA_DQ_WARPS * MLA_WARP,
                                   "even CTA: both CTAs' dequant warpgroups wrote their bf16 slot");
    else if (s->qk_ahead)
        s->bar_kv_full = plan_mbar(p, "bar_kv_full", s->stages, 1, "even CTA: both CTAs' K rows of a slot landed (tx)");
    else
        s->bar_kv_full = plan_mbar(p, "bar_kv_full", s->stages, 1, "even CTA: both CTAs' rows of a slot landed (tx)");
    s->bar_mask_full = plan_mbar(p, "bar_mask_full", s->stages, 1,
                                 s->kv_fp8 ? "this CTA's validity bits of a slot written (dequant thread 0)"
                                           : "this CTA's validity bits of a slot written");
    s->bar_kv_empty = plan_mbar(p, "bar_kv_empty", s->stages, 1 + sfx,
                                s->qk_ahead ? "the QK MMAs (multicast commit) and this CTA's softmax are done with a "
                                              "slot's K rows and bits"
                                            : "the MMAs (multicast commit) and this CTA's softmax are done with a slot");
    if (s->qk_ahead) {
        s->bar_v_full = plan_mbar(p, "bar_v_full", s->stages, 2,
                                  "even CTA: both CTAs' loads saw a slot's V free, their V columns landed (tx)");
        s->bar_v_empty = plan_mbar(p, "bar_v_empty", s->stages, 1, "commit (both CTAs): the PV MMAs are done with a slot's V");
    }
    s->bar_s_full = plan_mbar(p, "bar_s_full", MLA100_SBUFS, 1, "commit (both CTAs): S of a buffer written");
    s->bar_p_full = plan_mbar(p, "bar_p_full", 1, s->pair_arrivals, "even CTA: both CTAs' P written, O rescaled");
    s->bar_pv_done = plan_mbar(p, "bar_pv_done", 1, 1, "commit (both CTAs): O += P V of a block done");
    s->off_tmem_slot = plan_smem(p, "tmem_slot", 4, 4, "TMEM base address (tcgen05.alloc)");
    if (s->q_smem_chunks < p->qk_chunks)
        s->bar_q_copied = plan_mbar(p, "bar_q_copied", 1, 1,
                                    "commit (both CTAs): Q's TMEM part copied; the k ring that staged it is free");
}

/* num_mbars is what the smem budget bounds: refuse with the excess and the count that fits. */
static int smem_fits(Plan *p, uint32_t slot_bytes, char *err, size_t n)
{
    const SparsePlan100 *s = mla100(p);
    uint32_t need = p->smem_bytes + p->smem_align, limit = p->target->smem_limit;
    if (need <= limit) return 0;
    uint32_t fewer = (need - limit + slot_bytes - 1) / slot_bytes;
    if (fewer >= (uint32_t)s->stages)
        return plan_refuse(err, n, "num_mbars: cta_group %d needs %u bytes of shared memory with one slot but %s allows "
                           "%u; %u bytes over", s->cta_group, need - (uint32_t)(s->stages - 1) * slot_bytes,
                           p->target->name, limit, need - (uint32_t)(s->stages - 1) * slot_bytes - limit);
    return plan_refuse(err, n, "num_mbars: %d slots of %u bytes need %u bytes of shared memory (incl. %u alignment "
                       "slack) but %s allows %u; %u bytes over: use num_mbars %u%s", s->stages, slot_bytes, need,
                       p->smem_align, p->target->name, limit, need - limit, (uint32_t)s->stages - fewer,
                       s->cta_group == 2 && s->block > 64 ? " (or b_topk 64: slots of half the rows)" : "");
}

static void mla_roles(Plan *p)
{
    const SparsePlan100 *s = mla100(p);
    plan_role(p, "softmax", 0, MLA_SFX_WARPS, p->entry_regs,
              s->cta_group == 2 ? "S rows by warp pairs (key halves meet in smem), mask, lazy max, P, O rescale, epilogue"
                                : "S rows by lane pairs, mask, lazy max, P to TMEM, O rescale, epilogue");
    plan_role(p, "mma", s->warp_mma, 1, p->entry_regs,
              s->cta_group != 2 ? "TMEM alloc/free; one thread issues every tcgen05.mma"
              : s->qk_ahead     ? "TMEM alloc/free; even CTA lane 0 issues the pair's MMAs: QK(i+1) before PV(i)"
                                : "TMEM alloc/free; the even CTA's lane 0 issues every tcgen05.mma of the pair");
    plan_role(p, "load", s->warp_load, 1, p->entry_regs, "Q (TMA), indices and validity bits, rows (TMA gather4)");
    if (s->kv_fp8)
        plan_role(p, "dequant", s->warp_dq, MLA_DQ_WARPS, p->entry_regs,
                  "fp8: e4m3 rows x scales to the bf16 slot (128B-swizzled, as the MMAs read it)");
}

/* Head-64 (cta_group 1): M 64, S split over the TMEM lane halves. */
static int single_plan(Plan *p, char *err, size_t n)
{
    SparsePlan100 *s = mla100_plan(p);
    s->half_cols = s->block / 2, s->o_cols = s->dv / 2;
    s->pv_steps = s->block / s->mma_k;
    mla_smem(p);
    if (smem_fits(p, s->kv_stage_bytes, err, n)) return -1;
    mla_descriptors(p);
    s->tm_o = plan_tmem(p, "o", 0, (uint32_t)s->o_cols, "O: lanes 0-15 of a quarter d_v 0..255, lanes 16-31 256..511");
    for (int b = 0; b < MLA100_SBUFS; b++) {
        char name[8];
        snprintf(name, sizeof name, "s%d", b);
        s->tm_s[b] = plan_tmem(p, name, (uint32_t)(s->o_cols + b * s->half_cols), (uint32_t)s->half_cols,
                               "S (keys 0..b/2 at lane 0, b/2..b at 16), then P bf16 (both halves)");
    }
    s->bar_tmem_free = plan_bar(p, "tmem_free", (MLA_SFX_WARPS + 1) * MLA_WARP,
                                "softmax read O for the last time; the MMA warp frees TMEM");
    mla_roles(p);
    mla_maps(p);
    mla_params(p);
    plan_note(p, "qk mma", "2 x %d x M%d N%d K%d SS per block (D at lane 0 and 16; idesc 0x%08X)", s->qk_steps,
              s->heads, s->half_cols, s->mma_k, s->idesc_qk);
    plan_note(p, "pv mma", "2 x %d x M%d N%d K%d TS per block (O halves; idesc 0x%08X)", s->pv_steps, s->heads,
              s->o_cols, s->mma_k, s->idesc_pv);
    /* the MMA thread's code holds each S buffer's QK once and its PV three times with two or more slots
     * (after the next block's QK, before a skipped block, after the loop), once with one slot (after
     * its own QK): tests/ptxas/mla_sm100.sh counts them in the SASS */
    int per_block = 2 * s->qk_steps + 2 * s->pv_steps, pv_sites = s->stages > 1 ? 3 : 1;
    plan_note(p, "mma per kv block", "%d (QK 2 x %d, PV 2 x %d)", per_block, s->qk_steps, s->pv_steps);
    plan_note(p, "mma issue sites", "%d (%d S buffers x (QK %d + %d x PV %d))",
              MLA100_SBUFS * (2 * s->qk_steps + pv_sites * 2 * s->pv_steps), MLA100_SBUFS, 2 * s->qk_steps, pv_sites,
              2 * s->pv_steps);
    if (s->kv_fp8) {
        plan_note(p, "gather", "%d x gather4 per block (%d rows x %d boxes of %d B, e4m3), %u bytes",
                  s->block / 4 * s->raw_chunks, s->block, s->raw_chunks, s->raw_box, s->tx_raw);
        plan_note(p, "dequant", "%d units of 16 B per thread a block: e4m3 x scale -> bf16 (scales: kv_scale_blocks "
                  "per row, 0 = 1)", s->dq_units);
    } else {
        plan_note(p, "gather", "%d x gather4 per block (%d rows x %d chunks), %u bytes", s->block / 4 * p->qk_chunks,
                  s->block, p->qk_chunks, s->tx_kv);
    }
    int g4 = s->kv_fp8 ? s->raw_chunks : p->qk_chunks;
    plan_note(p, "tma issue sites", "%d (gather4 %d, Q %d)", g4 + p->qk_chunks, g4, p->qk_chunks);
    return 0;
}

/* Q split (pair): the TMEM part after O and the S buffers (A of the M 128 pair data path: row r in lanes
 * r and 64 + r, 2 bf16 a column), staged through the k ring, which must hold it. */
static int q_tmem_plan(Plan *p, char *err, size_t n)
{
    SparsePlan100 *s = mla100_plan(p);
    int tq = p->cfg.q_tmem_depth, cols = tq * p->elem_bytes / 4;
    uint32_t first = (uint32_t)(s->o_cols + MLA100_SBUFS * s->half_cols), need = first + (uint32_t)cols;
    if (need > (uint32_t)p->tmem_cols)
        return plan_refuse(err, n, "q_tmem_depth: %d needs %d TMEM columns after O %d + S %d x %d = %u of %d; %u columns "
                           "over%s", tq, cols, s->o_cols, MLA100_SBUFS, s->half_cols, need, p->tmem_cols,
                           need - (uint32_t)p->tmem_cols, s->block > 64 ? ": use b_topk 64 (S buffers of 32 columns)" : "");
    uint32_t stage = s->q_chunk_bytes * (uint32_t)(p->qk_chunks - s->q_smem_chunks);
    uint32_t ring = s->kv_stage_bytes * (uint32_t)s->stages;
    if (stage > ring)
        return plan_refuse(err, n, "q_tmem_depth: %d stages %u bytes of Q in the k ring of %u bytes; %u bytes over: use "
                           "more num_mbars or a smaller q_tmem_depth", tq, stage, ring, stage - ring);
    s->tm_q = plan_tmem(p, "q", first, (uint32_t)cols, "Q columns q_smem_depth.. (A of QK steps past smem; both halves)");
    int copies = 2 * (s->qk_steps - s->q_smem_steps);
    plan_note(p, "q tmem", "%d x tcgen05.cp.64x128b.warpx2::02_13 (Q chunks %d.. staged in the k ring, %u bytes); QK "
              "steps %d.. read A from TMEM", copies, s->q_smem_chunks, stage, s->q_smem_steps);
    return 0;
}

/* Head-128 (cta_group 2): a cluster of two CTAs per token, 64 heads each; every MMA is the pair's
 * M 128 (64 rows in each CTA, data path "M = 128, cta_group::2": D columns [0, N/2) in lanes
 * 0-63, [N/2, N) in lanes 64-127). S: N = b_topk, each CTA's K half; P (A from TMEM) written to
 * both lane halves; O: N = 256 twice, each CTA's V half. */
static int pair_plan(Plan *p, char *err, size_t n)
{
    SparsePlan100 *s = mla100_plan(p);
    s->half_cols = s->block / 2; /* S columns: keys [0, b/2) in lanes 0-63, [b/2, b) in lanes 64-127 */
    s->o_cols = s->dv / 2;       /* O columns: d_v [0, 256) in lanes 0-63, [256, 512) in lanes 64-127 */
    s->pv_steps = s->block / s->mma_k;
    p->cluster[0] = 2;
    pair_smem(p);
    if (smem_fits(p, s->kv_stage_bytes + s->v_stage_bytes, err, n)) return -1;
    int fmt = sm100_format(DT_BF16);
    Sm100InstrDesc qk = {2 * s->heads, s->block, 1, fmt, fmt, SM100_MAJOR_K, SM100_MAJOR_K, 0, 0};
    Sm100InstrDesc pv = {2 * s->heads, s->o_cols, 1, fmt, fmt, SM100_MAJOR_K, SM100_MAJOR_MN, 0, 0};
    s->idesc_qk = sm100_instr_desc(&qk);
    s->idesc_pv = sm100_instr_desc(&pv);
    s->desc_q = sm100_tile_desc(0, SM100_MAJOR_K, p->swizzle_bytes, s->q_chunk_bytes);
    s->desc_k = sm100_tile_desc(0, SM100_MAJOR_K, p->swizzle_bytes, s->kv_chunk_bytes);
    s->desc_v = sm100_tile_desc(0, SM100_MAJOR_MN, p->swizzle_bytes, s->v_chunk_bytes);
    s->tm_o = plan_tmem(p, "o", 0, (uint32_t)s->o_cols / 1, "O: lanes 0-63 d_v 0..255, lanes 64-127 256..511");
    for (int b = 0; b < MLA100_SBUFS; b++) {
        char name[8];
        snprintf(name, sizeof name, "s%d", b);
        s->tm_s[b] = plan_tmem(p, name, (uint32_t)(s->o_cols + b * s->half_cols), (uint32_t)s->half_cols,
                               "S (keys 0..b/2 in lanes 0-63, b/2..b in 64-127), then P (both)");
    }
    if (s->q_smem_chunks < p->qk_chunks && q_tmem_plan(p, err, n)) return -1;
    s->bar_sfx = plan_bar(p, "sfx", MLA_SFX_WARPS * MLA_WARP, "softmax: the two key halves of a row meet in smem");
    mla_roles(p);
    mla_maps(p);
    mla_params(p);
    plan_note(p, "qk mma", "%d x M%d N%d K%d SS cta_group::2 per block (idesc 0x%08X)", s->qk_steps, 2 * s->heads,
              s->block, s->mma_k, s->idesc_qk);
    plan_note(p, "pv mma", "2 x %d x M%d N%d K%d TS cta_group::2 per block (idesc 0x%08X)", s->pv_steps,
              2 * s->heads, s->o_cols, s->mma_k, s->idesc_pv);
    plan_note(p, "mma per kv block", "%d (QK %d, PV 2 x %d)", s->qk_steps + 2 * s->pv_steps, s->qk_steps, s->pv_steps);
    if (s->qk_ahead) {
        plan_note(p, "mma order", "S[i%%2] = Q K(i) (commit frees K: bar_kv_empty), then O += P[(i-1)%%2] "
                  "V(i-1) after bar_p_full + bar_v_full (commit frees V: bar_v_empty); softmax(i-1) beside QK(i)");
        /* each S buffer's PV sits at three places (after the next block's QK, at a skipped block, after
         * the loop): tests/ptxas/mla_sm100.sh counts them in the SASS */
        plan_note(p, "mma issue sites", "%d (%d S buffers x (QK %d + 3 x PV %d))",
                  MLA100_SBUFS * (s->qk_steps + 3 * 2 * s->pv_steps), MLA100_SBUFS, s->qk_steps, 2 * s->pv_steps);
    } else {
        plan_note(p, "mma order", "S[i%%2] = Q K(i), then O += P[i%%2] V(i) once its P is in (bar_p_full): one KV "
                  "slot, the next block lands after this PV");
        plan_note(p, "mma issue sites", "%d (%d S buffers x (QK %d + PV %d))",
                  MLA100_SBUFS * (s->qk_steps + 2 * s->pv_steps), MLA100_SBUFS, s->qk_steps, 2 * s->pv_steps);
    }
    if (s->kv_fp8) {
        plan_note(p, "gather", "%d x gather4 per block and CTA (every row: %d rows x %d boxes of %d B, e4m3), %u bytes",
                  s->block / 4 * s->raw_chunks, s->block, s->raw_chunks, s->raw_box, s->tx_raw);
        plan_note(p, "dequant", "per thread a block: %d K units (rows of this CTA's positions) + %d V units (its d_v half) "
                  "of 16 B; both CTAs' warpgroups arrive on the even CTA's bar_kv_full",
                  s->k_rows * p->qk / 8 / (MLA_DQ_WARPS * MLA_WARP), s->block * s->dv / 2 / 8 / (MLA_DQ_WARPS * MLA_WARP));
        plan_note(p, "tma issue sites", "%d (gather4 %d, Q %d)", s->raw_chunks + p->qk_chunks, s->raw_chunks,
                  p->qk_chunks);
        return 0;
    }
    plan_note(p, "gather", "%d x gather4 per block and CTA (K: %d rows x %d chunks; V: %d rows x %d chunks), %u bytes "
              "the pair", s->k_rows / 4 * p->qk_chunks + s->block / 4 * s->v_chunks, s->k_rows, p->qk_chunks,
              s->block, s->v_chunks, s->tx_kv + s->tx_v);
    plan_note(p, "tma issue sites", "%d (gather4 %d, Q %d)", 2 * p->qk_chunks + s->v_chunks,
              p->qk_chunks + s->v_chunks, p->qk_chunks);
    return 0;
}

/* tma_store: O of the CTA's 64 heads x d_v staged over the kv ring(s), dead once the last PV is done
 * (every block's rows landed before the softmax read its bits; the MMAs are done by bar_pv_done). */
static int ostage_plan(Plan *p, char *err, size_t n)
{
    SparsePlan100 *s = mla100_plan(p);
    uint32_t span = s->cta_group == 2 ? s->off_v + s->v_stage_bytes * (uint32_t)s->stages - s->off_kv
                                      : s->kv_stage_bytes * (uint32_t)s->stages;
    s->tma_store = 1;
    s->ostage_chunks = s->dv / p->chunk_elems;
    s->ostage_chunk_bytes = (uint32_t)(s->heads * p->swizzle_bytes);
    uint32_t need = s->ostage_chunk_bytes * (uint32_t)s->ostage_chunks;
    if (need > span)
        return plan_refuse(err, n, "tma_store: O staging needs %u bytes but the kv ring it reuses has %u; %u bytes over: "
                           "use more num_mbars or tma_store 0", need, span, need - span);
    s->off_ostage = s->off_kv;
    s->bar_ostaged = plan_bar(p, "o_staged", s->sfx_warps * MLA_WARP, "softmax: O staged in smem, thread 0 stores it");
    plan_note(p, "o store", "%d x TMA store {%d, %d, 1} (map out) from %d staged chunks of %u B over the kv ring at %u",
              s->ostage_chunks, p->chunk_elems, s->heads, s->ostage_chunks, s->ostage_chunk_bytes, s->off_ostage);
    return 0;
}

static int mla_plan(const Config *c, Plan *p, char *err, size_t n)
{
    SparsePlan100 *s = mla100_plan(p);
    plan_geometry(c, p);
    if (c->dtype == DT_E4M3) { /* fp8 kv: the MMAs still read bf16 (Q, and kv after the dequant) */
        s->kv_fp8 = 1;
        p->elem_bytes = dtype_bytes[DT_BF16];
        p->chunk_elems = p->swizzle_bytes / p->elem_bytes;
        p->qk_chunks = (p->qk + p->chunk_elems - 1) / p->chunk_elems;
        p->ov_chunks = (p->ov + p->chunk_elems - 1) / p->chunk_elems;
    }
    p->bm = MLA_HEADS, p->bn = c->b_topk, p->stages = c->num_mbars;
    p->rows_per_cta = 1;          /* one query token ... */
    p->heads_per_cta = MLA_HEADS; /* ... and 64 of its heads */
    s->heads = MLA_HEADS, s->block = c->b_topk, s->cta_group = c->cta_group, s->dv = c->ov_depth;
    s->stages = c->num_mbars;
    s->mma_k = 32 / p->elem_bytes;
    s->qk_steps = p->qk / s->mma_k;
    s->p_step_cols = s->mma_k * p->elem_bytes / 4;
    s->lane_half = MLA_LANE_HALF << 16;
    s->rescale = c->rescale, s->poly_every = 0;
    s->o_chunk = MLA_O_CHUNK;
    s->sfx_warps = MLA_SFX_WARPS, s->warp_mma = MLA_SFX_WARPS, s->warp_load = MLA_SFX_WARPS + 1;
    s->warp_dq = MLA_SFX_WARPS + 2;
    p->threads = (MLA_SFX_WARPS + 2 + (s->kv_fp8 ? MLA_DQ_WARPS : 0)) * MLA_WARP;
    p->entry_regs = MLA_MAX_REGS;
    p->tmem_cols = MLA_TMEM_COLS;
    if (c->cta_group == 2 ? pair_plan(p, err, n) : single_plan(p, err, n)) return -1;
    if (c->tma_store && ostage_plan(p, err, n)) return -1;
    plan_note(p, "lse", "natural log; +inf for a row with no valid index (max_logits -inf, out 0)");
    return 0;
}

/* ------------------------------------------------------------ kernel: prologue */

void mla100_prologue(Emit *e, int pair)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    emit_section(e, pair ? "prologue: thread coordinates, parameters, this cluster's token and this CTA's heads"
                         : "prologue: thread coordinates, parameters, smem base, this CTA's token and heads");
    kernel_coords(e);
    kernel_params(e);
    mla_tile_coords(e, s->heads, pair, s->block);
}

static void mla_barrier_init(Emit *e)
{
    const SparsePlan100 *s = mla100(e->p);
    char lbl[NAME];
    Reg b = mbar_init_begin(e, lbl, sizeof lbl, "prologue: mbarrier init (thread 0)");
    const Mbar one[] = {mbar_plan(e, "bar_q_full"), mbar_plan(e, "bar_p_full"), mbar_plan(e, "bar_pv_done")};
    for (size_t k = 0; k < sizeof one / sizeof one[0]; k++) mbar_init(e, b, &one[k], 0);
    const Mbar full = mbar_plan(e, "bar_kv_full"), empty = mbar_plan(e, "bar_kv_empty");
    for (int i = 0; i < s->stages; i++) {
        mbar_init(e, b, &full, i);
        mbar_init(e, b, &empty, i);
    }
    const Mbar sf = mbar_plan(e, "bar_s_full");
    for (int i = 0; i < MLA100_SBUFS; i++) mbar_init(e, b, &sf, i);
    if (s->kv_fp8) {
        const Mbar rf = mbar_plan(e, "bar_raw_full"), re = mbar_plan(e, "bar_raw_empty");
        for (int i = 0; i < s->raw_stages; i++) {
            mbar_init(e, b, &rf, i);
            mbar_init(e, b, &re, i);
        }
    }
    mbar_init_end(e, lbl);
}

/* The MMA warp allocates the plan's TMEM columns (pair: in each CTA, cta_group::2); after the CTA
 * (pair: cluster) barrier every thread reads the base. */
void mla100_tmem_alloc(Emit *e, int pair)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    char lbl[NAME];
    Reg pr = reg_pred(e, "p_not_mma");
    if (pair)
        emit_section(e, "prologue: TMEM alloc (warp %d of each CTA, %d columns, cta_group::2), then the cluster "
                     "syncs", s->warp_mma, p->tmem_cols);
    else
        emit_section(e, "prologue: TMEM alloc (warp %d, %d columns), then the CTA syncs", s->warp_mma, p->tmem_cols);
    emit(e, "setp.ne.u32 %s, %%warp, %d;", R(e, pr), s->warp_mma);
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, lbl, sizeof lbl, "alloc_done"));
    Reg slot = smem_reg(e, "tmem_slot", s->off_tmem_slot);
    op_tmem_alloc(e, 1 + pair, slot, p->tmem_cols);
    op_tmem_relinquish(e, 1 + pair);
    emit_label(e, lbl);
    op_tc_fence_before(e);
    if (pair) {
        emit_note(e, "both CTAs' barriers are initialised and both allocated TMEM before either signals the other");
        op_cluster_sync(e);
    } else {
        emit_note(e, "no thread touches a barrier or TMEM before thread 0 initialised them and warp %d allocated",
                  s->warp_mma);
        op_bar_sync(e, 0, p->threads);
    }
    op_tc_fence_after(e);
    op_ld_shared_b32(e, reg_b32(e, "tmem"), reg_find(e, "smem"), s->off_tmem_slot);
    if (!pair) emit_note(e, "TMEM lane field of this warp's quarter (softmax warps: lanes 32*warp .. +31)");
    op_tmem_warp_lanes(e, reg_b32(e, "tm_lane"), reg_find(e, "warp"));
}

/* ------------------------------------------------------------ the block loop, every role */

/* The loop over the %nblk blocks of top-k positions: j from 0, the ring at slot 0 / phase 0. */
void mla100_loop_begin(Emit *e, const char *who, Reg j, Reg stage, Reg phase, char *top, char *done)
{
    char stem[NAME];
    ring_reset(e, stage, phase);
    emit(e, "mov.u32 %s, 0;", R(e, j));
    snprintf(stem, sizeof stem, "%s_block", who);
    new_label(e, top, NAME, stem);
    snprintf(stem, sizeof stem, "%s_done", who);
    new_label(e, done, NAME, stem);
    Reg pend = reg_pred(e, "%s_end", who);
    emit_label(e, top);
    emit(e, "setp.ge.u32 %s, %s, %%nblk;", R(e, pend), R(e, j));
    emit(e, "@%s bra.uni %s;", R(e, pend), done);
}

void mla100_loop_end(Emit *e, Reg j, Reg stage, Reg phase, int stages, const char *top, const char *done)
{
    ring_advance(e, stage, phase, stages);
    emit(e, "add.u32 %s, %s, 1;", R(e, j), R(e, j));
    emit(e, "bra.uni %s;", top);
    emit_label(e, done);
}

/* Wait for slot `stage` to be full, then read its validity words into lo/hi; any = some position
 * of the block is valid (MMA and softmax skip a block without one). */
static void read_mask(Emit *e, const char *who, Reg stage, Reg phase, Reg lo, Reg hi, Reg any)
{
    const SparsePlan100 *s = mla100(e->p);
    Reg bar = reg_b32(e, "%s_bar", who), ma = reg_b32(e, "%s_ma", who);
    smem_indexed(e, bar, s->bar_kv_full, stage, MBAR_BYTES);
    op_mbar_wait(e, bar, phase);
    smem_indexed(e, ma, s->off_mask, stage, s->mask_stage_bytes);
    op_ld_shared_b32(e, lo, ma, 0);
    op_ld_shared_b32(e, hi, ma, 4);
    Reg both = reg_b32(e, "%s_mor", who);
    emit(e, "or.b32 %s, %s, %s;", R(e, both), R(e, lo), R(e, hi));
    emit(e, "setp.ne.u32 %s, %s, 0;", R(e, any), R(e, both));
}

/* ------------------------------------------------------------ kernel: load warp */

/* dst (u64) = base + (a * stride + b) * bytes: element a of a strided array, plus b. */
void mla100_elem_addr(Emit *e, Reg dst, Reg base, Reg a, Reg stride, Reg b, int bytes)
{
    Reg t = reg_b64(e, "ad_t64");
    op_cvt(e, "u64.u32", t, a);
    emit(e, "mul.lo.u64 %s, %s, %s;", R(e, dst), R(e, t), R(e, stride));
    op_cvt(e, "u64.u32", t, b);
    emit(e, "add.u64 %s, %s, %s;", R(e, dst), R(e, dst), R(e, t));
    emit(e, "mad.lo.u64 %s, %s, %d, %s;", R(e, dst), R(e, dst), bytes, R(e, base));
}

static void load_q(Emit *e)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    char skip[NAME];
    Reg bar = reg_b32(e, "ld_bar"), dst = reg_b32(e, "ld_dst"), col = reg_b32(e, "ld_col");
    emit_note(e, "Q: %d boxes {%d, %d, 1} (plan map q), heads past h_q zero-filled, tx %u bytes", p->qk_chunks,
              p->chunk_elems, s->heads, s->tx_q);
    emit(e, "@!%%ld_lead bra %s;", new_label(e, skip, sizeof skip, "ld_q_done"));
    smem_at(e, bar, s->bar_q_full);
    op_mbar_expect_tx(e, bar, s->tx_q);
    for (int c = 0; c < p->qk_chunks; c++) {
        smem_at(e, dst, s->off_q + (uint32_t)c * s->q_chunk_bytes);
        emit(e, "mov.u32 %s, %d;", R(e, col), c * p->chunk_elems);
        op_tma_load_3d(e, dst, reg_find(e, "tmap_q"), col, reg_find(e, "h0"), reg_find(e, "tok"), bar);
    }
    emit_label(e, skip);
}

/* Lane l takes positions l and l + 32 of block j: the index, whether it is valid (0 <= index <
 * s_kv and position < topk_length), the coordinate the gather uses (-1 when invalid: outside the
 * tensor, so nothing is read; in %ld_c<h>) and the validity bits of the block (one ballot per 32
 * positions, in %ld_bits<h> of every lane; lane 0 stores them for the MMA and softmax warps). The pair
 * (bf16 kv) publishes its CTA's bits on the slot's bar_mask_full; fp8 kv on the raw slot's barrier. */
void mla100_indices(Emit *e, Reg j, Reg stage, int pair)
{
    const SparsePlan100 *s = mla100(e->p);
    Reg pos = reg_b32(e, "ld_pos"), ia = reg_b64(e, "ld_ia"), ma = reg_b32(e, "ld_ma");
    Reg ok = reg_pred(e, "ld_ok"), inr = reg_pred(e, "ld_inrange");
    Reg bar = pair ? reg_b32(e, "ld_mbar") : REG_NONE, ca = REG_NONE;
    smem_indexed(e, ma, s->kv_fp8 ? s->off_raw_mask : s->off_mask, stage, s->mask_stage_bytes);
    if (s->kv_fp8) {
        emit_note(e, "fp8: every lane also stores its coordinates (the dequant warpgroup reads the scales' rows)");
        ca = reg_b32(e, "ld_ca");
        smem_indexed(e, ca, s->off_coord, stage, s->coord_stage_bytes);
        emit(e, "mad.lo.u32 %s, %%lane, 4, %s;", R(e, ca), R(e, ca));
    }
    for (int h = 0; h < s->block / MLA_WARP; h++) {
        Reg idx = reg_b32(e, "ld_c%d", h), bits = reg_b32(e, "ld_bits%d", h);
        emit(e, "mad.lo.u32 %s, %s, %d, %%lane;", R(e, pos), R(e, j), s->block);
        if (h) emit(e, "add.u32 %s, %s, %d;", R(e, pos), R(e, pos), h * MLA_WARP);
        mla100_elem_addr(e, ia, reg_find(e, "indices"), reg_find(e, "tok"), reg_find(e, "idx_stride"), pos, 4);
        emit(e, "setp.lt.s32 %s, %s, %%ld_len;", R(e, inr), R(e, pos));
        emit(e, "mov.u32 %s, -1;", R(e, idx));
        op_ld_global(e, inr, "s32", idx, ia, 0);
        if (!pair) emit_note(e, "valid: 0 <= index < s_kv (one unsigned compare) at a position before topk_length");
        emit(e, "setp.lt.u32 %s, %s, %%s_kv;", R(e, ok), R(e, idx));
        emit(e, "and.pred %s, %s, %s;", R(e, ok), R(e, ok), R(e, inr));
        emit(e, "selp.b32 %s, %s, -1, %s;", R(e, idx), R(e, idx), R(e, ok));
        op_vote_ballot(e, bits, ok);
        op_st_shared_b32_if(e, reg_find(e, "ld_lead"), ma, (uint32_t)(h * 4), bits);
        if (reg_is(ca)) op_st_shared_b32(e, ca, (uint32_t)(h * MLA_WARP * 4), idx);
    }
    if (!pair || s->kv_fp8) return; /* the slot's full barrier publishes them (fp8: the raw slot's, every lane) */
    emit_note(e, "this CTA's bits are written: its softmax and (even CTA) the MMA may read them");
    smem_indexed(e, bar, s->bar_mask_full, stage, MBAR_BYTES);
    op_mbar_arrive_if(e, reg_find(e, "ld_lead"), bar);
}

/* Lanes 0 .. block/4 - 1 gather rows 4l .. 4l + 3 of the block, one gather4 per chunk; their
 * coordinates come from the lanes that read them (shuffles). */
static void load_rows(Emit *e, Reg stage, Reg full)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    char skip[NAME];
    Reg pr = reg_pred(e, "ld_gl"), dst = reg_b32(e, "ld_dst"), src = reg_b32(e, "ld_src");
    Reg col = reg_b32(e, "ld_col"), ra = reg_b32(e, "ld_ra"), rb = reg_b32(e, "ld_rb");
    Reg low = reg_pred(e, "ld_low");
    Reg rows[4];
    emit_note(e, "row 4*lane + k: position (4*lane + k) %% 32 of ld_c0 (lanes < 8) or ld_c1");
    emit(e, "setp.lt.u32 %s, %%lane, %d;", R(e, low), MLA_WARP / 4);
    for (int k = 0; k < 4; k++) {
        rows[k] = reg_b32(e, "ld_r%d", k);
        emit(e, "shl.b32 %s, %%lane, 2;", R(e, src));
        emit(e, "add.u32 %s, %s, %d;", R(e, src), R(e, src), k);
        emit(e, "and.b32 %s, %s, %d;", R(e, src), R(e, src), MLA_WARP - 1);
        op_shfl_idx(e, ra, reg_find(e, "ld_c0"), src);
        op_shfl_idx(e, rb, reg_find(e, "ld_c1"), src);
        emit(e, "selp.b32 %s, %s, %s, %s;", R(e, rows[k]), R(e, ra), R(e, rb), R(e, low));
    }
    emit(e, "setp.ge.u32 %s, %%lane, %d;", R(e, pr), s->block / 4);
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, skip, sizeof skip, "ld_rows_done"));
    /* bf16: chunks of 64 columns into the 128B-swizzled slot; fp8: boxes of raw_box bytes, rows unswizzled */
    int chunks = s->kv_fp8 ? s->raw_chunks : p->qk_chunks, pitch = s->kv_fp8 ? s->raw_box : p->swizzle_bytes;
    int cols = s->kv_fp8 ? s->raw_box : p->chunk_elems;
    uint32_t chunk_bytes = s->kv_fp8 ? s->raw_chunk_bytes : s->kv_chunk_bytes;
    emit_note(e, "rows 4*lane.. of every chunk: 4 x %d B at chunk + 4*lane*%d (plan map kv)", pitch, pitch);
    smem_indexed(e, dst, s->kv_fp8 ? s->off_raw : s->off_kv, stage, s->kv_fp8 ? s->raw_stage_bytes : s->kv_stage_bytes);
    emit(e, "mad.lo.u32 %s, %%lane, %d, %s;", R(e, dst), 4 * pitch, R(e, dst));
    for (int c = 0; c < chunks; c++) {
        emit(e, "mov.u32 %s, %d;", R(e, col), c * cols);
        op_tma_gather4(e, 1, dst, reg_find(e, "tmap_kv"), col, rows, full);
        if (c + 1 < chunks) emit(e, "add.u32 %s, %s, %u;", R(e, dst), R(e, dst), chunk_bytes);
    }
    emit_label(e, skip);
}

static void emit_load(Emit *e)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    emit_section(e, "role load (warp %d): Q, then per block the indices, their bits and the rows", s->warp_load);
    Reg lead = reg_pred(e, "ld_lead"), len = reg_b32(e, "ld_len"), la = reg_b64(e, "ld_la");
    Reg has = reg_pred(e, "ld_has_len");
    emit(e, "setp.eq.u32 %s, %%lane, 0;", R(e, lead));
    load_q(e);
    emit_note(e, "positions at or past topk_length[tok] (when given) are invalid");
    emit(e, "mov.u32 %s, %%topk;", R(e, len));
    emit(e, "setp.ne.u64 %s, %%topk_length, 0;", R(e, has));
    emit(e, "mul.wide.u32 %s, %%tok, 4;", R(e, la));
    emit(e, "add.u64 %s, %s, %%topk_length;", R(e, la), R(e, la));
    /* signed, and compared signed (mla100_indices: setp.lt.s32): fa4.h's meaning of every bit pattern, a length
     * below 0 an empty row, one past topk all topk positions (positions never reach topk) */
    op_ld_global(e, has, "s32", len, la, 0);

    Reg j = reg_b32(e, "ld_j"), stage = reg_b32(e, "ld_stage"), phase = reg_b32(e, "ld_phase");
    Reg full = reg_b32(e, "ld_full"), empty = reg_b32(e, "ld_empty"), par = reg_b32(e, "ld_par");
    Reg lo = reg_b32(e, "ld_mor"), any = reg_pred(e, "ld_any");
    char top[NAME], done[NAME], l_none[NAME], l_armed[NAME];
    mla100_loop_begin(e, "ld", j, stage, phase, top, done);
    smem_indexed(e, full, s->kv_fp8 ? s->bar_raw_full : s->bar_kv_full, stage, MBAR_BYTES);
    smem_indexed(e, empty, s->kv_fp8 ? s->bar_raw_empty : s->bar_kv_empty, stage, MBAR_BYTES);
    ring_free_parity(e, par, phase);
    op_mbar_wait(e, empty, par);
    mla100_indices(e, j, stage, 0);
    emit(e, "or.b32 %s, %%ld_bits0, %%ld_bits1;", R(e, lo));
    emit(e, "setp.ne.u32 %s, %s, 0;", R(e, any), R(e, lo));
    if (s->kv_fp8) {
        emit_note(e, "fp8: every lane arrives after its stores; lane 0 also expects the slot's %u bytes if any index is "
                  "valid", s->tx_raw);
        Reg arm = reg_pred(e, "ld_arm");
        emit(e, "and.pred %s, %s, %s;", R(e, arm), R(e, any), R(e, lead));
        op_mbar_expect_tx_if(e, arm, full, s->tx_raw);
        op_mbar_arrive_if(e, reg_not(e, arm), full);
        emit(e, "@!%s bra %s;", R(e, any), new_label(e, l_none, sizeof l_none, "ld_none"));
        load_rows(e, stage, full);
        emit_label(e, l_none);
        op_warp_sync(e);
        mla100_loop_end(e, j, stage, phase, s->raw_stages, top, done);
        emit(e, "bra.uni $exit;");
        return;
    }
    emit(e, "@!%s bra %s;", R(e, any), new_label(e, l_none, sizeof l_none, "ld_none"));
    emit_note(e, "some index valid: expect the block's %u bytes (invalid rows are zero-filled and count too)", s->tx_kv);
    emit(e, "@!%%ld_lead bra %s;", new_label(e, l_armed, sizeof l_armed, "ld_armed"));
    op_mbar_expect_tx(e, full, s->tx_kv);
    emit_label(e, l_armed);
    op_warp_sync(e);
    load_rows(e, stage, full);
    char l_next[NAME];
    emit(e, "bra.uni %s;", new_label(e, l_next, sizeof l_next, "ld_next"));
    emit_label(e, l_none);
    emit_note(e, "every index invalid: nothing to load, the slot is full at once");
    op_mbar_arrive_if(e, lead, full);
    emit_label(e, l_next);
    op_warp_sync(e);
    mla100_loop_end(e, j, stage, phase, s->stages, top, done);
    emit(e, "bra.uni $exit;");
}

/* ------------------------------------------------------------ kernel: MMA warp */

static void mma_commit_at(Emit *e, uint32_t off, int i)
{
    Reg bar = reg_b32(e, "mm_cbar");
    mbar_at(e, bar, off, i);
    op_umma_commit(e, 1, bar, REG_NONE);
}

/* S[buf] = Q K^T from the slot at %mm_slot: per K step one MMA for keys 0..b/2 (D lane 0) and
 * one for keys b/2..b (D lane 16). */
static void mma_qk(Emit *e, int buf)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    Reg klo = reg_b32(e, "mm_klo"), alo = reg_b32(e, "mm_alo"), blo = reg_b32(e, "mm_blo");
    Reg ad = reg_b64(e, "mm_ad"), bd = reg_b64(e, "mm_bd"), d = reg_b32(e, "mm_d");
    int step_bytes = s->mma_k * p->elem_bytes, per_chunk = p->swizzle_bytes / step_bytes;
    emit_note(e, "S%d = Q K^T: 2 x %d x M%d N%d SS (plan: qk mma)", buf, s->qk_steps, s->heads, s->half_cols);
    op_umma_desc_lo(e, klo, reg_find(e, "mm_slot"), s->desc_k);
    for (int kk = 0; kk < s->qk_steps; kk++) {
        uint32_t qstep = op_desc_kstep(kk, per_chunk, (uint32_t)step_bytes, s->q_chunk_bytes);
        uint32_t kstep = op_desc_kstep(kk, per_chunk, (uint32_t)step_bytes, s->kv_chunk_bytes);
        emit(e, "add.u32 %s, %%mm_qlo, %u;", R(e, alo), qstep);
        emit(e, "mov.b64 %s, {%s, %%mm_dhi};", R(e, ad), R(e, alo));
        for (int h = 0; h < 2; h++) {
            emit(e, "add.u32 %s, %s, %u;", R(e, blo), R(e, klo), kstep + (h ? op_desc_delta(s->k_half_bytes) : 0));
            emit(e, "mov.b64 %s, {%s, %%mm_dhi};", R(e, bd), R(e, blo));
            emit(e, "add.u32 %s, %%tmem, %u;", R(e, d), s->tm_s[buf] + (h ? (uint32_t)s->lane_half : 0));
            op_umma_ss(e, 1, 0, d, ad, bd, reg_find(e, "mm_idesc_qk"), kk ? REG_NONE : reg_find(e, "mm_false"));
        }
    }
}

/* O (+)= P[buf] V from the slot at %mm_pslot: per half one MMA chain, D and A at lane 0 / 16. */
static void mma_pv(Emit *e, int buf)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    Reg vlo = reg_b32(e, "mm_vlo"), blo = reg_b32(e, "mm_blo"), bd = reg_b64(e, "mm_bd");
    Reg d = reg_b32(e, "mm_d"), a = reg_b32(e, "mm_a");
    emit_note(e, "O += P%d V: 2 x %d x M%d N%d TS, P from TMEM (%d columns per K step), V MN-major (plan: pv mma)",
              buf, s->pv_steps, s->heads, s->o_cols, s->p_step_cols);
    op_umma_desc_lo(e, vlo, reg_find(e, "mm_pslot"), s->desc_v);
    for (int h = 0; h < 2; h++) {
        uint32_t lane = h ? (uint32_t)s->lane_half : 0;
        emit(e, "add.u32 %s, %%tmem, %u;", R(e, d), s->tm_o + lane);
        for (int kk = 0; kk < s->pv_steps; kk++) {
            uint32_t off = (h ? s->v_half_bytes : 0) + (uint32_t)(kk * s->mma_k * p->swizzle_bytes);
            emit(e, "add.u32 %s, %s, %u;", R(e, blo), R(e, vlo), op_desc_delta(off));
            emit(e, "mov.b64 %s, {%s, %%mm_vhi};", R(e, bd), R(e, blo));
            emit(e, "add.u32 %s, %%tmem, %u;", R(e, a), s->tm_s[buf] + lane + (uint32_t)(kk * s->p_step_cols));
            op_umma_ts(e, 1, 0, d, a, bd, reg_find(e, "mm_idesc_pv"), kk ? REG_NONE : reg_find(e, "mm_pv_acc"));
        }
    }
}

/* The PV of the pending block %mm_pit (its slot in %mm_pslot): wait for its P, issue, then free
 * the slot and signal the softmax (bar_pv_done). */
static void mma_pending_pv(Emit *e)
{
    const SparsePlan100 *s = mla100(e->p);
    char l_odd[NAME], l_done[NAME];
    Reg bar = reg_b32(e, "mm_bar"), par = reg_b32(e, "mm_ppar"), pit = reg_find(e, "mm_pit");
    Reg odd = reg_pred(e, "mm_podd");
    smem_at(e, bar, s->bar_p_full);
    emit(e, "and.b32 %s, %s, 1;", R(e, par), R(e, pit));
    op_mbar_wait(e, bar, par);
    op_tc_fence_after(e);
    emit(e, "setp.ne.u32 %s, %s, 0;", R(e, reg_find(e, "mm_pv_acc")), R(e, pit));
    emit(e, "setp.ne.u32 %s, %s, 0;", R(e, odd), R(e, par));
    emit(e, "@%s bra %s;", R(e, odd), new_label(e, l_odd, sizeof l_odd, "mm_pv_odd"));
    mma_pv(e, 0);
    emit(e, "bra.uni %s;", new_label(e, l_done, sizeof l_done, "mm_pv_issued"));
    emit_label(e, l_odd);
    mma_pv(e, 1);
    emit_label(e, l_done);
    emit_note(e, "the slot is free once these MMAs read it; O is final for this block");
    op_umma_commit(e, 1, reg_find(e, "mm_pempty"), REG_NONE);
    mma_commit_at(e, s->bar_pv_done, 0);
}

static void emit_mma(Emit *e)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    emit_section(e, "role mma (warp %d): lane 0 issues every tcgen05.mma; per block QK of it, then PV of the one "
                 "before", s->warp_mma);
    Reg pr = reg_pred(e, "mm_p");
    emit(e, "setp.ne.u32 %s, %%lane, 0;", R(e, pr));
    emit(e, "@%s bra $mm_free;", R(e, pr));
    emit(e, "mov.u32 %s, 0x%08X;", reg(e, "b32", "mm_idesc_qk"), s->idesc_qk);
    emit(e, "mov.u32 %s, 0x%08X;", reg(e, "b32", "mm_idesc_pv"), s->idesc_pv);
    emit(e, "mov.u32 %s, 0x%08X;", reg(e, "b32", "mm_dhi"), (uint32_t)(s->desc_k >> 32));
    emit(e, "mov.u32 %s, 0x%08X;", reg(e, "b32", "mm_vhi"), (uint32_t)(s->desc_v >> 32));
    emit_note(e, "enable-input-d: false overwrites the accumulator (first K step); ptxas takes 1 but not 0 as an immediate");
    emit(e, "mov.pred %s, 0;", reg(e, "pred", "mm_false"));
    reg_pred(e, "mm_pv_acc");
    Reg qlo = reg_b32(e, "mm_qlo");
    emit_note(e, "Q descriptor low word (plan: smem q, desc 0x%016llX)", (unsigned long long)s->desc_q);
    smem_at(e, qlo, s->off_q);
    op_umma_desc_lo(e, qlo, qlo, s->desc_q);
    Reg bar = reg_b32(e, "mm_bar");
    smem_at(e, bar, s->bar_q_full);
    op_mbar_wait_imm(e, bar, 0);

    Reg j = reg_b32(e, "mm_j"), stage = reg_b32(e, "mm_stage"), phase = reg_b32(e, "mm_phase");
    Reg lo = reg_b32(e, "mm_mlo"), hi = reg_b32(e, "mm_mhi"), any = reg_pred(e, "mm_any");
    Reg it = reg_b32(e, "mm_it"), pit = reg_b32(e, "mm_pit"), pend = reg_pred(e, "mm_pend");
    Reg slot = reg_b32(e, "mm_slot"), pslot = reg_b32(e, "mm_pslot"), pempty = reg_b32(e, "mm_pempty");
    Reg empty = reg_b32(e, "mm_empty"), odd = reg_pred(e, "mm_odd");
    char top[NAME], done[NAME], l_skip[NAME], l_next[NAME], l_odd[NAME], l_qk[NAME], l_nopv[NAME];
    emit(e, "mov.u32 %s, 0;", R(e, it));
    emit(e, "setp.ne.u32 %s, 0, 0;", R(e, pend));
    mla100_loop_begin(e, "mm", j, stage, phase, top, done);
    read_mask(e, "mm", stage, phase, lo, hi, any);
    smem_indexed(e, empty, s->bar_kv_empty, stage, MBAR_BYTES);
    emit(e, "@!%s bra %s;", R(e, any), new_label(e, l_skip, sizeof l_skip, "mm_skip"));
    op_tc_fence_after(e);
    smem_indexed(e, slot, s->off_kv, stage, s->kv_stage_bytes);
    emit(e, "and.b32 %s, %s, 1;", R(e, reg_b32(e, "mm_buf")), R(e, it));
    emit(e, "setp.ne.u32 %s, %%mm_buf, 0;", R(e, odd));
    emit(e, "@%s bra %s;", R(e, odd), new_label(e, l_odd, sizeof l_odd, "mm_qk_odd"));
    mma_qk(e, 0);
    mma_commit_at(e, s->bar_s_full, 0);
    emit(e, "bra.uni %s;", new_label(e, l_qk, sizeof l_qk, "mm_qk_issued"));
    emit_label(e, l_odd);
    mma_qk(e, 1);
    mma_commit_at(e, s->bar_s_full, 1);
    emit_label(e, l_qk);
    int ahead = s->stages > 1; /* one slot: the next block cannot land before this block's PV */
    if (ahead) {
        emit(e, "@!%s bra %s;", R(e, pend), new_label(e, l_nopv, sizeof l_nopv, "mm_no_pv"));
        mma_pending_pv(e);
        emit_label(e, l_nopv);
        emit_note(e, "this block is pending now: its PV follows the next block's QK");
    } else {
        emit_note(e, "one KV slot: this block's PV follows its QK");
    }
    emit(e, "mov.u32 %s, %s;", R(e, pit), R(e, it));
    emit(e, "mov.u32 %s, %s;", R(e, pslot), R(e, slot));
    emit(e, "mov.u32 %s, %s;", R(e, pempty), R(e, empty));
    if (ahead) emit(e, "setp.eq.u32 %s, 0, 0;", R(e, pend));
    else mma_pending_pv(e);
    emit(e, "add.u32 %s, %s, 1;", R(e, it), R(e, it));
    emit(e, "bra.uni %s;", new_label(e, l_next, sizeof l_next, "mm_next"));
    emit_label(e, l_skip);
    if (ahead) {
        emit_note(e, "no valid index: no MMA reads the slot; the pending PV goes now (its slot may be the next one's)");
        char l_flushed[NAME];
        emit(e, "@!%s bra %s;", R(e, pend), new_label(e, l_flushed, sizeof l_flushed, "mm_flushed"));
        mma_pending_pv(e);
        emit(e, "setp.ne.u32 %s, 0, 0;", R(e, pend));
        emit_label(e, l_flushed);
    }
    op_mbar_arrive(e, empty);
    emit_label(e, l_next);
    mla100_loop_end(e, j, stage, phase, s->stages, top, done);
    if (ahead) {
        char l_end[NAME];
        emit(e, "@!%s bra %s;", R(e, pend), new_label(e, l_end, sizeof l_end, "mm_end"));
        mma_pending_pv(e);
        emit_label(e, l_end);
    }
    emit_label(e, "$mm_free");
    op_warp_sync(e);
    emit_note(e, "plan: named barrier tmem_free (%d): the softmax warps read O for the last time", s->bar_tmem_free);
    op_bar_sync(e, s->bar_tmem_free, named_bar_threads(p, s->bar_tmem_free));
    op_tc_fence_after(e);
    op_tmem_dealloc(e, 1, reg_find(e, "tmem"), p->tmem_cols);
    emit(e, "bra.uni $exit;");
}

/* ------------------------------------------------------------ kernel: softmax warps */

static void sfx_setup(Emit *e)
{
    const SparsePlan100 *s = mla100(e->p);
    emit(e, "shr.u32 %s, %%lane, 4;", reg(e, "b32", "sx_half"));
    emit(e, "setp.ne.u32 %s, %%sx_half, 0;", reg(e, "pred", "sx_hi"));
    emit_note(e, "this lane's row: head 16*warp + lane%%16 of the CTA (the M = 64 data path)");
    emit(e, "and.b32 %s, %%lane, 15;", reg(e, "b32", "sx_row"));
    emit(e, "mad.lo.u32 %%sx_row, %%warp, 16, %%sx_row;");
    emit(e, "add.u32 %s, %%tmem, %%tm_lane;", reg(e, "b32", "sx_tl"));
    reg_arr(e, RT_F32, s->half_cols, "sx_s");
    reg_arr(e, RT_B32, s->half_cols / 2, "sx_p");
    reg_arr(e, RT_B32, s->half_cols / 2, "sx_q");
    reg_arr(e, RT_B32, s->half_cols, "sx_w");
    reg_arr(e, RT_F32, s->o_chunk, "sx_o");
    emit(e, "mov.f32 %s, %s;", reg(e, "f32", "sx_m"), PTX_NEG_INF);
    emit(e, "mov.f32 %s, %s;", reg(e, "f32", "sx_mx"), PTX_NEG_INF);
    emit(e, "mov.f32 %s, 0f00000000;", reg(e, "f32", "sx_l"));
}

/* Columns of invalid positions: -inf (their rows are zero-filled or stale, never weighted). */
static void sfx_mask_invalid(Emit *e, Reg word)
{
    const SparsePlan100 *s = mla100(e->p);
    Reg t = reg_b32(e, "sx_bit"), pi = reg_pred(e, "sx_invalid"), x = reg_find(e, "sx_s");
    for (int c = 0; c < s->half_cols; c++) {
        emit(e, "and.b32 %s, %s, 0x%08X;", R(e, t), R(e, word), 1u << c);
        emit(e, "setp.eq.u32 %s, %s, 0;", R(e, pi), R(e, t));
        emit(e, "@%s mov.f32 %s, %s;", R(e, pi), R(e, reg_at(e, x, c)), PTX_NEG_INF);
    }
}

/* O *= corr for this thread's row (half) in TMEM (lane field of its quarter, columns tm_o..). */
void mla100_rescale(Emit *e)
{
    const SparsePlan100 *s = mla100(e->p);
    Reg ta = reg_b32(e, "sx_ta"), o = reg_find(e, "sx_o");
    for (int c = 0; c < s->o_cols; c += s->o_chunk) {
        emit(e, "add.u32 %s, %%sx_tl, %u;", R(e, ta), s->tm_o + (uint32_t)c);
        op_tmem_ld(e, o, 0, s->o_chunk, ta);
        op_tmem_wait_ld(e);
        for (int x = 0; x < s->o_chunk; x++) {
            Reg ox = reg_at(e, o, x);
            emit(e, "mul.f32 %s, %s, %%sx_corr;", R(e, ox), R(e, ox));
        }
        op_tmem_st(e, ta, o, 0, s->o_chunk);
    }
    op_tmem_wait_st(e);
}

/* One processed block, S in buffer buf: S row half to registers, mask, lazy max, exp2, sum, P to
 * both lane halves of the buffer, O rescale when a row's max moved. */
static void sfx_block(Emit *e, int buf)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    int n = s->half_cols, w = n / 2;
    Reg x = reg_find(e, "sx_s"), pk = reg_find(e, "sx_p"), qk = reg_find(e, "sx_q"), wd = reg_find(e, "sx_w");
    Reg bar = reg_b32(e, "sx_bar"), ta = reg_b32(e, "sx_ta"), t = reg_f32(e, "sx_shfl");
    Reg xs[256];
    for (int c = 0; c < n; c++) xs[c] = reg_at(e, x, c);
    emit_note(e, "S%d: wait for its commit (plan bar_s_full[%d]), load this lane's %d columns", buf, buf, n);
    mbar_at(e, bar, s->bar_s_full, buf);
    op_mbar_wait(e, bar, reg_find(e, "sx_spar"));
    op_tc_fence_after(e);
    emit(e, "add.u32 %s, %%sx_tl, %u;", R(e, ta), s->tm_s[buf]);
    op_tmem_ld(e, x, 0, n, ta);
    op_tmem_wait_ld(e);
    sfx_mask_invalid(e, reg_find(e, "sx_word"));
    Reg bmax = reg_f32(e, "sx_bmax"), rs = reg_f32(e, "sx_rsum");
    sfx_max_tree(e, bmax, xs, n);
    emit_note(e, "the lane pair (lane, lane ^ 16) holds one row: combine the halves");
    op_shfl_bfly(e, t, bmax, MLA_LANE_HALF);
    emit(e, "max.f32 %s, %s, %s;", R(e, bmax), R(e, bmax), R(e, t));
    emit_note(e, "the true row max, for max_logits (the lazy max below may lag it)");
    emit(e, "max.f32 %%sx_mx, %%sx_mx, %s;", R(e, bmax));
    Reg need = reg_pred(e, "sx_need"), corr = reg_f32(e, "sx_corr"), neg_ms = reg_f32(e, "sx_neg_ms");
    Reg scale_log2 = reg_find(e, "scale_log2");
    sfx_update_max_lazy(e, reg_find(e, "sx_m"), bmax, scale_log2, s->rescale, neg_ms, corr, need);
    sfx_exp2_scaled(e, xs, n, scale_log2, neg_ms, s->poly_every);
    sfx_sum_tree(e, rs, xs, n);
    op_shfl_bfly(e, t, rs, MLA_LANE_HALF);
    emit(e, "add.f32 %s, %s, %s;", R(e, rs), R(e, rs), R(e, t));
    emit(e, "fma.rn.f32 %%sx_l, %%sx_l, %s, %s;", R(e, corr), R(e, rs));
    emit_note(e, "P (bf16 pairs) of this half, and the other half's from lane ^ 16: both halves hold the whole row");
    for (int k = 0; k < w; k++) op_cvt_pack(e, DT_BF16, reg_at(e, pk, k), xs[2 * k + 1], xs[2 * k]);
    for (int k = 0; k < w; k++) op_shfl_bfly(e, reg_at(e, qk, k), reg_at(e, pk, k), MLA_LANE_HALF);
    for (int k = 0; k < w; k++) {
        emit(e, "selp.b32 %s, %s, %s, %%sx_hi;", R(e, reg_at(e, wd, k)), R(e, reg_at(e, qk, k)), R(e, reg_at(e, pk, k)));
        emit(e, "selp.b32 %s, %s, %s, %%sx_hi;", R(e, reg_at(e, wd, w + k)), R(e, reg_at(e, pk, k)),
             R(e, reg_at(e, qk, k)));
    }
    emit_note(e, "O of the previous block is final before it is rescaled or accumulated into (plan bar_pv_done)");
    char l_first[NAME], l_keep[NAME];
    emit(e, "@%%sx_first bra %s;", new_label(e, l_first, sizeof l_first, "sx_first"));
    smem_at(e, bar, s->bar_pv_done);
    op_mbar_wait(e, bar, reg_find(e, "sx_opar"));
    op_tc_fence_after(e);
    Reg any = reg_pred(e, "sx_any_need");
    op_vote_any(e, any, need);
    emit_note(e, "rescale O only when the warp's vote says a row max moved (plan: rescale %d)", s->rescale);
    emit(e, "@!%s bra %s;", R(e, any), new_label(e, l_keep, sizeof l_keep, "sx_keep"));
    mla100_rescale(e);
    emit_label(e, l_keep);
    emit_label(e, l_first);
    emit(e, "add.u32 %s, %%sx_tl, %u;", R(e, ta), s->tm_s[buf]);
    op_tmem_st(e, ta, wd, 0, n);
    op_tmem_wait_st(e);
    op_tc_fence_before(e);
    smem_at(e, bar, s->bar_p_full);
    op_mbar_arrive(e, bar);
}

static void epilogue_tma(Emit *e, Reg inv);
static void epilogue_direct(Emit *e, Reg inv, Reg inb, int pair);
static void epilogue_stats(Emit *e, Reg inb, Reg lse, int pair);

/* Sink factor, O / l to bf16 in global memory, lse and max_logits of this lane's row. */
void mla100_epilogue(Emit *e, int pair)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    emit_section(e, "softmax epilogue: O / l x sink factor, then out (bf16), lse and max_logits");
    Reg l = reg_find(e, "sx_l"), one = reg_f32(e, "sx_one"), inv = reg_f32(e, "sx_inv"), lse = reg_f32(e, "sx_lse");
    Reg head = reg_b32(e, "sx_head"), inb = reg_pred(e, "sx_inb"), none = reg_pred(e, "sx_norow");
    Reg sk = reg_f32(e, "sx_sink"), f = reg_f32(e, "sx_sinkf"), ha = reg_b64(e, "sx_ha"), rsk = reg_pred(e, "sx_rsink");
    emit(e, "mov.f32 %s, 0f3F800000;", R(e, one));
    emit_note(e, "a row with no valid index: l = 0, out 0, lse +inf, max_logits -inf");
    sfx_lse(e, lse, reg_find(e, "sx_m"), l, reg_find(e, "scale_log2"));
    emit(e, "setp.eq.f32 %s, %s, 0f00000000;", R(e, none), R(e, l));
    emit(e, "@%s mov.f32 %s, 0f7F800000;", R(e, none), R(e, lse));
    sfx_inv_sum(e, inv, l, one);
    emit(e, "add.u32 %s, %%h0, %%sx_row;", R(e, head));
    emit(e, "setp.lt.u32 %s, %s, %%heads_q;", R(e, inb), R(e, head));
    emit_note(e, "sink: out x e^lse / (e^lse + e^sink) = 1 / (1 + 2^((sink - lse) log2 e)); lse unchanged");
    emit(e, "setp.ne.u64 %s, %%sink, 0;", R(e, rsk));
    emit(e, "and.pred %s, %s, %s;", R(e, rsk), R(e, rsk), R(e, inb));
    emit(e, "mul.wide.u32 %s, %s, 4;", R(e, ha), R(e, head));
    emit(e, "add.u64 %s, %s, %%sink;", R(e, ha), R(e, ha));
    emit(e, "mov.f32 %s, %s;", R(e, sk), PTX_NEG_INF);
    op_ld_global(e, rsk, "f32", sk, ha, 0);
    emit(e, "sub.f32 %s, %s, %s;", R(e, f), R(e, sk), R(e, lse));
    emit(e, "mul.f32 %s, %s, %s;", R(e, f), R(e, f), PTX_LOG2E);
    emit(e, "ex2.approx.ftz.f32 %s, %s;", R(e, f), R(e, f));
    emit(e, "add.f32 %s, %s, 0f3F800000;", R(e, f), R(e, f));
    emit(e, "rcp.approx.ftz.f32 %s, %s;", R(e, f), R(e, f));
    emit(e, "@%s mov.f32 %s, 0f3F800000;", R(e, none), R(e, f));
    emit(e, "mul.f32 %s, %s, %s;", R(e, inv), R(e, inv), R(e, f));
    if (s->tma_store)
        epilogue_tma(e, inv);
    else
        epilogue_direct(e, inv, inb, pair);
    epilogue_stats(e, inb, lse, pair);
}

/* Where the final O's packed column pairs go: pair k of the chunk at column c (columns c + 2k, c + 2k + 1). */
typedef struct OPairSink OPairSink;
struct OPairSink {
    Reg (*reg)(Emit *e, const OPairSink *o, int k);               /* the b32 to pack pair k into */
    void (*put)(Emit *e, const OPairSink *o, int c, int k, Reg pk); /* store it (or a group ending at it) */
    Reg oa, a, inb, pk, base, ua, key, w[4];
};

/* The final O of this thread's row, two columns at a time: wait for the last PV (bar_pv_done, phase
 * blocks - 1; note: what else that means), then per TMEM chunk scale by inv, pack to bf16, hand to sink. */
static void epilogue_o_pairs(Emit *e, Reg inv, const char *note, const OPairSink *sink)
{
    const SparsePlan100 *s = mla100(e->p);
    Reg bar = reg_b32(e, "sx_bar"), ta = reg_b32(e, "sx_ta"), o = reg_find(e, "sx_o");
    emit_note(e, "the last PV is done (its bar_pv_done phase: blocks - 1)%s", note);
    smem_at(e, bar, s->bar_pv_done);
    op_mbar_wait(e, bar, reg_find(e, "sx_opar"));
    op_tc_fence_after(e);
    for (int c = 0; c < s->o_cols; c += s->o_chunk) {
        emit(e, "add.u32 %s, %%sx_tl, %u;", R(e, ta), s->tm_o + (uint32_t)c);
        op_tmem_ld(e, o, 0, s->o_chunk, ta);
        op_tmem_wait_ld(e);
        for (int k = 0; k < s->o_chunk / 2; k++) {
            Reg lo = reg_at(e, o, 2 * k), hi = reg_at(e, o, 2 * k + 1), pk = sink->reg(e, sink, k);
            emit(e, "mul.f32 %s, %s, %s;", R(e, lo), R(e, lo), R(e, inv));
            emit(e, "mul.f32 %s, %s, %s;", R(e, hi), R(e, hi), R(e, inv));
            op_cvt_pack(e, DT_BF16, pk, hi, lo);
            sink->put(e, sink, c, k, pk);
        }
    }
}

/* epilogue_direct's sink: each pair straight to out. */
static Reg direct_reg(Emit *e, const OPairSink *o, int k) { (void)e, (void)k; return o->pk; }
static void direct_put(Emit *e, const OPairSink *o, int c, int k, Reg pk)
{
    emit(e, "add.u64 %s, %s, %d;", R(e, o->a), R(e, o->oa), (c + 2 * k) * e->p->elem_bytes);
    op_st_global_b32(e, o->inb, o->a, pk);
}

/* epilogue_tma's sink: four pairs make a 16-byte unit, stored at its swizzled place in the staging. */
static Reg tma_reg(Emit *e, const OPairSink *o, int k) { (void)e; return o->w[k % 4]; }
static void tma_put(Emit *e, const OPairSink *o, int c, int k, Reg pk)
{
    const Plan *p = e->p;
    (void)pk;
    if (k % 4 != 3) return;
    int unit_elems = MLA_UNIT / p->elem_bytes, col = c + 2 * k - 6, u = (col % p->chunk_elems) / unit_elems;
    emit(e, "xor.b32 %s, %s, %d;", R(e, o->ua), R(e, o->key), u);
    emit(e, "shl.b32 %s, %s, 4;", R(e, o->ua), R(e, o->ua));
    emit(e, "add.u32 %s, %s, %s;", R(e, o->ua), R(e, o->ua), R(e, o->base));
    op_st_shared_v4_b32(e, o->ua, (uint32_t)(col / p->chunk_elems) * mla100(p)->ostage_chunk_bytes, o->w);
}

/* O / l to bf16, stored by each thread: out[tok, head, half * o_cols ..] (rows past h_q skipped). */
static void epilogue_direct(Emit *e, Reg inv, Reg inb, int pair)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    char l_zero[NAME], l_stored[NAME];
    Reg head = reg_find(e, "sx_head");
    Reg oa = reg_b64(e, "sx_oa"), a = reg_b64(e, "sx_oa_c"), col = reg_b32(e, "sx_col"), pk = reg_b32(e, "sx_pk");
    Reg zero = reg_b32(e, "sx_zero");
    emit_note(e, "out[tok, head, half*%d ..]: this %s's %d columns", s->o_cols, pair ? "thread" : "lane", s->o_cols);
    Reg t64 = reg_b64(e, "sx_t64");
    op_cvt(e, "u64.u32", t64, reg_find(e, "tok"));
    emit(e, "mul.lo.u64 %s, %s, %%out_stride_s;", R(e, oa), R(e, t64));
    op_cvt(e, "u64.u32", t64, head);
    emit(e, "mad.lo.u64 %s, %s, %%out_stride_h, %s;", R(e, oa), R(e, t64), R(e, oa));
    emit(e, "mul.lo.u32 %s, %%sx_half, %d;", R(e, col), s->o_cols);
    op_cvt(e, "u64.u32", t64, col);
    emit(e, "add.u64 %s, %s, %s;", R(e, oa), R(e, oa), R(e, t64));
    emit(e, "mad.lo.u64 %s, %s, %d, %%out;", R(e, oa), R(e, oa), p->elem_bytes);
    emit(e, "setp.eq.u32 %s, %%sx_it, 0;", R(e, reg_pred(e, "sx_noblk")));
    emit(e, "@%%sx_noblk bra %s;", new_label(e, l_zero, sizeof l_zero, "sx_zero_o"));
    const OPairSink sink = {.reg = direct_reg, .put = direct_put, .oa = oa, .a = a, .inb = inb, .pk = pk};
    epilogue_o_pairs(e, inv, "", &sink);
    emit(e, "bra.uni %s;", new_label(e, l_stored, sizeof l_stored, "sx_stored"));
    emit_label(e, l_zero);
    emit(e, "mov.b32 %s, 0;", R(e, zero));
    for (int c = 0; c < s->o_cols; c += 2) {
        emit(e, "add.u64 %s, %s, %d;", R(e, a), R(e, oa), c * p->elem_bytes);
        op_st_global_b32(e, inb, a, zero);
    }
    emit_label(e, l_stored);
}

/* O / l to bf16 in the staging chunks (128B-swizzled: row r's 16-byte unit u at r * 128 + ((u ^ r %% 8) << 4)
 * of chunk c), then thread 0 stores them with TMA (rows past h_q are outside the map: clipped). */
static void epilogue_tma(Emit *e, Reg inv)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    char l_zero[NAME], l_stored[NAME], l_skip[NAME];
    int unit_elems = MLA_UNIT / p->elem_bytes, half_chunks = s->o_cols / p->chunk_elems;
    Reg base = reg_b32(e, "sx_st"), key = reg_b32(e, "sx_key"), ua = reg_b32(e, "sx_ua"), w[4];
    for (int k = 0; k < 4; k++) w[k] = reg_b32(e, "sx_w4_%d", k);
    emit_note(e, "staging (plan o store): chunk half*%d of row sx_row at %u + chunk * %u + row * %d", half_chunks,
              s->off_ostage, s->ostage_chunk_bytes, p->swizzle_bytes);
    smem_at(e, base, s->off_ostage);
    emit(e, "mul.lo.u32 %s, %%sx_half, %u;", R(e, ua), (uint32_t)half_chunks * s->ostage_chunk_bytes);
    emit(e, "add.u32 %s, %s, %s;", R(e, base), R(e, base), R(e, ua));
    emit(e, "mad.lo.u32 %s, %%sx_row, %d, %s;", R(e, base), p->swizzle_bytes, R(e, base));
    emit(e, "and.b32 %s, %%sx_row, 7;", R(e, key));
    emit(e, "setp.eq.u32 %s, %%sx_it, 0;", R(e, reg_pred(e, "sx_noblk")));
    emit(e, "@%%sx_noblk bra %s;", new_label(e, l_zero, sizeof l_zero, "sx_zero_o"));
    OPairSink sink = {.reg = tma_reg, .put = tma_put, .base = base, .ua = ua, .key = key};
    for (int k = 0; k < 4; k++) sink.w[k] = w[k];
    epilogue_o_pairs(e, inv, ": the kv ring is dead, O final", &sink);
    emit(e, "bra.uni %s;", new_label(e, l_stored, sizeof l_stored, "sx_stored"));
    emit_label(e, l_zero);
    for (int k = 0; k < 4; k++) emit(e, "mov.b32 %s, 0;", R(e, w[k]));
    for (int col = 0; col < s->o_cols; col += unit_elems) {
        emit(e, "xor.b32 %s, %s, %d;", R(e, ua), R(e, key), (col % p->chunk_elems) / unit_elems);
        emit(e, "shl.b32 %s, %s, 4;", R(e, ua), R(e, ua));
        emit(e, "add.u32 %s, %s, %s;", R(e, ua), R(e, ua), R(e, base));
        op_st_shared_v4_b32(e, ua, (uint32_t)(col / p->chunk_elems) * s->ostage_chunk_bytes, w);
    }
    emit_label(e, l_stored);
    emit_note(e, "staged O is read by the TMA store (async proxy); plan: named barrier o_staged (%d)", s->bar_ostaged);
    op_fence_proxy_async(e);
    op_bar_sync(e, s->bar_ostaged, named_bar_threads(p, s->bar_ostaged));
    Reg lead = reg_pred(e, "sx_olead"), col = reg_b32(e, "sx_ocol");
    emit(e, "setp.ne.u32 %s, %%thread, 0;", R(e, lead));
    emit(e, "@%s bra %s;", R(e, lead), new_label(e, l_skip, sizeof l_skip, "sx_o_sent"));
    for (int c = 0; c < s->ostage_chunks; c++) {
        smem_at(e, ua, s->off_ostage + (uint32_t)c * s->ostage_chunk_bytes);
        emit(e, "mov.u32 %s, %d;", R(e, col), c * p->chunk_elems);
        op_tma_store_3d(e, reg_find(e, "tmap_out"), col, reg_find(e, "h0"), reg_find(e, "tok"), ua);
    }
    op_bulk_commit(e);
    emit_note(e, "the stores are done before the CTA exits (and before the pair's TMEM is freed)");
    op_bulk_wait(e, 0);
    emit_label(e, l_skip);
}

/* lse and max_logits of the row (one thread per row). */
static void epilogue_stats(Emit *e, Reg inb, Reg lse, int pair)
{
    Reg head = reg_find(e, "sx_head");
    emit_note(e, "lse and max_logits [s_q, h_q]: %s", pair ? "the thread of key half 0" : "the lower lane of each pair");
    Reg pw = reg_pred(e, "sx_wstat"), sa = reg_b64(e, "sx_sa"), sa2 = reg_b64(e, "sx_sa2"), ix = reg_b32(e, "sx_ix");
    Reg ml = reg_f32(e, "sx_maxl"), pl = reg_pred(e, "sx_wlse"), pm = reg_pred(e, "sx_wml");
    emit(e, "and.pred %s, %s, !%%sx_hi;", R(e, pw), R(e, inb));
    emit(e, "mad.lo.u32 %s, %%tok, %%heads_q, %s;", R(e, ix), R(e, head));
    emit(e, "mul.f32 %s, %%sx_mx, %%sm_scale;", R(e, ml));
    emit(e, "setp.ne.and.u64 %s, %%lse, 0, %s;", R(e, pl), R(e, pw));
    emit(e, "setp.ne.and.u64 %s, %%max_logits, 0, %s;", R(e, pm), R(e, pw));
    emit(e, "mul.wide.u32 %s, %s, 4;", R(e, sa), R(e, ix));
    emit(e, "add.u64 %s, %s, %%lse;", R(e, sa2), R(e, sa));
    op_st_global_f32(e, pl, sa2, lse);
    emit(e, "add.u64 %s, %s, %%max_logits;", R(e, sa2), R(e, sa));
    op_st_global_f32(e, pm, sa2, ml);
}

/* Processed block %sx_it of the softmax loop: S buffer it % 2 and its phase it / 2 (%sx_spar), the
 * bar_pv_done phase it - 1 (%sx_opar), %sx_first; the block's softmax for buffer 0 or 1 (block); it++. */
void mla100_sfx_dispatch(Emit *e, void (*block)(Emit *e, int buf))
{
    Reg it = reg_find(e, "sx_it"), spar = reg_find(e, "sx_spar"), opar = reg_find(e, "sx_opar");
    Reg first = reg_find(e, "sx_first"), odd = reg_find(e, "sx_odd");
    char l_odd[NAME], l_next[NAME];
    emit(e, "shr.u32 %s, %s, 1;", R(e, spar), R(e, it));
    emit(e, "and.b32 %s, %s, 1;", R(e, spar), R(e, spar));
    emit(e, "add.u32 %s, %s, 1;", R(e, opar), R(e, it));
    emit(e, "and.b32 %s, %s, 1;", R(e, opar), R(e, opar));
    emit(e, "setp.eq.u32 %s, %s, 0;", R(e, first), R(e, it));
    emit(e, "and.b32 %s, %s, 1;", R(e, reg_b32(e, "sx_buf")), R(e, it));
    emit(e, "setp.ne.u32 %s, %%sx_buf, 0;", R(e, odd));
    emit(e, "@%s bra %s;", R(e, odd), new_label(e, l_odd, sizeof l_odd, "sx_odd"));
    block(e, 0);
    emit(e, "bra.uni %s;", new_label(e, l_next, sizeof l_next, "sx_blk_done"));
    emit_label(e, l_odd);
    block(e, 1);
    emit_label(e, l_next);
    emit(e, "add.u32 %s, %s, 1;", R(e, it), R(e, it));
}

static void emit_softmax(Emit *e)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    emit_section(e, "role softmax (warps 0..%d): one row per lane pair, P to TMEM, lazy O rescale, epilogue",
                 s->sfx_warps - 1);
    sfx_setup(e);
    Reg j = reg_b32(e, "sx_j"), stage = reg_b32(e, "sx_stage"), phase = reg_b32(e, "sx_phase");
    Reg lo = reg_b32(e, "sx_mlo"), hi = reg_b32(e, "sx_mhi"), any = reg_pred(e, "sx_any");
    Reg it = reg_b32(e, "sx_it"), empty = reg_b32(e, "sx_empty");
    reg_pred(e, "sx_odd"); /* sx_odd, sx_spar, sx_first: mla100_sfx_dispatch reads them */
    reg_b32(e, "sx_spar");
    Reg opar = reg_b32(e, "sx_opar"), word = reg_b32(e, "sx_word");
    reg_pred(e, "sx_first");
    char top[NAME], done[NAME], l_skip[NAME];
    emit(e, "mov.u32 %s, 0;", R(e, it));
    mla100_loop_begin(e, "sx", j, stage, phase, top, done);
    read_mask(e, "sx", stage, phase, lo, hi, any);
    emit(e, "selp.b32 %s, %s, %s, %%sx_hi;", R(e, word), R(e, hi), R(e, lo));
    emit_note(e, "the bits are read: the slot may be refilled once the MMAs are done with it too");
    smem_indexed(e, empty, s->bar_kv_empty, stage, MBAR_BYTES);
    op_mbar_arrive(e, empty);
    emit(e, "@!%s bra %s;", R(e, any), new_label(e, l_skip, sizeof l_skip, "sx_skip"));
    emit_note(e, "processed block it: S buffer it %% 2, its phase it / 2; bar_pv_done phase it - 1");
    mla100_sfx_dispatch(e, sfx_block);
    emit_label(e, l_skip);
    mla100_loop_end(e, j, stage, phase, s->stages, top, done);
    emit_note(e, "the last processed block's bar_pv_done phase: it - 1");
    emit(e, "add.u32 %s, %s, 1;", R(e, opar), R(e, it));
    emit(e, "and.b32 %s, %s, 1;", R(e, opar), R(e, opar));
    mla100_epilogue(e, 0);
    op_tc_fence_before(e);
    emit_note(e, "plan: named barrier tmem_free (%d)", s->bar_tmem_free);
    op_bar_arrive(e, s->bar_tmem_free, named_bar_threads(p, s->bar_tmem_free));
    emit(e, "bra.uni $exit;");
}

/* ------------------------------------------------------------ kernel: dequant warpgroup (fp8) */

/* Four e4m3 of word w (bytes 0..3: elements in order) times sc, as two bf16 pairs into out[0..1]. */
void mla100_dq_word(Emit *e, Reg w, Reg sc, Reg *out)
{
    Reg half[2] = {reg_b16(e, "dq_b0"), reg_b16(e, "dq_b1")}, hx = reg_b32(e, "dq_hx");
    Reg h[2] = {reg_b16(e, "dq_h0"), reg_b16(e, "dq_h1")}, x[2] = {reg_f32(e, "dq_x0"), reg_f32(e, "dq_x1")};
    emit(e, "mov.b32 {%s, %s}, %s;", R(e, half[0]), R(e, half[1]), R(e, w));
    for (int k = 0; k < 2; k++) {
        op_cvt(e, "rn.f16x2.e4m3x2", hx, half[k]);
        emit(e, "mov.b32 {%s, %s}, %s;", R(e, h[0]), R(e, h[1]), R(e, hx));
        for (int i = 0; i < 2; i++) {
            op_cvt(e, "f32.f16", x[i], h[i]);
            emit(e, "mul.f32 %s, %s, %s;", R(e, x[i]), R(e, x[i]), R(e, sc));
        }
        op_cvt_pack(e, DT_BF16, out[k], x[1], x[0]);
    }
}

/* Thread t of the group: row t %% b_topk of the block and its 16-byte units 2 u + t / b_topk (the two
 * threads of a row interleave), so every unit's raw box, bf16 chunk and swizzle are constants up to
 * the thread's half bit. */
static void emit_dequant(Emit *e)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    int halves = MLA_DQ_WARPS * MLA_WARP / s->block;
    int elems = MLA_UNIT / p->elem_bytes; /* bf16 elements (and e4m3 bytes) of one unit */
    emit_section(e, "role dequant (warps %d..%d): e4m3 rows x scales -> the bf16 slot, as the MMAs read it",
                 s->warp_dq, s->warp_dq + MLA_DQ_WARPS - 1);
    Reg t = reg_b32(e, "dq_t"), r = reg_b32(e, "dq_r"), hsel = reg_b32(e, "dq_half"), hk = reg_b32(e, "dq_hk");
    Reg rawrow = reg_b32(e, "dq_rawrow"), kvrow = reg_b32(e, "dq_kvrow"), has = reg_pred(e, "dq_has_scale");
    emit(e, "sub.u32 %s, %%thread, %d;", R(e, t), s->warp_dq * MLA_WARP);
    emit(e, "and.b32 %s, %s, %d;", R(e, r), R(e, t), s->block - 1);
    emit(e, "shr.u32 %s, %s, %d;", R(e, hsel), R(e, t), __builtin_ctz((unsigned)s->block));
    emit_note(e, "the swizzle key of the row (128B: unit ^ row %% 8), with the thread's half bit folded in");
    emit(e, "and.b32 %s, %s, 7;", R(e, hk), R(e, r));
    emit(e, "xor.b32 %s, %s, %s;", R(e, hk), R(e, hk), R(e, hsel));
    emit(e, "mul.lo.u32 %s, %s, %d;", R(e, rawrow), R(e, r), s->raw_box);
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, rawrow), R(e, hsel), elems, R(e, rawrow));
    emit(e, "mul.lo.u32 %s, %s, %d;", R(e, kvrow), R(e, r), p->swizzle_bytes);
    emit(e, "setp.ne.u64 %s, %%kv_scale, 0;", R(e, has));

    Reg j = reg_b32(e, "dq_j"), rs = reg_b32(e, "dq_rs"), rph = reg_b32(e, "dq_rph");
    Reg bs = reg_b32(e, "dq_bs"), bph = reg_b32(e, "dq_bph"), bar = reg_b32(e, "dq_bar"), par = reg_b32(e, "dq_par");
    Reg lo = reg_b32(e, "dq_mlo"), hi = reg_b32(e, "dq_mhi"), any = reg_pred(e, "dq_any"), ma = reg_b32(e, "dq_ma");
    Reg first = reg_pred(e, "dq_first");
    char top[NAME], done[NAME], l_skip[NAME];
    ring_reset(e, bs, bph);
    emit(e, "setp.eq.u32 %s, %s, 0;", R(e, first), R(e, t));
    mla100_loop_begin(e, "dq", j, rs, rph, top, done);
    smem_indexed(e, bar, s->bar_raw_full, rs, MBAR_BYTES);
    op_mbar_wait(e, bar, rph);
    smem_indexed(e, bar, s->bar_kv_empty, bs, MBAR_BYTES);
    ring_free_parity(e, par, bph);
    op_mbar_wait(e, bar, par);
    emit_note(e, "the raw slot's bits go to the bf16 slot (thread 0), where MMA and softmax read them");
    smem_indexed(e, ma, s->off_raw_mask, rs, s->mask_stage_bytes);
    op_ld_shared_b32(e, lo, ma, 0);
    op_ld_shared_b32(e, hi, ma, 4);
    smem_indexed(e, ma, s->off_mask, bs, s->mask_stage_bytes);
    op_st_shared_b32_if(e, first, ma, 0, lo);
    op_st_shared_b32_if(e, first, ma, 4, hi);
    emit(e, "or.b32 %s, %s, %s;", R(e, lo), R(e, lo), R(e, hi));
    emit(e, "setp.ne.u32 %s, %s, 0;", R(e, any), R(e, lo));
    emit(e, "@!%s bra %s;", R(e, any), new_label(e, l_skip, sizeof l_skip, "dq_skip"));

    Reg coord = reg_b32(e, "dq_coord"), psc = reg_pred(e, "dq_psc"), sb = reg_b64(e, "dq_sbase");
    Reg ra = reg_b32(e, "dq_ra"), ka = reg_b32(e, "dq_ka"), w0 = reg_b32(e, "dq_w0"), w1 = reg_b32(e, "dq_w1");
    Reg sc = reg_f32(e, "dq_sc"), si = reg_b32(e, "dq_si"), sa = reg_b64(e, "dq_sa"), po = reg_b32(e, "dq_po");
    Reg unit = reg_pred(e, "dq_unit"), t64 = reg_b64(e, "dq_t64");
    Reg out[4];
    for (int k = 0; k < 4; k++) out[k] = reg_b32(e, "dq_o%d", k);
    smem_indexed(e, ma, s->off_coord, rs, s->coord_stage_bytes);
    emit(e, "mad.lo.u32 %s, %s, 4, %s;", R(e, ma), R(e, r), R(e, ma));
    op_ld_shared_b32(e, coord, ma, 0);
    emit_note(e, "scales of the row: kv_scale + coord * kv_scale_blocks (an invalid row reads none: its bytes are 0)");
    emit(e, "setp.ge.s32 %s, %s, 0;", R(e, psc), R(e, coord));
    emit(e, "and.pred %s, %s, %s;", R(e, psc), R(e, psc), R(e, has));
    emit(e, "mul.wide.s32 %s, %s, 4;", R(e, sb), R(e, coord));
    op_cvt(e, "u64.u32", t64, reg_find(e, "kv_scale_blocks"));
    emit(e, "mul.lo.u64 %s, %s, %s;", R(e, sb), R(e, sb), R(e, t64));
    emit(e, "add.u64 %s, %s, %%kv_scale;", R(e, sb), R(e, sb));
    smem_indexed(e, ra, s->off_raw, rs, s->raw_stage_bytes);
    emit(e, "add.u32 %s, %s, %s;", R(e, ra), R(e, ra), R(e, rawrow));
    smem_indexed(e, ka, s->off_kv, bs, s->kv_stage_bytes);
    emit(e, "add.u32 %s, %s, %s;", R(e, ka), R(e, ka), R(e, kvrow));
    for (int u = 0; u < s->dq_units; u++) {
        int e0 = halves * elems * u; /* first element of the unit for half 0 */
        uint32_t roff = (uint32_t)(e0 / s->raw_box) * s->raw_chunk_bytes + (uint32_t)(e0 % s->raw_box);
        op_ld_shared_v2_b32(e, w0, w1, ra, roff);
        emit(e, "mad.lo.u32 %s, %s, %d, %d;", R(e, si), R(e, hsel), elems, e0);
        emit(e, "mul.lo.u32 %s, %s, %%kv_scale_blocks;", R(e, si), R(e, si));
        emit(e, "div.u32 %s, %s, %d;", R(e, si), R(e, si), p->qk);
        emit(e, "mov.f32 %s, 0f3F800000;", R(e, sc));
        emit(e, "mad.wide.u32 %s, %s, 4, %s;", R(e, sa), R(e, si), R(e, sb));
        op_ld_global(e, psc, "f32", sc, sa, 0);
        emit(e, "setp.eq.f32 %s, %s, 0f00000000;", R(e, unit), R(e, sc));
        emit(e, "@%s mov.f32 %s, 0f3F800000;", R(e, unit), R(e, sc));
        mla100_dq_word(e, w0, sc, out);
        mla100_dq_word(e, w1, sc, out + 2);
        int c = e0 / p->chunk_elems, uu = (e0 % p->chunk_elems) / elems; /* half 0: an even unit */
        emit(e, "xor.b32 %s, %s, %d;", R(e, po), R(e, hk), uu);
        emit(e, "shl.b32 %s, %s, 4;", R(e, po), R(e, po));
        emit(e, "add.u32 %s, %s, %s;", R(e, po), R(e, po), R(e, ka));
        op_st_shared_v4_b32(e, po, (uint32_t)c * s->kv_chunk_bytes, out);
    }
    emit_note(e, "the bf16 slot is read by the MMAs (async proxy)");
    op_fence_proxy_async(e);
    emit_label(e, l_skip);
    smem_indexed(e, bar, s->bar_kv_full, bs, MBAR_BYTES);
    op_mbar_arrive(e, bar);
    smem_indexed(e, bar, s->bar_raw_empty, rs, MBAR_BYTES);
    op_mbar_arrive(e, bar);
    ring_advance(e, bs, bph, s->stages);
    mla100_loop_end(e, j, rs, rph, s->raw_stages, top, done);
    emit(e, "bra.uni $exit;");
}

/* ------------------------------------------------------------ kernel */

void mla100_roles(Emit *e, const Mla100Roles *r)
{
    const SparsePlan100 *s = mla100(e->p);
    emit_section(e, "role dispatch: softmax warps 0..%d, mma %d, load %d", s->sfx_warps - 1, s->warp_mma,
                 s->warp_load);
    Reg pr = reg_pred(e, "p_role");
    emit(e, "setp.lt.u32 %s, %%warp, %d;", R(e, pr), s->sfx_warps);
    emit(e, "@%s bra $softmax;", R(e, pr));
    emit(e, "setp.eq.u32 %s, %%warp, %d;", R(e, pr), s->warp_mma);
    emit(e, "@%s bra $mma;", R(e, pr));
    if (s->kv_fp8) {
        emit(e, "setp.ge.u32 %s, %%warp, %d;", R(e, pr), s->warp_dq);
        emit(e, "@%s bra $dequant;", R(e, pr));
    }
    r->load(e);
    if (s->kv_fp8) {
        emit_label(e, "$dequant");
        r->dequant(e);
    }
    emit_label(e, "$mma");
    r->mma(e);
    emit_label(e, "$softmax");
    r->softmax(e);
}

int sm100_emit_mla_sparse(Emit *e)
{
    const SparsePlan100 *s = mla100(e->p);
    if (s->cta_group == 2) return sm100_emit_mla_pair(e);
    mla100_prologue(e, 0);
    mla_barrier_init(e);
    mla100_tmem_alloc(e, 0);
    const Mla100Roles roles = {emit_load, emit_dequant, emit_mma, emit_softmax};
    mla100_roles(e, &roles);
    emit_label(e, "$exit");
    emit(e, "ret;");
    return e->failed ? -1 : 0;
}

const Family sm100_mla_sparse = {KIND_MLA_SPARSE, mla_defaults, mla_check, mla_plan, sm100_emit_mla_sparse};
