/* sm100/mha_softmax.c - the softmax warpgroups of the sm_100a MHA forward kernel (sm100/mha.c has the
 * kernel's design): warpgroup t owns query tile t, one row per thread: S from TMEM, the mask (and the
 * score_mod, the paged tail), the lazy max, exp2, P back over S in TMEM, the row sum and max for the
 * correction warpgroup. Every number comes from the plan (sm100/plan.c). */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../score_mod.h"
#include "../softmax.h"
#include "mha100.h"
#include "sm100.h"


/* ------------------------------------------------------------------ */
/* softmax warpgroups                                                   */
/* ------------------------------------------------------------------ */

/* Hide the scores of n registers sx_s<r0..> (columns col0..) outside the row's key range. */
static void sfx_mask_regs(Emit *e, int r0, int col0, int n)
{
    int wl, wr;
    mask_bounds(&e->p->cfg, &wl, &wr);
    Reg sx = reg_find(e, "sx_s"), thi = reg_find(e, "sx_thi"), tlo = wl >= 0 ? reg_find(e, "sx_tlo") : REG_NONE;
    for (int k = 0; k < n; k++) sfx_mask(e, reg_at(e, sx, r0 + k), col0 + k, thi, tlo);
}

/* sx_s<r0 .. r0+n-1> <- S columns col0 .. col0+n-1 of this thread's row. */
static void sfx_load(Emit *e, int r0, int col0, int n)
{
    Reg ta = reg_b32(e, "sx_ta");
    for (int c = 0; c < n;) {
        int k = piece(n - c, sm100_of(e->p)->s_chunk);
        emit(e, "add.u32 %s, %%sx_ts, %d;", R(e, ta), col0 + c);
        op_tmem_ld(e, reg_find(e, "sx_s"), r0 + c, k, ta);
        c += k;
    }
}

static void elems(Emit *e, Reg *out, Reg arr, int r0, int n)
{
    for (int k = 0; k < n; k++) out[k] = reg_at(e, arr, r0 + k);
}

/* P of S columns col0 .. col0+n-1 (registers sx_s<r0..>) to TMEM over S, packed 32 bits a column. */
static void sfx_store_p(Emit *e, int r0, int col0, int n)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    int per = 4 / p->elem_bytes, cols = n / per;
    Reg sx = reg_find(e, "sx_s"), sp = reg_find(e, "sx_p");
    if (s->kind_f8) {
        Reg h0 = reg_b16(e, "sx_h0"), h1 = reg_b16(e, "sx_h1");
        for (int k = 0; k < cols; k++) {
            op_cvt_pack(e, DT_E4M3, h0, reg_at(e, sx, r0 + 4 * k + 1), reg_at(e, sx, r0 + 4 * k));
            op_cvt_pack(e, DT_E4M3, h1, reg_at(e, sx, r0 + 4 * k + 3), reg_at(e, sx, r0 + 4 * k + 2));
            emit(e, "mov.b32 %s, {%s, %s};", R(e, reg_at(e, sp, k)), R(e, h0), R(e, h1));
        }
    } else {
        for (int k = 0; k < cols; k++)
            op_cvt_pack(e, p->cfg.dtype, reg_at(e, sp, k), reg_at(e, sx, r0 + 2 * k + 1), reg_at(e, sx, r0 + 2 * k));
    }
    Reg ta = reg_b32(e, "sx_ta");
    for (int c = 0; c < cols;) {
        int k = piece(cols - c, OP_TMEM_MAX_X);
        emit(e, "add.u32 %s, %%sx_tp, %d;", R(e, ta), col0 / per + c);
        op_tmem_st(e, ta, sp, c, k);
        c += k;
    }
}

/* exp2 of n registers sx_s<r0..> (scale folded in), their sum into dst. */
static void sfx_exp_sum(Emit *e, int r0, int n, Reg dst)
{
    Reg x[256];
    elems(e, x, reg_find(e, "sx_s"), r0, n);
    sfx_exp2_scaled(e, x, n, reg_find(e, "scale_log2"), reg_find(e, "sx_neg_ms"), sm100_of(e->p)->poly_every);
    sfx_sum_tree(e, dst, x, n);
}

/* score_mod on the row's bn scores of block %sx_j (plan note score_mod), before the mask: key
 * j*bn + c, row %sx_seq, both clamped into the problem (what lies outside is masked afterwards). */
static void sfx_score_mod(Emit *e)
{
    const Plan *p = e->p;
    Reg k0 = reg_b32(e, "mod_k0"), k = reg_b32(e, "mod_k"), klast = reg_b32(e, "mod_klast");
    Reg q = reg_b32(e, "mod_q"), sx = reg_find(e, "sx_s");
    emit_note(e, "score_mod (user code, %s) on every score of the row, then the mask", score_mod_link_name[e->mod->link]);
    emit(e, "mul.lo.u32 %s, %%sx_j, %d;", R(e, k0), p->bn);
    emit(e, "sub.u32 %s, %%seqlen_k, 1;", R(e, klast));
    emit(e, "sub.u32 %s, %%seqlen_q, 1;", R(e, q));
    emit(e, "min.u32 %s, %%sx_seq, %s;", R(e, q), R(e, q));
    for (int c = 0; c < p->bn; c++) {
        emit(e, "add.u32 %s, %s, %d;", R(e, k), R(e, k0), c);
        emit(e, "min.u32 %s, %s, %s;", R(e, k), R(e, k), R(e, klast));
        score_mod_site(e, reg_at(e, sx, c), reg_find(e, "bidx"), reg_find(e, "sx_hq"), q, k);
    }
}

/* Paged KV: the keys of a page with no valid table entry (bit i of %pg_bad: page i of the block in
 * min(page, bn)-column boxes) are hidden. */
static void sfx_page_mask(Emit *e)
{
    const Plan *p = e->p;
    int box = p->cfg.page < p->bn ? p->cfg.page : p->bn;
    Reg t = reg_b32(e, "pg_t"), hide = reg_pred(e, "pg_hide"), sx = reg_find(e, "sx_s");
    emit_note(e, "paged kv: hide the keys of pages without a valid table entry");
    for (int i = 0; i < p->bn / box; i++) {
        emit(e, "and.b32 %s, %%pg_bad, %d;", R(e, t), 1 << i);
        emit(e, "setp.ne.u32 %s, %s, 0;", R(e, hide), R(e, t));
        for (int c = i * box; c < (i + 1) * box; c++)
            emit(e, "@%s mov.f32 %s, %s;", R(e, hide), R(e, reg_at(e, sx, c)), PTX_NEG_INF);
    }
}

/* One S block: row max, lazy max update and correction factor (sent early),
 * exp2, row sum, P over S. masked: the block needs the key-range mask. */
static void sfx_block(Emit *e, int masked)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    int bn = p->bn, wl, wr;
    mask_bounds(&p->cfg, &wl, &wr);
    Reg x[256];
    Reg bmax = reg_f32(e, "sx_bmax");
    Reg rs_ = reg_f32(e, "sx_rsum"), cs_ = reg_f32(e, "sx_csum");
    const char *rs = R(e, rs_), *cs = R(e, cs_);
    if (masked) {
        Reg kv0 = reg_b32(e, "sx_kv0");
        emit_note(e, "mask: thresholds of this row relative to the block's first key");
        emit(e, "mul.lo.u32 %s, %%sx_j, %d;", R(e, kv0), bn);
        Reg thi = reg_b32(e, "sx_thi"), tlo = wl >= 0 ? reg_b32(e, "sx_tlo") : REG_NONE;
        sfx_row_bounds(e, reg_find(e, "sx_seq"), kv0, thi, tlo);
    }
    emit_note(e, "S row (%d columns) into registers; max over it", bn);
    sfx_load(e, 0, 0, bn);
    op_tmem_wait_ld(e);
    if (e->mod) sfx_score_mod(e);
    if (p->cfg.softcap || p->cfg.alibi) elems(e, x, reg_find(e, "sx_s"), 0, bn);
    if (p->cfg.softcap) {
        emit_note(e, "plan note softcap: S = tanh(S softcap_scale); scale_log2 is cap log2 e");
        sfx_softcap(e, x, bn);
    }
    if (p->cfg.alibi) {
        Reg d0 = reg_b32(e, "sx_al_d0");
        int col[256];
        for (int c = 0; c < bn; c++) col[c] = c;
        emit_note(e, "plan note alibi: S += -slope |key - diagonal|, key j*bn + column");
        emit(e, "mul.lo.u32 %s, %%sx_j, %d;", R(e, d0), bn);
        emit(e, "sub.s32 %s, %s, %%sx_al_q;", R(e, d0), R(e, d0));
        sfx_alibi(e, x, col, bn, d0, reg_find(e, "sx_al_ns"), reg_f32(e, "sx_al_df"), reg_f32(e, "sx_al_t"));
    }
    if (masked) sfx_mask_regs(e, 0, 0, bn);
    if (masked && p->cfg.page) sfx_page_mask(e);
    elems(e, x, reg_find(e, "sx_s"), 0, bn);
    sfx_max_tree(e, bmax, x, bn);
    sfx_update_max_lazy(e, reg_find(e, "sx_m"), bmax, reg_find(e, "scale_log2"), s->rescale, reg_find(e, "sx_neg_ms"),
                        reg_find(e, "sx_corr"), reg_find(e, "sx_need"));
    emit_note(e, "the correction warpgroup gets this row's O factor before the exp2 work (plan tmem R<t>, bar_corr_full)");
    emit(e, "add.u32 %%sx_ta, %%sx_ts, %u;", s->tm_stats[0] - s->tm_s[0]);
    Reg corr_reg[1] = {reg_find(e, "sx_corr")};
    op_tmem_st_regs(e, reg_find(e, "sx_ta"), corr_reg, 1);
    op_tmem_wait_st(e);
    op_tc_fence_before(e);
    op_mbar_arrive(e, reg_find(e, "sx_bar_corr"));
    emit_note(e, "exp2, row sum and P over S, %d columns at a time (few P registers live)", s->s_chunk);
    for (int c = 0; c < bn; c += s->s_chunk) {
        int n = bn - c < s->s_chunk ? bn - c : s->s_chunk;
        sfx_exp_sum(e, c, n, c ? cs_ : rs_);
        if (c) emit(e, "add.f32 %s, %s, %s;", rs, rs, cs);
        sfx_store_p(e, c, c, n);
    }
    emit(e, "fma.rn.f32 %%sx_l, %%sx_l, %%sx_corr, %s;", rs);
    emit_note(e, "P visible to the MMA warp: wait::st, fence, arrive (plan: bar_p_full)");
    op_tmem_wait_st(e);
    op_tc_fence_before(e);
    arrive_for_mma(e, reg_find(e, "sx_bar_p"), pair(p) ? reg_find(e, "sx_bar_pl") : REG_NONE);
}

/* dst = the query head of this thread's row: the tile's head, plus row / seq_rows when the GQA
 * group is packed into the tile (plan rows). */
void mha100_row_head(Emit *e, Reg dst)
{
    const Sm100Plan *s = sm100_of(e->p);
    if (s->packed) {
        emit_div_imm(e, R(e, dst), "%row", s->seq_rows);
        emit(e, "add.u32 %s, %s, %%head;", R(e, dst), R(e, dst));
    } else {
        emit(e, "mov.u32 %s, %%head;", R(e, dst));
    }
}

static void sfx_setup(Emit *e)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    Reg t_ = reg_b32(e, "sx_t");
    const char *t = R(e, t_), *seq = reg(e, "b32", "sx_seq"), *tmp = reg(e, "b32", "sx_tmp");
    emit(e, "mov.u32 %s, %%wg;", t);
    emit_note(e, "TMEM: S_t at column %d t (plan tmem S<t>), P over it; lane = this thread's row", p->bn);
    emit(e, "mad.lo.u32 %s, %s, %u, %%tmem;", reg(e, "b32", "sx_ts"), t, s->qtiles > 1 ? s->tm_s[1] - s->tm_s[0] : 0);
    emit(e, "add.u32 %%sx_ts, %%sx_ts, %u;", s->tm_s[0]);
    emit(e, "add.u32 %%sx_ts, %%sx_ts, %%tm_lane;");
    emit(e, "add.u32 %s, %%sx_ts, %u;", reg(e, "b32", "sx_tp"), s->tm_p[0] - s->tm_s[0]);
    if (s->packed) {
        emit_note(e, "plan rows: row r = (seq m0 + %d t + r %% %d, head + r / %d)", s->seq_rows, s->seq_rows,
                  s->seq_rows);
        emit_rem_imm(e, seq, "%row", s->seq_rows);
    } else {
        emit_note(e, "plan rows: row r of tile t = seq m0 + %d t + r", s->seq_rows);
        emit(e, "mov.u32 %s, %%row;", seq);
    }
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", tmp, t, s->seq_rows, seq);
    emit(e, "add.u32 %s, %%m0, %s;", seq, tmp);
    if (e->mod) mha100_row_head(e, reg_b32(e, "sx_hq"));
    if (p->cfg.alibi) {
        emit_note(e, "plan note alibi: this row's slope (its head's) and diagonal key, row + seqlen_k - seqlen_q");
        Reg hd = reg_b32(e, "sx_al_h");
        mha100_row_head(e, hd);
        sfx_alibi_slope(e, reg_f32(e, "sx_al_ns"), hd, reg_b64(e, "sx_al_addr"));
        emit(e, "add.u32 %s, %s, %%kv_off;", reg(e, "b32", "sx_al_q"), seq);
    }
    const struct { const char *name; uint32_t off; } bars[] = {
        {"sx_bar_s", s->bar_s_full}, {"sx_bar_corr", s->bar_corr_full}, {"sx_bar_p", s->bar_p_full},
        {"sx_bar_l", s->bar_l_full}};
    for (size_t k = 0; k < sizeof bars / sizeof bars[0]; k++) smem_indexed(e, reg_b32(e, "%s", bars[k].name), bars[k].off, t_, MBAR_BYTES);
    if (pair(p)) lead_addr(e, reg_b32(e, "sx_bar_pl"), reg_find(e, "sx_bar_p"));
}

void mha100_softmax(Emit *e)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    char l_loop[NAME], l_done[NAME], l_masked[NAME], l_next[NAME];
    emit_section(e, "role softmax (warps 0..%d): Q tile = warpgroup, one row per thread; plan regs %d",
                 4 * s->qtiles - 1, s->sfx_regs);
    op_setmaxnreg(e, s->sfx_regs, p->entry_regs);
    mha100_role_context(e, 0);
    sfx_setup(e);
    reg_array(e, "f32", "sx_s", p->bn);
    reg_array(e, "b32", "sx_p", s->s_chunk * p->elem_bytes / 4);
    Reg m_ = reg_f32(e, "sx_m"), l_ = reg_f32(e, "sx_l");
    const char *m = R(e, m_), *l = R(e, l_), *i = reg(e, "b32", "sx_i");
    const char *j = reg(e, "b32", "sx_j");
    Reg par_ = reg_b32(e, "sx_par");
    const char *par = R(e, par_);
    const char *pr = reg(e, "pred", "sx_pr"), *pm = reg(e, "pred", "sx_masked");
    reg(e, "f32", "sx_neg_ms");
    reg(e, "f32", "sx_corr");
    reg(e, "pred", "sx_need");
    emit(e, "mov.f32 %s, %s;", m, PTX_NEG_INF);
    emit(e, "mov.f32 %s, 0f00000000;", l);
    emit(e, "mov.u32 %s, 0;", i);
    if (p->pdl_early_kv) emit(e, "mov.u32 %s, %%n_begin;", j); /* plan pdl early kv: as the load warp */
    else emit(e, "sub.s32 %s, %%n_end, 1;", j);
    emit_label(e, new_label(e, l_loop, sizeof l_loop, "sx_kv"));
    emit(e, "setp.ge.s32 %s, %s, %%nblk;", pr, i);
    emit(e, "@%s bra %s;", pr, new_label(e, l_done, sizeof l_done, "sx_done"));
    emit(e, "and.b32 %s, %s, 1;", par, i);
    emit_note(e, "S_t of this block is in TMEM (plan: bar_s_full; the PV that read the old P is done too)");
    op_mbar_wait(e, reg_find(e, "sx_bar_s"), par_);
    op_tc_fence_after(e);
    emit(e, "setp.ge.s32 %s, %s, %%full_hi;", pm, j);
    emit(e, "setp.lt.or.s32 %s, %s, %%full_lo, %s;", pm, j, pm);
    if (p->cfg.page) {
        Reg bad = reg_b32(e, "pg_bad");
        paged_block_bad(e, reg_find(e, "sx_j"), bad);
        emit(e, "setp.ne.or.u32 %s, %s, 0, %s;", pm, R(e, bad), pm);
    }
    emit(e, "@%s bra %s;", pm, new_label(e, l_masked, sizeof l_masked, "sx_masked"));
    sfx_block(e, 0);
    emit(e, "bra.uni %s;", new_label(e, l_next, sizeof l_next, "sx_next"));
    emit_label(e, l_masked);
    sfx_block(e, 1);
    emit_label(e, l_next);
    emit(e, "add.s32 %s, %s, 1;", i, i);
    emit(e, "%s.s32 %s, %s, 1;", p->pdl_early_kv ? "add" : "sub", j, j);
    emit(e, "bra.uni %s;", l_loop);
    emit_label(e, l_done);
    emit_note(e, "final row sum and max for the epilogue (plan tmem R<t> + 1, + 2; bar_l_full)");
    emit(e, "add.u32 %%sx_ta, %%sx_ts, %u;", s->tm_stats[0] - s->tm_s[0] + s->tm_stats_l);
    Reg lm[2] = {l_, m_};
    op_tmem_st_regs(e, reg_find(e, "sx_ta"), lm, 2);
    op_tmem_wait_st(e);
    op_tc_fence_before(e);
    op_mbar_arrive(e, reg_find(e, "sx_bar_l"));
    emit(e, "bra.uni $exit;");
}
