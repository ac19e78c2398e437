/* sm100/mla_pair.c - the head-128 sparse MLA prefill kernel on sm_100a (cta_group 2): a cluster of
 * two CTAs per query token, 64 heads each (plan: sm100/mla_sparse.c, pair_plan; the pieces it
 * shares with the head-64 kernel: sm100/mla_common.c).
 *
 * Every MMA is the pair's (tcgen05.mma.cta_group::2, M 128: 64 rows in each CTA), issued by lane 0
 * of the even CTA's MMA warp. A block of b_topk positions is split between the pair: CTA r gathers
 * the K rows of positions [r b/2, (r+1) b/2) (all columns) and the V columns of its d_v half for
 * every position, with TMA gather4 (.cta_group::2: the bytes of both CTAs complete on the even
 * CTA's barriers). In each CTA the M = 128 data path puts S keys [0, b/2) in TMEM lanes 0-63 and
 * [b/2, b) in lanes 64-127, and O d_v [0, 256) in lanes 0-63 and [256, 512) in lanes 64-127:
 *   softmax (warps 0-3)  warp w, lane l: row 32 (w % 2) + l, key half w / 2; the two halves of a
 *                        row meet in smem (named barrier sfx) for max, sum and P, and both write the
 *                        whole P row (the upper data path reads its own copy of A); lazy rescale of
 *                        its O half; epilogue
 *   mma     (warp 4)     even CTA: S = Q K^T (SS), O += P V (TS), commits multicast to both CTAs
 *   load    (warp 5)     Q of its heads, the indices of the block, their bits, its rows
 *   dequant (warps 6-9)  fp8 kv only: e4m3 rows of the raw ring x scales -> this CTA's bf16 K and V slots
 * b_topk 128 fits one KV slot (smem holds Q, K and V of one block); b_topk 64 halves a slot, so two fit
 * (num_mbars 2) and the load warp gathers block i+1 while block i is computed. With one slot the MMA
 * warp issues a block's PV right after waiting for its P, before the next block's QK; with two (plan
 * qk_ahead) it issues QK of block i+1 into the other S buffer first, so the tensor pipe works while
 * the softmax of block i runs (plan note "mma order"); a slot's K and V then have barriers of their own
 * (K freed by the QK's commit, V by the PV's), so K of block i+2 lands while PV(i) still reads V.
 */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../ops.h"
#include "../ops_copy.h"
#include "../softmax.h"
#include "mla100.h"
#include "sm100.h"

enum { NAME = MLA100_NAME, WARP = MLA_WARP, PAIR_MASK = 3, /* commits multicast to both CTAs of the pair */
       MLA100_DQ_THREADS = MLA_DQ_WARPS * WARP };

/* Q split between smem and TMEM (q_tmem_depth > 0) */
static int q_split(const Plan *p) { return mla100(p)->q_smem_chunks < p->qk_chunks; }

/* ------------------------------------------------------------ prologue */

static void pair_barrier_init(Emit *e)
{
    const SparsePlan100 *s = mla100(e->p);
    char lbl[NAME];
    Reg b = mbar_init_begin(e, lbl, sizeof lbl, "prologue: mbarrier init (thread 0 of each CTA)");
    const Mbar one[] = {mbar_plan(e, "bar_q_full"), mbar_plan(e, "bar_p_full"), mbar_plan(e, "bar_pv_done")};
    for (size_t k = 0; k < sizeof one / sizeof one[0]; k++) mbar_init(e, b, &one[k], 0);
    const Mbar ring[] = {mbar_plan(e, "bar_kv_full"), mbar_plan(e, "bar_mask_full"), mbar_plan(e, "bar_kv_empty")};
    for (int i = 0; i < s->stages; i++)
        for (size_t k = 0; k < sizeof ring / sizeof ring[0]; k++) mbar_init(e, b, &ring[k], i);
    if (s->qk_ahead) {
        const Mbar vring[] = {mbar_plan(e, "bar_v_full"), mbar_plan(e, "bar_v_empty")};
        for (int i = 0; i < s->stages; i++)
            for (size_t k = 0; k < sizeof vring / sizeof vring[0]; k++) mbar_init(e, b, &vring[k], i);
    }
    const Mbar sf = mbar_plan(e, "bar_s_full");
    for (int i = 0; i < MLA100_SBUFS; i++) mbar_init(e, b, &sf, i);
    if (q_split(e->p)) {
        const Mbar qc = mbar_plan(e, "bar_q_copied");
        mbar_init(e, b, &qc, 0);
    }
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

static void read_bits(Emit *e, const char *who, Reg stage, Reg phase, Reg *words, Reg any)
{
    const SparsePlan100 *s = mla100(e->p);
    int n = s->block / WARP;
    Reg bar = reg_b32(e, "%s_bar", who), ma = reg_b32(e, "%s_ma", who), all = reg_b32(e, "%s_mor", who);
    smem_indexed(e, bar, s->bar_mask_full, stage, MBAR_BYTES);
    op_mbar_wait(e, bar, phase);
    smem_indexed(e, ma, s->off_mask, stage, s->mask_stage_bytes);
    for (int i = 0; i < n; i++) {
        words[i] = reg_b32(e, "%s_mw%d", who, i);
        op_ld_shared_b32(e, words[i], ma, (uint32_t)(4 * i));
    }
    emit(e, "or.b32 %s, %s, %s;", R(e, all), R(e, words[0]), R(e, words[1]));
    for (int i = 2; i < n; i++) emit(e, "or.b32 %s, %s, %s;", R(e, all), R(e, all), R(e, words[i]));
    emit(e, "setp.ne.u32 %s, %s, 0;", R(e, any), R(e, all));
}

/* rows[k] = the coordinate of position base + 4 lane + k, where positions [base, base + 128) are
 * held by %ld_c<h0> .. (lanes < 8 read ld_c<h0>, < 16 ld_c<h0+1>, ...); `groups` 32-position groups. */
static void gather_rows(Emit *e, Reg rows[4], const Reg *c, int groups)
{
    Reg src = reg_b32(e, "ld_src"), t = reg_b32(e, "ld_t");
    Reg v[4], lt[4];
    for (int g = 0; g < groups; g++) v[g] = reg_b32(e, "ld_v%d", g);
    for (int g = 1; g < groups; g++) {
        lt[g] = reg_pred(e, "ld_lt%d", g);
        emit(e, "setp.lt.u32 %s, %%lane, %d;", R(e, lt[g]), g * WARP / 4);
    }
    for (int k = 0; k < 4; k++) {
        rows[k] = reg_b32(e, "ld_r%d", k);
        emit(e, "shl.b32 %s, %%lane, 2;", R(e, src));
        emit(e, "add.u32 %s, %s, %d;", R(e, src), R(e, src), k);
        emit(e, "and.b32 %s, %s, %d;", R(e, src), R(e, src), WARP - 1);
        for (int g = 0; g < groups; g++) op_shfl_idx(e, v[g], c[g], src);
        emit(e, "mov.b32 %s, %s;", R(e, t), R(e, v[groups - 1]));
        for (int g = groups - 1; g >= 1; g--) emit(e, "selp.b32 %s, %s, %s, %s;", R(e, t), R(e, v[g - 1]), R(e, t), R(e, lt[g]));
        emit(e, "mov.b32 %s, %s;", R(e, rows[k]), R(e, t));
    }
}

/* K: this CTA's b/2 positions, every chunk; V: every position, this CTA's d_v chunks. Both
 * complete on the even CTA's full barrier (lbar). */
static void pair_rows_k(Emit *e, Reg stage, Reg lbar)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    char l_k[NAME];
    Reg pr = reg_pred(e, "ld_gl"), dst = reg_b32(e, "ld_dst"), col = reg_b32(e, "ld_col"), rows[4];
    Reg odd = reg_not(e, reg_find(e, "is_lead"));
    int groups = s->block / WARP, kg = s->k_rows / WARP;
    Reg c[4], ck[4];
    for (int g = 0; g < groups; g++) c[g] = reg_find(e, "ld_c%d", g);
    emit_note(e, "K rows of this CTA's positions: groups %d r .. of the coordinates", kg);
    for (int g = 0; g < kg; g++) {
        ck[g] = reg_b32(e, "ld_ck%d", g);
        emit(e, "selp.b32 %s, %s, %s, %s;", R(e, ck[g]), R(e, c[kg + g]), R(e, c[g]), R(e, odd));
    }
    gather_rows(e, rows, ck, kg);
    emit(e, "setp.ge.u32 %s, %%lane, %d;", R(e, pr), s->k_rows / 4);
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, l_k, sizeof l_k, "ld_k_done"));
    smem_indexed(e, dst, s->off_kv, stage, s->kv_stage_bytes);
    emit(e, "mad.lo.u32 %s, %%lane, %d, %s;", R(e, dst), 4 * p->swizzle_bytes, R(e, dst));
    for (int ch = 0; ch < p->qk_chunks; ch++) {
        emit(e, "mov.u32 %s, %d;", R(e, col), ch * p->chunk_elems);
        op_tma_gather4(e, 2, dst, reg_find(e, "tmap_kv"), col, rows, lbar);
        if (ch + 1 < p->qk_chunks) emit(e, "add.u32 %s, %s, %u;", R(e, dst), R(e, dst), s->kv_chunk_bytes);
    }
    emit_label(e, l_k);
    op_warp_sync(e);
}

static void pair_rows_v(Emit *e, Reg stage, Reg lbar)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    char l_v[NAME];
    Reg pr = reg_pred(e, "ld_gl"), dst = reg_b32(e, "ld_dst"), col = reg_b32(e, "ld_col"), rows[4];
    int groups = s->block / WARP;
    Reg c[4];
    for (int g = 0; g < groups; g++) c[g] = reg_find(e, "ld_c%d", g);
    emit_note(e, "V: every position's columns of this CTA's d_v half (chunks %d r ..)", s->v_chunks);
    gather_rows(e, rows, c, groups);
    emit(e, "setp.ge.u32 %s, %%lane, %d;", R(e, pr), s->block / 4);
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, l_v, sizeof l_v, "ld_v_done"));
    smem_indexed(e, dst, s->off_v, stage, s->v_stage_bytes);
    emit(e, "mad.lo.u32 %s, %%lane, %d, %s;", R(e, dst), 4 * p->swizzle_bytes, R(e, dst));
    for (int ch = 0; ch < s->v_chunks; ch++) {
        emit(e, "mad.lo.u32 %s, %%cta_rank, %d, %d;", R(e, col), s->v_chunks * p->chunk_elems, ch * p->chunk_elems);
        op_tma_gather4(e, 2, dst, reg_find(e, "tmap_kv"), col, rows, lbar);
        if (ch + 1 < s->v_chunks) emit(e, "add.u32 %s, %s, %u;", R(e, dst), R(e, dst), s->v_chunk_bytes);
    }
    emit_label(e, l_v);
}

/* fp8: every row of block j (all d_qk bytes) into this CTA's raw slot, completing on its own raw_full
 * (.cta_group::2 allows a barrier of either CTA); every lane arrives after its coordinate and bit stores,
 * lane 0 with the slot's bytes when some index is valid. Then the loop's tail. */
static void pair_load_raw(Emit *e, Reg j, Reg stage, Reg phase, Reg full, Reg any, const char *top, const char *done)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    char l_none[NAME], l_g[NAME];
    Reg arm = reg_pred(e, "ld_arm"), pr = reg_pred(e, "ld_gl"), dst = reg_b32(e, "ld_dst"), col = reg_b32(e, "ld_col");
    Reg c[4], rows[4];
    emit_note(e, "fp8: lane 0 expects the raw slot's %u bytes if any index is valid; every lane arrives", s->tx_raw);
    emit(e, "and.pred %s, %s, %%ld_lead;", R(e, arm), R(e, any));
    op_mbar_expect_tx_if(e, arm, full, s->tx_raw);
    op_mbar_arrive_if(e, reg_not(e, arm), full);
    emit(e, "@!%s bra %s;", R(e, any), new_label(e, l_none, sizeof l_none, "ld_none"));
    for (int g = 0; g < s->block / WARP; g++) c[g] = reg_find(e, "ld_c%d", g);
    gather_rows(e, rows, c, s->block / WARP);
    emit(e, "setp.ge.u32 %s, %%lane, %d;", R(e, pr), s->block / 4);
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, l_g, sizeof l_g, "ld_raw_done"));
    smem_indexed(e, dst, s->off_raw, stage, s->raw_stage_bytes);
    emit(e, "mad.lo.u32 %s, %%lane, %d, %s;", R(e, dst), 4 * s->raw_box, R(e, dst));
    for (int ch = 0; ch < s->raw_chunks; ch++) {
        emit(e, "mov.u32 %s, %d;", R(e, col), ch * s->raw_box);
        op_tma_gather4(e, 2, dst, reg_find(e, "tmap_kv"), col, rows, full);
        if (ch + 1 < s->raw_chunks) emit(e, "add.u32 %s, %s, %u;", R(e, dst), R(e, dst), s->raw_chunk_bytes);
    }
    emit_label(e, l_g);
    emit_label(e, l_none);
    op_warp_sync(e);
    mla100_loop_end(e, j, stage, phase, s->raw_stages, top, done);
    emit(e, "bra.uni $exit;");
}

/* The odd CTA's arrival on the even CTA's bar_kv_full or bar_v_full (lane 0): its slot is free, its bytes may
 * follow. The even CTA's MMA warp waits on that barrier before it reads the slot or, for a block with no valid
 * index, commits the slot free in both CTAs: without the odd CTA's arrival that commit could reach the odd CTA's
 * bar_kv_empty before its softmax had released the slot's previous use (the simulator's report, seed 47223). */
static void odd_arrive(Emit *e, Reg vfull)
{
    char l_skip[NAME];
    Reg lbar = reg_find(e, "ld_lbar"), oddlead = reg_pred(e, "ld_oddlead");
    emit(e, "@!%s bra %s;", R(e, oddlead), new_label(e, l_skip, sizeof l_skip, "ld_odd_arrived"));
    op_mapa(e, lbar, vfull, reg_find(e, "lead_rank"));
    op_mbar_arrive_cluster(e, lbar);
    emit_label(e, l_skip);
}

/* qk_ahead: K (and the bits, bar_kv_empty already waited for) on bar_kv_full, then, once the PV of the
 * slot's last block is done (bar_v_empty, parity par), V on bar_v_full, which both CTAs' loads arrive on
 * after that wait (the even one with the expected bytes). A block with no valid index loads nothing:
 * the even CTA's K is full at once and its V once both loads arrived. The MMA frees a slot's V only
 * after bar_v_full, so in either CTA a release never overtakes the wait for the previous one and one
 * parity bit tells the phases apart. */
static void pair_load_split(Emit *e, Reg stage, Reg par, Reg any)
{
    const SparsePlan100 *s = mla100(e->p);
    Reg both = reg_find(e, "ld_both"), full = reg_find(e, "ld_full"), lbar = reg_find(e, "ld_lbar");
    Reg vfull = reg_b32(e, "ld_vfull"), vempty = reg_b32(e, "ld_vempty");
    char l_none[NAME], l_next[NAME], l_armed[NAME], l_varmed[NAME];
    smem_indexed(e, vfull, s->bar_v_full, stage, MBAR_BYTES);
    smem_indexed(e, vempty, s->bar_v_empty, stage, MBAR_BYTES);
    emit(e, "@!%s bra %s;", R(e, any), new_label(e, l_none, sizeof l_none, "ld_none"));
    emit_note(e, "some index valid: the even CTA expects both CTAs' K rows (%u bytes)", s->tx_kv);
    emit(e, "@!%s bra %s;", R(e, both), new_label(e, l_armed, sizeof l_armed, "ld_armed"));
    op_mbar_expect_tx(e, full, s->tx_kv);
    emit_label(e, l_armed);
    odd_arrive(e, full);
    op_warp_sync(e);
    op_mapa(e, lbar, full, reg_find(e, "lead_rank"));
    pair_rows_k(e, stage, lbar);
    emit_note(e, "V of the slot's last block may still be read by its PV (issued after the next QK): wait for it");
    op_mbar_wait(e, vempty, par);
    emit_note(e, "both loads arrive on the even CTA's bar_v_full (plan: 2 arrivals), the even one expecting both CTAs' "
              "V columns (%u bytes)", s->tx_v);
    emit(e, "@!%s bra %s;", R(e, both), new_label(e, l_varmed, sizeof l_varmed, "ld_varmed"));
    op_mbar_expect_tx(e, vfull, s->tx_v);
    emit_label(e, l_varmed);
    odd_arrive(e, vfull);
    op_warp_sync(e);
    op_mapa(e, lbar, vfull, reg_find(e, "lead_rank"));
    pair_rows_v(e, stage, lbar);
    emit(e, "bra.uni %s;", new_label(e, l_next, sizeof l_next, "ld_next"));
    emit_label(e, l_none);
    emit_note(e, "every index invalid: nothing to load; the even CTA's K is full once both loads saw the slot free, its");
    emit_note(e, "V once both loads saw the slot's V free");
    op_mbar_arrive_if(e, both, full);
    odd_arrive(e, full);
    op_mbar_wait(e, vempty, par);
    op_mbar_arrive_if(e, both, vfull);
    odd_arrive(e, vfull);
    emit_label(e, l_next);
}

static void pair_load(Emit *e)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    emit_section(e, "role load (warp %d): Q of this CTA's heads, then per block the indices, bits and rows",
                 s->warp_load);
    Reg lead = reg_pred(e, "ld_lead"), len = reg_b32(e, "ld_len"), la = reg_b64(e, "ld_la"), has = reg_pred(e, "ld_has_len");
    Reg bar = reg_b32(e, "ld_bar"), lbar = reg_b32(e, "ld_lbar"), dst = reg_b32(e, "ld_dst"), col = reg_b32(e, "ld_col");
    Reg is_lead = reg_find(e, "is_lead"), both = reg_pred(e, "ld_both");
    char l_q[NAME];
    emit(e, "setp.eq.u32 %s, %%lane, 0;", R(e, lead));
    emit(e, "and.pred %s, %s, %s;", R(e, both), R(e, lead), R(e, is_lead));
    emit_note(e, "Q: %d boxes {%d, %d, 1}; both CTAs' bytes (%u) land on the even CTA's bar_q_full", p->qk_chunks,
              p->chunk_elems, s->heads, s->tx_q);
    emit(e, "@!%s bra %s;", R(e, lead), new_label(e, l_q, sizeof l_q, "ld_q_done"));
    smem_at(e, bar, s->bar_q_full);
    op_mbar_expect_tx_if(e, is_lead, bar, s->tx_q);
    op_mapa(e, lbar, bar, reg_find(e, "lead_rank"));
    if (q_split(p))
        emit_note(e, "chunks %d.. (Q's TMEM part) land in the k ring; the MMA warp copies them to TMEM", s->q_smem_chunks);
    for (int ch = 0; ch < p->qk_chunks; ch++) {
        int t = ch - s->q_smem_chunks;
        smem_at(e, dst, t < 0 ? s->off_q + (uint32_t)ch * s->q_chunk_bytes : s->off_kv + (uint32_t)t * s->q_chunk_bytes);
        emit(e, "mov.u32 %s, %d;", R(e, col), ch * p->chunk_elems);
        op_tma_load_3d_pair(e, dst, reg_find(e, "tmap_q"), col, reg_find(e, "h0"), reg_find(e, "tok"), lbar);
    }
    emit_label(e, l_q);
    emit(e, "mov.u32 %s, %%topk;", R(e, len));
    emit(e, "setp.ne.u64 %s, %%topk_length, 0;", R(e, has));
    emit(e, "mul.wide.u32 %s, %%tok, 4;", R(e, la));
    emit(e, "add.u64 %s, %s, %%topk_length;", R(e, la), R(e, la));
    /* signed, and compared signed (mla100_indices: setp.lt.s32): fa4.h's meaning of every bit pattern, a length
     * below 0 an empty row, one past topk all topk positions (positions never reach topk) */
    op_ld_global(e, has, "s32", len, la, 0);

    Reg j = reg_b32(e, "ld_j"), stage = reg_b32(e, "ld_stage"), phase = reg_b32(e, "ld_phase");
    Reg full = reg_b32(e, "ld_full"), empty = reg_b32(e, "ld_empty"), par = reg_b32(e, "ld_par");
    Reg all = reg_b32(e, "ld_mor"), any = reg_pred(e, "ld_any");
    char top[NAME], done[NAME], l_none[NAME], l_next[NAME], l_armed[NAME];
    if (q_split(p)) {
        emit_note(e, "the k ring staged Q's TMEM part: gather into it once both CTAs' copies are done");
        smem_at(e, bar, s->bar_q_copied);
        op_mbar_wait_imm(e, bar, 0);
    }
    emit(e, "and.pred %s, %s, %s;", R(e, reg_pred(e, "ld_oddlead")), R(e, lead), R(e, reg_not(e, is_lead)));
    mla100_loop_begin(e, "ld", j, stage, phase, top, done);
    smem_indexed(e, full, s->kv_fp8 ? s->bar_raw_full : s->bar_kv_full, stage, MBAR_BYTES);
    smem_indexed(e, empty, s->kv_fp8 ? s->bar_raw_empty : s->bar_kv_empty, stage, MBAR_BYTES);
    ring_free_parity(e, par, phase);
    op_mbar_wait(e, empty, par);
    mla100_indices(e, j, stage, 1);
    emit(e, "or.b32 %s, %%ld_bits0, %%ld_bits1;", R(e, all));
    for (int h = 2; h < s->block / WARP; h++) emit(e, "or.b32 %s, %s, %%ld_bits%d;", R(e, all), R(e, all), h);
    emit(e, "setp.ne.u32 %s, %s, 0;", R(e, any), R(e, all));
    if (s->kv_fp8) {
        pair_load_raw(e, j, stage, phase, full, any, top, done);
        return;
    }
    if (s->qk_ahead) {
        pair_load_split(e, stage, par, any);
    } else {
        emit(e, "@!%s bra %s;", R(e, any), new_label(e, l_none, sizeof l_none, "ld_none"));
        emit_note(e, "some index valid: the even CTA expects both CTAs' %u bytes", s->tx_kv);
        emit(e, "@!%s bra %s;", R(e, both), new_label(e, l_armed, sizeof l_armed, "ld_armed"));
        op_mbar_expect_tx(e, full, s->tx_kv);
        emit_label(e, l_armed);
        odd_arrive(e, full);
        op_warp_sync(e);
        op_mapa(e, lbar, full, reg_find(e, "lead_rank"));
        pair_rows_k(e, stage, lbar);
        pair_rows_v(e, stage, lbar);
        emit(e, "bra.uni %s;", new_label(e, l_next, sizeof l_next, "ld_next"));
        emit_label(e, l_none);
        emit_note(e, "every index invalid: nothing to load; the even CTA's slot is full once both loads saw it free");
        op_mbar_arrive_if(e, both, full);
        odd_arrive(e, full);
        emit_label(e, l_next);
    }
    op_warp_sync(e);
    mla100_loop_end(e, j, stage, phase, mla100(e->p)->stages, top, done);
    emit_note(e, "the pair: wait until the MMAs released every slot (their commits arrive from the even CTA)");
    for (int k = 0; k < s->stages; k++) {
        smem_indexed(e, empty, s->bar_kv_empty, stage, MBAR_BYTES);
        ring_free_parity(e, par, phase);
        op_mbar_wait(e, empty, par);
        if (s->qk_ahead) {
            smem_indexed(e, empty, s->bar_v_empty, stage, MBAR_BYTES);
            op_mbar_wait(e, empty, par);
        }
        ring_advance(e, stage, phase, s->stages);
    }
    emit(e, "bra.uni $exit;");
}

/* ------------------------------------------------------------ dequant warpgroup (fp8) */

/* One 16-byte unit: 8 e4m3 at raw address ra, times the row's scale for element column `el` (a register),
 * as bf16 to the swizzled smem address dst. */
static void dq_unit(Emit *e, Reg ra, Reg el, Reg coord_ok, Reg sbase, Reg dst)
{
    const Plan *p = e->p;
    Reg w0 = reg_b32(e, "dq_w0"), w1 = reg_b32(e, "dq_w1"), sc = reg_f32(e, "dq_sc"), si = reg_b32(e, "dq_si");
    Reg sa = reg_b64(e, "dq_sa"), unit = reg_pred(e, "dq_unit"), out[4];
    for (int k = 0; k < 4; k++) out[k] = reg_b32(e, "dq_o%d", k);
    op_ld_shared_v2_b32(e, w0, w1, ra, 0);
    emit(e, "mul.lo.u32 %s, %s, %%kv_scale_blocks;", R(e, si), R(e, el));
    emit_div_imm(e, R(e, si), R(e, si), p->qk);
    emit(e, "mov.f32 %s, 0f3F800000;", R(e, sc));
    emit(e, "mad.wide.u32 %s, %s, 4, %s;", R(e, sa), R(e, si), R(e, sbase));
    op_ld_global(e, coord_ok, "f32", sc, sa, 0);
    emit(e, "setp.eq.f32 %s, %s, 0f00000000;", R(e, unit), R(e, sc));
    emit(e, "@%s mov.f32 %s, 0f3F800000;", R(e, unit), R(e, sc));
    mla100_dq_word(e, w0, sc, out);
    mla100_dq_word(e, w1, sc, out + 2);
    op_st_shared_v4_b32(e, dst, 0, out);
}

/* The scales' row base of position `pos` of raw slot rs: kv_scale + coord * kv_scale_blocks * 4; ok: the
 * row is valid and scales were given. */
static void dq_row(Emit *e, Reg rs, Reg pos, Reg ok, Reg sbase)
{
    const SparsePlan100 *s = mla100(e->p);
    Reg ma = reg_b32(e, "dq_ma"), coord = reg_b32(e, "dq_coord"), t64 = reg_b64(e, "dq_t64");
    smem_indexed(e, ma, s->off_coord, rs, s->coord_stage_bytes);
    emit(e, "mad.lo.u32 %s, %s, 4, %s;", R(e, ma), R(e, pos), R(e, ma));
    op_ld_shared_b32(e, coord, ma, 0);
    emit(e, "setp.ge.s32 %s, %s, 0;", R(e, ok), R(e, coord));
    emit(e, "and.pred %s, %s, %%dq_has_scale;", R(e, ok), R(e, ok));
    emit(e, "mul.wide.s32 %s, %s, 4;", R(e, sbase), R(e, coord));
    op_cvt(e, "u64.u32", t64, reg_find(e, "kv_scale_blocks"));
    emit(e, "mul.lo.u64 %s, %s, %s;", R(e, sbase), R(e, sbase), R(e, t64));
    emit(e, "add.u64 %s, %s, %%kv_scale;", R(e, sbase), R(e, sbase));
}

/* K: thread t takes row t %% k_rows of this CTA's positions and units q + 4 i (q = t / k_rows), so a unit's
 * chunk is i / 2 and its swizzle key (q ^ row %% 8) ^ 4 (i %% 2). V: row t %% b_topk, units q + 2 i of this
 * CTA's d_v half: chunk i / 4, key (q ^ row %% 8) ^ 2 (i %% 4). */
static void pair_dq_block(Emit *e, Reg rs, Reg bs)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    int threads = MLA100_DQ_THREADS, kq = threads / s->k_rows, vq = threads / s->block;
    int k_iters = p->qk / 8 / kq, v_iters = s->dv / 2 / 8 / vq;
    Reg t = reg_find(e, "dq_t"), r = reg_b32(e, "dq_r"), q = reg_b32(e, "dq_q"), hk = reg_b32(e, "dq_hk");
    Reg pos = reg_b32(e, "dq_pos"), ok = reg_pred(e, "dq_ok"), sb = reg_b64(e, "dq_sbase");
    Reg rb = reg_b32(e, "dq_rb"), ra = reg_b32(e, "dq_ra"), el = reg_b32(e, "dq_el"), db = reg_b32(e, "dq_db");
    Reg dst = reg_b32(e, "dq_dst"), x = reg_b32(e, "dq_x");
    emit_note(e, "K: %d units per thread (rows of this CTA's %d positions, every column)", k_iters, s->k_rows);
    emit(e, "and.b32 %s, %s, %d;", R(e, r), R(e, t), s->k_rows - 1);
    emit(e, "shr.u32 %s, %s, %d;", R(e, q), R(e, t), __builtin_ctz((unsigned)s->k_rows));
    emit(e, "mad.lo.u32 %s, %%cta_rank, %d, %s;", R(e, pos), s->k_rows, R(e, r));
    dq_row(e, rs, pos, ok, sb);
    smem_indexed(e, rb, s->off_raw, rs, s->raw_stage_bytes);
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, rb), R(e, pos), s->raw_box, R(e, rb));
    emit(e, "mad.lo.u32 %s, %s, 8, %s;", R(e, rb), R(e, q), R(e, rb));
    smem_indexed(e, db, s->off_kv, bs, s->kv_stage_bytes);
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, db), R(e, r), p->swizzle_bytes, R(e, db));
    emit(e, "and.b32 %s, %s, 7;", R(e, hk), R(e, r));
    emit(e, "xor.b32 %s, %s, %s;", R(e, hk), R(e, hk), R(e, q));
    for (int i = 0; i < k_iters; i++) {
        int g = 8 * kq * i; /* first byte of this unit group in the row */
        emit(e, "add.u32 %s, %s, %u;", R(e, ra), R(e, rb),
             (uint32_t)(g / s->raw_box) * s->raw_chunk_bytes + (uint32_t)(g % s->raw_box));
        emit(e, "mad.lo.u32 %s, %s, 8, %d;", R(e, el), R(e, q), g);
        emit(e, "xor.b32 %s, %s, %d;", R(e, x), R(e, hk), (i % (8 / kq)) * kq);
        emit(e, "shl.b32 %s, %s, 4;", R(e, x), R(e, x));
        emit(e, "add.u32 %s, %s, %s;", R(e, dst), R(e, db), R(e, x));
        emit(e, "add.u32 %s, %s, %u;", R(e, dst), R(e, dst), (uint32_t)(i / (8 / kq)) * s->kv_chunk_bytes);
        dq_unit(e, ra, el, ok, sb, dst);
    }
    emit_note(e, "V: %d units per thread (every position, d_v columns %d r ..)", v_iters, s->dv / 2);
    emit(e, "and.b32 %s, %s, %d;", R(e, r), R(e, t), s->block - 1);
    emit(e, "shr.u32 %s, %s, %d;", R(e, q), R(e, t), __builtin_ctz((unsigned)s->block));
    dq_row(e, rs, r, ok, sb);
    smem_indexed(e, rb, s->off_raw, rs, s->raw_stage_bytes);
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, rb), R(e, r), s->raw_box, R(e, rb));
    smem_indexed(e, db, s->off_v, bs, s->v_stage_bytes);
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, db), R(e, r), p->swizzle_bytes, R(e, db));
    emit(e, "and.b32 %s, %s, 7;", R(e, hk), R(e, r));
    emit(e, "xor.b32 %s, %s, %s;", R(e, hk), R(e, hk), R(e, q));
    Reg bx = reg_b32(e, "dq_box");
    for (int i = 0; i < v_iters; i++) {
        emit_note(e, "element column d_v/2 * rank + %d + 8 q: its raw box and offset", 8 * vq * i);
        emit(e, "mad.lo.u32 %s, %s, 8, %d;", R(e, el), R(e, q), 8 * vq * i);
        emit(e, "mad.lo.u32 %s, %%cta_rank, %d, %s;", R(e, el), s->dv / 2, R(e, el));
        emit_div_imm(e, R(e, bx), R(e, el), s->raw_box);
        emit_rem_imm(e, R(e, ra), R(e, el), s->raw_box);
        emit(e, "mad.lo.u32 %s, %s, %u, %s;", R(e, ra), R(e, bx), s->raw_chunk_bytes, R(e, ra));
        emit(e, "add.u32 %s, %s, %s;", R(e, ra), R(e, ra), R(e, rb));
        emit(e, "xor.b32 %s, %s, %d;", R(e, x), R(e, hk), (i % (8 / vq)) * vq);
        emit(e, "shl.b32 %s, %s, 4;", R(e, x), R(e, x));
        emit(e, "add.u32 %s, %s, %s;", R(e, dst), R(e, db), R(e, x));
        emit(e, "add.u32 %s, %s, %u;", R(e, dst), R(e, dst), (uint32_t)(i / (8 / vq)) * s->v_chunk_bytes);
        dq_unit(e, ra, el, ok, sb, dst);
    }
}

/* Per block: the raw slot's bits to the bf16 slot (thread 0, then bar_mask_full), its rows dequantised,
 * every thread arrives on the even CTA's bar_kv_full; the raw slot goes back to the load warp. At the
 * end it waits for the MMAs' last releases of the bf16 slots (commits from the even CTA). */
static void pair_dequant(Emit *e)
{
    const SparsePlan100 *s = mla100(e->p);
    emit_section(e, "role dequant (warps %d..%d): e4m3 rows x scales -> this CTA's bf16 K and V slots",
                 s->warp_dq, s->warp_dq + MLA_DQ_WARPS - 1);
    Reg t = reg_b32(e, "dq_t"), has = reg_pred(e, "dq_has_scale"), first = reg_pred(e, "dq_first");
    emit(e, "sub.u32 %s, %%thread, %d;", R(e, t), s->warp_dq * WARP);
    emit(e, "setp.ne.u64 %s, %%kv_scale, 0;", R(e, has));
    emit(e, "setp.eq.u32 %s, %s, 0;", R(e, first), R(e, t));
    Reg j = reg_b32(e, "dq_j"), rs = reg_b32(e, "dq_rs"), rph = reg_b32(e, "dq_rph");
    Reg bs = reg_b32(e, "dq_bs"), bph = reg_b32(e, "dq_bph"), bar = reg_b32(e, "dq_bar"), par = reg_b32(e, "dq_par");
    Reg lo = reg_b32(e, "dq_mlo"), hi = reg_b32(e, "dq_mhi"), any = reg_pred(e, "dq_any"), ma = reg_b32(e, "dq_ma");
    Reg lbar = reg_b32(e, "dq_lbar");
    char top[NAME], done[NAME], l_skip[NAME];
    ring_reset(e, bs, bph);
    mla100_loop_begin(e, "dq", j, rs, rph, top, done);
    smem_indexed(e, bar, s->bar_raw_full, rs, MBAR_BYTES);
    op_mbar_wait(e, bar, rph);
    smem_indexed(e, bar, s->bar_kv_empty, bs, MBAR_BYTES);
    ring_free_parity(e, par, bph);
    op_mbar_wait(e, bar, par);
    smem_indexed(e, ma, s->off_raw_mask, rs, s->mask_stage_bytes);
    op_ld_shared_b32(e, lo, ma, 0);
    op_ld_shared_b32(e, hi, ma, 4);
    smem_indexed(e, ma, s->off_mask, bs, s->mask_stage_bytes);
    op_st_shared_b32_if(e, first, ma, 0, lo);
    op_st_shared_b32_if(e, first, ma, 4, hi);
    emit_note(e, "the bits are this CTA's softmax's (and, even CTA, the MMA's) once bar_mask_full completes");
    smem_indexed(e, bar, s->bar_mask_full, bs, MBAR_BYTES);
    op_mbar_arrive_if(e, first, bar);
    emit(e, "or.b32 %s, %s, %s;", R(e, lo), R(e, lo), R(e, hi));
    emit(e, "setp.ne.u32 %s, %s, 0;", R(e, any), R(e, lo));
    emit(e, "@!%s bra %s;", R(e, any), new_label(e, l_skip, sizeof l_skip, "dq_skip"));
    pair_dq_block(e, rs, bs);
    emit_note(e, "the bf16 slots are read by the pair's MMAs (async proxy)");
    op_fence_proxy_async(e);
    emit_label(e, l_skip);
    smem_indexed(e, bar, s->bar_kv_full, bs, MBAR_BYTES);
    op_mapa(e, lbar, bar, reg_find(e, "lead_rank"));
    op_mbar_arrive_cluster(e, lbar);
    smem_indexed(e, bar, s->bar_raw_empty, rs, MBAR_BYTES);
    op_mbar_arrive(e, bar);
    ring_advance(e, bs, bph, s->stages);
    mla100_loop_end(e, j, rs, rph, s->raw_stages, top, done);
    emit_note(e, "the pair: wait until the MMAs released every bf16 slot (their commits arrive from the even CTA)");
    for (int k = 0; k < s->stages; k++) {
        smem_indexed(e, bar, s->bar_kv_empty, bs, MBAR_BYTES);
        ring_free_parity(e, par, bph);
        op_mbar_wait(e, bar, par);
        ring_advance(e, bs, bph, s->stages);
    }
    emit(e, "bra.uni $exit;");
}

/* ------------------------------------------------------------ MMA warp (even CTA) */

static void pair_commit(Emit *e, uint32_t off, int i)
{
    Reg bar = reg_b32(e, "mm_cbar");
    mbar_at(e, bar, off, i);
    op_umma_commit(e, 2, bar, reg_find(e, "mm_mask"));
}

static void pair_qk(Emit *e, int buf)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    Reg klo = reg_b32(e, "mm_klo"), alo = reg_b32(e, "mm_alo"), blo = reg_b32(e, "mm_blo");
    Reg ad = reg_b64(e, "mm_ad"), bd = reg_b64(e, "mm_bd"), d = reg_b32(e, "mm_d");
    int step_bytes = s->mma_k * p->elem_bytes, per_chunk = p->swizzle_bytes / step_bytes;
    emit_note(e, "S%d = Q K^T: %d x M%d N%d SS cta_group::2 (plan: qk mma)", buf, s->qk_steps, 2 * s->heads, s->block);
    op_umma_desc_lo(e, klo, reg_find(e, "mm_kslot"), s->desc_k);
    emit(e, "add.u32 %s, %%tmem, %u;", R(e, d), s->tm_s[buf]);
    if (q_split(p))
        emit_note(e, "steps %d.. read Q from TMEM (plan tmem q)", s->q_smem_steps);
    for (int kk = 0; kk < s->qk_steps; kk++) {
        Reg acc = kk ? REG_NONE : reg_find(e, "mm_false");
        uint32_t kstep = op_desc_kstep(kk, per_chunk, (uint32_t)step_bytes, s->kv_chunk_bytes);
        if (kk >= s->q_smem_steps) {
            Reg a = reg_b32(e, "mm_a");
            emit(e, "add.u32 %s, %s, %u;", R(e, blo), R(e, klo), kstep);
            emit(e, "mov.b64 %s, {%s, %%mm_dhi};", R(e, bd), R(e, blo));
            emit(e, "add.u32 %s, %%tmem, %u;", R(e, a), s->tm_q + (uint32_t)((kk - s->q_smem_steps) * step_bytes / 4));
            op_umma_ts(e, 2, 0, d, a, bd, reg_find(e, "mm_idesc_qk"), acc);
            continue;
        }
        emit(e, "add.u32 %s, %%mm_qlo, %u;", R(e, alo), op_desc_kstep(kk, per_chunk, (uint32_t)step_bytes, s->q_chunk_bytes));
        emit(e, "add.u32 %s, %s, %u;", R(e, blo), R(e, klo), kstep);
        emit(e, "mov.b64 %s, {%s, %%mm_dhi};", R(e, ad), R(e, alo));
        emit(e, "mov.b64 %s, {%s, %%mm_dhi};", R(e, bd), R(e, blo));
        op_umma_ss(e, 2, 0, d, ad, bd, reg_find(e, "mm_idesc_qk"), acc);
    }
}

/* O (+)= P[buf] V from the V slot at vslot (%mm_vslot, or the pending block's %mm_pvslot). */
static void pair_pv(Emit *e, int buf, Reg vslot)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    Reg vlo = reg_b32(e, "mm_vlo"), blo = reg_b32(e, "mm_blo"), bd = reg_b64(e, "mm_bd");
    Reg d = reg_b32(e, "mm_d"), a = reg_b32(e, "mm_a");
    int halves = s->v_chunks / 2; /* MMAs of N 256: each CTA gives N/2 = 2 chunks */
    emit_note(e, "O += P%d V: %d x %d x M%d N%d TS cta_group::2, P from TMEM, V MN-major (plan: pv mma)", buf, halves,
              s->pv_steps, 2 * s->heads, s->o_cols);
    op_umma_desc_lo(e, vlo, vslot, s->desc_v);
    for (int h = 0; h < halves; h++) {
        emit(e, "add.u32 %s, %%tmem, %u;", R(e, d), s->tm_o + (uint32_t)(h * s->o_cols / halves));
        for (int kk = 0; kk < s->pv_steps; kk++) {
            uint32_t off = (uint32_t)h * 2u * s->v_chunk_bytes + (uint32_t)(kk * s->mma_k * p->swizzle_bytes);
            emit(e, "add.u32 %s, %s, %u;", R(e, blo), R(e, vlo), op_desc_delta(off));
            emit(e, "mov.b64 %s, {%s, %%mm_vhi};", R(e, bd), R(e, blo));
            emit(e, "add.u32 %s, %%tmem, %u;", R(e, a), s->tm_s[buf] + (uint32_t)(kk * s->p_step_cols));
            op_umma_ts(e, 2, 0, d, a, bd, reg_find(e, "mm_idesc_pv"), kk ? REG_NONE : reg_find(e, "mm_pv_acc"));
        }
    }
}

/* Q's TMEM part: per K step two 16-byte copies (columns +0 and +4) from the staged chunks, in both
 * CTAs (each from its own smem); the commit frees the k ring in both. The QK MMAs that read it are
 * issued after the copies by the same thread. */
static void pair_q_copy(Emit *e)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    Reg base = reg_b32(e, "mm_cp_lo"), lo = reg_b32(e, "mm_cp_l"), sd = reg_b64(e, "mm_cp_d"), ta = reg_b32(e, "mm_cp_t");
    int step_bytes = s->mma_k * p->elem_bytes, per_chunk = p->swizzle_bytes / step_bytes;
    int steps = s->qk_steps - s->q_smem_steps;
    emit_note(e, "Q columns %d..: %d x tcgen05.cp.64x128b.warpx2::02_13 from the k ring to TMEM (plan note q tmem)",
              s->q_smem_steps * s->mma_k, 2 * steps);
    smem_at(e, base, s->off_kv);
    op_umma_desc_lo(e, base, base, s->desc_q);
    for (int kk = 0; kk < steps; kk++)
        for (int h = 0; h < 2; h++) {
            uint32_t off = op_desc_kstep(kk, per_chunk, (uint32_t)step_bytes, s->q_chunk_bytes) +
                           (h ? op_desc_delta((uint32_t)step_bytes / 2) : 0);
            emit(e, "add.u32 %s, %s, %u;", R(e, lo), R(e, base), off);
            emit(e, "mov.b64 %s, {%s, %%mm_dhi};", R(e, sd), R(e, lo));
            emit(e, "add.u32 %s, %%tmem, %u;", R(e, ta), s->tm_q + (uint32_t)(kk * step_bytes / 4 + h * step_bytes / 8));
            op_tmem_cp_64x128b_dup(e, 2, ta, sd);
        }
    Reg bar = reg_b32(e, "mm_cbar");
    smem_at(e, bar, s->bar_q_copied);
    op_umma_commit(e, 2, bar, reg_find(e, "mm_mask"));
}

/* The PV of the pending block %mm_pit (V slot %mm_pvslot; its bar_v_full %mm_pvfull, phase %mm_pvph;
 * its bar_v_empty %mm_pvempty): wait for its P and its V, issue it from its S buffer, then free that V
 * in both CTAs and signal bar_pv_done. */
static void pair_pending_pv(Emit *e)
{
    const SparsePlan100 *s = mla100(e->p);
    char l_odd[NAME], l_done[NAME];
    Reg bar = reg_b32(e, "mm_bar"), par = reg_b32(e, "mm_ppar"), pit = reg_find(e, "mm_pit");
    Reg odd = reg_pred(e, "mm_podd"), vslot = reg_find(e, "mm_pvslot");
    emit_note(e, "P of the pending block written by both CTAs, O rescaled (plan bar_p_full: %d arrivals)",
              s->pair_arrivals);
    smem_at(e, bar, s->bar_p_full);
    emit(e, "and.b32 %s, %s, 1;", R(e, par), R(e, pit));
    op_mbar_wait(e, bar, par);
    emit_note(e, "and its V columns landed in both CTAs (plan bar_v_full)");
    op_mbar_wait(e, reg_find(e, "mm_pvfull"), reg_find(e, "mm_pvph"));
    op_tc_fence_after(e);
    emit(e, "setp.ne.u32 %s, %s, 0;", R(e, reg_find(e, "mm_pv_acc")), R(e, pit));
    emit(e, "setp.ne.u32 %s, %s, 0;", R(e, odd), R(e, par));
    emit(e, "@%s bra %s;", R(e, odd), new_label(e, l_odd, sizeof l_odd, "mm_pv_odd"));
    pair_pv(e, 0, vslot);
    emit(e, "bra.uni %s;", new_label(e, l_done, sizeof l_done, "mm_pv_issued"));
    emit_label(e, l_odd);
    pair_pv(e, 1, vslot);
    emit_label(e, l_done);
    emit_note(e, "that V is free in both CTAs once these MMAs read it; O is final for that block");
    op_umma_commit(e, 2, reg_find(e, "mm_pvempty"), reg_find(e, "mm_mask"));
    pair_commit(e, s->bar_pv_done, 0);
}

/* Two or more KV slots (plan qk_ahead): per block S = Q K^T into S[it %% 2], whose commit also frees the
 * slot's K (bar_kv_empty), then the PV of the block before (pending), so the tensor pipe computes S(i)
 * while the softmax works on S(i-1). A block with no valid index first flushes the pending PV, then
 * frees its K and V at once; the last pending PV follows the loop. */
static void pair_mma_ahead(Emit *e)
{
    const SparsePlan100 *s = mla100(e->p);
    Reg j = reg_b32(e, "mm_j"), stage = reg_b32(e, "mm_stage"), phase = reg_b32(e, "mm_phase");
    Reg any = reg_pred(e, "mm_any"), it = reg_b32(e, "mm_it"), odd = reg_pred(e, "mm_odd");
    Reg pit = reg_b32(e, "mm_pit"), pend = reg_pred(e, "mm_pend"), bar = reg_find(e, "mm_bar");
    Reg vslot = reg_b32(e, "mm_vslot"), pvslot = reg_b32(e, "mm_pvslot"), empty = reg_b32(e, "mm_empty");
    Reg vfull = reg_b32(e, "mm_vfull"), pvfull = reg_b32(e, "mm_pvfull"), pvph = reg_b32(e, "mm_pvph");
    Reg vempty = reg_b32(e, "mm_vempty"), pvempty = reg_b32(e, "mm_pvempty"), mask = reg_find(e, "mm_mask");
    Reg words[8];
    char top[NAME], done[NAME], l_skip[NAME], l_odd[NAME], l_qk[NAME], l_nopv[NAME], l_next[NAME], l_end[NAME];
    char l_flushed[NAME];
    emit(e, "mov.u32 %s, 0;", R(e, it));
    emit(e, "setp.ne.u32 %s, 0, 0;", R(e, pend));
    mla100_loop_begin(e, "mm", j, stage, phase, top, done);
    read_bits(e, "mm", stage, phase, words, any);
    emit_note(e, "K rows of both CTAs (plan bar_kv_full); V is waited for by its PV");
    smem_indexed(e, bar, s->bar_kv_full, stage, MBAR_BYTES);
    op_mbar_wait(e, bar, phase);
    smem_indexed(e, empty, s->bar_kv_empty, stage, MBAR_BYTES);
    smem_indexed(e, vfull, s->bar_v_full, stage, MBAR_BYTES);
    smem_indexed(e, vempty, s->bar_v_empty, stage, MBAR_BYTES);
    emit(e, "@!%s bra %s;", R(e, any), new_label(e, l_skip, sizeof l_skip, "mm_skip"));
    op_tc_fence_after(e);
    smem_indexed(e, reg_b32(e, "mm_kslot"), s->off_kv, stage, s->kv_stage_bytes);
    smem_indexed(e, vslot, s->off_v, stage, s->v_stage_bytes);
    emit(e, "and.b32 %s, %s, 1;", R(e, reg_b32(e, "mm_buf")), R(e, it));
    emit(e, "setp.ne.u32 %s, %%mm_buf, 0;", R(e, odd));
    emit(e, "@%s bra %s;", R(e, odd), new_label(e, l_odd, sizeof l_odd, "mm_qk_odd"));
    pair_qk(e, 0);
    pair_commit(e, s->bar_s_full, 0);
    emit(e, "bra.uni %s;", new_label(e, l_qk, sizeof l_qk, "mm_qk_issued"));
    emit_label(e, l_odd);
    pair_qk(e, 1);
    pair_commit(e, s->bar_s_full, 1);
    emit_label(e, l_qk);
    emit_note(e, "the slot's K is free in both CTAs once QK read it: K of the block after next may land");
    op_umma_commit(e, 2, empty, mask);
    emit_note(e, "plan mma order: the block before this one gets its PV now, behind this block's QK");
    emit(e, "@!%s bra %s;", R(e, pend), new_label(e, l_nopv, sizeof l_nopv, "mm_no_pv"));
    pair_pending_pv(e);
    emit_label(e, l_nopv);
    emit(e, "mov.u32 %s, %s;", R(e, pit), R(e, it));
    emit(e, "mov.u32 %s, %s;", R(e, pvslot), R(e, vslot));
    emit(e, "mov.u32 %s, %s;", R(e, pvfull), R(e, vfull));
    emit(e, "mov.u32 %s, %s;", R(e, pvph), R(e, phase));
    emit(e, "mov.u32 %s, %s;", R(e, pvempty), R(e, vempty));
    emit(e, "setp.eq.u32 %s, 0, 0;", R(e, pend));
    emit(e, "add.u32 %s, %s, 1;", R(e, it), R(e, it));
    emit(e, "bra.uni %s;", new_label(e, l_next, sizeof l_next, "mm_next"));
    emit_label(e, l_skip);
    emit_note(e, "no valid index: the pending PV goes now (the load waits for its V slot before it writes the bits");
    emit_note(e, "of the block after next, and that block may be skipped too)");
    emit(e, "@!%s bra %s;", R(e, pend), new_label(e, l_flushed, sizeof l_flushed, "mm_flushed"));
    pair_pending_pv(e);
    emit(e, "setp.ne.u32 %s, 0, 0;", R(e, pend));
    emit_label(e, l_flushed);
    emit_note(e, "no MMA reads the skipped slot: its K and V are free in both CTAs, V once both loads arrived on");
    emit_note(e, "bar_v_full (each waited for the slot's previous release first)");
    op_umma_commit(e, 2, empty, mask);
    op_mbar_wait(e, vfull, phase);
    op_umma_commit(e, 2, vempty, mask);
    emit_label(e, l_next);
    mla100_loop_end(e, j, stage, phase, s->stages, top, done);
    emit(e, "@!%s bra %s;", R(e, pend), new_label(e, l_end, sizeof l_end, "mm_end"));
    pair_pending_pv(e);
    emit_label(e, l_end);
    emit(e, "bra.uni $exit;");
}

static void pair_mma(Emit *e)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    emit_section(e, "role mma (warp %d): lane 0 of the even CTA issues every tcgen05.mma of the pair", s->warp_mma);
    Reg pr = reg_pred(e, "mm_p");
    emit(e, "setp.ne.u32 %s, %%lane, 0;", R(e, pr));
    emit(e, "@%s bra $exit;", R(e, pr));
    emit(e, "@!%%is_lead bra $exit;");
    emit(e, "mov.u32 %s, 0x%08X;", reg(e, "b32", "mm_idesc_qk"), s->idesc_qk);
    emit(e, "mov.u32 %s, 0x%08X;", reg(e, "b32", "mm_idesc_pv"), s->idesc_pv);
    emit(e, "mov.u32 %s, 0x%08X;", reg(e, "b32", "mm_dhi"), (uint32_t)(s->desc_k >> 32));
    emit(e, "mov.u32 %s, 0x%08X;", reg(e, "b32", "mm_vhi"), (uint32_t)(s->desc_v >> 32));
    emit(e, "mov.pred %s, 0;", reg(e, "pred", "mm_false"));
    emit_note(e, "commits arrive on the barrier at the same offset in both CTAs (mask 0b11)");
    emit(e, "mov.b16 %s, %d;", reg(e, "b16", "mm_mask"), PAIR_MASK);
    Reg acc = reg_pred(e, "mm_pv_acc"), qlo = reg_b32(e, "mm_qlo"), bar = reg_b32(e, "mm_bar");
    smem_at(e, qlo, s->off_q);
    op_umma_desc_lo(e, qlo, qlo, s->desc_q);
    smem_at(e, bar, s->bar_q_full);
    op_mbar_wait_imm(e, bar, 0);
    if (q_split(p)) pair_q_copy(e);
    if (s->qk_ahead) {
        pair_mma_ahead(e);
        return;
    }

    Reg j = reg_b32(e, "mm_j"), stage = reg_b32(e, "mm_stage"), phase = reg_b32(e, "mm_phase");
    Reg any = reg_pred(e, "mm_any"), it = reg_b32(e, "mm_it"), odd = reg_pred(e, "mm_odd");
    Reg words[8], par = reg_b32(e, "mm_ppar");
    char top[NAME], done[NAME], l_skip[NAME], l_odd[NAME], l_next[NAME];
    emit(e, "mov.u32 %s, 0;", R(e, it));
    mla100_loop_begin(e, "mm", j, stage, phase, top, done);
    read_bits(e, "mm", stage, phase, words, any);
    smem_indexed(e, bar, s->bar_kv_full, stage, MBAR_BYTES);
    op_mbar_wait(e, bar, phase);
    emit(e, "@!%s bra %s;", R(e, any), new_label(e, l_skip, sizeof l_skip, "mm_skip"));
    op_tc_fence_after(e);
    smem_indexed(e, reg_b32(e, "mm_kslot"), s->off_kv, stage, s->kv_stage_bytes);
    smem_indexed(e, reg_b32(e, "mm_vslot"), s->off_v, stage, s->v_stage_bytes);
    emit(e, "and.b32 %s, %s, 1;", R(e, par), R(e, it));
    emit(e, "setp.ne.u32 %s, %s, 0;", R(e, acc), R(e, it));
    emit(e, "setp.ne.u32 %s, %s, 0;", R(e, odd), R(e, par));
    emit(e, "@%s bra %s;", R(e, odd), new_label(e, l_odd, sizeof l_odd, "mm_odd"));
    for (int b = 0; b < MLA100_SBUFS; b++) {
        if (b) emit_label(e, l_odd);
        pair_qk(e, b);
        pair_commit(e, s->bar_s_full, b);
        emit_note(e, "P of both CTAs written, O rescaled (plan bar_p_full: %d arrivals)", s->pair_arrivals);
        smem_at(e, bar, s->bar_p_full);
        op_mbar_wait(e, bar, par);
        op_tc_fence_after(e);
        pair_pv(e, b, reg_find(e, "mm_vslot"));
        pair_commit(e, s->bar_pv_done, 0);
        if (!b) emit(e, "bra.uni %s;", new_label(e, l_next, sizeof l_next, "mm_issued"));
    }
    emit_label(e, l_next);
    emit(e, "add.u32 %s, %s, 1;", R(e, it), R(e, it));
    emit_label(e, l_skip);
    emit_note(e, "the slot is free in both CTAs once these MMAs read it (none, for a block with no valid index)");
    smem_indexed(e, bar, s->bar_kv_empty, stage, MBAR_BYTES);
    op_umma_commit(e, 2, bar, reg_find(e, "mm_mask"));
    mla100_loop_end(e, j, stage, phase, mla100(e->p)->stages, top, done);
    emit(e, "bra.uni $exit;");
}

/* ------------------------------------------------------------ softmax warps */

static void sfx_setup(Emit *e)
{
    const SparsePlan100 *s = mla100(e->p);
    emit(e, "shr.u32 %s, %%warp, 1;", reg(e, "b32", "sx_half"));
    emit(e, "setp.ne.u32 %s, %%sx_half, 0;", reg(e, "pred", "sx_hi"));
    emit_note(e, "this thread's row: head 32*(warp%%2) + lane of the CTA; key half warp/2 (the M = 128 pair data path)");
    emit(e, "and.b32 %s, %%warp, 1;", reg(e, "b32", "sx_row"));
    emit(e, "mad.lo.u32 %%sx_row, %%sx_row, 32, %%lane;");
    emit(e, "add.u32 %s, %%tmem, %%tm_lane;", reg(e, "b32", "sx_tl"));
    emit_note(e, "exchange slots: mine at thread, the other half's at thread ^ 64 (plan smem xchg)");
    Reg mine = reg_b32(e, "sx_xme"), other = reg_b32(e, "sx_xot"), t = reg_b32(e, "sx_t");
    smem_at(e, mine, s->off_xchg);
    emit(e, "mov.u32 %s, %s;", R(e, other), R(e, mine));
    emit(e, "shl.b32 %s, %%thread, 2;", R(e, t));
    emit(e, "add.u32 %s, %s, %s;", R(e, mine), R(e, mine), R(e, t));
    emit(e, "xor.b32 %s, %%thread, %d;", R(e, t), s->sfx_warps * WARP / 2);
    emit(e, "shl.b32 %s, %s, 2;", R(e, t), R(e, t));
    emit(e, "add.u32 %s, %s, %s;", R(e, other), R(e, other), R(e, t));
    reg_arr(e, RT_F32, s->half_cols, "sx_s");
    reg_arr(e, RT_B32, s->half_cols / 2, "sx_p");
    reg_arr(e, RT_B32, s->half_cols / 2, "sx_q");
    reg_arr(e, RT_B32, s->half_cols, "sx_w");
    reg_arr(e, RT_F32, s->o_chunk, "sx_o");
    emit(e, "mov.f32 %s, %s;", reg(e, "f32", "sx_m"), PTX_NEG_INF);
    emit(e, "mov.f32 %s, %s;", reg(e, "f32", "sx_mx"), PTX_NEG_INF);
    emit(e, "mov.f32 %s, 0f00000000;", reg(e, "f32", "sx_l"));
}

/* Word k of the exchange (0: row max, 1: row sum, 2..: P words) of this thread / of the other half. */
static uint32_t xoff(const SparsePlan100 *s, int k) { return (uint32_t)k * (uint32_t)(s->sfx_warps * WARP) * 4u; }

static void sfx_block(Emit *e, int buf)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    int n = s->half_cols, w = n / 2, threads = s->sfx_warps * WARP;
    Reg x = reg_find(e, "sx_s"), pk = reg_find(e, "sx_p"), qk = reg_find(e, "sx_q"), wd = reg_find(e, "sx_w");
    Reg bar = reg_b32(e, "sx_bar"), ta = reg_b32(e, "sx_ta"), t = reg_f32(e, "sx_other");
    Reg mine = reg_find(e, "sx_xme"), other = reg_find(e, "sx_xot");
    Reg xs[256];
    for (int c = 0; c < n; c++) xs[c] = reg_at(e, x, c);
    mbar_at(e, bar, s->bar_s_full, buf);
    op_mbar_wait(e, bar, reg_find(e, "sx_spar"));
    op_tc_fence_after(e);
    emit(e, "add.u32 %s, %%sx_tl, %u;", R(e, ta), s->tm_s[buf]);
    op_tmem_ld(e, x, 0, n, ta);
    op_tmem_wait_ld(e);
    Reg bit = reg_b32(e, "sx_bit"), inval = reg_pred(e, "sx_invalid");
    for (int c = 0; c < n; c++) {
        emit(e, "and.b32 %s, %%sx_word%d, 0x%08X;", R(e, bit), c / WARP, 1u << (c % WARP));
        emit(e, "setp.eq.u32 %s, %s, 0;", R(e, inval), R(e, bit));
        emit(e, "@%s mov.f32 %s, %s;", R(e, inval), R(e, xs[c]), PTX_NEG_INF);
    }
    Reg bmax = reg_f32(e, "sx_bmax"), rs = reg_f32(e, "sx_rsum");
    sfx_max_tree(e, bmax, xs, n);
    emit_note(e, "the row's other key half is in thread ^ %d: max through smem (plan bar sfx)", threads / 2);
    op_st_shared_b32(e, mine, xoff(s, 0), bmax);
    op_bar_sync(e, s->bar_sfx, threads);
    op_ld_shared_b32(e, t, other, xoff(s, 0));
    emit(e, "max.f32 %s, %s, %s;", R(e, bmax), R(e, bmax), R(e, t));
    emit(e, "max.f32 %%sx_mx, %%sx_mx, %s;", R(e, bmax));
    Reg need = reg_pred(e, "sx_need"), corr = reg_f32(e, "sx_corr"), neg_ms = reg_f32(e, "sx_neg_ms");
    Reg scale_log2 = reg_find(e, "scale_log2");
    sfx_update_max_lazy(e, reg_find(e, "sx_m"), bmax, scale_log2, s->rescale, neg_ms, corr, need);
    sfx_exp2_scaled(e, xs, n, scale_log2, neg_ms, s->poly_every);
    sfx_sum_tree(e, rs, xs, n);
    for (int k = 0; k < w; k++) op_cvt_pack(e, DT_BF16, reg_at(e, pk, k), xs[2 * k + 1], xs[2 * k]);
    emit_note(e, "sum and P of this half to smem, the other half's back");
    op_st_shared_b32(e, mine, xoff(s, 1), rs);
    for (int k = 0; k < w; k++) op_st_shared_b32(e, mine, xoff(s, 2 + k), reg_at(e, pk, k));
    op_bar_sync(e, s->bar_sfx, threads);
    op_ld_shared_b32(e, t, other, xoff(s, 1));
    for (int k = 0; k < w; k++) op_ld_shared_b32(e, reg_at(e, qk, k), other, xoff(s, 2 + k));
    emit(e, "add.f32 %s, %s, %s;", R(e, rs), R(e, rs), R(e, t));
    emit(e, "fma.rn.f32 %%sx_l, %%sx_l, %s, %s;", R(e, corr), R(e, rs));
    for (int k = 0; k < w; k++) {
        emit(e, "selp.b32 %s, %s, %s, %%sx_hi;", R(e, reg_at(e, wd, k)), R(e, reg_at(e, qk, k)), R(e, reg_at(e, pk, k)));
        emit(e, "selp.b32 %s, %s, %s, %%sx_hi;", R(e, reg_at(e, wd, w + k)), R(e, reg_at(e, pk, k)),
             R(e, reg_at(e, qk, k)));
    }
    char l_first[NAME], l_keep[NAME];
    emit(e, "@%%sx_first bra %s;", new_label(e, l_first, sizeof l_first, "sx_first"));
    smem_at(e, bar, s->bar_pv_done);
    op_mbar_wait(e, bar, reg_find(e, "sx_opar"));
    op_tc_fence_after(e);
    Reg any = reg_pred(e, "sx_any_need");
    op_vote_any(e, any, need);
    emit(e, "@!%s bra %s;", R(e, any), new_label(e, l_keep, sizeof l_keep, "sx_keep"));
    mla100_rescale(e);
    emit_label(e, l_keep);
    emit_label(e, l_first);
    emit(e, "add.u32 %s, %%sx_tl, %u;", R(e, ta), s->tm_s[buf]);
    op_tmem_st(e, ta, wd, 0, n);
    op_tmem_wait_st(e);
    op_tc_fence_before(e);
    emit_note(e, "P written: arrive on the even CTA's bar_p_full");
    Reg lbar = reg_b32(e, "sx_lbar");
    smem_at(e, bar, s->bar_p_full);
    op_mapa(e, lbar, bar, reg_find(e, "lead_rank"));
    op_mbar_arrive_cluster(e, lbar);
}

static void pair_softmax(Emit *e)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    emit_section(e, "role softmax (warps 0..%d): one row half per thread, P to TMEM, lazy O rescale, epilogue",
                 s->sfx_warps - 1);
    sfx_setup(e);
    Reg j = reg_b32(e, "sx_j"), stage = reg_b32(e, "sx_stage"), phase = reg_b32(e, "sx_phase");
    Reg any = reg_pred(e, "sx_any"), it = reg_b32(e, "sx_it"), empty = reg_b32(e, "sx_empty");
    reg_pred(e, "sx_odd"); /* sx_odd, sx_spar, sx_first: mla100_sfx_dispatch reads them */
    reg_b32(e, "sx_spar");
    Reg opar = reg_b32(e, "sx_opar");
    reg_pred(e, "sx_first");
    Reg words[8];
    char top[NAME], done[NAME], l_skip[NAME];
    emit(e, "mov.u32 %s, 0;", R(e, it));
    mla100_loop_begin(e, "sx", j, stage, phase, top, done);
    read_bits(e, "sx", stage, phase, words, any);
    int per_half = s->half_cols / WARP;
    emit_note(e, "this thread's key half: bit words %d*half ..", per_half);
    for (int i = 0; i < per_half; i++)
        emit(e, "selp.b32 %s, %s, %s, %%sx_hi;", R(e, reg_b32(e, "sx_word%d", i)), R(e, words[per_half + i]),
             R(e, words[i]));
    smem_indexed(e, empty, s->bar_kv_empty, stage, MBAR_BYTES);
    op_mbar_arrive(e, empty);
    emit(e, "@!%s bra %s;", R(e, any), new_label(e, l_skip, sizeof l_skip, "sx_skip"));
    mla100_sfx_dispatch(e, sfx_block);
    emit_label(e, l_skip);
    mla100_loop_end(e, j, stage, phase, mla100(e->p)->stages, top, done);
    emit(e, "add.u32 %s, %s, 1;", R(e, opar), R(e, it));
    emit(e, "and.b32 %s, %s, 1;", R(e, opar), R(e, opar));
    mla100_epilogue(e, 1);
    emit(e, "bra.uni $exit;");
}

/* ------------------------------------------------------------ kernel */

int sm100_emit_mla_pair(Emit *e)
{
    const Plan *p = e->p;
    const SparsePlan100 *s = mla100(p);
    mla100_prologue(e, 1);
    pair_barrier_init(e);
    mla100_tmem_alloc(e, 1);
    const Mla100Roles roles = {pair_load, pair_dequant, pair_mma, pair_softmax};
    mla100_roles(e, &roles);
    Reg pr = reg_find(e, "p_role");
    emit_label(e, "$exit");
    emit_section(e, "the pair leaves together: after the cluster barrier no CTA signals the other and no MMA");
    emit_note(e, "touches either CTA's TMEM, so both MMA warps free it (cta_group::2)");
    op_tc_fence_before(e);
    op_cluster_sync(e);
    emit(e, "mov.u32 %%warp, %%tid.x;");
    emit(e, "shr.u32 %%warp, %%warp, 5;");
    op_pair_tmem_free(e, pr, s->warp_mma, s->off_tmem_slot, p->tmem_cols);
    emit(e, "ret;");
    return e->failed ? -1 : 0;
}
