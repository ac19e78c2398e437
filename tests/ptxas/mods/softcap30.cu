// Soft-capping (Gemma 2 / Grok): 30 tanh(s / 30) with CUDA's accurate tanhf.
__device__ float score_mod(float s, int b, int h, int q, int k, const void *aux)
{
    return 30.0f * tanhf(s * (1.0f / 30.0f));
}
