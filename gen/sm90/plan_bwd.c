/* sm90/plan_bwd.c - the sm_90a attention backward (kind mha-bwd): defaults, checks and the plan.
 *
 * CTA = the producer warpgroup (warp 0: TMA loads; warp 1: the dQ writer's bulk reductions) + bn / 64
 * consumer warpgroups of 64 keys each (depth > 128: 2 consumers that split the keys of S, dP and the depth
 * of dK, dV, dQ; no writer). K and V stay in smem for the CTA's kv block; Q (+ nl2) and dO (+ D) come
 * through `stages`-deep rings, one slot per (query head of the group, m-block). docs/kernels/mha-bwd.md.
 */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../mha_bwd.h"
#include "bwd90.h"

int sm90_emit_mha_bwd(Emit *e);

enum { SM90_CHUNK_BYTES = 128, SM90_GROUP_BYTES = 1024 /* 8 rows of 128 B: the SW128 pattern */ };

/* Registers a consumer thread needs (measured with ptxas): split_depth 0: dK + dV (depth) and S^T + dP^T
 * (bm) f32, plus the packed P^T and dS^T while their RS wgmmas run; split_depth 1: dK + dV (depth / 2 each
 * half) and the dQ tile (64 x depth / 2) live together; plus addresses, row statistics, loop state. */
enum { BWD_REG_OVERHEAD = 32, BWD_PRODUCER_REGS = 24, BWD_CONSUMER_REGS = 240 };
static int bwd_split_depth(int depth) { return depth > 128; }
static int bwd_consumer_need(int bm, int depth)
{
    if (bwd_split_depth(depth)) return depth / 2 + bm * (depth / 2) / BWD_WG + BWD_REG_OVERHEAD;
    return depth + bm + BWD_REG_OVERHEAD;
}

static void bwd_defaults(Config *c)
{
    if (!c->swizzle) c->swizzle = 128;
    /* FlashAttention-3's tiles (d64: 128 x 128; d128: 64 x 128; d256: 64 x 64): dK + dV + S^T + dP^T (d256:
     * dK + dV + dQ) fill the consumer */
    if (!c->bm) c->bm = c->qk_depth <= 64 ? 128 : 64;
    if (!c->bn) c->bn = bwd_split_depth(c->qk_depth) ? 64 : 128;
    if (!c->stages) c->stages = 2;
}

static int bad(char *err, size_t n, const char *field, int v, const char *allowed)
{
    return plan_refuse(err, n, "%s: %d is not allowed for mha-bwd on sm90a; %s", field, v, allowed);
}

static int bwd_check(const Config *c, char *err, size_t n)
{
    if (c->score_mod)
        return plan_refuse(err, n, "mod: a score_mod has no derivative the backward could use; mha-bwd refuses it "
                           "(train with the built-in masks and sinks, or differentiate the mod yourself)");
    if (c->dtype != DT_BF16 && c->dtype != DT_FP16)
        return plan_refuse(err, n, "dtype: %s is not allowed for mha-bwd on sm90a; use bf16 or fp16",
                           dtype_name[c->dtype]);
    if (c->qk_depth != c->ov_depth)
        return plan_refuse(err, n, "qk/ov: %d/%d is not allowed for mha-bwd on sm90a; the depths must be equal",
                           c->qk_depth, c->ov_depth);
    if (c->qk_depth != 64 && c->qk_depth != 128 && c->qk_depth != 256)
        return plan_refuse(err, n, "depth: %d is not allowed for mha-bwd on sm90a; use 64, 128 or 256", c->qk_depth);
    if (c->swizzle != 128) return bad(err, n, "swizzle", c->swizzle, "use 128");
    if (bwd_split_depth(c->qk_depth)) {
        if (c->bm != 64)
            return bad(err, n, "bm", c->bm, "with depth 256 use 64 (the Q and dO rings of 64 x 256 fill the smem)");
        if (c->bn != 64)
            return bad(err, n, "bn", c->bn, "with depth 256 use 64 (K and V of 64 x 256 beside the rings fill the smem)");
    } else {
        if (c->bm != 64 && c->bm != 128) return bad(err, n, "bm", c->bm, "use 64 or 128 query rows per m-block");
        if (c->bn != 128)
            return bad(err, n, "bn", c->bn, "use 128 keys (64 per consumer warpgroup; with one consumer the dQ tile does "
                       "not fit its registers beside dK and dV)");
    }
    if (c->tail_split && (bwd_split_depth(c->qk_depth) || c->deterministic || c->varlen))
        return plan_refuse(err, n, "tail_split: 1 is not allowed for mha-bwd on sm90a with %s; the split of the last "
                           "wave's kv tiles sums dK, dV partials in arrival order through the dQ writer's layout "
                           "(depth <= 128, dense, deterministic=0)", bwd_split_depth(c->qk_depth) ? "depth > 128"
                           : c->deterministic ? "deterministic=1" : "varlen=1");
    int tm, tn, dq_n;
    if (bwd_dq_split(c->bm, c->bn, c->qk_depth, &tm, &tn, &dq_n))
        return bad(err, n, "bm", c->bm, "with bm 128 use bn 128: each consumer takes 64 rows of the dQ block");
    int need = bwd_consumer_need(c->bm, c->qk_depth);
    if (need > BWD_CONSUMER_REGS)
        return plan_refuse(err, n, "bm: %d is not allowed for mha-bwd on sm90a with depth %d; a consumer thread would "
                           "need about %d registers (dK + dV, S^T + dP^T and %d more), over its %d: use bm 64",
                           c->bm, c->qk_depth, need, BWD_REG_OVERHEAD, BWD_CONSUMER_REGS);
    if (c->stages < 1 || c->stages > 4) return bad(err, n, "stages", c->stages, "use 1..4 (Q and dO ring slots)");
    if (c->sink)
        return plan_refuse(err, n, "sink: not a word of mha-bwd; the sink enters through mha-bwd-pre (the LSE it "
                           "writes) and its gradient through mha-bwd-dq");
    if (c->cta_pair == 2)
        return plan_refuse(err, n, "cta: 2 (the CTA pair, tcgen05 cta_group::2) is an sm100a form of mha-bwd; sm90a takes "
                           "cta=1");
    Config d;
    config_init(&d);
    if (c->qtiles || (c->cta_pair && c->cta_pair != 1) || c->rescale != d.rescale || c->exp2_poly != d.exp2_poly || c->rope_split ||
        c->pingpong != d.pingpong || c->persistent != d.persistent)
        return plan_refuse(err, n, "mha-bwd: qtiles cta rescale poly rope_split pingpong persistent are forward "
                           "words; the backward takes bm bn stages (and mask, group, varlen)");
    return 0;
}

/* Shared memory of split_depth 0: dS^T stages and the dQ block the writer reduces. */
static void bwd_smem_keys(Plan *p, Sm90BwdPlan *s)
{
    char what[80];
    snprintf(what, sizeof what, "dS^T: %d stages x %u B (%d keys x %d queries, MN-major)", s->ds_stages,
             s->ds_stage_bytes, p->bn, p->bm);
    s->off_ds = plan_smem(p, "ds", s->ds_stage_bytes * (uint32_t)s->ds_stages, 1024, what);
    snprintf(what, sizeof what, "dQ block f32 %dx%d, float4 [warpgroup][reg/4][thread]", p->bm, p->qk);
    s->off_dq = plan_smem(p, "dq", s->dq_bytes, 16, what);
}

/* Shared memory of split_depth 1: P and dS, [query row][bn keys], ds_stages each. */
static void bwd_smem_depth(Plan *p, Sm90BwdPlan *s)
{
    char what[80];
    snprintf(what, sizeof what, "P: %d stages x %u B (%d queries x %d keys, SW128)", s->ds_stages, s->ds_stage_bytes,
             p->bm, p->bn);
    s->off_p = plan_smem(p, "p", s->ds_stage_bytes * (uint32_t)s->ds_stages, 1024, what);
    snprintf(what, sizeof what, "dS: %d stages x %u B (%d queries x %d keys, SW128)", s->ds_stages, s->ds_stage_bytes,
             p->bm, p->bn);
    s->off_ds = plan_smem(p, "ds", s->ds_stage_bytes * (uint32_t)s->ds_stages, 1024, what);
}

static void bwd_notes_keys(Plan *p, const Sm90BwdPlan *s)
{
    int d = p->qk;
    plan_note(p, "sdp wgmma", "S^T = K Q^T, dP^T = V dO^T: m64n%dk16 SS x %d each per consumer", p->bm, s->steps_d);
    plan_note(p, "dkv wgmma", "dV += P^T dO, dK += dS^T Q: m64n%dk16 RS (B MN-major) x %d each", d, s->steps_m);
    plan_note(p, "dq wgmma", "dQ = dS K: m64n%dk16 SS, A and B MN-major (tnsp 1, 1) x %d; tiles %dx%d of the block",
              s->dq_n, s->steps_n, s->dq_tiles_m, s->dq_tiles_n);
    plan_note(p, "registers", "per consumer thread: dK %d + dV %d, S^T %d + dP^T %d f32, P^T %d + dS^T %d packed%s, dQ %d",
              s->kv_regs, s->kv_regs, s->sdp_regs, s->sdp_regs, s->p_regs, s->p_regs,
              s->ds_packed_p && p->cfg.dtype != DT_FP16 ? " (+ P fp16 copy, the same)" : "", s->dq_regs);
    plan_note(p, "order", "S^T, dP^T; wait S; P; dV (before the dP wait: ptxas cannot hoist it over the ex2s); wait "
              "dP; dS = P (dP - D), P from %s; dK; dS^T to smem; dQ", s->ds_packed_p ? "an fp16 copy of P (bm 128)" : "f32 S^T");
    plan_note(p, "dq", "the writer adds the %u B block with one cp.reduce.async.bulk .add.f32 per m-block", s->dq_bytes);
}

static void bwd_notes_depth(Plan *p, const Sm90BwdPlan *s)
{
    plan_note(p, "sdp wgmma", "S = Q K^T, dP = dO V^T: m64n%dk16 SS x %d each per consumer (its %d keys)", s->keys_wg,
              s->steps_d, s->keys_wg);
    plan_note(p, "dkv wgmma", "dV += P^T dO, dK += dS^T Q: m64n%dk16 SS, A and B MN-major (tnsp 1, 1) x %d each; "
              "consumer w: depth columns %d w..", s->kv_cols, s->steps_m, s->kv_cols);
    plan_note(p, "dq wgmma", "dQ = dS K: m64n%dk16 SS, A K-major, B MN-major (tnsp 0, 1) x %d; tiles %dx%d of the block",
              s->dq_n, s->steps_n, s->dq_tiles_m, s->dq_tiles_n);
    plan_note(p, "registers", "per consumer thread: dK %d + dV %d, S %d + dP %d f32, P %d + dS %d packed, dQ %d",
              s->kv_regs, s->kv_regs, s->sdp_regs, s->sdp_regs, s->p_regs, s->p_regs, s->dq_regs);
    plan_note(p, "order", "S, dP; wait S; P to smem; named barrier p_ready; dV; wait dP; dS = P (dP - D) to smem "
              "(dV runs); named barrier ds_ready; dQ, dK; wait dQ; dQ out; wait all; slots free");
    plan_note(p, "dq", "each consumer adds its %dx%d dQ tile from registers: %d red.global.add.v4.f32 per thread, "
              "the block layout of mha_bwd.h", BWD_MMA_M, s->dq_n, s->dq_regs / 4);
}

/* deterministic=1: the turn counters' parameter, the adders, the consumers' named barriers (split_depth). */
static void bwd_plan_det(Plan *p, Sm90BwdPlan *s)
{
    s->det = 1;
    s->det_arrivals = s->split_depth ? s->consumers : 1;
    plan_param_scalar(p, SCALAR_DQ_SEM, PARAM_U64);
    if (s->split_depth)
        for (int w = 0; w < s->consumers; w++) {
            char name[24];
            snprintf(name, sizeof name, "dq_turn%d", w);
            int id = plan_bar(p, name, BWD_WG, "deterministic: the consumer's turn to add its dQ tile, and its adds done");
            if (!w) s->bar_turn0 = id;
        }
    plan_note(p, "deterministic", "a dQ block takes its kv blocks' adds in kv block order: counter dq_sem[row / %d]; m-blocks descend; "
              "kv block n waits for %d x its rank n - n_first(m) (ld.acquire.gpu, nanosleep %d..%d ns)", p->bm,
              s->det_arrivals, BWD_DET_SLEEP_NS, BWD_DET_SLEEP_MAX_NS);
    plan_note(p, "det release", "%s, then red.release.gpu +1%s",
              s->split_depth ? "after its reds, a named barrier of the consumer (dq_turn w)"
                             : "after the reduction, cp.async.bulk.wait_group 0 (its writes done), fence.proxy.async.global",
              s->split_depth ? " by the consumer's thread 0" : "");
}

/* tail_split=1: the split's launch arguments and the partials' slot (mha_bwd.h "Tail split"). */
static void bwd_plan_tail(Plan *p, Sm90BwdPlan *s)
{
    s->tail = 1;
    s->tail_slot_bytes = bwd_tail_slot_bytes(p->bn, p->qk);
    plan_param_scalar(p, SCALAR_TAIL_FIRST, PARAM_U32);
    plan_param_scalar(p, SCALAR_TAIL_PARTS, PARAM_U32);
    plan_param_scalar(p, SCALAR_TAIL_WS, PARAM_U64);
    plan_note(p, "tail split", "CTA i >= tail_first (tail_parts > 0): part (i - first) %% parts of tile first + (i - "
              "first) / parts, iterations [part x iters / parts, (part + 1) x iters / parts)");
    plan_note(p, "tail sums", "parts < parts-1: red.add f32 dK, dV (%u B a tile) into tail_ws, release +1 a consumer; "
              "the last: waits for %d x (parts - 1), adds, stores", s->tail_slot_bytes, s->consumers);
}

static int bwd_plan(const Config *c, Plan *p, char *err, size_t n)
{
    (void)err, (void)n;
    Sm90BwdPlan *s = sm90bwd_mut(p);
    plan_geometry(c, p);
    int d = p->qk;
    p->rows_per_cta = p->bn; /* keys */
    p->heads_per_cta = c->group;
    s->split_depth = bwd_split_depth(d);
    s->consumers = bwd_consumers(p->bn, d);
    s->keys_wg = s->split_depth ? p->bn / s->consumers : BWD_MMA_M;
    s->kv_cols = s->split_depth ? d / s->consumers : d;
    s->producer_regs = BWD_PRODUCER_REGS;
    s->consumer_regs = BWD_CONSUMER_REGS;
    p->threads = BWD_WG * (1 + s->consumers);
    p->entry_regs = 65536 / p->threads > 255 ? 255 : (65536 / p->threads) / 8 * 8;
    /* the S / dP accumulators: m64 x n bm (keys in rows) or m bm (= 64) x n keys_wg */
    s->sdp_regs = s->split_depth ? s->keys_wg / 2 : p->bm / 2;
    s->p_regs = s->sdp_regs / 2;
    s->kv_regs = s->kv_cols / 2;
    bwd_dq_split(p->bm, p->bn, d, &s->dq_tiles_m, &s->dq_tiles_n, &s->dq_n);
    s->dq_regs = s->dq_n / 2;
    s->steps_d = d / 16, s->steps_m = p->bm / 16, s->steps_n = p->bn / 16;
    s->ds_stages = 2;
    s->ds_packed_p = !s->split_depth && p->bm >= 128;

    uint32_t eb = (uint32_t)p->elem_bytes, chunks = (uint32_t)p->qk_chunks;
    s->kv_chunk_bytes = (uint32_t)p->bn * SM90_CHUNK_BYTES;
    s->q_chunk_bytes = (uint32_t)p->bm * SM90_CHUNK_BYTES;
    s->q_stage_bytes = s->q_chunk_bytes * chunks;
    /* dS^T: one 64-query atom of bn key rows per 64 queries; split_depth: bm query rows of bn keys (one chunk) */
    s->ds_atom_bytes = s->split_depth ? (uint32_t)p->bm * SM90_CHUNK_BYTES : (uint32_t)p->bn * SM90_CHUNK_BYTES;
    s->ds_stage_bytes = s->split_depth ? s->ds_atom_bytes : s->ds_atom_bytes * (uint32_t)(p->bm / BWD_MMA_M);
    s->dq_bytes = s->split_depth ? 0 : (uint32_t)(p->bm * d) * BWD_F32;
    s->vec_stage_bytes = (uint32_t)p->bm * BWD_F32;
    s->tx_kv = 2u * (uint32_t)(p->bn * d) * eb;
    s->tx_q = (uint32_t)(p->bm * d) * eb + s->vec_stage_bytes;
    s->tx_do = s->tx_q;

    char what[80];
    snprintf(what, sizeof what, "K tile %dx%d (%u B chunks); dK staged here at the end", p->bn, d, s->kv_chunk_bytes);
    s->off_k = plan_smem(p, "k", s->kv_chunk_bytes * chunks, 1024, what);
    snprintf(what, sizeof what, "V tile %dx%d; dV staged here at the end", p->bn, d);
    s->off_v = plan_smem(p, "v", s->kv_chunk_bytes * chunks, 1024, what);
    snprintf(what, sizeof what, "Q ring: %d stages x %u B (%dx%d)", p->stages, s->q_stage_bytes, p->bm, d);
    s->off_q = plan_smem(p, "q", s->q_stage_bytes * (uint32_t)p->stages, 1024, what);
    snprintf(what, sizeof what, "dO ring: %d stages x %u B (%dx%d)", p->stages, s->q_stage_bytes, p->bm, d);
    s->off_do = plan_smem(p, "do", s->q_stage_bytes * (uint32_t)p->stages, 1024, what);
    if (s->split_depth) bwd_smem_depth(p, s);
    else bwd_smem_keys(p, s);
    s->off_nl2 = plan_smem(p, "nl2", s->vec_stage_bytes * (uint32_t)p->stages, 16, "nl2 ring: -LSE log2 e per query row");
    s->off_dpsum = plan_smem(p, "dpsum", s->vec_stage_bytes * (uint32_t)p->stages, 16, "D ring: rowsum(dO O)");

    s->slot_empty_arrivals = 4 * s->consumers;
    s->dq_full_arrivals = s->split_depth ? 0 : BWD_WG * s->consumers;
    s->bar_kv_full = plan_mbar(p, "bar_kv_full", 1, 1, "K and V landed (1 arrival + tx)");
    s->bar_q_full = plan_mbar(p, "bar_q_full", p->stages, 1, "per stage: Q and nl2 landed (1 arrival + tx)");
    snprintf(what, sizeof what, "per stage: Q slot free (%d arrivals: consumer warps)", s->slot_empty_arrivals);
    s->bar_q_empty = plan_mbar(p, "bar_q_empty", p->stages, s->slot_empty_arrivals, what);
    s->bar_do_full = plan_mbar(p, "bar_do_full", p->stages, 1, "per stage: dO and D landed (1 arrival + tx)");
    snprintf(what, sizeof what, "per stage: dO slot free (%d arrivals)", s->slot_empty_arrivals);
    s->bar_do_empty = plan_mbar(p, "bar_do_empty", p->stages, s->slot_empty_arrivals, what);
    if (!s->split_depth) {
        snprintf(what, sizeof what, "dQ block in smem (%d arrivals: consumer threads)", s->dq_full_arrivals);
        s->bar_dq_full = plan_mbar(p, "bar_dq_full", 1, s->dq_full_arrivals, what);
        s->bar_dq_empty = plan_mbar(p, "bar_dq_empty", 1, 1, "dQ block read by its bulk reduction (the writer)");
    }

    plan_role(p, "producer", 0, 4, s->producer_regs,
              s->split_depth ? "warp 0: TMA loads (K, V; Q+nl2, dO+D rings)"
                             : "warp 0: TMA loads (K, V; Q+nl2, dO+D rings); warp 1: dQ writer");
    for (int w = 0; w < s->consumers; w++) {
        char name[24], job[96];
        snprintf(name, sizeof name, "consumer%d", w);
        if (s->split_depth)
            snprintf(job, sizeof job, "S dP of keys %d..%d; dK dV dQ of depth %d..%d (SS); dQ red, dK dV out",
                     s->keys_wg * w, s->keys_wg * w + s->keys_wg - 1, s->kv_cols * w, s->kv_cols * w + s->kv_cols - 1);
        else
            snprintf(job, sizeof job, "keys %d..%d: S^T dP^T dQ (SS), dV dK (RS), dK dV out", 64 * w, 64 * w + 63);
        plan_role(p, name, 4 + 4 * w, 4, s->consumer_regs, job);
    }
    if (s->split_depth)
        s->bar_p = plan_bar(p, "p_ready", BWD_WG * s->consumers, "every consumer's P of this m-block is in smem");
    s->bar_ds = plan_bar(p, "ds_ready", BWD_WG * s->consumers,
                         s->split_depth ? "every consumer's dS of this m-block is in smem"
                                        : "every consumer's dS^T of this m-block is in smem");
    s->bar_kv_done = plan_bar(p, "kv_done", BWD_WG * s->consumers, "no wgmma reads K or V any more (epilogue)");
    for (int w = 0; w < s->consumers; w++) {
        char name[24];
        snprintf(name, sizeof name, "epilogue%d", w);
        int id = plan_bar(p, name, BWD_WG, "consumer's dK, dV rows staged, ready for the TMA stores");
        if (!w) s->bar_epi0 = id;
    }

    uint32_t ce = (uint32_t)p->chunk_elems, kv_box = (uint32_t)(s->split_depth ? p->bn : BWD_MMA_M);
    plan_map(p, "q", TENSOR_Q, c->dtype, (uint32_t)d, ce, (uint32_t)p->bm, 1, 128);
    plan_map(p, "k", TENSOR_K, c->dtype, (uint32_t)d, ce, (uint32_t)p->bn, 1, 128);
    plan_map(p, "v", TENSOR_V, c->dtype, (uint32_t)d, ce, (uint32_t)p->bn, 1, 128);
    plan_map(p, "do", TENSOR_DO, c->dtype, (uint32_t)d, ce, (uint32_t)p->bm, 1, 128);
    plan_map(p, "dk", TENSOR_DK, c->dtype, (uint32_t)d, ce, kv_box, 1, 128);
    plan_map(p, "dv", TENSOR_DV, c->dtype, (uint32_t)d, ce, kv_box, 1, 128);
    for (int i = 0; i < p->n_maps; i++) plan_param_map(p, i);
    static const struct { ScalarId s; ParamType t; } params[] = {
        {SCALAR_SEQLEN_Q, PARAM_U32}, {SCALAR_SEQLEN_K, PARAM_U32}, {SCALAR_HEADS_Q, PARAM_U32},
        {SCALAR_BATCH, PARAM_U32},    {SCALAR_SCALE_LOG2, PARAM_F32}, {SCALAR_SCALE, PARAM_F32},
        {SCALAR_DQ_ACCUM, PARAM_U64}, {SCALAR_DPSUM, PARAM_U64},      {SCALAR_NLSE2, PARAM_U64},
        {SCALAR_Q_ROWS, PARAM_U32}};
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) plan_param_scalar(p, params[i].s, params[i].t);
    if (c->varlen) {
        plan_param_scalar(p, SCALAR_CU_SEQLENS_Q, PARAM_U64);
        plan_param_scalar(p, SCALAR_CU_SEQLENS_K, PARAM_U64);
        plan_param_scalar(p, SCALAR_TOTAL_Q, PARAM_U32);
        plan_param_scalar(p, SCALAR_TOTAL_K, PARAM_U32);
        static const ScalarId kv[] = {SCALAR_DK, SCALAR_DK_STRIDE_S, SCALAR_DK_STRIDE_H, SCALAR_DV,
                                      SCALAR_DV_STRIDE_S, SCALAR_DV_STRIDE_H};
        for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) plan_param_scalar(p, kv[i], PARAM_U64);
        plan_note(p, "varlen", "packed [total, heads, depth]; sequence b = rows cu_seqlens[b]..cu_seqlens[b+1]; "
                  "seqlen_q / seqlen_k = the longest; workspace rows padded per sequence (mha_bwd.h)");
        plan_note(p, "varlen dkv", "a consumer's %u dK/dV rows inside the sequence: TMA store; rows past its end: "
                  "st.global, row-masked (a box would write the next sequence's rows)", kv_box);
    }

    if (c->deterministic) bwd_plan_det(p, s);
    if (c->tail_split) bwd_plan_tail(p, s);
    if (c->softcap) {
        plan_param_scalar(p, SCALAR_SOFTCAP_SCALE, PARAM_F32);
        plan_note(p, "softcap", "s = cap tanh(u / cap): t = tanh(q.k softcap_scale), P = exp2(t scale_log2 + nl2) "
                  "(scale_log2 = cap log2 e); dS = P (1 - t^2) (dP - D): the factor folded into dS's P");
    }
    plan_note(p, "tile", "CTA = %d keys of one kv head; loops over its %d query heads x the m-blocks of %d rows that "
              "see a key", p->bn, c->group, p->bm);
    if (s->split_depth) bwd_notes_depth(p, s);
    else bwd_notes_keys(p, s);
    plan_note(p, "tx bytes", "kv %u once, q %u and do %u per m-block (tile + %u B of nl2 / D)", s->tx_kv, s->tx_q,
              s->tx_do, s->vec_stage_bytes);
    plan_note(p, "grid", "ceil(seqlen_k / %d) x heads_kv x batch CTAs, kv blocks ascending inside a head (varlen: "
              "seqlen_k = max_seqlen_k)", p->bn);
    return 0;
}

const Family sm90_mha_bwd = {KIND_MHA_BWD, bwd_defaults, bwd_check, bwd_plan, sm90_emit_mha_bwd};
