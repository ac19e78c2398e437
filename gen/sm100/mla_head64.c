/* sm100/mla_head64.c - the head-64 sparse MLA prefill kernel on sm_100a (cta_group 1; plan:
 * sm100/mla_sparse.c, single_plan; the pieces it shares with the head-128 pair: sm100/mla_common.c):
 * one CTA per (query token, block of 64 query heads), M = 64.
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

#include "../ops.h"
#include "../ops_copy.h"
#include "../softmax.h"
#include "mla100.h"
#include "sm100.h"

enum { NAME = MLA100_NAME };

/* ------------------------------------------------------------ kernel: prologue */

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

/* ------------------------------------------------------------ the block loop */

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
        emit_div_imm(e, R(e, si), R(e, si), p->qk);
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

int sm100_emit_mla_head64(Emit *e)
{
    mla100_prologue(e, 0);
    mla_barrier_init(e);
    mla100_tmem_alloc(e, 0);
    const Mla100Roles roles = {emit_load, emit_dequant, emit_mma, emit_softmax};
    mla100_roles(e, &roles);
    emit_label(e, "$exit");
    emit(e, "ret;");
    return e->failed ? -1 : 0;
}
