/* tc.h - tensor-core semantics of the simulator: TMEM, tcgen05 (sm_100a) and
 * wgmma (sm_90a), read from the PTX ISA alone.
 *
 * This unit knows encodings (shared-memory matrix descriptors, instruction
 * descriptors, swizzle layouts, TMEM addressing, fragment layouts) and the
 * arithmetic. It knows nothing of threads, scheduling or hazards: every byte of
 * shared memory and every TMEM cell it touches goes through the callbacks of
 * TcMem, which the simulator core implements (bounds, poison and hazard checks).
 * It includes nothing from gen/ or runtime/: a shared misreading of the ISA
 * would otherwise hide a bug in both the generator and its checker.
 *
 * Errors: every function returns 0 on success, or -1 after writing one sentence
 * into m->err (a callback that returns -1 has written its own message; pass it on).
 */
#ifndef FA4SIM_TC_H
#define FA4SIM_TC_H

#include <stddef.h>
#include <stdint.h>

enum { TC_TMEM_LANES = 128, TC_TMEM_COLS = 512, TC_MAX_REGS = 128 };

typedef struct TcMem {
    void *u;
    /* n bytes of CTA `cta`'s shared memory at shared::cta address `addr` (the
     * address a descriptor's start-address field names, in bytes). */
    int (*smem_read)(void *u, int cta, uint32_t addr, void *dst, uint32_t n);
    /* one 32-bit TMEM cell of CTA `cta`: lane 0..127, column 0..511 */
    int (*tmem_read)(void *u, int cta, uint32_t lane, uint32_t col, uint32_t *v);
    int (*tmem_write)(void *u, int cta, uint32_t lane, uint32_t col, uint32_t v);
    char *err;
    size_t errlen;
    /* Optional (may be NULL), added by the tc unit: in TC_FOOTPRINT mode,
     * called once for every TMEM cell the operation would write, so that the
     * core learns the write set without anything being written. */
    int (*tmem_footprint_write)(void *u, int cta, uint32_t lane, uint32_t col);
    /* Optional (may be NULL; then the unit calls the one-cell forms above): the same for n cells of one lane, columns
     * col .. col + n - 1, in column order, stopping at the first cell whose one-cell form would fail. tc_mma reads
     * and writes D (and A in TMEM) a lane's run at a time through these when they are given. */
    int (*tmem_read_run)(void *u, int cta, uint32_t lane, uint32_t col, uint32_t n, uint32_t *v);
    int (*tmem_write_run)(void *u, int cta, uint32_t lane, uint32_t col, uint32_t n, const uint32_t *v);
    int (*tmem_footprint_write_run)(void *u, int cta, uint32_t lane, uint32_t col, uint32_t n);
} TcMem;

/* Element types as the instruction descriptor and wgmma spell them. */
typedef enum {
    TC_F16, TC_BF16, TC_TF32, TC_E4M3, TC_E5M2, TC_F32, TC_E2M3, TC_E3M2, TC_E2M1
} TcType;

typedef enum { TC_KIND_F16, TC_KIND_TF32, TC_KIND_F8F6F4 } TcKind;

/* Footprint mode reads operands through the callbacks but computes and writes
 * nothing: the core calls it at issue to learn what an MMA will read. */
typedef enum { TC_EXECUTE, TC_FOOTPRINT } TcMode;

/* ---------------------------------------------------------- tcgen05.mma */
typedef struct TcMma {
    TcKind kind;
    int cta_group;      /* 1 or 2 */
    int cta;            /* rank in the cluster of the CTA whose thread issued it */
    uint32_t d_tmem;    /* [d-tmem] operand: TMEM address of D */
    int a_is_tmem;      /* 1: the [a-tmem] form (A from TMEM), 0: A from a descriptor */
    uint32_t a_tmem;
    uint64_t a_desc;
    uint64_t b_desc;
    uint32_t idesc;     /* the 32-bit instruction descriptor */
    int enable_input_d; /* the enable-input-d predicate: 1 D += A*B, 0 D = A*B */
} TcMma;

int tc_mma(const TcMem *m, const TcMma *op, TcMode mode);

/* --------------------------------------------------- tcgen05.ld / .st */
typedef enum { TC_32x32b, TC_16x64b, TC_16x128b, TC_16x256b, TC_16x32bx2 } TcShape;

typedef struct TcLdSt {
    int cta;
    int warp;           /* the warp's index in its CTA (its quarter is warp % 4) */
    TcShape shape;
    int num;            /* .x1 .. .x128 */
    int pack16;         /* .pack::16b (ld) / .unpack::16b (st) */
    uint32_t taddr;     /* the warp's TMEM address operand */
    uint32_t half_splitoff; /* immHalfSplitoff of .16x32bx2 */
} TcLdSt;

/* Registers each thread holds for one ld/st (the length of its vector). */
int tc_ldst_nregs(const TcLdSt *op);
/* regs[lane][i]: register i of the warp's lane `lane`. */
int tc_tmem_ld(const TcMem *m, const TcLdSt *op, uint32_t regs[32][TC_MAX_REGS]);
int tc_tmem_st(const TcMem *m, const TcLdSt *op, const uint32_t regs[32][TC_MAX_REGS]);

/* ------------------------------------------------------------ tcgen05.cp */
typedef enum { TC_CP_128x256b, TC_CP_4x256b, TC_CP_128x128b, TC_CP_64x128b, TC_CP_32x128b } TcCpShape;
typedef enum { TC_MC_NONE, TC_MC_WARPX2_02_13, TC_MC_WARPX2_01_23, TC_MC_WARPX4 } TcCpMulticast;

typedef struct TcCp {
    int cta;
    TcCpShape shape;
    TcCpMulticast multicast;
    uint32_t taddr;
    uint64_t s_desc;    /* shared-memory matrix descriptor of the source */
    int cta_group;      /* added: 0 or 1 = .cta_group::1; 2 = .cta_group::2 (refused) */
} TcCp;

int tc_tmem_cp(const TcMem *m, const TcCp *op, TcMode mode);

/* --------------------------------------------------------------- wgmma */
typedef struct TcWgmma {
    int cta;
    int m, n, k;        /* m64nNkK */
    TcType dtype, atype, btype; /* .dtype .atype .btype */
    int a_is_reg;       /* A from registers (the RS form) */
    uint64_t a_desc, b_desc;
    int scale_d;        /* 0: D = A*B, 1: D = D + A*B */
    int imm_scale_a, imm_scale_b; /* +1 or -1 */
    int tnsp_a, tnsp_b; /* imm-trans-a / imm-trans-b (0 when the form has none) */
} TcWgmma;

/* Registers per thread of the accumulator D and of the register A fragment. */
int tc_wgmma_d_regs(const TcWgmma *op);
int tc_wgmma_a_regs(const TcWgmma *op);
/* a[t][i], d[t][i]: register i of thread t (0..127) of the warpgroup. d holds
 * the input accumulator on entry (read when scale_d) and the result on exit.
 * In TC_FOOTPRINT mode only the shared-memory operands are read. */
int tc_wgmma(const TcMem *m, const TcWgmma *op, const uint32_t a[128][TC_MAX_REGS], uint32_t d[128][TC_MAX_REGS],
             TcMode mode);

/* ------------------------------------------------------------- decoders */
/* Human-readable decodes for hazard reports and the debugging command. */
int tc_describe_umma_desc(uint64_t desc, char *buf, size_t n);
int tc_describe_idesc(TcKind kind, uint32_t idesc, char *buf, size_t n);
int tc_describe_wgmma_desc(uint64_t desc, char *buf, size_t n);

/* Byte address in shared memory of element (mn, k) of an operand described by a
 * descriptor (mn: the M or N index, k: the K index; elem_bits 8, 16 or 32;
 * mn_major 0 = K-major, 1 = MN-major), after the swizzle. The descriptor is
 * validated as tc_mma / tc_wgmma would. Added by the tc unit for the debugger
 * and for tests. */
int tc_umma_smem_addr(const TcMem *m, uint64_t desc, int mn_major, int elem_bits, uint32_t mn, uint32_t k,
                      uint32_t *addr);
int tc_wgmma_smem_addr(const TcMem *m, uint64_t desc, int mn_major, int elem_bits, uint32_t mn, uint32_t k,
                       uint32_t *addr);

/* Number formats (round-to-nearest-even where a conversion narrows). */
float tc_to_float(TcType t, uint32_t bits);

#endif
