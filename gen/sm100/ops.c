/* sm100/ops.c - the sm_100a op layer: TMEM allocation, tcgen05.mma (SS and
 * TS), commits onto mbarriers, TMEM loads and stores, tcgen05 fences and the
 * UMMA shared-memory descriptors. Forms from the PTX ISA (tcgen05), checked by
 * ptxas -arch=sm_100a on every matrix config (tests/ptxas) and run by the simulator. */
#include <stdio.h>

#include "../ops.h"

void op_tmem_alloc(Emit *e, int cg, Reg slot, int ncols)
{
    REG_WANT(e, slot, RT_B32);
    emit(e, "tcgen05.alloc.cta_group::%d.sync.aligned.shared::cta.b32 [%s], %d;", cg, R(e, slot), ncols);
}

void op_tmem_relinquish(Emit *e, int cg) { emit(e, "tcgen05.relinquish_alloc_permit.cta_group::%d.sync.aligned;", cg); }

void op_tmem_dealloc(Emit *e, int cg, Reg taddr, int ncols)
{
    REG_WANT(e, taddr, RT_B32);
    emit(e, "tcgen05.dealloc.cta_group::%d.sync.aligned.b32 %s, %d;", cg, R(e, taddr), ncols);
}

/* A CTA pair's TMEM freed after its cluster barrier: only the MMA warp (warp_mma, from %warp) deallocates
 * (cta_group::2); everyone else goes to $ret. pr: a scratch predicate. */
void op_pair_tmem_free(Emit *e, Reg pr, int warp_mma, uint32_t off_slot, int ncols)
{
    emit(e, "setp.ne.u32 %s, %%warp, %d;", R(e, pr), warp_mma);
    emit(e, "@%s bra $ret;", R(e, pr));
    op_tc_fence_after(e);
    op_ld_shared_b32(e, reg_find(e, "tmem"), reg_find(e, "smem"), off_slot);
    op_tmem_dealloc(e, 2, reg_find(e, "tmem"), ncols);
    emit_label(e, "$ret");
}

void op_tc_fence_before(Emit *e) { emit(e, "tcgen05.fence::before_thread_sync;"); }
void op_tc_fence_after(Emit *e) { emit(e, "tcgen05.fence::after_thread_sync;"); }

void op_umma_desc_lo(Emit *e, Reg dst, Reg addr, uint64_t tmpl)
{
    REG_WANT(e, dst, RT_B32);
    REG_WANT(e, addr, RT_B32);
    emit(e, "shr.u32 %s, %s, 4;", R(e, dst), R(e, addr));
    emit(e, "and.b32 %s, %s, 0x3FFF;", R(e, dst), R(e, dst));
    emit(e, "or.b32 %s, %s, 0x%08X;", R(e, dst), R(e, dst), (uint32_t)tmpl);
}

static const char *kind(int f8) { return f8 ? "f8f6f4" : "f16"; }

/* The operands both MMA forms share: a b32 TMEM address d, a b64 B descriptor, a b32
 * instruction descriptor; acc a predicate or REG_NONE for the immediate 1. */
static const char *umma_want(Emit *e, Reg d, Reg bdesc, Reg idesc, Reg acc)
{
    REG_WANT(e, d, RT_B32);
    REG_WANT(e, bdesc, RT_B64);
    REG_WANT(e, idesc, RT_B32);
    if (!reg_is(acc)) return "1";
    REG_WANT(e, acc, RT_PRED);
    return R(e, acc);
}

void op_umma_ss(Emit *e, int cg, int f8, Reg d, Reg adesc, Reg bdesc, Reg idesc, Reg acc)
{
    const char *a = umma_want(e, d, bdesc, idesc, acc);
    REG_WANT(e, adesc, RT_B64);
    emit(e, "tcgen05.mma.cta_group::%d.kind::%s [%s], %s, %s, %s, %s;", cg, kind(f8), R(e, d), R(e, adesc),
         R(e, bdesc), R(e, idesc), a);
}

void op_umma_ts(Emit *e, int cg, int f8, Reg d, Reg a_tmem, Reg bdesc, Reg idesc, Reg acc)
{
    const char *a = umma_want(e, d, bdesc, idesc, acc);
    REG_WANT(e, a_tmem, RT_B32);
    emit(e, "tcgen05.mma.cta_group::%d.kind::%s [%s], [%s], %s, %s, %s;", cg, kind(f8), R(e, d), R(e, a_tmem),
         R(e, bdesc), R(e, idesc), a);
}

void op_umma_commit(Emit *e, int cg, Reg bar, Reg mask)
{
    REG_WANT(e, bar, RT_B32);
    if (reg_is(mask)) {
        REG_WANT(e, mask, RT_B16);
        emit(e, "tcgen05.commit.cta_group::%d.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%s], %s;",
             cg, R(e, bar), R(e, mask));
    } else
        emit(e, "tcgen05.commit.cta_group::%d.mbarrier::arrive::one.shared::cluster.b64 [%s];", cg, R(e, bar));
}

void op_tmem_cp_64x128b_dup(Emit *e, int cg, Reg taddr, Reg sdesc)
{
    REG_WANT(e, taddr, RT_B32);
    REG_WANT(e, sdesc, RT_B64);
    emit(e, "tcgen05.cp.cta_group::%d.64x128b.warpx2::02_13 [%s], %s;", cg, R(e, taddr), R(e, sdesc));
}

void op_tmem_ld(Emit *e, Reg arr, int first, int n, Reg taddr)
{
    char list[4096];
    REG_WANT(e, arr, RT_B32 | RT_F32);
    REG_WANT(e, taddr, RT_B32);
    reg_list(e, list, sizeof list, arr, first, n);
    emit(e, "tcgen05.ld.sync.aligned.32x32b.x%d.b32 %s, [%s];", n, list, R(e, taddr));
}

void op_tmem_st(Emit *e, Reg taddr, Reg arr, int first, int n)
{
    char list[4096];
    REG_WANT(e, arr, RT_B32 | RT_F32);
    REG_WANT(e, taddr, RT_B32);
    reg_list(e, list, sizeof list, arr, first, n);
    emit(e, "tcgen05.st.sync.aligned.32x32b.x%d.b32 [%s], %s;", n, R(e, taddr), list);
}

static const char *named_list(Emit *e, char *buf, size_t n, const Reg *regs, int k)
{
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < k && len < n; i++) {
        reg_want(e, regs[i], RT_B32 | RT_F32, "op_tmem_ld_regs/st_regs", "regs[i]");
        int w = snprintf(buf + len, n - len, "%s%s", i ? ", " : "{", R(e, regs[i]));
        if (w > 0) len += (size_t)w;
    }
    if (len < n) snprintf(buf + len, n - len, "}");
    return buf;
}

void op_tmem_ld_regs(Emit *e, const Reg *regs, int n, Reg taddr)
{
    char list[256];
    REG_WANT(e, taddr, RT_B32);
    emit(e, "tcgen05.ld.sync.aligned.32x32b.x%d.b32 %s, [%s];", n, named_list(e, list, sizeof list, regs, n),
         R(e, taddr));
}

void op_tmem_st_regs(Emit *e, Reg taddr, const Reg *regs, int n)
{
    char list[256];
    REG_WANT(e, taddr, RT_B32);
    emit(e, "tcgen05.st.sync.aligned.32x32b.x%d.b32 [%s], %s;", n, R(e, taddr),
         named_list(e, list, sizeof list, regs, n));
}

void op_tmem_warp_lanes(Emit *e, Reg dst, Reg warp)
{
    REG_WANT(e, dst, RT_B32);
    REG_WANT(e, warp, RT_B32);
    /* a warp reaches the lane quarter of its index within its warpgroup (warp % 4) */
    emit(e, "and.b32 %s, %s, 3;", R(e, dst), R(e, warp));
    emit(e, "shl.b32 %s, %s, 21;", R(e, dst), R(e, dst)); /* 32 lanes a quarter, lane field at bit 16 */
}

void op_tmem_wait_ld(Emit *e) { emit(e, "tcgen05.wait::ld.sync.aligned;"); }
void op_tmem_wait_st(Emit *e) { emit(e, "tcgen05.wait::st.sync.aligned;"); }

void op_tma_gather4(Emit *e, int cg, Reg dst, Reg tmap, Reg col, const Reg rows[4], Reg bar)
{
    REG_WANT(e, dst, RT_B32);
    REG_WANT(e, bar, RT_B32);
    REG_WANT(e, tmap, RT_B64);
    REG_WANT(e, col, RT_B32);
    for (int i = 0; i < 4; i++) reg_want(e, rows[i], RT_B32, __func__, "rows[i]");
    emit(e, "cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4.mbarrier::complete_tx::bytes%s [%s], [%s, {%s, "
            "%s, %s, %s, %s}], [%s];", cg == 2 ? ".cta_group::2" : "", R(e, dst), R(e, tmap), R(e, col), R(e, rows[0]),
         R(e, rows[1]), R(e, rows[2]), R(e, rows[3]), R(e, bar));
}

void op_elect(Emit *e, Reg p)
{
    REG_WANT(e, p, RT_PRED);
    emit(e, "elect.sync _|%s, 0xffffffff;", R(e, p));
}
