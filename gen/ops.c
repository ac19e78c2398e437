/* ops.c - PTX forms shared by the sm_90a and sm_100a kernels: mbarriers, TMA
 * (tiled loads and stores), bulk groups, proxy fences, named barriers and
 * register reallocation. Forms from the PTX ISA, checked with ptxas for both
 * targets (tests/ptxas) and run by the simulator (tests/sim). */
#include <stdio.h>

#include "ops.h"

/* "@guard " before a guarded instruction, "" for an unguarded one. */
static const char *guard_prefix(char *buf, size_t n, const char *guard)
{
    if (!guard) return "";
    snprintf(buf, n, "@%s ", guard);
    return buf;
}

uint32_t op_desc_delta(uint32_t bytes) { return bytes >> 4; }

uint32_t op_desc_kstep(int kk, int steps_per_chunk, uint32_t step_bytes, uint32_t chunk_bytes)
{
    return op_desc_delta((uint32_t)(kk / steps_per_chunk) * chunk_bytes + (uint32_t)(kk % steps_per_chunk) * step_bytes);
}

void op_mbar_init(Emit *e, const char *bar, int count)
{
    emit(e, "mbarrier.init.shared::cta.b64 [%s], %d;", bar, count);
}

void op_mbar_init_fence(Emit *e)
{
    /* make the initialised barriers visible to the async proxy (TMA, MMA) */
    emit(e, "fence.mbarrier_init.release.cluster;");
}

void op_mbar_wait(Emit *e, const char *bar, const char *parity)
{
    char lbl[32];
    const char *p = reg(e, "pred", "p_wait");
    new_label(e, lbl, sizeof lbl, "wait");
    emit_label(e, lbl);
    emit(e, "mbarrier.try_wait.parity.shared::cta.b64 %s, [%s], %s;", p, bar, parity);
    emit(e, "@!%s bra %s;", p, lbl);
}

void op_mbar_arrive(Emit *e, const char *bar) { op_mbar_arrive_if(e, NULL, bar); }

void op_mbar_arrive_if(Emit *e, const char *guard, const char *bar)
{
    char g[EMIT_REG_NAME + 4];
    emit(e, "%smbarrier.arrive.shared::cta.b64 _, [%s];", guard_prefix(g, sizeof g, guard), bar);
}

void op_mbar_expect_tx(Emit *e, const char *bar, uint32_t bytes) { op_mbar_expect_tx_if(e, NULL, bar, bytes); }

void op_mbar_expect_tx_if(Emit *e, const char *pred, const char *bar, uint32_t bytes)
{
    char g[EMIT_REG_NAME + 4];
    emit(e, "%smbarrier.arrive.expect_tx.shared::cta.b64 _, [%s], %u;", guard_prefix(g, sizeof g, pred), bar, bytes);
}

void op_mapa(Emit *e, const char *dst, const char *addr, const char *rank)
{
    emit(e, "mapa.shared::cluster.u32 %s, %s, %s;", dst, addr, rank);
}

void op_mbar_arrive_cluster(Emit *e, const char *bar)
{
    emit(e, "mbarrier.arrive.shared::cluster.b64 _, [%s];", bar);
}

void op_cluster_sync(Emit *e)
{
    emit(e, "barrier.cluster.arrive.release;");
    emit(e, "barrier.cluster.wait.acquire;");
}

void op_tma_load_4d_pair(Emit *e, const char *dst, const char *tmap, const char *c0, const char *c1, const char *c2,
                         const char *c3, const char *bar)
{
    emit(e, "cp.async.bulk.tensor.4d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes [%s], [%s, {%s, "
            "%s, %s, %s}], [%s];", dst, tmap, c0, c1, c2, c3, bar);
}

void op_tma_load_4d(Emit *e, const char *dst, const char *tmap, const char *c0, const char *c1, const char *c2,
                    const char *c3, const char *bar)
{
    emit(e, "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%s], [%s, {%s, %s, %s, %s}], [%s];",
         dst, tmap, c0, c1, c2, c3, bar);
}

void op_tma_store_4d(Emit *e, const char *tmap, const char *c0, const char *c1, const char *c2, const char *c3,
                     const char *src)
{
    emit(e, "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%s, {%s, %s, %s, %s}], [%s];", tmap, c0, c1, c2,
         c3, src);
}

void op_bulk_commit(Emit *e) { emit(e, "cp.async.bulk.commit_group;"); }
void op_bulk_wait_read(Emit *e, int n) { emit(e, "cp.async.bulk.wait_group.read %d;", n); }
void op_bulk_wait(Emit *e, int n) { emit(e, "cp.async.bulk.wait_group %d;", n); }
void op_fence_proxy_async(Emit *e) { emit(e, "fence.proxy.async.shared::cta;"); }
void op_bar_sync_at(Emit *e, const char *guard, const char *id, int threads)
{
    char g[EMIT_REG_NAME + 4];
    emit(e, "%sbar.sync %s, %d;", guard_prefix(g, sizeof g, guard), id, threads);
}

void op_bar_arrive_at(Emit *e, const char *guard, const char *id, int threads)
{
    char g[EMIT_REG_NAME + 4];
    emit(e, "%sbar.arrive %s, %d;", guard_prefix(g, sizeof g, guard), id, threads);
}

void op_bar_sync_if(Emit *e, const char *guard, int id, int threads)
{
    char n[12];
    snprintf(n, sizeof n, "%d", id);
    op_bar_sync_at(e, guard, n, threads);
}

void op_bar_arrive_if(Emit *e, const char *guard, int id, int threads)
{
    char n[12];
    snprintf(n, sizeof n, "%d", id);
    op_bar_arrive_at(e, guard, n, threads);
}

void op_bar_sync(Emit *e, int id, int threads) { op_bar_sync_if(e, NULL, id, threads); }
void op_bar_arrive(Emit *e, int id, int threads) { op_bar_arrive_if(e, NULL, id, threads); }

void op_warp_sync(Emit *e) { emit(e, "bar.warp.sync 0xffffffff;"); }

void op_shfl_bfly(Emit *e, const char *dst, const char *src, int lane_mask)
{
    /* clamp 0x1f: butterflies stay inside the warp; membermask: every lane takes part */
    emit(e, "shfl.sync.bfly.b32 %s, %s, %d, 0x1f, 0xffffffff;", dst, src, lane_mask);
}

void op_vote_any(Emit *e, const char *dst, const char *pred)
{
    emit(e, "vote.sync.any.pred %s, %s, 0xffffffff;", dst, pred);
}

void op_cvt(Emit *e, const char *form, const char *dst, const char *src)
{
    emit(e, "cvt.%s %s, %s;", form, dst, src);
}

void op_cvt_pack(Emit *e, DType dt, const char *dst, const char *hi, const char *lo)
{
    /* e4m3 saturates: a P or O past the format's range becomes its largest finite value */
    static const char *const form[DT_COUNT] = {[DT_BF16] = "cvt.rn.bf16x2.f32", [DT_FP16] = "cvt.rn.f16x2.f32",
                                               [DT_E4M3] = "cvt.rn.satfinite.e4m3x2.f32"};
    emit(e, "%s %s, %s, %s;", form[dt], dst, hi, lo);
}

void op_ld_shared_b32(Emit *e, const char *dst, const char *base, uint32_t off)
{
    emit(e, "ld.shared.b32 %s, [%s+%u];", dst, base, off);
}

void op_st_shared_b32(Emit *e, const char *base, uint32_t off, const char *src)
{
    emit(e, "st.shared.b32 [%s+%u], %s;", base, off, src);
}

void op_st_global_f32(Emit *e, const char *guard, const char *addr, const char *src)
{
    char g[EMIT_REG_NAME + 4];
    emit(e, "%sst.global.f32 [%s], %s;", guard_prefix(g, sizeof g, guard), addr, src);
}

void op_st_shared_v4_b32(Emit *e, const char *base, uint32_t off, const char *const src[4])
{
    emit(e, "st.shared.v4.b32 [%s+%u], {%s, %s, %s, %s};", base, off, src[0], src[1], src[2], src[3]);
}

void op_setmaxnreg(Emit *e, int regs, int entry_regs)
{
    if (regs == entry_regs) return;
    emit(e, "setmaxnreg.%s.sync.aligned.u32 %d;", regs > entry_regs ? "inc" : "dec", regs);
}

void op_param_addr(Emit *e, const char *dst, const char *param)
{
    emit(e, "mov.b64 %s, %s;", dst, param);
    emit(e, "cvta.param.u64 %s, %s;", dst, dst);
}
