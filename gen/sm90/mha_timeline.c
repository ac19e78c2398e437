/* sm90/mha_timeline.c - config timeline=1 (debug) of the sm_90a MHA forward: the stamps the kernel's roles write
 * at each tile's phase boundaries (gen/fa4gen.h MhaTimelineSlot, plan note timeline). Emitter stage, below the
 * consumers (sm90/mha.c), the producer and the epilogues, which call it; without the word it emits nothing, so
 * every other kernel's PTX is unchanged. */
#include <stdio.h>

#include "../kernel.h"
#include "../ops.h"
#include "../ops_copy.h"
#include "mha90.h"

/* At the kernel's entry: its clock (%tl_entry); after the prologue: the record array (%tl_base) and
 * this CTA's id word (%tl_id = smid << 32 | ctaid). */
void mha90_tl_entry(Emit *e)
{
    if (!e->p->cfg.timeline) return;
    emit_section(e, "timeline (debug, plan note timeline): the CTA's entry clock");
    op_read_clock64(e, reg_b64(e, "tl_entry"));
}

/* The producer thread's clock at a prologue point (TL_P_WAITED, TL_P_SYNCED) into a register, stored with TL_ENTRY
 * at each tile (mha90_tl_prologue_store). */
void mha90_tl_mark(Emit *e, const char *name)
{
    if (!e->p->cfg.timeline) return;
    op_read_clock64(e, reg_b64(e, "%s", name));
}

void mha90_tl_prologue_store(Emit *e)
{
    mha90_tl_store(e, REG_NONE, TL_ENTRY, reg_find(e, "tl_entry"));
    mha90_tl_store(e, REG_NONE, TL_P_WAITED, reg_find(e, "tl_waited"));
    mha90_tl_store(e, REG_NONE, TL_P_SYNCED, reg_find(e, "tl_synced"));
}

void mha90_tl_prologue(Emit *e)
{
    if (!e->p->cfg.timeline) return;
    Reg cta = reg_b32(e, "tl_cta"), sm = reg_b32(e, "tl_smid");
    emit_note(e, "timeline: the records, and this CTA's id word (smid << 32 | ctaid)");
    op_ld_param(e, "u64", reg_b64(e, "tl_base"), scalar_name[SCALAR_TIMELINE]);
    emit(e, "mov.u32 %s, %%ctaid.x;", R(e, cta));
    op_read_smid(e, sm);
    emit(e, "mov.b64 %s, {%s, %s};", R(e, reg_b64(e, "tl_id")), R(e, cta), R(e, sm));
}

void mha90_tl_record(Emit *e)
{
    if (!e->p->cfg.timeline) return;
    Reg w = reg_b64(e, "tl_w");
    op_cvt(e, "u64.u32", w, reg_find(e, "tile"));
    emit(e, "mad.lo.u64 %s, %s, %d, %%tl_base;", R(e, reg_b64(e, "tl_rec")), R(e, w), MHA_TIMELINE_SLOTS * 8);
}

void mha90_tl_store(Emit *e, Reg guard, MhaTimelineSlot slot, Reg v)
{
    if (!e->p->cfg.timeline) return;
    op_st_global_b64_at(e, guard, reg_find(e, "tl_rec"), (uint32_t)slot * 8, v);
}

void mha90_tl_stamp(Emit *e, Reg guard, MhaTimelineSlot slot)
{
    if (!e->p->cfg.timeline) return;
    Reg t = reg_b64(e, "tl_t");
    emit_note(e, "timeline: slot %d", (int)slot);
    if (slot == TL_GT_C_TILE || slot == TL_GT_C_STORED) op_read_globaltimer(e, t);
    else op_read_clock64(e, t);
    mha90_tl_store(e, guard, slot, t);
}
