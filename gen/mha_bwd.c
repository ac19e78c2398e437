/* mha_bwd.c - the attention backward's target-independent parts (mha_bwd.h): the workspace and dQ-block layout,
 * and the two plain SIMT kernels around the main one (the three kinds' canonical keys: config.c):
 *
 *   mha-bwd-pre  one CTA per (m-block, head, batch), bm query rows: D = rowsum(dO * O) (f32), nl2 = -LSE log2 e
 *                (-inf where LSE is -inf: P = 0 there; sink=1: the LSE with the sink logit added to its sum), D = 0
 *                and nl2 = -inf for the block's rows past the sequence; zeroes the block's dQ accumulator; sink=1:
 *                writes -sum p_sink D over its rows (p_sink = e^(sink - LSE_full)), the dsink partial.
 *   mha-bwd-dq   one CTA per (m-block, head, batch): dQ = scale x the block's accumulator (its permuted layout,
 *                mha_bwd.h) to the caller's dtype and strides, rows inside the sequence only; sink=1: the CTA of
 *                (m-block 0, batch 0) of each head writes dsink[head] = the sum of that head's partials.
 *
 * Both are memory bound and plain: 128 threads, a lane group of depth / 8 lanes per query row (16-byte
 * loads of O and dO), unrolled over the block's rows. */
#include <stdio.h>
#include <string.h>

#include "kernel.h"
#include "mha_bwd.h"
#include "ops.h"
#include "ops_bwd.h"
#include "ops_copy.h"
#include "softmax.h"

enum { NAME = 32, AUX_THREADS = 128, AUX_WARPS = AUX_THREADS / 32, ROW_ELEMS = 8 /* one 16-byte load */ };

/* ---------------------------------------------------------------- contract */

int bwd_dq_split(int bm, int bn, int depth, int *tiles_m, int *tiles_n, int *dq_n)
{
    int consumers = bwd_consumers(bn, depth);
    if (bm % BWD_MMA_M || bn % BWD_MMA_M || consumers < 1) return -1;
    int tm = bm / BWD_MMA_M;
    if (consumers % tm) return -1;
    int tn = consumers / tm;
    if (depth % (tn * 16)) return -1;
    *tiles_m = tm, *tiles_n = tn, *dq_n = depth / tn;
    return 0;
}

static uint64_t align16(uint64_t x) { return (x + BWD_ALIGN - 1) / BWD_ALIGN * BWD_ALIGN; }

BwdWorkspace bwd_workspace(int varlen, int batch, int heads_q, int seqlen_q, int max_seqlen_q, int depth, int bm,
                           int sink, int stats_in_dq, int deterministic)
{
    BwdWorkspace w;
    memset(&w, 0, sizeof w);
    if (bm <= 0) return w;
    uint64_t b = (uint64_t)batch, h = (uint64_t)heads_q, u = (uint64_t)bm;
    w.m_blocks = ((uint64_t)max_seqlen_q + u - 1) / u;
    w.q_rows = varlen ? ((uint64_t)seqlen_q + b * u + u - 1) / u * u : w.m_blocks * u;
    uint64_t bws = varlen ? 1 : b, rows = bws * h * w.q_rows;
    uint64_t accum = align16(rows * (uint64_t)depth * BWD_F32);
    w.stats_bytes = 2 * align16(rows * BWD_F32);
    w.stats_in_dq = stats_in_dq;
    w.dq_accum = 0;
    w.dpsum = stats_in_dq ? 0 : accum;
    w.nlse2 = w.dpsum + align16(rows * BWD_F32);
    w.sink_part = stats_in_dq ? accum : w.nlse2 + align16(rows * BWD_F32);
    w.dq_sem = w.sink_part + (sink ? align16(b * h * w.m_blocks * BWD_F32) : 0);
    w.bytes = w.dq_sem + (deterministic ? align16(rows / u * BWD_F32) : 0);
    return w;
}

BwdTail bwd_tail_pick(uint64_t tiles, int slots, int iters, int bn, int depth)
{
    BwdTail t;
    memset(&t, 0, sizeof t);
    t.grid = tiles;
    if (slots < 1 || iters < BWD_TAIL_MIN_ITERS || tiles < (uint64_t)slots || tiles % (uint64_t)slots == 0) return t;
    uint64_t s = (uint64_t)slots, waves = tiles / s, rest = tiles % s, whole = (uint64_t)iters + BWD_TAIL_CTA_ITERS;
    uint64_t base = (waves + 1) * whole, best = base * (1000 - BWD_TAIL_MIN_GAIN_PERMILLE) / 1000 + 1;
    for (uint64_t extra = 0; extra <= 1 && extra < waves + 1; extra++) {
        uint64_t split = rest + extra * s;
        for (uint64_t parts = 2; parts <= BWD_TAIL_MAX_PARTS; parts++) {
            uint64_t part = ((uint64_t)iters + parts - 1) / parts + BWD_TAIL_CTA_ITERS + BWD_TAIL_SUM_ITERS;
            uint64_t span = (waves - extra) * whole + (split * parts + s - 1) / s * part;
            if (span >= best) continue;
            best = span;
            t.first = (uint32_t)(tiles - split), t.parts = (uint32_t)parts, t.tiles = (uint32_t)split;
        }
    }
    if (!t.parts) return t;
    t.grid = t.first + (uint64_t)t.tiles * t.parts;
    t.bytes = (uint64_t)t.tiles * (bwd_tail_slot_bytes(bn, depth) + BWD_ALIGN);
    return t;
}

void bwd_aux_config(const Config *m, Kind kind, int sink, Config *out)
{
    config_init(out);
    out->kind = kind;
    out->target = m->target;
    out->dtype = m->dtype;
    out->qk_depth = out->ov_depth = m->qk_depth;
    out->bm = m->bm;
    out->bn = kind == KIND_MHA_BWD_DQ ? m->bn : 0;
    out->varlen = m->varlen;
    out->sink = sink;
    out->deterministic = kind == KIND_MHA_BWD_PRE ? m->deterministic : 0;
    out->tail_split = kind == KIND_MHA_BWD_PRE ? m->tail_split : 0;
}

/* The block layout's float index of (row r, column c) = row part + column part (mha_bwd.h): w = tm + tiles_m tn,
 * thread t = 32 (rr / 16) + 4 (rr % 8) + (cc % 8) / 2, register 4 (cc / 8) + 2 ((rr / 8) % 2) + cc % 2, for rr, cc
 * the row and column inside the 64 x dq_n tile (tm, tn). */
uint32_t bwd_dq_row_part(int bm, int bn, int depth, int r)
{
    int tm, tn, dq_n;
    if (bwd_dq_split(bm, bn, depth, &tm, &tn, &dq_n)) return 0;
    int t = r / BWD_MMA_M, rr = r % BWD_MMA_M;
    return (uint32_t)((t * (dq_n / 8) * BWD_WG + 32 * (rr / 16) + 4 * (rr % 8)) * 4 + 2 * ((rr / 8) % 2));
}

uint32_t bwd_dq_col_part(int bm, int bn, int depth, int c)
{
    int tm, tn, dq_n;
    if (bwd_dq_split(bm, bn, depth, &tm, &tn, &dq_n)) return 0;
    int t = c / dq_n, cc = c % dq_n;
    return (uint32_t)(((tm * t * (dq_n / 8) + cc / 8) * BWD_WG + (cc % 8) / 2) * 4 + cc % 2);
}

void bwd_dq_row_part_reg(Emit *e, Reg dst, Reg r)
{
    const Plan *p = e->p;
    int tm, tn, dq_n;
    bwd_dq_split(p->bm, p->bn, p->qk, &tm, &tn, &dq_n);
    Reg t = reg_b32(e, "dqi_t");
    emit_div_imm(e, R(e, t), R(e, r), BWD_MMA_M);
    emit(e, "mul.lo.u32 %s, %s, %d;", R(e, dst), R(e, t), dq_n / 8 * BWD_WG * 4);
    emit_rem_imm(e, R(e, t), R(e, r), BWD_MMA_M);
    emit(e, "shr.u32 %s, %s, 4;", R(e, t), R(e, t));
    emit(e, "mad.lo.u32 %s, %s, 128, %s;", R(e, dst), R(e, t), R(e, dst));
    emit(e, "and.b32 %s, %s, 7;", R(e, t), R(e, r));
    emit(e, "mad.lo.u32 %s, %s, 16, %s;", R(e, dst), R(e, t), R(e, dst));
    emit(e, "shr.u32 %s, %s, 3;", R(e, t), R(e, r));
    emit(e, "and.b32 %s, %s, 1;", R(e, t), R(e, t));
    emit(e, "mad.lo.u32 %s, %s, 2, %s;", R(e, dst), R(e, t), R(e, dst));
}

void bwd_dq_col_part_reg(Emit *e, Reg dst, Reg c)
{
    const Plan *p = e->p;
    int tm, tn, dq_n;
    bwd_dq_split(p->bm, p->bn, p->qk, &tm, &tn, &dq_n);
    Reg t = reg_b32(e, "dqi_t"), cc = reg_b32(e, "dqi_cc");
    emit_div_imm(e, R(e, t), R(e, c), dq_n);
    emit(e, "mul.lo.u32 %s, %s, %d;", R(e, dst), R(e, t), tm * (dq_n / 8) * BWD_WG * 4);
    emit_rem_imm(e, R(e, cc), R(e, c), dq_n);
    emit(e, "shr.u32 %s, %s, 3;", R(e, t), R(e, cc));
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, dst), R(e, t), BWD_WG * 4, R(e, dst));
    emit(e, "and.b32 %s, %s, 7;", R(e, t), R(e, cc));
    emit(e, "shr.u32 %s, %s, 1;", R(e, t), R(e, t));
    emit(e, "mad.lo.u32 %s, %s, 4, %s;", R(e, dst), R(e, t), R(e, dst));
    emit(e, "and.b32 %s, %s, 1;", R(e, t), R(e, cc));
    emit(e, "add.u32 %s, %s, %s;", R(e, dst), R(e, dst), R(e, t));
}

/* ---------------------------------------------------------------- the main kernels' tile (every target) */

/* dst = %lo when x <= 0, else (x + round) / div: the clamped block counts of the key ranges. */
static void clamp_div(Emit *e, Reg dst, Reg x, int round, int div)
{
    Reg p = reg_pred(e, "cd_neg");
    emit(e, "setp.le.s32 %s, %s, 0;", R(e, p), R(e, x));
    emit(e, "add.s32 %s, %s, %d;", R(e, dst), R(e, x), round);
    emit_div_imm(e, R(e, dst), R(e, dst), (unsigned)div); /* kept only where x > 0: x + round is exact as unsigned */
    emit(e, "selp.b32 %s, 0, %s, %s;", R(e, dst), R(e, dst), R(e, p));
}

/* varlen: start and length of sequence %bidx in cu (clamped into [0, total]). */
static void sequence_rows(Emit *e, Reg cu, Reg total, Reg start, Reg len)
{
    Reg a = reg_b64(e, "vl_addr"), end = reg_b32(e, "vl_end");
    emit(e, "mul.wide.u32 %s, %%bidx, 4;", R(e, a));
    emit(e, "add.s64 %s, %s, %s;", R(e, a), R(e, a), R(e, cu));
    op_ld_global(e, REG_NONE, "s32", start, a, 0);
    op_ld_global(e, REG_NONE, "s32", end, a, 4);
    emit(e, "max.s32 %s, %s, 0;", R(e, start), R(e, start));
    emit(e, "min.u32 %s, %s, %s;", R(e, start), R(e, start), R(e, total));
    emit(e, "max.s32 %s, %s, 0;", R(e, end), R(e, end));
    emit(e, "min.u32 %s, %s, %s;", R(e, end), R(e, end), R(e, total));
    emit(e, "max.u32 %s, %s, %s;", R(e, end), R(e, end), R(e, start));
    emit(e, "sub.u32 %s, %s, %s;", R(e, len), R(e, end), R(e, start));
}

/* tail_split=1 (mha_bwd.h "Tail split"): CTA t past p_tail_first takes part (t - first) % parts of the tile
 * first + (t - first) / parts; t becomes that tile. Defines %tail_in (1: a part of a split tile), %tail_part,
 * %tail_slot (the tile's slot in the partials' area) and %tail_n (its parts; 1 outside the split). */
static void tail_tile(Emit *e, Reg t)
{
    Reg in = reg_pred(e, "tail_in"), part = reg_b32(e, "tail_part"), slot = reg_b32(e, "tail_slot");
    Reg np = reg_b32(e, "tail_n"), x = reg_b32(e, "tt_x"), z = reg_pred(e, "tt_z");
    emit_note(e, "plan note tail split: CTAs from p_tail_first on are parts of the tiles from p_tail_first on");
    emit(e, "setp.ge.u32 %s, %s, %%tail_first;", R(e, z), R(e, t));
    emit(e, "setp.ne.and.u32 %s, %%tail_parts, 0, %s;", R(e, in), R(e, z));
    emit(e, "mov.u32 %s, 0;", R(e, part));
    emit(e, "mov.u32 %s, 0;", R(e, slot));
    emit(e, "mov.u32 %s, 1;", R(e, np));
    emit(e, "@%s sub.u32 %s, %s, %%tail_first;", R(e, in), R(e, x), R(e, t));
    emit(e, "@%s rem.u32 %s, %s, %%tail_parts;", R(e, in), R(e, part), R(e, x));
    emit(e, "@%s div.u32 %s, %s, %%tail_parts;", R(e, in), R(e, slot), R(e, x));
    emit(e, "@%s mov.u32 %s, %%tail_parts;", R(e, in), R(e, np));
    emit(e, "@%s add.u32 %s, %s, %%tail_first;", R(e, in), R(e, t), R(e, slot));
}

/* tail_split=1: this part's iterations [%it0, %iters) = [part x iters / parts, (part + 1) x iters / parts). */
static void tail_range(Emit *e)
{
    Reg it0 = reg_b32(e, "it0"), it = reg_find(e, "iters"), x = reg_b32(e, "tt_x");
    emit_note(e, "plan note tail split: this part's iterations");
    emit(e, "mul.lo.u32 %s, %%tail_part, %s;", R(e, it0), R(e, it));
    emit(e, "div.u32 %s, %s, %%tail_n;", R(e, it0), R(e, it0));
    emit(e, "add.u32 %s, %%tail_part, 1;", R(e, x));
    emit(e, "mul.lo.u32 %s, %s, %s;", R(e, x), R(e, x), R(e, it));
    emit(e, "div.u32 %s, %s, %%tail_n;", R(e, it), R(e, x));
}

/* Defines %bidx %kvh %n0 (the tile's first key) %q_start %k_start %b_map (the maps' batch coordinate)
 * %pad (the sequence's first padded workspace row) %kv_off = seqlen_k - seqlen_q, and the m-blocks:
 * [m_begin, m_end) see a key of the tile, [full_lo, full_hi) need no mask, %nm = m_end - m_begin,
 * %iters = group x nm. A tile past its sequence's keys (varlen) exits here, before any barrier. */
void bwd_tile_coords(Emit *e)
{
    const Plan *p = e->p;
    /* the sm100a CTA pair (cluster of 2): the tile is the pair's 2 bn keys, CTA r takes keys bn r.. of it */
    int pair = p->cluster[0] == 2, bm = p->bm, bn = p->bn * (pair ? 2 : 1), wl, wr;
    mask_bounds(&p->cfg, &wl, &wr);
    Reg nb = reg_b32(e, "n_blocks"), t = reg_b32(e, "tc_t"), n = reg_b32(e, "n_blk"), hkv = reg_b32(e, "heads_kv");
    Reg bidx = reg_b32(e, "bidx"), kvh = reg_b32(e, "kvh"), n0 = reg_b32(e, "n0"), x = reg_b32(e, "tc_x");
    Reg qs = reg_b32(e, "q_start"), ks = reg_b32(e, "k_start"), bmap = reg_b32(e, "b_map"), pad = reg_b32(e, "pad");
    Reg off = reg_b32(e, "kv_off"), mb = reg_b32(e, "m_begin"), me = reg_b32(e, "m_end"), nmq = reg_b32(e, "m_blocks");
    Reg flo = reg_b32(e, "full_lo"), fhi = reg_b32(e, "full_hi"), nm = reg_b32(e, "nm"), it = reg_b32(e, "iters");
    Reg pr = reg_pred(e, "tc_p");
    emit_section(e, "prologue: the tile (plan grid: kv blocks ascending inside a (batch, kv head))");
    emit(e, "add.u32 %s, %%seqlen_k, %d;", R(e, nb), bn - 1);
    emit_div_imm(e, R(e, nb), R(e, nb), bn);
    emit_div_imm(e, R(e, hkv), "%heads_q", p->cfg.group);
    emit(e, "mov.u32 %s, %%ctaid.x;", R(e, t));
    if (p->cfg.tail_split) tail_tile(e, t);
    if (pair) {
        emit_note(e, "plan note cta pair: CTAs 2i, 2i+1 are pair i (a cluster); the pair's tile of %d keys", bn);
        emit(e, "shr.u32 %s, %s, 1;", R(e, t), R(e, t));
    }
    emit(e, "rem.u32 %s, %s, %s;", R(e, n), R(e, t), R(e, nb));
    emit(e, "div.u32 %s, %s, %s;", R(e, t), R(e, t), R(e, nb));
    emit(e, "rem.u32 %s, %s, %s;", R(e, kvh), R(e, t), R(e, hkv));
    emit(e, "div.u32 %s, %s, %s;", R(e, bidx), R(e, t), R(e, hkv));
    emit(e, "mul.lo.u32 %s, %s, %d;", R(e, n0), R(e, n), bn);
    if (p->cfg.varlen) {
        emit_note(e, "plan note varlen: the sequence's rows; %%seqlen_q and %%seqlen_k become its lengths");
        sequence_rows(e, reg_find(e, "cu_seqlens_q"), reg_find(e, "total_q"), qs, reg_find(e, "seqlen_q"));
        sequence_rows(e, reg_find(e, "cu_seqlens_k"), reg_find(e, "total_k"), ks, reg_find(e, "seqlen_k"));
        emit(e, "mov.u32 %s, 0;", R(e, bmap));
        emit(e, "mad.lo.u32 %s, %%bidx, %d, %s;", R(e, pad), bm, R(e, qs));
        emit_div_imm(e, R(e, pad), R(e, pad), bm);
        emit(e, "mul.lo.u32 %s, %s, %d;", R(e, pad), R(e, pad), bm);
        emit(e, "setp.ge.u32 %s, %s, %%seqlen_k;", R(e, pr), R(e, n0));
        emit_note(e, "a kv block past the sequence's keys (the grid is sized by the longest): nothing to do");
        emit(e, "@%s bra $exit;", R(e, pr));
    } else {
        emit(e, "mov.u32 %s, 0;", R(e, qs));
        emit(e, "mov.u32 %s, 0;", R(e, ks));
        emit(e, "mov.u32 %s, %%bidx;", R(e, bmap));
        emit(e, "mov.u32 %s, 0;", R(e, pad));
    }
    emit_note(e, "m-blocks of %d rows; query i sees key j when i + off - %d <= j <= i + off + %d (-1: unbounded)", bm,
              wl, wr);
    emit(e, "sub.s32 %s, %%seqlen_k, %%seqlen_q;", R(e, off));
    emit(e, "add.u32 %s, %%seqlen_q, %d;", R(e, nmq), bm - 1);
    emit_div_imm(e, R(e, nmq), R(e, nmq), bm);
    if (wr >= 0) {
        emit_note(e, "first query that sees key n0: n0 - off - %d; full from n0 + bn - 1 - off - %d", wr, wr);
        emit(e, "sub.s32 %s, %s, %s;", R(e, x), R(e, n0), R(e, off));
        emit(e, "sub.s32 %s, %s, %d;", R(e, x), R(e, x), wr);
        clamp_div(e, mb, x, 0, bm);
        emit(e, "add.s32 %s, %s, %d;", R(e, x), R(e, x), bn - 1);
        clamp_div(e, flo, x, bm - 1, bm);
    } else {
        emit(e, "mov.u32 %s, 0;", R(e, mb));
        emit(e, "mov.u32 %s, 0;", R(e, flo));
    }
    if (wl >= 0) {
        emit_note(e, "last query that sees key n0 + bn - 1: it + off + ... ; full while m0 + bm - 1 + off - %d <= n0", wl);
        emit(e, "sub.s32 %s, %s, %s;", R(e, x), R(e, n0), R(e, off));
        emit(e, "add.s32 %s, %s, %d;", R(e, x), R(e, x), wl + bn - 1 + 1);
        clamp_div(e, me, x, bm - 1, bm);
        emit(e, "min.u32 %s, %s, %s;", R(e, me), R(e, me), R(e, nmq));
        emit(e, "sub.s32 %s, %s, %s;", R(e, x), R(e, n0), R(e, off));
        emit(e, "add.s32 %s, %s, %d;", R(e, x), R(e, x), wl - bm + 1 + bm);
        clamp_div(e, fhi, x, 0, bm);
    } else {
        emit(e, "mov.u32 %s, %s;", R(e, me), R(e, nmq));
        emit(e, "mov.u32 %s, %s;", R(e, fhi), R(e, nmq));
    }
    emit_note(e, "no mask is needed only inside the queries (m0 + bm <= seqlen_q) and the keys (n0 + bn <= seqlen_k)");
    emit_div_imm(e, R(e, x), "%seqlen_q", bm);
    emit(e, "min.s32 %s, %s, %s;", R(e, fhi), R(e, fhi), R(e, x));
    emit(e, "add.u32 %s, %s, %d;", R(e, x), R(e, n0), bn);
    emit(e, "setp.gt.u32 %s, %s, %%seqlen_k;", R(e, pr), R(e, x));
    emit(e, "@%s mov.u32 %s, 0;", R(e, pr), R(e, fhi));
    emit(e, "max.s32 %s, %s, %s;", R(e, me), R(e, me), R(e, mb));
    emit(e, "sub.u32 %s, %s, %s;", R(e, nm), R(e, me), R(e, mb));
    emit(e, "mul.lo.u32 %s, %s, %d;", R(e, it), R(e, nm), p->cfg.group);
    if (p->cfg.tail_split) tail_range(e);
    if (pair) {
        Reg rank = reg_b32(e, "cta_rank");
        emit_note(e, "the pair: both CTAs walk the pair's m-blocks; CTA r's keys start at n0 + %d r", p->bn);
        emit(e, "mov.u32 %s, %%cluster_ctarank;", R(e, rank));
        emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, n0), R(e, rank), p->bn, R(e, n0));
        emit(e, "setp.eq.u32 %s, %s, 0;", R(e, reg_pred(e, "is_lead")), R(e, rank));
        emit(e, "mov.u32 %s, 0;", R(e, reg_b32(e, "lead_rank")));
    }
}

/* Iteration %it_reg -> m-block m and query head hq (g = it / nm of the kv head's group). m-blocks ascend; with
 * deterministic=1 they descend: every kv block of a head then meets a given m-block at the same iteration, so the
 * ordered adds delay kv block n by n add latencies (ascending, its first m-block n waits for block 0's n-th
 * iteration: every causal CTA would last as long as the longest). */
void bwd_iter_coords(Emit *e, Reg itr, Reg m, Reg hq)
{
    const Plan *p = e->p;
    int down = p->cfg.deterministic;
    if (p->cfg.group == 1) {
        if (down) {
            emit_note(e, "plan note deterministic: m-blocks descend, m = m_end - 1 - it");
            emit(e, "sub.u32 %s, %%m_end, 1;", R(e, m));
            emit(e, "sub.u32 %s, %s, %s;", R(e, m), R(e, m), R(e, itr));
        } else {
            emit(e, "add.u32 %s, %%m_begin, %s;", R(e, m), R(e, itr));
        }
        if (reg_is(hq)) emit(e, "mov.u32 %s, %%kvh;", R(e, hq));
        return;
    }
    Reg g = reg_b32(e, "ic_g");
    emit(e, "div.u32 %s, %s, %%nm;", R(e, g), R(e, itr));
    emit(e, "rem.u32 %s, %s, %%nm;", R(e, m), R(e, itr));
    if (down) {
        emit_note(e, "plan note deterministic: m-blocks descend, m = m_end - 1 - it %% nm");
        emit(e, "sub.u32 %s, %%m_end, %s;", R(e, m), R(e, m));
        emit(e, "sub.u32 %s, %s, 1;", R(e, m), R(e, m));
    } else {
        emit(e, "add.u32 %s, %s, %%m_begin;", R(e, m), R(e, m));
    }
    if (reg_is(hq)) emit(e, "mad.lo.u32 %s, %%kvh, %d, %s;", R(e, hq), p->cfg.group, R(e, g));
}

void bwd_iter_start(Emit *e, Reg itr)
{
    if (e->p->cfg.tail_split) emit(e, "mov.u32 %s, %%it0;", R(e, itr));
    else emit(e, "mov.u32 %s, 0;", R(e, itr));
}

/* ws = the workspace row of (hq, m)'s first query: (bws heads_q + hq) q_rows + pad + m bm (u64). */
void bwd_ws_row(Emit *e, Reg ws, Reg m, Reg hq)
{
    Reg t = reg_b32(e, "wr_t"), t64 = reg_b64(e, "wr_t64");
    if (e->p->cfg.varlen) emit(e, "mov.u32 %s, %s;", R(e, t), R(e, hq));
    else emit(e, "mad.lo.u32 %s, %%bidx, %%heads_q, %s;", R(e, t), R(e, hq));
    emit(e, "mul.wide.u32 %s, %s, %%q_rows;", R(e, ws), R(e, t));
    emit(e, "mad.lo.u32 %s, %s, %d, %%pad;", R(e, t), R(e, m), e->p->bm);
    op_cvt(e, "u64.u32", t64, t);
    emit(e, "add.s64 %s, %s, %s;", R(e, ws), R(e, ws), R(e, t64));
}

void bwd_det_counter(Emit *e, Reg addr, Reg ws_row)
{
    if (e->p->bm & (e->p->bm - 1)) /* a u64 div is a subroutine in SASS; bm is a power of two but for 192 */
        emit(e, "div.u64 %s, %s, %d;", R(e, addr), R(e, ws_row), e->p->bm);
    else
        emit(e, "shr.u64 %s, %s, %d;", R(e, addr), R(e, ws_row), __builtin_ctz((unsigned)e->p->bm));
    emit(e, "shl.b64 %s, %s, 2;", R(e, addr), R(e, addr));
    emit(e, "add.s64 %s, %s, %%dq_sem;", R(e, addr), R(e, addr));
}

void bwd_det_wait_turn(Emit *e, Reg addr, Reg m, int arrivals)
{
    const Plan *p = e->p;
    int wl, wr;
    mask_bounds(&p->cfg, &wl, &wr);
    char l_go[NAME];
    Reg first = reg_b32(e, "dt_first"), want = reg_b32(e, "dt_want"), v = reg_b32(e, "dt_v"), x = reg_b32(e, "dt_x");
    Reg ns = reg_b32(e, "dt_ns"), go = reg_pred(e, "dt_go");
    if (wl >= 0) {
        emit_note(e, "plan note deterministic: the first kv block that sees m-block m: (m %d + off - %d) / %d, 0 when "
                  "that is <= 0 (the window's left bound)", p->bm, wl, p->bn);
        emit(e, "mad.lo.s32 %s, %s, %d, %%kv_off;", R(e, x), R(e, m), p->bm);
        emit(e, "sub.s32 %s, %s, %d;", R(e, x), R(e, x), wl);
        clamp_div(e, first, x, 0, p->bn);
    } else {
        emit_note(e, "plan note deterministic: no left bound, so kv block 0 sees every m-block: rank = kv block");
        emit(e, "mov.u32 %s, 0;", R(e, first));
    }
    emit_note(e, "wait for rank x %d arrivals (every lower kv block of this m-block added and released)", arrivals);
    emit(e, "sub.u32 %s, %%n_blk, %s;", R(e, want), R(e, first));
    emit(e, "mul.lo.u32 %s, %s, %d;", R(e, want), R(e, want), arrivals);
    l_go[0] = 0;
    bwd_spin_until(e, addr, want, (Reg[]){v, ns, go}, "dt", l_go, sizeof l_go);
}

void bwd_spin_until(Emit *e, Reg addr, Reg want, const Reg *r, const char *stem, char *l_go, size_t n)
{
    char l_spin[NAME], name[NAME];
    Reg v = r[0], ns = r[1], go = r[2];
    emit(e, "mov.u32 %s, %d;", R(e, ns), BWD_DET_SLEEP_NS);
    snprintf(name, sizeof name, "%s_spin", stem);
    emit_label(e, new_label(e, l_spin, sizeof l_spin, name));
    op_ld_acquire_gpu_u32(e, v, addr);
    emit(e, "setp.ge.u32 %s, %s, %s;", R(e, go), R(e, v), R(e, want));
    snprintf(name, sizeof name, "%s_go", stem);
    emit(e, "@%s bra %s;", R(e, go), l_go[0] ? l_go : new_label(e, l_go, n, name));
    op_nanosleep(e, ns);
    emit(e, "shl.b32 %s, %s, 1;", R(e, ns), R(e, ns));
    emit(e, "min.u32 %s, %s, %d;", R(e, ns), R(e, ns), BWD_DET_SLEEP_MAX_NS);
    emit(e, "bra.uni %s;", l_spin);
    emit_label(e, l_go);
}

static void det_group_sync(Emit *e, int bar, Reg bar_reg)
{
    if (reg_is(bar_reg)) op_bar_sync_at(e, REG_NONE, bar_reg, BWD_WG);
    else op_bar_sync(e, bar, BWD_WG);
}

void bwd_det_turn_open(Emit *e, Reg sem, Reg ws_row, Reg lead, Reg m, int arrivals, int bar, Reg bar_reg)
{
    char l_skip[NAME];
    bwd_det_counter(e, sem, ws_row);
    emit(e, "@!%s bra %s;", R(e, lead), new_label(e, l_skip, sizeof l_skip, "det_turn_skip"));
    bwd_det_wait_turn(e, sem, m, arrivals);
    emit_label(e, l_skip);
    det_group_sync(e, bar, bar_reg);
}

void bwd_det_turn_close(Emit *e, Reg sem, Reg lead, int bar, Reg bar_reg)
{
    emit_note(e, "every thread's adds are done (the barrier), then the lead thread releases them: the next turn");
    det_group_sync(e, bar, bar_reg);
    op_red_release_gpu_add_u32(e, lead, sem, 1);
}

/* One TMA box per 64-column chunk of a tile at (row, head, batch). */
static void load_tile(Emit *e, Reg tmap, Reg dst0, uint32_t chunk_bytes, Reg row, Reg head, Reg bar)
{
    const Plan *p = e->p;
    Reg dst = reg_b32(e, "ld_dst"), col = reg_b32(e, "ld_col");
    for (int c = 0; c < p->qk_chunks; c++) {
        emit(e, "add.u32 %s, %s, %u;", R(e, dst), R(e, dst0), c * chunk_bytes);
        emit(e, "mov.u32 %s, %d;", R(e, col), c * p->chunk_elems);
        op_tma_load_4d(e, dst, tmap, col, row, head, reg_find(e, "b_map"), bar);
    }
}

/* The top of a load loop's iteration (r: pr, itr, m, hq, ws, row, par, phase): leave at %iters, the
 * iteration's m-block and query head, its workspace row (bytes), its first query row, the ring slot's free parity. */
void bwd_load_iter_top(Emit *e, char *l_loop, char *l_done, size_t n, const Reg *r)
{
    Reg pr = r[0], itr = r[1], m = r[2], hq = r[3], ws = r[4], row = r[5];
    emit_label(e, new_label(e, l_loop, n, "ld_loop"));
    emit(e, "setp.ge.u32 %s, %s, %%iters;", R(e, pr), R(e, itr));
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, l_done, n, "ld_done"));
    bwd_iter_coords(e, itr, m, hq);
    bwd_ws_row(e, ws, m, hq);
    emit(e, "shl.b64 %s, %s, 2;", R(e, ws), R(e, ws));
    emit(e, "mad.lo.u32 %s, %s, %d, %%q_start;", R(e, row), R(e, m), e->p->bm);
    ring_free_parity(e, r[6], r[7]);
}

void bwd_emit_loads(Emit *e, const BwdLoads *l, const char *section, int lane_guard)
{
    const Plan *p = e->p;
    char l_loop[NAME], l_done[NAME];
    Reg pr = reg_pred(e, "ld_p"), bar = reg_b32(e, "ld_bar"), dst = reg_b32(e, "ld_dst0"), row = reg_b32(e, "ld_row");
    Reg stage = reg_b32(e, "ld_stage"), phase = reg_b32(e, "ld_phase"), par = reg_b32(e, "ld_par");
    Reg itr = reg_b32(e, "ld_it"), m = reg_b32(e, "ld_m"), hq = reg_b32(e, "ld_hq"), ws = reg_b64(e, "ld_ws");
    Reg src = reg_b64(e, "ld_src"), vdst = reg_b32(e, "ld_vdst");
    emit_section(e, "%s", section);
    if (lane_guard) {
        emit(e, "setp.ne.u32 %s, %%lane, 0;", R(e, pr));
        emit(e, "@%s bra $exit;", R(e, pr));
    }
    emit_note(e, "plan: tx kv = %u bytes (K and V tiles, %d keys)", l->tx_kv, p->bn);
    mbar_at(e, bar, l->bar_kv_full, 0);
    op_mbar_expect_tx(e, bar, l->tx_kv);
    emit(e, "add.u32 %s, %%n0, %%k_start;", R(e, row));
    smem_at(e, dst, l->off_k);
    load_tile(e, reg_find(e, "tmap_k"), dst, l->kv_chunk_bytes, row, reg_find(e, "kvh"), bar);
    smem_at(e, dst, l->off_v);
    load_tile(e, reg_find(e, "tmap_v"), dst, l->kv_chunk_bytes, row, reg_find(e, "kvh"), bar);
    ring_reset(e, stage, phase);
    bwd_iter_start(e, itr);
    bwd_load_iter_top(e, l_loop, l_done, sizeof l_loop, (Reg[]){pr, itr, m, hq, ws, row, par, phase});
    const struct { const char *what; uint32_t empty, full, tile, vec, tx; const char *map, *vsrc; } t[2] = {
        {"Q + nl2", l->bar_q_empty, l->bar_q_full, l->off_q, l->off_nl2, l->tx_q, "tmap_q", "nlse2"},
        {"dO + D", l->bar_do_empty, l->bar_do_full, l->off_do, l->off_dpsum, l->tx_do, "tmap_do", "dpsum"}};
    for (int k = 0; k < 2; k++) {
        emit_note(e, "%s: wait for the slot, then load (plan: tx %u bytes)", t[k].what, t[k].tx);
        smem_indexed(e, bar, t[k].empty, stage, MBAR_BYTES);
        op_mbar_wait(e, bar, par);
        smem_indexed(e, bar, t[k].full, stage, MBAR_BYTES);
        op_mbar_expect_tx(e, bar, t[k].tx);
        smem_indexed(e, dst, t[k].tile, stage, l->q_stage_bytes);
        load_tile(e, reg_find(e, "%s", t[k].map), dst, l->q_chunk_bytes, row, hq, bar);
        smem_indexed(e, vdst, t[k].vec, stage, l->vec_stage_bytes);
        emit(e, "add.s64 %s, %%%s, %s;", R(e, src), t[k].vsrc, R(e, ws));
        op_bulk_load(e, vdst, src, l->vec_stage_bytes, bar);
    }
    ring_advance(e, stage, phase, p->stages);
    emit(e, "add.u32 %s, %s, 1;", R(e, itr), R(e, itr));
    emit(e, "bra.uni %s;", l_loop);
    emit_label(e, l_done);
    emit(e, "bra.uni $exit;");
}

/* ---------------------------------------------------------------- configs */

/* The main kernel's tile when a pre/dq config leaves it open: the sm90a defaults (sm90/plan_bwd.c). */
static void aux_defaults(Config *c)
{
    if (!c->swizzle) c->swizzle = 128; /* unused; config_check wants a valid value */
    if (!c->bm) c->bm = c->qk_depth <= 64 ? 128 : 64;
    if (c->kind == KIND_MHA_BWD_DQ && !c->bn) c->bn = c->qk_depth > 128 ? 64 : 128;
}

static int aux_check(const Config *c, char *err, size_t n)
{
    const char *k = kind_name[c->kind];
    if (c->dtype == DT_E4M3)
        return plan_refuse(err, n, "dtype: e4m3 is not allowed for %s; the backward takes bf16 or fp16", k);
    if (c->qk_depth != c->ov_depth)
        return plan_refuse(err, n, "qk/ov: %d/%d is not allowed for %s; give one depth", c->qk_depth, c->ov_depth, k);
    if (c->qk_depth % (AUX_THREADS / 32 * ROW_ELEMS / 4) || c->qk_depth < 32 || c->qk_depth > 256 ||
        (c->qk_depth & (c->qk_depth - 1)))
        return plan_refuse(err, n, "depth: %d is not allowed for %s; use 32, 64, 128 or 256", c->qk_depth, k);
    if (c->bm % BWD_MMA_M || c->bm > 256)
        return plan_refuse(err, n, "bm: %d is not allowed for %s; use 64, 128, 192 or 256 (the main kernel's)", c->bm, k);
    int tm, tn, dq_n;
    if (c->kind == KIND_MHA_BWD_DQ && bwd_dq_split(c->bm, c->bn, c->qk_depth, &tm, &tn, &dq_n))
        return plan_refuse(err, n, "bn: %d is not allowed for %s with bm %d and depth %d; the main kernel's dQ block "
                           "must split into 64-row tiles over its warpgroups (bwd_consumers)", c->bn, k, c->bm, c->qk_depth);
    Config d;
    config_init(&d);
    if ((c->kind == KIND_MHA_BWD_PRE && c->bn) || c->stages || c->group != 1 || c->mask != MASK_NONE || c->qtiles ||
        c->cta_pair || c->rescale != d.rescale || c->exp2_poly != d.exp2_poly || c->rope_split ||
        c->pingpong != d.pingpong || c->persistent != d.persistent || c->swizzle != 128 || c->score_mod ||
        ((c->deterministic || c->tail_split) && c->kind != KIND_MHA_BWD_PRE) || c->softcap || c->alibi)
        return plan_refuse(err, n, "%s: it takes only target, dtype, qk (the depth), bm%s, varlen and sink%s; the other "
                           "words belong to the main kernel (mha-bwd)", k, c->kind == KIND_MHA_BWD_DQ ? ", bn" : "",
                           c->kind == KIND_MHA_BWD_PRE ? " (and deterministic, tail_split: it zeroes their counters)" : "");
    return 0;
}

static void aux_params(Plan *p, const ScalarId *ids, const ParamType *types, int n)
{
    for (int i = 0; i < n; i++) plan_param_scalar(p, ids[i], types[i]);
}

static int pre_plan(const Config *c, Plan *p, char *err, size_t n)
{
    (void)err, (void)n;
    p->qk = p->ov = c->qk_depth;
    p->bm = c->bm;
    p->elem_bytes = dtype_bytes[c->dtype];
    p->threads = AUX_THREADS;
    p->entry_regs = 255;
    p->rows_per_cta = c->bm;
    p->heads_per_cta = 1;
    p->smem_align = 16;
    plan_role(p, "rows", 0, AUX_WARPS, 0, "a lane group per query row: D, nl2; then the block's dQ accumulator zeroed");
    if (c->sink) plan_smem(p, "sink_red", 4 * AUX_WARPS, 16, "the warps' dsink partials");
    const ScalarId ids[] = {SCALAR_OUT, SCALAR_OUT_STRIDE_B, SCALAR_OUT_STRIDE_S, SCALAR_OUT_STRIDE_H, SCALAR_DOUT,
                            SCALAR_DOUT_STRIDE_B, SCALAR_DOUT_STRIDE_S, SCALAR_DOUT_STRIDE_H, SCALAR_LSE,
                            SCALAR_DPSUM, SCALAR_NLSE2, SCALAR_DQ_ACCUM, SCALAR_SEQLEN_Q, SCALAR_HEADS_Q, SCALAR_BATCH,
                            SCALAR_Q_ROWS};
    const ParamType ty[] = {PARAM_U64, PARAM_U64, PARAM_U64, PARAM_U64, PARAM_U64, PARAM_U64, PARAM_U64, PARAM_U64,
                            PARAM_U64, PARAM_U64, PARAM_U64, PARAM_U64, PARAM_U32, PARAM_U32, PARAM_U32, PARAM_U32};
    aux_params(p, ids, ty, (int)(sizeof ids / sizeof ids[0]));
    plan_param_scalar(p, SCALAR_DLSE, PARAM_U64);
    if (c->sink) {
        plan_param_scalar(p, SCALAR_SINK, PARAM_U64);
        plan_param_scalar(p, SCALAR_SINK_PART, PARAM_U64);
    }
    if (c->varlen) {
        plan_param_scalar(p, SCALAR_CU_SEQLENS_Q, PARAM_U64);
        plan_param_scalar(p, SCALAR_TOTAL_Q, PARAM_U32);
    }
    if (c->deterministic) {
        plan_param_scalar(p, SCALAR_DQ_SEM, PARAM_U64);
        plan_note(p, "deterministic", "thread 0 zeroes the block's turn counter dq_sem[row0 / %d] (u32) for the main "
                  "kernel's ordered dQ adds", c->bm);
    }
    if (c->tail_split) {
        plan_param_scalar(p, SCALAR_TAIL_WS, PARAM_U64);
        plan_param_scalar(p, SCALAR_TAIL_BYTES, PARAM_U32);
        plan_note(p, "tail split", "the grid zeroes tail_bytes (a multiple of 16; 0: none) at tail_ws, the main "
                  "kernel's split tiles' dK, dV partials and counters (mha_bwd.h)");
    }
    int lanes = c->qk_depth / ROW_ELEMS;
    plan_note(p, "rows", "%d lanes per query row (16-byte loads of O and dO), %d rows a pass, %d passes", lanes,
              AUX_THREADS / lanes, c->bm / (AUX_THREADS / lanes));
    plan_note(p, "outputs", "dpsum[row] = sum_c dO O (f32), nlse2[row] = -LSE log2 e (-inf: no key); rows past the "
              "sequence: 0, -inf; the block's %d x %d f32 dQ accumulator zeroed", c->bm, c->qk_depth);
    plan_note(p, "dlse", "p_dlse != 0 (LSE used downstream): dpsum -= dLSE%s, as dS = P (dP - D) + dLSE P", c->sink ?
              " e^(LSE_full - LSE) (the LSE excludes the sink; rows that saw no key: 0)" : " (rows that saw no key: 0)");
    if (c->sink)
        plan_note(p, "sink", "LSE_full = log(e^LSE + e^sink[h]) in nlse2; sink_part[b][h][m] = -sum_rows e^(sink - "
                  "LSE_full) D");
    plan_note(p, "grid", "ceil(seqlen_q / %d) x heads_q x batch CTAs (varlen: seqlen_q = max_seqlen_q)", c->bm);
    return 0;
}

static int dq_plan(const Config *c, Plan *p, char *err, size_t n)
{
    (void)err, (void)n;
    p->qk = p->ov = c->qk_depth;
    p->bm = c->bm, p->bn = c->bn;
    p->elem_bytes = dtype_bytes[c->dtype];
    p->threads = AUX_THREADS;
    p->entry_regs = 255;
    p->rows_per_cta = c->bm;
    p->heads_per_cta = 1;
    p->smem_align = 16;
    plan_role(p, "rows", 0, AUX_WARPS, 0, "float4 i of the block = thread i % 128 of its 64-row tile (mha_bwd.h)");
    plan_smem(p, "stage", (uint32_t)(c->bm * c->qk_depth * BWD_F32), 16,
              "the dQ block f32 row-major, 16-byte chunks swizzled by row % 8");
    const ScalarId ids[] = {SCALAR_DQ_ACCUM, SCALAR_DQ, SCALAR_DQ_STRIDE_B, SCALAR_DQ_STRIDE_S, SCALAR_DQ_STRIDE_H,
                            SCALAR_SCALE, SCALAR_SEQLEN_Q, SCALAR_HEADS_Q, SCALAR_BATCH, SCALAR_Q_ROWS};
    const ParamType ty[] = {PARAM_U64, PARAM_U64, PARAM_U64, PARAM_U64, PARAM_U64, PARAM_F32, PARAM_U32, PARAM_U32,
                            PARAM_U32, PARAM_U32};
    aux_params(p, ids, ty, (int)(sizeof ids / sizeof ids[0]));
    if (c->sink) {
        plan_param_scalar(p, SCALAR_SINK_PART, PARAM_U64);
        plan_param_scalar(p, SCALAR_DSINK, PARAM_U64);
    }
    if (c->varlen) {
        plan_param_scalar(p, SCALAR_CU_SEQLENS_Q, PARAM_U64);
        plan_param_scalar(p, SCALAR_TOTAL_Q, PARAM_U32);
    }
    int tm, tn, dq_n;
    bwd_dq_split(c->bm, c->bn, c->qk_depth, &tm, &tn, &dq_n);
    plan_note(p, "layout", "the main kernel's %d warpgroups own %d x %d tiles of 64 rows x %d columns; float4 "
              "[w][j][t] holds registers 4j..4j+3 of thread t", bwd_consumers(c->bn, c->qk_depth), tm, tn, dq_n);
    plan_note(p, "stage", "the block (%d x %d f32) through smem: chunk c (16 B) of row r at c ^ (r %% 8), so the "
              "fragment's 8-byte writes and the rows' 16-byte reads are conflict-free", c->bm, c->qk_depth);
    plan_note(p, "outputs", "dq = scale x accumulator in %s at the caller's element strides, rows < seqlen; a thread "
              "stores 4 columns (8 bytes), a warp whole rows", dtype_name[c->dtype]);
    if (c->sink) plan_note(p, "sink", "the CTA of (m-block 0, batch 0) of head h: dsink[h] = sum of its partials");
    plan_note(p, "grid", "ceil(seqlen_q / %d) x heads_q x batch CTAs (varlen: seqlen_q = max_seqlen_q)", c->bm);
    return 0;
}

/* ---------------------------------------------------------------- shared emitters */

/* The CTA's block: %ax_m (m-block), %ax_h (head), %ax_b (batch); the sequence's %ax_start (its first row
 * in q / dO / dQ) and %ax_len (rows); %ax_row0 (u64): the workspace row of the block's first row,
 * (bws x heads_q + h) x q_rows + pad + m bm. Exits when the block lies past the sequence (varlen),
 * after `before_exit` has run (NULL: nothing). */
static void aux_coords(Emit *e, void (*before_exit)(Emit *))
{
    const Plan *p = e->p;
    int bm = p->bm;
    Reg nm = reg_b32(e, "ax_nm"), t = reg_b32(e, "ax_t"), m = reg_b32(e, "ax_m"), h = reg_b32(e, "ax_h");
    Reg b = reg_b32(e, "ax_b"), start = reg_b32(e, "ax_start"), len = reg_b32(e, "ax_len"), pad = reg_b32(e, "ax_pad");
    Reg row0 = reg_b64(e, "ax_row0"), t64 = reg_b64(e, "ax_t64"), skip = reg_pred(e, "ax_skip");
    emit_note(e, "plan grid: CTA = (m-block, head, batch), m fastest; m-blocks = ceil(seqlen_q / %d)", bm);
    emit(e, "add.u32 %s, %%seqlen_q, %d;", R(e, nm), bm - 1);
    emit_div_imm(e, R(e, nm), R(e, nm), bm);
    emit(e, "mov.u32 %s, %%ctaid.x;", R(e, reg_b32(e, "ax_cta")));
    emit(e, "mov.u32 %s, %%ax_cta;", R(e, t));
    emit(e, "rem.u32 %s, %s, %s;", R(e, m), R(e, t), R(e, nm));
    emit(e, "div.u32 %s, %s, %s;", R(e, t), R(e, t), R(e, nm));
    emit(e, "rem.u32 %s, %s, %%heads_q;", R(e, h), R(e, t));
    emit(e, "div.u32 %s, %s, %%heads_q;", R(e, b), R(e, t));
    if (p->cfg.varlen) {
        Reg a = reg_b64(e, "ax_cu"), end = reg_b32(e, "ax_end");
        emit_note(e, "varlen: the sequence's rows, cu_seqlens_q clamped into [0, total_q]; its padded workspace rows "
                  "start at (start + b bm) / bm x bm");
        emit(e, "mul.wide.u32 %s, %s, 4;", R(e, a), R(e, b));
        emit(e, "add.s64 %s, %s, %%cu_seqlens_q;", R(e, a), R(e, a));
        op_ld_global(e, REG_NONE, "s32", start, a, 0);
        op_ld_global(e, REG_NONE, "s32", end, a, 4);
        emit(e, "max.s32 %s, %s, 0;", R(e, start), R(e, start));
        emit(e, "min.u32 %s, %s, %%total_q;", R(e, start), R(e, start));
        emit(e, "max.s32 %s, %s, 0;", R(e, end), R(e, end));
        emit(e, "min.u32 %s, %s, %%total_q;", R(e, end), R(e, end));
        emit(e, "max.u32 %s, %s, %s;", R(e, end), R(e, end), R(e, start));
        emit(e, "sub.u32 %s, %s, %s;", R(e, len), R(e, end), R(e, start));
        emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, pad), R(e, b), bm, R(e, start));
        emit_div_imm(e, R(e, pad), R(e, pad), bm);
        emit(e, "mul.lo.u32 %s, %s, %d;", R(e, pad), R(e, pad), bm);
        emit(e, "mul.wide.u32 %s, %s, %%q_rows;", R(e, row0), R(e, h));
    } else {
        emit(e, "mov.u32 %s, 0;", R(e, start));
        emit(e, "mov.u32 %s, %%seqlen_q;", R(e, len));
        emit(e, "mov.u32 %s, 0;", R(e, pad));
        emit(e, "mad.lo.u32 %s, %s, %%heads_q, %s;", R(e, t), R(e, b), R(e, h));
        emit(e, "mul.wide.u32 %s, %s, %%q_rows;", R(e, row0), R(e, t));
    }
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, t), R(e, m), bm, R(e, pad));
    emit(e, "cvt.u64.u32 %s, %s;", R(e, t64), R(e, t));
    emit(e, "add.s64 %s, %s, %s;", R(e, row0), R(e, row0), R(e, t64));
    if (p->cfg.varlen) {
        char l_in[NAME];
        emit(e, "mul.lo.u32 %s, %s, %d;", R(e, t), R(e, m), bm);
        emit(e, "setp.ge.u32 %s, %s, %s;", R(e, skip), R(e, t), R(e, len));
        emit(e, "@!%s bra %s;", R(e, skip), new_label(e, l_in, sizeof l_in, "ax_in_seq"));
        emit_note(e, "varlen: this m-block lies past the sequence (the grid is sized by the longest)");
        if (before_exit) before_exit(e);
        emit(e, "bra.uni $exit;");
        emit_label(e, l_in);
    }
}

/* addr = base + ((b sb + (start + i) ss + h sh + col) x elem_bytes), the strides u64 registers (elements);
 * varlen tensors have sb = 0 (the runtime binds it). */
static void row_addr(Emit *e, Reg addr, Reg base, Reg sb, Reg ss, Reg sh, Reg i, Reg col, int eb)
{
    Reg t = reg_b64(e, "ra_t"), r = reg_b32(e, "ra_row");
    emit(e, "add.u32 %s, %%ax_start, %s;", R(e, r), R(e, i));
    op_cvt(e, "u64.u32", addr, r);
    emit(e, "mul.lo.u64 %s, %s, %s;", R(e, addr), R(e, addr), R(e, ss));
    op_cvt(e, "u64.u32", t, reg_find(e, "ax_b"));
    emit(e, "mad.lo.u64 %s, %s, %s, %s;", R(e, addr), R(e, t), R(e, sb), R(e, addr));
    op_cvt(e, "u64.u32", t, reg_find(e, "ax_h"));
    emit(e, "mad.lo.u64 %s, %s, %s, %s;", R(e, addr), R(e, t), R(e, sh), R(e, addr));
    op_cvt(e, "u64.u32", t, col);
    emit(e, "add.s64 %s, %s, %s;", R(e, addr), R(e, addr), R(e, t));
    emit(e, "mad.lo.u64 %s, %s, %d, %s;", R(e, addr), R(e, addr), eb, R(e, base));
}

static void aux_prologue(Emit *e)
{
    emit_section(e, "prologue: parameters, this thread");
    const char *tid = reg(e, "b32", "thread"), *lane = reg(e, "b32", "lane"), *warp = reg(e, "b32", "warp");
    emit(e, "mov.u32 %s, %%tid.x;", tid);
    emit(e, "and.b32 %s, %s, 31;", lane, tid);
    emit(e, "shr.u32 %s, %s, 5;", warp, tid);
    kernel_params(e);
}

/* ---------------------------------------------------------------- mha-bwd-pre */

/* f32 of the low (half 0) or high (half 1) 16-bit element of a packed pair. */
static void unpack_half(Emit *e, DType dt, Reg dst, Reg pair, int half)
{
    if (dt == DT_BF16) {
        Reg t = reg_b32(e, "up_t");
        if (half) emit(e, "and.b32 %s, %s, 0xFFFF0000;", R(e, t), R(e, pair));
        else emit(e, "shl.b32 %s, %s, 16;", R(e, t), R(e, pair));
        emit(e, "mov.b32 %s, %s;", R(e, dst), R(e, t));
    } else {
        Reg lo = reg_b16(e, "up_lo"), hi = reg_b16(e, "up_hi");
        emit(e, "mov.b32 {%s, %s}, %s;", R(e, lo), R(e, hi), R(e, pair));
        op_cvt(e, "f32.f16", dst, half ? hi : lo);
    }
}

/* sink=1, a block past its sequence: its dsink partial is 0. */
static void pre_zero_partial(Emit *e)
{
    if (!e->p->cfg.sink) return;
    Reg a = reg_b64(e, "pr_part_addr"), z = reg_f32(e, "pr_zero"), t = reg_pred(e, "pr_t0");
    emit(e, "setp.eq.u32 %s, %%thread, 0;", R(e, t));
    emit(e, "mov.f32 %s, 0f00000000;", R(e, z));
    emit(e, "mul.wide.u32 %s, %%ax_cta, 4;", R(e, a));
    emit(e, "add.s64 %s, %s, %%sink_part;", R(e, a), R(e, a));
    op_st_global_f32(e, t, a, z);
}

/* plan note dlse: D -= dLSE of the row (LSE index idx; the lane group's lane 0, which loaded lse), times
 * e^(LSE_full - LSE) = 2^(-nl2 - LSE log2 e) with a sink; nothing for a row that saw no key (P = 0 there, and
 * the factor would be inf). After the sink's partial, which takes D itself (the LSE excludes the sink). */
static void pre_dlse(Emit *e, Reg idx, Reg lse, Reg nl2, Reg acc)
{
    Reg use = reg_pred(e, "pr_use_dlse"), a = reg_b64(e, "pr_dla"), g = reg_f32(e, "pr_dlse");
    emit_note(e, "plan note dlse: D -= dLSE%s where the caller gave p_dlse and the row saw a key",
              e->p->cfg.sink ? " e^(LSE_full - LSE)" : "");
    emit(e, "setp.ne.f32 %s, %s, %s;", R(e, use), R(e, lse), PTX_NEG_INF);
    emit(e, "and.pred %s, %s, %%pr_has_dlse;", R(e, use), R(e, use));
    emit(e, "and.pred %s, %s, %%pr_write;", R(e, use), R(e, use));
    emit(e, "mad.wide.u32 %s, %s, 4, %%dlse;", R(e, a), R(e, idx));
    emit(e, "mov.f32 %s, 0f00000000;", R(e, g));
    op_ld_global(e, use, "f32", g, a, 0);
    if (e->p->cfg.sink) {
        Reg f = reg_f32(e, "pr_dlse_f");
        emit(e, "mul.f32 %s, %s, %s;", R(e, f), R(e, lse), PTX_LOG2E);
        emit(e, "add.f32 %s, %s, %s;", R(e, f), R(e, f), R(e, nl2));
        emit(e, "neg.f32 %s, %s;", R(e, f), R(e, f));
        emit(e, "ex2.approx.ftz.f32 %s, %s;", R(e, f), R(e, f));
        emit(e, "@%s mul.f32 %s, %s, %s;", R(e, use), R(e, g), R(e, g), R(e, f));
    }
    emit(e, "sub.f32 %s, %s, %s;", R(e, acc), R(e, acc), R(e, g));
}

/* Row i of the block (thread's lane group): D and nl2, where the group's lane 0 writes them. */
static void pre_row(Emit *e, int pass, int rows_per_pass, int lanes)
{
    const Plan *p = e->p;
    DType dt = p->cfg.dtype;
    Reg r = reg_b32(e, "pr_r"), i = reg_b32(e, "pr_i"), col = reg_b32(e, "pr_col"), in = reg_pred(e, "pr_in");
    Reg ao = reg_b64(e, "pr_ao"), ad = reg_b64(e, "pr_ad"), acc = reg_f32(e, "pr_acc"), tmp = reg_f32(e, "pr_tmp");
    Reg x = reg_f32(e, "pr_x"), y = reg_f32(e, "pr_y");
    Reg ov[4], dv[4];
    for (int k = 0; k < 4; k++) ov[k] = reg_b32(e, "pr_o%d", k), dv[k] = reg_b32(e, "pr_do%d", k);
    emit_note(e, "pass %d: row r = %d + thread / %d", pass, pass * rows_per_pass, lanes);
    emit(e, "add.u32 %s, %%pr_group, %d;", R(e, r), pass * rows_per_pass);
    emit(e, "mad.lo.u32 %s, %%ax_m, %d, %s;", R(e, i), p->bm, R(e, r));
    emit(e, "setp.lt.u32 %s, %s, %%ax_len;", R(e, in), R(e, i));
    emit(e, "mov.u32 %s, %%pr_c0;", R(e, col));
    for (int k = 0; k < 4; k++) emit(e, "mov.b32 %s, 0;", R(e, ov[k])), emit(e, "mov.b32 %s, 0;", R(e, dv[k]));
    row_addr(e, ao, reg_find(e, "out"), reg_find(e, "out_stride_b"), reg_find(e, "out_stride_s"),
             reg_find(e, "out_stride_h"), i, col, p->elem_bytes);
    row_addr(e, ad, reg_find(e, "dout"), reg_find(e, "dout_stride_b"), reg_find(e, "dout_stride_s"),
             reg_find(e, "dout_stride_h"), i, col, p->elem_bytes);
    op_ld_global_v4_b32(e, in, ov, ao, 0);
    op_ld_global_v4_b32(e, in, dv, ad, 0);
    emit(e, "mov.f32 %s, 0f00000000;", R(e, acc));
    for (int k = 0; k < 4; k++)
        for (int half = 0; half < 2; half++) {
            unpack_half(e, dt, x, ov[k], half);
            unpack_half(e, dt, y, dv[k], half);
            emit(e, "fma.rn.f32 %s, %s, %s, %s;", R(e, acc), R(e, x), R(e, y), R(e, acc));
        }
    sfx_reduce_lanes(e, "add", acc, tmp, lanes);
    Reg lse = reg_f32(e, "pr_lse"), nl2 = reg_f32(e, "pr_nl2"), la = reg_b64(e, "pr_la"), t = reg_b32(e, "pr_li");
    Reg wr = reg_pred(e, "pr_write"), inf = reg_pred(e, "pr_noinf");
    emit(e, "mov.f32 %s, %s;", R(e, lse), PTX_NEG_INF);
    emit_note(e, "LSE [batch, heads_q, seqlen_q]; varlen [heads_q, total_q]");
    if (p->cfg.varlen) {
        emit(e, "add.u32 %s, %%ax_start, %s;", R(e, t), R(e, i));
        emit(e, "mad.lo.u32 %s, %%ax_h, %%total_q, %s;", R(e, t), R(e, t));
    } else {
        emit(e, "mad.lo.u32 %s, %%ax_b, %%heads_q, %%ax_h;", R(e, t));
        emit(e, "mad.lo.u32 %s, %s, %%seqlen_q, %s;", R(e, t), R(e, t), R(e, i));
    }
    emit(e, "mad.wide.u32 %s, %s, 4, %%lse;", R(e, la), R(e, t));
    emit(e, "and.pred %s, %s, %%pr_lead;", R(e, wr), R(e, in));
    op_ld_global(e, wr, "f32", lse, la, 0);
    if (p->cfg.sink) {
        Reg s2 = reg_find(e, "pr_sink2"), mx = reg_f32(e, "pr_mx"), a = reg_f32(e, "pr_a"), bb = reg_f32(e, "pr_b");
        Reg ps = reg_f32(e, "pr_psink"), empty = reg_pred(e, "pr_empty");
        emit_note(e, "plan note sink: LSE_full = log(e^LSE + e^sink), in log2 units; p_sink = 2^(sink2 - LSE2_full)");
        emit(e, "mul.f32 %s, %s, %s;", R(e, a), R(e, lse), PTX_LOG2E);
        emit(e, "max.f32 %s, %s, %s;", R(e, mx), R(e, a), R(e, s2));
        emit(e, "setp.eq.f32 %s, %s, %s;", R(e, empty), R(e, mx), PTX_NEG_INF);
        emit(e, "selp.f32 %s, 0f00000000, %s, %s;", R(e, mx), R(e, mx), R(e, empty));
        emit(e, "sub.f32 %s, %s, %s;", R(e, a), R(e, a), R(e, mx));
        emit(e, "ex2.approx.ftz.f32 %s, %s;", R(e, a), R(e, a));
        emit(e, "sub.f32 %s, %s, %s;", R(e, bb), R(e, s2), R(e, mx));
        emit(e, "ex2.approx.ftz.f32 %s, %s;", R(e, bb), R(e, bb));
        emit(e, "add.f32 %s, %s, %s;", R(e, a), R(e, a), R(e, bb));
        emit(e, "lg2.approx.f32 %s, %s;", R(e, a), R(e, a));
        emit(e, "add.f32 %s, %s, %s;", R(e, a), R(e, a), R(e, mx));
        emit(e, "neg.f32 %s, %s;", R(e, nl2), R(e, a));
        emit(e, "add.f32 %s, %s, %s;", R(e, ps), R(e, s2), R(e, nl2));
        emit(e, "ex2.approx.ftz.f32 %s, %s;", R(e, ps), R(e, ps));
        emit(e, "selp.f32 %s, %s, %s, %s;", R(e, nl2), PTX_NEG_INF, R(e, nl2), R(e, empty));
        emit(e, "selp.f32 %s, 0f00000000, %s, %s;", R(e, ps), R(e, ps), R(e, empty));
        emit_note(e, "this row's dsink term -p_sink D (only the lane group's lane 0 of rows inside the sequence)");
        emit(e, "mul.f32 %s, %s, %s;", R(e, ps), R(e, ps), R(e, acc));
        emit(e, "@%s sub.f32 %%pr_part, %%pr_part, %s;", R(e, wr), R(e, ps));
    } else {
        emit_note(e, "nl2 = -LSE log2 e; a row that saw no key (LSE -inf) gets -inf, so its P is 0");
        emit(e, "setp.ne.f32 %s, %s, %s;", R(e, inf), R(e, lse), PTX_NEG_INF);
        emit(e, "mul.f32 %s, %s, %s;", R(e, nl2), R(e, lse), PTX_LOG2E);
        emit(e, "neg.f32 %s, %s;", R(e, nl2), R(e, nl2));
        emit(e, "selp.f32 %s, %s, %s, %s;", R(e, nl2), R(e, nl2), PTX_NEG_INF, R(e, inf));
    }
    pre_dlse(e, t, lse, nl2, acc);
    emit_note(e, "rows past the sequence: D = 0, nl2 = -inf");
    emit(e, "selp.f32 %s, %s, 0f00000000, %s;", R(e, acc), R(e, acc), R(e, in));
    emit(e, "selp.f32 %s, %s, %s, %s;", R(e, nl2), R(e, nl2), PTX_NEG_INF, R(e, in));
    Reg wa = reg_b64(e, "pr_wa"), r64 = reg_b64(e, "pr_r64");
    emit(e, "cvt.u64.u32 %s, %s;", R(e, r64), R(e, r));
    emit(e, "add.s64 %s, %%ax_row0, %s;", R(e, r64), R(e, r64));
    emit(e, "shl.b64 %s, %s, 2;", R(e, r64), R(e, r64));
    emit(e, "add.s64 %s, %%dpsum, %s;", R(e, wa), R(e, r64));
    op_st_global_f32(e, reg_find(e, "pr_lead"), wa, acc);
    emit(e, "add.s64 %s, %%nlse2, %s;", R(e, wa), R(e, r64));
    op_st_global_f32(e, reg_find(e, "pr_lead"), wa, nl2);
}

/* tail_split=1 (plan note tail split): the split tiles' partials and counters zeroed, the grid striding over
 * p_tail_bytes (0: no split this call) in float4s. */
static void pre_zero_tail(Emit *e)
{
    char l_loop[NAME], l_done[NAME];
    Reg i = reg_b32(e, "pz_i"), step = reg_b32(e, "pz_step"), a = reg_b64(e, "pz_a"), pr = reg_pred(e, "pz_p");
    Reg z[4];
    for (int k = 0; k < 4; k++) z[k] = reg_find(e, "pr_z%d", k);
    emit_section(e, "plan note tail split: the split tiles' area zeroed, float4 (cta x %d + thread) + grid x %d k",
                 AUX_THREADS, AUX_THREADS);
    emit(e, "mad.lo.u32 %s, %%ax_cta, %d, %%thread;", R(e, i), AUX_THREADS);
    emit(e, "shl.b32 %s, %s, 4;", R(e, i), R(e, i));
    emit(e, "mov.u32 %s, %%nctaid.x;", R(e, step));
    emit(e, "shl.b32 %s, %s, %d;", R(e, step), R(e, step), 11 /* x 128 threads x 16 bytes */);
    emit_label(e, new_label(e, l_loop, sizeof l_loop, "pz_loop"));
    emit(e, "setp.ge.u32 %s, %s, %%tail_bytes;", R(e, pr), R(e, i));
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, l_done, sizeof l_done, "pz_done"));
    emit(e, "cvt.u64.u32 %s, %s;", R(e, a), R(e, i));
    emit(e, "add.s64 %s, %s, %%tail_ws;", R(e, a), R(e, a));
    op_st_global_v4_f32(e, REG_NONE, a, 0, z);
    emit(e, "add.u32 %s, %s, %s;", R(e, i), R(e, i), R(e, step));
    emit(e, "bra.uni %s;", l_loop);
    emit_label(e, l_done);
}

static int pre_emit(Emit *e)
{
    const Plan *p = e->p;
    int d = p->qk, lanes = d / ROW_ELEMS, rpp = AUX_THREADS / lanes, passes = p->bm / rpp;
    aux_prologue(e);
    if (p->cfg.sink) {
        Reg part = reg_f32(e, "pr_part");
        emit(e, "mov.f32 %s, 0f00000000;", R(e, part));
    }
    aux_coords(e, pre_zero_partial);
    emit_section(e, "rows: D = rowsum(dO * O), nl2 (plan note rows: %d lanes a row, %d rows a pass)", lanes, rpp);
    Reg g = reg_b32(e, "pr_group"), c0 = reg_b32(e, "pr_c0"), lead = reg_pred(e, "pr_lead"), t = reg_b32(e, "pr_tt");
    emit_div_imm(e, R(e, g), "%thread", lanes);
    emit_rem_imm(e, R(e, t), "%thread", lanes);
    emit(e, "mul.lo.u32 %s, %s, %d;", R(e, c0), R(e, t), ROW_ELEMS);
    emit(e, "setp.eq.u32 %s, %s, 0;", R(e, lead), R(e, t));
    emit(e, "setp.ne.u64 %s, %%dlse, 0;", R(e, reg_pred(e, "pr_has_dlse")));
    if (p->cfg.sink) {
        Reg sa = reg_b64(e, "pr_sa"), s2 = reg_f32(e, "pr_sink2");
        emit_note(e, "plan note sink: this head's sink logit, log2 units");
        emit(e, "mul.wide.u32 %s, %%ax_h, 4;", R(e, sa));
        emit(e, "add.s64 %s, %s, %%sink;", R(e, sa), R(e, sa));
        op_ld_global(e, REG_NONE, "f32", s2, sa, 0);
        emit(e, "mul.f32 %s, %s, %s;", R(e, s2), R(e, s2), PTX_LOG2E);
    }
    for (int ps = 0; ps < passes; ps++) pre_row(e, ps, rpp, lanes);
    emit_section(e, "the block's dQ accumulator (%d x %d f32) zeroed: float4 k x 128 + thread", p->bm, d);
    Reg za = reg_b64(e, "pr_za"), z[4];
    for (int k = 0; k < 4; k++) {
        z[k] = reg_f32(e, "pr_z%d", k);
        emit(e, "mov.f32 %s, 0f00000000;", R(e, z[k]));
    }
    emit(e, "mul.lo.u64 %s, %%ax_row0, %d;", R(e, za), d * BWD_F32);
    emit(e, "add.s64 %s, %s, %%dq_accum;", R(e, za), R(e, za));
    emit(e, "mad.wide.u32 %s, %%thread, 16, %s;", R(e, za), R(e, za));
    for (int k = 0; k < p->bm * d / 4 / AUX_THREADS; k++)
        op_st_global_v4_f32(e, REG_NONE, za, (uint32_t)(k * AUX_THREADS * 16), z);
    if (p->cfg.tail_split) pre_zero_tail(e);
    if (p->cfg.deterministic) {
        emit_note(e, "plan note deterministic: the block's turn counter = 0 (thread 0)");
        Reg sa = reg_b64(e, "pr_sem"), zero = reg_b32(e, "pr_zero"), t0 = reg_pred(e, "pr_sem_t0");
        emit(e, "setp.eq.u32 %s, %%thread, 0;", R(e, t0));
        emit(e, "mov.b32 %s, 0;", R(e, zero));
        bwd_det_counter(e, sa, reg_find(e, "ax_row0"));
        op_st_global_b32(e, t0, sa, zero);
    }
    if (p->cfg.sink) {
        emit_section(e, "plan note sink: the CTA's dsink partial (warps, then smem)");
        Reg part = reg_find(e, "pr_part"), tmp = reg_f32(e, "pr_tmp"), sb = reg_b32(e, "pr_red");
        Reg l0 = reg_pred(e, "pr_lane0"), t0 = reg_pred(e, "pr_t0"), a = reg_b64(e, "pr_part_addr");
        sfx_reduce_lanes(e, "add", part, tmp, 32);
        const SmemEntry *se = plan_smem_find(p, "sink_red");
        emit(e, "mov.u32 %s, fa4_smem;", R(e, sb));
        emit(e, "add.u32 %s, %s, %u;", R(e, sb), R(e, sb), se ? se->offset : 0);
        emit(e, "setp.eq.u32 %s, %%lane, 0;", R(e, l0));
        emit(e, "shl.b32 %%ax_t, %%warp, 2;");
        emit(e, "add.u32 %%ax_t, %%ax_t, %s;", R(e, sb));
        op_st_shared_b32_if(e, l0, reg_find(e, "ax_t"), 0, part);
        op_bar_sync(e, 0, AUX_THREADS);
        emit(e, "setp.eq.u32 %s, %%thread, 0;", R(e, t0));
        emit(e, "@!%s bra $exit;", R(e, t0));
        emit(e, "mov.f32 %s, 0f00000000;", R(e, part));
        for (int w = 0; w < AUX_WARPS; w++) {
            op_ld_shared_b32(e, tmp, sb, (uint32_t)(4 * w));
            emit(e, "add.f32 %s, %s, %s;", R(e, part), R(e, part), R(e, tmp));
        }
        emit(e, "mul.wide.u32 %s, %%ax_cta, 4;", R(e, a));
        emit(e, "add.s64 %s, %s, %%sink_part;", R(e, a), R(e, a));
        op_st_global_f32(e, REG_NONE, a, part);
    }
    emit_label(e, "$exit");
    emit(e, "ret;");
    return e->failed ? -1 : 0;
}

/* ---------------------------------------------------------------- mha-bwd-dq */

static void dq_sink(Emit *e)
{
    char l_no[NAME], l_loop[NAME], l_done[NAME];
    Reg pr = reg_pred(e, "dq_p"), i = reg_b32(e, "dq_si"), n = reg_b32(e, "dq_sn"), a = reg_b64(e, "dq_sa");
    Reg s = reg_f32(e, "dq_ssum"), v = reg_f32(e, "dq_sv"), tmp = reg_f32(e, "dq_stmp"), bb = reg_b32(e, "dq_sb");
    Reg mm = reg_b32(e, "dq_sm"), idx = reg_b32(e, "dq_sidx");
    emit_section(e, "plan note sink: dsink[h] = sum over (batch, m-block) of the partials, by warp 0 of the CTA of "
                 "(m-block 0, batch 0)");
    emit(e, "or.b32 %s, %%ax_m, %%ax_b;", R(e, idx));
    emit(e, "or.b32 %s, %s, %%warp;", R(e, idx), R(e, idx));
    emit(e, "setp.ne.u32 %s, %s, 0;", R(e, pr), R(e, idx));
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, l_no, sizeof l_no, "dq_no_sink"));
    emit(e, "mul.lo.u32 %s, %%batch, %%ax_nm;", R(e, n));
    emit(e, "mov.f32 %s, 0f00000000;", R(e, s));
    emit(e, "mov.u32 %s, %%lane;", R(e, i));
    emit_label(e, new_label(e, l_loop, sizeof l_loop, "dq_sink_loop"));
    emit(e, "setp.ge.u32 %s, %s, %s;", R(e, pr), R(e, i), R(e, n));
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, l_done, sizeof l_done, "dq_sink_done"));
    emit_note(e, "partial i = (b, m): sink_part[(b heads_q + h) m_blocks + m]");
    emit(e, "div.u32 %s, %s, %%ax_nm;", R(e, bb), R(e, i));
    emit(e, "rem.u32 %s, %s, %%ax_nm;", R(e, mm), R(e, i));
    emit(e, "mad.lo.u32 %s, %s, %%heads_q, %%ax_h;", R(e, idx), R(e, bb));
    emit(e, "mad.lo.u32 %s, %s, %%ax_nm, %s;", R(e, idx), R(e, idx), R(e, mm));
    emit(e, "mad.wide.u32 %s, %s, 4, %%sink_part;", R(e, a), R(e, idx));
    op_ld_global(e, REG_NONE, "f32", v, a, 0);
    emit(e, "add.f32 %s, %s, %s;", R(e, s), R(e, s), R(e, v));
    emit(e, "add.u32 %s, %s, 32;", R(e, i), R(e, i));
    emit(e, "bra.uni %s;", l_loop);
    emit_label(e, l_done);
    sfx_reduce_lanes(e, "add", s, tmp, 32);
    emit(e, "setp.eq.u32 %s, %%lane, 0;", R(e, pr));
    emit(e, "mul.wide.u32 %s, %%ax_h, 4;", R(e, a));
    emit(e, "add.s64 %s, %s, %%dsink;", R(e, a), R(e, a));
    op_st_global_f32(e, pr, a, s);
    emit_label(e, l_no);
}

/* The accumulator's float4 groups (the main kernel's fragment layout) into the smem stage: f32 row-major [bm][d],
 * 16-byte chunk c of row r at chunk c ^ (r % 8) (plan note stage). A thread's float4 holds two rows 8 apart, each
 * a column pair: two 8-byte stores; r % 8 is lane / 4 for every row it holds, so its swizzle is one register. */
static void dq_to_stage(Emit *e, Reg stage, int tm, int dq_n)
{
    const Plan *p = e->p;
    int d = p->qk, r4 = dq_n / 8, groups = p->bm * d / 4 / AUX_THREADS;
    Reg r0 = reg_b32(e, "dq_r0"), t = reg_b32(e, "dq_t"), xs = reg_b32(e, "dq_xs"), src = reg_b64(e, "dq_src");
    Reg base = reg_b32(e, "dq_wbase"), ch = reg_b32(e, "dq_ch"), a = reg_b32(e, "dq_wa");
    emit_section(e, "accumulator -> smem stage: float4 g x 128 + thread = registers 4j..4j+3 of the thread of tile w "
                 "(g = w x %d + j); plan note layout, plan note stage", r4);
    emit_note(e, "this thread's fragment row 16 (t / 32) + (t %% 32) / 4 and column 2 (t %% 4) in a tile");
    emit(e, "shr.u32 %s, %%thread, 5;", R(e, r0));
    emit(e, "shl.b32 %s, %s, 4;", R(e, r0), R(e, r0));
    emit(e, "shr.u32 %s, %%lane, 2;", R(e, t));
    emit(e, "add.u32 %s, %s, %s;", R(e, r0), R(e, r0), R(e, t));
    emit_note(e, "chunk of column 2 (t %% 4) + 8 j' is 2 j' + (t %% 4) / 2; swizzled: xor (row %% 8) = xor lane / 4");
    emit(e, "bfe.u32 %s, %%lane, 1, 1;", R(e, xs));
    emit(e, "xor.b32 %s, %s, %s;", R(e, xs), R(e, xs), R(e, t));
    emit(e, "and.b32 %s, %%lane, 1;", R(e, t));
    emit(e, "shl.b32 %s, %s, 3;", R(e, t), R(e, t));
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, base), R(e, r0), d * BWD_F32, R(e, stage));
    emit(e, "add.u32 %s, %s, %s;", R(e, base), R(e, base), R(e, t));
    emit(e, "mul.lo.u64 %s, %%ax_row0, %d;", R(e, src), d * BWD_F32);
    emit(e, "add.s64 %s, %s, %%dq_accum;", R(e, src), R(e, src));
    emit(e, "mad.wide.u32 %s, %%thread, 16, %s;", R(e, src), R(e, src));
    enum { BATCH = 8 }; /* float4 loads in flight before their stores */
    Reg v[BATCH][4];
    for (int b = 0; b < BATCH; b++)
        for (int k = 0; k < 4; k++) v[b][k] = reg_f32(e, "dq_v%d_%d", b, k);
    for (int g0 = 0; g0 < groups; g0 += BATCH) {
        int nb = groups - g0 < BATCH ? groups - g0 : BATCH;
        for (int b = 0; b < nb; b++) op_ld_global_v4_f32(e, REG_NONE, v[b], src, (uint32_t)((g0 + b) * AUX_THREADS * 16));
        for (int b = 0; b < nb; b++) {
            int g = g0 + b, w = g / r4, j = g % r4, wm = w % tm, wn = w / tm, chunk = (dq_n * wn + 8 * j) / 4;
            emit_note(e, "float4 group %d: tile %d (rows +%d, columns +%d), registers %d..%d", g, w, BWD_MMA_M * wm,
                      dq_n * wn + 8 * j, 4 * j, 4 * j + 3);
            emit(e, "xor.b32 %s, %s, %d;", R(e, ch), R(e, xs), chunk);
            emit(e, "shl.b32 %s, %s, 4;", R(e, ch), R(e, ch));
            emit(e, "add.u32 %s, %s, %s;", R(e, a), R(e, base), R(e, ch));
            for (int h = 0; h < 2; h++)
                op_st_shared_v2_f32(e, a, (uint32_t)((BWD_MMA_M * wm + 8 * h) * d * BWD_F32), v[b][2 * h],
                                    v[b][2 * h + 1]);
        }
    }
}

/* The stage out: thread t converts chunk t % (d / 4) (4 columns) of row t / (d / 4) + pass x rows-a-pass and
 * stores 8 bytes, so a warp's stores cover whole rows of dQ. */
static void dq_from_stage(Emit *e, Reg stage)
{
    const Plan *p = e->p;
    int d = p->qk, chunks = d / 4, rpp = AUX_THREADS / chunks, passes = p->bm / rpp;
    Reg k = reg_b32(e, "dq_k"), rr = reg_b32(e, "dq_rr"), i0 = reg_b32(e, "dq_i0"), i = reg_b32(e, "dq_i");
    Reg col = reg_b32(e, "dq_col"), dst = reg_b64(e, "dq_dst"), step = reg_b64(e, "dq_step");
    Reg rbase = reg_b32(e, "dq_rbase"), x = reg_b32(e, "dq_x"), a = reg_b32(e, "dq_ra"), in = reg_pred(e, "dq_in");
    Reg f[4], pk[2];
    for (int q = 0; q < 4; q++) f[q] = reg_f32(e, "dq_f%d", q);
    for (int q = 0; q < 2; q++) pk[q] = reg_b32(e, "dq_pk%d", q);
    emit_section(e, "smem stage -> dq: chunk t %% %d of row t / %d + %d x pass, x scale, %s, 8-byte stores "
                 "(plan note outputs)", chunks, chunks, rpp, dtype_name[p->cfg.dtype]);
    emit_rem_imm(e, R(e, k), "%thread", chunks);
    emit_div_imm(e, R(e, rr), "%thread", chunks);
    emit(e, "mad.lo.u32 %s, %%ax_m, %d, %s;", R(e, i0), p->bm, R(e, rr));
    emit(e, "shl.b32 %s, %s, 2;", R(e, col), R(e, k));
    row_addr(e, dst, reg_find(e, "dq"), reg_find(e, "dq_stride_b"), reg_find(e, "dq_stride_s"),
             reg_find(e, "dq_stride_h"), i0, col, p->elem_bytes);
    emit(e, "mul.lo.u64 %s, %%dq_stride_s, %d;", R(e, step), rpp * p->elem_bytes);
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, rbase), R(e, rr), d * BWD_F32, R(e, stage));
    for (int ps = 0; ps < passes; ps++) {
        emit_note(e, "pass %d: row +%d", ps, ps * rpp);
        emit(e, "add.u32 %s, %s, %d;", R(e, x), R(e, rr), ps * rpp);
        emit(e, "and.b32 %s, %s, 7;", R(e, x), R(e, x));
        emit(e, "xor.b32 %s, %s, %s;", R(e, x), R(e, x), R(e, k));
        emit(e, "shl.b32 %s, %s, 4;", R(e, x), R(e, x));
        emit(e, "add.u32 %s, %s, %s;", R(e, a), R(e, rbase), R(e, x));
        op_ld_shared_v4_b32(e, f, a, (uint32_t)(ps * rpp * d * BWD_F32));
        for (int q = 0; q < 4; q++) emit(e, "mul.f32 %s, %s, %%scale;", R(e, f[q]), R(e, f[q]));
        op_cvt_pack(e, p->cfg.dtype, pk[0], f[1], f[0]);
        op_cvt_pack(e, p->cfg.dtype, pk[1], f[3], f[2]);
        emit(e, "add.u32 %s, %s, %d;", R(e, i), R(e, i0), ps * rpp);
        emit(e, "setp.lt.u32 %s, %s, %%ax_len;", R(e, in), R(e, i));
        op_st_global_v2_b32(e, in, dst, 0, pk[0], pk[1]);
        if (ps + 1 < passes) emit(e, "add.s64 %s, %s, %s;", R(e, dst), R(e, dst), R(e, step));
    }
}

static int dq_emit(Emit *e)
{
    const Plan *p = e->p;
    int d = p->qk, tm, tn, dq_n;
    if (bwd_dq_split(p->bm, p->bn, d, &tm, &tn, &dq_n)) {
        emit_fail(e, "internal: the dQ block %dx%d does not split over bn %d", p->bm, d, p->bn);
        return -1;
    }
    const SmemEntry *se = plan_smem_find(p, "stage");
    if (!se) {
        emit_fail(e, "internal: mha-bwd-dq has no smem stage");
        return -1;
    }
    aux_prologue(e);
    aux_coords(e, p->cfg.sink ? dq_sink : NULL);
    if (p->cfg.sink) dq_sink(e);
    Reg stage = reg_b32(e, "dq_stage");
    emit(e, "mov.u32 %s, fa4_smem;", R(e, stage));
    emit(e, "add.u32 %s, %s, %u;", R(e, stage), R(e, stage), se->offset);
    dq_to_stage(e, stage, tm, dq_n);
    op_bar_sync(e, 0, AUX_THREADS);
    dq_from_stage(e, stage);
    emit_label(e, "$exit");
    emit(e, "ret;");
    return e->failed ? -1 : 0;
}

const Family mha_bwd_pre_family = {KIND_MHA_BWD_PRE, aux_defaults, aux_check, pre_plan, pre_emit};
const Family mha_bwd_dq_family = {KIND_MHA_BWD_DQ, aux_defaults, aux_check, dq_plan, dq_emit};
