/* harness.c - see harness.h. */
#include "harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int errf(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

const char *cu_error(const Cu *cu, CUresult r)
{
    const char *s = NULL;
    if (cu->GetErrorString && cu->GetErrorString(r, &s) == CUDA_SUCCESS && s) return s;
    return "unknown CUDA error";
}

static int cu_resolve(void *lib, const char *name, void *slot, char *err, size_t n)
{
    void *p = dlsym(lib, name);
    if (!p) return errf(err, n, "libcuda.so.1 has no %s", name);
    memcpy(slot, &p, sizeof p); /* POSIX: data and function pointers convert */
    return 0;
}

int cu_open(Cu *cu, char *err, size_t n)
{
    memset(cu, 0, sizeof *cu);
    cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu->lib) return errf(err, n, "dlopen(libcuda.so.1): %s", dlerror());
    const struct { const char *name; void *slot; } syms[] = {
        {"cuGetErrorString", &cu->GetErrorString}, {"cuInit", &cu->Init}, {"cuDeviceGet", &cu->DeviceGet},
        {"cuDevicePrimaryCtxRetain", &cu->DevicePrimaryCtxRetain}, {"cuCtxSetCurrent", &cu->CtxSetCurrent},
        {"cuMemAlloc_v2", &cu->MemAlloc}, {"cuMemFree_v2", &cu->MemFree}, {"cuMemcpyHtoD_v2", &cu->MemcpyHtoD},
        {"cuMemcpyDtoH_v2", &cu->MemcpyDtoH}, {"cuMemsetD8_v2", &cu->MemsetD8},
        {"cuCtxSynchronize", &cu->CtxSynchronize},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (cu_resolve(cu->lib, syms[i].name, syms[i].slot, err, n)) return -1;
    CUresult r;
    const char *what = "cuInit";
    if ((r = cu->Init(0)) || (what = "cuDeviceGet", r = cu->DeviceGet(&cu->dev, 0)) ||
        (what = "cuDevicePrimaryCtxRetain", r = cu->DevicePrimaryCtxRetain(&cu->ctx, cu->dev)) ||
        (what = "cuCtxSetCurrent", r = cu->CtxSetCurrent(cu->ctx)))
        return errf(err, n, "%s: %s", what, cu_error(cu, r));
    return 0;
}

int split_words(const char *s, char words[][WORD_MAX], int max, char *err, size_t n)
{
    int count = 0;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
        if (!*p || *p == '#') return count;
        if (count == max) return errf(err, n, "more than %d words", max);
        size_t o = 0;
        int quoted = 0;
        for (; *p && (quoted || (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n' && *p != '#')); p++) {
            if (*p == '"') {
                quoted = !quoted;
                continue;
            }
            if (o + 1 >= WORD_MAX) return errf(err, n, "a word is longer than %d characters", WORD_MAX - 1);
            words[count][o++] = *p;
        }
        if (quoted) return errf(err, n, "unterminated quote");
        words[count++][o] = 0;
    }
}

int word_int(const char *key, const char *v, long lo, long hi, int *out, char *err, size_t n)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi)
        return errf(err, n, "%s=%s: expected an integer in %ld..%ld", key, v, lo, hi);
    *out = (int)x;
    return 0;
}

int word_choice(const char *key, const char *v, const char *const *names, int count, int *out, char *err,
                        size_t n)
{
    for (int i = 0; i < count; i++)
        if (!strcmp(v, names[i])) return *out = i, 0;
    char list[128] = "";
    for (int i = 0; i < count; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    return errf(err, n, "%s=%s: expected one of %s", key, v, list);
}

int word_config(const char *v, char *dst, size_t cap, char *err, size_t n)
{
    if (strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_=:,. ") != strlen(v))
        return errf(err, n, "config=\"%s\": expected kernel config words like \"bn=64 stages=3\"", v);
    size_t o = 0;
    for (const char *p = v; *p; p++) {
        if (*p == ' ' && (o == 0 || dst[o - 1] == ' ')) continue;
        if (o + 1 >= cap) return errf(err, n, "config: longer than %zu characters", cap - 1);
        dst[o++] = *p;
    }
    while (o && dst[o - 1] == ' ') o--;
    dst[o] = 0;
    return 0;
}

uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t fnv1a(const void *data, size_t n, uint64_t h)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double abs_diff(double a, double b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0.0 : INFINITY;
    if (a == b) return 0.0;
    return fabs(a - b);
}

void check(Checks *k, int ok, const char *fmt, ...)
{
    k->run++;
    if (ok) return;
    k->failed++;
    va_list ap;
    va_start(ap, fmt);
    printf("self-test FAILED: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}
