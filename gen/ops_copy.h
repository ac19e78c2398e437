/* ops_copy.h - the op layer's plain memory copies (PTX ISA: cp.async, ld/st of the global and
 * param spaces): the gathers of kernels whose rows come through an index list, which TMA
 * boxes cannot express on sm_90a. Spellings live in ops_copy.c only. */
#ifndef FA4GEN_OPS_COPY_H
#define FA4GEN_OPS_COPY_H

#include "fa4gen.h"

/* Where guard (a pred Reg) holds (REG_NONE: always): 16 bytes from global [src + src_off] to shared
 * [dst + dst_off], zero-filled past src_bytes (a register holding 16 or 0: 0 reads nothing,
 * so an out-of-range src is never touched). Completes asynchronously. */
void op_cp_async16(Emit *e, Reg guard, Reg dst, uint32_t dst_off, Reg src, uint32_t src_off, Reg src_bytes);
/* The mbarrier receives one arrival when every cp.async this thread issued before has
 * completed; .noinc: that arrival is one of the count the barrier was initialised with. */
void op_cp_async_arrive(Emit *e, Reg bar);
/* dst (type "u32", "s32", "u64", "f32") = global [addr + off] where guard holds. */
void op_ld_global(Emit *e, Reg guard, const char *type, Reg dst, Reg addr, uint32_t off);
void op_st_global_b32(Emit *e, Reg guard, Reg addr, Reg src);
void op_st_global_b32_at(Emit *e, Reg guard, Reg addr, uint32_t off, Reg src); /* global [addr + off] */
void op_st_global_v4_b32_at(Emit *e, Reg guard, Reg addr, uint32_t off, const Reg src[4]); /* 16 bytes */
void op_st_global_b64_at(Emit *e, Reg guard, Reg addr, uint32_t off, Reg src); /* global [addr + off], 8 bytes */
/* Special registers for debug stamps (PTX ISA 10: %clock64, the SM's cycle counter; %globaltimer, ns,
 * one clock for every SM; %smid): dst a b64 (clocks) or b32 (smid). */
void op_read_clock64(Emit *e, Reg dst);
void op_read_globaltimer(Emit *e, Reg dst);
void op_read_smid(Emit *e, Reg dst);
/* dst = the kernel parameter p_<name>, of type "u32", "u64" or "f32". */
void op_ld_param(Emit *e, const char *type, Reg dst, const char *name);
/* Vector global copies (guard REG_NONE: always): 16 bytes of f32 in, 8 bytes of f32 or b32 out. */
void op_ld_global_v4_f32(Emit *e, Reg guard, const Reg dst[4], Reg addr, uint32_t off);
void op_st_global_v2_f32(Emit *e, Reg guard, Reg addr, uint32_t off, Reg x, Reg y);
void op_st_global_v2_b32(Emit *e, Reg guard, Reg addr, uint32_t off, Reg x, Reg y);
void op_st_global_v4_f32(Emit *e, Reg guard, Reg addr, uint32_t off, const Reg src[4]);

#endif
