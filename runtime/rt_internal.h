/* rt_internal.h - libfa4rt's private header: the context, the lazily loaded
 * driver and nvJitLink tables, the JIT, the caches and the launch helpers.
 *
 * Sections follow the files: errors (api.c), driver.c, jit.c, cache.c, mha.c.
 * Nothing here is published; fa4.h is the contract.
 */
#ifndef FA4_RT_INTERNAL_H
#define FA4_RT_INTERNAL_H

#define NVJITLINK_NO_INLINE /* we resolve every nvJitLink entry point ourselves */
#include <cuda.h>
#include <nvJitLink.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "fa4.h"
#include "fa4gen.h"

enum { RT_ERR_MAX = 4096, RT_PATH_MAX = 1024, RT_KEY_TEXT_MAX = 1024 };

/* ============================== driver.c ============================== */

/* The driver entry points libfa4rt uses, resolved once per context. Members
 * drop the "cu" prefix so cuda.h's _v2 macros never rename them. */
typedef struct Driver {
    void *lib; /* dlopen("libcuda.so.1") */
    int version; /* cuDriverGetVersion, e.g. 12080 */
    CUresult (*Init)(unsigned int);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*GetErrorString)(CUresult, const char **);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxPushCurrent)(CUcontext);
    CUresult (*CtxPopCurrent)(CUcontext *);
    CUresult (*ModuleLoadDataEx)(CUmodule *, const void *, unsigned int, CUjit_option *, void **);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*FuncSetAttribute)(CUfunction, CUfunction_attribute, int);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **);
    CUresult (*LaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
    CUresult (*TensorMapEncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                     const cuuint64_t *, const cuuint32_t *, const cuuint32_t *,
                                     CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                     CUtensorMapFloatOOBfill);
    CUresult (*LinkCreate)(unsigned int, CUjit_option *, void **, CUlinkState *);
    CUresult (*LinkAddData)(CUlinkState, CUjitInputType, void *, size_t, const char *, unsigned int,
                            CUjit_option *, void **);
    CUresult (*LinkComplete)(CUlinkState, void **, size_t *);
    CUresult (*LinkDestroy)(CUlinkState);
    /* what the driver knows of a pointer a kernel will read or write (buffers.c) */
    CUresult (*PointerGetAttributes)(unsigned int, CUpointer_attribute *, void **, CUdeviceptr);
    /* the dynamic kernels' tile counters (sched.c); without any of these, every call runs the static walk */
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*StreamCreate)(CUstream *, unsigned int);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*StreamIsCapturing)(CUstream, CUstreamCaptureStatus *);
    CUresult (*StreamGetId)(CUstream, unsigned long long *);
    CUresult (*ThreadExchangeStreamCaptureMode)(CUstreamCaptureMode *);
} Driver;

/* The device side of a context, filled by rt_device_open(). */
typedef struct Device {
    CUdevice dev;
    CUcontext primary; /* retained primary context */
    int cc_major, cc_minor, sm_count;
} Device;

/* ============================== jit.c ============================== */

typedef struct JitLink {
    void *lib;
    unsigned major, minor;
    nvJitLinkResult (*Create)(nvJitLinkHandle *, uint32_t, const char **);
    nvJitLinkResult (*Destroy)(nvJitLinkHandle *);
    nvJitLinkResult (*AddData)(nvJitLinkHandle, nvJitLinkInputType, const void *, size_t, const char *);
    nvJitLinkResult (*Complete)(nvJitLinkHandle);
    nvJitLinkResult (*GetLinkedCubinSize)(nvJitLinkHandle, size_t *);
    nvJitLinkResult (*GetLinkedCubin)(nvJitLinkHandle, void *);
    nvJitLinkResult (*GetErrorLogSize)(nvJitLinkHandle, size_t *);
    nvJitLinkResult (*GetErrorLog)(nvJitLinkHandle, char *);
    nvJitLinkResult (*Version)(unsigned *, unsigned *);
} JitLink;

/* ============================== the context ============================== */

/* Where a kernel's code came from (fa4_kernel_stats.source for the first three). */
typedef enum { SRC_MEMORY = 0, SRC_DISK = 1, SRC_JIT = 2, SRC_BUNDLE = 3 } KernelSource;

struct fa4_kernel {
    char *key;        /* memory-cache key (owned) */
    uint64_t key_hash;
    char *mod_src;    /* the score_mod source compiled in (owned; NULL: none), compared whole on lookup */
    KernelSource source;  /* how it was built: disk, jit or bundle (for the fetch log) */
    uint64_t code_key;    /* the disk-cache key (disk, jit) or the config hash (bundle) */
    const char *bundle;   /* the bundle's name (bundle) */
    Plan plan;        /* launch shape, tensor maps, symbol */
    CUmodule module;
    CUfunction fn;
};

typedef struct KernelMap {
    struct { uint64_t hash; struct fa4_kernel *k; } *slot; /* open addressing, k == NULL: empty */
    size_t cap, count;
} KernelMap;

/* Lazily opened libraries: 0 not tried, 1 ready, -1 failed (message kept). */
enum { LIB_UNTRIED = 0, LIB_READY = 1, LIB_FAILED = -1 };

/* What resolve_splits (mha.c) needs of a split config's plan, memoized per context: plan_make costs
 * ~10 us, a whole batch-1 decode kernel ~25. Keyed by the config's canonical text. */
enum { RT_SPLIT_FACTS = 32, RT_SPLIT_KEY = 360 };
typedef struct {
    uint64_t hash;
    char key[RT_SPLIT_KEY];
    int ok;                       /* the split config plans */
    int rows, hpc, bn;            /* its rows per tile (x cluster), query heads per CTA, kv block */
    uint32_t cluster_tried, cluster_fits; /* bit n: a cluster split of n CTAs was planned / plans */
} RtSplitFacts;

/* The driver's word on a buffer pointer (buffers.c): ptr lies in the allocation [start, start + size) of
 * device memory the context may use (0, 0: the driver gave no range). ptr 0: an empty slot. */
enum { RT_PTR_MEMO = 256, RT_PTR_WAYS = 4 };
typedef struct { uint64_t ptr, start, size; } RtPtrMemo;

/* Tensor maps a launch encoded, for the next launch of the same kernel over the same pointers (launch.c).
 * The maps' dims, strides and boxes follow from the kernel and the call's signature, which the owner
 * (mha.c's call memo) keys on; ptr[] are the tensors' bases the maps were encoded with. */
typedef struct RtMapCache {
    CUtensorMap maps[PLAN_MAX_MAPS];
    const void *ptr[TENSOR_COUNT];
    int valid;
} RtMapCache;

/* sched.c: the dynamic kernels' tile counters. RT_SCHED_SLOTS slots of RT_SCHED_STRIDE bytes (two u32 each, a
 * sector of their own), RT_SCHED_STREAMS streams remembered with theirs. */
enum { RT_SCHED_SLOTS = 8192, RT_SCHED_STRIDE = 64, RT_SCHED_STREAMS = 1024 };
typedef struct { unsigned long long id; uint32_t slot; } RtSchedStream;

/* mha.c's call memo: the outcome of a call's pointer-free work for one argument signature. */
enum { RT_MHA_MEMO = 64, RT_MHA_WAYS = 4 };
typedef struct RtMhaMemo RtMhaMemo;

struct fa4_ctx {
    fa4_options opt;
    char cache_dir[RT_PATH_MAX]; /* "" until resolved; resolved at create */
    int disk_ok;                 /* 0 after the one warning: memory only */
    int no_jit;                  /* opt.disable_jit or FA4GEN_DISABLE_JIT: bundles only */
    atomic_int noticed;          /* api.c compile_notice has spoken (once per context) */
    atomic_uint tmp_counter;     /* unique temp-file names within the process */

    pthread_mutex_t mu;          /* everything below */
    KernelMap kernels;
    Driver drv;
    Device device;
    _Atomic int drv_state;
    fa4_status drv_status;
    char drv_msg[512];
    JitLink jl;
    int jl_state;
    char jl_msg[512];
    int ptxas_state;             /* the ptxas executable: whole-program compiles */
    char ptxas_path[RT_PATH_MAX];
    char ptxas_id[RT_PATH_MAX + 64];
    int device_target;           /* TargetId from the device's CC, -1 unknown */
    RtSplitFacts split_facts[RT_SPLIT_FACTS]; /* mha.c resolve_splits; replaced round-robin */
    unsigned n_split_facts;
    RtPtrMemo ptr_memo[RT_PTR_MEMO];     /* buffers.c: pointers the driver vouched for */
    unsigned ptr_memo_next;
    int recheck_buffers;                 /* unless opt.remember_buffers or FA4GEN_REMEMBER_BUFFERS=1: no ptr_memo */
    RtMhaMemo *mha_memo[RT_MHA_MEMO];    /* mha.c: call signatures seen (owned; NULL: empty) */
    unsigned mha_memo_next;
    uint64_t mha_memo_gen;               /* stamps each entry, so a write-back finds the one it read */
    int sched_state;                     /* sched.c: the counter pool 0 not made, 1 made, -1 failed */
    CUdeviceptr sched_pool;
    uint32_t sched_used;                 /* slots handed out (never handed out again) */
    RtSchedStream sched_streams[RT_SCHED_STREAMS];
    unsigned n_sched_streams;

    pthread_mutex_t err_mu;      /* err_bufs */
    pthread_key_t err_key;       /* this thread's message buffer (char[RT_ERR_MAX]) */
    char **err_bufs;             /* every buffer handed out, freed at destroy */
    size_t n_err_bufs;
};

/* ============================== error.c ============================== */

/* Record msg as this thread's last error on ctx (NULL ctx: the create slot)
 * and return s, so callers can `return rt_fail(ctx, FA4_ERR_..., "...")`. */
fa4_status rt_fail(fa4_ctx *ctx, fa4_status s, const char *fmt, ...) FA4_PRINTF(3, 4);
const char *rt_last_error(const fa4_ctx *ctx);
void rt_clear_create_error(void); /* fa4_create starts with no message */
double rt_now_ms(void);
void rt_log(const fa4_ctx *ctx, const char *fmt, ...) FA4_PRINTF(2, 3); /* verbose only */
/* One line per kernel fetch (verbose / FA4GEN_LOG=1): canonical config, key, hit or miss, where
 * the code came from, generate / compile / load ms. */
void rt_log_fetch(const fa4_ctx *ctx, const struct fa4_kernel *k, int hit, const fa4_kernel_stats *st);

/* ============================== driver.c ============================== */

/* Load libcuda.so.1, cuInit, retain the primary context of opt.device. */
int rt_driver_ready(fa4_ctx *ctx); /* rt_driver without the error: 1 when the driver is loaded */
fa4_status rt_driver(fa4_ctx *ctx);
void rt_driver_close(fa4_ctx *ctx);
/* "CUDA_ERROR_X (description)" for r. */
const char *rt_cu_name(const fa4_ctx *ctx, CUresult r);
/* Make the context's primary context current; *pushed says whether to pop. */
fa4_status rt_ctx_enter(fa4_ctx *ctx, int *pushed);
void rt_ctx_leave(fa4_ctx *ctx, int pushed);
/* The TargetId the device runs, or FA4_ERR_UNSUPPORTED for other GPUs. */
fa4_status rt_device_target(fa4_ctx *ctx, TargetId *t);
/* The generator's target of a public one (AUTO: sm90a, the config's default; rt_device_target decides AUTO). */
TargetId rt_target_of(fa4_target t);
/* FA4_ERR_UNSUPPORTED unless the device can run target t. */
fa4_status rt_check_target(fa4_ctx *ctx, TargetId t);

/* ============================== sched.c ============================== */

/* The tile counter (two zeroed u32) a dynamic kernel launched on `stream` may use, or 0: run the static walk.
 * The context is current. */
uint64_t rt_tile_counter(fa4_ctx *ctx, CUstream stream);
void rt_sched_close(fa4_ctx *ctx); /* frees the pool (fa4_destroy) */

/* ============================== jit.c ============================== */

/* Open nvJitLink (FA4_ERR_NO_DRIVER-style failure when absent: no message set). */
int rt_jitlink_available(fa4_ctx *ctx);
/* "nvjitlink-13.0" or "driver-12080": the compiler part of the cache key.
 * Opens the driver when nvJitLink is unavailable. */
fa4_status rt_compiler_id(fa4_ctx *ctx, char *buf, size_t n);
/* PTX -> cubin for plan's target (malloc'd). */
fa4_status rt_compile(fa4_ctx *ctx, const Plan *p, const char *ptx, size_t len, void **cubin, size_t *size);
/* The same for a kernel that calls an .extern function defined in a second PTX (a score_mod
 * with FA4GEN_SCORE_MOD_LINK=link): nvJitLink, else the driver's linker, links the two. */
fa4_status rt_compile_linked(fa4_ctx *ctx, const Plan *p, const char *ptx, size_t len, const char *lib_ptx,
                             void **cubin, size_t *size);
/* Load a cubin and find the plan's kernel; logs surface in the message. */
fa4_status rt_load(fa4_ctx *ctx, const Plan *p, const void *cubin, CUmodule *m, CUfunction *fn);

/* ============================== cache.c ============================== */

uint64_t rt_fnv1a(const void *data, size_t n, uint64_t h);
#define RT_FNV_SEED 0xcbf29ce484222325ull
/* Resolve options.cache_dir / $FA4GEN_CACHE_DIR / $XDG_CACHE_HOME / $HOME. */
fa4_status rt_cache_resolve_dir(fa4_ctx *ctx);
/* The key text of a generated plan (everything the cubin depends on); user_code names the
 * user code compiled into it ("none", or the score_mod's hash, NVRTC version and link). */
fa4_status rt_cache_key(fa4_ctx *ctx, const Plan *p, const char *user_code, char *text, size_t n, uint64_t *hash);
/* 1 and a malloc'd payload on a valid hit, 0 on a miss (corrupt files are misses). */
int rt_disk_get(fa4_ctx *ctx, const char *key_text, uint64_t key, void **cubin, size_t *size);
/* Best effort: an unwritable directory warns once and turns the disk cache off. */
void rt_disk_put(fa4_ctx *ctx, const char *key_text, uint64_t key, const void *cubin, size_t size);
/* For the cache tools (cache_tool.c), under the same trust rules: the cache folder opened (O_DIRECTORY)
 * and checked; its descriptor, -2 when it does not exist, or -1 with what is wrong in *why (an
 * untrusted folder has given the one warning of runtime/cache.c). */
int rt_cache_open_checked(fa4_ctx *ctx, const char **why);
/* Why an entry with this lstat/fstat status is not to be touched (not a regular file, another owner,
 * writable by group or others), or NULL. */
struct stat;
const char *rt_cache_untrusted_entry(const struct stat *st);
/* A cache file's bytes checked as a format-2 entry: NULL when valid, else why not; *key_text (not
 * terminated, *key_len bytes) when the header could be read. */
const char *rt_cache_inspect(const void *file, size_t size, const char **key_text, size_t *key_len);
/* "<16 hex>.cubin", the entry's name for a key. */
void rt_cache_file_name(uint64_t key, char *buf, size_t n);

/* The entry for key whose score_mod source is mod_src (NULL: a kernel without one), or NULL. */
struct fa4_kernel *rt_map_find(const KernelMap *m, const char *key, uint64_t hash, const char *mod_src);
/* Insert k unless the key is present; returns the entry that is in the map. */
struct fa4_kernel *rt_map_insert(KernelMap *m, struct fa4_kernel *k);
void rt_map_free(fa4_ctx *ctx, KernelMap *m);

/* ============================== bundle.c ============================== */

/* The registered bundles' entry for p (same canonical config and generator), or NULL. */
const fa4_bundle_kernel *rt_bundle_find(const Plan *p, const char **bundle_name);
/* "N bundles linked, M kernels" (and any of another generator version), for messages. */
void rt_bundle_describe(char *buf, size_t n);
/* Why no registered bundle served p: each bundle searched (name, kernels, generator) and why it
 * missed (no entry with this canonical config; or written by another generator build). */
void rt_bundle_explain_miss(const Plan *p, char *buf, size_t n);
/* The uncompressed ELF (cubin) of a fatbin for sm (90, 100): 0 with *cubin inside the fatbin, or -1. */
int rt_fatbin_cubin(const void *fatbin, size_t size, int sm, const void **cubin, size_t *len);

/* ============================== launch.c ============================== */

/* A tensor as its tensor maps see it: dims innermost first ((depth, seq, head, batch) for
 * attention tensors) and the byte strides of dims 1... ptr NULL: the call has no such tensor. */
typedef struct RtTensor {
    const char *name;
    const void *ptr;
    int elem_bytes;
    uint32_t rank;
    uint64_t dims[5];
    uint64_t byte_strides[4];
} RtTensor;

typedef union RtScalar { uint64_t u64; uint32_t u32; float f32; } RtScalar;

/* What one launch binds: tensors by TensorId, scalars by ScalarId (has_scalar marks the
 * ones the operator set), and the grid in CTAs (whole clusters). */
typedef struct RtLaunch {
    RtTensor tensors[TENSOR_COUNT];
    RtScalar scalars[SCALAR_COUNT];
    int has_scalar[SCALAR_COUNT];
    unsigned grid;
} RtLaunch;

/* Encode the plan's maps, pack the plan's parameter list, launch (a cluster launch when the
 * plan has a cluster). The context must be current. */
fa4_status rt_launch(fa4_ctx *ctx, const struct fa4_kernel *k, const RtLaunch *l, CUstream stream);
/* The same, with the maps taken from mc when it holds maps of this kernel over the same tensor bases (the
 * caller guarantees the same dims and strides), else encoded and left in mc. mc NULL: rt_launch. */
fa4_status rt_launch_cached(fa4_ctx *ctx, const struct fa4_kernel *k, const RtLaunch *l, CUstream stream,
                            RtMapCache *mc);

/* ============================== buffers.c ============================== */

/* One buffer a kernel reads or writes, as the caller gave it: the argument's name, its base and the
 * bytes from the base that the kernel may touch (computed from shape and strides with checked 64-bit
 * math; UINT64_MAX, a saturated product, is refused). opaque: the kernel touches an extent no argument
 * describes (score_mod_aux, which the caller's score_mod indexes): only where it lives is checked. */
typedef struct RtBuffer {
    const char *name;
    const void *ptr; /* NULL: the call has no such buffer (nothing to check) */
    uint64_t bytes;
    int opaque;
} RtBuffer;

/* Asks the driver about each given buffer, one cuPointerGetAttributes call each: it must be device
 * memory of the context's device (or managed memory), and its allocation must hold [ptr, ptr + bytes).
 * A pointer the driver does not know (plain host memory), page-locked host memory, another device's
 * memory or an extent past the allocation's end is FA4_ERR_INVALID_ARGUMENT naming the buffer. The
 * driver must be open; no allocation, no lock. */
fa4_status rt_check_buffers(fa4_ctx *ctx, const RtBuffer *b, int n);
/* The same, except that a pointer the driver has vouched for on this context (it is remembered in
 * ctx->ptr_memo with its allocation) is checked against the remembered allocation without asking again;
 * a pointer not remembered, or whose extent the remembered allocation does not hold, is asked. Every call
 * asks when ctx->recheck_buffers. */
fa4_status rt_check_buffers_memo(fa4_ctx *ctx, const RtBuffer *b, int n);
/* Forget every remembered pointer (fa4_forget_buffers). */
void rt_forget_buffers(fa4_ctx *ctx);

/* a x b, or UINT64_MAX when the product does not fit 64 bits: every bound refuses the saturated value. */
static inline uint64_t rt_mul_sat(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
static inline uint64_t rt_add_sat(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* ============================== mha.c ============================== */

/* 0 when mha.c's call-memo field list covers every byte of fa4_mha_args but padding, else -1 and why. */
int rt_mha_memo_fields(char *err, size_t n);
/* Free the context's call memo (fa4_destroy). */
void rt_mha_memo_free(fa4_ctx *ctx);

/* ============================== split.c ============================== */
/* Fewest kv blocks a split should have: below this the partial writes and the combine cost more
 * than the extra CTAs win. */
enum { RT_SPLIT_MIN_BLOCKS = 2 };
/* rt_split_choice gives the same count for every kv_blocks at or past this (the count is capped at
 * FA4_MAX_SPLITS), and 1 for tiles >= sm_count: the enumerator (configs.c) walks no further. */
enum { RT_SPLIT_KV_SATURATE = RT_SPLIT_MIN_BLOCKS * FA4_MAX_SPLITS };
/* The split count for tiles CTAs of work on sm_count SMs with kv_blocks kv blocks per tile
 * (1..FA4_MAX_SPLITS): 1 when the tiles fill the SMs, else the fewest splits that keep the last
 * wave within 95% of the best occupancy, each split at least RT_SPLIT_MIN_BLOCKS kv blocks. */
int rt_split_choice(uint64_t tiles, int sm_count, int kv_blocks);
/* sm90a, a call without a workspace: the CTAs of a cluster split (gen cluster=N) for a picked
 * split count `splits` over `tiles` tiles, or 0 (run unsplit) */
enum { FA4_MAX_CLUSTER_SPLIT = 8 }; /* the portable cluster size (16 CTAs measured slower: placement) */
int rt_cluster_split_choice(int splits, uint64_t tiles, int sm_count);
/* Workspace of a split launch: f32 partial O [num_splits, rows, ov] then f32 LSE [num_splits,
 * rows] (a split launch may have one split: a decode shape's packed kernel); 0 for num_splits < 1. rows = batch x
 * heads_q x seqlen_q. UINT64_MAX when the bytes do not fit 64 bits (no workspace_size is that large). */
uint64_t rt_split_workspace_bytes(int num_splits, uint64_t rows, int ov_depth);

/* ============================== mha_pick.c ============================== */

/* Thresholds of fa4_mha_fwd's config rules (mha_pick.c says where each is read; the enumerator in
 * configs.c walks them): causal sm90a runs persistent up to this seqlen_k; a GQA group whose query
 * rows fill at most a 64-row tile is a decode shape (sm90a: the decode tile); the largest tile packs
 * 256 rows; sm90a d64 sequences of at most RT_SHORT_Q_ROWS query rows (causal: RT_SHORT_D64_CAUSAL_Q_ROWS) take
 * 128-row tiles (64-row ones up to RT_DECODE_TILE_ROWS); sm90a d256 up to RT_PERSISTENT_SEQLEN_K with at most
 * RT_SHORT_D256_Q_ROWS query rows takes RT_SHORT_D256_BN-key blocks, and without a mask or GQA over more than
 * RT_D256_FINE_K_LO and at most RT_D256_FINE_K keys RT_D256_FINE_BN-key blocks in RT_D256_FINE_STAGES stages. */
enum { RT_PERSISTENT_SEQLEN_K = 2048, RT_DECODE_TILE_ROWS = 64, RT_PACK_ROWS_MAX = 256, RT_SHORT_Q_ROWS = 256,
       RT_SHORT_D64_CAUSAL_Q_ROWS = 1024, RT_SHORT_D256_BN = 48, RT_SHORT_D256_Q_ROWS = 512, RT_D256_FINE_K_LO = 192,
       RT_D256_FINE_K = 256, RT_D256_FINE_BN = 32, RT_D256_FINE_STAGES = 3 };
/* The short d64 128-row tile's kv block for dense K/V of at most RT_SHORT_PAD_K keys: the one of least padding,
 * RT_PAD_BN_MIN..128 in steps of 16, the larger on ties (mha_pick.c short_d64_tile; configs.c cuts there). */
enum { RT_SHORT_PAD_K = 256, RT_PAD_BN_MIN = 64, RT_PAD_BN_MAX = 128 };
int rt_least_pad_bn(int64_t seqlen_k);

/* What fa4_mha_fwd's config rules read of a call: its shape and which optional arguments are given,
 * no pointer. mha.c fills it from fa4_mha_args; fa4_mha_configs_for from a workload. */
typedef struct RtMhaShape {
    TargetId target;
    int sm_count;                   /* the split picks' SM count (rt_sm_count) */
    fa4_dtype dtype;
    int qk_depth, ov_depth, heads_q, heads_kv, batch;
    fa4_mask mask;
    int window_left, window_right;  /* FA4_MASK_WINDOW */
    uint64_t seq_rows_q;            /* seqlen_q, or max_seqlen_q (varlen) */
    int64_t seqlen_k;               /* seqlen_k; varlen: the packed kv rows; paged: max_pages x page_size */
    int varlen, page_size;          /* cu_seqlens_q given; paged KV's page_size (0: dense K, V) */
    int sink, rope_split;           /* sink, k_rope given */
    int softcap, alibi;             /* the built-in score transforms: softcap > 0, alibi_slopes given */
    uint64_t score_mod;             /* the source's hash (config word mod=), 0: none */
    int num_splits, workspace, kv_early; /* workspace: one is given */
    const char *config;             /* args->config: tuning words (NULL: none) */
} RtMhaShape;

/* The split rules in steps (rt_mha_splits runs them all; configs.c runs the last two for many
 * tile and kv-block counts): the prelude decides what needs no split plan, else the split kernel's
 * config and plan facts; the scene is what the count depends on; the outcome is the decision. */
typedef struct RtSplitPrelude {
    int done;            /* splits and path are final (no split plan needed, or none plans) */
    int splits, path;
    int pick;            /* the runtime picks the count */
    int cluster_ok;      /* sm90a without a workspace: a decode shape may take a cluster split */
    int have_ws;         /* a workspace is given (or assumed) */
    Config sc;           /* the split kernel's config */
    RtSplitFacts f;      /* its plan facts */
} RtSplitPrelude;
typedef struct RtSplitScene {
    uint64_t tiles;      /* tiles of the split kernel (saturated) */
    int kv_blocks, decode, pick, cluster_ok, use_ws, sm_count;
} RtSplitScene;
typedef struct RtSplitOutcome { int splits, path, cluster; } RtSplitOutcome;

/* The H100's 132 SMs for sm90a, the B200's 148 for sm100a: the split picks' count without a device. */
int rt_default_sm_count(TargetId t);
/* The SM count the split picks use for target t: the device's when the driver opens and the device
 * runs t, else rt_default_sm_count. */
int rt_sm_count(fa4_ctx *ctx, TargetId t);
/* The config the arguments decide, with s->config's tuning words (which may not change them). */
fa4_status rt_mha_base_config(fa4_ctx *ctx, const RtMhaShape *s, Config *c);
/* The words the shape decides (persistent for short causal sm90a); c->target must be final. */
void rt_mha_shape_rules(Config *c, const RtMhaShape *s);
/* The configs other than c (at most 3) that rt_mha_shape_rules may pick, by batch, heads and lengths, for calls of
 * the class of s (sm90a causal over dense K/V: the persistent walk or stride, or a CTA a tile): fa4_mha_configs_for
 * lists them beside c. 0 for other calls. */
int rt_tile_order_twins(const Config *c, const RtMhaShape *s, Config twins[3]);
/* The small-grid rule (64-row tiles where 128-row ones would fill at most half the SMs) may apply to calls of the
 * class of s under config c: it reads batch and heads, so fa4_mha_configs_for lists the class's both tiles. */
int rt_small_grid_open(const Config *c, const RtMhaShape *s);
/* The dynamic-tiles rule (config dynamic=1 where the grid is two waves or more) may apply to calls of the class of s
 * under config c: it reads batch and heads, so fa4_mha_configs_for lists the class's both kernels. */
int rt_dynamic_open(const Config *c, const RtMhaShape *s);
/* c's static walk: dynamic=0, and no claim of runs (a word of the counter's) */
void rt_static_walk(Config *c);
/* The query rows of the config's tile (its bm, or the plan's default); 0 where the config does not plan. */
int rt_config_bm(const Config *c);
/* The split count and whether the split kernel runs (*path); may set c's cluster and decode tile. */
fa4_status rt_mha_splits(fa4_ctx *ctx, const RtMhaShape *s, Config *c, int assume_ws, int *splits, int *path);
/* split=1 (and early=1 for kv_early where the kernel has it) on the split path. */
void rt_mha_split_words(Config *c, const RtMhaShape *s, int path);
/* The combine kernel's config for O of this dtype (e4m3 kernels write bf16) and depth. */
void rt_mha_combine_config(TargetId t, fa4_dtype dtype, int ov_depth, Config *c);
/* Plan facts of a split config (and, cluster_n > 0, whether its cluster split of n CTAs plans),
 * memoized per context. */
fa4_status rt_split_facts(fa4_ctx *ctx, const Config *sc, int cluster_n, RtSplitFacts *out);
fa4_status rt_split_prelude(fa4_ctx *ctx, const RtMhaShape *s, Config *c, int assume_ws, RtSplitPrelude *p);
void rt_split_scene(const RtMhaShape *s, const RtSplitPrelude *p, RtSplitScene *sc);
/* rt_split_choice for the scene when the runtime picks, else 1. */
int rt_split_choice_of(const RtSplitScene *sc);
/* The decision for a scene and its choice; fits(u, n): 1 when a cluster split of n CTAs plans, 0 not,
 * -1 an error (then -1). */
int rt_split_outcome(const RtSplitScene *sc, int choice, int (*fits)(void *u, int n), void *u, RtSplitOutcome *o);

/* Every kernel a call of shape s launches (target final): the main config (defaults not yet filled:
 * plan it for the canonical text), the split count, whether the split kernel runs, and the combine
 * kernel's config when partials are merged through the workspace. */
typedef struct RtMhaPick {
    Config main, comb;
    int splits, path, combine;
} RtMhaPick;
fa4_status rt_mha_pick(fa4_ctx *ctx, const RtMhaShape *s, int assume_ws, RtMhaPick *out);

/* ============================== score_mod.c ============================== */

/* A user score_mod on its way into a kernel (gen/score_mod.h has the contract). */
typedef struct RtMod {
    const char *src;     /* CUDA C source (the caller's) */
    int link;            /* ScoreModLink: splice, call or link (FA4GEN_SCORE_MOD_LINK) */
    char user_code[160]; /* the cache key's user-code line */
} RtMod;

/* For a config with mod=: check src hashes to it, read the link mode and NVRTC's version
 * (FA4_ERR_UNSUPPORTED without NVRTC). *m is ready for rt_mod_ptx. */
fa4_status rt_mod_prepare(fa4_ctx *ctx, const Config *c, const char *src, RtMod *m);
/* NVRTC's PTX of the source for target t (malloc'd); FA4_ERR_COMPILE with NVRTC's log. */
fa4_status rt_mod_ptx(fa4_ctx *ctx, const RtMod *m, const Target *t, char **ptx);
/* The link mode FA4GEN_SCORE_MOD_LINK asks for (splice when unset); a bad value is FA4_ERR_INVALID_ARGUMENT. */
fa4_status rt_mod_link(fa4_ctx *ctx, int *link);

/* ============================== api.c (kernels) ============================== */

/* Parse config text (canonical or "key=value" words) over *c. */
fa4_status rt_parse_config(fa4_ctx *ctx, const char *text, Config *c, const char *what);
/* the same, recording in *g the keys the text gave (config_given_has) */
fa4_status rt_parse_config_given(fa4_ctx *ctx, const char *text, Config *c, ConfigGiven *g, const char *what);
/* Plan c into p; a refusal is the caller's config (config_err). */
fa4_status rt_plan(fa4_ctx *ctx, const Config *c, Plan *p, fa4_status config_err);
/* The JIT path of a planned kernel: disk cache, else generate + compile (and store). *cubin is
 * malloc'd; *key is the disk-cache key. mod_src: the score_mod source of a config with mod= (NULL
 * otherwise). FA4_ERR_NO_KERNEL when JIT is disabled. */
fa4_status rt_build_cubin(fa4_ctx *ctx, const Config *c, const char *mod_src, Plan *p, void **cubin, size_t *size,
                          fa4_kernel_stats *st, uint64_t *key);
/* The memory cache: a hit costs a hash, a lock and a compare, no allocation. */
struct fa4_kernel *rt_kernel_lookup(fa4_ctx *ctx, const char *key, uint64_t hash);
/* The same for a kernel with a score_mod: the entry must hold this very source (mod_src). */
struct fa4_kernel *rt_kernel_lookup_mod(fa4_ctx *ctx, const char *key, uint64_t hash, const char *mod_src);
/* Free an entry's memory (its key, its score_mod source, itself); the module is the caller's. */
void rt_kernel_free(struct fa4_kernel *k);
/* A miss: build, load, and insert under key (the device must be open). */
fa4_status rt_kernel_build(fa4_ctx *ctx, const char *key, uint64_t hash, const Config *c, const char *mod_src,
                           struct fa4_kernel **out, fa4_kernel_stats *st, fa4_status config_err);

#endif
