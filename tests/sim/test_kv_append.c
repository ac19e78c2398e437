/* test_kv_append.c - fa4_kv_append (the kv-append kernel, gen/kv_append.c) on the simulator or a GPU (it dlopens
 * libcuda.so.1 like test_combine): each case fills a cache with random bytes, appends random new rows through
 * libfa4rt, and compares every byte of both caches and the lengths it wrote with a host model of fa4.h's rule:
 * token i of sequence b goes to position cache_seqlens[b] + i of its row (dense: cache_batch_idx[b] or b) or of
 * the page block_table[b][p / page_size] (paged), and only when that position is inside the cache and the page in
 * the pool; seqlens_out[b] = cache_seqlens[b] + s_new saturated at 2^31 - 1. Cases: dense with and without
 * cache_batch_idx, one host length for all, a cache batch larger than the batch, padded strides, K and V of other
 * depths (a copy step that holds both), several copy steps (d 576/512, e4m3 and bf16), a page size that is no power
 * of two, and the bad values: negative lengths, lengths past the cache (near 2^31: the saturation), table entries
 * and rows outside the pool. Then refusals (each names its argument; nothing launched).
 * Target from FA4SIM_CC (100: sm100a, else sm90a). Prints one line per case and 'test_kv_append: N passed, N
 * failed'; exit 1 on failure. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa4.h"

typedef struct {
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*HtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*DtoH)(void *, CUdeviceptr, size_t);
    CUresult (*Sync)(void);
} Cu;

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static void fill(unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)rnd();
}

/* One case. Tensor shapes and element strides (0 = packed) as fa4_kv_append_args takes them. */
typedef struct {
    const char *name;
    fa4_dtype dtype;
    int batch, s_new, heads, kd, vd;
    int paged;
    int cache_batch, cache_rows;       /* dense */
    int page_size, max_pages, num_pages; /* paged */
    int pad_new, pad_cache;            /* extra elements per head row of the new rows / the caches */
    int use_idx;                       /* dense: cache_batch_idx */
    int host_len;                      /* -1: a device array, else the host length for every sequence */
    const int32_t *lens;               /* device lengths (batch entries) */
    const int32_t *table;              /* block_table (paged, batch x max_pages) or cache_batch_idx (dense) */
    int want_out;
} Case;

static const int eb_of[] = {[FA4_BF16] = 2, [FA4_FP16] = 2, [FA4_E4M3] = 1};

static int run_case(const Cu *cu, fa4_ctx *ctx, const Case *c)
{
    int eb = eb_of[c->dtype], B = c->batch, S = c->s_new, H = c->heads;
    int pages = c->paged ? c->num_pages : c->cache_batch, rows = c->paged ? c->page_size : c->cache_rows;
    int64_t cap = c->paged ? (int64_t)c->max_pages * c->page_size : c->cache_rows;
    /* element strides: head rows padded (a multiple of 16 bytes), then packed above */
    int64_t n_h[2] = {c->kd + c->pad_new, c->vd + c->pad_new}, c_h[2] = {c->kd + c->pad_cache, c->vd + c->pad_cache};
    int64_t n_s[2] = {H * n_h[0], H * n_h[1]}, n_b[2] = {S * n_s[0], S * n_s[1]};
    int64_t c_r[2] = {H * c_h[0], H * c_h[1]}, c_p[2] = {rows * c_r[0], rows * c_r[1]};
    size_t new_bytes[2] = {(size_t)(B * n_b[0] * eb), (size_t)(B * n_b[1] * eb)};
    size_t cache_bytes[2] = {(size_t)(pages * c_p[0] * eb), (size_t)(pages * c_p[1] * eb)};
    unsigned char *nw[2], *cache[2], *want[2], *got[2];
    for (int t = 0; t < 2; t++) {
        nw[t] = malloc(new_bytes[t]), cache[t] = malloc(cache_bytes[t]);
        want[t] = malloc(cache_bytes[t]), got[t] = malloc(cache_bytes[t]);
        fill(nw[t], new_bytes[t]), fill(cache[t], cache_bytes[t]);
        memcpy(want[t], cache[t], cache_bytes[t]);
    }
    int32_t out[64], want_out[64];
    for (int b = 0; b < B; b++) out[b] = want_out[b] = (int32_t)0x5a5a5a5a; /* not written unless asked */
    /* the host model of fa4.h's rule */
    for (int b = 0; b < B; b++) {
        int64_t len = c->host_len >= 0 ? c->host_len : c->lens[b];
        if (c->want_out) want_out[b] = (int32_t)((len > INT32_MAX - S ? INT32_MAX - S : len) + S);
        for (int i = 0; i < S; i++) {
            int64_t pos = len + i;
            if (pos < 0 || pos >= cap) continue;
            int64_t page = c->paged ? c->table[b * c->max_pages + pos / c->page_size] : c->use_idx ? c->table[b] : b;
            if (page < 0 || page >= pages) continue;
            int64_t r = pos % rows;
            for (int h = 0; h < H; h++)
                for (int t = 0; t < 2; t++) {
                    int d = t ? c->vd : c->kd;
                    memcpy(want[t] + (page * c_p[t] + r * c_r[t] + h * c_h[t]) * eb,
                           nw[t] + (b * n_b[t] + i * n_s[t] + h * n_h[t]) * eb, (size_t)(d * eb));
                }
        }
    }
    CUdeviceptr dn[2], dc[2], d_lens = 0, d_tab = 0, d_out = 0;
    for (int t = 0; t < 2; t++) {
        cu->MemAlloc(&dn[t], new_bytes[t]), cu->MemAlloc(&dc[t], cache_bytes[t]);
        cu->HtoD(dn[t], nw[t], new_bytes[t]), cu->HtoD(dc[t], cache[t], cache_bytes[t]);
    }
    if (c->host_len < 0) cu->MemAlloc(&d_lens, (size_t)B * 4), cu->HtoD(d_lens, c->lens, (size_t)B * 4);
    size_t tab_n = c->paged ? (size_t)B * (size_t)c->max_pages : c->use_idx ? (size_t)B : 0;
    if (tab_n) cu->MemAlloc(&d_tab, tab_n * 4), cu->HtoD(d_tab, c->table, tab_n * 4);
    if (c->want_out) cu->MemAlloc(&d_out, (size_t)B * 4), cu->HtoD(d_out, out, (size_t)B * 4);

    fa4_kv_append_args a = FA4_KV_APPEND_ARGS_INIT;
    a.dtype = c->dtype;
    a.k = (void *)dn[0], a.v = (void *)dn[1], a.k_cache = (void *)dc[0], a.v_cache = (void *)dc[1];
    a.batch = B, a.s_new = S, a.heads_kv = H, a.k_depth = c->kd, a.v_depth = c->vd;
    for (int t = 0; t < 2; t++) {
        int64_t *ns = t ? a.v_stride : a.k_stride, *cs = t ? a.v_cache_stride : a.k_cache_stride;
        ns[0] = n_b[t], ns[1] = n_s[t], ns[2] = n_h[t];
        cs[0] = c_p[t], cs[1] = c_r[t], cs[2] = c_h[t];
    }
    if (c->paged) {
        a.block_table = (const int32_t *)d_tab;
        a.page_size = c->page_size, a.max_pages = c->max_pages, a.num_pages = c->num_pages;
    } else {
        a.cache_batch = c->cache_batch, a.cache_rows = c->cache_rows;
        a.cache_batch_idx = c->use_idx ? (const int32_t *)d_tab : NULL;
    }
    if (c->host_len >= 0) a.cache_seqlen = c->host_len;
    else a.cache_seqlens = (const int32_t *)d_lens;
    a.seqlens_out = (int32_t *)d_out;
    fa4_status s = fa4_kv_append(ctx, &a, NULL);
    CUresult r = s ? CUDA_SUCCESS : cu->Sync();
    for (int t = 0; t < 2; t++) cu->DtoH(got[t], dc[t], cache_bytes[t]);
    if (c->want_out) cu->DtoH(out, d_out, (size_t)B * 4);
    int bad_bytes = 0, bad_out = 0;
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < cache_bytes[t]; i++) bad_bytes += got[t][i] != want[t][i];
    for (int b = 0; b < B; b++) bad_out += out[b] != want_out[b];
    int bad = s != FA4_OK || r != CUDA_SUCCESS || bad_bytes || bad_out;
    printf("%s %-58s status=%d launch=%d wrong_bytes=%d wrong_lengths=%d%s%s\n", bad ? "FAIL" : "PASS", c->name, (int)s,
           (int)r, bad_bytes, bad_out, s ? " " : "", s ? fa4_last_error(ctx) : "");
    for (int t = 0; t < 2; t++) {
        cu->MemFree(dn[t]), cu->MemFree(dc[t]);
        free(nw[t]), free(cache[t]), free(want[t]), free(got[t]);
    }
    if (d_lens) cu->MemFree(d_lens);
    if (d_tab) cu->MemFree(d_tab);
    if (d_out) cu->MemFree(d_out);
    return bad;
}

/* Refusals: each names its argument (the message starts with it), before anything is launched. */
static int refusals(const Cu *cu, fa4_ctx *ctx)
{
    CUdeviceptr k, v, kc, vc, lens;
    cu->MemAlloc(&k, 1 << 16), cu->MemAlloc(&v, 1 << 16), cu->MemAlloc(&kc, 1 << 20), cu->MemAlloc(&vc, 1 << 20);
    cu->MemAlloc(&lens, 64);
    fa4_kv_append_args ok = FA4_KV_APPEND_ARGS_INIT;
    ok.k = (void *)k, ok.v = (void *)v, ok.k_cache = (void *)kc, ok.v_cache = (void *)vc;
    ok.batch = 2, ok.s_new = 1, ok.heads_kv = 2, ok.k_depth = ok.v_depth = 64;
    ok.cache_batch = 4, ok.cache_rows = 64, ok.cache_seqlens = (const int32_t *)lens;
    struct { const char *field; fa4_kv_append_args a; } t[16];
    int n = 0;
#define REFUSE(f, ...) do { t[n].field = f; t[n].a = ok; { fa4_kv_append_args *A = &t[n].a; __VA_ARGS__; } n++; } while (0)
    REFUSE("k_depth", A->k_depth = 72);
    REFUSE("s_new", A->s_new = 0);
    REFUSE("cache_batch", A->cache_batch = 1);                         /* < batch, no cache_batch_idx */
    REFUSE("cache_seqlen", A->cache_seqlens = NULL, A->cache_seqlen = 64); /* 64 + 1 > 64 rows */
    REFUSE("cache_seqlen", A->cache_seqlen = 3);                       /* beside cache_seqlens */
    REFUSE("seqlens_out", A->seqlens_out = (int32_t *)(lens + 4));      /* overlaps cache_seqlens */
    REFUSE("k_cache_stride[1]", A->k_cache_stride[0] = 64 * 2 * 64, A->k_cache_stride[1] = 8, A->k_cache_stride[2] = 64);
    REFUSE("v_stride[2]", A->v_stride[2] = 60);                        /* 120 bytes: not whole 16-byte chunks */
    REFUSE("k_cache", A->k_cache = (void *)(kc + 8));                  /* not 16-byte aligned */
    REFUSE("page_size", A->page_size = 16);                            /* paged words on a dense cache */
    REFUSE("k_cache", A->cache_rows = 1 << 12);                        /* 4 x 4096 x 2 x 64 x 2 B > 1 MiB allocation */
    REFUSE("max_pages", A->cache_batch = A->cache_rows = 0, A->block_table = (const int32_t *)lens, A->page_size = 16,
           A->num_pages = 4, A->max_pages = 1 << 27);
#undef REFUSE
    int fail = 0;
    for (int i = 0; i < n; i++) {
        fa4_status s = fa4_kv_append(ctx, &t[i].a, NULL);
        const char *m = fa4_last_error(ctx);
        int good = s == FA4_ERR_INVALID_ARGUMENT && !strncmp(m, t[i].field, strlen(t[i].field));
        printf("%s refused: %-18s %s\n", good ? "PASS" : "FAIL", t[i].field, s ? m : "(accepted)");
        fail += !good;
    }
    cu->MemFree(k), cu->MemFree(v), cu->MemFree(kc), cu->MemFree(vc), cu->MemFree(lens);
    return fail;
}

int main(void)
{
    Cu cu;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "test_kv_append: dlopen(libcuda.so.1): %s\n", dlerror()); return 2; }
    const struct { const char *name; void *slot; } syms[] = {
        {"cuMemAlloc_v2", &cu.MemAlloc}, {"cuMemFree_v2", &cu.MemFree}, {"cuMemcpyHtoD_v2", &cu.HtoD},
        {"cuMemcpyDtoH_v2", &cu.DtoH}, {"cuCtxSynchronize", &cu.Sync}};
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *p = dlsym(lib, syms[i].name);
        if (!p) { fprintf(stderr, "test_kv_append: libcuda.so.1 has no %s\n", syms[i].name); return 2; }
        memcpy(syms[i].slot, &p, sizeof p);
    }
    const char *cc = getenv("FA4SIM_CC");
    fa4_options opt = FA4_OPTIONS_INIT;
    opt.target = cc && !strcmp(cc, "100") ? FA4_TARGET_SM100A : cc && !strcmp(cc, "90") ? FA4_TARGET_SM90A
                                                                                        : FA4_TARGET_AUTO;
    fa4_ctx *ctx;
    if (fa4_create(&ctx, &opt)) { fprintf(stderr, "test_kv_append: %s\n", fa4_last_error(NULL)); return 2; }
    /* the first call opens the driver and makes its context current (the allocations below need it) */
    fa4_kv_append_args probe = FA4_KV_APPEND_ARGS_INIT;
    probe.k = probe.v = probe.k_cache = probe.v_cache = (void *)16;
    probe.batch = probe.s_new = probe.heads_kv = 1, probe.k_depth = probe.v_depth = 16;
    probe.cache_batch = probe.cache_rows = 1;
    fa4_status ps = fa4_kv_append(ctx, &probe, NULL); /* refused by the driver's word on k: host memory */
    if (ps != FA4_ERR_INVALID_ARGUMENT) {
        fprintf(stderr, "test_kv_append: the driver: %s\n", fa4_last_error(ctx));
        return 2;
    }
    static const int32_t lens_a[] = {0, 17, 38}, lens_bad[] = {-1, 62, INT32_MAX - 1, -5, 30};
    static const int32_t idx_perm[] = {2, 0, 3}, idx_bad[] = {1, -1, 0, 7, 3};
    static const int32_t lens_pg[] = {13, 8, 8, 17}, lens_pg_bad[] = {-2, 18, INT32_MAX, 12};
    /* page 5 rows, 4 pages a sequence, 9 in the pool; -1 and 9 lie outside it */
    static const int32_t tab[] = {8, 2, 5, 1, 0, 3, -1, 4, 6, 7, 9, 2, 1, 4, 3, 0};
    static const int32_t lens_pg16[] = {15, 33};
    static const int32_t tab16[] = {3, 0, 2, 1, 5, 4};
    const Case cases[] = {
        {"dense bf16 d128, batch 3 of a 4-row cache, lengths out", FA4_BF16, 3, 2, 2, 128, 128, 0, 4, 40, 0, 0, 0, 0, 0,
         0, -1, lens_a, NULL, 1},
        {"dense fp16 d64, cache_batch_idx permuted, host length 5", FA4_FP16, 3, 3, 4, 64, 64, 0, 4, 24, 0, 0, 0, 8, 16,
         1, 5, NULL, idx_perm, 1},
        {"dense bf16 k d64 / v d128, padded strides, s_new 1 (decode)", FA4_BF16, 3, 1, 3, 64, 128, 0, 3, 48, 0, 0, 0,
         24, 8, 0, -1, lens_a, NULL, 1},
        {"dense bad: lengths -1, past the end, near 2^31; rows -1, 7", FA4_BF16, 5, 3, 2, 64, 64, 0, 4, 64, 0, 0, 0, 0,
         0, 1, -1, lens_bad, idx_bad, 1},
        {"dense e4m3 qk 576 / ov 512 (several copy steps)", FA4_E4M3, 3, 2, 1, 576, 512, 0, 3, 40, 0, 0, 0, 16, 32, 0,
         -1, lens_a, NULL, 0},
        {"dense bf16 qk 576 / ov 512 (8 copy steps)", FA4_BF16, 3, 1, 1, 576, 512, 0, 3, 40, 0, 0, 0, 0, 0, 0, -1,
         lens_a, NULL, 1},
        {"paged bf16 d128, page 5 (no power of two), across pages", FA4_BF16, 4, 3, 2, 128, 128, 1, 0, 0, 5, 4, 9, 0, 0,
         0, -1, lens_pg, tab, 1},
        {"paged bad: lengths -2, past max_pages, 2^31 - 1; entries -1, 9", FA4_BF16, 4, 4, 2, 64, 64, 1, 0, 0, 5, 4, 9,
         8, 8, 0, -1, lens_pg_bad, tab, 1},
        {"paged fp16 d256, page 16, chunked prefill of 5 tokens", FA4_FP16, 2, 5, 2, 256, 256, 1, 0, 0, 16, 3, 6, 0, 0,
         0, -1, lens_pg16, tab16, 1},
        {"paged bf16 d64, page 16, host length 16 for all", FA4_BF16, 2, 2, 1, 64, 64, 1, 0, 0, 16, 3, 6, 0, 0, 0, 16,
         NULL, tab16, 0},
    };
    int fail = 0, pass = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int f = run_case(&cu, ctx, &cases[i]);
        fail += f, pass += !f;
    }
    int rf = refusals(&cu, ctx);
    fail += rf, pass += 12 - rf;
    fa4_destroy(ctx);
    printf("test_kv_append: %d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}
