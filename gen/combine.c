/* combine.c - the split-KV combine kernel, one family for both targets (plain SIMT PTX: it is
 * memory bound, so neither wgmma nor tcgen05 has anything to do here).
 *
 * Input: what an MHA kernel with split=1 wrote, f32 partial O [num_splits, rows, ov] (each split's
 * O already divided by its own row sum) and partial LSE [num_splits, rows] (natural log; -inf for
 * a split that saw no key of the row), rows = batch x heads_q x seqlen_q in LSE order. Output, per
 * row: lse = log sum_i e^(lse_i) and O = sum_i e^(lse_i - lse) O_i in the output dtype at the
 * caller's strides, LSE (when asked for) [batch, heads_q, seqlen_q]. A split whose lse_i is -inf is
 * skipped (its O_i is not read); a row whose every lse_i is -inf gets O = 0 and LSE = -inf.
 *
 * One warp per row (plan: rows per CTA = warps); lane l owns columns 4 l + 128 k. The LSEs are
 * loaded at once, lane l holding splits l, 32 + l, .. (COMBINE_MAX_SPLITS = 128: 4 registers), and
 * reduced across the warp; the first step's O rows (16 splits at d <= 128: combine_unroll) load
 * beside the LSEs, before the weights are known, and count only where their weight is not 0, so
 * up to 16 splits cost one memory latency; later steps load their rows before any is used.
 */
#include <stdio.h>
#include <string.h>

#include "kernel.h"
#include "ops.h"
#include "ops_copy.h"
#include "softmax.h"

enum { COMBINE_WARPS = 4, COMBINE_LANE_COLS = 4 /* one v4.f32 load */, NAME = 32, F32_BYTES = 4 };
enum { COMBINE_CHUNKS = COMBINE_MAX_SPLITS / 32 /* LSE registers per lane */,
       COMBINE_O_REGS = 64 /* O values a lane holds in flight: 16 splits at d <= 128 */ };
enum { COMBINE_BLOCK_COLS = 32 * COMBINE_LANE_COLS }; /* O columns a warp covers per column block */

static void combine_defaults(Config *c)
{
    if (!c->swizzle) c->swizzle = 128; /* unused; config_check wants a valid value */
}

static int combine_check(const Config *c, char *err, size_t n)
{
    if (c->dtype == DT_E4M3)
        return plan_refuse(err, n, "dtype: e4m3 is not allowed for combine; it writes O in bf16 or fp16 (an e4m3 "
                           "split kernel's O is bf16)");
    if (c->qk_depth != c->ov_depth)
        return plan_refuse(err, n, "qk: %d is not allowed for combine; give only ov (the depth of O)", c->qk_depth);
    if (c->ov_depth > 1024)
        return plan_refuse(err, n, "ov: %d is not allowed for combine; use a multiple of 16 up to 1024", c->ov_depth);
    /* every other field would be left out of the canonical form (and the hash): it must be unset */
    Config d;
    config_init(&d);
    if (c->bm || c->bn || c->stages || c->group != 1 || c->mask != MASK_NONE || c->qtiles || c->cta_pair ||
        c->rescale != d.rescale || c->exp2_poly != d.exp2_poly || c->rope_split || c->pingpong != d.pingpong ||
        c->persistent != d.persistent || c->swizzle != 128)
        return plan_refuse(err, n, "combine: it takes only target, dtype and ov; bm bn stages group mask qtiles cta "
                           "rescale poly rope_split pingpong persistent swizzle are MHA kernel words");
    return 0;
}

static int combine_plan(const Config *c, Plan *p, char *err, size_t n)
{
    (void)err;
    (void)n;
    p->ov = c->ov_depth;
    p->qk = c->qk_depth;
    p->elem_bytes = dtype_bytes[c->dtype];
    p->threads = 32 * COMBINE_WARPS;
    p->entry_regs = 255; /* no setmaxnreg: the hardware cap per thread */
    p->rows_per_cta = COMBINE_WARPS;
    p->heads_per_cta = 1;
    p->smem_align = 16; /* no shared memory */
    p->pdl_dependent = p->pdl_trigger = 1; /* its launch overlaps the split kernel's tail; griddepcontrol.wait
                                            * guards the reads; then the next kernel may launch */
    plan_role(p, "combine", 0, COMBINE_WARPS, 0, "one row per warp: lane l owns O columns 4l + 128k");
    static const struct { ScalarId s; ParamType t; } params[] = {
        {SCALAR_O_ACCUM, PARAM_U64},  {SCALAR_LSE_ACCUM, PARAM_U64},    {SCALAR_OUT, PARAM_U64},
        {SCALAR_LSE, PARAM_U64},      {SCALAR_NUM_SPLITS, PARAM_U32},   {SCALAR_SEQLEN_Q, PARAM_U32},
        {SCALAR_HEADS_Q, PARAM_U32},  {SCALAR_BATCH, PARAM_U32},        {SCALAR_OUT_STRIDE_B, PARAM_U64},
        {SCALAR_OUT_STRIDE_S, PARAM_U64}, {SCALAR_OUT_STRIDE_H, PARAM_U64}, {SCALAR_CU_SEQLENS_Q, PARAM_U64}};
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) plan_param_scalar(p, params[i].s, params[i].t);
    plan_note(p, "rows", "row r = (b heads_q + h) seqlen_q + s of %d rows per CTA; grid = ceil(batch heads_q "
              "seqlen_q / %d)", COMBINE_WARPS, COMBINE_WARPS);
    plan_note(p, "varlen", "cu_seqlens_q set: batch 1 of seqlen_q = total_q rows, r = h total_q + token; tokens outside "
              "[cu_seqlens_q[0], cu_seqlens_q[batch]) left alone (batch: the sequences)");
    plan_note(p, "inputs", "o_accum f32 [num_splits, rows, %d], lse_accum f32 [num_splits, rows]", p->ov);
    plan_note(p, "outputs", "out %s [batch, seqlen_q, heads_q, %d] at its element strides; lse f32 [batch, heads_q, "
              "seqlen_q] (0 = none)", dtype_name[c->dtype], p->ov);
    plan_note(p, "math", "lse = log sum_i e^lse_i; O = sum_i e^(lse_i - lse) O_i; lse_i = -inf skipped; all -inf: "
              "O = 0, lse = -inf");
    return 0;
}

/* Column blocks of 4 per lane: lane l, block k holds columns 4 l + 128 k. */
static int col_blocks(const Plan *p) { return (p->ov + COMBINE_BLOCK_COLS - 1) / COMBINE_BLOCK_COLS; }

/* Splits whose O rows a lane loads at once: a power of two (so that steps tile each chunk of 32
 * splits) whose rows fit COMBINE_O_REGS registers: 16 at d <= 128, 8 at d256, 4 at d512. */
static int combine_unroll(const Plan *p)
{
    int u = 16;
    while (u > 1 && 4 * col_blocks(p) * u > COMBINE_O_REGS) u /= 2;
    return u;
}

/* varlen: a token outside [cu_seqlens_q[0], cu_seqlens_q[batch]) (clamped to [0, total_q]) belongs to no
 * sequence, so no split kernel wrote its partials: its row is left alone, O and LSE untouched. */
static void emit_varlen_row_check(Emit *e, Reg row, Reg varlen)
{
    char l_in[NAME];
    Reg tok = reg_b32(e, "cb_tok"), lo = reg_b32(e, "cb_lo"), hi = reg_b32(e, "cb_hi"), a = reg_b64(e, "cb_cu_addr");
    Reg out = reg_pred(e, "cb_outside");
    emit(e, "@!%s bra %s;", R(e, varlen), new_label(e, l_in, sizeof l_in, "cb_in_seq"));
    emit_note(e, "varlen: rows of tokens that no sequence covers are left alone");
    emit(e, "rem.u32 %s, %s, %%seqlen_q;", R(e, tok), R(e, row));
    op_ld_global(e, REG_NONE, "s32", lo, reg_find(e, "cu_seqlens_q"), 0);
    emit(e, "mul.wide.u32 %s, %%batch, 4;", R(e, a));
    emit(e, "add.s64 %s, %s, %%cu_seqlens_q;", R(e, a), R(e, a));
    op_ld_global(e, REG_NONE, "s32", hi, a, 0);
    emit(e, "max.s32 %s, %s, 0;", R(e, lo), R(e, lo));
    emit(e, "max.s32 %s, %s, 0;", R(e, hi), R(e, hi));
    emit(e, "min.u32 %s, %s, %%seqlen_q;", R(e, hi), R(e, hi));
    emit(e, "setp.lt.u32 %s, %s, %s;", R(e, out), R(e, tok), R(e, lo));
    emit(e, "setp.ge.or.u32 %s, %s, %s, %s;", R(e, out), R(e, tok), R(e, hi), R(e, out));
    emit(e, "@%s bra $exit;", R(e, out));
    emit_label(e, l_in);
}

/* Split u of a step: its O row's column blocks into cb_v (lane l: 4 columns a block), where pred
 * holds and the lane has columns there; then the address moves to the next split's row. */
static void load_o_row(Emit *e, int u, Reg pred, const Reg *colok, Reg v, Reg ld, Reg oaddr, Reg ostride)
{
    int kb = col_blocks(e->p);
    for (int k = 0; k < kb; k++) {
        Reg vv[4];
        for (int i = 0; i < 4; i++) vv[i] = reg_at(e, v, 4 * (kb * u + k) + i);
        emit(e, "and.pred %s, %s, %s;", R(e, ld), R(e, pred), R(e, colok[k]));
        op_ld_global_v4_f32(e, ld, vv, oaddr, (uint32_t)(F32_BYTES * COMBINE_BLOCK_COLS * k));
    }
    emit(e, "add.s64 %s, %s, %s;", R(e, oaddr), R(e, oaddr), R(e, ostride));
}

static int combine_emit(Emit *e)
{
    const Plan *p = e->p;
    int kb = col_blocks(p);
    char l_out[NAME], l_nolse[NAME];
    emit_section(e, "prologue: parameters, this warp's row");
    const char *tid = reg(e, "b32", "thread"), *lane = reg(e, "b32", "lane"), *warp = reg(e, "b32", "warp");
    emit(e, "mov.u32 %s, %%tid.x;", tid);
    emit(e, "and.b32 %s, %s, 31;", lane, tid);
    emit(e, "shr.u32 %s, %s, 5;", warp, tid);
    kernel_params(e);
    Reg row = reg_b32(e, "cb_row"), rows = reg_b32(e, "cb_rows");
    reg_pred(e, "cb_p");
    emit_note(e, "plan note rows: %d rows per CTA, one per warp", p->rows_per_cta);
    emit(e, "mov.u32 %s, %%ctaid.x;", R(e, row));
    emit(e, "mad.lo.u32 %s, %s, %d, %%warp;", R(e, row), R(e, row), p->rows_per_cta);
    Reg varlen = reg_pred(e, "cb_varlen"), bt = reg_b32(e, "cb_bt");
    emit_note(e, "varlen (cu_seqlens_q set): one batch of seqlen_q = total_q rows per head, in the varlen LSE order");
    emit(e, "setp.ne.u64 %s, %%cu_seqlens_q, 0;", R(e, varlen));
    emit(e, "selp.b32 %s, 1, %%batch, %s;", R(e, bt), R(e, varlen));
    emit(e, "mul.lo.u32 %s, %%heads_q, %%seqlen_q;", R(e, rows));
    emit(e, "mul.lo.u32 %s, %s, %s;", R(e, rows), R(e, rows), R(e, bt));
    emit(e, "setp.ge.u32 %%cb_p, %s, %s;", R(e, row), R(e, rows));
    emit(e, "@%%cb_p bra $exit;");
    Reg lrow = reg_b64(e, "cb_lse_row"), lstride = reg_b64(e, "cb_lse_stride"), laddr = reg_b64(e, "cb_lse_addr");
    emit(e, "mul.wide.u32 %s, %s, %d;", R(e, lstride), R(e, rows), F32_BYTES);
    emit(e, "mad.wide.u32 %s, %s, %d, %%lse_accum;", R(e, lrow), R(e, row), F32_BYTES);

    emit_note(e, "plan pdl: the next kernel (a decode step's next split kernel) may launch now: its CTAs take "
              "the SMs the split kernel frees and run their prologue; its own wait still waits for this grid");
    emit(e, "griddepcontrol.launch_dependents;");
    emit_note(e, "plan pdl: launched as a dependent of the split kernel; its partials are complete and visible "
              "only past this wait");
    emit(e, "griddepcontrol.wait;");
    emit_varlen_row_check(e, row, varlen);
    emit_section(e, "LSE: lane l loads the splits l + 32 c (-inf past num_splits); lse = max + log sum_i e^(lse_i - max)");
    Reg lsec = reg_arr(e, RT_F32, COMBINE_CHUNKS, "cb_lse"), wc = reg_arr(e, RT_F32, COMBINE_CHUNKS, "cb_w");
    Reg idx = reg_b32(e, "cb_idx"), t64 = reg_b64(e, "cb_t64");
    for (int c = 0; c < COMBINE_CHUNKS; c++) {
        Reg l = reg_at(e, lsec, c);
        emit(e, "add.u32 %s, %%lane, %d;", R(e, idx), 32 * c);
        emit(e, "setp.lt.u32 %%cb_p, %s, %%num_splits;", R(e, idx));
        emit(e, "mov.f32 %s, %s;", R(e, l), PTX_NEG_INF);
        emit(e, "cvt.u64.u32 %s, %s;", R(e, t64), R(e, idx));
        emit(e, "mad.lo.u64 %s, %s, %s, %s;", R(e, laddr), R(e, t64), R(e, lstride), R(e, lrow));
        op_ld_global(e, reg_find(e, "cb_p"), "f32", l, laddr, 0);
    }
    int un = combine_unroll(p);
    emit_section(e, "O rows of splits 0..%d, loaded beside the LSEs (one memory latency for both; a split's weight "
                 "decides later whether its row counts); lane l, block k: columns 4l + 128k (plan: %d blocks)",
                 un - 1, kb);
    Reg colok[8];
    for (int k = 0; k < kb; k++) {
        colok[k] = reg_pred(e, "cb_col%d", k);
        emit(e, "setp.lt.u32 %s, %%lane, %d;", R(e, colok[k]), (p->ov - COMBINE_BLOCK_COLS * k) / COMBINE_LANE_COLS);
    }
    Reg orow = reg_b64(e, "cb_o_row"), ostride = reg_b64(e, "cb_o_stride"), oaddr = reg_b64(e, "cb_o_addr");
    Reg j = reg_b32(e, "cb_j"), nc = reg_b32(e, "cb_nc"), src = reg_b32(e, "cb_src");
    emit(e, "mul.wide.u32 %s, %s, %d;", R(e, ostride), R(e, rows), F32_BYTES * p->ov);
    emit(e, "mad.wide.u32 %s, %s, %d, %%o_accum;", R(e, orow), R(e, row), F32_BYTES * p->ov);
    emit(e, "mad.wide.u32 %s, %%lane, %d, %s;", R(e, orow), F32_BYTES * COMBINE_LANE_COLS, R(e, orow));
    emit(e, "mov.u64 %s, %s;", R(e, oaddr), R(e, orow));
    Reg v = reg_arr(e, RT_F32, 4 * kb * un, "cb_v"), wu[16], go[16];
    for (int u = 0; u < un; u++) wu[u] = reg_f32(e, "cb_wu%d", u), go[u] = reg_pred(e, "cb_go%d", u);
    Reg ld = reg_pred(e, "cb_ld");
    emit(e, "min.u32 %s, %%num_splits, 32;", R(e, nc));
    for (int u = 0; u < un; u++) {
        emit(e, "setp.lt.u32 %s, %d, %s;", R(e, go[u]), u, R(e, nc));
        load_o_row(e, u, go[u], colok, v, ld, oaddr, ostride);
    }
    Reg mx = reg_f32(e, "cb_max"), sum = reg_f32(e, "cb_sum"), t = reg_f32(e, "cb_t"), lse = reg_f32(e, "cb_lse_all");
    Reg empty = reg_pred(e, "cb_empty");
    emit(e, "max.f32 %s, %s, %s;", R(e, mx), R(e, reg_at(e, lsec, 0)), R(e, reg_at(e, lsec, 1)));
    for (int c = 2; c < COMBINE_CHUNKS; c++) emit(e, "max.f32 %s, %s, %s;", R(e, mx), R(e, mx), R(e, reg_at(e, lsec, c)));
    sfx_reduce_lanes(e, "max", mx, t, 32);
    emit(e, "setp.eq.f32 %s, %s, %s;", R(e, empty), R(e, mx), PTX_NEG_INF);
    Reg acc = reg_arr(e, RT_F32, 4 * kb, "cb_acc");
    for (int i = 0; i < 4 * kb; i++) emit(e, "mov.f32 %s, 0f00000000;", R(e, reg_at(e, acc, i)));
    emit(e, "mov.f32 %s, %s;", R(e, lse), PTX_NEG_INF);
    emit_note(e, "no split saw a key of the row: O = 0, LSE = -inf");
    emit(e, "@%s bra %s;", R(e, empty), new_label(e, l_out, sizeof l_out, "cb_no_keys"));
    emit_note(e, "e^(lse_i - max) = 2^((lse_i - max) log2 e); a -inf split adds 2^-inf = 0");
    emit(e, "mov.f32 %s, 0f00000000;", R(e, sum));
    for (int c = 0; c < COMBINE_CHUNKS; c++) {
        emit(e, "sub.f32 %s, %s, %s;", R(e, t), R(e, reg_at(e, lsec, c)), R(e, mx));
        emit(e, "mul.f32 %s, %s, %s;", R(e, t), R(e, t), PTX_LOG2E);
        emit(e, "ex2.approx.ftz.f32 %s, %s;", R(e, t), R(e, t));
        emit(e, "add.f32 %s, %s, %s;", R(e, sum), R(e, sum), R(e, t));
    }
    sfx_reduce_lanes(e, "add", sum, t, 32);
    emit(e, "lg2.approx.f32 %s, %s;", R(e, t), R(e, sum));
    emit(e, "fma.rn.f32 %s, %s, %s, %s;", R(e, lse), R(e, t), PTX_LN2, R(e, mx));
    emit_note(e, "the weights e^(lse_i - lse), in the lanes that hold lse_i");
    for (int c = 0; c < COMBINE_CHUNKS; c++) {
        Reg w = reg_at(e, wc, c);
        emit(e, "sub.f32 %s, %s, %s;", R(e, w), R(e, reg_at(e, lsec, c)), R(e, lse));
        emit(e, "mul.f32 %s, %s, %s;", R(e, w), R(e, w), PTX_LOG2E);
        emit(e, "ex2.approx.ftz.f32 %s, %s;", R(e, w), R(e, w));
    }

    emit_section(e, "O = sum_i e^(lse_i - lse) O_i, %d splits a step, their loads first (the first step's are in)",
                 un);
    Reg first = reg_pred(e, "cb_first");
    for (int c = 0; c < COMBINE_CHUNKS; c++) {
        char l_loop[NAME], l_loaded[NAME];
        emit_note(e, "splits %d..%d: their weights are in lanes 0..31 of cb_w%d", 32 * c, 32 * c + 31, c);
        emit(e, "setp.le.u32 %%cb_p, %%num_splits, %d;", 32 * c);
        emit(e, "@%%cb_p bra %s;", l_out);
        emit(e, "sub.u32 %s, %%num_splits, %d;", R(e, nc), 32 * c);
        emit(e, "min.u32 %s, %s, 32;", R(e, nc), R(e, nc));
        emit(e, "mov.u32 %s, 0;", R(e, j));
        emit_label(e, new_label(e, l_loop, sizeof l_loop, "cb_o_step"));
        for (int u = 0; u < un; u++) {
            emit(e, "add.u32 %s, %s, %d;", R(e, src), R(e, j), u);
            op_shfl_idx(e, wu[u], reg_at(e, wc, c), src);
            emit_note(e, "split j + %d counts only if it exists and weighs something (a -inf split's row, maybe never "
                      "written, is not used)", u);
            emit(e, "setp.lt.u32 %s, %s, %s;", R(e, go[u]), R(e, src), R(e, nc));
            emit(e, "setp.ne.and.f32 %s, %s, 0f00000000, %s;", R(e, go[u]), R(e, wu[u]), R(e, go[u]));
        }
        new_label(e, l_loaded, sizeof l_loaded, "cb_loaded");
        if (c == 0) {
            emit(e, "setp.eq.u32 %s, %s, 0;", R(e, first), R(e, j));
            emit(e, "@%s bra %s;", R(e, first), l_loaded);
        }
        for (int u = 0; u < un; u++) load_o_row(e, u, go[u], colok, v, ld, oaddr, ostride);
        emit_label(e, l_loaded);
        for (int u = 0; u < un; u++)
            for (int i = 0; i < 4 * kb; i++) {
                Reg a = reg_at(e, acc, i);
                emit(e, "@%s fma.rn.f32 %s, %s, %s, %s;", R(e, go[u]), R(e, a), R(e, wu[u]),
                     R(e, reg_at(e, v, 4 * kb * u + i)), R(e, a));
            }
        emit(e, "add.u32 %s, %s, %d;", R(e, j), R(e, j), un);
        emit(e, "setp.lt.u32 %%cb_p, %s, %s;", R(e, j), R(e, nc));
        emit(e, "@%%cb_p bra.uni %s;", l_loop);
    }

    emit_label(e, l_out);
    emit_section(e, "outputs: O in %s at the caller's strides, LSE [batch, heads_q, seqlen_q]", dtype_name[p->cfg.dtype]);
    Reg b = reg_b32(e, "cb_b"), h = reg_b32(e, "cb_h"), s = reg_b32(e, "cb_s"), x = reg_b32(e, "cb_x");
    Reg off = reg_b64(e, "cb_off"), out = reg_b64(e, "cb_out");
    emit(e, "rem.u32 %s, %s, %%seqlen_q;", R(e, s), R(e, row));
    emit(e, "div.u32 %s, %s, %%seqlen_q;", R(e, x), R(e, row));
    emit(e, "rem.u32 %s, %s, %%heads_q;", R(e, h), R(e, x));
    emit(e, "div.u32 %s, %s, %%heads_q;", R(e, b), R(e, x));
    emit(e, "cvt.u64.u32 %s, %s;", R(e, t64), R(e, b));
    emit(e, "mul.lo.u64 %s, %s, %%out_stride_b;", R(e, off), R(e, t64));
    emit(e, "cvt.u64.u32 %s, %s;", R(e, t64), R(e, s));
    emit(e, "mad.lo.u64 %s, %s, %%out_stride_s, %s;", R(e, off), R(e, t64), R(e, off));
    emit(e, "cvt.u64.u32 %s, %s;", R(e, t64), R(e, h));
    emit(e, "mad.lo.u64 %s, %s, %%out_stride_h, %s;", R(e, off), R(e, t64), R(e, off));
    emit(e, "mul.wide.u32 %s, %%lane, %d;", R(e, t64), COMBINE_LANE_COLS);
    emit(e, "add.s64 %s, %s, %s;", R(e, off), R(e, off), R(e, t64));
    emit(e, "mad.lo.u64 %s, %s, %d, %%out;", R(e, out), R(e, off), p->elem_bytes);
    Reg pk0 = reg_b32(e, "cb_pack0"), pk1 = reg_b32(e, "cb_pack1");
    for (int k = 0; k < kb; k++) {
        op_cvt_pack(e, p->cfg.dtype, pk0, reg_at(e, acc, 4 * k + 1), reg_at(e, acc, 4 * k));
        op_cvt_pack(e, p->cfg.dtype, pk1, reg_at(e, acc, 4 * k + 3), reg_at(e, acc, 4 * k + 2));
        op_st_global_v2_b32(e, colok[k], out, (uint32_t)(COMBINE_BLOCK_COLS * k * p->elem_bytes), pk0, pk1);
    }
    emit(e, "setp.eq.u64 %%cb_p, %%lse, 0;");
    emit(e, "@%%cb_p bra %s;", new_label(e, l_nolse, sizeof l_nolse, "cb_no_lse"));
    emit(e, "setp.eq.u32 %%cb_p, %%lane, 0;");
    emit(e, "mad.wide.u32 %s, %s, %d, %%lse;", R(e, t64), R(e, row), F32_BYTES);
    op_st_global_f32(e, reg_find(e, "cb_p"), t64, lse);
    emit_label(e, l_nolse);
    emit_label(e, "$exit");
    emit(e, "ret;");
    return e->failed ? -1 : 0;
}

const Family combine_family = {KIND_COMBINE, combine_defaults, combine_check, combine_plan, combine_emit};
