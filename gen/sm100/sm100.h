/* sm100.h - the sm_100a op layer's encodings: UMMA shared-memory descriptors
 * and tcgen05.mma instruction descriptors (PTX ISA "Shared memory descriptor"
 * and "Instruction descriptor" for tcgen05),
 * with decoders so tests can check every field. */
#ifndef FA4GEN_SM100_H
#define FA4GEN_SM100_H

#include <stdint.h>

#include "../fa4gen.h"
#include "plan100.h"

/* Swizzle modes of the 3-bit layout field (bits 61-63). */
typedef enum { SM100_SW_NONE = 0, SM100_SW_128B_BASE32B = 1, SM100_SW_128 = 2, SM100_SW_64 = 4, SM100_SW_32 = 6 } Sm100Swizzle;

typedef struct {
    uint32_t start;  /* smem byte address (16-byte aligned) */
    uint32_t lbo;    /* leading byte offset */
    uint32_t sbo;    /* stride byte offset */
    int base_offset; /* 0 for tiles aligned to the swizzle pattern */
    int lbo_mode;    /* 0 relative */
    Sm100Swizzle swizzle;
} Sm100SmemDesc;

typedef enum { SM100_MAJOR_K = 0, SM100_MAJOR_MN = 1 } Sm100Major;

typedef struct {
    int m, n;          /* MMA shape: M 64/128 (256 with cta_group::2), N multiple of 8 (16 for M 128 TS) up to 256 */
    int d_format;      /* 0 F16, 1 F32 */
    int a_format, b_format; /* kind::f16: 0 F16, 1 BF16; kind::f8f6f4: 0 E4M3, 1 E5M2 */
    Sm100Major a_major, b_major;
    int negate_a, negate_b;
} Sm100InstrDesc;

/* The swizzle mode for a chunk row of 32, 64 or 128 bytes (0 = no swizzle). */
Sm100Swizzle sm100_swizzle_mode(int swizzle_bytes);
uint64_t sm100_smem_desc(const Sm100SmemDesc *d);
Sm100SmemDesc sm100_smem_desc_decode(uint64_t v, int *version);
/* The descriptor of a K- or MN-major swizzled tile as our kernels lay them out:
 * K-major: rows of swizzle_bytes, SBO = 8 rows; MN-major: LBO = chunk stride, SBO = 8 K rows. */
uint64_t sm100_tile_desc(uint32_t start, Sm100Major major, int swizzle_bytes, uint32_t chunk_stride);
/* The format code of a dtype in an instruction descriptor (kind::f16 or kind::f8f6f4). */
int sm100_format(DType dt);
uint32_t sm100_instr_desc(const Sm100InstrDesc *d);
Sm100InstrDesc sm100_instr_desc_decode(uint32_t v);
/* Shapes tcgen05.mma accepts for cta_group::1 (m 64/128) and ::2 (m 128/256); ts: A from TMEM. */
int sm100_mma_shape_ok(int m, int n, int cta_group, int ts);

/* The MHA forward kernel (sm100/mha.c). */
int sm100_emit_mha(Emit *e);

#endif
