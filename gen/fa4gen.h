/* fa4gen.h - the generator's one internal header.
 *
 * Stages, in the order a kernel is made:
 *   config  (config.c)  what the user chose; one canonical text form and its hash
 *   plan    (plan.c + <target>/plan*.c)  every derived number, computed once
 *   emit    (ptx.c builder, <target>/<kind>.c emitters, <target>/ops.c op layer)
 *   api     (api.c)     config -> plan -> PTX, for the CLI and the runtime
 * Emitters read the plan and never re-derive a number from the config.
 */
#ifndef FA4GEN_H
#define FA4GEN_H

#include <stddef.h>
#include <stdint.h>

#define FA4GEN_VERSION "0.2.0"

#if defined(__GNUC__)
#define FA4_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define FA4_PRINTF(f, a)
#endif

/* ============================== config.c ============================== */

/* The attention backward (issue 29) is three kinds: mha-bwd (the main kernel), mha-bwd-pre (D = rowsum(dO O),
 * the LSE in log2 units, the dQ accumulator zeroed) and mha-bwd-dq (the accumulator to dQ); gen/mha_bwd.h.
 * kv-append (issue 27): a decode step's new K, V rows into a dense or paged cache (gen/kv_append.c). */
typedef enum { KIND_MHA, KIND_MLA_SPARSE, KIND_COMBINE, KIND_MHA_BWD, KIND_MHA_BWD_PRE, KIND_MHA_BWD_DQ,
               KIND_KV_APPEND, KIND_COUNT } Kind;
/* sm103a (B300, Blackwell Ultra, compute capability 10.3) runs the sm100a kernels (gen/sm100/), assembled for
 * .target sm_103a: an 'a' target's cubin loads only on its own chip. */
typedef enum { TARGET_SM90A, TARGET_SM100A, TARGET_SM103A, TARGET_COUNT } TargetId;
typedef enum { DT_BF16, DT_FP16, DT_E4M3, DT_COUNT } DType;
typedef enum { MASK_NONE, MASK_CAUSAL, MASK_WINDOW, MASK_COUNT } MaskKind;

/* The widest window bound: 2^30. The kernels compute a row's key range in 32-bit signed
 * arithmetic (row + seqlen_k - seqlen_q +- bound, rounded to tiles); the runtime keeps
 * seqlen + bound + a tile within INT_MAX. */
enum { FA4_WINDOW_MAX = 1 << 30 };

/* What a user chooses. A field left 0 means "the plan's best default"; after
 * config_fill_defaults() every field the target uses is explicit. */
typedef struct Config {
    Kind kind;
    TargetId target;
    DType dtype;
    int qk_depth, ov_depth;
    int bm, bn;       /* query rows per CTA, key rows per KV tile */
    int group;        /* query heads per KV head (1 = MHA) */
    int stages;       /* KV ring depth */
    int swizzle;      /* 32, 64 or 128 (bytes) */
    MaskKind mask;
    int window_left, window_right; /* MASK_WINDOW only */
    /* sm100a only (0 = default; -1 for rescale and exp2_poly, where 0 means something) */
    int qtiles;       /* 1 or 2 MMA_M-row Q tiles per CTA */
    int cta_pair;     /* 1, or 2 for cta_group::2 */
    int rescale;      /* conditional O rescale threshold, log2 units */
    int exp2_poly;    /* percent of exp2 done by the FMA polynomial */
    int rope_split;   /* MLA prefill: rope part of K is a separate tensor (0/1) */
    DType rope_dtype; /* dtype of that tensor */
    /* sm90a only (-1 = default) */
    int pingpong;     /* 1: consumer warpgroups take turns issuing wgmma (named barriers) */
    int persistent;   /* 1: min(tiles, SMs) CTAs loop over the tiles; 0: one CTA per tile */
    /* mla-sparse on sm100a only (0 = default; -1 for q_tmem_depth, where 0 means something) */
    int b_topk;       /* top-k positions per KV block (both CTAs of a pair together) */
    int num_mbars;    /* KV ring depth: slots, each with a full and an empty mbarrier */
    int q_smem_depth; /* Q columns the MMA reads from shared memory ... */
    int q_tmem_depth; /* ... and from TMEM (copied there with tcgen05.cp) */
    int cta_group;    /* 1: one CTA, 64 heads; 2: a CTA pair per token, 64 heads each, cta_group::2 */
    int tma_store;    /* sparse MLA: 1 = O leaves through smem by TMA store (16-byte strides), 0 = per-thread
                       * stores (any strides); -1 = unset: sm90a 1 (the runtime picks 0 for other strides), sm100a 0 */
    /* MHA score-path features, both targets (0 = off; canonical form names them only when on) */
    int sink;           /* 1: a per-head sink logit joins the softmax denominator (p_sink) */
    uint64_t score_mod; /* FNV-1a 64 of a user score_mod's CUDA C source; 0 = none (score_mod.c) */
    /* MHA split-KV, both targets (0 = off): the kernel writes f32 partial O and LSE per split of
     * the kv blocks (the split count is a kernel parameter); a combine kernel merges them */
    int split;
    /* split=1 on sm90a: 2..16 CTAs of a cluster split each tile's kv blocks and merge their partial O
     * in distributed shared memory (the split count is this, fixed; no workspace, no combine kernel);
     * 0 = off */
    int cluster_split;
    /* split=1, dense or paged K/V (not varlen, a cluster split or the sm100a CTA pair): 1 = the split
     * kernel, a programmatic dependent, streams the first ring of K/V blocks of its first tile before
     * griddepcontrol.wait (under the previous kernel's tail). Blocks run in ascending order and only
     * those wholly before row seqlen_k - seqlen_q load early, so the caller's contract is: K/V rows
     * before each sequence's newest seqlen_q (paged: and their table entries, and seqlens_k) are not
     * written by a kernel that may still run (fa4_mha_args.kv_early). 0 = every global read follows the
     * wait */
    int early;
    /* split=1, dense or paged K/V (not varlen, a cluster split or the sm100a CTA pair): the split
     * kernel, before its griddepcontrol.wait, prefetches into L2 the K/V blocks it will load first (after
     * any early=1 blocks), at most this many: a hint that reads no value, so unlike early=1 it asks nothing
     * of the caller (paged: the length and table entries that aim it are read again after the wait).
     * -1 = unset: config_fill_defaults picks (2; 0 under early=1); 0 = off */
    int prefetch;
    /* serving layouts, MHA (0 = dense; canonical form names them only when on) */
    int varlen;         /* 1: packed [total_tokens, heads, depth] q/k/v/o with cu_seqlens_q/k (gen/varlen.c) */
    int page;           /* KV page rows (16..256, a power of two): K, V [num_pages, page, heads_kv, depth]
                           through a block table (gen/varlen.c); 0 = dense K, V */
    /* varlen or paged: 1 = the kv tile that holds a sequence's last key is not isolated (its V rows past
     * the end reach the P V MMA as they are, NaN/Inf included; paged, table entries past the used pages
     * are read): the kernel as it was before issue 26 item 5, for same-run A/B benchmarks only. Unsafe.
     * 0 (default) = rows past the end are zeroed (plan note kv tail) */
    int stale;
    /* the backward kinds (gen/mha_bwd.h): 1 = dQ accumulated in a fixed order (reserved; refused for now) */
    int deterministic;
    /* mha-bwd on sm90a (and its pre kernel): 1 = the runtime may split the kv tiles of the grid's last, partly
     * empty wave over several CTAs each (a range of the tile's iterations per CTA; dK, dV partials summed in f32
     * through the caller's dq memory, mha_bwd.h "Tail split"). The split itself is a launch argument (p_tail_first,
     * p_tail_parts: 0 parts = none). Canonical form names it only when on */
    int tail_split;
    /* built-in score transforms, MHA, both targets (0 = off; canonical form names them only when on; not with
     * mod=). softcap=1: s = cap tanh(s / cap) (Gemma 2, Grok): the kernel computes tanh(q.k x p_softcap_scale)
     * with p_softcap_scale = softmax_scale x descales / cap, and the runtime passes scale_log2 = cap log2 e, so
     * the cap's value is a launch argument, not a kernel. alibi=1: s -= slope[h] |i + seqlen_k - seqlen_q - j|
     * (FlashAttention's ALiBi, bottom-right aligned), slopes f32 [heads_q] at p_alibi, scaled into the raw
     * scores' units by p_alibi_scale; after the softcap, before the mask */
    int softcap;
    int alibi;
    /* debug, sm90a MHA forward (dense, unsplit): 1 = each tile's phase boundaries (clock64, globaltimer; the
     * slots of MhaTimelineSlot) are stored to p_timeline, MHA_TIMELINE_SLOTS u64 per tile at tile x slots x 8
     * (the runtime passes fa4_mha_args.workspace). Never picked by the runtime; canonical form names it only
     * when on, so every other kernel keeps its text and PTX */
    int timeline;
    /* A/B benchmarks, sm90a MHA forward: 1 = the epilogue waits for its O store to read the Q slot and frees the
     * slot at once, where by default (0) a persistent CTA with two Q slots frees it in the next tile (plan note q
     * release). Never picked by the runtime; canonical form names it only when on */
    int store_wait;
    /* A/B benchmarks, sm90a MHA forward: 1 = a consumer computes each tile's coordinates at its top, where by
     * default (0) a persistent one with the registers to spare computes the next tile's while its
     * last P V runs (plan note coords ahead). Never picked by the runtime; canonical form names it only when on */
    int coords_late;
    /* A/B benchmarks, sm90a MHA forward: 1 = the consumers zero O with moves at each tile's top, where by default (0)
     * the tile's first P V overwrites it (wgmma scale-d 0) and only a tile without kv blocks zeroes it (plan note
     * o zero). Never picked by the runtime; canonical form names it only when on */
    int o_zero;
    /* A/B benchmarks, sm90a MHA forward: 1 = the epilogue stages O with st.shared.b32 (one per packed pair), where by
     * default (0) it uses stmatrix.x4 (four 8x8 blocks a warp instruction; plan note o stmatrix). Never picked by the
     * runtime; canonical form names it only when on */
    int o_sts;
    /* sm90a MHA: CTAs resident on an SM (0 = 1, or 2): the kernel asks ptxas for that many (.minnctapersm), so each
     * gets 1/occupancy of the register file and of the SM's shared memory, and a persistent grid is that many CTAs
     * an SM. Canonical form names it only when 2 */
    int occupancy;
    /* sm90a MHA tile order (plan note tile order): 1 = a head's m-blocks are consecutive tiles (a head group is one
     * head, or one kv head's query heads) and a persistent CTA walks the waves in alternating direction, 0 = a group
     * holds as many heads as keep their K and V in L2, walked with a plain stride, -1 (unset) = the plan's choice
     * (TILE_FIT where the kernel is persistent or has no mask, else 0). Canonical form names it only when set */
    int head_major;
    /* sm90a MHA (plan note diag half): 1 = a consumer whose rows see no key of a block's upper half runs that
     * block's softmax and P V half-wide, 0 = every block full width, -1 (unset) = the plan's
     * choice: 1 where the mask has a right bound (causal, window) and bn is a multiple of 32. Canonical form names
     * it only when set */
    int diag_half;
    /* sm90a MHA forward, persistent, dense, unsplit (plan note dynamic tiles): 1 = a CTA takes its first tile by
     * its index and each next one from a per-launch counter (p_tile_ctr: two u32, zero at launch, zero again when
     * the launch ends; the runtime owns them), so a CTA that finishes early takes more tiles; 0 = the static walk;
     * -1 (unset) = 0 for the plan, the runtime's choice for a call. Canonical form names it only when on */
    int dynamic;
    /* with dynamic=1 (plan note claim runs): N > 1 = a claim of the counter takes a run of N consecutive tiles (a
     * head's m-blocks, long and short alternating) and the next run is claimed as the run's first tile's loads are
     * out, so the atomic's round trip hides behind the run; the grid's last waves go by single tiles. 0 (unset) or
     * 1 = a tile a claim, made as its loads are out. Canonical form names it only when > 1 */
    int claim;
} Config;

/* Plan.head_major, the sm90a MHA tile order (plan note tile order). TILE_L2_GROUPS: a group holds as many heads as
 * keep their K and V in L2, its heads side by side for every m-block, walked with a plain stride. TILE_HEAD_MAJOR: a
 * head's m-blocks are consecutive tiles. TILE_FIT: head-major, unless every head's K and V fit the L2 budget: then
 * one group of all heads, every head's longest m-block first. Both walk waves of grid tiles in alternating direction. */
typedef enum { TILE_L2_GROUPS, TILE_HEAD_MAJOR, TILE_FIT } TileOrder;

/* config timeline=1: the u64 slots of one tile's record, in the order the tile passes them. P: the producer
 * thread; C0: consumer 0's first thread; CL: the last consumer's first thread. Clocks are the SM's clock64
 * (comparable within a CTA), GT the globaltimer (ns, comparable across SMs). */
typedef enum {
    TL_ID,          /* %smid << 32 | %ctaid.x */
    TL_ENTRY,       /* the CTA's entry (clock64, before the barrier init); the same in each of its tiles */
    TL_P_TILE,      /* the producer reaches the tile */
    TL_P_Q,         /* ... has issued its Q (after the Q slot was free) */
    TL_P_KV_END,    /* ... has issued its last K/V block */
    TL_C_TILE,      /* consumer 0 reaches the tile (row state reset) */
    TL_C_Q,         /* ... its Q has landed */
    TL_C_QK0,       /* ... first QK issued (its K landed, the ping-pong turn taken) */
    TL_C_S0,        /* ... first S ready */
    TL_C_MAIN_END,  /* ... last PV retired: the epilogue starts */
    TL_C_LSE,       /* ... l reduced, LSE stored */
    TL_C_STAGED,    /* ... O staged in smem, the consumer's threads synced */
    TL_C_STORED,    /* ... the O store has read smem (the Q slot is free) */
    TL_CL_STORED,   /* the last consumer's TL_C_STORED */
    TL_GT_C_TILE,   /* globaltimer at TL_C_TILE */
    TL_GT_C_STORED, /* globaltimer at TL_C_STORED */
    /* the turn chain of a tile with at least two kv blocks (a loop pass writes them again: the last pass's stay;
     * a one-block tile leaves the C0 ones 0) */
    TL_C_QK_LAST,   /* consumer 0 has issued the last block's QK (with the P V before it) */
    TL_C_S_LAST,    /* ... that S is ready */
    TL_C_P_LAST,    /* ... its softmax done, P converted: before taking the last turn */
    TL_C_PV_LAST,   /* ... has issued the last P V (the turn taken) */
    TL_CL_QK0,      /* the last consumer's first QK issued */
    TL_CL_MAIN_END, /* the last consumer's last P V retired */
    /* the CTA's prologue, as TL_ENTRY in each of its tiles: the producer thread's clock64 */
    TL_P_WAITED,    /* past griddepcontrol.wait (the previous grid done): in the prologue, or (plan pdl prefetch
                     * kv) the producer's own wait after TL_P_TILE, no-op past the CTA's first tile */
    TL_P_SYNCED,    /* past the barrier init, the CTA barrier and the producer's setmaxnreg */
    MHA_TIMELINE_SLOTS
} MhaTimelineSlot;

extern const char *const kind_name[KIND_COUNT];
extern const char *const target_name[TARGET_COUNT];
/* 1 for the targets whose kernels are gen/sm100/'s (tcgen05, TMEM): sm100a and sm103a. */
static inline int target_is_sm100(TargetId t) { return t == TARGET_SM100A || t == TARGET_SM103A; }
extern const char *const dtype_name[DT_COUNT];
extern const int dtype_bytes[DT_COUNT];

/* Every function that can fail returns 0 on success, -1 on failure with one
 * sentence in err naming the field, the value and what is allowed. */
void config_init(Config *c);
int config_set(Config *c, const char *key, const char *value, char *err, size_t n);
int config_fill_defaults(Config *c, char *err, size_t n);
int config_check(const Config *c, char *err, size_t n);
/* The kernels early=1 and prefetch are for: the MHA split kernel over dense or paged K, V (not varlen,
 * a cluster split or the sm100a CTA pair). */
int config_split_pdl(const Config *c);
int config_dense_prefetch(const Config *c);
int config_parse_canonical(const char *text, Config *c, char *err, size_t n);
/* Apply "key=value ..." words (the kind may stand first) over c, as config_set does one by one. */
int config_apply_text(Config *c, const char *text, char *err, size_t n);
/* The fields one text or one command line gave, each at most once, and the words that gave them
 * (escaped, for messages): a key given twice, depth beside qk or ov, a key the kernel lacks and a
 * value the defaults would replace are refused by name instead of resolving last-one-wins. */
enum { CONFIG_FIELDS = 48 };
typedef struct ConfigGiven {
    char how[CONFIG_FIELDS][64];           /* "--mask causal", "mask=none"; "" = not given */
    unsigned char by_depth[CONFIG_FIELDS]; /* qk and ov given together by depth (mla-sparse takes ov from qk) */
    int value[CONFIG_FIELDS];              /* an int key's value as given */
} ConfigGiven;
/* config_set, recording key in g as given by the words `how`; a field g already holds is refused. */
int config_give(Config *c, ConfigGiven *g, const char *key, const char *value, const char *how, char *err, size_t n);
/* config_apply_text, recording each word in g. */
int config_give_text(Config *c, ConfigGiven *g, const char *text, char *err, size_t n);
/* config_parse_canonical, recording each word in a fresh g. */
int config_parse_given(const char *text, Config *c, ConfigGiven *g, char *err, size_t n);
/* over's fields replace into's (flags refine a --config text). */
void config_given_merge(ConfigGiven *into, const ConfigGiven *over);
/* 1 when g holds key (*how: the words that gave it). */
int config_given_has(const ConfigGiven *g, const char *key, const char **how);
/* What g gave, against the kernel c makes with its defaults: a key its kind and target lack,
 * rope_dtype without rope_split=1, split=0 beside a cluster split, a value the defaults replace
 * (mla-sparse's ov). Returns 0 when c does not fill (plan_make then says why). */
int config_check_given(const Config *c, const ConfigGiven *g, char *err, size_t n);
/* 1 when kind k on target t reads key (what its --help lists). */
int config_key_applies(Kind k, TargetId t, const char *key);
/* The canonical one-line form: stable key order, every field the target uses. */
void config_canonical(const Config *c, char *buf, size_t n);
uint64_t config_hash(const Config *c); /* FNV-1a 64 of canonical + generator version */
void config_symbol(const Config *c, char *buf, size_t n); /* fa4_<kind>_<target>_<hash16> */
int parse_int(const char *s, int *out);
/* The backward kinds (mha_bwd.h): whether k is one, and the canonical keys of their configs (config.c). */
static inline int kind_is_bwd(Kind k) { return k == KIND_MHA_BWD || k == KIND_MHA_BWD_PRE || k == KIND_MHA_BWD_DQ; }
int mha_bwd_key_used(const Config *c, const char *key);

/* ============================== plan.c ============================== */

enum { PLAN_MAX_SMEM = 48, PLAN_MAX_ROLES = 8, PLAN_MAX_MAPS = 6, PLAN_MAX_BARS = 12,
       PLAN_MAX_TMEM = 12, PLAN_MAX_NOTES = 32, PLAN_MAX_PARAMS = 32, PLAN_MAX_MBARS = 16,
       PLAN_FAMILY_BYTES = 1024 };

/* TENSOR_DO, TENSOR_DK, TENSOR_DV: the backward's dO (read) and dK, dV (written), [batch, seq, heads, depth] */
typedef enum { TENSOR_Q, TENSOR_K, TENSOR_V, TENSOR_O, TENSOR_K_ROPE, TENSOR_DO, TENSOR_DK, TENSOR_DV,
               TENSOR_COUNT } TensorId;
extern const char *const tensor_name[TENSOR_COUNT];

typedef struct { char name[24]; uint32_t offset, size, align; char what[64]; } SmemEntry;
typedef struct { char name[24]; int first_warp, warps, regs; char job[80]; } Role;
typedef struct { char name[20]; int id, threads; char what[64]; } NamedBar;
typedef struct { char name[16]; uint32_t col, ncols; char what[48]; } TmemEntry;
/* An mbarrier array of the smem map: n barriers of 8 bytes at off, each completing a phase after
 * count arrivals (plus the transaction bytes expected on it, if any). */
typedef struct { char name[24]; uint32_t off; int n, count; } PlanMbar;

/* How a tensor map addresses its tensor: boxes (tiled), or four gathered rows of a 2-D map
 * (tile::gather4, sm_100a). */
typedef enum { MAP_TILED, MAP_GATHER4 } MapMode;

/* One TMA tensor map. Global dims are (depth, seq, head, batch) of the named tensor with its
 * own strides, the first `rank` of them; the runtime encodes any map from this. */
typedef struct {
    char name[12];
    TensorId tensor;
    MapMode mode;
    uint32_t rank;
    DType dtype;
    uint32_t depth;     /* global dim 0 (elements) */
    uint32_t box[4];    /* elements along (depth, seq, head, batch) */
    int swizzle;        /* bytes: 32, 64, 128 */
    uint32_t box_bytes;
} MapSpec;

typedef struct { char key[32]; char value[192]; } PlanNote; /* extra explain lines */

/* The values a kernel may take as scalar parameters; the runtime's operator fills each. */
typedef enum {
    SCALAR_LSE,        /* u64: LSE output pointer, 0 for none */
    SCALAR_SEQLEN_Q, SCALAR_SEQLEN_K, SCALAR_HEADS_Q, SCALAR_BATCH, /* u32 */
    SCALAR_SCALE_LOG2, /* f32: softmax scale x descales x log2 e */
    SCALAR_O_SCALE,    /* f32: the V descale */
    /* sparse MLA: pointers (u64; 0 = absent for the optional ones), sizes (u32), element strides (u64) */
    SCALAR_Q, SCALAR_KV, SCALAR_INDICES, SCALAR_OUT, SCALAR_MAX_LOGITS, SCALAR_SINK, SCALAR_TOPK_LENGTH,
    SCALAR_S_KV, SCALAR_TOPK,
    SCALAR_Q_STRIDE_S, SCALAR_Q_STRIDE_H, SCALAR_KV_STRIDE, SCALAR_IDX_STRIDE, SCALAR_OUT_STRIDE_S,
    SCALAR_OUT_STRIDE_H,
    SCALAR_SM_SCALE,   /* f32: the softmax scale itself (max_logits are in its units) */
    SCALAR_KV_SCALE,   /* u64: fp8 kv dequantisation scales [s_kv, kv_scale_blocks] f32, 0 = unit scales */
    SCALAR_KV_SCALE_BLOCKS, /* u32: scales per kv row */
    SCALAR_AUX,        /* u64: a score_mod's user pointer */
    /* split-KV (split=1) and its combine kernel */
    SCALAR_NUM_SPLITS, /* u32: splits of the kv blocks (gridDim covers tiles x splits) */
    SCALAR_O_ACCUM,    /* u64: partial O, f32 [num_splits, batch, heads_q, seqlen_q, ov] */
    SCALAR_LSE_ACCUM,  /* u64: partial LSE, f32 [num_splits, batch, heads_q, seqlen_q], natural log */
    SCALAR_OUT_STRIDE_B, /* u64: O's batch stride (elements); with out_stride_s, out_stride_h */
    /* varlen MHA: cu_seqlens (u64 pointers to int32 [batch + 1]) and the packed query rows (u32) */
    SCALAR_CU_SEQLENS_Q, SCALAR_CU_SEQLENS_K, SCALAR_TOTAL_Q,
    /* paged KV: block table (u64, int32 [batch, max_pages]), per-sequence kv lengths (u64, int32 [batch]),
     * the table's row length and the page pool's size (u32) */
    SCALAR_BLOCK_TABLE, SCALAR_SEQLENS_K, SCALAR_MAX_PAGES, SCALAR_NUM_PAGES,
    /* the backward (gen/mha_bwd.h): workspace parts (u64: dQ accumulator, D, nl2 = -LSE log2 e, sink
     * partials), dO and dQ with their element strides (u64), dsink (u64), the softmax scale (f32) and the
     * query rows of the padded workspace, the packed k rows of a varlen call (u32) */
    SCALAR_DQ_ACCUM, SCALAR_DPSUM, SCALAR_NLSE2, SCALAR_SINK_PART, SCALAR_DOUT, SCALAR_DOUT_STRIDE_B,
    SCALAR_DOUT_STRIDE_S, SCALAR_DOUT_STRIDE_H, SCALAR_DQ, SCALAR_DQ_STRIDE_B, SCALAR_DQ_STRIDE_S,
    SCALAR_DQ_STRIDE_H, SCALAR_DSINK, SCALAR_SCALE, SCALAR_Q_ROWS, SCALAR_TOTAL_K,
    /* varlen backward: dK, dV with their seq and head element strides (u64), for the row-masked stores */
    SCALAR_DK, SCALAR_DK_STRIDE_S, SCALAR_DK_STRIDE_H, SCALAR_DV, SCALAR_DV_STRIDE_S, SCALAR_DV_STRIDE_H,
    /* softcap=1: f32 softmax_scale x descales / cap; alibi=1: u64 slopes f32 [heads_q], f32 their factor into the
     * raw scores' units (log2 e / scale_log2) */
    SCALAR_SOFTCAP_SCALE, SCALAR_ALIBI, SCALAR_ALIBI_SCALE,
    /* the backward's pre kernel: u64 dL/dLSE f32 (LSE's layout), 0 = none */
    SCALAR_DLSE,
    /* kv-append (gen/kv_append.c): the new K, V rows and the caches (u64 pointers); their element strides (u64: the
     * new rows' (batch, seq, head), the caches' (page, row, head)); every sequence's cache length when no lengths
     * array is given (u32), the new lengths' output (u64, 0 = none), rows per page, new tokens per sequence and kv
     * heads (u32). With SCALAR_SEQLENS_K (the lengths in), SCALAR_BLOCK_TABLE, SCALAR_MAX_PAGES, SCALAR_NUM_PAGES
     * and SCALAR_BATCH */
    SCALAR_K_NEW, SCALAR_V_NEW, SCALAR_K_CACHE, SCALAR_V_CACHE, SCALAR_KN_STRIDE_B, SCALAR_KN_STRIDE_S,
    SCALAR_KN_STRIDE_H, SCALAR_VN_STRIDE_B, SCALAR_VN_STRIDE_S, SCALAR_VN_STRIDE_H, SCALAR_KC_STRIDE_P,
    SCALAR_KC_STRIDE_R, SCALAR_KC_STRIDE_H, SCALAR_VC_STRIDE_P, SCALAR_VC_STRIDE_R, SCALAR_VC_STRIDE_H,
    SCALAR_SEQLEN_BASE, SCALAR_SEQLENS_OUT, SCALAR_PAGE_ROWS, SCALAR_S_NEW, SCALAR_HEADS_KV,
    /* the sm_100a backward's dK, dV stores: their batch strides (u64 elements; 0 for varlen) */
    SCALAR_DK_STRIDE_B, SCALAR_DV_STRIDE_B,
    /* config timeline=1: u64 the tiles' phase records (MhaTimelineSlot) */
    SCALAR_TIMELINE,
    /* the backward's deterministic=1: u64 the turn counters (u32, one per dQ block of the workspace) */
    SCALAR_DQ_SEM,
    /* the backward's tail_split=1 (mha_bwd.h): u32 the first split tile and the parts per split tile (0: none); u64
     * the partials' area (f32 dK, dV, then u32 counters) and u32 its bytes (the pre kernel zeroes it) */
    SCALAR_TAIL_FIRST, SCALAR_TAIL_PARTS, SCALAR_TAIL_WS, SCALAR_TAIL_BYTES,
    /* config dynamic=1: u64 the launch's tile counter (two u32: tiles claimed, CTAs done; zero at launch) */
    SCALAR_TILE_CTR,
    SCALAR_COUNT
} ScalarId;
extern const char *const scalar_name[SCALAR_COUNT];

typedef enum { PARAM_TMAP, PARAM_U64, PARAM_U32, PARAM_F32 } ParamType;

/* One kernel parameter, in .param order: the entry's parameter list is generated from these
 * and the runtime packs its launch arguments from them (runtime/launch.c). */
typedef struct {
    char name[24];   /* the .param is p_<name> */
    ParamType type;
    int index;       /* PARAM_TMAP: the map; otherwise the ScalarId */
} ParamSpec;


struct Target;

typedef struct Plan {
    Config cfg;
    const struct Target *target;
    char canonical[256];
    char symbol[64];
    uint64_t hash;

    /* tiles */
    int rows_per_cta;  /* query rows (sequence positions) one CTA covers */
    int heads_per_cta; /* query heads one CTA covers (the GQA group when packed, else 1) */
    int bm, bn, qk, ov;
    int elem_bytes;
    int swizzle_bytes; /* row bytes of one swizzled smem chunk */
    int chunk_elems;   /* elements per swizzled chunk row */
    int qk_chunks, ov_chunks;
    int stages;

    /* shared memory map (in offset order) */
    SmemEntry smem[PLAN_MAX_SMEM];
    int n_smem;
    uint32_t smem_bytes;  /* end of the last entry */
    uint32_t smem_launch; /* dynamic smem requested at launch (includes base-alignment slack) */
    uint32_t smem_align;  /* the kernel aligns its dynamic smem base up to this */

    /* warp roles */
    Role roles[PLAN_MAX_ROLES];
    int n_roles;
    int threads;
    int entry_regs; /* registers per thread at entry: 65536 / (threads x ctas_per_sm), rounded down to 8 */
    int ctas_per_sm; /* CTAs the kernel is built to share an SM with (.minnctapersm; >= 1, plan_make sets 1 before the
                        family's plan); a persistent grid's CTAs an SM */
    int head_major;  /* tile order (TileOrder): TILE_L2_GROUPS walks with a plain stride, the others in waves of
                        alternating direction */
    int tile_walk;   /* 1: every role walks its tiles through mha_tile_first/next, and mha_tile_first chooses the
                        tile group (%tile_group) once for the CTA; 0: mha_tile_coords chooses it for its tile */
    uint32_t smem_cap; /* shared memory a CTA may launch with; 0: the target's limit */

    NamedBar bars[PLAN_MAX_BARS];
    int n_bars;

    PlanMbar mbars[PLAN_MAX_MBARS];
    int n_mbars;

    MapSpec maps[PLAN_MAX_MAPS];
    int n_maps;

    TmemEntry tmem[PLAN_MAX_TMEM];
    int n_tmem;
    int tmem_cols; /* allocated columns (power of two), 0 = no TMEM */

    int cluster[3];    /* a tile is one cluster: cluster[0] CTAs side by side along the query rows */
    int persistent; /* kernel loops over tiles with stride gridDim.x */
    /* programmatic dependent launch: pdl_dependent, the kernel is launched as a dependent of the stream's
     * previous kernel and runs griddepcontrol.wait before it reads what that kernel wrote (combine);
     * pdl_trigger, the kernel lets its dependent launch early (griddepcontrol.launch_dependents: split) */
    int pdl_dependent, pdl_trigger;
    /* pdl_early_kv: at most this many K/V blocks of a CTA's first tile load before the producer's
     * griddepcontrol.wait (those reads then overlap the previous kernel's tail): the blocks its ring
     * takes before any is consumed; every other global access follows the wait. 0 = off */
    int pdl_early_kv;
    /* pdl_prefetch_kv: at most this many K/V blocks of a CTA's first tile, the next it loads after the
     * early ones, are prefetched into L2 (cp.async.bulk.prefetch.tensor) before the wait; an unsplit
     * (sm90a) kernel prefetches that tile's Q too. 0 = off */
    int pdl_prefetch_kv;
    uint32_t l2_kv_rows; /* K+V rows (seqlen_k) of this many kv heads fit the L2 budget: tiles are grouped by heads */
    /* kv_tail (varlen or paged K, V, unless config stale=1): the kv tile that holds a sequence's last key
     * and rows past it (the tail block: the length is not a multiple of bn) has those rows of V zeroed in
     * smem before the P V MMA reads them, whatever they held (NaN, Inf: 0 x NaN is NaN): its V lands on a
     * tail barrier, a scrub warp zeroes the rows, fences them for the async proxy and releases the stage
     * (plan note kv tail). Paged, table entries past the pages the length uses are not read either (their
     * boxes load the coordinate num_pages: TMA's zero fill). K's rows past the end stay: their scores are
     * masked by a select (-inf), which no NaN survives. 0 = off */
    int kv_tail;
    int kv_tail_pass; /* bytes the scrub warp zeroes per store instruction: 32 lanes x 16 (st.shared.v4) */

    PlanNote notes[PLAN_MAX_NOTES];
    int n_notes;

    ParamSpec params[PLAN_MAX_PARAMS];
    int n_params;

    const char *overflow; /* the first table a builder found full (plan_make then fails) */

    /* The family's own part of the plan (Sm90Plan in sm90/plan90.h, Sm100Plan in
     * sm100/plan100.h, SparsePlan90 in sm90/mla90.h): each family's header defines its struct
     * and accessors over this storage, which this header does not name. */
    _Alignas(16) unsigned char family[PLAN_FAMILY_BYTES];
} Plan;

int plan_make(const Config *c, Plan *p, char *err, size_t n); /* fills defaults, checks, plans */
/* K+V rows (seqlen_k) of this many kv heads fit the L2 budget (Plan.l2_kv_rows) */
uint32_t plan_l2_kv_rows(const Config *c);
/* plan note tile order, counted: the busiest CTA's share of a persistent sm90a MHA grid of grid_ctas CTAs over the
 * mean share, for TILE_FIT's alternating walk or TILE_L2_GROUPS' plain stride (order), unpacked causal tiles costing
 * their kv blocks plus half a block. c: defaults filled (bm, bn). 0 past 2^18 tiles or 64 m-blocks a head. */
double mha_tile_order_load(const Config *c, int order, uint32_t batch, uint32_t heads_q, uint32_t seqlen_q,
                           uint32_t seqlen_k, uint32_t grid_ctas);
/* The same for a grid of one CTA a tile in the L2-group order, which the hardware hands out in index order to the
 * first of `slots` free (the causal kernels without a persistent loop). */
double mha_tile_dispatch_load(const Config *c, uint32_t batch, uint32_t heads_q, uint32_t seqlen_q, uint32_t seqlen_k,
                              uint32_t slots);
/* The tile geometry every planner starts from: bm, bn, depths, element size, swizzle chunks
 * (depths rounded up to whole chunks), stages, and tiles on the 1024-byte swizzle boundary. */
void plan_geometry(const Config *c, Plan *p);
/* A planner's or checker's refusal: the sentence into err, returns -1. */
int plan_refuse(char *err, size_t n, const char *fmt, ...) FA4_PRINTF(3, 4);
/* Builders used by the target planners. */
uint32_t plan_smem(Plan *p, const char *name, uint32_t size, uint32_t align, const char *what);
void plan_role(Plan *p, const char *name, int first_warp, int warps, int regs, const char *job);
int plan_bar(Plan *p, const char *name, int threads, const char *what); /* returns the barrier id */
void plan_map(Plan *p, const char *name, TensorId t, DType dt, uint32_t depth, uint32_t box_depth,
              uint32_t box_seq, uint32_t box_head, int swizzle);
uint32_t plan_tmem(Plan *p, const char *name, uint32_t col, uint32_t ncols, const char *what);
/* n mbarriers in the smem map (8 bytes each), count arrivals a phase; returns the offset. */
uint32_t plan_mbar(Plan *p, const char *name, int n, int count, const char *what);
const PlanMbar *plan_mbar_find(const Plan *p, const char *name);
void plan_param_map(Plan *p, int map);                      /* the map as parameter p_tmap_<name> */
void plan_param_scalar(Plan *p, ScalarId s, ParamType type); /* p_<scalar name> */
void plan_note(Plan *p, const char *key, const char *fmt, ...) FA4_PRINTF(3, 4);
const SmemEntry *plan_smem_find(const Plan *p, const char *name);

/* explain: the plan as a readable table or as JSON. Returns a malloc'd string. */
char *plan_explain_text(const Plan *p);
char *plan_explain_json(const Plan *p);

/* ============================== ptx.c ============================== */

typedef struct Buf {
    char *p;
    size_t len, cap;
    int oom;
} Buf;
void buf_printf(Buf *b, const char *fmt, ...) FA4_PRINTF(2, 3);
void buf_puts(Buf *b, const char *s);
void buf_free(Buf *b);
/* A whole file in a malloc'd, NUL-terminated buffer (its length in *size); NULL when it cannot be read. */
char *read_whole_file(const char *path, size_t *size);

enum { EMIT_MAX_REGS = 768, EMIT_REG_NAME = 24, EMIT_REG_HASH = 2048 /* > 2 x EMIT_MAX_REGS */,
       EMIT_REG_TEXTS = 32 /* R() texts of elements and negations live this many calls */ };

/* Register classes, one bit each so a callee can accept several (RT_B32 | RT_F32). */
typedef enum { RT_PRED = 1, RT_B16 = 2, RT_B32 = 4, RT_B64 = 8, RT_F32 = 16, RT_F64 = 32 } RegType;

/* A typed handle to a declared register, an element of a register array, or a whole array
 * (for reg_list). Emitters pass these between functions instead of name strings, so a callee
 * can check the class it was given (REG_WANT) and a misspelt name cannot reach the PTX.
 * Print with R(e, r). The zero value is REG_NONE: "no register" for optional operands. */
typedef struct Reg {
    uint16_t id;   /* index + 1 into Emit.regs; 0 = none */
    uint8_t type;  /* RegType */
    uint8_t neg;   /* a predicate read negated: "!%p" (reg_not) */
    int32_t elem;  /* element of an array, or -1: the scalar (or the whole array) */
} Reg;
#define REG_NONE ((Reg){0, 0, 0, -1})

typedef struct { char type[6]; uint8_t rt; char name[EMIT_REG_NAME]; int count; } RegDecl;

/* Emitter state: one per kernel. All text goes through emit(). */
typedef struct Emit {
    const Plan *p;
    Buf body;
    RegDecl regs[EMIT_MAX_REGS];
    int n_regs;
    uint16_t reg_slot[EMIT_REG_HASH]; /* name hash -> index + 1 into regs */
    int labels;
    char texts[EMIT_REG_TEXTS][EMIT_REG_NAME + 8]; /* ring of R() texts that need a buffer */
    unsigned n_texts;
    int failed; /* an internal error was recorded; message in err */
    char err[256];
    struct ScoreMod *mod; /* the user's score_mod (score_mod.h), or NULL */
} Emit;

void emit_init(Emit *e, const Plan *p);
void emit_free(Emit *e);
void emit(Emit *e, const char *fmt, ...) FA4_PRINTF(2, 3);         /* one instruction line */
void emit_note(Emit *e, const char *fmt, ...) FA4_PRINTF(2, 3);    /* a "// ..." line */
void emit_section(Emit *e, const char *fmt, ...) FA4_PRINTF(2, 3); /* a role banner */
void emit_label(Emit *e, const char *label);
void emit_raw(Emit *e, const char *text);
void emit_fail(Emit *e, const char *fmt, ...) FA4_PRINTF(2, 3);
/* dst = src / n, dst = src % n (unsigned, n an immediate): a power of two as a shift or mask (ptxas does not). */
void emit_div_imm(Emit *e, const char *dst, const char *src, unsigned n);
void emit_rem_imm(Emit *e, const char *dst, const char *src, unsigned n);
/* Declare a register (idempotent for the same type); returns its "%name". */
const char *reg(Emit *e, const char *type, const char *name);
/* Declare %name<n>; element i is "%name<i>" (a handle: reg_at of reg_find(e, "name")). */
void reg_array(Emit *e, const char *type, const char *name, int n);
/* "{%name<first>, ..., %name<first+count-1>}" into buf. */
const char *reglist(char *buf, size_t n, const char *name, int first, int count);

/* Typed handles. reg_new declares the register named by fmt (idempotent for the same class;
 * another class is an internal error) and returns its handle; reg_f32() etc. spell the class.
 * reg_arr declares %name<n> and returns the whole array; reg_at(e, arr, i) is element i.
 * reg_not(p) is the predicate p read negated. */
Reg reg_new(Emit *e, RegType t, const char *fmt, ...) FA4_PRINTF(3, 4);
#define reg_pred(e, ...) reg_new((e), RT_PRED, __VA_ARGS__)
#define reg_b16(e, ...) reg_new((e), RT_B16, __VA_ARGS__)
#define reg_b32(e, ...) reg_new((e), RT_B32, __VA_ARGS__)
#define reg_b64(e, ...) reg_new((e), RT_B64, __VA_ARGS__)
#define reg_f32(e, ...) reg_new((e), RT_F32, __VA_ARGS__)
/* The handle of a register declared earlier (a prologue's %smem, %scale_log2): an undeclared
 * name is an internal error, so a misspelt name fails here, not in ptxas. */
Reg reg_find(Emit *e, const char *fmt, ...) FA4_PRINTF(2, 3);
Reg reg_arr(Emit *e, RegType t, int n, const char *fmt, ...) FA4_PRINTF(4, 5);
Reg reg_at(Emit *e, Reg arr, int i);
Reg reg_not(Emit *e, Reg p);
static inline int reg_is(Reg r) { return r.id != 0; }
/* The PTX text of r: "%name", "%name<i>" or "!%name". Scalars' texts live as long as e; the
 * others sit in a ring of EMIT_REG_TEXTS buffers, so print them, do not keep them. */
const char *R(Emit *e, Reg r);
/* "{%arr<first>, ..., %arr<first+count-1>}" of an array handle into buf. */
const char *reg_list(Emit *e, char *buf, size_t n, Reg arr, int first, int count);
/* An emitter's check of a register it was given: r is one of the classes in types (RT_ bits),
 * else an internal error naming fn, the parameter and both classes. Returns 1 when it is. */
int reg_want(Emit *e, Reg r, unsigned types, const char *fn, const char *param);
#define REG_WANT(e, r, types) reg_want((e), (r), (types), __func__, #r)
const char *reg_type_text(unsigned t); /* "f32"; the first class of a set */

/* A fresh label "$stem_<k>". */
const char *new_label(Emit *e, char *buf, size_t n, const char *stem);
/* Header (version, target, smem decl) + register declarations + body; malloc'd. */
char *emit_finish(Emit *e, const char *entry_header, size_t *len);

/* ============================== targets ============================== */

/* One kernel family on one target: how its configs get defaults and are checked, planned and
 * emitted. The entry's parameters and the runtime's binding come from the plan (Plan.params). */
typedef struct Family {
    Kind kind;
    void (*defaults)(Config *c);
    int (*check)(const Config *c, char *err, size_t n);
    int (*plan)(const Config *c, Plan *p, char *err, size_t n);
    int (*emit)(Emit *e); /* the kernel for e->p */
} Family;

typedef struct Target {
    TargetId id;
    const char *name;        /* "sm90a" */
    const char *ptx_target;  /* "sm_90a" */
    const char *ptx_version; /* ".version" operand */
    int sm_major, sm_minor;  /* the GPU it runs on */
    uint32_t smem_limit;     /* dynamic smem per CTA, bytes */
    const Family *families[KIND_COUNT]; /* NULL: the target has no kernel of that kind */
} Target;

const Target *target_get(TargetId id);
/* The family of kind k on target t, or NULL with a sentence in err naming what exists. */
const Family *target_family(const Target *t, Kind k, char *err, size_t n);
enum { COMBINE_MAX_SPLITS = 128 }; /* the splits one combine row reads (4 LSE registers per lane) */
extern const Family combine_family; /* combine.c: the split-KV combine kernel, every target */
extern const Family kv_append_family; /* kv_append.c: new K, V rows into a dense or paged cache, every target */
extern const Target target_sm90a;
extern const Target target_sm100a;
extern const Target target_sm103a; /* sm100/plan.c: target_sm100a's kernels for .target sm_103a */

/* ============================== api.c ============================== */

/* "VERSION+ID": the release and a hash of the generator's sources (build/gen_id.h). Two builds with
 * other kernel code differ here even at one version; the disk cache and AOT bundles key on it. */
const char *fa4gen_build_id(void);

/* config -> plan -> PTX. *ptx is malloc'd (NUL-terminated). */
int fa4gen_generate(const Config *c, Plan *p, char **ptx, size_t *len, char *err, size_t n);
/* The same for a config with a score_mod (c->score_mod != 0): mod_ptx is NVRTC's PTX of its
 * source (score_mod_compile), link is a ScoreModLink (score_mod.h). */
int fa4gen_generate_mod(const Config *c, const char *mod_ptx, int link, Plan *p, char **ptx, size_t *len, char *err,
                        size_t n);

#endif
