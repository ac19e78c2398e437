/* sm90/mla_sparse.c - sparse MLA prefill on sm_90a (DeepSeek-V3.2 top-k attention, FlashMLA's
 * contract; fa4.h): its defaults, checks, plan and kernel.
 *
 * One CTA per (query token, block of `heads` query heads). A producer warpgroup gathers the
 * selected kv rows, `block` per step, with 16-byte cp.async copies into a two-slot ring of
 * 128B-swizzled K-major tiles (zero-filled where an index is invalid, so nothing outside kv is
 * read), and writes one valid flag per row. Two consumer warpgroups each compute the whole
 * S = Q K^T block (wgmma SS over the d_qk columns), hide invalid columns, run the online
 * softmax with FA4's conditional rescale, and accumulate their half of O = P V (wgmma RS, V the
 * first dv columns of the same tile, MN-major). The epilogue normalises O, applies the sink, and
 * writes O (bf16), lse and max_logits (the true row max, tracked apart from the lazy one).
 *
 * Both consumers computing S is the simple first design (QK is 53% of the FLOPs at d_qk 576:
 * this costs 1.5x the tensor work); splitting S between them is the planned next step.
 */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../ops.h"
#include "../ops_copy.h"
#include "../softmax.h"
#include "mla90.h"

enum {
    MLA_DV = 512,           /* V: the first 512 columns of every kv row (fa4.h) */
    MLA_MMA_M = 64,         /* wgmma M: query heads per CTA */
    MLA_K_STEP = 16,        /* wgmma K per instruction (16-bit inputs) */
    MLA_WG = 128,
    MLA_UNIT = 16,          /* bytes per cp.async */
    NAME = 32,
};

/* ------------------------------------------------------------ config */

static void mla_defaults(Config *c)
{
    if (!c->ov_depth || c->ov_depth == c->qk_depth) c->ov_depth = MLA_DV;
    if (!c->bm) c->bm = MLA_MMA_M;
    if (!c->bn) c->bn = 64;
    if (!c->stages) c->stages = 2;
    if (!c->swizzle) c->swizzle = 128;
    if (c->rescale < 0) c->rescale = 8;
    if (c->exp2_poly < 0) c->exp2_poly = 0;
    /* fixed by this family: a CTA is one token's head block */
    if (c->pingpong < 0) c->pingpong = 0;
    if (c->persistent < 0) c->persistent = 0;
    if (c->tma_store < 0) c->tma_store = 1;
}

static int mla_check(const Config *c, char *err, size_t n)
{
    if (c->dtype != DT_BF16)
        return plan_refuse(err, n, "dtype: %s is not allowed for mla-sparse on sm90a; use bf16", dtype_name[c->dtype]);
    if (c->qk_depth != 576 && c->qk_depth != 512)
        return plan_refuse(err, n, "qk: %d is not allowed for mla-sparse; use 576 (512 nope + 64 rope) or 512",
                      c->qk_depth);
    if (c->ov_depth != MLA_DV)
        return plan_refuse(err, n, "ov: %d is not allowed for mla-sparse; V is the first %d columns of kv", c->ov_depth,
                      MLA_DV);
    if (c->bm != MLA_MMA_M) return plan_refuse(err, n, "bm: %d is not allowed for mla-sparse on sm90a; use 64", c->bm);
    if (c->bn != 64) return plan_refuse(err, n, "bn: %d is not allowed for mla-sparse on sm90a; use 64", c->bn);
    if (c->stages != 2) return plan_refuse(err, n, "stages: %d is not allowed for mla-sparse on sm90a; use 2", c->stages);
    if (c->swizzle != 128)
        return plan_refuse(err, n, "swizzle: %d is not allowed for mla-sparse on sm90a; use 128", c->swizzle);
    if (c->mask != MASK_NONE)
        return plan_refuse(err, n, "mask: mla-sparse takes no mask; its index list says which keys a token sees");
    if (c->group != 1) return plan_refuse(err, n, "group: %d is not allowed for mla-sparse (one kv head); use 1", c->group);
    if (c->exp2_poly) return plan_refuse(err, n, "poly: %d is not allowed for mla-sparse on sm90a; use 0", c->exp2_poly);
    if (c->pingpong || c->persistent)
        return plan_refuse(err, n, "pingpong/persistent: mla-sparse on sm90a has neither; use 0");
    if (c->tma_store != 0 && c->tma_store != 1)
        return plan_refuse(err, n, "tma_store: %d is not allowed; use 0 or 1", c->tma_store);
    return 0;
}

/* ------------------------------------------------------------ plan */

static void mla_params(Plan *p)
{
    static const ScalarId u64s[] = {SCALAR_Q, SCALAR_KV, SCALAR_INDICES, SCALAR_OUT, SCALAR_LSE, SCALAR_MAX_LOGITS,
                                    SCALAR_SINK, SCALAR_TOPK_LENGTH, SCALAR_Q_STRIDE_S, SCALAR_Q_STRIDE_H,
                                    SCALAR_KV_STRIDE, SCALAR_IDX_STRIDE, SCALAR_OUT_STRIDE_S, SCALAR_OUT_STRIDE_H};
    static const ScalarId u32s[] = {SCALAR_SEQLEN_Q, SCALAR_S_KV, SCALAR_HEADS_Q, SCALAR_TOPK};
    for (int i = 0; i < p->n_maps; i++) plan_param_map(p, i);
    for (size_t i = 0; i < sizeof u64s / sizeof u64s[0]; i++) plan_param_scalar(p, u64s[i], PARAM_U64);
    for (size_t i = 0; i < sizeof u32s / sizeof u32s[0]; i++) plan_param_scalar(p, u32s[i], PARAM_U32);
    plan_param_scalar(p, SCALAR_SCALE_LOG2, PARAM_F32);
    plan_param_scalar(p, SCALAR_SM_SCALE, PARAM_F32);
}

static int mla_plan(const Config *c, Plan *p, char *err, size_t n)
{
    SparsePlan90 *s = mla90_plan(p);
    plan_geometry(c, p);
    p->rows_per_cta = 1; /* one query token ... */
    p->heads_per_cta = c->bm; /* ... and bm of its heads */

    s->heads = c->bm, s->block = c->bn, s->consumers = 2;
    s->dv = c->ov_depth, s->dv_per_consumer = s->dv / s->consumers;
    s->qk_chunks = p->qk_chunks, s->dv_chunks = p->ov_chunks;
    s->units = p->qk * p->elem_bytes / MLA_UNIT;
    s->chunk_bytes = (uint32_t)(s->heads * p->swizzle_bytes);
    s->rescale = c->rescale;
    s->qk_steps = p->qk / MLA_K_STEP;
    s->pv_steps = s->block / MLA_K_STEP;
    s->producer_regs = 40, s->consumer_regs = 232; /* 40 + 2 x 232 <= 512 per thread slot of a warp trio */
    p->threads = MLA_WG * (1 + s->consumers);
    p->entry_regs = (65536 / p->threads) / 8 * 8;

    uint32_t kv_chunk = (uint32_t)(s->block * p->swizzle_bytes);
    s->off_q = plan_smem(p, "q", s->chunk_bytes * (uint32_t)s->qk_chunks, 1024, "Q: heads x d_qk, 128B-swizzled chunks");
    s->kv_stage_bytes = kv_chunk * (uint32_t)s->qk_chunks;
    s->off_kv = plan_smem(p, "kv", s->kv_stage_bytes * (uint32_t)p->stages, 1024,
                          "gathered kv rows: slot c = block 2j+c; K = all columns, V = the first dv");
    s->half_chunks = s->dv_chunks / 2;
    s->p_in_rope = s->qk_chunks > s->dv_chunks;
    /* consumer 0's P can live in slot 0's rope chunk: half B of slot 0 is freed by consumer 1, the reader
     * of that P; consumer 1's P is read by consumer 0, who frees half A only, so it has its own buffer */
    int own_bufs = s->p_in_rope ? 1 : 2;
    uint32_t pbuf = plan_smem(p, "p", s->chunk_bytes * (uint32_t)own_bufs, 1024,
                              own_bufs == 1 ? "P of consumer 1's block: heads x block bf16, 128B-swizzled"
                                            : "P of each consumer's block: heads x block bf16, 128B-swizzled");
    s->off_p[0] = s->p_in_rope ? s->off_kv + (uint32_t)s->dv_chunks * kv_chunk : pbuf;
    s->off_p[1] = pbuf + (uint32_t)(own_bufs - 1) * s->chunk_bytes;
    s->valid_stage_bytes = (uint32_t)s->block * 4;
    s->off_valid = plan_smem(p, "valid", s->valid_stage_bytes * (uint32_t)p->stages, 16,
                             "one u32 per gathered row: 1 when its index is valid (per slot)");
    s->off_xmax = plan_smem(p, "xmax", (uint32_t)(s->consumers * s->heads * 4), 16,
                            "block row max per consumer, exchanged: one running max");
    s->off_xsum = plan_smem(p, "xsum", (uint32_t)(s->consumers * s->heads * 4), 16,
                            "row sum per consumer over its blocks, added at the end");
    /* named barriers (0: the whole CTA, the prologue) */
    s->bar_max = plan_bar(p, "row_max", 2 * MLA_WG, "consumers: block row maxima exchanged (one running max)");
    s->bar_p = plan_bar(p, "p", 2 * MLA_WG, "consumers: each one's P is in smem for the other's PV");
    s->bar_sum = plan_bar(p, "row_sum", 2 * MLA_WG, "consumers: row sums exchanged; every wgmma of both is done");
    s->tma_store = c->tma_store;
    for (int i = 0; s->tma_store && i < s->consumers; i++) {
        char name[20];
        snprintf(name, sizeof name, "epilogue%d", i);
        int id = plan_bar(p, name, MLA_WG, "consumer's O staged in the Q tile, ready for the TMA store");
        if (!i) s->bar_epi0 = id;
    }
    if (s->tma_store) /* out as (dv, h_q, s_q): one box = 64 heads x one 64-column chunk; heads past h_q are
                       * clipped by the TMA */
        plan_map(p, "o", TENSOR_O, DT_BF16, (uint32_t)s->dv, (uint32_t)p->chunk_elems, (uint32_t)s->heads, 1,
                 p->swizzle_bytes), p->maps[p->n_maps - 1].rank = 3;
    s->q_full_count = MLA_WG;                    /* one cp.async arrival per producer thread */
    s->kv_full_count = 2 * MLA_WG;               /* ... and one arrival after each thread's flags */
    s->kv_empty_count = MLA_WG;                  /* the half's last reader: one consumer */
    s->bar_q_full = plan_mbar(p, "bar_q_full", 1, s->q_full_count, "Q gathered");
    s->bar_kv_full = plan_mbar(p, "bar_kv_full", 2 * p->stages, s->kv_full_count,
                               "half h of slot c gathered (index 2c+h), the slot's flags written");
    s->bar_kv_empty = plan_mbar(p, "bar_kv_empty", 2 * p->stages, s->kv_empty_count,
                                "half h of slot c read by consumer h, its last reader (index 2c+h)");

    plan_role(p, "producer", 0, 4, s->producer_regs, "gathers Q and the indexed kv rows with cp.async");
    for (int i = 0; i < s->consumers; i++) {
        char name[24], job[80];
        snprintf(name, sizeof name, "consumer%d", i);
        snprintf(job, sizeof job, "S = Q K^T of blocks 2j+%d, softmax, O[:, %d:%d] += P V of both blocks", i,
                 i * s->dv_per_consumer, (i + 1) * s->dv_per_consumer);
        plan_role(p, name, 4 * (i + 1), 4, s->consumer_regs, job);
    }
    plan_note(p, "qk wgmma", "m64n%dk16 x %d per pair of kv blocks per consumer (SS; consumer c: block 2j+c)",
              s->block, s->qk_steps);
    plan_note(p, "pv wgmma", "m64n%dk16 x %d + %d per pair per consumer (own P RS from registers, the other's SS "
              "from smem)", s->dv_per_consumer, s->pv_steps, s->pv_steps);
    plan_note(p, "p exchange", "%s; bars %d (row max), %d (P), %d (row sum)",
              s->p_in_rope ? "P0 in slot 0's rope chunk, P1 in buffer p" : "P0, P1 in buffer p", s->bar_max, s->bar_p,
              s->bar_sum);
    plan_note(p, "kv halves", "A = chunks 0-%d (consumer 0 frees), B = %d-%d (consumer 1); gathered A0 B1 B0 A1",
              s->half_chunks - 1, s->half_chunks, s->qk_chunks - 1);
    plan_note(p, "gather", "%d x 16 B cp.async per row, %d rows per block, zero-filled for invalid indices",
              s->units, s->block);
    if (s->tma_store)
        plan_note(p, "epilogue", "consumer c stages O[:, 256c..] in Q chunks %d-%d (bar %d + c), %d TMA stores of 64 "
                  "heads x 64 columns each", 0, s->dv_chunks - 1, s->bar_epi0, s->half_chunks);
    else
        plan_note(p, "epilogue", "O by st.global from the accumulators (one bf16 pair per store; any strides)");
    mla_params(p);
    (void)err, (void)n;
    return 0;
}

/* ------------------------------------------------------------ kernel: prologue */

static void mla_prologue(Emit *e)
{
    const Plan *p = e->p;
    const SparsePlan90 *s = mla90(p);
    emit_section(e, "prologue: thread coordinates, parameters, smem base, this CTA's token and heads");
    kernel_coords(e);
    kernel_params(e);
    mla_tile_coords(e, s->heads, 0, s->block);
    emit_note(e, "the consumers take the blocks in pairs (2j: consumer 0, 2j+1: consumer 1); an odd count "
                 "gets a last block of invalid positions");
    emit(e, "add.u32 %s, %%nblk, 1;", reg(e, "b32", "npair"));
    emit(e, "shr.u32 %%npair, %%npair, 1;");
    emit(e, "shl.b32 %s, %%npair, 1;", reg(e, "b32", "nblk2"));
}

static void mla_barrier_init(Emit *e)
{
    const Plan *p = e->p;
    char lbl[NAME];
    Reg b = mbar_init_begin(e, lbl, sizeof lbl, "prologue: mbarrier init (thread 0)");
    const Mbar bars[] = {mbar_plan(e, "bar_q_full"), mbar_plan(e, "bar_kv_full"), mbar_plan(e, "bar_kv_empty")};
    mbar_init(e, b, &bars[0], 0);
    for (int i = 0; i < 2 * p->stages; i++) {
        mbar_init(e, b, &bars[1], i);
        mbar_init(e, b, &bars[2], i);
    }
    mbar_init_end(e, lbl);
    emit_note(e, "no thread touches a barrier before thread 0 has initialised it");
    op_bar_sync(e, 0, p->threads);
}

/* ------------------------------------------------------------ kernel: producer */

/* dst (u64) = base + (a * sa + b * sb) * elem_bytes, element strides sa and sb in u64 registers
 * (b REG_NONE: no second term). */
static void elem_addr(Emit *e, Reg dst, Reg base, Reg a, Reg sa, Reg b, Reg sb, int elem_bytes)
{
    Reg t = reg_b64(e, "pr_t64");
    REG_WANT(e, dst, RT_B64), REG_WANT(e, base, RT_B64), REG_WANT(e, sa, RT_B64);
    op_cvt(e, "u64.u32", t, a);
    emit(e, "mul.lo.u64 %s, %s, %s;", R(e, dst), R(e, t), R(e, sa));
    if (reg_is(b)) {
        REG_WANT(e, sb, RT_B64);
        op_cvt(e, "u64.u32", t, b);
        emit(e, "mad.lo.u64 %s, %s, %s, %s;", R(e, dst), R(e, t), R(e, sb), R(e, dst));
    }
    emit(e, "mad.lo.u64 %s, %s, %d, %s;", R(e, dst), R(e, dst), elem_bytes, R(e, base));
}

/* Copies one row (qk_chunks x 128 B) from src to the tile whose row is at [dst + tile_off]: this
 * thread's 16-byte unit of every chunk (8 threads cover a chunk row, so each warp-wide cp.async
 * reads 4 whole 128-byte lines). */
static void gather_row(Emit *e, Reg dst, uint32_t tile_off, Reg src, Reg bytes)
{
    const SparsePlan90 *s = mla90(e->p);
    for (int c = 0; c < s->qk_chunks; c++)
        op_cp_async16(e, REG_NONE, dst, tile_off + (uint32_t)c * s->chunk_bytes, src,
                      (uint32_t)(c * e->p->swizzle_bytes), bytes);
}

/* The loop that producer (over kv blocks) and consumers (over pairs of blocks) share: counter j
 * from 0 to n, the ring at slot 0 / phase 0, and the exit test at the top. `who` prefixes the
 * labels and the predicate. */
static void block_loop_begin(Emit *e, const char *who, Reg j, Reg n, Reg stage, Reg phase, char top[NAME],
                             char done[NAME])
{
    char stem[NAME];
    if (reg_is(stage))
        ring_reset(e, stage, phase);
    else
        emit(e, "mov.u32 %s, 0;", R(e, phase));
    emit(e, "mov.u32 %s, 0;", R(e, j));
    snprintf(stem, sizeof stem, "%s_block", who);
    new_label(e, top, NAME, stem);
    snprintf(stem, sizeof stem, "%s_done", who);
    new_label(e, done, NAME, stem);
    Reg pend = reg_pred(e, "%s_end", who);
    emit_label(e, top);
    emit(e, "setp.ge.u32 %s, %s, %s;", R(e, pend), R(e, j), R(e, n));
    emit(e, "@%s bra.uni %s;", R(e, pend), done);
}

/* The loop's end: the next block, back to the top; the exit label after it. */
static void block_loop_end(Emit *e, Reg j, const char *top, const char *done)
{
    emit(e, "add.u32 %s, %s, 1;", R(e, j), R(e, j));
    emit(e, "bra.uni %s;", top);
    emit_label(e, done);
}

/* Half h of slot c, chunks [lo, hi) of every row: wait until its last reader freed it, then the
 * rows of this thread (block 2j+c, indices in idx[]) with cp.async, zero-filled where invalid; the
 * slot's flags when `flags`. */
static void gather_half(Emit *e, int slot, int half, const Reg *idx, int flags)
{
    const Plan *p = e->p;
    const SparsePlan90 *s = mla90(p);
    int sw = p->swizzle_bytes, groups = MLA_WG / (sw / MLA_UNIT), rows = s->block / groups;
    int lo = half ? s->half_chunks : 0, hi = half ? s->qk_chunks : s->half_chunks;
    Reg bar = reg_find(e, "pr_bar"), par = reg_find(e, "pr_par"), pv = reg_find(e, "pr_valid");
    Reg bytes = reg_find(e, "pr_bytes"), src = reg_find(e, "pr_src"), row = reg_b32(e, "pr_row_idx");
    Reg flag = reg_b32(e, "pr_flag"), dst = reg_find(e, "pr_dst"), fa = reg_find(e, "pr_fa");
    emit_note(e, "slot %d half %c (chunks %d..%d): free once consumer %d has read it (plan: bar_kv_empty[%d])",
              slot, 'A' + half, lo, hi - 1, half, 2 * slot + half);
    emit(e, "add.u32 %s, %%pr_empty0, %d;", R(e, bar), 8 * (2 * slot + half));
    op_mbar_wait(e, bar, par);
    for (int k = 0; k < rows; k++) {
        emit(e, "setp.lt.u32 %s, %s, %%s_kv;", R(e, pv), R(e, idx[k])); /* unsigned: negatives are huge */
        emit(e, "selp.u32 %s, %d, 0, %s;", R(e, bytes), MLA_UNIT, R(e, pv));
        emit(e, "selp.u32 %s, %s, 0, %s;", R(e, row), R(e, idx[k]), R(e, pv));
        elem_addr(e, src, reg_find(e, "kv"), row, reg_find(e, "kv_stride"), REG_NONE, REG_NONE, p->elem_bytes);
        emit(e, "mad.wide.u32 %s, %%pr_ucol, %d, %s;", R(e, src), p->elem_bytes, R(e, src));
        for (int c = lo; c < hi; c++)
            op_cp_async16(e, REG_NONE, dst,
                          s->off_kv + (uint32_t)slot * s->kv_stage_bytes + (uint32_t)c * s->chunk_bytes +
                              (uint32_t)(groups * k * sw),
                          src, (uint32_t)(c * sw), bytes);
        if (flags) {
            emit(e, "selp.u32 %s, 1, 0, %s;", R(e, flag), R(e, pv));
            op_st_shared_b32_if(e, reg_find(e, "pr_flagger"), fa,
                                (uint32_t)slot * s->valid_stage_bytes + (uint32_t)(4 * groups * k), flag);
        }
    }
    emit(e, "add.u32 %s, %%pr_full0, %d;", R(e, bar), 8 * (2 * slot + half));
    op_cp_async_arrive(e, bar);
    op_mbar_arrive(e, bar);
}

static void mla_producer(Emit *e)
{
    const Plan *p = e->p;
    const SparsePlan90 *s = mla90(p);
    int sw = p->swizzle_bytes, per_chunk = sw / MLA_UNIT, groups = MLA_WG / per_chunk;
    int rows = s->block / groups; /* rows of a block (and of Q) per thread */
    emit_section(e, "role producer (warpgroup 0): gather Q and the indexed kv rows with cp.async");
    op_setmaxnreg(e, s->producer_regs, p->entry_regs);
    Reg u_ = reg_b32(e, "pr_unit"), g_ = reg_b32(e, "pr_group"), dst_ = reg_b32(e, "pr_dst");
    const char *u = R(e, u_), *g = R(e, g_), *dst = R(e, dst_);
    emit_note(e, "%d threads per row, one 16-byte unit each: thread = %d * group + unit; the group's rows are "
                 "group + %d k, k < %d (each warp-wide cp.async reads 4 whole 128-byte lines)",
              per_chunk, per_chunk, groups, rows);
    emit(e, "and.b32 %s, %%thread, %d;", u, per_chunk - 1);
    emit(e, "shr.u32 %s, %%thread, %d;", g, __builtin_ctz((unsigned)per_chunk));
    emit_note(e, "128B swizzle: unit u of row r lands at unit u ^ (r %% 8); r %% 8 = group %% 8 for all its rows");
    emit(e, "and.b32 %s, %s, 7;", dst, g);
    emit(e, "xor.b32 %s, %s, %s;", dst, dst, u);
    emit(e, "shl.b32 %s, %s, 4;", dst, dst);
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", dst, g, sw, dst);
    emit(e, "add.u32 %s, %s, %%smem;", dst, dst);
    Reg ucol = reg_b32(e, "pr_ucol");
    emit(e, "mul.lo.u32 %s, %s, %d;", R(e, ucol), u, MLA_UNIT / p->elem_bytes);
    /* Q: heads h0 + group + 16k; heads past h_q are zero-filled */
    Reg head_ = reg_b32(e, "pr_head"), bytes = reg_b32(e, "pr_bytes"), src = reg_b64(e, "pr_src");
    Reg pv_ = reg_pred(e, "pr_valid"), bar = reg_b32(e, "pr_bar");
    const char *head = R(e, head_), *pv = R(e, pv_);
    Reg tok = reg_find(e, "tok");
    emit_note(e, "Q rows = query heads h0 + row of token tok; heads past h_q are zero-filled (no read)");
    for (int k = 0; k < rows; k++) {
        emit(e, "add.u32 %s, %%h0, %s;", head, g);
        if (k) emit(e, "add.u32 %s, %s, %d;", head, head, groups * k);
        emit(e, "setp.lt.u32 %s, %s, %%heads_q;", pv, head);
        emit(e, "selp.u32 %s, %d, 0, %s;", R(e, bytes), MLA_UNIT, pv);
        emit(e, "@!%s mov.u32 %s, 0;", pv, head);
        elem_addr(e, src, reg_find(e, "q"), tok, reg_find(e, "q_stride_s"), head_, reg_find(e, "q_stride_h"),
                  p->elem_bytes);
        emit(e, "mad.wide.u32 %s, %s, %d, %s;", R(e, src), R(e, ucol), p->elem_bytes, R(e, src));
        gather_row(e, dst_, s->off_q + (uint32_t)(groups * k * sw), src, bytes);
    }
    smem_at(e, bar, s->bar_q_full);
    op_cp_async_arrive(e, bar);

    emit_note(e, "kv blocks in pairs: block 2j into slot 0, 2j+1 into slot 1, each slot in two halves");
    Reg tl_ = reg_b32(e, "pr_tl"), pt = reg_pred(e, "pr_has_tl");
    const char *tl = R(e, tl_);
    emit(e, "mov.u32 %s, %%topk;", tl);
    emit(e, "setp.ne.u64 %s, %%topk_length, 0;", R(e, pt));
    Reg tla = reg_b64(e, "pr_tla");
    emit(e, "mul.wide.u32 %s, %%tok, 4;", R(e, tla));
    emit(e, "add.u64 %s, %s, %%topk_length;", R(e, tla), R(e, tla));
    op_ld_global(e, pt, "s32", tl_, tla, 0);
    /* fa4.h gives every bit pattern one meaning: a length below 0 is an empty row, one past topk is topk. A
     * signed clamp, as an unsigned min would read -1 as 2^32 - 1 and take every position */
    emit_note(e, "topk_length[tok] clamped to [0, topk] as a signed value (fa4.h): < 0 an empty row");
    emit(e, "max.s32 %s, %s, 0;", tl, tl);
    emit(e, "min.s32 %s, %s, %%topk;", tl, tl);
    Reg ia = reg_b64(e, "pr_ia");
    emit_note(e, "this thread's first index: indices[tok][group]");
    elem_addr(e, ia, reg_find(e, "indices"), tok, reg_find(e, "idx_stride"), REG_NONE, REG_NONE, 4);
    emit(e, "mad.wide.u32 %s, %s, 4, %s;", R(e, ia), g, R(e, ia));
    emit(e, "setp.eq.u32 %s, %s, 0;", R(e, reg_pred(e, "pr_flagger")), u);
    Reg fa = reg_b32(e, "pr_fa");
    smem_at(e, fa, s->off_valid);
    emit(e, "mad.lo.u32 %s, %s, 4, %s;", R(e, fa), g, R(e, fa));
    Reg phase = reg_b32(e, "pr_phase"), j_ = reg_b32(e, "pr_j");
    Reg par = reg_b32(e, "pr_par"), pos_ = reg_b32(e, "pr_pos");
    Reg idx[2][8];
    const char *pos = R(e, pos_);
    char top[NAME], done[NAME];
    block_loop_begin(e, "pr", j_, reg_find(e, "npair"), REG_NONE, phase, top, done);
    emit_note(e, "indices of this thread's rows of blocks 2j and 2j+1 (position 2j*%d + b*%d + group + %d k); "
                 "positions at or past topk_length are not read (-1: invalid)",
              s->block, s->block, groups);
    emit(e, "mul.lo.u32 %s, %s, %d;", pos, R(e, j_), 2 * s->block);
    emit(e, "add.u32 %s, %s, %s;", pos, pos, g);
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < rows; k++) {
            idx[b][k] = reg_b32(e, "pr_idx%d_%d", b, k);
            emit(e, "setp.lt.u32 %s, %s, %s;", pv, pos, tl);
            emit(e, "mov.u32 %s, -1;", R(e, idx[b][k]));
            op_ld_global(e, pv_, "u32", idx[b][k], ia, (uint32_t)(4 * (b * s->block + groups * k)));
            if (b == 0 || k + 1 < rows)
                emit(e, "add.u32 %s, %s, %d;", pos, pos, k + 1 < rows ? groups : s->block - groups * (rows - 1));
        }
    emit(e, "add.u64 %s, %s, %d;", R(e, ia), R(e, ia), 4 * 2 * s->block);
    ring_free_parity(e, par, phase);
    emit_note(e, "the order the consumers free and need them: A0 (consumer 0's first), B1 (consumer 1's first), "
                 "B0, A1 (plan: kv halves)");
    gather_half(e, 0, 0, idx[0], 1);
    gather_half(e, 1, 1, idx[1], 1);
    gather_half(e, 0, 1, idx[0], 0);
    gather_half(e, 1, 0, idx[1], 0);
    emit(e, "xor.b32 %s, %s, 1;", R(e, phase), R(e, phase));
    block_loop_end(e, j_, top, done);
}

/* ------------------------------------------------------------ kernel: consumers */

enum { HALVES = 2 };

/* S or O accumulator register of column pair q, row half h (rows lane/4 and lane/4 + 8), element x
 * (the wgmma D fragment: PTX ISA "wgmma .m64nNk16 register fragments"). */
static int acc_index(int q, int h, int x) { return 2 * HALVES * q + 2 * h + x; }

static void consumer_setup(Emit *e)
{
    const SparsePlan90 *s = mla90(e->p);
    int sw = e->p->swizzle_bytes;
    emit(e, "sub.u32 %s, %%wg, 1;", reg(e, "b32", "cs_c"));
    emit(e, "and.b32 %s, %%warp, 3;", reg(e, "b32", "cs_w"));
    emit(e, "and.b32 %s, %%lane, 3;", reg(e, "b32", "cs_lm"));
    const char *r0 = reg(e, "b32", "cs_row0");
    emit_note(e, "accumulator rows (query heads of the tile) of this thread: 16*warp + lane/4 (+8)");
    emit(e, "shr.u32 %s, %%lane, 2;", r0);
    emit(e, "mad.lo.u32 %s, %%cs_w, 16, %s;", r0, r0);
    emit(e, "add.u32 %s, %s, 8;", reg(e, "b32", "cs_row1"), r0);
    Reg qlo_ = reg_b32(e, "cs_q_lo");
    const char *qlo = R(e, qlo_);
    emit_note(e, "Q descriptor (K-major, SBO = 8 rows x %d B); K descriptors step their low word", sw);
    smem_at(e, qlo_, s->off_q);
    emit(e, "shr.u32 %s, %s, 4;", qlo, qlo);
    emit(e, "or.b32 %s, %s, 0x%08X;", qlo, qlo, sm90_desc_lo_lbo(16));
    emit(e, "mov.b32 %s, 0x%08X;", reg(e, "b32", "cs_desc_hi"), sm90_desc_hi(8u * (uint32_t)sw, sw));
    Reg kvlo = reg_b32(e, "cs_kv_lo");
    emit_note(e, "kv tile descriptors: slot, chunk and k step are constant offsets from the ring's base");
    smem_at(e, kvlo, s->off_kv);
    emit(e, "shr.u32 %s, %s, 4;", R(e, kvlo), R(e, kvlo));
    emit(e, "or.b32 %s, %s, 0x%08X;", R(e, kvlo), R(e, kvlo), sm90_desc_lo_lbo(16));
    smem_reg(e, "cs_full0", s->bar_kv_full);
    smem_reg(e, "cs_empty0", s->bar_kv_empty);
    emit(e, "xor.b32 %s, %%cs_c, 1;", reg(e, "b32", "cs_oc"));
    emit_note(e, "this thread's P pairs: row r at r*%d B, 16-byte unit q at (q ^ (r %% 8)) * 16, word lane %% 4 "
                 "(rows r and r + 8 share r %% 8 = lane / 4)", sw);
    Reg prow = reg_b32(e, "cs_p_row");
    emit(e, "mad.lo.u32 %s, %%cs_row0, %d, %%smem;", R(e, prow), sw);
    emit(e, "mad.lo.u32 %s, %%cs_lm, 4, %s;", R(e, prow), R(e, prow));
    emit(e, "shr.u32 %s, %%lane, 2;", reg(e, "b32", "cs_pkey"));
    Reg xo = reg_b32(e, "cs_xmax_own"), xt = reg_b32(e, "cs_xmax_oth");
    emit_note(e, "row max exchange slots for row cs_row0 (+8 rows: +32 B)");
    smem_indexed(e, xo, s->off_xmax, reg_find(e, "cs_c"), (uint32_t)s->heads * 4);
    emit(e, "mad.lo.u32 %s, %%cs_row0, 4, %s;", R(e, xo), R(e, xo));
    smem_indexed(e, xt, s->off_xmax, reg_find(e, "cs_oc"), (uint32_t)s->heads * 4);
    emit(e, "mad.lo.u32 %s, %%cs_row0, 4, %s;", R(e, xt), R(e, xt));
    emit(e, "setp.eq.u32 %s, %%cs_lm, 0;", reg(e, "pred", "cs_quad0"));
    Reg ol_ = reg_b32(e, "cs_vbase");
    const char *ol = R(e, ol_);
    emit_note(e, "this thread's first valid flag: column 2*(lane%%4) of the block");
    smem_at(e, ol_, s->off_valid);
    emit(e, "mad.lo.u32 %s, %%cs_lm, 8, %s;", ol, ol);
    reg_array(e, "f32", "s", s->block / 2);
    reg_array(e, "f32", "o", s->dv_per_consumer / 2);
    reg_array(e, "b32", "pa", s->block / 4);
    for (int i = 0; i < s->dv_per_consumer / 2; i++) emit(e, "mov.f32 %%o%d, 0f00000000;", i);
    for (int h = 0; h < HALVES; h++) {
        emit(e, "mov.f32 %s, %s;", reg(e, "f32", h ? "cs_m1" : "cs_m0"), PTX_NEG_INF);
        emit(e, "mov.f32 %s, %s;", reg(e, "f32", h ? "cs_mx1" : "cs_mx0"), PTX_NEG_INF);
        emit(e, "mov.f32 %s, 0f00000000;", reg(e, "f32", h ? "cs_l1" : "cs_l0"));
    }
}

/* S (+)= Q K^T over chunks [lo, hi) of slot `slot`: wgmma m64nBk16 SS, the first one overwriting S
 * when `first`. */
static void issue_qk(Emit *e, int slot, int lo, int hi, int first)
{
    const Plan *p = e->p;
    const SparsePlan90 *s = mla90(p);
    Reg qlo_ = reg_b32(e, "cs_qd_lo"), klo_ = reg_b32(e, "cs_kd_lo");
    Reg qd = reg_b64(e, "cs_qd"), kd = reg_b64(e, "cs_kd");
    const char *qlo = R(e, qlo_), *klo = R(e, klo_);
    uint32_t step = MLA_K_STEP * (uint32_t)p->elem_bytes, kv_chunk = (uint32_t)(s->block * p->swizzle_bytes);
    int steps_per_chunk = p->chunk_elems / MLA_K_STEP;
    emit_note(e, "S %s= Q K^T, chunks %d..%d of slot %d: %d x wgmma m64n%dk16 SS (plan: qk wgmma)", first ? "" : "+",
              lo, hi - 1, slot, (hi - lo) * steps_per_chunk, s->block);
    op_wgmma_fence(e);
    for (int kk = lo * steps_per_chunk; kk < hi * steps_per_chunk; kk++) {
        emit(e, "add.u32 %s, %%cs_q_lo, %u;", qlo, op_desc_kstep(kk, steps_per_chunk, step, s->chunk_bytes));
        emit(e, "add.u32 %s, %%cs_kv_lo, %u;", klo,
             op_desc_delta((uint32_t)slot * s->kv_stage_bytes) + op_desc_kstep(kk, steps_per_chunk, step, kv_chunk));
        emit(e, "mov.b64 %s, {%s, %%cs_desc_hi};", R(e, qd), qlo);
        emit(e, "mov.b64 %s, {%s, %%cs_desc_hi};", R(e, kd), klo);
        op_wgmma_ss(e, s->block, p->cfg.dtype, reg_find(e, "s"), qd, kd, first && kk == lo * steps_per_chunk ? 0 : 1,
                    0);
    }
}

/* Hide the columns whose index was invalid: their flag in the slot is 0. */
static void mask_invalid(Emit *e, int slot)
{
    const SparsePlan90 *s = mla90(e->p);
    Reg fa = reg_b32(e, "cs_fa"), f = reg_b32(e, "cs_flag"), pi_ = reg_pred(e, "cs_invalid");
    const char *pi = R(e, pi_);
    emit_note(e, "columns of invalid indices: -inf (their rows were zero-filled, never read)");
    emit(e, "add.u32 %s, %%cs_vbase, %u;", R(e, fa), (uint32_t)slot * s->valid_stage_bytes);
    for (int q = 0; q < s->block / 8; q++)
        for (int x = 0; x < 2; x++) {
            op_ld_shared_b32(e, f, fa, (uint32_t)(4 * (8 * q + x)));
            emit(e, "setp.eq.u32 %s, %s, 0;", pi, R(e, f));
            for (int h = 0; h < HALVES; h++) emit(e, "@%s mov.f32 %%s%d, %s;", pi, acc_index(q, h, x), PTX_NEG_INF);
        }
}

static void softmax_block(Emit *e)
{
    const SparsePlan90 *s = mla90(e->p);
    int n = s->block / 4; /* registers per row half */
    Reg s_acc = reg_find(e, "s"), row[HALVES][64];
    for (int h = 0; h < HALVES; h++)
        for (int q = 0; q < s->block / 8; q++)
            for (int x = 0; x < 2; x++) row[h][2 * q + x] = reg_at(e, s_acc, acc_index(q, h, x));
    Reg t = reg_f32(e, "cs_shfl"), bmax[HALVES];
    for (int h = 0; h < HALVES; h++) {
        bmax[h] = reg_f32(e, "cs_bmax%d", h);
        sfx_max_tree(e, bmax[h], row[h], n);
        sfx_reduce_lanes(e, "max", bmax[h], t, 4);
    }
    const SparsePlan90 *sp = s;
    emit_note(e, "both consumers continue with the max over the pair's two blocks, so P of either block "
                 "can be summed into either half of O (plan: bar_max %d)", sp->bar_max);
    for (int h = 0; h < HALVES; h++) op_st_shared_b32_if(e, reg_find(e, "cs_quad0"), reg_find(e, "cs_xmax_own"), 32u * (uint32_t)h, bmax[h]);
    op_bar_sync(e, sp->bar_max, 2 * MLA_WG);
    for (int h = 0; h < HALVES; h++) {
        op_ld_shared_b32(e, t, reg_find(e, "cs_xmax_oth"), 32u * (uint32_t)h);
        emit(e, "max.f32 %s, %s, %s;", R(e, bmax[h]), R(e, bmax[h]), R(e, t));
    }
    for (int h = 0; h < HALVES; h++) {
        char bm[NAME], m[NAME], mx[NAME], nms[NAME], corr[NAME], need[NAME], rs[NAME], l[NAME];
        snprintf(bm, NAME, "%%cs_bmax%d", h);
        snprintf(m, NAME, "%%cs_m%d", h);
        snprintf(mx, NAME, "%%cs_mx%d", h);
        snprintf(nms, NAME, "cs_neg_ms%d", h);
        snprintf(corr, NAME, "cs_corr%d", h);
        snprintf(need, NAME, "cs_need%d", h);
        snprintf(rs, NAME, "cs_rsum%d", h);
        snprintf(l, NAME, "%%cs_l%d", h);
        emit_note(e, "the true row max, for max_logits (the lazy max below may lag it)");
        emit(e, "max.f32 %s, %s, %s;", mx, mx, bm);
        /* declared in this order, as the PTX has them */
        Reg need_r = reg_pred(e, "%s", need), corr_r = reg_f32(e, "%s", corr), neg_ms = reg_f32(e, "%s", nms);
        Reg scale_log2 = reg_find(e, "scale_log2");
        sfx_update_max_lazy(e, reg_find(e, "%s", m + 1), reg_find(e, "%s", bm + 1), scale_log2, s->rescale, neg_ms, corr_r, need_r);
        sfx_exp2_scaled(e, row[h], n, scale_log2, neg_ms, 0);
        sfx_sum_tree(e, reg_f32(e, "%s", rs), row[h], n);
        emit(e, "fma.rn.f32 %s, %s, %%%s, %%%s;", l, l, corr, rs);
    }
    emit(e, "or.pred %%cs_need0, %%cs_need0, %%cs_need1;");
    op_vote_any(e, reg_pred(e, "cs_rescale"), reg_find(e, "cs_need0"));
    char skip[NAME];
    emit_note(e, "rescale O (no PV in flight) only when the warp's vote says a row max moved");
    emit(e, "@!%%cs_rescale bra %s;", new_label(e, skip, sizeof skip, "cs_no_rescale"));
    for (int q = 0; q < s->dv_per_consumer / 8; q++)
        for (int h = 0; h < HALVES; h++)
            for (int x = 0; x < 2; x++)
                emit(e, "mul.f32 %%o%d, %%o%d, %%cs_corr%d;", acc_index(q, h, x), acc_index(q, h, x), h);
    emit_label(e, skip);
}

/* P of this consumer's block: bf16 pairs in the A-fragment layout of the RS wgmma (register j packs
 * S[2j+1]:S[2j]), and the same pairs into this consumer's P buffer for the other one; the barrier
 * then publishes both consumers' P (plan: p exchange). */
static void share_p(Emit *e, int c)
{
    const Plan *p = e->p;
    const SparsePlan90 *s = mla90(p);
    uint32_t sw = (uint32_t)p->swizzle_bytes;
    Reg pa = reg_find(e, "pa"), s_acc = reg_find(e, "s");
    emit_note(e, "P to bf16 pairs: the RS wgmma's A fragment and, swizzled, the other consumer's SS operand");
    for (int j = 0; j < s->block / 4; j++)
        op_cvt_pack(e, p->cfg.dtype, reg_at(e, pa, j), reg_at(e, s_acc, 2 * j + 1), reg_at(e, s_acc, 2 * j));
    Reg a = reg_b32(e, "cs_pst");
    for (int q = 0; q < s->block / 8; q++) {
        emit(e, "xor.b32 %s, %%cs_pkey, %d;", R(e, a), q);
        emit(e, "shl.b32 %s, %s, 4;", R(e, a), R(e, a));
        emit(e, "add.u32 %s, %s, %%cs_p_row;", R(e, a), R(e, a));
        for (int h = 0; h < HALVES; h++)
            op_st_shared_b32(e, a, s->off_p[c] + (uint32_t)h * 8u * sw, reg_at(e, pa, HALVES * q + h));
    }
    op_fence_proxy_async(e);
    op_bar_sync(e, s->bar_p, 2 * MLA_WG);
}

/* O[:, c half] += P V over the pair: this consumer's P from registers with its slot's V (RS), then
 * the other's P from smem with the other slot's V (SS), each its own commit group so that half c of
 * this consumer's slot is freed as soon as the RS group is done. V is MN-major: LBO = chunk stride,
 * SBO = 8 rows. */
static void issue_pv(Emit *e, int c, Reg phase)
{
    const Plan *p = e->p;
    const SparsePlan90 *s = mla90(p);
    uint32_t sw = (uint32_t)p->swizzle_bytes, kv_chunk = (uint32_t)s->block * sw;
    uint32_t vcol = (uint32_t)c * (uint32_t)s->half_chunks * kv_chunk;
    int oc = 1 - c;
    Reg bar = reg_find(e, "cs_bar"), pa = reg_find(e, "pa");
    Reg addr = reg_b32(e, "cs_v_addr"), vdesc = reg_b64(e, "cs_v_desc"), vd = reg_b64(e, "cs_vd");
    Reg plo = reg_b32(e, "cs_pd_lo"), pd = reg_b64(e, "cs_pd");
    emit_note(e, "O[:, %d..] += P V: %d x wgmma m64n%dk16 RS (own P, slot %d) + %d SS (P of consumer %d, slot %d); "
                 "V MN-major (LBO = chunk stride %u, SBO = 8 rows)",
              c * s->dv_per_consumer, s->pv_steps, s->dv_per_consumer, c, s->pv_steps, oc, oc, kv_chunk);
    smem_at(e, addr, s->off_kv + (uint32_t)c * s->kv_stage_bytes + vcol);
    op_sm90_desc(e, vdesc, addr, kv_chunk, 8 * sw, (int)sw);
    op_wgmma_fence(e);
    for (int kb = 0; kb < s->pv_steps; kb++) {
        Reg ap[4];
        for (int i = 0; i < 4; i++) ap[i] = reg_at(e, pa, 4 * kb + i);
        emit(e, "add.s64 %s, %s, %u;", R(e, vd), R(e, vdesc), op_desc_delta((uint32_t)kb * MLA_K_STEP * sw));
        op_wgmma_rs(e, s->dv_per_consumer, p->cfg.dtype, reg_find(e, "o"), ap, vd, REG_NONE, 1);
    }
    op_wgmma_commit(e);
    emit_note(e, "slot %d's half %c was published to consumer %d; wait on its barrier too (complete by now)", oc,
              'A' + c, oc);
    emit(e, "add.u32 %s, %%cs_full0, %d;", R(e, bar), 8 * (2 * oc + c));
    op_mbar_wait(e, bar, phase);
    smem_at(e, addr, s->off_kv + (uint32_t)oc * s->kv_stage_bytes + vcol);
    op_sm90_desc(e, vdesc, addr, kv_chunk, 8 * sw, (int)sw);
    smem_at(e, plo, s->off_p[oc]);
    emit(e, "shr.u32 %s, %s, 4;", R(e, plo), R(e, plo));
    emit(e, "or.b32 %s, %s, 0x%08X;", R(e, plo), R(e, plo), sm90_desc_lo_lbo(16));
    for (int kb = 0; kb < s->pv_steps; kb++) {
        emit(e, "add.u32 %s, %s, %u;", R(e, plo), R(e, plo), kb ? op_desc_delta(MLA_K_STEP * (uint32_t)p->elem_bytes) : 0);
        emit(e, "mov.b64 %s, {%s, %%cs_desc_hi};", R(e, pd), R(e, plo));
        emit(e, "add.s64 %s, %s, %u;", R(e, vd), R(e, vdesc), op_desc_delta((uint32_t)kb * MLA_K_STEP * sw));
        op_wgmma_ss(e, s->dv_per_consumer, p->cfg.dtype, reg_find(e, "o"), pd, vd, 1, 1);
    }
    op_wgmma_commit(e);
    emit_note(e, "RS done: half %c of slot %d is free (plan: bar_kv_empty[%d]); then SS: half %c of slot %d",
              'A' + c, c, 3 * c, 'A' + c, oc);
    op_wgmma_wait(e, 1);
    emit(e, "add.u32 %s, %%cs_empty0, %d;", R(e, bar), 8 * (2 * c + c));
    op_mbar_arrive(e, bar);
    op_wgmma_wait(e, 0);
    emit(e, "add.u32 %s, %%cs_empty0, %d;", R(e, bar), 8 * (2 * oc + c));
    op_mbar_arrive(e, bar);
}

/* O[:, c*dv_per_consumer ..] x inv of accumulator half h straight to global memory: one bf16 pair
 * per st.global (tma_store 0: any out strides). */
static void store_o_global(Emit *e, int h, Reg head_, Reg ph_, Reg inv_)
{
    const Plan *p = e->p;
    const SparsePlan90 *s = mla90(p);
    Reg oa_ = reg_b64(e, "cs_oa"), col_ = reg_b32(e, "cs_col"), pk = reg_b32(e, "cs_pk");
    const char *oa = R(e, oa_), *col = R(e, col_), *INV = R(e, inv_);
    emit_note(e, "O columns c*%d + 8q + 2*(lane%%4) + {0, 1}: one bf16 pair per store", s->dv_per_consumer);
    elem_addr(e, oa_, reg_find(e, "out"), reg_find(e, "tok"), reg_find(e, "out_stride_s"), head_,
              reg_find(e, "out_stride_h"), p->elem_bytes);
    emit(e, "mad.lo.u32 %s, %%cs_c, %d, 0;", col, s->dv_per_consumer);
    emit(e, "mad.lo.u32 %s, %%cs_lm, 2, %s;", col, col);
    emit(e, "mad.wide.u32 %s, %s, %d, %s;", oa, col, p->elem_bytes, oa);
    Reg a = reg_b64(e, "cs_oa_q"), o = reg_find(e, "o");
    for (int q = 0; q < s->dv_per_consumer / 8; q++) {
        Reg lo = reg_at(e, o, acc_index(q, h, 0)), hi = reg_at(e, o, acc_index(q, h, 1));
        emit(e, "mul.f32 %s, %s, %s;", R(e, lo), R(e, lo), INV);
        emit(e, "mul.f32 %s, %s, %s;", R(e, hi), R(e, hi), INV);
        op_cvt_pack(e, p->cfg.dtype, pk, hi, lo);
        emit(e, "add.u64 %s, %s, %d;", R(e, a), oa, 8 * q * p->elem_bytes);
        op_st_global_b32(e, ph_, a, pk);
    }
}

/* tma_store 1: O[:, c*dv_per_consumer ..] x inv of accumulator half h into the Q tile, chunks
 * c*half_chunks.., in the TMA's 128-byte swizzle (Q is dead: every wgmma of both consumers
 * completed before bar_sum). Rows past h_q are staged too; the TMA clips them. */
static void stage_o(Emit *e, int h, Reg inv_)
{
    const Plan *p = e->p;
    const SparsePlan90 *s = mla90(p);
    int units = p->swizzle_bytes / 16, chunk_q = p->chunk_elems / 8;
    Reg key = reg_b32(e, "cs_swz"), base = reg_b32(e, "cs_obase"), tmp = reg_b32(e, "cs_otmp");
    Reg buf = reg_b32(e, "cs_obuf"), pk = reg_b32(e, "cs_pk");
    emit_note(e, "O half %d of this thread: row cs_row%d of chunks %d*c.. of the Q tile (plan: epilogue)", h, h,
              s->half_chunks);
    smem_indexed(e, buf, s->off_q, reg_find(e, "cs_c"), (uint32_t)s->half_chunks * s->chunk_bytes);
    swizzle_row(e, key, base, reg_find(e, "cs_row%d", h), buf);
    emit(e, "mad.lo.u32 %s, %%cs_lm, 4, %s;", R(e, base), R(e, base));
    Reg unit[16];
    for (int u = 0; u < units; u++) {
        unit[u] = reg_b32(e, "cs_ou%d", u);
        swizzle_unit(e, tmp, key, u);
        emit(e, "add.u32 %s, %s, %s;", R(e, unit[u]), R(e, base), R(e, tmp));
    }
    Reg o = reg_find(e, "o");
    for (int q = 0; q < s->dv_per_consumer / 8; q++) {
        Reg lo = reg_at(e, o, acc_index(q, h, 0)), hi = reg_at(e, o, acc_index(q, h, 1));
        emit(e, "mul.f32 %s, %s, %s;", R(e, lo), R(e, lo), R(e, inv_));
        emit(e, "mul.f32 %s, %s, %s;", R(e, hi), R(e, hi), R(e, inv_));
        op_cvt_pack(e, p->cfg.dtype, pk, hi, lo);
        op_st_shared_b32(e, unit[q % chunk_q], (uint32_t)(q / chunk_q) * s->chunk_bytes, pk);
    }
}

/* The staged O of this consumer leaves by TMA: one 3-d box (64 columns, 64 heads, one token) per
 * chunk, issued by the warpgroup's first thread once all 128 have staged (named barrier epilogue
 * + c); the CTA stays until the stores have read smem. */
static void tma_store_o(Emit *e)
{
    const Plan *p = e->p;
    const SparsePlan90 *s = mla90(p);
    char done[NAME];
    Reg id = reg_b32(e, "cs_epi_bar"), lead = reg_pred(e, "cs_leader");
    Reg src = reg_b32(e, "cs_osrc"), col = reg_b32(e, "cs_ocol");
    op_fence_proxy_async(e);
    emit_note(e, "plan: named barrier epilogue<c> (%d + c), the consumer's 128 threads", s->bar_epi0);
    emit(e, "add.u32 %s, %%cs_c, %d;", R(e, id), s->bar_epi0);
    op_bar_sync_at(e, REG_NONE, id, MLA_WG);
    emit(e, "and.b32 %s, %%thread, %d;", R(e, src), MLA_WG - 1);
    emit(e, "setp.eq.u32 %s, %s, 0;", R(e, lead), R(e, src));
    emit(e, "@!%s bra %s;", R(e, lead), new_label(e, done, sizeof done, "o_stored"));
    smem_indexed(e, src, s->off_q, reg_find(e, "cs_c"), (uint32_t)s->half_chunks * s->chunk_bytes);
    emit(e, "mul.lo.u32 %s, %%cs_c, %d;", R(e, col), s->dv_per_consumer);
    for (int k = 0; k < s->half_chunks; k++) {
        if (k) {
            emit(e, "add.u32 %s, %s, %u;", R(e, src), R(e, src), s->chunk_bytes);
            emit(e, "add.u32 %s, %s, %d;", R(e, col), R(e, col), p->chunk_elems);
        }
        op_tma_store_3d(e, reg_find(e, "tmap_o"), col, reg_find(e, "h0"), reg_find(e, "tok"), src);
    }
    op_bulk_commit(e);
    op_bulk_wait_read(e, 0);
    emit_label(e, done);
}

static void consumer_epilogue(Emit *e)
{
    const Plan *p = e->p;
    const SparsePlan90 *s = mla90(p);
    emit_section(e, "consumer epilogue: O / l x sink factor, then O (bf16), lse and max_logits");
    Reg t = reg_f32(e, "cs_shfl"), one = reg_f32(e, "cs_one");
    emit(e, "mov.f32 %s, 0f3F800000;", R(e, one));
    Reg ha_ = reg_b64(e, "cs_ha"), ps_ = reg_pred(e, "cs_has_sink");
    const char *ha = R(e, ha_), *ps = R(e, ps_);
    emit(e, "setp.ne.u64 %s, %%sink, 0;", ps);
    emit_note(e, "l = this consumer's row sum + the other's (plan: xsum, bar_sum %d)", s->bar_sum);
    uint32_t xsum = s->off_xsum - s->off_xmax;
    for (int h = 0; h < HALVES; h++) {
        Reg l_ = reg_find(e, "cs_l%d", h);
        sfx_reduce_lanes(e, "add", l_, t, 4);
        op_st_shared_b32_if(e, reg_find(e, "cs_quad0"), reg_find(e, "cs_xmax_own"), xsum + 32u * (uint32_t)h, l_);
    }
    op_bar_sync(e, s->bar_sum, 2 * MLA_WG);
    for (int h = 0; h < HALVES; h++) {
        Reg l_ = reg_find(e, "cs_l%d", h);
        op_ld_shared_b32(e, t, reg_find(e, "cs_xmax_oth"), xsum + 32u * (uint32_t)h);
        emit(e, "add.f32 %s, %s, %s;", R(e, l_), R(e, l_), R(e, t));
    }
    for (int h = 0; h < HALVES; h++) {
        Reg l_ = reg_find(e, "cs_l%d", h), m_ = reg_find(e, "cs_m%d", h), mx_ = reg_find(e, "cs_mx%d", h);
        const char *l = R(e, l_), *mx = R(e, mx_);
        Reg lse_ = reg_f32(e, "cs_lse%d", h), inv_ = reg_f32(e, "cs_inv%d", h), head_ = reg_b32(e, "cs_head%d", h);
        Reg ph_ = reg_pred(e, "cs_inb%d", h), pz_ = reg_pred(e, "cs_norow%d", h), sk_ = reg_f32(e, "cs_sink%d", h),
            f_ = reg_f32(e, "cs_sinkf%d", h);
        const char *LSE = R(e, lse_), *INV = R(e, inv_), *HEAD = R(e, head_);
        const char *PH = R(e, ph_), *PZ = R(e, pz_), *SK = R(e, sk_), *F = R(e, f_);
        emit_note(e, "a row with no valid index: l = 0, out 0, lse +inf, max_logits -inf");
        sfx_lse(e, lse_, m_, l_, reg_find(e, "scale_log2"));
        emit(e, "setp.eq.f32 %s, %s, 0f00000000;", PZ, l);
        emit(e, "@%s mov.f32 %s, 0f7F800000;", PZ, LSE);
        sfx_inv_sum(e, inv_, l_, one);
        emit(e, "add.u32 %s, %%h0, %%cs_row%d;", HEAD, h);
        emit(e, "setp.lt.u32 %s, %s, %%heads_q;", PH, HEAD);
        emit_note(e, "sink: out x e^lse / (e^lse + e^sink) = 1 / (1 + 2^((sink - lse) log2 e)); lse unchanged");
        emit(e, "mul.wide.u32 %s, %s, 4;", ha, HEAD);
        emit(e, "add.u64 %s, %s, %%sink;", ha, ha);
        emit(e, "mov.f32 %s, %s;", SK, PTX_NEG_INF);
        Reg pr = reg_pred(e, "cs_read_sink");
        emit(e, "and.pred %s, %s, %s;", R(e, pr), ps, PH); /* heads past h_q have no sink to read */
        op_ld_global(e, pr, "f32", sk_, ha_, 0);
        emit(e, "sub.f32 %s, %s, %s;", F, SK, LSE);
        emit(e, "mul.f32 %s, %s, %s;", F, F, PTX_LOG2E);
        emit(e, "ex2.approx.ftz.f32 %s, %s;", F, F);
        emit(e, "add.f32 %s, %s, 0f3F800000;", F, F);
        emit(e, "rcp.approx.ftz.f32 %s, %s;", F, F);
        emit(e, "@%s mov.f32 %s, 0f3F800000;", PZ, F); /* an empty row stays 0 whatever the sink */
        emit(e, "mul.f32 %s, %s, %s;", INV, INV, F);
        if (s->tma_store) stage_o(e, h, inv_);
        else store_o_global(e, h, head_, ph_, inv_);
        emit_note(e, "lse and max_logits [s_q, h_q]: consumer 0, one lane per row");
        Reg pw_ = reg_pred(e, "cs_wstat"), sa_ = reg_b64(e, "cs_sa"), ix_ = reg_b32(e, "cs_ix");
        Reg ml = reg_f32(e, "cs_maxl");
        const char *pw = R(e, pw_), *sa = R(e, sa_), *ix = R(e, ix_);
        emit(e, "setp.eq.u32 %s, %%cs_lm, 0;", pw);
        emit(e, "setp.eq.and.u32 %s, %%cs_c, 0, %s;", pw, pw);
        emit(e, "and.pred %s, %s, %s;", pw, pw, PH);
        emit(e, "mad.lo.u32 %s, %%tok, %%heads_q, %s;", ix, HEAD);
        emit(e, "mul.f32 %s, %s, %%sm_scale;", R(e, ml), mx);
        Reg pl = reg_pred(e, "cs_wlse"), pm = reg_pred(e, "cs_wml");
        emit(e, "setp.ne.and.u64 %s, %%lse, 0, %s;", R(e, pl), pw);
        emit(e, "setp.ne.and.u64 %s, %%max_logits, 0, %s;", R(e, pm), pw);
        emit(e, "mul.wide.u32 %s, %s, 4;", sa, ix);
        Reg sa2 = reg_b64(e, "cs_sa2");
        emit(e, "add.u64 %s, %s, %%lse;", R(e, sa2), sa);
        op_st_global_f32(e, pl, sa2, lse_);
        emit(e, "add.u64 %s, %s, %%max_logits;", R(e, sa2), sa);
        op_st_global_f32(e, pm, sa2, ml);
    }
    if (s->tma_store) tma_store_o(e);
}

/* Consumer c's loop over the pairs of kv blocks: its own QK on slot c (its half of the slot first:
 * the producer gathers it first), the softmax with the pair's max, P shared, then PV over both
 * slots' half c. Emitted once per consumer so slots and halves are constants. */
static void consumer_loop(Emit *e, int c)
{
    const SparsePlan90 *s = mla90(e->p);
    Reg bar = reg_find(e, "cs_bar"), phase = reg_b32(e, "cs_phase"), j_ = reg_b32(e, "cs_j");
    char top[NAME], done[NAME], who[8];
    int first = c, lo[2] = {0, s->half_chunks}, hi[2] = {s->half_chunks, s->qk_chunks};
    snprintf(who, sizeof who, "cs%d", c);
    emit_section(e, "consumer %d: S of block 2j+%d (slot %d), O[:, %d:%d] over both blocks", c, c, c,
                 c * s->dv_per_consumer, (c + 1) * s->dv_per_consumer);
    block_loop_begin(e, who, j_, reg_find(e, "npair"), REG_NONE, phase, top, done);
    for (int i = 0; i < 2; i++) {
        int h = i ? 1 - first : first;
        emit(e, "add.u32 %s, %%cs_full0, %d;", R(e, bar), 8 * (2 * c + h));
        op_mbar_wait(e, bar, phase);
        issue_qk(e, c, lo[h], hi[h], i == 0);
    }
    op_wgmma_commit(e);
    op_wgmma_wait(e, 0);
    mask_invalid(e, c);
    softmax_block(e);
    share_p(e, c);
    issue_pv(e, c, phase);
    emit(e, "xor.b32 %s, %s, 1;", R(e, phase), R(e, phase));
    block_loop_end(e, j_, top, done);
}

static void mla_consumer(Emit *e)
{
    const Plan *p = e->p;
    const SparsePlan90 *s = mla90(p);
    emit_section(e, "role consumers (warpgroups 1..%d): S, softmax, O += P V, epilogue", s->consumers);
    op_setmaxnreg(e, s->consumer_regs, p->entry_regs);
    consumer_setup(e);
    Reg bar = reg_b32(e, "cs_bar");
    smem_at(e, bar, s->bar_q_full);
    op_mbar_wait_imm(e, bar, 0);
    char second[NAME], epi[NAME];
    new_label(e, second, sizeof second, "consumer1");
    new_label(e, epi, sizeof epi, "cs_epilogue");
    emit(e, "setp.ne.u32 %s, %%cs_c, 0;", R(e, reg_pred(e, "cs_is1")));
    emit(e, "@%%cs_is1 bra.uni %s;", second);
    consumer_loop(e, 0);
    emit(e, "bra.uni %s;", epi);
    emit_label(e, second);
    consumer_loop(e, 1);
    emit_label(e, epi);
    consumer_epilogue(e);
}

int sm90_emit_mla_sparse(Emit *e)
{
    const SparsePlan90 *s = mla90(e->p);
    mla_prologue(e);
    mla_barrier_init(e);
    smem_reg(e, "pr_full0", s->bar_kv_full);
    smem_reg(e, "pr_empty0", s->bar_kv_empty);
    emit_section(e, "role dispatch: warpgroup 0 produces, the others consume");
    const char *pc = reg(e, "pred", "p_role");
    char cons[NAME], ret[NAME];
    new_label(e, cons, sizeof cons, "consumer");
    snprintf(ret, sizeof ret, "$ret");
    emit(e, "setp.ne.u32 %s, %%wg, 0;", pc);
    emit(e, "@%s bra.uni %s;", pc, cons);
    mla_producer(e);
    emit(e, "bra.uni %s;", ret);
    emit_label(e, cons);
    mla_consumer(e);
    emit_label(e, ret);
    emit(e, "ret;");
    return e->failed ? -1 : 0;
}

const Family sm90_mla_sparse = {KIND_MLA_SPARSE, mla_defaults, mla_check, mla_plan, sm90_emit_mla_sparse};
