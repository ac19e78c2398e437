/* ops_bwd.c - spellings of the backward's bulk copies and vectors (see ops_bwd.h). Forms from the PTX ISA
 * (cp.async.bulk, cp.reduce.async.bulk: sm_90+), checked with ptxas for sm_90a and run by the simulator. */
#include <stdio.h>

#include "ops_bwd.h"

static const char *at(Emit *e, Reg guard, char *buf, size_t n, const char *fn)
{
    if (!reg_is(guard)) return "";
    if (!reg_want(e, guard, RT_PRED, fn, "guard")) return "";
    snprintf(buf, n, "@%s ", R(e, guard));
    return buf;
}

void op_bulk_load(Emit *e, Reg dst, Reg src, uint32_t bytes, Reg bar)
{
    REG_WANT(e, dst, RT_B32);
    REG_WANT(e, src, RT_B64);
    REG_WANT(e, bar, RT_B32);
    if (bytes % 16) emit_fail(e, "internal: a bulk copy of %u bytes (a multiple of 16 is needed)", bytes);
    emit(e, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%s], [%s], %u, [%s];", R(e, dst),
         R(e, src), bytes, R(e, bar));
}

void op_bulk_reduce_add_f32(Emit *e, Reg dst, Reg src, uint32_t bytes)
{
    REG_WANT(e, dst, RT_B64);
    REG_WANT(e, src, RT_B32);
    if (bytes % 16) emit_fail(e, "internal: a bulk reduction of %u bytes (a multiple of 16 is needed)", bytes);
    emit(e, "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%s], [%s], %u;", R(e, dst), R(e, src), bytes);
}

void op_ld_global_v4_b32(Emit *e, Reg guard, const Reg dst[4], Reg addr, uint32_t off)
{
    char g[48], d[4][EMIT_REG_NAME + 8];
    const char *a = at(e, guard, g, sizeof g, __func__);
    REG_WANT(e, addr, RT_B64);
    for (int i = 0; i < 4; i++) {
        reg_want(e, dst[i], RT_B32, __func__, "dst[i]");
        snprintf(d[i], sizeof d[i], "%s", R(e, dst[i]));
    }
    emit(e, "%sld.global.v4.b32 {%s, %s, %s, %s}, [%s+%u];", a, d[0], d[1], d[2], d[3], R(e, addr), off);
}

void op_st_shared_v4_f32(Emit *e, Reg base, uint32_t off, const Reg src[4])
{
    char d[4][EMIT_REG_NAME + 8];
    REG_WANT(e, base, RT_B32);
    for (int i = 0; i < 4; i++) {
        reg_want(e, src[i], RT_F32, __func__, "src[i]");
        snprintf(d[i], sizeof d[i], "%s", R(e, src[i]));
    }
    emit(e, "st.shared.v4.f32 [%s+%u], {%s, %s, %s, %s};", R(e, base), off, d[0], d[1], d[2], d[3]);
}

void op_red_global_add_v4_f32(Emit *e, Reg addr, uint32_t off, const Reg src[4])
{
    char d[4][EMIT_REG_NAME + 8];
    REG_WANT(e, addr, RT_B64);
    for (int i = 0; i < 4; i++) {
        reg_want(e, src[i], RT_F32, __func__, "src[i]");
        snprintf(d[i], sizeof d[i], "%s", R(e, src[i]));
    }
    emit(e, "red.global.add.v4.f32 [%s+%u], {%s, %s, %s, %s};", R(e, addr), off, d[0], d[1], d[2], d[3]);
}

void op_red_global_add_f32(Emit *e, Reg addr, uint32_t off, Reg x)
{
    REG_WANT(e, addr, RT_B64);
    REG_WANT(e, x, RT_F32);
    emit(e, "red.global.add.f32 [%s+%u], %s;", R(e, addr), off, R(e, x));
}

void op_red_global_add_v2_f32(Emit *e, Reg addr, uint32_t off, Reg x, Reg y)
{
    REG_WANT(e, addr, RT_B64);
    REG_WANT(e, x, RT_F32);
    REG_WANT(e, y, RT_F32);
    emit(e, "red.global.add.v2.f32 [%s+%u], {%s, %s};", R(e, addr), off, R(e, x), R(e, y));
}

/* ---- deterministic=1: the dQ blocks' turn counters (PTX ISA: memory consistency model, release and acquire
 * patterns; nanosleep needs sm_70) ---- */

void op_ld_acquire_gpu_u32(Emit *e, Reg dst, Reg addr)
{
    REG_WANT(e, dst, RT_B32);
    REG_WANT(e, addr, RT_B64);
    emit(e, "ld.acquire.gpu.global.u32 %s, [%s];", R(e, dst), R(e, addr));
}

void op_red_release_gpu_add_u32(Emit *e, Reg guard, Reg addr, uint32_t v)
{
    char g[48];
    const char *a = at(e, guard, g, sizeof g, __func__);
    REG_WANT(e, addr, RT_B64);
    emit(e, "%sred.release.gpu.global.add.u32 [%s], %u;", a, R(e, addr), v);
}

void op_ld_relaxed_gpu_v4_f32(Emit *e, const Reg dst[4], Reg addr, uint32_t off)
{
    REG_WANT(e, addr, RT_B64);
    for (int i = 0; i < 4; i++) reg_want(e, dst[i], RT_F32, __func__, "dst[i]");
    emit(e, "ld.relaxed.gpu.global.v4.f32 {%s, %s, %s, %s}, [%s+%u];", R(e, dst[0]), R(e, dst[1]), R(e, dst[2]),
         R(e, dst[3]), R(e, addr), off);
}

void op_nanosleep(Emit *e, Reg ns)
{
    REG_WANT(e, ns, RT_B32);
    emit(e, "nanosleep.u32 %s;", R(e, ns));
}

void op_fence_proxy_async_global(Emit *e) { emit(e, "fence.proxy.async.global;"); }
