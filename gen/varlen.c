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
 * tensors.
 *
 * Paged KV (config page=P): K and V are [num_pages, P, heads_kv, depth] and block_table [batch,
 * max_pages] int32 maps a sequence's logical kv row r to row r % P of page block_table[b][r / P];
 * seqlens_k [batch] int32 gives each sequence's kv length (clamped to max_pages * P, which the runtime
 * passes as p_seqlen_k). The tensor maps run over the page pool: dims (depth, P, heads_kv, num_pages),
 * so a box is addressed by (column, row in page, kv head, page). A kv tile of bn rows is one box when
 * P >= bn (bn and P are powers of two: the tile lies inside one page), else bn / P boxes, one per page.
 * A table entry outside [0, num_pages) (or a page index past max_pages) becomes the coordinate
 * num_pages, one past the pool: TMA reads nothing there and fills the box with zeros, so no byte
 * outside the pool is read, and the consumers mask that page's keys (they read the same entries), so
 * the page contributes nothing to the softmax. */
#include <stdio.h>

#include "varlen.h"
#include "ops.h"
#include "ops_copy.h"

void varlen_plan_params(Plan *p)
{
    plan_param_scalar(p, SCALAR_CU_SEQLENS_Q, PARAM_U64);
    if (!p->cfg.page) plan_param_scalar(p, SCALAR_CU_SEQLENS_K, PARAM_U64); /* paged: seqlens_k instead */
    plan_param_scalar(p, SCALAR_TOTAL_Q, PARAM_U32);
    plan_param_scalar(p, SCALAR_OUT, PARAM_U64);
    plan_param_scalar(p, SCALAR_OUT_STRIDE_S, PARAM_U64);
    plan_param_scalar(p, SCALAR_OUT_STRIDE_H, PARAM_U64);
    plan_note(p, "varlen", "packed [total, heads, depth]; sequence b = rows cu_seqlens[b]..cu_seqlens[b+1] (clamped "
              "to the tensor); LSE [heads_q, total_q]");
    plan_note(p, "varlen o", "O blocks inside their sequence: TMA store; a block past the sequence's end: st.global, "
              "row-masked (a box would write the next sequence's rows)");
}

void paged_plan_params(Plan *p)
{
    int box = p->cfg.page < p->bn ? p->cfg.page : p->bn;
    plan_param_scalar(p, SCALAR_BLOCK_TABLE, PARAM_U64);
    plan_param_scalar(p, SCALAR_SEQLENS_K, PARAM_U64);
    plan_param_scalar(p, SCALAR_MAX_PAGES, PARAM_U32);
    plan_param_scalar(p, SCALAR_NUM_PAGES, PARAM_U32);
    plan_note(p, "paged kv", "page %d rows: K, V [num_pages, %d, heads_kv, depth]; %d TMA box%s of %d rows per kv tile, "
              "the page index the map's 4th coordinate", p->cfg.page, p->cfg.page, p->bn / box, p->bn / box > 1 ? "es" : "",
              box);
    if (p->kv_tail)
        plan_note(p, "paged table", "block_table [batch, max_pages] int32; an entry outside [0, num_pages), or past the "
                  "pages the length uses (never read), loads the coordinate num_pages (zero fill); keys masked");
    else
        plan_note(p, "paged table", "block_table [batch, max_pages] int32; an entry outside [0, num_pages) loads the "
                  "coordinate num_pages (zero fill, nothing read) and its keys are masked");
}

void varlen_prologue(Emit *e)
{
    const Plan *p = e->p;
    if (p->cfg.varlen) {
        emit_note(e, "varlen: p_seqlen_q is max_seqlen_q (sizes the m-blocks), p_total_q the packed q rows");
        op_ld_param(e, "u64", reg_b64(e, "cu_q"), "cu_seqlens_q");
        if (!p->cfg.page) op_ld_param(e, "u64", reg_b64(e, "cu_k"), "cu_seqlens_k");
        op_ld_param(e, "u32", reg_b32(e, "total_q"), "total_q");
    }
    if (p->cfg.page) {
        emit_note(e, "paged kv: p_seqlen_k is max_pages x page, every sequence's kv bound");
        op_ld_param(e, "u64", reg_b64(e, "block_table"), "block_table");
        op_ld_param(e, "u64", reg_b64(e, "seqlens_k"), "seqlens_k");
        op_ld_param(e, "u32", reg_b32(e, "max_pages"), "max_pages");
        op_ld_param(e, "u32", reg_b32(e, "num_pages"), "num_pages");
    } else {
        emit_note(e, "varlen: p_seqlen_k is the packed k rows");
    }
    emit(e, "mov.u32 %s, %%seqlen_k;", R(e, reg_b32(e, "total_k")));
    if (!p->cfg.varlen) return;
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

static int log2i(int x);

void varlen_sequence(Emit *e)
{
    const Plan *p = e->p;
    if (p->cfg.varlen) {
        emit_note(e, "varlen: this tile's sequence; %%seqlen_q becomes its length (clamped cu_seqlens_q)");
        sequence_rows(e, reg_find(e, "cu_q"), reg_find(e, "total_q"), reg_b32(e, "vl_q_start"),
                      reg_find(e, "seqlen_q"));
    }
    if (!p->cfg.page) {
        emit_note(e, "varlen: %%seqlen_k becomes the sequence's kv length (clamped cu_seqlens_k)");
        sequence_rows(e, reg_find(e, "cu_k"), reg_find(e, "total_k"), reg_b32(e, "vl_k_start"),
                      reg_find(e, "seqlen_k"));
        return;
    }
    Reg a = reg_b64(e, "vl_addr"), len = reg_find(e, "seqlen_k");
    emit_note(e, "paged kv: %%seqlen_k = seqlens_k[b] clamped to [0, max_pages x page]; the sequence's table row");
    emit(e, "mul.wide.u32 %s, %%bidx, 4;", R(e, a));
    emit(e, "add.s64 %s, %s, %%seqlens_k;", R(e, a), R(e, a));
    op_ld_global(e, REG_NONE, "s32", len, a, 0);
    emit(e, "max.s32 %s, %s, 0;", R(e, len), R(e, len));
    emit(e, "min.u32 %s, %s, %%total_k;", R(e, len), R(e, len));
    Reg t = reg_b64(e, "pg_table");
    emit(e, "mul.wide.u32 %s, %%bidx, %%max_pages;", R(e, t));
    emit(e, "shl.b64 %s, %s, 2;", R(e, t), R(e, t));
    emit(e, "add.s64 %s, %s, %%block_table;", R(e, t), R(e, t));
    if (!p->kv_tail) return;
    Reg used = reg_b32(e, "pg_used");
    emit_note(e, "plan kv tail: the pages the length uses, ceil(seqlen_k / %d) (<= max_pages: the length is clamped); "
              "entries past them are never read", p->cfg.page);
    emit(e, "add.u32 %s, %s, %d;", R(e, used), R(e, len), p->cfg.page - 1);
    emit(e, "shr.u32 %s, %s, %d;", R(e, used), R(e, used), log2i(p->cfg.page));
}

static int log2i(int x)
{
    int l = 0;
    while ((1 << l) < x) l++;
    return l;
}

/* page = the table entry for logical kv row `row` of this tile's sequence, or num_pages when the entry
 * (or the page index) is out of range; ok = it was in range. The page index's bound: max_pages, or (plan
 * kv tail) the pages the sequence's length uses, so that a tail block's boxes past them read nothing. */
static void page_entry(Emit *e, Reg row, Reg page, Reg ok)
{
    const Plan *p = e->p;
    Reg pidx = reg_b32(e, "pg_idx"), a = reg_b64(e, "pg_addr");
    emit(e, "shr.u32 %s, %s, %d;", R(e, pidx), R(e, row), log2i(p->cfg.page));
    emit(e, "setp.lt.u32 %s, %s, %s;", R(e, ok), R(e, pidx), p->kv_tail ? "%pg_used" : "%max_pages");
    emit(e, "mul.wide.u32 %s, %s, 4;", R(e, a), R(e, pidx));
    emit(e, "add.s64 %s, %s, %%pg_table;", R(e, a), R(e, a));
    emit(e, "mov.u32 %s, -1;", R(e, page));
    op_ld_global(e, ok, "s32", page, a, 0);
    emit(e, "setp.lt.and.u32 %s, %s, %%num_pages, %s;", R(e, ok), R(e, page), R(e, ok)); /* < 0 is huge unsigned */
    emit(e, "selp.b32 %s, %s, %%num_pages, %s;", R(e, page), R(e, page), R(e, ok));
}

void paged_coords(Emit *e, Reg row, Reg page, Reg in_row)
{
    Reg ok = reg_pred(e, "pg_ok");
    page_entry(e, row, page, ok);
    emit(e, "and.b32 %s, %s, %d;", R(e, in_row), R(e, row), e->p->cfg.page - 1);
}

void paged_block_bad(Emit *e, Reg j, Reg bad)
{
    const Plan *p = e->p;
    int box = p->cfg.page < p->bn ? p->cfg.page : p->bn;
    Reg row = reg_b32(e, "pg_row"), page = reg_b32(e, "pg_page"), ok = reg_pred(e, "pg_ok");
    emit_note(e, "paged kv: bit i = page %d of kv block j has no valid table entry (its keys are masked)", box);
    emit(e, "mov.u32 %s, 0;", R(e, bad));
    for (int i = 0; i < p->bn / box; i++) {
        emit(e, "mad.lo.u32 %s, %s, %d, %d;", R(e, row), R(e, j), p->bn, i * box);
        page_entry(e, row, page, ok);
        emit(e, "@!%s or.b32 %s, %s, %d;", R(e, ok), R(e, bad), R(e, bad), 1 << i);
    }
}

void varlen_skip_tile(Emit *e, const char *next_tile)
{
    Reg p = reg_pred(e, "vl_empty");
    emit_note(e, "varlen: an m-block past its sequence's end (grid sized by max_seqlen_q) has nothing to do");
    emit(e, "setp.ge.u32 %s, %%m0, %%seqlen_q;", R(e, p));
    emit(e, "@%s bra %s;", R(e, p), next_tile);
}
