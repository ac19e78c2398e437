/* sm90/mha_epilogue.c - the epilogues of the sm_90a MHA forward kernel's consumers (sm90/mha.c has the
 * kernel's design): O / l staged (swizzled) over the Q tile and TMA-stored, the LSE straight to global
 * memory; split=1: O / l (f32) and LSE to the partial outputs; cluster=N: the splits merged in the
 * cluster's smem. */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../ops.h"
#include "../ops_copy.h"
#include "../softmax.h"
#include "mha90.h"
#include "plan90.h"

/* ------------------------------------------------------------------ */
/* epilogue                                                             */
/* ------------------------------------------------------------------ */

/* varlen, a block that runs past its sequence: O / l straight from the accumulators to global
 * memory, row-masked, so no row of the next sequence is written. Thread columns 8q + 2*(lane%4)
 * of its rows lane/4 (+8): one b32 pair each. */
static void emit_store_o_rows(Emit *e)
{
    const Plan *p = e->p;
    Reg rowg = reg_b32(e, "cs_rowg"), ad = reg_b64(e, "cs_o_addr"), t = reg_b64(e, "cs_o_t");
    Reg f0 = reg_f32(e, "cs_f0"), f1 = reg_f32(e, "cs_f1"), pk = reg_b32(e, "cs_pack");
    for (int h = 0; h < 2; h++) {
        Reg in = reg_pred(e, "cs_o_in%d", h);
        emit(e, "add.u32 %s, %%m0, %%cs_row%d;", R(e, rowg), h);
        emit(e, "setp.lt.u32 %s, %s, %%seqlen_q;", R(e, in), R(e, rowg));
        emit(e, "add.u32 %s, %s, %%vl_q_start;", R(e, rowg), R(e, rowg));
        op_cvt(e, "u64.u32", ad, rowg);
        emit(e, "mul.lo.u64 %s, %s, %%out_stride_s;", R(e, ad), R(e, ad));
        op_cvt(e, "u64.u32", t, reg_find(e, "head"));
        emit(e, "mad.lo.u64 %s, %s, %%out_stride_h, %s;", R(e, ad), R(e, t), R(e, ad));
        op_cvt(e, "u64.u32", t, reg_find(e, "cs_lm2"));
        emit(e, "add.u64 %s, %s, %s;", R(e, ad), R(e, ad), R(e, t));
        emit(e, "mad.lo.u64 %s, %s, %d, %%out;", R(e, ad), R(e, ad), p->elem_bytes);
        for (int q = 0; q < p->ov / 8; q++) {
            emit(e, "mul.f32 %s, %%o%d, %%cs_inv%d;", R(e, f0), s_index(q, h, 0), h);
            emit(e, "mul.f32 %s, %%o%d, %%cs_inv%d;", R(e, f1), s_index(q, h, 1), h);
            op_cvt_pack(e, p->cfg.dtype, pk, f1, f0);
            op_st_global_b32_at(e, in, ad, (uint32_t)(8 * q * p->elem_bytes), pk);
        }
    }
}

/* O / l packed to the dtype: the pair (columns 8q + 2 (lane%4) ..+1) of row half h into pk */
static void pack_o(Emit *e, Reg pk, int q, int h)
{
    Reg f0 = reg_f32(e, "cs_f0"), f1 = reg_f32(e, "cs_f1");
    emit(e, "mul.f32 %s, %%o%d, %%cs_inv%d;", R(e, f0), s_index(q, h, 0), h);
    emit(e, "mul.f32 %s, %%o%d, %%cs_inv%d;", R(e, f1), s_index(q, h, 1), h);
    op_cvt_pack(e, e->p->cfg.dtype, pk, f1, f0);
}

/* config o_sts=1 (A/B): O / l staged over the Q tile one packed pair a st.shared.b32, in the TMA's swizzle */
static void stage_o_sts(Emit *e)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    int sw = p->swizzle_bytes, units = sw / 16;
    emit_note(e, "O rows of this thread into the Q tile (plan: smem q), in the TMA's %dB swizzle", sw);
    Reg key = reg_b32(e, "cs_swz"), base = reg_b32(e, "cs_obase");
    Reg tmp = reg_b32(e, "cs_tmp");
    for (int h = 0; h < 2; h++) {
        swizzle_row(e, key, base, reg_find(e, "cs_row%d", h), reg_find(e, "cs_qslot_base"));
        emit(e, "mad.lo.u32 %s, %%cs_lm, 4, %s;", R(e, base), R(e, base));
        for (int u = 0; u < units; u++) {
            Reg a = reg_b32(e, "cs_oaddr%d_%d", h, u);
            swizzle_unit(e, tmp, key, u);
            emit(e, "add.u32 %s, %s, %s;", R(e, a), R(e, base), R(e, tmp));
        }
    }
    Reg pk = reg_b32(e, "cs_pack");
    for (int q = 0; q < p->ov / 8; q++)
        for (int h = 0; h < 2; h++) {
            pack_o(e, pk, q, h);
            op_st_shared_b32(e, reg_find(e, "cs_oaddr%d_%d", h, q % units), (uint32_t)(q / units) * s->q_chunk_bytes,
                             pk);
        }
}

/* plan note o stmatrix: O / l staged over the Q tile by stmatrix.x4, each a warp's 16 rows x 16 columns: matrices
 * (rows 0-7, columns 8q..), (rows 8-15, 8q..), (rows 0-7, 8q+8..), (rows 8-15, 8q+8..) -- the accumulator's pairs as
 * they lie. Lane L gives row (L & 15) of the warp's 16, 16-byte unit q + L/16 of its chunk: a 2j + L/16 unit, so the
 * swizzle's key takes L/16 once and each even unit 2j one address. */
static void stage_o_stmatrix(Emit *e)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    int sw = p->swizzle_bytes, units = sw / 16;
    emit_note(e, "plan note o stmatrix: this lane's row (warp's first row + lane %% 16) and unit half (lane / 16), "
              "in the TMA's %dB swizzle", sw);
    Reg row = reg_b32(e, "cs_srow"), hi = reg_b32(e, "cs_shi");
    Reg key = reg_b32(e, "cs_swz"), base = reg_b32(e, "cs_obase"), tmp = reg_b32(e, "cs_tmp");
    emit(e, "shr.u32 %s, %%lane, 2;", R(e, tmp));
    emit(e, "sub.u32 %s, %%cs_row0, %s;", R(e, row), R(e, tmp));
    emit(e, "and.b32 %s, %%lane, 15;", R(e, tmp));
    emit(e, "add.u32 %s, %s, %s;", R(e, row), R(e, row), R(e, tmp));
    emit(e, "shr.u32 %s, %%lane, 4;", R(e, hi));
    swizzle_row(e, key, base, row, reg_find(e, "cs_qslot_base"));
    emit(e, "xor.b32 %s, %s, %s;", R(e, key), R(e, key), R(e, hi));
    for (int j = 0; j < units / 2; j++) {
        Reg a = reg_b32(e, "cs_saddr%d", j);
        swizzle_unit(e, tmp, key, 2 * j);
        emit(e, "add.u32 %s, %s, %s;", R(e, a), R(e, base), R(e, tmp));
    }
    Reg pk[4];
    for (int i = 0; i < 4; i++) pk[i] = reg_b32(e, "cs_pack%d", i);
    for (int q = 0; q < p->ov / 8; q += 2) {
        for (int i = 0; i < 4; i++) pack_o(e, pk[i], q + i / 2, i % 2);
        op_stmatrix_x4(e, reg_find(e, "cs_saddr%d", (q % units) / 2), (uint32_t)(q / units) * s->q_chunk_bytes, pk);
    }
}

/* Normalise O, write LSE, stage O (swizzled) over this consumer's Q rows and TMA-store it. */
void mha90_epilogue(Emit *e)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    char lbl[NAME], l_nolse[NAME];
    Reg t = reg_f32(e, "cs_shfl");
    emit_section(e, "consumer epilogue: O / l, LSE, O through smem and a TMA store");
    Reg sink = REG_NONE;
    if (p->cfg.sink) {
        emit_note(e, "plan note sink: this tile's head's sink logit");
        sink = reg_f32(e, "cs_sink");
        sfx_sink_load(e, sink, reg_find(e, "head"), reg_b64(e, "cs_sink_addr"));
    }
    for (int h = 0; h < 2; h++) {
        Reg l = reg_find(e, "cs_l%d", h);
        sfx_reduce_lanes(e, "add", l, t, sm90_frag(p).lanes_per_row);
        if (p->cfg.sink)
            sfx_inv_sum_sink(e, reg_f32(e, "cs_inv%d", h), l, reg_find(e, "cs_m%d", h), sink,
                             reg_find(e, "scale_log2"), reg_find(e, "o_scale"));
        else
            sfx_inv_sum(e, reg_f32(e, "cs_inv%d", h), l, reg_find(e, "o_scale"));
    }
    Reg pr = reg_pred(e, "cs_p");
    Reg lse = reg_f32(e, "cs_lse"), rowg = reg_b32(e, "cs_rowg");
    Reg idx = reg_b32(e, "cs_lse_idx");
    Reg ad = reg_b64(e, "cs_lse_addr");
    emit_note(e, "LSE [batch, heads_q, seqlen_q] fp32, natural log; one lane per row writes");
    emit(e, "setp.eq.u64 %s, %%lse_ptr, 0;", R(e, pr));
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, l_nolse, sizeof l_nolse, "no_lse"));
    for (int h = 0; h < 2; h++) {
        sfx_lse(e, lse, reg_find(e, "cs_m%d", h), reg_find(e, "cs_l%d", h), reg_find(e, "scale_log2"));
        emit(e, "add.u32 %s, %%m0, %%cs_row%d;", R(e, rowg), h);
        emit(e, "setp.lt.u32 %s, %s, %%seqlen_q;", R(e, pr), R(e, rowg));
        emit(e, "and.pred %s, %s, %%cs_lm0;", R(e, pr), R(e, pr));
        lse_store(e, pr, reg_find(e, "head"), rowg, idx, ad, lse);
    }
    emit_label(e, l_nolse);
    if (p->cfg.timeline) mha90_tl_stamp(e, reg_find(e, "tl_c0"), TL_C_LSE);
    char l_rows[NAME], l_done[NAME];
    if (p->cfg.varlen) {
        Reg end = reg_b32(e, "cs_oend");
        emit_note(e, "varlen: a block that runs past its sequence's end is stored row by row (plan note varlen o)");
        emit(e, "mad.lo.u32 %s, %%cs_w, %d, %%m0;", R(e, end), s->mma_m);
        emit(e, "add.u32 %s, %s, %d;", R(e, end), R(e, end), s->mma_m);
        emit(e, "setp.gt.u32 %s, %s, %%seqlen_q;", R(e, pr), R(e, end));
        emit(e, "@%s bra %s;", R(e, pr), new_label(e, l_rows, sizeof l_rows, "cs_o_rows"));
    }

    if (p->cfg.o_sts) stage_o_sts(e);
    else stage_o_stmatrix(e);
    op_fence_proxy_async(e);
    emit_note(e, "plan: named barrier epilogue<consumer> (%d + consumer)", s->bar_epilogue0);
    op_bar_sync_at(e, REG_NONE, reg_find(e, "cs_epi_bar"), named_bar_threads(p, s->bar_epilogue0));
    if (p->cfg.timeline) mha90_tl_stamp(e, reg_find(e, "tl_c0"), TL_C_STAGED);
    emit(e, "@!%%cs_leader bra %s;", new_label(e, lbl, sizeof lbl, "store_done"));
    Reg src_ = reg_b32(e, "cs_src");
    const char *src = R(e, src_);
    Reg col = reg_b32(e, "cs_col"), r0 = reg_b32(e, "cs_orow");
    emit(e, "mad.lo.u32 %s, %%cs_w, %d, %%m0;", R(e, r0), s->mma_m);
    if (p->cfg.varlen) emit(e, "add.u32 %s, %s, %%vl_q_start;", R(e, r0), R(e, r0));
    Reg batch = p->cfg.varlen ? reg_find(e, "vl_zero") : reg_find(e, "bidx");
    for (int c = 0; c < p->ov_chunks; c++) {
        emit(e, "add.u32 %s, %%cs_qslot_rows, %u;", src, c * s->q_chunk_bytes);
        emit(e, "mov.u32 %s, %d;", R(e, col), c * p->chunk_elems);
        op_tma_store_4d(e, reg_find(e, "tmap_o"), col, r0, reg_find(e, "head"), batch, src_);
    }
    op_bulk_commit(e);
    if (s->q_release_late) {
        emit_note(e, "plan note q release: the slot is freed in the next tile, once the store has read it");
        emit(e, "setp.eq.u32 %%cs_q_pend, %%wg, %%wg;");
    } else {
        emit_note(e, "the Q slot is free once the store has read smem");
        op_bulk_wait_read(e, 0);
    }
    if (p->cfg.timeline) {
        mha90_tl_stamp(e, reg_find(e, "tl_c0"), TL_C_STORED);
        mha90_tl_stamp(e, reg_find(e, "tl_cl"), TL_CL_STORED);
        mha90_tl_stamp(e, reg_find(e, "tl_c0"), TL_GT_C_STORED);
    }
    if (!s->q_release_late) {
        mbar_indexed(e, src_, reg_find(e, "cs_q_empty"), reg_find(e, "cs_q_slot"));
        op_mbar_arrive(e, src_);
    }
    emit_label(e, lbl);
    if (p->cfg.varlen) {
        emit(e, "bra.uni %s;", new_label(e, l_done, sizeof l_done, "cs_o_done"));
        emit_label(e, l_rows);
        emit_store_o_rows(e);
        emit_note(e, "the Q slot is free once every thread of the consumer is past its wgmmas");
        op_bar_sync_at(e, REG_NONE, reg_find(e, "cs_epi_bar"), named_bar_threads(p, s->bar_epilogue0));
        mbar_indexed(e, src_, reg_find(e, "cs_q_empty"), reg_find(e, "cs_q_slot"));
        op_mbar_arrive_if(e, reg_find(e, "cs_leader"), src_);
        emit_label(e, l_done);
    }
}

/* split=1: O / l in f32 and the LSE of this split straight to the partial outputs (plan note
 * split), no smem staging; the Q slot is free once the warpgroup's wgmmas are done. */
void mha90_epilogue_split(Emit *e)
{
    const Plan *p = e->p;
    char lbl[NAME];
    Reg t = reg_f32(e, "cs_shfl");
    emit_section(e, "consumer epilogue (split): O / l (f32) and LSE of this split to o_accum, lse_accum");
    for (int h = 0; h < 2; h++) {
        Reg l = reg_find(e, "cs_l%d", h);
        sfx_reduce_lanes(e, "add", l, t, sm90_frag(p).lanes_per_row);
        sfx_inv_sum(e, reg_f32(e, "cs_inv%d", h), l, reg_find(e, "o_scale"));
    }
    Reg pr = reg_pred(e, "cs_p"), pl = reg_pred(e, "cs_p_lse"), direct = reg_pred(e, "cs_direct");
    Reg lse = reg_f32(e, "cs_lse"), rowg = reg_b32(e, "cs_rowg");
    Reg la = reg_b64(e, "cs_lse_addr"), oa = reg_b64(e, "cs_oacc_addr");
    Reg f0 = reg_f32(e, "cs_f0"), f1 = reg_f32(e, "cs_f1"), pk = reg_b32(e, "cs_pack");
    emit_note(e, "plan note split: num_splits 1 writes the final O and LSE (no combine follows)");
    emit(e, "setp.eq.u32 %s, %%num_splits, 1;", R(e, direct));
    emit_note(e, "row h of this thread: columns 8q + 2*(lane%%4) + {0, 1} of O; lane%%4 == 0 writes the LSE");
    for (int h = 0; h < 2; h++) {
        char l_direct[NAME], l_next[NAME];
        sfx_lse(e, lse, reg_find(e, "cs_m%d", h), reg_find(e, "cs_l%d", h), reg_find(e, "scale_log2"));
        emit(e, "add.u32 %s, %%m0, %s;", R(e, rowg), row_seq(e, h));
        emit(e, "setp.lt.u32 %s, %s, %%seqlen_q;", R(e, pr), R(e, rowg));
        emit(e, "and.pred %s, %s, %%cs_lm0;", R(e, pl), R(e, pr));
        Reg hq = reg_find(e, "head");
        if (sm90_of(p)->packed) {
            hq = reg_b32(e, "cs_hq");
            emit(e, "add.u32 %s, %%head, %%cs_hoff%d;", R(e, hq), h);
        }
        emit(e, "@%s bra %s;", R(e, direct), new_label(e, l_direct, sizeof l_direct, "split_direct"));
        mha_split_row_addrs(e, hq, rowg, la, oa);
        op_st_global_f32(e, pl, la, lse);
        /* the fragment's column pair of this lane: 2 (lane % 4) f32 into the row; pair q is 8 columns further */
        emit(e, "mad.wide.u32 %s, %%cs_lm, %d, %s;", R(e, oa), 2 * F32_BYTES, R(e, oa));
        for (int q = 0; q < p->ov / 8; q++) {
            emit(e, "mul.f32 %s, %%o%d, %%cs_inv%d;", R(e, f0), s_index(q, h, 0), h);
            emit(e, "mul.f32 %s, %%o%d, %%cs_inv%d;", R(e, f1), s_index(q, h, 1), h);
            op_st_global_v2_f32(e, pr, oa, (uint32_t)(8 * F32_BYTES * q), f0, f1);
        }
        emit(e, "bra.uni %s;", new_label(e, l_next, sizeof l_next, "split_row_done"));
        emit_label(e, l_direct);
        mha_split_out_lse(e, pl, hq, rowg, lse);
        mha_split_out_addr(e, hq, rowg, p->elem_bytes, oa);
        emit(e, "mad.wide.u32 %s, %%cs_lm, %d, %s;", R(e, oa), 2 * p->elem_bytes, R(e, oa));
        for (int q = 0; q < p->ov / 8; q++) {
            emit(e, "mul.f32 %s, %%o%d, %%cs_inv%d;", R(e, f0), s_index(q, h, 0), h);
            emit(e, "mul.f32 %s, %%o%d, %%cs_inv%d;", R(e, f1), s_index(q, h, 1), h);
            op_cvt_pack(e, p->cfg.dtype, pk, f1, f0);
            op_st_global_b32_at(e, pr, oa, (uint32_t)(8 * q * p->elem_bytes), pk);
        }
        emit_label(e, l_next);
    }
    emit_note(e, "plan: named barrier epilogue<consumer>: the warpgroup is done with its Q rows");
    op_bar_sync_at(e, REG_NONE, reg_find(e, "cs_epi_bar"), named_bar_threads(p, sm90_of(p)->bar_epilogue0));
    emit(e, "@!%%cs_leader bra %s;", new_label(e, lbl, sizeof lbl, "split_done"));
    Reg bar = reg_b32(e, "cs_bar");
    mbar_indexed(e, bar, reg_find(e, "cs_q_empty"), reg_find(e, "cs_q_slot"));
    op_mbar_arrive(e, bar);
    emit_label(e, lbl);
}

/* Cluster split, part 1: this CTA's O / l (f32) and LSE rows into its staging area (plan smem
 * cstage), for every CTA of the cluster to read after the barrier. */
static void emit_cluster_stage(Emit *e)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    Reg t = reg_f32(e, "cs_shfl"), lse = reg_f32(e, "cs_lse"), a = reg_b32(e, "cs_stage_addr");
    Reg f0 = reg_f32(e, "cs_f0"), f1 = reg_f32(e, "cs_f1");
    emit_section(e, "consumer epilogue (cluster split): O / l and LSE of this split staged in smem (plan cstage)");
    for (int h = 0; h < 2; h++) {
        Reg l = reg_find(e, "cs_l%d", h);
        sfx_reduce_lanes(e, "add", l, t, sm90_frag(p).lanes_per_row);
        sfx_inv_sum(e, reg_f32(e, "cs_inv%d", h), l, reg_find(e, "o_scale"));
        sfx_lse(e, lse, reg_find(e, "cs_m%d", h), l, reg_find(e, "scale_log2"));
        emit_note(e, "tile row cs_row%d: its LSE after the %d O rows; lane%%4 == 0 writes it", h, p->bm);
        smem_at(e, a, s->off_cstage + s->cstage_row_bytes * (uint32_t)p->bm);
        emit(e, "mad.lo.u32 %s, %%cs_row%d, %d, %s;", R(e, a), h, F32_BYTES, R(e, a));
        op_st_shared_b32_if(e, reg_find(e, "cs_lm0"), a, 0, lse);
        emit_note(e, "O / l: columns 8q + 2*(lane%%4) + {0, 1}");
        smem_at(e, a, s->off_cstage);
        emit(e, "mad.lo.u32 %s, %%cs_row%d, %u, %s;", R(e, a), h, s->cstage_row_bytes, R(e, a));
        emit(e, "mad.lo.u32 %s, %%cs_lm, %d, %s;", R(e, a), 2 * F32_BYTES, R(e, a));
        for (int q = 0; q < p->ov / 8; q++) {
            emit(e, "mul.f32 %s, %%o%d, %%cs_inv%d;", R(e, f0), s_index(q, h, 0), h);
            emit(e, "mul.f32 %s, %%o%d, %%cs_inv%d;", R(e, f1), s_index(q, h, 1), h);
            op_st_shared_v2_f32(e, a, (uint32_t)(8 * F32_BYTES * q), f0, f1);
        }
    }
}

/* Cluster split, part 2: one tile row merged by one warp. j = the row's slot (sequence-major
 * when the group is packed, so a decode step's real rows come first); lane l loads split l's
 * LSE and every split's O columns 4l + 128i at once, then lse = log sum e^lse_i and
 * O = sum e^(lse_i - lse) O_i go to out and lse (the combine kernel's math). */
static void emit_cluster_merge_row(Emit *e, Reg j)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    int n = p->cfg.cluster_split, kb = (p->ov + 127) / 128;
    char l_skip[NAME], l_out[NAME];
    new_label(e, l_skip, sizeof l_skip, "cm_skip");
    Reg seq = reg_b32(e, "cm_seq"), hq = reg_b32(e, "cm_hq"), r = reg_b32(e, "cm_r"), rowg = reg_b32(e, "cm_rowg");
    Reg skip = reg_pred(e, "cm_p"), a = reg_b32(e, "cm_a"), ra = reg_b32(e, "cm_ra"), sp = reg_b32(e, "cm_split");
    emit(e, "setp.ge.u32 %s, %s, %d;", R(e, skip), R(e, j), p->bm);
    emit(e, "@%s bra.uni %s;", R(e, skip), l_skip);
    if (s->packed) {
        emit_note(e, "plan rows (GQA packed): slot j = seq x %d + head offset; tile row = head offset x %d + seq",
                  p->cfg.group, s->seq_rows);
        emit_div_imm(e, R(e, seq), R(e, j), p->cfg.group);
        emit_rem_imm(e, R(e, hq), R(e, j), p->cfg.group);
        emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, r), R(e, hq), s->seq_rows, R(e, seq));
        emit(e, "add.u32 %s, %s, %%head;", R(e, hq), R(e, hq));
    } else {
        emit(e, "mov.u32 %s, %s;", R(e, seq), R(e, j));
        emit(e, "mov.u32 %s, %s;", R(e, r), R(e, j));
        emit(e, "mov.u32 %s, %%head;", R(e, hq));
    }
    emit(e, "add.u32 %s, %%m0, %s;", R(e, rowg), R(e, seq));
    emit(e, "setp.ge.u32 %s, %s, %%seqlen_q;", R(e, skip), R(e, rowg));
    emit(e, "@%s bra.uni %s;", R(e, skip), l_skip);

    emit_note(e, "lane l < %d: split l's LSE (CTA rank l); the others -inf", n);
    Reg lse_l = reg_f32(e, "cm_lse_l"), have = reg_pred(e, "cm_have");
    smem_at(e, a, s->off_cstage + s->cstage_row_bytes * (uint32_t)p->bm);
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, a), R(e, r), F32_BYTES, R(e, a));
    emit(e, "setp.lt.u32 %s, %%lane, %d;", R(e, have), n);
    emit(e, "min.u32 %s, %%lane, %d;", R(e, sp), n - 1);
    op_mapa(e, ra, a, sp);
    emit(e, "mov.f32 %s, %s;", R(e, lse_l), PTX_NEG_INF);
    op_ld_cluster_f32_if(e, have, lse_l, ra);
    emit_note(e, "every split's O columns 4l + 128i of the row, all loads issued before any is used");
    Reg v = reg_arr(e, RT_F32, 4 * kb * n, "cm_v"), colok[8];
    for (int k = 0; k < kb; k++) {
        colok[k] = reg_pred(e, "cm_col%d", k);
        emit(e, "setp.lt.u32 %s, %%lane, %d;", R(e, colok[k]), (p->ov - 128 * k) / 4);
    }
    smem_at(e, a, s->off_cstage);
    emit(e, "mad.lo.u32 %s, %s, %u, %s;", R(e, a), R(e, r), s->cstage_row_bytes, R(e, a));
    emit(e, "mad.lo.u32 %s, %%lane, %d, %s;", R(e, a), 4 * F32_BYTES, R(e, a));
    for (int i = 0; i < n; i++) {
        emit(e, "mov.u32 %s, %d;", R(e, sp), i);
        op_mapa(e, ra, a, sp);
        for (int k = 0; k < kb; k++) {
            Reg x[4];
            for (int c = 0; c < 4; c++) {
                x[c] = reg_at(e, v, 4 * (kb * i + k) + c);
                emit(e, "mov.f32 %s, 0f00000000;", R(e, x[c]));
            }
            op_ld_cluster_v4_f32_if(e, colok[k], x, ra, (uint32_t)(128 * F32_BYTES * k));
        }
    }
    Reg mx = reg_f32(e, "cm_max"), sum = reg_f32(e, "cm_sum"), t = reg_f32(e, "cm_t"), lse = reg_f32(e, "cm_lse");
    Reg w = reg_f32(e, "cm_w"), wi = reg_f32(e, "cm_wi"), acc = reg_arr(e, RT_F32, 4 * kb, "cm_acc");
    for (int i = 0; i < 4 * kb; i++) emit(e, "mov.f32 %s, 0f00000000;", R(e, reg_at(e, acc, i)));
    emit(e, "mov.f32 %s, %s;", R(e, mx), R(e, lse_l));
    sfx_reduce_lanes(e, "max", mx, t, 32);
    emit(e, "mov.f32 %s, %s;", R(e, lse), PTX_NEG_INF);
    emit_note(e, "no split saw a key of the row: O = 0, LSE = -inf");
    emit(e, "setp.eq.f32 %s, %s, %s;", R(e, skip), R(e, mx), PTX_NEG_INF);
    emit(e, "@%s bra.uni %s;", R(e, skip), new_label(e, l_out, sizeof l_out, "cm_out"));
    emit_note(e, "lse = max + log sum_i e^(lse_i - max); weight of split l = e^(lse_l - lse), 0 for a -inf split");
    emit(e, "sub.f32 %s, %s, %s;", R(e, sum), R(e, lse_l), R(e, mx));
    emit(e, "mul.f32 %s, %s, %s;", R(e, sum), R(e, sum), PTX_LOG2E);
    emit(e, "ex2.approx.ftz.f32 %s, %s;", R(e, sum), R(e, sum));
    sfx_reduce_lanes(e, "add", sum, t, 32);
    emit(e, "lg2.approx.f32 %s, %s;", R(e, t), R(e, sum));
    emit(e, "fma.rn.f32 %s, %s, %s, %s;", R(e, lse), R(e, t), PTX_LN2, R(e, mx));
    emit(e, "sub.f32 %s, %s, %s;", R(e, w), R(e, lse_l), R(e, lse));
    emit(e, "mul.f32 %s, %s, %s;", R(e, w), R(e, w), PTX_LOG2E);
    emit(e, "ex2.approx.ftz.f32 %s, %s;", R(e, w), R(e, w));
    for (int i = 0; i < n; i++) {
        emit(e, "mov.u32 %s, %d;", R(e, sp), i);
        op_shfl_idx(e, wi, w, sp);
        for (int c = 0; c < 4 * kb; c++) {
            Reg x = reg_at(e, acc, c);
            emit(e, "fma.rn.f32 %s, %s, %s, %s;", R(e, x), R(e, wi), R(e, reg_at(e, v, 4 * kb * i + c)), R(e, x));
        }
    }
    emit_label(e, l_out);
    emit_note(e, "the merged row: O (%s) at the caller's strides, lane 0 its LSE", dtype_name[p->cfg.dtype]);
    Reg oa = reg_b64(e, "cm_out_addr"), pk0 = reg_b32(e, "cm_pack0"), pk1 = reg_b32(e, "cm_pack1");
    Reg lane0 = reg_pred(e, "cm_lane0");
    mha_split_out_addr(e, hq, rowg, p->elem_bytes, oa);
    emit(e, "mad.wide.u32 %s, %%lane, %d, %s;", R(e, oa), 4 * p->elem_bytes, R(e, oa));
    for (int k = 0; k < kb; k++) {
        op_cvt_pack(e, p->cfg.dtype, pk0, reg_at(e, acc, 4 * k + 1), reg_at(e, acc, 4 * k));
        op_cvt_pack(e, p->cfg.dtype, pk1, reg_at(e, acc, 4 * k + 3), reg_at(e, acc, 4 * k + 2));
        op_st_global_v2_b32(e, colok[k], oa, (uint32_t)(128 * k * p->elem_bytes), pk0, pk1);
    }
    emit(e, "setp.eq.u32 %s, %%lane, 0;", R(e, lane0));
    mha_split_out_lse(e, lane0, hq, rowg, lse);
    emit_label(e, l_skip);
}

/* cluster=N (plan note cluster split): the N CTAs of the cluster are the tile's N splits. Each
 * stages its O / l and LSE; after barrier.cluster every consumer warp merges its rows from all
 * N CTAs' smem; a second barrier keeps each CTA's smem alive until the others have read it. The
 * producer has exited by then (one tile per CTA, plan persistent 0), and exited threads do not
 * hold a cluster barrier. */
void mha90_epilogue_cluster(Emit *e)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    int n = p->cfg.cluster_split, warps = 4 * s->consumers, passes = (p->bm + n * warps - 1) / (n * warps);
    emit_cluster_stage(e);
    emit_note(e, "plan note cluster split: every split's rows staged and visible cluster-wide past this barrier");
    op_cluster_sync(e);
    emit_section(e, "consumer epilogue (cluster split): merge rows over ld.shared::cluster (plan note cluster rows)");
    Reg cw = reg_b32(e, "cm_warp"), rank = reg_b32(e, "cm_rank"), j = reg_b32(e, "cm_j");
    emit(e, "mad.lo.u32 %s, %%cs_w, 4, %%cs_wl;", R(e, cw));
    emit(e, "mov.u32 %s, %%cluster_ctarank;", R(e, rank));
    for (int k = 0; k < passes; k++) {
        emit_note(e, "slot (%d x %d + warp) x %d + rank", k, warps, n);
        emit(e, "add.u32 %s, %s, %d;", R(e, j), R(e, cw), k * warps);
        emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, j), R(e, j), n, R(e, rank));
        emit_cluster_merge_row(e, j);
    }
    emit_note(e, "no CTA leaves (its smem with it) before every CTA has read it");
    op_cluster_sync(e);
}
