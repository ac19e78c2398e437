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
 */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../ops.h"
#include "../ops_copy.h"
#include "../score_mod.h"
#include "../softmax.h"
#include "plan90.h"

enum { NAME = 32, F32_BYTES = 4 };

/* The tile's coordinates and key range; with the GQA group packed (plan rows) a tile holds a kv
 * head's whole group. */
static void tile_coords(Emit *e)
{
    if (sm90_of(e->p)->packed) mha_tile_coords_packed(e);
    else mha_tile_coords(e);
}

/* The sequence position (relative to m0) of accumulator row half h of this thread: the row
 * itself, or row % seq_rows when the group is packed (plan rows). */
static const char *row_seq(Emit *e, int h)
{
    return R(e, reg_find(e, sm90_of(e->p)->packed ? "cs_seq%d" : "cs_row%d", h));
}

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
    }
    for (int i = 0; i < p->stages; i++) {
        emit_note(e, "plan: ring stage %d", i);
        for (size_t k = 0; k < sizeof kv / sizeof kv[0]; k++) mbar_init(e, b, &kv[k], i);
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

/* Q of this tile: wait for the slot (the epilogue q_slots tiles back stored O from it), then load;
 * declare: the Q barriers' registers are set up here (the only Q load in the kernel's text). */
static void emit_q_load(Emit *e, Reg qrow, Reg batch, int declare)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    Reg qph = reg_find(e, "pr_q_phase"), par = reg_find(e, "pr_parity"), qslot = reg_find(e, "pr_q_slot");
    Reg bar = reg_find(e, "pr_bar"), dst = reg_find(e, "pr_dst"), q0 = reg_find(e, "pr_q");
    emit_note(e, "Q: wait for the slot (the epilogue %d tiles back stored O from it), then load", s->q_slots);
    if (declare) q_barriers(e);
    ring_free_parity(e, par, qph);
    mbar_indexed(e, bar, reg_find(e, "pr_q_empty"), qslot);
    op_mbar_wait(e, bar, par);
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

/* plan pdl prefetch kv, on the CTA's first tile: the blocks after %pr_j in load order into L2
 * (ascending under early kv, where %pr_j is the next block; else descending from %pr_j - 1). */
static void prefetch_kv(Emit *e)
{
    const Plan *p = e->p;
    char l_skip[NAME];
    const char *pr = R(e, reg_find(e, "p_role"));
    emit(e, "setp.eq.u32 %s, %%pr_first, 0;", pr);
    emit(e, "@%s bra %s;", pr, new_label(e, l_skip, sizeof l_skip, "pr_no_prefetch"));
    MhaKvMap maps[2] = {{reg_find(e, "tmap_k"), 0, p->qk_chunks}, {reg_find(e, "tmap_v"), 0, p->ov_chunks}};
    int up = p->pdl_early_kv != 0;
    mha_prefetch_kv(e, reg_find(e, "pr_j"), up ? 0 : -1, up ? 1 : -1, maps, 2);
    emit_label(e, l_skip);
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
    if (e->p->pdl_prefetch_kv) prefetch_kv(e);
    emit(e, "griddepcontrol.wait;");
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

static void emit_producer(Emit *e)
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
    emit_note(e, "one thread issues every load; the rest of the warpgroup has nothing to do");
    emit(e, "setp.ne.u32 %s, %%thread, 0;", pr);
    emit(e, "@%s bra $exit;", pr);

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
    emit(e, "mov.u32 %s, %%ctaid.x;", reg(e, "b32", "tile"));
    if (mha_roles_wait(p)) {
        emit_note(e, "plan pdl early/prefetch kv: pr_first = 1 until the CTA's first tile has loaded its Q (at most "
                  "%d blocks load and %d prefetch before it)", p->pdl_early_kv, p->pdl_prefetch_kv);
        emit(e, "mov.u32 %s, 1;", reg(e, "b32", "pr_first"));
        reg_b32(e, "pr_pre");
        q_barriers(e);
    }

    emit_label(e, new_label(e, l_tile, sizeof l_tile, "pr_tile"));
    emit(e, "setp.ge.u32 %s, %%tile, %%num_tiles;", pr);
    emit(e, "@%s bra $exit;", pr);
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
        early_q_load(e, qrow, batch);
    } else {
        emit_q_load(e, qrow, batch, 1);
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
    emit(e, "add.u32 %%tile, %%tile, %%grid_ctas;");
    emit(e, "bra.uni %s;", l_tile);
    (void)lbl;
}

/* ------------------------------------------------------------------ */
/* scrub warp (plan kv tail)                                            */
/* ------------------------------------------------------------------ */

/* Warp scrub_warp of the producer warpgroup walks the producer's tiles and ring: per tile the ring
 * advances by the tile's blocks, and in a tile whose range ends with its sequence's tail block it waits for
 * that block's V on bar_v_tail (the stage's own: it is reused only after the consumers released the stage,
 * so no phase is skipped), zeroes the rows past the end, and releases the stage on bar_v_full. */
static void emit_scrub(Emit *e)
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
    emit(e, "mov.u32 %s, %%ctaid.x;", reg(e, "b32", "tile"));
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
        emit(e, "rem.u32 %s, %s, %d;", R(e, ts), R(e, ts), p->stages);
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
    emit(e, "rem.u32 %s, %s, %d;", R(e, stage), R(e, stage), p->stages);
    emit_label(e, l_next);
    emit(e, "add.u32 %%tile, %%tile, %%grid_ctas;");
    emit(e, "bra.uni %s;", l_tile);
}

/* ------------------------------------------------------------------ */
/* consumer                                                             */
/* ------------------------------------------------------------------ */

/* The wgmma shapes and accumulator fragment the consumers are written for: the plan's. */
static Sm90Frag sm90_frag(const Plan *p) { return sm90_of(p)->frag; }

enum { MAX_HALVES = 2 };

/* S register of row half h (0: row l/4, 1: row l/4 + 8), column pair q, element x. */
static int s_index(int q, int h, int x) { return 2 * MAX_HALVES * q + 2 * h + x; }

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

static void emit_pv(Emit *e, Reg stage)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    Reg addr = reg_b32(e, "cs_v_addr");
    Reg vdesc = reg_b64(e, "cs_v_desc"), vd = reg_b64(e, "cs_vd");
    uint32_t sw = (uint32_t)p->swizzle_bytes;
    Sm90Frag f = sm90_frag(p);
    emit_note(e, "O += P V: %d x wgmma m64n%dk16 RS, V MN-major (LBO = chunk stride %u, SBO = 8 rows)", f.pv_steps,
              p->ov, s->v_chunk_bytes);
    addr_indexed(e, addr, reg_find(e, "cs_v0"), stage, s->v_stage_bytes);
    op_sm90_desc(e, vdesc, addr, s->v_chunk_bytes, 8 * sw, p->swizzle_bytes);
    op_wgmma_fence(e);
    for (int kb = 0; kb < f.pv_steps; kb++) {
        Reg ap[4];
        for (int i = 0; i < f.a_regs; i++) ap[i] = reg_at(e, reg_find(e, "pa"), f.a_regs * kb + i);
        emit(e, "add.s64 %s, %s, %u;", R(e, vd), R(e, vdesc), op_desc_delta((uint32_t)kb * (uint32_t)f.k_step * sw));
        op_wgmma_rs(e, p->ov, p->cfg.dtype, reg_find(e, "o"), ap, vd, 1);
    }
    op_wgmma_commit(e);
}

/* score_mod on this thread's scores of block %cs_j (plan note score_mod), before the mask:
 * element (h, q, x) is row m0 + cs_row<h>, key j*bn + 2*(lane%4) + 8q + x, both clamped into
 * the problem (what lies outside is masked afterwards). */
static void emit_score_mod(Emit *e, Reg row[MAX_HALVES][128])
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
    for (int c = 0; c < p->bn / 8; c++)
        for (int x = 0; x < 2; x++) {
            emit(e, "add.u32 %s, %s, %d;", R(e, k), R(e, k0), 8 * c + x);
            emit(e, "min.u32 %s, %s, %s;", R(e, k), R(e, k), R(e, klast));
            for (int h = 0; h < 2; h++)
                score_mod_site(e, row[h][2 * c + x], reg_find(e, "bidx"), reg_find(e, "head"), q[h], k);
        }
}

/* Paged KV: the keys of a page with no valid table entry (bit i of %pg_bad, page i of the block in
 * min(page, bn)-row boxes) are hidden. A thread's columns 8q + 2*(lane%4) + x lie in box 8q / box. */
static void emit_page_mask(Emit *e, Reg row[MAX_HALVES][128])
{
    const Plan *p = e->p;
    int box = p->cfg.page < p->bn ? p->cfg.page : p->bn;
    Reg t = reg_b32(e, "pg_t"), bad = reg_pred(e, "pg_hide");
    emit_note(e, "paged kv: hide the keys of pages without a valid table entry");
    for (int i = 0; i < p->bn / box; i++) {
        emit(e, "and.b32 %s, %%pg_bad, %d;", R(e, t), 1 << i);
        emit(e, "setp.ne.u32 %s, %s, 0;", R(e, bad), R(e, t));
        for (int q = i * box / 8; q < (i + 1) * box / 8; q++)
            for (int h = 0; h < 2; h++)
                for (int x = 0; x < 2; x++) emit(e, "@%s mov.f32 %s, %s;", R(e, bad), R(e, row[h][2 * q + x]), PTX_NEG_INF);
    }
}

/* Online softmax of one S block; masked blocks first set hidden scores to -inf. */
static void emit_softmax(Emit *e, int masked)
{
    const Plan *p = e->p;
    Sm90Frag f = sm90_frag(p);
    int wl, wr, n = f.s_regs / f.halves; /* registers per row half */
    mask_bounds(&p->cfg, &wl, &wr);
    Reg s_acc = reg_find(e, "s"), row[MAX_HALVES][128];
    for (int h = 0; h < f.halves; h++)
        for (int q = 0; q < p->bn / 8; q++)
            for (int x = 0; x < 2; x++) row[h][2 * q + x] = reg_at(e, s_acc, s_index(q, h, x));
    if (e->mod) emit_score_mod(e, row);
    if (p->cfg.softcap) {
        emit_note(e, "plan note softcap: S = tanh(S softcap_scale); scale_log2 is cap log2 e");
        for (int h = 0; h < 2; h++) sfx_softcap(e, row[h], n);
    }
    if (p->cfg.alibi) {
        Reg d0 = reg_b32(e, "cs_al_d0"), df = reg_f32(e, "cs_al_df"), t = reg_f32(e, "cs_al_t");
        int col[128];
        for (int q = 0; q < p->bn / 8; q++)
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
            for (int q = 0; q < p->bn / 8; q++)
                for (int x = 0; x < 2; x++) sfx_mask(e, row[h][2 * q + x], 8 * q + x, thi, tlo);
        }
        if (p->cfg.page) emit_page_mask(e, row);
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
static void emit_convert_p(Emit *e)
{
    const Plan *p = e->p;
    emit_note(e, "P to the A-fragment layout of the PV wgmma: same registers, no shuffles");
    Sm90Frag f = sm90_frag(p);
    for (int kb = 0; kb < f.pv_steps; kb++)
        for (int i = 0; i < f.a_regs; i++) {
            int j = f.a_regs * kb + i; /* P register j packs S registers 2j, 2j + 1 */
            Reg s_acc = reg_find(e, "s");
            op_cvt_pack(e, p->cfg.dtype, reg_at(e, reg_find(e, "pa"), j), reg_at(e, s_acc, 2 * j + 1),
                        reg_at(e, s_acc, 2 * j));
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

/* Normalise O, write LSE, stage O (swizzled) over this consumer's Q rows and TMA-store it. */
static void emit_epilogue(Emit *e)
{
    const Plan *p = e->p;
    const Sm90Plan *s = sm90_of(p);
    char lbl[NAME], l_nolse[NAME];
    int sw = p->swizzle_bytes, units = sw / 16;
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
    char l_rows[NAME], l_done[NAME];
    if (p->cfg.varlen) {
        Reg end = reg_b32(e, "cs_oend");
        emit_note(e, "varlen: a block that runs past its sequence's end is stored row by row (plan note varlen o)");
        emit(e, "mad.lo.u32 %s, %%cs_w, %d, %%m0;", R(e, end), s->mma_m);
        emit(e, "add.u32 %s, %s, %d;", R(e, end), R(e, end), s->mma_m);
        emit(e, "setp.gt.u32 %s, %s, %%seqlen_q;", R(e, pr), R(e, end));
        emit(e, "@%s bra %s;", R(e, pr), new_label(e, l_rows, sizeof l_rows, "cs_o_rows"));
    }

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
    Reg f0 = reg_f32(e, "cs_f0"), f1 = reg_f32(e, "cs_f1"), pk = reg_b32(e, "cs_pack");
    int q_per_chunk = p->chunk_elems / 8;
    for (int q = 0; q < p->ov / 8; q++)
        for (int h = 0; h < 2; h++) {
            emit(e, "mul.f32 %s, %%o%d, %%cs_inv%d;", R(e, f0), s_index(q, h, 0), h);
            emit(e, "mul.f32 %s, %%o%d, %%cs_inv%d;", R(e, f1), s_index(q, h, 1), h);
            op_cvt_pack(e, p->cfg.dtype, pk, f1, f0);
            op_st_shared_b32(e, reg_find(e, "cs_oaddr%d_%d", h, q % q_per_chunk),
                             (uint32_t)(q / q_per_chunk) * s->q_chunk_bytes, pk);
        }
    op_fence_proxy_async(e);
    emit_note(e, "plan: named barrier epilogue<consumer> (%d + consumer)", s->bar_epilogue0);
    op_bar_sync_at(e, REG_NONE, reg_find(e, "cs_epi_bar"), named_bar_threads(p, s->bar_epilogue0));
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
    emit_note(e, "the Q slot is free once the store has read smem");
    op_bulk_wait_read(e, 0);
    mbar_indexed(e, src_, reg_find(e, "cs_q_empty"), reg_find(e, "cs_q_slot"));
    op_mbar_arrive(e, src_);
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
static void emit_epilogue_split(Emit *e)
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
        emit(e, "div.u32 %s, %s, %d;", R(e, seq), R(e, j), p->cfg.group);
        emit(e, "rem.u32 %s, %s, %d;", R(e, hq), R(e, j), p->cfg.group);
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
static void emit_epilogue_cluster(Emit *e)
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
            emit(e, "rem.u32 %s, %%cs_row%d, %d;", reg(e, "b32", h ? "cs_seq1" : "cs_seq0"), h, s->seq_rows);
            emit(e, "div.u32 %s, %%cs_row%d, %d;", reg(e, "b32", h ? "cs_hoff1" : "cs_hoff0"), h, s->seq_rows);
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
    emit_note(e, "this consumer's Q rows: the wgmma A descriptor (K-major, SBO = 8 rows)");
    emit(e, "mad.lo.u32 %s, %s, %d, %%cs_q0;", reg(e, "b32", "cs_qrows"), w, s->mma_m * sw);
    emit(e, "mov.b32 %s, 0x%08X;", reg(e, "b32", "cs_desc_hi"), sm90_desc_hi(8u * (uint32_t)sw, sw));
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
    emit_pv(e, stage);
}

static void emit_release(Emit *e, Reg empty, Reg stage)
{
    Reg bar = reg_b32(e, "cs_bar");
    mbar_indexed(e, bar, empty, stage);
    op_mbar_arrive_if(e, reg_find(e, "cs_lane0"), bar);
}

/* Softmax of S for block %cs_j, the masked variant for blocks that need it. */
static void emit_softmax_block(Emit *e)
{
    char l_masked[NAME], l_sfx[NAME];
    emit(e, "@%%cs_need_mask bra %s;", new_label(e, l_masked, sizeof l_masked, "cs_masked"));
    new_label(e, l_sfx, sizeof l_sfx, "cs_softmax_done");
    emit_softmax(e, 0);
    emit(e, "bra.uni %s;", l_sfx);
    emit_label(e, l_masked);
    emit_note(e, "this thread's row bounds relative to its first key in the block");
    Reg kv0 = reg_b32(e, "cs_kv0");
    emit(e, "mul.lo.u32 %s, %%cs_j, %d;", R(e, kv0), e->p->bn);
    emit_row_bounds(e, kv0);
    emit_softmax(e, 1);
    emit_label(e, l_sfx);
}

/* The slot just consumed becomes the one whose V the next PV reads; step the ring. */
static void emit_next_slot(Emit *e)
{
    emit(e, "mov.u32 %%cs_pv_stage, %%cs_stage;");
    emit(e, "mov.u32 %%cs_pv_phase, %%cs_phase;");
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
    op_wgmma_wait(e, 0);
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
    emit_note(e, "S is ready once the older group (QK) retires; PV stays in flight");
    op_wgmma_wait(e, 1);
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
    emit_turn_begin(e);
    emit_issue_pv(e);
    emit_turn_end(e);
    op_wgmma_wait(e, 0);
    emit_release(e, reg_find(e, "cs_v_empty"), reg_find(e, "cs_pv_stage"));
    emit_label(e, l_empty);
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
    emit(e, "mov.u32 %s, %%ctaid.x;", reg(e, "b32", "tile"));

    emit_label(e, new_label(e, l_tile, sizeof l_tile, "cs_tile"));
    emit(e, "setp.ge.u32 %s, %%tile, %%num_tiles;", pr);
    emit(e, "@%s bra $cs_exit;", pr);
    tile_coords(e);
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
    for (int i = 0; i < f.o_regs; i++) emit(e, "mov.f32 %%o%d, 0f00000000;", i);
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
    emit_mainloop(e);
    if (p->cfg.cluster_split) emit_epilogue_cluster(e);
    else if (p->cfg.split) emit_epilogue_split(e);
    else emit_epilogue(e);
    ring_advance(e, qslot, qph, s->q_slots);
    if (p->cfg.varlen) emit_label(e, l_next);
    emit(e, "add.u32 %%tile, %%tile, %%grid_ctas;");
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
    mha_prologue(e);
    emit_barrier_init(e);
    emit_section(e, "role dispatch: warpgroup 0 produces, the others consume");
    const char *p = reg(e, "pred", "p_consumer");
    emit(e, "setp.ge.u32 %s, %%wg, 1;", p);
    emit(e, "@%s bra $consumer;", p);
    emit_producer(e);
    if (e->p->kv_tail) {
        emit_label(e, "$scrub");
        emit_scrub(e);
    }
    emit_label(e, "$consumer");
    emit_consumer(e);
    emit_label(e, "$exit");
    emit(e, "ret;");
    return e->failed ? -1 : 0;
}
