/* fa4.h - the public C API of libfa4rt, the fa4gen runtime.
 *
 * The runtime turns a kernel config into a loaded CUDA function (generate PTX
 * -> compile to cubin with the toolkit's ptxas, else nvJitLink, else the driver's
 * JIT -> load; FA4GEN_COMPILER=driver-ptx hands the PTX itself to the driver),
 * caches it in memory and on disk, and launches attention operators.
 *
 * The CUDA driver and nvJitLink are loaded at run time (dlopen), so programs
 * linked with libfa4rt start on machines with no GPU driver; their absence is
 * reported as a status, never as a crash or an exit().
 *
 * If a definition does not appear in this file, it is not a published API.
 * New status codes may be added; treat unknown ones as errors.
 */
#ifndef FA4_H
#define FA4_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The release: fa4gen --version, fa4_version() and the shared library's version
 * (libfa4rt.so.MAJOR.MINOR.PATCH, soname libfa4rt.so.MAJOR) all say the same. */
#define FA4_VERSION_MAJOR 0
#define FA4_VERSION_MINOR 2
#define FA4_VERSION_PATCH 0
#define FA4_VERSION_STRING "0.2.0"

typedef enum fa4_status {
    FA4_OK = 0,
    FA4_ERR_INVALID_ARGUMENT, /* an argument is wrong; the message names it */
    FA4_ERR_UNSUPPORTED,      /* valid, but not supported (dtype/depth/target/GPU) */
    FA4_ERR_NO_DRIVER,        /* libcuda could not be loaded or initialised */
    FA4_ERR_NO_DEVICE,        /* no CUDA device, or the chosen one is missing */
    FA4_ERR_COMPILE,          /* PTX -> cubin (or a score_mod's CUDA C) failed; the message holds the log */
    FA4_ERR_CUDA,             /* a CUDA driver call failed; the message names it */
    FA4_ERR_CACHE,            /* the disk cache could not be used (non-fatal cases warn instead) */
    FA4_ERR_OUT_OF_MEMORY,
    FA4_ERR_INTERNAL,         /* a bug in fa4gen; please report the message */
    FA4_ERR_NO_KERNEL,        /* JIT is disabled and no linked bundle holds the kernel; the message names
                                 its canonical config */
    FA4_NUM_STATUS
} fa4_status;

/* A fixed, short description of a status code. Never NULL. */
const char *fa4_status_string(fa4_status s);

/* The library's version, FA4_VERSION_STRING of the fa4.h it was built with. */
const char *fa4_version(void);

typedef enum fa4_dtype { FA4_BF16 = 0, FA4_FP16 = 1, FA4_E4M3 = 2 } fa4_dtype;
/* SM103A: B300 (compute capability 10.3); its kernels are the SM100A ones assembled for sm_103a. */
typedef enum fa4_target {
    FA4_TARGET_AUTO = 0,
    FA4_TARGET_SM90A = 1,
    FA4_TARGET_SM100A = 2,
    FA4_TARGET_SM103A = 3
} fa4_target;
typedef enum fa4_mask { FA4_MASK_NONE = 0, FA4_MASK_CAUSAL = 1, FA4_MASK_WINDOW = 2 } fa4_mask;

/* Context options. Initialise with FA4_OPTIONS_INIT; the library reads
 * min(size, sizeof(fa4_options)) bytes, so older callers keep working. */
typedef struct fa4_options {
    size_t size;
    unsigned version;      /* FA4_OPTIONS_VERSION */
    int device;            /* CUDA device ordinal (default 0) */
    fa4_target target;     /* AUTO: from the device's compute capability */
    const char *cache_dir; /* NULL: $FA4GEN_CACHE_DIR, $XDG_CACHE_HOME/fa4gen, $HOME/.cache/fa4gen */
    int disk_cache;        /* 1 (default): use the on-disk cubin cache; 0: memory only */
    int verbose;           /* 1: log every kernel fetch (and cache writes) to stderr; also FA4GEN_LOG=1.
                              0: a JIT compile over 100 ms says so once per context, on stderr, with how
                              to build kernels ahead of time; -1 (or FA4GEN_LOG=0): not even that */
    /* version 2 */
    int disable_jit;       /* 1: kernels come only from linked bundles (fa4_bundle_register); a kernel
                              no bundle holds fails with FA4_ERR_NO_KERNEL. Also FA4GEN_DISABLE_JIT=1 */
    /* version 3 */
    int remember_buffers;  /* 0 (default): fa4_mha_fwd asks the driver about every buffer on every call
                              (~0.1 us a pointer), so a freed and reused address is always seen for what
                              it is now. 1: it remembers each pointer the driver vouched for, with its
                              allocation's start and size, and asks again only for pointers it has not
                              seen (see fa4_forget_buffers): faster, but memory freed back to the
                              driver and handed out again smaller, or as another device's, is not
                              seen until forgotten. Also FA4GEN_REMEMBER_BUFFERS=1 */
} fa4_options;
#define FA4_OPTIONS_VERSION 3
#define FA4_OPTIONS_INIT {sizeof(fa4_options), FA4_OPTIONS_VERSION, 0, FA4_TARGET_AUTO, NULL, 1, 0, 0, 0}

typedef struct fa4_ctx fa4_ctx; /* opaque; thread-safe */

/* Create a context. Does not require a GPU: the driver is opened lazily on
 * the first call that needs it. *ctx is NULL on failure. */
fa4_status fa4_create(fa4_ctx **ctx, const fa4_options *opt);
/* Unload modules and free the context. fa4_destroy(NULL) does nothing. */
void fa4_destroy(fa4_ctx *ctx);
/* The message of the last failed call made on ctx by this thread (ctx may be
 * NULL for a failed fa4_create). Never NULL; "" when there is none. */
const char *fa4_last_error(const fa4_ctx *ctx);
/* With fa4_options.remember_buffers, fa4_mha_fwd remembers each pointer the driver vouched for, with the
 * start and size of its allocation (see "Bad arguments" below); after freeing device memory back to the
 * driver (cuMemFree, torch.cuda.empty_cache()), such a caller makes it forget them all. ctx NULL:
 * nothing. Thread-safe. */
void fa4_forget_buffers(fa4_ctx *ctx);

/* Compile a kernel config (canonical form or CLI-style "key=value ..." text)
 * to a cubin for its target. Needs no GPU. Where it comes from, in order: a
 * linked (or loaded) bundle's entry for the config (the ELF for the config's
 * target, taken out of the entry's fatbin: the same bytes the bundle's ptxas
 * wrote), the disk cache (a hit returns the cached bytes), then generate +
 * compile. With JIT disabled, only bundles; a miss is FA4_ERR_NO_KERNEL naming
 * the bundles searched. Keys the text leaves out take the generator's
 * defaults; the target defaults to the context's target, or to the
 * generator's default (sm90a) when that is AUTO. The returned buffer is owned
 * by the caller (free()). */
fa4_status fa4_compile(fa4_ctx *ctx, const char *config, void **cubin, size_t *size);

/* Timing of the last fa4_get_kernel (or fa4_compile_v2) on this context, for
 * benchmarks. */
typedef struct fa4_kernel_stats {
    double generate_ms, compile_ms, load_ms, total_ms;
    int source; /* 0 memory hit, 1 disk hit, 2 compiled, 3 a linked bundle's */
} fa4_kernel_stats;

/* fa4_compile, also reporting its timing and where the cubin came from (1 disk
 * hit, 2 compiled, 3 a bundle; load_ms is 0). stats may be NULL. */
fa4_status fa4_compile_v2(fa4_ctx *ctx, const char *config, void **cubin, size_t *size, fa4_kernel_stats *stats);

typedef struct fa4_kernel fa4_kernel; /* opaque, owned by the context until fa4_destroy */
/* Generate/compile/load a kernel through the caches (memory, then disk). */
fa4_status fa4_get_kernel(fa4_ctx *ctx, const char *config, fa4_kernel **k, fa4_kernel_stats *stats);

/* What a caller needs to launch a kernel it got from fa4_get_kernel itself (a
 * CUDA graph node, its own stream logic): the loaded function and the launch
 * shape. The kernel's parameters are its tensor maps (CUtensorMap, one per
 * entry of `maps`, in order) then the scalars fa4gen explain lists under
 * "params". Strings live as long as the context. Initialise with
 * FA4_KERNEL_INFO_INIT. */
typedef struct fa4_kernel_info {
    size_t size;
    const char *config;   /* the canonical config */
    const char *symbol;   /* the entry's name */
    void *function;       /* its CUfunction */
    int threads;          /* block size (x) */
    unsigned smem_bytes;  /* dynamic shared memory per CTA */
    int cluster[3];       /* CTAs per cluster */
    int n_params;         /* entries of the kernel's parameter list */
} fa4_kernel_info;
#define FA4_KERNEL_INFO_INIT {sizeof(fa4_kernel_info), NULL, NULL, NULL, 0, 0, {1, 1, 1}, 0}
fa4_status fa4_kernel_get_info(const fa4_kernel *k, fa4_kernel_info *info);

/* Bad arguments (both operators). Nothing is compiled or launched for a call until every check has
 * passed; a refusal is FA4_ERR_INVALID_ARGUMENT (FA4_ERR_UNSUPPORTED for a valid shape no kernel
 * takes) with a one-sentence message that starts with the argument's name, and the CUDA context is
 * untouched. Checked: every int field against what it means (sizes > 0, enums, windows, splits) and
 * every product of them in 64 bits (a shape whose counts multiply past what the kernels index is
 * refused, never wrapped); strides (positive or 0 for packed, the kernels' alignments, and no tensor
 * overlapping itself: taken in the order of their strides, each axis of more than one index steps
 * over at least the extent of the axes inside it, so head-major layouts are fine but a broadcast is
 * not; distinct tensors may alias, except that an output must not overlap anything, which is not
 * checked); and, asking the CUDA driver once per pointer (cuPointerGetAttributes), every buffer the
 * kernels read or write: it must be device memory of the context's device (or managed memory), not
 * host memory the driver does not know, not page-locked host memory, not another device's memory,
 * and its allocation must hold every byte the shape and strides reach. The driver knows allocations,
 * not tensors: a buffer carved out of a larger allocation (a caching allocator's block) is checked
 * against that allocation. By default every buffer is asked on every call (~0.1 us a pointer on an H200).
 * With fa4_options.remember_buffers (opt-in) fa4_mha_fwd remembers the allocation the driver named for
 * each pointer it vouched for (a few hundred), and a later buffer at that pointer is checked against the
 * remembered allocation without a driver call; a buffer the remembered allocation does not hold is asked
 * again. Then memory freed back to the driver whose address comes back as a smaller allocation, or as
 * host or another device's memory, is not seen until fa4_forget_buffers. A call whose arguments match an
 * earlier accepted call in everything but pointer values (its signature) skips the checks that read no
 * pointer, which it passed then; the pointers' own checks run on every call. Values that live on the
 * device (cu_seqlens, seqlens_k, block_table, indices, topk_length) cannot be seen by the host: each has
 * one meaning for every bit pattern, negative ones included, given where the field is described.
 *
 * Multi-head attention forward. Tensors are [batch, seqlen, heads, depth] with
 * element strides (depth stride 1). LSE, when requested, is fp32
 * [batch, heads_q, seqlen_q], natural log; rows that see no key get O = 0 and
 * LSE = -inf. Causal masking aligns bottom-right: query row i sees key j when
 * j <= i + seqlen_k - seqlen_q (FlashAttention convention). With dtype
 * FA4_E4M3, q, k, v (and k_rope) are e4m3 and O is bf16 (its strides count
 * bf16 elements).
 *
 * Initialise with FA4_MHA_ARGS_INIT; the library reads min(size, sizeof)
 * bytes, so callers built against an older, shorter struct keep working:
 * fields after `config` then take their defaults. */
typedef struct fa4_mha_args {
    size_t size; /* sizeof(fa4_mha_args) */
    fa4_dtype dtype;
    const void *q, *k, *v;
    void *o;
    float *lse; /* optional */
    int batch, seqlen_q, seqlen_k, heads_q, heads_kv, qk_depth, ov_depth;
    /* element strides (batch, seq, head); 0 selects the packed layout */
    int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];
    float softmax_scale; /* 0: 1/sqrt(qk_depth) */
    fa4_mask mask;
    int window_left, window_right; /* FA4_MASK_WINDOW */
    /* optional kernel config overrides ("bm=128 bn=176 stages=2"), NULL = defaults */
    const char *config;
    /* MLA prefill (sm100a, qk_depth 192 / ov_depth 128) with the rope part of K
     * in its own tensor: k then holds K's first qk_depth - 64 columns
     * [batch, seqlen_k, heads_kv, qk_depth - 64] and k_rope its last 64
     * [batch, seqlen_k, heads_kv, 64], same dtype, element strides (0 = packed).
     * NULL: K is one tensor of qk_depth columns. Other targets and depths are
     * refused with FA4_ERR_UNSUPPORTED. */
    const void *k_rope;
    int64_t k_rope_stride[3];
    /* Per-tensor dequantisation scales (any dtype; 0 means 1, otherwise finite
     * and > 0): the kernel computes
     * softmax(softmax_scale * q_descale * k_descale * Q K^T) V * v_descale. */
    float q_descale, k_descale, v_descale;
    /* Attention sinks (gpt-oss form), optional: sink [heads_q] f32, one logit per query head
     * (natural-log units, like the scaled scores), joins each row's softmax denominator only:
     * O = sum_j e^(s_j - m) v_j / (sum_j e^(s_j - m) + e^(sink - m)). LSE excludes it (it is
     * still log sum_j e^(s_j)); a row that sees no key keeps O = 0, LSE = -inf. A sink of -inf
     * changes nothing; +inf gives O = 0. */
    const float *sink;
    /* A score_mod, optional: CUDA C source text defining
     *   __device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)
     * compiled at run time with NVRTC (FA4_ERR_UNSUPPORTED when libnvrtc is absent;
     * FA4_ERR_COMPILE with NVRTC's log when it does not compile). The kernel calls it on every
     * score before the mask, as FlexAttention does: s = softmax_scale * q_descale * k_descale *
     * q.k (the scaled score), b the batch, h the query head, q the query row, k the key column
     * (global, 0-based; q and k always lie inside the problem, so the mod may index aux with
     * them), aux = score_mod_aux (a device pointer passed through, may be NULL; opaque: the runtime
     * checks that it is device memory of the context's device, not how far the mod reads). The softmax
     * then runs on the returned values: O = softmax(mask(score_mod(s))) V, and LSE is natural
     * log over them. A mod that returns -inf for a whole row gives it O = 0, LSE = -inf. The
     * source's hash is part of the kernel config (mod=) and of the cache key. */
    const char *score_mod;
    const void *score_mod_aux;
    /* Split-KV (decode, long-KV/short-Q work): the kv blocks of each tile are cut into num_splits
     * parts; a kernel with split=1 writes each part's O / l (f32) and LSE into the workspace, and a
     * generated combine kernel (fa4gen combine) merges them on the same stream:
     * LSE = log sum_i e^(lse_i), O = sum_i e^(lse_i - LSE) O_i. num_splits: 1 = one kernel, no
     * workspace; N in 2..FA4_MAX_SPLITS forces N (splits may be empty; with sink refused); 0 = the
     * runtime picks from the shape and the SM count (fa4_mha_split_count), and only when a
     * workspace is given, else 1 -- except on sm90a, where a decode shape without a workspace gets a
     * cluster split: up to 8 CTAs of a thread-block cluster share each tile's kv blocks and merge
     * their partial O in distributed shared memory (config word cluster=N; no workspace, no combine
     * kernel; fa4_mha_config names it). A decode shape (GQA, seqlen_q, or max_seqlen_q, small enough that
     * the group packs into one tile) runs the split kernel even with one split: it then writes O and
     * LSE itself. Works with varlen and paged KV (partials in the varlen LSE order; rows of tokens in
     * no sequence left alone). workspace: a device buffer of workspace_size bytes, 16-byte
     * aligned, at least what fa4_mha_split_count() says; the library never allocates one per call. It is
     * scratch: calls that may run at the same time need their own. (Debug: a call whose config has the word
     * timeline=1, with num_splits 1, gets each tile's phase stamps there instead: 24 u64 a tile, gen/fa4gen.h
     * MhaTimelineSlot; bench/short_timeline.py reads them.) */
    int num_splits;
    void *workspace;
    size_t workspace_size;
    /* Variable-length batches (both targets, not the sm100a CTA pair; config word varlen=1), on when
     * cu_seqlens_q is given:
     * q and o are packed [seqlen_q, heads, depth] and k, v [seqlen_k, heads_kv, depth] (seqlen_q and
     * seqlen_k count the packed rows; the batch strides must be 0), and sequence b owns rows
     * cu_seqlens_q[b] .. cu_seqlens_q[b+1] - 1 of q and o and cu_seqlens_k[b] .. cu_seqlens_k[b+1] - 1
     * of k and v: int32 [batch + 1] device arrays. No q, k or v row outside sequence b (the next
     * sequence's, rows after the last one) reaches its O or LSE, whatever it holds (NaN, Inf). Every mask
     * is per sequence (causal aligns each sequence's ends); an empty sequence is allowed (no rows; with no
     * keys its rows get O = 0, LSE = -inf). O rows that belong to no sequence are not written. max_seqlen_q (>= every sequence's
     * length, <= seqlen_q) sizes the grid. LSE is [heads_q, seqlen_q] (the packed row index).
     * The device arrays are checked only through the optional host mirrors cu_seqlens_q_host /
     * cu_seqlens_k_host (same contents): monotone, within the tensors, lengths <= max_seqlen_q. Without
     * them the kernel clamps each entry into [0, rows] and each end to >= its start, so a bad table
     * gives wrong (shorter) sequences but never a read or write outside q, k, v, o or LSE. */
    const int32_t *cu_seqlens_q, *cu_seqlens_k;
    int max_seqlen_q;
    const int32_t *cu_seqlens_q_host, *cu_seqlens_k_host;
    /* Paged KV (both targets, not the sm100a CTA pair; config word page=P), on when block_table is
     * given: k and v are page pools
     * [num_pages, page_size, heads_kv, depth] (k_stride/v_stride: page, row, head; 0 = packed),
     * block_table [batch, max_pages] int32 (device) lists sequence b's pages in order, and
     * seqlens_k [batch] int32 (device) its kv length: its logical kv row r is row r % page_size of page
     * block_table[b][r / page_size]. page_size: a power of two in 16..256. seqlen_k must be 0 (the bound
     * is max_pages x page_size; each seqlens_k entry is clamped to [0, that]). Works with varlen q
     * (cu_seqlens_q; cu_seqlens_k must then be NULL). A table entry outside [0, num_pages) is never read
     * through: that page's keys contribute nothing (masked), whatever the pool holds. Rows past a
     * sequence's length (its last page's tail) and pages named only by entries past the ceil(seqlens_k[b] /
     * page_size) it uses never reach its O or LSE, whatever they hold (NaN, Inf, another sequence's rows);
     * those entries are not read. (The config word stale=1 turns this isolation off, here and for varlen, as
     * kernels before it did: for same-run A/B benchmarks only, never for serving.) */
    const int32_t *block_table, *seqlens_k;
    int page_size, max_pages, num_pages;
    /* kv_early = 1 (the split kernel over dense or paged K, V, both targets; ignored for varlen, the
     * sm90a cluster split and the sm100a CTA pair): the caller promises that each sequence's K and V rows
     * before its newest seqlen_q (the cache's history) -- paged: and their block_table entries, and
     * seqlens_k -- are not written by any kernel that may still run when this call's kernel starts: the
     * one just before it on the stream, and earlier ones that a programmatic launch lets it overlap. Only
     * the newest rows (and a page newly entered for them) may come from them, as a decode step's KV append
     * writes them. The split kernel, launched as a programmatic dependent, then streams its first ring of
     * those older K/V blocks before that kernel has finished (config word early=1).
     * 0 (default): no global memory is read before the previous kernel completes; the split kernel
     * over dense K, V only prefetches its first K/V blocks into L2 there (config word prefetch, a hint
     * that reads no value). */
    int kv_early;
    /* Built-in score transforms (both targets; config words softcap=1, alibi=1; not with a score_mod, which
     * can compute either itself). softcap > 0 (0 = off; finite): each scaled score s becomes
     * softcap * tanh(s / softcap) (Gemma 2, Grok; FlashAttention's softcap), computed as
     * tanh(q.k * softmax_scale * descales / softcap) with the softmax's exponent scaled by softcap, so every cap
     * value shares one kernel. alibi_slopes (optional): f32 [heads_q] device array; the score of query row i
     * and key j gets -alibi_slopes[h] * |i + seqlen_k - seqlen_q - j| (FlashAttention's ALiBi, bottom-right
     * aligned: under causal masking, slope * (j - i - (seqlen_k - seqlen_q)); varlen and paged: per sequence),
     * added after the softcap and before the mask. LSE is over the transformed scores. */
    float softcap;
    const float *alibi_slopes;
} fa4_mha_args;
#define FA4_MHA_ARGS_INIT {sizeof(fa4_mha_args), FA4_BF16, NULL, NULL, NULL, NULL, NULL, \
                           0, 0, 0, 0, 0, 0, 0, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, \
                           0.0f, FA4_MASK_NONE, 0, 0, NULL, NULL, {0, 0, 0}, 0.0f, 0.0f, 0.0f, NULL, NULL, NULL, \
                           0, NULL, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0.0f, NULL}
#define FA4_MAX_SPLITS 128

/* Validate args, pick the config, get the kernel and launch it on stream (a
 * CUstream; NULL = default stream). Nothing is launched when a check fails.
 * The forward kernels (and a split's combine) are programmatic dependent launches both ways: launched with
 * programmatic stream serialization, each may start while the stream's previous kernel runs and executes
 * griddepcontrol.wait before it reads or writes any global memory (only L2 prefetch hints, which read no value, come
 * before it -- the dense sm90a forward's first tile while the previous kernel still runs, a split kernel's first
 * K/V blocks -- and, under kv_early, the split kernel's early K/V loads); each executes
 * griddepcontrol.launch_dependents at once, so a kernel launched after it with that attribute may start early too --
 * and must itself wait (griddepcontrol.wait) before reading O or LSE, as PDL requires. Stream order is unchanged
 * for plain launches.
 * A kernel with dynamic tiles (sm90a, config word dynamic=1: the runtime picks it for large dense grids) takes its
 * tiles from a counter the context owns: the stream's own for an eager call, a fresh one for each call made while
 * the stream captures a CUDA graph. So calls on different streams, and graphs replayed on any streams, run side by
 * side safely; one limit: two graph execs instantiated from the same captured graph share its counters and must
 * not run at the same time (CUDA already orders the launches of one exec). A capture before the context's first
 * eager dynamic call runs the static walk instead (the counters are allocated outside any capture). */
fa4_status fa4_mha_fwd(fa4_ctx *ctx, const fa4_mha_args *args, void *stream);

/* The canonical config fa4_mha_fwd would use for args (for logs, tests and AOT bundles); the split
 * kernel's (split=1) when it runs one (num_splits > 1, or a decode shape). Needs no GPU: the target
 * is the context's, or for AUTO the device's, or on a machine without one sm90a (the generator's
 * default, as fa4_compile); the split picks use the SM count of a device of that target when the
 * driver opens one, else the target's flagship: 132 (H100) for sm90a, 148 (B200) for sm100a. The SM
 * count moves only the split choices (how many splits; on sm90a without a workspace, the CTAs of a
 * cluster split, config word cluster=N). fa4_mha_configs_for lists every config of a workload. */
fa4_status fa4_mha_config(fa4_ctx *ctx, const fa4_mha_args *args, char *buf, size_t n);

/* The split count fa4_mha_fwd uses for args (1: no split) and the workspace bytes it needs
 * then (0 for 1): num_splits as given, or for 0 the runtime's pick, which assumes a workspace
 * will be given and uses the SM count fa4_mha_config describes (no GPU needed). Either output may
 * be NULL. */
fa4_status fa4_mha_split_count(fa4_ctx *ctx, const fa4_mha_args *args, int *num_splits, size_t *workspace_bytes);

/* Sparse MLA prefill (DeepSeek-V3.2 top-k attention; FlashMLA's contract).
 * q [s_q, h_q, d_qk] and kv [s_kv, 1, d_qk] are bf16, d_qk 576 (512 nope + 64
 * rope) or 512; V is the first 512 columns of the kv rows. indices [s_q, topk]
 * int32 select the kv rows each query token attends to. Outputs: out [s_q,
 * h_q, 512] bf16; lse and max_logits [s_q, h_q] fp32 (optional), natural log;
 * max_logits is the true row max of sm_scale * q.k over the valid keys.
 * An index < 0, >= s_kv, or at a position >= topk_length[s] contributes
 * nothing, whatever its row holds. topk_length[s] below 0 counts as 0 (an empty
 * row) and above topk as topk. A row with no valid index gives out 0, lse
 * +inf, max_logits -inf. attn_sink [h_q] (optional) scales out by
 * e^lse / (e^lse + e^sink) and leaves lse and max_logits alone. The last
 * dimension of every tensor is contiguous; the other strides are free
 * (element strides; 0 selects the packed layout; q's and out's token and head
 * strides may come in either order but may not overlap). Initialise with
 * FA4_MLA_SPARSE_ARGS_INIT. */
typedef struct fa4_mla_sparse_args {
    size_t size; /* sizeof(fa4_mla_sparse_args) */
    const void *q, *kv;
    const int32_t *indices;
    void *out;
    float *lse, *max_logits;       /* optional */
    const float *attn_sink;        /* optional, [h_q] */
    const int32_t *topk_length;    /* optional, [s_q] */
    int s_q, s_kv, h_q, d_qk, topk;
    int64_t q_stride[2];           /* (s, h) */
    int64_t kv_stride;             /* s */
    int64_t indices_stride;        /* s */
    int64_t out_stride[2];         /* (s, h) */
    float sm_scale;                /* 0: 1/sqrt(d_qk) */
    const char *config;            /* kernel config overrides, NULL = defaults */
    /* fp8 kv (sm100a): kv_dtype FA4_E4M3 makes kv e4m3 bytes (kv_stride counts bytes), used as
     * bf16(kv[i, c] * kv_scale[i, c / kv_scale_block]) (the fp32 product rounded to the nearest bf16:
     * the kernel dequantises before its bf16 MMAs): kv_scale [s_kv, d_qk / kv_scale_block] f32 packed
     * (NULL: every scale 1; an entry 0 also means 1), kv_scale_block 0 = one scale per row, else a
     * multiple of 64 dividing d_qk. FA4_BF16 (the default): bf16 kv, no scales. */
    fa4_dtype kv_dtype;
    const float *kv_scale;
    int kv_scale_block;
} fa4_mla_sparse_args;
#define FA4_MLA_SPARSE_ARGS_INIT {sizeof(fa4_mla_sparse_args), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
                                  0, 0, 0, 0, 0, {0, 0}, 0, 0, {0, 0}, 0.0f, NULL, FA4_BF16, NULL, 0}
fa4_status fa4_mla_sparse_fwd(fa4_ctx *ctx, const fa4_mla_sparse_args *args, void *stream);

/* ---------------------------------------------------------------- the kernel cache
 *
 * The disk cache's folder (fa4_options.cache_dir, else FA4GEN_CACHE_DIR, else $XDG_CACHE_HOME/fa4gen, else
 * $HOME/.cache/fa4gen) holds one <16 hex>.cubin per kernel a JIT compiled (docs/trust.md). These see, size
 * and empty it under the runtime's trust rules: the folder must belong to this user and not be writable by
 * group or others (else the runtime's one warning, and FA4_ERR_CACHE); entries are reached relative to the
 * opened folder, never through a symlink (O_NOFOLLOW), and only regular files of this user that carry an
 * entry's name are listed or removed (and the temporary files of writers that died, after 10 minutes).
 * Other names are left alone. A folder that does not exist yet holds no entries. FA4_ERR_CACHE also when the
 * context has no disk cache (fa4_options.disk_cache = 0, or no folder could be named). Thread-safe; other
 * processes may add entries meanwhile. */

/* The cache folder's path (it may not exist yet). */
fa4_status fa4_cache_dir(fa4_ctx *ctx, char *buf, size_t n);

/* One cache entry; strings live until the callback returns. */
typedef struct fa4_cache_entry {
    size_t size;            /* sizeof(fa4_cache_entry) */
    const char *file;       /* its name in the folder */
    const char *config;     /* the canonical config it was compiled from ("" when the file is not valid) */
    const char *generator;  /* the fa4gen build that wrote it ("" when not valid) */
    const char *problem;    /* NULL: a valid entry; else why the runtime would not load it (it rebuilds it) */
    int this_build;         /* 1: written by this library's build, so this runtime can load it */
    uint64_t bytes;         /* the file's size */
    int64_t mtime, atime;   /* seconds since the epoch; last use = the later (atime may lag: relatime) */
} fa4_cache_entry;
typedef int (*fa4_cache_fn)(void *user, const fa4_cache_entry *e); /* non-zero stops the listing */

/* Every entry, most recently used first. */
fa4_status fa4_cache_list(fa4_ctx *ctx, fa4_cache_fn fn, void *user);
/* Remove every entry; removed and bytes (either may be NULL) say how many and how large. */
fa4_status fa4_cache_clear(fa4_ctx *ctx, int *removed, uint64_t *bytes);
/* Remove the least recently used entries (by the later of mtime and atime) until the entries take at most
 * max_bytes; removed and bytes (either may be NULL) say what went. */
fa4_status fa4_cache_prune(fa4_ctx *ctx, uint64_t max_bytes, int *removed, uint64_t *bytes);

/* ---------------------------------------------------------------- attention backward
 *
 * The gradients of fa4_mha_fwd (issue 29; sm90a): dQ, dK, dV from the forward's inputs q, k, v, its
 * output o and LSE, and dout = dL/dO. Same layout and conventions as fa4_mha_args: [batch, seqlen, heads,
 * depth] with element strides (0 = packed), causal aligned bottom-right, GQA (heads_q / heads_kv query
 * heads per kv head: dK and dV are summed over the group), window masks, softmax_scale (0 = 1/sqrt(depth)).
 * dq has q's shape, dk and dv k's. lse is the forward's, fp32 [batch, heads_q, seqlen_q], natural log
 * (varlen [heads_q, total_q]); a row whose LSE is -inf (it saw no key) gets dQ = 0.
 * Three kernels run on stream: D = rowsum(dO * O) (and the LSE in log2 units), the main kernel (one CTA
 * per kv block: dK, dV in registers, dQ added into an fp32 accumulator), and the conversion of that
 * accumulator to dq. They need a workspace of fa4_mha_bwd_workspace_size() bytes (16-byte aligned device
 * memory; the library allocates nothing); it is scratch: calls that may run at the same time need their
 * own. Until the last kernel writes dq, dq's own memory is scratch too: when dq is dense (no holes between
 * its elements), not varlen, large enough and overlapping no other tensor of the call, D and the log2 LSE
 * (8 bytes a query row) live there and the workspace is the fp32 dQ accumulator alone; otherwise the
 * workspace holds them (the size function decides the same way from the same args, NULL pointers: from the
 * layout alone). Depths 64, 128 and 256 (sm90a), 64 and 128 (sm100a); bf16 or fp16. Initialise with
 * FA4_MHA_BWD_ARGS_INIT; the library reads min(size, sizeof) bytes. */
typedef struct fa4_mha_bwd_args {
    size_t size; /* sizeof(fa4_mha_bwd_args) */
    fa4_dtype dtype;
    const void *q, *k, *v, *o, *dout; /* inputs: the forward's q, k, v, o, and dL/dO (o's shape) */
    const float *lse;                 /* the forward's LSE (required) */
    void *dq, *dk, *dv;               /* outputs (every element written) */
    int batch, seqlen_q, seqlen_k, heads_q, heads_kv, qk_depth, ov_depth;
    /* element strides (batch, seq, head); 0 selects the packed layout */
    int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3], do_stride[3], dq_stride[3], dk_stride[3], dv_stride[3];
    float softmax_scale; /* 0: 1/sqrt(qk_depth) */
    fa4_mask mask;
    int window_left, window_right;
    const char *config; /* kernel tuning words ("bm=64 bn=128 stages=2"), NULL = defaults */
    /* Attention sinks, as fa4_mha_args.sink (gpt-oss): sink [heads_q] f32 joined the forward's denominator;
     * dsink [heads_q] f32 receives dL/dsink = -sum over rows of p_sink D (p_sink the sink's softmax weight,
     * D = rowsum(dO * O)). Both or neither. */
    const float *sink;
    float *dsink;
    /* A score_mod has no derivative the backward could use: a non-NULL score_mod is refused
     * (FA4_ERR_UNSUPPORTED), so a caller that passes its forward's fields learns it at once. */
    const char *score_mod;
    /* Variable-length batches, as fa4_mha_args: q, o, dout, dq packed [seqlen_q = total_q, heads, depth],
     * k, v, dk, dv [seqlen_k = total_k, heads_kv, depth], cu_seqlens_q / cu_seqlens_k int32 [batch + 1]
     * (device), max_seqlen_q / max_seqlen_k the longest sequences (size the grids); LSE [heads_q, total_q].
     * Rows of no sequence are not written. Optional host mirrors are checked like the forward's. */
    const int32_t *cu_seqlens_q, *cu_seqlens_k;
    int max_seqlen_q, max_seqlen_k;
    const int32_t *cu_seqlens_q_host, *cu_seqlens_k_host;
    /* 0: each dQ row is summed over the kv blocks in the order their CTAs arrive (runs may differ in the last
     * bits); 1: in kv-block order, so two runs give bit-identical dq (a turn counter per dQ block in the
     * workspace; slower where many CTAs share an m-block). dk, dv and dsink are deterministic either way. */
    int deterministic;
    void *workspace;
    size_t workspace_size;
    /* The forward's built-in soft-cap (fa4_mha_args.softcap; 0 = none): the scores were softcap tanh(s /
     * softcap), and the backward takes the chain rule through it. */
    float softcap;
    /* dL/dLSE (NULL: none, the LSE is not used past the forward): f32 in the LSE's layout, for a loss that
     * takes the forward's LSE too (ring / context-parallel merges); dS gains dLSE e^(s - LSE). */
    const float *dlse;
} fa4_mha_bwd_args;
#define FA4_MHA_BWD_ARGS_INIT {sizeof(fa4_mha_bwd_args), FA4_BF16, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
                               NULL, 0, 0, 0, 0, 0, 0, 0, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, \
                               {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, 0.0f, FA4_MASK_NONE, 0, 0, NULL, NULL, NULL, NULL, \
                               NULL, NULL, 0, 0, NULL, NULL, 0, NULL, 0, 0.0f, NULL}

/* The workspace bytes fa4_mha_bwd needs for args (its pointers may be NULL here; the shape, dtype, depth,
 * mask, varlen, sink and deterministic fields (or a config's deterministic=1) and dq's strides decide, and dq's
 * placement against the other tensors when the pointers are given). Needs no GPU. */
fa4_status fa4_mha_bwd_workspace_size(fa4_ctx *ctx, const fa4_mha_bwd_args *args, size_t *bytes);

/* Validate args, get the three kernels and launch them on stream (a CUstream; NULL = default stream).
 * Nothing is launched when a check fails. */
fa4_status fa4_mha_bwd(fa4_ctx *ctx, const fa4_mha_bwd_args *args, void *stream);

/* The canonical config of the main kernel fa4_mha_bwd would use for args (for logs and tests). */
fa4_status fa4_mha_bwd_config(fa4_ctx *ctx, const fa4_mha_bwd_args *args, char *buf, size_t n);

/* ---------------------------------------------------------------- AOT: the configs of a workload
 *
 * The kernel a call needs depends on its shape, not only on its dtype, depths and mask: causal sm90a
 * runs persistent for seqlen_k <= 2048, decode shapes take the decode tile and the split kernel, and
 * the split count (on sm90a without a workspace, the CTAs of a cluster split, which are part of the
 * config) depends on the batch, the heads, the kv length and the GPU's SM count. fa4_mha_configs_for
 * lists every canonical config fa4_mha_fwd can pick for the calls a workload describes, the combine
 * kernel's included, so that a bundle of them (fa4gen configs ... | fa4gen bundle - -o kernels.c)
 * never misses with JIT disabled. It runs shapes through the runtime's own rules (runtime/mha_pick.c),
 * walking their breakpoints rather than every shape: the seqlen_k where persistent flips, the query
 * lengths where a tile packs the GQA group, and the distinct split counts over the ranges of tiles and
 * kv blocks. Needs no GPU.
 *
 * A list field is an array of n entries; n 0 takes the default. A range is min..max, both inclusive;
 * 0..0 takes the default. Initialise with FA4_WORKLOAD_INIT; the library reads min(size, sizeof). */
typedef enum fa4_when {
    FA4_WHEN_DEFAULT = 0, /* the field's default */
    FA4_WHEN_NEVER,       /* no call has it */
    FA4_WHEN_ALWAYS,      /* every call has it */
    FA4_WHEN_EITHER       /* calls with and calls without */
} fa4_when;
/* Layouts of the calls (bits): dense tensors, varlen (cu_seqlens_q and cu_seqlens_k), paged KV with
 * dense q, paged KV with varlen q. */
enum { FA4_LAYOUT_DENSE = 1, FA4_LAYOUT_VARLEN = 2, FA4_LAYOUT_PAGED = 4, FA4_LAYOUT_VARLEN_PAGED = 8 };

typedef struct fa4_workload {
    size_t size;                  /* sizeof(fa4_workload) */
    unsigned version;             /* FA4_WORKLOAD_VERSION */
    const fa4_target *targets;    /* default: the context's target; AUTO: sm90a and sm100a */
    int n_targets;
    /* The SM counts of the GPUs the bundle will run on, each for every target. They move only the split
     * picks (how many splits; sm90a without a workspace: the cluster split's CTAs, a config word), so a
     * bundle for an H100 SXM (132) may miss decode kernels on an H100 PCIe (114): list both. Default: the
     * device's when the driver opens one of the target, else 132 for sm90a (H100, H200), 148 for sm100a
     * (B200). */
    const int *sm_counts;
    int n_sm_counts;
    const fa4_dtype *dtypes;      /* default: bf16 */
    int n_dtypes;
    const int *qk_depths;         /* head dims; default 128 */
    const int *ov_depths;         /* NULL: each equal to its qk_depth (else MLA's 192 / 128, ...) */
    int n_depths;
    const int *groups;            /* heads_q / heads_kv; default 1 */
    int n_groups;
    int heads_kv_min, heads_kv_max;   /* default 1..128 */
    const fa4_mask *masks;        /* default: causal (FA4_MASK_WINDOW: one per windows pair) */
    int n_masks;
    const int *windows;           /* (left, right) pairs for FA4_MASK_WINDOW, as fa4_mha_args */
    int n_windows;
    int batch_min, batch_max;     /* default 1..256 (varlen: sequences) */
    int seqlen_q_min, seqlen_q_max; /* default 1..131072 (varlen: max_seqlen_q) */
    /* default 1..131072. Varlen: each sequence's kv length (the rules read the packed total and the mean);
     * paged: the block table's reach, max_pages x page_size, which the rules read (a table as wide as the
     * longest sequence of the range, rounded up to a page, at most). */
    int seqlen_k_min, seqlen_k_max;
    int decode_q;                 /* > 0: decode steps too, seqlen_q 1..decode_q with any seqlen_k */
    unsigned layouts;             /* FA4_LAYOUT_* bits; default FA4_LAYOUT_DENSE */
    const int *page_sizes;        /* the paged layouts' page sizes (needed with them) */
    int n_page_sizes;
    fa4_when sink;                /* default NEVER */
    fa4_when kv_early;            /* default NEVER */
    fa4_when workspace;           /* a split workspace given; default EITHER */
    int num_splits;               /* as fa4_mha_args.num_splits (default 0: the runtime picks) */
    const char *config;           /* as fa4_mha_args.config: tuning words of every call (NULL: none) */
} fa4_workload;
#define FA4_WORKLOAD_VERSION 1
#define FA4_WORKLOAD_INIT {sizeof(fa4_workload), FA4_WORKLOAD_VERSION, NULL, 0, NULL, 0, NULL, 0, NULL, NULL, 0, \
                           NULL, 0, 0, 0, NULL, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, 0, FA4_WHEN_DEFAULT, \
                           FA4_WHEN_DEFAULT, FA4_WHEN_DEFAULT, 0, NULL}

/* One answer of fa4_mha_configs_for; strings live until the callback returns. */
typedef struct fa4_config_entry {
    size_t size;          /* sizeof(fa4_config_entry) */
    const char *config;   /* a canonical config (a bundle list line); NULL: calls no kernel serves */
    const char *example;  /* one call of the workload that needs it (or that no kernel serves) */
    const char *note;     /* config NULL: why (the generator's sentence); fa4_mha_fwd refuses these calls
                             with FA4_ERR_UNSUPPORTED */
    int count;            /* config NULL: how many classes of calls (target, dtype, depth, ...) it covers */
} fa4_config_entry;
/* Return 0 to go on, anything else to stop (fa4_mha_configs_for then returns FA4_OK). */
typedef int (*fa4_config_fn)(void *user, const fa4_config_entry *e);

/* Calls fn once per distinct canonical config the workload's calls need (in the order found), then once
 * per reason some calls have no kernel (config NULL; one entry per target and reason). Errors: a bad
 * workload field (FA4_ERR_INVALID_ARGUMENT naming it), bad tuning words. */
fa4_status fa4_mha_configs_for(fa4_ctx *ctx, const fa4_workload *w, fa4_config_fn fn, void *user);

/* ---------------------------------------------------------------- KV-cache append
 *
 * A decode (or chunked-prefill) step's new K, V rows into a KV cache, by one kernel launch (kind kv-append, both
 * targets): k [batch, s_new, heads_kv, k_depth] and v [batch, s_new, heads_kv, v_depth] (element strides
 * (batch, seq, head), 0 = packed; depth contiguous) go to positions cache_seqlens[b] + i, i < s_new, of sequence b
 * in
 *   a dense cache (block_table NULL): k_cache [cache_batch, cache_rows, heads_kv, k_depth] (v_cache the same with
 *     v_depth), sequence b in row cache_batch_idx[b] (int32 [batch], device; NULL: row b, and cache_batch must be
 *     >= batch), or
 *   a paged cache (block_table int32 [batch, max_pages], device): k_cache [num_pages, page_size, heads_kv, k_depth],
 *     position p of sequence b in row p % page_size of page block_table[b][p / page_size] (any page_size >= 1);
 * cache strides (row of the batch or page, position, head) in elements, 0 = packed. dtype: the caches' and the new
 * rows' (any fa4_dtype: the kernel copies bytes). Lengths: cache_seqlens int32 [batch] (device), or NULL: every
 * sequence holds cache_seqlen tokens (a host value, checked: 0 <= cache_seqlen, cache_seqlen + s_new <= the
 * capacity, cache_rows or max_pages x page_size). seqlens_out (optional, int32 [batch], device, not overlapping
 * cache_seqlens) receives each sequence's length after the append, cache_seqlens[b] + s_new, for an attention that
 * reads the cache next (fa4_mha_args.seqlens_k of a paged read).
 *
 * Device values have one meaning for every bit pattern: token i of sequence b goes to position
 * p = cache_seqlens[b] + i (64-bit: never wrapped) and is written only when 0 <= p < the capacity and its page is
 * in the pool (dense: cache_batch_idx[b] in [0, cache_batch); paged: block_table[b][p / page_size] in
 * [0, num_pages)); otherwise that token is not written, and nothing else is (a negative length, a position past the
 * cache's end, a table entry outside the pool). seqlens_out[b] = cache_seqlens[b] + s_new, saturated at 2^31 - 1
 * (a negative length stays negative; the attention reads a length below 0 as 0). Rows written by two tokens (two
 * sequences naming one page, duplicate cache_batch_idx entries) get one of them, which is unspecified.
 *
 * Checked as fa4_mha_fwd's arguments are ("Bad arguments" above): every int, stride (whole 16-byte chunks, bases
 * 16-byte aligned, no tensor overlapping itself) and extent in 64 bits, then the driver's word on every buffer
 * (fa4_options.remember_buffers applies); nothing is launched when a check fails. One launch on stream; the kernel
 * lets a programmatic dependent launch at once (griddepcontrol.launch_dependents), whose griddepcontrol.wait still
 * waits for the whole append. Initialise with FA4_KV_APPEND_ARGS_INIT; the library reads min(size, sizeof) bytes. */
typedef struct fa4_kv_append_args {
    size_t size; /* sizeof(fa4_kv_append_args) */
    fa4_dtype dtype;
    const void *k, *v;        /* the new rows */
    void *k_cache, *v_cache;  /* written in place */
    int batch, s_new, heads_kv, k_depth, v_depth;
    int64_t k_stride[3], v_stride[3];             /* new rows: batch, seq, head */
    int64_t k_cache_stride[3], v_cache_stride[3]; /* cache: batch (dense) or page (paged), position, head */
    int cache_batch, cache_rows;                  /* dense */
    const int32_t *cache_batch_idx;               /* dense, optional */
    const int32_t *block_table;                   /* paged */
    int page_size, max_pages, num_pages;          /* paged */
    const int32_t *cache_seqlens;                 /* device [batch], or NULL: cache_seqlen for every sequence */
    int cache_seqlen;
    int32_t *seqlens_out;                         /* optional, device [batch] */
} fa4_kv_append_args;
#define FA4_KV_APPEND_ARGS_INIT {sizeof(fa4_kv_append_args), FA4_BF16, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, \
                                 {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, 0, 0, NULL, NULL, 0, 0, 0, NULL, 0, NULL}

/* Validate args, get the kv-append kernel and launch it on stream (a CUstream; NULL = default stream). */
fa4_status fa4_kv_append(fa4_ctx *ctx, const fa4_kv_append_args *args, void *stream);

/* ---------------------------------------------------------------- AOT bundles
 *
 * `fa4gen bundle LIST -o kernels.c` compiles a list of configs ahead of time and
 * writes a C source holding one fatbin per kernel (the cubin for the config's
 * target and its PTX, which the driver JITs on a GPU the cubin does not run on)
 * and a table of them; the source registers it from a constructor when the host
 * is loaded, so linking it is all a host does. Every context then looks a
 * kernel up in the registered bundles after its memory cache and before its
 * disk cache or any generation: an entry is used when its canonical config and
 * generator version are the kernel's (the target is part of the config). */
typedef struct fa4_bundle_kernel {
    uint64_t config_hash;       /* the symbol's hash: FNV-1a 64 of canonical config, newline, generator */
    const char *config;         /* canonical config */
    const char *symbol;         /* the entry's name */
    const void *fatbin;         /* 16-byte aligned */
    size_t fatbin_size;
} fa4_bundle_kernel;

typedef struct fa4_bundle {
    size_t size;                /* sizeof(fa4_bundle) */
    const char *name;           /* for logs and messages */
    const char *generator;      /* FA4GEN version that wrote it; other versions' entries never match */
    int n_kernels;
    const fa4_bundle_kernel *kernels;
} fa4_bundle;

/* Make a bundle's kernels visible to every context of the process (the bundle's
 * own source calls this; a host may call it for a table it built itself). The
 * bundle must outlive the process's contexts. Registering the same bundle twice
 * does nothing. Thread-safe. */
fa4_status fa4_bundle_register(const fa4_bundle *b);

/* The registered bundles, in registration order (a bundle's shared object loaded with dlopen registers
 * itself from its constructor: fa4.load_bundle checks it did). fa4_bundle_at: NULL past the end.
 * Thread-safe. */
int fa4_bundle_count(void);
const fa4_bundle *fa4_bundle_at(int i);

#ifdef __cplusplus
}
#endif
#endif
