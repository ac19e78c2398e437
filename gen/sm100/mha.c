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
 * Files: this one has the skeleton (prologue, rings, dispatch) and the load, scrub and MMA roles; every
 * role's start is in sm100/mha_context.c, the softmax warpgroups in sm100/mha_softmax.c, the correction
 * warpgroup and the epilogue in sm100/mha_correction.c, what they share in sm100/mha100.h.
 * Every number comes from the plan (sm100/plan.c); `fa4gen explain` prints it.
 */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../ops.h"
#include "../ops_copy.h"
#include "../score_mod.h"
#include "../softmax.h"
#include "mha100.h"
#include "sm100.h"

/* The ring V loads into: the fused one, or ring 1. */
static int ring_v(const Plan *p) { return sm100_of(p)->fused ? 0 : 1; }

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
        mha100_tile_context(e);
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
    mha100_role_context(e, 1);
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
    mha100_smem_base_again(e);
    mha100_tile_context(e);
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
        emit_rem_imm(e, R(e, slot), R(e, slot), g->slots);
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
    mha100_role_context(e, 0);
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
        emit_div_imm(e, reg(e, "b32", "heads_kv"), "%heads_q", p->cfg.group);
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
    mha100_softmax(e);
    emit_label(e, "$correction");
    mha100_correction(e);
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
        mha100_smem_base_again(e);
        op_ld_shared_b32(e, reg_find(e, "tmem"), reg_find(e, "smem"), s->off_tmem_slot);
        op_tmem_dealloc(e, 2, reg_find(e, "tmem"), p->tmem_cols);
    }
    emit_label(e, "$ret");
    emit(e, "ret;");
    return e->failed ? -1 : 0;
}

