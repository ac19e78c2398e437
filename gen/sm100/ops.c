/* sm100/ops.c - the sm_100a op layer: TMEM allocation, tcgen05.mma (SS and
 * TS), commits onto mbarriers, TMEM loads and stores, tcgen05 fences and the
 * UMMA shared-memory descriptors. Forms from the PTX ISA (tcgen05), checked by
 * ptxas -arch=sm_100a on every matrix config (tests/ptxas) and run by the simulator. */
#include <stdio.h>

#include "../ops.h"

void op_tmem_alloc(Emit *e, int cg, const char *slot, int ncols)
{
    emit(e, "tcgen05.alloc.cta_group::%d.sync.aligned.shared::cta.b32 [%s], %d;", cg, slot, ncols);
}

void op_tmem_relinquish(Emit *e, int cg) { emit(e, "tcgen05.relinquish_alloc_permit.cta_group::%d.sync.aligned;", cg); }

void op_tmem_dealloc(Emit *e, int cg, const char *taddr, int ncols)
{
    emit(e, "tcgen05.dealloc.cta_group::%d.sync.aligned.b32 %s, %d;", cg, taddr, ncols);
}

void op_tc_fence_before(Emit *e) { emit(e, "tcgen05.fence::before_thread_sync;"); }
void op_tc_fence_after(Emit *e) { emit(e, "tcgen05.fence::after_thread_sync;"); }

void op_umma_desc_lo(Emit *e, const char *dst, const char *addr, uint64_t tmpl)
{
    emit(e, "shr.u32 %s, %s, 4;", dst, addr);
    emit(e, "and.b32 %s, %s, 0x3FFF;", dst, dst);
    emit(e, "or.b32 %s, %s, 0x%08X;", dst, dst, (uint32_t)tmpl);
}

static const char *kind(int f8) { return f8 ? "f8f6f4" : "f16"; }

void op_umma_ss(Emit *e, int cg, int f8, const char *d, const char *adesc, const char *bdesc, const char *idesc,
                const char *acc)
{
    emit(e, "tcgen05.mma.cta_group::%d.kind::%s [%s], %s, %s, %s, %s;", cg, kind(f8), d, adesc, bdesc, idesc, acc);
}

void op_umma_ts(Emit *e, int cg, int f8, const char *d, const char *a_tmem, const char *bdesc, const char *idesc,
                const char *acc)
{
    emit(e, "tcgen05.mma.cta_group::%d.kind::%s [%s], [%s], %s, %s, %s;", cg, kind(f8), d, a_tmem, bdesc, idesc, acc);
}

void op_umma_commit(Emit *e, int cg, const char *bar, const char *mask)
{
    if (mask)
        emit(e, "tcgen05.commit.cta_group::%d.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%s], %s;",
             cg, bar, mask);
    else
        emit(e, "tcgen05.commit.cta_group::%d.mbarrier::arrive::one.shared::cluster.b64 [%s];", cg, bar);
}

void op_tmem_ld(Emit *e, const char *arr, int first, int n, const char *taddr)
{
    char list[4096];
    reglist(list, sizeof list, arr, first, n);
    emit(e, "tcgen05.ld.sync.aligned.32x32b.x%d.b32 %s, [%s];", n, list, taddr);
}

void op_tmem_st(Emit *e, const char *taddr, const char *arr, int first, int n)
{
    char list[4096];
    reglist(list, sizeof list, arr, first, n);
    emit(e, "tcgen05.st.sync.aligned.32x32b.x%d.b32 [%s], %s;", n, taddr, list);
}

static const char *named_list(char *buf, size_t n, const char *const *regs, int k)
{
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < k && len < n; i++) {
        int w = snprintf(buf + len, n - len, "%s%s", i ? ", " : "{", regs[i]);
        if (w > 0) len += (size_t)w;
    }
    if (len < n) snprintf(buf + len, n - len, "}");
    return buf;
}

void op_tmem_ld_regs(Emit *e, const char *const *regs, int n, const char *taddr)
{
    char list[256];
    emit(e, "tcgen05.ld.sync.aligned.32x32b.x%d.b32 %s, [%s];", n, named_list(list, sizeof list, regs, n), taddr);
}

void op_tmem_st_regs(Emit *e, const char *taddr, const char *const *regs, int n)
{
    char list[256];
    emit(e, "tcgen05.st.sync.aligned.32x32b.x%d.b32 [%s], %s;", n, taddr, named_list(list, sizeof list, regs, n));
}

void op_tmem_warp_lanes(Emit *e, const char *dst, const char *warp)
{
    /* a warp reaches the lane quarter of its index within its warpgroup (warp % 4) */
    emit(e, "and.b32 %s, %s, 3;", dst, warp);
    emit(e, "shl.b32 %s, %s, 21;", dst, dst); /* 32 lanes a quarter, lane field at bit 16 */
}

void op_tmem_wait_ld(Emit *e) { emit(e, "tcgen05.wait::ld.sync.aligned;"); }
void op_tmem_wait_st(Emit *e) { emit(e, "tcgen05.wait::st.sync.aligned;"); }

void op_elect(Emit *e, const char *p) { emit(e, "elect.sync _|%s, 0xffffffff;", p); }
