// ALiBi: a per-head slope (aux: float[heads_q]) times the query-key distance.
__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)
{
    return s - __ldg((const float *)aux + h) * (float)abs(q - k);
}
