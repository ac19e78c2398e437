/* ops.c - PTX forms shared by the sm_90a and sm_100a kernels: mbarriers, TMA
 * (tiled loads and stores), bulk groups, proxy fences, named barriers and
 * register reallocation. Forms are those in notes/ptx-cheatsheet.md, checked
 * with ptxas for both targets (tests/ptxas). */
#include "ops.h"

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

void op_mbar_arrive(Emit *e, const char *bar)
{
    emit(e, "mbarrier.arrive.shared::cta.b64 _, [%s];", bar);
}

void op_mbar_expect_tx(Emit *e, const char *bar, uint32_t bytes) { op_mbar_expect_tx_if(e, NULL, bar, bytes); }

void op_mbar_expect_tx_if(Emit *e, const char *pred, const char *bar, uint32_t bytes)
{
    emit(e, "%s%s%smbarrier.arrive.expect_tx.shared::cta.b64 _, [%s], %u;", pred ? "@" : "", pred ? pred : "",
         pred ? " " : "", bar, bytes);
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
void op_bar_sync(Emit *e, int id, int threads) { emit(e, "bar.sync %d, %d;", id, threads); }
void op_bar_arrive(Emit *e, int id, int threads) { emit(e, "bar.arrive %d, %d;", id, threads); }

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
