/* ops_copy.c - spellings of the plain copies (see ops_copy.h). Forms from the PTX ISA:
 * cp.async (sm_80+; .cg caches in L2 only, 16 bytes, src-size zero-fills the rest),
 * cp.async.mbarrier.arrive.noinc (sm_80+), ld/st of the global and param state spaces, the special registers
 * %clock64, %globaltimer and %smid. */
#include <stdio.h>

#include "ops_copy.h"

static const char *at(Emit *e, Reg guard, char *buf, size_t n, const char *fn)
{
    if (!reg_is(guard)) return "";
    if (!reg_want(e, guard, RT_PRED, fn, "guard")) return "";
    snprintf(buf, n, "@%s ", R(e, guard));
    return buf;
}

void op_cp_async16(Emit *e, Reg guard, Reg dst, uint32_t dst_off, Reg src, uint32_t src_off, Reg src_bytes)
{
    char g[48];
    const char *a = at(e, guard, g, sizeof g, __func__);
    REG_WANT(e, dst, RT_B32);
    REG_WANT(e, src, RT_B64);
    REG_WANT(e, src_bytes, RT_B32);
    emit(e, "%scp.async.cg.shared.global [%s+%u], [%s+%u], 16, %s;", a, R(e, dst), dst_off, R(e, src), src_off,
         R(e, src_bytes));
}

void op_cp_async_arrive(Emit *e, Reg bar)
{
    REG_WANT(e, bar, RT_B32);
    emit(e, "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%s];", R(e, bar));
}

void op_ld_global(Emit *e, Reg guard, const char *type, Reg dst, Reg addr, uint32_t off)
{
    char g[48];
    const char *a = at(e, guard, g, sizeof g, __func__);
    REG_WANT(e, dst, type[0] == 'f' ? RT_F32 : type[1] == '6' ? RT_B64 : RT_B32);
    REG_WANT(e, addr, RT_B64);
    emit(e, "%sld.global.%s %s, [%s+%u];", a, type, R(e, dst), R(e, addr), off);
}

void op_st_global_b32(Emit *e, Reg guard, Reg addr, Reg src)
{
    char g[48];
    const char *a = at(e, guard, g, sizeof g, __func__);
    REG_WANT(e, addr, RT_B64);
    REG_WANT(e, src, RT_B32);
    emit(e, "%sst.global.b32 [%s], %s;", a, R(e, addr), R(e, src));
}

void op_st_global_b32_at(Emit *e, Reg guard, Reg addr, uint32_t off, Reg src)
{
    char g[48];
    const char *a = at(e, guard, g, sizeof g, __func__);
    REG_WANT(e, addr, RT_B64);
    REG_WANT(e, src, RT_B32);
    emit(e, "%sst.global.b32 [%s+%u], %s;", a, R(e, addr), off, R(e, src));
}

void op_st_global_v4_b32_at(Emit *e, Reg guard, Reg addr, uint32_t off, const Reg src[4])
{
    char g[48];
    const char *a = at(e, guard, g, sizeof g, __func__);
    REG_WANT(e, addr, RT_B64);
    for (int i = 0; i < 4; i++) reg_want(e, src[i], RT_B32, __func__, "src[i]");
    emit(e, "%sst.global.v4.b32 [%s+%u], {%s, %s, %s, %s};", a, R(e, addr), off, R(e, src[0]), R(e, src[1]),
         R(e, src[2]), R(e, src[3]));
}

void op_st_global_b64_at(Emit *e, Reg guard, Reg addr, uint32_t off, Reg src)
{
    char g[48];
    const char *a = at(e, guard, g, sizeof g, __func__);
    REG_WANT(e, addr, RT_B64);
    REG_WANT(e, src, RT_B64);
    emit(e, "%sst.global.b64 [%s+%u], %s;", a, R(e, addr), off, R(e, src));
}

void op_read_clock64(Emit *e, Reg dst)
{
    REG_WANT(e, dst, RT_B64);
    emit(e, "mov.u64 %s, %%clock64;", R(e, dst));
}

void op_read_globaltimer(Emit *e, Reg dst)
{
    REG_WANT(e, dst, RT_B64);
    emit(e, "mov.u64 %s, %%globaltimer;", R(e, dst));
}

void op_read_smid(Emit *e, Reg dst)
{
    REG_WANT(e, dst, RT_B32);
    emit(e, "mov.u32 %s, %%smid;", R(e, dst));
}

void op_ld_param(Emit *e, const char *type, Reg dst, const char *name)
{
    REG_WANT(e, dst, type[0] == 'f' ? RT_F32 : type[1] == '6' ? RT_B64 : RT_B32);
    emit(e, "ld.param.%s %s, [p_%s];", type, R(e, dst), name);
}

/* Vector forms of global ld/st (PTX ISA: .v2/.v4 of 32-bit types; the address is aligned to the
 * vector's size). The split-KV epilogues and the combine kernel move f32 rows with them. */
void op_ld_global_v4_f32(Emit *e, Reg guard, const Reg dst[4], Reg addr, uint32_t off)
{
    char g[48];
    const char *a = at(e, guard, g, sizeof g, __func__);
    REG_WANT(e, addr, RT_B64);
    for (int i = 0; i < 4; i++) REG_WANT(e, dst[i], RT_F32);
    char d[4][EMIT_REG_NAME + 8];
    for (int i = 0; i < 4; i++) snprintf(d[i], sizeof d[i], "%s", R(e, dst[i]));
    emit(e, "%sld.global.v4.f32 {%s, %s, %s, %s}, [%s+%u];", a, d[0], d[1], d[2], d[3], R(e, addr), off);
}

/* st.global.v2 of two registers of type t (RT_F32: .f32, RT_B32: .b32); fn names the caller in errors. */
static void st_global_v2(Emit *e, const char *fn, RegType t, Reg guard, Reg addr, uint32_t off, Reg x, Reg y)
{
    char g[48], xs[EMIT_REG_NAME + 8];
    const char *a = at(e, guard, g, sizeof g, fn);
    reg_want(e, addr, RT_B64, fn, "addr");
    reg_want(e, x, t, fn, "x");
    reg_want(e, y, t, fn, "y");
    snprintf(xs, sizeof xs, "%s", R(e, x));
    emit(e, "%sst.global.v2.%s [%s+%u], {%s, %s};", a, t == RT_F32 ? "f32" : "b32", R(e, addr), off, xs, R(e, y));
}

void op_st_global_v2_f32(Emit *e, Reg guard, Reg addr, uint32_t off, Reg x, Reg y)
{
    st_global_v2(e, __func__, RT_F32, guard, addr, off, x, y);
}

void op_st_global_v2_b32(Emit *e, Reg guard, Reg addr, uint32_t off, Reg x, Reg y)
{
    st_global_v2(e, __func__, RT_B32, guard, addr, off, x, y);
}

void op_st_global_v4_f32(Emit *e, Reg guard, Reg addr, uint32_t off, const Reg src[4])
{
    char g[48];
    const char *a = at(e, guard, g, sizeof g, __func__);
    REG_WANT(e, addr, RT_B64);
    for (int i = 0; i < 4; i++) REG_WANT(e, src[i], RT_F32);
    char d[4][EMIT_REG_NAME + 8];
    for (int i = 0; i < 4; i++) snprintf(d[i], sizeof d[i], "%s", R(e, src[i]));
    emit(e, "%sst.global.v4.f32 [%s+%u], {%s, %s, %s, %s};", a, R(e, addr), off, d[0], d[1], d[2], d[3]);
}
