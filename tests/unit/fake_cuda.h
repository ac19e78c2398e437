/* fake_cuda.h - what the fake CUDA driver (fake_cuda.c, built as
 * build/fakecuda/libcuda.so.1) records, for the launch tests.
 *
 * The fake has one device and never touches device memory: it validates
 * arguments the way the real driver documents, records tensor-map encodes,
 * function attributes and launches, and refuses what the real driver would
 * refuse. A test reaches the same state as libfa4rt by
 * dlopen("libcuda.so.1") + dlsym("fake_cuda_state"), run with
 * LD_LIBRARY_PATH=build/fakecuda. Not thread-safe: tests launch from one thread.
 *
 * Environment, read at every cuInit:
 *   FAKE_CUDA_CC      compute capability as major*10+minor ("100", "90"); default 100
 *   FAKE_CUDA_SMS     SM count; default 148
 *   FAKE_CUDA_NO_PROC "1": cuGetProcAddress finds nothing, so callers take
 *                     their dlsym fallback
 *
 * Memory: the fake knows address ranges, never bytes. cuMemAlloc hands out
 * ranges of device 0 (aligned addresses, nothing behind them) and cuMemFree
 * forgets them; fake_cuda_map registers any range with a memory type, device
 * and managed flag (a test's "pinned host memory" or "device 1"), the latest
 * registered range holding an address winning. cuPointerGetAttributes answers
 * from these ranges as the real driver documents: an address in none gets the
 * default values (memory type 0) and CUDA_SUCCESS. The ranges survive
 * fake_cuda_reset.
 */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H
#include <stdint.h>

enum {
    FAKE_MAX_ENCODES = 128,
    FAKE_MAX_LAUNCHES = 16,
    FAKE_MAX_ATTRS = 64,
    FAKE_MAX_LAUNCH_MAPS = 8,
    FAKE_NAME = 96,
    FAKE_SMEM_OPTIN = 232448, /* max dynamic smem per block, sm_90 and sm_100 */
    FAKE_MAX_RANGES = 256,
};

/* A range of addresses the fake driver knows (cuMemAlloc or fake_cuda_map). */
typedef struct FakeRange {
    uint64_t base, size;
    unsigned type; /* CUmemorytype: 1 host (page-locked), 2 device */
    int device;    /* ordinal */
    int managed;
} FakeRange;

/* Word 0 of an encoded CUtensorMap: odd, so no 4-aligned pointer or int
 * parameter value starts with it; word 1 is the encode's index, word 2 ~magic. */
#define FAKE_MAP_MAGIC 0xFA4E7A91u

/* One cuTensorMapEncodeTiled call, as given. */
typedef struct FakeMap {
    uint32_t dtype, rank; /* CUtensorMapDataType */
    uint64_t addr;
    uint64_t dims[5];
    uint64_t strides[4]; /* bytes, dims 1..rank-1 */
    uint32_t box[5], elem[5];
    uint32_t interleave, swizzle, l2, oob; /* the CUtensorMap* enums */
} FakeMap;

/* One launch, with its parameters decoded by the MHA launch ABI: maps
 * (recognised by their marker), then lse, seqlen_q, seqlen_k, heads_q,
 * batch, scale_log2, o_scale. */
typedef struct FakeLaunch {
    int ex;  /* 1: cuLaunchKernelEx */
    int pdl; /* 1: with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION allowed (a programmatic dependent) */
    char kernel[FAKE_NAME];
    unsigned grid[3], block[3], smem, cluster[3]; /* cluster 1x1x1 when none was given */
    int smem_attr; /* the function's MAX_DYNAMIC_SHARED_SIZE_BYTES at launch (0: never set) */
    void *stream;
    int n_maps;
    /* index into FakeCuda.encodes; below 0: a map encoded before the last fake_cuda_reset and passed again
     * (a launch reusing encoded maps), -1 for the newest of those */
    int map_ids[FAKE_MAX_LAUNCH_MAPS];
    uint32_t map_serials[FAKE_MAX_LAUNCH_MAPS]; /* each map's encode serial (fake_cuda_encoded) */
    FakeMap maps[FAKE_MAX_LAUNCH_MAPS];
    uint64_t lse;
    uint32_t seqlen_q, seqlen_k, heads_q, batch;
    float scale_log2, o_scale;
} FakeLaunch;

typedef struct FakeAttr {
    char kernel[FAKE_NAME];
    int attr, value; /* CUfunction_attribute */
} FakeAttr;

typedef struct FakeCuda {
    int cc_major, cc_minor, sm_count;
    int inits;
    int proc_found, proc_missed; /* cuGetProcAddress answers */
    int modules_loaded, modules_live, functions;
    int fatbins_loaded; /* modules whose image was a fatbin (an AOT bundle's) */
    int n_encodes;      /* since the last reset; the map's serial is encode_base + its index */
    FakeMap encodes[FAKE_MAX_ENCODES];
    uint32_t encode_base;
    int n_launches;
    FakeLaunch launches[FAKE_MAX_LAUNCHES];
    int n_attrs;
    FakeAttr attrs[FAKE_MAX_ATTRS];
    int n_refused;      /* calls the fake refused */
    char refused[512];  /* why, for the last one */
    int n_ranges;       /* known memory (kept by fake_cuda_reset) */
    FakeRange ranges[FAKE_MAX_RANGES];
    int n_ptr_queries;  /* cuPointerGetAttributes calls */
    /* streams (the tile counters of runtime/sched.c): settings a test makes after fake_cuda_reset, which clears them */
    int capturing;      /* 1: cuStreamIsCapturing says every stream but NULL is capturing */
    int no_stream_id;   /* 1: cuStreamGetId refuses, as a driver before CUDA 12.0 lacks it */
    int n_memsets;      /* cuMemsetD8Async calls, and the last one's range and value */
    uint64_t memset_ptr, memset_bytes;
    unsigned memset_value;
    int streams_live;   /* cuStreamCreate less cuStreamDestroy */
} FakeCuda;

/* Exported by the fake library. */
typedef FakeCuda *(*FakeCudaStateFn)(void);
typedef void (*FakeCudaResetFn)(void); /* clears the records, keeps the device settings and the ranges */
/* Registers [base, base + size) as memory of the given type (CUmemorytype), device and managed flag; 0, or
 * -1 when the table is full. */
typedef int (*FakeCudaMapFn)(uint64_t base, uint64_t size, unsigned type, int device, int managed);
/* Forgets the range that starts at base (0), or -1 when none does. */
typedef int (*FakeCudaUnmapFn)(uint64_t base);
/* The encode of serial `serial` (word 1 of every map the fake encodes; serials count every encode since the
 * library was loaded, across resets), or NULL when it is older than the last FAKE_ENCODE_HISTORY encodes. */
enum { FAKE_ENCODE_HISTORY = 4096 };
typedef const FakeMap *(*FakeCudaEncodedFn)(uint32_t serial);

#endif
