/* ops_copy.c - spellings of the plain copies (see ops_copy.h). Forms from the PTX ISA:
 * cp.async (sm_80+; .cg caches in L2 only, 16 bytes, src-size zero-fills the rest),
 * cp.async.mbarrier.arrive.noinc (sm_80+), ld/st of the global and param state spaces. */
#include <stdio.h>

#include "ops_copy.h"

static const char *at(const char *guard, char *buf, size_t n)
{
    if (!guard) return "";
    snprintf(buf, n, "@%s ", guard);
    return buf;
}

void op_cp_async16(Emit *e, const char *guard, const char *dst, uint32_t dst_off, const char *src, uint32_t src_off,
                   const char *src_bytes)
{
    char g[48];
    emit(e, "%scp.async.cg.shared.global [%s+%u], [%s+%u], 16, %s;", at(guard, g, sizeof g), dst, dst_off, src,
         src_off, src_bytes);
}

void op_cp_async_arrive(Emit *e, const char *bar)
{
    emit(e, "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%s];", bar);
}

void op_ld_global(Emit *e, const char *guard, const char *type, const char *dst, const char *addr, uint32_t off)
{
    char g[48];
    emit(e, "%sld.global.%s %s, [%s+%u];", at(guard, g, sizeof g), type, dst, addr, off);
}

void op_st_global_b32(Emit *e, const char *guard, const char *addr, const char *src)
{
    char g[48];
    emit(e, "%sst.global.b32 [%s], %s;", at(guard, g, sizeof g), addr, src);
}

void op_ld_param(Emit *e, const char *type, const char *dst, const char *name)
{
    emit(e, "ld.param.%s %s, [p_%s];", type, dst, name);
}
