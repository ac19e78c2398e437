/* kernel.h - pieces every attention kernel shares, whatever its target: the
 * file header (from templates/header.ptx), the prologue that names
 * thread/lane/smem registers, and the tile scheduler with the key-range
 * arithmetic of the masks. Emitter stage: it reads the plan pieces of
 * mha_plan.h (the parameter ABI, the mask's bounds) and the varlen/paged
 * emitters of varlen.h, which it includes for its callers; neither calls back. */
#ifndef FA4GEN_KERNEL_H
#define FA4GEN_KERNEL_H

#include "fa4gen.h"
#include "mha_plan.h"
#include "varlen.h"

/* Substitute ${name} holes of a template from a NULL-terminated key/value list. */
void tpl_fill(Buf *out, const char *tpl, const char *const *kv);

/* File header + `.visible .entry` with the plan's parameters (Plan.params) and launch bounds;
 * a score_mod's module-level text (score_mod.h) between them when mod is not NULL. */
struct ScoreMod;
void kernel_entry_header(Buf *out, const Plan *p, const struct ScoreMod *mod);

/* Every kernel's first lines: %thread %warp %lane %wg (u32) and %smem, the dynamic smem base
 * aligned to the plan's smem_align. */
void kernel_coords(Emit *e);
/* Every parameter of the plan's list into a register of its name: a tensor map's generic address,
 * else the scalar loaded (the families whose prologue reads its list whole). */
void kernel_params(Emit *e);
/* Sparse MLA's tile (every target): %tok, the query token, and %h0, the first of its `heads` query heads,
 * from %ctaid.x (pair 0) or %clusterid.x with %cta_rank, %is_lead, %lead_rank (pair 1: CTA r takes heads
 * +heads r); %nblk = topk / block (a power of two). */
void mla_tile_coords(Emit *e, int heads, int pair, int block);

/* Registers defined by mha_prologue():
 *   %thread %warp %lane %wg           thread coordinates (u32)
 *   %smem                          aligned dynamic smem base (u32, shared::cta address)
 *   %tmap_<name>                   generic address of each tensor map parameter (u64)
 *   %lse_ptr (u64) %seqlen_q %seqlen_k %heads_q %batch (u32) %scale_log2 %o_scale (f32)
 *   %sink_ptr (u64)                with sink=1
 *   %mod_scale (f32) %mod_aux (u64) with a score_mod; %scale_log2 is then log2(e): the scores
 *                                  the softmax sees are already scaled by the mod's call
 *   %num_m_blocks %heads_batch %num_tiles %grid_ctas (u32)
 *   %num_splits (u32) %o_accum %lse_accum (u64) with split=1; %num_tiles then counts tiles x splits */
void mha_prologue(Emit *e);
/* split=1: %num_tiles *= %num_splits (after a family recomputes %num_tiles); nothing otherwise. */
void mha_split_tiles(Emit *e);
/* split=1: the addresses of row (head, seq) of this tile's split in the partial outputs:
 * lse_addr = &lse_accum[split][bidx][head][seq], o_addr = &o_accum[split][bidx][head][seq][0]; varlen:
 * [split][head][vl_q_start + seq], the varlen LSE order (the combine sees one batch of total_q rows). */
void mha_split_row_addrs(Emit *e, Reg head, Reg seq, Reg lse_addr, Reg o_addr);
/* split=1 run with num_splits 1: the final O row's address in out (the output dtype, caller's strides)
 * and the final LSE store (guarded, skipped when lse_ptr is 0); both read %bidx, or %vl_q_start (varlen). */
void mha_split_out_addr(Emit *e, Reg head, Reg seq, int out_bytes, Reg o_addr);
/* plan pdl early kv, both targets: pre = this tile's leading kv blocks in [n_begin, n_end) that end at
 * or before row seqlen_k - seqlen_q (rows the kernel before may not write), at most the plan's
 * pdl_early_kv; old is scratch. */
void mha_early_kv_count(Emit *e, Reg pre, Reg old);
/* plan kv tail: tail = this tile's kv range ends with the sequence's tail block (block n_end - 1 runs past
 * seqlen_k) and is not empty; t is scratch. */
void mha_kv_tail(Emit *e, Reg tail, Reg t);
/* plan kv tail, the scrub warp on one tail block whose V stage (chunks of chunk_bytes) is at vstage: every
 * lane zeroes rows [seqlen_k - (n_end - 1) bn, bn) of each chunk, fences its stores for the async proxy
 * (the MMA reads V), the warp meets at named barrier bar (its stores ordered before lane 0's release),
 * and lane 0 arrives on full, the stage's barrier the MMA waits on. */
void mha_scrub_tail(Emit *e, Reg vstage, int chunks, uint32_t chunk_bytes, int bar, Reg full);
/* One tensor map's chunks of a K or V block: boxes at columns col0 + c x chunk_elems, c < chunks. */
typedef struct { Reg map; int col0, chunks; } MhaKvMap;
/* plan pdl prefetch kv, both targets: prefetch into L2 the K/V boxes of the blocks j + first,
 * j + first + step, .. that lie in [n_begin, n_end), at most pdl_prefetch_kv blocks, at 4-D
 * coordinates (col, block x bn, kv_head, bidx) of each map; paged, (col, row in page, kv_head, page)
 * of each box, its table entry read here. */
void mha_prefetch_kv(Emit *e, Reg j, int first, int step, const MhaKvMap *maps, int n_maps);
void mha_split_out_lse(Emit *e, Reg guard, Reg head, Reg seq, Reg lse);

/* For the tile in %tile, defines (u32/s32):
 *   %m_block %head %bidx %kv_head %m0          (heaviest m-blocks first)
 *   %n_begin %n_end                            kv blocks that any row of the tile sees
 *   %full_lo %full_hi                          blocks in [full_lo, full_hi) need no mask
 *   %kv_off                                    seqlen_k - seqlen_q (bottom-right alignment)
 *   %split                                     split=1: this CTA's split; [n_begin, n_end) is then
 *                                              cut to the split's kv blocks ("this CTA's kv block
 *                                              range", the one place that intersects them) */
void mha_tile_coords(Emit *e);
/* The registers above that mha_tile_coords defines for the kernel (unsplit, unpacked); the others it writes are
 * its scratch. A kernel that computes the next tile's coordinates ahead saves and restores exactly these. */
enum { MHA_TILE_COORD_REGS = 10 };
extern const char *const mha_tile_coord_regs[MHA_TILE_COORD_REGS];

/* A persistent CTA's walk over the tiles (plan note tile order, Plan.tile_walk): mha_tile_first sets %tile to the
 * CTA's first and %tile_group to the heads of a tile group (once: it depends on the launch, not the tile),
 * mha_tile_peek writes the next tile to dst, mha_tile_next moves %tile there. TILE_HEAD_MAJOR and TILE_FIT walk
 * waves of %grid_ctas tiles in alternating direction (%tile_step), TILE_L2_GROUPS a plain stride. */
void mha_tile_first(Emit *e);
void mha_tile_peek(Emit *e, const char *dst);
void mha_tile_next(Emit *e);

/* mha_tile_coords for kernels that pack a kv head's `group` query heads into
 * one tile (rows_per_cta counts sequence positions): tiles are (m-block, kv
 * head, batch), %head is the tile's first query head, and %num_tiles is
 * recomputed as num_m_blocks x heads_q / group x batch. Also defines
 * %heads_kv and %hkv_batch. */
void mha_tile_coords_packed(Emit *e);

#endif
