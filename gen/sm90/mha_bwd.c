/* sm90/mha_bwd.c - the sm_90a attention backward's main kernel (kind mha-bwd; docs/kernels/mha-bwd.md).
 *
 * One CTA per (kv block of bn keys, kv head, batch). Roles (plan roles):
 *   producer warp 0  one thread: K and V once, then per (query head, m-block) Q + nl2 and dO + D into
 *                    `stages`-deep rings (TMA tiles and 1-D bulk copies on the slots' full mbarriers)
 *   producer warp 1  the dQ writer: per m-block one cp.reduce.async.bulk .add.f32 of the smem dQ block
 *   consumers        warpgroup w owns keys 64w..64w+63 of the block; everything is computed transposed
 *                    (keys in rows), so P^T and dS^T are already the A fragments of the dV and dK wgmmas:
 *                      S^T = K Q^T, dP^T = V dO^T           SS
 *                      P = exp2(S^T scale_log2 + nl2)        (masked blocks: -inf first)
 *                      dS = P (dP - D)
 *                      dV += P^T dO, dK += dS^T Q           RS, B MN-major
 *                      dS^T -> smem; dQ = dS K              SS, A and B MN-major
 *                    then dQ (f32) to smem for the writer; dK, dV stay in registers for the whole loop and
 *                    leave through smem (over the dead K and V tiles) by TMA stores.
 * The three roles walk the same iterations: it = g x nm + (m - m_begin), g the query head of the group.
 * Depth > 128 (plan split_depth): no writer; the consumers split S and dP by keys and dK, dV, dQ by depth
 * (sm90/mha_bwd_depth.c); prologue, loader and epilogue are shared.
 */
#include <stdio.h>
#include <string.h>

#include "../kernel.h"
#include "../mha_bwd.h"
#include "../ops.h"
#include "../ops_bwd.h"
#include "../ops_copy.h"
#include "../softmax.h"
#include "bwd90.h"

enum { NAME = 32, CHUNK_ELEMS = 64, ROW_BYTES = 128, K16_ROWS = 16 };


/* ------------------------------------------------------------------ */
/* prologue: parameters, the tile, its m-block range                   */
/* ------------------------------------------------------------------ */

static void emit_prologue(Emit *e)
{
    const Plan *p = e->p;
    emit_section(e, "prologue: thread coordinates, parameters, smem base");
    kernel_coords(e);
    kernel_params(e);
    if (p->cfg.varlen)
        emit_note(e, "plan note varlen: p_seqlen_q / p_seqlen_k are the longest sequences; p_total_q / p_total_k the "
                  "packed rows that bound cu_seqlens");
    bwd_tile_coords(e);
}

static void emit_barrier_init(Emit *e)
{
    const Plan *p = e->p;
    char lbl[NAME];
    static const char *const ring[] = {"bar_q_full", "bar_q_empty", "bar_do_full", "bar_do_empty"};
    Reg b = mbar_init_begin(e, lbl, sizeof lbl, "prologue: mbarrier init (thread 0), then every thread syncs");
    Mbar kv = mbar_plan(e, "bar_kv_full");
    mbar_init(e, b, &kv, 0);
    if (!sm90bwd_of(p)->split_depth) {
        Mbar dqf = mbar_plan(e, "bar_dq_full"), dqe = mbar_plan(e, "bar_dq_empty");
        mbar_init(e, b, &dqf, 0);
        mbar_init(e, b, &dqe, 0);
    }
    for (int i = 0; i < p->stages; i++) {
        emit_note(e, "plan: ring stage %d", i);
        for (int k = 0; k < 4; k++) {
            Mbar m = mbar_plan(e, ring[k]);
            mbar_init(e, b, &m, i);
        }
    }
    mbar_init_end(e, lbl);
    op_bar_sync(e, 0, p->threads);
}

/* ------------------------------------------------------------------ */
/* producer: loads and the dQ writer                                    */
/* ------------------------------------------------------------------ */

static void emit_loader(Emit *e)
{
    const BwdLoads l = BWD_LOADS_OF(sm90bwd_of(e->p));
    bwd_emit_loads(e, &l, "role loader (producer warp 0, one thread): K and V, then the Q / dO rings", 0);
}

static void emit_writer(Emit *e)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    char l_loop[NAME], l_done[NAME];
    Reg pr = reg_pred(e, "wr_p"), full = reg_b32(e, "wr_full"), empty = reg_b32(e, "wr_empty");
    Reg src = reg_b32(e, "wr_src"), phase = reg_b32(e, "wr_phase"), itr = reg_b32(e, "wr_it");
    Reg m = reg_b32(e, "wr_m"), hq = reg_b32(e, "wr_hq"), ws = reg_b64(e, "wr_ws"), dst = reg_b64(e, "wr_dst");
    emit_section(e, "role dQ writer (producer warp 1, one thread): per m-block, the smem dQ block into the "
                 "accumulator (plan note dq)");
    mbar_at(e, full, s->bar_dq_full, 0);
    mbar_at(e, empty, s->bar_dq_empty, 0);
    smem_at(e, src, s->off_dq);
    emit(e, "mov.u32 %s, 0;", R(e, phase));
    bwd_iter_start(e, itr);
    emit_label(e, new_label(e, l_loop, sizeof l_loop, "wr_loop"));
    emit(e, "setp.ge.u32 %s, %s, %%iters;", R(e, pr), R(e, itr));
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, l_done, sizeof l_done, "wr_done"));
    bwd_iter_coords(e, itr, m, hq);
    bwd_ws_row(e, ws, m, hq);
    emit(e, "mul.lo.u64 %s, %s, %d;", R(e, dst), R(e, ws), p->qk * BWD_F32);
    emit(e, "add.s64 %s, %s, %%dq_accum;", R(e, dst), R(e, dst));
    op_mbar_wait(e, full, phase);
    if (s->det) {
        Reg sem = reg_b64(e, "wr_sem");
        emit_note(e, "plan note deterministic: this kv block's turn at the dQ block");
        bwd_det_counter(e, sem, ws);
        bwd_det_wait_turn(e, sem, m, s->det_arrivals);
        op_fence_proxy_async_global(e);
        op_bulk_reduce_add_f32(e, dst, src, s->dq_bytes);
        op_bulk_commit(e);
        emit_note(e, "the reduction's writes complete (not only its reads), then the next kv block's turn");
        op_bulk_wait(e, 0);
        op_fence_proxy_async_global(e);
        op_red_release_gpu_add_u32(e, REG_NONE, sem, 1);
    } else {
        op_bulk_reduce_add_f32(e, dst, src, s->dq_bytes);
        op_bulk_commit(e);
        emit_note(e, "the consumers may refill the block once the reduction has read it");
        op_bulk_wait_read(e, 0);
    }
    op_mbar_arrive(e, empty);
    emit(e, "xor.b32 %s, %s, 1;", R(e, phase), R(e, phase));
    emit(e, "add.u32 %s, %s, 1;", R(e, itr), R(e, itr));
    emit(e, "bra.uni %s;", l_loop);
    emit_label(e, l_done);
    emit_note(e, "the reductions must land before the CTA retires");
    op_bulk_wait(e, 0);
    emit(e, "bra.uni $exit;");
}

static void emit_producer(Emit *e)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    char l_writer[NAME];
    emit_section(e, "role producer (warpgroup 0): plan regs %d", s->producer_regs);
    op_setmaxnreg(e, s->producer_regs, p->entry_regs);
    Reg pr = reg_pred(e, "p_role");
    if (s->split_depth) {
        emit_note(e, "lane 0 of warp 0 loads (the consumers add dQ themselves); the rest has nothing to do");
        emit(e, "setp.ne.u32 %s, %%thread, 0;", R(e, pr));
        emit(e, "@%s bra $exit;", R(e, pr));
        emit_loader(e);
        return;
    }
    emit_note(e, "lane 0 of warp 0 loads, lane 0 of warp 1 writes dQ; the rest of the warpgroup has nothing to do");
    emit(e, "setp.ne.u32 %s, %%lane, 0;", R(e, pr));
    emit(e, "@%s bra $exit;", R(e, pr));
    emit(e, "setp.eq.u32 %s, %%warp, 1;", R(e, pr));
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, l_writer, sizeof l_writer, "writer"));
    emit(e, "setp.ne.u32 %s, %%warp, 0;", R(e, pr));
    emit(e, "@%s bra $exit;", R(e, pr));
    emit_loader(e);
    emit_label(e, l_writer);
    emit_writer(e);
}

/* ------------------------------------------------------------------ */
/* consumers                                                            */
/* ------------------------------------------------------------------ */

/* S^T = A B^T over the depth: A = the consumer's 64 rows of tile a0 (K or V, K-major), B = the m-block's
 * slot b0 (Q or dO, K-major); acc = s or dp. */
static void emit_sdp(Emit *e, const char *what, Reg a0, Reg b0, Reg acc)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    Reg alo = reg_b32(e, "cs_alo"), blo = reg_b32(e, "cs_blo"), ad = reg_b64(e, "cs_ad"), bd = reg_b64(e, "cs_bd");
    Reg ab = reg_b32(e, "cs_abase"), bb = reg_b32(e, "cs_bbase");
    emit_note(e, "%s: %d x wgmma m64n%dk16 SS, both K-major (plan note sdp wgmma)", what, s->steps_d, p->bm);
    bwd90_desc_lo(e, ab, a0);
    bwd90_desc_lo(e, bb, b0);
    emit(e, "or.b32 %s, %s, 0x%08X;", R(e, ab), R(e, ab), sm90_desc_lo_lbo(16));
    emit(e, "or.b32 %s, %s, 0x%08X;", R(e, bb), R(e, bb), sm90_desc_lo_lbo(16));
    for (int kk = 0; kk < s->steps_d; kk++) {
        emit(e, "add.u32 %s, %s, %u;", R(e, alo), R(e, ab), op_desc_kstep(kk, 4, 32, s->kv_chunk_bytes));
        emit(e, "add.u32 %s, %s, %u;", R(e, blo), R(e, bb), op_desc_kstep(kk, 4, 32, s->q_chunk_bytes));
        emit(e, "mov.b64 %s, {%s, %%cs_hi_kmaj};", R(e, ad), R(e, alo));
        emit(e, "mov.b64 %s, {%s, %%cs_hi_kmaj};", R(e, bd), R(e, blo));
        op_wgmma_ss(e, p->bm, p->cfg.dtype, acc, ad, bd, kk ? 1 : 0, 0);
    }
}

/* acc += A B: A = 16-bit pairs `a` (P^T or dS^T, registers), B = slot b0 (dO or Q) MN-major. */
static void emit_dkv(Emit *e, const char *what, Reg acc, Reg a, Reg b0)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    Reg bdesc = reg_b64(e, "cs_mn_desc"), bd = reg_b64(e, "cs_bd");
    emit_note(e, "%s: %d x wgmma m64n%dk16 RS, B MN-major (LBO = chunk stride %u, SBO = 8 rows; plan note dkv wgmma)",
              what, s->steps_m, p->qk, s->q_chunk_bytes);
    op_sm90_desc(e, bdesc, b0, s->q_chunk_bytes, 8 * ROW_BYTES, 128);
    for (int kb = 0; kb < s->steps_m; kb++) {
        Reg ar[4];
        for (int i = 0; i < 4; i++) ar[i] = reg_at(e, a, 4 * kb + i);
        emit(e, "add.s64 %s, %s, %u;", R(e, bd), R(e, bdesc), op_desc_delta((uint32_t)(kb * K16_ROWS * ROW_BYTES)));
        op_wgmma_rs(e, p->qk, p->cfg.dtype, acc, ar, bd, REG_NONE, 1);
    }
}

/* dQ tile of this consumer = dS K: A = dS^T of the stage (MN-major: queries inside a key row), B = K
 * (MN-major: depth inside a key row). */
static void emit_dq_mma(Emit *e, Reg ds_stage_addr)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    Reg a = reg_b32(e, "cs_dqa"), b = reg_b32(e, "cs_dqb"), adesc = reg_b64(e, "cs_dqad"), bdesc = reg_b64(e, "cs_dqbd");
    Reg ad = reg_b64(e, "cs_ad"), bd = reg_b64(e, "cs_bd");
    emit_note(e, "dQ = dS K: %d x wgmma m64n%dk16 SS, A and B MN-major (plan note dq wgmma); this consumer's tile: "
              "rows + 64 cs_dq_tm, columns + %d cs_dq_tn", s->steps_n, s->dq_n, s->dq_n);
    emit(e, "mad.lo.u32 %s, %%cs_dq_tm, %u, %s;", R(e, a), s->ds_atom_bytes, R(e, ds_stage_addr));
    emit(e, "mov.u32 %s, %%cs_dq_k;", R(e, b));
    op_sm90_desc(e, adesc, a, s->ds_atom_bytes, 8 * ROW_BYTES, 128);
    op_sm90_desc(e, bdesc, b, s->kv_chunk_bytes, 8 * ROW_BYTES, 128);
    for (int kk = 0; kk < s->steps_n; kk++) {
        uint32_t step = op_desc_delta((uint32_t)(kk * K16_ROWS * ROW_BYTES));
        emit(e, "add.s64 %s, %s, %u;", R(e, ad), R(e, adesc), step);
        emit(e, "add.s64 %s, %s, %u;", R(e, bd), R(e, bdesc), step);
        op_wgmma_ss_t(e, s->dq_n, p->cfg.dtype, reg_find(e, "dq"), ad, bd, kk ? 1 : 0, 1, 1);
    }
}

/* Masked blocks: this thread's key rows j = n0 + 64 w + row_h and query columns m0 + 2 (lane % 4) + c;
 * a score is hidden unless t_lo <= c <= t_hi (plan mask), keys past seqlen_k hide their whole row. */
static void emit_mask(Emit *e, Reg m)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    int wl, wr;
    mask_bounds(&p->cfg, &wl, &wr);
    Reg j = reg_b32(e, "mk_j"), q0 = reg_b32(e, "mk_q0"), lo = reg_b32(e, "mk_lo"), hi = reg_b32(e, "mk_hi");
    Reg t = reg_b32(e, "mk_t"), pk = reg_pred(e, "mk_kout");
    Reg sacc = reg_find(e, "s");
    emit_note(e, "mask: row = key j, column c = query m0 + 2 (lane %% 4) + c; visible for j - off - %d <= query <= "
              "min(j - off + %d, seqlen_q - 1) (-1: unbounded)", wr, wl);
    emit(e, "mad.lo.u32 %s, %s, %d, %%cs_lm2;", R(e, q0), R(e, m), p->bm);
    for (int h = 0; h < 2; h++) {
        emit(e, "add.u32 %s, %%cs_key%d, %%n0;", R(e, j), h);
        emit(e, "sub.u32 %s, %%seqlen_q, 1;", R(e, hi));
        if (wl >= 0) {
            emit(e, "sub.s32 %s, %s, %%kv_off;", R(e, t), R(e, j));
            emit(e, "add.s32 %s, %s, %d;", R(e, t), R(e, t), wl);
            emit(e, "min.s32 %s, %s, %s;", R(e, hi), R(e, hi), R(e, t));
        }
        emit(e, "sub.s32 %s, %s, %s;", R(e, hi), R(e, hi), R(e, q0));
        emit(e, "setp.ge.u32 %s, %s, %%seqlen_k;", R(e, pk), R(e, j));
        emit(e, "@%s mov.u32 %s, -1;", R(e, pk), R(e, hi));
        if (wr >= 0) {
            emit(e, "sub.s32 %s, %s, %%kv_off;", R(e, lo), R(e, j));
            emit(e, "sub.s32 %s, %s, %d;", R(e, lo), R(e, lo), wr);
            emit(e, "sub.s32 %s, %s, %s;", R(e, lo), R(e, lo), R(e, q0));
        }
        for (int q = 0; q < s->sdp_regs / 4; q++)
            for (int x = 0; x < 2; x++)
                sfx_mask(e, reg_at(e, sacc, bwd90_acc(q, h, x)), 8 * q + x, hi, wr >= 0 ? lo : REG_NONE);
    }
}

/* dst (f32) = the low (half 0) or high (half 1) 16-bit element of a packed pair. */
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

/* The address of this thread's first column (nl2 or D) in the stage's ring slot: column pair q is at
 * 8 q + 2 (lane % 4), loaded next to its use (load_pair), so a pair lives in registers only briefly. */
static void cols_addr(Emit *e, Reg a, uint32_t off, Reg stage)
{
    const Sm90BwdPlan *s = sm90bwd_of(e->p);
    smem_indexed(e, a, off, stage, s->vec_stage_bytes);
    emit(e, "mad.lo.u32 %s, %%cs_lm, 8, %s;", R(e, a), R(e, a));
}

static void load_pair(Emit *e, Reg vec, Reg a, int q)
{
    op_ld_shared_v2_b32(e, reg_at(e, vec, 0), reg_at(e, vec, 1), a, (uint32_t)(32 * q));
}

/* dS^T (packed pairs) into the stage's smem, the MN-major SW128 layout of dQ's A operand: key row r,
 * queries 64a.. in atom a, 16-byte unit u of a row at u ^ (r % 8). */
static void emit_store_ds(Emit *e, Reg ds_stage_addr)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    Reg key = reg_b32(e, "sd_key"), base = reg_b32(e, "sd_base"), u = reg_b32(e, "sd_u"), a = reg_b32(e, "sd_a");
    Reg pds = reg_find(e, "pds");
    emit_note(e, "dS^T to smem: key rows of this thread, query pairs 8q + 2 (lane %% 4); atom q / 8, unit q %% 8");
    for (int h = 0; h < 2; h++) {
        swizzle_row(e, key, base, reg_find(e, "cs_row%d", h), ds_stage_addr);
        emit(e, "mad.lo.u32 %s, %%cs_lm, 4, %s;", R(e, base), R(e, base));
        for (int q = 0; q < s->sdp_regs / 4; q++) {
            swizzle_unit(e, u, key, q % 8);
            emit(e, "add.u32 %s, %s, %s;", R(e, a), R(e, base), R(e, u));
            /* packed register i holds accumulator registers 2i, 2i + 1 = (q, h, 0..1): i = 2q + h */
            op_st_shared_b32(e, a, (uint32_t)(q / 8) * s->ds_atom_bytes, reg_at(e, pds, 2 * q + h));
        }
    }
}

/* softcap=1: P, its packed pairs for dV (pp) and an fp16 copy of P (1 - t^2) for dS (ph), pair by pair (plan note
 * softcap): no array of 1 - t^2 lives across the loop, and the f32 P dies with its pair. */
static void emit_softcap_p(Emit *e)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    Reg sacc = reg_find(e, "s"), vec = reg_find(e, "cs_vec"), pp = reg_find(e, "pp"), va = reg_find(e, "cs_vaddr");
    Reg g0 = reg_f32(e, "sc_g0"), g1 = reg_f32(e, "sc_g1");
    emit_note(e, "plan note softcap: per pair, P (packed for dV) and an fp16 copy of P (1 - t^2) for dS");
    for (int q = 0; q < s->sdp_regs / 4; q++) {
        load_pair(e, vec, va, q);
        for (int h = 0; h < 2; h++) {
            int i = 2 * q + h;
            Reg p0 = reg_at(e, sacc, bwd90_acc(q, h, 0)), p1 = reg_at(e, sacc, bwd90_acc(q, h, 1));
            bwd90_softcap_p(e, p0, p1, vec, 0, 1, g0, g1);
            op_cvt_pack(e, p->cfg.dtype, reg_at(e, pp, i), p1, p0);
            emit(e, "mul.f32 %s, %s, %s;", R(e, g0), R(e, p0), R(e, g0));
            emit(e, "mul.f32 %s, %s, %s;", R(e, g1), R(e, p1), R(e, g1));
            op_cvt_pack(e, DT_FP16, reg_at(e, reg_find(e, "ph"), i), g1, g0);
        }
    }
}

/* One (query head, m-block) of the consumer loop. */
static void emit_iteration(Emit *e)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    char l_nomask[NAME];
    Reg stage = reg_find(e, "cs_stage"), phase = reg_find(e, "cs_phase"), bar = reg_b32(e, "cs_bar");
    Reg m = reg_b32(e, "cs_m"), masked = reg_pred(e, "cs_masked");
    Reg qs = reg_b32(e, "cs_qslot"), dos = reg_b32(e, "cs_doslot"), dss = reg_b32(e, "cs_dsslot");
    Reg sacc = reg_find(e, "s"), dpacc = reg_find(e, "dp"), vec = reg_find(e, "cs_vec");
    Reg pp = reg_find(e, "pp"), pds = reg_find(e, "pds"), dk = reg_find(e, "dk"), dv = reg_find(e, "dv");
    bwd_iter_coords(e, reg_find(e, "cs_it"), m, REG_NONE);
    emit(e, "setp.lt.s32 %s, %s, %%full_lo;", R(e, masked), R(e, m));
    emit(e, "setp.ge.or.s32 %s, %s, %%full_hi, %s;", R(e, masked), R(e, m), R(e, masked));
    smem_indexed(e, qs, s->off_q, stage, s->q_stage_bytes);
    smem_indexed(e, dos, s->off_do, stage, s->q_stage_bytes);
    emit_note(e, "wait for Q + nl2 of this stage, issue S^T; wait for dO + D, issue dP^T");
    smem_indexed(e, bar, s->bar_q_full, stage, MBAR_BYTES);
    op_mbar_wait(e, bar, phase);
    op_wgmma_fence(e);
    emit_sdp(e, "S^T = K Q^T", reg_find(e, "cs_krows"), qs, sacc);
    op_wgmma_commit(e);
    smem_indexed(e, bar, s->bar_do_full, stage, MBAR_BYTES);
    op_mbar_wait(e, bar, phase);
    op_wgmma_fence(e);
    emit_sdp(e, "dP^T = V dO^T", reg_find(e, "cs_vrows"), dos, dpacc);
    op_wgmma_commit(e);
    emit_note(e, "S^T is ready once the older group retires; dP^T stays in flight");
    op_wgmma_wait(e, 1);
    if (p->cfg.softcap) bwd90_softcap(e);
    emit(e, "@!%s bra %s;", R(e, masked), new_label(e, l_nomask, sizeof l_nomask, "cs_nomask"));
    emit_mask(e, m);
    emit_label(e, l_nomask);
    emit_note(e, "P = exp2(S scale_log2 + nl2), nl2 = -LSE log2 e of the column's query (plan: ring nl2)");
    Reg va = reg_b32(e, "cs_vaddr");
    cols_addr(e, va, s->off_nl2, stage);
    /* dS takes P from 16-bit pairs: bm 128 (ds_packed_p), or P (1 - t^2) with a soft-cap, always an fp16 copy
     * (ph); else from the f32 S^T */
    int p_half = s->ds_packed_p || p->cfg.softcap, p_copy = p_half && (p->cfg.dtype != DT_FP16 || p->cfg.softcap);
    if (p->cfg.softcap) emit_softcap_p(e);
    for (int q = 0; !p->cfg.softcap && q < s->sdp_regs / 4; q++) {
        load_pair(e, vec, va, q);
        for (int h = 0; h < 2; h++)
            for (int x = 0; x < 2; x++) {
                Reg v = reg_at(e, sacc, bwd90_acc(q, h, x));
                emit(e, "fma.rn.ftz.f32 %s, %s, %%scale_log2, %s;", R(e, v), R(e, v), R(e, reg_at(e, vec, x)));
                emit(e, "ex2.approx.ftz.f32 %s, %s;", R(e, v), R(e, v));
            }
    }
    emit_note(e, "P^T to 16-bit pairs (the accumulator layout is the RS A fragment: register i packs 2i, 2i+1) and "
              "dV issued at once: it overlaps dP^T, and the dP wait below cannot move above the ex2s (it follows "
              "the dV issue, which needs them all)");
    if (p_copy && !p->cfg.softcap)
        emit_note(e, "plan note order: an fp16 copy of P for dS (11 bits; the bf16 P^T would cost dS 3 more)");
    for (int i = 0; !p->cfg.softcap && i < s->p_regs; i++) {
        op_cvt_pack(e, p->cfg.dtype, reg_at(e, pp, i), reg_at(e, sacc, 2 * i + 1), reg_at(e, sacc, 2 * i));
        if (p_copy)
            op_cvt_pack(e, DT_FP16, reg_at(e, reg_find(e, "ph"), i), reg_at(e, sacc, 2 * i + 1), reg_at(e, sacc, 2 * i));
    }
    op_wgmma_fence(e);
    emit_dkv(e, "dV += P^T dO", dv, pp, dos);
    op_wgmma_commit(e);
    emit_note(e, "dP^T is ready once the group before dV retires");
    op_wgmma_wait(e, 1);
    emit_note(e, "dS = P (dP - D), D = rowsum(dO O) of the column's query (plan: ring dpsum); P %s (plan note order)",
              p_half ? "unpacked from its fp16 copy" : "from the f32 S^T");
    cols_addr(e, va, s->off_dpsum, stage);
    Reg pf = reg_f32(e, "cs_pf");
    for (int q = 0; q < s->sdp_regs / 4; q++) {
        load_pair(e, vec, va, q);
        for (int h = 0; h < 2; h++)
            for (int x = 0; x < 2; x++) {
                int i = bwd90_acc(q, h, x);
                Reg v = reg_at(e, dpacc, i), pv = reg_at(e, sacc, i);
                if (p_half) {
                    unpack_half(e, DT_FP16, pf, reg_at(e, p_copy ? reg_find(e, "ph") : pp, i / 2), i % 2);
                    pv = pf;
                }
                emit(e, "sub.f32 %s, %s, %s;", R(e, v), R(e, v), R(e, reg_at(e, vec, x)));
                emit(e, "mul.f32 %s, %s, %s;", R(e, v), R(e, v), R(e, pv));
            }
    }
    for (int i = 0; i < s->p_regs; i++)
        op_cvt_pack(e, p->cfg.dtype, reg_at(e, pds, i), reg_at(e, dpacc, 2 * i + 1), reg_at(e, dpacc, 2 * i));
    op_wgmma_fence(e);
    emit_dkv(e, "dK += dS^T Q", dk, pds, qs);
    op_wgmma_commit(e);
    smem_indexed(e, dss, s->off_ds, reg_find(e, "cs_ds_stage"), s->ds_stage_bytes);
    emit_store_ds(e, dss);
    op_fence_proxy_async(e);
    emit_note(e, "plan: named barrier ds_ready (%d): every consumer's dS^T rows are in smem", s->bar_ds);
    op_bar_sync(e, s->bar_ds, named_bar_threads(p, s->bar_ds));
    op_wgmma_fence(e);
    emit_dq_mma(e, dss);
    op_wgmma_commit(e);
    op_wgmma_wait(e, 0);
    emit_note(e, "every wgmma of this m-block is done: the Q and dO slots are free (one arrival per warp)");
    smem_indexed(e, bar, s->bar_q_empty, stage, MBAR_BYTES);
    op_mbar_arrive_if(e, reg_find(e, "cs_lane0"), bar);
    smem_indexed(e, bar, s->bar_do_empty, stage, MBAR_BYTES);
    op_mbar_arrive_if(e, reg_find(e, "cs_lane0"), bar);
    emit_note(e, "dQ to smem once the writer's last reduction has read it: float4 [warpgroup][reg/4][thread]");
    Reg par = reg_b32(e, "cs_dqpar"), dqa = reg_b32(e, "cs_dqaddr");
    ring_free_parity(e, par, reg_find(e, "cs_dqph"));
    op_mbar_wait(e, reg_find(e, "cs_dq_empty"), par);
    emit(e, "mad.lo.u32 %s, %%cs_w, %u, %%cs_dq0;", R(e, dqa), (uint32_t)(s->dq_regs / 4 * BWD_WG * 16));
    Reg dq = reg_find(e, "dq");
    for (int j = 0; j < s->dq_regs / 4; j++) {
        Reg v[4];
        for (int k = 0; k < 4; k++) v[k] = reg_at(e, dq, 4 * j + k);
        op_st_shared_v4_f32(e, dqa, (uint32_t)(j * BWD_WG * 16), v);
    }
    op_fence_proxy_async(e);
    op_mbar_arrive(e, reg_find(e, "cs_dq_full"));
    emit(e, "xor.b32 %%cs_dqph, %%cs_dqph, 1;");
    emit(e, "xor.b32 %%cs_ds_stage, %%cs_ds_stage, 1;");
    ring_advance(e, stage, phase, p->stages);
}

/* varlen, a consumer whose rows run past the sequence's keys: dK (x scale) and dV straight from the
 * accumulators, row-masked st.global (plan note varlen dkv): columns cs_ep_col0 + 8q + 2 (lane % 4) of
 * rows cs_row<h>. */
static void emit_store_kv_rows(Emit *e)
{
    const Plan *p = e->p;
    Reg r = reg_b32(e, "er_row"), ad = reg_b64(e, "er_addr"), t = reg_b64(e, "er_t"), in = reg_pred(e, "er_in");
    Reg f0 = reg_f32(e, "ep_f0"), f1 = reg_f32(e, "ep_f1"), pk = reg_b32(e, "ep_pk");
    const struct { const char *acc, *ptr, *ss, *sh; int scale; } t2[2] = {
        {"dk", "dk_out", "dk_stride_s", "dk_stride_h", 1}, {"dv", "dv_out", "dv_stride_s", "dv_stride_h", 0}};
    for (int k = 0; k < 2; k++)
        for (int h = 0; h < 2; h++) {
            Reg acc = reg_find(e, "%s", t2[k].acc);
            emit(e, "add.u32 %s, %%n0, %%cs_row%d;", R(e, r), h);
            emit(e, "setp.lt.u32 %s, %s, %%seqlen_k;", R(e, in), R(e, r));
            emit(e, "add.u32 %s, %s, %%k_start;", R(e, r), R(e, r));
            op_cvt(e, "u64.u32", ad, r);
            emit(e, "mul.lo.u64 %s, %s, %%%s;", R(e, ad), R(e, ad), t2[k].ss);
            op_cvt(e, "u64.u32", t, reg_find(e, "kvh"));
            emit(e, "mad.lo.u64 %s, %s, %%%s, %s;", R(e, ad), R(e, t), t2[k].sh, R(e, ad));
            op_cvt(e, "u64.u32", t, reg_find(e, "cs_ep_c"));
            emit(e, "add.u64 %s, %s, %s;", R(e, ad), R(e, ad), R(e, t));
            emit(e, "mad.lo.u64 %s, %s, %d, %%%s;", R(e, ad), R(e, ad), p->elem_bytes, t2[k].ptr);
            for (int q = 0; q < sm90bwd_of(p)->kv_cols / 8; q++) {
                Reg x0 = reg_at(e, acc, bwd90_acc(q, h, 0)), x1 = reg_at(e, acc, bwd90_acc(q, h, 1));
                if (t2[k].scale) {
                    emit(e, "mul.f32 %s, %s, %%scale;", R(e, f0), R(e, x0));
                    emit(e, "mul.f32 %s, %s, %%scale;", R(e, f1), R(e, x1));
                    op_cvt_pack(e, p->cfg.dtype, pk, f1, f0);
                } else {
                    op_cvt_pack(e, p->cfg.dtype, pk, x1, x0);
                }
                op_st_global_b32_at(e, in, ad, (uint32_t)(8 * q * p->elem_bytes), pk);
            }
        }
}

/* tail_split=1, a part of a split tile (plan note tail split): parts 0..n-2 add their f32 dK, dV into the tile's slot
 * (float4 [consumer][dK, dV][reg / 4][thread]) and release +1 per consumer, then leave; the last part's lead thread
 * waits for consumers x (n - 1) releases, and its consumer adds the slot's sums into its own dK, dV before the
 * epilogue stores them. */
static void emit_tail_combine(Emit *e)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    char l_skip[NAME], l_final[NAME], l_go[NAME];
    Reg slot = reg_b64(e, "tl_slot"), base = reg_b64(e, "tl_base"), idx = reg_b32(e, "tl_idx");
    Reg fin = reg_pred(e, "tl_final"), want = reg_b32(e, "tl_want"), v = reg_b32(e, "tl_v"), ns = reg_b32(e, "tl_ns");
    Reg go = reg_pred(e, "tl_go"), bar = reg_find(e, "cs_epi_bar");
    Reg acc[2] = {reg_find(e, "dk"), reg_find(e, "dv")};
    int q4 = s->kv_regs / 4;
    uint32_t slot_stride = s->tail_slot_bytes + BWD_ALIGN;
    emit_section(e, "consumer tail split (plan note tail split): a split tile's parts sum dK, dV through its slot");
    emit(e, "@!%%tail_in bra %s;", new_label(e, l_skip, sizeof l_skip, "tl_skip"));
    emit_note(e, "slot of the tile: its counter (u32, 16 bytes), then float4 [consumer][dK, dV][reg/4][thread]");
    emit(e, "mul.wide.u32 %s, %%tail_slot, %u;", R(e, slot), slot_stride);
    emit(e, "add.s64 %s, %s, %%tail_ws;", R(e, slot), R(e, slot));
    emit(e, "mad.lo.u32 %s, %%cs_w, %d, %%cs_tid;", R(e, idx), 2 * q4 * BWD_WG);
    emit(e, "mul.wide.u32 %s, %s, 16;", R(e, base), R(e, idx));
    emit(e, "add.s64 %s, %s, %s;", R(e, base), R(e, base), R(e, slot));
    emit(e, "sub.u32 %s, %%tail_n, 1;", R(e, want));
    emit(e, "setp.eq.u32 %s, %%tail_part, %s;", R(e, fin), R(e, want));
    emit(e, "@%s bra %s;", R(e, fin), new_label(e, l_final, sizeof l_final, "tl_final"));
    emit_note(e, "not the last part: add this part's dK, dV, then (every add issued: the consumer's barrier) release");
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < q4; j++) {
            Reg r[4];
            for (int i = 0; i < 4; i++) r[i] = reg_at(e, acc[k], 4 * j + i);
            op_red_global_add_v4_f32(e, base, BWD_ALIGN + (uint32_t)((k * q4 + j) * BWD_WG * 16), r);
        }
    op_bar_sync_at(e, REG_NONE, bar, BWD_WG);
    op_red_release_gpu_add_u32(e, reg_find(e, "cs_leader"), slot, 1);
    emit(e, "bra.uni $exit;");
    emit_label(e, l_final);
    emit_note(e, "the last part: its lead waits for %d x (parts - 1) releases, then the consumer adds the sums",
              s->consumers);
    emit(e, "mul.lo.u32 %s, %s, %d;", R(e, want), R(e, want), s->consumers);
    emit(e, "@!%%cs_leader bra %s;", new_label(e, l_go, sizeof l_go, "tl_go"));
    bwd_spin_until(e, slot, want, (Reg[]){v, ns, go}, "tl", l_go, sizeof l_go);
    op_bar_sync_at(e, REG_NONE, bar, BWD_WG);
    Reg t[4];
    for (int i = 0; i < 4; i++) t[i] = reg_f32(e, "tl_t%d", i);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < q4; j++) {
            op_ld_relaxed_gpu_v4_f32(e, t, base, BWD_ALIGN + (uint32_t)((k * q4 + j) * BWD_WG * 16));
            for (int i = 0; i < 4; i++) {
                Reg x = reg_at(e, acc[k], 4 * j + i);
                emit(e, "add.f32 %s, %s, %s;", R(e, x), R(e, x), R(e, t[i]));
            }
        }
    emit_label(e, l_skip);
}

/* dK (x scale) and dV to 16-bit, staged over this consumer's part of the K and V tiles (rows cs_ep_row0..
 * + 64, column chunks from cs_ep_col0) in the TMA's SW128 layout, TMA-stored as 64-row boxes. */
static void emit_epilogue(Emit *e)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    char l_store[NAME], l_rows[NAME], l_done[NAME];
    if (s->tail) emit_tail_combine(e);
    emit_section(e, "consumer epilogue: dK = scale dS^T Q, dV; through smem (over K, V) and TMA stores");
    emit_note(e, "plan: named barrier kv_done (%d): no wgmma reads K or V any more", s->bar_kv_done);
    op_bar_sync(e, s->bar_kv_done, named_bar_threads(p, s->bar_kv_done));
    if (p->cfg.varlen) {
        Reg end = reg_b32(e, "ep_end"), pe = reg_pred(e, "ep_past");
        emit_note(e, "plan note varlen dkv: this consumer's rows run past the sequence's keys: row-masked stores");
        emit(e, "add.u32 %s, %%cs_ep_row0, %%n0;", R(e, end));
        emit(e, "add.u32 %s, %s, %d;", R(e, end), R(e, end), BWD_MMA_M);
        emit(e, "setp.gt.u32 %s, %s, %%seqlen_k;", R(e, pe), R(e, end));
        emit(e, "@%s bra %s;", R(e, pe), new_label(e, l_rows, sizeof l_rows, "ep_rows"));
    }
    Reg key = reg_b32(e, "ep_key"), base = reg_b32(e, "ep_base"), u = reg_b32(e, "ep_u"), a = reg_b32(e, "ep_a");
    Reg pk = reg_b32(e, "ep_pk"), f0 = reg_f32(e, "ep_f0"), f1 = reg_f32(e, "ep_f1");
    Reg dk = reg_find(e, "dk"), dv = reg_find(e, "dv");
    const struct { Reg acc; const char *tile; int scale; } t[2] = {{dk, "cs_ep_k", 1}, {dv, "cs_ep_v", 0}};
    for (int k = 0; k < 2; k++)
        for (int h = 0; h < 2; h++) {
            swizzle_row(e, key, base, reg_find(e, "cs_row%d", h), reg_find(e, "%s", t[k].tile));
            emit(e, "mad.lo.u32 %s, %%cs_lm, 4, %s;", R(e, base), R(e, base));
            for (int q = 0; q < s->kv_cols / 8; q++) {
                Reg x0 = reg_at(e, t[k].acc, bwd90_acc(q, h, 0)), x1 = reg_at(e, t[k].acc, bwd90_acc(q, h, 1));
                if (t[k].scale) {
                    emit(e, "mul.f32 %s, %s, %%scale;", R(e, f0), R(e, x0));
                    emit(e, "mul.f32 %s, %s, %%scale;", R(e, f1), R(e, x1));
                    op_cvt_pack(e, p->cfg.dtype, pk, f1, f0);
                } else {
                    op_cvt_pack(e, p->cfg.dtype, pk, x1, x0);
                }
                swizzle_unit(e, u, key, q % 8);
                emit(e, "add.u32 %s, %s, %s;", R(e, a), R(e, base), R(e, u));
                op_st_shared_b32(e, a, (uint32_t)(q / 8) * s->kv_chunk_bytes, pk);
            }
        }
    op_fence_proxy_async(e);
    emit_note(e, "plan: named barrier epilogue<consumer> (%d + consumer)", s->bar_epi0);
    op_bar_sync_at(e, REG_NONE, reg_find(e, "cs_epi_bar"), named_bar_threads(p, s->bar_epi0));
    emit(e, "@!%%cs_leader bra %s;", new_label(e, l_store, sizeof l_store, "ep_stored"));
    Reg src = reg_b32(e, "ep_src"), col = reg_b32(e, "ep_col"), row = reg_b32(e, "ep_row");
    emit(e, "add.u32 %s, %%cs_ep_row0, %%n0;", R(e, row));
    emit(e, "add.u32 %s, %s, %%k_start;", R(e, row), R(e, row));
    const char *maps[2] = {"tmap_dk", "tmap_dv"};
    Reg rows = reg_b32(e, "ep_rows");
    emit(e, "mul.lo.u32 %s, %%cs_ep_row0, %d;", R(e, rows), ROW_BYTES);
    for (int k = 0; k < 2; k++)
        for (int c = 0; c < s->kv_cols / CHUNK_ELEMS; c++) {
            emit(e, "add.u32 %s, %%%s, %s;", R(e, src), k ? "cs_ep_v" : "cs_ep_k", R(e, rows));
            emit(e, "add.u32 %s, %s, %u;", R(e, src), R(e, src), c * s->kv_chunk_bytes);
            emit(e, "add.u32 %s, %%cs_ep_col0, %d;", R(e, col), c * p->chunk_elems);
            op_tma_store_4d(e, reg_find(e, "%s", maps[k]), col, row, reg_find(e, "kvh"), reg_find(e, "b_map"), src);
        }
    op_bulk_commit(e);
    op_bulk_wait(e, 0);
    emit_label(e, l_store);
    if (p->cfg.varlen) {
        emit(e, "bra.uni %s;", new_label(e, l_done, sizeof l_done, "ep_done"));
        emit_label(e, l_rows);
        emit_store_kv_rows(e);
        emit_label(e, l_done);
    }
}

static void emit_consumer_setup(Emit *e)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    Reg w = reg_b32(e, "cs_w"), wl = reg_b32(e, "cs_wl"), lm = reg_b32(e, "cs_lm"), t = reg_b32(e, "cs_t");
    emit(e, "sub.u32 %s, %%wg, 1;", R(e, w));
    emit(e, "and.b32 %s, %%warp, 3;", R(e, wl));
    emit(e, "and.b32 %s, %%lane, 3;", R(e, lm));
    emit(e, "shl.b32 %s, %s, 1;", R(e, reg_b32(e, "cs_lm2")), R(e, lm));
    emit_note(e, "accumulator rows of this thread: 16 warp + lane / 4 (+8)%s", s->split_depth ? " (queries of S, "
              "dP, dQ; keys of dK, dV)" : " of the consumer's 64; as tile rows (keys) +64 w");
    for (int h = 0; h < 2; h++) {
        Reg r = reg_b32(e, "cs_row%d", h);
        emit(e, "shr.u32 %s, %%lane, 2;", R(e, r));
        emit(e, "mad.lo.u32 %s, %s, 16, %s;", R(e, r), R(e, wl), R(e, r));
        if (h) emit(e, "add.u32 %s, %s, 8;", R(e, r), R(e, r));
        if (s->split_depth) continue;
        emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, r), R(e, w), BWD_MMA_M, R(e, r));
        emit(e, "mov.u32 %s, %s;", R(e, reg_b32(e, "cs_key%d", h)), R(e, r));
    }
    emit(e, "setp.eq.u32 %s, %%lane, 0;", R(e, reg_pred(e, "cs_lane0")));
    emit(e, "shl.b32 %s, %%wg, 7;", R(e, t));
    emit(e, "setp.eq.u32 %s, %%thread, %s;", R(e, reg_pred(e, "cs_leader")), R(e, t));
    emit(e, "and.b32 %s, %%thread, 127;", R(e, reg_b32(e, "cs_tid")));
    Reg k0 = smem_reg(e, "cs_k0", s->off_k), v0 = smem_reg(e, "cs_v0", s->off_v);
    emit_note(e, "this consumer's %d rows (keys) of K and V: the %s operands of S%s and dP%s", s->keys_wg,
              s->split_depth ? "B" : "A", s->split_depth ? "" : "^T", s->split_depth ? "" : "^T");
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, reg_b32(e, "cs_krows")), R(e, w), s->keys_wg * ROW_BYTES, R(e, k0));
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, reg_b32(e, "cs_vrows")), R(e, w), s->keys_wg * ROW_BYTES, R(e, v0));
    emit(e, "mov.b32 %s, 0x%08X;", R(e, reg_b32(e, "cs_hi_kmaj")), sm90_desc_hi(8 * ROW_BYTES, 128));
    int split = s->split_depth, col_chunks = s->kv_cols / CHUNK_ELEMS;
    emit_note(e, "the epilogue's part of dK, dV: tile rows %s, columns %s (staged over K and V)",
              split ? "0..63" : "64 w..", split ? "kv_cols w.." : "all");
    emit(e, "mul.lo.u32 %s, %s, %d;", R(e, reg_b32(e, "cs_ep_row0")), R(e, w), split ? 0 : BWD_MMA_M);
    emit(e, "mul.lo.u32 %s, %s, %d;", R(e, reg_b32(e, "cs_ep_col0")), R(e, w), split ? s->kv_cols : 0);
    emit(e, "add.u32 %s, %%cs_ep_col0, %%cs_lm2;", R(e, reg_b32(e, "cs_ep_c")));
    emit(e, "mad.lo.u32 %s, %s, %u, %s;", R(e, reg_b32(e, "cs_ep_k")), R(e, w), split ? col_chunks * s->kv_chunk_bytes : 0,
         R(e, k0));
    emit(e, "mad.lo.u32 %s, %s, %u, %s;", R(e, reg_b32(e, "cs_ep_v")), R(e, w), split ? col_chunks * s->kv_chunk_bytes : 0,
         R(e, v0));
    emit(e, "add.u32 %s, %s, %d;", R(e, reg_b32(e, "cs_epi_bar")), R(e, w), s->bar_epi0);
    if (s->det && split) emit(e, "add.u32 %s, %s, %d;", R(e, reg_b32(e, "cs_turn_bar")), R(e, w), s->bar_turn0);
    if (split) {
        bwd90_depth_setup(e);
        return;
    }
    emit_note(e, "plan note dq wgmma: this consumer's tile of the dQ block (tm = w %% %d, tn = w / %d)",
              s->dq_tiles_m, s->dq_tiles_m);
    emit_rem_imm(e, R(e, reg_b32(e, "cs_dq_tm")), R(e, w), s->dq_tiles_m);
    emit_div_imm(e, R(e, reg_b32(e, "cs_dq_tn")), R(e, w), s->dq_tiles_m);
    emit_note(e, "dQ's B: K from column %d cs_dq_tn, chunk col / %d, then col %% %d elements inside its rows (dq_n "
              "%d may be half a chunk: the MN-major start moves inside the swizzled row, as a K-major k step does)",
              s->dq_n, p->chunk_elems, p->chunk_elems, s->dq_n);
    Reg col = reg_b32(e, "cs_dq_col"), dqk = reg_b32(e, "cs_dq_k"), t2 = reg_b32(e, "cs_dq_t");
    emit(e, "mul.lo.u32 %s, %%cs_dq_tn, %d;", R(e, col), s->dq_n);
    emit_div_imm(e, R(e, t2), R(e, col), p->chunk_elems);
    emit(e, "mad.lo.u32 %s, %s, %u, %%cs_k0;", R(e, dqk), R(e, t2), s->kv_chunk_bytes);
    emit_rem_imm(e, R(e, t2), R(e, col), p->chunk_elems);
    emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, dqk), R(e, t2), p->elem_bytes, R(e, dqk));
    Reg dq0 = smem_reg(e, "cs_dq0", s->off_dq);
    emit(e, "mad.lo.u32 %s, %%cs_tid, 16, %s;", R(e, dq0), R(e, dq0));
    smem_reg(e, "cs_dq_full", s->bar_dq_full);
    smem_reg(e, "cs_dq_empty", s->bar_dq_empty);
}

static void emit_consumer(Emit *e)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    char l_loop[NAME], l_done[NAME];
    emit_section(e, "role consumers (warpgroups 1..%d): wgmma, P and dS; plan regs %d%s", s->consumers,
                 s->consumer_regs, s->split_depth ? "; split_depth (sm90/mha_bwd_depth.c)" : "");
    op_setmaxnreg(e, s->consumer_regs, p->entry_regs);
    emit_consumer_setup(e);
    reg_arr(e, RT_F32, s->sdp_regs, "s");
    reg_arr(e, RT_F32, s->sdp_regs, "dp");
    reg_arr(e, RT_B32, s->p_regs, "pp");
    reg_arr(e, RT_B32, s->p_regs, "pds");
    if ((s->ds_packed_p && p->cfg.dtype != DT_FP16) || p->cfg.softcap) reg_arr(e, RT_B32, s->p_regs, "ph");
    reg_arr(e, RT_F32, 2, "cs_vec");
    Reg dk = reg_arr(e, RT_F32, s->kv_regs, "dk"), dv = reg_arr(e, RT_F32, s->kv_regs, "dv");
    reg_arr(e, RT_F32, s->dq_regs, "dq");
    Reg stage = reg_b32(e, "cs_stage"), phase = reg_b32(e, "cs_phase"), itr = reg_b32(e, "cs_it");
    Reg pr = reg_pred(e, "cs_p"), bar = reg_b32(e, "cs_bar");
    ring_reset(e, stage, phase);
    if (!s->split_depth) emit(e, "mov.u32 %s, 0;", R(e, reg_b32(e, "cs_dqph")));
    emit(e, "mov.u32 %s, 0;", R(e, reg_b32(e, "cs_ds_stage")));
    bwd_iter_start(e, itr);
    emit_note(e, "dK = dV = 0; K and V of the tile");
    for (int i = 0; i < s->kv_regs; i++) {
        emit(e, "mov.f32 %s, 0f00000000;", R(e, reg_at(e, dk, i)));
        emit(e, "mov.f32 %s, 0f00000000;", R(e, reg_at(e, dv, i)));
    }
    mbar_at(e, bar, s->bar_kv_full, 0);
    op_mbar_wait_imm(e, bar, 0);
    emit_section(e, "consumer loop: (query head, m-block) iterations of the tile");
    emit_label(e, new_label(e, l_loop, sizeof l_loop, "cs_loop"));
    emit(e, "setp.ge.u32 %s, %s, %%iters;", R(e, pr), R(e, itr));
    emit(e, "@%s bra %s;", R(e, pr), new_label(e, l_done, sizeof l_done, "cs_done"));
    if (s->split_depth) bwd90_depth_iteration(e);
    else emit_iteration(e);
    emit(e, "add.u32 %s, %s, 1;", R(e, itr), R(e, itr));
    emit(e, "bra.uni %s;", l_loop);
    emit_label(e, l_done);
    emit_epilogue(e);
    emit(e, "bra.uni $exit;");
}

int sm90_emit_mha_bwd(Emit *e)
{
    emit_prologue(e);
    emit_barrier_init(e);
    emit_section(e, "role dispatch: warpgroup 0 produces, the others consume");
    Reg p = reg_pred(e, "p_consumer");
    emit(e, "setp.ge.u32 %s, %%wg, 1;", R(e, p));
    emit(e, "@%s bra $consumer;", R(e, p));
    emit_producer(e);
    emit_label(e, "$consumer");
    emit_consumer(e);
    emit_label(e, "$exit");
    emit(e, "ret;");
    return e->failed ? -1 : 0;
}
