/* ref_mha_bwd.c - host reference for the attention backward (see ref_mha_bwd.h). */
#include "ref_mha_bwd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double at(const RefBwd *p, const RefTensor *t, int seqlen, int heads, int b, int s, int h, int c)
{
    int64_t st[3];
    if (t->stride[0] || t->stride[1] || t->stride[2]) memcpy(st, t->stride, sizeof st);
    else ref_packed_strides(seqlen, heads, p->depth, st);
    return ref_load(p->dtype, t->data, (int64_t)b * st[0] + (int64_t)s * st[1] + (int64_t)h * st[2] + c);
}

int ref_mha_bwd(const RefBwd *p, double *o, double *lse, double *dq, double *dk, double *dv, double *dsink, char *err,
                size_t errlen)
{
    int B = p->batch, SQ = p->seqlen_q, SK = p->seqlen_k, HQ = p->heads_q, HK = p->heads_kv, D = p->depth;
    if (B < 1 || SQ < 1 || SK < 1 || HQ < 1 || HK < 1 || D < 1 || HQ % HK) {
        snprintf(err, errlen, "ref_mha_bwd: bad shape");
        return -1;
    }
    double scale = p->softmax_scale != 0 ? p->softmax_scale : 1.0 / sqrt((double)D);
    int group = HQ / HK;
    double *qi = malloc(sizeof(double) * (size_t)D), *oi = malloc(sizeof(double) * (size_t)D);
    double *doi = malloc(sizeof(double) * (size_t)D), *dqi = malloc(sizeof(double) * (size_t)D);
    double *kk = malloc(sizeof(double) * (size_t)SK * (size_t)D), *vv = malloc(sizeof(double) * (size_t)SK * (size_t)D);
    double *sj = malloc(sizeof(double) * (size_t)SK);
    if (!qi || !oi || !doi || !dqi || !kk || !vv || !sj) {
        snprintf(err, errlen, "ref_mha_bwd: out of memory");
        free(qi), free(oi), free(doi), free(dqi), free(kk), free(vv), free(sj);
        return -1;
    }
    size_t nk = (size_t)B * (size_t)SK * (size_t)HK * (size_t)D;
    if (dk) memset(dk, 0, nk * sizeof *dk);
    if (dv) memset(dv, 0, nk * sizeof *dv);
    if (dsink) memset(dsink, 0, (size_t)HQ * sizeof *dsink);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < HQ; h++) {
            int hk = h / group;
            for (int j = 0; j < SK; j++)
                for (int c = 0; c < D; c++) {
                    kk[(size_t)j * D + c] = at(p, &p->k, SK, HK, b, j, hk, c);
                    vv[(size_t)j * D + c] = at(p, &p->v, SK, HK, b, j, hk, c);
                }
            for (int i = 0; i < SQ; i++) {
                int lo, hi;
                int n = ref_visible(p->mask, p->window_left, p->window_right, SQ, SK, i, &lo, &hi);
                for (int c = 0; c < D; c++) {
                    qi[c] = at(p, &p->q, SQ, HQ, b, i, h, c);
                    doi[c] = at(p, &p->dout, SQ, HQ, b, i, h, c);
                    oi[c] = 0, dqi[c] = 0;
                }
                double m = -INFINITY, z = 0, sum = 0;
                for (int j = lo; n && j <= hi; j++) {
                    double s = 0;
                    for (int c = 0; c < D; c++) s += qi[c] * kk[(size_t)j * D + c];
                    sj[j] = s * scale;
                    if (p->softcap > 0) sj[j] = p->softcap * tanh(sj[j] / p->softcap);
                    if (sj[j] > m) m = sj[j];
                }
                for (int j = lo; n && j <= hi; j++) sum += exp(sj[j] - m);
                z = sum;
                double psink = 0, sinkv = p->sink ? p->sink[h] : -INFINITY;
                if (p->sink && n) z += exp(sinkv - m);
                if (p->sink && n) psink = exp(sinkv - m) / z;
                double l = n ? m + log(sum) : -INFINITY;
                for (int j = lo; n && j <= hi; j++) {
                    double pj = exp(sj[j] - m) / z;
                    for (int c = 0; c < D; c++) oi[c] += pj * vv[(size_t)j * D + c];
                }
                double Di = 0, gi = p->dlse && n ? p->dlse[((size_t)b * HQ + (size_t)h) * SQ + (size_t)i] : 0;
                for (int c = 0; c < D; c++) Di += doi[c] * oi[c];
                for (int j = lo; n && j <= hi; j++) {
                    double pj = exp(sj[j] - m) / z, dp = 0;
                    for (int c = 0; c < D; c++) dp += doi[c] * vv[(size_t)j * D + c];
                    double ds = pj * (dp - Di) + gi * exp(sj[j] - l);
                    if (p->softcap > 0) {
                        double t = sj[j] / p->softcap;
                        ds *= 1 - t * t;
                    }
                    size_t kr = (((size_t)b * SK + (size_t)j) * HK + (size_t)hk) * D;
                    for (int c = 0; c < D; c++) {
                        dqi[c] += scale * ds * kk[(size_t)j * D + c];
                        if (dk) dk[kr + c] += scale * ds * qi[c];
                        if (dv) dv[kr + c] += pj * doi[c];
                    }
                }
                if (dsink && n) dsink[h] -= psink * Di;
                size_t qr = (((size_t)b * SQ + (size_t)i) * HQ + (size_t)h) * D;
                for (int c = 0; c < D; c++) {
                    if (o) o[qr + c] = oi[c];
                    if (dq) dq[qr + c] = dqi[c];
                }
                if (lse) lse[((size_t)b * HQ + (size_t)h) * SQ + (size_t)i] = l;
            }
        }
    free(qi), free(oi), free(doi), free(dqi), free(kk), free(vv), free(sj);
    return 0;
}
