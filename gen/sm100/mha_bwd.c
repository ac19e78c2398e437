/* sm100/mha_bwd.c - the sm_100a attention backward's main kernel (kind mha-bwd; FlashAttention-4's backward
 * with every accumulator in Tensor Memory; plan in sm100/plan_bwd.c, docs/kernels/mha-bwd.md).
 *
 * One CTA per (kv block of bn = 128 keys, kv head, batch); the m-block range and the iterations
 * it = g x nm + (m - m_begin) over the group's query heads come from bwd_tile_coords (mha_bwd.c), as on sm90a.
 * Roles (plan roles):
 *   load     warp 0, one thread: K and V once, then per iteration Q + nl2 and dO + D into the rings
 *   mma      warp 1 (TMEM alloc / dealloc), one elected thread, per iteration:
 *              S^T = K Q^T, dP^T = V dO^T              -> TMEM (lanes = keys)
 *              dV += P^T dO  (P^T from smem)           -> TMEM, the whole loop
 *              dK += dS^T Q, dQ = dS K (or dQ^T = K^T dS^T, plan dq_t) -> TMEM
 *   compute  warps 4..7, thread t = TMEM lane t = key n0 + t: P = exp2(S scale_log2 + nl2) (masked blocks:
 *            -inf first), P^T to smem and the f32 P over S^T in TMEM; dS = P (dP - D) to smem; dQ from TMEM into the fp32 workspace
 *            (red.global.add); after the loop dK x scale and dV from TMEM to global memory.
 * Hand-offs are mbarriers (plan barriers): the MMA's commits (s_full, dp_full, dq_full, the ring slots'
 * empty barriers, kv_done) and the compute threads' arrivals (p_full, ds_full, the slots' nl2 / D reads).
 */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../mha_bwd.h"
#include "../ops.h"
#include "../ops_bwd.h"
#include "../ops_copy.h"
#include "../softmax.h"
#include "bwd100.h"
#include "sm100.h"

enum { NAME = 32, ROW_BYTES = 128, K16_ROWS = 16, UNIT_ELEMS = 8 /* 16 bytes of 16-bit elements */ };

/* ------------------------------------------------------------------ */
/* prologue                                                             */
/* ------------------------------------------------------------------ */

static void emit_barrier_init(Emit *e)
{
    const Plan *p = e->p;
    char lbl[NAME];
    static const char *const one[] = {"bar_kv_full", "bar_s_full", "bar_dp_full", "bar_p_full", "bar_ds_full",
                                      "bar_dq_full", "bar_kv_done"};
    /* the pair adds each CTA's nl2 / D barriers (plan note pair sync) */
    static const char *const ring[] = {"bar_q_full", "bar_q_empty", "bar_do_full", "bar_do_empty", "bar_q_vec",
                                       "bar_do_vec"};
    int rings = sm100bwd_of(p)->pair == 2 ? 6 : 4;
    Reg b = mbar_init_begin(e, lbl, sizeof lbl, "prologue: mbarrier init (thread 0)");
    for (size_t k = 0; k < sizeof one / sizeof one[0]; k++) {
        Mbar m = mbar_plan(e, one[k]);
        mbar_init(e, b, &m, 0);
    }
    for (int i = 0; i < p->stages; i++) {
        emit_note(e, "plan: ring stage %d", i);
        for (int k = 0; k < rings; k++) {
            Mbar m = mbar_plan(e, ring[k]);
            mbar_init(e, b, &m, i);
        }
    }
    mbar_init_end(e, lbl);
}

/* The MMA warp allocates the plan's TMEM columns; every thread then syncs (barriers and the base visible). */
static void emit_tmem_alloc(Emit *e)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    char lbl[NAME];
    Reg pr = reg_pred(e, "p_not_mma");
    emit_section(e, "prologue: TMEM alloc (warp %d, %d columns), then the CTA syncs", s->warp_mma, p->tmem_cols);
    emit(e, "setp.ne.u32 %s, %%warp, %d;", R(e, pr), s->warp_mma);
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, lbl, sizeof lbl, "alloc_done"));
    Reg slot = smem_reg(e, "tmem_slot", s->off_tmem_slot);
    op_tmem_alloc(e, s->pair, slot, p->tmem_cols);
    op_tmem_relinquish(e, s->pair);
    emit_label(e, lbl);
    op_tc_fence_before(e);
    if (s->pair == 2) {
        emit_note(e, "the pair: both CTAs' barriers are initialised and both allocated TMEM (cta_group::2) before "
                  "either signals the other");
        op_cluster_sync(e);
    } else {
        op_bar_sync(e, 0, p->threads);
    }
    op_tc_fence_after(e);
}

/* ------------------------------------------------------------------ */
/* load                                                                 */
/* ------------------------------------------------------------------ */

static void emit_load_pair(Emit *e);

static void emit_load(Emit *e)
{
    const Sm100BwdPlan *s = sm100bwd_of(e->p);
    const BwdLoads l = BWD_LOADS_OF(s);
    char section[96];
    if (s->pair == 2) {
        emit_load_pair(e);
        return;
    }
    snprintf(section, sizeof section, "role load (warp %d, one thread): K and V, then the Q / dO rings", s->warp_load);
    bwd_emit_loads(e, &l, section, 1);
}

/* The pair: `boxes` TMA boxes of map into this CTA's smem at dst0 + i dst_step, rows row + i row_step, column col,
 * completing on the even CTA's barrier lbar (both CTAs' bytes are counted there: plan note pair sync). */
static void pair_boxes(Emit *e, Reg map, Reg dst0, int boxes, uint32_t dst_step, Reg row, int row_step, Reg col,
                       Reg head, Reg lbar)
{
    Reg dst = reg_b32(e, "ld_dst"), r = reg_b32(e, "ld_r");
    for (int i = 0; i < boxes; i++) {
        emit(e, "add.u32 %s, %s, %u;", R(e, dst), R(e, dst0), (uint32_t)i * dst_step);
        emit(e, "add.u32 %s, %s, %d;", R(e, r), R(e, row), i * row_step);
        op_tma_load_4d_pair(e, dst, map, col, r, head, reg_find(e, "b_map"), lbar);
    }
}

/* The pair's full barrier at bar: the even CTA expects tx bytes (both CTAs'); lbar = its shared::cluster address. */
static void pair_expect(Emit *e, Reg bar, Reg lbar, uint32_t tx)
{
    op_mbar_expect_tx_if(e, reg_find(e, "is_lead"), bar, tx);
    op_mapa(e, lbar, bar, reg_find(e, "lead_rank"));
}

/* This CTA's Q or dO stage (plan note pair halves): QR = query rows half_m r.. of every depth chunk, QC = depth
 * chunk r of the bm rows; then its own nl2 or D on its vec barrier. */
static void pair_stage(Emit *e, Reg map, uint32_t tile, uint32_t full, uint32_t vec, uint32_t vtile, const char *vsrc)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    Reg stage = reg_find(e, "ld_stage"), bar = reg_b32(e, "ld_bar"), lbar = reg_b32(e, "ld_lbar");
    Reg base = reg_b32(e, "ld_dst0"), row = reg_find(e, "ld_row"), r = reg_b32(e, "ld_rr"), col = reg_b32(e, "ld_col");
    Reg hq = reg_find(e, "ld_hq"), vdst = reg_b32(e, "ld_vdst"), src = reg_b64(e, "ld_src");
    smem_indexed(e, bar, full, stage, MBAR_BYTES);
    pair_expect(e, bar, lbar, s->tx_q_pair);
    smem_indexed(e, base, tile, stage, s->q_stage_bytes);
    emit(e, "mad.lo.u32 %s, %%cta_rank, %d, %s;", R(e, r), s->half_m, R(e, row));
    for (int c = 0; c < p->qk_chunks; c++) {
        emit(e, "mov.u32 %s, %d;", R(e, col), c * p->chunk_elems);
        Reg d = reg_b32(e, "ld_dc");
        emit(e, "add.u32 %s, %s, %u;", R(e, d), R(e, base), (uint32_t)c * s->qr_chunk_bytes);
        pair_boxes(e, map, d, 1, 0, r, 0, col, hq, lbar);
    }
    emit(e, "mul.lo.u32 %s, %%cta_rank, %d;", R(e, col), p->chunk_elems);
    emit(e, "add.u32 %s, %s, %u;", R(e, base), R(e, base), s->off_qc);
    pair_boxes(e, map, base, p->bm / s->half_m, (uint32_t)s->half_m * ROW_BYTES, row, s->half_m, col, hq, lbar);
    smem_indexed(e, bar, vec, stage, MBAR_BYTES);
    op_mbar_expect_tx(e, bar, s->tx_vec);
    smem_indexed(e, vdst, vtile, stage, s->vec_stage_bytes);
    emit(e, "add.s64 %s, %%%s, %%ld_ws;", R(e, src), vsrc);
    op_bulk_load(e, vdst, src, s->vec_stage_bytes, bar);
}

/* The pair's load role (one thread): K, V (this CTA's keys) and KT (depth chunk r of the pair's keys) once, then
 * per iteration its Q and dO stage halves; then it waits until the MMA's commits released every slot, so no
 * commit lands on a CTA that has left. */
static void emit_load_pair(Emit *e)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    char l_loop[NAME], l_done[NAME];
    Reg pr = reg_pred(e, "ld_p"), bar = reg_b32(e, "ld_bar"), lbar = reg_b32(e, "ld_lbar"), dst = reg_b32(e, "ld_dst0");
    Reg row = reg_b32(e, "ld_row"), col = reg_b32(e, "ld_col"), stage = reg_b32(e, "ld_stage");
    Reg phase = reg_b32(e, "ld_phase"), par = reg_b32(e, "ld_par"), itr = reg_b32(e, "ld_it"), m = reg_b32(e, "ld_m");
    Reg hq = reg_b32(e, "ld_hq"), ws = reg_b64(e, "ld_ws"), kvh = reg_find(e, "kvh");
    emit_section(e, "role load (warp %d, one thread): K, V, KT, then this CTA's Q / dO halves (plan note pair halves)",
                 s->warp_load);
    emit(e, "setp.ne.u32 %s, %%lane, 0;", R(e, pr));
    emit(e, "@%s bra $exit;", R(e, pr));
    emit_note(e, "plan note pair sync: kv %u bytes of both CTAs on the even CTA's kv_full", s->tx_kv_pair);
    mbar_at(e, bar, s->bar_kv_full, 0);
    pair_expect(e, bar, lbar, s->tx_kv_pair);
    emit(e, "add.u32 %s, %%n0, %%k_start;", R(e, row));
    const struct { const char *map; uint32_t off; } kv[2] = {{"tmap_k", s->off_k}, {"tmap_v", s->off_v}};
    for (int k = 0; k < 2; k++)
        for (int c = 0; c < p->qk_chunks; c++) {
            emit(e, "mov.u32 %s, %d;", R(e, col), c * p->chunk_elems);
            smem_at(e, dst, kv[k].off + (uint32_t)c * s->kv_chunk_bytes);
            pair_boxes(e, reg_find(e, "%s", kv[k].map), dst, 1, 0, row, 0, col, kvh, lbar);
        }
    emit_note(e, "KT: K's depth chunk r of the pair's %d keys (dQ^T's A)", s->pair_keys);
    emit(e, "mul.lo.u32 %s, %%cta_rank, %d;", R(e, col), p->chunk_elems);
    emit(e, "mul.lo.u32 %s, %%cta_rank, %d;", R(e, itr), p->bn);
    emit(e, "sub.u32 %s, %s, %s;", R(e, row), R(e, row), R(e, itr));
    smem_at(e, dst, s->off_kt);
    pair_boxes(e, reg_find(e, "tmap_k"), dst, s->pair, s->kv_chunk_bytes, row, p->bn, col, kvh, lbar);
    ring_reset(e, stage, phase);
    emit(e, "mov.u32 %s, 0;", R(e, itr));
    bwd_load_iter_top(e, l_loop, l_done, sizeof l_loop, (Reg[]){pr, itr, m, hq, ws, row, par, phase});
    const struct { const char *what, *map, *vsrc; uint32_t empty, full, tile, vec, vtile; } t[2] = {
        {"Q + nl2", "tmap_q", "nlse2", s->bar_q_empty, s->bar_q_full, s->off_q, s->bar_q_vec, s->off_nl2},
        {"dO + D", "tmap_do", "dpsum", s->bar_do_empty, s->bar_do_full, s->off_do, s->bar_do_vec, s->off_dpsum}};
    for (int k = 0; k < 2; k++) {
        emit_note(e, "%s: wait for this CTA's slot; the tiles on the even CTA's full barrier (%u B), the vector on "
                  "this CTA's", t[k].what, s->tx_q_pair);
        smem_indexed(e, bar, t[k].empty, stage, MBAR_BYTES);
        op_mbar_wait(e, bar, par);
        pair_stage(e, reg_find(e, "%s", t[k].map), t[k].tile, t[k].full, t[k].vec, t[k].vtile, t[k].vsrc);
    }
    ring_advance(e, stage, phase, p->stages);
    emit(e, "add.u32 %s, %s, 1;", R(e, itr), R(e, itr));
    emit(e, "bra.uni %s;", l_loop);
    emit_label(e, l_done);
    emit_note(e, "the pair: wait until the MMA's commits released every slot (they arrive from the even CTA)");
    for (int i = 0; i < p->stages; i++) {
        ring_free_parity(e, par, phase);
        for (int k = 0; k < 2; k++) {
            smem_indexed(e, bar, t[k].empty, stage, MBAR_BYTES);
            op_mbar_wait(e, bar, par);
        }
        ring_advance(e, stage, phase, p->stages);
    }
    emit(e, "bra.uni $exit;");
}

/* ------------------------------------------------------------------ */
/* mma                                                                  */
/* ------------------------------------------------------------------ */

/* D (+)= A B over `steps` K steps of 16: the descriptors' low words a_lo, b_lo (start fields of K step 0) advance
 * by a_step(kk), b_step(kk) (start-field units); acc is the enable-input-d of step 0 (REG_NONE: 1). */
typedef uint32_t (*StepFn)(const Plan *p, int kk, uint32_t chunk_bytes);

static uint32_t kmajor_step(const Plan *p, int kk, uint32_t chunk_bytes)
{
    (void)p;
    return op_desc_kstep(kk, ROW_BYTES / (K16_ROWS * 2), K16_ROWS * 2, chunk_bytes);
}

static uint32_t mn_step(const Plan *p, int kk, uint32_t chunk_bytes)
{
    (void)p, (void)chunk_bytes;
    return op_desc_delta((uint32_t)(kk * K16_ROWS * ROW_BYTES));
}

static void mma_steps(Emit *e, Reg d, Reg idesc, int steps, Reg a_lo, StepFn as, uint32_t ac, Reg b_lo, StepFn bs,
                      uint32_t bc, Reg acc)
{
    const Plan *p = e->p;
    Reg alo = reg_b32(e, "mm_alo"), blo = reg_b32(e, "mm_blo"), ad = reg_b64(e, "mm_ad"), bd = reg_b64(e, "mm_bd");
    for (int kk = 0; kk < steps; kk++) {
        emit(e, "add.u32 %s, %s, %u;", R(e, alo), R(e, a_lo), as(p, kk, ac));
        emit(e, "add.u32 %s, %s, %u;", R(e, blo), R(e, b_lo), bs(p, kk, bc));
        emit(e, "mov.b64 %s, {%s, %%mm_hi};", R(e, ad), R(e, alo));
        emit(e, "mov.b64 %s, {%s, %%mm_hi};", R(e, bd), R(e, blo));
        op_umma_ss(e, sm100bwd_of(p)->pair, 0, d, ad, bd, idesc, kk ? REG_NONE : acc);
    }
}

/* Commit the MMAs issued so far onto bar: the pair's onto bar's offset in both CTAs (mask 0b11). */
static void mma_commit(Emit *e, Reg bar)
{
    const Sm100BwdPlan *s = sm100bwd_of(e->p);
    op_umma_commit(e, s->pair, bar, s->pair == 2 ? reg_find(e, "mm_mask") : REG_NONE);
}

static void mma_wait(Emit *e, Reg bar, Reg par)
{
    op_mbar_wait(e, bar, par);
    op_tc_fence_after(e);
}

static void mma_setup(Emit *e)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    emit(e, "mov.u32 %s, 0x%08X;", R(e, reg_b32(e, "mm_id_sdp")), s->idesc_sdp);
    emit(e, "mov.u32 %s, 0x%08X;", R(e, reg_b32(e, "mm_id_dkv")), s->idesc_dkv);
    emit(e, "mov.u32 %s, 0x%08X;", R(e, reg_b32(e, "mm_id_dq")), s->idesc_dq);
    emit_note(e, "every descriptor's high word: SBO = 8 rows of 128 B, SW128 (K- and MN-major alike)");
    emit(e, "mov.u32 %s, 0x%08X;", R(e, reg_b32(e, "mm_hi")), (uint32_t)(s->desc_kmaj >> 32));
    emit_note(e, "enable-input-d: false overwrites (first K step); ptxas takes 1 but not 0 as an immediate");
    emit(e, "mov.pred %s, 0;", R(e, reg_pred(e, "mm_false")));
    if (s->pair == 2) {
        emit_note(e, "the pair: commits arrive on the barrier at the same offset in both CTAs (mask 0b11)");
        emit(e, "mov.b16 %s, %d;", reg(e, "b16", "mm_mask"), (1 << s->pair) - 1);
    }
    op_ld_shared_b32(e, reg_b32(e, "tmem"), reg_find(e, "smem"), s->off_tmem_slot);
    const struct { const char *name; uint32_t col; } tm[] = {
        {"mm_ts", s->tm_s}, {"mm_tdp", s->tm_dp}, {"mm_tdq", s->tm_dq}, {"mm_tdv", s->tm_dv}, {"mm_tdk", s->tm_dk}};
    for (size_t i = 0; i < sizeof tm / sizeof tm[0]; i++)
        emit(e, "add.u32 %s, %%tmem, %u;", R(e, reg_b32(e, "%s", tm[i].name)), tm[i].col);
    Reg a = reg_b32(e, "mm_a");
    const struct { const char *name; uint32_t off; uint64_t desc; } lo[] = {
        {"mm_k", s->off_k, s->desc_kmaj},    {"mm_v", s->off_v, s->desc_kmaj},  {"mm_kmn", s->pair == 2 ? s->off_kt : s->off_k, s->desc_mn_kv},
        {"mm_pt", s->off_p, s->desc_kmaj},   {"mm_dst", s->off_ds, s->desc_kmaj}, {"mm_dsmn", s->pair == 2 ? s->off_dsx : s->off_ds, s->desc_mn_ds}};
    emit_note(e, "descriptor low words of the fixed tiles (start | LBO): K, V K-major; K MN-major (dQ); P^T, dS^T "
              "K-major (dV, dK); dS^T MN-major (dQ)");
    for (size_t i = 0; i < sizeof lo / sizeof lo[0]; i++) {
        smem_at(e, a, lo[i].off);
        op_umma_desc_lo(e, reg_b32(e, "%s", lo[i].name), a, lo[i].desc);
    }
}

static void emit_mma_iteration(Emit *e)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    Reg stage = reg_find(e, "mm_stage"), phase = reg_find(e, "mm_phase"), bar = reg_b32(e, "mm_bar");
    Reg par = reg_b32(e, "mm_par"), acc = reg_pred(e, "mm_acc"), a = reg_b32(e, "mm_a");
    Reg qlo = reg_b32(e, "mm_qlo"), dolo = reg_b32(e, "mm_dolo"), qmn = reg_b32(e, "mm_qmn"), domn = reg_b32(e, "mm_domn");
    Reg f = reg_find(e, "mm_false");
    /* the pair's B operands: Q / dO rows half r (QR, chunk stride qr_chunk_bytes) for S^T, dP^T; depth chunk r (QC) for
     * dK, dV */
    uint32_t qb = s->pair == 2 ? s->qr_chunk_bytes : s->q_chunk_bytes;
    emit(e, "and.b32 %s, %%mm_it, 1;", R(e, par));
    emit(e, "setp.ne.u32 %s, %%mm_it, 0;", R(e, acc));
    const struct { uint32_t off; Reg lo, mn; } qd[2] = {{s->off_q, qlo, qmn}, {s->off_do, dolo, domn}};
    for (int k = 0; k < 2; k++) {
        smem_indexed(e, a, qd[k].off, stage, s->q_stage_bytes);
        op_umma_desc_lo(e, qd[k].lo, a, s->desc_kmaj);
        if (s->pair == 2) emit(e, "add.u32 %s, %s, %u;", R(e, a), R(e, a), s->off_qc);
        op_umma_desc_lo(e, qd[k].mn, a, s->desc_mn_q);
    }

    emit_note(e, "S^T = K Q^T: %d x M%d N%d (plan note sdp mma); the Q slot landed", s->steps_d, 128 * s->pair, p->bm);
    smem_indexed(e, bar, s->bar_q_full, stage, MBAR_BYTES);
    mma_wait(e, bar, phase);
    mma_steps(e, reg_find(e, "mm_ts"), reg_find(e, "mm_id_sdp"), s->steps_d, reg_find(e, "mm_k"), kmajor_step,
              s->kv_chunk_bytes, qlo, kmajor_step, qb, f);
    mbar_at(e, bar, s->bar_s_full, 0);
    mma_commit(e, bar);

    emit_note(e, "dP^T = V dO^T; the dO slot landed");
    smem_indexed(e, bar, s->bar_do_full, stage, MBAR_BYTES);
    mma_wait(e, bar, phase);
    mma_steps(e, reg_find(e, "mm_tdp"), reg_find(e, "mm_id_sdp"), s->steps_d, reg_find(e, "mm_v"), kmajor_step,
              s->kv_chunk_bytes, dolo, kmajor_step, qb, f);
    mbar_at(e, bar, s->bar_dp_full, 0);
    mma_commit(e, bar);

    emit_note(e, "dV += P^T dO: %d x M%d N%d, A K-major (P^T in smem), B MN-major (plan note dkv mma)", s->steps_m,
              128 * s->pair, p->qk);
    mbar_at(e, bar, s->bar_p_full, 0);
    mma_wait(e, bar, par);
    mma_steps(e, reg_find(e, "mm_tdv"), reg_find(e, "mm_id_dkv"), s->steps_m, reg_find(e, "mm_pt"), kmajor_step,
              s->pt_chunk_bytes, domn, mn_step, 0, acc);
    emit_note(e, "the dO slot's MMA reads are done once this commit lands");
    smem_indexed(e, bar, s->bar_do_empty, stage, MBAR_BYTES);
    mma_commit(e, bar);

    emit_note(e, "dK += dS^T Q; then %s (plan note dq mma)", s->dq_t ? "dQ^T = K^T dS^T" : "dQ = dS K");
    mbar_at(e, bar, s->bar_ds_full, 0);
    mma_wait(e, bar, par);
    mma_steps(e, reg_find(e, "mm_tdk"), reg_find(e, "mm_id_dkv"), s->steps_m, reg_find(e, "mm_dst"), kmajor_step,
              s->pt_chunk_bytes, qmn, mn_step, 0, acc);
    smem_indexed(e, bar, s->bar_q_empty, stage, MBAR_BYTES);
    mma_commit(e, bar);
    if (s->dq_t)
        mma_steps(e, reg_find(e, "mm_tdq"), reg_find(e, "mm_id_dq"), s->steps_n, reg_find(e, "mm_kmn"), mn_step, 0,
                  reg_find(e, "mm_dsmn"), mn_step, 0, f);
    else
        mma_steps(e, reg_find(e, "mm_tdq"), reg_find(e, "mm_id_dq"), s->steps_n, reg_find(e, "mm_dsmn"), mn_step, 0,
                  reg_find(e, "mm_kmn"), mn_step, 0, f);
    mbar_at(e, bar, s->bar_dq_full, 0);
    mma_commit(e, bar);
}

static void emit_mma(Emit *e)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    char l_loop[NAME], l_done[NAME];
    emit_section(e, "role mma (warp %d): one elected thread issues every tcgen05.mma; plan note mma per m-block",
                 s->warp_mma);
    Reg lead = reg_pred(e, "mm_lead"), pr = reg_pred(e, "mm_p"), bar = reg_b32(e, "mm_bar");
    op_elect(e, lead);
    emit(e, "@!%s bra $mm_done;", R(e, lead));
    if (s->pair == 2) {
        emit_note(e, "the pair: the even CTA issues every MMA for both; the odd CTA's MMA warp only holds TMEM");
        emit(e, "@!%%is_lead bra $mm_done;");
    }
    mma_setup(e);
    mbar_at(e, bar, s->bar_kv_full, 0);
    op_mbar_wait_imm(e, bar, 0);
    op_tc_fence_after(e);
    Reg stage = reg_b32(e, "mm_stage"), phase = reg_b32(e, "mm_phase"), itr = reg_b32(e, "mm_it");
    ring_reset(e, stage, phase);
    emit(e, "mov.u32 %s, 0;", R(e, itr));
    emit_label(e, new_label(e, l_loop, sizeof l_loop, "mm_loop"));
    emit(e, "setp.ge.u32 %s, %s, %%iters;", R(e, pr), R(e, itr));
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, l_done, sizeof l_done, "mm_loop_done"));
    emit_mma_iteration(e);
    ring_advance(e, stage, phase, p->stages);
    emit(e, "add.u32 %s, %s, 1;", R(e, itr), R(e, itr));
    emit(e, "bra.uni %s;", l_loop);
    emit_label(e, l_done);
    emit_note(e, "dK and dV are final once every MMA has completed");
    mbar_at(e, bar, s->bar_kv_done, 0);
    mma_commit(e, bar);
    emit_label(e, "$mm_done");
    op_warp_sync(e);
    emit_note(e, "plan: named barrier tmem_free (%d): the compute warps read dK and dV; free TMEM", s->bar_tmem_free);
    op_bar_sync(e, s->bar_tmem_free, named_bar_threads(p, s->bar_tmem_free));
    if (s->pair == 2) {
        emit_note(e, "the pair frees TMEM together, after the cluster barrier at $exit");
        emit(e, "bra.uni $exit;");
        return;
    }
    op_tc_fence_after(e);
    op_ld_shared_b32(e, reg_b32(e, "tmem"), reg_find(e, "smem"), s->off_tmem_slot);
    op_tmem_dealloc(e, 1, reg_find(e, "tmem"), p->tmem_cols);
    emit(e, "bra.uni $exit;");
}

/* ------------------------------------------------------------------ */
/* compute                                                              */
/* ------------------------------------------------------------------ */

/* Masked m-blocks: this thread's key j = n0 + t against queries m bm + c: visible for j - off - wr <= query <=
 * min(j - off + wl, seqlen_q - 1); a key past seqlen_k hides its whole row (cp_hi = -1). */
static void compute_bounds(Emit *e, Reg m)
{
    const Plan *p = e->p;
    int wl, wr;
    mask_bounds(&p->cfg, &wl, &wr);
    Reg j = reg_b32(e, "cp_j"), q0 = reg_b32(e, "cp_q0"), hi = reg_b32(e, "cp_hi"), t = reg_b32(e, "cp_tt");
    Reg pk = reg_pred(e, "cp_kout");
    emit_note(e, "mask: key j = n0 + t, query m bm + c visible for j - off - %d <= query <= min(j - off + %d, "
              "seqlen_q - 1) (-1: unbounded)", wr, wl);
    emit(e, "mul.lo.u32 %s, %s, %d;", R(e, q0), R(e, m), p->bm);
    emit(e, "add.u32 %s, %%cp_t, %%n0;", R(e, j));
    emit(e, "sub.u32 %s, %%seqlen_q, 1;", R(e, hi));
    if (wl >= 0) {
        emit(e, "sub.s32 %s, %s, %%kv_off;", R(e, t), R(e, j));
        emit(e, "add.s32 %s, %s, %d;", R(e, t), R(e, t), wl);
        emit(e, "min.s32 %s, %s, %s;", R(e, hi), R(e, hi), R(e, t));
    }
    emit(e, "sub.s32 %s, %s, %s;", R(e, hi), R(e, hi), R(e, q0));
    emit(e, "setp.ge.u32 %s, %s, %%seqlen_k;", R(e, pk), R(e, j));
    emit(e, "@%s mov.u32 %s, -1;", R(e, pk), R(e, hi));
    if (wr >= 0) {
        Reg lo = reg_b32(e, "cp_lo");
        emit(e, "sub.s32 %s, %s, %%kv_off;", R(e, lo), R(e, j));
        emit(e, "sub.s32 %s, %s, %d;", R(e, lo), R(e, lo), wr);
        emit(e, "sub.s32 %s, %s, %s;", R(e, lo), R(e, lo), R(e, q0));
    }
}

/* The packed 16-bit row piece pk[0 .. ld_cols / 2) (columns col0..) into this thread's row of the P^T or dS^T
 * tile at buf: [query chunk][key row][64 queries], 16-byte unit u of row r at u ^ (r % 8) (the SW128 pattern). */
static void store_row_piece(Emit *e, Reg buf, Reg pk, int col0, int cluster)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    Reg u = reg_b32(e, "cp_u"), a = reg_b32(e, "cp_a");
    for (int k = 0; k < s->ld_cols / UNIT_ELEMS; k++) {
        int col = col0 + k * UNIT_ELEMS, chunk = col / p->chunk_elems;
        swizzle_unit(e, u, reg_find(e, "cp_key"), (col % p->chunk_elems) / UNIT_ELEMS);
        emit(e, "add.u32 %s, %s, %s;", R(e, a), R(e, buf), R(e, u));
        Reg v[4];
        for (int i = 0; i < 4; i++) v[i] = reg_at(e, pk, 4 * k + i);
        if (cluster) op_st_cluster_v4_b32(e, a, (uint32_t)chunk * s->pt_chunk_bytes, v);
        else op_st_shared_v4_b32(e, a, (uint32_t)chunk * s->pt_chunk_bytes, v);
    }
}

/* P: S^T row pieces from TMEM (softcap: t = tanh(S softcap_scale)), masked (masked blocks), P = exp2(S scale_log2 +
 * nl2[c]); P^T packed to smem, and the f32 P that dS takes (softcap: P (1 - t^2)) back into the piece's S^T columns
 * (no MMA reads S^T; the next S^T waits for ds_full), where compute_ds loads it beside dP^T. */
static void compute_p(Emit *e, Reg vaddr, Reg masked)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    int wl, wr, n = s->ld_cols;
    mask_bounds(&p->cfg, &wl, &wr);
    Reg x = reg_find(e, "cp_x"), pk = reg_find(e, "cp_pk"), vec = reg_find(e, "cp_vec");
    Reg ta = reg_b32(e, "cp_ta"), buf = reg_b32(e, "cp_buf");
    emit(e, "add.u32 %s, %%cp_lanes, %u;", R(e, buf), s->tm_s);
    for (int c0 = 0; c0 < p->bm; c0 += n) {
        char l_nomask[NAME];
        emit_note(e, "S^T columns %d..%d", c0, c0 + n - 1);
        emit(e, "add.u32 %s, %s, %d;", R(e, ta), R(e, buf), c0);
        op_tmem_ld(e, x, 0, n, ta);
        op_tmem_wait_ld(e);
        if (p->cfg.softcap) {
            emit_note(e, "plan note softcap: t = tanh(S softcap_scale), before the mask (the forward's order)");
            Reg xs[OP_TMEM_MAX_X];
            for (int i = 0; i < n; i++) xs[i] = reg_at(e, x, i);
            sfx_softcap(e, xs, n);
        }
        emit(e, "@!%s bra %s;", R(e, masked), new_label(e, l_nomask, sizeof l_nomask, "cp_nomask"));
        for (int i = 0; i < n; i++)
            sfx_mask(e, reg_at(e, x, i), c0 + i, reg_find(e, "cp_hi"), wr >= 0 ? reg_find(e, "cp_lo") : REG_NONE);
        emit_label(e, l_nomask);
        Reg g2[2] = {reg_f32(e, "cp_g0"), reg_f32(e, "cp_g1")};
        for (int g = 0; g < n / 4; g++) {
            Reg v[4];
            for (int i = 0; i < 4; i++) v[i] = reg_at(e, vec, i);
            op_ld_shared_v4_b32(e, v, vaddr, (uint32_t)(c0 + 4 * g) * BWD_F32);
            for (int i = 0; i < 4; i++) {
                Reg xi = reg_at(e, x, 4 * g + i), gi = g2[i % 2];
                if (p->cfg.softcap) { /* g = max(1 - t^2, 0): ds/du, 0 where the mask set t = -inf */
                    emit(e, "neg.f32 %s, %s;", R(e, gi), R(e, xi));
                    emit(e, "fma.rn.f32 %s, %s, %s, %s;", R(e, gi), R(e, gi), R(e, xi), PTX_ONE);
                    emit(e, "max.f32 %s, %s, 0f00000000;", R(e, gi), R(e, gi));
                }
                emit(e, "fma.rn.ftz.f32 %s, %s, %%scale_log2, %s;", R(e, xi), R(e, xi), R(e, v[i]));
                emit(e, "ex2.approx.ftz.f32 %s, %s;", R(e, xi), R(e, xi));
                if (i % 2 == 0) continue;
                int k = (4 * g + i) / 2;
                Reg hi = reg_at(e, x, 2 * k + 1), lo = reg_at(e, x, 2 * k);
                op_cvt_pack(e, p->cfg.dtype, reg_at(e, pk, k), hi, lo);
                if (p->cfg.softcap) { /* dS takes P (1 - t^2): folded in, pair by pair */
                    emit(e, "mul.f32 %s, %s, %s;", R(e, lo), R(e, lo), R(e, g2[0]));
                    emit(e, "mul.f32 %s, %s, %s;", R(e, hi), R(e, hi), R(e, g2[1]));
                }
            }
        }
        store_row_piece(e, reg_find(e, "cp_prow"), pk, c0, 0);
        op_tmem_st(e, ta, x, 0, n);
    }
    emit_note(e, "the f32 P pieces are in TMEM before this thread reads them back (compute_ds)");
    op_tmem_wait_st(e);
}

/* dS = P (dP - D[c]) from dP^T row pieces and the f32 P over S^T, packed to the dS^T tile. */
static void compute_ds(Emit *e, Reg vaddr)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    int n = s->ld_cols;
    Reg x = reg_find(e, "cp_x"), y = reg_find(e, "cp_y"), pk = reg_find(e, "cp_pk"), vec = reg_find(e, "cp_vec");
    Reg ta = reg_b32(e, "cp_ta"), buf = reg_b32(e, "cp_buf");
    emit(e, "add.u32 %s, %%cp_lanes, %u;", R(e, buf), s->tm_dp);
    for (int c0 = 0; c0 < p->bm; c0 += n) {
        emit_note(e, "dP^T columns %d..%d, P over S^T's", c0, c0 + n - 1);
        emit(e, "add.u32 %s, %s, %d;", R(e, ta), R(e, buf), c0);
        op_tmem_ld(e, x, 0, n, ta);
        emit(e, "add.u32 %s, %%cp_lanes, %u;", R(e, ta), s->tm_s + (uint32_t)c0);
        op_tmem_ld(e, y, 0, n, ta);
        op_tmem_wait_ld(e);
        for (int g = 0; g < n / 4; g++) {
            Reg v[4];
            for (int i = 0; i < 4; i++) v[i] = reg_at(e, vec, i);
            op_ld_shared_v4_b32(e, v, vaddr, (uint32_t)(c0 + 4 * g) * BWD_F32);
            for (int i = 0; i < 4; i++) {
                Reg xi = reg_at(e, x, 4 * g + i);
                emit(e, "sub.f32 %s, %s, %s;", R(e, xi), R(e, xi), R(e, v[i]));
                emit(e, "mul.f32 %s, %s, %s;", R(e, xi), R(e, xi), R(e, reg_at(e, y, 4 * g + i)));
            }
        }
        for (int i = 0; i < n / 2; i++)
            op_cvt_pack(e, p->cfg.dtype, reg_at(e, pk, i), reg_at(e, x, 2 * i + 1), reg_at(e, x, 2 * i));
        store_row_piece(e, reg_find(e, "cp_dsrow"), pk, c0, 0);
        if (s->pair == 2) {
            emit_note(e, "plan note pair ds: queries %d..%d into CTA %d's DSX row 128 r + t", c0, c0 + n - 1,
                      c0 / s->half_m);
            store_row_piece(e, reg_find(e, "cp_dsx%d", c0 / s->half_m), pk, 0, 1);
        }
    }
}

/* dQ (or dQ^T) of the m-block from TMEM into the workspace's dQ block (mha_bwd.h layout, plan note dq). */
static void compute_dq(Emit *e, Reg m, Reg hq)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    int n = s->ld_cols;
    Reg x = reg_find(e, "cp_x"), ta = reg_b32(e, "cp_ta"), buf = reg_b32(e, "cp_buf");
    Reg ws = reg_b64(e, "cp_ws"), addr = reg_b64(e, "cp_dqa"), t64 = reg_b64(e, "cp_t64");
    emit_note(e, "dQ block of (query head, m-block) at dq_accum + 4 depth x its first workspace row; this thread's "
              "%s part of the layout in a register, the other part a constant per element", s->dq_t ? "column" : "row");
    bwd_ws_row(e, ws, m, hq);
    emit(e, "mul.lo.u64 %s, %s, %d;", R(e, addr), R(e, ws), p->qk * BWD_F32);
    emit(e, "add.s64 %s, %s, %%dq_accum;", R(e, addr), R(e, addr));
    emit(e, "mul.wide.u32 %s, %%cp_dqpart, %d;", R(e, t64), BWD_F32);
    emit(e, "add.s64 %s, %s, %s;", R(e, addr), R(e, addr), R(e, t64));
    emit(e, "add.u32 %s, %%cp_lanes, %u;", R(e, buf), s->tm_dq);
    Reg sem = reg_b64(e, "cp_sem"), lead = s->det ? reg_find(e, "cp_lead") : REG_NONE;
    if (s->det) {
        emit_note(e, "plan note deterministic: compute thread 0 waits for this kv block's turn at the dQ block");
        bwd_det_turn_open(e, sem, ws, lead, m, 1, s->bar_turn, REG_NONE);
    }
    for (int c0 = 0; c0 < s->dq_cols; c0 += n) {
        emit(e, "add.u32 %s, %s, %d;", R(e, ta), R(e, buf), c0);
        op_tmem_ld(e, x, 0, n, ta);
        op_tmem_wait_ld(e);
        if (s->dq_t) {
            for (int i = 0; i < n; i++)
                op_red_global_add_f32(e, addr, bwd_dq_row_part(p->bm, p->bn, p->qk, c0 + i) * BWD_F32, reg_at(e, x, i));
        } else {
            for (int i = 0; i < n; i += 2)
                op_red_global_add_v2_f32(e, addr, bwd_dq_col_part(p->bm, p->bn, p->qk, c0 + i) * BWD_F32,
                                         reg_at(e, x, i), reg_at(e, x, i + 1));
        }
    }
    if (s->det) bwd_det_turn_close(e, sem, lead, s->bar_turn, REG_NONE);
}

/* Arrive on the ring slot's empty barrier (array off) of the current stage. */
static void slot_arrive(Emit *e, uint32_t off)
{
    Reg bar = reg_b32(e, "cp_bar");
    smem_indexed(e, bar, off, reg_find(e, "cp_stage"), MBAR_BYTES);
    op_mbar_arrive(e, bar);
}

static void compute_wait(Emit *e, uint32_t off, Reg par)
{
    Reg bar = reg_b32(e, "cp_bar");
    mbar_at(e, bar, off, 0);
    op_mbar_wait(e, bar, par);
    op_tc_fence_after(e);
}

/* The pair: this CTA's nl2 or D of the stage landed (its own vec barrier; the tiles land on the even CTA's). */
static void vec_wait(Emit *e, uint32_t off)
{
    if (sm100bwd_of(e->p)->pair != 2) return;
    Reg bar = reg_b32(e, "cp_bar");
    smem_indexed(e, bar, off, reg_find(e, "cp_stage"), MBAR_BYTES);
    op_mbar_wait(e, bar, reg_find(e, "cp_phase"));
}

/* Arrive on p_full or ds_full for the MMA thread: this CTA's, or the even CTA's (the pair: a remote arrival). */
static void arrive_for_mma(Emit *e, uint32_t off, const char *lead_name)
{
    if (sm100bwd_of(e->p)->pair == 2) {
        op_mbar_arrive_cluster(e, reg_find(e, "%s", lead_name));
        return;
    }
    mbar_at(e, reg_b32(e, "cp_bar"), off, 0);
    op_mbar_arrive(e, reg_find(e, "cp_bar"));
}

static void emit_compute_iteration(Emit *e)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    char l_nob[NAME];
    Reg stage = reg_find(e, "cp_stage"), m = reg_b32(e, "cp_m"), hq = reg_b32(e, "cp_hq");
    Reg masked = reg_pred(e, "cp_masked"), par = reg_b32(e, "cp_par"), va = reg_b32(e, "cp_vaddr");
    bwd_iter_coords(e, reg_find(e, "cp_it"), m, hq);
    emit(e, "and.b32 %s, %%cp_it, 1;", R(e, par));
    emit(e, "setp.lt.s32 %s, %s, %%full_lo;", R(e, masked), R(e, m));
    emit(e, "setp.ge.or.s32 %s, %s, %%full_hi, %s;", R(e, masked), R(e, m), R(e, masked));
    emit(e, "@!%s bra %s;", R(e, masked), new_label(e, l_nob, sizeof l_nob, "cp_nobounds"));
    compute_bounds(e, m);
    emit_label(e, l_nob);

    emit_note(e, "P = exp2(S scale_log2 + nl2), nl2 of the column's query (plan: ring nl2); S^T in TMEM");
    compute_wait(e, s->bar_s_full, par);
    vec_wait(e, s->bar_q_vec);
    smem_indexed(e, va, s->off_nl2, stage, s->vec_stage_bytes);
    compute_p(e, va, masked);
    emit_note(e, "P^T rows visible to the MMA (async proxy), S^T read: p_full; nl2 read: the Q slot's empty barrier");
    op_fence_proxy_async(e);
    op_tc_fence_before(e);
    arrive_for_mma(e, s->bar_p_full, "cp_lpfull");
    slot_arrive(e, s->bar_q_empty);

    emit_note(e, "dS = P (dP - D), D = rowsum(dO O) of the column's query (plan: ring dpsum)");
    compute_wait(e, s->bar_dp_full, par);
    vec_wait(e, s->bar_do_vec);
    smem_indexed(e, va, s->off_dpsum, stage, s->vec_stage_bytes);
    compute_ds(e, va);
    emit_note(e, "dS^T rows visible to the MMA, dP^T (and the previous dQ) read: ds_full; D read: the dO slot");
    if (s->pair == 2) op_fence_proxy_async_cluster(e); /* DSX rows went to both CTAs */
    else op_fence_proxy_async(e);
    op_tc_fence_before(e);
    arrive_for_mma(e, s->bar_ds_full, "cp_ldsfull");
    slot_arrive(e, s->bar_do_empty);

    compute_wait(e, s->bar_dq_full, par);
    compute_dq(e, m, hq);
    ring_advance(e, stage, reg_find(e, "cp_phase"), p->stages);
}

/* dK x scale and dV rows from TMEM (zeros when no query sees the tile) to global memory, rows < seqlen_k. */
static void emit_compute_epilogue(Emit *e)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    int n = s->ld_cols;
    char l_wait[NAME];
    emit_section(e, "compute epilogue: dK = scale dS^T Q and dV from TMEM, st.global rows < seqlen_k (plan note "
                 "epilogue)");
    Reg none = reg_pred(e, "ep_none"), in = reg_pred(e, "ep_in"), j = reg_b32(e, "ep_j"), ad = reg_b64(e, "ep_addr");
    Reg t = reg_b64(e, "ep_t"), x = reg_find(e, "cp_x"), pk = reg_find(e, "cp_pk"), ta = reg_b32(e, "cp_ta");
    Reg zero = reg_b32(e, "ep_zero");
    emit(e, "setp.eq.u32 %s, %%iters, 0;", R(e, none));
    new_label(e, l_wait, sizeof l_wait, "ep_nowait");
    if (s->pair == 2) emit_note(e, "the pair waits for kv_done even with no m-block: its commit lands before the pair leaves");
    else emit(e, "@%s bra %s;", R(e, none), l_wait);
    mbar_at(e, reg_b32(e, "cp_bar"), s->bar_kv_done, 0);
    op_mbar_wait_imm(e, reg_find(e, "cp_bar"), 0);
    op_tc_fence_after(e);
    emit_label(e, l_wait);
    emit(e, "add.u32 %s, %%cp_t, %%n0;", R(e, j));
    emit(e, "setp.lt.u32 %s, %s, %%seqlen_k;", R(e, in), R(e, j));
    emit(e, "add.u32 %s, %s, %%k_start;", R(e, j), R(e, j));
    emit(e, "mov.u32 %s, 0;", R(e, zero));
    const struct { const char *ptr, *sb, *ss, *sh; uint32_t col; int scale; } o[2] = {
        {"dv_out", "dv_stride_b", "dv_stride_s", "dv_stride_h", s->tm_dv, 0},
        {"dk_out", "dk_stride_b", "dk_stride_s", "dk_stride_h", s->tm_dk, 1}};
    for (int k = 0; k < 2; k++) {
        emit_note(e, "%s row: ((k_start + j) stride_s + kvh stride_h + bidx stride_b) x %d bytes", o[k].ptr,
                  p->elem_bytes);
        op_cvt(e, "u64.u32", ad, j);
        emit(e, "mul.lo.u64 %s, %s, %%%s;", R(e, ad), R(e, ad), o[k].ss);
        op_cvt(e, "u64.u32", t, reg_find(e, "kvh"));
        emit(e, "mad.lo.u64 %s, %s, %%%s, %s;", R(e, ad), R(e, t), o[k].sh, R(e, ad));
        op_cvt(e, "u64.u32", t, reg_find(e, "bidx"));
        emit(e, "mad.lo.u64 %s, %s, %%%s, %s;", R(e, ad), R(e, t), o[k].sb, R(e, ad));
        emit(e, "mad.lo.u64 %s, %s, %d, %%%s;", R(e, ad), R(e, ad), p->elem_bytes, o[k].ptr);
        for (int c0 = 0; c0 < p->qk; c0 += n) {
            char l_zero[NAME], l_conv[NAME];
            emit(e, "@%s bra %s;", R(e, none), new_label(e, l_zero, sizeof l_zero, "ep_zero"));
            emit(e, "add.u32 %s, %%cp_lanes, %u;", R(e, ta), o[k].col + (uint32_t)c0);
            op_tmem_ld(e, x, 0, n, ta);
            op_tmem_wait_ld(e);
            if (o[k].scale)
                for (int i = 0; i < n; i++)
                    emit(e, "mul.f32 %s, %s, %%scale;", R(e, reg_at(e, x, i)), R(e, reg_at(e, x, i)));
            for (int i = 0; i < n / 2; i++)
                op_cvt_pack(e, p->cfg.dtype, reg_at(e, pk, i), reg_at(e, x, 2 * i + 1), reg_at(e, x, 2 * i));
            emit(e, "bra.uni %s;", new_label(e, l_conv, sizeof l_conv, "ep_store"));
            emit_label(e, l_zero);
            for (int i = 0; i < n / 2; i++) emit(e, "mov.b32 %s, %s;", R(e, reg_at(e, pk, i)), R(e, zero));
            emit_label(e, l_conv);
            for (int u = 0; u < n / UNIT_ELEMS; u++) {
                Reg v[4];
                for (int i = 0; i < 4; i++) v[i] = reg_at(e, pk, 4 * u + i);
                op_st_global_v4_b32_at(e, in, ad, (uint32_t)((c0 + u * UNIT_ELEMS) * p->elem_bytes), v);
            }
        }
    }
    emit_note(e, "plan: named barrier tmem_free (%d): dK and dV read", s->bar_tmem_free);
    op_tc_fence_before(e);
    op_bar_arrive(e, s->bar_tmem_free, named_bar_threads(p, s->bar_tmem_free));
}

/* The pair's compute registers: the dQ^T lane's part of the dQ block (plan note dq: depth 64 r + t % 64, queries
 * half_m (t / 64)..), this thread's DSX row in either CTA, and the even CTA's p_full and ds_full. */
static void compute_setup_pair(Emit *e, Reg t, Reg rowbase)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    Reg x = reg_b32(e, "cp_sx"), part = reg_b32(e, "cp_dqpart"), one = reg_b32(e, "cp_one");
    emit_note(e, "plan note dq: this lane's depth column and query half of the dQ block");
    emit(e, "and.b32 %s, %s, %d;", R(e, x), R(e, t), s->half_m * 2 - 1);
    emit(e, "mad.lo.u32 %s, %%cta_rank, %d, %s;", R(e, x), p->qk / s->pair, R(e, x));
    bwd_dq_col_part_reg(e, part, x);
    emit(e, "shr.u32 %s, %s, %d;", R(e, x), R(e, t), __builtin_ctz((unsigned)(s->half_m * 2)));
    emit(e, "mad.lo.u32 %s, %s, %u, %s;", R(e, part), R(e, x), bwd_dq_row_part(p->bm, p->bn, p->qk, s->half_m), R(e, part));
    emit_note(e, "plan note pair ds: DSX row 128 r + t in CTA 0 and CTA 1 (shared::cluster addresses)");
    smem_at(e, x, s->off_dsx);
    emit(e, "add.u32 %s, %s, %s;", R(e, x), R(e, x), R(e, rowbase));
    emit(e, "mad.lo.u32 %s, %%cta_rank, %u, %s;", R(e, x), (uint32_t)p->bn * ROW_BYTES, R(e, x));
    emit(e, "mov.u32 %s, 1;", R(e, one));
    op_mapa(e, reg_b32(e, "cp_dsx0"), x, reg_find(e, "lead_rank"));
    op_mapa(e, reg_b32(e, "cp_dsx1"), x, one);
    emit_note(e, "plan note pair ds: p_full and ds_full are the even CTA's");
    mbar_at(e, x, s->bar_p_full, 0);
    op_mapa(e, reg_b32(e, "cp_lpfull"), x, reg_find(e, "lead_rank"));
    mbar_at(e, x, s->bar_ds_full, 0);
    op_mapa(e, reg_b32(e, "cp_ldsfull"), x, reg_find(e, "lead_rank"));
}

static void emit_compute_setup(Emit *e)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    Reg t = reg_b32(e, "cp_t"), key = reg_b32(e, "cp_key"), base = reg_b32(e, "cp_rowbase");
    emit(e, "sub.u32 %s, %%thread, %d;", R(e, t), 32 * s->warp_compute);
    emit_note(e, "thread t owns TMEM lane t (its warp's quarter) and row t of the P^T and dS^T tiles");
    op_ld_shared_b32(e, reg_b32(e, "tmem"), reg_find(e, "smem"), s->off_tmem_slot);
    op_tmem_warp_lanes(e, reg_b32(e, "cp_lanes"), reg_find(e, "warp"));
    emit(e, "add.u32 %%cp_lanes, %%cp_lanes, %%tmem;");
    Reg zero = reg_b32(e, "cp_zero");
    emit(e, "mov.u32 %s, 0;", R(e, zero));
    swizzle_row(e, key, base, t, zero);
    smem_at(e, reg_b32(e, "cp_prow"), s->off_p);
    emit(e, "add.u32 %%cp_prow, %%cp_prow, %s;", R(e, base));
    smem_at(e, reg_b32(e, "cp_dsrow"), s->off_ds);
    emit(e, "add.u32 %%cp_dsrow, %%cp_dsrow, %s;", R(e, base));
    if (s->pair == 2) {
        compute_setup_pair(e, t, base);
        return;
    }
    emit_note(e, "plan note dq: this thread's %s of the dQ block", s->dq_t ? "depth column" : "query row");
    if (s->dq_t) bwd_dq_col_part_reg(e, reg_b32(e, "cp_dqpart"), t);
    else bwd_dq_row_part_reg(e, reg_b32(e, "cp_dqpart"), t);
    if (s->det) emit(e, "setp.eq.u32 %s, %s, 0;", R(e, reg_pred(e, "cp_lead")), R(e, t));
}

static void emit_compute(Emit *e)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    char l_loop[NAME], l_done[NAME];
    emit_section(e, "role compute (warps %d..%d): P^T and dS^T to smem, dQ to the workspace, dK and dV out",
                 s->warp_compute, s->warp_compute + 3);
    emit_compute_setup(e);
    reg_arr(e, RT_F32, s->ld_cols, "cp_x");
    reg_arr(e, RT_B32, s->ld_cols / 2, "cp_pk");
    reg_arr(e, RT_F32, s->ld_cols, "cp_y");
    reg_arr(e, RT_F32, 4, "cp_vec");
    Reg stage = reg_b32(e, "cp_stage"), phase = reg_b32(e, "cp_phase"), itr = reg_b32(e, "cp_it");
    Reg pr = reg_pred(e, "cp_p");
    ring_reset(e, stage, phase);
    emit(e, "mov.u32 %s, 0;", R(e, itr));
    emit_section(e, "compute loop: (query head, m-block) iterations of the tile");
    emit_label(e, new_label(e, l_loop, sizeof l_loop, "cp_loop"));
    emit(e, "setp.ge.u32 %s, %s, %%iters;", R(e, pr), R(e, itr));
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, l_done, sizeof l_done, "cp_done"));
    emit_compute_iteration(e);
    emit(e, "add.u32 %s, %s, 1;", R(e, itr), R(e, itr));
    emit(e, "bra.uni %s;", l_loop);
    emit_label(e, l_done);
    emit_compute_epilogue(e);
    emit(e, "bra.uni $exit;");
}

/* ------------------------------------------------------------------ */
/* kernel                                                               */
/* ------------------------------------------------------------------ */

/* The pair leaves together: after the cluster barrier no CTA signals the other and no MMA touches either CTA's
 * TMEM, so both MMA warps free it (cta_group::2). */
static void emit_pair_exit(Emit *e)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    Reg pr = reg_pred(e, "ex_p");
    emit_section(e, "the pair leaves together; then both MMA warps free TMEM (cta_group::2)");
    op_tc_fence_before(e);
    op_cluster_sync(e);
    op_pair_tmem_free(e, pr, s->warp_mma, s->off_tmem_slot, p->tmem_cols);
}

int sm100_emit_mha_bwd(Emit *e)
{
    const Plan *p = e->p;
    const Sm100BwdPlan *s = sm100bwd_of(p);
    emit_section(e, "prologue: thread coordinates, parameters, smem base");
    kernel_coords(e);
    kernel_params(e);
    if (p->cfg.varlen)
        emit_note(e, "plan note varlen: p_seqlen_q / p_seqlen_k are the longest sequences; p_total_q / p_total_k the "
                  "packed rows that bound cu_seqlens");
    bwd_tile_coords(e);
    emit_barrier_init(e);
    emit_tmem_alloc(e);
    Reg pr = reg_pred(e, "p_role");
    emit_section(e, "role dispatch: warp %d loads, warp %d issues MMAs, warps %d..%d compute, the rest leave",
                 s->warp_load, s->warp_mma, s->warp_compute, s->warp_compute + 3);
    emit(e, "setp.ge.u32 %s, %%warp, %d;", R(e, pr), s->warp_compute);
    emit(e, "@%s bra $compute;", R(e, pr));
    emit(e, "setp.eq.u32 %s, %%warp, %d;", R(e, pr), s->warp_mma);
    emit(e, "@%s bra $mma;", R(e, pr));
    emit(e, "setp.ne.u32 %s, %%warp, %d;", R(e, pr), s->warp_load);
    emit(e, "@%s bra $exit;", R(e, pr));
    emit_load(e);
    emit_label(e, "$mma");
    emit_mma(e);
    emit_label(e, "$compute");
    emit_compute(e);
    emit_label(e, "$exit");
    if (s->pair == 2) emit_pair_exit(e);
    emit(e, "ret;");
    return e->failed ? -1 : 0;
}
