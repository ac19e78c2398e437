/* sm90/mha90.h - the pieces the sm_90a MHA forward kernel's files share: the skeleton and the consumer
 * warpgroups (sm90/mha.c), the producer and the scrub warp (sm90/mha_producer.c), the epilogues
 * (sm90/mha_epilogue.c). Emitter stage, private to those three files. */
#ifndef FA4GEN_MHA90_H
#define FA4GEN_MHA90_H

#include "../kernel.h"
#include "plan90.h"

enum { NAME = 32, F32_BYTES = 4 };


/* The tile's coordinates and key range; with the GQA group packed (plan rows) a tile holds a kv
 * head's whole group. */
static inline void tile_coords(Emit *e)
{
    if (sm90_of(e->p)->packed) mha_tile_coords_packed(e);
    else mha_tile_coords(e);
}

/* The sequence position (relative to m0) of accumulator row half h of this thread: the row
 * itself, or row % seq_rows when the group is packed (plan rows). */
static inline const char *row_seq(Emit *e, int h)
{
    return R(e, reg_find(e, sm90_of(e->p)->packed ? "cs_seq%d" : "cs_row%d", h));
}

/* The wgmma shapes and accumulator fragment the consumers are written for: the plan's. */
static inline Sm90Frag sm90_frag(const Plan *p) { return sm90_of(p)->frag; }

enum { MAX_HALVES = 2 };

/* S register of row half h (0: row l/4, 1: row l/4 + 8), column pair q, element x. */
static inline int s_index(int q, int h, int x) { return 2 * MAX_HALVES * q + 2 * h + x; }

/* plan note dynamic tiles: wait until Q slot `slot`'s tile word for phase `parity` is written (bar_tile), then read
 * it into dst; every consumer thread does, from the bases %cs_tile_bar0 and %cs_tile_ids (sm90/mha.c). */
void mha90_dyn_tile_read(Emit *e, Reg dst, Reg slot, Reg parity);

/* The producer warpgroup and the scrub warp (plan kv tail) (sm90/mha_producer.c). */
void mha90_producer(Emit *e);
void mha90_scrub(Emit *e);
/* The consumers' epilogues (sm90/mha_epilogue.c): O / l through smem and a TMA store with the LSE
 * (varlen rows past a sequence straight from the accumulators); split=1: the partial outputs; cluster=N:
 * the cluster's merge in smem. */
void mha90_epilogue(Emit *e);
void mha90_epilogue_split(Emit *e);
void mha90_epilogue_cluster(Emit *e);
/* config timeline=1 (sm90/mha_timeline.c, plan note timeline; nothing is emitted without it). mha90_tl_entry: the
 * entry clock (%tl_entry), first in the kernel; mha90_tl_prologue: %tl_base and the CTA's id word (%tl_id), after
 * the parameters. mha90_tl_record: %tl_rec = this
 * tile's record (p_timeline + %tile x slots x 8); mha90_tl_stamp: clock64 (globaltimer for the TL_GT_ slots)
 * into the record's slot where guard holds (REG_NONE: always); mha90_tl_store: a value there. */
void mha90_tl_entry(Emit *e);
void mha90_tl_prologue(Emit *e);
void mha90_tl_record(Emit *e);
void mha90_tl_stamp(Emit *e, Reg guard, MhaTimelineSlot slot);
void mha90_tl_mark(Emit *e, const char *name);
void mha90_tl_prologue_store(Emit *e);
void mha90_tl_store(Emit *e, Reg guard, MhaTimelineSlot slot, Reg v);

#endif
