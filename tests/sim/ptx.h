/* ptx.h - the simulator's PTX front end: text -> decoded instructions.
 *
 * The parser takes the subset of PTX that fa4gen emits (one or more .entry
 * kernels, no .func, no calls) and decodes every instruction once into an
 * opcode, its type and modifier words and operands that name register slots,
 * so the interpreter never looks at text again. Anything outside the subset is
 * refused with the line number and the word that was not understood.
 */
#ifndef FA4SIM_PTX_H
#define FA4SIM_PTX_H

#include <stddef.h>
#include <stdint.h>

/* Scalar types of PTX instructions. */
typedef enum {
    T_NONE, T_PRED, T_B8, T_B16, T_B32, T_B64, T_U8, T_U16, T_U32, T_U64, T_S8, T_S16, T_S32, T_S64,
    T_F16, T_BF16, T_F32, T_F64, T_F16X2, T_BF16X2, T_E4M3X2, T_E5M2X2, T_F32X2
} PtxType;

typedef enum {
    OP_INVALID,
    /* integer and float arithmetic */
    OP_MOV, OP_ADD, OP_SUB, OP_MUL, OP_MAD, OP_FMA, OP_DIV, OP_REM, OP_MIN, OP_MAX, OP_NEG, OP_ABS, OP_NOT,
    OP_AND, OP_OR, OP_XOR, OP_SHL, OP_SHR, OP_SELP, OP_SETP, OP_CVT, OP_CVTA, OP_EX2, OP_LG2, OP_RCP, OP_SQRT,
    OP_RSQRT, OP_TANH, OP_BFE, OP_POPC, OP_CLZ, OP_PRMT, OP_LOP3, OP_BFIND, OP_BREV, OP_BFI, OP_SHF, OP_COPYSIGN,
    /* memory */
    OP_LD, OP_ST, OP_MAPA,
    /* control */
    OP_BRA, OP_RET, OP_EXIT,
    /* warp collectives */
    OP_SHFL, OP_VOTE, OP_ELECT, OP_BAR_WARP, OP_SETMAXNREG, OP_REDUX,
    /* stmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared{::cta}.b16 [p], {r..}: b the matrix count (1, 2, 4),
     * c 1 with .trans */
    OP_STMATRIX,
    /* CTA and cluster barriers, fences */
    OP_BAR_SYNC, OP_BAR_ARRIVE, OP_CLUSTER_ARRIVE, OP_CLUSTER_WAIT, OP_FENCE_PROXY_ASYNC, OP_FENCE_MBAR_INIT,
    OP_FENCE,
    /* mbarriers */
    OP_MBAR_INIT, OP_MBAR_ARRIVE, OP_MBAR_EXPECT_TX, OP_MBAR_TRY_WAIT,
    /* TMA and bulk groups */
    OP_TMA_LOAD, OP_TMA_STORE, OP_TMA_PREFETCH, OP_BULK_LOAD, OP_BULK_STORE, OP_BULK_COMMIT, OP_BULK_WAIT,
    /* cp.async (non-bulk): a: .cg on OP_CPA, wait_all on OP_CPA_WAIT, .noinc on OP_CPA_ARRIVE;
     * b: .L2::cache_hint on OP_CPA (the last operand is then the cache policy) */
    OP_CPA, OP_CPA_COMMIT, OP_CPA_WAIT, OP_CPA_ARRIVE,
    /* tcgen05 */
    OP_TC_ALLOC, OP_TC_DEALLOC, OP_TC_RELINQUISH, OP_TC_MMA, OP_TC_COMMIT, OP_TC_LD, OP_TC_ST, OP_TC_WAIT_LD,
    OP_TC_WAIT_ST, OP_TC_FENCE_BEFORE, OP_TC_FENCE_AFTER, OP_TC_CP,
    /* wgmma */
    OP_WG_FENCE, OP_WG_MMA, OP_WG_COMMIT, OP_WG_WAIT,
    /* griddepcontrol.launch_dependents / .wait (programmatic dependent launch) */
    OP_GRIDDEP, OP_GRIDDEP_WAIT,
    /* nanosleep.u32: the thread yields the rest of its quantum (a spin's back-off; sim.c counts spin-only rounds) */
    OP_NANOSLEEP,
    OP_COUNT
} PtxOp;

/* Modifier bits (Ins.mods). */
enum {
    M_FTZ = 1u << 0, M_APPROX = 1u << 1, M_SAT = 1u << 2, M_RN = 1u << 3, M_RZ = 1u << 4, M_RM = 1u << 5,
    M_RP = 1u << 6, M_RNI = 1u << 7, M_RZI = 1u << 8, M_RMI = 1u << 9, M_RPI = 1u << 10, M_LO = 1u << 11,
    M_HI = 1u << 12, M_WIDE = 1u << 13, M_UNI = 1u << 14, M_SATFINITE = 1u << 15, M_CLUSTER = 1u << 16,
    M_READ = 1u << 17, M_MULTICAST = 1u << 18, M_GATHER4 = 1u << 19, M_INC = 1u << 20, M_DEC = 1u << 21,
    M_PACK16 = 1u << 22, M_TS = 1u << 23, M_RELU = 1u << 24, M_NAN = 1u << 25, M_RELAXED = 1u << 26, M_ABS = 1u << 27,
    M_REDADD = 1u << 28 /* cp.reduce.async.bulk ... .add.f32 and red.global.add.f32: a store that adds; on an
                         * OP_LD, atom.global.add.u32: the load's value plus ops[2] is stored back */
};

/* State spaces. */
typedef enum { SP_NONE, SP_PARAM, SP_SHARED, SP_SHARED_CLUSTER, SP_GLOBAL, SP_LOCAL, SP_GENERIC } PtxSpace;

/* Special registers. */
typedef enum {
    SR_TID_X, SR_TID_Y, SR_TID_Z, SR_NTID_X, SR_NTID_Y, SR_NTID_Z, SR_CTAID_X, SR_CTAID_Y, SR_CTAID_Z,
    SR_NCTAID_X, SR_NCTAID_Y, SR_NCTAID_Z, SR_LANEID, SR_WARPID, SR_CLUSTERID_X, SR_CLUSTERID_Y, SR_CLUSTERID_Z,
    SR_NCLUSTERID_X, SR_CLUSTER_CTARANK, SR_CLUSTER_NCTARANK, SR_CLUSTER_CTAID_X, SR_SMID, SR_CLOCK64,
    SR_GLOBALTIMER, SR_COUNT
} PtxSpecial;

typedef enum {
    O_REG,     /* reg: register slot */
    O_IMM,     /* imm: bits (integers as int64, floats as their bit pattern) */
    O_SPECIAL, /* reg: PtxSpecial */
    O_SYM,     /* reg: symbol index: a parameter (imm = its offset) or the shared variable */
    O_VEC,     /* vec[0..nvec) */
    O_MEM,     /* [base + imm]: base is vec[0] (O_REG, O_SYM or O_IMM); a tensor operand
                  [tmap, {c...}] has nvec 2 with vec[1] the coordinate vector */
    O_SINK,    /* _ */
    O_LABEL,   /* reg: instruction index of the target */
    O_PAIR     /* d|p of elect.sync: vec[0], vec[1] */
} OperandKind;

typedef struct Operand {
    uint8_t kind;
    uint8_t neg; /* !%p */
    int32_t reg;
    int64_t imm;
    int32_t nvec;
    struct Operand *vec;
} Operand;

typedef struct Ins {
    uint16_t op;
    uint8_t type, type2;  /* e.g. cvt.<type>.<type2>; setp.<cmp>.<type> */
    uint8_t space;        /* PtxSpace of ld/st/cvta/mbarrier */
    uint8_t cmp;          /* setp comparison (PtxCmp) */
    uint8_t bop;          /* setp .and/.or/.xor: 0 none, 1 and, 2 or, 3 xor */
    uint8_t vec;          /* .v2 / .v4 of ld/st: element count, 1 otherwise */
    uint8_t guard_neg;
    int32_t guard;        /* predicate slot, or -1 */
    uint32_t mods;
    /* op-specific words: shape/num/kind/cta_group of tcgen05, m/n/k of wgmma, dims of TMA */
    int16_t a, b, c, d;
    uint8_t nops;
    Operand *ops;
    int line;
} Ins;

typedef enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_LO, CMP_LS, CMP_HI, CMP_HS, CMP_EQU,
               CMP_NEU, CMP_LTU, CMP_LEU, CMP_GTU, CMP_GEU, CMP_NUM, CMP_NAN } PtxCmp;

typedef struct PtxParam {
    char name[64];
    uint32_t offset, size, align;
} PtxParam;

typedef struct PtxReg {
    char name[48];
    uint8_t type;
} PtxReg;

typedef struct PtxEntry {
    char name[128];
    PtxParam *params;
    int nparams;
    uint32_t param_bytes;
    PtxReg *regs;
    int nregs;
    Ins *ins;
    int nins;
    int reqntid[3];
    int cluster[3]; /* .reqnctapercluster, 0 when none */
    int minctas;    /* .minnctapersm, 0 when none */
    int maxnreg;    /* .maxnreg, 0 when none */
    uint32_t static_smem; /* bytes of .shared variables with a fixed size before the dynamic one */
} PtxEntry;

typedef struct PtxModule {
    int version_major, version_minor;
    char target[32];
    PtxEntry *entries;
    int nentries;
    char **lines; /* the source lines, for messages */
    int nlines;
    void *arena;  /* every allocation of the module, freed together */
} PtxModule;

/* Parses text (len bytes, NUL not required). On failure returns NULL and
 * writes "line N: ..." into err. */
PtxModule *ptx_parse(const char *text, size_t len, char *err, size_t errlen);
void ptx_free(PtxModule *m);
const PtxEntry *ptx_find_entry(const PtxModule *m, const char *name);
/* The source line n (1-based), trimmed; "" when out of range. */
const char *ptx_line(const PtxModule *m, int n);
const char *ptx_op_name(int op);

#endif
