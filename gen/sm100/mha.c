/* sm100/mha.c - the sm_100a MHA forward kernel (FlashAttention-4 "2Q" design).
 *
 * One CTA per tile of qtiles x 128 query rows (GQA heads packed into the rows
 * when the plan says so); 16 warps in one dispatch (plan.roles):
 *   softmax t   (warps 4t..4t+3)  one row per thread: S from TMEM (tcgen05.ld
 *               32x32b), mask, lazy max, exp2 (MUFU + FMA polynomial), P over S
 *   correction  (warps 8..11)     rescale O in TMEM when a warp's vote asks;
 *               epilogue: O / l, LSE, O through smem and a TMA store
 *   mma         (warp 12)         TMEM alloc/dealloc; one elected thread issues
 *               every tcgen05.mma and commits each one onto an mbarrier
 *   load        (warp 13)         one thread issues the TMA loads (Q, K/V ring)
 * Per KV tile: S_t = Q_t K^T (SS) for every tile, then O_t += P_t V (TS, P read
 * from TMEM) interleaved with the next S (plan note "mma order"). KV blocks are
 * visited from the last one down, as on sm90: masked blocks come first.
 * Every number comes from the plan (sm100/plan.c); `fa4gen explain` prints it.
 */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../ops.h"
#include "../ops_copy.h"
#include "../score_mod.h"
#include "../softmax.h"
#include "sm100.h"

enum { NAME = 40, F32_BYTES = 4 };

/* The largest power of two <= min(left, cap): the x of one tcgen05.ld/st. */
static int piece(int left, int cap)
{
    int k = cap;
    while (k > left) k /= 2;
    return k;
}

static int pair(const Plan *p) { return sm100_of(p)->cta_pair == 2; }

/* The ring V loads into: the fused one, or ring 1. */
static int ring_v(const Plan *p) { return sm100_of(p)->fused ? 0 : 1; }

/* The tile index: one CTA per tile, or one cluster (the CTA pair) per tile. */
static void tile_index(Emit *e, Reg dst)
{
    REG_WANT(e, dst, RT_B32);
    emit(e, "mov.u32 %s, %s;", R(e, dst), pair(e->p) ? "%clusterid.x" : "%ctaid.x");
}

/* dst = the shared::cluster address of this CTA's smem address addr in the even CTA of the
 * pair, which owns the barriers the MMAs wait on (role_context sets %lead_rank). */
static void lead_addr(Emit *e, Reg dst, Reg addr) { op_mapa(e, dst, addr, reg_find(e, "lead_rank")); }

/* Arrive on a barrier the MMA thread waits on: this CTA's own, or the even CTA's for the pair. */
static void arrive_for_mma(Emit *e, Reg bar, Reg lead_bar)
{
    if (pair(e->p)) op_mbar_arrive_cluster(e, lead_bar);
    else op_mbar_arrive(e, bar);
}

/* ------------------------------------------------------------------ */
/* prologue                                                             */
/* ------------------------------------------------------------------ */

static void emit_barrier_init(Emit *e)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    char lbl[NAME];
    const Mbar per_tile[] = {
        mbar_plan(e, "bar_q_full"),  mbar_plan(e, "bar_s_full"), mbar_plan(e, "bar_corr_full"),
        mbar_plan(e, "bar_p_full"),  mbar_plan(e, "bar_o_ready"), mbar_plan(e, "bar_l_full"),
        mbar_plan(e, "bar_o_full"),
    };
    Reg b = mbar_init_begin(e, lbl, sizeof lbl, "prologue: mbarrier init (thread 0)");
    for (size_t k = 0; k < sizeof per_tile / sizeof per_tile[0]; k++)
        for (int t = 0; t < s->qtiles; t++) {
            emit_note(e, "plan: %s[%d], %d arrival(s)", per_tile[k].name, t, per_tile[k].count);
            mbar_init(e, b, &per_tile[k], t);
        }
    for (int r = 0; r < s->n_rings; r++) {
        const Mbar ring[] = {mbar_plan_at(e, s->ring[r].bar_full), mbar_plan_at(e, s->ring[r].bar_empty)};
        for (int i = 0; i < s->ring[r].slots; i++) {
            emit_note(e, "plan: ring %d slot %d full / empty", r, i);
            for (size_t k = 0; k < sizeof ring / sizeof ring[0]; k++) mbar_init(e, b, &ring[k], i);
        }
    }
    if (p->kv_tail) {
        const Mbar tail = mbar_plan(e, "bar_v_tail");
        for (int i = 0; i < s->ring[ring_v(p)].slots; i++) {
            emit_note(e, "plan kv tail: V slot %d's tail barrier", i);
            mbar_init(e, b, &tail, i);
        }
    }
    mbar_init_end(e, lbl);
}

/* Warp 12 allocates the plan's TMEM columns; every thread then reads the base. */
static void emit_tmem_alloc(Emit *e)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    char lbl[NAME];
    const char *pr = reg(e, "pred", "p_not_mma");
    emit_section(e, "prologue: TMEM alloc (warp %d, %d columns, cta_group::%d), then the %s syncs", s->warp_mma,
                 p->tmem_cols, s->cta_pair, pair(p) ? "cluster" : "CTA");
    emit(e, "setp.ne.u32 %s, %%warp, %d;", pr, s->warp_mma);
    emit(e, "@%s bra %s;", pr, new_label(e, lbl, sizeof lbl, "alloc_done"));
    Reg slot = smem_reg(e, "tmem_slot", s->off_tmem_slot);
    op_tmem_alloc(e, s->cta_pair, slot, p->tmem_cols);
    op_tmem_relinquish(e, s->cta_pair);
    emit_label(e, lbl);
    op_tc_fence_before(e);
    if (pair(p)) {
        emit_note(e, "the pair: both CTAs' barriers are initialised and both allocated TMEM before either");
        emit_note(e, "signals the other (remote arrivals, multicast commits, TMA bytes on the even CTA's barriers)");
        op_cluster_sync(e);
    } else {
        op_bar_sync(e, 0, p->threads);
    }
    op_tc_fence_after(e);
}

/* The smem base once more, spelled so that ptxas recomputes it here instead of keeping the
 * prologue's value live (and spilled) across a setmaxnreg. */
static void smem_base_again(Emit *e)
{
    emit_note(e, "smem base again (not the prologue's value: that would stay live across setmaxnreg)");
    emit(e, "mov.u32 %%smem, fa4_smem;");
    emit(e, "add.u32 %%smem, %%smem, %u;", e->p->smem_align - 1);
    emit(e, "shr.u32 %%smem, %%smem, %d;", __builtin_ctz(e->p->smem_align));
    emit(e, "shl.b32 %%smem, %%smem, %d;", __builtin_ctz(e->p->smem_align));
}

/* What every role needs, computed after its setmaxnreg so that nothing from
 * the prologue stays live into a role's smaller register budget: thread,
 * parameters, tile coordinates, KV block count, TMEM base and lane field.
 * loads_early: the load warp under plan pdl early/prefetch kv, which waits for the previous grid itself. */
static void tile_context(Emit *e);

static void role_context(Emit *e, int loads_early)
{
    const Sm100Plan *s = sm100_of(e->p);
    mha_prologue(e);
    if (mha_roles_wait(e->p) && !loads_early) {
        emit_note(e, "plan pdl early/prefetch kv: this role's global accesses follow the previous grid (the load "
                  "warp streams or prefetches K/V before it)");
        emit(e, "griddepcontrol.wait;");
    }
    smem_base_again(e);
    tile_context(e);
    op_ld_shared_b32(e, reg_b32(e, "tmem"), reg_find(e, "smem"), s->off_tmem_slot);
    emit_note(e, "TMEM lane field of this warp: lanes 32*(warp%%4) .. +31 (bits 31:16)");
    op_tmem_warp_lanes(e, reg_b32(e, "tm_lane"), reg_find(e, "warp"));
    emit(e, "and.b32 %s, %%thread, %d;", reg(e, "b32", "row"), s->tile_rows - 1);
}

/* The tile's coordinates, key range and KV block count (%nblk): what role_context reads from the
 * parameters and, varlen or paged, the sequence's lengths. */
static void tile_context(Emit *e)
{
    const Sm100Plan *s = sm100_of(e->p);
    tile_index(e, reg_b32(e, "tile"));
    if (s->packed) mha_tile_coords_packed(e);
    else mha_tile_coords(e);
    if (pair(e->p)) {
        const char *rank = reg(e, "b32", "cta_rank");
        emit_note(e, "the pair: the key range above covers both CTAs' rows; CTA r takes rows m0 + %d r",
                  e->p->rows_per_cta);
        emit(e, "mov.u32 %s, %%cluster_ctarank;", rank);
        emit(e, "mad.lo.u32 %%m0, %s, %d, %%m0;", rank, e->p->rows_per_cta);
        emit(e, "and.b32 %s, %s, 0x%08X;", reg(e, "b32", "lead_rank"), rank, ~(uint32_t)(s->cta_pair - 1));
        emit(e, "setp.eq.u32 %s, %s, %%lead_rank;", reg(e, "pred", "is_lead"), rank);
    }
    const char *nblk = reg(e, "b32", "nblk");
    emit_note(e, "KV blocks this tile visits, from n_end - 1 down to n_begin");
    emit(e, "sub.s32 %s, %%n_end, %%n_begin;", nblk);
    emit(e, "max.s32 %s, %s, 0;", nblk, nblk);
    if (e->p->cfg.varlen) {
        Reg past = reg_pred(e, "vl_empty");
        emit_note(e, "varlen: a tile past its sequence's end (grid sized by max_seqlen_q) visits no block and "
                  "stores nothing");
        emit(e, "setp.ge.u32 %s, %%m0, %%seqlen_q;", R(e, past));
        emit(e, "@%s mov.u32 %s, 0;", R(e, past), nblk);
    }
}

/* The load warp of a tile with no key for any row has nothing to load. */
static void no_keys_exit(Emit *e)
{
    const char *pr = R(e, reg_find(e, "ld_p"));
    emit_note(e, "no key for any row: nothing to load (the epilogue writes O = 0 over the Q tiles)");
    emit(e, "setp.le.s32 %s, %%nblk, 0;", pr);
    emit(e, "@%s bra $exit;", pr);
}

/* ------------------------------------------------------------------ */
/* ring state                                                           */
/* ------------------------------------------------------------------ */

/* Take the next slot of ring r: wait on its full barrier (consumer) or its
 * empty barrier (producer), name its smem and barrier addresses, step the ring. */
static void ring_take(Emit *e, const char *who, int r, int producer, Reg slot, Reg full, Reg empty)
{
    const Sm100Ring *g = &sm100_of(e->p)->ring[r];
    Reg stage = reg_b32(e, "%s_stage%d", who, r), phase = reg_b32(e, "%s_phase%d", who, r);
    smem_indexed(e, full, g->bar_full, stage, MBAR_BYTES);
    smem_indexed(e, empty, g->bar_empty, stage, MBAR_BYTES);
    smem_indexed(e, slot, g->off, stage, g->slot_bytes);
    if (producer) {
        Reg par = reg_b32(e, "ring_par");
        ring_free_parity(e, par, phase);
        op_mbar_wait(e, empty, par);
    } else {
        op_mbar_wait(e, full, phase);
    }
    ring_advance(e, stage, phase, g->slots);
}

static void ring_init(Emit *e, const char *who)
{
    for (int r = 0; r < sm100_of(e->p)->n_rings; r++) {
        Reg stage = reg_b32(e, "%s_stage%d", who, r), phase = reg_b32(e, "%s_phase%d", who, r);
        ring_reset(e, stage, phase);
    }
}

/* ------------------------------------------------------------------ */
/* load warp                                                            */
/* ------------------------------------------------------------------ */

/* Expect a full barrier's bytes and name the barrier the TMA completes on: this CTA's own,
 * or, for the pair, the even CTA's (only the even CTA expects; both CTAs' bytes land there). */
static Reg load_expect(Emit *e, Reg bar, uint32_t tx)
{
    if (!pair(e->p)) {
        op_mbar_expect_tx(e, bar, tx);
        return bar;
    }
    Reg lbar = reg_b32(e, "ld_lbar");
    op_mbar_expect_tx_if(e, reg_find(e, "is_lead"), bar, tx);
    lead_addr(e, lbar, bar);
    return lbar;
}

static void load_box(Emit *e, Reg dst, Reg map, Reg col, Reg row, Reg head, Reg bar)
{
    /* varlen: the maps are one batch of packed rows (gen/varlen.c) */
    Reg bidx = reg_find(e, e->p->cfg.varlen ? "vl_zero" : "bidx");
    if (pair(e->p)) op_tma_load_4d_pair(e, dst, map, col, row, head, bidx, bar);
    else op_tma_load_4d(e, dst, map, col, row, head, bidx, bar);
}

static void load_q(Emit *e)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    Reg bar = reg_b32(e, "ld_bar"), dst = reg_b32(e, "ld_dst");
    Reg col = reg_b32(e, "ld_col"), row = reg_b32(e, "ld_row");
    for (int t = 0; t < s->qtiles; t++) {
        emit_note(e, "Q tile %d: box {%d, %d, %d, 1} per chunk (plan map q), tx %u bytes", t, p->chunk_elems,
                  s->seq_rows, s->heads_per_tile, s->tx_q);
        mbar_at(e, bar, s->bar_q_full, t);
        Reg done = load_expect(e, bar, s->tx_q);
        emit(e, "add.u32 %s, %%m0, %d;", R(e, row), t * s->seq_rows);
        if (p->cfg.varlen) emit(e, "add.u32 %s, %s, %%vl_q_start;", R(e, row), R(e, row));
        for (int c = 0; c < p->qk_chunks; c++) {
            smem_at(e, dst, s->off_q + (uint32_t)t * s->q_tile_bytes + (uint32_t)c * s->q_chunk_bytes);
            emit(e, "mov.u32 %s, %d;", R(e, col), c * p->chunk_elems);
            load_box(e, dst, reg_find(e, "tmap_q"), col, row, reg_find(e, "head"), done);
        }
    }
}

/* Paged KV (plan note paged kv): the tile's min(page, bn)-row boxes, each at its page's coordinates;
 * box i of chunk c lands at row i x box of the chunk (whole swizzle atoms). */
static void load_kv_paged(Emit *e, int is_v, Reg slot, Reg done)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    int box = p->cfg.page < p->bn ? p->cfg.page : p->bn, chunks = is_v ? s->v_chunks : p->qk_chunks;
    uint32_t chunk_bytes = is_v ? s->v_chunk_bytes : s->k_chunk_bytes;
    Reg dst = reg_b32(e, "ld_dst"), col = reg_b32(e, "ld_col"), lrow = reg_b32(e, "ld_lrow");
    Reg page = reg_b32(e, "ld_page"), in_row = reg_b32(e, "ld_prow");
    Reg map = reg_find(e, is_v ? "tmap_v" : "tmap_k");
    for (int i = 0; i < p->bn / box; i++) {
        emit(e, "add.u32 %s, %%ld_row, %d;", R(e, lrow), i * box);
        paged_coords(e, lrow, page, in_row);
        for (int c = 0; c < chunks; c++) {
            emit(e, "add.u32 %s, %s, %u;", R(e, dst), R(e, slot),
                 (uint32_t)c * chunk_bytes + (uint32_t)(i * box * p->swizzle_bytes));
            emit(e, "mov.u32 %s, %d;", R(e, col), c * p->chunk_elems);
            op_tma_load_4d(e, dst, map, col, in_row, reg_find(e, "kv_head"), page, done);
        }
    }
}

/* This CTA's part of the K or V tile of block %ld_j into the next slot of its ring: all of
 * it, or for the pair K rows k_rows r.. and V chunks v_chunks r.. (plan note cta pair).
 * tail (plan kv tail, V of a tail block): the bytes land on the slot's tail barrier, which the scrub warp
 * waits on before it zeroes the rows past the end and arrives on the slot's full barrier. */
static void load_kv(Emit *e, int is_v, int tail)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    Reg slot = reg_b32(e, "ld_slot"), full = reg_b32(e, "ld_full"), empty = reg_b32(e, "ld_empty");
    Reg dst = reg_b32(e, "ld_dst"), col = reg_b32(e, "ld_col");
    int chunks = is_v ? s->v_chunks : p->qk_chunks;
    uint32_t chunk_bytes = is_v ? s->v_chunk_bytes : s->k_chunk_bytes;
    emit_note(e, "%s of block j: wait for a free slot, expect %u bytes, one box per chunk", is_v ? "V" : "K",
              is_v ? s->tx_v : s->tx_k);
    ring_take(e, "ld", is_v ? ring_v(p) : 0, 1, slot, full, empty);
    if (tail) {
        emit_note(e, "plan kv tail: this tail block's V lands on the slot's bar_v_tail, not its full barrier");
        emit(e, "add.u32 %s, %s, %u;", R(e, full), R(e, full), s->bar_v_tail - s->ring[ring_v(p)].bar_full);
    }
    Reg done = load_expect(e, full, is_v ? s->tx_v : s->tx_k);
    if (p->cfg.page) {
        load_kv_paged(e, is_v, slot, done);
        return;
    }
    for (int c = 0; c < chunks; c++) {
        Reg map = reg_find(e, is_v ? "tmap_v" : c < s->k_nope_chunks ? "tmap_k" : "tmap_k_rope");
        int c0 = is_v || c < s->k_nope_chunks ? c : c - s->k_nope_chunks;
        emit(e, "add.u32 %s, %s, %u;", R(e, dst), R(e, slot), (uint32_t)c * chunk_bytes);
        if (is_v && pair(p))
            emit(e, "mad.lo.u32 %s, %%cta_rank, %d, %d;", R(e, col), s->v_chunks * p->chunk_elems, c0 * p->chunk_elems);
        else
            emit(e, "mov.u32 %s, %d;", R(e, col), c0 * p->chunk_elems);
        load_box(e, dst, map, col, reg_find(e, is_v ? "ld_row" : "ld_krow"), reg_find(e, "kv_head"), done);
    }
}

/* The pair: before this CTA may leave, every MMA commit onto its empty barriers has landed
 * (the even CTA's MMA thread arrives on them from the other SM). */
static void load_tail(Emit *e)
{
    const Sm100Plan *s = sm100_of(e->p);
    emit_note(e, "the pair: wait until the MMAs released every slot (their commits arrive from the even CTA)");
    Reg slot = reg_b32(e, "ld_slot"), full = reg_b32(e, "ld_full"), empty = reg_b32(e, "ld_empty");
    for (int r = 0; r < s->n_rings; r++)
        for (int k = 0; k < s->ring[r].slots; k++) ring_take(e, "ld", r, 1, slot, full, empty);
}

/* plan pdl prefetch kv: the blocks after %ld_j in load order into L2 (ascending under early kv, where
 * %ld_j is the next block; else descending from it, the first block to load). */
static void prefetch_kv(Emit *e)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    MhaKvMap maps[3] = {{reg_find(e, "tmap_k"), 0, s->k_nope_chunks}, {reg_find(e, "tmap_v"), 0, s->v_chunks},
                        {REG_NONE, 0, p->qk_chunks - s->k_nope_chunks}};
    if (maps[2].chunks) maps[2].map = reg_find(e, "tmap_k_rope");
    int up = p->pdl_early_kv != 0;
    mha_prefetch_kv(e, reg_find(e, "ld_j"), 0, up ? 1 : -1, maps, maps[2].chunks ? 3 : 2);
}

/* plan pdl early/prefetch kv: once %ld_pre is 0 (at the start when nothing loads early), prefetch,
 * wait for the previous grid and load Q; -1 afterwards, so it happens once. */
static void early_q_load(Emit *e)
{
    char l_skip[NAME];
    const char *pr = R(e, reg_find(e, "ld_p"));
    new_label(e, l_skip, sizeof l_skip, "ld_q_later");
    emit(e, "setp.ne.s32 %s, %%ld_pre, 0;", pr);
    emit(e, "@%s bra %s;", pr, l_skip);
    if (e->p->pdl_prefetch_kv) prefetch_kv(e);
    emit(e, "griddepcontrol.wait;");
    if (mha_prefetch_rereads(e->p)) {
        emit_note(e, "paged prefetch: the tile's sequence length again, now that the previous grid is done");
        tile_context(e);
        no_keys_exit(e);
        emit(e, "sub.s32 %%ld_j, %%n_end, 1;");
    }
    load_q(e);
    emit(e, "mov.u32 %%ld_pre, -1;");
    emit_label(e, l_skip);
}

/* plan pdl early kv: %ld_pre = the leading blocks (ascending) that end at or before row
 * seqlen_k - seqlen_q -- rows the kernel before may not write -- at most what the rings take
 * before a slot is freed; then Q at once when that is 0. */
static void early_kv_count(Emit *e)
{
    Reg old = reg_b32(e, "ld_old");
    mha_early_kv_count(e, reg_b32(e, "ld_pre"), old);
}

/* K and V of block %ld_j (the loop's i-th), then the next block; tail: the tail block (plan kv tail), whose
 * V lands on its slot's tail barrier. */
static void load_block(Emit *e, int tail)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    const char *i = R(e, reg_find(e, "ld_i")), *j = R(e, reg_find(e, "ld_j")), *row = R(e, reg_find(e, "ld_row"));
    const char *krow = R(e, reg_find(e, "ld_krow"));
    emit(e, "mul.lo.u32 %s, %s, %d;", row, j, p->bn);
    if (p->cfg.varlen && !p->cfg.page) emit(e, "add.u32 %s, %s, %%vl_k_start;", row, row);
    if (pair(p)) emit(e, "mad.lo.u32 %s, %%cta_rank, %d, %s;", krow, s->k_rows, row);
    else emit(e, "mov.u32 %s, %s;", krow, row);
    load_kv(e, 0, 0);
    load_kv(e, 1, tail);
    emit(e, "add.s32 %s, %s, 1;", i, i);
    emit(e, "%s.s32 %s, %s, 1;", p->pdl_early_kv ? "add" : "sub", j, j);
}

static void emit_load(Emit *e)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    char l_kv[NAME], l_done[NAME];
    emit_section(e, "role load (warp %d): one thread issues every TMA load", s->warp_load);
    const char *pr = reg(e, "pred", "ld_p");
    emit(e, "setp.ne.u32 %s, %%lane, 0;", pr);
    emit(e, "@%s bra $exit;", pr);
    role_context(e, 1);
    int early = p->pdl_early_kv;
    /* paged prefetch: the length read so far only aims the prefetches; early_q_load exits after the wait */
    if (!mha_prefetch_rereads(p)) no_keys_exit(e);
    if (!mha_roles_wait(p)) load_q(e);
    ring_init(e, "ld");
    const char *i = reg(e, "b32", "ld_i"), *j = reg(e, "b32", "ld_j");
    reg(e, "b32", "ld_row");
    reg(e, "b32", "ld_krow");
    emit(e, "mov.u32 %s, 0;", i);
    if (early) emit(e, "mov.u32 %s, %%n_begin;", j); /* ascending: the newest rows last */
    else emit(e, "sub.s32 %s, %%n_end, 1;", j);
    if (early) { /* plan pdl early kv: the blocks before the wait, then (once %ld_pre is 0) prefetch, wait, Q */
        early_kv_count(e);
        early_q_load(e);
    } else if (p->pdl_prefetch_kv) { /* plan pdl prefetch kv: prefetch, wait, Q */
        emit(e, "mov.u32 %s, 0;", reg(e, "b32", "ld_pre"));
        early_q_load(e);
    }
    new_label(e, l_kv, sizeof l_kv, "ld_kv");
    const char *kv_end = "%nblk";
    if (p->kv_tail) {
        Reg tail = reg_pred(e, "ld_tail");
        mha_kv_tail(e, tail, reg_b32(e, "ld_t"));
        if (early) {
            emit_note(e, "plan kv tail: the tail block (ascending: the last) loads after the loop, its V on bar_v_tail");
            kv_end = reg(e, "b32", "ld_kv_end");
            emit(e, "selp.u32 %s, 1, 0, %s;", kv_end, R(e, tail));
            emit(e, "sub.s32 %s, %%nblk, %s;", kv_end, kv_end);
        } else {
            emit_note(e, "plan kv tail: the tail block (descending: the first), its V on bar_v_tail");
            emit(e, "@!%s bra %s;", R(e, tail), l_kv);
            load_block(e, 1);
        }
    }
    emit_label(e, l_kv);
    emit(e, "setp.ge.s32 %s, %s, %s;", pr, i, kv_end);
    emit(e, "@%s bra %s;", pr, new_label(e, l_done, sizeof l_done, "ld_done"));
    load_block(e, 0);
    if (early) {
        emit_note(e, "plan pdl early kv: the last early block is out: wait for the previous grid, then Q");
        emit(e, "sub.s32 %%ld_pre, %%ld_pre, 1;");
        early_q_load(e);
    }
    emit(e, "bra.uni %s;", l_kv);
    emit_label(e, l_done);
    if (p->kv_tail && early) {
        emit_note(e, "plan kv tail: the tail block, last; the scrub warp releases its V");
        emit(e, "setp.ge.s32 %s, %s, %%nblk;", pr, i);
        emit(e, "@%s bra $exit;", pr);
        load_block(e, 1);
    }
    if (pair(p)) load_tail(e);
    emit(e, "bra.uni $exit;");
}

/* ------------------------------------------------------------------ */
/* scrub warp (plan kv tail)                                            */
/* ------------------------------------------------------------------ */

/* The CTA's one tile: when its kv range ends with the sequence's tail block, wait for that block's V on its
 * slot's tail barrier (used once: parity 0), zero the rows past the end, release the slot to the MMA warp.
 * The slot: the load warp takes K(j) V(j) in turn, from the last block down (ascending under plan pdl early
 * kv), so the tail's V is take 1 (take 2 nblk - 1) of a fused ring, take 0 (nblk - 1) of the V ring. */
static void emit_scrub(Emit *e)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    const Sm100Ring *g = &s->ring[ring_v(p)];
    emit_section(e, "role scrub (warp %d): zeroes a tail block's V rows past the sequence's end (plan kv tail)",
                 s->warp_scrub);
    mha_prologue(e);
    if (mha_roles_wait(p)) {
        emit_note(e, "plan pdl: its global reads (the sequence's lengths) follow the previous grid");
        emit(e, "griddepcontrol.wait;");
    }
    smem_base_again(e);
    tile_context(e);
    Reg tail = reg_pred(e, "sc_tail"), slot = reg_b32(e, "sc_slot"), bar = reg_b32(e, "sc_bar");
    Reg vslot = reg_b32(e, "sc_vslot"), full = reg_b32(e, "sc_full");
    const char *pr = R(e, reg_pred(e, "sc_p"));
    emit(e, "setp.le.s32 %s, %%nblk, 0;", pr);
    emit(e, "@%s bra $exit;", pr);
    mha_kv_tail(e, tail, slot);
    emit(e, "@!%s bra $exit;", R(e, tail));
    int fused = s->fused;
    if (p->pdl_early_kv) {
        emit_note(e, "ascending (plan pdl early kv): the tail is the last block, V take %s", fused ? "2 nblk - 1" : "nblk - 1");
        if (fused) emit(e, "shl.b32 %s, %%nblk, 1;", R(e, slot));
        emit(e, "sub.u32 %s, %s, 1;", R(e, slot), fused ? R(e, slot) : "%nblk");
        emit(e, "rem.u32 %s, %s, %d;", R(e, slot), R(e, slot), g->slots);
    } else {
        emit_note(e, "descending: the tail is the first block, V take %d", fused ? 1 : 0);
        emit(e, "mov.u32 %s, %d;", R(e, slot), fused ? 1 % g->slots : 0);
    }
    smem_indexed(e, bar, s->bar_v_tail, slot, MBAR_BYTES);
    op_mbar_wait_imm(e, bar, 0);
    smem_indexed(e, vslot, g->off, slot, g->slot_bytes);
    smem_indexed(e, full, g->bar_full, slot, MBAR_BYTES);
    mha_scrub_tail(e, vslot, s->v_chunks, s->v_chunk_bytes, s->bar_scrub, full);
    emit(e, "bra.uni $exit;");
}

/* ------------------------------------------------------------------ */
/* MMA warp                                                             */
/* ------------------------------------------------------------------ */

/* Descriptor start-field step of K step kk inside a K-major chunked tile. */
static uint32_t kmajor_step(const Plan *p, int kk, uint32_t chunk_bytes)
{
    int step_bytes = sm100_of(p)->mma_k * p->elem_bytes;
    return op_desc_kstep(kk, p->swizzle_bytes / step_bytes, (uint32_t)step_bytes, chunk_bytes);
}

/* S_t = Q_t K^T from the K slot in %mm_kslot. */
static void mma_qk(Emit *e, int t)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    Reg klo = reg_b32(e, "mm_klo"), alo = reg_b32(e, "mm_alo"), blo = reg_b32(e, "mm_blo");
    Reg ad = reg_b64(e, "mm_ad"), bd = reg_b64(e, "mm_bd");
    Reg d = reg_find(e, "mm_ts%d", t), qlo = reg_find(e, "mm_qlo%d", t);
    emit_note(e, "S%d = Q%d K^T: %d x M%d N%d SS (plan: qk mma, idesc 0x%08X)", t, t, s->qk_steps, s->mma_m, p->bn,
              s->idesc_qk);
    op_umma_desc_lo(e, klo, reg_find(e, "mm_kslot"), s->desc_k);
    for (int kk = 0; kk < s->qk_steps; kk++) {
        emit(e, "add.u32 %s, %s, %u;", R(e, alo), R(e, qlo), kmajor_step(p, kk, s->q_chunk_bytes));
        emit(e, "add.u32 %s, %s, %u;", R(e, blo), R(e, klo), kmajor_step(p, kk, s->k_chunk_bytes));
        emit(e, "mov.b64 %s, {%s, %%mm_khi};", R(e, ad), R(e, alo));
        emit(e, "mov.b64 %s, {%s, %%mm_khi};", R(e, bd), R(e, blo));
        op_umma_ss(e, s->cta_pair, s->kind_f8, d, ad, bd, reg_find(e, "mm_idesc_qk"),
                   kk ? REG_NONE : reg_find(e, "mm_false"));
    }
}

/* O_t (+)= P_t V from the V slot in %mm_vslot; acc = the O accumulator holds earlier blocks. */
static void mma_pv(Emit *e, int t, Reg acc)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    Reg vlo = reg_b32(e, "mm_vlo"), blo = reg_b32(e, "mm_blo");
    Reg bd = reg_b64(e, "mm_bd"), pa = reg_b32(e, "mm_pa");
    Reg d = reg_find(e, "mm_to%d", t), pt = reg_find(e, "mm_tp%d", t);
    emit_note(e, "O%d += P%d V: %d x M%d N%d TS, P from TMEM (%d columns per K step), V MN-major (plan: pv mma)", t,
              t, s->pv_steps, s->mma_m, s->ov_pad, s->p_step_cols);
    op_umma_desc_lo(e, vlo, reg_find(e, "mm_vslot"), s->desc_v);
    for (int kk = 0; kk < s->pv_steps; kk++) {
        emit(e, "add.u32 %s, %s, %u;", R(e, blo), R(e, vlo),
             op_desc_delta((uint32_t)kk * (uint32_t)s->mma_k * (uint32_t)p->swizzle_bytes));
        emit(e, "mov.b64 %s, {%s, %%mm_vhi};", R(e, bd), R(e, blo));
        emit(e, "add.u32 %s, %s, %d;", R(e, pa), R(e, pt), s->p_step_cols * kk);
        op_umma_ts(e, s->cta_pair, s->kind_f8, d, pa, bd, reg_find(e, "mm_idesc_pv"), kk ? REG_NONE : acc);
    }
}

/* Wait until softmax t wrote P and correction t rescaled O for the block of parity par. */
static void mma_wait_p(Emit *e, int t, Reg par)
{
    const Sm100Plan *s = sm100_of(e->p);
    Reg bar = reg_b32(e, "mm_bar");
    mbar_at(e, bar, s->bar_p_full, t);
    op_mbar_wait(e, bar, par);
    mbar_at(e, bar, s->bar_o_ready, t);
    op_mbar_wait(e, bar, par);
    op_tc_fence_after(e);
}

/* Commit the MMAs issued so far onto bar: for the pair, onto bar's offset in both CTAs. */
static void mma_commit(Emit *e, Reg bar)
{
    op_umma_commit(e, sm100_of(e->p)->cta_pair, bar, pair(e->p) ? reg_find(e, "mm_mask") : REG_NONE);
}

static void mma_commit_tile(Emit *e, uint32_t base, int t)
{
    Reg bar = reg_b32(e, "mm_bar");
    mbar_at(e, bar, base, t);
    mma_commit(e, bar);
}

/* TMEM addresses of S_t, P_t, O_t (plan tmem), read afresh from the alloc slot each
 * KV block: ptxas then forms them next to their MMAs instead of keeping them all live. */
static void mma_addresses(Emit *e)
{
    const Sm100Plan *s = sm100_of(e->p);
    op_ld_shared_b32(e, reg_find(e, "tmem"), reg_find(e, "smem"), s->off_tmem_slot);
    for (int t = 0; t < s->qtiles; t++) {
        char n[NAME];
        snprintf(n, NAME, "mm_ts%d", t);
        emit(e, "add.u32 %s, %%tmem, %u;", reg(e, "b32", n), s->tm_s[t]);
        snprintf(n, NAME, "mm_tp%d", t);
        emit(e, "add.u32 %s, %%tmem, %u;", reg(e, "b32", n), s->tm_p[t]);
        snprintf(n, NAME, "mm_to%d", t);
        emit(e, "add.u32 %s, %%tmem, %u;", reg(e, "b32", n), s->tm_o[t]);
    }
}

static void mma_setup(Emit *e)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    emit(e, "mov.u32 %s, 0x%08X;", reg(e, "b32", "mm_idesc_qk"), s->idesc_qk);
    emit(e, "mov.u32 %s, 0x%08X;", reg(e, "b32", "mm_idesc_pv"), s->idesc_pv);
    emit(e, "mov.u32 %s, 0x%08X;", reg(e, "b32", "mm_khi"), (uint32_t)(s->desc_k >> 32));
    emit(e, "mov.u32 %s, 0x%08X;", reg(e, "b32", "mm_vhi"), (uint32_t)(s->desc_v >> 32));
    emit_note(e, "enable-input-d: false overwrites the accumulator (first K step); ptxas takes 1 but not 0 as an immediate");
    emit(e, "mov.pred %s, 0;", reg(e, "pred", "mm_false"));
    if (pair(p)) {
        emit_note(e, "the pair: commits arrive on the barrier at the same offset in both CTAs (mask 0b11)");
        emit(e, "mov.b16 %s, %d;", reg(e, "b16", "mm_mask"), (1 << s->cta_pair) - 1);
    }
    for (int t = 0; t < s->qtiles; t++) {
        char n[NAME];
        snprintf(n, NAME, "mm_qlo%d", t);
        Reg q = reg_b32(e, "%s", n);
        emit_note(e, "Q%d descriptor low word (plan: smem q + %u, desc 0x%016llX)", t, t * s->q_tile_bytes,
                  (unsigned long long)s->desc_q);
        smem_at(e, q, s->off_q + (uint32_t)t * s->q_tile_bytes);
        op_umma_desc_lo(e, q, q, s->desc_q);
    }
    mma_addresses(e);
}

static void emit_mma(Emit *e)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    int last = s->qtiles - 1;
    char l_loop[NAME], l_tail[NAME];
    emit_section(e, "role mma (warp %d): one elected thread issues every tcgen05.mma; plan: %d per KV tile",
                 s->warp_mma, s->mma_per_kv);
    Reg lead = reg_pred(e, "mm_lead");
    const char *pr = reg(e, "pred", "mm_p");
    op_elect(e, lead);
    emit(e, "@!%s bra $mm_done;", R(e, lead));
    role_context(e, 0);
    if (pair(p)) {
        emit_note(e, "the pair: the even CTA issues every MMA for both; the odd CTA's MMA warp only holds TMEM");
        emit(e, "@!%%is_lead bra $mm_done;");
    }
    emit(e, "setp.le.s32 %s, %%nblk, 0;", pr);
    emit(e, "@%s bra $mm_done;", pr);
    mma_setup(e);
    Reg bar = reg_b32(e, "mm_bar"), par_ = reg_b32(e, "mm_par");
    const char *i = reg(e, "b32", "mm_i");
    Reg acc_ = reg_pred(e, "mm_acc");
    Reg kslot = reg_b32(e, "mm_kslot"), kfull = reg_b32(e, "mm_kfull");
    Reg kempty = reg_b32(e, "mm_kempty"), vslot = reg_b32(e, "mm_vslot");
    Reg vfull = reg_b32(e, "mm_vfull"), vempty = reg_b32(e, "mm_vempty");
    const char *par = R(e, par_), *acc = R(e, acc_);
    for (int t = 0; t < s->qtiles; t++) {
        mbar_at(e, bar, s->bar_q_full, t);
        op_mbar_wait_imm(e, bar, 0);
    }
    ring_init(e, "mm");

    emit_section(e, "mma: first KV block, S of every Q tile");
    ring_take(e, "mm", 0, 0, kslot, kfull, kempty);
    for (int t = 0; t < s->qtiles; t++) {
        mma_qk(e, t);
        mma_commit_tile(e, s->bar_s_full, t);
    }
    emit_note(e, "K slot free once every S read it");
    mma_commit(e, kempty);

    emit_section(e, "mma: per KV block i >= 1: O_t += P_t V(i-1) then S_t = Q_t K(i)^T, tile by tile");
    emit(e, "mov.u32 %s, 1;", i);
    emit_label(e, new_label(e, l_loop, sizeof l_loop, "mm_kv"));
    emit(e, "setp.ge.s32 %s, %s, %%nblk;", pr, i);
    emit(e, "@%s bra %s;", pr, new_label(e, l_tail, sizeof l_tail, "mm_tail"));
    emit(e, "sub.u32 %s, %s, 1;", par, i);
    emit(e, "setp.ne.u32 %s, %s, 0;", acc, par);
    emit(e, "and.b32 %s, %s, 1;", par, par);
    mma_addresses(e);
    ring_take(e, "mm", ring_v(p), 0, vslot, vfull, vempty);
    for (int t = 0; t < s->qtiles; t++) {
        mma_wait_p(e, t, par_);
        mma_pv(e, t, acc_);
        if (t == last) {
            emit_note(e, "V slot free once every PV read it");
            mma_commit(e, vempty);
        }
        if (t == 0) ring_take(e, "mm", 0, 0, kslot, kfull, kempty);
        mma_qk(e, t);
        mma_commit_tile(e, s->bar_s_full, t);
    }
    mma_commit(e, kempty);
    emit(e, "add.u32 %s, %s, 1;", i, i);
    emit(e, "bra.uni %s;", l_loop);

    emit_label(e, l_tail);
    emit_section(e, "mma: PV of the last block; O final");
    emit(e, "sub.u32 %s, %%nblk, 1;", par);
    emit(e, "setp.ne.u32 %s, %s, 0;", acc, par);
    emit(e, "and.b32 %s, %s, 1;", par, par);
    ring_take(e, "mm", ring_v(p), 0, vslot, vfull, vempty);
    for (int t = 0; t < s->qtiles; t++) {
        mma_wait_p(e, t, par_);
        mma_pv(e, t, acc_);
        mma_commit_tile(e, s->bar_o_full, t);
    }
    mma_commit(e, vempty);

    emit_label(e, "$mm_done");
    op_warp_sync(e);
    emit_note(e, "plan: named barrier tmem_free (%d): the correction warpgroup read O; free TMEM",
              s->bar_tmem_free);
    op_bar_sync(e, s->bar_tmem_free, p->bars[s->bar_tmem_free - 1].threads);
    if (pair(p)) {
        emit_note(e, "the pair frees TMEM together, after the cluster barrier at $exit");
        emit(e, "bra.uni $exit;");
        return;
    }
    op_tc_fence_after(e);
    op_ld_shared_b32(e, reg_find(e, "tmem"), reg_find(e, "smem"), s->off_tmem_slot);
    op_tmem_dealloc(e, 1, reg_find(e, "tmem"), p->tmem_cols);
    emit(e, "bra.uni $exit;");
}

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
static void row_head(Emit *e, Reg dst)
{
    const Sm100Plan *s = sm100_of(e->p);
    if (s->packed) {
        emit(e, "div.u32 %s, %%row, %d;", R(e, dst), s->seq_rows);
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
        emit(e, "rem.u32 %s, %%row, %d;", seq, s->seq_rows);
    } else {
        emit_note(e, "plan rows: row r of tile t = seq m0 + %d t + r", s->seq_rows);
        emit(e, "mov.u32 %s, %%row;", seq);
    }
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", tmp, t, s->seq_rows, seq);
    emit(e, "add.u32 %s, %%m0, %s;", seq, tmp);
    if (e->mod) row_head(e, reg_b32(e, "sx_hq"));
    if (p->cfg.alibi) {
        emit_note(e, "plan note alibi: this row's slope (its head's) and diagonal key, row + seqlen_k - seqlen_q");
        Reg hd = reg_b32(e, "sx_al_h");
        row_head(e, hd);
        sfx_alibi_slope(e, reg_f32(e, "sx_al_ns"), hd, reg_b64(e, "sx_al_addr"));
        emit(e, "add.u32 %s, %s, %%kv_off;", reg(e, "b32", "sx_al_q"), seq);
    }
    const struct { const char *name; uint32_t off; } bars[] = {
        {"sx_bar_s", s->bar_s_full}, {"sx_bar_corr", s->bar_corr_full}, {"sx_bar_p", s->bar_p_full},
        {"sx_bar_l", s->bar_l_full}};
    for (size_t k = 0; k < sizeof bars / sizeof bars[0]; k++) smem_indexed(e, reg_b32(e, "%s", bars[k].name), bars[k].off, t_, MBAR_BYTES);
    if (pair(p)) lead_addr(e, reg_b32(e, "sx_bar_pl"), reg_find(e, "sx_bar_p"));
}

static void emit_softmax(Emit *e)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    char l_loop[NAME], l_done[NAME], l_masked[NAME], l_next[NAME];
    emit_section(e, "role softmax (warps 0..%d): Q tile = warpgroup, one row per thread; plan regs %d",
                 4 * s->qtiles - 1, s->sfx_regs);
    op_setmaxnreg(e, s->sfx_regs, p->entry_regs);
    role_context(e, 0);
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
        emit(e, "rem.u32 %s, %%row, %d;", seq, s->seq_rows);
        emit(e, "div.u32 %s, %%row, %d;", head, s->seq_rows);
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
        row_head(e, sh);
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

static void emit_correction(Emit *e)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    char l_loop[NAME], l_done[NAME];
    emit_section(e, "role correction (warps %d..%d): O rescale in TMEM, epilogue; plan regs %d", s->warp_corr,
                 s->warp_corr + 3, s->corr_regs);
    op_setmaxnreg(e, s->corr_regs, p->entry_regs);
    role_context(e, 0);
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

/* ------------------------------------------------------------------ */
/* kernel                                                               */
/* ------------------------------------------------------------------ */

static void emit_dispatch(Emit *e)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    const char *pr = reg(e, "pred", "p_role");
    emit_section(e, "role dispatch: softmax 0..%d, correction %d..%d, warpgroup 3: mma %d, load %d",
                 4 * s->qtiles - 1, s->warp_corr, s->warp_corr + 3, s->warp_mma, s->warp_load);
    emit(e, "setp.lt.u32 %s, %%warp, %d;", pr, 4 * s->qtiles);
    emit(e, "@%s bra $softmax;", pr);
    if (s->qtiles < 2) {
        emit(e, "setp.lt.u32 %s, %%warp, %d;", pr, s->warp_corr);
        emit(e, "@%s bra $idle;", pr);
    }
    emit(e, "setp.lt.u32 %s, %%warp, %d;", pr, s->warp_corr + 4);
    emit(e, "@%s bra $correction;", pr);
    emit_section(e, "warpgroup 3 (warps %d..15): one register budget; plan regs %d", s->warp_mma, s->other_regs);
    op_setmaxnreg(e, s->other_regs, p->entry_regs);
    emit(e, "setp.eq.u32 %s, %%warp, %d;", pr, s->warp_mma);
    emit(e, "@%s bra $mma;", pr);
    emit(e, "setp.eq.u32 %s, %%warp, %d;", pr, s->warp_load);
    emit(e, "@%s bra $load;", pr);
    if (p->kv_tail) {
        emit(e, "setp.eq.u32 %s, %%warp, %d;", pr, s->warp_scrub);
        emit(e, "@%s bra $scrub;", pr);
    }
    emit(e, "bra.uni $exit;");
    if (s->qtiles < 2) {
        emit_label(e, "$idle");
        emit_note(e, "qtiles 1: the second softmax warpgroup gives its registers back and leaves");
        op_setmaxnreg(e, s->idle_regs, p->entry_regs);
        emit(e, "bra.uni $exit;");
    }
}

int sm100_emit_mha(Emit *e)
{
    const Plan *p = e->p;
    const Sm100Plan *s = sm100_of(p);
    mha_prologue(e);
    emit_section(e, "prologue: this CTA's tile (one %s per tile); CTAs past the last tile leave",
                 pair(p) ? "CTA pair" : "CTA");
    Reg tile = reg_b32(e, "tile");
    const char *pr = reg(e, "pred", "p_out");
    tile_index(e, tile);
    if (s->packed) {
        emit_note(e, "GQA packed (plan rows): tiles = m-blocks x heads_q / %d x batch", p->cfg.group);
        emit(e, "div.u32 %s, %%heads_q, %d;", reg(e, "b32", "heads_kv"), p->cfg.group);
        emit(e, "mul.lo.u32 %s, %%heads_kv, %%batch;", reg(e, "b32", "hkv_batch"));
        emit(e, "mul.lo.u32 %%num_tiles, %%num_m_blocks, %%hkv_batch;");
        mha_split_tiles(e);
    }
    emit(e, "setp.ge.u32 %s, %s, %%num_tiles;", pr, R(e, tile));
    emit(e, "@%s bra $ret;", pr);
    emit_barrier_init(e);
    emit_tmem_alloc(e);
    emit_dispatch(e);
    emit_label(e, "$softmax");
    emit_softmax(e);
    emit_label(e, "$correction");
    emit_correction(e);
    emit_label(e, "$mma");
    emit_mma(e);
    emit_label(e, "$load");
    emit_load(e);
    if (p->kv_tail) {
        emit_label(e, "$scrub");
        emit_scrub(e);
    }
    emit_label(e, "$exit");
    if (pair(p)) {
        emit_section(e, "the pair leaves together: after the cluster barrier no CTA signals the other and no MMA");
        emit_note(e, "touches either CTA's TMEM, so both MMA warps free it (cta_group::2)");
        op_tc_fence_before(e);
        op_cluster_sync(e);
        emit_note(e, "the warp index again, from %%tid (keeping the prologue's live across setmaxnreg spills it)");
        emit(e, "mov.u32 %%warp, %%tid.x;");
        emit(e, "shr.u32 %%warp, %%warp, 5;");
        emit(e, "setp.ne.u32 %s, %%warp, %d;", pr, s->warp_mma);
        emit(e, "@%s bra $ret;", pr);
        op_tc_fence_after(e);
        smem_base_again(e);
        op_ld_shared_b32(e, reg_find(e, "tmem"), reg_find(e, "smem"), s->off_tmem_slot);
        op_tmem_dealloc(e, 2, reg_find(e, "tmem"), p->tmem_cols);
    }
    emit_label(e, "$ret");
    emit(e, "ret;");
    return e->failed ? -1 : 0;
}
