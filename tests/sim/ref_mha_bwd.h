/* ref_mha_bwd.h - a host reference for the attention backward (fa4.h's fa4_mha_bwd), for the simulator's
 * harness (sim_bwd.c) and the GPU runs of the same binary.
 *
 * Written from the math and fa4.h's contract, not from gen/: every input decoded from its storage format
 * (ref_mha.h), every sum in double. For batch b, query head h (kv head h / group), visible keys of row i
 * (ref_visible: bottom-right masks):
 *   s_ij = scale q_i . k_j;  m_i = max_j s_ij;  Z_i = sum_j e^(s_ij - m_i) (+ e^(sink_h - m_i) with a sink)
 *   p_ij = e^(s_ij - m_i) / Z_i;  O_i = sum_j p_ij v_j;  LSE_i = m_i + log sum_j e^(s_ij - m_i) (no sink)
 *   dP_ij = dO_i . v_j;  D_i = dO_i . O_i;  dS_ij = p_ij (dP_ij - D_i)
 *   dQ_i = scale sum_j dS_ij k_j;  dK_j += scale dS_ij q_i;  dV_j += p_ij dO_i  (dK, dV summed over the group)
 *   dsink_h = -sum_(b, i) p_sink_i D_i,  p_sink_i = e^(sink_h - m_i) / Z_i
 * With a soft-cap c > 0: s_ij = c tanh(u_ij / c), u_ij = scale q_i . k_j, and the chain rule through it:
 *   dU_ij = dS_ij (1 - tanh^2(u_ij / c)), dQ, dK from dU instead of dS.
 * With dL/dLSE g_i (dlse): dS_ij += g_i e^(s_ij - LSE_i) (LSE without the sink; nothing for a row with no key).
 * A row that sees no key: O = 0, LSE = -inf, dQ = 0 (and p_sink = 1, D = 0: no dsink term).
 * Outputs packed: o, dout-shaped dq [batch, seqlen_q, heads_q, depth]; dk, dv [batch, seqlen_k, heads_kv,
 * depth]; lse [batch, heads_q, seqlen_q]; dsink [heads_q]. */
#ifndef FA4SIM_REF_MHA_BWD_H
#define FA4SIM_REF_MHA_BWD_H

#include "ref_mha.h"

typedef struct RefBwd {
    RefDtype dtype;
    RefTensor q, k, v, dout; /* dout: [batch, seqlen_q, heads_q, depth] */
    int batch, seqlen_q, seqlen_k, heads_q, heads_kv, depth;
    RefMask mask;
    int window_left, window_right;
    double softmax_scale;  /* 0: 1/sqrt(depth) */
    const double *sink;    /* [heads_q] or NULL */
    double softcap;        /* > 0: s = softcap tanh(u / softcap); 0: none */
    const double *dlse;    /* [batch, heads_q, seqlen_q] or NULL */
} RefBwd;

/* Any output may be NULL. Returns 0, or -1 with a sentence in err. */
int ref_mha_bwd(const RefBwd *p, double *o, double *lse, double *dq, double *dk, double *dv, double *dsink, char *err,
                size_t errlen);

#endif
