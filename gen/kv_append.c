/* kv_append.c - the KV-cache append kernel (kind kv-append), one family for both targets: plain SIMT PTX, a
 * strided byte copy (no tensor cores, no TMA: a decode step appends a few rows, and the attention that follows is
 * what takes time).
 *
 * Input: the new rows k [batch, s_new, heads_kv, qk] and v [batch, s_new, heads_kv, ov] at their element strides;
 * the cache, a pool of pages [num_pages, page_rows, heads_kv, depth] at the caches' element strides (page, row,
 * head), read through a table: block_table [batch, max_pages] int32 for a paged cache, or a dense cache's rows
 * [cache_batch, s_max, ...] as pages of page_rows = s_max rows with max_pages = 1 and the table cache_batch_idx
 * [batch] (or none: sequence b is row b). Lengths: cache_seqlens [batch] int32, or (pointer 0) seqlen_base for
 * every sequence.
 *
 * Per new token i of sequence b and kv head h: position pos = cache_seqlens[b] + i (64-bit: never wraps), page
 * entry pos / page_rows, row in the page pos % page_rows. The K and V rows are written when 0 <= pos < max_pages x
 * page_rows and the entry names a page in [0, num_pages) (no table: page b); otherwise that token is not written,
 * whatever the bits (negative, past the cache, a table entry outside the pool). With seqlens_out set, the warp of
 * (b, token 0, head 0) writes seqlens_out[b] = cache_seqlens[b] + s_new (saturated at 2^31 - 1, never wrapped) for
 * the attention that follows to read as its kv lengths.
 *
 * One warp per (token, kv head) row pair (plan: rows per CTA = warps). K's and V's rows are cut into 16-byte
 * chunks, K's first; lane l copies chunks l, l + 32, ...: every load of the row pair issues before the first
 * store, so the copy costs one memory latency. Launch: griddepcontrol.launch_dependents at once (plan pdl), so an
 * attention kernel launched as a programmatic dependent may start its prologue; its griddepcontrol.wait still
 * waits for this grid.
 */
#include <stdio.h>
#include <string.h>

#include "kernel.h"
#include "ops.h"
#include "ops_bwd.h"
#include "ops_copy.h"

enum { KVA_WARPS = 4, KVA_CHUNK = 16 /* bytes: one v4.b32 */, NAME = 32 };

static void kva_defaults(Config *c)
{
    if (!c->swizzle) c->swizzle = 128; /* unused; config_check wants a valid value */
}

static int kva_check(const Config *c, char *err, size_t n)
{
    if (c->qk_depth < 16 || c->ov_depth < 16 || c->qk_depth > 1024 || c->ov_depth > 1024)
        return plan_refuse(err, n, "qk/ov: %d/%d is not allowed for kv-append; K's and V's depths are multiples of "
                           "16 up to 1024", c->qk_depth, c->ov_depth);
    /* every other field would be left out of the canonical form (and the hash): it must be unset */
    Config d;
    config_init(&d);
    if (c->bm || c->bn || c->stages || c->group != 1 || c->mask != MASK_NONE || c->qtiles || c->cta_pair ||
        c->rescale != d.rescale || c->exp2_poly != d.exp2_poly || c->rope_split || c->pingpong != d.pingpong ||
        c->persistent != d.persistent || c->swizzle != 128 || c->page || c->varlen || c->stale || c->sink ||
        c->score_mod || c->softcap || c->alibi)
        return plan_refuse(err, n, "kv-append: it takes only target, dtype, qk (K's depth) and ov (V's); the cache "
                           "layout (dense or paged, page size) is a launch argument");
    return 0;
}

/* 16-byte chunks of a K row and of a V row, and the copy steps of a warp (32 chunks a step): the one place they
 * are derived (plan notes and emitter). */
static int k_chunks(const Plan *p) { return p->qk * p->elem_bytes / KVA_CHUNK; }
static int v_chunks(const Plan *p) { return p->ov * p->elem_bytes / KVA_CHUNK; }
static int copy_steps(const Plan *p) { return (k_chunks(p) + v_chunks(p) + 31) / 32; }

static int kva_plan(const Config *c, Plan *p, char *err, size_t n)
{
    (void)err, (void)n;
    p->qk = c->qk_depth;
    p->ov = c->ov_depth;
    p->elem_bytes = dtype_bytes[c->dtype];
    p->threads = 32 * KVA_WARPS;
    p->entry_regs = 255; /* no setmaxnreg: the hardware cap per thread */
    p->rows_per_cta = KVA_WARPS;
    p->heads_per_cta = 1;
    p->smem_align = 16; /* no shared memory */
    p->pdl_trigger = 1; /* the attention after it may launch at once; its griddepcontrol.wait waits for this grid */
    plan_role(p, "copy", 0, KVA_WARPS, 0, "one (token, kv head) row pair per warp: K's row, then V's, 16 B a lane");
    static const struct { ScalarId s; ParamType t; } params[] = {
        {SCALAR_K_NEW, PARAM_U64},       {SCALAR_V_NEW, PARAM_U64},       {SCALAR_K_CACHE, PARAM_U64},
        {SCALAR_V_CACHE, PARAM_U64},     {SCALAR_KN_STRIDE_B, PARAM_U64}, {SCALAR_KN_STRIDE_S, PARAM_U64},
        {SCALAR_KN_STRIDE_H, PARAM_U64}, {SCALAR_VN_STRIDE_B, PARAM_U64}, {SCALAR_VN_STRIDE_S, PARAM_U64},
        {SCALAR_VN_STRIDE_H, PARAM_U64}, {SCALAR_KC_STRIDE_P, PARAM_U64}, {SCALAR_KC_STRIDE_R, PARAM_U64},
        {SCALAR_KC_STRIDE_H, PARAM_U64}, {SCALAR_VC_STRIDE_P, PARAM_U64}, {SCALAR_VC_STRIDE_R, PARAM_U64},
        {SCALAR_VC_STRIDE_H, PARAM_U64}, {SCALAR_SEQLENS_K, PARAM_U64},   {SCALAR_SEQLEN_BASE, PARAM_U32},
        {SCALAR_SEQLENS_OUT, PARAM_U64}, {SCALAR_BLOCK_TABLE, PARAM_U64}, {SCALAR_MAX_PAGES, PARAM_U32},
        {SCALAR_PAGE_ROWS, PARAM_U32},   {SCALAR_NUM_PAGES, PARAM_U32},   {SCALAR_BATCH, PARAM_U32},
        {SCALAR_S_NEW, PARAM_U32},       {SCALAR_HEADS_KV, PARAM_U32}};
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) plan_param_scalar(p, params[i].s, params[i].t);
    plan_note(p, "rows", "row r = (b s_new + i) heads_kv + h of %d per CTA (one per warp); grid = ceil(batch s_new "
              "heads_kv / %d)", KVA_WARPS, KVA_WARPS);
    plan_note(p, "chunks", "K row %d x 16 B, then V row %d x 16 B; lane l copies chunks l + 32 s, s < %d, all loads "
              "before the first store", k_chunks(p), v_chunks(p), copy_steps(p));
    plan_note(p, "position", "pos = (seqlens_k ? seqlens_k[b] : seqlen_base) + i in 64 bits; written only where 0 <= "
              "pos < max_pages page_rows and the page is in [0, num_pages)");
    plan_note(p, "page", "block_table ? block_table[b max_pages + pos / page_rows] : b; row pos %% page_rows (dense: "
              "page_rows = s_max, max_pages = 1, the table cache_batch_idx)");
    plan_note(p, "lengths", "seqlens_out[b] = min(length, 2^31 - 1 - s_new) + s_new by warp (b, 0, 0), lane 0, when "
              "seqlens_out != 0");
    plan_note(p, "strides", "elements: new k, v (batch, seq, head); caches (page, row, head); x %d B", p->elem_bytes);
    return 0;
}

/* dst = base + eb (x0 s0 + x1 s1 + x2 s2): the element strides s* are u64 registers, the indices x* b32. */
static void row_address(Emit *e, Reg dst, Reg base, const Reg x[3], const Reg s[3], Reg t64)
{
    emit(e, "cvt.u64.u32 %s, %s;", R(e, t64), R(e, x[0]));
    emit(e, "mul.lo.u64 %s, %s, %s;", R(e, dst), R(e, t64), R(e, s[0]));
    for (int i = 1; i < 3; i++) {
        emit(e, "cvt.u64.u32 %s, %s;", R(e, t64), R(e, x[i]));
        emit(e, "mad.lo.u64 %s, %s, %s, %s;", R(e, dst), R(e, t64), R(e, s[i]), R(e, dst));
    }
    emit(e, "mad.lo.u64 %s, %s, %d, %s;", R(e, dst), R(e, dst), e->p->elem_bytes, R(e, base));
}

/* seqlens_out[b] for the warp of (b, 0, 0): the length after the append, saturated (a length near 2^31 must not
 * wrap to a negative one, which the attention would read as 0 keys). */
static void emit_lengths_out(Emit *e, Reg b, Reg i, Reg h, Reg len)
{
    char l_skip[NAME];
    Reg p = reg_pred(e, "kva_no_out"), t = reg_b32(e, "kva_len_new"), a = reg_b64(e, "kva_len_addr");
    emit(e, "setp.eq.u64 %s, %%seqlens_out, 0;", R(e, p));
    emit(e, "setp.ne.or.u32 %s, %s, 0, %s;", R(e, p), R(e, i), R(e, p));
    emit(e, "setp.ne.or.u32 %s, %s, 0, %s;", R(e, p), R(e, h), R(e, p));
    emit(e, "setp.ne.or.u32 %s, %%lane, 0, %s;", R(e, p), R(e, p));
    emit(e, "@%s bra %s;", R(e, p), new_label(e, l_skip, sizeof l_skip, "kva_len_done"));
    emit(e, "mov.u32 %s, 2147483647;", R(e, t));
    emit(e, "sub.s32 %s, %s, %%s_new;", R(e, t), R(e, t));
    emit(e, "min.s32 %s, %s, %s;", R(e, t), R(e, len), R(e, t));
    emit(e, "add.s32 %s, %s, %%s_new;", R(e, t), R(e, t));
    emit(e, "mul.wide.u32 %s, %s, 4;", R(e, a), R(e, b));
    emit(e, "add.s64 %s, %s, %%seqlens_out;", R(e, a), R(e, a));
    op_st_global_b32(e, REG_NONE, a, t);
    emit_label(e, l_skip);
}

static int kva_emit(Emit *e)
{
    const Plan *p = e->p;
    emit_section(e, "prologue: parameters, this warp's row pair (b, i, h)");
    const char *tid = reg(e, "b32", "thread"), *lane = reg(e, "b32", "lane"), *warp = reg(e, "b32", "warp");
    emit(e, "mov.u32 %s, %%tid.x;", tid);
    emit(e, "and.b32 %s, %s, 31;", lane, tid);
    emit(e, "shr.u32 %s, %s, 5;", warp, tid);
    kernel_params(e);
    emit_note(e, "plan pdl: the attention after this kernel may launch now; its griddepcontrol.wait still waits "
              "for this grid's writes");
    emit(e, "griddepcontrol.launch_dependents;");
    Reg row = reg_b32(e, "kva_row"), rows = reg_b32(e, "kva_rows"), q = reg_pred(e, "kva_p");
    Reg b = reg_b32(e, "kva_b"), i = reg_b32(e, "kva_i"), h = reg_b32(e, "kva_h"), t = reg_b32(e, "kva_t");
    emit_note(e, "plan note rows: %d row pairs per CTA, one per warp", p->rows_per_cta);
    emit(e, "mov.u32 %s, %%ctaid.x;", R(e, row));
    emit(e, "mad.lo.u32 %s, %s, %d, %%warp;", R(e, row), R(e, row), p->rows_per_cta);
    emit(e, "mul.lo.u32 %s, %%batch, %%s_new;", R(e, rows));
    emit(e, "mul.lo.u32 %s, %s, %%heads_kv;", R(e, rows), R(e, rows));
    emit(e, "setp.ge.u32 %s, %s, %s;", R(e, q), R(e, row), R(e, rows));
    emit(e, "@%s bra $exit;", R(e, q));
    emit(e, "rem.u32 %s, %s, %%heads_kv;", R(e, h), R(e, row));
    emit(e, "div.u32 %s, %s, %%heads_kv;", R(e, t), R(e, row));
    emit(e, "rem.u32 %s, %s, %%s_new;", R(e, i), R(e, t));
    emit(e, "div.u32 %s, %s, %%s_new;", R(e, b), R(e, t));

    emit_section(e, "the sequence's length: seqlens_k[b], or seqlen_base for every sequence");
    Reg len = reg_b32(e, "kva_len"), has = reg_pred(e, "kva_has_len"), a = reg_b64(e, "kva_addr");
    emit(e, "mov.u32 %s, %%seqlen_base;", R(e, len));
    emit(e, "setp.ne.u64 %s, %%seqlens_k, 0;", R(e, has));
    emit(e, "mul.wide.u32 %s, %s, 4;", R(e, a), R(e, b));
    emit(e, "add.s64 %s, %s, %%seqlens_k;", R(e, a), R(e, a));
    op_ld_global(e, has, "s32", len, a, 0);
    emit_lengths_out(e, b, i, h, len);

    emit_section(e, "position, page and row (plan notes position, page): a token outside the cache is not written");
    Reg pos64 = reg_b64(e, "kva_pos64"), cap = reg_b64(e, "kva_cap"), t64 = reg_b64(e, "kva_t64");
    Reg pos = reg_b32(e, "kva_pos"), entry = reg_b32(e, "kva_entry"), in = reg_b32(e, "kva_in_row");
    Reg page = reg_b32(e, "kva_page");
    emit(e, "cvt.s64.s32 %s, %s;", R(e, pos64), R(e, len));
    emit(e, "cvt.u64.u32 %s, %s;", R(e, t64), R(e, i));
    emit(e, "add.s64 %s, %s, %s;", R(e, pos64), R(e, pos64), R(e, t64));
    emit(e, "mul.wide.u32 %s, %%max_pages, %%page_rows;", R(e, cap));
    emit(e, "setp.lt.s64 %s, %s, 0;", R(e, q), R(e, pos64));
    emit(e, "setp.ge.or.s64 %s, %s, %s, %s;", R(e, q), R(e, pos64), R(e, cap), R(e, q));
    emit(e, "@%s bra $exit;", R(e, q));
    emit_note(e, "0 <= pos < max_pages page_rows < 2^31 (the runtime's bound): 32 bits from here");
    emit(e, "cvt.u32.u64 %s, %s;", R(e, pos), R(e, pos64));
    emit(e, "div.u32 %s, %s, %%page_rows;", R(e, entry), R(e, pos));
    emit(e, "rem.u32 %s, %s, %%page_rows;", R(e, in), R(e, pos));
    emit(e, "mov.u32 %s, %s;", R(e, page), R(e, b));
    Reg has_table = reg_pred(e, "kva_has_table");
    emit(e, "setp.ne.u64 %s, %%block_table, 0;", R(e, has_table));
    emit(e, "mul.wide.u32 %s, %s, %%max_pages;", R(e, a), R(e, b));
    emit(e, "cvt.u64.u32 %s, %s;", R(e, t64), R(e, entry));
    emit(e, "add.s64 %s, %s, %s;", R(e, a), R(e, a), R(e, t64));
    emit(e, "shl.b64 %s, %s, 2;", R(e, a), R(e, a));
    emit(e, "add.s64 %s, %s, %%block_table;", R(e, a), R(e, a));
    op_ld_global(e, has_table, "s32", page, a, 0);
    emit_note(e, "a page outside [0, num_pages) (a negative entry is a large unsigned one): not written");
    emit(e, "setp.ge.u32 %s, %s, %%num_pages;", R(e, q), R(e, page));
    emit(e, "@%s bra $exit;", R(e, q));

    emit_section(e, "the row pair's addresses: new rows at (b, i, h), cache rows at (page, row, h)");
    Reg src_k = reg_b64(e, "kva_src_k"), src_v = reg_b64(e, "kva_src_v"), dst_k = reg_b64(e, "kva_dst_k");
    Reg dst_v = reg_b64(e, "kva_dst_v");
    const Reg xn[3] = {b, i, h}, xc[3] = {page, in, h};
    const Reg kn[3] = {reg_find(e, "kn_stride_b"), reg_find(e, "kn_stride_s"), reg_find(e, "kn_stride_h")};
    const Reg vn[3] = {reg_find(e, "vn_stride_b"), reg_find(e, "vn_stride_s"), reg_find(e, "vn_stride_h")};
    const Reg kc[3] = {reg_find(e, "kc_stride_p"), reg_find(e, "kc_stride_r"), reg_find(e, "kc_stride_h")};
    const Reg vc[3] = {reg_find(e, "vc_stride_p"), reg_find(e, "vc_stride_r"), reg_find(e, "vc_stride_h")};
    row_address(e, src_k, reg_find(e, "k_new"), xn, kn, t64);
    row_address(e, src_v, reg_find(e, "v_new"), xn, vn, t64);
    row_address(e, dst_k, reg_find(e, "k_cache"), xc, kc, t64);
    row_address(e, dst_v, reg_find(e, "v_cache"), xc, vc, t64);

    int kch = k_chunks(p), vch = v_chunks(p), steps = copy_steps(p);
    emit_section(e, "copy (plan note chunks): K's %d chunks then V's %d, lane l takes l + 32 s of %d steps", kch, vch,
                 steps);
    Reg lane16 = reg_b64(e, "kva_lane16"), ks = reg_b64(e, "kva_ks"), vs = reg_b64(e, "kva_vs");
    Reg kd = reg_b64(e, "kva_kd"), vd = reg_b64(e, "kva_vd");
    Reg c = reg_b32(e, "kva_c"), v = reg_arr(e, RT_B32, 4 * steps, "kva_v"), src[8], dst[8], ok[8], isk = reg_pred(e, "kva_is_k");
    if (steps > 8) return emit_fail(e, "kv-append: %d copy steps; the emitter holds 8", steps), -1;
    emit(e, "mul.wide.u32 %s, %%lane, %d;", R(e, lane16), KVA_CHUNK);
    emit_note(e, "a lane's chunk of V: v + 16 (c - %d); of K: k + 16 c", kch);
    emit(e, "add.s64 %s, %s, %s;", R(e, ks), R(e, src_k), R(e, lane16));
    emit(e, "add.s64 %s, %s, %s;", R(e, kd), R(e, dst_k), R(e, lane16));
    emit(e, "add.s64 %s, %s, %s;", R(e, vs), R(e, src_v), R(e, lane16));
    emit(e, "add.s64 %s, %s, %s;", R(e, vd), R(e, dst_v), R(e, lane16));
    emit(e, "sub.s64 %s, %s, %d;", R(e, vs), R(e, vs), KVA_CHUNK * kch);
    emit(e, "sub.s64 %s, %s, %d;", R(e, vd), R(e, vd), KVA_CHUNK * kch);
    for (int s = 0; s < steps; s++) {
        src[s] = reg_b64(e, "kva_src%d", s), dst[s] = reg_b64(e, "kva_dst%d", s), ok[s] = reg_pred(e, "kva_ok%d", s);
        emit(e, "add.u32 %s, %%lane, %d;", R(e, c), 32 * s);
        emit(e, "setp.lt.u32 %s, %s, %d;", R(e, ok[s]), R(e, c), kch + vch);
        emit(e, "setp.lt.u32 %s, %s, %d;", R(e, isk), R(e, c), kch);
        emit(e, "selp.b64 %s, %s, %s, %s;", R(e, src[s]), R(e, ks), R(e, vs), R(e, isk));
        emit(e, "selp.b64 %s, %s, %s, %s;", R(e, dst[s]), R(e, kd), R(e, vd), R(e, isk));
        Reg x[4];
        for (int j = 0; j < 4; j++) x[j] = reg_at(e, v, 4 * s + j);
        op_ld_global_v4_b32(e, ok[s], x, src[s], (uint32_t)(32 * KVA_CHUNK * s));
    }
    for (int s = 0; s < steps; s++) {
        Reg x[4];
        for (int j = 0; j < 4; j++) x[j] = reg_at(e, v, 4 * s + j);
        op_st_global_v4_b32_at(e, ok[s], dst[s], (uint32_t)(32 * KVA_CHUNK * s), x);
    }
    emit_label(e, "$exit");
    emit(e, "ret;");
    return e->failed ? -1 : 0;
}

const Family kv_append_family = {KIND_KV_APPEND, kva_defaults, kva_check, kva_plan, kva_emit};
