/* sm90/mha_bwd_depth.c - the sm_90a attention backward's consumer for depth > 128 (plan split_depth;
 * FlashAttention-3's d256 shape: bm = bn = 64, two consumer warpgroups; docs/kernels/mha-bwd.md).
 *
 * dK and dV of 64 keys x 256 columns would need 256 f32 registers per thread in one warpgroup, so the two
 * consumers split the work differently from depth <= 128 (sm90/mha_bwd.c):
 *   S = Q K^T, dP = dO V^T      SS, m64 (queries) x n keys_wg: consumer w takes keys keys_wg w..
 *   P = exp2(S scale_log2 + nl2), dS = P (dP - D)    (row statistics: two per thread)
 *   P (16-bit) -> smem [query row][bn keys]; named barrier p_ready (both halves are needed below)
 *   dV += P^T dO                SS, A and B MN-major: consumer w takes depth columns kv_cols w..; runs under dS
 *   dS (16-bit) -> smem; named barrier ds_ready
 *   dQ = dS K                   SS, A K-major, B MN-major: the same depth columns
 *   dK += dS^T Q                SS, A and B MN-major
 *   dQ -> the f32 workspace by red.global.add.v4.f32 straight from the accumulator registers, in the
 *   block layout the dq kernel reads (mha_bwd.h): tile (0, w), float4 [w][j][thread].
 * P and dS have ds_stages (2) buffers: a consumer writes stage s ^ 1 only after the barriers of stage s,
 * which the other passed only after its wgmmas reading stage s ^ 1 (one m-block earlier) were waited.
 */
#include <stdio.h>

#include "../kernel.h"
#include "../mha_bwd.h"
#include "../ops.h"
#include "../ops_bwd.h"
#include "../softmax.h"
#include "bwd90.h"

enum { NAME = 32, CHUNK_ELEMS = 64, ROW_BYTES = 128, K16_ROWS = 16 };

void bwd90_depth_setup(Emit *e)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    int col_chunks = s->kv_cols / CHUNK_ELEMS;
    emit_note(e, "plan split_depth: this consumer's first key column of S / dP (keys_wg w + 2 (lane %% 4)), its "
              "depth half of Q / dO (bytes into a ring slot), its dQ float4s in the block");
    emit(e, "mad.lo.u32 %s, %%cs_w, %d, %%cs_lm2;", R(e, reg_b32(e, "cs_kcol")), s->keys_wg);
    emit(e, "mul.lo.u32 %s, %%cs_w, %u;", R(e, reg_b32(e, "cs_qhalf")), (uint32_t)col_chunks * s->q_chunk_bytes);
    Reg t = reg_b32(e, "cs_t2");
    emit(e, "mul.lo.u32 %s, %%cs_w, %d;", R(e, t), s->dq_regs / 4 * BWD_WG);
    emit(e, "add.u32 %s, %s, %%cs_tid;", R(e, t), R(e, t));
    emit(e, "mul.wide.u32 %s, %s, 16;", R(e, reg_b64(e, "cs_dq_off")), R(e, t));
}

/* acc = A B^T over the depth, A = the m-block's rows of slot a0 (Q or dO, K-major), B = this consumer's
 * keys_wg rows of K or V (b0, K-major): S or dP. */
static void emit_sdp(Emit *e, const char *what, Reg a0, Reg b0, Reg acc)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    Reg alo = reg_b32(e, "cs_alo"), blo = reg_b32(e, "cs_blo"), ad = reg_b64(e, "cs_ad"), bd = reg_b64(e, "cs_bd");
    Reg ab = reg_b32(e, "cs_abase"), bb = reg_b32(e, "cs_bbase");
    emit_note(e, "%s: %d x wgmma m64n%dk16 SS, both K-major (plan note sdp wgmma)", what, s->steps_d, s->keys_wg);
    bwd90_desc_lo(e, ab, a0);
    bwd90_desc_lo(e, bb, b0);
    emit(e, "or.b32 %s, %s, 0x%08X;", R(e, ab), R(e, ab), sm90_desc_lo_lbo(16));
    emit(e, "or.b32 %s, %s, 0x%08X;", R(e, bb), R(e, bb), sm90_desc_lo_lbo(16));
    for (int kk = 0; kk < s->steps_d; kk++) {
        emit(e, "add.u32 %s, %s, %u;", R(e, alo), R(e, ab), op_desc_kstep(kk, 4, 32, s->q_chunk_bytes));
        emit(e, "add.u32 %s, %s, %u;", R(e, blo), R(e, bb), op_desc_kstep(kk, 4, 32, s->kv_chunk_bytes));
        emit(e, "mov.b64 %s, {%s, %%cs_hi_kmaj};", R(e, ad), R(e, alo));
        emit(e, "mov.b64 %s, {%s, %%cs_hi_kmaj};", R(e, bd), R(e, blo));
        op_wgmma_ss(e, s->keys_wg, p->cfg.dtype, acc, ad, bd, kk ? 1 : 0, 0);
    }
}

/* Masked blocks: rows are queries q = m bm + cs_row<h>, columns keys n0 + cs_kcol + 8 q' + x; queries past
 * seqlen_q hide their whole row (their nl2 is -inf already; this keeps a NaN out of dS). */
static void emit_mask(Emit *e, Reg m)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    int wl, wr;
    mask_bounds(&p->cfg, &wl, &wr);
    Reg q = reg_b32(e, "mk_q"), kv0 = reg_b32(e, "mk_kv0"), hi = reg_b32(e, "mk_hi"), lo = reg_b32(e, "mk_lo");
    Reg pq = reg_pred(e, "mk_qout"), sacc = reg_find(e, "s");
    emit_note(e, "mask: row = query m bm + cs_row<h>, column = key n0 + cs_kcol + c (plan mask, sfx_row_bounds)");
    emit(e, "add.u32 %s, %%n0, %%cs_kcol;", R(e, kv0));
    for (int h = 0; h < 2; h++) {
        emit(e, "mad.lo.u32 %s, %s, %d, %%cs_row%d;", R(e, q), R(e, m), p->bm, h);
        sfx_row_bounds(e, q, kv0, hi, wl >= 0 ? lo : REG_NONE);
        emit(e, "setp.ge.u32 %s, %s, %%seqlen_q;", R(e, pq), R(e, q));
        emit(e, "@%s mov.u32 %s, -1;", R(e, pq), R(e, hi));
        for (int c = 0; c < s->keys_wg / 8; c++)
            for (int x = 0; x < 2; x++)
                sfx_mask(e, reg_at(e, sacc, bwd90_acc(c, h, x)), 8 * c + x, hi, wl >= 0 ? lo : REG_NONE);
    }
}

/* Packed 16-bit pairs `pk` (register 2 c + h = accumulator (c, h, 0..1)) to the stage at `buf`: query row
 * cs_row<h>, keys cs_kcol + 8 c, .. + 1; the SW128 layout of one 128-byte chunk per row. */
static void emit_store_rows(Emit *e, Reg pk, Reg buf)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    Reg key = reg_b32(e, "sr_key"), base = reg_b32(e, "sr_base"), u = reg_b32(e, "sr_u"), a = reg_b32(e, "sr_a");
    Reg unit = reg_b32(e, "sr_unit");
    int eb = p->elem_bytes;
    for (int h = 0; h < 2; h++) {
        swizzle_row(e, key, base, reg_find(e, "cs_row%d", h), buf);
        emit(e, "and.b32 %s, %%cs_kcol, 7;", R(e, a));
        emit(e, "mad.lo.u32 %s, %s, %d, %s;", R(e, base), R(e, a), eb, R(e, base));
        for (int c = 0; c < s->keys_wg / 8; c++) {
            emit_note(e, "16-byte unit (cs_kcol + 8 c) / 8 of the row, swizzled by row %% 8");
            emit(e, "shr.u32 %s, %%cs_kcol, 3;", R(e, unit));
            emit(e, "add.u32 %s, %s, %d;", R(e, unit), R(e, unit), c);
            emit(e, "xor.b32 %s, %s, %s;", R(e, u), R(e, unit), R(e, key));
            emit(e, "shl.b32 %s, %s, 4;", R(e, u), R(e, u));
            emit(e, "add.u32 %s, %s, %s;", R(e, a), R(e, base), R(e, u));
            op_st_shared_b32(e, a, 0, reg_at(e, pk, 2 * c + h));
        }
    }
}

/* acc (+)= A B over the bn keys or bm queries (4 k-steps of 16 rows): A MN-major (tnsp_a) or K-major at a,
 * B MN-major at b (this consumer's depth columns; LBO = the chunk stride b_chunk). */
static void emit_depth_mma(Emit *e, const char *what, Reg acc, Reg a, int tnsp_a, Reg b, uint32_t b_chunk, int steps,
                           int accumulate)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    Reg adesc = reg_b64(e, "cs_dad"), bdesc = reg_b64(e, "cs_dbd"), ad = reg_b64(e, "cs_ad"), bd = reg_b64(e, "cs_bd");
    Reg alo = reg_b32(e, "cs_alo");
    emit_note(e, "%s: %d x wgmma m64n%dk16 SS, A %s, B MN-major (LBO %u, SBO 8 rows)", what, steps, s->kv_cols,
              tnsp_a ? "MN-major" : "K-major", b_chunk);
    if (!tnsp_a) {
        bwd90_desc_lo(e, alo, a);
        emit(e, "or.b32 %s, %s, 0x%08X;", R(e, alo), R(e, alo), sm90_desc_lo_lbo(16));
    } else {
        op_sm90_desc(e, adesc, a, s->ds_atom_bytes, 8 * ROW_BYTES, 128);
    }
    op_sm90_desc(e, bdesc, b, b_chunk, 8 * ROW_BYTES, 128);
    for (int kk = 0; kk < steps; kk++) {
        uint32_t step = op_desc_delta((uint32_t)(kk * K16_ROWS * ROW_BYTES));
        if (tnsp_a) {
            emit(e, "add.s64 %s, %s, %u;", R(e, ad), R(e, adesc), step);
        } else {
            Reg lo = reg_b32(e, "cs_alo2");
            emit(e, "add.u32 %s, %s, %u;", R(e, lo), R(e, alo), op_desc_kstep(kk, 4, 32, s->ds_atom_bytes));
            emit(e, "mov.b64 %s, {%s, %%cs_hi_kmaj};", R(e, ad), R(e, lo));
        }
        emit(e, "add.s64 %s, %s, %u;", R(e, bd), R(e, bdesc), step);
        op_wgmma_ss_t(e, s->kv_cols, p->cfg.dtype, acc, ad, bd, accumulate || kk ? 1 : 0, tnsp_a, 1);
    }
}

/* This consumer's dQ tile into the workspace block of (hq, m): 16-byte reductions, float4 j of thread t at
 * ((w dq_regs / 4 + j) 128 + t) 16 bytes (mha_bwd.h). */
static void emit_dq_red(Emit *e, Reg m, Reg hq)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    Reg ws = reg_b64(e, "cs_ws"), a = reg_b64(e, "cs_dqg"), dq = reg_find(e, "dq");
    emit_note(e, "plan note dq: dQ += this tile, red.global.add.v4.f32 x %d (a warp covers 512 contiguous bytes)",
              s->dq_regs / 4);
    bwd_ws_row(e, ws, m, hq);
    Reg sem = reg_b64(e, "cs_sem"), lead = reg_find(e, "cs_leader"), tb = s->det ? reg_find(e, "cs_turn_bar") : REG_NONE;
    if (s->det) {
        emit_note(e, "plan note deterministic: thread 0 of the consumer waits for this kv block's turn (its other "
                  "consumer adds other columns and arrives too: %d arrivals per kv block)", s->det_arrivals);
        bwd_det_turn_open(e, sem, ws, lead, m, s->det_arrivals, 0, tb);
    }
    emit(e, "mul.lo.u64 %s, %s, %d;", R(e, a), R(e, ws), p->qk * BWD_F32);
    emit(e, "add.s64 %s, %s, %%dq_accum;", R(e, a), R(e, a));
    emit(e, "add.s64 %s, %s, %%cs_dq_off;", R(e, a), R(e, a));
    for (int j = 0; j < s->dq_regs / 4; j++) {
        Reg v[4];
        for (int k = 0; k < 4; k++) v[k] = reg_at(e, dq, 4 * j + k);
        op_red_global_add_v4_f32(e, a, (uint32_t)(j * BWD_WG * 16), v);
    }
    if (s->det) bwd_det_turn_close(e, sem, lead, 0, tb);
}

void bwd90_depth_iteration(Emit *e)
{
    const Plan *p = e->p;
    const Sm90BwdPlan *s = sm90bwd_of(p);
    char l_nomask[NAME];
    Reg stage = reg_find(e, "cs_stage"), phase = reg_find(e, "cs_phase"), bar = reg_b32(e, "cs_bar");
    Reg m = reg_b32(e, "cs_m"), hq = reg_b32(e, "cs_hq"), masked = reg_pred(e, "cs_masked");
    Reg qs = reg_b32(e, "cs_qslot"), dos = reg_b32(e, "cs_doslot"), ps = reg_b32(e, "cs_pslot"), dss = reg_b32(e, "cs_dsslot");
    Reg half = reg_b32(e, "cs_half");
    Reg sacc = reg_find(e, "s"), dpacc = reg_find(e, "dp"), vec = reg_find(e, "cs_vec");
    Reg pp = reg_find(e, "pp"), pds = reg_find(e, "pds"), dk = reg_find(e, "dk"), dv = reg_find(e, "dv");
    bwd_iter_coords(e, reg_find(e, "cs_it"), m, hq);
    emit(e, "setp.lt.s32 %s, %s, %%full_lo;", R(e, masked), R(e, m));
    emit(e, "setp.ge.or.s32 %s, %s, %%full_hi, %s;", R(e, masked), R(e, m), R(e, masked));
    smem_indexed(e, qs, s->off_q, stage, s->q_stage_bytes);
    smem_indexed(e, dos, s->off_do, stage, s->q_stage_bytes);
    emit_note(e, "wait for Q + nl2 of this stage, issue S; wait for dO + D, issue dP");
    smem_indexed(e, bar, s->bar_q_full, stage, MBAR_BYTES);
    op_mbar_wait(e, bar, phase);
    op_wgmma_fence(e);
    emit_sdp(e, "S = Q K^T", qs, reg_find(e, "cs_krows"), sacc);
    op_wgmma_commit(e);
    smem_indexed(e, bar, s->bar_do_full, stage, MBAR_BYTES);
    op_mbar_wait(e, bar, phase);
    op_wgmma_fence(e);
    emit_sdp(e, "dP = dO V^T", dos, reg_find(e, "cs_vrows"), dpacc);
    op_wgmma_commit(e);
    emit_note(e, "S is ready once the older group retires; dP stays in flight");
    op_wgmma_wait(e, 1);
    if (p->cfg.softcap) bwd90_softcap(e);
    emit(e, "@!%s bra %s;", R(e, masked), new_label(e, l_nomask, sizeof l_nomask, "cs_nomask"));
    emit_mask(e, m);
    emit_label(e, l_nomask);
    emit_note(e, "P = exp2(S scale_log2 + nl2), nl2 = -LSE log2 e of the row's query (plan: ring nl2)");
    Reg va = reg_b32(e, "cs_vaddr");
    smem_indexed(e, va, s->off_nl2, stage, s->vec_stage_bytes);
    for (int h = 0; h < 2; h++) {
        Reg r = reg_b32(e, "cs_vrow");
        emit(e, "mad.lo.u32 %s, %%cs_row%d, %d, %s;", R(e, r), h, BWD_F32, R(e, va));
        op_ld_shared_b32(e, reg_at(e, vec, h), r, 0);
    }
    for (int i = 0; !p->cfg.softcap && i < s->sdp_regs; i++) {
        Reg v = reg_at(e, sacc, i);
        emit(e, "fma.rn.ftz.f32 %s, %s, %%scale_log2, %s;", R(e, v), R(e, v), R(e, reg_at(e, vec, (i >> 1) & 1)));
        emit(e, "ex2.approx.ftz.f32 %s, %s;", R(e, v), R(e, v));
    }
    emit_note(e, "P to 16-bit pairs, into the P stage (plan smem p)%s",
              p->cfg.softcap ? "; plan note softcap: per pair, then the f32 P becomes P (1 - t^2) for dS" : "");
    for (int i = 0; i < s->p_regs; i++) {
        Reg p0 = reg_at(e, sacc, 2 * i), p1 = reg_at(e, sacc, 2 * i + 1);
        if (p->cfg.softcap) bwd90_softcap_p(e, p0, p1, vec, i & 1, i & 1, reg_f32(e, "sc_g0"), reg_f32(e, "sc_g1"));
        op_cvt_pack(e, p->cfg.dtype, reg_at(e, pp, i), p1, p0);
        if (p->cfg.softcap) {
            emit(e, "mul.f32 %s, %s, %%sc_g0;", R(e, p0), R(e, p0));
            emit(e, "mul.f32 %s, %s, %%sc_g1;", R(e, p1), R(e, p1));
        }
    }
    smem_indexed(e, ps, s->off_p, reg_find(e, "cs_ds_stage"), s->ds_stage_bytes);
    emit_store_rows(e, pp, ps);
    op_fence_proxy_async(e);
    emit_note(e, "plan: named barrier p_ready (%d): both consumers' P columns are in smem; dV runs under dS",
              s->bar_p);
    op_bar_sync(e, s->bar_p, named_bar_threads(p, s->bar_p));
    emit(e, "add.u32 %s, %s, %%cs_qhalf;", R(e, half), R(e, dos));
    op_wgmma_fence(e);
    emit_depth_mma(e, "dV += P^T dO", dv, ps, 1, half, s->q_chunk_bytes, s->steps_m, 1);
    op_wgmma_commit(e);
    emit_note(e, "dP is ready once the group before dV retires");
    op_wgmma_wait(e, 1);
    emit_note(e, "dS = P (dP - D), D = rowsum(dO O) of the row's query (plan: ring dpsum), P the f32 S");
    smem_indexed(e, va, s->off_dpsum, stage, s->vec_stage_bytes);
    for (int h = 0; h < 2; h++) {
        Reg r = reg_b32(e, "cs_vrow");
        emit(e, "mad.lo.u32 %s, %%cs_row%d, %d, %s;", R(e, r), h, BWD_F32, R(e, va));
        op_ld_shared_b32(e, reg_at(e, vec, h), r, 0);
    }
    for (int i = 0; i < s->sdp_regs; i++) {
        Reg v = reg_at(e, dpacc, i);
        emit(e, "sub.f32 %s, %s, %s;", R(e, v), R(e, v), R(e, reg_at(e, vec, (i >> 1) & 1)));
        emit(e, "mul.f32 %s, %s, %s;", R(e, v), R(e, v), R(e, reg_at(e, sacc, i)));
    }
    for (int i = 0; i < s->p_regs; i++)
        op_cvt_pack(e, p->cfg.dtype, reg_at(e, pds, i), reg_at(e, dpacc, 2 * i + 1), reg_at(e, dpacc, 2 * i));
    smem_indexed(e, dss, s->off_ds, reg_find(e, "cs_ds_stage"), s->ds_stage_bytes);
    emit_store_rows(e, pds, dss);
    op_fence_proxy_async(e);
    emit_note(e, "plan: named barrier ds_ready (%d): both consumers' dS columns are in smem", s->bar_ds);
    op_bar_sync(e, s->bar_ds, named_bar_threads(p, s->bar_ds));
    emit_note(e, "dQ first (its registers leave by red while dK runs), then dK; this consumer's depth columns: "
              "chunks from cs_half of Q, cs_ep_k of K");
    op_wgmma_fence(e);
    emit_depth_mma(e, "dQ = dS K", reg_find(e, "dq"), dss, 0, reg_find(e, "cs_ep_k"), s->kv_chunk_bytes, s->steps_n, 0);
    op_wgmma_commit(e);
    emit(e, "add.u32 %s, %s, %%cs_qhalf;", R(e, half), R(e, qs));
    emit_depth_mma(e, "dK += dS^T Q", dk, dss, 1, half, s->q_chunk_bytes, s->steps_m, 1);
    op_wgmma_commit(e);
    emit_note(e, "dQ is ready once its group retires (dK stays in flight)");
    op_wgmma_wait(e, 1);
    emit_dq_red(e, m, hq);
    op_wgmma_wait(e, 0);
    emit_note(e, "every wgmma of this m-block is done: the Q and dO slots are free (one arrival per warp)");
    smem_indexed(e, bar, s->bar_q_empty, stage, MBAR_BYTES);
    op_mbar_arrive_if(e, reg_find(e, "cs_lane0"), bar);
    smem_indexed(e, bar, s->bar_do_empty, stage, MBAR_BYTES);
    op_mbar_arrive_if(e, reg_find(e, "cs_lane0"), bar);
    emit(e, "xor.b32 %%cs_ds_stage, %%cs_ds_stage, 1;");
    ring_advance(e, stage, phase, p->stages);
}
