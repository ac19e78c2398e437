/* sm100/mha_correction.c - the correction warpgroup of the sm_100a MHA forward kernel (sm100/mha.c has
 * the kernel's design): the O rescale in TMEM when a warp's vote asks, then the epilogue: O / l, LSE, O
 * through smem and a TMA store, or the split kernel's partial rows. Every number comes from the plan
 * (sm100/plan.c). */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../ops_copy.h"
#include "../softmax.h"
#include "mha100.h"
#include "sm100.h"


/* ------------------------------------------------------------------ */
/* correction warpgroup                                                 */
/* ------------------------------------------------------------------ */

/* %cr_to = O_t and %cr_stats = R_t (row stats) at this thread's TMEM lane; formed
 * afresh (TMEM base re-read) where used, so they do not stay live through the loop. */
static void corr_tile_addrs(Emit *e, int t)
{
    const Sm100Plan *s = sm100_of(e->p);
    const char *to = reg(e, "b32", "cr_to"), *st = reg(e, "b32", "cr_stats");
    op_ld_shared_b32(e, reg_find(e, "tmem"), reg_find(e, "smem"), s->off_tmem_slot);
    emit(e, "add.u32 %s, %%tmem, %%tm_lane;", st);
    emit(e, "add.u32 %s, %s, %u;", to, st, s->tm_o[t]);
    emit(e, "add.u32 %s, %s, %u;", st, st, s->tm_stats[t]);
}

/* O *= corr for this thread's row (O_t at %cr_to), in chunks of the plan's o_chunk_cols. */
static void corr_rescale(Emit *e)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    Reg ta = reg_b32(e, "cr_ta"), to = reg_find(e, "cr_to"), o = reg_find(e, "cr_o");
    op_tc_fence_after(e);
    for (int c = 0; c < s->ov_pad;) {
        int k = piece(s->ov_pad - c, s->o_chunk_cols);
        emit(e, "add.u32 %s, %s, %d;", R(e, ta), R(e, to), c);
        op_tmem_ld(e, o, 0, k, ta);
        op_tmem_wait_ld(e);
        for (int x = 0; x < k; x++) {
            Reg ox = reg_at(e, o, x);
            emit(e, "mul.f32 %s, %s, %%cr_corr;", R(e, ox), R(e, ox));
        }
        op_tmem_st(e, ta, o, 0, k);
        c += k;
    }
    op_tmem_wait_st(e);
}

/* Block i of tile t: read the row factors, rescale O if the warp's vote asks, release the PV. */
static void corr_block(Emit *e, int t)
{
    const Sm100Plan *s = sm100_of(e->p);
    char skip[NAME];
    Reg bar = reg_b32(e, "cr_bar"), corr = reg_f32(e, "cr_corr");
    Reg need = reg_pred(e, "cr_need"), any = reg_pred(e, "cr_any");
    corr_tile_addrs(e, t);
    mbar_at(e, bar, s->bar_corr_full, t);
    op_mbar_wait(e, bar, reg_find(e, "cr_par"));
    op_tc_fence_after(e);
    op_tmem_ld_regs(e, &corr, 1, reg_find(e, "cr_stats"));
    op_tmem_wait_ld(e);
    emit(e, "setp.neu.f32 %s, %s, 0f3F800000;", R(e, need), R(e, corr));
    emit_note(e, "rescale only when a row of this warp moved its max (plan: rescale); never on the first block");
    op_vote_any(e, any, need);
    new_label(e, skip, sizeof skip, "cr_keep");
    emit(e, "@%%cr_first bra %s;", skip);
    emit(e, "@!%s bra %s;", R(e, any), skip);
    corr_rescale(e);
    emit_label(e, skip);
    op_tc_fence_before(e);
    mbar_at(e, bar, s->bar_o_ready, t);
    Reg lbar = REG_NONE;
    if (pair(e->p)) {
        lbar = reg_b32(e, "cr_lbar");
        lead_addr(e, lbar, bar);
    }
    arrive_for_mma(e, bar, lbar);
}

/* Row base and swizzle key of this thread's row in an O staging buffer: unit u
 * (16 bytes) of row r sits at u ^ ((r * swizzle >> 7) & (units - 1)), as the TMA expects. */
static void corr_row_units(Emit *e, Reg buf)
{
    Reg key = reg_b32(e, "cr_key"), base = reg_b32(e, "cr_rowaddr");
    swizzle_row(e, key, base, reg_find(e, "row"), buf);
}

/* Store 8 output elements (16 bytes) at O column g of this row. */
static void corr_put_unit(Emit *e, int g, const Reg v[4])
{
    const Sm100Plan *s = sm100_of(e->p);
    int chunk = g / s->o_chunk_elems, u = (g % s->o_chunk_elems) / 8;
    Reg a = reg_b32(e, "cr_unit");
    swizzle_unit(e, a, reg_find(e, "cr_key"), u);
    emit(e, "add.u32 %s, %s, %%cr_rowaddr;", R(e, a), R(e, a));
    op_st_shared_v4_b32(e, a, (uint32_t)chunk * s->o_chunk_bytes, v);
}

static void corr_stage_o(Emit *e, int t, int zero)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    int ocols = s->o_chunks * s->o_chunk_elems;
    if (zero) {
        emit_note(e, "no key for any row: O = 0 (the load warp loaded no Q, so its smem is free)");
        Reg z = reg_b32(e, "cr_zero");
        emit(e, "mov.b32 %s, 0;", R(e, z));
        const Reg v[4] = {z, z, z, z};
        for (int g = 0; g < ocols; g += 8) corr_put_unit(e, g, v);
        return;
    }
    Reg bar = reg_b32(e, "cr_bar"), ta = reg_b32(e, "cr_ta");
    Reg f = reg_f32(e, "cr_f");
    Reg pk = reg_arr(e, RT_B32, 4, "cr_pk"), to = reg_find(e, "cr_to"), o = reg_find(e, "cr_o");
    mbar_at(e, bar, s->bar_o_full, t);
    op_mbar_wait_imm(e, bar, 0);
    op_tc_fence_after(e);
    for (int c = 0; c < ocols;) {
        int k = piece(ocols - c, s->o_chunk_cols);
        emit(e, "add.u32 %s, %s, %d;", R(e, ta), R(e, to), c);
        op_tmem_ld(e, o, 0, k, ta);
        op_tmem_wait_ld(e);
        for (int g = 0; g < k; g += 8) {
            Reg v[4];
            for (int q = 0; q < 4; q++) {
                Reg o0 = reg_at(e, o, g + 2 * q), o1 = reg_at(e, o, g + 2 * q + 1);
                emit(e, "mul.f32 %s, %s, %%cr_inv;", R(e, o0), R(e, o0));
                emit(e, "mul.f32 %s, %s, %%cr_inv;", R(e, f), R(e, o1));
                v[q] = reg_at(e, pk, q);
                op_cvt_pack(e, s->o_dtype, v[q], f, o0);
            }
            corr_put_unit(e, c + g, v);
        }
        c += k;
    }
}

/* The sequence position and query head of this correction thread's row of Q tile t (plan rows):
 * packed, row r = (seq m0 + seq_rows t + r % seq_rows, head + r / seq_rows); else (m0 + seq_rows t + r, head). */
static void corr_row_coords(Emit *e, int t, Reg seq_, Reg head_)
{
    const Sm100Plan *s = sm100_of(e->p);
    const char *seq = R(e, seq_), *head = R(e, head_);
    if (s->packed) {
        emit_rem_imm(e, seq, "%row", s->seq_rows);
        emit_div_imm(e, head, "%row", s->seq_rows);
        emit(e, "add.u32 %s, %s, %%head;", head, head);
    } else {
        emit(e, "mov.u32 %s, %%row;", seq);
        emit(e, "mov.u32 %s, %%head;", head);
    }
    emit(e, "add.u32 %s, %s, %d;", seq, seq, t * s->seq_rows);
    emit(e, "add.u32 %s, %s, %%m0;", seq, seq);
}

/* split=1, tile t: O / l (f32) and this split's LSE straight to the partial outputs (plan note
 * split), one row per thread; no staging, no TMA store. A CTA that saw no key writes O = 0. */
static void corr_epilogue_split(Emit *e, int t)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    char l_zero[NAME], l_done[NAME], l_direct[NAME], l_lse[NAME];
    emit_section(e, "correction epilogue (split), Q tile %d: O / l (f32) and LSE to o_accum, lse_accum", t);
    Reg bar = reg_b32(e, "cr_bar"), l = reg_f32(e, "cr_l"), m = reg_f32(e, "cr_m"), pr = reg_pred(e, "cr_p");
    Reg ok = reg_pred(e, "cr_row_ok");
    corr_tile_addrs(e, t);
    Reg st = reg_find(e, "cr_stats");
    mbar_at(e, bar, s->bar_l_full, t);
    op_mbar_wait_imm(e, bar, 0);
    op_tc_fence_after(e);
    emit(e, "add.u32 %s, %s, %u;", R(e, st), R(e, st), s->tm_stats_l);
    Reg lm[2] = {l, m};
    op_tmem_ld_regs(e, lm, 2, st);
    op_tmem_wait_ld(e);
    sfx_inv_sum(e, reg_f32(e, "cr_inv"), l, reg_find(e, "o_scale"));
    Reg seq = reg_b32(e, "cr_seq"), head = reg_b32(e, "cr_head"), lse = reg_f32(e, "cr_lse");
    Reg la = reg_b64(e, "cr_lse_addr"), oa = reg_b64(e, "cr_oacc_addr");
    corr_row_coords(e, t, seq, head);
    emit(e, "setp.lt.u32 %s, %s, %%seqlen_q;", R(e, ok), R(e, seq));
    sfx_lse(e, lse, m, l, reg_find(e, "scale_log2"));
    Reg direct = reg_pred(e, "cr_direct"), go = reg_pred(e, "cr_go");
    emit_note(e, "plan note split: num_splits 1 writes the final O (%s) and LSE, no combine follows",
              dtype_name[s->o_dtype]);
    emit(e, "setp.eq.u32 %s, %%num_splits, 1;", R(e, direct));
    emit(e, "@%s bra %s;", R(e, direct), new_label(e, l_direct, sizeof l_direct, "cr_split_direct"));
    mha_split_row_addrs(e, head, seq, la, oa);
    op_st_global_f32(e, ok, la, lse);
    emit(e, "bra.uni %s;", new_label(e, l_lse, sizeof l_lse, "cr_split_lse_done"));
    emit_label(e, l_direct);
    mha_split_out_lse(e, ok, head, seq, lse);
    mha_split_out_addr(e, head, seq, dtype_bytes[s->o_dtype], oa);
    emit_label(e, l_lse);
    emit(e, "setp.le.s32 %s, %%nblk, 0;", R(e, pr));
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, l_zero, sizeof l_zero, "cr_split_zero"));
    Reg ta = reg_b32(e, "cr_ta"), to = reg_find(e, "cr_to"), o = reg_find(e, "cr_o");
    mbar_at(e, bar, s->bar_o_full, t);
    op_mbar_wait_imm(e, bar, 0);
    op_tc_fence_after(e);
    emit_note(e, "plan: O columns 0..%d of this row, 16 bytes a store: f32 partials, or num_splits 1: %s",
              p->ov - 1, dtype_name[s->o_dtype]);
    for (int c = 0; c < p->ov;) {
        int k = piece(p->ov - c, s->o_chunk_cols);
        emit(e, "add.u32 %s, %s, %d;", R(e, ta), R(e, to), c);
        op_tmem_ld(e, o, 0, k, ta);
        op_tmem_wait_ld(e);
        for (int g = 0; g < k; g++) emit(e, "mul.f32 %s, %s, %%cr_inv;", R(e, reg_at(e, o, g)), R(e, reg_at(e, o, g)));
        emit(e, "and.pred %s, %s, %s;", R(e, go), R(e, ok), R(e, reg_not(e, direct)));
        for (int g = 0; g < k; g += 4) {
            Reg v[4];
            for (int q = 0; q < 4; q++) v[q] = reg_at(e, o, g + q);
            op_st_global_v4_f32(e, go, oa, (uint32_t)(F32_BYTES * (c + g)), v);
        }
        emit(e, "and.pred %s, %s, %s;", R(e, go), R(e, ok), R(e, direct));
        for (int g = 0; g < k; g += 8) {
            Reg v[4];
            for (int q = 0; q < 4; q++) {
                v[q] = reg_b32(e, "cr_dpk%d", q);
                op_cvt_pack(e, s->o_dtype, v[q], reg_at(e, o, g + 2 * q + 1), reg_at(e, o, g + 2 * q));
            }
            op_st_global_v4_b32_at(e, go, oa, (uint32_t)(dtype_bytes[s->o_dtype] * (c + g)), v);
        }
        c += k;
    }
    emit(e, "bra.uni %s;", new_label(e, l_done, sizeof l_done, "cr_split_done"));
    emit_label(e, l_zero);
    emit_note(e, "no key for any row of this split: O = 0 (f32, or the output dtype: zero bits either way)");
    Reg z = reg_f32(e, "cr_fzero");
    emit(e, "mov.f32 %s, 0f00000000;", R(e, z));
    const Reg zv[4] = {z, z, z, z};
    emit(e, "and.pred %s, %s, %s;", R(e, go), R(e, ok), R(e, reg_not(e, direct)));
    for (int c = 0; c < p->ov; c += 4) op_st_global_v4_f32(e, go, oa, (uint32_t)(F32_BYTES * c), zv);
    emit(e, "and.pred %s, %s, %s;", R(e, go), R(e, ok), R(e, direct));
    Reg zb = reg_b32(e, "cr_bzero");
    emit(e, "mov.b32 %s, 0;", R(e, zb));
    const Reg zbv[4] = {zb, zb, zb, zb};
    for (int c = 0; c < p->ov; c += 16 / dtype_bytes[s->o_dtype])
        op_st_global_v4_b32_at(e, go, oa, (uint32_t)(dtype_bytes[s->o_dtype] * c), zbv);
    emit_label(e, l_done);
}

/* varlen, a Q tile that runs past its sequence: each thread copies its own staged row (the units it
 * wrote, in their swizzled places) to global memory, if the row lies in the sequence. No row of the next
 * sequence is written. seq, head: computed by the LSE code for this row (sequence position, query head). */
static void corr_store_rows(Emit *e, int t, Reg seq, Reg head)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    int ocols = s->o_chunks * s->o_chunk_elems, eb = dtype_bytes[s->o_dtype];
    Reg in = reg_pred(e, "cr_o_in"), ad = reg_b64(e, "cr_o_addr"), x = reg_b64(e, "cr_o_x");
    Reg v = reg_arr(e, RT_B32, 4, "cr_pk");
    Reg vs[4] = {reg_at(e, v, 0), reg_at(e, v, 1), reg_at(e, v, 2), reg_at(e, v, 3)};
    /* seq and head are those of the LSE code only when it ran: recompute them here */
    corr_row_coords(e, t, seq, head);
    emit(e, "setp.lt.u32 %s, %s, %%seqlen_q;", R(e, in), R(e, seq));
    emit(e, "add.u32 %s, %s, %%vl_q_start;", R(e, seq), R(e, seq));
    op_cvt(e, "u64.u32", ad, seq);
    emit(e, "mul.lo.u64 %s, %s, %%out_stride_s;", R(e, ad), R(e, ad));
    op_cvt(e, "u64.u32", x, head);
    emit(e, "mad.lo.u64 %s, %s, %%out_stride_h, %s;", R(e, ad), R(e, x), R(e, ad));
    emit(e, "mad.lo.u64 %s, %s, %d, %%out;", R(e, ad), R(e, ad), eb);
    for (int g = 0; g < ocols; g += 8) {
        int chunk = g / s->o_chunk_elems, u = (g % s->o_chunk_elems) / 8;
        Reg a = reg_b32(e, "cr_unit");
        swizzle_unit(e, a, reg_find(e, "cr_key"), u);
        emit(e, "add.u32 %s, %s, %%cr_rowaddr;", R(e, a), R(e, a));
        op_ld_shared_v4_b32(e, vs, a, (uint32_t)chunk * s->o_chunk_bytes);
        op_st_global_v4_b32_at(e, in, ad, (uint32_t)(g * eb), vs);
    }
}

/* Tile t: O / l, LSE, O through smem and a TMA store by the warpgroup's first thread. */
static void corr_epilogue(Emit *e, int t)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    char l_nolse[NAME], l_zero[NAME], l_staged[NAME], l_nost[NAME];
    emit_section(e, "correction epilogue, Q tile %d: O / l, LSE, O through smem and a TMA store", t);
    Reg bar = reg_b32(e, "cr_bar"), l = reg_f32(e, "cr_l"), m = reg_f32(e, "cr_m");
    Reg pr_ = reg_pred(e, "cr_p");
    const char *pr = R(e, pr_);
    corr_tile_addrs(e, t);
    Reg st = reg_find(e, "cr_stats");
    mbar_at(e, bar, s->bar_l_full, t);
    op_mbar_wait_imm(e, bar, 0);
    op_tc_fence_after(e);
    emit(e, "add.u32 %s, %s, %u;", R(e, st), R(e, st), sm100_of(e->p)->tm_stats_l);
    Reg lm[2] = {l, m};
    op_tmem_ld_regs(e, lm, 2, st);
    op_tmem_wait_ld(e);
    if (p->cfg.sink) {
        emit_note(e, "plan note sink: the sink logit of this row's head");
        Reg sh = reg_b32(e, "cr_sink_head"), sink = reg_f32(e, "cr_sink");
        mha100_row_head(e, sh);
        sfx_sink_load(e, sink, sh, reg_b64(e, "cr_sink_addr"));
        sfx_inv_sum_sink(e, reg_f32(e, "cr_inv"), l, m, sink, reg_find(e, "scale_log2"), reg_find(e, "o_scale"));
    } else {
        sfx_inv_sum(e, reg_f32(e, "cr_inv"), l, reg_find(e, "o_scale"));
    }

    Reg seq_ = reg_b32(e, "cr_seq"), head_ = reg_b32(e, "cr_head"), idx = reg_b32(e, "cr_idx");
    Reg lse = reg_f32(e, "cr_lse"), ad = reg_b64(e, "cr_lse_addr");
    const char *seq = R(e, seq_);
    emit_note(e, "LSE [batch, heads_q, seqlen_q] f32, natural log (plan note lse)");
    emit(e, "setp.eq.u64 %s, %%lse_ptr, 0;", pr);
    emit(e, "@%s bra %s;", pr, new_label(e, l_nolse, sizeof l_nolse, "cr_no_lse"));
    corr_row_coords(e, t, seq_, head_);
    sfx_lse(e, lse, m, l, reg_find(e, "scale_log2"));
    emit(e, "setp.lt.u32 %s, %s, %%seqlen_q;", pr, seq);
    lse_store(e, pr_, head_, seq_, idx, ad, lse);
    emit_label(e, l_nolse);

    int buf = t % s->o_bufs;
    if (t >= s->o_bufs) {
        emit_note(e, "staging buffer %d is reused: the previous store must have read it", buf);
        char l_reuse[NAME];
        emit(e, "@!%%cr_leader bra %s;", new_label(e, l_reuse, sizeof l_reuse, "cr_buf_free"));
        op_bulk_wait_read(e, 0);
        emit_label(e, l_reuse);
        op_bar_sync(e, s->bar_epilogue, p->bars[s->bar_epilogue - 1].threads);
    }
    Reg ob = reg_b32(e, "cr_obuf");
    emit_note(e, "plan: O staging buffer %d at smem + %u (%u B per chunk of %d)", buf,
              s->off_o + (uint32_t)buf * s->o_tile_bytes, s->o_chunk_bytes, s->o_chunk_elems);
    smem_at(e, ob, s->off_o + (uint32_t)buf * s->o_tile_bytes);
    corr_row_units(e, ob);
    emit(e, "setp.le.s32 %s, %%nblk, 0;", pr);
    emit(e, "@%s bra %s;", pr, new_label(e, l_zero, sizeof l_zero, "cr_zero_o"));
    corr_stage_o(e, t, 0);
    emit(e, "bra.uni %s;", new_label(e, l_staged, sizeof l_staged, "cr_staged"));
    emit_label(e, l_zero);
    corr_stage_o(e, t, 1);
    emit_label(e, l_staged);
    char l_rows[NAME];
    if (p->cfg.varlen) {
        emit_note(e, "varlen: a Q tile that runs past its sequence's end is stored row by row (plan note varlen o)");
        Reg end = reg_b32(e, "cr_oend");
        emit(e, "add.u32 %s, %%m0, %d;", R(e, end), (t + 1) * s->seq_rows);
        emit(e, "setp.gt.u32 %s, %s, %%seqlen_q;", pr, R(e, end));
        emit(e, "@%s bra %s;", pr, new_label(e, l_rows, sizeof l_rows, "cr_o_rows"));
    }
    op_fence_proxy_async(e);
    emit_note(e, "plan: named barrier epilogue (%d)", s->bar_epilogue);
    op_bar_sync(e, s->bar_epilogue, p->bars[s->bar_epilogue - 1].threads);
    emit(e, "@!%%cr_leader bra %s;", new_label(e, l_nost, sizeof l_nost, "cr_stored"));
    Reg src = reg_b32(e, "cr_src"), col = reg_b32(e, "cr_col"), row = reg_b32(e, "cr_orow");
    emit(e, "add.u32 %s, %%m0, %d;", R(e, row), t * s->seq_rows);
    if (p->cfg.varlen) emit(e, "add.u32 %s, %s, %%vl_q_start;", R(e, row), R(e, row));
    for (int c = 0; c < s->o_chunks; c++) {
        emit(e, "add.u32 %s, %s, %u;", R(e, src), R(e, ob), (uint32_t)c * s->o_chunk_bytes);
        emit(e, "mov.u32 %s, %d;", R(e, col), c * s->o_chunk_elems);
        op_tma_store_4d(e, reg_find(e, "tmap_o"), col, row, reg_find(e, "head"),
                        reg_find(e, p->cfg.varlen ? "vl_zero" : "bidx"), src);
    }
    op_bulk_commit(e);
    emit_label(e, l_nost);
    if (p->cfg.varlen) {
        char l_done[NAME];
        emit(e, "bra.uni %s;", new_label(e, l_done, sizeof l_done, "cr_o_done"));
        emit_label(e, l_rows);
        corr_store_rows(e, t, seq_, head_);
        op_bar_sync(e, s->bar_epilogue, p->bars[s->bar_epilogue - 1].threads);
        emit_label(e, l_done);
    }
}

void mha100_correction(Emit *e)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    char l_loop[NAME], l_done[NAME];
    emit_section(e, "role correction (warps %d..%d): O rescale in TMEM, epilogue; plan regs %d", s->warp_corr,
                 s->warp_corr + 3, s->corr_regs);
    op_setmaxnreg(e, s->corr_regs, p->entry_regs);
    mha100_role_context(e, 0);
    reg_array(e, "f32", "cr_o", s->o_chunk_cols);
    emit(e, "setp.eq.u32 %s, %%thread, %d;", reg(e, "pred", "cr_leader"), 32 * s->warp_corr);
    const char *i = reg(e, "b32", "cr_i"), *par = reg(e, "b32", "cr_par");
    const char *pr = reg(e, "pred", "cr_p"), *first = reg(e, "pred", "cr_first");
    emit(e, "mov.u32 %s, 0;", i);
    emit_label(e, new_label(e, l_loop, sizeof l_loop, "cr_kv"));
    emit(e, "setp.ge.s32 %s, %s, %%nblk;", pr, i);
    emit(e, "@%s bra %s;", pr, new_label(e, l_done, sizeof l_done, "cr_done"));
    emit(e, "and.b32 %s, %s, 1;", par, i);
    emit(e, "setp.eq.u32 %s, %s, 0;", first, i);
    for (int t = 0; t < s->qtiles; t++) corr_block(e, t);
    emit(e, "add.s32 %s, %s, 1;", i, i);
    emit(e, "bra.uni %s;", l_loop);
    emit_label(e, l_done);
    for (int t = 0; t < s->qtiles; t++) {
        if (p->cfg.split) corr_epilogue_split(e, t);
        else corr_epilogue(e, t);
    }
    op_tc_fence_before(e);
    emit_note(e, "plan: named barrier tmem_free (%d): O read, the MMA warp may free TMEM", s->bar_tmem_free);
    op_bar_sync(e, s->bar_tmem_free, p->bars[s->bar_tmem_free - 1].threads);
    emit_note(e, "O stores must land before the CTA retires");
    emit(e, "@!%%cr_leader bra $exit;");
    op_bulk_wait(e, 0);
    emit(e, "bra.uni $exit;");
}
