/* varlen.h - variable-length batches and paged KV for the MHA forward (varlen.c): the plan's
 * parameters and the emitters of the per-sequence registers. Below kernel.c (which calls them from
 * its prologue and tile scheduler); varlen.c calls only the plan builders and the op layer. */
#ifndef FA4GEN_VARLEN_H
#define FA4GEN_VARLEN_H

#include "fa4gen.h"

/* varlen=1 (varlen.c): the parameters (called by mha_plan_params), the prologue's registers
 * %cu_q %cu_k (u64) %total_q %total_k %vl_zero (u32; called by mha_prologue), and per tile, inside
 * mha_tile_coords once %bidx is known, %vl_q_start %vl_k_start and %seqlen_q %seqlen_k set to the
 * sequence's rows. varlen_skip_tile branches to next_tile when the tile's m-block lies past its
 * sequence (both roles call it right after mha_tile_coords, so their rings stay in step). */
void varlen_plan_params(Plan *p);
/* page=P (varlen.c): the parameters; with varlen_prologue's %block_table %seqlens_k %max_pages %num_pages and,
 * per tile (varlen_sequence), %seqlen_k = the sequence's kv length and %pg_table its table row.
 * paged_coords: the map coordinates (page, row in page) of logical kv row `row`; an invalid entry gives
 * page = num_pages (past the pool). paged_block_bad: bit i of bad set when page i of kv block j (in
 * min(P, bn)-row boxes) has no valid entry. */
void paged_plan_params(Plan *p);
void paged_coords(Emit *e, Reg row, Reg page, Reg in_row);
void paged_block_bad(Emit *e, Reg j, Reg bad);
void varlen_prologue(Emit *e);
void varlen_sequence(Emit *e);
void varlen_skip_tile(Emit *e, const char *next_tile);

#endif
