/* tma.c - the Tensor Memory Accelerator of the simulator (see tma.h).
 *
 * Sources, read for this file alone:
 *  - CUDA driver API, cuTensorMapEncodeTiled (the comment block above its
 *    declaration in cuda.h of CUDA 13.0, the same text as the driver API
 *    reference "Tensor Map Object Management"): every argument rule below.
 *  - PTX ISA 5.5.3 (tiled mode: bounding box, traversal stride, out-of-bound
 *    access, .tile::gather4), 5.5.7 (swizzling modes: the 16-byte-chunk tables,
 *    the sub-modes of the 128-byte swizzle, the base-offset formula) and the
 *    cp.async.bulk.tensor instruction (coordinates, complete_tx byte count).
 *  - CUDA programming guide, TMA swizzle: shared memory 128-byte aligned for
 *    every mode; rows narrower than the swizzle width still take the full width.
 *
 * The swizzle is a function of the absolute shared::cta byte address, as the
 * ISA's base-offset formula ((dstMem / 128) % 8 for 128B) says: a destination
 * that is 128-byte aligned but not aligned to the repeat of the pattern starts
 * mid-pattern.
 */
#include "tma.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define TMA_MAGIC 0x314d4154u /* "TAM1" little-endian, our encoding, version 1 */

enum { ROW_MAX = 256 * 8 }; /* boxDim[0] <= 256 elements of at most 8 bytes */

/* ---- data types ---------------------------------------------------------- */

static int dtype_bits(CUtensorMapDataType t)
{
    switch (t) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 8;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 16;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 32;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 64;
    case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B:
    case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B: return 6;
    }
    return -1;
}

static int dtype_is_packed(CUtensorMapDataType t)
{
    return t == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B || t == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B ||
           t == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
}

/* the two packed types the driver places 16 per 16 bytes in shared memory */
static int dtype_is_packed16(CUtensorMapDataType t)
{
    return t == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B || t == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
}

static int dtype_is_float(CUtensorMapDataType t)
{
    switch (t) {
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 1;
    default: return 0;
    }
}

static const char *dtype_name(CUtensorMapDataType t)
{
    static const char *const n[] = {"UINT8",   "UINT16",      "UINT32",       "INT32",
                                    "UINT64",  "INT64",       "FLOAT16",      "FLOAT32",
                                    "FLOAT64", "BFLOAT16",    "FLOAT32_FTZ",  "TFLOAT32",
                                    "TFLOAT32_FTZ", "16U4_ALIGN8B", "16U4_ALIGN16B", "16U6_ALIGN16B"};
    return (unsigned)t < sizeof n / sizeof n[0] ? n[t] : "?";
}

static const char *swizzle_name(CUtensorMapSwizzle s)
{
    static const char *const n[] = {"NONE", "32B", "64B", "128B", "128B_ATOM_32B", "128B_ATOM_32B_FLIP_8B",
                                    "128B_ATOM_64B"};
    return (unsigned)s < sizeof n / sizeof n[0] ? n[s] : "?";
}

/* bytes the swizzle permutes within; 0 for none */
static uint32_t swizzle_span(CUtensorMapSwizzle s)
{
    switch (s) {
    case CU_TENSOR_MAP_SWIZZLE_32B: return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B: return 64;
    case CU_TENSOR_MAP_SWIZZLE_128B:
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B:
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B:
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B: return 128;
    default: return 0;
    }
}

uint64_t tma_oob_nan(CUtensorMapDataType dtype)
{
    switch (dtype) {
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 0x7fffu;
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 0x7fffffffu;
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 0x7fffffffffffffffull;
    default: return 0;
    }
}

/* ---- messages ----------------------------------------------------------------- */

static void say(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

#define REFUSE(...)                                                                               \
    do {                                                                                          \
        say(err, errlen, __VA_ARGS__);                                                            \
        return -1;                                                                                \
    } while (0)

/* ---- the argument rules of cuTensorMapEncodeTiled --------------------------------
 * `t` holds the arguments (strides[i] = globalStrides[i - 1]); `who` starts each
 * sentence. Enums are checked by the caller before t is filled. */
static int check_map(const TmaMap *t, const char *who, char *err, size_t errlen)
{
    const CUtensorMapDataType dt = t->dtype;
    const int bits = dtype_bits(dt);
    const uint32_t rank = t->rank;

    if (rank < 1 || rank > TMA_MAX_RANK)
        REFUSE("%s: tensorRank is %u, but it must be between 1 and %d.", who, rank, TMA_MAX_RANK);
    if (t->interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && rank < 3)
        REFUSE("%s: tensorRank is %u, but an interleaved layout (interleave %d) needs a rank of 3 or more.", who,
               rank, (int)t->interleave);

    /* globalAddress */
    if (t->gaddr % 16)
        REFUSE("%s: globalAddress 0x%llx is not 16-byte aligned, as every tensor map requires.", who,
               (unsigned long long)t->gaddr);
    if (t->interleave == CU_TENSOR_MAP_INTERLEAVE_32B && t->gaddr % 32)
        REFUSE("%s: globalAddress 0x%llx is not 32-byte aligned, as CU_TENSOR_MAP_INTERLEAVE_32B requires.", who,
               (unsigned long long)t->gaddr);
    if (dtype_is_packed16(dt) && t->gaddr % 32)
        REFUSE("%s: globalAddress 0x%llx is not 32-byte aligned, as data type %s requires.", who,
               (unsigned long long)t->gaddr, dtype_name(dt));

    /* globalDim */
    for (uint32_t i = 0; i < rank; i++)
        if (t->dims[i] == 0 || t->dims[i] > (1ull << 32))
            REFUSE("%s: globalDim[%u] is %llu, but it must be between 1 and 2^32.", who, i,
                   (unsigned long long)t->dims[i]);
    if (dtype_is_packed16(dt) && t->dims[0] % 128)
        REFUSE("%s: globalDim[0] is %llu, but data type %s needs a multiple of 128.", who,
               (unsigned long long)t->dims[0], dtype_name(dt));
    if (dt == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B && t->dims[0] % 2)
        REFUSE("%s: globalDim[0] is %llu, but data type %s needs a multiple of 2.", who,
               (unsigned long long)t->dims[0], dtype_name(dt));

    /* globalStrides: rank - 1 entries, for dimensions 1.. */
    for (uint32_t i = 1; i < rank; i++) {
        const unsigned long long s = t->strides[i];
        if (s % 16)
            REFUSE("%s: globalStrides[%u] is %llu bytes, but a global stride must be a multiple of 16.", who, i - 1,
                   s);
        if (s >= (1ull << 40))
            REFUSE("%s: globalStrides[%u] is %llu bytes, but a global stride must be less than 2^40.", who, i - 1,
                   s);
        if (t->interleave == CU_TENSOR_MAP_INTERLEAVE_32B && s % 32)
            REFUSE("%s: globalStrides[%u] is %llu bytes, but CU_TENSOR_MAP_INTERLEAVE_32B needs a multiple of 32.",
                   who, i - 1, s);
        if (dtype_is_packed16(dt) && s % 32)
            REFUSE("%s: globalStrides[%u] is %llu bytes, but data type %s needs a multiple of 32.", who, i - 1, s,
                   dtype_name(dt));
    }

    /* boxDim */
    for (uint32_t i = 0; i < rank; i++)
        if (t->box[i] == 0 || t->box[i] > 256)
            REFUSE("%s: boxDim[%u] is %u, but it must be between 1 and 256.", who, i, t->box[i]);
    if (t->interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && ((uint64_t)t->box[0] * (uint64_t)bits) % 128)
        REFUSE("%s: boxDim[0] is %u elements of %s (%u bits in all), but without interleave the inner box must "
               "be a multiple of 16 bytes.",
               who, t->box[0], dtype_name(dt), t->box[0] * (uint32_t)bits);
    if (dtype_is_packed16(dt) && t->box[0] != 128)
        REFUSE("%s: boxDim[0] is %u, but data type %s needs exactly 128.", who, t->box[0], dtype_name(dt));

    /* elementStrides */
    for (uint32_t i = 0; i < rank; i++)
        if (t->elem_strides[i] == 0 || t->elem_strides[i] > 8)
            REFUSE("%s: elementStrides[%u] is %u, but it must be between 1 and 8.", who, i, t->elem_strides[i]);

    /* interleave and swizzle */
    if (t->interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && t->swizzle != CU_TENSOR_MAP_SWIZZLE_NONE) {
        /* the inner dimension as shared memory holds it: the packed16 types take
         * 16 bytes for 16 values, the others their bit width */
        const uint64_t inner = dtype_is_packed16(dt) ? t->box[0] : (uint64_t)t->box[0] * (uint64_t)bits / 8;
        if (inner > swizzle_span(t->swizzle))
            REFUSE("%s: the inner box dimension is %llu bytes (boxDim[0] %u of %s), more than the %u bytes that "
                   "swizzle %s spans.",
                   who, (unsigned long long)inner, t->box[0], dtype_name(dt), swizzle_span(t->swizzle),
                   swizzle_name(t->swizzle));
    }
    if (dt == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B && t->interleave != CU_TENSOR_MAP_INTERLEAVE_NONE)
        REFUSE("%s: interleave is %d, but data type 16U6_ALIGN16B requires CU_TENSOR_MAP_INTERLEAVE_NONE.", who,
               (int)t->interleave);
    if (t->interleave == CU_TENSOR_MAP_INTERLEAVE_32B && t->swizzle != CU_TENSOR_MAP_SWIZZLE_32B)
        REFUSE("%s: swizzle is %s, but CU_TENSOR_MAP_INTERLEAVE_32B requires CU_TENSOR_MAP_SWIZZLE_32B.", who,
               swizzle_name(t->swizzle));
    if (dt == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B && t->swizzle != CU_TENSOR_MAP_SWIZZLE_NONE &&
        t->swizzle != CU_TENSOR_MAP_SWIZZLE_128B && t->swizzle != CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B &&
        t->swizzle != CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B)
        REFUSE("%s: swizzle is %s, but data type 16U6_ALIGN16B supports only NONE, 128B, 128B_ATOM_32B and "
               "128B_ATOM_64B.",
               who, swizzle_name(t->swizzle));
    if (dt == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B && t->swizzle != CU_TENSOR_MAP_SWIZZLE_NONE &&
        t->swizzle != CU_TENSOR_MAP_SWIZZLE_128B && t->swizzle != CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B)
        REFUSE("%s: swizzle is %s, but data type 16U4_ALIGN16B supports only NONE, 128B and 128B_ATOM_32B.", who,
               swizzle_name(t->swizzle));

    /* oobFill */
    if (t->oob_fill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !dtype_is_float(dt))
        REFUSE("%s: oobFill is NAN_REQUEST_ZERO_FMA, but data type %s is not a floating-point type that may use "
               "it.",
               who, dtype_name(dt));
    return 0;
}

/* ---- our 128-byte encoding ------------------------------------------------------
 * q[0]  magic (low 32) | FNV-1a of bytes 8..127 (high 32)
 * q[1]  globalAddress
 * q[2..6]  globalDim[0..4]
 * q[7..10] globalStrides[0..3] (the strides of dimensions 1..4)
 * q[11] boxDim[0..3], 16 bits each
 * q[12] boxDim[4] (16) | elementStrides[0..4] (8 each) | dtype (8)
 * q[13] rank | interleave | swizzle | l2Promotion | oobFill (8 each)
 * q[14], q[15] zero
 * Unused dimensions hold zero. */

static uint32_t fnv1a(const unsigned char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

CUresult tma_encode_tiled(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank, void *gaddr,
                          const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                          const cuuint32_t *elem_strides, CUtensorMapInterleave interleave,
                          CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob,
                          char *err, size_t errlen)
{
    static const char who[] = "cuTensorMapEncodeTiled";
#define BAD(...)                                                                                  \
    do {                                                                                          \
        say(err, errlen, __VA_ARGS__);                                                            \
        return CUDA_ERROR_INVALID_VALUE;                                                          \
    } while (0)
    if (!map)
        BAD("%s: tensorMap is NULL, but it must point to a CUtensorMap.", who);
    if ((uintptr_t)map % 64)
        BAD("%s: tensorMap %p is not 64-byte aligned, as the tensor map object must be.", who, (void *)map);
    if ((unsigned)dtype > (unsigned)CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B)
        BAD("%s: tensorDataType is %d, which is not a CUtensorMapDataType.", who, (int)dtype);
    if ((unsigned)interleave > (unsigned)CU_TENSOR_MAP_INTERLEAVE_32B)
        BAD("%s: interleave is %d, which is not a CUtensorMapInterleave.", who, (int)interleave);
    if ((unsigned)swizzle > (unsigned)CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B)
        BAD("%s: swizzle is %d, which is not a CUtensorMapSwizzle.", who, (int)swizzle);
    if ((unsigned)l2 > (unsigned)CU_TENSOR_MAP_L2_PROMOTION_L2_256B)
        BAD("%s: l2Promotion is %d, which is not a CUtensorMapL2promotion.", who, (int)l2);
    if ((unsigned)oob > (unsigned)CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
        BAD("%s: oobFill is %d, which is not a CUtensorMapFloatOOBfill.", who, (int)oob);
    if (rank < 1 || rank > TMA_MAX_RANK)
        BAD("%s: tensorRank is %u, but it must be between 1 and %d.", who, rank, TMA_MAX_RANK);
    if (!dims)
        BAD("%s: globalDim is NULL, but it must hold tensorRank (%u) sizes.", who, rank);
    if (!strides && rank > 1)
        BAD("%s: globalStrides is NULL, but it must hold tensorRank - 1 (%u) strides.", who, rank - 1);
    if (!box)
        BAD("%s: boxDim is NULL, but it must hold tensorRank (%u) sizes.", who, rank);
    if (!elem_strides)
        BAD("%s: elementStrides is NULL, but it must hold tensorRank (%u) strides.", who, rank);

    TmaMap t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.rank = rank;
    t.gaddr = (uint64_t)(uintptr_t)gaddr;
    for (uint32_t i = 0; i < rank; i++) {
        t.dims[i] = dims[i];
        t.box[i] = box[i];
        t.elem_strides[i] = elem_strides[i];
        if (i > 0)
            t.strides[i] = strides[i - 1];
    }
    t.interleave = interleave;
    t.swizzle = swizzle;
    t.oob_fill = oob;
    if (check_map(&t, who, err, errlen))
        return CUDA_ERROR_INVALID_VALUE;
#undef BAD

    uint64_t q[CU_TENSOR_MAP_NUM_QWORDS];
    memset(q, 0, sizeof q);
    q[1] = t.gaddr;
    for (uint32_t i = 0; i < rank; i++)
        q[2 + i] = t.dims[i];
    for (uint32_t i = 1; i < rank; i++)
        q[6 + i] = t.strides[i];
    for (uint32_t i = 0; i < 4 && i < rank; i++)
        q[11] |= (uint64_t)t.box[i] << (16 * i);
    if (rank == 5)
        q[12] |= t.box[4];
    for (uint32_t i = 0; i < rank; i++)
        q[12] |= (uint64_t)t.elem_strides[i] << (16 + 8 * i);
    q[12] |= (uint64_t)dtype << 56;
    q[13] = (uint64_t)rank | (uint64_t)interleave << 8 | (uint64_t)swizzle << 16 | (uint64_t)l2 << 24 |
            (uint64_t)oob << 32;
    q[0] = TMA_MAGIC | (uint64_t)fnv1a((const unsigned char *)&q[1], sizeof q - 8) << 32;
    memcpy((void *)map, q, sizeof q); /* the driver asks 64-byte alignment, the type declares 128 */
    if (err && errlen)
        err[0] = 0;
    return CUDA_SUCCESS;
}

int tma_decode(const void *map128, TmaMap *out, char *err, size_t errlen)
{
    static const char who[] = "tensor map";
    if (!map128)
        REFUSE("%s: the address of the tensor map is NULL.", who);
    uint64_t q[CU_TENSOR_MAP_NUM_QWORDS];
    memcpy(q, map128, sizeof q);
    if ((uint32_t)q[0] != TMA_MAGIC)
        REFUSE("%s: the 128 bytes start with 0x%08x, not the mark of a map cuTensorMapEncodeTiled wrote (0x%08x).",
               who, (unsigned)(uint32_t)q[0], TMA_MAGIC);
    const uint32_t sum = fnv1a((const unsigned char *)&q[1], sizeof q - 8);
    if ((uint32_t)(q[0] >> 32) != sum)
        REFUSE("%s: the check word is 0x%08x but the bytes sum to 0x%08x, so the map was altered after encoding.",
               who, (unsigned)(q[0] >> 32), (unsigned)sum);
    if (q[14] || q[15] || (q[13] >> 40))
        REFUSE("%s: reserved bytes are not zero, so this is not a map our encoder wrote.", who);

    TmaMap t;
    memset(&t, 0, sizeof t);
    t.rank = (uint32_t)(q[13] & 0xff);
    t.interleave = (CUtensorMapInterleave)((q[13] >> 8) & 0xff);
    t.swizzle = (CUtensorMapSwizzle)((q[13] >> 16) & 0xff);
    const unsigned l2 = (unsigned)((q[13] >> 24) & 0xff);
    t.oob_fill = (CUtensorMapFloatOOBfill)((q[13] >> 32) & 0xff);
    t.dtype = (CUtensorMapDataType)(q[12] >> 56);
    if ((unsigned)t.dtype > (unsigned)CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B ||
        (unsigned)t.interleave > (unsigned)CU_TENSOR_MAP_INTERLEAVE_32B ||
        (unsigned)t.swizzle > (unsigned)CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B ||
        l2 > (unsigned)CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
        (unsigned)t.oob_fill > (unsigned)CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA ||
        t.rank < 1 || t.rank > TMA_MAX_RANK)
        REFUSE("%s: an enumerated field is out of range, so this is not a map our encoder wrote.", who);
    t.gaddr = q[1];
    for (uint32_t i = 0; i < t.rank; i++) {
        t.dims[i] = q[2 + i];
        t.box[i] = i < 4 ? (uint32_t)((q[11] >> (16 * i)) & 0xffff) : (uint32_t)(q[12] & 0xffff);
        t.elem_strides[i] = (uint32_t)((q[12] >> (16 + 8 * i)) & 0xff);
        if (i > 0)
            t.strides[i] = q[6 + i];
    }
    if (check_map(&t, who, err, errlen))
        return -1;
    const int bits = dtype_bits(t.dtype);
    t.elem_bytes = bits >= 8 ? (uint32_t)bits / 8 : 0;
    t.strides[0] = t.elem_bytes;
    for (uint32_t i = t.rank; i < TMA_MAX_RANK; i++) {
        t.dims[i] = 1;
        t.box[i] = 1;
        t.elem_strides[i] = 1;
        t.strides[i] = 0;
    }
    *out = t;
    return 0;
}

/* ---- geometry of a box in shared memory -------------------------------------------- */

/* elements traversed along dimension i: ceil(boxDim / elementStride); the
 * stride of dimension 0 counts only with an interleaved layout */
static uint32_t traversed(const TmaMap *map, uint32_t i)
{
    const uint32_t es = (i == 0 && map->interleave == CU_TENSOR_MAP_INTERLEAVE_NONE) ? 1 : map->elem_strides[i];
    return es ? (map->box[i] + es - 1) / es : map->box[i];
}

/* bytes of one box row in shared memory (the data, without swizzle padding) */
static uint32_t row_bytes(const TmaMap *map)
{
    if (dtype_is_packed16(map->dtype))
        return traversed(map, 0); /* 16 values in 16 bytes */
    return (uint32_t)((uint64_t)traversed(map, 0) * (uint64_t)dtype_bits(map->dtype) / 8);
}

/* distance between consecutive box rows in shared memory: a swizzled row takes
 * the whole swizzle width even when the box is narrower (programming guide) */
static uint32_t row_pitch(const TmaMap *map)
{
    const uint32_t span = swizzle_span(map->swizzle), rb = row_bytes(map);
    return span > rb ? span : rb;
}

uint32_t tma_tile_bytes(const TmaMap *map)
{
    uint64_t n = row_bytes(map);
    for (uint32_t i = 1; i < map->rank; i++)
        n *= traversed(map, i);
    return (uint32_t)n;
}

uint32_t tma_gather4_bytes(const TmaMap *map) { return 4 * row_bytes(map); }

/* The swizzled address of shared::cta byte address a (PTX ISA 5.5.7): the
 * 16-byte chunk index within each 128-byte line is XORed with the line index
 * (address bits 9:7) limited to the span; the atom sub-modes of the 128-byte
 * swizzle permute 32- or 64-byte atoms instead; the flip sub-mode also swaps
 * the 8-byte halves of every chunk on odd lines. */
static uint32_t swz(CUtensorMapSwizzle s, uint32_t a)
{
    const uint32_t line = a >> 7;
    switch (s) {
    case CU_TENSOR_MAP_SWIZZLE_32B: return a ^ ((line & 1) << 4);
    case CU_TENSOR_MAP_SWIZZLE_64B: return a ^ ((line & 3) << 4);
    case CU_TENSOR_MAP_SWIZZLE_128B: return a ^ ((line & 7) << 4);
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B: return a ^ ((line & 3) << 5);
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B: return a ^ ((line & 3) << 5) ^ ((line & 1) << 3);
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B: return a ^ ((line & 1) << 6);
    default: return a;
    }
}

uint32_t tma_smem_offset(const TmaMap *map, uint32_t x, uint32_t y)
{
    const uint32_t bits = (uint32_t)dtype_bits(map->dtype);
    const uint32_t xb = dtype_is_packed16(map->dtype) ? x : x * bits / 8;
    return swz(map->swizzle, y * row_pitch(map) + xb);
}

/* ---- copies ----------------------------------------------------------------------------- */

#define MREFUSE(...)                                                                              \
    do {                                                                                          \
        say(m->err, m->errlen, __VA_ARGS__);                                                      \
        return -1;                                                                                \
    } while (0)

/* what every copy needs of the map and the shared-memory address */
static int copy_ok(const TmaMem *m, const TmaMap *map, uint32_t smem_addr, const char *op, int store)
{
    if (dtype_is_packed(map->dtype))
        MREFUSE("%s: data type %s (packed sub-byte values) is not modelled by the simulator.", op,
                dtype_name(map->dtype));
    if (map->interleave != CU_TENSOR_MAP_INTERLEAVE_NONE)
        MREFUSE("%s: interleaved layouts (interleave %d) are not modelled by the simulator.", op,
                (int)map->interleave);
    if (map->elem_bytes != 1 && map->elem_bytes != 2 && map->elem_bytes != 4 && map->elem_bytes != 8)
        MREFUSE("%s: the map's element size is %u bytes, which no data type has.", op, map->elem_bytes);
    if (smem_addr % 128)
        MREFUSE("%s: the shared-memory address 0x%x is not 128-byte aligned, as every tensor copy requires.", op,
                smem_addr);
    if (store && map->swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B)
        MREFUSE("%s: swizzle 128B_ATOM_32B_FLIP_8B is legal only for copies from global to shared memory.", op);
    return 0;
}

/* one row of the box from global memory into buf: traversed(0) elements from
 * column x0 of the row at gbase (the address of column 0), or all fill when the
 * row lies outside the tensor (row_in == 0) */
static int fetch_row(const TmaMem *m, const TmaMap *map, int row_in, uint64_t gbase, int64_t x0, uint32_t n,
                     unsigned char *buf)
{
    const uint32_t eb = map->elem_bytes;
    int64_t lo = 0, hi = 0; /* in-bounds element range within the row, [lo, hi) */
    if (row_in) {
        lo = x0 < 0 ? -x0 : 0;
        if (lo > (int64_t)n)
            lo = n;
        hi = (int64_t)map->dims[0] - x0;
        if (hi > (int64_t)n)
            hi = n;
        if (hi < lo)
            hi = lo;
    }
    if (lo > 0 || hi < (int64_t)n) {
        if (map->oob_fill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA) {
            const uint64_t nan = tma_oob_nan(map->dtype);
            for (int64_t k = 0; k < (int64_t)n; k++)
                if (k < lo || k >= hi)
                    memcpy(buf + k * eb, &nan, eb); /* little-endian host */
        } else {
            memset(buf, 0, (size_t)lo * eb);
            memset(buf + hi * eb, 0, (size_t)(n - hi) * eb);
        }
    }
    if (hi > lo)
        return m->gmem_read(m->u, gbase + (uint64_t)(x0 + lo) * eb, buf + lo * eb, (uint32_t)((hi - lo) * eb));
    return 0;
}

/* write rb bytes of a row (buf) at shared address dest, swizzled */
static int put_row(const TmaMem *m, const TmaMap *map, int cta, uint32_t dest, uint32_t rb,
                   const unsigned char *buf)
{
    const CUtensorMapSwizzle s = map->swizzle;
    if (s == CU_TENSOR_MAP_SWIZZLE_NONE)
        return m->smem_write(m->u, cta, dest, buf, rb);
    const uint32_t span = swizzle_span(s);
    unsigned char out[128];
    const int flip = s == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B && ((dest >> 7) & 1);
    if (rb == span) { /* the row fills its span: permute and write once */
        for (uint32_t c = 0; c < rb; c += 16) {
            const uint32_t to = swz(s, dest + c) - dest;
            if (flip) {
                memcpy(out + (to & ~15u), buf + c + 8, 8);
                memcpy(out + (to & ~15u) + 8, buf + c, 8);
            } else {
                memcpy(out + to, buf + c, 16);
            }
        }
        return m->smem_write(m->u, cta, dest, out, span);
    }
    for (uint32_t c = 0; c < rb; c += 16) { /* narrower: chunk by chunk, padding untouched */
        const uint32_t to = swz(s, dest + c) & ~15u;
        unsigned char ch[16];
        if (flip) {
            memcpy(ch, buf + c + 8, 8);
            memcpy(ch + 8, buf + c, 8);
        } else {
            memcpy(ch, buf + c, 16);
        }
        if (m->smem_write(m->u, cta, to, ch, 16))
            return -1;
    }
    return 0;
}

/* read rb bytes of a row at shared address dest, unswizzled, into buf */
static int get_row(const TmaMem *m, const TmaMap *map, int cta, uint32_t dest, uint32_t rb, unsigned char *buf)
{
    const CUtensorMapSwizzle s = map->swizzle;
    if (s == CU_TENSOR_MAP_SWIZZLE_NONE)
        return m->smem_read(m->u, cta, dest, buf, rb);
    const uint32_t span = swizzle_span(s);
    if (rb == span) {
        unsigned char in[128];
        if (m->smem_read(m->u, cta, dest, in, span))
            return -1;
        for (uint32_t c = 0; c < rb; c += 16)
            memcpy(buf + c, in + (swz(s, dest + c) - dest), 16);
        return 0;
    }
    for (uint32_t c = 0; c < rb; c += 16)
        if (m->smem_read(m->u, cta, swz(s, dest + c), buf + c, 16))
            return -1;
    return 0;
}

/* The walk over the box rows shared by load and store: row r (the flattened
 * index over dimensions 1..rank-1, dimension 1 fastest) sits at smem_addr +
 * r * pitch. For each row: whether it is inside the tensor and the global
 * address of its column 0. */
typedef struct {
    uint32_t n[TMA_MAX_RANK];
    uint64_t rows;
} Walk;

static void walk_init(const TmaMap *map, Walk *w)
{
    w->rows = 1;
    for (uint32_t i = 0; i < TMA_MAX_RANK; i++) {
        w->n[i] = i < map->rank ? traversed(map, i) : 1;
        if (i > 0)
            w->rows *= w->n[i];
    }
}

static int walk_row(const TmaMap *map, const Walk *w, const int32_t *coords, uint64_t r, uint64_t *gbase)
{
    uint64_t g = map->gaddr;
    int in = 1;
    for (uint32_t i = 1; i < map->rank; i++) {
        const uint64_t k = r % w->n[i];
        r /= w->n[i];
        const int64_t c = (int64_t)coords[i] + (int64_t)k * map->elem_strides[i];
        if (c < 0 || c >= (int64_t)map->dims[i])
            in = 0;
        else
            g += (uint64_t)c * map->strides[i];
    }
    *gbase = g;
    return in;
}

int tma_load_tile(const TmaMem *m, const TmaMap *map, const int32_t *coords, int cta, uint32_t smem_addr)
{
    static const char op[] = "cp.async.bulk.tensor tile load";
    if (copy_ok(m, map, smem_addr, op, 0))
        return -1;
    Walk w;
    walk_init(map, &w);
    const uint32_t rb = row_bytes(map), pitch = row_pitch(map);
    unsigned char buf[ROW_MAX];
    for (uint64_t r = 0; r < w.rows; r++) {
        uint64_t gbase;
        const int in = walk_row(map, &w, coords, r, &gbase);
        if (fetch_row(m, map, in, gbase, coords[0], w.n[0], buf) ||
            put_row(m, map, cta, smem_addr + (uint32_t)(r * pitch), rb, buf))
            return -1;
    }
    return 0;
}

int tma_store_tile(const TmaMem *m, const TmaMap *map, const int32_t *coords, int cta, uint32_t smem_addr)
{
    static const char op[] = "cp.async.bulk.tensor tile store";
    if (copy_ok(m, map, smem_addr, op, 1))
        return -1;
    Walk w;
    walk_init(map, &w);
    const uint32_t rb = row_bytes(map), pitch = row_pitch(map), eb = map->elem_bytes;
    unsigned char buf[ROW_MAX];
    const int64_t x0 = coords[0];
    int64_t lo = x0 < 0 ? -x0 : 0, hi = (int64_t)map->dims[0] - x0;
    if (hi > (int64_t)w.n[0])
        hi = w.n[0];
    for (uint64_t r = 0; r < w.rows; r++) {
        uint64_t gbase;
        if (!walk_row(map, &w, coords, r, &gbase) || hi <= lo)
            continue; /* nothing of this row lies inside the tensor */
        if (get_row(m, map, cta, smem_addr + (uint32_t)(r * pitch), rb, buf) ||
            m->gmem_write(m->u, gbase + (uint64_t)(x0 + lo) * eb, buf + lo * eb, (uint32_t)((hi - lo) * eb)))
            return -1;
    }
    return 0;
}

int tma_load_gather4(const TmaMem *m, const TmaMap *map, int32_t col, const int32_t row[4], int cta,
                     uint32_t smem_addr)
{
    static const char op[] = "cp.async.bulk.tensor tile::gather4 load";
    if (map->rank != 2)
        MREFUSE("%s: the tensor map has rank %u, but tile::gather4 works only on 2D tensors.", op, map->rank);
    if (map->box[1] != 1)
        MREFUSE("%s: the tensor map's boxDim[1] is %u, but tile::gather4 needs a bounding box of size 1 in "
                "dimension 1.",
                op, map->box[1]);
    if (copy_ok(m, map, smem_addr, op, 0))
        return -1;
    const uint32_t rb = row_bytes(map), pitch = row_pitch(map), n = traversed(map, 0);
    unsigned char buf[ROW_MAX];
    for (uint32_t r = 0; r < 4; r++) {
        const int in = row[r] >= 0 && (uint64_t)row[r] < map->dims[1];
        const uint64_t gbase = map->gaddr + (in ? (uint64_t)row[r] * map->strides[1] : 0);
        if (fetch_row(m, map, in, gbase, col, n, buf) || put_row(m, map, cta, smem_addr + r * pitch, rb, buf))
            return -1;
    }
    return 0;
}
