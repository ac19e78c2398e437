/* plan.c - everything derived from a config, computed once, and its printing.
 *
 * plan_make() fills defaults, checks the config and hands it to the target's
 * planner, which lays out shared memory, barriers, roles and tensor maps with
 * the builders below. The builders keep the tables that `fa4gen explain`
 * prints, so the printed plan is exactly what the emitters read.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa4gen.h"
#include "mha_plan.h"

const char *const tensor_name[TENSOR_COUNT] = {"q", "k", "v", "o", "k_rope", "do", "dk", "dv"};
const char *const scalar_name[SCALAR_COUNT] = {
    "lse", "seqlen_q", "seqlen_k", "heads_q", "batch", "scale_log2", "o_scale", "q", "kv", "indices", "out",
    "max_logits", "sink", "topk_length", "s_kv", "topk", "q_stride_s", "q_stride_h", "kv_stride", "idx_stride",
    "out_stride_s", "out_stride_h", "sm_scale", "kv_scale", "kv_scale_blocks", "aux", "num_splits", "o_accum",
    "lse_accum", "out_stride_b", "cu_seqlens_q",
    "cu_seqlens_k", "total_q", "block_table", "seqlens_k", "max_pages", "num_pages", "dq_accum", "dpsum", "nlse2",
    "sink_part", "dout", "dout_stride_b", "dout_stride_s", "dout_stride_h", "dq", "dq_stride_b", "dq_stride_s",
    "dq_stride_h", "dsink", "scale", "q_rows", "total_k", "dk_out", "dk_stride_s", "dk_stride_h", "dv_out", "dv_stride_s",
    "dv_stride_h", "softcap_scale", "alibi", "alibi_scale", "dlse", "k_new", "v_new", "k_cache", "v_cache",
    "kn_stride_b", "kn_stride_s", "kn_stride_h", "vn_stride_b", "vn_stride_s", "vn_stride_h", "kc_stride_p",
    "kc_stride_r", "kc_stride_h", "vc_stride_p", "vc_stride_r", "vc_stride_h", "seqlen_base", "seqlens_out",
    "page_rows", "s_new", "heads_kv", "dk_stride_b", "dv_stride_b", "timeline", "dq_sem", "tail_first", "tail_parts", "tail_ws",
    "tail_bytes", "tile_ctr"};

/* A builder's table is full: remember which (plan_make fails with it) and drop the entry. */
static int full(Plan *p, int n, int max, const char *table)
{
    if (n < max) return 0;
    if (!p->overflow) p->overflow = table;
    return 1;
}

static void copy_name(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

uint32_t plan_smem(Plan *p, const char *name, uint32_t size, uint32_t align, const char *what)
{
    if (full(p, p->n_smem, PLAN_MAX_SMEM, "smem (PLAN_MAX_SMEM)")) return UINT32_MAX;
    uint32_t off = (p->smem_bytes + align - 1) / align * align;
    SmemEntry *s = &p->smem[p->n_smem++];
    copy_name(s->name, sizeof s->name, name);
    copy_name(s->what, sizeof s->what, what);
    s->offset = off;
    s->size = size;
    s->align = align;
    p->smem_bytes = off + size;
    return off;
}

const SmemEntry *plan_smem_find(const Plan *p, const char *name)
{
    for (int i = 0; i < p->n_smem; i++)
        if (!strcmp(p->smem[i].name, name)) return &p->smem[i];
    return NULL;
}

void plan_role(Plan *p, const char *name, int first_warp, int warps, int regs, const char *job)
{
    if (full(p, p->n_roles, PLAN_MAX_ROLES, "roles (PLAN_MAX_ROLES)")) return;
    Role *r = &p->roles[p->n_roles++];
    copy_name(r->name, sizeof r->name, name);
    copy_name(r->job, sizeof r->job, job);
    r->first_warp = first_warp;
    r->warps = warps;
    r->regs = regs;
}

int plan_bar(Plan *p, const char *name, int threads, const char *what)
{
    if (full(p, p->n_bars, PLAN_MAX_BARS, "named barriers (PLAN_MAX_BARS)")) return -1;
    NamedBar *b = &p->bars[p->n_bars];
    copy_name(b->name, sizeof b->name, name);
    copy_name(b->what, sizeof b->what, what);
    b->id = p->n_bars + 1; /* id 0 is bar.sync 0 / __syncthreads */
    b->threads = threads;
    p->n_bars++;
    return b->id;
}

void plan_map(Plan *p, const char *name, TensorId t, DType dt, uint32_t depth, uint32_t box_depth,
              uint32_t box_seq, uint32_t box_head, int swizzle)
{
    if (full(p, p->n_maps, PLAN_MAX_MAPS, "tensor maps (PLAN_MAX_MAPS)")) return;
    MapSpec *m = &p->maps[p->n_maps++];
    copy_name(m->name, sizeof m->name, name);
    m->tensor = t;
    m->mode = MAP_TILED;
    m->rank = 4;
    m->dtype = dt;
    m->depth = depth;
    m->box[0] = box_depth;
    m->box[1] = box_seq;
    m->box[2] = box_head;
    m->box[3] = 1;
    m->swizzle = swizzle;
    m->box_bytes = box_depth * box_seq * box_head * (uint32_t)dtype_bytes[dt];
}

uint32_t plan_tmem(Plan *p, const char *name, uint32_t col, uint32_t ncols, const char *what)
{
    if (full(p, p->n_tmem, PLAN_MAX_TMEM, "TMEM (PLAN_MAX_TMEM)")) return UINT32_MAX;
    TmemEntry *t = &p->tmem[p->n_tmem++];
    copy_name(t->name, sizeof t->name, name);
    copy_name(t->what, sizeof t->what, what);
    t->col = col;
    t->ncols = ncols;
    return col;
}

void plan_note(Plan *p, const char *key, const char *fmt, ...)
{
    if (full(p, p->n_notes, PLAN_MAX_NOTES, "notes (PLAN_MAX_NOTES)")) return;
    PlanNote *n = &p->notes[p->n_notes++];
    copy_name(n->key, sizeof n->key, key);
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(n->value, sizeof n->value, fmt, ap);
    va_end(ap);
    /* explain must say all of it: a note cut off is the planner's bug */
    if (len >= (int)sizeof n->value && !p->overflow) p->overflow = "note text (PlanNote.value)";
}

uint32_t plan_mbar(Plan *p, const char *name, int n, int count, const char *what)
{
    uint32_t off = plan_smem(p, name, 8u * (uint32_t)n, 8, what);
    if (full(p, p->n_mbars, PLAN_MAX_MBARS, "mbarriers (PLAN_MAX_MBARS)")) return off;
    PlanMbar *m = &p->mbars[p->n_mbars++];
    copy_name(m->name, sizeof m->name, name);
    m->off = off, m->n = n, m->count = count;
    return off;
}

const PlanMbar *plan_mbar_find(const Plan *p, const char *name)
{
    for (int i = 0; i < p->n_mbars; i++)
        if (!strcmp(p->mbars[i].name, name)) return &p->mbars[i];
    return NULL;
}

void plan_param_map(Plan *p, int map)
{
    if (full(p, p->n_params, PLAN_MAX_PARAMS, "parameters (PLAN_MAX_PARAMS)")) return;
    char name[sizeof p->maps[0].name];
    copy_name(name, sizeof name, p->maps[map].name);
    ParamSpec *q = &p->params[p->n_params++];
    snprintf(q->name, sizeof q->name, "tmap_%s", name);
    q->type = PARAM_TMAP;
    q->index = map;
}

void plan_param_scalar(Plan *p, ScalarId s, ParamType type)
{
    if (full(p, p->n_params, PLAN_MAX_PARAMS, "parameters (PLAN_MAX_PARAMS)")) return;
    ParamSpec *q = &p->params[p->n_params++];
    copy_name(q->name, sizeof q->name, scalar_name[s]);
    q->type = type;
    q->index = (int)s;
}

void plan_geometry(const Config *c, Plan *p)
{
    p->bm = c->bm, p->bn = c->bn, p->qk = c->qk_depth, p->ov = c->ov_depth;
    p->elem_bytes = dtype_bytes[c->dtype];
    p->swizzle_bytes = c->swizzle;
    p->chunk_elems = c->swizzle / p->elem_bytes;
    p->qk_chunks = (p->qk + p->chunk_elems - 1) / p->chunk_elems;
    p->ov_chunks = (p->ov + p->chunk_elems - 1) / p->chunk_elems;
    p->stages = c->stages;
    p->smem_align = 1024; /* swizzle patterns repeat every 1024 B: tiles start on that boundary */
}

int plan_refuse(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* Concurrent CTAs should find their K and V in L2: half of an H100's 50 MB (H200 60 MB) for K/V, the rest for the
 * Q/O streams. */
uint32_t plan_l2_kv_rows(const Config *c)
{
    return (24u << 20) / ((uint32_t)(c->qk_depth + c->ov_depth) * (uint32_t)dtype_bytes[c->dtype]);
}

int plan_make(const Config *c, Plan *p, char *err, size_t n)
{
    memset(p, 0, sizeof *p);
    p->cfg = *c;
    if (config_fill_defaults(&p->cfg, err, n) || config_check(&p->cfg, err, n)) return -1;
    p->target = target_get(p->cfg.target);
    config_canonical(&p->cfg, p->canonical, sizeof p->canonical);
    config_symbol(&p->cfg, p->symbol, sizeof p->symbol);
    p->hash = config_hash(&p->cfg);
    p->cluster[0] = p->cluster[1] = p->cluster[2] = 1;
    p->ctas_per_sm = 1;
    const Family *f = target_family(p->target, p->cfg.kind, err, n);
    if (!f || f->plan(&p->cfg, p, err, n)) return -1;
    p->l2_kv_rows = plan_l2_kv_rows(&p->cfg);
    if (p->cfg.kind == KIND_MHA && p->head_major == TILE_FIT)
        plan_note(p, "tile order", "a head's m-blocks consecutive (descending): CTAs side by side share its K/V in "
                  "L2; if all heads' K+V fit 24 MB (%u rows a kv head), all longest m-blocks first; waves alternate",
                  p->l2_kv_rows);
    else if (p->cfg.kind == KIND_MHA && p->head_major)
        plan_note(p, "tile order", "a head's m-blocks are consecutive tiles (descending), so CTAs side by side share "
                  "its K and V while they are in L2; a CTA walks waves of grid tiles in alternating direction");
    else if (p->cfg.kind == KIND_MHA)
        plan_note(p, "tile order", "heads grouped so their K+V (%u rows per kv head) fit 24 MB of L2; m-blocks "
                  "descending", p->l2_kv_rows);
    if (p->overflow) {
        snprintf(err, n, "internal: the plan's %s table is full for %s; raise the limit in fa4gen.h", p->overflow,
                 p->canonical);
        return -1;
    }
    p->smem_launch = p->smem_bytes + p->smem_align;
    uint32_t cap = p->smem_cap ? p->smem_cap : p->target->smem_limit;
    char occ[40] = "";
    if (p->ctas_per_sm > 1) snprintf(occ, sizeof occ, " a CTA at occupancy %d", p->ctas_per_sm);
    if (p->smem_launch > cap) {
        snprintf(err, n,
                 "smem: the plan needs %u bytes of shared memory (incl. %u alignment slack) but %s allows %u%s; "
                 "%u bytes over: lower stages, bn or bm",
                 p->smem_launch, p->smem_align, p->target->name, cap, occ, p->smem_launch - cap);
        return -1;
    }
    return 0;
}

/* ---------------------------- explain ---------------------------- */

char *plan_explain_text(const Plan *p)
{
    Buf b = {0};
    const Config *c = &p->cfg;
    buf_printf(&b, "config   %s\n", p->canonical);
    buf_printf(&b, "symbol   %s\n", p->symbol);
    buf_printf(&b, "hash     %016llx (canonical config + generator %s)\n", (unsigned long long)p->hash,
               FA4GEN_VERSION);
    buf_printf(&b, "target   %s (ptx %s, .target %s)\n\n", p->target->name, p->target->ptx_version,
               p->target->ptx_target);
    buf_printf(&b, "tiles\n");
    buf_printf(&b, "  query rows per CTA  %d\n", p->rows_per_cta);
    buf_printf(&b, "  bm x bn             %d x %d\n", p->bm, p->bn);
    buf_printf(&b, "  depth qk / ov       %d / %d (%s, %d B)\n", p->qk, p->ov, dtype_name[c->dtype], p->elem_bytes);
    buf_printf(&b, "  swizzle             %d B: chunks of %d elements; qk %d chunks, ov %d chunks\n",
               p->swizzle_bytes, p->chunk_elems, p->qk_chunks, p->ov_chunks);
    buf_printf(&b, "  kv stages           %d\n", p->stages);
    buf_printf(&b, "  group               %d query heads per kv head\n", c->group);
    buf_printf(&b, "  mask                %s\n", c->mask == MASK_NONE ? "none" : c->mask == MASK_CAUSAL
                                                   ? "causal (bottom-right aligned)" : "window");
    for (int i = 0; i < p->n_notes; i++) buf_printf(&b, "  %-19s %s\n", p->notes[i].key, p->notes[i].value);

    buf_printf(&b, "\nshared memory (%u B used, %u B launched, base aligned to %u)\n", p->smem_bytes,
               p->smem_launch, p->smem_align);
    buf_printf(&b, "  %-18s %8s %8s %6s  %s\n", "buffer", "offset", "size", "align", "what");
    for (int i = 0; i < p->n_smem; i++) {
        const SmemEntry *s = &p->smem[i];
        buf_printf(&b, "  %-18s %8u %8u %6u  %s\n", s->name, s->offset, s->size, s->align, s->what);
    }
    if (p->n_tmem) {
        buf_printf(&b, "\ntensor memory (%d columns allocated)\n", p->tmem_cols);
        for (int i = 0; i < p->n_tmem; i++)
            buf_printf(&b, "  %-10s cols %3u..%3u  %s\n", p->tmem[i].name, p->tmem[i].col,
                       p->tmem[i].col + p->tmem[i].ncols - 1, p->tmem[i].what);
    }
    buf_printf(&b, "\nmbarriers (arrivals that complete a phase; transaction bytes come on top)\n");
    for (int i = 0; i < p->n_mbars; i++)
        buf_printf(&b, "  %-16s x%d at %6u  %4d arrival(s)\n", p->mbars[i].name, p->mbars[i].n, p->mbars[i].off,
                   p->mbars[i].count);
    buf_printf(&b, "\nroles (%d threads; %d registers per thread at entry)\n", p->threads, p->entry_regs);
    for (int i = 0; i < p->n_roles; i++) {
        const Role *r = &p->roles[i];
        buf_printf(&b, "  %-12s warps %2d..%-2d regs %3d  %s\n", r->name, r->first_warp, r->first_warp + r->warps - 1,
                   r->regs, r->job);
    }
    if (p->n_bars) {
        buf_printf(&b, "\nnamed barriers\n");
        for (int i = 0; i < p->n_bars; i++)
            buf_printf(&b, "  %2d %-18s %4d threads  %s\n", p->bars[i].id, p->bars[i].name, p->bars[i].threads,
                       p->bars[i].what);
    }
    buf_printf(&b, "\ntensor maps (global dims: depth, seq, head, batch)\n");
    for (int i = 0; i < p->n_maps; i++) {
        const MapSpec *m = &p->maps[i];
        buf_printf(&b, "  %-8s tensor %-6s %s depth %4u  box {%u, %u, %u, %u}  swizzle %3d  %u B per box  rank %u %s\n",
                   m->name, tensor_name[m->tensor], dtype_name[m->dtype], m->depth, m->box[0], m->box[1], m->box[2],
                   m->box[3], m->swizzle, m->box_bytes, m->rank, m->mode == MAP_GATHER4 ? "gather4" : "tiled");
    }
    static const char *const ptype[] = {[PARAM_TMAP] = "tensor map", [PARAM_U64] = "u64", [PARAM_U32] = "u32",
                                        [PARAM_F32] = "f32"};
    buf_printf(&b, "\nparams (the entry's .param list, in order; the runtime packs launches from it)\n ");
    for (int i = 0; i < p->n_params; i++)
        buf_printf(&b, " p_%s (%s)%s", p->params[i].name, ptype[p->params[i].type], i + 1 < p->n_params ? "," : "\n");
    buf_printf(&b, "\nlaunch\n");
    char each[80];
    if (p->persistent && p->ctas_per_sm > 1)
        snprintf(each, sizeof each, "min(tiles, %d x SMs) CTAs stride over them, %d an SM", p->ctas_per_sm,
                 p->ctas_per_sm);
    else if (p->persistent) snprintf(each, sizeof each, "min(tiles, SMs) CTAs stride over them");
    else if (p->cfg.cluster_split) snprintf(each, sizeof each, "one cluster of %d CTAs (its splits) each", p->cluster[0]);
    else if (p->cluster[0] > 1) snprintf(each, sizeof each, "one cluster of %d CTAs each", p->cluster[0]);
    else snprintf(each, sizeof each, "one CTA each");
    buf_printf(&b, "  block %d threads, cluster %dx%dx%d, dynamic smem %u B, grid: %s\n", p->threads, p->cluster[0],
               p->cluster[1], p->cluster[2], p->smem_launch, p->persistent ? "persistent" : "one tile per cluster (a cluster of 1 is a CTA)");
    if (p->cfg.kind == KIND_MLA_SPARSE) /* a tile is one token and heads_per_cta heads per CTA of the cluster */
        buf_printf(&b, "  grid  tiles = s_q * ceil(h_q / %d); %s\n", p->heads_per_cta * p->cluster[0], each);
    else if (p->cfg.kind == KIND_COMBINE)
        buf_printf(&b, "  grid  ceil(batch * heads_q * seqlen_q / %d) CTAs, one row per warp\n", p->rows_per_cta);
    else if (p->cfg.kind == KIND_MHA_BWD)
        buf_printf(&b, "  grid  ceil(seqlen_k / %d) * (heads_q / %d) * batch CTAs, one kv block each\n", p->bn,
                   p->cfg.group);
    else if (p->cfg.kind == KIND_KV_APPEND)
        buf_printf(&b, "  grid  ceil(batch * s_new * heads_kv / %d) CTAs, one (token, kv head) row pair per warp\n",
                   p->rows_per_cta);
    else if (p->cfg.kind == KIND_MHA_BWD_PRE || p->cfg.kind == KIND_MHA_BWD_DQ)
        buf_printf(&b, "  grid  ceil(seqlen_q / %d) * heads_q * batch CTAs, one m-block each\n", p->rows_per_cta);
    else
        buf_printf(&b, "  grid  tiles = ceil(seqlen_q / %d) * (heads_q / %d) * batch%s; %s\n",
                   p->rows_per_cta * (p->cfg.cluster_split ? 1 : p->cluster[0]), p->heads_per_cta,
                   p->cfg.split && !p->cfg.cluster_split ? " * num_splits" : "", each);
    if (p->pdl_dependent)
        buf_printf(&b, "  pdl   a programmatic dependent of the stream's previous kernel: griddepcontrol.wait before "
                   "any global memory access%s\n", p->pdl_early_kv ? " but the early K/V loads below"
                   : mha_prefetch_rereads(p) ? " but the length and table reads that aim the prefetches below"
                   : "");
    if (p->pdl_trigger)
        buf_printf(&b, "  pdl   griddepcontrol.launch_dependents: the stream's next kernel (a split's combine, the next "
                   "call) may launch while this one runs\n");
    if (p->pdl_early_kv)
        buf_printf(&b, "  pdl   early kv: the first tile's first %d K/V blocks (ascending; only rows before seqlen_k - "
                   "seqlen_q) load before the wait, under the previous kernel's tail\n", p->pdl_early_kv);
    if (p->pdl_prefetch_kv)
        buf_printf(&b, "  pdl   prefetch kv: the first tile's %snext %d K/V blocks (in load order, after any early ones) "
                   "are prefetched into L2 before the wait (a hint: no value is read)%s%s\n",
                   mha_prefetch_q(p) ? "Q and its " : "", p->pdl_prefetch_kv,
                   mha_prefetch_q(p) ? ", only while the previous grid runs (pdl watch)" : "",
                   mha_prefetch_rereads(p) ? "; paged: their table entries and the sequence's length are read "
                   "to aim them and read again after the wait" : "");
    if (b.oom) { buf_free(&b); return NULL; }
    return b.p;
}

static void json_str(Buf *b, const char *s)
{
    buf_puts(b, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') buf_printf(b, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) buf_printf(b, "\\u%04x", *s);
        else buf_printf(b, "%c", *s);
    }
    buf_puts(b, "\"");
}

char *plan_explain_json(const Plan *p)
{
    Buf b = {0};
    buf_puts(&b, "{\"config\": ");
    json_str(&b, p->canonical);
    buf_puts(&b, ", \"symbol\": ");
    json_str(&b, p->symbol);
    buf_printf(&b, ", \"hash\": \"%016llx\", \"generator\": \"%s\", \"target\": \"%s\", \"ptx_target\": \"%s\"",
               (unsigned long long)p->hash, FA4GEN_VERSION, p->target->name, p->target->ptx_target);
    buf_printf(&b, ", \"tiles\": {\"rows_per_cta\": %d, \"bm\": %d, \"bn\": %d, \"qk\": %d, \"ov\": %d, "
                   "\"elem_bytes\": %d, \"swizzle_bytes\": %d, \"chunk_elems\": %d, \"qk_chunks\": %d, "
                   "\"ov_chunks\": %d, \"stages\": %d, \"group\": %d}",
               p->rows_per_cta, p->bm, p->bn, p->qk, p->ov, p->elem_bytes, p->swizzle_bytes, p->chunk_elems,
               p->qk_chunks, p->ov_chunks, p->stages, p->cfg.group);
    buf_puts(&b, ", \"notes\": {");
    for (int i = 0; i < p->n_notes; i++) {
        buf_puts(&b, i ? ", " : "");
        json_str(&b, p->notes[i].key);
        buf_puts(&b, ": ");
        json_str(&b, p->notes[i].value);
    }
    buf_printf(&b, "}, \"smem\": {\"bytes\": %u, \"launch\": %u, \"base_align\": %u, \"entries\": [", p->smem_bytes,
               p->smem_launch, p->smem_align);
    for (int i = 0; i < p->n_smem; i++) {
        const SmemEntry *s = &p->smem[i];
        buf_printf(&b, "%s{\"name\": \"%s\", \"offset\": %u, \"size\": %u, \"align\": %u, \"what\": ", i ? ", " : "",
                   s->name, s->offset, s->size, s->align);
        json_str(&b, s->what);
        buf_puts(&b, "}");
    }
    buf_printf(&b, "]}, \"tmem\": {\"cols\": %d, \"entries\": [", p->tmem_cols);
    for (int i = 0; i < p->n_tmem; i++)
        buf_printf(&b, "%s{\"name\": \"%s\", \"col\": %u, \"ncols\": %u}", i ? ", " : "", p->tmem[i].name,
                   p->tmem[i].col, p->tmem[i].ncols);
    buf_puts(&b, "]}, \"mbarriers\": [");
    for (int i = 0; i < p->n_mbars; i++)
        buf_printf(&b, "%s{\"name\": \"%s\", \"n\": %d, \"at\": %u, \"arrivals\": %d}", i ? ", " : "",
                   p->mbars[i].name, p->mbars[i].n, p->mbars[i].off, p->mbars[i].count);
    buf_printf(&b, "], \"threads\": %d, \"entry_regs\": %d, \"roles\": [", p->threads, p->entry_regs);
    for (int i = 0; i < p->n_roles; i++) {
        const Role *r = &p->roles[i];
        buf_printf(&b, "%s{\"name\": \"%s\", \"first_warp\": %d, \"warps\": %d, \"regs\": %d, \"job\": ", i ? ", " : "",
                   r->name, r->first_warp, r->warps, r->regs);
        json_str(&b, r->job);
        buf_puts(&b, "}");
    }
    buf_puts(&b, "], \"named_barriers\": [");
    for (int i = 0; i < p->n_bars; i++)
        buf_printf(&b, "%s{\"id\": %d, \"name\": \"%s\", \"threads\": %d}", i ? ", " : "", p->bars[i].id,
                   p->bars[i].name, p->bars[i].threads);
    buf_puts(&b, "], \"tensor_maps\": [");
    for (int i = 0; i < p->n_maps; i++) {
        const MapSpec *m = &p->maps[i];
        buf_printf(&b, "%s{\"name\": \"%s\", \"tensor\": \"%s\", \"dtype\": \"%s\", \"depth\": %u, "
                       "\"box\": [%u, %u, %u, %u], \"swizzle\": %d, \"box_bytes\": %u}",
                   i ? ", " : "", m->name, tensor_name[m->tensor], dtype_name[m->dtype], m->depth, m->box[0],
                   m->box[1], m->box[2], m->box[3], m->swizzle, m->box_bytes);
    }
    buf_puts(&b, "], \"params\": [");
    for (int i = 0; i < p->n_params; i++)
        buf_printf(&b, "%s{\"name\": \"p_%s\", \"type\": \"%s\"}", i ? ", " : "", p->params[i].name,
                   p->params[i].type == PARAM_TMAP ? "tmap" : p->params[i].type == PARAM_U64 ? "u64"
                   : p->params[i].type == PARAM_U32 ? "u32" : "f32");
    buf_printf(&b, "], \"launch\": {\"threads\": %d, \"cluster\": [%d, %d, %d], \"smem\": %u, \"persistent\": %s, "
                   "\"rows_per_cta\": %d, \"heads_per_cta\": %d, \"pdl_dependent\": %s, \"pdl_trigger\": %s, "
                   "\"pdl_early_kv\": %d, \"pdl_prefetch_kv\": %d}}\n",
               p->threads, p->cluster[0], p->cluster[1], p->cluster[2], p->smem_launch,
               p->persistent ? "true" : "false", p->rows_per_cta, p->heads_per_cta, p->pdl_dependent ? "true" : "false",
               p->pdl_trigger ? "true" : "false", p->pdl_early_kv, p->pdl_prefetch_kv);
    if (b.oom) { buf_free(&b); return NULL; }
    return b.p;
}
