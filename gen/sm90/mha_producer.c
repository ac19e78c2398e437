/* sm90/mha_producer.c - the producer warpgroup of the sm_90a MHA forward kernel (sm90/mha.c has the
 * kernel's design): one thread issues every TMA load, Q once per tile, then the K and V blocks into the
 * plan's ring (paged: per page; plan pdl early/prefetch kv: before the previous grid's end); and the scrub
 * warp that clears the K/V rows past a sequence's end (plan kv tail). */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../ops.h"
#include "../ops_copy.h"
#include "../softmax.h"
#include "mha90.h"
#include "plan90.h"

/* ------------------------------------------------------------------ */
/* producer                                                             */
/* ------------------------------------------------------------------ */

/* One TMA box per swizzled chunk of a tile. */
static void load_chunks(Emit *e, Reg tmap, Reg dst0, uint32_t chunk_bytes, int chunks, Reg row, Reg head, Reg batch,
                        Reg bar)
{
    Reg dst = reg_b32(e, "ld_dst"), col = reg_b32(e, "ld_col");
    for (int c = 0; c < chunks; c++) {
        emit(e, "add.u32 %s, %s, %u;", R(e, dst), R(e, dst0), c * chunk_bytes);
        emit(e, "mov.u32 %s, %d;", R(e, col), c * e->p->chunk_elems);
        op_tma_load_4d(e, dst, tmap, col, row, head, batch, bar);
    }
}

/* A block of at most this many page boxes has its table entries read ahead (two registers each
 * in the producer, which keeps 24-32: 8 boxes spill). */
enum { PAGED_AHEAD_BOXES = 4 };

static int paged_boxes(const Plan *p) { return p->bn / (p->cfg.page < p->bn ? p->cfg.page : p->bn); }

/* Paged KV with few boxes a block: the coordinates (page, row in page) of the block's
 * min(page, bn)-row boxes, looked up once for K and V both and before the producer waits for a free
 * slot, so that the table read overlaps the wait instead of following it (plan note paged kv). */
static void paged_block_coords(Emit *e, Reg row)
{
    const Plan *p = e->p;
    int box = p->cfg.page < p->bn ? p->cfg.page : p->bn;
    Reg lrow = reg_b32(e, "ld_lrow");
    if (paged_boxes(p) > PAGED_AHEAD_BOXES) return; /* load_paged looks each box up itself */
    emit_note(e, "paged kv: this block's table entries, read before the slot wait, for K and V both");
    for (int i = 0; i < paged_boxes(p); i++) {
        emit(e, "add.u32 %s, %s, %d;", R(e, lrow), R(e, row), i * box);
        paged_coords(e, lrow, reg_b32(e, "ld_page%d", i), reg_b32(e, "ld_prow%d", i));
    }
}

/* Paged KV: the block's boxes, at the coordinates paged_block_coords read ahead or (many boxes)
 * looked up here one by one; box i of chunk c lands at row i x box of the chunk, a whole number of
 * swizzle atoms in. */
static void load_paged(Emit *e, Reg tmap, Reg dst0, uint32_t chunk_bytes, int chunks, Reg row, Reg head, Reg bar)
{
    const Plan *p = e->p;
    int box = p->cfg.page < p->bn ? p->cfg.page : p->bn, ahead = paged_boxes(p) <= PAGED_AHEAD_BOXES;
    Reg dst = reg_b32(e, "ld_dst"), col = reg_b32(e, "ld_col"), lrow = reg_b32(e, "ld_lrow");
    for (int i = 0; i < p->bn / box; i++) {
        Reg page = ahead ? reg_find(e, "ld_page%d", i) : reg_b32(e, "ld_page");
        Reg in_row = ahead ? reg_find(e, "ld_prow%d", i) : reg_b32(e, "ld_prow");
        if (!ahead) {
            emit(e, "add.u32 %s, %s, %d;", R(e, lrow), R(e, row), i * box);
            paged_coords(e, lrow, page, in_row);
        }
        for (int c = 0; c < chunks; c++) {
            emit(e, "add.u32 %s, %s, %u;", R(e, dst), R(e, dst0),
                 c * chunk_bytes + (uint32_t)(i * box * p->swizzle_bytes));
            emit(e, "mov.u32 %s, %d;", R(e, col), c * p->chunk_elems);
            op_tma_load_4d(e, dst, tmap, col, in_row, head, page, bar);
        }
    }
}

/* The Q slot barriers' addresses, once per kernel. */
static void q_barriers(Emit *e)
{
    const Sm90Plan *s = sm90_of(e->p);
    smem_reg(e, "pr_q_empty", s->bar_q_empty);
    smem_reg(e, "pr_q_full", s->bar_q_full);
}

/* Wait until the current Q slot is free: the epilogue q_slots tiles back has stored O from it (the first use of a
 * slot passes at once). */
static void q_slot_wait_free(Emit *e)
{
    Reg par = reg_find(e, "pr_parity"), bar = reg_find(e, "pr_bar");
    ring_free_parity(e, par, reg_find(e, "pr_q_phase"));
    mbar_indexed(e, bar, reg_find(e, "pr_q_empty"), reg_find(e, "pr_q_slot"));
    op_mbar_wait(e, bar, par);
}

/* plan note dynamic tiles: the slot's tile word = t, then its bar_tile arrival (release: the consumers' wait sees
 * the word); the caller has waited for the slot to be free */
static void publish_tile(Emit *e, Reg t)
{
    Reg qslot = reg_find(e, "pr_q_slot"), a = reg_b32(e, "pr_tile_addr");
    emit_note(e, "plan note dynamic tiles: this Q slot's tile word, then its bar_tile");
    addr_indexed(e, a, reg_find(e, "pr_tile_ids"), qslot, 4);
    op_st_shared_b32(e, a, 0, t);
    mbar_indexed(e, a, reg_find(e, "pr_tile_bar"), qslot);
    op_mbar_arrive(e, a);
}

/* plan note dynamic tiles: no tile is left for this CTA. The next Q slot's tile word says so (num_tiles) once the
 * slot is free; then the CTA counts itself done, and the last one zeroes the counter for the next launch (its
 * acq_rel add sees every CTA's claims, each made before that CTA's own add). */
static void dyn_stop(Emit *e)
{
    Reg old = reg_b32(e, "pr_done"), ctr = reg_find(e, "pr_tile_ctr");
    Reg last = reg_pred(e, "pr_last_cta");
    emit_label(e, "$pr_dyn_stop");
    emit_note(e, "plan note dynamic tiles: tell the consumers no tile is left, count this CTA done");
    q_slot_wait_free(e);
    publish_tile(e, reg_find(e, "num_tiles"));
    op_atom_add_u32(e, "acq_rel", old, ctr, 4, 1);
    emit(e, "add.u32 %s, %s, 1;", R(e, old), R(e, old));
    emit(e, "setp.eq.u32 %s, %s, %%grid_ctas;", R(e, last), R(e, old));
    emit_note(e, "the last CTA: no claim of this launch is left, so the counter is zero for the next");
    op_st_relaxed_gpu_v2_u32_zero(e, last, ctr);
    emit(e, "bra.uni $exit;");
}

/* plan note claim runs: tiles of a run (config claim) while more than claim + CLAIM_SINGLE_WAVES waves are left past
 * `from`, else 1, into %pr_claim_n */
static void claim_size(Emit *e, const char *from)
{
    int n = e->p->cfg.claim;
    Reg far = reg_b32(e, "pr_far"), left = reg_b32(e, "pr_left"), more = reg_pred(e, "pr_more");
    emit(e, "mul.lo.u32 %s, %%grid_ctas, %d;", R(e, far), n + CLAIM_SINGLE_WAVES);
    emit(e, "sub.u32 %s, %%num_tiles, %s;", R(e, left), from);
    emit(e, "setp.gt.u32 %s, %s, %s;", R(e, more), R(e, left), R(e, far));
    emit(e, "selp.u32 %s, %d, 1, %s;", R(e, reg_b32(e, "pr_claim_n")), n, R(e, more));
}

/* plan note claim runs: CTA c's first run is tiles F c .. F c + F - 1 (F: claim_size from tile 0), and the counter's
 * claims count from grid x F */
static void claim_first(Emit *e)
{
    emit_note(e, "plan note claim runs: this CTA's first run; the counter's claims start past the grid's first runs");
    claim_size(e, "0");
    Reg n = reg_find(e, "pr_claim_n");
    emit(e, "sub.u32 %s, %s, 1;", R(e, reg_b32(e, "pr_run")), R(e, n));
    emit(e, "mul.lo.u32 %%tile, %%tile, %s;", R(e, n));
    emit(e, "mul.lo.u32 %s, %%grid_ctas, %s;", R(e, reg_b32(e, "pr_base")), R(e, n));
    emit(e, "setp.eq.u32 %s, 0, 0;", R(e, reg_pred(e, "pr_new")));
}

/* plan note claim runs: at a tile's loads out. The run's first tile claims the next run (the atomic's result is read
 * only when this run ends, so its round trip hides behind the run); then the run's next tile, or the claimed run. */
static void claim_next(Emit *e)
{
    char l_claimed[NAME];
    Reg more = reg_pred(e, "pr_more"), fresh = reg_find(e, "pr_new"), run = reg_find(e, "pr_run");
    Reg claim = reg_b32(e, "pr_claim"), n = reg_find(e, "pr_claim_n");
    emit_note(e, "plan note claim runs: the run's first tile claims the next run now");
    emit(e, "@!%s bra %s;", R(e, fresh), new_label(e, l_claimed, sizeof l_claimed, "pr_claimed"));
    claim_size(e, "%tile");
    op_atom_add_u32_reg(e, "relaxed", claim, reg_find(e, "pr_tile_ctr"), 0, n);
    emit_label(e, l_claimed);
    emit_note(e, "plan note claim runs: the run's next tile, or at its end the claimed run");
    emit(e, "setp.ne.u32 %s, %s, 0;", R(e, more), R(e, run));
    emit(e, "@%s add.u32 %%tile, %%tile, 1;", R(e, more));
    emit(e, "@%s sub.u32 %s, %s, 1;", R(e, more), R(e, run), R(e, run));
    emit(e, "@!%s add.u32 %%tile, %s, %s;", R(e, more), R(e, claim), R(e, reg_find(e, "pr_base")));
    emit(e, "@!%s sub.u32 %s, %s, 1;", R(e, more), R(e, run), R(e, n));
    emit(e, "not.pred %s, %s;", R(e, fresh), R(e, more));
}

/* Q of this tile: wait for the slot (the epilogue q_slots tiles back stored O from it), then load;
 * declare: the Q barriers' registers are set up here (the only Q load in the kernel's text). */
static void emit_q_load(Emit *e, Reg qrow, Reg batch, int declare)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    Reg qph = reg_find(e, "pr_q_phase"), qslot = reg_find(e, "pr_q_slot");
    Reg bar = reg_find(e, "pr_bar"), dst = reg_find(e, "pr_dst"), q0 = reg_find(e, "pr_q");
    emit_note(e, "Q: wait for the slot (the epilogue %d tiles back stored O from it), then load", s->q_slots);
    if (declare) q_barriers(e);
    q_slot_wait_free(e);
    if (p->cfg.dynamic) publish_tile(e, reg_find(e, "tile"));
    mbar_indexed(e, bar, reg_find(e, "pr_q_full"), qslot);
    emit_note(e, "plan: tx q = %u bytes", s->tx_q);
    op_mbar_expect_tx(e, bar, s->tx_q);
    addr_indexed(e, dst, q0, qslot, s->tx_q);
    load_chunks(e, reg_find(e, "tmap_q"), dst, s->q_chunk_bytes, p->qk_chunks, qrow, reg_find(e, "head"), batch, bar);
    ring_advance(e, qslot, qph, s->q_slots);
}

/* plan pdl early kv: %pr_pre = the K/V blocks this tile loads before griddepcontrol.wait: on the CTA's
 * first tile, its leading blocks (ascending) that end at or before row seqlen_k - seqlen_q -- the rows
 * the kernel before may not write -- at most the ring's stages; 0 on later tiles. */
static void early_kv_count(Emit *e)
{
    mha_early_kv_count(e, reg_find(e, "pr_pre"), reg_b32(e, "pr_old"));
    emit(e, "mul.lo.u32 %%pr_pre, %%pr_pre, %%pr_first;");
}

/* plan pdl prefetch kv, on the CTA's first tile: an unsplit kernel's Q (mha_prefetch_q), then the blocks after
 * %pr_j in load order into L2 (ascending under early kv, where %pr_j is the next block; else descending from
 * %pr_j - 1). */
static void prefetch_kv(Emit *e, Reg qrow, Reg batch)
{
    const Plan *p = e->p;
    char l_skip[NAME];
    const char *pr = R(e, reg_find(e, "p_role"));
    emit(e, "setp.eq.u32 %s, %%pr_first, 0;", pr);
    emit(e, "@%s bra %s;", pr, new_label(e, l_skip, sizeof l_skip, "pr_no_prefetch"));
    if (mha_prefetch_q(p)) {
        Reg col = reg_b32(e, "pf_col");
        emit_note(e, "plan pdl watch: once the previous grid is done a prefetch only delays the loads behind it");
        op_mbar_test_wait_imm(e, reg_find(e, "p_role"), smem_reg(e, "pr_prev", sm90_of(p)->bar_prev), 0);
        emit(e, "@%s bra %s;", pr, l_skip);
        emit_note(e, "plan pdl prefetch kv: this tile's Q into L2 first (the consumers' first wait), in its load's boxes");
        for (int c = 0; c < p->qk_chunks; c++) {
            emit(e, "mov.u32 %s, %d;", R(e, col), c * p->chunk_elems);
            op_tma_prefetch_4d(e, reg_find(e, "tmap_q"), col, qrow, reg_find(e, "head"), batch);
        }
    }
    MhaKvMap maps[2] = {{reg_find(e, "tmap_k"), 0, p->qk_chunks}, {reg_find(e, "tmap_v"), 0, p->ov_chunks}};
    int up = p->pdl_early_kv != 0;
    mha_prefetch_kv(e, reg_find(e, "pr_j"), up ? 0 : -1, up ? 1 : -1, maps, 2);
    emit_label(e, l_skip);
}

/* plan pdl watch: lane 0 of the watch warp arrives on bar_prev once the previous grid is done */
static void emit_watch(Emit *e)
{
    const char *pr = R(e, reg_find(e, "p_role"));
    emit_label(e, "$watch");
    emit_note(e, "plan pdl watch: lane 0 tells the producer when the previous grid is done");
    emit(e, "setp.ne.u32 %s, %%lane, 0;", pr);
    emit(e, "@%s bra $exit;", pr);
    emit(e, "griddepcontrol.wait;");
    op_mbar_arrive(e, smem_reg(e, "wt_prev", sm90_of(e->p)->bar_prev));
    emit(e, "bra.uni $exit;");
}

/* timeline: the tile's record, its id word, the prologue's stamps and the producer's tile top (TL_P_TILE) */
static void tl_tile_top(Emit *e)
{
    if (!e->p->cfg.timeline) return;
    mha90_tl_record(e);
    mha90_tl_store(e, REG_NONE, TL_ID, reg_find(e, "tl_id"));
    mha90_tl_prologue_store(e);
    mha90_tl_stamp(e, REG_NONE, TL_P_TILE);
}

/* plan pdl early/prefetch kv: once %pr_pre is 0 and Q of this tile is not loaded yet (the CTA's first
 * tile, or a later one), prefetch (first tile), wait for the previous grid (a no-op after the first
 * time) and load Q. */
static void early_q_load(Emit *e, Reg qrow, Reg batch)
{
    char l_skip[NAME];
    const char *pr = R(e, reg_find(e, "p_role"));
    new_label(e, l_skip, sizeof l_skip, "pr_q_later");
    emit(e, "setp.ne.s32 %s, %%pr_pre, 0;", pr);
    emit(e, "@%s bra %s;", pr, l_skip);
    if (e->p->pdl_prefetch_kv) prefetch_kv(e, qrow, batch);
    emit(e, "griddepcontrol.wait;");
    if (e->p->cfg.timeline) { /* TL_P_WAITED: past this wait, where the kernel's roles wait (a no-op after the first) */
        mha90_tl_mark(e, "tl_waited");
        mha90_tl_store(e, REG_NONE, TL_P_WAITED, reg_find(e, "tl_waited"));
    }
    if (mha_prefetch_rereads(e->p)) {
        emit_note(e, "paged prefetch: the tile's sequence length again, now that the previous grid is done");
        tile_coords(e);
        emit(e, "mov.u32 %%pr_j, %%n_end;");
    }
    emit_q_load(e, qrow, batch, 0);
    emit_note(e, "pr_pre = -1: this tile's Q is loaded; pr_first = 0: later tiles load nothing early");
    emit(e, "mov.u32 %%pr_pre, -1;");
    emit(e, "mov.u32 %%pr_first, 0;");
    emit_label(e, l_skip);
}

/* K and V of the block whose first kv row is in row (the sequence's, before varlen's offset) into the ring's
 * next stage: wait for each slot, expect its bytes, load; V completes on the stage's barrier in the array
 * vfull (bar_v_full, or plan kv tail: bar_v_tail for a tail block, which the scrub warp then releases). */
static void emit_kv_loads(Emit *e, Reg row, Reg batch, Reg vfull)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    Reg stage = reg_find(e, "pr_stage"), phase = reg_find(e, "pr_phase"), par = reg_find(e, "pr_parity");
    Reg bar = reg_find(e, "pr_bar"), dst = reg_find(e, "pr_dst");
    if (p->cfg.varlen && !p->cfg.page) emit(e, "add.u32 %s, %s, %%vl_k_start;", R(e, row), R(e, row));
    if (p->cfg.page) paged_block_coords(e, row);
    ring_free_parity(e, par, phase);
    const struct { const char *what; Reg empty, full, base, tmap; uint32_t tx, stage_bytes, chunk_bytes; int chunks; }
        kv[2] = {{"K", reg_find(e, "pr_k_empty"), reg_find(e, "pr_k_full"), reg_find(e, "pr_k"), reg_find(e, "tmap_k"),
                  s->tx_k, s->k_stage_bytes, s->k_chunk_bytes, p->qk_chunks},
                 {"V", reg_find(e, "pr_v_empty"), vfull, reg_find(e, "pr_v"), reg_find(e, "tmap_v"), s->tx_v,
                  s->v_stage_bytes, s->v_chunk_bytes, p->ov_chunks}};
    for (int t = 0; t < 2; t++) {
        emit_note(e, "%s: wait for the ring slot, then load (plan: tx %u bytes)", kv[t].what, kv[t].tx);
        mbar_indexed(e, bar, kv[t].empty, stage);
        op_mbar_wait(e, bar, par);
        mbar_indexed(e, bar, kv[t].full, stage);
        op_mbar_expect_tx(e, bar, kv[t].tx);
        addr_indexed(e, dst, kv[t].base, stage, kv[t].stage_bytes);
        if (p->cfg.page)
            load_paged(e, kv[t].tmap, dst, kv[t].chunk_bytes, kv[t].chunks, row, reg_find(e, "kv_head"), bar);
        else
            load_chunks(e, kv[t].tmap, dst, kv[t].chunk_bytes, kv[t].chunks, row, reg_find(e, "kv_head"), batch, bar);
    }
    ring_advance(e, stage, phase, p->stages);
}

void mha90_producer(Emit *e)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    char l_tile[NAME], l_kv[NAME], l_kv_done[NAME], lbl[NAME];
    emit_section(e, "role producer (warpgroup 0): TMA loads; plan regs %d", s->producer_regs);
    op_setmaxnreg(e, s->producer_regs, p->entry_regs);
    const char *pr = reg(e, "pred", "p_role");
    if (p->kv_tail) {
        emit_note(e, "plan kv tail: warp %d zeroes tail blocks' V rows past the end", s->scrub_warp);
        emit(e, "setp.eq.u32 %s, %%warp, %d;", pr, s->scrub_warp);
        emit(e, "@%s bra $scrub;", pr);
    }
    if (s->watch_warp >= 0) {
        emit(e, "setp.eq.u32 %s, %%warp, %d;", pr, s->watch_warp);
        emit(e, "@%s bra $watch;", pr);
    }
    emit_note(e, "one thread issues every load; the rest of the warpgroup has nothing to do");
    emit(e, "setp.ne.u32 %s, %%thread, 0;", pr);
    emit(e, "@%s bra $exit;", pr);
    mha90_tl_mark(e, "tl_synced");

    Reg stage = reg_b32(e, "pr_stage"), phase = reg_b32(e, "pr_phase");
    Reg qph = reg_b32(e, "pr_q_phase");
    reg_b32(e, "pr_parity");
    const char *j = reg(e, "b32", "pr_j");
    Reg row = reg_b32(e, "pr_row");
    reg_b32(e, "pr_bar");
    reg_b32(e, "pr_dst");
    smem_reg(e, "pr_q", s->off_q);
    smem_reg(e, "pr_k", s->off_k);
    smem_reg(e, "pr_v", s->off_v);
    smem_reg(e, "pr_k_full", s->bar_k_full);
    smem_reg(e, "pr_k_empty", s->bar_k_empty);
    Reg vf = smem_reg(e, "pr_v_full", s->bar_v_full);
    smem_reg(e, "pr_v_empty", s->bar_v_empty);
    Reg vtail = p->kv_tail ? smem_reg(e, "pr_v_tail", s->bar_v_tail) : REG_NONE;
    ring_reset(e, stage, phase);
    emit(e, "mov.u32 %s, 0;", R(e, qph));
    Reg qslot = reg_b32(e, "pr_q_slot");
    emit(e, "mov.u32 %s, 0;", R(e, qslot));
    mha_tile_first(e);
    if (p->cfg.dynamic) {
        emit_note(e, "plan note dynamic tiles: the counter, the slots' tile words and their barriers");
        op_ld_param(e, "u64", reg_b64(e, "pr_tile_ctr"), "tile_ctr");
        smem_reg(e, "pr_tile_ids", s->off_tile_ids);
        smem_reg(e, "pr_tile_bar", s->bar_tile);
        if (p->cfg.claim > 1) claim_first(e);
    }
    if (mha_roles_wait(p)) {
        emit_note(e, "plan pdl early/prefetch kv: pr_first = 1 until the CTA's first tile has loaded its Q (at most "
                  "%d blocks load and %d prefetch before it)", p->pdl_early_kv, p->pdl_prefetch_kv);
        emit(e, "mov.u32 %s, 1;", reg(e, "b32", "pr_first"));
        reg_b32(e, "pr_pre");
        q_barriers(e);
    }

    emit_label(e, new_label(e, l_tile, sizeof l_tile, "pr_tile"));
    emit(e, "setp.ge.u32 %s, %%tile, %%num_tiles;", pr);
    emit(e, "@%s bra %s;", pr, p->cfg.dynamic ? "$pr_dyn_stop" : "$exit");
    tile_coords(e);
    int varlen = p->cfg.varlen;
    char l_next[NAME];
    if (varlen) varlen_skip_tile(e, new_label(e, l_next, sizeof l_next, "pr_next_tile"));
    /* the tensor maps' (row, batch) of this tile's first Q row and of kv row 0: varlen maps are one
     * batch of packed rows, and the sequence's rows start at its cu_seqlens entry */
    Reg qrow = reg_find(e, "m0"), batch = reg_find(e, "bidx");
    if (varlen) {
        qrow = reg_b32(e, "pr_q_row");
        batch = reg_find(e, "vl_zero");
        emit(e, "add.u32 %s, %%vl_q_start, %%m0;", R(e, qrow));
    }

    if (p->pdl_early_kv) {
        early_kv_count(e);
        emit_note(e, "K and V blocks in ascending order (plan pdl early kv: the oldest rows first)");
        emit(e, "mov.u32 %s, %%n_begin;", j);
        early_q_load(e, qrow, batch);
    } else if (p->pdl_prefetch_kv) {
        emit_note(e, "K and V blocks from the last one down (the masked blocks come first)");
        emit(e, "mov.u32 %s, %%n_end;", j);
        emit(e, "mov.u32 %%pr_pre, 0;");
        tl_tile_top(e);
        early_q_load(e, qrow, batch);
        if (p->cfg.timeline) mha90_tl_stamp(e, REG_NONE, TL_P_Q);
    } else {
        tl_tile_top(e);
        emit_q_load(e, qrow, batch, 1);
        if (p->cfg.timeline) mha90_tl_stamp(e, REG_NONE, TL_P_Q);
        emit_note(e, "K and V blocks from the last one down (the masked blocks come first)");
        emit(e, "mov.u32 %s, %%n_end;", j);
    }
    new_label(e, l_kv, sizeof l_kv, "pr_kv");
    const char *kv_end = "%n_end";
    if (p->kv_tail) {
        Reg tail = reg_pred(e, "pr_tail");
        mha_kv_tail(e, tail, row);
        if (p->pdl_early_kv) {
            emit_note(e, "plan kv tail: the tail block (ascending: the last) loads after the loop, on bar_v_tail");
            kv_end = reg(e, "b32", "pr_kv_end");
            emit(e, "selp.u32 %s, 1, 0, %s;", kv_end, R(e, tail));
            emit(e, "sub.s32 %s, %%n_end, %s;", kv_end, kv_end);
        } else {
            emit_note(e, "plan kv tail: the tail block (descending: the first) on bar_v_tail, the scrub warp releases it");
            emit(e, "@!%s bra %s;", R(e, tail), l_kv);
            emit(e, "sub.s32 %s, %s, 1;", j, j);
            emit(e, "mul.lo.u32 %s, %s, %d;", R(e, row), j, p->bn);
            emit_kv_loads(e, row, batch, vtail);
        }
    }
    emit_label(e, l_kv);
    new_label(e, l_kv_done, sizeof l_kv_done, "pr_kv_done");
    if (p->pdl_early_kv) {
        emit(e, "setp.ge.s32 %s, %s, %s;", pr, j, kv_end);
        emit(e, "@%s bra %s;", pr, l_kv_done);
        emit(e, "mul.lo.u32 %s, %s, %d;", R(e, row), j, p->bn);
        emit(e, "add.s32 %s, %s, 1;", j, j);
    } else {
        emit(e, "setp.le.s32 %s, %s, %%n_begin;", pr, j);
        emit(e, "@%s bra %s;", pr, l_kv_done);
        emit(e, "sub.s32 %s, %s, 1;", j, j);
        emit(e, "mul.lo.u32 %s, %s, %d;", R(e, row), j, p->bn);
    }
    emit_kv_loads(e, row, batch, vf);
    if (p->pdl_early_kv) {
        emit_note(e, "plan pdl early kv: the last early block is out: wait for the previous grid, then Q");
        emit(e, "sub.u32 %%pr_pre, %%pr_pre, 1;");
        early_q_load(e, qrow, batch);
    }
    emit(e, "bra.uni %s;", l_kv);
    emit_label(e, l_kv_done);
    if (p->cfg.timeline) mha90_tl_stamp(e, REG_NONE, TL_P_KV_END);
    if (p->kv_tail && p->pdl_early_kv) {
        char l_no_tail[NAME];
        emit_note(e, "plan kv tail: the tail block, last, on bar_v_tail; the scrub warp releases it");
        emit(e, "setp.ge.s32 %s, %s, %%n_end;", pr, j);
        emit(e, "@%s bra %s;", pr, new_label(e, l_no_tail, sizeof l_no_tail, "pr_no_tail"));
        emit(e, "mul.lo.u32 %s, %s, %d;", R(e, row), j, p->bn);
        emit(e, "add.s32 %s, %s, 1;", j, j);
        emit_kv_loads(e, row, batch, vtail);
        emit_label(e, l_no_tail);
    }
    if (varlen) emit_label(e, l_next);
    if (p->cfg.claim > 1) {
        claim_next(e);
    } else if (p->cfg.dynamic) {
        /* claimed as late as the producer can: a claim made as a tile starts commits a CTA to its next tile a whole
         * tile ahead (at the first tile, every CTA at once), which unbalanced long causal grids (B1 H16 S2048 d128
         * 1.67 -> 1.35 x cuDNN, H200 run 63); claiming 1-3 blocks before the loads end measured no better (run 65) */
        emit_note(e, "plan note dynamic tiles: claim the next tile once this one's loads are out, so a CTA whose "
                  "tiles run short claims first");
        op_atom_add_u32(e, "relaxed", reg_b32(e, "pr_claim"), reg_find(e, "pr_tile_ctr"), 0, 1);
        emit_note(e, "plan note dynamic tiles: the claimed tile; the grid's first tiles were taken by index");
        emit(e, "add.u32 %%tile, %%pr_claim, %%grid_ctas;");
    } else {
        mha_tile_next(e);
    }
    emit(e, "bra.uni %s;", l_tile);
    if (p->cfg.dynamic) dyn_stop(e);
    if (s->watch_warp >= 0) emit_watch(e);
    (void)lbl;
}

/* ------------------------------------------------------------------ */
/* scrub warp (plan kv tail)                                            */
/* ------------------------------------------------------------------ */

/* Warp scrub_warp of the producer warpgroup walks the producer's tiles and ring: per tile the ring
 * advances by the tile's blocks, and in a tile whose range ends with its sequence's tail block it waits for
 * that block's V on bar_v_tail (the stage's own: it is reused only after the consumers released the stage,
 * so no phase is skipped), zeroes the rows past the end, and releases the stage on bar_v_full. */
void mha90_scrub(Emit *e)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    char l_tile[NAME], l_next[NAME], l_advance[NAME];
    emit_section(e, "role scrub (warp %d): zeroes a tail block's V rows past the sequence's end (plan kv tail)",
                 s->scrub_warp);
    if (mha_roles_wait(p)) {
        emit_note(e, "plan pdl: its global reads (the sequence's lengths) follow the previous grid");
        emit(e, "griddepcontrol.wait;");
    }
    Reg stage = reg_b32(e, "sc_stage"), tpar = reg_b32(e, "sc_tpar"), n = reg_b32(e, "sc_n");
    Reg ts = reg_b32(e, "sc_ts"), t = reg_b32(e, "sc_t"), par = reg_b32(e, "sc_par"), bar = reg_b32(e, "sc_bar");
    Reg vstage = reg_b32(e, "sc_vstage"), full = reg_b32(e, "sc_full"), tail = reg_pred(e, "sc_tail");
    Reg v0 = smem_reg(e, "sc_v", s->off_v), vf = smem_reg(e, "sc_v_full", s->bar_v_full);
    Reg vt = smem_reg(e, "sc_v_tail", s->bar_v_tail);
    const char *pr = R(e, reg_find(e, "p_role"));
    emit_note(e, "the ring's stage, as the producer's; bit i of sc_tpar: the parity stage i's tail barrier completes next");
    emit(e, "mov.u32 %s, 0;", R(e, stage));
    emit(e, "mov.u32 %s, 0;", R(e, tpar));
    mha_tile_first(e);
    emit_label(e, new_label(e, l_tile, sizeof l_tile, "sc_tile"));
    emit(e, "setp.ge.u32 %s, %%tile, %%num_tiles;", pr);
    emit(e, "@%s bra $exit;", pr);
    tile_coords(e);
    new_label(e, l_next, sizeof l_next, "sc_next_tile");
    if (p->cfg.varlen) varlen_skip_tile(e, l_next);
    emit_note(e, "the producer loads n_end - n_begin blocks of this tile");
    emit(e, "sub.s32 %s, %%n_end, %%n_begin;", R(e, n));
    emit(e, "max.s32 %s, %s, 0;", R(e, n), R(e, n));
    mha_kv_tail(e, tail, t);
    emit(e, "@!%s bra %s;", R(e, tail), new_label(e, l_advance, sizeof l_advance, "sc_advance"));
    if (p->pdl_early_kv) {
        emit_note(e, "ascending (plan pdl early kv): the tail block is the tile's last, stage + n - 1");
        emit(e, "add.u32 %s, %s, %s;", R(e, ts), R(e, stage), R(e, n));
        emit(e, "sub.u32 %s, %s, 1;", R(e, ts), R(e, ts));
        emit_rem_imm(e, R(e, ts), R(e, ts), p->stages);
    } else {
        emit_note(e, "descending: the tail block is the tile's first");
        emit(e, "mov.u32 %s, %s;", R(e, ts), R(e, stage));
    }
    emit(e, "shr.b32 %s, %s, %s;", R(e, par), R(e, tpar), R(e, ts));
    emit(e, "and.b32 %s, %s, 1;", R(e, par), R(e, par));
    mbar_indexed(e, bar, vt, ts);
    op_mbar_wait(e, bar, par);
    emit(e, "shl.b32 %s, 1, %s;", R(e, t), R(e, ts));
    emit(e, "xor.b32 %s, %s, %s;", R(e, tpar), R(e, tpar), R(e, t));
    addr_indexed(e, vstage, v0, ts, s->v_stage_bytes);
    mbar_indexed(e, full, vf, ts);
    mha_scrub_tail(e, vstage, p->ov_chunks, s->v_chunk_bytes, s->bar_scrub, full);
    emit_label(e, l_advance);
    emit(e, "add.u32 %s, %s, %s;", R(e, stage), R(e, stage), R(e, n));
    emit_rem_imm(e, R(e, stage), R(e, stage), p->stages);
    emit_label(e, l_next);
    mha_tile_next(e);
    emit(e, "bra.uni %s;", l_tile);
}
