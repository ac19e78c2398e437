// A relative-position bias read from aux: float[257] indexed by k - q clamped to -128..128.
__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)
{
    int d = min(max(k - q, -128), 128);
    return s + __ldg((const float *)aux + d + 128);
}
