/* varlen.c - variable-length batches for the MHA forward (config varlen=1), target-independent.
 *
 * q/k/v/o are packed [total_tokens, heads, depth]; sequence b owns rows [cu_seqlens_q[b],
 * cu_seqlens_q[b+1]) of q and o and [cu_seqlens_k[b], cu_seqlens_k[b+1]) of k and v. The kernel's
 * parameters keep their dense names with varlen meanings (runtime/mha.c binds them):
 *   p_seqlen_q  max_seqlen_q: the m-blocks of the grid (every sequence fits in them)
 *   p_seqlen_k  total k rows: the bound each cu_seqlens_k entry is clamped to
 *   p_batch     sequences
 *   p_total_q   total q rows: the bound each cu_seqlens_q entry is clamped to, and LSE's row count
 * Per tile, once its batch index is known, %seqlen_q and %seqlen_k become that sequence's lengths,
 * so every mask, key range and row bound downstream is per sequence with no other change; the tensor
 * maps see one batch of total rows, and the loads add %vl_q_start / %vl_k_start to their row.
 * The cu_seqlens are device memory the host may not see: each entry is clamped to [0, total] and
 * each end to >= its start, so a bad table gives short (or empty) sequences, never a row outside the
 * tensors. */
#include <stdio.h>

#include "kernel.h"
#include "ops.h"
#include "ops_copy.h"

void varlen_plan_params(Plan *p)
{
    plan_param_scalar(p, SCALAR_CU_SEQLENS_Q, PARAM_U64);
    plan_param_scalar(p, SCALAR_CU_SEQLENS_K, PARAM_U64);
    plan_param_scalar(p, SCALAR_TOTAL_Q, PARAM_U32);
    plan_param_scalar(p, SCALAR_OUT, PARAM_U64);
    plan_param_scalar(p, SCALAR_OUT_STRIDE_S, PARAM_U64);
    plan_param_scalar(p, SCALAR_OUT_STRIDE_H, PARAM_U64);
    plan_note(p, "varlen", "packed [total, heads, depth]; sequence b = rows cu_seqlens[b]..cu_seqlens[b+1] (clamped "
              "to the tensor); LSE [heads_q, total_q]");
    plan_note(p, "varlen o", "64-row blocks inside their sequence: TMA store; the sequence's last partial block: "
              "st.global from registers, row-masked (a box would write the next sequence's rows)");
}

void varlen_prologue(Emit *e)
{
    emit_note(e, "varlen: p_seqlen_q is max_seqlen_q (sizes the m-blocks), p_seqlen_k the packed k rows");
    op_ld_param(e, "u64", reg_b64(e, "cu_q"), "cu_seqlens_q");
    op_ld_param(e, "u64", reg_b64(e, "cu_k"), "cu_seqlens_k");
    op_ld_param(e, "u32", reg_b32(e, "total_q"), "total_q");
    emit(e, "mov.u32 %s, %%seqlen_k;", R(e, reg_b32(e, "total_k")));
    emit_note(e, "varlen: O's base and element strides, for the row-masked stores of a sequence's last block");
    op_ld_param(e, "u64", reg_b64(e, "out"), "out");
    op_ld_param(e, "u64", reg_b64(e, "out_stride_s"), "out_stride_s");
    op_ld_param(e, "u64", reg_b64(e, "out_stride_h"), "out_stride_h");
    emit(e, "mov.u32 %s, 0;", R(e, reg_b32(e, "vl_zero")));
}

/* start, len = the rows [cu[b], cu[b+1]) clamped into [0, total]. */
static void sequence_rows(Emit *e, Reg cu, Reg total, Reg start, Reg len)
{
    Reg a = reg_b64(e, "vl_addr"), end = reg_b32(e, "vl_end");
    emit(e, "mul.wide.u32 %s, %%bidx, 4;", R(e, a));
    emit(e, "add.s64 %s, %s, %s;", R(e, a), R(e, a), R(e, cu));
    op_ld_global(e, REG_NONE, "s32", start, a, 0);
    op_ld_global(e, REG_NONE, "s32", end, a, 4);
    emit(e, "max.s32 %s, %s, 0;", R(e, start), R(e, start));
    emit(e, "min.u32 %s, %s, %s;", R(e, start), R(e, start), R(e, total));
    emit(e, "max.s32 %s, %s, 0;", R(e, end), R(e, end));
    emit(e, "min.u32 %s, %s, %s;", R(e, end), R(e, end), R(e, total));
    emit(e, "max.u32 %s, %s, %s;", R(e, end), R(e, end), R(e, start));
    emit(e, "sub.u32 %s, %s, %s;", R(e, len), R(e, end), R(e, start));
}

void varlen_sequence(Emit *e)
{
    emit_note(e, "varlen: this tile's sequence; %%seqlen_q and %%seqlen_k become its lengths (clamped cu_seqlens)");
    sequence_rows(e, reg_find(e, "cu_q"), reg_find(e, "total_q"), reg_b32(e, "vl_q_start"), reg_find(e, "seqlen_q"));
    sequence_rows(e, reg_find(e, "cu_k"), reg_find(e, "total_k"), reg_b32(e, "vl_k_start"), reg_find(e, "seqlen_k"));
}

void varlen_skip_tile(Emit *e, const char *next_tile)
{
    Reg p = reg_pred(e, "vl_empty");
    emit_note(e, "varlen: an m-block past its sequence's end (grid sized by max_seqlen_q) has nothing to do");
    emit(e, "setp.ge.u32 %s, %%m0, %%seqlen_q;", R(e, p));
    emit(e, "@%s bra %s;", R(e, p), next_tile);
}
