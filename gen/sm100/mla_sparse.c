/* sm100/mla_sparse.c - sparse MLA prefill on sm_100a (DeepSeek-V3.2 top-k attention, FlashMLA's
 * contract; fa4.h): the family's defaults, checks and plan, and its emitter, which picks the kernel:
 *   cta_group 1  the head-64 kernel (sm100/mla_head64.c): one CTA per (query token, 64 query heads)
 *   cta_group 2  the head-128 kernel (sm100/mla_pair.c): a CTA pair per query token, 64 heads each
 * Both build on the shared pieces of sm100/mla_common.c. Plan stage: nothing here emits PTX.
 * Every number comes from the plan; `fa4gen explain mla-sparse --target sm100a` prints it.
 */
#include <stdio.h>
#include <string.h>

#include "mla100.h"
#include "sm100.h"

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
    /* O by TMA store: its staging over the kv ring fits every config that plans (ostage_plan refuses one that would
     * not), and the timing model prices the per-thread stores at 4-20% of these kernels (bench/NOTES.md, 2026-11-29;
     * the same stores measured +4% / +12% on the sm90a kernel); the runtime passes 0 when out's strides do not allow
     * a tensor map */
    if (c->tma_store < 0) c->tma_store = 1;
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
        s->bar_kv_full = plan_mbar(p, "bar_kv_full", s->stages, 2, "even CTA: both CTAs' loads saw the slot free "
                                   "(2 arrivals), their K rows landed (tx)");
    else
        s->bar_kv_full = plan_mbar(p, "bar_kv_full", s->stages, 2, "even CTA: both CTAs' loads saw the slot free "
                                   "(2 arrivals), their rows landed (tx)");
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


/* ------------------------------------------------------------ kernel */

int sm100_emit_mla_sparse(Emit *e)
{
    return mla100(e->p)->cta_group == 2 ? sm100_emit_mla_pair(e) : sm100_emit_mla_head64(e);
}

const Family sm100_mla_sparse = {KIND_MLA_SPARSE, mla_defaults, mla_check, mla_plan, sm100_emit_mla_sparse};
