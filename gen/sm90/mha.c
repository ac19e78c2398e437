/* sm90/mha.c - the sm_90a MHA forward kernel (FlashAttention-3 structure).
 *
 * Roles (plan.roles): warpgroup 0 is the producer: one thread issues every
 * TMA load (Q once per tile, then K and V blocks into a `stages`-deep ring).
 * Warpgroups 1.. are consumers of 64 query rows each:
 *   S = Q K^T       wgmma SS, m64 n=bn, accumulators in registers
 *   softmax         online, log2 domain, two rows per thread (4 lanes a row)
 *   O += P V        wgmma RS: P converted in registers is the A operand
 * PV(j) is still in flight when the consumer issues QK(j+1); the epilogue normalises O,
 * stages it (swizzled) over the Q tile and TMA-stores it; LSE goes straight to
 * global memory. The kernel is persistent: tiles are strided by gridDim.x.
 * Files: this one has the skeleton and the consumer warpgroups; the producer and the scrub warp are in
 * sm90/mha_producer.c, the epilogues in sm90/mha_epilogue.c, what they share in sm90/mha90.h.
 */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../ops.h"
#include "../ops_copy.h"
#include "../score_mod.h"
#include "../softmax.h"
#include "mha90.h"
#include "plan90.h"

/* ------------------------------------------------------------------ */
/* prologue: barriers                                                   */
/* ------------------------------------------------------------------ */

static void emit_barrier_init(Emit *e)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    char lbl[NAME];
    const Mbar q[] = {mbar_plan(e, "bar_q_full"), mbar_plan(e, "bar_q_empty")};
    const Mbar kv[] = {mbar_plan(e, "bar_k_full"), mbar_plan(e, "bar_k_empty"), mbar_plan(e, "bar_v_full"),
                       mbar_plan(e, "bar_v_empty")};
    Reg b = mbar_init_begin(e, lbl, sizeof lbl, "prologue: mbarrier init (thread 0), then every thread syncs");
    for (int i = 0; i < s->q_slots; i++) {
        emit_note(e, "plan: Q slot %d", i);
        for (size_t k = 0; k < sizeof q / sizeof q[0]; k++) mbar_init(e, b, &q[k], i);
        if (p->cfg.dynamic) {
            const Mbar t = mbar_plan(e, "bar_tile");
            mbar_init(e, b, &t, i);
        }
    }
    for (int i = 0; i < p->stages; i++) {
        emit_note(e, "plan: ring stage %d", i);
        for (size_t k = 0; k < sizeof kv / sizeof kv[0]; k++) mbar_init(e, b, &kv[k], i);
    }
    if (s->watch_warp >= 0) {
        const Mbar prev = mbar_plan(e, "bar_prev");
        emit_note(e, "plan pdl watch: the previous grid done");
        mbar_init(e, b, &prev, 0);
    }
    if (p->kv_tail) {
        const Mbar tail = mbar_plan(e, "bar_v_tail");
        for (int i = 0; i < p->stages; i++) {
            emit_note(e, "plan kv tail: stage %d's tail barrier", i);
            mbar_init(e, b, &tail, i);
        }
    }
    mbar_init_end(e, lbl);
    op_bar_sync(e, 0, p->threads);
}

/* ------------------------------------------------------------------ */
/* consumer                                                             */
/* ------------------------------------------------------------------ */

/* Descriptor start-field step of K step kk inside a K-major chunked tile. */
static uint32_t kmajor_step(const Plan *p, int kk, uint32_t chunk_bytes)
{
    int k_step = sm90_frag(p).k_step;
    return op_desc_kstep(kk, p->chunk_elems / k_step, (uint32_t)(k_step * p->elem_bytes), chunk_bytes);
}

static void emit_qk(Emit *e, Reg stage)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    Reg addr_ = reg_b32(e, "cs_k_addr");
    const char *addr = R(e, addr_);
    Reg qd = reg_b64(e, "cs_qd"), kd = reg_b64(e, "cs_kd");
    const char *qlo = reg(e, "b32", "cs_qd_lo"), *klo = reg(e, "b32", "cs_kd_lo");
    Sm90Frag f = sm90_frag(p);
    emit_note(e, "S = Q K^T: %d x wgmma m64n%dk16 SS (plan: qk wgmma)", f.qk_steps, p->bn);
    addr_indexed(e, addr_, reg_find(e, "cs_k0"), stage, s->k_stage_bytes);
    emit_note(e, "descriptors differ only in the start-address field: step the low word, keep the high word");
    emit(e, "shr.u32 %s, %s, 4;", addr, addr);
    emit(e, "or.b32 %s, %s, 0x%08X;", addr, addr, sm90_desc_lo_lbo(16));
    op_wgmma_fence(e);
    for (int kk = 0; kk < f.qk_steps; kk++) {
        emit(e, "add.u32 %s, %%cs_q_lo, %u;", qlo, kmajor_step(p, kk, s->q_chunk_bytes));
        emit(e, "add.u32 %s, %s, %u;", klo, addr, kmajor_step(p, kk, s->k_chunk_bytes));
        emit(e, "mov.b64 %s, {%s, %%cs_desc_hi};", R(e, qd), qlo);
        emit(e, "mov.b64 %s, {%s, %%cs_desc_hi};", R(e, kd), klo);
        op_wgmma_ss(e, p->bn, p->cfg.dtype, reg_find(e, "s"), qd, kd, kk ? 1 : 0, 0);
    }
    op_wgmma_commit(e);
}

/* O = 0 (plan note o zero: a tile without kv blocks; with o_zero=1 every tile, at its top) */
static void emit_zero_o(Emit *e)
{
    Sm90Frag f = sm90_frag(e->p);
    for (int i = 0; i < f.o_regs; i++) emit(e, "mov.f32 %%o%d, 0f00000000;", i);
}

/* O += P V over the block's first `steps` k16 steps of keys (all, or half under plan note diag half). */
static void emit_pv(Emit *e, Reg stage, int steps)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    Reg addr = reg_b32(e, "cs_v_addr");
    Reg vdesc = reg_b64(e, "cs_v_desc"), vd = reg_b64(e, "cs_vd");
    uint32_t sw = (uint32_t)p->swizzle_bytes;
    Sm90Frag f = sm90_frag(p);
    emit_note(e, "O += P V: %d x wgmma m64n%dk16 RS, V MN-major (LBO = chunk stride %u, SBO = 8 rows)%s", steps,
              p->ov, s->v_chunk_bytes, steps < f.pv_steps ? "; diag half: the keys of the block's first half" : "");
    addr_indexed(e, addr, reg_find(e, "cs_v0"), stage, s->v_stage_bytes);
    op_sm90_desc(e, vdesc, addr, s->v_chunk_bytes, 8 * sw, p->swizzle_bytes);
    op_wgmma_fence(e);
    Reg acc = p->cfg.o_zero ? REG_NONE : reg_find(e, "cs_o_acc");
    for (int kb = 0; kb < steps; kb++) {
        Reg ap[4];
        for (int i = 0; i < f.a_regs; i++) ap[i] = reg_at(e, reg_find(e, "pa"), f.a_regs * kb + i);
        emit(e, "add.s64 %s, %s, %u;", R(e, vd), R(e, vdesc), op_desc_delta((uint32_t)kb * (uint32_t)f.k_step * sw));
        op_wgmma_rs(e, p->ov, p->cfg.dtype, reg_find(e, "o"), ap, vd, kb ? REG_NONE : acc, 1);
    }
    op_wgmma_commit(e);
    if (acc.id) {
        emit_note(e, "plan note o zero: the tile's later P Vs accumulate");
        emit(e, "setp.eq.u32 %s, 0, 0;", R(e, acc));
    }
}

/* score_mod on this thread's scores of block %cs_j (plan note score_mod), before the mask:
 * element (h, q, x) is row m0 + cs_row<h>, key j*bn + 2*(lane%4) + 8q + x, both clamped into
 * the problem (what lies outside is masked afterwards). */
static void emit_score_mod(Emit *e, Reg row[MAX_HALVES][128], int cols)
{
    const Plan *p = e->p;
    Reg k0 = reg_b32(e, "mod_k0"), k = reg_b32(e, "mod_k"), klast = reg_b32(e, "mod_klast");
    Reg qlast = reg_b32(e, "mod_qlast"), q[2] = {reg_b32(e, "mod_q0"), reg_b32(e, "mod_q1")};
    emit_note(e, "score_mod (user code, %s) on every score of the block, then the mask",
              score_mod_link_name[e->mod->link]);
    emit(e, "mul.lo.u32 %s, %%cs_j, %d;", R(e, k0), p->bn);
    emit(e, "add.u32 %s, %s, %%cs_lm2;", R(e, k0), R(e, k0));
    emit(e, "sub.u32 %s, %%seqlen_k, 1;", R(e, klast));
    emit(e, "sub.u32 %s, %%seqlen_q, 1;", R(e, qlast));
    for (int h = 0; h < 2; h++) {
        emit(e, "add.u32 %s, %%m0, %%cs_row%d;", R(e, q[h]), h);
        emit(e, "min.u32 %s, %s, %s;", R(e, q[h]), R(e, q[h]), R(e, qlast));
    }
    for (int c = 0; c < cols / 8; c++)
        for (int x = 0; x < 2; x++) {
            emit(e, "add.u32 %s, %s, %d;", R(e, k), R(e, k0), 8 * c + x);
            emit(e, "min.u32 %s, %s, %s;", R(e, k), R(e, k), R(e, klast));
            for (int h = 0; h < 2; h++)
                score_mod_site(e, row[h][2 * c + x], reg_find(e, "bidx"), reg_find(e, "head"), q[h], k);
        }
}

/* Paged KV: the keys of a page with no valid table entry (bit i of %pg_bad, page i of the block in
 * min(page, bn)-row boxes) are hidden. A thread's columns 8q + 2*(lane%4) + x lie in box 8q / box. */
static void emit_page_mask(Emit *e, Reg row[MAX_HALVES][128], int cols)
{
    const Plan *p = e->p;
    int box = p->cfg.page < p->bn ? p->cfg.page : p->bn;
    Reg t = reg_b32(e, "pg_t"), bad = reg_pred(e, "pg_hide");
    emit_note(e, "paged kv: hide the keys of pages without a valid table entry");
    for (int i = 0; i < p->bn / box && i * box < cols; i++) {
        emit(e, "and.b32 %s, %%pg_bad, %d;", R(e, t), 1 << i);
        emit(e, "setp.ne.u32 %s, %s, 0;", R(e, bad), R(e, t));
        for (int q = i * box / 8; q < (i + 1) * box / 8 && q < cols / 8; q++)
            for (int h = 0; h < 2; h++)
                for (int x = 0; x < 2; x++) emit(e, "@%s mov.f32 %s, %s;", R(e, bad), R(e, row[h][2 * q + x]), PTX_NEG_INF);
    }
}

/* Online softmax of the first `cols` columns of one S block (bn, or bn / 2 under plan note diag half); masked
 * blocks first set hidden scores to -inf. */
static void emit_softmax(Emit *e, int masked, int cols)
{
    const Plan *p = e->p;
    Sm90Frag f = sm90_frag(p);
    int wl, wr, n = f.s_regs / f.halves * cols / p->bn; /* registers per row half */
    mask_bounds(&p->cfg, &wl, &wr);
    Reg s_acc = reg_find(e, "s"), row[MAX_HALVES][128];
    for (int h = 0; h < f.halves; h++)
        for (int q = 0; q < cols / 8; q++)
            for (int x = 0; x < 2; x++) row[h][2 * q + x] = reg_at(e, s_acc, s_index(q, h, x));
    if (e->mod) emit_score_mod(e, row, cols);
    if (p->cfg.softcap) {
        emit_note(e, "plan note softcap: S = tanh(S softcap_scale); scale_log2 is cap log2 e");
        for (int h = 0; h < 2; h++) sfx_softcap(e, row[h], n);
    }
    if (p->cfg.alibi) {
        Reg d0 = reg_b32(e, "cs_al_d0"), df = reg_f32(e, "cs_al_df"), t = reg_f32(e, "cs_al_t");
        int col[128];
        for (int q = 0; q < cols / 8; q++)
            for (int x = 0; x < 2; x++) col[2 * q + x] = 8 * q + x;
        emit_note(e, "plan note alibi: S += -slope |key - diagonal|, key j*bn + 2*(lane%%4) + column");
        for (int h = 0; h < 2; h++) {
            emit(e, "mul.lo.u32 %s, %%cs_j, %d;", R(e, d0), p->bn);
            emit(e, "add.u32 %s, %s, %%cs_lm2;", R(e, d0), R(e, d0));
            emit(e, "sub.s32 %s, %s, %%cs_al_q%d;", R(e, d0), R(e, d0), h);
            sfx_alibi(e, row[h], col, n, d0, reg_find(e, "cs_al_ns%d", h), df, t);
        }
    }
    if (masked) {
        emit_note(e, "mask: column c of this thread is key j*bn + 2*(lane%%4) + c; hide it past the row's bounds");
        for (int h = 0; h < 2; h++) {
            Reg thi = reg_find(e, "cs_t_hi%d", h), tlo = wl >= 0 ? reg_find(e, "cs_t_lo%d", h) : REG_NONE;
            for (int q = 0; q < cols / 8; q++)
                for (int x = 0; x < 2; x++) sfx_mask(e, row[h][2 * q + x], 8 * q + x, thi, tlo);
        }
        if (p->cfg.page) emit_page_mask(e, row, cols);
    }
    emit_note(e, "row max over the thread's columns, then over the 4 lanes of the row");
    for (int h = 0; h < 2; h++) sfx_max_tree(e, reg_f32(e, "cs_bmax%d", h), row[h], n);
    Reg t = reg_f32(e, "cs_shfl"), scale_log2 = reg_find(e, "scale_log2");
    for (int h = 0; h < 2; h++) sfx_reduce_lanes(e, "max", reg_find(e, "cs_bmax%d", h), t, f.lanes_per_row);
    for (int h = 0; h < 2; h++) {
        /* declared in this order, as the PTX has them */
        Reg need = reg_pred(e, "cs_need%d", h), corr = reg_f32(e, "cs_corr%d", h), nms = reg_f32(e, "cs_neg_ms%d", h);
        sfx_update_max_lazy(e, reg_find(e, "cs_m%d", h), reg_find(e, "cs_bmax%d", h), scale_log2, sm90_of(p)->rescale,
                            nms, corr, need);
    }
    emit_note(e, "the warp skips the O rescale unless one of its rows moved its max");
    emit(e, "or.pred %%cs_need0, %%cs_need0, %%cs_need1;");
    op_vote_any(e, reg_pred(e, "cs_rescale"), reg_find(e, "cs_need0"));
    emit_note(e, "P = exp2(S * scale_log2 - m * scale_log2); row sums stay per thread until the epilogue");
    for (int h = 0; h < 2; h++) {
        sfx_exp2_scaled(e, row[h], n, scale_log2, reg_find(e, "cs_neg_ms%d", h), sm90_of(p)->poly_every);
        Reg rs = reg_f32(e, "cs_rsum%d", h);
        sfx_sum_tree(e, rs, row[h], n);
        emit(e, "fma.rn.f32 %%cs_l%d, %%cs_l%d, %%cs_corr%d, %s;", h, h, h, R(e, rs));
    }
}

/* O *= exp2(m_old - m_new), row by row; O must not be in flight. */
static void emit_rescale_o(Emit *e)
{
    const Plan *p = e->p;
    char skip[NAME];
    emit_note(e, "rescale O by this block's correction (no PV in flight), when the warp's vote asks for it");
    emit(e, "@!%%cs_rescale bra %s;", new_label(e, skip, sizeof skip, "cs_no_rescale"));
    for (int q = 0; q < p->ov / 8; q++)
        for (int h = 0; h < 2; h++)
            for (int x = 0; x < 2; x++)
                emit(e, "mul.f32 %%o%d, %%o%d, %%cs_corr%d;", s_index(q, h, x), s_index(q, h, x), h);
    emit_label(e, skip);
}

/* P (bf16/fp16 pairs) from S: the accumulator layout is the A-fragment layout
 * of the PV wgmma, so register j of k-block kb packs S[8kb+2j], S[8kb+2j+1]. */
static void emit_convert_p_steps(Emit *e, int steps)
{
    const Plan *p = e->p;
    emit_note(e, "P to the A-fragment layout of the PV wgmma: same registers, no shuffles%s",
              steps < sm90_frag(p).pv_steps ? " (diag half: the block's first half)" : "");
    Sm90Frag f = sm90_frag(p);
    for (int kb = 0; kb < steps; kb++)
        for (int i = 0; i < f.a_regs; i++) {
            int j = f.a_regs * kb + i; /* P register j packs S registers 2j, 2j + 1 */
            Reg s_acc = reg_find(e, "s");
            op_cvt_pack(e, p->cfg.dtype, reg_at(e, reg_find(e, "pa"), j), reg_at(e, s_acc, 2 * j + 1),
                        reg_at(e, s_acc, 2 * j));
        }
}

/* plan note diag half: `full` at full width, and at half width where `pred` holds (a block whose upper half this
 * consumer does not see); kernels without the note get the full width alone. */
typedef void WidthFn(Emit *e, Reg stage, int width);
static void emit_by_width(Emit *e, const char *pred, WidthFn *fn, Reg stage, int full)
{
    char l_half[NAME], l_done[NAME];
    if (!sm90_of(e->p)->diag_half) {
        fn(e, stage, full);
        return;
    }
    emit(e, "@%%%s bra %s;", pred, new_label(e, l_half, sizeof l_half, "cs_half"));
    new_label(e, l_done, sizeof l_done, "cs_half_done");
    fn(e, stage, full);
    emit(e, "bra.uni %s;", l_done);
    emit_label(e, l_half);
    fn(e, stage, full / 2);
    emit_label(e, l_done);
}

static void emit_convert_p_width(Emit *e, Reg unused, int steps)
{
    (void)unused;
    emit_convert_p_steps(e, steps);
}

static void emit_convert_p(Emit *e)
{
    emit_by_width(e, "cs_half", emit_convert_p_width, REG_NONE, sm90_frag(e->p).pv_steps);
}

/* plan note diag half: %cs_half_key = the last key any row of this consumer sees, less bn / 2 (a block j with
 * j * bn above it has no visible key in its upper half): the mask's own bound (sfx_row_bounds) for the consumer's
 * last row, taken relative to key bn / 2. Rows past seqlen_q count: their outputs are never stored. */
static void emit_half_key(Emit *e)
{
    if (!sm90_of(e->p)->diag_half) return;
    Reg row = reg_b32(e, "cs_half_rowg"), half = reg_b32(e, "cs_half_b2");
    emit_note(e, "plan note diag half: the last key this consumer's rows see, less half a block");
    emit(e, "add.u32 %s, %%m0, %%cs_half_row;", R(e, row));
    emit(e, "mov.u32 %s, %d;", R(e, half), e->p->bn / 2);
    sfx_row_bounds(e, row, half, reg_find(e, "cs_half_key"), REG_NONE);
}

/* plan note diag half: the sequence offset (from m0) of consumer w's last row: 64 w + 63, or the largest r % seq_rows
 * over its rows when the GQA group is packed. */
static void emit_half_row(Emit *e)
{
    const Sm90Plan *s = sm90_of(e->p);
    if (!s->diag_half) return;
    Reg hr = reg_b32(e, "cs_half_row"), pw = reg_pred(e, "cs_half_w");
    reg_b32(e, "cs_half_key");
    reg_pred(e, "cs_half");
    reg_pred(e, "cs_pv_half");
    emit_note(e, "plan note diag half: this consumer's last row, from m0");
    for (int w = 0; w < s->consumers; w++) {
        int last = 0;
        for (int r = w * s->mma_m; r < (w + 1) * s->mma_m; r++) {
            int off = s->packed ? r % s->seq_rows : r;
            if (off > last) last = off;
        }
        if (!w) {
            emit(e, "mov.u32 %s, %d;", R(e, hr), last);
            continue;
        }
        emit(e, "setp.eq.u32 %s, %%cs_w, %d;", R(e, pw), w);
        emit(e, "@%s mov.u32 %s, %d;", R(e, pw), R(e, hr), last);
    }
}

/* Mask bounds of this thread's two rows relative to its first key in block j
 * (kv0 = j * bn): t_hi = last visible key - kv0 - 2*(lane%4), t_lo likewise for
 * the first. Recomputed per masked block, so nothing extra stays live in the loop. */
static void emit_row_bounds(Emit *e, Reg kv0)
{
    int wl, wr;
    mask_bounds(&e->p->cfg, &wl, &wr);
    Reg r = reg_b32(e, "cs_rowg");
    emit(e, "add.u32 %s, %s, %%cs_lm2;", R(e, kv0), R(e, kv0));
    for (int h = 0; h < 2; h++) {
        emit(e, "add.u32 %s, %%m0, %s;", R(e, r), row_seq(e, h));
        Reg lo = wl >= 0 ? reg_b32(e, "cs_t_lo%d", h) : REG_NONE; /* declared first, as the PTX has it */
        sfx_row_bounds(e, r, kv0, reg_b32(e, "cs_t_hi%d", h), lo);
    }
}


static void emit_consumer_setup(Emit *e)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    int sw = p->swizzle_bytes;
    const char *w = reg(e, "b32", "cs_w"), *wl = reg(e, "b32", "cs_wl"), *lm = reg(e, "b32", "cs_lm");
    const char *r0 = reg(e, "b32", "cs_row0"), *r1 = reg(e, "b32", "cs_row1");
    Sm90Frag f = sm90_frag(p);
    emit(e, "sub.u32 %s, %%wg, 1;", w);
    emit(e, "and.b32 %s, %%warp, 3;", wl);
    emit(e, "and.b32 %s, %%lane, 3;", lm);
    emit_note(e, "accumulator rows of this thread: 64*consumer + 16*warp + lane/4 (+8)");
    emit(e, "shr.u32 %s, %%lane, 2;", r0);
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", r0, wl, f.warp_rows, r0);
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", r0, w, s->mma_m, r0);
    emit(e, "add.u32 %s, %s, %d;", r1, r0, f.half_rows);
    if (s->packed) {
        emit_note(e, "plan rows (GQA packed): row r = (seq m0 + r %% %d, head + r / %d)", s->seq_rows, s->seq_rows);
        for (int h = 0; h < 2; h++) {
            const char *row = h ? "%cs_row1" : "%cs_row0";
            emit_rem_imm(e, reg(e, "b32", h ? "cs_seq1" : "cs_seq0"), row, (unsigned)s->seq_rows);
            emit_div_imm(e, reg(e, "b32", h ? "cs_hoff1" : "cs_hoff0"), row, (unsigned)s->seq_rows);
        }
    }
    emit(e, "shl.b32 %s, %s, 1;", reg(e, "b32", "cs_lm2"), lm);
    emit(e, "setp.eq.u32 %s, %s, 0;", reg(e, "pred", "cs_lm0"), lm);
    emit(e, "setp.eq.u32 %s, %%lane, 0;", reg(e, "pred", "cs_lane0"));
    emit(e, "setp.eq.u32 %s, %%thread, %s;", reg(e, "pred", "cs_leader"), "%cs_first_tid");
    smem_reg(e, "cs_q0", s->off_q);
    smem_reg(e, "cs_k0", s->off_k);
    smem_reg(e, "cs_v0", s->off_v);
    smem_reg(e, "cs_k_full", s->bar_k_full);
    smem_reg(e, "cs_k_empty", s->bar_k_empty);
    smem_reg(e, "cs_v_full", s->bar_v_full);
    smem_reg(e, "cs_v_empty", s->bar_v_empty);
    smem_reg(e, "cs_q_full", s->bar_q_full);
    smem_reg(e, "cs_q_empty", s->bar_q_empty);
    emit(e, "add.u32 %s, %s, %d;", reg(e, "b32", "cs_epi_bar"), w, s->bar_epilogue0);
    if (s->pingpong) {
        const char *t = reg(e, "b32", "cs_turn"), *tn = reg(e, "b32", "cs_turn_next");
        Reg pl = reg_pred(e, "cs_last_consumer");
        emit_note(e, "plan: turn barriers %d..%d; the last consumer hands the first turn to consumer 0",
                  s->bar_turn0, s->bar_turn0 + s->consumers - 1);
        emit(e, "add.u32 %s, %s, %d;", t, w, s->bar_turn0);
        emit(e, "add.u32 %s, %s, 1;", tn, w);
        emit(e, "setp.eq.u32 %s, %s, %d;", R(e, pl), tn, s->consumers);
        emit(e, "@%s mov.u32 %s, 0;", R(e, pl), tn);
        emit(e, "add.u32 %s, %s, %d;", tn, tn, s->bar_turn0);
        op_bar_arrive_if(e, pl, s->bar_turn0, named_bar_threads(p, s->bar_turn0));
    }
    if (p->cfg.timeline) {
        emit_note(e, "timeline: consumer 0's and the last consumer's first threads stamp");
        int wg_threads = p->threads / (s->consumers + 1);
        emit(e, "setp.eq.u32 %s, %%thread, %d;", R(e, reg_pred(e, "tl_c0")), wg_threads);
        emit(e, "setp.eq.u32 %s, %%thread, %d;", R(e, reg_pred(e, "tl_cl")), wg_threads * s->consumers);
    }
    emit_note(e, "this consumer's Q rows: the wgmma A descriptor (K-major, SBO = 8 rows)");
    emit(e, "mad.lo.u32 %s, %s, %d, %%cs_q0;", reg(e, "b32", "cs_qrows"), w, s->mma_m * sw);
    emit(e, "mov.b32 %s, 0x%08X;", reg(e, "b32", "cs_desc_hi"), sm90_desc_hi(8u * (uint32_t)sw, sw));
    emit_half_row(e);
}

/* Paged KV: the table entries of block %cs_j, read before the ping-pong turn so that their latency
 * does not hold the other consumer's wgmmas (plan note paged table). */
static void emit_page_check(Emit *e)
{
    if (e->p->cfg.page) paged_block_bad(e, reg_find(e, "cs_j"), reg_b32(e, "pg_bad"));
}

/* Wait for K of block %cs_j in ring slot %cs_stage and issue S = Q K^T. */
static void emit_issue_qk(Emit *e)
{
    Reg bar = reg_b32(e, "cs_bar");
    const char *pmask = reg(e, "pred", "cs_need_mask");
    emit_note(e, "blocks outside [full_lo, full_hi) take the masked softmax");
    emit(e, "setp.ge.s32 %s, %%cs_j, %%full_hi;", pmask);
    emit(e, "setp.lt.or.s32 %s, %%cs_j, %%full_lo, %s;", pmask, pmask);
    if (sm90_of(e->p)->diag_half) {
        Reg kv0 = reg_b32(e, "cs_half_kv0");
        emit_note(e, "plan note diag half: does this consumer see none of the block's upper half?");
        emit(e, "mul.lo.s32 %s, %%cs_j, %d;", R(e, kv0), e->p->bn);
        emit(e, "setp.lt.s32 %%cs_half, %%cs_half_key, %s;", R(e, kv0));
    }
    mbar_indexed(e, bar, reg_find(e, "cs_k_full"), reg_find(e, "cs_stage"));
    op_mbar_wait(e, bar, reg_find(e, "cs_phase"));
    emit_qk(e, reg_find(e, "cs_stage"));
    if (e->p->cfg.page) { /* the table read's result, used only after the wgmmas are issued */
        emit_note(e, "paged kv: a block with a page without a valid entry takes the masked softmax");
        emit(e, "setp.ne.or.u32 %s, %%pg_bad, 0, %s;", pmask, pmask);
    }
}

/* Wait for V of the block whose P is in registers (slot %cs_pv_stage) and issue O += P V. */
static void emit_issue_pv(Emit *e)
{
    Reg bar = reg_b32(e, "cs_bar"), stage = reg_find(e, "cs_pv_stage");
    mbar_indexed(e, bar, reg_find(e, "cs_v_full"), stage);
    op_mbar_wait(e, bar, reg_find(e, "cs_pv_phase"));
    emit_by_width(e, "cs_pv_half", emit_pv, stage, sm90_frag(e->p).pv_steps);
}

static void emit_release(Emit *e, Reg empty, Reg stage)
{
    Reg bar = reg_b32(e, "cs_bar");
    mbar_indexed(e, bar, empty, stage);
    op_mbar_arrive_if(e, reg_find(e, "cs_lane0"), bar);
}

/* Softmax of S for block %cs_j, the masked variant for blocks that need it. */
static void emit_masked_softmax(Emit *e, int cols)
{
    emit_note(e, "this thread's row bounds relative to its first key in the block");
    Reg kv0 = reg_b32(e, "cs_kv0");
    emit(e, "mul.lo.u32 %s, %%cs_j, %d;", R(e, kv0), e->p->bn);
    emit_row_bounds(e, kv0);
    emit_softmax(e, 1, cols);
}

static void emit_softmax_block(Emit *e)
{
    char l_masked[NAME], l_sfx[NAME], l_half[NAME];
    int bn = e->p->bn, half = sm90_of(e->p)->diag_half;
    if (half) emit(e, "@%%cs_half bra %s;", new_label(e, l_half, sizeof l_half, "cs_half_softmax"));
    emit(e, "@%%cs_need_mask bra %s;", new_label(e, l_masked, sizeof l_masked, "cs_masked"));
    new_label(e, l_sfx, sizeof l_sfx, "cs_softmax_done");
    emit_softmax(e, 0, bn);
    emit(e, "bra.uni %s;", l_sfx);
    emit_label(e, l_masked);
    emit_masked_softmax(e, bn);
    if (half) {
        emit(e, "bra.uni %s;", l_sfx);
        emit_label(e, l_half);
        emit_note(e, "plan note diag half: the block's upper half is hidden from every row of this consumer");
        emit_masked_softmax(e, bn / 2);
    }
    emit_label(e, l_sfx);
}

/* The slot just consumed becomes the one whose V the next PV reads; step the ring. */
static void emit_next_slot(Emit *e)
{
    emit(e, "mov.u32 %%cs_pv_stage, %%cs_stage;");
    emit(e, "mov.u32 %%cs_pv_phase, %%cs_phase;");
    if (sm90_of(e->p)->diag_half) emit(e, "mov.pred %%cs_pv_half, %%cs_half;");
    ring_advance(e, reg_find(e, "cs_stage"), reg_find(e, "cs_phase"), e->p->stages);
}

/* Ping-pong: a consumer issues its wgmmas only in its turn, so one warpgroup's
 * softmax runs while the other's GEMMs occupy the tensor core (plan: turn<w>). */
static void emit_turn_begin(Emit *e)
{
    const Sm90Plan *s = sm90_of(e->p);
    if (s->pingpong) op_bar_sync_at(e, REG_NONE, reg_find(e, "cs_turn"), named_bar_threads(e->p, s->bar_turn0));
}

static void emit_turn_end(Emit *e)
{
    const Sm90Plan *s = sm90_of(e->p);
    if (s->pingpong) op_bar_arrive_at(e, REG_NONE, reg_find(e, "cs_turn_next"), named_bar_threads(e->p, s->bar_turn0));
}

/* plan note q release: the previous tile's Q slot, whose O store the leader issued (%cs_q_pend), is freed
 * once that store has read smem; called after this tile's first QK is issued (and where a tile has no
 * keys), so the wait, long over by then, holds nothing. With two slots the previous one is slot ^ 1. */
static void emit_q_release_pending(Emit *e)
{
    char l_done[NAME];
    if (!sm90_of(e->p)->q_release_late) return;
    Reg pend = reg_find(e, "cs_q_pend"), bar = reg_b32(e, "cs_bar");
    emit_note(e, "plan note q release: free the previous tile's Q slot once its O store has read it");
    emit(e, "@!%s bra %s;", R(e, pend), new_label(e, l_done, sizeof l_done, "cs_q_released"));
    op_bulk_wait_read(e, 0);
    emit(e, "xor.b32 %s, %%cs_q_slot, 1;", R(e, bar));
    mbar_indexed(e, bar, reg_find(e, "cs_q_empty"), bar);
    op_mbar_arrive(e, bar);
    emit(e, "setp.ne.u32 %s, %%wg, %%wg;", R(e, pend));
    emit_label(e, l_done);
}

void mha90_dyn_tile_read(Emit *e, Reg dst, Reg slot, Reg parity)
{
    Reg bar = reg_b32(e, "cs_tile_bar"), word = reg_b32(e, "cs_tile_word");
    mbar_indexed(e, bar, reg_find(e, "cs_tile_bar0"), slot);
    op_mbar_wait(e, bar, parity);
    addr_indexed(e, word, reg_find(e, "cs_tile_ids"), slot, 4);
    op_ld_shared_b32(e, dst, word, 0);
}

/* The next tile: the walk's (mha_tile_peek), or (plan note dynamic tiles) the one the producer wrote into the other
 * Q slot's tile word -- slot ^ 1, whose phase is this one's flipped when this is slot 1 (ring_advance) */
static void emit_next_tile(Emit *e, Reg dst)
{
    if (!e->p->cfg.dynamic) {
        mha_tile_peek(e, R(e, dst));
        return;
    }
    Reg slot = reg_b32(e, "cs_nx_slot"), par = reg_b32(e, "cs_nx_par");
    emit_note(e, "plan note dynamic tiles: the next tile is the producer's word in the other Q slot");
    emit(e, "xor.b32 %s, %%cs_q_slot, 1;", R(e, slot));
    emit(e, "xor.b32 %s, %%cs_q_phase, %%cs_q_slot;", R(e, par));
    mha90_dyn_tile_read(e, dst, slot, par);
}

/* plan note coords ahead: the next tile's coordinates (mha_tile_peek) into %cs_nx_<reg>, computed while this
 * tile's last P V runs (a tile without keys leaves them to the next tile's top); this tile's own stay in place
 * (saved around the computation). */
static void emit_coords_ahead(Emit *e)
{
    char l_skip[NAME];
    if (!sm90_of(e->p)->coords_ahead) return;
    Reg nx = reg_b32(e, "cs_nx_tile"), sv = reg_b32(e, "cs_sv_tile"), p = reg_pred(e, "cs_nx_none");
    emit_note(e, "plan note coords ahead: the next tile's coordinates while the last P V runs");
    emit_next_tile(e, nx);
    emit(e, "setp.ge.u32 %s, %s, %%num_tiles;", R(e, p), R(e, nx));
    emit(e, "@%s bra %s;", R(e, p), new_label(e, l_skip, sizeof l_skip, "cs_no_next"));
    for (int i = 0; i < MHA_TILE_COORD_REGS; i++)
        emit(e, "mov.u32 %s, %%%s;", R(e, reg_b32(e, "cs_sv_%s", mha_tile_coord_regs[i])), mha_tile_coord_regs[i]);
    emit(e, "mov.u32 %s, %%tile;", R(e, sv));
    emit(e, "mov.u32 %%tile, %s;", R(e, nx));
    tile_coords(e);
    emit(e, "mov.u32 %%tile, %s;", R(e, sv));
    for (int i = 0; i < MHA_TILE_COORD_REGS; i++) {
        const char *r = mha_tile_coord_regs[i];
        emit(e, "mov.u32 %s, %%%s;", R(e, reg_b32(e, "cs_nx_%s", r)), r);
        emit(e, "mov.u32 %%%s, %s;", r, R(e, reg_find(e, "cs_sv_%s", r)));
    }
    emit(e, "setp.eq.u32 %%cs_nx_ok, %%wg, %%wg;");
    emit_label(e, l_skip);
}

/* The tile's coordinates: computed here, or (plan note coords ahead) taken from those the tile before computed. */
static void emit_tile_top_coords(Emit *e)
{
    char l_take[NAME], l_done[NAME];
    if (!sm90_of(e->p)->coords_ahead) {
        tile_coords(e);
        return;
    }
    emit(e, "@%%cs_nx_ok bra %s;", new_label(e, l_take, sizeof l_take, "cs_coords_ahead"));
    tile_coords(e);
    emit(e, "bra.uni %s;", new_label(e, l_done, sizeof l_done, "cs_coords_done"));
    emit_label(e, l_take);
    emit_note(e, "plan note coords ahead: computed by the tile before");
    for (int i = 0; i < MHA_TILE_COORD_REGS; i++)
        emit(e, "mov.u32 %%%s, %s;", mha_tile_coord_regs[i], R(e, reg_find(e, "cs_nx_%s", mha_tile_coord_regs[i])));
    emit_label(e, l_done);
    emit(e, "setp.ne.u32 %%cs_nx_ok, %%wg, %%wg;");
}

/* Main loop, FlashAttention-3 intra-warpgroup pipeline: while the tensor core
 * runs QK(j) and PV(j+1), the warpgroup does the softmax of block j.
 *   first block:  QK, wait, softmax -> P
 *   each next:    issue QK(j) and PV(previous P); wait QK; softmax(j); wait PV;
 *                 rescale O (only when a row max moved); P = S
 *   last:         PV(P); wait
 * The ping-pong turn covers only the two issues, so the other warpgroup waits little. */
static void emit_mainloop(Emit *e)
{
    char l_kv[NAME], l_kv_done[NAME], l_empty[NAME];
    const char *pr = reg(e, "pred", "cs_p");
    reg(e, "b32", "cs_pv_stage");
    reg(e, "b32", "cs_pv_phase");
    emit(e, "setp.le.s32 %s, %%n_end, %%n_begin;", pr);
    emit(e, "@%s bra %s;", pr, new_label(e, l_empty, sizeof l_empty, "cs_no_keys"));
    emit_section(e, "consumer mainloop: first block");
    int up = e->p->pdl_early_kv; /* plan pdl early kv: blocks in ascending order, as the producer loads them */
    if (up) emit(e, "mov.u32 %%cs_j, %%n_begin;");
    else emit(e, "sub.s32 %%cs_j, %%n_end, 1;");
    emit_page_check(e);
    emit_turn_begin(e);
    emit_issue_qk(e);
    emit_turn_end(e);
    if (e->p->cfg.timeline) {
        mha90_tl_stamp(e, reg_find(e, "tl_c0"), TL_C_QK0);
        mha90_tl_stamp(e, reg_find(e, "tl_cl"), TL_CL_QK0);
    }
    emit_q_release_pending(e);
    op_wgmma_wait(e, 0);
    if (e->p->cfg.timeline) mha90_tl_stamp(e, reg_find(e, "tl_c0"), TL_C_S0);
    emit_release(e, reg_find(e, "cs_k_empty"), reg_find(e, "cs_stage"));
    emit_softmax_block(e);
    emit_convert_p(e);
    emit_next_slot(e);

    emit_section(e, "consumer mainloop: QK(j) and PV(j+1) on the tensor core under softmax(j)");
    emit_label(e, new_label(e, l_kv, sizeof l_kv, "cs_kv"));
    new_label(e, l_kv_done, sizeof l_kv_done, "cs_kv_done");
    if (up) {
        emit(e, "add.s32 %%cs_j, %%cs_j, 1;");
        emit(e, "setp.ge.s32 %s, %%cs_j, %%n_end;", pr);
        emit(e, "@%s bra %s;", pr, l_kv_done);
    } else {
        emit(e, "setp.le.s32 %s, %%cs_j, %%n_begin;", pr);
        emit(e, "@%s bra %s;", pr, l_kv_done);
        emit(e, "sub.s32 %%cs_j, %%cs_j, 1;");
    }
    emit_page_check(e);
    emit_turn_begin(e);
    emit_issue_qk(e);
    emit_issue_pv(e);
    emit_turn_end(e);
    if (e->p->cfg.timeline) mha90_tl_stamp(e, reg_find(e, "tl_c0"), TL_C_QK_LAST);
    emit_note(e, "S is ready once the older group (QK) retires; PV stays in flight");
    op_wgmma_wait(e, 1);
    if (e->p->cfg.timeline) mha90_tl_stamp(e, reg_find(e, "tl_c0"), TL_C_S_LAST);
    emit_release(e, reg_find(e, "cs_k_empty"), reg_find(e, "cs_stage"));
    emit_softmax_block(e);
    op_wgmma_wait(e, 0);
    emit_release(e, reg_find(e, "cs_v_empty"), reg_find(e, "cs_pv_stage"));
    emit_rescale_o(e);
    emit_convert_p(e);
    emit_next_slot(e);
    emit(e, "bra.uni %s;", l_kv);

    emit_label(e, l_kv_done);
    emit_section(e, "consumer mainloop: PV of the last block");
    if (e->p->cfg.timeline) mha90_tl_stamp(e, reg_find(e, "tl_c0"), TL_C_P_LAST);
    emit_turn_begin(e);
    emit_issue_pv(e);
    emit_turn_end(e);
    if (e->p->cfg.timeline) mha90_tl_stamp(e, reg_find(e, "tl_c0"), TL_C_PV_LAST);
    emit_coords_ahead(e);
    op_wgmma_wait(e, 0);
    emit_release(e, reg_find(e, "cs_v_empty"), reg_find(e, "cs_pv_stage"));
    if (!e->p->cfg.o_zero) {
        char l_keys[NAME];
        emit(e, "bra.uni %s;", new_label(e, l_keys, sizeof l_keys, "cs_keys_done"));
        emit_label(e, l_empty);
        emit_note(e, "plan note o zero: no P V wrote O in this tile");
        emit_zero_o(e);
        emit_label(e, l_keys);
    } else {
        emit_label(e, l_empty);
    }
    emit_q_release_pending(e);
    if (e->p->cfg.timeline) {
        mha90_tl_stamp(e, reg_find(e, "tl_c0"), TL_C_MAIN_END);
        mha90_tl_stamp(e, reg_find(e, "tl_cl"), TL_CL_MAIN_END);
    }
}

static void emit_consumer(Emit *e)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    char l_tile[NAME];
    emit_section(e, "role consumers (warpgroups 1..%d): wgmma + softmax; plan regs %d", s->consumers,
                 s->consumer_regs);
    op_setmaxnreg(e, s->consumer_regs, p->entry_regs);
    if (mha_roles_wait(p)) {
        emit_note(e, "plan pdl early/prefetch kv: the consumers' global accesses (O, LSE, partials) follow this wait");
        emit(e, "griddepcontrol.wait;");
    }
    emit(e, "shl.b32 %s, %%wg, 7;", reg(e, "b32", "cs_first_tid"));
    emit_consumer_setup(e);
    Sm90Frag f = sm90_frag(p);
    reg_array(e, "f32", "s", f.s_regs);
    reg_array(e, "f32", "o", f.o_regs);
    reg_array(e, "b32", "pa", f.p_regs);
    Reg qph = reg_b32(e, "cs_q_phase");
    const char *pr = reg(e, "pred", "cs_p");
    reg(e, "b32", "cs_j");
    Reg stage = reg_b32(e, "cs_stage"), phase = reg_b32(e, "cs_phase");
    ring_reset(e, stage, phase);
    emit(e, "mov.u32 %s, 0;", R(e, qph));
    Reg qslot = reg_b32(e, "cs_q_slot");
    emit(e, "mov.u32 %s, 0;", R(e, qslot));
    if (s->q_release_late) {
        emit_note(e, "plan note q release: no O store is pending before the first tile");
        emit(e, "setp.ne.u32 %s, %%wg, %%wg;", R(e, reg_pred(e, "cs_q_pend")));
    }
    if (s->coords_ahead) {
        emit_note(e, "plan note coords ahead: the first tile computes its own");
        emit(e, "setp.ne.u32 %s, %%wg, %%wg;", R(e, reg_pred(e, "cs_nx_ok")));
        for (int i = 0; i < MHA_TILE_COORD_REGS; i++) reg_b32(e, "cs_nx_%s", mha_tile_coord_regs[i]);
    }
    mha_tile_first(e);
    if (p->cfg.dynamic) {
        emit_note(e, "plan note dynamic tiles: the slots' tile words and their barriers, once");
        smem_reg(e, "cs_tile_ids", s->off_tile_ids);
        smem_reg(e, "cs_tile_bar0", s->bar_tile);
    }

    emit_label(e, new_label(e, l_tile, sizeof l_tile, "cs_tile"));
    if (p->cfg.dynamic) {
        emit_note(e, "plan note dynamic tiles: this tile is the producer's word in this Q slot (num_tiles: none left)");
        mha90_dyn_tile_read(e, reg_find(e, "tile"), qslot, qph);
    }
    emit(e, "setp.ge.u32 %s, %%tile, %%num_tiles;", pr);
    emit(e, "@%s bra $cs_exit;", pr);
    emit_tile_top_coords(e);
    char l_next[NAME];
    if (p->cfg.varlen) varlen_skip_tile(e, new_label(e, l_next, sizeof l_next, "cs_next_tile"));
    emit_note(e, "fresh row state: m = -inf, l = 0, O = 0");
    for (int h = 0; h < 2; h++) {
        char m[NAME], l[NAME];
        snprintf(m, NAME, "cs_m%d", h);
        snprintf(l, NAME, "cs_l%d", h);
        emit(e, "mov.f32 %s, %s;", reg(e, "f32", m), PTX_NEG_INF);
        emit(e, "mov.f32 %s, 0f00000000;", reg(e, "f32", l));
    }
    if (p->cfg.o_zero) {
        emit_zero_o(e);
    } else {
        emit_note(e, "plan note o zero: the tile's first P V writes O (scale-d 0); a tile without kv blocks zeroes it");
        emit(e, "setp.ne.u32 %s, 0, 0;", reg(e, "pred", "cs_o_acc"));
    }
    emit_half_key(e);
    if (p->cfg.timeline) {
        mha90_tl_record(e);
        mha90_tl_stamp(e, reg_find(e, "tl_c0"), TL_C_TILE);
        mha90_tl_stamp(e, reg_find(e, "tl_c0"), TL_GT_C_TILE);
    }
    if (p->cfg.alibi) {
        emit_note(e, "plan note alibi: each row half's slope (its head's) and diagonal key, row + seqlen_k - seqlen_q");
        Reg hd = reg_b32(e, "cs_al_h"), ad = reg_b64(e, "cs_al_addr");
        for (int h = 0; h < 2; h++) {
            if (s->packed) emit(e, "add.u32 %s, %%head, %%cs_hoff%d;", R(e, hd), h);
            else emit(e, "mov.u32 %s, %%head;", R(e, hd));
            sfx_alibi_slope(e, reg_f32(e, "cs_al_ns%d", h), hd, ad);
            Reg aq = reg_b32(e, "cs_al_q%d", h);
            emit(e, "add.u32 %s, %%m0, %s;", R(e, aq), row_seq(e, h));
            emit(e, "add.u32 %s, %s, %%kv_off;", R(e, aq), R(e, aq));
        }
    }
    emit_note(e, "this tile's Q slot: its base, this consumer's rows in it, their wgmma A descriptor");
    Reg qbase = reg_b32(e, "cs_qslot_base"), qrows = reg_b32(e, "cs_qslot_rows");
    const char *qlo = reg(e, "b32", "cs_q_lo");
    Reg qbar = reg_b32(e, "cs_q_bar");
    addr_indexed(e, qbase, reg_find(e, "cs_q0"), qslot, s->tx_q);
    addr_indexed(e, qrows, reg_find(e, "cs_qrows"), qslot, s->tx_q);
    emit(e, "shr.u32 %s, %s, 4;", qlo, R(e, qrows));
    emit(e, "or.b32 %s, %s, 0x%08X;", qlo, qlo, sm90_desc_lo_lbo(16));
    mbar_indexed(e, qbar, reg_find(e, "cs_q_full"), qslot);
    op_mbar_wait(e, qbar, qph);
    if (p->cfg.timeline) mha90_tl_stamp(e, reg_find(e, "tl_c0"), TL_C_Q);
    emit_mainloop(e);
    if (p->cfg.cluster_split) mha90_epilogue_cluster(e);
    else if (p->cfg.split) mha90_epilogue_split(e);
    else mha90_epilogue(e);
    ring_advance(e, qslot, qph, s->q_slots);
    if (p->cfg.varlen) emit_label(e, l_next);
    if (!p->cfg.dynamic) mha_tile_next(e);
    emit(e, "bra.uni %s;", l_tile);
    emit_label(e, "$cs_exit");
    emit_note(e, "O stores must land before the CTA retires");
    op_bulk_wait(e, 0);
    if (s->pingpong) {
        emit_note(e, "consumer 0 takes the last turn handed to it, so no barrier is left half-arrived");
        emit(e, "setp.eq.u32 %%cs_p, %%cs_w, 0;");
        op_bar_sync_if(e, reg_find(e, "cs_p"), s->bar_turn0, named_bar_threads(p, s->bar_turn0));
    }
    emit(e, "bra.uni $exit;");
}

int sm90_emit_mha(Emit *e)
{
    mha90_tl_entry(e);
    mha_prologue(e);
    mha90_tl_mark(e, "tl_waited");
    mha90_tl_prologue(e);
    emit_barrier_init(e);
    emit_section(e, "role dispatch: warpgroup 0 produces, the others consume");
    const char *p = reg(e, "pred", "p_consumer");
    emit(e, "setp.ge.u32 %s, %%wg, 1;", p);
    emit(e, "@%s bra $consumer;", p);
    mha90_producer(e);
    if (e->p->kv_tail) {
        emit_label(e, "$scrub");
        mha90_scrub(e);
    }
    emit_label(e, "$consumer");
    emit_consumer(e);
    emit_label(e, "$exit");
    emit(e, "ret;");
    return e->failed ? -1 : 0;
}

