/* kernel.c - the parts of a kernel that do not depend on the target: the
 * file header and entry line with the plan's parameter list, and for MHA its
 * prologue and tile scheduling with the mask's key ranges (the parameter ABI and
 * the other plan pieces they read: mha_plan.c). The runtime packs launch
 * arguments from the same parameter list (runtime/launch.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "ops.h"
#include "ops_copy.h"
#include "score_mod.h"
#include "softmax.h"
#include "templates.h"

void tpl_fill(Buf *out, const char *tpl, const char *const *kv)
{
    for (const char *s = tpl; *s;) {
        const char *hole = strstr(s, "${");
        if (!hole) {
            buf_puts(out, s);
            return;
        }
        buf_printf(out, "%.*s", (int)(hole - s), s);
        const char *end = strchr(hole, '}');
        if (!end) {
            buf_puts(out, hole);
            return;
        }
        const char *val = NULL;
        for (int i = 0; kv[i]; i += 2)
            if (strlen(kv[i]) == (size_t)(end - hole - 2) && !strncmp(kv[i], hole + 2, (size_t)(end - hole - 2)))
                val = kv[i + 1];
        if (val) buf_puts(out, val);
        else buf_printf(out, "%.*s", (int)(end - hole + 1), hole); /* unknown holes stay visible */
        s = end + 1;
    }
}

void kernel_entry_header(Buf *out, const Plan *p, const struct ScoreMod *mod)
{
    static const char *const decl[] = {[PARAM_TMAP] = ".align 128 .b8", [PARAM_U64] = ".u64", [PARAM_U32] = ".u32",
                                       [PARAM_F32] = ".f32"};
    char align[16];
    snprintf(align, sizeof align, "%u", p->smem_align);
    const char *kv[] = {"generator", FA4GEN_VERSION, "config", p->canonical, "ptx_version", p->target->ptx_version,
                        "ptx_target", p->target->ptx_target, "smem_align", align, NULL};
    tpl_fill(out, tpl_header, kv);
    if (mod) score_mod_module_text(mod, out);
    buf_printf(out, ".visible .entry %s(\n", p->symbol);
    for (int i = 0; i < p->n_params; i++) {
        const ParamSpec *q = &p->params[i];
        buf_printf(out, "    .param %s p_%s%s%s\n", decl[q->type], q->name, q->type == PARAM_TMAP ? "[128]" : "",
                   i + 1 < p->n_params ? "," : "");
    }
    buf_puts(out, ")\n");
    /* .reqntid + .minnctapersm give ptxas the entry register cap that makes setmaxnreg effective */
    buf_printf(out, ".reqntid %d, 1, 1\n.minnctapersm %d\n", p->threads, p->ctas_per_sm);
    if (p->cluster[0] * p->cluster[1] * p->cluster[2] > 1)
        buf_printf(out, ".reqnctapercluster %d, %d, %d\n", p->cluster[0], p->cluster[1], p->cluster[2]);
}

/* Query rows of one tile: a tile is one cluster, its CTAs side by side along the rows
 * (plan cluster); the kernel adds its CTA's offset after the tile's key range is known. A
 * cluster split's CTAs share the rows and split the keys instead. */
static int tile_rows(const Plan *p) { return p->cfg.cluster_split ? p->rows_per_cta : p->rows_per_cta * p->cluster[0]; }

void kernel_coords(Emit *e)
{
    const Plan *p = e->p;
    const char *tid = reg(e, "b32", "thread"), *warp = reg(e, "b32", "warp"), *lane = reg(e, "b32", "lane");
    const char *wg = reg(e, "b32", "wg"), *smem = reg(e, "b32", "smem");
    emit(e, "mov.u32 %s, %%tid.x;", tid);
    emit(e, "shr.u32 %s, %s, 5;", warp, tid);
    emit(e, "and.b32 %s, %s, 31;", lane, tid);
    emit(e, "shr.u32 %s, %s, 7;", wg, tid);
    emit_note(e, "plan: smem base aligned to %u", p->smem_align);
    emit(e, "mov.u32 %s, fa4_smem;", smem);
    emit(e, "add.u32 %s, %s, %u;", smem, smem, p->smem_align - 1);
    emit(e, "and.b32 %s, %s, %u;", smem, smem, ~(p->smem_align - 1));
}

void mha_prologue(Emit *e)
{
    const Plan *p = e->p;
    emit_section(e, "prologue: thread coordinates, parameters, smem base");
    kernel_coords(e);
    for (int i = 0; i < p->n_maps; i++) {
        char rn[24], pn[24];
        snprintf(rn, sizeof rn, "tmap_%s", p->maps[i].name);
        snprintf(pn, sizeof pn, "p_tmap_%s", p->maps[i].name);
        op_param_addr(e, reg_b64(e, "%s", rn), pn);
    }
    emit(e, "ld.param.u64 %s, [p_lse];", reg(e, "b64", "lse_ptr"));
    static const char *const u32s[] = {"seqlen_q", "seqlen_k", "heads_q", "batch"};
    for (int i = 0; i < 4; i++) emit(e, "ld.param.u32 %s, [p_%s];", reg(e, "b32", u32s[i]), u32s[i]);
    emit(e, "ld.param.f32 %s, [p_scale_log2];", reg(e, "f32", "scale_log2"));
    emit(e, "ld.param.f32 %s, [p_o_scale];", reg(e, "f32", "o_scale"));
    if (p->cfg.sink) emit(e, "ld.param.u64 %s, [p_sink];", reg(e, "b64", "sink_ptr"));
    if (p->cfg.softcap) emit(e, "ld.param.f32 %s, [p_softcap_scale];", reg(e, "f32", "softcap_scale"));
    if (p->cfg.alibi) {
        emit(e, "ld.param.u64 %s, [p_alibi];", reg(e, "b64", "alibi_ptr"));
        emit(e, "ld.param.f32 %s, [p_alibi_scale];", reg(e, "f32", "alibi_scale"));
    }
    if (p->cfg.score_mod) {
        emit_note(e, "score_mod: it receives sm_scale q.k, so the softmax's scores are already scaled");
        emit(e, "ld.param.f32 %s, [p_sm_scale];", reg(e, "f32", "mod_scale"));
        emit(e, "ld.param.u64 %s, [p_aux];", reg(e, "b64", "mod_aux"));
        emit(e, "mov.f32 %%scale_log2, %s;", PTX_LOG2E);
    }
    if (p->pdl_dependent && !mha_roles_wait(p)) {
        emit_note(e, "plan pdl: launched as a dependent of the stream's previous kernel, which may still run: "
                  "no global memory is read or written before this wait (the parameters are not global memory)");
        emit(e, "griddepcontrol.wait;");
    }
    if (p->pdl_trigger) {
        emit_note(e, "plan pdl: the stream's next kernel (a split's combine, the next call) may launch now; its "
                  "griddepcontrol.wait still waits for this grid");
        emit(e, "griddepcontrol.launch_dependents;");
    }
    if (p->cfg.split) {
        if (p->cfg.cluster_split) {
            emit_note(e, "plan note cluster split: num_splits = the cluster's CTAs, split = this CTA's rank");
            emit(e, "mov.u32 %s, %d;", reg(e, "b32", "num_splits"), p->cfg.cluster_split);
        } else {
            emit_note(e, "plan note split: the split count, partial O and LSE");
            op_ld_param(e, "u32", reg_b32(e, "num_splits"), "num_splits");
            op_ld_param(e, "u64", reg_b64(e, "o_accum"), "o_accum");
            op_ld_param(e, "u64", reg_b64(e, "lse_accum"), "lse_accum");
        }
        if (!p->cfg.varlen) { /* varlen_prologue loads out and its seq/head strides */
            emit_note(e, "plan note split 1: O's base and element strides, for a run with num_splits 1");
            op_ld_param(e, "u64", reg_b64(e, "out"), "out");
            op_ld_param(e, "u64", reg_b64(e, "out_stride_b"), "out_stride_b");
            op_ld_param(e, "u64", reg_b64(e, "out_stride_s"), "out_stride_s");
            op_ld_param(e, "u64", reg_b64(e, "out_stride_h"), "out_stride_h");
        }
    }
    if (p->cfg.varlen || p->cfg.page) varlen_prologue(e);
    const char *nm = reg(e, "b32", "num_m_blocks"), *hb = reg(e, "b32", "heads_batch");
    emit_note(e, "plan: %d query rows per tile; tiles = m-blocks x heads x batch", tile_rows(p));
    emit(e, "add.u32 %s, %%seqlen_q, %d;", nm, tile_rows(p) - 1);
    emit_div_imm(e, nm, nm, tile_rows(p));
    emit(e, "mul.lo.u32 %s, %%heads_q, %%batch;", hb);
    emit(e, "mul.lo.u32 %s, %s, %s;", reg(e, "b32", "num_tiles"), nm, hb);
    mha_split_tiles(e);
    emit(e, "mov.u32 %s, %%nctaid.x;", reg(e, "b32", "grid_ctas"));
}

void mha_split_tiles(Emit *e)
{
    if (!e->p->cfg.split) return;
    emit_note(e, "plan note split: every tile runs once per split");
    emit(e, "mul.lo.u32 %%num_tiles, %%num_tiles, %%num_splits;");
}

/* This CTA's kv block range: the split's share of the sequence's kv blocks, [s b, s b + b) with
 * b = ceil(blocks / num_splits), intersected with the mask's [n_begin, n_end). An empty
 * intersection leaves n_end <= n_begin: the tile sees no key (O = 0, LSE = -inf for the combine). */
static void kv_block_range(Emit *e, const char *nblk)
{
    if (!e->p->cfg.split) return;
    const char *b = reg(e, "b32", "sp_blocks"), *lo = reg(e, "b32", "sp_lo"), *hi = reg(e, "b32", "sp_hi");
    emit_note(e, "plan note split: this split's kv blocks, cut to the mask's range");
    emit(e, "add.u32 %s, %s, %%num_splits;", b, nblk);
    emit(e, "sub.u32 %s, %s, 1;", b, b);
    emit(e, "div.u32 %s, %s, %%num_splits;", b, b);
    emit(e, "mul.lo.u32 %s, %%split, %s;", lo, b);
    emit(e, "min.u32 %s, %s, %s;", lo, lo, nblk);
    emit(e, "add.u32 %s, %s, %s;", hi, lo, b);
    emit(e, "min.u32 %s, %s, %s;", hi, hi, nblk);
    emit(e, "max.s32 %%n_begin, %%n_begin, %s;", lo);
    emit(e, "min.s32 %%n_end, %%n_end, %s;", hi);
}

void mha_split_row_addrs(Emit *e, Reg head, Reg seq, Reg lse_addr, Reg o_addr)
{
    REG_WANT(e, head, RT_B32), REG_WANT(e, seq, RT_B32), REG_WANT(e, lse_addr, RT_B64), REG_WANT(e, o_addr, RT_B64);
    Reg idx = reg_b32(e, "sp_idx");
    if (e->p->cfg.varlen) { /* [num_splits, heads_q, total_q]: the varlen LSE order, per split */
        Reg t = reg_b32(e, "sp_row");
        emit(e, "mad.lo.u32 %s, %%split, %%heads_q, %s;", R(e, idx), R(e, head));
        emit(e, "add.u32 %s, %s, %%vl_q_start;", R(e, t), R(e, seq));
        emit(e, "mad.lo.u32 %s, %s, %%total_q, %s;", R(e, idx), R(e, idx), R(e, t));
    } else {
        emit(e, "mad.lo.u32 %s, %%split, %%batch, %%bidx;", R(e, idx));
        emit(e, "mad.lo.u32 %s, %s, %%heads_q, %s;", R(e, idx), R(e, idx), R(e, head));
        emit(e, "mad.lo.u32 %s, %s, %%seqlen_q, %s;", R(e, idx), R(e, idx), R(e, seq));
    }
    emit(e, "mad.wide.u32 %s, %s, 4, %%lse_accum;", R(e, lse_addr), R(e, idx));
    emit(e, "mad.wide.u32 %s, %s, %d, %%o_accum;", R(e, o_addr), R(e, idx), 4 * e->p->ov);
}

/* split=1 run with num_splits 1 (plan note split): the kernel's O is final, so row (head, seq) goes
 * straight to the caller's out in the output dtype and its LSE to lse_ptr; no partials, no combine.
 * o_addr = &out[b][seq][head][0], out_bytes per element (varlen: the sequence's packed row %vl_q_start + seq, no batch). */
void mha_split_out_addr(Emit *e, Reg head, Reg seq, int out_bytes, Reg o_addr)
{
    REG_WANT(e, head, RT_B32), REG_WANT(e, seq, RT_B32), REG_WANT(e, o_addr, RT_B64);
    Reg t = reg_b64(e, "sp_t64"), r = reg_b32(e, "sp_orow");
    const char *a = R(e, o_addr);
    if (e->p->cfg.varlen) {
        emit(e, "add.u32 %s, %s, %%vl_q_start;", R(e, r), R(e, seq));
        op_cvt(e, "u64.u32", o_addr, r);
        emit(e, "mul.lo.u64 %s, %s, %%out_stride_s;", a, a);
    } else {
        op_cvt(e, "u64.u32", o_addr, reg_find(e, "bidx"));
        emit(e, "mul.lo.u64 %s, %s, %%out_stride_b;", a, a);
        op_cvt(e, "u64.u32", t, seq);
        emit(e, "mad.lo.u64 %s, %s, %%out_stride_s, %s;", a, R(e, t), a);
    }
    op_cvt(e, "u64.u32", t, head);
    emit(e, "mad.lo.u64 %s, %s, %%out_stride_h, %s;", a, R(e, t), a);
    emit(e, "mad.lo.u64 %s, %s, %d, %%out;", a, a, out_bytes);
}

void mha_early_kv_count(Emit *e, Reg pre, Reg old)
{
    const Plan *p = e->p;
    emit_note(e, "plan pdl early kv: blocks before row seqlen_k - seqlen_q load before griddepcontrol.wait (the "
              "newest rows after it), at most %d (the free ring)", p->pdl_early_kv);
    emit(e, "sub.u32 %s, %%seqlen_k, %%seqlen_q;", R(e, old));
    emit(e, "min.u32 %s, %s, %%seqlen_k;", R(e, old), R(e, old)); /* seqlen_q > seqlen_k wrapped: none */
    emit_div_imm(e, R(e, old), R(e, old), p->bn);
    emit(e, "min.s32 %s, %s, %%n_end;", R(e, old), R(e, old));
    emit(e, "sub.s32 %s, %s, %%n_begin;", R(e, pre), R(e, old));
    emit(e, "max.s32 %s, %s, 0;", R(e, pre), R(e, pre));
    emit(e, "min.s32 %s, %s, %d;", R(e, pre), R(e, pre), p->pdl_early_kv);
}

void mha_kv_tail(Emit *e, Reg tail, Reg t)
{
    REG_WANT(e, tail, RT_PRED), REG_WANT(e, t, RT_B32);
    emit_note(e, "plan kv tail: block n_end - 1 runs past the sequence's end (and the range is not empty)");
    emit(e, "mul.lo.u32 %s, %%n_end, %d;", R(e, t), e->p->bn);
    emit(e, "setp.gt.u32 %s, %s, %%seqlen_k;", R(e, tail), R(e, t));
    emit(e, "setp.gt.and.s32 %s, %%n_end, %%n_begin, %s;", R(e, tail), R(e, tail));
}

void mha_scrub_tail(Emit *e, Reg vstage, int chunks, uint32_t chunk_bytes, int bar, Reg full)
{
    const Plan *p = e->p;
    char l_loop[32], l_done[32];
    uint32_t row = (uint32_t)p->swizzle_bytes, end = (uint32_t)p->bn * row;
    Reg off = reg_b32(e, "sc_off"), a = reg_b32(e, "sc_addr"), z = reg_b32(e, "sc_zero"), pr = reg_pred(e, "sc_p");
    emit_note(e, "plan kv tail: V rows seqlen_k - (n_end - 1) x %d .. %d of the tail block are zero in each of its %d "
              "chunks (%u B a row: a row's swizzle stays inside it), %d B a pass of the warp", p->bn, p->bn - 1, chunks,
              row, p->kv_tail_pass);
    emit(e, "mul.lo.u32 %s, %%n_end, %d;", R(e, off), p->bn);
    emit(e, "sub.u32 %s, %%seqlen_k, %s;", R(e, off), R(e, off));
    emit(e, "add.u32 %s, %s, %d;", R(e, off), R(e, off), p->bn);
    emit(e, "mul.lo.u32 %s, %s, %u;", R(e, off), R(e, off), row);
    emit(e, "mad.lo.u32 %s, %%lane, %d, %s;", R(e, off), SCRUB_STORE_BYTES, R(e, off));
    emit(e, "mov.b32 %s, 0;", R(e, z));
    const Reg zv[4] = {z, z, z, z};
    emit_label(e, new_label(e, l_loop, sizeof l_loop, "sc_rows"));
    new_label(e, l_done, sizeof l_done, "sc_rows_done");
    emit(e, "setp.ge.u32 %s, %s, %u;", R(e, pr), R(e, off), end);
    emit(e, "@%s bra %s;", R(e, pr), l_done);
    emit(e, "add.u32 %s, %s, %s;", R(e, a), R(e, vstage), R(e, off));
    for (int c = 0; c < chunks; c++) op_st_shared_v4_b32(e, a, (uint32_t)c * chunk_bytes, zv);
    emit(e, "add.u32 %s, %s, %d;", R(e, off), R(e, off), p->kv_tail_pass);
    emit(e, "bra %s;", l_loop);
    emit_label(e, l_done);
    emit_note(e, "the zeros reach the async proxy (the MMA reads V) before the stage is released");
    op_fence_proxy_async(e);
    emit_note(e, "plan: named barrier scrub (%d): every lane's stores before lane 0's release", bar);
    op_bar_sync(e, bar, named_bar_threads(p, bar));
    emit(e, "setp.eq.u32 %s, %%lane, 0;", R(e, pr));
    op_mbar_arrive_if(e, pr, full);
}

void mha_prefetch_kv(Emit *e, Reg j, int first, int step, const MhaKvMap *maps, int n_maps)
{
    const Plan *p = e->p;
    char l_loop[32], l_done[32];
    Reg pj = reg_b32(e, "pf_j"), left = reg_b32(e, "pf_left"), row = reg_b32(e, "pf_row");
    Reg col = reg_b32(e, "pf_col"), stop = reg_pred(e, "pf_stop");
    emit_note(e, "plan pdl prefetch kv: the next %d blocks this tile loads (%s), K and V, into L2 before the wait: a "
              "hint that reads no value, so the previous kernel's writes need no order against it",
              p->pdl_prefetch_kv, step > 0 ? "ascending" : "descending");
    if (mha_prefetch_rereads(p))
        emit_note(e, "paged: the sequence's length and these table entries were read before the wait only to aim the "
                  "hints (PTX allows racing reads; a stale value wastes a prefetch); after the wait both are read again");
    emit(e, "add.s32 %s, %s, %d;", R(e, pj), R(e, j), first);
    emit(e, "mov.u32 %s, %d;", R(e, left), p->pdl_prefetch_kv);
    emit_label(e, new_label(e, l_loop, sizeof l_loop, "pf_block"));
    new_label(e, l_done, sizeof l_done, "pf_done");
    emit(e, "setp.lt.s32 %s, %s, %%n_begin;", R(e, stop), R(e, pj));
    emit(e, "setp.ge.or.s32 %s, %s, %%n_end, %s;", R(e, stop), R(e, pj), R(e, stop));
    emit(e, "setp.eq.or.u32 %s, %s, 0, %s;", R(e, stop), R(e, left), R(e, stop));
    emit(e, "@%s bra %s;", R(e, stop), l_done);
    emit(e, "mul.lo.u32 %s, %s, %d;", R(e, row), R(e, pj), p->bn);
    int box = p->cfg.page && p->cfg.page < p->bn ? p->cfg.page : p->bn;
    for (int i = 0; i < p->bn / box; i++) {
        Reg r = row, c3 = reg_find(e, "bidx");
        if (p->cfg.page) { /* box i's page and row in it: a table read, racy before the wait (only aims the hint) */
            Reg lrow = reg_b32(e, "pf_lrow");
            r = reg_b32(e, "pf_prow"), c3 = reg_b32(e, "pf_page");
            emit(e, "add.u32 %s, %s, %d;", R(e, lrow), R(e, row), i * box);
            paged_coords(e, lrow, c3, r);
        }
        for (int m = 0; m < n_maps; m++)
            for (int c = 0; c < maps[m].chunks; c++) {
                emit(e, "mov.u32 %s, %d;", R(e, col), maps[m].col0 + c * p->chunk_elems);
                op_tma_prefetch_4d(e, maps[m].map, col, r, reg_find(e, "kv_head"), c3);
            }
    }
    emit(e, "add.s32 %s, %s, %d;", R(e, pj), R(e, pj), step);
    emit(e, "sub.u32 %s, %s, 1;", R(e, left), R(e, left));
    emit(e, "bra.uni %s;", l_loop);
    emit_label(e, l_done);
}

/* The final LSE of row (head, seq) where guard holds and lse_ptr is set: [batch, heads_q, seqlen_q],
 * varlen [heads_q, total_q]. */
void mha_split_out_lse(Emit *e, Reg guard, Reg head, Reg seq, Reg lse)
{
    Reg g = reg_pred(e, "sp_lse_ok"), idx = reg_b32(e, "sp_lse_idx"), ad = reg_b64(e, "sp_lse_addr");
    emit(e, "setp.ne.u64 %s, %%lse_ptr, 0;", R(e, g));
    emit(e, "and.pred %s, %s, %s;", R(e, g), R(e, g), R(e, guard));
    lse_store(e, g, head, seq, idx, ad, lse);
}

/* dst = x <= 0 ? 0 : (x + round) / bn, for signed x */
static void clamp_div(Emit *e, Reg dst_, Reg x_, int round, int bn)
{
    REG_WANT(e, dst_, RT_B32);
    REG_WANT(e, x_, RT_B32);
    const char *p = reg(e, "pred", "tc_neg"), *dst = R(e, dst_), *x = R(e, x_);
    emit(e, "setp.le.s32 %s, %s, 0;", p, x);
    emit(e, "add.s32 %s, %s, %d;", dst, x, round);
    emit_div_imm(e, dst, dst, (unsigned)bn); /* kept only where x > 0: x + round is exact as unsigned */
    emit(e, "selp.b32 %s, 0, %s, %s;", dst, dst, p);
}

/* g = the (batch, head) pairs of a tile group (plan note tile order), at most units: one head (one kv head's query
 * heads), as many as keep their K and V in the L2 budget, or (TILE_FIT) one or all of them. Heads are counted as the
 * tile counts them: query heads, or kv heads where a tile packs a kv head's query heads. */
static void tile_group(Emit *e, const char *g, const char *units, int packed)
{
    const Plan *p = e->p;
    int one = packed ? 1 : p->cfg.group; /* whole kv heads: query heads sharing one stay together */
    if (p->head_major == TILE_HEAD_MAJOR) {
        emit_note(e, "plan note tile order: a group is one head (one kv head's query heads): its m-blocks are consecutive");
        emit(e, "mov.u32 %s, %d;", g, one);
    } else {
        emit(e, "max.u32 %s, %s, 1;", g, p->cfg.varlen || p->cfg.page ? "%total_k" : "%seqlen_k"); /* a hint */
        emit(e, "div.u32 %s, %u, %s;", g, p->l2_kv_rows, g);
        emit(e, "max.u32 %s, %s, 1;", g, g);
        if (one > 1) emit(e, "mul.lo.u32 %s, %s, %d;", g, g, one);
    }
    if (p->head_major == TILE_FIT) {
        const char *part = reg(e, "pred", "tc_part");
        emit_note(e, "plan note tile order: one group of every head if their K/V fit L2, else one head (one kv head's "
                  "query heads)");
        emit(e, "setp.lt.u32 %s, %s, %s;", part, g, units);
        emit(e, "selp.b32 %s, %d, %s, %s;", g, one, g, part);
    }
    emit(e, "min.u32 %s, %s, %s;", g, g, units);
}

/* The kernel's own order (tile_group, tile_coords, mha_tile_first/next), counted on the host: tiles in the order
 * their indices give, each costing its kv blocks under the causal mask (bottom-right) plus half a block for its
 * prologue and epilogue. The runtime compares the orders with it (runtime/mha_pick.c): H200 runs 41-47 timed what it
 * counts. */
typedef struct {
    uint64_t units, nm, g;
    double cost[64]; /* by rank: m-block nm - 1 - rank */
} TileCount;

static int tile_count(TileCount *t, const Config *c, int order, uint32_t batch, uint32_t heads_q, uint32_t seqlen_q,
                      uint32_t seqlen_k)
{
    if (!c->bm || !c->bn || !c->group) return -1; /* defaults not filled: no geometry to count */
    t->units = (uint64_t)batch * heads_q, t->nm = (seqlen_q + (uint64_t)c->bm - 1) / (uint64_t)c->bm;
    /* at most 64 m-blocks (4096 rows of 64) and 2^18 tiles: nm first, so the product cannot wrap */
    if (!t->units || !t->nm || t->nm > 64 || t->units > (1u << 18) || t->units * t->nm > (1u << 18)) return -1;
    uint64_t fit = plan_l2_kv_rows(c) / (seqlen_k ? seqlen_k : 1);
    fit = (fit ? fit : 1) * (uint64_t)c->group;
    t->g = order == TILE_HEAD_MAJOR || (order == TILE_FIT && fit < t->units) ? (uint64_t)c->group : fit;
    if (t->g > t->units) t->g = t->units;
    int64_t off = (int64_t)seqlen_k - seqlen_q, nblk = ((int64_t)seqlen_k + c->bn - 1) / c->bn;
    for (uint64_t q = 0; q < t->nm; q++) {
        uint64_t rows = (t->nm - q) * (uint64_t)c->bm;
        int64_t last = (int64_t)(rows < seqlen_q ? rows : seqlen_q) - 1;
        int64_t end = last + off + 1 <= 0 ? 0 : (last + off + 1 + c->bn - 1) / c->bn;
        t->cost[q] = (double)(end < nblk ? end : nblk) + 0.5;
    }
    return 0;
}

/* tile i's cost for i in order: groups, then ranks, then the group's heads */
#define FOR_EACH_TILE(t, x)                                                                                            \
    for (uint64_t hb_ = 0; hb_ < (t)->units; hb_ += (t)->g)                                                            \
        for (uint64_t q_ = 0, gs_ = (t)->units - hb_ < (t)->g ? (t)->units - hb_ : (t)->g; q_ < (t)->nm; q_++)         \
            for (uint64_t h_ = 0; h_ < gs_ && ((x) = (t)->cost[q_], 1); h_++)

double mha_tile_order_load(const Config *c, int order, uint32_t batch, uint32_t heads_q, uint32_t seqlen_q,
                           uint32_t seqlen_k, uint32_t grid_ctas)
{
    TileCount t;
    if (!grid_ctas || tile_count(&t, c, order, batch, heads_q, seqlen_q, seqlen_k)) return 0;
    if (t.units * t.nm < grid_ctas) grid_ctas = (uint32_t)(t.units * t.nm); /* the runtime's grid: a CTA a tile at most */
    double *load = calloc(grid_ctas, sizeof *load), total = 0, most = 0, x;
    if (!load) return 0;
    int walk = order != TILE_L2_GROUPS, back = 0;
    uint32_t l = 0; /* the tile's lane in its wave */
    FOR_EACH_TILE(&t, x) {
        load[back ? grid_ctas - 1 - l : l] += x;
        total += x;
        if (++l == grid_ctas) l = 0, back = walk && !back;
    }
    for (uint32_t i = 0; i < grid_ctas; i++) most = load[i] > most ? load[i] : most;
    free(load);
    return total > 0 ? most / (total / grid_ctas) : 0;
}

double mha_tile_dispatch_load(const Config *c, uint32_t batch, uint32_t heads_q, uint32_t seqlen_q, uint32_t seqlen_k,
                              uint32_t slots)
{
    TileCount t;
    if (!slots || tile_count(&t, c, TILE_L2_GROUPS, batch, heads_q, seqlen_q, seqlen_k)) return 0;
    if (t.units * t.nm < slots) slots = (uint32_t)(t.units * t.nm);
    double *heap = calloc(slots, sizeof *heap), total = 0, most = 0, x; /* the slots' free times, a min-heap */
    if (!heap) return 0;
    FOR_EACH_TILE(&t, x) { /* the next tile to the slot free first: its root, then sifted down */
        double v = heap[0] + x;
        uint32_t i = 0;
        for (;;) {
            uint32_t k = 2 * i + 1;
            if (k >= slots) break;
            if (k + 1 < slots && heap[k + 1] < heap[k]) k++;
            if (heap[k] >= v) break;
            heap[i] = heap[k], i = k;
        }
        heap[i] = v;
        total += x;
        most = v > most ? v : most;
    }
    free(heap);
    return total > 0 ? most / (total / slots) : 0;
}
#undef FOR_EACH_TILE

/* packed: the (batch, kv head) pairs, the tile's units; %num_tiles counts them. */
static const char *packed_units(Emit *e)
{
    const char *hkv = reg(e, "b32", "heads_kv"), *units = reg(e, "b32", "hkv_batch");
    emit_note(e, "GQA packed: a tile holds the %d query heads of one kv head; tiles = m-blocks x kv heads x batch",
              e->p->cfg.group);
    emit_div_imm(e, hkv, "%heads_q", e->p->cfg.group);
    emit(e, "mul.lo.u32 %s, %s, %%batch;", units, hkv);
    emit(e, "mul.lo.u32 %%num_tiles, %%num_m_blocks, %s;", units);
    mha_split_tiles(e);
    return units;
}

/* packed: a tile covers one kv head's whole query-head group (heads packed into the M tile). */
static void tile_coords(Emit *e, int packed)
{
    const Plan *p = e->p;
    int bn = p->bn, wl, wr;
    mask_bounds(&p->cfg, &wl, &wr);
    const char *tq = reg(e, "b32", "tc_q"), *tr = reg(e, "b32", "tc_r");
    const char *m_block = reg(e, "b32", "m_block"), *head = reg(e, "b32", "head"), *bidx = reg(e, "b32", "bidx");
    const char *kvh = reg(e, "b32", "kv_head"), *m0 = reg(e, "b32", "m0"), *off = reg(e, "b32", "kv_off");
    const char *last = reg(e, "b32", "row_last"), *nblk = reg(e, "b32", "tc_nblk"), *x = reg(e, "b32", "tc_x");
    const char *nb = reg(e, "b32", "n_begin"), *ne = reg(e, "b32", "n_end");
    const char *flo = reg(e, "b32", "full_lo"), *fhi = reg(e, "b32", "full_hi");
    const char *g = reg(e, "b32", "tc_group"), *gs = reg(e, "b32", "tc_gsize"), *hb = reg(e, "b32", "tc_hb");
    const char *units = "%heads_batch", *tile = "%tile";
    if (p->cfg.split) {
        emit_note(e, "plan note split: tile = (tile of the problem) x num_splits + split");
        tile = reg(e, "b32", "tc_tile");
        emit(e, "rem.u32 %s, %%tile, %%num_splits;", reg(e, "b32", "split"));
        emit(e, "div.u32 %s, %%tile, %%num_splits;", tile);
    }
    if (packed) /* a walking CTA counted its units once, in mha_tile_first */
        units = p->tile_walk ? "%hkv_batch" : packed_units(e);
    emit_note(e, "tile -> (head group, m-block, head): a group holds as many (batch, head) pairs as keep their");
    emit_note(e, "K and V in L2 (plan: %u K+V rows per kv head); m-blocks descend, longest causal rows first",
              p->l2_kv_rows);
    if (p->tile_walk) {
        emit_note(e, "plan note tile order: the group mha_tile_first chose for the CTA");
        emit(e, "mov.u32 %s, %%tile_group;", g);
    } else {
        tile_group(e, g, units, packed);
    }
    emit(e, "mul.lo.u32 %s, %s, %%num_m_blocks;", tq, g);
    emit(e, "div.u32 %s, %s, %s;", hb, tile, tq);
    emit(e, "rem.u32 %s, %s, %s;", tr, tile, tq);
    emit(e, "mul.lo.u32 %s, %s, %s;", hb, hb, g); /* first (batch, head) of the group */
    emit(e, "sub.u32 %s, %s, %s;", gs, units, hb);
    emit(e, "min.u32 %s, %s, %s;", gs, gs, g); /* the last group may be smaller */
    emit(e, "div.u32 %s, %s, %s;", tq, tr, gs);
    emit(e, "rem.u32 %s, %s, %s;", tr, tr, gs);
    emit(e, "add.u32 %s, %s, %s;", hb, hb, tr);
    emit(e, "sub.u32 %s, %%num_m_blocks, 1;", m_block);
    emit(e, "sub.u32 %s, %s, %s;", m_block, m_block, tq);
    if (packed) {
        emit(e, "rem.u32 %s, %s, %%heads_kv;", kvh, hb);
        emit(e, "div.u32 %s, %s, %%heads_kv;", bidx, hb);
        emit_note(e, "plan: group %d query heads per kv head; %%head = the tile's first query head", p->cfg.group);
        emit(e, "mul.lo.u32 %s, %s, %d;", head, kvh, p->cfg.group);
    } else {
        emit(e, "rem.u32 %s, %s, %%heads_q;", head, hb);
        emit(e, "div.u32 %s, %s, %%heads_q;", bidx, hb);
        emit_note(e, "plan: group %d query heads per kv head", p->cfg.group);
        emit_div_imm(e, kvh, head, p->cfg.group);
    }
    if (p->cfg.varlen || p->cfg.page) varlen_sequence(e);
    emit(e, "mul.lo.u32 %s, %s, %d;", m0, m_block, tile_rows(p));
    emit_note(e, "key range (bottom-right aligned): row i sees keys i+off-%d .. i+off+%d (-1 = unbounded)", wl, wr);
    emit(e, "sub.s32 %s, %%seqlen_k, %%seqlen_q;", off);
    emit(e, "add.u32 %s, %s, %d;", last, m0, tile_rows(p));
    emit(e, "min.u32 %s, %s, %%seqlen_q;", last, last);
    emit(e, "sub.u32 %s, %s, 1;", last, last);
    emit(e, "add.u32 %s, %%seqlen_k, %d;", nblk, bn - 1);
    emit_div_imm(e, nblk, nblk, bn);
    emit_div_imm(e, fhi, "%seqlen_k", bn);
    if (wr >= 0) {
        emit(e, "add.s32 %s, %s, %s;", x, last, off);
        emit(e, "add.s32 %s, %s, %d;", x, x, wr + 1); /* one past the last key the last row sees */
        clamp_div(e, reg_find(e, "%s", ne + 1), reg_find(e, "%s", x + 1), bn - 1, bn);
        emit(e, "min.s32 %s, %s, %s;", ne, ne, nblk);
        emit(e, "add.s32 %s, %s, %s;", x, m0, off);
        emit(e, "add.s32 %s, %s, %d;", x, x, wr + 1); /* one past the last key the first row sees */
        clamp_div(e, reg_find(e, "%s", x + 1), reg_find(e, "%s", x + 1), 0, bn);
        emit(e, "min.s32 %s, %s, %s;", fhi, fhi, x);
    } else {
        emit(e, "mov.u32 %s, %s;", ne, nblk);
    }
    if (wl >= 0) {
        emit(e, "add.s32 %s, %s, %s;", x, m0, off);
        emit(e, "sub.s32 %s, %s, %d;", x, x, wl); /* first key the first row sees */
        clamp_div(e, reg_find(e, "%s", nb + 1), reg_find(e, "%s", x + 1), 0, bn);
        emit(e, "add.s32 %s, %s, %s;", x, last, off);
        emit(e, "sub.s32 %s, %s, %d;", x, x, wl); /* first key the last row sees */
        clamp_div(e, reg_find(e, "%s", flo + 1), reg_find(e, "%s", x + 1), bn - 1, bn);
    } else {
        emit(e, "mov.u32 %s, 0;", nb);
        emit(e, "mov.u32 %s, 0;", flo);
    }
    kv_block_range(e, nblk);
}

/* plan note tile order: the head-major orders (TILE_HEAD_MAJOR, TILE_FIT) walk waves of %grid_ctas tiles in
 * alternating direction -- CTA c takes tile c of even waves and tile grid-1-c of odd ones -- so a CTA that drew a long
 * causal m-block in one wave draws a short one in the next, where a plain stride hands the same CTAs the same m-block
 * of every wave (the tiles of a wave are the same either way). %tile_step: the distance to this CTA's next tile,
 * 2 grid - 1 - 2c and 2c + 1 in turn. */
void mha_tile_first(Emit *e)
{
    emit(e, "mov.u32 %s, %%ctaid.x;", reg(e, "b32", "tile"));
    int packed = e->p->heads_per_cta > 1;
    emit_note(e, "plan note tile order: the CTA's tile group, once");
    tile_group(e, reg(e, "b32", "tile_group"), packed ? packed_units(e) : "%heads_batch", packed);
    if (!e->p->head_major) return;
    const char *st = reg(e, "b32", "tile_step");
    emit_note(e, "plan note tile order: waves alternate direction; the step to this CTA's next tile");
    emit(e, "sub.u32 %s, %%grid_ctas, %%tile;", st);
    emit(e, "shl.b32 %s, %s, 1;", st, st);
    emit(e, "sub.u32 %s, %s, 1;", st, st);
}

void mha_tile_peek(Emit *e, const char *dst)
{
    emit(e, "add.u32 %s, %%tile, %s;", dst, e->p->head_major ? "%tile_step" : "%grid_ctas");
}

void mha_tile_next(Emit *e)
{
    mha_tile_peek(e, "%tile");
    if (!e->p->head_major) return;
    emit(e, "sub.u32 %%tile_step, %%grid_ctas, %%tile_step;");
    emit(e, "add.u32 %%tile_step, %%tile_step, %%grid_ctas;");
}

const char *const mha_tile_coord_regs[MHA_TILE_COORD_REGS] = {"m_block", "head",  "bidx",    "kv_head", "m0",
                                                              "n_begin", "n_end", "full_lo", "full_hi", "kv_off"};

void mha_tile_coords(Emit *e) { tile_coords(e, 0); }
void mha_tile_coords_packed(Emit *e) { tile_coords(e, 1); }

void mla_tile_coords(Emit *e, int heads, int pair, int block)
{
    const char *src = pair ? "%clusterid.x" : "%ctaid.x";
    int tile_heads = pair ? 2 * heads : heads;
    Reg nhb = reg_b32(e, "head_blocks"), tile = reg_b32(e, "tile"), rank = pair ? reg_b32(e, "cta_rank") : REG_NONE;
    if (pair)
        emit_note(e, "plan: tiles = s_q tokens x ceil(h_q / %d) head blocks, one CTA pair each; CTA r takes heads +%d r",
                  tile_heads, heads);
    else
        emit_note(e, "plan: tiles = s_q tokens x ceil(h_q / %d) head blocks, one CTA each", heads);
    emit(e, "add.u32 %s, %%heads_q, %d;", R(e, nhb), tile_heads - 1);
    emit_div_imm(e, R(e, nhb), R(e, nhb), tile_heads);
    emit(e, "mov.u32 %s, %s;", R(e, tile), src);
    if (pair) emit(e, "mov.u32 %s, %%cluster_ctarank;", R(e, rank));
    emit(e, "div.u32 %s, %s, %s;", reg(e, "b32", "tok"), R(e, tile), R(e, nhb));
    emit(e, "rem.u32 %s, %s, %s;", reg(e, "b32", "h0"), R(e, tile), R(e, nhb));
    emit(e, "mul.lo.u32 %%h0, %%h0, %d;", tile_heads);
    if (pair) {
        emit(e, "mad.lo.u32 %%h0, %s, %d, %%h0;", R(e, rank), heads);
        emit(e, "setp.eq.u32 %s, %s, 0;", reg(e, "pred", "is_lead"), R(e, rank));
        emit(e, "mov.u32 %s, 0;", reg(e, "b32", "lead_rank"));
    }
    emit(e, "shr.u32 %s, %%topk, %d;", reg(e, "b32", "nblk"), __builtin_ctz((unsigned)block));
}

void kernel_params(Emit *e)
{
    const Plan *p = e->p;
    for (int i = 0; i < p->n_params; i++) {
        const ParamSpec *q = &p->params[i];
        if (q->type == PARAM_TMAP) {
            char pname[40];
            snprintf(pname, sizeof pname, "p_%s", q->name);
            op_param_addr(e, reg_b64(e, "%s", q->name), pname);
            continue;
        }
        const char *type = q->type == PARAM_U64 ? "u64" : q->type == PARAM_U32 ? "u32" : "f32";
        op_ld_param(e, type, reg_new(e, q->type == PARAM_U64 ? RT_B64 : q->type == PARAM_U32 ? RT_B32 : RT_F32, "%s",
                                     q->name), q->name);
    }
}
