/* ops.c - PTX forms shared by the sm_90a and sm_100a kernels: mbarriers, TMA
 * (tiled loads and stores), bulk groups, proxy fences, named barriers and
 * register reallocation. Forms from the PTX ISA, checked with ptxas for both
 * targets (tests/ptxas) and run by the simulator (tests/sim). */
#include <stdio.h>

#include "ops.h"

/* "@guard " before a guarded instruction (guard a pred Reg, perhaps negated), "" for an
 * unguarded one (REG_NONE). fn names the op in the check's message. */
static const char *guard_prefix(Emit *e, char *buf, size_t n, Reg guard, const char *fn)
{
    if (!reg_is(guard)) return "";
    if (!reg_want(e, guard, RT_PRED, fn, "guard")) return "";
    snprintf(buf, n, "@%s ", R(e, guard));
    return buf;
}

/* The operand classes: shared-memory addresses and TMEM addresses are b32 (u32), generic
 * and global addresses b64. */
#define ADDR32 RT_B32
#define ADDR64 RT_B64
#define WORD (RT_B32 | RT_F32)

uint32_t op_desc_delta(uint32_t bytes) { return bytes >> 4; }

uint32_t op_desc_kstep(int kk, int steps_per_chunk, uint32_t step_bytes, uint32_t chunk_bytes)
{
    return op_desc_delta((uint32_t)(kk / steps_per_chunk) * chunk_bytes + (uint32_t)(kk % steps_per_chunk) * step_bytes);
}

void op_mbar_init(Emit *e, Reg bar, int count)
{
    REG_WANT(e, bar, ADDR32);
    emit(e, "mbarrier.init.shared::cta.b64 [%s], %d;", R(e, bar), count);
}

void op_mbar_init_fence(Emit *e)
{
    /* make the initialised barriers visible to the async proxy (TMA, MMA) */
    emit(e, "fence.mbarrier_init.release.cluster;");
}

static void mbar_wait(Emit *e, Reg bar, const char *parity)
{
    char lbl[32];
    Reg p = reg_pred(e, "p_wait");
    REG_WANT(e, bar, ADDR32);
    new_label(e, lbl, sizeof lbl, "wait");
    emit_label(e, lbl);
    emit(e, "mbarrier.try_wait.parity.shared::cta.b64 %s, [%s], %s;", R(e, p), R(e, bar), parity);
    emit(e, "@!%s bra %s;", R(e, p), lbl);
}

/* p = phase `parity` of bar has completed, without blocking (PTX ISA: test_wait is a non-blocking test; with
 * its default .acquire it orders what follows after the phase's arrivals only when it reads 1) */
void op_mbar_test_wait_imm(Emit *e, Reg p, Reg bar, int parity)
{
    REG_WANT(e, p, RT_PRED);
    REG_WANT(e, bar, ADDR32);
    emit(e, "mbarrier.test_wait.parity.shared::cta.b64 %s, [%s], %d;", R(e, p), R(e, bar), parity & 1);
}

void op_mbar_wait(Emit *e, Reg bar, Reg parity)
{
    REG_WANT(e, parity, RT_B32);
    mbar_wait(e, bar, R(e, parity));
}

void op_mbar_wait_imm(Emit *e, Reg bar, int parity)
{
    char n[12];
    snprintf(n, sizeof n, "%d", parity);
    mbar_wait(e, bar, n);
}

void op_mbar_arrive(Emit *e, Reg bar) { op_mbar_arrive_if(e, REG_NONE, bar); }

void op_mbar_arrive_if(Emit *e, Reg guard, Reg bar)
{
    char g[EMIT_REG_NAME + 4];
    const char *at = guard_prefix(e, g, sizeof g, guard, __func__);
    REG_WANT(e, bar, ADDR32);
    emit(e, "%smbarrier.arrive.shared::cta.b64 _, [%s];", at, R(e, bar));
}

void op_mbar_expect_tx(Emit *e, Reg bar, uint32_t bytes) { op_mbar_expect_tx_if(e, REG_NONE, bar, bytes); }

void op_mbar_expect_tx_if(Emit *e, Reg pred, Reg bar, uint32_t bytes)
{
    char g[EMIT_REG_NAME + 4];
    const char *at = guard_prefix(e, g, sizeof g, pred, __func__);
    REG_WANT(e, bar, ADDR32);
    emit(e, "%smbarrier.arrive.expect_tx.shared::cta.b64 _, [%s], %u;", at, R(e, bar), bytes);
}

void op_mapa(Emit *e, Reg dst, Reg addr, Reg rank)
{
    REG_WANT(e, dst, ADDR32);
    REG_WANT(e, addr, ADDR32);
    REG_WANT(e, rank, RT_B32);
    emit(e, "mapa.shared::cluster.u32 %s, %s, %s;", R(e, dst), R(e, addr), R(e, rank));
}

void op_mbar_arrive_cluster(Emit *e, Reg bar)
{
    REG_WANT(e, bar, ADDR32);
    emit(e, "mbarrier.arrive.shared::cluster.b64 _, [%s];", R(e, bar));
}

void op_cluster_sync(Emit *e)
{
    emit(e, "barrier.cluster.arrive.release;");
    emit(e, "barrier.cluster.wait.acquire;");
}

/* The operands of a 4-D TMA box: a b64 tensor map and four b32 coordinates. */
static void want_box(Emit *e, Reg tmap, Reg c0, Reg c1, Reg c2, Reg c3)
{
    REG_WANT(e, tmap, ADDR64);
    REG_WANT(e, c0, RT_B32);
    REG_WANT(e, c1, RT_B32);
    REG_WANT(e, c2, RT_B32);
    REG_WANT(e, c3, RT_B32);
}

void op_tma_load_4d_pair(Emit *e, Reg dst, Reg tmap, Reg c0, Reg c1, Reg c2, Reg c3, Reg bar)
{
    REG_WANT(e, dst, ADDR32);
    REG_WANT(e, bar, ADDR32);
    want_box(e, tmap, c0, c1, c2, c3);
    emit(e, "cp.async.bulk.tensor.4d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes [%s], [%s, {%s, "
            "%s, %s, %s}], [%s];", R(e, dst), R(e, tmap), R(e, c0), R(e, c1), R(e, c2), R(e, c3), R(e, bar));
}

void op_tma_load_4d(Emit *e, Reg dst, Reg tmap, Reg c0, Reg c1, Reg c2, Reg c3, Reg bar)
{
    REG_WANT(e, dst, ADDR32);
    REG_WANT(e, bar, ADDR32);
    want_box(e, tmap, c0, c1, c2, c3);
    emit(e, "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%s], [%s, {%s, %s, %s, %s}], [%s];",
         R(e, dst), R(e, tmap), R(e, c0), R(e, c1), R(e, c2), R(e, c3), R(e, bar));
}

void op_tma_prefetch_4d(Emit *e, Reg tmap, Reg c0, Reg c1, Reg c2, Reg c3)
{
    want_box(e, tmap, c0, c1, c2, c3);
    emit(e, "cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%s, {%s, %s, %s, %s}];", R(e, tmap), R(e, c0), R(e, c1),
         R(e, c2), R(e, c3));
}

static void tma_load_3d(Emit *e, const char *group, Reg dst, Reg tmap, Reg c0, Reg c1, Reg c2, Reg bar)
{
    REG_WANT(e, dst, ADDR32);
    REG_WANT(e, bar, ADDR32);
    REG_WANT(e, tmap, ADDR64);
    REG_WANT(e, c0, RT_B32);
    REG_WANT(e, c1, RT_B32);
    REG_WANT(e, c2, RT_B32);
    emit(e, "cp.async.bulk.tensor.3d%s.shared::cluster.global.mbarrier::complete_tx::bytes [%s], [%s, {%s, %s, %s}], [%s];",
         group, R(e, dst), R(e, tmap), R(e, c0), R(e, c1), R(e, c2), R(e, bar));
}

void op_tma_load_3d(Emit *e, Reg dst, Reg tmap, Reg c0, Reg c1, Reg c2, Reg bar)
{
    tma_load_3d(e, "", dst, tmap, c0, c1, c2, bar);
}

void op_tma_load_3d_pair(Emit *e, Reg dst, Reg tmap, Reg c0, Reg c1, Reg c2, Reg bar)
{
    tma_load_3d(e, ".cta_group::2", dst, tmap, c0, c1, c2, bar);
}

void op_tma_store_4d(Emit *e, Reg tmap, Reg c0, Reg c1, Reg c2, Reg c3, Reg src)
{
    REG_WANT(e, src, ADDR32);
    want_box(e, tmap, c0, c1, c2, c3);
    emit(e, "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%s, {%s, %s, %s, %s}], [%s];", R(e, tmap),
         R(e, c0), R(e, c1), R(e, c2), R(e, c3), R(e, src));
}

void op_tma_store_3d(Emit *e, Reg tmap, Reg c0, Reg c1, Reg c2, Reg src)
{
    REG_WANT(e, src, ADDR32);
    REG_WANT(e, tmap, ADDR64);
    REG_WANT(e, c0, RT_B32);
    REG_WANT(e, c1, RT_B32);
    REG_WANT(e, c2, RT_B32);
    emit(e, "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%s, {%s, %s, %s}], [%s];", R(e, tmap), R(e, c0),
         R(e, c1), R(e, c2), R(e, src));
}

void op_bulk_commit(Emit *e) { emit(e, "cp.async.bulk.commit_group;"); }
void op_bulk_wait_read(Emit *e, int n) { emit(e, "cp.async.bulk.wait_group.read %d;", n); }
void op_bulk_wait(Emit *e, int n) { emit(e, "cp.async.bulk.wait_group %d;", n); }
void op_fence_proxy_async(Emit *e) { emit(e, "fence.proxy.async.shared::cta;"); }
void op_fence_proxy_async_cluster(Emit *e) { emit(e, "fence.proxy.async.shared::cluster;"); }

void op_st_cluster_v4_b32(Emit *e, Reg addr, uint32_t off, const Reg src[4])
{
    REG_WANT(e, addr, ADDR32);
    for (int i = 0; i < 4; i++) reg_want(e, src[i], WORD, __func__, "src[i]");
    emit(e, "st.shared::cluster.v4.b32 [%s+%u], {%s, %s, %s, %s};", R(e, addr), off, R(e, src[0]), R(e, src[1]),
         R(e, src[2]), R(e, src[3]));
}

static void bar_op(Emit *e, const char *op, Reg guard, const char *id, int threads, const char *fn)
{
    char g[EMIT_REG_NAME + 4];
    emit(e, "%sbar.%s %s, %d;", guard_prefix(e, g, sizeof g, guard, fn), op, id, threads);
}

void op_bar_sync_at(Emit *e, Reg guard, Reg id, int threads)
{
    REG_WANT(e, id, RT_B32);
    bar_op(e, "sync", guard, R(e, id), threads, __func__);
}

void op_bar_arrive_at(Emit *e, Reg guard, Reg id, int threads)
{
    REG_WANT(e, id, RT_B32);
    bar_op(e, "arrive", guard, R(e, id), threads, __func__);
}

void op_bar_sync_if(Emit *e, Reg guard, int id, int threads)
{
    char n[12];
    snprintf(n, sizeof n, "%d", id);
    bar_op(e, "sync", guard, n, threads, __func__);
}

void op_bar_arrive_if(Emit *e, Reg guard, int id, int threads)
{
    char n[12];
    snprintf(n, sizeof n, "%d", id);
    bar_op(e, "arrive", guard, n, threads, __func__);
}

void op_bar_sync(Emit *e, int id, int threads) { op_bar_sync_if(e, REG_NONE, id, threads); }
void op_bar_arrive(Emit *e, int id, int threads) { op_bar_arrive_if(e, REG_NONE, id, threads); }

void op_warp_sync(Emit *e) { emit(e, "bar.warp.sync 0xffffffff;"); }

void op_shfl_bfly(Emit *e, Reg dst, Reg src, int lane_mask)
{
    REG_WANT(e, dst, WORD);
    REG_WANT(e, src, WORD);
    /* clamp 0x1f: butterflies stay inside the warp; membermask: every lane takes part */
    emit(e, "shfl.sync.bfly.b32 %s, %s, %d, 0x1f, 0xffffffff;", R(e, dst), R(e, src), lane_mask);
}

void op_shfl_idx(Emit *e, Reg dst, Reg src, Reg lane)
{
    REG_WANT(e, dst, WORD);
    REG_WANT(e, src, WORD);
    REG_WANT(e, lane, RT_B32);
    emit(e, "shfl.sync.idx.b32 %s, %s, %s, 0x1f, 0xffffffff;", R(e, dst), R(e, src), R(e, lane));
}

void op_vote_any(Emit *e, Reg dst, Reg pred)
{
    REG_WANT(e, dst, RT_PRED);
    REG_WANT(e, pred, RT_PRED);
    emit(e, "vote.sync.any.pred %s, %s, 0xffffffff;", R(e, dst), R(e, pred));
}

void op_vote_ballot(Emit *e, Reg dst, Reg pred)
{
    REG_WANT(e, dst, RT_B32);
    REG_WANT(e, pred, RT_PRED);
    emit(e, "vote.sync.ballot.b32 %s, %s, 0xffffffff;", R(e, dst), R(e, pred));
}

void op_cvt(Emit *e, const char *form, Reg dst, Reg src)
{
    REG_WANT(e, dst, RT_B16 | RT_B32 | RT_B64 | RT_F32);
    REG_WANT(e, src, RT_B16 | RT_B32 | RT_B64 | RT_F32);
    emit(e, "cvt.%s %s, %s;", form, R(e, dst), R(e, src));
}

void op_cvt_pack(Emit *e, DType dt, Reg dst, Reg hi, Reg lo)
{
    /* e4m3 saturates: a P or O past the format's range becomes its largest finite value */
    static const char *const form[DT_COUNT] = {[DT_BF16] = "cvt.rn.bf16x2.f32", [DT_FP16] = "cvt.rn.f16x2.f32",
                                               [DT_E4M3] = "cvt.rn.satfinite.e4m3x2.f32"};
    REG_WANT(e, dst, dt == DT_E4M3 ? RT_B16 : RT_B32);
    REG_WANT(e, hi, RT_F32);
    REG_WANT(e, lo, RT_F32);
    emit(e, "%s %s, %s, %s;", form[dt], R(e, dst), R(e, hi), R(e, lo));
}

void op_ld_shared_b32(Emit *e, Reg dst, Reg base, uint32_t off)
{
    REG_WANT(e, dst, WORD);
    REG_WANT(e, base, ADDR32);
    emit(e, "ld.shared.b32 %s, [%s+%u];", R(e, dst), R(e, base), off);
}

void op_ld_shared_v2_b32(Emit *e, Reg d0, Reg d1, Reg base, uint32_t off)
{
    REG_WANT(e, d0, WORD);
    REG_WANT(e, d1, WORD);
    REG_WANT(e, base, ADDR32);
    emit(e, "ld.shared.v2.b32 {%s, %s}, [%s+%u];", R(e, d0), R(e, d1), R(e, base), off);
}

void op_st_shared_b32(Emit *e, Reg base, uint32_t off, Reg src)
{
    REG_WANT(e, base, ADDR32);
    REG_WANT(e, src, WORD);
    emit(e, "st.shared.b32 [%s+%u], %s;", R(e, base), off, R(e, src));
}

void op_st_shared_b32_if(Emit *e, Reg guard, Reg base, uint32_t off, Reg src)
{
    char g[EMIT_REG_NAME + 4];
    const char *at = guard_prefix(e, g, sizeof g, guard, __func__);
    REG_WANT(e, base, ADDR32);
    REG_WANT(e, src, WORD);
    emit(e, "%sst.shared.b32 [%s+%u], %s;", at, R(e, base), off, R(e, src));
}

void op_st_shared_v2_f32(Emit *e, Reg base, uint32_t off, Reg x, Reg y)
{
    REG_WANT(e, base, ADDR32);
    REG_WANT(e, x, RT_F32);
    REG_WANT(e, y, RT_F32);
    emit(e, "st.shared.v2.f32 [%s+%u], {%s, %s};", R(e, base), off, R(e, x), R(e, y));
}

void op_ld_cluster_f32_if(Emit *e, Reg guard, Reg dst, Reg addr)
{
    char g[EMIT_REG_NAME + 4];
    const char *at = guard_prefix(e, g, sizeof g, guard, __func__);
    REG_WANT(e, dst, RT_F32);
    REG_WANT(e, addr, ADDR32);
    emit(e, "%sld.shared::cluster.f32 %s, [%s];", at, R(e, dst), R(e, addr));
}

void op_ld_cluster_v4_f32_if(Emit *e, Reg guard, const Reg dst[4], Reg addr, uint32_t off)
{
    char g[EMIT_REG_NAME + 4];
    const char *at = guard_prefix(e, g, sizeof g, guard, __func__);
    REG_WANT(e, addr, ADDR32);
    for (int i = 0; i < 4; i++) REG_WANT(e, dst[i], RT_F32);
    char d[4][EMIT_REG_NAME + 8];
    for (int i = 0; i < 4; i++) snprintf(d[i], sizeof d[i], "%s", R(e, dst[i]));
    emit(e, "%sld.shared::cluster.v4.f32 {%s, %s, %s, %s}, [%s+%u];", at, d[0], d[1], d[2], d[3], R(e, addr), off);
}

/* config dynamic: the tile counter (PTX ISA, atom; memory consistency model). A claim needs no order of its own;
 * the done count is acq_rel so that the CTA that sees the last arrival also sees every claim before it. */
void op_atom_add_u32(Emit *e, const char *sem, Reg dst, Reg addr, uint32_t off, uint32_t v)
{
    REG_WANT(e, dst, RT_B32);
    REG_WANT(e, addr, ADDR64);
    emit(e, "atom.%s.gpu.global.add.u32 %s, [%s+%u], %u;", sem, R(e, dst), R(e, addr), off, v);
}

void op_atom_add_u32_reg(Emit *e, const char *sem, Reg dst, Reg addr, uint32_t off, Reg v)
{
    REG_WANT(e, dst, RT_B32);
    REG_WANT(e, addr, ADDR64);
    REG_WANT(e, v, RT_B32);
    emit(e, "atom.%s.gpu.global.add.u32 %s, [%s+%u], %s;", sem, R(e, dst), R(e, addr), off, R(e, v));
}

void op_st_relaxed_gpu_v2_u32_zero(Emit *e, Reg guard, Reg addr)
{
    char g[EMIT_REG_NAME + 4];
    const char *at = guard_prefix(e, g, sizeof g, guard, __func__);
    REG_WANT(e, addr, ADDR64);
    emit(e, "%sst.relaxed.gpu.global.v2.u32 [%s], {0, 0};", at, R(e, addr));
}

void op_st_global_f32(Emit *e, Reg guard, Reg addr, Reg src)
{
    char g[EMIT_REG_NAME + 4];
    const char *at = guard_prefix(e, g, sizeof g, guard, __func__);
    REG_WANT(e, addr, ADDR64);
    REG_WANT(e, src, RT_F32);
    emit(e, "%sst.global.f32 [%s], %s;", at, R(e, addr), R(e, src));
}

void op_st_shared_v4_b32(Emit *e, Reg base, uint32_t off, const Reg src[4])
{
    REG_WANT(e, base, ADDR32);
    for (int i = 0; i < 4; i++) reg_want(e, src[i], WORD, __func__, "src[i]");
    emit(e, "st.shared.v4.b32 [%s+%u], {%s, %s, %s, %s};", R(e, base), off, R(e, src[0]), R(e, src[1]), R(e, src[2]),
         R(e, src[3]));
}

void op_ld_shared_v4_b32(Emit *e, const Reg dst[4], Reg base, uint32_t off)
{
    REG_WANT(e, base, ADDR32);
    for (int i = 0; i < 4; i++) reg_want(e, dst[i], WORD, __func__, "dst[i]");
    emit(e, "ld.shared.v4.b32 {%s, %s, %s, %s}, [%s+%u];", R(e, dst[0]), R(e, dst[1]), R(e, dst[2]), R(e, dst[3]),
         R(e, base), off);
}

void op_setmaxnreg(Emit *e, int regs, int entry_regs)
{
    if (regs == entry_regs) return;
    emit(e, "setmaxnreg.%s.sync.aligned.u32 %d;", regs > entry_regs ? "inc" : "dec", regs);
}

void op_param_addr(Emit *e, Reg dst, const char *param)
{
    REG_WANT(e, dst, ADDR64);
    emit(e, "mov.b64 %s, %s;", R(e, dst), param);
    emit(e, "cvta.param.u64 %s, %s;", R(e, dst), R(e, dst));
}
