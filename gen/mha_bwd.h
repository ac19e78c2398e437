/* mha_bwd.h - the attention backward's shared contract (issue 29): the three kinds, the workspace the
 * runtime sizes and the kernels index, and the dQ accumulator's block layout that the main kernel writes
 * and mha-bwd-dq reads. docs/kernels/mha-bwd.md has the design.
 *
 *   mha-bwd-pre  (mha_bwd.c, every target): D = rowsum(dO * O) and nl2 = -LSE log2 e per query row of the
 *                padded workspace (D = 0, nl2 = -inf past a sequence's end), the dQ accumulator zeroed;
 *                sink=1: the LSE includes the sink and one dsink partial per CTA.
 *   mha-bwd      (sm90/mha_bwd.c): the main kernel, one CTA per kv block.
 *   mha-bwd-dq   (mha_bwd.c): dQ = softmax_scale x the accumulator; sink=1: dsink = the partials' sum.
 *
 * Workspace, one buffer (every part 16-byte aligned), all f32:
 *   dq_accum   [bws, heads_q, q_rows, depth]   blocks of bm rows, each in the layout below
 *   dpsum (D)  [bws, heads_q, q_rows]
 *   nlse2      [bws, heads_q, q_rows]
 *   sink_part  [batch, heads_q, m_blocks]      sink=1 only: -sum over the CTA's rows of p_sink D
 *   dq_sem     [bws, heads_q, q_rows / bm]     u32, deterministic=1 only: the dQ block's turn counter (zeroed
 *                                              by mha-bwd-pre; block of workspace row r: r / bm)
 * bws = batch, q_rows = m_blocks x bm, m_blocks = ceil(seqlen_q / bm) (dense); varlen: bws = 1,
 * q_rows = round_up(total_q + batch x bm, bm), m_blocks = ceil(max_seqlen_q / bm), and sequence b's rows
 * start at the padded row (cu_seqlens_q[b] + b bm) / bm x bm (FlashAttention-3's padding: each sequence
 * owns whole blocks).
 *
 * dQ accumulator block (bm x depth f32): the main kernel's consumers split it into tiles of 64 rows x
 * dq_n columns (bwd_dq_split); warpgroup w owns tile (w % tiles_m, w / tiles_m) and stores its wgmma
 * accumulator as float4 [w][reg / 4][thread]: float index ((w x dq_n / 8 + j) x 128 + t) x 4 + k holds
 * register r = 4 j + k of thread t, i.e. row 64 tm + 16 (t / 32) + (t % 32) / 4 + 8 ((r >> 1) & 1),
 * column tn dq_n + 8 (r >> 2) + 2 (t % 4) + (r & 1) (PTX ISA, wgmma m64nNk16 accumulator fragment). */
#ifndef FA4GEN_MHA_BWD_H
#define FA4GEN_MHA_BWD_H

#include <stdint.h>

#include "fa4gen.h"

enum { BWD_WG = 128, BWD_MMA_M = 64, BWD_F32 = 4, BWD_ALIGN = 16 };

/* The main kernel's consumer warpgroups: bn / 64 (each owns 64 keys: dK, dV of depth <= 128 fit its
 * registers), or 2 for depth > 128 (each owns half the depth of dK, dV and dQ: sm90/plan_bwd.c). */
static inline int bwd_consumers(int bn, int depth) { return depth > 128 ? 2 : bn / 64; }
/* The dQ block's split between the main kernel's consumers (bwd_consumers): tiles_m x tiles_n tiles of
 * 64 rows x *dq_n columns, tiles_m = bm / 64. 0, or -1 when bm, bn and depth do not split. */
int bwd_dq_split(int bm, int bn, int depth, int *tiles_m, int *tiles_n, int *dq_n);

/* The dQ block's float index of (row r, column c) is bwd_dq_row_part(r) + bwd_dq_col_part(c) (the layout above,
 * split so a kernel that owns a row or a column of the block adds a constant per element); the _reg forms compute
 * a part from a register (b32) for e->p's bm, bn and depth. */
uint32_t bwd_dq_row_part(int bm, int bn, int depth, int r);
uint32_t bwd_dq_col_part(int bm, int bn, int depth, int c);
void bwd_dq_row_part_reg(Emit *e, Reg dst, Reg r);
void bwd_dq_col_part_reg(Emit *e, Reg dst, Reg c);

/* The workspace of a call (sizes in bytes, offsets from its base). */
typedef struct BwdWorkspace {
    uint64_t q_rows;      /* padded query rows per (bws, head) */
    uint64_t m_blocks;    /* m-blocks per sequence (the pre and dq grids) */
    uint64_t dq_accum, dpsum, nlse2, sink_part, dq_sem; /* offsets; dpsum and nlse2 into dq's memory when stats_in_dq */
    uint64_t bytes;       /* the whole */
    uint64_t stats_bytes; /* D + nl2 */
    int stats_in_dq;
} BwdWorkspace;
/* varlen: seqlen_q is total_q and max_seqlen_q the longest sequence; dense: max_seqlen_q = seqlen_q. stats_in_dq:
 * D and nl2 live at the start of the caller's dq (the runtime decides when dq can hold them), not in the workspace. */
BwdWorkspace bwd_workspace(int varlen, int batch, int heads_q, int seqlen_q, int max_seqlen_q, int depth, int bm,
                           int sink, int stats_in_dq, int deterministic);

/* Tail split (sm90a, config tail_split=1; dense, depth <= 128, deterministic=0): the main kernel's grid is tiles of
 * equal work, and its last wave is partly empty. The runtime may split the last `tiles` tiles (from tile `first` on)
 * into `parts` CTAs each, launched after the whole tiles: CTA first + s x parts + i runs iterations [i x iters /
 * parts, (i + 1) x iters / parts) of tile first + s. Parts 0..parts-2 add their f32 dK, dV into the tile's slot and
 * release the slot's counter once per consumer; the last part (launched after them) waits for them, adds the sums
 * into its own and stores dK, dV as a whole tile does. The area (`bytes`, zeroed by mha-bwd-pre) is `tiles` slots of
 * 16 bytes (the u32 counter) + bwd_tail_slot_bytes; it lives in the caller's dq after D and nl2 (stats_in_dq), which
 * only the last kernel writes, so the split costs no workspace. */
enum { BWD_TAIL_MAX_PARTS = 8 };
static inline uint32_t bwd_tail_slot_bytes(int bn, int depth) { return (uint32_t)(bn * depth) * 2u * BWD_F32; }
typedef struct BwdTail {
    uint32_t first, parts, tiles; /* parts 0: no split */
    uint64_t grid, bytes;         /* the grid's CTAs; the area's bytes */
} BwdTail;
/* The split of a grid of `tiles` equal tiles of `iters` iterations each over `slots` resident CTAs (SMs x CTAs
 * per SM), or none (parts 0) when it does not pay: list scheduling of equal CTAs, a CTA costing its iterations +
 * BWD_TAIL_CTA_ITERS (prologue, pipeline fill, epilogue) and a part BWD_TAIL_SUM_ITERS more (its partials' adds
 * or loads); the split is taken when it shortens the makespan by BWD_TAIL_MIN_GAIN_PERMILLE and tiles run at
 * least BWD_TAIL_MIN_ITERS iterations (short tiles: the overheads are the model's least known part). */
/* The overheads, in iterations, are the timing model's (H200 table, d128 bm 64: a whole CTA of k iterations is
 * 3103 k + 8624 cycles, so 2.8 iterations more; a tile of 32 iterations in 2 parts on 2 SMs ends 8.9 k cycles after
 * a whole 16-iteration CTA would: the other part's adds and this part's loads, 2.7 iterations). */
enum { BWD_TAIL_CTA_ITERS = 3, BWD_TAIL_SUM_ITERS = 3, BWD_TAIL_MIN_GAIN_PERMILLE = 10, BWD_TAIL_MIN_ITERS = 32 };
BwdTail bwd_tail_pick(uint64_t tiles, int slots, int iters, int bn, int depth);

/* The config of the pre and dq kernels that serve a main kernel's plan (same target, dtype, depth, bm,
 * bn, varlen; sink as given; the pre kernel also deterministic and tail_split, as it zeroes their counters). */
void bwd_aux_config(const Config *main_cfg, Kind kind, int sink, Config *out);

/* ---- the main kernels' tile, every target (mha_bwd.c): one CTA per (kv block, kv head, batch) ---- */
/* Defines %bidx %kvh %n0 (the tile's first key) %q_start %k_start %b_map (the maps' batch coordinate) %pad (the
 * sequence's first padded workspace row) %kv_off = seqlen_k - seqlen_q, the m-blocks [m_begin, m_end) that see a
 * key of the tile, [full_lo, full_hi) that need no mask, %nm = m_end - m_begin and %iters = group x nm; reads the
 * kernel's parameters (kernel_params). A tile past its sequence's keys (varlen) branches to $exit. */
void bwd_tile_coords(Emit *e);
/* Iteration itr -> m-block m and query head hq (REG_NONE: not wanted): it = g x nm + (m - m_begin). */
void bwd_iter_coords(Emit *e, Reg itr, Reg m, Reg hq);
/* itr = the first iteration of this CTA: 0, or with tail_split=1 %it0 (its part's first). */
void bwd_iter_start(Emit *e, Reg itr);
/* ws (u64) = the workspace row of (hq, m)'s first query. */
void bwd_ws_row(Emit *e, Reg ws, Reg m, Reg hq);
/* The top of a load loop's iteration; r: pr, itr, m, hq, ws, row, par, phase (gen/mha_bwd.c). */
void bwd_load_iter_top(Emit *e, char *l_loop, char *l_done, size_t n, const Reg *r);

/* deterministic=1 (docs/kernels/mha-bwd.md, "Deterministic dQ"): the CTAs that visit a dQ block add into it in
 * the order of their kv blocks. The kv blocks that see m-block m are one run [n_first(m), n_last(m)] (the mask's
 * key range of a query block is an interval), so the CTA of kv block n has rank n - n_first(m) among them; it
 * waits until the block's counter reaches rank x arrivals (arrivals: the increments one CTA makes, one per
 * adding group of threads), adds, makes the adds visible and increments. A CTA waits only for CTAs of lower
 * kv blocks of the same (batch, kv head), i.e. of lower linear block index: launched before it. */
/* The turn spin's nanosleep, doubling from the first to the largest, both targets (a waiting CTA's lower kv block
 * needs about a microsecond per m-block, so the sleep stays well under that). */
enum { BWD_DET_SLEEP_NS = 32, BWD_DET_SLEEP_MAX_NS = 256 };
/* addr (u64) = the counter of the dQ block whose first workspace row is ws_row (u64): dq_sem + 4 (ws_row / bm). */
void bwd_det_counter(Emit *e, Reg addr, Reg ws_row);
/* Spin (ld.acquire.gpu, nanosleep BWD_DET_SLEEP_NS doubling up to BWD_DET_SLEEP_MAX_NS) until the counter at addr
 * reaches the rank of this CTA's kv block among m-block m's x arrivals. Needs bwd_tile_coords' registers. */
void bwd_det_wait_turn(Emit *e, Reg addr, Reg m, int arrivals);
/* Spin until the u32 at addr (ld.acquire.gpu) reaches want, with nanosleep BWD_DET_SLEEP_NS doubling up to
 * BWD_DET_SLEEP_MAX_NS; r: the caller's v, ns (b32) and go (pred). Ends at l_go (n bytes): a label the caller
 * made, or, when l_go is "", one made here named <stem>_go (the loop's is <stem>_spin). */
void bwd_spin_until(Emit *e, Reg addr, Reg want, const Reg *r, const char *stem, char *l_go, size_t n);
/* The turn of a group of BWD_WG threads that adds with red.global behind its named barrier (the id bar, or the
 * register bar_reg where the id depends on the warpgroup; REG_NONE: bar): bwd_det_turn_open computes the counter
 * sem of the block at ws_row, its lead thread waits for the turn and the group syncs; after the adds
 * bwd_det_turn_close syncs the group (every add issued) and the lead releases +1. */
void bwd_det_turn_open(Emit *e, Reg sem, Reg ws_row, Reg lead, Reg m, int arrivals, int bar, Reg bar_reg);
void bwd_det_turn_close(Emit *e, Reg sem, Reg lead, int bar, Reg bar_reg);

/* The load role's plan entries, the same on both targets (each plan fills one from its own fields). */
typedef struct BwdLoads {
    uint32_t off_k, off_v, kv_chunk_bytes;                /* K, V tiles, loaded once */
    uint32_t off_q, off_do, q_chunk_bytes, q_stage_bytes; /* Q and dO rings */
    uint32_t off_nl2, off_dpsum, vec_stage_bytes;         /* nl2 and D rings (bulk copies) */
    uint32_t bar_kv_full, bar_q_full, bar_q_empty, bar_do_full, bar_do_empty;
    uint32_t tx_kv, tx_q, tx_do;
} BwdLoads;
/* The BwdLoads of a target's plan s (both name these entries alike). */
#define BWD_LOADS_OF(s)                                                                                        \
    ((BwdLoads){(s)->off_k, (s)->off_v, (s)->kv_chunk_bytes, (s)->off_q, (s)->off_do, (s)->q_chunk_bytes,     \
                (s)->q_stage_bytes, (s)->off_nl2, (s)->off_dpsum, (s)->vec_stage_bytes, (s)->bar_kv_full,     \
                (s)->bar_q_full, (s)->bar_q_empty, (s)->bar_do_full, (s)->bar_do_empty, (s)->tx_kv, (s)->tx_q, \
                (s)->tx_do})
/* The load role (one thread): K and V, then per iteration a Q + nl2 and a dO + D ring slot. The section
 * titled `section` opens it; lane_guard: lanes other than 0 of the warp leave first. Ends at $exit. */
void bwd_emit_loads(Emit *e, const BwdLoads *l, const char *section, int lane_guard);

extern const Family mha_bwd_pre_family;
extern const Family mha_bwd_dq_family;

#endif
