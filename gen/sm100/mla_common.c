/* sm100/mla_common.c - the pieces both sm_100a sparse MLA kernels share (mla100.h): the prologue and
 * the TMEM allocation, the kv-block loop of every role, a block's indices and validity bits, the lazy O
 * rescale, the softmax's S-buffer dispatch, the epilogue (O / l x sink factor to bf16 with direct or
 * TMA stores, lse, max_logits), the fp8 dequant of one word and the role dispatch. Emitter stage: the
 * head-64 kernel (sm100/mla_head64.c) and the head-128 pair (sm100/mla_pair.c) call these; they call
 * neither kernel back (role emitters and per-block softmax come in as function pointers). */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../ops.h"
#include "../ops_copy.h"
#include "../softmax.h"
#include "mla100.h"
#include "sm100.h"

enum { NAME = MLA100_NAME };

/* ------------------------------------------------------------ kernel: prologue */

void mla100_prologue(Emit *e, int pair)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    emit_section(e, pair ? "prologue: thread coordinates, parameters, this cluster's token and this CTA's heads"
                         : "prologue: thread coordinates, parameters, smem base, this CTA's token and heads");
    kernel_coords(e);
    kernel_params(e);
    mla_tile_coords(e, s->heads, pair, s->block);
}

/* The MMA warp allocates the plan's TMEM columns (pair: in each CTA, cta_group::2); after the CTA
 * (pair: cluster) barrier every thread reads the base. */
void mla100_tmem_alloc(Emit *e, int pair)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    char lbl[NAME];
    Reg pr = reg_pred(e, "p_not_mma");
    if (pair)
        emit_section(e, "prologue: TMEM alloc (warp %d of each CTA, %d columns, cta_group::2), then the cluster "
                     "syncs", s->warp_mma, p->tmem_cols);
    else
        emit_section(e, "prologue: TMEM alloc (warp %d, %d columns), then the CTA syncs", s->warp_mma, p->tmem_cols);
    emit(e, "setp.ne.u32 %s, %%warp, %d;", R(e, pr), s->warp_mma);
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, lbl, sizeof lbl, "alloc_done"));
    Reg slot = smem_reg(e, "tmem_slot", s->off_tmem_slot);
    op_tmem_alloc(e, 1 + pair, slot, p->tmem_cols);
    op_tmem_relinquish(e, 1 + pair);
    emit_label(e, lbl);
    op_tc_fence_before(e);
    if (pair) {
        emit_note(e, "both CTAs' barriers are initialised and both allocated TMEM before either signals the other");
        op_cluster_sync(e);
    } else {
        emit_note(e, "no thread touches a barrier or TMEM before thread 0 initialised them and warp %d allocated",
                  s->warp_mma);
        op_bar_sync(e, 0, p->threads);
    }
    op_tc_fence_after(e);
    op_ld_shared_b32(e, reg_b32(e, "tmem"), reg_find(e, "smem"), s->off_tmem_slot);
    if (!pair) emit_note(e, "TMEM lane field of this warp's quarter (softmax warps: lanes 32*warp .. +31)");
    op_tmem_warp_lanes(e, reg_b32(e, "tm_lane"), reg_find(e, "warp"));
}

/* ------------------------------------------------------------ the block loop, every role */

/* The loop over the %nblk blocks of top-k positions: j from 0, the ring at slot 0 / phase 0. */
void mla100_loop_begin(Emit *e, const char *who, Reg j, Reg stage, Reg phase, char *top, char *done)
{
    char stem[NAME];
    ring_reset(e, stage, phase);
    emit(e, "mov.u32 %s, 0;", R(e, j));
    snprintf(stem, sizeof stem, "%s_block", who);
    new_label(e, top, NAME, stem);
    snprintf(stem, sizeof stem, "%s_done", who);
    new_label(e, done, NAME, stem);
    Reg pend = reg_pred(e, "%s_end", who);
    emit_label(e, top);
    emit(e, "setp.ge.u32 %s, %s, %%nblk;", R(e, pend), R(e, j));
    emit(e, "@%s bra.uni %s;", R(e, pend), done);
}

void mla100_loop_end(Emit *e, Reg j, Reg stage, Reg phase, int stages, const char *top, const char *done)
{
    ring_advance(e, stage, phase, stages);
    emit(e, "add.u32 %s, %s, 1;", R(e, j), R(e, j));
    emit(e, "bra.uni %s;", top);
    emit_label(e, done);
}


/* ------------------------------------------------------------ kernel: load warp */

/* dst (u64) = base + (a * stride + b) * bytes: element a of a strided array, plus b. */
void mla100_elem_addr(Emit *e, Reg dst, Reg base, Reg a, Reg stride, Reg b, int bytes)
{
    Reg t = reg_b64(e, "ad_t64");
    op_cvt(e, "u64.u32", t, a);
    emit(e, "mul.lo.u64 %s, %s, %s;", R(e, dst), R(e, t), R(e, stride));
    op_cvt(e, "u64.u32", t, b);
    emit(e, "add.u64 %s, %s, %s;", R(e, dst), R(e, dst), R(e, t));
    emit(e, "mad.lo.u64 %s, %s, %d, %s;", R(e, dst), R(e, dst), bytes, R(e, base));
}

/* Lane l takes positions l and l + 32 of block j: the index, whether it is valid (0 <= index <
 * s_kv and position < topk_length), the coordinate the gather uses (-1 when invalid: outside the
 * tensor, so nothing is read; in %ld_c<h>) and the validity bits of the block (one ballot per 32
 * positions, in %ld_bits<h> of every lane; lane 0 stores them for the MMA and softmax warps). The pair
 * (bf16 kv) publishes its CTA's bits on the slot's bar_mask_full; fp8 kv on the raw slot's barrier. */
void mla100_indices(Emit *e, Reg j, Reg stage, int pair)
{
    const SparsePlan100 *s = mla100(e->p);
    Reg pos = reg_b32(e, "ld_pos"), ia = reg_b64(e, "ld_ia"), ma = reg_b32(e, "ld_ma");
    Reg ok = reg_pred(e, "ld_ok"), inr = reg_pred(e, "ld_inrange");
    Reg bar = pair ? reg_b32(e, "ld_mbar") : REG_NONE, ca = REG_NONE;
    smem_indexed(e, ma, s->kv_fp8 ? s->off_raw_mask : s->off_mask, stage, s->mask_stage_bytes);
    if (s->kv_fp8) {
        emit_note(e, "fp8: every lane also stores its coordinates (the dequant warpgroup reads the scales' rows)");
        ca = reg_b32(e, "ld_ca");
        smem_indexed(e, ca, s->off_coord, stage, s->coord_stage_bytes);
        emit(e, "mad.lo.u32 %s, %%lane, 4, %s;", R(e, ca), R(e, ca));
    }
    for (int h = 0; h < s->block / MLA_WARP; h++) {
        Reg idx = reg_b32(e, "ld_c%d", h), bits = reg_b32(e, "ld_bits%d", h);
        emit(e, "mad.lo.u32 %s, %s, %d, %%lane;", R(e, pos), R(e, j), s->block);
        if (h) emit(e, "add.u32 %s, %s, %d;", R(e, pos), R(e, pos), h * MLA_WARP);
        mla100_elem_addr(e, ia, reg_find(e, "indices"), reg_find(e, "tok"), reg_find(e, "idx_stride"), pos, 4);
        emit(e, "setp.lt.s32 %s, %s, %%ld_len;", R(e, inr), R(e, pos));
        emit(e, "mov.u32 %s, -1;", R(e, idx));
        op_ld_global(e, inr, "s32", idx, ia, 0);
        if (!pair) emit_note(e, "valid: 0 <= index < s_kv (one unsigned compare) at a position before topk_length");
        emit(e, "setp.lt.u32 %s, %s, %%s_kv;", R(e, ok), R(e, idx));
        emit(e, "and.pred %s, %s, %s;", R(e, ok), R(e, ok), R(e, inr));
        emit(e, "selp.b32 %s, %s, -1, %s;", R(e, idx), R(e, idx), R(e, ok));
        op_vote_ballot(e, bits, ok);
        op_st_shared_b32_if(e, reg_find(e, "ld_lead"), ma, (uint32_t)(h * 4), bits);
        if (reg_is(ca)) op_st_shared_b32(e, ca, (uint32_t)(h * MLA_WARP * 4), idx);
    }
    if (!pair || s->kv_fp8) return; /* the slot's full barrier publishes them (fp8: the raw slot's, every lane) */
    emit_note(e, "this CTA's bits are written: its softmax and (even CTA) the MMA may read them");
    smem_indexed(e, bar, s->bar_mask_full, stage, MBAR_BYTES);
    op_mbar_arrive_if(e, reg_find(e, "ld_lead"), bar);
}

/* ------------------------------------------------------------ kernel: softmax warps */

/* O *= corr for this thread's row (half) in TMEM (lane field of its quarter, columns tm_o..). */
void mla100_rescale(Emit *e)
{
    const SparsePlan100 *s = mla100(e->p);
    Reg ta = reg_b32(e, "sx_ta"), o = reg_find(e, "sx_o");
    for (int c = 0; c < s->o_cols; c += s->o_chunk) {
        emit(e, "add.u32 %s, %%sx_tl, %u;", R(e, ta), s->tm_o + (uint32_t)c);
        op_tmem_ld(e, o, 0, s->o_chunk, ta);
        op_tmem_wait_ld(e);
        for (int x = 0; x < s->o_chunk; x++) {
            Reg ox = reg_at(e, o, x);
            emit(e, "mul.f32 %s, %s, %%sx_corr;", R(e, ox), R(e, ox));
        }
        op_tmem_st(e, ta, o, 0, s->o_chunk);
    }
    op_tmem_wait_st(e);
}

static void epilogue_tma(Emit *e, Reg inv);
static void epilogue_direct(Emit *e, Reg inv, Reg inb, int pair);
static void epilogue_stats(Emit *e, Reg inb, Reg lse, int pair);

/* Sink factor, O / l to bf16 in global memory, lse and max_logits of this lane's row. */
void mla100_epilogue(Emit *e, int pair)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    emit_section(e, "softmax epilogue: O / l x sink factor, then out (bf16), lse and max_logits");
    Reg l = reg_find(e, "sx_l"), one = reg_f32(e, "sx_one"), inv = reg_f32(e, "sx_inv"), lse = reg_f32(e, "sx_lse");
    Reg head = reg_b32(e, "sx_head"), inb = reg_pred(e, "sx_inb"), none = reg_pred(e, "sx_norow");
    Reg sk = reg_f32(e, "sx_sink"), f = reg_f32(e, "sx_sinkf"), ha = reg_b64(e, "sx_ha"), rsk = reg_pred(e, "sx_rsink");
    emit(e, "mov.f32 %s, 0f3F800000;", R(e, one));
    emit_note(e, "a row with no valid index: l = 0, out 0, lse +inf, max_logits -inf");
    sfx_lse(e, lse, reg_find(e, "sx_m"), l, reg_find(e, "scale_log2"));
    emit(e, "setp.eq.f32 %s, %s, 0f00000000;", R(e, none), R(e, l));
    emit(e, "@%s mov.f32 %s, 0f7F800000;", R(e, none), R(e, lse));
    sfx_inv_sum(e, inv, l, one);
    emit(e, "add.u32 %s, %%h0, %%sx_row;", R(e, head));
    emit(e, "setp.lt.u32 %s, %s, %%heads_q;", R(e, inb), R(e, head));
    emit_note(e, "sink: out x e^lse / (e^lse + e^sink) = 1 / (1 + 2^((sink - lse) log2 e)); lse unchanged");
    emit(e, "setp.ne.u64 %s, %%sink, 0;", R(e, rsk));
    emit(e, "and.pred %s, %s, %s;", R(e, rsk), R(e, rsk), R(e, inb));
    emit(e, "mul.wide.u32 %s, %s, 4;", R(e, ha), R(e, head));
    emit(e, "add.u64 %s, %s, %%sink;", R(e, ha), R(e, ha));
    emit(e, "mov.f32 %s, %s;", R(e, sk), PTX_NEG_INF);
    op_ld_global(e, rsk, "f32", sk, ha, 0);
    emit(e, "sub.f32 %s, %s, %s;", R(e, f), R(e, sk), R(e, lse));
    emit(e, "mul.f32 %s, %s, %s;", R(e, f), R(e, f), PTX_LOG2E);
    emit(e, "ex2.approx.ftz.f32 %s, %s;", R(e, f), R(e, f));
    emit(e, "add.f32 %s, %s, 0f3F800000;", R(e, f), R(e, f));
    emit(e, "rcp.approx.ftz.f32 %s, %s;", R(e, f), R(e, f));
    emit(e, "@%s mov.f32 %s, 0f3F800000;", R(e, none), R(e, f));
    emit(e, "mul.f32 %s, %s, %s;", R(e, inv), R(e, inv), R(e, f));
    if (s->tma_store)
        epilogue_tma(e, inv);
    else
        epilogue_direct(e, inv, inb, pair);
    epilogue_stats(e, inb, lse, pair);
}

/* Where the final O's packed column pairs go: pair k of the chunk at column c (columns c + 2k, c + 2k + 1). */
typedef struct OPairSink OPairSink;
struct OPairSink {
    Reg (*reg)(Emit *e, const OPairSink *o, int k);               /* the b32 to pack pair k into */
    void (*put)(Emit *e, const OPairSink *o, int c, int k, Reg pk); /* store it (or a group ending at it) */
    Reg oa, a, inb, pk, base, ua, key, w[4];
};

/* The final O of this thread's row, two columns at a time: wait for the last PV (bar_pv_done, phase
 * blocks - 1; note: what else that means), then per TMEM chunk scale by inv, pack to bf16, hand to sink. */
static void epilogue_o_pairs(Emit *e, Reg inv, const char *note, const OPairSink *sink)
{
    const SparsePlan100 *s = mla100(e->p);
    Reg bar = reg_b32(e, "sx_bar"), ta = reg_b32(e, "sx_ta"), o = reg_find(e, "sx_o");
    emit_note(e, "the last PV is done (its bar_pv_done phase: blocks - 1)%s", note);
    smem_at(e, bar, s->bar_pv_done);
    op_mbar_wait(e, bar, reg_find(e, "sx_opar"));
    op_tc_fence_after(e);
    for (int c = 0; c < s->o_cols; c += s->o_chunk) {
        emit(e, "add.u32 %s, %%sx_tl, %u;", R(e, ta), s->tm_o + (uint32_t)c);
        op_tmem_ld(e, o, 0, s->o_chunk, ta);
        op_tmem_wait_ld(e);
        for (int k = 0; k < s->o_chunk / 2; k++) {
            Reg lo = reg_at(e, o, 2 * k), hi = reg_at(e, o, 2 * k + 1), pk = sink->reg(e, sink, k);
            emit(e, "mul.f32 %s, %s, %s;", R(e, lo), R(e, lo), R(e, inv));
            emit(e, "mul.f32 %s, %s, %s;", R(e, hi), R(e, hi), R(e, inv));
            op_cvt_pack(e, DT_BF16, pk, hi, lo);
            sink->put(e, sink, c, k, pk);
        }
    }
}

/* epilogue_direct's sink: each pair straight to out. */
static Reg direct_reg(Emit *e, const OPairSink *o, int k) { (void)e, (void)k; return o->pk; }
static void direct_put(Emit *e, const OPairSink *o, int c, int k, Reg pk)
{
    emit(e, "add.u64 %s, %s, %d;", R(e, o->a), R(e, o->oa), (c + 2 * k) * e->p->elem_bytes);
    op_st_global_b32(e, o->inb, o->a, pk);
}

/* epilogue_tma's sink: four pairs make a 16-byte unit, stored at its swizzled place in the staging. */
static Reg tma_reg(Emit *e, const OPairSink *o, int k) { (void)e; return o->w[k % 4]; }
static void tma_put(Emit *e, const OPairSink *o, int c, int k, Reg pk)
{
    const Plan *p = e->p;
    (void)pk;
    if (k % 4 != 3) return;
    int unit_elems = MLA_UNIT / p->elem_bytes, col = c + 2 * k - 6, u = (col % p->chunk_elems) / unit_elems;
    emit(e, "xor.b32 %s, %s, %d;", R(e, o->ua), R(e, o->key), u);
    emit(e, "shl.b32 %s, %s, 4;", R(e, o->ua), R(e, o->ua));
    emit(e, "add.u32 %s, %s, %s;", R(e, o->ua), R(e, o->ua), R(e, o->base));
    op_st_shared_v4_b32(e, o->ua, (uint32_t)(col / p->chunk_elems) * mla100(p)->ostage_chunk_bytes, o->w);
}

/* O / l to bf16, stored by each thread: out[tok, head, half * o_cols ..] (rows past h_q skipped). */
static void epilogue_direct(Emit *e, Reg inv, Reg inb, int pair)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    char l_zero[NAME], l_stored[NAME];
    Reg head = reg_find(e, "sx_head");
    Reg oa = reg_b64(e, "sx_oa"), a = reg_b64(e, "sx_oa_c"), col = reg_b32(e, "sx_col"), pk = reg_b32(e, "sx_pk");
    Reg zero = reg_b32(e, "sx_zero");
    emit_note(e, "out[tok, head, half*%d ..]: this %s's %d columns", s->o_cols, pair ? "thread" : "lane", s->o_cols);
    Reg t64 = reg_b64(e, "sx_t64");
    op_cvt(e, "u64.u32", t64, reg_find(e, "tok"));
    emit(e, "mul.lo.u64 %s, %s, %%out_stride_s;", R(e, oa), R(e, t64));
    op_cvt(e, "u64.u32", t64, head);
    emit(e, "mad.lo.u64 %s, %s, %%out_stride_h, %s;", R(e, oa), R(e, t64), R(e, oa));
    emit(e, "mul.lo.u32 %s, %%sx_half, %d;", R(e, col), s->o_cols);
    op_cvt(e, "u64.u32", t64, col);
    emit(e, "add.u64 %s, %s, %s;", R(e, oa), R(e, oa), R(e, t64));
    emit(e, "mad.lo.u64 %s, %s, %d, %%out;", R(e, oa), R(e, oa), p->elem_bytes);
    emit(e, "setp.eq.u32 %s, %%sx_it, 0;", R(e, reg_pred(e, "sx_noblk")));
    emit(e, "@%%sx_noblk bra %s;", new_label(e, l_zero, sizeof l_zero, "sx_zero_o"));
    const OPairSink sink = {.reg = direct_reg, .put = direct_put, .oa = oa, .a = a, .inb = inb, .pk = pk};
    epilogue_o_pairs(e, inv, "", &sink);
    emit(e, "bra.uni %s;", new_label(e, l_stored, sizeof l_stored, "sx_stored"));
    emit_label(e, l_zero);
    emit(e, "mov.b32 %s, 0;", R(e, zero));
    for (int c = 0; c < s->o_cols; c += 2) {
        emit(e, "add.u64 %s, %s, %d;", R(e, a), R(e, oa), c * p->elem_bytes);
        op_st_global_b32(e, inb, a, zero);
    }
    emit_label(e, l_stored);
}

/* O / l to bf16 in the staging chunks (128B-swizzled: row r's 16-byte unit u at r * 128 + ((u ^ r %% 8) << 4)
 * of chunk c), then thread 0 stores them with TMA (rows past h_q are outside the map: clipped). */
static void epilogue_tma(Emit *e, Reg inv)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    char l_zero[NAME], l_stored[NAME], l_skip[NAME];
    int unit_elems = MLA_UNIT / p->elem_bytes, half_chunks = s->o_cols / p->chunk_elems;
    Reg base = reg_b32(e, "sx_st"), key = reg_b32(e, "sx_key"), ua = reg_b32(e, "sx_ua"), w[4];
    for (int k = 0; k < 4; k++) w[k] = reg_b32(e, "sx_w4_%d", k);
    emit_note(e, "staging (plan o store): chunk half*%d of row sx_row at %u + chunk * %u + row * %d", half_chunks,
              s->off_ostage, s->ostage_chunk_bytes, p->swizzle_bytes);
    smem_at(e, base, s->off_ostage);
    emit(e, "mul.lo.u32 %s, %%sx_half, %u;", R(e, ua), (uint32_t)half_chunks * s->ostage_chunk_bytes);
    emit(e, "add.u32 %s, %s, %s;", R(e, base), R(e, base), R(e, ua));
    emit(e, "mad.lo.u32 %s, %%sx_row, %d, %s;", R(e, base), p->swizzle_bytes, R(e, base));
    emit(e, "and.b32 %s, %%sx_row, 7;", R(e, key));
    emit(e, "setp.eq.u32 %s, %%sx_it, 0;", R(e, reg_pred(e, "sx_noblk")));
    emit(e, "@%%sx_noblk bra %s;", new_label(e, l_zero, sizeof l_zero, "sx_zero_o"));
    OPairSink sink = {.reg = tma_reg, .put = tma_put, .base = base, .ua = ua, .key = key};
    for (int k = 0; k < 4; k++) sink.w[k] = w[k];
    epilogue_o_pairs(e, inv, ": the kv ring is dead, O final", &sink);
    emit(e, "bra.uni %s;", new_label(e, l_stored, sizeof l_stored, "sx_stored"));
    emit_label(e, l_zero);
    for (int k = 0; k < 4; k++) emit(e, "mov.b32 %s, 0;", R(e, w[k]));
    for (int col = 0; col < s->o_cols; col += unit_elems) {
        emit(e, "xor.b32 %s, %s, %d;", R(e, ua), R(e, key), (col % p->chunk_elems) / unit_elems);
        emit(e, "shl.b32 %s, %s, 4;", R(e, ua), R(e, ua));
        emit(e, "add.u32 %s, %s, %s;", R(e, ua), R(e, ua), R(e, base));
        op_st_shared_v4_b32(e, ua, (uint32_t)(col / p->chunk_elems) * s->ostage_chunk_bytes, w);
    }
    emit_label(e, l_stored);
    emit_note(e, "staged O is read by the TMA store (async proxy); plan: named barrier o_staged (%d)", s->bar_ostaged);
    op_fence_proxy_async(e);
    op_bar_sync(e, s->bar_ostaged, named_bar_threads(p, s->bar_ostaged));
    Reg lead = reg_pred(e, "sx_olead"), col = reg_b32(e, "sx_ocol");
    emit(e, "setp.ne.u32 %s, %%thread, 0;", R(e, lead));
    emit(e, "@%s bra %s;", R(e, lead), new_label(e, l_skip, sizeof l_skip, "sx_o_sent"));
    for (int c = 0; c < s->ostage_chunks; c++) {
        smem_at(e, ua, s->off_ostage + (uint32_t)c * s->ostage_chunk_bytes);
        emit(e, "mov.u32 %s, %d;", R(e, col), c * p->chunk_elems);
        op_tma_store_3d(e, reg_find(e, "tmap_out"), col, reg_find(e, "h0"), reg_find(e, "tok"), ua);
    }
    op_bulk_commit(e);
    emit_note(e, "the stores are done before the CTA exits (and before the pair's TMEM is freed)");
    op_bulk_wait(e, 0);
    emit_label(e, l_skip);
}

/* lse and max_logits of the row (one thread per row). */
static void epilogue_stats(Emit *e, Reg inb, Reg lse, int pair)
{
    Reg head = reg_find(e, "sx_head");
    emit_note(e, "lse and max_logits [s_q, h_q]: %s", pair ? "the thread of key half 0" : "the lower lane of each pair");
    Reg pw = reg_pred(e, "sx_wstat"), sa = reg_b64(e, "sx_sa"), sa2 = reg_b64(e, "sx_sa2"), ix = reg_b32(e, "sx_ix");
    Reg ml = reg_f32(e, "sx_maxl"), pl = reg_pred(e, "sx_wlse"), pm = reg_pred(e, "sx_wml");
    emit(e, "and.pred %s, %s, !%%sx_hi;", R(e, pw), R(e, inb));
    emit(e, "mad.lo.u32 %s, %%tok, %%heads_q, %s;", R(e, ix), R(e, head));
    emit(e, "mul.f32 %s, %%sx_mx, %%sm_scale;", R(e, ml));
    emit(e, "setp.ne.and.u64 %s, %%lse, 0, %s;", R(e, pl), R(e, pw));
    emit(e, "setp.ne.and.u64 %s, %%max_logits, 0, %s;", R(e, pm), R(e, pw));
    emit(e, "mul.wide.u32 %s, %s, 4;", R(e, sa), R(e, ix));
    emit(e, "add.u64 %s, %s, %%lse;", R(e, sa2), R(e, sa));
    op_st_global_f32(e, pl, sa2, lse);
    emit(e, "add.u64 %s, %s, %%max_logits;", R(e, sa2), R(e, sa));
    op_st_global_f32(e, pm, sa2, ml);
}

/* Processed block %sx_it of the softmax loop: S buffer it % 2 and its phase it / 2 (%sx_spar), the
 * bar_pv_done phase it - 1 (%sx_opar), %sx_first; the block's softmax for buffer 0 or 1 (block); it++. */
void mla100_sfx_dispatch(Emit *e, void (*block)(Emit *e, int buf))
{
    Reg it = reg_find(e, "sx_it"), spar = reg_find(e, "sx_spar"), opar = reg_find(e, "sx_opar");
    Reg first = reg_find(e, "sx_first"), odd = reg_find(e, "sx_odd");
    char l_odd[NAME], l_next[NAME];
    emit(e, "shr.u32 %s, %s, 1;", R(e, spar), R(e, it));
    emit(e, "and.b32 %s, %s, 1;", R(e, spar), R(e, spar));
    emit(e, "add.u32 %s, %s, 1;", R(e, opar), R(e, it));
    emit(e, "and.b32 %s, %s, 1;", R(e, opar), R(e, opar));
    emit(e, "setp.eq.u32 %s, %s, 0;", R(e, first), R(e, it));
    emit(e, "and.b32 %s, %s, 1;", R(e, reg_b32(e, "sx_buf")), R(e, it));
    emit(e, "setp.ne.u32 %s, %%sx_buf, 0;", R(e, odd));
    emit(e, "@%s bra %s;", R(e, odd), new_label(e, l_odd, sizeof l_odd, "sx_odd"));
    block(e, 0);
    emit(e, "bra.uni %s;", new_label(e, l_next, sizeof l_next, "sx_blk_done"));
    emit_label(e, l_odd);
    block(e, 1);
    emit_label(e, l_next);
    emit(e, "add.u32 %s, %s, 1;", R(e, it), R(e, it));
}

/* ------------------------------------------------------------ kernel: dequant warpgroup (fp8) */

/* Four e4m3 of word w (bytes 0..3: elements in order) times sc, as two bf16 pairs into out[0..1]. */
void mla100_dq_word(Emit *e, Reg w, Reg sc, Reg *out)
{
    Reg half[2] = {reg_b16(e, "dq_b0"), reg_b16(e, "dq_b1")}, hx = reg_b32(e, "dq_hx");
    Reg h[2] = {reg_b16(e, "dq_h0"), reg_b16(e, "dq_h1")}, x[2] = {reg_f32(e, "dq_x0"), reg_f32(e, "dq_x1")};
    emit(e, "mov.b32 {%s, %s}, %s;", R(e, half[0]), R(e, half[1]), R(e, w));
    for (int k = 0; k < 2; k++) {
        op_cvt(e, "rn.f16x2.e4m3x2", hx, half[k]);
        emit(e, "mov.b32 {%s, %s}, %s;", R(e, h[0]), R(e, h[1]), R(e, hx));
        for (int i = 0; i < 2; i++) {
            op_cvt(e, "f32.f16", x[i], h[i]);
            emit(e, "mul.f32 %s, %s, %s;", R(e, x[i]), R(e, x[i]), R(e, sc));
        }
        op_cvt_pack(e, DT_BF16, out[k], x[1], x[0]);
    }
}

/* ------------------------------------------------------------ kernel */

void mla100_roles(Emit *e, const Mla100Roles *r)
{
    const SparsePlan100 *s = mla100(e->p);
    emit_section(e, "role dispatch: softmax warps 0..%d, mma %d, load %d", s->sfx_warps - 1, s->warp_mma,
                 s->warp_load);
    Reg pr = reg_pred(e, "p_role");
    emit(e, "setp.lt.u32 %s, %%warp, %d;", R(e, pr), s->sfx_warps);
    emit(e, "@%s bra $softmax;", R(e, pr));
    emit(e, "setp.eq.u32 %s, %%warp, %d;", R(e, pr), s->warp_mma);
    emit(e, "@%s bra $mma;", R(e, pr));
    if (s->kv_fp8) {
        emit(e, "setp.ge.u32 %s, %%warp, %d;", R(e, pr), s->warp_dq);
        emit(e, "@%s bra $dequant;", R(e, pr));
    }
    r->load(e);
    if (s->kv_fp8) {
        emit_label(e, "$dequant");
        r->dequant(e);
    }
    emit_label(e, "$mma");
    r->mma(e);
    emit_label(e, "$softmax");
    r->softmax(e);
}
