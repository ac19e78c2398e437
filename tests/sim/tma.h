/* tma.h - the Tensor Memory Accelerator of the simulator: tensor-map encoding
 * (what cuTensorMapEncodeTiled checks and stores) and the copies of
 * cp.async.bulk.tensor (tile, tile::gather4; load and store), read from the
 * CUDA driver API documentation and the PTX ISA alone.
 *
 * It knows nothing of threads, mbarriers or hazards: every byte it moves goes
 * through the callbacks of TmaMem, which the simulator core implements (global
 * bounds, shared poison and hazard tracking). It includes nothing from gen/ or
 * runtime/.
 *
 * Errors: 0 on success, or -1 after writing one sentence into m->err (a
 * callback that returns -1 has written its own message).
 */
#ifndef FA4SIM_TMA_H
#define FA4SIM_TMA_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

enum { TMA_MAX_RANK = 5 };

typedef struct TmaMem {
    void *u;
    int (*gmem_read)(void *u, uint64_t addr, void *dst, uint32_t n);
    int (*gmem_write)(void *u, uint64_t addr, const void *src, uint32_t n);
    int (*smem_read)(void *u, int cta, uint32_t addr, void *dst, uint32_t n);
    int (*smem_write)(void *u, int cta, uint32_t addr, const void *src, uint32_t n);
    char *err;
    size_t errlen;
} TmaMem;

/* A decoded tensor map: what cuTensorMapEncodeTiled was given. */
typedef struct TmaMap {
    CUtensorMapDataType dtype;
    uint32_t rank;
    uint64_t gaddr;
    uint64_t dims[TMA_MAX_RANK];
    uint64_t strides[TMA_MAX_RANK]; /* bytes; strides[0] is the element size */
    uint32_t box[TMA_MAX_RANK];
    uint32_t elem_strides[TMA_MAX_RANK];
    CUtensorMapInterleave interleave;
    CUtensorMapSwizzle swizzle;
    CUtensorMapFloatOOBfill oob_fill;
    uint32_t elem_bytes;
} TmaMap;

/* cuTensorMapEncodeTiled: validates as the documentation says the driver does
 * and returns its CUresult (CUDA_ERROR_INVALID_VALUE with a sentence in err). */
CUresult tma_encode_tiled(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank, void *gaddr,
                          const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                          const cuuint32_t *elem_strides, CUtensorMapInterleave interleave,
                          CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob,
                          char *err, size_t errlen);
/* Reads back a map our encoder wrote; -1 for 128 bytes that are not one. */
int tma_decode(const void *map128, TmaMap *out, char *err, size_t errlen);

/* Bytes one tile copy moves into shared memory (the box, out-of-bounds elements
 * included): what complete_tx counts. */
uint32_t tma_tile_bytes(const TmaMap *map);
/* Bytes one tile::gather4 copy moves: four rows of box[0] elements. */
uint32_t tma_gather4_bytes(const TmaMap *map);

/* cp.async.bulk.tensor.Nd.shared.global.tile: the box at coords (one per rank,
 * innermost first, signed) into shared memory at smem_addr of CTA cta, with the
 * map's swizzle and out-of-bounds fill. */
int tma_load_tile(const TmaMem *m, const TmaMap *map, const int32_t *coords, int cta, uint32_t smem_addr);
/* .tile::gather4 (2D maps): rows row[0..3] at column col. */
int tma_load_gather4(const TmaMem *m, const TmaMap *map, int32_t col, const int32_t row[4], int cta,
                     uint32_t smem_addr);
/* cp.async.bulk.tensor.Nd.global.shared::cta.tile: the box from shared memory
 * to global, elements outside the tensor not written. */
int tma_store_tile(const TmaMem *m, const TmaMap *map, const int32_t *coords, int cta, uint32_t smem_addr);

/* The shared-memory byte offset where box element (x = innermost index in
 * elements, y = the flattened outer index) lands under the map's swizzle: the
 * layout the tensor cores' swizzle modes read back. The offset is from a
 * destination aligned to the swizzle's repeat (1024 bytes for the 128B modes,
 * 512 for 64B, 256 for 32B); elsewhere the swizzle follows the absolute
 * address (the PTX ISA's swizzle base offset). Rows of a swizzled map are
 * swizzle-width apart even when the box is narrower. */
uint32_t tma_smem_offset(const TmaMap *map, uint32_t x, uint32_t y);

/* The bit pattern (in the low elem_bytes bytes) written for out-of-bounds
 * elements under CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA. The PTX ISA
 * calls it "OOB-NaN" without giving its bits; the simulator uses the positive
 * NaN with every mantissa bit set (0x7fff, 0x7fffffff, 0x7fff...f), so that the
 * tensor-core unit can recognise it. 0 for types that cannot use the fill. */
uint64_t tma_oob_nan(CUtensorMapDataType dtype);

#endif
