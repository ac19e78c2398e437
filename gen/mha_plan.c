/* mha_plan.c - the MHA plan pieces both target planners share (see mha_plan.h): the
 * parameter ABI, the kv tail, and the mask's key bounds. Plan stage: these fill Plan fields
 * and answer questions about the config; they emit nothing. */
#include <stdio.h>

#include "mha_plan.h"
#include "varlen.h"

void mha_plan_params(Plan *p)
{
    for (int i = 0; i < p->n_maps; i++) plan_param_map(p, i);
    plan_param_scalar(p, SCALAR_LSE, PARAM_U64);
    plan_param_scalar(p, SCALAR_SEQLEN_Q, PARAM_U32);
    plan_param_scalar(p, SCALAR_SEQLEN_K, PARAM_U32);
    plan_param_scalar(p, SCALAR_HEADS_Q, PARAM_U32);
    plan_param_scalar(p, SCALAR_BATCH, PARAM_U32);
    plan_param_scalar(p, SCALAR_SCALE_LOG2, PARAM_F32);
    plan_param_scalar(p, SCALAR_O_SCALE, PARAM_F32);
    if (p->cfg.sink) {
        plan_param_scalar(p, SCALAR_SINK, PARAM_U64);
        plan_note(p, "sink", "sink[head] (f32 [heads_q]) joins each row's softmax denominator; LSE excludes it");
    }
    if (p->cfg.softcap) {
        plan_param_scalar(p, SCALAR_SOFTCAP_SCALE, PARAM_F32);
        plan_note(p, "softcap", "s = tanh(q.k softcap_scale) (softmax_scale / cap), exponent scale cap log2 e: "
                  "cap tanh(softmax_scale q.k / cap) in natural units");
    }
    if (p->cfg.alibi) {
        plan_param_scalar(p, SCALAR_ALIBI, PARAM_U64);
        plan_param_scalar(p, SCALAR_ALIBI_SCALE, PARAM_F32);
        plan_note(p, "alibi", "s -= alibi[h] |i + seqlen_k - seqlen_q - j| (after the softcap, before the mask)");
    }
    if (p->cfg.score_mod) {
        plan_param_scalar(p, SCALAR_SM_SCALE, PARAM_F32);
        plan_param_scalar(p, SCALAR_AUX, PARAM_U64);
        plan_note(p, "score_mod", "source %016llx: s = score_mod(sm_scale q.k, b, h, q, k, aux) on every score, "
                  "then the mask", (unsigned long long)p->cfg.score_mod);
    }
    /* Every forward kernel is a programmatic dependent of the stream's previous kernel and lets the next one launch
     * early: its CTAs start as the previous grid's leave their SMs, 0.2 us after it ends instead of 1.9 (the PDL probe
     * on an H200, bench/NOTES.md "the decode's L2 prefetch"), their wait before any global memory access; a split's
     * combine, or the next call, waits for this grid in turn. */
    p->pdl_trigger = p->pdl_dependent = 1;
    /* config_check: a split kernel (dense or paged K/V) or the dense, unsplit sm90a forward */
    p->pdl_prefetch_kv = p->cfg.prefetch > 0 ? p->cfg.prefetch : 0;
    if (p->cfg.split) {
        /* config_check: dense K/V, no cluster or CTA pair; the sm100a plan lowers it to its rings' take */
        p->pdl_early_kv = p->cfg.early ? p->stages : 0;
        if (!p->cfg.cluster_split) { /* a cluster split: its count is the cluster's, its partials in smem */
            plan_param_scalar(p, SCALAR_NUM_SPLITS, PARAM_U32);
            plan_param_scalar(p, SCALAR_O_ACCUM, PARAM_U64);
            plan_param_scalar(p, SCALAR_LSE_ACCUM, PARAM_U64);
        }
        if (!p->cfg.varlen) { /* varlen has out and its seq/head strides already (varlen_plan_params) */
            plan_param_scalar(p, SCALAR_OUT, PARAM_U64);
            plan_param_scalar(p, SCALAR_OUT_STRIDE_B, PARAM_U64);
            plan_param_scalar(p, SCALAR_OUT_STRIDE_S, PARAM_U64);
            plan_param_scalar(p, SCALAR_OUT_STRIDE_H, PARAM_U64);
        }
        plan_note(p, "split", "tiles x num_splits CTAs; split s takes kv blocks [s b, s b + b), b = ceil(kv blocks / "
                  "num_splits), cut to the mask's range; writes O / l (f32) and LSE to %s",
                  p->cfg.cluster_split ? "smem (cluster split)" : "o_accum, lse_accum");
        if (p->cfg.cluster_split)
            plan_note(p, "split out", "the merged O (%s) and LSE to out and lse; no workspace, no combine kernel",
                      dtype_name[p->cfg.dtype]);
        else if (p->cfg.varlen)
            plan_note(p, "split rows", "partial rows in the varlen LSE order per split: [num_splits, heads_q, total_q]; "
                      "the combine sees one batch of total_q rows");
        if (!p->cfg.cluster_split)
            plan_note(p, "split 1", "num_splits 1: the final O (%s) and LSE straight to out and lse; no combine, no "
                      "workspace", dtype_name[p->cfg.dtype == DT_E4M3 ? DT_BF16 : p->cfg.dtype]);
    }
    if (p->cfg.varlen) varlen_plan_params(p);
    if (p->cfg.page) paged_plan_params(p);
    if (p->cfg.dynamic > 0) plan_param_scalar(p, SCALAR_TILE_CTR, PARAM_U64);
    if (p->cfg.timeline) {
        plan_param_scalar(p, SCALAR_TIMELINE, PARAM_U64);
        plan_note(p, "timeline", "debug: tile t's phase stamps (MhaTimelineSlot) at p_timeline + t x %d x 8, u64 each, "
                  "by the producer thread and the first thread of consumers 0 and last", MHA_TIMELINE_SLOTS);
    }
}

void mha_plan_kv_tail(Plan *p)
{
    p->kv_tail = p->cfg.kind == KIND_MHA && (p->cfg.varlen || p->cfg.page) && !p->cfg.stale;
    p->kv_tail_pass = p->kv_tail ? SCRUB_LANES * SCRUB_STORE_BYTES : 0;
}

void mask_bounds(const Config *c, int *wl, int *wr)
{
    *wl = *wr = -1;
    if (c->mask == MASK_CAUSAL) *wr = 0;
    if (c->mask == MASK_WINDOW) {
        *wl = c->window_left;
        *wr = c->window_right;
    }
}
